// Kernel generators: HLO regions to kernel IR. A loop kernel writes one root's element
// expression over its output (elementwise ops, a kLoop fusion, a kOutput fusion's epilogue); a
// reduction kernel handles `reduce` and kInput fusions (per row: every reduction of the row in
// turn, then the epilogue that writes the row or the row's result, so softmax or layer norm is
// one kernel), or, when the innermost dim is kept, accumulates into the output in input order
// (a column reduction); reduce-window, gather, scatter and dynamic-update-slice have their own.
// Elements are folded in row-major order of the reduced (or window) positions from the init,
// as the evaluator does; a tolerance-tier renderer may reassociate a reduction whose combiner
// the `accSet` names. Each generator returns the kernel and how to call it: what each buffer
// parameter holds (an output, or an instruction's value), the program-level value of each size
// parameter, and the extent of the range.

import type { Computation, Instruction } from "../../ir/module.ts";
import type { ArrayShape, ElementType } from "../../ir/shape.ts";
import { type Block, KernelBuilder } from "./builder.ts";
import { type Ix, type IxCmp, type Kernel, Pool, type Sx } from "./kir.ts";
import {
  arrayOf,
  constantDims,
  type DimSource,
  ExprLowering,
  isExpressible,
  type Leaf,
  linearIx,
  NotFast,
  productIx,
  stridesIx,
} from "./lower_expr.ts";

/** What a kernel buffer parameter holds at a call. */
export type Binding =
  | { readonly kind: "out"; readonly index: number }
  | { readonly kind: "value"; readonly instr: Instruction };

/** A kernel and how a step calls it. */
export interface KernelCall {
  readonly kernel: Kernel;
  readonly bindings: readonly Binding[];
  /** Per size parameter, its value as a program-level index expression (see `ProgramIx`). */
  readonly sizes: readonly Ix[];
  /** Extents of the kernel's ranges (program-level). */
  readonly range: readonly Ix[];
}

/**
 * Program-level index expressions (sizes, limits, ranges) live in one pool per program: their
 * `size(p)` atoms are the value of the s32[] ENTRY parameter number p (a bucket's real size),
 * read by the driver when the step runs.
 */
export class ProgramIx {
  readonly pool = new Pool();
  c(v: number): Ix {
    return this.pool.c(v);
  }
}

/** Options of the generators that are a matter of the target, not of meaning. */
export interface LowerOptions {
  /**
   * Flatten an elementwise region whose every read is at the output's linear index into one
   * loop over all elements (default true).
   */
  flatten?: boolean;
  /** Leading dims are grouped into the range until it has at least this many rows (default 1). */
  minRows?: number;
  /** Shape-generic: every dim is a size parameter (eager kernels compiled once per rank). */
  generic?: boolean;
  /**
   * Whether the backend's library runs a contraction of this element type (and batch group
   * count, for convolutions); when not, it is a generated kernel (default: always).
   */
  libraryContraction?: (op: "dot" | "convolution", type: ElementType, batchGroups: number) =>
    boolean;
}

/** The pieces every generator shares: the builder, dims, bindings and size parameters. */
class Ctx {
  readonly kb = new KernelBuilder();
  readonly bindings: Binding[] = [];
  readonly sizes: Ix[] = [];
  readonly dims: DimSource;
  private readonly valueBufs = new Map<Instruction, number>();

  constructor(
    readonly prog: ProgramIx,
    readonly opts: LowerOptions,
  ) {
    this.dims = opts.generic ? this.genericDims() : constantDims(this.kb.pool);
  }

  get pool(): Pool {
    return this.kb.pool;
  }

  out(type: ElementType, index: number, name: string, access: "w" | "rw" = "w"): number {
    const b = this.kb.buf(type, access, name);
    this.bindings.push({ kind: "out", index });
    return b;
  }

  /** The buffer holding `instr`'s value (a leaf or an array constant), made on first use. */
  value(instr: Instruction): number {
    const known = this.valueBufs.get(instr);
    if (known !== undefined) return known;
    const b = this.kb.buf(arrayOf(instr).type, "r", instr.name);
    this.bindings.push({ kind: "value", instr });
    this.valueBufs.set(instr, b);
    return b;
  }

  /** A kernel-level index for a program-level one (a constant stays a constant). */
  sizeOf(x: Ix): Ix {
    if (x.op === "const") return this.pool.c(x.v);
    this.sizes.push(x);
    return this.kb.size();
  }

  /** Dims of a shape that is not an instruction's (a tuple element): sizes when generic. */
  shapeDims(dims: readonly number[]): Ix[] {
    return dims.map((n) => {
      if (!this.opts.generic) return this.pool.c(n);
      this.sizes.push(this.prog.c(n));
      return this.kb.size();
    });
  }

  private genericDims(): DimSource {
    const memo = new Map<Instruction, Ix[]>();
    return {
      constant: false,
      dims: (instr) => {
        let d = memo.get(instr);
        if (!d) {
          d = arrayOf(instr).dims.map((n) => {
            this.sizes.push(this.prog.c(n));
            return this.kb.size();
          });
          memo.set(instr, d);
        }
        return d;
      },
    };
  }

  lowering(leaves: Map<Instruction, Leaf>): ExprLowering {
    return new ExprLowering(this.pool, this.dims, leaves, (c) => this.value(c));
  }

  bufferLeaves(leaves: readonly Instruction[]): Map<Instruction, Leaf> {
    const m = new Map<Instruction, Leaf>();
    for (const l of leaves) {
      m.set(l, { kind: "buffer", buf: this.value(l), dims: this.dims.dims(l) });
    }
    return m;
  }

  finish(name: string, comment: string, ranges: 0 | 1 | 2, range: readonly Ix[]): KernelCall {
    return {
      kernel: this.kb.build(name, comment, ranges),
      bindings: this.bindings,
      sizes: this.sizes,
      range,
    };
  }
}

const range = (n: number): number[] => Array.from({ length: n }, (_, i) => i);

