// The protobuf form of the IR: a Module to and from the bytes of XLA's own HloModuleProto (the
// subset in ir/proto/*.proto, generated into ir/proto/gen/), mapped the way XLA maps its
// HloModule: instruction and computation ids, operand_ids, called_computation_ids (a while's body
// before its condition, as XLA stores them), the HLO text opcode name, ShapeProto shapes with
// dynamic dims and layouts, LiteralProto constants, every attribute in its XLA field, metadata and
// program shapes. Reading is defensive: whatever the bytes, moduleFromProto returns a Module or
// throws a ProtoError that names the computation, instruction and field at fault.

import {
  create,
  type DescField,
  type DescMessage,
  fromBinary,
  ScalarType,
  toBinary,
} from "@bufbuild/protobuf";
import { BinaryReader, WireType } from "@bufbuild/protobuf/wire";
import type {
  ComparisonDirection,
  ComparisonType,
  ConvDimensionNumbers,
  DotDimensionNumbers as KilnDotDims,
  FusionKind,
  GatherDimensionNumbers as KilnGatherDims,
  Metadata,
  PaddingDim,
  ScatterDimensionNumbers as KilnScatterDims,
  SliceDim,
  WindowDim,
  Attributes,
} from "./attributes.ts";
import {
  COMPARISON_DIRECTIONS,
  CUSTOM_CALL_API_VERSIONS,
  type CustomCallApiVersion,
  DOT_ALGORITHMS,
  type DotAlgorithm,
  iotaReplicaGroups,
  RNG_ALGORITHMS,
  RNG_DISTRIBUTIONS,
  type RngAlgorithm,
  type RngDistribution,
} from "./attributes.ts";
import { ProtoError } from "./errors.ts";
import {
  lastTileTypeNumber,
  lastTileTypeOf,
  parseSharding,
  SHARDING_TYPE,
  type Sharding,
  shardingToString,
} from "./sharding.ts";
import {
  bf16BitsToNumber,
  dataFromBytes,
  dataToBytes,
  f16BitsToNumber,
  f32ToBF16Bits,
  f32ToF16Bits,
  Literal,
  type LiteralData,
} from "./literal.ts";
import { type Computation, type Instruction, Module } from "./module.ts";
import { OPCODE_INFO, isOpcode, type Opcode } from "./opcodes.ts";
import { computationPrintOrder, instructionPrintOrder } from "./print.ts";
import {
  type ArrayShape,
  type ElementType,
  MAX_TUPLE_DEPTH,
  type LayoutDetails,
  type Shape,
  shapeToString,
  ELEMENT_TYPES,
  isDefaultLayout,
} from "./shape.ts";
import {
  type HloComputationProto,
  HloComputationProtoSchema,
  type HloInstructionProto,
  HloInstructionProto_SliceDimensionsSchema,
  HloInstructionProtoSchema,
  type HloModuleProto,
  HloModuleProtoSchema,
} from "./proto/gen/hlo_pb.ts";
import {
  ConvolutionDimensionNumbersSchema,
  DotDimensionNumbersSchema,
  GatherDimensionNumbersSchema,
  LayoutProtoSchema,
  type LiteralProto,
  LiteralProtoSchema,
  type OpMetadata,
  OpMetadataSchema,
  PaddingConfig_PaddingConfigDimensionSchema,
  PaddingConfigSchema,
  PrimitiveType,
  type ProgramShapeProto,
  ProgramShapeProtoSchema,
  ScatterDimensionNumbersSchema,
  type ShapeProto,
  ShapeProtoSchema,
  FrontendAttributesSchema,
  ReplicaGroupSchema,
  SourceTargetSchema,
  OutputOperandAliasingSchema,
  PrecisionConfigSchema,
  RaggedDotDimensionNumbersSchema,
  TriState,
  type OpSharding,
  OpShardingSchema,
  TileProtoSchema,
  WindowDimensionSchema,
  WindowSchema,
} from "./proto/gen/xla_data_pb.ts";

// ---- Tables --------------------------------------------------------------------------------

/** XLA's PrimitiveType number of each element type. */
const PRIMITIVE_TYPE = {
  pred: PrimitiveType.PRED,
  s4: PrimitiveType.S4,
  s8: PrimitiveType.S8,
  s16: PrimitiveType.S16,
  s32: PrimitiveType.S32,
  s64: PrimitiveType.S64,
  u4: PrimitiveType.U4,
  u8: PrimitiveType.U8,
  u16: PrimitiveType.U16,
  u32: PrimitiveType.U32,
  u64: PrimitiveType.U64,
  token: PrimitiveType.TOKEN,
  f16: PrimitiveType.F16,
  bf16: PrimitiveType.BF16,
  f32: PrimitiveType.F32,
  f64: PrimitiveType.F64,
  f8e5m2: PrimitiveType.F8E5M2,
  f8e4m3: PrimitiveType.F8E4M3,
  f8e3m4: PrimitiveType.F8E3M4,
  f8e4m3fn: PrimitiveType.F8E4M3FN,
  f8e4m3fnuz: PrimitiveType.F8E4M3FNUZ,
  f8e5m2fnuz: PrimitiveType.F8E5M2FNUZ,
  f8e4m3b11fnuz: PrimitiveType.F8E4M3B11FNUZ,
} satisfies { [K in ElementType]: PrimitiveType };

const ELEMENT_TYPE_OF: ReadonlyMap<number, ElementType> = new Map(
  ELEMENT_TYPES.map((t) => [PRIMITIVE_TYPE[t], t]),
);

/**
 * What reading needs to know per opcode: whether its result must be an array (so a tuple shape
 * is rejected up front), and which attributes it always carries, so that an attribute XLA writes
 * as a proto3 default (0, false, empty list: absent on the wire) is restored as that value.
 */
interface OpRule {
  readonly result: "array" | "any";
  readonly attrs: readonly AttrKey[];
}
type AttrKey = keyof Attributes;

const arr = (...attrs: AttrKey[]): OpRule => ({ result: "array", attrs });
const anyShape = (...attrs: AttrKey[]): OpRule => ({ result: "any", attrs });

const OP_RULES = {
  parameter: anyShape("parameterNumber"),
  constant: arr("literal"),
  iota: arr("iotaDimension"),
  "replica-id": arr(),
  "partition-id": arr(),
  "after-all": arr(),
  "add-dependency": anyShape(),
  "opt-barrier": anyShape(),
  send: anyShape(),
  "send-done": arr(),
  recv: anyShape(),
  "recv-done": anyShape(),
  infeed: anyShape(),
  outfeed: arr("outfeedShape"),
  "copy-start": anyShape(),
  "copy-done": anyShape(),
  "reduce-precision": arr("exponentBits", "mantissaBits"),
  rng: arr("rngDistribution"),
  "rng-bit-generator": anyShape("rngAlgorithm"),
  "ragged-dot": arr("dot", "lhsRaggedDims", "rhsGroupDims"),
  map: arr(),
  scan: anyShape("dimensions", "numCarries"),
  "ragged-all-to-all": arr(),
  "collective-broadcast": anyShape(),
  abs: arr(),
  negate: arr(),
  sign: arr(),
  exponential: arr(),
  "exponential-minus-one": arr(),
  log: arr(),
  "log-plus-one": arr(),
  sqrt: arr(),
  rsqrt: arr(),
  cbrt: arr(),
  tanh: arr(),
  logistic: arr(),
  sine: arr(),
  cosine: arr(),
  tan: arr(),
  erf: arr(),
  floor: arr(),
  ceil: arr(),
  "round-nearest-afz": arr(),
  "round-nearest-even": arr(),
  "is-finite": arr(),
  not: arr(),
  copy: anyShape(),
  convert: arr(),
  "bitcast-convert": arr(),
  add: arr(),
  subtract: arr(),
  multiply: arr(),
  divide: arr(),
  remainder: arr(),
  power: arr(),
  maximum: arr(),
  minimum: arr(),
  atan2: arr(),
  and: arr(),
  or: arr(),
  xor: arr(),
  "shift-left": arr(),
  "shift-right-arithmetic": arr(),
  "shift-right-logical": arr(),
  compare: arr("direction"),
  select: arr(),
  clamp: arr(),
  broadcast: arr("dimensions"),
  reshape: arr(),
  bitcast: arr(),
  transpose: arr("dimensions"),
  slice: arr("slice"),
  "dynamic-slice": arr("dynamicSliceSizes"),
  "dynamic-update-slice": arr(),
  concatenate: arr("dimensions"),
  pad: arr("padding"),
  reverse: arr("dimensions"),
  dot: arr("dot"),
  convolution: arr("window", "featureGroupCount", "batchGroupCount"),
  reduce: anyShape("dimensions"),
  "reduce-window": anyShape("window"),
  gather: arr("gatherSliceSizes", "indicesAreSorted"),
  scatter: anyShape("indicesAreSorted", "uniqueIndices"),
  sort: anyShape("dimensions", "isStable"),
  tuple: anyShape(),
  "get-tuple-element": anyShape("tupleIndex"),
  fusion: anyShape("fusionKind"),
  call: anyShape(),
  while: anyShape(),
  conditional: anyShape(),
  "get-dimension-size": arr("dimensions"),
  "set-dimension-size": arr("dimensions"),
  "all-reduce": anyShape("replicaGroups"),
  "all-reduce-start": anyShape("replicaGroups"),
  "all-reduce-done": anyShape(),
  "all-gather": anyShape("replicaGroups", "dimensions"),
  "all-gather-start": anyShape("replicaGroups", "dimensions"),
  "all-gather-done": anyShape(),
  "reduce-scatter": anyShape("replicaGroups", "dimensions"),
  "all-to-all": anyShape("replicaGroups"),
  "collective-permute": anyShape("sourceTargetPairs"),
  "collective-permute-start": anyShape("sourceTargetPairs"),
  "collective-permute-done": anyShape(),
  "async-start": anyShape(),
  "async-update": anyShape(),
  "async-done": anyShape(),
  "custom-call": anyShape("customCallTarget"),
} satisfies { [K in Opcode]: OpRule };

const FUSION_KINDS: readonly FusionKind[] = ["kLoop", "kInput", "kOutput", "kCustom"];
const COMPARISON_TYPES: readonly ComparisonType[] = ["FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED"];

// ---- Writing -------------------------------------------------------------------------------

/** The module as the bytes of an XLA HloModuleProto. */
export function moduleToProto(module: Module): Uint8Array {
  return toBinary(HloModuleProtoSchema, moduleToMessage(module));
}

