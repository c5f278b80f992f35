// CUDA kernels of the linalg family (host code; the small kernels are in linalg_kernels.cu).
//
// MatMul: cuBLAS. Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T, so every
// call passes B first and A second with the sizes (n, m, k) and each operand's row length as
// its leading dimension: no copies, no transposes. float32 computes in CUBLAS_COMPUTE_32F
// (CUBLAS_COMPUTE_32F_FAST_TF32 when config::experimental::enable_tensor_float_32_execution is
// on), float16/bfloat16 on tensor cores with float32 accumulation, float64 in
// CUBLAS_COMPUTE_64F. Batches: one GEMM for a single matrix or when one shared right operand
// folds a stack of left operands into one tall product (as the CPU does); a strided-batched GEMM
// when each operand is either one matrix per batch or one shared matrix (stride 0); otherwise
// (batch dimensions broadcast against each other, e.g. (4, 1) with (1, 3)) a pointer-array
// batched GEMM whose pointers a small kernel computes. int32/int64 (no cuBLAS GEMM for them
// with TF's wrapping semantics) run a tiled kernel.
//
// inv, solve, det: LU with partial pivoting as ops/cpu/lapack.cpp does, with the same layout
// trick: a row-major n x n buffer is the column-major A^T, so
//   inv:   getrf of A^T, then getrs against the identity gives inv(A^T) in column-major order,
//          which is inv(A) in row-major order (TF's GPU kernel also solves against the identity);
//   solve: getrf of A^T, then getrs with trans = T; b and x are transposed to and from
//          column-major around it (nothing to do when k == 1);
//   det:   the product of U's diagonal and the pivot sign, in a small kernel, exactly as the CPU.
// Batches of small matrices (n <= kBatchedMaxN) use cuBLAS's batched getrf/getrs (one launch
// for the whole batch), as does one small matrix while a CUDA graph is captured (cuBLAS is
// documented as capturable); bigger matrices run cuSOLVER's getrf/getrs one matrix after the
// other, with one workspace. float16/bfloat16 are converted to float32 around the float32
// path, as on the CPU. A singular matrix (an exact zero pivot, getrf's info > 0) raises the
// CPU's error, which needs the infos on the host: the only synchronisation of this family.
#include "ops/linalg.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusolverDn.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <mutex>
#include <vector>

#include "core/check.h"
#include "core/cuda/context.h"
#include "core/device.h"
#include "ops/cuda/handles.h"
#include "ops/cuda/linalg_kernels.h"
#include "ops/helpers.h"

namespace tapeflow {

namespace {

namespace cu = detail::cuda;
namespace lk = detail::cuda_linalg;

// Matrices up to this order in batches of two or more go through cuBLAS's batched LU.
constexpr int64_t kBatchedMaxN = 32;

// The CUDA libraries take 32-bit sizes.
int checked_int(int64_t v, const char* op) {
  if (v > INT_MAX)
    TF_THROW(UnimplementedError, op,
             "a size of {} exceeds the 32-bit sizes of the CUDA libraries (cuBLAS, cuSOLVER)", v);
  return static_cast<int>(v);
}

TensorShape batch_shape(const TensorShape& s) {
  TensorShape b;
  for (int i = 0; i + 2 < s.rank(); ++i) b.push_back(s[i]);
  return b;
}

int64_t count_of(const TensorShape& s) {
  int64_t c = 1;
  for (int i = 0; i < s.rank(); ++i) c *= s[i];
  return c;
}

void copy_device(Device dev, void* dst, const void* src, size_t nbytes) {
  if (nbytes == 0) return;
  TF_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToDevice, cu::stream(dev)));
}

// ---- MatMul ----

struct GemmTypes {
  cudaDataType_t data;
  cublasComputeType_t compute;
  bool f64;  // alpha and beta are doubles (CUBLAS_COMPUTE_64F), else floats
};

GemmTypes gemm_types(DType dt) {
  if (dt == float64) return {CUDA_R_64F, CUBLAS_COMPUTE_64F, true};
  if (dt == float16) return {CUDA_R_16F, CUBLAS_COMPUTE_32F, false};
  if (dt == bfloat16) return {CUDA_R_16BF, CUBLAS_COMPUTE_32F, false};
  const bool tf32 = config::experimental::tensor_float_32_execution_enabled();
  return {CUDA_R_32F, tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, false};
}

