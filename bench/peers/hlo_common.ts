// The shared half of the HLO → peer translators (hlo_onnx.ts, hlo_tfjs.ts, hlo_jax.ts): it
// reads a Kiln module once and lowers every instruction of its ENTRY computation to a small set
// of primitive array ops (`PeerOps`) that all three peers have — elementwise ops, reshape,
// transpose, expand, slice, concat, batched matmul, reductions, NC-first convolution and
// pooling, take — so each peer file only says how ONE primitive maps to its API, and every
// peer runs the same decomposition of the same graph (the same matmuls, the same transposes).
// All analysis (dot and broadcast plans, the gather pattern, reducer kinds, constant values)
// happens here, up front; what it cannot express throws a TranslateError naming the opcode, the
// instruction and its shapes, which the bench reports as "not translatable: ...".
// Element types: f32, s32, s64 and pred. tfjs and jax-js have no int64, so they carry s64 as
// int32 (every s64 value the zoo produces — ids, positions, iotas — fits; inputs and constants
// out of the int32 range are an error, never a silent wrap).

import type { ComparisonDirection } from "../../ir/attributes.ts";
import type { EvalValue } from "../../ir/evaluate.ts";
import { Literal } from "../../ir/literal.ts";
import type { Computation, Instruction, Module } from "../../ir/module.ts";
import { type ArrayShape, type Shape, shapeToString } from "../../ir/shape.ts";

export type PeerType = "f32" | "s32" | "s64" | "pred";
export type HostData = Float32Array | Int32Array | BigInt64Array | Uint8Array;
/** A host array: the values of a constant, or of one graph input. */
export interface HostArray {
  type: PeerType;
  dims: number[];
  data: HostData;
}
/** What the translated functions accept per input: s64 as BigInt64Array or Int32Array. */
export type InputArray = Float32Array | Int32Array | BigInt64Array | Uint8Array;

/**
 * What hloToTfjs / hloToJax return: call it with the inputs (parameter order) to get every
 * output as a Float32Array (pred as 0/1, integers as numbers). `prepare` uploads the inputs to
 * the peer once (weights are large: copying them in on every call would time the copy, not
 * the model), and `set` replaces one of them (the ids of the next step, say).
 */
export interface TranslatedFn {
  (inputs: readonly InputArray[]): Float32Array[];
  prepare(inputs: readonly InputArray[]): PreparedRun;
  /** Frees what the translation holds on the peer (constants, the jitted function). */
  dispose(): void;
}

export interface PreparedRun {
  run(): Float32Array[];
  set(i: number, input: InputArray): void;
  dispose(): void;
}

export type UnaryKind =
  | "neg"
  | "abs"
  | "sign"
  | "exp"
  | "expm1"
  | "log"
  | "log1p"
  | "sqrt"
  | "rsqrt"
  | "tanh"
  | "sigmoid"
  | "sin"
  | "cos"
  | "erf"
  | "floor"
  | "ceil"
  | "round"
  | "not";
export type BinaryKind = "add" | "sub" | "mul" | "div" | "max" | "min" | "pow" | "and" | "or";
export type ReduceKind = "sum" | "max" | "min" | "prod" | "all" | "any";

/** A convolution on x [N, C, ...spatial] with w [O, C / groups, ...kernel]; y [N, O, ...]. */
export interface ConvSpec {
  strides: number[];
  pads: [number, number][];
  dilations: number[];
  groups: number;
  /** Dims of x, w and y. */
  xDims: number[];
  wDims: number[];
  yDims: number[];
}

/** A pooling window over the trailing dims of x [N, C, ...spatial] (1 to 3 spatial dims). */
export interface PoolSpec {
  window: number[];
  strides: number[];
  pads: [number, number][];
  xDims: number[];
  yDims: number[];
}

/** A peer's value: a tensor object, or a value name (ONNX). */
export type Value = object | string;

/**
 * The primitive ops a peer implements. Operands are never mutated; every op returns a new
 * value. Shapes are static; dims are passed where a peer needs them.
 */
export interface PeerOps<V extends Value> {
  constant(a: HostArray): V;
  unary(kind: UnaryKind, x: V, type: PeerType): V;
  /** Same-shape operands (the lowering broadcasts explicitly, as HLO does). */
  binary(kind: BinaryKind, a: V, b: V, type: PeerType): V;
  /** Same-shape operands of type `type`; the result is pred. */
  compare(dir: ComparisonDirection, a: V, b: V, type: PeerType): V;
  select(p: V, a: V, b: V): V;
  cast(x: V, from: PeerType, to: PeerType): V;
  reshape(x: V, dims: number[]): V;
  transpose(x: V, perm: number[]): V;
  /** Broadcasts the size-1 dims of x (same rank) to `dims`. */
  expand(x: V, dims: number[], from: number[]): V;
  /** Static slice: start, limit, stride per dim (all strides >= 1). */
  slice(x: V, starts: number[], limits: number[], strides: number[], dims: number[]): V;
  concat(xs: V[], axis: number): V;
  /** Constant padding (non-negative low/high, no interior). */
  pad(x: V, pads: [number, number][], value: number, dims: number[], type: PeerType): V;
  reverse(x: V, axes: number[]): V;
  /**
   * a [...B, M, K] (or [...B, K, M] with transA) times b [...B, K, N] (or [...B, N, K] with
   * transB) → [...B, M, N]; both operands have the same batch dims B.
   */
  matmul(a: V, b: V, transA: boolean, transB: boolean, aDims: number[], bDims: number[]): V;
  /** Reduces `axes` away (no kept dims). */
  reduce(kind: ReduceKind, x: V, axes: number[], type: PeerType, dims: number[]): V;
  conv(x: V, w: V, spec: ConvSpec): V;
  /** "max" pads with -inf, "sum" with 0. */
  pool(kind: "max" | "sum", x: V, spec: PoolSpec): V;
  /** numpy's take: x.shape[:axis] + idx.shape + x.shape[axis+1:]; idx is s32 or s64. */
  take(x: V, idx: V, axis: number, xDims: number[], idxDims: number[]): V;
}

