// Reductions over axes (negative axes count from the end; no axes reduces everything) and
// argmax/argmin. Results keep the input dtype, as TF's (no upcast of ints).
#pragma once

#include <vector>

#include "ops/primitive.h"

namespace tapeflow {

#define TF_DECLARE_REDUCTION(NAME)                                               \
  Tensor NAME(const Tensor& x);                                                  \
  Tensor NAME(const Tensor& x, int axis, bool keepdims = false);                 \
  Tensor NAME(const Tensor& x, const std::vector<int>& axes, bool keepdims = false);

TF_DECLARE_REDUCTION(reduce_sum)
TF_DECLARE_REDUCTION(reduce_mean)
TF_DECLARE_REDUCTION(reduce_max)
TF_DECLARE_REDUCTION(reduce_min)
TF_DECLARE_REDUCTION(reduce_prod)
TF_DECLARE_REDUCTION(reduce_any)  // bool input
TF_DECLARE_REDUCTION(reduce_all)  // bool input
#undef TF_DECLARE_REDUCTION

// Index (int64) of the largest / smallest element along axis; the first one on ties.
Tensor argmax(const Tensor& x, int axis = 0);
Tensor argmin(const Tensor& x, int axis = 0);

}  // namespace tapeflow
