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
  SequentialLR,
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

function make(c: Sched): { opt: SGD; sched: LRScheduler | SequentialLR } {
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
    case "SequentialLR": {
      // scripts/fixtures/gen_optim.py: a linear warm-up, then cosine annealing.
      const warm = new LinearLR(opt, 0.2, 1, 4);
      const cos = new CosineAnnealingLR(opt, 6, 0.01);
      return { opt, sched: new SequentialLR(opt, [warm, cos], k.milestones) };
    }
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
    const a = make(c) as { opt: SGD; sched: LRScheduler };
    for (let i = 0; i < 4; i++) a.sched.step();
    const sd = a.sched.stateDict();
    expect(sd.last_epoch).toBe(4);
    const b = make(c) as { opt: SGD; sched: LRScheduler };
    b.sched.loadStateDict(sd);
    b.opt.loadStateDict(a.opt.stateDict());
    a.sched.step();
    b.sched.step();
    expect(b.sched.getLastLr()).toEqual(a.sched.getLastLr());
    expect(b.sched.getLastLr()[0]).toBeCloseTo(c.lrs[5][0], 12);
  });
});

describe("SequentialLR", () => {
  const c = fixture.schedulers.find((s) => s.scheduler === "SequentialLR") as Sched;

  it("resumes from its state dict (its schedulers' too)", () => {
    const a = make(c) as { opt: SGD; sched: SequentialLR };
    for (let i = 0; i < 6; i++) a.sched.step();
    const b = make(c) as { opt: SGD; sched: SequentialLR };
    b.sched.loadStateDict(a.sched.stateDict());
    b.opt.loadStateDict(a.opt.stateDict());
    for (let i = 0; i < 3; i++) {
      a.sched.step();
      b.sched.step();
      expect(b.sched.getLastLr()).toEqual(a.sched.getLastLr());
    }
    expect(a.sched.getLastLr()[0]).toBeCloseTo(c.lrs[9]![0]!, 12);
  });

  it("checks its arguments", () => {
    const opt = new SGD([tensor([0])], { lr: 0.1 });
    const other = new SGD([tensor([0])], { lr: 0.1 });
    const warm = new LinearLR(opt, 0.5, 1, 2);
    expect(() => new SequentialLR(opt, [warm, new StepLR(opt, 2)], [])).toThrow(/expects 1 milestone/);
    expect(() => new SequentialLR(opt, [warm, new StepLR(other, 2)], [2])).toThrow(/another optimizer/);
  });
});
