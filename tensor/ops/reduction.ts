// Reductions, scans, sorting and the softmax family, each defined once by its lowering to IR:
// prod, max/min (full, or along a dim with indices), amax/amin, argmax/argmin, var/std,
// logsumexp, all/any, norm, softmax/logSoftmax, cumsum/cumprod, sort and topk (sum and mean
// live in core.ts). PyTorch semantics throughout: integral sums and products in int64, NaN
// propagating through max/min and winning argmax/argmin, ties going to the first index, NaN
// sorting as the largest value, empty reductions giving the identity (0, 1, true, false) where
// one exists and an error naming the op where none does (max, argmax). Ops that return values
// with their indices give a `ValuesIndices`: a frozen `[values, indices]` pair that also has
// `.values` and `.indices`, like PyTorch's namedtuple (`const { values, indices } = x.max(1)`
// and `const [v, i] = x.max(1)` both work). Value-and-index reductions are one variadic IR
// reduce whose reducer compares (value, index) pairs; sort and topk are one IR sort of the
// values with an iota of indices.

import type { ComputationBuilder, ReducerKind } from "../../ir/builder.ts";
import type { Computation, Instruction } from "../../ir/module.ts";
import { arrayShape, scalarShape } from "../../ir/shape.ts";
import { type AnyParam, type CallForms, p, problem } from "../args.ts";
import {
  DEFAULT_FLOAT,
  DEFAULT_INT,
  type DType,
  isFloatingDType,
  toElementType,
} from "../dtype.ts";
import {
  defineOp,
  installMethods,
  type MethodOf,
  type OpDefinition,
  type OpFunction,
} from "../dispatch.ts";
import {
  broadcastTo,
  cast,
  computeType,
  constant,
  dimsOf,
  dtypeOf,
  fail,
  filledLike,
  keptDims,
  opName,
  rankOf,
  reduce,
  reducedCount,
  reductionDims,
} from "../lower.ts";
import { normalizeDim, numelOf, shapeString } from "../shape.ts";
import { scatterAddAlong } from "./indexing.ts";
import { Tensor } from "../tensor.ts";

// ---- Values with indices --------------------------------------------------------------------

/**
 * What max/min along a dim, sort and topk return: PyTorch's namedtuple as a frozen pair that
 * destructures either way (`[values, indices]` or `{ values, indices }`).
 */
export type ValuesIndices = readonly [values: Tensor, indices: Tensor] & {
  readonly values: Tensor;
  readonly indices: Tensor;
};

export function valuesIndices(values: Tensor, indices: Tensor): ValuesIndices {
  const pair: Tensor[] = [values, indices];
  Object.defineProperties(pair, {
    values: { value: values, enumerable: false },
    indices: { value: indices, enumerable: false },
  });
  return Object.freeze(pair) as unknown as ValuesIndices;
}

function asPair(op: string, r: Tensor | Tensor[]): ValuesIndices {
  if (!Array.isArray(r) || r.length !== 2) throw new Error(`${op}: expected values and indices`);
  return valuesIndices(r[0]!, r[1]!);
}

/** An op whose lowering returns [values, indices], returning them as a ValuesIndices. */
function returningPair<Ps extends readonly AnyParam[]>(
  op: OpFunction<Ps, Tensor[]>,
): OpFunction<Ps, ValuesIndices> {
  const call = op as unknown as (...args: unknown[]) => Tensor[];
  const fn = (...args: CallForms<Ps>) => asPair(op.opName, call(...args));
  return Object.assign(fn, {
    opName: op.opName,
    signature: op.signature,
    definition: op.definition,
  });
}

// ---- Shared lowering pieces -----------------------------------------------------------------

type Extreme = "max" | "min";

function moduleBuilderOf(b: ComputationBuilder) {
  const mb = b.moduleBuilder;
  if (!mb) throw new Error(`${opName(b)}: needs a ComputationBuilder made by a ModuleBuilder`);
  return mb;
}

