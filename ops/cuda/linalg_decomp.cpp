// CUDA kernels of cholesky, eigh, qr and svd on cuSOLVER (host code), with the layout of
// ops/cpu/lapack_decomp.cpp: a row-major buffer is the column-major transpose, so
//   cholesky: potrf (upper) on a copy of the input reads the row-major lower triangle and
//             leaves L in it; a kernel zeroes the row-major upper triangle;
//   eigh:     syevd (upper) on a copy; the column-major eigenvectors are transposed out;
//   qr:       geqrf on the input transposed to column-major, orgqr on a copy of the reflectors,
//             then Q and R transposed back (R's lower triangle zeroed by a kernel);
//   svd:      cuSOLVER's gesvd needs rows >= columns: a wide (or square) input's row-major
//             buffer already is the column-major A^T with that shape (A^T = Ub S Vb^T gives
//             U = Vb, V = Ub), a tall input is transposed to column-major A first. Either way
//             one factor comes out through a transpose and the other (column-major V^T read
//             row-major) directly.
// Matrices of a batch run one after the other with one workspace. A failed factorisation
// (cholesky of a matrix that is not positive definite, a solver that did not converge) needs
// cuSOLVER's infos on the host: the one synchronisation of these kernels.
#include "ops/linalg_decomp.h"

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
#include "ops/cuda/linalg_decomp_kernels.h"
#include "ops/cuda/linalg_kernels.h"

namespace tapeflow {

namespace {

namespace cu = detail::cuda;
namespace lk = detail::cuda_linalg;

int checked_int(const char* op, int64_t v) {
  if (v > INT_MAX / 4)
    TF_THROW(UnimplementedError, op, "a size of {} exceeds cuSOLVER's 32-bit sizes", v);
  return static_cast<int>(v);
}

int64_t batch_count(const TensorShape& s) {
  int64_t b = 1;
  for (int i = 0; i + 2 < s.rank(); ++i) b *= s[i];
  return b;
}

template <class T>
T* ptr(const Tensor& t) {
  return static_cast<T*>(t.raw_data());
}

void copy_device(Device dev, void* dst, const void* src, size_t nbytes) {
  if (nbytes == 0) return;
  TF_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToDevice, cu::stream(dev)));
}

// For each of `count` blocks: `width` bytes from src + t * spitch to dst + t * dpitch.
void copy_blocks(Device dev, void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                 int64_t count) {
  if (width == 0 || count == 0) return;
  TF_CUDA_CHECK(cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, static_cast<size_t>(count),
                                  cudaMemcpyDeviceToDevice, cu::stream(dev)));
}

// The infos of `batches` factorisations, read on the host (waits for the queued work).
// Returns the first matrix with a nonzero info and that info, or {-1, 0}. While the stream is
// captured into a CUDA graph (jit_compile) nothing may synchronise and nothing has run yet: the
// check is skipped there, as inv's and solve's.
std::pair<int64_t, int> first_failure(Device dev, const Tensor& info, int64_t batches) {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  TF_CUDA_CHECK(cudaStreamIsCapturing(cu::stream(dev), &capture));
  if (capture != cudaStreamCaptureStatusNone) return {-1, 0};
  std::vector<int> infos(static_cast<size_t>(batches));
  detail::copy_bytes(infos.data(), Device{}, info.raw_data(), dev, infos.size() * sizeof(int));
  for (int64_t b = 0; b < batches; ++b)
    if (infos[b] != 0) return {b, infos[b]};
  return {-1, 0};
}

void raise_info(const char* op, const char* routine, std::pair<int64_t, int> r, const Tensor& in) {
  if (r.first < 0) return;
  if (r.second < 0)
    TF_THROW(InternalError, op,
             "cuSOLVER's {} failed on the {} input of shape {}: argument {} "
             "is invalid",
             routine, dtype_name(in.dtype()), in.shape().to_string(), -r.second);
  TF_THROW(InvalidArgumentError, op,
           "cuSOLVER's {} did not converge for matrix {} of the input of shape {} (info {})",
           routine, r.first, in.shape().to_string(), r.second);
}

template <class T>
struct Solver;

