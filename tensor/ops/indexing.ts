// Indexing ops: gather, scatter / scatterAdd (out of place), indexSelect, embedding, maskedFill,
// tril, triu, oneHot and dynamicUpdateSlice, lowered to the IR's gather, scatter, select, iota
// and dynamic-update-slice with PyTorch's (or, for dynamicUpdateSlice, JAX's) semantics.
// Index tensors are int64 (PyTorch's type) or int32. Index VALUES are checked in eager mode,
// where they are known, before the program runs (each op's `normalize`): an out-of-range index
// is an OpError naming the op, the index and the dim. Under lazy mode or a compiled program the
// values are not known when the program is built: there the lowering adds the same check to the
// program (tensor/index_checks.ts; raised after the run with eager's error), unless the program
// opted out (`compile(fn, { checkIndices: false })`), and then the IR's semantics apply (XLA's):
// gather, indexSelect and embedding clamp an out-of-range start index into range, scatter skips
// an out-of-range update, oneHot gives an all-zero row. dynamicUpdateSlice clamps its starts
// (not checked in programs; see docs/ops/indexing.md).

import type { ComputationBuilder } from "../../ir/builder.ts";
import type { Computation, Instruction } from "../../ir/module.ts";
import { arrayShape, type ElementType, scalarShape } from "../../ir/shape.ts";
import { p } from "../args.ts";
import { toElementType } from "../dtype.ts";
import { defineOp, installMethods, type MethodOf } from "../dispatch.ts";
import { OpError } from "../errors.ts";
import { checkInRange, outOfBounds } from "../index_checks.ts";
import {
  broadcastTo,
  cast,
  constant,
  dimsOf,
  dtypeOf,
  fail,
  filled,
  filledLike,
  isScalarOperand,
  opName,
  rankOf,
} from "../lower.ts";
import { broadcastShapes, normalizeDim, numelOf, shapeString } from "../shape.ts";
import { ConcreteImpl, type Tensor } from "../tensor.ts";

// ---- Index checks ---------------------------------------------------------------------------

/** Index tensors must be int64 or int32 (PyTorch: int64; Kiln also takes int32). */
function checkIndexDType(b: ComputationBuilder, idx: Instruction, what = "index"): void {
  const t = dtypeOf(idx);
  if (t !== "int64" && t !== "int32") {
    fail(b, `${what} must be an int64 or int32 tensor, got ${t} ` +
      `(shape ${shapeString(dimsOf(idx))})`);
  }
}

/** An index tensor's values when they are known now (eager mode), else undefined. */
function knownIndices(t: Tensor): Int32Array | BigInt64Array | undefined {
  const impl = t.impl;
  if (!(impl instanceof ConcreteImpl)) return undefined;
  if (impl.dtype === "int32") return impl.storage as Int32Array;
  if (impl.dtype === "int64") return impl.storage as BigInt64Array;
  return undefined;
}

/** Throws when a known index value lies outside [0, size) (eager mode's check). */
function checkIndexRange(op: string, index: Tensor, size: number, what: string): void {
  const v = knownIndices(index);
  if (!v) return;
  for (let i = 0; i < v.length; i++) {
    const k = Number(v[i]!);
    if (k < 0 || k >= size) {
      throw new OpError(op, outOfBounds(v[i]!, what, size));
    }
  }
}

/** The same check in a program that collects index checks (lazy mode, compile()). */
function checkIndexRangeIn(
  b: ComputationBuilder,
  idx: Instruction,
  size: number,
  what: string,
): void {
  const op = opName(b);
  // `n`: the size the program ran with (a program serving several sizes computes it).
  checkInRange(b, idx, 0, size, op, (v, n) => outOfBounds(v, what, n));
}

/** The dim an op indexes, normalized; zero-dim inputs index as if they had one dim. */
function indexedSize(op: string, input: Tensor, dim: number): [number, number] {
  const d = normalizeDim(op, dim, input.ndim);
  return [d, input.ndim === 0 ? 1 : input.shape[d]!];
}

function range(n: number): number[] {
  return Array.from({ length: n }, (_, i) => i);
}

