// The CLI's error type and exit codes. Every failure the user can cause (a missing file, a bad
// --shape, a model that throws) becomes a CliError carrying the exit code documented in
// `kiln --help` and docs/cli.md; main.ts prints its message as one line (the stack only with
// --verbose), so scripts can tell "your model is broken" from "your command line is wrong".
// A failure in the user's code ends with its place, ` at file:line:col` (firstLineAt): an op's
// error names it already (tensor/errors.ts), a syntax error's comes from the transform (esbuild,
// through tsx) or V8, anything else from the first frame of its stack outside Kiln.

import { formatFrame, isLocated, userFrameOf, type UserFrame } from "../util/user_frame.ts";

/** Exit codes, documented in `kiln --help` and docs/cli.md. */
export const EXIT = {
  /** Success. */
  ok: 0,
  /** A check failed: `recompiles` counted more compiles than --max. */
  checkFailed: 1,
  /** Bad command line: an unknown option, a bad --shape, an unknown pass, a bad value. */
  usage: 2,
  /** The model file could not be loaded: missing, does not import, no usable default export. */
  load: 3,
  /** The model threw while building inputs, tracing, compiling or running. */
  model: 4,
  /** Output could not be written (--out not writable). */
  io: 5,
} as const;

export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

export class CliError extends Error {
  readonly code: ExitCode;

  constructor(code: ExitCode, message: string, cause?: unknown) {
    super(message);
    this.name = "CliError";
    this.code = code;
    if (cause !== undefined) this.cause = cause;
  }
}

/** The first line of an error's message (messages from deep inside can span lines). */
export function firstLine(e: unknown): string {
  const text = e instanceof Error ? e.message : String(e);
  const line = text.split("\n")[0] ?? "";
  return line.trim() === "" ? (e instanceof Error ? e.name : "error") : line;
}

/** The place a syntax error points at: esbuild's first error, or V8's. */
function syntaxErrorAt(e: Error): { at: UserFrame; text: string } | undefined {
  const errors = (e as { errors?: unknown }).errors;
  if (Array.isArray(errors) && errors.length > 0) {
    const first = errors[0] as { text?: unknown; location?: unknown };
    const loc = first.location as { file?: unknown; line?: unknown; column?: unknown } | null;
    if (loc && typeof loc.file === "string" && typeof loc.line === "number") {
      const more = errors.length > 1 ? ` (and ${errors.length - 1} more)` : "";
      const column = typeof loc.column === "number" ? loc.column + 1 : 1;
      return {
        at: { file: loc.file, line: loc.line, column },
        text: `${typeof first.text === "string" ? first.text : firstLine(e)}${more}`,
      };
    }
  }
  // tsx passes esbuild's error on as text only: `Transform failed with 1 error:\n
  // /m.ts:2:12: ERROR: Unexpected ";"` (esbuild's columns are 0-based).
  const lines = e.message.split("\n");
  const found = lines.map((l) => /^(.+?):(\d+):(\d+): ERROR: (.*)$/.exec(l)).filter((m) => m);
  if (found.length > 0) {
    const m = found[0]!;
    const more = found.length > 1 ? ` (and ${found.length - 1} more)` : "";
    return {
      at: { file: m[1]!, line: Number(m[2]), column: Number(m[3]) + 1 },
      text: `${m[4]!}${more}`,
    };
  }
  if (e instanceof SyntaxError) {
    // Node prints the offending file and line above the message: `file:///m.js:2`.
    const m = /^(?:file:\/\/)?(\/[^\s:]+):(\d+)\s*$/m.exec(e.stack ?? "");
    if (m) return { at: { file: m[1]!, line: Number(m[2]), column: 1 }, text: firstLine(e) };
  }
  return undefined;
}

/**
 * The first line of an error's message ending with the user's place (` at file:line:col`):
 * where a syntax error points, or the first frame of its stack outside Kiln.
 */
export function firstLineAt(e: unknown): string {
  if (!(e instanceof Error)) return firstLine(e);
  const line = firstLine(e);
  if (isLocated(e) && line === e.message) return line;
  const syntax = syntaxErrorAt(e);
  if (syntax) return `${syntax.text} at ${formatFrame(syntax.at)}`;
  const frame = userFrameOf(e.stack);
  return frame ? `${line} at ${formatFrame(frame)}` : line;
}

/** Runs `fn`; anything it throws becomes a CliError with `code`, prefixed by `what`. */
export function wrap<T>(code: ExitCode, what: string, fn: () => T): T {
  try {
    return fn();
  } catch (e) {
    if (e instanceof CliError) throw e;
    throw new CliError(code, `${what}: ${firstLineAt(e)}`, e);
  }
}
