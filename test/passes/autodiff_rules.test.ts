// The derivative rules of passes/autodiff_rules.ts beyond stage 1 (elementwise math, data
// movement, max/min reductions, windows, gather/scatter, convolution), each checked against
// central differences under the reference evaluator. The IR has no f64, so the modules run in f32
// and the loss sum(ct * f(x)) and the differences are taken in JS doubles (as autodiff.test.ts).

import { describe, expect, it } from "vitest";
import { ComputationBuilder, ModuleBuilder } from "../../ir/builder.ts";
import { evaluate, type EvalValue } from "../../ir/evaluate.ts";
import { literal, type Literal } from "../../ir/literal.ts";
import type { Instruction, Module } from "../../ir/module.ts";
import { arrayShape, isFloatType, type ArrayShape } from "../../ir/shape.ts";
import { AutodiffError, vjpModule } from "../../passes/index.ts";
import { lowerOp, type Attrs, type Lowering } from "../../tensor/dispatch.ts";
import * as nnf from "../../tensor/ops/nn_functional.ts";
import { amax } from "../../tensor/ops/reduction.ts";
import { rng } from "./support.ts";

type Range = [number, number];
const f32 = (...dims: number[]): ArrayShape => arrayShape("f32", dims);
const s32 = (...dims: number[]): ArrayShape => arrayShape("s32", dims);
const size = (dims: readonly number[]): number => dims.reduce((a, d) => a * d, 1);

function leaves(v: EvalValue): Literal[] {
  return Array.isArray(v) ? v.flatMap(leaves) : [v];
}

function randomLit(s: ArrayShape, r: () => number, [lo, hi]: Range = [-1, 1]): Literal {
  return literal(s.type, s.dims, Array.from({ length: size(s.dims) }, () => lo + (hi - lo) * r()));
}

type Body = (b: ComputationBuilder, ps: Instruction[]) => Instruction;
function build(shapes: ArrayShape[], fn: Body): Module {
  const mb = new ModuleBuilder("f");
  mb.entry("main", (b) => fn(b, shapes.map((s) => b.parameter(s))));
  return mb.build();
}

/**
 * vjpModule of `m` at `args` (its float args are the wrt params) against central differences
 * (eps 1e-2) of L(x) = sum(ct * f(x)) with a random ct, element by element within
 * tol * (1 + |fd|).
 */
function checkAt(m: Module, args: Literal[], seed = 1, tol = 5e-3): Literal[] {
  const r = rng(seed + 1000);
  const outs = leaves(evaluate(m, args));
  const cts = outs.map((o) => randomLit(arrayShape(o.type, o.dims), r));
  const ctv = cts.map((c) => c.toNumbers());
  const loss = (a: Literal[]): number => {
    let acc = 0;
    leaves(evaluate(m, a)).forEach((y, k) =>
      y.toNumbers().forEach((v, j) => (acc += v * ctv[k]![j]!)),
    );
    return acc;
  };
  const at = args.flatMap((a, k) => (isFloatType(a.type) ? [k] : []));
  const grads = leaves(evaluate(vjpModule(m), [...args, ...cts]));
  expect(grads.length).toBe(at.length);
  const eps = 1e-2;
  at.forEach((a, k) => {
    const x0 = args[a]!;
    expect(grads[k]!.dims).toEqual(x0.dims);
    const base = x0.toNumbers();
    const ad = grads[k]!.toNumbers();
    for (let j = 0; j < base.length; j++) {
      const shifted = (d: number): number => {
        const p = [...base];
        p[j] = p[j]! + d;
        const moved = [...args];
        moved[a] = literal(x0.type, x0.dims, p);
        return loss(moved);
      };
      const fd = (shifted(eps) - shifted(-eps)) / (2 * eps);
      expect(Math.abs(ad[j]! - fd), `arg ${a} elem ${j}: ad ${ad[j]} fd ${fd}`).toBeLessThanOrEqual(
        tol * (1 + Math.abs(fd)),
      );
    }
  });
  return grads;
}

