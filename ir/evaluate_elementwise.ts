// Elementwise semantics of the reference evaluator: the scalar kernels of every unary, binary and
// ternary opcode per element type, compare (IEEE and TOTALORDER), select, clamp, convert and
// bitcast-convert, plus the loops that map them over literals. Semantics follow XLA's HloEvaluator
// (xla/hlo/evaluator/hlo_evaluator_typed_visitor.h): floats compute in double and round once to
// the result type (f16/bf16 through f32, as XLA computes half types in f32); every integer type
// wraps (two's complement, modulo 2^bits: s4 s8 s16 s32 s64 u4 u8 u16 u32 u64);
// integer x/0 = -1 (all ones unsigned), INT_MIN/-1 = INT_MIN, x%0 = x, INT_MIN%-1 = 0;
// maximum/minimum propagate NaN and otherwise return the lhs on ties (std::max/std::min, so
// max(-0, +0) = -0 and max(+0, -0) = +0); shifts by >= the bit width (or negative) give 0, or the
// sign fill for an arithmetic right shift, which treats an unsigned type as the signed one of its
// width (XLA's make_signed). s32, u8 and s64 have their own kernel tables; the other integer types
// share width-parameterized kernels (intKernel1/intKernel2, bigKernel1/bigKernel2 for u64).

import { isSmallFloatType, roundToSmallFloat } from "./small_floats.ts";
import type { ComparisonDirection, ComparisonType } from "./attributes.ts";
import {
  allocate,
  dataFromBytes,
  dataToBytes,
  Literal,
  roundToBF16,
  roundToF16,
} from "./literal.ts";
import { ELEMENT_TYPE_INFO, wrapBigInteger, wrapInteger } from "./element_types.ts";
import { elementByteSize, type ElementType, isBigIntType, isIntegerType } from "./shape.ts";
import {
  asLiteral,
  attr,
  elems,
  fail,
  isFloat,
  mutableElems,
  roundFor,
  valueShapeString,
  type OpImpl,
  type Scalar,
} from "./evaluate_support.ts";

export type F1 = (x: Scalar) => Scalar;
export type F2 = (a: Scalar, b: Scalar) => Scalar;

interface Kernels1 {
  float?: (x: number) => number;
  s32?: (x: number) => number;
  u8?: (x: number) => number;
  s64?: (x: bigint) => bigint;
  pred?: (x: number) => number;
}

interface Kernels2 {
  float?: (a: number, b: number) => number;
  s32?: (a: number, b: number) => number;
  u8?: (a: number, b: number) => number;
  s64?: (a: bigint, b: bigint) => bigint;
  pred?: (a: number, b: number) => number;
}

/** The kernel-table slot of t, or undefined for the types with width-parameterized kernels. */
function slot(t: ElementType): keyof Kernels1 | undefined {
  switch (t) {
    case "f32":
    case "f16":
    case "bf16":
    case "f64":
    case "f8e5m2":
    case "f8e4m3":
    case "f8e3m4":
    case "f8e4m3fn":
    case "f8e4m3fnuz":
    case "f8e5m2fnuz":
    case "f8e4m3b11fnuz":
      return "float";
    case "s32":
    case "u8":
    case "s64":
    case "pred":
      return t;
    case "s4":
    case "s8":
    case "s16":
    case "u4":
    case "u16":
    case "u32":
    case "u64":
      return undefined;
    case "token":
      return fail("a token has no arithmetic");
    default: {
      const never: never = t;
      return fail(`unknown element type ${String(never)}`);
    }
  }
}

// ---- numeric helpers ----------------------------------------------------------------------

const S32_MIN = -2147483648;
const S64_MIN = -(2n ** 63n);
const asS64 = (v: bigint): bigint => BigInt.asIntN(64, v);
const id = <T>(x: T): T => x;

function signF(x: number): number {
  if (Number.isNaN(x) || x === 0) return x;
  return x > 0 ? 1 : -1;
}

/** std::round: half away from zero; keeps the sign of zero. */
function roundAfz(x: number): number {
  const t = Math.trunc(x);
  return Math.abs(x - t) >= 0.5 ? t + Math.sign(x) : t;
}

/** nearbyint in round-to-nearest-even mode; keeps the sign of zero. */
function roundEven(x: number): number {
  if (!Number.isFinite(x)) return x;
  const f = Math.floor(x);
  const d = x - f;
  let r: number;
  if (d > 0.5) r = f + 1;
  else if (d < 0.5) r = f;
  else r = f % 2 === 0 ? f : f + 1;
  if (r === 0) return x < 0 || Object.is(x, -0) ? -0 : 0;
  return r;
}

