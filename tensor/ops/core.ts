// The first frontend ops, each defined once by its lowering to IR: arithmetic (add sub mul div
// neg exp relu maximum), comparison and selection (eq lt where), reductions (sum mean), shape
// ops (reshape view permute transpose unsqueeze squeeze expand), matmul and dtype conversion
// (to). PyTorch semantics throughout: type promotion by torch.result_type, numpy broadcasting,
// negative dims, keepdim, integer sums in int64, true division of integers in float32. Each op
// is exported in functional form (`add(x, y)`) and installed as a Tensor method (`x.add(y)`).

import type { ComputationBuilder } from "../../ir/builder.ts";
import type { ComparisonDirection } from "../../ir/attributes.ts";
import type { Instruction } from "../../ir/module.ts";
import { p, problem } from "../args.ts";
import {
  DEFAULT_FLOAT,
  DEFAULT_INT,
  type DType,
  isDType,
  isFloatingDType,
  isIntScalar,
  type Scalar,
} from "../dtype.ts";
import { defineOp, installMethods, type MethodOf } from "../dispatch.ts";
import {
  broadcastAll,
  broadcastTo,
  cast,
  computeType,
  dimsOf,
  dtypeOf,
  elementwise,
  fail,
  filledLike,
  opName,
  rankOf,
  reduce,
  reducedCount,
  reductionDims,
  resultTypeOf,
  sumToShape,
} from "../lower.ts";
import {
  broadcastShapes,
  inferShape,
  normalizeDim,
  normalizeDims,
  numelOf,
  shapeString,
} from "../shape.ts";
import { Tensor } from "../tensor.ts";

// ---- Shared lowering pieces -----------------------------------------------------------------

/** A bool operand is an error for ops PyTorch refuses on bool (neg, sub, relu). */
function refuseBool(b: ComputationBuilder, xs: readonly Instruction[], hint: string): void {
  if (xs.some((x) => dtypeOf(x) === "bool")) fail(b, `bool tensors are not supported; ${hint}`);
}

/** PyTorch's alpha check for add/sub: its category must fit the result's. */
function checkAlpha(b: ComputationBuilder, alpha: Scalar, t: DType): void {
  if (typeof alpha === "boolean" && t !== "bool") {
    fail(b, `a boolean alpha is only supported for bool results, got ${t}`);
  }
  if (!isFloatingDType(t) && typeof alpha === "number" && !isIntScalar(alpha)) {
    fail(b, `for integral inputs, alpha must not be a floating point number, got ${alpha}`);
  }
}

/** x + alpha*y or x - alpha*y in the promoted dtype (bool: logical or). */
function addLike(
  b: ComputationBuilder,
  x: Instruction,
  y: Instruction,
  alpha: Scalar,
  subtract: boolean,
): Instruction {
  const t = resultTypeOf([x, y]);
  checkAlpha(b, alpha, t);
  let yy = cast(b, y, t);
  if (t === "bool") {
    const [u, v] = broadcastAll(b, [cast(b, x, t), yy]);
    return alpha === 0 || alpha === false || alpha === 0n ? u : b.or(u, v);
  }
  if (!(alpha === 1 || alpha === 1n || alpha === true)) {
    yy = b.multiply(yy, filledLike(b, yy, alpha));
  }
  const [u, v] = broadcastAll(b, [cast(b, x, t), yy]);
  return subtract ? b.subtract(u, v) : b.add(u, v);
}

/** trunc(a / b) for floats: rounds the quotient toward zero. */
function truncDivFloat(b: ComputationBuilder, u: Instruction, v: Instruction): Instruction {
  const q = b.divide(u, v);
  const negative = b.compare(q, filledLike(b, q, 0), "LT");
  return b.select(negative, b.ceil(q), b.floor(q));
}

