// The `js` backend's dot kernels. Any dot_general is first put in canonical form
// [batch, M, K] x [batch, K, N] -> [batch, M, N] by offset tables (the offset of a batch, row,
// column or contracting position is a sum over its own dims, so three small tables address any
// layout and any number of batch/contracting/free dims without moving data). Floats use a
// packed, register-blocked 4x4 kernel: B is packed per batch into 4-column panels and A into a
// 4-row panel, both as Float64Array, and 16 double accumulators run over K in order. Products of
// f32 values are exact in double and each output's sum runs k = 0..K-1 from +0 exactly as the
// evaluator's, then rounds once, so results are bit-identical to it. After each 4-row panel the
// optional epilogue runs on those rows while they are in cache (kOutput fusions). Integer and
// pred dots use a plain loop with the evaluator's wrapping accumulation.

import type { DotDimensionNumbers } from "../../ir/attributes.ts";
import type { ElementType } from "../../ir/shape.ts";
import { stridesOf } from "../../ir/evaluate_support.ts";

export interface DotPlan {
  readonly nb: number;
  readonly M: number;
  readonly N: number;
  readonly K: number;
  /** lhs offsets of batch, row and contracting positions. */
  readonly aB: Int32Array;
  readonly aM: Int32Array;
  readonly aK: Int32Array;
  /** rhs offsets of batch, contracting and column positions. */
  readonly bB: Int32Array;
  readonly bK: Int32Array;
  readonly bN: Int32Array;
  /** Packing buffers, kept between runs. */
  bp: Float64Array | undefined;
  ap: Float64Array | undefined;
}


/** Offsets of every position of `sizes` (row-major) with the given element strides. */
function offsets(sizes: readonly number[], strides: readonly number[]): Int32Array {
  let n = 1;
  for (const s of sizes) n *= s;
  const out = new Int32Array(n);
  const idx = new Array<number>(sizes.length).fill(0);
  for (let l = 0; l < n; l++) {
    let o = 0;
    for (let k = 0; k < sizes.length; k++) o += idx[k]! * strides[k]!;
    out[l] = o;
    for (let k = sizes.length - 1; k >= 0; k--) {
      if (++idx[k]! < sizes[k]!) break;
      idx[k] = 0;
    }
  }
  return out;
}

/**
 * The canonical form of a dot of `lhs` and `rhs` dims: batch dims in the order listed,
 * contracting positions row-major in the order listed, free dims ascending (the evaluator's and
 * XLA's result order: batch, lhs free, rhs free). Operands may be strided views (a transposed
 * or broadcast array read in place): their element strides per dim default to row-major.
 */
export function planDot(
  lhs: readonly number[],
  rhs: readonly number[],
  dn: DotDimensionNumbers,
  lhsStrides: readonly number[] = stridesOf(lhs),
  rhsStrides: readonly number[] = stridesOf(rhs),
): DotPlan {
  const ls = lhsStrides;
  const rs = rhsStrides;
  const free = (rank: number, used: readonly number[]) =>
    Array.from({ length: rank }, (_, i) => i).filter((i) => !used.includes(i));
  const lf = free(lhs.length, [...dn.lhsBatch, ...dn.lhsContracting]);
  const rf = free(rhs.length, [...dn.rhsBatch, ...dn.rhsContracting]);
  const bs = dn.lhsBatch.map((d) => lhs[d]!);
  const cs = dn.lhsContracting.map((d) => lhs[d]!);
  const prod = (xs: readonly number[]) => xs.reduce((a, b) => a * b, 1);
  return {
    nb: prod(bs),
    M: prod(lf.map((d) => lhs[d]!)),
    N: prod(rf.map((d) => rhs[d]!)),
    K: prod(cs),
    aB: offsets(bs, dn.lhsBatch.map((d) => ls[d]!)),
    aM: offsets(lf.map((d) => lhs[d]!), lf.map((d) => ls[d]!)),
    aK: offsets(cs, dn.lhsContracting.map((d) => ls[d]!)),
    bB: offsets(bs, dn.rhsBatch.map((d) => rs[d]!)),
    bK: offsets(cs, dn.rhsContracting.map((d) => rs[d]!)),
    bN: offsets(rf.map((d) => rhs[d]!), rf.map((d) => rs[d]!)),
    bp: undefined,
    ap: undefined,
  };
}

