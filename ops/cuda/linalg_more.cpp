// CUDA kernels of triangular_solve, slogdet, lu and tridiagonal_solve (host code; the small kernels
// are in linalg_more.cu).
//
// triangular_solve: cuBLAS trsm. Row-major X (M x K) is column-major X^T, and the row-major
// matrix A is column-major A^T, so op(A) X = B is the right-sided column-major solve
// X^T op(A)^T = B^T on the stored A^T: side right, the opposite triangle, the same `adjoint`
// flag, no copies beyond rhs into the output. One trsm for one matrix, trsmBatched (pointer
// arrays) for a batch.
// slogdet: getrf of the row-major buffer (A^T, the same determinant), then a kernel sums
// log|u_ii| and the signs, as the CPU. lu: the matrices are transposed to column-major, factored,
// transposed back; a kernel turns the pivots into TF's permutation. Factorisations: cuBLAS's
// batched getrf for batches of small matrices (and during CUDA-graph capture), cuSOLVER's getrf
// one matrix after the other otherwise (as ops/cuda/linalg.cpp). lu raises TF's error for a
// singular input, which needs the infos on the host (its one synchronisation; skipped during
// capture, when nothing has run yet). tridiagonal_solve: one thread per system in a kernel
// (ops/tridiagonal_solve_impl.h, the CPU's elimination).
#include "ops/linalg_more.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusolverDn.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <mutex>
#include <vector>

#include "core/allocator.h"
#include "core/check.h"
#include "core/cuda/context.h"
#include "core/device.h"
#include "ops/cuda/handles.h"
#include "ops/cuda/linalg_kernels.h"
#include "ops/cuda/linalg_more_kernels.h"

