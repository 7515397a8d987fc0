/*
 * threads.c — the native runtime's persistent thread pool.
 *
 * One job runs at a time (a dispatcher holds `dispatch_mu` for the whole call; a second thread
 * that finds the pool busy runs its work inline, which is always correct). A job is a range
 * [0, n) cut into `parts` ranges; the dispatcher and the workers claim parts with one atomic
 * fetch-add each, so a worker that wakes late simply finds nothing left and the caller never
 * waits on a sleeping thread for work it could do itself.
 *
 * Publication protocol (seq is the futex word):
 *   dispatcher: seq = S+1 (odd: writing) -> wait until no worker is inside a job -> write the
 *               job -> seq = S+2 (even: published) -> wake sleepers -> claim parts -> wait
 *               until all parts are done.
 *   worker:     see seq == S' even and != last seen -> inside++ -> re-check seq == S' (else
 *               leave) -> claim parts of that job -> inside--.
 * With sequentially consistent atomics, a worker that passes the re-check is counted in
 * `inside` before the dispatcher's next "wait until nobody is inside", so the job it reads
 * cannot be rewritten under it.
 *
 * Idle workers spin (with pause) for KILN_POOL_SPIN_US microseconds (default 100) after their
 * last job, then sleep on the futex: an idle pool costs no CPU. Workers are detached and have
 * every signal blocked; nothing waits for them at exit. After fork() the child starts with an
 * empty pool (threads are created again on first use).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runtime_internal.h"

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#define KILN_HAVE_FUTEX 1
#else
#define KILN_HAVE_FUTEX 0
#endif

#define KILN_MAX_THREADS 512
#define KILN_PARTS_PER_THREAD 4

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield" ::: "memory");
#else
  __asm__ __volatile__("" ::: "memory");
#endif
}

static inline int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* ---- waiting on a 32-bit word --------------------------------------------------------------
 * futex on Linux; elsewhere a condition variable (one shared pair, broadcast on every wake). */
#if KILN_HAVE_FUTEX
static void word_wait(_Atomic uint32_t* w, uint32_t val) {
  syscall(SYS_futex, (uint32_t*)w, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}
static void word_wake(_Atomic uint32_t* w, int count) {
  syscall(SYS_futex, (uint32_t*)w, FUTEX_WAKE_PRIVATE, count, NULL, NULL, 0);
}
#else
static pthread_mutex_t ww_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ww_cv = PTHREAD_COND_INITIALIZER;
static void word_wait(_Atomic uint32_t* w, uint32_t val) {
  pthread_mutex_lock(&ww_mu);
  if (atomic_load(w) == val) pthread_cond_wait(&ww_cv, &ww_mu);
  pthread_mutex_unlock(&ww_mu);
}
static void word_wake(_Atomic uint32_t* w, int count) {
  (void)w;
  (void)count;
  pthread_mutex_lock(&ww_mu);
  pthread_cond_broadcast(&ww_cv);
  pthread_mutex_unlock(&ww_mu);
}
#endif

/* ---- configuration -------------------------------------------------------------------------- */

static pthread_once_t config_once = PTHREAD_ONCE_INIT;
static int default_threads = 1;
static int64_t spin_ns = 100000;
static _Atomic int requested_threads; /* 0: default */

static int parse_positive(const char* s, long max) {
  if (!s || !*s) return 0;
  char* end = NULL;
  long v = strtol(s, &end, 10);
  while (end && (*end == ' ' || *end == '\t' || *end == '\n')) end++;
  if (!end || *end || v <= 0) return 0;
  return (int)(v > max ? max : v);
}

static void config_init(void) {
  int n = 0;
#if defined(__linux__)
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) n = CPU_COUNT(&set);
#endif
  if (n <= 0) {
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    n = c > 0 ? (int)c : 1;
  }
  int env = parse_positive(getenv("KILN_NUM_THREADS"), KILN_MAX_THREADS);
  if (env > 0) n = env;
  if (n > KILN_MAX_THREADS) n = KILN_MAX_THREADS;
  default_threads = n;
  const char* sp = getenv("KILN_POOL_SPIN_US");
  if (sp && *sp) {
    char* end = NULL;
    long v = strtol(sp, &end, 10);
    if (end && !*end && v >= 0) spin_ns = (int64_t)(v > 1000000 ? 1000000 : v) * 1000;
  }
}

