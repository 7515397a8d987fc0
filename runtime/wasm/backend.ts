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
// result. Registered at priority 15: below native, above js, so it is the default where no C
// compiler works (KILN_NATIVE=0). The disk cache stores a program's module bytes and plan
// (payload.ts).

import type { EvalValue } from "../../ir/evaluate.ts";
import { elementInfo } from "../../ir/element_types.ts";
import { conformanceProblem } from "../../ir/evaluate_support.ts";
import { type Literal, type LiteralData, roundToBF16, roundToF16 } from "../../ir/literal.ts";
import type { Module } from "../../ir/module.ts";
import { type ElementType, isDynamic, type Shape, shapeToString } from "../../ir/shape.ts";
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
  type KernelStep,
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
import { relaxedSimdSupported, simdSupported } from "./encode.ts";
import { addGemm, gemmScratchBytes, type GemmEpilogue, type GemmThreads, runGemm } from "./gemm.ts";
import {
  decodeWasmPayload,
  encodeWasmMarker,
  encodeWasmStatic,
  type StoredProgram,
  WASM_CODEGEN_VERSION,
} from "./payload.ts";
import { WasmProgramModule } from "./render_wasm.ts";
import {
  MAX_WASM_PARTS,
  PARTS_PER_THREAD,
  parallelMinWork,
  poolFor,
  sharedMemoryProblem,
  type ThreadedExecutable,
  threadedExecutable,
  wasmThreads,
} from "./threads.ts";

/**
 * Test seams: `simd` false renders every loop scalar (to compare the two paths); `decline`
 * names an opcode the renderer then refuses (to exercise the fall back to js); `poison` fills
 * the results, the arena and the scratch with 0xFF bytes before every run (an element a run
 * leaves unwritten then shows as NaN or -1 instead of keeping the last run's value).
 */
export const wasmTesting: { simd: boolean; decline?: string; poison?: boolean } = { simd: true };

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
  const js = jsBackend.compile(module);
  const exe: WasmExecutable = {
    backend: "wasm",
    get module() {
      return js.module;
    },
    fallback: why,
    run: (inputs) => js.run(inputs),
  };
  stored.set(exe, { kind: "fallback", why });
  return exe;
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

// ---- The plan: what an executable runs, as plain data ----------------------------------------
//
// The step list with each kernel call naming its export, each buffer's place (a constant by its
// index in the plan's constant list), each sort's comparator by its index in the comparator
// sources, and the memory layout. Compiling makes one from the program (Planner); the disk
// cache stores it (runtime/wasm/payload.ts); the Linker runs it.

/**
 * A kernel call: its export, its sizes and range extents (program-level index expressions), and
 * the element operations one iteration of its first range does (what decides a split).
 */
interface PlanCall {
  readonly fn: string;
  readonly sizes: readonly Ix[];
  readonly range: readonly Ix[];
  readonly work: number;
}

interface PlanEpilogue {
  readonly call: PlanCall;
  readonly args: readonly number[];
  readonly perTile: boolean;
}

type PlanPlace =
  | { readonly kind: "param" }
  | { readonly kind: "constant"; readonly c: number }
  | { readonly kind: "arena"; readonly offset: number }
  | { readonly kind: "result"; readonly index: number };

interface PlanBuffer {
  readonly type: ElementType;
  readonly elements: number;
  readonly bytes: number;
  readonly place: PlanPlace;
}

type SortStep = Extract<Step, { kind: "sort" }>;
type PlanDot = Omit<DotStep, "epilogue"> & { readonly epilogue?: PlanEpilogue };
type PlanConv = Omit<ConvStep, "epilogue"> & { readonly epilogue?: PlanEpilogue };
type PlanSort = Omit<SortStep, "comparator"> & { readonly comparator: number };
type PlanStep =
  | { readonly kind: "kernel"; readonly call: PlanCall; readonly args: readonly number[] }
  | PlanDot
  | PlanConv
  | PlanSort
  | Exclude<Step, KernelStep | DotStep | ConvStep | SortStep>;

interface PlanComputation {
  readonly params: readonly Value[];
  readonly buffers: readonly PlanBuffer[];
  readonly steps: readonly PlanStep[];
  readonly arenaBase: number;
}

