// The `wasm` backend: the kernel layer rendered as WebAssembly. A module is lowered to its step
// list (runtime/kernel/program.ts); every distinct kernel becomes one wasm function
// (render_wasm.ts), all of a program's kernels in ONE module compiled with
// `new WebAssembly.Module` (no toolchain: the encoder is ours, encode.ts). Each executable has
// one WebAssembly.Memory laid out once, at compile time, from the buffer plan:
//
//   [constants | entry parameters | entry results | the arena | dot packing scratch]
//
// so the memory is never grown after its views are made (no stale views). The step list is run
// from JavaScript: a run copies the parameters in at their offsets, calls the kernels through
// the instance (buffer arguments are byte addresses), and copies the results out. f32 dots run
// the generated SIMD GEMM (gemm.ts: packed panels, a register-blocked 4x8 micro-kernel);
// the other library steps — other dots, convolutions, bitcasts, sorts — run the js backend's
// library kernels (or, for a sort, its comparator's spelling) on typed-array views of the same
// memory. The `tolerance` tier (runtime/tiers.ts): transcendental functions are polynomials,
// the GEMM sums in f32. Bounded dynamic dims: one static program per set of argument dims.
//
// What it cannot run (an element type no kernel computes in, a set-dimension-size computed at
// run time) runs on `js` instead, said under KILN_LOGS=backend — never an error, never a wrong
// result. Registered below js for now.

import type { EvalValue } from "../../ir/evaluate.ts";
import { elementInfo } from "../../ir/element_types.ts";
import { conformanceProblem } from "../../ir/evaluate_support.ts";
import { type Literal, type LiteralData, roundToBF16, roundToF16 } from "../../ir/literal.ts";
import type { Module } from "../../ir/module.ts";
import { isDynamic, shapeToString } from "../../ir/shape.ts";
import { verifyModule } from "../../ir/verify.ts";
import { log } from "../../util/log.ts";
import {
  type Backend,
  type Executable,
  registerBackend,
  UnsupportedError,
} from "../backend.ts";
import type { Ix } from "../kernel/kir.ts";
import { allocResults, leafData, resultValue } from "../kernel/io.ts";
import {
  type ConvStep,
  type DotStep,
  lowerProgram,
  type Program,
  type ProgramComputation,
  type Step,
  type Value,
} from "../kernel/program.ts";
import { type Expr, scheduleKernel } from "../kernel/schedule.ts";
import {
  shapesKey,
  specializeModule,
  valueShape as shapeOfValue,
} from "../kernel/specialize.ts";
import { children, isIx, type Node } from "../kernel/kir.ts";
import { ExtTable } from "../js/emitter.ts";
import { JsKernelRenderer } from "../js/render_kernel.ts";
import { jsBackend } from "../js/backend.ts";
import { conv, planConv } from "../js/kernels_conv.ts";
import { dotFloat, dotInt, type DotPlan, planDot } from "../js/kernels_dot.ts";
import { bitcastArray } from "../js/runtime_lib.ts";
import { simdSupported } from "./encode.ts";
import { addGemm, gemmScratchBytes, runGemm } from "./gemm.ts";
import { WasmProgramModule } from "./render_wasm.ts";

/**
 * Test seams: `simd` false renders every loop scalar (to compare the two paths); `decline`
 * names an opcode the renderer then refuses (to exercise the fall back to js).
 */
export const wasmTesting: { simd: boolean; decline?: string } = { simd: true };

export interface WasmExecutable extends Executable {
  /** Why the module runs on js instead, when it does. */
  readonly fallback?: string;
  /** Distinct kernel functions in the module, loops vectorized, and its size in bytes. */
  readonly stats?: { kernels: number; vectorizedLoops: number; bytes: number };
}

const ALIGN = 64;
const PAGE = 65536;
/** Byte addresses are kept in Int32Arrays and passed as i32: at most 2 GiB (less a page). */
const MAX_MEMORY_BYTES = 2 ** 31 - PAGE;

const align = (n: number) => Math.ceil(n / ALIGN) * ALIGN;

function flat(v: Value): number[] {
  return typeof v === "number" ? [v] : v.flatMap(flat);
}