/** The smallest (max's identity) or largest (min's identity) value of a dtype. */
function extremeValue(t: DType, which: "lowest" | "highest"): number | bigint {
  const lo = which === "lowest";
  switch (t) {
    case "float32":
    case "float16":
    case "bfloat16":
      return lo ? -Infinity : Infinity;
    case "int32":
      return lo ? -2147483648 : 2147483647;
    case "int64":
      return lo ? -(2n ** 63n) : 2n ** 63n - 1n;
    case "uint8":
      return lo ? 0 : 255;
    case "bool":
      return lo ? 0 : 1;
    default: {
      const never: never = t;
      throw new Error(`unknown dtype ${String(never)}`);
    }
  }
}

/** Bools are ordered as uint8 (false < true) for comparisons and sorting. */
function ordered(b: ComputationBuilder, x: Instruction): Instruction {
  return dtypeOf(x) === "bool" ? cast(b, x, "uint8") : x;
}

function isNaNOf(b: ComputationBuilder, x: Instruction): Instruction {
  return b.compare(x, x, "NE");
}

function describeDims(dims: readonly number[]): string {
  return dims.length === 1 ? `dim ${dims[0]}` : `dims ${shapeString(dims)}`;
}

/**
 * max/min/argmax and friends have no identity to return for an empty reduction: PyTorch
 * refuses, and so do we, naming the op, the shape and the dim.
 */
function refuseEmpty(b: ComputationBuilder, x: Instruction, dims: readonly number[]): void {
  const shape = dimsOf(x);
  const whole = dims.length === shape.length;
  if (whole && numelOf(shape) === 0) {
    fail(
      b,
      `cannot reduce an empty tensor (shape ${shapeString(shape)}) over all its dims: there is ` +
        `no identity; pass a dim whose size is not 0`,
    );
  }
  const zero = dims.filter((d) => shape[d] === 0);
  if (zero.length > 0) {
    fail(
      b,
      `cannot reduce over ${describeDims(zero)} of size 0 (input shape ${shapeString(shape)}): ` +
        `there is no identity`,
    );
  }
}

/** A full max/min over `dims` (NaN propagates: IR maximum/minimum propagate it). */
function extremeReduce(
  b: ComputationBuilder,
  x: Instruction,
  dims: readonly number[],
  kind: Extreme,
  keepdim: boolean,
): Instruction {
  refuseEmpty(b, x, dims);
  const t = dtypeOf(x);
  const v = ordered(b, x);
  const init = extremeValue(dtypeOf(v), kind === "max" ? "lowest" : "highest");
  return cast(b, reduce(b, v, dims, kind, init, keepdim), t);
}

/**
 * The reducer of (value, index) pairs for argmax/argmin: the better value wins, NaN beats
 * every number, and equal values (or two NaNs) go to the smaller index. That is a choice by a
 * total order on pairs, so it is associative and commutative as HLO's reduce requires, and it
 * gives PyTorch's "first index" rule whatever order a backend folds in.
 */
function argReducer(b: ComputationBuilder, kind: Extreme, t: DType): Computation {
  const mb = moduleBuilderOf(b);
  const et = toElementType(t);
  const name = mb.module.uniqueComputationName(`arg${kind}_${et}`);
  return mb.computation(name, (c) => {
    const av = c.parameter(scalarShape(et));
    const ai = c.parameter(scalarShape("s64"));
    const xv = c.parameter(scalarShape(et));
    const xi = c.parameter(scalarShape("s64"));
    const earlier = c.compare(xi, ai, "LT");
    const better = c.compare(xv, av, kind === "max" ? "GT" : "LT");
    let pick = c.or(better, c.and(c.compare(xv, av, "EQ"), earlier));
    if (isFloatingDType(t)) {
      const accIsNumber = c.not(isNaNOf(c, av));
      pick = c.select(isNaNOf(c, xv), c.or(accIsNumber, earlier), c.and(accIsNumber, pick));
    }
    return c.tuple([c.select(pick, xv, av), c.select(pick, xi, ai)]);
  });
}

/**
 * Values and int64 indices of the max/min along dim `d` (undefined: over the flattened
 * input, the index counting row-major), as one variadic reduce.
 */