// erf coefficients of fdlibm's s_erf.c (Sun Microsystems, 1993; freely distributable), the
// algorithm glibc, musl and FreeBSD use: under 1 double ulp of error on every range, so rounding
// the double result to f32 is correct except within an ulp of an f32 rounding midpoint.
// [0, 0.84375): erf(x) = x + x * P(x^2)/Q(x^2).
const ERF_EFX = 1.28379167095512586316e-1;
const ERF_PP0 = 1.28379167095512558561e-1;
const ERF_PP1 = -3.25042107247001499370e-1;
const ERF_PP2 = -2.84817495755985104766e-2;
const ERF_PP3 = -5.77027029648944159157e-3;
const ERF_PP4 = -2.37630166566501626084e-5;
const ERF_QQ1 = 3.97917223959155352819e-1;
const ERF_QQ2 = 6.50222499887672944485e-2;
const ERF_QQ3 = 5.08130628187576562776e-3;
const ERF_QQ4 = 1.32494738004321644526e-4;
const ERF_QQ5 = -3.96022827877536812320e-6;
// [0.84375, 1.25): erf(x) = erx + P(s)/Q(s), s = x - 1, erx = erf(1) rounded to 24 bits.
const ERF_ERX = 8.45062911510467529297e-1;
const ERF_PA0 = -2.36211856075265944077e-3;
const ERF_PA1 = 4.14856118683748331666e-1;
const ERF_PA2 = -3.72207876035701323847e-1;
const ERF_PA3 = 3.18346619901161753674e-1;
const ERF_PA4 = -1.10894694282396677476e-1;
const ERF_PA5 = 3.54783043256182359371e-2;
const ERF_PA6 = -2.16637559486879084300e-3;
const ERF_QA1 = 1.06420880400844228286e-1;
const ERF_QA2 = 5.40397917702171048937e-1;
const ERF_QA3 = 7.18286544141962662868e-2;
const ERF_QA4 = 1.26171219808761642112e-1;
const ERF_QA5 = 1.36370839120290507362e-2;
const ERF_QA6 = 1.19844998467991074170e-2;
// [1.25, 1/0.35): erfc(x) = exp(-x^2 - 0.5625 + R(1/x^2)/S(1/x^2)) / x.
const ERF_RA0 = -9.86494403484714822705e-3;
const ERF_RA1 = -6.93858572707181764372e-1;
const ERF_RA2 = -1.05586262253232909814e1;
const ERF_RA3 = -6.23753324503260060396e1;
const ERF_RA4 = -1.62396669462573470355e2;
const ERF_RA5 = -1.84605092906711035994e2;
const ERF_RA6 = -8.12874355063065934246e1;
const ERF_RA7 = -9.81432934416914548592;
const ERF_SA1 = 1.96512716674392571292e1;
const ERF_SA2 = 1.37657754143519042600e2;
const ERF_SA3 = 4.34565877475229228821e2;
const ERF_SA4 = 6.45387271733267880336e2;
const ERF_SA5 = 4.29008140027567833386e2;
const ERF_SA6 = 1.08635005541779435134e2;
const ERF_SA7 = 6.57024977031928170135;
const ERF_SA8 = -6.04244152148580987438e-2;
// [1/0.35, 6): the same form with a second fit.
const ERF_RB0 = -9.86494292470009928597e-3;
const ERF_RB1 = -7.99283237680523006574e-1;
const ERF_RB2 = -1.77579549177547519889e1;
const ERF_RB3 = -1.60636384855821916062e2;
const ERF_RB4 = -6.37566443368389627722e2;
const ERF_RB5 = -1.02509513161107724954e3;
const ERF_RB6 = -4.83519191608651397019e2;
const ERF_SB1 = 3.03380607434824582924e1;
const ERF_SB2 = 3.25792512996573918826e2;
const ERF_SB3 = 1.53672958608443695994e3;
const ERF_SB4 = 3.19985821950859553908e3;
const ERF_SB5 = 2.55305040643316442583e3;
const ERF_SB6 = 4.74528541206955367215e2;
const ERF_SB7 = -2.24409524465858183362e1;

/**
 * erf by fdlibm's method (see the coefficients above): no loop and two exps at most, so the `js`
 * backend can call it per element. Odd, keeps the sign of zero, NaN in → NaN out. Every float
 * type here rounds through f32, so from |x| = 4 on (erfc(4) = 1.5e-8, under half an f32 ulp
 * below 1) it returns exactly 1, which is what the double result rounds to; XLA's f32 erf clamps
 * at 4 as well.
 */
