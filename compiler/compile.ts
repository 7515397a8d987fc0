// compile(): a model or function in, a callable with `stats` out. A call goes through named
// stages, each in its own file, with its state passed explicitly (docs/architecture.md):
//
//   1. guard check (lookup.ts): the first cache entry whose guards hold runs its program
//      (entry.ts) without running any user JS; on a miss, the closest entry's failing guard
//      is the reason, and the recompile limit decides between tracing and running eagerly;
//   2. dynamism (size_groups.ts): which argument dims are dynamic, in size groups, and the
//      size-branch oracle's question for a bucketed call (size_oracle.ts);
//   3. capture (capture.ts): the user's code runs once with symbolic inputs over lazy mode;
//      a graph break or an unreplayable side effect switches to replay mode (replay.ts);
//   4. program (build.ts): the traced graph becomes one IR program — for a bucket, one with
//      bounded dynamic dims from traces at its other sizes (dynamic_program.ts) — padded,
//      optimized and compiled through the program cache (backend.ts);
//   5. guard construction (guard_build.ts), then the entry is made, run, and installed —
//      only after everything succeeded, so an error in user code (thrown unchanged) or in
//      compilation leaves no half-made entry.
//
// What compile() was given is resolved once (target.ts, config.ts); what a compiled function's
// calls share is its CacheState below, which only this file's stage sequence updates.

import type { Module } from "../ir/module.ts";
import { lazyStats } from "../tensor/lazy.ts";
import { Module as NNModule } from "../tensor/nn/module.ts";
import { noteExecutableHit } from "../runtime/cache_stats.ts";
import { withNativeThreads } from "../runtime/native/backend.ts";
import { withWasmThreads } from "../runtime/wasm/threads.ts";
import { log, logEnabled } from "../util/log.ts";
import { isLocated, locateHere, thrownByKiln } from "../util/user_frame.ts";
import type { SourceAnalysis } from "./analyze.ts";
import { withProgramOrigin } from "./backend.ts";
import { buildEntryProgram } from "./build.ts";
import {
  type Capture,
  capture,
  checkFullgraph,
  insideTrace,
  needsReplay,
  type TraceShape,
} from "./capture.ts";
import {
  checkOptionsObject,
  type CompileConfig,
  type CompileOptions,
  resolveConfig,
} from "./config.ts";
import { checkDynamicArgs, unboundedSpecialization } from "./dynamic.ts";
import { type GraphEntry, makeEntry, runEntry } from "./entry.ts";
import { entryGuards, settingsNow } from "./guard_build.ts";
import { describeGuard, type Guard, type GuardInputs } from "./guards.ts";
import { decideMiss, findEntry } from "./lookup.ts";
import { flatten } from "./pytree.ts";
import {
  enterReplay,
  type LazyCounts,
  replayModeCall,
  replayResult,
  ReplayTiming,
} from "./replay.ts";
import { type AutoDims, chooseGroups, planDynamic } from "./size_groups.ts";
import { sizeBranchOracle } from "./size_oracle.ts";
import { type CompileStats, StatsCounter } from "./stats.ts";
import { type AnyFunction, checkTargetKind, Target } from "./target.ts";
import { isIndexCheckError } from "../tensor/index_checks.ts";

export type { CompileOptions } from "./config.ts";
export { describeGuard } from "./guards.ts";
export { isTracing } from "./capture.ts";

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

/** What explain() reads. */
export interface Internals {
  readonly name: string;
  entries(): readonly GraphEntry[];
  lastTrace(): TraceSummary | undefined;
  analysis(): SourceAnalysis | undefined;
}

/** What the last trace found (explain() prints it). */
export interface TraceSummary extends TraceShape {
  readonly guards: readonly Guard[];
  readonly module: Module | undefined;
}

/** One compiled function: what it was given (read-only) and what its calls share. */
interface Compiled {
  readonly target: Target;
  readonly config: CompileConfig;
  readonly state: CacheState;
}

