// Scalar and array helpers the `js` backend's generated code calls: the semantics that need a
// value more than once (clamp), the storage allocation per element type, element-type
// conversion of whole arrays (dot/convolution operands of another type), and bitcast-convert.
// Each mirrors the reference evaluator (ir/evaluate_*.ts) exactly; the per-opcode scalar kernels
// that the evaluator exports (erf, power, integer division, shifts, TOTALORDER compares) are
// used as they are, so both paths share one definition.

import { converter } from "../../ir/evaluate_elementwise.ts";
import {
  dataFromBytes,
  dataToBytes,
  type LiteralData,
  storageCtor,
} from "../../ir/literal.ts";
import type { ElementType } from "../../ir/shape.ts";

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

/** Reinterprets the little-endian row-major bytes of `data` as elements of `to`. */
export function bitcastArray(data: LiteralData, from: ElementType, to: ElementType): LiteralData {
  return dataFromBytes(to, dataToBytes(from, data));
}
