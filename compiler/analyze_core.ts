// The part of the source analysis (compiler/analyze.ts) that parses: from a function's text and,
// when it was found, its original file's text and position, the plain-data analysis. It needs
// the TypeScript compiler (through ts-morph) and nothing of the live function, so it runs in a
// worker thread (compiler/analyze_host.ts): TypeScript loaded into the user's isolate made the
// user's own hot code slower (docs/performance.md, "js compiled vs js eager"). Everything that
// needs the live function — V8's location of it, the inspector, `this` methods of a module —
// stays with the caller.

import type { ts } from "ts-morph";
import {
  findFunctionNode,
  parseFile,
  parseFunctionSource,
  shapeOf,
  type ParsedFile,
} from "./analyze_source.ts";
import { findSizeBranches, type SizeBranch } from "./analyze_sizes.ts";
import {
  Walker,
  type DataDependent,
  type FreeVariable,
  type Positioner,
  type SideEffect,
  type WalkResult,
} from "./analyze_walk.ts";

export interface SourceAnalysis {
  /** The file the function's source was found in (absent when analysed from toString()). */
  file?: string;
  /** 1-based line and column of the function (its name, when it has one) in `file`. */
  line?: number;
  column?: number;
  /**
   * What was analysed: the original `file`; the function's `toString()` (lines then count from
   * the function's first line, 1, and module-level names are unresolved); or nothing (a
   * native or bound function).
   */
  source: "file" | "toString" | "none";
  /** Why the original file was not used, when it was not. */
  note?: string;
  freeVariables: FreeVariable[];
  sideEffects: SideEffect[];
  dataDependent: DataDependent[];
  /**
   * Control flow whose condition depends on a tensor's size (analyze_sizes.ts): compile()
   * keeps such code static instead of sharing one program across a bucket of sizes. An entry
   * with `parameter` depends on a size only through that number parameter of the function.
   */
  sizeBranches: SizeBranch[];
}

/** One function's analysis and the methods it calls on `this` and `super` (by name). */
export interface Analysed {
  analysis: SourceAnalysis;
  thisCalls: readonly string[];
  superCalls: readonly string[];
}

/** What the parsing half needs: plain data, so it can cross to a worker. */
export interface AnalysisRequest {
  /** `Function.prototype.toString` of the function; absent for a native function. */
  fnText?: string;
  /** The original file and V8's position of the function in it, when it was located. */
  loc?: { file: string; text: string; line: number; column: number };
}

/** The analysis of one function from its text and, when found, its original file. */
export function analyseSource(req: AnalysisRequest): Analysed {
  const snippet = req.fnText !== undefined ? parseFunctionSource(req.fnText) : undefined;
  const shape = snippet ? shapeOf(snippet.node) : undefined;
  let note: string | undefined;
  const loc = req.loc;
  if (loc) {
    const parsed = parseFile(loc.file, loc.text);
    const node = findFunctionNode(parsed, loc.line, loc.column, shape);
    if (node) {
      const sf = parsed.sourceFile;
      const at: Positioner = (n) => {
        const p = sf.getLineAndCharacterOfPosition(n.getStart(sf));
        return { line: p.line + 1, column: p.character + 1 };
      };
      const walked = new Walker(parsed, node, at).run();
      const found = lists(walked);
      found.sizeBranches.push(...findSizeBranches(parsed, node, at));
      // Module-level helpers the function calls by name, transitively, tagged with `via`.
      const done = new Set<ts.Node>([node]);
      const queue = [...walked.helpers];
      while (queue.length > 0) {
        const h = queue.shift()!;
        if (done.has(h.node)) continue;
        done.add(h.node);
        const w = new Walker(parsed, h.node, at).run();
        const tag = <T extends { via?: string }>(e: T): T => (e.via ? e : { ...e, via: h.name });
        found.freeVariables.push(...w.freeVariables.map(tag));
        found.sideEffects.push(...w.sideEffects.map(tag));
        found.dataDependent.push(...w.dataDependent.map(tag));
        found.sizeBranches.push(...findSizeBranches(parsed, h.node, at).map(tag));
        queue.push(...w.helpers);
      }
      return {
        analysis: { file: loc.file, ...at(nameNode(node)), source: "file", ...tidy(found) },
        thisCalls: walked.thisCalls,
        superCalls: walked.superCalls,
      };
    }
    note = `the function was not found in ${loc.file} (was the file edited after it was loaded?)`;
  } else {
    note = "the function's source file could not be located";
  }
  if (!snippet) {
    return {
      analysis: {
        source: "none",
        note: "no source text: a native or bound function",
        freeVariables: [],
        sideEffects: [],
        dataDependent: [],
        sizeBranches: [],
      },
      thisCalls: [],
      superCalls: [],
    };
  }
  const at = snippetPositioner(snippet.parsed, snippet.prefix, snippet.source);
  const walked = new Walker(snippet.parsed, snippet.node, at).run();
  return {
    analysis: {
      source: "toString",
      note: `${note}; analysed fn.toString(): lines count from the function's first line`,
      ...lists(walked),
      sizeBranches: findSizeBranches(snippet.parsed, snippet.node, at),
    },
    thisCalls: walked.thisCalls,
    superCalls: walked.superCalls,
  };
}

/** Where to point at a function: its name, or the name it is assigned to (`f = () => ...`). */
function nameNode(node: ts.Node): ts.Node {
  const own = (node as { name?: ts.Node }).name;
  if (own) return own;
  const holder = (node.parent as { name?: ts.Node; initializer?: ts.Node } | undefined) ?? {};
  return holder.initializer === node && holder.name ? holder.name : node;
}

function lists(w: WalkResult): Lists {
  return {
    freeVariables: [...w.freeVariables],
    sideEffects: [...w.sideEffects],
    dataDependent: [...w.dataDependent],
    sizeBranches: [],
  };
}

/** Positions inside the function's own text (1 = its first line), past the parse wrapper. */
function snippetPositioner(parsed: ParsedFile, prefix: number, source: string): Positioner {
  const starts = [0];
  for (let i = 0; i < source.length; i++) if (source[i] === "\n") starts.push(i + 1);
  return (n) => {
    const offset = Math.max(0, n.getStart(parsed.sourceFile) - prefix);
    let line = 0;
    while (line + 1 < starts.length && starts[line + 1]! <= offset) line++;
    return { line: line + 1, column: offset - starts[line]! + 1 };
  };
}

export type Lists = Pick<
  SourceAnalysis,
  "freeVariables" | "sideEffects" | "dataDependent" | "sizeBranches"
>;

/** Sorted by file (the main one first), line and column, each entry once. */
export function tidy(l: Lists): Lists {
  const order = <T extends { line: number; column: number; file?: string }>(a: T, b: T): number =>
    (a.file ?? "").localeCompare(b.file ?? "") || a.line - b.line || a.column - b.column;
  return {
    freeVariables: dedupe(l.freeVariables).sort(order),
    sideEffects: dedupe(l.sideEffects).sort(order),
    dataDependent: dedupe(l.dataDependent).sort(order),
    sizeBranches: dedupe(l.sizeBranches).sort(order),
  };
}

function dedupe<T>(xs: T[]): T[] {
  const seen = new Set<string>();
  return xs.filter((x) => {
    const k = JSON.stringify(x);
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
}

