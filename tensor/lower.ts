// Shared helpers for op lowerings: PyTorch's type promotion and numpy broadcasting done in IR
// (convert, reshape, broadcast), dims, constants and reductions. A lowering receives IR values
// and must not rely on anything but their shapes and element types, because the same lowering
// runs in every dispatch mode (eager one-op programs now; lazy graphs and traced programs
// later). Scalars the user passed as JS values arrive as zero-dim parameters marked as
// "wrapped numbers" (markScalarOperand), which is how promotion tells `x + 1` from
// `x + tensor(1)`. Failures throw OpError naming the op being lowered (b.metadata.opType).

import type { ComputationBuilder, ReducerKind } from "../ir/builder.ts";
import type { Instruction } from "../ir/module.ts";
import { type ArrayShape, scalarShape, shapeToString } from "../ir/shape.ts";
import {
  type DType,
  fromElementType,
  type PromotionEntry,
  resultTypeOfEntries,
  type Scalar,
  toElementType,
} from "./dtype.ts";
import { OpError } from "./errors.ts";
import { broadcastShapes, normalizeDims, numelOf, shapeString } from "./shape.ts";

/** The frontend op being lowered (the dispatcher sets it as every instruction's opType). */
export function opName(b: ComputationBuilder): string {
  return b.metadata.opType ?? "lowering";
}

/** Throws an OpError naming the op being lowered. */
export function fail(b: ComputationBuilder, detail: string): never {
  throw new OpError(opName(b), detail);
}

function arrayOf(x: Instruction): ArrayShape {
  const s = x.shape;
  if (s.kind !== "array") throw new Error(`expected an array value, got ${shapeToString(s)}`);
  return s;
}

export function dtypeOf(x: Instruction): DType {
  return fromElementType(arrayOf(x).type);
}

export function dimsOf(x: Instruction): readonly number[] {
  return arrayOf(x).dims;
}

export function rankOf(x: Instruction): number {
  return arrayOf(x).dims.length;
}

// ---- Wrapped numbers and promotion ----------------------------------------------------------

const scalarOperands = new WeakSet<Instruction>();

/** Marks a zero-dim parameter as standing for a JS scalar (lowest promotion priority). */
export function markScalarOperand(x: Instruction): Instruction {
  scalarOperands.add(x);
  return x;
}

export function isScalarOperand(x: Instruction): boolean {
  return scalarOperands.has(x);
}

export function promotionEntry(x: Instruction): PromotionEntry {
  const dtype = dtypeOf(x);
  if (isScalarOperand(x)) return { dtype, level: "scalar" };
  return { dtype, level: rankOf(x) === 0 ? "zeroDim" : "dimensioned" };
}

/** torch.result_type of IR operands (wrapped numbers count as scalars). */
export function resultTypeOf(xs: readonly Instruction[]): DType {
  return resultTypeOfEntries(xs.map(promotionEntry));
}

/** `x` converted to `dtype` (itself when it already is). */
export function cast(b: ComputationBuilder, x: Instruction, dtype: DType): Instruction {
  return dtypeOf(x) === dtype ? x : b.convert(x, toElementType(dtype));
}

/** The dtype arithmetic on `t` runs in: float16/bfloat16 compute in float32 (PyTorch's opmath). */
export function computeType(t: DType): DType {
  return t === "float16" || t === "bfloat16" ? "float32" : t;
}

export function castAll(b: ComputationBuilder, xs: readonly Instruction[], dtype: DType) {
  return xs.map((x) => cast(b, x, dtype));
}

// ---- Broadcasting ---------------------------------------------------------------------------

/**
 * `x` broadcast to `dims` by numpy's rule (x's dims aligned with the last dims of the target;
 * each equal, or 1 and expanded). Size-1 dims that expand are reshaped away first, because an
 * HLO broadcast maps each operand dim to a result dim of the same size.
 */
export function broadcastTo(
  b: ComputationBuilder,
  x: Instruction,
  dims: readonly number[],
): Instruction {
  const from = dimsOf(x);
  const offset = dims.length - from.length;
  if (offset < 0) {
    fail(b, `cannot broadcast shape ${shapeString(from)} to ${shapeString(dims)}`);
  }
  const kept: number[] = [];
  const map: number[] = [];
  from.forEach((d, i) => {
    const target = dims[offset + i]!;
    if (d === target) {
      kept.push(d);
      map.push(offset + i);
    } else if (d !== 1) {
      fail(
        b,
        `cannot broadcast shape ${shapeString(from)} to ${shapeString(dims)} ` +
          `(dim ${i}: ${d} vs ${target})`,
      );
    }
  });
  if (offset === 0 && kept.length === from.length) return x;
  const squeezed = kept.length === from.length ? x : b.reshape(x, kept);
  return b.broadcast(squeezed, [...dims], map);
}

