// Contractions of the reference evaluator: dot (general: batch and contracting dims; result dims
// are batch, lhs free, rhs free) and convolution (XLA's full semantics: strides, padding, base
// and window dilation, window reversal, feature_group_count, batch_group_count, arbitrary
// dimension numbers; the index arithmetic follows HloEvaluator's convolution). Operands of
// another element type are first converted to the result type, as XLA's evaluator does. Floats
// accumulate in double and round once at the end; integers wrap (the evaluator's int64
// accumulation then cast gives the same bits for dot; for convolution XLA's evaluator saturates
// instead, which no backend does, so Kiln wraps for both).

import { wrapInteger } from "./element_types.ts";
import { allocate, Literal } from "./literal.ts";
import type { Instruction } from "./module.ts";
import type { ElementType } from "./shape.ts";
import { converter } from "./evaluate_elementwise.ts";
import {
  asLiteral,
  attr,
  elems,
  fail,
  forEachIndex,
  mutableElems,
  product,
  roundFor,
  stridesOf,
  valueShapeString,
  type Elements,
  type OpImpl,
  type Scalar,
} from "./evaluate_support.ts";

/** Multiply-accumulate in the result type's arithmetic. */
interface Accumulator {
  readonly zero: Scalar;
  mac(acc: Scalar, a: Scalar, b: Scalar): Scalar;
}

function accumulatorFor(t: ElementType): Accumulator {
  switch (t) {
    case "f32":
    case "f16":
    case "bf16":
    case "f64":
    case "f8e5m2":
    case "f8e4m3":
    case "f8e3m4":
    case "f8e4m3fn":
    case "f8e4m3fnuz":
    case "f8e5m2fnuz":
    case "f8e4m3b11fnuz":
      return { zero: 0, mac: (acc, a, b) => (acc as number) + (a as number) * (b as number) };
    case "s32":
      return {
        zero: 0,
        mac: (acc, a, b) => ((acc as number) + Math.imul(a as number, b as number)) | 0,
      };
    case "u8":
      return {
        zero: 0,
        mac: (acc, a, b) => ((acc as number) + (a as number) * (b as number)) & 255,
      };
    case "s64":
      return {
        zero: 0n,
        mac: (acc, a, b) => BigInt.asIntN(64, (acc as bigint) + (a as bigint) * (b as bigint)),
      };
    case "pred":
      return { zero: 0, mac: (acc, a, b) => (acc as number) | ((a as number) & (b as number)) };
    case "s4":
    case "s8":
    case "s16":
    case "u4":
    case "u16":
    case "u32": {
      const wrap = wrapInteger(t);
      return {
        zero: 0,
        mac: (acc, a, b) => wrap((acc as number) + Math.imul(a as number, b as number)),
      };
    }
    case "token":
      return fail("a token has no arithmetic");
    case "u64":
      return {
        zero: 0n,
        mac: (acc, a, b) => BigInt.asUintN(64, (acc as bigint) + (a as bigint) * (b as bigint)),
      };
    default: {
      const never: never = t;
      return fail(`no multiply-accumulate for ${String(never)}`);
    }
  }
}

function resultType(instr: Instruction): ElementType {
  if (instr.shape.kind !== "array") fail("declared shape must be an array");
  return instr.shape.type;
}

/** The operand converted to type t (a no-op when it already is t). */
function asType(x: Literal, t: ElementType): Literal {
  if (x.type === t) return x;
  const f = converter(x.type, t);
  const data = allocate(t, x.size);
  const out = mutableElems(data);
  const src = elems(x);
  for (let i = 0; i < x.size; i++) out[i] = f(src[i]!);
  return new Literal(t, x.dims, data);
}

function checkDimList(dims: readonly number[], rank: number, what: string): void {
  const seen = new Set<number>();
  for (const d of dims) {
    if (!Number.isInteger(d) || d < 0 || d >= rank) fail(`${what} dim ${d} is out of range`);
    if (seen.has(d)) fail(`${what} dim ${d} is repeated`);
    seen.add(d);
  }
}

function finish(t: ElementType, out: Elements, i: number, acc: Scalar): void {
  const round = roundFor(t);
  out[i] = round ? round(acc as number) : acc;
}

