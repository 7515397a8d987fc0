// Where the USER's code called Kiln, for error messages: the first stack frame outside Kiln's
// own source files. Kiln's files are its library directories (ir/, passes/, runtime/,
// compiler/, tensor/, util/, cli/, the root index.ts) and node_modules or Node's internals;
// the model zoo (models/) is Kiln's too, but a user calling a zoo model wants the line of
// THEIR call, so a zoo frame is kept as a second, inner location (`(in models/gpt2.ts:88:13)`)
// and the user's frame still ends the message. When nothing but Kiln is on the stack (the
// `kiln` CLI running a zoo model), the zoo frame is the location. Frames are found only when an
// error is made: the stack is captured then, at a depth (STACK_DEPTH) that reaches the user
// from the 13-18 frames deep that ops raise errors, so the eager hot path pays nothing.

/** A place in the user's source (1-based line and column). */
export interface UserFrame {
  readonly file: string;
  readonly line: number;
  readonly column: number;
  /** The zoo model's line the op was called from, when the call went through models/. */
  readonly zoo?: UserFrame;
}

/** How deep a stack is captured when an error is made (Node's default of 10 is too few). */
export const STACK_DEPTH = 100;

const ROOT = rootPath();
const LIBRARY = ["ir", "passes", "runtime", "compiler", "tensor", "util", "cli"].map(
  (d) => `${ROOT}${d}/`,
);
const ZOO = `${ROOT}models/`;
const INDEX = [`${ROOT}index.ts`, `${ROOT}index.js`];
/** This module's own file: in a bundle (the browser build's kiln.js) that is all of Kiln. */
const OWN = ownFile();

function ownFile(): string {
  const url = new URL(import.meta.url);
  return url.protocol === "file:" ? decodeURIComponent(url.pathname) : url.href;
}

function rootPath(): string {
  const url = new URL("..", import.meta.url);
  return url.protocol === "file:" ? decodeURIComponent(url.pathname) : url.href;
}

/** Kiln's library (never the user's location), the model zoo, or the user's own code. */
export function fileKind(file: string): "library" | "zoo" | "user" {
  if (file.startsWith("node:") || file.includes("/node_modules/") || !file.includes("/")) {
    return "library"; // `node:internal/...`, dependencies, `<anonymous>`, `native`
  }
  if (file === OWN) return "library";
  if (file.startsWith(ZOO)) return "zoo";
  if (INDEX.includes(file) || LIBRARY.some((d) => file.startsWith(d))) return "library";
  return "user";
}

const FRAME = /\(?((?:file:\/\/)?[^\s()]+?):(\d+):(\d+)\)?\s*$/;

/** The frames of a V8 stack text with a file position, top first. */
export function stackFrames(stack: string | undefined): UserFrame[] {
  if (stack === undefined) return [];
  const out: UserFrame[] = [];
  for (const line of stack.split("\n")) {
    const t = line.trim();
    if (!t.startsWith("at ")) continue;
    const m = FRAME.exec(t);
    if (!m) continue;
    let file = m[1]!;
    if (file.startsWith("file://")) {
      try {
        file = decodeURIComponent(new URL(file).pathname);
      } catch {
        // keep the URL as it is
      }
    }
    out.push({ file, line: Number(m[2]), column: Number(m[3]) });
  }
  return out;
}

/**
 * The user's frame in a stack text: the first frame outside Kiln, with the first zoo frame
 * above it as `zoo`; the first zoo frame when there is no user frame; else undefined.
 */
export function userFrameOf(stack: string | undefined): UserFrame | undefined {
  let zoo: UserFrame | undefined;
  for (const f of stackFrames(stack)) {
    const kind = fileKind(f.file);
    if (kind === "user") return zoo ? { ...f, zoo } : f;
    if (kind === "zoo") zoo ??= f;
  }
  return zoo;
}

let sourceMapsOn = false;

/** Stack positions in the TypeScript the user wrote (tsx and vitest map already). */
function ensureSourceMaps(): void {
  if (sourceMapsOn) return;
  sourceMapsOn = true;
  const p = (globalThis as { process?: { setSourceMapsEnabled?: (on: boolean) => void } })
    .process;
  p?.setSourceMapsEnabled?.(true);
}

/** The user's frame of the code running now (a stack captured STACK_DEPTH deep). */
export function captureUserFrame(): UserFrame | undefined {
  ensureSourceMaps();
  const saved = Error.stackTraceLimit;
  Error.stackTraceLimit = Math.max(saved, STACK_DEPTH);
  try {
    return userFrameOf(new Error().stack);
  } finally {
    Error.stackTraceLimit = saved;
  }
}

/**
 * Runs `make` (an Error constructor call) with the stack captured STACK_DEPTH deep, so the
 * error's own `stack` shows the user's frame.
 */
