/*
 * conv.c — float32 convolution (KilnApi.sconv) as an implicit GEMM on the packed-GEMM core.
 *
 * For each feature group g the convolution is a GEMM over the contraction index
 * kk = (input feature i < cg, window tap):
 *   orientation 0 ("NCHW", chosen unless the output's feature dim is contiguous):
 *       rows = output features of the group, columns = (image, output position);
 *       A = weights, B = the image.
 *   orientation 1 ("NHWC", when y's feature stride is 1): rows = (image, position),
 *       columns = output features; A = the image, B = the weights.
 * Either way the stores are contiguous along the output's unit-stride dim, and columns/rows span
 * several images so that small spatial sizes (4x4, 2x2) still fill the register tile.
 *
 * The image operand is never expanded (no im2col buffer): each work unit copies its images'
 * features into a small zero-bordered (and, for lhs dilation, zero-interleaved) copy — feature
 * major for orientation 0, feature minor for orientation 1 — in which every tap of every output
 * position is in bounds. The image element (kk, position) is then xpad[pos(position) + tap(kk)],
 * an ordinary table-addressed operand that the GEMM packer reads directly into its panels
 * (contiguous runs along an output row are copied, channel runs are transposed, short runs are
 * gathered). When the bordered copy would be unreasonably large, a per-element path is used.
 * Depthwise and grouped convolutions are one small GEMM per group (correct, not fast).
 *
 * Work units are (image chunk, group, feature part), run on the pool; the epilogue of a chunk
 * of images is called by the unit that finishes the chunk's last piece.
 */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime_internal.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

/* a unit's bordered image copy may hold at most this many floats (else: per-element path) */
#define PAD_MAX_FLOATS ((int64_t)1 << 24)

typedef struct ConvPlan {
  const KilnConv* c;
  int nd; /* spatial dims, >= 1 (a 0-d convolution gets one dim of size 1) */
  int orient;
  int padded; /* units read a bordered copy (else the per-element path) */
  int direct; /* no border needed: the "bordered copy" is x itself */
  int tap_outer; /* kk = tap * cg + i (else kk = i * ntaps + tap) */
  int64_t batch, G, cg, og, P, Kc, ntaps;
  int64_t osz[3], str[3], in[3], xs[3], ld[3], plo[3];
  int64_t E[3];     /* bordered copy extents (dilated input coordinates) */
  int64_t epitch[3];/* bordered copy strides of the spatial dims */
  int64_t fpitch;   /* bordered copy stride of the feature dim */
  int64_t img;      /* bordered copy floats per image */
  /* per contraction index kk */
  int64_t* kk_woff; /* weights: i * w_si + sum_d tap_d' * w_ss[d] */
  int64_t* kk_pad;  /* bordered copy: i * fpitch + sum_d tap_d * rhs_dil_d * epitch[d] */
  int64_t* kk_xoff; /* per-element path: i * x_sf */
  int64_t* kk_wo[3];/* per-element path: tap_d * rhs_dil_d - pad_lo_d */
  /* per position (b, p), [0, batch * P) */
  int64_t* pos_y;   /* b * y_sb + sum_d p_d * y_ss[d] */
  int64_t* pos_pad; /* bordered copy: b * img + sum_d p_d * stride_d * epitch[d] */
  int64_t* pos_xb;  /* per-element path: b * x_sb */
  int64_t* pos_q[3];/* per-element path: p_d * stride_d */
  /* units */
  int64_t ipc, nchunks, fparts;
  _Atomic int64_t* chunk_left;
} ConvPlan;

/* ---- the image as a GEMM operand: per-element path ---------------------------------------------- */

/* x element for position `col` and contraction index kk (0 when it falls in padding or a hole
 * of the lhs dilation). base includes the group's feature offset. */
