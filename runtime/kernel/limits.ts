// How far each ENTRY value must be computed, as program-level index expressions over the size
// parameters. From an instruction's own extent hint (ir/extents.ts: along a dim only
// `a * size + c` elements are read, `size` an s32[] ENTRY parameter), and, for instructions
// without one, derived from their users: an elementwise user (or a kLoop fusion reading it
// elementwise) that computes only part of its result reads only that part; a row reduction (or
// kInput fusion) reads the rows it computes whole; a dot reads the lhs rows and rhs columns it
// computes and the contracting positions up to its reduction hint. A dim is limited only when
// every user limits it the same way (the same node: program-level Ix are hash-consed). The
// masks and masked copies the dynamic padder makes for a reduction or a dot have no hint of
// their own (the reduction reads their padding); this is what lets their other dims shrink too.
// Renderers never compute limits: they read these on the steps and kernels.

import { type Extent, extentsOf, reduceExtentsOf } from "../../ir/extents.ts";
import type { Computation, Instruction, Module } from "../../ir/module.ts";
import { OPCODE_INFO } from "../../ir/opcodes.ts";
import { isFloatType } from "../../ir/shape.ts";
import type { Ix, Pool } from "./kir.ts";
import { arrayOf } from "./lower_expr.ts";

export type Limits = readonly (Ix | undefined)[];

function sameDims(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((v, i) => v === b[i]);
}

export class LimitAnalysis {
  private derived: Map<Instruction, (Ix | undefined)[]> | undefined;

  constructor(
    readonly module: Module,
    readonly pool: Pool,
  ) {}

  /** Per output dim of an ENTRY instruction, how far it must be computed (undefined: all). */
  limits(instr: Instruction): Limits | undefined {
    return this.hintLimits(instr) ?? this.derivedLimits().get(instr);
  }

  /**
   * Per dim of the operand of a reduce (or of a dot's lhs), how far the reduction must run
   * (its reduction hint), when `at` — the reduce, or the fusion holding it — is in the ENTRY.
   */
  reduceLimits(r: Instruction, at: Instruction): Limits | undefined {
    if (at.parent !== this.module.entry) return undefined;
    const operand = r.operand(0);
    if (operand.shape.kind !== "array") return undefined;
    return this.exprs(reduceExtentsOf(r), operand.shape.dims);
  }

  /** The reduction limits every reduce of a fused computation shares, if they all agree. */
  fusedReduceLimits(comp: Computation, at: Instruction): Limits | undefined {
    const rs = comp.instructions.filter((i) => i.opcode === "reduce");
    if (rs.length === 0) return undefined;
    const all = rs.map((r) => this.reduceLimits(r, at));
    const same = (a: Limits | undefined, b: Limits | undefined) =>
      a === b || (!!a && !!b && a.length === b.length && a.every((x, k) => x === b[k]));
    return all.every((l) => same(l, all[0])) ? all[0] : undefined;
  }

  private hintLimits(instr: Instruction): Limits | undefined {
    if (instr.parent !== this.module.entry || instr.shape.kind !== "array") return undefined;
    return this.exprs(extentsOf(instr), instr.shape.dims);
  }

  /** `min(bound, max(0, a * size + c))` for hints over dims of `dims`. */
  private exprs(hint: readonly Extent[] | undefined, dims: readonly number[]): Limits | undefined {
    if (!hint) return undefined;
    const P = this.pool;
    const params = this.module.entry.parameters;
    const out: (Ix | undefined)[] = dims.map(() => undefined);
    for (const e of hint) {
      const p = params[e.param];
      const ok =
        e.dim < dims.length &&
        p !== undefined &&
        p.attrs.parameterNumber === e.param &&
        p.shape.kind === "array" &&
        p.shape.type === "s32" &&
        p.shape.dims.length === 0;
      if (!ok) continue;
      const n = P.add(P.scale(P.size(e.param), e.a), P.c(e.c));
      out[e.dim] = P.min(P.c(dims[e.dim]!), P.max(P.c(0), n));
    }
    return out.some((x) => x !== undefined) ? out : undefined;
  }

  private derivedLimits(): Map<Instruction, (Ix | undefined)[]> {
    if (this.derived) return this.derived;
    const derived = new Map<Instruction, (Ix | undefined)[]>();
    this.derived = derived;
    const entry = this.module.entry;
    const eff = (u: Instruction) => this.hintLimits(u) ?? derived.get(u);
    for (const I of [...entry.instructions].reverse()) {
      if (I.shape.kind !== "array" || I === entry.root) continue;
      if (I.opcode === "parameter" || I.opcode === "constant") continue;
      if (this.hintLimits(I) !== undefined || I.users.length === 0) continue;
      let acc: (Ix | undefined)[] | undefined;
      let ok = true;
      for (const u of I.users) {
        // A float dot with a reduction hint contracts only up to it (contractLimit).
        const contract =
          u.opcode === "dot" && isFloatType(arrayOf(u).type) ? this.reduceLimits(u, u) : undefined;
        const d = demandOf(u, I, eff(u), contract);
        if (!d) {
          ok = false;
          break;
        }
        acc = acc ? acc.map((x, k) => (x !== undefined && x === d[k] ? x : undefined)) : d;
      }
      if (ok && acc && acc.some((x) => x !== undefined)) derived.set(I, acc);
    }
    return derived;
  }
}

