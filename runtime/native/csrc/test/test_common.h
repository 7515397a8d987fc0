/* Shared helpers for the runtime's standalone C tests and benchmarks. */
#ifndef KILN_TEST_COMMON_H
#define KILN_TEST_COMMON_H

#define _GNU_SOURCE
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../runtime_internal.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static inline uint64_t rng_next(void) {
  uint64_t x = rng_state;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return rng_state = x;
}
/* uniform integer in [lo, hi] */
static inline int64_t rng_int(int64_t lo, int64_t hi) {
  return lo + (int64_t)(rng_next() % (uint64_t)(hi - lo + 1));
}
/* uniform float in [-1, 1) */
static inline float rng_float(void) {
  return (float)((double)(rng_next() >> 11) * (1.0 / 9007199254740992.0) * 2.0 - 1.0);
}

static inline double wall_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}
static inline double cpu_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static int test_failures = 0;
static int test_checks = 0;
#define CHECK(cond, ...)                                              \
  do {                                                                \
    test_checks++;                                                    \
    if (!(cond)) {                                                    \
      test_failures++;                                                \
      if (test_failures <= 20) {                                      \
        fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);          \
        fprintf(stderr, __VA_ARGS__);                                 \
        fprintf(stderr, "\n");                                        \
      }                                                               \
    }                                                                 \
  } while (0)

static inline void* xalloc(size_t bytes) {
  void* p = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
  if (!p) {
    fprintf(stderr, "out of memory\n");
    exit(2);
  }
  return p;
}

/* a table of offsets i * stride, shuffled into a random permutation of positions (so the
 * table is not a stride), with an extra gap */
static inline int64_t* perm_table(int64_t n, int64_t stride) {
  int64_t* t = (int64_t*)xalloc((size_t)(n > 0 ? n : 1) * sizeof(int64_t));
  for (int64_t i = 0; i < n; i++) t[i] = i * stride;
  for (int64_t i = n - 1; i > 0; i--) {
    int64_t j = (int64_t)(rng_next() % (uint64_t)(i + 1));
    int64_t x = t[i];
    t[i] = t[j];
    t[j] = x;
  }
  return t;
}

static inline int test_summary(const char* name) {
  printf("%s: %d passed, %d failed\n", name, test_checks - test_failures, test_failures);
  return test_failures ? 1 : 0;
}

#endif