namespace tapeflow {

namespace {

namespace cu = detail::cuda;
namespace lk = detail::cuda_linalg;
namespace lm = detail::cuda_linalg_more;

// Matrices up to this order in batches of two or more go through cuBLAS's batched LU.
constexpr int64_t kBatchedMaxN = 32;

int checked_int(int64_t v, const char* op) {
  if (v > INT_MAX)
    TF_THROW(UnimplementedError, op,
             "a size of {} exceeds the 32-bit sizes of the CUDA libraries (cuBLAS, cuSOLVER)", v);
  return static_cast<int>(v);
}

void batch_and_order(const TensorShape& s, int64_t* batches, int64_t* n) {
  *n = s[s.rank() - 1];
  *batches = 1;
  for (int i = 0; i + 2 < s.rank(); ++i) *batches *= s[i];
}

bool capturing(Device dev) {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  TF_CUDA_CHECK(cudaStreamIsCapturing(cu::stream(dev), &capture));
  return capture != cudaStreamCaptureStatusNone;
}

// A device array of `count` pointers base + t * stride (elements of T).
template <class T>
Tensor pointers(Device dev, T* base, int64_t stride, int64_t count) {
  Tensor p = detail::empty(TensorShape{count}, int64, dev);
  lk::strided_pointers(dev, base, stride * static_cast<int64_t>(sizeof(T)), count,
                       static_cast<void**>(p.raw_data()));
  return p;
}

template <class T>
struct Calls;
template <>
struct Calls<float> {
  static void getrf_buffer_size(cusolverDnHandle_t h, int n, float* a, int* lwork) {
    TF_CUSOLVER_CHECK(cusolverDnSgetrf_bufferSize(h, n, n, a, n, lwork));
  }
  static void getrf(cusolverDnHandle_t h, int n, float* a, float* work, int* ipiv, int* info) {
    TF_CUSOLVER_CHECK(cusolverDnSgetrf(h, n, n, a, n, work, ipiv, info));
  }
  static void getrf_batched(cublasHandle_t h, int n, float* const* a, int* ipiv, int* info,
                            int batches) {
    TF_CUBLAS_CHECK(cublasSgetrfBatched(h, n, a, n, ipiv, info, batches));
  }
  static void trsm(cublasHandle_t h, cublasFillMode_t uplo, cublasOperation_t op, int m, int n,
                   const float* a, int lda, float* b, int ldb) {
    const float one = 1.0f;
    TF_CUBLAS_CHECK(cublasStrsm(h, CUBLAS_SIDE_RIGHT, uplo, op, CUBLAS_DIAG_NON_UNIT, m, n, &one, a,
                                lda, b, ldb));
  }
  static void trsm_batched(cublasHandle_t h, cublasFillMode_t uplo, cublasOperation_t op, int m,
                           int n, const float* const* a, int lda, float* const* b, int ldb,
                           int batches) {
    const float one = 1.0f;
    TF_CUBLAS_CHECK(cublasStrsmBatched(h, CUBLAS_SIDE_RIGHT, uplo, op, CUBLAS_DIAG_NON_UNIT, m, n,
                                       &one, a, lda, b, ldb, batches));
  }
};
template <>
struct Calls<double> {
  static void getrf_buffer_size(cusolverDnHandle_t h, int n, double* a, int* lwork) {
    TF_CUSOLVER_CHECK(cusolverDnDgetrf_bufferSize(h, n, n, a, n, lwork));
  }
  static void getrf(cusolverDnHandle_t h, int n, double* a, double* work, int* ipiv, int* info) {
    TF_CUSOLVER_CHECK(cusolverDnDgetrf(h, n, n, a, n, work, ipiv, info));
  }
  static void getrf_batched(cublasHandle_t h, int n, double* const* a, int* ipiv, int* info,
                            int batches) {
    TF_CUBLAS_CHECK(cublasDgetrfBatched(h, n, a, n, ipiv, info, batches));
  }
  static void trsm(cublasHandle_t h, cublasFillMode_t uplo, cublasOperation_t op, int m, int n,
                   const double* a, int lda, double* b, int ldb) {
    const double one = 1.0;
    TF_CUBLAS_CHECK(cublasDtrsm(h, CUBLAS_SIDE_RIGHT, uplo, op, CUBLAS_DIAG_NON_UNIT, m, n, &one, a,
                                lda, b, ldb));
  }
  static void trsm_batched(cublasHandle_t h, cublasFillMode_t uplo, cublasOperation_t op, int m,
                           int n, const double* const* a, int lda, double* const* b, int ldb,
                           int batches) {
    const double one = 1.0;
    TF_CUBLAS_CHECK(cublasDtrsmBatched(h, CUBLAS_SIDE_RIGHT, uplo, op, CUBLAS_DIAG_NON_UNIT, m, n,
                                       &one, a, lda, b, ldb, batches));
  }
};

// getrf in place on `batches` column-major n x n matrices at a (n >= 1); ipiv: batches * n,
// info: batches.
template <class T>
void factor(Device dev, T* a, int64_t batches, int64_t n, int* ipiv, int* info, const char* op) {
  const int ni = checked_int(n, op);
  const int64_t mat = n * n;
  if (n <= kBatchedMaxN && batches <= INT_MAX && (batches > 1 || capturing(dev))) {
    const Tensor ptrs = pointers(dev, a, mat, batches);
    Calls<T>::getrf_batched(cu::cublas(dev), ni, static_cast<T* const*>(ptrs.raw_data()), ipiv,
                            info, static_cast<int>(batches));
    return;
  }
  std::lock_guard lock(cu::cusolver_mutex());
  cusolverDnHandle_t h = cu::cusolver(dev);
  int lwork = 0;
  Calls<T>::getrf_buffer_size(h, ni, a, &lwork);
  const Tensor work = cu::workspace(dev, sizeof(T) * static_cast<size_t>(std::max(lwork, 1)));
  for (int64_t t = 0; t < batches; ++t)
    Calls<T>::getrf(h, ni, a + t * mat, static_cast<T*>(work.raw_data()), ipiv + t * n, info + t);
}

template <class T>
void triangular_solve(Device dev, const T* a, T* x, int64_t batches, int64_t m, int64_t k,
                      bool lower, bool adjoint, const char* op) {
  const int mi = checked_int(m, op), ki = checked_int(k, op);
  const cublasFillMode_t uplo = lower ? CUBLAS_FILL_MODE_UPPER : CUBLAS_FILL_MODE_LOWER;
  const cublasOperation_t trans = adjoint ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasHandle_t h = cu::cublas(dev);
  if (batches == 1) {
    Calls<T>::trsm(h, uplo, trans, ki, mi, a, mi, x, ki);
    return;
  }
  // The matrices are only read; cuBLAS takes a const array of const pointers.
  const Tensor pa = pointers(dev, const_cast<T*>(a), m * m, batches);
  const Tensor px = pointers(dev, x, m * k, batches);
  for (int64_t t0 = 0; t0 < batches; t0 += INT_MAX) {
    const int count = static_cast<int>(std::min<int64_t>(INT_MAX, batches - t0));
    Calls<T>::trsm_batched(h, uplo, trans, ki, mi, static_cast<const T* const*>(pa.raw_data()) + t0,
                           mi, static_cast<T* const*>(px.raw_data()) + t0, ki, count);
  }
}

template <class T>
void slogdet(Device dev, const Tensor& in, Tensor& sign, Tensor& logdet, int64_t batches,
             int64_t n) {
  Tensor lu = detail::empty(in.shape(), in.dtype(), dev);
  TF_CUDA_CHECK(cudaMemcpyAsync(lu.raw_data(), in.raw_data(), in.nbytes(), cudaMemcpyDeviceToDevice,
                                cu::stream(dev)));
  Tensor ipiv = detail::empty(TensorShape{batches * n}, int32, dev);
  Tensor info = detail::empty(TensorShape{batches}, int32, dev);
  factor(dev, lu.data<T>(), batches, n, ipiv.data<int>(), info.data<int>(), "slogdet");
  lm::slogdet_from_lu(dev, in.dtype(), lu.raw_data(), ipiv.data<int>(), info.data<int>(),
                      sign.raw_data(), logdet.raw_data(), batches, n);
}

// Returns false when some matrix had a zero or NaN pivot (never during capture).
template <class T>
bool lu(Device dev, const Tensor& in, Tensor& out, Tensor& perm, int64_t batches, int64_t n) {
  Tensor cm = detail::empty(in.shape(), in.dtype(), dev);
  lk::transpose(dev, sizeof(T), in.raw_data(), cm.raw_data(), batches, n, n);
  Tensor ipiv = detail::empty(TensorShape{batches * n}, int32, dev);
  Tensor info = detail::empty(TensorShape{batches}, int32, dev);
  factor(dev, cm.data<T>(), batches, n, ipiv.data<int>(), info.data<int>(), "lu");
  lk::transpose(dev, sizeof(T), cm.raw_data(), out.raw_data(), batches, n, n);
  lm::pivots_to_permutation(dev, ipiv.data<int>(), perm.raw_data(), perm.dtype(), batches, n);
  if (capturing(dev)) return true;
  lk::flag_nan_pivots(dev, in.dtype(), cm.raw_data(), info.data<int>(), batches, n);
  std::vector<int> infos(static_cast<size_t>(batches));
  detail::copy_bytes(infos.data(), Device{}, info.raw_data(), dev, infos.size() * sizeof(int));
  return std::none_of(infos.begin(), infos.end(), [](int i) { return i > 0; });
}

}  // namespace

namespace prims {

void MatrixTriangularSolve::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  if (out[0].num_elements() == 0) return;
  int64_t batches, m;
  batch_and_order(in[0].shape(), &batches, &m);
  const int64_t k = in[1].shape()[in[1].rank() - 1];
  const Device dev = out[0].placement();
  TF_CUDA_CHECK(cudaMemcpyAsync(out[0].raw_data(), in[1].raw_data(), in[1].nbytes(),
                                cudaMemcpyDeviceToDevice, cu::stream(dev)));
  if (in[0].dtype() == float64)
    triangular_solve(dev, in[0].data<double>(), out[0].data<double>(), batches, m, k, lower,
                     adjoint, name());
  else
    triangular_solve(dev, in[0].data<float>(), out[0].data<float>(), batches, m, k, lower, adjoint,
                     name());
}

void LogMatrixDeterminant::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  int64_t batches, n;
  batch_and_order(in[0].shape(), &batches, &n);
  if (batches == 0) return;
  const Device dev = out[0].placement();
  if (n == 0) {  // the empty product: sign 1, log 0
    lm::slogdet_from_lu(dev, in[0].dtype(), nullptr, nullptr, nullptr, out[0].raw_data(),
                        out[1].raw_data(), batches, 0);
    return;
  }
  if (in[0].dtype() == float64)
    slogdet<double>(dev, in[0], out[0], out[1], batches, n);
  else
    slogdet<float>(dev, in[0], out[0], out[1], batches, n);
}

