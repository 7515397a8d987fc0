/*
 * bench_models.c — the GEMM and convolution calls real models make, timed as the models make
 * them (test/run.sh bench models).
 *
 *   GPT-2 small forward (seq 128, batch 1): the seven sgemm calls of KILN_GEMM_TRACE=1 with
 *   their exact KilnAxis strides and epilogues (bias; bias + tanh-GELU), then token generation
 *   (the same calls with M = 1: GEMV). Weights (the B operand of the projections and the LM
 *   head) rotate through enough copies that every call reads them from memory, as a forward
 *   pass over 12 layers does; activations are reused (they are in cache in the model too).
 *   GFLOP/s count 2 flops per multiply-add; GB/s count the operands' bytes once (A + B + C).
 *   The streaming-read ceiling is measured first (the GEMV target).
 *
 *   ResNet-18 (channels 64-128-256-512, batch 8, 3x64x64, NCHW / OIHW weights): every distinct
 *   convolution layer, with its multiplicity in the network.
 *
 * usage: bench_models [gemm|gemv|conv|read|all] [reps]    (default all; times are the best of
 *        reps rounds, default 7, each round at least ~0.1 s of calls). KILN_BENCH_ONLY=text
 *        runs only the GEMM shapes whose name contains text; KILN_BENCH_WARM=1 reuses one copy
 *        of the weights (in cache after the first call); KILN_BENCH_CPU=1 times 1-thread runs
 *        by the thread's CPU time (for A/B comparisons on a loaded machine); KILN_BENCH_THREADS=1
 *        skips the 2-thread runs.
 */
#include <sched.h>

#include "../kiln_math.h"
#include "test_common.h"
#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

static int reps = 7;
static int max_threads = 2; /* KILN_BENCH_THREADS=1: 1-thread runs only */

static float* rand_buf(int64_t n) {
  float* p = (float*)xalloc((size_t)(n > 0 ? n : 1) * sizeof(float));
  for (int64_t i = 0; i < n; i++) p[i] = rng_float();
  return p;
}

/* ---- streaming read ceiling ------------------------------------------------------------------ */

typedef struct ReadCtx {
  const float* p;
  int64_t chunk;
  float sums[64 * 16];
} ReadCtx;

static void read_range(void* v, int64_t lo, int64_t hi) {
  ReadCtx* c = (ReadCtx*)v;
  const float* p = c->p + lo * c->chunk;
  const int64_t n = (hi - lo) * c->chunk;
#if defined(__AVX512F__)
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (int64_t i = 0; i < n; i += 64) {
    a0 = _mm512_add_ps(a0, _mm512_load_ps(p + i));
    a1 = _mm512_add_ps(a1, _mm512_load_ps(p + i + 16));
    a2 = _mm512_add_ps(a2, _mm512_load_ps(p + i + 32));
    a3 = _mm512_add_ps(a3, _mm512_load_ps(p + i + 48));
  }
  _mm512_storeu_ps(c->sums + (lo % 64) * 16,
                   _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
#else
  float acc[16] = {0};
  for (int64_t i = 0; i < n; i += 16)
    for (int j = 0; j < 16; j++) acc[j] += p[i + j];
  for (int j = 0; j < 16; j++) c->sums[(lo % 64) * 16 + j] = acc[j];
#endif
}

static double read_gbs[3];
static float* read_buf;
static const int64_t read_n = (int64_t)1 << 27; /* 512 MiB */

/* streaming-read bandwidth now (best of 3 passes), for ratios taken next to a measurement */
static double read_now(int threads) {
  ReadCtx c;
  memset(&c, 0, sizeof c);
  c.p = read_buf;
  c.chunk = 1 << 16;
  kiln_set_num_threads(threads);
  double best = 1e30;
  for (int r = 0; r < 3; r++) {
    double t0 = wall_s();
    kiln_pool_for_parts(read_range, &c, read_n / c.chunk, threads);
    double t = wall_s() - t0;
    if (t < best) best = t;
  }
  return read_n * 4.0 / best * 1e-9;
}

static void bench_read(void) {
  const int64_t n = read_n;
  if (!read_buf) read_buf = rand_buf(n);
  float* p = read_buf;
  ReadCtx c;
  memset(&c, 0, sizeof c);
  c.p = p;
  c.chunk = 1 << 16;
  for (int th = 1; th <= max_threads; th++) {
    kiln_set_num_threads(th);
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
      double t0 = wall_s();
      kiln_pool_for_parts(read_range, &c, n / c.chunk, th);
      double t = wall_s() - t0;
      if (t < best) best = t;
    }
    read_gbs[th] = n * 4.0 / best * 1e-9;
    printf("streaming read, 512 MiB, %d thread%s: %.1f GB/s\n", th, th > 1 ? "s" : " ",
           read_gbs[th]);
  }
}

