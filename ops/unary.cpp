#include "ops/unary.h"

#include "core/check.h"
#include "ops/dispatch.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/helpers.h"

namespace tapeflow {

namespace detail {
namespace {

void check_unary_dtype(const char* op, UnaryDTypes accepted, DType d) {
  switch (accepted) {
    case UnaryDTypes::Floating:
      TF_CHECK_ARG(is_floating(d), op,
                   "expects a floating-point tensor (float16, bfloat16, float32, float64), got {}",
                   dtype_name(d));
      break;
    case UnaryDTypes::FloatingSigned:
      TF_CHECK_ARG(is_floating(d) || d == int32 || d == int64, op,
                   "expects a floating-point, int32 or int64 tensor, got {}", dtype_name(d));
      break;
    case UnaryDTypes::FloatingInteger:
    case UnaryDTypes::Numeric:
      TF_CHECK_ARG(!is_bool(d), op,
                   "expects a floating-point or integer tensor (not bool), got {}",
                   dtype_name(d));
      break;
    case UnaryDTypes::Bool:
      TF_CHECK_ARG(is_bool(d), op, "expects a bool tensor, got {}", dtype_name(d));
      break;
    case UnaryDTypes::Integer:
      TF_CHECK_ARG(is_integer(d), op, "expects an integer tensor (int32, int64, uint8), got {}",
                   dtype_name(d));
      break;
  }
}

}  // namespace
}  // namespace detail

namespace prims {

#define TF_UNARY_INFER(STRUCT)                                                          \
  void STRUCT::infer(std::span<const Tensor> in, std::span<TensorMeta> out) const {     \
    detail::check_unary_dtype(name(), kDTypes, in[0].dtype());                          \
    out[0] = {in[0].shape(), in[0].dtype()};                                            \
  }
TF_UNARY_INFER(Negative)
TF_UNARY_INFER(Abs)
TF_UNARY_INFER(Sign)
TF_UNARY_INFER(Exp)
TF_UNARY_INFER(Log)
TF_UNARY_INFER(Log1p)
TF_UNARY_INFER(Sqrt)
TF_UNARY_INFER(Rsqrt)
TF_UNARY_INFER(Square)
TF_UNARY_INFER(Tanh)
TF_UNARY_INFER(Sigmoid)
TF_UNARY_INFER(Sin)
TF_UNARY_INFER(Cos)
TF_UNARY_INFER(Erf)
TF_UNARY_INFER(Erfc)
TF_UNARY_INFER(Softsign)
TF_UNARY_INFER(Tan)
TF_UNARY_INFER(Asin)
TF_UNARY_INFER(Acos)
TF_UNARY_INFER(Atan)
TF_UNARY_INFER(Sinh)
TF_UNARY_INFER(Cosh)
TF_UNARY_INFER(Asinh)
TF_UNARY_INFER(Acosh)
TF_UNARY_INFER(Atanh)
TF_UNARY_INFER(Expm1)
TF_UNARY_INFER(Floor)
TF_UNARY_INFER(Ceil)
TF_UNARY_INFER(Round)
TF_UNARY_INFER(LogicalNot)
TF_UNARY_INFER(Invert)
#undef TF_UNARY_INFER

void Cast::infer(std::span<const Tensor> in, std::span<TensorMeta> out) const {
  out[0] = {in[0].shape(), dtype};
}

std::string Cast::attributes() const { return fmt::format("dtype={}", dtype_name(dtype)); }

}  // namespace prims

Tensor negative(const Tensor& x) { return detail::dispatch(prims::Negative{}, {x}); }
Tensor abs(const Tensor& x) { return detail::dispatch(prims::Abs{}, {x}); }
Tensor sign(const Tensor& x) { return detail::dispatch(prims::Sign{}, {x}); }
Tensor exp(const Tensor& x) { return detail::dispatch(prims::Exp{}, {x}); }
Tensor log(const Tensor& x) { return detail::dispatch(prims::Log{}, {x}); }
Tensor log1p(const Tensor& x) { return detail::dispatch(prims::Log1p{}, {x}); }
Tensor sqrt(const Tensor& x) { return detail::dispatch(prims::Sqrt{}, {x}); }
Tensor rsqrt(const Tensor& x) { return detail::dispatch(prims::Rsqrt{}, {x}); }
Tensor square(const Tensor& x) { return detail::dispatch(prims::Square{}, {x}); }
Tensor tanh(const Tensor& x) { return detail::dispatch(prims::Tanh{}, {x}); }
Tensor sigmoid(const Tensor& x) { return detail::dispatch(prims::Sigmoid{}, {x}); }
Tensor sin(const Tensor& x) { return detail::dispatch(prims::Sin{}, {x}); }
Tensor cos(const Tensor& x) { return detail::dispatch(prims::Cos{}, {x}); }
Tensor erf(const Tensor& x) { return detail::dispatch(prims::Erf{}, {x}); }
Tensor erfc(const Tensor& x) { return detail::dispatch(prims::Erfc{}, {x}); }
Tensor tan(const Tensor& x) { return detail::dispatch(prims::Tan{}, {x}); }
Tensor asin(const Tensor& x) { return detail::dispatch(prims::Asin{}, {x}); }
Tensor acos(const Tensor& x) { return detail::dispatch(prims::Acos{}, {x}); }
Tensor atan(const Tensor& x) { return detail::dispatch(prims::Atan{}, {x}); }
Tensor sinh(const Tensor& x) { return detail::dispatch(prims::Sinh{}, {x}); }
Tensor cosh(const Tensor& x) { return detail::dispatch(prims::Cosh{}, {x}); }
Tensor asinh(const Tensor& x) { return detail::dispatch(prims::Asinh{}, {x}); }
Tensor acosh(const Tensor& x) { return detail::dispatch(prims::Acosh{}, {x}); }
Tensor atanh(const Tensor& x) { return detail::dispatch(prims::Atanh{}, {x}); }
Tensor expm1(const Tensor& x) { return detail::dispatch(prims::Expm1{}, {x}); }
Tensor floor(const Tensor& x) { return detail::dispatch(prims::Floor{}, {x}); }
Tensor ceil(const Tensor& x) { return detail::dispatch(prims::Ceil{}, {x}); }
Tensor round(const Tensor& x) { return detail::dispatch(prims::Round{}, {x}); }
Tensor logical_not(const Tensor& x) { return detail::dispatch(prims::LogicalNot{}, {x}); }
Tensor bitwise::invert(const Tensor& x) {
  return detail::dispatch(prims::Invert{}, {x});
}

Tensor cast(const Tensor& x, DType dtype) {
  TF_CHECK_ARG(x.defined(), "cast", "the input is an undefined tensor (TF's None)");
  // As tf.cast: a tensor that already has the dtype is returned as it is (a C++ scalar still
  // becomes a strongly typed tensor).
  if (x.dtype() == dtype && !x.is_weak()) return x;
  return detail::dispatch(prims::Cast{dtype}, {x});
}

Tensor operator-(const Tensor& x) { return negative(x); }
Tensor operator~(const Tensor& x) {
  TF_CHECK_ARG(x.defined(), "operator~", "the input is an undefined tensor (TF's None)");
  return is_bool(x.dtype()) ? logical_not(x) : bitwise::invert(x);
}

}  // namespace tapeflow