/** Every instruction `root` depends on without passing a leaf. */
function regionOf(root: Instruction, leaves: ReadonlySet<Instruction>): Instruction[] {
  const seen = new Set<Instruction>();
  const visit = (i: Instruction) => {
    if (seen.has(i) || leaves.has(i)) return;
    seen.add(i);
    i.operands.forEach(visit);
  };
  visit(root);
  return [...seen];
}

/** True when every leaf of the region is read at the output's own index, elementwise. */
function pointwise(root: Instruction, leaves: ReadonlySet<Instruction>): boolean {
  const dims = arrayOf(root).dims;
  const same = (i: Instruction) => {
    const d = arrayOf(i).dims;
    return d.length === dims.length && d.every((n, k) => n === dims[k]);
  };
  for (const i of regionOf(root, leaves)) {
    if (i.opcode === "constant") {
      if (arrayOf(i).dims.length !== 0) return false;
      continue;
    }
    if (!isExpressible(i) || i.opcode === "get-tuple-element") return false;
    if (["iota", "broadcast", "reshape", "transpose", "slice", "dynamic-slice", "concatenate",
      "pad", "reverse", "get-dimension-size"].includes(i.opcode)) {
      return false;
    }
    if (!same(i)) return false;
    for (const o of i.operands) {
      if (arrayOf(o).dims.length !== 0 && !same(o)) return false;
    }
  }
  for (const l of leaves) if (arrayOf(l).dims.length !== 0 && !same(l)) return false;
  return true;
}

// ---- loop kernels ----------------------------------------------------------------------------

export interface LoopKernelSpec {
  name: string;
  comment: string;
  root: Instruction;
  /** Kernel inputs (their values are read from buffers). */
  leaves: readonly Instruction[];
  /**
   * Tile kernels (a contraction's epilogue): the first `rowDims` output dims are the rows of
   * range 0 and the rest the columns of range 1. Absent: a plain kernel over range 0.
   */
  tile?: { rowDims: number };
  /** A leaf that should only be read at the output index (a kOutput's dot result). */
  identityLeaf?: Instruction;
  /** Per output dim, how far it must be computed (program-level), undefined: all of it. */
  limits?: readonly (Ix | undefined)[];
  /** Store the value converted to this type (a contraction operand of another type). */
  convertTo?: ElementType;
}

export interface LoopKernelCall extends KernelCall {
  /** False when `identityLeaf` was read at another index than the one being written. */
  readonly identityOnly: boolean;
}

/** A loop nest over the output of `root` writing its element expression. */
export function loopKernel(
  prog: ProgramIx,
  spec: LoopKernelSpec,
  opts: LowerOptions = {},
): LoopKernelCall {
  const cx = new Ctx(prog, opts);
  const P = cx.pool;
  const kb = cx.kb;
  const shape = arrayOf(spec.root);
  const outType = spec.convertTo ?? shape.type;
  const out = cx.out(outType, 0, spec.root.name);
  const conv = (v: Sx): Sx =>
    outType === shape.type ? v : P.apply("convert", outType, shape.type, [v]);
  const leafSet = new Set(spec.leaves);
  const flat =
    (opts.flatten ?? true) &&
    !spec.tile &&
    spec.identityLeaf === undefined &&
    shape.dims.length > 1 &&
    spec.limits?.every((l) => l === undefined) !== false &&
    pointwise(spec.root, leafSet);
  let identityOnly = true;
  if (flat) {
    // One loop over every element; every buffer is read at the same linear index.
    const n = productIx(P, cx.dims.dims(spec.root));
    const leaves = new Map<Instruction, Leaf>();
    for (const l of spec.leaves) {
      const r = arrayOf(l).dims.length === 0 ? [] : [n];
      leaves.set(l, { kind: "buffer", buf: cx.value(l), dims: r });
    }
    const L = kb.loop(kb.root, P.c(0), n, "parallel", 0);
    const v = conv(cx.lowering(leaves).value(spec.root, [L.v]));
    kb.store(L.body, out, L.v, v);
    const total = prog.c(product(shape.dims));
    return { ...cx.finish(spec.name, spec.comment, 1, [total]), identityOnly };
  }
  const dims = cx.dims.dims(spec.root);
  const leaves = cx.bufferLeaves(spec.leaves);
  let outKey = "";
  if (spec.identityLeaf) {
    const leaf = leaves.get(spec.identityLeaf)!;
    if (leaf.kind === "buffer") {
      leaf.onRead = (idx) => {
        if (idx.map((a) => a.key).join(",") !== outKey) identityOnly = false;
      };
    }
  }
  const limits = (spec.limits ?? []).map((l) => (l === undefined ? undefined : cx.sizeOf(l)));
  const rank = dims.length;
  const idx: Ix[] = [];
  let body: Block = kb.root;
  let ranges: 0 | 1 | 2 = 0;
  const rangeExtents: Ix[] = [];
  const progDims = shape.dims;
  if (spec.tile) {
    // Rows: the leading rowDims dims flattened; columns: the rest flattened.
    const r = spec.tile.rowDims;
    const rowN = productIx(P, dims.slice(0, r));
    const colN = productIx(P, dims.slice(r));
    const R = kb.loop(body, P.c(0), rowN, "parallel", 0);
    const C = kb.loop(R.body, P.c(0), colN, "parallel", 1);
    idx.push(...split(P, R.v, dims.slice(0, r)), ...split(P, C.v, dims.slice(r)));
    body = C.body;
    ranges = 2;
    rangeExtents.push(
      prog.c(progDims.slice(0, r).reduce((a, b) => a * b, 1)),
      prog.c(progDims.slice(r).reduce((a, b) => a * b, 1)),
    );
  } else if (rank > 0) {
    // Group leading dims into the range until it has minRows rows (never the last dim, so the
    // innermost loop stays contiguous, unless there is one dim).
    // A shape-generic kernel groups every dim but the last (its structure may not depend on
    // the sizes it runs at).
    const minRows = opts.minRows ?? 1;
    let g = 1;
    let rows = progDims[0]!;
    while (
      g < rank - 1 &&
      (opts.generic || rows < minRows) &&
      limits[g] === undefined &&
      limits[0] === undefined
    ) {
      rows *= progDims[g]!;
      g++;
    }
    const grouped = dims.slice(0, g);
    let rowHi = productIx(P, grouped);
    let progRows: Ix = prog.c(progDims.slice(0, g).reduce((a, b) => a * b, 1));
    if (g === 1 && limits[0] !== undefined) {
      rowHi = limits[0];
      progRows = spec.limits![0]!;
    }
    const R = kb.loop(body, P.c(0), rowHi, "parallel", 0);
    idx.push(...split(P, R.v, grouped));
    body = R.body;
    for (let k = g; k < rank; k++) {
      const l = kb.loop(body, P.c(0), limits[k] ?? dims[k]!, "parallel");
      idx.push(l.v);
      body = l.body;
    }
    ranges = 1;
    rangeExtents.push(progRows);
  }
  outKey = idx.map((a) => a.key).join(",");
  const v = conv(cx.lowering(leaves).value(spec.root, idx));
  kb.store(body, out, linearIx(P, idx, dims), v);
  return { ...cx.finish(spec.name, spec.comment, ranges, rangeExtents), identityOnly };
}

