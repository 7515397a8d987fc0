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
  | "Int32Array"
  | "BigInt64Array"
  | "Uint8Array";

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
  /** Smallest and largest value (integers and pred; floats: -Infinity and Infinity). */
  readonly min: number | bigint;
  readonly max: number | bigint;
}

export const ELEMENT_TYPE_INFO = {
  pred: {
    float: false, integer: false, signed: false, bits: 8, bytes: 1,
    storage: "Uint8Array", storageBytes: 1, min: 0, max: 1,
  },
  s32: {
    float: false, integer: true, signed: true, bits: 32, bytes: 4,
    storage: "Int32Array", storageBytes: 4, min: -2147483648, max: 2147483647,
  },
  s64: {
    float: false, integer: true, signed: true, bits: 64, bytes: 8,
    storage: "BigInt64Array", storageBytes: 8, min: -(2n ** 63n), max: 2n ** 63n - 1n,
  },
  u8: {
    float: false, integer: true, signed: false, bits: 8, bytes: 1,
    storage: "Uint8Array", storageBytes: 1, min: 0, max: 255,
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
 * or undefined when `op` has none on `t`. Integers are numbers (s64: a bigint); pred is 0 or 1
 * (pred add is or, pred multiply is and, as the evaluator defines them). Float addition's
 * identity is -0 (x + -0 is x for every x, -0 included; +0 would turn -0 into +0).
 */
export function reducerIdentity(op: string, t: ElementType): number | bigint | undefined {
  const info = ELEMENT_TYPE_INFO[t];
  const int = (v: number | bigint): number | bigint => (t === "s64" ? BigInt(v) : Number(v));
  switch (op) {
    case "add":
      return info.float ? -0 : int(0);
    case "multiply":
      return int(1);
    case "maximum":
      return info.min;
    case "minimum":
      return info.max;
    case "and":
      if (info.float) return undefined;
      return t === "pred" ? 1 : t === "u8" ? 255 : int(-1);
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
