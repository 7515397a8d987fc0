// compile(): a model or function in, a callable with `stats` out. The first call TRACES (see
// compiler/trace.ts): the user's code runs once with symbolic inputs over lazy mode, and, when
// it had no graph break and no side effect Kiln cannot replay, the recorded graph from the
// inputs (argument tensors, then parameters and buffers, read by path at call time) to the
// results becomes ONE program, compiled through the runtime's program cache (so two instances
// of one architecture share it, and loading new weights changes nothing but the inputs). Its
// guards — argument structure, dtypes and shapes, primitive values, what the code read from
// the module tree, free variables, Kiln's settings — compile into one function; a later call
// that passes them runs the program without running any user JS, and repeats the writes the
// trace saw (BatchNorm's running statistics). A failing guard records why and traces again,
// up to `recompileLimit` entries; past that the code runs eagerly (one warning naming the
// guard). A function with graph breaks or unreplayable side effects runs in REPLAY MODE: its
// JS runs on every call under lazy mode, whose segments are compiled once and found again by
// fingerprint. Nothing is published before it has succeeded, so an error in user code (thrown
// unchanged) or in compilation leaves no half-made entry.

import { analyzeFunction, analyzeModuleForward, type SourceAnalysis } from "./analyze.ts";
import type { EvalValue } from "../ir/evaluate.ts";
import type { Literal } from "../ir/literal.ts";
import type { PipelineOptions } from "../passes/index.ts";
import {
  compileModule,
  type CompileResult,
  type Executable,
  getBackend,
  interpreterBackend,
  ProgramCache,
  single,
  UnsupportedError,
} from "../runtime/index.ts";
import { log, logEnabled } from "../util/log.ts";
import { cloneModule } from "../ir/clone.ts";
import { scalarLiteral } from "../ir/literal.ts";
import type { Module } from "../ir/module.ts";
import type { ArrayShape } from "../ir/shape.ts";
import { DynamicPadder, runPadded } from "../passes/dynamic_padder.ts";
import {
  currentMode,
  eagerBackendName,
  operandLiteral,
  tensorFromLiteral,
  withMode,
} from "../tensor/dispatch.ts";
import { isLazy, lazy, lazyStats, realizeAll } from "../tensor/lazy.ts";
import { callForward, Module as NNModule } from "../tensor/nn/module.ts";
import { setObserveHook, Tensor } from "../tensor/tensor.ts";
import {
  type BucketPolicy,
  bucketFor,
  checkBuckets,
  checkDynamicOption,
  declaredDims,
  type DimRange,
  type DynamicDimPlan,
  type DynamicOption,
  DynamicShapeError,
  dynamicMarks,
  outOfRange,
  policyName,
  resizeTensor,
} from "./dynamic.ts";
import {
  type Affine,
  affineAt,
  blameGroup,
  buildDynamicModule,
  fitAffine,
  movedAlone,
  pointText,
} from "./dynamic_module.ts";
import { readFreeVariables } from "./freevars.ts";
import { type OracleCode, sizeBranchOracle, type SizeBranchQuestion } from "./size_oracle.ts";
import { describeValue, type Guard, GuardSet, type GuardSpec } from "./guards.ts";
import { flatten, formatPath, isContainer, type Leaf, type TreeSpec, unflatten } from "./pytree.ts";
import {
  formatLocation,
  parameterNames,
  type SourceLocation,
  userLocation,
} from "./source.ts";
import {
  type CompileStats,
  GraphBreakError,
  RecompileError,
  StatsCounter,
} from "./stats.ts";
import {
  type Binding,
  buildProgram,
  type InputSlot,
  type Program,
  type Src,
  TracedInputImpl,
  Tracer,
} from "./trace.ts";

// ---- Options and the callable ---------------------------------------------------------------

export interface CompileOptions {
  /** A registered backend's name; default: the fastest available (guarded as a setting). */
  backend?: string;
  /** A graph break or an unreplayable side effect is an error naming the source line. */
  fullgraph?: boolean;
  /** Cache entries per function before running eagerly (default 8). */
  recompileLimit?: number;
  /** Any recompilation throws a RecompileError (for tests and CI). */
  errorOnRecompile?: boolean;
  /**
   * The program cache: "disk" (the process-wide cache, memory and disk; the default),
   * "memory" (a process-wide memory-only cache), "off" / false (compile every time), or a
   * ProgramCache.
   */
  cache?: "memory" | "disk" | "off" | false | ProgramCache;
  /** Fold parameters and buffers into the program as constants (guarded by value identity). */
  freeze?: boolean;
  /** Read and guard free variables that can change (default true; see freevars.ts). */
  guardFreeVariables?: boolean;
  /** Optimization pipeline options (verify, disable, dumpDir). */
  pipeline?: PipelineOptions;
  /**
   * Which argument dims are dynamic (docs/dynamic-shapes.md): "auto" (the default: a dim whose
   * size changes between calls becomes dynamic), false (every shape compiles its own program),
   * or declared dims keyed by argument path or position: `{ x: { 1: { max: 1024 } } }`.
   */
  dynamic?: DynamicOption;
  /** How sizes of a dynamic dim share programs: "pow2" (default), a list, { multiple }, "none". */
  buckets?: BucketPolicy;
  /** A size outside a declared range: "error" (default) throws; "recompile" specializes it. */
  outOfRange?: "error" | "recompile";
}

type AnyFunction = (...args: never[]) => unknown;

/** What compile() returns: call it like the original; `stats` says what happened. */
export interface CompiledFunction<F extends AnyFunction> {
  (...args: Parameters<F>): ReturnType<F>;
  readonly stats: CompileStats;
  /** The compiled model (compile() of an nn.Module). */
  readonly module: NNModule | undefined;
  /** The original function (a module's forward for a model). */
  readonly original: F;
  /** The guards of each cache entry, newest last. */
  readonly guards: readonly (readonly Guard[])[];
  /** Forgets every cache entry and the replay decision (stats are kept). */
  reset(): void;
  /** Internal state for explain(). */
  readonly [INTERNALS]: Internals;
}

export type CompiledModule<M extends NNModule & { forward: AnyFunction }> = CompiledFunction<
  M["forward"]
> & { readonly module: M };

export const INTERNALS: unique symbol = Symbol("kiln.compile.internals");

// ---- Cache entries ---------------------------------------------------------------------------

/** Dims that share one size on a call (equal size, equal bucket): one size of the program. */
interface SizeGroup {
  readonly dims: DynamicDimPlan[];
  readonly lo: number;
  /** Lowered when the code rejects sizes up to the bucket's top. */
  hi: number;
}

/** Each independent group costs traces (one more at its bottom); past this, specialize. */
const MAX_SIZE_GROUPS = 4;

/** A dynamic program, or why not (`group`: the one group the reason belongs to, if one). */
type DynamicBuild =
  | { ok: true; exe: Executable; module: Module; readers: Map<number, Affine>; hit: boolean }
  | { ok: false; why: string; group?: number };

/** How a result leaf (or a written value) is produced on a compiled call. */
type OutLeaf =
  | { readonly kind: "result"; readonly index: number }
  | { readonly kind: "arg"; readonly keys: readonly (string | number)[] }
  | { readonly kind: "state"; readonly owner: object; readonly key: string }
  | { readonly kind: "const"; readonly value: unknown };

interface GraphEntry {
  readonly guards: GuardSet;
  readonly exe: Executable | undefined;
  readonly module: import("../ir/module.ts").Module | undefined;
  readonly readers: readonly ((args: readonly unknown[]) => Literal)[];
  readonly tuple: boolean;
  readonly outSpec: TreeSpec;
  readonly outLeaves: readonly OutLeaf[];
  readonly writes: readonly { target: object; key: string; leaf: OutLeaf }[];
  readonly ops: number;
  readonly freeNames: readonly string[];
  /** Set when the program has bounded dynamic dims: the module runPadded pads for. */
  readonly dynamicModule?: import("../ir/module.ts").Module;
}