function asRank1(b: ComputationBuilder, x: Instruction): Instruction {
  return rankOf(x) === 0 ? b.reshape(x, [1]) : x;
}

/**
 * Full coordinates for an elementwise gather/scatter along `d`: `[...I, r]`, the index tensor's
 * value for dim d and the position itself (an iota) for every other dim.
 */
function fullIndex(b: ComputationBuilder, idx: Instruction, d: number): Instruction {
  const dims = dimsOf(idx);
  const r = dims.length;
  const type: ElementType = toElementType(dtypeOf(idx));
  const col = [...dims, 1];
  const pieces = range(r).map((k) =>
    k === d ? b.reshape(idx, col) : b.iota(arrayShape(type, col), k),
  );
  return pieces.length === 1 ? pieces[0]! : b.concatenate(pieces, r);
}

/**
 * `x` with `src` added at `idx` along `d` (x[..., idx[i], ...] += src[i], idx, src and x of
 * one rank, idx's and src's dims equal, no other dim larger than x's): scatter-add without the
 * user-facing checks, for derivatives whose indices come from the op itself (sort's, topk's,
 * a pooling's argmax).
 */
export function scatterAddAlong(
  b: ComputationBuilder,
  x: Instruction,
  idx: Instruction,
  src: Instruction,
  d: number,
): Instruction {
  const is = dimsOf(idx);
  if (numelOf(is) === 0) return x;
  const r = is.length;
  return b.scatter(
    x,
    fullIndex(b, idx, d),
    src,
    {
      updateWindowDims: [],
      insertedWindowDims: range(r),
      scatterDimsToOperandDims: range(r),
      indexVectorDim: r,
    },
    combiner(b, "add", toElementType(dtypeOf(x))),
  );
}

/** gather/scatter need index rank = input rank (zero-dim counts as one dim, as PyTorch). */
function checkSameRank(
  b: ComputationBuilder,
  x: Instruction,
  idx: Instruction,
  what: string,
): void {
  if (Math.max(rankOf(x), 1) !== Math.max(rankOf(idx), 1)) {
    fail(b, `index ${shapeString(dimsOf(idx))} must have the same number of dims as ${what} ` +
      `${shapeString(dimsOf(x))}`);
  }
}

// ---- gather ---------------------------------------------------------------------------------

export const gather = defineOp({
  name: "gather",
  signature: [p.tensor("input"), p.int("dim"), p.tensor("index")],
  normalize(args) {
    const [d, n] = indexedSize("gather", args.input, args.dim);
    checkIndexRange("gather", args.index, n, `dim ${d}`);
    return args;
  },
  lower(b, [x, idx], { dim }) {
    checkIndexDType(b, idx!);
    checkSameRank(b, x!, idx!, "input");
    const d = normalizeDim(opName(b), dim, rankOf(x!));
    const xs = dimsOf(asRank1(b, x!));
    const i1 = asRank1(b, idx!);
    const is = dimsOf(i1);
    is.forEach((n, k) => {
      if (k !== d && n > xs[k]!) {
        fail(b, `index ${shapeString(dimsOf(idx!))} must not be larger than input ` +
          `${shapeString(dimsOf(x!))} in any dim but dim ${d} (dim ${k}: ${n} > ${xs[k]})`);
      }
    });
    const outDims = dimsOf(idx!);
    checkIndexRangeIn(b, idx!, xs[d]!, `dim ${d}`);
    if (numelOf(is) === 0) return filled(b, dtypeOf(x!), 0, outDims);
    if (xs[d] === 0) fail(b, `index is out of range: dim ${d} of the input has size 0`);
    const r = is.length;
    const g = b.gather(
      asRank1(b, x!),
      fullIndex(b, i1, d),
      { offsetDims: [], collapsedSliceDims: range(r), startIndexMap: range(r), indexVectorDim: r },
      xs.map(() => 1),
    );
    return rankOf(idx!) === 0 ? b.reshape(g, []) : g;
  },
});

// ---- scatter, scatterAdd --------------------------------------------------------------------

type ScatterKind = "replace" | "add" | "multiply";