function argReduce(
  b: ComputationBuilder,
  x: Instruction,
  d: number | undefined,
  kind: Extreme,
  keepdim: boolean,
): [Instruction, Instruction] {
  const shape = dimsOf(x);
  const t = dtypeOf(x);
  if (shape.length === 0) return [x, constant(b, "int64", 0)];
  const all = Array.from({ length: shape.length }, (_, i) => i);
  refuseEmpty(b, x, d === undefined ? all : [d]);
  const flat = d === undefined && shape.length > 1;
  const v = ordered(b, flat ? b.reshape(x, [numelOf(shape)]) : x);
  const dim = d ?? 0;
  const vt = dtypeOf(v);
  const size = dimsOf(v)[dim]!;
  const idx = b.iota(arrayShape("s64", dimsOf(v)), dim);
  const inits = [
    constant(b, vt, extremeValue(vt, kind === "max" ? "lowest" : "highest")),
    constant(b, "int64", size),
  ];
  const r = b.reduce([v, idx], inits, [dim], argReducer(b, kind, vt));
  let values = cast(b, b.getTupleElement(r, 0), t);
  let indices = b.getTupleElement(r, 1);
  if (keepdim) {
    const kept = d === undefined ? shape.map(() => 1) : keptDims(shape, [d]);
    values = b.reshape(values, kept);
    indices = b.reshape(indices, kept);
  }
  return [values, indices];
}

/** A single optional dim normalized against the input's rank (undefined stays undefined). */
function oneDim(b: ComputationBuilder, x: Instruction, dim: number | undefined) {
  return dim === undefined ? undefined : normalizeDim(opName(b), dim, rankOf(x));
}

/** A required dim; for a zero-dim input (which accepts 0 and -1) there is nothing to scan. */
function scanDim(b: ComputationBuilder, x: Instruction, dim: number): number | undefined {
  const d = normalizeDim(opName(b), dim, rankOf(x));
  return rankOf(x) === 0 ? undefined : d;
}

function requireFloating(b: ComputationBuilder, t: DType, hint: string): void {
  if (!isFloatingDType(t)) fail(b, `expected a floating point input, got ${t}${hint}`);
}

/** `x` broadcast back over the dims a keepdim reduction `r` of it kept as 1. */
function expandBack(b: ComputationBuilder, r: Instruction, x: Instruction): Instruction {
  return broadcastTo(b, r, dimsOf(x));
}

// ---- prod -----------------------------------------------------------------------------------

export const prod = defineOp({
  name: "prod",
  signature: [
    p.tensor("input"),
    p.int("dim").optional(),
    p.bool("keepdim").default(false),
    p.dtype("dtype").optional(),
  ],
  lower(b, [x], { dim, keepdim, dtype }) {
    const inT = dtypeOf(x!);
    // Integral and bool products are int64 unless a dtype is asked for (PyTorch).
    const outT = dtype ?? (isFloatingDType(inT) ? inT : DEFAULT_INT);
    const dims = reductionDims(b, x!, dim === undefined ? undefined : [dim]);
    const acc = cast(b, cast(b, x!, outT), computeType(outT));
    return cast(b, reduce(b, acc, dims, outT === "bool" ? "and" : "mul", 1, keepdim), outT);
  },
  // PyTorch's prod_backward: d prod / d x_i is the product of the others — y / x_i when no
  // element is zero; with one zero, the zero's position gets the product of the rest and the
  // others 0; with two or more, all 0.
  vjp(b, [input], [y], [g], { dim, keepdim }) {
    if (g === undefined) return [];
    const x = input!;
    const t = dtypeOf(x);
    const ct = computeType(t);
    const xd = dimsOf(x);
    const dims = reductionDims(b, x, dim === undefined ? undefined : [dim]);
    const back = (r: Instruction) =>
      broadcastTo(b, keepdim ? r : b.reshape(r, keptDims(xd, dims)), xd);
    const xc = cast(b, x, ct);
    const isZero = b.compare(xc, filledLike(b, xc, 0), "EQ");
    const zeros = reduce(b, cast(b, isZero, ct), dims, "add", 0, true);
    const nonZeroProd = reduce(b, b.select(isZero, filledLike(b, xc, 1), xc), dims, "mul", 1, true);
    const gb = back(cast(b, g, ct));
    const yb = back(cast(b, y!, ct));
    const zb = broadcastTo(b, zeros, xd);
    const pb = broadcastTo(b, nonZeroProd, xd);
    const none = b.compare(zb, filledLike(b, zb, 0), "EQ");
    const one = b.compare(zb, filledLike(b, zb, 1), "EQ");
    const zero = filledLike(b, xc, 0);
    const atZero = b.select(one, b.multiply(gb, pb), zero);
    const elsewhere = b.select(none, b.divide(b.multiply(gb, yb), xc), zero);
    return [cast(b, b.select(isZero, atZero, elsewhere), t)];
  },
});

