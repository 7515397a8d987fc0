// Element expressions: the value of an HLO instruction at an index, as kernel IR. Elementwise
// opcodes become `apply` nodes; broadcast, transpose, reshape, slice, reverse, pad,
// concatenate, iota and dynamic-slice become index arithmetic over their operands, so nothing
// is materialized; a read of a kernel input is a `load` at the row-major linear index. Pad and
// concatenate read their operands inside lazy `cond` branches (never out of range). Dims are
// index expressions: constants in a compiled program, size parameters in a shape-generic kernel
// (only the index mapping of reshape needs constant dims).

import type { Instruction } from "../../ir/module.ts";
import { OPCODE_INFO, OPCODES } from "../../ir/opcodes.ts";
import type { ArrayShape } from "../../ir/shape.ts";
import { type Ix, type IxCmp, isScalarOpcode, type Pool, type Sx } from "./kir.ts";

/** A region or fusion the kernel generators cannot map: the caller splits it, saying why. */
export class NotFast extends Error {
  constructor(detail: string) {
    super(detail);
    this.name = "NotFast";
  }
}

/** Where a kernel reads an instruction's value instead of computing it. */
export type Leaf =
  /** A buffer parameter in row-major order with these dims (`onRead` sees every index). */
  | { kind: "buffer"; buf: number; dims: readonly Ix[]; onRead?: (idx: readonly Ix[]) => void }
  /** Scalar values already computed (a reducer's parameters); several for a tuple. */
  | { kind: "scalars"; vals: readonly Sx[] }
  /** Results of a row reduction, valid only at the row being processed (index `idx`). */
  | { kind: "row"; vals: readonly Sx[]; idx: readonly Ix[] };

export function arrayOf(instr: Instruction): ArrayShape {
  if (instr.shape.kind !== "array") {
    throw new NotFast(`%${instr.name} (${instr.opcode}) has a tuple shape`);
  }
  return instr.shape;
}

/** The dims of instructions as index expressions: constants, or a generic kernel's sizes. */
export interface DimSource {
  dims(instr: Instruction): readonly Ix[];
  /** True when every dim is a known constant (reshape's index mapping needs it). */
  readonly constant: boolean;
}

export function constantDims(pool: Pool): DimSource {
  const memo = new Map<Instruction, Ix[]>();
  return {
    constant: true,
    dims(instr) {
      let d = memo.get(instr);
      if (!d) {
        d = arrayOf(instr).dims.map((n) => pool.c(n));
        memo.set(instr, d);
      }
      return d;
    },
  };
}

/** Row-major strides of `dims`. */
export function stridesIx(pool: Pool, dims: readonly Ix[]): Ix[] {
  const s = new Array<Ix>(dims.length);
  let acc = pool.c(1);
  for (let i = dims.length - 1; i >= 0; i--) {
    s[i] = acc;
    acc = pool.mul(acc, dims[i]!);
  }
  return s;
}

/** The row-major linear index of `idx` in an array of `dims`. */
export function linearIx(pool: Pool, idx: readonly Ix[], dims: readonly Ix[]): Ix {
  const st = stridesIx(pool, dims);
  return pool.add(...idx.map((a, k) => pool.mul(a, st[k]!)));
}

/** The product of index expressions. */
export function productIx(pool: Pool, xs: readonly Ix[]): Ix {
  let p = pool.c(1);
  for (const x of xs) p = pool.mul(p, x);
  return p;
}

/**
 * The opcodes an element expression can contain: every elementwise opcode of the opcode table
 * except bitcast-convert (it reinterprets bytes, not values), plus the leaves and the movement
 * ops that become index arithmetic.
 */
const EXPRESSIBLE: ReadonlySet<string> = new Set<string>([
  ...OPCODES.filter((op) => OPCODE_INFO[op].elementwise && op !== "bitcast-convert"),
  "parameter",
  "constant",
  "iota",
  "broadcast",
  "reshape",
  "transpose",
  "slice",
  "dynamic-slice",
  "concatenate",
  "pad",
  "reverse",
  "get-tuple-element",
  "get-dimension-size",
]);