/** The combiner: the update replaces the element, or is added / multiplied in. */
function combiner(b: ComputationBuilder, kind: ScatterKind, type: ElementType): Computation {
  const mb = b.moduleBuilder;
  if (!mb) throw new Error(`${opName(b)}: scatter needs a ComputationBuilder of a ModuleBuilder`);
  if (kind === "replace") {
    const name = mb.module.uniqueComputationName(`scatter_replace_${type}`);
    return mb.computation(name, (c) => {
      c.parameter(scalarShape(type));
      return c.parameter(scalarShape(type));
    });
  }
  const bool = type === "pred";
  return mb.reducer(kind === "add" ? (bool ? "or" : "add") : bool ? "and" : "mul", type);
}

function scatterLowering(
  b: ComputationBuilder,
  x: Instruction,
  idx: Instruction,
  src: Instruction,
  dim: number,
  kind: ScatterKind,
): Instruction {
  checkIndexDType(b, idx);
  checkSameRank(b, x, idx, "input");
  const d = normalizeDim(opName(b), dim, rankOf(x));
  const t = dtypeOf(x);
  const scalarSrc = isScalarOperand(src);
  if (!scalarSrc) {
    if (dtypeOf(src) !== t) {
      fail(b, `expected src to have the input's dtype ${t}, got ${dtypeOf(src)}`);
    }
    if (Math.max(rankOf(src), 1) !== Math.max(rankOf(idx), 1)) {
      fail(b, `index ${shapeString(dimsOf(idx))} must have the same number of dims as src ` +
        `${shapeString(dimsOf(src))}`);
    }
  }
  const x1 = asRank1(b, x);
  const xs = dimsOf(x1);
  const i1 = asRank1(b, idx);
  const is = dimsOf(i1);
  const s1 = scalarSrc ? src : asRank1(b, src);
  is.forEach((n, k) => {
    const tooBigForInput = k !== d && n > xs[k]!;
    const tooBigForSrc = !scalarSrc && n > dimsOf(s1)[k]!;
    if (tooBigForInput || tooBigForSrc) {
      fail(b, `index ${shapeString(dimsOf(idx))} must be no larger than input ` +
        `${shapeString(dimsOf(x))} apart from dim ${d}` +
        `${scalarSrc ? "" : ` and no larger than src ${shapeString(dimsOf(src))}`}`);
    }
  });
  checkIndexRangeIn(b, idx, xs[d]!, `dim ${d}`);
  // Nothing to write, or nowhere to write it (every index would be out of range).
  if (numelOf(is) === 0 || numelOf(xs) === 0) return x;
  const updates = scalarSrc
    ? broadcastTo(b, cast(b, src, t), is)
    : b.slice(s1, is.map(() => 0), is, is.map(() => 1));
  const r = is.length;
  const type = toElementType(t);
  const s = b.scatter(
    x1,
    fullIndex(b, i1, d),
    is.length === dimsOf(updates).length ? updates : b.reshape(updates, is),
    {
      updateWindowDims: [],
      insertedWindowDims: range(r),
      scatterDimsToOperandDims: range(r),
      indexVectorDim: r,
    },
    combiner(b, kind, type),
  );
  return rankOf(x) === 0 ? b.reshape(s, []) : s;
}

export const scatter = defineOp({
  name: "scatter",
  signature: [
    p.tensor("input"),
    p.int("dim"),
    p.tensor("index"),
    p.tensorOrScalar("src"),
    p.oneOf("reduce", ["add", "multiply"] as const).optional(),
  ],
  normalize(args) {
    const [d, n] = indexedSize("scatter", args.input, args.dim);
    checkIndexRange("scatter", args.index, n, `dim ${d}`);
    return args;
  },
  lower: (b, [x, idx, src], { dim, reduce }) =>
    scatterLowering(b, x!, idx!, src!, dim, reduce ?? "replace"),
});

export const scatterAdd = defineOp({
  name: "scatterAdd",
  signature: [p.tensor("input"), p.int("dim"), p.tensor("index"), p.tensor("src")],
  normalize(args) {
    const [d, n] = indexedSize("scatterAdd", args.input, args.dim);
    checkIndexRange("scatterAdd", args.index, n, `dim ${d}`);
    return args;
  },
  lower: (b, [x, idx, src], { dim }) => scatterLowering(b, x!, idx!, src!, dim, "add"),
});

