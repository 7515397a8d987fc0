// Reduction kernels: `reduce` (any reducer, variadic included), kInput fusions (per row: every
// reduction of the row in turn, then the epilogue that writes the row or the row's result, so a
// softmax or a layer norm is one kernel), and reduce-window. A reducer made of elementwise ops
// is inlined as an expression over the accumulators and the element; any other reducer runs as
// its compiled program function on scalar scratch arrays. Elements are folded in row-major
// order of the reduced (or window) positions from the init value, as the evaluator does, so
// results are bit-identical; a reduction that keeps the innermost dim walks the input in
// row-major order and accumulates into the output (same per-output order, contiguous reads).

import type { Computation, Instruction } from "../../ir/module.ts";
import type { ArrayShape } from "../../ir/shape.ts";
import { arrayOf, ExprGen, isExpressible, type Leaf, NotFast } from "./codegen_expr.ts";
import { closeAll, type KernelCtx, linearOf, nestLoops } from "./codegen_loop.ts";
import {
  commentText,
  type Affine,
  affAdd,
  affAddK,
  affScale,
  affSym,
  affVal,
  type Block,
  FnBuilder,
  type Val,
} from "./emitter.ts";

/** Typed-array constructor name of an element type's storage. */
export function storageName(t: string): string {
  switch (t) {
    case "f32":
    case "f16":
    case "bf16":
      return "Float32Array";
    case "s32":
      return "Int32Array";
    case "s64":
      return "BigInt64Array";
    default:
      return "Uint8Array";
  }
}

/** True when `c` is a scalar computation the expression generator can inline. */
function inlinable(c: Computation): boolean {
  return c.instructions.every((i) => {
    if (i.opcode === "tuple") return i === c.root;
    if (i.opcode === "get-tuple-element" || i.opcode === "dynamic-slice") return false;
    return isExpressible(i) && i.shape.kind === "array";
  });
}

/**
 * Applies a scalar computation (reducer, scatter combiner, sort comparator) to argument values
 * inside block `at`; returns its results (one per tuple element, or one).
 */
export function applyScalarComputation(
  ctx: KernelCtx,
  fn: FnBuilder,
  c: Computation,
  args: readonly Val[],
  at: Block,
): Val[] {
  const params = c.parameters;
  if (inlinable(c)) {
    const leaves = new Map<Instruction, Leaf>();
    params.forEach((p, i) => leaves.set(p, { kind: "scalars", vals: [args[i]!] }));
    const gen = new ExprGen(fn, ctx.ext, leaves);
    const root = c.root;
    const outs = root.opcode === "tuple" ? root.operands : [root];
    return outs.map((o) => gen.value(o, [], at, false));
  }
  // A general computation: its program function, on scratch arrays allocated once per call.
  const name = ctx.program(c);
  const scratch = params.map((p) => {
    const s = fn.fresh("sc");
    fn.root.insert(`const ${s} = new ${storageName(arrayOf(p).type)}(1);`);
    return s;
  });
  scratch.forEach((s, i) => at.push(`${s}[0] = ${args[i]!.code};`));
  const r = fn.fresh("cr");
  at.push(`const ${r} = ${name}(${scratch.join(", ")});`);
  if (c.root.shape.kind === "array") return [{ code: `${r}[0]`, block: at, atom: false }];
  return c.root.shape.elements.map((_, i) => ({ code: `${r}[${i}][0]`, block: at, atom: false }));
}

interface Output {
  instr: Instruction;
  shape: ArrayShape;
  /** Tuple element of a variadic reduce, when the output is one. */
  elem: number | undefined;
  dims: readonly number[];
}

export interface ReduceKernelSpec {
  name: string;
  comment: string;
  root: Instruction;
  /** Kernel inputs (after the outputs), in parameter order. */
  leaves: readonly Instruction[];
  /**
   * Per dim of the (single) output, how far it must be computed (JS expressions, from an extent
   * hint); the row loops over kept dims stop there, and the limits become kernel parameters
   * after the inputs. Reduced dims are always reduced whole.
   */
  limits?: readonly (string | undefined)[];
  /**
   * Per dim of the reduced operand, how far the reduction must run (a reduction hint: past it
   * the operand is the reducer's identity); applied when every reduce of the kernel has it.
   */
  reduceLimits?: readonly (string | undefined)[];
}

/** Reduce instructions reachable from root without passing a leaf, in program order. */
function reducesOf(root: Instruction, leaves: ReadonlySet<Instruction>): Instruction[] {
  const seen = new Set<Instruction>();
  const out: Instruction[] = [];
  const visit = (i: Instruction) => {
    if (seen.has(i) || leaves.has(i)) return;
    seen.add(i);
    if (i.opcode === "reduce") out.push(i);
    i.operands.forEach(visit);
  };
  visit(root);
  const order = root.parent.instructions;
  return out.sort((a, b) => order.indexOf(a) - order.indexOf(b));
}