// ---- max / min / amax / amin / argmax / argmin ----------------------------------------------

const dimOrHint = (other: string) =>
  p.custom<"dim", number, number>("dim", (v) => {
    if (v instanceof Tensor) {
      problem(`must be an integer (for the elementwise ${other} of two tensors use ${other})`);
    }
    if (typeof v !== "number" || !Number.isInteger(v)) problem("must be an integer");
    return v;
  });

function extremeOp(kind: Extreme) {
  return defineOp({
    name: kind,
    signature: [
      p.tensor("input"),
      dimOrHint(kind === "max" ? "maximum" : "minimum").optional(),
      p.bool("keepdim").optional(),
    ],
    lower(b, [x], { dim, keepdim }): Instruction | Instruction[] {
      if (dim === undefined) {
        if (keepdim !== undefined) fail(b, `keepdim needs a dim`);
        return extremeReduce(b, x!, reductionDims(b, x!, undefined), kind, false);
      }
      return argReduce(b, x!, oneDim(b, x!, dim), kind, keepdim ?? false);
    },
  });
}

const maxOp = extremeOp("max");
const minOp = extremeOp("min");

/** `max(x)` / `min(x)`: a tensor; with a dim: the values and their indices. */
export interface ExtremeFunction {
  (input: Tensor): Tensor;
  (input: Tensor, dim: number, keepdim?: boolean | null): ValuesIndices;
  (input: Tensor, dim: number, options: { keepdim?: boolean | null }): ValuesIndices;
  (input: Tensor, options: { dim: number; keepdim?: boolean | null }): ValuesIndices;
  readonly opName: string;
  readonly signature: readonly AnyParam[];
  readonly definition: OpDefinition;
}

/** The method form: `x.max()`, `x.max(1)`, `x.max(1, true)`, `x.max({ dim: 1 })`. */
export interface ExtremeMethod {
  (): Tensor;
  (dim: number, keepdim?: boolean | null): ValuesIndices;
  (dim: number, options: { keepdim?: boolean | null }): ValuesIndices;
  (options: { dim: number; keepdim?: boolean | null }): ValuesIndices;
}

function extremeFunction(op: typeof maxOp): ExtremeFunction {
  const call = op as unknown as (...args: unknown[]) => Tensor | Tensor[];
  const fn = (...args: unknown[]) => {
    const r = call(...args);
    return Array.isArray(r) ? asPair(op.opName, r) : r;
  };
  return Object.assign(fn, {
    opName: op.opName,
    signature: op.signature,
    definition: op.definition,
  }) as unknown as ExtremeFunction;
}

/** The largest element, or `{ values, indices }` of the largest along `dim` (first on ties). */
export const max = extremeFunction(maxOp);
/** The smallest element, or `{ values, indices }` of the smallest along `dim`. */
export const min = extremeFunction(minOp);

function amaxLike(kind: Extreme) {
  return defineOp({
    name: kind === "max" ? "amax" : "amin",
    signature: [p.tensor("input"), p.dims("dim").default([]), p.bool("keepdim").default(false)],
    lower: (b, [x], { dim, keepdim }) =>
      extremeReduce(b, x!, reductionDims(b, x!, dim), kind, keepdim),
  });
}

export const amax = amaxLike("max");
export const amin = amaxLike("min");