/* ---- epilogues as the generated tile kernels do them --------------------------------------------- */

typedef struct EpiArgs {
  float* C;
  const float* bias;
  int64_t N;
  int gelu;
} EpiArgs;

static void epi_tile(const KilnArgs* a, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
  const EpiArgs* e = (const EpiArgs*)a->buf[0];
  for (int64_t r = r0; r < r1; r++) {
    float* row = e->C + r * e->N;
    if (e->gelu) {
      for (int64_t c = c0; c < c1; c++) {
        const float x = row[c] + e->bias[c];
        row[c] = 0.5f * x * (1.0f + kiln_tanhf(0.7978845608f * (x + 0.044715f * x * x * x)));
      }
    } else {
      for (int64_t c = c0; c < c1; c++) row[c] = row[c] + e->bias[c];
    }
  }
}

/* ---- GEMM shapes ------------------------------------------------------------------------------------ */

typedef struct Shape {
  const char* name;
  int count; /* calls per forward / per token */
  int64_t batch, M, N, K;
  int64_t as[3], bs[3]; /* batch, m, k / batch, k, n strides */
  int epi;              /* 0 none, 1 bias, 2 bias + GELU */
  int cold_b;           /* B is a weight: read from memory on every call */
} Shape;

static int64_t span(const int64_t* s, int64_t d0, int64_t d1, int64_t d2) {
  return (d0 - 1) * s[0] + (d1 - 1) * s[1] + (d2 - 1) * s[2] + 1;
}

/* returns seconds per call (best round) */
static double time_shape(const Shape* s, int threads, double* gflops, double* gbs) {
  const int64_t alen = span(s->as, s->batch, s->M, s->K);
  const int64_t blen = span(s->bs, s->batch, s->K, s->N);
  const int64_t clen = s->batch * s->M * s->N;
  int copies = 1;
  const char* warm = getenv("KILN_BENCH_WARM");
  if (s->cold_b && !(warm && *warm == '1')) {
    copies = (int)(((int64_t)384 << 20) / (blen * 4)) + 1;
    if (copies < 3) copies = 3;
  }
  static float* Bs[512];
  float* A = rand_buf(alen);
  for (int i = 0; i < copies; i++) Bs[i] = rand_buf(blen);
  float* C = rand_buf(clen);
  float* bias = rand_buf(s->N);
  EpiArgs ea = {C, bias, s->N, s->epi == 2};
  void* bufs[1] = {&ea};
  KilnArgs args = {bufs, NULL};
  KilnGemm g;
  memset(&g, 0, sizeof g);
  g.batch = s->batch, g.M = s->M, g.N = s->N, g.K = s->K;
  g.A = A, g.a_batch.stride = s->as[0], g.a_m.stride = s->as[1], g.a_k.stride = s->as[2];
  g.b_batch.stride = s->bs[0], g.b_k.stride = s->bs[1], g.b_n.stride = s->bs[2];
  g.C = C, g.m_lim = s->M, g.n_lim = s->N, g.k_lim = s->K;
  if (s->epi) g.epilogue = epi_tile, g.epilogue_args = &args;
  kiln_set_num_threads(threads);
  const double fl = 2.0 * s->batch * s->M * s->N * s->K;
  /* at least ~0.1 s and one pass over the copies per round */
  int per_round = (int)(0.1 / (fl / 100e9)) + 1;
  if (per_round < copies) per_round = copies;
  if (per_round > 20000) per_round = 20000;
  g.B = Bs[0];
  kiln_sgemm(&g);
  double best = 1e30;
  int next = 0;
  const int use_cpu = threads == 1 && getenv("KILN_BENCH_CPU") && *getenv("KILN_BENCH_CPU") == '1';
  for (int r = 0; r < reps; r++) {
    double t0 = use_cpu ? cpu_s() : wall_s();
    for (int i = 0; i < per_round; i++) {
      g.B = Bs[next];
      next = next + 1 == copies ? 0 : next + 1;
      kiln_sgemm(&g);
    }
    double per = ((use_cpu ? cpu_s() : wall_s()) - t0) / per_round;
    if (per < best) best = per;
  }
  *gflops = fl / best * 1e-9;
  /* bytes the call must move at least: A (the rows it reads), B, C */
  const double bytes = 4.0 * ((double)s->batch * s->M * s->K + (double)s->batch * s->K * s->N +
                              (double)clen);
  *gbs = bytes / best * 1e-9;
  free(A), free(C), free(bias);
  for (int i = 0; i < copies; i++) free(Bs[i]);
  return best;
}