function sameList(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((v, i) => v === b[i]);
}

/**
 * Generates and registers a reduction kernel `k(out0.., in0..)` for a reduce or a kInput
 * fusion root. Throws NotFast when the region is not rows of one shape reduced over one set of
 * dims (the caller then falls back to per-instruction code).
 */
export function genReduceKernel(
  ctx: KernelCtx,
  spec: ReduceKernelSpec,
): { shapes: ArrayShape[]; limitArgs: string[] } {
  const leafSet = new Set(spec.leaves);
  const reduces = reducesOf(spec.root, leafSet);
  if (reduces.length === 0) throw new NotFast("no reduce in the fusion");
  const first = reduces[0]!;
  const S = arrayOf(first.operand(0)).dims;
  const Rd = [...first.attrs.dimensions!].sort((a, b) => a - b);
  for (const r of reduces) {
    const n = r.operands.length / 2;
    for (let i = 0; i < n; i++) {
      if (!sameList(arrayOf(r.operand(i)).dims, S)) {
        throw new NotFast(`reduce %${r.name} reduces another shape than %${first.name}`);
      }
    }
    if (!sameList([...r.attrs.dimensions!].sort((a, b) => a - b), Rd)) {
      throw new NotFast(`reduce %${r.name} reduces other dims than %${first.name}`);
    }
  }
  const kept = S.map((_, i) => i).filter((i) => !Rd.includes(i));
  const keptDims = kept.map((d) => S[d]!);
  const outputs: Output[] = [];
  const addOut = (instr: Instruction, elem?: number) => {
    const shape = elem === undefined ? arrayOf(instr) : elemShape(instr, elem);
    const dims = shape.dims;
    if (!sameList(dims, keptDims) && !sameList(dims, S)) {
      throw new NotFast(`output %${instr.name} is neither row-shaped nor reduce-shaped`);
    }
    outputs.push({ instr, shape, elem, dims });
  };
  const root = spec.root;
  if (root.shape.kind === "array") addOut(root);
  else if (root.opcode === "reduce") root.shape.elements.forEach((_, i) => addOut(root, i));
  else if (root.opcode === "tuple") {
    for (const o of root.operands) {
      if (o.shape.kind !== "array") throw new NotFast(`tuple output %${o.name} is a tuple`);
      addOut(o);
    }
  } else throw new NotFast(`root %${root.name} has a tuple shape`);

  const outNames = outputs.map((_, i) => `out${i}`);
  const inNames = spec.leaves.map((_, i) => `in${i}`);
  // Limits of kept dims, read from the output's dims (row-shaped: kept dims in order).
  const limitArgs: string[] = [];
  const keptBounds = kept.map((d, k) => {
    const o = outputs.length === 1 ? outputs[0]! : undefined;
    const lim = !o
      ? undefined
      : sameList(o.dims, S) && Rd.length > 0
        ? spec.limits?.[d]
        : spec.limits?.[k];
    if (lim === undefined) return undefined;
    limitArgs.push(lim);
    return `n${k}`;
  });
  // Reduced dims: the reduction stops at its hint; S-shaped outputs are written as far as
  // their own extent hint asks.
  const redBounds = Rd.map((d, j) => {
    const lim = spec.reduceLimits?.[d];
    if (lim === undefined) return undefined;
    limitArgs.push(lim);
    return `q${j}`;
  });
  const single = outputs.length === 1 ? outputs[0]! : undefined;
  const epiBounds = Rd.map((d, j) => {
    const lim = single && sameList(single.dims, S) ? spec.limits?.[d] : undefined;
    if (lim === undefined) return undefined;
    limitArgs.push(lim);
    return `w${j}`;
  });
  const boundNames = [...keptBounds, ...redBounds, ...epiBounds].filter(
    (b): b is string => b !== undefined,
  );
  const fn = new FnBuilder(
    `function ${spec.name}(${[...outNames, ...inNames, ...boundNames].join(", ")}) {`,
  );
  const leaves = new Map<Instruction, Leaf>();
  spec.leaves.forEach((l, i) => {
    leaves.set(l, { kind: "array", arr: fn.atom(`in${i}`), dims: arrayOf(l).dims });
  });
  const gen = new ExprGen(fn, ctx.ext, leaves);
  const column =
    reduces.length === 1 &&
    root === first &&
    Rd.length > 0 &&
    !Rd.includes(S.length - 1) &&
    inlinable(first.called[0]!);
  // A column reduce walks the input in order; it computes every row (limits are hints).
  if (column) columnReduce(ctx, fn, gen, first, S, kept, keptDims);
  else {
    rowReduce(ctx, fn, gen, leaves, reduces, outputs, S, Rd, kept, keptDims, {
      kept: keptBounds,
      reduced: redBounds,
      epilogue: epiBounds,
    });
  }
  ctx.addFunction(`// ${commentText(spec.comment)}\n${fn.render()}`);
  return { shapes: outputs.map((o) => o.shape), limitArgs: column ? [] : limitArgs };
}