/** checkAt with random float args (ranges per arg, default [-1, 1]). */
function checkGrad(m: Module, shapes: ArrayShape[], ranges: Range[] = [], seed = 1, tol = 5e-3) {
  const r = rng(seed);
  return checkAt(
    m,
    shapes.map((s, k) => randomLit(s, r, ranges[k])),
    seed,
    tol,
  );
}

/** The vjp of `m` at `args` with cotangent `ct`, as plain numbers per wrt param. */
function vjpAt(m: Module, args: Literal[], ct: Literal): number[][] {
  return leaves(evaluate(vjpModule(m), [...args, ct])).map((l) => l.toNumbers());
}

const lit = (dims: number[], v: number[]) => literal("f32", dims, v);
const ints = (dims: number[], v: number[]) => literal("s32", dims, v);

describe("elementwise rules", () => {
  const unary: [string, (b: ComputationBuilder, x: Instruction) => Instruction, Range][] = [
    ["expm1", (b, x) => b.expm1(x), [-1, 1]],
    ["log1p", (b, x) => b.log1p(x), [-0.5, 1]],
    ["cbrt", (b, x) => b.cbrt(x), [0.3, 2]],
    ["cbrt (negative side)", (b, x) => b.cbrt(x), [-2, -0.3]],
    ["sine", (b, x) => b.sin(x), [-3, 3]],
    ["cosine", (b, x) => b.cos(x), [-3, 3]],
    ["tan", (b, x) => b.tan(x), [-1, 1]],
    ["erf", (b, x) => b.erf(x), [-2, 2]],
  ];
  for (const [name, f, range] of unary) {
    it(name, () => checkGrad(build([f32(2, 3)], (b, [x]) => f(b, x!)), [f32(2, 3)], [range]));
  }
  const s = [f32(2, 3), f32(2, 3)];
  it("power (both operands)", () => {
    checkGrad(build(s, (b, [x, y]) => b.power(x!, y!)), s, [[0.5, 2], [-1.5, 2]]);
  });
  it("power at x == 0: d/dy is 0 (log 0 read as 0); y == 0 gives d/dx = 0", () => {
    const m = build([f32(3), f32(3)], (b, [x, y]) => b.power(x!, y!));
    const [dx, dy] = vjpAt(m, [lit([3], [0, 0, 2]), lit([3], [2, 0, 0])], lit([3], [1, 1, 1]));
    expect(dx).toEqual([0, 0, 0]);
    expect(dy).toEqual([0, 0, Math.fround(Math.log(2))]);
  });
  it("atan2 (both operands, all quadrants)", () => {
    const m = build(s, (b, [x, y]) => b.atan2(x!, y!));
    checkGrad(m, s, [[0.3, 1], [0.3, 1]]);
    checkGrad(m, s, [[-1, -0.3], [-1, -0.3]], 2);
  });
  it("remainder: dx = g, dy = -g*trunc(x/y), both signs", () => {
    const m = build(s, (b, [x, y]) => b.remainder(x!, y!));
    // Values away from the jumps at multiples of y.
    const x = lit([2, 3], [2.3, -2.3, 5.1, -5.1, 0.4, 3.6]);
    const y = lit([2, 3], [0.9, 0.9, -1.5, -1.5, 1.1, -1.6]);
    checkAt(m, [x, y]);
  });
  it("clamp with array bounds: each region", () => {
    const m = build([f32(6), f32(6), f32(6)], (b, [lo, x, hi]) => b.clamp(lo!, x!, hi!));
    const lo = lit([6], [-0.5, -0.5, -0.5, 0.2, 0.2, 0.7]);
    const x = lit([6], [-0.9, 0.1, 0.9, 0.5, -0.3, 0.4]);
    const hi = lit([6], [0.5, 0.5, 0.5, 0.6, 0.6, 0.3]); // the last has lo > hi: result is hi
    checkAt(m, [lo, x, hi]);
  });
  it("clamp with scalar bounds sums their cotangents", () => {
    const m = build([f32(), f32(2, 3), f32()], (b, [lo, x, hi]) => b.clamp(lo!, x!, hi!));
    checkAt(m, [lit([], [-0.4]), lit([2, 3], [-0.9, -0.2, 0.1, 0.3, 0.7, 1.2]), lit([], [0.5])]);
  });
  it("clamp ties go to x", () => {
    const m = build([f32(2), f32(2), f32(2)], (b, [lo, x, hi]) => b.clamp(lo!, x!, hi!));
    const g = vjpAt(m, [lit([2], [0, 0]), lit([2], [0, 1]), lit([2], [1, 1])], lit([2], [3, 4]));
    expect(g).toEqual([[0, 0], [3, 4], [0, 0]]);
  });
});

