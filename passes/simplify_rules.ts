// The algebraic simplifier's rewrite rules, as data: each rule has a kebab-case name, the
// opcodes it looks at, and a rewrite that returns the instruction to use instead (an existing
// one, or a new one made with the builder) or undefined when it does not apply. Every rule is
// EXACT under the reference evaluator's semantics, bit for bit, for every input including NaN,
// ±inf and -0: x + (+0) is not x for floats (-0 + +0 = +0) and x * 0 is not 0 (NaN, inf, -0),
// so neither is here. Each rule's comment says why it is exact. Rules that move data across
// bounded dynamic dims only fire on static shapes, where the evaluator's sizes are the bounds.

import { reducerIdentity } from "../ir/element_types.ts";
import type { ComputationBuilder } from "../ir/builder.ts";
import type { DotDimensionNumbers, SliceDim } from "../ir/attributes.ts";
import { scalarLiteral } from "../ir/literal.ts";
import type { Instruction } from "../ir/module.ts";
import type { Opcode } from "../ir/opcodes.ts";
import { type ElementType, shapesEqual } from "../ir/shape.ts";
import {
  additiveIdentity,
  allOnes,
  arrayShapeOf,
  isSplatOf,
  isStatic,
  splatValue,
} from "./simplify_support.ts";

/** The replacement for `i`, or undefined. New instructions are made with `b`. */
export type Rewrite = (i: Instruction, b: ComputationBuilder) => Instruction | undefined;

export interface Rule {
  /** kebab-case, shown in logs (`KILN_LOGS=passes`). */
  readonly name: string;
  /** Opcodes whose instructions the rule is tried on. */
  readonly opcodes: readonly Opcode[];
  readonly rewrite: Rewrite;
}

const rule = (name: string, opcodes: readonly Opcode[], rewrite: Rewrite): Rule => ({
  name,
  opcodes,
  rewrite,
});

// ---- helpers -------------------------------------------------------------------------------

/** `x` when it can stand for `i` (same type, dims and dynamic flags), else undefined. */
function same(i: Instruction, x: Instruction | undefined): Instruction | undefined {
  return x !== undefined && shapesEqual(i.shape, x.shape) ? x : undefined;
}

/** The operand of a binary `i` not matched by `unit`, when the other one is (x∘u or u∘x). */
function otherThan(i: Instruction, unit: (k: Instruction) => boolean): Instruction | undefined {
  if (unit(i.operand(1))) return same(i, i.operand(0));
  if (unit(i.operand(0))) return same(i, i.operand(1));
  return undefined;
}

const iota = (n: number): number[] => Array.from({ length: n }, (_, k) => k);
const isIdentityPerm = (p: readonly number[]): boolean => p.every((d, k) => d === k);

function dimsOf(i: Instruction): readonly number[] {
  return arrayShapeOf(i.shape)?.dims ?? [];
}

/**
 * True when converting every value of `from` to `to` is exact, so a later convert sees the
 * same number: pred and u8 fit every type; s32 fits s64; f16 and bf16 fit f32;
 * every float fits f64.
 */
function losslessConvert(from: ElementType, to: ElementType): boolean {
  if (from === to) return true;
  switch (from) {
    case "pred":
      return true;
    case "u8":
      return to !== "pred";
    case "s32":
      return to === "s64";
    case "f16":
    case "bf16":
      return to === "f32" || to === "f64";
    case "f32":
      return to === "f64";
    case "s64":
    case "f64":
      return false;
    case "s4":
    case "s8":
    case "s16":
    case "u4":
    case "u16":
    case "u32":
    case "u64":
    case "f8e5m2":
    case "f8e4m3":
    case "f8e3m4":
    case "f8e4m3fn":
    case "f8e4m3fnuz":
    case "f8e5m2fnuz":
    case "f8e4m3b11fnuz":
    case "token":
      // Exact when `to` has a wider range: not needed by any rule yet, so conservatively no.
      return false;
    default: {
      const never: never = from;
      throw new Error(`unknown element type ${String(never)}`);
    }
  }
}