/** A flattened index over `dims` split into one index per dim. */
function split(P: Pool, v: Ix, dims: readonly Ix[]): Ix[] {
  if (dims.length === 0) return []; // a range of one (a dot without lhs free dims has no rows)
  if (dims.length === 1) return [v];
  const out = new Array<Ix>(dims.length);
  let rest = v;
  for (let k = dims.length - 1; k >= 1; k--) {
    out[k] = P.mod(rest, dims[k]!);
    rest = P.floordiv(rest, dims[k]!);
  }
  out[0] = rest;
  return out;
}

function product(xs: readonly number[]): number {
  return xs.reduce((a, b) => a * b, 1);
}

// ---- scalar computations (reducers, combiners, comparators) --------------------------------

/** True when `c` is a scalar computation the expression lowering can inline. */
export function inlinable(c: Computation): boolean {
  return c.instructions.every((i) => {
    // A tuple is the root's, or read back element by element (an inlined reducer's result).
    if (i.opcode === "tuple") {
      return i === c.root || i.users.every((u) => u.opcode === "get-tuple-element");
    }
    if (i.opcode === "get-tuple-element") return i.operand(0).opcode === "tuple";
    if (i.opcode === "dynamic-slice") return false;
    if (i.opcode === "call") {
      return i.shape.kind === "array" && i.shape.dims.length === 0 && inlinable(i.called[0]!);
    }
    return isExpressible(i) && i.shape.kind === "array";
  });
}

/** Applies a scalar computation to argument values: its results (one per tuple element). */
export function applyScalar(pool: Pool, dims: DimSource, c: Computation, args: readonly Sx[]): Sx[] {
  if (!inlinable(c)) {
    throw new NotFast(`the computation ${c.name} is not made of elementwise ops`);
  }
  const leaves = new Map<Instruction, Leaf>();
  c.parameters.forEach((p, i) => leaves.set(p, { kind: "scalars", vals: [args[i]!] }));
  const low = new ExprLowering(pool, dims, leaves, () => {
    throw new NotFast(`an array constant inside the scalar computation ${c.name}`);
  });
  const root = c.root;
  const outs = root.opcode === "tuple" ? root.operands : [root];
  return outs.map((o) => low.value(o, []));
}

/** The opcode of a reducer `r(a, b) = op(a, b)` of one accumulator, for renderers. */
export function combinerOf(c: Computation): string | undefined {
  const root = c.root;
  if (c.parameters.length !== 2 || root.operands.length !== 2) return undefined;
  const [a, b] = root.operands;
  const p0 = c.parameters.find((p) => p.attrs.parameterNumber === 0);
  const p1 = c.parameters.find((p) => p.attrs.parameterNumber === 1);
  if (a !== p0 || b !== p1) return undefined;
  return ["add", "multiply", "maximum", "minimum", "and", "or", "xor"].includes(root.opcode)
    ? root.opcode
    : undefined;
}

// ---- reductions ------------------------------------------------------------------------------

export interface ReduceKernelSpec {
  name: string;
  comment: string;
  root: Instruction;
  leaves: readonly Instruction[];
  /** Per dim of the (single) output, how far it must be computed (program-level). */
  limits?: readonly (Ix | undefined)[];
  /** Per dim of the reduced operand, how far the reduction must run (a reduction hint). */
  reduceLimits?: readonly (Ix | undefined)[];
}

interface Output {
  instr: Instruction;
  shape: ArrayShape;
  elem: number | undefined;
  dims: readonly number[];
}

function sameList(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((v, i) => v === b[i]);
}

function reducesOf(root: Instruction, leaves: ReadonlySet<Instruction>): Instruction[] {
  const out = regionOf(root, leaves).filter((i) => i.opcode === "reduce");
  const order = root.parent.instructions;
  return out.sort((a, b) => order.indexOf(a) - order.indexOf(b));
}

function elemShape(instr: Instruction, elem: number): ArrayShape {
  const s = instr.shape;
  if (s.kind !== "tuple") return arrayOf(instr);
  const e = s.elements[elem]!;
  if (e.kind !== "array") throw new NotFast(`output %${instr.name} has a nested tuple`);
  return e;
}

export interface ReduceKernelCall extends KernelCall {
  /** Result shapes, one per output buffer. */
  readonly shapes: readonly ArrayShape[];
}

/**
 * A reduction kernel for a reduce or a kInput fusion root: outputs are the root (or its tuple
 * elements), row-shaped (the kept dims) or reduce-shaped (the operand's dims: an epilogue).
 * Throws NotFast when the region is not rows of one shape reduced over one set of dims.
 */