describe("movement rules", () => {
  it("slice: contiguous, strided, and a stride that skips the tail", () => {
    const s = [f32(4, 7)];
    checkGrad(build(s, (b, [x]) => b.exp(b.slice(x!, [1, 2], [3, 6]))), s);
    checkGrad(build(s, (b, [x]) => b.exp(b.slice(x!, [0, 1], [4, 7], [3, 2]))), s, [], 2);
    checkGrad(build(s, (b, [x]) => b.exp(b.slice(x!, [1, 0], [4, 5], [2, 3]))), s, [], 3);
  });
  it("pad: edge, interior, negative edges; the padding value gets the padded positions", () => {
    const s = [f32(3, 4), f32()];
    const pads: [number, number, number][][] = [
      [[1, 2, 0], [0, 1, 0]],
      [[0, 0, 2], [1, 1, 1]],
      [[-1, 2, 1], [2, -2, 0]],
      [[-2, -1, 2], [-1, 0, 1]],
    ];
    pads.forEach((p, k) => {
      const m = build(s, (b, [x, v]) => {
        const y = b.pad(x!, v!, p);
        return b.multiply(y, y);
      });
      checkGrad(m, s, [], k + 1);
    });
  });
  it("concatenate", () => {
    const s = [f32(2, 3), f32(2, 1), f32(2, 2)];
    checkGrad(build(s, (b, [x, y, z]) => b.tanh(b.concatenate([x!, y!, z!], 1))), s);
  });
  it("reverse", () => {
    const s = [f32(2, 3, 2)];
    checkGrad(build(s, (b, [x]) => b.multiply(b.reverse(x!, [0, 2]), x!)), s);
  });
  it("dynamic-slice: in range and clamped starts; no gradient to the starts", () => {
    const s = [f32(4, 5), s32(), s32()];
    const m = build(s, (b, [x, i, j]) => b.exp(b.dynamicSlice(x!, [i!, j!], [2, 3])));
    const x = randomLit(f32(4, 5), rng(4));
    for (const [i, j] of [[1, 2], [3, 4], [-1, 0]]) checkAt(m, [x, ints([], [i!]), ints([], [j!])]);
  });
  it("dynamic-update-slice: operand and update, clamped starts", () => {
    const s = [f32(4, 5), f32(2, 3), s32(), s32()];
    const m = build(s, (b, [x, u, i, j]) => {
      const y = b.dynamicUpdateSlice(x!, b.exp(u!), [i!, j!]);
      return b.multiply(y, y);
    });
    const r = rng(5);
    const x = randomLit(f32(4, 5), r);
    const u = randomLit(f32(2, 3), r);
    for (const [i, j] of [[1, 1], [5, 9], [0, -3]]) {
      checkAt(m, [x, u, ints([], [i!]), ints([], [j!])]);
    }
  });
});

/** Distinct values 0.1 apart in random order (no ties within the FD step). */
function distinct(dims: number[], seed: number, shift = 0): Literal {
  const r = rng(seed);
  const n = size(dims);
  const v = Array.from({ length: n }, (_, k) => k);
  for (let k = n - 1; k > 0; k--) {
    const j = Math.floor(r() * (k + 1));
    [v[k], v[j]] = [v[j]!, v[k]!];
  }
  return lit(dims, v.map((k) => (k - n / 2) * 0.1 + shift));
}

