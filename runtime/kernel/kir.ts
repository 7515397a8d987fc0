// The kernel IR: what every backend's renderer reads. A Kernel is a loop nest over typed buffer
// parameters and integer size parameters. Integers (indices, loop bounds, sizes) are `Ix`
// nodes; element values are `Sx` nodes typed over the elementwise opcodes of ir/opcodes.ts.
// Both are hash-consed in a `Pool` (one per kernel), so equal expressions are one object: that
// is CSE, and the structural key of a kernel. Index sums are kept in a normal form (a constant
// plus coefficient × product-of-atoms terms), so `i0 * 64 + i1 + 3` and `3 + i1 + 64 * i0` are
// one node and a renderer can split a sum by loop level. Nothing here knows a target language.
//
// Statements: `loop` (tagged parallel / serial / reduce; at most one or two loops are the
// kernel's *ranges*, whose bounds a caller passes as lo..hi so threads and GEMM epilogues can
// split the work), `store`, accumulator `accInit` / `accSet` (a reduction's combiner and order
// are the statements themselves: folding in loop order from the init), and `if` over index
// conditions (scatter's bounds check). `cond` is the one lazy scalar node: its branches are
// evaluated only when taken (a pad or concatenate operand must not be read out of range).

import type { ComparisonDirection } from "../../ir/attributes.ts";
import type { Opcode } from "../../ir/opcodes.ts";
import type { ElementType } from "../../ir/shape.ts";

/** The elementwise opcodes a scalar expression can apply (bitcast-convert is a library step). */
export type ScalarOpcode = Extract<
  Opcode,
    | "abs" | "negate" | "sign" | "exponential" | "exponential-minus-one" | "log"
    | "log-plus-one" | "sqrt" | "rsqrt" | "cbrt" | "tanh" | "logistic" | "sine" | "cosine"
    | "tan" | "erf" | "floor" | "ceil" | "round-nearest-afz" | "round-nearest-even"
    | "is-finite" | "not" | "copy" | "convert" | "add" | "subtract" | "multiply" | "divide"
    | "remainder" | "power" | "maximum" | "minimum" | "atan2" | "and" | "or" | "xor"
    | "shift-left" | "shift-right-arithmetic" | "shift-right-logical" | "compare" | "select"
    | "clamp"
>;

export const SCALAR_OPCODES: readonly ScalarOpcode[] = [
  "abs", "negate", "sign", "exponential", "exponential-minus-one", "log", "log-plus-one",
  "sqrt", "rsqrt", "cbrt", "tanh", "logistic", "sine", "cosine", "tan", "erf", "floor", "ceil",
  "round-nearest-afz", "round-nearest-even", "is-finite", "not", "copy", "convert", "add",
  "subtract", "multiply", "divide", "remainder", "power", "maximum", "minimum", "atan2", "and",
  "or", "xor", "shift-left", "shift-right-arithmetic", "shift-right-logical", "compare",
  "select", "clamp",
];

export function isScalarOpcode(op: string): op is ScalarOpcode {
  return (SCALAR_OPCODES as readonly string[]).includes(op);
}

// ---- index expressions -------------------------------------------------------------------

/** An atom of an index sum: anything but a constant or a sum. */
export type IxAtom =
  | { readonly op: "var"; readonly id: number; readonly key: number }
  | { readonly op: "size"; readonly id: number; readonly key: number }
  | { readonly op: "prod"; readonly factors: readonly IxAtom[]; readonly key: number }
  | { readonly op: "floordiv"; readonly a: Ix; readonly b: Ix; readonly key: number }
  | { readonly op: "mod"; readonly a: Ix; readonly b: Ix; readonly key: number }
  | { readonly op: "min"; readonly a: Ix; readonly b: Ix; readonly key: number }
  | { readonly op: "max"; readonly a: Ix; readonly b: Ix; readonly key: number }
  /** An integer element value used as an index (gather and dynamic-slice starts). */
  | { readonly op: "value"; readonly s: Sx; readonly key: number };

export interface IxTerm {
  readonly atom: IxAtom;
  readonly coef: number;
}

export type Ix =
  | { readonly op: "const"; readonly v: number; readonly key: number }
  /** k + Σ coef·atom, at least one term; terms sorted by atom key, no zero coefficient. */
  | { readonly op: "sum"; readonly k: number; readonly terms: readonly IxTerm[]; readonly key: number }
  | IxAtom;

/** An index condition: a conjunction of comparisons (pad's in-range tests, scatter's check). */
export interface IxCmp {
  readonly rel: "lt" | "le" | "eq" | "ne";
  readonly a: Ix;
  readonly b: Ix;
}

