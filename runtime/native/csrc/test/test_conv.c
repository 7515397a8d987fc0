/*
 * test_conv.c — KilnApi.sconv against a naive double-precision direct convolution written
 * from the contract's formula (kiln_rt.h), over random configurations: 0-3 spatial dims,
 * strides, padding (negative too), lhs and rhs dilation, reversal, feature groups (depthwise
 * included), batch, and random layouts of x, w and y (NCHW, NHWC, anything, with padding).
 * Every case runs with 1, 2 and 3 threads; results must be within 2 K eps sum|terms| of the
 * reference, bitwise equal across thread counts, untouched outside the output, and the epilogue
 * must cover every image exactly once after the image is final.
 *
 * usage: test_conv [cases]
 */
#include <stdatomic.h>

#include "test_common.h"

typedef struct Tensor {
  float* buf;
  int64_t len;
  int nd; /* dims: [0] = batch-like, [1] = feature-like, [2..] spatial */
  int64_t dims[5], strides[5];
} Tensor;

static void make_tensor(Tensor* t, int nd, const int64_t* dims, int layout_kind, int fill) {
  t->nd = nd;
  int order[5];
  for (int i = 0; i < nd; i++) order[i] = i, t->dims[i] = dims[i];
  if (layout_kind == 1 && nd > 2) {
    /* channels last: b, spatial..., f */
    int k = 0;
    order[k++] = 0;
    for (int i = 2; i < nd; i++) order[k++] = i;
    order[k++] = 1;
  } else if (layout_kind == 2) {
    for (int i = nd - 1; i > 0; i--) {
      int j = (int)rng_int(0, i);
      int x = order[i];
      order[i] = order[j];
      order[j] = x;
    }
  }
  int64_t s = 1;
  for (int q = nd - 1; q >= 0; q--) {
    int d = order[q];
    t->strides[d] = s;
    int64_t ext = dims[d] + (rng_int(0, 4) == 0 ? rng_int(1, 3) : 0);
    s *= ext > 0 ? ext : 1;
  }
  t->len = s + 8;
  t->buf = (float*)xalloc((size_t)t->len * sizeof(float));
  for (int64_t i = 0; i < t->len; i++) t->buf[i] = fill ? rng_float() : 777.0f;
}

typedef struct Cfg {
  int spatial;
  int64_t batch, G, cg, og;
  int64_t in[3], win[3], out[3], stride[3], pad_lo[3], ld[3], rd[3];
  int32_t rev[3];
  int xl, wl, yl; /* layout kinds */
} Cfg;

typedef struct Epi {
  const KilnConv* c;
  const Tensor* y;
  _Atomic int* img_count;
  float* snap;
  _Atomic int bad;
} Epi;

static int64_t y_index(const Tensor* y, int64_t b, int64_t o, const int64_t* p, int spatial) {
  int64_t off = b * y->strides[0] + o * y->strides[1];
  for (int d = 0; d < spatial; d++) off += p[d] * y->strides[2 + d];
  return off;
}

static void for_each_pos(const Cfg* f, int64_t P, int64_t idx, int64_t* p) {
  for (int d = f->spatial - 1; d >= 0; d--) {
    p[d] = idx % f->out[d];
    idx /= f->out[d];
  }
  (void)P;
}

static const Cfg* epi_cfg;

static void conv_epilogue(const KilnArgs* a, int64_t b0, int64_t b1, int64_t c0, int64_t c1) {
  Epi* e = (Epi*)a->buf[0];
  const Cfg* f = epi_cfg;
  if (b0 < 0 || b1 > f->batch || b0 >= b1 || c0 != 0 || c1 != 1) {
    atomic_store(&e->bad, 1);
    return;
  }
  int64_t P = 1;
  for (int d = 0; d < f->spatial; d++) P *= f->out[d];
  for (int64_t b = b0; b < b1; b++) {
    atomic_fetch_add(&e->img_count[b], 1);
    for (int64_t o = 0; o < f->G * f->og; o++)
      for (int64_t q = 0; q < P; q++) {
        int64_t p[3] = {0, 0, 0};
        for_each_pos(f, P, q, p);
        int64_t i = y_index(e->y, b, o, p, f->spatial);
        e->snap[i] = e->y->buf[i];
      }
  }
}

