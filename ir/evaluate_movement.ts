// Data-movement opcodes of the reference evaluator: iota, broadcast, reshape, transpose, slice,
// dynamic-slice, dynamic-update-slice, concatenate, pad, reverse, and the bounded-dynamism ops
// get-dimension-size and set-dimension-size. Every op works on ACTUAL dims: a bounded dynamic dim
// of the declared shape only bounds the value. Where a result dim is dynamic its actual size comes
// from the operand (broadcast: the mapped operand dim; reshape: the one dynamic dim that the
// element count determines); start indices of dynamic-slice/-update-slice clamp into range as XLA.

import { Literal } from "./literal.ts";
import type { Instruction } from "./module.ts";
import { type ArrayShape, isBigIntType, isIntegerType } from "./shape.ts";
import { wrapInteger } from "./element_types.ts";
import {
  asLiteral,
  attr,
  build,
  clampInt,
  elems,
  mutableElems,
  fail,
  forEachIndex,
  linearIndex,
  product,
  roundFor,
  scalarIndex,
  scalarOf,
  singleDim,
  stridesOf,
  valueShapeString,
  type EvalValue,
  type OpImpl,
} from "./evaluate_support.ts";

function declaredArray(instr: Instruction): ArrayShape {
  if (instr.shape.kind !== "array") fail(`declared shape must be an array`);
  return instr.shape;
}

function operandArrayShape(instr: Instruction, i: number): ArrayShape | undefined {
  const op = instr.operands[i];
  return op && op.shape.kind === "array" ? op.shape : undefined;
}

/**
 * A literal of `dims` whose element at each index is `src` at the linear index `map` returns
 * (or `fill` where map returns -1). The index passed to map is reused between calls.
 */
function remap(
  src: Literal,
  dims: readonly number[],
  map: (index: number[]) => number,
  fill?: number | bigint,
): Literal {
  const s = elems(src);
  return build(src.type, dims, (out) => {
    forEachIndex(dims, (idx, linear) => {
      const j = map(idx);
      out[linear] = j < 0 ? fill! : s[j]!;
    });
  });
}

export const iotaOp: OpImpl = (instr) => {
  const shape = declaredArray(instr);
  const d = attr(instr, "iotaDimension");
  if (d < 0 || d >= shape.dims.length) fail(`iota_dimension ${d} is out of range`);
  // iota has no operand to take an actual size from: a dynamic dim takes its bound.
  const dims = shape.dims;
  const round = roundFor(shape.type);
  const t = shape.type;
  const wrap = isIntegerType(t) && !isBigIntType(t) ? wrapInteger(t) : undefined;
  return build(t, dims, (out) => {
    forEachIndex(dims, (idx, linear) => {
      const v = idx[d]!;
      if (isBigIntType(t)) out[linear] = BigInt(v);
      else if (t === "pred") out[linear] = v !== 0 ? 1 : 0;
      else if (wrap) out[linear] = wrap(v);
      else out[linear] = round ? round(v) : v;
    });
  });
};

export const broadcastOp: OpImpl = (instr, ops) => {
  const x = asLiteral(ops[0], "operand");
  const shape = declaredArray(instr);
  const map = attr(instr, "dimensions");
  if (map.length !== x.dims.length) {
    fail(`dimensions={${map.join(",")}} must have one entry per operand dim (${x.dims.length})`);
  }
  const dims = [...shape.dims];
  map.forEach((r, i) => {
    if (r < 0 || r >= dims.length) fail(`dimensions entry ${r} is out of range`);
    dims[r] = x.dims[i]!;
  });
  const xs = stridesOf(x.dims);
  return remap(x, dims, (idx) => {
    let l = 0;
    for (let i = 0; i < map.length; i++) l += idx[map[i]!]! * xs[i]!;
    return l;
  });
};

/**
 * Result dims of a reshape of `count` elements. Static dims are taken as declared; dynamic dims
 * that line up with an operand dim of the same bound and flag (a common prefix or suffix) keep
 * that dim's actual size; at most one dynamic dim may remain, and it is what the count leaves.
 */
