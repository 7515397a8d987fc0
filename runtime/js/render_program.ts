// The js renderer of a step list (runtime/kernel/program.ts): one JavaScript function per
// program computation `c(V, p0.., r0..)` — V the arena's views, p the parameters' leaf arrays,
// r the result buffers it writes — calling the kernels (rendered once each: identical kernels
// share one function), the JS dot and convolution kernels (runtime/js/kernels_*.ts) with their
// epilogues on finished rows, the sort, and the other computations. The source ends by
// returning the entry, the arena size and a function that makes the arena's views (one typed
// array per intermediate, made once per executable, so a run allocates only its results).

import { elementInfo } from "../../ir/element_types.ts";
import { roundToBF16, roundToF16 } from "../../ir/literal.ts";
import type { Ix } from "../kernel/kir.ts";
import type {
  ConvStep,
  DotStep,
  Program,
  ProgramBuffer,
  ProgramComputation,
  Step,
  Value,
} from "../kernel/program.ts";
import { scheduleKernel } from "../kernel/schedule.ts";
import type { Expr } from "../kernel/schedule.ts";
import { children, isIx, type Node } from "../kernel/kir.ts";
import { commentText, ExtTable } from "./emitter.ts";
import { conv, planConv } from "./kernels_conv.ts";
import { dotFloat, dotInt, planDot } from "./kernels_dot.ts";
import { JsKernelRenderer } from "./render_kernel.ts";
import { bitcastArray } from "./runtime_lib.ts";

/**
 * Test seam: with `poison` on when a program is rendered, every run first fills the arena and
 * the result buffers with junk (NaN for floats, an extreme integer otherwise), so tests show
 * that no result depends on what the kernels skipped (extent hints) or on stale memory.
 */
export const codegenTesting = { poison: false };

export interface RenderedProgram {
  readonly source: string;
  readonly ext: ExtTable;
}

function flat(v: Value): number[] {
  return typeof v === "number" ? [v] : v.flatMap(flat);
}

/** Renders a program as the source of a function of `ext` returning { entry, arenaBytes, views }. */
export function renderJsProgram(program: Program): RenderedProgram {
  return new ProgramRenderer(program).render();
}

class ProgramRenderer {
  readonly ext = new ExtTable();
  private readonly kernels = new JsKernelRenderer(this.ext);
  private readonly functions: string[] = [];
  private readonly kernelByText = new Map<string, string>();
  /** Global index of each arena view: [computation][buffer id]. */
  private readonly viewIndex: Map<number, number>[] = [];
  private readonly views: { ctor: string; offset: number; n: number; name: string }[] = [];

  constructor(readonly program: Program) {}

  render(): RenderedProgram {
    this.program.computations.forEach((c, i) => {
      const m = new Map<number, number>();
      for (const b of c.buffers) {
        if (b.place.kind !== "arena") continue;
        m.set(b.id, this.views.length);
        this.views.push({
          ctor: elementInfo(b.type).storage,
          offset: c.arenaBase + b.place.offset,
          n: b.elements,
          name: b.name,
        });
      }
      this.viewIndex[i] = m;
    });
    this.program.computations.forEach((c, i) => this.computation(c, i));
    const viewLines = this.views.map(
      (v) => `    new ${v.ctor}(arena, ${v.offset}, ${v.n}), // ${commentText(v.name)}`,
    );
    const source = [
      `// Kiln js backend: module '${commentText(this.program.module.name)}'`,
      `"use strict";`,
      ...this.ext.declarations(),
      "",
      ...this.functions.flatMap((f) => [f, ""]),
      `function views(arena) {`,
      `  return [`,
      ...viewLines,
      `  ];`,
      `}`,
      `return { entry: c0, arenaBytes: ${this.program.arenaBytes}, views };`,
    ].join("\n");
    return { source, ext: this.ext };
  }

  private kernelFn(call: { kernel: Parameters<typeof scheduleKernel>[0] }): string {
    const sk = scheduleKernel(call.kernel);
    const text = this.kernels.render(sk, "KERNEL");
    const known = this.kernelByText.get(text);
    if (known) return known;
    const name = `k${this.kernelByText.size}_${call.kernel.name.replace(/^k\d+_/, "")}`;
    this.kernelByText.set(text, name);
    this.functions.push(text.replace("function KERNEL(", `function ${name}(`));
    return name;
  }

