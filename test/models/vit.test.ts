// The ViT against PyTorch (scripts/fixtures/gen_models.py, timm's VisionTransformer
// architecture and names): state-dict keys, strict loading, and the logits within 1e-4; plus
// the image-size check and the model-file contract.

import { describe, expect, it } from "vitest";
import createViT, { inputs, tinyConfig, VisionTransformer } from "../../models/vit.ts";
import { ops } from "../../index.ts";
import { asTensor, expectClose, getCase, loadPyTorch, modelCases, TOL } from "./fixtures.ts";

const cases = modelCases("vit");

describe("models/vit", () => {
  it("matches PyTorch", () => {
    const model = loadPyTorch("vit", new VisionTransformer(tinyConfig), tinyConfig, cases);
    const c = getCase(cases, "forward");
    expectClose(model.call(asTensor(c.args[0])), asTensor(c.out), TOL);
  });

  it("rejects images of another size (the positions are learned for one)", () => {
    expect(() => createViT().call(ops.zeros([1, 3, 24, 24]))).toThrow(
      /expected images \[B, 3, 32, 32\], got \[1, 3, 24, 24\]/,
    );
  });

  it("builds from a config name and makes inputs for a size spec", () => {
    const [x] = inputs({ batch: 3 });
    expect(x.shape).toEqual([3, 3, 32, 32]);
    expect(createViT("tiny").eval().call(x).shape).toEqual([3, 10]);
  });

  it("has ViT-B/16's parameter count in the full config", () => {
    const count = createViT("full").parameters().reduce((n, p) => n + p.numel(), 0);
    expect(count).toBe(86_567_656); // timm vit_base_patch16_224
  });
});
