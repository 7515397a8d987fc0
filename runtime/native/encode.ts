// Encodes a step list (runtime/kernel/program.ts) as the int64 code csrc/program.c interprets:
// slots per computation (arena offsets, parameter leaves, results, constants), steps (kernels
// with their buffers, sizes, range and grain; GEMM and convolution calls with the runtime's
// descriptions; copies; call, while, conditional), program-level size expressions in postfix,
// and the data the steps point into (GEMM axis tables). Dot operands are put in the canonical
// [batch, M, K] x [batch, K, N] form here, as per-axis offsets: a stride when the positions of
// an axis group are evenly spaced, else a table. The layout is documented in program.c; the two
// change together (PROGRAM_VERSION).

import type { DotDimensionNumbers } from "../../ir/attributes.ts";
import { elementInfo } from "../../ir/element_types.ts";
import type { Literal } from "../../ir/literal.ts";
import { UnsupportedError } from "../backend.ts";
import type { Ix } from "../kernel/kir.ts";
import type {
  ConvStep,
  DotStep,
  Program,
  ProgramComputation,
  Step,
  Value,
} from "../kernel/program.ts";
import { stridesOf } from "../../ir/evaluate_support.ts";
import { planDot } from "../js/kernels_dot.ts";

export const PROGRAM_MAGIC = 0x4b494c4e50524731n; // "KILNPRG1"
export const PROGRAM_VERSION = 2n;

const OP = { kernel: 1, copy: 2, gemm: 3, conv: 4, call: 5, while: 6, cond: 7 } as const;
const SLOT = { arena: 0, param: 1, result: 2, constant: 3 } as const;
const X = { const: 1, param: 2, add: 3, mul: 4, min: 5, max: 6, div: 7, mod: 8 } as const;

/** A kernel call as the encoder sees it: the program-level function index, chosen by the caller. */
export type KernelIndex = (kernel: object) => number;

export interface EncodedProgram {
  readonly code: BigInt64Array;
  /** Constant data, by constant index (copied by the addon). */
  readonly consts: readonly ArrayBufferView[];
  /** What each step id is (for the interpreter's profile). */
  readonly steps: readonly string[];
}

function flat(v: Value): number[] {
  return typeof v === "number" ? [v] : v.flatMap(flat);
}

/** One axis group: a stride when its positions are evenly spaced from 0, else a table. */
interface Axis {
  readonly stride: number;
  readonly table?: readonly number[];
}

function axis(offs: Int32Array): Axis {
  if (offs.length <= 1) return { stride: 0 };
  const st = offs[1]! - offs[0]!;
  for (let i = 0; i < offs.length; i++) {
    if (offs[i] !== offs[0]! + i * st) return { stride: 0, table: Array.from(offs) };
  }
  return offs[0] === 0 ? { stride: st } : { stride: 0, table: Array.from(offs) };
}

/**
 * The canonical GEMM form of a dot_general (planDot's: the evaluator's and XLA's result order),
 * each axis group as a stride or a table of offsets.
 */
export function canonicalDot(
  lhs: readonly number[],
  rhs: readonly number[],
  dn: DotDimensionNumbers,
  ls: readonly number[],
  rs: readonly number[],
) {
  const p = planDot(lhs, rhs, dn, ls, rs);
  return {
    batch: p.nb, M: p.M, N: p.N, K: p.K,
    aB: axis(p.aB), aM: axis(p.aM), aK: axis(p.aK),
    bB: axis(p.bB), bK: axis(p.bK), bN: axis(p.bN),
  };
}

class Encoder {
  readonly steps: string[] = [];
  private readonly exprs: bigint[][] = [];
  private readonly exprIndex = new Map<Ix, number>();
  readonly consts: ArrayBufferView[] = [];
  private readonly constIndex = new Map<object, number>();

  constructor(
    readonly program: Program,
    readonly kernelIndex: KernelIndex,
  ) {}

  encode(): EncodedProgram {
    const comps = this.program.computations;
    const head = [PROGRAM_MAGIC, PROGRAM_VERSION, BigInt(comps.length),
      BigInt(this.program.arenaBytes), 0n, 0n];
    const bodies = comps.map((c) => this.computation(c));
    head[5] = BigInt(this.steps.length);
    const code: bigint[] = [...head, ...comps.map(() => 0n)];
    bodies.forEach((b, i) => {
      code[6 + i] = BigInt(code.length);
      const base = code.length;
      for (const w of b.words) code.push(w);
      for (const p of b.tables) code[base + p.at] = -1n; // patched below
    });
    // Tables (GEMM axes), then the expression table.
    const tableAt = new Map<readonly number[], number>();
    bodies.forEach((b, i) => {
      const base = Number(code[6 + i]);
      for (const p of b.tables) {
        let at = tableAt.get(p.table);
        if (at === undefined) {
          at = code.length;
          for (const v of p.table) code.push(BigInt(v));
          tableAt.set(p.table, at);
        }
        code[base + p.at] = BigInt(at);
      }
    });
    code[4] = BigInt(code.length);
    code.push(BigInt(this.exprs.length));
    const exprStart = code.length;
    for (let i = 0; i < this.exprs.length; i++) code.push(0n);
    this.exprs.forEach((e, i) => {
      code[exprStart + i] = BigInt(code.length);
      code.push(BigInt(e.length / 2), ...e);
    });
    return { code: BigInt64Array.from(code), consts: this.consts, steps: this.steps };
  }