export function erf(x: number): number {
  if (x !== x) return x;
  const ax = x < 0 ? -x : x;
  if (ax < 0.84375) {
    // Below 2^-28 the polynomial term is under half an ulp of x.
    if (ax < 3.725290298461914e-9) return x + ERF_EFX * x;
    const z = x * x;
    const r = ERF_PP0 + z * (ERF_PP1 + z * (ERF_PP2 + z * (ERF_PP3 + z * ERF_PP4)));
    const s = 1 + z * (ERF_QQ1 + z * (ERF_QQ2 + z * (ERF_QQ3 + z * (ERF_QQ4 + z * ERF_QQ5))));
    return x + x * (r / s);
  }
  let y: number;
  if (ax < 1.25) {
    const s = ax - 1;
    const p =
      ERF_PA0 +
      s * (ERF_PA1 + s * (ERF_PA2 + s * (ERF_PA3 + s * (ERF_PA4 + s * (ERF_PA5 + s * ERF_PA6)))));
    const q =
      1 +
      s * (ERF_QA1 + s * (ERF_QA2 + s * (ERF_QA3 + s * (ERF_QA4 + s * (ERF_QA5 + s * ERF_QA6)))));
    y = ERF_ERX + p / q;
  } else if (ax < 4) {
    const s = 1 / (ax * ax);
    let r: number;
    let q: number;
    if (ax < 1 / 0.35) {
      const rHi = ERF_RA4 + s * (ERF_RA5 + s * (ERF_RA6 + s * ERF_RA7));
      r = ERF_RA0 + s * (ERF_RA1 + s * (ERF_RA2 + s * (ERF_RA3 + s * rHi)));
      const qHi = ERF_SA4 + s * (ERF_SA5 + s * (ERF_SA6 + s * (ERF_SA7 + s * ERF_SA8)));
      q = 1 + s * (ERF_SA1 + s * (ERF_SA2 + s * (ERF_SA3 + s * qHi)));
    } else {
      const rHi = ERF_RB4 + s * (ERF_RB5 + s * ERF_RB6);
      r = ERF_RB0 + s * (ERF_RB1 + s * (ERF_RB2 + s * (ERF_RB3 + s * rHi)));
      const qHi = ERF_SB4 + s * (ERF_SB5 + s * (ERF_SB6 + s * ERF_SB7));
      q = 1 + s * (ERF_SB1 + s * (ERF_SB2 + s * (ERF_SB3 + s * qHi)));
    }
    // exp(-x^2) split as exp(-z^2) * exp((z - x)(z + x)) with z = x rounded to 24 bits, so z^2 is
    // exact and the tiny correction carries the rest: one rounding of x^2 would cost ~x^2 ulps.
    const z = Math.fround(ax);
    y = 1 - (Math.exp(-z * z - 0.5625) * Math.exp((z - ax) * (z + ax) + r / q)) / ax;
  } else {
    y = 1;
  }
  return x < 0 ? -y : y;
}

/** C's pow with XLA's special cases: 1^y = 1 and x^0 = 1 for every x, y (NaN included). */
function powF(a: number, b: number): number {
  if (a === 1 || b === 0) return 1;
  if (a === -1 && (b === Infinity || b === -Infinity)) return 1;
  return Math.pow(a, b);
}

/** XLA's integer power: x^0 = 1, 1^y = 1, other negative exponents give 0; wraps. */
function ipow32(a: number, b: number): number {
  if (a === 1 || b === 0) return 1;
  if (b < 0) return 0;
  let result = 1;
  let base = a | 0;
  let e = b;
  while (e > 0) {
    if (e & 1) result = Math.imul(result, base);
    base = Math.imul(base, base);
    e = Math.floor(e / 2);
  }
  return result;
}

function ipowU8(a: number, b: number): number {
  if (a === 1 || b === 0) return 1;
  let result = 1;
  let base = a;
  let e = b;
  while (e > 0) {
    if (e & 1) result = (result * base) & 255;
    base = (base * base) & 255;
    e >>= 1;
  }
  return result;
}

function ipow64(a: bigint, b: bigint): bigint {
  if (a === 1n || b === 0n) return 1n;
  if (b < 0n) return 0n;
  let result = 1n;
  let base = BigInt.asUintN(64, a);
  let e = b;
  while (e > 0n) {
    if (e & 1n) result = BigInt.asUintN(64, result * base);
    base = BigInt.asUintN(64, base * base);
    e >>= 1n;
  }
  return asS64(result);
}

function maxOf<T extends number | bigint>(a: T, b: T): T {
  return a < b ? b : a;
}
function minOf<T extends number | bigint>(a: T, b: T): T {
  return b < a ? b : a;
}
function maxF(a: number, b: number): number {
  if (Number.isNaN(a)) return a;
  if (Number.isNaN(b)) return b;
  return a < b ? b : a;
}
function minF(a: number, b: number): number {
  if (Number.isNaN(a)) return a;
  if (Number.isNaN(b)) return b;
  return b < a ? b : a;
}

const toS8 = (x: number): number => (x >= 128 ? x - 256 : x);

// ---- kernel tables ------------------------------------------------------------------------

const floatOnly1 = (f: (x: number) => number): Kernels1 => ({ float: f });

export type UnaryName =
  | "abs"
  | "negate"
  | "sign"
  | "exponential"
  | "exponential-minus-one"
  | "log"
  | "log-plus-one"
  | "sqrt"
  | "rsqrt"
  | "cbrt"
  | "tanh"
  | "logistic"
  | "sine"
  | "cosine"
  | "tan"
  | "erf"
  | "floor"
  | "ceil"
  | "round-nearest-afz"
  | "round-nearest-even"
  | "not"
  | "copy";

