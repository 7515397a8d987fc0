/*
 * gemm.c — packed, register-blocked SGEMM for the native runtime (KilnApi.sgemm) and the
 * generic packed-GEMM core that convolution shares.
 *
 * Structure (GotoBLAS/BLIS, with the roles arranged for row-major C and broadcast-A kernels):
 *
 *   for n0 in columns step NC                       B block  (KC x NC, packed, <= 1 MiB: L2)
 *     for k0 in K step KC                          (K blocking is a function of K only)
 *       pack B[k0:k0+kc, n0:n0+nc] into kc x NR panels
 *       for m0 in rows step MR                     A micro-panel (MR x kc, packed, L1)
 *         pack A[m0:m0+MR, k0:k0+kc]
 *         for each NR panel: micro-kernel MR x NR (C = or += A_panel * B_panel)
 *         after the last k block: epilogue on the finished row group (~64 rows x NC)
 *
 * KC <= 512 (balanced blocks), NC = 1 MiB / (4 KC). Packing reads operands through their
 * KilnAxis: unit-stride rows are copied, unit-stride contraction is transposed (16x16 in
 * registers on AVX-512), tables that are contiguous runs are treated as such, anything else is
 * gathered.
 *
 * Micro-kernels (chosen at compile time):
 *   AVX-512: 14 x 32 (28 zmm accumulators, A broadcast from a 16-float-per-k panel, B two zmm
 *            loads), plus the same code instantiated for 2..12 rows and for 16 columns, used
 *            for edge tiles and small M;
 *   AVX2+FMA: 6 x 16 (12 ymm accumulators);
 *   portable: 4 x 8 plain C over a local accumulator array that gcc vectorizes (SSE2: 8 xmm).
 * Edge tiles that do not match a kernel exactly are computed into a temporary tile and stored
 * through the output's offsets.
 *
 * Fast paths: M == 1 (or N == 1): GEMV streaming the matrix once, axpy form when its rows are
 * contiguous, dot form when its contraction is; 2 <= M <= 8 with contiguous B rows: the axpy
 * form for all rows at once (B streamed once). Threads split the batch, then rows or columns
 * (whichever duplicates less packing); GEMV splits columns.
 *
 * Determinism: every C element is the sum of its K products computed by one thread: within a K
 * block an FMA chain in k order starting from 0, blocks added to C in order. The K blocking
 * depends on K only, and edge tiles (stored through a temporary tile) compute exactly the same
 * operations as full tiles, so results are bitwise identical for every thread count and every
 * split of rows and columns.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime_internal.h"

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#endif

#if defined(__AVX512F__)
#define KILN_GEMM_AVX512 1
#define MR 14
#define NR 32
#define MRS 16 /* A panel: floats per k */
#ifndef KC_MAX
#define KC_MAX 256 /* a packed B panel (KC x NR) of 32 KiB stays in L1 */
#endif
#elif defined(__AVX2__) && defined(__FMA__)
#define KILN_GEMM_AVX2 1
#define MR 6
#define NR 16
#define MRS 8
#define KC_MAX 256
#else
#define KILN_GEMM_PORTABLE 1
#define MR 4
#define NR 8 /* 8 accumulator vectors of 4 lanes: fits the 16 SSE registers */
#define MRS 4
#define KC_MAX 256
#endif


#define KILN_RESTRICT __restrict__
#define KILN_INLINE static inline __attribute__((always_inline))

int kiln_gemm_mr(void) { return MR; }
int kiln_gemm_nr(void) { return NR; }

/* ---- thread-local scratch ------------------------------------------------------------------ */

#define KILN_SCRATCH_SLOTS 6

typedef struct Scratch {
  float* p[KILN_SCRATCH_SLOTS];
  size_t cap[KILN_SCRATCH_SLOTS];
} Scratch;

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;
static __thread Scratch* tls_scratch;

static void scratch_free(void* v) {
  Scratch* s = (Scratch*)v;
  if (!s) return;
  for (int i = 0; i < KILN_SCRATCH_SLOTS; i++) free(s->p[i]);
  free(s);
}
static void scratch_key_init(void) { pthread_key_create(&scratch_key, scratch_free); }

float* kiln_scratch(int slot, size_t floats) {
  Scratch* s = tls_scratch;
  if (!s) {
    pthread_once(&scratch_once, scratch_key_init);
    s = (Scratch*)calloc(1, sizeof *s);
    if (!s) return NULL;
    tls_scratch = s;
    pthread_setspecific(scratch_key, s);
  }
  if (floats > s->cap[slot]) {
    size_t want = floats + floats / 4 + 64;
    size_t bytes = (want * sizeof(float) + 63) & ~(size_t)63;
    float* p = (float*)aligned_alloc(64, bytes);
    if (!p) return NULL;
    free(s->p[slot]);
    s->p[slot] = p;
    s->cap[slot] = bytes / sizeof(float);
  }
  return s->p[slot];
}

static inline int64_t axis_off(const KilnAxis* a, int64_t i) {
  return a->table ? a->table[i] : i * a->stride;
}
static inline int axis_unit(const KilnAxis* a) { return !a->table && a->stride == 1; }

/* ---- packing --------------------------------------------------------------------------------- */

#if KILN_GEMM_AVX512
/* In-register transpose of a 16 x 16 block. */
KILN_INLINE void tr16x16(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 8; i++) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; i++) {
    r[4 * i + 0] = _mm512_shuffle_ps(t[4 * i + 0], t[4 * i + 2], 0x44);
    r[4 * i + 1] = _mm512_shuffle_ps(t[4 * i + 0], t[4 * i + 2], 0xEE);
    r[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    r[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
  }
  for (int i = 0; i < 4; i++) {
    t[i] = _mm512_shuffle_f32x4(r[i], r[4 + i], 0x88);
    t[4 + i] = _mm512_shuffle_f32x4(r[i], r[4 + i], 0xDD);
    t[8 + i] = _mm512_shuffle_f32x4(r[8 + i], r[12 + i], 0x88);
    t[12 + i] = _mm512_shuffle_f32x4(r[8 + i], r[12 + i], 0xDD);
  }
  for (int i = 0; i < 8; i++) {
    r[i] = _mm512_shuffle_f32x4(t[i], t[8 + i], 0x88);
    r[8 + i] = _mm512_shuffle_f32x4(t[i], t[8 + i], 0xDD);
  }
}
#endif

/* out[k * W + j] = rows[j][k] for j < w, k < kc; zero for w <= j < W (W a multiple of 16 on
 * AVX-512). rows[j] are contiguous along k. */
void kiln_pack_transpose(const float* const* rows, int64_t w, int64_t kc, float* out,
                         int64_t W) {
#if KILN_GEMM_AVX512
  if ((W & 15) == 0) {
    for (int64_t g = 0; g < W; g += 16) {
      const int64_t gw = w - g;
      int64_t k = 0;
      for (; k < kc; k += 16) {
        const int64_t kr = kc - k < 16 ? kc - k : 16;
        const __mmask16 km = (__mmask16)((1u << kr) - 1);
        __m512 r[16];
        for (int i = 0; i < 16; i++) {
          if (i < gw)
            r[i] = kr == 16 ? _mm512_loadu_ps(rows[g + i] + k)
                            : _mm512_maskz_loadu_ps(km, rows[g + i] + k);
          else
            r[i] = _mm512_setzero_ps();
        }
        tr16x16(r);
        float* o = out + k * W + g;
        for (int i = 0; i < kr; i++) _mm512_store_ps(o + i * W, r[i]);
      }
    }
    return;
  }
#endif
  for (int64_t k = 0; k < kc; k++) {
    float* o = out + k * W;
    for (int64_t j = 0; j < w; j++) o[j] = rows[j][k];
    for (int64_t j = w; j < W; j++) o[j] = 0.0f;
  }
}

/* a table whose entries [i0, i0 + n) are t[i0] + 0, 1, 2, ... */
static inline int table_run(const int64_t* t, int64_t i0, int64_t n) {
  for (int64_t i = 1; i < n; i++)
    if (t[i0 + i] != t[i0] + i) return 0;
  return 1;
}

/* copies n <= 64 floats (a panel row or part of one) */
static inline void copy_floats(float* KILN_RESTRICT o, const float* KILN_RESTRICT src, int64_t n) {
#if KILN_GEMM_AVX512
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) _mm512_storeu_ps(o + j, _mm512_loadu_ps(src + j));
  if (j < n) {
    const __mmask16 m = (__mmask16)((1u << (n - j)) - 1);
    _mm512_mask_storeu_ps(o + j, m, _mm512_maskz_loadu_ps(m, src + j));
  }
#else
  for (int64_t j = 0; j < n; j++) o[j] = src[j];
#endif
}