/** What explain() reads. */
export interface Internals {
  readonly name: string;
  entries(): readonly GraphEntry[];
  lastTrace(): TraceSummary | undefined;
  analysis(): SourceAnalysis | undefined;
}

/** What the last trace found (explain() prints it). */
export interface TraceSummary {
  readonly ops: number;
  readonly segments: number;
  readonly opsPerSegment: readonly number[];
  readonly breaks: readonly { reason: string; location: SourceLocation | undefined }[];
  readonly replayReasons: readonly { reason: string; location: SourceLocation | undefined }[];
  readonly guards: readonly Guard[];
  readonly module: import("../ir/module.ts").Module | undefined;
}

// ---- Settings --------------------------------------------------------------------------------

const SETTING_NAMES = ["kiln.defaultBackend", "kiln.eagerBackend", "kiln.lazy"] as const;

/** Kiln's global settings a compiled program depends on, in SETTING_NAMES order. */
function settingsNow(): unknown[] {
  return [getBackend().name, eagerBackendName(), isLazy()];
}

// ---- Program caches ---------------------------------------------------------------------------

let memoryCache: ProgramCache | undefined;

function programCache(option: CompileOptions["cache"]): ProgramCache | false | undefined {
  if (option === undefined || option === "disk") return undefined;
  if (option === false || option === "off") return false;
  if (option === "memory") return (memoryCache ??= new ProgramCache({ disk: false }));
  if (option instanceof ProgramCache) return option;
  throw new TypeError(
    `compile: cache must be "memory", "disk", "off", false or a ProgramCache, got ` +
      describeValue(option),
  );
}

// ---- Static analysis -------------------------------------------------------------------------

const REPLAY_KINDS = new Set(["print", "random", "clock", "io", "process", "timer", "async"]);

interface Analysis {
  readonly result: SourceAnalysis | undefined;
  /** Side effects found statically that make the function run in replay mode. */
  readonly sideEffects: readonly { reason: string; location: SourceLocation | undefined }[];
  /** Free variables to read on every call (mutable bindings) and their names. */
  readonly perCall: readonly string[];
  /** Free variables whose binding cannot change: guarded by what they hold. */
  readonly fixed: readonly string[];
}

function analyze(fn: AnyFunction, model: NNModule | undefined): Analysis {
  const isModule = model !== undefined;
  let result: SourceAnalysis | undefined;
  try {
    result = model ? analyzeModuleForward(model) : analyzeFunction(fn);
  } catch (e) {
    log("guards", () => `source analysis failed: ${e instanceof Error ? e.message : String(e)}`);
    return { result: undefined, sideEffects: [], perCall: [], fixed: [] };
  }
  const file = result.file;
  const at = (line: number, column: number, f?: string): SourceLocation | undefined =>
    (f ?? file) !== undefined ? { file: (f ?? file)!, line, column } : undefined;
  const sideEffects: { reason: string; location: SourceLocation | undefined }[] = [];
  for (const s of result.sideEffects) {
    const kind = s.kind;
    const outside = kind === "mutation" || kind === "assignment";
    // Writes to `this.` are seen (and replayed) by the module proxy; other mutations are not.
    if (outside && /^\s*this\b/.test(s.call)) continue;
    if (!REPLAY_KINDS.has(kind) && !outside) continue;
    sideEffects.push({
      reason: `${s.call}: ${s.reason}`,
      location: at(s.line, s.column, s.file),
    });
  }
  const perCall: string[] = [];
  const fixed: string[] = [];
  const seen = new Set<string>();
  for (const v of result.freeVariables) {
    if (seen.has(v.name)) continue;
    const { guard, binding } = v;
    if (!guard || binding === "import" || binding === "function" || binding === "class") continue;
    seen.add(v.name);
    // A module's forward reads its own file's module scope: those are constants of the model
    // file, so only mutable bindings are read per call.
    if (binding === "const" || (isModule && binding === "unresolved")) fixed.push(v.name);
    else perCall.push(v.name);
  }
  return { result, sideEffects, perCall, fixed };
}

// ---- compile() -------------------------------------------------------------------------------

let tracing = 0;