void TridiagonalSolve::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  if (out[0].num_elements() == 0) return;
  const TensorShape& s = in[1].shape();
  const int64_t m = s[s.rank() - 2], k = s[s.rank() - 1];
  const int64_t batches = out[0].num_elements() / (m * k);
  const Device dev = out[0].placement();
  TF_CUDA_CHECK(cudaMemcpyAsync(out[0].raw_data(), in[1].raw_data(), in[1].nbytes(),
                                cudaMemcpyDeviceToDevice, cu::stream(dev)));
  Tensor scratch = detail::empty(TensorShape{batches * 4 * m}, in[0].dtype(), dev);
  lm::tridiagonal_solve(dev, in[0].dtype(), in[0].raw_data(), out[0].raw_data(), scratch.raw_data(),
                        batches, m, k, partial_pivoting);
}

void Lu::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  if (out[0].num_elements() == 0) return;
  int64_t batches, n;
  batch_and_order(in[0].shape(), &batches, &n);
  const Device dev = out[0].placement();
  const bool ok = in[0].dtype() == float64 ? lu<double>(dev, in[0], out[0], out[1], batches, n)
                                           : lu<float>(dev, in[0], out[0], out[1], batches, n);
  TF_CHECK_ARG(ok, name(), "Input is not invertible.");
}

}  // namespace prims

}  // namespace tapeflow
