// TF's tf.math namespace: the elementwise and reduction ops users port from TF2 that have no
// other home (reciprocal, is_nan, squared_difference, reduce_logsumexp, reduce_variance, ...),
// all composites of existing ops, plus using-declarations that make the ops defined elsewhere
// (tf::exp, tf::atan2, tf::cumsum, ...) reachable as tf::math::<name>, as in TF. Also
// tf::reduce_logsumexp (TF's tf.reduce_logsumexp) and tf::nn::moments. Stateless, thread-safe.
#pragma once

#include <initializer_list>
#include <utility>
#include <vector>

#include "ops/binary.h"
#include "ops/reduce.h"
#include "ops/scan.h"
#include "ops/unary.h"

namespace tapeflow {

// log(sum(exp(x))) over axes, as TF's tf.math.reduce_logsumexp: the largest finite element of
// each reduced slice is subtracted first (no overflow), so a slice of -inf gives -inf, one with
// +inf gives +inf and one with NaN gives NaN; an empty slice gives -inf. Floating dtypes. The
// gradient is the softmax of the slice times the cotangent.
#define TF_DECLARE_MATH_REDUCTION(NAME)                                                         \
  Tensor NAME(const Tensor& x);                                                                 \
  Tensor NAME(const Tensor& x, int axis, bool keepdims = false);                                \
  Tensor NAME(const Tensor& x, const std::vector<int>& axes, bool keepdims = false);            \
  inline Tensor NAME(const Tensor& x, std::initializer_list<int> axes, bool keepdims = false) { \
    return NAME(x, std::vector<int>(axes), keepdims);                                           \
  }
TF_DECLARE_MATH_REDUCTION(reduce_logsumexp)

namespace math {

// 1 / x, as TF's tf.math.reciprocal (floating dtypes; TF has no integer kernel).
Tensor reciprocal(const Tensor& x);
// Elementwise NaN / +-inf / finite tests, bool results (no gradient, as TF); floating dtypes.
Tensor is_nan(const Tensor& x);
Tensor is_inf(const Tensor& x);
Tensor is_finite(const Tensor& x);
// (a - b)^2 with broadcasting, as TF's tf.math.squared_difference: floating, int32 and int64
// (uint8 and bool are rejected as in TF); integers wrap around.
Tensor squared_difference(const Tensor& a, const Tensor& b);
// x / y, 0 where y is 0 (also for x = 0, inf or NaN), as TF's tf.math.divide_no_nan: floating
// dtypes, broadcasting. The gradients are 0 where y is 0 (TF's too).
Tensor divide_no_nan(const Tensor& x, const Tensor& y);
// x * y, 0 where y is 0 (also where x is inf or NaN), as TF's tf.math.multiply_no_nan.
Tensor multiply_no_nan(const Tensor& x, const Tensor& y);

// The reductions take TF's axis argument as the other reduce_* ops do (ops/reduce.h): none
// (every axis), one axis, or a list ({}: TF's axis=[], each element alone).
// Population variance and standard deviation (divided by the count, as TF's
// tf.math.reduce_variance and reduce_std): floating dtypes; an empty slice gives NaN.
TF_DECLARE_MATH_REDUCTION(reduce_variance)
TF_DECLARE_MATH_REDUCTION(reduce_std)
// sqrt(sum(x^2)), as TF's tf.math.reduce_euclidean_norm: floating dtypes, and int32, int64 and
// uint8 as TF (the sum of squares wraps around, its square root is truncated toward zero). The
// gradient at an all-zero slice is NaN, as TF's.
TF_DECLARE_MATH_REDUCTION(reduce_euclidean_norm)
using tapeflow::reduce_logsumexp;

using tapeflow::abs;
using tapeflow::acos;
using tapeflow::acosh;
using tapeflow::add;
using tapeflow::argmax;
using tapeflow::argmin;
using tapeflow::asin;
using tapeflow::asinh;
using tapeflow::atan;
using tapeflow::atan2;
using tapeflow::atanh;
using tapeflow::ceil;
using tapeflow::cos;
using tapeflow::cosh;
using tapeflow::cumprod;
using tapeflow::cumsum;
using tapeflow::divide;
using tapeflow::equal;
using tapeflow::erf;
using tapeflow::erfc;
using tapeflow::exp;
using tapeflow::expm1;
using tapeflow::floor;
using tapeflow::floordiv;
using tapeflow::floormod;
using tapeflow::greater;
using tapeflow::greater_equal;
using tapeflow::less;
using tapeflow::less_equal;
using tapeflow::log;
using tapeflow::log1p;
using tapeflow::logical_and;
using tapeflow::logical_not;
using tapeflow::logical_or;
using tapeflow::maximum;
using tapeflow::minimum;
using tapeflow::multiply;
using tapeflow::negative;
using tapeflow::not_equal;
using tapeflow::pow;
using tapeflow::reduce_all;
using tapeflow::reduce_any;
using tapeflow::reduce_max;
using tapeflow::reduce_mean;
using tapeflow::reduce_min;
using tapeflow::reduce_prod;
using tapeflow::reduce_sum;
using tapeflow::round;
using tapeflow::rsqrt;
using tapeflow::sigmoid;
using tapeflow::sign;
using tapeflow::sin;
using tapeflow::sinh;
using tapeflow::sqrt;
using tapeflow::square;
using tapeflow::subtract;
using tapeflow::tan;
using tapeflow::tanh;

}  // namespace math
#undef TF_DECLARE_MATH_REDUCTION

namespace nn {
// Mean and population variance of x over axes, as TF's tf.nn.moments (the variance is the mean
// of squared_difference(x, mean); TF stops the gradient through that mean, whose term is zero up
// to rounding: here it flows); float16 and
// bfloat16 are computed in float32 and rounded once. Floating dtypes, int32 and int64 (integer
// means truncate toward zero, as TF's).
std::pair<Tensor, Tensor> moments(const Tensor& x, const std::vector<int>& axes,
                                  bool keepdims = false);
inline std::pair<Tensor, Tensor> moments(const Tensor& x, std::initializer_list<int> axes,
                                         bool keepdims = false) {
  return moments(x, std::vector<int>(axes), keepdims);
}
// TF's tf.nn.weighted_moments: the mean and variance of floating x over axes with frequency
// weights broadcasting to x (cast to x's dtype): sum(w x) / sum(w) and sum(w (x - mean)^2) /
// sum(w), each 0 where the weights sum to 0 (divide_no_nan); float16 in float32, rounded once.
std::pair<Tensor, Tensor> weighted_moments(const Tensor& x, const std::vector<int>& axes,
                                           const Tensor& frequency_weights, bool keepdims = false);
}  // namespace nn

}  // namespace tapeflow
