// Elementwise ops beyond the first ones in core.ts, each defined once by its lowering to IR:
// pow; the sign-like ops (abs sign); the float functions (exp2 expm1 log log2 log1p sqrt rsqrt
// reciprocal sin cos tan tanh sigmoid erf), which promote integer and bool inputs to float32;
// rounding (floor ceil round trunc), the identity on integers; activations (relu6 leakyRelu elu
// gelu silu mish softplus); clamp and minimum; the comparisons core lacks (ne le gt ge); the
// logical ops; float classification (isnan isinf isfinite) and nanToNum. PyTorch semantics
// throughout, including which dtypes an op refuses (abs of bool, floor of bool, elu of ints);
// composite formulas on float16/bfloat16 compute in float32 and round once, as PyTorch does.

import type { ComputationBuilder } from "../../ir/builder.ts";
import type { ComparisonDirection } from "../../ir/attributes.ts";
import type { Instruction } from "../../ir/module.ts";
import { p } from "../args.ts";
import {
  DEFAULT_FLOAT,
  type DType,
  isFloatingDType,
  isIntegralDType,
  isIntScalar,
  resultType,
  type Scalar,
} from "../dtype.ts";
import { defineOp, installMethods, type MethodOf } from "../dispatch.ts";
import { ArgumentError, OpError } from "../errors.ts";
import {
  broadcastAll,
  cast,
  computeType,
  dimsOf,
  dtypeOf,
  elementwise,
  fail,
  filled,
  filledLike,
  isScalarOperand,
  resultTypeOf,
} from "../lower.ts";
import type { Tensor } from "../tensor.ts";
import { extremumVjp } from "./core.ts";

// ---- Shared lowering pieces -----------------------------------------------------------------

type Lower1 = (b: ComputationBuilder, x: Instruction) => Instruction;

/** The float dtype a float function computes in: floats keep theirs, ints and bools float32. */
function floatTypeOf(x: Instruction): DType {
  const t = dtypeOf(x);
  return isFloatingDType(t) ? t : DEFAULT_FLOAT;
}

/**
 * `f` applied to x as a float function (PyTorch's int-to-float unary ops): integer and bool
 * inputs become float32. With `opmath`, float16/bfloat16 compute in float32 and round once at
 * the end, for formulas of several instructions.
 */
function floatUnary(b: ComputationBuilder, x: Instruction, f: Lower1, opmath = false) {
  const t = floatTypeOf(x);
  const ct = opmath ? computeType(t) : t;
  return cast(b, f(b, cast(b, x, ct)), t);
}

/** PyTorch's "not implemented for 'Long'": the op is defined on floating dtypes only. */
function requireFloat(b: ComputationBuilder, x: Instruction): DType {
  const t = dtypeOf(x);
  if (!isFloatingDType(t)) {
    fail(b, `expected a floating point input (float32, float16 or bfloat16), got ${t}`);
  }
  return t;
}

/** A float activation: float inputs only, computed in float32 for half types. */
function floatActivation(b: ComputationBuilder, x: Instruction, f: Lower1): Instruction {
  const t = requireFloat(b, x);
  return cast(b, f(b, cast(b, x, computeType(t))), t);
}

function refuseBool(b: ComputationBuilder, x: Instruction, hint: string): void {
  if (dtypeOf(x) === "bool") fail(b, `bool tensors are not supported; ${hint}`);
}

/** A scalar constant shaped like x. */
function like(b: ComputationBuilder, x: Instruction, v: Scalar): Instruction {
  return filledLike(b, x, v);
}

function comparison(
  b: ComputationBuilder,
  x: Instruction,
  y: Instruction,
  dir: ComparisonDirection,
): Instruction {
  const {
    operands: [u, v],
  } = elementwise(b, [x, y]);
  return b.compare(u!, v!, dir);
}

/** "Nonzero" as a bool tensor (NaN is nonzero; -0 is zero). */
function truthy(b: ComputationBuilder, x: Instruction): Instruction {
  return dtypeOf(x) === "bool" ? x : b.compare(x, like(b, x, 0), "NE");
}

/** A bool tensor of x's dims, all `value` (integer inputs for isnan/isinf/isfinite). */
function allBool(b: ComputationBuilder, x: Instruction, value: boolean): Instruction {
  return filled(b, "bool", value, dimsOf(x));
}

