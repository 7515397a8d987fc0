// The HLO text printer: writes a Module in XLA's HLO text syntax (`HloModule`, computations with
// signatures, `ROOT`, operands printed with their shapes, attributes in XLA's order, `metadata=`
// last). It also owns the one table that says which text attributes each opcode has and in what
// order (TEXT_ATTRS); ir/parse.ts reads the same table, so the parser reads exactly what the
// printer writes and printHlo(parseHlo(printHlo(m))) === printHlo(m). Names the text cannot
// hold are sanitized (as XLA does) and kept unique; `canonicalNames` names everything by position
// for fingerprints.

import { isSmallFloatType } from "./small_floats.ts";
import {
  convDimsToLabels,
  type Metadata,
  type OutputOperandAlias,
  type PaddingDim,
  type SliceDim,
  type WindowDim,
} from "./attributes.ts";
import { type Literal, toStored } from "./literal.ts";
import type { Computation, Instruction, Module } from "./module.ts";
import type { Opcode } from "./opcodes.ts";
import { type ElementType, isFloatType, shapeToString } from "./shape.ts";

export interface PrintOptions {
  /** Print `metadata={...}` (default true). */
  metadata?: boolean;
  /**
   * Name everything by its position in the printed text instead of by its own name: the module
   * `m`, computations `c0`, `c1`, ... and instructions `v0`, `v1`, ... (module-wide, in print
   * order). Two modules that differ only in names print the same (the fingerprint's text).
   */
  canonicalNames?: boolean;
  /**
   * Print what XLA takes as the default when it is absent and Kiln keeps when it is written: a
   * shape's default layout and a compare's default `type=` (default true). False leaves them out,
   * so a module as XLA writes it (a layout on every shape, every compare's type) prints the same
   * as Kiln's: the fingerprint's text.
   */
  defaults?: boolean;
}

/** Every attribute key of the text form (what comes before `=` after the operand list). */
export const ATTR_KEYS = [
  "iota_dimension",
  "dimensions",
  "direction",
  "type",
  "slice",
  "dynamic_slice_sizes",
  "padding",
  "lhs_batch_dims",
  "lhs_contracting_dims",
  "rhs_batch_dims",
  "rhs_contracting_dims",
  "window",
  "dim_labels",
  "feature_group_count",
  "batch_group_count",
  "offset_dims",
  "collapsed_slice_dims",
  "start_index_map",
  "operand_batching_dims",
  "start_indices_batching_dims",
  "update_window_dims",
  "inserted_window_dims",
  "scatter_dims_to_operand_dims",
  "input_batching_dims",
  "scatter_indices_batching_dims",
  "index_vector_dim",
  "slice_sizes",
  "indices_are_sorted",
  "unique_indices",
  "is_stable",
  "index",
  "kind",
  "to_apply",
  "calls",
  "condition",
  "body",
  "true_computation",
  "false_computation",
  "branch_computations",
  "custom_call_target",
  "called_computations",
  "custom_call_has_side_effect",
  "output_to_operand_aliasing",
  "api_version",
  "operand_layout_constraints",
  "algorithm",
  "is_composite",
  "async_execution_thread",
  "channel_id",
  "replica_groups",
  "source_target_pairs",
  "constrain_layout",
  "use_global_device_ids",
  "is_host_transfer",
  "infeed_config",
  "outfeed_shape",
  "outfeed_config",
  "exponent_bits",
  "mantissa_bits",
  "distribution",
  "cross_program_prefetch_index",
  "lhs_ragged_dims",
  "rhs_group_dims",
  "num_carries",
  "is_reverse",
  "is_associative",
  "sharding",
  "control-predecessors",
  "frontend_attributes",
  "backend_config",
  "metadata",
] as const;
export type AttrKey = (typeof ATTR_KEYS)[number];

/** An attribute slot of an opcode: the key, with `?` when the attribute is optional. */
export type AttrSlot = AttrKey | `${AttrKey}?`;

const DOT_DIMS = [
  "lhs_batch_dims?",
  "lhs_contracting_dims?",
  "rhs_batch_dims?",
  "rhs_contracting_dims?",
] as const;

const ALL_REDUCE = [
  "channel_id?",
  "replica_groups?",
  "constrain_layout?",
  "use_global_device_ids?",
  "to_apply",
] as const;
const ALL_GATHER = [
  "channel_id?",
  "replica_groups?",
  "dimensions",
  "constrain_layout?",
  "use_global_device_ids?",
] as const;
const PERMUTE = ["channel_id?", "source_target_pairs"] as const;

/**
 * The text attributes of each opcode, in the order XLA prints them. `backend_config` (any
 * opcode) and `metadata` (any opcode) are not listed: they are always allowed and printed last.
 */