/** What the calls of one compiled function share. */
interface CacheState {
  entries: GraphEntry[];
  /** Entries made for a bucket (bounded in number by the buckets): not under recompileLimit. */
  readonly bucketed: WeakSet<GraphEntry>;
  /** Replay mode's timing and decision, from the switch on (undefined: not in replay mode). */
  replay: ReplayTiming | undefined;
  /** Whether the recompile limit's warning was printed. */
  warned: boolean;
  lastTrace: TraceSummary | undefined;
  /** Dims made dynamic by automatic dynamism (size_groups.ts). */
  readonly autoDims: AutoDims;
  readonly stats: StatsCounter;
}

// ---- compile() -------------------------------------------------------------------------------

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
  given: unknown,
  options: CompileOptions = {},
): CompiledFunction<AnyFunction> {
  checkTargetKind(given);
  checkOptionsObject(options);
  const target = new Target(given as AnyFunction | NNModule);
  const state: CacheState = {
    entries: [],
    bucketed: new WeakSet(),
    replay: undefined,
    warned: false,
    lastTrace: undefined,
    autoDims: new Map(),
    stats: new StatsCounter(),
  };
  const c: Compiled = { target, config: resolveConfig(options), state };
  checkDynamicArgs(c.config.dynamic, target.argNames());
  const threads = c.config.threads;
  function compiled(this: unknown, ...args: unknown[]): unknown {
    try {
      if (threads === undefined) return call(c, args);
      return withNativeThreads(threads, () => withWasmThreads(threads, () => call(c, args)));
    } catch (e) {
      // Kiln's errors name the user's line (an op's error already does); the user's own are
      // thrown unchanged.
      throw e instanceof Error && !isLocated(e) && thrownByKiln(e) ? locateHere(e) : e;
    }
  }
  const internals: Internals = {
    name: target.name,
    entries: () => state.entries,
    lastTrace: () => state.lastTrace,
    analysis: () => target.analysis().result,
  };
  Object.defineProperties(compiled, {
    stats: { get: () => state.stats.snapshot(state.entries.length) },
    module: { value: target.model },
    original: { value: target.fn },
    guards: { get: () => state.entries.map((e) => e.guards.guards) },
    reset: {
      value: () => {
        state.entries = [];
        state.replay = undefined;
        state.stats.replayDecision = undefined;
        state.warned = false;
        state.stats.mode = "none";
      },
    },
    [INTERNALS]: { value: internals },
  });
  return compiled as unknown as CompiledFunction<AnyFunction>;
}

// ---- one call: the stages --------------------------------------------------------------------

function call(c: Compiled, args: unknown[]): unknown {
  const { target, config, state } = c;
  const stats = state.stats;
  stats.calls++;
  // Inside another function's trace: inline, so the outer trace records these ops.
  if (insideTrace()) return target.run(target.model, args);
  if (state.replay) return replayModeCall(target, config, stats, state.replay, args);
  const entries = state.entries;
  const settings = settingsNow();
  const free =
    entries.length > 0 || target.analysis().perCall.length > 0
      ? target.readFree(config.guardFreeVariables)
      : [];
  const inputs: GuardInputs = { args, free, settings };
  // 1. guard check
  const hit = findEntry(entries, inputs);
  if (hit) {
    stats.cacheHits++;
    // A bucket's program serving this size is a shape-dynamic hit (cacheStats()).
    if (hit.exe) noteExecutableHit(hit.exe, hit.dynamicModule ? "shapeDynamic" : "memory");
    return runEntry(hit, args);
  }
  let nearest: (() => string) | undefined;
  if (entries.length > 0) {
    const miss = decideMiss(target.name, config, state, state.autoDims, inputs);
    if (miss.kind === "eager") return fallBack(c, args, miss.reason);
    // A size no bucket bounds (outside a declared range, past the last edge) is an entry of
    // its own, so the limit holds for it too.
    const unbounded = unboundedSpecialization(
      planDynamic(target, config, state.autoDims, flatten([...args]).leaves),
      config.buckets,
    );
    if (unbounded !== undefined && countedEntries(state) >= config.recompileLimit) {
      return fallBack(c, args, `${miss.reason} (${unbounded})`);
    }
    nearest = miss.nearest;
    stats.recompiles.push({ call: stats.calls, reason: miss.reason, guard: miss.guard });
    log("recompiles", () => `${target.name}: recompiling (call ${stats.calls}): ${miss.reason}`);
  }
  const origin = {
    kind: "compiled",
    source: target.name,
    nearest: () => nearest?.() ?? `this process has no entry of ${target.name} yet`,
  } as const;
  return withProgramOrigin(origin, () => traceCall(c, args, inputs));
}