// ---- indexSelect, embedding -----------------------------------------------------------------

export const indexSelect = defineOp({
  name: "indexSelect",
  signature: [p.tensor("input"), p.int("dim"), p.tensor("index")],
  normalize(args) {
    const [d, n] = indexedSize("indexSelect", args.input, args.dim);
    checkIndexRange("indexSelect", args.index, n, `dim ${d}`);
    return args;
  },
  lower(b, [x, idx], { dim }) {
    checkIndexDType(b, idx!);
    if (rankOf(idx!) > 1) {
      fail(b, `index must be a vector (0-D or 1-D), got shape ${shapeString(dimsOf(idx!))}`);
    }
    const d = normalizeDim(opName(b), dim, rankOf(x!));
    const n = numelOf(dimsOf(idx!));
    const zeroDim = rankOf(x!) === 0;
    if (zeroDim && n !== 1) fail(b, `a zero-dim input takes exactly one index, got ${n}`);
    const x1 = asRank1(b, x!);
    const xs = dimsOf(x1);
    const outDims = xs.map((s, k) => (k === d ? n : s));
    checkIndexRangeIn(b, idx!, xs[d]!, `dim ${d}`);
    let r: Instruction;
    if (numelOf(outDims) === 0) r = filled(b, dtypeOf(x!), 0, outDims);
    else {
      if (xs[d] === 0) fail(b, `index is out of range: dim ${d} of the input has size 0`);
      r = b.gather(
        x1,
        b.reshape(idx!, [n]),
        {
          offsetDims: range(xs.length).filter((k) => k !== d),
          collapsedSliceDims: [d],
          startIndexMap: [d],
          indexVectorDim: 1,
        },
        xs.map((s, k) => (k === d ? 1 : s)),
      );
    }
    return zeroDim ? b.reshape(r, []) : r;
  },
});

export const embedding = defineOp({
  name: "embedding",
  signature: [p.tensor("input"), p.tensor("weight"), p.int("paddingIdx").optional()],
  normalize(args) {
    const { input, weight, paddingIdx } = args;
    if (weight.ndim !== 2) {
      throw new OpError("embedding", `weight must be 2-D ([numEmbeddings, embeddingDim]), ` +
        `got shape ${shapeString(weight.shape)}`);
    }
    const num = weight.shape[0]!;
    if (paddingIdx !== undefined && (paddingIdx < -num || paddingIdx >= num)) {
      throw new OpError("embedding", `paddingIdx ${paddingIdx} must be within numEmbeddings ` +
        `(${-num}..${num - 1})`);
    }
    checkIndexRange("embedding", input, num, `the weight's ${num} embeddings`);
    return args;
  },
  // PyTorch's embedding_backward: no gradient to the paddingIdx row (the gather's own
  // derivative, a scatter-add, gives it the rows that looked it up).
  vjp(b, [, w], _outs, _cts, { paddingIdx }, auto) {
    const gs = auto();
    const gw = gs[1];
    if (paddingIdx === undefined || gw === undefined) return gs;
    const ws = dimsOf(w!);
    const row = paddingIdx < 0 ? paddingIdx + ws[0]! : paddingIdx;
    const rows = b.iota(arrayShape("s32", ws), 0);
    const keep = b.compare(rows, b.broadcast(b.scalar("s32", row), ws, []), "NE");
    return [undefined, b.select(keep, gw, filledLike(b, gw, 0))];
  },
  lower(b, [idx, w]) {
    checkIndexDType(b, idx!, "input");
    const ws = dimsOf(w!);
    const is = dimsOf(idx!);
    const outDims = [...is, ws[1]!];
    const num = ws[0]!;
    checkInRange(b, idx!, 0, num, "embedding", (v, n) =>
      outOfBounds(v, `the weight's ${n} embeddings`, n));
    if (numelOf(outDims) === 0) return filled(b, dtypeOf(w!), 0, outDims);
    if (ws[0] === 0) fail(b, `index is out of range: the weight has no embeddings`);
    // paddingIdx only changes gradients; the forward pass reads the row like any other.
    return b.gather(
      w!,
      idx!,
      {
        offsetDims: [is.length],
        collapsedSliceDims: [0],
        startIndexMap: [0],
        indexVectorDim: is.length,
      },
      [1, ws[1]!],
    );
  },
});