// One row-major product description, in the CPU's terms: A stored with row length lda (m x k,
// or k x m when ta), B likewise (k x n, or n x k when tb), C m x n contiguous.
struct RowGemm {
  cublasHandle_t handle;
  GemmTypes types;
  cublasOperation_t op_a, op_b;
  int m, n, k, lda, ldb;
  const void* one;
  const void* zero;
};

// Single GEMM: column-major C^T (n x m, ldc n) = op(B)^T (n x k) op(A)^T (k x m).
void gemm(const RowGemm& g, int m, const void* a, const void* b, void* c) {
  TF_CUBLAS_CHECK(cublasGemmEx(g.handle, g.op_b, g.op_a, g.n, m, g.k, g.one, b, g.types.data, g.ldb,
                               a, g.types.data, g.lda, g.zero, c, g.types.data, g.n,
                               g.types.compute, CUBLAS_GEMM_DEFAULT));
}

void gemm_strided(const RowGemm& g, const char* a, int64_t stride_a, const char* b,
                  int64_t stride_b, char* c, int64_t batches, size_t elem) {
  const int64_t stride_c = static_cast<int64_t>(g.m) * g.n;
  for (int64_t t0 = 0; t0 < batches; t0 += INT_MAX) {
    const int count = static_cast<int>(std::min<int64_t>(INT_MAX, batches - t0));
    TF_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
        g.handle, g.op_b, g.op_a, g.n, g.m, g.k, g.one, b + t0 * stride_b * elem, g.types.data,
        g.ldb, stride_b, a + t0 * stride_a * elem, g.types.data, g.lda, stride_a, g.zero,
        c + t0 * stride_c * elem, g.types.data, g.n, stride_c, count, g.types.compute,
        CUBLAS_GEMM_DEFAULT));
  }
}

void gemm_pointer_arrays(const RowGemm& g, Device dev, const void* a, const void* b, void* c,
                         const lk::BatchLayout& layout, int64_t batches, size_t elem) {
  // Three arrays of `batches` device pointers.
  Tensor ptrs = detail::empty(TensorShape{3 * batches}, int64, dev);
  const void** pa = static_cast<const void**>(ptrs.raw_data());
  const void** pb = pa + batches;
  void** pc = static_cast<void**>(ptrs.raw_data()) + 2 * batches;
  lk::gemm_pointers(dev, elem, a, b, c, layout, static_cast<int64_t>(g.m) * g.n, batches, pa, pb,
                    pc);
  for (int64_t t0 = 0; t0 < batches; t0 += INT_MAX) {
    const int count = static_cast<int>(std::min<int64_t>(INT_MAX, batches - t0));
    TF_CUBLAS_CHECK(cublasGemmBatchedEx(g.handle, g.op_b, g.op_a, g.n, g.m, g.k, g.one, pb + t0,
                                        g.types.data, g.ldb, pa + t0, g.types.data, g.lda, g.zero,
                                        pc + t0, g.types.data, g.n, count, g.types.compute,
                                        CUBLAS_GEMM_DEFAULT));
  }
}

// ---- LU factorisations ----

template <class T>
struct LuCalls;

template <>
struct LuCalls<float> {
  static void getrf_buffer_size(cusolverDnHandle_t h, int n, float* a, int* lwork) {
    TF_CUSOLVER_CHECK(cusolverDnSgetrf_bufferSize(h, n, n, a, n, lwork));
  }
  static void getrf(cusolverDnHandle_t h, int n, float* a, float* work, int* ipiv, int* info) {
    TF_CUSOLVER_CHECK(cusolverDnSgetrf(h, n, n, a, n, work, ipiv, info));
  }
  static void getrs(cusolverDnHandle_t h, cublasOperation_t op, int n, int nrhs, const float* a,
                    const int* ipiv, float* b, int* info) {
    TF_CUSOLVER_CHECK(cusolverDnSgetrs(h, op, n, nrhs, a, n, ipiv, b, n, info));
  }
  static void getrf_batched(cublasHandle_t h, int n, float* const* a, int* ipiv, int* info,
                            int batches) {
    TF_CUBLAS_CHECK(cublasSgetrfBatched(h, n, a, n, ipiv, info, batches));
  }
  static void getrs_batched(cublasHandle_t h, cublasOperation_t op, int n, int nrhs,
                            const float* const* a, const int* ipiv, float* const* b, int* info,
                            int batches) {
    TF_CUBLAS_CHECK(cublasSgetrsBatched(h, op, n, nrhs, a, n, ipiv, b, n, info, batches));
  }
};

