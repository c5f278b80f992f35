// tf.linalg matrix decompositions: cholesky, eigh/eigvalsh, qr and svd (primitives with CPU
// kernels on LAPACK, ops/cpu/lapack_decomp.cpp, and CUDA kernels on cuSOLVER,
// ops/cuda/linalg_decomp.cpp), and composites built on them: cholesky_solve, logdet, pinv and
// lstsq. Every op takes float32 or float64 tensors [..., m, n] with any leading batch dimensions;
// float16/bfloat16 (which TF does not support for these ops either) and integers are an
// InvalidArgumentError naming the dtype.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ops/op_list.h"
#include "ops/primitive.h"

namespace tapeflow {

namespace linalg {

// The lower-triangular L with L L^T = a for each symmetric positive-definite a ([..., n, n]);
// only a's lower triangle is read, as TF. A matrix that is not positive definite raises TF's
// InvalidArgumentError "Cholesky decomposition was not successful. The input might not be
// valid." (on every device; TF's GPU kernel instead returns NaNs there).
Tensor cholesky(const Tensor& a);
// x with a x = rhs, given chol = cholesky(a) ([..., n, n]) and rhs [..., n, k] (same batch).
Tensor cholesky_solve(const Tensor& chol, const Tensor& rhs);
// log(det(a)) of symmetric positive-definite matrices: 2 sum(log(diag(cholesky(a)))).
Tensor logdet(const Tensor& a);

struct EighResult {
  Tensor eigenvalues;   // [..., n], ascending
  Tensor eigenvectors;  // [..., n, n], eigenvector i in column i
};
// Eigen-decomposition of self-adjoint matrices (TF's tf.linalg.eigh / self_adjoint_eig); only
// the lower triangle is read. Eigenvector signs are whatever LAPACK/cuSOLVER produce.
EighResult eigh(const Tensor& a);
// The eigenvalues alone (tf.linalg.eigvalsh).
Tensor eigvalsh(const Tensor& a);

struct QrResult {
  Tensor q;  // [..., m, k] with k = min(m, n), or [..., m, m] with full_matrices
  Tensor r;  // [..., k, n] upper triangular, or [..., m, n] with full_matrices
};
// Householder QR (tf.linalg.qr). Gradients exist for m >= n without full_matrices, square
// matrices and m < n (TF's cases); m > n with full_matrices raises UnimplementedError, as TF.
QrResult qr(const Tensor& a, bool full_matrices = false);

struct SvdResult {
  Tensor s;  // [..., k], k = min(m, n), descending
  Tensor u;  // [..., m, k] ([..., m, m] with full_matrices); undefined unless compute_uv
  Tensor v;  // [..., n, k] ([..., n, n] with full_matrices); v, not v^T, as TF
};
// a = u diag(s) v^T (tf.linalg.svd; TF returns s alone when compute_uv is false, here u and v
// are then undefined tensors). The gradient through u or v needs distinct nonzero singular
// values (as TF's); through s alone it is u v^T weighted, always defined.
SvdResult svd(const Tensor& a, bool full_matrices = false, bool compute_uv = true);

// TF's tf.linalg.matrix_rank: the number of singular values of each [..., m, n] matrix greater
// than tol (default: the largest singular value times max(m, n) times epsilon of the dtype), int64
// [...]. No gradient (an integer result).
Tensor matrix_rank(const Tensor& a, std::optional<double> tol = std::nullopt);

// Moore-Penrose pseudo-inverse through the SVD (tf.linalg.pinv): singular values at most
// rcond * max(s) count as zero; a negative rcond (the default) means TF's default
// 10 * max(m, n) * epsilon of the dtype. Its gradient is the pseudo-inverse's own derivative
// (Golub and Pereyra), also where singular values tie (2 I, orthogonal matrices), where TF's,
// through the SVD's, drops terms.
Tensor pinv(const Tensor& a, double rcond = -1);
// Least-squares solutions of a x = b (tf.linalg.lstsq), a [..., m, n], b [..., m, k]. fast=true:
// TF's fast path, the Cholesky factor of the regularised normal equations (a^T a + l2 I when
// m >= n, a a^T + l2 I otherwise). fast=false: the minimum-norm least-squares solution, also
// for rank-deficient a (TF's complete orthogonal factorisation gives the same), through pinv
// with rcond max(m, n) * epsilon; with l2 > 0 (which TF ignores there) the regularised solution
// of the stacked system [a; sqrt(l2) I] x = [b; 0]. Both are differentiable (TF's fast=false
// has no gradient).
Tensor lstsq(const Tensor& a, const Tensor& b, double l2_regularizer = 0, bool fast = true);

}  // namespace linalg

namespace prims {

// [..., n, n] -> the lower Cholesky factor [..., n, n].
struct Cholesky final : PrimitiveBase<Cholesky> {
  const char* name() const override { return "cholesky"; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override;
  TF_DECLARE_KERNELS
  TF_DECLARE_VJP
};

// [..., n, n] -> eigenvalues [..., n] (ascending) and, with compute_v, eigenvectors
// [..., n, n] (columns).
struct SelfAdjointEig final : PrimitiveBase<SelfAdjointEig> {
  bool compute_v = true;
  explicit SelfAdjointEig(bool v) : compute_v(v) {}
  const char* name() const override { return compute_v ? "eigh" : "eigvalsh"; }
  int num_outputs() const override { return compute_v ? 2 : 1; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override;
  TF_DECLARE_KERNELS
  TF_DECLARE_VJP
  std::string attributes() const override;
  bool vjp_accepts_undefined_cotangents() const override;
};

// [..., m, n] -> q, r (see linalg::qr).
struct Qr final : PrimitiveBase<Qr> {
  bool full_matrices = false;
  explicit Qr(bool full) : full_matrices(full) {}
  const char* name() const override { return "qr"; }
  int num_outputs() const override { return 2; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override;
  TF_DECLARE_KERNELS
  TF_DECLARE_VJP
  std::string attributes() const override;
};

// [..., m, n] -> s [..., k] and, with compute_uv, u and v (see linalg::svd).
struct Svd final : PrimitiveBase<Svd> {
  bool full_matrices = false;
  bool compute_uv = true;
  Svd(bool full, bool uv) : full_matrices(full), compute_uv(uv) {}
  const char* name() const override { return "svd"; }
  int num_outputs() const override { return compute_uv ? 3 : 1; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override;
  TF_DECLARE_KERNELS
  TF_DECLARE_VJP
  std::string attributes() const override;
  bool vjp_accepts_undefined_cotangents() const override;
};

}  // namespace prims

}  // namespace tapeflow
