// Elementwise binary ops with numpy broadcasting, comparisons (bool results), logical ops,
// where and clip_by_value. A C++ scalar operand takes the tensor operand's dtype; two tensors of
// different dtypes are an InvalidArgumentError.
#pragma once

#include "ops/primitive.h"

namespace tapeflow {

Tensor add(const Tensor& a, const Tensor& b);
Tensor subtract(const Tensor& a, const Tensor& b);
Tensor multiply(const Tensor& a, const Tensor& b);
// True division, as TF's tf.divide: uint8 operands give float32, int32 and int64 give float64.
Tensor divide(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);

Tensor equal(const Tensor& a, const Tensor& b);
Tensor not_equal(const Tensor& a, const Tensor& b);
Tensor less(const Tensor& a, const Tensor& b);
Tensor less_equal(const Tensor& a, const Tensor& b);
Tensor greater(const Tensor& a, const Tensor& b);
Tensor greater_equal(const Tensor& a, const Tensor& b);

Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);

// Elements of x where cond is true, else of y; all three broadcast together.
Tensor where(const Tensor& cond, const Tensor& x, const Tensor& y);
// min(max(t, clip_min), clip_max)
Tensor clip_by_value(const Tensor& t, const Tensor& clip_value_min, const Tensor& clip_value_max);

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);

}  // namespace tapeflow