function fallbackTo(module: Module, why: string): WasmExecutable {
  log("backend", `wasm: module '${module.name}' runs on js: ${why}`);
  const exe = jsBackend.compile(module);
  return {
    backend: "wasm",
    get module() {
      return exe.module;
    },
    fallback: why,
    run: (inputs) => exe.run(inputs),
  };
}

/** A kernel function of the module with its call's size and range expressions. */
type Callable = (...args: number[]) => void;

/** What one run of a computation sees: its buffers' byte addresses, the memory's views. */
interface Frame {
  readonly addr: Int32Array;
}

type StepFn = (f: Frame) => void;

interface Mem {
  readonly memory: WebAssembly.Memory;
  readonly exports: Record<string, Callable>;
  u8: Uint8Array;
  i32: Int32Array;
}

class Linker {
  /** Byte offset of each region (constants, parameters, results, arena, scratch). */
  private next = 0;
  readonly constants: { at: number; data: LiteralData }[] = [];
  private readonly constantAt = new Map<Literal, number>();
  readonly paramAt: number[] = [];
  readonly resultAt: number[] = [];
  arenaAt = 0;
  scratchAt = 0;
  scratchBytes = 0;
  readonly wasm: WasmProgramModule;
  /** Kernel export names, by the kernel object. */
  private readonly kernelName = new Map<object, string>();
  /** Set once instantiated: the live memory. */
  mem: Mem | undefined;
  private readonly comps: ((params: Int32Array, results: Int32Array) => void)[] = [];
  /** Per entry leaf: bytes. */
  readonly paramBytes: number[] = [];
  readonly resultBytes: number[] = [];

  constructor(readonly program: Program) {
    this.wasm = new WasmProgramModule(simdSupported() && wasmTesting.simd, wasmTesting.decline);
  }

  private take(bytes: number): number {
    const at = this.next;
    this.next = align(at + bytes);
    return at;
  }

  get totalBytes(): number {
    return this.next;
  }

  layout(): void {
    const p = this.program;
    for (const c of p.computations) {
      for (const b of c.buffers) {
        if (b.place.kind !== "constant" || this.constantAt.has(b.place.literal)) continue;
        const at = this.take(b.bytes);
        this.constantAt.set(b.place.literal, at);
        this.constants.push({ at, data: b.place.literal.data });
      }
    }
    const entry = p.computations[0]!;
    for (const v of entry.params) {
      for (const id of flat(v ?? [])) {
        const b = entry.buffers[id]!;
        this.paramAt.push(this.take(b.bytes));
        this.paramBytes.push(b.bytes);
      }
    }
    for (const id of entry.results) {
      const b = entry.buffers[id]!;
      this.resultAt.push(this.take(b.bytes));
      this.resultBytes.push(b.bytes);
    }
    this.arenaAt = this.take(p.arenaBytes);
    // Scratch for the GEMM's packed panels: the largest any f32 dot needs.
    for (const c of p.computations) {
      for (const s of c.steps) {
        if (s.kind === "dot" && s.type === "f32") {
          const plan = planDot(s.lhsDims, s.rhsDims, s.dn, s.lhsStrides, s.rhsStrides);
          this.scratchBytes = Math.max(this.scratchBytes, gemmScratchBytes(plan));
        }
      }
    }
    this.scratchAt = this.take(this.scratchBytes);
  }

  kernel(k: Parameters<typeof scheduleKernel>[0]): string {
    let n = this.kernelName.get(k);
    if (n === undefined) {
      n = this.wasm.add(scheduleKernel(k));
      this.kernelName.set(k, n);
    }
    return n;
  }

  /** Renders every kernel (throws UnsupportedError at the first wasm cannot compute). */
  renderKernels(): void {
    for (const c of this.program.computations) {
      for (const s of c.steps) {
        if (s.kind === "kernel") this.kernel(s.call.kernel);
        if ((s.kind === "dot" || s.kind === "conv") && s.epilogue) {
          this.kernel(s.epilogue.call.kernel);
        }
      }
    }
    if (this.scratchBytes > 0) addGemm(this.wasm.builder);
  }

  /** Builds the step closures of every computation. */
  link(): void {
    this.program.computations.forEach((c, i) => {
      this.comps[i] = this.computation(c);
    });
  }

  run(params: Int32Array, results: Int32Array): void {
    this.comps[0]!(params, results);
  }

