// Indexing kernels: gather (start indices clamped into range, as XLA), scatter (a window whose
// start is out of bounds anywhere is skipped; updates applied in order of scatter positions,
// then window positions, through the combiner), sort (the evaluator's top-down stable merge
// sort with the same split and merge rule, so even a comparator that is not a strict weak order
// gives the same permutation) and dynamic-update-slice. Index arithmetic is affine and hoisted
// by the emitter; combiners and comparators are inlined when they are elementwise.

import type { Instruction } from "../../ir/module.ts";
import { arrayOf, stridesOf } from "./codegen_expr.ts";
import { closeAll, type KernelCtx, linearOf, nestLoops } from "./codegen_loop.ts";
import { applyScalarComputation } from "./codegen_reduce.ts";
import {
  commentText,
  type Affine,
  affAdd,
  affConst,
  affScale,
  affSym,
  affVal,
  FnBuilder,
  type Val,
} from "./emitter.ts";
import { clampIndex } from "./runtime_lib.ts";

const range = (n: number): number[] => Array.from({ length: n }, (_, i) => i);

/** gather `k(out, in0 /* operand *\/, in1 /* indices *\/)`. */
export function genGatherKernel(
  ctx: KernelCtx,
  name: string,
  comment: string,
  instr: Instruction,
): void {
  const dn = instr.attrs.gather!;
  const sizes = instr.attrs.gatherSliceSizes!;
  const od = arrayOf(instr.operand(0)).dims;
  const id = arrayOf(instr.operand(1)).dims;
  const outDims = arrayOf(instr).dims;
  const ri = id.length;
  const ivd = dn.indexVectorDim;
  const is = stridesOf(id);
  const os = stridesOf(od);
  const ivdStride = ivd === ri ? 0 : is[ivd]!;
  const batchIdxDims = range(ri).filter((d) => d !== ivd);
  const offsetOperandDims = range(od.length).filter(
    (d) => !dn.collapsedSliceDims.includes(d) && !dn.operandBatchingDims.includes(d),
  );
  const offsetPos = dn.offsetDims;
  const batchPos = range(outDims.length).filter((p) => !offsetPos.includes(p));
  const batchingFrom = dn.startIndicesBatchingDims.map((d) => batchIdxDims.indexOf(d));
  const fn = new FnBuilder(`function ${name}(out, in0, in1) {`);
  const L = nestLoops(fn, fn.root, outDims, "i");
  const oi = L.vars.map((v) => affSym(v));
  let base = affConst(0);
  batchPos.forEach((p, j) => (base = affAdd(base, affScale(oi[p]!, is[batchIdxDims[j]!]!))));
  const ci = ctx.ext.ref(clampIndex, "clampIndex");
  const start: Affine[] = od.map(() => affConst(0));
  dn.startIndexMap.forEach((d, k) => {
    const at = affVal(fn, affAdd(base, affConst(k * ivdStride)), L.block);
    const raw = fn.bind(fn.expr(`in1[${at.code}]`, [at]), L.block, "x");
    const v = fn.expr(`${ci}(${raw.code}, ${od[d]! - sizes[d]!})`, [raw]);
    start[d] = affSym(fn.bind(v, L.block, "s"));
  });
  dn.operandBatchingDims.forEach((d, i) => (start[d] = oi[batchPos[batchingFrom[i]!]!]!));
  let src = affConst(0);
  od.forEach((_, d) => (src = affAdd(src, affScale(start[d]!, os[d]!))));
  offsetPos.forEach((p, k) => (src = affAdd(src, affScale(oi[p]!, os[offsetOperandDims[k]!]!))));
  const s = affVal(fn, src, L.block);
  const o = affVal(fn, linearOf(oi, outDims), L.block);
  L.block.push(`out[${o.code}] = in0[${s.code}];`);
  closeAll(fn, L.blocks);
  ctx.addFunction(`// ${commentText(comment)}\n${fn.render()}`);
}

/**
 * scatter `k(out0.., idx, upd0..)`: the outputs start as copies of the operands (the caller
 * copies them) and are updated in place.
 */