export function compile<M extends NNModule & { forward: AnyFunction }>(
  model: M,
  options?: CompileOptions,
): CompiledModule<M>;
export function compile(
  model: NNModule,
  options?: CompileOptions,
): CompiledFunction<(...args: unknown[]) => unknown> & { readonly module: NNModule };
export function compile<F extends AnyFunction>(
  fn: F,
  options?: CompileOptions,
): CompiledFunction<F>;
export function compile(
  target: unknown,
  options: CompileOptions = {},
): CompiledFunction<AnyFunction> {
  const isModule = target instanceof NNModule;
  if (!isModule && typeof target !== "function") {
    throw new TypeError(
      `compile: expected a function or an nn.Module, got ${describeValue(target)}`,
    );
  }
  if (typeof options !== "object" || options === null) {
    throw new TypeError(`compile: options must be an object, got ${describeValue(options)}`);
  }
  const model = isModule ? (target as NNModule) : undefined;
  let fn: AnyFunction;
  if (model) {
    const f: unknown = (model as unknown as { forward?: unknown }).forward;
    if (typeof f !== "function") {
      throw new TypeError(`compile: ${model.className()} has no forward method`);
    }
    fn = f as AnyFunction;
  } else {
    fn = target as AnyFunction;
  }
  const limit = options.recompileLimit ?? 8;
  if (!Number.isInteger(limit) || limit < 1) {
    throw new TypeError(`compile: recompileLimit must be an integer >= 1, got ${String(limit)}`);
  }
  if (options.backend !== undefined) getBackend(options.backend);
  const cache = programCache(options.cache);
  const dynamicOption: DynamicOption = options.dynamic ?? "auto";
  const buckets: BucketPolicy = options.buckets ?? "pow2";
  checkBuckets(buckets);
  checkDynamicOption(dynamicOption, buckets);
  const rangeMode = options.outOfRange ?? "error";
  if (rangeMode !== "error" && rangeMode !== "recompile") {
    throw new TypeError(
      `compile: outOfRange must be "error" or "recompile", got ${describeValue(rangeMode)}`,
    );
  }
  /** Dims made dynamic by automatic dynamism: path text -> dims. */
  const autoDims = new Map<string, Set<number>>();
  const name = model ? model.className() : fn.name || "anonymous";
  const rootName = model ? "this" : undefined;
  let names: (string | undefined)[] | undefined;
  const argName = (i: number) => {
    if (names === undefined) {
      const r = getAnalysis().result;
      const at =
        r?.source === "file" && r.file !== undefined && r.line !== undefined
          ? { file: r.file, line: r.line, column: r.column ?? 1 }
          : undefined;
      names = parameterNames(fn, at);
      if (names.length === 0 && at) names = parameterNames(fn);
    }
    return names[i] ?? `args[${i}]`;
  };
  const pathText = (path: readonly (string | number)[]): string =>
    path.length === 0 ? "args" : formatPath(argName(path[0] as number), path.slice(1));

  const stats = new StatsCounter();
  let entries: GraphEntry[] = [];
  /** Entries made for a bucket (bounded in number by the buckets): not under recompileLimit. */
  const bucketed = new WeakSet<GraphEntry>();
  let replay = false;
  let warned = false;
  let analysis: Analysis | undefined;
  let lastTrace: TraceSummary | undefined;

  const getAnalysis = (): Analysis => (analysis ??= analyze(fn, model));
  const oracleCode: OracleCode = {
    name,
    fn: model ? undefined : fn,
    modules: () => (model ? [model] : fixedFreeModules(getAnalysis(), fn).map(([, m]) => m)),
  };
  /** The size-branch question of the bucketed trace in progress (it may record coverage). */
  let sizeCheck: SizeBranchQuestion | undefined;

  const lazyOptions = () => ({
    ...(options.backend !== undefined && { backend: options.backend }),
    ...(cache !== undefined && { cache }),
    ...(options.pipeline !== undefined && { pipeline: options.pipeline }),
  });

  const runUser = (self: unknown, args: readonly unknown[]): unknown =>
    model ? callForward(self as NNModule, args) : (fn as (...a: unknown[]) => unknown)(...args);

  const readFree = (): unknown[] => {
    const a = getAnalysis();
    if (a.perCall.length === 0 || options.guardFreeVariables === false) return [];
    return readFreeVariables(fn, a.perCall).values;
  };

  // ---- replay mode ----

  const replayCall = (args: readonly unknown[]): unknown => {
    const before = lazyStats();
    const saved = setObserveHook((t, how) => {
      const loc = userLocation();
      const what = how === "valueOf" ? "a tensor coerced to a number" : `${how}() on a tensor`;
      stats.noteBreak(how, `${what} (shape [${t.shape.join(", ")}]) reads data`, loc);
      log("graph_breaks", () => `${name}: graph break at ${formatLocation(loc)}: ${what}`);
    });
    let result: unknown;
    try {
      result = lazy(() => runUser(model, args), lazyOptions());
    } finally {
      setObserveHook(saved);
    }
    realizePending(result);
    const after = lazyStats();
    stats.segments += after.graphs - before.graphs;
    stats.segmentsCompiled += after.compiled - before.compiled;
    return result;
  };

  // ---- dynamic dims ----

  /** The dynamic dims of this call's argument tensors (declared, marked, or automatic). */
  const planDynamic = (leaves: readonly Leaf[]): DynamicDimPlan[] => {
    // dynamic: false turns automatic dynamism off; markDynamic still applies (as in torch).
    const out: DynamicDimPlan[] = [];
    for (const l of leaves) {
      if (l.kind !== "tensor") continue;
      const t = l.value as Tensor;
      const path = pathText(l.path);
      const declared = declaredDims(dynamicOption, l.path, path, t.shape.length);
      const marked = dynamicMarks(t);
      const auto = dynamicOption === false ? undefined : autoDims.get(path);
      for (let d = 0; d < t.shape.length; d++) {
        const range: DimRange | undefined =
          declared.get(d) ?? marked?.get(d) ?? (auto?.has(d) ? {} : undefined);
        if (range === undefined) continue;
        const source = declared.has(d) ? "option" : marked?.has(d) ? "markDynamic" : "auto";
        out.push({ keys: l.path, path, dim: d, size: t.shape[d]!, range, source });
      }
    }
    return out;
  };

  /**
   * The usable dims of this call in SIZE GROUPS: dims with equal size and equal bucket share
   * one size (and get an equal guard); dims of different sizes are independent groups, each
   * with its own bucket (an encoder's frames and a decoder's tokens). Past MAX_SIZE_GROUPS the
   * rest are specialized: each group costs traces.
   */
  const choosePlan = (plan: readonly DynamicDimPlan[]): SizeGroup[] | undefined => {
    const groups: SizeGroup[] = [];
    for (const p of plan) {
      const bad = outOfRange(p);
      if (bad !== undefined) {
        if (rangeMode === "error") throw new DynamicShapeError(`compile(${name}): ${bad}`);
        stats.noteSpecialized(stats.calls, `${bad}: specialized (outOfRange: "recompile")`);
        continue;
      }
      const b = bucketFor(p.size, buckets, p.range);
      if (typeof b === "string") {
        log("recompiles", () => `${name}: ${p.path}.shape[${p.dim}]: ${b}`);
        continue;
      }
      if (b.lo >= b.hi) continue;
      const same = groups.find((g) => g.lo === b.lo && g.hi === b.hi && g.dims[0]!.size === p.size);
      if (same) {
        same.dims.push(p);
      } else if (groups.length < MAX_SIZE_GROUPS) {
        groups.push({ dims: [p], lo: b.lo, hi: b.hi });
      } else {
        stats.noteSpecialized(
          stats.calls,
          `${p.path}.shape[${p.dim}] (${p.size}) is specialized: at most ${MAX_SIZE_GROUPS} ` +
            `independent size groups per program`,
        );
      }
    }
    return groups.length > 0 ? groups : undefined;
  };

  /** The arguments with each group's dims resized to its size in `sizes`. */
  const argsAt = (
    spec: TreeSpec,
    leaves: readonly Leaf[],
    groups: readonly SizeGroup[],
    sizes: readonly number[],
  ): unknown[] => {
    const values = leaves.map((l) => {
      if (l.kind !== "tensor") return l.value;
      const resize = new Map<number, number>();
      for (const [g, group] of groups.entries()) {
        for (const p of group.dims) if (sameKeys(p.keys, l.path)) resize.set(p.dim, sizes[g]!);
      }
      return resize.size === 0 ? l.value : resizeTensor(l.value as Tensor, resize);
    });
    return unflatten(spec, values) as unknown[];
  };

  /** Traces the code again on other arguments and builds its program (no break allowed). */
  const traceProgram = (altArgs: unknown[]) => {
    const a = getAnalysis();
    const tracer = new Tracer(lazyOptions());
    const { spec, leaves } = flatten([...altArgs]);
    const symLeaves = leaves.map((l) =>
      l.kind === "tensor" ? tracer.argInput(l.value as Tensor, l.path, pathText(l.path)) : l.value,
    );
    const symArgs = wrapArgs(tracer, unflatten(spec, symLeaves) as unknown[], altArgs, pathText);
    let self: unknown;
    if (model) {
      tracer.swapState(model, "this");
      self = tracer.wrap(model, "this");
    }
    for (const [n, m] of model ? [] : fixedFreeModules(a, fn)) tracer.swapState(m, n);
    const saved = setObserveHook((t, how) => {
      throw new DynamicShapeError(`${how}() on a tensor of shape [${t.shape.join(", ")}]`);
    });
    let result: unknown;
    tracing++;
    try {
      result = withMode(tracer.mode, () => runUser(self, symArgs));
    } finally {
      tracing--;
      setObserveHook(saved);
      tracer.restore();
      tracer.undoWrites();
    }
    const requested: Src[] = [];
    const note = (v: unknown) => {
      if (!(v instanceof Tensor)) return;
      const src = tracer.srcOfTensor(v);
      if (src.kind === "node") requested.push(src);
    };
    for (const l of flatten(result).leaves) note(l.value);
    for (const w of tracer.writes) if (w.value.kind === "tensor") note(w.value.tensor);
    if (requested.length === 0) throw new DynamicShapeError("the trace computed nothing");
    const program = buildProgram(
      name,
      requested,
      (sl) => concreteOf(tracer.slotTensors[sl]!),
      tracer.slots,
      options.freeze === true,
    );
    return { program, tracer };
  };

  /**
   * The dynamic program for this call's buckets, or why the dims are specialized. When the
   * reason belongs to one group of several (a trace that moved that group alone differs), that
   * group is specialized (removed from `groups`, its dims compiled at this call's size) and the
   * others are tried again.
   */
  const buildDynamic = (
    spec: TreeSpec,
    leaves: readonly Leaf[],
    /** Mutated: a group's `hi` is lowered when the code rejects its top; groups are removed. */
    groups: SizeGroup[],
    real: Program,
    realTracer: Tracer,
  ): DynamicBuild => {
    for (;;) {
      const r = buildGroups(spec, leaves, groups, real, realTracer);
      if (r.ok || r.group === undefined || groups.length === 1) return r;
      const [g] = groups.splice(r.group, 1);
      const d = g!.dims[0]!;
      const why = `${d.path}.shape[${d.dim}] = ${d.size} is specialized: ${r.why}`;
      stats.noteSpecialized(stats.calls, why);
      log("recompiles", () => `${name}: ${why}`);
    }
  };

  /**
   * One try of buildDynamic. The code is traced at every group's top (the program's bounds),
   * then from there with one group at a time at its bottom (so each difference belongs to one
   * group), at this call's sizes, and at every bucket's middle when that adds a point where the
   * groups move together, so a product of two sizes is caught (with one group: only when this
   * call is at the top, as the fit's third point; one group traces exactly as before groups).
   */
  const buildGroups = (
    spec: TreeSpec,
    leaves: readonly Leaf[],
    groups: SizeGroup[],
    real: Program,
    realTracer: Tracer,
  ): DynamicBuild => {
    const k = groups.length;
    const names = groups.map((g) => `${g.dims[0]!.path}.shape[${g.dims[0]!.dim}]`);
    const callSizes = groups.map((g) => g.dims[0]!.size);
    const same = (x: readonly number[], y: readonly number[]) => x.every((n, i) => n === y[i]);
    let top: ReturnType<typeof traceProgram>;
    const others: { program: Program; sizes: number[] }[] = [];
    let tracedAt: number[] = callSizes;
    let failedGroup: number | undefined;
    try {
      if (groups.every((g, i) => g.hi === callSizes[i])) {
        top = { program: real, tracer: realTracer };
      } else {
        try {
          tracedAt = groups.map((g) => g.hi);
          top = traceProgram(argsAt(spec, leaves, groups, tracedAt));
        } catch (e) {
          // The code rejects a bucket's top (a context length, a table size): the bucket ends
          // at the largest size it accepts, found by bisection between here and the top, one
          // group at a time (the others at the tops already found).
          const cur = [...callSizes];
          let best: ReturnType<typeof traceProgram> = { program: real, tracer: realTracer };
          for (const [g, group] of groups.entries()) {
            if (cur[g] === group.hi) continue;
            const at = (n: number) => cur.map((x, h) => (h === g ? n : x));
            if (k > 1) {
              try {
                best = traceProgram(argsAt(spec, leaves, groups, at(group.hi)));
                cur[g] = group.hi;
                continue;
              } catch {
                // bisect below
              }
            }
            let ok = callSizes[g]!;
            let bad = group.hi;
            while (bad - ok > 1) {
              const mid = Math.floor((ok + bad) / 2);
              try {
                best = traceProgram(argsAt(spec, leaves, groups, at(mid)));
                ok = mid;
              } catch {
                bad = mid;
              }
            }
            if (ok === callSizes[g] && callSizes[g] === group.lo) {
              failedGroup = k > 1 ? g : undefined;
              tracedAt = at(group.hi);
              throw e;
            }
            group.hi = ok;
            cur[g] = ok;
            log("recompiles", () =>
              `${name}: the bucket of ${names[g]} ends at ${ok}: ${String(e)}`);
          }
          top = best;
        }
      }
      const tops = groups.map((g) => g.hi);
      const points: number[][] = [];
      const add = (p: number[]) => {
        if (!same(p, tops) && !points.some((q) => same(q, p))) points.push(p);
      };
      for (const [g, group] of groups.entries()) add(tops.map((x, h) => (h === g ? group.lo : x)));
      add(callSizes);
      if (k > 1 || same(callSizes, tops)) add(groups.map((g) => Math.floor((g.lo + g.hi) / 2)));
      for (const p of points) {
        tracedAt = p;
        failedGroup = movedAlone(p, tops);
        const program = same(p, callSizes)
          ? real
          : traceProgram(argsAt(spec, leaves, groups, p)).program;
        others.push({ program, sizes: p });
      }
    } catch (e) {
      const msg = e instanceof Error ? e.message : String(e);
      const g0 = groups[0]!;
      return {
        ok: false,
        why: k === 1
          ? `tracing at another size in [${g0.lo}, ${g0.hi}] failed: ${msg}`
          : `tracing at ${pointText(tracedAt, names)} failed: ${msg}`,
        ...(failedGroup !== undefined && { group: failedGroup }),
      };
    }
    const tops = groups.map((g) => g.hi);
    const topText = pointText(tops, names);
    const tp = top.program;
    const readers = new Map<number, Affine>();
    for (const o of others) {
      const p = o.program;
      if (p.bindings.length !== tp.bindings.length || p.results !== tp.results ||
        p.resultIndex.join() !== tp.resultIndex.join()) {
        const g = movedAlone(o.sizes, tops);
        return {
          ok: false,
          why: `the program's inputs or results differ between ${topText} and ` +
            `${pointText(o.sizes, names)}: the code depends on the size${
              firstDifference(tp.module, p.module)}`,
          ...(g !== undefined && { group: g }),
        };
      }
    }
    if (real.resultIndex.join() !== tp.resultIndex.join()) {
      return { ok: false, why: `the program's results differ at ${topText}` };
    }
    for (const [b, bd] of tp.bindings.entries()) {
      const at = others.map((o) => o.program.bindings[b]!);
      if (at.some((x) => x.kind !== bd.kind)) {
        return { ok: false, why: `input ${b} of the program changes kind with the size` };
      }
      if (bd.kind === "slot") {
        if (at.some((x) => x.kind === "slot" && x.slot !== bd.slot)) {
          return { ok: false, why: `input ${b} of the program changes with the size` };
        }
      } else if (bd.kind === "const") {
        const l0 = operandLiteral(new Tensor(bd.impl));
        for (const x of at) {
          if (x.kind !== "const") continue;
          const l1 = operandLiteral(new Tensor(x.impl));
          if (l1.dims.join() !== l0.dims.join() || l1.data.some((v, q) => v !== l0.data[q])) {
            return { ok: false, why: `a tensor constant of the program changes with the size` };
          }
        }
      } else {
        const v0 = Number(bd.value);
        const pts = at.map(
          (x, j) => [others[j]!.sizes, Number((x as { value: unknown }).value)] as const,
        );
        if (pts.every(([, v]) => v === v0)) continue;
        const fit = fitAffine([[tops, v0], ...pts]);
        if (!fit) {
          const g = blameGroup([[tops, v0], ...pts]);
          return {
            ok: false,
            ...(g !== undefined && { group: g }),
            why: `a number passed to an op (${String(bd.value)} at ${topText}) changes with ` +
              `the ${k === 1 ? "size and is not an integer affine function of it" : "sizes and " +
              "is not an integer affine function of them"}`,
          };
        }
        readers.set(b, fit);
      }
    }
    // Where the program reads each group's size: any of its dims that is a program input.
    const sources = groups.map((group) => {
      for (const d of group.dims) {
        const param = tp.bindings.findIndex((bd) => {
          if (bd.kind !== "slot") return false;
          const slot = top.tracer.slots[bd.slot]!;
          return slot.kind === "arg" && sameKeys(slot.keys, d.keys);
        });
        if (param >= 0) return { param, dim: d.dim };
      }
      return undefined;
    });
    const built = buildDynamicModule(
      { module: tp.module, sizes: tops },
      others.map((o) => ({ module: o.program.module, sizes: o.sizes })),
      sources,
      names,
    );
    if (!built.ok) return built;
    const padded = cloneModule(built.module);
    try {
      new DynamicPadder().run(padded);
    } catch (e) {
      return { ok: false, why: `padding failed: ${e instanceof Error ? e.message : String(e)}` };
    }
    const r = compileProgram(padded, options.backend, cache, options.pipeline);
    return { ok: true, exe: r.executable, module: built.module, readers, hit: r.hit !== "miss" };
  };

  // ---- tracing ----

  const trace = (args: readonly unknown[], settings: unknown[], free: unknown[]): unknown => {
    const a = getAnalysis();
    if (options.fullgraph && a.sideEffects.length > 0) {
      const s = a.sideEffects[0]!;
      throw new GraphBreakError(`side effect: ${s.reason}`, s.location);
    }
    const lazyBefore = lazyStats();
    const { spec, leaves } = flatten([...args]);
    const chosen = choosePlan(planDynamic(leaves));
    sizeCheck = chosen ? sizeBranchOracle().ask(oracleCode) : undefined;
    const tracer = new Tracer(lazyOptions());
    const symLeaves = leaves.map((l) =>
      l.kind === "tensor" ? tracer.argInput(l.value as Tensor, l.path, pathText(l.path)) : l.value,
    );
    const symArgs = wrapArgs(tracer, unflatten(spec, symLeaves) as unknown[], [...args], pathText);
    const fixedModules = model ? [] : fixedFreeModules(a, fn);
    let self: unknown;
    if (model) {
      tracer.swapState(model, "this");
      self = tracer.wrap(model, "this");
    }
    for (const [n, m] of fixedModules) tracer.swapState(m, n);
    const hook = (t: Tensor, how: string) => {
      tracer.observe(t, how);
      const b = tracer.breaks[tracer.breaks.length - 1]!;
      const where = formatLocation(b.location);
      log("graph_breaks", () => `${name}: graph break at ${where}: ${b.reason}`);
      if (options.fullgraph) throw new GraphBreakError(`graph break: ${b.reason}`, b.location);
    };
    const saved = setObserveHook(hook);
    let result: unknown;
    tracing++;
    try {
      result = withMode(tracer.mode, () => runUser(self, symArgs));
    } finally {
      tracing--;
      setObserveHook(saved);
      tracer.restore();
    }
    if (isThenable(result)) {
      throw new TypeError(
        `compile(${name}): the function returned a Promise; compiled code must be synchronous`,
      );
    }
    const reasons = [...a.sideEffects, ...tracer.unreplayable];
    const out = flatten(result);
    const outLeaves: OutLeaf[] = [];
    const requested: Src[] = [];
    const leafFor = (v: unknown, leafPath: string): OutLeaf | undefined => {
      if (v instanceof Tensor) {
        const src = tracer.srcOfTensor(v);
        switch (src.kind) {
          case "node":
            requested.push(src);
            return { kind: "result", index: requested.length - 1 };
          case "slot": {
            const slot = tracer.slots[src.slot]!;
            return slot.kind === "arg"
              ? { kind: "arg", keys: slot.keys }
              : { kind: "state", owner: slot.owner, key: slot.key };
          }
          case "const":
            return { kind: "const", value: new Tensor(src.impl) };
          case "scalar":
            return { kind: "const", value: src.value };
          default: {
            const never: never = src;
            throw new Error(`unknown src ${String(never)}`);
          }
        }
      }
      const raw = tracer.unwrap(v);
      if (raw === null || (typeof raw !== "object" && typeof raw !== "function")) {
        return { kind: "const", value: raw };
      }
      const argLeaf = leaves.find((l) => l.kind === "opaque" && l.value === raw);
      if (argLeaf) return { kind: "arg", keys: argLeaf.path };
      if (raw !== v || raw === model) return { kind: "const", value: raw };
      reasons.push({
        reason:
          `returns ${describeValue(raw)} at ${leafPath} made by the call; compiled programs ` +
          `return tensors, primitives, arrays and plain objects`,
        location: undefined,
      });
      return undefined;
    };
    for (const l of out.leaves) {
      const leaf = leafFor(l.value, formatPath("result", l.path));
      if (leaf) outLeaves.push(leaf);
    }
    const writes: { target: object; key: string; leaf: OutLeaf }[] = [];
    for (const w of tracer.writes) {
      const leaf: OutLeaf | undefined =
        w.value.kind === "tensor"
          ? leafFor(w.value.tensor, w.path)
          : { kind: "const", value: w.value.value };
      if (leaf) writes.push({ target: w.target, key: w.key, leaf });
    }
    const segments = tracer.breaks.length + 1;
    const opsPerSegment = Array.from({ length: segments }, (_, i) =>
      tracer.nodes.filter((n) => n.segment === i).length,
    );
    const summaryBase = {
      ops: tracer.nodes.length,
      segments,
      opsPerSegment,
      breaks: tracer.breaks.map((b) => ({ reason: b.reason, location: b.location })),
      replayReasons: [
        ...reasons,
        ...tracer.breaks.map((b) => ({ reason: `graph break: ${b.reason}`, location: b.location })),
      ],
    };
    if (reasons.length > 0 || tracer.breaks.length > 0) {
      // Replay mode from now on; this call's values are lazy mode's (already correct).
      if (options.fullgraph && reasons.length > 0) {
        throw new GraphBreakError(`cannot replay: ${reasons[0]!.reason}`, reasons[0]!.location);
      }
      for (const b of tracer.breaks) stats.noteBreak(b.how, b.reason, b.location);
      for (const r of summaryBase.replayReasons) stats.noteReplayReason(r.reason, r.location);
      replay = true;
      stats.mode = "replay";
      lastTrace = { ...summaryBase, guards: [], module: undefined };
      log("recompiles", () => `${name}: runs in replay mode: ${reasons.concat(summaryBase.breaks)
        .map((r) => `${r.reason} at ${formatLocation(r.location)}`).join("; ")}`);
      const final = unflatten(
        out.spec,
        out.leaves.map((l) => restoreLeaf(tracer, l.value, args)),
      );
      fixWrites(tracer, args);
      realizePending(final);
      const lazyAfter = lazyStats();
      stats.segments += lazyAfter.graphs - lazyBefore.graphs;
      stats.segmentsCompiled += lazyAfter.compiled - lazyBefore.compiled;
      return final;
    }
    // ---- graph mode: build, compile, run, then publish ----
    const slotValue = (slot: number): Tensor => tracer.slotTensors[slot]!;
    let exe: Executable | undefined;
    let module: GraphEntry["module"];
    let bindings: readonly Binding[] = [];
    let resultIndex: readonly number[] = [];
    let ops = 0;
    let tuple = false;
    let dynamicModule: GraphEntry["module"];
    let affine = new Map<number, Affine>();
    let isBucketed = chosen === undefined && planDynamic(leaves).length > 0;
    if (requested.length > 0) {
      const program = buildProgram(
        name,
        requested,
        (s) => concreteOf(slotValue(s)),
        tracer.slots,
        options.freeze === true,
      );
      bindings = program.bindings;
      resultIndex = program.resultIndex;
      ops = program.ops;
      tuple = program.results > 1;
      // Code that branches on a size shares a bucket's program only when the traces never
      // evaluated the branch (compiler/dynamic.ts, docs/dynamic-shapes.md).
      const dyn = chosen && sizeCheck
        ? sizeCheck.decide(() => buildDynamic(spec, leaves, chosen, program, tracer))
        : undefined;
      if (dyn?.ok) {
        exe = dyn.exe;
        module = dynamicModule = dyn.module;
        affine = dyn.readers;
        isBucketed = true;
        if (dyn.hit) stats.programCacheHits++;
        log("recompiles", () => `${name}: one program for ${chosen!.map((g) =>
          `${g.dims.map((d) => `${d.path}.shape[${d.dim}]`).join(" == ")} in [${g.lo}, ${
            g.hi}]`).join(", ")}`);
      } else {
        if (dyn && chosen) {
          const dims = chosen.map((g) => `${g.dims[0]!.path}.shape[${g.dims[0]!.dim}] = ${
            g.dims[0]!.size}`);
          const why = `${dims.join(", ")} ${dims.length === 1 ? "is" : "are"} specialized: ${
            dyn.why}`;
          stats.noteSpecialized(stats.calls, why);
          log("recompiles", () => `${name}: ${why}`);
        }
        const r = compileProgram(program.module, options.backend, cache, options.pipeline);
        exe = r.executable;
        module = program.module;
        if (r.hit !== "miss") stats.programCacheHits++;
      }
    }
    const guardSpecs = buildGuards({
      spec,
      leaves,
      pathText,
      settings,
      free,
      freeNames: getAnalysis().perCall,
      fixed: fixedGuards(a, fn),
      reads: tracer.reads,
      slots: tracer.slots,
      used: bindings,
      freeze: options.freeze === true,
      backendGiven: options.backend !== undefined,
    });
    const guards = new GuardSet(
      dynamicModule && chosen ? withRangeGuards(guardSpecs, chosen) : guardSpecs,
    );
    const readers = bindings.map((bd, k) => {
      const fit = affine.get(k);
      if (!fit || !module || !chosen) return bindingReader(bd, tracer.slots);
      const type = (module.entry.parameters[k]!.shape as ArrayShape).type;
      const at = chosen.map((g) => g.dims[0]!);
      return (a: readonly unknown[]) => {
        const v = affineAt(fit, at.map((d) => (readKeys(a, d.keys) as Tensor).shape[d.dim]!));
        return scalarLiteral(type, type === "s64" ? BigInt(v) : v);
      };
    });
    const entry: GraphEntry = {
      guards,
      exe,
      module,
      readers,
      tuple,
      outSpec: out.spec,
      outLeaves: outLeaves.map((l) =>
        l.kind === "result" ? { kind: "result", index: resultIndex[l.index]! } : l,
      ),
      writes: writes.map((w) => ({
        ...w,
        leaf:
          w.leaf.kind === "result"
            ? { kind: "result", index: resultIndex[w.leaf.index]! }
            : w.leaf,
      })),
      ops,
      freeNames: getAnalysis().perCall,
      ...(dynamicModule !== undefined && { dynamicModule }),
    };
    if (isBucketed) bucketed.add(entry);
    tracer.undoWrites();
    const value = runEntry(entry, args);
    entries.push(entry);
    stats.compiles++;
    stats.mode = "graph";
    lastTrace = { ...summaryBase, guards: guards.guards, module };
    if (logEnabled("guards")) {
      log("guards", `${name}: entry ${entries.length} guards (${guards.specs.length}):`);
      for (const g of guards.guards) log("guards", `  ${describeGuard(g)}`);
    }
    return value;
  };

  /**
   * Automatic dynamism: every argument dim whose size differs from the closest entry's static
   * shape becomes dynamic. Returns the reason's additions (`dim 1 of x is now dynamic (<=256,
   * bucket pow2)`).
   */
  const markAutoDynamic = (
    closest: GraphEntry,
    inputs: { args: readonly unknown[] },
  ): string[] => {
    const out: string[] = [];
    for (const s of closest.guards.specs) {
      if (s.guard.kind !== "shape" || s.access.root !== "arg") continue;
      const v = readKeys(inputs.args, s.access.keys);
      const dims = s.guard.expected as readonly (number | null)[];
      if (!(v instanceof Tensor) || v.shape.length !== dims.length) continue;
      for (const [d, e] of dims.entries()) {
        const now = v.shape[d]!;
        if (e === null || e === now) continue;
        const path = s.guard.path;
        let set = autoDims.get(path);
        if (!set) autoDims.set(path, (set = new Set()));
        if (set.has(d)) continue;
        set.add(d);
        const b = bucketFor(now, buckets, {});
        const how =
          typeof b === "string"
            ? `${b}`
            : b.lo === b.hi
              ? `bucket [${b.lo}, ${b.hi}] holds one size, compiled as static`
              : `<=${b.hi}, bucket ${policyName(buckets)}`;
        out.push(`dim ${d} of ${path} is now dynamic (${how})`);
      }
    }
    return out;
  };

  // ---- the callable ----

  function compiled(this: unknown, ...args: unknown[]): unknown {
    stats.calls++;
    if (tracing > 0) {
      // Inside another function's trace: inline, so the outer trace records these ops.
      return runUser(model, args);
    }
    if (replay) return replayCall(args);
    const settings = settingsNow();
    const free = entries.length > 0 || getAnalysis().perCall.length > 0 ? readFree() : [];
    const inputs = { args, free, settings };
    for (const e of entries) {
      if (e.guards.first(inputs) < 0) {
        stats.cacheHits++;
        return runEntry(e, args);
      }
    }
    if (entries.length > 0) {
      // The reason is taken from the closest entry: the one that failed latest in its list
      // (the newest among equals), so a third shape names the dim, not an older dtype.
      let closest = entries[0]!;
      let depth = -1;
      for (const e of entries) {
        const i = e.guards.first(inputs);
        if (i >= depth) {
          depth = i;
          closest = e;
        }
      }
      const f: { index: number; guard: Guard; reason: string } = closest.guards.failure(inputs) ?? {
        index: 0,
        guard: closest.guards.guards[0]!,
        reason: "a guard failed",
      };
      log("guards", () => `${name}: guard failed: ${f.reason}`);
      if (options.errorOnRecompile) throw new RecompileError(name, f.reason, f.guard);
      const madeDynamic = dynamicOption === "auto" ? markAutoDynamic(closest, inputs) : [];
      if (madeDynamic.length > 0) f.reason = `${f.reason}: ${madeDynamic.join("; ")}`;
      if (f.guard.kind === "equal") {
        // Both dims passed their range guards, so both are dynamic again this call, with
        // different sizes: the next program has them in two size groups.
        f.reason = `${f.reason}: ${f.guard.path} and ${String(f.guard.expected)} are now ` +
          `separate size groups`;
      }
      const counted = entries.filter((e) => !bucketed.has(e)).length;
      // A bucket miss or a split size group makes a bucketed entry: not under the limit.
      const bucketMiss = f.guard.kind === "range" || f.guard.kind === "equal";
      if (counted >= limit && madeDynamic.length === 0 && !bucketMiss) {
        stats.fallbacks.push({ call: stats.calls, reason: f.reason });
        if (!warned) {
          warned = true;
          console.warn(
            `kiln: compile(${name}) reached its recompile limit (${limit}); running eagerly ` +
              `from now on when no entry matches. Last failing guard: ${f.reason}`,
          );
        }
        return runUser(model, args);
      }
      stats.recompiles.push({ call: stats.calls, reason: f.reason, guard: f.guard });
      log("recompiles", () => `${name}: recompiling (call ${stats.calls}): ${f.reason}`);
    }
    try {
      return trace(args, settings, free);
    } finally {
      sizeCheck?.close();
      sizeCheck = undefined;
    }
  }

  const internals: Internals = {
    name,
    entries: () => entries,
    lastTrace: () => lastTrace,
    analysis: () => getAnalysis().result,
  };
  Object.defineProperties(compiled, {
    stats: { get: () => stats.snapshot(entries.length) },
    module: { value: model },
    original: { value: fn },
    guards: { get: () => entries.map((e) => e.guards.guards) },
    reset: {
      value: () => {
        entries = [];
        replay = false;
        warned = false;
        stats.mode = "none";
      },
    },
    [INTERNALS]: { value: internals },
  });
  return compiled as unknown as CompiledFunction<AnyFunction>;
}