  private computation(c: ProgramComputation): (p: Int32Array, r: Int32Array) => void {
    // Where each buffer's address comes from: fixed, a parameter leaf or a result slot.
    const fixed = new Int32Array(c.buffers.length).fill(-1);
    const fromParam = new Int32Array(c.buffers.length).fill(-1);
    const fromResult = new Int32Array(c.buffers.length).fill(-1);
    let leaf = 0;
    c.params.forEach((p) => {
      for (const b of flat(p ?? [])) {
        if (fromParam[b] === -1) fromParam[b] = leaf;
        leaf++;
      }
    });
    for (const b of c.buffers) {
      switch (b.place.kind) {
        case "param":
          break;
        case "result":
          fromResult[b.id] = b.place.index;
          break;
        case "constant":
          fixed[b.id] = this.constantAt.get(b.place.literal)!;
          break;
        case "arena":
          fixed[b.id] = this.arenaAt + c.arenaBase + b.place.offset;
          break;
        default: {
          const never: never = b.place;
          throw new Error(`unknown place ${String(never)}`);
        }
      }
    }
    const steps = c.steps.map((s) => this.step(s, c));
    const n = c.buffers.length;
    return (params, results) => {
      const addr = new Int32Array(n);
      for (let b = 0; b < n; b++) {
        addr[b] = fixed[b] !== -1 ? fixed[b]! : fromParam[b] !== -1 ? params[fromParam[b]!]!
          : fromResult[b] !== -1 ? results[fromResult[b]!]! : 0;
      }
      const frame: Frame = { addr };
      for (const s of steps) s(frame);
    };
  }

  private mem_(): Mem {
    const m = this.mem;
    if (!m) throw new Error("wasm: the executable is not instantiated");
    return m;
  }

  /** A program-level index expression (`size(p)`: the s32 value of ENTRY parameter p). */
  private ix(x: Ix): (f: Frame) => number {
    switch (x.op) {
      case "const": {
        const v = x.v;
        return () => v;
      }
      case "size": {
        const at = this.paramAt[this.entryLeaf(x.id)]!;
        return () => this.mem_().i32[at >> 2]!;
      }
      case "sum": {
        const ts = x.terms.map((t) => ({ f: this.ix(t.atom), c: t.coef }));
        const k = x.k;
        return (f) => ts.reduce((s, t) => s + t.c * t.f(f), k);
      }
      case "prod": {
        const fs = x.factors.map((a) => this.ix(a));
        return (f) => fs.reduce((s, g) => s * g(f), 1);
      }
      case "min":
      case "max": {
        const a = this.ix(x.a);
        const b = this.ix(x.b);
        return x.op === "min" ? (f) => Math.min(a(f), b(f)) : (f) => Math.max(a(f), b(f));
      }
      case "floordiv": {
        const a = this.ix(x.a);
        const b = this.ix(x.b);
        return (f) => Math.floor(a(f) / b(f));
      }
      case "mod": {
        const a = this.ix(x.a);
        const b = this.ix(x.b);
        return (f) => a(f) % b(f);
      }
      case "var":
      case "value":
        throw new Error(`a ${x.op} in a program-level index`);
      default: {
        const never: never = x;
        throw new Error(`unknown index ${String(never)}`);
      }
    }
  }

  private entryLeaf(param: number): number {
    const entry = this.program.computations[0]!;
    let leaf = 0;
    for (let p = 0; p < param; p++) leaf += flat(entry.params[p] ?? []).length;
    return leaf;
  }

  /** A kernel call: buffers' addresses, sizes, then each range as 0..extent (or `range`). */
  private call(
    call: { kernel: Parameters<typeof scheduleKernel>[0]; sizes: readonly Ix[];
      range: readonly Ix[] },
    args: readonly number[],
  ): (f: Frame, range?: readonly number[]) => void {
    const name = this.kernel(call.kernel);
    const sizes = call.sizes.map((s) => this.ix(s));
    const ranges = call.range.map((r) => this.ix(r));
    const a = [...args];
    return (f, range) => {
      const fn = this.mem_().exports[name]!;
      const xs: number[] = a.map((b) => f.addr[b]!);
      for (const s of sizes) xs.push(s(f));
      if (range) xs.push(...range);
      else for (const r of ranges) xs.push(0, r(f));
      fn(...xs);
    };
  }