/** A module (or an instruction of it) the translators cannot express. */
export class TranslateError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "TranslateError";
  }
}

function describe(instr: Instruction): string {
  const ops = instr.operands.map((o) => shapeToString(o.shape)).join(", ");
  return `${instr.opcode} '${instr.name}' (${ops}) -> ${shapeToString(instr.shape)}`;
}

function unsupported(instr: Instruction, why: string): TranslateError {
  return new TranslateError(`not translatable: ${describe(instr)}: ${why}`);
}

function arrayOf(instr: Instruction, s: Shape = instr.shape): ArrayShape {
  if (s.kind !== "array") throw unsupported(instr, "tuple-shaped values are not supported here");
  if (s.dynamic.some((d) => d)) throw unsupported(instr, "bounded dynamic dims are not supported");
  return s;
}

function peerType(instr: Instruction, s: Shape = instr.shape): PeerType {
  const t = arrayOf(instr, s).type;
  if (t === "f32" || t === "s32" || t === "s64" || t === "pred") return t;
  throw unsupported(instr, `element type ${t} (the peers get f32, s32, s64 and pred)`);
}

const dimsOf = (instr: Instruction): number[] => [...arrayOf(instr).dims];
const opDims = (instr: Instruction, i: number): number[] => dimsOf(instr.operand(i));
const range = (n: number, from = 0): number[] => Array.from({ length: n }, (_, i) => from + i);
const prod = (xs: readonly number[]): number => xs.reduce((a, b) => a * b, 1);
const isIdentity = (perm: readonly number[]): boolean => perm.every((p, i) => p === i);
const sameDims = (a: readonly number[], b: readonly number[]): boolean =>
  a.length === b.length && a.every((d, i) => d === b[i]);

/** One lowered instruction; `vals` holds values by instruction position (tuples as arrays). */
type Slot<V extends Value> = V | Slot<V>[];
export type Step = <V extends Value>(ops: PeerOps<V>, vals: Slot<V>[]) => void;

export interface Lowered {
  /** The entry's parameters in order: type and dims. */
  params: { type: PeerType; dims: number[] }[];
  /** The flattened outputs (a tuple ROOT gives several), in order. */
  outputs: { type: PeerType; dims: number[] }[];
  /** Runs the lowering on a peer: inputs in parameter order, outputs flattened. */
  run<V extends Value>(ops: PeerOps<V>, inputs: V[]): V[];
}

const UNARY: Partial<Record<string, UnaryKind>> = {
  negate: "neg",
  abs: "abs",
  sign: "sign",
  exponential: "exp",
  "exponential-minus-one": "expm1",
  log: "log",
  "log-plus-one": "log1p",
  sqrt: "sqrt",
  rsqrt: "rsqrt",
  tanh: "tanh",
  logistic: "sigmoid",
  sine: "sin",
  cosine: "cos",
  erf: "erf",
  floor: "floor",
  ceil: "ceil",
  "round-nearest-even": "round",
};
const FLOAT_ONLY_UNARY = new Set<UnaryKind>([
  "exp",
  "expm1",
  "log",
  "log1p",
  "sqrt",
  "rsqrt",
  "tanh",
  "sigmoid",
  "sin",
  "cos",
  "erf",
  "floor",
  "ceil",
  "round",
]);
const BINARY: Partial<Record<string, BinaryKind>> = {
  add: "add",
  subtract: "sub",
  multiply: "mul",
  divide: "div",
  maximum: "max",
  minimum: "min",
  power: "pow",
};

/** The reducer of a reduce / reduce-window: one binary op of its two parameters. */
function reducerKind(instr: Instruction, c: Computation | undefined): ReduceKind {
  const root = c?.root;
  const params = c?.parameters ?? [];
  const ok =
    root !== undefined &&
    params.length === 2 &&
    root.operands.length === 2 &&
    root.operands.every((o) => o.opcode === "parameter") &&
    root.operand(0) !== root.operand(1);
  const kinds: Partial<Record<string, ReduceKind>> = {
    add: "sum",
    maximum: "max",
    minimum: "min",
    multiply: "prod",
    and: "all",
    or: "any",
  };
  const kind = ok ? kinds[root.opcode] : undefined;
  if (kind === undefined) {
    throw unsupported(instr, `reducer '${c?.name ?? "?"}' is not one add/max/min/mul/and/or`);
  }
  return kind;
}

const COMBINE = {
  sum: "add",
  max: "max",
  min: "min",
  prod: "mul",
  all: "and",
  any: "or",
} as const satisfies Record<ReduceKind, BinaryKind>;

