// cholesky, eigh, qr and svd on the CPU: OpenBLAS's LAPACK (potrf, syevd, geqrf + orgqr, gesdd).
//
// Layout: LAPACK is column-major, tapeflow row-major. A row-major n x n buffer is the
// column-major transpose, so
//   cholesky: potrf with uplo = 'U' on the buffer reads the row-major lower triangle (what TF
//             reads) and leaves the column-major U with A = U^T U, which read row-major is L;
//             the row-major upper triangle (the input's, untouched) is then zeroed;
//   eigh:     syevd with uplo = 'U' reads the row-major lower triangle too; its column-major
//             eigenvectors are transposed into the row-major output;
//   qr, svd:  the input is transposed into a column-major work matrix first; qr transposes Q
//             and R back; svd's U is transposed back and its column-major V^T (ldvt = k) read
//             row-major is V itself, TF's v.
// Matrices of a batch are spread over the threads (single-threaded LAPACK calls); a single
// matrix runs on the threaded library.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/check.h"
#include "core/parallel.h"
#include "ops/cpu/lapack_batch.h"
#include "ops/linalg_decomp.h"

extern "C" {
// LAPACK (exported by OpenBLAS). Trailing size_t: Fortran's hidden lengths of the char args.
void spotrf_(const char* uplo, const int* n, float* a, const int* lda, int* info, size_t);
void dpotrf_(const char* uplo, const int* n, double* a, const int* lda, int* info, size_t);
void ssyevd_(const char* jobz, const char* uplo, const int* n, float* a, const int* lda, float* w,
             float* work, const int* lwork, int* iwork, const int* liwork, int* info, size_t,
             size_t);
void dsyevd_(const char* jobz, const char* uplo, const int* n, double* a, const int* lda, double* w,
             double* work, const int* lwork, int* iwork, const int* liwork, int* info, size_t,
             size_t);
void sgeqrf_(const int* m, const int* n, float* a, const int* lda, float* tau, float* work,
             const int* lwork, int* info);
void dgeqrf_(const int* m, const int* n, double* a, const int* lda, double* tau, double* work,
             const int* lwork, int* info);
void sorgqr_(const int* m, const int* n, const int* k, float* a, const int* lda, const float* tau,
             float* work, const int* lwork, int* info);
void dorgqr_(const int* m, const int* n, const int* k, double* a, const int* lda, const double* tau,
             double* work, const int* lwork, int* info);
void sgesdd_(const char* jobz, const int* m, const int* n, float* a, const int* lda, float* s,
             float* u, const int* ldu, float* vt, const int* ldvt, float* work, const int* lwork,
             int* iwork, int* info, size_t);
void dgesdd_(const char* jobz, const int* m, const int* n, double* a, const int* lda, double* s,
             double* u, const int* ldu, double* vt, const int* ldvt, double* work, const int* lwork,
             int* iwork, int* info, size_t);
}