export function isExpressible(instr: Instruction): boolean {
  return EXPRESSIBLE.has(instr.opcode);
}

/** Lowers instructions to scalar expressions at symbolic indices, within one kernel. */
export class ExprLowering {
  private readonly memo = new Map<string, Sx>();

  constructor(
    readonly pool: Pool,
    readonly dims: DimSource,
    readonly leaves: Map<Instruction, Leaf>,
    /** Scalar constants that need a buffer (an array constant is read from its buffer). */
    readonly constantBuffer: (instr: Instruction) => number,
  ) {}

  /** The value of `instr` at `idx` (one index per dim). */
  value(instr: Instruction, idx: readonly Ix[]): Sx {
    const leaf = this.leaves.get(instr);
    if (leaf) return this.readLeaf(instr, leaf, idx);
    const key = `${instr.id}@${idx.map((a) => a.key).join(",")}`;
    const m = this.memo.get(key);
    if (m) return m;
    const v = this.compute(instr, idx);
    this.memo.set(key, v);
    return v;
  }

  private readLeaf(instr: Instruction, leaf: Leaf, idx: readonly Ix[]): Sx {
    switch (leaf.kind) {
      case "buffer": {
        leaf.onRead?.(idx);
        return this.pool.load(arrayOf(instr).type, leaf.buf, linearIx(this.pool, idx, leaf.dims));
      }
      case "scalars":
        if (leaf.vals.length !== 1) {
          throw new NotFast(`%${instr.name} is a tuple of ${leaf.vals.length} scalars`);
        }
        return leaf.vals[0]!;
      case "row":
        if (!sameIdx(idx, leaf.idx) || leaf.vals.length !== 1) {
          throw new NotFast(
            `the reduce %${instr.name} is read at another row than the one being reduced`,
          );
        }
        return leaf.vals[0]!;
      default: {
        const never: never = leaf;
        throw new Error(`unknown leaf ${String(never)}`);
      }
    }
  }