void kiln_pack_axis(const KilnSrc* s, int64_t k0, int64_t kc, int64_t j0, int64_t w, int64_t W,
                    float* out) {
  const float* base = s->base;
  if (w <= 0) {
    memset(out, 0, (size_t)(kc * W) * sizeof(float));
    return;
  }
  /* 1. the panel's j positions are contiguous (unit stride, or a table run): copy rows */
  const float* jsrc = NULL;
  if (axis_unit(&s->j)) jsrc = base + j0;
  else if (s->j.table && table_run(s->j.table, j0, w)) jsrc = base + s->j.table[j0];
  if (jsrc) {
    if (w == W && !s->k.table) {
      const int64_t ks = s->k.stride;
      const float* src = jsrc + k0 * ks;
#if KILN_GEMM_AVX512
      if (W == 32) {
        for (int64_t k = 0; k < kc; k++, src += ks) {
          _mm512_store_ps(out + k * 32, _mm512_loadu_ps(src));
          _mm512_store_ps(out + k * 32 + 16, _mm512_loadu_ps(src + 16));
        }
        return;
      }
      if (W == 16) {
        for (int64_t k = 0; k < kc; k++, src += ks)
          _mm512_store_ps(out + k * 16, _mm512_loadu_ps(src));
        return;
      }
#endif
      for (int64_t k = 0; k < kc; k++, src += ks) memcpy(out + k * W, src, (size_t)W * 4);
      return;
    }
    for (int64_t k = 0; k < kc; k++) {
      float* o = out + k * W;
      copy_floats(o, jsrc + axis_off(&s->k, k0 + k), w);
      for (int64_t j = w; j < W; j++) o[j] = 0.0f;
    }
    return;
  }
  const float* rows[64];
  if (w <= 64 && axis_unit(&s->k)) {
    /* 2. the contraction is contiguous: transpose */
    for (int64_t j = 0; j < w; j++) rows[j] = base + axis_off(&s->j, j0 + j) + k0;
    kiln_pack_transpose(rows, w, kc, out, W);
    return;
  }
  if (w <= 64 && s->k.table && kc >= 8) {
    /* 2b. a contraction table made of contiguous runs (conv, channels last): transpose each run
     * when they are long enough */
    const int64_t* kt = s->k.table;
    int64_t runs = 1;
    for (int64_t k = 1; k < kc; k++) runs += kt[k0 + k] != kt[k0 + k - 1] + 1;
    if (kc >= 8 * runs) {
      int64_t joff[64];
      for (int64_t j = 0; j < w; j++) joff[j] = axis_off(&s->j, j0 + j);
      for (int64_t ka = 0; ka < kc;) {
        int64_t kb = ka + 1;
        while (kb < kc && kt[k0 + kb] == kt[k0 + kb - 1] + 1) kb++;
        for (int64_t j = 0; j < w; j++) rows[j] = base + joff[j] + kt[k0 + ka];
        kiln_pack_transpose(rows, w, kb - ka, out + ka * W, W);
        ka = kb;
      }
      return;
    }
  }
  int64_t joff[64];
  const int64_t wn = w <= 64 ? w : 64;
  for (int64_t j = 0; j < wn; j++) joff[j] = axis_off(&s->j, j0 + j);
  if (s->j.table && w == wn) {
    /* 3. runs of contiguous j (conv positions along an output row): copy the runs */
    int64_t rs[64], rl[64], nr = 0;
    for (int64_t j = 0; j < w;) {
      int64_t e = j + 1;
      while (e < w && joff[e] == joff[e - 1] + 1) e++;
      rs[nr] = j, rl[nr] = e - j, nr++;
      j = e;
    }
    if (w >= 6 * nr) {
#if KILN_GEMM_AVX512
      /* pieces of <= 16 floats: (destination, source offset, mask) */
      int64_t pd[64], ps[64];
      __mmask16 pm[64];
      int np = 0;
      for (int64_t q = 0; q < nr; q++)
        for (int64_t t = 0; t < rl[q]; t += 16) {
          const int64_t n = rl[q] - t < 16 ? rl[q] - t : 16;
          pd[np] = rs[q] + t, ps[np] = joff[rs[q]] + t, pm[np] = (__mmask16)((1u << n) - 1);
          np++;
        }
      for (int64_t k = 0; k < kc; k++) {
        const float* r = base + axis_off(&s->k, k0 + k);
        float* o = out + k * W;
        if (w < W) {
          for (int64_t j = 0; j < W; j += 16) _mm512_store_ps(o + j, _mm512_setzero_ps());
        }
        for (int q = 0; q < np; q++)
          _mm512_mask_storeu_ps(o + pd[q], pm[q], _mm512_maskz_loadu_ps(pm[q], r + ps[q]));
      }
#else
      for (int64_t k = 0; k < kc; k++) {
        const float* r = base + axis_off(&s->k, k0 + k);
        float* o = out + k * W;
        for (int64_t q = 0; q < nr; q++) copy_floats(o + rs[q], r + joff[rs[q]], rl[q]);
        for (int64_t j = w; j < W; j++) o[j] = 0.0f;
      }
#endif
      return;
    }
#if KILN_GEMM_AVX512
    /* 3b. runs of step-2 j (stride-2 convolutions): two loads and an even-lane permute */
    nr = 0;
    for (int64_t j = 0; j < w;) {
      int64_t e = j + 1;
      while (e < w && e - j < 16 && joff[e] == joff[e - 1] + 2) e++;
      rs[nr] = j, rl[nr] = e - j, nr++;
      j = e;
    }
    if (w >= 6 * nr) {
      const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
      int64_t ps[64];
      __mmask16 pm[64], lo_m[64], hi_m[64];
      for (int64_t q = 0; q < nr; q++) {
        const int64_t n = rl[q];
        ps[q] = joff[rs[q]];
        pm[q] = (__mmask16)((1u << n) - 1);
        /* source lanes 0 .. 2n-2 of two 16-lane loads */
        const uint32_t src = (2 * n - 1 >= 32) ? 0xFFFFFFFFu : ((1u << (2 * n - 1)) - 1);
        lo_m[q] = (__mmask16)(src & 0xFFFF);
        hi_m[q] = (__mmask16)(src >> 16);
      }
      for (int64_t k = 0; k < kc; k++) {
        const float* r = base + axis_off(&s->k, k0 + k);
        float* o = out + k * W;
        if (w < W) {
          for (int64_t j = 0; j < W; j += 16) _mm512_store_ps(o + j, _mm512_setzero_ps());
        }
        for (int64_t q = 0; q < nr; q++) {
          const __m512 a = _mm512_maskz_loadu_ps(lo_m[q], r + ps[q]);
          const __m512 b = _mm512_maskz_loadu_ps(hi_m[q], r + ps[q] + 16);
          _mm512_mask_storeu_ps(o + rs[q], pm[q], _mm512_permutex2var_ps(a, even, b));
        }
      }
      return;
    }
#endif
  }
#if KILN_GEMM_AVX512
  /* 4a. gather with 32-bit offsets */
  if (w == wn) {
    int64_t lo = joff[0], hi = joff[0];
    for (int64_t j = 1; j < w; j++) lo = joff[j] < lo ? joff[j] : lo, hi = joff[j] > hi ? joff[j] : hi;
    if (hi - lo < ((int64_t)1 << 31)) {
      int32_t idx[64] __attribute__((aligned(64)));
      for (int64_t j = 0; j < 64; j++) idx[j] = j < w ? (int32_t)(joff[j] - lo) : 0;
      for (int64_t k = 0; k < kc; k++) {
        const float* r = base + axis_off(&s->k, k0 + k) + lo;
        float* o = out + k * W;
        for (int64_t j = 0; j < W; j += 16) {
          const int64_t n = w - j;
          const __mmask16 m = n >= 16 ? (__mmask16)0xFFFF : n > 0 ? (__mmask16)((1u << n) - 1) : 0;
          const __m512i vi = _mm512_load_si512((const void*)(idx + j));
          _mm512_storeu_ps(o + j, _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, vi, r, 4));
        }
      }
      return;
    }
  }
#endif
  /* 4. general gather */
  for (int64_t k = 0; k < kc; k++) {
    const float* r = base + axis_off(&s->k, k0 + k);
    float* o = out + k * W;
    for (int64_t j = 0; j < wn; j++) o[j] = r[joff[j]];
    for (int64_t j = wn; j < w; j++) o[j] = r[axis_off(&s->j, j0 + j)];
    for (int64_t j = w; j < W; j++) o[j] = 0.0f;
  }
}

/* ---- micro-kernels ------------------------------------------------------------------------------
 * kern(kc, A, B, C, ldc, acc, pf): C[i * ldc + j] (= or +=) sum_k A[k * MRS + i] * B[k * NR + j]
 * for i < MR, j < NR. Within the call each element is an FMA chain in k order from 0; with
 * acc the chain's value is added to C. Every second k step the kernel also issues pf->per
 * software prefetches (into L2) of the next B panel's source lines (see Pf), so that the panel
 * packed after this one is read from cache while the FMAs run: operands streamed from memory
 * (the weights of a layer) cost no separate pass. */

/* Lines to prefetch: `left` lines, `lpr` per row, rows `stride` bytes apart, from p. */
typedef struct Pf {
  const char* p;
  int64_t stride;
  int64_t left;
  int lpr, line, every, cnt;
} Pf;

#define PF_STEP(pp, pl, lpr, pst)                       \
  do {                                                  \
    __builtin_prefetch((pp) + (pl) * 64, 0, 2);         \
    if (++(pl) == (lpr)) {                              \
      (pl) = 0;                                         \
      (pp) += (pst);                                    \
    }                                                   \
  } while (0)

#if KILN_GEMM_AVX512

#define K14_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13)

/* The 14 x 32 kernel, and the same code for fewer rows (2..12) or 16 columns: identical FMA
 * chains per element, so an edge tile computed by a narrower variant has the same values.
 * Packed A (direct = 0): A[k * MRS + i]; direct A: A[i * lda + k], rows read in place (the
 * operand streamed once: weights of a convolution or of an LM head). */
