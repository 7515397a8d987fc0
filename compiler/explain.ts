// explain(modelOrFunction, ...exampleArgs): what compile() makes of some code, in words. It
// compiles the target and calls it once with the example arguments (so the code runs once, side
// effects included, as torch._dynamo.explain does), then reports the graphs and the frontend
// ops in each, every graph break and replay-mode reason with the user's source line, the guards
// a compiled call checks, the dynamic dims of the compiled entry with the bucket each one
// serves (read from its range guards), and what the static analysis found (side effects, free
// variables, likely breaks). `toString()` is the report the CLI prints.

import { printHlo } from "../ir/print.ts";
import { backendTier, getBackend } from "../runtime/index.ts";
import { nativeUnavailableReason } from "../runtime/native/backend.ts";
import { wasmThreadsUnavailable } from "../runtime/wasm/threads.ts";
import { Module as NNModuleClass, type Module as NNModule } from "../tensor/nn/module.ts";
import {
  compile,
  type CompileOptions,
  describeGuard,
  INTERNALS,
} from "./compile.ts";
import type { Literal } from "../ir/literal.ts";
import type { Module } from "../ir/module.ts";
import type { ProgramParameter } from "./entry.ts";
import type { Guard } from "./guards.ts";
import { REPLAY_SAMPLES, REPLAY_WARMUP } from "./replay.ts";
import { formatLocation, type SourceLocation } from "./source.ts";

export interface ExplainedPlace {
  readonly reason: string;
  readonly location: SourceLocation | undefined;
  /** `file:line:col`. */
  readonly where: string;
}

export interface Explanation {
  /** The function (or module class) explained. */
  readonly name: string;
  /** "graph": one guarded program; "replay": the JS runs each call over lazy segments. */
  readonly mode: "graph" | "replay";
  /** Graphs the code splits into (breaks + 1 with any ops; 0 when it runs no op). */
  readonly graphs: number;
  /** Frontend ops recorded per graph. */
  readonly opsPerGraph: readonly number[];
  readonly graphBreaks: readonly ExplainedPlace[];
  readonly replayReasons: readonly ExplainedPlace[];
  /** The entry's dynamic dims (graph mode), each with the bucket of sizes its program serves. */
  readonly dynamicDims: readonly DynamicDim[];
  /** The guards a compiled call checks (graph mode). */
  readonly guards: readonly Guard[];
  /** The program (HLO text, before optimization) in graph mode. */
  readonly program: string | undefined;
  /**
   * What each of the program's entry parameters is, by parameter number (graph mode): a call
   * input, a module weight or buffer (with its path), other state, a constant the trace passes
   * in, or a bucket's size. What binds a program exported to another runtime.
   */
  readonly parameters: readonly ExplainedParameter[];
  /** Static findings (compiler/analyze.ts), with their lines. */
  readonly sideEffects: readonly ExplainedPlace[];
  readonly likelyBreaks: readonly ExplainedPlace[];
  readonly freeVariables: readonly string[];
  /**
   * The backend the program runs on and its numerics tier; `note` says why it is not the
   * fastest (native unavailable on this machine, a program native hands to js, wasm without
   * threads here).
   */
  readonly backend: { readonly name: string; readonly tier: string; readonly note?: string };
  toString(): string;
}

/**
 * An entry parameter of the program: what it is (compiler/entry.ts ProgramParameter's kinds),
 * its path as guards print it, and for a weight or buffer of the explained module its name in
 * `stateDict()` (`layers.0.weight`).
 */
export interface ExplainedParameter {
  readonly kind: ProgramParameter["kind"];
  readonly path?: string;
  readonly name?: string;
}

/** A dynamic dim of a compiled entry: `path` as guards print it (`x.shape[1]`), bucket [lo, hi]. */
export interface DynamicDim {
  readonly path: string;
  readonly lo: number;
  readonly hi: number;
}

type AnyFunction = (...args: never[]) => unknown;

