#include "ops/scan.h"

#include <fmt/format.h>

#include <limits>

#include "core/check.h"
#include "ops/binary.h"
#include "ops/dispatch.h"
#include "ops/dynamic_shape.h"
#include "ops/factory.h"
#include "ops/helpers.h"
#include "ops/movement.h"
#include "ops/reduce.h"
#include "ops/unary.h"

namespace tapeflow {

namespace {

// TF's scan axis check: in [-rank, rank), so a scalar has no axis to scan.
int scan_axis(const char* op, const Tensor& x, int axis) {
  const int rank = x.rank();
  TF_CHECK_ARG(axis >= -rank && axis < rank, op,
               "axis {} is out of range [{}, {}) for a tensor of shape {}", axis, -rank, rank,
               x.shape().to_string());
  return axis < 0 ? axis + rank : axis;
}

template <class P>
Tensor scan(const char* op, const Tensor& x, int axis, bool exclusive, bool reverse) {
  TF_CHECK_ARG(x.defined(), op, "the input is an undefined tensor (TF's None)");
  detail::check_dtype_not_bool(op, x);
  return detail::dispatch(P(scan_axis(op, x, axis), exclusive, reverse), {x});
}

}  // namespace

namespace prims {

#define TF_SCAN_INFER(STRUCT, DTYPE_OK, EXPECTED)                                      \
  void STRUCT::infer(std::span<const Tensor> in, std::span<TensorMeta> out) const {    \
    TF_CHECK_ARG(DTYPE_OK(in[0].dtype()), name(), "expects {}, got {}", EXPECTED,      \
                 dtype_name(in[0].dtype()));                                           \
    TF_CHECK_ARG(axis >= 0 && axis < in[0].rank(), name(),                             \
                 "axis {} is out of range for a tensor of shape {}", axis,             \
                 in[0].shape().to_string());                                           \
    out[0] = {in[0].shape(), in[0].dtype()};                                           \
  }                                                                                    \
  std::string STRUCT::attributes() const {                                             \
    return fmt::format("axis={}, exclusive={}, reverse={}", axis, exclusive, reverse); \
  }
namespace {
bool numeric(DType d) {
  return !is_bool(d);
}
}  // namespace
TF_SCAN_INFER(Cumsum, numeric, "a numeric tensor (not bool)")
TF_SCAN_INFER(Cumprod, numeric, "a numeric tensor (not bool)")
TF_SCAN_INFER(CumulativeLogsumexp, is_floating,
              "a floating-point tensor (float16, bfloat16, float32, float64)")
#undef TF_SCAN_INFER

// Linear: each input element reaches the results after it (before it, reversed), so its
// cotangent is the sum of theirs, a cumsum the other way round with the same exclusiveness.
uint32_t Cumsum::vjp_saves() const {
  return 0;
}
std::vector<Tensor> Cumsum::vjp(std::span<const Tensor>, std::span<const Tensor> cts,
                                std::span<const int> argnums, std::span<const Tensor>) const {
  std::vector<Tensor> out;
  for (size_t k = 0; k < argnums.size(); ++k)
    out.push_back(cumsum(cts[0], axis, exclusive, !reverse));
  return out;
}

// TF's _CumprodGrad: cumsum(cumprod(x) * g) the other way round, divided by x with 0 where x is
// 0 (div_no_nan). Right wherever x has no zero; at a zero it gives 0 (as TF) where the true
// derivative is the product of the other factors.
uint32_t Cumprod::vjp_saves() const {
  return save_input(0);
}
std::vector<Tensor> Cumprod::vjp(std::span<const Tensor> p, std::span<const Tensor> cts,
                                 std::span<const int> argnums, std::span<const Tensor>) const {
  const Tensor& x = p[0];
  const Tensor prod = cumprod(x, axis, exclusive, reverse);
  const Tensor sums = cumsum(prod * cts[0], axis, exclusive, !reverse);
  const Tensor zero = zeros_like(x);
  const Tensor is_zero = equal(x, zero);
  const Tensor grad = where(is_zero, zero, sums / where(is_zero, ones_like(x), x));
  return std::vector<Tensor>(argnums.size(), grad);
}

// y_i = log sum_{j in S(i)} exp(x_j), so dL/dx_j = exp(x_j) sum_{i : j in S(i)} g_i exp(-y_i):
// a scan the other way round with the same exclusiveness. As TF's gradient, it runs in log
// space on the cotangent's positive and negative parts (log g - y, -inf where g has the other
// sign or is 0) and returns their difference. A y of -inf (all its terms -inf, or an exclusive
// scan's first) passes nothing back, where TF's gives NaN: the derivative of such a term is
// exp(-inf - y) = 0 for every finite y after it.
uint32_t CumulativeLogsumexp::vjp_saves() const {
  return save_input(0) | save_output(0);
}
std::vector<Tensor> CumulativeLogsumexp::vjp(std::span<const Tensor> p, std::span<const Tensor> cts,
                                             std::span<const int> argnums,
                                             std::span<const Tensor> outs) const {
  const Tensor &x = p[0], &y = outs[0], &g = cts[0];
  const Tensor neg_inf(-std::numeric_limits<double>::infinity());
  const Tensor finite_y = greater(y, neg_inf);
  // Every log and difference reads safe values where its result is not taken (no NaN reaches
  // the second-order gradient).
  const Tensor safe_y = where(finite_y, y, zeros_like(y));
  auto part = [&](const Tensor& v) {
    const Tensor take = logical_and(greater(v, 0), finite_y);
    const Tensor log_v = log(where(take, v, ones_like(v)));
    const Tensor terms = where(take, log_v - safe_y, neg_inf);
    return exp(cumulative_logsumexp(terms, axis, exclusive, !reverse) + x);
  };
  return std::vector<Tensor>(argnums.size(), part(g) - part(negative(g)));
}

}  // namespace prims

Tensor cumsum(const Tensor& x, int axis, bool exclusive, bool reverse) {
  return scan<prims::Cumsum>("cumsum", x, axis, exclusive, reverse);
}

Tensor cumprod(const Tensor& x, int axis, bool exclusive, bool reverse) {
  return scan<prims::Cumprod>("cumprod", x, axis, exclusive, reverse);
}

Tensor cumulative_logsumexp(const Tensor& x, int axis, bool exclusive, bool reverse) {
  const char* op = "cumulative_logsumexp";
  TF_CHECK_ARG(x.defined(), op, "the input is an undefined tensor (TF's None)");
  detail::check_dtype_floating(op, x);
  return detail::dispatch(prims::CumulativeLogsumexp(scan_axis(op, x, axis), exclusive, reverse),
                          {x});
}

Tensor reverse(const Tensor& x, const std::vector<int>& axes) {
  const char* op = "reverse";
  TF_CHECK_ARG(x.defined(), op, "the input is an undefined tensor (TF's None)");
  const std::vector<int> norm = detail::normalize_axes(op, axes, x.shape());
  Tensor y = x;
  for (int a : norm) {
    const int64_t n = x.shape()[a];
    TF_CHECK_ARG(n >= 0, op, "axis {} of the input of shape {} has an unknown size", a,
                 x.shape().to_string());
    if (n <= 1) continue;  // nothing to reverse
    if (detail::open_shapes() && x.is_symbolic()) {
      // Traced for None dimensions: the indices n-1, ..., 0 computed when the graph runs (a
      // constant would hold the traced length).
      std::vector<int64_t> begin(static_cast<size_t>(x.rank()), 0), size(begin.size(), 1);
      size[static_cast<size_t>(a)] = -1;
      const Tensor ones = ones_like(reshape(slice(x, begin, size), TensorShape({-1})), int64);
      y = gather(y, reduce_sum(ones) - cumsum(ones), a);
      continue;
    }
    y = gather(y, range(n - 1, int64_t{-1}, int64_t{-1}, int64), a);
  }
  return y;
}

}  // namespace tapeflow