/** The largest finite value of a float dtype (torch.finfo(dtype).max). */
const FLOAT_MAX: Record<"float32" | "float16" | "bfloat16", number> = {
  float32: 3.4028234663852886e38,
  float16: 65504,
  bfloat16: 3.3895313892515355e38,
};

function finfoMax(t: DType): number {
  if (t === "float32" || t === "float16" || t === "bfloat16") return FLOAT_MAX[t];
  throw new Error(`finfoMax: ${t} is not a float dtype`);
}

/** The range of an integral dtype as scalars (bigints for int64, exact). */
function intRange(t: DType): readonly [number | bigint, number | bigint] {
  switch (t) {
    case "int32":
      return [-2147483648, 2147483647];
    case "int64":
      return [-(2n ** 63n), 2n ** 63n - 1n];
    case "uint8":
      return [0, 255];
    default:
      throw new Error(`intRange: ${t} is not an integral dtype`);
  }
}

// ---- pow ------------------------------------------------------------------------------------

export const pow = defineOp({
  name: "pow",
  signature: [p.tensorOrScalar("input"), p.tensorOrScalar("exponent")],
  normalize(args) {
    const { input, exponent } = args;
    // PyTorch refuses this for a scalar exponent (a tensor exponent gives 0, or ±1 for -1).
    const intBase =
      typeof input === "object" && (isIntegralDType(input.dtype) || input.dtype === "bool");
    const negInt =
      (typeof exponent === "number" && isIntScalar(exponent) && exponent < 0) ||
      (typeof exponent === "bigint" && exponent < 0n);
    if (intBase && negInt) {
      throw new ArgumentError(
        "pow",
        "exponent",
        `must not be a negative integer for an integer input (${input.dtype}): integers to ` +
          `negative integer powers are not allowed, got ${String(exponent)}`,
      );
    }
    return args;
  },
  lower(b, [x, y]) {
    const t = resultTypeOf([x!, y!]);
    if (t === "bool") fail(b, `bool tensors are not supported (cast to an integer dtype first)`);
    const {
      operands: [u, v],
    } = elementwise(b, [x!, y!], t);
    const r = b.power(u!, v!);
    if (isFloatingDType(t)) {
      if (!isScalarOperand(y!)) return r;
      // pow(Tensor, Scalar) in PyTorch computes x^0.5 as sqrt and x^-0.5 as rsqrt, which differ
      // from C's pow at -0 and -inf; the other special exponents agree with pow's values.
      // Each branch reads 1 where it is discarded: a discarded branch still gets a (zero)
      // cotangent in backward, and 0 times its derivative at a negative base (sqrt's, or
      // x^(y-1) at y = 0.5) would be NaN — x.pow(2) must differentiate at x < 0.
      const half = b.compare(v!, like(b, v!, 0.5), "EQ");
      const minusHalf = b.compare(v!, like(b, v!, -0.5), "EQ");
      const one = like(b, u!, 1);
      const general = b.power(b.select(b.or(half, minusHalf), one, u!), v!);
      const sq = b.select(half, b.sqrt(b.select(half, u!, one)), general);
      return b.select(minusHalf, b.rsqrt(b.select(minusHalf, u!, one)), sq);
    }
    if (t !== "int32" && t !== "int64") return r;
    // IR power gives 0 for every negative exponent; PyTorch gives (-1)^e for a base of -1.
    const minusOne = b.compare(u!, like(b, u!, -1), "EQ");
    const negative = b.compare(v!, like(b, v!, 0), "LT");
    const odd = b.compare(b.remainder(v!, like(b, v!, 2)), like(b, v!, 0), "NE");
    const signed = b.select(odd, like(b, r, -1), like(b, r, 1));
    return b.select(b.and(minusOne, negative), signed, r);
  },
});

// ---- Sign-like ------------------------------------------------------------------------------

export const abs = defineOp({
  name: "abs",
  signature: [p.tensor("input")],
  lower(b, [x]) {
    refuseBool(b, x!, "abs needs a numeric dtype");
    return dtypeOf(x!) === "uint8" ? x! : b.abs(x!);
  },
});

export const sign = defineOp({
  name: "sign",
  signature: [p.tensor("input")],
  lower(b, [x]) {
    const t = dtypeOf(x!);
    if (t === "bool") return x!;
    if (t === "int32" || t === "int64") return b.sign(x!);
    // (x > 0) - (x < 0), as PyTorch computes it: NaN and -0 give +0 (IR sign keeps them).
    const zero = like(b, x!, 0);
    const pos = cast(b, b.compare(x!, zero, "GT"), t);
    if (t === "uint8") return pos;
    return b.subtract(pos, cast(b, b.compare(x!, zero, "LT"), t));
  },
});

