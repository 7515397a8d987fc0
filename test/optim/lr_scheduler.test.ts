// LR schedulers against PyTorch 1.13's lr sequences (scripts/fixtures/gen_optim.py): two
// groups (lr 0.1 and 0.3), construction plus 14 steps. Both sides compute in float64; the
// bound is 1e-12 relative.

import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { tensor } from "../../index.ts";
import {
  CosineAnnealingLR,
  LambdaLR,
  LinearLR,
  MultiStepLR,
  SGD,
  StepLR,
  type LRScheduler,
} from "../../optim/index.ts";

interface Sched {
  scheduler: string;
  kwargs: Record<string, number | number[]>;
  lrs: number[][];
}
const fixture = JSON.parse(
  readFileSync(join(import.meta.dirname, "..", "fixtures", "optim.json"), "utf8"),
) as { schedulers: Sched[] };

function make(c: Sched): { opt: SGD; sched: LRScheduler } {
  const opt = new SGD([{ params: [tensor([0])] }, { params: [tensor([0])], lr: 0.3 }], { lr: 0.1 });
  const k = c.kwargs as Record<string, number> & { milestones: number[] };
  switch (c.scheduler) {
    case "StepLR": return { opt, sched: new StepLR(opt, k.step_size, k.gamma) };
    case "MultiStepLR": return { opt, sched: new MultiStepLR(opt, k.milestones, k.gamma) };
    case "LinearLR":
      return { opt, sched: new LinearLR(opt, k.start_factor, k.end_factor, k.total_iters) };
    case "CosineAnnealingLR": return { opt, sched: new CosineAnnealingLR(opt, k.T_max, k.eta_min) };
    case "LambdaLR":
      return { opt, sched: new LambdaLR(opt, [(e) => 0.9 ** e, (e) => 1 / (e + 1)]) };
    default: throw new Error(c.scheduler);
  }
}

describe("LR schedulers match PyTorch", () => {
  it.each(fixture.schedulers.map((c) => [c.scheduler, c] as const))("%s", (_n, c) => {
    const { opt, sched } = make(c);
    c.lrs.forEach((want, i) => {
      if (i > 0) sched.step();
      const got = sched.getLastLr();
      want.forEach((w, g) => {
        expect(Math.abs(got[g] - w), `step ${i} group ${g}`).toBeLessThanOrEqual(1e-12 * w);
        expect(opt.paramGroups[g].lr).toBe(got[g]);
      });
    });
  });

  it("stateDict / loadStateDict resume a schedule", () => {
    const c = fixture.schedulers.find((s) => s.scheduler === "CosineAnnealingLR") as Sched;
    const a = make(c);
    for (let i = 0; i < 4; i++) a.sched.step();
    const sd = a.sched.stateDict();
    expect(sd.last_epoch).toBe(4);
    const b = make(c);
    b.sched.loadStateDict(sd);
    b.opt.loadStateDict(a.opt.stateDict());
    a.sched.step();
    b.sched.step();
    expect(b.sched.getLastLr()).toEqual(a.sched.getLastLr());
    expect(b.sched.getLastLr()[0]).toBeCloseTo(c.lrs[5][0], 12);
  });
});