export const TEXT_ATTRS = {
  parameter: [],
  constant: [],
  iota: ["iota_dimension"],
  "replica-id": [],
  "partition-id": [],
  "after-all": [],
  "add-dependency": [],
  "opt-barrier": [],
  send: ["channel_id?", "is_host_transfer?"],
  "send-done": ["channel_id?", "is_host_transfer?"],
  recv: ["channel_id?", "is_host_transfer?"],
  "recv-done": ["channel_id?", "is_host_transfer?"],
  infeed: ["infeed_config?"],
  outfeed: ["outfeed_shape?", "outfeed_config?"],
  "copy-start": ["cross_program_prefetch_index?"],
  "copy-done": [],
  "reduce-precision": ["exponent_bits", "mantissa_bits"],
  rng: ["distribution"],
  "rng-bit-generator": ["algorithm"],
  "ragged-dot": [...DOT_DIMS, "lhs_ragged_dims", "rhs_group_dims?"],
  map: ["dimensions?", "to_apply"],
  scan: ["dimensions", "num_carries", "is_reverse?", "is_associative?", "to_apply"],
  "ragged-all-to-all": ["channel_id?", "replica_groups?"],
  "collective-broadcast": ["channel_id?", "replica_groups?"],
  abs: [],
  negate: [],
  sign: [],
  exponential: [],
  "exponential-minus-one": [],
  log: [],
  "log-plus-one": [],
  sqrt: [],
  rsqrt: [],
  cbrt: [],
  tanh: [],
  logistic: [],
  sine: [],
  cosine: [],
  tan: [],
  erf: [],
  floor: [],
  ceil: [],
  "round-nearest-afz": [],
  "round-nearest-even": [],
  "is-finite": [],
  not: [],
  copy: [],
  convert: [],
  "bitcast-convert": [],
  add: [],
  subtract: [],
  multiply: [],
  divide: [],
  remainder: [],
  power: [],
  maximum: [],
  minimum: [],
  atan2: [],
  and: [],
  or: [],
  xor: [],
  "shift-left": [],
  "shift-right-arithmetic": [],
  "shift-right-logical": [],
  compare: ["direction", "type?"],
  select: [],
  clamp: [],
  broadcast: ["dimensions"],
  reshape: [],
  bitcast: [],
  transpose: ["dimensions"],
  slice: ["slice"],
  "dynamic-slice": ["dynamic_slice_sizes"],
  "dynamic-update-slice": [],
  concatenate: ["dimensions"],
  pad: ["padding"],
  reverse: ["dimensions"],
  dot: [...DOT_DIMS, "algorithm?"],
  convolution: ["window?", "dim_labels", "feature_group_count?", "batch_group_count?"],
  reduce: ["dimensions", "to_apply"],
  "reduce-window": ["window", "to_apply"],
  gather: [
    "offset_dims",
    "collapsed_slice_dims",
    "start_index_map",
    "operand_batching_dims?",
    "start_indices_batching_dims?",
    "index_vector_dim",
    "slice_sizes",
    "indices_are_sorted?",
  ],
  scatter: [
    "update_window_dims",
    "inserted_window_dims",
    "scatter_dims_to_operand_dims",
    "input_batching_dims?",
    "scatter_indices_batching_dims?",
    "index_vector_dim",
    "indices_are_sorted?",
    "unique_indices?",
    "to_apply",
  ],
  sort: ["dimensions", "is_stable?", "to_apply"],
  tuple: [],
  "get-tuple-element": ["index"],
  fusion: ["kind", "calls", "output_to_operand_aliasing?"],
  call: ["to_apply", "is_composite?"],
  while: ["condition", "body"],
  conditional: ["true_computation?", "false_computation?", "branch_computations?"],
  "get-dimension-size": ["dimensions"],
  "set-dimension-size": ["dimensions"],
  "all-reduce": ALL_REDUCE,
  "all-reduce-start": ALL_REDUCE,
  "all-reduce-done": [],
  "all-gather": ALL_GATHER,
  "all-gather-start": ALL_GATHER,
  "all-gather-done": [],
  "reduce-scatter": [...ALL_GATHER, "to_apply"],
  "all-to-all": ["channel_id?", "replica_groups?", "dimensions?", "constrain_layout?"],
  "collective-permute": PERMUTE,
  "collective-permute-start": PERMUTE,
  "collective-permute-done": [],
  "async-start": ["async_execution_thread?", "calls", "output_to_operand_aliasing?"],
  "async-update": ["async_execution_thread?", "calls?"],
  "async-done": ["async_execution_thread?", "calls?"],
  "custom-call": [
    "custom_call_target",
    "custom_call_has_side_effect?",
    "output_to_operand_aliasing?",
    "api_version?",
    "operand_layout_constraints?",
    "called_computations?",
  ],
} as const satisfies { [K in Opcode]: readonly AttrSlot[] };

/** Splits a slot into its key and whether it is optional. */
export function slotKey(slot: AttrSlot): { key: AttrKey; optional: boolean } {
  return slot.endsWith("?")
    ? { key: slot.slice(0, -1) as AttrKey, optional: true }
    : { key: slot as AttrKey, optional: false };
}

// ---- attribute values ---------------------------------------------------------------------