template <>
struct LuCalls<double> {
  static void getrf_buffer_size(cusolverDnHandle_t h, int n, double* a, int* lwork) {
    TF_CUSOLVER_CHECK(cusolverDnDgetrf_bufferSize(h, n, n, a, n, lwork));
  }
  static void getrf(cusolverDnHandle_t h, int n, double* a, double* work, int* ipiv, int* info) {
    TF_CUSOLVER_CHECK(cusolverDnDgetrf(h, n, n, a, n, work, ipiv, info));
  }
  static void getrs(cusolverDnHandle_t h, cublasOperation_t op, int n, int nrhs, const double* a,
                    const int* ipiv, double* b, int* info) {
    TF_CUSOLVER_CHECK(cusolverDnDgetrs(h, op, n, nrhs, a, n, ipiv, b, n, info));
  }
  static void getrf_batched(cublasHandle_t h, int n, double* const* a, int* ipiv, int* info,
                            int batches) {
    TF_CUBLAS_CHECK(cublasDgetrfBatched(h, n, a, n, ipiv, info, batches));
  }
  static void getrs_batched(cublasHandle_t h, cublasOperation_t op, int n, int nrhs,
                            const double* const* a, const int* ipiv, double* const* b, int* info,
                            int batches) {
    TF_CUBLAS_CHECK(cublasDgetrsBatched(h, op, n, nrhs, a, n, ipiv, b, n, info, batches));
  }
};

// Whether the device's stream is being captured into a CUDA graph (jit_compile's replay).
bool capturing(Device dev) {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  TF_CUDA_CHECK(cudaStreamIsCapturing(cu::stream(dev), &capture));
  return capture != cudaStreamCaptureStatusNone;
}

// LU factorisations, in place, of `batches` column-major n x n matrices stored one after the
// other at `lu` (n >= 1), and solves with them. Temporaries live as long as this object; the
// work it queues is stream-ordered, so they may be freed as soon as it is queued.
template <class T>
class LuBatch {
 public:
  LuBatch(Device dev, T* lu, int64_t batches, int64_t n, const char* op)
      : dev_(dev),
        op_(op),
        lu_(lu),
        batches_(batches),
        n_(checked_int(n, op)),
        batched_(n <= kBatchedMaxN && batches <= INT_MAX && (batches > 1 || capturing(dev))) {
    ipiv_ = detail::empty(TensorShape{batches * n}, int32, dev);
    // One info per matrix, plus one for getrs, whose info reports bad arguments only and must
    // not overwrite getrf's.
    info_ = detail::empty(TensorShape{batches + 1}, int32, dev);
  }

  const int* ipiv() const { return ipiv_.data<int>(); }
  const int* info() const { return info_.data<int>(); }

  // getrf on every matrix; info()[t] > 0 when matrix t has an exact zero pivot.
  void factor() {
    const int64_t mat = static_cast<int64_t>(n_) * n_;
    if (batched_) {
      lu_ptrs_ = pointers(lu_, mat);
      LuCalls<T>::getrf_batched(cu::cublas(dev_), n_, lu_ptrs_.data<T*>(), ipiv_.data<int>(),
                                info_.data<int>(), static_cast<int>(batches_));
      return;
    }
    std::lock_guard lock(cu::cusolver_mutex());
    cusolverDnHandle_t h = cu::cusolver(dev_);
    int lwork = 0;
    LuCalls<T>::getrf_buffer_size(h, n_, lu_, &lwork);
    const Tensor work = cu::workspace(dev_, sizeof(T) * static_cast<size_t>(std::max(lwork, 1)));
    T* w = static_cast<T*>(work.raw_data());
    for (int64_t t = 0; t < batches_; ++t)
      LuCalls<T>::getrf(h, n_, lu_ + t * mat, w, ipiv_.data<int>() + t * n_, info_.data<int>() + t);
  }

