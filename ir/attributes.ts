// Instruction attributes: the typed form of what XLA's text shows after the operand list
// (`dimensions={1}`, `slice={[0:2:1]}`, `window={size=3x3 ...}`, `lhs_contracting_dims={1}`, ...)
// and of the matching fields of HloInstructionProto. One flat record with optional fields: each
// opcode uses the fields its shape rule names (see ir/shape_inference.ts for which).

import type { Literal } from "./literal.ts";
import type { Shape } from "./shape.ts";

/** XLA's CustomCallApiVersion, by its enum value in the proto. */
export const CUSTOM_CALL_API_VERSIONS = {
  API_VERSION_ORIGINAL: 1,
  API_VERSION_STATUS_RETURNING: 2,
  API_VERSION_STATUS_RETURNING_UNIFIED: 3,
  API_VERSION_TYPED_FFI: 4,
} as const;
export type CustomCallApiVersion = keyof typeof CUSTOM_CALL_API_VERSIONS;

/**
 * XLA's PrecisionConfig.Algorithm for dots, by its text name (the enum name without `ALG_`, in
 * lower case) and its enum value in the proto.
 */
export const DOT_ALGORITHMS = {
  dot_any_f8_any_f8_f32: 1,
  dot_any_f8_any_f8_f32_fast_accum: 2,
  dot_f16_f16_f16: 3,
  dot_f16_f16_f32: 4,
  dot_bf16_bf16_bf16: 5,
  dot_bf16_bf16_f32: 6,
  dot_bf16_bf16_f32_x3: 7,
  dot_bf16_bf16_f32_x6: 8,
  dot_tf32_tf32_f32: 9,
  dot_tf32_tf32_f32_x3: 10,
  dot_f32_f32_f32: 11,
  dot_f64_f64_f64: 12,
  dot_bf16_bf16_f32_x9: 13,
} as const;
export type DotAlgorithm = keyof typeof DOT_ALGORITHMS;

/** One aliasing pair: the output at `output` (a shape index) shares operand `operand`'s buffer. */
export interface OutputOperandAlias {
  output: number[];
  operand: number;
  operandIndex: number[];
}

/** XLA's RandomDistribution of an rng, by its text name and its enum value in the proto. */
export const RNG_DISTRIBUTIONS = { rng_uniform: 1, rng_normal: 2 } as const;
export type RngDistribution = keyof typeof RNG_DISTRIBUTIONS;

/** XLA's RandomAlgorithm of an rng-bit-generator, by its text name and proto enum value. */
export const RNG_ALGORITHMS = { rng_default: 0, rng_three_fry: 1, rng_philox: 2 } as const;
export type RngAlgorithm = keyof typeof RNG_ALGORITHMS;

export type ComparisonDirection = "EQ" | "NE" | "LT" | "LE" | "GT" | "GE";
export const COMPARISON_DIRECTIONS: readonly ComparisonDirection[] = [
  "EQ",
  "NE",
  "LT",
  "LE",
  "GT",
  "GE",
];

/**
 * XLA's comparison type (`type=TOTALORDER` in text). Default (absent): FLOAT for floats,
 * SIGNED/UNSIGNED for integers. TOTALORDER orders -NaN < -Inf < ... < -0 < +0 < ... < Inf < NaN.
 */
export type ComparisonType = "FLOAT" | "TOTALORDER" | "SIGNED" | "UNSIGNED";

export type FusionKind = "kLoop" | "kInput" | "kOutput" | "kCustom";

/** One dim of a `slice`: elements start, start+stride, ... below limit. */
export interface SliceDim {
  start: number;
  limit: number;
  stride: number;
}

/** One dim of a `pad`: negative edge padding removes elements. */
export interface PaddingDim {
  low: number;
  high: number;
  interior: number;
}

/** One dim of a window (`convolution`, `reduce-window`), as XLA's WindowDimension. */
export interface WindowDim {
  size: number;
  stride: number;
  padLow: number;
  padHigh: number;
  /** Dilation of the window (rhs_dilate in text). */
  windowDilation: number;
  /** Dilation of the base (lhs_dilate in text). */
  baseDilation: number;
  windowReversal: boolean;
}