export const dotOp: OpImpl = (instr, ops) => {
  const t = resultType(instr);
  const lhs = asType(asLiteral(ops[0], "lhs"), t);
  const rhs = asType(asLiteral(ops[1], "rhs"), t);
  const dn = attr(instr, "dot");
  const lr = lhs.dims.length;
  const rr = rhs.dims.length;
  checkDimList([...dn.lhsBatch, ...dn.lhsContracting], lr, "lhs batch/contracting");
  checkDimList([...dn.rhsBatch, ...dn.rhsContracting], rr, "rhs batch/contracting");
  if (dn.lhsBatch.length !== dn.rhsBatch.length) fail("lhs and rhs batch dim counts differ");
  if (dn.lhsContracting.length !== dn.rhsContracting.length) {
    fail("lhs and rhs contracting dim counts differ");
  }
  const pairSizes = (l: number[], r: number[], what: string) =>
    l.map((ld, i) => {
      const a = lhs.dims[ld]!;
      const b = rhs.dims[r[i]!]!;
      if (a !== b) {
        fail(
          `${what} dims differ in actual size: lhs dim ${ld} is ${a}, rhs dim ${r[i]} is ${b} ` +
            `(${valueShapeString(lhs)} · ${valueShapeString(rhs)})`,
        );
      }
      return a;
    });
  const batchSizes = pairSizes(dn.lhsBatch, dn.rhsBatch, "batch");
  const contractSizes = pairSizes(dn.lhsContracting, dn.rhsContracting, "contracting");
  const free = (rank: number, batch: number[], con: number[]) =>
    Array.from({ length: rank }, (_, i) => i).filter((i) => !batch.includes(i) && !con.includes(i));
  const lhsFree = free(lr, dn.lhsBatch, dn.lhsContracting);
  const rhsFree = free(rr, dn.rhsBatch, dn.rhsContracting);
  const outDims = [
    ...batchSizes,
    ...lhsFree.map((d) => lhs.dims[d]!),
    ...rhsFree.map((d) => rhs.dims[d]!),
  ];
  const ls = stridesOf(lhs.dims);
  const rs = stridesOf(rhs.dims);
  // Offsets of every contracting position, in row-major order of the contracting dims.
  const lhsOff: number[] = [];
  const rhsOff: number[] = [];
  forEachIndex(contractSizes, (idx) => {
    let a = 0;
    let b = 0;
    idx.forEach((v, k) => {
      a += v * ls[dn.lhsContracting[k]!]!;
      b += v * rs[dn.rhsContracting[k]!]!;
    });
    lhsOff.push(a);
    rhsOff.push(b);
  });
  const nb = batchSizes.length;
  const nl = lhsFree.length;
  const acc = accumulatorFor(t);
  const L = elems(lhs);
  const R = elems(rhs);
  const data = allocate(t, product(outDims));
  const out = mutableElems(data);
  forEachIndex(outDims, (idx, linear) => {
    let lb = 0;
    let rb = 0;
    for (let i = 0; i < nb; i++) {
      lb += idx[i]! * ls[dn.lhsBatch[i]!]!;
      rb += idx[i]! * rs[dn.rhsBatch[i]!]!;
    }
    for (let i = 0; i < nl; i++) lb += idx[nb + i]! * ls[lhsFree[i]!]!;
    for (let i = 0; i < rhsFree.length; i++) rb += idx[nb + nl + i]! * rs[rhsFree[i]!]!;
    let s = acc.zero;
    for (let k = 0; k < lhsOff.length; k++) {
      s = acc.mac(s, L[lb + lhsOff[k]!]!, R[rb + rhsOff[k]!]!);
    }
    finish(t, out, linear, s);
  });
  return new Literal(t, outDims, data);
};

/** Size of a window-swept dim: floor((dilated base + pads - dilated window) / stride) + 1. */
export function windowedSize(
  base: number,
  w: { size: number; stride: number; padLow: number; padHigh: number },
  baseDilation: number,
  windowDilation: number,
): number {
  const dilatedBase = base === 0 ? 0 : (base - 1) * baseDilation + 1;
  const dilatedWindow = w.size === 0 ? 0 : (w.size - 1) * windowDilation + 1;
  const span = dilatedBase + w.padLow + w.padHigh - dilatedWindow;
  if (span < 0) return 0;
  return Math.floor(span / w.stride) + 1;
}