/** floor(a / b) for integers: the truncated quotient, one less when the signs disagree. */
function floorDivInt(b: ComputationBuilder, u: Instruction, v: Instruction): Instruction {
  const q = b.divide(u, v);
  const r = b.remainder(u, v);
  const zero = filledLike(b, r, 0);
  const inexact = b.compare(r, zero, "NE");
  const signsDiffer = b.compare(b.compare(r, zero, "LT"), b.compare(v, zero, "LT"), "NE");
  return b.select(b.and(inexact, signsDiffer), b.subtract(q, filledLike(b, q, 1)), q);
}

/**
 * floor(a / b) for floats exactly as PyTorch's div_floor_floating: from fmod, so that the
 * quotient of exactly representable values is not thrown off by rounding of a / b.
 */
function floorDivFloat(b: ComputationBuilder, u: Instruction, v: Instruction): Instruction {
  const zero = filledLike(b, u, 0);
  const one = filledLike(b, u, 1);
  const q = b.divide(u, v);
  const mod = b.remainder(u, v);
  let div = b.divide(b.subtract(u, mod), v);
  const modNonzero = b.compare(mod, zero, "NE");
  const signsDiffer = b.compare(b.compare(v, zero, "LT"), b.compare(mod, zero, "LT"), "NE");
  div = b.select(b.and(modNonzero, signsDiffer), b.subtract(div, one), div);
  let fl = b.floor(div);
  const above = b.compare(b.subtract(div, fl), filledLike(b, u, 0.5), "GT");
  fl = b.select(above, b.add(fl, one), fl);
  // A zero quotient keeps the sign of a / b (copysign(0, a / b)).
  const signedZero = b.multiply(zero, q);
  const res = b.select(b.compare(div, zero, "EQ"), signedZero, fl);
  return b.select(b.compare(v, zero, "EQ"), q, res);
}

function comparison(
  b: ComputationBuilder,
  x: Instruction,
  y: Instruction,
  dir: ComparisonDirection,
) {
  const {
    operands: [u, v],
  } = elementwise(b, [x, y]);
  return b.compare(u!, v!, dir);
}

// ---- Arithmetic -----------------------------------------------------------------------------

export const add = defineOp({
  name: "add",
  signature: [p.tensorOrScalar("input"), p.tensorOrScalar("other"), p.scalar("alpha").default(1)],
  lower: (b, [x, y], { alpha }) => addLike(b, x!, y!, alpha, false),
});

export const sub = defineOp({
  name: "sub",
  signature: [p.tensorOrScalar("input"), p.tensorOrScalar("other"), p.scalar("alpha").default(1)],
  lower(b, [x, y], { alpha }) {
    refuseBool(b, [x!, y!], "use logicalXor or logicalNot instead");
    return addLike(b, x!, y!, alpha, true);
  },
});

export const mul = defineOp({
  name: "mul",
  signature: [p.tensorOrScalar("input"), p.tensorOrScalar("other")],
  lower(b, [x, y]) {
    const { dtype, operands } = elementwise(b, [x!, y!]);
    const [u, v] = operands;
    return dtype === "bool" ? b.and(u!, v!) : b.multiply(u!, v!);
  },
});

export const div = defineOp({
  name: "div",
  signature: [
    p.tensorOrScalar("input"),
    p.tensorOrScalar("other"),
    p.oneOf("roundingMode", ["trunc", "floor"]).optional(),
  ],
  lower(b, [x, y], { roundingMode }) {
    const t = resultTypeOf([x!, y!]);
    if (roundingMode === undefined) {
      // True division: integers and bools divide as floats.
      const {
        operands: [u, v],
      } = elementwise(b, [x!, y!], isFloatingDType(t) ? t : DEFAULT_FLOAT);
      return b.divide(u!, v!);
    }
    if (t === "bool") fail(b, `roundingMode '${roundingMode}' is not supported for bool inputs`);
    const {
      operands: [u, v],
    } = elementwise(b, [x!, y!], computeType(t));
    let r: Instruction;
    if (isFloatingDType(t)) {
      r = roundingMode === "trunc" ? truncDivFloat(b, u!, v!) : floorDivFloat(b, u!, v!);
    } else {
      r = roundingMode === "trunc" ? b.divide(u!, v!) : floorDivInt(b, u!, v!);
    }
    return cast(b, r, t);
  },
});