// ---- maskedFill, tril, triu -----------------------------------------------------------------

export const maskedFill = defineOp({
  name: "maskedFill",
  signature: [p.tensor("input"), p.tensor("mask"), p.tensorOrScalar("value")],
  lower(b, [x, mask, value]) {
    if (dtypeOf(mask!) !== "bool") {
      fail(b, `mask must be a bool tensor, got ${dtypeOf(mask!)}`);
    }
    if (rankOf(value!) !== 0) {
      fail(b, `value must be a scalar or a zero-dim tensor, got a tensor of shape ` +
        `${shapeString(dimsOf(value!))}`);
    }
    const shape = broadcastShapes(opName(b), dimsOf(x!), dimsOf(mask!));
    const t = dtypeOf(x!);
    return b.select(
      broadcastTo(b, mask!, shape),
      broadcastTo(b, cast(b, value!, t), shape),
      broadcastTo(b, x!, shape),
    );
  },
});

/** Keeps elements with col - row <= diagonal (lower) or >= diagonal (upper), zeroing the rest. */
function triangle(b: ComputationBuilder, x: Instruction, diagonal: number, lower: boolean) {
  const dims = dimsOf(x);
  const r = dims.length;
  if (r < 2) {
    fail(b, `needs a tensor of at least 2 dims, got shape ${shapeString(dims)}`);
  }
  const n = dims[r - 2]!;
  const m = dims[r - 1]!;
  const shape = arrayShape("s64", [n, m]);
  const offset = b.subtract(b.iota(shape, 1), b.iota(shape, 0));
  const keep = b.compare(
    offset,
    b.broadcast(constant(b, "int64", BigInt(diagonal)), [n, m], []),
    lower ? "LE" : "GE",
  );
  const mask = b.broadcast(keep, [...dims], [r - 2, r - 1]);
  return b.select(mask, x, filled(b, dtypeOf(x), 0, dims));
}

export const tril = defineOp({
  name: "tril",
  signature: [p.tensor("input"), p.int("diagonal").default(0)],
  lower: (b, [x], { diagonal }) => triangle(b, x!, diagonal, true),
});

export const triu = defineOp({
  name: "triu",
  signature: [p.tensor("input"), p.int("diagonal").default(0)],
  lower: (b, [x], { diagonal }) => triangle(b, x!, diagonal, false),
});

// ---- oneHot ---------------------------------------------------------------------------------

export const oneHot = defineOp({
  name: "oneHot",
  signature: [p.tensor("tensor"), p.int("numClasses", { min: -1 }).default(-1)],
  normalize(args) {
    const { tensor: t, numClasses } = args;
    const v = knownIndices(t);
    if (numClasses !== -1) {
      if (v) {
        for (let i = 0; i < v.length; i++) {
          const k = Number(v[i]!);
          if (k < 0) throw new OpError("oneHot", `class values must be non-negative, got ${k}`);
          if (k >= numClasses) {
            throw new OpError("oneHot", `class values must be smaller than numClasses ` +
              `(${numClasses}), got ${k}`);
          }
        }
      }
      return args;
    }
    // numClasses = -1: the largest class + 1, which only the values can tell.
    if (!v) {
      if (t.dtype !== "int64" && t.dtype !== "int32") return args; // the lowering reports it
      throw new OpError("oneHot", `numClasses must be given when the input's values are not ` +
        `known (lazy mode or compile)`);
    }
    if (v.length === 0) {
      throw new OpError("oneHot", `cannot infer the number of classes from an empty tensor; ` +
        `pass numClasses`);
    }
    let max = -Infinity;
    for (let i = 0; i < v.length; i++) {
      const k = Number(v[i]!);
      if (k < 0) throw new OpError("oneHot", `class values must be non-negative, got ${k}`);
      if (k > max) max = k;
    }
    return { ...args, numClasses: max + 1 };
  },
  lower(b, [x], { numClasses }) {
    checkIndexDType(b, x!, "tensor");
    if (numClasses < 0) fail(b, `numClasses must be given (the values are not known)`);
    const dims = dimsOf(x!);
    checkInRange(b, x!, 0, numClasses, "oneHot", (v, n) =>
      v < 0n
        ? `class values must be non-negative, got ${v}`
        : `class values must be smaller than numClasses (${n}), got ${v}`);
    const out = [...dims, numClasses];
    const classes = b.iota(arrayShape("s64", out), dims.length);
    const values = b.broadcast(cast(b, x!, "int64"), out, range(dims.length));
    return cast(b, b.compare(values, classes, "EQ"), "int64");
  },
});