  // Solves op(A_t) X_t = B_t in place for every matrix t after factor(); x holds `batches`
  // column-major n x nrhs matrices one after the other.
  void solve(cublasOperation_t op, T* x, int64_t nrhs) {
    const int k = checked_int(nrhs, op_);
    const int64_t mat = static_cast<int64_t>(n_) * n_, xmat = static_cast<int64_t>(n_) * k;
    if (batched_) {
      const Tensor x_ptrs = pointers(x, xmat);
      int arg_info = 0;  // cuBLAS reports bad arguments here (host memory)
      LuCalls<T>::getrs_batched(cu::cublas(dev_), op, n_, k, lu_ptrs_.data<T*>(), ipiv_.data<int>(),
                                x_ptrs.data<T*>(), &arg_info, static_cast<int>(batches_));
      TF_ASSERT(arg_info == 0);
      return;
    }
    std::lock_guard lock(cu::cusolver_mutex());
    cusolverDnHandle_t h = cu::cusolver(dev_);
    for (int64_t t = 0; t < batches_; ++t)
      LuCalls<T>::getrs(h, op, n_, k, lu_ + t * mat, ipiv_.data<int>() + t * n_, x + t * xmat,
                        info_.data<int>() + batches_);
  }

  // Raises InvalidArgumentError "[op] message" when some matrix had a zero or NaN pivot (TF's
  // test |u_ii| > 0; getrf's info reports the exact zeros, a kernel adds the NaNs).
  void require_invertible(const char* message) const {
    // The infos live on the device: reading them waits for the work queued so far (copy_bytes
    // synchronises the stream). This is the one host synchronisation of inv and solve, needed
    // to raise the CPU's error. During CUDA-graph capture nothing may synchronise and nothing is
    // computed yet, so the check is skipped there.
    if (capturing(dev_)) return;
    lk::flag_nan_pivots(dev_, dtype_of<T>(), lu_, info_.data<int>(), batches_, n_);
    std::vector<int> infos(static_cast<size_t>(batches_));
    detail::copy_bytes(infos.data(), Device{}, info_.raw_data(), dev_, infos.size() * sizeof(int));
    const bool singular = std::any_of(infos.begin(), infos.end(), [](int i) { return i > 0; });
    TF_CHECK_ARG(!singular, op_, "{}", message);
  }

 private:
  // A device array of `batches` pointers base + t * stride (elements).
  Tensor pointers(T* base, int64_t stride) const {
    Tensor p = detail::empty(TensorShape{batches_}, int64, dev_);
    lk::strided_pointers(dev_, base, stride * static_cast<int64_t>(sizeof(T)), batches_,
                         static_cast<void**>(p.raw_data()));
    return p;
  }

  Device dev_;
  const char* op_;
  T* lu_;
  int64_t batches_;
  int n_;
  bool batched_;
  Tensor ipiv_, info_, lu_ptrs_;
};

// Batch count and order n of a [..., n, n] tensor.
void batch_and_order(const TensorShape& s, int64_t* batches, int64_t* n) {
  *n = s[s.rank() - 1];
  *batches = count_of(batch_shape(s));
}

DType lu_dtype(DType dt) {
  return dt == float64 ? float64 : float32;
}
bool is_half(DType dt) {
  return dt == float16 || dt == bfloat16;
}

// A float32/float64 copy of t on its device (float16/bfloat16 are converted), for getrf to
// factor in place.
Tensor lu_copy(const Tensor& t, Device dev) {
  Tensor c = detail::empty(t.shape(), lu_dtype(t.dtype()), dev);
  if (is_half(t.dtype()))
    lk::to_float(dev, t.dtype(), t.raw_data(), c.data<float>(), t.num_elements());
  else
    copy_device(dev, c.raw_data(), t.raw_data(), t.nbytes());
  return c;
}

// The input converted to float32 for the half types, else the input itself.
Tensor compute_input(const Tensor& t, Device dev) {
  if (!is_half(t.dtype())) return t;
  Tensor c = detail::empty(t.shape(), float32, dev);
  lk::to_float(dev, t.dtype(), t.raw_data(), c.data<float>(), t.num_elements());
  return c;
}