static int configured_threads(void) {
  pthread_once(&config_once, config_init);
  int r = atomic_load_explicit(&requested_threads, memory_order_relaxed);
  return r > 0 ? r : default_threads;
}

void kiln_set_num_threads(int n) {
  pthread_once(&config_once, config_init);
  if (n > KILN_MAX_THREADS) n = KILN_MAX_THREADS;
  atomic_store(&requested_threads, n > 0 ? n : 0);
}

int kiln_get_num_threads(void) { return configured_threads(); }
int kiln_num_threads(void) { return configured_threads(); }

/* ---- the pool -------------------------------------------------------------------------------- */

static __thread int tls_in_task;

int kiln_in_pool_task(void) { return tls_in_task; }

int kiln_pool_threads(void) { return tls_in_task ? 1 : configured_threads(); }

typedef struct Worker {
  int index;
  uint32_t seen; /* the seq value before the job it was created for */
} Worker;

static pthread_mutex_t dispatch_mu = PTHREAD_MUTEX_INITIALIZER;
static int started_workers; /* under dispatch_mu */

static _Atomic uint32_t seq;      /* futex word: even = published job id, odd = being written */
static _Atomic int inside;        /* workers between joining and leaving a job */
static _Atomic int sleepers;      /* workers in (or about to enter) word_wait(&seq) */
static _Atomic int active_workers;/* workers with index < this take part in jobs */
static _Atomic int64_t next_part; /* the job's next unclaimed part */
static _Atomic uint32_t done_parts;
static _Atomic int main_sleeping;

/* the job (written only while seq is odd and nobody is inside) */
static kiln_range_fn job_fn;
static void* job_ctx;
static int64_t job_n, job_parts;

static void run_parts(void) {
  const int64_t parts = job_parts, n = job_n;
  const kiln_range_fn fn = job_fn;
  void* const ctx = job_ctx;
  for (;;) {
    int64_t p = atomic_fetch_add(&next_part, 1);
    if (p >= parts) break;
    /* the exact split lo = p*n/parts, hi = (p+1)*n/parts (128-bit product: no overflow) */
    int64_t lo = (int64_t)(((__int128)p * n) / parts);
    int64_t hi = (int64_t)(((__int128)(p + 1) * n) / parts);
    fn(ctx, lo, hi);
    uint32_t d = atomic_fetch_add(&done_parts, 1) + 1;
    if (d == (uint32_t)parts && atomic_load(&main_sleeping)) word_wake(&done_parts, 1);
  }
}

static void* worker_main(void* arg) {
  Worker* self = (Worker*)arg;
  const int index = self->index;
  uint32_t seen = self->seen;
  free(self);
  tls_in_task = 1;
  for (;;) {
    /* wait for a published job newer than `seen` */
    uint32_t s = atomic_load(&seq);
    if (s == seen || (s & 1)) {
      int64_t deadline = -1;
      int spins = 0;
      for (;;) {
        s = atomic_load(&seq);
        if (s != seen && !(s & 1)) break;
        if (s & 1) { /* a job is being written: it is published within microseconds */
          cpu_relax();
          continue;
        }
        if (index >= atomic_load_explicit(&active_workers, memory_order_relaxed)) {
          spins = -1; /* not taking part: sleep at once */
        }
        if (spins >= 0) {
          cpu_relax();
          if ((++spins & 31) == 0) {
            int64_t t = now_ns();
            if (deadline < 0) deadline = t + spin_ns;
            else if (t >= deadline) spins = -1;
          }
          continue;
        }
        atomic_fetch_add(&sleepers, 1);
        word_wait(&seq, s);
        atomic_fetch_sub(&sleepers, 1);
        spins = 0;
        deadline = -1;
      }
    }
    seen = s;
    if (index >= atomic_load(&active_workers)) continue;
    atomic_fetch_add(&inside, 1);
    if (atomic_load(&seq) == s) run_parts();
    atomic_fetch_sub(&inside, 1);
  }
  return NULL;
}

static void start_workers(int want) {
  /* under dispatch_mu, with seq even: new workers wait for the job after the current seq */
  if (want > KILN_MAX_THREADS - 1) want = KILN_MAX_THREADS - 1;
  if (started_workers >= want) return;
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, (size_t)8 << 20);
  while (started_workers < want) {
    Worker* w = (Worker*)malloc(sizeof *w);
    if (!w) break;
    w->index = started_workers;
    w->seen = atomic_load(&seq);
    pthread_t t;
    if (pthread_create(&t, &attr, worker_main, w) != 0) {
      free(w);
      break;
    }
    started_workers++;
  }
  pthread_attr_destroy(&attr);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static void atfork_prepare(void) { pthread_mutex_lock(&dispatch_mu); }
