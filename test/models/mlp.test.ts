// The MLP against PyTorch (scripts/fixtures/gen_models.py): state-dict keys, strict loading of
// PyTorch's weights, and the forward output within 1e-4; plus the model-file contract.

import { describe, expect, it } from "vitest";
import createMLP, { configs, inputs, MLP, tinyConfig } from "../../models/mlp.ts";
import { asTensor, expectClose, getCase, loadPyTorch, modelCases, TOL } from "./fixtures.ts";

const cases = modelCases("mlp");

describe("models/mlp", () => {
  it("matches PyTorch", () => {
    const model = loadPyTorch("mlp", new MLP(tinyConfig), tinyConfig, cases);
    const c = getCase(cases, "forward");
    expectClose(model.call(asTensor(c.args[0])), asTensor(c.out), TOL);
  });

  it("builds from a config name and makes inputs for a size spec", () => {
    const model = createMLP("tiny");
    const [x] = inputs({ batch: 5 });
    expect(x.shape).toEqual([5, 16]);
    expect(model.call(x).shape).toEqual([5, 10]);
    expect(createMLP("full").config).toBe(configs.full);
    expect(() => inputs({ seq: 3 })).toThrow(/mlp inputs: unknown size 'seq'/);
    expect(() => createMLP("huge" as "tiny")).toThrow(/unknown config 'huge'/);
  });
});
