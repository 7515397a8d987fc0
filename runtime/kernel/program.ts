// The step list: a module lowered to what a backend runs, backend-neutral. Per computation (the
// ENTRY, and every computation a call, while, conditional or split fusion runs as a program):
// buffers placed by the buffer plan (passes/buffers.ts: liveness, in-place reuse of a dying
// elementwise operand, heap-simulated offsets; reshape and copy are views), and steps in
// program order — kernels (loop, reduction, reduce-window, gather, scatter,
// dynamic-update-slice), library calls with plain-data descriptions (dot, convolution, sort,
// bitcast), copies, and calls of other computations (call, while, conditional). Parameters are
// the caller's buffers; constants the module's; a computation writes its results into buffers
// its caller provides (for the ENTRY: fresh per run, they become the user's tensors), copying
// where the root is a parameter, a constant or a value used twice; every intermediate lives at
// an offset in one arena per executable (each computation has its own region, after its
// callers', so no call overwrites a live value). Fusions map to kernels by kind: kLoop → one
// loop nest; kInput → one reduction kernel; kOutput → the contraction with its epilogue run on
// finished tiles. A fusion that does not fit its kind's kernel runs its fused computation as a
// program (correct, slower) and says so under KILN_LOGS=fusion.

import type {
  ConvDimensionNumbers,
  DotDimensionNumbers,
  WindowDim,
} from "../../ir/attributes.ts";
import { elementInfo } from "../../ir/element_types.ts";
import type { Literal } from "../../ir/literal.ts";
import type { Computation, Instruction, Module } from "../../ir/module.ts";
import type { ArrayShape, ElementType, Shape } from "../../ir/shape.ts";
import { shapeSizeProblem } from "../../ir/sizes.ts";
import { log } from "../../util/log.ts";
import {
  assignComputationBuffers,
  type BufferAssignment,
  type BufferTree,
  type LogicalBuffer,
} from "../../passes/buffers.ts";
import { UnsupportedError } from "../backend.ts";
import { type Ix, Pool, type Sx } from "./kir.ts";
import { contractLimit, countFree, dotLimits, LimitAnalysis, type Limits } from "./limits.ts";
import { applyScalar } from "./lower_kernels.ts";
import {
  arrayOf,
  constantDims,
  isExpressible,
  NotFast,
} from "./lower_expr.ts";
import {
  type Binding,
  convKernel,
  dotKernel,
  dynamicUpdateSliceKernel,
  gatherKernel,
  type KernelCall,
  loopKernel,
  type LowerOptions,
  ProgramIx,
  reduceKernel,
  reduceWindowKernel,
  scatterKernel,
} from "./lower_kernels.ts";
import { stridesOf } from "../../ir/evaluate_support.ts";

export type BufferPlace =
  | { readonly kind: "param"; readonly param: number; readonly path: readonly number[] }
  | { readonly kind: "constant"; readonly literal: Literal }
  /** A byte offset in the computation's region of the executable's arena. */
  | { readonly kind: "arena"; readonly offset: number }
  /** The computation's result slot `index` (its caller's buffer). */
  | { readonly kind: "result"; readonly index: number };

export interface ProgramBuffer {
  readonly id: number;
  readonly type: ElementType;
  readonly elements: number;
  /** Storage bytes (the Literal storage's element size × elements). */
  readonly bytes: number;
  readonly place: BufferPlace;
  /** The value it holds, for comments and errors. */
  readonly name: string;
}

/** A value: a buffer, or a tuple of values. */
export type Value = number | readonly Value[];

export interface KernelStep {
  readonly kind: "kernel";
  readonly call: KernelCall;
  /** The program buffer of each kernel buffer parameter. */
  readonly args: readonly number[];
}

/** A contraction's epilogue: a tile kernel over its output (rows × columns). */
export interface Epilogue {
  readonly call: KernelCall;
  readonly args: readonly number[];
  /** The kernel reads the contraction's output only at the element it writes. */
  readonly identityOnly: boolean;
  /** Run on each finished tile (else once after the contraction, as a plain kernel). */
  readonly perTile: boolean;
}

export interface DotStep {
  readonly kind: "dot";
  readonly type: ElementType;
  readonly lhs: number;
  readonly rhs: number;
  /** Where the contraction writes (a scratch buffer when there is an epilogue). */
  readonly out: number;
  readonly lhsDims: readonly number[];
  readonly rhsDims: readonly number[];
  /** Element strides of the operands (a transposed or broadcast operand read in place). */
  readonly lhsStrides: readonly number[];
  readonly rhsStrides: readonly number[];
  readonly dn: DotDimensionNumbers;
  /** Rows and columns of the canonical [batch, M, N] output to compute, and the contraction. */
  readonly mLimit?: Ix;
  readonly nLimit?: Ix;
  readonly kLimit?: Ix;
  readonly epilogue?: Epilogue;
  /** The epilogue's output (when there is one). */
  readonly result?: number;
  readonly name: string;
}

