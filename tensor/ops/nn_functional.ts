// PyTorch's torch.nn.functional in functional form (`ops.conv2d(x, w)`): convolutions (conv1d,
// conv2d, convTranspose2d) lowered to one IR convolution (`bf01_oi01->bf01`, transposed ones
// with lhs dilation and a reversed kernel); pooling (maxPool2d, maxPool2dWithIndices, avgPool2d)
// lowered to reduce-window, adaptiveAvgPool2d to reduce-window or a masked gather; norms
// (layerNorm, rmsNorm, groupNorm, batchNorm), losses (crossEntropy, nllLoss, mseLoss) and
// interpolate (nearest, nearest-exact, linear, bilinear) as single lowerings whose index tables
// and weights are computed from the static shapes with PyTorch's own formulas, in float32 where
// PyTorch computes them in float; dropout and scaledDotProductAttention as decompositions
// because they draw random numbers (a `rand` leaf) before one private lowering does the math.
// PyTorch has no Tensor methods for these, so none are installed. Softmax, log-softmax and
// mean/variance are small private IR helpers here, because a lowering appends IR and cannot
// call another op (the public softmax and logSoftmax live in reduction.ts).

import type { WindowDim } from "../../ir/attributes.ts";
import type { ComputationBuilder } from "../../ir/builder.ts";
import { literal } from "../../ir/literal.ts";
import type { Instruction } from "../../ir/module.ts";
import { arrayShape, type ElementType } from "../../ir/shape.ts";
import {
  type AnyParam,
  type AttrsOf,
  type CallForms,
  p,
  problem,
} from "../args.ts";
import { ones } from "../creation.ts";
import { scatterAddAlong } from "./indexing.ts";
import {
  callOp,
  defineDecomposition,
  defineOp,
  type Lowering,
} from "../dispatch.ts";
import { type DType, isFloatingDType, isIntegralDType, toElementType } from "../dtype.ts";
import { ArgumentError, OpError } from "../errors.ts";
import { checkInRange } from "../index_checks.ts";
import {
  cast,
  computeType,
  constant,
  dimsOf,
  dtypeOf,
  fail,
  filled,
  filledLike,
  opName,
  rankOf,
  reduce,
  reducedCount,
  reducer,
  resultTypeOf,
} from "../lower.ts";
import { rand } from "../random.ts";
import { broadcastShapes, numelOf, shapeString } from "../shape.ts";
import { ConcreteImpl, Tensor } from "../tensor.ts";

// ---- Parameter kinds ------------------------------------------------------------------------

/** `k` or `[k]` or `[k1, ..., kn]`, normalized to n integers >= min (PyTorch's _pair etc.). */
function spatial<N extends string>(name: N, n: number, min: number, allowEmpty = false) {
  const what = `an integer >= ${min} or a list of ${n} of them`;
  return p.custom<N, number | readonly number[], number[]>(name, (v) => {
    const one = typeof v === "number" || typeof v === "bigint";
    const list: unknown = one ? [v] : v;
    if (!Array.isArray(list)) return problem(`must be ${what}`);
    if (list.length === 0 && allowEmpty) return [];
    if (list.length !== 1 && list.length !== n) return problem(`must be ${what}`);
    const ints = list.map((x: unknown) => {
      const k = typeof x === "bigint" ? Number(x) : x;
      if (typeof k !== "number" || !Number.isInteger(k) || k < min) problem(`must be ${what}`);
      return k as number;
    });
    return ints.length === 1 ? new Array<number>(n).fill(ints[0]!) : ints;
  });
}

type ConvPadding = number[] | "same" | "valid";

/** Convolution padding: integers, or PyTorch's strings "same" and "valid". */
function convPadding(n: number) {
  const ints = spatial("padding", n, 0);
  return p.custom<"padding", number | readonly number[] | "same" | "valid", ConvPadding>(
    "padding",
    (v) => {
      if (v === "same" || v === "valid") return v;
      try {
        return ints.check(v);
      } catch {
        return problem(`must be "same", "valid", an integer >= 0 or a list of ${n} of them`);
      }
    },
  );
}

const reductionParam = p.oneOf("reduction", ["none", "mean", "sum"]).default("mean");
type Reduction = "none" | "mean" | "sum";

// ---- IR helpers -----------------------------------------------------------------------------

/** The op's float dtype (inputs must be floating, as PyTorch's kernels require). */
function floatInput(b: ComputationBuilder, x: Instruction, what = "input"): DType {
  const t = dtypeOf(x);
  if (!isFloatingDType(t)) {
    fail(b, `${what} must be a floating point tensor, got ${t} (shape ${shapeString(dimsOf(x))})`);
  }
  return t;
}

/** A 1-D constant of `dtype`. */
function vector(b: ComputationBuilder, dtype: DType, values: readonly number[]): Instruction {
  return b.constant(literal(toElementType(dtype), [values.length], values));
}

/** `v` ([n]) broadcast to `dims` along `axis`. */
function along(b: ComputationBuilder, v: Instruction, dims: readonly number[], axis: number) {
  return b.broadcast(v, [...dims], [axis]);
}

/** `r` (x reduced over `dims`, no keepdim) broadcast back to x's full shape. */
function expandBack(
  b: ComputationBuilder,
  r: Instruction,
  full: readonly number[],
  dims: readonly number[],
): Instruction {
  const kept = full.map((_, i) => i).filter((i) => !dims.includes(i));
  return b.broadcast(r, [...full], kept);
}

function sumOver(b: ComputationBuilder, x: Instruction, dims: readonly number[]): Instruction {
  return reduce(b, x, dims, "add", 0, false);
}

/** Softmax over `axis` (max subtracted first, as PyTorch; an all -inf row gives NaN). */
function softmaxLower(b: ComputationBuilder, x: Instruction, axis: number): Instruction {
  const full = dimsOf(x);
  const m = expandBack(b, reduce(b, x, [axis], "max", -Infinity, false), full, [axis]);
  const e = b.exp(b.subtract(x, m));
  return b.divide(e, expandBack(b, sumOver(b, e, [axis]), full, [axis]));
}

/** log_softmax over `axis`: (x - max) - log(sum(exp(x - max))). */
function logSoftmaxLower(b: ComputationBuilder, x: Instruction, axis: number): Instruction {
  const full = dimsOf(x);
  const m = expandBack(b, reduce(b, x, [axis], "max", -Infinity, false), full, [axis]);
  const shifted = b.subtract(x, m);
  const lse = b.log(sumOver(b, b.exp(shifted), [axis]));
  return b.subtract(shifted, expandBack(b, lse, full, [axis]));
}

/**
 * Mean and biased variance over `dims` (two passes: mean, then the mean of squared deviations),
 * plus the centered input.
 */
function moments(b: ComputationBuilder, x: Instruction, dims: readonly number[]) {
  const full = dimsOf(x);
  const n = reducedCount(x, dims);
  const s = sumOver(b, x, dims);
  const mean = b.divide(s, filledLike(b, s, n));
  const centered = b.subtract(x, expandBack(b, mean, full, dims));
  const sq = sumOver(b, b.multiply(centered, centered), dims);
  const variance = b.divide(sq, filledLike(b, sq, n));
  return { mean, variance, centered };
}

/** 1/sqrt(v + eps) in v's dtype. */
function rstdOf(b: ComputationBuilder, v: Instruction, eps: number): Instruction {
  return b.rsqrt(b.add(v, filledLike(b, v, eps)));
}

/** x with `axis` replaced by the rows `idx` (a gather with a constant index table). */
function takeAlong(
  b: ComputationBuilder,
  x: Instruction,
  axis: number,
  idx: readonly number[],
): Instruction {
  const dims = dimsOf(x);
  if (idx.length === dims[axis] && idx.every((v, i) => v === i)) return x;
  const indices = b.constant(literal("s32", [idx.length, 1], idx));
  return b.gather(
    x,
    indices,
    {
      offsetDims: dims.map((_, i) => i).filter((i) => i !== axis),
      collapsedSliceDims: [axis],
      startIndexMap: [axis],
      indexVectorDim: 1,
    },
    dims.map((d, i) => (i === axis ? 1 : d)),
  );
}

/** The reduction PyTorch's losses apply: none, sum, or sum / count. */
function reduceLoss(
  b: ComputationBuilder,
  loss: Instruction,
  reduction: Reduction,
  divisor?: Instruction,
): Instruction {
  if (reduction === "none") return loss;
  const all = dimsOf(loss).map((_, i) => i);
  const s = sumOver(b, loss, all);
  if (reduction === "sum") return s;
  return b.divide(s, divisor ?? filledLike(b, s, numelOf(dimsOf(loss))));
}

const sizes = (xs: readonly number[]) => xs.join(" x ");

// ---- Convolution ----------------------------------------------------------------------------

interface ConvOptions {
  stride: number[];
  padding: ConvPadding;
  dilation: number[];
  groups: number;
  /** Present for transposed convolutions. */
  outputPadding?: number[];
}

