// Literals: an array value of the IR (element type, dims, a typed array in row-major order).
// Storage per element type: f32, f16 and bf16 in a Float32Array (f16/bf16 values are always
// exactly representable in their type: every write rounds to nearest even), f64 in a
// Float64Array, each integer type in the typed array of its width and signedness (s8 Int8Array,
// s16 Int16Array, s32 Int32Array, u16 Uint16Array, u32 Uint32Array; s64 and u64 in BigInt64Array
// and BigUint64Array, exact 64-bit semantics), s4 in an Int8Array and u4 in a Uint8Array (values
// in [-8, 7] and [0, 15]), u8 and pred (0 or 1) in a Uint8Array.
// Also the f16/bf16 bit conversions used by the proto form and later by safetensors.

import { roundToSmallFloat, smallFloatBits, smallFloatFromBits } from "./small_floats.ts";
import { ELEMENT_TYPE_INFO } from "./element_types.ts";
import {
  arrayShape,
  type ArrayShape,
  elementByteSize,
  type ElementType,
  shapeToString,
} from "./shape.ts";
import { arraySizeProblem } from "./sizes.ts";

export type LiteralData =
  | Float32Array
  | Float64Array
  | Int8Array
  | Int16Array
  | Int32Array
  | BigInt64Array
  | Uint8Array
  | Uint16Array
  | Uint32Array
  | BigUint64Array;
export type ScalarValue = number | bigint | boolean;

export class Literal {
  readonly type: ElementType;
  readonly dims: readonly number[];
  readonly data: LiteralData;

  /** Wraps `data` without copying; use `literal()` to build one from user values. */
  constructor(type: ElementType, dims: readonly number[], data: LiteralData) {
    const n = dims.reduce((a, b) => a * b, 1);
    if (data.length !== n) {
      throw new Error(
        `Literal ${type}[${dims.join(",")}] needs ${n} elements, got ${data.length}`,
      );
    }
    if (!(data instanceof storageCtor(type))) {
      throw new Error(`Literal ${type}: storage must be a ${storageCtor(type).name}`);
    }
    this.type = type;
    this.dims = [...dims];
    this.data = data;
  }

  get shape(): ArrayShape {
    return arrayShape(this.type, this.dims);
  }

  get size(): number {
    return this.data.length;
  }

  /** Element i in row-major order: a number (bigint for s64 and u64; 0/1 for pred). */
  get(i: number): number | bigint {
    return this.data[i]!;
  }

  /** Elements as plain numbers (s64 converted with Number()). */
  toNumbers(): number[] {
    return Array.from(this.data as ArrayLike<number | bigint>, (v) => Number(v));
  }

  /** Nested arrays in row-major order (booleans for pred, bigints for s64). */
  toArray(): unknown {
    const flat: unknown[] = Array.from(this.data as ArrayLike<number | bigint>, (v) =>
      this.type === "pred" ? v !== 0 : v,
    );
    if (this.dims.length === 0) return flat[0];
    const build = (dim: number, offset: number, stride: number): unknown[] => {
      const size = this.dims[dim]!;
      const inner = stride / Math.max(size, 1);
      const out: unknown[] = [];
      for (let i = 0; i < size; i++) {
        out.push(
          dim === this.dims.length - 1
            ? flat[offset + i]
            : build(dim + 1, offset + i * inner, inner),
        );
      }
      return out;
    };
    return build(0, 0, this.data.length);
  }

  /** `f32[2,2] [[1, -0], [NaN, Infinity]]`: every value as JS writes it, -0 kept. */
  toString(): string {
    const fmt = (v: unknown): string =>
      Array.isArray(v)
        ? `[${v.map(fmt).join(", ")}]`
        : Object.is(v, -0)
          ? "-0"
          : String(v);
    return `${shapeToString(this.shape)} ${fmt(this.toArray())}`;
  }
}

export type StorageConstructor =
  | Float32ArrayConstructor
  | Float64ArrayConstructor
  | Int8ArrayConstructor
  | Int16ArrayConstructor
  | Int32ArrayConstructor
  | BigInt64ArrayConstructor
  | Uint8ArrayConstructor
  | Uint16ArrayConstructor
  | Uint32ArrayConstructor
  | BigUint64ArrayConstructor;

