/*
 * bench.c — benchmarks of the native runtime: clock and FMA peak, thread-pool dispatch,
 * SGEMM (square, GEMV, batched attention shapes), ResNet-18 convolution layers.
 * Times are the best of several repetitions (wall clock); GFLOP/s count 2 flops per
 * multiply-add. Usage: bench [quick]
 */
#include <sched.h>

#include "test_common.h"
#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

static int quick;
static float* rand_buf(int64_t n);

/* ---- clock and peak --------------------------------------------------------------------------- */

/* Clock from a chain of dependent vector FMAs (4 cycles each on current Intel and AMD cores),
 * on the widest vectors of this build so it runs at the same frequency licence as the GEMM. */
static double measure_clock_ghz(void) {
  const long n = 100000000;
  double best = 1e30;
  for (int r = 0; r < 3; r++) {
    double t0 = cpu_s();
#if defined(__AVX512F__)
    __m512 a = _mm512_set1_ps(1.0f), b = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
    for (long i = 0; i < n; i++) {
      a = _mm512_fmadd_ps(a, b, c);
      __asm__ volatile("" : "+v"(a));
    }
    float s = _mm512_cvtss_f32(a);
#elif defined(__AVX2__) && defined(__FMA__)
    __m256 a = _mm256_set1_ps(1.0f), b = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
    for (long i = 0; i < n; i++) {
      a = _mm256_fmadd_ps(a, b, c);
      __asm__ volatile("" : "+x"(a));
    }
    float s = _mm256_cvtss_f32(a);
#else
    float a = 1.0f;
    for (long i = 0; i < n; i++) {
      a = a * 0.999999f + 1e-7f; /* mul + add: 8 cycles dependent on most cores */
      __asm__ volatile("" : "+x"(a));
    }
    float s = a;
#endif
    double t = cpu_s() - t0;
    if (s == 12345.0f) printf(" ");
    if (t < best) best = t;
  }
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
  return 4.0 * n / best * 1e-9;
#else
  return 8.0 * n / best * 1e-9;
#endif
}

/* FMA throughput with 12 independent chains: the machine's real vector peak (GFLOP/s). */
static double measure_fma_peak(void) {
#if defined(__AVX512F__)
  const long n = 20000000;
  double best = 1e30;
  for (int r = 0; r < 5; r++) {
    __m512 c[12], a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
    for (int i = 0; i < 12; i++) c[i] = _mm512_set1_ps((float)i);
    double t0 = cpu_s();
    for (long i = 0; i < n; i++) {
      for (int j = 0; j < 12; j++) c[j] = _mm512_fmadd_ps(c[j], a, b);
      __asm__ volatile("" : "+v"(c[0]), "+v"(c[1]), "+v"(c[2]), "+v"(c[3]), "+v"(c[4]), "+v"(c[5]),
                       "+v"(c[6]), "+v"(c[7]), "+v"(c[8]), "+v"(c[9]), "+v"(c[10]), "+v"(c[11]));
    }
    double t = cpu_s() - t0;
    float s = 0;
    for (int i = 0; i < 12; i++) s += _mm512_cvtss_f32(c[i]);
    if (s == 12345.0f) printf(" ");
    if (t < best) best = t;
  }
  return 12.0 * 32.0 * n / best * 1e-9;
#else
  return 0;
#endif
}

/* ---- thread pool ------------------------------------------------------------------------------- */

static void empty_task(void* ctx, int64_t lo, int64_t hi) {
  (void)ctx, (void)lo, (void)hi;
}

static void bench_pool(void) {
  kiln_set_num_threads(0);
  int t = kiln_get_num_threads();
  if (t < 2) {
    printf("pool: 1 thread, dispatch is a call\n");
    return;
  }
  kiln_pool_for(empty_task, NULL, 1000, 1); /* start the workers */
  double best = 1e30;
  for (int r = 0; r < 5; r++) {
    const int n = 20000;
    double t0 = wall_s();
    for (int i = 0; i < n; i++) kiln_pool_for_parts(empty_task, NULL, t, t);
    double per = (wall_s() - t0) / n;
    if (per < best) best = per;
  }
  /* cold: after the workers went to sleep */
  double cold = 0;
  for (int r = 0; r < 5; r++) {
    struct timespec ts = {0, 5000000};
    nanosleep(&ts, NULL);
    double t0 = wall_s();
    kiln_pool_for_parts(empty_task, NULL, t, t);
    cold += (wall_s() - t0) / 5;
  }
  printf("pool (%d threads): dispatch + join of an empty job: %.2f us hot, %.1f us after sleep\n",
         t, best * 1e6, cold * 1e6);
}

