// Keras 3's activation functions beyond tf.nn's (keras.activations): hard_sigmoid, hard_silu
// (hard_swish), mish, celu, glu, hard_tanh, hard_shrink, soft_shrink, tanh_shrink, squareplus,
// sparse_plus, sparse_sigmoid, sparsemax and threshold, with Keras' defaults. Composites of
// elementwise ops (every device, gradients of every order; they fuse in tf::function chains where
// their parts do); floating dtypes. activations::get (keras/layers.h) names each of them, so layers
// take them as strings: Dense(64, "mish").
#pragma once

#include "core/tensor.h"

namespace tapeflow::keras::activations {

// relu6(x + 3) / 6: 0 below -3, 1 above 3.
Tensor hard_sigmoid(const Tensor& x);
// x * hard_sigmoid(x) (MobileNetV3's hard swish).
Tensor hard_silu(const Tensor& x);
inline Tensor hard_swish(const Tensor& x) {
  return hard_silu(x);
}
// x * tanh(softplus(x)).
Tensor mish(const Tensor& x);
// x for x >= 0, alpha * (exp(x / alpha) - 1) below.
Tensor celu(const Tensor& x, double alpha = 1.0);
// a * sigmoid(b) for x split in two halves a, b along axis (its size must be even).
Tensor glu(const Tensor& x, int axis = -1);
// x clipped to [-1, 1].
Tensor hard_tanh(const Tensor& x);
// x where |x| > threshold, else 0.
Tensor hard_shrink(const Tensor& x, double threshold = 0.5);
// x - threshold above threshold, x + threshold below -threshold, else 0.
Tensor soft_shrink(const Tensor& x, double threshold = 0.5);
// x - tanh(x).
Tensor tanh_shrink(const Tensor& x);
// (x + sqrt(x^2 + b)) / 2, a smooth relu.
Tensor squareplus(const Tensor& x, double b = 4.0);
// 0 at or below -1, x at or above 1, (x + 1)^2 / 4 between.
Tensor sparse_plus(const Tensor& x);
// 0 at or below -1, 1 at or above 1, (x + 1) / 2 between.
Tensor sparse_sigmoid(const Tensor& x);

// The Euclidean projection of x onto the probability simplex along `axis` (Martins & Astudillo,
// 2016): max(x - tau, 0) with tau chosen so that each slice sums to 1; sparse where softmax is
// not. Keras 3.15's sparsemax computes tau from the sum of the cumulative sums over the support
// (keras-team/keras#23425, fixed after 3.15), so its slices do not sum to 1 when more than one
// entry survives; tapeflow computes the published threshold (TF Addons' values).
Tensor sparsemax(const Tensor& x, int axis = -1);
// x where x > threshold, else default_value (Keras' threshold).
Tensor threshold(const Tensor& x, double threshold, double default_value);

}  // namespace tapeflow::keras::activations
