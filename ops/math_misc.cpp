#include "ops/math_misc.h"

#include <cmath>
#include <limits>
#include <string>

#include "core/check.h"
#include "ops/binary.h"
#include "ops/bitcast.h"
#include "ops/debugging.h"
#include "ops/dispatch.h"
#include "ops/factory.h"
#include "ops/helpers.h"
#include "ops/math.h"
#include "ops/movement.h"
#include "ops/reduce.h"
#include "ops/sort.h"
#include "ops/special.h"
#include "ops/unary.h"

namespace tapeflow::math {

namespace {

void check_defined(const char* op, const Tensor& t, const char* what) {
  TF_CHECK_ARG(t.defined(), op, "{} is an undefined tensor (TF's None)", what);
}

// The operands of truncatediv / truncatemod: one numeric dtype, broadcasting shapes.
std::pair<Tensor, Tensor> numeric_operands(const char* op, const Tensor& a, const Tensor& b) {
  check_defined(op, a, "x");
  check_defined(op, b, "y");
  auto [x, y] = detail::unify_dtypes(op, a, b);
  TF_CHECK_ARG(x.dtype() != bool_, op, "expects numeric tensors, got bool");
  (void)detail::broadcast_shapes(op, x.shape(), y.shape());
  return {x, y};
}

// Consecutive pairs of x flattened: (x[:-1], x[1:]).
std::pair<Tensor, Tensor> neighbours(const char* op, const Tensor& x) {
  check_defined(op, x, "x");
  TF_CHECK_ARG(x.dtype() != bool_, op, "expects a numeric tensor, got bool");
  const Tensor flat = reshape(x, TensorShape{-1});
  const int64_t n = flat.shape()[0];
  TF_CHECK_ARG(n != None, op, "needs a known number of elements, got shape {}",
               x.shape().to_string());
  if (n < 2) return {};
  return {slice(flat, {0}, {n - 1}), slice(flat, {1}, {n - 1})};
}

}  // namespace

Tensor count_nonzero(const Tensor& input, std::optional<std::vector<int>> axis, bool keepdims,
                     DType dtype) {
  const char* op = "count_nonzero";
  check_defined(op, input, "input");
  TF_CHECK_ARG(dtype == int32 || dtype == int64 || is_floating(dtype), op,
               "dtype must be an int32, int64 or floating dtype, got {}", dtype_name(dtype));
  if (!axis) {
    axis.emplace();
    for (int d = 0; d < input.rank(); ++d) axis->push_back(d);
  }
  const Tensor nonzero = input.dtype() == bool_ ? input : not_equal(input, 0);
  // Counted in int64 (exact), then cast.
  return cast(reduce_sum(cast(nonzero, int64), *axis, keepdims), dtype);
}

Tensor truncatediv(const Tensor& a, const Tensor& b) {
  const auto [x, y] = numeric_operands("truncatediv", a, b);
  if (is_floating(x.dtype())) {  // trunc(x / y) = sign(q) floor(|q|)
    const Tensor q = x / y;
    return sign(q) * floor(abs(q));
  }
  // floordiv rounds down; toward zero differs where the quotient is negative and inexact.
  const Tensor q = floordiv(x, y);
  const Tensor inexact = not_equal(q * y, x);
  const Tensor negative_q = not_equal(less(x, 0), less(y, 0));
  return where(logical_and(inexact, negative_q), q + 1, q);
}

Tensor truncatemod(const Tensor& a, const Tensor& b) {
  const auto [x, y] = numeric_operands("truncatemod", a, b);
  if (!is_floating(x.dtype())) return x - truncatediv(x, y) * y;
  // std::fmod: x - trunc(x / y) y, trunc(v) = sign(v) floor(|v|); x itself where y is inf.
  const Tensor r = floormod(abs(x), abs(y));
  return sign(x) * r;
}

Tensor polyval(const std::vector<Tensor>& coeffs, const Tensor& x) {
  const char* op = "polyval";
  check_defined(op, x, "x");
  if (coeffs.empty()) return zeros_like(x);
  Tensor p = coeffs[0];
  check_defined(op, p, "coeffs[0]");
  for (size_t i = 1; i < coeffs.size(); ++i) {
    check_defined(op, coeffs[i], "a coefficient");
    p = detail::naming_errors(op, [&] { return p * x + coeffs[i]; });
  }
  return coeffs.size() == 1 ? p + zeros_like(x) : p;
}

Tensor is_non_decreasing(const Tensor& x) {
  const auto [a, b] = neighbours("is_non_decreasing", x);
  if (!a.defined()) return Tensor(true);
  return reduce_all(less_equal(a, b));
}

Tensor is_strictly_increasing(const Tensor& x) {
  const auto [a, b] = neighbours("is_strictly_increasing", x);
  if (!a.defined()) return Tensor(true);
  return reduce_all(less(a, b));
}

Tensor invert_permutation(const Tensor& x) {
  const char* op = "invert_permutation";
  check_defined(op, x, "x");
  TF_CHECK_ARG(x.dtype() == int32 || x.dtype() == int64, op, "x must be int32 or int64, got {}",
               dtype_name(x.dtype()));
  TF_CHECK_ARG(x.rank() == 1, op, "x must be 1-D, got shape {}", x.shape().to_string());
  const int64_t n = x.shape()[0];
  TF_CHECK_ARG(n != None, op, "x needs a known length, got shape {}", x.shape().to_string());
  // A permutation sorted is 0 .. n-1; its inverse is the order that sorts it.
  const Tensor order = argsort(x);
  const Tensor sorted = gather(x, order);
  detail::check_elementwise(op, fmt::format("x is a permutation of 0 .. {}", n - 1),
                            equal(sorted, range(0.0, static_cast<double>(n), 1.0, x.dtype())),
                            {sorted}, {"sorted x"});
  return cast(order, x.dtype());
}

Tensor histogram_fixed_width_bins(const Tensor& values, const Tensor& value_range, int64_t nbins,
                                  DType dtype) {
  const char* op = "histogram_fixed_width_bins";
  check_defined(op, values, "values");
  check_defined(op, value_range, "value_range");
  const DType t = values.dtype();
  TF_CHECK_ARG(is_floating(t) || t == int32 || t == int64, op,
               "values must be floating, int32 or int64, got {}", dtype_name(t));
  TF_CHECK_ARG(value_range.dtype() == t && value_range.shape() == TensorShape{2}, op,
               "value_range must be a (2,) {} tensor (values' dtype), got {} {}", dtype_name(t),
               value_range.shape().to_string(), dtype_name(value_range.dtype()));
  TF_CHECK_ARG(nbins > 0, op, "nbins should be a positive number, got {}", nbins);
  TF_CHECK_ARG(dtype == int32 || dtype == int64, op, "dtype must be int32 or int64, got {}",
               dtype_name(dtype));
  const Tensor lo = gather(value_range, Tensor(int64_t{0}));
  const Tensor hi = gather(value_range, Tensor(int64_t{1}));
  detail::check_elementwise(op, "value_range[0] < value_range[1]", less(lo, hi), {lo, hi},
                            {"value_range[0]", "value_range[1]"});
  if (is_floating(t))
    detail::check_elementwise(op, "values are not NaN", logical_not(is_nan(values)), {values},
                              {"values"});
  // histogram_fixed_width's arithmetic (its bins are these): the distance from the low end in
  // the values' dtype, in float64 over (hi - lo) / nbins, truncated, clamped to the last bin.
  const Tensor step = cast(hi - lo, float64) / static_cast<double>(nbins);
  const Tensor dist = cast(maximum(values, lo) - lo, float64);
  return cast(minimum(dist / step, static_cast<double>(nbins - 1)), dtype);
}

Tensor erfcinv(const Tensor& x) {
  check_defined("erfcinv", x, "x");
  return detail::naming_errors("erfcinv", [&] { return -ndtri(0.5 * x) * std::sqrt(0.5); });
}

Tensor add_n(const std::vector<Tensor>& inputs) {
  const char* op = "add_n";
  TF_CHECK_ARG(!inputs.empty(), op, "needs at least one input tensor");
  const Tensor& first = inputs[0];
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    TF_CHECK_ARG(t.defined(), op, "input {} is an undefined tensor (TF's None)", i);
    TF_CHECK_ARG(!is_bool(t.dtype()), op, "expects numeric tensors, got {} (input {})",
                 dtype_name(t.dtype()), i);
    TF_CHECK_ARG(t.dtype() == first.dtype(), op,
                 "inputs must have one dtype: input 0 is {}, input {} is {}",
                 dtype_name(first.dtype()), i, dtype_name(t.dtype()));
    TF_CHECK_ARG(t.shape() == first.shape(), op,
                 "inputs must have the same size and shape: input 0 has shape {}, input {} "
                 "has shape {}",
                 first.shape().to_string(), i, t.shape().to_string());
  }
  Tensor sum = first;
  for (size_t i = 1; i < inputs.size(); ++i) sum = add(sum, inputs[i]);
  return sum;
}

