/*
 * kiln_rt.h — the contract between the `native` backend's generated kernels, its runtime
 * library (threads, GEMM, convolution) and the Node-API addon that loads and runs programs.
 * Everything here is plain C99 data and function pointers, so generated code needs no link-time
 * dependency on the addon: a kernel library gets the runtime's services as a KilnApi table in
 * its init function. Element counts, strides and offsets are in elements (not bytes) and int64.
 * Bump KILN_ABI_VERSION whenever a struct or a signature here changes: the addon refuses a
 * library built for another version.
 */
#ifndef KILN_RT_H
#define KILN_RT_H

#include <stddef.h>
#include <stdint.h>

#define KILN_ABI_VERSION 1

#if defined(_WIN32)
#define KILN_EXPORT __declspec(dllexport)
#else
#define KILN_EXPORT __attribute__((visibility("default")))
#endif

/* The arguments of one kernel call: its buffers (in the kernel's parameter order) and sizes. */
typedef struct KilnArgs {
  void* const* buf;
  const int64_t* size;
} KilnArgs;

/* A kernel: runs iterations [lo, hi) of its range (the outermost parallel loop). Calls on
 * disjoint ranges may run concurrently on different threads. */
typedef void (*KilnKernelFn)(const KilnArgs* a, int64_t lo, int64_t hi);

/* A tile kernel (a GEMM or convolution epilogue): rows [r0, r1) and columns [c0, c1) of the
 * contraction's output are final and may be read and rewritten. Calls on disjoint tiles may
 * run concurrently. */
typedef void (*KilnTileFn)(const KilnArgs* a, int64_t r0, int64_t r1, int64_t c0, int64_t c1);

/* Offsets of the positions of one axis group of an operand, in elements:
 * offset(i) = table ? table[i] : i * stride. A group of several dims (two batch dims, a
 * contraction over two dims) or a non-uniform layout uses a table. */
typedef struct KilnAxis {
  const int64_t* table;
  int64_t stride;
} KilnAxis;

/*
 * A float32 dot_general in canonical form:
 *   C[b*M*N + m*N + n] = sum over k < k_lim of A[a_batch(b) + a_m(m) + a_k(k)]
 *                                            * B[b_batch(b) + b_k(k) + b_n(n)]
 * for b < batch, m < m_lim, n < n_lim (C is contiguous row-major [batch][M][N]; rows and
 * columns past the limits are not written: an extent hint says nobody reads them). The sum's
 * order is unspecified (tolerance tier). With an epilogue, epilogue(epilogue_args, r0, r1, c0,
 * c1) is called on every finished tile, rows counted as b*M + m (so [0, batch*M)), once per
 * element of [0, batch*m_lim) x [0, n_lim) in all; the contraction never touches a tile again
 * after its epilogue ran.
 */
typedef struct KilnGemm {
  int64_t batch, M, N, K;
  const float* A;
  KilnAxis a_batch, a_m, a_k;
  const float* B;
  KilnAxis b_batch, b_k, b_n;
  float* C;
  int64_t m_lim, n_lim, k_lim;
  KilnTileFn epilogue; /* or NULL */
  const KilnArgs* epilogue_args;
} KilnGemm;

#define KILN_CONV_MAX_SPATIAL 3

/*
 * A float32 convolution in XLA's general form, with feature groups (batch_group_count must
 * be 1; the backend does not emit this call otherwise). Layouts are free: every operand dim is
 * addressed through its element stride.
 *   y[b, o, p...] = sum over i < c_in / groups, window w...:
 *                   x[b, g*cg + i, base position...] * w[o, i, w...]      (g = o / (o_count/groups))
 * where for each spatial dim d: u = p*stride - pad_lo + w*rhs_dil is a position in the input
 * dilated by lhs_dil (u must be a multiple of lhs_dil; the base position is u / lhs_dil and
 * must lie in [0, in_size)), and a reversed window dim reads w[... , win-1-w, ...]. Positions
 * outside the input add nothing. Sum order is unspecified (tolerance tier).
 * With an epilogue, epilogue(epilogue_args, b0, b1, 0, 1) is called once the images
 * [b0, b1) of the output are complete.
 */
typedef struct KilnConv {
  int spatial; /* 0..3 */
  int64_t batch, c_in, o_count, groups;
  const float* x;
  int64_t x_sb, x_sf, x_ss[KILN_CONV_MAX_SPATIAL], in_size[KILN_CONV_MAX_SPATIAL];
  const float* w;
  int64_t w_so, w_si, w_ss[KILN_CONV_MAX_SPATIAL], win[KILN_CONV_MAX_SPATIAL];
  float* y;
  int64_t y_sb, y_sf, y_ss[KILN_CONV_MAX_SPATIAL], out_size[KILN_CONV_MAX_SPATIAL];
  int64_t stride[KILN_CONV_MAX_SPATIAL], pad_lo[KILN_CONV_MAX_SPATIAL];
  int64_t lhs_dil[KILN_CONV_MAX_SPATIAL], rhs_dil[KILN_CONV_MAX_SPATIAL];
  int32_t reverse[KILN_CONV_MAX_SPATIAL];
  KilnTileFn epilogue; /* or NULL */
  const KilnArgs* epilogue_args;
} KilnConv;

/* The runtime's services, handed to every kernel library's init. */
typedef struct KilnApi {
  int abi_version;
  /* Threads the pool runs (the calling thread included). */
  int (*num_threads)(void);
  /* Runs fn(a, lo, hi) over ranges covering [0, n) exactly once, each at least `grain`
   * iterations (but the last), on the pool; returns when all are done. Called from inside a
   * pool task it runs serially on the calling thread. */
  void (*parallel_for)(KilnKernelFn fn, const KilnArgs* a, int64_t n, int64_t grain);
  void (*sgemm)(const KilnGemm* g);
  /* 0 when done; nonzero (nothing written) for a form it does not implement. */
  int (*sconv)(const KilnConv* c);
} KilnApi;

/* What a kernel library exports, under the symbol name KILN_LIBRARY_SYMBOL. */
typedef struct KilnLibrary {
  int abi_version;
  int count;
  const char* const* names; /* the kernels' names, for errors and logs */
  const void* const* fns;   /* KilnKernelFn or KilnTileFn, by each kernel's kind */
  void (*init)(const KilnApi* api);
} KilnLibrary;

#define KILN_LIBRARY_SYMBOL "kiln_library_v1"

#endif /* KILN_RT_H */