describe("reduce with max/min", () => {
  const mk = (kind: "max" | "min", dims: number[]) =>
    build([f32(3, 4, 2), f32()], (b, [x, init]) =>
      b.reduce(x!, init!, dims, b.moduleBuilder!.reducer(kind, "f32")),
    );
  it("max and min over some dims vs central differences", () => {
    const x = distinct([3, 4, 2], 1);
    for (const kind of ["max", "min"] as const) {
      checkAt(mk(kind, [1]), [x, lit([], [kind === "max" ? -9 : 9])]);
      checkAt(mk(kind, [0, 2]), [x, lit([], [kind === "max" ? -9 : 9])]);
    }
  });
  it("the init gets g where it is the result", () => {
    // init 0.05 beats every element of some rows of x over dim 1.
    checkAt(mk("max", [1]), [distinct([3, 4, 2], 2, -0.6), lit([], [0.05])]);
  });
  it("ties split g evenly (as JAX and PyTorch's amax)", () => {
    const m = build([f32(2, 4), f32()], (b, [x, init]) =>
      b.reduce(x!, init!, [1], b.moduleBuilder!.reducer("max", "f32")),
    );
    const x = lit([2, 4], [1, 3, 3, 2, 5, 5, 5, 5]);
    const [gx, ginit] = vjpAt(m, [x, lit([], [-Infinity])], lit([2], [6, 8]));
    expect(gx).toEqual([0, 3, 3, 0, 2, 2, 2, 2]);
    expect(ginit).toEqual([0]);
  });
  const argmaxModule = (positions: "iota" | "param") => {
    const mb = new ModuleBuilder("f");
    const pick = mb.computation("pick", (c) => {
      const [av, ai, bv, bi] = [f32(), s32(), f32(), s32()].map((s) => c.parameter(s));
      const gt = c.compare(bv!, av!, "GT");
      return c.tuple([c.select(gt, bv!, av!), c.select(gt, bi!, ai!)]);
    });
    mb.entry("main", (b) => {
      const x = b.parameter(f32(3, 4));
      const pos = positions === "iota" ? b.iota(s32(3, 4), 1) : b.parameter(s32(3, 4));
      const r = b.reduce([x, pos], [b.scalar("f32", -Infinity), b.scalar("s32", 0)], [1], pick);
      return b.multiply(b.getTupleElement(r, 0), b.getTupleElement(r, 0));
    });
    return mb.build();
  };

  it("an argmax-style variadic reduce sends the values' gradient to the returned position", () => {
    // Distinct values, so the argmax is stable under the finite-difference steps.
    const vals = [0.1, 0.9, -0.4, 0.3, 0.7, -0.2, 0.05, 0.5, -0.8, 0.6, 0.2, 0.95];
    const grads = checkAt(argmaxModule("iota"), [literal("f32", [3, 4], vals)]);
    const g = grads[0]!.toNumbers();
    // One nonzero per row, at the row's maximum (cols 1, 0, 3).
    expect(g.map((v) => v !== 0)).toEqual([
      false, true, false, false, true, false, false, false, false, false, false, true,
    ]);
  });

  it("any other variadic reduce says why it has no derivative", () => {
    expect(() => vjpModule(argmaxModule("param"), { wrt: [0] })).toThrow(AutodiffError);
    expect(() => vjpModule(argmaxModule("param"), { wrt: [0] })).toThrow(
      /no derivative for reduce .*variadic reduce has a derivative only as an argmax/,
    );
  });
});

