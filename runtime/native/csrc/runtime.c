/*
 * runtime.c — the native runtime's service table and build identity.
 */
#include "runtime_internal.h"

static const KilnApi kiln_api = {
    KILN_ABI_VERSION, kiln_num_threads, kiln_parallel_for, kiln_sgemm, kiln_sconv,
};

const KilnApi* kiln_runtime_api(void) { return &kiln_api; }

const char* kiln_runtime_isa(void) {
#if defined(__AVX512F__)
  return "avx512";
#elif defined(__AVX2__) && defined(__FMA__)
  return "avx2";
#else
  return "portable";
#endif
}