const UNARY: { [K in UnaryName]: Kernels1 } = {
  abs: {
    float: Math.abs,
    s32: (x) => (x < 0 ? -x : x) | 0,
    u8: id,
    s64: (x) => asS64(x < 0n ? -x : x),
    pred: id,
  },
  negate: {
    float: (x) => -x,
    s32: (x) => -x | 0,
    u8: (x) => -x & 255,
    s64: (x) => asS64(-x),
    pred: id,
  },
  sign: {
    float: signF,
    s32: (x) => (x > 0 ? 1 : x < 0 ? -1 : 0),
    u8: (x) => (x > 0 ? 1 : 0),
    s64: (x) => (x > 0n ? 1n : x < 0n ? -1n : 0n),
    pred: id,
  },
  exponential: floatOnly1(Math.exp),
  "exponential-minus-one": floatOnly1(Math.expm1),
  log: floatOnly1(Math.log),
  "log-plus-one": floatOnly1(Math.log1p),
  sqrt: floatOnly1(Math.sqrt),
  rsqrt: floatOnly1((x) => 1 / Math.sqrt(x)),
  cbrt: floatOnly1(Math.cbrt),
  tanh: floatOnly1(Math.tanh),
  logistic: floatOnly1((x) => 1 / (1 + Math.exp(-x))),
  sine: floatOnly1(Math.sin),
  cosine: floatOnly1(Math.cos),
  tan: floatOnly1(Math.tan),
  erf: floatOnly1(erf),
  floor: floatOnly1(Math.floor),
  ceil: floatOnly1(Math.ceil),
  "round-nearest-afz": floatOnly1(roundAfz),
  "round-nearest-even": floatOnly1(roundEven),
  not: { s32: (x) => ~x, u8: (x) => ~x & 255, s64: (x) => ~x, pred: (x) => 1 - x },
  copy: { float: id, s32: id, u8: id, s64: id, pred: id },
};

export type BinaryName =
  | "add"
  | "subtract"
  | "multiply"
  | "divide"
  | "remainder"
  | "power"
  | "maximum"
  | "minimum"
  | "atan2"
  | "and"
  | "or"
  | "xor"
  | "shift-left"
  | "shift-right-arithmetic"
  | "shift-right-logical";

// pred arithmetic follows XLA's evaluator on bool: computed as unsigned, then nonzero → true.
const BINARY: { [K in BinaryName]: Kernels2 } = {
  add: {
    float: (a, b) => a + b,
    s32: (a, b) => (a + b) | 0,
    u8: (a, b) => (a + b) & 255,
    s64: (a, b) => asS64(a + b),
    pred: (a, b) => a | b,
  },
  subtract: {
    float: (a, b) => a - b,
    s32: (a, b) => (a - b) | 0,
    u8: (a, b) => (a - b) & 255,
    s64: (a, b) => asS64(a - b),
    pred: (a, b) => a ^ b,
  },
  multiply: {
    float: (a, b) => a * b,
    s32: (a, b) => Math.imul(a, b),
    u8: (a, b) => (a * b) & 255,
    s64: (a, b) => asS64(a * b),
    pred: (a, b) => a & b,
  },
  divide: {
    float: (a, b) => a / b,
    s32: (a, b) => (b === 0 ? -1 : a === S32_MIN && b === -1 ? a : (a / b) | 0),
    u8: (a, b) => (b === 0 ? 255 : Math.trunc(a / b)),
    s64: (a, b) => (b === 0n ? -1n : a === S64_MIN && b === -1n ? a : a / b),
    pred: (a, b) => (b === 0 ? 1 : a),
  },
  remainder: {
    float: (a, b) => a % b,
    s32: (a, b) => (b === 0 ? a : b === -1 ? 0 : (a % b) | 0),
    u8: (a, b) => (b === 0 ? a : a % b),
    s64: (a, b) => (b === 0n ? a : b === -1n ? 0n : a % b),
    pred: (a, b) => (b === 0 ? a : 0),
  },
  power: {
    float: powF,
    s32: ipow32,
    u8: ipowU8,
    s64: ipow64,
    pred: (a, b) => a | (1 - b),
  },
  maximum: { float: maxF, s32: maxOf, u8: maxOf, s64: maxOf, pred: maxOf },
  minimum: { float: minF, s32: minOf, u8: minOf, s64: minOf, pred: minOf },
  atan2: { float: Math.atan2 },
  and: { s32: (a, b) => a & b, u8: (a, b) => a & b, s64: (a, b) => a & b, pred: (a, b) => a & b },
  or: { s32: (a, b) => a | b, u8: (a, b) => a | b, s64: (a, b) => a | b, pred: (a, b) => a | b },
  xor: { s32: (a, b) => a ^ b, u8: (a, b) => a ^ b, s64: (a, b) => a ^ b, pred: (a, b) => a ^ b },
  "shift-left": {
    s32: (a, b) => (b < 0 || b >= 32 ? 0 : a << b),
    u8: (a, b) => (b >= 8 ? 0 : (a << b) & 255),
    s64: (a, b) => (b < 0n || b >= 64n ? 0n : asS64(a << b)),
  },
  "shift-right-arithmetic": {
    s32: (a, b) => (b < 0 || b >= 32 ? (a < 0 ? -1 : 0) : a >> b),
    u8: (a, b) => (b >= 8 ? (a >= 128 ? 255 : 0) : (toS8(a) >> b) & 255),
    s64: (a, b) => (b < 0n || b >= 64n ? (a < 0n ? -1n : 0n) : a >> b),
  },
  "shift-right-logical": {
    s32: (a, b) => (b < 0 || b >= 32 ? 0 : (a >>> b) | 0),
    u8: (a, b) => (b >= 8 ? 0 : a >>> b),
    s64: (a, b) => (b < 0n || b >= 64n ? 0n : asS64(BigInt.asUintN(64, a) >> b)),
  },
};

