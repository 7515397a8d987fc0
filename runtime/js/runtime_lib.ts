// Scalar and array helpers the `js` backend's generated code calls: the semantics that need a
// value more than once (clamp) and bitcast-convert.
// Each mirrors the reference evaluator (ir/evaluate_*.ts) exactly; the per-opcode scalar kernels
// that the evaluator exports (erf, power, integer division, shifts, TOTALORDER compares) are
// used as they are, so both paths share one definition.

import { dataFromBytes, dataToBytes, type LiteralData } from "../../ir/literal.ts";
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

/** Reinterprets the little-endian row-major bytes of `data` as elements of `to`. */
export function bitcastArray(data: LiteralData, from: ElementType, to: ElementType): LiteralData {
  return dataFromBytes(to, dataToBytes(from, data));
}
