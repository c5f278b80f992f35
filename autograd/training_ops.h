// Fused optimizer updates (TF's training ops, such as ResourceApplyAdam): one pass over a
// variable and its slots instead of one op, and one buffer, per arithmetic step.
#pragma once

#include <vector>

#include "autograd/variable.h"
#include "core/tensor.h"

namespace tapeflow::detail {

// Adam's update of `var` and its slots `m` and `v` by `grad`, exactly as Keras' Adam (without
// amsgrad) writes it op by op:
//   m += (grad - m) * (1 - beta_1)
//   v += (grad * grad - v) * (1 - beta_2)
//   var -= m * alpha / (sqrt(v) + epsilon)
// every step rounded as the separate ops round it (no contraction into fused multiply-adds), so
// the results are bit-identical to theirs. alpha is 0-d, in the variables' dtype, on their
// device. Eagerly it runs one loop over the four buffers (one kernel on a GPU, which reads
// alpha on the device), updating the three variables in place (copy-on-write when a snapshot
// holds a buffer, as Variable::assign); inside a trace it records one `apply_adam` node that does
// the same at every replay. Returns false, doing nothing, where the fused loop does not apply
// (variables mirrored in cross-replica context, not three distinct ones, on different devices,
// or not float32/float64; grad or alpha of another shape, dtype or device): the caller then runs
// the separate ops.
bool apply_adam(const Variable& var, const Variable& m, const Variable& v, const Tensor& grad,
                const Tensor& alpha, double beta_1, double beta_2, double epsilon);

}  // namespace tapeflow::detail
