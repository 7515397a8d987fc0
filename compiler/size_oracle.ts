// The size-branch oracle: the one question bounded dynamism cannot answer by comparing traces
// — "did the traced code branch on this size?" — behind one interface. Traces at a few sizes
// of a bucket cannot see a condition that flips between them (`T % 2 === 0`), so before a
// bucket shares one program compile() asks an oracle, and a "yes" keeps the dims static (each
// size compiled exactly). Two implementations: the coverage oracle (size_oracle_node.ts, Node:
// the source analysis finds every branch on a size, V8's block coverage over one shared
// inspector session says which the traces evaluated) and the STATIC oracle, for environments
// without node:inspector (browsers, Deno, Bun) or when forced with `KILN_SIZE_ORACLE=static`:
// it always answers "yes", so every dim stays static — slower to compile, never a wrong
// result. Which one a call gets is decided per bucketed call, so the environment variable may
// change between calls.

import type { Module as NNModule } from "../tensor/nn/module.ts";
import { log } from "../util/log.ts";
import { inspectorUnavailable } from "./inspector.ts";
import { coverageOracle } from "./size_oracle_node.ts";

/** The code of one compiled function, as an oracle reads it. */
export interface OracleCode {
  /** The compiled function's name, for logs. */
  readonly name: string;
  /** The compiled function; undefined for a module (its forward is read through `modules`). */
  readonly fn: Function | undefined;
  /** The module trees the code runs: the compiled model, or modules held by const free vars. */
  modules(): readonly NNModule[];
}

/**
 * One bucketed call's question: asked before the call's own trace (an oracle may start
 * recording then), answered by `decide`, and closed once the call is done, whatever happened.
 */
export interface SizeBranchQuestion {
  /**
   * `build`'s result (the traces at the bucket's other sizes and its program) when the code
   * did not branch on a size; otherwise why the dims stay static, without building.
   */
  decide<T extends { ok: boolean }>(build: () => T): T | { ok: false; why: string };
  /** Ends what `ask` started (idempotent). */
  close(): void;
}

export interface SizeBranchOracle {
  readonly kind: "coverage" | "static";
  ask(code: OracleCode): SizeBranchQuestion;
}

/** The conservative oracle: every bucketed call branches on its sizes, so nothing is shared. */
export function staticOracle(why: string): SizeBranchOracle {
  const reason = `kept static: whether the code branches on a size is not checked here (${why})`;
  return {
    kind: "static",
    ask: (code) => ({
      decide: () => {
        log("recompiles", () => `${code.name}: every dynamic dim is kept static (${why})`);
        return { ok: false, why: reason };
      },
      close: () => undefined,
    }),
  };
}

/** `KILN_SIZE_ORACLE`: "static" forces the static oracle; "coverage" or unset: the default. */
function forcedOracle(): "static" | "coverage" | undefined {
  const env = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process
    ?.env;
  const v = env?.["KILN_SIZE_ORACLE"];
  if (v === undefined || v === "") return undefined;
  if (v === "static" || v === "coverage") return v;
  throw new TypeError(`KILN_SIZE_ORACLE must be "static" or "coverage", got ${JSON.stringify(v)}`);
}

/** The oracle for a bucketed call now: the coverage oracle where it can run, else static. */
export function sizeBranchOracle(): SizeBranchOracle {
  if (forcedOracle() === "static") return staticOracle("KILN_SIZE_ORACLE=static");
  const none = inspectorUnavailable();
  if (none !== undefined) return staticOracle(`no node:inspector: ${none}`);
  return coverageOracle;
}
