// triangular_solve, slogdet and lu on the CPU: BLAS trsm and LAPACK getrf (OpenBLAS), one
// matrix per call, the batch spread over the threads (single-threaded library calls inside the
// parallel region, as ops/cpu/lapack.cpp does for small matrices).
//
// Layouts: trsm takes row-major operands directly (CblasRowMajor). getrf is column-major: for
// slogdet a row-major buffer is A^T, whose determinant is A's; lu needs P A = L U itself, so each
// matrix is transposed into a column-major work buffer and back.
#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/check.h"
#include "core/parallel.h"
#include "ops/linalg_more.h"
#include "ops/tridiagonal_solve_impl.h"

extern "C" {
void sgetrf_(const int* m, const int* n, float* a, const int* lda, int* ipiv, int* info);
void dgetrf_(const int* m, const int* n, double* a, const int* lda, int* ipiv, int* info);
}

namespace tapeflow {

namespace {

int getrf(int n, float* a, int* ipiv) {
  int info = 0;
  sgetrf_(&n, &n, a, &n, ipiv, &info);
  return info;
}
int getrf(int n, double* a, int* ipiv) {
  int info = 0;
  dgetrf_(&n, &n, a, &n, ipiv, &info);
  return info;
}

void trsm(bool lower, bool adjoint, int m, int k, const float* a, float* b) {
  cblas_strsm(CblasRowMajor, CblasLeft, lower ? CblasLower : CblasUpper,
              adjoint ? CblasTrans : CblasNoTrans, CblasNonUnit, m, k, 1.0f, a, m, b, k);
}
void trsm(bool lower, bool adjoint, int m, int k, const double* a, double* b) {
  cblas_dtrsm(CblasRowMajor, CblasLeft, lower ? CblasLower : CblasUpper,
              adjoint ? CblasTrans : CblasNoTrans, CblasNonUnit, m, k, 1.0, a, m, b, k);
}

int checked_int(int64_t v, const char* op) {
  TF_CHECK_T(UnimplementedError, v <= std::numeric_limits<int>::max(), op,
             "a size of {} exceeds BLAS/LAPACK's 32-bit sizes", v);
  return static_cast<int>(v);
}

// Batch count and order n of [..., n, n].
void batch_and_order(const TensorShape& s, int64_t* batches, int64_t* n) {
  *n = s[s.rank() - 1];
  *batches = 1;
  for (int i = 0; i + 2 < s.rank(); ++i) *batches *= s[i];
}

// Matrices per task for batches of small matrices.
int64_t grain_for(int64_t n) {
  return std::max<int64_t>(1, 65536 / std::max<int64_t>(1, n * n * n));
}

template <class T>
void triangular_solve(const T* a, const T* b, T* x, int64_t batches, int64_t m, int64_t k,
                      bool lower, bool adjoint) {
  if (m == 0 || k == 0 || batches == 0) return;  // empty: no buffers (null data)
  const int mi = checked_int(m, "triangular_solve"), ki = checked_int(k, "triangular_solve");
  std::memcpy(x, b, sizeof(T) * batches * m * k);
  detail::parallel_for(batches, grain_for(m), [&](int64_t b0, int64_t b1) {
    for (int64_t t = b0; t < b1; ++t) trsm(lower, adjoint, mi, ki, a + t * m * m, x + t * m * k);
  });
}

template <class T>
void slogdet(const T* a, T* sign, T* logdet, int64_t batches, int64_t n) {
  if (n == 0) {
    std::fill(sign, sign + batches, T(1));
    std::fill(logdet, logdet + batches, T(0));
    return;
  }
  const int ni = checked_int(n, "slogdet");
  detail::parallel_for(batches, grain_for(n), [&](int64_t b0, int64_t b1) {
    std::vector<T> lu(static_cast<size_t>(n * n));
    std::vector<int> ipiv(static_cast<size_t>(n));
    for (int64_t t = b0; t < b1; ++t) {
      std::memcpy(lu.data(), a + t * n * n, sizeof(T) * n * n);  // A^T: the same determinant
      if (getrf(ni, lu.data(), ipiv.data()) > 0) {               // an exact zero pivot: singular
        sign[t] = T(0);
        logdet[t] = -std::numeric_limits<T>::infinity();
        continue;
      }
      bool negative = false;
      T sum = 0;
      for (int64_t i = 0; i < n; ++i) {
        const T u = lu[i * n + i];
        if (ipiv[i] != i + 1) negative = !negative;
        if (u < 0) negative = !negative;
        sum += std::log(std::abs(u));
      }
      sign[t] = std::isnan(sum) ? sum : (negative ? T(-1) : T(1));
      logdet[t] = sum;
    }
  });
}

// Returns false when some matrix has a zero or NaN pivot (TF: "Input is not invertible.").
template <class T, class I>
bool lu(const T* a, T* out, I* perm, int64_t batches, int64_t n) {
  if (n == 0) return true;
  const int ni = checked_int(n, "lu");
  std::atomic<bool> ok{true};
  detail::parallel_for(batches, grain_for(n), [&](int64_t b0, int64_t b1) {
    std::vector<T> cm(static_cast<size_t>(n * n));
    std::vector<int> ipiv(static_cast<size_t>(n));
    for (int64_t t = b0; t < b1; ++t) {
      const T* src = a + t * n * n;
      T* dst = out + t * n * n;
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < n; ++j) cm[j * n + i] = src[i * n + j];
      getrf(ni, cm.data(), ipiv.data());
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t j = 0; j < n; ++j) dst[i * n + j] = cm[j * n + i];
        if (!(std::abs(cm[i * n + i]) > T(0))) ok.store(false, std::memory_order_relaxed);
      }
      // getrf's row interchanges (row i swapped with ipiv[i] - 1, in order) as a permutation.
      I* p = perm + t * n;
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<I>(i);
      for (int64_t i = 0; i < n; ++i) std::swap(p[i], p[ipiv[i] - 1]);
    }
  });
  return ok.load();
}