static inline float conv_elem(const ConvPlan* p, const float* base, int64_t col, int64_t kk) {
  int64_t off = p->pos_xb[col] + p->kk_xoff[kk];
  for (int d = 0; d < p->nd; d++) {
    int64_t u = p->pos_q[d][col] + p->kk_wo[d][kk];
    if (u < 0) return 0.0f;
    if (p->ld[d] > 1) {
      if (u % p->ld[d]) return 0.0f;
      u /= p->ld[d];
    }
    if (u >= p->in[d]) return 0.0f;
    off += u * p->xs[d];
  }
  return base[off];
}

/* B role (orientation 0): out[k * W + t] = image(kk = k0 + k, col = j0 + t). */
static void conv_pack_cols(const KilnSrc* s, int64_t k0, int64_t kc, int64_t j0, int64_t w,
                           int64_t W, float* out) {
  const ConvPlan* p = (const ConvPlan*)s->ctx;
  for (int64_t k = 0; k < kc; k++) {
    float* o = out + k * W;
    for (int64_t t = 0; t < w; t++) o[t] = conv_elem(p, s->base, j0 + t, k0 + k);
    for (int64_t t = w; t < W; t++) o[t] = 0.0f;
  }
}

/* A role (orientation 1): out[k * W + r] = image(kk = k0 + k, row = j0 + r). */
static void conv_pack_rows(const KilnSrc* s, int64_t k0, int64_t kc, int64_t j0, int64_t w,
                           int64_t W, float* out) {
  const ConvPlan* p = (const ConvPlan*)s->ctx;
  for (int64_t k = 0; k < kc; k++) {
    float* o = out + k * W;
    for (int64_t r = 0; r < w; r++) o[r] = conv_elem(p, s->base, j0 + r, k0 + k);
    for (int64_t r = w; r < W; r++) o[r] = 0.0f;
  }
}

/* ---- the bordered copy ----------------------------------------------------------------------------- */

/* source index along dim d for bordered coordinate v, or -1 (border or dilation hole) */
static inline int64_t pad_src(const ConvPlan* p, int d, int64_t v) {
  int64_t u = v - p->plo[d];
  if (u < 0) return -1;
  if (p->ld[d] > 1) {
    if (u % p->ld[d]) return -1;
    u /= p->ld[d];
  }
  return u < p->in[d] ? u : -1;
}

