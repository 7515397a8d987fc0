// The `js` backend's convolution kernel: XLA's general convolution (any dim labels, strides,
// padding, base and window dilation, window reversal, feature and batch groups) as a direct
// kernel. The kernel weights are packed per run into [group][window position][input feature]
// [output feature] so that, for one output position, every valid window position and input
// feature adds x * w to a row of accumulators over the group's output features (a contiguous
// inner loop). Each output sums window positions in row-major order, then input features, from
// +0, skipping padding and base-dilation holes: the evaluator's order, so float results (double
// accumulators, one rounding) are bit-identical to it. Integers wrap as the evaluator's do.

import type { ConvDimensionNumbers, WindowDim } from "../../ir/attributes.ts";
import type { ElementType } from "../../ir/shape.ts";
import type { Epilogue } from "./kernels_dot.ts";
import { stridesOf } from "../../ir/evaluate_support.ts";

export interface ConvPlan {
  readonly ns: number;
  readonly outBatch: number;
  /** Groups (feature or batch), output features per group, input features per group. */
  readonly G: number;
  readonly Og: number;
  readonly Cg: number;
  readonly fgc: number;
  readonly bgc: number;
  readonly batchGroupSize: number;
  /** Window positions (product of window sizes). */
  readonly P: number;
  readonly lsB: number;
  readonly lsF: number;
  readonly lsS: Int32Array;
  readonly inS: Int32Array;
  readonly osB: number;
  readonly osF: number;
  readonly osS: Int32Array;
  readonly outS: Int32Array;
  readonly wSize: Int32Array;
  readonly stride: Int32Array;
  readonly padLow: Int32Array;
  readonly wdil: Int32Array;
  readonly bdil: Int32Array;
  readonly rev: Uint8Array;
  readonly rsO: number;
  readonly rsI: number;
  readonly rsS: Int32Array;
  /** Packed weights, kept between runs. */
  wp: Float64Array | BigInt64Array | undefined;
}


export function planConv(
  lhs: readonly number[],
  rhs: readonly number[],
  out: readonly number[],
  dn: ConvDimensionNumbers,
  window: readonly WindowDim[],
  fgc: number,
  bgc: number,
  lhsStrides: readonly number[] = stridesOf(lhs),
  rhsStrides: readonly number[] = stridesOf(rhs),
): ConvPlan {
  const ls = lhsStrides;
  const rs = rhsStrides;
  const os = stridesOf(out);
  const outF = rhs[dn.kernelOutputFeature]!;
  const G = Math.max(fgc, bgc);
  const i32 = (xs: readonly number[]) => Int32Array.from(xs);
  return {
    ns: dn.inputSpatial.length,
    outBatch: out[dn.outputBatch]!,
    G,
    Og: outF / G,
    Cg: rhs[dn.kernelInputFeature]!,
    fgc,
    bgc,
    batchGroupSize: lhs[dn.inputBatch]! / bgc,
    P: window.reduce((a, w) => a * w.size, 1),
    lsB: ls[dn.inputBatch]!,
    lsF: ls[dn.inputFeature]!,
    lsS: i32(dn.inputSpatial.map((d) => ls[d]!)),
    inS: i32(dn.inputSpatial.map((d) => lhs[d]!)),
    osB: os[dn.outputBatch]!,
    osF: os[dn.outputFeature]!,
    osS: i32(dn.outputSpatial.map((d) => os[d]!)),
    outS: i32(dn.outputSpatial.map((d) => out[d]!)),
    wSize: i32(window.map((w) => w.size)),
    stride: i32(window.map((w) => w.stride)),
    padLow: i32(window.map((w) => w.padLow)),
    wdil: i32(window.map((w) => w.windowDilation)),
    bdil: i32(window.map((w) => w.baseDilation)),
    rev: Uint8Array.from(window.map((w) => (w.windowReversal ? 1 : 0))),
    rsO: rs[dn.kernelOutputFeature]!,
    rsI: rs[dn.kernelInputFeature]!,
    rsS: i32(dn.kernelSpatial.map((d) => rs[d]!)),
    wp: undefined,
  };
}

type Data = Float32Array | Int32Array | Uint8Array | BigInt64Array;

/** Advances a row-major multi-index over `sizes`; returns false after the last position. */
function next(idx: Int32Array, sizes: Int32Array): boolean {
  for (let k = idx.length - 1; k >= 0; k--) {
    if (++idx[k]! < sizes[k]!) return true;
    idx[k] = 0;
  }
  return false;
}

function packWeights(W: Data, p: ConvPlan, big: boolean): Float64Array | BigInt64Array {
  const n = p.G * p.P * p.Cg * p.Og;
  if (!p.wp || p.wp.length < n || (p.wp instanceof BigInt64Array) !== big) {
    p.wp = big ? new BigInt64Array(n) : new Float64Array(n);
  }
  const wp = p.wp as unknown as { [i: number]: number | bigint };
  const src = W as unknown as { [i: number]: number | bigint };
  const widx = new Int32Array(p.ns);
  for (let wl = 0; wl < p.P; wl++) {
    let sp = 0;
    for (let s = 0; s < p.ns; s++) {
      const kk = p.rev[s] ? p.wSize[s]! - 1 - widx[s]! : widx[s]!;
      sp += kk * p.rsS[s]!;
    }
    for (let g = 0; g < p.G; g++) {
      for (let iz = 0; iz < p.Cg; iz++) {
        const dst = ((g * p.P + wl) * p.Cg + iz) * p.Og;
        for (let oo = 0; oo < p.Og; oo++) {
          wp[dst + oo] = src[(g * p.Og + oo) * p.rsO + iz * p.rsI + sp]!;
        }
      }
    }
    next(widx, p.wSize);
  }
  return p.wp;
}

