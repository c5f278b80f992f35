#!/usr/bin/env bash
# Packs a Release build for sm_90 (tests, GPU benchmark, main sample, libtapeflow and the non-CUDA
# shared libraries they need) into .devbundle/bundle.tar.xz, for a lent GPU machine that has the
# CUDA libraries but not tapeflow's build dependencies. There, tools/device_run.sh unpacks it and
# runs tools/gpu_check.sh --prebuilt. .devbundle/ is git-ignored.
#   tools/device_bundle.sh [build-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build-gpu}
if [[ ! -f $BUILD/CMakeCache.txt ]]; then
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DTAPEFLOW_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DTAPEFLOW_BUILD_BENCH=ON
fi
targets=(seed_basics matrix_benchmark bench_cuda compare_cuda)
for d in tests/*/; do
  f=$(basename "$d")
  ls "$d"*.cpp >/dev/null 2>&1 && [[ $f != support && $f != install ]] && targets+=("tapeflow_tests_$f")
done
# The multi-worker suite (tests/distribute/multi_worker/) where MPI was found.
[[ -d $BUILD/tests/CMakeFiles/tapeflow_tests_multi_worker.dir ]] &&
  targets+=(tapeflow_tests_multi_worker)
cmake --build "$BUILD" -j "$(nproc)" --target "${targets[@]}"
STAGE=$(mktemp -d)
mkdir -p "$STAGE/tests" "$STAGE/bench" "$STAGE/samples" "$STAGE/lib"
find "$BUILD/tests" -maxdepth 1 -type f -executable -name 'tapeflow_tests_*' \
  -exec cp {} "$STAGE/tests/" \;
cp "$BUILD/bench/bench_cuda" "$BUILD/bench/compare_cuda" "$STAGE/bench/" 2>/dev/null || true
cp "$BUILD/samples/seed_basics" "$STAGE/samples/" 2>/dev/null || true
cp "$BUILD/samples/matrix_benchmark" "$STAGE/samples/" 2>/dev/null || true
cp -P "$BUILD"/libtapeflow.so* "$STAGE/lib/"
# Shared libraries from Debian packages; the CUDA libraries, glibc and the C++ runtime come from
# the GPU machine (NCCL from its nvidia-nccl wheel).
for bin in "$STAGE"/tests/* "$STAGE"/bench/* "$STAGE"/lib/libtapeflow.so.*; do
  ldd "$bin" | awk '/=> \//{print $3}' || true
done | sort -u | grep -vE 'libcu[a-zA-Z]*\.so|libnv[a-zA-Z]*\.so|libnccl|libc\.so|libm\.so|libdl|libpthread|librt|ld-linux|libstdc\+\+|libgcc_s|libtapeflow' |
  while read -r lib; do cp -L "$lib" "$STAGE/lib/"; done
strip --strip-unneeded "$STAGE"/lib/*.so* "$STAGE"/tests/* "$STAGE"/bench/* 2>/dev/null || true
mkdir -p .devbundle
tar -C "$STAGE" -cJf .devbundle/bundle.tar.xz .
rm -rf "$STAGE"
ls -la .devbundle/bundle.tar.xz