Tensor accumulate_n(const std::vector<Tensor>& inputs) {
  return add_n(inputs);
}

Tensor scalar_mul(const Tensor& scalar, const Tensor& x) {
  const char* op = "scalar_mul";
  TF_CHECK_ARG(scalar.defined() && x.defined(), op, "an input is an undefined tensor (TF's None)");
  TF_CHECK_ARG(scalar.rank() == 0, op, "Only scalar multiply works, got a scalar of shape {}",
               scalar.shape().to_string());
  return multiply(scalar, x);
}

Tensor truediv(const Tensor& x, const Tensor& y) {
  return divide(x, y);
}

Tensor realdiv(const Tensor& x, const Tensor& y) {
  const char* op = "realdiv";
  auto [a, b] = detail::unify_dtypes(op, x, y);
  TF_CHECK_ARG(is_floating(a.dtype()), op,
               "expects floating-point tensors (TF has no CPU kernel for {}); use truediv or "
               "floordiv for integers",
               dtype_name(a.dtype()));
  return divide(a, b);
}

Tensor rint(const Tensor& x) {
  const char* op = "rint";
  TF_CHECK_ARG(x.defined(), op, "the input is an undefined tensor (TF's None)");
  detail::check_dtype_floating(op, x);
  return round(x);
}

