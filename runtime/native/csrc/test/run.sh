#!/usr/bin/env bash
# Builds and runs the native runtime's standalone C tests and benchmarks.
#
#   test/run.sh          tests: the shared object as the addon builds it (warnings are errors,
#                        exported symbols), thread pool, GEMM and convolution correctness for
#                        the native ISA and the AVX2 and portable builds, kiln_math
#                        vectorization and sampled accuracy; then the quick benchmarks.
#                        A few minutes on 2 cores.
#   test/run.sh math     exhaustive kiln_math accuracy over all 2^32 inputs, native and
#                        portable builds (several minutes each), plus ns/element vs libm
#   test/run.sh bench    the full benchmarks
#   test/run.sh bench models [what] [reps]
#                        the GEMM and convolution calls of GPT-2 small and ResNet-18 as the
#                        models make them (see bench_models.c)
#
# Environment: CC (default cc), KILN_TEST_OUT (build folder, default a temporary one).
set -uo pipefail
cd "$(dirname "$0")/.."
CC=${CC:-cc}
OUT=${KILN_TEST_OUT:-$(mktemp -d -t kiln-rt-test.XXXXXX)}
mkdir -p "$OUT"
BASE="-O3 -std=gnu11 -pthread -ffp-contract=fast"
LIB="threads.c gemm.c conv.c runtime.c"
MODE=${1:-test}

passed=0
failed=0
step() { # name command...
  local name=$1
  shift
  echo "--- $name"
  if "$@"; then
    passed=$((passed + 1))
  else
    echo "FAILED: $name"
    failed=$((failed + 1))
  fi
}
build() { # output flags... -- sources...
  local out=$1
  shift
  local flags=()
  while [ "$1" != "--" ]; do flags+=("$1"); shift; done
  shift
  $CC $BASE "${flags[@]}" "$@" -o "$OUT/$out" -lm
}
has_flag() { grep -qw "$1" /proc/cpuinfo 2>/dev/null; }

# ISA builds this machine can run: native always; AVX2 and portable builds where they differ
NATIVE="-march=native"
ISAS=("native:$NATIVE")
if has_flag avx512f && has_flag avx2 && has_flag fma; then ISAS+=("avx2:-march=native -mno-avx512f"); fi
if [ "$(uname -m)" = x86_64 ]; then ISAS+=("portable:-march=x86-64"); fi

if [ "$MODE" = math ]; then
  step "build test_math (native)" build test_math_native $NATIVE -- test/test_math.c
  step "exhaustive math, native" "$OUT/test_math_native"
  step "build test_math (portable)" build test_math_portable -march=x86-64 -- test/test_math.c
  step "exhaustive math, portable (no FMA)" "$OUT/test_math_portable"
  step "math ns/element vs libm" "$OUT/test_math_native" bench
  echo "run.sh math: $passed passed, $failed failed"
  [ "$failed" = 0 ]
  exit
fi

if [ "$MODE" = bench ] && [ "${2:-}" = models ]; then
  step "build bench_models" build bench_models $NATIVE -- test/bench_models.c $LIB
  step "bench models" "$OUT/bench_models" "${@:3}"
  echo "run.sh bench models: $passed passed, $failed failed"
  [ "$failed" = 0 ]
  exit
fi

if [ "$MODE" = bench ]; then
  step "build bench" build bench $NATIVE -- test/bench.c $LIB
  step "bench" "$OUT/bench"
  step "math ns/element vs libm" sh -c "$CC $BASE $NATIVE test/test_math.c -o '$OUT/test_math' -lm && '$OUT/test_math' bench"
  echo "run.sh bench: $passed passed, $failed failed"
  [ "$failed" = 0 ]
  exit
fi

# the library exactly as the addon builder compiles it (plus warnings as errors)
check_so() {
  $CC -O3 -march=native -fPIC -shared -std=gnu11 -pthread -ffp-contract=fast -Wall -Wextra -Werror \
    $LIB -o "$OUT/libkiln_rt.so" || return 1
  local syms
  syms=$(nm -D --defined-only "$OUT/libkiln_rt.so" | awk '{print $3}' | grep '^kiln' | sort | tr '\n' ' ')
  echo "exported: $syms"
  [ "$syms" = "kiln_get_num_threads kiln_runtime_api kiln_runtime_isa kiln_set_num_threads " ]
}
step "shared object (addon flags, -Werror), exported symbols" check_so

# kiln_math: each of the 8 loops of vec_check.c is vectorized for every ISA
vec_check() {
  local flags=$1 n
  n=$($CC -O3 $flags -std=gnu11 -ffp-contract=fast -fopt-info-vec-optimized -c test/vec_check.c \
    -o "$OUT/vec_check.o" 2>&1 | grep "loop vectorized" | sed 's/:\([0-9]*\):.*/:\1/' | sort -u | wc -l)
  echo "loops vectorized with $flags: $n of 8"
  [ "$n" = 8 ]
}
for isa in "${ISAS[@]}"; do step "kiln_math vectorizes (${isa%%:*})" vec_check "${isa#*:}"; done

for isa in "${ISAS[@]}"; do
  name=${isa%%:*}
  flags=${isa#*:}
  cases_g=1500
  cases_c=800
  if [ "$name" != native ]; then cases_g=500; cases_c=300; fi
  step "build tests ($name)" sh -c "
    $CC $BASE $flags -Wall test/test_threads.c $LIB -o '$OUT/test_threads_$name' -lm &&
    $CC $BASE $flags -Wall test/test_gemm.c $LIB -o '$OUT/test_gemm_$name' -lm &&
    $CC $BASE $flags -Wall test/test_conv.c $LIB -o '$OUT/test_conv_$name' -lm &&
    $CC $BASE $flags -Wall test/test_math.c -o '$OUT/test_math_$name' -lm"
  step "threads ($name)" "$OUT/test_threads_$name"
  step "KILN_NUM_THREADS=3 ($name)" env KILN_NUM_THREADS=3 "$OUT/test_threads_$name" env 3
  step "gemm ($name)" "$OUT/test_gemm_$name" $cases_g
  step "conv ($name)" "$OUT/test_conv_$name" $cases_c
  step "math, 2^26 sampled inputs ($name)" "$OUT/test_math_$name" quick
done

step "build bench" build bench $NATIVE -- test/bench.c $LIB
step "bench (quick)" "$OUT/bench" quick

echo "run.sh: $passed passed, $failed failed"
[ "$failed" = 0 ]
