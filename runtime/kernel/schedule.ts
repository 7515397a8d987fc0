// Scheduling a kernel for a renderer: every expression a statement needs is bound once (CSE:
// nodes are hash-consed, so one binding per node) at the outermost loop level where its inputs
// exist (hoisting), before the statement of that level that first needs it. Index sums are
// split by loop level, so `k + i0 * 64` is bound once per outer iteration and `b + i1` inside.
// What the renderer receives is explicit: `let` statements and expression trees whose leaves
// are bound names, loop variables, sizes, accumulators or constants. Two things are never
// hoisted: the branches of a lazy `cond` (rendered inline, so a branch not taken reads
// nothing) and values that read something a statement writes (accumulators before their
// reduction loop has finished, loads from a buffer the kernel writes), which stay where they are
// read.

import type { ElementType } from "../../ir/shape.ts";
import {
  children,
  type Ix,
  type IxCmp,
  isIx,
  type Kernel,
  type LoopTag,
  type Node,
  type Stmt,
} from "./kir.ts";

export type Expr =
  /** A bound value: `t<n>` in the renderer's spelling. */
  | { readonly e: "name"; readonly n: number; readonly node: Node }
  /** A node with its children (in `children(node)` order) as expressions. */
  | { readonly e: "node"; readonly node: Node; readonly args: readonly Expr[] }
  /** k + Σ coef·x: an index sum, or the part of one that an inner level adds to. */
  | { readonly e: "lin"; readonly k: number; readonly terms: readonly LinTerm[] };

export interface LinTerm {
  readonly x: Expr;
  readonly coef: number;
}

export interface SCmp {
  readonly rel: IxCmp["rel"];
  readonly a: Expr;
  readonly b: Expr;
}

export type SStmt =
  | { readonly s: "let"; readonly n: number; readonly value: Expr;
      /** The element type of a scalar value; "index" for an integer index. */
      readonly type: ElementType | "index" }
  | { readonly s: "loop"; readonly v: number; readonly lo: Expr; readonly hi: Expr;
      readonly tag: LoopTag; readonly range?: 0 | 1; readonly body: readonly SStmt[] }
  | { readonly s: "store"; readonly buf: number; readonly index: Expr; readonly value: Expr }
  | { readonly s: "accInit"; readonly acc: number; readonly type: ElementType;
      readonly value: Expr }
  | { readonly s: "accSet"; readonly accs: readonly number[]; readonly values: readonly Expr[];
      readonly combiner?: string }
  | { readonly s: "if"; readonly when: readonly SCmp[]; readonly body: readonly SStmt[] };

export interface ScheduledKernel {
  readonly kernel: Kernel;
  readonly body: readonly SStmt[];
  /** Number of bound names (`t0..`). */
  readonly names: number;
}

interface Frame {
  readonly out: SStmt[];
  /** True while a child statement (a loop or if) is being filled: inserts go before it. */
  open: boolean;
  /** The body of an `if`: nothing that reads memory moves above it. */
  readonly guard: boolean;
  readonly bindings: Map<string, Expr>;
}

/** Accumulators a statement updates (recursively). */
function updatedAccs(st: Stmt, memo: WeakMap<Stmt, Set<number>>): Set<number> {
  const known = memo.get(st);
  if (known) return known;
  const out = new Set<number>();
  if (st.k === "accSet") st.accs.forEach((a) => out.add(a));
  if (st.k === "loop" || st.k === "if") {
    for (const c of st.body) updatedAccs(c, memo).forEach((a) => out.add(a));
  }
  memo.set(st, out);
  return out;
}

/** A statement value that changes while the kernel runs at this point: never hoisted. */
const PINNED = Number.POSITIVE_INFINITY;

