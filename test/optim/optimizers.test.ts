// SGD / Adam / AdamW against PyTorch 1.13 trajectories (scripts/fixtures/gen_optim.py): two
// params under fixed synthetic grads for 10 steps, one of them without a grad on step 4. Kiln
// runs in float32 as PyTorch did; the bound is |kiln - torch| <= 1e-5 + 1e-5·|torch| per element
// (float32 rounding of ~10 chained updates, divisions included for Adam). Gradient clipping is
// checked here too (on grads with closed-form norms), sharing this file's eager warm-up.

import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { opCacheStats, tensor, type Tensor } from "../../index.ts";
import {
  Adam,
  AdamW,
  clipGradNorm,
  clipGradValue,
  Optimizer,
  SGD,
  type ParamGroupInput,
} from "../../optim/index.ts";

interface Case {
  name: string;
  optimizer: "SGD" | "Adam" | "AdamW";
  options: Record<string, number | boolean | number[]>;
  groups: boolean;
  init: number[][];
  shapes: number[][];
  grads: (number[] | null)[][];
  params: number[][][];
  stateSteps: Record<string, number>;
  stateKeys: Record<string, string[]>;
}

const fixture = JSON.parse(
  readFileSync(join(import.meta.dirname, "..", "fixtures", "optim.json"), "utf8"),
) as { optimizers: Case[] };

const make = (values: number[], shape: number[]): Tensor =>
  tensor(values, { dtype: "float32" }).reshape(shape);

function build(c: Case, params: Tensor[]): Optimizer {
  const opts = { ...c.options } as Record<string, unknown>;
  const input: Tensor[] | ParamGroupInput[] = c.groups
    ? [{ params: [params[0]] }, { params: [params[1]], lr: (opts.lr as number) * 0.5 }]
    : params;
  if (c.optimizer === "SGD") return new SGD(input, opts);
  if (c.optimizer === "Adam") return new Adam(input, opts);
  return new AdamW(input, opts);
}

function expectClose(got: Tensor, want: number[], where: string): void {
  const data = Array.from(got.data() as Float32Array);
  expect(data.length, where).toBe(want.length);
  data.forEach((v, i) => {
    const bound = 1e-5 + 1e-5 * Math.abs(want[i]);
    if (!(Math.abs(v - want[i]) <= bound)) {
      expect.fail(`${where}[${i}]: kiln ${v}, torch ${want[i]} (bound ${bound})`);
    }
  });
}

describe("optimizers match PyTorch trajectories", () => {
  it.each(fixture.optimizers.map((c) => [c.name, c] as const))("%s", (_n, c) => {
    const params = c.init.map((v, i) => make(v, c.shapes[i]));
    const opt = build(c, params);
    c.grads.forEach((gs, step) => {
      params.forEach((p, i) => {
        p.grad = gs[i] === null ? null : make(gs[i] as number[], c.shapes[i]);
      });
      opt.step();
      params.forEach((p, i) => expectClose(p, c.params[step][i], `step ${step + 1} param ${i}`));
    });
    const sd = opt.stateDict();
    expect(Object.fromEntries(Object.entries(sd.state).map(([k, s]) => [k, Object.keys(s).sort()])))
      .toEqual(c.stateKeys);
    for (const [k, n] of Object.entries(c.stateSteps)) expect(sd.state[Number(k)].step).toBe(n);
    expect(sd.param_groups.map((g) => g.params)).toEqual(c.groups ? [[0], [1]] : [[0, 1]]);
  });
});

describe("optimizer mechanics", () => {
  it("a changing lr and step count compile no new eager programs", () => {
    const p = make([1, 2, 3, 4], [4]);
    const opt = new Adam([p], { lr: 0.1 });
    p.grad = make([0.5, -1, 2, 0.25], [4]);
    opt.step(); // warms every program one step runs
    const before = opCacheStats().misses;
    // Integral values included: a plain JS 1 or 0 would be an int64 scalar, another program.
    for (const lr of [0.05, 1, 0, 0.025, 2]) {
      opt.paramGroups[0].lr = lr;
      opt.step();
    }
    expect(opCacheStats().misses).toBe(before);
    const sgd = new SGD([p], { lr: 0.1, momentum: 0.9, weightDecay: 0.5 });
    sgd.step();
    const warm = opCacheStats().misses;
    for (const [lr, momentum] of [[1, 0.5], [0, 0.25], [0.5, 0.9]] as const) {
      Object.assign(sgd.paramGroups[0], { lr, momentum, weightDecay: 1 });
      sgd.step();
    }
    expect(opCacheStats().misses).toBe(warm);
  });

  it("loadStateDict resumes a run exactly; zeroGrad unsets grads", () => {
    const g = [0.3, -0.7, 1.1];
    const a = make([1, 2, 3], [3]);
    const optA = new SGD([a], { lr: 0.1, momentum: 0.9 });
    a.grad = make(g, [3]);
    optA.step();
    const b = make(Array.from(a.data() as Float32Array), [3]);
    const optB = new SGD([b], { lr: 0.5 });
    optB.loadStateDict(optA.stateDict());
    expect(optB.paramGroups[0].momentum).toBe(0.9);
    expect(optB.paramGroups[0].lr).toBe(0.1);
    b.grad = make(g, [3]);
    optA.step();
    optB.step();
    expect(Array.from(b.data() as Float32Array)).toEqual(Array.from(a.data() as Float32Array));
    optB.zeroGrad();
    expect(b.grad).toBeNull();
    expect(() => new SGD([a], { lr: 0.1, nesterov: true })).toThrow(/Nesterov/);
  });
});

const withGrad = (g: number[]): Tensor => {
  const p = tensor(g.map(() => 0));
  p.grad = tensor(g);
  return p;
};
const values = (t: Tensor | null) => Array.from((t as Tensor).data() as Float32Array);

describe("gradient clipping", () => {
  it("clipGradNorm returns the 2-norm over all grads and scales them to maxNorm", () => {
    const a = withGrad([3, 0]);
    const b = withGrad([0, -4]);
    const none = tensor([1]); // grad null: ignored
    expect(clipGradNorm([a, b, none], 1).item()).toBeCloseTo(5, 6);
    const s = 1 / (5 + 1e-6);
    values(a.grad).forEach((v, i) => expect(v).toBeCloseTo([3 * s, 0][i], 6));
    values(b.grad).forEach((v, i) => expect(v).toBeCloseTo([0, -4 * s][i], 6));
    expect(none.grad).toBeNull();
  });

  it("leaves grads alone under maxNorm; inf and 1 norms", () => {
    const a = withGrad([1, -2, 0.5]);
    expect(clipGradNorm([a], 10, Infinity).item()).toBe(2);
    expect(values(a.grad)).toEqual([1, -2, 0.5]);
    expect(clipGradNorm([a], 1, Infinity).item()).toBe(2);
    values(a.grad).forEach((v, i) => expect(v).toBeCloseTo([0.5, -1, 0.25][i], 6));
    expect(clipGradNorm([withGrad([1, -2, 0.5])], 100, 1).item()).toBeCloseTo(3.5, 6);
  });

  it("clipGradValue clamps elementwise", () => {
    const a = withGrad([3, -0.2, -7]);
    clipGradValue([a], 1);
    expect(values(a.grad)).toEqual([1, Math.fround(-0.2), -1]);
  });
});