  private view(f: Frame, c: ProgramComputation, id: number): LiteralData {
    const b = c.buffers[id]!;
    const info = elementInfo(b.type);
    const ctor = globalThis[info.storage] as unknown as new (
      buf: ArrayBuffer, at: number, n: number) => LiteralData;
    return new ctor(this.mem_().memory.buffer, f.addr[id]!, b.elements);
  }

  private step(s: Step, c: ProgramComputation): StepFn {
    switch (s.kind) {
      case "kernel": {
        const k = this.call(s.call, s.args);
        return (f) => k(f);
      }
      case "copy": {
        if (s.from === s.to) return () => {};
        const bytes = c.buffers[s.to]!.bytes;
        return (f) => {
          const at = f.addr[s.from]!;
          this.mem_().u8.copyWithin(f.addr[s.to]!, at, at + bytes);
        };
      }
      case "bitcast": {
        const from = c.buffers[s.from]!.type;
        const to = c.buffers[s.to]!.type;
        return (f) => {
          (this.view(f, c, s.to) as Uint8Array).set(
            bitcastArray(this.view(f, c, s.from), from, to) as Uint8Array);
        };
      }
      case "dot":
        return this.dot(s, c);
      case "conv":
        return this.conv(s, c);
      case "sort":
        return this.sort(s, c);
      case "call": {
        const args = s.args.flatMap(flat);
        const res = s.results;
        return (f) => {
          const p = Int32Array.from(args, (b) => f.addr[b]!);
          const r = Int32Array.from(res, (b) => f.addr[b]!);
          this.comps[s.comp]!(p, r);
        };
      }
      case "while": {
        const init = flat(s.init);
        const bytes = s.results.map((b) => c.buffers[b]!.bytes);
        return (f) => {
          const A = Int32Array.from(s.results, (b) => f.addr[b]!);
          const B = Int32Array.from(s.scratch, (b) => f.addr[b]!);
          const flag = Int32Array.of(f.addr[s.flag]!);
          let st = Int32Array.from(init, (b) => f.addr[b]!);
          let w = 0;
          for (;;) {
            this.comps[s.cond]!(st, flag);
            if (this.mem_().u8[flag[0]!] === 0) break;
            const d = (w & 1) === 0 ? A : B;
            this.comps[s.body]!(st, d);
            st = d;
            w++;
          }
          if (st !== A) {
            const u8 = this.mem_().u8;
            for (let j = 0; j < A.length; j++) u8.copyWithin(A[j]!, st[j]!, st[j]! + bytes[j]!);
          }
        };
      }
      case "conditional": {
        const n = s.branches.length;
        const selType = c.buffers[s.selector]!.type;
        const args = s.args.map(flat);
        return (f) => {
          const m = this.mem_();
          const at = f.addr[s.selector]!;
          let br: number;
          if (s.predicate) br = m.u8[at] !== 0 ? 0 : 1;
          else {
            const v = selType === "s32" ? m.i32[at >> 2]! : m.u8[at]!;
            br = v < 0 || v >= n ? n - 1 : v;
          }
          const p = Int32Array.from(args[br]!, (b) => f.addr[b]!);
          const r = Int32Array.from(s.results, (b) => f.addr[b]!);
          this.comps[s.branches[br]!]!(p, r);
        };
      }
      default: {
        const never: never = s;
        throw new Error(`unknown step ${String(never)}`);
      }
    }
  }

