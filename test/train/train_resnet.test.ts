// A real training run against PyTorch (issue 16): ResNet tiny (models/resnet.ts) in training
// mode (BatchNorm on batch statistics) from PyTorch's initial weights, on synthetic images both
// sides compute from one integer hash (examples/training.ts imageBatch), 60 steps of AdamW
// (lr 2e-3, weight decay 0.01), each step plain eager code (classifierStep). Kiln's loss must
// equal PyTorch 1.13's (scripts/fixtures/gen_train.py) within 1e-4 relative for steps 1-50 and
// within 1% at step 60; in eager mode and under lazy(). The fixture's labels and pixel sums
// check that the image formula is the one PyTorch used; the buffers must not require grad.

import { describe, expect, it } from "vitest";
import { AdamW } from "../../optim/index.ts";
import { loadSafetensors } from "../../index.ts";
import { ResNet, tinyConfig } from "../../models/resnet.ts";
import { classifierStep, imageBatch, lazyStep } from "../../examples/training.ts";
import { agreement, initWeights, reference } from "./reference.ts";

const ref = reference("resnet_tiny");

function train(mode: "eager" | "lazy"): number[] {
  const model = new ResNet(tinyConfig);
  model.loadStateDict(loadSafetensors(initWeights("resnet_tiny")));
  model.train();
  const opt = new AdamW(model.parameters(), {
    lr: ref.optimizer.lr,
    weightDecay: ref.optimizer.weightDecay,
  });
  const losses: number[] = [];
  for (let s = 0; s < ref.steps; s++) {
    const { x, y } = imageBatch(s);
    const step = () => classifierStep(model, opt, x, y);
    losses.push(mode === "lazy" ? lazyStep(model, opt, step) : (step().item() as number));
  }
  // BatchNorm's running statistics are updated outside autograd, as in PyTorch: a buffer
  // that required grad would chain every step's graph (and activations) to the next.
  for (const b of model.buffers()) expect(b.requiresGrad).toBe(false);
  return losses;
}

describe("training ResNet tiny matches PyTorch step by step", () => {
  it("uses PyTorch's config, optimizer and images", () => {
    expect(ref.config).toEqual(tinyConfig);
    expect(ref.optimizer.name).toBe("AdamW");
    expect(ref.steps).toBe(60);
    for (let s = 0; s < ref.steps; s++) {
      const { labels, pixelSum } = imageBatch(s);
      expect(labels).toEqual(ref.labels![s]);
      expect(pixelSum).toBe(ref.pixelSums![s]);
    }
    expect(ref.losses[ref.steps - 1]).toBeLessThan(ref.losses[0]! / 2); // it learns
  });

  for (const mode of ["eager", "lazy"] as const) {
    const title = `${mode}: 60 steps, within 1e-4 for steps 1-50 and 1% at step 60`;
    it(title, { timeout: 180_000 }, () => {
      const a = agreement(train(mode), ref.losses);
      console.log(`resnet ${mode}: max rel diff steps 1-50 ${a.maxRel50.toExponential(2)}, ` +
        `at step ${a.steps} ${a.relLast.toExponential(2)}`);
      expect(a.steps).toBe(60);
      expect(a.maxRel50).toBeLessThan(1e-4);
      expect(a.relLast).toBeLessThan(1e-2);
    });
  }
});