static void run_shapes(const char* title, const Shape* sh, int n, int gemv) {
  printf("\n%s\n", title);
  printf("  %-34s %5s %14s %14s %9s\n", "shape (batch M N K)", "calls", "1 thread", "2 threads",
         "2T/1T");
  double tot[3] = {0, 0, 0};
  for (int i = 0; i < n; i++) {
    const Shape* s = &sh[i];
    const char* only = getenv("KILN_BENCH_ONLY");
    if (only && *only && !strstr(s->name, only)) continue;
    double gf[3] = {0, 0, 0}, gb[3] = {0, 0, 0}, t[3] = {0, 1e30, 1e30}, rd[3] = {0, 1, 1};
    for (int th = 1; th <= max_threads; th++) {
      if (gemv) rd[th] = read_now(th); /* the ceiling now: the machine may be shared */
      t[th] = time_shape(s, th, &gf[th], &gb[th]);
    }
    char desc[96];
    snprintf(desc, sizeof desc, "%s %ldx%ldx%ldx%ld", s->name, (long)s->batch, (long)s->M,
             (long)s->N, (long)s->K);
    if (gemv)
      printf("  %-34s %5d %6.1f GB/s %1s %6.1f GB/s %1s %8.2fx  (%.0f%% / %.0f%% of a read measured "
             "just before: %.1f / %.1f GB/s)\n", desc, s->count, gb[1], "", gb[2], "", t[1] / t[2],
             100 * gb[1] / rd[1], 100 * gb[2] / rd[2], rd[1], rd[2]);
    else
      printf("  %-34s %5d %7.1f GF/s %7.1f GF/s %8.2fx  (%.1f / %.1f GB/s, %.3f ms)\n", desc,
             s->count, gf[1], gf[2], t[1] / t[2], gb[1], gb[2], t[1] * 1e3);
    for (int th = 1; th <= 2; th++) tot[th] += s->count * t[th];
  }
  if (max_threads > 1)
    printf("  %-34s %5s %9.2f ms %9.2f ms %8.2fx\n", "total (calls x time)", "", tot[1] * 1e3,
           tot[2] * 1e3, tot[1] / tot[2]);
  else
    printf("  %-34s %5s %9.2f ms\n", "total (calls x time)", "", tot[1] * 1e3);
}