export function reduceKernel(
  prog: ProgramIx,
  spec: ReduceKernelSpec,
  opts: LowerOptions = {},
): ReduceKernelCall {
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
    if (!inlinable(r.called[0]!)) {
      throw new NotFast(`the reducer of %${r.name} is not made of elementwise ops`);
    }
  }
  const kept = range(S.length).filter((i) => !Rd.includes(i));
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

  const column =
    reduces.length === 1 &&
    root === first &&
    Rd.length > 0 &&
    !Rd.includes(S.length - 1);
  const cx = new Ctx(prog, opts);
  const outBufs = outputs.map((o, i) =>
    cx.out(o.shape.type, i, o.elem === undefined ? o.instr.name : `${o.instr.name}.${o.elem}`,
      column ? "rw" : "w"),
  );
  const leaves = cx.bufferLeaves(spec.leaves);
  if (column) {
    const call = columnReduce(cx, leaves, first, S, kept, outBufs, spec);
    return { ...call, shapes: outputs.map((o) => o.shape) };
  }
  const single = outputs.length === 1 ? outputs[0]! : undefined;
  // Limits of kept dims, from the output's dims (row-shaped: kept dims in order).
  const keptLimits = kept.map((d, k) => {
    if (!single) return undefined;
    const lim = sameList(single.dims, S) && Rd.length > 0 ? spec.limits?.[d] : spec.limits?.[k];
    return lim;
  });
  const redLimits = Rd.map((d) => spec.reduceLimits?.[d]);
  const epiLimits = Rd.map((d) =>
    single && sameList(single.dims, S) ? spec.limits?.[d] : undefined,
  );
  const call = rowReduce(cx, leaves, reduces, outputs, outBufs, S, Rd, kept, spec, {
    kept: keptLimits,
    reduced: redLimits,
    epilogue: epiLimits,
  });
  return { ...call, shapes: outputs.map((o) => o.shape) };
}

function rowIndex(
  rank: number,
  kept: readonly number[],
  keptIdx: readonly Ix[],
  redIdx: readonly Ix[],
): Ix[] {
  const idx = new Array<Ix>(rank);
  let k = 0;
  let r = 0;
  for (let d = 0; d < rank; d++) idx[d] = kept.includes(d) ? keptIdx[k++]! : redIdx[r++]!;
  return idx;
}

function rowReduce(
  cx: Ctx,
  leaves: Map<Instruction, Leaf>,
  reduces: readonly Instruction[],
  outputs: readonly Output[],
  outBufs: readonly number[],
  S: readonly number[],
  Rd: readonly number[],
  kept: readonly number[],
  spec: ReduceKernelSpec,
  limits: {
    kept: readonly (Ix | undefined)[];
    reduced: readonly (Ix | undefined)[];
    epilogue: readonly (Ix | undefined)[];
  },
): KernelCall {
  const P = cx.pool;
  const kb = cx.kb;
  const sDims = cx.dims.dims(first(reduces).operand(0));
  const keptDims = kept.map((d) => sDims[d]!);
  const redDims = Rd.map((d) => sDims[d]!);
  const keptLim = limits.kept.map((l, k) => (l === undefined ? keptDims[k]! : cx.sizeOf(l)));
  const redLim = limits.reduced.map((l, j) => (l === undefined ? redDims[j]! : cx.sizeOf(l)));
  const epiLim = limits.epilogue.map((l, j) => (l === undefined ? redDims[j]! : cx.sizeOf(l)));
  // Rows: the kept dims; the range runs over the leading ones, grouped until there are
  // minRows rows (attention's [batch 1, 12 heads, 128 rows] splits over all 1536), or over
  // the first alone when it has a limit (or none when every dim is reduced).
  const keptIdx: Ix[] = [];
  let K: Block = kb.root;
  let ranges: 0 | 1 = 0;
  const rangeExtents: Ix[] = [];
  const keptSizes = kept.map((d) => S[d]!);
  let g = kept.length > 0 ? 1 : 0;
  let rows = keptSizes[0] ?? 1;
  const minRows = cx.opts.minRows ?? 1;
  while (
    g < kept.length &&
    (cx.opts.generic || rows < minRows) &&
    limits.kept.slice(0, g + 1).every((l) => l === undefined)
  ) {
    rows *= keptSizes[g]!;
    g++;
  }
  if (g > 1) {
    const R = kb.loop(K, P.c(0), productIx(P, keptDims.slice(0, g)), "parallel", 0);
    keptIdx.push(...split(P, R.v, keptDims.slice(0, g)));
    K = R.body;
  }
  kept.forEach((_, k) => {
    if (g > 1 && k < g) return;
    const l = kb.loop(K, P.c(0), keptLim[k]!, "parallel", k === 0 ? 0 : undefined);
    keptIdx.push(l.v);
    K = l.body;
  });
  if (kept.length > 0) {
    ranges = 1;
    const lim0 = limits.kept[0];
    rangeExtents.push(g > 1 ? cx.prog.c(rows) : (lim0 ?? cx.prog.c(S[kept[0]!]!)));
  }
  const low = cx.lowering(leaves);
  for (const r of reduces) {
    const n = r.operands.length / 2;
    const types = r.operands.slice(0, n).map((o) => arrayOf(o).type);
    const accs = r.operands.slice(n).map((init, i) => kb.accInit(K, types[i]!, low.value(init, [])));
    const L = kb.nest(K, redLim, "reduce");
    const idx = rowIndex(S.length, kept, keptIdx, L.vars);
    const xs = r.operands.slice(0, n).map((o) => low.value(o, idx));
    const res = applyScalar(P, cx.dims, r.called[0]!, [...accs.map((a) => a.value), ...xs]);
    kb.accSet(L.body, accs.map((a) => a.id), res, n === 1 ? combinerOf(r.called[0]!) : undefined);
    leaves.set(r, { kind: "row", vals: accs.map((a) => a.value), idx: keptIdx });
  }
  const valueOf = (o: Output, idx: readonly Ix[]): Sx => {
    if (o.elem === undefined) return low.value(o.instr, idx);
    const leaf = leaves.get(o.instr);
    if (leaf?.kind !== "row") throw new NotFast(`output %${o.instr.name} is not a reduce`);
    return leaf.vals[o.elem]!;
  };
  const rowOuts = outputs.map((o, i) => [o, i] as const).filter(
    ([o]) => Rd.length > 0 && sameList(o.dims, S),
  );
  if (rowOuts.length > 0) {
    const E = kb.nest(K, epiLim, "parallel");
    const idx = rowIndex(S.length, kept, keptIdx, E.vars);
    const lin = linearIx(P, idx, sDims);
    for (const [o, i] of rowOuts) kb.store(E.body, outBufs[i]!, lin, valueOf(o, idx));
  }
  const lin = linearIx(P, keptIdx, keptDims);
  outputs.forEach((o, i) => {
    if (rowOuts.some(([, j]) => j === i)) return;
    kb.store(K, outBufs[i]!, lin, valueOf(o, keptIdx));
  });
  return cx.finish(spec.name, spec.comment, ranges, rangeExtents);
}

