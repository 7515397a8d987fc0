// A real training run against PyTorch (issue 16): ResNet tiny (models/resnet.ts) in training
// mode (BatchNorm on batch statistics) from PyTorch's initial weights, on synthetic images both
// sides compute from one integer hash (examples/training.ts imageBatch), 60 steps of AdamW
// (lr 2e-3, weight decay 0.01), each step plain eager code (classifierStep). Kiln's loss must
// equal PyTorch 1.13's (scripts/fixtures/gen_train.py) within 1e-4 relative for steps 1-50 and
// within 1% at step 60; in eager mode, under lazy() and through compile(step) (one program).
// The fixture's labels and pixel sums check that the image formula is the one PyTorch used;
// the buffers must not require grad (BatchNorm's running statistics are updated outside
// autograd, as in PyTorch: a buffer that required grad would chain every step's graph and
// activations to the next).

import { describe, expect, it } from "vitest";
import { imageBatch } from "../../examples/training.ts";
import { tinyConfig } from "../../models/resnet.ts";
import { agreement, reference, trainResNet } from "./reference.ts";

const ref = reference("resnet_tiny");

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

  for (const mode of ["eager", "lazy", "compiled"] as const) {
    const title = `${mode}: 60 steps, within 1e-4 for steps 1-50 and 1% at step 60`;
    it(title, { timeout: 180_000 }, () => {
      const run = trainResNet(mode);
      const a = agreement(run.losses, ref.losses);
      console.log(`resnet ${mode}: max rel diff steps 1-50 ${a.maxRel50.toExponential(2)}, ` +
        `at step ${a.steps} ${a.relLast.toExponential(2)}`);
      expect(a.steps).toBe(60);
      expect(a.maxRel50).toBeLessThan(1e-4);
      expect(a.relLast).toBeLessThan(1e-2);
      expect(run.buffersClean).toBe(true);
      if (mode === "compiled") expect(run.programs).toBe(1);
    });
  }
});