  private compute(instr: Instruction, idx: readonly Ix[]): Sx {
    const P = this.pool;
    const op = instr.opcode;
    const sub = (i: number, ix: readonly Ix[]) => this.value(instr.operand(i), ix);
    switch (op) {
      case "parameter":
        throw new NotFast(`parameter %${instr.name} has no value in this kernel`);
      case "constant": {
        const lit = instr.attrs.literal!;
        if (lit.dims.length === 0) return P.const(lit.type, lit.data[0]! as number | bigint);
        const buf = this.constantBuffer(instr);
        return this.readLeaf(instr, { kind: "buffer", buf, dims: this.dims.dims(instr) }, idx);
      }
      case "iota":
        return P.index(arrayOf(instr).type, idx[instr.attrs.iotaDimension!]!);
      case "broadcast":
        return sub(
          0,
          instr.attrs.dimensions!.map((r) => idx[r]!),
        );
      case "transpose": {
        const perm = instr.attrs.dimensions!;
        const ix = new Array<Ix>(perm.length);
        perm.forEach((p, k) => (ix[p] = idx[k]!));
        return sub(0, ix);
      }
      case "reshape":
        return sub(0, this.reshapeIndex(instr, idx));
      case "slice":
        return sub(
          0,
          instr.attrs.slice!.map((s, k) => P.add(P.scale(idx[k]!, s.stride), P.c(s.start))),
        );
      case "reverse": {
        const rev = new Set(instr.attrs.dimensions!);
        const dims = this.dims.dims(instr);
        return sub(
          0,
          idx.map((a, k) => (rev.has(k) ? P.sub(P.add(dims[k]!, P.c(-1)), a) : a)),
        );
      }
      case "dynamic-slice": {
        const xd = this.dims.dims(instr.operand(0));
        const sizes = instr.attrs.dynamicSliceSizes!;
        const ix = idx.map((a, k) => {
          const start = this.indexValue(instr.operand(k + 1));
          const hi = P.add(xd[k]!, P.c(-sizes[k]!));
          return P.add(a, P.clamp(start, P.c(0), hi));
        });
        return sub(0, ix);
      }
      case "pad":
        return this.pad(instr, idx);
      case "concatenate":
        return this.concatenate(instr, idx);
      case "get-dimension-size": {
        const d = instr.attrs.dimensions![0]!;
        const n = this.dims.dims(instr.operand(0))[d]!;
        if (n.op !== "const") throw new NotFast("get-dimension-size of a dim that is not static");
        return P.const("s32", n.v);
      }
      case "call": {
        // A scalar call inside a scalar computation (a comparator calling another): inlined.
        if (idx.length !== 0 || instr.shape.kind !== "array") {
          throw new NotFast(`call %${instr.name} inside a kernel`);
        }
        const c = instr.called[0]!;
        const leaves = new Map<Instruction, Leaf>();
        c.parameters.forEach((p) =>
          leaves.set(p, { kind: "scalars", vals: [sub(p.attrs.parameterNumber!, [])] }),
        );
        const inner = new ExprLowering(P, this.dims, leaves, this.constantBuffer);
        return inner.value(c.root, []);
      }
      case "get-tuple-element": {
        const t = instr.operand(0);
        const leaf = this.leaves.get(t);
        const i = instr.attrs.tupleIndex!;
        if (leaf?.kind === "scalars") return leaf.vals[i]!;
        if (leaf?.kind === "row") {
          if (!sameIdx(idx, leaf.idx)) {
            throw new NotFast(`the reduce %${t.name} is read at another row than it reduces`);
          }
          return leaf.vals[i]!;
        }
        // An element of a tuple built in this region is that element (an inlined reducer).
        if (t.opcode === "tuple") return this.value(t.operand(i), idx);
        throw new NotFast(`get-tuple-element %${instr.name} of a computed tuple`);
      }
      default:
        break;
    }
    if (!isScalarOpcode(op)) {
      throw new NotFast(`%${instr.name} (${op}) is not an elementwise or data-movement op`);
    }
    // Elementwise: operands at the same index (a scalar operand of select/clamp at []).
    const rank = idx.length;
    const args = instr.operands.map((o, i) =>
      sub(i, arrayOf(o).dims.length === 0 && rank > 0 ? [] : idx),
    );
    const rt = arrayOf(instr).type;
    const at = arrayOf(instr.operand(op === "select" || op === "clamp" ? 1 : 0)).type;
    if (op === "copy" || (op === "convert" && at === rt)) return args[0]!;
    return P.apply(op, rt, at, args, {
      ...(instr.attrs.direction !== undefined && { direction: instr.attrs.direction }),
      ...(instr.attrs.comparisonType !== undefined && {
        comparison: instr.attrs.comparisonType,
      }),
    });
  }

  /** A scalar integer operand (a dynamic-slice start) as an index expression. */
  private indexValue(instr: Instruction): Ix {
    return this.pool.ixOf(this.value(instr, []));
  }