// ---- scalar expressions ------------------------------------------------------------------

export type Sx =
  | { readonly op: "const"; readonly type: ElementType; readonly value: number | bigint;
      readonly key: number }
  | { readonly op: "load"; readonly type: ElementType; readonly buf: number; readonly index: Ix;
      readonly key: number }
  /** An integer index as a value of `type` (iota): the evaluator's conversion from s64. */
  | { readonly op: "index"; readonly type: ElementType; readonly ix: Ix; readonly key: number }
  /**
   * An elementwise opcode. `type` is the result type, `argType` the (first array) operand's
   * (they differ for compare and convert); compare carries its direction and comparison type.
   */
  | { readonly op: "apply"; readonly opcode: ScalarOpcode; readonly type: ElementType;
      readonly argType: ElementType; readonly args: readonly Sx[];
      readonly direction?: ComparisonDirection; readonly comparison?: string;
      readonly key: number }
  /** The current value of an accumulator. */
  | { readonly op: "acc"; readonly type: ElementType; readonly id: number; readonly key: number }
  /** Lazy: `then` when every comparison holds, else `else`; the other branch is not run. */
  | { readonly op: "cond"; readonly type: ElementType; readonly when: readonly IxCmp[];
      readonly then: Sx; readonly else: Sx; readonly key: number };

export type Node = Ix | Sx;

export function isIx(n: Node): n is Ix {
  return !("type" in n);
}

// ---- statements and kernels --------------------------------------------------------------

export type LoopTag = "parallel" | "serial" | "reduce";

export type Stmt =
  | {
      readonly k: "loop";
      readonly v: number;
      readonly lo: Ix;
      readonly hi: Ix;
      readonly tag: LoopTag;
      /** The kernel range this loop runs over (its lo..hi come from the caller), if any. */
      readonly range?: 0 | 1;
      readonly body: readonly Stmt[];
    }
  | { readonly k: "store"; readonly buf: number; readonly index: Ix; readonly value: Sx }
  | { readonly k: "accInit"; readonly acc: number; readonly type: ElementType;
      readonly value: Sx }
  /** Simultaneous update: every value is computed from the accumulators before any is set. */
  | { readonly k: "accSet"; readonly accs: readonly number[]; readonly values: readonly Sx[];
      /** The reducer opcode when the update is `acc = op(acc, x)` of one accumulator. */
      readonly combiner?: string }
  | { readonly k: "if"; readonly when: readonly IxCmp[]; readonly body: readonly Stmt[] };

export type Access = "r" | "w" | "rw";

export interface KernelBuffer {
  readonly type: ElementType;
  readonly access: Access;
  /** A readable name for comments (the value it holds). */
  readonly name: string;
}

export interface Kernel {
  /** A readable hint for function names (not part of the structural key). */
  readonly name: string;
  /** The instruction or fusion it implements, for comments. */
  readonly comment: string;
  readonly bufs: readonly KernelBuffer[];
  /** Number of size parameters (read as `size(i)` nodes). */
  readonly sizes: number;
  /**
   * Number of ranges: 0 (called once), 1 (`k(args, lo, hi)` over its range loop) or 2 (a tile
   * kernel: rows and columns, a contraction's epilogue).
   */
  readonly ranges: 0 | 1 | 2;
  readonly body: readonly Stmt[];
  /** Loop variables and accumulators used (ids are 0..n-1). */
  readonly vars: number;
  readonly accs: number;
}

// ---- the pool: hash-consing constructors that simplify -----------------------------------

const INT32_SAFE = Number.MAX_SAFE_INTEGER;

function checkInt(v: number): number {
  if (!Number.isInteger(v) || Math.abs(v) > INT32_SAFE) {
    throw new Error(`kernel index arithmetic left the safe integers: ${v}`);
  }
  return v === 0 ? 0 : v; // no -0 in index arithmetic
}

/**
 * Interns nodes: constructing an expression equal to an existing one returns that node. One
 * pool per kernel under construction; node keys are unique within it.
 */
export class Pool {
  private readonly table = new Map<string, Node>();
  private nextKey = 0;
  private nextVar = 0;
  private nextAcc = 0;

  private intern<T extends Node>(sig: string, make: (key: number) => T): T {
    const known = this.table.get(sig);
    if (known) return known as T;
    const n = make(this.nextKey++);
    this.table.set(sig, n);
    return n;
  }

  get vars(): number {
    return this.nextVar;
  }

  get accs(): number {
    return this.nextAcc;
  }

  /** A fresh loop variable. */
  newVar(): IxAtom & { op: "var" } {
    const id = this.nextVar++;
    return this.intern(`v${id}`, (key) => ({ op: "var", id, key }));
  }

