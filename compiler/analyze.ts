// Static source analysis for compile(): from the source of a user's function, or of a module's
// `forward` and the methods it calls on `this`, the free variables to guard on, the side
// effects compiled code would not repeat (printing, randomness, clocks, I/O, writes to outside
// objects) and the expressions that will likely break the graph (item(), toArray(), Number(t),
// a Tensor in a condition or a template literal). The source read is the ORIGINAL .ts file —
// found through V8's function location and the script's source map (analyze_locate.ts) — so
// every line number is a line of the user's file; when that file cannot be found, the
// function's own `toString()` is analysed instead and the result says so (`source`). The
// tracer sees what actually runs; this sees what is written, and together they explain a
// graph break or a recompile in the user's words. Results are cached per function and per
// class, and frozen, since they are shared. The parsing half (analyze_core.ts) runs in a worker
// thread (analyze_host.ts), so TypeScript is never loaded into the isolate that runs user code.

import { boundTarget, locateOriginal } from "./analyze_locate.ts";
import { tidy, type Analysed, type SourceAnalysis } from "./analyze_core.ts";
import { analyseRequest } from "./analyze_host.ts";
import { isKilnFile } from "./analyze_walk.ts";
import { isLibraryCode } from "./library_code.ts";

export type { SideEffectKind } from "./analyze_rules.ts";
export type { BindingKind, DataDependent, FreeVariable, SideEffect } from "./analyze_walk.ts";
export type { SizeBranch } from "./analyze_sizes.ts";
export type { SourceAnalysis } from "./analyze_core.ts";
export { analysisHost } from "./analyze_host.ts";

let functionCache = new WeakMap<Function, Analysed>();
let moduleCache = new WeakMap<object, SourceAnalysis>();

/** Forgets cached analyses (for tests that rewrite a file, and for long sessions). */
export function clearAnalysisCache(): void {
  functionCache = new WeakMap();
  moduleCache = new WeakMap();
}

/**
 * Analyses one function (a plain function, an arrow, a method, a class) from its original
 * source. Never throws for a function whose source cannot be read: `source` says what was
 * analysed. Throws a TypeError for a non-function.
 */
export function analyzeFunction(fn: Function): SourceAnalysis {
  if (typeof fn !== "function") {
    throw new TypeError(`analyzeFunction: expected a function, got ${describe(fn)}`);
  }
  return analyseOne(fn).analysis;
}

/**
 * Analyses an nn.Module instance's `forward` (an own property, or its class's method) together
 * with every method it calls on `this`, transitively (`this.helper(x)`; submodules' forwards
 * are analysed on their own). Entries found in another file than forward's carry `file`.
 */
export function analyzeModuleForward(module: object): SourceAnalysis {
  if ((typeof module !== "object" && typeof module !== "function") || module === null) {
    throw new TypeError(`analyzeModuleForward: expected a module, got ${describe(module)}`);
  }
  const forward = findMethod(module, "forward");
  if (!forward) {
    throw new TypeError(
      `analyzeModuleForward: ${describe(module)} has no forward method to analyse`,
    );
  }
  // The methods `this.name` reaches depend on the object's class, so the class (its
  // prototype) is the key — unless forward is the instance's own property.
  const key: object = Object.prototype.hasOwnProperty.call(module, "forward")
    ? forward.fn
    : (Object.getPrototypeOf(module) as object | null) ?? module;
  const cached = moduleCache.get(key);
  if (cached) return cached;
  const parts: { analysis: SourceAnalysis; via: string | undefined }[] = [];
  const seen = new Set<Function>();
  const queue: { method: Method; via: string | undefined }[] = [
    { method: forward, via: undefined },
  ];
  while (queue.length > 0) {
    const { method, via } = queue.shift()!;
    if (seen.has(method.fn)) continue;
    seen.add(method.fn);
    // Followed: the class's own methods. Not: functions stored on the instance (they differ
    // between instances of the class, the cache key) and Kiln's own library code (nn.Module's
    // methods), which the trace sees as it runs.
    if (via !== undefined && method.owner === module) continue;
    const one = analyseOne(method.fn);
    if (via !== undefined && one.analysis.file !== undefined && isKilnFile(one.analysis.file)) {
      continue;
    }
    parts.push({ analysis: one.analysis, via });
    for (const name of one.thisCalls) {
      const m = findMethod(module, name);
      if (m) queue.push({ method: m, via: `this.${name}` });
    }
    // `super.name(...)` looks up from above the class that defines the calling method.
    const above = Object.getPrototypeOf(method.owner) as object | null;
    for (const name of one.superCalls) {
      const m = above && findMethod(above, name);
      if (m) queue.push({ method: m, via: `super.${name}` });
    }
  }
  const merged = freeze(merge(parts));
  moduleCache.set(key, merged);
  return merged;
}