export function isUnaryName(op: string): op is UnaryName {
  return Object.prototype.hasOwnProperty.call(UNARY, op);
}

export function isBinaryName(op: string): op is BinaryName {
  return Object.prototype.hasOwnProperty.call(BINARY, op);
}

/** The scalar kernel of a unary opcode for element type t (fails if undefined for t). */
export function unaryKernel(op: UnaryName, t: ElementType): F1 {
  const s = slot(t);
  const k =
    s !== undefined ? UNARY[op][s] : isBigIntType(t) ? bigKernel1(op, t) : intKernel1(op, t);
  if (!k) fail(`${op} is not defined for ${t}`);
  return k as F1;
}

/** The scalar kernel of a binary opcode for element type t (fails if undefined for t). */
export function binaryKernel(op: BinaryName, t: ElementType): F2 {
  const s = slot(t);
  const k =
    s !== undefined ? BINARY[op][s] : isBigIntType(t) ? bigKernel2(op, t) : intKernel2(op, t);
  if (!k) fail(`${op} is not defined for ${t}`);
  return k as F2;
}

// ---- width-parameterized integer kernels ----------------------------------------------------

/** A number-stored integer type's unary kernel (s4 s8 s16 u4 u16 u32), or undefined. */
function intKernel1(op: UnaryName, t: ElementType): ((x: number) => number) | undefined {
  const { signed } = ELEMENT_TYPE_INFO[t];
  const wrap = wrapInteger(t);
  switch (op) {
    case "abs":
      return signed ? (x) => wrap(x < 0 ? -x : x) : id;
    case "negate":
      return (x) => wrap(-x);
    case "sign":
      return signed ? (x) => (x > 0 ? 1 : x < 0 ? -1 : 0) : (x) => (x > 0 ? 1 : 0);
    case "not":
      return (x) => wrap(~x);
    case "copy":
      return id;
    default:
      return undefined;
  }
}

/** A number-stored integer type's binary kernel (s4 s8 s16 u4 u16 u32), or undefined. */
function intKernel2(
  op: BinaryName,
  t: ElementType,
): ((a: number, b: number) => number) | undefined {
  const { bits, signed } = ELEMENT_TYPE_INFO[t];
  const wrap = wrapInteger(t);
  // The value as the signed / unsigned type of the same width (XLA's make_signed/make_unsigned).
  const asSigned = signed ? id : wrapInteger(`s${bits}` as ElementType);
  const asUnsigned = signed ? wrapInteger(`u${bits}` as ElementType) : id;
  const outOfRange = (b: number) => b < 0 || b >= bits;
  switch (op) {
    case "add":
      return (a, b) => wrap(a + b);
    case "subtract":
      return (a, b) => wrap(a - b);
    case "multiply":
      return (a, b) => wrap(Math.imul(a, b));
    case "divide":
      // |a|, |b| < 2^32, so the double quotient truncates to the exact integer quotient.
      return (a, b) => (b === 0 ? wrap(-1) : wrap(Math.trunc(a / b)));
    case "remainder":
      return (a, b) => (b === 0 ? a : wrap(a % b));
    case "power":
      return (a, b) => {
        if (a === 1 || b === 0) return 1;
        if (b < 0) return 0;
        let result = 1;
        let base = a;
        let e = b;
        while (e > 0) {
          if (e % 2 === 1) result = wrap(Math.imul(result, base));
          base = wrap(Math.imul(base, base));
          e = Math.floor(e / 2);
        }
        return result;
      };
    case "maximum":
      return maxOf;
    case "minimum":
      return minOf;
    case "and":
      return (a, b) => wrap(a & b);
    case "or":
      return (a, b) => wrap(a | b);
    case "xor":
      return (a, b) => wrap(a ^ b);
    case "shift-left":
      return (a, b) => (outOfRange(b) ? 0 : wrap(a << b));
    case "shift-right-arithmetic":
      return (a, b) => {
        const x = asSigned(a);
        return wrap(outOfRange(b) ? (x < 0 ? -1 : 0) : x >> b);
      };
    case "shift-right-logical":
      return (a, b) => (outOfRange(b) ? 0 : wrap(asUnsigned(a) >>> b));
    default:
      return undefined;
  }
}

const U64_MAX = 2n ** 64n - 1n;

/** u64's unary kernel, or undefined (s64 has its own table). */
function bigKernel1(op: UnaryName, t: ElementType): ((x: bigint) => bigint) | undefined {
  const wrap = wrapBigInteger(t);
  switch (op) {
    case "abs":
    case "copy":
      return id;
    case "negate":
      return (x) => wrap(-x);
    case "sign":
      return (x) => (x > 0n ? 1n : 0n);
    case "not":
      return (x) => wrap(~x);
    default:
      return undefined;
  }
}