  /**
   * Operand indices of a reshape. Dims are grouped where the running products of both sides
   * meet; a group whose operand side is one dim maps affinely, otherwise the group's linear
   * index is split with division and remainder.
   */
  private reshapeIndex(instr: Instruction, idx: readonly Ix[]): Ix[] {
    const P = this.pool;
    if (!this.dims.constant) throw new NotFast("a reshape inside a shape-generic kernel");
    const res = arrayOf(instr).dims;
    const opd = arrayOf(instr.operand(0)).dims;
    const out = new Array<Ix>(opd.length).fill(P.c(0));
    // A reshape of zero elements has no index to map (the running products below are 0 on one
    // side only and would never meet): nothing reads it at a real index, since a zero-size
    // value is only ever read inside a pad/concatenate branch that cannot be taken.
    if (opd.includes(0)) return out;
    const rs = res.map((_, i) => i).filter((i) => res[i] !== 1);
    const os = opd.map((_, i) => i).filter((i) => opd[i] !== 1);
    let i = 0;
    let j = 0;
    while (i < rs.length && j < os.length) {
      const gi = [rs[i++]!];
      const gj = [os[j++]!];
      let pr = res[gi[0]!]!;
      let po = opd[gj[0]!]!;
      while (pr !== po) {
        if (pr < po) {
          const d = rs[i++]!;
          gi.push(d);
          pr *= res[d]!;
        } else {
          const d = os[j++]!;
          gj.push(d);
          po *= opd[d]!;
        }
      }
      let lin: Ix = P.c(0);
      let stride = 1;
      for (let k = gi.length - 1; k >= 0; k--) {
        lin = P.add(lin, P.scale(idx[gi[k]!]!, stride));
        stride *= res[gi[k]!]!;
      }
      if (gj.length === 1) {
        out[gj[0]!] = lin;
        continue;
      }
      let inner = 1;
      for (let k = gj.length - 1; k >= 0; k--) {
        const d = opd[gj[k]!]!;
        const q = P.floordiv(lin, P.c(inner));
        out[gj[k]!] = k === 0 ? q : P.mod(q, P.c(d));
        inner *= d;
      }
    }
    return out;
  }

  private pad(instr: Instruction, idx: readonly Ix[]): Sx {
    const P = this.pool;
    const xd = this.dims.dims(instr.operand(0));
    const rd = this.dims.dims(instr);
    const cfg = instr.attrs.padding!;
    const when: IxCmp[] = [];
    const zero = P.c(0);
    const ix = cfg.map((p, k) => {
      const n = xd[k]!;
      const q = P.add(idx[k]!, P.c(-p.low));
      if (p.interior === 0) {
        // q runs over [-low, size - 1 - low]; test only the ends that can fall outside.
        const size = rd[k]!;
        const high =
          size.op === "const" && n.op === "const" ? size.v - 1 - p.low >= n.v : true;
        if (p.low > 0) when.push({ rel: "le", a: zero, b: q });
        if (high) when.push({ rel: "lt", a: q, b: n });
        return q;
      }
      const m = p.interior + 1;
      const s = P.floordiv(q, P.c(m));
      when.push({ rel: "le", a: zero, b: q });
      when.push({ rel: "eq", a: P.mod(q, P.c(m)), b: zero });
      when.push({ rel: "lt", a: s, b: n });
      return s;
    });
    if (when.length === 0) return this.value(instr.operand(0), ix);
    const padv = this.value(instr.operand(1), []);
    const inner = this.value(instr.operand(0), ix);
    return P.cond(arrayOf(instr).type, when, inner, padv);
  }

  private concatenate(instr: Instruction, idx: readonly Ix[]): Sx {
    const P = this.pool;
    const d = instr.attrs.dimensions![0]!;
    const parts = instr.operands;
    if (parts.length === 1) return this.value(parts[0]!, idx);
    let off: Ix = P.c(0);
    const branches: { limit: Ix; v: Sx }[] = [];
    for (const p of parts) {
      const size = this.dims.dims(p)[d]!;
      if (!(size.op === "const" && size.v === 0)) {
        const ix = idx.map((a, k) => (k === d ? P.sub(a, off) : a));
        branches.push({ limit: P.add(off, size), v: this.value(p, ix) });
      }
      off = P.add(off, size);
    }
    if (branches.length === 0) throw new NotFast(`concatenate %${instr.name} of empty operands`);
    const t = arrayOf(instr).type;
    let v = branches[branches.length - 1]!.v;
    for (let k = branches.length - 2; k >= 0; k--) {
      v = P.cond(t, [{ rel: "lt", a: idx[d]!, b: branches[k]!.limit }], branches[k]!.v, v);
    }
    return v;
  }
}

function sameIdx(a: readonly Ix[], b: readonly Ix[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}