static void bench_gemm(void) {
  static const Shape fwd[] = {
      {"qkv x@W+b", 12, 1, 128, 2304, 768, {0, 768, 1}, {0, 2304, 1}, 1, 1},
      {"attn-out x@W+b", 12, 1, 128, 768, 768, {0, 768, 1}, {0, 768, 1}, 1, 1},
      {"mlp-up x@W+b,gelu", 12, 1, 128, 3072, 768, {0, 768, 1}, {0, 3072, 1}, 2, 1},
      {"mlp-down x@W", 12, 1, 128, 768, 3072, {0, 3072, 1}, {0, 768, 1}, 0, 1},
      {"attn Q K^T", 12, 12, 128, 128, 64, {64, 768, 1}, {64, 1, 768}, 0, 0},
      {"attn P V", 12, 12, 128, 64, 128, {16384, 128, 1}, {64, 768, 1}, 0, 0},
      {"lm-head x@wte^T", 1, 1, 128, 50257, 768, {0, 768, 1}, {0, 1, 768}, 0, 1},
  };
  run_shapes("GPT-2 small forward, seq 128 (weights cold; GF/s)", fwd, 7, 0);
}

static void bench_gemv(void) {
  static const Shape tok[] = {
      {"qkv x@W+b", 12, 1, 1, 2304, 768, {0, 768, 1}, {0, 2304, 1}, 1, 1},
      {"attn-out x@W+b", 12, 1, 1, 768, 768, {0, 768, 1}, {0, 768, 1}, 1, 1},
      {"mlp-up x@W+b,gelu", 12, 1, 1, 3072, 768, {0, 768, 1}, {0, 3072, 1}, 2, 1},
      {"mlp-down x@W", 12, 1, 1, 768, 3072, {0, 3072, 1}, {0, 768, 1}, 0, 1},
      {"lm-head x@wte^T", 1, 1, 1, 50257, 768, {0, 768, 1}, {0, 1, 768}, 0, 1},
  };
  run_shapes("GPT-2 small token generation, M = 1 (weights cold; GB/s of A + B + C)", tok, 5, 1);
  static const Shape att[] = {
      {"attn q K^T (cache 128)", 12, 12, 1, 128, 64, {64, 768, 1}, {64, 1, 768}, 0, 0},
      {"attn p V (cache 128)", 12, 12, 1, 64, 128, {128, 128, 1}, {64, 768, 1}, 0, 0},
  };
  run_shapes("token generation attention, M = 1 (GF/s)", att, 2, 0);
}

/* ---- ResNet-18 convolutions -------------------------------------------------------------------------- */

static double conv_time(KilnConv* c, int threads) {
  kiln_set_num_threads(threads);
  kiln_sconv(c);
  double best = 1e30;
  for (int r = 0; r < reps; r++) {
    int it = 0;
    double t0 = wall_s(), t;
    do {
      kiln_sconv(c);
      it++;
      t = wall_s();
    } while (t - t0 < 0.08);
    double per = (t - t0) / it;
    if (per < best) best = per;
  }
  return best;
}

static void conv_layer(const char* name, int count, int64_t batch, int64_t cin, int64_t cout,
                       int64_t hw, int64_t win, int64_t stride, int64_t pad, double* tot) {
  int64_t out = (hw + 2 * pad - win) / stride + 1;
  float* x = rand_buf(batch * cin * hw * hw);
  float* w = rand_buf(cout * cin * win * win);
  float* y = rand_buf(batch * cout * out * out);
  KilnConv c;
  memset(&c, 0, sizeof c);
  c.spatial = 2, c.batch = batch, c.c_in = cin, c.o_count = cout, c.groups = 1;
  c.x = x, c.w = w, c.y = y;
  c.x_sb = cin * hw * hw, c.x_sf = hw * hw, c.x_ss[0] = hw, c.x_ss[1] = 1;
  c.w_so = cin * win * win, c.w_si = win * win, c.w_ss[0] = win, c.w_ss[1] = 1; /* OIHW */
  c.y_sb = cout * out * out, c.y_sf = out * out, c.y_ss[0] = out, c.y_ss[1] = 1;
  for (int d = 0; d < 2; d++) {
    c.in_size[d] = hw, c.win[d] = win, c.out_size[d] = out;
    c.stride[d] = stride, c.pad_lo[d] = pad, c.lhs_dil[d] = 1, c.rhs_dil[d] = 1;
  }
  const double fl = 2.0 * batch * cout * out * out * cin * win * win;
  double t1 = conv_time(&c, 1), t2 = max_threads > 1 ? conv_time(&c, 2) : 1e30;
  printf("  %-34s %5d %7.1f GF/s %7.1f GF/s %8.2fx  (%.3f GFLOP, %.3f ms)\n", name, count,
         fl / t1 * 1e-9, fl / t2 * 1e-9, t1 / t2, fl * 1e-9, t1 * 1e3);
  tot[1] += count * t1, tot[2] += count * t2;
  free(x), free(w), free(y);
}