export interface DotDimensionNumbers {
  lhsBatch: number[];
  rhsBatch: number[];
  lhsContracting: number[];
  rhsContracting: number[];
}

/**
 * Convolution dims as XLA's ConvolutionDimensionNumbers. Text form: `dim_labels=b01f_01io->b01f`
 * (input: b batch, f feature, digits spatial; kernel: i input feature, o output feature).
 */
export interface ConvDimensionNumbers {
  inputBatch: number;
  inputFeature: number;
  inputSpatial: number[];
  kernelInputFeature: number;
  kernelOutputFeature: number;
  kernelSpatial: number[];
  outputBatch: number;
  outputFeature: number;
  outputSpatial: number[];
}

export interface GatherDimensionNumbers {
  offsetDims: number[];
  collapsedSliceDims: number[];
  startIndexMap: number[];
  indexVectorDim: number;
  operandBatchingDims: number[];
  startIndicesBatchingDims: number[];
}

export interface ScatterDimensionNumbers {
  updateWindowDims: number[];
  insertedWindowDims: number[];
  scatterDimsToOperandDims: number[];
  indexVectorDim: number;
  inputBatchingDims: number[];
  scatterIndicesBatchingDims: number[];
}

export interface Attributes {
  /** parameter: its number. */
  parameterNumber?: number;
  /** constant: its value (shape equals the instruction's shape). */
  literal?: Literal;
  /** iota: the dim that counts up. */
  iotaDimension?: number;
  /**
   * broadcast (operand dim i maps to result dim dimensions[i]), transpose (permutation),
   * reverse, reduce (dims reduced), concatenate (one dim), sort (one dim),
   * get-dimension-size / set-dimension-size (one dim).
   */
  dimensions?: number[];
  /** compare */
  direction?: ComparisonDirection;
  comparisonType?: ComparisonType;
  /** slice */
  slice?: SliceDim[];
  /** dynamic-slice */
  dynamicSliceSizes?: number[];
  /** pad */
  padding?: PaddingDim[];
  /** dot */
  dot?: DotDimensionNumbers;
  /** convolution and reduce-window */
  window?: WindowDim[];
  /** convolution */
  convDims?: ConvDimensionNumbers;
  featureGroupCount?: number;
  batchGroupCount?: number;
  /** gather */
  gather?: GatherDimensionNumbers;
  gatherSliceSizes?: number[];
  /** scatter */
  scatter?: ScatterDimensionNumbers;
  /** gather and scatter */
  indicesAreSorted?: boolean;
  /** scatter */
  uniqueIndices?: boolean;
  /** sort */
  isStable?: boolean;
  /** get-tuple-element */
  tupleIndex?: number;
  /** fusion */
  fusionKind?: FusionKind;
  /**
   * Collectives: the groups of devices that exchange values (XLA's replica_groups; which ids
   * they hold, replicas, partitions or flattened device ids, depends on channelId and
   * useGlobalDeviceIds as in XLA). Empty or absent: one group of every device.
   */
  replicaGroups?: number[][];
  /** Collectives: a channel id (positive); with one, a collective spans partitions. */
  channelId?: number;
  /** all-reduce, all-gather, reduce-scatter: the groups hold flattened device ids. */
  useGlobalDeviceIds?: boolean;
  /** Collectives: XLA's constrain_layout (kept; layouts do not change what Kiln computes). */
  constrainLayout?: boolean;
  /** collective-permute: (source, target) pairs; a device no pair targets receives zeros. */
  sourceTargetPairs?: [number, number][];
  /** custom-call */
  customCallTarget?: string;
  /** custom-call: XLA's custom_call_has_side_effect (kept; Kiln never removes a custom-call). */
  customCallHasSideEffect?: boolean;
  /** custom-call: XLA's api_version; absent means API_VERSION_ORIGINAL (XLA's default). */
  apiVersion?: CustomCallApiVersion;
  /** custom-call: the layout each operand must have (XLA's operand_layout_constraints). */
  operandLayoutConstraints?: Shape[];
  /** custom-call and fusion: output buffers that alias operand buffers (kept, not used). */
  outputToOperandAliasing?: OutputOperandAlias[];
  /** dot: XLA's precision algorithm (`algorithm=dot_bf16_bf16_f32`; kept, not used). */
  dotAlgorithm?: DotAlgorithm;
  /** async-start/-update/-done: the thread the callee runs on (XLA's; kept, not used). */
  asyncExecutionThread?: string;
  /** call: XLA's is_composite (the call stands for a composite op; kept). */
  isComposite?: boolean;
  /** send, recv and their -done: the transfer is with the host (XLA's is_host_transfer). */
  isHostTransfer?: boolean;
  /** infeed: XLA's infeed_config (a string the backend reads; kept). */
  infeedConfig?: string;
  /** outfeed: XLA's outfeed_config (kept). */
  outfeedConfig?: string;
  /** outfeed: the shape of the data sent (XLA's outfeed_shape; the operand's, with a layout). */
  outfeedShape?: Shape;
  /** reduce-precision: the exponent and mantissa bits of the format it rounds to. */
  exponentBits?: number;
  mantissaBits?: number;
  /** rng: the distribution. */
  rngDistribution?: RngDistribution;
  /** rng-bit-generator: the algorithm. */
  rngAlgorithm?: RngAlgorithm;
  /** ragged-dot: the lhs dim split into groups (one), and the rhs dim that picks the group. */
  lhsRaggedDims?: number[];
  rhsGroupDims?: number[];
  /** scan: how many trailing operands are carries (the others are scanned inputs). */
  numCarries?: number;
  /** scan: from the last element to the first. */
  isReverse?: boolean;
  /** scan: XLA's is_associative (absent: unspecified; kept). */
  isAssociative?: boolean;
  /** copy-start: XLA's cross_program_prefetch_index (kept). */
  crossProgramPrefetchIndex?: number;
  backendConfig?: string;
  /**
   * XLA's sharding, as its text (`{devices=[2,2]<=[4]}`; ir/sharding.ts): canonical for the
   * forms Kiln structures, as written for the others. Kept, printed, written to the proto;
   * nothing in Kiln computes from it. Any opcode.
   */
  sharding?: string;
  /**
   * XLA's control-predecessors: names of instructions of the same computation that must run
   * before this one (an ordering only; values do not flow). Kept, printed, written to the
   * proto's control_predecessor_ids; the verifier checks they exist and come earlier. Any opcode.
   */
  controlPredecessors?: string[];
  /** XLA's frontend_attributes: key-value strings, sorted by key (as XLA's map). Any opcode. */
  frontendAttributes?: readonly (readonly [string, string])[];
}

