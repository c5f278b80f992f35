// Text of tensor values as numpy 1.x prints them (the rules TF2 uses for print(t) and for a
// Variable's "numpy=" field): precision 8, threshold 1000, edgeitems 3, linewidth 75,
// floatmode 'maxprec'. Stateless; safe from any thread.
#pragma once

#include <string>

#include "core/dtype.h"
#include "core/tensor.h"

namespace tapeflow::detail {

// numpy's str() of the value: "[1. 2.]", "[[0 1]\n [2 3]]", "14.0" for a 0-d tensor.
std::string numpy_str(const Tensor& t);
// numpy's repr() of the value: "array([1., 2.], dtype=float32)", "1.0" for a 0-d tensor; text
// spanning several lines starts with "\n" (as TF's numpy_text adds it).
std::string numpy_repr(const Tensor& t);
// numpy's str() of one scalar of `dtype` whose value is `v` (exact for every dtype except int64
// beyond 2^53): "14.0", "1e-05", "nan", "3", "True".
std::string numpy_scalar_str(double v, DType dtype);

}  // namespace tapeflow::detail
