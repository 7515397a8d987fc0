/*
 * kiln_math.h — branch-free float32 math for the native backend's generated kernels.
 *
 * Every function is `static inline`, uses only float and 32-bit integer arithmetic, bit casts
 * through a union and mask selects (kiln__sel): no calls, no errno, no tables, no branches.
 * A loop `y[i] = kiln_tanhf(x[i])` vectorizes at -O3 for AVX-512, AVX2 and plain SSE2
 * (checked by test/run.sh with -fopt-info-vec). Results do not depend on FMA contraction beyond the stated error (tests run
 * with and without FMA hardware).
 *
 * Special values follow C's libm: NaN -> NaN; exp(+inf) = +inf, exp(-inf) = 0, overflow ->
 * +inf, subnormal results are produced (not flushed); log(0) = -inf, log(x < 0) = NaN,
 * log(+inf) = +inf; tanh(+-inf) = +-1; erf(+-inf) = +-1; logistic(-inf) = 0, (+inf) = 1;
 * -0 is preserved by expm1, log1p, tanh and erf.
 *
 * Accuracy: the maximum error over ALL 2^32 float inputs, in ulps of the exact result (the
 * double-precision libm value), measured by `test/run.sh math` (test_math.c) — quoted above
 * each function for the AVX-512 build (FMA contracted); the portable build (no FMA) is within
 * the same bound (see test output).
 */
#ifndef KILN_MATH_H
#define KILN_MATH_H

#include <stdint.h>

typedef union {
  float f;
  uint32_t u;
  int32_t i;
} kiln__fu;

static inline uint32_t kiln__asuint(float x) {
  kiln__fu v;
  v.f = x;
  return v.u;
}
static inline float kiln__asfloat(uint32_t u) {
  kiln__fu v;
  v.u = u;
  return v.f;
}
static inline float kiln__fabsf(float x) { return kiln__asfloat(kiln__asuint(x) & 0x7fffffffu); }
/* |y| with the sign of x */
static inline float kiln__copysign(float y, float x) {
  return kiln__asfloat((kiln__asuint(y) & 0x7fffffffu) | (kiln__asuint(x) & 0x80000000u));
}

/* c ? a : b without control flow: both values are computed, then blended by a mask. Written
 * with integer ops so that gcc neither sinks the work of one side into a branch nor threads a
 * clamped constant into a separate path (either would stop vectorization without AVX-512
 * masking, since the other side's float ops may trap). */
static inline float kiln__sel(int c, float a, float b) {
  const uint32_t m = (uint32_t)0 - (uint32_t)(c != 0);
  return kiln__asfloat((kiln__asuint(a) & m) | (kiln__asuint(b) & ~m));
}

/* ln 2 split so that n * KILN__LN2_HI is exact for |n| < 2^11 */
#define KILN__LN2_HI 0x1.62ep-1f
#define KILN__LN2_LO 0x1.0bfbe8p-15f
#define KILN__LOG2E 0x1.715476p+0f
#define KILN__SHIFT 0x1.8p23f

/* e^r - 1 - r = r^2 * P(r) on |r| <= ln2/2 (relative error of e^r 3.7e-9) */
static inline float kiln__exp_poly(float r) {
  float p = 0x1.6b6df8p-10f;
  p = p * r + 0x1.123094p-7f;
  p = p * r + 0x1.55568ap-5f;
  p = p * r + 0x1.5554a2p-3f;
  p = p * r + 0x1p-1f;
  return r + r * r * p;
}

/* e^x for x in [-104, 89] (or NaN): x = n ln2 + r, e^x = 2^n e^r with the 2^n applied in two
 * steps so that subnormal results round once. */
static inline float kiln__exp_core(float x) {
  const float z = x * KILN__LOG2E + KILN__SHIFT;
  const float n = z - KILN__SHIFT;
  float r = x - n * KILN__LN2_HI;
  r = r - n * KILN__LN2_LO;
  const float q = kiln__exp_poly(r);
  const int32_t ni = (int32_t)(kiln__asuint(z) - kiln__asuint(KILN__SHIFT));
  const int32_t n1 = ni >> 1, n2 = ni - n1;
  const float s1 = kiln__asfloat((uint32_t)(n1 + 127) << 23);
  const float s2 = kiln__asfloat((uint32_t)(n2 + 127) << 23);
  /* s1 q is exact: one rounding for s1 (1 + q), none for * s2 unless the result is subnormal */
  return (s1 + s1 * q) * s2;
}