function first<T>(xs: readonly T[]): T {
  return xs[0]!;
}

/**
 * One reduce keeping the innermost dim: initialize the outputs, then walk the input in
 * row-major order accumulating into them (each output still folds its elements in order).
 * Ranges over the first dim when it is kept (disjoint output slices).
 */
function columnReduce(
  cx: Ctx,
  leaves: Map<Instruction, Leaf>,
  r: Instruction,
  S: readonly number[],
  kept: readonly number[],
  outBufs: readonly number[],
  spec: ReduceKernelSpec,
): KernelCall {
  const P = cx.pool;
  const kb = cx.kb;
  const n = r.operands.length / 2;
  const sDims = cx.dims.dims(r.operand(0));
  const keptDims = kept.map((d) => sDims[d]!);
  const low = cx.lowering(leaves);
  const inits = r.operands.slice(n).map((i) => low.value(i, []));
  const types = r.operands.slice(0, n).map((o) => arrayOf(o).type);
  const rangeFirst = kept[0] === 0;
  let ranges: 0 | 1 = 0;
  const rangeExtents: Ix[] = [];
  let outer: Block = kb.root;
  let v0: Ix | undefined;
  if (rangeFirst) {
    const l = kb.loop(kb.root, P.c(0), sDims[0]!, "parallel", 0);
    v0 = l.v;
    outer = l.body;
    ranges = 1;
    rangeExtents.push(cx.prog.c(S[0]!));
  }
  // Initialize this range's part of the outputs.
  const restKept = rangeFirst ? keptDims.slice(1) : keptDims;
  const F = kb.nest(outer, restKept, "parallel");
  const fIdx = rangeFirst ? [v0!, ...F.vars] : F.vars;
  const fLin = linearIx(P, fIdx, keptDims);
  inits.forEach((init, i) => kb.store(F.body, outBufs[i]!, fLin, init));
  // Accumulate in input order.
  const L = kb.nest(outer, rangeFirst ? sDims.slice(1) : sDims, "serial");
  const idx = rangeFirst ? [v0!, ...L.vars] : L.vars;
  const kl = linearIx(P, kept.map((d) => idx[d]!), keptDims);
  const accs = outBufs.slice(0, n).map((b, i) => P.load(types[i]!, b, kl));
  const xs = r.operands.slice(0, n).map((o) => low.value(o, idx));
  const res = applyScalar(P, cx.dims, r.called[0]!, [...accs, ...xs]);
  if (n === 1) kb.store(L.body, outBufs[0]!, kl, res[0]!);
  else {
    // Every new value is computed before any output changes (they read each other).
    const tmp = res.map((v, i) => kb.accInit(L.body, types[i]!, v));
    tmp.forEach((t, i) => kb.store(L.body, outBufs[i]!, kl, t.value));
  }
  return cx.finish(spec.name, spec.comment, ranges, rangeExtents);
}

// ---- reduce-window ---------------------------------------------------------------------------

/** reduce-window: per output position, the window in row-major order from the init. */
export function reduceWindowKernel(
  prog: ProgramIx,
  name: string,
  comment: string,
  instr: Instruction,
  opts: LowerOptions = {},
): KernelCall {
  const cx = new Ctx(prog, opts);
  const P = cx.pool;
  const kb = cx.kb;
  const n = instr.operands.length / 2;
  const outShapes = range(n).map((i) => elemShape(instr, i));
  const outBufs = outShapes.map((s, i) => cx.out(s.type, i, `${instr.name}.${i}`));
  const ins = instr.operands.slice(0, n);
  const leaves = cx.bufferLeaves([...new Set(instr.operands)]);
  const inDims = cx.dims.dims(ins[0]!);
  const outDims = cx.shapeDims(outShapes[0]!.dims);
  const window = instr.attrs.window!;
  const low = cx.lowering(leaves);
  const O: Ix[] = [];
  let body: Block = kb.root;
  outDims.forEach((d, k) => {
    const l = kb.loop(body, P.c(0), d, "parallel", k === 0 ? 0 : undefined);
    O.push(l.v);
    body = l.body;
  });
  const inits = instr.operands.slice(n).map((i) => low.value(i, []));
  const types = ins.map((o) => arrayOf(o).type);
  const accs = inits.map((init, i) => kb.accInit(body, types[i]!, init));
  let b = body;
  const pos: Ix[] = [];
  window.forEach((w, k) => {
    const l = kb.loop(b, P.c(0), P.c(w.size), "serial");
    // u = o * stride - padLow + w * windowDilation, in the dilated and padded base.
    const u = P.add(P.scale(O[k]!, w.stride), P.scale(l.v, w.windowDilation), P.c(-w.padLow));
    const conds: IxCmp[] = [];
    let x = u;
    if (w.baseDilation > 1) {
      conds.push({ rel: "eq", a: P.mod(u, P.c(w.baseDilation)), b: P.c(0) });
      x = P.floordiv(u, P.c(w.baseDilation));
    }
    conds.push({ rel: "le", a: P.c(0), b: x }, { rel: "lt", a: x, b: inDims[k]! });
    b = kb.when(l.body, conds);
    pos.push(x);
  });
  const xs = ins.map((o) => low.value(o, pos));
  const res = applyScalar(P, cx.dims, instr.called[0]!, [...accs.map((a) => a.value), ...xs]);
  kb.accSet(b, accs.map((a) => a.id), res, n === 1 ? combinerOf(instr.called[0]!) : undefined);
  const olin = linearIx(P, O, outDims);
  accs.forEach((a, i) => kb.store(body, outBufs[i]!, olin, a.value));
  const ext = outShapes[0]!.dims.length > 0 ? [prog.c(outShapes[0]!.dims[0]!)] : [];
  return cx.finish(name, comment, outDims.length > 0 ? 1 : 0, ext);
}

