// The CLI's error type and exit codes. Every failure the user can cause (a missing file, a bad
// --shape, a model that throws) becomes a CliError carrying the exit code documented in
// `kiln --help` and docs/cli.md; main.ts prints its message as one line (the stack only with
// --verbose), so scripts can tell "your model is broken" from "your command line is wrong".

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

/** Runs `fn`; anything it throws becomes a CliError with `code`, prefixed by `what`. */
export function wrap<T>(code: ExitCode, what: string, fn: () => T): T {
  try {
    return fn();
  } catch (e) {
    if (e instanceof CliError) throw e;
    throw new CliError(code, `${what}: ${firstLine(e)}`, e);
  }
}