// Where a float32/float64 result goes: the output itself, or a float32 temporary for the half
// types (finish_output converts it into the output).
Tensor compute_output(const Tensor& out, Device dev) {
  if (!is_half(out.dtype())) return out;
  return detail::empty(out.shape(), float32, dev);
}
void finish_output(const Tensor& result, Tensor& out, Device dev) {
  if (is_half(out.dtype()))
    lk::from_float(dev, out.dtype(), result.data<float>(), out.raw_data(), out.num_elements());
}

template <class T>
void inverse(Device dev, Tensor& lu, Tensor& x, int64_t batches, int64_t n, const char* op) {
  LuBatch<T> f(dev, lu.data<T>(), batches, n, op);
  f.factor();
  lk::fill_identity(dev, dtype_of<T>(), x.raw_data(), batches, n);
  f.solve(CUBLAS_OP_N, x.data<T>(), n);
  f.require_invertible("Input is not invertible.");
}

template <class T>
void solve(Device dev, Tensor& lu, const Tensor& b, Tensor& x, int64_t batches, int64_t n,
           int64_t k, const char* op) {
  LuBatch<T> f(dev, lu.data<T>(), batches, n, op);
  f.factor();
  if (k == 1) {  // a column is the same in both orders
    copy_device(dev, x.raw_data(), b.raw_data(), static_cast<size_t>(batches * n) * sizeof(T));
    f.solve(CUBLAS_OP_T, x.data<T>(), 1);
  } else {
    Tensor cm = detail::empty(TensorShape{batches * n * k}, dtype_of<T>(), dev);
    lk::transpose(dev, sizeof(T), b.raw_data(), cm.raw_data(), batches, n, k);
    f.solve(CUBLAS_OP_T, cm.data<T>(), k);
    lk::transpose(dev, sizeof(T), cm.raw_data(), x.raw_data(), batches, k, n);
  }
  f.require_invertible("Input matrix is not invertible.");
}

template <class T>
void determinant(Device dev, Tensor& lu, Tensor& d, int64_t batches, int64_t n, const char* op) {
  Tensor has_nan = detail::empty(TensorShape{batches}, int32, dev);
  lk::flag_nan_matrices(dev, dtype_of<T>(), lu.raw_data(), has_nan.data<int>(), batches, n);
  LuBatch<T> f(dev, lu.data<T>(), batches, n, op);
  f.factor();
  lk::determinant(dev, dtype_of<T>(), lu.raw_data(), f.ipiv(), f.info(), has_nan.data<int>(),
                  d.raw_data(), batches, n);
}

}  // namespace

namespace prims {

void MatMul::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  const Tensor& ta = in[0];
  const Tensor& tb = in[1];
  Tensor& tc = out[0];
  if (tc.num_elements() == 0) return;
  const Device dev = tc.placement();
  const TensorShape& sa = ta.shape();
  const TensorShape& sb = tb.shape();
  const TensorShape& so = tc.shape();
  const int ra = sa.rank(), rb = sb.rank(), ro = so.rank();
  const int64_t m = so[ro - 2], n = so[ro - 1];
  const int64_t k = transpose_a ? sa[ra - 2] : sa[ra - 1];
  const int64_t lda = sa[ra - 1], ldb = sb[rb - 1];
  const int64_t a_mat = sa[ra - 2] * sa[ra - 1], b_mat = sb[rb - 2] * sb[rb - 1];
  if (k == 0) {  // empty sums
    TF_CUDA_CHECK(cudaMemsetAsync(tc.raw_data(), 0, tc.nbytes(), cu::stream(dev)));
    return;
  }

  // Batch dimensions: the output's, and each operand's offsets (0 where broadcast).
  const TensorShape bo = batch_shape(so);
  const auto as = detail::broadcast_strides(batch_shape(sa), bo);
  const auto bs = detail::broadcast_strides(batch_shape(sb), bo);
  lk::BatchLayout layout;
  layout.rank = bo.rank();
  int64_t batches = 1;
  bool a_shared = true, b_shared = true;  // one matrix for every batch
  for (int i = 0; i < bo.rank(); ++i) {
    layout.size[i] = bo[i];
    layout.a_stride[i] = as[i] * a_mat;
    layout.b_stride[i] = bs[i] * b_mat;
    batches *= bo[i];
    if (bo[i] != 1) {
      a_shared = a_shared && as[i] == 0;
      b_shared = b_shared && bs[i] == 0;
    }
  }
  // One matrix per output batch, in row-major batch order.
  const bool a_full = count_of(batch_shape(sa)) == batches;
  const bool b_full = count_of(batch_shape(sb)) == batches;