/* kiln_expf: e^x.
 * Max error (exhaustive, all 2^32 inputs): 1.02 ulp AVX-512/FMA build, 0.99 ulp portable. */
static inline float kiln_expf(float x) {
  x = kiln__sel(x > 89.0f, 89.0f, x);
  x = kiln__sel(x < -104.0f, -104.0f, x);
  return kiln__exp_core(x);
}

/* expm1(r) = r + r^2 * Q(r) on |r| <= ln2/2 (relative error 4.4e-10) */
static inline float kiln__expm1_poly(float r) {
  float p = 0x1.9e7d0cp-13f;
  p = p * r + 0x1.6d3a84p-10f;
  p = p * r + 0x1.1112d4p-7f;
  p = p * r + 0x1.5554f8p-5f;
  p = p * r + 0x1.555554p-3f;
  p = p * r + 0x1p-1f;
  return r + r * r * p;
}

/* e^x - 1 for x in [-30, 89] (or NaN), |x| >= 2^-25:
 * 2^n (e^r - 1) + 2^n - 1 = 2 (t (e^r - 1) + (t - 1/2)) with t = 2^(n-1) (exact products,
 * one rounding in the sum; t - 1/2 is exact for the n where it matters). */
static inline float kiln__expm1_core(float x) {
  const float z = x * KILN__LOG2E + KILN__SHIFT;
  const float n = z - KILN__SHIFT;
  float r = x - n * KILN__LN2_HI;
  r = r - n * KILN__LN2_LO;
  const float p = kiln__expm1_poly(r);
  const int32_t ni = (int32_t)(kiln__asuint(z) - kiln__asuint(KILN__SHIFT));
  const float t = kiln__asfloat((uint32_t)(ni - 1 + 127) << 23);
  return 2.0f * (p * t + (t - 0.5f));
}

/* kiln_expm1f: e^x - 1.
 * Max error (exhaustive, all 2^32 inputs): 1.44 ulp AVX-512/FMA build, 1.45 ulp portable. */
static inline float kiln_expm1f(float x) {
  float c = kiln__sel(x > 89.0f, 89.0f, x);
  c = kiln__sel(c < -30.0f, -30.0f, c);
  const float y = kiln__expm1_core(c);
  return kiln__sel(kiln__fabsf(x) < 0x1p-25f, x, y);
}

/* log(1 + f) - f = f^2 * R(f) on [sqrt(1/2) - 1, sqrt(2) - 1] (relative error 5.9e-9) */
static inline float kiln__log1p_poly(float f) {
  float q = -0x1.38ebc0p-4f;
  q = q * f + 0x1.056feap-3f;
  q = q * f + -0x1.0d846ap-3f;
  q = q * f + 0x1.22d712p-3f;
  q = q * f + -0x1.547212p-3f;
  q = q * f + 0x1.99a02cp-3f;
  q = q * f + -0x1.000228p-2f;
  q = q * f + 0x1.555554p-2f;
  q = q * f + -0x1p-1f;
  return q;
}

/* k ln2 + log(1 + f) */
static inline float kiln__log_tail(float k, float f) {
  const float q = kiln__log1p_poly(f);
  const float r = f + (f * f * q + k * KILN__LN2_LO);
  return k * KILN__LN2_HI + r;
}

/* kiln_logf: natural log.
 * Max error (exhaustive, all 2^32 inputs): 0.88 ulp AVX-512/FMA build, 0.92 ulp portable. */
static inline float kiln_logf(float x) {
  const int sub = x < 0x1p-126f;
  const float xs = kiln__sel(sub, x * 0x1p23f, x);
  const uint32_t ix = kiln__asuint(xs);
  const int32_t k = (int32_t)(ix - 0x3f3504f3u) >> 23; /* x = 2^k m, m in [sqrt(1/2), sqrt(2)) */
  const float m = kiln__asfloat(ix - ((uint32_t)k << 23));
  const float kf = (float)k - kiln__sel(sub, 23.0f, 0.0f);
  float y = kiln__log_tail(kf, m - 1.0f);
  y = kiln__sel(x == 0.0f, -__builtin_inff(), y);
  y = kiln__sel(x < 0.0f, __builtin_nanf(""), y);
  y = kiln__sel(x == __builtin_inff(), x, y);
  return kiln__sel(x != x, x, y);
}

