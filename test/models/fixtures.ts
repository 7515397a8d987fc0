// Shared by the model-zoo tests: a model's PyTorch fixture (scripts/fixtures/gen_models.py →
// test/fixtures/models.json and test/fixtures/models/<name>.safetensors), loading its weights
// strictly, and the checks every model gets — the tiny config still equals the one PyTorch
// used, and the state-dict keys equal PyTorch's, in PyTorch's order.

import { join } from "node:path";
import { expect } from "vitest";
import { type FixtureCase, type FixtureValue, loadFixtures } from "../fixtures/load.ts";
import { loadSafetensors, type nn, Tensor } from "../../index.ts";

export { expectClose } from "../fixtures/load.ts";

/** Output tolerance: max abs error 1e-4 in float32 (the zoo's contract with PyTorch). */
export const TOL = { atol: 1e-4, rtol: 0 };

const all = loadFixtures("models");

/** The cases of one model, by the part of the name after `<model>/`. */
export function modelCases(model: string): Map<string, FixtureCase> {
  const out = new Map<string, FixtureCase>();
  for (const c of all) if (c.op === model) out.set(c.name.slice(model.length + 1), c);
  if (out.size === 0) throw new Error(`no fixture cases for model '${model}'`);
  return out;
}

export function getCase(cases: Map<string, FixtureCase>, name: string): FixtureCase {
  const c = cases.get(name);
  if (c === undefined) throw new Error(`no fixture case '${name}'`);
  return c;
}

/** The tensor at `value` (the fixture's value must be one). */
export function asTensor(value: FixtureValue | undefined): Tensor {
  if (!(value instanceof Tensor)) throw new Error(`fixture value is not a tensor`);
  return value;
}

/** The tensors of a list value (the fixture's value must be a list of tensors). */
export function asTensors(value: FixtureValue | undefined): Tensor[] {
  if (!Array.isArray(value)) throw new Error(`fixture value is not a list`);
  return value.map(asTensor);
}

/** PyTorch's weights for `model`, as a state dict. */
export function weights(model: string): Record<string, Tensor> {
  const dir = join(import.meta.dirname, "..", "fixtures", "models");
  return loadSafetensors(join(dir, `${model}.safetensors`));
}

/**
 * Checks the config/keys case (the tiny config equals PyTorch's; the state-dict keys equal
 * PyTorch's in order), loads PyTorch's weights strictly and switches to eval mode.
 */
export function loadPyTorch<M extends nn.Module>(
  name: string,
  model: M,
  config: object,
  cases: Map<string, FixtureCase>,
): M {
  const c = getCase(cases, "config");
  expect(JSON.parse(JSON.stringify(config))).toEqual(c.kwargs);
  expect(Object.keys(model.stateDict())).toEqual(c.out);
  const result = model.loadStateDict(weights(name));
  expect(result).toEqual({ missingKeys: [], unexpectedKeys: [] });
  return model.eval();
}
