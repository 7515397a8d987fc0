// Indexing opcodes of the reference evaluator: gather, scatter and sort, with XLA's dimension
// numbers including batching dims. Gather clamps each start index into [0, dim - slice size] as
// XLA does; scatter skips an update window whose start is out of bounds anywhere (any part of the
// window outside the operand), and applies the updates in order (scatter positions in row-major
// order, then window positions) through the combiner, as HloEvaluator does. Sort is a stable
// merge sort driven by the comparator computation (also when is_stable is false: any order of
// equal elements is allowed there, so the stable one is a valid answer).

import type { ElementType } from "./shape.ts";
import { makeCombiner, makeComparator } from "./evaluate_reduction.ts";
import {
  asLiteral,
  attr,
  build,
  clampInt,
  elems,
  fail,
  forEachIndex,
  isFloat,
  singleDim,
  stridesOf,
  valueShapeString,
  type Elements,
  type EvalValue,
  type OpImpl,
  type Scalar,
} from "./evaluate_support.ts";
import { Literal } from "./literal.ts";

function range(n: number): number[] {
  return Array.from({ length: n }, (_, i) => i);
}

function checkSortedDims(dims: readonly number[], rank: number, what: string): void {
  dims.forEach((d, i) => {
    if (!Number.isInteger(d) || d < 0 || d >= rank) fail(`${what} entry ${d} is out of range`);
    if (i > 0 && d <= dims[i - 1]!) fail(`${what} must be strictly increasing`);
  });
}

/** Reads the start index vector of batch position `base` (linear, with index_vector_dim 0). */
function indexVector(
  indices: Elements,
  base: number,
  count: number,
  ivdStride: number,
): number[] {
  const v = new Array<number>(count);
  for (let k = 0; k < count; k++) v[k] = Number(indices[base + k * ivdStride]!);
  return v;
}

function checkIndices(indices: Literal): void {
  if (isFloat(indices.type) || indices.type === "pred") {
    fail(`indices must be integers, got ${valueShapeString(indices)}`);
  }
}

export const gatherOp: OpImpl = (instr, ops) => {
  const operand = asLiteral(ops[0], "operand");
  const indices = asLiteral(ops[1], "start indices");
  checkIndices(indices);
  const dn = attr(instr, "gather");
  const sliceSizes = attr(instr, "gatherSliceSizes");
  const r = operand.dims.length;
  const ri = indices.dims.length;
  const ivd = dn.indexVectorDim;
  if (ivd < 0 || ivd > ri) {
    fail(`index_vector_dim ${ivd} is out of range for ${valueShapeString(indices)}`);
  }
  const vecLen = ivd === ri ? 1 : indices.dims[ivd]!;
  if (vecLen !== dn.startIndexMap.length) {
    fail(`index vectors have ${vecLen} entries but start_index_map has ${dn.startIndexMap.length}`);
  }
  if (sliceSizes.length !== r) {
    fail(`slice_sizes has ${sliceSizes.length} entries, operand rank ${r}`);
  }
  sliceSizes.forEach((s, d) => {
    if (s < 0 || s > operand.dims[d]!) {
      fail(`slice size ${s} of dim ${d} does not fit ${valueShapeString(operand)}`);
    }
  });
  if (dn.operandBatchingDims.length !== dn.startIndicesBatchingDims.length) {
    fail("operand_batching_dims and start_indices_batching_dims differ in length");
  }
  const batchIdxDims = range(ri).filter((d) => d !== ivd);
  const offsetOperandDims = range(r).filter(
    (d) => !dn.collapsedSliceDims.includes(d) && !dn.operandBatchingDims.includes(d),
  );
  if (offsetOperandDims.length !== dn.offsetDims.length) {
    fail(`offset_dims has ${dn.offsetDims.length} entries, expected ${offsetOperandDims.length}`);
  }
  const outRank = batchIdxDims.length + dn.offsetDims.length;
  checkSortedDims(dn.offsetDims, outRank, "offset_dims");
  const offsetPos = dn.offsetDims;
  const batchPos = range(outRank).filter((p) => !offsetPos.includes(p));
  const outDims = new Array<number>(outRank);
  offsetPos.forEach((p, k) => (outDims[p] = sliceSizes[offsetOperandDims[k]!]!));
  batchPos.forEach((p, j) => (outDims[p] = indices.dims[batchIdxDims[j]!]!));
  const batchingFrom = dn.startIndicesBatchingDims.map((d) => {
    const j = batchIdxDims.indexOf(d);
    if (j < 0) fail(`start_indices_batching_dims entry ${d} is not a batch dim of the indices`);
    return j;
  });
  const os = stridesOf(operand.dims);
  const is = stridesOf(indices.dims);
  const ivdStride = ivd === ri ? 0 : is[ivd]!;
  const src = elems(operand);
  const idx = elems(indices);
  const start = new Array<number>(r);
  return build(operand.type, outDims, (out) => {
    forEachIndex(outDims, (oi, linear) => {
      let base = 0;
      for (let j = 0; j < batchPos.length; j++) base += oi[batchPos[j]!]! * is[batchIdxDims[j]!]!;
      start.fill(0);
      const vec = indexVector(idx, base, vecLen, ivdStride);
      dn.startIndexMap.forEach((d, k) => {
        start[d] = clampInt(vec[k]!, 0, operand.dims[d]! - sliceSizes[d]!);
      });
      dn.operandBatchingDims.forEach((d, i) => (start[d] = oi[batchPos[batchingFrom[i]!]!]!));
      let l = 0;
      for (let d = 0; d < r; d++) l += start[d]! * os[d]!;
      for (let k = 0; k < offsetPos.length; k++) {
        l += oi[offsetPos[k]!]! * os[offsetOperandDims[k]!]!;
      }
      out[linear] = src[l]!;
    });
  });
};