export interface ConvStep {
  readonly kind: "conv";
  readonly type: ElementType;
  readonly lhs: number;
  readonly rhs: number;
  readonly out: number;
  readonly lhsDims: readonly number[];
  readonly rhsDims: readonly number[];
  readonly outDims: readonly number[];
  readonly lhsStrides: readonly number[];
  readonly rhsStrides: readonly number[];
  readonly convDims: ConvDimensionNumbers;
  readonly window: readonly WindowDim[];
  readonly featureGroupCount: number;
  readonly batchGroupCount: number;
  readonly epilogue?: Epilogue;
  readonly result?: number;
  readonly name: string;
}

/** A sort comparator: `less` over accumulator nodes 0..2n-1 standing for (lhs_i, rhs_i). */
export interface Comparator {
  readonly pool: Pool;
  readonly args: readonly ElementType[];
  readonly less: Sx;
}

export type Step =
  | KernelStep
  | { readonly kind: "copy"; readonly from: number; readonly to: number }
  | DotStep
  | ConvStep
  | { readonly kind: "bitcast"; readonly from: number; readonly to: number }
  | {
      readonly kind: "sort";
      readonly ins: readonly number[];
      readonly outs: readonly number[];
      readonly dims: readonly number[];
      readonly dim: number;
      readonly comparator: Comparator;
      readonly name: string;
    }
  | { readonly kind: "call"; readonly comp: number; readonly args: readonly Value[];
      readonly results: readonly number[] }
  | {
      readonly kind: "while";
      readonly cond: number;
      readonly body: number;
      readonly init: Value;
      /** Two sets of state buffers, written by alternate iterations (results is the first). */
      readonly scratch: readonly number[];
      readonly results: readonly number[];
      /** The shape of the state (to rebuild its tree from a flat buffer list). */
      readonly state: Shape;
      /** A pred[] buffer for the condition's result. */
      readonly flag: number;
    }
  | {
      readonly kind: "conditional";
      readonly selector: number;
      /** A pred selector picks branch 0 when true; an s32 selector out of range the last. */
      readonly predicate: boolean;
      readonly branches: readonly number[];
      readonly args: readonly Value[];
      readonly results: readonly number[];
    };

export interface ProgramComputation {
  readonly name: string;
  /** Parameter trees (by parameter number). */
  readonly params: readonly Value[];
  /** Result slots: `result` place buffers in flat leaf order of the root's shape. */
  readonly results: readonly number[];
  readonly resultShape: Shape;
  readonly buffers: readonly ProgramBuffer[];
  readonly steps: readonly Step[];
  /**
   * Where this computation's region of the arena starts (after the regions of every
   * computation that calls it, so no call overwrites a live value), and its size, in bytes.
   */
  readonly arenaBase: number;
  readonly arenaBytes: number;
  /** The computations its steps call. */
  readonly callees: readonly number[];
}

export interface Program {
  readonly module: Module;
  /** [0] is the ENTRY. */
  readonly computations: readonly ProgramComputation[];
  /** Program-level index expressions: `size(p)` is the value of s32[] ENTRY parameter p. */
  readonly prog: ProgramIx;
  readonly arenaBytes: number;
}

export interface ProgramOptions extends LowerOptions {
  /** Backend name for errors. */
  backend: string;
  /** Plan in-place updates (default true). */
  inPlace?: boolean;
}

const ALIGN = 64;

function leavesOfShape(s: Shape): ArrayShape[] {
  return s.kind === "array" ? [s] : s.elements.flatMap(leavesOfShape);
}

function flat(v: Value): number[] {
  return typeof v === "number" ? [v] : v.flatMap(flat);
}

/** Lowers an optimized, static module to its step list. */
/** The element types kernels compute in. */
const KERNEL_TYPES: ReadonlySet<ElementType> = new Set([
  "pred",
  "s32",
  "s64",
  "u8",
  "f16",
  "bf16",
  "f32",
]);

/** The first element type of `s` (a tuple: of any leaf) that no kernel computes in. */
function unsupportedLeafType(s: Shape): ElementType | undefined {
  if (s.kind === "array") return KERNEL_TYPES.has(s.type) ? undefined : s.type;
  for (const e of s.elements) {
    const t = unsupportedLeafType(e);
    if (t !== undefined) return t;
  }
  return undefined;
}

export function lowerProgram(module: Module, options: ProgramOptions): Program {
  return new ProgramBuilder(module, options).build();
}

class ProgramBuilder {
  readonly prog = new ProgramIx();
  private readonly comps: ProgramComputation[] = [];
  private readonly compIndex = new Map<Computation, number>();
  private readonly limits: LimitAnalysis;
  private kernelNames = 0;

  constructor(
    readonly module: Module,
    readonly options: ProgramOptions,
  ) {
    this.limits = new LimitAnalysis(module, this.prog.pool);
  }