  private computation(c: ProgramComputation, index: number): void {
    const params: string[] = [];
    const name = new Map<number, string>();
    let leaf = 0;
    c.params.forEach((p) => {
      for (const b of flat(p ?? [])) {
        const n = `p${leaf++}`;
        params.push(n);
        if (!name.has(b)) name.set(b, n);
      }
    });
    const results = c.results.map((_, i) => `r${i}`);
    const lines: string[] = [];
    if (codegenTesting.poison && index === 0) {
      lines.push(`for (const x of [...V, ${results.join(", ")}]) x.fill(` +
        `x instanceof Float32Array ? NaN : x instanceof BigInt64Array ? -(2n ** 62n) : ` +
        `x instanceof Int32Array ? 1000000007 : 201);`);
    }
    for (const b of c.buffers) {
      switch (b.place.kind) {
        case "param":
          break;
        case "result":
          name.set(b.id, `r${b.place.index}`);
          break;
        case "constant":
          name.set(b.id, this.ext.ref(b.place.literal.data, `data of %${b.name}`));
          break;
        case "arena": {
          const v = `v${b.id}`;
          lines.push(`const ${v} = V[${this.viewIndex[index]!.get(b.id)!}]; // ${commentText(b.name)}`);
          name.set(b.id, v);
          break;
        }
        default: {
          const never: never = b.place;
          throw new Error(`unknown place ${String(never)}`);
        }
      }
    }
    const ctx: StepCtx = {
      buf: (id) => name.get(id)!,
      buffer: (id) => c.buffers[id]!,
      ix: (x) => this.ix(x, c, name),
    };
    for (const s of c.steps) this.step(s, ctx, lines);
    const body = lines.map((l) => `  ${l}`).join("\n");
    this.functions.push(
      `// computation ${commentText(c.name)}\n` +
        `function c${index}(${["V", ...params, ...results].join(", ")}) {\n${body}\n}`,
    );
  }

  /** A program-level index expression: `size(p)` is the first element of ENTRY parameter p. */
  private ix(x: Ix, c: ProgramComputation, name: Map<number, string>): string {
    const r = (y: Ix) => this.ix(y, c, name);
    switch (x.op) {
      case "const":
        return String(x.v);
      case "size": {
        const p = this.program.computations[0]!.params[x.id];
        const b = flat(p ?? [])[0];
        if (b === undefined || c !== this.program.computations[0]) {
          throw new Error(`a size parameter ${x.id} outside the entry`);
        }
        return `${name.get(b)!}[0]`;
      }
      case "sum": {
        const parts = x.terms.map((t) => (t.coef === 1 ? r(t.atom) : `${t.coef} * ${r(t.atom)}`));
        if (x.k !== 0) parts.push(String(x.k));
        return `(${parts.join(" + ")})`;
      }
      case "prod":
        return `(${x.factors.map(r).join(" * ")})`;
      case "min":
      case "max": {
        // Constant first: `Math.min(64, Math.max(0, p3[0]))`.
        const [a, b] = x.b.op === "const" ? [x.b, x.a] : [x.a, x.b];
        return `Math.${x.op}(${r(a)}, ${r(b)})`;
      }
      case "floordiv":
        return `Math.floor(${r(x.a)} / ${r(x.b)})`;
      case "mod":
        return `(${r(x.a)} % ${r(x.b)})`;
      case "var":
      case "value":
        throw new Error(`a ${x.op} in a program-level index`);
      default: {
        const never: never = x;
        throw new Error(`unknown index ${String(never)}`);
      }
    }
  }

  private kernelCall(
    call: { kernel: Parameters<typeof scheduleKernel>[0]; sizes: readonly Ix[];
      range: readonly Ix[] },
    args: readonly number[],
    ctx: StepCtx,
    range?: string[],
  ): string {
    const fn = this.kernelFn(call);
    const all = [
      ...args.map((a) => ctx.buf(a)),
      ...call.sizes.map((s) => ctx.ix(s)),
      ...(range ?? call.range.flatMap((r) => ["0", ctx.ix(r)])),
    ];
    return `${fn}(${all.join(", ")})`;
  }