  newAcc(): number {
    return this.nextAcc++;
  }

  // -- Ix --

  c(v: number): Ix {
    const n = checkInt(v);
    return this.intern(`c${n}`, (key) => ({ op: "const", v: n, key }));
  }

  size(id: number): IxAtom {
    return this.intern(`s${id}`, (key) => ({ op: "size", id, key }));
  }

  /** The terms and constant of any index expression. */
  private linear(a: Ix): { k: number; terms: IxTerm[] } {
    if (a.op === "const") return { k: a.v, terms: [] };
    if (a.op === "sum") return { k: a.k, terms: [...a.terms] };
    return { k: 0, terms: [{ atom: a, coef: 1 }] };
  }

  private fromLinear(k: number, terms: IxTerm[]): Ix {
    const merged = new Map<number, IxTerm>();
    for (const t of terms) {
      const prior = merged.get(t.atom.key);
      const coef = checkInt((prior?.coef ?? 0) + t.coef);
      merged.set(t.atom.key, { atom: t.atom, coef });
    }
    const live = [...merged.values()].filter((t) => t.coef !== 0);
    live.sort((x, y) => x.atom.key - y.atom.key);
    if (live.length === 0) return this.c(k);
    if (k === 0 && live.length === 1 && live[0]!.coef === 1) return live[0]!.atom;
    const sig = `+${k}` + live.map((t) => `,${t.coef}*${t.atom.key}`).join("");
    const kk = checkInt(k);
    return this.intern(sig, (key) => ({ op: "sum", k: kk, terms: live, key }));
  }

  add(...xs: Ix[]): Ix {
    let k = 0;
    const terms: IxTerm[] = [];
    for (const x of xs) {
      const l = this.linear(x);
      k = checkInt(k + l.k);
      terms.push(...l.terms);
    }
    return this.fromLinear(k, terms);
  }

  sub(a: Ix, b: Ix): Ix {
    return this.add(a, this.scale(b, -1));
  }

  scale(a: Ix, s: number): Ix {
    if (s === 0) return this.c(0);
    const l = this.linear(a);
    return this.fromLinear(
      checkInt(l.k * s),
      l.terms.map((t) => ({ atom: t.atom, coef: checkInt(t.coef * s) })),
    );
  }

  private prodAtom(factors: IxAtom[]): IxAtom {
    const flat: IxAtom[] = [];
    for (const f of factors) {
      if (f.op === "prod") flat.push(...f.factors);
      else flat.push(f);
    }
    flat.sort((x, y) => x.key - y.key);
    if (flat.length === 1) return flat[0]!;
    const sig = `*${flat.map((f) => f.key).join(",")}`;
    return this.intern(sig, (key) => ({ op: "prod", factors: flat, key }));
  }

  mul(a: Ix, b: Ix): Ix {
    if (a.op === "const") return this.scale(b, a.v);
    if (b.op === "const") return this.scale(a, b.v);
    const la = this.linear(a);
    const lb = this.linear(b);
    // (ka + Σ ai·xi)(kb + Σ bj·yj), distributed.
    const terms: IxTerm[] = [];
    for (const t of la.terms) terms.push({ atom: t.atom, coef: checkInt(t.coef * lb.k) });
    for (const t of lb.terms) terms.push({ atom: t.atom, coef: checkInt(t.coef * la.k) });
    for (const s of la.terms) {
      for (const t of lb.terms) {
        terms.push({ atom: this.prodAtom([s.atom, t.atom]), coef: checkInt(s.coef * t.coef) });
      }
    }
    return this.fromLinear(checkInt(la.k * lb.k), terms);
  }

  /** Floor division by a positive divisor. */
  floordiv(a: Ix, b: Ix): Ix {
    if (b.op === "const") {
      if (b.v <= 0) throw new Error(`floordiv by ${b.v}`);
      if (b.v === 1) return a;
      if (a.op === "const") return this.c(Math.floor(a.v / b.v));
    }
    return this.intern(`/${a.key},${b.key}`, (key) => ({ op: "floordiv", a, b, key }));
  }

  /** Remainder of floor division by a positive divisor (always in [0, b)). */
  mod(a: Ix, b: Ix): Ix {
    if (b.op === "const") {
      if (b.v <= 0) throw new Error(`mod by ${b.v}`);
      if (b.v === 1) return this.c(0);
      if (a.op === "const") return this.c(((a.v % b.v) + b.v) % b.v);
    }
    return this.intern(`%${a.key},${b.key}`, (key) => ({ op: "mod", a, b, key }));
  }