function argOp(kind: Extreme) {
  return defineOp({
    name: kind === "max" ? "argmax" : "argmin",
    signature: [p.tensor("input"), p.int("dim").optional(), p.bool("keepdim").default(false)],
    lower: (b, [x], { dim, keepdim }) => argReduce(b, x!, oneDim(b, x!, dim), kind, keepdim)[1],
  });
}

export const argmax = argOp("max");
export const argmin = argOp("min");

// ---- var / std ------------------------------------------------------------------------------

function moments(std: boolean) {
  return defineOp({
    name: std ? "std" : "var",
    signature: [
      p.tensor("input"),
      p.dims("dim").optional(),
      p.bool("unbiased").optional(),
      p.bool("keepdim").default(false),
      p.number("correction").optional(),
    ],
    lower(b, [x], { dim, unbiased, keepdim, correction }) {
      const t = dtypeOf(x!);
      requireFloating(b, t, " (std and var need floating point inputs)");
      if (unbiased !== undefined && correction !== undefined) {
        fail(b, `pass either unbiased or correction, not both`);
      }
      const c = correction ?? (unbiased === false ? 0 : 1);
      const dims = reductionDims(b, x!, dim);
      const n = reducedCount(x!, dims);
      const xc = cast(b, x!, computeType(t));
      const s = reduce(b, xc, dims, "add", 0, true);
      const mean = b.divide(s, filledLike(b, s, n));
      const dev = b.subtract(xc, expandBack(b, mean, xc));
      const ss = reduce(b, b.multiply(dev, dev), dims, "add", 0, keepdim);
      // PyTorch divides by max(0, N - correction): too few elements give inf (or NaN for 0/0).
      const v = b.divide(ss, filledLike(b, ss, Math.max(0, n - c)));
      return cast(b, std ? b.sqrt(v) : v, t);
    },
  });
}

/**
 * Variance over `dim` with `correction` (default 1, Bessel's); `unbiased: false` is 0.
 * Exported as `var` (a reserved word: `ops.var(x)`, `x.var()`, `import { var as variance }`).
 */
const var_ = moments(false);
export { var_ as var };
/** Standard deviation: the square root of `var`. */
export const std = moments(true);

// ---- logsumexp ------------------------------------------------------------------------------

/** log(sum(exp(x))) over `dims`, kept as size 1: the max is subtracted first, for stability. */
function logSumExpKept(b: ComputationBuilder, x: Instruction, dims: readonly number[]) {
  const m = reduce(b, x, dims, "max", -Infinity, true);
  // An infinite max (all -inf, or some +inf) would give inf - inf; PyTorch shifts by 0 then.
  const infinite = b.compare(b.abs(m), filledLike(b, m, Infinity), "EQ");
  const shift = b.select(infinite, filledLike(b, m, 0), m);
  const e = b.exp(b.subtract(x, expandBack(b, shift, x)));
  return b.add(b.log(reduce(b, e, dims, "add", 0, true)), shift);
}

export const logsumexp = defineOp({
  name: "logsumexp",
  signature: [p.tensor("input"), p.dims("dim"), p.bool("keepdim").default(false)],
  lower(b, [x], { dim, keepdim }) {
    const inT = dtypeOf(x!);
    const t = isFloatingDType(inT) ? inT : DEFAULT_FLOAT; // integers and bools give float32
    const dims = reductionDims(b, x!, dim);
    const r = logSumExpKept(b, cast(b, x!, computeType(t)), dims);
    const out = keepdim ? r : b.reshape(r, dimsOf(x!).filter((_, i) => !dims.includes(i)));
    return cast(b, out, t);
  },
});

// ---- all / any ------------------------------------------------------------------------------

function logicalReduce(kind: "all" | "any") {
  return defineOp({
    name: kind,
    signature: [p.tensor("input"), p.dims("dim").optional(), p.bool("keepdim").default(false)],
    lower(b, [x], { dim, keepdim }) {
      const t = dtypeOf(x!);
      const truth = t === "bool" ? x! : b.compare(x!, filledLike(b, x!, 0), "NE");
      const dims = reductionDims(b, x!, dim);
      const kindOf: ReducerKind = kind === "all" ? "and" : "or";
      const r = reduce(b, truth, dims, kindOf, kind === "all", keepdim);
      // PyTorch keeps uint8 for uint8 inputs (a legacy of uint8 masks); all else is bool.
      return t === "uint8" ? cast(b, r, "uint8") : r;
    },
  });
}