/* ---- memory read bandwidth (the GEMV ceiling) ---------------------------------------------------- */

typedef struct ReadCtx {
  const float* p;
  double sums[64];
} ReadCtx;

static void read_range(void* v, int64_t lo, int64_t hi) {
  ReadCtx* c = (ReadCtx*)v;
  float acc[16] = {0};
  for (int64_t i = lo * 4096; i < hi * 4096; i += 16)
    for (int j = 0; j < 16; j++) acc[j] += c->p[i + j];
  double s = 0;
  for (int j = 0; j < 16; j++) s += acc[j];
  c->sums[lo % 64] += s;
}

static void bench_read(void) {
  const int64_t n = (int64_t)1 << 26; /* 256 MiB */
  float* p = rand_buf(n);
  ReadCtx c;
  memset(&c, 0, sizeof c);
  c.p = p;
  for (int th = 1; th <= 2; th++) {
    kiln_set_num_threads(th);
    double best = 1e30;
    for (int r = 0; r < (quick ? 2 : 4); r++) {
      double t0 = wall_s();
      kiln_pool_for_parts(read_range, &c, n / 4096, th);
      double t = wall_s() - t0;
      if (t < best) best = t;
    }
    printf("memory read (256 MiB, sum) %d thread%s: %.1f GB/s\n", th, th > 1 ? "s" : " ", n * 4.0 / best * 1e-9);
  }
  free(p);
}

/* ---- GEMM -------------------------------------------------------------------------------------- */

typedef struct GemmBench {
  float *A, *B, *C;
} GemmBench;

static double time_gemm(const KilnGemm* g, double min_time) {
  kiln_sgemm(g);
  double best = 1e30;
  int reps = quick ? 3 : 7;
  for (int r = 0; r < reps; r++) {
    int it = 0;
    double t0 = wall_s(), t;
    do {
      kiln_sgemm(g);
      it++;
      t = wall_s();
    } while (t - t0 < min_time);
    double per = (t - t0) / it;
    if (per < best) best = per;
  }
  return best;
}

static float* rand_buf(int64_t n) {
  float* p = (float*)xalloc((size_t)n * sizeof(float));
  for (int64_t i = 0; i < n; i++) p[i] = rng_float();
  return p;
}

static void gemm_square(int64_t n, double peak_clock, double peak_fma) {
  float *A = rand_buf(n * n), *B = rand_buf(n * n), *C = rand_buf(n * n);
  KilnGemm g;
  memset(&g, 0, sizeof g);
  g.batch = 1, g.M = n, g.N = n, g.K = n;
  g.A = A, g.a_m.stride = n, g.a_k.stride = 1;
  g.B = B, g.b_k.stride = n, g.b_n.stride = 1;
  g.C = C, g.m_lim = n, g.n_lim = n, g.k_lim = n;
  double fl = 2.0 * n * n * n;
  for (int th = 1; th <= 2; th++) {
    kiln_set_num_threads(th);
    double t = time_gemm(&g, quick ? 0.05 : 0.15);
    double gf = fl / t * 1e-9;
    if (th == 1)
      printf("sgemm %4ldx%4ldx%4ld  1 thread : %6.1f GFLOP/s  (%.0f%% of 64 x clock, %.0f%% of FMA loop)\n",
             (long)n, (long)n, (long)n, gf, 100 * gf / peak_clock, peak_fma > 0 ? 100 * gf / peak_fma : 0);
    else
      printf("sgemm %4ldx%4ldx%4ld  2 threads: %6.1f GFLOP/s\n", (long)n, (long)n, (long)n, gf);
  }
  /* transposed A and B */
  g.a_m.stride = 1, g.a_k.stride = n, g.b_k.stride = 1, g.b_n.stride = n;
  kiln_set_num_threads(1);
  double t = time_gemm(&g, quick ? 0.05 : 0.1);
  printf("sgemm %4ldx%4ldx%4ld  A^T B^T 1 thread: %6.1f GFLOP/s\n", (long)n, (long)n, (long)n, fl / t * 1e-9);
  free(A), free(B), free(C);
}

