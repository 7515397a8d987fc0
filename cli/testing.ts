// The recompilation budget as a test assertion, for vitest or jest users (the in-process twin
// of `kiln recompiles --max`): `expectMaxCompiles(fast, 2)` after driving a compiled function
// throws an AssertionError-style Error listing every recompile with its reason when the
// function compiled more than `max` times. It imports no test framework, so it works in any.

import type { CompileStats } from "../compiler/index.ts";

/** Anything with compile() stats: a CompiledFunction or CompiledModule. */
export interface HasCompileStats {
  readonly stats: CompileStats;
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

/** Throws when `fast` compiled more than `max` times; the message lists the reasons. */
export function expectMaxCompiles(fast: HasCompileStats, max: number): void {
  if (!Number.isInteger(max) || max < 0) {
    throw new Error(`expectMaxCompiles: max must be a non-negative integer, got ${max}`);
  }
  const s = fast.stats;
  if (s.compiles <= max) return;
  const lines = [
    `expected at most ${max} compile(s), got ${s.compiles} over ${s.calls} call(s):`,
    ...s.recompiles.map((r) => `  call ${r.call}: ${r.reason}`),
  ];
  throw new CompileBudgetError(s.compiles, max, lines.join("\n"));
}