/** A printed attribute value; `isDefault` values of optional attributes are left out. */
interface Printed {
  text: string;
  isDefault: boolean;
}

const ints = (xs: readonly number[] | undefined): Printed | undefined =>
  xs === undefined ? undefined : { text: `{${xs.join(",")}}`, isDefault: xs.length === 0 };
const int = (x: number | undefined, dflt?: number): Printed | undefined =>
  x === undefined ? undefined : { text: String(x), isDefault: x === dflt };
const bool = (x: boolean | undefined): Printed | undefined =>
  x === undefined ? undefined : { text: String(x), isDefault: !x };
const word = (x: string | undefined): Printed | undefined =>
  x === undefined ? undefined : { text: x, isDefault: false };
const comp = (c: Computation | undefined, n: Names): Printed | undefined =>
  c === undefined ? undefined : { text: `%${n.comp(c)}`, isDefault: false };

/** XLA's Comparison::DefaultComparisonType: FLOAT for floats, SIGNED for s*, else UNSIGNED. */
function isDefaultCompareType(instr: Instruction): boolean {
  const t = instr.operands[0]?.shape;
  if (t === undefined || t.kind !== "array") return false;
  const ctype = instr.attrs.comparisonType;
  if (isFloatType(t.type)) return ctype === "FLOAT";
  return ctype === (t.type.startsWith("s") ? "SIGNED" : "UNSIGNED");
}

/** True when a conditional is printed in the `true_computation=, false_computation=` form. */
export function isPredConditional(instr: Instruction): boolean {
  const p = instr.operands[0]?.shape;
  return (
    instr.opcode === "conditional" &&
    instr.called.length === 2 &&
    p !== undefined &&
    p.kind === "array" &&
    p.type === "pred"
  );
}