  /**
   * A stable merge sort along one dim of every operand by the comparator, on views of the
   * memory (as the js backend sorts: a permutation per row, then every output gathered).
   */
  private sort(s: Extract<Step, { kind: "sort" }>, c: ProgramComputation): StepFn {
    const less = comparatorFn(s);
    const dims = s.dims;
    const len = dims[s.dim]!;
    let stride = 1;
    for (let k = dims.length - 1; k > s.dim; k--) stride *= dims[k]!;
    const outer = len === 0 ? 0 : dims.reduce((a, b) => a * b, 1) / len;
    const n = s.ins.length;
    return (f) => {
      const ins = s.ins.map((b) => this.view(f, c, b) as Float32Array);
      const outs = s.outs.map((b) => this.view(f, c, b) as Float32Array);
      const perm = new Int32Array(len);
      const tmp = new Int32Array(len);
      const args: unknown[] = new Array(2 * n);
      let base = 0;
      const lt = (x: number, y: number): boolean => {
        for (let i = 0; i < n; i++) {
          args[2 * i] = ins[i]![base + x * stride];
          args[2 * i + 1] = ins[i]![base + y * stride];
        }
        return less(...args);
      };
      const msort = (lo: number, hi: number): void => {
        if (hi - lo < 2) return;
        const mid = lo + ((hi - lo) >> 1);
        msort(lo, mid);
        msort(mid, hi);
        for (let t = lo; t < hi; t++) tmp[t] = perm[t]!;
        let i = lo;
        let j = mid;
        let w = lo;
        while (i < mid && j < hi) perm[w++] = lt(tmp[j]!, tmp[i]!) ? tmp[j++]! : tmp[i++]!;
        while (i < mid) perm[w++] = tmp[i++]!;
        while (j < hi) perm[w++] = tmp[j++]!;
      };
      // Sorted values are gathered per row before any output is written (an output may share
      // its memory with an input: in-place).
      const rows = outs.map((o) => new (o.constructor as Float32ArrayConstructor)(len));
      for (let o = 0; o < outer; o++) {
        base = (o % stride) + Math.floor(o / stride) * stride * len;
        for (let p = 0; p < len; p++) perm[p] = p;
        msort(0, len);
        for (let k = 0; k < outs.length; k++) {
          const r = rows[k]!;
          for (let p = 0; p < len; p++) r[p] = ins[k]![base + perm[p]! * stride]!;
          for (let p = 0; p < len; p++) outs[k]![base + p * stride] = r[p]!;
        }
      }
    };
  }

  private epilogue(s: DotStep | ConvStep, cols: (f: Frame) => number):
    ((f: Frame) => ((lo: number, hi: number) => void) | null) {
    const e = s.epilogue;
    if (!e?.perTile) return () => null;
    const k = this.call(e.call, e.args);
    return (f) => {
      const n = cols(f);
      return (lo, hi) => k(f, [lo, hi, 0, n]);
    };
  }

  private after(s: DotStep | ConvStep): StepFn {
    const e = s.epilogue;
    if (!e || e.perTile) return () => {};
    const k = this.call(e.call, e.args);
    return (f) => k(f);
  }

  private dot(s: DotStep, c: ProgramComputation): StepFn {
    const plan = planDot(s.lhsDims, s.rhsDims, s.dn, s.lhsStrides, s.rhsStrides);
    const after = this.after(s);
    const m = s.mLimit ? this.ix(s.mLimit) : () => plan.M;
    const n = s.nLimit ? this.ix(s.nLimit) : () => plan.N;
    const k = s.kLimit ? this.ix(s.kLimit) : () => plan.K;
    const epi = this.epilogue(s, n);
    if (s.type === "f16" || s.type === "bf16") {
      // Half types: the js kernel on views (their values live in f32 storage), rounded.
      const round = s.type === "f16" ? roundToF16 : roundToBF16;
      return (f) => {
        const v = (id: number) => this.view(f, c, id) as Float32Array;
        dotFloat(v(s.lhs), v(s.rhs), v(s.out), plan, round, epi(f), m(f), n(f), k(f));
        after(f);
      };
    }
    if (s.type !== "f32") {
      return (f) => {
        dotInt(s.type, this.view(f, c, s.lhs) as Int32Array, this.view(f, c, s.rhs) as Int32Array,
          this.view(f, c, s.out) as Int32Array, plan);
        after(f);
      };
    }
    return (f) => {
      runGemm(this.mem_(), plan, f.addr[s.lhs]!, f.addr[s.rhs]!, f.addr[s.out]!,
        this.scratchAt, epi(f), m(f), n(f), k(f));
      after(f);
    };
  }

  private conv(s: ConvStep, c: ProgramComputation): StepFn {
    const plan = planConv(s.lhsDims, s.rhsDims, s.outDims, s.convDims, s.window,
      s.featureGroupCount, s.batchGroupCount, s.lhsStrides, s.rhsStrides);
    const cols = s.outDims.slice(1).reduce((a, b) => a * b, 1);
    const epi = this.epilogue(s, () => cols);
    const after = this.after(s);
    const round = s.type === "f16" ? roundToF16 : s.type === "bf16" ? roundToBF16 : null;
    return (f) => {
      // f32 needs no rounder (the store rounds); half types round each sum.
      const v = (id: number) => this.view(f, c, id) as Float32Array;
      conv(s.type, v(s.lhs), v(s.rhs), v(s.out), plan, round, epi(f));
      after(f);
    };
  }
}

