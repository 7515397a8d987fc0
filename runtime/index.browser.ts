// The browser build's runtime/index.ts (scripts/build_browser.ts swaps it in): the same entry
// without the native backend, which compiles C and loads a Node addon. Keep the two in step.

import "./interpreter.ts";
import "./js/backend.ts";
import "./wasm/backend.ts";

export {
  type Backend,
  type Executable,
  UnsupportedError,
  backendNames,
  backendTier,
  type CompileHints,
  type Tier,
  getBackend,
  registerBackend,
  single,
} from "./backend.ts";
export { interpreterBackend } from "./interpreter.ts";
export { jsBackend, jsSource, type JsExecutable } from "./js/backend.ts";
export { wasmBackend, type WasmExecutable } from "./wasm/backend.ts";
export {
  setWasmThreadHost,
  setWasmThreads,
  shutdownWasmPool,
  WASM_WORKER_SOURCE,
  type WasmThreadHost,
  wasmThreads,
  wasmThreadsUnavailable,
  type WasmWorker,
  type WasmWorkerInit,
  withWasmThreads,
} from "./wasm/threads.ts";
export { toleranceProblem } from "./tiers.ts";
export {
  ProgramCache,
  defaultProgramCache,
  setDefaultProgramCache,
  type CacheStats,
} from "./cache.ts";
export {
  cacheStats,
  CompileNeverError,
  compileMode,
  formatCacheStats,
  noteExecutableHit,
  resetCacheStats,
  setCompileMode,
  type CacheEntryStats,
  type CacheStatistics,
  type CompileMode,
  type HitCounts,
  type KindStats,
  type ProgramKind,
  type ProgramOrigin,
} from "./cache_stats.ts";
export {
  compileKeyOptions,
  compileModule,
  type CompileOptions,
  type CompileResult,
} from "./compile.ts";