export type Epilogue = (lo: number, hi: number) => void;

/**
 * out[b, m, n] = round(sum_k A[b, m, k] * B[b, k, n]) for float element types, accumulating in
 * double in k order. `epi(lo, hi)` is called with each finished range of rows b * M + m.
 * Only rows m < mLim and columns n < nLim are computed (an extent hint: the rest of `out` is
 * never read), over contracting positions k < kLim; the layout stays M x N (x K).
 */
export function dotFloat(
  A: Float32Array,
  B: Float32Array,
  out: Float32Array,
  p: DotPlan,
  round: ((x: number) => number) | null,
  epi: Epilogue | null,
  mLim = p.M,
  nLim = p.N,
  kLim = p.K,
): void {
  const { nb, M, N, K, aB, aM, aK, bB, bK, bN } = p;
  const Mc = mLim < M ? mLim : M;
  const Nc = nLim < N ? nLim : N;
  // Contracting positions past kLim are zero on both sides (a reduction hint): skipping them
  // leaves each sum exactly as the unpadded one.
  const Kc = kLim < K ? (kLim > 0 ? kLim : 0) : K;
  if (nb * Mc * Nc === 0) return;
  const nP = (Nc + 3) >> 2;
  if (!p.bp || p.bp.length < nP * K * 4) p.bp = new Float64Array(nP * K * 4);
  if (!p.ap || p.ap.length < K * 4) p.ap = new Float64Array(K * 4);
  const Bp = p.bp;
  const Ap = p.ap;
  for (let b = 0; b < nb; b++) {
    const ab = aB[b]!;
    const bb = bB[b]!;
    // B as column panels [nP][K][4], zero-padded past N.
    for (let jp = 0; jp < nP; jp++) {
      const base = jp * K * 4;
      for (let c = 0; c < 4; c++) {
        const n = jp * 4 + c;
        if (n < Nc) {
          const bn = bb + bN[n]!;
          for (let k = 0; k < Kc; k++) Bp[base + k * 4 + c] = B[bn + bK[k]!]!;
        } else {
          for (let k = 0; k < Kc; k++) Bp[base + k * 4 + c] = 0;
        }
      }
    }
    for (let ip = 0; ip < Mc; ip += 4) {
      const mr = Mc - ip < 4 ? Mc - ip : 4;
      for (let r = 0; r < 4; r++) {
        if (r < mr) {
          const am = ab + aM[ip + r]!;
          for (let k = 0; k < Kc; k++) Ap[k * 4 + r] = A[am + aK[k]!]!;
        } else {
          for (let k = 0; k < Kc; k++) Ap[k * 4 + r] = 0;
        }
      }
      const row0 = (b * M + ip) * N;
      for (let jp = 0; jp < nP; jp++) {
        let c00 = 0, c01 = 0, c02 = 0, c03 = 0;
        let c10 = 0, c11 = 0, c12 = 0, c13 = 0;
        let c20 = 0, c21 = 0, c22 = 0, c23 = 0;
        let c30 = 0, c31 = 0, c32 = 0, c33 = 0;
        let pb = jp * K * 4;
        for (let pa = 0, end = Kc * 4; pa < end; pa += 4, pb += 4) {
          const a0 = Ap[pa]!;
          const a1 = Ap[pa + 1]!;
          const a2 = Ap[pa + 2]!;
          const a3 = Ap[pa + 3]!;
          const b0 = Bp[pb]!;
          const b1 = Bp[pb + 1]!;
          const b2 = Bp[pb + 2]!;
          const b3 = Bp[pb + 3]!;
          c00 += a0 * b0;
          c01 += a0 * b1;
          c02 += a0 * b2;
          c03 += a0 * b3;
          c10 += a1 * b0;
          c11 += a1 * b1;
          c12 += a1 * b2;
          c13 += a1 * b3;
          c20 += a2 * b0;
          c21 += a2 * b1;
          c22 += a2 * b2;
          c23 += a2 * b3;
          c30 += a3 * b0;
          c31 += a3 * b1;
          c32 += a3 * b2;
          c33 += a3 * b3;
        }
        const j = jp * 4;
        const nc = Nc - j < 4 ? Nc - j : 4;
        store(out, row0 + j, N, mr, nc, round, c00, c01, c02, c03, 0);
        if (mr > 1) store(out, row0 + j, N, mr, nc, round, c10, c11, c12, c13, 1);
        if (mr > 2) store(out, row0 + j, N, mr, nc, round, c20, c21, c22, c23, 2);
        if (mr > 3) store(out, row0 + j, N, mr, nc, round, c30, c31, c32, c33, 3);
      }
      if (epi) epi(b * M + ip, b * M + ip + mr);
    }
  }
}