const STORAGE_CTORS: { readonly [K in ElementType]: StorageConstructor } = {
  pred: Uint8Array,
  s4: Int8Array,
  s8: Int8Array,
  s16: Int16Array,
  s32: Int32Array,
  s64: BigInt64Array,
  u4: Uint8Array,
  u8: Uint8Array,
  u16: Uint16Array,
  u32: Uint32Array,
  u64: BigUint64Array,
  f16: Float32Array,
  bf16: Float32Array,
  f32: Float32Array,
  f64: Float64Array,
  f8e5m2: Float32Array,
  f8e4m3: Float32Array,
  f8e3m4: Float32Array,
  f8e4m3fn: Float32Array,
  f8e4m3fnuz: Float32Array,
  f8e5m2fnuz: Float32Array,
  f8e4m3b11fnuz: Float32Array,
  // A token literal is the evaluator's value of a token: one 0 byte, no meaning.
  token: Uint8Array,
};

export function storageCtor(type: ElementType): StorageConstructor {
  const c = STORAGE_CTORS[type];
  if (c === undefined) throw new Error(`unknown element type ${String(type)}`);
  return c;
}

/** Zero-filled storage for n elements of `type`; a size no array can have is an error. */
export function allocate(type: ElementType, n: number): LiteralData {
  const problem = arraySizeProblem(type, n);
  if (problem !== null) throw new Error(`cannot allocate an array: ${problem}`);
  return new (storageCtor(type))(n);
}

/**
 * Converts one value to its stored form for `type`, or throws a message naming the problem.
 * Floats round to the type; integers must be integral and in range; pred takes booleans or 0/1.
 */
export function toStored(type: ElementType, v: ScalarValue): number | bigint {
  switch (type) {
    case "f32":
      return Math.fround(Number(v));
    case "f64":
      return Number(v);
    case "f16":
      return roundToF16(Number(v));
    case "bf16":
      return roundToBF16(Number(v));
    case "pred": {
      if (typeof v === "boolean") return v ? 1 : 0;
      if (v === 0 || v === 1 || v === 0n || v === 1n) return Number(v);
      throw new Error(`pred value must be true/false or 0/1, got ${String(v)}`);
    }
    case "s64":
    case "u64": {
      const { min, max } = ELEMENT_TYPE_INFO[type];
      let b: bigint;
      if (typeof v === "bigint") b = v;
      else {
        const n = Number(v);
        if (!Number.isInteger(n)) throw new Error(`${type} value must be an integer, got ${n}`);
        if (!Number.isSafeInteger(n)) {
          throw new Error(`${type} value ${n} is beyond Number.MAX_SAFE_INTEGER; pass a bigint`);
        }
        b = BigInt(n);
      }
      if (b < (min as bigint) || b > (max as bigint)) {
        throw new Error(`${b} is out of range for ${type}`);
      }
      return b;
    }
    case "token":
      throw new Error("a token has no values");
    case "f8e5m2":
    case "f8e4m3":
    case "f8e3m4":
    case "f8e4m3fn":
    case "f8e4m3fnuz":
    case "f8e5m2fnuz":
    case "f8e4m3b11fnuz":
      return roundToSmallFloat(type, Number(v));
    case "s4":
    case "s8":
    case "s16":
    case "s32":
    case "u4":
    case "u8":
    case "u16":
    case "u32": {
      const n = typeof v === "bigint" ? Number(v) : Number(v);
      const { min: lo, max: hi } = ELEMENT_TYPE_INFO[type];
      if (!Number.isInteger(n)) throw new Error(`${type} value must be an integer, got ${n}`);
      if (n < (lo as number) || n > (hi as number)) {
        throw new Error(`${n} is out of range for ${type} [${lo}, ${hi}]`);
      }
      return n;
    }
    default: {
      const never: never = type;
      throw new Error(`unknown element type ${String(never)}`);
    }
  }
}

/**
 * `literal("f32", [2, 4], [...])`: a literal from flat values in row-major order (numbers,
 * booleans, bigints or a typed array). Values are converted to the element type's storage;
 * a wrong count or a value the type cannot hold is an error.
 */
