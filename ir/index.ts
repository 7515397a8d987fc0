// Kiln's IR layer (`kiln/ir`): shapes and literals, the builder, the HLO text printer and
// parser, the verifier, the reference evaluator, the protobuf form and fingerprints. The root
// entry (index.ts) re-exports all of it; this subpath is for code that uses only the IR.

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
} from "./shape.ts";
export { OPCODES, OPCODE_INFO, type Opcode } from "./opcodes.ts";
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
} from "./attributes.ts";
export {
  Literal,
  literal,
  scalarLiteral,
  filledLiteral,
  literalsIdentical,
  type LiteralData,
} from "./literal.ts";
export { Module, Computation, Instruction } from "./module.ts";
export { ModuleBuilder, ComputationBuilder } from "./builder.ts";
export { inferShape } from "./shape_inference.ts";
export { verifyModule } from "./verify.ts";
export {
  printHlo,
  printInstruction,
  printComputation,
  printLiteral,
} from "./print.ts";
export { parseHlo, parseShape } from "./parse.ts";
export {
  evaluate,
  evaluateComputation,
  evaluateReplicated,
  registerCustomCallTarget,
  type EvalValue,
} from "./evaluate.ts";
export { moduleToProto, moduleFromProto } from "./proto.ts";
export { fingerprint, canonicalText } from "./fingerprint.ts";
export { ShapeError, ParseError, VerifyError, ProtoError, EvalError } from "./errors.ts";