interface WasmPlan {
  readonly name: string;
  readonly comps: readonly PlanComputation[];
  /** Byte offset of each constant, parameter leaf, result leaf, the arena and the scratch. */
  readonly constantAt: readonly number[];
  readonly paramAt: readonly number[];
  readonly paramBytes: readonly number[];
  readonly resultAt: readonly number[];
  readonly resultBytes: readonly number[];
  readonly arenaAt: number;
  readonly scratchAt: number;
  readonly totalBytes: number;
  /** Each sort comparator as JavaScript source returning `less` (reading the `ext` table). */
  readonly comparators: readonly string[];
  readonly kernels: number;
  readonly vectorizedLoops: number;
}

/** Lays out a program's memory and renders its kernels into one wasm module: the plan. */
class Planner {
  private next = 0;
  private readonly constantIndex = new Map<Literal, number>();
  readonly constantAt: number[] = [];
  readonly constantData: LiteralData[] = [];
  readonly paramAt: number[] = [];
  readonly resultAt: number[] = [];
  readonly paramBytes: number[] = [];
  readonly resultBytes: number[] = [];
  arenaAt = 0;
  scratchAt = 0;
  scratchBytes = 0;
  readonly wasm: WasmProgramModule;
  /** Kernel export names, by the kernel object. */
  private readonly kernelName = new Map<object, string>();
  /** The table the comparators' source reads. */
  readonly ext = new ExtTable();
  private readonly comparators: string[] = [];

  constructor(readonly program: Program) {
    this.wasm = new WasmProgramModule(simdSupported() && wasmTesting.simd, wasmTesting.decline,
      sharedMemoryProblem() === undefined);
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
        if (b.place.kind !== "constant" || this.constantIndex.has(b.place.literal)) continue;
        this.constantIndex.set(b.place.literal, this.constantAt.length);
        this.constantAt.push(this.take(b.bytes));
        this.constantData.push(b.place.literal.data);
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

  /**
   * Renders every kernel (throws UnsupportedError at the first wasm cannot compute) and makes
   * the plan.
   */
  plan(): WasmPlan {
    const comps = this.program.computations.map((c) => this.computation(c));
    if (this.scratchBytes > 0) addGemm(this.wasm.builder);
    return {
      name: this.program.module.name,
      comps,
      constantAt: this.constantAt,
      paramAt: this.paramAt,
      paramBytes: this.paramBytes,
      resultAt: this.resultAt,
      resultBytes: this.resultBytes,
      arenaAt: this.arenaAt,
      scratchAt: this.scratchAt,
      totalBytes: this.totalBytes,
      comparators: this.comparators,
      kernels: this.wasm.kernels,
      vectorizedLoops: this.wasm.vectorizedLoops,
    };
  }

  private call(c: KernelStep["call"]): PlanCall {
    return { fn: this.kernel(c.kernel), sizes: c.sizes, range: c.range, work: workPerRow(c.kernel) };
  }

  private epilogue(e: DotStep["epilogue"]): PlanEpilogue | undefined {
    return e && { call: this.call(e.call), args: e.args, perTile: e.perTile };
  }

  private computation(c: ProgramComputation): PlanComputation {
    const buffers = c.buffers.map((b): PlanBuffer => {
      const base = { type: b.type, elements: b.elements, bytes: b.bytes };
      const pl = b.place;
      switch (pl.kind) {
        case "param":
          return { ...base, place: { kind: "param" } };
        case "constant":
          return { ...base, place: { kind: "constant", c: this.constantIndex.get(pl.literal)! } };
        case "arena":
          return { ...base, place: { kind: "arena", offset: pl.offset } };
        case "result":
          return { ...base, place: { kind: "result", index: pl.index } };
        default: {
          const never: never = pl;
          throw new Error(`unknown place ${String(never)}`);
        }
      }
    });
    const steps = c.steps.map((s): PlanStep => {
      switch (s.kind) {
        case "kernel":
          return { kind: "kernel", call: this.call(s.call), args: s.args };
        case "dot":
        case "conv": {
          const { epilogue, ...rest } = s;
          const e = this.epilogue(epilogue);
          return e ? { ...rest, epilogue: e } : rest;
        }
        case "sort": {
          const { comparator, ...rest } = s;
          this.comparators.push(comparatorSource(s, this.ext));
          return { ...rest, comparator: this.comparators.length - 1 };
        }
        default:
          return s;
      }
    });
    return { params: c.params, buffers, steps, arenaBase: c.arenaBase };
  }
}

/**
 * Element operations one iteration of a kernel's first range does: the product of the
 * constant bounds of the loops inside it (64 for one that is not constant), as native's grain.
 */
function workPerRow(k: Parameters<typeof scheduleKernel>[0]): number {
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
  visit(k.body, false);
  return work;
}

/** Ints a worker's row holds for one call besides its args (threads.ts: ROW_INTS 128). */
const MAX_PARALLEL_ARGS = 100;

/** Splits `n` items into `parts` contiguous shares: the start of share t. */
const share = (n: number, parts: number, t: number) => Math.floor((n * t) / parts);

/** Runs a plan over one instance of its module (the step closures, built once). */
class Linker {
  /** Set once instantiated: the live memory. */
  mem: Mem | undefined;
  /** The compiled module (what workers instantiate). */
  wmod: WebAssembly.Module | undefined;
  /** Threads of the current run (wasmThreads() at its start). */
  threads = 1;
  private team: ThreadedExecutable | undefined;
  private readonly fnIndex = new Map<string, number>();
  private readonly comps: ((params: Int32Array, results: Int32Array) => void)[] = [];
  private readonly less: ((...xs: unknown[]) => boolean)[];