  build(): Program {
    // f64 is the reference evaluator's (float64 gradient checks), and the integer types XLA has
    // beyond s32, s64 and u8 (s4 s8 s16 u4 u16 u32 u64) are the IR's and the evaluator's only:
    // no kernel computes in them, so a module using one is declined, never run wrong.
    for (const c of this.module.computations) {
      for (const i of c.instructions) {
        if (i.opcode === "bitcast") {
          const why = "bitcast (a layout reinterpretation) runs on the interpreter only";
          throw this.unsupported(i, why);
        }
        const t = unsupportedLeafType(i.shape);
        if (t === "f64") throw this.unsupported(i, "f64 arrays run on the interpreter only");
        if (t !== undefined) {
          throw this.unsupported(i, `${t} arrays run on the interpreter only (no kernel type)`);
        }
      }
    }
    this.computation(this.module.entry);
    // Regions: a callee starts after the end of every caller's region (the call graph is
    // acyclic, and the ENTRY is first in a topological order of it).
    const base = this.comps.map(() => 0);
    const order = topological(this.comps);
    let top = 0;
    for (const i of order) {
      const c = this.comps[i]!;
      const end = base[i]! + c.arenaBytes;
      top = Math.max(top, end);
      for (const k of c.callees) base[k] = Math.max(base[k]!, end);
    }
    const computations = this.comps.map((c, i) => ({ ...c, arenaBase: base[i]! }));
    return { module: this.module, computations, prog: this.prog, arenaBytes: top };
  }

  unsupported(instr: Instruction, detail: string): UnsupportedError {
    return new UnsupportedError(this.options.backend, detail, instr.name, instr.opcode);
  }

  /** The program computation of `c` (lowered once). */
  computation(c: Computation): number {
    const known = this.compIndex.get(c);
    if (known !== undefined) return known;
    const index = this.comps.length;
    this.compIndex.set(c, index);
    this.comps.push(undefined as unknown as ProgramComputation); // reserved
    this.comps[index] = new CompBuilder(this, c).build();
    return index;
  }

  kernelName(hint: string): string {
    return `k${this.kernelNames++}_${hint.replace(/[^A-Za-z0-9_]/g, "_").slice(0, 40)}`;
  }

  get limitAnalysis(): LimitAnalysis {
    return this.limits;
  }
}

/** Why some array of shape `s` (a tuple's leaves) cannot be allocated, or null. */
function shapeTreeSizeProblem(s: Shape): string | null {
  if (s.kind === "array") return shapeSizeProblem(s.type, s.dims);
  for (const e of s.elements) {
    const p = shapeTreeSizeProblem(e);
    if (p !== null) return p;
  }
  return null;
}

/** Lowers one computation. */
class CompBuilder {
  private readonly plan: BufferAssignment;
  private readonly buffers: ProgramBuffer[] = [];
  private readonly steps: Step[] = [];
  private readonly ofLogical = new Map<LogicalBuffer, number>();
  private readonly values = new Map<Instruction, Value>();
  private readonly constantBufs = new Map<Instruction, number>();
  private readonly results: number[] = [];
  private readonly callees = new Set<number>();
  private top: number;

  constructor(
    readonly pb: ProgramBuilder,
    readonly comp: Computation,
  ) {
    // Every buffer is sized from an instruction's shape: one no array can hold is an error
    // naming the instruction, before any offset is computed for it.
    for (const instr of comp.instructions) {
      const problem = shapeTreeSizeProblem(instr.shape);
      if (problem !== null) throw pb.unsupported(instr, problem);
    }
    this.plan = assignComputationBuffers(comp, {
      views: true,
      alignment: ALIGN,
      elementBytes: (t) => elementInfo(t).storageBytes,
      inPlace: pb.options.inPlace ?? true,
    });
    this.top = this.plan.peakBytes;
  }

  private get opts(): LowerOptions {
    return this.pb.options;
  }

  private addBuffer(type: ElementType, elements: number, place: BufferPlace, name: string): number {
    const id = this.buffers.length;
    this.buffers.push({
      id,
      type,
      elements,
      bytes: elements * elementInfo(type).storageBytes,
      place,
      name,
    });
    return id;
  }

  /** A scratch buffer of this computation's arena region (not shared with anything). */
  scratch(shape: ArrayShape, name: string): number {
    const n = shape.dims.reduce((a, b) => a * b, 1);
    const bytes = Math.ceil((n * elementInfo(shape.type).storageBytes) / ALIGN) * ALIGN;
    const offset = this.top;
    this.top += bytes;
    return this.addBuffer(shape.type, n, { kind: "arena", offset }, name);
  }

