/*
 * test_math.c — exhaustive accuracy test of kiln_math.h: every one of the 2^32 float inputs of
 * every function, against the double-precision libm result, in ulps of the exact value (the
 * float spacing at the double result's binade; subnormal spacing below 2^-126). Checks the
 * special values (NaN, infinities, signed zeros) and that a result is infinite exactly when
 * the correctly rounded one is. Runs on all threads.
 *
 * usage: test_math [function] [lo_hex hi_hex]    (default: all functions, all inputs)
 *        test_math quick                          (2^26 inputs spread over the range)
 *        test_math bench                          (ns per element vs libm)
 * Exits nonzero when a function exceeds its stated bound or a special value is wrong.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>

#include "../kiln_math.h"
#include "test_common.h"

typedef void (*vec_fn)(const float* x, float* y, int n);
typedef double (*ref_fn)(double);

#define VEC(name)                                                     \
  static void v_##name(const float* x, float* y, int n) {            \
    for (int i = 0; i < n; i++) y[i] = kiln_##name(x[i]);             \
  }
VEC(expf)
VEC(expm1f)
VEC(logf)
VEC(log1pf)
VEC(tanhf)
VEC(logisticf)
VEC(erff)

static double ref_logistic(double x) { return 1.0 / (1.0 + exp(-x)); }
static float libm_logistic(float x) { return 1.0f / (1.0f + expf(-x)); }

typedef struct Fn {
  const char* name;
  vec_fn vec;
  ref_fn ref;
  float (*libm)(float);
  double bound; /* the stated maximum error, ulps */
} Fn;

static const Fn fns[] = {
    {"expf", v_expf, exp, expf, 1.5},
    {"expm1f", v_expm1f, expm1, expm1f, 1.5},
    {"logf", v_logf, log, logf, 1.0},
    {"log1pf", v_log1pf, log1p, log1pf, 1.5},
    {"tanhf", v_tanhf, tanh, tanhf, 1.5},
    {"logisticf", v_logisticf, ref_logistic, libm_logistic, 2.0},
    {"erff", v_erff, erf, erff, 1.5},
};
#define NFN ((int)(sizeof fns / sizeof fns[0]))

