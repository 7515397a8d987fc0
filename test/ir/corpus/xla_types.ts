// A module over the integer element types XLA has beyond s32, s64 and u8 (s4 s8 s16 u4 u16 u32
// u64): each opcode class at its edge cases (wrap-around, x/0, INT_MIN/-1, shifts by the width,
// saturating and wrapping converts, unsigned compares, reductions and dots that overflow). Its
// expected values (XLA_TYPES_EXPECTED) are worked out by hand from XLA's semantics. The divisors
// are parameters (XLA_TYPES_INPUTS): XLA constant-folds a divide of constants on the host, and
// jaxlib 0.10.2 dies of SIGFPE folding x/0 and INT_MIN/-1 (at run time it computes them fine);
// test/ir/xla_types.test.ts checks the evaluator against them and test/xla/xla.test.ts checks
// XLA's CPU backend gives the same values, bit for bit.

export const XLA_TYPES_HLO = `HloModule xla_types

add_u32 {
  a = u32[] parameter(0)
  b = u32[] parameter(1)
  ROOT s = u32[] add(a, b)
}

ENTRY main {
  s8a = s8[6] constant({127, -128, -128, 5, -7, 1})
  s8b = s8[6] parameter(0)
  s8add = s8[6] add(s8a, s8b)
  s8mul = s8[6] multiply(s8a, s8b)
  s8div = s8[6] divide(s8a, s8b)
  s8rem = s8[6] remainder(s8a, s8b)
  s8shl = s8[6] shift-left(s8a, s8b)
  s8sra = s8[6] shift-right-arithmetic(s8a, s8b)
  s8srl = s8[6] shift-right-logical(s8a, s8b)
  s8neg = s8[6] negate(s8a)
  u32a = u32[5] constant({4294967295, 65536, 7, 2147483648, 0})
  u32b = u32[5] parameter(1)
  u32add = u32[5] add(u32a, u32b)
  u32sub = u32[5] subtract(u32a, u32b)
  u32mul = u32[5] multiply(u32a, u32b)
  u32div = u32[5] divide(u32a, u32b)
  u32sra = u32[5] shift-right-arithmetic(u32a, u32b)
  u32srl = u32[5] shift-right-logical(u32a, u32b)
  u32gt = pred[5] compare(u32a, u32b), direction=GT, type=UNSIGNED
  u32max = u32[5] maximum(u32a, u32b)
  u64a = u64[3] constant({18446744073709551615, 9223372036854775808, 10})
  u64b = u64[3] parameter(2)
  u64add = u64[3] add(u64a, u64b)
  u64div = u64[3] divide(u64a, u64b)
  u64sra = u64[3] shift-right-arithmetic(u64a, u64b)
  u64mul = u64[3] multiply(u64a, u64a)
  s4a = s4[4] constant({7, -8, 3, -1})
  s4b = s4[4] constant({1, -1, 3, 2})
  s4add = s4[4] add(s4a, s4b)
  s4mul = s4[4] multiply(s4a, s4b)
  u4a = u4[3] constant({15, 1, 8})
  u4b = u4[3] constant({1, 2, 8})
  u4add = u4[3] add(u4a, u4b)
  u4neg = u4[3] negate(u4b)
  s16a = s16[2] constant({32767, -32768})
  s16add = s16[2] add(s16a, s16a)
  u16a = u16[2] constant({0, 65535})
  u16one = u16[2] constant({1, 1})
  u16sub = u16[2] subtract(u16a, u16one)
  f = f32[5] constant({-1.5, 5e+09, nan, 300, 2.9})
  f2u32 = u32[5] convert(f)
  f2s8 = s8[5] convert(f)
  f2u64 = u64[5] convert(f)
  u32f = f32[5] convert(u32a)
  s8u64 = u64[6] convert(s8a)
  u64s8 = s8[3] convert(u64a)
  s32m = s32[2] constant({-1, 70000})
  s32u16 = u16[2] convert(s32m)
  u8v = u8[2] constant({200, 255})
  u8s8 = s8[2] convert(u8v)
  iot = s8[130] iota(), iota_dimension=0
  zero = u32[] constant(0)
  red = u32[] reduce(u32a, zero), dimensions={0}, to_apply=add_u32
  du = u16[2] constant({1000, 1000})
  dv = u16[2] constant({100, 100})
  dot = u16[] dot(du, dv), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  ROOT t = (s8[6], s8[6], s8[6], s8[6], s8[6], s8[6], s8[6], s8[6], u32[5], u32[5], u32[5],
    u32[5], u32[5], u32[5], pred[5], u32[5], u64[3], u64[3], u64[3], u64[3], s4[4], s4[4],
    u4[3], u4[3], s16[2], u16[2], u32[5], s8[5], u64[5], f32[5], u64[6], s8[3], u16[2], s8[2],
    s8[130], u32[], u16[]) tuple(s8add, s8mul, s8div, s8rem, s8shl, s8sra, s8srl, s8neg, u32add,
    u32sub, u32mul, u32div, u32sra, u32srl, u32gt, u32max, u64add, u64div, u64sra, u64mul,
    s4add, s4mul, u4add, u4neg, s16add, u16sub, f2u32, f2s8, f2u64, u32f, s8u64, u64s8, s32u16,
    u8s8, iot, red, dot)
}
`;