describe("reduce-window", () => {
  type W = { size: number; stride?: number; padLow?: number; padHigh?: number;
    windowDilation?: number; baseDilation?: number };
  const windows: [string, W[]][] = [
    ["2x2 stride 2 (pooling)", [{ size: 1 }, { size: 2, stride: 2 }, { size: 2, stride: 2 }]],
    ["3x3 stride 1 pad 1", [{ size: 1 }, { size: 3, padLow: 1, padHigh: 1 },
      { size: 3, padLow: 1, padHigh: 1 }]],
    ["stride 2 with a tail, window dilation 2", [{ size: 1 }, { size: 2, stride: 2 },
      { size: 2, windowDilation: 2, padHigh: 1 }]],
    ["base dilation, negative padding, window over dim 0",
      [{ size: 2 }, { size: 2, baseDilation: 2, padLow: -1 }, { size: 3, stride: 2, padLow: 2 }]],
  ];
  for (const [name, w] of windows) {
    for (const kind of ["add", "max", "min"] as const) {
      it(`${kind}: ${name}`, () => {
        const m = build([f32(2, 4, 5), f32()], (b, [x, init]) =>
          b.reduceWindow(x!, init!, w, b.moduleBuilder!.reducer(kind, "f32")),
        );
        const init = kind === "add" ? 0.3 : kind === "max" ? -0.05 : 0.05;
        checkAt(m, [distinct([2, 4, 5], 7), lit([], [init])]);
      });
    }
  }
  it("max: a tie goes to the first element of the window; padding never takes it", () => {
    const m = build([f32(1, 5), f32()], (b, [x, init]) =>
      b.reduceWindow(x!, init!, [{ size: 1 }, { size: 3, stride: 2, padLow: 1, padHigh: 1 }],
        b.moduleBuilder!.reducer("max", "f32")),
    );
    // Windows x[-1..1], x[1..3], x[3..5]: [pad, 2, 2], [2, 1, 2], [2, 2, pad], with init 2 (so
    // padding would tie too).
    const [gx, ginit] = vjpAt(m, [lit([1, 5], [2, 2, 1, 2, 2]), lit([], [2])],
      lit([1, 3], [1, 10, 100]));
    expect(gx).toEqual([1, 10, 0, 100, 0]);
    expect(ginit).toEqual([0]);
    // With init above every element, the init takes everything.
    const [gx2, ginit2] = vjpAt(m, [lit([1, 5], [0, 0, 1, 0, 0]), lit([], [5])],
      lit([1, 3], [1, 10, 100]));
    expect(gx2).toEqual([0, 0, 0, 0, 0]);
    expect(ginit2).toEqual([111]);
  });
});