template <class T>
void tridiagonal_solve(const T* diagonals, const T* b, T* x, int64_t batches, int64_t m, int64_t k,
                       bool partial_pivoting) {
  if (m == 0 || k == 0 || batches == 0) return;
  std::memcpy(x, b, sizeof(T) * batches * m * k);
  detail::parallel_for(batches, std::max<int64_t>(1, 16384 / (m * k)), [&](int64_t b0, int64_t b1) {
    std::vector<T> scratch(static_cast<size_t>(4 * m));
    for (int64_t t = b0; t < b1; ++t)
      detail::tridiagonal_solve_one(diagonals + t * 3 * m, x + t * m * k, m, k, partial_pivoting,
                                    scratch.data());
  });
}

}  // namespace

namespace prims {

void MatrixTriangularSolve::eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const {
  int64_t batches, m;
  batch_and_order(in[0].shape(), &batches, &m);
  const int64_t k = in[1].shape()[in[1].rank() - 1];
  if (in[0].dtype() == float64)
    triangular_solve(in[0].data<double>(), in[1].data<double>(), out[0].data<double>(), batches, m,
                     k, lower, adjoint);
  else
    triangular_solve(in[0].data<float>(), in[1].data<float>(), out[0].data<float>(), batches, m, k,
                     lower, adjoint);
}

void LogMatrixDeterminant::eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const {
  int64_t batches, n;
  batch_and_order(in[0].shape(), &batches, &n);
  if (in[0].dtype() == float64)
    slogdet(in[0].data<double>(), out[0].data<double>(), out[1].data<double>(), batches, n);
  else
    slogdet(in[0].data<float>(), out[0].data<float>(), out[1].data<float>(), batches, n);
}

void TridiagonalSolve::eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const {
  const TensorShape& s = in[1].shape();
  const int64_t m = s[s.rank() - 2], k = s[s.rank() - 1];
  const int64_t batches = m * k == 0 ? 0 : out[0].num_elements() / (m * k);
  if (in[0].dtype() == float64)
    tridiagonal_solve(in[0].data<double>(), in[1].data<double>(), out[0].data<double>(), batches, m,
                      k, partial_pivoting);
  else
    tridiagonal_solve(in[0].data<float>(), in[1].data<float>(), out[0].data<float>(), batches, m, k,
                      partial_pivoting);
}

void Lu::eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const {
  int64_t batches, n;
  batch_and_order(in[0].shape(), &batches, &n);
  bool ok;
  const bool f64 = in[0].dtype() == float64;
  if (index_dtype == int64)
    ok = f64 ? lu(in[0].data<double>(), out[0].data<double>(), out[1].data<int64_t>(), batches, n)
             : lu(in[0].data<float>(), out[0].data<float>(), out[1].data<int64_t>(), batches, n);
  else
    ok = f64 ? lu(in[0].data<double>(), out[0].data<double>(), out[1].data<int32_t>(), batches, n)
             : lu(in[0].data<float>(), out[0].data<float>(), out[1].data<int32_t>(), batches, n);
  TF_CHECK_ARG(ok, name(), "Input is not invertible.");
}

}  // namespace prims

}  // namespace tapeflow
