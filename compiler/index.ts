// The compiler's public surface: compile() and explain(), their options and stats types, the
// errors they throw, and guards as data.

export {
  compile,
  describeGuard,
  type CompiledFunction,
  type CompiledModule,
  type CompileOptions,
} from "./compile.ts";
export {
  GraphBreakError,
  RecompileError,
  type CompileStats,
  type FallbackRecord,
  type GraphBreakRecord,
  type RecompileRecord,
  type ReplayRecord,
} from "./stats.ts";
export type { Guard, GuardKind } from "./guards.ts";
export {
  type BucketPolicy,
  type DimRange,
  type DynamicOption,
  DynamicShapeError,
  type DynamicSpec,
  markDynamic,
} from "./dynamic.ts";
export type { SourceLocation } from "./source.ts";
export {
  captureProgram,
  explain,
  explainWith,
  type CapturedProgram,
  type Explanation,
  type ExplainedParameter,
  type ExplainedPlace,
} from "./explain.ts";
export type { ProgramParameter } from "./entry.ts";
