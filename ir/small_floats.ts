// XLA's 8-bit floating-point types (the ml_dtypes formats): their bit layouts, decoding, and
// rounding to the nearest representable value. A Literal stores them like f16 and bf16, as
// already-rounded values in a Float32Array; the bytes (proto, bitcast-convert) are the 8-bit
// encodings. Three families:
//
//   ieee  f8e5m2, f8e4m3, f8e3m4: IEEE-style, with infinities and NaNs (exponent all ones);
//   fn    f8e4m3fn: no infinities, one NaN per sign (exponent and mantissa all ones);
//   fnuz  f8e4m3fnuz, f8e5m2fnuz, f8e4m3b11fnuz: no infinities, no negative zero, one NaN (0x80).
//
// Rounding is to nearest, ties to even. A value beyond the largest finite one (after rounding)
// becomes infinity (ieee) or NaN (fn, fnuz: they have no infinity), as XLA's conversions do.

export const SMALL_FLOAT_TYPES = [
  "f8e5m2",
  "f8e4m3",
  "f8e3m4",
  "f8e4m3fn",
  "f8e4m3fnuz",
  "f8e5m2fnuz",
  "f8e4m3b11fnuz",
] as const;
export type SmallFloatType = (typeof SMALL_FLOAT_TYPES)[number];

interface Format {
  readonly exp: number;
  readonly man: number;
  readonly bias: number;
  readonly family: "ieee" | "fn" | "fnuz";
}

const FORMATS: { readonly [K in SmallFloatType]: Format } = {
  f8e5m2: { exp: 5, man: 2, bias: 15, family: "ieee" },
  f8e4m3: { exp: 4, man: 3, bias: 7, family: "ieee" },
  f8e3m4: { exp: 3, man: 4, bias: 3, family: "ieee" },
  f8e4m3fn: { exp: 4, man: 3, bias: 7, family: "fn" },
  f8e4m3fnuz: { exp: 4, man: 3, bias: 8, family: "fnuz" },
  f8e5m2fnuz: { exp: 5, man: 2, bias: 16, family: "fnuz" },
  f8e4m3b11fnuz: { exp: 4, man: 3, bias: 11, family: "fnuz" },
};

export function isSmallFloatType(t: string): t is SmallFloatType {
  return (SMALL_FLOAT_TYPES as readonly string[]).includes(t);
}

/** The value of an 8-bit encoding (NaN for a NaN encoding). */
export function smallFloatFromBits(t: SmallFloatType, bits: number): number {
  const { exp, man, bias, family } = FORMATS[t];
  const b = bits & 0xff;
  const negative = (b & 0x80) !== 0;
  const e = (b >> man) & ((1 << exp) - 1);
  const m = b & ((1 << man) - 1);
  const top = (1 << exp) - 1;
  if (family === "fnuz" && b === 0x80) return NaN;
  if (family === "ieee" && e === top) return m === 0 ? (negative ? -Infinity : Infinity) : NaN;
  if (family === "fn" && e === top && m === (1 << man) - 1) return NaN;
  const mag = e === 0 ? m * 2 ** (1 - bias - man) : (1 + m / 2 ** man) * 2 ** (e - bias);
  return negative ? -mag : mag;
}

/** Every finite non-negative value of a type, ascending, with its encoding. */
const TABLES = new Map<SmallFloatType, { values: number[]; bits: number[] }>();

function table(t: SmallFloatType): { values: number[]; bits: number[] } {
  let tab = TABLES.get(t);
  if (tab === undefined) {
    const values: number[] = [];
    const bits: number[] = [];
    for (let b = 0; b < 0x80; b++) {
      const v = smallFloatFromBits(t, b);
      if (Number.isFinite(v)) {
        values.push(v);
        bits.push(b);
      }
    }
    tab = { values, bits };
    TABLES.set(t, tab);
  }
  return tab;
}

/** The largest finite value of a type. */
export function smallFloatMax(t: SmallFloatType): number {
  const { values } = table(t);
  return values[values.length - 1]!;
}

/** The type's NaN encoding (the quiet NaN for ieee types, with the given sign where it has one). */
function nanBits(t: SmallFloatType, negative: boolean): number {
  const { exp, man, family } = FORMATS[t];
  if (family === "fnuz") return 0x80;
  const sign = negative ? 0x80 : 0;
  if (family === "fn") return sign | 0x7f;
  return sign | (((1 << exp) - 1) << man) | (1 << (man - 1));
}

/** The encoding of `v` rounded to the type (nearest, ties to even). */
export function smallFloatBits(t: SmallFloatType, v: number): number {
  const { exp, man, family } = FORMATS[t];
  const negative = v < 0 || Object.is(v, -0);
  if (Number.isNaN(v)) return nanBits(t, negative);
  const sign = negative ? 0x80 : 0;
  const a = Math.abs(v);
  const { values, bits } = table(t);
  const last = values.length - 1;
  const max = values[last]!;
  // Past the largest value by half its spacing (or more, or exactly half with an odd largest
  // encoding, which rounds away): overflow.
  const half = (max - values[last - 1]!) / 2;
  if (a > max + half || (a === max + half && (bits[last]! & 1) === 1) || a === Infinity) {
    if (family === "ieee") return sign | (((1 << exp) - 1) << man);
    return nanBits(t, negative);
  }
  if (a >= max) return sign | bits[last]!;
  let lo = 0;
  let hi = last;
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    if (values[mid]! <= a) lo = mid;
    else hi = mid;
  }
  const dLo = a - values[lo]!;
  const dHi = values[hi]! - a;
  const k = dLo < dHi || (dLo === dHi && (bits[lo]! & 1) === 0) ? lo : hi;
  // fnuz has no negative zero: -0 (and a negative value rounding to 0) is +0.
  if (bits[k] === 0) return family === "fnuz" ? 0 : sign;
  return sign | bits[k]!;
}

/** `v` rounded to the type, as a number (what a Literal of the type stores). */
export function roundToSmallFloat(t: SmallFloatType, v: number): number {
  return smallFloatFromBits(t, smallFloatBits(t, v));
}