/**
 * The module as an HloModuleProto message (for dumps as JSON, and for tests). Computations and
 * instructions are written in the printer's order: callees before callers (entry last) and
 * operands before users, as XLA requires, so a module read back prints the same.
 */
export function moduleToMessage(module: Module): HloModuleProto {
  const entry = module.entryOrUndefined;
  if (!entry) throw new ProtoError(`module '${module.name}' has no ENTRY computation to write`);
  checkCallGraph(module);
  const order = computationPrintOrder(module);
  // Computation ids follow the instruction ids, so every id in the module is distinct (XLA
  // draws both from one counter).
  let maxId = -1;
  for (const instr of module.allInstructions()) maxId = Math.max(maxId, instr.id);
  const compIds = new Map<Computation, bigint>();
  order.forEach((c, i) => compIds.set(c, BigInt(maxId + 1 + i)));
  const fused = new Set<Computation>();
  for (const instr of module.allInstructions()) {
    if (instr.opcode === "fusion") for (const c of instr.called) fused.add(c);
  }
  return create(HloModuleProtoSchema, {
    name: module.name,
    entryComputationName: entry.name,
    entryComputationId: compIds.get(entry)!,
    computations: order.map((c) =>
      create(HloComputationProtoSchema, {
        name: c.name,
        instructions: instructionPrintOrder(c).map((i) => instructionToProto(i, compIds)),
        programShape: programShapeOf(c),
        id: compIds.get(c)!,
        rootId: BigInt(rootOf(c).id),
        isFusionComputation: fused.has(c),
      }),
    ),
    hostProgramShape: programShapeOf(entry),
  });
}

/** Every called computation is in the module, and no computation calls itself, even indirectly. */
function checkCallGraph(module: Module): void {
  const state = new Map<Computation, "visiting" | "done">();
  const visit = (c: Computation, path: string[]): void => {
    const s = state.get(c);
    if (s === "done") return;
    if (s === "visiting") {
      const cycle = [...path, c.name].join(" -> ");
      throw new ProtoError(`computations call each other in a cycle: ${cycle}`);
    }
    if (c.parent !== module) {
      throw new ProtoError(
        `computation '${c.name}' is called in module '${module.name}' but belongs to another`,
      );
    }
    state.set(c, "visiting");
    for (const callee of c.calledComputations) visit(callee, [...path, c.name]);
    state.set(c, "done");
  };
  for (const c of module.computations) visit(c, []);
}

function rootOf(c: Computation): Instruction {
  if (c.instructions.length === 0) {
    throw new ProtoError(`computation '${c.name}' is empty; it needs a ROOT to be written`);
  }
  return c.root;
}

function programShapeOf(c: Computation): ProgramShapeProto {
  const params = c.parameters;
  return create(ProgramShapeProtoSchema, {
    parameters: params.map((p) => shapeToProto(p.shape, `parameter '${p.name}'`)),
    result: shapeToProto(rootOf(c).shape, `ROOT of '${c.name}'`),
    parameterNames: params.map((p) => p.name),
  });
}

/** An int64 field from a number, or a ProtoError naming the field when it is not an integer. */
function i64(v: number, what: string): bigint {
  if (!Number.isSafeInteger(v)) throw new ProtoError(`${what} is ${v}; expected an integer`);
  return BigInt(v);
}

function i64s(vs: readonly number[], what: string): bigint[] {
  return vs.map((v, k) => i64(v, `${what}[${k}]`));
}

function i32(v: number, what: string): number {
  if (!Number.isInteger(v) || v < -0x80000000 || v > 0x7fffffff) {
    throw new ProtoError(`${what} is ${v}; expected a 32-bit integer`);
  }
  return v;
}

function shapeToProto(shape: Shape, what: string, depth = 0): ShapeProto {
  if (shape.kind === "tuple") {
    if (depth >= MAX_TUPLE_DEPTH) throw new ProtoError(tooDeep(what));
    return create(ShapeProtoSchema, {
      elementType: PrimitiveType.TUPLE,
      tupleShapes: shape.elements.map((e, k) =>
        shapeToProto(e, `${what} element ${k}`, depth + 1),
      ),
    });
  }
  const p = create(ShapeProtoSchema, {
    elementType: PRIMITIVE_TYPE[shape.type],
    dimensions: i64s(shape.dims, `${what} dimensions`),
    isDynamicDimension: shape.dims.map((_, k) => shape.dynamic[k] ?? false),
  });
  if (shape.layout) {
    const d = shape.layoutDetails;
    p.layout = create(LayoutProtoSchema, {
      minorToMajor: i64s(shape.layout, `${what} layout`),
      tiles: (d?.tiles ?? []).map((t) =>
        create(TileProtoSchema, { dimensions: i64s(t, `${what} layout tile`) }),
      ),
      elementSizeInBits: BigInt(d?.elementSizeInBits ?? 0),
      memorySpace: BigInt(d?.memorySpace ?? 0),
    });
  }
  return p;
}

