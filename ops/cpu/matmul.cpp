// MatMul on the CPU. Backends, chosen by measurement (bench/bench_matmul.cpp) on 2 Zen 5 cores
// with AVX-512 and OpenBLAS pinned to Haswell, and on an AMD EPYC VM with OpenBLAS's Cooperlake
// kernels:
//   float32: OpenBLAS sgemm for small products (M*N*K up to detail::sgemm_openblas_max_mnk():
//            28^3 where OpenBLAS runs AVX2 kernels, ~30 ns fixed cost against oneDNN's ~190 ns;
//            more where it runs AVX-512 ones), oneDNN sgemm above (AVX-512 kernels, ~95% of
//            the FMA peak from N = 256 up; OpenBLAS's Haswell kernels reach half of that, its
//            Cooperlake ones 90%);
//   float64: OpenBLAS dgemm (oneDNN has no dgemm);
//   float16, bfloat16: converted to float32 around the float32 GEMM;
//   int32, int64: a blocked loop (wrapping arithmetic, as TF's), compiled for AVX-512/AVX2 with
//            a portable fallback.
// Leading batch dimensions broadcast. A batch whose right operand is one shared matrix is folded
// into one tall GEMM; small matrices in big batches run one single-threaded GEMM per thread.
#include <cblas.h>
#include <dnnl.h>
#include <omp.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <climits>
#include <cstring>
#include <optional>
#include <string>
#include <type_traits>

#include "core/allocator.h"
#include "core/check.h"
#include "core/parallel.h"
#include "ops/cpu/isa.h"
#include "ops/helpers.h"
#include "ops/linalg.h"