export const all = logicalReduce("all");
export const any = logicalReduce("any");

// ---- norm -----------------------------------------------------------------------------------

type NormOrder = number | "fro";

export const norm = defineOp({
  name: "norm",
  signature: [
    p.tensor("input"),
    p
      .custom<"p", NormOrder, NormOrder>("p", (v) => {
        if (typeof v === "number" && !Number.isNaN(v)) return v;
        if (v === "fro") return v;
        if (v === "nuc") {
          problem("must be a number or 'fro' ('nuc', the nuclear norm, is not supported)");
        }
        return problem("must be a number (Infinity for the max norm) or 'fro'");
      })
      .default("fro"),
    p.dims("dim").optional(),
    p.bool("keepdim").default(false),
    p.dtype("dtype").optional(),
  ],
  lower(b, [input], { p: ord, dim, keepdim, dtype }) {
    const inT = dtypeOf(input!);
    const t = dtype ?? inT;
    requireFloating(b, t, dtype === undefined ? ` (pass { dtype: "float32" })` : " as dtype");
    const x = cast(b, cast(b, input!, t), computeType(t));
    const dims = reductionDims(b, x, dim);
    const a = b.abs(x);
    const sum = (v: Instruction) => reduce(b, v, dims, "add", 0, keepdim);
    let r: Instruction;
    if (ord === "fro" || ord === 2) {
      r = b.sqrt(sum(b.multiply(x, x)));
    } else if (ord === Infinity) {
      r = reduce(b, a, dims, "max", 0, keepdim); // |x| >= 0, so 0 is max's identity here
    } else if (ord === -Infinity) {
      r = reduce(b, a, dims, "min", Infinity, keepdim);
      // PyTorch gives 0 (not inf) for the -inf norm of nothing.
      if (reducedCount(x, dims) === 0) r = filledLike(b, r, 0);
    } else if (ord === 0) {
      r = sum(cast(b, b.compare(x, filledLike(b, x, 0), "NE"), dtypeOf(x)));
    } else if (ord === 1) {
      r = sum(a);
    } else {
      const s = sum(b.power(a, filledLike(b, a, ord)));
      r = b.power(s, filledLike(b, s, 1 / ord));
    }
    return cast(b, r, t);
  },
  // PyTorch's norm_backward: the rules' gradient, masked to 0 where the norm is 0 (the rules
  // give 0 * (0.5 / 0) = NaN there for p = 2; a subgradient of 0, as PyTorch has it).
  vjp(b, [input], [y], [g], { dim, keepdim }, auto) {
    if (g === undefined) return [];
    const [gx] = auto();
    if (gx === undefined) return [];
    const dims = reductionDims(b, input!, dim);
    const kept = keepdim ? y! : b.reshape(y!, keptDims(dimsOf(input!), dims));
    const norms = broadcastTo(b, kept, dimsOf(input!));
    const zero = b.compare(norms, filledLike(b, norms, 0), "EQ");
    return [b.select(zero, filledLike(b, gx, 0), gx)];
  },
});

// ---- softmax / logSoftmax -------------------------------------------------------------------

function softmaxLike(log: boolean) {
  return defineOp({
    name: log ? "logSoftmax" : "softmax",
    signature: [p.tensor("input"), p.int("dim"), p.dtype("dtype").optional()],
    lower(b, [input], { dim, dtype }) {
      const t = dtype ?? dtypeOf(input!);
      requireFloating(b, t, dtype === undefined ? ` (pass { dtype: "float32" })` : " as dtype");
      const x = cast(b, cast(b, input!, t), computeType(t));
      const d = scanDim(b, x, dim);
      const dims = d === undefined ? [] : [d];
      // Shift by the max so exp cannot overflow; an infinite max gives NaN, as in PyTorch.
      const m = reduce(b, x, dims, "max", -Infinity, true);
      const shifted = b.subtract(x, expandBack(b, m, x));
      const e = b.exp(shifted);
      const s = expandBack(b, reduce(b, e, dims, "add", 0, true), x);
      return cast(b, log ? b.subtract(shifted, b.log(s)) : b.divide(e, s), t);
    },
  });
}

