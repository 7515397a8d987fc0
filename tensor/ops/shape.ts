// Shape and movement ops beyond core.ts's reshape/permute/transpose/(un)squeeze/expand: flatten,
// unflatten, mT, repeat, tile, cat, stack, split, chunk, narrow, slice (Python slicing with a
// step), pad (constant, reflect, replicate, circular), flip and roll. Each lowers to the IR's
// reshape, broadcast, slice, concatenate, pad and reverse with PyTorch's semantics: negative
// dims, Python's clamping of slice bounds, PyTorch's pad-list order (last dim first), type
// promotion across cat/stack inputs and the legacy rule that cat skips 1-D empty tensors.

import type { ComputationBuilder } from "../../ir/builder.ts";
import type { Instruction } from "../../ir/module.ts";
import { p, problem } from "../args.ts";
import {
  defineDecomposition,
  defineOp,
  installMethods,
  type MethodOf,
} from "../dispatch.ts";
import { OpError } from "../errors.ts";
import {
  broadcastTo,
  cast,
  dimsOf,
  dtypeOf,
  fail,
  filled,
  opName,
  rankOf,
  resultTypeOf,
} from "../lower.ts";
import { inferShape, normalizeDim, normalizeDims, numelOf, shapeString } from "../shape.ts";
import { Tensor } from "../tensor.ts";
import { transpose } from "./core.ts";

// ---- Helpers --------------------------------------------------------------------------------

/** `x[..., start:limit:stride, ...]` along dim `d` only. */
function sliceDim(
  b: ComputationBuilder,
  x: Instruction,
  d: number,
  start: number,
  limit: number,
  stride = 1,
): Instruction {
  const dims = dimsOf(x);
  if (start === 0 && limit === dims[d] && stride === 1) return x;
  const starts = dims.map((_, i) => (i === d ? start : 0));
  const limits = dims.map((n, i) => (i === d ? limit : n));
  const strides = dims.map((_, i) => (i === d ? stride : 1));
  return b.slice(x, starts, limits, strides);
}

/** Concatenation along `d` that tolerates one part (no op) or none (an empty slice of x). */
function concatDim(
  b: ComputationBuilder,
  x: Instruction,
  parts: readonly Instruction[],
  d: number,
): Instruction {
  if (parts.length === 0) return sliceDim(b, x, d, 0, 0);
  if (parts.length === 1) return parts[0]!;
  return b.concatenate(parts, d);
}

function reshapeIfNeeded(b: ComputationBuilder, x: Instruction, dims: readonly number[]) {
  const have = dimsOf(x);
  if (have.length === dims.length && have.every((d, i) => d === dims[i])) return x;
  return b.reshape(x, dims);
}

// ---- flatten, unflatten, mT -----------------------------------------------------------------

export const flatten = defineOp({
  name: "flatten",
  signature: [p.tensor("input"), p.int("startDim").default(0), p.int("endDim").default(-1)],
  lower(b, [x], { startDim, endDim }) {
    const shape = dimsOf(x!);
    const s = normalizeDim(opName(b), startDim, shape.length, "startDim");
    const e = normalizeDim(opName(b), endDim, shape.length, "endDim");
    if (s > e) fail(b, `startDim ${startDim} cannot come after endDim ${endDim}`);
    if (shape.length === 0) return b.reshape(x!, [1]);
    const out = [...shape.slice(0, s), numelOf(shape.slice(s, e + 1)), ...shape.slice(e + 1)];
    return reshapeIfNeeded(b, x!, out);
  },
});

export const unflatten = defineOp({
  name: "unflatten",
  signature: [p.tensor("input"), p.int("dim"), p.ints("sizes")],
  lower(b, [x], { dim, sizes }) {
    const shape = dimsOf(x!);
    const d = normalizeDim(opName(b), dim, shape.length);
    if (sizes.length === 0) fail(b, `sizes must be non-empty`);
    if (shape.length === 0) fail(b, `a zero-dim tensor cannot be unflattened`);
    const n = shape[d]!;
    let inner: number[];
    try {
      inner = inferShape(opName(b), sizes, n);
    } catch (e) {
      if (!(e instanceof OpError)) throw e;
      fail(b, `sizes ${shapeString(sizes)} do not multiply to the size ${n} of dim ${dim} ` +
        `(input shape ${shapeString(shape)})`);
    }
    return b.reshape(x!, [...shape.slice(0, d), ...inner, ...shape.slice(d + 1)]);
  },
});