export const scatterOp: OpImpl = (instr, ops, ctx) => {
  if (ops.length < 3 || ops.length % 2 !== 1) {
    fail(`expected N operands, the indices and N updates, got ${ops.length} operands`);
  }
  const n = (ops.length - 1) / 2;
  const operands = ops.slice(0, n).map((v, i) => asLiteral(v, `operand ${i}`));
  const indices = asLiteral(ops[n], "scatter indices");
  const updates = ops.slice(n + 1).map((v, i) => asLiteral(v, `update ${i}`));
  checkIndices(indices);
  const first = operands[0]!;
  const upd = updates[0]!;
  operands.forEach((o, i) => {
    if (o.dims.length !== first.dims.length || o.dims.some((d, k) => d !== first.dims[k])) {
      fail(`operand ${i} ${valueShapeString(o)} differs in dims from ${valueShapeString(first)}`);
    }
    const u = updates[i]!;
    const sameDims = u.dims.length === upd.dims.length && u.dims.every((d, k) => d === upd.dims[k]);
    if (u.type !== o.type || !sameDims) {
      fail(`update ${i} ${valueShapeString(u)} does not match update 0 or operand type ${o.type}`);
    }
  });
  const dn = attr(instr, "scatter");
  const r = first.dims.length;
  const ri = indices.dims.length;
  const ru = upd.dims.length;
  const ivd = dn.indexVectorDim;
  if (ivd < 0 || ivd > ri) {
    fail(`index_vector_dim ${ivd} is out of range for ${valueShapeString(indices)}`);
  }
  const vecLen = ivd === ri ? 1 : indices.dims[ivd]!;
  if (vecLen !== dn.scatterDimsToOperandDims.length) {
    fail(
      `index vectors have ${vecLen} entries but scatter_dims_to_operand_dims has ` +
        `${dn.scatterDimsToOperandDims.length}`,
    );
  }
  checkSortedDims(dn.updateWindowDims, ru, "update_window_dims");
  const updateScatterDims = range(ru).filter((d) => !dn.updateWindowDims.includes(d));
  const batchIdxDims = range(ri).filter((d) => d !== ivd);
  if (updateScatterDims.length !== batchIdxDims.length) {
    fail(`updates have ${updateScatterDims.length} scatter dims, indices ${batchIdxDims.length}`);
  }
  updateScatterDims.forEach((d, j) => {
    if (upd.dims[d] !== indices.dims[batchIdxDims[j]!]) {
      const k = batchIdxDims[j]!;
      fail(`update dim ${d} (${upd.dims[d]}) != indices dim ${k} (${indices.dims[k]})`);
    }
  });
  const windowOperandDims = range(r).filter(
    (d) => !dn.insertedWindowDims.includes(d) && !dn.inputBatchingDims.includes(d),
  );
  if (windowOperandDims.length !== dn.updateWindowDims.length) {
    const want = windowOperandDims.length;
    fail(`update_window_dims has ${dn.updateWindowDims.length} entries, expected ${want}`);
  }
  if (dn.inputBatchingDims.length !== dn.scatterIndicesBatchingDims.length) {
    fail("input_batching_dims and scatter_indices_batching_dims differ in length");
  }
  const batchingFrom = dn.scatterIndicesBatchingDims.map((d) => {
    const j = batchIdxDims.indexOf(d);
    if (j < 0) fail(`scatter_indices_batching_dims entry ${d} is not a batch dim of the indices`);
    return j;
  });
  const windowSize = new Array<number>(r).fill(1);
  windowOperandDims.forEach((d, k) => (windowSize[d] = upd.dims[dn.updateWindowDims[k]!]!));
  const os = stridesOf(first.dims);
  const us = stridesOf(upd.dims);
  const is = stridesOf(indices.dims);
  const ivdStride = ivd === ri ? 0 : is[ivd]!;
  const types: ElementType[] = operands.map((o) => o.type);
  const combine = makeCombiner(ctx, instr.called[0], types, "combiner");
  const outData = operands.map((o) => o.data.slice());
  const outs = outData.map((d) => d as unknown as Elements);
  const ups = updates.map((u) => elems(u));
  const idx = elems(indices);
  const scatterSpace = updateScatterDims.map((d) => upd.dims[d]!);
  const windowSpace = dn.updateWindowDims.map((d) => upd.dims[d]!);
  const start = new Array<number>(r);
  const accs = new Array<Scalar>(n);
  const xs = new Array<Scalar>(n);
  forEachIndex(scatterSpace, (g) => {
    let base = 0;
    let ubase = 0;
    for (let j = 0; j < g.length; j++) {
      base += g[j]! * is[batchIdxDims[j]!]!;
      ubase += g[j]! * us[updateScatterDims[j]!]!;
    }
    start.fill(0);
    const vec = indexVector(idx, base, vecLen, ivdStride);
    dn.scatterDimsToOperandDims.forEach((d, k) => (start[d] = vec[k]!));
    dn.inputBatchingDims.forEach((d, i) => (start[d] = g[batchingFrom[i]!]!));
    for (let d = 0; d < r; d++) {
      if (start[d]! < 0 || start[d]! > first.dims[d]! - windowSize[d]!) return;
    }
    let obase = 0;
    for (let d = 0; d < r; d++) obase += start[d]! * os[d]!;
    forEachIndex(windowSpace, (w) => {
      let ol = obase;
      let ul = ubase;
      for (let k = 0; k < w.length; k++) {
        ol += w[k]! * os[windowOperandDims[k]!]!;
        ul += w[k]! * us[dn.updateWindowDims[k]!]!;
      }
      for (let i = 0; i < n; i++) {
        accs[i] = outs[i]![ol]!;
        xs[i] = ups[i]![ul]!;
      }
      const res = combine(accs, xs);
      for (let i = 0; i < n; i++) outs[i]![ol] = res[i]!;
    });
  });
  const lits = operands.map((o, i) => new Literal(o.type, o.dims, outData[i]!));
  return lits.length === 1 ? lits[0]! : lits;
};