/**
 * A dot's row and column limits (the GEMM's m and n limits) from per-output-dim limits: rows
 * (lhs free dims, row-major) are a prefix when the one limited lhs free dim has only unit dims
 * before it; the same for columns. Batch dims are computed whole. Undefined when nothing can
 * be skipped.
 */
export function dotLimits(
  P: Pool,
  D: Instruction,
  limits: Limits,
): { m: Ix; n: Ix } | undefined {
  if (D.opcode !== "dot") return undefined;
  const dims = arrayOf(D).dims;
  const nb = D.attrs.dot!.lhsBatch.length;
  const nl = countFree(D, 0);
  const prefix = (from: number, to: number): Ix | undefined => {
    const limited = [];
    for (let k = from; k < to; k++) if (limits[k] !== undefined) limited.push(k);
    if (limited.length !== 1) return undefined;
    const j = limited[0]!;
    for (let k = from; k < j; k++) if (dims[k] !== 1) return undefined;
    const after = dims.slice(j + 1, to).reduce((a, b) => a * b, 1);
    return P.scale(limits[j]!, after);
  };
  const m = prefix(nb, nb + nl);
  const n = prefix(nb + nl, dims.length);
  if (m === undefined && n === undefined) return undefined;
  const count = (from: number, to: number) => dims.slice(from, to).reduce((a, b) => a * b, 1);
  return { m: m ?? P.c(count(nb, nb + nl)), n: n ?? P.c(count(nb + nl, dims.length)) };
}

/**
 * The GEMM's contraction limit from a dot's reduction hint over its lhs operand's dims:
 * contracting positions are row-major in lhsContracting order, so a prefix when the one hinted
 * contracting dim has only unit dims before it.
 */
export function contractLimit(P: Pool, D: Instruction, limits: Limits | undefined): Ix | undefined {
  if (!limits) return undefined;
  const lhs = arrayOf(D.operand(0)).dims;
  const cs = D.attrs.dot!.lhsContracting;
  const hinted = cs.map((d, j) => [d, j] as const).filter(([d]) => limits[d] !== undefined);
  if (hinted.length !== 1) return undefined;
  const [d, j] = hinted[0]!;
  if (cs.slice(0, j).some((e) => lhs[e] !== 1)) return undefined;
  const after = cs.slice(j + 1).reduce((a, e) => a * lhs[e]!, 1);
  return P.scale(limits[d]!, after);
}

/** Number of free (result) dims a dot operand contributes. */
export function countFree(D: Instruction, side: 0 | 1): number {
  const dn = D.attrs.dot!;
  const rank = arrayOf(D.operand(side)).dims.length;
  const used =
    side === 0 ? [...dn.lhsBatch, ...dn.lhsContracting] : [...dn.rhsBatch, ...dn.rhsContracting];
  return rank - used.length;
}

/**
 * What part of `I` the user `u` reads when it computes `lu` of its result (per dim of `I`;
 * undefined entries: the whole dim), or undefined when it may read all of `I`.
 */
function demandOf(
  u: Instruction,
  I: Instruction,
  lu: Limits | undefined,
  contract?: Limits,
): (Ix | undefined)[] | undefined {
  if (u.opcode === "dot") return dotDemand(u, I, lu, contract);
  if (!lu || u.shape.kind !== "array") return undefined;
  const dims = arrayOf(I).dims;
  const uDims = u.shape.dims;
  if (OPCODE_INFO[u.opcode].elementwise) return sameDims(dims, uDims) ? [...lu] : undefined;
  const rows = (reduced: readonly number[], rowShaped: boolean): (Ix | undefined)[] => {
    const kept = dims.map((_, d) => d).filter((d) => !reduced.includes(d));
    return dims.map((_, d) => {
      if (reduced.includes(d)) return undefined;
      return rowShaped ? lu[kept.indexOf(d)] : lu[d];
    });
  };
  switch (u.opcode) {
    case "reduce": {
      const half = u.operands.length / 2;
      if (half !== 1 || u.operand(1) === I) return undefined;
      return rows(u.attrs.dimensions!, true);
    }
    case "fusion": {
      const comp = u.called[0]!;
      const kind = u.attrs.fusionKind ?? "kLoop";
      if (kind !== "kLoop" && kind !== "kInput") return undefined;
      let out: (Ix | undefined)[] | undefined;
      for (const [k, o] of u.operands.entries()) {
        if (o !== I) continue;
        const p = comp.parameters.find((q) => q.attrs.parameterNumber === k);
        if (!p) return undefined;
        const reach = pointwiseReach(p, comp.root, dims);
        if (!reach) return undefined;
        let d: (Ix | undefined)[];
        if (kind === "kLoop") {
          if (reach.reduce || !sameDims(dims, uDims)) return undefined;
          d = [...lu];
        } else {
          if (reach.reduce === undefined) {
            if (!sameDims(dims, uDims)) return undefined;
            d = [...lu];
          } else {
            const rowShaped = !sameDims(dims, uDims);
            if (reach.root && rowShaped) return undefined;
            d = rows(reach.reduce, rowShaped);
          }
        }
        out = out ? out.map((x, j) => (x !== undefined && x === d[j] ? x : undefined)) : d;
      }
      return out;
    }
    default:
      return undefined;
  }
}