describe("gather and scatter", () => {
  it("gather: embedding rows with repeated and out-of-range (clamped) indices", () => {
    const m = build([f32(5, 3), s32(6)], (b, [x, i]) => {
      const y = b.gather(x!, i!, { offsetDims: [1], collapsedSliceDims: [0], startIndexMap: [0],
        indexVectorDim: 1 }, [1, 3]);
      return b.multiply(y, y);
    });
    checkAt(m, [randomLit(f32(5, 3), rng(1)), ints([6], [1, 3, 1, 0, 9, -2])]);
  });
  it("gather: 2-D windows at index vectors on dim 0, clamped at the far edge", () => {
    const m = build([f32(4, 5), s32(2, 3)], (b, [x, i]) =>
      b.exp(b.gather(x!, i!, { offsetDims: [0, 2], startIndexMap: [0, 1], indexVectorDim: 0 },
        [2, 2])),
    );
    checkAt(m, [randomLit(f32(4, 5), rng(2)), ints([2, 3], [0, 3, 2, 1, 4, 1])]);
  });
  it("gather: batching dims (per-row take_along)", () => {
    const m = build([f32(3, 4), s32(3, 2)], (b, [x, i]) =>
      b.tanh(b.gather(x!, i!, { offsetDims: [], collapsedSliceDims: [1], startIndexMap: [1],
        indexVectorDim: 2, operandBatchingDims: [0], startIndicesBatchingDims: [0] }, [1, 1])),
    );
    checkAt(m, [randomLit(f32(3, 4), rng(3)), ints([3, 2], [0, 0, 3, 1, 2, 2])]);
  });
  const scatterDims = { updateWindowDims: [1], insertedWindowDims: [0],
    scatterDimsToOperandDims: [0], indexVectorDim: 1 };
  const scatterModule = (kind: "add" | "replace" | "keep") => {
    const mb = new ModuleBuilder("f");
    const combiner = kind === "add" ? mb.reducer("add", "f32")
      : mb.computation(kind, (c) => {
        const a = c.parameter(f32());
        const u = c.parameter(f32());
        return kind === "replace" ? u : a;
      });
    mb.entry("main", (b) => {
      const x = b.parameter(f32(4, 3));
      const i = b.parameter(s32(5));
      const u = b.parameter(f32(5, 3));
      const y = b.scatter(b.exp(x), i, b.multiply(u, u), scatterDims, combiner);
      return b.multiply(y, x);
    });
    return mb.build();
  };
  const args = (i: number[], seed: number) => {
    const r = rng(seed);
    return [randomLit(f32(4, 3), r), ints([5], i), randomLit(f32(5, 3), r)];
  };
  it("scatter add: repeated indices, out-of-range windows skipped", () => {
    checkAt(scatterModule("add"), args([1, 3, 1, 7, -1], 4));
  });
  it("scatter replace: unique indices, repeated ones (the last write wins), out of range", () => {
    checkAt(scatterModule("replace"), args([2, 0, 3, 1, 5], 5));
    const g = checkAt(scatterModule("replace"), args([2, 0, 2, 9, 2], 6));
    // Rows 0 and 1 of the updates lost to row 4 (or went out of range): no gradient.
    expect(g[1]!.toNumbers().slice(0, 3).every((v) => v === 0)).toBe(true);
    expect(g[1]!.toNumbers().slice(9, 12).every((v) => v === 0)).toBe(true);
  });
  it("scatter that keeps the operand: nothing flows to the updates", () => {
    const g = checkAt(scatterModule("keep"), args([2, 0, 3, 1, 1], 7));
    expect(g[1]!.toNumbers().every((v) => v === 0)).toBe(true);
  });
  it("scatter with a multiply combiner says why it has no derivative", () => {
    const mb = new ModuleBuilder("f");
    mb.entry("main", (b) => {
      const x = b.parameter(f32(4, 3));
      const u = b.parameter(f32(5, 3));
      return b.scatter(x, b.constant(ints([5], [0, 1, 2, 3, 0])), u, scatterDims,
        mb.reducer("mul", "f32"));
    });
    expect(() => vjpModule(mb.build())).toThrow(/scatter .*combiner is multiply/);
  });
});

describe("convolution", () => {
  type W = { size: number; stride?: number; padLow?: number; padHigh?: number;
    windowDilation?: number; baseDilation?: number; windowReversal?: boolean };
  const cases: [string, number[], number[], string, W[], { fgc?: number; bgc?: number }][] = [
    ["1-D: stride 2, padding 1/2, dilation 2", [2, 3, 9], [4, 3, 3], "bf0_oi0->bf0",
      [{ size: 3, stride: 2, padLow: 1, padHigh: 2, windowDilation: 2 }], {}],
    ["2-D grouped (2): stride 2x1, padding 1, dilation 1x2", [1, 4, 5, 6], [6, 2, 3, 2],
      "bf01_oi01->bf01",
      [{ size: 3, stride: 2, padLow: 1, padHigh: 1 },
        { size: 2, padLow: 1, padHigh: 1, windowDilation: 2 }], { fgc: 2 }],
    ["3-D: padding on two dims", [1, 2, 3, 4, 3], [2, 2, 2, 2, 2], "bf012_oi012->bf012",
      [{ size: 2, padLow: 1, padHigh: 1 }, { size: 2, stride: 2 },
        { size: 2, padLow: 1, padHigh: 0 }], {}],
    // As convTranspose2d lowers (stride 2, padding 2 > dilation*(k-1), output padding 1):
    // lhs dilation, negative low padding.
    ["transposed-style: lhs dilation 2, negative padding", [1, 2, 3, 3], [3, 2, 2, 3],
      "bf01_oi01->bf01",
      [{ size: 2, baseDilation: 2, padLow: -1, padHigh: 0 },
        { size: 3, baseDilation: 2, padLow: 0, padHigh: 1 }], {}],
    ["window reversal, strided", [1, 2, 5, 4], [2, 2, 2, 3], "bf01_oi01->bf01",
      [{ size: 2, stride: 2, windowReversal: true }, { size: 3, padLow: 1, padHigh: 1 }], {}],
    ["depthwise (groups 3) in b01f_01io->b01f, strided", [2, 4, 4, 3], [2, 2, 1, 3],
      "b01f_01io->b01f",
      [{ size: 2, stride: 2, padHigh: 1 }, { size: 2, padLow: 1, windowDilation: 2 }],
      { fgc: 3 }],
    ["batch_group_count 2, odd dim labels", [3, 4, 5], [2, 3, 4], "fb0_0io->0bf",
      [{ size: 2, stride: 2, padLow: 1, padHigh: 1 }], { bgc: 2 }],
  ];
  for (const [name, xd, wd, labels, window, o] of cases) {
    it(name, () => {
      const m = build([f32(...xd), f32(...wd)], (b, [x, w]) =>
        b.convolution(x!, w!, { window, dims: labels, featureGroupCount: o.fgc,
          batchGroupCount: o.bgc }),
      );
      checkGrad(m, [f32(...xd), f32(...wd)]);
    });
  }
});