function instructionToProto(
  instr: Instruction,
  compIds: Map<Computation, bigint>,
): HloInstructionProto {
  const where = `instruction '${instr.name}' in computation '${instr.parent.name}'`;
  const a = instr.attrs;
  const called = OPCODE_INFO[instr.opcode].called === "while" && instr.called.length === 2
    ? [instr.called[1]!, instr.called[0]!] // XLA stores a while's body before its condition
    : instr.called;
  const p = create(HloInstructionProtoSchema, {
    name: instr.name,
    opcode: instr.opcode,
    // XLA's loader takes an infeed's data shape from its result and requires a layout on it
    // (its text parser gives every shape without one the default layout, which this writes).
    shape: shapeToProto(
      instr.opcode === "infeed" ? withDefaultLayouts(instr.shape) : instr.shape,
      `shape of ${where}`,
    ),
    id: BigInt(instr.id),
    operandIds: instr.operands.map((o) => BigInt(o.id)),
    calledComputationIds: called.map((c) => {
      const id = compIds.get(c);
      if (id === undefined) {
        throw new ProtoError(`${where} calls computation '${c.name}', which is not in the module`);
      }
      return id;
    }),
  });
  // XLA's loader (HloInstruction::CreateFromProto) requires a constant's shape to equal its
  // literal's in layout, and a LiteralProto always has one: give a constant without a layout the
  // default (descending) layout the literal is written with. The reader drops it again.
  if (instr.opcode === "constant" && instr.shape.kind === "array" && !instr.shape.layout) {
    p.shape!.layout = create(LayoutProtoSchema, {
      minorToMajor: defaultMinorToMajor(instr.shape.dims.length),
    });
  }
  const at = (field: string) => `${field} of ${where}`;
  if (a.parameterNumber !== undefined) {
    p.parameterNumber = i64(a.parameterNumber, at("parameter_number"));
  }
  if (a.literal !== undefined) p.literal = literalToProto(a.literal);
  if (instr.opcode === "iota") {
    if (a.iotaDimension !== undefined) p.dimensions = [i64(a.iotaDimension, at("iota dimension"))];
  } else if (a.dimensions !== undefined) {
    p.dimensions = i64s(a.dimensions, at("dimensions"));
  }
  if (a.direction !== undefined) p.comparisonDirection = a.direction;
  if (a.comparisonType !== undefined) p.comparisonType = a.comparisonType;
  if (a.slice !== undefined) {
    p.sliceDimensions = a.slice.map((s, k) =>
      create(HloInstructionProto_SliceDimensionsSchema, {
        start: i64(s.start, at(`slice[${k}].start`)),
        limit: i64(s.limit, at(`slice[${k}].limit`)),
        stride: i64(s.stride, at(`slice[${k}].stride`)),
      }),
    );
  }
  if (a.dynamicSliceSizes !== undefined) {
    p.dynamicSliceSizes = i64s(a.dynamicSliceSizes, at("dynamic_slice_sizes"));
  }
  if (a.padding !== undefined) {
    p.paddingConfig = create(PaddingConfigSchema, {
      dimensions: a.padding.map((d, k) =>
        create(PaddingConfig_PaddingConfigDimensionSchema, {
          edgePaddingLow: i64(d.low, at(`padding[${k}].low`)),
          edgePaddingHigh: i64(d.high, at(`padding[${k}].high`)),
          interiorPadding: i64(d.interior, at(`padding[${k}].interior`)),
        }),
      ),
    });
  }
  if (a.dot !== undefined && instr.opcode === "ragged-dot") {
    p.raggedDotDimensionNumbers = create(RaggedDotDimensionNumbersSchema, {
      dotDimensionNumbers: create(DotDimensionNumbersSchema, {
        lhsContractingDimensions: i64s(a.dot.lhsContracting, at("lhs_contracting_dims")),
        rhsContractingDimensions: i64s(a.dot.rhsContracting, at("rhs_contracting_dims")),
        lhsBatchDimensions: i64s(a.dot.lhsBatch, at("lhs_batch_dims")),
        rhsBatchDimensions: i64s(a.dot.rhsBatch, at("rhs_batch_dims")),
      }),
      lhsRaggedDimensions: i64s(a.lhsRaggedDims ?? [], at("lhs_ragged_dims")),
      rhsGroupDimensions: i64s(a.rhsGroupDims ?? [], at("rhs_group_dims")),
    });
  } else if (a.dot !== undefined) {
    p.dotDimensionNumbers = create(DotDimensionNumbersSchema, {
      lhsContractingDimensions: i64s(a.dot.lhsContracting, at("lhs_contracting_dims")),
      rhsContractingDimensions: i64s(a.dot.rhsContracting, at("rhs_contracting_dims")),
      lhsBatchDimensions: i64s(a.dot.lhsBatch, at("lhs_batch_dims")),
      rhsBatchDimensions: i64s(a.dot.rhsBatch, at("rhs_batch_dims")),
    });
  }
  if (a.window !== undefined) {
    p.window = create(WindowSchema, {
      dimensions: a.window.map((w, k) =>
        create(WindowDimensionSchema, {
          size: i64(w.size, at(`window[${k}].size`)),
          stride: i64(w.stride, at(`window[${k}].stride`)),
          paddingLow: i64(w.padLow, at(`window[${k}].padLow`)),
          paddingHigh: i64(w.padHigh, at(`window[${k}].padHigh`)),
          windowDilation: i64(w.windowDilation, at(`window[${k}].windowDilation`)),
          baseDilation: i64(w.baseDilation, at(`window[${k}].baseDilation`)),
          windowReversal: w.windowReversal,
        }),
      ),
    });
  }
  if (a.convDims !== undefined) {
    const d = a.convDims;
    const f = at("convolution_dimension_numbers");
    p.convolutionDimensionNumbers = create(ConvolutionDimensionNumbersSchema, {
      inputBatchDimension: i64(d.inputBatch, f),
      inputFeatureDimension: i64(d.inputFeature, f),
      inputSpatialDimensions: i64s(d.inputSpatial, f),
      kernelInputFeatureDimension: i64(d.kernelInputFeature, f),
      kernelOutputFeatureDimension: i64(d.kernelOutputFeature, f),
      kernelSpatialDimensions: i64s(d.kernelSpatial, f),
      outputBatchDimension: i64(d.outputBatch, f),
      outputFeatureDimension: i64(d.outputFeature, f),
      outputSpatialDimensions: i64s(d.outputSpatial, f),
    });
  }
  if (a.featureGroupCount !== undefined) {
    p.featureGroupCount = i64(a.featureGroupCount, at("feature_group_count"));
  }
  if (a.batchGroupCount !== undefined) {
    p.batchGroupCount = i64(a.batchGroupCount, at("batch_group_count"));
  }
  if (a.gather !== undefined) {
    const g = a.gather;
    const f = at("gather_dimension_numbers");
    p.gatherDimensionNumbers = create(GatherDimensionNumbersSchema, {
      offsetDims: i64s(g.offsetDims, f),
      collapsedSliceDims: i64s(g.collapsedSliceDims, f),
      startIndexMap: i64s(g.startIndexMap, f),
      indexVectorDim: i64(g.indexVectorDim, f),
      operandBatchingDims: i64s(g.operandBatchingDims, f),
      startIndicesBatchingDims: i64s(g.startIndicesBatchingDims, f),
    });
  }
  if (a.gatherSliceSizes !== undefined) {
    p.gatherSliceSizes = i64s(a.gatherSliceSizes, at("gather_slice_sizes"));
  }
  if (a.scatter !== undefined) {
    const s = a.scatter;
    const f = at("scatter_dimension_numbers");
    p.scatterDimensionNumbers = create(ScatterDimensionNumbersSchema, {
      updateWindowDims: i64s(s.updateWindowDims, f),
      insertedWindowDims: i64s(s.insertedWindowDims, f),
      scatterDimsToOperandDims: i64s(s.scatterDimsToOperandDims, f),
      indexVectorDim: i64(s.indexVectorDim, f),
      inputBatchingDims: i64s(s.inputBatchingDims, f),
      scatterIndicesBatchingDims: i64s(s.scatterIndicesBatchingDims, f),
    });
  }
  if (a.indicesAreSorted !== undefined) p.indicesAreSorted = a.indicesAreSorted;
  if (a.uniqueIndices !== undefined) p.uniqueIndices = a.uniqueIndices;
  if (a.isStable !== undefined) p.isStable = a.isStable;
  if (a.tupleIndex !== undefined) p.tupleIndex = i64(a.tupleIndex, at("tuple_index"));
  if (a.fusionKind !== undefined) p.fusionKind = a.fusionKind;
  if (a.customCallTarget !== undefined) p.customCallTarget = a.customCallTarget;
  if (a.customCallHasSideEffect !== undefined) {
    p.customCallHasSideEffect = a.customCallHasSideEffect;
  }
  if (instr.opcode === "custom-call") {
    // XLA's default, which XLA also writes: API_VERSION_ORIGINAL.
    p.customCallApiVersion = CUSTOM_CALL_API_VERSIONS[a.apiVersion ?? "API_VERSION_ORIGINAL"];
  }
  if (a.operandLayoutConstraints !== undefined) {
    // XLA's loader requires layouts on a layout-constrained custom-call's shapes (its text
    // parser gives every shape written without one the default layout, which this writes).
    p.constrainLayout = true;
    p.operandShapesWithLayout = a.operandLayoutConstraints.map((s, k) =>
      shapeToProto(withDefaultLayouts(s), at(`operand_layout_constraints[${k}]`)),
    );
    p.shape = shapeToProto(withDefaultLayouts(instr.shape), `shape of ${where}`);
  }
  if (a.outputToOperandAliasing !== undefined) {
    p.outputOperandAliasing = a.outputToOperandAliasing.map((x, k) =>
      create(OutputOperandAliasingSchema, {
        outputShapeIndex: i64s(x.output, at(`output_to_operand_aliasing[${k}]`)),
        operandIndex: i64(x.operand, at(`output_to_operand_aliasing[${k}]`)),
        operandShapeIndex: i64s(x.operandIndex, at(`output_to_operand_aliasing[${k}]`)),
      }),
    );
  }
  if (a.dotAlgorithm !== undefined) {
    p.precisionConfig = create(PrecisionConfigSchema, {
      algorithm: DOT_ALGORITHMS[a.dotAlgorithm],
    });
  }
  if (a.isComposite !== undefined) p.isComposite = a.isComposite;
  if (a.controlPredecessors !== undefined) {
    p.controlPredecessorIds = a.controlPredecessors.map((s) => {
      const x = instr.parent.instructions.find((i) => i.name === s);
      if (x === undefined) {
        throw new ProtoError(`${where}: control predecessor '${s}' is not in the computation`);
      }
      return BigInt(x.id);
    });
  }
  if (a.asyncExecutionThread !== undefined) p.asyncExecutionThread = a.asyncExecutionThread;
  if (a.channelId !== undefined) p.channelId = i64(a.channelId, at("channel_id"));
  if (a.replicaGroups !== undefined) {
    p.replicaGroups = a.replicaGroups.map((g, k) =>
      create(ReplicaGroupSchema, { replicaIds: i64s(g, at(`replica_groups[${k}]`)) }),
    );
  }
  if (a.useGlobalDeviceIds !== undefined) p.useGlobalDeviceIds = a.useGlobalDeviceIds;
  if (a.constrainLayout !== undefined) p.constrainLayout = a.constrainLayout;
  if (a.sourceTargetPairs !== undefined) {
    p.sourceTargetPairs = a.sourceTargetPairs.map(([x, y], k) =>
      create(SourceTargetSchema, {
        source: i64(x, at(`source_target_pairs[${k}]`)),
        target: i64(y, at(`source_target_pairs[${k}]`)),
      }),
    );
  }
  if (a.isReverse !== undefined) p.isReverse = a.isReverse;
  if (a.numCarries !== undefined) p.numCarries = i64(a.numCarries, at("num_carries"));
  if (a.isAssociative !== undefined) {
    p.isAssociative = a.isAssociative ? TriState.TRUE : TriState.FALSE;
  }
  if (a.isHostTransfer !== undefined) p.isHostTransfer = a.isHostTransfer;
  if (a.infeedConfig !== undefined) p.infeedConfig = new TextEncoder().encode(a.infeedConfig);
  if (a.outfeedConfig !== undefined) p.outfeedConfig = new TextEncoder().encode(a.outfeedConfig);
  if (a.outfeedShape !== undefined) {
    p.outfeedShape = shapeToProto(withDefaultLayouts(a.outfeedShape), at("outfeed_shape"));
  }
  if (a.exponentBits !== undefined) p.exponentBits = i32(a.exponentBits, at("exponent_bits"));
  if (a.mantissaBits !== undefined) p.mantissaBits = i32(a.mantissaBits, at("mantissa_bits"));
  if (a.rngDistribution !== undefined) p.distribution = RNG_DISTRIBUTIONS[a.rngDistribution];
  if (a.rngAlgorithm !== undefined) p.rngAlgorithm = RNG_ALGORITHMS[a.rngAlgorithm];
  if (a.crossProgramPrefetchIndex !== undefined) {
    p.optionalCrossProgramPrefetchIndex = {
      case: "crossProgramPrefetchIndex",
      value: i32(a.crossProgramPrefetchIndex, at("cross_program_prefetch_index")),
    };
  }
  if (a.backendConfig !== undefined) p.backendConfig = new TextEncoder().encode(a.backendConfig);
  if (a.sharding !== undefined) {
    const s = parseSharding(a.sharding);
    if (!s) {
      throw new ProtoError(
        `${at("sharding")}: the sharding ${a.sharding} has no proto form here (Kiln writes ` +
          "replicated, manual, unknown, maximal, tiled and iota shardings and tuples of them)",
      );
    }
    p.sharding = shardingToProto(s);
  }
  if (a.frontendAttributes !== undefined) {
    p.frontendAttributes = create(FrontendAttributesSchema, {
      map: Object.fromEntries(a.frontendAttributes),
    });
  }
  const m = metadataToProto(instr.metadata, at("metadata"));
  if (m) p.metadata = m;
  return p;
}

function metadataToProto(m: Metadata, what: string): OpMetadata | undefined {
  const p = create(OpMetadataSchema, {});
  if (m.opType !== undefined) p.opType = m.opType;
  if (m.opName !== undefined) p.opName = m.opName;
  if (m.sourceFile !== undefined) p.sourceFile = m.sourceFile;
  if (m.sourceLine !== undefined) p.sourceLine = i32(m.sourceLine, `source_line of ${what}`);
  if (m.sourceColumn !== undefined) {
    p.sourceColumn = i32(m.sourceColumn, `source_column of ${what}`);
  }
  return Object.keys(metadataFromProto(p) ?? {}).length > 0 ? p : undefined;
}

/** XLA's default layout of a rank-`rank` array: minor_to_major {rank-1, ..., 0}. */
/** `s` with XLA's default (descending) layout on every array that has none. */
function withDefaultLayouts(s: Shape): Shape {
  if (s.kind === "tuple") return { ...s, elements: s.elements.map(withDefaultLayouts) };
  if (s.layout !== undefined || s.type === "token") return s;
  return { ...s, layout: s.dims.map((_, k) => s.dims.length - 1 - k) };
}

function defaultMinorToMajor(rank: number): bigint[] {
  return Array.from({ length: rank }, (_, k) => BigInt(rank - 1 - k));
}

/**
 * A literal with XLA's default (row-major, descending) layout, which XLA requires of every
 * LiteralProto and which matches the row-major order Literal keeps its data in.
 */