static int run_conv(const Cfg* f, int verbose) {
  const int S = f->spatial;
  int64_t xd[5] = {f->batch, f->G * f->cg}, wd[5] = {f->G * f->og, f->cg},
          yd[5] = {f->batch, f->G * f->og};
  for (int d = 0; d < S; d++) xd[2 + d] = f->in[d], wd[2 + d] = f->win[d], yd[2 + d] = f->out[d];
  Tensor x, w, y;
  make_tensor(&x, 2 + S, xd, f->xl, 1);
  make_tensor(&w, 2 + S, wd, f->wl, 1);
  make_tensor(&y, 2 + S, yd, f->yl, 0);
  int64_t P = 1, taps = 1;
  for (int d = 0; d < S; d++) P *= f->out[d], taps *= f->win[d];
  const int64_t O = f->G * f->og, K = f->cg * taps;
  const int64_t nout = f->batch * O * P;
  double* ref = (double*)xalloc((size_t)(nout + 1) * sizeof(double));
  double* bound = (double*)xalloc((size_t)(nout + 1) * sizeof(double));
  int64_t* yidx = (int64_t*)xalloc((size_t)(nout + 1) * sizeof(int64_t));
  const double eps = 1.0 / (1 << 24);
  int64_t n = 0;
  for (int64_t b = 0; b < f->batch; b++)
    for (int64_t o = 0; o < O; o++)
      for (int64_t q = 0; q < P; q++, n++) {
        int64_t p[3] = {0, 0, 0};
        for_each_pos(f, P, q, p);
        const int64_t g = o / f->og;
        double s = 0, sa = 0;
        for (int64_t i = 0; i < f->cg; i++)
          for (int64_t t = 0; t < taps; t++) {
            int64_t wv[3] = {0, 0, 0}, rem = t;
            for (int d = S - 1; d >= 0; d--) wv[d] = rem % f->win[d], rem /= f->win[d];
            int64_t xo = b * x.strides[0] + (g * f->cg + i) * x.strides[1];
            int64_t wo = o * w.strides[0] + i * w.strides[1];
            int ok = 1;
            for (int d = 0; d < S && ok; d++) {
              int64_t u = p[d] * f->stride[d] - f->pad_lo[d] + wv[d] * f->rd[d];
              if (u % f->ld[d] != 0) { ok = 0; break; }
              int64_t base = u / f->ld[d];
              if (base < 0 || base >= f->in[d]) { ok = 0; break; }
              xo += base * x.strides[2 + d];
              int64_t wi = f->rev[d] ? f->win[d] - 1 - wv[d] : wv[d];
              wo += wi * w.strides[2 + d];
            }
            if (!ok) continue;
            double v = (double)x.buf[xo] * (double)w.buf[wo];
            s += v;
            sa += fabs(v);
          }
        ref[n] = s;
        bound[n] = 2.0 * (double)(K > 0 ? K : 1) * eps * sa;
        yidx[n] = y_index(&y, b, o, p, S);
      }
  float* first = (float*)xalloc((size_t)y.len * sizeof(float));
  float* snap = (float*)xalloc((size_t)y.len * sizeof(float));
  _Atomic int* imgc = (_Atomic int*)xalloc((size_t)(f->batch + 1) * sizeof(int));
  int failed = 0;
  const int threads[3] = {1, 2, 3};
  for (int ti = 0; ti < 3; ti++) {
    kiln_set_num_threads(threads[ti]);
    for (int64_t i = 0; i < y.len; i++) y.buf[i] = 777.0f, snap[i] = NAN;
    for (int64_t b = 0; b < f->batch; b++) imgc[b] = 0;
    KilnConv c;
    memset(&c, 0, sizeof c);
    c.spatial = S;
    c.batch = f->batch, c.c_in = f->G * f->cg, c.o_count = O, c.groups = f->G;
    c.x = x.buf, c.x_sb = x.strides[0], c.x_sf = x.strides[1];
    c.w = w.buf, c.w_so = w.strides[0], c.w_si = w.strides[1];
    c.y = y.buf, c.y_sb = y.strides[0], c.y_sf = y.strides[1];
    for (int d = 0; d < S; d++) {
      c.x_ss[d] = x.strides[2 + d], c.in_size[d] = f->in[d];
      c.w_ss[d] = w.strides[2 + d], c.win[d] = f->win[d];
      c.y_ss[d] = y.strides[2 + d], c.out_size[d] = f->out[d];
      c.stride[d] = f->stride[d], c.pad_lo[d] = f->pad_lo[d];
      c.lhs_dil[d] = f->ld[d], c.rhs_dil[d] = f->rd[d], c.reverse[d] = f->rev[d];
    }
    Epi e = {&c, &y, imgc, snap, 0};
    void* bufs[1] = {&e};
    KilnArgs args = {bufs, NULL};
    epi_cfg = f;
    c.epilogue = conv_epilogue, c.epilogue_args = &args;
    int rc = kiln_runtime_api()->sconv(&c);
    CHECK(rc == 0, "sconv returned %d", rc);
    int bad = 0, bad_det = 0, bad_epi = atomic_load(&e.bad);
    double worst = 0;
    for (int64_t i = 0; i < nout; i++) {
      float v = y.buf[yidx[i]];
      double err = fabs((double)v - ref[i]);
      if (!(err <= bound[i])) {
        bad++;
        if (err / (bound[i] + 1e-300) > worst) worst = err / (bound[i] + 1e-300);
      }
      if (memcmp(&snap[yidx[i]], &v, 4) != 0) bad_epi++;
    }
    for (int64_t b = 0; b < f->batch; b++)
      if (imgc[b] != 1) bad_epi++;
    /* nothing outside the output: count elements that changed vs outputs */
    int64_t changed = 0;
    for (int64_t i = 0; i < y.len; i++)
      if (memcmp(&y.buf[i], &(float){777.0f}, 4) != 0) changed++;
    int64_t maybe = 0;
    for (int64_t i = 0; i < nout; i++)
      if (memcmp(&y.buf[yidx[i]], &(float){777.0f}, 4) != 0) maybe++;
    if (changed != maybe) bad++;
    if (ti == 0)
      memcpy(first, y.buf, (size_t)y.len * sizeof(float));
    else if (memcmp(first, y.buf, (size_t)y.len * sizeof(float)) != 0)
      bad_det++;
    if (bad || bad_epi || bad_det) {
      failed = 1;
      CHECK(0,
            "conv S=%d b=%ld G=%ld cg=%ld og=%ld in=%ld,%ld,%ld win=%ld,%ld,%ld out=%ld,%ld,%ld "
            "st=%ld,%ld,%ld pad=%ld,%ld,%ld ld=%ld,%ld,%ld rd=%ld,%ld,%ld rev=%d%d%d lay=%d%d%d "
            "threads=%d: wrong=%d (worst %.3g x bound) epi=%d det=%d",
            S, (long)f->batch, (long)f->G, (long)f->cg, (long)f->og, (long)f->in[0],
            (long)f->in[1], (long)f->in[2], (long)f->win[0], (long)f->win[1], (long)f->win[2],
            (long)f->out[0], (long)f->out[1], (long)f->out[2], (long)f->stride[0],
            (long)f->stride[1], (long)f->stride[2], (long)f->pad_lo[0], (long)f->pad_lo[1],
            (long)f->pad_lo[2], (long)f->ld[0], (long)f->ld[1], (long)f->ld[2], (long)f->rd[0],
            (long)f->rd[1], (long)f->rd[2], f->rev[0], f->rev[1], f->rev[2], f->xl, f->wl, f->yl,
            threads[ti], bad, worst, bad_epi, bad_det);
    } else {
      CHECK(1, "ok");
    }
  }
  if (verbose) printf("  conv S=%d ... %s\n", S, failed ? "FAIL" : "ok");
  free(x.buf), free(w.buf), free(y.buf), free(ref), free(bound), free(yidx), free(first);
  free(snap), free((void*)imgc);
  return failed;
}

