// The zoo's catalogue (models/index.ts) and the model-file contract every model keeps: the
// factory builds the tiny config by name, `inputs` accepts exactly the listed size keys and
// rejects others, and one forward call on those inputs gives finite outputs.

import { describe, expect, it } from "vitest";
import { getModel, type ModelName, zoo } from "../../models/index.ts";
import { nn, ops, Tensor } from "../../index.ts";

function tensorsIn(value: unknown): Tensor[] {
  if (value instanceof Tensor) return [value];
  if (Array.isArray(value)) return value.flatMap(tensorsIn);
  if (value !== null && typeof value === "object") return Object.values(value).flatMap(tensorsIn);
  return [];
}

describe("models/index", () => {
  for (const name of Object.keys(zoo) as ModelName[]) {
    it(`${name}: factory, size spec and one forward call`, () => {
      const entry = getModel(name);
      expect(entry.name).toBe(name);
      const model = entry.create("tiny").eval();
      expect(model).toBeInstanceOf(nn.Module);
      const spec = Object.fromEntries(entry.sizes.map((k) => [k, k === "batch" ? 1 : 8]));
      const args = entry.inputs(spec, "tiny");
      expect(tensorsIn(args)[0]!.size(0)).toBe(1);
      const out = tensorsIn((model as unknown as nn.Forward & nn.Module).call(...(args as [])));
      expect(out.length).toBeGreaterThan(0);
      for (const t of out) expect(ops.isfinite(t).all().item()).toBe(1);
      expect(() => entry.inputs({ width: 3 })).toThrow(`${name} inputs: unknown size 'width'`);
      expect(() => entry.inputs({ batch: 0 })).toThrow(/'batch' must be a positive integer/);
    });
  }

  it("names the models when asked for an unknown one", () => {
    expect(() => getModel("llama")).toThrow(
      "unknown model 'llama' (models: mlp, resnet, bert, gpt2, vit, whisper)",
    );
  });
});