/** The identity of a reduction, as a stored element. */
function identityOf(kind: ReduceKind, type: PeerType): number {
  switch (kind) {
    case "sum":
    case "any":
      return 0;
    case "prod":
    case "all":
      return 1;
    case "max":
      return type === "f32" ? -Infinity : type === "s32" ? -(2 ** 31) : Number.NaN;
    case "min":
      return type === "f32" ? Infinity : type === "s32" ? 2 ** 31 - 1 : Number.NaN;
    default: {
      const never: never = kind;
      throw new Error(`unknown reduction ${String(never)}`);
    }
  }
}

/** The scalar value of a constant instruction (any shape with one distinct value), if it is. */
function constantScalar(instr: Instruction): number | undefined {
  if (instr.opcode !== "constant") return undefined;
  const lit = instr.attrs.literal;
  if (lit === undefined || lit.size === 0) return undefined;
  const v = Number(lit.get(0));
  for (let i = 1; i < lit.size; i++) if (Number(lit.get(i)) !== v) return undefined;
  return v;
}

function hostOfLiteral(instr: Instruction, lit: Literal): HostArray {
  const type = peerType(instr, lit.shape);
  return { type, dims: [...lit.dims], data: lit.data };
}

/** iota as host data. */
function iotaHost(type: PeerType, dims: number[], axis: number): HostArray {
  const n = prod(dims);
  const inner = prod(dims.slice(axis + 1));
  const size = dims[axis]!;
  const at = (i: number) => Math.floor(i / inner) % size;
  const data =
    type === "f32"
      ? Float32Array.from({ length: n }, (_, i) => at(i))
      : type === "s32"
        ? Int32Array.from({ length: n }, (_, i) => at(i))
        : type === "s64"
          ? BigInt64Array.from({ length: n }, (_, i) => BigInt(at(i)))
          : Uint8Array.from({ length: n }, (_, i) => (at(i) !== 0 ? 1 : 0));
  return { type, dims, data };
}

function scalarHost(type: PeerType, v: number, dims: number[] = []): HostArray {
  const n = prod(dims);
  const data =
    type === "f32"
      ? new Float32Array(n).fill(v)
      : type === "s32"
        ? new Int32Array(n).fill(v)
        : type === "s64"
          ? new BigInt64Array(n).fill(BigInt(v))
          : new Uint8Array(n).fill(v !== 0 ? 1 : 0);
  return { type, dims, data };
}

// ---- helpers that compose primitives (used at run time inside steps) ----------------------

function broadcastTo<V extends Value>(
  ops: PeerOps<V>,
  x: V,
  from: readonly number[],
  mapping: readonly number[],
  to: readonly number[],
): V {
  let v = x;
  let dims = [...from];
  // Operand dims in the order of the result dims they map to.
  const order = range(mapping.length).sort((a, b) => mapping[a]! - mapping[b]!);
  if (!isIdentity(order)) {
    v = ops.transpose(v, order);
    dims = order.map((i) => from[i]!);
  }
  const sorted = order.map((i) => mapping[i]!);
  const withOnes = to.map((_, k) => {
    const j = sorted.indexOf(k);
    return j >= 0 ? dims[j]! : 1;
  });
  if (!sameDims(withOnes, dims)) v = ops.reshape(v, withOnes);
  if (!sameDims(withOnes, to)) v = ops.expand(v, [...to], withOnes);
  return v;
}

/** A scalar s32 value clamped to [0, hi]. */
function clampIndex<V extends Value>(ops: PeerOps<V>, s: V, type: PeerType, hi: number): V {
  let v = type === "s32" ? s : ops.cast(s, type, "s32");
  v = ops.binary("max", v, ops.constant(scalarHost("s32", 0)), "s32");
  return ops.binary("min", v, ops.constant(scalarHost("s32", hi)), "s32");
}

// ---- the lowering --------------------------------------------------------------------------

/** Lowers `module`'s ENTRY computation; throws TranslateError for what the peers cannot do. */
export function lowerModule(module: Module): Lowered {
  const entry = module.entry;
  const index = new Map<Instruction, number>();
  entry.instructions.forEach((instr, i) => index.set(instr, i));
  const at = (instr: Instruction) => index.get(instr)!;
  const params = entry.parameters;
  params.forEach((p, i) => {
    if (p.attrs.parameterNumber !== i) {
      throw unsupported(p, `parameter numbers must be 0..${params.length - 1}`);
    }
  });
  const steps: Step[] = [];
  for (const instr of entry.instructions) {
    if (instr.opcode === "parameter") continue;
    steps.push(lowerInstruction(instr, at));
  }
  const root = entry.root;
  const outPaths: number[][] = [];
  const walk = (s: Shape, path: number[]) => {
    if (s.kind === "tuple") s.elements.forEach((e, k) => walk(e, [...path, k]));
    else outPaths.push(path);
  };
  walk(root.shape, []);
  const outputs = outPaths.map((path) => {
    let s: Shape = root.shape;
    for (const k of path) s = (s as { elements: readonly Shape[] }).elements[k]!;
    return { type: peerType(root, s), dims: [...arrayOf(root, s).dims] };
  });
  return {
    params: params.map((p) => ({ type: peerType(p), dims: dimsOf(p) })),
    outputs,
    run<V extends Value>(ops: PeerOps<V>, inputs: V[]): V[] {
      if (inputs.length !== params.length) {
        throw new Error(`${module.name}: ${params.length} inputs expected, got ${inputs.length}`);
      }
      const vals: Slot<V>[] = new Array<Slot<V>>(entry.instructions.length);
      params.forEach((p, i) => (vals[at(p)] = inputs[i]!));
      for (const step of steps) step(ops, vals);
      return outPaths.map((path) => {
        let v: Slot<V> = vals[at(root)]!;
        for (const k of path) v = (v as Slot<V>[])[k]!;
        return v as V;
      });
    },
  };
}