static void random_cfg(Cfg* f) {
  memset(f, 0, sizeof *f);
  f->spatial = (int)rng_int(0, 3);
  if (rng_int(0, 2) == 0) f->spatial = 2;
  f->batch = rng_int(1, 3);
  int kind = (int)rng_int(0, 5);
  f->G = kind == 0 ? rng_int(2, 4) : 1;
  f->cg = rng_int(1, 6);
  f->og = rng_int(1, 20);
  if (kind == 1) { /* depthwise */
    f->G = rng_int(2, 8);
    f->cg = 1;
    f->og = rng_int(1, 2);
  }
  if (kind == 2) { /* wider */
    f->cg = rng_int(8, 40);
    f->og = rng_int(16, 40);
  }
  for (int d = 0; d < f->spatial; d++) {
    f->in[d] = rng_int(1, f->spatial == 3 ? 5 : 12);
    f->win[d] = rng_int(1, 4);
    f->stride[d] = rng_int(0, 2) ? 1 : rng_int(2, 3);
    f->ld[d] = rng_int(0, 4) ? 1 : 2;
    f->rd[d] = rng_int(0, 4) ? 1 : 2;
    f->pad_lo[d] = rng_int(-1, 3);
    int64_t pad_hi = rng_int(-1, 3);
    f->rev[d] = rng_int(0, 4) == 0;
    int64_t din = (f->in[d] - 1) * f->ld[d] + 1, dwin = (f->win[d] - 1) * f->rd[d] + 1;
    int64_t span = din + f->pad_lo[d] + pad_hi - dwin;
    if (span < 0 && rng_int(0, 5)) { /* mostly non-empty: pad the high side */
      pad_hi += -span + rng_int(0, 2);
      span = din + f->pad_lo[d] + pad_hi - dwin;
    }
    f->out[d] = span >= 0 ? span / f->stride[d] + 1 : 0;
  }
  f->xl = (int)rng_int(0, 2);
  f->wl = (int)rng_int(0, 2);
  f->yl = f->xl == 1 && rng_int(0, 3) ? 1 : (int)rng_int(0, 2);
}