  private step(s: Step, ctx: StepCtx, lines: string[]): void {
    switch (s.kind) {
      case "kernel":
        lines.push(`${this.kernelCall(s.call, s.args, ctx)}; // ${commentText(s.call.kernel.comment)}`);
        return;
      case "copy":
        if (s.from !== s.to) lines.push(`${ctx.buf(s.to)}.set(${ctx.buf(s.from)});`);
        return;
      case "bitcast": {
        const f = this.ext.ref(bitcastArray, "bitcastArray");
        const from = ctx.buffer(s.from).type;
        const to = ctx.buffer(s.to).type;
        lines.push(`${ctx.buf(s.to)}.set(${f}(${ctx.buf(s.from)}, "${from}", "${to}"));`);
        return;
      }
      case "dot":
        this.dot(s, ctx, lines);
        return;
      case "conv":
        this.conv(s, ctx, lines);
        return;
      case "sort":
        this.sort(s, ctx, lines);
        return;
      case "call": {
        const args = s.args.flatMap(flat).map((b) => ctx.buf(b));
        const res = s.results.map((b) => ctx.buf(b));
        lines.push(`c${s.comp}(${["V", ...args, ...res].join(", ")});`);
        return;
      }
      case "while": {
        const init = flat(s.init).map((b) => ctx.buf(b));
        const results = s.results.map((b) => ctx.buf(b));
        const scratch = s.scratch.map((b) => ctx.buf(b));
        const flag = ctx.buf(s.flag);
        lines.push(`{`);
        lines.push(`  const A = [${results.join(", ")}], B = [${scratch.join(", ")}];`);
        lines.push(`  let s = [${init.join(", ")}], w = 0;`);
        lines.push(`  for (;;) {`);
        lines.push(`    c${s.cond}(V, ...s, ${flag});`);
        lines.push(`    if (${flag}[0] === 0) break;`);
        lines.push(`    const d = (w & 1) === 0 ? A : B;`);
        lines.push(`    c${s.body}(V, ...s, ...d);`);
        lines.push(`    s = d; w++;`);
        lines.push(`  }`);
        lines.push(`  if (s !== A) for (let j = 0; j < A.length; j++) A[j].set(s[j]);`);
        lines.push(`}`);
        return;
      }
      case "conditional": {
        const n = s.branches.length;
        const sel = `${ctx.buf(s.selector)}[0]`;
        const branch = s.predicate
          ? `(${sel} !== 0 ? 0 : 1)`
          : `(${sel} < 0 || ${sel} >= ${n} ? ${n - 1} : ${sel})`;
        const res = s.results.map((b) => ctx.buf(b));
        lines.push(`switch (${branch}) {`);
        s.branches.forEach((b, i) => {
          const args = flat(s.args[i]!).map((x) => ctx.buf(x));
          lines.push(`  case ${i}: c${b}(${["V", ...args, ...res].join(", ")}); break;`);
        });
        lines.push(`}`);
        return;
      }
      default: {
        const never: never = s;
        throw new Error(`unknown step ${String(never)}`);
      }
    }
  }

  private rounder(t: string): string {
    return t === "f16"
      ? this.ext.ref(roundToF16, "roundToF16")
      : t === "bf16"
        ? this.ext.ref(roundToBF16, "roundToBF16")
        : "null";
  }

  /** The epilogue run on finished rows (a tile kernel over rows × all computed columns). */
  private epilogueFn(s: DotStep | ConvStep, ctx: StepCtx, cols: string): string {
    const e = s.epilogue!;
    const call = this.kernelCall(e.call, e.args, ctx, ["lo", "hi", "0", cols]);
    return `(lo, hi) => ${call}`;
  }

  private dot(s: DotStep, ctx: StepCtx, lines: string[]): void {
    const A = ctx.buf(s.lhs);
    const B = ctx.buf(s.rhs);
    const out = ctx.buf(s.out);
    const plan = planDot(s.lhsDims, s.rhsDims, s.dn, s.lhsStrides, s.rhsStrides);
    const p = this.ext.ref(plan, `dot plan of %${s.name}`);
    if (!elementInfo(s.type).float) {
      lines.push(`${this.ext.ref(dotInt, "dotInt")}("${s.type}", ${A}, ${B}, ${out}, ${p});`);
      this.after(s, ctx, lines);
      return;
    }
    const f = this.ext.ref(dotFloat, "dotFloat");
    const m = s.mLimit ? ctx.ix(s.mLimit) : undefined;
    const n = s.nLimit ? ctx.ix(s.nLimit) : undefined;
    const k = s.kLimit ? ctx.ix(s.kLimit) : undefined;
    const epi = s.epilogue?.perTile ? this.epilogueFn(s, ctx, n ?? String(plan.N)) : "null";
    const tail =
      m !== undefined || n !== undefined || k !== undefined
        ? `, ${m ?? "undefined"}, ${n ?? "undefined"}${k !== undefined ? `, ${k}` : ""}`
        : "";
    lines.push(`${f}(${A}, ${B}, ${out}, ${p}, ${this.rounder(s.type)}, ${epi}${tail}); // %${commentText(s.name)}`);
    this.after(s, ctx, lines);
  }