template <>
struct Solver<float> {
  static int potrf_size(cusolverDnHandle_t h, int n, float* a) {
    int l = 0;
    TF_CUSOLVER_CHECK(cusolverDnSpotrf_bufferSize(h, CUBLAS_FILL_MODE_UPPER, n, a, n, &l));
    return l;
  }
  static void potrf(cusolverDnHandle_t h, int n, float* a, float* w, int l, int* info) {
    TF_CUSOLVER_CHECK(cusolverDnSpotrf(h, CUBLAS_FILL_MODE_UPPER, n, a, n, w, l, info));
  }
  static int syevd_size(cusolverDnHandle_t h, cusolverEigMode_t j, int n, float* a, float* w) {
    int l = 0;
    TF_CUSOLVER_CHECK(cusolverDnSsyevd_bufferSize(h, j, CUBLAS_FILL_MODE_UPPER, n, a, n, w, &l));
    return l;
  }
  static void syevd(cusolverDnHandle_t h, cusolverEigMode_t j, int n, float* a, float* e, float* w,
                    int l, int* info) {
    TF_CUSOLVER_CHECK(cusolverDnSsyevd(h, j, CUBLAS_FILL_MODE_UPPER, n, a, n, e, w, l, info));
  }
  static int geqrf_size(cusolverDnHandle_t h, int m, int n, float* a) {
    int l = 0;
    TF_CUSOLVER_CHECK(cusolverDnSgeqrf_bufferSize(h, m, n, a, m, &l));
    return l;
  }
  static void geqrf(cusolverDnHandle_t h, int m, int n, float* a, float* tau, float* w, int l,
                    int* info) {
    TF_CUSOLVER_CHECK(cusolverDnSgeqrf(h, m, n, a, m, tau, w, l, info));
  }
  static int orgqr_size(cusolverDnHandle_t h, int m, int n, int k, float* a, float* tau) {
    int l = 0;
    TF_CUSOLVER_CHECK(cusolverDnSorgqr_bufferSize(h, m, n, k, a, m, tau, &l));
    return l;
  }
  static void orgqr(cusolverDnHandle_t h, int m, int n, int k, float* a, float* tau, float* w,
                    int l, int* info) {
    TF_CUSOLVER_CHECK(cusolverDnSorgqr(h, m, n, k, a, m, tau, w, l, info));
  }
  static int gesvd_size(cusolverDnHandle_t h, int m, int n) {
    int l = 0;
    TF_CUSOLVER_CHECK(cusolverDnSgesvd_bufferSize(h, m, n, &l));
    return l;
  }
  static void gesvd(cusolverDnHandle_t h, signed char ju, signed char jv, int m, int n, float* a,
                    float* s, float* u, int ldu, float* vt, int ldvt, float* w, int l, int* info) {
    TF_CUSOLVER_CHECK(
        cusolverDnSgesvd(h, ju, jv, m, n, a, m, s, u, ldu, vt, ldvt, w, l, nullptr, info));
  }
};

