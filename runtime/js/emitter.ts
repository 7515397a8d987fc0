// The code builder under the `js` backend's generators: nested blocks of JavaScript source
// (function bodies, loops) and values (`Val`: an expression plus the innermost block whose
// symbols it reads). Binding a value declares a `const` in that innermost block, so every
// computation lands at the outermost loop level where its inputs exist: strided index math and
// loop-invariant values are hoisted out of inner loops by construction, and identical
// expressions bound in an enclosing block are shared (string-keyed CSE). Index arithmetic is
// kept as affine forms over loop variables so a leaf read becomes `x[base + i * stride]` with
// `base` computed once per outer iteration. Values external to the source (literal data,
// library kernels, scalar helpers) go through a module-level table.

/** A block of generated code: a function body or a loop body, with its header and footer. */
export class Block {
  readonly parent: Block | undefined;
  readonly depth: number;
  readonly items: (string | Block)[] = [];
  readonly header: string;
  readonly footer: string;
  open = true;

  constructor(parent: Block | undefined, header: string, footer: string) {
    this.parent = parent;
    this.depth = parent ? parent.depth + 1 : 0;
    this.header = header;
    this.footer = footer;
  }

  isAncestorOf(other: Block): boolean {
    for (let b: Block | undefined = other; b; b = b.parent) if (b === this) return true;
    return false;
  }

  /** Appends a statement at the current end of the block. */
  push(stmt: string): void {
    this.items.push(stmt);
  }

  /** Inserts a statement before the open child block, if any (so it runs before that child). */
  insert(stmt: string): void {
    const last = this.items[this.items.length - 1];
    if (last instanceof Block && last.open) this.items.splice(this.items.length - 1, 0, stmt);
    else this.items.push(stmt);
  }

  render(indent: string, out: string[]): void {
    if (this.header !== "") out.push(indent + this.header);
    const inner = this.header !== "" ? indent + "  " : indent;
    for (const it of this.items) {
      if (typeof it === "string") out.push(inner + it);
      else it.render(inner, out);
    }
    if (this.footer !== "") out.push(indent + this.footer);
  }
}

/** A value in generated code: an expression, and the innermost block it depends on. */
export interface Val {
  readonly code: string;
  readonly block: Block;
  /** True for names and literals (safe to repeat in an expression). */
  readonly atom: boolean;
}

/** The deeper of the blocks of some values (they are all on one chain of nested blocks). */
function deepest(root: Block, vals: readonly Val[]): Block {
  let b = root;
  for (const v of vals) if (v.block.depth > b.depth) b = v.block;
  return b;
}

/** One generated function: its root block, fresh local names and the CSE table. */
export class FnBuilder {
  readonly root: Block;
  private counter = 0;
  private readonly bound = new Map<string, Val[]>();

  constructor(header: string) {
    this.root = new Block(undefined, header, header === "" ? "" : "}");
  }

  fresh(prefix: string): string {
    return `${prefix}${this.counter++}`;
  }

  /** A literal or a name visible everywhere in the function. */
  atom(code: string): Val {
    return { code, block: this.root, atom: true };
  }

  /** An expression over `deps`, placed at their innermost block. */
  expr(code: string, deps: readonly Val[]): Val {
    return { code, block: deepest(this.root, deps), atom: false };
  }

  /**
   * Declares `const t = <v>` in v's block (before any open child loop) and returns the name;
   * an identical expression already bound in an enclosing block of `at` is reused.
   */
  bind(v: Val, at: Block, prefix = "t"): Val {
    if (v.atom) return v;
    const prior = this.bound.get(v.code);
    if (prior) {
      for (const p of prior) if (p.block.isAncestorOf(at) && p.block.isAncestorOf(v.block)) {
        return p;
      }
    }
    const name = this.fresh(prefix);
    v.block.insert(`const ${name} = ${v.code};`);
    const out: Val = { code: name, block: v.block, atom: true };
    const list = prior ?? [];
    list.push(out);
    this.bound.set(v.code, list);
    return out;
  }

  /** Opens a loop `for (let v = from; v < to; v++)` as the last item of `parent`. */
  loop(parent: Block, from: string, to: string, prefix = "i"): { block: Block; v: Val } {
    const name = this.fresh(prefix);
    const b = new Block(parent, `for (let ${name} = ${from}; ${name} < ${to}; ${name}++) {`, "}");
    parent.items.push(b);
    return { block: b, v: { code: name, block: b, atom: true } };
  }

  /** Opens a child block with an arbitrary header (a labeled block, a nested function). */
  child(parent: Block, header: string, footer = "}"): Block {
    const b = new Block(parent, header, footer);
    parent.items.push(b);
    return b;
  }

  close(b: Block): void {
    b.open = false;
  }

  render(indent = ""): string {
    const out: string[] = [];
    this.root.render(indent, out);
    return out.join("\n");
  }
}

// ---- affine index forms ----------------------------------------------------------------------

/** One term of an affine form: a symbol (loop variable or bound integer) times a coefficient. */
export interface Term {
  readonly sym: Val;
  readonly coef: number;
}

