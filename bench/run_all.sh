#!/usr/bin/env bash
# Builds the benchmarks (Release, -DTAPEFLOW_BUILD_BENCH=ON, libtorch when installed) and runs
# every suite in one go on 2 OpenMP threads, printing medians of 5 repetitions. The figures in
# docs/performance.md come from this script; compare ratios within one run (the machine is shared).
#   bench/run_all.sh [filter-regex]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${TAPEFLOW_BENCH_BUILD_DIR:-build-bench}
if [[ ! -f $BUILD/CMakeCache.txt ]]; then
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DTAPEFLOW_BUILD_BENCH=ON \
    -DTAPEFLOW_BUILD_TESTS=OFF -DTAPEFLOW_BUILD_SAMPLES=OFF
fi
cmake --build "$BUILD" -j "$(nproc)"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
echo "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset} OMP_NUM_THREADS=$OMP_NUM_THREADS"
for b in "$BUILD"/bench/bench_*; do
  [[ -x $b ]] || continue
  echo "== $(basename "$b")"
  "$b" --benchmark_repetitions=5 --benchmark_report_aggregates_only=true \
    --benchmark_filter="${1:-.}" 2>&1 | grep -E "median|^Run|Context|openblas|gemm|CPU|---|Benchmark" || true
done