/** The last two dims swapped (PyTorch's `x.mT`); the Tensor getter `mT` calls it. */
export const mT = defineDecomposition({
  name: "mT",
  signature: [p.tensor("input")],
  decompose({ input }) {
    if (input.ndim < 2) {
      throw new OpError("mT", `needs a tensor of at least 2 dims, got shape ` +
        `${shapeString(input.shape)}`);
    }
    return transpose(input, -2, -1);
  },
});

// ---- repeat, tile ---------------------------------------------------------------------------

/** Each dim i tiled reps[i] times (reps at least as long as the rank; leading dims added). */
function tiled(b: ComputationBuilder, x: Instruction, reps: readonly number[]): Instruction {
  const shape = dimsOf(x);
  const padded = [...new Array<number>(reps.length - shape.length).fill(1), ...shape];
  // Broadcast to [r0, d0, r1, d1, ...] and merge each pair: one broadcast, two reshapes.
  const inter: number[] = [];
  padded.forEach((d, i) => inter.push(reps[i]!, d));
  const bc = b.broadcast(
    reshapeIfNeeded(b, x, padded),
    inter,
    padded.map((_, i) => 2 * i + 1),
  );
  return b.reshape(bc, padded.map((d, i) => d * reps[i]!));
}

export const repeat = defineOp({
  name: "repeat",
  signature: [p.tensor("input"), p.ints("sizes", { min: 0 }).varargs()],
  lower(b, [x], { sizes }) {
    const rank = rankOf(x!);
    if (sizes.length < rank) {
      fail(b, `the number of repeats (${sizes.length}) cannot be smaller than the number ` +
        `of dims of the tensor (${rank}); sizes ${shapeString(sizes)}, tensor ` +
        `${shapeString(dimsOf(x!))}`);
    }
    return tiled(b, x!, sizes);
  },
});

export const tile = defineOp({
  name: "tile",
  signature: [p.tensor("input"), p.ints("dims", { min: 0 }).varargs()],
  lower(b, [x], { dims }) {
    const rank = rankOf(x!);
    // Fewer reps than dims: the missing leading reps are 1 (torch.tile).
    const reps = [...new Array<number>(Math.max(0, rank - dims.length)).fill(1), ...dims];
    return tiled(b, x!, reps);
  },
});

// ---- cat, stack -----------------------------------------------------------------------------

export const cat = defineOp({
  name: "cat",
  signature: [p.tensors("tensors"), p.int("dim").default(0)],
  lower(b, xs, { dim }) {
    if (xs.length === 0) fail(b, `expected a non-empty list of Tensors`);
    xs.forEach((x, i) => {
      if (rankOf(x) === 0) fail(b, `zero-dim tensor (at position ${i}) cannot be concatenated`);
    });
    // Every input takes part in type promotion, even the skipped ones (PyTorch).
    const t = resultTypeOf(xs);
    // Legacy rule: 1-D empty tensors are skipped, whatever the other inputs' shapes.
    const kept = xs
      .map((x, i) => ({ x, i }))
      .filter(({ x }) => !(rankOf(x) === 1 && dimsOf(x)[0] === 0));
    if (kept.length === 0) return filled(b, t, 0, [0]);
    const first = dimsOf(kept[0]!.x);
    const d = normalizeDim(opName(b), dim, first.length);
    for (const { x, i } of kept) {
      const s = dimsOf(x);
      if (s.length !== first.length) {
        fail(b, `tensors must have the same number of dims: got ${first.length} and ` +
          `${s.length} (tensor at position ${i}, shape ${shapeString(s)})`);
      }
      const k = s.findIndex((n, j) => j !== d && n !== first[j]);
      if (k >= 0) {
        fail(b, `sizes of tensors must match except in dim ${d}: expected size ${first[k]} ` +
          `but got size ${s[k]} for tensor number ${i} in the list (shapes ` +
          `${xs.map((y) => shapeString(dimsOf(y))).join(", ")})`);
      }
    }
    const parts = kept.map(({ x }) => cast(b, x, t));
    return parts.length === 1 ? parts[0]! : b.concatenate(parts, d);
  },
});

