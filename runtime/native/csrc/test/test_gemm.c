/*
 * test_gemm.c — KilnApi.sgemm against a double-precision reference.
 *
 * Random shapes (1..70 per dim, plus K = 0, limits below the extents, a few large ones that
 * cross the cache blocks), operand layouts through every kind of axis (row-major, transposed,
 * padded, batch-outer and batch-inner strides, offset tables), the GEMV paths (M = 1, N = 1),
 * and an epilogue that must see every element of [0, batch*m_lim) x [0, n_lim) exactly once,
 * already final. Each case runs with 1, 2 and 3 threads: every result must be within
 * |err| <= 2 K eps sum|a b| of the reference, elements past the limits untouched, and the
 * 2- and 3-thread results bitwise equal to the 1-thread one.
 *
 * usage: test_gemm [cases]
 */
#include <stdatomic.h>

#include "test_common.h"

typedef struct Operand {
  float* buf;
  int64_t len;
  KilnAxis ax[3]; /* batch, rows (m or k), cols (k or n) in the logical [batch][d1][d2] */
  int64_t* tables[3];
} Operand;

/* Builds a random layout for a logical [d0][d1][d2] array and fills it. */
static void make_operand(Operand* op, int64_t d0, int64_t d1, int64_t d2, int allow_tables) {
  int64_t dims[3] = {d0, d1, d2};
  int order[3] = {0, 1, 2};
  /* physical order: a random permutation of the three dims, row-major over that order */
  for (int i = 2; i > 0; i--) {
    int j = (int)rng_int(0, i);
    int t = order[i];
    order[i] = order[j];
    order[j] = t;
  }
  int64_t stride[3];
  int64_t s = 1;
  for (int p = 2; p >= 0; p--) {
    int d = order[p];
    stride[d] = s;
    int64_t ext = dims[d] + (rng_int(0, 3) == 0 ? rng_int(1, 5) : 0); /* padding */
    s *= ext > 0 ? ext : 1;
  }
  op->len = s + 16;
  op->buf = (float*)xalloc((size_t)op->len * sizeof(float));
  for (int64_t i = 0; i < op->len; i++) op->buf[i] = rng_float();
  for (int d = 0; d < 3; d++) {
    op->tables[d] = NULL;
    op->ax[d].table = NULL;
    op->ax[d].stride = stride[d];
    if (allow_tables && rng_int(0, 4) == 0) {
      op->tables[d] = perm_table(dims[d], stride[d]);
      op->ax[d].table = op->tables[d];
      op->ax[d].stride = 0;
    }
  }
  /* a batch of one with stride 0 is common in plans */
  if (d0 == 1 && !op->ax[0].table && rng_int(0, 1)) op->ax[0].stride = 0;
}

static void free_operand(Operand* op) {
  free(op->buf);
  for (int d = 0; d < 3; d++) free(op->tables[d]);
}

static inline int64_t off(const KilnAxis* a, int64_t i) {
  return a->table ? a->table[i] : i * a->stride;
}

typedef struct EpiCtx {
  const KilnGemm* g;
  _Atomic int* count;
  float* snap;
  _Atomic int bad;
} EpiCtx;

static void epilogue(const KilnArgs* a, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
  EpiCtx* e = (EpiCtx*)a->buf[0];
  const KilnGemm* g = e->g;
  if (r0 < 0 || r1 > g->batch * g->M || r0 >= r1 || c0 < 0 || c1 > g->n_lim || c0 >= c1) {
    atomic_store(&e->bad, 1);
    return;
  }
  for (int64_t r = r0; r < r1; r++) {
    if (r % g->M >= g->m_lim) {
      atomic_store(&e->bad, 1);
      continue;
    }
    for (int64_t c = c0; c < c1; c++) {
      int64_t i = r * g->N + c;
      atomic_fetch_add(&e->count[i], 1);
      e->snap[i] = g->C[i];
    }
  }
}

static int run_ops(Operand* Ap, Operand* Bp, int64_t batch, int64_t M, int64_t N, int64_t K,
                   int64_t m_lim, int64_t n_lim, int64_t k_lim, int with_epi, int verbose);