/** PyTorch's padding="same": total dilation*(k-1), the odd one extra on the high side. */
function samePadding(kernel: readonly number[], dilation: readonly number[]): [number, number][] {
  return kernel.map((k, i) => {
    const total = dilation[i]! * (k - 1);
    const lo = Math.floor(total / 2);
    return [lo, total - lo];
  });
}

/**
 * conv{1,2}d and convTranspose2d over `nsp` spatial dims: one IR convolution with dim labels
 * bf01_oi01->bf01 and feature_group_count = groups. A transposed convolution is the forward
 * convolution of the input dilated by the stride (lhs dilation) with the kernel's spatial dims
 * reversed and its in/out features swapped per group, padded by dilation*(k-1) - padding
 * (plus outputPadding on the high side).
 */
function convolve(
  b: ComputationBuilder,
  inputs: readonly Instruction[],
  nsp: number,
  o: ConvOptions,
): Instruction {
  const [x0, w0, bias] = inputs as [Instruction, Instruction, Instruction | undefined];
  const transposed = o.outputPadding !== undefined;
  const xd = dimsOf(x0);
  const wd = dimsOf(w0);
  if (xd.length !== nsp + 1 && xd.length !== nsp + 2) {
    fail(
      b,
      `expected a ${nsp + 1}-D (unbatched) or ${nsp + 2}-D (batched) input, got input of ` +
        `shape ${shapeString(xd)}`,
    );
  }
  if (wd.length !== nsp + 2) {
    fail(b, `expected a ${nsp + 2}-D weight, got weight of shape ${shapeString(wd)}`);
  }
  const t = floatInput(b, x0);
  if (dtypeOf(w0) !== t) {
    fail(b, `input (${t}) and weight (${dtypeOf(w0)}) must have the same dtype`);
  }
  const batched = xd.length === nsp + 2;
  const xb = batched ? xd : [1, ...xd];
  const cin = xb[1]!;
  const g = o.groups;
  const kernel = wd.slice(2);
  let cout: number;
  if (transposed) {
    if (wd[0] !== cin) {
      fail(
        b,
        `given transposed=1, weight of size ${shapeString(wd)}, expected input` +
          `${shapeString(xb)} to have ${wd[0]} channels, but got ${cin} channels instead`,
      );
    }
    if (cin % g !== 0) {
      fail(b, `input channels (${cin}) must be divisible by groups (${g})`);
    }
    cout = wd[1]! * g;
  } else {
    if (wd[0]! % g !== 0) {
      fail(
        b,
        `given groups=${g}, expected weight to be divisible by ${g} at dimension 0, but got ` +
          `weight of size ${shapeString(wd)} instead`,
      );
    }
    if (wd[1]! * g !== cin) {
      fail(
        b,
        `given groups=${g}, weight of size ${shapeString(wd)}, expected input` +
          `${shapeString(xb)} to have ${wd[1]! * g} channels, but got ${cin} channels instead`,
      );
    }
    cout = wd[0]!;
  }
  if (bias !== undefined) {
    const bd = dimsOf(bias);
    if (bd.length !== 1 || bd[0] !== cout) {
      fail(
        b,
        `expected bias to be 1-dimensional with ${cout} elements, but got bias of size ` +
          `${shapeString(bd)} instead`,
      );
    }
    if (dtypeOf(bias) !== t) {
      fail(b, `bias (${dtypeOf(bias)}) must have the input's dtype (${t})`);
    }
  }
  const { stride, dilation } = o;
  let pads: [number, number][];
  if (o.padding === "same") {
    if (stride.some((s) => s !== 1)) {
      fail(b, `padding="same" is not supported for strided convolutions (stride ${stride})`);
    }
    pads = samePadding(kernel, dilation);
  } else if (o.padding === "valid") {
    pads = kernel.map(() => [0, 0]);
  } else {
    pads = o.padding.map((q) => [q, q]);
  }
  const inSp = xb.slice(2);
  const window: Partial<WindowDim>[] = [];
  const outSp: number[] = [];
  for (let i = 0; i < nsp; i++) {
    const k = kernel[i]!;
    const d = dilation[i]!;
    const s = stride[i]!;
    const [lo, hi] = pads[i]!;
    const span = d * (k - 1);
    if (transposed) {
      const op = o.outputPadding![i]!;
      if (op >= s && op >= d) {
        fail(
          b,
          `output padding must be smaller than either stride or dilation, but got ` +
            `outputPadding ${o.outputPadding}, stride ${stride}, dilation ${dilation}`,
        );
      }
      outSp.push((inSp[i]! - 1) * s - 2 * lo + span + op + 1);
      window.push({
        size: k,
        stride: 1,
        padLow: span - lo,
        padHigh: span - lo + op,
        windowDilation: d,
        baseDilation: s,
      });
    } else {
      const padded = inSp[i]! + lo + hi;
      outSp.push(padded < span + 1 ? 0 : Math.floor((padded - span - 1) / s) + 1);
      window.push({ size: k, stride: s, padLow: lo, padHigh: hi, windowDilation: d });
    }
  }
  if (outSp.some((n) => n <= 0)) {
    if (transposed) {
      fail(
        b,
        `given input size per channel (${sizes(inSp)}), the calculated output size per ` +
          `channel (${sizes(outSp)}) is too small`,
      );
    }
    const padded = inSp.map((n, i) => n + pads[i]![0] + pads[i]![1]);
    const eff = kernel.map((k, i) => dilation[i]! * (k - 1) + 1);
    fail(
      b,
      `calculated padded input size per channel (${sizes(padded)}) is smaller than the ` +
        `(dilated) kernel size (${sizes(eff)}); input ${shapeString(xd)}, weight ` +
        `${shapeString(wd)}`,
    );
  }
  const ct = computeType(t);
  const x = cast(b, batched ? x0 : b.reshape(x0, xb), ct);
  let w = cast(b, w0, ct);
  if (transposed) {
    // [cin, cout/g, k...] -> [cout, cin/g, k...] per group, spatially reversed.
    const sp = kernel.map((_, i) => i + 3);
    w = b.reshape(w, [g, cin / g, wd[1]!, ...kernel]);
    w = b.transpose(w, [0, 2, 1, ...sp]);
    w = b.reshape(w, [cout, cin / g, ...kernel]);
    w = b.reverse(
      w,
      kernel.map((_, i) => i + 2),
    );
  }
  const digits = kernel.map((_, i) => String(i)).join("");
  let y = b.convolution(x, w, {
    window,
    dims: `bf${digits}_oi${digits}->bf${digits}`,
    featureGroupCount: g,
  });
  if (bias !== undefined) y = b.add(y, along(b, cast(b, bias, ct), dimsOf(y), 1));
  y = cast(b, y, t);
  return batched ? y : b.reshape(y, dimsOf(y).slice(1));
}

function convSignature(n: number) {
  return [
    p.tensor("input"),
    p.tensor("weight"),
    p.tensor("bias").optional(),
    spatial("stride", n, 1).default(new Array<number>(n).fill(1)),
    convPadding(n).default(new Array<number>(n).fill(0)),
    spatial("dilation", n, 1).default(new Array<number>(n).fill(1)),
    p.int("groups", { min: 1 }).default(1),
  ] as const;
}

/** conv1d(input [N, Cin, L] or [Cin, L], weight [Cout, Cin/groups, k], bias?). */
export const conv1d = defineOp({
  name: "conv1d",
  signature: convSignature(1),
  lower: (b, inputs, o) => convolve(b, inputs, 1, o),
});

/** conv2d(input [N, Cin, H, W] or [Cin, H, W], weight [Cout, Cin/groups, kH, kW], bias?). */
export const conv2d = defineOp({
  name: "conv2d",
  signature: convSignature(2),
  lower: (b, inputs, o) => convolve(b, inputs, 2, o),
});

/** convTranspose2d(input, weight [Cin, Cout/groups, kH, kW], bias?), PyTorch's order. */
export const convTranspose2d = defineOp({
  name: "convTranspose2d",
  signature: [
    p.tensor("input"),
    p.tensor("weight"),
    p.tensor("bias").optional(),
    spatial("stride", 2, 1).default([1, 1]),
    spatial("padding", 2, 0).default([0, 0]),
    spatial("outputPadding", 2, 0).default([0, 0]),
    p.int("groups", { min: 1 }).default(1),
    spatial("dilation", 2, 1).default([1, 1]),
  ],
  lower: (b, inputs, o) => convolve(b, inputs, 2, o),
});

// ---- Pooling --------------------------------------------------------------------------------

interface PoolGeometry {
  /** Output size per spatial dim. */
  out: number[];
  /** The reduce-window dims for the whole input (size-1 windows on the leading dims). */
  window: Partial<WindowDim>[];
}