export function genScatterKernel(
  ctx: KernelCtx,
  name: string,
  comment: string,
  instr: Instruction,
): void {
  const n = (instr.operands.length - 1) / 2;
  const dn = instr.attrs.scatter!;
  const od = arrayOf(instr.operand(0)).dims;
  const id = arrayOf(instr.operand(n)).dims;
  const ud = arrayOf(instr.operand(n + 1)).dims;
  const ri = id.length;
  const ivd = dn.indexVectorDim;
  const is = stridesOf(id);
  const os = stridesOf(od);
  const us = stridesOf(ud);
  const ivdStride = ivd === ri ? 0 : is[ivd]!;
  const updateScatterDims = range(ud.length).filter((d) => !dn.updateWindowDims.includes(d));
  const batchIdxDims = range(ri).filter((d) => d !== ivd);
  const windowOperandDims = range(od.length).filter(
    (d) => !dn.insertedWindowDims.includes(d) && !dn.inputBatchingDims.includes(d),
  );
  const batchingFrom = dn.scatterIndicesBatchingDims.map((d) => batchIdxDims.indexOf(d));
  const windowSize = od.map(() => 1);
  windowOperandDims.forEach((d, k) => (windowSize[d] = ud[dn.updateWindowDims[k]!]!));
  const outs = range(n).map((i) => `out${i}`);
  const upds = range(n).map((i) => `upd${i}`);
  const fn = new FnBuilder(`function ${name}(${[...outs, "idx", ...upds].join(", ")}) {`);
  const S = nestLoops(fn, fn.root, updateScatterDims.map((d) => ud[d]!), "g");
  const gv = S.vars.map((v) => affSym(v));
  let base = affConst(0);
  let ubase = affConst(0);
  gv.forEach((g, j) => {
    base = affAdd(base, affScale(g, is[batchIdxDims[j]!]!));
    ubase = affAdd(ubase, affScale(g, us[updateScatterDims[j]!]!));
  });
  const start: Affine[] = od.map(() => affConst(0));
  const checks: string[] = [];
  dn.scatterDimsToOperandDims.forEach((d, k) => {
    const at = affVal(fn, affAdd(base, affConst(k * ivdStride)), S.block);
    const v = fn.bind(fn.expr(`Number(idx[${at.code}])`, [at]), S.block, "s");
    checks.push(`${v.code} < 0 || ${v.code} > ${od[d]! - windowSize[d]!}`);
    start[d] = affSym(v);
  });
  dn.inputBatchingDims.forEach((d, i) => (start[d] = gv[batchingFrom[i]!]!));
  const label = fn.fresh("sc");
  const body = fn.child(S.block, `${label}: {`);
  if (checks.length > 0) body.push(`if (${checks.join(" || ")}) break ${label};`);
  let obase = affConst(0);
  od.forEach((_, d) => (obase = affAdd(obase, affScale(start[d]!, os[d]!))));
  const obv = affVal(fn, obase, body);
  const ob = fn.fresh("ob");
  body.push(`const ${ob} = ${obv.code};`);
  // Reads of the outputs depend on `ob`, so none is hoisted above the bounds check.
  const obSym: Val = { code: ob, block: body, atom: true };
  const W = nestLoops(fn, body, dn.updateWindowDims.map((d) => ud[d]!), "w");
  const wv = W.vars.map((v) => affSym(v));
  let ol = affSym(obSym);
  let ul = ubase;
  wv.forEach((w, k) => {
    ol = affAdd(ol, affScale(w, os[windowOperandDims[k]!]!));
    ul = affAdd(ul, affScale(w, us[dn.updateWindowDims[k]!]!));
  });
  const olv = fn.bind(affVal(fn, ol, W.block), W.block, "b");
  const ulv = affVal(fn, ul, W.block);
  const accs = outs.map((o) => fn.bind(fn.expr(`${o}[${olv.code}]`, [olv]), W.block, "a"));
  const xs = upds.map((u) => fn.bind(fn.expr(`${u}[${ulv.code}]`, [ulv]), W.block, "x"));
  const res = applyScalarComputation(ctx, fn, instr.called[0]!, [...accs, ...xs], W.block).map(
    (v) => fn.bind(v, W.block, "t"),
  );
  outs.forEach((o, i) => W.block.push(`${o}[${olv.code}] = ${res[i]!.code};`));
  closeAll(fn, W.blocks);
  fn.close(body);
  closeAll(fn, S.blocks);
  ctx.addFunction(`// ${commentText(comment)}\n${fn.render()}`);
}

