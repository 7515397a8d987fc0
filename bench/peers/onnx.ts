// A minimal ONNX model writer for the peer benchmarks: just enough of onnx.proto (ModelProto,
// GraphProto, NodeProto, AttributeProto, ValueInfoProto, TensorProto; the field numbers are
// ONNX's own) to express the benchmark graphs as float32 programs for onnxruntime-node (with
// int32, int64 and bool values where a translated Kiln graph carries them). Writing
// the bytes here, from the same shapes the other runtimes use, means no model file has to be
// produced elsewhere or downloaded: ORT gets the model as a buffer. Weights are graph inputs,
// not initializers, so every runtime is fed the very same arrays.

import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";

/** One ONNX node: `op` from the default domain, with int / ints / float attributes. */
export interface OnnxNode {
  op: string;
  inputs: string[];
  outputs: string[];
  attrs?: Record<string, number | number[]>;
  /** Attributes that must be written as floats even when the value is an integer. */
  floatAttrs?: string[];
}

/** Element types of graph inputs and outputs (absent: float32). */
export type OnnxType = "float32" | "int32" | "int64" | "bool";

export interface OnnxGraph {
  name: string;
  /** Graph inputs, fed at run time (float32 unless `type` says otherwise). */
  inputs: { name: string; shape: number[]; type?: OnnxType }[];
  /** Graph outputs (float32 unless `type` says otherwise). */
  outputs: { name: string; shape: number[]; type?: OnnxType }[];
  /**
   * Constants (initializers); scalars have shape []. The element type follows the array:
   * float32, int64 (shapes for Reshape, indices for Gather), int32, or bool (a Uint8Array of
   * 0/1).
   */
  constants?: {
    name: string;
    shape: number[];
    values: Float32Array | BigInt64Array | Int32Array | Uint8Array;
  }[];
  nodes: OnnxNode[];
}

const FLOAT = 1; // TensorProto.DataType.FLOAT
const INT32 = 6; // TensorProto.DataType.INT32
const INT64 = 7; // TensorProto.DataType.INT64
const BOOL = 9; // TensorProto.DataType.BOOL
/** TensorProto.DataType of each OnnxType (the `to` of a Cast node, too). */
export const ONNX_DATA_TYPE = { float32: FLOAT, int32: INT32, int64: INT64, bool: BOOL } as const;
const ATTR_FLOAT = 1;
const ATTR_INT = 2;
const ATTR_INTS = 7;

function valueInfo(
  w: BinaryWriter,
  field: number,
  name: string,
  shape: number[],
  type: OnnxType = "float32",
): void {
  w.tag(field, WireType.LengthDelimited).fork();
  w.tag(1, WireType.LengthDelimited).string(name);
  w.tag(2, WireType.LengthDelimited).fork(); // TypeProto
  w.tag(1, WireType.LengthDelimited).fork(); // TypeProto.Tensor
  w.tag(1, WireType.Varint).int32(ONNX_DATA_TYPE[type]);
  w.tag(2, WireType.LengthDelimited).fork(); // TensorShapeProto
  for (const d of shape) {
    w.tag(1, WireType.LengthDelimited).fork().tag(1, WireType.Varint).int64(d).join();
  }
  w.join().join().join().join();
}

function attribute(w: BinaryWriter, name: string, value: number | number[], asFloat: boolean) {
  w.tag(5, WireType.LengthDelimited).fork();
  w.tag(1, WireType.LengthDelimited).string(name);
  if (Array.isArray(value)) {
    for (const v of value) w.tag(8, WireType.Varint).int64(v);
    w.tag(20, WireType.Varint).int32(ATTR_INTS);
  } else if (asFloat || !Number.isInteger(value)) {
    w.tag(2, WireType.Bit32).float(value);
    w.tag(20, WireType.Varint).int32(ATTR_FLOAT);
  } else {
    w.tag(3, WireType.Varint).int64(value);
    w.tag(20, WireType.Varint).int32(ATTR_INT);
  }
  w.join();
}

/** An int64 constant (ONNX wants shapes, axes and indices as int64 tensors). */
export function int64(name: string, values: number[], shape = [values.length]) {
  return { name, shape, values: BigInt64Array.from(values, (v) => BigInt(v)) };
}

/** A float32 constant. */
export function float32(name: string, values: number[], shape = [values.length]) {
  return { name, shape, values: Float32Array.from(values) };
}

/** The serialized ModelProto (IR version 8, default-domain opset 17). */
export function onnxModel(g: OnnxGraph): Uint8Array {
  const w = new BinaryWriter();
  w.tag(1, WireType.Varint).int64(8); // ir_version
  w.tag(2, WireType.LengthDelimited).string("kiln-bench"); // producer_name
  w.tag(7, WireType.LengthDelimited).fork(); // graph
  g.nodes.forEach((n, i) => {
    w.tag(1, WireType.LengthDelimited).fork();
    for (const x of n.inputs) w.tag(1, WireType.LengthDelimited).string(x);
    for (const y of n.outputs) w.tag(2, WireType.LengthDelimited).string(y);
    w.tag(3, WireType.LengthDelimited).string(`${n.op.toLowerCase()}_${i}`);
    w.tag(4, WireType.LengthDelimited).string(n.op);
    for (const [k, v] of Object.entries(n.attrs ?? {})) {
      attribute(w, k, v, n.floatAttrs?.includes(k) ?? false);
    }
    w.join();
  });
  w.tag(2, WireType.LengthDelimited).string(g.name);
  for (const c of g.constants ?? []) {
    const count = c.shape.reduce((a, b) => a * b, 1);
    if (count !== c.values.length) {
      throw new Error(
        `onnxModel: constant '${c.name}' of shape [${c.shape.join(", ")}] needs ${count} ` +
          `values, got ${c.values.length}`,
      );
    }
    w.tag(5, WireType.LengthDelimited).fork();
    for (const d of c.shape) w.tag(1, WireType.Varint).int64(d);
    const v = c.values;
    const dataType =
      v instanceof BigInt64Array
        ? INT64
        : v instanceof Int32Array
          ? INT32
          : v instanceof Uint8Array
            ? BOOL
            : FLOAT;
    w.tag(2, WireType.Varint).int32(dataType);
    w.tag(8, WireType.LengthDelimited).string(c.name);
    const raw = new Uint8Array(c.values.buffer, c.values.byteOffset, c.values.byteLength);
    w.tag(9, WireType.LengthDelimited).bytes(raw);
    w.join();
  }
  for (const x of g.inputs) valueInfo(w, 11, x.name, x.shape, x.type);
  for (const y of g.outputs) valueInfo(w, 12, y.name, y.shape, y.type);
  w.join();
  w.tag(8, WireType.LengthDelimited).fork(); // opset_import
  w.tag(1, WireType.LengthDelimited).string("");
  w.tag(2, WireType.Varint).int64(17);
  w.join();
  return w.finish();
}