/** PyTorch's pooling_output_shape, ceil mode included (the last window must start inside). */
function poolOutputSize(
  n: number,
  k: number,
  pad: number,
  s: number,
  d: number,
  ceil: boolean,
): number {
  const num = n + 2 * pad - d * (k - 1) - 1 + (ceil ? s - 1 : 0);
  let out = Math.floor(num / s) + 1;
  if (ceil && (out - 1) * s >= n + pad) out--;
  return out;
}

/**
 * Checks a 2-D pooling call and computes its windows: the high padding is whatever makes the
 * reduce-window produce exactly PyTorch's output size (more than `padding` in ceil mode).
 */
function poolGeometry(
  b: ComputationBuilder,
  x: Instruction,
  kernel: readonly number[],
  strideIn: readonly number[] | undefined,
  padding: readonly number[],
  dilation: readonly number[],
  ceil: boolean,
): PoolGeometry {
  const xd = dimsOf(x);
  if (xd.length !== 3 && xd.length !== 4) {
    fail(b, `expected a 3-D (unbatched) or 4-D (batched) input, got shape ${shapeString(xd)}`);
  }
  const stride = strideIn === undefined || strideIn.length === 0 ? kernel : strideIn;
  const r = xd.length;
  const inSp = xd.slice(r - 2);
  if (xd.slice(1).some((n) => n === 0) || (r === 3 && xd[0] === 0)) {
    fail(b, `expected non-empty channel and spatial dims, got input of shape ${shapeString(xd)}`);
  }
  for (let i = 0; i < 2; i++) {
    if (padding[i]! > Math.floor(kernel[i]! / 2)) {
      fail(
        b,
        `pad should be at most half of kernel size, but got padding ${shapeString(padding)} ` +
          `and kernelSize ${shapeString(kernel)}`,
      );
    }
  }
  const out = inSp.map((n, i) =>
    poolOutputSize(n, kernel[i]!, padding[i]!, stride[i]!, dilation[i]!, ceil),
  );
  if (out.some((n) => n < 1)) {
    fail(
      b,
      `given input of shape ${shapeString(xd)}, the calculated output size ` +
        `(${sizes(out)}) is too small (kernelSize ${shapeString(kernel)}, padding ` +
        `${shapeString(padding)}, dilation ${shapeString(dilation)})`,
    );
  }
  const window: Partial<WindowDim>[] = xd.slice(0, r - 2).map(() => ({ size: 1 }));
  for (let i = 0; i < 2; i++) {
    const k = kernel[i]!;
    const d = dilation[i]!;
    const s = stride[i]!;
    const lo = padding[i]!;
    const needed = (out[i]! - 1) * s + d * (k - 1) + 1 - inSp[i]! - lo;
    // `lo` on the high side gives floor mode's count; ceil mode's extra window needs more.
    const hi = Math.max(lo, needed);
    window.push({ size: k, stride: s, padLow: lo, padHigh: hi, windowDilation: d });
  }
  return { out, window };
}

/** The lowest value of a dtype: the max-pool identity. */
function lowest(t: DType): number | bigint {
  switch (t) {
    case "int32":
      return -(2 ** 31);
    case "int64":
      return -(2n ** 63n);
    case "uint8":
      return 0;
    default:
      return -Infinity;
  }
}

function maxPoolInput(b: ComputationBuilder, x: Instruction): DType {
  const t = dtypeOf(x);
  if (!isFloatingDType(t) && !isIntegralDType(t)) {
    fail(b, `expected a floating point or integer input, got ${t}`);
  }
  return t;
}

const maxPoolSignature = [
  p.tensor("input"),
  spatial("kernelSize", 2, 1),
  spatial("stride", 2, 1, true).optional(),
  spatial("padding", 2, 0).default([0, 0]),
  spatial("dilation", 2, 1).default([1, 1]),
  p.bool("ceilMode").default(false),
] as const;

/** maxPool2d(input [N, C, H, W] or [C, H, W], kernelSize, stride = kernelSize, ...). */
export const maxPool2d = defineOp({
  name: "maxPool2d",
  signature: maxPoolSignature,
  lower(b, [x], { kernelSize, stride, padding, dilation, ceilMode }) {
    const t = maxPoolInput(b, x!);
    const geo = poolGeometry(b, x!, kernelSize, stride, padding, dilation, ceilMode);
    return b.reduceWindow(x!, constant(b, t, lowest(t)), geo.window, reducer(b, "max", t));
  },
});

/**
 * maxPool2d returning [values, indices] (PyTorch's max_pool2d_with_indices): each index is the
 * flat h * W + w position in its input plane (int64). Ties keep the first position in scan
 * order and NaN wins (the last NaN, as PyTorch's CPU kernel), via a variadic reduce-window.
 */
export const maxPool2dWithIndices = defineOp({
  name: "maxPool2dWithIndices",
  signature: maxPoolSignature,
  lower(b, [x], { kernelSize, stride, padding, dilation, ceilMode }) {
    const t = maxPoolInput(b, x!);
    const geo = poolGeometry(b, x!, kernelSize, stride, padding, dilation, ceilMode);
    const xd = dimsOf(x!);
    const r = xd.length;
    const [h, w] = xd.slice(r - 2) as [number, number];
    const plane = b.reshape(b.iota(arrayShape("s64", [h * w]), 0), [h, w]);
    const index = b.broadcast(plane, [...xd], [r - 2, r - 1]);
    const mb = b.moduleBuilder;
    if (!mb) fail(b, `needs a ComputationBuilder made by a ModuleBuilder`);
    const et = toElementType(t);
    const pick = mb.computation(mb.module.uniqueComputationName("max_with_index"), (c) => {
      const scalar = (type: ElementType) => arrayShape(type, []);
      const av = c.parameter(scalar(et));
      const ai = c.parameter(scalar("s64"));
      const bv = c.parameter(scalar(et));
      const bi = c.parameter(scalar("s64"));
      const aNaN = c.compare(av, av, "NE");
      const bNaN = c.compare(bv, bv, "NE");
      const later = c.compare(bi, ai, "GT");
      const earlier = c.compare(bi, ai, "LT");
      const greater = c.compare(bv, av, "GT");
      const tie = c.and(c.compare(bv, av, "EQ"), earlier);
      const bothNumbers = c.and(c.not(aNaN), c.not(bNaN));
      const takeB = c.or(
        c.and(bNaN, c.or(c.not(aNaN), later)),
        c.and(bothNumbers, c.or(greater, tie)),
      );
      return c.tuple([c.select(takeB, bv, av), c.select(takeB, bi, ai)]);
    });
    const both = b.reduceWindow(
      [x!, index],
      [constant(b, t, lowest(t)), constant(b, "int64", 2n ** 63n - 1n)],
      geo.window,
      pick,
    );
    return [b.getTupleElement(both, 0), b.getTupleElement(both, 1)];
  },
  // PyTorch's max_pool2d_with_indices_backward: each output's gradient is added at the input
  // position its index names (windows that overlap add up), within each plane.
  vjp(b, [x], [values, indices], [g]) {
    if (g === undefined) return [];
    const xd = dimsOf(x!);
    const od = dimsOf(values!);
    const r = xd.length;
    const plane = (dims: readonly number[]) => [...dims.slice(0, r - 2), dims[r - 2]! * dims[r - 1]!];
    const zeros = b.broadcast(constant(b, dtypeOf(x!), 0), plane(xd), []);
    const flat = scatterAddAlong(
      b,
      zeros,
      b.reshape(indices!, plane(od)),
      b.reshape(g, plane(od)),
      r - 2,
    );
    return [b.reshape(flat, [...xd])];
  },
});

/** PyTorch's avg-pool divisors along one dim (separable: the 2-D divisor is their product). */
function avgDivisors(
  n: number,
  out: number,
  k: number,
  s: number,
  pad: number,
  countIncludePad: boolean,
): number[] {
  const res: number[] = [];
  for (let o = 0; o < out; o++) {
    const start = o * s - pad;
    const end = Math.min(start + k, n + pad);
    res.push(
      countIncludePad ? end - start : Math.min(end, n) - Math.max(start, 0),
    );
  }
  return res;
}

