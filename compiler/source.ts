// Where in the USER's source something happened, and what the user called things. A location
// is the first stack frame outside Kiln's own library directories (ir/, tensor/, runtime/,
// passes/, compiler/, util/, cli/, index.ts, node_modules, Node internals: util/user_frame.ts);
// models/, tests and examples count as user code here (an error raised at a zoo model's line
// also names the user's call of the model, util/user_frame.ts). Under vitest and tsx the stack
// already points at `.ts` lines; under plain Node, source maps are turned on
// (process.setSourceMapsEnabled) the first time a location is asked for, so compiled
// JavaScript maps back to the TypeScript it came from. Parameter names come
// from the function's source text, so a guard reads `x.shape[1] was 128, now 129` rather
// than `args[0].shape[1] ...`.

import { fileKind } from "../util/user_frame.ts";
import { fileUrlToPath, readTextFile } from "./node_builtins.ts";

/** A place in the user's source. */
export interface SourceLocation {
  readonly file: string;
  readonly line: number;
  readonly column: number;
}

const ROOT = fileUrlToPath(new URL("..", import.meta.url).href);
let sourceMapsOn = false;

function ensureSourceMaps(): void {
  if (sourceMapsOn) return;
  sourceMapsOn = true;
  const p = process as { setSourceMapsEnabled?: (on: boolean) => void };
  p.setSourceMapsEnabled?.(true);
}

const FRAME = /\(?((?:file:\/\/)?[^\s()]+?):(\d+):(\d+)\)?\s*$/;

/** Kiln's library, by the one list errors use too (util/user_frame.ts); models/ is not in it. */
function isLibraryFile(file: string): boolean {
  return fileKind(file) === "library";
}

/** The file part of a frame, as a path (file:// URLs decoded). */
function framePath(raw: string): string {
  if (!raw.startsWith("file://")) return raw;
  try {
    return fileUrlToPath(raw);
  } catch {
    return raw;
  }
}

/** The first user frame in a stack text, or undefined. */
export function userFrame(stack: string | undefined): SourceLocation | undefined {
  if (stack === undefined) return undefined;
  for (const line of stack.split("\n")) {
    const t = line.trim();
    if (!t.startsWith("at ")) continue;
    const m = FRAME.exec(t);
    if (!m) continue;
    const file = framePath(m[1]!);
    if (isLibraryFile(file)) continue;
    return { file, line: Number(m[2]), column: Number(m[3]) };
  }
  return undefined;
}

/** The user's source location of the code running now (undefined when none is found). */
export function userLocation(): SourceLocation | undefined {
  ensureSourceMaps();
  const saved = Error.stackTraceLimit;
  Error.stackTraceLimit = 64;
  try {
    return userFrame(new Error().stack);
  } finally {
    Error.stackTraceLimit = saved;
  }
}

/** `file:line:col` relative to the repository root when inside it (shorter messages). */
export function formatLocation(loc: SourceLocation | undefined): string {
  if (loc === undefined) return "<unknown location>";
  const file = loc.file.startsWith(ROOT) ? loc.file.slice(ROOT.length) : loc.file;
  return `${file}:${loc.line}:${loc.column}`;
}

/**
 * The parameter names of a function, read from its source: plain identifiers, with defaults
 * and type-stripped; a destructured or rest parameter gets undefined (callers fall back to
 * `args[i]`).
 */
export function parameterNames(
  fn: (...args: never[]) => unknown,
  original?: SourceLocation,
): (string | undefined)[] {
  // The original .ts text first: bundlers rename parameters in the code that runs (`x` → `x2`).
  const fromFile = original ? textAt(original) : undefined;
  let src = fromFile;
  if (src === undefined) {
    try {
      src = Function.prototype.toString.call(fn);
    } catch {
      return [];
    }
  }
  const list = parameterList(src);
  if (list === undefined) return [];
  return splitTopLevel(list).map((p) => {
    const name = /^\s*([A-Za-z_$][\w$]*)\s*\??\s*(?:[:=]|$)/.exec(p);
    return name ? name[1] : undefined;
  });
}

const files = new Map<string, string | undefined>();

/** The source text from a location to the end of its file (undefined when unreadable). */
function textAt(loc: SourceLocation): string | undefined {
  let text = files.get(loc.file);
  if (!files.has(loc.file)) {
    text = readTextFile(loc.file);
    files.set(loc.file, text);
  }
  if (text === undefined) return undefined;
  const lines = text.split("\n");
  if (loc.line < 1 || loc.line > lines.length) return undefined;
  return [lines[loc.line - 1]!.slice(Math.max(0, loc.column - 1)), ...lines.slice(loc.line)].join(
    "\n",
  );
}

/** The text between a function's parameter parentheses (or a lone arrow parameter). */
function parameterList(src: string): string | undefined {
  const arrow = /^\s*(?:async\s+)?([A-Za-z_$][\w$]*)\s*=>/.exec(src);
  if (arrow) return arrow[1];
  const open = src.indexOf("(");
  if (open < 0) return undefined;
  let depth = 0;
  for (let i = open; i < src.length; i++) {
    const c = src[i];
    if (c === "(" || c === "[" || c === "{") depth++;
    else if (c === ")" || c === "]" || c === "}") {
      depth--;
      if (depth === 0) return src.slice(open + 1, i);
    }
  }
  return undefined;
}

function splitTopLevel(list: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < list.length; i++) {
    const c = list[i];
    if (c === "(" || c === "[" || c === "{") depth++;
    else if (c === ")" || c === "]" || c === "}") depth--;
    else if (c === "," && depth === 0) {
      out.push(list.slice(start, i));
      start = i + 1;
    }
  }
  if (list.slice(start).trim() !== "") out.push(list.slice(start));
  return out;
}