/* kiln_log1pf: log(1 + x).
 * Max error (exhaustive, all 2^32 inputs): 0.89 ulp AVX-512/FMA build, 0.93 ulp portable. */
static inline float kiln_log1pf(float x) {
  /* 1 + x = 2^k (1 + f + c): k from the rounded sum, f = x 2^-k + (2^-k - 1) (both parts exact
   * for |k| <= 24) and c its rounding error; beyond 2^24 the 1 is noise. */
  const int big = x >= 0x1p24f;
  const float v = kiln__sel(big, x, 1.0f + x);
  const uint32_t iv = kiln__asuint(v);
  const int32_t k = (int32_t)(iv - 0x3f3504f3u) >> 23;
  const int32_t kc = k > 24 ? 24 : k; /* integer select: vectorizes as a min */
  const float scale = kiln__asfloat((uint32_t)(127 - kc) << 23);
  /* f = a + b rounded, with its rounding error e (2Sum; a and b are exact) */
  const float a = scale - 1.0f, b = x * scale;
  const float fs = a + b;
  const float bb = fs - a;
  const float e = (a - (fs - bb)) + (b - bb);
  const float fb = kiln__asfloat(iv - ((uint32_t)k << 23)) - 1.0f;
  const float f = kiln__sel(big, fb, fs);
  const float c = kiln__sel(big, 0.0f, e);
  /* log(1 + f + c) = log(1 + f) + c / (1 + f), with c / (1 + f) ~ c (1 - f) */
  const float kf = (float)k;
  const float q = kiln__log1p_poly(f);
  const float r = f + (f * f * q + (kf * KILN__LN2_LO + (c - c * f)));
  float y = kf * KILN__LN2_HI + r;
  y = kiln__sel(x == -1.0f, -__builtin_inff(), y);
  y = kiln__sel(x < -1.0f, __builtin_nanf(""), y);
  y = kiln__sel(x == __builtin_inff(), x, y);
  y = kiln__sel(x == 0.0f, x, y);
  return kiln__sel(x != x, x, y);
}

/* e^x = s (1 + q) with s = 2^n exact (n >= -126): the parts of exp before they are rounded
 * together, for x in [-87, 89]. */
static inline float kiln__exp_parts(float x, float* s) {
  const float z = x * KILN__LOG2E + KILN__SHIFT;
  const float n = z - KILN__SHIFT;
  float r = x - n * KILN__LN2_HI;
  r = r - n * KILN__LN2_LO;
  const int32_t ni = (int32_t)(kiln__asuint(z) - kiln__asuint(KILN__SHIFT));
  *s = kiln__asfloat((uint32_t)(ni + 127) << 23);
  return kiln__exp_poly(r);
}

/* kiln_tanhf: |x| < 0.55: x + x^3 P(x^2); above: 1 - 2 / ((s + 1) + s q) with
 * e^(2|x|) = s (1 + q) (s q exact, s + 1 exact where it matters: no cancellation, two
 * roundings); 1 beyond 10. Sign restored.
 * Max error (exhaustive, all 2^32 inputs): 1.33 ulp AVX-512/FMA build, 1.35 ulp portable. */
static inline float kiln_tanhf(float x) {
  const float ax = kiln__fabsf(x);
  /* small */
  const float x2 = ax * ax;
  float p = -0x1.995aeap-8f;
  p = p * x2 + 0x1.58ecf8p-6f;
  p = p * x2 + -0x1.b91f26p-5f;
  p = p * x2 + 0x1.110cf0p-3f;
  p = p * x2 + -0x1.55554ap-2f;
  const float ys = ax + ax * x2 * p;
  /* large */
  const float a2 = kiln__sel(ax > 10.0f, 20.0f, 2.0f * ax);
  float s;
  const float q = kiln__exp_parts(a2, &s);
  const float yl = 1.0f - 2.0f / ((s + 1.0f) + s * q);
  float y = kiln__sel(ax < 0.55f, ys, yl);
  y = kiln__sel(ax > 10.0f, 1.0f, y);
  return kiln__sel(x != x, x, kiln__copysign(y, x));
}

