// Elementwise unary ops, cast, and unary minus. Each op is a primitive struct with a CPU
// functor (ops/cpu/unary_ops.h), a CUDA kernel and a vjp.
#pragma once

#include "ops/primitive.h"

namespace tapeflow {

Tensor negative(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor sign(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor log1p(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor square(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor floor(const Tensor& x);
Tensor ceil(const Tensor& x);
// Rounds half to even, as TF's tf.round.
Tensor round(const Tensor& x);
Tensor logical_not(const Tensor& x);
// Converts to dtype (float -> int truncates toward zero; to bool: x != 0).
Tensor cast(const Tensor& x, DType dtype);

Tensor operator-(const Tensor& x);

}  // namespace tapeflow