function lowerInstruction(instr: Instruction, at: (i: Instruction) => number): Step {
  const me = at(instr);
  const src = instr.operands.map(at);
  /** A step computing one array value from the operands' array values. */
  const array =
    (f: <V extends Value>(ops: PeerOps<V>, xs: V[]) => V): Step =>
    (ops, vals) => {
      const xs = src.map((k) => {
        const v = vals[k]!;
        if (Array.isArray(v)) throw new Error(`${describe(instr)}: a tuple operand`);
        return v;
      });
      vals[me] = f(ops, xs);
    };
  const op = instr.opcode;
  if (op === "tuple") {
    return (_ops, vals) => {
      vals[me] = src.map((k) => vals[k]!);
    };
  }
  if (op === "get-tuple-element") {
    const k = instr.attrs.tupleIndex ?? 0;
    return (_ops, vals) => {
      const t = vals[src[0]!]!;
      if (!Array.isArray(t)) throw new Error(`${describe(instr)}: operand is not a tuple`);
      vals[me] = t[k]!;
    };
  }
  const type = peerType(instr);
  const dims = dimsOf(instr);
  const unaryKind = UNARY[op];
  if (unaryKind !== undefined) {
    const t = peerType(instr.operand(0));
    if (FLOAT_ONLY_UNARY.has(unaryKind) && t !== "f32") {
      throw unsupported(instr, `${op} needs a float operand`);
    }
    return array((ops, [x]) => ops.unary(unaryKind, x!, type));
  }
  const binaryKind = BINARY[op];
  if (binaryKind !== undefined) {
    if ((binaryKind === "div" || binaryKind === "pow") && type !== "f32") {
      throw unsupported(instr, `integer ${op} (truncating semantics) is not mapped`);
    }
    if (type === "pred") throw unsupported(instr, `${op} on pred`);
    return array((ops, [a, b]) => ops.binary(binaryKind, a!, b!, type));
  }
  switch (op) {
    case "constant": {
      const lit = instr.attrs.literal;
      if (!lit) throw unsupported(instr, "constant without a literal");
      const host = hostOfLiteral(instr, lit);
      return array((ops) => ops.constant(host));
    }
    case "iota": {
      const host = iotaHost(type, dims, instr.attrs.iotaDimension ?? 0);
      return array((ops) => ops.constant(host));
    }
    case "copy":
      return (_ops, vals) => {
        vals[me] = vals[src[0]!]!;
      };
    case "not":
      if (type !== "pred") throw unsupported(instr, "bitwise not on integers is not mapped");
      return array((ops, [x]) => ops.unary("not", x!, type));
    case "and":
    case "or":
      if (type !== "pred") throw unsupported(instr, `bitwise ${op} on integers is not mapped`);
      return array((ops, [a, b]) => ops.binary(op, a!, b!, type));
    case "compare": {
      const dir = instr.attrs.direction;
      if (dir === undefined) throw unsupported(instr, "compare without a direction");
      const t = peerType(instr.operand(0));
      return array((ops, [a, b]) => ops.compare(dir, a!, b!, t));
    }
    case "select": {
      const pDims = opDims(instr, 0);
      return array((ops, [p, a, b]) => {
        const pb = sameDims(pDims, dims) ? p! : broadcastTo(ops, p!, pDims, [], dims);
        return ops.select(pb, a!, b!);
      });
    }
    case "clamp": {
      const [loDims, hiDims] = [opDims(instr, 0), opDims(instr, 2)];
      if (type === "pred") throw unsupported(instr, "clamp on pred");
      return array((ops, [lo, x, hi]) => {
        const l = sameDims(loDims, dims) ? lo! : broadcastTo(ops, lo!, loDims, [], dims);
        const h = sameDims(hiDims, dims) ? hi! : broadcastTo(ops, hi!, hiDims, [], dims);
        return ops.binary("max", ops.binary("min", x!, h, type), l, type);
      });
    }
    case "convert": {
      const from = peerType(instr.operand(0));
      return array((ops, [x]) => (from === type ? x! : ops.cast(x!, from, type)));
    }
    case "broadcast": {
      const from = opDims(instr, 0);
      const mapping = instr.attrs.dimensions ?? [];
      return array((ops, [x]) => broadcastTo(ops, x!, from, mapping, dims));
    }
    case "reshape": {
      const from = opDims(instr, 0);
      return array((ops, [x]) => (sameDims(from, dims) ? x! : ops.reshape(x!, dims)));
    }
    case "transpose": {
      const perm = instr.attrs.dimensions ?? [];
      return array((ops, [x]) => (isIdentity(perm) ? x! : ops.transpose(x!, perm)));
    }
    case "slice": {
      const sl = instr.attrs.slice ?? [];
      const from = opDims(instr, 0);
      const starts = sl.map((s) => s.start);
      const limits = sl.map((s) => s.limit);
      const strides = sl.map((s) => s.stride);
      const whole = sl.every((s, i) => s.start === 0 && s.limit === from[i] && s.stride === 1);
      return array((ops, [x]) => (whole ? x! : ops.slice(x!, starts, limits, strides, from)));
    }
    case "concatenate": {
      const axis = instr.attrs.dimensions?.[0] ?? 0;
      const nonEmpty = instr.operands.map((o) => prod(dimsOf(o)) > 0);
      return array((ops, xs) => {
        const kept = xs.filter((_, i) => nonEmpty[i]);
        return kept.length === 1 ? kept[0]! : ops.concat(kept, axis);
      });
    }
    case "pad":
      return lowerPad(instr, type, array);
    case "reverse": {
      const axes = (instr.attrs.dimensions ?? []).filter((a) => dims[a]! > 1);
      return array((ops, [x]) => (axes.length === 0 ? x! : ops.reverse(x!, axes)));
    }
    case "dot":
      return lowerDot(instr, dims, array);
    case "reduce":
      return lowerReduce(instr, type, dims, array);
    case "convolution":
      return lowerConvolution(instr, dims, array);
    case "reduce-window":
      return lowerReduceWindow(instr, type, dims, array);
    case "gather":
      return lowerGather(instr, array);
    case "dynamic-slice":
      return lowerDynamicSlice(instr, dims, array);
    case "dynamic-update-slice":
      return lowerDynamicUpdateSlice(instr, dims, array);
    default:
      throw unsupported(instr, "no peer mapping for this opcode");
  }
}

