#include "ops/reduce.h"

#include <algorithm>
#include <numeric>

#include "core/check.h"
#include "ops/binary.h"
#include "ops/dispatch.h"
#include "ops/dynamic_shape.h"
#include "ops/helpers.h"
#include "ops/factory.h"
#include "ops/movement.h"
#include "ops/unary.h"

namespace tapeflow {

namespace {

enum class Kind { Sum, Prod, Max, Min, Mean, Any, All };

void check_reduce_dtype(const char* op, Kind kind, DType d) {
  switch (kind) {
    case Kind::Sum:
    case Kind::Prod:
    case Kind::Mean:
      TF_CHECK_ARG(!is_bool(d), op, "is not defined for bool tensors");
      break;
    case Kind::Max:
    case Kind::Min:
      TF_CHECK_ARG(!is_bool(d), op,
                   "is not defined for bool tensors (use reduce_any / reduce_all)");
      break;
    case Kind::Any:
    case Kind::All:
      TF_CHECK_ARG(is_bool(d), op, "expects a bool tensor, got {}", dtype_name(d));
      break;
  }
}

// s / n truncated toward zero (TF's integer division), exactly, for int64 s and a positive int64
// scalar n, with elementwise ops only (so on every device and in traced functions). A quotient
// through float64 is within about 2^11 / n + 1 of the true one (s and s / n rounded); a second
// through the remainder, which is then small, is within 1; the remainder's sign settles it.
// Products and differences wrap (as TF's integer ops), which keeps the remainders exact.
Tensor truncate_divide_int64(const Tensor& s, const Tensor& n) {
  const Tensor nf = cast(n, float64);
  Tensor q = cast(divide(cast(s, float64), nf), int64);
  q = q + cast(divide(cast(s - q * n, float64), nf), int64);
  const Tensor r = s - q * n;
  // Truncation leaves 0 <= r < n for s >= 0 and -n < r <= 0 for s < 0.
  const Tensor nonnegative = greater_equal(s, 0);
  const Tensor up = where(nonnegative, greater_equal(r, n), greater(r, 0));
  const Tensor down = where(nonnegative, less(r, 0), less_equal(r, negative(n)));
  return q + cast(up, int64) - cast(down, int64);
}

Tensor reduce_mean_impl(const Tensor& x, std::vector<int> axes, bool keepdims) {
  const int64_t count = detail::reduced_count(x.shape(), axes);
  const std::vector<int> axes_copy = axes;
  const DType d = x.dtype();
  // A graph for None dimensions reads the count when it runs.
  auto divisor = [&](DType dt) {
    return detail::open_shapes() ? detail::element_count(x, axes_copy, dt)
           : dt == int64         ? Tensor(count)
                                 : Tensor(static_cast<double>(count));
  };
  if (is_floating(d)) {
    // Half types are summed and divided in float32, then rounded once: a sum in the half type is
    // rounded to its grid (100000 float16 ones summed to inf; 100000 bfloat16 0.1s to a sum
    // whose mean was 0.0996 instead of 0.1001).
    const bool half = d == float16 || d == bfloat16;
    const Tensor s = detail::dispatch(prims::ReduceSum(std::move(axes), keepdims),
                                      {half ? cast(x, float32) : x});
    const Tensor mean = divide(s, divisor(half ? float32 : d));
    return half ? cast(mean, d) : mean;
  }
  // Integers: summed in int64 (narrower types too, so the mean of values the type holds is one
  // it holds: two int32 INT_MAX or uint8 200 and 101 wrapped before the division, as TF's do
  // not), divided exactly with truncation toward zero as TF's integer division, in the input's
  // dtype. An empty reduction gives 0 (its sum, divided by 1).
  const Tensor s = detail::dispatch(prims::ReduceSum(std::move(axes), keepdims),
                                    {d == int64 ? x : cast(x, int64)});
  // A sum below 2^53 in magnitude is exact in float64, and so is the truncation of its float64
  // quotient (the rounding error, under |s / n| 2^-53, is below the 1 / n that separates a
  // non-integer quotient from the next integer): three ops where the count bounds the sum.
  const double max_abs = d == uint8 ? 255.0 : d == int32 ? 2147483648.0 : 0.0;
  if (max_abs > 0 && !detail::open_shapes() &&
      static_cast<double>(count) * max_abs < 9007199254740992.0)
    return cast(divide(cast(s, float64), Tensor(static_cast<double>(std::max<int64_t>(count, 1)))),
                d);
  const Tensor mean = truncate_divide_int64(s, maximum(divisor(int64), 1));
  return d == int64 ? mean : cast(mean, d);
}

Tensor reduce_impl(const char* op, Kind kind, const Tensor& x, std::vector<int> axes,
                   bool keepdims) {
  TF_CHECK_ARG(x.defined(), op, "the input is an undefined tensor (TF's None)");
  check_reduce_dtype(op, kind, x.dtype());
  switch (kind) {
    case Kind::Sum:
      return detail::dispatch(prims::ReduceSum(std::move(axes), keepdims), {x});
    case Kind::Prod:
      return detail::dispatch(prims::ReduceProd(std::move(axes), keepdims), {x});
    case Kind::Max:
    case Kind::Any:
      return detail::dispatch(prims::ReduceMax(std::move(axes), keepdims), {x});
    case Kind::Min:
    case Kind::All:
      return detail::dispatch(prims::ReduceMin(std::move(axes), keepdims), {x});
    case Kind::Mean:
      return reduce_mean_impl(x, std::move(axes), keepdims);
  }
  TF_ASSERT(false);
}

std::vector<int> all_axes(const Tensor& x) {
  std::vector<int> a(static_cast<size_t>(x.rank()));
  std::iota(a.begin(), a.end(), 0);
  return a;
}

Tensor reduce_all_axes(const char* op, Kind kind, const Tensor& x) {
  TF_CHECK_ARG(x.defined(), op, "the input is an undefined tensor (TF's None)");
  return reduce_impl(op, kind, x, all_axes(x), false);
}
Tensor reduce_one_axis(const char* op, Kind kind, const Tensor& x, int axis, bool keepdims) {
  TF_CHECK_ARG(x.defined(), op, "the input is an undefined tensor (TF's None)");
  return reduce_impl(op, kind, x, {detail::normalize_axis(op, axis, x.shape())}, keepdims);
}
Tensor reduce_axes(const char* op, Kind kind, const Tensor& x, const std::vector<int>& axes,
                   bool keepdims) {
  TF_CHECK_ARG(x.defined(), op, "the input is an undefined tensor (TF's None)");
  return reduce_impl(op, kind, x, detail::normalize_axes(op, axes, x.shape()), keepdims);
}

}  // namespace

#define TF_DEFINE_REDUCTION(NAME, KIND)                                       \
  Tensor NAME(const Tensor& x) {                                              \
    return reduce_all_axes(#NAME, KIND, x);                                   \
  }                                                                           \
  Tensor NAME(const Tensor& x, int axis, bool keepdims) {                     \
    return reduce_one_axis(#NAME, KIND, x, axis, keepdims);                   \
  }                                                                           \
  Tensor NAME(const Tensor& x, const std::vector<int>& axes, bool keepdims) { \
    return reduce_axes(#NAME, KIND, x, axes, keepdims);                       \
  }

TF_DEFINE_REDUCTION(reduce_sum, Kind::Sum)
TF_DEFINE_REDUCTION(reduce_mean, Kind::Mean)
TF_DEFINE_REDUCTION(reduce_max, Kind::Max)
TF_DEFINE_REDUCTION(reduce_min, Kind::Min)
TF_DEFINE_REDUCTION(reduce_prod, Kind::Prod)
TF_DEFINE_REDUCTION(reduce_any, Kind::Any)
TF_DEFINE_REDUCTION(reduce_all, Kind::All)
#undef TF_DEFINE_REDUCTION

Tensor argmax(const Tensor& x, int axis) {
  TF_CHECK_ARG(x.defined(), "argmax", "the input is an undefined tensor (TF's None)");
  return detail::dispatch(prims::ArgMax(detail::normalize_axis("argmax", axis, x.shape())), {x});
}
Tensor argmin(const Tensor& x, int axis) {
  TF_CHECK_ARG(x.defined(), "argmin", "the input is an undefined tensor (TF's None)");
  return detail::dispatch(prims::ArgMin(detail::normalize_axis("argmin", axis, x.shape())), {x});
}

namespace prims {

namespace {

void infer_reduction(const char* op, bool allow_bool, std::span<const int> axes, bool keepdims,
                     std::span<const Tensor> in, std::span<TensorMeta> out) {
  const Tensor& x = in[0];
  if (!allow_bool) TF_CHECK_ARG(!is_bool(x.dtype()), op, "is not defined for bool tensors");
  const int r = x.rank();
  TensorShape s;
  size_t k = 0;
  for (int i = 0; i < r; ++i) {
    const bool reduced = k < axes.size() && axes[k] == i;
    if (reduced) {
      ++k;
      if (keepdims) s.push_back(1);
    } else {
      s.push_back(x.shape()[i]);
    }
  }
  // Axes come normalised and sorted from the frontends (or a graph built by them).
  TF_CHECK_ARG(k == axes.size(), op, "axes {} are not sorted valid axes for a tensor of shape {}",
               detail::vec_to_string(axes), x.shape().to_string());
  out[0] = {s, x.dtype()};
}

std::string reduction_attributes(std::span<const int> axes, bool keepdims) {
  return fmt::format("axes={}, keepdims={}", detail::vec_to_string(axes), keepdims);
}

void infer_arg(const char* op, int axis, std::span<const Tensor> in, std::span<TensorMeta> out) {
  const Tensor& x = in[0];
  const int r = x.rank();
  TF_CHECK_ARG(axis >= 0 && axis < r, op,
               "axis {} is out of range for a tensor of rank {} (shape {})", axis, r,
               x.shape().to_string());
  TF_CHECK_ARG(x.shape()[axis] != 0, op,
               "cannot reduce over axis {} of shape {}: the dimension is empty", axis,
               x.shape().to_string());
  TensorShape s;
  for (int i = 0; i < r; ++i)
    if (i != axis) s.push_back(x.shape()[i]);
  out[0] = {s, int64};
}

}  // namespace

void ReduceSum::infer(std::span<const Tensor> in, std::span<TensorMeta> out) const {
  infer_reduction(name(), false, axes, keepdims, in, out);
}
void ReduceProd::infer(std::span<const Tensor> in, std::span<TensorMeta> out) const {
  infer_reduction(name(), false, axes, keepdims, in, out);
}
void ReduceMax::infer(std::span<const Tensor> in, std::span<TensorMeta> out) const {
  infer_reduction(name(), true, axes, keepdims, in, out);
}
void ReduceMin::infer(std::span<const Tensor> in, std::span<TensorMeta> out) const {
  infer_reduction(name(), true, axes, keepdims, in, out);
}
std::string ReduceSum::attributes() const {
  return reduction_attributes(axes, keepdims);
}
std::string ReduceProd::attributes() const {
  return reduction_attributes(axes, keepdims);
}
std::string ReduceMax::attributes() const {
  return reduction_attributes(axes, keepdims);
}
std::string ReduceMin::attributes() const {
  return reduction_attributes(axes, keepdims);
}

void ArgMax::infer(std::span<const Tensor> in, std::span<TensorMeta> out) const {
  infer_arg(name(), axis, in, out);
}
void ArgMin::infer(std::span<const Tensor> in, std::span<TensorMeta> out) const {
  infer_arg(name(), axis, in, out);
}
std::string ArgMax::attributes() const {
  return "axis=" + std::to_string(axis);
}
std::string ArgMin::attributes() const {
  return "axis=" + std::to_string(axis);
}

}  // namespace prims

}  // namespace tapeflow

namespace tapeflow {

namespace detail {
int merge_reduce_axes(const TensorShape& shape, std::span<const int> axes, ReduceGroup* g) {
  int m = 0;
  size_t k = 0;
  for (int i = 0; i < shape.rank(); ++i) {
    const bool red = k < axes.size() && axes[k] == i;
    if (red) ++k;
    const int64_t d = shape[i];
    if (d == 1) continue;
    if (m > 0 && g[m - 1].reduced == red)
      g[m - 1].n *= d;
    else
      g[m++] = {d, red};
  }
  return m;
}

int64_t reduced_count(const TensorShape& shape, std::span<const int> axes) {
  int64_t n = 1;
  for (int a : axes) n *= shape[a];
  return n;
}

Tensor sum_to_shape(const Tensor& g, const TensorShape& shape) {
  if (g.shape() == shape) return g;
  const int lead = g.rank() - shape.rank();
  TF_CHECK_T(InternalError, lead >= 0, "sum_to_shape", "cannot sum {} to {}",
             g.shape().to_string(), shape.to_string());
  std::vector<int> axes;
  for (int d = 0; d < g.rank(); ++d)
    if (d < lead || (shape[d - lead] == 1 && g.shape()[d] != 1)) axes.push_back(d);
  Tensor s = axes.empty() ? g : reduce_sum(g, axes, /*keepdims=*/true);
  if (open_shapes()) {
    // Only the leading dimensions go; the sizes of the others come from g when it runs.
    std::vector<int> lead_axes(static_cast<size_t>(lead));
    std::iota(lead_axes.begin(), lead_axes.end(), 0);
    return remove_axes(s, lead_axes);
  }
  return reshape(s, shape);
}
}  // namespace detail

namespace prims {

namespace {
using Span = std::span<const Tensor>;

// A reduction's output (or its cotangent) reshaped to keep the reduced axes as size 1, so that
// it broadcasts against the input.
Tensor expand_back(const Tensor& g, const Tensor& x, const std::vector<int>& axes,
                   bool keepdims) {
  Tensor k = g;
  if (!keepdims && detail::open_shapes()) {
    std::vector<int> sorted = axes;
    std::sort(sorted.begin(), sorted.end());
    return detail::insert_axes(g, sorted);
  }
  if (!keepdims) {
    TensorShape kept;
    for (int d = 0; d < x.rank(); ++d)
      kept.push_back(std::find(axes.begin(), axes.end(), d) != axes.end() ? 1 : x.shape()[d]);
    k = reshape(g, kept);
  }
  return k;
}
}  // namespace

uint32_t ReduceSum::vjp_saves() const { return 0; }
std::vector<Tensor> ReduceSum::vjp(Span p, Span cts, std::span<const int>, Span) const {
  return {detail::broadcast_like(expand_back(cts[0], p[0], axes, keepdims), p[0])};
}

// d prod / d x_i = product of the others: y / x_i where x_i != 0; with exactly one zero in a
// slice, the zero's gradient is the product of the nonzeros and the rest get 0; with two or
// more zeros, all get 0. Half and float32 inputs are taken through float64, so that a product
// that over- or underflows their range (two values of 1e30 in float32) does not turn the
// quotients into inf or 0 (TF multiplies exclusive products instead of dividing: here an
// infinite element's own gradient is NaN, inf / inf, and a NaN makes its slice's all NaN).
uint32_t ReduceProd::vjp_saves() const {
  return Primitive::save_input(0);
}
std::vector<Tensor> ReduceProd::vjp(Span p, Span cts, std::span<const int>, Span) const {
  const DType dt = p[0].dtype();
  const bool widen = dt == float32 || dt == float16 || dt == bfloat16;
  const Tensor x = widen ? cast(p[0], float64) : p[0];
  const Tensor g = expand_back(cts[0], p[0], axes, keepdims);
  const Tensor is_zero = equal(x, 0);
  const Tensor one = ones_like(x);
  const Tensor safe_x = where(is_zero, one, x);
  const Tensor zeros_in_slice = reduce_sum(cast(is_zero, x.dtype()), axes, true);
  const Tensor prod_nonzero = reduce_prod(safe_x, axes, true);
  const Tensor y = reduce_prod(x, axes, true);
  const Tensor at_zero = where(equal(zeros_in_slice, 1), prod_nonzero, zeros_like(prod_nonzero));
  const Tensor others = where(is_zero, at_zero, y / safe_x);  // where broadcasts at_zero
  return {g * (widen ? cast(others, dt) : others)};
}

// The cotangent is shared equally among the elements equal to the extremum (as TF).
static Tensor extremum_vjp(const Tensor& x, const Tensor& g_in, const Tensor& y_in,
                           const std::vector<int>& axes, bool keepdims) {
  const Tensor g = expand_back(g_in, x, axes, keepdims);
  const Tensor y = expand_back(y_in, x, axes, keepdims);
  const Tensor hit = cast(equal(x, y), x.dtype());
  const Tensor count = reduce_sum(hit, axes, true);
  return hit * (g / count);
}

uint32_t ReduceMax::vjp_saves() const {
  return Primitive::save_input(0) | Primitive::save_output(0);
}
std::vector<Tensor> ReduceMax::vjp(Span p, Span cts, std::span<const int>, Span outs) const {
  return {extremum_vjp(p[0], cts[0], outs[0], axes, keepdims)};
}
uint32_t ReduceMin::vjp_saves() const {
  return Primitive::save_input(0) | Primitive::save_output(0);
}
std::vector<Tensor> ReduceMin::vjp(Span p, Span cts, std::span<const int>, Span outs) const {
  return {extremum_vjp(p[0], cts[0], outs[0], axes, keepdims)};
}

}  // namespace prims
}  // namespace tapeflow