  build(): ProgramComputation {
    const comp = this.comp;
    // Result slots: which logical buffers are written straight into the caller's buffers.
    const rootLeaves = this.leafBuffers(this.plan.treeOf(comp.root));
    const group = (b: LogicalBuffer): LogicalBuffer => {
      let r = b;
      while (r.reuses !== undefined) r = r.reuses;
      return r;
    };
    const direct = new Map<LogicalBuffer, number>(); // group root → result index
    const copies: { from: LogicalBuffer; index: number }[] = [];
    const used = new Set<LogicalBuffer>();
    rootLeaves.forEach((b, i) => {
      if (b.kind === "arena" && b.bytes > 0 && !used.has(b)) {
        used.add(b);
        direct.set(group(b), i);
      } else {
        copies.push({ from: b, index: i });
      }
    });
    const resultIds = new Map<number, number>();
    for (const b of this.plan.buffers) {
      const shape = b.shape;
      const n = shape.dims.reduce((a, c) => a * c, 1);
      let place: BufferPlace;
      if (b.kind === "parameter") {
        place = { kind: "param", param: b.instruction.attrs.parameterNumber!, path: b.index };
      } else if (b.kind === "constant") {
        place = { kind: "constant", literal: b.instruction.attrs.literal! };
      } else {
        const r = direct.get(group(b));
        place = r !== undefined ? { kind: "result", index: r } : { kind: "arena",
          offset: Math.max(0, b.offset) };
      }
      const id = this.addBuffer(shape.type, n, place, b.instruction.name);
      this.ofLogical.set(b, id);
      if (place.kind === "result" && b === rootLeaves[place.index]) resultIds.set(place.index, id);
    }
    for (const c of copies) {
      const s = rootLeaves[c.index]!.shape;
      const n = s.dims.reduce((a, d) => a * d, 1);
      resultIds.set(
        c.index,
        this.addBuffer(s.type, n, { kind: "result", index: c.index }, `result ${c.index}`),
      );
    }
    for (let i = 0; i < rootLeaves.length; i++) this.results.push(resultIds.get(i)!);
    for (const instr of comp.instructions) {
      this.values.set(instr, this.valueOf(this.plan.treeOf(instr)));
    }
    for (const instr of comp.instructions) this.emit(instr);
    for (const c of copies) {
      const from = this.ofLogical.get(c.from)!;
      const to = this.results[c.index]!;
      if (this.buffers[to]!.elements > 0) this.steps.push({ kind: "copy", from, to });
    }
    const params: Value[] = [];
    for (const p of comp.parameters) params[p.attrs.parameterNumber!] = this.values.get(p)!;
    return {
      name: comp.name,
      params,
      results: this.results,
      resultShape: comp.root.shape,
      buffers: this.buffers,
      steps: this.steps,
      arenaBase: 0,
      arenaBytes: this.top,
      callees: [...this.callees],
    };
  }

  /** Whether two buffers of this computation share memory (an in-place group). */
  private sameStorage(a: number, b: number): boolean {
    if (a === b) return true;
    const x = this.buffers[a]!.place;
    const y = this.buffers[b]!.place;
    if (x.kind === "result" && y.kind === "result") return x.index === y.index;
    if (x.kind === "arena" && y.kind === "arena") {
      const ea = x.offset + this.buffers[a]!.bytes;
      const eb = y.offset + this.buffers[b]!.bytes;
      return x.offset < eb && y.offset < ea;
    }
    if (x.kind === "param" && y.kind === "param") {
      return x.param === y.param && x.path.join() === y.path.join();
    }
    return false;
  }

  private callee(c: Computation): number {
    const i = this.pb.computation(c);
    this.callees.add(i);
    return i;
  }

  private leafBuffers(t: BufferTree): LogicalBuffer[] {
    return Array.isArray(t) ? t.flatMap((x) => this.leafBuffers(x)) : [t as LogicalBuffer];
  }

  private valueOf(t: BufferTree): Value {
    if (Array.isArray(t)) return t.map((x) => this.valueOf(x));
    return this.ofLogical.get(t as LogicalBuffer)!;
  }

  private bufferOf(instr: Instruction): number {
    const v = this.values.get(instr);
    if (typeof v !== "number") {
      throw new Error(`%${instr.name} has no single buffer (a tuple?)`);
    }
    return v;
  }

  private count(instr: Instruction): number {
    return arrayOf(instr).dims.reduce((a, b) => a * b, 1);
  }

  /** The program buffers a kernel's bindings refer to. */
  private args(call: KernelCall, outs: readonly number[], leafOf: (i: Instruction) => number):
    number[] {
    return call.bindings.map((b: Binding) => (b.kind === "out" ? outs[b.index]! : leafOf(b.instr)));
  }

  /** A constant inside a fused computation, as a buffer of this computation. */
  private constantBuffer(instr: Instruction): number {
    const known = this.constantBufs.get(instr);
    if (known !== undefined) return known;
    const lit = instr.attrs.literal!;
    const id = this.addBuffer(lit.type, lit.data.length, { kind: "constant", literal: lit },
      instr.name);
    this.constantBufs.set(instr, id);
    return id;
  }

  private kernel(call: KernelCall, outs: readonly number[], leafOf: (i: Instruction) => number):
    void {
    this.steps.push({ kind: "kernel", call, args: this.args(call, outs, leafOf) });
  }

  private inEntry(): boolean {
    return this.comp === this.pb.module.entry;
  }

  private limitsOf(instr: Instruction): Limits | undefined {
    return this.inEntry() ? this.pb.limitAnalysis.limits(instr) : undefined;
  }

