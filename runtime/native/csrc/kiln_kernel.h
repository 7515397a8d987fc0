/*
 * kiln_kernel.h — what generated kernels include: the ABI (kiln_rt.h), the vectorizable float
 * math (kiln_math.h), and the scalar semantics of HLO that C does not give for free, each the
 * same as the reference evaluator's (ir/evaluate_elementwise.ts): wrapping integer arithmetic
 * (done in unsigned, so no undefined behaviour), x/0 = -1 (all ones unsigned), INT_MIN/-1 =
 * INT_MIN, x%0 = x, INT_MIN%-1 = 0; shifts by >= the width (or negative) give 0 or the sign
 * fill; integer power (x^0 = 1, 1^y = 1, other negative exponents 0); float maximum/minimum
 * that propagate NaN and keep the lhs on ties; clamp with NaN precedence lo, x, hi; converts
 * that truncate toward zero, send NaN to 0 and saturate; f16 and bf16 rounding (values are
 * stored as float, already rounded, as the Literals store them); TOTALORDER keys. Float
 * arithmetic itself is C's (IEEE, possibly contracted to FMA): the `tolerance` tier.
 */
#ifndef KILN_KERNEL_H
#define KILN_KERNEL_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kiln_math.h"
#include "kiln_rt.h"

#define KI static inline __attribute__((always_inline, unused))

/* ---- f16 / bf16 rounding (storage is float) ---------------------------------------------- */

KI float kiln_rf16(float x) { return (float)(_Float16)x; }

KI float kiln_rbf16(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) {
    u = (u | 0x00400000u) & 0xffff0000u; /* quiet NaN, payload's top bits kept */
  } else {
    u += 0x7fffu + ((u >> 16) & 1u);
    u &= 0xffff0000u;
  }
  memcpy(&x, &u, 4);
  return x;
}

/* ---- floats ------------------------------------------------------------------------------- */

KI float kiln_fmax(float a, float b) { return a != a ? a : b != b ? b : (a < b ? b : a); }
KI float kiln_fmin(float a, float b) { return a != a ? a : b != b ? b : (b < a ? b : a); }

KI float kiln_fclamp(float l, float x, float h) {
  if (l != l) return l;
  if (x != x) return x;
  if (h != h) return h;
  float m = x < l ? l : x;
  return m < h ? m : h;
}

KI float kiln_fsign(float x) { return (x != x || x == 0.0f) ? x : (x > 0.0f ? 1.0f : -1.0f); }

/* C's pow with XLA's special cases: 1^y = 1 and x^0 = 1 for every x, y (NaN included). */
KI float kiln_powf(float a, float b) {
  if (a == 1.0f || b == 0.0f) return 1.0f;
  if (a == -1.0f && isinf(b)) return 1.0f;
  return (float)pow((double)a, (double)b);
}

/* std::round: half away from zero, keeps the sign of zero. */
KI float kiln_round_afz(float x) { return roundf(x); }
/* nearbyint in round-to-nearest-even mode. */
KI float kiln_round_even(float x) { return rintf(x); }

KI uint8_t kiln_isfinite(float x) { return (uint8_t)(isfinite(x) ? 1 : 0); }

/* A signed integer whose order is IEEE totalOrder on the f32 value. */
KI int32_t kiln_total_key(float x) {
  int32_t i;
  memcpy(&i, &x, 4);
  return i < 0 ? (int32_t)(i ^ 0x7fffffff) : i;
}

/* ---- integers ------------------------------------------------------------------------------ */

