#include "ops/helpers.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "ops/factory.h"

namespace tapeflow::detail {

TensorShape broadcast_shapes(const char* op, const TensorShape& a, const TensorShape& b) {
  if (a == b) return a;
  const int r = std::max(a.rank(), b.rank());
  TensorShape out;
  for (int i = 0; i < r; ++i) {
    const int ia = a.rank() - r + i, ib = b.rank() - r + i;
    const int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    int64_t d;
    if (da == db) d = da;
    else if (da == 1) d = db;
    else if (db == 1) d = da;
    else if (da == None || db == None) d = da == None ? db : da;  // symbolic: trust the known one
    else
      TF_THROW(InvalidArgumentError, op, "shapes {} and {} cannot be broadcast together",
               a.to_string(), b.to_string());
    out.push_back(d);
  }
  return out;
}

int normalize_axis(const char* op, int64_t axis, const TensorShape& shape) {
  const int rank = shape.rank();
  TF_CHECK_ARG(axis >= -rank && axis < rank, op,
               "axis {} is out of range for a tensor of rank {} (shape {}; expected [{}, {}))",
               axis, rank, shape.to_string(), -rank, rank);
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

std::vector<int> normalize_axes(const char* op, std::span<const int> axes,
                                const TensorShape& shape) {
  std::vector<int> out;
  out.reserve(axes.size());
  for (int a : axes) out.push_back(normalize_axis(op, a, shape));
  std::sort(out.begin(), out.end());
  TF_CHECK_ARG(std::adjacent_find(out.begin(), out.end()) == out.end(), op,
               "axes {} contain a duplicate", vec_to_string(axes));
  return out;
}

namespace {

bool exact_in(double v, DType dtype) {
  if (is_floating(dtype)) return true;
  const bool integral = std::isfinite(v) && v == std::trunc(v);
  if (dtype == int64) return integral && v >= -0x1p63 && v < 0x1p63;
  if (dtype == int32) return integral && v >= -0x1p31 && v < 0x1p31;
  if (dtype == uint8) return integral && v >= 0 && v <= 255;
  return v == 0 || v == 1;  // bool
}
bool exact_in(int64_t v, DType dtype) {
  if (is_floating(dtype) || dtype == int64) return true;
  if (dtype == int32) return v >= INT32_MIN && v <= INT32_MAX;
  if (dtype == uint8) return v >= 0 && v <= 255;
  return v == 0 || v == 1;  // bool
}

// A weak C++ scalar converts to an integer or bool dtype only when its value survives (TF:
// "Cannot convert 2.5 to EagerTensor of dtype int32"); floating dtypes take any value, rounded.
void check_exact(const char* op, const Tensor& x, DType dtype) {
  if (is_floating(dtype)) return;
  const bool floating = is_floating(x.dtype());
  const double d = floating ? x.item<double>() : 0.0;
  const int64_t i = floating ? 0 : x.item<int64_t>();
  TF_CHECK_ARG(floating ? exact_in(d, dtype) : exact_in(i, dtype), op,
               "the C++ scalar {} cannot be converted to {} without changing its value (a C++ "
               "scalar takes the other operand's dtype only when it is exact, as in TF; convert "
               "the tensor with tf::cast)",
               floating ? fmt::format("{}", d) : fmt::format("{}", i), dtype_name(dtype));
}

}  // namespace

void check_value_fits(const char* op, const char* what, double v, DType dtype) {
  TF_CHECK_ARG(exact_in(v, dtype), op, "{} {} cannot be represented exactly as {}", what, v,
               dtype_name(dtype));
}

void check_integer_fits(const char* op, const char* what, int64_t v, DType dtype) {
  TF_CHECK_ARG(exact_in(v, dtype), op, "{} {} cannot be represented exactly as {}", what, v,
               dtype_name(dtype));
}

Tensor adopt_dtype(const Tensor& x, DType dtype, const char* op) {
  if (x.dtype() == dtype || !x.is_weak()) return x;
  check_exact(op, x, dtype);
  // A weak C++ scalar (one element, on the host): convert it there, without an op.
  Tensor c;
  if (dtype == int64 && is_integer(x.dtype())) {
    const int64_t v = x.item<int64_t>();
    c = from_host<int64_t>(&v, x.shape(), x.placement());
  } else {
    c = from_doubles({x.item<double>()}, x.shape(), dtype);
  }
  if (c.placement() != x.placement()) c = copy_to_device(c, x.placement());
  c.impl()->weak = true;
  return c;
}

std::pair<Tensor, Tensor> unify_dtypes(const char* op, const Tensor& a, const Tensor& b) {
  TF_CHECK_ARG(a.defined() && b.defined(), op, "an input is an undefined tensor (TF's None)");
  if (a.dtype() == b.dtype()) return {a, b};
  if (a.is_weak() && !b.is_weak()) return {adopt_dtype(a, b.dtype(), op), b};
  if (b.is_weak() && !a.is_weak()) return {a, adopt_dtype(b, a.dtype(), op)};
  if (a.is_weak() && b.is_weak()) {
    // Two C++ scalars: the floating (then the wider) type wins, as Python's would.
    auto rank_of = [](DType d) {
      return d == bool_ ? 0 : d == uint8 ? 1 : d == int32 ? 2 : d == int64 ? 3 : d == float32 ? 4 : 5;
    };
    DType t = rank_of(a.dtype()) >= rank_of(b.dtype()) ? a.dtype() : b.dtype();
    return {adopt_dtype(a, t, op), adopt_dtype(b, t, op)};
  }
  TF_THROW(InvalidArgumentError, op,
           "dtypes differ: {} and {} (tapeflow does not promote types; convert one operand "
           "with tf::cast)",
           dtype_name(a.dtype()), dtype_name(b.dtype()));
}

void unify_dtypes(const char* op, std::span<Tensor> operands) {
  const Tensor* strong = nullptr;
  for (auto& t : operands) {
    TF_CHECK_ARG(t.defined(), op, "an input is an undefined tensor (TF's None)");
    if (!t.is_weak()) {
      if (!strong) strong = &t;
      else
        TF_CHECK_ARG(t.dtype() == strong->dtype(), op,
                     "dtypes differ: {} and {} (tapeflow does not promote types; convert one "
                     "operand with tf::cast)",
                     dtype_name(strong->dtype()), dtype_name(t.dtype()));
    }
  }
  if (!strong) {
    for (size_t i = 1; i < operands.size(); ++i) {
      auto [a, b] = unify_dtypes(op, operands[0], operands[i]);
      operands[0] = a;
      operands[i] = b;
    }
    for (auto& t : operands) t = adopt_dtype(t, operands[0].dtype(), op);
    return;
  }
  const DType d = strong->dtype();
  for (auto& t : operands) t = adopt_dtype(t, d, op);
}

void check_dtype_floating(const char* op, const Tensor& x) {
  TF_CHECK_ARG(is_floating(x.dtype()), op,
               "expects a floating-point tensor (float16, bfloat16, float32, float64), got {}",
               dtype_name(x.dtype()));
}
void check_float_pair(const char* op, const char* a_name, const Tensor& a, const char* b_name,
                      const Tensor& b) {
  TF_CHECK_ARG(a.dtype() == b.dtype(), op, "{} and {} dtypes differ: {} and {} ({} is {}, {} {})",
               a_name, b_name, dtype_name(a.dtype()), dtype_name(b.dtype()), a_name,
               a.shape().to_string(), b_name, b.shape().to_string());
  TF_CHECK_ARG(is_floating(a.dtype()), op,
               "expects float16, bfloat16, float32 or float64 tensors, got {}",
               dtype_name(a.dtype()));
}
void check_dtype_not_bool(const char* op, const Tensor& x) {
  TF_CHECK_ARG(!is_bool(x.dtype()), op, "is not defined for bool tensors");
}
void check_dtype_bool(const char* op, const Tensor& x) {
  TF_CHECK_ARG(is_bool(x.dtype()), op, "expects a bool tensor, got {}", dtype_name(x.dtype()));
}
void check_rank_at_least(const char* op, const Tensor& x, int rank) {
  TF_CHECK_ARG(x.rank() >= rank, op, "expects a tensor of rank at least {}, got shape {}", rank,
               x.shape().to_string());
}

void check_element_count(const char* op, const TensorShape& s) {
  bool overflow = false;
  int64_t count = 1;
  for (int64_t d : s)
    if (d > 0) overflow |= __builtin_mul_overflow(count, d, &count);
  TF_CHECK_ARG(!overflow, op, "the output of shape {} has more elements than an int64 can count",
               s.to_string());
}

std::array<int64_t, TensorShape::kMaxRank> contiguous_strides(const TensorShape& s) {
  std::array<int64_t, TensorShape::kMaxRank> st{};
  int64_t acc = 1;
  for (int i = s.rank() - 1; i >= 0; --i) {
    st[i] = acc;
    acc *= s[i];
  }
  return st;
}

std::array<int64_t, TensorShape::kMaxRank> broadcast_strides(const TensorShape& in,
                                                             const TensorShape& out) {
  std::array<int64_t, TensorShape::kMaxRank> st{};
  const auto cs = contiguous_strides(in);
  const int off = out.rank() - in.rank();
  for (int i = 0; i < out.rank(); ++i) {
    const int j = i - off;
    st[i] = (j < 0 || in[j] == 1) ? 0 : cs[j];
  }
  return st;
}

std::string vec_to_string(std::span<const int64_t> v) {
  return fmt::format("[{}]", fmt::join(v, ", "));
}
void check_int_tensor(const char* op, const Tensor& t, const std::string& what) {
  TF_CHECK_ARG(t.defined(), op, "{} is an undefined tensor (TF's None)", what);
  TF_CHECK_ARG(t.dtype() == int32 || t.dtype() == int64, op, "{} must be int32 or int64, got {}",
               what, dtype_name(t.dtype()));
}

std::vector<int64_t> host_ints(const char* op, const Tensor& t, const std::string& what) {
  TF_CHECK_ARG(!t.is_symbolic(), op,
               "the result's shape depends on the values of {}, which a traced function does not "
               "have (inside tf::function only constant {} serve)",
               what, what);
  return host_elements<int64_t>(t);
}

std::vector<int64_t> unravel_flat(const TensorShape& s, int64_t flat) {
  std::vector<int64_t> c(static_cast<size_t>(s.rank()));
  for (int d = s.rank() - 1; d >= 0; --d) {
    c[static_cast<size_t>(d)] = flat % s[d];
    flat /= s[d];
  }
  return c;
}

std::string vec_to_string(std::span<const int> v) { return fmt::format("[{}]", fmt::join(v, ", ")); }

}  // namespace tapeflow::detail
