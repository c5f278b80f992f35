#include "ops/math.h"

#include <limits>
#include <numeric>

#include "core/check.h"
#include "ops/dispatch.h"
#include "ops/factory.h"
#include "ops/helpers.h"
#include "ops/movement.h"

namespace tapeflow {

namespace {

void check_defined(const char* op, const Tensor& x) {
  TF_CHECK_ARG(x.defined(), op, "the input is an undefined tensor (TF's None)");
}

// The normalised axes of a reduction: every axis when `axes` is null.
std::vector<int> reduction_axes(const char* op, const Tensor& x, const std::vector<int>* axes) {
  if (axes) return detail::normalize_axes(op, *axes, x.shape());
  std::vector<int> all(static_cast<size_t>(x.rank()));
  std::iota(all.begin(), all.end(), 0);
  return all;
}

Tensor logsumexp_impl(const Tensor& x, const std::vector<int>* axes_in, bool keepdims) {
  const char* op = "reduce_logsumexp";
  check_defined(op, x);
  detail::check_dtype_floating(op, x);
  const std::vector<int> axes = reduction_axes(op, x, axes_in);
  // The largest element of each slice, where finite (else 0): subtracting it keeps exp from
  // overflowing and does not change the value. TF stops the gradient through it; ops cannot
  // call stop_gradient (autograd sits above them), and the gradient that flows through it,
  // g * (1 - sum(softmax)), is zero up to rounding.
  const Tensor raw_max = reduce_max(x, axes, true);
  const Tensor shift = where(math::is_finite(raw_max), raw_max, zeros_like(raw_max));
  const Tensor sum = reduce_sum(exp(x - shift), axes, keepdims);
  return log(sum) + (keepdims || axes.empty() ? shift : squeeze(shift, axes));
}

Tensor variance_impl(const char* op, const Tensor& x, const std::vector<int>* axes_in,
                     bool keepdims) {
  check_defined(op, x);
  detail::check_dtype_floating(op, x);
  const std::vector<int> axes = reduction_axes(op, x, axes_in);
  const Tensor mean = reduce_mean(x, axes, true);
  return reduce_mean(square(x - mean), axes, keepdims);
}

Tensor euclidean_norm_impl(const Tensor& x, const std::vector<int>* axes_in, bool keepdims) {
  const char* op = "reduce_euclidean_norm";
  check_defined(op, x);
  detail::check_dtype_not_bool(op, x);
  const std::vector<int> axes = reduction_axes(op, x, axes_in);
  const DType d = x.dtype();
  if (is_floating(d)) return sqrt(reduce_sum(square(x), axes, keepdims));
  // Integers: the sum of squares in the input's dtype (wrapping, as TF's), its square root in
  // float64, truncated back.
  return cast(sqrt(cast(reduce_sum(square(x), axes, keepdims), float64)), d);
}

}  // namespace

#define TF_DEFINE_MATH_REDUCTION(NS, NAME, ...)                                  \
  Tensor NS NAME(const Tensor& x) {                                              \
    const std::vector<int>* axes = nullptr;                                      \
    const bool keepdims = false;                                                 \
    return __VA_ARGS__;                                                          \
  }                                                                              \
  Tensor NS NAME(const Tensor& x, int axis, bool keepdims) {                     \
    const std::vector<int> one{axis};                                            \
    const std::vector<int>* axes = &one;                                         \
    return __VA_ARGS__;                                                          \
  }                                                                              \
  Tensor NS NAME(const Tensor& x, const std::vector<int>& list, bool keepdims) { \
    const std::vector<int>* axes = &list;                                        \
    return __VA_ARGS__;                                                          \
  }
TF_DEFINE_MATH_REDUCTION(, reduce_logsumexp, logsumexp_impl(x, axes, keepdims))
TF_DEFINE_MATH_REDUCTION(math::, reduce_variance,
                         variance_impl("reduce_variance", x, axes, keepdims))
TF_DEFINE_MATH_REDUCTION(math::, reduce_std, sqrt(variance_impl("reduce_std", x, axes, keepdims)))
TF_DEFINE_MATH_REDUCTION(math::, reduce_euclidean_norm, euclidean_norm_impl(x, axes, keepdims))
#undef TF_DEFINE_MATH_REDUCTION

namespace math {

Tensor reciprocal(const Tensor& x) {
  check_defined("reciprocal", x);
  detail::check_dtype_floating("reciprocal", x);
  return 1 / x;
}

Tensor is_nan(const Tensor& x) {
  check_defined("is_nan", x);
  detail::check_dtype_floating("is_nan", x);
  return not_equal(x, x);
}

Tensor is_inf(const Tensor& x) {
  check_defined("is_inf", x);
  detail::check_dtype_floating("is_inf", x);
  return equal(abs(x), std::numeric_limits<double>::infinity());
}

Tensor is_finite(const Tensor& x) {
  check_defined("is_finite", x);
  detail::check_dtype_floating("is_finite", x);
  // False for NaN (every comparison with NaN is false) and for +-inf.
  return less(abs(x), std::numeric_limits<double>::infinity());
}

Tensor squared_difference(const Tensor& a, const Tensor& b) {
  const char* op = "squared_difference";
  check_defined(op, a);
  check_defined(op, b);
  auto [x, y] = detail::unify_dtypes(op, a, b);
  const DType d = x.dtype();
  TF_CHECK_ARG(is_floating(d) || d == int32 || d == int64, op,
               "expects floating-point, int32 or int64 tensors, got {}", dtype_name(d));
  return detail::naming_errors(op, [&] { return square(x - y); });
}

namespace {
// The operands of divide_no_nan / multiply_no_nan: one floating dtype.
std::pair<Tensor, Tensor> no_nan_operands(const char* op, const Tensor& a, const Tensor& b) {
  check_defined(op, a);
  check_defined(op, b);
  auto [x, y] = detail::unify_dtypes(op, a, b);
  detail::check_dtype_floating(op, x);
  (void)detail::broadcast_shapes(op, x.shape(), y.shape());
  return {x, y};
}
}  // namespace

// Where y is 0 the division is by 1 instead, so that neither the result nor the gradients (which
// the outer where zeroes there, as TF's DivNoNanGrad) see an inf or a NaN.
Tensor divide_no_nan(const Tensor& a, const Tensor& b) {
  const auto [x, y] = no_nan_operands("divide_no_nan", a, b);
  const Tensor zero = equal(y, 0);
  return where(zero, 0, x / where(zero, 1, y));
}

// x * y with x replaced by 0 where y is 0 and x is not finite: the gradients are TF's (y with
// respect to x; x with respect to y, also at y = 0).
Tensor multiply_no_nan(const Tensor& a, const Tensor& b) {
  const auto [x, y] = no_nan_operands("multiply_no_nan", a, b);
  return where(logical_and(equal(y, 0), logical_not(is_finite(x))), 0, x) * y;
}

}  // namespace math

namespace nn {

namespace {
// The moments computed with kept dimensions, squeezed unless keepdims, in dtype d.
std::pair<Tensor, Tensor> finish_moments(Tensor mean, Tensor variance, const std::vector<int>& axes,
                                         bool keepdims, DType d) {
  if (!keepdims && !axes.empty()) {
    mean = squeeze(mean, axes);
    variance = squeeze(variance, axes);
  }
  if (mean.dtype() != d) return {cast(mean, d), cast(variance, d)};
  return {mean, variance};
}
}  // namespace

std::pair<Tensor, Tensor> moments(const Tensor& x, const std::vector<int>& axes, bool keepdims) {
  const char* op = "moments";
  check_defined(op, x);
  const DType d = x.dtype();
  TF_CHECK_ARG(is_floating(d) || d == int32 || d == int64, op,
               "expects a floating-point, int32 or int64 tensor, got {}", dtype_name(d));
  const std::vector<int> norm = detail::normalize_axes(op, axes, x.shape());
  // As TF: float16 (only) is computed in float32 and cast back.
  const bool half = d == float16;
  const Tensor y = half ? cast(x, float32) : x;
  const Tensor mean = reduce_mean(y, norm, true);
  // TF stops the gradient through this mean; here it flows, and its term, -2 mean(x - mean),
  // is zero up to rounding (ops cannot call autograd's stop_gradient).
  const Tensor variance = reduce_mean(math::squared_difference(y, mean), norm, true);
  return finish_moments(mean, variance, norm, keepdims, d);
}

std::pair<Tensor, Tensor> weighted_moments(const Tensor& x, const std::vector<int>& axes,
                                           const Tensor& frequency_weights, bool keepdims) {
  const char* op = "weighted_moments";
  check_defined(op, x);
  check_defined(op, frequency_weights);
  detail::check_dtype_floating(op, x);
  (void)detail::broadcast_shapes(op, x.shape(), frequency_weights.shape());
  const std::vector<int> norm = detail::normalize_axes(op, axes, x.shape());
  const DType d = x.dtype();
  const bool half = d == float16;  // as TF: float16 (only) in float32
  const Tensor y = half ? cast(x, float32) : x;
  const Tensor w = cast(frequency_weights, y.dtype());
  const Tensor sum_w = reduce_sum(w + zeros_like(y), norm, true);
  const Tensor mean = math::divide_no_nan(reduce_sum(w * y, norm, true), sum_w);
  const Tensor variance =
      math::divide_no_nan(reduce_sum(w * math::squared_difference(y, mean), norm, true), sum_w);
  return finish_moments(mean, variance, norm, keepdims, d);
}

}  // namespace nn

}  // namespace tapeflow