  min(a: Ix, b: Ix): Ix {
    if (a === b) return a;
    if (a.op === "const" && b.op === "const") return this.c(Math.min(a.v, b.v));
    const [x, y] = a.key < b.key ? [a, b] : [b, a];
    return this.intern(`<${x.key},${y.key}`, (key) => ({ op: "min", a: x, b: y, key }));
  }

  max(a: Ix, b: Ix): Ix {
    if (a === b) return a;
    if (a.op === "const" && b.op === "const") return this.c(Math.max(a.v, b.v));
    const [x, y] = a.key < b.key ? [a, b] : [b, a];
    return this.intern(`>${x.key},${y.key}`, (key) => ({ op: "max", a: x, b: y, key }));
  }

  clamp(x: Ix, lo: Ix, hi: Ix): Ix {
    return this.min(this.max(x, lo), hi);
  }

  /** An integer element value (s32, s64, u8 or pred) as an index. */
  ixOf(s: Sx): Ix {
    if (s.op === "const") return this.c(Number(s.value));
    return this.intern(`V${s.key}`, (key) => ({ op: "value", s, key }));
  }

  // -- Sx --

  const(type: ElementType, value: number | bigint): Sx {
    const v = typeof value === "bigint" ? `${value}n` : Object.is(value, -0) ? "-0" : `${value}`;
    return this.intern(`K${type}:${v}`, (key) => ({ op: "const", type, value, key }));
  }

  load(type: ElementType, buf: number, index: Ix): Sx {
    return this.intern(`l${type}:${buf},${index.key}`, (key) => ({
      op: "load",
      type,
      buf,
      index,
      key,
    }));
  }

  index(type: ElementType, ix: Ix): Sx {
    return this.intern(`i${type}:${ix.key}`, (key) => ({ op: "index", type, ix, key }));
  }

  apply(
    opcode: ScalarOpcode,
    type: ElementType,
    argType: ElementType,
    args: readonly Sx[],
    extra: { direction?: ComparisonDirection; comparison?: string } = {},
  ): Sx {
    const sig =
      `a${opcode}:${type}:${argType}:${extra.direction ?? ""}:${extra.comparison ?? ""}:` +
      args.map((a) => a.key).join(",");
    return this.intern(sig, (key) => ({
      op: "apply",
      opcode,
      type,
      argType,
      args: [...args],
      ...(extra.direction !== undefined && { direction: extra.direction }),
      ...(extra.comparison !== undefined && { comparison: extra.comparison }),
      key,
    }));
  }

  acc(type: ElementType, id: number): Sx {
    return this.intern(`A${id}`, (key) => ({ op: "acc", type, id, key }));
  }

  cond(type: ElementType, when: readonly IxCmp[], then: Sx, otherwise: Sx): Sx {
    if (when.length === 0) return then;
    const sig =
      `?${type}:` +
      when.map((c) => `${c.rel}${c.a.key},${c.b.key}`).join("&") +
      `:${then.key}:${otherwise.key}`;
    return this.intern(sig, (key) => ({
      op: "cond",
      type,
      when: [...when],
      then,
      else: otherwise,
      key,
    }));
  }
}

/** Loop variables and size parameters an index expression reads. */
export function ixAtoms(x: Ix, out: Set<IxAtom> = new Set()): Set<IxAtom> {
  switch (x.op) {
    case "const":
      return out;
    case "sum":
      for (const t of x.terms) ixAtoms(t.atom, out);
      return out;
    case "var":
    case "size":
      out.add(x);
      return out;
    case "prod":
      for (const f of x.factors) ixAtoms(f, out);
      return out;
    case "floordiv":
    case "mod":
    case "min":
    case "max":
      ixAtoms(x.a, out);
      ixAtoms(x.b, out);
      return out;
    case "value":
      out.add(x);
      return out;
    default: {
      const never: never = x;
      throw new Error(`unknown index node ${String(never)}`);
    }
  }
}

/** The children of a node (index and scalar operands), for walks over the DAG. */
export function children(n: Node): Node[] {
  switch (n.op) {
    case "const":
    case "var":
    case "size":
    case "acc":
      return [];
    case "sum":
      return n.terms.map((t) => t.atom);
    case "prod":
      return [...n.factors];
    case "floordiv":
    case "mod":
    case "min":
    case "max":
      return [n.a, n.b];
    case "load":
      return [n.index];
    case "value":
      return [n.s];
    case "index":
      return [n.ix];
    case "apply":
      return [...n.args];
    case "cond":
      return [...n.when.flatMap((c) => [c.a, c.b]), n.then, n.else];
    default: {
      const never: never = n;
      throw new Error(`unknown node ${String(never)}`);
    }
  }
}