/** Range guards are exactly the dynamic dims: compile() adds one per dim freed for a bucket. */
function dynamicDimsOf(guards: readonly Guard[]): DynamicDim[] {
  const out: DynamicDim[] = [];
  for (const g of guards) {
    if (g.kind !== "range" || !Array.isArray(g.expected)) continue;
    const [lo, hi] = g.expected as readonly unknown[];
    if (typeof lo === "number" && typeof hi === "number") out.push({ path: g.path, lo, hi });
  }
  return out;
}

/** Compiles `target`, runs it once on `args`, and reports what happened (see the file comment). */
export function explain(
  target: AnyFunction | NNModule,
  ...args: unknown[]
): Explanation {
  return explainWith(target, {}, ...args);
}

/** explain() with compile options (fullgraph is ignored: explain reports breaks, not throws). */
export function explainWith(
  target: AnyFunction | NNModule,
  options: CompileOptions,
  ...args: unknown[]
): Explanation {
  return explainCall(target, options, args).explanation;
}

/** A traced program with what binds it: `kiln export`'s input (cli/export.ts). */
export interface CapturedProgram {
  readonly explanation: Explanation;
  /** The captured program (graph mode; before Kiln's optimization pipeline). */
  readonly module: Module | undefined;
  /** Each entry parameter's value for the traced call's arguments (weights as they are now). */
  readonly values: readonly Literal[];
}

/** explainWith, with the traced program and its parameters' values for these arguments. */
export function captureProgram(
  target: AnyFunction | NNModule,
  options: CompileOptions,
  ...args: unknown[]
): CapturedProgram {
  return explainCall(target, options, args);
}

function explainCall(
  target: AnyFunction | NNModule,
  options: CompileOptions,
  args: readonly unknown[],
): CapturedProgram {
  const c = compile(target as AnyFunction, {
    ...options,
    fullgraph: false,
    // The process-wide cache, disk included, as compile() uses: a warm-up run then leaves what
    // a cache-only run (KILN_COMPILE=never) of the same code will ask for.
    cache: options.cache ?? "disk",
  });
  (c as unknown as (...a: unknown[]) => unknown)(...args);
  const internals = c[INTERNALS];
  const t = internals.lastTrace();
  if (!t) throw new Error(`explain(${internals.name}): the call produced no trace`);
  const analysis = internals.analysis();
  const place = (reason: string, location: SourceLocation | undefined): ExplainedPlace => ({
    reason,
    location,
    where: formatLocation(location),
  });
  const at = (line: number, column: number, file?: string) => {
    const f = file ?? analysis?.file;
    return f !== undefined ? { file: f, line, column } : undefined;
  };
  const mode = c.stats.mode === "replay" ? "replay" : "graph";
  const last = t.module ? internals.entries().find((en) => en.module === t.module) : undefined;
  const exe = internals.entries().at(-1)?.exe as { backend?: string; fallback?: string } | undefined;
  const backendName = exe?.backend ?? options.backend ?? getBackend().name;
  const unavailable = nativeUnavailableReason();
  const notes: string[] = [];
  if (exe?.fallback !== undefined) notes.push(`runs on js: ${exe.fallback}`);
  else if (backendName !== "native" && options.backend === undefined && unavailable !== undefined) {
    notes.push(`native is not available: ${unavailable}`);
  }
  const single = backendName === "wasm" && exe?.fallback === undefined
    ? wasmThreadsUnavailable() : undefined;
  if (single !== undefined) notes.push(`runs single-threaded: ${single}`);
  const note = notes.length > 0 ? notes.join("; ") : undefined;
  const graphs = t.ops === 0 ? 0 : t.opsPerSegment.filter((n) => n > 0).length;
  const e = {
    name: internals.name,
    mode,
    graphs,
    opsPerGraph: t.opsPerSegment.filter((n) => n > 0),
    graphBreaks: t.breaks.map((b) => place(b.reason, b.location)),
    replayReasons: t.replayReasons.map((r) => place(r.reason, r.location)),
    dynamicDims: dynamicDimsOf(t.guards),
    guards: t.guards,
    program: t.module ? printHlo(t.module) : undefined,
    parameters: (last?.params ?? []).map((p) => explainParameter(p, target)),
    sideEffects: (analysis?.sideEffects ?? []).map((s) =>
      place(`${s.call}: ${s.reason}`, at(s.line, s.column, s.file)),
    ),
    likelyBreaks: (analysis?.dataDependent ?? []).map((d) =>
      place(`${d.expr}: ${d.reason}`, at(d.line, d.column, d.file)),
    ),
    freeVariables: [...new Set((analysis?.freeVariables ?? []).map((v) => v.name))],
    backend: {
      name: backendName,
      tier: backendTier(backendName),
      ...(note !== undefined && { note }),
    },
  } as const;
  return {
    explanation: { ...e, toString: () => report(e) },
    module: t.module,
    values: last ? last.readers.map((read) => read(args)) : [],
  };
}