// ---- dynamicUpdateSlice (static KV caches, issue 6) ------------------------------------------

/**
 * `input` with `update` written at `starts` (jax.lax.dynamic_update_slice; HLO's
 * dynamic-update-slice): `starts` is a 1-D int64/int32 tensor with one start per dim, read at
 * run time, so one program serves every position (a preallocated KV cache written at the
 * current step). Known (eager) starts must keep the update inside the input; unknown ones
 * follow HLO, which clamps each start into [0, input - update].
 */
export const dynamicUpdateSlice = defineOp({
  name: "dynamicUpdateSlice",
  signature: [p.tensor("input"), p.tensor("update"), p.tensor("starts")],
  normalize(args) {
    const { input, update, starts } = args;
    const v = knownIndices(starts);
    // Shapes that do not fit are the lowering's error; only the values are checked here.
    if (!v || v.length !== input.ndim || update.ndim !== input.ndim) return args;
    if (update.shape.some((n, k) => n > input.shape[k]!)) return args;
    for (let k = 0; k < v.length; k++) {
      const s = Number(v[k]!);
      const room = input.shape[k]! - update.shape[k]!;
      if (s < 0 || s > room) {
        throw new OpError("dynamicUpdateSlice", `start ${s} of dim ${k} puts the update ` +
          `${shapeString(update.shape)} outside the input ${shapeString(input.shape)} ` +
          `(starts for dim ${k} must be in [0, ${room}])`);
      }
    }
    return args;
  },
  lower(b, [x, u, starts]) {
    checkIndexDType(b, starts!, "starts");
    const xs = dimsOf(x!);
    const us = dimsOf(u!);
    const where = `input ${shapeString(xs)}, update ${shapeString(us)}`;
    if (dtypeOf(u!) !== dtypeOf(x!)) {
      fail(b, `update must have the input's dtype ${dtypeOf(x!)}, got ${dtypeOf(u!)} (${where})`);
    }
    if (us.length !== xs.length || us.some((n, k) => n > xs[k]!)) {
      fail(b, `update must have the input's rank and fit inside it (${where})`);
    }
    const ss = dimsOf(starts!);
    if (ss.length !== 1 || ss[0] !== xs.length) {
      fail(b, `starts must be a 1-D tensor with one start per input dim ([${xs.length}]), got ` +
        `shape ${shapeString(ss)} (${where})`);
    }
    const scalars = range(xs.length).map((k) => b.reshape(b.slice(starts!, [k], [k + 1]), []));
    return b.dynamicUpdateSlice(x!, u!, scalars);
  },
});

// ---- Methods --------------------------------------------------------------------------------

installMethods({
  gather,
  scatter,
  scatterAdd,
  indexSelect,
  maskedFill,
  tril,
  triu,
  dynamicUpdateSlice,
});

declare module "../tensor.ts" {
  interface Tensor {
    gather: MethodOf<typeof gather>;
    scatter: MethodOf<typeof scatter>;
    scatterAdd: MethodOf<typeof scatterAdd>;
    indexSelect: MethodOf<typeof indexSelect>;
    maskedFill: MethodOf<typeof maskedFill>;
    tril: MethodOf<typeof tril>;
    triu: MethodOf<typeof triu>;
    dynamicUpdateSlice: MethodOf<typeof dynamicUpdateSlice>;
  }
}