namespace tapeflow {

namespace {

using detail::for_each_matrix;

template <class T>
struct Lapack;

template <>
struct Lapack<float> {
  static int potrf(int n, float* a) {
    int info = 0;
    spotrf_("U", &n, a, &n, &info, 1);
    return info;
  }
  static int syevd(char jobz, int n, float* a, float* w, float* work, int lwork, int* iwork,
                   int liwork) {
    int info = 0;
    ssyevd_(&jobz, "U", &n, a, &n, w, work, &lwork, iwork, &liwork, &info, 1, 1);
    return info;
  }
  static int geqrf(int m, int n, float* a, float* tau, float* work, int lwork) {
    int info = 0;
    sgeqrf_(&m, &n, a, &m, tau, work, &lwork, &info);
    return info;
  }
  static int orgqr(int m, int n, int k, float* a, const float* tau, float* work, int lwork) {
    int info = 0;
    sorgqr_(&m, &n, &k, a, &m, tau, work, &lwork, &info);
    return info;
  }
  static int gesdd(char jobz, int m, int n, float* a, float* s, float* u, int ldu, float* vt,
                   int ldvt, float* work, int lwork, int* iwork) {
    int info = 0;
    sgesdd_(&jobz, &m, &n, a, &m, s, u, &ldu, vt, &ldvt, work, &lwork, iwork, &info, 1);
    return info;
  }
};

template <>
struct Lapack<double> {
  static int potrf(int n, double* a) {
    int info = 0;
    dpotrf_("U", &n, a, &n, &info, 1);
    return info;
  }
  static int syevd(char jobz, int n, double* a, double* w, double* work, int lwork, int* iwork,
                   int liwork) {
    int info = 0;
    dsyevd_(&jobz, "U", &n, a, &n, w, work, &lwork, iwork, &liwork, &info, 1, 1);
    return info;
  }
  static int geqrf(int m, int n, double* a, double* tau, double* work, int lwork) {
    int info = 0;
    dgeqrf_(&m, &n, a, &m, tau, work, &lwork, &info);
    return info;
  }
  static int orgqr(int m, int n, int k, double* a, const double* tau, double* work, int lwork) {
    int info = 0;
    dorgqr_(&m, &n, &k, a, &m, tau, work, &lwork, &info);
    return info;
  }
  static int gesdd(char jobz, int m, int n, double* a, double* s, double* u, int ldu, double* vt,
                   int ldvt, double* work, int lwork, int* iwork) {
    int info = 0;
    dgesdd_(&jobz, &m, &n, a, &m, s, u, &ldu, vt, &ldvt, work, &lwork, iwork, &info, 1);
    return info;
  }
};

// LAPACK takes 32-bit sizes.
int lapack_int(const char* op, int64_t v, const TensorShape& s) {
  TF_CHECK_ARG(v <= INT32_MAX / 4, op, "matrices of shape {} exceed LAPACK's 32-bit sizes",
               s.to_string());
  return static_cast<int>(v);
}

// A workspace size from LAPACK's query (a floating value, which in float32 can round below the
// exact integer for large n: up with a margin).
template <class T>
int work_size(T wq) {
  const double w = std::ceil(static_cast<double>(wq) * (1.0 + 1e-6)) + 1.0;
  return static_cast<int>(std::clamp(w, 1.0, static_cast<double>(INT32_MAX)));
}

// A LAPACK error (a negative info: an invalid argument, a bug here) or a failed convergence.
void raise_info(const char* op, const char* routine, std::pair<int64_t, int> r, const Tensor& in) {
  if (r.first < 0) return;
  if (r.second < 0)
    TF_THROW(InternalError, op,
             "LAPACK's {} failed on the {} input of shape {}: argument {} is "
             "invalid",
             routine, dtype_name(in.dtype()), in.shape().to_string(), -r.second);
  TF_THROW(InvalidArgumentError, op,
           "LAPACK's {} did not converge for matrix {} of the input of shape {} (info {})", routine,
           r.first, in.shape().to_string(), r.second);
}

int64_t batch_count(const TensorShape& s) {
  int64_t b = 1;
  for (int i = 0; i + 2 < s.rank(); ++i) b *= s[i];
  return b;
}

// dst (rows x cols, row-major) = the column-major rows x cols matrix src (leading dimension ld).
template <class T>
void from_colmajor(const T* src, int64_t ld, int64_t rows, int64_t cols, T* dst) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) dst[i * cols + j] = src[j * ld + i];
}

template <class T>
void cholesky(const Tensor& in, Tensor& out, const char* op) {
  const TensorShape& s = in.shape();
  const int64_t n = s[s.rank() - 1], batches = batch_count(s);
  const int ni = lapack_int(op, n, s);
  T* o = out.data<T>();
  // An empty batch has no buffer (null data): nothing to copy.
  if (n > 0 && batches > 0) std::memcpy(o, in.data<T>(), sizeof(T) * batches * n * n);
  const auto r = for_each_matrix(n == 0 ? 0 : batches, [&](int64_t b) {
    T* a = o + b * n * n;
    int info = Lapack<T>::potrf(ni, a);
    // OpenBLAS's potrf lets NaNs through (reference LAPACK reports them): a NaN pivot fails too.
    for (int64_t i = 0; i < n && info == 0; ++i)
      if (std::isnan(a[i * n + i])) info = static_cast<int>(i + 1);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = i + 1; j < n; ++j) a[i * n + j] = T(0);
    return info;
  });
  if (r.first >= 0 && r.second > 0)
    TF_THROW(InvalidArgumentError, op,
             "Cholesky decomposition was not successful. The input might not be valid. (matrix "
             "{} of the input of shape {} is not positive definite: its leading minor of order {} "
             "is not positive)",
             r.first, s.to_string(), r.second);
  raise_info(op, "potrf", r, in);
}