/** Entries under the recompile limit: those not made for a bucket. */
function countedEntries(state: CacheState): number {
  return state.entries.filter((e) => !state.bucketed.has(e)).length;
}

/** Past the recompile limit: the call runs eagerly (one warning per compiled function). */
function fallBack(c: Compiled, args: readonly unknown[], reason: string): unknown {
  const { target, config, state } = c;
  state.stats.fallbacks.push({ call: state.stats.calls, reason });
  state.stats.eagerCalls++;
  if (!state.warned) {
    state.warned = true;
    console.warn(
      `kiln: compile(${target.name}) reached its recompile limit (${config.recompileLimit}); ` +
        `running eagerly from now on when no entry matches. Last failing guard: ${reason}`,
    );
  }
  return target.run(target.model, args);
}

/** Stages 2-5 for a call no entry answered; the call's values are the trace's. */
function traceCall(c: Compiled, args: readonly unknown[], inputs: GuardInputs): unknown {
  const { target, config, state } = c;
  const stats = state.stats;
  checkFullgraph(target, config);
  const lazyBefore = lazyStats();
  // 2. dynamism: the oracle is asked before the first trace (it may record what runs).
  const flat = flatten([...args]);
  const plan = planDynamic(target, config, state.autoDims, flat.leaves);
  const groups = chooseGroups(target.name, config, stats, plan);
  const question = groups ? sizeBranchOracle().ask(target.oracle) : undefined;
  try {
    // 3. capture
    const cap = capture(target, config, args, flat);
    if (needsReplay(cap)) return installReplay(c, cap, args, lazyBefore);
    // 4. program, 5. guards, then the entry
    const call = { target, config, stats, flat };
    const p = buildEntryProgram(call, cap, groups, question, plan.length > 0);
    const guards = entryGuards(target, config, flat, inputs, cap, p, groups);
    const entry = makeEntry(cap, p, guards, groups, target.analysis().perCall);
    const bounded = p.bucketed && unboundedSpecialization(plan, config.buckets) === undefined;
    return install(c, cap, entry, bounded, args);
  } finally {
    question?.close();
  }
}

// ---- install: an entry, or replay mode -------------------------------------------------------

/** Cache insert: the entry runs this call (from the state before the call), then joins. */
function install(
  c: Compiled,
  cap: Capture,
  entry: GraphEntry,
  bucketed: boolean,
  args: readonly unknown[],
): unknown {
  const { target, state } = c;
  if (bucketed) state.bucketed.add(entry);
  cap.tracer.undoWrites();
  let value: unknown;
  let badIndex: unknown;
  try {
    value = runEntry(entry, args, true);
  } catch (e) {
    // Bad index values are this call's fault, not the program's: the entry joins all the same.
    if (!isIndexCheckError(e)) throw e;
    badIndex = e;
  }
  state.entries.push(entry);
  state.stats.compiles++;
  state.stats.mode = "graph";
  state.lastTrace = { ...cap.shape, guards: entry.guards.guards, module: entry.module };
  if (logEnabled("guards")) {
    const n = state.entries.length;
    log("guards", `${target.name}: entry ${n} guards (${entry.guards.specs.length}):`);
    for (const g of entry.guards.guards) log("guards", `  ${describeGuard(g)}`);
  }
  if (badIndex !== undefined) throw badIndex;
  return value;
}

/** Replay mode from now on; this call's values are the trace's (lazy mode's, correct). */
function installReplay(
  c: Compiled,
  cap: Capture,
  args: readonly unknown[],
  lazyBefore: LazyCounts,
): unknown {
  const { target, config, state } = c;
  const shape = enterReplay(target, config, state.stats, cap);
  state.replay = new ReplayTiming();
  state.lastTrace = { ...shape, guards: [], module: undefined };
  return replayResult(state.stats, cap, args, lazyBefore);
}