/** k + sum(coef * sym): index arithmetic kept symbolic so it can be split by loop level. */
export interface Affine {
  readonly k: number;
  readonly terms: readonly Term[];
}

export const affConst = (k: number): Affine => ({ k, terms: [] });

export const affSym = (sym: Val, coef = 1): Affine =>
  coef === 0 ? affConst(0) : { k: 0, terms: [{ sym, coef }] };

export function affAdd(a: Affine, b: Affine): Affine {
  const terms = [...a.terms];
  for (const t of b.terms) {
    const i = terms.findIndex((u) => u.sym.code === t.sym.code);
    if (i < 0) terms.push(t);
    else {
      const coef = terms[i]!.coef + t.coef;
      if (coef === 0) terms.splice(i, 1);
      else terms[i] = { sym: t.sym, coef };
    }
  }
  return { k: a.k + b.k, terms };
}

export function affScale(a: Affine, s: number): Affine {
  if (s === 0) return affConst(0);
  return { k: a.k * s, terms: a.terms.map((t) => ({ sym: t.sym, coef: t.coef * s })) };
}

export const affAddK = (a: Affine, k: number): Affine => ({ k: a.k + k, terms: a.terms });

/** A canonical text of the form (for equality tests and memo keys). */
export function affKey(a: Affine): string {
  const ts = [...a.terms].sort((x, y) => (x.sym.code < y.sym.code ? -1 : 1));
  return `${a.k}` + ts.map((t) => `+${t.coef}*${t.sym.code}`).join("");
}

function termCode(t: Term): string {
  return t.coef === 1 ? t.sym.code : t.coef === -1 ? `-${t.sym.code}` : `${t.sym.code} * ${t.coef}`;
}

function joinSum(parts: string[]): string {
  let s = parts[0] ?? "0";
  for (let i = 1; i < parts.length; i++) {
    const p = parts[i]!;
    s = p.startsWith("-") ? `${s} - ${p.slice(1)}` : `${s} + ${p}`;
  }
  return s;
}

/**
 * The form as a value, with the partial sums of outer loop levels bound in their own blocks:
 * `base = k + i0 * 64` at the outer level, then `base + i1` inside.
 */
export function affVal(fn: FnBuilder, a: Affine, at: Block): Val {
  if (a.terms.length === 0) return fn.atom(String(a.k));
  if (a.terms.length === 1 && a.k === 0 && a.terms[0]!.coef === 1) return a.terms[0]!.sym;
  const byDepth = [...a.terms].sort((x, y) => x.sym.block.depth - y.sym.block.depth);
  let acc: Val | undefined;
  let i = 0;
  while (i < byDepth.length) {
    const block = byDepth[i]!.sym.block;
    const group: Term[] = [];
    while (i < byDepth.length && byDepth[i]!.sym.block === block) group.push(byDepth[i++]!);
    const parts: string[] = [];
    if (acc) parts.push(acc.code);
    parts.push(...group.map(termCode));
    if (!acc && a.k !== 0) parts.push(String(a.k));
    const code = joinSum(parts);
    const deps = acc ? [acc, ...group.map((t) => t.sym)] : group.map((t) => t.sym);
    const v = fn.expr(code.startsWith("-") ? `0 ${code.replace(/^-/, "- ")}` : code, deps);
    acc = i < byDepth.length ? fn.bind(v, at, "b") : v;
  }
  return acc!;
}

/** Text safe inside a `//` comment of generated code (names may hold any character). */
export function commentText(s: string): string {
  return s.replace(/[\n\r\u2028\u2029]/g, " ");
}

/** Formats a number as a JavaScript literal that evaluates to exactly that double. */
export function numLit(v: number): string {
  if (Number.isNaN(v)) return "NaN";
  if (v === Infinity) return "Infinity";
  if (v === -Infinity) return "-Infinity";
  if (Object.is(v, -0)) return "-0";
  return String(v);
}

/**
 * The module-level table of values the generated source refers to by name (`e3`): literal data,
 * library kernels, scalar helpers. The same object (or key) is listed once.
 */
export class ExtTable {
  readonly values: unknown[] = [];
  /** The key each entry was listed under (the value itself unless `ref` was given a key). */
  readonly keys: unknown[] = [];
  private readonly comments: string[] = [];
  private readonly byKey = new Map<unknown, string>();

  /** The name under which `value` is visible to the generated code. */
  ref(value: unknown, comment: string, key: unknown = value): string {
    const known = this.byKey.get(key);
    if (known !== undefined) return known;
    const name = `e${this.values.length}`;
    this.values.push(value);
    this.keys.push(key);
    this.comments.push(comment);
    this.byKey.set(key, name);
    return name;
  }

  /** `const e0 = ext[0]; // comment` lines, one per entry. */
  declarations(): string[] {
    return this.values.map(
      (_, i) => `const e${i} = ext[${i}]; // ${commentText(this.comments[i]!)}`,
    );
  }
}
