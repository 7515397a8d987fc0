// The backend interface every execution path goes through: eager ops (one-op programs), lazy
// graphs and compiled models all hand an IR module to `Backend.compile` and run the resulting
// `Executable` on literals. Backends are registered by name; `getBackend()` with no name gives
// the default (the fastest registered). A backend that cannot handle a module throws
// UnsupportedError at compile time naming the instruction, the opcode and why.

import type { EvalValue } from "../ir/evaluate.ts";
import type { Literal, LiteralData } from "../ir/literal.ts";
import type { Module } from "../ir/module.ts";

/** A compiled program. `run` is synchronous and never mutates its inputs. */
export interface Executable {
  readonly backend: string;
  /** The module it was compiled from (after whatever passes the caller ran). */
  readonly module: Module;
  /**
   * Runs the entry computation. Inputs are the entry's parameters in order (tuple parameters as
   * arrays); a tuple result comes back as an array of values, an array result as a Literal.
   */
  run(inputs: readonly EvalValue[]): EvalValue;
  /**
   * Optional fast entry for a caller that guarantees what `run` checks (the eager op cache: its
   * key fixes every operand's type and dims, so a hit's arguments conform): the argument leaves'
   * data in parameter order, no checks; returns fresh result buffers in leaf order.
   */
  runLeaves?(args: readonly LiteralData[]): LiteralData[];
}

/**
 * How a backend's results relate to the reference evaluator's: `exact` (bit-identical) or
 * `tolerance` (within the bounds of runtime/tiers.ts: reassociated sums, FMA, polynomial
 * transcendental functions; integer semantics exact).
 */
export type Tier = "exact" | "tolerance";

/** What a compile is for, so a backend can choose how to build it. */
export interface CompileHints {
  /**
   * `eager`: a one-op program that will be compiled again for every new shape (a backend may
   * build shape-generic code); `program` (default): a whole program compiled once.
   */
  readonly purpose?: "eager" | "program";
}

export interface Backend {
  readonly name: string;
  /** Higher runs first when no backend is named (the default is the fastest available). */
  readonly priority: number;
  /** The numerics contract (default `exact`). */
  readonly tier?: Tier;
  /**
   * Whether the backend can run on this machine (a native backend needs a C compiler);
   * checked, once, when backends are listed. Absent: always.
   */
  available?(): boolean;
  compile(module: Module, hints?: CompileHints): Executable;
  /**
   * Optional: what else decides this backend's generated code on this machine (a native
   * backend's compiler, version, flags and CPU features), folded into every program cache key.
   */
  cacheKeyParts?(): string;
  /**
   * Optional, with `deserialize`: what the on-disk program cache stores for an executable (the
   * `js` backend's generated source, say). A backend without the pair is cached in memory only.
   */
  serialize?(exe: Executable): Uint8Array;
  /**
   * Rebuilds an executable from `serialize`'s bytes and the module it was compiled from (or one
   * equal to it up to names and metadata), without re-running codegen. The cache only calls it
   * on bytes whose checksum and key it has verified; it may throw if the bytes are unusable.
   */
  deserialize?(module: Module, payload: Uint8Array): Executable;
  /**
   * Optional: like `deserialize`, for a backend whose payload is enough to run; the cache
   * prefers it when the entry stores a module, which is then decoded only if it is asked for
   * (`module()`, memoized: for `exe.module`, say), as decoding a large module can cost more
   * than the rest of a load. Checks that need the module are deferred with it.
   */
  deserializeDeferred?(module: () => Module, payload: Uint8Array): Executable;
}

/** A backend cannot run a module: names the instruction and opcode, and says why. */
export class UnsupportedError extends Error {
  readonly backend: string;
  readonly instruction: string | undefined;
  readonly opcode: string | undefined;

  constructor(backend: string, detail: string, instruction?: string, opcode?: string) {
    const where = instruction !== undefined ? ` %${instruction} (${opcode ?? "?"})` : "";
    super(`backend '${backend}' cannot compile${where}: ${detail}`);
    this.name = "UnsupportedError";
    this.backend = backend;
    this.instruction = instruction;
    this.opcode = opcode;
  }
}

const registry = new Map<string, Backend>();

/** The default backend, computed once per registration (eager ops ask for it on every call). */
let defaultBackend: Backend | undefined;

export function registerBackend(backend: Backend): void {
  registry.set(backend.name, backend);
  defaultBackend = undefined;
}

const availability = new Map<Backend, boolean>();

function isAvailable(b: Backend): boolean {
  let ok = availability.get(b);
  if (ok === undefined) {
    ok = b.available ? b.available() : true;
    availability.set(b, ok);
  }
  return ok;
}

/** Names of the registered backends that can run here, default first. */
export function backendNames(): string[] {
  return [...registry.values()]
    .filter(isAvailable)
    .sort((a, b) => b.priority - a.priority)
    .map((b) => b.name);
}

/** The tier of a registered backend (`exact` unless it says otherwise). */
export function backendTier(name: string): Tier {
  return getBackend(name).tier ?? "exact";
}

/** The backend called `name`, or the default (highest priority) one. */
export function getBackend(name?: string): Backend {
  if (name === undefined) {
    if (defaultBackend !== undefined) return defaultBackend;
    const first = backendNames()[0];
    if (first === undefined) throw new Error("no Kiln backend is registered");
    return (defaultBackend = registry.get(first)!);
  }
  const b = registry.get(name);
  if (!b) {
    throw new Error(`unknown backend '${name}'; available: ${backendNames().join(", ")}`);
  }
  if (!isAvailable(b)) {
    throw new Error(
      `backend '${name}' is not available on this machine (KILN_LOGS=backend says why); ` +
        `available: ${backendNames().join(", ")}`,
    );
  }
  return b;
}

/** Narrows a run result known to be one array value. */
export function single(v: EvalValue): Literal {
  if (Array.isArray(v)) throw new Error(`expected one array result, got a tuple of ${v.length}`);
  return v;
}