function literalToProto(lit: Literal): LiteralProto {
  const rank = lit.dims.length;
  const p = create(LiteralProtoSchema, {
    shape: create(ShapeProtoSchema, {
      elementType: PRIMITIVE_TYPE[lit.type],
      dimensions: lit.dims.map((d) => BigInt(d)),
      isDynamicDimension: lit.dims.map(() => false),
      layout: create(LayoutProtoSchema, { minorToMajor: defaultMinorToMajor(rank) }),
    }),
  });
  const data = lit.data;
  switch (lit.type) {
    case "pred":
      p.preds = Array.from(data as Uint8Array, (v) => v !== 0);
      break;
    case "u8":
      p.u8s = new Uint8Array(data as Uint8Array);
      break;
    case "u4":
      p.u4s = new Uint8Array(data as Uint8Array);
      break;
    case "s8":
      p.s8s = new Uint8Array(data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength));
      break;
    case "s4":
      p.s4s = new Uint8Array(data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength));
      break;
    case "s16":
      p.s16s = dataToBytes("s16", data);
      break;
    case "u16":
      p.u16s = dataToBytes("u16", data);
      break;
    case "s32":
      p.s32s = Array.from(data as Int32Array);
      break;
    case "u32":
      p.u32s = Array.from(data as Uint32Array);
      break;
    case "s64":
      p.s64s = Array.from(data as BigInt64Array);
      break;
    case "u64":
      p.u64s = Array.from(data as BigUint64Array);
      break;
    case "f32":
      refuseNonCanonicalNaN(lit);
      p.f32s = Array.from(data as Float32Array);
      break;
    case "f16":
    case "bf16": {
      const toBits = lit.type === "f16" ? f32ToF16Bits : f32ToBF16Bits;
      const bytes = new Uint8Array(data.length * 2);
      const view = new DataView(bytes.buffer);
      (data as Float32Array).forEach((v, k) => view.setUint16(2 * k, toBits(v), true));
      if (lit.type === "f16") p.f16s = bytes;
      else p.bf16s = bytes;
      break;
    }
    case "f64":
      refuseNonCanonicalNaN(lit);
      p.f64s = Array.from(data as Float64Array);
      break;
    case "f8e5m2":
    case "f8e4m3":
    case "f8e3m4":
    case "f8e4m3fn":
    case "f8e4m3fnuz":
    case "f8e5m2fnuz":
    case "f8e4m3b11fnuz":
      p[`${lit.type}s`] = dataToBytes(lit.type, data);
      break;
    case "token":
      throw new ProtoError("a token has no literal");
    default: {
      const never: never = lit.type;
      throw new ProtoError(`literal of unknown element type ${String(never)}`);
    }
  }
  return p;
}

/**
 * The proto's f32s/f64s go through JavaScript arrays of numbers, and V8 canonicalizes a NaN
 * stored in one: a NaN's sign and payload (XLA's `-nan`, `nan(0x7f)`) would be written as the
 * plain quiet NaN, a different value. Refused instead, naming the element; the plain NaN is
 * written exactly.
 */
function refuseNonCanonicalNaN(lit: Literal): void {
  const data = lit.data;
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  for (let i = 0; i < data.length; i++) {
    if (!Number.isNaN(data[i] as number)) continue;
    const canonical =
      lit.type === "f64"
        ? view.getBigUint64(i * 8, true) === 0x7ff8000000000000n
        : view.getUint32(i * 4, true) === 0x7fc00000;
    if (!canonical) {
      throw new ProtoError(
        `a ${lit.type} constant holds a NaN with a sign or payload (element ${i}), which the ` +
          "proto form here cannot write exactly",
      );
    }
  }
}

// ---- Reading -------------------------------------------------------------------------------

/**
 * A module from the bytes of an XLA HloModuleProto. Bad bytes of any kind (truncated, garbage,
 * an unknown opcode, a dangling id, a literal of the wrong size, ...) throw a ProtoError.
 */
export function moduleFromProto(bytes: Uint8Array): Module {
  if (!(bytes instanceof Uint8Array)) {
    throw new ProtoError(`expected the bytes of an HloModuleProto (a Uint8Array)`);
  }
  let msg: HloModuleProto;
  try {
    msg = fromBinary(HloModuleProtoSchema, bytes, { recursionLimit: PROTO_RECURSION_LIMIT });
  } catch (e) {
    // The decoder's errors say what (`premature EOF`) but not where: find where by walking the
    // wire format again. Only on this error path, so valid bytes are read once.
    const where = locateWireError(bytes);
    const detail = where ?? errText(e);
    throw new ProtoError(`cannot decode HloModuleProto (${bytes.length} bytes): ${detail}`);
  }
  return moduleFromMessage(msg);
}

/**
 * The decoder's nesting limit. The deepest message a valid module holds is the LayoutProto of
 * the innermost array in a tuple shape nested MAX_TUPLE_DEPTH deep inside an instruction:
 * HloModuleProto > HloComputationProto > HloInstructionProto > ShapeProto (depth 4) > ... >
 * ShapeProto (4 + MAX_TUPLE_DEPTH) > LayoutProto. So what the parser and the builder accept
 * can always be read back, and nothing deeper can exhaust the stack.
 */
export const PROTO_RECURSION_LIMIT = MAX_TUPLE_DEPTH + 5;

/**
 * Walks `bytes` as the decoder reads them (a known field by its type, whatever its wire type;
 * an unknown one skipped by its wire type) and describes the first problem: the byte offset, the
 * message being decoded and the field path to it. Undefined when the walk finds nothing wrong
 * (the decoder failed on something the walk does not check).
 */
export function locateWireError(bytes: Uint8Array): string | undefined {
  const reader = new BinaryReader(bytes);
  type Walk = (desc: DescMessage, end: number, depth: number, path: string[]) => string | undefined;
  const walk: Walk = (desc, end, depth, path) => {
    const name = desc.typeName.replace(/^xla\./, "");
    const at = (pos: number, what: string) =>
      `at byte ${pos}, in ${name}${path.length === 0 ? "" : ` (${pathText(path)})`}: ${what}`;
    if (depth > PROTO_RECURSION_LIMIT) {
      return at(
        reader.pos,
        `messages nest deeper than ${PROTO_RECURSION_LIMIT} (tuple shapes may nest at most ` +
          `${MAX_TUPLE_DEPTH} deep)`,
      );
    }
    const counts = new Map<number, number>();
    while (reader.pos < end) {
      const start = reader.pos;
      let no: number;
      let wt: WireType;
      try {
        [no, wt] = reader.tag();
      } catch (e) {
        return at(start, errText(e));
      }
      const field = desc.fields.find((f) => f.number === no);
      const k = counts.get(no) ?? 0;
      counts.set(no, k + 1);
      const label = field ? `field ${field.name}` : `field #${no}`;
      /** A length prefix, checked against the end of the enclosing message. */
      const span = (): number => {
        const len = reader.uint32();
        if (reader.pos + len > end) {
          throw new RangeError(
            `is ${len} bytes long but only ${end - reader.pos} remain (premature EOF)`,
          );
        }
        return reader.pos + len;
      };
      try {
        const kind = field === undefined ? undefined : readKind(field, wt);
        if (kind === undefined) {
          reader.skip(wt, no);
        } else if (kind.kind === "message") {
          const stop = span();
          const step = field!.fieldKind === "list" ? `${field!.name}[${k}]` : field!.name;
          const problem = walk(kind.desc, stop, depth + 1, [...path, step]);
          if (problem !== undefined) return problem;
          reader.pos = stop;
        } else if (kind.kind === "packed") {
          const stop = span();
          while (reader.pos < stop) readScalar(reader, bytes, kind.scalar);
          if (reader.pos !== stop) {
            return at(start, `${label} (packed): its last value runs past the field's end`);
          }
        } else {
          readScalar(reader, bytes, kind.scalar, span);
        }
      } catch (e) {
        const text = errText(e);
        return at(start, `${label}${text.startsWith("is ") ? " " : ": "}${text}`);
      }
      if (reader.pos > end) {
        return at(start, `${label} runs past the end of the message (premature EOF)`);
      }
    }
    return undefined;
  };
  return walk(HloModuleProtoSchema, bytes.length, 1, []);
}

/** `a.b[0].c`, with a run of one repeated step written once with its count. */
function pathText(path: readonly string[]): string {
  const out: string[] = [];
  for (let k = 0; k < path.length; ) {
    let n = 1;
    while (path[k + n] === path[k]) n++;
    out.push(n > 2 ? `${path[k]} (x${n})` : path.slice(k, k + n).join("."));
    k += n;
  }
  return out.join(".");
}

type ReadKind =
  | { kind: "message"; desc: DescMessage }
  | { kind: "packed"; scalar: ScalarType }
  | { kind: "scalar"; scalar: ScalarType };

/** How the decoder reads a known field arriving with wire type `wt` (it ignores the wire type). */
function readKind(field: DescField, wt: WireType): ReadKind | undefined {
  switch (field.fieldKind) {
    case "message":
      return { kind: "message", desc: field.message };
    case "scalar":
      return { kind: "scalar", scalar: field.scalar };
    case "enum":
      return { kind: "scalar", scalar: ScalarType.INT32 };
    case "list": {
      if (field.listKind === "message") return { kind: "message", desc: field.message };
      const scalar = field.listKind === "enum" ? ScalarType.INT32 : field.scalar;
      const packable = scalar !== ScalarType.STRING && scalar !== ScalarType.BYTES;
      return wt === WireType.LengthDelimited && packable
        ? { kind: "packed", scalar }
        : { kind: "scalar", scalar };
    }
    case "map":
      return undefined; // no map fields in the HLO subset; skipped by wire type
  }
}

/** Reads one value as the decoder does; strings must be UTF-8 (the decoder checks too). */
function readScalar(
  reader: BinaryReader,
  bytes: Uint8Array,
  t: ScalarType,
  span?: () => number,
): void {
  switch (t) {
    case ScalarType.DOUBLE:
    case ScalarType.FIXED64:
    case ScalarType.SFIXED64:
      reader.skip(WireType.Bit64, 0);
      return;
    case ScalarType.FLOAT:
    case ScalarType.FIXED32:
    case ScalarType.SFIXED32:
      reader.skip(WireType.Bit32, 0);
      return;
    case ScalarType.STRING:
    case ScalarType.BYTES: {
      const from = reader.pos;
      const stop = span ? span() : reader.uint32() + reader.pos;
      if (stop > bytes.length) throw new RangeError("premature EOF");
      const body = bytes.subarray(reader.pos, stop);
      reader.pos = stop;
      if (t === ScalarType.STRING) {
        try {
          utf8.decode(body);
        } catch {
          reader.pos = from;
          throw new Error("is not valid UTF-8");
        }
      }
      return;
    }
    case ScalarType.INT64:
    case ScalarType.UINT64:
    case ScalarType.SINT64:
      reader.uint64(); // the decoder's 64-bit varint read: at most 10 bytes
      return;
    case ScalarType.BOOL:
      reader.bool();
      return;
    default:
      reader.uint32();
  }
}

