// The one table of element-type facts: whether a type is a float, signed, its width as XLA
// stores it, how a Literal stores it in JavaScript (f16 and bf16 values live in a Float32Array,
// already rounded), its value range, and the identity of each reducer opcode over it. The IR,
// the passes and every backend read these facts here instead of keeping their own copies (two
// copies of the reducer identities once disagreed on s64 maximum/minimum). Typed over
// ElementType, so a new element type does not compile until its row exists.

import type { ScalarValue } from "./literal.ts";
import type { ElementType } from "./shape.ts";

/** The typed array a Literal of the type stores its values in. */
export type StorageClass =
  | "Float32Array"
  | "Float64Array"
  | "Int8Array"
  | "Int16Array"
  | "Int32Array"
  | "BigInt64Array"
  | "Uint8Array"
  | "Uint16Array"
  | "Uint32Array"
  | "BigUint64Array";

export interface ElementTypeInfo {
  readonly float: boolean;
  /** Integer types (pred is neither integer nor float). */
  readonly integer: boolean;
  readonly signed: boolean;
  /** Bits per element as XLA stores it (pred: 8). */
  readonly bits: number;
  /** Bytes per element as XLA stores it (elementByteSize). */
  readonly bytes: number;
  readonly storage: StorageClass;
  /** Bytes per element of the Literal storage (f16 and bf16: 4, their Float32Array). */
  readonly storageBytes: number;
  /**
   * Smallest and largest value (integers and pred; floats: -Infinity and Infinity, or the
   * largest finite value for the 8-bit floats that have no infinity).
   */
  readonly min: number | bigint;
  readonly max: number | bigint;
}

export const ELEMENT_TYPE_INFO = {
  pred: {
    float: false, integer: false, signed: false, bits: 8, bytes: 1,
    storage: "Uint8Array", storageBytes: 1, min: 0, max: 1,
  },
  s4: {
    float: false, integer: true, signed: true, bits: 4, bytes: 1,
    storage: "Int8Array", storageBytes: 1, min: -8, max: 7,
  },
  s8: {
    float: false, integer: true, signed: true, bits: 8, bytes: 1,
    storage: "Int8Array", storageBytes: 1, min: -128, max: 127,
  },
  s16: {
    float: false, integer: true, signed: true, bits: 16, bytes: 2,
    storage: "Int16Array", storageBytes: 2, min: -32768, max: 32767,
  },
  s32: {
    float: false, integer: true, signed: true, bits: 32, bytes: 4,
    storage: "Int32Array", storageBytes: 4, min: -2147483648, max: 2147483647,
  },
  s64: {
    float: false, integer: true, signed: true, bits: 64, bytes: 8,
    storage: "BigInt64Array", storageBytes: 8, min: -(2n ** 63n), max: 2n ** 63n - 1n,
  },
  u4: {
    float: false, integer: true, signed: false, bits: 4, bytes: 1,
    storage: "Uint8Array", storageBytes: 1, min: 0, max: 15,
  },
  u8: {
    float: false, integer: true, signed: false, bits: 8, bytes: 1,
    storage: "Uint8Array", storageBytes: 1, min: 0, max: 255,
  },
  u16: {
    float: false, integer: true, signed: false, bits: 16, bytes: 2,
    storage: "Uint16Array", storageBytes: 2, min: 0, max: 65535,
  },
  u32: {
    float: false, integer: true, signed: false, bits: 32, bytes: 4,
    storage: "Uint32Array", storageBytes: 4, min: 0, max: 4294967295,
  },
  u64: {
    float: false, integer: true, signed: false, bits: 64, bytes: 8,
    storage: "BigUint64Array", storageBytes: 8, min: 0n, max: 2n ** 64n - 1n,
  },
  f16: {
    float: true, integer: false, signed: true, bits: 16, bytes: 2,
    storage: "Float32Array", storageBytes: 4, min: -Infinity, max: Infinity,
  },
  bf16: {
    float: true, integer: false, signed: true, bits: 16, bytes: 2,
    storage: "Float32Array", storageBytes: 4, min: -Infinity, max: Infinity,
  },
  f32: {
    float: true, integer: false, signed: true, bits: 32, bytes: 4,
    storage: "Float32Array", storageBytes: 4, min: -Infinity, max: Infinity,
  },
  f64: {
    float: true, integer: false, signed: true, bits: 64, bytes: 8,
    storage: "Float64Array", storageBytes: 8, min: -Infinity, max: Infinity,
  },
  f8e5m2: {
    float: true, integer: false, signed: true, bits: 8, bytes: 1,
    storage: "Float32Array", storageBytes: 4, min: -Infinity, max: Infinity,
  },
  f8e4m3: {
    float: true, integer: false, signed: true, bits: 8, bytes: 1,
    storage: "Float32Array", storageBytes: 4, min: -Infinity, max: Infinity,
  },
  f8e3m4: {
    float: true, integer: false, signed: true, bits: 8, bytes: 1,
    storage: "Float32Array", storageBytes: 4, min: -Infinity, max: Infinity,
  },
  f8e4m3fn: {
    float: true, integer: false, signed: true, bits: 8, bytes: 1,
    storage: "Float32Array", storageBytes: 4, min: -448, max: 448,
  },
  f8e4m3fnuz: {
    float: true, integer: false, signed: true, bits: 8, bytes: 1,
    storage: "Float32Array", storageBytes: 4, min: -240, max: 240,
  },
  f8e5m2fnuz: {
    float: true, integer: false, signed: true, bits: 8, bytes: 1,
    storage: "Float32Array", storageBytes: 4, min: -57344, max: 57344,
  },
  f8e4m3b11fnuz: {
    float: true, integer: false, signed: true, bits: 8, bytes: 1,
    storage: "Float32Array", storageBytes: 4, min: -30, max: 30,
  },
  token: {
    float: false, integer: false, signed: false, bits: 0, bytes: 0,
    storage: "Uint8Array", storageBytes: 1, min: 0, max: 0,
  },
} as const satisfies { readonly [K in ElementType]: ElementTypeInfo };