  private constant(lit: Literal): number {
    const known = this.constIndex.get(lit.data);
    if (known !== undefined) return known;
    const i = this.consts.length;
    this.consts.push(lit.data);
    this.constIndex.set(lit.data, i);
    return i;
  }

  /** A size: a literal (>= 0) or -(e + 1) for a program-level expression. */
  private size(x: Ix): bigint {
    if (x.op === "const") {
      if (x.v < 0) throw new Error(`a negative size ${x.v}`);
      return BigInt(x.v);
    }
    let e = this.exprIndex.get(x);
    if (e === undefined) {
      const toks: bigint[] = [];
      this.postfix(x, toks);
      e = this.exprs.length;
      this.exprs.push(toks);
      this.exprIndex.set(x, e);
    }
    return BigInt(-(e + 1));
  }

  private postfix(x: Ix, out: bigint[]): void {
    const tok = (op: number, v: number | bigint = 0) => out.push(BigInt(op), BigInt(v));
    const bin = (op: number, a: Ix, b: Ix) => {
      this.postfix(a, out);
      this.postfix(b, out);
      tok(op);
    };
    switch (x.op) {
      case "const":
        tok(X.const, x.v);
        return;
      case "size": {
        // ENTRY parameter x.id: its (first) leaf's position among the entry's parameter leaves.
        const entry = this.program.computations[0]!;
        let leaf = 0;
        for (let p = 0; p < x.id; p++) leaf += flat(entry.params[p] ?? []).length;
        tok(X.param, leaf);
        return;
      }
      case "sum": {
        tok(X.const, x.k);
        for (const t of x.terms) {
          this.postfix(t.atom, out);
          if (t.coef !== 1) {
            tok(X.const, t.coef);
            tok(X.mul);
          }
          tok(X.add);
        }
        return;
      }
      case "prod": {
        tok(X.const, 1);
        for (const f of x.factors) {
          this.postfix(f, out);
          tok(X.mul);
        }
        return;
      }
      case "min":
        bin(X.min, x.a, x.b);
        return;
      case "max":
        bin(X.max, x.a, x.b);
        return;
      case "floordiv":
        bin(X.div, x.a, x.b);
        return;
      case "mod":
        bin(X.mod, x.a, x.b);
        return;
      case "var":
      case "value":
        throw new Error(`a ${x.op} in a program-level size`);
      default: {
        const never: never = x;
        throw new Error(`unknown index ${String(never)}`);
      }
    }
  }

  private computation(c: ProgramComputation): { words: bigint[]; tables: { at: number;
    table: readonly number[] }[] } {
    const w: bigint[] = [];
    const tables: { at: number; table: readonly number[] }[] = [];
    const leafOf = new Map<number, number>();
    let leaf = 0;
    for (const p of c.params) {
      for (const b of flat(p ?? [])) if (!leafOf.has(b)) leafOf.set(b, leaf++);
    }
    const nLeaves = c.params.reduce<number>((n, p) => n + flat(p ?? []).length, 0);
    w.push(BigInt(c.buffers.length));
    for (const b of c.buffers) {
      switch (b.place.kind) {
        case "arena":
          w.push(BigInt(SLOT.arena), BigInt(c.arenaBase + b.place.offset));
          break;
        case "param":
          w.push(BigInt(SLOT.param), BigInt(leafOf.get(b.id)!));
          break;
        case "result":
          w.push(BigInt(SLOT.result), BigInt(b.place.index));
          break;
        case "constant":
          w.push(BigInt(SLOT.constant), BigInt(this.constant(b.place.literal)));
          break;
        default: {
          const never: never = b.place;
          throw new Error(`unknown place ${String(never)}`);
        }
      }
    }
    // A contraction's epilogue that does not run per tile is its own kernel step after it.
    const steps = c.steps.flatMap((s): Step[] =>
      (s.kind === "dot" || s.kind === "conv") && s.epilogue && !s.epilogue.perTile
        ? [s, { kind: "kernel", call: s.epilogue.call, args: s.epilogue.args }]
        : [s]);
    w.push(BigInt(nLeaves), BigInt(c.results.length), BigInt(steps.length));
    const table = (t: readonly number[] | undefined): bigint => {
      if (!t) return -1n;
      tables.push({ at: w.length, table: t });
      return -1n;
    };
    for (const s of steps) {
      const at = w.length;
      this.step(s, c, w, table);
      // Every step: [opcode, step id, ...]; the id goes in after the opcode.
      w.splice(at + 1, 0, BigInt(this.steps.length));
      for (const t of tables) if (t.at > at) t.at += 1;
      this.steps.push(`${c.name}: ${describeStep(s)}`);
    }
    return { words: w, tables };
  }