/** u64's binary kernel, or undefined. */
function bigKernel2(op: BinaryName, t: ElementType): ((a: bigint, b: bigint) => bigint) | undefined {
  const wrap = wrapBigInteger(t);
  switch (op) {
    case "add":
      return (a, b) => wrap(a + b);
    case "subtract":
      return (a, b) => wrap(a - b);
    case "multiply":
      return (a, b) => wrap(a * b);
    case "divide":
      return (a, b) => (b === 0n ? U64_MAX : a / b);
    case "remainder":
      return (a, b) => (b === 0n ? a : a % b);
    case "power":
      return (a, b) => {
        if (a === 1n || b === 0n) return 1n;
        let result = 1n;
        let base = a;
        let e = b;
        while (e > 0n) {
          if (e & 1n) result = wrap(result * base);
          base = wrap(base * base);
          e >>= 1n;
        }
        return result;
      };
    case "maximum":
      return maxOf;
    case "minimum":
      return minOf;
    case "and":
      return (a, b) => a & b;
    case "or":
      return (a, b) => a | b;
    case "xor":
      return (a, b) => a ^ b;
    case "shift-left":
      return (a, b) => (b >= 64n ? 0n : wrap(a << b));
    case "shift-right-arithmetic":
      return (a, b) => {
        const x = BigInt.asIntN(64, a);
        return wrap(b >= 64n ? (x < 0n ? -1n : 0n) : x >> b);
      };
    case "shift-right-logical":
      return (a, b) => (b >= 64n ? 0n : a >> b);
    default:
      return undefined;
  }
}

// ---- compare ------------------------------------------------------------------------------

const cmpF32 = new Float32Array(1);
const cmpI32 = new Int32Array(cmpF32.buffer);

/**
 * A signed integer whose order is IEEE totalOrder on the f32 value: -NaN < -Inf < ... < -0 <
 * +0 < ... < +Inf < +NaN. (NaN payloads are those the JS engine keeps through a double.)
 */
export function totalOrderKey(x: number): number {
  cmpF32[0] = x;
  const bits = cmpI32[0]!;
  return bits < 0 ? bits ^ 0x7fffffff : bits;
}

function directionFn<T>(dir: ComparisonDirection): (a: T, b: T) => boolean {
  switch (dir) {
    case "EQ":
      return (a, b) => a === b;
    case "NE":
      return (a, b) => a !== b;
    case "LT":
      return (a, b) => a < b;
    case "LE":
      return (a, b) => a <= b;
    case "GT":
      return (a, b) => a > b;
    case "GE":
      return (a, b) => a >= b;
    default: {
      const never: never = dir;
      return fail(`unknown comparison direction ${String(never)}`);
    }
  }
}

/** The scalar compare of element type t (result 0/1). */
export function compareKernel(
  t: ElementType,
  dir: ComparisonDirection,
  ctype: ComparisonType | undefined,
): F2 {
  if (isFloat(t) && ctype === "TOTALORDER") {
    const f = directionFn<number>(dir);
    return (a, b) => (f(totalOrderKey(a as number), totalOrderKey(b as number)) ? 1 : 0);
  }
  if (!isFloat(t) && ctype === "FLOAT") fail(`comparison type FLOAT is not valid for ${t}`);
  if (isFloat(t) && (ctype === "SIGNED" || ctype === "UNSIGNED")) {
    fail(`comparison type ${ctype} is not valid for ${t}`);
  }
  const f = directionFn<Scalar>(dir);
  return (a, b) => (f(a, b) ? 1 : 0);
}

// ---- loops --------------------------------------------------------------------------------

function sameDimsOrFail(a: Literal, b: Literal, what: string): void {
  if (a.dims.length !== b.dims.length || a.dims.some((d, i) => d !== b.dims[i])) {
    fail(`${what} have different actual dims: ${valueShapeString(a)} vs ${valueShapeString(b)}`);
  }
}

export function mapUnary(outType: ElementType, x: Literal, f: F1): Literal {
  const data = allocate(outType, x.size);
  const out = mutableElems(data);
  const src = elems(x);
  const round = roundFor(outType);
  if (round) for (let i = 0; i < x.size; i++) out[i] = round(f(src[i]!) as number);
  else for (let i = 0; i < x.size; i++) out[i] = f(src[i]!);
  return new Literal(outType, x.dims, data);
}

export function mapBinary(outType: ElementType, a: Literal, b: Literal, f: F2): Literal {
  sameDimsOrFail(a, b, "operands");
  if (a.type !== b.type) fail(`operand element types differ: ${a.type} vs ${b.type}`);
  const data = allocate(outType, a.size);
  const out = mutableElems(data);
  const x = elems(a);
  const y = elems(b);
  const round = roundFor(outType);
  if (round) for (let i = 0; i < a.size; i++) out[i] = round(f(x[i]!, y[i]!) as number);
  else for (let i = 0; i < a.size; i++) out[i] = f(x[i]!, y[i]!);
  return new Literal(outType, a.dims, data);
}

// ---- opcode implementations ---------------------------------------------------------------

export function unaryOp(op: UnaryName): OpImpl {
  return (_instr, ops) => {
    const x = asLiteral(ops[0], "operand 0");
    return mapUnary(x.type, x, unaryKernel(op, x.type));
  };
}

