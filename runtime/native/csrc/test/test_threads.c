/*
 * test_threads.c — the thread pool: coverage (every iteration exactly once, ranges >= grain
 * but the last), inline execution for small n and nested calls, thread-count control, many
 * back-to-back dispatches, concurrent dispatchers, fork, and exit with live workers.
 *
 * usage: test_threads            (all checks)
 *        test_threads env N      (checks that KILN_NUM_THREADS=N was honoured)
 */
#include <pthread.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_common.h"

typedef struct Cover {
  _Atomic int* hits;
  int64_t n, grain;
  _Atomic int calls;
  _Atomic int short_ranges; /* ranges below grain */
  _Atomic int64_t max_hi;
  pthread_t caller;
  _Atomic int on_caller;
} Cover;

static void cover_fn(const KilnArgs* a, int64_t lo, int64_t hi) {
  Cover* c = (Cover*)a->buf[0];
  atomic_fetch_add(&c->calls, 1);
  if (pthread_equal(pthread_self(), c->caller)) atomic_fetch_add(&c->on_caller, 1);
  if (hi - lo < c->grain && hi != c->n) atomic_fetch_add(&c->short_ranges, 1);
  for (int64_t i = lo; i < hi; i++) atomic_fetch_add(&c->hits[i], 1);
  /* a little work so ranges overlap in time */
  volatile double s = 0;
  for (int64_t i = lo; i < hi && i < lo + 200; i++) s += (double)i;
}

static void check_cover(int64_t n, int64_t grain, int expect_inline) {
  Cover c;
  memset(&c, 0, sizeof c);
  c.hits = (_Atomic int*)calloc((size_t)(n > 0 ? n : 1), sizeof(int));
  c.n = n;
  c.grain = grain < 1 ? 1 : grain;
  c.caller = pthread_self();
  void* bufs[1] = {&c};
  KilnArgs args = {bufs, NULL};
  kiln_runtime_api()->parallel_for(cover_fn, &args, n, grain);
  int bad = 0;
  for (int64_t i = 0; i < n; i++) bad += c.hits[i] != 1;
  CHECK(bad == 0, "parallel_for n=%ld grain=%ld: %d iterations not run exactly once", (long)n,
        (long)grain, bad);
  CHECK(c.short_ranges == 0, "parallel_for n=%ld grain=%ld: %d ranges below grain", (long)n,
        (long)grain, (int)c.short_ranges);
  if (n == 0) CHECK(c.calls == 0, "parallel_for n=0 called fn");
  if (expect_inline && n > 0)
    CHECK(c.calls == 1 && c.on_caller == 1, "parallel_for n=%ld grain=%ld not inline (%d calls)",
          (long)n, (long)grain, (int)c.calls);
  free((void*)c.hits);
}

typedef struct Nest {
  _Atomic int bad;
  _Atomic int64_t total;
} Nest;

static void inner_fn(const KilnArgs* a, int64_t lo, int64_t hi) {
  Nest* s = (Nest*)a->buf[0];
  atomic_fetch_add(&s->total, hi - lo);
}

static void outer_fn(const KilnArgs* a, int64_t lo, int64_t hi) {
  Nest* s = (Nest*)a->buf[0];
  for (int64_t i = lo; i < hi; i++) {
    /* inside a task: a nested call must run serially, on this thread */
    if (kiln_get_num_threads() > 1 && !kiln_in_pool_task()) atomic_store(&s->bad, 1);
    Cover c;
    memset(&c, 0, sizeof c);
    c.hits = (_Atomic int*)calloc(1000, sizeof(int));
    c.n = 1000, c.grain = 1, c.caller = pthread_self();
    void* bufs[1] = {&c};
    KilnArgs inner = {bufs, NULL};
    kiln_runtime_api()->parallel_for(cover_fn, &inner, 1000, 1);
    if (c.calls != 1 || c.on_caller != 1) atomic_store(&s->bad, 2);
    free((void*)c.hits);
    inner_fn(a, 0, 1000);
  }
}

static _Atomic int64_t sum_all;
static void sum_fn(void* ctx, int64_t lo, int64_t hi) {
  (void)ctx;
  int64_t s = 0;
  for (int64_t i = lo; i < hi; i++) s += i;
  atomic_fetch_add(&sum_all, s);
}