  const DType dt = ta.dtype();
  if (dt == int32 || dt == int64) {
    lk::IntGemm g;
    g.ta = transpose_a;
    g.tb = transpose_b;
    g.m = m;
    g.n = n;
    g.k = k;
    g.lda = lda;
    g.ldb = ldb;
    g.batches = batches;
    g.layout = layout;
    lk::int_matmul(dev, dt, ta.raw_data(), tb.raw_data(), tc.raw_data(), g);
    return;
  }

  const float f_one = 1.0f, f_zero = 0.0f;
  const double d_one = 1.0, d_zero = 0.0;
  RowGemm g;
  g.handle = cu::cublas(dev);
  g.types = gemm_types(dt);
  g.op_a = transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  g.op_b = transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  g.m = checked_int(m, name());
  g.n = checked_int(n, name());
  g.k = checked_int(k, name());
  g.lda = checked_int(lda, name());
  g.ldb = checked_int(ldb, name());
  g.one = g.types.f64 ? static_cast<const void*>(&d_one) : static_cast<const void*>(&f_one);
  g.zero = g.types.f64 ? static_cast<const void*>(&d_zero) : static_cast<const void*>(&f_zero);
  const size_t elem = dtype_size(dt);
  const char* a = static_cast<const char*>(ta.raw_data());
  const char* b = static_cast<const char*>(tb.raw_data());
  char* c = static_cast<char*>(tc.raw_data());

  if (batches == 1) {
    gemm(g, g.m, a, b, c);
  } else if (b_shared && a_full && !transpose_a && batches * m <= INT_MAX) {
    // A stack of left operands times one shared right operand: one tall GEMM.
    gemm(g, static_cast<int>(batches * m), a, b, c);
  } else if ((a_full || a_shared) && (b_full || b_shared)) {
    gemm_strided(g, a, a_full ? a_mat : 0, b, b_full ? b_mat : 0, c, batches, elem);
  } else {
    gemm_pointer_arrays(g, dev, a, b, c, layout, batches, elem);
  }
}

}  // namespace prims