  private conv(s: ConvStep, ctx: StepCtx, lines: string[]): void {
    const plan = planConv(
      s.lhsDims,
      s.rhsDims,
      s.outDims,
      s.convDims,
      s.window,
      s.featureGroupCount,
      s.batchGroupCount,
      s.lhsStrides,
      s.rhsStrides,
    );
    const p = this.ext.ref(plan, `convolution plan of %${s.name}`);
    const f = this.ext.ref(conv, "conv");
    const float = elementInfo(s.type).float;
    const cols = String(s.outDims.slice(1).reduce((a, b) => a * b, 1));
    const epi = s.epilogue?.perTile ? this.epilogueFn(s, ctx, cols) : "null";
    lines.push(
      `${f}("${s.type}", ${ctx.buf(s.lhs)}, ${ctx.buf(s.rhs)}, ${ctx.buf(s.out)}, ${p}, ` +
        `${float ? this.rounder(s.type) : "null"}, ${epi}); // %${commentText(s.name)}`,
    );
    this.after(s, ctx, lines);
  }

  /** An epilogue that is not run per tile runs after the contraction. */
  private after(s: DotStep | ConvStep, ctx: StepCtx, lines: string[]): void {
    const e = s.epilogue;
    if (!e || e.perTile) return;
    lines.push(`${this.kernelCall(e.call, e.args, ctx)}; // ${commentText(e.call.kernel.comment)}`);
  }

  private sort(s: Extract<Step, { kind: "sort" }>, ctx: StepCtx, lines: string[]): void {
    const n = s.ins.length;
    const dims = s.dims;
    const d = s.dim;
    const len = dims[d]!;
    let stride = 1;
    for (let k = dims.length - 1; k > d; k--) stride *= dims[k]!;
    const outer = dims.reduce((a, b) => a * b, 1) / len;
    const ins = s.ins.map((b) => ctx.buf(b));
    const outs = s.outs.map((b) => ctx.buf(b));
    const name = s.name;
    const args: string[] = [];
    for (let i = 0; i < n; i++) {
      args.push(`in${i}[base + x * ${stride}]`, `in${i}[base + y * ${stride}]`);
    }
    const less = this.inline(s.comparator.less);
    const fn = [
      `// sort %${commentText(name)}`,
      `function ${name}(${[...outs.map((_, i) => `out${i}`), ...ins.map((_, i) => `in${i}`)].join(", ")}) {`,
      `  const perm = new Int32Array(${len});`,
      `  const tmp = new Int32Array(${len});`,
      `  let base = 0;`,
      `  function less(x, y) {`,
      ...args.map((a, j) => `    const a${j} = ${a};`),
      `    return ${less} !== 0;`,
      `  }`,
      `  function msort(lo, hi) {`,
      `    if (hi - lo < 2) return;`,
      `    const mid = lo + ((hi - lo) >> 1);`,
      `    msort(lo, mid);`,
      `    msort(mid, hi);`,
      `    for (let t = lo; t < hi; t++) tmp[t] = perm[t];`,
      `    let i = lo, j = mid, w = lo;`,
      `    while (i < mid && j < hi) {`,
      `      if (less(tmp[j], tmp[i])) perm[w++] = tmp[j++];`,
      `      else perm[w++] = tmp[i++];`,
      `    }`,
      `    while (i < mid) perm[w++] = tmp[i++];`,
      `    while (j < hi) perm[w++] = tmp[j++];`,
      `  }`,
      `  for (let o = 0; o < ${outer}; o++) {`,
      `    base = (o % ${stride}) + Math.floor(o / ${stride}) * ${stride * len};`,
      `    for (let p = 0; p < ${len}; p++) perm[p] = p;`,
      `    msort(0, ${len});`,
      `    for (let p = 0; p < ${len}; p++) {`,
      ...outs.map((_, k) => `      out${k}[base + p * ${stride}] = in${k}[base + perm[p] * ${stride}];`),
      `    }`,
      `  }`,
      `}`,
    ];
    this.functions.push(fn.join("\n"));
    lines.push(`${name}(${[...outs, ...ins].join(", ")});`);
  }

  /** An expression rendered inline (a comparator: accumulator i is its argument a<i>). */
  private inline(n: Node): string {
    return this.kernels.expr(inlineExpr(n));
  }
}

interface StepCtx {
  buf(id: number): string;
  buffer(id: number): ProgramBuffer;
  ix(x: Ix): string;
}

/** A node as an expression tree with nothing bound. */
function inlineExpr(n: Node): Expr {
  if (isIx(n) && n.op === "sum") {
    return { e: "lin", k: n.k, terms: n.terms.map((t) => ({ x: inlineExpr(t.atom), coef: t.coef })) };
  }
  return { e: "node", node: n, args: children(n).map(inlineExpr) };
}