function elemShape(instr: Instruction, elem: number): ArrayShape {
  const s = instr.shape;
  if (s.kind !== "tuple") return arrayOf(instr);
  const e = s.elements[elem]!;
  if (e.kind !== "array") throw new NotFast(`output %${instr.name} has a nested tuple`);
  return e;
}

/** Input index of a row: kept positions from `keptIdx`, reduced ones from `redIdx`. */
function rowIndex(
  rank: number,
  kept: readonly number[],
  keptIdx: readonly Affine[],
  redIdx: readonly Affine[],
): Affine[] {
  const idx = new Array<Affine>(rank);
  let k = 0;
  let r = 0;
  for (let d = 0; d < rank; d++) idx[d] = kept.includes(d) ? keptIdx[k++]! : redIdx[r++]!;
  return idx;
}

function rowReduce(
  ctx: KernelCtx,
  fn: FnBuilder,
  gen: ExprGen,
  leaves: Map<Instruction, Leaf>,
  reduces: readonly Instruction[],
  outputs: readonly Output[],
  S: readonly number[],
  Rd: readonly number[],
  kept: readonly number[],
  keptDims: readonly number[],
  bounds: {
    kept: readonly (string | undefined)[];
    reduced: readonly (string | undefined)[];
    epilogue: readonly (string | undefined)[];
  },
): void {
  const K = nestLoops(fn, fn.root, keptDims, "k", bounds.kept);
  const keptIdx = K.vars.map((v) => affSym(v));
  const redDims = Rd.map((d) => S[d]!);
  for (const r of reduces) {
    const n = r.operands.length / 2;
    const inits = r.operands.slice(n).map((i) => gen.value(i, [], K.block, false));
    const accs = inits.map((init) => {
      const a = fn.fresh("a");
      K.block.push(`let ${a} = ${init.code};`);
      return a;
    });
    const L = nestLoops(fn, K.block, redDims, "r", bounds.reduced);
    const idx = rowIndex(S.length, kept, keptIdx, L.vars.map((v) => affSym(v)));
    const xs = r.operands.slice(0, n).map((i) => gen.value(i, idx, L.block, false));
    const accIn = accs.map((a): Val => ({ code: a, block: L.block, atom: true }));
    const res = applyScalarComputation(ctx, fn, r.called[0]!, [...accIn, ...xs], L.block).map(
      (v) => fn.bind(v, L.block, "t"),
    );
    accs.forEach((a, i) => L.block.push(`${a} = ${res[i]!.code};`));
    closeAll(fn, L.blocks);
    leaves.set(r, {
      kind: "row",
      vals: accs.map((a): Val => ({ code: a, block: K.block, atom: true })),
      idx: keptIdx,
    });
  }
  const valueOf = (o: Output, idx: readonly Affine[], at: Block): Val => {
    if (o.elem === undefined) return gen.value(o.instr, idx, at, false);
    const leaf = leaves.get(o.instr);
    if (leaf?.kind !== "row") throw new NotFast(`output %${o.instr.name} is not a reduce`);
    return leaf.vals[o.elem]!;
  };
  const rowOuts = outputs.map((o, i) => [o, i] as const).filter(
    ([o]) => Rd.length > 0 && sameList(o.dims, S),
  );
  if (rowOuts.length > 0) {
    const E = nestLoops(fn, K.block, redDims, "j", bounds.epilogue);
    const idx = rowIndex(S.length, kept, keptIdx, E.vars.map((v) => affSym(v)));
    const lin = affVal(fn, linearOf(idx, S), E.block);
    for (const [o, i] of rowOuts) {
      const v = valueOf(o, idx, E.block);
      E.block.push(`out${i}[${lin.code}] = ${v.code};`);
    }
    closeAll(fn, E.blocks);
  }
  const lin = affVal(fn, linearOf(keptIdx, keptDims), K.block);
  outputs.forEach((o, i) => {
    if (rowOuts.some(([, j]) => j === i)) return;
    const v = valueOf(o, keptIdx, K.block);
    K.block.push(`out${i}[${lin.code}] = ${v.code};`);
  });
  closeAll(fn, K.blocks);
}

