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
// The error function and its complement 1 - erf(x) (TF's tf.math.erf, tf.math.erfc); erfc keeps
// its relative accuracy where erf(x) is close to 1.
Tensor erf(const Tensor& x);
Tensor erfc(const Tensor& x);
// Trigonometric and hyperbolic functions and their inverses, and exp(x) - 1 (accurate near 0),
// as TF's tf.math.tan ... tf.math.atanh and tf.math.expm1; floating dtypes. Outside an inverse's
// domain the result is NaN (asin(2), acosh(0.5)), at its poles +-inf (atanh(1)), as TF.
// Also exported in namespace tf::math (ops/math.h).
Tensor tan(const Tensor& x);
Tensor asin(const Tensor& x);
Tensor acos(const Tensor& x);
Tensor atan(const Tensor& x);
Tensor sinh(const Tensor& x);
Tensor cosh(const Tensor& x);
Tensor asinh(const Tensor& x);
Tensor acosh(const Tensor& x);
Tensor atanh(const Tensor& x);
Tensor expm1(const Tensor& x);
Tensor floor(const Tensor& x);
Tensor ceil(const Tensor& x);
// Rounds half to even, as TF's tf.round.
Tensor round(const Tensor& x);
Tensor logical_not(const Tensor& x);
namespace bitwise {
// tf.bitwise.invert: every bit flipped (~x), integer tensors (int32, int64, uint8); no gradient.
Tensor invert(const Tensor& x);
}  // namespace bitwise
// Converts to dtype (float -> int truncates toward zero; to bool: x != 0).
Tensor cast(const Tensor& x, DType dtype);

Tensor operator-(const Tensor& x);
// As Python's ~ on TF tensors: logical_not on bool tensors, bitwise::invert on integer ones.
Tensor operator~(const Tensor& x);

namespace detail {
// The dtypes a unary op accepts (TF's kernel registrations).
enum class UnaryDTypes : uint8_t {
  Floating,         // exp, log, tanh, ... floor, ceil
  FloatingSigned,   // negative, sign: floating, int32, int64
  FloatingInteger,  // abs, square: floating, int32, int64, uint8
  Numeric,          // round: every dtype but bool (identity on integers)
  Bool,             // logical_not
  Integer,          // bitwise::invert: int32, int64, uint8
};
}  // namespace detail

namespace prims {

// One struct per op; the output has the input's shape (and dtype, except logical_not and cast).
#define TF_DECLARE_UNARY_PRIMITIVE(STRUCT, NAME, DTYPES)                                      \
  struct STRUCT final : PrimitiveBase<STRUCT> {                                               \
    static constexpr detail::UnaryDTypes kDTypes = detail::UnaryDTypes::DTYPES;               \
    const char* name() const override { return NAME; }                                        \
    void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override;         \
    bool is_elementwise() const override { return true; }                                     \
    TF_DECLARE_KERNELS                                                                        \
    TF_DECLARE_VJP                                                                            \
  };

TF_DECLARE_UNARY_PRIMITIVE(Negative, "negative", FloatingSigned)
TF_DECLARE_UNARY_PRIMITIVE(Abs, "abs", FloatingInteger)
TF_DECLARE_UNARY_PRIMITIVE(Sign, "sign", FloatingSigned)
TF_DECLARE_UNARY_PRIMITIVE(Exp, "exp", Floating)
TF_DECLARE_UNARY_PRIMITIVE(Log, "log", Floating)
TF_DECLARE_UNARY_PRIMITIVE(Log1p, "log1p", Floating)
TF_DECLARE_UNARY_PRIMITIVE(Sqrt, "sqrt", Floating)
TF_DECLARE_UNARY_PRIMITIVE(Rsqrt, "rsqrt", Floating)
TF_DECLARE_UNARY_PRIMITIVE(Square, "square", FloatingInteger)
TF_DECLARE_UNARY_PRIMITIVE(Tanh, "tanh", Floating)
TF_DECLARE_UNARY_PRIMITIVE(Sigmoid, "sigmoid", Floating)
TF_DECLARE_UNARY_PRIMITIVE(Sin, "sin", Floating)
TF_DECLARE_UNARY_PRIMITIVE(Cos, "cos", Floating)
TF_DECLARE_UNARY_PRIMITIVE(Erf, "erf", Floating)
TF_DECLARE_UNARY_PRIMITIVE(Erfc, "erfc", Floating)
// x / (1 + |x|): tf::nn::softsign (ops/nn.h). A primitive so that its gradient is TF's
// g / (1 + |x|)^2: the composite's differentiated form cancelled (4e-6 relative at x = 100 in
// float32, 6e-4 at 1e4) and gave NaN at +-inf.
TF_DECLARE_UNARY_PRIMITIVE(Softsign, "softsign", Floating)
TF_DECLARE_UNARY_PRIMITIVE(Tan, "tan", Floating)
TF_DECLARE_UNARY_PRIMITIVE(Asin, "asin", Floating)
TF_DECLARE_UNARY_PRIMITIVE(Acos, "acos", Floating)
TF_DECLARE_UNARY_PRIMITIVE(Atan, "atan", Floating)
TF_DECLARE_UNARY_PRIMITIVE(Sinh, "sinh", Floating)
TF_DECLARE_UNARY_PRIMITIVE(Cosh, "cosh", Floating)
TF_DECLARE_UNARY_PRIMITIVE(Asinh, "asinh", Floating)
TF_DECLARE_UNARY_PRIMITIVE(Acosh, "acosh", Floating)
TF_DECLARE_UNARY_PRIMITIVE(Atanh, "atanh", Floating)
TF_DECLARE_UNARY_PRIMITIVE(Expm1, "expm1", Floating)
TF_DECLARE_UNARY_PRIMITIVE(Floor, "floor", Floating)
TF_DECLARE_UNARY_PRIMITIVE(Ceil, "ceil", Floating)
TF_DECLARE_UNARY_PRIMITIVE(Round, "round", Numeric)
TF_DECLARE_UNARY_PRIMITIVE(LogicalNot, "logical_not", Bool)
TF_DECLARE_UNARY_PRIMITIVE(Invert, "invert", Integer)
#undef TF_DECLARE_UNARY_PRIMITIVE

// Any dtype to any dtype.
struct Cast final : PrimitiveBase<Cast> {
  DType dtype;
  explicit Cast(DType d) : dtype(d) {}
  const char* name() const override { return "cast"; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override;
  bool is_elementwise() const override { return true; }
  std::string attributes() const override;
  TF_DECLARE_KERNELS
  TF_DECLARE_VJP
};

}  // namespace prims

}  // namespace tapeflow