/** avgPool2d(input, kernelSize, stride = kernelSize, padding, ceilMode, countIncludePad, ...). */
export const avgPool2d = defineOp({
  name: "avgPool2d",
  signature: [
    p.tensor("input"),
    spatial("kernelSize", 2, 1),
    spatial("stride", 2, 1, true).optional(),
    spatial("padding", 2, 0).default([0, 0]),
    p.bool("ceilMode").default(false),
    p.bool("countIncludePad").default(true),
    p.int("divisorOverride").optional(),
  ],
  lower(b, [x], { kernelSize, stride, padding, ceilMode, countIncludePad, divisorOverride }) {
    const t = floatInput(b, x!);
    if (divisorOverride === 0) fail(b, `divisorOverride must not be zero`);
    const geo = poolGeometry(b, x!, kernelSize, stride, padding, [1, 1], ceilMode);
    const ct = computeType(t);
    const xc = cast(b, x!, ct);
    const sum = b.reduceWindow(xc, constant(b, ct, 0), geo.window, reducer(b, "add", ct));
    const od = dimsOf(sum);
    const r = od.length;
    let divisor: Instruction;
    if (divisorOverride !== undefined) {
      divisor = filled(b, ct, divisorOverride, od);
    } else {
      const xd = dimsOf(x!);
      const st = geo.window.slice(r - 2).map((w) => w.stride!);
      const dh = avgDivisors(xd[r - 2]!, geo.out[0]!, kernelSize[0]!, st[0]!, padding[0]!,
        countIncludePad);
      const dw = avgDivisors(xd[r - 1]!, geo.out[1]!, kernelSize[1]!, st[1]!, padding[1]!,
        countIncludePad);
      divisor = b.multiply(
        along(b, vector(b, ct, dh), od, r - 2),
        along(b, vector(b, ct, dw), od, r - 1),
      );
    }
    return cast(b, b.divide(sum, divisor), t);
  },
});

/** PyTorch's adaptive pooling window of output `i` of `out` over `n` inputs: [start, end). */
function adaptiveWindow(i: number, out: number, n: number): [number, number] {
  return [Math.floor((i * n) / out), Math.ceil(((i + 1) * n) / out)];
}

/**
 * Sums of x over PyTorch's adaptive windows along `axis`: one reduce-window when the windows
 * tile the dim evenly, else a gather of the widest window's worth of rows per output with the
 * rows beyond each window masked to zero (a select, so NaN/inf elsewhere cannot leak in).
 */
function adaptiveSums(b: ComputationBuilder, x: Instruction, axis: number, out: number) {
  const dims = dimsOf(x);
  const n = dims[axis]!;
  const t = dtypeOf(x);
  if (n % out === 0) {
    const k = n / out;
    const window = dims.map((_, i) => (i === axis ? { size: k, stride: k } : { size: 1 }));
    return b.reduceWindow(x, constant(b, t, 0), window, reducer(b, "add", t));
  }
  const wins = Array.from({ length: out }, (_, i) => adaptiveWindow(i, out, n));
  const kmax = Math.max(...wins.map(([s, e]) => e - s));
  const idx: number[] = [];
  const keep: boolean[] = [];
  for (const [s, e] of wins) {
    for (let j = 0; j < kmax; j++) {
      idx.push(Math.min(s + j, n - 1));
      keep.push(s + j < e);
    }
  }
  const split = [...dims.slice(0, axis), out, kmax, ...dims.slice(axis + 1)];
  const rows = b.reshape(takeAlong(b, x, axis, idx), split);
  const mask = b.broadcast(b.constant(literal("pred", [out, kmax], keep)), split, [
    axis,
    axis + 1,
  ]);
  return sumOver(b, b.select(mask, rows, filledLike(b, rows, 0)), [axis + 1]);
}

/** Counts of PyTorch's adaptive windows along one dim. */
function adaptiveCounts(n: number, out: number): number[] {
  return Array.from({ length: out }, (_, i) => {
    const [s, e] = adaptiveWindow(i, out, n);
    return e - s;
  });
}

const outputSizeParam = p.custom<
  "outputSize",
  number | readonly (number | null)[],
  (number | null)[]
>("outputSize", (v) => {
  const what = "an integer >= 1 or a list of 2 (each an integer >= 1 or null)";
  const list: unknown = typeof v === "number" ? [v, v] : v;
  if (!Array.isArray(list) || list.length !== 2) return problem(`must be ${what}`);
  return list.map((x: unknown) => {
    if (x === null || x === undefined) return null;
    if (typeof x !== "number" || !Number.isInteger(x) || x < 1) problem(`must be ${what}`);
    return x as number;
  });
});

/** adaptiveAvgPool2d(input, outputSize): PyTorch's windows floor(i*n/out) .. ceil((i+1)*n/out). */
export const adaptiveAvgPool2d = defineOp({
  name: "adaptiveAvgPool2d",
  signature: [p.tensor("input"), outputSizeParam],
  lower(b, [x], { outputSize }) {
    const t = floatInput(b, x!);
    const xd = dimsOf(x!);
    const r = xd.length;
    if (r !== 3 && r !== 4) {
      fail(b, `expected a 3-D (unbatched) or 4-D (batched) input, got shape ${shapeString(xd)}`);
    }
    if (xd.slice(1).some((n) => n === 0)) {
      fail(b, `expected input to have non-zero size for non-batch dims, got ${shapeString(xd)}`);
    }
    const inSp = xd.slice(r - 2);
    const out = outputSize.map((o, i) => o ?? inSp[i]!);
    const ct = computeType(t);
    let y = cast(b, x!, ct);
    y = adaptiveSums(b, y, r - 2, out[0]!);
    y = adaptiveSums(b, y, r - 1, out[1]!);
    // PyTorch divides the window sum by kh, then by kw.
    const od = dimsOf(y);
    y = b.divide(y, along(b, vector(b, ct, adaptiveCounts(inSp[0]!, out[0]!)), od, r - 2));
    y = b.divide(y, along(b, vector(b, ct, adaptiveCounts(inSp[1]!, out[1]!)), od, r - 1));
    return cast(b, y, t);
  },
});

// ---- Normalization --------------------------------------------------------------------------

/** The trailing dims `normalizedShape` names; the input must end with them. */
function normalizedDims(
  b: ComputationBuilder,
  x: Instruction,
  normalizedShape: readonly number[],
): number[] {
  const xd = dimsOf(x);
  const k = normalizedShape.length;
  if (k === 0) fail(b, `normalizedShape must name at least one dim, got []`);
  const tail = xd.slice(xd.length - k);
  if (xd.length < k || tail.some((d, i) => d !== normalizedShape[i])) {
    fail(
      b,
      `given normalizedShape ${shapeString(normalizedShape)}, expected input with shape ` +
        `[*, ${normalizedShape.join(", ")}], but got input of shape ${shapeString(xd)}`,
    );
  }
  return normalizedShape.map((_, i) => xd.length - k + i);
}

/** Checks an affine parameter (weight or bias) has exactly `shape`. */
function checkAffine(
  b: ComputationBuilder,
  v: Instruction | undefined,
  what: string,
  shape: readonly number[],
  x: Instruction,
): void {
  if (v === undefined) return;
  const vd = dimsOf(v);
  if (vd.length !== shape.length || vd.some((d, i) => d !== shape[i])) {
    fail(
      b,
      `expected ${what} of shape ${shapeString(shape)} for input of shape ` +
        `${shapeString(dimsOf(x))}, got ${what} of shape ${shapeString(vd)}`,
    );
  }
  if (!isFloatingDType(dtypeOf(v))) fail(b, `${what} must be floating point, got ${dtypeOf(v)}`);
}

/**
 * A weight of ones when only a bias was given, so the lowering can tell which optional
 * operands are present by counting them (weight first, as in the signature).
 */
function onesForMissingWeight<A extends { weight?: Tensor; bias?: Tensor }>(
  a: A,
  shape: () => readonly number[],
  dtype: DType,
): A {
  if (a.weight !== undefined || a.bias === undefined) return a;
  return { ...a, weight: ones([...shape()], { dtype }) };
}

/** Applies `y * weight + bias`, each broadcast with `place` (weight and bias in order). */
function affine(
  b: ComputationBuilder,
  y: Instruction,
  [weight, bias]: readonly (Instruction | undefined)[],
  place: (v: Instruction) => Instruction,
): Instruction {
  const ct = dtypeOf(y);
  let r = y;
  if (weight !== undefined) r = b.multiply(r, place(cast(b, weight, ct)));
  if (bias !== undefined) r = b.add(r, place(cast(b, bias, ct)));
  return r;
}

/** layerNorm(input, normalizedShape, weight?, bias?, eps = 1e-5) over the trailing dims. */
export const layerNorm = defineOp({
  name: "layerNorm",
  signature: [
    p.tensor("input"),
    p.ints("normalizedShape", { min: 0 }),
    p.tensor("weight").optional(),
    p.tensor("bias").optional(),
    p.number("eps").default(1e-5),
  ],
  normalize: (a) => onesForMissingWeight(a, () => a.normalizedShape, a.bias?.dtype ?? "float32"),
  lower(b, [x, ...aff], { normalizedShape, eps }) {
    const t = floatInput(b, x!);
    const dims = normalizedDims(b, x!, normalizedShape);
    for (const [i, v] of aff.entries()) {
      checkAffine(b, v, i === 0 ? "weight" : "bias", normalizedShape, x!);
    }
    const xc = cast(b, x!, computeType(t));
    const full = dimsOf(xc);
    const { variance, centered } = moments(b, xc, dims);
    const y = b.multiply(centered, expandBack(b, rstdOf(b, variance, eps), full, dims));
    const k = dims.length;
    const r = full.length;
    const place = (v: Instruction) =>
      b.broadcast(v, [...full], Array.from({ length: k }, (_, i) => r - k + i));
    return cast(b, affine(b, y, aff, place), t);
  },
});