function reshapeDims(instr: Instruction, x: Literal, shape: ArrayShape): number[] {
  const dims = [...shape.dims];
  const count = x.size;
  const opShape = operandArrayShape(instr, 0);
  const open = new Set<number>();
  shape.dynamic.forEach((dyn, i) => dyn && open.add(i));
  if (open.size > 1 && opShape) {
    const n = Math.min(dims.length, opShape.dims.length);
    const same = (i: number, j: number) =>
      shape.dims[i] === opShape.dims[j] && shape.dynamic[i] === opShape.dynamic[j];
    for (let k = 0; k < n && same(k, k); k++) {
      if (open.delete(k)) dims[k] = x.dims[k]!;
    }
    for (let k = 1; k <= n && same(dims.length - k, opShape.dims.length - k); k++) {
      if (open.delete(dims.length - k)) dims[dims.length - k] = x.dims[x.dims.length - k]!;
    }
  }
  if (open.size === 0) {
    if (product(dims) !== count) {
      fail(`cannot reshape ${valueShapeString(x)} (${count} elements) to [${dims.join(",")}]`);
    }
    return dims;
  }
  if (open.size > 1) {
    if (product(dims) === count) return dims;
    fail(
      `reshape of ${valueShapeString(x)} to ${shape.dims.length}-d shape with ${open.size} ` +
        `dynamic dims is ambiguous (cannot tell which dynamic dim is short)`,
    );
  }
  const [d] = [...open];
  dims[d!] = 1;
  const rest = product(dims);
  const size = rest === 0 ? 0 : count / rest;
  if (rest === 0 ? count !== 0 : !Number.isInteger(size)) {
    fail(`cannot reshape ${valueShapeString(x)} (${count} elements) to [${shape.dims.join(",")}]`);
  }
  if (rest === 0) {
    dims[d!] = shape.dims[d!]!;
    return dims;
  }
  if (size > shape.dims[d!]!) {
    fail(`reshape: dynamic dim ${d} would be ${size}, above its bound ${shape.dims[d!]}`);
  }
  dims[d!] = size;
  return dims;
}

export const reshapeOp: OpImpl = (instr, ops) => {
  const x = asLiteral(ops[0], "operand");
  const shape = declaredArray(instr);
  const dims = reshapeDims(instr, x, shape);
  // Row-major order is unchanged by a reshape: the storage is reused as is.
  return new Literal(x.type, dims, x.data.slice());
};

/** Per logical dim, the stride of its index in a buffer laid out minor-to-major `m2m`. */
function layoutStrides(dims: readonly number[], m2m: readonly number[] | undefined): number[] {
  const order = m2m ?? dims.map((_, k) => dims.length - 1 - k);
  const strides = new Array<number>(dims.length).fill(0);
  let s = 1;
  for (const d of order) {
    strides[d] = s;
    s *= dims[d]!;
  }
  return strides;
}

/**
 * bitcast: the operand's physical buffer (its elements in the order of its layout; no layout is
 * XLA's default, row-major) read as the result shape in the result's layout.
 */
export const bitcastOp: OpImpl = (instr, ops) => {
  const x = asLiteral(ops[0], "operand");
  const shape = declaredArray(instr);
  const operandShape = instr.operand(0).shape;
  if (operandShape.kind !== "array") fail("bitcast of a tuple");
  if (x.size !== elementCountOf(shape.dims)) {
    fail(`bitcast of ${x.size} elements to ${shape.dims.join("x")}`);
  }
  const inStrides = layoutStrides(x.dims, operandShape.layout);
  const physical = new (x.data.constructor as new (n: number) => typeof x.data)(x.size);
  const src = elems(x);
  const dst = mutableElems(physical);
  forEachIndex(x.dims, (idx, linear) => {
    let off = 0;
    for (let d = 0; d < idx.length; d++) off += idx[d]! * inStrides[d]!;
    dst[off] = src[linear]!;
  });
  const outStrides = layoutStrides(shape.dims, shape.layout);
  return build(x.type, shape.dims, (out) => {
    forEachIndex(shape.dims, (idx, linear) => {
      let off = 0;
      for (let d = 0; d < idx.length; d++) off += idx[d]! * outStrides[d]!;
      out[linear] = dst[off]!;
    });
  });
};

function elementCountOf(dims: readonly number[]): number {
  return dims.reduce((a, b) => a * b, 1);
}

export const transposeOp: OpImpl = (instr, ops) => {
  const x = asLiteral(ops[0], "operand");
  const perm = attr(instr, "dimensions");
  if (perm.length !== x.dims.length || [...perm].sort((a, b) => a - b).some((p, i) => p !== i)) {
    fail(`dimensions={${perm.join(",")}} is not a permutation of rank ${x.dims.length}`);
  }
  const dims = perm.map((p) => x.dims[p]!);
  const xs = stridesOf(x.dims);
  return remap(x, dims, (idx) => {
    let l = 0;
    for (let i = 0; i < perm.length; i++) l += idx[i]! * xs[perm[i]!]!;
    return l;
  });
};