/* Fills the bordered copy of images [b0, b1), features [g*cg, (g+1)*cg). */
static void pad_images(const ConvPlan* p, int64_t g, int64_t b0, int64_t b1, float* xp) {
  const KilnConv* c = p->c;
  const int nd = p->nd, last = nd - 1;
  const int64_t El = p->E[last];
  /* bordered positions of the outer dims, iterated as a flat index */
  int64_t outer = 1;
  for (int d = 0; d < last; d++) outer *= p->E[d];
  for (int64_t b = b0; b < b1; b++) {
    const float* xb = c->x + b * c->x_sb + g * p->cg * c->x_sf;
    float* ob = xp + (b - b0) * p->img;
    int64_t vv[3] = {0, 0, 0}; /* bordered coordinates of the outer dims, odometer order */
    for (int64_t q = 0; q < outer; q++) {
      if (q > 0)
        for (int d = last - 1; d >= 0; d--) {
          if (++vv[d] < p->E[d]) break;
          vv[d] = 0;
        }
      /* source offset of this outer position, or not ok */
      int64_t soff = 0, doff = 0;
      int ok = 1;
      for (int d = 0; d < last; d++) {
        const int64_t u = pad_src(p, d, vv[d]);
        if (u < 0) ok = 0;
        soff += u * p->xs[d];
        doff += vv[d] * p->epitch[d];
      }
      if (p->orient == 0) {
        /* feature major: rows of El floats per feature */
        for (int64_t i = 0; i < p->cg; i++) {
          float* o = ob + i * p->fpitch + doff;
          if (!ok) {
            memset(o, 0, (size_t)El * sizeof(float));
            continue;
          }
          const float* src = xb + i * c->x_sf + soff;
          const int64_t xl = p->xs[last];
          if (p->ld[last] == 1) {
            /* v in [plo, plo + in) maps to u = v - plo */
            int64_t a = p->plo[last], e = p->plo[last] + p->in[last];
            a = a < 0 ? 0 : a > El ? El : a;
            e = e < 0 ? 0 : e > El ? El : e;
            if (e < a) e = a;
            const float* sp = src + (a - p->plo[last]) * xl;
#if defined(__AVX512F__)
            if (xl == 1) {
              /* o[v] = src[v - plo] for v in [a, e), zeros elsewhere: masked 16-lane copies */
              const float* s0 = src - p->plo[last];
              for (int64_t v = 0; v < El; v += 16) {
                const int64_t n = El - v < 16 ? El - v : 16;
                int64_t va = a - v, ve = e - v;
                va = va < 0 ? 0 : va;
                ve = ve > n ? n : ve;
                const __mmask16 lm = (__mmask16)((1u << n) - 1);
                const __mmask16 vm =
                    ve > va ? (__mmask16)(((1u << ve) - 1) & ~((1u << va) - 1)) : (__mmask16)0;
                _mm512_mask_storeu_ps(o + v, lm, _mm512_maskz_loadu_ps(vm, s0 + v));
              }
              continue;
            }
#endif
            memset(o, 0, (size_t)a * sizeof(float));
            if (xl == 1) memcpy(o + a, sp, (size_t)(e - a) * sizeof(float));
            else
              for (int64_t v = a; v < e; v++) o[v] = sp[(v - a) * xl];
            memset(o + e, 0, (size_t)(El - e) * sizeof(float));
          } else {
            for (int64_t v = 0; v < El; v++) {
              const int64_t u = pad_src(p, last, v);
              o[v] = u < 0 ? 0.0f : src[u * xl];
            }
          }
        }
      } else {
        /* feature minor: cg floats per position */
        for (int64_t v = 0; v < El; v++) {
          float* o = ob + doff + v * p->epitch[last];
          const int64_t u = ok ? pad_src(p, last, v) : -1;
          if (u < 0) {
            memset(o, 0, (size_t)p->cg * sizeof(float));
            continue;
          }
          const float* src = xb + soff + u * p->xs[last];
          if (c->x_sf == 1) memcpy(o, src, (size_t)p->cg * sizeof(float));
          else
            for (int64_t i = 0; i < p->cg; i++) o[i] = src[i * c->x_sf];
        }
      }
    }
  }
}

/* ---- units --------------------------------------------------------------------------------------- */

typedef struct ConvJob {
  ConvPlan* p;
  KilnAxis wk; /* weights along kk */
  KilnAxis pk; /* bordered copy along kk */
} ConvJob;