// ---- gather, scatter, dynamic-update-slice ---------------------------------------------------

/** gather: start indices clamped into range, as XLA does. */
export function gatherKernel(
  prog: ProgramIx,
  name: string,
  comment: string,
  instr: Instruction,
  opts: LowerOptions = {},
): KernelCall {
  const cx = new Ctx(prog, opts);
  const P = cx.pool;
  const kb = cx.kb;
  const dn = instr.attrs.gather!;
  const sizes = instr.attrs.gatherSliceSizes!;
  const operand = instr.operand(0);
  const indices = instr.operand(1);
  const out = cx.out(arrayOf(instr).type, 0, instr.name);
  const ob = cx.value(operand);
  const ib = cx.value(indices);
  const od = cx.dims.dims(operand);
  const id = cx.dims.dims(indices);
  const outDims = cx.dims.dims(instr);
  const ri = id.length;
  const ivd = dn.indexVectorDim;
  const is = stridesIx(P, id);
  const os = stridesIx(P, od);
  const ivdStride = ivd === ri ? P.c(0) : is[ivd]!;
  const batchIdxDims = range(ri).filter((d) => d !== ivd);
  const offsetOperandDims = range(od.length).filter(
    (d) => !dn.collapsedSliceDims.includes(d) && !dn.operandBatchingDims.includes(d),
  );
  const offsetPos = dn.offsetDims;
  const batchPos = range(outDims.length).filter((p) => !offsetPos.includes(p));
  const batchingFrom = dn.startIndicesBatchingDims.map((d) => batchIdxDims.indexOf(d));
  const oi: Ix[] = [];
  let body: Block = kb.root;
  outDims.forEach((d, k) => {
    const l = kb.loop(body, P.c(0), d, "parallel", k === 0 ? 0 : undefined);
    oi.push(l.v);
    body = l.body;
  });
  const base = P.add(...batchPos.map((p, j) => P.mul(oi[p]!, is[batchIdxDims[j]!]!)));
  const it = arrayOf(indices).type;
  const start: Ix[] = od.map(() => P.c(0));
  dn.startIndexMap.forEach((d, k) => {
    const raw = P.ixOf(P.load(it, ib, P.add(base, P.mul(P.c(k), ivdStride))));
    start[d] = P.clamp(raw, P.c(0), P.add(od[d]!, P.c(-sizes[d]!)));
  });
  dn.operandBatchingDims.forEach((d, i) => (start[d] = oi[batchPos[batchingFrom[i]!]!]!));
  const src = P.add(
    ...od.map((_, d) => P.mul(start[d]!, os[d]!)),
    ...offsetPos.map((p, k) => P.mul(oi[p]!, os[offsetOperandDims[k]!]!)),
  );
  kb.store(body, out, linearIx(P, oi, outDims), P.load(arrayOf(operand).type, ob, src));
  const ext = outDims.length > 0 ? [prog.c(arrayOf(instr).dims[0]!)] : [];
  return cx.finish(name, comment, outDims.length > 0 ? 1 : 0, ext);
}

/**
 * scatter: the outputs start as copies of the operands (a step before it) and are updated in
 * place; a window whose start is out of bounds anywhere is skipped; updates apply in order of
 * scatter positions, then window positions, through the combiner. Serial (order matters).
 */
export function scatterKernel(
  prog: ProgramIx,
  name: string,
  comment: string,
  instr: Instruction,
  opts: LowerOptions = {},
): KernelCall {
  const cx = new Ctx(prog, opts);
  const P = cx.pool;
  const kb = cx.kb;
  const n = (instr.operands.length - 1) / 2;
  const dn = instr.attrs.scatter!;
  const operand0 = instr.operand(0);
  const idxI = instr.operand(n);
  const upd0 = instr.operand(n + 1);
  const outs = range(n).map((i) => cx.out(arrayOf(instr.operand(i)).type, i, `${instr.name}.${i}`, "rw"));
  const ib = cx.value(idxI);
  const ubs = range(n).map((i) => cx.value(instr.operand(n + 1 + i)));
  const od = cx.dims.dims(operand0);
  const id = cx.dims.dims(idxI);
  const ud = cx.dims.dims(upd0);
  const ri = id.length;
  const ivd = dn.indexVectorDim;
  const is = stridesIx(P, id);
  const os = stridesIx(P, od);
  const us = stridesIx(P, ud);
  const ivdStride = ivd === ri ? P.c(0) : is[ivd]!;
  const updateScatterDims = range(ud.length).filter((d) => !dn.updateWindowDims.includes(d));
  const batchIdxDims = range(ri).filter((d) => d !== ivd);
  const windowOperandDims = range(od.length).filter(
    (d) => !dn.insertedWindowDims.includes(d) && !dn.inputBatchingDims.includes(d),
  );
  const batchingFrom = dn.scatterIndicesBatchingDims.map((d) => batchIdxDims.indexOf(d));
  const windowSize: Ix[] = od.map(() => P.c(1));
  windowOperandDims.forEach((d, k) => (windowSize[d] = ud[dn.updateWindowDims[k]!]!));
  const Sg = kb.nest(kb.root, updateScatterDims.map((d) => ud[d]!), "serial");
  const gv = Sg.vars;
  const base = P.add(...gv.map((g, j) => P.mul(g, is[batchIdxDims[j]!]!)));
  const ubase = P.add(...gv.map((g, j) => P.mul(g, us[updateScatterDims[j]!]!)));
  const it = arrayOf(idxI).type;
  const start: Ix[] = od.map(() => P.c(0));
  const checks: IxCmp[] = [];
  dn.scatterDimsToOperandDims.forEach((d, k) => {
    const v = P.ixOf(P.load(it, ib, P.add(base, P.mul(P.c(k), ivdStride))));
    checks.push({ rel: "le", a: P.c(0), b: v });
    checks.push({ rel: "le", a: v, b: P.sub(od[d]!, windowSize[d]!) });
    start[d] = v;
  });
  dn.inputBatchingDims.forEach((d, i) => (start[d] = gv[batchingFrom[i]!]!));
  const body = checks.length > 0 ? kb.when(Sg.body, checks) : Sg.body;
  const W = kb.nest(body, dn.updateWindowDims.map((d) => ud[d]!), "serial");
  const ol = P.add(
    ...od.map((_, d) => P.mul(start[d]!, os[d]!)),
    ...W.vars.map((w, k) => P.mul(w, os[windowOperandDims[k]!]!)),
  );
  const ul = P.add(ubase, ...W.vars.map((w, k) => P.mul(w, us[dn.updateWindowDims[k]!]!)));
  const types = range(n).map((i) => arrayOf(instr.operand(i)).type);
  const accs = outs.map((o, i) => P.load(types[i]!, o, ol));
  const xs = ubs.map((u, i) => P.load(types[i]!, u, ul));
  const res = applyScalar(P, cx.dims, instr.called[0]!, [...accs, ...xs]);
  // All combiner results are computed before any output is written (variadic scatter).
  if (n === 1) kb.store(W.body, outs[0]!, ol, res[0]!);
  else {
    const tmp = res.map((v, i) => kb.accInit(W.body, types[i]!, v));
    tmp.forEach((t, i) => kb.store(W.body, outs[i]!, ol, t.value));
  }
  return cx.finish(name, comment, 0, []);
}