/**
 * What part of operand `I` a dot reads: the lhs rows and rhs columns it computes (dotLimits of
 * its own limits `lu`), and the contracting positions up to its reduction hint (`contract`,
 * over the lhs dims, as contractLimit applies it); the rest whole.
 */
function dotDemand(
  u: Instruction,
  I: Instruction,
  lu: Limits | undefined,
  contract: Limits | undefined,
): (Ix | undefined)[] | undefined {
  if (u.operand(0) === u.operand(1)) return undefined;
  const dims = arrayOf(I).dims;
  const dn = u.attrs.dot!;
  const side = u.operand(0) === I ? 0 : 1;
  const out: (Ix | undefined)[] = dims.map(() => undefined);
  if (lu) {
    const used = side === 0 ? [...dn.lhsBatch, ...dn.lhsContracting]
      : [...dn.rhsBatch, ...dn.rhsContracting];
    const free = dims.map((_, d) => d).filter((d) => !used.includes(d));
    const first = dn.lhsBatch.length + (side === 0 ? 0 : countFree(u, 0));
    const nFree = countFree(u, side);
    const limitedAt: number[] = [];
    for (let o = first; o < first + nFree; o++) if (lu[o] !== undefined) limitedAt.push(o);
    // Only along the one dim dotLimits cuts (with unit dims before it in its group).
    if (limitedAt.length === 1) {
      const o = limitedAt[0]!;
      const outDims = arrayOf(u).dims;
      let prefix = true;
      for (let q = first; q < o; q++) if (outDims[q] !== 1) prefix = false;
      if (prefix) out[free[o - first]!] = lu[o];
    }
  }
  if (contract && contractLimitDims(u, contract) !== undefined) {
    const j = dn.lhsContracting.findIndex((d) => contract[d] !== undefined);
    const mine = side === 0 ? dn.lhsContracting[j]! : dn.rhsContracting[j]!;
    out[mine] = contract[dn.lhsContracting[j]!];
  }
  return out;
}

/** contractLimit's applicability test (the hinted contracting dim is a prefix). */
function contractLimitDims(D: Instruction, limits: Limits): number | undefined {
  const lhs = arrayOf(D.operand(0)).dims;
  const cs = D.attrs.dot!.lhsContracting;
  const hinted = cs.map((d, j) => [d, j] as const).filter(([d]) => limits[d] !== undefined);
  if (hinted.length !== 1) return undefined;
  const [, j] = hinted[0]!;
  if (cs.slice(0, j).some((e) => lhs[e] !== 1)) return undefined;
  return j;
}

/**
 * How parameter `p` of a fused computation flows: only through elementwise ops of `dims`
 * (reaching the root, `root: true`) or into reduces of one set of dims as their data operand
 * (`reduce`: the reduced dims). Undefined for anything else (a broadcast, a transpose...).
 */
function pointwiseReach(
  p: Instruction,
  root: Instruction,
  dims: readonly number[],
): { root: boolean; reduce: readonly number[] | undefined } | undefined {
  let toRoot = false;
  let reduce: readonly number[] | undefined;
  const seen = new Set<Instruction>();
  const stack = [p];
  while (stack.length > 0) {
    const n = stack.pop()!;
    if (seen.has(n)) continue;
    seen.add(n);
    if (n === root) toRoot = true;
    for (const u of n.users) {
      if (u.opcode === "reduce") {
        const half = u.operands.length / 2;
        if (u.operands.some((o, i) => o === n && i >= half)) return undefined;
        const rd = [...u.attrs.dimensions!].sort((a, b) => a - b);
        if (reduce !== undefined && reduce.join() !== rd.join()) return undefined;
        reduce = rd;
        continue;
      }
      if (!OPCODE_INFO[u.opcode].elementwise || u.shape.kind !== "array") return undefined;
      if (!sameDims(u.shape.dims, dims)) return undefined;
      stack.push(u);
    }
  }
  return { root: toRoot, reduce };
}