const ATTR_PRINTERS = {
  iota_dimension: (i) => int(i.attrs.iotaDimension),
  dimensions: (i) => ints(i.attrs.dimensions),
  direction: (i) => word(i.attrs.direction),
  type: (i) => word(i.attrs.comparisonType),
  slice: (i) => (i.attrs.slice ? { text: printSlice(i.attrs.slice), isDefault: false } : undefined),
  dynamic_slice_sizes: (i) => ints(i.attrs.dynamicSliceSizes),
  padding: (i) =>
    i.attrs.padding ? { text: printPadding(i.attrs.padding), isDefault: false } : undefined,
  lhs_batch_dims: (i) => ints(i.attrs.dot?.lhsBatch ?? []),
  lhs_contracting_dims: (i) => ints(i.attrs.dot?.lhsContracting ?? []),
  rhs_batch_dims: (i) => ints(i.attrs.dot?.rhsBatch ?? []),
  rhs_contracting_dims: (i) => ints(i.attrs.dot?.rhsContracting ?? []),
  window: (i) => {
    const w = i.attrs.window ?? [];
    return { text: printWindow(w), isDefault: w.length === 0 };
  },
  dim_labels: (i) => word(i.attrs.convDims ? convDimsToLabels(i.attrs.convDims) : undefined),
  feature_group_count: (i) => int(i.attrs.featureGroupCount, 1),
  batch_group_count: (i) => int(i.attrs.batchGroupCount, 1),
  offset_dims: (i) => ints(i.attrs.gather?.offsetDims),
  collapsed_slice_dims: (i) => ints(i.attrs.gather?.collapsedSliceDims),
  start_index_map: (i) => ints(i.attrs.gather?.startIndexMap),
  operand_batching_dims: (i) => ints(i.attrs.gather?.operandBatchingDims),
  start_indices_batching_dims: (i) => ints(i.attrs.gather?.startIndicesBatchingDims),
  update_window_dims: (i) => ints(i.attrs.scatter?.updateWindowDims),
  inserted_window_dims: (i) => ints(i.attrs.scatter?.insertedWindowDims),
  scatter_dims_to_operand_dims: (i) => ints(i.attrs.scatter?.scatterDimsToOperandDims),
  input_batching_dims: (i) => ints(i.attrs.scatter?.inputBatchingDims),
  scatter_indices_batching_dims: (i) => ints(i.attrs.scatter?.scatterIndicesBatchingDims),
  index_vector_dim: (i) =>
    int(i.opcode === "scatter" ? i.attrs.scatter?.indexVectorDim : i.attrs.gather?.indexVectorDim),
  slice_sizes: (i) => ints(i.attrs.gatherSliceSizes),
  indices_are_sorted: (i) => bool(i.attrs.indicesAreSorted),
  unique_indices: (i) => bool(i.attrs.uniqueIndices),
  is_stable: (i) => bool(i.attrs.isStable),
  index: (i) => int(i.attrs.tupleIndex),
  kind: (i) => word(i.attrs.fusionKind),
  to_apply: (i, n) => comp(i.called[0], n),
  calls: (i, n) => comp(i.called[0], n),
  condition: (i, n) => comp(i.called[0], n),
  body: (i, n) => comp(i.called[1], n),
  true_computation: (i, n) => (isPredConditional(i) ? comp(i.called[0], n) : undefined),
  false_computation: (i, n) => (isPredConditional(i) ? comp(i.called[1], n) : undefined),
  branch_computations: (i, n) =>
    isPredConditional(i)
      ? undefined
      : { text: `{${i.called.map((c) => `%${n.comp(c)}`).join(", ")}}`, isDefault: false },
  custom_call_target: (i) =>
    i.attrs.customCallTarget === undefined
      ? undefined
      : { text: quoteString(i.attrs.customCallTarget), isDefault: false },
  called_computations: (i, n) =>
    i.opcode === "custom-call" && i.called.length > 0
      ? { text: `{${i.called.map((c) => `%${n.comp(c)}`).join(", ")}}`, isDefault: false }
      : undefined,
  custom_call_has_side_effect: (i) => bool(i.attrs.customCallHasSideEffect),
  output_to_operand_aliasing: (i) =>
    i.attrs.outputToOperandAliasing === undefined
      ? undefined
      : {
          text: printAliasing(i.attrs.outputToOperandAliasing),
          isDefault: i.attrs.outputToOperandAliasing.length === 0,
        },
  api_version: (i) => word(i.attrs.apiVersion),
  operand_layout_constraints: (i, _n, layouts) => {
    const shapes = i.attrs.operandLayoutConstraints;
    if (shapes === undefined) return undefined;
    const text = `{${shapes.map((s) => shapeToString(s, layouts)).join(", ")}}`;
    return { text, isDefault: false };
  },
  algorithm: (i) => word(i.attrs.dotAlgorithm ?? i.attrs.rngAlgorithm),
  is_composite: (i) => bool(i.attrs.isComposite),
  async_execution_thread: (i) =>
    i.attrs.asyncExecutionThread === undefined
      ? undefined
      : { text: quoteString(i.attrs.asyncExecutionThread), isDefault: false },
  channel_id: (i) => int(i.attrs.channelId),
  replica_groups: (i) =>
    i.attrs.replicaGroups === undefined
      ? undefined
      : { text: printGroups(i.attrs.replicaGroups), isDefault: i.attrs.replicaGroups.length === 0 },
  source_target_pairs: (i) =>
    i.attrs.sourceTargetPairs === undefined
      ? undefined
      : { text: printGroups(i.attrs.sourceTargetPairs), isDefault: false },
  constrain_layout: (i) => bool(i.attrs.constrainLayout),
  use_global_device_ids: (i) => bool(i.attrs.useGlobalDeviceIds),
  is_host_transfer: (i) => bool(i.attrs.isHostTransfer),
  infeed_config: (i) =>
    i.attrs.infeedConfig === undefined
      ? undefined
      : { text: quoteString(i.attrs.infeedConfig), isDefault: i.attrs.infeedConfig === "" },
  outfeed_shape: (i, _n, layouts) =>
    i.attrs.outfeedShape === undefined
      ? undefined
      : { text: shapeToString(i.attrs.outfeedShape, layouts), isDefault: false },
  outfeed_config: (i) =>
    i.attrs.outfeedConfig === undefined
      ? undefined
      : { text: quoteString(i.attrs.outfeedConfig), isDefault: i.attrs.outfeedConfig === "" },
  exponent_bits: (i) => int(i.attrs.exponentBits),
  mantissa_bits: (i) => int(i.attrs.mantissaBits),
  distribution: (i) => word(i.attrs.rngDistribution),
  cross_program_prefetch_index: (i) => int(i.attrs.crossProgramPrefetchIndex),
  lhs_ragged_dims: (i) => ints(i.attrs.lhsRaggedDims),
  rhs_group_dims: (i) => ints(i.attrs.rhsGroupDims),
  num_carries: (i) => int(i.attrs.numCarries),
  is_reverse: (i) => bool(i.attrs.isReverse),
  // Printed whenever it is set, false too (XLA's tri-state: absent is unspecified).
  is_associative: (i) =>
    i.attrs.isAssociative === undefined
      ? undefined
      : { text: String(i.attrs.isAssociative), isDefault: false },
  "control-predecessors": (i, n) => {
    const names = i.attrs.controlPredecessors;
    if (names === undefined) return undefined;
    const byName = (s: string) => i.parent.instructions.find((x) => x.name === s);
    const text = names.map((s) => {
      const x = byName(s);
      return `%${x ? n.instr(x) : s}`;
    });
    return { text: `{${text.join(", ")}}`, isDefault: names.length === 0 };
  },
  sharding: (i) =>
    i.attrs.sharding === undefined ? undefined : { text: i.attrs.sharding, isDefault: false },
  frontend_attributes: (i) =>
    i.attrs.frontendAttributes === undefined
      ? undefined
      : { text: printFrontendAttributes(i.attrs.frontendAttributes), isDefault: false },
  backend_config: (i) =>
    i.attrs.backendConfig === undefined
      ? undefined
      : { text: quoteString(i.attrs.backendConfig), isDefault: i.attrs.backendConfig === "" },
  metadata: (i) => {
    const text = printMetadata(i.metadata);
    return { text, isDefault: text === "{}" };
  },
} satisfies {
  [K in AttrKey]: (
    i: Instruction,
    n: Names,
    layouts: boolean | "non-default",
  ) => Printed | undefined;
};