namespace detail {

void gemm_accumulate_device(bool transpose_a, bool transpose_b, const Tensor& a, const Tensor& b,
                            double sign, const Tensor& scale, const Tensor& decay, Tensor& c) {
  constexpr const char* op = "variable_matmul_update";
  const Device dev = c.placement();
  const DType dt = c.dtype();
  auto on_device = [&](const Tensor& t) { return !t.defined() || t.placement() == dev; };
  auto scalar = [&](const Tensor& t) {
    return !t.defined() ||
           (t.shape().rank() == 0 && (t.dtype() == float32 || t.dtype() == float64));
  };
  TF_CHECK_T(InternalError,
             dev.is_gpu() && (dt == float32 || dt == float64) && a.dtype() == dt &&
                 b.dtype() == dt && a.shape().rank() == 2 && b.shape().rank() == 2 &&
                 c.shape().rank() == 2 && on_device(a) && on_device(b) && on_device(scale) &&
                 on_device(decay) && scalar(scale) && scalar(decay),
             op,
             "expects 2-D float32/float64 operands and 0-d scalars on one GPU, got {} {} on {}, "
             "{} {} on {} into {} {} on {}",
             a.shape().to_string(), dtype_name(a.dtype()), a.placement().to_string(),
             b.shape().to_string(), dtype_name(b.dtype()), b.placement().to_string(),
             c.shape().to_string(), dtype_name(dt), dev.to_string());
  const int64_t m = c.shape()[0], n = c.shape()[1];
  const int64_t k = transpose_a ? a.shape()[0] : a.shape()[1];
  TF_CHECK_T(InternalError,
             (transpose_a ? a.shape()[1] : a.shape()[0]) == m &&
                 (transpose_b ? b.shape()[1] : b.shape()[0]) == k &&
                 (transpose_b ? b.shape()[0] : b.shape()[1]) == n,
             op, "the product of {} and {} (transpose_a={}, transpose_b={}) is not {}",
             a.shape().to_string(), b.shape().to_string(), transpose_a, transpose_b,
             c.shape().to_string());
  if (m == 0 || n == 0) return;
  const GemmTypes types = gemm_types(dt);
  const bool scalars_on_device = scale.defined() || decay.defined();
  // alpha and beta: host constants (+-1, 1), or two device scalars computed from the tensors
  // and passed through the device's handle in device pointer mode.
  const float f_alpha = static_cast<float>(sign), f_one = 1.0f;
  const double d_alpha = sign, d_one = 1.0;
  const void* alpha = types.f64 ? static_cast<const void*>(&d_alpha) : &f_alpha;
  const void* beta = types.f64 ? static_cast<const void*>(&d_one) : &f_one;
  Tensor scalars;
  if (scalars_on_device) {
    scalars = empty(TensorShape{2}, dt, dev);
    lk::gemm_scalars(dev, dt, sign, scale.defined() ? scale.raw_data() : nullptr,
                     scale.defined() ? scale.dtype() : dt,
                     decay.defined() ? decay.raw_data() : nullptr,
                     decay.defined() ? decay.dtype() : dt, scalars.raw_data());
    alpha = scalars.raw_data();
    beta = static_cast<const char*>(scalars.raw_data()) + dtype_size(dt);
  }
  cublasHandle_t h = scalars_on_device ? cu::cublas_device_scalars(dev) : cu::cublas(dev);
  if (k == 0) {
    // An empty product: c = beta c (nothing to do for beta = 1).
    if (decay.defined())
      TF_CUBLAS_CHECK(cublasScalEx(h, checked_int(m * n, op), beta, types.data, c.raw_data(),
                                   types.data, 1, types.data));
    return;
  }
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T (see MatMul above).
  TF_CUBLAS_CHECK(cublasGemmEx(h, transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                               transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N, checked_int(n, op),
                               checked_int(m, op), checked_int(k, op), alpha, b.raw_data(),
                               types.data, checked_int(b.shape()[1], op), a.raw_data(), types.data,
                               checked_int(a.shape()[1], op), beta, c.raw_data(), types.data,
                               checked_int(n, op), types.compute, CUBLAS_GEMM_DEFAULT));
}

}  // namespace detail

namespace prims {

void MatrixInverse::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  if (out[0].num_elements() == 0) return;
  int64_t batches, n;
  batch_and_order(in[0].shape(), &batches, &n);
  const Device dev = out[0].placement();
  Tensor lu = lu_copy(in[0], dev);
  Tensor x = compute_output(out[0], dev);
  if (lu.dtype() == float64)
    inverse<double>(dev, lu, x, batches, n, name());
  else
    inverse<float>(dev, lu, x, batches, n, name());
  finish_output(x, out[0], dev);
}

void MatrixSolve::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  if (out[0].num_elements() == 0) return;  // n == 0 or k == 0: nothing to solve (as the CPU)
  int64_t batches, n;
  batch_and_order(in[0].shape(), &batches, &n);
  const int64_t k = in[1].shape()[in[1].rank() - 1];
  const Device dev = out[0].placement();
  Tensor lu = lu_copy(in[0], dev);
  const Tensor b = compute_input(in[1], dev);
  Tensor x = compute_output(out[0], dev);
  if (lu.dtype() == float64)
    solve<double>(dev, lu, b, x, batches, n, k, name());
  else
    solve<float>(dev, lu, b, x, batches, n, k, name());
  finish_output(x, out[0], dev);
}

void MatrixDeterminant::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  if (out[0].num_elements() == 0) return;
  int64_t batches, n;
  batch_and_order(in[0].shape(), &batches, &n);
  const Device dev = out[0].placement();
  Tensor d = compute_output(out[0], dev);
  const DType dt = lu_dtype(in[0].dtype());
  if (n == 0) {  // the empty product
    lk::determinant(dev, dt, nullptr, nullptr, nullptr, nullptr, d.raw_data(), batches, 0);
  } else {
    Tensor lu = lu_copy(in[0], dev);
    if (dt == float64)
      determinant<double>(dev, lu, d, batches, n, name());
    else
      determinant<float>(dev, lu, d, batches, n, name());
  }
  finish_output(d, out[0], dev);
}

}  // namespace prims

}  // namespace tapeflow