  private emit(instr: Instruction): void {
    const op = instr.opcode;
    const leafOf = (i: Instruction): number =>
      i.opcode === "constant" && i.parent !== this.comp ? this.constantBuffer(i) : this.bufferOf(i);
    switch (op) {
      case "parameter":
      case "constant":
      case "tuple":
      case "get-tuple-element":
      case "reshape":
      case "copy":
        return;
      case "set-dimension-size":
      case "custom-call":
        throw this.pb.unsupported(instr, `${op} has no kernel`);
      case "bitcast-convert":
        if (this.count(instr) > 0) {
          this.steps.push({ kind: "bitcast", from: this.bufferOf(instr.operand(0)),
            to: this.bufferOf(instr) });
        }
        return;
      case "call": {
        const c = this.callee(instr.called[0]!);
        this.steps.push({
          kind: "call",
          comp: c,
          args: instr.operands.map((o) => this.values.get(o)!),
          results: flat(this.values.get(instr)!),
        });
        return;
      }
      case "while":
        this.emitWhile(instr);
        return;
      case "conditional": {
        const branches = instr.called.map((b) => this.callee(b));
        this.steps.push({
          kind: "conditional",
          selector: this.bufferOf(instr.operand(0)),
          predicate: arrayOf(instr.operand(0)).type === "pred",
          branches,
          args: instr.operands.slice(1).map((o) => this.values.get(o)!),
          results: flat(this.values.get(instr)!),
        });
        return;
      }
      case "fusion":
        this.emitFusion(instr);
        return;
      case "dot":
      case "convolution": {
        const leafVals = new Map<Instruction, number>(
          instr.operands.map((o) => [o, this.bufferOf(o)] as const),
        );
        this.tryKernel(instr, () => this.emitContraction(instr, instr, undefined, leafVals));
        return;
      }
      case "reduce": {
        if (leavesOfShape(instr.shape).every((s) => s.dims.reduce((a, b) => a * b, 1) === 0)) {
          return;
        }
        const call = this.reduce(instr, instr, [...new Set(instr.operands)]);
        this.kernel(call, flat(this.values.get(instr)!), leafOf);
        return;
      }
      case "reduce-window": {
        const call = this.tryKernel(instr, () =>
          reduceWindowKernel(this.pb.prog, this.pb.kernelName(instr.name), describe(instr), instr,
            this.opts),
        );
        if (leavesOfShape(instr.shape)[0]!.dims.reduce((a, b) => a * b, 1) === 0) return;
        this.kernel(call, flat(this.values.get(instr)!), leafOf);
        return;
      }
      case "gather": {
        if (this.count(instr) === 0) return;
        const call = this.tryKernel(instr, () =>
          gatherKernel(this.pb.prog, this.pb.kernelName(instr.name), describe(instr), instr,
            this.opts),
        );
        this.kernel(call, [this.bufferOf(instr)], leafOf);
        return;
      }
      case "scatter": {
        const n = (instr.operands.length - 1) / 2;
        const outs = flat(this.values.get(instr)!);
        for (let i = 0; i < n; i++) {
          const from = this.bufferOf(instr.operand(i));
          if (from !== outs[i] && this.buffers[outs[i]!]!.elements > 0) {
            this.steps.push({ kind: "copy", from, to: outs[i]! });
          }
        }
        if (this.count(instr.operand(n + 1)) === 0 || this.count(instr.operand(0)) === 0) return;
        const call = this.tryKernel(instr, () =>
          scatterKernel(this.pb.prog, this.pb.kernelName(instr.name), describe(instr), instr,
            this.opts),
        );
        this.kernel(call, outs, leafOf);
        return;
      }
      case "dynamic-update-slice": {
        const out = this.bufferOf(instr);
        const from = this.bufferOf(instr.operand(0));
        if (from !== out && this.count(instr) > 0) this.steps.push({ kind: "copy", from, to: out });
        if (this.count(instr.operand(1)) === 0) return;
        const call = this.tryKernel(instr, () =>
          dynamicUpdateSliceKernel(this.pb.prog, this.pb.kernelName(instr.name), describe(instr),
            instr, this.opts),
        );
        this.kernel(call, [out], leafOf);
        return;
      }
      case "sort":
        this.emitSort(instr);
        return;
      default:
        break;
    }
    if (!isExpressible(instr)) throw this.pb.unsupported(instr, `no kernel for ${op}`);
    if (this.count(instr) === 0) return;
    const call = this.tryKernel(instr, () =>
      loopKernel(
        this.pb.prog,
        {
          name: this.pb.kernelName(instr.name),
          comment: describe(instr),
          root: instr,
          leaves: [...new Set(instr.operands)],
          ...(this.limitsOf(instr) !== undefined && { limits: this.limitsOf(instr)! }),
        },
        this.opts,
      ),
    );
    this.kernel(call, [this.bufferOf(instr)], leafOf);
  }

  private tryKernel<T>(instr: Instruction, make: () => T): T {
    try {
      return make();
    } catch (e) {
      if (e instanceof NotFast) throw this.pb.unsupported(instr, e.message);
      throw e;
    }
  }

  private reduce(instr: Instruction, root: Instruction, leaves: readonly Instruction[]) {
    const lim = this.limitsOf(instr);
    const red = this.inEntry()
      ? instr.opcode === "fusion"
        ? this.pb.limitAnalysis.fusedReduceLimits(instr.called[0]!, instr)
        : this.pb.limitAnalysis.reduceLimits(instr, instr)
      : undefined;
    return reduceKernel(
      this.pb.prog,
      {
        name: this.pb.kernelName(instr.opcode === "fusion" ? instr.called[0]!.name : instr.name),
        comment: describe(instr),
        root,
        leaves,
        ...(lim !== undefined && { limits: lim }),
        ...(red !== undefined && { reduceLimits: red }),
      },
      this.opts,
    );
  }