KILN_INLINE void kern_body(const int direct, const int rows, const int cols, int64_t kc,
                           const float* KILN_RESTRICT A, int64_t lda, const float* KILN_RESTRICT B,
                           float* KILN_RESTRICT C, int64_t ldc, int acc, Pf* pf) {
  const float* KILN_RESTRICT A7 = A + 7 * lda;
#define DECL(i) __m512 c##i##a = _mm512_setzero_ps(), c##i##b = _mm512_setzero_ps();
  K14_ROWS(DECL)
#undef DECL
#define PFC(i)                                                                 \
  if (rows > i) {                                                              \
    _mm_prefetch((const char*)(C + i * ldc), _MM_HINT_T0);                     \
    if (cols > 16) _mm_prefetch((const char*)(C + i * ldc + 16), _MM_HINT_T0); \
  }
  K14_ROWS(PFC)
#undef PFC
  const char* pp = pf->p;
  int64_t pleft = pf->left;
  int pl = pf->line, cnt = pf->cnt;
  const int lpr = pf->lpr, every = pf->every;
  const int64_t pst = pf->stride;
#define STEP(i)                                                                        \
  if (rows > i) {                                                                      \
    const __m512 a =                                                                   \
        _mm512_set1_ps(direct ? (i < 7 ? A[i * lda] : A7[(i - 7) * lda]) : A[i]);      \
    c##i##a = _mm512_fmadd_ps(a, b0, c##i##a);                                         \
    if (cols > 16) c##i##b = _mm512_fmadd_ps(a, b1, c##i##b);                          \
  }
#define KSTEP()                                                  \
  {                                                              \
    const __m512 b0 = _mm512_load_ps(B);                         \
    const __m512 b1 = cols > 16 ? _mm512_load_ps(B + 16) : b0;   \
    K14_ROWS(STEP)                                               \
    if (direct) {                                                \
      A++;                                                       \
      A7++;                                                      \
    } else {                                                     \
      A += MRS;                                                  \
    }                                                            \
    B += NR;                                                     \
  }
  int64_t k = 0;
  for (; k + 2 <= kc; k += 2) {
    if (pleft > 0 && --cnt <= 0) {
      cnt = every;
      PF_STEP(pp, pl, lpr, pst);
      pleft--;
    }
    KSTEP()
    KSTEP()
  }
  if (k < kc) KSTEP()
#undef KSTEP
#undef STEP
  pf->p = pp;
  pf->left = pleft;
  pf->line = pl;
  pf->cnt = cnt;
  if (acc) {
#define ST(i)                                                                                  \
  if (rows > i) {                                                                              \
    _mm512_storeu_ps(C + i * ldc, _mm512_add_ps(_mm512_loadu_ps(C + i * ldc), c##i##a));       \
    if (cols > 16)                                                                             \
      _mm512_storeu_ps(C + i * ldc + 16, _mm512_add_ps(_mm512_loadu_ps(C + i * ldc + 16), c##i##b)); \
  }
    K14_ROWS(ST)
#undef ST
  } else {
#define ST(i)                                                  \
  if (rows > i) {                                              \
    _mm512_storeu_ps(C + i * ldc, c##i##a);                    \
    if (cols > 16) _mm512_storeu_ps(C + i * ldc + 16, c##i##b); \
  }
    K14_ROWS(ST)
#undef ST
  }
}

typedef void (*kern_fn)(int64_t kc, const float* A, int64_t lda, const float* B, float* C,
                        int64_t ldc, int acc, Pf* pf);
#define KERN_VARIANT(D, R, N)                                                                  \
  static void kern_##D##R##x##N(int64_t kc, const float* KILN_RESTRICT A, int64_t lda,         \
                                const float* KILN_RESTRICT B, float* KILN_RESTRICT C,          \
                                int64_t ldc, int acc, Pf* pf) {                                \
    kern_body(D, R, N, kc, A, lda, B, C, ldc, acc, pf);                                        \
  }
#define KERN_VARIANTS(D)                                                                       \
  KERN_VARIANT(D, 14, 32) KERN_VARIANT(D, 12, 32) KERN_VARIANT(D, 10, 32)                      \
  KERN_VARIANT(D, 8, 32) KERN_VARIANT(D, 6, 32) KERN_VARIANT(D, 4, 32) KERN_VARIANT(D, 2, 32)  \
  KERN_VARIANT(D, 14, 16) KERN_VARIANT(D, 12, 16) KERN_VARIANT(D, 10, 16)                      \
  KERN_VARIANT(D, 8, 16) KERN_VARIANT(D, 6, 16) KERN_VARIANT(D, 4, 16) KERN_VARIANT(D, 2, 16)
KERN_VARIANTS(0)
KERN_VARIANTS(1)
#define KERN_TAB(D)                                                                            \
  {{kern_##D##2x16, kern_##D##4x16, kern_##D##6x16, kern_##D##8x16, kern_##D##10x16,           \
    kern_##D##12x16, kern_##D##14x16},                                                         \
   {kern_##D##2x32, kern_##D##4x32, kern_##D##6x32, kern_##D##8x32, kern_##D##10x32,           \
    kern_##D##12x32, kern_##D##14x32}}
static const kern_fn kern_tab[2][2][7] = {KERN_TAB(0), KERN_TAB(1)};
/* the kernel (packed or direct A) for an mr x nr tile and the tile it computes */
static inline kern_fn kern_for_a(int direct, int64_t mr, int64_t nr, int64_t* kr, int64_t* kn) {
  const int64_t r = (mr + 1) & ~(int64_t)1;
  *kr = r;
  *kn = nr <= 16 ? 16 : 32;
  return kern_tab[direct][nr > 16][r / 2 - 1];
}
static inline kern_fn kern_for(int64_t mr, int64_t nr, int64_t* kr, int64_t* kn) {
  return kern_for_a(0, mr, nr, kr, kn);
}
#define KILN_DIRECT_A 1
/* row panels of a row range: as equal as possible, even sizes (every variant is 2-row
 * granular and any of 8..14 rows runs the FMA ports at full rate) */
#define KILN_EVEN_PANELS 1
#elif KILN_GEMM_AVX2

#define K6_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5)

static void kern(int64_t kc, const float* KILN_RESTRICT A, int64_t lda,
                 const float* KILN_RESTRICT B, float* KILN_RESTRICT C, int64_t ldc, int acc, Pf* pf) {
  (void)lda; /* packed A only */
#define DECL(i) __m256 c##i##a = _mm256_setzero_ps(), c##i##b = _mm256_setzero_ps();
  K6_ROWS(DECL)
#undef DECL
  const char* pp = pf->p;
  int64_t pleft = pf->left;
  int pl = pf->line, cnt = pf->cnt;
  const int lpr = pf->lpr, every = pf->every;
  const int64_t pst = pf->stride;
#define STEP(i)                                   \
  {                                               \
    const __m256 a = _mm256_broadcast_ss(A + i);  \
    c##i##a = _mm256_fmadd_ps(a, b0, c##i##a);    \
    c##i##b = _mm256_fmadd_ps(a, b1, c##i##b);    \
  }
  for (int64_t k = 0; k < kc; k++) {
    if ((k & 1) && pleft > 0 && --cnt <= 0) {
      cnt = every;
      PF_STEP(pp, pl, lpr, pst);
      pleft--;
    }
    const __m256 b0 = _mm256_load_ps(B);
    const __m256 b1 = _mm256_load_ps(B + 8);
    K6_ROWS(STEP)
    A += MRS;
    B += NR;
  }
#undef STEP
  pf->p = pp;
  pf->left = pleft;
  pf->line = pl;
  pf->cnt = cnt;
  if (acc) {
#define ST(i)                                                                          \
  _mm256_storeu_ps(C + i * ldc, _mm256_add_ps(_mm256_loadu_ps(C + i * ldc), c##i##a));      \
  _mm256_storeu_ps(C + i * ldc + 8, _mm256_add_ps(_mm256_loadu_ps(C + i * ldc + 8), c##i##b));
    K6_ROWS(ST)
#undef ST
  } else {
#define ST(i)                               \
  _mm256_storeu_ps(C + i * ldc, c##i##a);   \
  _mm256_storeu_ps(C + i * ldc + 8, c##i##b);
    K6_ROWS(ST)
#undef ST
  }
}

#else /* portable */

static void kern(int64_t kc, const float* KILN_RESTRICT A, int64_t lda,
                 const float* KILN_RESTRICT B, float* KILN_RESTRICT C, int64_t ldc, int acc, Pf* pf) {
  (void)pf, (void)lda; /* packed A only, no prefetching */
  float c[MR][NR];
  for (int i = 0; i < MR; i++)
    for (int j = 0; j < NR; j++) c[i][j] = 0.0f;
  for (int64_t k = 0; k < kc; k++) {
    for (int i = 0; i < MR; i++) {
      const float a = A[i];
      for (int j = 0; j < NR; j++) c[i][j] += a * B[j];
    }
    A += MRS;
    B += NR;
  }
  if (acc) {
    for (int i = 0; i < MR; i++)
      for (int j = 0; j < NR; j++) C[i * ldc + j] += c[i][j];
  } else {
    for (int i = 0; i < MR; i++)
      for (int j = 0; j < NR; j++) C[i * ldc + j] = c[i][j];
  }
}

#endif

#if !KILN_GEMM_AVX512
typedef void (*kern_fn)(int64_t kc, const float* A, int64_t lda, const float* B, float* C,
                        int64_t ldc, int acc, Pf* pf);
#define KILN_DIRECT_A 0
static inline kern_fn kern_for(int64_t mr, int64_t nr, int64_t* kr, int64_t* kn) {
  (void)mr, (void)nr;
  *kr = MR;
  *kn = NR;
  return kern;
}
#define KILN_EVEN_PANELS 0
#endif

/* ---- the core --------------------------------------------------------------------------------
 *
 * Loop order ("B-stationary", for the short and wide products that models make):
 *
 *   for each row chunk (usually all rows: up to ~1 MiB of packed A)
 *     pack A for the chunk (all of K when it fits, else per K block)
 *     for each NR-column panel of B (outer) and K block (inner), or K block outer when A is
 *     packed per block:
 *       pack the B panel (kc x NR: stays in L1) -- its source was prefetched into L2 by the
 *       kernels of the previous panel
 *       for each row panel of the chunk: micro-kernel, C (=, +=) A_panel * B_panel
 *       finished columns: epilogue (rows of the chunk x >= EPI_COLS columns)
 *
 * Every B element is packed once per row chunk (once for M up to ~256-512), each packed B panel
 * serves all the rows at once, and the packing reads memory that is already in cache. */

/* K blocks: nb = ceil(K / KC_MAX) blocks of kc = ceil(K / nb) (the last one shorter). */
static inline int64_t k_block(int64_t K) {
  if (K <= KC_MAX) return K;
  int64_t nb = (K + KC_MAX - 1) / KC_MAX;
  int64_t kc = (K + nb - 1) / nb;
  return (kc + 7) & ~(int64_t)7;
}

/* Whether output columns [j0, j0 + w) are contiguous (a tile can be stored straight from the
 * registers), with the offset of column j0 in *coff. */
static inline int cols_contiguous(const KilnOut* out, int64_t j0, int64_t w, int64_t* coff) {
  if (!out->col.table) {
    *coff = j0;
    return out->col.stride == 1;
  }
  const int64_t* t = out->col.table + j0;
  *coff = t[0];
  for (int64_t j = 1; j < w; j++)
    if (t[j] != *coff + j) return 0;
  return 1;
}

static void store_tile(const KilnOut* out, int64_t r, int64_t c, int64_t mr, int64_t nr,
                       const float* t, int acc) {
  int64_t coff[NR];
  for (int64_t j = 0; j < nr; j++) coff[j] = axis_off(&out->col, c + j);
  for (int64_t i = 0; i < mr; i++) {
    float* row = out->C + axis_off(&out->row, r + i);
    const float* ti = t + i * NR;
    if (acc)
      for (int64_t j = 0; j < nr; j++) row[coff[j]] += ti[j];
    else
      for (int64_t j = 0; j < nr; j++) row[coff[j]] = ti[j];
  }
}

/* The source lines a block's pack will read, for prefetching (axis sources with strides only:
 * tables are conv images, which are in cache). `slots` prefetch slots are available. */
static void block_prefetch(const KilnSrc* s, int64_t k0, int64_t kc, int64_t j0, int64_t w,
                           int64_t slots, Pf* pf) {
  pf->left = 0;
  pf->line = 0;
  pf->every = 1;
  pf->cnt = 1;
  pf->lpr = 1;
  pf->stride = 0;
  pf->p = NULL;
  if (s->pack != kiln_pack_axis || s->j.table || s->k.table || w <= 0 || kc <= 0) return;
  const char* base = (const char*)(s->base + j0 * s->j.stride + k0 * s->k.stride);
  int64_t rows, run, stride;
  if (s->j.stride == 1) { /* rows along k, w floats each */
    rows = kc, run = w, stride = s->k.stride;
  } else if (s->k.stride == 1) { /* rows along j, kc floats each */
    rows = w, run = kc, stride = s->j.stride;
  } else {
    return;
  }
  const int64_t lpr = (run * 4 + 63) / 64 + ((stride * 4) % 64 != 0 || ((uintptr_t)base & 63));
  const int64_t lines = rows * lpr;
  int64_t every = lines > 0 ? slots / lines : 1;
  if (every < 1) every = 1;
  pf->p = (const char*)((uintptr_t)base & ~(uintptr_t)63);
  pf->stride = stride * 4;
  pf->lpr = (int)lpr;
  pf->every = (int)every;
  pf->left = lines;
}

/* Packs the full NR-wide panels of a block from rows with contiguous columns (B row-major),
 * row by row: each source row's run of nq * NR floats is read once (one TLB miss per row). */
static void pack_block_rows(const float* src, int64_t ks, int64_t kc, int64_t nq, float* out) {
  for (int64_t k = 0; k < kc; k++, src += ks) {
    float* o = out + k * NR;
    for (int64_t q = 0; q < nq; q++, o += kc * NR) {
#if KILN_GEMM_AVX512
      _mm512_store_ps(o, _mm512_loadu_ps(src + q * NR));
      _mm512_store_ps(o + 16, _mm512_loadu_ps(src + q * NR + 16));
#else
      memcpy(o, src + q * NR, NR * sizeof(float));
#endif
    }
  }
}

#ifndef A_FULL_FLOATS
#define A_FULL_FLOATS ((int64_t)1 << 18) /* packed A for all of K: 1 MiB */
#endif
#ifndef A_BLOCK_FLOATS
#define A_BLOCK_FLOATS ((int64_t)1 << 17) /* packed A for one K block: 512 KiB */
#endif
#ifndef EPI_COLS
#define EPI_COLS 128 /* finished columns are handed to the epilogue in groups of about this */
#endif
#ifndef BLOCK_PANELS
#define BLOCK_PANELS 4 /* B panels packed together (one pass over each source row) */
#endif
#define MAX_PANELS 64

typedef struct Core {
  const KilnSrc *A, *B;
  const KilnOut* out;
  int64_t K, KC, nkb;
  int64_t c0, c1;
  /* the row chunk */
  int64_t m0, mc, np;
  int64_t pm[MAX_PANELS + 1]; /* panel i: rows [pm[i], pm[i+1]) */
  int64_t ldc[MAX_PANELS], roff[MAX_PANELS];
  int rows_ok[MAX_PANELS];
  int a_full, b_rows;
  float *Abuf, *Bbuf, *tmp;
  Pf pf;
} Core;

/* row panels of [m0, m0 + mc) */
static void core_panels(Core* c) {
  const int64_t mc = c->mc;
  int64_t np = (mc + MR - 1) / MR;
#if KILN_EVEN_PANELS
  const int64_t units = (mc + 1) / 2;
  for (int64_t i = 0; i <= np; i++) {
    int64_t v = 2 * ((units * i) / np);
    c->pm[i] = c->m0 + (v < mc ? v : mc);
  }
#else
  for (int64_t i = 0; i <= np; i++) c->pm[i] = c->m0 + (i * MR < mc ? i * MR : mc);
#endif
  c->np = np;
  const KilnOut* out = c->out;
  for (int64_t i = 0; i < np; i++) {
    const int64_t m0 = c->pm[i], mr = c->pm[i + 1] - m0;
    int64_t kr, kn;
    (void)kern_for(mr, NR, &kr, &kn);
    int ok = mr == kr;
    int64_t ldc = 0;
    if (ok) {
      if (!out->row.table) {
        ldc = out->row.stride;
      } else {
        const int64_t* t = out->row.table + m0;
        ldc = mr > 1 ? t[1] - t[0] : 0;
        for (int64_t q = 2; q < mr && ok; q++) ok = t[q] - t[0] == q * ldc;
      }
    }
    c->rows_ok[i] = ok;
    c->ldc[i] = ldc;
    c->roff[i] = axis_off(&out->row, m0);
  }
}

static inline float* core_apanel(const Core* c, int64_t kb, int64_t i) {
  return c->Abuf + ((c->a_full ? kb * c->np : 0) + i) * MRS * c->KC;
}

static void core_pack_a(Core* c, int64_t kb) {
  const int64_t k0 = kb * c->KC, kc = c->K - k0 < c->KC ? c->K - k0 : c->KC;
  for (int64_t i = 0; i < c->np; i++)
    c->A->pack(c->A, k0, kc, c->pm[i], c->pm[i + 1] - c->pm[i], MRS, core_apanel(c, kb, i));
}

#define BLOCK_W (BLOCK_PANELS * NR)

/* Packs B block (kb, columns from j0), sets up the prefetch of block (nkb_, nj0) (nj0 < 0:
 * none) and runs the row panels on each of its panels. */
static void core_block(Core* c, int64_t kb, int64_t j0, int64_t nkb_, int64_t nj0) {
  const int64_t k0 = kb * c->KC, kc = c->K - k0 < c->KC ? c->K - k0 : c->KC;
  const int64_t bw = c->c1 - j0 < BLOCK_W ? c->c1 - j0 : BLOCK_W;
  const int64_t nq = (bw + NR - 1) / NR;
  const int acc = kb > 0;
  const KilnSrc* B = c->B;
  int64_t q0 = 0;
  if (c->b_rows) {
    q0 = bw / NR;
    pack_block_rows(B->base + j0 + k0 * B->k.stride, B->k.stride, kc, q0, c->Bbuf);
  }
  for (int64_t q = q0; q < nq; q++) {
    const int64_t jq = j0 + q * NR, w = c->c1 - jq < NR ? c->c1 - jq : NR;
    B->pack(B, k0, kc, jq, w, NR, c->Bbuf + q * kc * NR);
  }
  if (nj0 >= 0) {
    const int64_t nk0 = nkb_ * c->KC, nkc = c->K - nk0 < c->KC ? c->K - nk0 : c->KC;
    const int64_t nbw = c->c1 - nj0 < BLOCK_W ? c->c1 - nj0 : BLOCK_W;
    block_prefetch(B, nk0, nkc, nj0, nbw, nq * c->np * (kc / 2), &c->pf);
  } else {
    c->pf.left = 0;
  }
  const KilnOut* out = c->out;
  for (int64_t q = 0; q < nq; q++) {
    const int64_t jq = j0 + q * NR, w = c->c1 - jq < NR ? c->c1 - jq : NR;
    const float* Bp = c->Bbuf + q * kc * NR;
    int64_t coff = 0;
    const int col_ok = cols_contiguous(out, jq, w, &coff);
    for (int64_t i = 0; i < c->np; i++) {
      const int64_t m0 = c->pm[i], mr = c->pm[i + 1] - m0;
      int64_t kr, kn;
      const kern_fn kf = kern_for(mr, w, &kr, &kn);
      const float* Ap = core_apanel(c, kb, i);
      if (c->rows_ok[i] && col_ok && w == kn) {
        kf(kc, Ap, 0, Bp, out->C + c->roff[i] + coff, c->ldc[i], acc, &c->pf);
      } else {
        kf(kc, Ap, 0, Bp, c->tmp, NR, 0, &c->pf);
        store_tile(out, m0, jq, mr, w, c->tmp, acc);
      }
    }
  }
}

#ifndef DIRECT_COLS
#define DIRECT_COLS BLOCK_W /* at most this many columns: A read in place (see core_direct_a) */
#endif

#if KILN_DIRECT_A
/* Few columns (a convolution's late layers, attention P V): A is used only ceil(N / NR) times,
 * so packing it would cost as much as the FMAs. A's rows are read in place instead (contiguous
 * along k) and prefetched a row panel ahead; B (all its columns) is packed once. When B for all
 * of K fits in L2, each row panel runs all K blocks in turn (its rows are then one contiguous
 * stream); else K blocks are outer. Same FMA chains as the packed path. */
#ifndef DIRECT_B_FLOATS
#define DIRECT_B_FLOATS ((int64_t)160 << 10) /* B packed for all of K: 640 KiB */
#endif

/* prefetch plan for rows [m0, m0 + rows) of A, contraction [k0, k0 + kc) */
static void direct_prefetch(const Core* c, int64_t m0, int64_t rows, int64_t k0, int64_t kc,
                            int64_t slots, Pf* pf) {
  const int64_t lda = c->A->j.stride;
  const char* base = (const char*)(c->A->base + m0 * lda + k0);
  pf->line = 0, pf->cnt = 1;
  if (lda == kc) { /* one contiguous run */
    pf->lpr = 1, pf->stride = 64;
    pf->left = (rows * kc * 4 + 63) / 64 + 1;
  } else {
    pf->lpr = (int)((kc * 4 + 63) / 64 + 1), pf->stride = lda * 4;
    pf->left = rows * pf->lpr;
  }
  pf->p = (const char*)((uintptr_t)base & ~(uintptr_t)63);
  pf->every = (int)(slots / pf->left > 1 ? slots / pf->left : 1);
}

/* row panel i, K block kb, against the packed B of that block at Bk */
static void direct_panel(Core* c, int64_t i, int64_t kb, const float* Bk) {
  const KilnSrc* A = c->A;
  const KilnOut* out = c->out;
  const int64_t lda = A->j.stride, k0 = kb * c->KC, kc = c->K - k0 < c->KC ? c->K - k0 : c->KC;
  const int64_t m0 = c->pm[i], mr = c->pm[i + 1] - m0;
  const int acc = kb > 0;
  int64_t kr, kn;
  (void)kern_for(mr, NR, &kr, &kn);
  const int direct = kr == mr; /* an odd last panel would read a row past A: packed */
  const float* Ap = A->base + m0 * lda + k0;
  if (!direct) {
    A->pack(A, k0, kc, m0, mr, MRS, c->Abuf);
    Ap = c->Abuf;
  }
  const int64_t nq = (c->c1 - c->c0 + NR - 1) / NR;
  for (int64_t q = 0; q < nq; q++) {
    const int64_t jq = c->c0 + q * NR, w = c->c1 - jq < NR ? c->c1 - jq : NR;
    const float* Bp = Bk + q * kc * NR;
    int64_t coff = 0;
    const int col_ok = cols_contiguous(out, jq, w, &coff);
    const kern_fn kf = kern_for_a(direct, mr, w, &kr, &kn);
    if (c->rows_ok[i] && col_ok && w == kn) {
      kf(kc, Ap, lda, Bp, out->C + c->roff[i] + coff, c->ldc[i], acc, &c->pf);
    } else {
      kf(kc, Ap, lda, Bp, c->tmp, NR, 0, &c->pf);
      store_tile(out, m0, jq, mr, w, c->tmp, acc);
    }
  }
}

static void core_direct_a(Core* c, int panel_major, kiln_tile_fn tile_done, void* tile_ctx) {
  const int64_t nq = (c->c1 - c->c0 + NR - 1) / NR;
  const int64_t bstride = c->KC * nq * NR; /* floats per K block of packed B */
  for (int64_t kb = 0; kb < c->nkb; kb++) {
    if (!panel_major && kb > 0) break;
    for (int64_t b = panel_major ? kb : 0; b <= (panel_major ? kb : 0); b++) {
      const int64_t k0 = b * c->KC, kc = c->K - k0 < c->KC ? c->K - k0 : c->KC;
      for (int64_t q = 0; q < nq; q++) {
        const int64_t jq = c->c0 + q * NR, w = c->c1 - jq < NR ? c->c1 - jq : NR;
        c->B->pack(c->B, k0, kc, jq, w, NR, c->Bbuf + b * bstride + q * kc * NR);
      }
    }
  }
  int64_t epi_from = c->m0;
  if (panel_major) {
    /* B for all of K is packed: each row panel runs its whole contraction */
    for (int64_t i = 0; i < c->np; i++) {
      if (i + 1 < c->np)
        direct_prefetch(c, c->pm[i + 1], c->pm[i + 2] - c->pm[i + 1], 0, c->K,
                        c->nkb * nq * (c->KC / 2), &c->pf);
      else
        c->pf.left = 0;
      for (int64_t kb = 0; kb < c->nkb; kb++) direct_panel(c, i, kb, c->Bbuf + kb * bstride);
      const int64_t me = c->pm[i + 1];
      if (tile_done && (me - epi_from >= 64 || i + 1 == c->np)) {
        tile_done(tile_ctx, epi_from, me, c->c0, c->c1);
        epi_from = me;
      }
    }
    return;
  }
  for (int64_t kb = 0; kb < c->nkb; kb++) {
    const int64_t k0 = kb * c->KC, kc = c->K - k0 < c->KC ? c->K - k0 : c->KC;
    if (kb > 0)
      for (int64_t q = 0; q < nq; q++) {
        const int64_t jq = c->c0 + q * NR, w = c->c1 - jq < NR ? c->c1 - jq : NR;
        c->B->pack(c->B, k0, kc, jq, w, NR, c->Bbuf + q * kc * NR);
      }
    for (int64_t i = 0; i < c->np; i++) {
      /* prefetch the rows of the next panel (or of the first, for the next K block) */
      int64_t ni = i + 1, nk0 = k0;
      if (ni == c->np) ni = 0, nk0 = k0 + c->KC;
      if (nk0 < c->K)
        direct_prefetch(c, c->pm[ni], c->pm[ni + 1] - c->pm[ni], nk0,
                        c->K - nk0 < c->KC ? c->K - nk0 : c->KC, nq * (kc / 2), &c->pf);
      else
        c->pf.left = 0;
      direct_panel(c, i, kb, c->Bbuf);
      const int64_t me = c->pm[i + 1];
      if (kb + 1 == c->nkb && tile_done && (me - epi_from >= 64 || i + 1 == c->np)) {
        tile_done(tile_ctx, epi_from, me, c->c0, c->c1);
        epi_from = me;
      }
    }
  }
}
#endif

/* ---- the large core (A-stationary, GotoBLAS order) ----------------------------------------------
 * For products with many rows and columns (square matrices of 512 and up), where packed A for
 * all rows does not fit in L2: B is packed in blocks of ~1 MiB (kept in L2) and each MR-row panel
 * of A is packed once per block and streamed through the whole block (B-stationary re-reads B
 * once per row chunk: 1024^3 measured 142 against 150-160 GFLOP/s here). The K blocks are
 * k_block's, as in every core: a task of a split call may take either core, and an element's
 * value must not depend on which (the thread-count determinism of test_gemm). */
#ifndef B_BLOCK_BYTES
#define B_BLOCK_BYTES (1 << 20)
#endif
#define EPI_ROWS 64
#define LARGE_ROWS 512 /* rows, columns and depth at least this: the large core */

static void core_large(const KilnSrc* A, const KilnSrc* B, const KilnOut* out, int64_t K,
                       int64_t r0, int64_t r1, int64_t c0, int64_t c1, kiln_tile_fn tile_done,
                       void* tile_ctx) {
  const int64_t KC = k_block(K);
  const int64_t ncols = c1 - c0;
  int64_t nc_max = (B_BLOCK_BYTES / (int64_t)sizeof(float) / KC) / NR * NR;
  if (nc_max < 4 * NR) nc_max = 4 * NR;
  const int64_t NC = ncols < nc_max ? ncols : nc_max;
  const int64_t npan_max = (NC + NR - 1) / NR;
  float* Bbuf = kiln_scratch(0, (size_t)(KC * NR * npan_max));
  float* Abuf = kiln_scratch(1, (size_t)(KC * MRS + 64));
  float* tmp = kiln_scratch(2, (size_t)(MR * NR));
  if (!Bbuf || !Abuf || !tmp) abort();
  Pf pf;
  pf.left = 0, pf.p = NULL, pf.stride = 0, pf.lpr = 1, pf.line = 0, pf.every = 1, pf.cnt = 1;
  for (int64_t n0 = c0; n0 < c1; n0 += NC) {
    const int64_t nc = c1 - n0 < NC ? c1 - n0 : NC;
    const int64_t npan = (nc + NR - 1) / NR;
    for (int64_t k0 = 0; k0 < K; k0 += KC) {
      const int64_t kc = K - k0 < KC ? K - k0 : KC;
      const int acc = k0 > 0;
      const int last = k0 + kc >= K;
      for (int64_t p = 0; p < npan; p++) {
        const int64_t j0 = n0 + p * NR;
        const int64_t w = c1 - j0 < NR ? c1 - j0 : NR;
        B->pack(B, k0, kc, j0, w, NR, Bbuf + p * kc * NR);
      }
      int64_t epi_from = r0;
      for (int64_t m0 = r0; m0 < r1; m0 += MR) {
        const int64_t mr = r1 - m0 < MR ? r1 - m0 : MR;
        A->pack(A, k0, kc, m0, mr, MRS, Abuf);
        /* rows of a full tile at a uniform distance: stored straight from the registers */
        int64_t ldc = 0, kr_rows, kn_unused;
        (void)kern_for(mr, NR, &kr_rows, &kn_unused);
        int rows_ok = mr == kr_rows;
        const int64_t roff = axis_off(&out->row, m0);
        if (rows_ok) {
          if (!out->row.table) {
            ldc = out->row.stride;
          } else {
            const int64_t* t = out->row.table + m0;
            ldc = mr > 1 ? t[1] - t[0] : 0;
            for (int64_t i = 2; i < mr && rows_ok; i++) rows_ok = t[i] - t[0] == i * ldc;
          }
        }
        for (int64_t p = 0; p < npan; p++) {
          const int64_t j0 = n0 + p * NR;
          const int64_t nr = c1 - j0 < NR ? c1 - j0 : NR;
          const float* Bp = Bbuf + p * kc * NR;
          int64_t kr, kn;
          const kern_fn kf = kern_for(mr, nr, &kr, &kn);
          int64_t coff = 0;
          const int direct = rows_ok && nr == kn && cols_contiguous(out, j0, nr, &coff);
          if (direct) {
            kf(kc, Abuf, 0, Bp, out->C + roff + coff, ldc, acc, &pf);
          } else {
            kf(kc, Abuf, 0, Bp, tmp, NR, 0, &pf);
            store_tile(out, m0, j0, mr, nr, tmp, acc);
          }
        }
        if (last && tile_done && (m0 + mr - epi_from >= EPI_ROWS || m0 + mr >= r1)) {
          tile_done(tile_ctx, epi_from, m0 + mr, n0, n0 + nc);
          epi_from = m0 + mr;
        }
      }
    }
  }
}

void kiln_gemm_core(const KilnSrc* A, const KilnSrc* B, const KilnOut* out, int64_t K,
                    int64_t r0, int64_t r1, int64_t c0, int64_t c1, kiln_tile_fn tile_done,
                    void* tile_ctx) {
  if (r1 <= r0 || c1 <= c0) return;
  if (K <= 0) {
    for (int64_t r = r0; r < r1; r++) {
      float* row = out->C + axis_off(&out->row, r);
      if (axis_unit(&out->col))
        memset(row + c0, 0, (size_t)(c1 - c0) * sizeof(float));
      else
        for (int64_t c = c0; c < c1; c++) row[axis_off(&out->col, c)] = 0.0f;
    }
    if (tile_done) tile_done(tile_ctx, r0, r1, c0, c1);
    return;
  }
  Core c;
  c.A = A, c.B = B, c.out = out, c.K = K, c.c0 = c0, c.c1 = c1;
  c.KC = k_block(K);
  c.nkb = (K + c.KC - 1) / c.KC;
  c.b_rows = B->pack == kiln_pack_axis && axis_unit(&B->j) && !B->k.table;
  const int64_t rows = r1 - r0;
#if KILN_DIRECT_A
  if (A->pack == kiln_pack_axis && !A->j.table && !A->k.table && A->k.stride == 1 &&
      A->j.stride >= K && c1 - c0 <= DIRECT_COLS && rows >= 2 * MR) {
    const int64_t bw = (c1 - c0 + NR - 1) / NR * NR;
    const int panel_major = c.nkb * c.KC * bw <= DIRECT_B_FLOATS;
    c.Bbuf = kiln_scratch(0, (size_t)(c.KC * bw * (panel_major ? c.nkb : 1)));
    c.Abuf = kiln_scratch(1, (size_t)(MRS * c.KC + 64));
    c.tmp = kiln_scratch(2, (size_t)(MR * NR));
    if (!c.Abuf || !c.Bbuf || !c.tmp) abort();
    c.a_full = 0;
    c.pf.left = 0;
    for (c.m0 = r0; c.m0 < r1; c.m0 += MAX_PANELS * MR) {
      c.mc = r1 - c.m0 < MAX_PANELS * MR ? r1 - c.m0 : MAX_PANELS * MR;
      core_panels(&c);
      core_direct_a(&c, panel_major, tile_done, tile_ctx);
    }
    return;
  }
#endif
  if (rows >= LARGE_ROWS && c1 - c0 >= LARGE_ROWS && K >= LARGE_ROWS) {
    core_large(A, B, out, K, r0, r1, c0, c1, tile_done, tile_ctx);
    return;
  }
  /* row chunks: all rows with A packed for all of K when that fits, else balanced chunks of
   * up to ~512 KiB of packed A per K block */
  int64_t MC;
  int a_full;
  if (rows * K <= A_FULL_FLOATS && rows <= MAX_PANELS * MR) {
    MC = rows, a_full = 1;
  } else {
    int64_t mc_max = A_BLOCK_FLOATS / c.KC;
    if (mc_max > 32 * MR) mc_max = 32 * MR;
    if (mc_max < MR) mc_max = MR;
    const int64_t nmc = (rows + mc_max - 1) / mc_max;
    MC = (rows + nmc - 1) / nmc;
    MC = (MC + MR - 1) / MR * MR;
    a_full = MC * K <= A_FULL_FLOATS;
  }
  c.a_full = a_full;
  const int64_t np_max = (MC + MR - 1) / MR;
  c.Abuf = kiln_scratch(1, (size_t)(np_max * MRS * c.KC * (a_full ? c.nkb : 1) + 64));
  c.Bbuf = kiln_scratch(0, (size_t)(c.KC * BLOCK_W));
  c.tmp = kiln_scratch(2, (size_t)(MR * NR));
  if (!c.Abuf || !c.Bbuf || !c.tmp) abort();
  c.pf.left = 0;
  const int64_t nblk = (c1 - c0 + BLOCK_W - 1) / BLOCK_W;
  for (c.m0 = r0; c.m0 < r1; c.m0 += MC) {
    c.mc = r1 - c.m0 < MC ? r1 - c.m0 : MC;
    core_panels(&c);
    const int last_chunk = c.m0 + MC >= r1;
    int64_t epi_from = c0;
    if (a_full) {
      for (int64_t kb = 0; kb < c.nkb; kb++) core_pack_a(&c, kb);
      /* block outer, K block inner: a block's columns are final after its last K block */
      for (int64_t b = 0; b < nblk; b++) {
        const int64_t j0 = c0 + b * BLOCK_W;
        for (int64_t kb = 0; kb < c.nkb; kb++) {
          int64_t nkb_ = kb + 1, nj0 = j0;
          if (nkb_ == c.nkb) nkb_ = 0, nj0 = b + 1 < nblk ? j0 + BLOCK_W : (last_chunk ? -1 : c0);
          core_block(&c, kb, j0, nkb_, nj0);
        }
        const int64_t je = j0 + BLOCK_W < c1 ? j0 + BLOCK_W : c1;
        if (tile_done && (je - epi_from >= EPI_COLS || je >= c1)) {
          tile_done(tile_ctx, c.m0, c.m0 + c.mc, epi_from, je);
          epi_from = je;
        }
      }
    } else {
      /* K block outer: B is read once per row chunk, C accumulates over the blocks */
      for (int64_t kb = 0; kb < c.nkb; kb++) {
        core_pack_a(&c, kb);
        const int lastk = kb + 1 == c.nkb;
        for (int64_t b = 0; b < nblk; b++) {
          const int64_t j0 = c0 + b * BLOCK_W;
          int64_t nkb_ = kb, nj0 = j0 + BLOCK_W;
          if (b + 1 == nblk) nkb_ = kb + 1, nj0 = c0;
          if (nkb_ == c.nkb) nkb_ = 0, nj0 = last_chunk ? -1 : c0;
          core_block(&c, kb, j0, nkb_, nj0);
          const int64_t je = j0 + BLOCK_W < c1 ? j0 + BLOCK_W : c1;
          if (lastk && tile_done && (je - epi_from >= EPI_COLS || je >= c1)) {
            tile_done(tile_ctx, c.m0, c.m0 + c.mc, epi_from, je);
            epi_from = je;
          }
        }
      }
    }
  }
}

/* ---- B transposed (x @ W^T with W [N][K] row-major: the LM head) ---------------------------------
 * Roles swapped: C^T = W X^T. The big operand W is never packed: the kernel broadcasts its
 * elements straight from 14 consecutive rows (contiguous along k, prefetched a group ahead as
 * one contiguous run), X^T is packed once per call into NR-column panels (m), and each 14 x NR
 * tile of C^T is transposed in registers on its way to C. The K blocking and the per-element
 * FMA chains are those of the packed core (blocks summed into the tile in order), so the values
 * are the same as the core's. AVX-512 only. */
#if KILN_GEMM_AVX512
#define DIRECT_ROWS 14

/* o[0, n) = src[0, n) */
static inline void copy_row(float* KILN_RESTRICT o, const float* KILN_RESTRICT src, int64_t n) {
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) _mm512_storeu_ps(o + j, _mm512_loadu_ps(src + j));
  if (j < n) {
    const __mmask16 m = (__mmask16)((1u << (n - j)) - 1);
    _mm512_mask_storeu_ps(o + j, m, _mm512_maskz_loadu_ps(m, src + j));
  }
}

/* S[(m0 + j) * lds + i] = t[i * NR + j] for i < nr (<= 16), j < mw (<= NR): two 16 x 16
 * in-register transposes */
static void store_transposed(const float* t, int64_t nr, int64_t mw, float* S, int64_t lds) {
  const __mmask16 m = (__mmask16)((1u << nr) - 1);
  for (int64_t h = 0; h < mw; h += 16) {
    __m512 r[16];
    for (int i = 0; i < 16; i++) r[i] = i < nr ? _mm512_load_ps(t + i * NR + h) : _mm512_setzero_ps();
    tr16x16(r);
    const int64_t n = mw - h < 16 ? mw - h : 16;
    for (int64_t j = 0; j < n; j++) _mm512_mask_storeu_ps(S + (h + j) * lds, m, r[j]);
  }
}

/* column groups staged (transposed, in cache) before C's rows are written contiguously */
#define DIRECT_STAGE (16 * DIRECT_ROWS)

/* C rows [0, m) (row stride ldc), columns [n0, n1): C[r][n] = sum_k X(r, k) W[n * lda + k].
 * Calls tile_done on finished column groups. */
static void gemm_direct_bt(const KilnSrc* X, int64_t m, const float* W, int64_t lda, int64_t K,
                           float* C, int64_t ldc, int64_t n0, int64_t n1, kiln_tile_fn tile_done,
                           void* tile_ctx) {
  const int64_t KC = k_block(K), nkb = (K + KC - 1) / KC;
  const int64_t nmp = (m + NR - 1) / NR;
  /* X^T panels: [kb][q] of KC x NR */
  float* xp = kiln_scratch(1, (size_t)(nkb * nmp * KC * NR + 64));
  float* tmp = kiln_scratch(2, (size_t)(nmp * DIRECT_ROWS * NR + DIRECT_ROWS * K +
                                        nmp * NR * DIRECT_STAGE + 64));
  if (!xp || !tmp) abort();
  float* pad = tmp + nmp * DIRECT_ROWS * NR;
  float* stage = pad + DIRECT_ROWS * K;
  for (int64_t kb = 0; kb < nkb; kb++) {
    const int64_t k0 = kb * KC, kc = K - k0 < KC ? K - k0 : KC;
    for (int64_t q = 0; q < nmp; q++) {
      const int64_t w = m - q * NR < NR ? m - q * NR : NR;
      X->pack(X, k0, kc, q * NR, w, NR, xp + (kb * nmp + q) * KC * NR);
    }
  }
  Pf pf;
  memset(&pf, 0, sizeof pf);
  int64_t s0 = n0; /* first column of the stage */
  for (int64_t g0 = n0; g0 < n1; g0 += DIRECT_ROWS) {
    const int64_t nr = n1 - g0 < DIRECT_ROWS ? n1 - g0 : DIRECT_ROWS;
    const float* A = W + g0 * lda;
    int64_t la = lda;
    if (nr < DIRECT_ROWS) { /* last group: rows copied into a zero-padded block */
      memset(pad, 0, (size_t)(DIRECT_ROWS * K) * sizeof(float));
      for (int64_t i = 0; i < nr; i++) memcpy(pad + i * K, A + i * lda, (size_t)K * sizeof(float));
      A = pad, la = K;
    }
    /* prefetch the next group's rows */
    const int64_t ng = g0 + DIRECT_ROWS;
    if (ng < n1) {
      const int64_t rows = n1 - ng < DIRECT_ROWS ? n1 - ng : DIRECT_ROWS;
      const char* base = (const char*)(W + ng * lda);
      int64_t lpr, stride;
      if (lda == K) { /* one contiguous run */
        lpr = 1, stride = 64;
        pf.left = (rows * K * 4 + 63) / 64 + 1;
      } else {
        lpr = (K * 4 + 63) / 64 + 1, stride = lda * 4;
        pf.left = rows * lpr;
      }
      pf.p = (const char*)((uintptr_t)base & ~(uintptr_t)63);
      pf.stride = stride, pf.lpr = (int)lpr, pf.line = 0, pf.cnt = 1;
      const int64_t slots = nkb * nmp * (KC / 2);
      pf.every = (int)(slots / pf.left > 1 ? slots / pf.left : 1);
    } else {
      pf.left = 0;
    }
    for (int64_t kb = 0; kb < nkb; kb++) {
      const int64_t k0 = kb * KC, kc = K - k0 < KC ? K - k0 : KC;
      for (int64_t q = 0; q < nmp; q++) {
        const int64_t w = m - q * NR < NR ? m - q * NR : NR;
        const float* Bp = xp + (kb * nmp + q) * KC * NR;
        float* t = tmp + q * DIRECT_ROWS * NR;
        if (w > 16)
          kern_114x32(kc, A + k0, la, Bp, t, NR, kb > 0, &pf);
        else
          kern_114x16(kc, A + k0, la, Bp, t, NR, kb > 0, &pf);
      }
    }
    for (int64_t q = 0; q < nmp; q++) {
      const int64_t w = m - q * NR < NR ? m - q * NR : NR;
      store_transposed(tmp + q * DIRECT_ROWS * NR, nr, w, stage + q * NR * DIRECT_STAGE + (g0 - s0),
                       DIRECT_STAGE);
    }
    const int64_t ge = g0 + nr;
    if (ge - s0 + DIRECT_ROWS > DIRECT_STAGE || ge >= n1) { /* flush the stage into C */
      const int64_t sw = ge - s0;
      for (int64_t r = 0; r < m; r++) copy_row(C + r * ldc + s0, stage + r * DIRECT_STAGE, sw);
      if (tile_done) tile_done(tile_ctx, 0, m, s0, ge);
      s0 = ge;
    }
  }
}
#endif

/* ---- GEMV (one row or one column) --------------------------------------------------------------
 * y[j] = sum_k x[k] * M(k, j), j in [j0, j1):
 *   axpy form: M(k, j) = rows[k][j] (j contiguous), rows from koff;
 *   dot form:  M(k, j) = cols[j][k] (k contiguous), cols from joff.
 * Per element: the axpy form is an FMA chain in k order from 0; the dot form sums lanes of a
 * fixed vector width and reduces them in a fixed order. Either way an element's value does not
 * depend on j0, j1. */

#define GEMV_JB 2048

static void gemv_axpy(const float* x, const float* base, const KilnAxis* kax, int64_t K,
                      int64_t j0, int64_t j1, float* y) {
  for (int64_t jb = j0; jb < j1; jb += GEMV_JB) {
    const int64_t n = j1 - jb < GEMV_JB ? j1 - jb : GEMV_JB;
    float* yb = y + jb;
    memset(yb, 0, (size_t)n * sizeof(float));
    int64_t k = 0;
    for (; k + 4 <= K; k += 4) {
      const float* r0 = base + axis_off(kax, k) + jb;
      const float* r1 = base + axis_off(kax, k + 1) + jb;
      const float* r2 = base + axis_off(kax, k + 2) + jb;
      const float* r3 = base + axis_off(kax, k + 3) + jb;
      const float x0 = x[k], x1 = x[k + 1], x2 = x[k + 2], x3 = x[k + 3];
#if KILN_GEMM_AVX512
      const __m512 v0 = _mm512_set1_ps(x0), v1 = _mm512_set1_ps(x1);
      const __m512 v2 = _mm512_set1_ps(x2), v3 = _mm512_set1_ps(x3);
      int64_t j = 0;
      for (; j + 32 <= n; j += 32) {
        __m512 a = _mm512_loadu_ps(yb + j), b = _mm512_loadu_ps(yb + j + 16);
        a = _mm512_fmadd_ps(v0, _mm512_loadu_ps(r0 + j), a);
        b = _mm512_fmadd_ps(v0, _mm512_loadu_ps(r0 + j + 16), b);
        a = _mm512_fmadd_ps(v1, _mm512_loadu_ps(r1 + j), a);
        b = _mm512_fmadd_ps(v1, _mm512_loadu_ps(r1 + j + 16), b);
        a = _mm512_fmadd_ps(v2, _mm512_loadu_ps(r2 + j), a);
        b = _mm512_fmadd_ps(v2, _mm512_loadu_ps(r2 + j + 16), b);
        a = _mm512_fmadd_ps(v3, _mm512_loadu_ps(r3 + j), a);
        b = _mm512_fmadd_ps(v3, _mm512_loadu_ps(r3 + j + 16), b);
        _mm512_storeu_ps(yb + j, a);
        _mm512_storeu_ps(yb + j + 16, b);
      }
      for (; j < n; j += 16) {
        const int64_t rem = n - j < 16 ? n - j : 16;
        const __mmask16 m = (__mmask16)((1u << rem) - 1);
        __m512 a = _mm512_maskz_loadu_ps(m, yb + j);
        a = _mm512_fmadd_ps(v0, _mm512_maskz_loadu_ps(m, r0 + j), a);
        a = _mm512_fmadd_ps(v1, _mm512_maskz_loadu_ps(m, r1 + j), a);
        a = _mm512_fmadd_ps(v2, _mm512_maskz_loadu_ps(m, r2 + j), a);
        a = _mm512_fmadd_ps(v3, _mm512_maskz_loadu_ps(m, r3 + j), a);
        _mm512_mask_storeu_ps(yb + j, m, a);
      }
#else
      for (int64_t j = 0; j < n; j++) {
        float a = yb[j];
        a += x0 * r0[j];
        a += x1 * r1[j];
        a += x2 * r2[j];
        a += x3 * r3[j];
        yb[j] = a;
      }
#endif
    }
    for (; k < K; k++) {
      const float* r0 = base + axis_off(kax, k) + jb;
      const float x0 = x[k];
#if KILN_GEMM_AVX512
      const __m512 v0 = _mm512_set1_ps(x0);
      for (int64_t j = 0; j < n; j += 16) {
        const int64_t rem = n - j < 16 ? n - j : 16;
        const __mmask16 m = (__mmask16)((1u << rem) - 1);
        __m512 a = _mm512_maskz_loadu_ps(m, yb + j);
        a = _mm512_fmadd_ps(v0, _mm512_maskz_loadu_ps(m, r0 + j), a);
        _mm512_mask_storeu_ps(yb + j, m, a);
      }
#else
      for (int64_t j = 0; j < n; j++) {
        float a = yb[j];
        a += x0 * r0[j];
        yb[j] = a;
      }
#endif
    }
  }
}

/* The axpy form for a few rows (small M): Y[r][j] = sum_k X[r][k] M(k, j), r < m, streaming M
 * once. Y rows are ldy apart. Per element: an FMA chain in k order from 0. */
#define GEMV_ROWS_MAX 8

static void gemv_axpy_rows(const float* x, int64_t m, const float* base, const KilnAxis* kax,
                           int64_t K, int64_t j0, int64_t j1, float* y, int64_t ldy) {
  const int64_t JB = 512; /* the Y block (<= 16 KiB) stays in L1 */
  for (int64_t jb = j0; jb < j1; jb += JB) {
    const int64_t n = j1 - jb < JB ? j1 - jb : JB;
    for (int64_t r = 0; r < m; r++) memset(y + r * ldy + jb, 0, (size_t)n * sizeof(float));
    int64_t k = 0;
    for (; k + 4 <= K; k += 4) {
      const float* b0 = base + axis_off(kax, k) + jb;
      const float* b1 = base + axis_off(kax, k + 1) + jb;
      const float* b2 = base + axis_off(kax, k + 2) + jb;
      const float* b3 = base + axis_off(kax, k + 3) + jb;
#if KILN_GEMM_AVX512
      for (int64_t j = 0; j < n; j += 16) {
        const int64_t rem = n - j < 16 ? n - j : 16;
        const __mmask16 mk = (__mmask16)((1u << rem) - 1);
        const __m512 v0 = _mm512_maskz_loadu_ps(mk, b0 + j), v1 = _mm512_maskz_loadu_ps(mk, b1 + j);
        const __m512 v2 = _mm512_maskz_loadu_ps(mk, b2 + j), v3 = _mm512_maskz_loadu_ps(mk, b3 + j);
        for (int64_t r = 0; r < m; r++) {
          const float* xr = x + r * K + k;
          float* yr = y + r * ldy + jb + j;
          __m512 a = _mm512_maskz_loadu_ps(mk, yr);
          a = _mm512_fmadd_ps(_mm512_set1_ps(xr[0]), v0, a);
          a = _mm512_fmadd_ps(_mm512_set1_ps(xr[1]), v1, a);
          a = _mm512_fmadd_ps(_mm512_set1_ps(xr[2]), v2, a);
          a = _mm512_fmadd_ps(_mm512_set1_ps(xr[3]), v3, a);
          _mm512_mask_storeu_ps(yr, mk, a);
        }
      }
#else
      for (int64_t r = 0; r < m; r++) {
        const float x0 = x[r * K + k], x1 = x[r * K + k + 1], x2 = x[r * K + k + 2],
                    x3 = x[r * K + k + 3];
        float* yr = y + r * ldy + jb;
        for (int64_t j = 0; j < n; j++) {
          float a = yr[j];
          a += x0 * b0[j];
          a += x1 * b1[j];
          a += x2 * b2[j];
          a += x3 * b3[j];
          yr[j] = a;
        }
      }
#endif
    }
    for (; k < K; k++) {
      const float* b0 = base + axis_off(kax, k) + jb;
      for (int64_t r = 0; r < m; r++) {
        const float x0 = x[r * K + k];
        float* yr = y + r * ldy + jb;
#if KILN_GEMM_AVX512
        const __m512 xv = _mm512_set1_ps(x0);
        for (int64_t j = 0; j < n; j += 16) {
          const int64_t rem = n - j < 16 ? n - j : 16;
          const __mmask16 mk = (__mmask16)((1u << rem) - 1);
          __m512 a = _mm512_maskz_loadu_ps(mk, yr + j);
          a = _mm512_fmadd_ps(xv, _mm512_maskz_loadu_ps(mk, b0 + j), a);
          _mm512_mask_storeu_ps(yr + j, mk, a);
        }
#else
        for (int64_t j = 0; j < n; j++) {
          float a = yr[j];
          a += x0 * b0[j];
          yr[j] = a;
        }
#endif
      }
    }
  }
}

#if KILN_GEMM_AVX512
#define DOT_W 32 /* lanes summed separately */
#else
#define DOT_W 16
#endif

/* One column's dot product, the arithmetic shared by the 4-column and 1-column loops. */
static inline float dot_reduce(const float* l) {
  /* fixed pairwise order over DOT_W lanes */
  float t[DOT_W];
  for (int i = 0; i < DOT_W; i++) t[i] = l[i];
  for (int w = DOT_W / 2; w >= 1; w /= 2)
    for (int i = 0; i < w; i++) t[i] = t[i] + t[i + w];
  return t[0];
}

static void gemv_dot(const float* x, const float* base, const KilnAxis* jax, int64_t K,
                     int64_t j0, int64_t j1, float* y) {
  int64_t j = j0;
#if KILN_GEMM_AVX512
  for (; j + 4 <= j1; j += 4) {
    const float* c0 = base + axis_off(jax, j);
    const float* c1 = base + axis_off(jax, j + 1);
    const float* c2 = base + axis_off(jax, j + 2);
    const float* c3 = base + axis_off(jax, j + 3);
    __m512 a0 = _mm512_setzero_ps(), b0 = a0, a1 = a0, b1 = a0, a2 = a0, b2 = a0, a3 = a0,
           b3 = a0;
    int64_t k = 0;
    for (; k + 32 <= K; k += 32) {
      const __m512 xa = _mm512_loadu_ps(x + k), xb = _mm512_loadu_ps(x + k + 16);
      a0 = _mm512_fmadd_ps(xa, _mm512_loadu_ps(c0 + k), a0);
      b0 = _mm512_fmadd_ps(xb, _mm512_loadu_ps(c0 + k + 16), b0);
      a1 = _mm512_fmadd_ps(xa, _mm512_loadu_ps(c1 + k), a1);
      b1 = _mm512_fmadd_ps(xb, _mm512_loadu_ps(c1 + k + 16), b1);
      a2 = _mm512_fmadd_ps(xa, _mm512_loadu_ps(c2 + k), a2);
      b2 = _mm512_fmadd_ps(xb, _mm512_loadu_ps(c2 + k + 16), b2);
      a3 = _mm512_fmadd_ps(xa, _mm512_loadu_ps(c3 + k), a3);
      b3 = _mm512_fmadd_ps(xb, _mm512_loadu_ps(c3 + k + 16), b3);
    }
    if (k < K) {
      const int64_t ra = K - k < 16 ? K - k : 16;
      const int64_t rb = K - k - 16 > 0 ? K - k - 16 : 0;
      const __mmask16 ma = (__mmask16)((1u << ra) - 1), mb = (__mmask16)((1u << rb) - 1);
      const __m512 xa = _mm512_maskz_loadu_ps(ma, x + k), xb = _mm512_maskz_loadu_ps(mb, x + k + 16);
      a0 = _mm512_fmadd_ps(xa, _mm512_maskz_loadu_ps(ma, c0 + k), a0);
      b0 = _mm512_fmadd_ps(xb, _mm512_maskz_loadu_ps(mb, c0 + k + 16), b0);
      a1 = _mm512_fmadd_ps(xa, _mm512_maskz_loadu_ps(ma, c1 + k), a1);
      b1 = _mm512_fmadd_ps(xb, _mm512_maskz_loadu_ps(mb, c1 + k + 16), b1);
      a2 = _mm512_fmadd_ps(xa, _mm512_maskz_loadu_ps(ma, c2 + k), a2);
      b2 = _mm512_fmadd_ps(xb, _mm512_maskz_loadu_ps(mb, c2 + k + 16), b2);
      a3 = _mm512_fmadd_ps(xa, _mm512_maskz_loadu_ps(ma, c3 + k), a3);
      b3 = _mm512_fmadd_ps(xb, _mm512_maskz_loadu_ps(mb, c3 + k + 16), b3);
    }
    float l[32];
    _mm512_storeu_ps(l, a0), _mm512_storeu_ps(l + 16, b0), y[j] = dot_reduce(l);
    _mm512_storeu_ps(l, a1), _mm512_storeu_ps(l + 16, b1), y[j + 1] = dot_reduce(l);
    _mm512_storeu_ps(l, a2), _mm512_storeu_ps(l + 16, b2), y[j + 2] = dot_reduce(l);
    _mm512_storeu_ps(l, a3), _mm512_storeu_ps(l + 16, b3), y[j + 3] = dot_reduce(l);
  }
  for (; j < j1; j++) {
    const float* c0 = base + axis_off(jax, j);
    __m512 a0 = _mm512_setzero_ps(), b0 = a0;
    int64_t k = 0;
    for (; k + 32 <= K; k += 32) {
      a0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + k), _mm512_loadu_ps(c0 + k), a0);
      b0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + k + 16), _mm512_loadu_ps(c0 + k + 16), b0);
    }
    if (k < K) {
      const int64_t ra = K - k < 16 ? K - k : 16;
      const int64_t rb = K - k - 16 > 0 ? K - k - 16 : 0;
      const __mmask16 ma = (__mmask16)((1u << ra) - 1), mb = (__mmask16)((1u << rb) - 1);
      a0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(ma, x + k), _mm512_maskz_loadu_ps(ma, c0 + k), a0);
      b0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mb, x + k + 16),
                           _mm512_maskz_loadu_ps(mb, c0 + k + 16), b0);
    }
    float l[32];
    _mm512_storeu_ps(l, a0), _mm512_storeu_ps(l + 16, b0), y[j] = dot_reduce(l);
  }
#else
  for (; j < j1; j++) {
    const float* c0 = base + axis_off(jax, j);
    float l[DOT_W];
    for (int i = 0; i < DOT_W; i++) l[i] = 0.0f;
    int64_t k = 0;
    for (; k + DOT_W <= K; k += DOT_W)
      for (int i = 0; i < DOT_W; i++) l[i] += x[k + i] * c0[k + i];
    for (int i = 0; k + i < K; i++) l[i] += x[k + i] * c0[k + i];
    y[j] = dot_reduce(l);
  }
#endif
}

/* ---- KilnApi.sgemm ---------------------------------------------------------------------------- */

typedef struct GemmJob {
  const KilnGemm* g;
  int mode;           /* 0 packed core, 1 gemv over n (M == 1), 2 gemv over m (N == 1),
                         3 few-row gemv over n (2 <= M <= GEMV_ROWS_MAX, B rows contiguous) */
  int gemv_dot;       /* gemv: dot form (else axpy form) */
  int direct;         /* packed: B transposed, run by gemm_direct_bt (columns split only) */
  int64_t tm, tn;     /* packed: parts per matrix along rows and columns */
  int64_t parts;      /* gemv: parts per matrix */
} GemmJob;

typedef struct TileCtx {
  const KilnGemm* g;
  int64_t row0; /* b * M */
} TileCtx;

static void gemm_tile_done(void* v, int64_t ra, int64_t rb, int64_t ca, int64_t cb) {
  const TileCtx* t = (const TileCtx*)v;
  t->g->epilogue(t->g->epilogue_args, t->row0 + ra, t->row0 + rb, ca, cb);
}

/* [lo, hi) of `len` split in `parts` pieces at multiples of `align` */
static inline int64_t split_at(int64_t len, int64_t parts, int64_t i, int64_t align) {
  if (i >= parts) return len;
  int64_t units = (len + align - 1) / align;
  int64_t u = (units * i) / parts;
  int64_t v = u * align;
  return v < len ? v : len;
}

static void gemm_packed_task(const GemmJob* j, int64_t b, int64_t im, int64_t in) {
  const KilnGemm* g = j->g;
  const int64_t ra = split_at(g->m_lim, j->tm, im, MR), rb = split_at(g->m_lim, j->tm, im + 1, MR);
  const int64_t ca = split_at(g->n_lim, j->tn, in, NR), cb = split_at(g->n_lim, j->tn, in + 1, NR);
  if (ra >= rb || ca >= cb) return;
  KilnSrc A = {kiln_pack_axis, g->A + axis_off(&g->a_batch, b), g->a_m, g->a_k, NULL, 0};
  KilnSrc B = {kiln_pack_axis, g->B + axis_off(&g->b_batch, b), g->b_n, g->b_k, NULL, 0};
  KilnOut out = {g->C + b * g->M * g->N, {NULL, g->N}, {NULL, 1}};
  TileCtx t = {g, b * g->M};
#if KILN_GEMM_AVX512
  if (j->direct) {
    gemm_direct_bt(&A, rb, B.base, g->b_n.stride, g->k_lim, out.C, g->N, ca, cb,
                   g->epilogue ? gemm_tile_done : NULL, &t);
    return;
  }
#endif
  kiln_gemm_core(&A, &B, &out, g->k_lim, ra, rb, ca, cb, g->epilogue ? gemm_tile_done : NULL, &t);
}

static void gemm_gemv_task(const GemmJob* j, int64_t b, int64_t part) {
  const KilnGemm* g = j->g;
  const int64_t K = g->k_lim;
  const float* abase = g->A + axis_off(&g->a_batch, b);
  const float* bbase = g->B + axis_off(&g->b_batch, b);
  float* C = g->C + b * g->M * g->N;
  int64_t len = j->mode == 2 ? g->m_lim : g->n_lim;
  int64_t lo = split_at(len, j->parts, part, 64), hi = split_at(len, j->parts, part + 1, 64);
  if (lo >= hi) return;
  float* x = kiln_scratch(3, (size_t)(K > 0 ? K : 1) * (j->mode == 3 ? (size_t)g->m_lim : 1) + 16);
  if (!x) abort();
  if (j->mode == 3) { /* Y[m][n] = sum_k A(m, k) B(k, n) for the few rows */
    const int64_t m = g->m_lim;
    for (int64_t r = 0; r < m; r++) {
      const float* xs = abase + axis_off(&g->a_m, r);
      for (int64_t k = 0; k < K; k++) x[r * K + k] = xs[axis_off(&g->a_k, k)];
    }
    gemv_axpy_rows(x, m, bbase, &g->b_k, K, lo, hi, C, g->N);
    if (g->epilogue) g->epilogue(g->epilogue_args, b * g->M, b * g->M + m, lo, hi);
  } else if (j->mode == 1) { /* y[n] = sum_k A(0, k) B(k, n) */
    const float* xs = abase + axis_off(&g->a_m, 0);
    for (int64_t k = 0; k < K; k++) x[k] = xs[axis_off(&g->a_k, k)];
    if (j->gemv_dot)
      gemv_dot(x, bbase, &g->b_n, K, lo, hi, C);
    else
      gemv_axpy(x, bbase + 0, &g->b_k, K, lo, hi, C);
    if (g->epilogue) g->epilogue(g->epilogue_args, b * g->M, b * g->M + 1, lo, hi);
  } else { /* y[m] = sum_k A(m, k) B(k, 0), C[m * N] with N == 1 */
    const float* xs = bbase + axis_off(&g->b_n, 0);
    for (int64_t k = 0; k < K; k++) x[k] = xs[axis_off(&g->b_k, k)];
    if (j->gemv_dot)
      gemv_dot(x, abase, &g->a_m, K, lo, hi, C);
    else
      gemv_axpy(x, abase, &g->a_k, K, lo, hi, C);
    if (g->epilogue) g->epilogue(g->epilogue_args, b * g->M + lo, b * g->M + hi, 0, 1);
  }
}

static void gemm_range(void* v, int64_t lo, int64_t hi) {
  const GemmJob* j = (const GemmJob*)v;
  if (j->mode == 0) {
    const int64_t per = j->tm * j->tn;
    for (int64_t u = lo; u < hi; u++) {
      int64_t b = u / per, r = u % per;
      gemm_packed_task(j, b, r / j->tn, r % j->tn);
    }
  } else {
    for (int64_t u = lo; u < hi; u++) gemm_gemv_task(j, u / j->parts, u % j->parts);
  }
}

static int64_t gcd64(int64_t a, int64_t b) {
  while (b) {
    int64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

void kiln_sgemm(const KilnGemm* g) {
  const int64_t batch = g->batch, m = g->m_lim, n = g->n_lim, K = g->k_lim;
  if (batch <= 0 || m <= 0 || n <= 0) return;
  GemmJob j;
  memset(&j, 0, sizeof j);
  j.g = g;
  j.tm = j.tn = 1;
  j.parts = 1;
  /* GEMV when one side is a single row/column and the matrix it streams has a unit stride */
  if (m == 1 && K > 0 && (axis_unit(&g->b_n) || axis_unit(&g->b_k))) {
    j.mode = 1;
    j.gemv_dot = !axis_unit(&g->b_n);
  } else if (n == 1 && g->N == 1 && K > 0 && (axis_unit(&g->a_m) || axis_unit(&g->a_k))) {
    j.mode = 2;
    j.gemv_dot = !axis_unit(&g->a_m);
  } else if (m <= GEMV_ROWS_MAX && K > 0 && axis_unit(&g->b_n) && n >= 64) {
    j.mode = 3;
  }
#if KILN_GEMM_AVX512
  /* B transposed with long contraction rows and many columns (x @ W^T): W read in place */
  if (!j.mode && !g->b_n.table && !g->b_k.table && g->b_k.stride == 1 && g->b_n.stride >= K &&
      K >= 256 && m * K <= A_FULL_FLOATS && n >= 4 * NR)
    j.direct = 1;
#endif
  const int threads = kiln_pool_threads();
  const double flops = 2.0 * (double)batch * (double)m * (double)n * (double)(K > 0 ? K : 1);
  int64_t units;
  if (j.mode) {
    const int64_t len = j.mode == 2 ? m : n;
    if (threads > 1 && flops >= 65536.0) {
      int64_t want = threads / gcd64(batch, threads);
      if (batch < 4 * threads) want = want < 2 ? 2 : want;
      int64_t maxp = (len + 255) / 256;
      if (want > maxp) want = maxp;
      j.parts = want < 1 ? 1 : want;
    }
    units = batch * j.parts;
  } else {
    if (threads > 1 && flops >= 262144.0) {
      int64_t f = threads / gcd64(batch, threads);
      if (batch >= 3 * threads) f = 1;
      if (f > 1) {
        /* choose tm * tn = f minimizing redundant packing tm * n + tn * m, each part >= 1 tile */
        int64_t best_tm = 1, best_tn = 1;
        double best = -1;
        for (int64_t tm = 1; tm <= f; tm++) {
          if (f % tm) continue;
          int64_t tn = f / tm;
          if ((m + MR - 1) / MR < tm || (n + NR - 1) / NR < tn) continue;
          if (j.direct && tm > 1) continue;
          double cost = (double)tm * (double)n + (double)tn * (double)m;
          if (best < 0 || cost < best) best = cost, best_tm = tm, best_tn = tn;
        }
        j.tm = best_tm;
        j.tn = best_tn;
      }
    }
    units = batch * j.tm * j.tn;
  }
  if (units <= 1 || threads <= 1) {
    gemm_range(&j, 0, units);
    return;
  }
  int64_t parts = units < 8 * (int64_t)threads ? units : 8 * (int64_t)threads;
  kiln_pool_for_parts(gemm_range, &j, units, parts);
}
