// Matrix multiplication (with leading batch dimensions that broadcast), LU-based inverse,
// solve and determinant, and norm (a composite).
//
// CPU backends (chosen by measurement, see bench/bench_matmul.cpp and bench/bench_inverse.cpp):
// float32 GEMM runs on oneDNN's sgemm (AVX-512 kernels) except for tiny products, float64 on
// OpenBLAS's dgemm, float16/bfloat16 convert to float32 around the float32 GEMM, int32/int64 on a
// blocked loop. inv/solve/det: LU with partial pivoting, then getri/getrs; float32 matrices of
// order >= 384 run LAPACK's blocked algorithms with their O(n^3) work on oneDNN's sgemm, the rest
// OpenBLAS's LAPACK.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <vector>

#include "ops/primitive.h"

namespace tapeflow {

Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a = false, bool transpose_b = false);

// TF's `ord` of tf.norm: "euclidean", "fro" (matrix norms only) or a number: 1, 2,
// std::numeric_limits<double>::infinity(), or any p > 0 for vector norms.
class NormOrder {
 public:
  NormOrder(const char* name);         // NOLINT: implicit, as TF's string ord
  NormOrder(const std::string& name);  // NOLINT
  NormOrder(double p) : p_(p) {}       // NOLINT: implicit, as TF's numeric ord
  NormOrder(int p) : p_(p) {}          // NOLINT
  bool is_euclidean() const { return name_ == "euclidean"; }
  bool is_fro() const { return name_ == "fro"; }
  bool is_number() const { return name_.empty(); }
  double p() const { return p_; }
  std::string to_string() const;

 private:
  std::string name_;
  double p_ = 0;
};

// tf.norm (tf.linalg.norm). Without axes: the norm of all elements as one vector (a scalar). One
// axis: vector norms along it; two distinct axes: matrix norms over them ("euclidean"/"fro":
// sqrt of the sum of squares; 1: the largest column sum of |x| (summed over axes[0], max over
// axes[1]); inf: the largest row sum; 2: the spectral norm, the largest singular value (svd)).
// "euclidean", 2 and p-norms need a floating dtype; 1 and inf also take integers (as TF). The
// euclidean norm's gradient at a zero vector is NaN, as TF's (sqrt'(0) * 0).
Tensor norm(const Tensor& tensor, const NormOrder& ord = "euclidean");
Tensor norm(const Tensor& tensor, const NormOrder& ord, int axis, bool keepdims = false);
Tensor norm(const Tensor& tensor, const NormOrder& ord, const std::vector<int>& axes,
            bool keepdims = false);
inline Tensor norm(const Tensor& tensor, const NormOrder& ord, std::initializer_list<int> axes,
                   bool keepdims = false) {
  return norm(tensor, ord, std::vector<int>(axes), keepdims);
}

namespace linalg {
using tapeflow::norm;
Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a = false, bool transpose_b = false);
// Inverse of each square matrix in the last two dimensions; "Input is not invertible." when
// a matrix is singular.
Tensor inv(const Tensor& a);
// x with a @ x = b for each matrix (a: [..., n, n], b: [..., n, k]).
Tensor solve(const Tensor& a, const Tensor& b);
Tensor det(const Tensor& a);
}  // namespace linalg