template <>
struct Solver<double> {
  static int potrf_size(cusolverDnHandle_t h, int n, double* a) {
    int l = 0;
    TF_CUSOLVER_CHECK(cusolverDnDpotrf_bufferSize(h, CUBLAS_FILL_MODE_UPPER, n, a, n, &l));
    return l;
  }
  static void potrf(cusolverDnHandle_t h, int n, double* a, double* w, int l, int* info) {
    TF_CUSOLVER_CHECK(cusolverDnDpotrf(h, CUBLAS_FILL_MODE_UPPER, n, a, n, w, l, info));
  }
  static int syevd_size(cusolverDnHandle_t h, cusolverEigMode_t j, int n, double* a, double* w) {
    int l = 0;
    TF_CUSOLVER_CHECK(cusolverDnDsyevd_bufferSize(h, j, CUBLAS_FILL_MODE_UPPER, n, a, n, w, &l));
    return l;
  }
  static void syevd(cusolverDnHandle_t h, cusolverEigMode_t j, int n, double* a, double* e,
                    double* w, int l, int* info) {
    TF_CUSOLVER_CHECK(cusolverDnDsyevd(h, j, CUBLAS_FILL_MODE_UPPER, n, a, n, e, w, l, info));
  }
  static int geqrf_size(cusolverDnHandle_t h, int m, int n, double* a) {
    int l = 0;
    TF_CUSOLVER_CHECK(cusolverDnDgeqrf_bufferSize(h, m, n, a, m, &l));
    return l;
  }
  static void geqrf(cusolverDnHandle_t h, int m, int n, double* a, double* tau, double* w, int l,
                    int* info) {
    TF_CUSOLVER_CHECK(cusolverDnDgeqrf(h, m, n, a, m, tau, w, l, info));
  }
  static int orgqr_size(cusolverDnHandle_t h, int m, int n, int k, double* a, double* tau) {
    int l = 0;
    TF_CUSOLVER_CHECK(cusolverDnDorgqr_bufferSize(h, m, n, k, a, m, tau, &l));
    return l;
  }
  static void orgqr(cusolverDnHandle_t h, int m, int n, int k, double* a, double* tau, double* w,
                    int l, int* info) {
    TF_CUSOLVER_CHECK(cusolverDnDorgqr(h, m, n, k, a, m, tau, w, l, info));
  }
  static int gesvd_size(cusolverDnHandle_t h, int m, int n) {
    int l = 0;
    TF_CUSOLVER_CHECK(cusolverDnDgesvd_bufferSize(h, m, n, &l));
    return l;
  }
  static void gesvd(cusolverDnHandle_t h, signed char ju, signed char jv, int m, int n, double* a,
                    double* s, double* u, int ldu, double* vt, int ldvt, double* w, int l,
                    int* info) {
    TF_CUSOLVER_CHECK(
        cusolverDnDgesvd(h, ju, jv, m, n, a, m, s, u, ldu, vt, ldvt, w, l, nullptr, info));
  }
};

template <class T>
void cholesky(const Tensor& in, Tensor& out, const char* op) {
  const Device dev = out.placement();
  const TensorShape& s = in.shape();
  const int64_t n = s[s.rank() - 1], batches = batch_count(s);
  if (n == 0 || batches == 0) return;
  const int ni = checked_int(op, n);
  copy_device(dev, out.raw_data(), in.raw_data(), in.nbytes());
  Tensor info = detail::empty(TensorShape{batches}, int32, dev);
  {
    std::lock_guard lock(cu::cusolver_mutex());
    cusolverDnHandle_t h = cu::cusolver(dev);
    const int l = std::max(Solver<T>::potrf_size(h, ni, ptr<T>(out)), 1);
    const Tensor work = cu::workspace(dev, sizeof(T) * static_cast<size_t>(l));
    for (int64_t b = 0; b < batches; ++b)
      Solver<T>::potrf(h, ni, ptr<T>(out) + b * n * n, ptr<T>(work), l, ptr<int>(info) + b);
  }
  // cuSOLVER, like OpenBLAS, lets a NaN pivot through: flag it as a failure too.
  lk::flag_nan_pivots(dev, dtype_of<T>(), out.raw_data(), ptr<int>(info), batches, n);
  lk::zero_triangle(dev, dtype_of<T>(), out.raw_data(), batches, n, n, /*upper=*/true);
  const auto r = first_failure(dev, info, batches);
  if (r.first >= 0 && r.second > 0)
    TF_THROW(InvalidArgumentError, op,
             "Cholesky decomposition was not successful. The input might not be valid. (matrix "
             "{} of the input of shape {} is not positive definite)",
             r.first, s.to_string());
  raise_info(op, "potrf", r, in);
}