static inline float bits_to_float(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* error of y against the exact r, in ulps; INFINITY for a wrong special value */
static inline double ulp_err(float y, double r) {
  if (r != r) return y != y ? 0 : INFINITY;
  if (y != y) return INFINITY;
  const float rf = (float)r;
  if (isinf(rf) || isinf(y)) return y == rf ? 0 : INFINITY;
  const double a = fabs(r);
  int ex;
  if (a == 0) {
    ex = -126;
  } else {
    frexp(a, &ex);
    ex -= 1;
    if (ex < -126) ex = -126;
  }
  return fabs((double)y - r) / ldexp(1.0, ex - 23);
}

typedef struct Job {
  const Fn* f;
  uint64_t lo, hi, step;
  double max_err;
  uint32_t worst;
  uint64_t over1; /* results more than 1 ulp off */
} Job;

static void* run_job(void* v) {
  Job* j = (Job*)v;
  enum { B = 4096 };
  float x[B], y[B];
  j->max_err = 0;
  j->worst = 0;
  j->over1 = 0;
  for (uint64_t base = j->lo; base < j->hi; base += (uint64_t)B * j->step) {
    int n = 0;
    for (; n < B && base + (uint64_t)n * j->step < j->hi; n++)
      x[n] = bits_to_float((uint32_t)(base + (uint64_t)n * j->step));
    j->f->vec(x, y, n);
    for (int i = 0; i < n; i++) {
      double e;
      if (x[i] != x[i]) e = y[i] != y[i] ? 0 : INFINITY;
      else e = ulp_err(y[i], j->f->ref((double)x[i]));
      if (e > 1.0) j->over1++;
      if (e > j->max_err) {
        j->max_err = e;
        memcpy(&j->worst, &x[i], 4);
      }
    }
  }
  return NULL;
}

static int check_specials(void) {
  int bad = 0;
  const float inf = INFINITY, nan = NAN;
#define SPEC(expr, want)                                                              \
  do {                                                                                \
    float got = (expr), w = (want);                                                   \
    int ok = (w != w) ? (got != got) : (memcmp(&got, &w, 4) == 0);                     \
    if (!ok) {                                                                        \
      printf("  special FAIL: %s = %a (want %a)\n", #expr, got, w);                   \
      bad++;                                                                          \
    }                                                                                 \
  } while (0)
  SPEC(kiln_expf(inf), inf);
  SPEC(kiln_expf(-inf), 0.0f);
  SPEC(kiln_expf(nan), nan);
  SPEC(kiln_expf(100.0f), inf);
  SPEC(kiln_expf(0.0f), 1.0f);
  SPEC(kiln_expf(-0.0f), 1.0f);
  SPEC(kiln_expm1f(inf), inf);
  SPEC(kiln_expm1f(-inf), -1.0f);
  SPEC(kiln_expm1f(-0.0f), -0.0f);
  SPEC(kiln_expm1f(0.0f), 0.0f);
  SPEC(kiln_expm1f(nan), nan);
  SPEC(kiln_logf(0.0f), -inf);
  SPEC(kiln_logf(-0.0f), -inf);
  SPEC(kiln_logf(-1.0f), nan);
  SPEC(kiln_logf(-inf), nan);
  SPEC(kiln_logf(inf), inf);
  SPEC(kiln_logf(1.0f), 0.0f);
  SPEC(kiln_logf(nan), nan);
  SPEC(kiln_log1pf(-1.0f), -inf);
  SPEC(kiln_log1pf(-2.0f), nan);
  SPEC(kiln_log1pf(inf), inf);
  SPEC(kiln_log1pf(-0.0f), -0.0f);
  SPEC(kiln_log1pf(0.0f), 0.0f);
  SPEC(kiln_log1pf(nan), nan);
  SPEC(kiln_tanhf(inf), 1.0f);
  SPEC(kiln_tanhf(-inf), -1.0f);
  SPEC(kiln_tanhf(-0.0f), -0.0f);
  SPEC(kiln_tanhf(0.0f), 0.0f);
  SPEC(kiln_tanhf(nan), nan);
  SPEC(kiln_logisticf(-inf), 0.0f);
  SPEC(kiln_logisticf(inf), 1.0f);
  SPEC(kiln_logisticf(0.0f), 0.5f);
  SPEC(kiln_logisticf(nan), nan);
  SPEC(kiln_erff(inf), 1.0f);
  SPEC(kiln_erff(-inf), -1.0f);
  SPEC(kiln_erff(-0.0f), -0.0f);
  SPEC(kiln_erff(0.0f), 0.0f);
  SPEC(kiln_erff(nan), nan);
  return bad;
}

static void bench(void) {
  enum { N = 1 << 16 };
  static float x[N], y[N];
  for (int fi = 0; fi < NFN; fi++) {
    const Fn* f = &fns[fi];
    for (int i = 0; i < N; i++) {
      float r = rng_float();
      x[i] = strcmp(f->name, "logf") == 0 ? 100.0f * (r + 1.0f)
             : strcmp(f->name, "log1pf") == 0 ? 50.0f * (r + 1.0f)
                                             : 8.0f * r;
    }
    double best_k = 1e30, best_l = 1e30;
    for (int rep = 0; rep < 20; rep++) {
      double t0 = cpu_s();
      f->vec(x, y, N);
      double t1 = cpu_s();
      for (int i = 0; i < N; i++) y[i] = f->libm(x[i]);
      double t2 = cpu_s();
      if (t1 - t0 < best_k) best_k = t1 - t0;
      if (t2 - t1 < best_l) best_l = t2 - t1;
      __asm__ volatile("" ::"r"(y) : "memory");
    }
    printf("  %-10s kiln %.2f ns/element, libm (scalar %s) %.2f ns/element: %.1fx\n", f->name,
           best_k / N * 1e9, f->name, best_l / N * 1e9, best_l / best_k);
  }
}

int main(int argc, char** argv) {
  int only = -1, quick = 0;
  uint64_t lo = 0, hi = (uint64_t)1 << 32;
  if (argc > 1 && strcmp(argv[1], "bench") == 0) {
    printf("test_math bench (vectorized loop over 65536 floats vs a scalar libm loop)\n");
    bench();
    return 0;
  }
  if (argc > 1 && strcmp(argv[1], "quick") == 0) quick = 1;
  else if (argc > 1) {
    for (int i = 0; i < NFN; i++)
      if (strcmp(argv[1], fns[i].name) == 0) only = i;
    if (only < 0) {
      fprintf(stderr, "unknown function %s\n", argv[1]);
      return 2;
    }
  }
  if (argc > 3) {
    lo = strtoull(argv[2], NULL, 16);
    hi = strtoull(argv[3], NULL, 16) + 1;
  }
  int threads = 1;
#if defined(__linux__)
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) threads = CPU_COUNT(&set);
#endif
  if (threads < 1) threads = 1;
  if (threads > 64) threads = 64;
  const uint64_t step = quick ? 64 : 1;
  printf("test_math: %s inputs%s, %d threads\n", quick ? "2^26 sampled" : "all", only >= 0 ? "" : " of every function", threads);
  int bad = check_specials();
  printf("  special values: %s\n", bad ? "FAIL" : "ok");
  for (int fi = 0; fi < NFN; fi++) {
    if (only >= 0 && fi != only) continue;
    Job jobs[64];
    pthread_t tid[64];
    double t0 = wall_s();
    const uint64_t span = hi - lo, chunk = (span / threads / step + 1) * step;
    for (int t = 0; t < threads; t++) {
      jobs[t].f = &fns[fi];
      jobs[t].lo = lo + chunk * t;
      jobs[t].hi = lo + chunk * (t + 1) < hi ? lo + chunk * (t + 1) : hi;
      if (jobs[t].lo > hi) jobs[t].lo = hi;
      jobs[t].step = step;
      pthread_create(&tid[t], NULL, run_job, &jobs[t]);
    }
    double m = 0;
    uint32_t worst = 0;
    uint64_t over1 = 0;
    for (int t = 0; t < threads; t++) {
      pthread_join(tid[t], NULL);
      over1 += jobs[t].over1;
      if (jobs[t].max_err > m) m = jobs[t].max_err, worst = jobs[t].worst;
    }
    float wx = bits_to_float(worst);
    float wy;
    fns[fi].vec(&wx, &wy, 1);
    const int ok = m <= fns[fi].bound;
    if (!ok) bad++;
    printf("  %-10s max error %.3f ulp (bound %.1f) at x = %a (got %a, exact %.9g); %llu inputs > 1 ulp; %.1f s %s\n",
           fns[fi].name, m, fns[fi].bound, wx, wy, fns[fi].ref((double)wx),
           (unsigned long long)over1, wall_s() - t0, ok ? "ok" : "FAIL");
    fflush(stdout);
  }
  printf("test_math: %d passed, %d failed\n", (only >= 0 ? 1 : NFN) + 1 - (bad ? 1 : 0), bad);
  return bad ? 1 : 0;
}