// ---- Running an entry ------------------------------------------------------------------------

function runEntry(e: GraphEntry, args: readonly unknown[]): unknown {
  let results: EvalValue[] = [];
  if (e.exe) {
    const inputs = e.readers.map((r) => r(args));
    const out = e.dynamicModule ? runPadded(e.exe, e.dynamicModule, inputs) : e.exe.run(inputs);
    results = e.tuple ? (out as EvalValue[]) : [out];
  }
  const tensors: (Tensor | undefined)[] = results.map(() => undefined);
  const produce = (l: OutLeaf): unknown => {
    switch (l.kind) {
      case "result":
        return (tensors[l.index] ??= tensorFromLiteral(single(results[l.index]!)));
      case "arg": {
        let v: unknown = args;
        for (const k of l.keys) v = (v as Record<string | number, unknown>)[k];
        return v;
      }
      case "state":
        return (l.owner as Record<string, unknown>)[l.key];
      case "const":
        return l.value instanceof Tensor ? new Tensor(l.value.impl) : l.value;
      default: {
        const never: never = l;
        throw new Error(`unknown output ${String(never)}`);
      }
    }
  };
  const value = unflatten(e.outSpec, e.outLeaves.map(produce));
  for (const w of e.writes) (w.target as Record<string, unknown>)[w.key] = produce(w.leaf);
  return value;
}