/** Composition of two slices of one dim: `outer` applied to the result of `inner`. */
function composeSlice(inner: SliceDim, outer: SliceDim): SliceDim {
  const count = Math.ceil((outer.limit - outer.start) / outer.stride);
  if (count <= 0) return { start: 0, limit: 0, stride: 1 };
  const start = inner.start + outer.start * inner.stride;
  const stride = inner.stride * outer.stride;
  return { start, limit: start + (count - 1) * stride + 1, stride };
}

/**
 * The dot dimension numbers of one side with a transpose `perm` folded in, when the side's free
 * dims keep their relative order (so the result's dim order is unchanged); else undefined.
 */
function foldPerm(
  perm: readonly number[],
  batch: readonly number[],
  contracting: readonly number[],
): { batch: number[]; contracting: number[] } | undefined {
  const free = iota(perm.length).filter((d) => !batch.includes(d) && !contracting.includes(d));
  const mapped = free.map((d) => perm[d]!);
  if (mapped.some((d, k) => k > 0 && mapped[k - 1]! >= d)) return undefined;
  return { batch: batch.map((d) => perm[d]!), contracting: contracting.map((d) => perm[d]!) };
}

/** The binary opcode a reducer computation applies to its two scalar parameters, if that is all. */
function simpleReducerOp(i: Instruction): Opcode | undefined {
  const c = i.called[0];
  if (!c || c.instructions.length !== 3) return undefined;
  const root = c.root;
  const [x, y] = root.operands;
  if (root.operands.length !== 2 || x?.opcode !== "parameter" || y?.opcode !== "parameter") {
    return undefined;
  }
  return x === y ? undefined : root.opcode;
}

/** For s64 the identities of max/min do not fit a JS number; compare as bigints. */
// ---- the rules -----------------------------------------------------------------------------