static int run_case(int64_t batch, int64_t M, int64_t N, int64_t K, int64_t m_lim, int64_t n_lim,
                    int64_t k_lim, int with_epi, int allow_tables, int verbose) {
  Operand A, B;
  make_operand(&A, batch, M, K, allow_tables);
  make_operand(&B, batch, K, N, allow_tables);
  return run_ops(&A, &B, batch, M, N, K, m_lim, n_lim, k_lim, with_epi, verbose);
}

/* Operands with the given strides (batch, rows, cols), as the models' plans send them. */
static void strided_operand(Operand* op, int64_t d0, int64_t d1, int64_t d2, const int64_t* st) {
  int64_t span = 1 + (d0 - 1) * st[0] + (d1 - 1) * st[1] + (d2 - 1) * st[2];
  op->len = span + 16;
  op->buf = (float*)xalloc((size_t)op->len * sizeof(float));
  for (int64_t i = 0; i < op->len; i++) op->buf[i] = rng_float();
  for (int d = 0; d < 3; d++) {
    op->tables[d] = NULL;
    op->ax[d].table = NULL;
    op->ax[d].stride = st[d];
  }
}

static int run_strided(int64_t batch, int64_t M, int64_t N, int64_t K, const int64_t* as,
                       const int64_t* bs, int64_t m_lim, int64_t n_lim, int with_epi) {
  Operand A, B;
  strided_operand(&A, batch, M, K, as);
  strided_operand(&B, batch, K, N, bs);
  return run_ops(&A, &B, batch, M, N, K, m_lim, n_lim, K, with_epi, 1);
}

static int run_ops(Operand* Ap, Operand* Bp, int64_t batch, int64_t M, int64_t N, int64_t K,
                   int64_t m_lim, int64_t n_lim, int64_t k_lim, int with_epi, int verbose) {
  Operand A = *Ap, B = *Bp;
  const int64_t csize = batch * M * N;
  float* C = (float*)xalloc((size_t)(csize + 1) * sizeof(float));
  float* C1 = (float*)xalloc((size_t)(csize + 1) * sizeof(float));
  float* snap = (float*)xalloc((size_t)(csize + 1) * sizeof(float));
  _Atomic int* count = (_Atomic int*)xalloc((size_t)(csize + 1) * sizeof(int));
  double* ref = (double*)xalloc((size_t)(csize + 1) * sizeof(double));
  double* bound = (double*)xalloc((size_t)(csize + 1) * sizeof(double));
  const double eps = 1.0 / (1 << 24);
  for (int64_t b = 0; b < batch; b++)
    for (int64_t m = 0; m < m_lim; m++)
      for (int64_t n = 0; n < n_lim; n++) {
        double s = 0, sa = 0;
        for (int64_t k = 0; k < k_lim; k++) {
          double x = A.buf[off(&A.ax[0], b) + off(&A.ax[1], m) + off(&A.ax[2], k)];
          double y = B.buf[off(&B.ax[0], b) + off(&B.ax[1], k) + off(&B.ax[2], n)];
          s += x * y;
          sa += fabs(x * y);
        }
        ref[b * M * N + m * N + n] = s;
        bound[b * M * N + m * N + n] = 2.0 * (double)(k_lim > 0 ? k_lim : 1) * eps * sa;
      }
  int failed = 0;
  const int threads[3] = {1, 2, 3};
  for (int ti = 0; ti < 3; ti++) {
    kiln_set_num_threads(threads[ti]);
    const float sentinel = 12345.0f;
    for (int64_t i = 0; i < csize; i++) { C[i] = sentinel; count[i] = 0; snap[i] = NAN; }
    KilnGemm g;
    memset(&g, 0, sizeof g);
    g.batch = batch, g.M = M, g.N = N, g.K = K;
    g.A = A.buf, g.a_batch = A.ax[0], g.a_m = A.ax[1], g.a_k = A.ax[2];
    g.B = B.buf, g.b_batch = B.ax[0], g.b_k = B.ax[1], g.b_n = B.ax[2];
    g.C = C, g.m_lim = m_lim, g.n_lim = n_lim, g.k_lim = k_lim;
    EpiCtx e = {&g, count, snap, 0};
    void* bufs[1] = {&e};
    KilnArgs args = {bufs, NULL};
    if (with_epi) g.epilogue = epilogue, g.epilogue_args = &args;
    kiln_runtime_api()->sgemm(&g);
    int bad = 0, bad_epi = atomic_load(&e.bad), bad_det = 0;
    double worst = 0;
    for (int64_t b = 0; b < batch; b++)
      for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
          int64_t i = b * M * N + m * N + n;
          if (m >= m_lim || n >= n_lim) {
            if (memcmp(&C[i], &sentinel, 4) != 0) bad++;
            if (with_epi && count[i] != 0) bad_epi++;
            continue;
          }
          double err = fabs((double)C[i] - ref[i]);
          if (!(err <= bound[i])) {
            bad++;
            if (err / (bound[i] + 1e-300) > worst) worst = err / (bound[i] + 1e-300);
          }
          if (with_epi && (count[i] != 1 || memcmp(&snap[i], &C[i], 4) != 0)) bad_epi++;
          if (ti == 0) C1[i] = C[i];
          else if (memcmp(&C1[i], &C[i], 4) != 0) bad_det++;
        }
    CHECK(bad == 0, "batch=%ld M=%ld N=%ld K=%ld lim=%ld,%ld,%ld threads=%d: %d wrong (worst %.3g x bound)",
          (long)batch, (long)M, (long)N, (long)K, (long)m_lim, (long)n_lim, (long)k_lim,
          threads[ti], bad, worst);
    CHECK(bad_epi == 0, "batch=%ld M=%ld N=%ld K=%ld lim=%ld,%ld,%ld threads=%d: epilogue coverage wrong (%d)",
          (long)batch, (long)M, (long)N, (long)K, (long)m_lim, (long)n_lim, (long)k_lim,
          threads[ti], bad_epi);
    CHECK(bad_det == 0, "batch=%ld M=%ld N=%ld K=%ld threads=%d: %d elements differ from 1 thread",
          (long)batch, (long)M, (long)N, (long)K, threads[ti], bad_det);
    if (bad || bad_epi || bad_det) failed = 1;
  }
  if (verbose)
    printf("  case batch=%ld M=%ld N=%ld K=%ld lim=%ld,%ld,%ld epi=%d %s\n", (long)batch, (long)M,
           (long)N, (long)K, (long)m_lim, (long)n_lim, (long)k_lim, with_epi, failed ? "FAIL" : "ok");
  free_operand(&A);
  free_operand(&B);
  free(C), free(C1), free(snap), free((void*)count), free(ref), free(bound);
  return failed;
}