export function withDeepStack<T>(make: () => T): T {
  ensureSourceMaps();
  const saved = Error.stackTraceLimit;
  if (saved >= STACK_DEPTH) return make();
  Error.stackTraceLimit = STACK_DEPTH;
  try {
    return make();
  } finally {
    Error.stackTraceLimit = saved;
  }
}

/** `file:line:col`, relative to Kiln's root when inside it (the repository's own tests). */
export function formatFrame(f: { file: string; line: number; column: number }): string {
  const file = f.file.startsWith(ROOT) ? f.file.slice(ROOT.length) : f.file;
  return `${file}:${f.line}:${f.column}`;
}

/** The message suffix for a frame: ` (in models/m.ts:3:9) at user.ts:10:5`. */
export function locationSuffix(f: UserFrame): string {
  const zoo = f.zoo ? ` (in ${formatFrame(f.zoo)})` : "";
  return `${zoo} at ${formatFrame(f)}`;
}

const BASE = Symbol("kiln.baseMessage");

/** An error that names the user's location: its message ends with locationSuffix(userFrame). */
export interface LocatedError extends Error {
  userFrame: UserFrame;
  [BASE]?: string;
}

/** Whether `e` already names a user location (set by locate). */
export function isLocated(e: unknown): e is LocatedError {
  return e instanceof Error && (e as Partial<LocatedError>)[BASE] !== undefined;
}

/** The message of `e` without the location locate() appended. */
export function baseMessage(e: Error): string {
  return (e as Partial<LocatedError>)[BASE] ?? e.message;
}

/**
 * Makes `e`'s message end with ` at <user frame>` (replacing a location it already had: a
 * compiled op's recorded line is more precise than the stack's) and sets `e.userFrame`; the
 * first line of `e.stack` is updated to match, and a frame the stack lacks is added to it.
 * Without a frame (none on the stack) `e` is returned unchanged.
 */
export function locate<E extends Error>(e: E, frame: UserFrame | undefined): E {
  if (frame === undefined) return e;
  const oldMessage = e.message;
  let stack: string | undefined;
  try {
    stack = e.stack;
  } catch {
    stack = undefined;
  }
  const located = nameLocation(e, frame);
  const message = located.message;
  if (typeof stack === "string") {
    let s = oldMessage !== "" && stack.includes(oldMessage)
      ? stack.replace(oldMessage, message)
      : stack;
    const at = `${frame.file}:${frame.line}:${frame.column}`;
    if (!s.includes(at)) s += `\n    at ${at}`;
    try {
      located.stack = s;
    } catch {
      // a frozen stack: the message still names the frame
    }
  }
  return located;
}

/**
 * The message and `userFrame` part of locate(), leaving `e.stack` alone: for an error's own
 * constructor, whose stack is not formatted yet (V8 formats it, header included, on first read,
 * so a subclass's name set later still shows).
 */
export function nameLocation<E extends Error>(e: E, frame: UserFrame | undefined): E {
  if (frame === undefined) return e;
  const located = e as E & LocatedError;
  const base = baseMessage(e);
  Object.defineProperty(located, BASE, { value: base, configurable: true, writable: true });
  Object.defineProperty(located, "userFrame", {
    value: frame,
    configurable: true,
    writable: true,
    enumerable: false,
  });
  located.message = `${base}${locationSuffix(frame)}`;
  return located;
}

/** locate(e, the user's frame in e's own stack, else in the stack running now). */
export function locateHere<E extends Error>(e: E): E {
  if (isLocated(e)) return e;
  let stack: string | undefined;
  try {
    stack = e.stack;
  } catch {
    stack = undefined;
  }
  // The error's own stack may stop short of the user (10 frames): then the stack running now.
  const own = userFrameOf(stack);
  const frame = own !== undefined && fileKind(own.file) === "user" ? own : captureUserFrame();
  return locate(e, frame ?? own);
}

/**
 * The frame for a location recorded earlier (a traced op's line; a path relative to Kiln's
 * root is resolved against it): itself when it is the user's, or, for a zoo model's line, the
 * user's frame now with the zoo line inside it.
 */
export function frameAt(loc: { file: string; line: number; column: number }): UserFrame {
  const file = loc.file.startsWith("/") || loc.file.includes("://") ? loc.file : ROOT + loc.file;
  const at: UserFrame = { file, line: loc.line, column: loc.column };
  if (fileKind(file) !== "zoo") return at;
  const here = captureUserFrame();
  return here !== undefined && fileKind(here.file) === "user" ? { ...here, zoo: at } : at;
}

/** Whether `e` was thrown by Kiln (its top frame is Kiln's), not by the user's own code. */
export function thrownByKiln(e: Error): boolean {
  let stack: string | undefined;
  try {
    stack = e.stack;
  } catch {
    return false;
  }
  const top = stackFrames(stack)[0];
  return top !== undefined && fileKind(top.file) !== "user";
}