namespace prims {

// a: [..., M, K], b: [..., K, N] after the optional transposes of their last two dimensions;
// the batch dimensions broadcast. Output [broadcast batch..., M, N].
struct MatMul final : PrimitiveBase<MatMul> {
  bool transpose_a = false;
  bool transpose_b = false;
  MatMul(bool ta, bool tb) : transpose_a(ta), transpose_b(tb) {}
  const char* name() const override { return "matmul"; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override;
  TF_DECLARE_KERNELS
  TF_DECLARE_VJP
  std::string attributes() const override;
};

// [..., n, n] -> [..., n, n]
struct MatrixInverse final : PrimitiveBase<MatrixInverse> {
  const char* name() const override { return "inv"; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override;
  TF_DECLARE_KERNELS
  TF_DECLARE_VJP
};

// a: [..., n, n], b: [..., n, k] (same batch dimensions) -> x: [..., n, k]
struct MatrixSolve final : PrimitiveBase<MatrixSolve> {
  const char* name() const override { return "solve"; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override;
  TF_DECLARE_KERNELS
  TF_DECLARE_VJP
};

// [..., n, n] -> [...]
struct MatrixDeterminant final : PrimitiveBase<MatrixDeterminant> {
  const char* name() const override { return "det"; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override;
  TF_DECLARE_KERNELS
  TF_DECLARE_VJP
};

}  // namespace prims

namespace detail {

// Which GEMM libraries the CPU kernels use, their versions, ISA and OpenBLAS's core name
// (for benchmark reports).
std::string gemm_backend_info();

// The largest float32 product (M*N*K) that matmul and gemm run on OpenBLAS rather than oneDNN,
// for this CPU's OpenBLAS kernels and the current thread count (ops/cpu/matmul.cpp).
double sgemm_openblas_max_mnk();

// Raises a failed oneDNN call's status (a dnnl_status_t; dnnl_success returns): a
// ResourceExhaustedError when oneDNN ran out of memory (dnnl_out_of_memory: the scratch space
// its sgemm packs the operands into could not be allocated), an InternalError naming the status
// otherwise. `op` names the op and `what` its operands' shapes: a string, or a callable returning
// one (built only on failure: the check runs at every product). Call it outside OpenMP regions.
[[noreturn]] void throw_dnnl_status(int status, const char* op, const std::string& what);
template <class What>
void check_dnnl_status(int status, const char* op, const What& what) {
  if (status == 0) [[likely]]  // dnnl_success
    return;
  if constexpr (std::is_invocable_v<const What&>)
    throw_dnnl_status(status, op, what());
  else
    throw_dnnl_status(status, op, std::string(what));
}

// Row-major host GEMM for other CPU kernels: C[M, N] = op(A) op(B), op = transpose when the flag
// is set (A is M x K, or K x M when transposed, with leading dimension lda; likewise B).
// C is overwritten. Uses several threads unless called inside a parallel region. A failed
// oneDNN call raises check_dnnl_status's error (so not inside a parallel region).
void gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, const float* a,
          int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc);
void gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, const double* a,
          int64_t lda, const double* b, int64_t ldb, double* c, int64_t ldc);
// C[M, N] = alpha op(A) op(B) + beta C, the same way (traced variable updates fused into a
// product).
void gemm_accumulate(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k,
                     float alpha, const float* a, int64_t lda, const float* b, int64_t ldb,
                     float beta, float* c, int64_t ldc);
void gemm_accumulate(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k,
                     double alpha, const double* a, int64_t lda, const double* b, int64_t ldb,
                     double beta, double* c, int64_t ldc);
// The same on a GPU (cuBLAS), for 2-D float32 or float64 tensors on one device, c of the
// product's shape: c = alpha op(a) op(b) + beta c with alpha = sign * scale and beta = decay,
// where scale and decay are 0-d float32/float64 tensors on the device, or undefined for 1.
// The scalars are read on the device (cuBLAS's device pointer mode): no host synchronisation.
// Products take TF32 when enabled, as matmul's. Builds without CUDA throw UnimplementedError.
void gemm_accumulate_device(bool transpose_a, bool transpose_b, const Tensor& a, const Tensor& b,
                            double sign, const Tensor& scale, const Tensor& decay, Tensor& c);
// w (out, in) applied along axis `axis` of x (of length in), which becomes out long: a broadcast
// matmul with that axis swapped next to last and back (a resize's weights, adaptive pooling's
// bins).
Tensor matmul_along(const Tensor& w, const Tensor& x, int axis);

}  // namespace detail

}  // namespace tapeflow