/** Source location and frontend op of an instruction (XLA's OpMetadata). */
export interface Metadata {
  /** The frontend op that made the instruction (`matmul`, `layerNorm`). */
  opType?: string;
  /** Scoped name (`GPT2/h.0/attn/matmul`). */
  opName?: string;
  sourceFile?: string;
  sourceLine?: number;
  sourceColumn?: number;
}

export function defaultWindowDim(size: number): WindowDim {
  return {
    size,
    stride: 1,
    padLow: 0,
    padHigh: 0,
    windowDilation: 1,
    baseDilation: 1,
    windowReversal: false,
  };
}

/** `b01f_01io->b01f` → ConvDimensionNumbers; throws a message naming the problem. */
export function convDimsFromLabels(labels: string): ConvDimensionNumbers {
  const m = /^([^_]+)_([^-]+)->(.+)$/.exec(labels);
  if (!m) throw new Error(`dim_labels '${labels}': expected the form 'b01f_01io->b01f'`);
  const side = (s: string, a: string, b: string, what: string) => {
    let ia = -1;
    let ib = -1;
    const spatial: number[] = [];
    for (let pos = 0; pos < s.length; pos++) {
      const ch = s[pos]!;
      if (ch === a && ia < 0) ia = pos;
      else if (ch === b && ib < 0) ib = pos;
      else if (/[0-9]/.test(ch) && spatial[Number(ch)] === undefined) spatial[Number(ch)] = pos;
      else throw new Error(`dim_labels '${labels}': unexpected or repeated '${ch}' in ${what}`);
    }
    if (ia < 0 || ib < 0) {
      throw new Error(`dim_labels '${labels}': ${what} needs one '${a}' and one '${b}'`);
    }
    for (let k = 0; k < spatial.length; k++) {
      if (spatial[k] === undefined) {
        throw new Error(`dim_labels '${labels}': ${what} is missing spatial dim ${k}`);
      }
    }
    return { ia, ib, spatial };
  };
  const inp = side(m[1]!, "b", "f", "input");
  const ker = side(m[2]!, "i", "o", "kernel");
  const out = side(m[3]!, "b", "f", "output");
  if (inp.spatial.length !== ker.spatial.length || inp.spatial.length !== out.spatial.length) {
    throw new Error(`dim_labels '${labels}': input, kernel and output need the same spatial dims`);
  }
  return {
    inputBatch: inp.ia,
    inputFeature: inp.ib,
    inputSpatial: inp.spatial,
    kernelInputFeature: ker.ia,
    kernelOutputFeature: ker.ib,
    kernelSpatial: ker.spatial,
    outputBatch: out.ia,
    outputFeature: out.ib,
    outputSpatial: out.spatial,
  };
}

