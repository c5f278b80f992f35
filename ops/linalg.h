// Matrix multiplication (with leading batch dimensions that broadcast) and LU-based inverse,
// solve and determinant.
#pragma once

#include "ops/primitive.h"

namespace tapeflow {

Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a = false, bool transpose_b = false);

namespace linalg {
Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a = false, bool transpose_b = false);
// Inverse of each square matrix in the last two dimensions; "Input is not invertible." when
// a matrix is singular.
Tensor inv(const Tensor& a);
// x with a @ x = b for each matrix (a: [..., n, n], b: [..., n, k]).
Tensor solve(const Tensor& a, const Tensor& b);
Tensor det(const Tensor& a);
}  // namespace linalg

}  // namespace tapeflow