/** sort `k(out0.., in0..)` along one dim, every row through the comparator. */
export function genSortKernel(
  ctx: KernelCtx,
  name: string,
  comment: string,
  instr: Instruction,
): void {
  const n = instr.operands.length;
  const dims = arrayOf(instr.operand(0)).dims;
  const d = instr.attrs.dimensions![0]!;
  const len = dims[d]!;
  const stride = stridesOf(dims)[d]!;
  const outs = range(n).map((i) => `out${i}`);
  const ins = range(n).map((i) => `in${i}`);
  const fn = new FnBuilder(`function ${name}(${[...outs, ...ins].join(", ")}) {`);
  const root = fn.root;
  root.push(`const perm = new Int32Array(${len});`);
  root.push(`const tmp = new Int32Array(${len});`);
  root.push(`let base = 0;`);
  const less = fn.child(root, "function less(x, y) {");
  const baseV: Val = { code: "base", block: less, atom: true };
  const at = (v: string): Val => {
    const pos: Val = { code: v, block: less, atom: true };
    return affVal(fn, affAdd(affSym(baseV), affSym(pos, stride)), less);
  };
  const args: Val[] = [];
  const ix = at("x");
  const iy = at("y");
  for (const i of ins) {
    args.push(fn.bind(fn.expr(`${i}[${ix.code}]`, [ix]), less, "l"));
    args.push(fn.bind(fn.expr(`${i}[${iy.code}]`, [iy]), less, "r"));
  }
  const [cmp] = applyScalarComputation(ctx, fn, instr.called[0]!, args, less);
  less.push(`return ${cmp!.code} !== 0;`);
  fn.close(less);
  for (const line of [
    "function msort(lo, hi) {",
    "  if (hi - lo < 2) return;",
    "  const mid = lo + ((hi - lo) >> 1);",
    "  msort(lo, mid);",
    "  msort(mid, hi);",
    "  for (let t = lo; t < hi; t++) tmp[t] = perm[t];",
    "  let i = lo, j = mid, w = lo;",
    "  while (i < mid && j < hi) {",
    "    if (less(tmp[j], tmp[i])) perm[w++] = tmp[j++];",
    "    else perm[w++] = tmp[i++];",
    "  }",
    "  while (i < mid) perm[w++] = tmp[i++];",
    "  while (j < hi) perm[w++] = tmp[j++];",
    "}",
  ]) {
    root.push(line);
  }
  const outer = dims.map((s, k) => (k === d ? 1 : s));
  const L = nestLoops(fn, root, outer, "i");
  const lin = affVal(fn, linearOf(L.vars.map((v) => affSym(v)), dims), L.block);
  L.block.push(`base = ${lin.code};`);
  L.block.push(`for (let p = 0; p < ${len}; p++) perm[p] = p;`);
  L.block.push(`msort(0, ${len});`);
  const moves = range(n).map(
    (k) => `out${k}[base + p * ${stride}] = in${k}[base + perm[p] * ${stride}];`,
  );
  L.block.push(`for (let p = 0; p < ${len}; p++) { ${moves.join(" ")} }`);
  closeAll(fn, L.blocks);
  ctx.addFunction(`// ${commentText(comment)}\n${fn.render()}`);
}

/** dynamic-update-slice `k(out, upd, s0..)`: `out` is a copy of the operand, updated in place. */
export function genDynamicUpdateSliceKernel(
  ctx: KernelCtx,
  name: string,
  comment: string,
  instr: Instruction,
): void {
  const od = arrayOf(instr.operand(0)).dims;
  const ud = arrayOf(instr.operand(1)).dims;
  const starts = od.map((_, k) => `s${k}`);
  const fn = new FnBuilder(`function ${name}(${["out", "upd", ...starts].join(", ")}) {`);
  const ci = ctx.ext.ref(clampIndex, "clampIndex");
  const st = od.map((dim, k) =>
    fn.bind(fn.expr(`${ci}(s${k}[0], ${dim - ud[k]!})`, []), fn.root, "st"),
  );
  const L = nestLoops(fn, fn.root, ud, "i");
  const ui = L.vars.map((v) => affSym(v));
  const oi = ui.map((u, k) => affAdd(u, affSym(st[k]!)));
  const o = affVal(fn, linearOf(oi, od), L.block);
  const u = affVal(fn, linearOf(ui, ud), L.block);
  L.block.push(`out[${o.code}] = upd[${u.code}];`);
  closeAll(fn, L.blocks);
  ctx.addFunction(`// ${commentText(comment)}\n${fn.render()}`);
}