namespace tapeflow {

namespace detail {

namespace {
const char* dnnl_status_name(int status) {
  switch (status) {
    case dnnl_success:
      return "dnnl_success";
    case dnnl_out_of_memory:
      return "dnnl_out_of_memory";
    case dnnl_invalid_arguments:
      return "dnnl_invalid_arguments";
    case dnnl_unimplemented:
      return "dnnl_unimplemented";
    case dnnl_runtime_error:
      return "dnnl_runtime_error";
    case dnnl_not_required:
      return "dnnl_not_required";
    default:
      return "an unknown status";
  }
}
}  // namespace

static_assert(dnnl_success == 0, "check_dnnl_status compares with 0");

void throw_dnnl_status(int status, const char* op, const std::string& what) {
  TF_CHECK_T(ResourceExhaustedError, status != dnnl_out_of_memory, op,
             "{}: oneDNN's sgemm ran out of memory for its scratch space (dnnl_out_of_memory)",
             what);
  TF_THROW(InternalError, op, "{}: oneDNN's sgemm failed with {} ({})", what,
           dnnl_status_name(status), status);
}

// The largest float32 product (M*N*K) that runs on OpenBLAS's sgemm rather than oneDNN's, by the
// kernels OpenBLAS picked for this CPU (OPENBLAS_CORETYPE may pin them) and the threads oneDNN
// would use (bench/bench_matmul.cpp; squares, medians):
// - AVX2 kernels (Haswell, Zen): 28^3. OpenBLAS's lower fixed cost (~30 ns against ~190 ns)
//   wins below that; oneDNN's AVX-512 kernels above.
// - AVX-512 kernels (SkylakeX, Cooperlake, SapphireRapids): on one thread OpenBLAS is faster up
//   to about 100^3 (an AMD EPYC VM with AVX-512: N = 64 4.6 us against 5.4, N = 96 15.5 against
//   15.8, N = 104 24.0 against 22.9); with more threads oneDNN threads products from about
//   57^3 up and OpenBLAS only larger ones (N = 64, 2 threads: 4.6 against 3.7 us).
// Both are accurate to float32 rounding but sum in different orders, so their bits differ: with
// AVX-512 kernels and more than one thread, a product between 56^3 and 100^3 runs on OpenBLAS in
// a batch split over threads and on oneDNN alone. The 56^3 was measured with two threads and is
// assumed for more.
double sgemm_openblas_max_mnk() {
  static const bool avx512_kernels = [] {
    const char* core = openblas_get_corename();
    if (!core) return false;
    std::string c(core);
    std::transform(c.begin(), c.end(), c.begin(),
                   [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    return c == "skylakex" || c == "cooperlake" || c == "sapphirerapids";
  }();
  if (!avx512_kernels) return 28.0 * 28 * 28;
  // Inside a parallel region (a batch split over threads) oneDNN runs on one thread too.
  const bool threaded = !omp_in_parallel() && detail::num_threads() > 1;
  return threaded ? 56.0 * 56 * 56 : 100.0 * 100 * 100;
}

}  // namespace detail

namespace {

// Matrices with fewer flops than this in a batch run one per thread (single-threaded GEMMs);
// larger ones run one after the other on the threaded library.
constexpr double kThreadedGemmMinFlops = 2.0 * 96 * 96 * 96;
// Smallest amount of work (flops) worth handing to a second thread.
constexpr double kMinFlopsPerThread = 256.0 * 1024;

// Temporary host buffer from the caching allocator.
class Scratch {
 public:
  explicit Scratch(size_t nbytes) : n_(nbytes), p_(cpu_allocator().allocate(nbytes)) {}
  ~Scratch() { cpu_allocator().deallocate(p_, n_); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  template <class T>
  T* as() const {
    return static_cast<T*>(p_);
  }

 private:
  size_t n_;
  void* p_;
};

void zero_rows(int64_t m, int64_t n, void* c, int64_t ldc, size_t elem) {
  char* p = static_cast<char*>(c);
  for (int64_t i = 0; i < m; ++i) std::memset(p + i * ldc * elem, 0, n * elem);
}

int to_int(int64_t v) {
  TF_ASSERT(v <= INT_MAX);
  return static_cast<int>(v);
}

// ---- integer loop kernel: C = A B (no transposes), wrapping arithmetic ----

template <class T>
[[gnu::always_inline]] inline void int_gemm_rows(int64_t i0, int64_t i1, int64_t n, int64_t k,
                                                 const T* a, int64_t lda, const T* b,
                                                 int64_t ldb, T* c, int64_t ldc) {
  using U = std::make_unsigned_t<T>;
  constexpr int64_t kKB = 128, kNB = 1024;  // B block of kKB x kNB stays in L2
  for (int64_t i = i0; i < i1; ++i) std::memset(c + i * ldc, 0, n * sizeof(T));
  for (int64_t k0 = 0; k0 < k; k0 += kKB) {
    const int64_t k1 = std::min(k, k0 + kKB);
    for (int64_t j0 = 0; j0 < n; j0 += kNB) {
      const int64_t nj = std::min(n, j0 + kNB) - j0;
      for (int64_t i = i0; i < i1; ++i) {
        U* __restrict cr = reinterpret_cast<U*>(c + i * ldc + j0);
        for (int64_t kk = k0; kk < k1; ++kk) {
          const U av = static_cast<U>(a[i * lda + kk]);
          const U* __restrict br = reinterpret_cast<const U*>(b + kk * ldb + j0);
          for (int64_t j = 0; j < nj; ++j) cr[j] += av * br[j];
        }
      }
    }
  }
}

// The loop compiled for the baseline ISA, AVX2 and AVX-512, picked by cpu::cpu_level().
#define TF_INT_GEMM_PARAMS(T)                                                             \
  (int64_t i0, int64_t i1, int64_t n, int64_t k, const T* a, int64_t lda, const T* b, \
   int64_t ldb, T* c, int64_t ldc)
TF_CPU_VARIANTS(int_gemm_rows_i32, int_gemm_rows<int32_t>, TF_INT_GEMM_PARAMS(int32_t),
                (i0, i1, n, k, a, lda, b, ldb, c, ldc))
TF_CPU_VARIANTS(int_gemm_rows_i64, int_gemm_rows<int64_t>, TF_INT_GEMM_PARAMS(int64_t),
                (i0, i1, n, k, a, lda, b, ldb, c, ldc))
#undef TF_INT_GEMM_PARAMS

template <class T>
void int_gemm(int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b, int64_t ldb,
              T* c, int64_t ldc) {
  const int64_t grain =
      std::max<int64_t>(1, static_cast<int64_t>(kMinFlopsPerThread / (2.0 * n * k)));
  detail::parallel_for(m, grain, [&](int64_t i0, int64_t i1) {
    if constexpr (std::is_same_v<T, int32_t>)
      TF_CPU_DISPATCH(int_gemm_rows_i32, i0, i1, n, k, a, lda, b, ldb, c, ldc);
    else
      TF_CPU_DISPATCH(int_gemm_rows_i64, i0, i1, n, k, a, lda, b, ldb, c, ldc);
  });
}

// ---- one GEMM per element type; C (m x n, ldc) = alpha op(A) op(B) + beta C ----
// beta is 0 (C overwritten) or, for a fused variable update, anything (1, or a momentum).

// C *= beta (an empty product accumulated into C).
template <class T>
void scale_rows(int64_t m, int64_t n, T beta, T* c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) c[i * ldc + j] *= beta;
}

// Returns oneDNN's status (dnnl_success on the other paths): the caller raises the error,
// outside any parallel region (oneDNN fails with dnnl_out_of_memory when it cannot allocate the
// scratch space for packing the operands).
[[nodiscard]] dnnl_status_t gemm_one(bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                                     const float* a, int64_t lda, const float* b, int64_t ldb,
                                     float* c, int64_t ldc, float alpha = 1.0f, float beta = 0.0f) {
  if (m == 0 || n == 0) return dnnl_success;
  if (k == 0) {
    if (beta == 0.0f) zero_rows(m, n, c, ldc, sizeof(float));
    else if (beta != 1.0f) scale_rows(m, n, beta, c, ldc);
    return dnnl_success;
  }
  if (static_cast<double>(m) * n * k <= detail::sgemm_openblas_max_mnk()) {
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                to_int(m), to_int(n), to_int(k), alpha, a, to_int(lda), b, to_int(ldb), beta, c,
                to_int(ldc));
    return dnnl_success;
  }
  return dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

[[nodiscard]] dnnl_status_t gemm_one(bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                                     const double* a, int64_t lda, const double* b, int64_t ldb,
                                     double* c, int64_t ldc, double alpha = 1.0,
                                     double beta = 0.0) {
  if (m == 0 || n == 0) return dnnl_success;
  if (k == 0) {
    if (beta == 0.0) zero_rows(m, n, c, ldc, sizeof(double));
    else if (beta != 1.0) scale_rows(m, n, beta, c, ldc);
    return dnnl_success;
  }
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              to_int(m), to_int(n), to_int(k), alpha, a, to_int(lda), b, to_int(ldb), beta, c,
              to_int(ldc));
  return dnnl_success;
}

template <class T>
  requires std::is_integral_v<T>
  [[nodiscard]] dnnl_status_t gemm_one(bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                                       const T* a, int64_t lda, const T* b, int64_t ldb, T* c,
                                       int64_t ldc) {
    // The batch driver transposes integer operands up front.
    TF_ASSERT(!ta && !tb);
    if (m == 0 || n == 0) return dnnl_success;
    if (k == 0) {
      zero_rows(m, n, c, ldc, sizeof(T));
      return dnnl_success;
    }
    int_gemm(m, n, k, a, lda, b, ldb, c, ldc);
    return dnnl_success;
  }

// ---- batch driver ----

struct Geometry {
  bool ta = false, tb = false;
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0;  // leading dimensions of the stored matrices
  int64_t a_mat = 0, b_mat = 0, c_mat = 0;  // elements per matrix
  int batch_rank = 0;
  std::array<int64_t, TensorShape::kMaxRank> batch{};     // output batch dimensions
  std::array<int64_t, TensorShape::kMaxRank> a_stride{};  // in matrices, 0 where broadcast
  std::array<int64_t, TensorShape::kMaxRank> b_stride{};
  int64_t num_batches = 1;
  bool a_shared = true, b_shared = true;  // one matrix used for every batch
  bool a_full = true;                     // a has one matrix per batch, in order
};

TensorShape batch_shape(const TensorShape& s) {
  TensorShape b;
  for (int i = 0; i + 2 < s.rank(); ++i) b.push_back(s[i]);
  return b;
}

Geometry make_geometry(const prims::MatMul& p, const TensorShape& sa, const TensorShape& sb,
                       const TensorShape& so) {
  Geometry g;
  g.ta = p.transpose_a;
  g.tb = p.transpose_b;
  const int ra = sa.rank(), rb = sb.rank(), ro = so.rank();
  g.m = so[ro - 2];
  g.n = so[ro - 1];
  g.k = g.ta ? sa[ra - 2] : sa[ra - 1];
  g.lda = sa[ra - 1];
  g.ldb = sb[rb - 1];
  g.a_mat = sa[ra - 2] * sa[ra - 1];
  g.b_mat = sb[rb - 2] * sb[rb - 1];
  g.c_mat = g.m * g.n;
  const TensorShape bo = batch_shape(so);
  const auto as = detail::broadcast_strides(batch_shape(sa), bo);
  const auto bs = detail::broadcast_strides(batch_shape(sb), bo);
  g.batch_rank = bo.rank();
  for (int i = 0; i < bo.rank(); ++i) {
    g.batch[i] = bo[i];
    g.a_stride[i] = as[i];
    g.b_stride[i] = bs[i];
    g.num_batches *= bo[i];
    if (bo[i] != 1) {
      g.a_shared = g.a_shared && as[i] == 0;
      g.b_shared = g.b_shared && bs[i] == 0;
    }
  }
  // a holds exactly one matrix per output batch, in row-major batch order.
  const TensorShape ba = batch_shape(sa);
  int64_t na = 1;
  for (int i = 0; i < ba.rank(); ++i) na *= ba[i];
  g.a_full = na == g.num_batches;
  return g;
}

// Calls fn(a_offset, b_offset, c_offset) (in elements) for batches [begin, end).
template <class F>
void for_batches(const Geometry& g, int64_t begin, int64_t end, F&& fn) {
  std::array<int64_t, TensorShape::kMaxRank> idx{};
  int64_t rem = begin, ao = 0, bo = 0;
  for (int d = g.batch_rank - 1; d >= 0; --d) {
    idx[d] = rem % g.batch[d];
    rem /= g.batch[d];
    ao += idx[d] * g.a_stride[d];
    bo += idx[d] * g.b_stride[d];
  }
  for (int64_t t = begin; t < end; ++t) {
    fn(ao * g.a_mat, bo * g.b_mat, t * g.c_mat);
    for (int d = g.batch_rank - 1; d >= 0; --d) {
      ao += g.a_stride[d];
      bo += g.b_stride[d];
      if (++idx[d] < g.batch[d]) break;
      ao -= idx[d] * g.a_stride[d];
      bo -= idx[d] * g.b_stride[d];
      idx[d] = 0;
    }
  }
}

// Returns the first failed GEMM's status (dnnl_success when all succeeded).
template <class T>
[[nodiscard]] dnnl_status_t batched_gemm(const Geometry& g, const T* a, const T* b, T* c) {
  if (g.num_batches == 0 || g.c_mat == 0) return dnnl_success;
  if (g.num_batches == 1) return gemm_one(g.ta, g.tb, g.m, g.n, g.k, a, g.lda, b, g.ldb, c, g.n);
  // One shared right operand and a stack of left operands: one tall GEMM.
  if (g.b_shared && !g.ta && g.a_full)
    return gemm_one(false, g.tb, g.num_batches * g.m, g.n, g.k, a, g.lda, b, g.ldb, c, g.n);
  const double flops = 2.0 * g.m * g.n * g.k;
  // (no throwing here: this may run on OpenMP threads)
  std::atomic<int> failure{dnnl_success};
  auto one = [&](int64_t ao, int64_t bo, int64_t co) {
    const dnnl_status_t s =
        gemm_one(g.ta, g.tb, g.m, g.n, g.k, a + ao, g.lda, b + bo, g.ldb, c + co, g.n);
    if (s != dnnl_success) failure.store(s, std::memory_order_relaxed);
  };
  if (flops >= kThreadedGemmMinFlops) {
    for_batches(g, 0, g.num_batches, one);
  } else {
    // Small matrices: one batch range per thread; GEMMs inside the region run single-threaded.
    const int64_t grain =
        std::max<int64_t>(1, static_cast<int64_t>(kMinFlopsPerThread / std::max(flops, 1.0)));
    detail::parallel_for(g.num_batches, grain,
                         [&](int64_t b0, int64_t b1) { for_batches(g, b0, b1, one); });
  }
  return static_cast<dnnl_status_t>(failure.load());
}

// Converts n elements (parallel for big arrays).
template <class Dst, class Src>
void convert(const Src* src, Dst* dst, int64_t n) {
  detail::parallel_for(n, 32768, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) dst[i] = static_cast<Dst>(static_cast<float>(src[i]));
  });
}

// Copies each [rows, cols] matrix of a batch transposed into dst ([cols, rows] each).
template <class T>
void transpose_matrices(const T* src, T* dst, int64_t count, int64_t rows, int64_t cols) {
  const int64_t mat = rows * cols;
  detail::parallel_for(count * rows, std::max<int64_t>(1, 32768 / std::max<int64_t>(cols, 1)),
                       [&](int64_t r0, int64_t r1) {
                         for (int64_t r = r0; r < r1; ++r) {
                           const int64_t bi = r / rows, i = r % rows;
                           const T* s = src + bi * mat + i * cols;
                           T* d = dst + bi * mat + i;
                           for (int64_t j = 0; j < cols; ++j) d[j * rows] = s[j];
                         }
                       });
}

}  // namespace

