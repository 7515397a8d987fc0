// Replay mode: for code with a graph break or a side effect a program cannot repeat, the user's
// JavaScript runs on every call under lazy mode, whose graph segments are compiled once and
// found again by fingerprint, so the tensor work between breaks still runs as fused programs.
// `enterReplay` is the switch, made by the trace that found the reason (its values are already
// lazy mode's and correct; `replayResult` hands them back with the caller's tensors in place of
// the symbolic ones); `replayCall` is every call after it.
//
// Replay runs the user's JavaScript AND lazy mode's bookkeeping on every call, so it can be
// slower than plain eager code (many small segments between breaks). After the switch the
// first calls are timed: REPLAY_WARMUP + REPLAY_SAMPLES in replay mode, then as many eagerly
// (the first of each untimed); if replay's median is slower than eager's, the function runs
// eagerly from then on. The decision and its figures are in `stats.replayDecision` and logged
// (KILN_LOGS=recompiles,perf). The clock is a hook (`setReplayClock`) so tests decide it.

import { lazy, lazyStats, realizeAll } from "../tensor/lazy.ts";
import { setObserveHook, Tensor } from "../tensor/tensor.ts";
import { log } from "../util/log.ts";
import type { Capture, TraceShape } from "./capture.ts";
import type { CompileConfig } from "./config.ts";
import { isContainer, readKeys, unflatten } from "./pytree.ts";
import { formatLocation, userLocation } from "./source.ts";
import { GraphBreakError, type StatsCounter } from "./stats.ts";
import type { Target } from "./target.ts";
import { TracedInputImpl, type Tracer } from "./trace.ts";

/** Lazy mode's graph counts, to count a call's segments. */
export type LazyCounts = ReturnType<typeof lazyStats>;

/** Untimed calls of each kind before the timed ones (the first call of each warms up). */
export const REPLAY_WARMUP = 1;
/** Timed calls of each kind; the medians decide. */
export const REPLAY_SAMPLES = 3;

/** Milliseconds now; `kind` says which kind of call is being timed (for test clocks). */
export type ReplayClock = (kind: "replay" | "eager") => number;

const realClock: ReplayClock = () => performance.now();
let clock: ReplayClock = realClock;

/** Replaces the clock replay mode's decision reads (undefined: the real one); returns the old. */
export function setReplayClock(c: ReplayClock | undefined): ReplayClock {
  const old = clock;
  clock = c ?? realClock;
  return old;
}

/** The timing of one compiled function in replay mode, until the decision. */
export class ReplayTiming {
  readonly replayMs: number[] = [];
  readonly eagerMs: number[] = [];
  /** Calls since the switch. */
  calls = 0;
  choice: "measuring" | "replay" | "eager" = "measuring";

  /** What the next call runs as. */
  next(): "replay" | "eager" {
    if (this.choice !== "measuring") return this.choice;
    return this.calls < REPLAY_WARMUP + REPLAY_SAMPLES ? "replay" : "eager";
  }

  /** Whether the call about to run (the `calls`-th after the switch) is timed. */
  timed(): boolean {
    if (this.choice !== "measuring") return false;
    const n = REPLAY_WARMUP + REPLAY_SAMPLES;
    return this.calls % n >= REPLAY_WARMUP;
  }
}

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/**
 * One call after the switch to replay mode: replay (or, once replay was measured slower,
 * eager), timed while the decision is open (see the file comment).
 */
export function replayModeCall(
  target: Target,
  config: CompileConfig,
  stats: StatsCounter,
  timing: ReplayTiming,
  args: readonly unknown[],
): unknown {
  const kind = timing.next();
  const timed = timing.timed();
  const t0 = timed ? clock(kind) : 0;
  let result: unknown;
  if (kind === "eager") {
    stats.eagerCalls++;
    result = target.run(target.model, args);
  } else {
    result = replayCall(target, config, stats, args);
  }
  if (timed) (kind === "replay" ? timing.replayMs : timing.eagerMs).push(clock(kind) - t0);
  timing.calls++;
  if (timing.choice === "measuring" && timing.eagerMs.length === REPLAY_SAMPLES) {
    decide(target, stats, timing);
  }
  return result;
}