/** A module from an HloModuleProto message; see moduleFromProto. */
export function moduleFromMessage(msg: HloModuleProto): Module {
  checkUnknownFields(msg, `module '${msg.name}'`);
  try {
    return new Reader(msg).read();
  } catch (e) {
    if (e instanceof ProtoError) throw e;
    // A check above missed a case: still report it as bad input, with what went wrong.
    throw new ProtoError(`module '${msg.name}': ${errText(e)}`);
  }
}

/**
 * Fields of XLA's schema Kiln's does not have, which the reader skips: the ones that do not
 * change what a program computes and that the text parser skips too (a module's schedule,
 * buffer aliasing and donors, frontend attributes and recovery table; an instruction's
 * statistics, parameter replication, original value and result accuracy; a computation's
 * execution thread; OpMetadata fields Metadata does not keep), by message and field number.
 * Any other field Kiln does not know is a ProtoError naming it, never dropped silently; so is
 * one of these listed only when empty (`emptyOnly`), or a layout's tail padding other than 1.
 */
const SKIPPED_FIELDS: ReadonlyMap<string, ReadonlyMap<number, string>> = new Map([
  [
    "xla.HloModuleProto",
    new Map([
      [7, "schedule"],
      [8, "input_output_alias"],
      [18, "buffer_donor"],
      [19, "frontend_attributes"],
      [20, "original_value_recovery_table"],
    ]),
  ],
  [
    "xla.HloInstructionProto",
    new Map([
      [61, "parameter_replication"],
      [82, "statistics_viz"],
      [88, "original_value"],
      [91, "result_accuracy"],
    ]),
  ],
  ["xla.HloComputationProto", new Map([[8, "execution_thread"]])],
  [
    "xla.OpMetadata",
    new Map([
      [5, "profile_type"],
      [12, "deduplicated_name"],
      [13, "preserve_layout"],
      [15, "stack_frame_id"],
      [16, "scheduling_name"],
      [17, "source_end_line"],
      [19, "source_end_column"],
    ]),
  ],
]);

/** Known to XLA, unknown to Kiln, and fine only when empty or at XLA's default. */
const EMPTY_ONLY: ReadonlyMap<string, ReadonlyMap<number, string>> = new Map([
  ["xla.HloInstructionProto", new Map([[98, "sparsity_config"]])],
  ["xla.LayoutProto", new Map([[16, "tail_padding_alignment_in_elements"]])],
]);

function checkUnknownFields(root: object, where: string): void {
  const visit = (m: unknown, path: string): void => {
    if (m === null || typeof m !== "object" || m instanceof Uint8Array) return;
    if (Array.isArray(m)) {
      m.forEach((x, k) => visit(x, `${path}[${k}]`));
      return;
    }
    const msg = m as {
      $typeName?: string;
      $unknown?: { no: number; wireType: WireType; data: Uint8Array }[];
    };
    for (const u of msg.$unknown ?? []) {
      const type = msg.$typeName ?? "?";
      if (SKIPPED_FIELDS.get(type)?.has(u.no)) continue;
      const name = EMPTY_ONLY.get(type)?.get(u.no);
      if (name !== undefined && isDefaultPayload(u.wireType, u.data, name)) continue;
      const what = name ?? `field ${u.no}`;
      throw new ProtoError(
        `${where}: ${path}: ${type} ${what} is not read by Kiln (it would be dropped); ` +
          "refusing the module",
      );
    }
    for (const [k, v] of Object.entries(m)) {
      if (!k.startsWith("$")) visit(v, path ? `${path}.${k}` : k);
    }
  };
  visit(root, "");
}

/** An unknown field's payload that means nothing: empty, or a tail padding of 1. */
function isDefaultPayload(wt: WireType, data: Uint8Array, name: string): boolean {
  const r = new BinaryReader(data);
  if (wt === WireType.LengthDelimited) return r.bytes().length === 0;
  if (wt === WireType.Varint) {
    const v = r.int64();
    return name === "tail_padding_alignment_in_elements" ? v === 1n : v === 0n;
  }
  return false;
}

function tooDeep(what: string): string {
  return `${what}: tuple shapes nest deeper than ${MAX_TUPLE_DEPTH} (the limit on tuple nesting)`;
}

function errText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

interface CompEntry {
  readonly proto: HloComputationProto;
  readonly comp: Computation;
}

class Reader {
  private readonly module: Module;
  private readonly comps = new Map<bigint, CompEntry>();
  /** Which computation holds each instruction id (for "refers to another computation"). */
  private readonly owner = new Map<bigint, HloComputationProto>();

  constructor(private readonly msg: HloModuleProto) {
    this.module = new Module(msg.name);
  }

  read(): Module {
    const msg = this.msg;
    if (msg.computations.length === 0) {
      throw new ProtoError(`module '${msg.name}' has no computations (missing entry)`);
    }
    const names = new Set<string>();
    for (const [k, cp] of msg.computations.entries()) {
      if (cp.name === "") throw new ProtoError(`computation #${k} (id ${cp.id}) has no name`);
      if (names.has(cp.name)) throw new ProtoError(`two computations are named '${cp.name}'`);
      if (this.comps.has(cp.id)) {
        throw new ProtoError(
          `computations '${this.comps.get(cp.id)!.comp.name}' and '${cp.name}' share id ${cp.id}`,
        );
      }
      names.add(cp.name);
      this.comps.set(cp.id, { proto: cp, comp: this.module.addComputation(cp.name) });
    }
    const instrNames = new Set<string>();
    for (const cp of msg.computations) {
      for (const ip of cp.instructions) {
        const other = this.owner.get(ip.id);
        if (other) {
          throw new ProtoError(
            `instruction id ${ip.id} is used twice ('${ip.name}' in '${cp.name}' and ` +
              `again in '${other.name}')`,
          );
        }
        this.owner.set(ip.id, cp);
        if (ip.name === "") {
          throw new ProtoError(`instruction id ${ip.id} in computation '${cp.name}' has no name`);
        }
        if (instrNames.has(ip.name)) {
          throw new ProtoError(`two instructions are named '${ip.name}'`);
        }
        instrNames.add(ip.name);
      }
    }
    const entry = this.findEntry();
    for (const { proto, comp } of this.comps.values()) this.readComputation(proto, comp);
    checkCallGraph(this.module);
    this.module.entry = entry;
    return this.module;
  }

  private findEntry(): Computation {
    const { entryComputationId: id, entryComputationName: name } = this.msg;
    const byId = this.comps.get(id);
    if (byId && (name === "" || byId.comp.name === name)) return byId.comp;
    if (byId) {
      throw new ProtoError(
        `entry_computation_id ${id} is computation '${byId.comp.name}' but ` +
          `entry_computation_name is '${name}'`,
      );
    }
    const byName = name !== "" ? this.module.computations.find((c) => c.name === name) : undefined;
    if (byName) return byName;
    throw new ProtoError(
      `missing entry: no computation has entry_computation_id ${id}` +
        (name !== "" ? ` or entry_computation_name '${name}'` : ""),
    );
  }

  private readComputation(cp: HloComputationProto, comp: Computation): void {
    if (cp.instructions.length === 0) {
      throw new ProtoError(`computation '${cp.name}' has no instructions (it needs a ROOT)`);
    }
    const local = new Map<bigint, Instruction>();
    for (const ip of cp.instructions) {
      const instr = this.readInstruction(ip, cp, comp, local);
      local.set(ip.id, instr);
    }
    const root = local.get(cp.rootId);
    if (!root) {
      const other = this.owner.get(cp.rootId);
      throw new ProtoError(
        `computation '${cp.name}': root_id ${cp.rootId} ` +
          (other ? `is an instruction of computation '${other.name}'` : `is not an instruction id`),
      );
    }
    comp.root = root;
  }

  private readInstruction(
    ip: HloInstructionProto,
    cp: HloComputationProto,
    comp: Computation,
    local: Map<bigint, Instruction>,
  ): Instruction {
    const where = `instruction '${ip.name}' (id ${ip.id}) in computation '${cp.name}'`;
    if (!isOpcode(ip.opcode)) {
      throw new ProtoError(`${where}: unknown opcode ${JSON.stringify(ip.opcode)}`);
    }
    const opcode: Opcode = ip.opcode;
    const info = OPCODE_INFO[opcode];
    const rule: OpRule = OP_RULES[opcode];
    if (!ip.shape) throw new ProtoError(`${where}: missing shape`);
    let shape = shapeFromProto(ip.shape, `${where}: shape`);
    if (
      opcode === "constant" &&
      shape.kind === "array" &&
      shape.layout &&
      !shape.layoutDetails &&
      isDefaultLayout(shape.layout)
    ) {
      // The writer gives every constant XLA's default layout (see instructionToProto); on a
      // constant it says nothing the literal does not, so it reads back as no layout.
      const { layout: _default, ...rest } = shape;
      shape = rest;
    }
    if (rule.result === "array" && shape.kind === "tuple") {
      throw new ProtoError(
        `${where}: ${opcode} needs an array shape, got the tuple shape ${shapeToString(shape)}`,
      );
    }
    const operands = ip.operandIds.map((id, k) => {
      const op = local.get(id);
      if (op) return op;
      const other = this.owner.get(id);
      if (other === cp) {
        throw new ProtoError(`${where}: operand ${k} (id ${id}) is defined after its user`);
      }
      if (other) {
        throw new ProtoError(
          `${where}: operand ${k} (id ${id}) refers to an instruction of computation ` +
            `'${other.name}'`,
        );
      }
      throw new ProtoError(`${where}: operand ${k} refers to id ${id}, which does not exist`);
    });
    if (info.arity !== "variadic" && operands.length !== info.arity) {
      throw new ProtoError(
        `${where}: ${opcode} takes ${info.arity} operand(s), got ${operands.length}`,
      );
    }
    const called = this.readCalled(ip, opcode, where);
    const attrs = readAttributes(ip, opcode, rule, shape, where);
    if (ip.controlPredecessorIds.length > 0) {
      attrs.controlPredecessors = ip.controlPredecessorIds.map((id, k) => {
        const x = local.get(id);
        if (x === undefined) {
          throw new ProtoError(
            `${where}: control_predecessor_ids[${k}] (id ${id}) is not an earlier instruction ` +
              "of the computation",
          );
        }
        return x.name;
      });
    }
    const metadata = ip.metadata ? metadataFromProto(ip.metadata) : undefined;
    return comp.addInstruction({
      opcode,
      shape,
      operands,
      attrs,
      called,
      ...(metadata ? { metadata } : {}),
      name: ip.name,
    });
  }