function bindingReader(
  bd: Binding,
  slots: readonly InputSlot[],
): (args: readonly unknown[]) => Literal {
  switch (bd.kind) {
    case "const": {
      const lit = operandLiteral(new Tensor(bd.impl));
      return () => lit;
    }
    case "scalar": {
      const lit = operandLiteral(bd.value);
      return () => lit;
    }
    case "slot": {
      const slot = slots[bd.slot]!;
      if (slot.kind === "state") {
        const owner = slot.owner as Record<string, Tensor>;
        const key = slot.key;
        return () => operandLiteral(owner[key]!);
      }
      const keys = slot.keys;
      return (args) => {
        let v: unknown = args;
        for (const k of keys) v = (v as Record<string | number, unknown>)[k];
        return operandLiteral(v as Tensor);
      };
    }
    default: {
      const never: never = bd;
      throw new Error(`unknown binding ${String(never)}`);
    }
  }
}

function compileProgram(
  module: import("../ir/module.ts").Module,
  backend: string | undefined,
  cache: ProgramCache | false | undefined,
  pipeline: PipelineOptions | undefined,
): CompileResult {
  const opts = {
    ...(backend !== undefined && { backend }),
    ...(cache !== undefined && { cache }),
    ...(pipeline !== undefined && { pipeline }),
  };
  try {
    return compileModule(module, opts);
  } catch (e) {
    const name = getBackend(backend).name;
    if (!(e instanceof UnsupportedError) || name === interpreterBackend.name) throw e;
    log("perf", () => `compile: falls back to the interpreter: ${e.message}`);
    return compileModule(module, { ...opts, backend: interpreterBackend.name });
  }
}