// ---- Float functions: integer and bool inputs become float32 ---------------------------------

function floatFunction(name: string, f: Lower1, opmath = false) {
  return defineOp({
    name,
    signature: [p.tensor("input")],
    lower: (b, [x]) => floatUnary(b, x!, f, opmath),
  });
}

const LOG2E = 1 / Math.LN2;

export const exp2 = floatFunction("exp2", (b, x) => b.power(like(b, x, 2), x));
export const expm1 = floatFunction("expm1", (b, x) => b.expm1(x));
export const log = floatFunction("log", (b, x) => b.log(x));
export const log2 = floatFunction("log2", (b, x) => b.multiply(b.log(x), like(b, x, LOG2E)), true);
export const log1p = floatFunction("log1p", (b, x) => b.log1p(x));
export const sqrt = floatFunction("sqrt", (b, x) => b.sqrt(x));
export const rsqrt = floatFunction("rsqrt", (b, x) => b.rsqrt(x));
export const reciprocal = floatFunction("reciprocal", (b, x) => b.divide(like(b, x, 1), x));
export const sin = floatFunction("sin", (b, x) => b.sin(x));
export const cos = floatFunction("cos", (b, x) => b.cos(x));
export const tan = floatFunction("tan", (b, x) => b.tan(x));
export const tanh = floatFunction("tanh", (b, x) => b.tanh(x));
export const sigmoid = floatFunction("sigmoid", (b, x) => b.logistic(x));
export const erf = floatFunction("erf", (b, x) => b.erf(x));

// ---- Rounding: the identity on integers, refused on bool -------------------------------------

function roundingOp(name: string, f: Lower1) {
  return defineOp({
    name,
    signature: [p.tensor("input")],
    lower(b, [x]) {
      refuseBool(b, x!, `${name} needs a numeric dtype`);
      return isFloatingDType(dtypeOf(x!)) ? f(b, x!) : x!;
    },
  });
}

export const floor = roundingOp("floor", (b, x) => b.floor(x));
export const ceil = roundingOp("ceil", (b, x) => b.ceil(x));
export const trunc = roundingOp("trunc", (b, x) =>
  b.select(b.compare(x, like(b, x, 0), "LT"), b.ceil(x), b.floor(x)),
);

/** Half to even (PyTorch's nearbyint); with decimals, scaled by 10^|decimals| as PyTorch does. */
export const round = defineOp({
  name: "round",
  signature: [p.tensor("input"), p.int("decimals").default(0)],
  lower(b, [x], { decimals }) {
    const t = dtypeOf(x!);
    if (t === "bool") fail(b, `bool tensors are not supported; round needs a numeric dtype`);
    if (!isFloatingDType(t)) {
      if (decimals !== 0) fail(b, `decimals=${decimals} needs a floating point input, got ${t}`);
      return x!;
    }
    if (decimals === 0) return b.roundEven(x!);
    const ct = computeType(t);
    const u = cast(b, x!, ct);
    const scale = like(b, u, 10 ** Math.abs(decimals));
    const r =
      decimals > 0
        ? b.divide(b.roundEven(b.multiply(u, scale)), scale)
        : b.multiply(b.roundEven(b.divide(u, scale)), scale);
    return cast(b, r, t);
  },
});

// ---- Activations ----------------------------------------------------------------------------

/** hardtanh(x, 0, 6); integers allowed, bool refused (PyTorch). */
export const relu6 = defineOp({
  name: "relu6",
  signature: [p.tensor("input")],
  lower(b, [x]) {
    refuseBool(b, x!, "relu6 needs a numeric dtype");
    return b.clamp(like(b, x!, 0), x!, like(b, x!, 6));
  },
  // PyTorch's hardtanh_backward: the gradient strictly inside (0, 6), none at the bounds
  // (clamp's rule passes it there, as PyTorch's clamp does).
  vjp(b, [x], _outs, [g]) {
    if (g === undefined) return [];
    const inside = b.and(
      b.compare(x!, like(b, x!, 0), "GT"),
      b.compare(x!, like(b, x!, 6), "LT"),
    );
    return [b.select(inside, g, like(b, g, 0))];
  },
});

