#!/usr/bin/env bash
# The GPU check: builds Release for sm_90 (unless given a prebuilt tree), runs the whole test suite
# with the CUDA cases, runs the GPU benchmarks, and prints a short table last.
#
#   tools/gpu_check.sh                    # build in build-gpu/ (needs tools/setup.sh's packages)
#   tools/gpu_check.sh --prebuilt DIR     # DIR holds tests/, bench/, samples/ and lib/ from
#                                         # tools/device_bundle.sh (a GPU machine without the
#                                         # build dependencies)
# Logs go to $GPU_CHECK_LOGS (default: DIR/logs). Exit status: 0 when every test passed.
# GPU_CHECK_DEADLINE=SECONDS bounds the whole check (a lent machine's minutes are few): each test
# binary gets what is left less what the benchmarks are kept, and the benchmarks share the rest.
# GPU_CHECK_BINARIES="autograd jit" runs only those test suites. SKIP_BENCH=1 and SKIP_MATRIX=1
# leave out bench_cuda (with compare.py --gpu) and the matrix_benchmark sample. Suites run again
# with TAPEFLOW_JIT_COMPILE forced: GPU_CHECK_JIT_PASSES lists the passes as VALUE:suite,suite
# (default "0:jit,keras,distribute": every GPU graph unfused and node by node, where jit_compile
# is on by default; =1 gives generated kernels and CUDA graphs even where a function says
# false); "" skips them.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=""
if [[ ${1:-} == --prebuilt ]]; then
  BUILD=$(cd "$2" && pwd)
  shift 2
  export LD_LIBRARY_PATH="$BUILD/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
else
  BUILD=$ROOT/build-gpu
  if [[ ! -f $BUILD/CMakeCache.txt ]]; then
    cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DTAPEFLOW_CUDA=ON \
      -DCMAKE_CUDA_ARCHITECTURES=90 -DTAPEFLOW_BUILD_BENCH=ON || exit 1
  fi
  cmake --build "$BUILD" -j "$(nproc)" || exit 1
fi
LOGS=${GPU_CHECK_LOGS:-$BUILD/logs}
mkdir -p "$LOGS"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv,noheader 2>&1 |
  tee "$LOGS/gpu.txt"

status=0
summary=()
DEADLINE=$(( $(date +%s) + ${GPU_CHECK_DEADLINE:-3600} ))
BENCH_RESERVE=${GPU_CHECK_BENCH_RESERVE:-150}
# Seconds left before the deadline, less $1 kept for later steps, at most $2 and at least 5.
budget() {
  local left=$(( DEADLINE - $(date +%s) - $1 ))
  (( left > $2 )) && left=$2
  (( left < 5 )) && left=5
  echo $left
}
# Optional: a Catch2 test filter for every binary (e.g. "[cuda]").
FILTER=${1:-}
# Hidden cases ([.name], run by CTest's scripts, e.g. the multi-worker failures under mpirun)
# stay out: a filter made of exclusions alone would select them too.
EXCLUDE="~[own_process]~[.]"
for t in "$BUILD"/tests/tapeflow_tests_*; do
  [[ -x $t ]] || continue
  name=$(basename "$t")
  # GPU_CHECK_BINARIES="ops jit": only these suites (all by default).
  if [[ -n ${GPU_CHECK_BINARIES:-} && " $GPU_CHECK_BINARIES " != *" ${name#tapeflow_tests_} "* ]]; then
    continue
  fi
  start=$(date +%s)
  # Line-buffered, with each case's duration: a binary stopped at its limit shows where it was.
  # Cases tagged [own_process] configure devices before any op, so each runs alone first (CTest
  # runs every case alone anyway).
  rc=0
  : >"$LOGS/$name.log"
  while IFS= read -r case_name; do
    [[ -z $case_name || $case_name == *"test case"* ]] && continue
    OMP_NUM_THREADS=${OMP_NUM_THREADS:-8} timeout "$(budget "$BENCH_RESERVE" 120)" \
      stdbuf -oL -eL "$t" "$case_name" --durations yes >>"$LOGS/$name.log" 2>&1 || rc=$?
  done < <("$t" --list-test-names-only "${FILTER}[own_process]" 2>/dev/null)
  OMP_NUM_THREADS=${OMP_NUM_THREADS:-8} timeout "$(budget "$BENCH_RESERVE" 600)" \
    stdbuf -oL -eL "$t" "${FILTER}${EXCLUDE}" --durations yes >>"$LOGS/$name.log" 2>&1
  r=$?
  (( r != 0 )) && rc=$r
  [[ $rc -ne 0 ]] && status=1
  line=$(grep -E "^(All tests passed|test cases:)" "$LOGS/$name.log" | tail -1)
  summary+=("$(printf '%-26s rc=%-3s %4ss  %s' "$name" "$rc" "$(($(date +%s) - start))" "$line")")
  if [[ $rc -ne 0 ]]; then
    # The first failures, for the reply's tail.
    grep -B3 -A12 -E "FAILED|REQUIRE|CHECK\(" "$LOGS/$name.log" | head -60
  fi