// ---- Guards of an entry ----------------------------------------------------------------------

interface GuardSources {
  readonly spec: TreeSpec;
  readonly leaves: readonly Leaf[];
  readonly pathText: (path: readonly (string | number)[]) => string;
  readonly settings: readonly unknown[];
  readonly free: readonly unknown[];
  readonly freeNames: readonly string[];
  readonly fixed: readonly GuardSpec[];
  readonly reads: readonly GuardSpec[];
  readonly slots: readonly InputSlot[];
  readonly used: readonly Binding[];
  readonly freeze: boolean;
  readonly backendGiven: boolean;
}

function buildGuards(s: GuardSources): GuardSpec[] {
  const out: GuardSpec[] = [];
  for (const [i, n] of SETTING_NAMES.entries()) {
    if (i === 0 && s.backendGiven) continue;
    out.push({
      guard: { kind: "value", path: n, expected: s.settings[i] },
      access: { root: "setting", index: i },
      test: "plain",
    });
  }
  // Argument structure, container by container, then leaves (parents before children).
  const walk = (spec: TreeSpec, keys: (string | number)[]): void => {
    const path = s.pathText(keys);
    switch (spec.type) {
      case "array":
        if (keys.length === 0) {
          out.push({
            guard: { kind: "value", path: "arguments.length", expected: spec.items.length },
            access: { root: "argCount" },
            test: "plain",
          });
        } else {
          out.push({
            guard: { kind: "value", path, expected: spec.items.length },
            access: { root: "arg", keys },
            test: "array",
          });
        }
        spec.items.forEach((c, i) => walk(c, [...keys, i]));
        return;
      case "object":
        out.push({
          guard: { kind: "value", path, expected: "object" },
          access: { root: "arg", keys },
          test: "object",
        });
        out.push({
          guard: { kind: "value", path: `Object.keys(${path})`, expected: spec.keys.join(",") },
          access: { root: "keys", of: { root: "arg", keys } },
          test: "plain",
        });
        spec.keys.forEach((k, i) => walk(spec.items[i]!, [...keys, k]));
        return;
      case "leaf":
        return;
      default: {
        const never: never = spec;
        throw new Error(`unknown spec ${String(never)}`);
      }
    }
  };
  walk(s.spec, []);
  for (const l of s.leaves) {
    const path = s.pathText(l.path);
    const access = { root: "arg", keys: l.path } as const;
    if (l.kind === "tensor") {
      const t = l.value as Tensor;
      out.push({ guard: { kind: "dtype", path, expected: t.dtype }, access, test: "tensor" });
      out.push({ guard: { kind: "shape", path, expected: [...t.shape] }, access, test: "tensor" });
    } else if (l.kind === "opaque") {
      out.push({ guard: { kind: "identity", path, expected: l.value }, access, test: "plain" });
    } else {
      out.push({ guard: { kind: "value", path, expected: l.value }, access, test: "plain" });
    }
  }
  for (const [i, n] of s.freeNames.entries()) {
    const v = s.free[i];
    const primitive = v === null || (typeof v !== "object" && typeof v !== "function");
    out.push({
      guard: { kind: primitive ? "value" : "identity", path: n, expected: v },
      access: { root: "free", index: i },
      test: "plain",
    });
  }
  out.push(...s.fixed);
  const reads = [...s.reads];
  const usedSlots = new Set<number>();
  for (const b of s.used) if (b.kind === "slot") usedSlots.add(b.slot);
  for (const [i, slot] of s.slots.entries()) {
    if (slot.kind !== "state") continue;
    const access = { root: "ref", ref: slot.owner, key: slot.key } as const;
    if (s.freeze) {
      // The value is folded in: guard the very tensor value (its impl) by identity.
      const t = (slot.owner as Record<string, Tensor>)[slot.key]!;
      out.push({
        guard: { kind: "identity", path: `${slot.path}.impl`, expected: t.impl },
        access: { root: "ref", ref: t, key: "impl" },
        test: "plain",
      });
      continue;
    }
    if (!usedSlots.has(i)) continue;
    const impl = (slot.owner as Record<string, Tensor>)[slot.key]?.impl;
    const base: GuardSpec[] = [
      { guard: { kind: "dtype", path: slot.path, expected: slot.dtype }, access, test: "tensor" },
      {
        guard: { kind: "shape", path: slot.path, expected: [...slot.shape] },
        access,
        test: "tensor",
      },
    ];
    const pair = base.map((g) => (impl ? { ...g, impl } : g));
    // Right after the identity guard on the same property, so the check loads it once.
    const at = reads.findIndex(
      (r) => r.access.root === "ref" && r.access.ref === slot.owner && r.access.key === slot.key,
    );
    if (at >= 0) reads.splice(at + 1, 0, ...pair);
    else reads.push(...pair);
  }
  out.push(...reads);
  return out;
}

