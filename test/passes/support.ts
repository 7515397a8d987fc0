// Shared helpers of the pass tests: running one pass on HLO text, normalizing expected text
// through the parser and printer, random inputs rich in special values (NaN, ±inf, ±0, integer
// extremes), and the bit-level comparison of evaluator results that every optimization must
// pass: same element types, same dims, and element by element Object.is (so -0 differs from +0
// and NaN equals NaN; the evaluator computes in doubles, so NaN payloads are not observable).

import { evaluate, type EvalValue } from "../../ir/evaluate.ts";
import { Literal, literal, type ScalarValue } from "../../ir/literal.ts";
import type { Module } from "../../ir/module.ts";
import { parseHlo } from "../../ir/parse.ts";
import { printHlo } from "../../ir/print.ts";
import type { ArrayShape, ElementType, Shape } from "../../ir/shape.ts";
import { ELEMENT_TYPE_INFO } from "../../ir/element_types.ts";
import type { Pass } from "../../passes/pass.ts";

/** HLO text in the printer's form, metadata left out. */
export function normalize(text: string | Module): string {
  const m = typeof text === "string" ? parseHlo(text) : text;
  return printHlo(m, { metadata: false });
}

/** Parses `text`, runs `pass` once; the module, whether it changed, and its printed form. */
export function runPass(
  text: string,
  pass: Pass,
): { module: Module; changed: boolean; out: string } {
  const module = parseHlo(text);
  const changed = pass.run(module);
  return { module, changed, out: normalize(module) };
}

/** A small deterministic PRNG (mulberry32), so failures reproduce from a seed. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// -0 and NaN appear several times: most inexact rewrites only show on them.
const FLOAT_SPECIALS = [NaN, NaN, Infinity, -Infinity, 0, -0, -0, -0, 1, -1, 0.5, -2.5, 3, 65504,
  1e-8, 1e30];
const INT_SPECIALS: Record<"s32" | "u8" | "s64", ScalarValue[]> = {
  s32: [0, 1, -1, 2, -7, 2147483647, -2147483648, 255, 16777217],
  u8: [0, 1, 2, 127, 128, 254, 255],
  s64: [0n, 1n, -1n, 3n, 2n ** 63n - 1n, -(2n ** 63n), 2n ** 53n + 1n],
};

/** One random value of `type`: about half the time a special one. */
export function randomScalar(type: ElementType, r: () => number): ScalarValue {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;
  const special = r() < 0.5;
  switch (type) {
    case "f32":
    case "f16":
    case "bf16":
    case "f64":
    case "f8e5m2":
    case "f8e4m3":
    case "f8e3m4":
    case "f8e4m3fn":
    case "f8e4m3fnuz":
    case "f8e5m2fnuz":
    case "f8e4m3b11fnuz":
      return special ? pick(FLOAT_SPECIALS) : (r() - 0.5) * 8;
    case "s32":
      return special ? pick(INT_SPECIALS.s32) : Math.floor((r() - 0.5) * 200);
    case "u8":
      return special ? pick(INT_SPECIALS.u8) : Math.floor(r() * 256);
    case "s64":
      return special ? pick(INT_SPECIALS.s64) : BigInt(Math.floor((r() - 0.5) * 1e6));
    case "pred":
      return r() < 0.5;
    case "s4":
    case "s8":
    case "s16":
    case "u4":
    case "u16":
    case "u32": {
      const { min, max } = ELEMENT_TYPE_INFO[type];
      const lo = min as number;
      const hi = max as number;
      return special ? pick([lo, hi, 0]) : lo + Math.floor(r() * (hi - lo + 1));
    }
    case "u64":
      return special ? pick([0n, 2n ** 64n - 1n, 2n ** 63n]) : BigInt(Math.floor(r() * 1e6));
    case "token":
      throw new Error("a token has no values");
    default: {
      const never: never = type;
      throw new Error(`unknown element type ${String(never)}`);
    }
  }
}

/** A random literal of `shape`; a bounded dynamic dim gets a random actual size <= its bound. */
export function randomLiteral(shape: ArrayShape, r: () => number): Literal {
  const dims = shape.dims.map((d, i) => (shape.dynamic[i] ? Math.floor(r() * (d + 1)) : d));
  const n = dims.reduce((a, b) => a * b, 1);
  return literal(shape.type, dims, Array.from({ length: n }, () => randomScalar(shape.type, r)));
}

export function randomValue(shape: Shape, r: () => number): EvalValue {
  return shape.kind === "tuple"
    ? shape.elements.map((e) => randomValue(e, r))
    : randomLiteral(shape, r);
}

/** Random arguments for the entry computation of `m`. */
export function randomArgs(m: Module, r: () => number): EvalValue[] {
  return m.entry.parameters.map((p) => randomValue(p.shape, r));
}

const show = (v: number | bigint): string => (Object.is(v, -0) ? "-0" : String(v));

/** Where two evaluator results differ (type, dims, or an element by Object.is), or null. */
export function difference(a: EvalValue, b: EvalValue, path = "result"): string | null {
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b)) return `${path}: tuple vs array`;
    if (a.length !== b.length) return `${path}: ${a.length}-tuple vs ${b.length}-tuple`;
    for (let i = 0; i < a.length; i++) {
      const d = difference(a[i]!, b[i]!, `${path}[${i}]`);
      if (d !== null) return d;
    }
    return null;
  }
  if (a.type !== b.type) return `${path}: type ${a.type} vs ${b.type}`;
  if (a.dims.join(",") !== b.dims.join(",")) {
    return `${path}: dims [${a.dims.join(",")}] vs [${b.dims.join(",")}]`;
  }
  for (let i = 0; i < a.size; i++) {
    if (!Object.is(a.data[i], b.data[i])) {
      return `${path}: element ${i} is ${show(a.data[i]!)} vs ${show(b.data[i]!)}`;
    }
  }
  return null;
}

/**
 * Evaluates both modules on `trials` random argument sets (plus `extra` ones) and returns the
 * first difference, or null when every result is bit-identical.
 */
export function compareModules(
  original: Module,
  optimized: Module,
  seed: number,
  trials = 4,
  extra: readonly EvalValue[][] = [],
): string | null {
  const r = rng(seed);
  const argSets = [...extra, ...Array.from({ length: trials }, () => randomArgs(original, r))];
  for (const args of argSets) {
    const want = evaluate(original, args);
    const got = evaluate(optimized, args);
    const d = difference(want, got);
    if (d !== null) return d;
  }
  return null;
}