namespace prims {

void MatMul::eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const {
  const Tensor& ta = in[0];
  const Tensor& tb = in[1];
  Tensor& tc = out[0];
  if (tc.num_elements() == 0) return;
  Geometry g = make_geometry(*this, ta.shape(), tb.shape(), tc.shape());
  const DType dt = ta.dtype();
  dnnl_status_t status = dnnl_success;
  if (dt == float32) {
    status = batched_gemm(g, ta.data<float>(), tb.data<float>(), tc.data<float>());
  } else if (dt == float64) {
    status = batched_gemm(g, ta.data<double>(), tb.data<double>(), tc.data<double>());
  } else if (dt == float16 || dt == bfloat16) {
    Scratch fa(ta.num_elements() * sizeof(float)), fb(tb.num_elements() * sizeof(float));
    Scratch fc(tc.num_elements() * sizeof(float));
    if (dt == float16) {
      convert(ta.data<half_t>(), fa.as<float>(), ta.num_elements());
      convert(tb.data<half_t>(), fb.as<float>(), tb.num_elements());
    } else {
      convert(ta.data<bfloat16_t>(), fa.as<float>(), ta.num_elements());
      convert(tb.data<bfloat16_t>(), fb.as<float>(), tb.num_elements());
    }
    status = batched_gemm(g, fa.as<float>(), fb.as<float>(), fc.as<float>());
    if (dt == float16) convert(fc.as<float>(), tc.data<half_t>(), tc.num_elements());
    else convert(fc.as<float>(), tc.data<bfloat16_t>(), tc.num_elements());
  } else {
    auto run_int = [&]<class T>(T*) {
      // The loop kernel wants plain row-major operands: transpose up front (O(size) work).
      const T* a = ta.data<T>();
      const T* b = tb.data<T>();
      std::optional<Scratch> xa, xb;
      const int ra = ta.rank(), rb = tb.rank();
      if (g.ta) {
        xa.emplace(ta.nbytes());
        transpose_matrices(a, xa->as<T>(), ta.num_elements() / std::max<int64_t>(g.a_mat, 1),
                           ta.shape()[ra - 2], ta.shape()[ra - 1]);
        a = xa->as<T>();
        g.ta = false;
        g.lda = g.k;
      }
      if (g.tb) {
        xb.emplace(tb.nbytes());
        transpose_matrices(b, xb->as<T>(), tb.num_elements() / std::max<int64_t>(g.b_mat, 1),
                           tb.shape()[rb - 2], tb.shape()[rb - 1]);
        b = xb->as<T>();
        g.tb = false;
        g.ldb = g.n;
      }
      status = batched_gemm(g, a, b, tc.data<T>());
    };
    if (dt == int32) run_int(static_cast<int32_t*>(nullptr));
    else if (dt == int64) run_int(static_cast<int64_t*>(nullptr));
    else TF_THROW(InvalidArgumentError, name(), "does not support dtype {}", dtype_name(dt));
  }
  detail::check_dnnl_status(status, name(), [&] {
    return fmt::format("{} product of {} and {}{}{}", dtype_name(dt), ta.shape().to_string(),
                       tb.shape().to_string(), transpose_a ? ", transpose_a" : "",
                       transpose_b ? ", transpose_b" : "");
  });
}

}  // namespace prims