  private args(
    call: { sizes: readonly Ix[] },
    args: readonly number[],
    w: bigint[],
  ): void {
    w.push(BigInt(args.length), ...args.map(BigInt));
    w.push(BigInt(call.sizes.length), ...call.sizes.map((s) => this.size(s)));
  }

  private step(
    s: Step,
    c: ProgramComputation,
    w: bigint[],
    table: (t: readonly number[] | undefined) => bigint,
  ): void {
    switch (s.kind) {
      case "kernel": {
        const k = s.call.kernel;
        if (k.ranges === 2) {
          throw new Error(`the tile kernel ${k.name} is a contraction's epilogue, not a step`);
        }
        w.push(BigInt(OP.kernel), BigInt(this.kernelIndex(k)));
        this.args(s.call, s.args, w);
        w.push(k.ranges === 0 ? 0n : 1n, k.ranges === 0 ? 0n : this.size(s.call.range[0]!));
        w.push(BigInt(grainOf(s)));
        return;
      }
      case "copy":
      case "bitcast": {
        const from = c.buffers[s.from]!;
        const to = c.buffers[s.to]!;
        // f16 and bf16 are stored as float values, not as their bits: no byte copy bitcasts.
        const half = (t: string) => t === "f16" || t === "bf16";
        if (s.kind === "bitcast" && (half(from.type) || half(to.type))) {
          throw new UnsupportedError("native", `bitcast-convert ${from.type} -> ${to.type}`,
            to.name, "bitcast-convert");
        }
        w.push(BigInt(OP.copy), BigInt(s.from), BigInt(s.to), BigInt(from.bytes));
        return;
      }
      case "dot":
        this.dot(s, w, table);
        return;
      case "conv":
        this.conv(s, w);
        return;
      case "sort": {
        // A generated kernel (render_c.ts renderSortKernel) over the rows being sorted.
        const rows = s.dims.reduce((a, b) => a * b, 1) / s.dims[s.dim]!;
        w.push(BigInt(OP.kernel), BigInt(this.kernelIndex(s)));
        w.push(...countedList([...s.outs, ...s.ins]), 0n, 1n, BigInt(rows), 1n);
        return;
      }
      case "call":
        w.push(BigInt(OP.call), BigInt(s.comp));
        w.push(...countedList(s.args.flatMap(flat)), ...countedList(s.results));
        return;
      case "while": {
        const init = flat(s.init);
        const bytes = s.results.map((b) => BigInt(c.buffers[b]!.bytes));
        w.push(BigInt(OP.while), BigInt(s.cond), BigInt(s.body), BigInt(init.length));
        w.push(...init.map(BigInt), ...s.results.map(BigInt), ...s.scratch.map(BigInt));
        w.push(BigInt(s.flag), ...bytes);
        return;
      }
      case "conditional": {
        w.push(BigInt(OP.cond), BigInt(s.selector), s.predicate ? 1n : 0n);
        w.push(BigInt(s.branches.length));
        s.branches.forEach((b, i) => {
          w.push(BigInt(b), ...countedList(flat(s.args[i]!)));
        });
        w.push(...countedList(s.results));
        return;
      }
      default: {
        const never: never = s;
        throw new Error(`unknown step ${String(never)}`);
      }
    }
  }

  private dot(s: DotStep, w: bigint[], table: (t: readonly number[] | undefined) => bigint):
    void {
    if (!elementInfo(s.type).float) {
      throw new UnsupportedError("native", `a ${s.type} dot has no native kernel yet`, s.name,
        "dot");
    }
    const g = canonicalDot(s.lhsDims, s.rhsDims, s.dn, s.lhsStrides, s.rhsStrides);
    w.push(BigInt(OP.gemm), BigInt(s.lhs), BigInt(s.rhs), BigInt(s.out));
    w.push(BigInt(g.batch), BigInt(g.M), BigInt(g.N), BigInt(g.K));
    for (const a of [g.aB, g.aM, g.aK, g.bB, g.bK, g.bN]) {
      const t = table(a.table);
      w.push(t, BigInt(a.stride));
    }
    w.push(
      s.mLimit ? this.size(s.mLimit) : BigInt(g.M),
      s.nLimit ? this.size(s.nLimit) : BigInt(g.N),
      s.kLimit ? this.size(s.kLimit) : BigInt(g.K),
    );
    const e = s.epilogue;
    if (e && e.perTile) {
      w.push(BigInt(this.kernelIndex(e.call.kernel)));
      this.args(e.call, e.args, w);
    } else {
      w.push(-1n);
    }
  }

