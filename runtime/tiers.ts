// The numerics contract of a backend against the reference evaluator, which defines what a
// program means. `exact` backends (interpreter, js) return bit-identical results. `tolerance`
// backends (native) may reassociate sums (SIMD lanes, threads, blocked GEMM), contract a*b+c
// to one FMA and use polynomial transcendental functions, so their results are held to a bound
// stated per element type and op class, as XLA's tests state error specs:
//
//   - integers, pred, and everything that only moves or selects values (broadcast, transpose,
//     slice, gather, sort, select, compare, convert, max/min, ...): exact;
//   - the basic float operations (add, subtract, multiply, divide, sqrt, and the rounding ops):
//     exact as one instruction (IEEE arithmetic is correctly rounded, as the evaluator's
//     double-then-round is); transcendental functions within TRANSCENDENTAL_ULPS ulps of the
//     result type;
//   - reductions, dots and convolutions with an additive combiner: within
//     c · n · eps(type) · Σ|terms| per element (n the reduction length, Σ|terms| the same
//     reduction over the terms' magnitudes), the classic bound for any summation order;
//   - programs of several operations (fusions, calls, loops): every element within
//     ulps(type) · ulp(expected) + K · eps(type) · scale, scale the largest finite magnitude of
//     the inputs and the expected result (an FMA or a reordered sum can move a cancelling
//     difference by about eps times the operands' size).
// NaN must be NaN and infinities must match in sign everywhere; -0 and +0 compare equal only
// where a sum's order decides the sign. Two deviations follow from computing in the element
// type (as every fast library does, XLA's CPU backend included): a sum whose terms' magnitudes
// add up past the type's range (Σ|terms| is not finite in the type) may overflow where the
// evaluator, accumulating in double, does not — such an element is unconstrained; and a
// convolution multiplies its padding and dilation holes as zeros, so with an infinite or NaN
// weight an element the evaluator computes from real positions only may be NaN.

import { evaluate, type EvalValue } from "../ir/evaluate.ts";
import { elementInfo } from "../ir/element_types.ts";
import { Literal } from "../ir/literal.ts";
import type { Instruction, Module } from "../ir/module.ts";
import type { ElementType } from "../ir/shape.ts";

/** Machine epsilon (spacing of 1) of each float type. */
export const EPS: Readonly<Record<"f32" | "f16" | "bf16", number>> = {
  f32: 2 ** -23,
  f16: 2 ** -10,
  bf16: 2 ** -7,
};

/**
 * Worst error of the native backend's transcendental functions against the evaluator, in f32
 * ulps of the result; half types are held to 1 ulp of their own.
 */
export const TRANSCENDENTAL_ULPS: Readonly<Record<string, number>> = {
  // kiln_math.h, measured over all 2^32 inputs (worst 1.02-1.70 ulp from the exact value),
  // plus the evaluator's own half ulp of rounding.
  exponential: 2,
  "exponential-minus-one": 2,
  log: 2,
  "log-plus-one": 2,
  tanh: 2,
  logistic: 3,
  erf: 2,
  // libm (sinf, cosf, tanf, atan2f, cbrtf) and 1/sqrtf: two roundings at most.
  sine: 2,
  cosine: 2,
  tan: 2,
  atan2: 2,
  cbrt: 2,
  rsqrt: 2,
  // pow in double, rounded once: the evaluator's own value but for double rounding.
  power: 1,
};

/** The factor c of the summation bound. */
export const SUM_FACTOR = 2;
/** The K of the multi-op bound, and its ulp term. */
export const PROGRAM_EPS_FACTOR = 64;
export const PROGRAM_ULPS = 8;

const ADDITIVE = new Set(["add", "subtract"]);

/** The spacing of float values near |x| in type t (the ulp), for x finite. */
export function ulp(x: number, t: "f32" | "f16" | "bf16"): number {
  const a = Math.abs(x);
  const minNormal = t === "f32" ? 2 ** -126 : t === "f16" ? 2 ** -14 : 2 ** -126;
  const e = a < minNormal ? Math.log2(minNormal) : Math.floor(Math.log2(a));
  return 2 ** e * EPS[t];
}

function isFloatType(t: ElementType): t is "f32" | "f16" | "bf16" {
  return elementInfo(t).float;
}

function leaves(v: EvalValue): Literal[] {
  return Array.isArray(v) ? v.flatMap(leaves) : [v];
}

/** Opcodes that run other computations: a module of one of them is a multi-op program. */
const PROGRAM_OPS = new Set(["fusion", "call", "while", "conditional", "custom-call"]);

/** The op class of a module: the root's opcode when it is one instruction over parameters. */
function rootOp(module: Module): Instruction | undefined {
  const entry = module.entry;
  const work = entry.instructions.filter(
    (i) => i.opcode !== "parameter" && i.opcode !== "constant",
  );
  const one = work.length === 1 ? work[0] : undefined;
  return one && !PROGRAM_OPS.has(one.opcode) ? one : undefined;
}

function additiveReducer(i: Instruction): boolean {
  const c = i.called[0];
  return !!c && ADDITIVE.has(c.root.opcode) && c.instructions.length === 3;
}

/** The same inputs with every float replaced by its magnitude. */
function magnitudes(inputs: readonly EvalValue[]): EvalValue[] {
  const abs = (v: EvalValue): EvalValue => {
    if (Array.isArray(v)) return v.map(abs);
    if (!isFloatType(v.type)) return v;
    const d = Float32Array.from(v.data as Float32Array, (x) => Math.abs(x));
    return new Literal(v.type, v.dims, d);
  };
  return inputs.map(abs);
}