static void conv_unit(ConvJob* j, int64_t u) {
  ConvPlan* p = j->p;
  const KilnConv* c = p->c;
  const int64_t fp = u % p->fparts;
  const int64_t g = (u / p->fparts) % p->G;
  const int64_t chunk = u / (p->fparts * p->G);
  const int64_t b0 = chunk * p->ipc;
  const int64_t b1 = b0 + p->ipc < p->batch ? b0 + p->ipc : p->batch;
  /* feature range of this part, at multiples of the register tile */
  const int64_t align = p->orient == 0 ? kiln_gemm_mr() : kiln_gemm_nr();
  const int64_t units = (p->og + align - 1) / align;
  int64_t f0 = (units * fp) / p->fparts * align, f1 = (units * (fp + 1)) / p->fparts * align;
  if (f0 > p->og) f0 = p->og;
  if (f1 > p->og) f1 = p->og;
  if (f0 < f1 && b0 < b1 && p->P > 0) {
    KilnSrc wsrc = {kiln_pack_axis, c->w + g * p->og * c->w_so, {NULL, c->w_so}, j->wk, NULL, 0};
    KilnSrc xsrc;
    if (p->direct) {
      const float* x0 = c->x + g * p->cg * c->x_sf;
      for (int d = 0; d < p->nd; d++) x0 -= p->plo[d] * p->xs[d];
      xsrc.pack = kiln_pack_axis;
      xsrc.base = x0;
      xsrc.j.table = p->pos_pad, xsrc.j.stride = 0;
      xsrc.k = j->pk;
    } else if (p->padded) {
      float* xp = kiln_scratch(5, (size_t)((b1 - b0) * p->img + 16));
      if (!xp) abort();
      pad_images(p, g, b0, b1, xp);
      /* positions index the whole batch: shift the base to image b0 */
      xsrc.pack = kiln_pack_axis;
      xsrc.base = xp - b0 * p->img;
      xsrc.j.table = p->pos_pad, xsrc.j.stride = 0;
      xsrc.k = j->pk;
    } else {
      xsrc.pack = p->orient == 0 ? conv_pack_cols : conv_pack_rows;
      xsrc.base = c->x + g * p->cg * c->x_sf;
      xsrc.j.table = NULL, xsrc.j.stride = 0;
      xsrc.k.table = NULL, xsrc.k.stride = 0;
    }
    xsrc.ctx = p;
    xsrc.aux = 0;
    KilnOut out;
    out.C = c->y + g * p->og * c->y_sf;
    if (p->orient == 0) {
      out.row.table = NULL, out.row.stride = c->y_sf;
      out.col.table = p->pos_y, out.col.stride = 0;
      kiln_gemm_core(&wsrc, &xsrc, &out, p->Kc, f0, f1, b0 * p->P, b1 * p->P, NULL, NULL);
    } else {
      out.row.table = p->pos_y, out.row.stride = 0;
      out.col.table = NULL, out.col.stride = c->y_sf;
      kiln_gemm_core(&xsrc, &wsrc, &out, p->Kc, b0 * p->P, b1 * p->P, f0, f1, NULL, NULL);
    }
  }
  if (c->epilogue && atomic_fetch_sub(&p->chunk_left[chunk], 1) == 1)
    c->epilogue(c->epilogue_args, b0, b1, 0, 1);
}

static void conv_range(void* v, int64_t lo, int64_t hi) {
  for (int64_t u = lo; u < hi; u++) conv_unit((ConvJob*)v, u);
}

/* a table of n offsets as a stride when it is one */
static KilnAxis as_axis(const int64_t* t, int64_t n) {
  KilnAxis a = {t, 0};
  if (n <= 0) return (KilnAxis){NULL, 0};
  const int64_t st = n > 1 ? t[1] - t[0] : 0;
  if (t[0] != 0) return a;
  for (int64_t i = 1; i < n; i++)
    if (t[i] != i * st) return a;
  return (KilnAxis){NULL, st};
}

/* ---- KilnApi.sconv ------------------------------------------------------------------------------- */