// ---- gradients (written with ops, so they differentiate and trace again) ----
namespace tapeflow::prims {

namespace {
using Span = std::span<const Tensor>;
constexpr uint32_t kNone = 0;
constexpr uint32_t kIn = Primitive::save_input(0);
constexpr uint32_t kOut = Primitive::save_output(0);

// TF's SqrtGrad and RsqrtGrad kernels give 0 where the upstream gradient is 0, also where the
// local derivative is infinite (0 * inf would be NaN), so that the masking idiom
// where(x > 0, sqrt(x), 0) has gradient 0 at x = 0.
Tensor zero_where_upstream_zero(const Tensor& g, const Tensor& grad) {
  const Tensor zero = zeros_like(g);
  return where(equal(g, zero), zero, grad);
}
}  // namespace

// Each unary vjp has one input: argnums is {0} whenever it is called.
#define TF_UNARY_VJP(STRUCT, SAVES, EXPR)                                              \
  uint32_t STRUCT::vjp_saves() const { return SAVES; }                                 \
  std::vector<Tensor> STRUCT::vjp(Span primals, Span cotangents, std::span<const int>, \
                                  Span outputs) const {                                \
    [[maybe_unused]] const Tensor& x = primals[0];                                     \
    [[maybe_unused]] const Tensor& y = outputs[0];                                     \
    [[maybe_unused]] const Tensor& g = cotangents[0];                                  \
    return {EXPR};                                                                     \
  }

TF_UNARY_VJP(Negative, kNone, negative(g))
TF_UNARY_VJP(Abs, kIn, g * sign(x))
TF_UNARY_VJP(Sign, kNone, zeros_like(g))
TF_UNARY_VJP(Exp, kOut, g * y)
TF_UNARY_VJP(Log, kIn, g / x)
TF_UNARY_VJP(Log1p, kIn, g / (x + 1))
TF_UNARY_VJP(Sqrt, kOut, zero_where_upstream_zero(g, g * 0.5 / y))
TF_UNARY_VJP(Rsqrt, kOut, zero_where_upstream_zero(g, g * -0.5 * y * y * y))
TF_UNARY_VJP(Square, kIn, g * (x * 2))
TF_UNARY_VJP(Tanh, kOut, g * (1 - y * y))
TF_UNARY_VJP(Sigmoid, kOut, g * y * (1 - y))
TF_UNARY_VJP(Sin, kIn, g * cos(x))
TF_UNARY_VJP(Cos, kIn, negative(g) * sin(x))
// d/dx erf(x) = 2 / sqrt(pi) exp(-x^2) (erfc: its negative), in TF's order of operations.
TF_UNARY_VJP(Erf, kIn, g * 1.1283791670955126 * exp(negative(square(x))))
TF_UNARY_VJP(Erfc, kIn, g * -1.1283791670955126 * exp(negative(square(x))))
// TF's SoftsignGrad: g / (1 + |x|)^2 (0 at +-inf).
TF_UNARY_VJP(Softsign, kIn, g / square(abs(x) + 1))
// The derivatives in TF's forms (its TanGrad ... AtanhGrad, Expm1Grad): tan' = sec(x)^2 with
// sec = 1 / cos(x), asin' = 1 / sqrt(1 - x^2), acos' = -asin', atan' = 1 / (1 + x^2),
// sinh' = cosh, cosh' = sinh, asinh' = 1 / cosh(y), acosh' = 1 / sinh(y),
// atanh' = 1 / (1 - x^2), expm1' = exp(x).
TF_UNARY_VJP(Tan, kIn, g * square(1 / cos(x)))
TF_UNARY_VJP(Asin, kIn, g * (1 / sqrt(1 - square(x))))
TF_UNARY_VJP(Acos, kIn, negative(g) * (1 / sqrt(1 - square(x))))
TF_UNARY_VJP(Atan, kIn, g * (1 / (1 + square(x))))
TF_UNARY_VJP(Sinh, kIn, g * cosh(x))
TF_UNARY_VJP(Cosh, kIn, g * sinh(x))
TF_UNARY_VJP(Asinh, kOut, g / cosh(y))
TF_UNARY_VJP(Acosh, kOut, g / sinh(y))
TF_UNARY_VJP(Atanh, kIn, g * (1 / (1 - square(x))))
TF_UNARY_VJP(Expm1, kIn, g * exp(x))
// Piecewise constant: zero almost everywhere.
TF_UNARY_VJP(Floor, kNone, zeros_like(g))
TF_UNARY_VJP(Ceil, kNone, zeros_like(g))
TF_UNARY_VJP(Round, kNone, zeros_like(g))
// bool -> bool: never recorded (no floating output).
TF_UNARY_VJP(LogicalNot, kNone, Tensor())
// Integer -> integer: never recorded; TF registers no gradient.
TF_UNARY_VJP(Invert, kNone, Tensor())
// Back to the input's dtype (a floating input; integer inputs are never watched).
TF_UNARY_VJP(Cast, kNone, cast(g, x.dtype()))
#undef TF_UNARY_VJP

}  // namespace tapeflow::prims
