// HLO → ONNX: a Kiln module (the graph lazy mode or compile() captures) as an opset-17 ONNX
// graph for onnxruntime-node, built from hlo_common.ts's lowering so ORT runs the same
// decomposition as tfjs and jax-js. Parameters become graph inputs `p0`, `p1`, ... in
// parameter order, typed as in the module (f32 float32, s32 int32, s64 int64, pred bool: feed
// an s64 parameter a BigInt64Array); constants and iotas become initializers; a tuple ROOT gives
// one output per element, `y0`, `y1`, ... Anything the lowering cannot express throws a
// TranslateError naming the instruction.

import type { ComparisonDirection } from "../../ir/attributes.ts";
import type { Module } from "../../ir/module.ts";
import {
  type BinaryKind,
  type HostArray,
  lowerModule,
  type PeerOps,
  type PeerType,
  prod,
  range,
  type ReduceKind,
  type UnaryKind,
} from "./hlo_common.ts";
import { int64, type OnnxGraph, type OnnxNode, type OnnxType, ONNX_DATA_TYPE } from "./onnx.ts";

const ONNX_TYPE = {
  f32: "float32",
  s32: "int32",
  s64: "int64",
  pred: "bool",
} as const satisfies Record<PeerType, OnnxType>;

/** The graph inputs' ONNX element types, in parameter order (what ort.Tensor needs). */
export function onnxInputTypes(module: Module): OnnxType[] {
  return lowerModule(module).params.map((p) => ONNX_TYPE[p.type]);
}

const UNARY_OP: Partial<Record<UnaryKind, string>> = {
  neg: "Neg",
  abs: "Abs",
  sign: "Sign",
  exp: "Exp",
  log: "Log",
  sqrt: "Sqrt",
  tanh: "Tanh",
  sigmoid: "Sigmoid",
  sin: "Sin",
  cos: "Cos",
  erf: "Erf",
  floor: "Floor",
  ceil: "Ceil",
  round: "Round",
  not: "Not",
};

const BINARY_OP = {
  add: "Add",
  sub: "Sub",
  mul: "Mul",
  div: "Div",
  max: "Max",
  min: "Min",
  pow: "Pow",
  and: "And",
  or: "Or",
} as const satisfies Record<BinaryKind, string>;