/** Stable merge sort of `perm` by `less` (takes from the right run only when strictly less). */
function mergeSort(perm: number[], less: (a: number, b: number) => boolean): number[] {
  if (perm.length <= 1) return perm;
  const mid = perm.length >> 1;
  const left = mergeSort(perm.slice(0, mid), less);
  const right = mergeSort(perm.slice(mid), less);
  const out: number[] = [];
  let i = 0;
  let j = 0;
  while (i < left.length && j < right.length) {
    if (less(right[j]!, left[i]!)) out.push(right[j++]!);
    else out.push(left[i++]!);
  }
  while (i < left.length) out.push(left[i++]!);
  while (j < right.length) out.push(right[j++]!);
  return out;
}

export const sortOp: OpImpl = (instr, ops, ctx) => {
  if (ops.length === 0) fail("sort needs at least one operand");
  const keys = ops.map((v, i) => asLiteral(v, `operand ${i}`));
  const first = keys[0]!;
  keys.forEach((k, i) => {
    if (k.dims.length !== first.dims.length || k.dims.some((d, j) => d !== first.dims[j])) {
      fail(`operand ${i} ${valueShapeString(k)} differs in dims from ${valueShapeString(first)}`);
    }
  });
  const d = singleDim(instr, first.dims.length);
  const types = keys.map((k) => k.type);
  const less = makeComparator(ctx, instr.called[0], types);
  const len = first.dims[d]!;
  const stride = stridesOf(first.dims)[d]!;
  const srcs = keys.map((k) => elems(k));
  const outer = [...first.dims];
  outer[d] = 1;
  const os = stridesOf(first.dims);
  const outs = keys.map((k) => k.data.slice());
  const dsts = outs.map((o) => o as unknown as Elements);
  const lhs = new Array<Scalar>(keys.length);
  const rhs = new Array<Scalar>(keys.length);
  forEachIndex(outer, (oi) => {
    let base = 0;
    for (let i = 0; i < oi.length; i++) base += oi[i]! * os[i]!;
    const perm = mergeSort(range(len), (a, b) => {
      for (let k = 0; k < srcs.length; k++) {
        lhs[k] = srcs[k]![base + a * stride]!;
        rhs[k] = srcs[k]![base + b * stride]!;
      }
      return less(lhs, rhs);
    });
    perm.forEach((p, i) => {
      for (let k = 0; k < srcs.length; k++) {
        dsts[k]![base + i * stride] = srcs[k]![base + p * stride]!;
      }
    });
  });
  const lits: EvalValue[] = keys.map((k, i) => new Literal(k.type, k.dims, outs[i]!));
  return lits.length === 1 ? lits[0]! : lits;
};