/** dynamic-update-slice: the output is a copy of the operand (a step before it), updated. */
export function dynamicUpdateSliceKernel(
  prog: ProgramIx,
  name: string,
  comment: string,
  instr: Instruction,
  opts: LowerOptions = {},
): KernelCall {
  const cx = new Ctx(prog, opts);
  const P = cx.pool;
  const kb = cx.kb;
  const operand = instr.operand(0);
  const upd = instr.operand(1);
  const out = cx.out(arrayOf(instr).type, 0, instr.name, "rw");
  const ub = cx.value(upd);
  const od = cx.dims.dims(operand);
  const ud = cx.dims.dims(upd);
  const starts = instr.operands.slice(2).map((s) => {
    const b = cx.value(s);
    return P.ixOf(P.load(arrayOf(s).type, b, P.c(0)));
  });
  const st = od.map((dim, k) => P.clamp(starts[k]!, P.c(0), P.sub(dim, ud[k]!)));
  const ui: Ix[] = [];
  let body: Block = kb.root;
  ud.forEach((d, k) => {
    const l = kb.loop(body, P.c(0), d, "parallel", k === 0 ? 0 : undefined);
    ui.push(l.v);
    body = l.body;
  });
  const oi = ui.map((u, k) => P.add(u, st[k]!));
  kb.store(body, out, linearIx(P, oi, od), P.load(arrayOf(upd).type, ub, linearIx(P, ui, ud)));
  const ext = ud.length > 0 ? [prog.c(arrayOf(upd).dims[0]!)] : [];
  return cx.finish(name, comment, ud.length > 0 ? 1 : 0, ext);
}

// ---- dot and convolution as kernels ----------------------------------------------------------

/** A contraction's operands as the step list describes them (strided views of buffers). */
export interface ContractionShape {
  readonly type: ElementType;
  readonly lhsDims: readonly number[];
  readonly rhsDims: readonly number[];
  readonly lhsStrides: readonly number[];
  readonly rhsStrides: readonly number[];
}

/**
 * The accumulator type of a generated contraction: the type itself for integers and pred
 * (wrapping per step, the evaluator's semantics); f32 for floats (the evaluator accumulates in
 * double and rounds once; f32 sums are the tolerance tier's).
 */
function accType(t: ElementType): ElementType {
  return t === "f16" || t === "bf16" ? "f32" : t;
}

/**
 * out = dot(lhs, rhs) as one kernel, for the types and forms a backend's library GEMM does not
 * take. Bindings: out 0 is the result, 1 the lhs buffer, 2 the rhs buffer.
 */
export function dotKernel(
  prog: ProgramIx,
  name: string,
  comment: string,
  c: ContractionShape & { readonly dn: import("../../ir/attributes.ts").DotDimensionNumbers },
  opts: LowerOptions = {},
): KernelCall {
  const cx = new Ctx(prog, opts);
  const P = cx.pool;
  const kb = cx.kb;
  const t = c.type;
  const at = accType(t);
  const out = cx.out(t, 0, name);
  const lb = kb.buf(t, "r", "lhs");
  const rb = kb.buf(t, "r", "rhs");
  cx.bindings.push({ kind: "out", index: 1 }, { kind: "out", index: 2 });
  const dn = c.dn;
  const free = (rank: number, used: readonly number[]) =>
    range(rank).filter((i) => !used.includes(i));
  const lf = free(c.lhsDims.length, [...dn.lhsBatch, ...dn.lhsContracting]);
  const rf = free(c.rhsDims.length, [...dn.rhsBatch, ...dn.rhsContracting]);
  const outDims = [
    ...dn.lhsBatch.map((d) => c.lhsDims[d]!),
    ...lf.map((d) => c.lhsDims[d]!),
    ...rf.map((d) => c.rhsDims[d]!),
  ];
  const oi: Ix[] = [];
  let body: Block = kb.root;
  outDims.forEach((d, k) => {
    const l = kb.loop(body, P.c(0), P.c(d), "parallel", k === 0 ? 0 : undefined);
    oi.push(l.v);
    body = l.body;
  });
  const acc = kb.accInit(body, at, P.const(at, at === "s64" ? 0n : 0));
  const R = kb.nest(body, dn.lhsContracting.map((d) => P.c(c.lhsDims[d]!)), "reduce");
  const li: Ix[] = new Array(c.lhsDims.length);
  const ri: Ix[] = new Array(c.rhsDims.length);
  const nb = dn.lhsBatch.length;
  dn.lhsBatch.forEach((d, j) => (li[d] = oi[j]!));
  dn.rhsBatch.forEach((d, j) => (ri[d] = oi[j]!));
  lf.forEach((d, k) => (li[d] = oi[nb + k]!));
  rf.forEach((d, k) => (ri[d] = oi[nb + lf.length + k]!));
  dn.lhsContracting.forEach((d, j) => (li[d] = R.vars[j]!));
  dn.rhsContracting.forEach((d, j) => (ri[d] = R.vars[j]!));
  const off = (idx: readonly Ix[], st: readonly number[]) =>
    P.add(...idx.map((x, k) => P.scale(x, st[k]!)));
  const conv = (v: Sx) => (at === t ? v : P.apply("convert", at, t, [v]));
  const a = conv(P.load(t, lb, off(li, c.lhsStrides)));
  const b = conv(P.load(t, rb, off(ri, c.rhsStrides)));
  const prod = P.apply("multiply", at, at, [a, b]);
  kb.accSet(R.body, [acc.id], [P.apply("add", at, at, [acc.value, prod])], "add");
  const res = at === t ? acc.value : P.apply("convert", t, at, [acc.value]);
  kb.store(body, out, linearIx(P, oi, outDims.map((d) => P.c(d))), res);
  const ext = outDims.length > 0 ? [prog.c(outDims[0]!)] : [];
  return cx.finish(name, comment, outDims.length > 0 ? 1 : 0, ext);
}