/** The ONNX graph computing `module`'s ENTRY computation. */
export function hloToOnnx(module: Module): OnnxGraph {
  const lowered = lowerModule(module);
  const nodes: OnnxNode[] = [];
  const constants: NonNullable<OnnxGraph["constants"]> = [];
  let counter = 0;
  const fresh = (base: string) => `${base}_${counter++}`;
  const node = (op: string, inputs: string[], attrs?: OnnxNode["attrs"]): string => {
    const out = fresh(op.toLowerCase());
    nodes.push(attrs ? { op, inputs, outputs: [out], attrs } : { op, inputs, outputs: [out] });
    return out;
  };
  const ints = (values: number[], shape = [values.length]): string => {
    const c = int64(fresh("i64"), values, shape);
    constants.push(c);
    return c.name;
  };
  const scalarOf = (type: PeerType, v: number): string => {
    const name = fresh("s");
    const values =
      type === "f32"
        ? Float32Array.of(v)
        : type === "s32"
          ? Int32Array.of(v)
          : type === "s64"
            ? BigInt64Array.of(BigInt(v))
            : Uint8Array.of(v !== 0 ? 1 : 0);
    constants.push({ name, shape: [], values });
    return name;
  };
  /** The last two dims swapped. */
  const swapLast = (x: string, rank: number): string => {
    const perm = range(rank);
    [perm[rank - 2], perm[rank - 1]] = [perm[rank - 1]!, perm[rank - 2]!];
    return node("Transpose", [x], { perm });
  };
  const reduce = (kind: ReduceKind, x: string, axes: number[]): string => {
    switch (kind) {
      case "sum":
        return node("ReduceSum", [x, ints(axes)], { keepdims: 0 });
      case "max":
        return node("ReduceMax", [x], { axes, keepdims: 0 });
      case "min":
        return node("ReduceMin", [x], { axes, keepdims: 0 });
      case "prod":
        return node("ReduceProd", [x], { axes, keepdims: 0 });
      case "all":
      case "any": {
        // No boolean reductions in ONNX: min / max over 0/1 as int32.
        const asInt = node("Cast", [x], { to: ONNX_DATA_TYPE.int32 });
        const op = kind === "all" ? "ReduceMin" : "ReduceMax";
        const r = node(op, [asInt], { axes, keepdims: 0 });
        return node("Cast", [r], { to: ONNX_DATA_TYPE.bool });
      }
      default: {
        const never: never = kind;
        throw new Error(`unknown reduction ${String(never)}`);
      }
    }
  };
  const COMPARE: Record<ComparisonDirection, string> = {
    EQ: "Equal",
    NE: "Equal",
    LT: "Less",
    LE: "LessOrEqual",
    GT: "Greater",
    GE: "GreaterOrEqual",
  };

  const ops: PeerOps<string> = {
    constant(a: HostArray) {
      const name = fresh("c");
      constants.push({ name, shape: a.dims, values: a.data });
      return name;
    },
    unary(kind, x, type) {
      if (kind === "rsqrt") return node("Reciprocal", [node("Sqrt", [x])]);
      if (kind === "expm1") return node("Sub", [node("Exp", [x]), scalarOf(type, 1)]);
      if (kind === "log1p") return node("Log", [node("Add", [x, scalarOf(type, 1)])]);
      const op = UNARY_OP[kind];
      if (op === undefined) throw new Error(`hloToOnnx: no ONNX op for ${kind}`);
      return node(op, [x]);
    },
    binary: (kind, a, b) => node(BINARY_OP[kind], [a, b]),
    compare(dir, a, b) {
      const r = node(COMPARE[dir], [a, b]);
      return dir === "NE" ? node("Not", [r]) : r;
    },
    select: (p, a, b) => node("Where", [p, a, b]),
    cast: (x, _from, to) => node("Cast", [x], { to: ONNX_DATA_TYPE[ONNX_TYPE[to]] }),
    reshape: (x, dims) => node("Reshape", [x, ints(dims)]),
    transpose: (x, perm) => node("Transpose", [x], { perm }),
    expand: (x, dims) => node("Expand", [x, ints(dims)]),
    slice(x, starts, limits, strides) {
      const axes = range(starts.length);
      return node("Slice", [x, ints(starts), ints(limits), ints(axes), ints(strides)]);
    },
    concat: (xs, axis) => node("Concat", xs, { axis }),
    pad(x, pads, value, _dims, type) {
      const flat = [...pads.map(([l]) => l), ...pads.map(([, h]) => h)];
      return node("Pad", [x, ints(flat), scalarOf(type, value)], {});
    },
    reverse(x, axes) {
      const n = axes.length;
      const ends = axes.map(() => -Number.MAX_SAFE_INTEGER);
      return node("Slice", [x, ints(new Array<number>(n).fill(-1)), ints(ends), ints(axes),
        ints(new Array<number>(n).fill(-1))]);
    },
    matmul(a, b, transA, transB, aDims, bDims) {
      const x = transA ? swapLast(a, aDims.length) : a;
      const y = transB ? swapLast(b, bDims.length) : b;
      return node("MatMul", [x, y]);
    },
    reduce: (kind, x, axes) => reduce(kind, x, axes),
    conv(x, w, spec) {
      return node("Conv", [x, w], {
        kernel_shape: spec.wDims.slice(2),
        strides: spec.strides,
        dilations: spec.dilations,
        pads: [...spec.pads.map(([l]) => l), ...spec.pads.map(([, h]) => h)],
        group: spec.groups,
      });
    },
    pool(kind, x, spec) {
      const attrs = {
        kernel_shape: spec.window,
        strides: spec.strides,
        pads: [...spec.pads.map(([l]) => l), ...spec.pads.map(([, h]) => h)],
      };
      if (kind === "max") return node("MaxPool", [x], attrs);
      // A window sum: the average over the whole (padded) window, times its size.
      const avg = node("AveragePool", [x], { ...attrs, count_include_pad: 1 });
      return node("Mul", [avg, scalarOf("f32", prod(spec.window))]);
    },
    take: (x, idx, axis) => node("Gather", [x, idx], { axis }),
  };

  const inputs = lowered.params.map((p, i) => ({
    name: `p${i}`,
    shape: p.dims,
    type: ONNX_TYPE[p.type],
  }));
  const results = lowered.run(
    ops,
    inputs.map((x) => x.name),
  );
  const outputs = lowered.outputs.map((o, i) => ({
    name: `y${i}`,
    shape: o.dims,
    type: ONNX_TYPE[o.type],
  }));
  results.forEach((r, i) => nodes.push({ op: "Identity", inputs: [r], outputs: [`y${i}`] }));
  return { name: module.name.replace(/[^A-Za-z0-9_]/g, "_"), inputs, outputs, constants, nodes };
}