export function literal(
  type: ElementType,
  dims: readonly number[],
  values: ArrayLike<ScalarValue> | Iterable<ScalarValue>,
): Literal {
  for (const [i, d] of dims.entries()) {
    if (!Number.isInteger(d) || d < 0) {
      throw new Error(`literal(${type}, [${dims.join(",")}]): dim ${i} must be an integer >= 0`);
    }
  }
  const list: ArrayLike<ScalarValue> =
    typeof (values as ArrayLike<ScalarValue>).length === "number"
      ? (values as ArrayLike<ScalarValue>)
      : Array.from(values as Iterable<ScalarValue>);
  const n = dims.reduce((a, b) => a * b, 1);
  if (list.length !== n) {
    throw new Error(
      `literal(${type}, [${dims.join(",")}]): expected ${n} values, got ${list.length}`,
    );
  }
  const data = allocate(type, n);
  for (let i = 0; i < n; i++) {
    try {
      (data as unknown as (number | bigint)[])[i] = toStored(type, list[i]!);
    } catch (e) {
      throw new Error(`literal(${type}, [${dims.join(",")}]): value ${i}: ${(e as Error).message}`);
    }
  }
  return new Literal(type, dims, data);
}

/** A rank-0 literal. */
export function scalarLiteral(type: ElementType, value: ScalarValue): Literal {
  return literal(type, [], [value]);
}

/** A literal of `dims` with every element equal to `value`. */
export function filledLiteral(type: ElementType, dims: readonly number[], value: ScalarValue) {
  const n = dims.reduce((a, b) => a * b, 1);
  const data = allocate(type, n);
  const v = toStored(type, value);
  (data as { fill(v: number | bigint): unknown }).fill(v);
  return new Literal(type, dims, data);
}

/** Same type, dims and bitwise-identical values (NaN equals NaN; -0 differs from +0). */
export function literalsIdentical(a: Literal, b: Literal): boolean {
  if (a.type !== b.type || a.dims.length !== b.dims.length) return false;
  if (!a.dims.every((d, i) => d === b.dims[i])) return false;
  for (let i = 0; i < a.data.length; i++) {
    if (!Object.is(a.data[i], b.data[i])) return false;
  }
  return true;
}

// ---- f16 and bf16 -------------------------------------------------------------------------

const f32Buf = new Float32Array(1);
const u32Buf = new Uint32Array(f32Buf.buffer);

/** IEEE binary16 bits of `v`, rounding the f32 value of v to nearest even (as XLA does). */
export function f32ToF16Bits(v: number): number {
  f32Buf[0] = v;
  const x = u32Buf[0]!;
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  const mant = x & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant !== 0 ? 0x200 | (mant >>> 13) : 0);
  const e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    const shift = 14 - e;
    if (shift > 24) return sign;
    const m = mant | 0x800000;
    const h = m >>> shift;
    const rem = m & ((1 << shift) - 1);
    const half = 1 << (shift - 1);
    return sign | (rem > half || (rem === half && (h & 1) !== 0) ? h + 1 : h);
  }
  const h = (e << 10) | (mant >>> 13);
  const rem = mant & 0x1fff;
  return sign | (rem > 0x1000 || (rem === 0x1000 && (h & 1) !== 0) ? h + 1 : h);
}

export function f16BitsToNumber(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const e = (h >>> 10) & 0x1f;
  const m = h & 0x3ff;
  if (e === 0) return sign * m * 2 ** -24;
  if (e === 0x1f) return m !== 0 ? NaN : sign * Infinity;
  return sign * (1 + m / 1024) * 2 ** (e - 15);
}

/** bfloat16 bits of `v` (the top half of its f32 bits, rounded to nearest even). */
export function f32ToBF16Bits(v: number): number {
  f32Buf[0] = v;
  const x = u32Buf[0]!;
  if ((x & 0x7f800000) === 0x7f800000 && (x & 0x7fffff) !== 0) return (x >>> 16) | 0x40;
  const lsb = (x >>> 16) & 1;
  return ((x + 0x7fff + lsb) >>> 16) & 0xffff;
}

export function bf16BitsToNumber(h: number): number {
  u32Buf[0] = (h & 0xffff) << 16;
  return f32Buf[0]!;
}

export function roundToF16(v: number): number {
  return f16BitsToNumber(f32ToF16Bits(v));
}

export function roundToBF16(v: number): number {
  return bf16BitsToNumber(f32ToBF16Bits(v));
}

// ---- Bytes ----------------------------------------------------------------------------------

const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;

/**
 * The little-endian bytes of every element of `data` (stored as `type`), in row-major order:
 * f16/bf16 as their 16 bits, f32 as its raw bits (so NaN payloads survive), s64/u64 as 8 bytes,
 * s4/u4 one per byte (the value's low 4 bits, as XLA stores them unpacked).
 * pred has no defined bit layout here and is refused.
 */
