#include "ops/binary.h"

#include <array>

#include "core/check.h"
#include "ops/dispatch.h"
#include "ops/factory.h"
#include "ops/helpers.h"
#include "ops/reduce.h"
#include "ops/unary.h"

namespace tapeflow {

namespace detail {
namespace {

void binary_infer(const char* op, BinaryKind kind, std::span<const Tensor> in,
                  std::span<TensorMeta> out) {
  const DType da = in[0].dtype(), db = in[1].dtype();
  TF_CHECK_ARG(da == db, op,
               "dtypes differ: {} and {} (tapeflow does not promote types; convert one operand "
               "with tf::cast)",
               dtype_name(da), dtype_name(db));
  DType result = da;
  switch (kind) {
    case BinaryKind::Arithmetic:
      TF_CHECK_ARG(!is_bool(da), op, "expects numeric tensors, got {}", dtype_name(da));
      break;
    case BinaryKind::TrueDivide:
      TF_CHECK_ARG(!is_bool(da), op, "expects numeric tensors, got {}", dtype_name(da));
      if (da == uint8) result = float32;
      else if (is_integer(da)) result = float64;
      break;
    case BinaryKind::Compare:
      TF_CHECK_ARG(!is_bool(da), op, "expects numeric tensors, got {}", dtype_name(da));
      result = bool_;
      break;
    case BinaryKind::Equality: result = bool_; break;
    case BinaryKind::Logical:
      TF_CHECK_ARG(is_bool(da), op, "expects bool tensors, got {}", dtype_name(da));
      break;
    case BinaryKind::Floating:
      TF_CHECK_ARG(is_floating(da), op,
                   "expects floating-point tensors (float16, bfloat16, float32, float64), got {}",
                   dtype_name(da));
      break;
    case BinaryKind::Bitwise:
      TF_CHECK_ARG(is_integer(da), op, "expects integer tensors (int32, int64, uint8), got {}",
                   dtype_name(da));
      break;
  }
  out[0] = {broadcast_shapes(op, in[0].shape(), in[1].shape()), result};
}

// TF's dtype rule, skipped when both operands already agree (the common, tiny-tensor case).
template <class P>
Tensor binary(const char* op, const Tensor& a, const Tensor& b) {
  if (a.defined() && b.defined() && a.dtype() == b.dtype()) return dispatch(P{}, {a, b});
  auto [x, y] = unify_dtypes(op, a, b);
  return dispatch(P{}, {x, y});
}

}  // namespace
}  // namespace detail

namespace prims {

#define TF_BINARY_INFER(STRUCT)                                                         \
  void STRUCT::infer(std::span<const Tensor> in, std::span<TensorMeta> out) const {     \
    detail::binary_infer(name(), kKind, in, out);                                       \
  }
TF_BINARY_INFER(Add)
TF_BINARY_INFER(Subtract)
TF_BINARY_INFER(Multiply)
TF_BINARY_INFER(Divide)
TF_BINARY_INFER(Pow)
TF_BINARY_INFER(Maximum)
TF_BINARY_INFER(Minimum)
TF_BINARY_INFER(FloorDiv)
TF_BINARY_INFER(FloorMod)
TF_BINARY_INFER(Equal)
TF_BINARY_INFER(NotEqual)
TF_BINARY_INFER(Less)
TF_BINARY_INFER(LessEqual)
TF_BINARY_INFER(Greater)
TF_BINARY_INFER(GreaterEqual)
TF_BINARY_INFER(LogicalAnd)
TF_BINARY_INFER(LogicalOr)
TF_BINARY_INFER(Atan2)
TF_BINARY_INFER(BitwiseAnd)
TF_BINARY_INFER(BitwiseOr)
TF_BINARY_INFER(BitwiseXor)
TF_BINARY_INFER(LeftShift)
TF_BINARY_INFER(RightShift)
#undef TF_BINARY_INFER

void Select::infer(std::span<const Tensor> in, std::span<TensorMeta> out) const {
  const Tensor &c = in[0], &x = in[1], &y = in[2];
  TF_CHECK_ARG(is_bool(c.dtype()), "where", "expects a bool condition, got {}",
               dtype_name(c.dtype()));
  TF_CHECK_ARG(x.dtype() == y.dtype(), "where",
               "dtypes of x and y differ: {} and {} (tapeflow does not promote types; convert "
               "one operand with tf::cast)",
               dtype_name(x.dtype()), dtype_name(y.dtype()));
  TensorShape shape;
  try {
    shape = detail::broadcast_shapes("where", detail::broadcast_shapes("where", c.shape(),
                                                                       x.shape()),
                                     y.shape());
  } catch (const InvalidArgumentError&) {
    TF_THROW(InvalidArgumentError, "where",
             "shapes of condition {}, x {} and y {} cannot be broadcast together",
             c.shape().to_string(), x.shape().to_string(), y.shape().to_string());
  }
  out[0] = {shape, x.dtype()};
}

}  // namespace prims

Tensor add(const Tensor& a, const Tensor& b) { return detail::binary<prims::Add>("add", a, b); }
Tensor subtract(const Tensor& a, const Tensor& b) {
  return detail::binary<prims::Subtract>("subtract", a, b);
}
Tensor multiply(const Tensor& a, const Tensor& b) {
  return detail::binary<prims::Multiply>("multiply", a, b);
}
Tensor divide(const Tensor& a, const Tensor& b) {
  return detail::binary<prims::Divide>("divide", a, b);
}
Tensor pow(const Tensor& a, const Tensor& b) { return detail::binary<prims::Pow>("pow", a, b); }
Tensor maximum(const Tensor& a, const Tensor& b) {
  return detail::binary<prims::Maximum>("maximum", a, b);
}
Tensor minimum(const Tensor& a, const Tensor& b) {
  return detail::binary<prims::Minimum>("minimum", a, b);
}
Tensor floordiv(const Tensor& a, const Tensor& b) {
  return detail::binary<prims::FloorDiv>("floordiv", a, b);
}
Tensor floormod(const Tensor& a, const Tensor& b) {
  return detail::binary<prims::FloorMod>("floormod", a, b);
}
Tensor atan2(const Tensor& y, const Tensor& x) {
  return detail::binary<prims::Atan2>("atan2", y, x);
}
Tensor equal(const Tensor& a, const Tensor& b) {
  return detail::binary<prims::Equal>("equal", a, b);
}
Tensor not_equal(const Tensor& a, const Tensor& b) {
  return detail::binary<prims::NotEqual>("not_equal", a, b);
}
Tensor less(const Tensor& a, const Tensor& b) { return detail::binary<prims::Less>("less", a, b); }
Tensor less_equal(const Tensor& a, const Tensor& b) {
  return detail::binary<prims::LessEqual>("less_equal", a, b);
}
Tensor greater(const Tensor& a, const Tensor& b) {
  return detail::binary<prims::Greater>("greater", a, b);
}
Tensor greater_equal(const Tensor& a, const Tensor& b) {
  return detail::binary<prims::GreaterEqual>("greater_equal", a, b);
}
Tensor logical_and(const Tensor& a, const Tensor& b) {
  return detail::binary<prims::LogicalAnd>("logical_and", a, b);
}
Tensor logical_or(const Tensor& a, const Tensor& b) {
  return detail::binary<prims::LogicalOr>("logical_or", a, b);
}
Tensor logical_xor(const Tensor& a, const Tensor& b) {
  const char* op = "logical_xor";
  auto [x, y] = detail::unify_dtypes(op, a, b);
  TF_CHECK_ARG(is_bool(x.dtype()), op, "expects bool tensors, got {}", dtype_name(x.dtype()));
  detail::broadcast_shapes(op, x.shape(), y.shape());  // errors name logical_xor
  return not_equal(x, y);
}

namespace bitwise {
Tensor bitwise_and(const Tensor& x, const Tensor& y) {
  return detail::binary<prims::BitwiseAnd>("bitwise_and", x, y);
}
Tensor bitwise_or(const Tensor& x, const Tensor& y) {
  return detail::binary<prims::BitwiseOr>("bitwise_or", x, y);
}
Tensor bitwise_xor(const Tensor& x, const Tensor& y) {
  return detail::binary<prims::BitwiseXor>("bitwise_xor", x, y);
}
Tensor left_shift(const Tensor& x, const Tensor& y) {
  return detail::binary<prims::LeftShift>("left_shift", x, y);
}
Tensor right_shift(const Tensor& x, const Tensor& y) {
  return detail::binary<prims::RightShift>("right_shift", x, y);
}
}  // namespace bitwise

Tensor where(const Tensor& cond, const Tensor& x, const Tensor& y) {
  TF_CHECK_ARG(cond.defined(), "where", "the condition is an undefined tensor (TF's None)");
  std::array<Tensor, 2> xy{x, y};
  detail::unify_dtypes("where", xy);
  return detail::dispatch(prims::Select{}, {cond, xy[0], xy[1]});
}

Tensor clip_by_value(const Tensor& t, const Tensor& clip_value_min,
                     const Tensor& clip_value_max) {
  std::array<Tensor, 3> v{t, clip_value_min, clip_value_max};
  detail::unify_dtypes("clip_by_value", v);
  TF_CHECK_ARG(!is_bool(v[0].dtype()), "clip_by_value", "expects numeric tensors, got {}",
               dtype_name(v[0].dtype()));
  // As TF: the clip values may broadcast to t's shape but must not grow it.
  for (int i = 1; i < 3; ++i)
    TF_CHECK_ARG(detail::broadcast_shapes("clip_by_value", v[0].shape(), v[i].shape()) ==
                     v[0].shape(),
                 "clip_by_value", "{} of shape {} does not broadcast to t's shape {}",
                 i == 1 ? "clip_value_min" : "clip_value_max", v[i].shape().to_string(),
                 v[0].shape().to_string());
  // TF's order: minimum with the upper bound first, then maximum with the lower one.
  return maximum(minimum(v[0], v[2]), v[1]);
}

namespace {
// TF's clip_by_norm: l2sum = sum(t * t) over the axes (kept); where l2sum is 0 the norm is
// l2sum itself and sqrt reads 1 instead (the "two-tap where" that keeps the gradient finite);
// then t * clip_norm / max(l2norm, clip_norm).
Tensor clip_by_norm_impl(const Tensor& t, const Tensor& clip_norm, const std::vector<int>* axes) {
  const char* op = "clip_by_norm";
  TF_CHECK_ARG(t.defined() && clip_norm.defined(), op,
               "an input is an undefined tensor (TF's None)");
  detail::check_dtype_floating(op, t);
  Tensor cn = cast(clip_norm, t.dtype());
  TF_CHECK_ARG(detail::broadcast_shapes(op, t.shape(), cn.shape()) == t.shape(), op,
               "clip_norm of shape {} does not broadcast to t's shape {}", cn.shape().to_string(),
               t.shape().to_string());
  cn = maximum(cn, zeros_like(cn));  // a negative clip_norm counts as 0
  std::vector<int> all;
  if (axes == nullptr)
    for (int d = 0; d < t.rank(); ++d) all.push_back(d);
  const Tensor l2sum = reduce_sum(t * t, axes != nullptr ? *axes : all, true);
  const Tensor pred = greater(l2sum, zeros_like(l2sum));
  const Tensor l2sum_safe = where(pred, l2sum, ones_like(l2sum));
  const Tensor l2norm = where(pred, sqrt(l2sum_safe), l2sum);
  return (t * cn) / maximum(l2norm, cn);
}
}  // namespace

Tensor clip_by_norm(const Tensor& t, const Tensor& clip_norm) {
  return clip_by_norm_impl(t, clip_norm, nullptr);
}
Tensor clip_by_norm(const Tensor& t, const Tensor& clip_norm, int axis) {
  const std::vector<int> axes{axis};
  return clip_by_norm_impl(t, clip_norm, &axes);
}
Tensor clip_by_norm(const Tensor& t, const Tensor& clip_norm, const std::vector<int>& axes) {
  return clip_by_norm_impl(t, clip_norm, &axes);
}

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return subtract(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return multiply(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return divide(a, b); }
Tensor operator%(const Tensor& a, const Tensor& b) { return floormod(a, b); }

namespace {
// Python's &, |, ^ on TF tensors: the logical op on bool operands, the bitwise one otherwise
// (which names itself when it refuses a floating dtype).
Tensor logical_or_bitwise(const char* op, const Tensor& a, const Tensor& b,
                          Tensor (*logical)(const Tensor&, const Tensor&),
                          Tensor (*bits)(const Tensor&, const Tensor&)) {
  auto [x, y] = detail::unify_dtypes(op, a, b);
  return is_bool(x.dtype()) ? logical(x, y) : bits(x, y);
}
}  // namespace
Tensor operator&(const Tensor& a, const Tensor& b) {
  return logical_or_bitwise("operator&", a, b, logical_and, bitwise::bitwise_and);
}
Tensor operator|(const Tensor& a, const Tensor& b) {
  return logical_or_bitwise("operator|", a, b, logical_or, bitwise::bitwise_or);
}
Tensor operator^(const Tensor& a, const Tensor& b) {
  return logical_or_bitwise("operator^", a, b, logical_xor, bitwise::bitwise_xor);
}

}  // namespace tapeflow

// ---- gradients: each cotangent is summed back to its operand's (broadcast) shape ----
namespace tapeflow::prims {

namespace {
using Span = std::span<const Tensor>;
constexpr uint32_t kBoth = Primitive::save_input(0) | Primitive::save_input(1);

// Calls f(k) for each requested input k and collects the gradients, summed to input shapes.
template <class F>
std::vector<Tensor> each_arg(Span primals, std::span<const int> argnums, F&& f) {
  std::vector<Tensor> out;
  out.reserve(argnums.size());
  for (int k : argnums) out.push_back(detail::sum_to_shape(f(k), primals[k].shape()));
  return out;
}
}  // namespace

uint32_t Add::vjp_saves() const { return 0; }
std::vector<Tensor> Add::vjp(Span primals, Span cts, std::span<const int> argnums, Span) const {
  return each_arg(primals, argnums, [&](int) { return cts[0]; });
}

uint32_t Subtract::vjp_saves() const { return 0; }
std::vector<Tensor> Subtract::vjp(Span primals, Span cts, std::span<const int> argnums,
                                  Span) const {
  return each_arg(primals, argnums, [&](int k) { return k == 0 ? cts[0] : negative(cts[0]); });
}

uint32_t Multiply::vjp_saves() const { return kBoth; }
std::vector<Tensor> Multiply::vjp(Span primals, Span cts, std::span<const int> argnums,
                                  Span) const {
  return each_arg(primals, argnums, [&](int k) { return cts[0] * primals[1 - k]; });
}

uint32_t Divide::vjp_saves() const { return kBoth; }
std::vector<Tensor> Divide::vjp(Span p, Span cts, std::span<const int> argnums, Span) const {
  const Tensor& g = cts[0];
  return each_arg(p, argnums, [&](int k) {
    // (-a / b) / b, as TF: b * b over- or underflows first (a = b = 1e-30 in float32 gave -inf,
    // not -1e30).
    return k == 0 ? g / p[1] : g * ((negative(p[0]) / p[1]) / p[1]);
  });
}

// d/dx x^y = y x^(y-1); d/dy x^y = x^y log(x), taken as 0 where x <= 0 (as TF).
uint32_t Pow::vjp_saves() const { return kBoth | Primitive::save_output(0); }
std::vector<Tensor> Pow::vjp(Span p, Span cts, std::span<const int> argnums, Span outs) const {
  const Tensor& g = cts[0];
  return each_arg(p, argnums, [&](int k) {
    if (k == 0) return g * p[1] * pow(p[0], p[1] - 1);
    const Tensor positive = greater(p[0], 0);
    const Tensor safe_x = where(positive, p[0], ones_like(p[0]));
    return g * outs[0] * where(positive, log(safe_x), zeros_like(p[0]));
  });
}

// Piecewise constant: no gradient for either operand (TF registers None). The bitwise ops
// have integer outputs, which tapes never record; TF registers no gradient either.
#define TF_NO_GRADIENT_VJP(STRUCT)                                                        \
  uint32_t STRUCT::vjp_saves() const {                                                    \
    return 0;                                                                             \
  }                                                                                       \
  std::vector<Tensor> STRUCT::vjp(Span, Span, std::span<const int> argnums, Span) const { \
    return std::vector<Tensor>(argnums.size());                                           \
  }
TF_NO_GRADIENT_VJP(FloorDiv)
TF_NO_GRADIENT_VJP(BitwiseAnd)
TF_NO_GRADIENT_VJP(BitwiseOr)
TF_NO_GRADIENT_VJP(BitwiseXor)
TF_NO_GRADIENT_VJP(LeftShift)
TF_NO_GRADIENT_VJP(RightShift)
#undef TF_NO_GRADIENT_VJP

// a - floor(a / b) * b: (g, -floordiv(a, b) * g), TF's _FloorModGrad.
uint32_t FloorMod::vjp_saves() const { return kBoth; }
std::vector<Tensor> FloorMod::vjp(Span p, Span cts, std::span<const int> argnums, Span) const {
  const Tensor& g = cts[0];
  return each_arg(p, argnums,
                  [&](int k) { return k == 0 ? g : g * negative(floordiv(p[0], p[1])); });
}

// atan2(y, x): (x g, -y g) / (x^2 + y^2), TF's _Atan2Grad.
uint32_t Atan2::vjp_saves() const { return kBoth; }
std::vector<Tensor> Atan2::vjp(Span p, Span cts, std::span<const int> argnums, Span) const {
  const Tensor grad_inv = cts[0] / (square(p[1]) + square(p[0]));
  return each_arg(p, argnums,
                  [&](int k) { return k == 0 ? p[1] * grad_inv : negative(p[0]) * grad_inv; });
}

// The cotangent goes to x where x wins (ties to x), else to y, as TF.
static std::vector<Tensor> winner_vjp(std::span<const Tensor> p, const Tensor& g,
                                      std::span<const int> argnums, const Tensor& x_wins) {
  const Tensor zero = zeros_like(g);
  return each_arg(p, argnums, [&](int k) {
    return k == 0 ? where(x_wins, g, zero) : where(x_wins, zero, g);
  });
}

uint32_t Maximum::vjp_saves() const { return kBoth; }
std::vector<Tensor> Maximum::vjp(Span p, Span cts, std::span<const int> argnums, Span) const {
  return winner_vjp(p, cts[0], argnums, greater_equal(p[0], p[1]));
}

uint32_t Minimum::vjp_saves() const { return kBoth; }
std::vector<Tensor> Minimum::vjp(Span p, Span cts, std::span<const int> argnums, Span) const {
  return winner_vjp(p, cts[0], argnums, less_equal(p[0], p[1]));
}

// Comparisons and logical ops have bool outputs: tapes never record them.
#define TF_BOOL_RESULT_VJP(STRUCT)                                                        \
  uint32_t STRUCT::vjp_saves() const { return 0; }                                         \
  std::vector<Tensor> STRUCT::vjp(Span p, Span c, std::span<const int> a, Span o) const {  \
    return Primitive::vjp(p, c, a, o);                                                     \
  }
TF_BOOL_RESULT_VJP(Equal)
TF_BOOL_RESULT_VJP(NotEqual)
TF_BOOL_RESULT_VJP(Less)
TF_BOOL_RESULT_VJP(LessEqual)
TF_BOOL_RESULT_VJP(Greater)
TF_BOOL_RESULT_VJP(GreaterEqual)
TF_BOOL_RESULT_VJP(LogicalAnd)
TF_BOOL_RESULT_VJP(LogicalOr)
#undef TF_BOOL_RESULT_VJP

// where(c, x, y): the condition has no gradient.
uint32_t Select::vjp_saves() const { return Primitive::save_input(0); }
std::vector<Tensor> Select::vjp(Span p, Span cts, std::span<const int> argnums, Span) const {
  const Tensor zero = zeros_like(cts[0]);
  std::vector<Tensor> out;
  for (int k : argnums) {
    if (k == 0) {
      out.emplace_back();
      continue;
    }
    Tensor g = k == 1 ? where(p[0], cts[0], zero) : where(p[0], zero, cts[0]);
    out.push_back(detail::sum_to_shape(g, p[k].shape()));
  }
  return out;
}

}  // namespace tapeflow::prims