export const neg = defineOp({
  name: "neg",
  signature: [p.tensor("input")],
  lower(b, [x]) {
    refuseBool(b, [x!], "use logicalNot to invert a mask");
    return b.negate(x!);
  },
});

export const exp = defineOp({
  name: "exp",
  signature: [p.tensor("input")],
  lower(b, [x]) {
    const t = dtypeOf(x!);
    return b.exp(cast(b, x!, isFloatingDType(t) ? t : DEFAULT_FLOAT));
  },
});

export const relu = defineOp({
  name: "relu",
  signature: [p.tensor("input")],
  lower(b, [x]) {
    refuseBool(b, [x!], "relu needs a numeric dtype");
    return b.maximum(x!, filledLike(b, x!, 0));
  },
  // PyTorch's threshold_backward: the gradient where x > 0, none at 0 (maximum's tie rule
  // would give 1 there) nor for NaN.
  vjp: (b, [x], _outs, [g]) =>
    g === undefined ? [] : [b.select(b.compare(x!, filledLike(b, x!, 0), "GT"), g, filledLike(b, g, 0))],
});

/**
 * PyTorch's derivative of maximum/minimum (derivatives.yaml): a tie splits the gradient half
 * and half; elsewhere the winner takes it — `wins` is the comparison under which an operand
 * loses (self < other for maximum's self), and NaN, comparing false, gives both the gradient.
 * The IR rule of max/min gives a tie to the first operand.
 */
export function extremumVjp(loses: [ComparisonDirection, ComparisonDirection]) {
  return (
    b: ComputationBuilder,
    [x, y]: readonly (Instruction | undefined)[],
    _outs: readonly Instruction[],
    [g]: readonly (Instruction | undefined)[],
  ): (Instruction | undefined)[] => {
    if (g === undefined) return [];
    const {
      operands: [u, v],
    } = elementwise(b, [x!, y!]);
    const zero = filledLike(b, g, 0);
    const shared = b.select(b.compare(u!, v!, "EQ"), b.multiply(g, filledLike(b, g, 0.5)), g);
    const gx = b.select(b.compare(u!, v!, loses[0]), zero, shared);
    const gy = b.select(b.compare(u!, v!, loses[1]), zero, shared);
    return [
      cast(b, sumToShape(b, gx, dimsOf(x!)), dtypeOf(x!)),
      cast(b, sumToShape(b, gy, dimsOf(y!)), dtypeOf(y!)),
    ];
  };
}

export const maximum = defineOp({
  name: "maximum",
  signature: [p.tensor("input"), p.tensor("other")],
  lower(b, [x, y]) {
    const {
      operands: [u, v],
    } = elementwise(b, [x!, y!]);
    return b.maximum(u!, v!);
  },
  vjp: extremumVjp(["LT", "GT"]),
});

// ---- Comparison and selection ---------------------------------------------------------------

export const eq = defineOp({
  name: "eq",
  signature: [p.tensor("input"), p.tensorOrScalar("other")],
  lower: (b, [x, y]) => comparison(b, x!, y!, "EQ"),
});

export const lt = defineOp({
  name: "lt",
  signature: [p.tensor("input"), p.tensorOrScalar("other")],
  lower: (b, [x, y]) => comparison(b, x!, y!, "LT"),
});