export const softmax = softmaxLike(false);
export const logSoftmax = softmaxLike(true);

// ---- cumsum / cumprod -----------------------------------------------------------------------

/**
 * Inclusive prefix sums (or products) along `d` in log2(n) steps (Hillis and Steele): step s
 * combines each element with the one s before it (the identity where there is none). That is
 * 3 instructions per step and O(n log n) work, where a reduce-window over the whole prefix
 * would be one instruction but O(n^2) work.
 */
function prefixScan(
  b: ComputationBuilder,
  v: Instruction,
  d: number,
  kind: "add" | "mul",
): Instruction {
  const shape = dimsOf(v);
  const n = shape[d]!;
  const identity = constant(b, dtypeOf(v), kind === "add" ? 0 : 1);
  const starts = shape.map(() => 0);
  let y = v;
  for (let s = 1; s < n; s *= 2) {
    const head = b.slice(y, starts, shape.map((size, i) => (i === d ? n - s : size)));
    const shifted = b.pad(head, identity, shape.map((_, i) => (i === d ? [s, 0] : [0, 0])));
    y = kind === "add" ? b.add(y, shifted) : b.multiply(y, shifted);
  }
  return y;
}

function scan(kind: "add" | "mul") {
  return defineOp({
    name: kind === "add" ? "cumsum" : "cumprod",
    signature: [p.tensor("input"), p.int("dim"), p.dtype("dtype").optional()],
    lower(b, [x], { dim, dtype }) {
      const inT = dtypeOf(x!);
      // Integral and bool scans are int64 unless a dtype is asked for (PyTorch).
      const outT = dtype ?? (isFloatingDType(inT) ? inT : DEFAULT_INT);
      if (outT === "bool") fail(b, `dtype bool is not supported`);
      const d = scanDim(b, x!, dim);
      const v = cast(b, cast(b, x!, outT), computeType(outT));
      return cast(b, d === undefined ? v : prefixScan(b, v, d, kind), outT);
    },
  });
}

export const cumsum = scan("add");
export const cumprod = scan("mul");

// ---- sort / topk ----------------------------------------------------------------------------

/**
 * The comparator for sorting (value, index) pairs: ascending puts NaN last, descending puts it
 * first (PyTorch orders NaN above every number).
 */
function sortComparator(b: ComputationBuilder, t: DType, descending: boolean): Computation {
  const mb = moduleBuilderOf(b);
  const et = toElementType(t);
  const name = mb.module.uniqueComputationName(`${descending ? "greater" : "less"}_${et}`);
  return mb.computation(name, (c) => {
    const l = c.parameter(scalarShape(et));
    const r = c.parameter(scalarShape(et));
    c.parameter(scalarShape("s64"));
    c.parameter(scalarShape("s64"));
    const [first, second] = descending ? [r, l] : [l, r];
    const lt = c.compare(first, second, "LT");
    if (!isFloatingDType(t)) return lt;
    // first sorts before second when it is smaller, or second is NaN and first is not.
    return c.or(lt, c.and(isNaNOf(c, second), c.not(isNaNOf(c, first))));
  });
}

/** Values sorted along `d` with their int64 indices; equal values keep their order. */
function sortLowering(
  b: ComputationBuilder,
  x: Instruction,
  d: number | undefined,
  descending: boolean,
): [Instruction, Instruction] {
  if (d === undefined) return [x, constant(b, "int64", 0)];
  const t = dtypeOf(x);
  const v = ordered(b, x);
  const idx = b.iota(arrayShape("s64", dimsOf(v)), d);
  // Always stable: it is what stable=true asks for and one valid answer for stable=false.
  const r = b.sort([v, idx], d, sortComparator(b, dtypeOf(v), descending), true);
  return [cast(b, b.getTupleElement(r, 0), t), b.getTupleElement(r, 1)];
}