  private emitWhile(instr: Instruction): void {
    const cond = this.callee(instr.called[0]!);
    const body = this.callee(instr.called[1]!);
    const results = flat(this.values.get(instr)!);
    const scratch = leavesOfShape(instr.shape).map((s, i) => this.scratch(s, `${instr.name}.s${i}`));
    const flag = this.scratch({ kind: "array", type: "pred", dims: [], dynamic: [] },
      `${instr.name}.flag`);
    this.steps.push({
      kind: "while",
      cond,
      body,
      init: this.values.get(instr.operand(0))!,
      scratch,
      results,
      state: instr.shape,
      flag,
    });
  }

  private emitSort(instr: Instruction): void {
    const n = instr.operands.length;
    const dims = arrayOf(instr.operand(0)).dims;
    const outs = flat(this.values.get(instr)!);
    if (dims.reduce((a, b) => a * b, 1) === 0) return;
    const pool = new Pool();
    const types = instr.operands.flatMap((o) => [arrayOf(o).type, arrayOf(o).type]);
    const args = types.map((t, i) => pool.acc(t, i));
    let less: Sx;
    try {
      [less] = applyScalar(pool, constantDims(pool), instr.called[0]!, args) as [Sx];
    } catch (e) {
      if (e instanceof NotFast) throw this.pb.unsupported(instr, e.message);
      throw e;
    }
    this.steps.push({
      kind: "sort",
      ins: instr.operands.map((o) => this.bufferOf(o)),
      outs: outs.slice(0, n),
      dims,
      dim: instr.attrs.dimensions![0]!,
      comparator: { pool, args: types, less },
      name: this.pb.kernelName(instr.name),
    });
  }

  // ---- fusions -------------------------------------------------------------------------------

  private emitFusion(instr: Instruction): void {
    const comp = instr.called[0]!;
    const kind = instr.attrs.fusionKind ?? "kLoop";
    const ops = instr.operands.map((o) => this.values.get(o)!);
    const leafBuf = new Map<Instruction, number>();
    for (const p of comp.parameters) {
      const v = ops[p.attrs.parameterNumber!];
      if (typeof v === "number") leafBuf.set(p, v);
    }
    const leafOf = (i: Instruction): number => {
      const b = leafBuf.get(i);
      if (b !== undefined) return b;
      if (i.opcode === "constant") return this.constantBuffer(i);
      throw new Error(`fusion %${instr.name}: %${i.name} has no buffer`);
    };
    const mark = this.steps.length;
    try {
      switch (kind) {
        case "kLoop": {
          const root = comp.root;
          if (root.shape.kind !== "array") throw new NotFast("the fused root is a tuple");
          if (this.count(root) === 0) return;
          if (comp.parameters.some((p) => !leafBuf.has(p))) {
            throw new NotFast("a fused parameter is a tuple");
          }
          const call = loopKernel(
            this.pb.prog,
            {
              name: this.pb.kernelName(comp.name),
              comment: describe(instr),
              root,
              leaves: comp.parameters,
              ...(this.limitsOf(instr) !== undefined && { limits: this.limitsOf(instr)! }),
            },
            this.opts,
          );
          this.kernel(call, [this.bufferOf(instr)], leafOf);
          return;
        }
        case "kInput": {
          if (comp.parameters.some((p) => !leafBuf.has(p))) {
            throw new NotFast("a fused parameter is a tuple");
          }
          const outs = flat(this.values.get(instr)!);
          if (outs.every((b) => this.buffers[b]!.elements === 0)) return;
          const call = this.reduce(instr, comp.root, comp.parameters);
          this.kernel(call, outs, leafOf);
          return;
        }
        case "kOutput":
          this.outputFusion(instr, comp, leafBuf);
          return;
        case "kCustom":
          throw new NotFast("kCustom fusions have no kernel");
        default: {
          const never: never = kind;
          throw new NotFast(`unknown fusion kind ${String(never)}`);
        }
      }
    } catch (e) {
      if (!(e instanceof NotFast)) throw e;
      this.steps.length = mark;
      log("fusion", `${this.pb.options.backend}: %${instr.name} (${kind}) runs per ` +
        `instruction: ${e.message}`);
      const c = this.callee(comp);
      // The plan may have put the fusion's result over a dying operand (a kLoop kernel reads
      // it elementwise); run per instruction, the callee would overwrite that operand before
      // it has read all of it, so such a result goes through a scratch buffer.
      const results = flat(this.values.get(instr)!);
      const inputs = ops.flatMap(flat);
      const tmp = results.map((r) => {
        if (!inputs.some((i) => this.sameStorage(i, r))) return r;
        const b = this.buffers[r]!;
        return this.scratch({ kind: "array", type: b.type, dims: [b.elements], dynamic: [false] },
          `${instr.name}.tmp`);
      });
      this.steps.push({ kind: "call", comp: c, args: ops, results: tmp });
      tmp.forEach((t, i) => {
        if (t !== results[i]) this.steps.push({ kind: "copy", from: t, to: results[i]! });
      });
    }
  }