/** ConvDimensionNumbers → `b01f_01io->b01f`. */
export function convDimsToLabels(d: ConvDimensionNumbers): string {
  const side = (n: number, a: [number, string], b: [number, string], spatial: number[]) => {
    const chars: string[] = new Array<string>(n).fill("?");
    chars[a[0]] = a[1];
    chars[b[0]] = b[1];
    spatial.forEach((pos, k) => (chars[pos] = String(k)));
    return chars.join("");
  };
  const n = d.inputSpatial.length + 2;
  return (
    side(n, [d.inputBatch, "b"], [d.inputFeature, "f"], d.inputSpatial) +
    "_" +
    side(n, [d.kernelInputFeature, "i"], [d.kernelOutputFeature, "o"], d.kernelSpatial) +
    "->" +
    side(n, [d.outputBatch, "b"], [d.outputFeature, "f"], d.outputSpatial)
  );
}

/**
 * XLA's iota replica groups `[groups,size]<=[dims]T(perm)`: the ids 0..prod(dims)-1 laid out
 * row-major over `dims`, transposed by `perm`, read in order and cut into `groups` groups of
 * `size`. Throws a message naming the problem.
 */
export function iotaReplicaGroups(
  groups: number,
  size: number,
  dims: readonly number[],
  perm: readonly number[],
): number[][] {
  const n = dims.reduce((x, y) => x * y, 1);
  const sorted = [...perm].sort((x, y) => x - y);
  if (groups * size !== n || perm.length !== dims.length || sorted.some((v, i) => v !== i)) {
    throw new Error(
      `iota replica groups [${groups},${size}]<=[${dims}]T(${perm}) need groups*size = ` +
        "prod(dims) and perm a permutation of the dims",
    );
  }
  const strides = dims.map((_, i) => dims.slice(i + 1).reduce((x, y) => x * y, 1));
  const tdims = perm.map((k) => dims[k]!);
  const ids: number[] = [];
  const idx = new Array<number>(tdims.length).fill(0);
  for (let k = 0; k < n; k++) {
    ids.push(idx.reduce((acc, v, j) => acc + v * strides[perm[j]!]!, 0));
    for (let j = tdims.length - 1; j >= 0; j--) {
      if (++idx[j]! < tdims[j]!) break;
      idx[j] = 0;
    }
  }
  return Array.from({ length: groups }, (_, g) => ids.slice(g * size, (g + 1) * size));
}