export function scheduleKernel(kernel: Kernel): ScheduledKernel {
  const writes = new Set<number>();
  kernel.bufs.forEach((b, i) => b.access !== "r" && writes.add(i));
  const frames: Frame[] = [];
  const varLevel = new Map<number, number>();
  /** Accumulator id → the level it was declared at, and whether its updates are done. */
  const accs = new Map<number, { level: number; final: boolean }>();
  let names = 0;
  // Level of a node (memoized per statement: accumulator finality changes between them).
  let levelMemo = new Map<number, number>();

  const current = () => frames.length - 1;
  const updates = new WeakMap<Stmt, Set<number>>();
  /** The innermost `if` frame on the stack (0 when none). */
  const guardLevel = (): number => {
    for (let f = frames.length - 1; f > 0; f--) if (frames[f]!.guard) return f;
    return 0;
  };

  const levelOf = (n: Node): number => {
    const m = levelMemo.get(n.key);
    if (m !== undefined) return m;
    let l = 0;
    switch (n.op) {
      case "var":
        l = varLevel.get(n.id) ?? 0;
        break;
      case "acc": {
        const a = accs.get(n.id);
        l = a && a.final ? a.level : PINNED;
        break;
      }
      case "load":
        if (!isIx(n) && writes.has(n.buf)) {
          l = PINNED;
          break;
        }
        // A read never moves above the `if` that guards it (it may be out of range there).
        l = Math.max(levelOf(n.index), guardLevel());
        break;
      default:
        for (const c of children(n)) l = Math.max(l, levelOf(c));
    }
    levelMemo.set(n.key, l);
    return l;
  };

  const visible = (key: string): Expr | undefined => {
    for (let f = frames.length - 1; f >= 0; f--) {
      const b = frames[f]!.bindings.get(key);
      if (b) return b;
    }
    return undefined;
  };

  const place = (level: number, stmt: SStmt): void => {
    const at = level === PINNED ? current() : Math.min(level, current());
    const f = frames[at]!;
    if (f.open) f.out.splice(f.out.length - 1, 0, stmt);
    else f.out.push(stmt);
  };

  const bind = (node: Node, value: Expr, level: number, key = `${node.key}`): Expr => {
    const n = names++;
    const type: ElementType | "index" = isIx(node) ? "index" : node.type;
    place(level, { s: "let", n, value, type });
    const name: Expr = { e: "name", n, node };
    const at = level === PINNED ? current() : Math.min(level, current());
    // A pinned value is bound for this statement only.
    if (level !== PINNED) frames[at]!.bindings.set(key, name);
    return name;
  };

  const atom = (n: Node): boolean =>
    n.op === "var" || n.op === "size" || n.op === "acc" || n.op === "const";

  /** The expression of `n`, inline: children bound where visible, else inline too. */
  const inline = (n: Node): Expr => {
    const known = visible(`${n.key}`);
    if (known) return known;
    if (atom(n)) return { e: "node", node: n, args: [] };
    if (n.op === "sum") {
      return { e: "lin", k: n.k, terms: n.terms.map((t) => ({ x: inline(t.atom), coef: t.coef })) };
    }
    return { e: "node", node: n, args: children(n).map(inline) };
  };

  /** The expression of `n` with its value bound (hoisted) where its inputs exist. */
  const need = (n: Node): Expr => {
    if (atom(n)) return { e: "node", node: n, args: [] };
    const known = visible(`${n.key}`);
    if (known) return known;
    const level = levelOf(n);
    if (n.op === "sum") return needSum(n, level);
    if (n.op === "cond") {
      // The conditions are evaluated; the branches only inline, where the cond is.
      const when = n.when.flatMap((c) => [need(c.a), need(c.b)]);
      return bind(n, { e: "node", node: n, args: [...when, inline(n.then), inline(n.else)] },
        level);
    }
    const args = children(n).map(need);
    return bind(n, { e: "node", node: n, args }, level);
  };

  /** A sum, split by level: each outer level's partial sum is bound at that level. */
  const needSum = (n: Extract<Ix, { op: "sum" }>, level: number): Expr => {
    const terms = n.terms.map((t) => ({ t, l: levelOf(t.atom) }));
    terms.sort((a, b) => a.l - b.l);
    let acc: Expr | undefined;
    let i = 0;
    let partKey = `p${n.k}`;
    while (i < terms.length) {
      const l = terms[i]!.l;
      const group: LinTerm[] = [];
      while (i < terms.length && terms[i]!.l === l) {
        const t = terms[i++]!.t;
        group.push({ x: need(t.atom), coef: t.coef });
        partKey += `,${t.coef}*${t.atom.key}`;
      }
      const lin: Expr = acc
        ? { e: "lin", k: 0, terms: [{ x: acc, coef: 1 }, ...group] }
        : { e: "lin", k: n.k, terms: group };
      if (i === terms.length) return bind(n, lin, level);
      // A partial sum, keyed by the terms it holds (other sums may share it).
      acc = visible(partKey) ?? bind(n, lin, l, partKey);
    }
    return bind(n, { e: "lin", k: n.k, terms: [] }, level);
  };

  const cmp = (c: IxCmp): SCmp => ({ rel: c.rel, a: need(c.a), b: need(c.b) });

  const run = (stmts: readonly Stmt[], out: SStmt[]): void => {
    for (const st of stmts) {
      levelMemo = new Map();
      switch (st.k) {
        case "loop": {
          const lo = need(st.lo);
          const hi = need(st.hi);
          // Accumulators this loop updates are not final while it runs.
          for (const a of updatedAccs(st, updates)) {
            const info = accs.get(a);
            if (info) info.final = false;
          }
          const body: SStmt[] = [];
          const s: SStmt = {
            s: "loop", v: st.v, lo, hi, tag: st.tag, body,
            ...(st.range !== undefined && { range: st.range }),
          };
          out.push(s);
          frames[current()]!.open = true;
          frames.push({ out: body, open: false, guard: false, bindings: new Map() });
          varLevel.set(st.v, current());
          run(st.body, body);
          frames.pop();
          frames[current()]!.open = false;
          // Accumulators declared here and updated inside are final once the loop is done.
          for (const [, a] of accs) if (a.level === current()) a.final = true;
          break;
        }
        case "if": {
          const when = st.when.map(cmp);
          const body: SStmt[] = [];
          out.push({ s: "if", when, body });
          frames[current()]!.open = true;
          frames.push({ out: body, open: false, guard: true, bindings: new Map() });
          run(st.body, body);
          frames.pop();
          frames[current()]!.open = false;
          break;
        }
        case "store": {
          const index = need(st.index);
          const value = need(st.value);
          out.push({ s: "store", buf: st.buf, index, value });
          break;
        }
        case "accInit": {
          const value = need(st.value);
          out.push({ s: "accInit", acc: st.acc, type: st.type, value });
          accs.set(st.acc, { level: current(), final: true });
          break;
        }
        case "accSet": {
          const values = st.values.map(need);
          out.push({
            s: "accSet", accs: st.accs, values,
            ...(st.combiner !== undefined && { combiner: st.combiner }),
          });
          break;
        }
        default: {
          const never: never = st;
          throw new Error(`unknown statement ${String(never)}`);
        }
      }
    }
  };

  const body: SStmt[] = [];
  frames.push({ out: body, open: false, guard: false, bindings: new Map() });
  run(kernel.body, body);
  return { kernel, body, names };
}