KI int32_t kiln_add_s32(int32_t a, int32_t b) { return (int32_t)((uint32_t)a + (uint32_t)b); }
KI int32_t kiln_sub_s32(int32_t a, int32_t b) { return (int32_t)((uint32_t)a - (uint32_t)b); }
KI int32_t kiln_mul_s32(int32_t a, int32_t b) { return (int32_t)((uint32_t)a * (uint32_t)b); }
KI int32_t kiln_neg_s32(int32_t a) { return (int32_t)(0u - (uint32_t)a); }
KI int32_t kiln_abs_s32(int32_t a) { return a < 0 ? kiln_neg_s32(a) : a; }
KI int64_t kiln_add_s64(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
KI int64_t kiln_sub_s64(int64_t a, int64_t b) { return (int64_t)((uint64_t)a - (uint64_t)b); }
KI int64_t kiln_mul_s64(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }
KI int64_t kiln_neg_s64(int64_t a) { return (int64_t)(0u - (uint64_t)a); }
KI int64_t kiln_abs_s64(int64_t a) { return a < 0 ? kiln_neg_s64(a) : a; }

KI int32_t kiln_div_s32(int32_t a, int32_t b) {
  return b == 0 ? -1 : (a == INT32_MIN && b == -1) ? a : a / b;
}
KI int64_t kiln_div_s64(int64_t a, int64_t b) {
  return b == 0 ? -1 : (a == INT64_MIN && b == -1) ? a : a / b;
}
KI uint8_t kiln_div_u8(uint8_t a, uint8_t b) { return b == 0 ? 255 : (uint8_t)(a / b); }
KI uint8_t kiln_div_pred(uint8_t a, uint8_t b) { return b == 0 ? 1 : a; }
KI int32_t kiln_rem_s32(int32_t a, int32_t b) { return b == 0 ? a : b == -1 ? 0 : a % b; }
KI int64_t kiln_rem_s64(int64_t a, int64_t b) { return b == 0 ? a : b == -1 ? 0 : a % b; }
KI uint8_t kiln_rem_u8(uint8_t a, uint8_t b) { return b == 0 ? a : (uint8_t)(a % b); }
KI uint8_t kiln_rem_pred(uint8_t a, uint8_t b) { return b == 0 ? a : 0; }

KI int32_t kiln_shl_s32(int32_t a, int32_t b) {
  return (b < 0 || b >= 32) ? 0 : (int32_t)((uint32_t)a << b);
}
KI int32_t kiln_sra_s32(int32_t a, int32_t b) {
  return (b < 0 || b >= 32) ? (a < 0 ? -1 : 0) : (a >> b);
}
KI int32_t kiln_srl_s32(int32_t a, int32_t b) {
  return (b < 0 || b >= 32) ? 0 : (int32_t)((uint32_t)a >> b);
}
KI int64_t kiln_shl_s64(int64_t a, int64_t b) {
  return (b < 0 || b >= 64) ? 0 : (int64_t)((uint64_t)a << b);
}
KI int64_t kiln_sra_s64(int64_t a, int64_t b) {
  return (b < 0 || b >= 64) ? (a < 0 ? -1 : 0) : (a >> b);
}
KI int64_t kiln_srl_s64(int64_t a, int64_t b) {
  return (b < 0 || b >= 64) ? 0 : (int64_t)((uint64_t)a >> b);
}
KI uint8_t kiln_shl_u8(uint8_t a, uint8_t b) { return b >= 8 ? 0 : (uint8_t)(a << b); }
KI uint8_t kiln_sra_u8(uint8_t a, uint8_t b) {
  int8_t s = (int8_t)a;
  return b >= 8 ? (uint8_t)(s < 0 ? 255 : 0) : (uint8_t)(s >> b);
}
KI uint8_t kiln_srl_u8(uint8_t a, uint8_t b) { return b >= 8 ? 0 : (uint8_t)(a >> b); }

KI int32_t kiln_pow_s32(int32_t a, int32_t b) {
  if (a == 1 || b == 0) return 1;
  if (b < 0) return 0;
  uint32_t r = 1, base = (uint32_t)a;
  for (uint32_t e = (uint32_t)b; e > 0; e >>= 1) {
    if (e & 1u) r *= base;
    base *= base;
  }
  return (int32_t)r;
}
KI int64_t kiln_pow_s64(int64_t a, int64_t b) {
  if (a == 1 || b == 0) return 1;
  if (b < 0) return 0;
  uint64_t r = 1, base = (uint64_t)a;
  for (uint64_t e = (uint64_t)b; e > 0; e >>= 1) {
    if (e & 1u) r *= base;
    base *= base;
  }
  return (int64_t)r;
}
KI uint8_t kiln_pow_u8(uint8_t a, uint8_t b) {
  if (a == 1 || b == 0) return 1;
  uint32_t r = 1, base = a;
  for (uint32_t e = b; e > 0; e >>= 1) {
    if (e & 1u) r = (r * base) & 255u;
    base = (base * base) & 255u;
  }
  return (uint8_t)r;
}
KI uint8_t kiln_pow_pred(uint8_t a, uint8_t b) { return (uint8_t)(a | (1 - b)); }

KI int32_t kiln_sign_s32(int32_t x) { return x > 0 ? 1 : x < 0 ? -1 : 0; }
KI int64_t kiln_sign_s64(int64_t x) { return x > 0 ? 1 : x < 0 ? -1 : 0; }

/* ---- converts (XLA's Literal::Convert) ------------------------------------------------------ */

KI int32_t kiln_f2s32(float x) {
  return x != x ? 0 : x <= -2147483648.0f ? INT32_MIN : x >= 2147483648.0f ? INT32_MAX
                                                                           : (int32_t)x;
}
KI uint8_t kiln_f2u8(float x) {
  return x != x ? 0 : x <= 0.0f ? 0 : x >= 255.0f ? 255 : (uint8_t)x;
}
KI int64_t kiln_f2s64(float x) {
  return x != x ? 0
       : x >= 9223372036854775808.0f ? INT64_MAX
       : x <= -9223372036854775808.0f ? INT64_MIN
                                      : (int64_t)x;
}

/* ---- index arithmetic ---------------------------------------------------------------------- */

KI int64_t kiln_floordiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
KI int64_t kiln_floormod(int64_t a, int64_t b) {
  int64_t r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
KI int64_t kiln_imin(int64_t a, int64_t b) { return a < b ? a : b; }
KI int64_t kiln_imax(int64_t a, int64_t b) { return a < b ? b : a; }

#endif /* KILN_KERNEL_H */
