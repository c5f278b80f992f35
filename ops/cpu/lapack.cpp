// inv, solve and det on the CPU: LU with partial pivoting, then getri (inverse) or getrs (solve).
//
// Layout trick: a row-major n x n buffer is the column-major transpose. Factoring it gives
// A^T = P L U, and
//   inv:   getri on that factorisation gives inv(A^T) in column-major order, which is inv(A) in
//          row-major order: no transposes at all;
//   solve: A x = b is (A^T)^T x = b: getrs with trans = 'T' (b and x transposed to and from
//          column-major around the call, O(n k) work);
//   det:   det(A) = det(A^T) = sign(P) * prod(diag(U)).
// Backends, measured with bench/bench_inverse.cpp (2 Zen 5 cores, OpenBLAS pinned to Haswell):
//   - float32, n >= kBlockedMinN: LAPACK's blocked algorithms written here with the O(n^3) work
//     on oneDNN's AVX-512 sgemm (LU 390 GFLOP/s at n = 4096 against OpenBLAS sgetrf's 220;
//     inverse 351 ms against 636 ms for OpenBLAS getrf + getri and 779 ms for torch::inverse);
//   - otherwise OpenBLAS's LAPACK (sgetrf/dgetrf, getri, getrs).
// For big inverses getri was measured faster than getrs against the identity (OpenBLAS at
// n = 4096: 636 ms against 775 ms; it does 4/3 n^3 flops after the LU instead of 2 n^3); for
// n = 16..383 getrs is faster (see kGetriMinN).
// float16/bfloat16 compute in float32. Small matrices in a batch are spread over the threads
// (single-threaded LAPACK calls); big ones run one after the other on the threaded libraries.
#include <cblas.h>
#include <dnnl.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/allocator.h"
#include "core/check.h"
#include "core/parallel.h"
#include "ops/cuda/det_element.h"
#include "ops/linalg.h"

extern "C" {
// LAPACK (exported by OpenBLAS). The trailing size_t is Fortran's hidden length of `trans`.
void sgetrf_(const int* m, const int* n, float* a, const int* lda, int* ipiv, int* info);
void dgetrf_(const int* m, const int* n, double* a, const int* lda, int* ipiv, int* info);
void sgetri_(const int* n, float* a, const int* lda, const int* ipiv, float* work,
             const int* lwork, int* info);
void dgetri_(const int* n, double* a, const int* lda, const int* ipiv, double* work,
             const int* lwork, int* info);
void sgetrs_(const char* trans, const int* n, const int* nrhs, const float* a, const int* lda,
             const int* ipiv, float* b, const int* ldb, int* info, size_t trans_len);
void dgetrs_(const char* trans, const int* n, const int* nrhs, const double* a, const int* lda,
             const int* ipiv, double* b, const int* ldb, int* info, size_t trans_len);
void slaswp_(const int* n, float* a, const int* lda, const int* k1, const int* k2,
             const int* ipiv, const int* incx);
void strtri_(const char* uplo, const char* diag, const int* n, float* a, const int* lda,
             int* info, size_t uplo_len, size_t diag_len);
}

