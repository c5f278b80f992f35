// Small CUDA kernels of the linalg family (internal): launched by ops/cuda/linalg.cpp, defined in
// ops/cuda/linalg_kernels.cu. No CUDA types here, so that host code compiled by g++ can include
// it. Every launcher queues its kernel on the device's stream and checks the launch; a zero
// count launches nothing. Pointers are device pointers.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/device.h"
#include "core/dtype.h"

namespace tapeflow::detail::cuda_linalg {

inline constexpr int kMaxBatchRank = 8;

// The batch dimensions of a matmul's output and, for each, the element offset between
// consecutive matrices of a and b (0 where that operand is broadcast).
struct BatchLayout {
  int rank = 0;
  int64_t size[kMaxBatchRank] = {};
  int64_t a_stride[kMaxBatchRank] = {};
  int64_t b_stride[kMaxBatchRank] = {};
};

// Row-major C[t] (m x n, contiguous, t < batches) = op(A[t]) op(B[t]); op transposes when the
// flag is set (A stored m x k with row length lda, or k x m when transposed; likewise B).
struct IntGemm {
  bool ta = false, tb = false;
  int64_t m = 0, n = 0, k = 0, lda = 0, ldb = 0;
  int64_t batches = 0;
  BatchLayout layout;
};

// int32 or int64 matmul with wrapping arithmetic (TF's), in a shared-memory tiled kernel.
void int_matmul(Device dev, DType dt, const void* a, const void* b, void* c, const IntGemm& g);

// Pointer arrays for a batched GEMM (cublasGemmBatchedEx) over a broadcast batch: for each
// t < batches, pa[t] = a + elem * offset_a(t), pb[t] likewise, pc[t] = c + elem * t * c_stride.
void gemm_pointers(Device dev, size_t elem, const void* a, const void* b, void* c,
                   const BatchLayout& layout, int64_t c_stride, int64_t batches, const void** pa,
                   const void** pb, void** pc);

// ptrs[i] = base + i * stride_bytes for i < count (for the batched LU calls).
void strided_pointers(Device dev, void* base, int64_t stride_bytes, int64_t count, void** ptrs);

// float16/bfloat16 <-> float32 conversions of n elements (round to nearest even).
void to_float(Device dev, DType src, const void* in, float* out, int64_t n);
void from_float(Device dev, DType dst, const float* in, void* out, int64_t n);

// The two device scalars of an accumulating GEMM in pointer mode "device" (traced variable
// updates fused into their product, detail::gemm_accumulate_device): out[0] = sign * scale
// (sign when scale is null), out[1] = decay (1 when null), in dt (float32 or float64); scale
// and decay are one element of their own dtype (float32 or float64) each. One thread, no
// host synchronisation.
void gemm_scalars(Device dev, DType dt, double sign, const void* scale, DType scale_dt,
                  const void* decay, DType decay_dt, void* out);

// `batches` identity matrices of order n, float32 or float64.
void fill_identity(Device dev, DType dt, void* out, int64_t batches, int64_t n);

// For each of `batches` matrices: dst (cols x rows) = the transpose of src (rows x cols).
// elem: 4 or 8 bytes.
void transpose(Device dev, size_t elem, const void* src, void* dst, int64_t batches, int64_t rows,
               int64_t cols);

// Marks with a positive info (n + 1) each of `batches` LU factors (float32 or float64, n x n,
// contiguous) that has a NaN on U's diagonal: TF refuses such inputs as not invertible, while
// getrf's info reports exact zero pivots only. For inv and solve, not det (a NaN determinant).
void flag_nan_pivots(Device dev, DType dt, const void* lu, int* info, int64_t batches, int64_t n);

// flags[t] = 1 where matrix t of `batches` n x n ones (float32 or float64, contiguous) holds a
// NaN, else 0: its determinant is NaN whatever pivots getrf chose (cuSOLVER may pass over a NaN
// for a zero pivot, then leave no NaN in the factors).
void flag_nan_matrices(Device dev, DType dt, const void* a, int* flags, int64_t batches, int64_t n);

// Determinants (float32 or float64) from getrf's LU factors (each n x n, contiguous), 1-based
// pivots (n per matrix), infos (one per matrix; a positive info means an exact zero pivot, so
// the determinant is 0) and flag_nan_matrices' flags of the input (NaN), as ops/cpu/lapack.cpp
// computes them: the product of U's diagonal in float64 with separate exponent bookkeeping, and
// the sign of the row permutation (ops/cuda/det_element.h; one thread per matrix, from order 256
// one block per matrix combining its threads' parts). With n == 0 (lu, ipiv, info and has_nan
// unused) every determinant is 1.
void determinant(Device dev, DType dt, const void* lu, const int* ipiv, const int* info,
                 const int* has_nan, void* out, int64_t batches, int64_t n);

}  // namespace tapeflow::detail::cuda_linalg
