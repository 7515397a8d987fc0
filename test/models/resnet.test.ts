// The ResNet-18-style CNN against PyTorch (scripts/fixtures/gen_models.py, torchvision's
// architecture and names): state-dict keys (BatchNorm buffers included), strict loading, and
// the eval-mode logits within 1e-4; plus the model-file contract.

import { describe, expect, it } from "vitest";
import createResNet, { inputs, ResNet, tinyConfig } from "../../models/resnet.ts";
import { asTensor, expectClose, getCase, loadPyTorch, modelCases, TOL } from "./fixtures.ts";

const cases = modelCases("resnet");

describe("models/resnet", () => {
  it("matches PyTorch", () => {
    const model = loadPyTorch("resnet", new ResNet(tinyConfig), tinyConfig, cases);
    const c = getCase(cases, "forward");
    expectClose(model.call(asTensor(c.args[0])), asTensor(c.out), TOL);
  });

  it("builds from a config name and makes inputs for a size spec", () => {
    const model = createResNet().eval();
    const [x] = inputs({ batch: 1, size: 40 });
    expect(x.shape).toEqual([1, 3, 40, 40]);
    expect(model.call(x).shape).toEqual([1, 10]);
  });

  it("has ResNet-18's parameter count in the full config", () => {
    const model = createResNet("full");
    const count = model.parameters().reduce((n, p) => n + p.numel(), 0);
    expect(count).toBe(11_689_512); // torchvision.models.resnet18()
  });
});