static void bench_conv(void) {
  printf("\nResNet-18, batch 8, 3x64x64, NCHW (GF/s)\n");
  printf("  %-34s %5s %12s %12s %9s\n", "layer", "calls", "1 thread", "2 threads", "2T/1T");
  double tot[3] = {0, 0, 0};
  conv_layer("conv1 3->64 7x7 s2 p3 64x64", 1, 8, 3, 64, 64, 7, 2, 3, tot);
  conv_layer("layer1 64->64 3x3 p1 16x16", 4, 8, 64, 64, 16, 3, 1, 1, tot);
  conv_layer("layer2.0 64->128 3x3 s2 16x16", 1, 8, 64, 128, 16, 3, 2, 1, tot);
  conv_layer("layer2 128->128 3x3 8x8", 3, 8, 128, 128, 8, 3, 1, 1, tot);
  conv_layer("layer2 down 64->128 1x1 s2", 1, 8, 64, 128, 16, 1, 2, 0, tot);
  conv_layer("layer3.0 128->256 3x3 s2 8x8", 1, 8, 128, 256, 8, 3, 2, 1, tot);
  conv_layer("layer3 256->256 3x3 4x4", 3, 8, 256, 256, 4, 3, 1, 1, tot);
  conv_layer("layer3 down 128->256 1x1 s2", 1, 8, 128, 256, 8, 1, 2, 0, tot);
  conv_layer("layer4.0 256->512 3x3 s2 4x4", 1, 8, 256, 512, 4, 3, 2, 1, tot);
  conv_layer("layer4 512->512 3x3 2x2", 3, 8, 512, 512, 2, 3, 1, 1, tot);
  conv_layer("layer4 down 256->512 1x1 s2", 1, 8, 256, 512, 4, 1, 2, 0, tot);
  if (max_threads > 1)
    printf("  %-34s %5s %9.2f ms %9.2f ms %8.2fx\n", "total (calls x time)", "", tot[1] * 1e3,
           tot[2] * 1e3, tot[1] / tot[2]);
  else
    printf("  %-34s %5s %9.2f ms\n", "total (calls x time)", "", tot[1] * 1e3);
}

int main(int argc, char** argv) {
  const char* what = argc > 1 ? argv[1] : "all";
  if (argc > 2) reps = atoi(argv[2]) > 0 ? atoi(argv[2]) : reps;
  const int all = strcmp(what, "all") == 0;
  if (getenv("KILN_BENCH_THREADS") && atoi(getenv("KILN_BENCH_THREADS")) == 1) max_threads = 1;
  printf("bench_models: isa=%s, best of %d rounds\n", kiln_runtime_isa(), reps);
  if (all || !strcmp(what, "read") || !strcmp(what, "gemv")) bench_read();
  if (!read_buf) read_buf = rand_buf(read_n);
  if (all || !strcmp(what, "gemm")) bench_gemm();
  if (all || !strcmp(what, "gemv")) bench_gemv();
  if (all || !strcmp(what, "conv")) bench_conv();
  return 0;
}