Tensor reciprocal_no_nan(const Tensor& x) {
  const char* op = "reciprocal_no_nan";
  TF_CHECK_ARG(x.defined(), op, "the input is an undefined tensor (TF's None)");
  detail::check_dtype_floating(op, x);
  return divide_no_nan(ones_like(x), x);
}

Tensor zero_fraction(const Tensor& value) {
  TF_CHECK_ARG(value.defined(), "zero_fraction", "the input is an undefined tensor (TF's None)");
  return reduce_mean(cast(equal(value, zeros_like(value)), float32));
}

namespace {

// nextafter's value: one step of the bit pattern (sign and magnitude) towards x2.
Tensor next_representable(const Tensor& x1, const Tensor& x2) {
  const DType dtype = x1.dtype();
  const DType bits = dtype == float32 ? int32 : int64;
  const double tiny = dtype == float32 ? std::numeric_limits<float>::denorm_min()
                                       : std::numeric_limits<double>::denorm_min();
  const Tensor one = constant(Tensor(int64_t{1}), bits);
  // Away from zero (a larger magnitude) when x1 > 0 moves up or x1 < 0 moves down.
  const Tensor away = equal(greater(x1, Tensor(0.0)), greater(x2, x1));
  const Tensor moved = bitcast(bitcast(x1, bits) + where(away, one, -one), dtype);
  const Tensor from_zero =
      where(greater(x2, Tensor(0.0)), ones_like(x2) * tiny, ones_like(x2) * -tiny);
  Tensor out = where(equal(x1, Tensor(0.0)), from_zero, moved);
  out = where(equal(x1, x2), x2, out);
  return where(logical_or(is_nan(x1), is_nan(x2)), x1 + x2, out);
}

}  // namespace

Tensor nextafter(const Tensor& x1, const Tensor& x2) {
  const char* op = "nextafter";
  TF_CHECK_ARG(x1.defined() && x2.defined(), op, "an input is an undefined tensor (TF's None)");
  TF_CHECK_ARG(x1.dtype() == x2.dtype() && (x1.dtype() == float32 || x1.dtype() == float64), op,
               "x1 and x2 must both be float32 or both float64 (TF's NextAfter), got {} and {}",
               dtype_name(x1.dtype()), dtype_name(x2.dtype()));
  (void)detail::broadcast_shapes(op, x1.shape(), x2.shape());
  return detail::naming_errors(op, [&] {
    // The value without gradients, then TF's gradient (the upstream one for x1, none for x2)
    // added without changing a bit: x1 - x1 is +0 where x1 is finite, and r - (+0) is r, -0
    // included.
    const Tensor r = detail::without_gradient(next_representable(x1, x2));
    return r - where(is_finite(x1), detail::without_gradient(x1) - x1, zeros_like(x1));
  });
}

}  // namespace tapeflow::math