function maxFinite(vs: readonly Literal[]): number {
  let m = 0;
  for (const v of vs) {
    if (!isFloatType(v.type)) continue;
    for (const x of v.data as Float32Array) if (Number.isFinite(x)) m = Math.max(m, Math.abs(x));
  }
  return m;
}

/** Why `got` is outside the tolerance tier's bound around `want`, or null when it is within. */
export function toleranceProblem(
  module: Module,
  inputs: readonly EvalValue[],
  got: EvalValue,
  want: EvalValue,
): string | null {
  const g = leaves(got);
  const w = leaves(want);
  if (g.length !== w.length) return `${g.length} results, expected ${w.length}`;
  const op = rootOp(module);
  const opcode = op?.opcode;
  const reduction =
    op !== undefined &&
    ((opcode === "dot" || opcode === "convolution") ||
      ((opcode === "reduce" || opcode === "reduce-window") && additiveReducer(op)));
  const unordered =
    op !== undefined && (opcode === "reduce" || opcode === "reduce-window") && !reduction;
  let mags: Literal[] | undefined;
  if (reduction) mags = leaves(evaluate(module, magnitudes(inputs)));
  const n = reduction ? reductionLength(op!) : 1;
  const scale = Math.max(maxFinite(w), maxFinite(inputs.flatMap(leaves)));
  const weights = opcode === "convolution" ? leaves(inputs[1]!) : [];
  const nonFiniteWeights = weights.some((l) =>
    (l.data as Float32Array).some((x) => !Number.isFinite(x)),
  );
  const single = op !== undefined;
  for (let k = 0; k < w.length; k++) {
    const a = g[k]!;
    const b = w[k]!;
    if (a.type !== b.type || a.dims.join() !== b.dims.join()) {
      return `result ${k} is ${a.type}[${a.dims}], expected ${b.type}[${b.dims}]`;
    }
    const t = b.type;
    const ad = a.data as ArrayLike<number | bigint>;
    const bd = b.data as ArrayLike<number | bigint>;
    for (let i = 0; i < bd.length; i++) {
      const x = ad[i]!;
      const y = bd[i]!;
      if (!isFloatType(t)) {
        if (x !== y) return `result ${k}[${i}] is ${x}, expected ${y} (${t} is exact)`;
        continue;
      }
      const xv = x as number;
      const yv = y as number;
      if (reduction && !Number.isFinite((mags![k]!.data as Float32Array)[i]!)) continue;
      if (reduction && opcode === "convolution" && Number.isNaN(xv) && nonFiniteWeights) continue;
      if (Number.isNaN(yv) || Number.isNaN(xv)) {
        if (Number.isNaN(yv) !== Number.isNaN(xv)) return `result ${k}[${i}] is ${xv}, expected ${yv}`;
        continue;
      }
      if (!Number.isFinite(yv) || !Number.isFinite(xv)) {
        if (xv !== yv) return `result ${k}[${i}] is ${xv}, expected ${yv}`;
        continue;
      }
      const err = Math.abs(xv - yv);
      let bound: number;
      if (reduction) {
        const m = Math.abs((mags![k]!.data as Float32Array)[i]!);
        bound = SUM_FACTOR * Math.max(1, n) * EPS[t] * m + ulp(yv, t);
      } else if (unordered) {
        bound = 0; // max/min/any other combiner: order-free values, -0 vs +0 aside
      } else if (single) {
        const u = TRANSCENDENTAL_ULPS[opcode!];
        if (u === undefined) bound = 0;
        else bound = (t === "f32" ? u : 1) * ulp(yv, t);
      } else {
        bound = PROGRAM_ULPS * ulp(yv, t) + PROGRAM_EPS_FACTOR * EPS[t] * scale;
      }
      // A zero's sign is an order's choice in a sum or a multi-op program, never elsewhere.
      const zeroSignFree = reduction || unordered || !single;
      const ok =
        bound === 0 ? Object.is(xv, yv) || (zeroSignFree && xv === yv) : err <= bound;
      if (!ok) {
        return (
          `result ${k}[${i}] is ${xv}, expected ${yv}: error ${err.toExponential(3)} > bound ` +
          `${bound.toExponential(3)} (${opcode ?? "program"}, ${t})`
        );
      }
    }
  }
  return null;
}

/** How many terms a reduction (or contraction) sums into one element. */
function reductionLength(i: Instruction): number {
  switch (i.opcode) {
    case "dot": {
      const lhs = i.operand(0).shape;
      if (lhs.kind !== "array") return 1;
      return i.attrs.dot!.lhsContracting.reduce((a, d) => a * lhs.dims[d]!, 1);
    }
    case "convolution": {
      const rhs = i.operand(1).shape;
      if (rhs.kind !== "array") return 1;
      const dn = i.attrs.convDims!;
      return dn.kernelSpatial.reduce((a, d) => a * rhs.dims[d]!, rhs.dims[dn.kernelInputFeature]!);
    }
    case "reduce": {
      const x = i.operand(0).shape;
      if (x.kind !== "array") return 1;
      return i.attrs.dimensions!.reduce((a, d) => a * x.dims[d]!, 1);
    }
    case "reduce-window":
      return i.attrs.window!.reduce((a, w) => a * w.size, 1);
    default:
      return 1;
  }
}