/** A node as an expression tree with nothing bound (a comparator, rendered inline). */
function inlineExpr(n: Node): Expr {
  if (isIx(n) && n.op === "sum") {
    const terms = n.terms.map((t) => ({ x: inlineExpr(t.atom), coef: t.coef }));
    return { e: "lin", k: n.k, terms };
  }
  return { e: "node", node: n, args: children(n).map(inlineExpr) };
}

/**
 * A sort's comparator as a JavaScript function `less(a0, a1, ..)` (accumulator 2i is operand
 * i's left value, 2i+1 its right): the js renderer's spelling, so the order is exactly js's.
 */
function comparatorFn(s: Extract<Step, { kind: "sort" }>): (...xs: unknown[]) => boolean {
  const ext = new ExtTable();
  const body = new JsKernelRenderer(ext).expr(inlineExpr(s.comparator.less));
  const params = Array.from({ length: 2 * s.ins.length }, (_, j) => `a${j}`);
  const src = [...ext.declarations(), `return function less(${params.join(", ")}) {`,
    `  return ${body} !== 0;`, `};`].join("\n");
  return new Function("ext", src)(ext.values) as (...xs: unknown[]) => boolean;
}

/** The dot plan type is part of the GEMM's interface. */
export type { DotPlan };

function instantiateMem(linker: Linker, module: WebAssembly.Module): Mem {
  const pages = Math.max(1, Math.ceil(linker.totalBytes / PAGE));
  let memory: WebAssembly.Memory;
  try {
    memory = new WebAssembly.Memory({ initial: pages });
  } catch (e) {
    throw new Error(
      `wasm: cannot allocate the ${linker.totalBytes}-byte memory of ` +
        `'${linker.program.module.name}': ${(e as Error).message}`,
      { cause: e },
    );
  }
  const inst = new WebAssembly.Instance(module, { env: { memory } });
  const u8 = new Uint8Array(memory.buffer);
  for (const c of linker.constants) {
    const d = c.data as Uint8Array;
    u8.set(new Uint8Array(d.buffer, d.byteOffset, d.byteLength), c.at);
  }
  return {
    memory,
    exports: inst.exports as unknown as Record<string, Callable>,
    u8,
    i32: new Int32Array(memory.buffer),
  };
}

/** Most specializations kept per dynamic module (the oldest is dropped past it), as js. */
const MAX_SPECIALIZATIONS = 32;

/**
 * A module with bounded dynamic dims: one static program per distinct set of argument dims
 * (runtime/kernel/specialize.ts), as the js backend does; a specialization wasm declines runs
 * on js.
 */
function compileDynamic(module: Module): WasmExecutable {
  const params = module.entry.parameters;
  const cache = new Map<string, WasmExecutable>();
  return {
    backend: "wasm",
    module,
    run(inputs: readonly EvalValue[]): EvalValue {
      if (inputs.length !== params.length) {
        throw new Error(
          `wasm: module '${module.name}' takes ${params.length} argument(s), got ${inputs.length}`,
        );
      }
      params.forEach((p, i) => {
        const problem = conformanceProblem(inputs[i]!, p.shape);
        if (problem !== null) {
          throw new Error(`wasm: argument ${i} does not conform to ` +
            `${shapeToString(p.shape, false)}: ${problem}`);
        }
      });
      const shapes = inputs.map(shapeOfValue);
      const key = shapesKey(shapes);
      let exe = cache.get(key);
      if (!exe) {
        exe = compileStatic(specializeModule(module, shapes, "wasm"));
        if (cache.size >= MAX_SPECIALIZATIONS) cache.delete(cache.keys().next().value!);
        cache.set(key, exe);
        log("perf", () => `wasm: '${module.name}' specialized for (${key})`);
      }
      return exe.run(inputs);
    },
  };
}

function compileWasm(module: Module): WasmExecutable {
  verifyModule(module);
  let dynamic = false;
  for (const c of module.computations) {
    for (const i of c.instructions) {
      if (i.opcode === "set-dimension-size") {
        const size = i.operand(1).opcode;
        if (size !== "constant" && size !== "get-dimension-size") {
          return fallbackTo(module, `%${i.name} sets a size computed at run time`);
        }
      }
      if (isDynamic(i.shape)) dynamic = true;
    }
  }
  return dynamic ? compileDynamic(module) : compileStatic(module);
}

