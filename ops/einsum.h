// tf.einsum as a composite of existing primitives (no kernel or vjp of its own): transpose,
// reshape, one batched matmul per contraction of two operands, multiply for products without a
// summed index, reduce_sum, and pad/reshape/slice for the diagonal of an index repeated within one
// operand. Gradients come from those ops. docs/ops.md has the supported forms.
#pragma once

#include <string>
#include <vector>

#include "ops/primitive.h"

namespace tapeflow {

// TF's einsum: "ij,jk->ik", implicit mode ("ij,jk": the indices that appear once, sorted),
// "..." for broadcast leading dimensions, spaces ignored, any number (>= 1) of operands; more
// than two are contracted left to right. Dtypes: float16, bfloat16, float32, float64, int32,
// int64 (TF's CPU kernels), all operands alike.
Tensor einsum(const std::string& equation, const std::vector<Tensor>& inputs);
Tensor einsum(const std::string& equation, const Tensor& a);
Tensor einsum(const std::string& equation, const Tensor& a, const Tensor& b);

}  // namespace tapeflow