/** All operands broadcast to their common shape (numpy's rule; an error names the shapes). */
export function broadcastAll(b: ComputationBuilder, xs: readonly Instruction[]): Instruction[] {
  const shape = broadcastShapes(opName(b), ...xs.map(dimsOf));
  return xs.map((x) => broadcastTo(b, x, shape));
}

/**
 * The usual elementwise preparation: operands promoted to `dtype` (default: their
 * torch.result_type) and broadcast to one shape.
 */
export function elementwise(
  b: ComputationBuilder,
  xs: readonly Instruction[],
  dtype?: DType,
): { dtype: DType; operands: Instruction[] } {
  const shape = broadcastShapes(opName(b), ...xs.map(dimsOf));
  const t = dtype ?? resultTypeOf(xs);
  return { dtype: t, operands: xs.map((x) => broadcastTo(b, cast(b, x, t), shape)) };
}

// ---- Constants ------------------------------------------------------------------------------

/** A zero-dim constant of `dtype` (the value converted as a Literal converts it). */
export function constant(b: ComputationBuilder, dtype: DType, value: Scalar): Instruction {
  return b.scalar(toElementType(dtype), value);
}

/** A constant broadcast to `dims`. */
export function filled(
  b: ComputationBuilder,
  dtype: DType,
  value: Scalar,
  dims: readonly number[],
): Instruction {
  const c = constant(b, dtype, value);
  return dims.length === 0 ? c : b.broadcast(c, [...dims], []);
}

/** A constant like `x` (same dtype and dims). */
export function filledLike(b: ComputationBuilder, x: Instruction, value: Scalar): Instruction {
  return filled(b, dtypeOf(x), value, dimsOf(x));
}

// ---- Reductions -----------------------------------------------------------------------------

/** The scalar reducer computation (needs a ModuleBuilder's builder; eager and tracing have one). */
export function reducer(b: ComputationBuilder, kind: ReducerKind, dtype: DType) {
  const mb = b.moduleBuilder;
  if (!mb)
    throw new Error(`${opName(b)}: a reduction needs a ComputationBuilder made by a ModuleBuilder`);
  return mb.reducer(kind, toElementType(dtype));
}

/**
 * Reduces `x` over `dims` (normalized, distinct) with `kind`, starting from `init`; with
 * `keepdim` the reduced dims stay as size 1.
 */
export function reduce(
  b: ComputationBuilder,
  x: Instruction,
  dims: readonly number[],
  kind: ReducerKind,
  init: Scalar,
  keepdim: boolean,
): Instruction {
  const t = dtypeOf(x);
  const sorted = [...dims].sort((p, q) => p - q);
  const r = b.reduce(x, constant(b, t, init), sorted, reducer(b, kind, t));
  if (!keepdim) return r;
  return b.reshape(r, keptDims(dimsOf(x), sorted));
}

/**
 * A gradient of a broadcast result summed back to an operand's `dims` (leading dims the operand
 * lacks, and its size-1 dims the result widened), as a broadcasting op's derivative needs.
 */
export function sumToShape(b: ComputationBuilder, g: Instruction, dims: readonly number[]): Instruction {
  const gd = dimsOf(g);
  const lead = gd.length - dims.length;
  const red: number[] = [];
  for (let i = 0; i < gd.length; i++) {
    if (i < lead || (dims[i - lead] === 1 && gd[i] !== 1)) red.push(i);
  }
  const r = red.length > 0 ? reduce(b, g, red, "add", 0, false) : g;
  return dimsOf(r).join() === dims.join() ? r : b.reshape(r, [...dims]);
}

/** The shape after reducing `dims` with keepdim: those dims become 1. */
export function keptDims(shape: readonly number[], dims: readonly number[]): number[] {
  return shape.map((d, i) => (dims.includes(i) ? 1 : d));
}

/**
 * The dims a reduction covers: all when `dim` is undefined or empty (PyTorch reduces over every
 * dim for `dim=[]`), else the normalized list. A zero-dim input has nothing to reduce.
 */
export function reductionDims(
  b: ComputationBuilder,
  x: Instruction,
  dim: readonly number[] | undefined,
) {
  const rank = rankOf(x);
  if (dim === undefined || dim.length === 0) return Array.from({ length: rank }, (_, i) => i);
  const dims = normalizeDims(opName(b), dim, rank);
  return rank === 0 ? [] : dims;
}

/** Number of elements a reduction over `dims` folds into each result element. */
export function reducedCount(x: Instruction, dims: readonly number[]): number {
  return numelOf(dims.map((d) => dimsOf(x)[d]!));
}

/** A zero-dim parameter type for a JS scalar's dtype. */
export function scalarParameterShape(dtype: DType): ArrayShape {
  return scalarShape(toElementType(dtype));
}
