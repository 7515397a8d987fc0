// HLO → jax-js: a Kiln module as one jax-js function under `jax.jit`, built from
// hlo_common.ts's lowering (the same decomposition the tfjs and ONNX translations run), so
// jax-js traces it once and compiles its own kernels. jax-js moves an array into each op; the
// lowering here borrows instead — every operand is passed as `.ref`, every array an op returns
// is recorded, and at the end of the trace everything but the outputs is disposed — so a value
// used many times (or not at all) never needs its uses counted. s64 values are int32 in jax-js
// (inputs: BigInt64Array or Int32Array; values outside int32 are an error); pred is bool.

import type { Module } from "../../ir/module.ts";
import {
  type HostArray,
  type InputArray,
  int32View,
  type Lowered,
  lowerModule,
  type PeerOps,
  type PeerType,
  prod,
  range,
  toFloat32,
  type TranslatedFn,
  translatedFn,
} from "./hlo_common.ts";

/** The little of a jax-js array the translation uses. */
export interface JaxArray {
  readonly ref: JaxArray;
  readonly shape: number[];
  readonly dtype: unknown;
  dataSync(): ArrayLike<number>;
  dispose(): void;
  slice(...index: [number, number][]): JaxArray;
}

type A = JaxArray;
type Unary = (x: A) => A;
type Binary = (a: A, b: A) => A;
type Axes = number[];

export interface JaxNumpy {
  float32: unknown;
  int32: unknown;
  bool: unknown;
  array(v: Float32Array | Int32Array, o: { shape: number[]; dtype?: unknown }): A;
  negative: Unary;
  abs: Unary;
  sign: Unary;
  exp: Unary;
  expm1: Unary;
  log: Unary;
  log1p: Unary;
  sqrt: Unary;
  reciprocal: Unary;
  tanh: Unary;
  sin: Unary;
  cos: Unary;
  floor: Unary;
  ceil: Unary;
  round: Unary;
  logicalNot: Unary;
  add: Binary;
  subtract: Binary;
  multiply: Binary;
  trueDivide: Binary;
  maximum: Binary;
  minimum: Binary;
  power: Binary;
  logicalAnd: Binary;
  logicalOr: Binary;
  equal: Binary;
  notEqual: Binary;
  less: Binary;
  lessEqual: Binary;
  greater: Binary;
  greaterEqual: Binary;
  where(cond: A, x: A, y: A): A;
  astype(x: A, dtype: unknown): A;
  reshape(x: A, shape: number[]): A;
  transpose(x: A, perm: number[]): A;
  broadcastTo(x: A, shape: number[]): A;
  concatenate(xs: A[], axis: number): A;
  pad(x: A, width: [number, number][]): A;
  flip(x: A, axis: Axes): A;
  sum(x: A, axis?: Axes): A;
  max(x: A, axis?: Axes): A;
  min(x: A, axis: Axes): A;
  prod(x: A, axis: Axes): A;
  all(x: A, axis: Axes): A;
  any(x: A, axis: Axes): A;
  take(x: A, indices: A, axis: number): A;
}

/** The jax-js namespace, typed by what the translation calls. */
export interface JaxNamespace {
  numpy: JaxNumpy;
  nn: { sigmoid: Unary };
  lax: {
    erf: Unary;
    dot(
      a: A,
      b: A,
      dims: {
        lhsContractingDims: number[];
        rhsContractingDims: number[];
        lhsBatchDims: number[];
        rhsBatchDims: number[];
      },
    ): A;
    convGeneralDilated(
      x: A,
      w: A,
      strides: number[],
      padding: [number, number][],
      o: { rhsDilation: number[]; featureGroupCount: number },
    ): A;
    reduceWindow(x: A, computation: (w: A) => A, window: number[], strides: number[]): A;
  };
  jit(fn: (...xs: A[]) => A[]): ((...xs: A[]) => A[]) & { dispose(): void };
}

/**
 * The translated module as a traceable jax-js function: `trace(xs)` runs the lowering on `xs`
 * (parameter order; it consumes them, as a jax-js op consumes its operands) and returns the
 * outputs, every intermediate disposed — call it inside `jax.jit`, `jax.grad` or both.
 * `upload` puts a host array on jax-js as the parameter's type.
 */
export interface JaxLowering {
  lowered: Lowered;
  trace(xs: A[]): A[];
  upload(data: InputArray, type: PeerType, dims: number[], what: string): A;
}

export interface JaxLoweringOptions {
  /**
   * Lowers a take from an f32 array as a one-hot contraction (onehot(idx) · x) instead of
   * np.take, for graphs that are differentiated: take's transpose is a scatter, and jax-js
   * 0.1.25's jit rejects a scatter whose operand is a view ("routine primitive scatter input
   * is not imm"), which a gradient's zeros are; a dot's transpose is a dot. Same values (each
   * output element is one product with 1, plus zeros).
   */
  takeAsOneHot?: boolean;
}

