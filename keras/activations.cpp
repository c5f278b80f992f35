#include "keras/activations.h"

#include <cmath>
#include <vector>

#include "core/check.h"
#include "ops/binary.h"
#include "ops/dispatch.h"
#include "ops/factory.h"
#include "ops/helpers.h"
#include "ops/movement.h"
#include "ops/nn.h"
#include "ops/nn_more.h"
#include "ops/reduce.h"
#include "ops/scan.h"
#include "ops/sort.h"
#include "ops/unary.h"

namespace tapeflow::keras::activations {

namespace {
void check(const char* op, const Tensor& x) {
  TF_CHECK_ARG(x.defined(), op, "the input is an undefined tensor (TF's None)");
  ::tapeflow::detail::check_dtype_floating(op, x);
}
}  // namespace

Tensor hard_sigmoid(const Tensor& x) {
  check("hard_sigmoid", x);
  return nn::relu6(x + 3.0) / 6.0;
}

Tensor hard_silu(const Tensor& x) {
  check("hard_silu", x);
  return x * hard_sigmoid(x);
}

Tensor mish(const Tensor& x) {
  check("mish", x);
  return x * tanh(nn::softplus(x));
}

Tensor celu(const Tensor& x, double alpha) {
  const char* op = "celu";
  check(op, x);
  TF_CHECK_ARG(alpha != 0 && std::isfinite(alpha), op, "alpha must be finite and non-zero, got {}",
               alpha);
  // The exponential reads min(x, 0), so large positive x never overflows in the unused branch.
  return where(greater_equal(x, 0.0), x, expm1(minimum(x, 0.0) / alpha) * alpha);
}

Tensor glu(const Tensor& x, int axis) {
  const char* op = "glu";
  check(op, x);
  const int r = x.rank();
  TF_CHECK_ARG(axis >= -r && axis < r, op, "axis {} is out of range for a tensor of shape {}", axis,
               x.shape().to_string());
  const int a = axis < 0 ? axis + r : axis;
  const int64_t n = x.shape()[a];
  TF_CHECK_ARG(n != None && n % 2 == 0, op,
               "axis {} must have an even, known size to split in two halves, got shape {}", axis,
               x.shape().to_string());
  std::vector<int64_t> begin(static_cast<size_t>(r), 0), size(static_cast<size_t>(r), -1);
  size[static_cast<size_t>(a)] = n / 2;
  const Tensor first = slice(x, begin, size);
  begin[static_cast<size_t>(a)] = n / 2;
  const Tensor second = slice(x, begin, size);
  return first * sigmoid(second);
}

Tensor hard_tanh(const Tensor& x) {
  check("hard_tanh", x);
  return clip_by_value(x, Tensor(-1.0), Tensor(1.0));
}

Tensor hard_shrink(const Tensor& x, double threshold) {
  check("hard_shrink", x);
  return where(greater(abs(x), threshold), x, zeros_like(x));
}

Tensor soft_shrink(const Tensor& x, double threshold) {
  check("soft_shrink", x);
  const Tensor zero = zeros_like(x);
  return where(greater(x, threshold), x - threshold,
               where(less(x, -threshold), x + threshold, zero));
}

Tensor tanh_shrink(const Tensor& x) {
  check("tanh_shrink", x);
  return x - tanh(x);
}

Tensor squareplus(const Tensor& x, double b) {
  const char* op = "squareplus";
  check(op, x);
  TF_CHECK_ARG(b >= 0, op, "b must be non-negative, got {}", b);
  return (x + sqrt(square(x) + b)) * 0.5;
}

Tensor sparse_plus(const Tensor& x) {
  check("sparse_plus", x);
  const Tensor zero = zeros_like(x);
  return where(less_equal(x, -1.0), zero, where(greater_equal(x, 1.0), x, square(x + 1.0) * 0.25));
}

Tensor sparse_sigmoid(const Tensor& x) {
  check("sparse_sigmoid", x);
  return clip_by_value((x + 1.0) * 0.5, Tensor(0.0), Tensor(1.0));
}

Tensor sparsemax(const Tensor& x, int axis) {
  const char* op = "sparsemax";
  check(op, x);
  const int r = x.rank();
  TF_CHECK_ARG(r >= 1 && axis >= -r && axis < r, op,
               "axis {} is out of range for a tensor of shape {}", axis, x.shape().to_string());
  return ::tapeflow::detail::naming_errors(op, [&] {
    // Shifted by the maximum (which changes no result): the entries that decide tau are then
    // near 0, and large logits keep their precision.
    const Tensor z = x - reduce_max(x, std::vector<int>{axis}, true);
    const Tensor sorted = sort(z, axis, "DESCENDING");
    const Tensor running = cumsum(sorted, axis);
    const Tensor rank = cumsum(ones_like(sorted), axis);  // 1, 2, ... along the axis
    // The support: the k largest entries with 1 + k z_(k) > z_(1) + ... + z_(k).
    const Tensor support = greater(sorted - (running - 1.0) / rank, Tensor(0.0));
    const Tensor k = reduce_sum(cast(support, z.dtype()), std::vector<int>{axis}, true);
    // tau = (z_(1) + ... + z_(k) - 1) / k (Martins & Astudillo's threshold).
    const Tensor top =
        reduce_sum(where(support, sorted, zeros_like(sorted)), std::vector<int>{axis}, true);
    return maximum(z - (top - 1.0) / k, Tensor(0.0));
  });
}

Tensor threshold(const Tensor& x, double threshold, double default_value) {
  check("threshold", x);
  return where(greater(x, Tensor(threshold)), x, zeros_like(x) + default_value);
}

}  // namespace tapeflow::keras::activations
