// The one way to turn a module into an executable: pick the backend (by name, or the default),
// key the program cache on the module as given, and only on a miss run the optimization
// pipeline (passes/index.ts: simplify, CSE, DCE, fusion) on a CLONE and hand the result to the
// backend. Keying on the unoptimized module is what lets a hit, in memory or on disk, skip both
// the passes and codegen; cloning keeps the caller's module (a lazy graph, a traced program, a
// cache key's source) untouched. Every setting that changes the generated code (whether to
// optimize, which passes are disabled) goes into the cache key's options hash; settings that
// only observe (verify, dumpDir) do not. KILN_LOGS=perf prints the passes and codegen times of
// every compile and the time of every hit.

import { cloneModule } from "../ir/clone.ts";
import type { Module } from "../ir/module.ts";
import { optimizationPipeline, type PipelineOptions } from "../passes/index.ts";
import { log, logEnabled } from "../util/log.ts";
import { type Backend, type Executable, getBackend } from "./backend.ts";
import {
  type CacheHit,
  type CacheKeyOptions,
  defaultProgramCache,
  ProgramCache,
} from "./cache.ts";
import type { ProgramOrigin } from "./cache_stats.ts";

export interface CompileOptions {
  /** A registered backend's name; the default (highest priority) backend when absent. */
  backend?: string;
  /**
   * The program cache to use: the process-wide one (defaultProgramCache(), memory plus disk)
   * when absent, or `false` to compile every time.
   */
  cache?: ProgramCache | false;
  /** Options for the optimization pipeline (verify, disable, dumpDir, onNoFixpoint). */
  pipeline?: PipelineOptions;
  /** Run the optimization pipeline (default true); false compiles the module as it is. */
  optimize?: boolean;
  /** Who asks (an op, a lazy region, a compiled function), for cacheStats() and its errors. */
  origin?: ProgramOrigin;
}

export interface CompileResult {
  readonly executable: Executable;
  /** Where the executable came from: "memory", "disk" or "miss" (compiled now). */
  readonly hit: CacheHit;
  /** The program cache key (JSON text: Kiln version, backend, fingerprint, options hash). */
  readonly key: string;
}

// With no cache, a cache that keeps nothing still computes the key and counts the compile.
let uncached: ProgramCache | undefined;

function noCache(): ProgramCache {
  uncached ??= new ProgramCache({ memory: false, disk: false });
  return uncached;
}

/**
 * The settings that change the generated code, hashed into the cache key. `pipeline` names
 * the pipeline so that an entry compiled by this function never answers a caller that cached
 * the same module compiled without passes (or with others).
 */
export function compileKeyOptions(options: CompileOptions = {}): CacheKeyOptions {
  const optimize = options.optimize ?? true;
  if (!optimize) return { pipeline: "none" };
  const disable = [...new Set(options.pipeline?.disable ?? [])].sort();
  return { pipeline: "optimization", disable };
}

/**
 * The executable for `module`: from the cache, or compiled (the optimization pipeline on a
 * clone, then the backend) and stored. The module itself is never changed.
 */
export function compileModule(module: Module, options: CompileOptions = {}): CompileResult {
  const backend: Backend = getBackend(options.backend);
  const cache = options.cache === false ? noCache() : (options.cache ?? defaultProgramCache());
  const optimize = options.optimize ?? true;
  let passesMs = 0;
  const prepare = (m: Module): Module => {
    if (!optimize) return m;
    const t0 = performance.now();
    const copy = cloneModule(m);
    optimizationPipeline(options.pipeline).run(copy);
    passesMs = performance.now() - t0;
    return copy;
  };
  const t0 = performance.now();
  const r = cache.getOrCompile(
    module,
    backend,
    compileKeyOptions(options),
    prepare,
    options.origin !== undefined ? { origin: options.origin } : {},
  );
  if (logEnabled("perf")) {
    const total = performance.now() - t0;
    const what = `${module.name} on '${backend.name}'`;
    if (r.hit === "miss") {
      log(
        "perf",
        `compile ${what}: ${total.toFixed(2)} ms (passes ${passesMs.toFixed(2)} ms, ` +
          `keying and codegen ${(total - passesMs).toFixed(2)} ms)`,
      );
    } else {
      log("perf", `compile ${what}: ${r.hit} hit in ${total.toFixed(3)} ms`);
    }
  }
  return { executable: r.executable, hit: r.hit, key: r.key };
}