type ArrayStep = (f: <V extends Value>(ops: PeerOps<V>, xs: V[]) => V) => Step;

function lowerPad(instr: Instruction, type: PeerType, array: ArrayStep): Step {
  const padding = instr.attrs.padding ?? [];
  if (padding.some((p) => p.interior !== 0)) throw unsupported(instr, "interior padding");
  const value = constantScalar(instr.operand(1));
  if (value === undefined) throw unsupported(instr, "the padding value must be a constant");
  const from = opDims(instr, 0);
  // Negative edges remove elements: a slice first, then the non-negative padding.
  const starts = padding.map((p) => Math.max(0, -p.low));
  const limits = padding.map((p, i) => from[i]! - Math.max(0, -p.high));
  const cut = padding.some((p) => p.low < 0 || p.high < 0);
  const mid = starts.map((s, i) => limits[i]! - s);
  const pads = padding.map((p): [number, number] => [Math.max(0, p.low), Math.max(0, p.high)]);
  const none = pads.every(([l, h]) => l === 0 && h === 0);
  return array((ops, [x]) => {
    let v = x!;
    if (cut) v = ops.slice(v, starts, limits, starts.map(() => 1), from);
    return none ? v : ops.pad(v, pads, value, mid, type);
  });
}

function lowerDot(instr: Instruction, dims: number[], array: ArrayStep): Step {
  const dn = instr.attrs.dot;
  if (!dn) throw unsupported(instr, "dot without dimension numbers");
  const [ld, rd] = [opDims(instr, 0), opDims(instr, 1)];
  if (peerType(instr.operand(0)) !== "f32" || peerType(instr.operand(1)) !== "f32") {
    throw unsupported(instr, "only f32 dots are mapped");
  }
  const lFree = range(ld.length).filter(
    (d) => !dn.lhsBatch.includes(d) && !dn.lhsContracting.includes(d),
  );
  const rFree = range(rd.length).filter(
    (d) => !dn.rhsBatch.includes(d) && !dn.rhsContracting.includes(d),
  );
  const batch = dn.lhsBatch.map((d) => ld[d]!);
  const M = prod(lFree.map((d) => ld[d]!));
  const K = prod(dn.lhsContracting.map((d) => ld[d]!));
  const N = prod(rFree.map((d) => rd[d]!));
  // Each operand as [...B, M, K] / [...B, K, N], or the transposed matrix when that is what it
  // already is (so no transpose runs: tfjs, ORT and jax-js all take a transposed operand).
  const plan = (
    d: number[],
    b: number[],
    free: number[],
    contract: number[],
    rows: number,
    cols: number,
    freeFirst: boolean,
  ) => {
    const straight = freeFirst ? [...b, ...free, ...contract] : [...b, ...contract, ...free];
    const swapped = freeFirst ? [...b, ...contract, ...free] : [...b, ...free, ...contract];
    const trans = !isIdentity(straight) && isIdentity(swapped);
    const perm = trans ? swapped : straight;
    const mat = trans ? [...batch, cols, rows] : [...batch, rows, cols];
    const permuted = perm.map((k) => d[k]!);
    return { trans, perm, mat, reshape: !sameDims(permuted, mat) };
  };
  const lp = plan(ld, dn.lhsBatch, lFree, dn.lhsContracting, M, K, true);
  const rp = plan(rd, dn.rhsBatch, rFree, dn.rhsContracting, K, N, false);
  const mm = [...batch, M, N];
  return array((ops, [a, b]) => {
    let x = a!;
    let y = b!;
    if (!isIdentity(lp.perm)) x = ops.transpose(x, lp.perm);
    if (lp.reshape) x = ops.reshape(x, lp.mat);
    if (!isIdentity(rp.perm)) y = ops.transpose(y, rp.perm);
    if (rp.reshape) y = ops.reshape(y, rp.mat);
    const z = ops.matmul(x, y, lp.trans, rp.trans, lp.mat, rp.mat);
    return sameDims(mm, dims) ? z : ops.reshape(z, dims);
  });
}

