// Making tensors. `tensor(data)` builds a leaf from JS data (nested arrays, typed arrays,
// scalars) by PyTorch's rules, except that JS cannot tell 1 from 1.0: numbers become float32
// unless a dtype says otherwise, bigints int64, booleans bool. The other creation ops (zeros,
// ones, full, arange, linspace, eye) are ordinary ops lowered to IR (broadcast constants,
// iota), so lazy mode and tracing capture them like any other op; the *Like forms decompose
// into them. Random tensors are in tensor/random.ts.

import type { ComputationBuilder } from "../ir/builder.ts";
import type { Instruction } from "../ir/module.ts";
import { arrayShape } from "../ir/shape.ts";
import { arraySizeProblem, elementCount } from "../ir/sizes.ts";
import { type CallForms, p, parseArgs } from "./args.ts";
import {
  allocateStorage,
  DEFAULT_FLOAT,
  DEFAULT_INT,
  type DType,
  encodeValue,
  type Scalar,
  toElementType,
} from "./dtype.ts";
import { defineDecomposition, defineOp } from "./dispatch.ts";
import { ArgumentError, OpError } from "./errors.ts";
import { cast, dtypeOf, fail, filled } from "./lower.ts";
import { to } from "./ops/core.ts";
import { inferShape, numelOf } from "./shape.ts";
import { checkLittleEndian, fromStorage, Tensor } from "./tensor.ts";

// ---- tensor(data) ---------------------------------------------------------------------------

/** Nested arrays of scalars (rectangular), or a scalar. */
export type NestedData = Scalar | readonly NestedData[];

/** What `tensor()` accepts. */
export type TensorData =
  | NestedData
  | Float32Array
  | Float64Array
  | Int8Array
  | Int16Array
  | Int32Array
  | Uint8Array
  | Uint8ClampedArray
  | Uint16Array
  | BigInt64Array
  | Tensor;

type TypedData = Exclude<TensorData, NestedData | Tensor>;

function typedArrayDType(a: TypedData): DType {
  if (a instanceof Float32Array || a instanceof Float64Array) return "float32";
  if (a instanceof BigInt64Array) return "int64";
  if (a instanceof Uint8Array || a instanceof Uint8ClampedArray) return "uint8";
  return "int32";
}

/** The shape of nested arrays and their values in row-major order; ragged data is an error. */
function flatten(data: NestedData): { shape: number[]; values: Scalar[] } {
  const shape: number[] = [];
  for (let d: NestedData = data; Array.isArray(d); d = (d as readonly NestedData[])[0]!) {
    shape.push(d.length);
    if (d.length === 0) break;
  }
  const values: Scalar[] = [];
  const walk = (d: NestedData, depth: number, path: string): void => {
    if (depth === shape.length) {
      if (typeof d === "number" || typeof d === "boolean" || typeof d === "bigint") {
        values.push(d);
        return;
      }
      const what = Array.isArray(d) ? "a nested array (the data is ragged)" : JSON.stringify(d);
      throw new ArgumentError(
        "tensor",
        "data",
        `must hold numbers, booleans or bigints; got ${what} at ${path || "the top"}`,
      );
    }
    if (!Array.isArray(d) || d.length !== shape[depth]) {
      const got = Array.isArray(d) ? `length ${d.length}` : "a scalar";
      throw new ArgumentError(
        "tensor",
        "data",
        `is ragged: expected length ${shape[depth]} at ${path || "the top"}, got ${got}`,
      );
    }
    (d as readonly NestedData[]).forEach((x, i) => walk(x, depth + 1, `${path}[${i}]`));
  };
  walk(data, 0, "");
  return { shape, values };
}

/** float32 for numbers, int64 for bigints (with no numbers), bool for booleans only. */
function inferDType(values: readonly Scalar[]): DType {
  let category = 0;
  for (const v of values) {
    if (typeof v === "number") return DEFAULT_FLOAT;
    if (typeof v === "bigint") category = 1;
  }
  return values.length === 0 ? DEFAULT_FLOAT : category === 1 ? DEFAULT_INT : "bool";
}

const tensorSig = [
  p.custom<"data", TensorData>("data", (v) => v as TensorData),
  p.dtype("dtype").optional(),
  p.ints("shape").optional(),
] as const;

/**
 * A tensor from JS data: `tensor([[1, 2], [3, 4]])`, `tensor([1, 2], { dtype: "int32" })`,
 * `tensor(new Int32Array(6), { shape: [2, 3] })` (flat data; one dim may be -1), `tensor(3)`.
 * Typed arrays keep their kind (Float32Array/Float64Array float32, Int32Array and smaller int32,
 * Uint8Array uint8, BigInt64Array int64). Values are converted as PyTorch converts them: to a
 * float dtype rounding to nearest, to an integer dtype truncating toward zero (out of range is
 * an error), to bool as "nonzero". A tensor argument is copied (converted when a dtype is given).
 */