describe("frontend lowerings (tensor/ops) are differentiable", () => {
  /** A module of one lowered op over f32 params. */
  const lowered = (op: { definition: unknown }, shapes: ArrayShape[], attrs: Attrs) =>
    build(shapes, (b, ps) => {
      const r = lowerOp(b, op.definition as Lowering, ps, attrs);
      return Array.isArray(r) ? r[0]! : r;
    });
  const conv = { stride: [1, 1], padding: [0, 0], dilation: [1, 1], groups: 1 };
  it("conv2d: stride, padding, dilation, groups, bias", () => {
    const s = [f32(1, 4, 6, 5), f32(4, 2, 3, 2), f32(4)];
    const m = lowered(nnf.conv2d, s, { ...conv, stride: [2, 1], padding: [1, 2], dilation: [1, 2],
      groups: 2 });
    checkGrad(m, s);
  });
  it("conv1d with padding 'same' and dilation", () => {
    const s = [f32(2, 2, 7), f32(3, 2, 3)];
    checkGrad(lowered(nnf.conv1d, s, { stride: [1], padding: "same", dilation: [2], groups: 1 }),
      s);
  });
  it("convTranspose2d: stride, padding, output padding, groups", () => {
    const s = [f32(1, 4, 3, 3), f32(4, 1, 3, 2)];
    const m = lowered(nnf.convTranspose2d, s, { ...conv, stride: [2, 2], padding: [1, 2],
      outputPadding: [1, 0], groups: 2 });
    checkGrad(m, s);
  });
  it("maxPool2d (padding, ceil mode) and avgPool2d", () => {
    const s = [f32(1, 2, 5, 5)];
    const x = distinct([1, 2, 5, 5], 9);
    checkAt(lowered(nnf.maxPool2d, s, { kernelSize: [3, 2], stride: [2, 2], padding: [1, 1],
      dilation: [1, 1], ceilMode: true }), [x]);
    checkAt(lowered(nnf.avgPool2d, s, { kernelSize: [3, 3], stride: [2, 1], padding: [1, 0],
      ceilMode: false, countIncludePad: false }), [x]);
  });
  it("amax over a dim", () => {
    checkAt(lowered(amax, [f32(3, 4)], { dim: [1], keepdim: false }), [distinct([3, 4], 10)]);
  });
  it("maxPool2dWithIndices (a variadic reduce-window) says why it has none", () => {
    const m = lowered(nnf.maxPool2dWithIndices, [f32(1, 1, 4, 4)], { kernelSize: [2, 2],
      stride: [2, 2], padding: [0, 0], dilation: [1, 1], ceilMode: false });
    expect(() => vjpModule(m)).toThrow(/reduce-window .*variadic reduce-window/);
  });
});
