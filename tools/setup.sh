#!/usr/bin/env bash
# Shared set-up for run.sh and test.sh: installs the missing Debian packages (when root),
# then configures and builds tapeflow (Release) in ./build. Idempotent: a second run installs
# nothing and rebuilds only what changed. ocl-icd-opencl-dev is listed because oneDNN's CMake
# config requires OpenCL and the install below skips recommended packages.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PACKAGES=(cmake g++ make ccache catch2 libspdlog-dev libfmt-dev libopenblas-dev
  libopenblas-openmp-dev liblapacke-dev libdnnl-dev zlib1g-dev libpng-dev libjpeg62-turbo-dev
  nlohmann-json3-dev libopenmpi-dev openmpi-bin libbenchmark-dev dataset-fashion-mnist
  ocl-icd-opencl-dev)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  if [[ $(id -u) -eq 0 ]]; then
    echo "tapeflow: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "tapeflow: missing Debian packages: ${missing[*]}" >&2
    echo "run as root, or: sudo apt-get install ${missing[*]}" >&2
    exit 1
  fi
fi

# ccache hits across checkouts in different folders (CI clones afresh).
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
export CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}

BUILD_DIR=${TAPEFLOW_BUILD_DIR:-build}
JOBS=${TAPEFLOW_JOBS:-$(nproc)}
if [[ ! -f "$BUILD_DIR/CMakeCache.txt" ]]; then
  cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DTAPEFLOW_CUDA=AUTO ${TAPEFLOW_CMAKE_ARGS:-}
elif [[ -n "${TAPEFLOW_CMAKE_ARGS:-}" ]]; then
  # An existing build keeps its settings; options given now are added to them.
  cmake -S . -B "$BUILD_DIR" ${TAPEFLOW_CMAKE_ARGS}
fi
cmake --build "$BUILD_DIR" -j "$JOBS"
