// Backend compile: an IR program to an Executable through the runtime's program cache
// (optimization pipeline and backend codegen live there), with the settings of one compile()
// call. A backend that cannot compile a program (UnsupportedError) leaves it to the
// interpreter, which runs everything, so a compiled function never fails for want of a kernel.
// A program with bounded dynamic dims is padded to its bounds first (the dynamic padder), as
// the static program the backend runs. The compiled function whose call is compiling is the
// programs' origin (cacheStats(), the cache-only mode's error), set around that call.

import { cloneModule } from "../ir/clone.ts";
import type { Module } from "../ir/module.ts";
import { DynamicPadder } from "../passes/dynamic_padder.ts";
import {
  compileModule,
  type CompileResult,
  getBackend,
  interpreterBackend,
  type ProgramOrigin,
  UnsupportedError,
} from "../runtime/index.ts";
import { log } from "../util/log.ts";
import type { CompileConfig } from "./config.ts";

let origin: ProgramOrigin | undefined;

/** Runs `fn` with `o` as the origin of the programs it compiles (one compile() call). */
export function withProgramOrigin<T>(o: ProgramOrigin, fn: () => T): T {
  const before = origin;
  origin = o;
  try {
    return fn();
  } finally {
    origin = before;
  }
}

/** Compiles `module` (optimized on a copy by compileModule), through the program cache. */
export function compileProgram(module: Module, config: CompileConfig): CompileResult {
  const opts = {
    ...(origin !== undefined && { origin }),
    ...(config.backend !== undefined && { backend: config.backend }),
    ...(config.cache !== undefined && { cache: config.cache }),
    ...(config.pipeline !== undefined && { pipeline: config.pipeline }),
  };
  try {
    return compileModule(module, opts);
  } catch (e) {
    const name = getBackend(config.backend).name;
    if (!(e instanceof UnsupportedError) || name === interpreterBackend.name) throw e;
    log("perf", () => `compile: falls back to the interpreter: ${e.message}`);
    return compileModule(module, { ...opts, backend: interpreterBackend.name });
  }
}

/** Pads a program with bounded dynamic dims (on a copy) and compiles it, or says why not. */
export function compilePadded(
  module: Module,
  config: CompileConfig,
): { ok: true; result: CompileResult } | { ok: false; why: string } {
  const padded = cloneModule(module);
  try {
    new DynamicPadder().run(padded);
  } catch (e) {
    return { ok: false, why: `padding failed: ${e instanceof Error ? e.message : String(e)}` };
  }
  return { ok: true, result: compileProgram(padded, config) };
}