int main(int argc, char** argv) {
  int cases = argc > 1 ? atoi(argv[1]) : 400;
  printf("test_conv: isa=%s cases=%d\n", kiln_runtime_isa(), cases);
  /* fixed: ResNet-like shapes at small sizes, NCHW and NHWC */
  for (int lay = 0; lay < 2; lay++) {
    Cfg f;
    memset(&f, 0, sizeof f);
    f.spatial = 2, f.batch = 2, f.G = 1, f.cg = 3, f.og = 16;
    for (int d = 0; d < 2; d++)
      f.in[d] = 20, f.win[d] = 7, f.stride[d] = 2, f.pad_lo[d] = 3, f.ld[d] = 1, f.rd[d] = 1,
      f.out[d] = 10;
    f.xl = f.wl = f.yl = lay;
    run_conv(&f, 0);
    f.cg = 32, f.og = 40;
    for (int d = 0; d < 2; d++)
      f.in[d] = 9, f.win[d] = 3, f.stride[d] = 1, f.pad_lo[d] = 1, f.out[d] = 9;
    run_conv(&f, 0);
    for (int d = 0; d < 2; d++)
      f.in[d] = 9, f.win[d] = 1, f.stride[d] = 2, f.pad_lo[d] = 0, f.out[d] = 5;
    run_conv(&f, 0);
    f.batch = 5, f.cg = 40, f.og = 33;
    for (int d = 0; d < 2; d++)
      f.in[d] = 2, f.win[d] = 3, f.stride[d] = 1, f.pad_lo[d] = 1, f.out[d] = 2;
    run_conv(&f, 0);
  }
  for (int i = 0; i < cases; i++) {
    Cfg f;
    random_cfg(&f);
    run_conv(&f, 0);
  }
  return test_summary("test_conv");
}