/** `{{}: (0, {}), {1}: (2, {0})}`: output shape index -> (operand, operand shape index). */
export function printAliasing(pairs: readonly OutputOperandAlias[]): string {
  const idx = (xs: readonly number[]) => `{${xs.join(",")}}`;
  const pair = (a: OutputOperandAlias) =>
    `${idx(a.output)}: (${a.operand}, ${idx(a.operandIndex)})`;
  return `{${pairs.map(pair).join(", ")}}`;
}

/** `{{0,1},{2,3}}`: replica groups and source-target pairs. */
export function printGroups(groups: readonly (readonly number[])[]): string {
  return `{${groups.map((g) => `{${g.join(",")}}`).join(",")}}`;
}

/** `{[0:2], [1:9:2]}`: stride shown only when it is not 1. */
export function printSlice(dims: readonly SliceDim[]): string {
  const parts = dims.map(
    (d) => `[${d.start}:${d.limit}${d.stride !== 1 ? `:${d.stride}` : ""}]`,
  );
  return `{${parts.join(", ")}}`;
}

/** `0_1x2_2`; every dim gets `_interior` when any interior padding is not 0. */
export function printPadding(dims: readonly PaddingDim[]): string {
  const interior = dims.some((d) => d.interior !== 0);
  return dims
    .map((d) => `${d.low}_${d.high}${interior ? `_${d.interior}` : ""}`)
    .join("x");
}

/** `{size=3x3 stride=2x2 pad=1_1x1_1 ...}`; each part only when not all-default. */
export function printWindow(dims: readonly WindowDim[]): string {
  if (dims.length === 0) return "{}";
  const parts = [`size=${dims.map((d) => d.size).join("x")}`];
  const part = (name: string, show: boolean, f: (d: WindowDim) => string) => {
    if (show) parts.push(`${name}=${dims.map(f).join("x")}`);
  };
  part("stride", dims.some((d) => d.stride !== 1), (d) => String(d.stride));
  part(
    "pad",
    dims.some((d) => d.padLow !== 0 || d.padHigh !== 0),
    (d) => `${d.padLow}_${d.padHigh}`,
  );
  part("lhs_dilate", dims.some((d) => d.baseDilation !== 1), (d) => String(d.baseDilation));
  part("rhs_dilate", dims.some((d) => d.windowDilation !== 1), (d) => String(d.windowDilation));
  part("rhs_reversal", dims.some((d) => d.windowReversal), (d) => (d.windowReversal ? "1" : "0"));
  return `{${parts.join(" ")}}`;
}

/** `{op_type="sum" op_name="a/b" source_file="m.ts" source_line=12 source_column=5}`. */
export function printMetadata(m: Metadata): string {
  const parts: string[] = [];
  if (m.opType !== undefined) parts.push(`op_type=${quoteString(m.opType)}`);
  if (m.opName !== undefined) parts.push(`op_name=${quoteString(m.opName)}`);
  if (m.sourceFile !== undefined) parts.push(`source_file=${quoteString(m.sourceFile)}`);
  if (m.sourceLine !== undefined) parts.push(`source_line=${m.sourceLine}`);
  if (m.sourceColumn !== undefined) parts.push(`source_column=${m.sourceColumn}`);
  return `{${parts.join(" ")}}`;
}

/** A double-quoted string with C escapes (`\"`, `\\`, `\n`, `\t`, octal for other controls). */
/**
 * `{a="x",b={n = 1 : i32}}`: XLA's text of frontend attributes; a value that is itself a braced
 * text (XLA's composite.attributes) is written as is, every other one quoted.
 */
export function printFrontendAttributes(attrs: readonly (readonly [string, string])[]): string {
  const v = (s: string) => (s.startsWith("{") && s.endsWith("}") ? s : quoteString(s));
  return `{${attrs.map(([k, x]) => `${k}=${v(x)}`).join(",")}}`;
}

export function quoteString(s: string): string {
  let out = '"';
  for (const ch of s) {
    const c = ch.codePointAt(0)!;
    if (ch === '"') out += '\\"';
    else if (ch === "\\") out += "\\\\";
    else if (ch === "\n") out += "\\n";
    else if (ch === "\r") out += "\\r";
    else if (ch === "\t") out += "\\t";
    else if (c < 0x20 || c === 0x7f) out += `\\${c.toString(8).padStart(3, "0")}`;
    else out += ch;
  }
  return out + '"';
}

// ---- literals -----------------------------------------------------------------------------

/** Significant digits (no trailing zeros) and decimal exponent of `|v|` rounded to p digits. */
function digitsOf(v: number, p: number): { digits: string; exp: number } {
  const s = Math.abs(v).toExponential(p - 1);
  const e = s.indexOf("e");
  let end = e;
  while (end > 1 && (s[end - 1] === "0" || s[end - 1] === ".")) end--;
  return { digits: s[0]! + s.slice(2, end), exp: Number(s.slice(e + 1)) };
}

