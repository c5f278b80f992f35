#!/bin/sh
# CTest's samples:matrix_benchmark_split_gpu. $1: the matrix_benchmark binary. --split-gpu 2
# runs all_gpus over two logical GPUs of GPU 0 (exit 0, two GPUs in the header, every result
# checked); on a machine without a GPU, or from a build without CUDA, it refuses with exit status
# 2 and says why.
out=$("$1" --split-gpu 2 --modes all_gpus --ops matmul --dtypes float32 --max-n 64 --repeats 2 \
  --min-time 0 --time-budget 20 2>&1)
rc=$?
printf '%s\n' "$out"
if [ "$rc" -eq 0 ]; then
  printf '%s\n' "$out" | grep -q "GPUs 2$"
else
  [ "$rc" -eq 2 ] &&
    printf '%s\n' "$out" | grep -Eq "there is no GPU to split|this build has no CUDA"
fi