namespace detail {

namespace {
// The operands of a failed GEMM, for check_dnnl_status (built only on failure).
auto gemm_what(const char* type, bool transpose_a, bool transpose_b, int64_t m, int64_t n,
               int64_t k) {
  return [=] {
    return fmt::format("{} GEMM of [{}, {}]{} and [{}, {}]{}", type, m, k,
                       transpose_a ? " (transposed)" : "", k, n,
                       transpose_b ? " (transposed)" : "");
  };
}
}  // namespace

void gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, const float* a,
          int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc) {
  check_dnnl_status(gemm_one(transpose_a, transpose_b, m, n, k, a, lda, b, ldb, c, ldc), "matmul",
                    gemm_what("float32", transpose_a, transpose_b, m, n, k));
}
void gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, const double* a,
          int64_t lda, const double* b, int64_t ldb, double* c, int64_t ldc) {
  check_dnnl_status(gemm_one(transpose_a, transpose_b, m, n, k, a, lda, b, ldb, c, ldc), "matmul",
                    gemm_what("float64", transpose_a, transpose_b, m, n, k));
}
void gemm_accumulate(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k,
                     float alpha, const float* a, int64_t lda, const float* b, int64_t ldb,
                     float beta, float* c, int64_t ldc) {
  check_dnnl_status(
      gemm_one(transpose_a, transpose_b, m, n, k, a, lda, b, ldb, c, ldc, alpha, beta), "matmul",
      gemm_what("float32", transpose_a, transpose_b, m, n, k));
}
void gemm_accumulate(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k,
                     double alpha, const double* a, int64_t lda, const double* b, int64_t ldb,
                     double beta, double* c, int64_t ldc) {
  check_dnnl_status(
      gemm_one(transpose_a, transpose_b, m, n, k, a, lda, b, ldb, c, ldc, alpha, beta), "matmul",
      gemm_what("float64", transpose_a, transpose_b, m, n, k));
}

}  // namespace detail

}  // namespace tapeflow