function lowerReduce(instr: Instruction, type: PeerType, dims: number[], array: ArrayStep): Step {
  if (instr.operands.length !== 2) throw unsupported(instr, "variadic (tuple) reduce");
  const kind = reducerKind(instr, instr.called[0]);
  const axes = [...(instr.attrs.dimensions ?? [])].sort((a, b) => a - b);
  const from = opDims(instr, 0);
  if ((kind === "all" || kind === "any") !== (type === "pred")) {
    throw unsupported(instr, `a ${kind} reduction of ${type}`);
  }
  const init = constantScalar(instr.operand(1));
  const identity = identityOf(kind, type);
  const needInit = init === undefined || (init !== identity && !Object.is(init, identity));
  const combine = COMBINE[kind];
  return array((ops, [x, i]) => {
    let r = axes.length === 0 ? x! : ops.reduce(kind, x!, axes, type, from);
    if (needInit) r = ops.binary(combine, r, broadcastTo(ops, i!, [], [], dims), type);
    return r;
  });
}

function lowerConvolution(instr: Instruction, dims: number[], array: ArrayStep): Step {
  const cd = instr.attrs.convDims;
  const win = instr.attrs.window ?? [];
  if (!cd) throw unsupported(instr, "convolution without dim_labels");
  if ((instr.attrs.batchGroupCount ?? 1) !== 1) throw unsupported(instr, "batch_group_count");
  if (win.some((w) => w.baseDilation !== 1)) throw unsupported(instr, "lhs (base) dilation");
  if (win.some((w) => w.windowReversal)) throw unsupported(instr, "window reversal");
  const k = cd.inputSpatial.length;
  if (k < 1 || k > 3) throw unsupported(instr, `${k} spatial dims (1 to 3 are mapped)`);
  if (peerType(instr) !== "f32") throw unsupported(instr, "only f32 convolutions are mapped");
  const [xd, wd] = [opDims(instr, 0), opDims(instr, 1)];
  const xPerm = [cd.inputBatch, cd.inputFeature, ...cd.inputSpatial];
  const wPerm = [cd.kernelOutputFeature, cd.kernelInputFeature, ...cd.kernelSpatial];
  const yOrder = [cd.outputBatch, cd.outputFeature, ...cd.outputSpatial];
  // y comes out [N, O, ...spatial]; result dim yOrder[j] is its dim j.
  const yPerm = range(dims.length).map((d) => yOrder.indexOf(d));
  const spec: ConvSpec = {
    strides: win.map((w) => w.stride),
    pads: win.map((w): [number, number] => [w.padLow, w.padHigh]),
    dilations: win.map((w) => w.windowDilation),
    groups: instr.attrs.featureGroupCount ?? 1,
    xDims: xPerm.map((d) => xd[d]!),
    wDims: wPerm.map((d) => wd[d]!),
    yDims: yOrder.map((d) => dims[d]!),
  };
  if (spec.pads.some(([l, h]) => l < 0 || h < 0)) throw unsupported(instr, "negative padding");
  return array((ops, [x, w]) => {
    const xv = isIdentity(xPerm) ? x! : ops.transpose(x!, xPerm);
    const wv = isIdentity(wPerm) ? w! : ops.transpose(w!, wPerm);
    const y = ops.conv(xv, wv, spec);
    return isIdentity(yPerm) ? y : ops.transpose(y, yPerm);
  });
}

function lowerReduceWindow(
  instr: Instruction,
  type: PeerType,
  dims: number[],
  array: ArrayStep,
): Step {
  if (instr.operands.length !== 2) throw unsupported(instr, "variadic (tuple) reduce-window");
  const kind = reducerKind(instr, instr.called[0]);
  if (kind !== "max" && kind !== "sum") throw unsupported(instr, `a ${kind} window`);
  if (type !== "f32") throw unsupported(instr, "only f32 windows are mapped");
  const init = constantScalar(instr.operand(1));
  if (init !== identityOf(kind, type)) {
    // HLO pads with the init value; the peers' pools pad with the reduction's identity.
    throw unsupported(instr, `the init value must be the constant ${identityOf(kind, type)}`);
  }
  const win = instr.attrs.window ?? [];
  if (win.some((w) => w.baseDilation !== 1 || w.windowDilation !== 1)) {
    throw unsupported(instr, "dilated windows");
  }
  const from = opDims(instr, 0);
  const passive = (w: (typeof win)[number]) =>
    w.size === 1 && w.stride === 1 && w.padLow === 0 && w.padHigh === 0;
  const active = range(win.length).filter((d) => !passive(win[d]!));
  const rest = range(win.length).filter((d) => passive(win[d]!));
  if (active.length === 0) return array((_ops, [x]) => x!);
  if (active.length > 3) throw unsupported(instr, "windows over more than 3 dims");
  // Pool layout: [N = the passive dims flattened, 1, ...active dims].
  const perm = [...rest, ...active];
  const lead = prod(rest.map((d) => from[d]!));
  const xDims = [lead, 1, ...active.map((d) => from[d]!)];
  const yDims = [lead, 1, ...active.map((d) => dims[d]!)];
  const spec: PoolSpec = {
    window: active.map((d) => win[d]!.size),
    strides: active.map((d) => win[d]!.stride),
    pads: active.map((d): [number, number] => [win[d]!.padLow, win[d]!.padHigh]),
    xDims,
    yDims,
  };
  if (spec.pads.some(([l, h]) => l < 0 || h < 0)) throw unsupported(instr, "negative padding");
  const permuted = [...rest.map((d) => dims[d]!), ...active.map((d) => dims[d]!)];
  const back = range(dims.length).map((d) => perm.indexOf(d));
  return array((ops, [x]) => {
    let v = isIdentity(perm) ? x! : ops.transpose(x!, perm);
    v = ops.reshape(v, xDims);
    v = ops.pool(kind, v, spec);
    v = ops.reshape(v, permuted);
    return isIdentity(back) ? v : ops.transpose(v, back);
  });
}