  private readCalled(ip: HloInstructionProto, opcode: Opcode, where: string): Computation[] {
    const called = ip.calledComputationIds.map((id, k) => {
      const c = this.comps.get(id);
      if (!c) {
        throw new ProtoError(
          `${where}: called_computation_ids[${k}] is ${id}, which is not a computation id`,
        );
      }
      return c.comp;
    });
    const role = OPCODE_INFO[opcode].called;
    const n = called.length;
    switch (role) {
      case "none":
        if (n !== 0) throw new ProtoError(`${where}: ${opcode} calls no computation, got ${n}`);
        return called;
      case "to_apply":
      case "calls":
        if (n !== 1) {
          throw new ProtoError(`${where}: ${opcode} calls exactly one computation, got ${n}`);
        }
        return called;
      case "async":
        if (n > 1) {
          throw new ProtoError(`${where}: ${opcode} calls at most one computation, got ${n}`);
        }
        return called;
      case "while":
        if (n !== 2) {
          throw new ProtoError(`${where}: while calls a body and a condition, got ${n}`);
        }
        return [called[1]!, called[0]!]; // XLA: [body, condition]; Kiln: [condition, body]
      case "branches":
        if (n === 0) throw new ProtoError(`${where}: conditional needs at least one branch`);
        return called;
      case "list":
        return called;
      default: {
        const never: never = role;
        throw new ProtoError(`${where}: unknown called role ${String(never)}`);
      }
    }
  }
}

/** An int64 field as a number; a ProtoError naming the field when it is out of range. */
function num(v: bigint, what: string, min = Number.MIN_SAFE_INTEGER): number {
  if (v < BigInt(min) || v > BigInt(Number.MAX_SAFE_INTEGER)) {
    throw new ProtoError(`${what} is ${v}, out of range${min === 0 ? " (must be >= 0)" : ""}`);
  }
  return Number(v);
}

function nums(vs: readonly bigint[], what: string): number[] {
  return vs.map((v, k) => num(v, `${what}[${k}]`));
}

function primitiveName(t: number): string {
  const name = (PrimitiveType as unknown as Record<number, string | undefined>)[t];
  return name !== undefined ? name : `#${t}`;
}

function shapeFromProto(p: ShapeProto, what: string, depth = 0): Shape {
  if (p.elementType === PrimitiveType.TUPLE) {
    if (p.dimensions.length > 0) {
      throw new ProtoError(`${what}: a tuple shape cannot have dimensions`);
    }
    if (depth >= MAX_TUPLE_DEPTH) throw new ProtoError(tooDeep(what));
    return {
      kind: "tuple",
      elements: p.tupleShapes.map((e, k) => shapeFromProto(e, `${what} element ${k}`, depth + 1)),
    };
  }
  const type = ELEMENT_TYPE_OF.get(p.elementType);
  if (type === undefined) {
    throw new ProtoError(`${what}: unsupported element type ${primitiveName(p.elementType)}`);
  }
  if (p.tupleShapes.length > 0) {
    throw new ProtoError(`${what}: an array shape (${type}) cannot have tuple_shapes`);
  }
  const dims = p.dimensions.map((d, k) => num(d, `${what} dimension ${k}`, 0));
  const n = dims.length;
  if (p.isDynamicDimension.length !== 0 && p.isDynamicDimension.length !== n) {
    throw new ProtoError(
      `${what}: ${n} dimensions but ${p.isDynamicDimension.length} is_dynamic_dimension flags`,
    );
  }
  const dynamic = dims.map((_, k) => p.isDynamicDimension[k] ?? false);
  if (!p.layout) return { kind: "array", type, dims, dynamic };
  const layout = p.layout.minorToMajor.map((d) => Number(d));
  const sorted = [...layout].sort((x, y) => x - y);
  if (layout.length !== n || sorted.some((d, k) => d !== k)) {
    throw new ProtoError(
      `${what}: layout minor_to_major {${p.layout.minorToMajor.join(",")}} is not a ` +
        `permutation of the ${n} dimensions`,
    );
  }
  const tiles = p.layout.tiles.map((t, k) =>
    t.dimensions.map((d, j) => num(d, `${what} layout tile ${k} dimension ${j}`, 1)),
  );
  const elementSizeInBits = num(p.layout.elementSizeInBits, `${what} element_size_in_bits`, 0);
  const memorySpace = num(p.layout.memorySpace, `${what} memory_space`, 0);
  const details: LayoutDetails = {
    ...(tiles.length > 0 ? { tiles } : {}),
    ...(elementSizeInBits !== 0 ? { elementSizeInBits } : {}),
    ...(memorySpace !== 0 ? { memorySpace } : {}),
  };
  return Object.keys(details).length > 0
    ? { kind: "array", type, dims, dynamic, layout, layoutDetails: details }
    : { kind: "array", type, dims, dynamic, layout };
}