  private outputFusion(
    instr: Instruction,
    comp: Computation,
    leafBuf: Map<Instruction, number>,
  ): void {
    const contractions = comp.instructions.filter(
      (i) => i.opcode === "dot" || i.opcode === "convolution",
    );
    if (contractions.length !== 1) {
      throw new NotFast(`expected one dot or convolution, found ${contractions.length}`);
    }
    const D = contractions[0]!;
    for (const i of comp.instructions) {
      if (i !== D && !isExpressible(i)) {
        throw new NotFast(`%${i.name} (${i.opcode}) is not elementwise or data movement`);
      }
    }
    if (comp.root.shape.kind !== "array") throw new NotFast("the fused root is a tuple");
    if (comp.parameters.some((p) => !leafBuf.has(p))) {
      throw new NotFast("a fused parameter is a tuple");
    }
    this.emitContraction(instr, D, comp.root === D ? undefined : comp.root, leafBuf);
  }

  /**
   * A dot or convolution `D`, writing the result of `instr` (or, with an epilogue `root` — a
   * kOutput fusion — its raw result goes to a scratch buffer and the epilogue writes `instr`'s).
   * Operands that are not views of leaves (a transpose of a parameter is one) are computed
   * into scratch buffers first.
   */
  private emitContraction(
    instr: Instruction,
    D: Instruction,
    root: Instruction | undefined,
    leafBuf: Map<Instruction, number>,
  ): void {
    const t = arrayOf(D).type;
    const leaves = [...leafBuf.keys()];
    const leafOf = (i: Instruction): number => {
      const b = leafBuf.get(i);
      if (b !== undefined) return b;
      if (i.opcode === "constant") return this.constantBuffer(i);
      throw new Error(`%${i.name} has no buffer`);
    };
    const dShape = arrayOf(D);
    const result = this.bufferOf(instr);
    if (this.count(instr) === 0) return;
    const operand = (i: number): { buf: number; strides: number[] } => {
      const o = D.operand(i);
      const other = arrayOf(o).type !== t;
      const view = other ? undefined : viewOf(o, leafBuf);
      if (view) return view;
      // Computed (or converted to the result type) into a scratch buffer first.
      const buf = this.scratch({ ...arrayOf(o), type: t }, `${D.name}.op${i}`);
      if (this.count(o) > 0) {
        const call = loopKernel(
          this.pb.prog,
          { name: this.pb.kernelName(o.name), comment: `operand ${i} of ${describe(D)}`, root: o,
            leaves, ...(other && { convertTo: t }) },
          this.opts,
        );
        this.kernel(call, [buf], leafOf);
      }
      return { buf, strides: stridesOf(arrayOf(o).dims) };
    };
    const A = operand(0);
    const B = operand(1);
    const limits = this.limitsOf(instr);
    let restrict = limits !== undefined;
    let epilogue: Epilogue | undefined;
    let out = result;
    const library =
      this.opts.libraryContraction?.(
        D.opcode === "dot" ? "dot" : "convolution",
        t,
        D.attrs.batchGroupCount ?? 1,
      ) ?? true;
    if (root) {
      out = this.scratch(dShape, `${D.name}.raw`);
      const rShape = arrayOf(root);
      const isDot = D.opcode === "dot";
      const same = sameDims(rShape.dims, dShape.dims);
      // A dot's epilogue runs on rows (batch and lhs free dims); a convolution's on images.
      const rowDims = isDot ? dShape.dims.length - countFree(D, 1) : 1;
      const perTileOk =
        library && same && elementInfo(t).float && (isDot || D.attrs.convDims!.outputBatch === 0);
      const call = loopKernel(
        this.pb.prog,
        {
          name: this.pb.kernelName(`${D.name}_epilogue`),
          comment: `epilogue of ${describe(instr)}`,
          root,
          leaves: [D, ...leaves],
          ...(perTileOk ? { tile: { rowDims } } : {}),
          identityLeaf: D,
          ...(limits !== undefined && !perTileOk && { limits }),
        },
        this.opts,
      );
      const args = this.args(call, [result], (i) => (i === D ? out : leafOf(i)));
      const perTile = perTileOk && call.identityOnly;
      if (perTileOk && !call.identityOnly) {
        // Read elsewhere than in place: run it after the contraction as a plain kernel.
        const plain = loopKernel(
          this.pb.prog,
          { name: this.pb.kernelName(`${D.name}_epilogue`), comment: `epilogue of ${describe(instr)}`,
            root, leaves: [D, ...leaves], ...(limits !== undefined && { limits }) },
          this.opts,
        );
        epilogue = {
          call: plain,
          args: this.args(plain, [result], (i) => (i === D ? out : leafOf(i))),
          identityOnly: false,
          perTile: false,
        };
      } else {
        epilogue = { call, args, identityOnly: call.identityOnly, perTile };
      }
      // The contraction may skip what the epilogue never reads only if it reads it in place.
      restrict &&= epilogue.identityOnly && same;
    }
    const P = this.pb.prog.pool;
    if (!library) {
      // A generated kernel (the backend's library does not take this type), then the epilogue.
      const shape = {
        type: t,
        lhsDims: arrayOf(D.operand(0)).dims,
        rhsDims: arrayOf(D.operand(1)).dims,
        lhsStrides: A.strides,
        rhsStrides: B.strides,
      };
      const name = this.pb.kernelName(D.name);
      const call =
        D.opcode === "dot"
          ? dotKernel(this.pb.prog, name, describe(D), { ...shape, dn: D.attrs.dot! }, this.opts)
          : convKernel(this.pb.prog, name, describe(D), {
              ...shape,
              outDims: dShape.dims,
              convDims: D.attrs.convDims!,
              window: D.attrs.window!,
              featureGroupCount: D.attrs.featureGroupCount ?? 1,
              batchGroupCount: D.attrs.batchGroupCount ?? 1,
            }, this.opts);
      this.steps.push({ kind: "kernel", call, args: this.args(call, [out, A.buf, B.buf], leafOf) });
      if (epilogue) this.steps.push({ kind: "kernel", call: epilogue.call, args: epilogue.args });
      return;
    }
    if (D.opcode === "dot") {
      const lim = restrict && limits ? dotLimits(P, D, limits) : undefined;
      const k = elementInfo(t).float
        ? contractLimit(P, D, this.inEntry() ? this.pb.limitAnalysis.reduceLimits(D, instr) : undefined)
        : undefined;
      this.steps.push({
        kind: "dot",
        type: t,
        lhs: A.buf,
        rhs: B.buf,
        out,
        lhsDims: arrayOf(D.operand(0)).dims,
        rhsDims: arrayOf(D.operand(1)).dims,
        lhsStrides: A.strides,
        rhsStrides: B.strides,
        dn: D.attrs.dot!,
        ...(lim && { mLimit: lim.m, nLimit: lim.n }),
        ...(k !== undefined && { kLimit: k }),
        ...(epilogue && { epilogue, result }),
        name: D.name,
      });
      return;
    }
    this.steps.push({
      kind: "conv",
      type: t,
      lhs: A.buf,
      rhs: B.buf,
      out,
      lhsDims: arrayOf(D.operand(0)).dims,
      rhsDims: arrayOf(D.operand(1)).dims,
      outDims: dShape.dims,
      lhsStrides: A.strides,
      rhsStrides: B.strides,
      convDims: D.attrs.convDims!,
      window: D.attrs.window!,
      featureGroupCount: D.attrs.featureGroupCount ?? 1,
      batchGroupCount: D.attrs.batchGroupCount ?? 1,
      ...(epilogue && { epilogue, result }),
      name: D.name,
    });
  }
}