export const RULES: readonly Rule[] = [
  // x * 1 → x: multiplying by one rounds back to x for every type (NaN, inf and -0 included).
  rule("mul-one", ["multiply"], (i) => otherThan(i, (k) => isSplatOf(k, 1))),

  // x + e → x with e = -0 for floats (−0 + x = x for every x; +0 is NOT: −0 + +0 = +0) and
  // e = 0 for integers and pred.
  rule("add-zero", ["add"], (i) => otherThan(i, (k) => isSplatOf(k, additiveIdentity(k)))),

  // x - (+0) → x: exact for floats (−0 − +0 = −0) and integers; x - (−0) is not
  // (−0 − −0 = +0).
  rule("sub-zero", ["subtract"], (i) =>
    isSplatOf(i.operand(1), 0) ? same(i, i.operand(0)) : undefined,
  ),

  // x / 1 → x: exact for floats and ints (integer division by one truncates nothing).
  rule("div-one", ["divide"], (i) =>
    isSplatOf(i.operand(1), 1) ? same(i, i.operand(0)) : undefined,
  ),

  // x & ~0 → x, x | 0 → x, x ^ 0 → x: bitwise identities (pred and integers only).
  rule("and-all-ones", ["and"], (i) => otherThan(i, allOnes)),
  rule("or-zero", ["or"], (i) => otherThan(i, (k) => isSplatOf(k, 0))),
  rule("xor-zero", ["xor"], (i) => otherThan(i, (k) => isSplatOf(k, 0))),

  // -(-x) → x: negation is exact in every type (ints wrap both times: -(-MIN) = MIN).
  rule("negate-negate", ["negate"], (i) =>
    i.operand(0).opcode === "negate" ? same(i, i.operand(0).operand(0)) : undefined,
  ),

  // not(not(x)) → x: complementing twice restores every bit.
  rule("not-not", ["not"], (i) =>
    i.operand(0).opcode === "not" ? same(i, i.operand(0).operand(0)) : undefined,
  ),

  // copy(x) → x: a copy is the identity on values (only its layout could differ).
  rule("identity-copy", ["copy"], (i) => same(i, i.operand(0))),

  // convert/bitcast-convert to the operand's own type → x: no value changes.
  rule("identity-convert", ["convert", "bitcast-convert"], (i) => same(i, i.operand(0))),

  // convert(convert(x, T1), T2) → convert(x, T2) when x → T1 is lossless: the second convert
  // then sees x's own value, and conversions depend only on the value.
  rule("convert-convert", ["convert"], (i, b) => {
    const inner = i.operand(0);
    if (inner.opcode !== "convert") return undefined;
    const x = inner.operand(0);
    const [t0, t1, t2] = [x, inner, i].map((k) => arrayShapeOf(k.shape)?.type);
    if (!t0 || !t1 || !t2 || !losslessConvert(t0, t1)) return undefined;
    return t0 === t2 ? same(i, x) : b.convert(x, t2);
  }),

  // transpose with the identity permutation → x.
  rule("identity-transpose", ["transpose"], (i) =>
    isIdentityPerm(i.attrs.dimensions ?? []) ? same(i, i.operand(0)) : undefined,
  ),

  // transpose(transpose(x, p), q) → transpose(x, p∘q): result dim k is x's dim p[q[k]].
  rule("transpose-transpose", ["transpose"], (i, b) => {
    const inner = i.operand(0);
    if (inner.opcode !== "transpose") return undefined;
    const p = inner.attrs.dimensions ?? [];
    const q = i.attrs.dimensions ?? [];
    const composed = q.map((k) => p[k]!);
    const x = inner.operand(0);
    return isIdentityPerm(composed) ? same(i, x) : b.transpose(x, composed);
  }),

  // reshape to the operand's own shape → x (same dims and dynamic flags: row-major order kept).
  rule("identity-reshape", ["reshape"], (i) => same(i, i.operand(0))),

  // reshape(reshape(x)) → reshape(x): reshapes keep row-major order (static shapes only).
  rule("reshape-reshape", ["reshape"], (i, b) => {
    const inner = i.operand(0);
    if (inner.opcode !== "reshape") return undefined;
    const x = inner.operand(0);
    if (!isStatic(x.shape) || !isStatic(i.shape)) return undefined;
    return same(i, x) ?? b.reshape(x, dimsOf(i));
  }),

  // broadcast onto the operand's own dims in order → x.
  rule("identity-broadcast", ["broadcast"], (i) =>
    isIdentityPerm(i.attrs.dimensions ?? []) ? same(i, i.operand(0)) : undefined,
  ),

  // broadcast(broadcast(x, d1), d2) → broadcast(x, d2∘d1): x's dim k lands on d2[d1[k]].
  rule("broadcast-broadcast", ["broadcast"], (i, b) => {
    const inner = i.operand(0);
    if (inner.opcode !== "broadcast" || !isStatic(inner.shape) || !isStatic(i.shape)) {
      return undefined;
    }
    const x = inner.operand(0);
    const d1 = inner.attrs.dimensions ?? [];
    const d2 = i.attrs.dimensions ?? [];
    return b.broadcast(x, dimsOf(i), d1.map((k) => d2[k]!));
  }),

  // slice covering every element in order → x (a full slice of a dynamic dim keeps its size).
  rule("identity-slice", ["slice"], (i) => {
    const x = i.operand(0);
    const dims = dimsOf(x);
    const full = (i.attrs.slice ?? []).every(
      (s, k) => s.start === 0 && s.stride === 1 && s.limit === dims[k],
    );
    return full ? same(i, x) : undefined;
  }),

  // slice(slice(x)) → slice(x): starts add, strides multiply (static shapes only).
  rule("slice-slice", ["slice"], (i, b) => {
    const inner = i.operand(0);
    if (inner.opcode !== "slice") return undefined;
    const x = inner.operand(0);
    if (!isStatic(x.shape)) return undefined;
    const a = inner.attrs.slice ?? [];
    const s = (i.attrs.slice ?? []).map((outer, k) => composeSlice(a[k]!, outer));
    return b.slice(
      x,
      s.map((d) => d.start),
      s.map((d) => d.limit),
      s.map((d) => d.stride),
    );
  }),

  // reverse over dims of size <= 1 → x; reverse(reverse(x, d), d) → x.
  rule("identity-reverse", ["reverse"], (i) => {
    const dims = dimsOf(i);
    return (i.attrs.dimensions ?? []).every((d) => dims[d]! <= 1)
      ? same(i, i.operand(0))
      : undefined;
  }),
  rule("reverse-reverse", ["reverse"], (i) => {
    const inner = i.operand(0);
    if (inner.opcode !== "reverse") return undefined;
    const a = [...(inner.attrs.dimensions ?? [])].sort((x, y) => x - y);
    const d = [...(i.attrs.dimensions ?? [])].sort((x, y) => x - y);
    return a.length === d.length && a.every((v, k) => v === d[k])
      ? same(i, inner.operand(0))
      : undefined;
  }),

  // pad with no edge or interior padding → x.
  rule("identity-pad", ["pad"], (i) =>
    (i.attrs.padding ?? []).every((p) => p.low === 0 && p.high === 0 && p.interior === 0)
      ? same(i, i.operand(0))
      : undefined,
  ),

  // concatenate of one operand → that operand.
  rule("concatenate-one", ["concatenate"], (i) =>
    i.operands.length === 1 ? same(i, i.operand(0)) : undefined,
  ),

  // select(true, a, b) → a; select(false, a, b) → b (a splat predicate picks one side).
  rule("select-constant", ["select"], (i) => {
    const p = i.operand(0);
    if (isSplatOf(p, 1)) return same(i, i.operand(1));
    if (isSplatOf(p, 0)) return same(i, i.operand(2));
    return undefined;
  }),

  // select(p, a, a) → a.
  rule("select-same", ["select"], (i) =>
    i.operand(1) === i.operand(2) ? same(i, i.operand(1)) : undefined,
  ),

  // get-tuple-element(tuple(a0, a1, ...), k) → ak.
  rule("tuple-element", ["get-tuple-element"], (i) => {
    const t = i.operand(0);
    const k = i.attrs.tupleIndex;
    return t.opcode === "tuple" && k !== undefined ? same(i, t.operands[k]) : undefined;
  }),

  // get-dimension-size of a static dim → its size as a constant (only a dynamic dim varies).
  rule("static-dimension-size", ["get-dimension-size"], (i, b) => {
    const xs = arrayShapeOf(i.operand(0).shape);
    const d = i.attrs.dimensions?.[0];
    const t = arrayShapeOf(i.shape)?.type;
    if (!xs || d === undefined || xs.dynamic[d] !== false || !t) return undefined;
    return same(i, b.constant(scalarLiteral(t, xs.dims[d]!)));
  }),

  // dot(transpose(a), b) → dot(a, b) with the permutation folded into the dimension numbers,
  // when the transposed side's free dims keep their order (so the result layout is the same).
  // Exact: every product and the order of accumulation over contracting dims are unchanged.
  rule("dot-transpose", ["dot"], (i, b) => {
    const dn = i.attrs.dot;
    if (!dn) return undefined;
    const side = (x: Instruction, batch: number[], contracting: number[]) => {
      const f = x.opcode === "transpose"
        ? foldPerm(x.attrs.dimensions ?? [], batch, contracting)
        : undefined;
      return f ? { x: x.operand(0), ...f, folded: true } : { x, batch, contracting, folded: false };
    };
    const l = side(i.operand(0), dn.lhsBatch, dn.lhsContracting);
    const r = side(i.operand(1), dn.rhsBatch, dn.rhsContracting);
    if (!l.folded && !r.folded) return undefined;
    const next: DotDimensionNumbers = {
      lhsBatch: [...l.batch],
      rhsBatch: [...r.batch],
      lhsContracting: [...l.contracting],
      rhsContracting: [...r.contracting],
    };
    return b.op("dot", [l.x, r.x], { dot: next }, [], i.shape);
  }),

  // transpose(dot(a, b)) → dot(b, a), when the transpose swaps the dot's lhs-free and
  // rhs-free blocks (batch dims first, in place; each block keeps its order) and nothing else
  // reads the dot: a weight gradient's dot is often made as dW^T and transposed back to the
  // weight's layout, a full pass over the weight. Exact: each output element is the same
  // products (commuted) accumulated over the same contracting positions in the same order.
  rule("transpose-dot", ["transpose"], (i, b) => {
    const d = i.operand(0);
    const dn = d.attrs.dot;
    if (d.opcode !== "dot" || !dn || d.users.length !== 1) return undefined;
    const ls = arrayShapeOf(d.operand(0).shape);
    const rs = arrayShapeOf(d.operand(1).shape);
    if (!ls || !rs) return undefined;
    const nb = dn.lhsBatch.length;
    const nl = ls.dims.length - nb - dn.lhsContracting.length;
    const nr = rs.dims.length - nb - dn.rhsContracting.length;
    if (nl === 0 || nr === 0) return undefined;
    const want = [...iota(nb), ...iota(nr).map((k) => nb + nl + k), ...iota(nl).map((k) => nb + k)];
    const perm = i.attrs.dimensions ?? [];
    if (perm.length !== want.length || perm.some((p, k) => p !== want[k])) return undefined;
    const next: DotDimensionNumbers = {
      lhsBatch: [...dn.rhsBatch],
      rhsBatch: [...dn.lhsBatch],
      lhsContracting: [...dn.rhsContracting],
      rhsContracting: [...dn.lhsContracting],
    };
    return b.op("dot", [d.operand(1), d.operand(0)], { dot: next }, [], i.shape);
  }),

  // reduce over dims of size 1 → reshape(x), when the init e is the reducer's exact identity
  // (op(e, x) == x bit for bit: -0 for float add, -inf for max, ...), so reducing one element
  // returns it. add with init +0 is NOT exact for floats (+0 + -0 = +0) and is left alone.
  rule("reduce-one", ["reduce"], (i, b) => {
    if (i.operands.length !== 2) return undefined;
    const [x, init] = [i.operand(0), i.operand(1)];
    const xs = arrayShapeOf(x.shape);
    const op = simpleReducerOp(i);
    if (!xs || !op || !isStatic(xs) || !isStatic(i.shape)) return undefined;
    if (!(i.attrs.dimensions ?? []).every((d) => xs.dims[d] === 1)) return undefined;
    const e = reducerIdentity(op, xs.type);
    if (e === undefined || !isSplatOf(init, e)) return undefined;
    return same(i, x) ?? b.reshape(x, dimsOf(i));
  }),

  // reduce over a dim of size 0 → broadcast(init): no element is combined.
  rule("reduce-empty", ["reduce"], (i, b) => {
    if (i.operands.length !== 2) return undefined;
    const xs = arrayShapeOf(i.operand(0).shape);
    if (!xs || !isStatic(xs) || !isStatic(i.shape)) return undefined;
    if (!(i.attrs.dimensions ?? []).some((d) => xs.dims[d] === 0)) return undefined;
    return b.broadcast(i.operand(1), dimsOf(i), []);
  }),
];

/** The rules that look at `op`, in list order. */
export function rulesFor(op: Opcode, rules: readonly Rule[] = RULES): Rule[] {
  return rules.filter((r) => r.opcodes.includes(op));
}