// The kernel element types (runtime/kernel/program.ts declines the others before lowering).
const KIND: Partial<Record<ElementType, number>> = {
  f32: 0,
  f64: 0,
  f16: 0,
  bf16: 0,
  s32: 1,
  u8: 2,
  pred: 3,
  s64: 4,
};

/**
 * out = convolution(L, W) per the plan, in the element type `type` (operands already of that
 * type). `round` rounds a float sum to the type (null for f32: the store rounds); `epi(b, b+1)`
 * runs after each finished output batch (kOutput fusions).
 */
export function conv(
  type: ElementType,
  L: Data,
  W: Data,
  out: Data,
  p: ConvPlan,
  round: ((x: number) => number) | null,
  epi: Epilogue | null,
): void {
  const kind = KIND[type];
  if (kind === undefined) throw new Error(`convolution: ${type} has no kernel type`);
  const big = kind === 4;
  const Wp = packWeights(W, p, big);
  const { ns, G, Og, Cg, P, lsB, lsF, lsS, inS, osB, osF, osS, outS } = p;
  const { stride, padLow, wdil, bdil, wSize } = p;
  const acc = new Float64Array(Og);
  const bacc = new BigInt64Array(big ? Og : 0);
  const oidx = new Int32Array(ns);
  const widx = new Int32Array(ns);
  let count = 1;
  for (let s = 0; s < ns; s++) count *= outS[s]!;
  const Lf = L as Float32Array;
  const Wf = Wp as Float64Array;
  const o = out as unknown as { [i: number]: number | bigint };
  for (let b = 0; b < p.outBatch; b++) {
    oidx.fill(0);
    for (let pos = 0; pos < count; pos++) {
      let obase = b * osB;
      for (let s = 0; s < ns; s++) obase += oidx[s]! * osS[s]!;
      for (let g = 0; g < G; g++) {
        acc.fill(0);
        if (big) bacc.fill(0n);
        const batch = b + (p.bgc > 1 ? g * p.batchGroupSize : 0);
        const lbase = batch * lsB + (p.fgc > 1 ? g * Cg : 0) * lsF;
        widx.fill(0);
        for (let wl = 0; wl < P; wl++, next(widx, wSize)) {
          let lsp = 0;
          let valid = true;
          for (let s = 0; s < ns; s++) {
            const u = oidx[s]! * stride[s]! - padLow[s]! + widx[s]! * wdil[s]!;
            if (u % bdil[s]! !== 0) {
              valid = false;
              break;
            }
            const x = u / bdil[s]!;
            if (x < 0 || x >= inS[s]!) {
              valid = false;
              break;
            }
            lsp += x * lsS[s]!;
          }
          if (!valid) continue;
          const wrow = (g * P + wl) * Cg * Og;
          const lrow = lbase + lsp;
          if (kind === 0) {
            for (let iz = 0; iz < Cg; iz++) {
              const xv = Lf[lrow + iz * lsF]!;
              const wp = wrow + iz * Og;
              for (let oo = 0; oo < Og; oo++) acc[oo] = acc[oo]! + xv * Wf[wp + oo]!;
            }
          } else {
            macInt(kind, L, Wp, acc, bacc, lrow, lsF, wrow, Cg, Og);
          }
        }
        const ob = obase + g * Og * osF;
        if (big) for (let oo = 0; oo < Og; oo++) o[ob + oo * osF] = bacc[oo]!;
        else if (round) for (let oo = 0; oo < Og; oo++) o[ob + oo * osF] = round(acc[oo]!);
        else for (let oo = 0; oo < Og; oo++) o[ob + oo * osF] = acc[oo]!;
      }
      next(oidx, outS);
    }
    if (epi) epi(b, b + 1);
  }
}

function macInt(
  kind: number,
  L: Data,
  Wp: Float64Array | BigInt64Array,
  acc: Float64Array,
  bacc: BigInt64Array,
  lrow: number,
  lsF: number,
  wrow: number,
  Cg: number,
  Og: number,
): void {
  for (let iz = 0; iz < Cg; iz++) {
    const wp = wrow + iz * Og;
    if (kind === 4) {
      const xv = (L as BigInt64Array)[lrow + iz * lsF]!;
      const w = Wp as BigInt64Array;
      // A BigInt64Array store wraps to 64 bits, as the evaluator's asIntN(64, ...).
      for (let oo = 0; oo < Og; oo++) bacc[oo] = bacc[oo]! + xv * w[wp + oo]!;
      continue;
    }
    const xv = (L as Int32Array | Uint8Array)[lrow + iz * lsF]!;
    const w = Wp as Float64Array;
    if (kind === 1) {
      for (let oo = 0; oo < Og; oo++) acc[oo] = (acc[oo]! + Math.imul(xv, w[wp + oo]!)) | 0;
    } else if (kind === 2) {
      for (let oo = 0; oo < Og; oo++) acc[oo] = (acc[oo]! + xv * w[wp + oo]!) & 255;
    } else {
      for (let oo = 0; oo < Og; oo++) acc[oo] = acc[oo]! | (xv & w[wp + oo]!);
    }
  }
}
