// compile()'s options: the public `CompileOptions` and, checked once when compile() is called,
// the `CompileConfig` every stage reads (never writes): limits resolved to numbers, the program
// cache resolved to one object, the dynamic-shape policy validated. A bad option is a
// TypeError (or a DynamicShapeError for the dynamic-shape ones) at compile(), not at a call.

import type { PipelineOptions } from "../passes/index.ts";
import { getBackend, ProgramCache } from "../runtime/index.ts";
import type { LazyOptions } from "../tensor/lazy.ts";
import {
  type BucketPolicy,
  checkBuckets,
  checkDynamicOption,
  type DynamicOption,
} from "./dynamic.ts";
import { checkKnownKeys } from "../util/suggest.ts";
import { describeValue } from "./guards.ts";

export interface CompileOptions {
  /** A registered backend's name; default: the fastest available (guarded as a setting). */
  backend?: string;
  /** A graph break or an unreplayable side effect is an error naming the source line. */
  fullgraph?: boolean;
  /** Cache entries per function before running eagerly (default 8). */
  recompileLimit?: number;
  /** Any recompilation throws a RecompileError (for tests and CI). */
  errorOnRecompile?: boolean;
  /**
   * The program cache: "disk" (the process-wide cache, memory and disk; the default),
   * "memory" (a process-wide memory-only cache), "off" / false (compile every time), or a
   * ProgramCache.
   */
  cache?: "memory" | "disk" | "off" | false | ProgramCache;
  /** Fold parameters and buffers into the program as constants (guarded by value identity). */
  freeze?: boolean;
  /** Read and guard free variables that can change (default true; see freevars.ts). */
  guardFreeVariables?: boolean;
  /** Optimization pipeline options (verify, disable, dumpDir). */
  pipeline?: PipelineOptions;
  /**
   * Which argument dims are dynamic (docs/dynamic-shapes.md): "auto" (the default: a dim whose
   * size changes between calls becomes dynamic), false (every shape compiles its own program),
   * or declared dims keyed by argument path or position: `{ x: { 1: { max: 1024 } } }`.
   */
  dynamic?: DynamicOption;
  /** How sizes of a dynamic dim share programs: "pow2" (default), a list, { multiple }, "none". */
  buckets?: BucketPolicy;
  /** A size outside a declared range: "error" (default) throws; "recompile" specializes it. */
  outOfRange?: "error" | "recompile";
  /**
   * Threads the native and wasm backends run this function's programs on (the calling thread
   * included); default: the backend's setting (KILN_NUM_THREADS, else every core).
   */
  threads?: number;
  /**
   * Check index values as eager mode does (default true): an out-of-range index given to
   * gather, scatter, indexSelect, embedding, oneHot or a loss's class target raises eager's
   * OpError after the call.
   * false keeps XLA's semantics (clamped or skipped indices) and skips the check's cost.
   */
  checkIndices?: boolean;
}

/** The options as the stages read them (see the file comment). */
export interface CompileConfig {
  readonly backend: string | undefined;
  readonly fullgraph: boolean;
  readonly recompileLimit: number;
  readonly errorOnRecompile: boolean;
  /** undefined: the process-wide cache; false: none. */
  readonly cache: ProgramCache | false | undefined;
  readonly freeze: boolean;
  readonly guardFreeVariables: boolean;
  readonly pipeline: PipelineOptions | undefined;
  readonly dynamic: DynamicOption;
  readonly buckets: BucketPolicy;
  readonly outOfRange: "error" | "recompile";
  readonly threads: number | undefined;
  readonly checkIndices: boolean;
  /** What replay mode and the tracer's lazy scope compile with. */
  readonly lazy: LazyOptions;
}

