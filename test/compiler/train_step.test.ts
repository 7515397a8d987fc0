// compile() of a training step (forward, backward(), an optimizer step, zeroGrad) in plain
// eager code: ONE program — the forward, the backward pass and the update — with parameters,
// optimizer state and gradients as inputs and their new values as outputs written back, the
// optimizer's numbers (lr, bias corrections) an input its host part fills on every call, so a
// changing lr or a scheduler never recompiles. A compiled step must train exactly as the eager
// one does; what it cannot hold (a tensor it does not take as input) runs in replay mode, named.

import { describe, expect, it } from "vitest";
import {
  compile,
  explain,
  manualSeed,
  nn,
  noGrad,
  optim,
  randn,
  Generator,
  type Tensor,
} from "../../index.ts";

type OptKind = "sgd" | "nesterov" | "adam" | "adamw" | "amsgrad";

function makeOpt(kind: OptKind, params: Tensor[]): optim.Optimizer {
  switch (kind) {
    case "sgd":
      return new optim.SGD(params, { lr: 0.1, momentum: 0.9, dampening: 0.1, weightDecay: 1e-3 });
    case "nesterov":
      return new optim.SGD(params, { lr: 0.05, momentum: 0.8, nesterov: true });
    case "adam":
      return new optim.Adam(params, { lr: 0.01, weightDecay: 1e-2 });
    case "adamw":
      return new optim.AdamW(params, { lr: 0.01 });
    case "amsgrad":
      return new optim.AdamW(params, { lr: 0.02, amsgrad: true });
  }
}

function setup(kind: OptKind = "sgd") {
  const g = new Generator().manualSeed(7);
  const l1 = new nn.Linear(4, 8);
  const l2 = new nn.Linear(8, 1);
  for (const p of [...l1.parameters(), ...l2.parameters()]) {
    p.impl = randn([...p.shape], { generator: g }).mul(0.5).impl;
  }
  const x = randn([16, 4], { generator: g });
  const y = x.sum(1, true).tanh();
  const opt = makeOpt(kind, [...l1.parameters(), ...l2.parameters()]);
  const step = (xb: Tensor, yb: Tensor) => {
    const out = l2.forward(l1.forward(xb).tanh());
    const loss = out.sub(yb).mul(out.sub(yb)).mean();
    loss.backward();
    opt.step();
    opt.zeroGrad();
    return loss;
  };
  return { l1, l2, x, y, step, opt };
}

/** The tolerance tier's float32 differences (fused kernels), never a different trajectory. */
function near(got: number[], want: number[], rel = 1e-5): void {
  expect(got.length).toBe(want.length);
  got.forEach((v, i) => expect(Math.abs(v - want[i]!)).toBeLessThanOrEqual(rel * (1 + Math.abs(want[i]!))));
}

const flat = (t: Tensor) => Array.from(t.data() as Float32Array);

