// Small CUDA kernels of triangular_solve, slogdet and lu (internal): launched by
// ops/cuda/linalg_more.cpp, defined in ops/cuda/linalg_more.cu. No CUDA types here. Pointers are
// device pointers; each launcher queues on the device's stream and checks the launch.
#pragma once

#include <cstdint>

#include "core/device.h"
#include "core/dtype.h"

namespace tapeflow::detail::cuda_linalg_more {

// For each of `batches` matrices: perm[t, :] = the permutation getrf's 1-based row interchanges
// ipiv[t, :] (row i swapped with ipiv[i] - 1, i = 0..n-1 in order) apply to 0..n-1. perm is
// int32 or int64 (index_dtype).
void pivots_to_permutation(Device dev, const int* ipiv, void* perm, DType index_dtype,
                           int64_t batches, int64_t n);

// sign and log|det| (float32 or float64) of each matrix from getrf's factors (n x n each,
// contiguous, 1-based pivots, infos): {0, -inf} where info > 0 (an exact zero pivot); NaN
// pivots give NaN for both. With n == 0 (lu, ipiv, info unused) every result is {1, 0}.
void slogdet_from_lu(Device dev, DType dt, const void* lu, const int* ipiv, const int* info,
                     void* sign, void* logdet, int64_t batches, int64_t n);

// Solves `batches` tridiagonal systems in place, one thread each: diagonals [batches, 3, m]
// (compact), x [batches, m, k] (the right-hand sides in, the solutions out), scratch 4 m
// elements per system; float32 or float64.
void tridiagonal_solve(Device dev, DType dt, const void* diagonals, void* x, void* scratch,
                       int64_t batches, int64_t m, int64_t k, bool partial_pivoting);

}  // namespace tapeflow::detail::cuda_linalg_more
