// HLO → TensorFlow.js: a Kiln module run op by op with tfjs-core ops (tfjs has no graph
// compiler; executing op by op is how tfjs runs a model). The module is lowered once, up front,
// by hlo_common.ts into a list of closures; each call replays them inside `tf.tidy`. Works on
// whichever backend is active (cpu or wasm). Convolutions and pools run channels-last (wasm's
// Conv2D and both backends' pools want NHWC), with the transposes around them that a
// channels-first graph needs on tfjs. s64 values are int32 in tfjs (inputs: BigInt64Array or
// Int32Array; values outside int32 are an error).

import type { Module } from "../../ir/module.ts";
import {
  type HostArray,
  type InputArray,
  int32View,
  lowerModule,
  type PeerOps,
  type PeerType,
  prod,
  toFloat32,
  type TranslatedFn,
  translatedFn,
  TranslateError,
  type UnaryKind,
} from "./hlo_common.ts";

/** The little of tfjs-core's tensor the translation uses. */
export interface TfTensor {
  readonly shape: number[];
  readonly dtype: string;
  dataSync(): Float32Array | Int32Array | Uint8Array;
  dispose(): void;
}

type T = TfTensor;
type Unary = (x: T) => T;
type Binary = (a: T, b: T) => T;
type TfDtype = "float32" | "int32" | "bool";

/** The tfjs-core namespace, typed by the ops the translation calls. */
export interface TfNamespace {
  tensor(values: Float32Array | Int32Array | Uint8Array, shape: number[], dtype: TfDtype): T;
  tidy<R extends T | T[]>(fn: () => R): R;
  keep<R extends T>(t: R): R;
  neg: Unary;
  abs: Unary;
  sign: Unary;
  exp: Unary;
  expm1: Unary;
  log: Unary;
  log1p: Unary;
  sqrt: Unary;
  rsqrt: Unary;
  tanh: Unary;
  sigmoid: Unary;
  sin: Unary;
  cos: Unary;
  erf: Unary;
  floor: Unary;
  ceil: Unary;
  round: Unary;
  logicalNot: Unary;
  add: Binary;
  sub: Binary;
  mul: Binary;
  div: Binary;
  maximum: Binary;
  minimum: Binary;
  pow: Binary;
  logicalAnd: Binary;
  logicalOr: Binary;
  equal: Binary;
  notEqual: Binary;
  less: Binary;
  lessEqual: Binary;
  greater: Binary;
  greaterEqual: Binary;
  where(cond: T, a: T, b: T): T;
  cast(x: T, dtype: TfDtype): T;
  reshape(x: T, shape: number[]): T;
  transpose(x: T, perm: number[]): T;
  broadcastTo(x: T, shape: number[]): T;
  stridedSlice(x: T, begin: number[], end: number[], strides: number[]): T;
  slice(x: T, begin: number[], size: number[]): T;
  concat(xs: T[], axis: number): T;
  pad(x: T, paddings: [number, number][], constantValue: number): T;
  reverse(x: T, axes: number[]): T;
  matMul(a: T, b: T, transposeA: boolean, transposeB: boolean): T;
  sum(x: T, axes: number[]): T;
  max(x: T, axes: number[]): T;
  min(x: T, axes: number[]): T;
  prod(x: T, axes: number[]): T;
  all(x: T, axes: number[]): T;
  any(x: T, axes: number[]): T;
  split(x: T, parts: number, axis: number): T[];
  conv2d(
    x: T,
    filter: T,
    strides: [number, number],
    pad: [[number, number], [number, number], [number, number], [number, number]],
    dataFormat: "NHWC",
    dilations: [number, number],
  ): T;
  maxPool(x: T, filterSize: [number, number], strides: [number, number], pad: "valid"): T;
  avgPool(x: T, filterSize: [number, number], strides: [number, number], pad: "valid"): T;
  gather(x: T, indices: T, axis: number): T;
}

const DTYPE = {
  f32: "float32",
  s32: "int32",
  s64: "int32",
  pred: "bool",
} as const satisfies Record<PeerType, TfDtype>;