function store(
  out: Float32Array,
  at: number,
  N: number,
  _mr: number,
  nc: number,
  round: ((x: number) => number) | null,
  x0: number,
  x1: number,
  x2: number,
  x3: number,
  r: number,
): void {
  const o = at + r * N;
  if (round) {
    out[o] = round(x0);
    if (nc > 1) out[o + 1] = round(x1);
    if (nc > 2) out[o + 2] = round(x2);
    if (nc > 3) out[o + 3] = round(x3);
  } else {
    out[o] = x0;
    if (nc > 1) out[o + 1] = x1;
    if (nc > 2) out[o + 2] = x2;
    if (nc > 3) out[o + 3] = x3;
  }
}

type IntData = Int32Array | Uint8Array | BigInt64Array;

/** Integer and pred dots: the evaluator's wrapping multiply-accumulate, in k order. */
export function dotInt(
  type: ElementType,
  A: IntData,
  B: IntData,
  out: IntData,
  p: DotPlan,
): void {
  const { nb, M, N, K, aB, aM, aK, bB, bK, bN } = p;
  for (let b = 0; b < nb; b++) {
    for (let m = 0; m < M; m++) {
      const a0 = aB[b]! + aM[m]!;
      const o0 = (b * M + m) * N;
      for (let n = 0; n < N; n++) {
        const b0 = bB[b]! + bN[n]!;
        switch (type) {
          case "s32": {
            const x = A as Int32Array;
            const y = B as Int32Array;
            let s = 0;
            for (let k = 0; k < K; k++) s = (s + Math.imul(x[a0 + aK[k]!]!, y[b0 + bK[k]!]!)) | 0;
            (out as Int32Array)[o0 + n] = s;
            break;
          }
          case "u8": {
            const x = A as Uint8Array;
            const y = B as Uint8Array;
            let s = 0;
            for (let k = 0; k < K; k++) s = (s + x[a0 + aK[k]!]! * y[b0 + bK[k]!]!) & 255;
            (out as Uint8Array)[o0 + n] = s;
            break;
          }
          case "pred": {
            const x = A as Uint8Array;
            const y = B as Uint8Array;
            let s = 0;
            for (let k = 0; k < K; k++) s = s | (x[a0 + aK[k]!]! & y[b0 + bK[k]!]!);
            (out as Uint8Array)[o0 + n] = s;
            break;
          }
          case "s64": {
            const x = A as BigInt64Array;
            const y = B as BigInt64Array;
            let s = 0n;
            for (let k = 0; k < K; k++) {
              s = BigInt.asIntN(64, s + x[a0 + aK[k]!]! * y[b0 + bK[k]!]!);
            }
            (out as BigInt64Array)[o0 + n] = s;
            break;
          }
          default:
            throw new Error(`dotInt: ${type} is not an integer or pred type`);
        }
      }
    }
  }
}