export function binaryOp(op: BinaryName): OpImpl {
  return (_instr, ops) => {
    const a = asLiteral(ops[0], "operand 0");
    const b = asLiteral(ops[1], "operand 1");
    return mapBinary(a.type, a, b, binaryKernel(op, a.type));
  };
}

export const compareOp: OpImpl = (instr, ops) => {
  const a = asLiteral(ops[0], "operand 0");
  const b = asLiteral(ops[1], "operand 1");
  const k = compareKernel(a.type, attr(instr, "direction"), instr.attrs.comparisonType);
  return mapBinary("pred", a, b, k);
};

export const isFiniteOp: OpImpl = (_instr, ops) => {
  const x = asLiteral(ops[0], "operand 0");
  if (!isFloat(x.type)) fail(`is-finite needs a float operand, got ${x.type}`);
  return mapUnary("pred", x, (v) => (Number.isFinite(v) ? 1 : 0));
};

/** Reads element i of a literal that is either scalar (broadcast) or has dims `dims`. */
function scalarOrSame(lit: Literal, dims: readonly number[], what: string): (i: number) => Scalar {
  const e = elems(lit);
  if (lit.dims.length === 0) return () => e[0]!;
  if (lit.dims.length !== dims.length || lit.dims.some((d, i) => d !== dims[i])) {
    fail(`${what} ${valueShapeString(lit)} must be a scalar or have dims [${dims.join(",")}]`);
  }
  return (i) => e[i]!;
}

export const selectOp: OpImpl = (_instr, ops) => {
  const p = asLiteral(ops[0], "predicate");
  const t = asLiteral(ops[1], "on_true");
  const f = asLiteral(ops[2], "on_false");
  if (p.type !== "pred") fail(`the predicate must be pred, got ${p.type}`);
  sameDimsOrFail(t, f, "on_true and on_false");
  if (t.type !== f.type) fail(`on_true and on_false types differ: ${t.type} vs ${f.type}`);
  const pick = scalarOrSame(p, t.dims, "the predicate");
  const a = elems(t);
  const b = elems(f);
  const data = allocate(t.type, t.size);
  const out = mutableElems(data);
  for (let i = 0; i < t.size; i++) out[i] = pick(i) ? a[i]! : b[i]!;
  return new Literal(t.type, t.dims, data);
};

/** clamp(lo, x, hi): NaN in lo, x, hi (in that order) wins; else min(hi, max(x, lo)). */
export const clampOp: OpImpl = (_instr, ops) => {
  const lo = asLiteral(ops[0], "min");
  const x = asLiteral(ops[1], "operand");
  const hi = asLiteral(ops[2], "max");
  if (lo.type !== x.type || hi.type !== x.type) {
    fail(`min, operand and max must have one element type: ${lo.type}, ${x.type}, ${hi.type}`);
  }
  const getLo = scalarOrSame(lo, x.dims, "min");
  const getHi = scalarOrSame(hi, x.dims, "max");
  const float = isFloat(x.type);
  const v = elems(x);
  const data = allocate(x.type, x.size);
  const out = mutableElems(data);
  for (let i = 0; i < x.size; i++) {
    const l = getLo(i);
    const h = getHi(i);
    const xi = v[i]!;
    if (float && Number.isNaN(l)) out[i] = l;
    else if (float && Number.isNaN(xi)) out[i] = xi;
    else if (float && Number.isNaN(h)) out[i] = h;
    else {
      const m = xi < l ? l : xi;
      out[i] = m < h ? m : h;
    }
  }
  return new Literal(x.type, x.dims, data);
};

// ---- convert ------------------------------------------------------------------------------

/** Float → integer: truncate toward zero, NaN → 0, saturate at the type's range (XLA). */
function floatToInt(to: ElementType): (x: number) => number {
  const lo = ELEMENT_TYPE_INFO[to].min as number;
  const hi = ELEMENT_TYPE_INFO[to].max as number;
  return (x) => (Number.isNaN(x) ? 0 : x <= lo ? lo : x >= hi ? hi : Math.trunc(x) + 0);
}

const TWO63 = 2 ** 63;
const TWO64 = 2 ** 64;
function floatToS64(x: number): bigint {
  if (Number.isNaN(x)) return 0n;
  if (x >= TWO63) return 2n ** 63n - 1n;
  if (x <= -TWO63) return S64_MIN;
  return BigInt(Math.trunc(x));
}
function floatToU64(x: number): bigint {
  if (Number.isNaN(x) || x <= 0) return 0n;
  if (x >= TWO64) return U64_MAX;
  return BigInt(Math.trunc(x));
}

/** The f32 nearest to a 64-bit integer (ties to even), rounding once from the exact integer. */
function s64ToF32(v: bigint): number {
  const neg = v < 0n;
  const m = neg ? -v : v;
  const bits = m.toString(2).length;
  if (bits <= 24) return Number(v);
  const shift = BigInt(bits - 24);
  let q = m >> shift;
  const rem = m - (q << shift);
  const half = 1n << (shift - 1n);
  if (rem > half || (rem === half && (q & 1n) === 1n)) q += 1n;
  const r = Number(q) * 2 ** Number(shift);
  return neg ? -r : r;
}