/** See JaxLowering. */
export function jaxLowering(
  jax: JaxNamespace,
  module: Module,
  options: JaxLoweringOptions = {},
): JaxLowering {
  const lowered = lowerModule(module);
  const np = jax.numpy;
  const dtype = (t: PeerType): unknown =>
    t === "f32" ? np.float32 : t === "pred" ? np.bool : np.int32;
  /** A host array as a jax-js array (pred via int32: jax-js takes no Uint8Array). */
  const upload = (data: InputArray, type: PeerType, dims: number[], what: string): A => {
    if (type === "pred") {
      const ints = Int32Array.from(data as Uint8Array);
      return np.astype(np.array(ints, { shape: dims, dtype: np.int32 }), np.bool);
    }
    const v = int32View(data, what);
    if (v instanceof Uint8Array) throw new Error(`${what}: a Uint8Array for a ${type} value`);
    return np.array(v, { shape: dims, dtype: dtype(type) });
  };

  // Set for the duration of one trace: every array an op returned.
  let created: A[] = [];
  const own = (a: A): A => {
    created.push(a);
    return a;
  };
  const u = (f: Unary) => (x: A) => own(f(x.ref));
  const bin = (f: Binary) => (a: A, b: A) => own(f(a.ref, b.ref));
  const unary = {
    neg: u(np.negative),
    abs: u(np.abs),
    sign: u(np.sign),
    exp: u(np.exp),
    expm1: u(np.expm1),
    log: u(np.log),
    log1p: u(np.log1p),
    sqrt: u(np.sqrt),
    rsqrt: (x: A) => own(np.reciprocal(own(np.sqrt(x.ref)).ref)),
    tanh: u(np.tanh),
    sigmoid: u(jax.nn.sigmoid),
    sin: u(np.sin),
    cos: u(np.cos),
    erf: u(jax.lax.erf),
    floor: u(np.floor),
    ceil: u(np.ceil),
    round: u(np.round),
    not: u(np.logicalNot),
  };
  const binary = {
    add: bin(np.add),
    sub: bin(np.subtract),
    mul: bin(np.multiply),
    div: bin(np.trueDivide),
    max: bin(np.maximum),
    min: bin(np.minimum),
    pow: bin(np.power),
    and: bin(np.logicalAnd),
    or: bin(np.logicalOr),
  };
  const compare = {
    EQ: bin(np.equal),
    NE: bin(np.notEqual),
    LT: bin(np.less),
    LE: bin(np.lessEqual),
    GT: bin(np.greater),
    GE: bin(np.greaterEqual),
  };
  const constant = (a: HostArray) => own(upload(a.data, a.type, a.dims, "constant"));
  const ops: PeerOps<A> = {
    constant,
    unary: (kind, x) => unary[kind](x),
    binary: (kind, a, b) => binary[kind](a, b),
    compare: (dir, a, b) => compare[dir](a, b),
    select: (p, a, b) => own(np.where(p.ref, a.ref, b.ref)),
    cast: (x, from, to) =>
      dtype(from) === dtype(to) ? own(x.ref) : own(np.astype(x.ref, dtype(to))),
    reshape: (x, dims) => own(np.reshape(x.ref, dims)),
    transpose: (x, perm) => own(np.transpose(x.ref, perm)),
    expand: (x, dims) => own(np.broadcastTo(x.ref, dims)),
    slice(x, starts, limits, strides) {
      if (strides.every((s) => s === 1)) {
        return own(x.ref.slice(...starts.map((s, i): [number, number] => [s, limits[i]!])));
      }
      // jax-js has no strided slices: a take of the kept indices along each strided dim.
      let v = own(x.ref.slice(...starts.map((s, i): [number, number] => [s, limits[i]!])));
      strides.forEach((st, d) => {
        if (st === 1) return;
        const n = Math.ceil((limits[d]! - starts[d]!) / st);
        const idx = Int32Array.from({ length: n }, (_, k) => k * st);
        const iv = constant({ type: "s32", dims: [n], data: idx });
        v = own(np.take(v.ref, iv.ref, d));
      });
      return v;
    },
    concat: (xs, axis) => own(np.concatenate(xs.map((x) => x.ref), axis)),
    pad(x, pads, value, dims, type) {
      const padded = own(np.pad(x.ref, pads));
      if (value === 0) return padded;
      // jax-js pads with zeros: add a host-built mask holding `value` on the padding only.
      return binary.add(padded, constant(padMask(pads, dims, type, value)));
    },
    reverse: (x, axes) => own(np.flip(x.ref, axes)),
    matmul(a, b, transA, transB, aDims) {
      const r = aDims.length;
      const batch = Array.from({ length: r - 2 }, (_, i) => i);
      return own(
        jax.lax.dot(a.ref, b.ref, {
          lhsContractingDims: [transA ? r - 2 : r - 1],
          rhsContractingDims: [transB ? r - 1 : r - 2],
          lhsBatchDims: batch,
          rhsBatchDims: batch,
        }),
      );
    },
    reduce(kind, x, axes) {
      switch (kind) {
        case "sum":
          return own(np.sum(x.ref, axes));
        case "max":
          return own(np.max(x.ref, axes));
        case "min":
          return own(np.min(x.ref, axes));
        case "prod":
          return own(np.prod(x.ref, axes));
        case "all":
          return own(np.all(x.ref, axes));
        case "any":
          return own(np.any(x.ref, axes));
        default: {
          const never: never = kind;
          throw new Error(`unknown reduction ${String(never)}`);
        }
      }
    },
    conv: (x, w, spec) =>
      own(
        jax.lax.convGeneralDilated(x.ref, w.ref, spec.strides, spec.pads, {
          rhsDilation: spec.dilations,
          featureGroupCount: spec.groups,
        }),
      ),
    pool(kind, x, spec) {
      const pads: [number, number][] = [[0, 0], [0, 0], ...spec.pads];
      const fill = kind === "max" ? -Infinity : 0;
      const padded = spec.pads.some(([l, h]) => l !== 0 || h !== 0)
        ? ops.pad(x, pads, fill, spec.xDims, "f32")
        : x;
      const reduce = kind === "max" ? (w: A) => np.max(w) : (w: A) => np.sum(w);
      return own(jax.lax.reduceWindow(padded.ref, reduce, spec.window, spec.strides));
    },
    take(x, idx, axis, xDims, idxDims) {
      if (!options.takeAsOneHot || x.dtype !== np.float32) {
        return own(np.take(x.ref, idx.ref, axis));
      }
      const n = xDims[axis]!;
      const p = prod(idxDims);
      const pre = xDims.slice(0, axis);
      const post = xDims.slice(axis + 1);
      const iota = constant({ type: "s32", dims: [1, n], data: Int32Array.from(range(n)) });
      const ids = own(np.broadcastTo(own(np.reshape(idx.ref, [p, 1])).ref, [p, n]));
      const hot = own(
        np.astype(own(np.equal(ids.ref, own(np.broadcastTo(iota.ref, [p, n])).ref)).ref, np.float32),
      );
      // x with `axis` first, as [n, rest]; the product is [idx..., pre..., post...].
      const xt = axis === 0 ? x : own(np.transpose(x.ref, [axis, ...range(axis), ...range(post.length, axis + 1)]));
      const x2 = own(np.reshape(xt.ref, [n, prod(pre) * prod(post)]));
      const y = own(
        jax.lax.dot(hot.ref, x2.ref, {
          lhsContractingDims: [1],
          rhsContractingDims: [0],
          lhsBatchDims: [],
          rhsBatchDims: [],
        }),
      );
      const yd = own(np.reshape(y.ref, [...idxDims, ...pre, ...post]));
      if (pre.length === 0) return yd;
      const ni = idxDims.length;
      const perm = [...range(pre.length, ni), ...range(ni), ...range(post.length, ni + pre.length)];
      return own(np.transpose(yd.ref, perm));
    },
  };

  const trace = (xs: A[]): A[] => {
    const outer = created;
    created = [];
    const ys = lowered.run(ops, xs);
    const out = ys.map((y) => y.ref);
    for (const a of created) a.dispose();
    for (const x of xs) x.dispose();
    created = outer;
    return out;
  };
  return { lowered, trace, upload };
}