/**
 * The shortest text that reads back (rounded to `type`) as exactly `v`, in C's `%g` style:
 * `1.5`, `0.1`, `100`, `65504`, `16777216`, `1e+10`, `1e-05`, `inf`, `-inf`, `nan`, `-0`. As
 * `%g`, exponent form is used below 1e-4, and from 1e6 up unless every integer digit is needed.
 */
export function formatFloat(v: number, type: ElementType = "f32"): string {
  if (Number.isNaN(v)) return "nan";
  if (v === Infinity) return "inf";
  if (v === -Infinity) return "-inf";
  if (v === 0) return Object.is(v, -0) ? "-0" : "0";
  const target = toStored(type, v) as number;
  if (Number.isInteger(target) && Math.abs(target) < 1e6) return String(target);
  const sign = v < 0 ? "-" : "";
  const readsBack = (p: number) => toStored(type, Number(v.toExponential(p - 1))) === target;
  // The nearest (p+1)-digit decimal is never farther from v than the nearest p-digit one, so
  // "reads back" holds from some p on: binary search it, up to the type's round-trip digits.
  let lo = 1;
  let hi = type === "f16" ? 5 : type === "bf16" ? 4 : isSmallFloatType(type) ? 3 : 9;
  if (!readsBack(hi)) hi = 17;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (readsBack(mid)) hi = mid;
    else lo = mid + 1;
  }
  const p = lo;
  let { digits, exp } = digitsOf(v, p);
  if (exp < -4 || exp >= Math.max(p, 6)) {
    const frac = digits.length > 1 ? `.${digits.slice(1)}` : "";
    const e = `${exp < 0 ? "-" : "+"}${String(Math.abs(exp)).padStart(2, "0")}`;
    return `${sign}${digits[0]}${frac}e${e}`;
  }
  if (exp >= digits.length) {
    // Fixed form would pad with zeros (`65500`): print every integer digit instead (`65504`).
    const whole = digitsOf(v, exp + 1);
    if (whole.exp === exp && readsBack(exp + 1)) digits = whole.digits;
  }
  if (exp < 0) return `${sign}0.${"0".repeat(-exp - 1)}${digits}`;
  const int = digits.slice(0, exp + 1).padEnd(exp + 1, "0");
  const frac = digits.slice(exp + 1);
  return `${sign}${int}${frac ? `.${frac}` : ""}`;
}

/**
 * A stored NaN as XLA prints it: `nan` or `-nan` for the quiet NaN, `nan(0x7f)` with another
 * payload (f32 and f64; f16 and bf16 keep only the sign here).
 */
function formatNaN(lit: Literal, i: number): string {
  const data = lit.data;
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  if (lit.type === "f64") {
    const bits = view.getBigUint64(i * 8, true);
    const sign = bits >> 63n ? "-" : "";
    const payload = bits & ((1n << 52n) - 1n);
    return payload === 1n << 51n ? `${sign}nan` : `${sign}nan(0x${payload.toString(16)})`;
  }
  const bits = view.getUint32(i * 4, true);
  const sign = bits >>> 31 ? "-" : "";
  const payload = bits & 0x7fffff;
  if (lit.type !== "f32" || payload === 0x400000) return `${sign}nan`;
  return `${sign}nan(0x${payload.toString(16)})`;
}

function formatElement(lit: Literal, i: number): string {
  const v = lit.data[i]!;
  switch (lit.type) {
    case "pred":
      return v !== 0 ? "true" : "false";
    case "s4":
    case "s8":
    case "s16":
    case "s32":
    case "s64":
    case "u4":
    case "u8":
    case "u16":
    case "u32":
    case "u64":
      return v.toString();
    case "f16":
    case "bf16":
    case "f32":
    case "f64":
    case "f8e5m2":
    case "f8e4m3":
    case "f8e3m4":
    case "f8e4m3fn":
    case "f8e4m3fnuz":
    case "f8e5m2fnuz":
    case "f8e4m3b11fnuz":
      return Number.isNaN(v) ? formatNaN(lit, i) : formatFloat(Number(v), lit.type);
    case "token":
      throw new Error("a token has no literal text");
    default: {
      const never: never = lit.type;
      throw new Error(`unknown element type ${String(never)}`);
    }
  }
}

/** XLA's one-line literal text: `1.5`, `{1, 2}`, `{ { 1, 2 }, { 3, 4 } }`. */
export function printLiteral(lit: Literal): string {
  const rank = lit.dims.length;
  if (rank === 0) return formatElement(lit, 0);
  if (rank === 1) {
    const xs: string[] = [];
    for (let i = 0; i < lit.data.length; i++) xs.push(formatElement(lit, i));
    return `{${xs.join(", ")}}`;
  }
  const level = (dim: number, offset: number, stride: number): string => {
    const n = lit.dims[dim]!;
    if (n === 0) return "{}";
    const inner = stride / n;
    const xs: string[] = [];
    for (let k = 0; k < n; k++) {
      xs.push(
        dim === rank - 1
          ? formatElement(lit, offset + k)
          : level(dim + 1, offset + k * inner, inner),
      );
    }
    return `{ ${xs.join(", ")} }`;
  };
  return level(0, 0, lit.data.length);
}

