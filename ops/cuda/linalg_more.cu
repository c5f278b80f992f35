// Small CUDA kernels of triangular_solve, slogdet and lu; see ops/cuda/linalg_more_kernels.h.
#include <cuda_runtime.h>

#include <cstdint>

#include "ops/cuda/common.cuh"
#include "ops/cuda/linalg_more_kernels.h"
#include "ops/tridiagonal_solve_impl.h"

namespace tapeflow::detail::cuda_linalg_more {

namespace {

namespace tcu = ::tapeflow::cuda;
using tcu::grid_for;
using tcu::kThreads;

// One thread per matrix: the interchanges are sequential.
template <class I>
__global__ void permutation_kernel(const int* ipiv, I* perm, int64_t batches, int64_t n) {
  for (int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; t < batches;
       t += int64_t{gridDim.x} * blockDim.x) {
    I* p = perm + t * n;
    const int* piv = ipiv + t * n;
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<I>(i);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t j = piv[i] - 1;
      const I tmp = p[i];
      p[i] = p[j];
      p[j] = tmp;
    }
  }
}

// One thread per matrix, as the CPU's loop: log|u_ii| summed, the sign from the pivots and the
// signs of U's diagonal.
template <class T>
__global__ void slogdet_kernel(const T* lu, const int* ipiv, const int* info, T* sign, T* logdet,
                               int64_t batches, int64_t n) {
  for (int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; t < batches;
       t += int64_t{gridDim.x} * blockDim.x) {
    if (n == 0) {  // the empty product (lu, ipiv and info unused)
      sign[t] = T(1);
      logdet[t] = T(0);
      continue;
    }
    if (info[t] > 0) {
      sign[t] = T(0);
      logdet[t] = -static_cast<T>(INFINITY);
      continue;
    }
    const T* m = lu + t * n * n;
    const int* piv = ipiv + t * n;
    bool negative = false;
    T sum = 0;
    for (int64_t i = 0; i < n; ++i) {
      const T u = m[i * n + i];
      if (piv[i] != i + 1) negative = !negative;
      if (u < T(0)) negative = !negative;
      sum += log(fabs(u));
    }
    sign[t] = sum != sum ? sum : (negative ? T(-1) : T(1));
    logdet[t] = sum;
  }
}

template <class T>
__global__ void tridiagonal_kernel(const T* diagonals, T* x, T* scratch, int64_t batches, int64_t m,
                                   int64_t k, bool partial_pivoting) {
  for (int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; t < batches;
       t += int64_t{gridDim.x} * blockDim.x)
    tridiagonal_solve_one(diagonals + t * 3 * m, x + t * m * k, m, k, partial_pivoting,
                          scratch + t * 4 * m);
}

}  // namespace

void tridiagonal_solve(Device dev, DType dt, const void* diagonals, void* x, void* scratch,
                       int64_t batches, int64_t m, int64_t k, bool partial_pivoting) {
  if (batches == 0 || m == 0 || k == 0) return;
  cudaStream_t s = ::tapeflow::detail::cuda::stream(dev);
  if (dt == float64)
    tridiagonal_kernel<<<grid_for(batches, dev), kThreads, 0, s>>>(
        static_cast<const double*>(diagonals), static_cast<double*>(x),
        static_cast<double*>(scratch), batches, m, k, partial_pivoting);
  else
    tridiagonal_kernel<<<grid_for(batches, dev), kThreads, 0, s>>>(
        static_cast<const float*>(diagonals), static_cast<float*>(x), static_cast<float*>(scratch),
        batches, m, k, partial_pivoting);
  ::tapeflow::detail::cuda::check_launch("tridiagonal_solve");
}

void pivots_to_permutation(Device dev, const int* ipiv, void* perm, DType index_dtype,
                           int64_t batches, int64_t n) {
  if (batches == 0 || n == 0) return;
  cudaStream_t s = ::tapeflow::detail::cuda::stream(dev);
  if (index_dtype == int64)
    permutation_kernel<<<grid_for(batches, dev), kThreads, 0, s>>>(
        ipiv, static_cast<int64_t*>(perm), batches, n);
  else
    permutation_kernel<<<grid_for(batches, dev), kThreads, 0, s>>>(
        ipiv, static_cast<int32_t*>(perm), batches, n);
  ::tapeflow::detail::cuda::check_launch("lu");
}

void slogdet_from_lu(Device dev, DType dt, const void* lu, const int* ipiv, const int* info,
                     void* sign, void* logdet, int64_t batches, int64_t n) {
  if (batches == 0) return;
  cudaStream_t s = ::tapeflow::detail::cuda::stream(dev);
  if (dt == float64)
    slogdet_kernel<<<grid_for(batches, dev), kThreads, 0, s>>>(
        static_cast<const double*>(lu), ipiv, info, static_cast<double*>(sign),
        static_cast<double*>(logdet), batches, n);
  else
    slogdet_kernel<<<grid_for(batches, dev), kThreads, 0, s>>>(
        static_cast<const float*>(lu), ipiv, info, static_cast<float*>(sign),
        static_cast<float*>(logdet), batches, n);
  ::tapeflow::detail::cuda::check_launch("slogdet");
}

}  // namespace tapeflow::detail::cuda_linalg_more