static void gemv(int64_t K, int64_t N, int transposed) {
  float *A = rand_buf(K), *B = rand_buf(K * N), *C = rand_buf(N);
  KilnGemm g;
  memset(&g, 0, sizeof g);
  g.batch = 1, g.M = 1, g.N = N, g.K = K;
  g.A = A, g.a_m.stride = K, g.a_k.stride = 1;
  g.B = B;
  if (transposed) g.b_k.stride = 1, g.b_n.stride = K;
  else g.b_k.stride = N, g.b_n.stride = 1;
  g.C = C, g.m_lim = 1, g.n_lim = N, g.k_lim = K;
  for (int th = 1; th <= 2; th++) {
    kiln_set_num_threads(th);
    double t = time_gemm(&g, quick ? 0.05 : 0.2);
    printf("gemv 1x%ldx%ld%s %d thread%s: %6.1f GB/s (%.3f ms, %.1f GFLOP/s)\n", (long)K, (long)N,
           transposed ? " (B as [N][K])" : " (B as [K][N])", th, th > 1 ? "s" : " ",
           (double)K * N * 4 / t * 1e-9, t * 1e3, 2.0 * K * N / t * 1e-9);
  }
  free(A), free(B), free(C);
}

static void small_m(int64_t M, int64_t K, int64_t N) {
  float *A = rand_buf(M * K), *B = rand_buf(K * N), *C = rand_buf(M * N);
  KilnGemm g;
  memset(&g, 0, sizeof g);
  g.batch = 1, g.M = M, g.N = N, g.K = K;
  g.A = A, g.a_m.stride = K, g.a_k.stride = 1;
  g.B = B, g.b_k.stride = N, g.b_n.stride = 1;
  g.C = C, g.m_lim = M, g.n_lim = N, g.k_lim = K;
  for (int th = 1; th <= 2; th++) {
    kiln_set_num_threads(th);
    double t = time_gemm(&g, quick ? 0.05 : 0.15);
    printf("sgemm %ldx%ldx%ld (small M) %d thread%s: %6.1f GFLOP/s, B streamed at %.1f GB/s\n",
           (long)M, (long)K, (long)N, th, th > 1 ? "s" : " ", 2.0 * M * N * K / t * 1e-9,
           (double)K * N * 4 / t * 1e-9);
  }
  free(A), free(B), free(C);
}

static void batched(int64_t batch, int64_t M, int64_t K, int64_t N, int bt) {
  float *A = rand_buf(batch * M * K), *B = rand_buf(batch * K * N), *C = rand_buf(batch * M * N);
  KilnGemm g;
  memset(&g, 0, sizeof g);
  g.batch = batch, g.M = M, g.N = N, g.K = K;
  g.A = A, g.a_batch.stride = M * K, g.a_m.stride = K, g.a_k.stride = 1;
  g.B = B, g.b_batch.stride = K * N;
  if (bt) g.b_k.stride = 1, g.b_n.stride = K; /* Q K^T: K stored [N][K] */
  else g.b_k.stride = N, g.b_n.stride = 1;
  g.C = C, g.m_lim = M, g.n_lim = N, g.k_lim = K;
  for (int th = 1; th <= 2; th++) {
    kiln_set_num_threads(th);
    double t = time_gemm(&g, quick ? 0.05 : 0.15);
    printf("batched %ldx(%ldx%ldx%ld)%s %d thread%s: %6.1f GFLOP/s (%.1f us)\n", (long)batch,
           (long)M, (long)K, (long)N, bt ? " B^T" : "    ", th, th > 1 ? "s" : " ",
           2.0 * batch * M * N * K / t * 1e-9, t * 1e6);
  }
  free(A), free(B), free(C);
}

/* ---- convolution ------------------------------------------------------------------------------- */