const sortOp = defineOp({
  name: "sort",
  signature: [
    p.tensor("input"),
    p.int("dim").default(-1),
    p.bool("descending").default(false),
    p.bool("stable").default(false),
  ],
  lower: (b, [x], { dim, descending }) => sortLowering(b, x!, scanDim(b, x!, dim), descending),
  vjp: (b, [x], outs, [g], { dim }) => [sortVjp(b, x!, outs[1]!, g, scanDim(b, x!, dim))],
});

const topkOp = defineOp({
  name: "topk",
  signature: [
    p.tensor("input"),
    p.int("k"),
    p.int("dim").default(-1),
    p.bool("largest").default(true),
    p.bool("sorted").default(true),
  ],
  lower(b, [x], { k, dim, largest }) {
    const d = scanDim(b, x!, dim);
    const shape = dimsOf(x!);
    const size = d === undefined ? 1 : shape[d]!;
    if (k < 0 || k > size) {
      const where =
        d === undefined ? "a zero-dim tensor" : `dim ${d} of shape ${shapeString(shape)}`;
      fail(b, `k (${k}) is out of range: expected 0..${size} for ${where}`);
    }
    const [values, indices] = sortLowering(b, x!, d, largest);
    if (d === undefined || k === size) return [values, indices];
    const limits = shape.map((s, i) => (i === d ? k : s));
    const starts = shape.map(() => 0);
    return [b.slice(values, starts, limits), b.slice(indices, starts, limits)];
  },
  vjp: (b, [x], outs, [g], { dim }) => [sortVjp(b, x!, outs[1]!, g, scanDim(b, x!, dim))],
});

/**
 * sort's and topk's derivative (PyTorch's value_selecting_reduction_backward): the values'
 * gradient goes back to the positions their indices name, zeros elsewhere.
 */
function sortVjp(
  b: ComputationBuilder,
  x: Instruction,
  indices: Instruction,
  g: Instruction | undefined,
  d: number | undefined,
): Instruction | undefined {
  if (g === undefined) return undefined;
  if (d === undefined) return g;
  return scatterAddAlong(b, filledLike(b, x, 0), indices, g, d);
}

/** `{ values, indices }` sorted along `dim` (NaN last ascending, first descending; stable). */
export const sort = returningPair(sortOp);
/** The k largest (or smallest) along `dim`, always in sorted order. */
export const topk = returningPair(topkOp);

// ---- Methods --------------------------------------------------------------------------------

installMethods({
  prod,
  max: (input: Tensor, ...rest: unknown[]) => (max as (...a: unknown[]) => unknown)(input, ...rest),
  min: (input: Tensor, ...rest: unknown[]) => (min as (...a: unknown[]) => unknown)(input, ...rest),
  amax,
  amin,
  argmax,
  argmin,
  var: var_,
  std,
  logsumexp,
  all,
  any,
  norm,
  softmax,
  logSoftmax,
  cumsum,
  cumprod,
  sort,
  topk,
});

declare module "../tensor.ts" {
  interface Tensor {
    prod: MethodOf<typeof prod>;
    max: ExtremeMethod;
    min: ExtremeMethod;
    amax: MethodOf<typeof amax>;
    amin: MethodOf<typeof amin>;
    argmax: MethodOf<typeof argmax>;
    argmin: MethodOf<typeof argmin>;
    var: MethodOf<typeof var_>;
    std: MethodOf<typeof std>;
    logsumexp: MethodOf<typeof logsumexp>;
    all: MethodOf<typeof all>;
    any: MethodOf<typeof any>;
    norm: MethodOf<typeof norm>;
    softmax: MethodOf<typeof softmax>;
    logSoftmax: MethodOf<typeof logSoftmax>;
    cumsum: MethodOf<typeof cumsum>;
    cumprod: MethodOf<typeof cumprod>;
    sort: MethodOf<typeof sort>;
    topk: MethodOf<typeof topk>;
  }
}