/** One reduce keeping the innermost dim: accumulate into the outputs in input order. */
function columnReduce(
  ctx: KernelCtx,
  fn: FnBuilder,
  gen: ExprGen,
  r: Instruction,
  S: readonly number[],
  kept: readonly number[],
  keptDims: readonly number[],
): void {
  const n = r.operands.length / 2;
  const inits = r.operands.slice(n).map((i) => gen.value(i, [], fn.root, false));
  let count = 1;
  for (const d of keptDims) count *= d;
  const F = nestLoops(fn, fn.root, [count], "z");
  inits.forEach((init, i) => F.block.push(`out${i}[${F.vars[0]!.code}] = ${init.code};`));
  closeAll(fn, F.blocks);
  const L = nestLoops(fn, fn.root, S, "i");
  const idx = L.vars.map((v) => affSym(v));
  const kl = fn.bind(affVal(fn, linearOf(kept.map((d) => idx[d]!), keptDims), L.block), L.block);
  const accs = inits.map((_, i) =>
    fn.bind(fn.expr(`out${i}[${kl.code}]`, [kl]), L.block, "a"),
  );
  const xs = r.operands.slice(0, n).map((i) => gen.value(i, idx, L.block, false));
  const res = applyScalarComputation(ctx, fn, r.called[0]!, [...accs, ...xs], L.block).map((v) =>
    fn.bind(v, L.block, "t"),
  );
  res.forEach((v, i) => L.block.push(`out${i}[${kl.code}] = ${v.code};`));
  closeAll(fn, L.blocks);
}

/** reduce-window `k(out0.., in0.., init0..)`: per output, the window in row-major order. */
export function genReduceWindowKernel(
  ctx: KernelCtx,
  name: string,
  comment: string,
  instr: Instruction,
): void {
  const n = instr.operands.length / 2;
  const outDims = elemShape(instr, 0).dims;
  const inDims = arrayOf(instr.operand(0)).dims;
  const window = instr.attrs.window!;
  const outNames = Array.from({ length: n }, (_, i) => `out${i}`);
  const inNames = instr.operands.map((_, i) => `in${i}`);
  const fn = new FnBuilder(`function ${name}(${[...outNames, ...inNames].join(", ")}) {`);
  const leaves = new Map<Instruction, Leaf>();
  instr.operands.forEach((o, i) => {
    leaves.set(o, { kind: "array", arr: fn.atom(`in${i}`), dims: arrayOf(o).dims });
  });
  const gen = new ExprGen(fn, ctx.ext, leaves);
  const O = nestLoops(fn, fn.root, outDims, "o");
  const inits = instr.operands.slice(n).map((i) => gen.value(i, [], O.block, false));
  const accs = inits.map((init) => {
    const a = fn.fresh("a");
    O.block.push(`let ${a} = ${init.code};`);
    return a;
  });
  let b = O.block;
  const opened: Block[] = [];
  const pos: Affine[] = [];
  window.forEach((w, k) => {
    const l = fn.loop(b, "0", String(w.size), "w");
    opened.push(l.block);
    b = l.block;
    // u = o * stride - padLow + w * windowDilation, in the dilated and padded base.
    const u = affAddK(
      affAdd(affScale(affSym(O.vars[k]!), w.stride), affScale(affSym(l.v), w.windowDilation)),
      -w.padLow,
    );
    const uv = fn.bind(affVal(fn, u, b), b, "u");
    let x: Val = uv;
    if (w.baseDilation > 1) {
      b.push(`if (${uv.code} % ${w.baseDilation} !== 0) continue;`);
      x = fn.bind(fn.expr(`${uv.code} / ${w.baseDilation}`, [uv]), b, "u");
    }
    b.push(`if (${x.code} < 0 || ${x.code} >= ${inDims[k]}) continue;`);
    const xs: Val = { code: x.code, block: b, atom: true };
    pos.push(affSym(xs));
  });
  const lin = affVal(fn, linearOf(pos, inDims), b);
  const xs = instr.operands.slice(0, n).map((_, i) => {
    return fn.bind(fn.expr(`in${i}[${lin.code}]`, [lin]), b, "x");
  });
  const accIn = accs.map((a): Val => ({ code: a, block: b, atom: true }));
  const res = applyScalarComputation(ctx, fn, instr.called[0]!, [...accIn, ...xs], b).map((v) =>
    fn.bind(v, b, "t"),
  );
  accs.forEach((a, i) => b.push(`${a} = ${res[i]!.code};`));
  closeAll(fn, opened);
  const olin = affVal(fn, linearOf(O.vars.map((v) => affSym(v)), outDims), O.block);
  accs.forEach((a, i) => O.block.push(`out${i}[${olin.code}] = ${a};`));
  closeAll(fn, O.blocks);
  ctx.addFunction(`// ${commentText(comment)}\n${fn.render()}`);
}

