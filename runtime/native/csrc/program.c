/*
 * program.c — the native backend's step-list interpreter. A program is data, not code: the
 * step list of runtime/kernel/program.ts encoded by runtime/native/encode.ts as one int64
 * array, plus the kernel functions it calls (resolved from loaded kernel libraries) and copies
 * of its constants. So a program needs no compiler run of its own: only kernels that were never
 * built before are compiled, and a step list made for one shape (an eager op) reuses the
 * shape-generic kernels of every other shape.
 *
 * Layout (all int64): [magic, version, computations, arena bytes, expressions offset,
 * step ids, computation offsets...]. Every step starts with its opcode and a step id (its
 * position in the profile, KILN_NATIVE_PROFILE=1). A computation: slots (kind, value) — 0 arena byte offset, 1
 * parameter leaf, 2 result index, 3 constant index — then parameter leaves, results, steps.
 * A size (kernel size, range, GEMM limit) is a literal when >= 0, else -(e+1) for expression e:
 * a postfix list over constants and the first s32 of an ENTRY parameter leaf (a bucket's real
 * size). Steps are documented at each opcode below and mirror encode.ts. The interpreter trusts
 * the encoding (it comes from the same process's encoder, or from a cache entry whose MAC was
 * verified) but still bounds every index it reads, failing with a message instead of crashing.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kiln_rt.h"
#include "kiln_mem.h"
#include "program.h"

#if defined(__has_include)
#if __has_include("runtime_internal.h")
#include "runtime_internal.h"
#define KILN_HAVE_RUNTIME_INTERNAL 1
#endif
#endif
#ifndef KILN_HAVE_RUNTIME_INTERNAL
const KilnApi* kiln_runtime_api(void);
#endif

#define PROGRAM_MAGIC 0x4b494c4e50524731LL /* "KILNPRG1" */
#define PROGRAM_VERSION 2

enum { OP_KERNEL = 1, OP_COPY = 2, OP_GEMM = 3, OP_CONV = 4, OP_CALL = 5, OP_WHILE = 6,
       OP_COND = 7 };
enum { SLOT_ARENA = 0, SLOT_PARAM = 1, SLOT_RESULT = 2, SLOT_CONST = 3 };
enum { X_CONST = 1, X_PARAM = 2, X_ADD = 3, X_MUL = 4, X_MIN = 5, X_MAX = 6, X_DIV = 7,
       X_MOD = 8 };

#define MAX_SLOTS_STACK 256
/* buffers of one kernel, call or loop state: arrays of the actual count on the stack */
#define MAX_ARGS 4096
#define MAX_SIZES 4096

struct KilnProgram {
  /* Per step id: seconds spent and calls (KILN_NATIVE_PROFILE=1), else NULL. */
  double* prof_s;
  int64_t* prof_n;
  int64_t nsteps_total;
  int64_t* code;
  int64_t ncode;
  void** fns;
  int64_t nfns;
  void** consts;
  int64_t nconsts;
  uint8_t* arena;
  int64_t arena_bytes;
  /* ENTRY parameter leaves of the current run (for X_PARAM). */
  void* const* entry_params;
  int64_t entry_nparams;
  char error[256];
};

typedef struct Frame {
  void** slot;
  int64_t nslots;
} Frame;

/* KILN_GEMM_TRACE=1: one stderr line per GEMM step (its plan), read once per process. */
static int gemm_trace(void) {
  static int cached = -1;
  if (cached < 0) {
    const char* v = getenv("KILN_GEMM_TRACE");
    cached = v != NULL && strcmp(v, "1") == 0;
  }
  return cached;
}

static int fail(KilnProgram* p, const char* msg) {
  if (p->error[0] == 0) snprintf(p->error, sizeof p->error, "%s", msg);
  return -1;
}

/* The word at i, bounds-checked (a function: its argument is often `at++`). */
static inline int64_t word(KilnProgram* p, int64_t i) {
  if (i >= 0 && i < p->ncode) return p->code[i];
  fail(p, "read past the end of the program");
  return 0;
}
#define W(i) word(p, (i))