export const where = defineOp({
  name: "where",
  signature: [p.tensor("condition"), p.tensorOrScalar("input"), p.tensorOrScalar("other")],
  lower(b, [c, x, y]) {
    if (dtypeOf(c!) !== "bool") {
      fail(b, `condition must be a bool tensor, got ${dtypeOf(c!)}`);
    }
    const t = resultTypeOf([x!, y!]);
    const shape = broadcastShapes(opName(b), dimsOf(c!), dimsOf(x!), dimsOf(y!));
    return b.select(
      broadcastTo(b, c!, shape),
      broadcastTo(b, cast(b, x!, t), shape),
      broadcastTo(b, cast(b, y!, t), shape),
    );
  },
});

// ---- Reductions -----------------------------------------------------------------------------

export const sum = defineOp({
  name: "sum",
  signature: [
    p.tensor("input"),
    p.dims("dim").optional(),
    p.bool("keepdim").default(false),
    p.dtype("dtype").optional(),
  ],
  lower(b, [x], { dim, keepdim, dtype }) {
    const inT = dtypeOf(x!);
    // Integral and bool sums are int64 unless a dtype is asked for (PyTorch).
    const outT = dtype ?? (isFloatingDType(inT) ? inT : DEFAULT_INT);
    const dims = reductionDims(b, x!, dim);
    const acc = cast(b, cast(b, x!, outT), computeType(outT));
    return cast(b, reduce(b, acc, dims, "add", 0, keepdim), outT);
  },
});

export const mean = defineOp({
  name: "mean",
  signature: [
    p.tensor("input"),
    p.dims("dim").optional(),
    p.bool("keepdim").default(false),
    p.dtype("dtype").optional(),
  ],
  lower(b, [x], { dim, keepdim, dtype }) {
    const inT = dtypeOf(x!);
    const outT = dtype ?? inT;
    if (!isFloatingDType(outT)) {
      fail(
        b,
        `could not infer the output dtype: the input must be floating point, got ${outT} ` +
          `(pass { dtype: "float32" })`,
      );
    }
    const dims = reductionDims(b, x!, dim);
    const acc = cast(b, cast(b, x!, outT), computeType(outT));
    const s = reduce(b, acc, dims, "add", 0, keepdim);
    const r = b.divide(s, filledLike(b, s, reducedCount(x!, dims)));
    return cast(b, r, outT);
  },
});

// ---- Shape ops ------------------------------------------------------------------------------

function reshapeLowering(b: ComputationBuilder, x: Instruction, shape: readonly number[]) {
  const dims = inferShape(opName(b), shape, numelOf(dimsOf(x)));
  return b.reshape(x, dims);
}

export const reshape = defineOp({
  name: "reshape",
  signature: [p.tensor("input"), p.ints("shape").varargs()],
  lower: (b, [x], { shape }) => reshapeLowering(b, x!, shape),
});

/** reshape under PyTorch's name for the no-copy case (Kiln tensors have no strides). */
export const view = defineOp({
  name: "view",
  signature: [p.tensor("input"), p.ints("shape").varargs()],
  lower: (b, [x], { shape }) => reshapeLowering(b, x!, shape),
});

export const permute = defineOp({
  name: "permute",
  signature: [p.tensor("input"), p.ints("dims").varargs()],
  lower(b, [x], { dims }) {
    const rank = rankOf(x!);
    const perm = normalizeDims(opName(b), dims, rank);
    if (perm.length !== rank) {
      fail(b, `dims ${shapeString(dims)} must name each of the input's ${rank} dims once`);
    }
    return b.transpose(x!, perm);
  },
});

export const transpose = defineOp({
  name: "transpose",
  signature: [p.tensor("input"), p.int("dim0"), p.int("dim1")],
  lower(b, [x], { dim0, dim1 }) {
    const rank = rankOf(x!);
    const d0 = normalizeDim(opName(b), dim0, rank, "dim0");
    const d1 = normalizeDim(opName(b), dim1, rank, "dim1");
    if (rank === 0) return x!;
    const perm = Array.from({ length: rank }, (_, i) => i);
    perm[d0] = d1;
    perm[d1] = d0;
    return b.transpose(x!, perm);
  },
});