/** The scalar conversion between element types as XLA's Literal::Convert does it. */
export function converter(from: ElementType, to: ElementType): F1 {
  if (from === to) return id;
  if (from === "token" || to === "token") fail(`cannot convert ${from} to ${to}`);
  const fromBig = isBigIntType(from);
  if (to === "pred") return fromBig ? (x) => (x !== 0n ? 1 : 0) : (x) => (x !== 0 ? 1 : 0);
  if (isFloat(from)) {
    if (to === "s64") return (x) => floatToS64(x as number);
    if (to === "u64") return (x) => floatToU64(x as number);
    if (isIntegerType(to)) return floatToInt(to) as F1;
    if (to === "f16") return roundToF16 as F1;
    if (to === "bf16") return roundToBF16 as F1;
    if (isSmallFloatType(to)) {
      // XLA's CPU backend converts wider floats to f8 by way of f32 (f64 included).
      const t = to;
      return ((x: number) => roundToSmallFloat(t, Math.fround(x))) as F1;
    }
    if (to === "f32" && from === "f64") return ((x: number) => Math.fround(x)) as F1;
    return id; // → f32 from f16/bf16/f8, → f64 from any float, → f16 from f8: exact
  }
  // from is pred or an integer type: integers convert modulo the width, to floats by rounding.
  if (fromBig) {
    const big = (f: (x: bigint) => Scalar): F1 => (x) => f(x as bigint);
    switch (to) {
      case "s64":
      case "u64": {
        const wrap = wrapBigInteger(to);
        return big(wrap);
      }
      case "f32":
        return big(s64ToF32);
      case "f16":
        return big((x) => roundToF16(s64ToF32(x)));
      case "bf16":
        return big((x) => roundToBF16(s64ToF32(x)));
      case "f64":
        return big((x) => Number(x));
      case "f8e5m2":
      case "f8e4m3":
      case "f8e3m4":
      case "f8e4m3fn":
      case "f8e4m3fnuz":
      case "f8e5m2fnuz":
      case "f8e4m3b11fnuz":
      {
        const t = to;
        return big((x) => roundToSmallFloat(t, s64ToF32(x)));
      }
      default: {
        const wrap = wrapInteger(to);
        return big((x) => wrap(Number(BigInt.asUintN(32, x))));
      }
    }
  }
  switch (to) {
    case "s64":
      return (x) => BigInt(x);
    case "u64":
      return (x) => BigInt.asUintN(64, BigInt(x));
    case "f32":
      return (x) => Math.fround(x as number);
    case "f16":
      return roundToF16 as F1;
    case "bf16":
      return roundToBF16 as F1;
    case "f64":
      return id;
    default:
      if (isSmallFloatType(to)) {
        const t = to;
        return ((x: number) => roundToSmallFloat(t, Math.fround(x))) as F1;
      }
      if (isIntegerType(to)) return wrapInteger(to) as F1;
      return fail(`cannot convert ${from} to ${to}`);
  }
}

export const convertOp: OpImpl = (instr, ops) => {
  const x = asLiteral(ops[0], "operand 0");
  const to = instr.shape.kind === "array" ? instr.shape.type : fail("convert to a tuple shape");
  const f = converter(x.type, to);
  const data = allocate(to, x.size);
  const out = mutableElems(data);
  const src = elems(x);
  for (let i = 0; i < x.size; i++) out[i] = f(src[i]!);
  return new Literal(to, x.dims, data);
};

// ---- bitcast-convert ----------------------------------------------------------------------

/** Little-endian bytes of every element, in row-major order (ir/literal.ts's codec). */
function toBytes(x: Literal): Uint8Array {
  return dataToBytes(x.type, x.data);
}

function fromBytes(type: ElementType, dims: readonly number[], bytes: Uint8Array): Literal {
  return new Literal(type, dims, dataFromBytes(type, bytes));
}

/**
 * Reinterprets the bits (little-endian, row-major). Equal widths keep the dims; a narrower
 * result appends a dim of size ratio; a wider result consumes a last dim of size ratio (XLA).
 */
export const bitcastConvertOp: OpImpl = (instr, ops) => {
  const x = asLiteral(ops[0], "operand 0");
  const to = instr.shape.kind === "array" ? instr.shape.type : fail("bitcast to a tuple shape");
  if (x.type === "pred" || to === "pred") {
    fail(`bitcast-convert ${x.type} → ${to}: pred has no bit form`);
  }
  const wi = elementByteSize(x.type);
  const wo = elementByteSize(to);
  let dims: number[];
  if (wi === wo) dims = [...x.dims];
  else if (wi > wo) dims = [...x.dims, wi / wo];
  else {
    const last = x.dims[x.dims.length - 1];
    if (last !== wo / wi) {
      fail(
        `bitcast-convert ${x.type} → ${to} needs a last dim of ${wo / wi}, got ` +
          valueShapeString(x),
      );
    }
    dims = x.dims.slice(0, -1);
  }
  return fromBytes(to, dims, toBytes(x));
};