done
# The suites again with jit_compile forced for every tf::function (TAPEFLOW_JIT_COMPILE=0: GPU
# graphs unfused and node by node; =1: NVRTC kernels and CUDA graphs even where a function says
# false).
for pass in ${GPU_CHECK_JIT_PASSES-0:jit,keras,distribute}; do
  value=${pass%%:*}
  suites=${pass#*:}
  for n in ${suites//,/ }; do
    t=$BUILD/tests/tapeflow_tests_$n
    [[ -x $t ]] || continue
    start=$(date +%s)
    log=$LOGS/tapeflow_tests_$n.jit$value.log
    TAPEFLOW_JIT_COMPILE=$value OMP_NUM_THREADS=${OMP_NUM_THREADS:-8} \
      timeout "$(budget "$BENCH_RESERVE" 300)" \
      stdbuf -oL -eL "$t" "${FILTER}${EXCLUDE}" --durations yes >"$log" 2>&1
    rc=$?
    [[ $rc -ne 0 ]] && status=1
    line=$(grep -E "^(All tests passed|test cases:)" "$log" | tail -1)
    summary+=("$(printf '%-26s rc=%-3s %4ss  %s' "tapeflow_tests_$n jit=$value" "$rc" "$(($(date +%s) - start))" "$line")")
    [[ $rc -ne 0 ]] && grep -B3 -A12 -E "FAILED" "$log" | head -60
  done
done

sample=$BUILD/samples/seed_basics
if [[ -f $sample && -x $sample ]]; then
  if "$sample" >"$LOGS/seed_basics.out" 2>&1; then
    if diff -q "$LOGS/seed_basics.out" "$ROOT/samples/seed_basics/expected_output.txt" >/dev/null; then
      summary+=("seed_basics sample: ran, output equals the golden file")
    else
      summary+=("seed_basics sample: ran, output differs from the golden file (see logs)")
      diff "$LOGS/seed_basics.out" "$ROOT/samples/seed_basics/expected_output.txt" | head -20
    fi
  else
    summary+=("seed_basics sample: FAILED"); status=1
  fi
fi

bench=$BUILD/bench/bench_cuda
if [[ -x $bench && -z ${SKIP_BENCH:-} ]]; then
  timeout "$(budget $(( BENCH_RESERVE / 2 )) 300)" "$bench" \
    --benchmark_repetitions=${BENCH_REPS:-5} --benchmark_report_aggregates_only=true \
    --benchmark_counters_tabular=true 2>&1 | tee "$LOGS/bench_cuda.txt" | grep -E "median|Benchmark" || true
fi

# Issue 8's GPU side by side: tapeflow against cuBLAS and cuSOLVER called directly.
cmp=$BUILD/bench/compare_cuda
if [[ -x $cmp && -z ${SKIP_BENCH:-} ]] && command -v python3 >/dev/null; then
  timeout "$(budget 0 120)" python3 "$ROOT/bench/compare/compare.py" --gpu --no-build \
    --build-dir "$BUILD" --max-n "${GPU_CHECK_COMPARE_MAX_N:-4096}" --rounds 1 --min-time 0.05 \
    --csv "$LOGS/compare_gpu.csv" >"$LOGS/compare_gpu.txt" 2>/dev/null
  summary+=("compare.py --gpu: $(grep -E '^worst' "$LOGS/compare_gpu.txt" || echo 'no table (see logs)')")
fi

# PyTorch's eager and CUDA-graph MLP step beside BM_MlpStep, where python3 has torch with CUDA.
if [[ -z ${SKIP_BENCH:-} ]] && python3 -c 'import torch' 2>/dev/null; then
  timeout "$(budget 0 60)" python3 "$ROOT/bench/compare/mlp_step_torch_gpu.py" \
    >"$LOGS/mlp_step_torch_gpu.txt" 2>&1
  summary+=("mlp_step_torch_gpu.py: rc=$? (see logs)")
fi

# GPU_CHECK_MATRIX_MAX_N and GPU_CHECK_MATRIX_BUDGET (seconds per series) size the sample's run:
# 4096 and 5 by default (about a minute); 32768 and a few seconds give the docs' figures.
mb=$BUILD/samples/matrix_benchmark
if [[ -x $mb && -z ${SKIP_MATRIX:-} ]]; then
  if timeout "$(budget 0 300)" "$mb" --modes gpu,all_gpus,seed_faithful --dtypes all \
      --max-n "${GPU_CHECK_MATRIX_MAX_N:-4096}" --time-budget "${GPU_CHECK_MATRIX_BUDGET:-5}" \
      --min-time 0.05 --csv "$LOGS/matrix_benchmark.csv" >"$LOGS/matrix_benchmark.txt" 2>&1; then
    summary+=("matrix_benchmark sample: ran, checks passed")
  else
    summary+=("matrix_benchmark sample: FAILED (see logs)"); status=1
  fi
  # all_gpus over two logical GPUs of GPU 0: the multi-GPU path (row blocks on two replicas,
  # their results checked) on a one-GPU machine; small sizes, no figures.
  if timeout "$(budget 0 60)" "$mb" --split-gpu 2 --modes all_gpus --dtypes float32,float64 \
      --max-n 2048 --time-budget 1 --min-time 0.02 --csv "$LOGS/matrix_benchmark_split.csv" \
      >"$LOGS/matrix_benchmark_split.txt" 2>&1; then
    summary+=("matrix_benchmark --split-gpu 2 (all_gpus on two logical GPUs): checks passed")
  else
    summary+=("matrix_benchmark --split-gpu 2: FAILED (see logs)"); status=1
  fi
fi

echo "==== tapeflow GPU check ===="
cat "$LOGS/gpu.txt"
printf '%s\n' "${summary[@]}"
[[ -f $LOGS/bench_cuda.txt ]] && grep -E "median" "$LOGS/bench_cuda.txt" |
  awk '{printf "%-40s", $1; for (i = 2; i <= NF; ++i) printf " %s", $i; printf "\n"}'
exit $status