  private conv(s: ConvStep, w: bigint[]): void {
    if (!elementInfo(s.type).float || s.batchGroupCount !== 1) {
      throw new UnsupportedError("native", `this convolution (${s.type}, batch groups ` +
        `${s.batchGroupCount}) has no native kernel yet`, s.name, "convolution");
    }
    const dn = s.convDims;
    const ns = dn.inputSpatial.length;
    if (ns > 3) {
      throw new UnsupportedError("native", `a convolution over ${ns} spatial dims`, s.name,
        "convolution");
    }
    const ls = s.lhsStrides;
    const rs = s.rhsStrides;
    const os = stridesOf(s.outDims);
    const G = s.featureGroupCount;
    w.push(BigInt(OP.conv), BigInt(s.lhs), BigInt(s.rhs), BigInt(s.out), BigInt(ns));
    w.push(
      BigInt(s.outDims[dn.outputBatch]!),
      BigInt(s.lhsDims[dn.inputFeature]!),
      BigInt(s.rhsDims[dn.kernelOutputFeature]!),
      BigInt(G),
      BigInt(ls[dn.inputBatch]!),
      BigInt(ls[dn.inputFeature]!),
      BigInt(rs[dn.kernelOutputFeature]!),
      BigInt(rs[dn.kernelInputFeature]!),
      BigInt(os[dn.outputBatch]!),
      BigInt(os[dn.outputFeature]!),
    );
    for (let d = 0; d < 3; d++) {
      if (d >= ns) {
        w.push(0n, 1n, 0n, 1n, 0n, 1n, 1n, 0n, 1n, 1n, 0n);
        continue;
      }
      const win = s.window[d]!;
      w.push(
        BigInt(ls[dn.inputSpatial[d]!]!),
        BigInt(s.lhsDims[dn.inputSpatial[d]!]!),
        BigInt(rs[dn.kernelSpatial[d]!]!),
        BigInt(win.size),
        BigInt(os[dn.outputSpatial[d]!]!),
        BigInt(s.outDims[dn.outputSpatial[d]!]!),
        BigInt(win.stride),
        BigInt(win.padLow),
        BigInt(win.baseDilation),
        BigInt(win.windowDilation),
        win.windowReversal ? 1n : 0n,
      );
    }
    const e = s.epilogue;
    if (e && e.perTile) {
      const cols = s.outDims.slice(1).reduce((a, b) => a * b, 1);
      w.push(BigInt(this.kernelIndex(e.call.kernel)), BigInt(cols));
      this.args(e.call, e.args, w);
    } else {
      w.push(-1n, 0n);
    }
  }
}

function describeStep(s: Step): string {
  switch (s.kind) {
    case "kernel":
      return s.call.kernel.comment;
    case "dot":
    case "conv":
      return `${s.kind} %${s.name}${s.epilogue ? " (+epilogue)" : ""}`;
    case "sort":
      return `sort %${s.name}`;
    default:
      return s.kind;
  }
}

function countedList(xs: readonly number[]): bigint[] {
  return [BigInt(xs.length), ...xs.map(BigInt)];
}


/**
 * Iterations of a kernel's range per parallel task: enough that a task does about 16K
 * element operations (the pool's dispatch costs microseconds).
 */
function grainOf(s: Extract<Step, { kind: "kernel" }>): number {
  const range = s.call.range[0];
  const work = workPerRow(s);
  if (!range || range.op !== "const" || work <= 0) return 1;
  return Math.max(1, Math.ceil(16384 / work));
}

/** Elements each iteration of the range writes (the product of the inner loops' constant bounds). */
function workPerRow(s: Extract<Step, { kind: "kernel" }>): number {
  let work = 1;
  const visit = (stmts: readonly import("../kernel/kir.ts").Stmt[], inRange: boolean): void => {
    for (const st of stmts) {
      if (st.k === "loop") {
        const n = st.hi.op === "const" && st.lo.op === "const" ? st.hi.v - st.lo.v : 64;
        if (st.range === undefined && inRange) work *= Math.max(1, n);
        visit(st.body, inRange || st.range !== undefined);
        return;
      }
    }
  };
  visit(s.call.kernel.body, false);
  return work;
}

/** Encodes a program; `kernelIndex` gives each kernel's position in the function table. */
export function encodeProgram(program: Program, kernelIndex: KernelIndex): EncodedProgram {
  return new Encoder(program, kernelIndex).encode();
}