/**
 * gather in the one form the zoo emits (an embedding lookup, numpy's take): indices select
 * whole slices along one operand dim `a`, so the result is operand[:a] + batch + operand[a+1:].
 */
function lowerGather(instr: Instruction, array: ArrayStep): Step {
  const g = instr.attrs.gather;
  const sizes = instr.attrs.gatherSliceSizes ?? [];
  if (!g) throw unsupported(instr, "gather without dimension numbers");
  const [xd, id] = [opDims(instr, 0), opDims(instr, 1)];
  const it = peerType(instr.operand(1));
  const a = g.startIndexMap[0];
  const implicit = g.indexVectorDim === id.length;
  const batchDims = implicit ? id : id.filter((_, i) => i !== g.indexVectorDim);
  const nb = batchDims.length;
  const expectedOffsets = [...range(a ?? 0), ...range(xd.length - 1 - (a ?? 0), (a ?? 0) + nb)];
  const take =
    a !== undefined &&
    g.startIndexMap.length === 1 &&
    g.collapsedSliceDims.length === 1 &&
    g.collapsedSliceDims[0] === a &&
    g.operandBatchingDims.length === 0 &&
    (implicit || id[g.indexVectorDim] === 1) &&
    sizes.every((s, i) => (i === a ? s === 1 : s === xd[i])) &&
    sameDims(g.offsetDims, expectedOffsets) &&
    (it === "s32" || it === "s64");
  if (!take) {
    throw unsupported(instr, "only the take-along-one-dim form (embedding lookup) is mapped");
  }
  return array((ops, [x, i]) => {
    const idx = implicit ? i! : ops.reshape(i!, batchDims);
    return ops.take(x!, idx, a, xd, batchDims);
  });
}

/** dynamic-slice as a take of clamped start + iota along each dim that shrinks. */
function lowerDynamicSlice(instr: Instruction, dims: number[], array: ArrayStep): Step {
  const xd = opDims(instr, 0);
  const types = instr.operands.slice(1).map((o) => peerType(o));
  if (instr.operands.length !== xd.length + 1) {
    throw unsupported(instr, "start indices must be scalar operands, one per dim");
  }
  const cut = range(xd.length).filter((d) => dims[d]! < xd[d]!);
  return array((ops, [x, ...starts]) => {
    let v = x!;
    let cur = [...xd];
    for (const d of cut) {
      const s = clampIndex(ops, starts[d]!, types[d]!, xd[d]! - dims[d]!);
      const iota = ops.constant(iotaHost("s32", [dims[d]!], 0));
      const idx = ops.binary("add", iota, broadcastTo(ops, s, [], [], [dims[d]!]), "s32");
      v = ops.take(v, idx, d, cur, [dims[d]!]);
      cur = cur.map((n, k) => (k === d ? dims[d]! : n));
    }
    return v;
  });
}

/**
 * dynamic-update-slice as a select: the update, gathered into the operand's shape (clamped
 * offsets along each dim it is shorter in), where a mask of the updated window is true.
 */
function lowerDynamicUpdateSlice(instr: Instruction, dims: number[], array: ArrayStep): Step {
  const ud = opDims(instr, 1);
  if (instr.operands.length !== dims.length + 2) {
    throw unsupported(instr, "start indices must be scalar operands, one per dim");
  }
  const types = instr.operands.slice(2).map((o) => peerType(o));
  const cut = range(dims.length).filter((d) => ud[d]! < dims[d]!);
  return array((ops, [x, u, ...starts]) => {
    if (cut.length === 0) return u!;
    let g = u!;
    let cur = [...ud];
    let mask: typeof g | undefined;
    for (const d of cut) {
      const [D, n] = [dims[d]!, ud[d]!];
      const s = clampIndex(ops, starts[d]!, types[d]!, D - n);
      const sB = broadcastTo(ops, s, [], [], [D]);
      const iota = ops.constant(iotaHost("s32", [D], 0));
      const rel = ops.binary("sub", iota, sB, "s32");
      const idx = ops.binary(
        "min",
        ops.binary("max", rel, ops.constant(scalarHost("s32", 0, [D])), "s32"),
        ops.constant(scalarHost("s32", n - 1, [D])),
        "s32",
      );
      g = ops.take(g, idx, d, cur, [D]);
      cur = cur.map((m, k) => (k === d ? D : m));
      const inside = ops.binary(
        "and",
        ops.compare("GE", rel, ops.constant(scalarHost("s32", 0, [D])), "s32"),
        ops.compare("LT", rel, ops.constant(scalarHost("s32", n, [D])), "s32"),
        "pred",
      );
      const full = broadcastTo(ops, inside, [D], [d], dims);
      mask = mask === undefined ? full : ops.binary("and", mask, full, "pred");
    }
    return ops.select(mask!, g, x!);
  });
}

