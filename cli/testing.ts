// The recompilation budget as a test assertion, for vitest, jest or node:test users (the
// in-process twin of `kiln recompiles --max`): `expectMaxCompiles(fast, 2)` after driving a
// compiled function throws a CompileBudgetError when the gate fails, with the same rules and
// the same words as the CLI (`judgeCompiles`, which `kiln recompiles` uses too):
//   - more than `max` compiles fails;
//   - a call that did not run compiled code fails — replay mode (a graph break or a side effect:
//     the JavaScript runs on every call) or eager (past the recompile limit, or replay measured
//     slower) — unless `allowFallback` accepts it, since a model that never compiles would
//     otherwise pass any budget with 0 compiles.
// The message lists every recompile with its reason, every specialization (`kept static: the
// code branches on a size at file:line`), the replay reasons and the fallbacks. It imports no
// test framework, so it works in any.

import type { CompileStats } from "../compiler/index.ts";

/** Anything with compile() stats: a CompiledFunction or CompiledModule. */
export interface HasCompileStats {
  readonly stats: CompileStats;
}

export interface GateOptions {
  /** Accept calls that ran in replay mode or eagerly (default: they fail the gate). */
  readonly allowFallback?: boolean;
}

/** What the gate found: `failures` say why it failed (empty: it passed), `details` the reasons. */
export interface GateVerdict {
  readonly ok: boolean;
  readonly failures: readonly string[];
  readonly details: readonly string[];
}

/** The gate's rules (see the file comment) over `s`; `max` undefined: no budget on compiles. */
export function judgeCompiles(
  s: CompileStats,
  max: number | undefined,
  o: GateOptions = {},
): GateVerdict {
  const failures: string[] = [];
  if (max !== undefined && s.compiles > max) {
    failures.push(`expected at most ${max} compile(s), got ${s.compiles} over ${s.calls} call(s)`);
  }
  if (!o.allowFallback) {
    if (s.replayCalls > 0) {
      failures.push(
        `${s.replayCalls} call(s) ran in replay mode, not as a compiled program (the JavaScript ` +
          `runs on every call; allowFallback accepts it)`,
      );
    }
    if (s.eagerCalls > 0) {
      failures.push(
        `${s.eagerCalls} call(s) ran eagerly, not compiled (allowFallback accepts it)`,
      );
    }
  }
  const details = [
    ...s.recompiles.map((r) => `call ${r.call}: ${r.reason}`),
    ...s.specializations.map((r) => `call ${r.call}: ${r.reason}`),
    ...s.replayReasons.map((r) => `replay mode: ${r.where}: ${r.reason}`),
    ...s.fallbacks.map((r) => `call ${r.call}: ran eagerly past the recompile limit: ${r.reason}`),
    ...(s.replayDecision ? [`call ${s.replayDecision.call}: ${s.replayDecision.reason}`] : []),
  ];
  return { ok: failures.length === 0, failures, details };
}

export class CompileBudgetError extends Error {
  readonly compiles: number;
  readonly max: number;

  constructor(compiles: number, max: number, message: string) {
    super(message);
    this.name = "CompileBudgetError";
    this.compiles = compiles;
    this.max = max;
  }
}

/** Throws when the gate fails for `fast` (see the file comment); the message says why. */
export function expectMaxCompiles(fast: HasCompileStats, max: number, o: GateOptions = {}): void {
  if (!Number.isInteger(max) || max < 0) {
    throw new Error(`expectMaxCompiles: max must be a non-negative integer, got ${max}`);
  }
  const s = fast.stats;
  const v = judgeCompiles(s, max, o);
  if (v.ok) return;
  const text = [`${v.failures.join("; ")}:`, ...v.details.map((l) => `  ${l}`)].join("\n");
  throw new CompileBudgetError(s.compiles, max, text);
}