export function tensor(...args: CallForms<typeof tensorSig>): Tensor {
  const { data, dtype, shape } = parseArgs("tensor", tensorSig, args);
  if (data instanceof Tensor) {
    const t = dtype !== undefined && dtype !== data.dtype ? to(data, dtype) : data;
    const impl = t.realize();
    const copy = fromStorage(impl.dtype, impl.shape, impl.storage.slice());
    return shape === undefined ? copy : copy.reshape(shape);
  }
  let values: ArrayLike<Scalar>;
  let dims: number[];
  let inferred: DType;
  if (ArrayBuffer.isView(data)) {
    values = data as ArrayLike<Scalar>;
    dims = [values.length];
    inferred = typedArrayDType(data as TypedData);
  } else {
    const flat = flatten(data as NestedData);
    values = flat.values;
    dims = flat.shape;
    inferred = inferDType(flat.values);
  }
  if (shape !== undefined) {
    try {
      dims = inferShape("tensor", shape, values.length);
    } catch (e) {
      throw new ArgumentError("tensor", "shape", (e as OpError).detail);
    }
  }
  const d = dtype ?? inferred;
  const storage = allocateStorage(d, values.length, "tensor");
  const out = storage as unknown as (number | bigint)[];
  for (let i = 0; i < values.length; i++) {
    try {
      out[i] = encodeValue(d, values[i]!);
    } catch (e) {
      throw new ArgumentError("tensor", "data", `value ${i}: ${(e as Error).message}`);
    }
  }
  return fromStorage(d, dims, storage);
}

/** A tensor from little-endian bytes as `Tensor.toBytes()` writes them (safetensors' layout). */
export function fromBytes(bytes: Uint8Array, dtype: DType, shape: readonly number[]): Tensor {
  checkLittleEndian();
  const n = numelOf(shape);
  const storage = allocateStorage(dtype, n, "fromBytes");
  if (bytes.byteLength !== storage.byteLength) {
    throw new ArgumentError(
      "fromBytes",
      "bytes",
      `must hold ${storage.byteLength} bytes for ${dtype}[${shape.join(",")}], ` +
        `got ${bytes.byteLength}`,
    );
  }
  new Uint8Array(storage.buffer).set(bytes);
  return fromStorage(dtype, shape, storage);
}

// ---- Constant fills -------------------------------------------------------------------------

/**
 * Fails the op when no array can hold a result of `dims` (its element count and bytes named),
 * before any IR or storage exists for it.
 */
function checkSize(b: ComputationBuilder, dtype: DType, dims: readonly number[]): void {
  const problem = arraySizeProblem(toElementType(dtype), elementCount(dims), dtype);
  if (problem === null) return;
  fail(b, `the result of shape [${dims.join(", ")}] is too large: ${problem}`);
}

/** `filled` after the size check. */
function fill(b: ComputationBuilder, dtype: DType, value: Scalar, dims: readonly number[]) {
  checkSize(b, dtype, dims);
  return filled(b, dtype, value, dims);
}

const sizeParam = p.ints("size", { min: 0 }).varargs();

export const zeros = defineOp({
  name: "zeros",
  signature: [sizeParam, p.dtype("dtype").default(DEFAULT_FLOAT)],
  lower: (b, _inputs, { size, dtype }) => fill(b, dtype, 0, size),
});

export const ones = defineOp({
  name: "ones",
  signature: [sizeParam, p.dtype("dtype").default(DEFAULT_FLOAT)],
  lower: (b, _inputs, { size, dtype }) => fill(b, dtype, 1, size),
});

/**
 * `full(size, fillValue)`: the fill value is a runtime operand, so fills of one shape share a
 * program. Without a dtype it follows the value: bool, int64 for integers, float32.
 */
export const full = defineOp({
  name: "full",
  signature: [
    p.ints("size", { min: 0 }),
    p.scalarOperand("fillValue"),
    p.dtype("dtype").optional(),
  ],
  lower(b, [v], { size, dtype }) {
    checkSize(b, dtype ?? dtypeOf(v!), size);
    const c = cast(b, v!, dtype ?? dtypeOf(v!));
    return size.length === 0 ? c : b.broadcast(c, size, []);
  },
});

// ---- Ranges ---------------------------------------------------------------------------------

/** 0, 1, ... n-1 along a vector, in `dtype`. */
function iota(b: ComputationBuilder, dtype: DType, n: number): Instruction {
  return b.iota(arrayShape(toElementType(dtype), [n]), 0);
}

/**
 * `arange(end)`, `arange(start, end)`, `arange(start, end, step)`: start, start+step, ... below
 * end. int64 when start, end and step are all integers, else float32. Integer ranges are exact;
 * fractional ones compute start + i*step in float32 (PyTorch rounds a double once, so the last
 * bit may differ).
 */