/** The parameters: s8b, u32b, u64b (element type, dims, values). */
export const XLA_TYPES_INPUTS: readonly ["s8" | "u32" | "u64", number[], number[]][] = [
  ["s8", [6], [1, -1, -1, 0, 2, 8]],
  ["u32", [5], [1, 65536, 0, 31, 1]],
  ["u64", [3], [1, 63, 0]],
];

const U32_MAX = "4294967295";
const U64_MAX = "18446744073709551615";

/** The tuple's outputs in order, each element as its decimal text (pred: 0 or 1). */
export const XLA_TYPES_EXPECTED: readonly (readonly string[])[] = [
  // s8: {127, -128, -128, 5, -7, 1} op {1, -1, -1, 0, 2, 8}
  ["-128", "127", "127", "5", "-5", "9"], // add
  ["127", "-128", "-128", "0", "-14", "8"], // multiply
  ["127", "-128", "-128", "-1", "-3", "0"], // divide: INT_MIN/-1 = INT_MIN, x/0 = -1
  ["0", "0", "0", "5", "-1", "1"], // remainder: INT_MIN%-1 = 0, x%0 = x
  ["-2", "0", "0", "5", "-28", "0"], // shift-left; -1 and 8 are out of range: 0
  ["63", "-1", "-1", "5", "-2", "0"], // shift-right-arithmetic; out of range: sign fill
  ["63", "0", "0", "5", "62", "0"], // shift-right-logical
  ["-127", "-128", "-128", "-5", "7", "-1"], // negate
  // u32: {4294967295, 65536, 7, 2147483648, 0} op {1, 65536, 0, 31, 1}
  ["0", "131072", "7", "2147483679", "1"], // add
  ["4294967294", "0", "7", "2147483617", U32_MAX], // subtract
  [U32_MAX, "0", "0", "2147483648", "0"], // multiply: 2^31 * 31 = -2^31 mod 2^32
  [U32_MAX, "1", U32_MAX, "69273666", "0"], // divide: x/0 = all ones
  [U32_MAX, "0", "7", U32_MAX, "0"], // shift-right-arithmetic: the bits as s32; >= 32: sign
  ["2147483647", "0", "7", "1", "0"], // shift-right-logical
  ["1", "0", "1", "1", "0"], // compare GT UNSIGNED
  [U32_MAX, "65536", "7", "2147483648", "1"], // maximum
  // u64: {2^64-1, 2^63, 10} op {1, 63, 0}
  ["0", "9223372036854775871", "10"], // add
  [U64_MAX, "146402730743726600", U64_MAX], // divide
  [U64_MAX, U64_MAX, "10"], // shift-right-arithmetic: the bits as s64
  ["1", "0", "100"], // multiply (self)
  ["-8", "7", "6", "1"], // s4 add {7,-8,3,-1} + {1,-1,3,2}
  ["7", "-8", "-7", "-2"], // s4 multiply
  ["0", "3", "0"], // u4 add {15,1,8} + {1,2,8}
  ["15", "14", "8"], // u4 negate {1,2,8}
  ["-2", "0"], // s16 add (self)
  ["65535", "65534"], // u16 subtract 1
  // convert f32 {-1.5, 5e9, nan, 300, 2.9}: truncate, NaN -> 0, saturate
  ["0", U32_MAX, "0", "300", "2"],
  ["-1", "127", "0", "127", "2"],
  ["0", "5000000000", "0", "300", "2"],
  ["4294967296", "65536", "7", "2147483648", "0"], // u32 -> f32, rounded
  // s8 -> u64: sign-extended, then modulo 2^64
  ["127", "18446744073709551488", "18446744073709551488", "5", "18446744073709551609", "1"],
  ["-1", "0", "10"], // u64 -> s8: the low 8 bits
  ["65535", "4464"], // s32 -> u16: modulo 2^16
  ["-56", "-1"], // u8 -> s8
  Array.from({ length: 130 }, (_, i) => String(i < 128 ? i : i - 256)), // s8 iota wraps
  ["2147549190"], // u32 reduce-add wraps: (2^32-1 + 65536 + 7 + 2^31 + 0) mod 2^32
  ["3392"], // u16 dot: 200000 mod 65536
];
