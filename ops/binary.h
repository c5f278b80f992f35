// Elementwise binary ops with numpy broadcasting, comparisons (bool results), logical ops,
// where and clip_by_value. A C++ scalar operand takes the tensor operand's dtype; two tensors of
// different dtypes are an InvalidArgumentError.
#pragma once

#include <initializer_list>
#include <vector>

#include "ops/primitive.h"

namespace tapeflow {

Tensor add(const Tensor& a, const Tensor& b);
Tensor subtract(const Tensor& a, const Tensor& b);
Tensor multiply(const Tensor& a, const Tensor& b);
// True division, as TF's tf.divide: uint8 operands give float32, int32 and int64 give float64.
Tensor divide(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
// TF's tf.math.floordiv and tf.math.floormod (Python's // and %), on numeric dtypes, the result
// of the operands' dtype. Floats: floor(a / b), and fmod(a, b) moved to the divisor's sign
// (floormod(-1, inf) is inf, floormod(-0.0, 3) is -0.0, a zero divisor gives +-inf or NaN).
// Integers round toward -inf and the remainder has the divisor's sign; a zero divisor anywhere
// in b is an InvalidArgumentError "Integer division by zero" (as TF's CPU kernel), and the most
// negative value divided by -1 wraps around to itself (remainder 0), as TF. floordiv has no
// gradient (TF's None); floormod's is (g, -floordiv(a, b) * g).
Tensor floordiv(const Tensor& a, const Tensor& b);
Tensor floormod(const Tensor& a, const Tensor& b);
// The angle of the point (x, y) in radians, in [-pi, pi], elementwise with broadcasting, as TF's
// tf.math.atan2(y, x): floating dtypes; C99's special values (atan2(0, -0) = pi,
// atan2(inf, -inf) = 3 pi / 4). Gradient (x g, -y g) / (x^2 + y^2), as TF (NaN at the origin).
Tensor atan2(const Tensor& y, const Tensor& x);

Tensor equal(const Tensor& a, const Tensor& b);
Tensor not_equal(const Tensor& a, const Tensor& b);
Tensor less(const Tensor& a, const Tensor& b);
Tensor less_equal(const Tensor& a, const Tensor& b);
Tensor greater(const Tensor& a, const Tensor& b);
Tensor greater_equal(const Tensor& a, const Tensor& b);

Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
// tf.math.logical_xor: bool tensors, true where exactly one is true.
Tensor logical_xor(const Tensor& a, const Tensor& b);

// tf.bitwise: integer tensors (int32, int64, uint8) of one dtype, broadcast; no gradient (TF
// registers none). The shifts clamp the amount to [0, bits - 1] as TF's kernels do: a negative
// amount shifts by 0, an amount of the width or more by bits - 1 (right_shift(-8, 40) is -1 in
// int32, left_shift(1, 40) the sign bit); signed right shifts are arithmetic, left shifts wrap.
// invert (~x) is in ops/unary.h.
namespace bitwise {
Tensor bitwise_and(const Tensor& x, const Tensor& y);
Tensor bitwise_or(const Tensor& x, const Tensor& y);
Tensor bitwise_xor(const Tensor& x, const Tensor& y);
Tensor left_shift(const Tensor& x, const Tensor& y);
Tensor right_shift(const Tensor& x, const Tensor& y);
}  // namespace bitwise

// Elements of x where cond is true, else of y; all three broadcast together.
Tensor where(const Tensor& cond, const Tensor& x, const Tensor& y);
// maximum(minimum(t, clip_value_max), clip_value_min), as TF computes it; the clip values may
// broadcast to t's shape but not grow it.
Tensor clip_by_value(const Tensor& t, const Tensor& clip_value_min, const Tensor& clip_value_max);
// t * clip_norm / max(l2norm(t), clip_norm), as TF's tf.clip_by_norm, with the L2 norm over
// every axis (no axes argument: TF's None), one axis, or a list of axes ({}: TF's axes=[], each
// element alone, as the reductions take {}). A negative clip_norm counts as 0; a zero slice
// stays zero with a finite gradient (TF's where trick); floating dtypes only. clip_norm (a
// scalar, or a tensor that broadcasts to t's shape without growing it) is cast to t's dtype.
Tensor clip_by_norm(const Tensor& t, const Tensor& clip_norm);
Tensor clip_by_norm(const Tensor& t, const Tensor& clip_norm, int axis);
Tensor clip_by_norm(const Tensor& t, const Tensor& clip_norm, const std::vector<int>& axes);
inline Tensor clip_by_norm(const Tensor& t, const Tensor& clip_norm,
                           std::initializer_list<int> axes) {
  return clip_by_norm(t, clip_norm, std::vector<int>(axes));
}

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
// floormod, as Python's % on TF tensors. (operator/ stays true division, as TF's /; floor
// division has no C++ operator: call floordiv.)
Tensor operator%(const Tensor& a, const Tensor& b);
// As Python's &, | and ^ on TF tensors: logical_and / logical_or / logical_xor on bool tensors,
// bitwise_and / bitwise_or / bitwise_xor on integer tensors (a floating operand is an
// InvalidArgumentError naming the bitwise op). ~ is in ops/unary.h.
Tensor operator&(const Tensor& a, const Tensor& b);
Tensor operator|(const Tensor& a, const Tensor& b);
Tensor operator^(const Tensor& a, const Tensor& b);

namespace detail {
// The dtypes a binary op accepts, and its result dtype.
enum class BinaryKind : uint8_t {
  Arithmetic,  // add, subtract, multiply, maximum, minimum, pow, floordiv, floormod: numeric,
               // result of that dtype
  TrueDivide,  // divide: numeric; uint8 -> float32, int32/int64 -> float64, floating -> same
  Compare,     // less, ...: numeric, bool result
  Equality,    // equal, not_equal: every dtype, bool result
  Logical,     // logical_and, logical_or: bool
  Floating,    // atan2: floating, result of that dtype
  Bitwise,     // bitwise_and, ..., left_shift, right_shift: int32, int64, uint8, same result
};
}  // namespace detail

namespace prims {

// One struct per op; operands have one dtype (the frontend applies TF's rule) and broadcast.
#define TF_DECLARE_BINARY_PRIMITIVE(STRUCT, NAME, KIND)                                       \
  struct STRUCT final : PrimitiveBase<STRUCT> {                                               \
    static constexpr detail::BinaryKind kKind = detail::BinaryKind::KIND;                     \
    const char* name() const override { return NAME; }                                        \
    void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override;         \
    bool is_elementwise() const override { return true; }                                     \
    TF_DECLARE_KERNELS                                                                        \
    TF_DECLARE_VJP                                                                            \
  };

TF_DECLARE_BINARY_PRIMITIVE(Add, "add", Arithmetic)
TF_DECLARE_BINARY_PRIMITIVE(Subtract, "subtract", Arithmetic)
TF_DECLARE_BINARY_PRIMITIVE(Multiply, "multiply", Arithmetic)
TF_DECLARE_BINARY_PRIMITIVE(Divide, "divide", TrueDivide)
TF_DECLARE_BINARY_PRIMITIVE(Pow, "pow", Arithmetic)
TF_DECLARE_BINARY_PRIMITIVE(Maximum, "maximum", Arithmetic)
TF_DECLARE_BINARY_PRIMITIVE(Minimum, "minimum", Arithmetic)
TF_DECLARE_BINARY_PRIMITIVE(FloorDiv, "floordiv", Arithmetic)
TF_DECLARE_BINARY_PRIMITIVE(FloorMod, "floormod", Arithmetic)
TF_DECLARE_BINARY_PRIMITIVE(Equal, "equal", Equality)
TF_DECLARE_BINARY_PRIMITIVE(NotEqual, "not_equal", Equality)
TF_DECLARE_BINARY_PRIMITIVE(Less, "less", Compare)
TF_DECLARE_BINARY_PRIMITIVE(LessEqual, "less_equal", Compare)
TF_DECLARE_BINARY_PRIMITIVE(Greater, "greater", Compare)
TF_DECLARE_BINARY_PRIMITIVE(GreaterEqual, "greater_equal", Compare)
TF_DECLARE_BINARY_PRIMITIVE(LogicalAnd, "logical_and", Logical)
TF_DECLARE_BINARY_PRIMITIVE(LogicalOr, "logical_or", Logical)
TF_DECLARE_BINARY_PRIMITIVE(Atan2, "atan2", Floating)
TF_DECLARE_BINARY_PRIMITIVE(BitwiseAnd, "bitwise_and", Bitwise)
TF_DECLARE_BINARY_PRIMITIVE(BitwiseOr, "bitwise_or", Bitwise)
TF_DECLARE_BINARY_PRIMITIVE(BitwiseXor, "bitwise_xor", Bitwise)
TF_DECLARE_BINARY_PRIMITIVE(LeftShift, "left_shift", Bitwise)
TF_DECLARE_BINARY_PRIMITIVE(RightShift, "right_shift", Bitwise)
#undef TF_DECLARE_BINARY_PRIMITIVE

// where(cond, x, y): inputs {cond (bool), x, y}, all three broadcast; x and y share a dtype.
struct Select final : PrimitiveBase<Select> {
  const char* name() const override { return "where"; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override;
  bool is_elementwise() const override { return true; }
  TF_DECLARE_KERNELS
  TF_DECLARE_VJP
};

}  // namespace prims

}  // namespace tapeflow