export const leakyRelu = defineOp({
  name: "leakyRelu",
  signature: [p.tensor("input"), p.number("negativeSlope").default(0.01)],
  lower: (b, [x], { negativeSlope }) =>
    floatActivation(b, x!, (b, u) =>
      b.select(
        b.compare(u, like(b, u, 0), "GT"),
        u,
        b.multiply(u, like(b, u, negativeSlope)),
      ),
    ),
});

/** x for x > 0, else alpha * (exp(x) - 1) (computed with expm1). */
export const elu = defineOp({
  name: "elu",
  signature: [p.tensor("input"), p.number("alpha").default(1)],
  lower: (b, [x], { alpha }) =>
    floatActivation(b, x!, (b, u) =>
      {
        const pos = b.compare(u, like(b, u, 0), "GT");
        // expm1 reads 0 where its branch is discarded, so a large x cannot overflow into a NaN
        // gradient (0 times exp(x) = inf) in backward.
        const neg = b.expm1(b.select(pos, like(b, u, 0), u));
        return b.select(pos, u, b.multiply(neg, like(b, u, alpha)));
      },
    ),
});

/**
 * "none": x/2 (1 + erf(x/sqrt 2)); "tanh": x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))),
 * the formulas (and the order of operations) of PyTorch's kernel.
 */
export const gelu = defineOp({
  name: "gelu",
  signature: [p.tensor("input"), p.oneOf("approximate", ["none", "tanh"]).default("none")],
  lower: (b, [x], { approximate }) =>
    floatActivation(b, x!, (b, u) => {
      const half = like(b, u, 0.5);
      const one = like(b, u, 1);
      if (approximate === "none") {
        const e = b.erf(b.multiply(u, like(b, u, Math.SQRT1_2)));
        return b.multiply(b.multiply(u, half), b.add(one, e));
      }
      const cube = b.multiply(b.multiply(u, u), u);
      const inner = b.add(u, b.multiply(like(b, u, 0.044715), cube));
      const th = b.tanh(b.multiply(like(b, u, Math.sqrt(2 / Math.PI)), inner));
      return b.multiply(b.multiply(half, u), b.add(one, th));
    }),
});

/** x / (1 + exp(-x)), PyTorch's formula (so silu(-inf) is NaN, as there). */
export const silu = defineOp({
  name: "silu",
  signature: [p.tensor("input")],
  lower: (b, [x]) =>
    floatActivation(b, x!, (b, u) =>
      b.divide(u, b.add(like(b, u, 1), b.exp(b.negate(u)))),
    ),
});

/** x * tanh(log1p(exp(x))). */
export const mish = defineOp({
  name: "mish",
  signature: [p.tensor("input")],
  lower: (b, [x]) =>
    floatActivation(b, x!, (b, u) => b.multiply(u, b.tanh(b.log1p(b.exp(u))))),
});

/** log1p(exp(beta x)) / beta, or x itself where beta x > threshold (PyTorch's rule). */
export const softplus = defineOp({
  name: "softplus",
  signature: [p.tensor("input"), p.number("beta").default(1), p.number("threshold").default(20)],
  lower: (b, [x], { beta, threshold }) =>
    floatActivation(b, x!, (b, u) => {
      const bx = b.multiply(u, like(b, u, beta));
      const linear = b.compare(bx, like(b, u, threshold), "GT");
      // The soft branch reads 0 where it is discarded (exp would overflow: a NaN gradient).
      const soft = b.divide(b.log1p(b.exp(b.select(linear, like(b, u, 0), bx))), like(b, u, beta));
      return b.select(linear, u, soft);
    }),
});

// ---- clamp and minimum ----------------------------------------------------------------------

type Bound = Tensor | Scalar | undefined;

/** clamp's parsed arguments (spelled out: inferring them would be circular via Tensor.clamp). */
interface ClampArgs {
  input: Tensor;
  min: Bound;
  max: Bound;
}

function describeBound(v: Tensor | Scalar): string {
  return typeof v === "object" ? `a ${v.dtype} tensor` : String(v);
}

/**
 * clamp's missing bound, filled in by normalize: the result dtype's extreme (±inf for floats),
 * as a scalar of the result's category, so it changes neither the values nor the promotion
 * (a wrapped number never outranks a tensor of its category). clamp(x, min), clamp(x, null,
 * max) and clamp(x, min, max) then lower alike and, for bounds of one kind, share a program.
 */