/* kiln_logisticf: with e^-x = 2^n (1 + q) and u = 2^-n, for either sign
 *   1 / (1 + e^-x) = u / ((1 + u) + q):
 * one exp reduction, no second exp for the tails, no overflow. One rounding in the
 * denominator (1 + u is exact for |n| <= 23; for n > 23 the u that 1 + u drops is recovered
 * and added to q first; for n < -23 the result is 1 within an ulp), one in the division. The
 * numerator is carried as 2^24 u, a normal float for every n in [-93, 150], and the quotient
 * scaled back by 2^-24, so results down to the subnormals round once. x is clamped to
 * [-104, 64] (the result rounds to 0 below, is 1 above); NaN propagates.
 * Max error (exhaustive, all 2^32 inputs): 1.70 ulp AVX-512/FMA build, 1.75 ulp portable. */
static inline float kiln_logisticf(float x) {
  const float xc = kiln__sel(x < -104.0f, -104.0f, kiln__sel(x > 64.0f, 64.0f, x));
  const float nx = -xc;
  const float z = nx * KILN__LOG2E + KILN__SHIFT;
  const float n = z - KILN__SHIFT;
  float r = nx - n * KILN__LN2_HI;
  r = r - n * KILN__LN2_LO;
  const float q = kiln__exp_poly(r);
  const int32_t ni = (int32_t)(kiln__asuint(z) - kiln__asuint(KILN__SHIFT));
  const float u24 = kiln__asfloat((uint32_t)(151 - ni) << 23); /* 2^(24 - n) */
  const float u = u24 * 0x1p-24f;
  const float s = 1.0f + u;
  const float den = s + (q + (u - (s - 1.0f)));
  return (u24 / den) * 0x1p-24f;
}

/* kiln_erff: |x| < 0.921875: x + x P(x^2); up to 3.93: 1 - e^Q(|x| - 0.921875), Q ~ log erfc,
 * as (1 - s) - s q with e^Q = s (1 + q), s = 2^n, n in [-25, -2] (s q exact, 1 - s exact but
 * for n = -25, within 0.05 of 3.93: one rounding; no second rounding of an exp result);
 * beyond: 1. Sign restored; NaN propagates.
 * Max error (exhaustive, all 2^32 inputs): 1.01 ulp AVX-512/FMA build, 1.06 ulp portable. */
static inline float kiln_erff(float x) {
  const float ax = kiln__fabsf(x);
  /* small */
  const float s = ax * ax;
  float p = 0x1.4f38b0p-14f;
  p = p * s + -0x1.a600b6p-11f;
  p = p * s + 0x1.544980p-8f;
  p = p * s + -0x1.b80114p-6f;
  p = p * s + 0x1.ce2d64p-4f;
  p = p * s + -0x1.812740p-2f;
  p = p * s + 0x1.06eba8p-3f;
  const float ys = ax + ax * p;
  /* mid */
  const float am = kiln__sel(ax < 0.921875f, 0.921875f, kiln__sel(ax > 3.93f, 3.93f, ax));
  const float t = am - 0.921875f;
  float q = 0x1.1cdb3ep-13f;
  q = q * t + -0x1.bd00d8p-12f;
  q = q * t + -0x1.e7ab1cp-11f;
  q = q * t + 0x1.45813ep-7f;
  q = q * t + -0x1.6caa0ap-5f;
  q = q * t + -0x1.aa8278p-1f;
  q = q * t + -0x1.41068cp+1f;
  q = q * t + -0x1.a60826p+0f;
  float e;
  const float eq = kiln__exp_parts(q, &e); /* Q in [-17.4, -1.65] */
  const float ym = (1.0f - e) - e * eq;
  float y = kiln__sel(ax < 0.921875f, ys, ym);
  y = kiln__sel(ax > 3.93f, 1.0f, y);
  return kiln__copysign(y, x);
}

#endif /* KILN_MATH_H */
