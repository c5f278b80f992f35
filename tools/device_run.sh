#!/usr/bin/env bash
# On a lent GPU machine (see tools/device_bundle.sh): unpacks the bundle, finds the CUDA, cuBLAS,
# cuSOLVER, cuFFT and cuDNN libraries there, and runs tools/gpu_check.sh --prebuilt. Logs under $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
B=/tmp/tapeflow-gpu
mkdir -p "$B" && tar -C "$B" -xJf .devbundle/bundle.tar.xz
# NCCL (and on some images cuDNN and NVRTC) come from Python wheels under site-packages.
sitedirs=$(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null)
libdirs=$(find /usr/local/cuda/ /usr/local/cuda/lib64/ /opt /usr/lib /usr/local/lib $sitedirs -maxdepth 8 \
  \( -name 'libcudnn.so.9' -o -name 'libcublas.so.13' -o -name 'libcusolver.so.12' \
     -o -name 'libcudart.so.13' -o -name 'libcublasLt.so.13' -o -name 'libnccl.so.2' \
     -o -name 'libnvrtc.so.13' -o -name 'libcufft.so.12' \) 2>/dev/null | xargs -r -n1 dirname | sort -u | paste -sd:)
export LD_LIBRARY_PATH="$libdirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
echo "CUDA libraries from: $libdirs"
LD_LIBRARY_PATH="$B/lib:$LD_LIBRARY_PATH" ldd "$B/lib/libtapeflow.so.0" | grep -E "not found" &&
  echo "MISSING LIBRARIES"
export GPU_CHECK_LOGS=$B/logs
mkdir -p "$GPU_CHECK_LOGS"
# DEVICE_RUN_FIRST: commands for the same lease run before the check (the cases a session most
# needs, when the check may not finish), with the bundle's libraries ($B is the unpacked bundle).
if [[ -n ${DEVICE_RUN_FIRST:-} ]]; then
  B=$B LD_LIBRARY_PATH="$B/lib:$LD_LIBRARY_PATH" bash -c "$DEVICE_RUN_FIRST" 2>&1 |
    tee "$B/logs/first.txt"
fi
tools/gpu_check.sh --prebuilt "$B" "$@"
rc=$?
# DEVICE_RUN_EXTRA: more commands for the same lease, run with the bundle's libraries ($B is the
# unpacked bundle).
if [[ -n ${DEVICE_RUN_EXTRA:-} ]]; then
  B=$B LD_LIBRARY_PATH="$B/lib:$LD_LIBRARY_PATH" bash -c "$DEVICE_RUN_EXTRA" 2>&1 |
    tee "$B/logs/extra.txt"
fi
# At most a few files come back from the device tool: one archive of every log.
[[ -n ${OUT:-} ]] && tar -C "$B" -czf "$OUT/logs.tgz" logs
exit $rc
