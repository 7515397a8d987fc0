// A real training run against PyTorch (issue 16): GPT-2 tiny (no dropout) from PyTorch's
// initial weights, on the corpus' batches PyTorch used, 200 steps of AdamW (lr 1e-3, weight
// decay 0.01), each step plain eager code (examples/training.ts lmStep: forward,
// crossEntropy, backward, opt.step(), opt.zeroGrad()). Kiln's loss at every step must equal
// PyTorch 1.13's (scripts/fixtures/gen_train.py) within 1e-4 relative for steps 1-50 and within
// 1% at step 200; in eager mode on the default backend, with each step under lazy(), and
// through compile(step) (one program for the whole step, compiled once).

import { describe, expect, it } from "vitest";
import { trainConfig } from "../../examples/training.ts";
import { agreement, reference, trainGPT2 } from "./reference.ts";

const ref = reference("gpt2_tiny");

describe("training GPT-2 tiny matches PyTorch step by step", () => {
  it("uses PyTorch's config and optimizer", () => {
    expect(ref.config).toEqual(trainConfig);
    expect(ref.optimizer.name).toBe("AdamW");
    expect(ref.steps).toBe(200);
    expect(ref.losses[0]).toBeGreaterThan(ref.losses[ref.steps - 1]! + 1); // it learns
  });

  for (const mode of ["eager", "lazy", "compiled"] as const) {
    const title = `${mode}: 200 steps, within 1e-4 for steps 1-50 and 1% at step 200`;
    it(title, { timeout: 180_000 }, () => {
      const run = trainGPT2(mode);
      const a = agreement(run.losses, ref.losses);
      // compile(): the whole step is one program, compiled once for the 200 steps.
      if (mode === "compiled") expect(run.programs).toBe(1);
      console.log(`gpt2 ${mode}: max rel diff steps 1-50 ${a.maxRel50.toExponential(2)}, ` +
        `at step ${a.steps} ${a.relLast.toExponential(2)}`);
      expect(a.steps).toBe(200);
      expect(a.maxRel50).toBeLessThan(1e-4);
      expect(a.relLast).toBeLessThan(1e-2);
    });
  }
});