export const convolutionOp: OpImpl = (instr, ops) => {
  const t = resultType(instr);
  const lhs = asType(asLiteral(ops[0], "input"), t);
  const rhs = asType(asLiteral(ops[1], "kernel"), t);
  const dn = attr(instr, "convDims");
  const window = attr(instr, "window");
  const fgc = instr.attrs.featureGroupCount ?? 1;
  const bgc = instr.attrs.batchGroupCount ?? 1;
  const ns = dn.inputSpatial.length;
  const shapes = `${valueShapeString(lhs)} * ${valueShapeString(rhs)}`;
  if (lhs.dims.length !== ns + 2 || rhs.dims.length !== ns + 2) {
    fail(`input and kernel must have rank ${ns + 2} (${shapes})`);
  }
  if (window.length !== ns) fail(`window has ${window.length} dims, expected ${ns}`);
  if (fgc < 1 || bgc < 1) fail(`group counts must be >= 1 (feature ${fgc}, batch ${bgc})`);
  const inBatch = lhs.dims[dn.inputBatch]!;
  const inF = lhs.dims[dn.inputFeature]!;
  const kInF = rhs.dims[dn.kernelInputFeature]!;
  const outF = rhs.dims[dn.kernelOutputFeature]!;
  if (inF !== kInF * fgc) {
    fail(`input features ${inF} != kernel input features ${kInF} * feature_group_count ${fgc}`);
  }
  if (outF % fgc !== 0) fail(`output features ${outF} not divisible by feature_group_count ${fgc}`);
  if (inBatch % bgc !== 0) fail(`input batch ${inBatch} not divisible by batch_group_count ${bgc}`);
  if (outF % bgc !== 0) fail(`output features ${outF} not divisible by batch_group_count ${bgc}`);
  const winSizes = dn.kernelSpatial.map((d) => rhs.dims[d]!);
  window.forEach((w, k) => {
    if (w.size !== winSizes[k]) {
      fail(`window size ${w.size} of spatial dim ${k} != kernel size ${winSizes[k]}`);
    }
    if (w.stride < 1 || w.baseDilation < 1 || w.windowDilation < 1) {
      fail(`window dim ${k}: stride and dilations must be >= 1`);
    }
  });
  const outDims = new Array<number>(ns + 2);
  outDims[dn.outputBatch] = inBatch / bgc;
  outDims[dn.outputFeature] = outF;
  dn.outputSpatial.forEach((d, k) => {
    const w = window[k]!;
    outDims[d] = windowedSize(lhs.dims[dn.inputSpatial[k]!]!, w, w.baseDilation, w.windowDilation);
  });
  const ls = stridesOf(lhs.dims);
  const rs = stridesOf(rhs.dims);
  const inputFeatureGroupSize = kInF;
  const outputFeatureGroupSize = outF / fgc;
  const batchGroupSize = inBatch / bgc;
  const depthwiseMultiplier = outF / bgc;
  const acc = accumulatorFor(t);
  const L = elems(lhs);
  const R = elems(rhs);
  const data = allocate(t, product(outDims));
  const out = mutableElems(data);
  forEachIndex(outDims, (oi, linear) => {
    const b = oi[dn.outputBatch]!;
    const o = oi[dn.outputFeature]!;
    const featureGroup = Math.floor(o / outputFeatureGroupSize);
    const batchGroup = Math.floor(o / depthwiseMultiplier);
    const lhsBatchBase = (b + batchGroup * batchGroupSize) * ls[dn.inputBatch]!;
    const rhsOutBase = o * rs[dn.kernelOutputFeature]!;
    let s = acc.zero;
    forEachIndex(winSizes, (wi) => {
      let lhsSpatial = 0;
      let rhsSpatial = 0;
      for (let k = 0; k < ns; k++) {
        const w = window[k]!;
        const u = oi[dn.outputSpatial[k]!]! * w.stride - w.padLow + wi[k]! * w.windowDilation;
        if (u % w.baseDilation !== 0) return; // a hole of the dilated base
        const x = u / w.baseDilation;
        if (x < 0 || x >= lhs.dims[dn.inputSpatial[k]!]!) return; // padding
        lhsSpatial += x * ls[dn.inputSpatial[k]!]!;
        const kk = w.windowReversal ? w.size - 1 - wi[k]! : wi[k]!;
        rhsSpatial += kk * rs[dn.kernelSpatial[k]!]!;
      }
      for (let iz = 0; iz < inputFeatureGroupSize; iz++) {
        const f = featureGroup * inputFeatureGroupSize + iz;
        const li = lhsBatchBase + f * ls[dn.inputFeature]! + lhsSpatial;
        const ri = rhsOutBase + iz * rs[dn.kernelInputFeature]! + rhsSpatial;
        s = acc.mac(s, L[li]!, R[ri]!);
      }
    });
    finish(t, out, linear, s);
  });
  return new Literal(t, outDims, data);
};