function neutralBound(t: DType, which: "min" | "max"): Scalar {
  if (isFloatingDType(t)) return which === "min" ? -Infinity : Infinity;
  const [lo, hi] = intRange(t);
  return which === "min" ? lo : hi;
}

function checkBoundRange(name: "min" | "max", v: Bound, t: DType): void {
  if (v === undefined || typeof v === "object" || !isIntegralDType(t)) return;
  const [lo, hi] = intRange(t);
  const n = typeof v === "boolean" ? Number(v) : v;
  if (n < lo || n > hi) {
    throw new ArgumentError(
      "clamp",
      name,
      `value ${String(v)} is out of range for the result dtype ${t} [${lo}, ${hi}]`,
    );
  }
}

export const clamp = defineOp({
  name: "clamp",
  signature: [
    p.tensor("input"),
    p.tensorOrScalar("min").optional(),
    p.tensorOrScalar("max").optional(),
  ],
  normalize(args: ClampArgs): ClampArgs {
    const { input, min, max } = args;
    if (min === undefined && max === undefined) {
      throw new ArgumentError("clamp", undefined, `at least one of 'min' or 'max' must be given`);
    }
    const given = [min, max].filter((v): v is Tensor | Scalar => v !== undefined);
    const t = resultType(input, ...given);
    if (t === "bool") {
      throw new OpError(
        "clamp",
        `bool results are not supported (input ${input.dtype}, ` +
          `bounds ${given.map(describeBound).join(" and ")})`,
      );
    }
    checkBoundRange("min", min, t);
    checkBoundRange("max", max, t);
    return {
      input,
      min: min ?? neutralBound(t, "min"),
      max: max ?? neutralBound(t, "max"),
    };
  },
  lower(b, [x, lo, hi]) {
    const {
      operands: [u, l, h],
    } = elementwise(b, [x!, lo!, hi!]);
    return b.clamp(l!, u!, h!);
  },
});

export const minimum = defineOp({
  name: "minimum",
  signature: [p.tensor("input"), p.tensor("other")],
  lower(b, [x, y]) {
    const {
      operands: [u, v],
    } = elementwise(b, [x!, y!]);
    return b.minimum(u!, v!);
  },
  vjp: extremumVjp(["GT", "LT"]),
});

// ---- Comparisons (eq and lt are in core.ts) --------------------------------------------------

export const ne = defineOp({
  name: "ne",
  signature: [p.tensor("input"), p.tensorOrScalar("other")],
  lower: (b, [x, y]) => comparison(b, x!, y!, "NE"),
});

export const le = defineOp({
  name: "le",
  signature: [p.tensor("input"), p.tensorOrScalar("other")],
  lower: (b, [x, y]) => comparison(b, x!, y!, "LE"),
});

export const gt = defineOp({
  name: "gt",
  signature: [p.tensor("input"), p.tensorOrScalar("other")],
  lower: (b, [x, y]) => comparison(b, x!, y!, "GT"),
});

export const ge = defineOp({
  name: "ge",
  signature: [p.tensor("input"), p.tensorOrScalar("other")],
  lower: (b, [x, y]) => comparison(b, x!, y!, "GE"),
});

// ---- Logical ops: any dtype, "nonzero" is true, bool result -----------------------------------

function logicalBinary(name: string, kind: "and" | "or" | "xor") {
  return defineOp({
    name,
    signature: [p.tensor("input"), p.tensor("other")],
    lower(b, [x, y]) {
      const [u, v] = broadcastAll(b, [truthy(b, x!), truthy(b, y!)]);
      return kind === "and" ? b.and(u!, v!) : kind === "or" ? b.or(u!, v!) : b.xor(u!, v!);
    },
  });
}

export const logicalAnd = logicalBinary("logicalAnd", "and");
export const logicalOr = logicalBinary("logicalOr", "or");
export const logicalXor = logicalBinary("logicalXor", "xor");

export const logicalNot = defineOp({
  name: "logicalNot",
  signature: [p.tensor("input")],
  lower: (b, [x]) => b.not(truthy(b, x!)),
});

// ---- Float classification and nanToNum -------------------------------------------------------

export const isnan = defineOp({
  name: "isnan",
  signature: [p.tensor("input")],
  lower(b, [x]) {
    if (!isFloatingDType(dtypeOf(x!))) return allBool(b, x!, false);
    return b.compare(x!, x!, "NE");
  },
});