/** machine epsilon of a float dtype (torch.finfo(dtype).eps). */
function finfoEps(t: DType): number {
  switch (t) {
    case "float16":
      return 2 ** -10;
    case "bfloat16":
      return 2 ** -7;
    default:
      return 2 ** -23;
  }
}

/**
 * rmsNorm(input, normalizedShape, weight?, eps = torch.finfo(input.dtype).eps):
 * x * rsqrt(mean(x^2) + eps) * weight, as PyTorch 2.4's rms_norm.
 */
export const rmsNorm = defineOp({
  name: "rmsNorm",
  signature: [
    p.tensor("input"),
    p.ints("normalizedShape", { min: 0 }),
    p.tensor("weight").optional(),
    p.number("eps").optional(),
  ],
  lower(b, [x, weight], { normalizedShape, eps }) {
    const t = floatInput(b, x!);
    const dims = normalizedDims(b, x!, normalizedShape);
    checkAffine(b, weight, "weight", normalizedShape, x!);
    const xc = cast(b, x!, computeType(t));
    const full = dimsOf(xc);
    const ms = sumOver(b, b.multiply(xc, xc), dims);
    const mean = b.divide(ms, filledLike(b, ms, reducedCount(xc, dims)));
    let y = b.multiply(xc, expandBack(b, rstdOf(b, mean, eps ?? finfoEps(t)), full, dims));
    if (weight !== undefined) {
      const k = dims.length;
      const r = full.length;
      const w = cast(b, weight, computeType(t));
      y = b.multiply(y, b.broadcast(w, [...full], Array.from({ length: k }, (_, i) => r - k + i)));
    }
    return cast(b, y, t);
  },
});

/** groupNorm(input [N, C, *], numGroups, weight? [C], bias? [C], eps = 1e-5). */
export const groupNorm = defineOp({
  name: "groupNorm",
  signature: [
    p.tensor("input"),
    p.int("numGroups", { min: 1 }),
    p.tensor("weight").optional(),
    p.tensor("bias").optional(),
    p.number("eps").default(1e-5),
  ],
  normalize: (a) =>
    onesForMissingWeight(a, () => [a.input.shape[1] ?? 0], a.bias?.dtype ?? "float32"),
  lower(b, [x, ...aff], { numGroups, eps }) {
    const t = floatInput(b, x!);
    const xd = dimsOf(x!);
    if (xd.length < 2) fail(b, `expected an input with at least 2 dims, got ${shapeString(xd)}`);
    const [n, c] = xd as [number, number];
    if (c % numGroups !== 0) {
      fail(
        b,
        `expected the number of channels in input to be divisible by numGroups, but got ` +
          `input of shape ${shapeString(xd)} and numGroups=${numGroups}`,
      );
    }
    for (const [i, v] of aff.entries()) checkAffine(b, v, i === 0 ? "weight" : "bias", [c], x!);
    const ct = computeType(t);
    const groupSize = (c / numGroups) * numelOf(xd.slice(2));
    const grouped = b.reshape(cast(b, x!, ct), [n, numGroups, groupSize]);
    const { variance, centered } = moments(b, grouped, [2]);
    const rstd = expandBack(b, rstdOf(b, variance, eps), dimsOf(grouped), [2]);
    const normed = b.multiply(centered, rstd);
    const y = b.reshape(normed, [...xd]);
    return cast(b, affine(b, y, aff, (v) => along(b, v, xd, 1)), t);
  },
});

/**
 * batchNorm(input [N, C, *], runningMean?, runningVar?, weight?, bias?, training = false,
 * momentum = 0.1, eps = 1e-5). Inference normalizes with the running statistics; training
 * with the batch's (biased variance), forward only: Kiln tensors are immutable, so the running
 * statistics are not updated (a module keeps them; see nn.BatchNorm2d).
 */
export const batchNorm = defineOp({
  name: "batchNorm",
  signature: [
    p.tensor("input"),
    p.tensor("runningMean").optional(),
    p.tensor("runningVar").optional(),
    p.tensor("weight").optional(),
    p.tensor("bias").optional(),
    p.bool("training").default(false),
    p.number("momentum").default(0.1),
    p.number("eps").default(1e-5),
  ],
  normalize(a) {
    const xd = a.input.shape;
    const op = "batchNorm";
    if (xd.length < 2) {
      throw new OpError(op, `expected an input with at least 2 dims, got ${shapeString(xd)}`);
    }
    const c = xd[1]!;
    for (const [name, v] of [
      ["runningMean", a.runningMean],
      ["runningVar", a.runningVar],
      ["weight", a.weight],
      ["bias", a.bias],
    ] as const) {
      if (v !== undefined && (v.ndim !== 1 || v.shape[0] !== c)) {
        throw new OpError(
          op,
          `${name} should contain ${c} elements (one per channel of input ` +
            `${shapeString(xd)}), got shape ${shapeString(v.shape)}`,
        );
      }
    }
    if ((a.runningMean === undefined) !== (a.runningVar === undefined)) {
      throw new OpError(op, `runningMean and runningVar must be given together`);
    }
    if (!a.training && a.runningMean === undefined) {
      throw new OpError(op, `runningMean and runningVar must be given when not training`);
    }
    if (a.training && numelOf(xd) / c <= 1) {
      throw new OpError(
        op,
        `expected more than 1 value per channel when training, got input of shape ` +
          `${shapeString(xd)}`,
      );
    }
    // Training ignores the running statistics (they would only be updated).
    const stats = a.training ? { runningMean: undefined, runningVar: undefined } : {};
    return onesForMissingWeight({ ...a, ...stats }, () => [c], a.bias?.dtype ?? "float32");
  },
  lower(b, inputs, { training, eps }) {
    const [x, ...rest] = inputs as [Instruction, ...Instruction[]];
    const t = floatInput(b, x);
    const ct = computeType(t);
    const xd = dimsOf(x);
    const xc = cast(b, x, ct);
    const statDims = xd.map((_, i) => i).filter((i) => i !== 1);
    let mean: Instruction;
    let invstd: Instruction;
    let aff: Instruction[];
    if (training) {
      const m = moments(b, xc, statDims);
      mean = m.mean;
      invstd = rstdOf(b, m.variance, eps);
      aff = rest;
    } else {
      const [rm, rv, ...a] = rest as [Instruction, Instruction, ...Instruction[]];
      floatInput(b, rm, "runningMean");
      floatInput(b, rv, "runningVar");
      mean = cast(b, rm, ct);
      invstd = rstdOf(b, cast(b, rv, ct), eps);
      aff = a;
    }
    for (const v of aff) floatInput(b, v, "weight and bias");
    // PyTorch's CPU form: y = x * alpha + beta, alpha = weight * invstd, beta = bias - mean*alpha.
    const [weight, bias] = aff;
    const alpha = weight === undefined ? invstd : b.multiply(cast(b, weight, ct), invstd);
    const shift = b.multiply(mean, alpha);
    const beta = bias === undefined ? b.negate(shift) : b.subtract(cast(b, bias, ct), shift);
    const y = b.add(b.multiply(xc, along(b, alpha, xd, 1)), along(b, beta, xd, 1));
    return cast(b, y, t);
  },
});

// ---- Dropout and attention ------------------------------------------------------------------

/**
 * A lowering used only by this file's decompositions: not registered (the public op of the same
 * name is the decomposition), so its instructions carry the public op's name in metadata.
 */
function privateLowering<const Ps extends readonly AnyParam[]>(def: {
  name: string;
  signature: Ps;
  lower: (b: ComputationBuilder, inputs: Instruction[], attrs: AttrsOf<Ps>) => Instruction;
}): (...args: CallForms<Ps>) => Tensor {
  const lowering: Lowering = {
    kind: "lowering",
    name: def.name,
    signature: def.signature,
    lower: def.lower as unknown as Lowering["lower"],
  };
  return (...args) => callOp(lowering, args) as Tensor;
}

/**
 * x * noise with noise = (u < 1 - p) / (1 - p) in x's dtype, which is PyTorch's
 * `bernoulli_(1 - p).div_(1 - p)` followed by a multiply (so a dropped NaN stays NaN).
 */
function dropoutNoise(b: ComputationBuilder, u: Instruction, dropP: number, t: DType) {
  const ct = computeType(t);
  const keep = b.compare(u, filledLike(b, u, Math.fround(1 - dropP)), "LT");
  // The scale is rounded to the tensor's dtype first, as PyTorch's noise tensor is.
  const scaleValue = dropP === 1 ? 0 : Math.fround(1 / Math.fround(1 - dropP));
  const scale = cast(b, constant(b, t, scaleValue), ct);
  const d = dimsOf(u);
  return b.select(keep, b.broadcast(scale, [...d], []), filled(b, ct, 0, d));
}