function compileStatic(module: Module): WasmExecutable {
  const t0 = performance.now();
  let linker: Linker;
  try {
    const program = lowerProgram(module, { backend: "wasm" });
    linker = new Linker(program);
    linker.layout();
    if (linker.totalBytes > MAX_MEMORY_BYTES) {
      throw new UnsupportedError("wasm", `its memory would be ${linker.totalBytes} bytes ` +
        `(constants, parameters, results and intermediates); wasm runs up to ${MAX_MEMORY_BYTES}`);
    }
    linker.renderKernels();
    linker.link();
  } catch (e) {
    if (e instanceof UnsupportedError) return fallbackTo(module, e.message);
    throw e;
  }
  const bytes = linker.wasm.encode();
  const t1 = performance.now();
  const wmod = new WebAssembly.Module(bytes);
  const t2 = performance.now();
  linker.mem = instantiateMem(linker, wmod);
  log("perf", () => `wasm: compiled '${module.name}': ${linker.wasm.kernels} kernel(s), ` +
    `${bytes.length} bytes; lower+render ${(t1 - t0).toFixed(1)} ms, ` +
    `WebAssembly.Module ${(t2 - t1).toFixed(1)} ms`);
  const params = module.entry.parameters.map((p) => p.shape);
  const root = module.entry.root.shape;
  const paramAt = Int32Array.from(linker.paramAt);
  const resultAt = Int32Array.from(linker.resultAt);
  let busy = false;
  const runLeaves = (args: readonly LiteralData[]): LiteralData[] => {
    if (busy) throw new Error(`wasm: a nested run of '${module.name}' (not reentrant)`);
    busy = true;
    try {
      const m = linker.mem!;
      // The memory is never grown; were it ever, the cached views would be refreshed here.
      if (m.u8.buffer !== m.memory.buffer) {
        m.u8 = new Uint8Array(m.memory.buffer);
        m.i32 = new Int32Array(m.memory.buffer);
      }
      args.forEach((d, i) => {
        m.u8.set(new Uint8Array(d.buffer, d.byteOffset, linker.paramBytes[i]!), paramAt[i]!);
      });
      linker.run(paramAt, resultAt);
      const results: LiteralData[] = [];
      allocResults(root, results);
      results.forEach((r, i) => {
        const at = resultAt[i]!;
        new Uint8Array(r.buffer, r.byteOffset, r.byteLength).set(
          m.u8.subarray(at, at + linker.resultBytes[i]!));
      });
      return results;
    } finally {
      busy = false;
    }
  };
  return {
    backend: "wasm",
    module,
    stats: {
      kernels: linker.wasm.kernels,
      vectorizedLoops: linker.wasm.vectorizedLoops,
      bytes: bytes.length,
    },
    run(inputs: readonly EvalValue[]): EvalValue {
      if (inputs.length !== params.length) {
        throw new Error(
          `wasm: module '${module.name}' takes ${params.length} argument(s), got ${inputs.length}`,
        );
      }
      params.forEach((s, i) => {
        const problem = conformanceProblem(inputs[i]!, s);
        if (problem !== null) {
          throw new Error(`wasm: argument ${i} does not conform to ${shapeToString(s, false)}: ` +
            problem);
        }
      });
      const args: LiteralData[] = [];
      for (const v of inputs) leafData(v, args);
      return resultValue(root, runLeaves(args), { i: 0 });
    },
    runLeaves,
  };
}

let availableMemo: boolean | undefined;

/** Whether WebAssembly (with SIMD128 or without) is there; KILN_WASM=0 turns wasm off. */
function wasmAvailable(): boolean {
  if (availableMemo === undefined) {
    const v = (process.env["KILN_WASM"] ?? "").toLowerCase();
    const off = v === "0" || v === "off" || v === "false";
    availableMemo = !off && typeof WebAssembly === "object";
    if (!availableMemo) log("backend", "wasm: not available (KILN_WASM=0 or no WebAssembly)");
  }
  return availableMemo;
}

export const wasmBackend: Backend = {
  name: "wasm",
  priority: 5,
  tier: "tolerance",
  available: wasmAvailable,
  compile: compileWasm,
};

registerBackend(wasmBackend);
