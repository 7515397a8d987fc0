// What a compiled function reports about itself (`fast.stats`) and the errors compile() throws.
// Every recompilation, graph break, replay-mode reason and fallback carries its reason in words
// and, where it comes from the user's code, the source location (`models/gpt2.ts:214:13`).

import type { Guard } from "./guards.ts";
import {
  captureUserFrame,
  frameAt,
  nameLocation,
  type UserFrame,
} from "../util/user_frame.ts";
import { formatLocation, type SourceLocation } from "./source.ts";

/** A guard that failed and made the function trace again. */
export interface RecompileRecord {
  /** The call (1-based) that recompiled. */
  readonly call: number;
  readonly reason: string;
  readonly guard: Guard;
}

/** A data-dependent observation that split the code into graphs. */
export interface GraphBreakRecord {
  readonly reason: string;
  /** item, toArray, data, toBytes, toString, valueOf (a coercion), realize. */
  readonly how: string;
  readonly location: SourceLocation | undefined;
  /** `file:line:col` (or `<unknown location>`). */
  readonly where: string;
  /** How many times this break happened, over all calls. */
  readonly count: number;
}

/** Why the function runs in replay mode (its JS runs on every call). */
export interface ReplayRecord {
  readonly reason: string;
  readonly location: SourceLocation | undefined;
  readonly where: string;
}

/** A dynamic dim compiled for its exact size instead of a bucket, and why. */
export interface SpecializationRecord {
  readonly call: number;
  readonly reason: string;
}

/** A call that ran the user's code eagerly because the recompile limit was reached. */
export interface FallbackRecord {
  readonly call: number;
  readonly reason: string;
}

/**
 * Replay mode's measured decision (compiler/replay.ts): replay and eager timed over the first
 * calls after the switch; "eager" when replay was slower, and the function runs eagerly since.
 */
export interface ReplayDecision {
  /** The call (1-based) at which it was decided. */
  readonly call: number;
  readonly choice: "replay" | "eager";
  /** Median milliseconds a call, over `samples` timed calls each. */
  readonly replayMs: number;
  readonly eagerMs: number;
  readonly samples: number;
  /** The decision and its figures, in words. */
  readonly reason: string;
}

export interface CompileStats {
  readonly calls: number;
  /** Traces that produced a compiled program (the first compile and every recompile). */
  readonly compiles: number;
  /** Recompilations, each with the guard that failed and why. */
  readonly recompiles: readonly RecompileRecord[];
  /** Calls answered by a compiled program whose guards held (no tracing). */
  readonly cacheHits: number;
  /** Compiles whose executable came from the program cache (memory or disk). */
  readonly programCacheHits: number;
  /** Distinct graph breaks, with their source locations and counts. */
  readonly graphBreaks: readonly GraphBreakRecord[];
  /** Calls that ran eagerly past the recompile limit. */
  readonly fallbacks: readonly FallbackRecord[];
  /**
   * "graph": guarded compiled programs; "replay": JS runs each call over lazy segments;
   * "eager": replay mode was measured slower than eager, so calls run eagerly (replayDecision).
   */
  readonly mode: "graph" | "replay" | "eager" | "none";
  /** Replay mode's measured decision, once made (undefined before, and in graph mode). */
  readonly replayDecision: ReplayDecision | undefined;
  /** Calls that ran in replay mode (the call that switched to it included). */
  readonly replayCalls: number;
  /** Calls that ran the user's code eagerly: past the recompile limit, or replay's fallback. */
  readonly eagerCalls: number;
  readonly replayReasons: readonly ReplayRecord[];
  /** Replay mode: lazy segments run, and how many of them were compiled rather than reused. */
  readonly segments: number;
  readonly segmentsCompiled: number;
  /** Cache entries (guarded programs) held now. */
  readonly entries: number;
  /** Dynamic dims compiled for their exact size instead of a bucket, with the reason. */
  readonly specializations: readonly SpecializationRecord[];
}

/** Counters behind CompileStats (mutable; `snapshot` freezes a copy). */
export class StatsCounter {
  calls = 0;
  compiles = 0;
  cacheHits = 0;
  programCacheHits = 0;
  segments = 0;
  segmentsCompiled = 0;
  mode: CompileStats["mode"] = "none";
  replayDecision: ReplayDecision | undefined = undefined;
  replayCalls = 0;
  eagerCalls = 0;
  readonly recompiles: RecompileRecord[] = [];
  readonly fallbacks: FallbackRecord[] = [];
  readonly replayReasons: ReplayRecord[] = [];
  readonly specializations: SpecializationRecord[] = [];
  private readonly breaks = new Map<
    string,
    { record: Omit<GraphBreakRecord, "count">; n: number }
  >();

  /** Counts a break (distinct by location and kind). */
  noteBreak(how: string, reason: string, location: SourceLocation | undefined): void {
    const where = formatLocation(location);
    const key = `${how}@${where}`;
    const known = this.breaks.get(key);
    if (known) known.n++;
    else this.breaks.set(key, { record: { reason, how, location, where }, n: 1 });
  }

  noteReplayReason(reason: string, location: SourceLocation | undefined): void {
    const where = formatLocation(location);
    if (this.replayReasons.some((r) => r.reason === reason && r.where === where)) return;
    this.replayReasons.push({ reason, location, where });
  }

  noteSpecialized(call: number, reason: string): void {
    this.specializations.push({ call, reason });
  }

  snapshot(entries: number): CompileStats {
    return Object.freeze({
      calls: this.calls,
      compiles: this.compiles,
      recompiles: Object.freeze([...this.recompiles]),
      cacheHits: this.cacheHits,
      programCacheHits: this.programCacheHits,
      graphBreaks: Object.freeze(
        [...this.breaks.values()].map((b) => ({ ...b.record, count: b.n })),
      ),
      fallbacks: Object.freeze([...this.fallbacks]),
      mode: this.mode,
      replayDecision: this.replayDecision,
      replayCalls: this.replayCalls,
      eagerCalls: this.eagerCalls,
      replayReasons: Object.freeze([...this.replayReasons]),
      segments: this.segments,
      segmentsCompiled: this.segmentsCompiled,
      entries,
      specializations: Object.freeze([...this.specializations]),
    });
  }
}

/** A graph break (or an unreplayable side effect) under `fullgraph: true`. */
export class GraphBreakError extends Error {
  readonly location: SourceLocation | undefined;

  constructor(what: string, location: SourceLocation | undefined) {
    super(`compile(fullgraph): ${what}`);
    this.name = "GraphBreakError";
    this.location = location;
    // Ends with the recorded line (a zoo model's inside the user's call), as every error does.
    nameLocation(this, location ? frameAt(location) : captureUserFrame());
    if (this.userFrame === undefined) this.message += ` at ${formatLocation(location)}`;
  }

  declare readonly userFrame?: UserFrame;
}

/** A recompilation under `errorOnRecompile: true`. */
export class RecompileError extends Error {
  readonly guard: Guard;
  readonly reason: string;

  constructor(name: string, reason: string, guard: Guard) {
    super(`compile(${name}): recompiling (errorOnRecompile is set): ${reason}`);
    this.name = "RecompileError";
    this.guard = guard;
    this.reason = reason;
  }
}