export const sliceOp: OpImpl = (instr, ops) => {
  const x = asLiteral(ops[0], "operand");
  const slices = attr(instr, "slice");
  if (slices.length !== x.dims.length) {
    fail(`slice has ${slices.length} dims, operand has ${x.dims.length}`);
  }
  const opShape = operandArrayShape(instr, 0);
  const starts: number[] = [];
  const strides: number[] = [];
  const dims = slices.map((s, i) => {
    const actual = x.dims[i]!;
    starts.push(s.start);
    strides.push(s.stride);
    // A full slice of a bounded dynamic dim stays dynamic: it takes the actual size (XLA).
    const full =
      opShape?.dynamic[i] && s.start === 0 && s.stride === 1 && s.limit === opShape.dims[i];
    if (full) return actual;
    if (s.stride < 1 || s.start < 0 || s.start > s.limit || s.limit > actual) {
      const sl = `[${s.start}:${s.limit}:${s.stride}]`;
      fail(`slice ${sl} does not fit dim ${i} (actual size ${actual})`);
    }
    return Math.ceil((s.limit - s.start) / s.stride);
  });
  const xs = stridesOf(x.dims);
  return remap(x, dims, (idx) => {
    let l = 0;
    for (let i = 0; i < idx.length; i++) l += (starts[i]! + idx[i]! * strides[i]!) * xs[i]!;
    return l;
  });
};

/** Start indices from scalar operands, clamped into [0, dim - size] per dim (XLA). */
function clampedStarts(
  ops: readonly EvalValue[],
  first: number,
  dims: readonly number[],
  sizes: readonly number[],
): number[] {
  if (ops.length - first !== dims.length) {
    fail(`expected ${dims.length} start index operands, got ${ops.length - first}`);
  }
  return dims.map((d, i) => {
    const lit = asLiteral(ops[first + i], `start index ${i}`);
    const size = sizes[i]!;
    if (size > d) fail(`size ${size} exceeds actual dim ${i} of size ${d}`);
    return clampInt(scalarIndex(lit, `start index ${i}`), 0, d - size);
  });
}

export const dynamicSliceOp: OpImpl = (instr, ops) => {
  const x = asLiteral(ops[0], "operand");
  const sizes = attr(instr, "dynamicSliceSizes");
  if (sizes.length !== x.dims.length) {
    fail(`dynamic_slice_sizes has ${sizes.length} entries, operand rank is ${x.dims.length}`);
  }
  const starts = clampedStarts(ops, 1, x.dims, sizes);
  const xs = stridesOf(x.dims);
  return remap(x, sizes, (idx) => {
    let l = 0;
    for (let i = 0; i < idx.length; i++) l += (starts[i]! + idx[i]!) * xs[i]!;
    return l;
  });
};

export const dynamicUpdateSliceOp: OpImpl = (_instr, ops) => {
  const x = asLiteral(ops[0], "operand");
  const u = asLiteral(ops[1], "update");
  if (u.type !== x.type) fail(`update type ${u.type} is not the operand's ${x.type}`);
  if (u.dims.length !== x.dims.length) {
    fail(`update ${valueShapeString(u)} and operand ${valueShapeString(x)} differ in rank`);
  }
  const starts = clampedStarts(ops, 2, x.dims, u.dims);
  const out = x.data.slice();
  const o = out as unknown as { [i: number]: number | bigint };
  const ue = elems(u);
  const xs = stridesOf(x.dims);
  forEachIndex(u.dims, (idx, linear) => {
    let l = 0;
    for (let i = 0; i < idx.length; i++) l += (starts[i]! + idx[i]!) * xs[i]!;
    o[l] = ue[linear]!;
  });
  return new Literal(x.type, x.dims, out);
};

export const concatenateOp: OpImpl = (instr, ops) => {
  if (ops.length === 0) fail("concatenate needs at least one operand");
  const parts = ops.map((v, i) => asLiteral(v, `operand ${i}`));
  return concatLiterals(parts, singleDim(instr, parts[0]!.dims.length));
};

