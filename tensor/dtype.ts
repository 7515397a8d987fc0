// The frontend's dtypes (PyTorch's names), how each is stored in a Tensor, how each maps to an IR
// element type, and PyTorch's type promotion (torch.promote_types and torch.result_type). float16
// and bfloat16 are stored compactly as their 16 bits in a Uint16Array; they cross into the IR as
// f16/bf16 literals (exact values in a Float32Array) and come back as bits, so the runtime
// computes them in f32 while a Tensor costs two bytes per element.

import { f32ToBF16Bits, f32ToF16Bits } from "../ir/literal.ts";
import type { ElementType } from "../ir/shape.ts";
import { sizeLimitProblem } from "../ir/sizes.ts";
import { OpError } from "./errors.ts";

export const DTYPES = [
  "float32",
  "float16",
  "bfloat16",
  "int32",
  "int64",
  "uint8",
  "bool",
] as const;
export type DType = (typeof DTYPES)[number];

/** A JS value that can stand for a zero-dim operand: PyTorch's "wrapped number". */
export type Scalar = number | boolean | bigint;

/** The float dtype of float scalars and of true division of integers (torch.get_default_dtype). */
export const DEFAULT_FLOAT: DType = "float32";
/** The dtype of integer scalars when they decide a result (bool tensor + 1, sum of ints). */
export const DEFAULT_INT: DType = "int64";

export function isDType(v: unknown): v is DType {
  return typeof v === "string" && (DTYPES as readonly string[]).includes(v);
}

export function isFloatingDType(d: DType): boolean {
  return d === "float32" || d === "float16" || d === "bfloat16";
}

/** uint8, int32, int64 (bool is its own category, as in PyTorch). */
export function isIntegralDType(d: DType): boolean {
  return d === "int32" || d === "int64" || d === "uint8";
}

const ELEMENT_TYPE = {
  float32: "f32",
  float16: "f16",
  bfloat16: "bf16",
  int32: "s32",
  int64: "s64",
  uint8: "u8",
  bool: "pred",
} satisfies { [K in DType]: ElementType };

const FROM_ELEMENT_TYPE = {
  f32: "float32",
  f16: "float16",
  bf16: "bfloat16",
  s32: "int32",
  s64: "int64",
  u8: "uint8",
  pred: "bool",
} satisfies { [K in TensorElementType]: DType };

/** The element types a tensor dtype maps to; the others are the IR's and evaluator's only. */
type TensorElementType = "f32" | "f16" | "bf16" | "s32" | "s64" | "u8" | "pred";

function isTensorElementType(t: ElementType): t is TensorElementType {
  return Object.hasOwn(FROM_ELEMENT_TYPE, t);
}

export function toElementType(d: DType): ElementType {
  return ELEMENT_TYPE[d];
}

/** The dtype of an element type; f64 (the reference evaluator's, for float64 checks) has none. */
export function fromElementType(t: ElementType): DType {
  if (t === "f64") throw new Error("f64 has no tensor dtype (Kiln tensors have no float64)");
  if (!isTensorElementType(t)) {
    throw new Error(`${t} has no tensor dtype (an IR-only element type)`);
  }
  return FROM_ELEMENT_TYPE[t];
}

/** A Tensor's storage: one typed array per dtype (see storageCtor). */
export type Storage = Float32Array | Uint16Array | Int32Array | BigInt64Array | Uint8Array;

type StorageCtor =
  | Float32ArrayConstructor
  | Uint16ArrayConstructor
  | Int32ArrayConstructor
  | BigInt64ArrayConstructor
  | Uint8ArrayConstructor;

const STORAGE = {
  float32: Float32Array,
  float16: Uint16Array,
  bfloat16: Uint16Array,
  int32: Int32Array,
  int64: BigInt64Array,
  uint8: Uint8Array,
  bool: Uint8Array,
} satisfies { [K in DType]: StorageCtor };

/** The typed array that stores `d`: float16/bfloat16 as bits in a Uint16Array, bool as 0/1. */
export function storageCtor(d: DType): StorageCtor {
  return STORAGE[d];
}

/**
 * Zeroed storage for `n` elements of `d`; a size no array can hold is an OpError of `op`
 * naming the element count and bytes (ir/sizes.ts), not a RangeError.
 */
export function allocateStorage(d: DType, n: number, op: string): Storage {
  const ctor = storageCtor(d);
  const problem = sizeLimitProblem(n, ctor.BYTES_PER_ELEMENT, d);
  if (problem !== null) throw new OpError(op, `the result is too large: ${problem}`);
  return new ctor(n);
}

/** Bytes per element as stored (and as safetensors stores it). */
export function itemSize(d: DType): number {
  return storageCtor(d).BYTES_PER_ELEMENT;
}

// ---- Promotion ------------------------------------------------------------------------------

/** 0 bool, 1 integral, 2 floating: PyTorch's categories, lowest first. */
export function dtypeCategory(d: DType): 0 | 1 | 2 {
  return d === "bool" ? 0 : isFloatingDType(d) ? 2 : 1;
}

const INT_RANK: Partial<Record<DType, number>> = { uint8: 0, int32: 1, int64: 2 };

/**
 * torch.promote_types for Kiln's dtypes: the smallest dtype both convert to without losing
 * category. bool gives way to anything; uint8 < int32 < int64; any float beats any integer;
 * float16 with bfloat16 is float32 (neither holds the other).
 */