/** Guards on free variables whose binding cannot change (const): what they hold. */
function fixedGuards(a: Analysis, fn: AnyFunction): GuardSpec[] {
  if (a.fixed.length === 0) return [];
  const { values } = readFreeVariables(fn, a.fixed);
  const out: GuardSpec[] = [];
  const deep = (v: unknown, path: string, depth: number): void => {
    if (depth > 8 || !isContainer(v)) return;
    const entries: [string | number, unknown][] = Array.isArray(v)
      ? v.map((x, i) => [i, x])
      : Object.entries(v);
    if (Array.isArray(v)) {
      out.push({
        guard: { kind: "value", path: `${path}.length`, expected: v.length },
        access: { root: "ref", ref: v, key: "length" },
        test: "plain",
      });
    }
    for (const [k, x] of entries) {
      const p = formatPath(path, [k]);
      const at = { root: "ref", ref: v, key: k } as const;
      if (x === null || (typeof x !== "object" && typeof x !== "function")) {
        out.push({ guard: { kind: "value", path: p, expected: x }, access: at, test: "plain" });
      } else if (x instanceof Tensor) {
        out.push({
          guard: { kind: "identity", path: `${p}.impl`, expected: x.impl },
          access: { root: "ref", ref: x, key: "impl" },
          test: "plain",
        });
      } else {
        out.push({ guard: { kind: "identity", path: p, expected: x }, access: at, test: "plain" });
        deep(x, p, depth + 1);
      }
    }
  };
  for (const [i, n] of a.fixed.entries()) {
    const v = values[i];
    if (v instanceof Tensor) {
      out.push({
        guard: { kind: "identity", path: `${n}.impl`, expected: v.impl },
        access: { root: "ref", ref: v, key: "impl" },
        test: "plain",
      });
    } else if (v instanceof NNModule) {
      for (const [p, m] of v.namedModules()) {
        out.push({
          guard: {
            kind: "value",
            path: formatPath(n, p === "" ? ["training"] : [...p.split("."), "training"]),
            expected: m.training,
          },
          access: { root: "ref", ref: m, key: "training" },
          test: "plain",
        });
      }
    } else {
      deep(v, n, 0);
    }
  }
  return out;
}