function metadataFromProto(p: OpMetadata): Metadata | undefined {
  const m: Metadata = {};
  if (p.opType !== undefined) m.opType = p.opType;
  if (p.opName !== undefined) m.opName = p.opName;
  if (p.sourceFile !== undefined) m.sourceFile = p.sourceFile;
  if (p.sourceLine !== undefined) m.sourceLine = p.sourceLine;
  if (p.sourceColumn !== undefined) m.sourceColumn = p.sourceColumn;
  return Object.keys(m).length > 0 ? m : undefined;
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

function readAttributes(
  p: HloInstructionProto,
  opcode: Opcode,
  rule: OpRule,
  shape: Shape,
  where: string,
): Attributes {
  const a: Attributes = {};
  const uses = (k: AttrKey) => rule.attrs.includes(k);
  const at = (field: string) => `${where}: ${field}`;

  if (uses("parameterNumber") || p.parameterNumber !== 0n) {
    a.parameterNumber = num(p.parameterNumber, at("parameter_number"), 0);
  }
  if (p.literal) {
    a.literal = literalFromProto(p.literal, at("literal"));
    if (opcode === "constant" && shape.kind === "array") checkLiteralShape(a.literal, shape, where);
  } else if (uses("literal")) {
    throw new ProtoError(`${where}: constant has no literal`);
  }
  if (uses("iotaDimension")) {
    if (p.dimensions.length !== 1) {
      throw new ProtoError(
        `${where}: iota needs its one dimension in 'dimensions', got ${p.dimensions.length}`,
      );
    }
    a.iotaDimension = num(p.dimensions[0]!, at("iota dimension"), 0);
  } else if (uses("dimensions") || p.dimensions.length > 0) {
    a.dimensions = nums(p.dimensions, at("dimensions"));
  }
  if (p.comparisonDirection !== "") {
    const d = p.comparisonDirection;
    if (!(COMPARISON_DIRECTIONS as readonly string[]).includes(d)) {
      throw new ProtoError(`${where}: unknown comparison_direction ${JSON.stringify(d)}`);
    }
    a.direction = d as ComparisonDirection;
  } else if (uses("direction")) {
    throw new ProtoError(`${where}: compare has no comparison_direction`);
  }
  if (p.comparisonType !== "") {
    const t = p.comparisonType;
    if (!(COMPARISON_TYPES as readonly string[]).includes(t)) {
      throw new ProtoError(`${where}: unknown comparison_type ${JSON.stringify(t)}`);
    }
    a.comparisonType = t as ComparisonType;
  }
  if (uses("slice") || p.sliceDimensions.length > 0) {
    a.slice = p.sliceDimensions.map(
      (s, k): SliceDim => ({
        start: num(s.start, at(`slice_dimensions[${k}].start`)),
        limit: num(s.limit, at(`slice_dimensions[${k}].limit`)),
        stride: num(s.stride, at(`slice_dimensions[${k}].stride`)),
      }),
    );
  }
  if (uses("dynamicSliceSizes") || p.dynamicSliceSizes.length > 0) {
    a.dynamicSliceSizes = nums(p.dynamicSliceSizes, at("dynamic_slice_sizes"));
  }
  if (p.paddingConfig || uses("padding")) {
    a.padding = (p.paddingConfig?.dimensions ?? []).map(
      (d, k): PaddingDim => ({
        low: num(d.edgePaddingLow, at(`padding_config[${k}].edge_padding_low`)),
        high: num(d.edgePaddingHigh, at(`padding_config[${k}].edge_padding_high`)),
        interior: num(d.interiorPadding, at(`padding_config[${k}].interior_padding`)),
      }),
    );
  }
  if (p.raggedDotDimensionNumbers) {
    const r = p.raggedDotDimensionNumbers;
    a.lhsRaggedDims = nums(r.lhsRaggedDimensions, at("lhs_ragged_dimensions"));
    a.rhsGroupDims = nums(r.rhsGroupDimensions, at("rhs_group_dimensions"));
  } else if (uses("lhsRaggedDims")) {
    throw new ProtoError(`${where}: ragged-dot has no ragged_dot_dimension_numbers`);
  }
  if (p.dotDimensionNumbers || p.raggedDotDimensionNumbers || uses("dot")) {
    const d = p.dotDimensionNumbers ?? p.raggedDotDimensionNumbers?.dotDimensionNumbers;
    const f = at("dot_dimension_numbers");
    a.dot = {
      lhsBatch: nums(d?.lhsBatchDimensions ?? [], `${f}.lhs_batch_dimensions`),
      rhsBatch: nums(d?.rhsBatchDimensions ?? [], `${f}.rhs_batch_dimensions`),
      lhsContracting: nums(d?.lhsContractingDimensions ?? [], `${f}.lhs_contracting_dimensions`),
      rhsContracting: nums(d?.rhsContractingDimensions ?? [], `${f}.rhs_contracting_dimensions`),
    } satisfies KilnDotDims;
  }
  if (p.window || uses("window")) {
    a.window = (p.window?.dimensions ?? []).map((w, k): WindowDim => {
      const f = at(`window.dimensions[${k}]`);
      return {
        size: num(w.size, `${f}.size`),
        stride: num(w.stride, `${f}.stride`),
        padLow: num(w.paddingLow, `${f}.padding_low`),
        padHigh: num(w.paddingHigh, `${f}.padding_high`),
        windowDilation: num(w.windowDilation, `${f}.window_dilation`),
        baseDilation: num(w.baseDilation, `${f}.base_dilation`),
        windowReversal: w.windowReversal,
      };
    });
  }
  if (p.convolutionDimensionNumbers) {
    const d = p.convolutionDimensionNumbers;
    const f = at("convolution_dimension_numbers");
    a.convDims = {
      inputBatch: num(d.inputBatchDimension, `${f}.input_batch_dimension`),
      inputFeature: num(d.inputFeatureDimension, `${f}.input_feature_dimension`),
      inputSpatial: nums(d.inputSpatialDimensions, `${f}.input_spatial_dimensions`),
      kernelInputFeature: num(d.kernelInputFeatureDimension, `${f}.kernel_input_feature_dimension`),
      kernelOutputFeature: num(
        d.kernelOutputFeatureDimension,
        `${f}.kernel_output_feature_dimension`,
      ),
      kernelSpatial: nums(d.kernelSpatialDimensions, `${f}.kernel_spatial_dimensions`),
      outputBatch: num(d.outputBatchDimension, `${f}.output_batch_dimension`),
      outputFeature: num(d.outputFeatureDimension, `${f}.output_feature_dimension`),
      outputSpatial: nums(d.outputSpatialDimensions, `${f}.output_spatial_dimensions`),
    } satisfies ConvDimensionNumbers;
  }
  // XLA: an absent (0) group count means 1.
  if (uses("featureGroupCount") || p.featureGroupCount !== 0n) {
    a.featureGroupCount = p.featureGroupCount === 0n
      ? 1
      : num(p.featureGroupCount, at("feature_group_count"));
  }
  if (uses("batchGroupCount") || p.batchGroupCount !== 0n) {
    a.batchGroupCount = p.batchGroupCount === 0n
      ? 1
      : num(p.batchGroupCount, at("batch_group_count"));
  }
  if (p.gatherDimensionNumbers) {
    const g = p.gatherDimensionNumbers;
    const f = at("gather_dimension_numbers");
    a.gather = {
      offsetDims: nums(g.offsetDims, `${f}.offset_dims`),
      collapsedSliceDims: nums(g.collapsedSliceDims, `${f}.collapsed_slice_dims`),
      startIndexMap: nums(g.startIndexMap, `${f}.start_index_map`),
      indexVectorDim: num(g.indexVectorDim, `${f}.index_vector_dim`),
      operandBatchingDims: nums(g.operandBatchingDims, `${f}.operand_batching_dims`),
      startIndicesBatchingDims: nums(
        g.startIndicesBatchingDims,
        `${f}.start_indices_batching_dims`,
      ),
    } satisfies KilnGatherDims;
  }
  if (uses("gatherSliceSizes") || p.gatherSliceSizes.length > 0) {
    a.gatherSliceSizes = nums(p.gatherSliceSizes, at("gather_slice_sizes"));
  }
  if (p.scatterDimensionNumbers) {
    const s = p.scatterDimensionNumbers;
    const f = at("scatter_dimension_numbers");
    a.scatter = {
      updateWindowDims: nums(s.updateWindowDims, `${f}.update_window_dims`),
      insertedWindowDims: nums(s.insertedWindowDims, `${f}.inserted_window_dims`),
      scatterDimsToOperandDims: nums(
        s.scatterDimsToOperandDims,
        `${f}.scatter_dims_to_operand_dims`,
      ),
      indexVectorDim: num(s.indexVectorDim, `${f}.index_vector_dim`),
      inputBatchingDims: nums(s.inputBatchingDims, `${f}.input_batching_dims`),
      scatterIndicesBatchingDims: nums(
        s.scatterIndicesBatchingDims,
        `${f}.scatter_indices_batching_dims`,
      ),
    } satisfies KilnScatterDims;
  }
  if (uses("indicesAreSorted") || p.indicesAreSorted) a.indicesAreSorted = p.indicesAreSorted;
  if (uses("uniqueIndices") || p.uniqueIndices) a.uniqueIndices = p.uniqueIndices;
  if (uses("isStable") || p.isStable) a.isStable = p.isStable;
  if (uses("tupleIndex") || p.tupleIndex !== 0n) {
    a.tupleIndex = num(p.tupleIndex, at("tuple_index"), 0);
  }
  if (p.fusionKind !== "") {
    const k = p.fusionKind;
    if (!(FUSION_KINDS as readonly string[]).includes(k)) {
      throw new ProtoError(`${where}: unknown fusion_kind ${JSON.stringify(k)}`);
    }
    a.fusionKind = k as FusionKind;
  } else if (uses("fusionKind")) {
    throw new ProtoError(`${where}: fusion has no fusion_kind`);
  }
  if (uses("customCallTarget") || p.customCallTarget !== "") {
    a.customCallTarget = p.customCallTarget;
  }
  if (p.channelId !== 0n) a.channelId = num(p.channelId, at("channel_id"), 1);
  const groups = replicaGroupsFromProto(p, at("replica_groups"));
  if (uses("replicaGroups") || groups.length > 0) a.replicaGroups = groups;
  if (p.useGlobalDeviceIds) a.useGlobalDeviceIds = true;
  if (opcode === "custom-call") {
    // On a custom-call, constrain_layout says operand_shapes_with_layout holds the layouts.
    if (p.constrainLayout) {
      a.operandLayoutConstraints = p.operandShapesWithLayout.map((s, k) =>
        shapeFromProto(s, at(`operand_shapes_with_layout[${k}]`)),
      );
    } else if (p.operandShapesWithLayout.length > 0) {
      throw new ProtoError(`${where}: operand_shapes_with_layout without constrain_layout`);
    }
  } else if (p.constrainLayout) {
    a.constrainLayout = true;
  }
  if (p.customCallHasSideEffect) a.customCallHasSideEffect = true;
  const api = p.customCallApiVersion as number;
  if (api !== 0 && api !== CUSTOM_CALL_API_VERSIONS.API_VERSION_ORIGINAL) {
    const name = (Object.keys(CUSTOM_CALL_API_VERSIONS) as CustomCallApiVersion[]).find(
      (k) => CUSTOM_CALL_API_VERSIONS[k] === api,
    );
    if (name === undefined) {
      throw new ProtoError(`${where}: unknown custom_call_api_version ${api}`);
    }
    a.apiVersion = name;
  }
  if (p.outputOperandAliasing.length > 0) {
    a.outputToOperandAliasing = p.outputOperandAliasing.map((x, k) => ({
      output: nums(x.outputShapeIndex, at(`output_operand_aliasing[${k}].output_shape_index`)),
      operand: num(x.operandIndex, at(`output_operand_aliasing[${k}].operand_index`), 0),
      operandIndex: nums(x.operandShapeIndex, at(`output_operand_aliasing[${k}]`)),
    }));
  }
  if (p.precisionConfig) {
    const alg = p.precisionConfig.algorithm as number;
    if (alg !== 0) {
      const name = (Object.keys(DOT_ALGORITHMS) as DotAlgorithm[]).find(
        (k) => DOT_ALGORITHMS[k] === alg,
      );
      if (name === undefined) throw new ProtoError(`${where}: unknown precision algorithm ${alg}`);
      a.dotAlgorithm = name;
    }
  }
  if (p.isComposite) a.isComposite = true;
  // XLA writes "main" (the default thread) on every async op: that is none.
  if (p.asyncExecutionThread !== "" && p.asyncExecutionThread !== "main") {
    a.asyncExecutionThread = p.asyncExecutionThread;
  }
  if (uses("sourceTargetPairs") || p.sourceTargetPairs.length > 0) {
    a.sourceTargetPairs = p.sourceTargetPairs.map((st, k): [number, number] => [
      num(st.source, at(`source_target_pairs[${k}].source`), 0),
      num(st.target, at(`source_target_pairs[${k}].target`), 0),
    ]);
  }
  if (p.isReverse) a.isReverse = true;
  if (uses("numCarries") || p.numCarries !== 0n) {
    a.numCarries = num(p.numCarries, at("num_carries"), 0);
  }
  const assoc = p.isAssociative as number;
  if (assoc === TriState.TRUE) a.isAssociative = true;
  else if (assoc === TriState.FALSE) a.isAssociative = false;
  else if (assoc !== TriState.UNSPECIFIED) {
    throw new ProtoError(`${where}: unknown is_associative ${assoc}`);
  }
  if (p.isHostTransfer) a.isHostTransfer = true;
  const text = (b: Uint8Array, field: string): string => {
    try {
      return utf8.decode(b);
    } catch {
      throw new ProtoError(`${where}: ${field} is not valid UTF-8`);
    }
  };
  if (p.infeedConfig.length > 0) a.infeedConfig = text(p.infeedConfig, "infeed_config");
  if (p.outfeedConfig.length > 0) a.outfeedConfig = text(p.outfeedConfig, "outfeed_config");
  if (p.outfeedShape) a.outfeedShape = shapeFromProto(p.outfeedShape, at("outfeed_shape"));
  else if (uses("outfeedShape")) throw new ProtoError(`${where}: outfeed has no outfeed_shape`);
  if (uses("exponentBits") || p.exponentBits !== 0) a.exponentBits = p.exponentBits;
  if (uses("mantissaBits") || p.mantissaBits !== 0) a.mantissaBits = p.mantissaBits;
  if (uses("rngDistribution") || p.distribution !== 0) {
    const d = p.distribution as number;
    const name = (Object.keys(RNG_DISTRIBUTIONS) as RngDistribution[]).find(
      (k) => RNG_DISTRIBUTIONS[k] === d,
    );
    if (name === undefined) throw new ProtoError(`${where}: unknown rng distribution ${d}`);
    a.rngDistribution = name;
  }
  if (uses("rngAlgorithm") || p.rngAlgorithm !== 0) {
    const g = p.rngAlgorithm as number;
    const name = (Object.keys(RNG_ALGORITHMS) as RngAlgorithm[]).find(
      (k) => RNG_ALGORITHMS[k] === g,
    );
    if (name === undefined) throw new ProtoError(`${where}: unknown rng algorithm ${g}`);
    a.rngAlgorithm = name;
  }
  if (p.optionalCrossProgramPrefetchIndex.case === "crossProgramPrefetchIndex") {
    a.crossProgramPrefetchIndex = p.optionalCrossProgramPrefetchIndex.value;
  }
  if (p.backendConfig.length > 0) {
    try {
      a.backendConfig = utf8.decode(p.backendConfig);
    } catch {
      throw new ProtoError(`${where}: backend_config is not valid UTF-8`);
    }
  }
  if (p.sharding) a.sharding = shardingToString(shardingFromProto(p.sharding, `${where} sharding`));
  // XLA writes an empty frontend_attributes on every instruction: empty means none.
  if (p.frontendAttributes && Object.keys(p.frontendAttributes.map).length > 0) {
    const entries = Object.entries(p.frontendAttributes.map);
    a.frontendAttributes = entries.sort((x, y) => (x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : 0));
  }
  return a;
}

/**
 * The replica groups of a collective, from whichever form XLA wrote: the deprecated
 * replica_groups, collective_device_list, or the iota form (expanded to its groups).
 */
function replicaGroupsFromProto(p: HloInstructionProto, what: string): number[][] {
  const list = (gs: readonly { replicaIds: bigint[] }[]) =>
    gs.map((g, k) => nums(g.replicaIds, `${what}[${k}]`));
  const oneof = p.replicaGroupList;
  if (oneof.case === "collectiveDeviceList") {
    if (p.replicaGroups.length > 0) {
      throw new ProtoError(`${what}: both replica_groups and collective_device_list are set`);
    }
    return list(oneof.value.replicaGroups);
  }
  if (oneof.case === "iotaCollectiveDeviceList") {
    const v = oneof.value;
    const dims = nums(v.iotaReshapeDims, `${what} (iota reshape dims)`);
    const perm = v.iotaTransposePerm.length > 0 ? [...v.iotaTransposePerm] : dims.map((_, i) => i);
    const groups = num(v.numReplicaGroups, `${what} (iota group count)`, 0);
    const size = num(v.numDevicesPerGroup, `${what} (iota group size)`, 0);
    try {
      return iotaReplicaGroups(groups, size, dims, perm);
    } catch (e) {
      throw new ProtoError(`${what}: ${errText(e)}`);
    }
  }
  return list(p.replicaGroups);
}

function shardingToProto(s: Sharding): OpSharding {
  const p = shardingToProtoBare(s);
  if (s.kind !== "tuple" && s.metadata !== undefined) {
    p.metadata = s.metadata.map((m) => metadataToProto(m, "sharding") ?? create(OpMetadataSchema));
  }
  return p;
}

function shardingToProtoBare(s: Sharding): OpSharding {
  switch (s.kind) {
    case "replicated":
    case "manual":
    case "unknown":
      return create(OpShardingSchema, { type: SHARDING_TYPE[s.kind] });
    case "maximal":
      return create(OpShardingSchema, {
        type: SHARDING_TYPE.maximal,
        tileAssignmentDevices: [BigInt(s.device)],
      });
    case "tuple":
      return create(OpShardingSchema, {
        type: SHARDING_TYPE.tuple,
        tupleShardings: s.elements.map(shardingToProto),
      });
    case "tiled":
      return create(OpShardingSchema, {
        type: SHARDING_TYPE.other,
        tileAssignmentDimensions: s.dims.map(BigInt),
        tileAssignmentDevices: (s.devices ?? []).map(BigInt),
        iotaReshapeDims: (s.iotaReshape ?? []).map(BigInt),
        iotaTransposePerm: [...(s.iotaTranspose ?? [])],
        replicateOnLastTileDim: s.lastTileDimReplicate ?? false,
        lastTileDims: (s.lastTileDims ?? []).map(lastTileTypeNumber),
      });
    default: {
      const never: never = s;
      throw new ProtoError(`unknown sharding ${String(never)}`);
    }
  }
}

function shardingFromProto(p: OpSharding, what: string, depth = 0): Sharding {
  const s = shardingFromProtoBare(p, what, depth);
  if (s.kind === "tuple" || p.metadata.length === 0) return s;
  return { ...s, metadata: p.metadata.map((m) => metadataFromProto(m) ?? {}) };
}

function shardingFromProtoBare(p: OpSharding, what: string, depth = 0): Sharding {
  if (depth > MAX_TUPLE_DEPTH) throw new ProtoError(`${what}: nested too deeply`);
  const ints = (v: readonly bigint[], f: string) => v.map((x, k) => num(x, `${what} ${f}[${k}]`));
  switch (p.type) {
    case SHARDING_TYPE.replicated:
      return { kind: "replicated" };
    case SHARDING_TYPE.manual:
      return { kind: "manual" };
    case SHARDING_TYPE.unknown:
      return { kind: "unknown" };
    case SHARDING_TYPE.maximal: {
      if (p.tileAssignmentDevices.length !== 1) {
        throw new ProtoError(`${what}: a maximal sharding needs one device`);
      }
      return { kind: "maximal", device: num(p.tileAssignmentDevices[0]!, `${what} device`, 0) };
    }
    case SHARDING_TYPE.tuple:
      return {
        kind: "tuple",
        elements: p.tupleShardings.map((t, k) =>
          shardingFromProto(t, `${what} tuple element ${k}`, depth + 1),
        ),
      };
    case SHARDING_TYPE.other: {
      const lastTileDims = p.lastTileDims.map((t) => {
        const name = lastTileTypeOf(t);
        if (name === undefined) throw new ProtoError(`${what}: unknown last_tile_dims type ${t}`);
        return name;
      });
      const iota = p.iotaReshapeDims.length > 0;
      return {
        kind: "tiled",
        dims: ints(p.tileAssignmentDimensions, "tile_assignment_dimensions"),
        ...(iota
          ? {
              iotaReshape: ints(p.iotaReshapeDims, "iota_reshape_dims"),
              iotaTranspose: [...p.iotaTransposePerm],
            }
          : { devices: ints(p.tileAssignmentDevices, "tile_assignment_devices") }),
        ...(p.replicateOnLastTileDim ? { lastTileDimReplicate: true } : {}),
        ...(lastTileDims.length > 0 ? { lastTileDims } : {}),
      };
    }
    default:
      throw new ProtoError(`${what}: sharding type ${String(p.type)} is not read here`);
  }
}

function checkLiteralShape(lit: Literal, shape: ArrayShape, where: string): void {
  if (lit.type !== shape.type || !sameNumbers(lit.dims, shape.dims)) {
    throw new ProtoError(
      `${where}: literal shape ${shapeToString(lit.shape)} does not match the constant's ` +
        `shape ${shapeToString(shape)}`,
    );
  }
}

function sameNumbers(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((x, k) => x === b[k]);
}

function literalFromProto(p: LiteralProto, what: string): Literal {
  if (!p.shape) throw new ProtoError(`${what}: missing shape`);
  const shape = shapeFromProto(p.shape, `${what} shape`);
  if (shape.kind === "tuple") {
    throw new ProtoError(
      `${what}: a tuple shape ${shapeToString(shape)} where an array literal is needed`,
    );
  }
  const { type, dims } = shape;
  let n = 1;
  for (const d of dims) n *= d;
  const got = (count: number, field: string) => {
    if (count !== n) {
      throw new ProtoError(
        `${what}: ${shapeToString(shape, false)} needs ${n} elements in ${field}, got ${count}`,
      );
    }
  };
  let physical: LiteralData;
  switch (type) {
    case "pred":
      got(p.preds.length, "preds");
      physical = Uint8Array.from(p.preds, (b) => (b ? 1 : 0));
      break;
    case "u8":
    case "u4":
    case "s8":
    case "s4": {
      // One element per byte; s4/u4 keep the value's low 4 bits (sign-extended for s4).
      const field = `${type}s` as "u8s" | "u4s" | "s8s" | "s4s";
      const bytes = p[field];
      got(bytes.length, field);
      physical = dataFromBytes(type, bytes);
      break;
    }
    case "s16":
    case "u16": {
      const field = type === "s16" ? "s16s" : "u16s";
      const bytes = p[field];
      if (bytes.length % 2 !== 0) {
        throw new ProtoError(`${what}: ${field} has an odd number of bytes (${bytes.length})`);
      }
      got(bytes.length / 2, field);
      physical = dataFromBytes(type, bytes);
      break;
    }
    case "s32":
      got(p.s32s.length, "s32s");
      physical = Int32Array.from(p.s32s);
      break;
    case "u32":
      got(p.u32s.length, "u32s");
      physical = Uint32Array.from(p.u32s);
      break;
    case "s64":
      got(p.s64s.length, "s64s");
      physical = BigInt64Array.from(p.s64s);
      break;
    case "u64":
      got(p.u64s.length, "u64s");
      physical = BigUint64Array.from(p.u64s);
      break;
    case "f32":
      got(p.f32s.length, "f32s");
      physical = Float32Array.from(p.f32s);
      break;
    case "f64":
      got(p.f64s.length, "f64s");
      physical = Float64Array.from(p.f64s);
      break;
    case "token":
      throw new ProtoError(`${what}: a token has no literal`);
    case "f16":
    case "bf16": {
      const bytes = type === "f16" ? p.f16s : p.bf16s;
      const field = type === "f16" ? "f16s" : "bf16s";
      if (bytes.length % 2 !== 0) {
        throw new ProtoError(`${what}: ${field} has an odd number of bytes (${bytes.length})`);
      }
      got(bytes.length / 2, field);
      const fromBits = type === "f16" ? f16BitsToNumber : bf16BitsToNumber;
      const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
      physical = Float32Array.from({ length: n }, (_, k) => fromBits(view.getUint16(2 * k, true)));
      break;
    }
    case "f8e5m2":
    case "f8e4m3":
    case "f8e3m4":
    case "f8e4m3fn":
    case "f8e4m3fnuz":
    case "f8e5m2fnuz":
    case "f8e4m3b11fnuz":
    {
      const field = `${type}s` as const;
      got(p[field].length, field);
      physical = dataFromBytes(type, p[field]);
      break;
    }
    default: {
      const never: never = type;
      throw new ProtoError(`${what}: unknown element type ${String(never)}`);
    }
  }
  return new Literal(type, dims, toRowMajor(physical, dims, shape.layout));
}

/**
 * Literal data stored in the order of `minorToMajor`, reordered to row-major (XLA's default
 * layout, the order Literal keeps). Data already in default layout is returned as is.
 */
function toRowMajor(
  data: LiteralData,
  dims: readonly number[],
  minorToMajor: readonly number[] | undefined,
): LiteralData {
  const rank = dims.length;
  if (!minorToMajor || minorToMajor.every((d, k) => d === rank - 1 - k)) return data;
  const strides = new Array<number>(rank).fill(0);
  let stride = 1;
  for (const d of minorToMajor) {
    strides[d] = stride;
    stride *= dims[d]!;
  }
  const out = new (data.constructor as new (n: number) => LiteralData)(data.length);
  const index = new Array<number>(rank).fill(0);
  for (let i = 0; i < data.length; i++) {
    let offset = 0;
    for (let d = 0; d < rank; d++) offset += index[d]! * strides[d]!;
    (out as unknown as (number | bigint)[])[i] = data[offset]!;
    for (let d = rank - 1; d >= 0; d--) {
      if (++index[d]! < dims[d]!) break;
      index[d] = 0;
    }
  }
  return out;
}