export const arange = defineOp({
  name: "arange",
  signature: [
    p.number("start").optional(),
    p.number("end").optional(),
    p.number("step").default(1),
    p.dtype("dtype").optional(),
  ],
  normalize(args) {
    let { start, end } = args;
    const { step } = args;
    if (end === undefined) {
      if (start === undefined) throw new ArgumentError("arange", "end", "is required");
      end = start;
      start = 0;
    }
    start ??= 0;
    for (const [k, v] of [
      ["start", start],
      ["end", end],
      ["step", step],
    ] as const) {
      if (!Number.isFinite(v)) throw new ArgumentError("arange", k, `must be finite, got ${v}`);
    }
    if (step === 0) throw new ArgumentError("arange", "step", "must be nonzero");
    if ((end - start) * step < 0) {
      throw new OpError(
        "arange",
        `the range from ${start} to ${end} is inconsistent with step ${step}`,
      );
    }
    const integral = Number.isInteger(start) && Number.isInteger(end) && Number.isInteger(step);
    return { start, end, step, dtype: args.dtype ?? (integral ? DEFAULT_INT : DEFAULT_FLOAT) };
  },
  lower(b, _inputs, { start, end, step, dtype }) {
    const s = start!;
    const n = Math.max(0, Math.ceil((end! - s) / step));
    const t = dtype!;
    const exact = Number.isInteger(s) && Number.isInteger(step);
    const work: DType = exact ? "int64" : "float32";
    checkSize(b, work, [n]);
    let r = iota(b, work, n);
    if (step !== 1) r = b.multiply(r, filled(b, work, step, [n]));
    if (s !== 0) r = b.add(r, filled(b, work, s, [n]));
    return cast(b, r, t);
  },
});

/**
 * `linspace(start, end, steps)`: steps values from start to end inclusive, computed as PyTorch
 * does in float32: start + i*step for the first half, end - (steps-1-i)*step for the rest.
 */
export const linspace = defineOp({
  name: "linspace",
  signature: [
    p.number("start"),
    p.number("end"),
    p.int("steps", { min: 0 }),
    p.dtype("dtype").default(DEFAULT_FLOAT),
  ],
  lower(b, _inputs, { start, end, steps, dtype }) {
    if (!Number.isFinite(start) || !Number.isFinite(end)) {
      fail(b, `start and end must be finite, got ${start} and ${end}`);
    }
    const w: DType = "float32";
    checkSize(b, w, [steps]);
    if (steps <= 1) return cast(b, filled(b, w, start, [steps]), dtype);
    const fs = Math.fround(start);
    const fe = Math.fround(end);
    const step = Math.fround(Math.fround(fe - fs) / (steps - 1));
    const i = iota(b, w, steps);
    const lo = b.add(filled(b, w, fs, [steps]), b.multiply(filled(b, w, step, [steps]), i));
    const back = b.subtract(filled(b, w, steps - 1, [steps]), i);
    const hi = b.subtract(filled(b, w, fe, [steps]), b.multiply(filled(b, w, step, [steps]), back));
    const firstHalf = b.compare(i, filled(b, w, Math.floor(steps / 2), [steps]), "LT");
    return cast(b, b.select(firstHalf, lo, hi), dtype);
  },
});

/** `eye(n)`, `eye(n, m)`: ones on the diagonal. */
export const eye = defineOp({
  name: "eye",
  signature: [
    p.int("n", { min: 0 }),
    p.int("m", { min: 0 }).optional(),
    p.dtype("dtype").default(DEFAULT_FLOAT),
  ],
  lower(b, _inputs, { n, m, dtype }) {
    checkSize(b, "int32", [n, m ?? n]);
    const shape = arrayShape("s32", [n, m ?? n]);
    const diag = b.compare(b.iota(shape, 0), b.iota(shape, 1), "EQ");
    return cast(b, diag, dtype);
  },
});

// ---- *Like ----------------------------------------------------------------------------------

const likeSig = [p.tensor("input"), p.dtype("dtype").optional()] as const;

export const zerosLike = defineDecomposition({
  name: "zerosLike",
  signature: likeSig,
  decompose: ({ input, dtype }) => zeros([...input.shape], { dtype: dtype ?? input.dtype }),
});

export const onesLike = defineDecomposition({
  name: "onesLike",
  signature: likeSig,
  decompose: ({ input, dtype }) => ones([...input.shape], { dtype: dtype ?? input.dtype }),
});

export const fullLike = defineDecomposition({
  name: "fullLike",
  signature: [p.tensor("input"), p.scalar("fillValue"), p.dtype("dtype").optional()],
  decompose: ({ input, fillValue, dtype }) =>
    full([...input.shape], fillValue, { dtype: dtype ?? input.dtype }),
});