template <class T>
void eigh(const Tensor& in, std::span<Tensor> out, bool compute_v, const char* op) {
  const Device dev = out[0].placement();
  const TensorShape& s = in.shape();
  const int64_t n = s[s.rank() - 1], batches = batch_count(s);
  if (n == 0 || batches == 0) return;
  const int ni = checked_int(op, n);
  Tensor v = detail::empty(in.shape(), in.dtype(), dev);
  copy_device(dev, v.raw_data(), in.raw_data(), in.nbytes());
  Tensor info = detail::empty(TensorShape{batches}, int32, dev);
  const cusolverEigMode_t job = compute_v ? CUSOLVER_EIG_MODE_VECTOR : CUSOLVER_EIG_MODE_NOVECTOR;
  {
    std::lock_guard lock(cu::cusolver_mutex());
    cusolverDnHandle_t h = cu::cusolver(dev);
    const int l = std::max(Solver<T>::syevd_size(h, job, ni, ptr<T>(v), ptr<T>(out[0])), 1);
    const Tensor work = cu::workspace(dev, sizeof(T) * static_cast<size_t>(l));
    for (int64_t b = 0; b < batches; ++b)
      Solver<T>::syevd(h, job, ni, ptr<T>(v) + b * n * n, ptr<T>(out[0]) + b * n, ptr<T>(work), l,
                       ptr<int>(info) + b);
  }
  if (compute_v) lk::transpose(dev, sizeof(T), v.raw_data(), out[1].raw_data(), batches, n, n);
  raise_info(op, "syevd", first_failure(dev, info, batches), in);
}

template <class T>
void qr(const Tensor& in, std::span<Tensor> out, bool full, const char* op) {
  const Device dev = out[0].placement();
  const TensorShape& s = in.shape();
  const int64_t m = s[s.rank() - 2], n = s[s.rank() - 1], batches = batch_count(s);
  const int64_t k = std::min(m, n), kq = full ? m : k, kr = kq;
  if (batches == 0) return;
  TF_CUDA_CHECK(cudaMemsetAsync(out[1].raw_data(), 0, out[1].nbytes(), cu::stream(dev)));
  if (k == 0) {  // Q is the identity (m x m with full_matrices, else m x 0)
    if (kq == m) lk::fill_identity(dev, dtype_of<T>(), out[0].raw_data(), batches, m);
    return;
  }
  const int mi = checked_int(op, m), ni = checked_int(op, n);
  const int ki = static_cast<int>(k), kqi = static_cast<int>(kq);
  // Column-major A (row-major n x m), factored in place.
  Tensor f = detail::empty(TensorShape{batches, n, m}, in.dtype(), dev);
  lk::transpose(dev, sizeof(T), in.raw_data(), f.raw_data(), batches, m, n);
  Tensor tau = detail::empty(TensorShape{batches, k}, in.dtype(), dev);
  Tensor q = detail::empty(TensorShape{batches, kq, m}, in.dtype(), dev);  // column-major Q
  Tensor info = detail::empty(TensorShape{2 * batches}, int32, dev);
  {
    std::lock_guard lock(cu::cusolver_mutex());
    cusolverDnHandle_t h = cu::cusolver(dev);
    const int l = std::max({Solver<T>::geqrf_size(h, mi, ni, ptr<T>(f)),
                            Solver<T>::orgqr_size(h, mi, kqi, ki, ptr<T>(q), ptr<T>(tau)), 1});
    const Tensor work = cu::workspace(dev, sizeof(T) * static_cast<size_t>(l));
    for (int64_t b = 0; b < batches; ++b)
      Solver<T>::geqrf(h, mi, ni, ptr<T>(f) + b * m * n, ptr<T>(tau) + b * k, ptr<T>(work), l,
                       ptr<int>(info) + b);
    // The reflectors: Q's first min(kq, n) columns.
    copy_blocks(dev, q.raw_data(), sizeof(T) * m * kq, f.raw_data(), sizeof(T) * m * n,
                sizeof(T) * m * std::min(kq, n), batches);
    for (int64_t b = 0; b < batches; ++b)
      Solver<T>::orgqr(h, mi, kqi, ki, ptr<T>(q) + b * m * kq, ptr<T>(tau) + b * k, ptr<T>(work), l,
                       ptr<int>(info) + batches + b);
  }
  lk::transpose(dev, sizeof(T), q.raw_data(), out[0].raw_data(), batches, kq, m);
  // R: the first kr rows of the factor transposed back, its lower triangle zeroed.
  Tensor rt = detail::empty(TensorShape{batches, m, n}, in.dtype(), dev);
  lk::transpose(dev, sizeof(T), f.raw_data(), rt.raw_data(), batches, n, m);
  copy_blocks(dev, out[1].raw_data(), sizeof(T) * kr * n, rt.raw_data(), sizeof(T) * m * n,
              sizeof(T) * std::min(kr, m) * n, batches);
  lk::zero_triangle(dev, dtype_of<T>(), out[1].raw_data(), batches, kr, n, /*upper=*/false);
  raise_info(op, "geqrf/orgqr", first_failure(dev, info, 2 * batches), in);
}