int kiln_sconv(const KilnConv* c) {
  if (c->spatial < 0 || c->spatial > KILN_CONV_MAX_SPATIAL) return 1;
  if (c->groups < 1 || c->batch < 0 || c->c_in < 0 || c->o_count < 0) return 1;
  if (c->c_in % c->groups || c->o_count % c->groups) return 1;
  ConvPlan p;
  memset(&p, 0, sizeof p);
  p.c = c;
  p.batch = c->batch;
  p.G = c->groups;
  p.cg = c->c_in / c->groups;
  p.og = c->o_count / c->groups;
  const int nd = c->spatial > 0 ? c->spatial : 1;
  p.nd = nd;
  int64_t win[3], wss[3], yss[3], rdil[3];
  int32_t rev[3];
  p.P = 1;
  p.ntaps = 1;
  for (int d = 0; d < nd; d++) {
    if (c->spatial == 0) {
      p.osz[d] = 1, p.str[d] = 1, p.in[d] = 1, p.xs[d] = 0, p.ld[d] = 1, p.plo[d] = 0;
      win[d] = 1, wss[d] = 0, yss[d] = 0, rdil[d] = 1, rev[d] = 0;
    } else {
      p.osz[d] = c->out_size[d], p.str[d] = c->stride[d], p.in[d] = c->in_size[d];
      p.xs[d] = c->x_ss[d], p.ld[d] = c->lhs_dil[d], p.plo[d] = c->pad_lo[d];
      win[d] = c->win[d], wss[d] = c->w_ss[d], yss[d] = c->y_ss[d];
      rdil[d] = c->rhs_dil[d], rev[d] = c->reverse[d];
    }
    if (p.osz[d] < 0 || p.in[d] < 0 || win[d] < 0 || p.str[d] < 1 || p.ld[d] < 1 || rdil[d] < 1)
      return 1;
    p.P *= p.osz[d];
    p.ntaps *= win[d];
  }
  if (p.batch == 0) return 0;
  p.Kc = p.cg * p.ntaps;
  /* orientation: rows = positions when the output's features are contiguous */
  const int pos_unit = yss[nd - 1] == 1 && c->spatial > 0;
  p.orient = (c->y_sf == 1 && !pos_unit) ? 1 : 0;
  p.tap_outer = p.orient == 1;

  /* bordered copy geometry: every tap of every position in bounds */
  int64_t spatial_floats = 1;
  for (int d = 0; d < nd; d++) {
    p.E[d] = (p.osz[d] > 0 && win[d] > 0) ? (p.osz[d] - 1) * p.str[d] + (win[d] - 1) * rdil[d] + 1 : 1;
    spatial_floats *= p.E[d];
  }
  if (p.orient == 0) {
    int64_t st = 1;
    for (int d = nd - 1; d >= 0; d--) p.epitch[d] = st, st *= p.E[d];
    p.fpitch = st;
  } else {
    int64_t st = p.cg;
    for (int d = nd - 1; d >= 0; d--) p.epitch[d] = st, st *= p.E[d];
    p.fpitch = 1;
  }
  p.img = spatial_floats * p.cg;
  /* no border needed (valid convolutions, 1x1): read x in place through its own strides */
  p.direct = 1;
  for (int d = 0; d < nd; d++)
    if (p.ld[d] != 1 || p.plo[d] > 0 || (p.osz[d] > 0 && win[d] > 0 && p.E[d] - p.plo[d] > p.in[d]))
      p.direct = 0;
  if (p.direct) {
    for (int d = 0; d < nd; d++) p.epitch[d] = p.xs[d];
    p.fpitch = c->x_sf;
    p.img = c->x_sb;
  }

  /* image chunks and feature parts: split whichever side makes the other's packing repeat less
   * (images when there are many output positions, features when the weights dominate) */
  const int threads = kiln_pool_threads();
  const double flops = 2.0 * (double)p.batch * (double)p.P * (double)c->o_count * (double)p.Kc;
  const int par = threads > 1 && flops >= 262144.0;
  int64_t ipc = p.P > 0 ? (512 + p.P - 1) / p.P : p.batch;
  if (ipc < 1) ipc = 1;
  if (ipc > p.batch) ipc = p.batch;
  p.fparts = 1;
  if (par) {
    const int64_t align = p.orient == 0 ? kiln_gemm_mr() : kiln_gemm_nr();
    const int64_t maxf = (p.og + align - 1) / align;
    const int split_features = p.batch * p.P < p.og && maxf >= 2;
    if (split_features) {
      ipc = p.batch;
      int64_t f = (threads + p.G - 1) / p.G;
      p.fparts = f < maxf ? f : maxf;
    } else {
      int64_t need_chunks = (threads + p.G - 1) / p.G;
      int64_t max_ipc = (p.batch + need_chunks - 1) / need_chunks;
      if (ipc > max_ipc) ipc = max_ipc;
      int64_t nch = (p.batch + ipc - 1) / ipc;
      if (p.G * nch < threads) {
        int64_t f = (threads + p.G * nch - 1) / (p.G * nch);
        p.fparts = f < maxf ? f : maxf;
      }
    }
    if (p.fparts < 1) p.fparts = 1;
  }
  p.ipc = ipc;
  p.nchunks = (p.batch + ipc - 1) / ipc;
  p.padded = p.direct || p.img * ipc <= PAD_MAX_FLOATS;

  /* tables */
  const int64_t npos = p.batch * p.P;
  const size_t n64 = (size_t)p.Kc * (3 + (size_t)nd) + (size_t)npos * (3 + (size_t)nd) +
                     (size_t)p.nchunks + 8;
  int64_t* mem = (int64_t*)malloc(n64 * sizeof(int64_t));
  if (!mem) return 1;
  int64_t* m = mem;
  p.kk_woff = m, m += p.Kc;
  p.kk_pad = m, m += p.Kc;
  p.kk_xoff = m, m += p.Kc;
  for (int d = 0; d < nd; d++) p.kk_wo[d] = m, m += p.Kc;
  p.pos_y = m, m += npos;
  p.pos_pad = m, m += npos;
  p.pos_xb = m, m += npos;
  for (int d = 0; d < nd; d++) p.pos_q[d] = m, m += npos;
  p.chunk_left = (_Atomic int64_t*)m;
  for (int64_t ch = 0; ch < p.nchunks; ch++) atomic_init(&p.chunk_left[ch], p.G * p.fparts);

  /* contraction tables: kk = i * ntaps + tap or tap * cg + i, taps row-major over the dims */
  {
    int64_t wv[3] = {0, 0, 0};
    for (int64_t tap = 0; tap < p.ntaps; tap++) {
      int64_t woff = 0, poff = 0;
      for (int d = 0; d < nd; d++) {
        woff += (rev[d] ? win[d] - 1 - wv[d] : wv[d]) * wss[d];
        poff += wv[d] * rdil[d] * p.epitch[d];
      }
      for (int64_t i = 0; i < p.cg; i++) {
        const int64_t kk = p.tap_outer ? tap * p.cg + i : i * p.ntaps + tap;
        p.kk_woff[kk] = woff + i * c->w_si;
        p.kk_pad[kk] = poff + i * p.fpitch;
        if (!p.padded) {
          p.kk_xoff[kk] = i * c->x_sf;
          for (int d = 0; d < nd; d++) p.kk_wo[d][kk] = wv[d] * rdil[d] - p.plo[d];
        }
      }
      for (int d = nd - 1; d >= 0; d--) { /* next tap */
        if (++wv[d] < win[d]) break;
        wv[d] = 0;
      }
    }
  }
  /* position tables, iterated without divisions */
  {
    int64_t pv[3] = {0, 0, 0};
    int64_t yoff = 0, poff = 0;
    for (int64_t col = 0; col < npos; col++) {
      const int64_t b = col / (p.P > 0 ? p.P : 1);
      if (col % (p.P > 0 ? p.P : 1) == 0) { /* new image */
        pv[0] = pv[1] = pv[2] = 0;
        yoff = b * c->y_sb;
        poff = b * p.img;
      }
      p.pos_y[col] = yoff;
      p.pos_pad[col] = poff;
      if (!p.padded) {
        p.pos_xb[col] = b * c->x_sb;
        for (int d = 0; d < nd; d++) p.pos_q[d][col] = pv[d] * p.str[d];
      }
      for (int d = nd - 1; d >= 0; d--) {
        yoff += yss[d];
        poff += p.str[d] * p.epitch[d];
        if (++pv[d] < p.osz[d]) break;
        yoff -= pv[d] * yss[d];
        poff -= pv[d] * p.str[d] * p.epitch[d];
        pv[d] = 0;
      }
    }
  }
  ConvJob job;
  job.p = &p;
  job.wk = as_axis(p.kk_woff, p.Kc);
  job.pk = as_axis(p.kk_pad, p.Kc);
  const int64_t units = p.nchunks * p.G * p.fparts;
  if (!par || units <= 1) {
    conv_range(&job, 0, units);
  } else {
    int64_t parts = units < 8 * (int64_t)threads ? units : 8 * (int64_t)threads;
    kiln_pool_for_parts(conv_range, &job, units, parts);
  }
  free(mem);
  return 0;
}