template <class T>
void eigh(const Tensor& in, std::span<Tensor> out, bool compute_v, const char* op) {
  const TensorShape& s = in.shape();
  const int64_t n = s[s.rank() - 1], batches = batch_count(s);
  const int ni = lapack_int(op, n, s);
  const char jobz = compute_v ? 'V' : 'N';
  int lwork = -1, liwork = -1;
  if (n > 0) {  // workspace query
    T wq = 0, dummy = 0;
    int iq = 0;
    Lapack<T>::syevd(jobz, ni, &dummy, &dummy, &wq, -1, &iq, -1);
    // At least LAPACK's documented minimum (1 + 6n + 2n^2 with vectors, 2n + 1 without).
    const int64_t minimum = compute_v ? 1 + 6 * n + 2 * n * n : 2 * n + 1;
    lwork = std::max(work_size(wq), static_cast<int>(std::min<int64_t>(minimum, INT32_MAX)));
    liwork = std::max(iq, 1);
  }
  const T* a = in.data<T>();
  const auto r = for_each_matrix(n == 0 ? 0 : batches, [&](int64_t b) {
    std::vector<T> work(static_cast<size_t>(n * n + lwork));
    std::vector<int> iwork(static_cast<size_t>(liwork));
    T* v = work.data() + lwork;
    std::memcpy(v, a + b * n * n, sizeof(T) * n * n);
    const int info = Lapack<T>::syevd(jobz, ni, v, out[0].data<T>() + b * n, work.data(), lwork,
                                      iwork.data(), liwork);
    if (compute_v) from_colmajor(v, n, n, n, out[1].data<T>() + b * n * n);
    return info;
  });
  raise_info(op, "syevd", r, in);
}

template <class T>
void qr(const Tensor& in, std::span<Tensor> out, bool full, const char* op) {
  const TensorShape& s = in.shape();
  const int64_t m = s[s.rank() - 2], n = s[s.rank() - 1], batches = batch_count(s);
  const int64_t k = std::min(m, n), kq = full ? m : k;
  const int mi = lapack_int(op, m, s), ni = lapack_int(op, n, s);
  const int ki = static_cast<int>(k), kqi = static_cast<int>(kq);
  T* q = out[0].data<T>();
  T* r = out[1].data<T>();
  std::fill(r, r + out[1].num_elements(), T(0));
  if (k == 0) {  // Q is the identity (m x m with full_matrices, else m x 0), R is empty or zero
    std::fill(q, q + out[0].num_elements(), T(0));
    if (kq > 0)
      for (int64_t b = 0; b < batches; ++b)
        for (int64_t i = 0; i < m; ++i) q[b * m * kq + i * kq + i] = T(1);
    return;
  }
  int lwork = 0;
  {
    T wq = 0, dummy = 0;
    Lapack<T>::geqrf(mi, ni, &dummy, &dummy, &wq, -1);
    lwork = work_size(wq);
    Lapack<T>::orgqr(mi, kqi, ki, &dummy, &dummy, &wq, -1);
    lwork = std::max(lwork, work_size(wq));
  }
  const T* a = in.data<T>();
  std::atomic<int> orgqr_info{0};
  const auto res = for_each_matrix(batches, [&](int64_t b) {
    std::vector<T> buf(static_cast<size_t>(m * std::max(n, kq) + k + lwork));
    T* f = buf.data();  // column-major m x max(n, kq): A, then the factor, then Q
    T* tau = f + m * std::max(n, kq);
    T* work = tau + k;
    const T* src = a + b * m * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) f[j * m + i] = src[i * n + j];
    const int info = Lapack<T>::geqrf(mi, ni, f, tau, work, lwork);
    if (info != 0) return info;
    T* rb = r + b * (full ? m : k) * n;
    for (int64_t i = 0; i < k; ++i)
      for (int64_t j = i; j < n; ++j) rb[i * n + j] = f[j * m + i];
    const int oi = Lapack<T>::orgqr(mi, kqi, ki, f, tau, work, lwork);
    if (oi != 0) orgqr_info.store(oi);
    from_colmajor(f, m, m, kq, q + b * m * kq);
    return oi;
  });
  raise_info(op, orgqr_info.load() != 0 ? "orgqr" : "geqrf", res, in);
}