/**
 * out = convolution(lhs, rhs) as one kernel of direct loops (the evaluator's algorithm: holes
 * and padding skipped). Bindings as dotKernel's.
 */
export function convKernel(
  prog: ProgramIx,
  name: string,
  comment: string,
  c: ContractionShape & {
    readonly outDims: readonly number[];
    readonly convDims: import("../../ir/attributes.ts").ConvDimensionNumbers;
    readonly window: readonly import("../../ir/attributes.ts").WindowDim[];
    readonly featureGroupCount: number;
    readonly batchGroupCount: number;
  },
  opts: LowerOptions = {},
): KernelCall {
  const cx = new Ctx(prog, opts);
  const P = cx.pool;
  const kb = cx.kb;
  const t = c.type;
  const at = accType(t);
  const out = cx.out(t, 0, name);
  const lb = kb.buf(t, "r", "input");
  const rb = kb.buf(t, "r", "kernel");
  cx.bindings.push({ kind: "out", index: 1 }, { kind: "out", index: 2 });
  const dn = c.convDims;
  const fgc = c.featureGroupCount;
  const bgc = c.batchGroupCount;
  const inBatch = c.lhsDims[dn.inputBatch]!;
  const kInF = c.rhsDims[dn.kernelInputFeature]!;
  const outF = c.rhsDims[dn.kernelOutputFeature]!;
  const ls = c.lhsStrides;
  const rs = c.rhsStrides;
  const oi: Ix[] = [];
  let body: Block = kb.root;
  c.outDims.forEach((d, k) => {
    const l = kb.loop(body, P.c(0), P.c(d), "parallel", k === 0 ? 0 : undefined);
    oi.push(l.v);
    body = l.body;
  });
  const b = oi[dn.outputBatch]!;
  const o = oi[dn.outputFeature]!;
  const featureGroup = P.floordiv(o, P.c(outF / fgc));
  const batchGroup = P.floordiv(o, P.c(outF / bgc));
  const acc = kb.accInit(body, at, P.const(at, at === "s64" ? 0n : 0));
  const W = kb.nest(body, c.window.map((w) => P.c(w.size)), "serial");
  const conds: IxCmp[] = [];
  const xs: Ix[] = [];
  const ks: Ix[] = [];
  c.window.forEach((w, k) => {
    const u = P.add(P.scale(oi[dn.outputSpatial[k]!]!, w.stride), P.c(-w.padLow),
      P.scale(W.vars[k]!, w.windowDilation));
    let x = u;
    if (w.baseDilation > 1) {
      conds.push({ rel: "eq", a: P.mod(u, P.c(w.baseDilation)), b: P.c(0) });
      x = P.floordiv(u, P.c(w.baseDilation));
    }
    conds.push({ rel: "le", a: P.c(0), b: x }, {
      rel: "lt", a: x, b: P.c(c.lhsDims[dn.inputSpatial[k]!]!),
    });
    xs.push(x);
    ks.push(w.windowReversal ? P.sub(P.c(w.size - 1), W.vars[k]!) : W.vars[k]!);
  });
  const inner = conds.length > 0 ? kb.when(W.body, conds) : W.body;
  const F = kb.loop(inner, P.c(0), P.c(kInF), "reduce");
  const f = P.add(P.scale(featureGroup, kInF), F.v);
  const li = P.add(
    P.scale(P.add(b, P.scale(batchGroup, inBatch / bgc)), ls[dn.inputBatch]!),
    P.scale(f, ls[dn.inputFeature]!),
    ...xs.map((x, k) => P.scale(x, ls[dn.inputSpatial[k]!]!)),
  );
  const ri = P.add(
    P.scale(o, rs[dn.kernelOutputFeature]!),
    P.scale(F.v, rs[dn.kernelInputFeature]!),
    ...ks.map((x, k) => P.scale(x, rs[dn.kernelSpatial[k]!]!)),
  );
  const conv = (v: Sx) => (at === t ? v : P.apply("convert", at, t, [v]));
  const prod = P.apply("multiply", at, at, [conv(P.load(t, lb, li)), conv(P.load(t, rb, ri))]);
  kb.accSet(F.body, [acc.id], [P.apply("add", at, at, [acc.value, prod])], "add");
  const res = at === t ? acc.value : P.apply("convert", t, at, [acc.value]);
  kb.store(body, out, linearIx(P, oi, c.outDims.map((d) => P.c(d))), res);
  const ext = c.outDims.length > 0 ? [prog.c(c.outDims[0]!)] : [];
  return cx.finish(name, comment, c.outDims.length > 0 ? 1 : 0, ext);
}