// ---- names --------------------------------------------------------------------------------

const VALID_NAME = /^[A-Za-z0-9_.-]+$/;

/** A name in the text's character set: other characters become `_`, as XLA sanitizes names. */
export function sanitizeName(name: string): string {
  return name === "" ? "_" : name.replace(/[^A-Za-z0-9_.-]/g, "_");
}

/**
 * The printed names of a module's instructions and computations: their own names when those are
 * valid in the text (always, for names the IR makes), else a sanitized name no other
 * instruction (computation) of the module has, so the text still parses.
 */
class Names {
  private readonly printed = new Map<Instruction | Computation, string>();
  private readonly takenInstr = new Set<string>();
  private readonly takenComp = new Set<string>();

  constructor(module: Module | undefined, canonical = false) {
    if (!module) return;
    if (canonical) {
      let v = 0;
      canonicalComputationOrder(module).forEach((c, k) => {
        this.printed.set(c, `c${k}`);
        for (const i of canonicalInstructionOrder(c)) this.printed.set(i, `v${v++}`);
      });
      return;
    }
    for (const c of module.computations) {
      if (VALID_NAME.test(c.name)) this.takenComp.add(c.name);
      for (const i of c.instructions) if (VALID_NAME.test(i.name)) this.takenInstr.add(i.name);
    }
  }

  instr(i: Instruction): string {
    return this.name(i, i.name, this.takenInstr);
  }

  comp(c: Computation): string {
    return this.name(c, c.name, this.takenComp);
  }

  private name(key: Instruction | Computation, name: string, taken: Set<string>): string {
    const known = this.printed.get(key);
    if (known !== undefined) return known;
    if (VALID_NAME.test(name)) return name;
    const base = sanitizeName(name);
    let out = base;
    for (let k = 1; taken.has(out); k++) out = `${base}.${k}`;
    taken.add(out);
    this.printed.set(key, out);
    return out;
  }
}

// ---- instructions, computations, modules --------------------------------------------------

/** `[ROOT ]%name = shape opcode(operands), attrs` (no indentation). */
export function printInstruction(instr: Instruction, options: PrintOptions = {}): string {
  const canonical = options.canonicalNames ?? false;
  const names = new Names(canonical ? instr.parent.parent : undefined, canonical);
  return instructionText(instr, options, names);
}

function instructionText(instr: Instruction, options: PrintOptions, n: Names): string {
  const root = instr.parent.instructions.length > 0 && instr.isRoot ? "ROOT " : "";
  const layouts = options.defaults === false ? "non-default" : true;
  let out = `${root}%${n.instr(instr)} = ${shapeToString(instr.shape, layouts)} ${instr.opcode}`;
  if (instr.opcode === "parameter") {
    out += `(${instr.attrs.parameterNumber ?? 0})`;
  } else if (instr.opcode === "constant") {
    out += `(${instr.attrs.literal ? printLiteral(instr.attrs.literal) : ""})`;
  } else {
    const ops = instr.operands.map((op) => `${shapeToString(op.shape, layouts)} %${n.instr(op)}`);
    out += `(${ops.join(", ")})`;
  }
  const attrs: string[] = [];
  const slots: readonly AttrSlot[] = TEXT_ATTRS[instr.opcode];
  for (const slot of slots) {
    const { key, optional } = slotKey(slot);
    const p = ATTR_PRINTERS[key](instr, n, layouts);
    if (p === undefined || (optional && p.isDefault)) continue;
    if (key === "type" && options.defaults === false && isDefaultCompareType(instr)) continue;
    attrs.push(`${key}=${p.text}`);
  }
  const extra: AttrKey[] = [
    "sharding",
    "control-predecessors",
    "frontend_attributes",
    "backend_config",
  ];
  if (options.metadata ?? true) extra.push("metadata");
  for (const key of extra) {
    const p = ATTR_PRINTERS[key](instr, n, layouts);
    if (p !== undefined && !p.isDefault) attrs.push(`${key}=${p.text}`);
  }
  return attrs.length > 0 ? `${out}, ${attrs.join(", ")}` : out;
}

/**
 * The instructions in print order: the stored order when it is topological (the invariant),
 * else a stable post-order so the text still defines every operand before its use.
 */
