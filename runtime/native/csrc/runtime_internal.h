/*
 * runtime_internal.h — declarations shared by the native backend's runtime library (threads.c,
 * gemm.c, conv.c, runtime.c) and the Node-API addon compiled into the same shared object.
 * Nothing here is part of the ABI that generated kernel libraries see (that is kiln_rt.h: they
 * get the runtime's services through the KilnApi table only).
 *
 * Symbols: the four functions marked KILN_EXPORT are the library's public entry points; every
 * other function is hidden (KILN_HIDDEN) so that the runtime never clashes with, or is
 * interposed by, another shared object loaded into the same process.
 */
#ifndef KILN_RUNTIME_INTERNAL_H
#define KILN_RUNTIME_INTERNAL_H

#include "kiln_rt.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define KILN_HIDDEN
#else
#define KILN_HIDDEN __attribute__((visibility("hidden")))
#endif

/* ---- public entry points (runtime.c / threads.c) ------------------------------------------ */

/* The service table handed to every kernel library's init (static storage, never freed). */
KILN_EXPORT const KilnApi* kiln_runtime_api(void);
/* Threads the pool runs, the calling thread included. n <= 0 restores the default (the CPUs in
 * the process's affinity mask, or KILN_NUM_THREADS when set); 1 runs everything inline. Takes
 * effect at the next parallel call; safe to call at any time from any thread. */
KILN_EXPORT void kiln_set_num_threads(int n);
KILN_EXPORT int kiln_get_num_threads(void);
/* "avx512", "avx2" or "portable": the micro-kernels this build uses (chosen at compile time). */
KILN_EXPORT const char* kiln_runtime_isa(void);

/* ---- thread pool (threads.c) -------------------------------------------------------------- */

/* A task over iterations [lo, hi) with an opaque context. */
typedef void (*kiln_range_fn)(void* ctx, int64_t lo, int64_t hi);

/* Runs fn(ctx, lo, hi) over ranges covering [0, n) exactly once, each at least `grain`
 * iterations except the last, on the pool plus the calling thread; returns when all are done.
 * Runs inline (one call fn(ctx, 0, n), no synchronization) when n <= grain, when the pool has
 * one thread, when called from inside a pool task, or while another thread is dispatching. */
KILN_HIDDEN void kiln_pool_for(kiln_range_fn fn, void* ctx, int64_t n, int64_t grain);
/* Like kiln_pool_for but with exactly `parts` ranges [i*n/parts, (i+1)*n/parts) (parts <= n),
 * each a separate task (dynamic assignment), for callers that size their own work units. */
KILN_HIDDEN void kiln_pool_for_parts(kiln_range_fn fn, void* ctx, int64_t n, int64_t parts);
/* KilnApi.parallel_for. */
KILN_HIDDEN void kiln_parallel_for(KilnKernelFn fn, const KilnArgs* a, int64_t n, int64_t grain);
/* Threads a parallel call made now would use (1 inside a pool task). */
KILN_HIDDEN int kiln_pool_threads(void);
/* KilnApi.num_threads: the configured thread count. */
KILN_HIDDEN int kiln_num_threads(void);
/* Nonzero on a pool worker, or on a thread while it runs its share of a parallel call. */
KILN_HIDDEN int kiln_in_pool_task(void);

/* ---- GEMM (gemm.c) ------------------------------------------------------------------------ */

KILN_HIDDEN void kiln_sgemm(const KilnGemm* g);

/* ---- convolution (conv.c) ----------------------------------------------------------------- */

KILN_HIDDEN int kiln_sconv(const KilnConv* c);

/* ---- shared between gemm.c and conv.c: the generic packed-GEMM core ------------------------ */

/* One operand of the core, seen as a matrix over (j, k): j is the operand's non-contraction
 * index (rows m for A, columns n for B), k the contraction index. pack() writes the panel
 * out[k * W + j] for k < kc, j < w (positions k0 + k, j0 + j), and zeros for w <= j < W. */
typedef struct KilnSrc KilnSrc;
typedef void (*kiln_pack_fn)(const KilnSrc* s, int64_t k0, int64_t kc, int64_t j0, int64_t w,
                             int64_t W, float* out);
struct KilnSrc {
  kiln_pack_fn pack;
  const float* base; /* element (j, k) = base[j_off(j) + k_off(k)] for axis sources */
  KilnAxis j, k;
  const void* ctx; /* anything else a custom packer needs (conv) */
  int64_t aux;     /* a custom packer's parameter (conv: the first image of the task) */
};

/* Axis source packer: element (j, k) at base[j_off(j) + k_off(k)], fast paths for unit
 * strides and tables. */
KILN_HIDDEN void kiln_pack_axis(const KilnSrc* s, int64_t k0, int64_t kc, int64_t j0, int64_t w,
                                int64_t W, float* out);
/* out[k * W + j] = rows[j][k] for j < w, k < kc; zeros for w <= j < W (w <= 64). */
KILN_HIDDEN void kiln_pack_transpose(const float* const* rows, int64_t w, int64_t kc, float* out,
                                     int64_t W);

/* Output of the core: element (r, c) at C[row(r) + col(c)]. Columns with unit stride (no table)
 * are stored straight from the registers; anything else goes through a scattered tile store. */
typedef struct KilnOut {
  float* C;
  KilnAxis row, col;
} KilnOut;

/* C(r, c) = sum_{k < K} A(r, k) B(k, c) for r in [r0, r1), c in [c0, c1); A's j is r, B's j is c.
 * Serial (runs on the calling thread). The K blocking depends on K only, so every element's
 * value is independent of how callers split rows and columns. When tile_done is set, it is
 * called (tile_ctx, ra, rb, ca, cb) on finished tiles covering the rectangle exactly once. */
typedef void (*kiln_tile_fn)(void* ctx, int64_t ra, int64_t rb, int64_t ca, int64_t cb);
KILN_HIDDEN void kiln_gemm_core(const KilnSrc* A, const KilnSrc* B, const KilnOut* out,
                                int64_t K, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                                kiln_tile_fn tile_done, void* tile_ctx);

/* The core's register tile (rows, columns) for this ISA, for callers that align splits. */
KILN_HIDDEN int kiln_gemm_mr(void);
KILN_HIDDEN int kiln_gemm_nr(void);

/* Thread-local, 64-byte aligned scratch that lives as long as the thread (grown on demand,
 * never shrunk, freed at thread exit). Slots 0..5 are independent buffers: 0-2 the GEMM core's
 * packed panels, 3 GEMV, 4-5 convolution packers. Returns NULL only when out of memory. */
KILN_HIDDEN float* kiln_scratch(int slot, size_t floats);

#ifdef __cplusplus
}
#endif

#endif /* KILN_RUNTIME_INTERNAL_H */
