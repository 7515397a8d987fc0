// Scalar and array helpers the `js` backend's generated code calls: the semantics that need a
// value more than once (clamp), the storage allocation per element type, element-type
// conversion of whole arrays (dot/convolution operands of another type), and bitcast-convert.
// Each mirrors the reference evaluator (ir/evaluate_*.ts) exactly; the per-opcode scalar kernels
// that the evaluator exports (erf, power, integer division, shifts, TOTALORDER compares) are
// used as they are, so both paths share one definition.

import { converter } from "../../ir/evaluate_elementwise.ts";
import {
  bf16BitsToNumber,
  f16BitsToNumber,
  f32ToBF16Bits,
  f32ToF16Bits,
  type LiteralData,
  storageCtor,
} from "../../ir/literal.ts";
import { elementByteSize, type ElementType } from "../../ir/shape.ts";

/** clamp(lo, x, hi) on floats: NaN in lo, x, hi (in that order) wins; else min(hi, max(x, lo)). */
export function clampF(l: number, x: number, h: number): number {
  if (l !== l) return l;
  if (x !== x) return x;
  if (h !== h) return h;
  const m = x < l ? l : x;
  return m < h ? m : h;
}

/** clamp(lo, x, hi) on integers (numbers or bigints). */
export function clampI<T extends number | bigint>(l: T, x: T, h: T): T {
  const m = x < l ? l : x;
  return m < h ? m : h;
}

/** A start index clamped into [0, hi] (dynamic-slice, dynamic-update-slice, gather). */
export function clampIndex(v: number | bigint, hi: number): number {
  const n = Number(v);
  return n < 0 ? 0 : n > hi ? hi : n;
}

/** Zero-filled storage of `n` elements of `type` (the Literal storage classes). */
function allocate(type: ElementType, n: number): LiteralData {
  return new (storageCtor(type))(n);
}

/** `data` (of type `from`) converted element by element to `to`, as the evaluator's convert. */
export function convertArray(data: LiteralData, from: ElementType, to: ElementType): LiteralData {
  if (from === to) return data;
  const f = converter(from, to);
  const out = allocate(to, data.length) as unknown as { [i: number]: number | bigint };
  const src = data as unknown as { [i: number]: number | bigint };
  for (let i = 0; i < data.length; i++) out[i] = f(src[i]!);
  return out as unknown as LiteralData;
}

const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;

/** Little-endian bytes of every element (raw f32 bits, so NaN payloads survive). */
function toBytes(data: LiteralData, type: ElementType): Uint8Array {
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
      case "u8":
        view.setUint8(i, v as number);
        break;
      case "pred":
        throw new Error("bitcast-convert does not take pred");
      default: {
        const never: never = type;
        throw new Error(`unknown element type ${String(never)}`);
      }
    }
  }
  return out;
}

function fromBytes(type: ElementType, bytes: Uint8Array): LiteralData {
  const w = elementByteSize(type);
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
      case "u8":
        out[i] = view.getUint8(i);
        break;
      case "pred":
        throw new Error("bitcast-convert does not produce pred");
      default: {
        const never: never = type;
        throw new Error(`unknown element type ${String(never)}`);
      }
    }
  }
  return data;
}

/** Reinterprets the little-endian row-major bytes of `data` as elements of `to`. */
export function bitcastArray(data: LiteralData, from: ElementType, to: ElementType): LiteralData {
  return fromBytes(to, toBytes(data, from));
}