interface Method {
  fn: Function;
  /** The object (a prototype, or the instance) that holds the method. */
  owner: object;
}

/** A method reachable on `obj` (own or inherited) and its holder, without running getters. */
function findMethod(obj: object, name: string): Method | undefined {
  let o: object | null = obj;
  while (o !== null) {
    const d = Object.getOwnPropertyDescriptor(o, name);
    if (d) return typeof d.value === "function" ? { fn: d.value as Function, owner: o } : undefined;
    o = Object.getPrototypeOf(o) as object | null;
  }
  return undefined;
}

function analyseOne(fn: Function): Analysed {
  const cached = functionCache.get(fn);
  if (cached) return cached;
  const result = analyseUncached(fn);
  result.analysis = freeze(result.analysis);
  functionCache.set(fn, result);
  return result;
}

function analyseUncached(fn: Function): Analysed {
  // A bound function's text is `[native code]`; what it runs is its target's source.
  const target = boundTarget(fn);
  if (target) return analyseOne(target);
  let fnText: string | undefined;
  try {
    fnText = Function.prototype.toString.call(fn);
  } catch {
    fnText = undefined;
  }
  if (fnText !== undefined && /\{\s*\[native code\]\s*\}\s*$/.test(fnText)) fnText = undefined;
  const loc = locateOriginal(fn);
  const got = analyseRequest({
    ...(fnText !== undefined && { fnText }),
    ...(loc && { loc: { file: loc.file, text: loc.text, line: loc.line, column: loc.column } }),
  });
  // Kiln's own method read from its text (the browser build): its unresolved names are the
  // library's imports and constants (compiler/library_code.ts), not free variables to guard.
  if (got.analysis.source === "toString" && isLibraryCode(fn)) {
    got.analysis = {
      ...got.analysis,
      note: `${got.analysis.note ?? ""}; Kiln's own code: its module-level names are the ` +
        `library's imports and constants, not guarded`,
      freeVariables: [],
    };
  }
  return got;
}

/** One analysis from forward and the methods it reaches; forward's file is the main one. */
function merge(parts: { analysis: SourceAnalysis; via: string | undefined }[]): SourceAnalysis {
  const [first, ...rest] = parts;
  if (!first) throw new Error("merge: no analyses");
  const main = first.analysis;
  const out: SourceAnalysis = {
    ...main,
    freeVariables: [...main.freeVariables],
    sideEffects: [...main.sideEffects],
    dataDependent: [...main.dataDependent],
    sizeBranches: [...main.sizeBranches],
  };
  for (const { analysis: p, via } of rest) {
    const file = p.file !== main.file ? p.file : undefined;
    const tag = <T extends { file?: string; via?: string }>(e: T): T => ({
      ...e,
      ...(file !== undefined && { file }),
      ...(via !== undefined && e.via === undefined && { via }),
    });
    out.freeVariables.push(...p.freeVariables.map(tag));
    out.sideEffects.push(...p.sideEffects.map(tag));
    out.dataDependent.push(...p.dataDependent.map(tag));
    out.sizeBranches.push(...p.sizeBranches.map(tag));
  }
  return { ...out, ...tidy(out) };
}

function freeze(a: SourceAnalysis): SourceAnalysis {
  for (const list of [a.freeVariables, a.sideEffects, a.dataDependent, a.sizeBranches]) {
    for (const e of list) Object.freeze(e);
    Object.freeze(list);
  }
  return Object.freeze(a);
}

function describe(v: unknown): string {
  if (v === null) return "null";
  if (typeof v === "function") return `function ${v.name || "(anonymous)"}`;
  if (typeof v === "object") {
    const ctor = (v as { constructor?: { name?: unknown } }).constructor;
    const name = typeof ctor?.name === "string" && ctor.name !== "" ? ctor.name : "object";
    return `${/^[AEIOUaeiou]/.test(name) ? "an" : "a"} ${name}`;
  }
  return `${typeof v} ${String(v)}`;
}
