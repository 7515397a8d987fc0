// Plain-JS references for the tensor op tests: numpy broadcasting by index arithmetic, written
// independently of tensor/shape.ts and tensor/lower.ts, plus row-major helpers. Values are
// flat arrays of numbers in row-major order.

import { expect } from "vitest";
import { backendTier } from "../../runtime/index.ts";
import { EPS, SUM_FACTOR, ulp } from "../../runtime/tiers.ts";
import type { Tensor } from "../../tensor/index.ts";

export interface Ref {
  shape: number[];
  values: number[];
}

export function numel(shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}

/** The flat values of a tensor as numbers (bool as 0/1, int64 through Number). */
export function flat(t: Tensor): number[] {
  return Array.from(t.data() as ArrayLike<number | bigint>, (v) => Number(v));
}

export function ref(t: Tensor): Ref {
  return { shape: [...t.shape], values: flat(t) };
}

function stridesOf(shape: readonly number[]): number[] {
  const s = new Array<number>(shape.length).fill(1);
  for (let i = shape.length - 2; i >= 0; i--) s[i] = s[i + 1]! * shape[i + 1]!;
  return s;
}

/** The row-major multi-index of linear index i. */
export function unravel(i: number, shape: readonly number[]): number[] {
  const idx = new Array<number>(shape.length).fill(0);
  for (let d = shape.length - 1; d >= 0; d--) {
    const n = shape[d]!;
    idx[d] = n === 0 ? 0 : i % n;
    i = n === 0 ? 0 : Math.floor(i / n);
  }
  return idx;
}

export function broadcastShape(...shapes: readonly (readonly number[])[]): number[] | null {
  const rank = Math.max(0, ...shapes.map((s) => s.length));
  const out: number[] = [];
  for (let k = 0; k < rank; k++) {
    const sizes = shapes.map((s) => s[s.length - rank + k] ?? 1);
    const big = sizes.filter((d) => d !== 1);
    if (new Set(big).size > 1) return null;
    out.push(big[0] ?? 1);
  }
  return out;
}

/** The element of `a` that broadcasting maps to `index` of the result. */
function at(a: Ref, index: readonly number[]): number {
  const off = index.length - a.shape.length;
  const st = stridesOf(a.shape);
  let lin = 0;
  a.shape.forEach((d, i) => {
    lin += (d === 1 ? 0 : index[off + i]!) * st[i]!;
  });
  return a.values[lin]!;
}

/** An elementwise op of any arity with numpy broadcasting. */
export function mapRef(args: readonly Ref[], f: (...xs: number[]) => number): Ref {
  const shape = broadcastShape(...args.map((a) => a.shape));
  if (!shape) throw new Error("reference: shapes do not broadcast");
  const values: number[] = [];
  for (let i = 0; i < numel(shape); i++) {
    const idx = unravel(i, shape);
    values.push(f(...args.map((a) => at(a, idx))));
  }
  return { shape, values };
}

/**
 * Reduction over `dims` folding in row-major order of the reduced positions, `step` applied
 * per element (e.g. Math.fround(acc + x) for float32 sums).
 */
export function reduceRef(
  a: Ref,
  dims: readonly number[],
  keepdim: boolean,
  init: number,
  step: (acc: number, x: number) => number,
): Ref {
  const outShapeKeep = a.shape.map((d, i) => (dims.includes(i) ? 1 : d));
  const acc = new Array<number>(numel(outShapeKeep)).fill(init);
  const st = stridesOf(outShapeKeep);
  for (let i = 0; i < a.values.length; i++) {
    const idx = unravel(i, a.shape);
    let o = 0;
    idx.forEach((v, d) => {
      if (!dims.includes(d)) o += v * st[d]!;
    });
    acc[o] = step(acc[o]!, a.values[i]!);
  }
  const shape = keepdim ? outShapeKeep : a.shape.filter((_, i) => !dims.includes(i));
  return { shape, values: acc };
}

/** Deterministic pseudo-random values in [lo, hi) for test inputs (not the code under test). */
export function values(n: number, seed: number, lo = -4, hi = 4): number[] {
  let s = seed >>> 0 || 1;
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    out.push(lo + ((s % 10000) / 10000) * (hi - lo));
  }
  return out;
}

/** Rounds to f32 (the test inputs are built from f32 values). */
export function f32(xs: readonly number[]): number[] {
  return xs.map((x) => Math.fround(x));
}

/**
 * Sums compared in a backend's tier (runtime/tiers.ts): bit for bit on an exact backend; on a
 * tolerance one within 2·n·eps·Σ|terms| plus an ulp (`mags`: the same sums over the terms'
 * magnitudes, `n` the number of terms per sum).
 */
export function expectSums(
  backend: string,
  got: readonly number[],
  want: readonly number[],
  mags: readonly number[],
  n: number,
): void {
  if (backendTier(backend) === "exact") {
    expect(got).toEqual(want);
    return;
  }
  expect(got.length).toBe(want.length);
  got.forEach((g, i) => {
    const bound = SUM_FACTOR * Math.max(1, n) * EPS.f32 * mags[i]! + ulp(want[i]!, "f32");
    expect(Math.abs(g - want[i]!), `element ${i}: ${g} vs ${want[i]}`).toBeLessThanOrEqual(bound);
  });
}