template <class T>
void svd(const Tensor& in, std::span<Tensor> out, bool full, bool uv, const char* op) {
  const Device dev = out[0].placement();
  const TensorShape& s = in.shape();
  const int64_t m = s[s.rank() - 2], n = s[s.rank() - 1], batches = batch_count(s);
  const int64_t k = std::min(m, n);
  if (batches == 0) return;
  if (k == 0) {  // no singular values; u and v are identities (or empty)
    if (uv && full) {
      lk::fill_identity(dev, dtype_of<T>(), out[1].raw_data(), batches, m);
      lk::fill_identity(dev, dtype_of<T>(), out[2].raw_data(), batches, n);
    }
    return;
  }
  // The column-major matrix gesvd factors: rows >= cols.
  const bool tall = m > n;
  const int64_t rows = tall ? m : n, cols = tall ? n : m;  // cols == k
  const int ri = checked_int(op, rows), ci = checked_int(op, cols);
  Tensor c = detail::empty(TensorShape{batches, cols, rows}, in.dtype(), dev);
  if (tall)
    lk::transpose(dev, sizeof(T), in.raw_data(), c.raw_data(), batches, m, n);
  else
    copy_device(dev, c.raw_data(), in.raw_data(), in.nbytes());
  // Left factor: rows x kl (column-major), right factor: V^T, cols x cols.
  const int64_t kl = full ? rows : k;
  Tensor left, right;
  if (uv) {
    left = detail::empty(TensorShape{batches, kl, rows}, in.dtype(), dev);
    right = detail::empty(TensorShape{batches, cols, cols}, in.dtype(), dev);
  }
  const signed char ju = !uv ? 'N' : full ? 'A' : 'S', jv = uv ? 'A' : 'N';
  Tensor info = detail::empty(TensorShape{batches}, int32, dev);
  {
    std::lock_guard lock(cu::cusolver_mutex());
    cusolverDnHandle_t h = cu::cusolver(dev);
    const int l = std::max(Solver<T>::gesvd_size(h, ri, ci), 1);
    const Tensor work = cu::workspace(dev, sizeof(T) * static_cast<size_t>(l));
    for (int64_t b = 0; b < batches; ++b)
      Solver<T>::gesvd(h, ju, jv, ri, ci, ptr<T>(c) + b * rows * cols, ptr<T>(out[0]) + b * k,
                       uv ? ptr<T>(left) + b * rows * kl : nullptr, ri,
                       uv ? ptr<T>(right) + b * cols * cols : nullptr, ci, ptr<T>(work), l,
                       ptr<int>(info) + b);
  }
  if (uv) {
    // Tall: u = the left factor transposed, v = V^T read row-major. Wide: the other way round.
    Tensor& from_left = tall ? out[1] : out[2];
    Tensor& from_right = tall ? out[2] : out[1];
    lk::transpose(dev, sizeof(T), left.raw_data(), from_left.raw_data(), batches, kl, rows);
    copy_device(dev, from_right.raw_data(), right.raw_data(), right.nbytes());
  }
  raise_info(op, "gesvd", first_failure(dev, info, batches), in);
}

}  // namespace

namespace prims {

void Cholesky::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  if (in[0].dtype() == float32)
    cholesky<float>(in[0], out[0], name());
  else
    cholesky<double>(in[0], out[0], name());
}

void SelfAdjointEig::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  if (in[0].dtype() == float32)
    eigh<float>(in[0], out, compute_v, name());
  else
    eigh<double>(in[0], out, compute_v, name());
}

void Qr::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  if (in[0].dtype() == float32)
    qr<float>(in[0], out, full_matrices, name());
  else
    qr<double>(in[0], out, full_matrices, name());
}

void Svd::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  if (in[0].dtype() == float32)
    svd<float>(in[0], out, full_matrices, compute_uv, name());
  else
    svd<double>(in[0], out, full_matrices, compute_uv, name());
}

}  // namespace prims

}  // namespace tapeflow