/** A host array as a tfjs tensor of the peer type (s64 as int32, pred as bool). */
export function upload(tf: TfNamespace, a: InputArray, type: PeerType, dims: number[], what: string): T {
  const data = type === "pred" ? a : int32View(a, what);
  if (data instanceof Uint8Array && type !== "pred") {
    throw new Error(`${what}: a Uint8Array for a ${type} value`);
  }
  return tf.tensor(data as Float32Array | Int32Array | Uint8Array, dims, DTYPE[type]);
}

/**
 * The primitive ops (hlo_common.ts's PeerOps) on tfjs: plain tfjs-core calls, so they run
 * inside `tf.tidy` and under tfjs's autodiff (`tf.variableGrads`) alike; `dispose` frees the
 * constants they uploaded (once each, on first use, kept across calls).
 */
export function tfjsOps(tf: TfNamespace): { ops: PeerOps<T>; dispose(): void } {
  const constants = new Map<HostArray, T>();
  const unary: Record<UnaryKind, Unary> = {
    neg: tf.neg,
    abs: tf.abs,
    sign: tf.sign,
    exp: tf.exp,
    expm1: tf.expm1,
    log: tf.log,
    log1p: tf.log1p,
    sqrt: tf.sqrt,
    rsqrt: tf.rsqrt,
    tanh: tf.tanh,
    sigmoid: tf.sigmoid,
    sin: tf.sin,
    cos: tf.cos,
    erf: tf.erf,
    floor: tf.floor,
    ceil: tf.ceil,
    round: tf.round,
    not: tf.logicalNot,
  };
  const toNHWC = (x: T) => tf.transpose(x, [0, 2, 3, 1]);
  const toNCHW = (x: T) => tf.transpose(x, [0, 3, 1, 2]);
  /** Adds a unit spatial dim in front for a 1-D window, so everything is 2-D. */
  const as2d = <S>(xs: S[], one: S): S[] => (xs.length === 1 ? [one, ...xs] : xs);
  const ops: PeerOps<T> = {
    constant(a) {
      let t = constants.get(a);
      if (!t) {
        t = tf.keep(upload(tf, a.data, a.type, a.dims, "constant"));
        constants.set(a, t);
      }
      return t;
    },
    unary: (kind, x) => unary[kind].call(tf, x),
    binary(kind, a, b) {
      switch (kind) {
        case "add":
          return tf.add(a, b);
        case "sub":
          return tf.sub(a, b);
        case "mul":
          return tf.mul(a, b);
        case "div":
          return tf.div(a, b);
        case "max":
          return tf.maximum(a, b);
        case "min":
          return tf.minimum(a, b);
        case "pow":
          return tf.pow(a, b);
        case "and":
          return tf.logicalAnd(a, b);
        case "or":
          return tf.logicalOr(a, b);
        default: {
          const never: never = kind;
          throw new Error(`unknown binary op ${String(never)}`);
        }
      }
    },
    compare(dir, a, b) {
      switch (dir) {
        case "EQ":
          return tf.equal(a, b);
        case "NE":
          return tf.notEqual(a, b);
        case "LT":
          return tf.less(a, b);
        case "LE":
          return tf.lessEqual(a, b);
        case "GT":
          return tf.greater(a, b);
        case "GE":
          return tf.greaterEqual(a, b);
        default: {
          const never: never = dir;
          throw new Error(`unknown comparison ${String(never)}`);
        }
      }
    },
    select: (p, a, b) => tf.where(p, a, b),
    cast: (x, from, to) => (DTYPE[from] === DTYPE[to] ? x : tf.cast(x, DTYPE[to])),
    reshape: (x, dims) => tf.reshape(x, dims),
    transpose: (x, perm) => tf.transpose(x, perm),
    expand: (x, dims) => tf.broadcastTo(x, dims),
    slice(x, starts, limits, strides) {
      if (strides.every((s) => s === 1)) {
        return tf.slice(x, starts, limits.map((l, i) => l - starts[i]!));
      }
      return tf.stridedSlice(x, starts, limits, strides);
    },
    concat: (xs, axis) => tf.concat(xs, axis),
    pad: (x, pads, value) => tf.pad(x, pads, value),
    reverse: (x, axes) => tf.reverse(x, axes),
    matmul: (a, b, transA, transB) => tf.matMul(a, b, transA, transB),
    reduce(kind, x, axes) {
      switch (kind) {
        case "sum":
          return tf.sum(x, axes);
        case "max":
          return tf.max(x, axes);
        case "min":
          return tf.min(x, axes);
        case "prod":
          return tf.prod(x, axes);
        case "all":
          return tf.all(x, axes);
        case "any":
          return tf.any(x, axes);
        default: {
          const never: never = kind;
          throw new Error(`unknown reduction ${String(never)}`);
        }
      }
    },
    conv(x, w, spec) {
      const k = spec.strides.length;
      const oneD = k === 1;
      const [N, C] = [spec.xDims[0]!, spec.xDims[1]!];
      const [O, I] = [spec.wDims[0]!, spec.wDims[1]!];
      const xs = oneD ? tf.reshape(x, [N, C, 1, spec.xDims[2]!]) : x;
      const ws = oneD ? tf.reshape(w, [O, I, 1, spec.wDims[2]!]) : w;
      const strides = as2d(spec.strides, 1) as [number, number];
      const dil = as2d(spec.dilations, 1) as [number, number];
      const [ph, pw] = as2d<[number, number]>(spec.pads, [0, 0]) as [
        [number, number],
        [number, number],
      ];
      const pad: [[number, number], [number, number], [number, number], [number, number]] = [
        [0, 0],
        ph,
        pw,
        [0, 0],
      ];
      const xh = toNHWC(xs);
      const wh = tf.transpose(ws, [2, 3, 1, 0]); // OIHW → HWIO
      const g = spec.groups;
      let y: T;
      if (g === 1) {
        y = tf.conv2d(xh, wh, strides, pad, "NHWC", dil);
      } else {
        const xg = tf.split(xh, g, 3);
        const wg = tf.split(wh, g, 3);
        y = tf.concat(xg.map((xi, i) => tf.conv2d(xi, wg[i]!, strides, pad, "NHWC", dil)), 3);
      }
      const out = toNCHW(y);
      return oneD ? tf.reshape(out, spec.yDims) : out;
    },
    pool(kind, x, spec) {
      if (spec.window.length > 2) {
        throw new TranslateError("not translatable on tfjs: a pool over 3 spatial dims");
      }
      const oneD = spec.window.length === 1;
      const [N, C] = [spec.xDims[0]!, spec.xDims[1]!];
      const xs = oneD ? tf.reshape(x, [N, C, 1, spec.xDims[2]!]) : x;
      const pads = as2d<[number, number]>(spec.pads, [0, 0]);
      const window = as2d(spec.window, 1) as [number, number];
      const strides = as2d(spec.strides, 1) as [number, number];
      // Padded explicitly (HLO pads with the init value: -inf for max, 0 for a sum), then a
      // 'valid' pool, so no backend's own padding rule is involved.
      const fill = kind === "max" ? -Infinity : 0;
      const padded = pads.some(([l, h]) => l !== 0 || h !== 0)
        ? tf.pad(xs, [[0, 0], [0, 0], pads[0]!, pads[1]!], fill)
        : xs;
      const xh = toNHWC(padded);
      let y =
        kind === "max"
          ? tf.maxPool(xh, window, strides, "valid")
          : tf.mul(
              tf.avgPool(xh, window, strides, "valid"),
              tf.tensor(Float32Array.of(prod(spec.window)), [], "float32"),
            );
      y = toNCHW(y);
      return oneD ? tf.reshape(y, spec.yDims) : y;
    },
    take: (x, idx, axis) => tf.gather(x, idx, axis),
  };
  return {
    ops,
    dispose() {
      for (const t of constants.values()) t.dispose();
      constants.clear();
    },
  };
}

/** Runs `module`'s ENTRY computation on tfjs; see TranslatedFn. */
export function hloToTfjs(tf: TfNamespace, module: Module): TranslatedFn {
  const lowered = lowerModule(module);
  const { ops, dispose } = tfjsOps(tf);
  const run = (inputs: readonly T[]): Float32Array[] => {
    const outs = tf.tidy(() => lowered.run(ops, [...inputs]).map((y) => tf.reshape(y, y.shape)));
    try {
      return outs.map((y) => toFloat32(y.dataSync()));
    } finally {
      for (const y of outs) y.dispose();
    }
  };
  return translatedFn(
    module.name,
    lowered,
    (a, p, what) => upload(tf, a, p.type, p.dims, what),
    run,
    dispose,
  );
}