export const isinf = defineOp({
  name: "isinf",
  signature: [p.tensor("input")],
  lower(b, [x]) {
    if (!isFloatingDType(dtypeOf(x!))) return allBool(b, x!, false);
    return b.compare(b.abs(x!), like(b, x!, Infinity), "EQ");
  },
});

export const isfinite = defineOp({
  name: "isfinite",
  signature: [p.tensor("input")],
  lower(b, [x]) {
    if (!isFloatingDType(dtypeOf(x!))) return allBool(b, x!, true);
    return b.isFinite(x!);
  },
});

/**
 * NaN → nan, +inf → posinf, -inf → neginf (defaults: 0 and the dtype's largest and lowest
 * finite values); replacement values round to the dtype (1e10 is inf in float16, as in
 * PyTorch). Integer and bool inputs come back unchanged.
 */
export const nanToNum = defineOp({
  name: "nanToNum",
  signature: [
    p.tensor("input"),
    p.number("nan").default(0),
    p.number("posinf").optional(),
    p.number("neginf").optional(),
  ],
  lower(b, [x], { nan, posinf, neginf }) {
    const t = dtypeOf(x!);
    if (!isFloatingDType(t)) return x!;
    const c = (v: number) => like(b, x!, v);
    const inf = like(b, x!, Infinity);
    let r = b.select(b.compare(x!, inf, "EQ"), c(posinf ?? finfoMax(t)), x!);
    r = b.select(b.compare(x!, b.negate(inf), "EQ"), c(neginf ?? -finfoMax(t)), r);
    return b.select(b.compare(x!, x!, "NE"), c(nan), r);
  },
});

// ---- Methods --------------------------------------------------------------------------------

installMethods({
  pow,
  abs,
  sign,
  exp2,
  expm1,
  log,
  log2,
  log1p,
  sqrt,
  rsqrt,
  reciprocal,
  sin,
  cos,
  tan,
  tanh,
  sigmoid,
  erf,
  floor,
  ceil,
  trunc,
  round,
  relu6,
  leakyRelu,
  elu,
  gelu,
  silu,
  mish,
  softplus,
  clamp,
  minimum,
  ne,
  le,
  gt,
  ge,
  logicalAnd,
  logicalOr,
  logicalXor,
  logicalNot,
  isnan,
  isinf,
  isfinite,
  nanToNum,
});

declare module "../tensor.ts" {
  interface Tensor {
    pow: MethodOf<typeof pow>;
    abs: MethodOf<typeof abs>;
    sign: MethodOf<typeof sign>;
    exp2: MethodOf<typeof exp2>;
    expm1: MethodOf<typeof expm1>;
    log: MethodOf<typeof log>;
    log2: MethodOf<typeof log2>;
    log1p: MethodOf<typeof log1p>;
    sqrt: MethodOf<typeof sqrt>;
    rsqrt: MethodOf<typeof rsqrt>;
    reciprocal: MethodOf<typeof reciprocal>;
    sin: MethodOf<typeof sin>;
    cos: MethodOf<typeof cos>;
    tan: MethodOf<typeof tan>;
    tanh: MethodOf<typeof tanh>;
    sigmoid: MethodOf<typeof sigmoid>;
    erf: MethodOf<typeof erf>;
    floor: MethodOf<typeof floor>;
    ceil: MethodOf<typeof ceil>;
    trunc: MethodOf<typeof trunc>;
    round: MethodOf<typeof round>;
    relu6: MethodOf<typeof relu6>;
    leakyRelu: MethodOf<typeof leakyRelu>;
    elu: MethodOf<typeof elu>;
    gelu: MethodOf<typeof gelu>;
    silu: MethodOf<typeof silu>;
    mish: MethodOf<typeof mish>;
    softplus: MethodOf<typeof softplus>;
    clamp: MethodOf<typeof clamp>;
    minimum: MethodOf<typeof minimum>;
    ne: MethodOf<typeof ne>;
    le: MethodOf<typeof le>;
    gt: MethodOf<typeof gt>;
    ge: MethodOf<typeof ge>;
    logicalAnd: MethodOf<typeof logicalAnd>;
    logicalOr: MethodOf<typeof logicalOr>;
    logicalXor: MethodOf<typeof logicalXor>;
    logicalNot: MethodOf<typeof logicalNot>;
    isnan: MethodOf<typeof isnan>;
    isinf: MethodOf<typeof isinf>;
    isfinite: MethodOf<typeof isfinite>;
    nanToNum: MethodOf<typeof nanToNum>;
  }
}