static void atfork_parent(void) { pthread_mutex_unlock(&dispatch_mu); }
static void atfork_child(void) {
  /* the child has only the forking thread: forget the workers */
  started_workers = 0;
  atomic_store(&inside, 0);
  atomic_store(&sleepers, 0);
  atomic_store(&active_workers, 0);
  atomic_store(&main_sleeping, 0);
  pthread_mutex_init(&dispatch_mu, NULL);
}
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static void atfork_install(void) { pthread_atfork(atfork_prepare, atfork_parent, atfork_child); }

static void dispatch(kiln_range_fn fn, void* ctx, int64_t n, int64_t parts, int threads) {
  pthread_once(&atfork_once, atfork_install);
  if (pthread_mutex_trylock(&dispatch_mu) != 0) { /* another thread is using the pool */
    fn(ctx, 0, n);
    return;
  }
  int workers = threads - 1;
  if (parts - 1 < workers) workers = (int)(parts - 1);
  start_workers(workers);
  if (workers > started_workers) workers = started_workers;
  if (workers <= 0) {
    pthread_mutex_unlock(&dispatch_mu);
    int saved = tls_in_task;
    tls_in_task = 1;
    fn(ctx, 0, n);
    tls_in_task = saved;
    return;
  }
  uint32_t s = atomic_load(&seq);
  atomic_store(&seq, s + 1); /* writing */
  while (atomic_load(&inside) != 0) cpu_relax();
  job_fn = fn;
  job_ctx = ctx;
  job_n = n;
  job_parts = parts;
  atomic_store(&next_part, 0);
  atomic_store(&done_parts, 0);
  atomic_store(&main_sleeping, 0);
  atomic_store(&active_workers, workers);
  atomic_store(&seq, s + 2); /* published */
  if (atomic_load(&sleepers) > 0) word_wake(&seq, INT_MAX);

  tls_in_task = 1;
  run_parts();
  tls_in_task = 0;

  if (atomic_load(&done_parts) != (uint32_t)parts) {
    int64_t deadline = now_ns() + 2 * spin_ns + 50000;
    int spins = 0;
    for (;;) {
      uint32_t d = atomic_load(&done_parts);
      if (d == (uint32_t)parts) break;
      if ((++spins & 31) == 0 && now_ns() >= deadline) {
        atomic_store(&main_sleeping, 1);
        d = atomic_load(&done_parts);
        if (d != (uint32_t)parts) word_wait(&done_parts, d);
        atomic_store(&main_sleeping, 0);
        continue;
      }
      cpu_relax();
    }
  }
  pthread_mutex_unlock(&dispatch_mu);
}

void kiln_pool_for(kiln_range_fn fn, void* ctx, int64_t n, int64_t grain) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  int threads = kiln_pool_threads();
  if (threads <= 1 || n <= grain) {
    fn(ctx, 0, n);
    return;
  }
  int64_t parts = n / grain;
  int64_t cap = (int64_t)threads * KILN_PARTS_PER_THREAD;
  if (parts > cap) parts = cap;
  if (parts <= 1) {
    fn(ctx, 0, n);
    return;
  }
  dispatch(fn, ctx, n, parts, threads);
}

void kiln_pool_for_parts(kiln_range_fn fn, void* ctx, int64_t n, int64_t parts) {
  if (n <= 0) return;
  if (parts > n) parts = n;
  int threads = kiln_pool_threads();
  if (threads <= 1 || parts <= 1) {
    fn(ctx, 0, n);
    return;
  }
  dispatch(fn, ctx, n, parts, threads);
}

typedef struct {
  KilnKernelFn fn;
  const KilnArgs* a;
} KernelTrampoline;

static void kernel_trampoline(void* ctx, int64_t lo, int64_t hi) {
  const KernelTrampoline* t = (const KernelTrampoline*)ctx;
  t->fn(t->a, lo, hi);
}

void kiln_parallel_for(KilnKernelFn fn, const KilnArgs* a, int64_t n, int64_t grain) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  if (n <= grain || kiln_pool_threads() <= 1) {
    fn(a, 0, n);
    return;
  }
  KernelTrampoline t = {fn, a};
  kiln_pool_for(kernel_trampoline, &t, n, grain);
}