const applyDropout = privateLowering({
  name: "dropout",
  signature: [p.tensor("input"), p.tensor("uniform"), p.number("p")],
  lower(b, [x, u], { p: dropP }) {
    const t = dtypeOf(x!);
    const xc = cast(b, x!, computeType(t));
    return cast(b, b.multiply(xc, dropoutNoise(b, u!, dropP, t)), t);
  },
});

function checkProbability(op: string, name: string, v: number): void {
  if (!(v >= 0 && v <= 1)) {
    throw new ArgumentError(op, name, `must be a probability between 0 and 1, got ${v}`);
  }
}

/**
 * dropout(input, p = 0.5, training = true): when training, zeroes each element with
 * probability p and scales the rest by 1/(1-p), drawing from the default generator
 * (`manualSeed` makes it reproducible); otherwise the input itself.
 */
export const dropout = defineDecomposition({
  name: "dropout",
  signature: [p.tensor("input"), p.number("p").default(0.5), p.bool("training").default(true)],
  decompose({ input, p: dropP, training }) {
    checkProbability("dropout", "p", dropP);
    if (!isFloatingDType(input.dtype)) {
      throw new OpError("dropout", `input must be a floating point tensor, got ${input.dtype}`);
    }
    if (!training || dropP === 0 || input.numel() === 0) return input;
    return applyDropout(input, rand([...input.shape]), dropP);
  },
});

const attention = privateLowering({
  name: "scaledDotProductAttention",
  signature: [
    p.tensor("query"),
    p.tensor("key"),
    p.tensor("value"),
    p.tensor("attnMask").optional(),
    p.tensor("uniform").optional(),
    p.bool("hasMask"),
    p.number("dropoutP"),
    p.bool("isCausal"),
    p.number("scale"),
  ],
  lower(b, inputs, { hasMask, dropoutP, isCausal, scale }) {
    const [q0, k0, v0] = inputs as [Instruction, Instruction, Instruction];
    const mask = hasMask ? inputs[3] : undefined;
    const u = dropoutP > 0 ? inputs[hasMask ? 4 : 3] : undefined;
    const t = dtypeOf(q0);
    const ct = computeType(t);
    const qd = dimsOf(q0);
    const kd = dimsOf(k0);
    const vd = dimsOf(v0);
    const L = qd[qd.length - 2]!;
    const E = qd[qd.length - 1]!;
    const S = kd[kd.length - 2]!;
    const Ev = vd[vd.length - 1]!;
    const batch = broadcastShapes(opName(b), qd.slice(0, -2), kd.slice(0, -2), vd.slice(0, -2));
    const nb = batch.length;
    const bd = Array.from({ length: nb }, (_, i) => i);
    const widen = (x: Instruction, tail: number[]) => {
      const d = dimsOf(x);
      const target = [...batch, ...tail];
      const lead = target.length - d.length;
      const kept: number[] = [];
      const map: number[] = [];
      d.forEach((s, i) => {
        if (s === target[lead + i]) {
          kept.push(s);
          map.push(lead + i);
        }
      });
      const squeezed = kept.length === d.length ? x : b.reshape(x, kept);
      return lead === 0 && kept.length === d.length ? x : b.broadcast(squeezed, target, map);
    };
    const q = widen(cast(b, q0, ct), [L, E]);
    const k = widen(cast(b, k0, ct), [S, E]);
    const v = widen(cast(b, v0, ct), [S, Ev]);
    const wd = [...batch, L, S];
    let scores = b.dot(q, k, {
      lhsBatch: bd,
      rhsBatch: bd,
      lhsContracting: [nb + 1],
      rhsContracting: [nb + 1],
    });
    scores = b.multiply(scores, filledLike(b, scores, Math.fround(scale)));
    // PyTorch's reference: a bias of zeros, -inf where masked out, or the float mask added.
    let bias: Instruction | undefined;
    const negInf = filled(b, ct, -Infinity, wd);
    const zeros = filled(b, ct, 0, wd);
    if (isCausal) {
      const row = b.iota(arrayShape("s32", wd), nb);
      const col = b.iota(arrayShape("s32", wd), nb + 1);
      bias = b.select(b.compare(col, row, "LE"), zeros, negInf);
    }
    if (mask !== undefined) {
      const m = widen(mask, [L, S]);
      if (dtypeOf(mask) === "bool") bias = b.select(m, bias ?? zeros, negInf);
      else bias = b.add(cast(b, m, ct), bias ?? zeros);
    }
    if (bias !== undefined) scores = b.add(scores, bias);
    let weights = softmaxLower(b, scores, nb + 1);
    if (u !== undefined) {
      weights = b.multiply(weights, dropoutNoise(b, widen(u, [L, S]), dropoutP, t));
    }
    const out = b.dot(weights, v, {
      lhsBatch: bd,
      rhsBatch: bd,
      lhsContracting: [nb + 1],
      rhsContracting: [nb],
    });
    return cast(b, out, t);
  },
});

/**
 * scaledDotProductAttention(query [..., L, E], key [..., S, E], value [..., S, Ev], attnMask?,
 * dropoutP = 0, isCausal = false, scale = 1/sqrt(E)): softmax(q k^T * scale + bias) v, with
 * PyTorch's reference semantics: a bool mask keeps where true (-inf elsewhere), a float mask is
 * added, isCausal masks above the diagonal; batch dims broadcast. Dropout on the attention
 * weights (when dropoutP > 0) draws from the default generator.
 */
export const scaledDotProductAttention = defineDecomposition({
  name: "scaledDotProductAttention",
  signature: [
    p.tensor("query"),
    p.tensor("key"),
    p.tensor("value"),
    p.tensor("attnMask").optional(),
    p.number("dropoutP").default(0),
    p.bool("isCausal").default(false),
    p.number("scale").optional(),
  ],
  decompose({ query, key, value, attnMask, dropoutP, isCausal, scale }) {
    const op = "scaledDotProductAttention";
    checkProbability(op, "dropoutP", dropoutP);
    const shapes =
      `query ${shapeString(query.shape)}, key ${shapeString(key.shape)}, ` +
      `value ${shapeString(value.shape)}`;
    if (query.ndim < 2 || key.ndim < 2 || value.ndim < 2) {
      throw new OpError(op, `query, key and value need at least 2 dims, got ${shapes}`);
    }
    if (query.dtype !== key.dtype || query.dtype !== value.dtype) {
      throw new OpError(
        op,
        `expected query, key and value to have the same dtype, got ${query.dtype}, ` +
          `${key.dtype} and ${value.dtype}`,
      );
    }
    if (!isFloatingDType(query.dtype)) {
      throw new OpError(op, `expected floating point inputs, got ${query.dtype}`);
    }
    const E = query.shape[query.ndim - 1]!;
    const L = query.shape[query.ndim - 2]!;
    const S = key.shape[key.ndim - 2]!;
    if (key.shape[key.ndim - 1] !== E) {
      throw new OpError(op, `query and key must have the same last dim (${E}), got ${shapes}`);
    }
    if (value.shape[value.ndim - 2] !== S) {
      throw new OpError(
        op,
        `key and value must have the same sequence length (${S}), got ${shapes}`,
      );
    }
    const qk = broadcastShapes(op, query.shape.slice(0, -2), key.shape.slice(0, -2));
    broadcastShapes(op, qk, value.shape.slice(0, -2));
    if (attnMask !== undefined) {
      if (isCausal) throw new OpError(op, `attnMask must not be given when isCausal is true`);
      if (attnMask.dtype !== "bool" && attnMask.dtype !== query.dtype) {
        throw new OpError(
          op,
          `attnMask must be bool or the query's dtype (${query.dtype}), got ${attnMask.dtype}`,
        );
      }
      const target = [...qk, L, S];
      const grown = broadcastShapes(op, target, attnMask.shape);
      if (grown.length !== target.length || grown.some((d, i) => d !== target[i])) {
        throw new OpError(
          op,
          `attnMask of shape ${shapeString(attnMask.shape)} does not broadcast to the ` +
            `attention weights' shape ${shapeString(target)}`,
        );
      }
    }
    const uniform = dropoutP > 0 ? rand([...qk, L, S]) : undefined;
    return attention(query, key, value, attnMask, uniform, {
      hasMask: attnMask !== undefined,
      dropoutP,
      isCausal,
      scale: scale ?? 1 / Math.sqrt(E),
    });
  },
});

// ---- Losses ---------------------------------------------------------------------------------

/** The class dim of a loss input: 0 for an unbatched [C] input, else 1. */
function classAxis(x: Instruction): number {
  return rankOf(x) === 1 ? 0 : 1;
}