  constructor(
    readonly plan: WasmPlan,
    /** The constants' data, in plan order. */
    readonly constants: readonly LiteralData[],
    ext: readonly unknown[],
  ) {
    if (constants.length !== plan.constantAt.length) {
      throw new Error(`wasm: the plan has ${plan.constantAt.length} constants, ` +
        `${constants.length} given`);
    }
    this.less = plan.comparators.map(
      (src) => new Function("ext", src)(ext) as (...xs: unknown[]) => boolean);
  }

  /** Builds the step closures of every computation. */
  link(): void {
    this.plan.comps.forEach((c, i) => {
      this.comps[i] = this.computation(c);
    });
  }

  run(params: Int32Array, results: Int32Array): void {
    this.comps[0]!(params, results);
  }

  private computation(c: PlanComputation): (p: Int32Array, r: Int32Array) => void {
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
    c.buffers.forEach((b, id) => {
      switch (b.place.kind) {
        case "param":
          break;
        case "result":
          fromResult[id] = b.place.index;
          break;
        case "constant":
          fixed[id] = this.at(this.plan.constantAt, b.place.c, "constant");
          break;
        case "arena":
          fixed[id] = this.plan.arenaAt + c.arenaBase + b.place.offset;
          break;
        default: {
          const never: never = b.place;
          throw new Error(`wasm: unknown buffer place ${JSON.stringify(never)}`);
        }
      }
    });
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

  /** Entry `i` of a layout list, or an error naming a plan that does not fit. */
  private at(list: readonly number[], i: number, what: string): number {
    const v = list[i];
    if (v === undefined) throw new Error(`wasm: the plan has no ${what} ${i}`);
    return v;
  }

  /** The function index of export `name` (the order workers number them in). */
  private index(name: string): number {
    let i = this.fnIndex.get(name);
    if (i === undefined) {
      const exps = WebAssembly.Module.exports(this.wmod!).filter((e) => e.kind === "function");
      exps.forEach((e, j) => this.fnIndex.set(e.name, j));
      i = this.fnIndex.get(name);
      if (i === undefined) throw new Error(`wasm: the module exports no function '${name}'`);
    }
    return i;
  }

  /**
   * One parallel step on `nt` threads: `build` adds each part's calls, taken by the pool's
   * workers and this thread, after `extra` here; where the pool cannot run (it failed to
   * start), `extra` and every part run here in turn, which computes the same.
   */
  private parStep(nt: number,
    build: (add: (t: number, fn: number, args: number[]) => void) => void,
    extra?: () => void): void {
    const m = this.mem_();
    if (!this.team) this.team = threadedExecutable(this.wmod!, m.memory, m.exports);
    const pool = poolFor(this.team, nt);
    if (!pool) {
      const fns = this.team.fns;
      extra?.();
      build((_t, fn, args) => fns[fn]!(...args));
      return;
    }
    pool.begin(nt);
    build((t, fn, args) => {
      if (!pool.call(t, fn, args)) throw new Error(`wasm threads: a call of ${args.length} args does not fit a row`);
    });
    pool.run(this.team, extra);
  }

  /** What a GEMM splits with, for this run (undefined: one thread). */
  private gemmThreads(): GemmThreads | undefined {
    if (this.threads < 2) return undefined;
    return {
      threads: this.threads,
      minWork: parallelMinWork(),
      index: (name) => this.index(name),
      step: (nt, build, extra) => this.parStep(nt, build, extra),
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
        const at = this.at(this.plan.paramAt, this.entryLeaf(x.id), "parameter");
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
        throw new Error(`wasm: unknown index expression ${JSON.stringify(never)}`);
      }
    }
  }