export function dataToBytes(type: ElementType, data: LiteralData): Uint8Array {
  const out = new Uint8Array(data.length * elementByteSize(type));
  if (type === "f32" && LITTLE_ENDIAN) {
    out.set(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
    return out;
  }
  const view = new DataView(out.buffer);
  for (let i = 0; i < data.length; i++) {
    const v = data[i]!;
    switch (type) {
      case "f32":
        view.setFloat32(i * 4, v as number, true);
        break;
      case "f64":
        view.setFloat64(i * 8, v as number, true);
        break;
      case "f16":
        view.setUint16(i * 2, f32ToF16Bits(v as number), true);
        break;
      case "bf16":
        view.setUint16(i * 2, f32ToBF16Bits(v as number), true);
        break;
      case "s32":
        view.setInt32(i * 4, v as number, true);
        break;
      case "s64":
        view.setBigInt64(i * 8, v as bigint, true);
        break;
      case "u64":
        view.setBigUint64(i * 8, v as bigint, true);
        break;
      case "s4":
      case "s8":
        view.setInt8(i, v as number);
        break;
      case "u4":
      case "u8":
        view.setUint8(i, v as number);
        break;
      case "s16":
        view.setInt16(i * 2, v as number, true);
        break;
      case "u16":
        view.setUint16(i * 2, v as number, true);
        break;
      case "u32":
        view.setUint32(i * 4, v as number, true);
        break;
      case "pred":
        throw new Error("pred values have no byte layout to reinterpret");
      case "token":
        throw new Error("a token has no bytes");
      case "f8e5m2":
      case "f8e4m3":
      case "f8e3m4":
      case "f8e4m3fn":
      case "f8e4m3fnuz":
      case "f8e5m2fnuz":
      case "f8e4m3b11fnuz":
        view.setUint8(i, smallFloatBits(type, v as number));
        break;
      default: {
        const never: never = type;
        throw new Error(`unknown element type ${String(never)}`);
      }
    }
  }
  return out;
}

/** Elements of `type` read from little-endian row-major bytes (the inverse of dataToBytes). */
export function dataFromBytes(type: ElementType, bytes: Uint8Array): LiteralData {
  const w = elementByteSize(type);
  if (bytes.length % w !== 0) {
    throw new Error(`${bytes.length} bytes are not a whole number of ${type} elements`);
  }
  const n = bytes.length / w;
  const data = allocate(type, n);
  if (type === "f32" && LITTLE_ENDIAN) {
    new Uint8Array(data.buffer).set(bytes);
    return data;
  }
  const out = data as unknown as { [i: number]: number | bigint };
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (let i = 0; i < n; i++) {
    switch (type) {
      case "f32":
        out[i] = view.getFloat32(i * 4, true);
        break;
      case "f64":
        out[i] = view.getFloat64(i * 8, true);
        break;
      case "f16":
        out[i] = f16BitsToNumber(view.getUint16(i * 2, true));
        break;
      case "bf16":
        out[i] = bf16BitsToNumber(view.getUint16(i * 2, true));
        break;
      case "s32":
        out[i] = view.getInt32(i * 4, true);
        break;
      case "s64":
        out[i] = view.getBigInt64(i * 8, true);
        break;
      case "u64":
        out[i] = view.getBigUint64(i * 8, true);
        break;
      case "s8":
        out[i] = view.getInt8(i);
        break;
      case "u8":
        out[i] = view.getUint8(i);
        break;
      case "s4":
        // The low 4 bits, sign-extended (XLA keeps one s4 per byte).
        out[i] = (view.getUint8(i) << 28) >> 28;
        break;
      case "u4":
        out[i] = view.getUint8(i) & 15;
        break;
      case "s16":
        out[i] = view.getInt16(i * 2, true);
        break;
      case "u16":
        out[i] = view.getUint16(i * 2, true);
        break;
      case "u32":
        out[i] = view.getUint32(i * 4, true);
        break;
      case "pred":
        throw new Error("pred values have no byte layout to reinterpret");
      case "f8e5m2":
      case "f8e4m3":
      case "f8e3m4":
      case "f8e4m3fn":
      case "f8e4m3fnuz":
      case "f8e5m2fnuz":
      case "f8e4m3b11fnuz":
        out[i] = smallFloatFromBits(type, view.getUint8(i));
        break;
      case "token":
        throw new Error("a token has no bytes");
      default: {
        const never: never = type;
        throw new Error(`unknown element type ${String(never)}`);
      }
    }
  }
  return data;
}