export const stack = defineOp({
  name: "stack",
  signature: [p.tensors("tensors"), p.int("dim").default(0)],
  lower(b, xs, { dim }) {
    if (xs.length === 0) fail(b, `expected a non-empty list of Tensors`);
    const first = dimsOf(xs[0]!);
    xs.forEach((x, i) => {
      const s = dimsOf(x);
      if (s.length !== first.length || s.some((n, j) => n !== first[j])) {
        fail(b, `expects each tensor to be equal size, but got ${shapeString(first)} at ` +
          `entry 0 and ${shapeString(s)} at entry ${i}`);
      }
    });
    const d = normalizeDim(opName(b), dim, first.length + 1);
    const t = resultTypeOf(xs);
    const shape = [...first.slice(0, d), 1, ...first.slice(d)];
    const parts = xs.map((x) => b.reshape(cast(b, x, t), shape));
    return parts.length === 1 ? parts[0]! : b.concatenate(parts, d);
  },
});

// ---- split, chunk, narrow, slice ------------------------------------------------------------

export const split = defineOp({
  name: "split",
  signature: [
    p.tensor("tensor"),
    p.custom<"splitSizeOrSections", number | readonly number[], number | number[]>(
      "splitSizeOrSections",
      (v) => {
        const ok = (n: unknown) => typeof n === "number" && Number.isInteger(n) && n >= 0;
        if (ok(v)) return v as number;
        if (Array.isArray(v) && v.every(ok)) return [...(v as number[])];
        return problem("must be an integer >= 0 or a list of integers >= 0");
      },
    ),
    p.int("dim").default(0),
  ],
  lower(b, [x], { splitSizeOrSections: s, dim }) {
    const shape = dimsOf(x!);
    if (shape.length === 0) fail(b, `a zero-dim tensor cannot be split`);
    const d = normalizeDim(opName(b), dim, shape.length);
    const n = shape[d]!;
    let sizes: number[];
    if (typeof s === "number") {
      if (s === 0 && n !== 0) {
        fail(b, `splitSize can only be 0 if the dim's size is 0, but dim ${dim} has size ${n}`);
      }
      sizes = [];
      for (let i = 0; i < n; i += s) sizes.push(Math.min(s, n - i));
      if (n === 0) sizes.push(0);
    } else {
      const total = s.reduce((a, c) => a + c, 0);
      if (total !== n) {
        fail(b, `split sizes ${shapeString(s)} must sum exactly to ${n} (the size of dim ` +
          `${dim} of ${shapeString(shape)}), but they sum to ${total}`);
      }
      sizes = s;
    }
    let at = 0;
    return sizes.map((k) => {
      const piece = sliceDim(b, x!, d, at, at + k);
      at += k;
      return piece;
    });
  },
});

export const chunk = defineDecomposition({
  name: "chunk",
  signature: [p.tensor("input"), p.int("chunks"), p.int("dim").default(0)],
  decompose({ input, chunks, dim }) {
    if (chunks <= 0) throw new OpError("chunk", `chunks must be greater than 0, got ${chunks}`);
    if (input.ndim === 0) {
      throw new OpError("chunk", `expects at least a 1-dimensional tensor, got shape []`);
    }
    const d = normalizeDim("chunk", dim, input.ndim);
    const n = input.shape[d]!;
    // Chunks of ceil(n / chunks) elements; an empty dim still gives `chunks` empty chunks.
    if (n === 0) return split(input, new Array<number>(chunks).fill(0), d);
    return split(input, Math.ceil(n / chunks), d);
  },
});

export const narrow = defineOp({
  name: "narrow",
  signature: [p.tensor("input"), p.int("dim"), p.int("start"), p.int("length", { min: 0 })],
  lower(b, [x], { dim, start, length }) {
    const shape = dimsOf(x!);
    if (shape.length === 0) fail(b, `cannot be applied to a zero-dim tensor`);
    const d = normalizeDim(opName(b), dim, shape.length);
    const n = shape[d]!;
    if (start < -n || start > n) {
      fail(b, `start ${start} is out of range for dim ${dim} of size ${n} ` +
        `(expected ${-n}..${n})`);
    }
    const s = start < 0 ? start + n : start;
    if (s + length > n) {
      fail(b, `start (${s}) + length (${length}) exceeds the size (${n}) of dim ${dim}`);
    }
    return sliceDim(b, x!, d, s, s + length);
  },
});

/** Python's clamping of a slice bound: negative counts from the end, then into [0, n]. */
function clampBound(v: number | undefined, n: number, fallback: number): number {
  if (v === undefined) return fallback;
  const w = v < 0 ? v + n : v;
  return Math.min(Math.max(w, 0), n);
}