/** Modules held by const free variables: their state becomes inputs, like the root's. */
function fixedFreeModules(a: Analysis, fn: AnyFunction): [string, NNModule][] {
  if (a.fixed.length === 0) return [];
  const { values } = readFreeVariables(fn, a.fixed);
  const out: [string, NNModule][] = [];
  for (const [i, n] of a.fixed.entries()) {
    const v = values[i];
    if (v instanceof NNModule) out.push([n, v]);
  }
  return out;
}

// ---- Helpers ---------------------------------------------------------------------------------

/** Argument containers as write-catching proxies over the copies the trace hands out. */
function wrapArgs(
  tracer: Tracer,
  copy: unknown[],
  original: unknown[],
  pathText: (path: readonly (string | number)[]) => string,
): unknown[] {
  const wrapValue = (c: unknown, o: unknown, path: (string | number)[]): unknown => {
    if (!isContainer(c) || !isContainer(o)) return c;
    if (Array.isArray(c)) {
      for (let i = 0; i < c.length; i++) c[i] = wrapValue(c[i], (o as unknown[])[i], [...path, i]);
    } else {
      const oc = o as Record<string, unknown>;
      for (const k of Object.keys(c)) c[k] = wrapValue(c[k], oc[k], [...path, k]);
    }
    return tracer.wrapArgContainer(c as object, o as object, pathText(path));
  };
  return copy.map((c, i) => wrapValue(c, original[i], [i]));
}

function concreteOf(t: Tensor): Tensor {
  const impl = t.impl;
  if (impl instanceof TracedInputImpl) return impl.concrete;
  return t;
}

/** A result leaf of a replayed trace with symbolic inputs swapped back for the caller's. */
function restoreLeaf(tracer: Tracer, v: unknown, args: readonly unknown[]): unknown {
  if (v instanceof Tensor && v.impl instanceof TracedInputImpl) {
    const slot = tracer.slots[v.impl.slot]!;
    if (slot.kind === "state") return v; // the swapped tensor itself, restored already
    let x: unknown = args;
    for (const k of slot.keys) x = (x as Record<string | number, unknown>)[k];
    return x;
  }
  return tracer.unwrap(v);
}

/** Values the trace wrote into modules that are still symbolic get the caller's tensors. */
function fixWrites(tracer: Tracer, args: readonly unknown[]): void {
  for (const w of tracer.writes) {
    if (w.value.kind !== "tensor") continue;
    const t = w.value.tensor;
    if (t.impl instanceof TracedInputImpl) {
      (w.target as Record<string, unknown>)[w.key] = restoreLeaf(tracer, t, args);
    }
  }
}

function realizePending(value: unknown): void {
  const list: Tensor[] = [];
  const visit = (v: unknown, depth: number) => {
    if (v instanceof Tensor) {
      if (v.impl.kind === "lazy") list.push(v);
      return;
    }
    if (depth > 16 || !isContainer(v)) return;
    for (const x of Array.isArray(v) ? v : Object.values(v)) visit(x, depth + 1);
  };
  visit(value, 0);
  if (list.length > 0) realizeAll(list);
}

function isThenable(v: unknown): boolean {
  return (
    typeof v === "object" && v !== null && typeof (v as { then?: unknown }).then === "function"
  );
}

/** A guard as one line (`x.shape == [2, 16]`, `this.training === false`). */
export function describeGuard(g: Guard): string {
  switch (g.kind) {
    case "dtype":
      return `${g.path}.dtype == ${String(g.expected)}`;
    case "shape":
      return `${g.path}.shape == [${(g.expected as (number | null)[])
        .map((d) => (d === null ? "*" : String(d))).join(", ")}]`;
    case "value":
      return `${g.path} === ${describeValue(g.expected)}`;
    case "identity":
      return `${g.path} is ${describeValue(g.expected)} (same object)`;
    case "range": {
      const [lo, hi] = g.expected as [number, number];
      return `${lo} <= ${g.path} <= ${hi}`;
    }
    case "equal":
      return `${g.path} == ${String(g.expected)}`;
    default: {
      const never: never = g.kind;
      throw new Error(`unknown guard kind ${String(never)}`);
    }
  }
}

/** True while some compiled function is tracing (nested compiled calls inline). */
export function isTracing(): boolean {
  return tracing > 0 || currentMode().name === "trace";
}

// ---- Dynamic dims ----------------------------------------------------------------------------

/** ` (first at <op> at file:line)`: where two programs' instruction lists first part. */
function firstDifference(a: Module, b: Module): string {
  const xs = a.entry.instructions;
  const ys = b.entry.instructions;
  for (let k = 0; k < Math.max(xs.length, ys.length); k++) {
    const x = xs[k] ?? ys[k]!;
    if (xs[k]?.opcode === ys[k]?.opcode) continue;
    const m = x.metadata;
    const at =
      m.sourceFile !== undefined ? ` at ${m.sourceFile}:${m.sourceLine}:${m.sourceColumn}` : "";
    return ` (first at ${m.opType ?? x.opcode}${at})`;
  }
  return "";
}

function sameKeys(a: readonly (string | number)[], b: readonly (string | number)[]): boolean {
  return a.length === b.length && a.every((k, i) => k === b[i]);
}

function readKeys(args: readonly unknown[], keys: readonly (string | number)[]): unknown {
  let v: unknown = args;
  for (const k of keys) v = (v as Record<string | number, unknown>)[k];
  return v;
}

/**
 * An entry's guards with its dynamic dims freed: the shape guard of each dynamic tensor skips
 * those dims (`null`) and a range guard right after checks each one's bucket (`65 <=
 * x.shape[1] <= 128`); the dims of one size group must also stay equal to its first.
 */
function withRangeGuards(specs: readonly GuardSpec[], groups: readonly SizeGroup[]): GuardSpec[] {
  const out: GuardSpec[] = [];
  const dims = groups.flatMap((g) => g.dims.map((d) => ({ d, g })));
  for (const s of specs) {
    const a = s.access;
    const mine =
      s.guard.kind === "shape" && a.root === "arg"
        ? dims.filter(({ d }) => sameKeys(d.keys, a.keys))
        : [];
    if (mine.length === 0 || a.root !== "arg") {
      out.push(s);
      continue;
    }
    const expected = (s.guard.expected as readonly (number | null)[]).map((v, i) =>
      mine.some(({ d }) => d.dim === i) ? null : v,
    );
    out.push({ ...s, guard: { ...s.guard, expected } });
    for (const { d, g } of mine) {
      out.push({
        guard: { kind: "range", path: `${d.path}.shape[${d.dim}]`, expected: [g.lo, g.hi] },
        access: { root: "arg", keys: [...a.keys, "shape", d.dim] },
        test: "plain",
      });
    }
  }
  // One program has one size per group: dims that were equal when traced must still be.
  for (const g of groups) {
    const [first, ...rest] = g.dims;
    for (const d of first ? rest : []) {
      out.push({
        guard: {
          kind: "equal",
          path: `${d.path}.shape[${d.dim}]`,
          expected: `${first!.path}.shape[${first!.dim}]`,
        },
        access: { root: "arg", keys: [...d.keys, "shape", d.dim] },
        other: { root: "arg", keys: [...first!.keys, "shape", first!.dim] },
        test: "plain",
      });
    }
  }
  return out;
}
