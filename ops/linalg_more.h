// The rest of tf.linalg: structure ops (band_part, diag, diag_part, set_diag, trace,
// matrix_transpose, matvec, tensordot, cross, l2_normalize), composites of differentiable ops
// so every device and gradient come with them; and triangular_solve, slogdet and lu as
// primitives (CPU: OpenBLAS's BLAS/LAPACK; CUDA: cuBLAS/cuSOLVER) with lu_solve,
// lu_matrix_inverse and lu_reconstruct built on them. TF spelling: tf::linalg::X.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ops/primitive.h"

namespace tapeflow {

namespace linalg {

// Keeps the band of each matrix in the last two dimensions: element (i, j) survives when
// (num_lower < 0 || i - j <= num_lower) && (num_upper < 0 || j - i <= num_upper), the rest is 0.
Tensor band_part(const Tensor& input, int64_t num_lower, int64_t num_upper);
// v [..., n] -> [..., n + |k|, n + |k|] with v on diagonal k (k > 0 above the main diagonal).
Tensor diag(const Tensor& diagonal, int64_t k = 0);
// Diagonal k of each matrix of [..., M, N] (-M < k < N): [..., min(M + min(k, 0), N - max(k, 0))].
Tensor diag_part(const Tensor& input, int64_t k = 0);
// input with diagonal k replaced by `diagonal` (shape input.shape[:-2] + [diag_part's length]).
Tensor set_diag(const Tensor& input, const Tensor& diagonal, int64_t k = 0);
// Sum of the main diagonal of each matrix: [..., M, N] -> [...].
Tensor trace(const Tensor& x);
// Swaps the last two dimensions; adjoint is the same for tapeflow's real dtypes.
Tensor matrix_transpose(const Tensor& a);
Tensor adjoint(const Tensor& a);
// op(a) [..., M, N] times the vectors x [..., N] -> [..., M] (batch dimensions broadcast).
Tensor matvec(const Tensor& a, const Tensor& x, bool transpose_a = false);
// Contracts the last `axes` axes of a with the first `axes` axes of b.
Tensor tensordot(const Tensor& a, const Tensor& b, int axes);
// Contracts a's axes a_axes[i] with b's b_axes[i]; the result has a's free axes, then b's.
Tensor tensordot(const Tensor& a, const Tensor& b, const std::vector<int>& a_axes,
                 const std::vector<int>& b_axes);
// Cross products of 3-vectors along the last axis (a and b of one shape, last dimension 3).
Tensor cross(const Tensor& a, const Tensor& b);
// x / sqrt(max(sum(x^2, axis), epsilon)), as tf.math.l2_normalize (floating dtypes).
Tensor l2_normalize(const Tensor& x, int axis = -1, double epsilon = 1e-12);
Tensor l2_normalize(const Tensor& x, const std::vector<int>& axes, double epsilon = 1e-12);

// Matrix exponential of each square matrix (float32/float64) by scaling and squaring with a
// Pade approximant (Higham 2005): order 13 for float64, 7 for float32, after scaling by 2^-s so
// that the 1-norm is below the order's bound, then s squarings. TF picks lower orders for
// small norms; the results agree to rounding. The number of squarings depends on the values:
// inside tf::function (symbolic inputs) a tf::while_loop (ops/traced_loop.h) counts them when
// the graph runs.
Tensor expm(const Tensor& input);

// x with op(matrix) x = rhs, op = transpose when adjoint; only the lower (or upper) triangle of
// matrix is read. matrix [..., M, M], rhs [..., M, K]; batch dimensions broadcast (TF 2.x).
// float32/float64 (TF has no CPU kernel for the half types). A zero on the diagonal gives
// infinities or NaNs, as TF's, not an error.
Tensor triangular_solve(const Tensor& matrix, const Tensor& rhs, bool lower = true,
                        bool adjoint = false);
// {sign, log|det|} of each square matrix (float32/float64): a singular matrix gives {0, -inf}.
// The gradient flows through log|det| (g inv(a)^T); sign's is zero.
std::pair<Tensor, Tensor> slogdet(const Tensor& input);
// LU with partial pivoting: {lu, p} where lu packs unit-lower L (below the diagonal) and U, and
// input[..., p, :] = L U. p is int32 or int64 (output_idx_type). A singular input (an exact
// zero or NaN pivot) raises "Input is not invertible.", as TF's.
std::pair<Tensor, Tensor> lu(const Tensor& input, DType output_idx_type = int32);
// x with input x = rhs, from lu's factors (batch dimensions broadcast).
Tensor lu_solve(const Tensor& lower_upper, const Tensor& perm, const Tensor& rhs);
Tensor lu_matrix_inverse(const Tensor& lower_upper, const Tensor& perm);
// The matrix lu(a) factored: P^T L U.
Tensor lu_reconstruct(const Tensor& lower_upper, const Tensor& perm);

// x with A x = rhs for tridiagonal A (float32/float64). diagonals_format "compact": diagonals
// [..., 3, M] (superdiagonal, its last entry ignored; main diagonal; subdiagonal, its first
// entry ignored); "matrix": diagonals is A itself [..., M, M] (only its three diagonals are
// read). rhs [..., M, K] with the same batch dimensions, or [..., M] (one vector per system);
// transpose_rhs: rhs is [..., K, M]. Gaussian elimination with partial pivoting (or none), O(M K)
// per system; a singular system gives infinities or NaNs, as TF's.
Tensor tridiagonal_solve(const Tensor& diagonals, const Tensor& rhs,
                         const std::string& diagonals_format = "compact",
                         bool transpose_rhs = false, bool partial_pivoting = true);
// diagonals_format "sequence": {superdiagonal, main diagonal, subdiagonal}, each [..., M].
Tensor tridiagonal_solve(const std::vector<Tensor>& diagonals, const Tensor& rhs,
                         bool transpose_rhs = false, bool partial_pivoting = true);
// A rhs for tridiagonal A (the product, not the solve), as TF's tf.linalg.tridiagonal_matmul:
// row i is super[i] rhs[i + 1] + main[i] rhs[i] + sub[i] rhs[i - 1]. diagonals_format
// "compact" ([..., 3, M], as tridiagonal_solve's), "matrix" ([..., M, M]: only its three
// diagonals are read) or "sequence" (the std::vector form); rhs [..., M, N] with the same batch
// dimensions. Floating dtypes; a composite (every device, gradients to the diagonals and rhs).
Tensor tridiagonal_matmul(const Tensor& diagonals, const Tensor& rhs,
                          const std::string& diagonals_format = "compact");
Tensor tridiagonal_matmul(const std::vector<Tensor>& diagonals, const Tensor& rhs);
// The tensor of shape diagonal.shape + diagonal.shape with output[i..., i...] = diagonal[i...]
// and zeros elsewhere, as TF's tf.linalg.tensor_diag (tf.diag); tensor_diag_part is its inverse
// (input of shape s + s, s of any rank; TF's tf.linalg.tensor_diag_part).
Tensor tensor_diag(const Tensor& diagonal);
Tensor tensor_diag_part(const Tensor& input);

}  // namespace linalg

namespace prims {

// diagonals [..., 3, M] (compact) and rhs [..., M, K] with the same batch dimensions -> x.
struct TridiagonalSolve final : PrimitiveBase<TridiagonalSolve> {
  bool partial_pivoting = true;
  explicit TridiagonalSolve(bool pivoting) : partial_pivoting(pivoting) {}
  const char* name() const override { return "tridiagonal_solve"; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override;
  TF_DECLARE_KERNELS
  TF_DECLARE_VJP
  std::string attributes() const override;
};

// matrix [..., M, M] and rhs [..., M, K] with the same batch dimensions (the frontend broadcasts
// them) -> x [..., M, K].
struct MatrixTriangularSolve final : PrimitiveBase<MatrixTriangularSolve> {
  bool lower = true;
  bool adjoint = false;
  MatrixTriangularSolve(bool l, bool adj) : lower(l), adjoint(adj) {}
  const char* name() const override { return "triangular_solve"; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override;
  TF_DECLARE_KERNELS
  TF_DECLARE_VJP
  std::string attributes() const override;
};

// [..., n, n] -> sign [...], log|det| [...].
struct LogMatrixDeterminant final : PrimitiveBase<LogMatrixDeterminant> {
  const char* name() const override { return "slogdet"; }
  int num_outputs() const override { return 2; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override;
  TF_DECLARE_KERNELS
  TF_DECLARE_VJP
  bool vjp_accepts_undefined_cotangents() const override { return true; }
};

// [..., n, n] -> lu [..., n, n], p [..., n] (index_dtype).
struct Lu final : PrimitiveBase<Lu> {
  DType index_dtype = int32;
  explicit Lu(DType idx) : index_dtype(idx) {}
  const char* name() const override { return "lu"; }
  int num_outputs() const override { return 2; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override;
  TF_DECLARE_KERNELS
  TF_DECLARE_VJP
  bool vjp_accepts_undefined_cotangents() const override { return true; }
  std::string attributes() const override;
};

}  // namespace prims

}  // namespace tapeflow