// The schema of known keys: a key added to CompileOptions or PipelineOptions must be added here
// (the `satisfies` makes a missing one a type error), and any other key a user writes is a
// TypeError with a did-you-mean instead of an option silently ignored.
const OPTION_KEYS = {
  backend: true,
  fullgraph: true,
  recompileLimit: true,
  errorOnRecompile: true,
  cache: true,
  freeze: true,
  guardFreeVariables: true,
  pipeline: true,
  dynamic: true,
  buckets: true,
  outOfRange: true,
  threads: true,
  checkIndices: true,
} as const satisfies { readonly [K in keyof Required<CompileOptions>]: true };

const PIPELINE_KEYS = {
  verify: true,
  disable: true,
  dumpDir: true,
  onNoFixpoint: true,
} as const satisfies { readonly [K in keyof Required<PipelineOptions>]: true };

const typeError = (message: string) => new TypeError(message);

/**
 * Throws unless `options` is an options object with known keys only (checked before the
 * target's forward).
 */
export function checkOptionsObject(options: unknown): void {
  if (typeof options !== "object" || options === null) {
    throw new TypeError(`compile: options must be an object, got ${describeValue(options)}`);
  }
  checkKnownKeys(options, Object.keys(OPTION_KEYS), "compile", typeError);
  const pipeline = (options as CompileOptions).pipeline;
  if (pipeline !== undefined) {
    if (typeof pipeline !== "object" || pipeline === null) {
      throw new TypeError(
        `compile: pipeline must be an object, got ${describeValue(pipeline)}`,
      );
    }
    checkKnownKeys(pipeline, Object.keys(PIPELINE_KEYS), "compile: pipeline", typeError);
  }
}

/** Checks `options` and resolves them (see the file comment). */
export function resolveConfig(options: CompileOptions): CompileConfig {
  const limit = options.recompileLimit ?? 8;
  if (!Number.isInteger(limit) || limit < 1) {
    throw new TypeError(`compile: recompileLimit must be an integer >= 1, got ${String(limit)}`);
  }
  if (options.backend !== undefined) getBackend(options.backend);
  const cache = programCache(options.cache);
  const dynamic: DynamicOption = options.dynamic ?? "auto";
  const buckets: BucketPolicy = options.buckets ?? "pow2";
  checkBuckets(buckets);
  checkDynamicOption(dynamic, buckets);
  const outOfRange = options.outOfRange ?? "error";
  if (outOfRange !== "error" && outOfRange !== "recompile") {
    throw new TypeError(
      `compile: outOfRange must be "error" or "recompile", got ${describeValue(outOfRange)}`,
    );
  }
  const threads = options.threads;
  if (threads !== undefined && (!Number.isInteger(threads) || threads < 1)) {
    throw new TypeError(`compile: threads must be an integer >= 1, got ${describeValue(threads)}`);
  }
  const checkIndices = options.checkIndices ?? true;
  if (typeof checkIndices !== "boolean") {
    throw new TypeError(
      `compile: checkIndices must be true or false, got ${describeValue(checkIndices)}`,
    );
  }
  return {
    backend: options.backend,
    threads,
    checkIndices,
    fullgraph: Boolean(options.fullgraph),
    recompileLimit: limit,
    errorOnRecompile: Boolean(options.errorOnRecompile),
    cache,
    freeze: options.freeze === true,
    guardFreeVariables: options.guardFreeVariables !== false,
    pipeline: options.pipeline,
    dynamic,
    buckets,
    outOfRange,
    lazy: {
      ...(options.backend !== undefined && { backend: options.backend }),
      ...(cache !== undefined && { cache }),
      ...(options.pipeline !== undefined && { pipeline: options.pipeline }),
      ...(!checkIndices && { checkIndices }),
    },
  };
}

let memoryCache: ProgramCache | undefined;

function programCache(option: CompileOptions["cache"]): ProgramCache | false | undefined {
  if (option === undefined || option === "disk") return undefined;
  if (option === false || option === "off") return false;
  if (option === "memory") return (memoryCache ??= new ProgramCache({ disk: false }));
  if (option instanceof ProgramCache) return option;
  throw new TypeError(
    `compile: cache must be "memory", "disk", "off", false or a ProgramCache, got ` +
      describeValue(option),
  );
}