int main(int argc, char** argv) {
  int cases = argc > 1 ? atoi(argv[1]) : 600;
  printf("test_gemm: isa=%s cases=%d\n", kiln_runtime_isa(), cases);
  /* fixed edge cases */
  run_case(1, 1, 1, 1, 1, 1, 1, 1, 0, 0);
  run_case(1, 3, 5, 0, 3, 5, 0, 1, 0, 0);  /* K = 0: zeros */
  run_case(2, 4, 4, 7, 4, 4, 0, 1, 1, 0);  /* k_lim = 0 */
  run_case(1, 0, 5, 3, 0, 5, 3, 1, 0, 0);  /* M = 0: nothing */
  run_case(1, 5, 0, 3, 5, 0, 3, 1, 0, 0);  /* N = 0: nothing */
  run_case(0, 5, 5, 3, 5, 5, 3, 1, 0, 0);  /* batch = 0 */
  run_case(1, 1, 3000, 100, 1, 3000, 100, 1, 0, 0);  /* GEMV over n */
  run_case(3, 1, 700, 33, 1, 650, 33, 1, 0, 0);
  run_case(1, 900, 1, 77, 900, 1, 77, 1, 0, 0);      /* GEMV over m */
  run_case(2, 2, 600, 530, 2, 600, 530, 1, 0, 0);
  run_case(1, 5, 300, 77, 5, 290, 77, 1, 1, 0);      /* few-row GEMV */
  run_case(2, 16, 700, 40, 13, 700, 39, 1, 1, 0);
  run_case(1, 8, 64, 600, 8, 64, 600, 1, 1, 0);
  /* the GPT-2 small calls (seq 128) with their plans' strides, and their edges */
  {
    const int64_t a768[3] = {0, 768, 1}, a3072[3] = {0, 3072, 1};
    const int64_t b2304[3] = {0, 2304, 1}, b768[3] = {0, 768, 1}, bT[3] = {0, 1, 768};
    run_strided(1, 128, 2304, 768, a768, b2304, 128, 2304, 1);  /* qkv */
    run_strided(1, 128, 768, 3072, a3072, b768, 128, 768, 0);   /* MLP down */
    run_strided(1, 128, 3000, 768, a768, bT, 128, 3000, 1);     /* LM head (B transposed) */
    run_strided(1, 1, 3000, 768, a768, bT, 1, 3000, 1);         /* its GEMV */
    run_strided(1, 1, 2304, 768, a768, b2304, 1, 2304, 1);
    const int64_t qa[3] = {64, 768, 1}, qb[3] = {64, 1, 768};  /* Q K^T per head */
    run_strided(12, 128, 128, 64, qa, qb, 128, 128, 0);
    const int64_t pa[3] = {16384, 128, 1}, pb[3] = {64, 768, 1}; /* P V */
    run_strided(12, 128, 64, 128, pa, pb, 128, 64, 0);
    run_strided(12, 1, 128, 64, qa, qb, 1, 128, 0);
    /* B transposed, read in place: odd row counts, column groups, limits, padded rows */
    const int64_t bTp[3] = {0, 1, 301};
    const int64_t a300[3] = {0, 300, 1};
    run_strided(1, 2, 150, 300, a300, bTp, 2, 150, 1);
    run_strided(1, 17, 301, 300, a300, bTp, 15, 299, 1);
    run_strided(1, 33, 129, 300, a300, bTp, 33, 129, 1);
    run_strided(2, 45, 200, 300, (const int64_t[3]){45 * 300, 300, 1}, (const int64_t[3]){200 * 301, 1, 301}, 41, 187, 1);
    run_strided(1, 129, 140, 513, (const int64_t[3]){0, 513, 1}, (const int64_t[3]){0, 1, 520}, 129, 140, 1);
    /* the packed core: odd rows, a 16-column last panel, a partial block, K-block-outer order */
    run_strided(1, 127, 785, 700, (const int64_t[3]){0, 700, 1}, (const int64_t[3]){0, 800, 1}, 127, 785, 1);
    run_strided(1, 300, 100, 1000, (const int64_t[3]){0, 1000, 1}, (const int64_t[3]){0, 100, 1}, 299, 97, 1);
  }
  /* large: several K blocks, several N blocks, thread splits */
  run_case(1, 300, 1100, 1100, 300, 1100, 1100, 1, 0, 1);
  run_case(1, 611, 257, 600, 600, 250, 599, 1, 1, 1);
  /* the large core (rows, columns and depth >= 512): at 3 threads a task has fewer rows and
   * takes the other core, whose values must be the same (one K blocking for every core) */
  run_case(1, 1030, 1045, 700, 1029, 1041, 700, 1, 1, 1);
  run_case(12, 128, 128, 64, 128, 128, 64, 1, 0, 1);
  run_case(2, 1, 1, 5000, 1, 1, 5000, 1, 0, 0);
  for (int c = 0; c < cases; c++) {
    int64_t batch = rng_int(0, 5) == 0 ? rng_int(2, 4) : 1;
    int64_t M = rng_int(1, 70), N = rng_int(1, 70), K = rng_int(1, 70);
    int kind = (int)rng_int(0, 9);
    if (kind == 0) M = 1;
    if (kind == 1) N = 1;
    if (kind == 2) K = rng_int(0, 3);
    if (kind == 3) { M = rng_int(1, 200); N = rng_int(1, 200); K = rng_int(1, 300); }
    int64_t m_lim = rng_int(0, 3) == 0 ? rng_int(0, M) : M;
    int64_t n_lim = rng_int(0, 3) == 0 ? rng_int(0, N) : N;
    int64_t k_lim = rng_int(0, 4) == 0 ? rng_int(0, K) : K;
    run_case(batch, M, N, K, m_lim, n_lim, k_lim, (int)rng_int(0, 1), 1, 0);
  }
  return test_summary("test_gemm");
}
