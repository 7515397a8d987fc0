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