export const unsqueeze = defineOp({
  name: "unsqueeze",
  signature: [p.tensor("input"), p.int("dim")],
  lower(b, [x], { dim }) {
    const shape = [...dimsOf(x!)];
    const d = normalizeDim(opName(b), dim, shape.length + 1);
    shape.splice(d, 0, 1);
    return b.reshape(x!, shape);
  },
});

export const squeeze = defineOp({
  name: "squeeze",
  signature: [p.tensor("input"), p.dims("dim").optional()],
  lower(b, [x], { dim }) {
    const shape = dimsOf(x!);
    const chosen =
      dim === undefined
        ? shape.map((_, i) => i)
        : normalizeDims(opName(b), dim, shape.length).filter((d) => d < shape.length);
    return b.reshape(
      x!,
      shape.filter((s, i) => !(s === 1 && chosen.includes(i))),
    );
  },
});

export const expand = defineOp({
  name: "expand",
  signature: [p.tensor("input"), p.ints("size").varargs()],
  lower(b, [x], { size }) {
    const shape = dimsOf(x!);
    const offset = size.length - shape.length;
    if (offset < 0) {
      fail(
        b,
        `the number of sizes (${size.length}) must be at least the number of dims of the ` +
          `tensor (${shape.length}); sizes ${shapeString(size)}, tensor ${shapeString(shape)}`,
      );
    }
    const target = size.map((s, i) => {
      const j = i - offset;
      if (j < 0) {
        if (s < 0) fail(b, `size ${s} is not allowed in a new leading dim (dim ${i})`);
        return s;
      }
      const have = shape[j]!;
      if (s === -1) return have;
      if (s !== have && have !== 1) {
        fail(
          b,
          `the expanded size (${s}) must match the existing size (${have}) at non-singleton ` +
            `dim ${i}; target sizes ${shapeString(size)}, tensor sizes ${shapeString(shape)}`,
        );
      }
      if (s < 0) fail(b, `invalid size ${s} at dim ${i}`);
      return s;
    });
    return broadcastTo(b, x!, target);
  },
});

// ---- matmul ---------------------------------------------------------------------------------

export const matmul = defineOp({
  name: "matmul",
  signature: [p.tensor("input"), p.tensor("other")],
  lower(b, [x, y]) {
    const a = dimsOf(x!);
    const c = dimsOf(y!);
    const shapes = `${shapeString(a)} and ${shapeString(c)}`;
    if (a.length === 0 || c.length === 0) {
      fail(b, `both arguments need at least 1 dim, got shapes ${shapes}`);
    }
    const ta = dtypeOf(x!);
    const tc = dtypeOf(y!);
    if (ta !== tc) fail(b, `expected both inputs to have the same dtype, got ${ta} and ${tc}`);
    if (ta === "bool") fail(b, `bool tensors are not supported`);
    // A vector operand becomes a one-row (lhs) or one-column (rhs) matrix, removed at the end.
    const lhs = a.length === 1 ? b.reshape(x!, [1, a[0]!]) : x!;
    const rhs = c.length === 1 ? b.reshape(y!, [c[0]!, 1]) : y!;
    const la = dimsOf(lhs);
    const lc = dimsOf(rhs);
    const n = la[la.length - 2]!;
    const k = la[la.length - 1]!;
    const k2 = lc[lc.length - 2]!;
    const m = lc[lc.length - 1]!;
    if (k !== k2) {
      fail(b, `shapes ${shapes} cannot be multiplied (${n}x${k} and ${k2}x${m})`);
    }
    const batchA = la.slice(0, -2);
    const batchC = lc.slice(0, -2);
    let r: Instruction;
    if (batchC.length === 0) {
      // [...B, n, k] x [k, m]: the lhs's batch dims are free dims of the dot.
      r = b.dot(lhs, rhs, { lhsContracting: [la.length - 1], rhsContracting: [0] });
    } else if (batchA.length === 0) {
      // [n, k] x [...B, k, m] gives [n, ...B, m]; move n behind the batch dims.
      const d = b.dot(lhs, rhs, { lhsContracting: [1], rhsContracting: [lc.length - 2] });
      const nb = batchC.length;
      const perm = [...Array.from({ length: nb }, (_, i) => i + 1), 0, nb + 1];
      r = b.transpose(d, perm);
    } else {
      // Checked here, not by broadcastShapes, so the error names both operands' full shapes.
      for (let j = 1; j <= Math.min(batchA.length, batchC.length); j++) {
        const da = batchA[batchA.length - j]!;
        const dc = batchC[batchC.length - j]!;
        if (da !== dc && da !== 1 && dc !== 1) {
          fail(
            b,
            `shapes ${shapes} cannot be multiplied: batch dims ${shapeString(batchA)} and ` +
              `${shapeString(batchC)} cannot be broadcast (dim ${-j - 2}: ${da} vs ${dc})`,
          );
        }
      }
      const batch = broadcastShapes(opName(b), batchA, batchC);
      const nb = batch.length;
      const l = broadcastTo(b, lhs, [...batch, n, k]);
      const rr = broadcastTo(b, rhs, [...batch, k, m]);
      const bd = Array.from({ length: nb }, (_, i) => i);
      r = b.dot(l, rr, {
        lhsBatch: bd,
        rhsBatch: bd,
        lhsContracting: [nb + 1],
        rhsContracting: [nb],
      });
    }
    const out = [...dimsOf(r)];
    if (c.length === 1) out.splice(out.length - 1, 1);
    if (a.length === 1) out.splice(out.length - (c.length === 1 ? 1 : 2), 1);
    return out.length === dimsOf(r).length ? r : b.reshape(r, out);
  },
});

