// What compile() was handed, as every stage sees it — Dynamo's "frame": the function that runs
// (a module's forward, or the function itself), the model when there is one, the name used in
// messages, the names of its parameters (so guards read `x.shape[1]`, not `args[0].shape[1]`),
// and what the static source analysis (compiler/analyze.ts) found that compile() acts on: side
// effects the trace cannot see (replay-mode reasons), free variables to read on every call
// (mutable bindings) and free variables bound once (const), whose contents are guarded and whose
// modules' parameters become program inputs like the model's. The analysis runs on first need
// and is kept; nothing else here changes after construction.

import { Module as NNModule, callForward } from "../tensor/nn/module.ts";
import { log } from "../util/log.ts";
import { analyzeFunction, analyzeModuleForward, type SourceAnalysis } from "./analyze.ts";
import { readFreeVariables } from "./freevars.ts";
import { inspectorUnavailable } from "./inspector.ts";
import { describeValue } from "./guards.ts";
import { formatPath } from "./pytree.ts";
import type { OracleCode } from "./size_oracle.ts";
import { parameterNames, type SourceLocation } from "./source.ts";

export type AnyFunction = (...args: never[]) => unknown;

/** A reason with the user's source location (a side effect, a graph break). */
export interface Placed {
  readonly reason: string;
  readonly location: SourceLocation | undefined;
}

/** What compile() takes from the static analysis. */
export interface Analysis {
  readonly result: SourceAnalysis | undefined;
  /** Side effects found statically that make the function run in replay mode. */
  readonly sideEffects: readonly Placed[];
  /** Free variables to read on every call (mutable bindings), by name. */
  readonly perCall: readonly string[];
  /** Free variables whose binding cannot change: guarded by what they hold. */
  readonly fixed: readonly string[];
}

/** Effect kinds a compiled program would not repeat (mutations are judged by their target). */
const REPLAY_KINDS = new Set(["print", "random", "clock", "io", "process", "timer", "async"]);

/** Throws unless `target` is a function or an nn.Module (checked before the options). */
export function checkTargetKind(target: unknown): void {
  if (!(target instanceof NNModule) && typeof target !== "function") {
    throw new TypeError(
      `compile: expected a function or an nn.Module, got ${describeValue(target)}`,
    );
  }
}

export class Target {
  /** The function that runs: the module's forward, or the compiled function itself. */
  readonly fn: AnyFunction;
  readonly model: NNModule | undefined;
  readonly name: string;
  /** What the size-branch oracle reads (compiler/size_oracle.ts). */
  readonly oracle: OracleCode;
  private analysed: Analysis | undefined;
  private names: (string | undefined)[] | undefined;

  constructor(target: AnyFunction | NNModule) {
    if (target instanceof NNModule) {
      const f: unknown = (target as unknown as { forward?: unknown }).forward;
      if (typeof f !== "function") {
        throw new TypeError(`compile: ${target.className()} has no forward method`);
      }
      this.model = target;
      this.fn = f as AnyFunction;
      this.name = target.className();
    } else {
      this.model = undefined;
      this.fn = target;
      this.name = target.name || "anonymous";
    }
    const model = this.model;
    this.oracle = {
      name: this.name,
      fn: model ? undefined : this.fn,
      modules: () => (model ? [model] : this.fixedModules().map(([, m]) => m)),
    };
  }

  /** The static analysis, run on first need (a failure is logged and means "nothing found"). */
  analysis(): Analysis {
    return (this.analysed ??= analyze(this.fn, this.model));
  }

  /** Runs the user's code: forward on `self` (the model, or a proxy of it), or the function. */
  run(self: unknown, args: readonly unknown[]): unknown {
    return this.model
      ? callForward(self as NNModule, args)
      : (this.fn as (...a: unknown[]) => unknown)(...args);
  }

  /** An argument path as the user would write it (`x`, `options.attentionMask`). */
  pathText(path: readonly (string | number)[]): string {
    return path.length === 0 ? "args" : formatPath(this.argName(path[0] as number), path.slice(1));
  }

  /** The current values of the free variables read per call (none when not guarded). */
  readFree(guardFreeVariables: boolean): unknown[] {
    const a = this.analysis();
    if (a.perCall.length === 0 || !guardFreeVariables) return [];
    return readFreeVariables(this.fn, a.perCall).values;
  }

  /** Modules held by const free variables: their state becomes inputs, like the root's. */
  fixedModules(): [string, NNModule][] {
    return this.fixedValues().filter((e): e is [string, NNModule] => e[1] instanceof NNModule);
  }

  /** The values of the const free variables, by name (modules, optimizers, anything). */
  fixedValues(): [string, unknown][] {
    const a = this.analysis();
    if (a.fixed.length === 0) return [];
    const { values } = readFreeVariables(this.fn, a.fixed);
    return a.fixed.map((n, i) => [n, values[i]]);
  }

  /** The parameter names read from the source (undefined: destructured or rest). */
  argNames(): readonly (string | undefined)[] {
    if (this.names === undefined) {
      const r = this.analysis().result;
      const at =
        r?.source === "file" && r.file !== undefined && r.line !== undefined
          ? { file: r.file, line: r.line, column: r.column ?? 1 }
          : undefined;
      let names = parameterNames(this.fn, at);
      if (names.length === 0 && at) names = parameterNames(this.fn);
      this.names = names;
    }
    return this.names;
  }

  private argName(i: number): string {
    return this.argNames()[i] ?? `args[${i}]`;
  }
}

function analyze(fn: AnyFunction, model: NNModule | undefined): Analysis {
  const isModule = model !== undefined;
  let result: SourceAnalysis | undefined;
  try {
    result = model ? analyzeModuleForward(model) : analyzeFunction(fn);
  } catch (e) {
    const why = e instanceof Error ? e.message : String(e);
    log("guards", () => `source analysis failed: ${why}`);
    // Without node:inspector (a browser) nothing else sees what the code reads: no graph mode
    // on an analysis that did not run.
    const none = inspectorUnavailable();
    const sideEffects: Placed[] = none === undefined ? [] : [{
      reason: `the source analysis failed (${why}) and compile() cannot tell what the code ` +
        `reads here (${none})`,
      location: undefined,
    }];
    return { result: undefined, sideEffects, perCall: [], fixed: [] };
  }
  const file = result.file;
  const at = (line: number, column: number, f?: string): SourceLocation | undefined =>
    (f ?? file) !== undefined ? { file: (f ?? file)!, line, column } : undefined;
  const sideEffects: Placed[] = [];
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
  // Free variables are read through node:inspector. Where there is none (a browser) they
  // cannot be read, so they cannot be guarded: the function runs in replay mode (its code on
  // every call, which reads them as it runs) rather than keep values that may have changed.
  const names = [...fixed, ...perCall];
  const noInspector = names.length > 0 ? inspectorUnavailable() : undefined;
  if (noInspector !== undefined) {
    const v = result.freeVariables.find((f) => f.name === names[0])!;
    sideEffects.push({
      reason: `reads ${names.length === 1 ? "the free variable" : "free variables"} ` +
        `${names.map((n) => `\`${n}\``).join(", ")}, which compile() cannot read here to ` +
        `guard (${noInspector})`,
      location: at(v.line, v.column, v.file),
    });
    return { result, sideEffects, perCall: [], fixed: [] };
  }
  return { result, sideEffects, perCall, fixed };
}
