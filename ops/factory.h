// Tensor factories: constants from C++ values, filled tensors, ranges. They make tensors on the
// device of the innermost DeviceScope (TF's default placement without one).
#pragma once

#include <initializer_list>
#include <optional>
#include <type_traits>
#include <vector>

#include "core/tensor.h"

namespace tapeflow {

// A strongly typed scalar (unlike a C++ scalar converted implicitly, which is weak).
Tensor constant(const Tensor& scalar);
// `value` converted to dtype.
Tensor constant(const Tensor& value, DType dtype);
template <class T>
  requires std::is_arithmetic_v<T>
Tensor constant(const std::vector<T>& values, const TensorShape& shape);
template <class T>
  requires std::is_arithmetic_v<T>
Tensor constant(const std::vector<T>& values);  // 1-D
template <class T>
  requires std::is_arithmetic_v<T>
Tensor constant(std::initializer_list<T> values);
template <class T>
  requires std::is_arithmetic_v<T>
Tensor constant(std::initializer_list<std::initializer_list<T>> rows);

// Copies host data; the dtype comes from the element type (double -> float64).
template <class T>
  requires std::is_arithmetic_v<T>
Tensor convert_to_tensor(const std::vector<T>& values, const TensorShape& shape);
template <class T>
  requires std::is_arithmetic_v<T>
Tensor convert_to_tensor(const T* data, const TensorShape& shape);
inline Tensor convert_to_tensor(const Tensor& t) { return t; }

Tensor zeros(const TensorShape& shape, DType dtype = float32);
Tensor ones(const TensorShape& shape, DType dtype = float32);
// Every element equal to `value`, with value's dtype (a C++ float gives float32).
Tensor fill(const TensorShape& shape, const Tensor& value);
Tensor zeros_like(const Tensor& x, std::optional<DType> dtype = std::nullopt);
Tensor ones_like(const Tensor& x, std::optional<DType> dtype = std::nullopt);
// Identity matrix (num_rows x num_columns, square by default).
Tensor eye(int64_t num_rows, DType dtype = float32);
Tensor eye(int64_t num_rows, int64_t num_columns, DType dtype = float32);
// [start, limit) in steps of delta, with an explicit dtype. An integer dtype needs whole
// start, limit and delta (an InvalidArgumentError otherwise, where TF would cast a fractional
// delta to 0); its values are computed exactly in integers and each must be representable in
// the dtype (an InvalidArgumentError naming the value otherwise, never a wrapped or saturated
// one). bool is an InvalidArgumentError, as in TF.
Tensor range(double start, double limit, double delta, DType dtype);
namespace detail {
Tensor range_inferred(double start, double limit, double delta);
Tensor range_integers(int64_t start, int64_t limit, int64_t delta, std::optional<DType> dtype);
// An unsigned C++ integer as range's int64 argument (InvalidArgumentError above INT64_MAX).
int64_t range_argument(unsigned long long v);
template <class I>
int64_t range_arg(I v) {
  if constexpr (std::is_unsigned_v<I> && sizeof(I) >= sizeof(int64_t))
    return range_argument(v);
  else
    return static_cast<int64_t>(v);
}
}  // namespace detail
// C++ integer start, limit and delta with an explicit dtype: exact in int64 (no double in
// between, so int64 values beyond 2^53 stay exact).
template <class A, class B, class C>
requires(std::is_integral_v<A>&& std::is_integral_v<B>&& std::is_integral_v<C>) Tensor
    range(A start, B limit, C delta, DType dtype) {
  return detail::range_integers(detail::range_arg(start), detail::range_arg(limit),
                                detail::range_arg(delta), dtype);
}
// Without a dtype, the dtype follows the C++ types as TF's follows Python's: int32 when all
// three are integers (int64 when a value needs it; computed exactly in int64), else float32
// (range(0.0, 5.0) is float32).
template <class A, class B, class C = int>
  requires(std::is_arithmetic_v<A> && std::is_arithmetic_v<B> && std::is_arithmetic_v<C>)
Tensor range(A start, B limit, C delta = 1) {
    if constexpr (std::is_integral_v<A> && std::is_integral_v<B> && std::is_integral_v<C>)
      return detail::range_integers(detail::range_arg(start), detail::range_arg(limit),
                                    detail::range_arg(delta), std::nullopt);
    else
      return detail::range_inferred(static_cast<double>(start), static_cast<double>(limit),
                                    static_cast<double>(delta));
}
// range(limit): 0, 1, ..., limit - 1, int32 (int64 where the values need it).
template <class I>
  requires std::is_integral_v<I>
Tensor range(I limit) {
    return detail::range_integers(0, detail::range_arg(limit), 1, std::nullopt);
}
// num evenly spaced float32 values from start to stop inclusive.
Tensor linspace(double start, double stop, int64_t num);

namespace detail {
// Builds a tensor of `dtype` from doubles on the current device.
Tensor from_doubles(const std::vector<double>& values, const TensorShape& shape, DType dtype);
Tensor constant_impl(const void* data, DType src_dtype, const TensorShape& shape);
[[noreturn]] void throw_constant_size(const char* op, size_t n, const TensorShape& shape);
// convert_to_tensor's checks: a fully known shape, data unless the shape is empty, and room for
// `staged_bytes` of host staging.
void check_convert(const void* data, const TensorShape& shape, double staged_bytes);
}  // namespace detail

// ---- templates ----
namespace detail {
template <class T>
using storage_elem_t =
    std::conditional_t<std::is_same_v<T, bool> || std::is_same_v<T, float> ||
                           std::is_same_v<T, double> || std::is_same_v<T, uint8_t>,
                       T,
                       std::conditional_t<std::is_signed_v<T> && sizeof(T) <= 4, int32_t,
                                          std::conditional_t<std::is_floating_point_v<T>,
                                                             double, int64_t>>>;
}  // namespace detail

template <class T>
  requires std::is_arithmetic_v<T>
Tensor convert_to_tensor(const T* data, const TensorShape& shape) {
  using S = detail::storage_elem_t<T>;
  constexpr bool staged = !std::is_same_v<S, T> || std::is_same_v<T, bool>;
  detail::check_convert(data, shape,
                        staged ? static_cast<double>(shape.known_elements()) * sizeof(S) : 0.0);
  const size_t n = static_cast<size_t>(shape.num_elements());
  if constexpr (!staged) {
    return detail::constant_impl(data, dtype_of<S>(), shape);
  } else {
    std::vector<S> tmp(n);
    std::vector<uint8_t> tmpb;
    for (size_t i = 0; i < n; ++i) tmp[i] = static_cast<S>(data[i]);
    if constexpr (std::is_same_v<S, bool>) {
      tmpb.resize(n);
      for (size_t i = 0; i < n; ++i) tmpb[i] = data[i] ? 1 : 0;
      return detail::constant_impl(tmpb.data(), bool_, shape);
    } else {
      return detail::constant_impl(tmp.data(), dtype_of<S>(), shape);
    }
  }
}

template <class T>
  requires std::is_arithmetic_v<T>
Tensor convert_to_tensor(const std::vector<T>& values, const TensorShape& shape) {
  if (values.size() != static_cast<size_t>(shape.num_elements()))
    detail::throw_constant_size("convert_to_tensor", values.size(), shape);
  if constexpr (std::is_same_v<T, bool>) {
    std::vector<uint8_t> b(values.begin(), values.end());
    return detail::constant_impl(b.data(), bool_, shape);
  } else {
    return convert_to_tensor(values.data(), shape);
  }
}

template <class T>
  requires std::is_arithmetic_v<T>
Tensor constant(const std::vector<T>& values, const TensorShape& shape) {
  if (values.size() != static_cast<size_t>(shape.num_elements()))
    detail::throw_constant_size("constant", values.size(), shape);
  return convert_to_tensor(values, shape);
}

template <class T>
  requires std::is_arithmetic_v<T>
Tensor constant(const std::vector<T>& values) {
  return convert_to_tensor(values, TensorShape{static_cast<int64_t>(values.size())});
}

template <class T>
  requires std::is_arithmetic_v<T>
Tensor constant(std::initializer_list<T> values) {
  return constant(std::vector<T>(values));
}

template <class T>
  requires std::is_arithmetic_v<T>
Tensor constant(std::initializer_list<std::initializer_list<T>> rows) {
  std::vector<T> flat;
  const size_t cols = rows.size() ? rows.begin()->size() : 0;
  for (auto& r : rows) {
    if (r.size() != cols)
      detail::throw_constant_size("constant", r.size(),
                                  TensorShape{static_cast<int64_t>(cols)});
    flat.insert(flat.end(), r.begin(), r.end());
  }
  return convert_to_tensor(flat, TensorShape{static_cast<int64_t>(rows.size()),
                                             static_cast<int64_t>(cols)});
}

}  // namespace tapeflow