namespace tapeflow {

namespace {

// Matrices at least this big run one after the other on the threaded library; smaller ones
// are spread over the threads.
constexpr int64_t kThreadedMinN = 96;

// ---- float32 LU and inverse with the level-3 work on oneDNN's sgemm ----
// OpenBLAS runs its Haswell (AVX2) kernels here, at about half the speed of oneDNN's AVX-512
// sgemm, so for big matrices the O(n^3) parts of LAPACK's blocked algorithms (getrf's trailing
// update, trtri's off-diagonal products, getri's block-column update) go to oneDNN, and only the
// O(n^2 nb) parts (panel factorisation, triangular blocks of order <= 256) stay on OpenBLAS.
// Column-major throughout, like LAPACK; pivots are 1-based.

// Order from which the blocked float32 routines beat OpenBLAS's (bench_inverse).
constexpr int kBlockedMinN = 384;
constexpr int kLuBlock = 256;   // panel width of the LU
constexpr int kInvBlock = 256;  // block-column width of the inverse

// The first failed status of colmajor_sgemm on this thread (oneDNN fails with
// dnnl_out_of_memory when it cannot allocate its packing scratch space), dnnl_success if none.
// The blocked routines run on the kernel's calling thread (for_each_matrix runs matrices of
// their order one after the other), so the kernel reads it there after the LAPACK work and
// raises it (raise_sgemm_failure): a kernel must not throw inside a parallel region.
thread_local dnnl_status_t t_sgemm_failure = dnnl_success;

// Column-major C (m x n) = alpha A (m x k) B (k x n) + beta C, as oneDNN's row-major
// C^T = B^T A^T.
void colmajor_sgemm(int m, int n, int k, float alpha, const float* a, int lda, const float* b,
                    int ldb, float beta, float* c, int ldc) {
  const dnnl_status_t status = dnnl_sgemm('N', 'N', n, m, k, alpha, b, ldb, a, lda, beta, c, ldc);
  if (status != dnnl_success && t_sgemm_failure == dnnl_success) t_sgemm_failure = status;
}

// Right-looking blocked LU with partial pivoting of the n x n column-major matrix a (getrf).
int sgetrf_blocked(int n, float* a, int* ipiv) {
  const int lda = n, one = 1;
  int info = 0;
  for (int j = 0; j < n; j += kLuBlock) {
    const int jb = std::min(kLuBlock, n - j), m = n - j;
    int panel_info = 0;
    sgetrf_(&m, &jb, a + j + static_cast<size_t>(j) * lda, &lda, ipiv + j, &panel_info);
    if (panel_info > 0 && info == 0) info = panel_info + j;
    for (int i = j; i < j + jb; ++i) ipiv[i] += j;
    const int k1 = j + 1, k2 = j + jb;
    if (j > 0) slaswp_(&j, a, &lda, &k1, &k2, ipiv, &one);
    const int rest = n - j - jb;
    if (rest > 0) {
      float* a12 = a + j + static_cast<size_t>(j + jb) * lda;
      slaswp_(&rest, a + static_cast<size_t>(j + jb) * lda, &lda, &k1, &k2, ipiv, &one);
      cblas_strsm(CblasColMajor, CblasLeft, CblasLower, CblasNoTrans, CblasUnit, jb, rest, 1.0f,
                  a + j + static_cast<size_t>(j) * lda, lda, a12, lda);
      colmajor_sgemm(rest, rest, jb, -1.0f, a + (j + jb) + static_cast<size_t>(j) * lda, lda, a12,
                     lda, 1.0f, a12 + jb, lda);
    }
  }
  return info;
}

// Triangular blocks up to this order are inverted / multiplied by OpenBLAS directly.
constexpr int kTriangularBase = 128;

// Splits n for the recursions below (a multiple of 32 when big enough).
int split(int n) {
  const int h = n / 2;
  return h >= 64 ? h / 32 * 32 : h;
}

// B (m x k) = T B with T upper triangular (m x m), all column-major: the off-diagonal block's
// product is a GEMM.
void trmm_left_upper(int m, int k, const float* t, int ldt, float* b, int ldb) {
  if (m <= kTriangularBase) {
    cblas_strmm(CblasColMajor, CblasLeft, CblasUpper, CblasNoTrans, CblasNonUnit, m, k, 1.0f, t,
                ldt, b, ldb);
    return;
  }
  const int m1 = split(m), m2 = m - m1;
  trmm_left_upper(m1, k, t, ldt, b, ldb);  // B1 = T11 B1
  colmajor_sgemm(m1, k, m2, 1.0f, t + static_cast<size_t>(m1) * ldt, ldt, b + m1, ldb, 1.0f, b,
                 ldb);  // B1 += T12 B2
  trmm_left_upper(m2, k, t + m1 + static_cast<size_t>(m1) * ldt, ldt, b + m1, ldb);  // B2 = T22 B2
}

// B (m x k) = alpha B T with T upper triangular (k x k).
void trmm_right_upper(int m, int k, float alpha, const float* t, int ldt, float* b, int ldb) {
  if (k <= kTriangularBase) {
    cblas_strmm(CblasColMajor, CblasRight, CblasUpper, CblasNoTrans, CblasNonUnit, m, k, alpha,
                t, ldt, b, ldb);
    return;
  }
  const int k1 = split(k), k2 = k - k1;
  float* b2 = b + static_cast<size_t>(k1) * ldb;
  trmm_right_upper(m, k2, alpha, t + k1 + static_cast<size_t>(k1) * ldt, ldt, b2, ldb);
  colmajor_sgemm(m, k2, k1, alpha, b, ldb, t + static_cast<size_t>(k1) * ldt, ldt, 1.0f, b2,
                 ldb);  // B2 = alpha (B1 T12 + B2 T22)
  trmm_right_upper(m, k1, alpha, t, ldt, b, ldb);  // B1 = alpha B1 T11
}

// Inverse of the upper triangular n x n matrix in place (trtri), recursively:
// inv([[A, B], [0, D]]) = [[inv(A), -inv(A) B inv(D)], [0, inv(D)]]. Returns LAPACK's info.
int strtri_recursive(int n, float* a, int lda) {
  if (n <= kTriangularBase) {
    int info = 0;
    strtri_("U", "N", &n, a, &lda, &info, 1, 1);
    return info;
  }
  const int n1 = split(n), n2 = n - n1;
  float* a12 = a + static_cast<size_t>(n1) * lda;
  float* a22 = a12 + n1;
  if (const int info = strtri_recursive(n1, a, lda)) return info;
  if (const int info = strtri_recursive(n2, a22, lda)) return info + n1;
  trmm_left_upper(n1, n2, a, lda, a12, lda);           // inv(A) B
  trmm_right_upper(n1, n2, -1.0f, a22, lda, a12, lda);  // -inv(A) B inv(D)
  return 0;
}

// Inverse from the LU factors (getri): inv(U) in place, then solve X L = inv(U) block column
// by block column from the right, then undo the column interchanges. work: n * kInvBlock.
int sgetri_blocked(int n, float* a, const int* ipiv, float* work) {
  const int lda = n, ldw = n;
  if (const int info = strtri_recursive(n, a, lda)) return info;
  for (int j = (n - 1) / kInvBlock * kInvBlock; j >= 0; j -= kInvBlock) {
    const int jb = std::min(kInvBlock, n - j);
    // Move L's block column (strictly lower part) into work, zeroing it in a.
    detail::parallel_for(jb, 16, [&](int64_t c0, int64_t c1) {
      for (int jj = j + static_cast<int>(c0); jj < j + c1; ++jj) {
        float* col = a + static_cast<size_t>(jj) * lda;
        float* w = work + static_cast<size_t>(jj - j) * ldw;
        for (int i = jj + 1; i < n; ++i) {
          w[i] = col[i];
          col[i] = 0.0f;
        }
      }
    });
    if (j + jb < n)
      colmajor_sgemm(n, jb, n - j - jb, -1.0f, a + static_cast<size_t>(j + jb) * lda, lda,
                     work + j + jb, ldw, 1.0f, a + static_cast<size_t>(j) * lda, lda);
    cblas_strsm(CblasColMajor, CblasRight, CblasLower, CblasNoTrans, CblasUnit, n, jb, 1.0f,
                work + j, ldw, a + static_cast<size_t>(j) * lda, lda);
  }
  for (int j = n - 2; j >= 0; --j) {
    const int jp = ipiv[j] - 1;
    if (jp != j)
      cblas_sswap(n, a + static_cast<size_t>(j) * lda, 1, a + static_cast<size_t>(jp) * lda, 1);
  }
  return 0;
}

template <class T>
struct Lapack;
template <>
struct Lapack<float> {
  static int getrf(int n, float* a, int* ipiv) {
    if (n >= kBlockedMinN) return sgetrf_blocked(n, a, ipiv);
    int info = 0;
    sgetrf_(&n, &n, a, &n, ipiv, &info);
    return info;
  }
  // Workspace (elements) getri needs beyond what LAPACK asks for.
  static int getri_extra_work(int n) { return n >= kBlockedMinN ? n * kInvBlock : 0; }
  static int getri(int n, float* a, const int* ipiv, float* work, int lwork) {
    if (n >= kBlockedMinN) return sgetri_blocked(n, a, ipiv, work);
    int info = 0;
    sgetri_(&n, a, &n, ipiv, work, &lwork, &info);
    return info;
  }
  static int getrs(const char* trans, int n, int nrhs, const float* lu, const int* ipiv,
                   float* b) {
    int info = 0;
    sgetrs_(trans, &n, &nrhs, lu, &n, ipiv, b, &n, &info, 1);
    return info;
  }
};
template <>
struct Lapack<double> {
  static int getrf(int n, double* a, int* ipiv) {
    int info = 0;
    dgetrf_(&n, &n, a, &n, ipiv, &info);
    return info;
  }
  static int getri_extra_work(int) { return 0; }
  static int getri(int n, double* a, const int* ipiv, double* work, int lwork) {
    int info = 0;
    dgetri_(&n, a, &n, ipiv, work, &lwork, &info);
    return info;
  }
  static int getrs(const char* trans, int n, int nrhs, const double* lu, const int* ipiv,
                   double* b) {
    int info = 0;
    dgetrs_(trans, &n, &nrhs, lu, &n, ipiv, b, &n, &info, 1);
    return info;
  }
};

// getri's optimal workspace (elements) for order n.
template <class T>
int getri_lwork(int n) {
  T query = 0, dummy_a = 0;
  int dummy_ipiv = 0, info = 0;
  const int workspace_query = -1;
  if constexpr (std::is_same_v<T, float>)
    sgetri_(&n, &dummy_a, &n, &dummy_ipiv, &query, &workspace_query, &info);
  else
    dgetri_(&n, &dummy_a, &n, &dummy_ipiv, &query, &workspace_query, &info);
  return std::max({1, static_cast<int>(query), Lapack<T>::getri_extra_work(n)});
}

class Scratch {
 public:
  explicit Scratch(size_t nbytes)
      : n_(std::max<size_t>(nbytes, 1)), p_(cpu_allocator().allocate(n_)) {}
  ~Scratch() { cpu_allocator().deallocate(p_, n_); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  char* bytes() const { return static_cast<char*>(p_); }

 private:
  size_t n_;
  void* p_;
};

// Runs fn(batch, T* work, int* ipiv) -> bool (false: singular) for every batch, each call with
// its own `work_elems` elements of T and n pivots. Returns whether every call succeeded.
template <class T, class F>
bool for_each_matrix(int64_t batches, int64_t n, size_t work_elems, F&& fn) {
  if (batches == 0) return true;
  const size_t work_bytes = (work_elems * sizeof(T) + 63) / 64 * 64;
  const size_t slot_bytes = work_bytes + (static_cast<size_t>(n) * sizeof(int) + 63) / 64 * 64;
  const bool sequential = n >= kThreadedMinN || batches == 1 || omp_in_parallel();
  const int slots = sequential ? 1 : std::max(1, detail::num_threads());
  Scratch scratch(slot_bytes * slots);
  if (sequential) {
    T* work = reinterpret_cast<T*>(scratch.bytes());
    int* ipiv = reinterpret_cast<int*>(scratch.bytes() + work_bytes);
    bool ok = true;
    for (int64_t b = 0; b < batches; ++b) ok = fn(b, work, ipiv) && ok;
    return ok;
  }
  std::atomic<bool> ok{true};
  const int64_t flops = std::max<int64_t>(1, n * n * n);
  detail::parallel_for(batches, std::max<int64_t>(1, 65536 / flops), [&](int64_t b0, int64_t b1) {
    const int slot = std::min(omp_get_thread_num(), slots - 1);
    char* base = scratch.bytes() + static_cast<size_t>(slot) * slot_bytes;
    T* work = reinterpret_cast<T*>(base);
    int* ipiv = reinterpret_cast<int*>(base + work_bytes);
    bool local = true;
    for (int64_t b = b0; b < b1; ++b) local = fn(b, work, ipiv) && local;
    if (!local) ok.store(false, std::memory_order_relaxed);
  });
  return ok.load();
}

// Failures of the libraries' calls, recorded on any thread and raised by the kernel after its
// parallel region (raise_failures).
struct Failures {
  // The first LAPACK routine that returned a negative info (an invalid argument: a bug here).
  std::atomic<const char*> routine{nullptr};
  std::atomic<int> info{0};
  // LAPACK's info: 0 -> true; > 0 (an exact zero pivot) -> false; < 0 is recorded, then false.
  bool ok(const char* name, int i) {
    if (i < 0) {
      const char* none = nullptr;
      if (routine.compare_exchange_strong(none, name)) info.store(i);
    }
    return i == 0;
  }
};

// Raises the failures of a kernel's calls (before its own checks: a failed GEMM leaves garbage
// that may look singular): oneDNN's status through detail::check_dnnl_status (out of memory ->
// ResourceExhaustedError), a LAPACK error as an InternalError. Resets this thread's sgemm status.
void raise_failures(const char* op, const Failures& f, std::span<const Tensor> in) {
  const dnnl_status_t sgemm = std::exchange(t_sgemm_failure, dnnl_success);
  const char* routine = f.routine.load();
  if (sgemm == dnnl_success && routine == nullptr) [[likely]]
    return;
  std::string what =
      fmt::format("{} input of shape {}", dtype_name(in[0].dtype()), in[0].shape().to_string());
  if (in.size() > 1)
    what += fmt::format(" and right-hand side of shape {}", in[1].shape().to_string());
  detail::check_dnnl_status(sgemm, op, what);
  TF_THROW(InternalError, op, "{}: LAPACK's {} failed: its argument {} is invalid (info {})", what,
           routine, -f.info.load(), f.info.load());
}

// ---- the three kernels on float/double buffers (row-major, contiguous batches) ----

// The inverse after the LU: getri from kGetriMinN on (and below 16), getrs against the identity
// in between, where OpenBLAS's getri is slower (1.1x to 2x for n = 16..256 on one or two threads;
// getri wins from n = 384 on).
constexpr int64_t kGetriMinN = 384;
bool inverse_by_getrs(int64_t n) { return n >= 16 && n < kGetriMinN; }

// Whether an LU factor's pivots (U's diagonal) are all nonzero and not NaN: TF's test that the
// input is invertible (|u_ii| > 0). LAPACK's info reports exact zeros only; a NaN in the input
// leaves NaN pivots, which TF refuses as not invertible too.
template <class T>
bool pivots_nonzero(const T* lu, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (!(std::abs(lu[i * n + i]) > T(0))) return false;
  return true;
}

template <class T>
bool inverse(const T* a, T* out, int64_t batches, int64_t n, Failures& f) {
  if (n == 0) return true;
  const int ni = static_cast<int>(n);
  if (inverse_by_getrs(n)) {
    return for_each_matrix<T>(batches, n, n * n, [&](int64_t b, T* lu, int* ipiv) {
      std::memcpy(lu, a + b * n * n, sizeof(T) * n * n);
      if (!f.ok("getrf", Lapack<T>::getrf(ni, lu, ipiv)) || !pivots_nonzero(lu, n)) return false;
      T* x = out + b * n * n;
      std::fill(x, x + n * n, T(0));
      for (int64_t i = 0; i < n; ++i) x[i * n + i] = T(1);
      return f.ok("getrs", Lapack<T>::getrs("N", ni, ni, lu, ipiv, x));
    });
  }
  const int lwork = getri_lwork<T>(ni);
  return for_each_matrix<T>(batches, n, lwork, [&](int64_t b, T* work, int* ipiv) {
    T* x = out + b * n * n;
    std::memcpy(x, a + b * n * n, sizeof(T) * n * n);
    if (!f.ok("getrf", Lapack<T>::getrf(ni, x, ipiv)) || !pivots_nonzero(x, n)) return false;
    return f.ok("getri", Lapack<T>::getri(ni, x, ipiv, work, lwork));
  });
}

template <class T>
bool solve(const T* a, const T* rhs, T* out, int64_t batches, int64_t n, int64_t k, Failures& f) {
  if (n == 0 || k == 0) return true;
  TF_CHECK_ARG(n <= INT32_MAX && k <= INT32_MAX, "solve",
               "matrices of order {} with {} right-hand sides exceed LAPACK's 32-bit sizes", n, k);
  const int ni = static_cast<int>(n), ki = static_cast<int>(k);
  return for_each_matrix<T>(batches, n, n * n + n * k, [&](int64_t b, T* work, int* ipiv) {
    T* lu = work;
    T* x = work + n * n;  // column-major n x k
    std::memcpy(lu, a + b * n * n, sizeof(T) * n * n);
    if (!f.ok("getrf", Lapack<T>::getrf(ni, lu, ipiv)) || !pivots_nonzero(lu, n)) return false;
    const T* src = rhs + b * n * k;
    T* dst = out + b * n * k;
    if (k == 1) {
      std::memcpy(x, src, sizeof(T) * n);
    } else {
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < k; ++j) x[j * n + i] = src[i * k + j];
    }
    // (no throwing here: this may run on OpenMP threads)
    f.ok("getrs", Lapack<T>::getrs("T", ni, ki, lu, ipiv, x));
    if (k == 1) {
      std::memcpy(dst, x, sizeof(T) * n);
    } else {
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < k; ++j) dst[i * k + j] = x[j * n + i];
    }
    return true;
  });
}

template <class T>
void determinant(const T* a, T* out, int64_t batches, int64_t n, Failures& f) {
  if (n == 0) {
    std::fill(out, out + batches, T(1));  // the empty product
    return;
  }
  const int ni = static_cast<int>(n);
  for_each_matrix<T>(batches, n, n * n, [&](int64_t b, T* lu, int* ipiv) {
    std::memcpy(lu, a + b * n * n, sizeof(T) * n * n);
    const int info = Lapack<T>::getrf(ni, lu, ipiv);
    if (!f.ok("getrf", info)) {  // an exact zero pivot (or an error, raised after)
      // 0, or NaN where the input had a NaN (which getrf may have passed over as a pivot, as
      // cuSOLVER's does): the same on every device.
      const bool nan = std::any_of(lu, lu + n * n, [](T v) { return std::isnan(v); });
      out[b] = nan ? std::numeric_limits<T>::quiet_NaN() : T(0);
      return true;
    }
    // Product of U's diagonal with separate exponent bookkeeping (no spurious overflow or
    // underflow in the partial products), and the sign of the row permutation.
    detail::DetPart part = detail::det_identity();
    for (int64_t i = 0; i < n; ++i)
      part = detail::det_push(part, static_cast<double>(lu[i * n + i]), ipiv[i] != i + 1);
    out[b] = static_cast<T>(detail::det_finish(part));
    return true;
  });
}

// Batch count and order n of a [..., n, n] tensor.
void batch_and_order(const TensorShape& s, int64_t* batches, int64_t* n) {
  *n = s[s.rank() - 1];
  *batches = 1;
  for (int i = 0; i + 2 < s.rank(); ++i) *batches *= s[i];
}

template <class T>
std::vector<float> to_float(const Tensor& t) {
  const T* p = t.data<T>();
  std::vector<float> v(static_cast<size_t>(t.num_elements()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(p[i]);
  return v;
}

std::vector<float> half_to_float(const Tensor& t) {
  return t.dtype() == float16 ? to_float<half_t>(t) : to_float<bfloat16_t>(t);
}

void float_to_half(const std::vector<float>& v, Tensor& t) {
  if (t.dtype() == float16) {
    half_t* p = t.data<half_t>();
    for (size_t i = 0; i < v.size(); ++i) p[i] = half_t(v[i]);
  } else {
    bfloat16_t* p = t.data<bfloat16_t>();
    for (size_t i = 0; i < v.size(); ++i) p[i] = bfloat16_t(v[i]);
  }
}

}  // namespace

namespace prims {

void MatrixInverse::eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const {
  int64_t batches, n;
  batch_and_order(in[0].shape(), &batches, &n);
  bool ok = true;
  Failures failures;
  t_sgemm_failure = dnnl_success;
  const DType dt = in[0].dtype();
  if (dt == float32) {
    ok = inverse(in[0].data<float>(), out[0].data<float>(), batches, n, failures);
  } else if (dt == float64) {
    ok = inverse(in[0].data<double>(), out[0].data<double>(), batches, n, failures);
  } else {
    const std::vector<float> a = half_to_float(in[0]);
    std::vector<float> x(a.size());
    ok = inverse(a.data(), x.data(), batches, n, failures);
    float_to_half(x, out[0]);
  }
  raise_failures(name(), failures, in);
  TF_CHECK_ARG(ok, name(), "Input is not invertible.");
}

void MatrixSolve::eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const {
  int64_t batches, n;
  batch_and_order(in[0].shape(), &batches, &n);
  const int64_t k = in[1].shape()[in[1].rank() - 1];
  bool ok = true;
  Failures failures;
  t_sgemm_failure = dnnl_success;
  const DType dt = in[0].dtype();
  if (dt == float32) {
    ok = solve(in[0].data<float>(), in[1].data<float>(), out[0].data<float>(), batches, n, k,
               failures);
  } else if (dt == float64) {
    ok = solve(in[0].data<double>(), in[1].data<double>(), out[0].data<double>(), batches, n, k,
               failures);
  } else {
    const std::vector<float> a = half_to_float(in[0]), b = half_to_float(in[1]);
    std::vector<float> x(b.size());
    ok = solve(a.data(), b.data(), x.data(), batches, n, k, failures);
    float_to_half(x, out[0]);
  }
  raise_failures(name(), failures, in);
  TF_CHECK_ARG(ok, name(), "Input matrix is not invertible.");
}

void MatrixDeterminant::eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const {
  int64_t batches, n;
  batch_and_order(in[0].shape(), &batches, &n);
  Failures failures;
  t_sgemm_failure = dnnl_success;
  const DType dt = in[0].dtype();
  if (dt == float32) {
    determinant(in[0].data<float>(), out[0].data<float>(), batches, n, failures);
  } else if (dt == float64) {
    determinant(in[0].data<double>(), out[0].data<double>(), batches, n, failures);
  } else {
    const std::vector<float> a = half_to_float(in[0]);
    std::vector<float> d(static_cast<size_t>(batches));
    determinant(a.data(), d.data(), batches, n, failures);
    float_to_half(d, out[0]);
  }
  raise_failures(name(), failures, in);
}

}  // namespace prims

}  // namespace tapeflow