export const slice = defineOp({
  name: "slice",
  signature: [
    p.tensor("input"),
    p.int("dim").default(0),
    p.int("start").optional(),
    p.int("end").optional(),
    p.int("step", { min: 1 }).default(1),
  ],
  lower(b, [x], { dim, start, end, step }) {
    const shape = dimsOf(x!);
    if (shape.length === 0) fail(b, `cannot slice a zero-dim tensor`);
    const d = normalizeDim(opName(b), dim, shape.length);
    const n = shape[d]!;
    const s = clampBound(start, n, 0);
    const e = Math.max(s, clampBound(end, n, n));
    return sliceDim(b, x!, d, s, e, step);
  },
});

// ---- pad ------------------------------------------------------------------------------------

type PadMode = "constant" | "reflect" | "replicate" | "circular";

/**
 * Padding of one dim in reflect or replicate mode. Output position o reads input j = o - l,
 * mapped into range (reflect: -j, or 2(n-1) - j; replicate: 0 or n-1); the output is then
 * three runs, each a (reversed or broadcast) slice. Negative padding crops as PyTorch does.
 */
function padEdges(
  b: ComputationBuilder,
  x: Instruction,
  d: number,
  l: number,
  r: number,
  mode: "reflect" | "replicate",
): Instruction {
  const n = dimsOf(x)[d]!;
  const lo = -l;
  const hi = n + r;
  const parts: Instruction[] = [];
  const run = (from: number, to: number, count: number) => {
    const s = sliceDim(b, x, d, from, to);
    const target = [...dimsOf(x)];
    target[d] = count;
    return broadcastTo(b, s, target);
  };
  const aEnd = Math.min(0, hi);
  if (lo < aEnd) {
    parts.push(
      mode === "reflect"
        ? b.reverse(sliceDim(b, x, d, 1 - aEnd, 1 - lo), [d])
        : run(0, 1, aEnd - lo),
    );
  }
  const bStart = Math.max(lo, 0);
  const bEnd = Math.min(hi, n);
  if (bStart < bEnd) parts.push(sliceDim(b, x, d, bStart, bEnd));
  const cStart = Math.max(lo, n);
  if (cStart < hi) {
    parts.push(
      mode === "reflect"
        ? b.reverse(sliceDim(b, x, d, 2 * n - 1 - hi, 2 * n - 1 - cStart), [d])
        : run(n - 1, n, hi - cStart),
    );
  }
  return concatDim(b, x, parts, d);
}

/** Circular padding of one dim as PyTorch does it: crop first, then wrap the cropped part. */
function padCircular(
  b: ComputationBuilder,
  x: Instruction,
  d: number,
  l: number,
  r: number,
): Instruction {
  const n = dimsOf(x)[d]!;
  const mid = sliceDim(b, x, d, Math.max(-l, 0), n - Math.max(-r, 0));
  const m = dimsOf(mid)[d]!;
  if (l > m || r > m) {
    fail(b, `circular padding (${l}, ${r}) of dim ${d} needs at most ${m} elements ` +
      `on each side (the dim's size after cropping)`);
  }
  const parts: Instruction[] = [];
  if (l > 0) parts.push(sliceDim(b, mid, d, m - l, m));
  parts.push(mid);
  if (r > 0) parts.push(sliceDim(b, mid, d, 0, r));
  return concatDim(b, mid, parts, d);
}

export const pad = defineOp({
  name: "pad",
  signature: [
    p.tensor("input"),
    p.ints("pad"),
    p.oneOf("mode", ["constant", "reflect", "replicate", "circular"] as const).default("constant"),
    p.scalarOperand("value").default(0),
  ],
  normalize(args) {
    const v = args.value;
    if (args.mode !== "constant" && !(v === 0 || v === 0n || v === false)) {
      throw new OpError("pad", `padding mode '${args.mode}' does not take a value (got ${v})`);
    }
    return args;
  },
  lower(b, [x, value], { pad: pads, mode }) {
    const shape = dimsOf(x!);
    const rank = shape.length;
    if (pads.length % 2 !== 0) fail(b, `the pad list's length must be even, got ${pads.length}`);
    if (pads.length / 2 > rank) {
      fail(b, `the pad list ${shapeString(pads)} pads ${pads.length / 2} dims but the input ` +
        `${shapeString(shape)} has ${rank}`);
    }
    // pads[2k], pads[2k+1] are the low and high padding of dim rank-1-k (last dim first).
    const low = shape.map(() => 0);
    const high = shape.map(() => 0);
    for (let k = 0; k < pads.length / 2; k++) {
      low[rank - 1 - k] = pads[2 * k]!;
      high[rank - 1 - k] = pads[2 * k + 1]!;
    }
    shape.forEach((n, d) => {
      if (n + low[d]! + high[d]! < 0) {
        fail(b, `the input size ${n} of dim ${d} plus padding (${low[d]}, ${high[d]}) ` +
          `gives a negative size`);
      }
    });
    const m: PadMode = mode;
    if (m === "constant") {
      if (low.every((v) => v === 0) && high.every((v) => v === 0)) return x!;
      const fill = cast(b, value!, dtypeOf(x!));
      return b.pad(x!, fill, shape.map((_, d) => [low[d]!, high[d]!] as const));
    }
    let y = x!;
    shape.forEach((n, d) => {
      const l = low[d]!;
      const r = high[d]!;
      if (l === 0 && r === 0) return;
      switch (m) {
        case "reflect":
          if (l >= n || r >= n) {
            fail(b, `reflect padding (${l}, ${r}) must be less than the size ${n} of dim ${d} ` +
              `(input ${shapeString(shape)})`);
          }
          y = padEdges(b, y, d, l, r, m);
          return;
        case "replicate":
          if (n === 0) fail(b, `replicate padding needs a non-empty dim ${d}`);
          y = padEdges(b, y, d, l, r, m);
          return;
        case "circular":
          y = padCircular(b, y, d, l, r);
          return;
        default: {
          const never: never = m;
          fail(b, `unknown mode ${String(never)}`);
        }
      }
    });
    return y;
  },
});