/** Runs `module`'s ENTRY computation on jax-js under jit; see TranslatedFn. */
export function hloToJax(
  jax: JaxNamespace,
  module: Module,
  options: JaxLoweringOptions = {},
): TranslatedFn {
  const { lowered, trace, upload } = jaxLowering(jax, module, options);
  const jitted = jax.jit((...xs: A[]): A[] => trace(xs));
  const run = (inputs: readonly A[]): Float32Array[] => {
    // dataSync() consumes the array (jax-js disposes it after reading).
    return jitted(...inputs.map((x) => x.ref)).map((y) => toFloat32(y.dataSync()));
  };
  return translatedFn(
    module.name,
    lowered,
    (a, p, what) => upload(a, p.type, p.dims, what),
    run,
    () => jitted.dispose(),
  );
}

/** `value` on the padding of a `dims` array padded by `pads`, 0 inside. */
function padMask(
  pads: [number, number][],
  dims: number[],
  type: PeerType,
  value: number,
): HostArray {
  if (type === "pred") throw new Error("jax-js: a pred padding value other than 0 is not mapped");
  const out = pads.map(([l, h], i) => l + dims[i]! + h);
  const n = out.reduce((a, b) => a * b, 1);
  const data = type === "f32" ? new Float32Array(n) : new Int32Array(n);
  const idx = new Array<number>(out.length).fill(0);
  for (let i = 0; i < n; i++) {
    let inside = true;
    for (let d = 0; d < out.length; d++) {
      const k = idx[d]!;
      if (k < pads[d]![0] || k >= pads[d]![0] + dims[d]!) inside = false;
    }
    if (!inside) data[i] = value;
    for (let d = out.length - 1; d >= 0; d--) {
      if (++idx[d]! < out[d]!) break;
      idx[d] = 0;
    }
  }
  return { type, dims: out, data };
}