function explainParameter(p: ProgramParameter, target: unknown): ExplainedParameter {
  const out: ExplainedParameter = { kind: p.kind, ...(p.path !== undefined && { path: p.path }) };
  if (p.owner === undefined || p.key === undefined) return out;
  if (!(target instanceof NNModuleClass)) return out;
  const prefix = target.namedModules().find(([, m]) => m === p.owner)?.[0];
  if (prefix === undefined) return out;
  return { ...out, name: prefix === "" ? p.key : `${prefix}.${p.key}` };
}

/** What replay mode costs, in words (explain runs one call: it cannot time the decision). */
export const REPLAY_COST =
  `the JavaScript runs on every call, over lazy segments, and can be slower than eager; ` +
  `compile() times the first ${REPLAY_WARMUP + REPLAY_SAMPLES} calls of each after the switch ` +
  `and runs eagerly when replay is slower (fast.stats.replayDecision)`;

function report(e: Omit<Explanation, "toString">): string {
  const lines: string[] = [];
  lines.push(`explain(${e.name}): ${e.mode} mode`);
  const b = e.backend;
  lines.push(`  backend: ${b.name} (${b.tier} tier)${b.note !== undefined ? `; ${b.note}` : ""}`);
  lines.push(
    `  graphs: ${e.graphs}${e.graphs > 0 ? ` (ops per graph: ${e.opsPerGraph.join(", ")})` : ""}`,
  );
  lines.push(`  graph breaks: ${e.graphBreaks.length}`);
  for (const [i, b] of e.graphBreaks.entries()) lines.push(`    ${i + 1}. ${b.where}: ${b.reason}`);
  if (e.mode === "replay") {
    lines.push(`  replay mode because:`);
    for (const r of e.replayReasons) lines.push(`    - ${r.where}: ${r.reason}`);
    lines.push(`  replay cost: ${REPLAY_COST}`);
  }
  if (e.dynamicDims.length > 0) {
    const dims = e.dynamicDims.map((d) => `${d.path} in [${d.lo}, ${d.hi}]`);
    lines.push(`  dynamic dims: ${dims.join(", ")} (one program per bucket, padded to its top)`);
  }
  if (e.guards.length > 0) {
    lines.push(`  guards: ${e.guards.length}`);
    for (const g of e.guards) lines.push(`    ${describeGuard(g)}`);
  }
  if (e.sideEffects.length > 0) {
    lines.push(`  side effects (static):`);
    for (const s of e.sideEffects) lines.push(`    - ${s.where}: ${s.reason}`);
  }
  if (e.likelyBreaks.length > 0) {
    lines.push(`  likely graph breaks (static):`);
    for (const s of e.likelyBreaks) lines.push(`    - ${s.where}: ${s.reason}`);
  }
  if (e.freeVariables.length > 0) lines.push(`  free variables: ${e.freeVariables.join(", ")}`);
  return lines.join("\n");
}