export function elementInfo(t: ElementType): ElementTypeInfo {
  return ELEMENT_TYPE_INFO[t];
}

/** The reducer opcodes that have an identity on some element type. */
export const REDUCER_OPCODES = ["add", "multiply", "maximum", "minimum", "and", "or", "xor"] as
  const;
export type ReducerOpcode = (typeof REDUCER_OPCODES)[number];

export function isReducerOpcode(op: string): op is ReducerOpcode {
  return (REDUCER_OPCODES as readonly string[]).includes(op);
}

/**
 * The value `e` with op(e, x) == op(x, e) == x, bit for bit, for every x of type `t` (so a
 * reduction over no elements gives it and one over padding of it gives the unpadded result),
 * or undefined when `op` has none on `t`. Integers are numbers (s64, u64: bigints); pred is 0 or 1
 * (pred add is or, pred multiply is and, as the evaluator defines them). Float addition's
 * identity is -0 (x + -0 is x for every x, -0 included; +0 would turn -0 into +0).
 */
export function reducerIdentity(op: string, t: ElementType): number | bigint | undefined {
  const info = ELEMENT_TYPE_INFO[t];
  if (t === "token") return undefined;
  const big = t === "s64" || t === "u64";
  const int = (v: number | bigint): number | bigint => (big ? BigInt(v) : Number(v));
  switch (op) {
    case "add":
      // The fnuz 8-bit floats have no -0: their +0 is the identity.
      return info.float ? (t.endsWith("fnuz") ? 0 : -0) : int(0);
    case "multiply":
      return int(1);
    case "maximum":
      return info.min;
    case "minimum":
      return info.max;
    case "and":
      if (info.float) return undefined;
      // All ones: -1 for a signed type, the largest value for an unsigned one.
      return t === "pred" ? 1 : info.signed ? int(-1) : info.max;
    case "or":
    case "xor":
      return info.float ? undefined : int(0);
    default:
      return undefined;
  }
}

/** reducerIdentity as the ScalarValue a builder takes (pred as a boolean). */
export function reducerIdentityValue(op: string, t: ElementType): ScalarValue | undefined {
  const v = reducerIdentity(op, t);
  if (v === undefined) return undefined;
  return t === "pred" ? v === 1 : v;
}

/**
 * Two's-complement wrap of an integer to a number-stored integer type (every integer type but s64
 * and u64): the value modulo 2^bits, in the type's range. Exact for any integer argument up to
 * 2^53 in magnitude (JavaScript's ToInt32 reduces modulo 2^32 exactly).
 */
export function wrapInteger(t: ElementType): (x: number) => number {
  const { bits, signed, integer } = ELEMENT_TYPE_INFO[t];
  if (!integer) throw new Error(`wrapInteger: ${t} is not an integer type`);
  if (bits >= 64) throw new Error(`wrapInteger: ${t} values are bigints`);
  if (bits === 32) return signed ? (x) => x | 0 : (x) => x >>> 0;
  const k = 32 - bits;
  const mask = (1 << bits) - 1;
  return signed ? (x) => (x << k) >> k : (x) => x & mask;
}

/** The wrap of wrapInteger for the bigint-stored types s64 and u64. */
export function wrapBigInteger(t: ElementType): (x: bigint) => bigint {
  if (t === "s64") return (x) => BigInt.asIntN(64, x);
  if (t === "u64") return (x) => BigInt.asUintN(64, x);
  throw new Error(`wrapBigInteger: ${t} values are not bigints`);
}