/** Computation indices with every caller before its callees. */
function topological(comps: readonly ProgramComputation[]): number[] {
  const out: number[] = [];
  const state = comps.map(() => 0);
  const visit = (i: number) => {
    if (state[i] === 2) return;
    if (state[i] === 1) throw new Error("the call graph has a cycle");
    state[i] = 1;
    for (const k of comps[i]!.callees) visit(k);
    state[i] = 2;
    out.push(i);
  };
  visit(0);
  comps.forEach((_, i) => visit(i));
  return out.reverse();
}

function sameDims(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((v, i) => v === b[i]);
}


/**
 * A contraction operand that needs no copy: a leaf, or transposes and broadcasts of one (a
 * transpose permutes the strides, a broadcast gives new dims stride 0).
 */
function viewOf(
  o: Instruction,
  leafBuf: Map<Instruction, number>,
): { buf: number; strides: number[] } | undefined {
  const leaf = leafBuf.get(o);
  if (leaf !== undefined) return { buf: leaf, strides: stridesOf(arrayOf(o).dims) };
  if (o.opcode === "transpose") {
    const v = viewOf(o.operand(0), leafBuf);
    if (!v) return undefined;
    return { buf: v.buf, strides: o.attrs.dimensions!.map((p) => v.strides[p]!) };
  }
  if (o.opcode === "broadcast") {
    const v = viewOf(o.operand(0), leafBuf);
    if (!v) return undefined;
    const strides = new Array<number>(arrayOf(o).dims.length).fill(0);
    o.attrs.dimensions!.forEach((r, i) => (strides[r] = v.strides[i]!));
    return { buf: v.buf, strides };
  }
  return undefined;
}

/** `%add.3 = f32[4,16] add(%x, %y)` (for comments). */
export function describe(instr: Instruction): string {
  const ops = instr.operands.map((o) => `%${o.name}`).join(", ");
  const kind = instr.attrs.fusionKind ? ` kind=${instr.attrs.fusionKind}` : "";
  const called = instr.called.length ? ` calls=${instr.called.map((c) => c.name).join(",")}` : "";
  const s = instr.shape;
  const shape = s.kind === "array" ? `${s.type}[${s.dims.join(",")}]` : "(tuple)";
  return `%${instr.name} = ${shape} ${instr.opcode}(${ops})${kind}${called}`.replace(
    /[\n\r\u2028\u2029]/g,
    " ",
  );
}