// ---- inputs ----------------------------------------------------------------------------------

/**
 * The graph inputs for `values` (Kiln literals in parameter order, e.g. what the reference
 * evaluator is given): each literal's typed array as is (f32 Float32Array, s32 Int32Array,
 * s64 BigInt64Array, pred Uint8Array), checked against the module's parameter shapes.
 */
export function parameterArrays(module: Module, values: readonly EvalValue[]): InputArray[] {
  const params = module.entry.parameters;
  if (values.length !== params.length) {
    throw new Error(`${module.name}: ${params.length} parameters, got ${values.length} values`);
  }
  return params.map((p, i) => {
    const v = values[i]!;
    if (!(v instanceof Literal)) throw new Error(`parameter ${i}: a tuple value is not supported`);
    const s = arrayOf(p);
    if (v.type !== s.type || !sameDims(v.dims, s.dims)) {
      throw new Error(
        `parameter ${i} ('${p.name}') is ${shapeToString(s)}, got ` +
          `${v.type}[${v.dims.join(",")}]`,
      );
    }
    return v.data;
  });
}

/** An input as the peer wants it: s64 values as int32 (tfjs and jax-js have no int64). */
export function int32View(data: InputArray, what: string): Int32Array | Float32Array | Uint8Array {
  if (data instanceof BigInt64Array) {
    const out = new Int32Array(data.length);
    for (let i = 0; i < data.length; i++) {
      const v = data[i]!;
      if (v < -2147483648n || v > 2147483647n) {
        throw new Error(`${what}: s64 value ${v} does not fit the peers' int32`);
      }
      out[i] = Number(v);
    }
    return out;
  }
  return data;
}

/** Checks one input against a parameter's type and size before it is handed to a peer. */
export function checkInput(data: InputArray, p: { type: PeerType; dims: number[] }, i: number) {
  const ok =
    p.type === "f32"
      ? data instanceof Float32Array
      : p.type === "s32"
        ? data instanceof Int32Array
        : p.type === "s64"
          ? data instanceof BigInt64Array || data instanceof Int32Array
          : data instanceof Uint8Array;
  if (!ok) {
    throw new Error(`input ${i}: ${p.type}[${p.dims.join(",")}] does not take a ` +
      `${data.constructor.name}`);
  }
  if (data.length !== prod(p.dims)) {
    throw new Error(`input ${i}: ${p.type}[${p.dims.join(",")}] needs ${prod(p.dims)} ` +
      `elements, got ${data.length}`);
  }
}

/** Any output as Float32Array (pred as 0/1, integers as numbers). */
export function toFloat32(data: ArrayLike<number | bigint>): Float32Array {
  if (data instanceof Float32Array) return data;
  return Float32Array.from({ length: data.length }, (_, i) => Number(data[i]!));
}

export { prod, range };

/**
 * The TranslatedFn both tensor peers return: `upload` puts one input on the peer (checked
 * against the module's parameter first), `run` runs the translated program on uploaded inputs.
 * A plain call uploads, runs and frees; `prepare` uploads once for many runs.
 */
export function translatedFn<H extends { dispose(): void }>(
  name: string,
  lowered: Lowered,
  upload: (a: InputArray, p: { type: PeerType; dims: number[] }, what: string) => H,
  run: (xs: readonly H[]) => Float32Array[],
  dispose: () => void,
): TranslatedFn {
  const uploadAll = (inputs: readonly InputArray[]): H[] => {
    if (inputs.length !== lowered.params.length) {
      throw new Error(`${name}: ${lowered.params.length} inputs expected, got ${inputs.length}`);
    }
    return inputs.map((a, i) => {
      const p = lowered.params[i]!;
      checkInput(a, p, i);
      return upload(a, p, `input ${i}`);
    });
  };
  const fn = (inputs: readonly InputArray[]): Float32Array[] => {
    const xs = uploadAll(inputs);
    try {
      return run(xs);
    } finally {
      for (const x of xs) x.dispose();
    }
  };
  const prepare = (inputs: readonly InputArray[]): PreparedRun => {
    const xs = uploadAll(inputs);
    return {
      run: () => run(xs),
      set(i, a) {
        const p = lowered.params[i];
        if (!p) throw new Error(`${name}: no input ${i}`);
        checkInput(a, p, i);
        xs[i]!.dispose();
        xs[i] = upload(a, p, `input ${i}`);
      },
      dispose: () => xs.forEach((x) => x.dispose()),
    };
  };
  return Object.assign(fn, { prepare, dispose });
}