static void conv_layer(const char* name, int64_t batch, int64_t cin, int64_t cout, int64_t hw,
                       int64_t win, int64_t stride, int64_t pad, int nhwc) {
  int64_t out = (hw + 2 * pad - win) / stride + 1;
  float* x = rand_buf(batch * cin * hw * hw);
  float* w = rand_buf(cout * cin * win * win);
  float* y = rand_buf(batch * cout * out * out);
  KilnConv c;
  memset(&c, 0, sizeof c);
  c.spatial = 2, c.batch = batch, c.c_in = cin, c.o_count = cout, c.groups = 1;
  c.x = x, c.w = w, c.y = y;
  if (!nhwc) {
    c.x_sb = cin * hw * hw, c.x_sf = hw * hw, c.x_ss[0] = hw, c.x_ss[1] = 1;
    c.w_so = cin * win * win, c.w_si = win * win, c.w_ss[0] = win, c.w_ss[1] = 1; /* OIHW */
    c.y_sb = cout * out * out, c.y_sf = out * out, c.y_ss[0] = out, c.y_ss[1] = 1;
  } else {
    c.x_sb = cin * hw * hw, c.x_sf = 1, c.x_ss[0] = hw * cin, c.x_ss[1] = cin;
    c.w_so = 1, c.w_si = cout, c.w_ss[0] = win * cin * cout, c.w_ss[1] = cin * cout; /* HWIO */
    c.y_sb = cout * out * out, c.y_sf = 1, c.y_ss[0] = out * cout, c.y_ss[1] = cout;
  }
  for (int d = 0; d < 2; d++) {
    c.in_size[d] = hw, c.win[d] = win, c.out_size[d] = out;
    c.stride[d] = stride, c.pad_lo[d] = pad, c.lhs_dil[d] = 1, c.rhs_dil[d] = 1;
  }
  double fl = 2.0 * batch * cout * out * out * cin * win * win;
  double gf[2];
  for (int th = 1; th <= 2; th++) {
    kiln_set_num_threads(th);
    kiln_sconv(&c);
    double best = 1e30;
    for (int r = 0; r < (quick ? 3 : 7); r++) {
      int it = 0;
      double t0 = wall_s(), t;
      do {
        kiln_sconv(&c);
        it++;
        t = wall_s();
      } while (t - t0 < (quick ? 0.03 : 0.1));
      double per = (t - t0) / it;
      if (per < best) best = per;
    }
    gf[th - 1] = fl / best * 1e-9;
  }
  printf("conv %-28s %s: %6.1f GFLOP/s 1 thread, %6.1f GFLOP/s 2 threads (%.2f GFLOP)\n", name,
         nhwc ? "NHWC" : "NCHW", gf[0], gf[1], fl * 1e-9);
  free(x), free(w), free(y);
}

int main(int argc, char** argv) {
  quick = argc > 1 && strcmp(argv[1], "quick") == 0;
  printf("bench: isa=%s threads(default)=%d\n", kiln_runtime_isa(), kiln_get_num_threads());
  double ghz = measure_clock_ghz();
  double pk = measure_fma_peak();
#if defined(__AVX512F__)
  const double lanes = 16;
#elif defined(__AVX2__)
  const double lanes = 8;
#else
  const double lanes = 4;
#endif
  double peak = lanes * 2 * 2 * ghz;
  printf("clock (dependent vector FMA chain, 4-cycle latency): %.2f GHz -> peak %.0f x 2 x 2 x clock = %.1f GFLOP/s; 12-chain FMA loop: %.1f GFLOP/s\n",
         ghz, lanes, peak, pk);
  bench_pool();
  gemm_square(1024, peak, pk);
  gemm_square(512, peak, pk);
  gemm_square(256, peak, pk);
  bench_read();
  gemv(768, 3072, 0);
  gemv(768, 3072, 1);
  gemv(768, 50257, 0);
  gemv(768, 50257, 1);
  small_m(4, 768, 3072);
  small_m(8, 768, 3072);
  small_m(16, 768, 3072);
  small_m(32, 768, 3072);
  batched(12, 128, 64, 128, 1);
  batched(12, 128, 128, 64, 0);
  /* ResNet-18 at batch 8, 64x64 input images */
  conv_layer("conv1 3->64 7x7 s2 p3 64x64", 8, 3, 64, 64, 7, 2, 3, 0);
  conv_layer("layer1 64->64 3x3 p1 16x16", 8, 64, 64, 16, 3, 1, 1, 0);
  conv_layer("layer2 64->128 3x3 s2 p1 16x16", 8, 64, 128, 16, 3, 2, 1, 0);
  conv_layer("layer2 128->128 3x3 p1 8x8", 8, 128, 128, 8, 3, 1, 1, 0);
  conv_layer("layer2 down 64->128 1x1 s2", 8, 64, 128, 16, 1, 2, 0, 0);
  conv_layer("layer3 256->256 3x3 p1 4x4", 8, 256, 256, 4, 3, 1, 1, 0);
  conv_layer("layer3 down 128->256 1x1 s2", 8, 128, 256, 8, 1, 2, 0, 0);
  conv_layer("layer4 512->512 3x3 p1 2x2", 8, 512, 512, 2, 3, 1, 1, 0);
  conv_layer("layer4 down 256->512 1x1 s2", 8, 256, 512, 4, 1, 2, 0, 0);
  conv_layer("layer1 64->64 3x3 p1 16x16", 8, 64, 64, 16, 3, 1, 1, 1);
  conv_layer("layer3 256->256 3x3 p1 4x4", 8, 256, 256, 4, 3, 1, 1, 1);
  return 0;
}