// ---- flip, roll -----------------------------------------------------------------------------

export const flip = defineOp({
  name: "flip",
  signature: [p.tensor("input"), p.ints("dims").varargs()],
  lower(b, [x], { dims }) {
    const rank = rankOf(x!);
    const ds = normalizeDims(opName(b), dims, rank);
    if (rank === 0 || ds.length === 0) return x!;
    return b.reverse(x!, ds);
  },
});

/** Rolls dim d by `shift` (elements shifted past the end come back at the start). */
function rollDim(b: ComputationBuilder, x: Instruction, d: number, shift: number) {
  const n = dimsOf(x)[d]!;
  if (n === 0) return x;
  const k = ((shift % n) + n) % n;
  if (k === 0) return x;
  return b.concatenate([sliceDim(b, x, d, n - k, n), sliceDim(b, x, d, 0, n - k)], d);
}

export const roll = defineOp({
  name: "roll",
  signature: [p.tensor("input"), p.dims("shifts"), p.dims("dims").optional()],
  lower(b, [x], { shifts, dims }) {
    const shape = dimsOf(x!);
    if (dims === undefined || dims.length === 0) {
      if (shifts.length !== 1) {
        fail(b, `shifts ${shapeString(shifts)} and dims [] must align (without dims, ` +
          `give one shift for the flattened tensor)`);
      }
      const flat = reshapeIfNeeded(b, x!, [numelOf(shape)]);
      return reshapeIfNeeded(b, rollDim(b, flat, 0, shifts[0]!), shape);
    }
    if (shifts.length !== dims.length) {
      fail(b, `shifts ${shapeString(shifts)} and dims ${shapeString(dims)} must align ` +
        `(one shift per dim)`);
    }
    let y = x!;
    dims.forEach((dim, i) => {
      const d = normalizeDim(opName(b), dim, shape.length);
      if (shape.length > 0) y = rollDim(b, y, d, shifts[i]!);
    });
    return y;
  },
});

// ---- Methods --------------------------------------------------------------------------------

installMethods({
  flatten,
  unflatten,
  repeat,
  tile,
  split,
  chunk,
  narrow,
  slice,
  flip,
  roll,
});

if (Object.prototype.hasOwnProperty.call(Tensor.prototype, "mT")) {
  throw new Error(`Tensor.mT is already defined`);
}
Object.defineProperty(Tensor.prototype, "mT", {
  get(this: Tensor): Tensor {
    return mT(this);
  },
  configurable: true,
});

declare module "../tensor.ts" {
  interface Tensor {
    flatten: MethodOf<typeof flatten>;
    unflatten: MethodOf<typeof unflatten>;
    /** The last two dims swapped (a getter, as PyTorch's `x.mT`). */
    readonly mT: Tensor;
    repeat: MethodOf<typeof repeat>;
    tile: MethodOf<typeof tile>;
    split: MethodOf<typeof split>;
    chunk: MethodOf<typeof chunk>;
    narrow: MethodOf<typeof narrow>;
    slice: MethodOf<typeof slice>;
    flip: MethodOf<typeof flip>;
    roll: MethodOf<typeof roll>;
  }
}
