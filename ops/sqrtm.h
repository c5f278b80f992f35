// tf.linalg.sqrtm: the principal square root of real square matrices, through the real Schur
// decomposition (TF's algorithm, Higham's 1987 recurrence on the quasi-triangular factor), and
// its gradient.
#pragma once

#include <cstdint>

#include "ops/primitive.h"

namespace tapeflow {

namespace linalg {
// sqrtm(a) @ sqrtm(a) == a for a batch of square matrices (..., n, n), float32 or float64 (TF's
// real kernels), the principal root: every eigenvalue of the result has a positive real part.
// The input should have no real eigenvalue < 0 (a pair of complex eigenvalues is fine); one
// makes the whole result NaN, and a singular input gives NaN or inf where no root exists (a
// zero eigenvalue inside a 2x2 Jordan block), as TF. float32 computes in float64 and rounds
// once. The gradient is TF's: the upstream gradient g gives the x that solves
// R^T x + x R^T = g (R the result), here with LAPACK's Sylvester solver on R's Schur form (TF
// solves an n^2 x n^2 Kronecker system); it has no gradient itself (no second order). TF has
// no GPU kernel; on a GPU the matrices go through the host and the result comes back there
// (ops/cuda/sqrtm.cpp, not yet run on a GPU).
Tensor sqrtm(const Tensor& a);
}  // namespace linalg

namespace detail {
// The host routines behind both kernels (row-major float32/float64 tensors of `shape`, a batch
// of n x n matrices). sqrtm_host writes the roots; sqrtm_grad_host writes, for roots r and
// upstream gradients g, the solutions x of r^T x + x r^T = g.
void sqrtm_host(DType dtype, const TensorShape& shape, const void* a, void* out);
void sqrtm_grad_host(DType dtype, const TensorShape& shape, const void* r, const void* g,
                     void* out);
}  // namespace detail

namespace prims {

struct MatrixSquareRoot final : PrimitiveBase<MatrixSquareRoot> {
  const char* name() const override { return "sqrtm"; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override;
  TF_DECLARE_KERNELS
  TF_DECLARE_VJP
};

// Inputs: the root r and the upstream gradient g (one shape); output: the gradient of sqrtm's
// input. No gradient of its own.
struct MatrixSquareRootGrad final : PrimitiveBase<MatrixSquareRootGrad> {
  const char* name() const override { return "sqrtm_grad"; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override;
  TF_DECLARE_KERNELS
  TF_DECLARE_VJP
};

}  // namespace prims

}  // namespace tapeflow