template <class T>
void svd(const Tensor& in, std::span<Tensor> out, bool full, bool uv, const char* op) {
  const TensorShape& s = in.shape();
  const int64_t m = s[s.rank() - 2], n = s[s.rank() - 1], batches = batch_count(s);
  const int64_t k = std::min(m, n);
  const int64_t ku = full ? m : k, kv = full ? n : k;
  const int mi = lapack_int(op, m, s), ni = lapack_int(op, n, s);
  if (k == 0) {  // no singular values; u and v are identities (or empty)
    for (int o = 1; uv && o < 3; ++o) {
      T* p = out[o].data<T>();
      const int64_t rows = o == 1 ? m : n, cols = o == 1 ? ku : kv;
      std::fill(p, p + out[o].num_elements(), T(0));
      for (int64_t b = 0; b < batches && cols > 0; ++b)
        for (int64_t i = 0; i < std::min(rows, cols); ++i) p[b * rows * cols + i * cols + i] = 1;
    }
    return;
  }
  const char jobz = !uv ? 'N' : full ? 'A' : 'S';
  const int ldu = mi, ldvt = static_cast<int>(kv);
  int lwork = 0;
  {
    T wq = 0, dummy = 0;
    int iq = 0;
    Lapack<T>::gesdd(jobz, mi, ni, &dummy, &dummy, &dummy, ldu, &dummy, ldvt, &wq, -1, &iq);
    lwork = work_size(wq);
  }
  const T* a = in.data<T>();
  const auto res = for_each_matrix(batches, [&](int64_t b) {
    const int64_t usize = uv ? m * ku : 0, vsize = uv ? kv * n : 0;
    std::vector<T> buf(static_cast<size_t>(m * n + usize + vsize + lwork));
    std::vector<int> iwork(static_cast<size_t>(8 * k));
    T* f = buf.data();
    T* u = f + m * n;
    T* vt = u + usize;
    T* work = vt + vsize;
    const T* src = a + b * m * n;
    // A NaN or an infinity: every output NaN, as TF's kernel gives (gesdd refuses a NaN as an
    // invalid argument 4 and need not converge on an infinity).
    if (!std::all_of(src, src + m * n, [](T v) { return std::isfinite(v); })) {
      const T nan = std::numeric_limits<T>::quiet_NaN();
      std::fill(out[0].data<T>() + b * k, out[0].data<T>() + (b + 1) * k, nan);
      if (uv) {
        std::fill(out[1].data<T>() + b * m * ku, out[1].data<T>() + (b + 1) * m * ku, nan);
        std::fill(out[2].data<T>() + b * n * kv, out[2].data<T>() + (b + 1) * n * kv, nan);
      }
      return 0;
    }
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) f[j * m + i] = src[i * n + j];
    T* dummy = work;  // not referenced with jobz = 'N'
    const int info = Lapack<T>::gesdd(jobz, mi, ni, f, out[0].data<T>() + b * k, uv ? u : dummy,
                                      ldu, uv ? vt : dummy, ldvt, work, lwork, iwork.data());
    if (uv) {
      from_colmajor(u, m, m, ku, out[1].data<T>() + b * m * ku);
      // Column-major V^T (kv x n, ldvt = kv) read row-major is V (n x kv).
      std::memcpy(out[2].data<T>() + b * n * kv, vt, sizeof(T) * n * kv);
    }
    return info;
  });
  raise_info(op, "gesdd", res, in);
}

}  // namespace

namespace prims {

void Cholesky::eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const {
  if (in[0].dtype() == float32)
    cholesky<float>(in[0], out[0], name());
  else
    cholesky<double>(in[0], out[0], name());
}

void SelfAdjointEig::eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const {
  if (in[0].dtype() == float32)
    eigh<float>(in[0], out, compute_v, name());
  else
    eigh<double>(in[0], out, compute_v, name());
}

void Qr::eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const {
  if (in[0].dtype() == float32)
    qr<float>(in[0], out, full_matrices, name());
  else
    qr<double>(in[0], out, full_matrices, name());
}

void Svd::eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const {
  if (in[0].dtype() == float32)
    svd<float>(in[0], out, full_matrices, compute_uv, name());
  else
    svd<double>(in[0], out, full_matrices, compute_uv, name());
}

}  // namespace prims

}  // namespace tapeflow