function decide(target: Target, stats: StatsCounter, timing: ReplayTiming): void {
  const replayMs = median(timing.replayMs);
  const eagerMs = median(timing.eagerMs);
  const choice = replayMs > eagerMs ? "eager" : "replay";
  timing.choice = choice;
  const figures = `replay ${replayMs.toFixed(2)} ms vs eager ${eagerMs.toFixed(2)} ms a call ` +
    `(median of ${REPLAY_SAMPLES} timed calls each)`;
  const reason = choice === "eager"
    ? `replay mode measured slower than eager: ${figures}; running eagerly from now on`
    : `replay mode kept: ${figures}`;
  stats.replayDecision = {
    call: stats.calls,
    choice,
    replayMs,
    eagerMs,
    samples: REPLAY_SAMPLES,
    reason,
  };
  if (choice === "eager") stats.mode = "eager";
  log("recompiles", () => `${target.name}: ${reason}`);
  log("perf", () => `${target.name}: ${reason}`);
}

/** One call in replay mode: the user's code under lazy mode, its breaks counted as they happen. */
export function replayCall(
  target: Target,
  config: CompileConfig,
  stats: StatsCounter,
  args: readonly unknown[],
): unknown {
  stats.replayCalls++;
  const before = lazyStats();
  const saved = setObserveHook((t, how) => {
    const loc = userLocation();
    const what = how === "valueOf" ? "a tensor coerced to a number" : `${how}() on a tensor`;
    stats.noteBreak(how, `${what} (shape [${t.shape.join(", ")}]) reads data`, loc);
    log("graph_breaks", () => `${target.name}: graph break at ${formatLocation(loc)}: ${what}`);
  });
  let result: unknown;
  try {
    result = lazy(() => target.run(target.model, args), config.lazy);
  } finally {
    setObserveHook(saved);
  }
  realizePending(result);
  countSegments(stats, before);
  return result;
}

/**
 * Switches to replay mode after `c` (which needs it): `fullgraph` makes an unreplayable effect
 * an error; the breaks and reasons are counted and logged.
 */
export function enterReplay(
  target: Target,
  config: CompileConfig,
  stats: StatsCounter,
  c: Capture,
): TraceShape {
  const { reasons, tracer, shape } = c;
  if (config.fullgraph && reasons.length > 0) {
    throw new GraphBreakError(`cannot replay: ${reasons[0]!.reason}`, reasons[0]!.location);
  }
  for (const b of tracer.breaks) stats.noteBreak(b.how, b.reason, b.location);
  for (const r of shape.replayReasons) stats.noteReplayReason(r.reason, r.location);
  stats.mode = "replay";
  log("recompiles", () => `${target.name}: runs in replay mode: ${reasons.concat(shape.breaks)
    .map((r) => `${r.reason} at ${formatLocation(r.location)}`).join("; ")}`);
  return shape;
}

/** The traced call's results, with the caller's tensors where the trace had symbolic ones. */
export function replayResult(
  stats: StatsCounter,
  c: Capture,
  args: readonly unknown[],
  before: LazyCounts,
): unknown {
  const { tracer, out } = c;
  stats.replayCalls++;
  const final = unflatten(out.spec, out.leaves.map((l) => restoreLeaf(tracer, l.value, args)));
  fixWrites(tracer, args);
  realizePending(final);
  countSegments(stats, before);
  return final;
}

function countSegments(stats: StatsCounter, before: LazyCounts): void {
  const after = lazyStats();
  stats.segments += after.graphs - before.graphs;
  stats.segmentsCompiled += after.compiled - before.compiled;
}

/** A result leaf of a replayed trace with symbolic inputs swapped back for the caller's. */
function restoreLeaf(tracer: Tracer, v: unknown, args: readonly unknown[]): unknown {
  if (v instanceof Tensor && v.impl instanceof TracedInputImpl) {
    const slot = tracer.slots[v.impl.slot]!;
    // The swapped tensor itself, restored already.
    if (slot.kind === "state" || slot.kind === "host") return v;
    return readKeys(args, slot.keys);
  }
  return tracer.unwrap(v);
}

/** Values the trace wrote into modules that are still symbolic get the caller's tensors. */
function fixWrites(tracer: Tracer, args: readonly unknown[]): void {
  for (const w of tracer.writes) {
    if (w.value.kind !== "tensor" || w.impl) continue;
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