/** Checks a class-index target against the input ([N, C, d...] with [N, d...], [C] with []). */
function checkIndexTarget(b: ComputationBuilder, x: Instruction, target: Instruction): void {
  const xd = dimsOf(x);
  const td = dimsOf(target);
  const tt = dtypeOf(target);
  if (!isIntegralDType(tt)) {
    fail(b, `expected a target of class indices (int64, int32 or uint8), got ${tt}`);
  }
  if (xd.length === 0) fail(b, `expected an input with at least 1 dim, got []`);
  if (xd.length === 1) {
    if (td.length !== 0) {
      fail(
        b,
        `expected a 0-D target for a 1-D input ${shapeString(xd)}, got ${shapeString(td)}`,
      );
    }
    return;
  }
  const want = [xd[0]!, ...xd.slice(2)];
  if (td.length > 0 && td[0] !== xd[0]) {
    fail(b, `expected input batch size (${xd[0]}) to match target batch size (${td[0]})`);
  }
  if (td.length !== want.length || td.some((d, i) => d !== want[i])) {
    fail(b, `expected target of shape ${shapeString(want)}, got ${shapeString(td)}`);
  }
}

function checkClassWeight(b: ComputationBuilder, x: Instruction, w: Instruction | undefined) {
  if (w === undefined) return;
  const c = dimsOf(x)[classAxis(x)]!;
  const wd = dimsOf(w);
  if (wd.length !== 1 || wd[0] !== c) {
    fail(
      b,
      `weight should be defined for all ${c} classes or no classes, but got weight of ` +
        `shape ${shapeString(wd)}`,
    );
  }
  floatInput(b, w, "weight");
}

/**
 * nll_loss on log-probabilities `logp` (compute type) with class indices: per element
 * -logp[target] * weight[target] (0 where target == ignoreIndex), then reduced; the mean
 * divides by the total weight of the non-ignored targets (NaN when there are none).
 * Indices outside [0, C) are treated as ignored (eager calls reject them before lowering).
 */
function nllLower(
  b: ComputationBuilder,
  logp: Instruction,
  target: Instruction,
  weight: Instruction | undefined,
  ignoreIndex: number,
  reduction: Reduction,
) {
  const full = dimsOf(logp);
  const ax = classAxis(logp);
  const ct = dtypeOf(logp);
  const tgt = cast(b, target, "int64");
  const tdims = dimsOf(tgt);
  const others = full.map((_, i) => i).filter((i) => i !== ax);
  const onehot = b.compare(
    b.iota(arrayShape("s64", full), ax),
    b.broadcast(tgt, [...full], others),
    "EQ",
  );
  const zeros = filledLike(b, logp, 0);
  const picked = sumOver(b, b.select(onehot, logp, zeros), [ax]);
  const notIgnored = b.compare(tgt, filled(b, "int64", ignoreIndex, tdims), "NE");
  const inRange = b.and(
    b.compare(tgt, filled(b, "int64", 0, tdims), "GE"),
    b.compare(tgt, filled(b, "int64", full[ax]!, tdims), "LT"),
  );
  const valid = b.and(notIgnored, inRange);
  const tz = filled(b, ct, 0, tdims);
  let wt: Instruction;
  let loss: Instruction;
  if (weight !== undefined) {
    const wf = along(b, cast(b, weight, ct), full, ax);
    wt = b.select(valid, sumOver(b, b.select(onehot, wf, zeros), [ax]), tz);
    loss = b.select(valid, b.multiply(b.negate(picked), wt), tz);
  } else {
    wt = b.select(valid, filled(b, ct, 1, tdims), tz);
    loss = b.select(valid, b.negate(picked), tz);
  }
  const all = tdims.map((_, i) => i);
  const total = sumOver(b, wt, all);
  return { loss: reduceLoss(b, loss, reduction, total), valid, total };
}

/**
 * In a program that collects index checks (lazy mode, compile()): the same check on the
 * target's values, raised after the run (tensor/index_checks.ts).
 */
function checkTargetRange(
  b: ComputationBuilder,
  x: Instruction,
  target: Instruction,
  ignoreIndex: number,
): void {
  const xd = dimsOf(x);
  const c = xd[xd.length === 1 ? 0 : 1]!;
  checkInRange(b, target, 0, c, opName(b), (v, n) =>
    `target ${v} is out of bounds for ${n} classes`, ignoreIndex);
}

/** Eager only: a concrete class-index target's values must be classes or ignoreIndex. */
function checkTargetValues(
  op: string,
  input: Tensor,
  target: Tensor,
  ignoreIndex: number,
): void {
  if (!(target.impl instanceof ConcreteImpl) || !isIntegralDType(target.dtype)) return;
  if (input.ndim === 0 || input.ndim === target.ndim) return; // probabilities or a shape error
  const c = input.shape[input.ndim === 1 ? 0 : 1]!;
  const data = target.impl.storage as ArrayLike<number | bigint>;
  for (let i = 0; i < data.length; i++) {
    const v = Number(data[i]!);
    if (v !== ignoreIndex && (v < 0 || v >= c)) {
      throw new OpError(op, `target ${v} is out of bounds for ${c} classes`);
    }
  }
}

/** nllLoss(input log-probabilities [N, C, d...] or [C], target, weight?, ignoreIndex, ...). */
export const nllLoss = defineOp({
  name: "nllLoss",
  signature: [
    p.tensor("input"),
    p.tensor("target"),
    p.tensor("weight").optional(),
    p.int("ignoreIndex").default(-100),
    reductionParam,
  ],
  normalize(a) {
    checkTargetValues("nllLoss", a.input, a.target, a.ignoreIndex);
    return a;
  },
  lower(b, [x, target, weight], { ignoreIndex, reduction }) {
    const t = floatInput(b, x!);
    checkIndexTarget(b, x!, target!);
    checkTargetRange(b, x!, target!, ignoreIndex);
    checkClassWeight(b, x!, weight);
    const { loss } = nllLower(b, cast(b, x!, computeType(t)), target!, weight, ignoreIndex,
      reduction);
    return cast(b, loss, t);
  },
});

/**
 * crossEntropy(input logits [N, C, d...] or [C], target, weight?, ignoreIndex = -100,
 * reduction = "mean", labelSmoothing = 0). A target of the input's shape holds class
 * probabilities; otherwise class indices. PyTorch's formulas, label smoothing included.
 */
export const crossEntropy = defineOp({
  name: "crossEntropy",
  signature: [
    p.tensor("input"),
    p.tensor("target"),
    p.tensor("weight").optional(),
    p.int("ignoreIndex").default(-100),
    reductionParam,
    p.number("labelSmoothing").default(0),
  ],
  normalize(a) {
    checkProbability("crossEntropy", "labelSmoothing", a.labelSmoothing);
    checkTargetValues("crossEntropy", a.input, a.target, a.ignoreIndex);
    return a;
  },
  lower(b, [x, target, weight], { ignoreIndex, reduction, labelSmoothing: eps }) {
    const t = floatInput(b, x!);
    const ct = computeType(t);
    const xd = dimsOf(x!);
    if (xd.length === 0) fail(b, `expected an input with at least 1 dim, got []`);
    checkClassWeight(b, x!, weight);
    const ax = classAxis(x!);
    const nClasses = xd[ax]!;
    const logp = logSoftmaxLower(b, cast(b, x!, ct), ax);
    const td = dimsOf(target!);
    const probs = td.length === xd.length && td.every((d, i) => d === xd[i]);
    if (probs) {
      floatInput(b, target!, "a target of class probabilities");
      if (ignoreIndex >= 0) fail(b, `ignoreIndex is not supported for class-probability targets`);
      let tg = cast(b, target!, ct);
      if (eps > 0) {
        tg = b.add(
          b.multiply(tg, filledLike(b, tg, Math.fround(1 - eps))),
          filledLike(b, tg, Math.fround(eps / nClasses)),
        );
      }
      let prod = b.multiply(logp, tg);
      if (weight !== undefined) prod = b.multiply(prod, along(b, cast(b, weight, ct), xd, ax));
      if (reduction === "none") return cast(b, b.negate(sumOver(b, prod, [ax])), t);
      const s = b.negate(sumOver(b, prod, xd.map((_, i) => i)));
      if (reduction === "sum") return cast(b, s, t);
      return cast(b, b.divide(s, filledLike(b, s, numelOf(xd) / Math.max(nClasses, 1))), t);
    }
    checkIndexTarget(b, x!, target!);
    checkTargetRange(b, x!, target!, ignoreIndex);
    const nll = nllLower(b, logp, target!, weight, ignoreIndex, reduction);
    if (!(eps > 0)) return cast(b, nll.loss, t);
    let sm = logp;
    if (weight !== undefined) sm = b.multiply(sm, along(b, cast(b, weight, ct), xd, ax));
    const smooth0 = b.negate(sumOver(b, sm, [ax]));
    const smooth = b.select(nll.valid, smooth0, filledLike(b, smooth0, 0));
    let ret: Instruction;
    if (reduction === "none") {
      ret = smooth;
    } else {
      const s = sumOver(b, smooth, dimsOf(smooth).map((_, i) => i));
      if (reduction === "sum") {
        ret = s;
      } else if (weight !== undefined) {
        ret = b.divide(s, nll.total);
      } else {
        const count = sumOver(
          b,
          b.select(nll.valid, filledLike(b, smooth, 1), filledLike(b, smooth, 0)),
          dimsOf(smooth).map((_, i) => i),
        );
        ret = b.divide(s, count);
      }
    }
    const lossPart = b.multiply(nll.loss, filledLike(b, nll.loss, Math.fround(1 - eps)));
    const smoothPart = b.multiply(ret, filledLike(b, ret, Math.fround(eps / nClasses)));
    return cast(b, b.add(lossPart, smoothPart), t);
  },
});