static void* external_dispatcher(void* v) {
  int64_t* bad = (int64_t*)v;
  for (int r = 0; r < 2000; r++) {
    Cover c;
    memset(&c, 0, sizeof c);
    int64_t n = 1 + r % 97;
    c.hits = (_Atomic int*)calloc((size_t)n, sizeof(int));
    c.n = n, c.grain = 1 + r % 5, c.caller = pthread_self();
    void* bufs[1] = {&c};
    KilnArgs args = {bufs, NULL};
    kiln_parallel_for(cover_fn, &args, n, c.grain);
    for (int64_t i = 0; i < n; i++) *bad += c.hits[i] != 1;
    free((void*)c.hits);
  }
  return NULL;
}

int main(int argc, char** argv) {
  if (argc > 2 && strcmp(argv[1], "env") == 0) {
    int want = atoi(argv[2]);
    CHECK(kiln_get_num_threads() == want, "KILN_NUM_THREADS=%d gave %d threads", want,
          kiln_get_num_threads());
    CHECK(kiln_runtime_api()->num_threads() == want, "api num_threads %d", kiln_runtime_api()->num_threads());
    kiln_set_num_threads(1);
    CHECK(kiln_get_num_threads() == 1, "set_num_threads(1)");
    kiln_set_num_threads(0);
    CHECK(kiln_get_num_threads() == want, "set_num_threads(0) restores KILN_NUM_THREADS");
    check_cover(1000, 3, 0);
    return test_summary("test_threads env");
  }
  const int def = kiln_get_num_threads();
  printf("test_threads: default threads %d, isa %s\n", def, kiln_runtime_isa());
  CHECK(def >= 1, "default thread count %d", def);
  CHECK(kiln_runtime_api()->abi_version == KILN_ABI_VERSION, "abi version");
  const int counts[] = {1, 2, 3, 4, 8};
  for (int ci = 0; ci < 5; ci++) {
    kiln_set_num_threads(counts[ci]);
    CHECK(kiln_get_num_threads() == counts[ci], "set_num_threads(%d) -> %d", counts[ci],
          kiln_get_num_threads());
    check_cover(0, 1, 1);
    check_cover(1, 1, 1);
    check_cover(5, 5, 1);  /* n <= grain: inline */
    check_cover(5, 100, 1);
    if (counts[ci] == 1) check_cover(1000, 1, 1); /* one thread: inline */
    for (int r = 0; r < 200; r++) {
      int64_t n = rng_int(0, 3000), grain = rng_int(0, 200);
      check_cover(n, grain, n <= (grain < 1 ? 1 : grain));
    }
    /* nested calls run serially inside tasks */
    Nest s;
    memset(&s, 0, sizeof s);
    void* bufs[1] = {&s};
    KilnArgs args = {bufs, NULL};
    kiln_parallel_for(outer_fn, &args, 16, 1);
    CHECK(s.bad == 0 && s.total == 16 * 1000, "nested calls: bad=%d total=%ld", (int)s.bad,
          (long)s.total);
  }
  kiln_set_num_threads(0);
  CHECK(kiln_get_num_threads() == def, "set_num_threads(0) restores the default");

  /* many back-to-back dispatches */
  kiln_set_num_threads(3);
  for (int r = 0; r < 100000; r++) {
    atomic_store(&sum_all, 0);
    int64_t n = 2 + r % 64;
    kiln_pool_for(sum_fn, NULL, n, 1);
    if (atomic_load(&sum_all) != n * (n - 1) / 2) {
      CHECK(0, "dispatch %d: wrong sum", r);
      break;
    }
  }
  CHECK(1, "100000 dispatches");
  /* dispatches after the workers went to sleep */
  for (int r = 0; r < 5; r++) {
    usleep(3000);
    check_cover(4000, 10, 0);
  }
  /* two external threads dispatching at once (one gets the pool, the other runs inline) */
  pthread_t t1, t2;
  int64_t bad1 = 0, bad2 = 0;
  pthread_create(&t1, NULL, external_dispatcher, &bad1);
  pthread_create(&t2, NULL, external_dispatcher, &bad2);
  pthread_join(t1, NULL);
  pthread_join(t2, NULL);
  CHECK(bad1 == 0 && bad2 == 0, "concurrent dispatchers: %ld, %ld wrong", (long)bad1, (long)bad2);
  /* fork: the child gets a fresh pool */
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    atomic_store(&sum_all, 0);
    kiln_pool_for(sum_fn, NULL, 10000, 10);
    _exit(atomic_load(&sum_all) == (int64_t)10000 * 9999 / 2 ? 0 : 3);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "fork child: status %d", status);
  /* exit with live (sleeping or spinning) workers must not hang: returning from main does it */
  kiln_set_num_threads(2);
  check_cover(100, 1, 0);
  return test_summary("test_threads");
}