static int64_t eval_expr(KilnProgram* p, int64_t e) {
  int64_t base = p->code[4];
  int64_t n = W(base);
  if (e < 0 || e >= n) return fail(p, "bad expression index"), 0;
  int64_t at = W(base + 1 + e);
  int64_t len = W(at);
  int64_t stack[32];
  int sp = 0;
  for (int64_t k = 0; k < len; k++) {
    int64_t op = W(at + 1 + 2 * k);
    int64_t v = W(at + 2 + 2 * k);
    if (op == X_CONST || op == X_PARAM) {
      if (sp >= 32) return fail(p, "expression too deep"), 0;
      if (op == X_CONST) {
        stack[sp++] = v;
      } else {
        if (v < 0 || v >= p->entry_nparams) return fail(p, "bad size parameter"), 0;
        stack[sp++] = (int64_t)(*(const int32_t*)p->entry_params[v]);
      }
      continue;
    }
    if (sp < 2) return fail(p, "malformed expression"), 0;
    int64_t b = stack[--sp];
    int64_t a = stack[--sp];
    int64_t r = 0;
    switch (op) {
      case X_ADD: r = a + b; break;
      case X_MUL: r = a * b; break;
      case X_MIN: r = a < b ? a : b; break;
      case X_MAX: r = a < b ? b : a; break;
      case X_DIV:
        if (b <= 0) return fail(p, "division by a non-positive size"), 0;
        r = a >= 0 ? a / b : -((-a + b - 1) / b);
        break;
      case X_MOD:
        if (b <= 0) return fail(p, "modulo by a non-positive size"), 0;
        r = ((a % b) + b) % b;
        break;
      default: return fail(p, "unknown expression token"), 0;
    }
    stack[sp++] = r;
  }
  if (sp != 1) return fail(p, "malformed expression"), 0;
  return stack[0];
}

static int64_t size_of(KilnProgram* p, int64_t v) { return v >= 0 ? v : eval_expr(p, -v - 1); }

static void* slot_ptr(KilnProgram* p, const Frame* f, int64_t s) {
  if (s < 0 || s >= f->nslots) return fail(p, "bad slot"), (void*)0;
  return f->slot[s];
}

static KilnKernelFn fn_at(KilnProgram* p, int64_t i) {
  if (i < 0 || i >= p->nfns || p->fns[i] == NULL) return fail(p, "bad kernel index"), NULL;
  return (KilnKernelFn)p->fns[i];
}

static int run_comp(KilnProgram* p, int64_t c, void* const* params, int64_t nparams,
                    void* const* results, int64_t nresults);

/* A convolution's epilogue: the runtime says which images are done (b0, b1, 0, 1); the tile
 * kernel runs on those rows and every column. KilnArgs first, so the runtime's pointer is it. */
typedef struct ConvEpilogue {
  KilnArgs args;
  KilnTileFn fn;
  int64_t cols;
} ConvEpilogue;

static void conv_epilogue(const KilnArgs* a, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
  (void)c0;
  (void)c1;
  const ConvEpilogue* e = (const ConvEpilogue*)a;
  e->fn(&e->args, r0, r1, 0, e->cols);
}

/* Kernel arguments read at `at`: nbuf, slots..., nsize, sizes...; returns the next word. */
static int64_t read_args(KilnProgram* p, const Frame* f, int64_t at, void** bufs,
                         int64_t* sizes) {
  int64_t nbuf = W(at++);
  if (nbuf < 0 || nbuf > MAX_ARGS) return fail(p, "too many kernel buffers"), -1;
  for (int64_t i = 0; i < nbuf; i++) bufs[i] = slot_ptr(p, f, W(at++));
  int64_t nsize = W(at++);
  if (nsize < 0 || nsize > MAX_SIZES) return fail(p, "too many kernel sizes"), -1;
  for (int64_t i = 0; i < nsize; i++) sizes[i] = size_of(p, W(at++));
  return at;
}

/* The buffer and size counts of the kernel arguments at `at` (nbuf, slots..., nsize, ...), for
 * sizing the arrays read_args fills; 0 and 0 when `present` is false; -1 when out of range. */
static int arg_counts(KilnProgram* p, int64_t at, int present, int64_t* nb, int64_t* ns) {
  *nb = present ? W(at) : 0;
  if (*nb < 0 || *nb > MAX_ARGS) return fail(p, "too many kernel buffers"), -1;
  *ns = present ? W(at + 1 + *nb) : 0;
  if (*ns < 0 || *ns > MAX_SIZES) return fail(p, "too many kernel sizes"), -1;
  return 0;
}

