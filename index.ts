// Kiln's public entry point (`kiln`): the IR layer (ir/index.ts, also `kiln/ir`), the tensor
// frontend (Tensor, ops, nn) and compile() with its dynamic-shape controls. The other public
// subpaths (package.json `exports`) are `kiln/nn`, `kiln/optim`, `kiln/models`, `kiln/testing`,
// `kiln/passes` and `kiln/runtime`.

export * from "./ir/index.ts";

// ---- Tensor frontend (tensor/): Tensor, dtypes, creation, random, ops (`ops` namespace plus
// the common ones at top level), nn, and the dispatcher's controls. tensor/index.ts decides
// what is public there.
export * from "./tensor/index.ts";

// ---- compile() (compiler/): graph capture with guards, graph breaks and replay mode, stats,
// and explain().
export {
  compile,
  explain,
  explainWith,
  describeGuard,
  GraphBreakError,
  RecompileError,
  type CompileOptions,
  type CompiledFunction,
  type CompiledModule,
  type CompileStats,
  type RecompileRecord,
  type GraphBreakRecord,
  type ReplayRecord,
  type FallbackRecord,
  type Explanation,
  type ExplainedPlace,
  type Guard,
  type GuardKind,
  type SourceLocation,
  markDynamic,
  DynamicShapeError,
  type BucketPolicy,
  type DimRange,
  type DynamicOption,
  type DynamicSpec,
} from "./compiler/index.ts";

// ---- Program cache statistics and the cache-only mode (runtime/cache_stats.ts).
export {
  cacheStats,
  resetCacheStats,
  formatCacheStats,
  setCompileMode,
  compileMode,
  CompileNeverError,
  type CacheStatistics,
  type CacheEntryStats,
  type CompileMode,
  type HitCounts,
  type KindStats,
  type ProgramKind,
} from "./runtime/cache_stats.ts";

// ---- Optimizers (optim/, also `kiln/optim`): SGD, Adam, AdamW (docs/training.md).
export * as optim from "./optim/index.ts";