  private entryLeaf(param: number): number {
    const entry = this.plan.comps[0]!;
    let leaf = 0;
    for (let p = 0; p < param; p++) leaf += flat(entry.params[p] ?? []).length;
    return leaf;
  }

  /** A kernel call: buffers' addresses, sizes, then each range as 0..extent (or `range`). */
  private call(call: PlanCall, args: readonly number[]):
    (f: Frame, range?: readonly number[]) => void {
    const name = call.fn;
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

  private view(f: Frame, c: PlanComputation, id: number): LiteralData {
    const b = c.buffers[id]!;
    const info = elementInfo(b.type);
    const ctor = globalThis[info.storage] as unknown as new (
      buf: ArrayBuffer, at: number, n: number) => LiteralData;
    return new ctor(this.mem_().memory.buffer, f.addr[id]!, b.elements);
  }

  /** A kernel call's export and every argument, ranges 0..extent (for a split). */
  private callArgs(call: PlanCall, args: readonly number[]): (f: Frame) => number[] {
    const sizes = call.sizes.map((s) => this.ix(s));
    const ranges = call.range.map((r) => this.ix(r));
    const a = [...args];
    return (f) => {
      const xs: number[] = a.map((b) => f.addr[b]!);
      for (const s of sizes) xs.push(s(f));
      for (const r of ranges) xs.push(0, r(f));
      return xs;
    };
  }

  private step(s: PlanStep, c: PlanComputation): StepFn {
    switch (s.kind) {
      case "kernel": {
        const k = this.call(s.call, s.args);
        const nr = s.call.range.length;
        const nargs = s.args.length + s.call.sizes.length + 2 * nr;
        if (nr === 0 || nargs > MAX_PARALLEL_ARGS) return (f) => k(f);
        const argsOf = this.callArgs(s.call, s.args);
        const work = Math.max(1, s.call.work);
        const name = s.call.fn;
        const lo0 = nargs - 2 * nr;
        return (f) => {
          if (this.threads < 2) return k(f);
          const xs = argsOf(f);
          const ext = xs[lo0 + 1]!;
          const nt = Math.min(this.threads, ext, Math.floor((ext * work) / parallelMinWork()));
          if (nt < 2) {
            this.mem_().exports[name]!(...xs);
            return;
          }
          const fn = this.index(name);
          const parts = Math.min(ext, nt * PARTS_PER_THREAD, MAX_WASM_PARTS);
          this.parStep(nt, (add) => {
            for (let t = 0; t < parts; t++) {
              const row = xs.slice();
              row[lo0] = share(ext, parts, t);
              row[lo0 + 1] = share(ext, parts, t + 1);
              add(t, fn, row);
            }
          });
        };
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
        throw new Error(`wasm: unknown step ${JSON.stringify(never)}`);
      }
    }
  }

  /**
   * A stable merge sort along one dim of every operand by the comparator, on views of the
   * memory (as the js backend sorts: a permutation per row, then every output gathered).
   */
  private sort(s: PlanSort, c: PlanComputation): StepFn {
    const less = this.less[s.comparator];
    if (!less) throw new Error(`wasm: no comparator ${s.comparator}`);
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

  private epilogue(s: PlanDot | PlanConv, cols: (f: Frame) => number):
    ((f: Frame) => ((lo: number, hi: number) => void) | null) {
    const e = s.epilogue;
    if (!e?.perTile) return () => null;
    const k = this.call(e.call, e.args);
    return (f) => {
      const n = cols(f);
      return (lo, hi) => k(f, [lo, hi, 0, n]);
    };
  }

  /** A per-tile epilogue as an export and its args for rows lo..hi (the GEMM's form). */
  private gemmEpilogue(s: PlanDot, cols: (f: Frame) => number):
    ((f: Frame) => GemmEpilogue | null) {
    const e = s.epilogue;
    if (!e?.perTile) return () => null;
    const argsOf = this.callArgs(e.call, e.args);
    const fn = e.call.fn;
    return (f) => {
      const xs = argsOf(f);
      const n = cols(f);
      const base = xs.length - 4;
      return {
        fn,
        args: (lo, hi) => {
          const row = xs.slice();
          row[base] = lo;
          row[base + 1] = hi;
          row[base + 2] = 0;
          row[base + 3] = n;
          return row;
        },
      };
    };
  }

  private after(s: PlanDot | PlanConv): StepFn {
    const e = s.epilogue;
    if (!e || e.perTile) return () => {};
    const k = this.call(e.call, e.args);
    return (f) => k(f);
  }

  private dot(s: PlanDot, c: PlanComputation): StepFn {
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
    const gepi = this.gemmEpilogue(s, n);
    return (f) => {
      runGemm(this.mem_(), plan, f.addr[s.lhs]!, f.addr[s.rhs]!, f.addr[s.out]!,
        this.plan.scratchAt, gepi(f), m(f), n(f), k(f), this.gemmThreads());
      after(f);
    };
  }

  private conv(s: PlanConv, c: PlanComputation): StepFn {
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
 * A sort's comparator as the source of a JavaScript function returning `less(a0, a1, ..)`
 * (accumulator 2i is operand i's left value, 2i+1 its right), reading `ext` (listed in the
 * program's table): the js renderer's spelling, so the order is exactly js's.
 */
function comparatorSource(s: SortStep, ext: ExtTable): string {
  const body = new JsKernelRenderer(ext).expr(inlineExpr(s.comparator.less));
  const params = Array.from({ length: 2 * s.ins.length }, (_, j) => `a${j}`);
  return [...ext.declarations(), `return function less(${params.join(", ")}) {`,
    `  return ${body} !== 0;`, `};`].join("\n");
}

/** The dot plan type is part of the GEMM's interface. */
export type { DotPlan };

function instantiateMem(linker: Linker, module: WebAssembly.Module): Mem {
  const plan = linker.plan;
  const pages = Math.max(1, Math.ceil(plan.totalBytes / PAGE));
  let memory: WebAssembly.Memory;
  try {
    // Shared wherever the engine has shared memory (the module imports it so), whatever the
    // thread count: one module and one memory serve every count.
    memory = sharedMemoryProblem() === undefined
      ? new WebAssembly.Memory({ initial: pages, maximum: pages, shared: true })
      : new WebAssembly.Memory({ initial: pages });
  } catch (e) {
    throw new Error(
      `wasm: cannot allocate the ${plan.totalBytes}-byte memory of '${plan.name}': ` +
        (e as Error).message,
      { cause: e },
    );
  }
  const inst = new WebAssembly.Instance(module, { env: { memory } });
  const exports = inst.exports as unknown as Record<string, Callable>;
  // Every kernel a step calls is a function of this instance (a plan from the disk cache is
  // checked against the module it came with).
  for (const c of plan.comps) {
    for (const st of c.steps) {
      const calls = st.kind === "kernel" ? [st.call]
        : (st.kind === "dot" || st.kind === "conv") && st.epilogue ? [st.epilogue.call] : [];
      for (const call of calls) {
        if (typeof exports[call.fn] !== "function") {
          throw new Error(`wasm: the plan calls '${call.fn}', which the module does not export`);
        }
      }
    }
  }
  const u8 = new Uint8Array(memory.buffer);
  linker.constants.forEach((d, i) => {
    const bytes = new Uint8Array(d.buffer, d.byteOffset, d.byteLength);
    if (bytes.length > plan.totalBytes - plan.constantAt[i]!) {
      throw new Error(`wasm: constant ${i} (${bytes.length} bytes) does not fit the memory`);
    }
    u8.set(bytes, plan.constantAt[i]!);
  });
  return { memory, exports, u8, i32: new Int32Array(memory.buffer) };
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
  const exe: WasmExecutable = {
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
      let spec = cache.get(key);
      if (!spec) {
        spec = compileStatic(specializeModule(module, shapes, "wasm"));
        if (cache.size >= MAX_SPECIALIZATIONS) cache.delete(cache.keys().next().value!);
        cache.set(key, spec);
        log("perf", () => `wasm: '${module.name}' specialized for (${key})`);
      }
      return spec.run(inputs);
    },
  };
  stored.set(exe, { kind: "dynamic" });
  return exe;
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

/**
 * Counts of static programs compiled (lowered, rendered, encoded) and loaded from the disk
 * cache (instantiated from stored bytes), for tests and logs.
 */
export const wasmCounters = { compiled: 0, loaded: 0 };

function compileStatic(module: Module): WasmExecutable {
  const t0 = performance.now();
  let planner: Planner;
  let plan: WasmPlan;
  try {
    // Rows for threads, as native: a kernel's range groups leading dims until it has 16 rows.
    const program = lowerProgram(module, { backend: "wasm", minRows: 16 });
    planner = new Planner(program);
    planner.layout();
    if (planner.totalBytes > MAX_MEMORY_BYTES) {
      throw new UnsupportedError("wasm", `its memory would be ${planner.totalBytes} bytes ` +
        `(constants, parameters, results and intermediates); wasm runs up to ${MAX_MEMORY_BYTES}`);
    }
    plan = planner.plan();
  } catch (e) {
    if (e instanceof UnsupportedError) return fallbackTo(module, e.message);
    throw e;
  }
  const bytes = planner.wasm.encode();
  const t1 = performance.now();
  const wmod = new WebAssembly.Module(bytes);
  const t2 = performance.now();
  const exe = executable(module, plan, planner.constantData, planner.ext.values, wmod,
    bytes.length);
  wasmCounters.compiled++;
  stored.set(exe, {
    kind: "compiled",
    program: {
      plan,
      constants: { values: planner.constantData, keys: planner.constantData },
      ext: { values: planner.ext.values, keys: planner.ext.keys },
      bytes,
    },
  });
  log("perf", () => `wasm: compiled '${module.name}': ${plan.kernels} kernel(s), ` +
    `${bytes.length} bytes; lower+render ${(t1 - t0).toFixed(1)} ms, ` +
    `WebAssembly.Module ${(t2 - t1).toFixed(1)} ms`);
  return exe;
}

/** An executable running `plan` on a fresh instance of `wmod`. */
function executable(
  module: Module,
  plan: WasmPlan,
  constants: readonly LiteralData[],
  ext: readonly unknown[],
  wmod: WebAssembly.Module,
  byteLength: number,
): WasmExecutable {
  const linker = new Linker(plan, constants, ext);
  linker.link();
  linker.wmod = wmod;
  linker.mem = instantiateMem(linker, wmod);
  const params = module.entry.parameters.map((p) => p.shape);
  const root = module.entry.root.shape;
  const leaves = (s: Shape): number => s.kind === "array" ? 1
    : s.elements.reduce((n, e) => n + leaves(e), 0);
  const paramLeaves = params.reduce((n, s) => n + leaves(s), 0);
  if (paramLeaves !== plan.paramAt.length || leaves(root) !== plan.resultAt.length) {
    throw new Error(`wasm: the plan of '${plan.name}' has ${plan.paramAt.length} parameter ` +
      `and ${plan.resultAt.length} result leaves; module '${module.name}' has ${paramLeaves} ` +
      `and ${leaves(root)}`);
  }
  const paramAt = Int32Array.from(plan.paramAt);
  const resultAt = Int32Array.from(plan.resultAt);
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
        m.u8.set(new Uint8Array(d.buffer, d.byteOffset, plan.paramBytes[i]!), paramAt[i]!);
      });
      if (wasmTesting.poison) {
        m.u8.fill(0xff, resultAt.length > 0 ? Math.min(resultAt[0]!, plan.arenaAt) : plan.arenaAt,
          plan.totalBytes);
      }
      linker.threads = wasmThreads();
      linker.run(paramAt, resultAt);
      const results: LiteralData[] = [];
      allocResults(root, results);
      results.forEach((r, i) => {
        const at = resultAt[i]!;
        new Uint8Array(r.buffer, r.byteOffset, r.byteLength).set(
          m.u8.subarray(at, at + plan.resultBytes[i]!));
      });
      return results;
    } finally {
      busy = false;
    }
  };
  return {
    backend: "wasm",
    module,
    stats: { kernels: plan.kernels, vectorizedLoops: plan.vectorizedLoops, bytes: byteLength },
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

// ---- The disk cache --------------------------------------------------------------------------

// What serialize needs of each executable this backend made: a compiled program (its plan,
// tables and bytes), the marker of a dynamic module or of one run on js, or, for one loaded
// from the cache, the payload it was loaded from (the same bytes serialize would write).
type Stored =
  | { kind: "compiled"; program: StoredProgram }
  | { kind: "dynamic" }
  | { kind: "fallback"; why: string }
  | { kind: "loaded"; payload: Uint8Array };

const stored = new WeakMap<Executable, Stored>();

/** The disk cache's payload of a wasm executable: runtime/wasm/payload.ts describes it. */
function serializeWasm(exe: Executable): Uint8Array {
  const s = stored.get(exe);
  if (!s) throw new Error("wasm: serialize got an executable the wasm backend did not make");
  switch (s.kind) {
    case "compiled":
      return encodeWasmStatic(exe.module, s.program);
    case "dynamic":
      return encodeWasmMarker(exe.module);
    case "fallback":
      return encodeWasmMarker(exe.module, s.why);
    case "loaded":
      return s.payload;
    default: {
      const never: never = s;
      throw new Error(`wasm: unknown stored kind ${String(never)}`);
    }
  }
}

/**
 * An executable from serializeWasm's bytes, with no lowering, rendering or encoding: the
 * stored module's bytes (validated by the decoder) become a `WebAssembly.Module`, run by the
 * stored plan. A marker decides again (a dynamic module is specialized per argument dims; a
 * module wasm declined runs on js). Throws on a payload of another codegen version or format,
 * or one that does not fit `module`.
 */
function deserializeWasm(module: Module, payload: Uint8Array): WasmExecutable {
  const t0 = performance.now();
  const d = decodeWasmPayload(payload, module);
  let exe: WasmExecutable;
  switch (d.kind) {
    case "dynamic":
      exe = compileDynamic(module);
      break;
    case "fallback":
      exe = fallbackTo(module, d.why);
      break;
    case "static": {
      const wmod = new WebAssembly.Module(d.bytes);
      exe = executable(module, d.plan as WasmPlan, d.constants as LiteralData[], d.ext, wmod,
        d.bytes.length);
      wasmCounters.loaded++;
      break;
    }
    default: {
      const never: never = d;
      throw new Error(`wasm: unknown payload kind ${String(never)}`);
    }
  }
  // A copy: the payload may be a view into the whole entry file.
  stored.set(exe, { kind: "loaded", payload: new Uint8Array(payload) });
  log("perf", () =>
    `wasm: loaded a ${d.kind} program in ${(performance.now() - t0).toFixed(1)} ms`);
  return exe;
}

/** What else decides the generated module on this engine: the features it was built with. */
function wasmCacheKeyParts(): string {
  return `wasm codegen ${WASM_CODEGEN_VERSION}; simd128 ${simdSupported() && wasmTesting.simd}; ` +
    `relaxed-simd ${relaxedSimdSupported()}; shared-memory ${sharedMemoryProblem() === undefined}`;
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
  priority: 15,
  tier: "tolerance",
  available: wasmAvailable,
  compile: compileWasm,
  cacheKeyParts: wasmCacheKeyParts,
  serialize: serializeWasm,
  deserialize: deserializeWasm,
};

registerBackend(wasmBackend);