describe("compile(trainStep) as one program", () => {
  for (const kind of ["sgd", "nesterov", "adam", "adamw", "amsgrad"] as const) {
    it(`${kind}: trains as the eager step does, one compile, every later call a cache hit`, () => {
      const eager = setup(kind);
      const want = Array.from({ length: 5 }, () => eager.step(eager.x, eager.y).item() as number);
      const comp = setup(kind);
      const cs = compile(comp.step);
      const got = Array.from({ length: 5 }, () => cs(comp.x, comp.y).item() as number);
      near(got, want);
      expect(want[4]).toBeLessThan(want[0]!);
      expect(cs.stats.mode).toBe("graph");
      expect(cs.stats.compiles).toBe(1);
      expect(cs.stats.cacheHits).toBe(4);
      near(flat(comp.l1.weight), flat(eager.l1.weight));
      near(flat(comp.l2.bias!), flat(eager.l2.bias!));
      // The optimizer's state and counts are the eager run's too (stateDict layout).
      const a = comp.opt.stateDict();
      const b = eager.opt.stateDict();
      expect(Object.keys(a.state)).toEqual(Object.keys(b.state));
      for (const [k, st] of Object.entries(b.state)) {
        for (const [key, v] of Object.entries(st)) {
          const mine = a.state[Number(k)]![key];
          if (v === null || typeof v === "number") expect(mine).toBe(v);
          else near(flat(mine as Tensor), flat(v));
        }
      }
      // zeroGrad's null grads are written back.
      expect(comp.l1.weight.grad).toBeNull();
    });
  }

  it("explain() shows one graph: forward, backward and update ops, no replay reason", () => {
    const { x, y, step } = setup("adamw");
    const info = explain(step as (a: Tensor, b: Tensor) => Tensor, x, y);
    expect(info.mode).toBe("graph");
    expect(info.replayReasons).toEqual([]);
    const text = String(info);
    expect(text).toMatch(/captureKey/);
  });

  it("a changing lr (by hand or by a scheduler inside the step) recompiles nothing", () => {
    const run = (compiled: boolean) => {
      const s = setup("sgd");
      const sched = new optim.StepLR(s.opt, 2, 0.5);
      const stepWithSchedule = (xb: Tensor, yb: Tensor) => {
        const loss = s.step(xb, yb);
        sched.step();
        return loss;
      };
      const f = compiled ? compile(stepWithSchedule) : stepWithSchedule;
      const losses: number[] = [];
      for (let i = 0; i < 6; i++) {
        if (i === 3) s.opt.paramGroups[0]!.momentum = 0.5; // a number: an input, no retrace
        losses.push(f(s.x, s.y).item() as number);
      }
      return { losses, lr: s.opt.paramGroups[0]!.lr as number, f, sched };
    };
    const eager = run(false);
    const comp = run(true);
    near(comp.losses, eager.losses);
    expect(comp.lr).toBe(eager.lr);
    expect(comp.lr).toBeCloseTo(0.1 * 0.5 ** 3, 12);
    expect(comp.sched.lastEpoch).toBe(eager.sched.lastEpoch);
    const stats = (comp.f as unknown as ReturnType<typeof compile>).stats;
    expect(stats.compiles).toBe(1);
    expect(stats.recompiles).toEqual([]);
  });

  it("clipGradNorm inside the step: still one program (no read-back), equal to eager", () => {
    const make = () => {
      const s = setup("adamw");
      const params = [...s.l1.parameters(), ...s.l2.parameters()];
      const step = (xb: Tensor, yb: Tensor) => {
        const out = s.l2.forward(s.l1.forward(xb).tanh());
        const loss = out.sub(yb).mul(out.sub(yb)).mean();
        loss.backward();
        const total = optim.clipGradNorm(params, 0.05);
        s.opt.step();
        s.opt.zeroGrad();
        return [loss, total];
      };
      return { s, step };
    };
    const e = make();
    const want = Array.from({ length: 4 }, () => e.step(e.s.x, e.s.y).map((t) => t.item() as number)).flat();
    const c = make();
    const cs = compile(c.step);
    const got = Array.from({ length: 4 }, () => cs(c.s.x, c.s.y).map((t) => t.item() as number)).flat();
    near(got, want);
    expect(want[1]).toBeGreaterThan(0.05); // the clip is active
    expect(cs.stats.mode).toBe("graph");
    expect(cs.stats.compiles).toBe(1);
  });

  it("dropout in the step: one program, eager's masks from the same seed", () => {
    const make = () => {
      const s = setup("adamw");
      const drop = new nn.Dropout(0.3);
      const step = (xb: Tensor, yb: Tensor) => {
        const out = s.l2.forward(drop.call(s.l1.forward(xb).tanh()));
        const loss = out.sub(yb).mul(out.sub(yb)).mean();
        loss.backward();
        s.opt.step();
        s.opt.zeroGrad();
        return loss;
      };
      return { s, step };
    };
    const e = make();
    manualSeed(5);
    const want = Array.from({ length: 4 }, () => e.step(e.s.x, e.s.y).item() as number);
    const c = make();
    manualSeed(5);
    const cs = compile(c.step);
    const got = Array.from({ length: 4 }, () => cs(c.s.x, c.s.y).item() as number);
    near(got, want);
    expect(cs.stats.mode).toBe("graph");
    expect(cs.stats.compiles).toBe(1);
    near(flat(c.s.l1.weight), flat(e.s.l1.weight));
  });

  it("SequentialLR (warm-up, then cosine) inside the step: its host work runs once per call", () => {
    const run = (compiled: boolean) => {
      const s = setup("adamw");
      const sched = new optim.SequentialLR(s.opt, [
        new optim.LinearLR(s.opt, 0.25, 1, 3),
        new optim.CosineAnnealingLR(s.opt, 4, 1e-3),
      ], [3]);
      const body = (xb: Tensor, yb: Tensor) => {
        const loss = s.step(xb, yb);
        sched.step();
        return loss;
      };
      const f = compiled ? compile(body) : body;
      const losses = Array.from({ length: 7 }, () => f(s.x, s.y).item() as number);
      return { losses, lrs: sched.getLastLr(), epoch: sched.lastEpoch };
    };
    const e = run(false);
    const c = run(true);
    near(c.losses, e.losses);
    expect(c.lrs).toEqual(e.lrs);
    expect(c.epoch).toBe(7);
  });

  it("a flag the update branches on retraces, named by captureKey", () => {
    const s = setup("sgd");
    const cs = compile(s.step);
    cs(s.x, s.y);
    cs(s.x, s.y);
    s.opt.paramGroups[0]!.weightDecay = 0; // the update's code changes (no decay term)
    cs(s.x, s.y);
    expect(cs.stats.compiles).toBe(2);
    expect(cs.stats.recompiles[0]!.reason).toMatch(/captureKey/);
  });

  it("zeroGrad before backward: a second program for grads left by the last call, then hits", () => {
    const make = () => {
      const s = setup("adam");
      const step = (xb: Tensor, yb: Tensor) => {
        s.opt.zeroGrad();
        const out = s.l2.forward(s.l1.forward(xb).tanh());
        const loss = out.sub(yb).mul(out.sub(yb)).mean();
        loss.backward();
        s.opt.step();
        return loss;
      };
      return { s, step };
    };
    const e = make();
    const want = Array.from({ length: 5 }, () => e.step(e.s.x, e.s.y).item() as number);
    const c = make();
    const cs = compile(c.step);
    const got = Array.from({ length: 5 }, () => cs(c.s.x, c.s.y).item() as number);
    near(got, want);
    expect(cs.stats.compiles).toBe(2);
    expect(cs.stats.recompiles[0]!.reason).toMatch(/\.grad/);
    // The grads the last call left are the eager run's.
    near(flat(c.s.l1.weight.grad!), flat(e.s.l1.weight.grad!));
  });

  it("gradient accumulation: two backward() calls per step add into .grad as eager does", () => {
    const make = () => {
      const s = setup("sgd");
      const step = (xb: Tensor, yb: Tensor) => {
        const half = (a: Tensor, b: Tensor) => {
          const out = s.l2.forward(s.l1.forward(a).tanh());
          return out.sub(b).mul(out.sub(b)).mean();
        };
        const l1 = half(xb.narrow(0, 0, 8), yb.narrow(0, 0, 8));
        l1.backward();
        const l2 = half(xb.narrow(0, 8, 8), yb.narrow(0, 8, 8));
        l2.backward();
        s.opt.step();
        s.opt.zeroGrad();
        return l1.add(l2);
      };
      return { s, step };
    };
    const e = make();
    const want = Array.from({ length: 4 }, () => e.step(e.s.x, e.s.y).item() as number);
    const c = make();
    const cs = compile(c.step);
    const got = Array.from({ length: 4 }, () => cs(c.s.x, c.s.y).item() as number);
    near(got, want);
    expect(cs.stats.mode).toBe("graph");
    near(flat(c.s.l1.weight), flat(e.s.l1.weight));
  });

  it("tensors in plain containers of const variables are found (a { model, opt } state)", () => {
    const make = () => {
      const s = setup("adamw");
      const state = { nets: [s.l1, s.l2], opt: s.opt };
      const step = (xb: Tensor, yb: Tensor) => {
        const out = state.nets[1]!.forward(state.nets[0]!.forward(xb).tanh());
        const loss = out.sub(yb).mul(out.sub(yb)).mean();
        loss.backward();
        state.opt.step();
        state.opt.zeroGrad();
        return loss;
      };
      return { s, step };
    };
    const e = make();
    const want = Array.from({ length: 3 }, () => e.step(e.s.x, e.s.y).item() as number);
    const c = make();
    const cs = compile(c.step);
    const got = Array.from({ length: 3 }, () => cs(c.s.x, c.s.y).item() as number);
    near(got, want);
    expect(cs.stats.mode).toBe("graph");
    expect(cs.stats.compiles).toBe(1);
  });

  it("parameters outside any module (free tensors an optimizer holds) are inputs and outputs", () => {
    const make = () => {
      const g = new Generator().manualSeed(3);
      const w = randn([5], { generator: g }).requiresGrad_();
      const target = randn([5], { generator: g });
      const opt = new optim.Adam([w], { lr: 0.1 });
      const step = () => {
        const loss = w.sub(target).pow(2).sum();
        loss.backward();
        opt.step();
        opt.zeroGrad();
        return loss;
      };
      return { w, step };
    };
    const e = make();
    const want = Array.from({ length: 6 }, () => e.step().item() as number);
    const c = make();
    const cs = compile(c.step);
    const got = Array.from({ length: 6 }, () => cs().item() as number);
    near(got, want);
    near(flat(c.w), flat(e.w));
    expect(cs.stats.compiles).toBe(1);
  });

  it("an optimizer passed as an argument works as one held by a variable", () => {
    const e = setup("adamw");
    const want = Array.from({ length: 3 }, () => e.step(e.x, e.y).item() as number);
    const c = setup("adamw");
    const train = (o: optim.Optimizer, xb: Tensor, yb: Tensor) => {
      const out = c.l2.forward(c.l1.forward(xb).tanh());
      const loss = out.sub(yb).mul(out.sub(yb)).mean();
      loss.backward();
      o.step();
      o.zeroGrad();
      return loss;
    };
    const cs = compile(train);
    const got = Array.from({ length: 3 }, () => cs(c.opt, c.x, c.y).item() as number);
    near(got, want);
    expect(cs.stats.mode).toBe("graph");
  });

  it("loadStateDict between calls: the state is read anew (a retrace), training resumes exactly", () => {
    const a = setup("adam");
    for (let i = 0; i < 3; i++) a.step(a.x, a.y);
    const c = setup("adam");
    const cs = compile(c.step);
    cs(c.x, c.y);
    for (const [src, dst] of [[a.l1, c.l1], [a.l2, c.l2]] as const) dst.loadStateDict(src.stateDict());
    c.opt.loadStateDict(a.opt.stateDict());
    const want = a.step(a.x, a.y).item() as number;
    const got = cs(c.x, c.y).item() as number;
    near([got], [want]);
    near(flat(c.l1.weight), flat(a.l1.weight));
  });

  it("a step traced with grad enabled is not reused under noGrad (grad mode is guarded)", () => {
    const s = setup("sgd");
    const cs = compile(s.step);
    cs(s.x, s.y);
    const before = flat(s.l1.weight);
    // Under noGrad the loss does not require grad: eager's error, not the traced program.
    expect(() => noGrad(() => cs(s.x, s.y))).toThrow(/requires? grad|grad_fn|backward/i);
    expect(flat(s.l1.weight)).toEqual(before);
  });

  it("a manual in-place update without backward is one program too", () => {
    const lin = new nn.Linear(2, 2);
    const before = lin.weight.toArray() as number[][];
    const decay = compile(() => {
      lin.weight.impl = lin.weight.mul(0.5).impl;
    });
    decay();
    decay();
    decay();
    const after = lin.weight.toArray() as number[][];
    after.flat().forEach((v, i) => expect(v).toBeCloseTo(before.flat()[i]! * 0.125, 6));
    expect(decay.stats.mode).toBe("graph");
    expect(decay.stats.compiles).toBe(1);
  });

  it("a .grad written by hand is an output of the program", () => {
    const lin = new nn.Linear(2, 1);
    const setGrad = () => {
      lin.bias!.grad = lin.bias!.mul(2);
    };
    const cs = compile(setGrad);
    cs();
    lin.bias!.grad = null;
    cs();
    expect(cs.stats.mode).toBe("graph");
    expect((lin.bias!.grad as unknown as Tensor).toArray()).toEqual(
      (lin.bias!.toArray() as number[]).map((v) => v * 2),
    );
  });

  it("the .grad of a tensor the program does not take as input: replay mode, named", () => {
    const g = new Generator().manualSeed(5);
    // Held by a class instance (not a module, an optimizer or a plain container): not found.
    const holder = new (class Box {
      w = randn([3], { generator: g }).requiresGrad_();
    })();
    const f = () => {
      const loss = holder.w.mul(holder.w).sum();
      loss.backward();
      return loss;
    };
    const info = explain(f);
    expect(info.mode).toBe("replay");
    expect(info.replayReasons.map((r: { reason: string }) => r.reason).join("\n")).toMatch(
      /sets the \.grad of a tensor the program does not take as input/,
    );
  });
});