export function instructionPrintOrder(c: Computation): readonly Instruction[] {
  const list = c.instructions;
  const seen = new Set<Instruction>();
  let topological = true;
  for (const i of list) {
    if (i.operands.some((op) => !seen.has(op))) {
      topological = false;
      break;
    }
    seen.add(i);
  }
  if (topological) return list;
  const out: Instruction[] = [];
  const done = new Set<Instruction>();
  const visiting = new Set<Instruction>();
  const visit = (root: Instruction) => {
    // Iterative DFS: deep chains must not overflow the stack.
    const stack: { i: Instruction; next: number }[] = [{ i: root, next: 0 }];
    visiting.add(root);
    while (stack.length > 0) {
      const top = stack[stack.length - 1]!;
      const op = top.i.operands[top.next++];
      if (op === undefined) {
        stack.pop();
        visiting.delete(top.i);
        done.add(top.i);
        out.push(top.i);
      } else if (!done.has(op) && !visiting.has(op) && op.parent === c) {
        visiting.add(op);
        stack.push({ i: op, next: 0 });
      }
    }
  };
  for (const i of list) if (!done.has(i)) visit(i);
  return out;
}

/** `%name (p: f32[2]) -> f32[2] {` ... `}` with two-space indented instructions. */
export function printComputation(c: Computation, options: PrintOptions = {}): string {
  return computationText(c, options, new Names(c.parent, options.canonicalNames));
}

function computationText(c: Computation, options: PrintOptions, n: Names): string {
  const params = c.parameters.map((p) => `${n.instr(p)}: ${shapeToString(p.shape, false)}`);
  const result = c.instructions.length > 0 ? shapeToString(c.root.shape, false) : "()";
  const head = `${c.isEntry ? "ENTRY " : ""}%${n.comp(c)} (${params.join(", ")}) -> ${result} {`;
  const order = options.canonicalNames ? canonicalInstructionOrder(c) : instructionPrintOrder(c);
  const lines = order.map((i) => `  ${instructionText(i, options, n)}`);
  return [head, ...lines, "}"].join("\n");
}

/**
 * Computations in print order: non-entry computations in post-order of the call graph (callees
 * first, ties broken by Module.computations order), then the entry.
 */
export function computationPrintOrder(module: Module): Computation[] {
  const entry = module.entryOrUndefined;
  const out: Computation[] = [];
  const state = new Map<Computation, "visiting" | "done">();
  const visit = (c: Computation) => {
    if (state.has(c) || c === entry || c.parent !== module) return;
    state.set(c, "visiting");
    for (const callee of c.calledComputations) visit(callee);
    state.set(c, "done");
    out.push(c);
  };
  for (const c of module.computations) visit(c);
  if (entry) out.push(entry);
  return out;
}

/**
 * The order canonical text uses, independent of how independent instructions happen to be
 * stored: parameters by number, then a post-order walk from the ROOT following operands in
 * order, then instructions the ROOT does not reach, in stored order (still topological).
 */
export function canonicalInstructionOrder(c: Computation): Instruction[] {
  const memo = canonicalMemo?.get(c);
  if (memo) return memo;
  const out: Instruction[] = [...c.parameters];
  const done = new Set<Instruction>(out);
  if (c.instructions.length > 0) {
    const stack: { i: Instruction; next: number }[] = [{ i: c.root, next: 0 }];
    while (stack.length > 0) {
      const top = stack[stack.length - 1]!;
      if (done.has(top.i)) {
        stack.pop();
        continue;
      }
      const op = top.i.operands[top.next++];
      if (op === undefined) {
        stack.pop();
        done.add(top.i);
        out.push(top.i);
      } else if (!done.has(op) && op.parent === c) {
        stack.push({ i: op, next: 0 });
      }
    }
  }
  for (const i of instructionPrintOrder(c)) if (!done.has(i)) out.push(i);
  canonicalMemo?.set(c, out);
  return out;
}

/** Canonical orders computed during one canonical print (each is needed three times). */
let canonicalMemo: Map<Computation, Instruction[]> | undefined;

/**
 * Computations in canonical order: a post-order walk of the call graph from the entry (callees
 * in the order their callers' canonical instructions call them), then unreachable ones.
 */
export function canonicalComputationOrder(module: Module): Computation[] {
  const out: Computation[] = [];
  const seen = new Set<Computation>();
  const visit = (c: Computation) => {
    if (seen.has(c) || c.parent !== module) return;
    seen.add(c);
    for (const i of canonicalInstructionOrder(c)) for (const k of i.called) visit(k);
    out.push(c);
  };
  const entry = module.entryOrUndefined;
  if (entry) visit(entry);
  for (const c of computationPrintOrder(module)) visit(c);
  return out;
}

/** The whole module in HLO text, ending with a newline. */
export function printHlo(module: Module, options: PrintOptions = {}): string {
  if (options.canonicalNames && canonicalMemo === undefined) {
    canonicalMemo = new Map();
    try {
      return printHlo(module, options);
    } finally {
      canonicalMemo = undefined;
    }
  }
  const n = new Names(module, options.canonicalNames);
  const order = options.canonicalNames
    ? canonicalComputationOrder(module)
    : computationPrintOrder(module);
  const comps = order.map((c) => computationText(c, options, n));
  const name = options.canonicalNames ? "m" : sanitizeName(module.name);
  return [`HloModule ${name}`, ...comps].join("\n\n") + "\n";
}
