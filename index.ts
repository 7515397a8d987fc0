// Kiln's public entry point: the IR layer (shapes and literals, the builder, the HLO text
// printer and parser, the verifier, the reference evaluator, the protobuf form, fingerprints)
// and the tensor frontend (Tensor, ops, nn). compile() and the runtime controls join as they
// land.

export {
  ELEMENT_TYPES,
  arrayShape,
  scalarShape,
  tupleShape,
  shapeToString,
  shapesEqual,
  type ElementType,
  type Shape,
  type ArrayShape,
  type TupleShape,
} from "./ir/shape.ts";
export { OPCODES, OPCODE_INFO, type Opcode } from "./ir/opcodes.ts";
export type {
  Attributes,
  Metadata,
  ComparisonDirection,
  DotDimensionNumbers,
  ConvDimensionNumbers,
  GatherDimensionNumbers,
  ScatterDimensionNumbers,
  WindowDim,
  PaddingDim,
  SliceDim,
} from "./ir/attributes.ts";
export {
  Literal,
  literal,
  scalarLiteral,
  filledLiteral,
  literalsIdentical,
  type LiteralData,
} from "./ir/literal.ts";
export { Module, Computation, Instruction } from "./ir/module.ts";
export { ModuleBuilder, ComputationBuilder } from "./ir/builder.ts";
export { inferShape } from "./ir/shape_inference.ts";
export { verifyModule } from "./ir/verify.ts";
export { printHlo, printInstruction, printComputation } from "./ir/print.ts";
export { parseHlo, parseShape } from "./ir/parse.ts";
export {
  evaluate,
  evaluateComputation,
  registerCustomCallTarget,
  type EvalValue,
} from "./ir/evaluate.ts";
export { moduleToProto, moduleFromProto } from "./ir/proto.ts";
export { fingerprint, canonicalText } from "./ir/fingerprint.ts";
export { ShapeError, ParseError, VerifyError, ProtoError, EvalError } from "./ir/errors.ts";

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
} from "./compiler/index.ts";

// ---- Program cache statistics and the cache-only mode (runtime/cache_stats.ts).
export {
  cacheStats,
  resetCacheStats,
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
