// Loop kernels: one loop nest over an output array whose body writes the element expression of
// a root instruction (ir elementwise/data-movement ops, a kLoop fusion's whole computation, or
// a kOutput fusion's epilogue). The generated function is `k(out, lo, hi, in0, in1, ...)`: the
// leading `group` output dims are flattened into one loop from lo to hi (so a matmul epilogue
// can run on the rows the dot just finished), the remaining dims are nested loops, and the
// leaves (kernel inputs) are typed arrays read with hoisted strided index arithmetic.

import type { Computation, Instruction } from "../../ir/module.ts";
import { arrayOf, ExprGen, type Leaf, stridesOf } from "./codegen_expr.ts";
import {
  commentText,
  type Affine,
  affAdd,
  affConst,
  affKey,
  affScale,
  affSym,
  affVal,
  type Block,
  type ExtTable,
  FnBuilder,
  type Val,
} from "./emitter.ts";

/** What kernel generators need from the module being generated. */
export interface KernelCtx {
  readonly ext: ExtTable;
  /** The name of the program function of `c` (generated on first use). */
  program(c: Computation): string;
  /** A fresh kernel function name with a readable hint. */
  kernelName(hint: string): string;
  /** Adds a generated function to the module source. */
  addFunction(source: string): void;
}

export interface LoopKernelSpec {
  name: string;
  /** A comment line (the instruction or fusion it implements). */
  comment: string;
  root: Instruction;
  /** Kernel inputs, in parameter order after (out, lo, hi). */
  leaves: readonly Instruction[];
  /** How many leading output dims the lo..hi range runs over (0: the range is ignored). */
  group: number;
  /** A leaf that must only be read at the output index (a kOutput's dot result). */
  identityLeaf?: Instruction;
  /**
   * Per output dim, a JS expression for how far it must be computed (an extent hint,
   * ir/extents.ts), or undefined for the whole dim. Grouped dims are limited by the caller's
   * lo..hi (see `rowLimit`); the others become kernel parameters after the leaves.
   */
  limits?: readonly (string | undefined)[];
}

export interface LoopKernel {
  name: string;
  /** Number of lo..hi rows (the product of the grouped dims). */
  rows: number;
  /** False when `identityLeaf` was read at another index than the one being written. */
  identityOnly: boolean;
  /** The call's `hi` for the whole output: `rows`, or the limit of a single grouped dim. */
  rowLimit: string;
  /** Expressions to pass after the leaves (the limits of the nested dims). */
  limitArgs: string[];
}

/** Emits nested loops over `dims` starting in `parent`; returns the innermost block and vars. */
export function nestLoops(
  fn: FnBuilder,
  parent: Block,
  dims: readonly number[],
  prefix = "i",
  bounds?: readonly (string | undefined)[],
): { block: Block; vars: Val[]; blocks: Block[] } {
  let b = parent;
  const vars: Val[] = [];
  const blocks: Block[] = [];
  for (const [k, d] of dims.entries()) {
    const l = fn.loop(b, "0", bounds?.[k] ?? String(d), prefix);
    vars.push(l.v);
    blocks.push(l.block);
    b = l.block;
  }
  return { block: b, vars, blocks };
}

export function closeAll(fn: FnBuilder, blocks: readonly Block[]): void {
  for (const b of blocks) fn.close(b);
}

/** Row-major linear index of `idx` in an array of `dims`. */
export function linearOf(idx: readonly Affine[], dims: readonly number[]): Affine {
  const st = stridesOf(dims);
  let lin = affConst(0);
  idx.forEach((a, k) => (lin = affAdd(lin, affScale(a, st[k]!))));
  return lin;
}

/** Generates and registers a loop kernel for `spec`. */
export function genLoopKernel(ctx: KernelCtx, spec: LoopKernelSpec): LoopKernel {
  const dims = arrayOf(spec.root).dims;
  const g0 = Math.min(spec.group, dims.length);
  const limitArgs: string[] = [];
  const bounds = dims.map((_, k) => {
    const lim = spec.limits?.[k];
    if (k < g0 || lim === undefined) return undefined;
    limitArgs.push(lim);
    return `n${k}`;
  });
  const params = [
    "out",
    "lo",
    "hi",
    ...spec.leaves.map((_, i) => `in${i}`),
    ...bounds.filter((b): b is string => b !== undefined),
  ];
  const fn = new FnBuilder(`function ${spec.name}(${params.join(", ")}) {`);
  const leaves = new Map<Instruction, Leaf>();
  let identityOnly = true;
  let outKey = "";
  spec.leaves.forEach((l, i) => {
    const leaf: Leaf = { kind: "array", arr: fn.atom(`in${i}`), dims: arrayOf(l).dims };
    if (l === spec.identityLeaf) {
      leaf.onRead = (idx) => {
        if (idx.map(affKey).join(",") !== outKey) identityOnly = false;
      };
    }
    leaves.set(l, leaf);
  });
  const g = Math.min(spec.group, dims.length);
  let rows = 1;
  for (let k = 0; k < g; k++) rows *= dims[k]!;
  const idx: Affine[] = [];
  let block = fn.root;
  const opened: Block[] = [];
  if (g > 0) {
    const outer = fn.loop(block, "lo", "hi", "o");
    opened.push(outer.block);
    block = outer.block;
    if (g === 1) idx.push(affSym(outer.v));
    else {
      // Split the flattened row index into the grouped dims (once per row).
      const parts: Affine[] = new Array<Affine>(g);
      let rest = outer.v.code;
      for (let k = g - 1; k >= 1; k--) {
        const ik = fn.fresh("i");
        block.push(`const ${ik} = ${rest} % ${dims[k]};`);
        parts[k] = affSym({ code: ik, block, atom: true });
        const nr = fn.fresh("r");
        block.push(`const ${nr} = (${rest} - ${ik}) / ${dims[k]};`);
        rest = nr;
      }
      parts[0] = affSym({ code: rest, block, atom: true });
      idx.push(...parts);
    }
  }
  const inner = nestLoops(fn, block, dims.slice(g), "i", bounds.slice(g));
  opened.push(...inner.blocks);
  idx.push(...inner.vars.map((v) => affSym(v)));
  outKey = idx.map(affKey).join(",");
  const gen = new ExprGen(fn, ctx.ext, leaves);
  const v = gen.value(spec.root, idx, inner.block, false);
  const lin = affVal(fn, linearOf(idx, dims), inner.block);
  inner.block.push(`out[${lin.code}] = ${v.code};`);
  closeAll(fn, opened);
  ctx.addFunction(`// ${commentText(spec.comment)}\n${fn.render()}`);
  const rowLimit = g === 1 && spec.limits?.[0] !== undefined ? spec.limits[0] : String(rows);
  return { name: spec.name, rows, identityOnly, rowLimit, limitArgs };
}