// ---- dtype conversion -----------------------------------------------------------------------

export const to = defineOp({
  name: "to",
  signature: [
    p.tensor("input"),
    p.custom<"dtype", DType | Tensor, DType>("dtype", (v) => {
      if (isDType(v)) return v;
      if (v instanceof Tensor) return v.dtype;
      return problem("must be a dtype name or a Tensor (whose dtype is taken)");
    }),
  ],
  lower: (b, [x], { dtype }) => cast(b, x!, dtype),
});

// ---- Methods --------------------------------------------------------------------------------

installMethods({
  add,
  sub,
  mul,
  div,
  neg,
  exp,
  relu,
  maximum,
  eq,
  lt,
  where: (input: Tensor, condition: Tensor, other: Tensor | Scalar) =>
    where(condition, input, other),
  sum,
  mean,
  reshape,
  view,
  permute,
  transpose,
  unsqueeze,
  squeeze,
  expand,
  matmul,
  to,
});

declare module "../tensor.ts" {
  interface Tensor {
    add: MethodOf<typeof add>;
    sub: MethodOf<typeof sub>;
    mul: MethodOf<typeof mul>;
    div: MethodOf<typeof div>;
    neg: MethodOf<typeof neg>;
    exp: MethodOf<typeof exp>;
    relu: MethodOf<typeof relu>;
    maximum: MethodOf<typeof maximum>;
    eq: MethodOf<typeof eq>;
    lt: MethodOf<typeof lt>;
    /** `x.where(condition, other)`: x where condition holds, else other (PyTorch's order). */
    where(condition: Tensor, other: Tensor | Scalar): Tensor;
    sum: MethodOf<typeof sum>;
    mean: MethodOf<typeof mean>;
    reshape: MethodOf<typeof reshape>;
    view: MethodOf<typeof view>;
    permute: MethodOf<typeof permute>;
    transpose: MethodOf<typeof transpose>;
    unsqueeze: MethodOf<typeof unsqueeze>;
    squeeze: MethodOf<typeof squeeze>;
    expand: MethodOf<typeof expand>;
    matmul: MethodOf<typeof matmul>;
    to: MethodOf<typeof to>;
  }
}