export function promoteTypes(a: DType, b: DType): DType {
  if (a === b) return a;
  if (a === "bool") return b;
  if (b === "bool") return a;
  const fa = isFloatingDType(a);
  const fb = isFloatingDType(b);
  if (fa && fb) return "float32"; // distinct floats: f16+bf16, or either with f32
  if (fa) return a;
  if (fb) return b;
  return INT_RANK[a]! >= INT_RANK[b]! ? a : b;
}

/** A zero-dim or dimensioned operand as promotion sees it (a Tensor fits). */
export interface DTypeAndRank {
  readonly dtype: DType;
  readonly ndim: number;
}

/** The dtype a scalar stands for in promotion: int64, float32 or bool. */
export function scalarDType(s: Scalar): DType {
  if (typeof s === "boolean") return "bool";
  if (typeof s === "bigint") return "int64";
  return isIntScalar(s) ? DEFAULT_INT : DEFAULT_FLOAT;
}

/**
 * Whether a JS number is an integer scalar. JS cannot tell 1 from 1.0, so an integral value is
 * an integer; integers beyond 2^53 are floats (a double that large no longer names one integer;
 * pass a bigint for an exact int64).
 */
export function isIntScalar(n: number): boolean {
  return Number.isSafeInteger(n);
}

/** The three priority levels of torch.result_type. */
export type PromotionLevel = "dimensioned" | "zeroDim" | "scalar";

export interface PromotionEntry {
  readonly dtype: DType;
  readonly level: PromotionLevel;
}

function promoteSkipUndefined(a: DType | undefined, b: DType | undefined): DType | undefined {
  if (a === undefined) return b;
  if (b === undefined) return a;
  return promoteTypes(a, b);
}

/** c10's combine_categories: the higher level wins unless the lower one is a higher category. */
function combineCategories(higher: DType | undefined, lower: DType | undefined) {
  if (higher !== undefined && isFloatingDType(higher)) return higher;
  if (higher === "bool" || (lower !== undefined && isFloatingDType(lower))) {
    return promoteSkipUndefined(higher, lower);
  }
  return higher ?? lower;
}

/**
 * torch.result_type over entries tagged with their level: within a level dtypes promote; a
 * higher level (dimensioned > zero-dim > scalar) decides unless a lower level is of a higher
 * category (bool < integral < floating), in which case the two promote.
 */
export function resultTypeOfEntries(entries: readonly PromotionEntry[]): DType {
  let dim: DType | undefined;
  let zero: DType | undefined;
  let wrapped: DType | undefined;
  for (const e of entries) {
    if (e.level === "dimensioned") dim = promoteSkipUndefined(dim, e.dtype);
    else if (e.level === "zeroDim") zero = promoteSkipUndefined(zero, e.dtype);
    else wrapped = promoteSkipUndefined(wrapped, e.dtype);
  }
  const r = combineCategories(dim, combineCategories(zero, wrapped));
  if (r === undefined) throw new Error("resultType: needs at least one operand");
  return r;
}

/** torch.result_type: tensors (anything with dtype and ndim) and JS scalars. */
export function resultType(...operands: readonly (DTypeAndRank | Scalar)[]): DType {
  return resultTypeOfEntries(
    operands.map((o) =>
      typeof o === "object"
        ? { dtype: o.dtype, level: o.ndim === 0 ? "zeroDim" : "dimensioned" }
        : { dtype: scalarDType(o), level: "scalar" },
    ),
  );
}

// ---- Storing values -------------------------------------------------------------------------

const INT_RANGE: Record<"int32" | "uint8", readonly [number, number]> = {
  int32: [-2147483648, 2147483647],
  uint8: [0, 255],
};

/**
 * One JS value in the stored form of `d`, by PyTorch's rules for building a tensor from data:
 * floats round to nearest (float16/bfloat16 to their bits), integers truncate a fraction toward
 * zero and must fit the dtype, bool is "nonzero". Throws a message naming the problem.
 */
export function encodeValue(d: DType, v: Scalar): number | bigint {
  switch (d) {
    case "float32":
      return Math.fround(Number(v));
    case "float16":
      return f32ToF16Bits(Number(v));
    case "bfloat16":
      return f32ToBF16Bits(Number(v));
    case "bool":
      return typeof v === "bigint" ? (v !== 0n ? 1 : 0) : Number(v) !== 0 ? 1 : 0;
    case "int64": {
      if (typeof v === "bigint") {
        if (BigInt.asIntN(64, v) !== v) throw new Error(`${v} is out of range for int64`);
        return v;
      }
      const n = Math.trunc(Number(v));
      if (!Number.isFinite(n)) throw new Error(`${v} cannot be stored as int64`);
      if (!Number.isSafeInteger(n)) {
        throw new Error(
          `${v} is not exact as a number; pass a bigint for int64 values beyond 2^53`,
        );
      }
      return BigInt(n);
    }
    case "int32":
    case "uint8": {
      const n = typeof v === "bigint" ? Number(v) : Math.trunc(Number(v));
      const [lo, hi] = INT_RANGE[d];
      if (!Number.isFinite(n) || n < lo || n > hi) {
        throw new Error(`${v} is out of range for ${d} [${lo}, ${hi}]`);
      }
      return n;
    }
    default: {
      const never: never = d;
      throw new Error(`unknown dtype ${String(never)}`);
    }
  }
}