/** mseLoss(input, target, reduction = "mean"): (input - target)^2, broadcasting as PyTorch. */
export const mseLoss = defineOp({
  name: "mseLoss",
  signature: [p.tensor("input"), p.tensor("target"), reductionParam],
  lower(b, [x, y], { reduction }) {
    const t = resultTypeOf([x!, y!]);
    if (!isFloatingDType(t)) {
      fail(b, `expected floating point input and target, got ${dtypeOf(x!)} and ${dtypeOf(y!)}`);
    }
    const ct = computeType(t);
    const shape = broadcastShapes(opName(b), dimsOf(x!), dimsOf(y!));
    const bc = (v: Instruction) => {
      const c = cast(b, v, ct);
      const d = dimsOf(c);
      if (d.length === shape.length && d.every((s, i) => s === shape[i])) return c;
      const lead = shape.length - d.length;
      const kept: number[] = [];
      const map: number[] = [];
      d.forEach((s, i) => {
        if (s === shape[lead + i]) {
          kept.push(s);
          map.push(lead + i);
        }
      });
      return b.broadcast(kept.length === d.length ? c : b.reshape(c, kept), shape, map);
    };
    const diff = b.subtract(bc(x!), bc(y!));
    return cast(b, reduceLoss(b, b.multiply(diff, diff), reduction), t);
  },
});

// ---- Interpolation --------------------------------------------------------------------------

const f = Math.fround;

/** PyTorch's compute_scales_value: 1/scale when a scale was given, else in/out (float). */
function scalesValue(scale: number | undefined, n: number, out: number): number {
  return scale !== undefined && scale > 0 ? f(1 / scale) : f(f(n) / f(out));
}

/** Source index of output `i` for mode "nearest" (PyTorch's nearest_idx, in float). */
function nearestIndex(i: number, n: number, out: number, scale: number | undefined): number {
  if (out === n) return i;
  if (out === 2 * n) return i >> 1;
  const s = scalesValue(scale, n, out);
  return Math.min(Math.floor(f(f(i) * s)), n - 1);
}

/** Source index of output `i` for "nearest-exact" (floor((i + 0.5) * scale), clamped). */
function nearestExactIndex(i: number, n: number, out: number, scale: number | undefined) {
  const s = scalesValue(scale, n, out);
  return Math.min(Math.floor(f((i + 0.5) * s)), n - 1);
}

/** The two source rows and weights of output `i` for linear modes (PyTorch, in float). */
function linearTaps(
  i: number,
  n: number,
  out: number,
  alignCorners: boolean,
  scale: number | undefined,
): [number, number, number, number] {
  if (out === n) return [i, i, 1, 0];
  let ratio: number;
  if (alignCorners) ratio = out > 1 ? f(f(n - 1) / f(out - 1)) : 0;
  else ratio = scalesValue(scale, n, out);
  let real: number;
  if (alignCorners) {
    real = f(ratio * f(i));
  } else {
    real = f(f(ratio * f(i + 0.5)) - 0.5);
    if (real < 0) real = 0;
  }
  const i0 = Math.min(Math.floor(real), n - 1);
  const l1 = Math.min(Math.max(f(real - i0), 0), 1);
  const i1 = i0 + (i0 < n - 1 ? 1 : 0);
  return [i0, i1, f(1 - l1), l1];
}

const sizeParam = p.custom<"size", number | readonly number[], number[]>("size", (v) => {
  const list: unknown = typeof v === "number" ? [v] : v;
  if (!Array.isArray(list) || list.length === 0) {
    return problem("must be an integer >= 0 or a list of them");
  }
  return list.map((x: unknown) => {
    if (typeof x !== "number" || !Number.isInteger(x) || x < 0) {
      problem("must be an integer >= 0 or a list of them");
    }
    return x as number;
  });
});

const scaleFactorParam = p.custom<"scaleFactor", number | readonly number[], number[]>(
  "scaleFactor",
  (v) => {
    const list: unknown = typeof v === "number" ? [v] : v;
    if (!Array.isArray(list) || list.length === 0) {
      return problem("must be a positive number or a list of them");
    }
    return list.map((x: unknown) => {
      if (typeof x !== "number" || !(x > 0) || !Number.isFinite(x)) {
        problem("must be a positive number or a list of them");
      }
      return x as number;
    });
  },
);

const MODES = ["nearest", "nearest-exact", "linear", "bilinear"] as const;

/**
 * interpolate(input [N, C, ...spatial], size?, scaleFactor?, mode = "nearest", alignCorners?,
 * recomputeScaleFactor?): exactly one of size and scaleFactor. Index tables and weights follow
 * PyTorch's CPU kernels (float arithmetic); linear modes interpolate the last dim first.
 */
export const interpolate = defineOp({
  name: "interpolate",
  signature: [
    p.tensor("input"),
    sizeParam.optional(),
    scaleFactorParam.optional(),
    p.oneOf("mode", MODES).default("nearest"),
    p.bool("alignCorners").optional(),
    p.bool("recomputeScaleFactor").optional(),
  ],
  lower(b, [x], { size, scaleFactor, mode, alignCorners, recomputeScaleFactor }) {
    const xd = dimsOf(x!);
    const nsp = xd.length - 2;
    const linear = mode === "linear" || mode === "bilinear";
    if (mode === "linear" && xd.length !== 3) {
      fail(b, `mode "linear" needs a 3-D input, got shape ${shapeString(xd)}`);
    }
    if (mode === "bilinear" && xd.length !== 4) {
      fail(b, `mode "bilinear" needs a 4-D input, got shape ${shapeString(xd)}`);
    }
    if (nsp < 1 || nsp > 3) {
      fail(b, `expected a 3-D, 4-D or 5-D input, got shape ${shapeString(xd)}`);
    }
    if (!linear && alignCorners !== undefined) {
      fail(b, `alignCorners can only be set with the linear modes (linear, bilinear)`);
    }
    if ((size === undefined) === (scaleFactor === undefined)) {
      fail(b, `exactly one of size and scaleFactor must be given`);
    }
    const expand = (v: number[], what: string): number[] => {
      if (v.length === 1) return new Array<number>(nsp).fill(v[0]!);
      if (v.length !== nsp) {
        fail(b, `${what} must have ${nsp} entries for input of shape ${shapeString(xd)}, got ` +
          `${v.length}`);
      }
      return v;
    };
    const inSp = xd.slice(2);
    let out: number[];
    let scales: (number | undefined)[];
    if (size !== undefined) {
      out = expand(size, "size");
      scales = out.map(() => undefined);
    } else {
      const sf = expand(scaleFactor!, "scaleFactor");
      out = inSp.map((n, i) => Math.floor(n * sf[i]!));
      scales = recomputeScaleFactor === true ? out.map(() => undefined) : sf;
    }
    if (out.some((n) => n <= 0)) {
      fail(b, `output size ${shapeString(out)} must be positive (input ${shapeString(xd)})`);
    }
    if (inSp.some((n) => n === 0)) fail(b, `input ${shapeString(xd)} has an empty spatial dim`);
    const t = dtypeOf(x!);
    if (!linear) {
      let y = x!;
      for (let i = 0; i < nsp; i++) {
        const idx = Array.from({ length: out[i]! }, (_, o) =>
          mode === "nearest"
            ? nearestIndex(o, inSp[i]!, out[i]!, scales[i])
            : nearestExactIndex(o, inSp[i]!, out[i]!, scales[i]),
        );
        y = takeAlong(b, y, 2 + i, idx);
      }
      return y;
    }
    floatInput(b, x!);
    const ct = computeType(t);
    let y = cast(b, x!, ct);
    for (let i = nsp - 1; i >= 0; i--) {
      const axis = 2 + i;
      const taps = Array.from({ length: out[i]! }, (_, o) =>
        linearTaps(o, inSp[i]!, out[i]!, alignCorners ?? false, scales[i]),
      );
      const a = takeAlong(b, y, axis, taps.map((q) => q[0]));
      const c = takeAlong(b, y, axis, taps.map((q) => q[1]));
      const od = dimsOf(a);
      const w0 = along(b, vector(b, ct, taps.map((q) => q[2])), od, axis);
      const w1 = along(b, vector(b, ct, taps.map((q) => q[3])), od, axis);
      y = b.add(b.multiply(a, w0), b.multiply(c, w1));
    }
    return cast(b, y, t);
  },
});