/** Literals of one type and rank, joined along dim d (they must agree on every other dim). */
export function concatLiterals(parts: readonly Literal[], d: number): Literal {
  const first = parts[0] ?? fail("nothing to concatenate");
  const offsets: number[] = [];
  let total = 0;
  for (const [i, p] of parts.entries()) {
    const ok =
      p.type === first.type &&
      p.dims.length === first.dims.length &&
      p.dims.every((n, k) => k === d || n === first.dims[k]);
    if (!ok) {
      const want = valueShapeString(first);
      fail(`operand ${i} ${valueShapeString(p)} does not match ${want} outside dim ${d}`);
    }
    offsets.push(total);
    total += p.dims[d]!;
  }
  const dims = [...first.dims];
  dims[d] = total;
  return build(first.type, dims, (out) => {
    const os = stridesOf(dims);
    parts.forEach((p, k) => {
      const pe = elems(p);
      forEachIndex(p.dims, (idx, linear) => {
        let l = 0;
        for (let i = 0; i < idx.length; i++) {
          l += (i === d ? idx[i]! + offsets[k]! : idx[i]!) * os[i]!;
        }
        out[l] = pe[linear]!;
      });
    });
  });
}

/** Elements [start, limit) of `x` along dim d, every other dim whole. */
export function sliceAlong(x: Literal, d: number, start: number, limit: number): Literal {
  const dims = [...x.dims];
  dims[d] = limit - start;
  const xs = stridesOf(x.dims);
  return remap(x, dims, (idx) => {
    let l = 0;
    for (let i = 0; i < idx.length; i++) l += (i === d ? idx[i]! + start : idx[i]!) * xs[i]!;
    return l;
  });
}

export const padOp: OpImpl = (instr, ops) => {
  const x = asLiteral(ops[0], "operand");
  const v = asLiteral(ops[1], "padding value");
  if (v.dims.length !== 0 || v.type !== x.type) {
    fail(`padding value must be a ${x.type} scalar, got ${valueShapeString(v)}`);
  }
  const cfg = attr(instr, "padding");
  if (cfg.length !== x.dims.length) {
    fail(`padding has ${cfg.length} dims, operand has ${x.dims.length}`);
  }
  const dims = cfg.map((p, i) => {
    const n = x.dims[i]!;
    if (p.interior < 0) fail(`interior padding ${p.interior} of dim ${i} is negative`);
    const size = p.low + p.high + n + Math.max(n - 1, 0) * p.interior;
    if (size < 0) fail(`padding ${p.low}_${p.high}_${p.interior} leaves dim ${i} negative`);
    return size;
  });
  const xs = stridesOf(x.dims);
  return remap(
    x,
    dims,
    (idx) => {
      let l = 0;
      for (let i = 0; i < idx.length; i++) {
        const p = cfg[i]!;
        const q = idx[i]! - p.low;
        if (q < 0 || q % (p.interior + 1) !== 0) return -1;
        const s = q / (p.interior + 1);
        if (s >= x.dims[i]!) return -1;
        l += s * xs[i]!;
      }
      return l;
    },
    elems(v)[0]!,
  );
};

export const reverseOp: OpImpl = (instr, ops) => {
  const x = asLiteral(ops[0], "operand");
  const rev = new Set(attr(instr, "dimensions"));
  for (const d of rev) if (d < 0 || d >= x.dims.length) fail(`reverse dim ${d} is out of range`);
  const xs = stridesOf(x.dims);
  return remap(x, x.dims, (idx) => {
    let l = 0;
    for (let i = 0; i < idx.length; i++) {
      l += (rev.has(i) ? x.dims[i]! - 1 - idx[i]! : idx[i]!) * xs[i]!;
    }
    return l;
  });
};

export const getDimensionSizeOp: OpImpl = (instr, ops) => {
  const x = asLiteral(ops[0], "operand");
  const d = singleDim(instr, x.dims.length);
  return scalarOf("s32", x.dims[d]!);
};

/** Makes dim d actually n (keeping the first n entries); n may not exceed the bound. */
export const setDimensionSizeOp: OpImpl = (instr, ops) => {
  const x = asLiteral(ops[0], "operand");
  const n = scalarIndex(asLiteral(ops[1], "size"), "size");
  const d = singleDim(instr, x.dims.length);
  const shape = declaredArray(instr);
  const bound = shape.dims[d] ?? x.dims[d]!;
  if (n < 0 || n > bound) fail(`size ${n} is outside [0, ${bound}] (the bound of dim ${d})`);
  if (n > x.dims[d]!) {
    fail(
      `size ${n} exceeds the operand's actual size ${x.dims[d]} in dim ${d}; ` +
        `the entries beyond it are undefined`,
    );
  }
  const dims = [...x.dims];
  dims[d] = n;
  const xs = stridesOf(x.dims);
  return remap(x, dims, (idx) => linearIndex(idx, xs));
};