static void axis_of(KilnProgram* p, int64_t table, int64_t stride, KilnAxis* ax) {
  ax->stride = stride;
  ax->table = table >= 0 && table < p->ncode ? &p->code[table] : NULL;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int run_steps(KilnProgram* p, Frame* f, int64_t at, int64_t nsteps) {
  const KilnApi* api = kiln_runtime_api();
  int64_t prof_id = -1;
  double prof_t0 = 0;
  for (int64_t s = 0; s < nsteps && p->error[0] == 0; s++) {
    if (prof_id >= 0) {
      p->prof_s[prof_id] += now_s() - prof_t0;
      p->prof_n[prof_id]++;
    }
    int64_t op = W(at++);
    int64_t id = W(at++);
    if (p->prof_s != NULL && id >= 0 && id < p->nsteps_total) {
      prof_id = id;
      prof_t0 = now_s();
    } else {
      prof_id = -1;
    }
    switch (op) {
      case OP_KERNEL: {
        /* fn, nbuf, slots..., nsize, sizes..., has range (0/1), extent, grain */
        KilnKernelFn fn = fn_at(p, W(at++));
        int64_t nb, ns;
        if (arg_counts(p, at, 1, &nb, &ns) != 0) return -1;
        void* bufs[nb + 1];
        int64_t sizes[ns + 1];
        at = read_args(p, f, at, bufs, sizes);
        if (at < 0) return -1;
        int64_t ranged = W(at++);
        int64_t ext = W(at++);
        int64_t grain = W(at++);
        if (fn == NULL || p->error[0] != 0) return -1;
        KilnArgs a = {bufs, sizes};
        if (!ranged) {
          fn(&a, 0, 1);
        } else {
          int64_t n = size_of(p, ext);
          if (n > 0) api->parallel_for(fn, &a, n, grain < 1 ? 1 : grain);
        }
        break;
      }
      case OP_COPY: {
        /* from, to, bytes */
        void* from = slot_ptr(p, f, W(at++));
        void* to = slot_ptr(p, f, W(at++));
        int64_t bytes = W(at++);
        if (from != to && bytes > 0) memmove(to, from, (size_t)bytes);
        break;
      }
      case OP_GEMM: {
        /* A, B, C, batch, M, N, K, 6 x (table, stride), m_lim, n_lim, k_lim,
         * epilogue fn (-1: none), epilogue args (nbuf, slots, nsize, sizes) */
        KilnGemm g;
        memset(&g, 0, sizeof g);
        g.A = (const float*)slot_ptr(p, f, W(at++));
        g.B = (const float*)slot_ptr(p, f, W(at++));
        g.C = (float*)slot_ptr(p, f, W(at++));
        g.batch = W(at++);
        g.M = W(at++);
        g.N = W(at++);
        g.K = W(at++);
        KilnAxis* axes[6] = {&g.a_batch, &g.a_m, &g.a_k, &g.b_batch, &g.b_k, &g.b_n};
        for (int i = 0; i < 6; i++) {
          int64_t t = W(at++);
          int64_t st = W(at++);
          axis_of(p, t, st, axes[i]);
        }
        g.m_lim = size_of(p, W(at++));
        g.n_lim = size_of(p, W(at++));
        g.k_lim = size_of(p, W(at++));
        int64_t efn = W(at++);
        int64_t enb, ens;
        if (arg_counts(p, at, efn >= 0, &enb, &ens) != 0) return -1;
        void* ebufs[enb + 1];
        int64_t esizes[ens + 1];
        KilnArgs ea = {ebufs, esizes};
        if (efn >= 0) {
          if (efn >= p->nfns || p->fns[efn] == NULL) return fail(p, "bad epilogue index");
          at = read_args(p, f, at, ebufs, esizes);
          if (at < 0) return -1;
          g.epilogue = (KilnTileFn)p->fns[efn];
          g.epilogue_args = &ea;
        }
        if (p->error[0] != 0) return -1;
        if (gemm_trace()) {
          fprintf(stderr,
                  "[kiln:gemm] batch %lld M %lld N %lld K %lld a(%s%lld,%s%lld,%s%lld) "
                  "b(%s%lld,%s%lld,%s%lld) lim %lld %lld %lld epi %d\n",
                  (long long)g.batch, (long long)g.M, (long long)g.N, (long long)g.K,
                  g.a_batch.table ? "T" : "", (long long)g.a_batch.stride,
                  g.a_m.table ? "T" : "", (long long)g.a_m.stride, g.a_k.table ? "T" : "",
                  (long long)g.a_k.stride, g.b_batch.table ? "T" : "",
                  (long long)g.b_batch.stride, g.b_k.table ? "T" : "", (long long)g.b_k.stride,
                  g.b_n.table ? "T" : "", (long long)g.b_n.stride, (long long)g.m_lim,
                  (long long)g.n_lim, (long long)g.k_lim, g.epilogue != NULL);
        }
        api->sgemm(&g);
        break;
      }
      case OP_CONV: {
        KilnConv c;
        memset(&c, 0, sizeof c);
        c.x = (const float*)slot_ptr(p, f, W(at++));
        c.w = (const float*)slot_ptr(p, f, W(at++));
        c.y = (float*)slot_ptr(p, f, W(at++));
        c.spatial = (int)W(at++);
        c.batch = W(at++);
        c.c_in = W(at++);
        c.o_count = W(at++);
        c.groups = W(at++);
        c.x_sb = W(at++);
        c.x_sf = W(at++);
        c.w_so = W(at++);
        c.w_si = W(at++);
        c.y_sb = W(at++);
        c.y_sf = W(at++);
        for (int d = 0; d < KILN_CONV_MAX_SPATIAL; d++) {
          c.x_ss[d] = W(at++);
          c.in_size[d] = W(at++);
          c.w_ss[d] = W(at++);
          c.win[d] = W(at++);
          c.y_ss[d] = W(at++);
          c.out_size[d] = W(at++);
          c.stride[d] = W(at++);
          c.pad_lo[d] = W(at++);
          c.lhs_dil[d] = W(at++);
          c.rhs_dil[d] = W(at++);
          c.reverse[d] = (int32_t)W(at++);
        }
        /* epilogue fn (-1: none), its columns, its args */
        int64_t efn = W(at++);
        int64_t ecols = W(at++);
        int64_t enb, ens;
        if (arg_counts(p, at, efn >= 0, &enb, &ens) != 0) return -1;
        void* ebufs[enb + 1];
        int64_t esizes[ens + 1];
        ConvEpilogue ce = {{ebufs, esizes}, NULL, ecols};
        if (efn >= 0) {
          if (efn >= p->nfns || p->fns[efn] == NULL) return fail(p, "bad epilogue index");
          at = read_args(p, f, at, ebufs, esizes);
          if (at < 0) return -1;
          ce.fn = (KilnTileFn)p->fns[efn];
          c.epilogue = conv_epilogue;
          c.epilogue_args = &ce.args;
        }
        if (p->error[0] != 0) return -1;
        if (api->sconv(&c) != 0) return fail(p, "the runtime's convolution refused the form");
        break;
      }
      case OP_CALL: {
        /* comp, nargs, args..., nres, res... */
        int64_t comp = W(at++);
        int64_t na = W(at++);
        if (na < 0 || na > MAX_ARGS) return fail(p, "too many call arguments");
        void* args[na + 1];
        for (int64_t i = 0; i < na; i++) args[i] = slot_ptr(p, f, W(at++));
        int64_t nr = W(at++);
        if (nr < 0 || nr > MAX_ARGS) return fail(p, "too many call results");
        void* res[nr + 1];
        for (int64_t i = 0; i < nr; i++) res[i] = slot_ptr(p, f, W(at++));
        if (run_comp(p, comp, args, na, res, nr) != 0) return -1;
        break;
      }
      case OP_WHILE: {
        /* cond, body, n, init[n], results[n], scratch[n], flag, bytes[n] */
        int64_t cond = W(at++);
        int64_t body = W(at++);
        int64_t n = W(at++);
        if (n < 0 || n > MAX_ARGS) return fail(p, "too large a loop state");
        void *init[n + 1], *A[n + 1], *B[n + 1];
        int64_t bytes[n + 1];
        for (int64_t i = 0; i < n; i++) init[i] = slot_ptr(p, f, W(at++));
        for (int64_t i = 0; i < n; i++) A[i] = slot_ptr(p, f, W(at++));
        for (int64_t i = 0; i < n; i++) B[i] = slot_ptr(p, f, W(at++));
        void* flag = slot_ptr(p, f, W(at++));
        for (int64_t i = 0; i < n; i++) bytes[i] = W(at++);
        if (p->error[0] != 0) return -1;
        void** state = init;
        int64_t w = 0;
        for (;;) {
          void* fr[1] = {flag};
          if (run_comp(p, cond, state, n, fr, 1) != 0) return -1;
          if (*(const uint8_t*)flag == 0) break;
          void** dst = (w & 1) == 0 ? A : B;
          if (run_comp(p, body, state, n, dst, n) != 0) return -1;
          state = dst;
          w++;
        }
        if (state != A) {
          for (int64_t i = 0; i < n; i++) {
            if (state[i] != A[i] && bytes[i] > 0) memmove(A[i], state[i], (size_t)bytes[i]);
          }
        }
        break;
      }
      case OP_COND: {
        /* selector, predicate, nbranches, per branch (comp, nargs, args...), nres, res... */
        const void* sel = slot_ptr(p, f, W(at++));
        int64_t predicate = W(at++);
        int64_t nb = W(at++);
        if (nb <= 0 || nb > MAX_ARGS) return fail(p, "bad branch count");
        int64_t pick;
        if (predicate) {
          pick = *(const uint8_t*)sel != 0 ? 0 : 1;
        } else {
          int32_t v = *(const int32_t*)sel;
          pick = (v < 0 || v >= nb) ? nb - 1 : v;
        }
        int64_t chosen_comp = -1, chosen_at = -1, chosen_na = 0;
        for (int64_t b = 0; b < nb; b++) {
          int64_t comp = W(at++);
          int64_t na = W(at++);
          if (b == pick) {
            chosen_comp = comp;
            chosen_at = at;
            chosen_na = na;
          }
          at += na;
        }
        int64_t nr = W(at++);
        if (nr < 0 || nr > MAX_ARGS || chosen_na < 0 || chosen_na > MAX_ARGS) {
          return fail(p, "bad branch");
        }
        void* res[nr + 1];
        for (int64_t i = 0; i < nr; i++) res[i] = slot_ptr(p, f, W(at++));
        void* args[chosen_na + 1];
        for (int64_t i = 0; i < chosen_na; i++) args[i] = slot_ptr(p, f, W(chosen_at + i));
        if (p->error[0] != 0) return -1;
        if (run_comp(p, chosen_comp, args, chosen_na, res, nr) != 0) return -1;
        break;
      }
      default:
        return fail(p, "unknown step");
    }
  }
  if (prof_id >= 0) {
    p->prof_s[prof_id] += now_s() - prof_t0;
    p->prof_n[prof_id]++;
  }
  return p->error[0] == 0 ? 0 : -1;
}

static int run_comp(KilnProgram* p, int64_t c, void* const* params, int64_t nparams,
                    void* const* results, int64_t nresults) {
  int64_t ncomps = p->code[2];
  if (c < 0 || c >= ncomps) return fail(p, "bad computation index");
  int64_t at = W(6 + c);
  int64_t nslots = W(at++);
  if (nslots < 0 || nslots > (1 << 24)) return fail(p, "bad slot count");
  void* stack[MAX_SLOTS_STACK];
  void** slot = nslots <= MAX_SLOTS_STACK ? stack : (void**)malloc(sizeof(void*) * nslots);
  if (slot == NULL) return fail(p, "out of memory");
  for (int64_t i = 0; i < nslots; i++) {
    int64_t kind = W(at++);
    int64_t v = W(at++);
    switch (kind) {
      case SLOT_ARENA:
        slot[i] = (v >= 0 && v <= p->arena_bytes) ? p->arena + v : (fail(p, "bad offset"), NULL);
        break;
      case SLOT_PARAM:
        slot[i] = (v >= 0 && v < nparams) ? params[v] : (fail(p, "bad parameter leaf"), NULL);
        break;
      case SLOT_RESULT:
        slot[i] = (v >= 0 && v < nresults) ? results[v] : (fail(p, "bad result index"), NULL);
        break;
      case SLOT_CONST:
        slot[i] = (v >= 0 && v < p->nconsts) ? p->consts[v] : (fail(p, "bad constant"), NULL);
        break;
      default:
        slot[i] = NULL;
        fail(p, "bad slot kind");
    }
  }
  int64_t wantParams = W(at++);
  int64_t wantResults = W(at++);
  int64_t nsteps = W(at++);
  int rc = -1;
  if (wantParams != nparams || wantResults != nresults) {
    snprintf(p->error, sizeof p->error, "computation %lld was called with %lld parameter leaves and %lld results; it takes %lld and %lld", (long long)c, (long long)nparams, (long long)nresults, (long long)wantParams, (long long)wantResults);
  } else if (p->error[0] == 0) {
    Frame fr = {slot, nslots};
    rc = run_steps(p, &fr, at, nsteps);
  }
  if (slot != stack) free(slot);
  return rc;
}

KilnProgram* kiln_program_create(const int64_t* code, int64_t ncode, void* const* fns,
                                 int64_t nfns, const void* const* consts,
                                 const int64_t* const_bytes, int64_t nconsts, char* err,
                                 size_t errcap) {
  if (ncode < 5 || code[0] != PROGRAM_MAGIC || code[1] != PROGRAM_VERSION || code[2] < 1 ||
      code[3] < 0 || ncode < 6 + code[2]) {
    snprintf(err, errcap, "not a Kiln program (bad header)");
    return NULL;
  }
  KilnProgram* p = (KilnProgram*)calloc(1, sizeof *p);
  if (p == NULL) {
    snprintf(err, errcap, "out of memory");
    return NULL;
  }
  p->ncode = ncode;
  p->code = (int64_t*)malloc(sizeof(int64_t) * (size_t)ncode);
  p->nfns = nfns;
  p->fns = (void**)calloc((size_t)(nfns > 0 ? nfns : 1), sizeof(void*));
  p->nconsts = nconsts;
  p->consts = (void**)calloc((size_t)(nconsts > 0 ? nconsts : 1), sizeof(void*));
  p->arena_bytes = code[3];
  if (p->arena_bytes > 0 && posix_memalign((void**)&p->arena, 64, (size_t)p->arena_bytes) != 0) {
    p->arena = NULL;
  }
  if (p->arena) kiln_advise_huge(p->arena, (size_t)p->arena_bytes);
  if (p->code == NULL || p->fns == NULL || p->consts == NULL ||
      (p->arena_bytes > 0 && p->arena == NULL)) {
    kiln_program_free(p);
    snprintf(err, errcap, "out of memory (arena of %lld bytes)", (long long)code[3]);
    return NULL;
  }
  memcpy(p->code, code, sizeof(int64_t) * (size_t)ncode);
  /* Header word 5: the number of step ids (for the profile). */
  p->nsteps_total = code[5];
  const char* prof = getenv("KILN_NATIVE_PROFILE");
  if (prof != NULL && prof[0] == '1' && p->nsteps_total > 0) {
    p->prof_s = (double*)calloc((size_t)p->nsteps_total, sizeof(double));
    p->prof_n = (int64_t*)calloc((size_t)p->nsteps_total, sizeof(int64_t));
  }
  for (int64_t i = 0; i < nfns; i++) p->fns[i] = fns[i];
  for (int64_t i = 0; i < nconsts; i++) {
    size_t n = (size_t)const_bytes[i];
    void* c = malloc(n > 0 ? n : 1);
    if (c == NULL) {
      kiln_program_free(p);
      snprintf(err, errcap, "out of memory (constants)");
      return NULL;
    }
    if (n > 0) memcpy(c, consts[i], n);
    p->consts[i] = c;
  }
  return p;
}

int kiln_program_run(KilnProgram* p, void* const* params, int64_t nparams, void* const* results,
                     int64_t nresults, char* err, size_t errcap) {
  p->error[0] = 0;
  p->entry_params = params;
  p->entry_nparams = nparams;
  int rc = run_comp(p, 0, params, nparams, results, nresults);
  if (rc != 0) snprintf(err, errcap, "%s", p->error[0] ? p->error : "the program failed");
  return rc;
}

int64_t kiln_program_profile(const KilnProgram* p, double* seconds, int64_t* calls, int64_t cap) {
  if (p->prof_s == NULL) return 0;
  int64_t n = p->nsteps_total < cap ? p->nsteps_total : cap;
  for (int64_t i = 0; i < n; i++) {
    seconds[i] = p->prof_s[i];
    calls[i] = p->prof_n[i];
  }
  return n;
}

void kiln_program_free(KilnProgram* p) {
  if (p == NULL) return;
  free(p->prof_s);
  free(p->prof_n);
  if (p->consts) {
    for (int64_t i = 0; i < p->nconsts; i++) free(p->consts[i]);
  }
  free(p->consts);
  free(p->fns);
  free(p->code);
  free(p->arena);
  free(p);
}
