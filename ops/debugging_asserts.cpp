// tf.debugging's assertions (ops/debugging.h): the value checks are one AssertThat node each (a
// host op kept in traced graphs, as tf::print's), fed the all-reduction of the element-wise
// condition and, for the message only, the condition and the operands; the static checks throw
// when called.
#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "core/check.h"
#include "ops/binary.h"
#include "ops/debugging.h"
#include "ops/dispatch.h"
#include "ops/helpers.h"
#include "ops/reduce.h"
#include "ops/unary.h"

namespace tapeflow {

namespace {

void check_defined(const char* op, const Tensor& t, const char* what) {
  TF_CHECK_ARG(t.defined(), op, "{} is an undefined tensor (TF's None)", what);
}

// The row-major position in `in` (broadcast to `out`) of position `flat` of `out`.
int64_t broadcast_source(const TensorShape& out, const TensorShape& in, int64_t flat) {
  int64_t src = 0, in_stride = 1;
  for (int d = out.rank() - 1, k = in.rank() - 1; d >= 0; --d, --k) {
    const int64_t n = out[d];
    const int64_t i = flat % n;
    flat /= n;
    if (k < 0) continue;
    if (in[k] != 1) src += i * in_stride;
    in_stride *= in[k];
  }
  return src;
}

// "[[0 1]\n [1 2]]": the coordinates of `flat` positions of `shape`, one row each (numpy's
// layout, as TF's message).
std::string coordinates_text(const TensorShape& shape, const std::vector<int64_t>& flat) {
  std::string out = "[";
  for (size_t r = 0; r < flat.size(); ++r)
    out += fmt::format("{}[{}]", r == 0 ? "" : "\n ",
                       fmt::join(detail::unravel_flat(shape, flat[r]), " "));
  return out + "]";
}

std::vector<int64_t> first_positions(int64_t n, int summarize) {
  const int64_t k = summarize < 0 ? n : std::min<int64_t>(summarize, n);
  std::vector<int64_t> v(static_cast<size_t>(k));
  for (int64_t i = 0; i < k; ++i) v[static_cast<size_t>(i)] = i;
  return v;
}

// Records (or, eagerly, runs) the check of an element-wise condition over its operands.
void record_check(const char* op, std::string condition, std::string detail, const Tensor& cond,
                  std::vector<Tensor> operands, std::vector<std::string> names,
                  const std::string& message, int summarize) {
  TF_ASSERT(names.size() == operands.size() && cond.dtype() == bool_);
  prims::AssertThat p;
  p.op = op;
  p.message = message;
  p.condition = std::move(condition);
  p.detail = std::move(detail);
  p.names = std::move(names);
  p.summarize = summarize;
  std::vector<Tensor> inputs{reduce_all(cond), cond};
  for (Tensor& t : operands) inputs.push_back(std::move(t));
  detail::dispatch_multi(p, inputs);
}

// The same over x, or x and y.
void check_condition(const char* op, std::string condition, std::string detail, const Tensor& cond,
                     std::vector<Tensor> operands, const std::string& message, int summarize) {
  std::vector<std::string> names{"x", "y"};
  names.resize(operands.size());
  record_check(op, std::move(condition), std::move(detail), cond, std::move(operands),
               std::move(names), message, summarize);
}

using Comparison = Tensor (*)(const Tensor&, const Tensor&);

void compare(const char* op, Comparison cmp, const char* condition, const Tensor& x,
             const Tensor& y, const std::string& message, int summarize) {
  check_defined(op, x, "x");
  check_defined(op, y, "y");
  const auto [a, b] = detail::unify_dtypes(op, x, y);
  (void)detail::broadcast_shapes(op, a.shape(), b.shape());
  check_condition(op, condition, "", cmp(a, b), {a, b}, message, summarize);
}

void compare_zero(const char* op, Comparison cmp, const char* condition, const Tensor& x,
                  const std::string& message, int summarize) {
  check_defined(op, x, "x");
  TF_CHECK_ARG(x.dtype() != bool_, op, "x must be a numeric tensor, got bool of shape {}",
               x.shape().to_string());
  check_condition(op, condition, "", cmp(x, detail::adopt_dtype(Tensor(0), x.dtype(), op)), {x},
                  message, summarize);
}

std::string prefix(const std::string& message) {
  return message.empty() ? "" : message + " ";
}

// 10 * the machine epsilon of a floating dtype (TF's default tolerance of assert_near).
double default_tolerance(DType dt) {
  switch (dt.id) {
    case DTypeId::Float16:
      return 10 * 9.765625e-4;
    case DTypeId::BFloat16:
      return 10 * 7.8125e-3;
    case DTypeId::Float32:
      return 10 * 1.1920928955078125e-7;
    default:
      return 10 * 2.220446049250313e-16;
  }
}

}  // namespace

namespace detail {

void check_elementwise(const char* op, const std::string& condition, const Tensor& cond,
                       const std::vector<Tensor>& operands, const std::vector<std::string>& names,
                       const std::string& message, int summarize) {
  record_check(op, condition, "", cond, operands, names, message, summarize);
}

}  // namespace detail

namespace debugging {

Tensor assert_all_finite(const Tensor& t, const std::string& message) {
  return check_numerics(t, message);
}

void assert_equal(const Tensor& x, const Tensor& y, const std::string& message, int summarize) {
  compare("assert_equal", &equal, "x == y", x, y, message, summarize);
}
void assert_none_equal(const Tensor& x, const Tensor& y, const std::string& message,
                       int summarize) {
  compare("assert_none_equal", &not_equal, "x != y", x, y, message, summarize);
}
void assert_less(const Tensor& x, const Tensor& y, const std::string& message, int summarize) {
  compare("assert_less", &less, "x < y", x, y, message, summarize);
}
void assert_less_equal(const Tensor& x, const Tensor& y, const std::string& message,
                       int summarize) {
  compare("assert_less_equal", &less_equal, "x <= y", x, y, message, summarize);
}
void assert_greater(const Tensor& x, const Tensor& y, const std::string& message, int summarize) {
  compare("assert_greater", &greater, "x > y", x, y, message, summarize);
}
void assert_greater_equal(const Tensor& x, const Tensor& y, const std::string& message,
                          int summarize) {
  compare("assert_greater_equal", &greater_equal, "x >= y", x, y, message, summarize);
}

void assert_positive(const Tensor& x, const std::string& message, int summarize) {
  compare_zero("assert_positive", &greater, "x > 0", x, message, summarize);
}
void assert_negative(const Tensor& x, const std::string& message, int summarize) {
  compare_zero("assert_negative", &less, "x < 0", x, message, summarize);
}
void assert_non_negative(const Tensor& x, const std::string& message, int summarize) {
  compare_zero("assert_non_negative", &greater_equal, "x >= 0", x, message, summarize);
}
void assert_non_positive(const Tensor& x, const std::string& message, int summarize) {
  compare_zero("assert_non_positive", &less_equal, "x <= 0", x, message, summarize);
}

void assert_near(const Tensor& x, const Tensor& y, std::optional<double> rtol,
                 std::optional<double> atol, const std::string& message, int summarize) {
  const char* op = "assert_near";
  check_defined(op, x, "x");
  check_defined(op, y, "y");
  const auto [a, b] = detail::unify_dtypes(op, x, y);
  TF_CHECK_ARG(is_floating(a.dtype()), op,
               "x and y must be floating tensors (float16, bfloat16, float32 or float64), got {}",
               dtype_name(a.dtype()));
  (void)detail::broadcast_shapes(op, a.shape(), b.shape());
  const double r = rtol.value_or(default_tolerance(a.dtype()));
  const double t = atol.value_or(default_tolerance(a.dtype()));
  TF_CHECK_ARG(r >= 0 && t >= 0, op, "rtol and atol must be non-negative, got {} and {}", r, t);
  const DType dt = a.dtype();
  const Tensor bound = detail::adopt_dtype(Tensor(t), dt, op) +
                       detail::adopt_dtype(Tensor(r), dt, op) * tapeflow::abs(b);
  check_condition(op, "|x - y| <= atol + rtol * |y|", fmt::format("rtol = {}, atol = {}", r, t),
                  less_equal(tapeflow::abs(a - b), bound), {a, b}, message, summarize);
}

void Assert(const Tensor& condition, const std::vector<PrintArg>& data, int summarize) {
  const char* op = "Assert";
  check_defined(op, condition, "condition");
  TF_CHECK_ARG(condition.dtype() == bool_ && condition.rank() == 0, op,
               "condition must be a bool scalar, got {} of shape {}", dtype_name(condition.dtype()),
               condition.shape().to_string());
  prims::AssertThat p;
  p.op = op;
  p.summarize = summarize;
  std::vector<Tensor> inputs{condition};
  for (const PrintArg& a : data) {
    if (const auto* s = std::get_if<std::string>(&a)) {
      p.pieces.emplace_back(*s);
    } else if (!std::get<Tensor>(a).defined()) {
      p.pieces.emplace_back(std::string("None"));
    } else {
      p.pieces.emplace_back(std::monostate{});
      inputs.push_back(std::get<Tensor>(a));
    }
  }
  detail::dispatch_multi(p, inputs);
}

void assert_rank(const Tensor& x, int rank, const std::string& message) {
  check_defined("assert_rank", x, "x");
  TF_CHECK_ARG(x.rank() == rank, "assert_rank",
               "{}Tensor must have rank {}. Received rank {}, shape {}", prefix(message), rank,
               x.rank(), x.shape().to_string());
}
void assert_rank_at_least(const Tensor& x, int rank, const std::string& message) {
  check_defined("assert_rank_at_least", x, "x");
  TF_CHECK_ARG(x.rank() >= rank, "assert_rank_at_least",
               "{}Tensor must have rank at least {}. Received rank {}, shape {}", prefix(message),
               rank, x.rank(), x.shape().to_string());
}
void assert_rank_in(const Tensor& x, const std::vector<int>& ranks, const std::string& message) {
  check_defined("assert_rank_in", x, "x");
  TF_CHECK_ARG(std::find(ranks.begin(), ranks.end(), x.rank()) != ranks.end(), "assert_rank_in",
               "{}Tensor must have rank in ({}). Received rank {}, shape {}", prefix(message),
               fmt::join(ranks, ", "), x.rank(), x.shape().to_string());
}
void assert_scalar(const Tensor& x, const std::string& message) {
  check_defined("assert_scalar", x, "x");
  TF_CHECK_ARG(x.rank() == 0, "assert_scalar", "{}Expected scalar shape, saw shape: {}",
               prefix(message), x.shape().to_string());
}
void assert_type(const Tensor& x, DType dtype, const std::string& message) {
  check_defined("assert_type", x, "x");
  TF_CHECK_ARG(x.dtype() == dtype, "assert_type", "{}tensor must be of type {}; got {}",
               prefix(message), dtype_name(dtype), dtype_name(x.dtype()));
}
void assert_integer(const Tensor& x, const std::string& message) {
  check_defined("assert_integer", x, "x");
  TF_CHECK_ARG(is_integer(x.dtype()), "assert_integer",
               "{}Expected x to be of integer type, found a tensor of dtype {}", prefix(message),
               dtype_name(x.dtype()));
}

DType assert_same_float_dtype(const std::vector<Tensor>& tensors, std::optional<DType> dtype) {
  const char* op = "assert_same_float_dtype";
  std::optional<DType> found = dtype;
  std::string first = dtype ? "the dtype argument" : "";
  for (size_t i = 0; i < tensors.size(); ++i) {
    check_defined(op, tensors[i], "a tensor");
    const DType d = tensors[i].dtype();
    if (!found) {
      found = d;
      first = fmt::format("tensor {}", i);
    }
    TF_CHECK_ARG(d == *found, op, "Expected {} for tensor {}, got {} (from {})", dtype_name(*found),
                 i, dtype_name(d), first);
  }
  const DType result = found.value_or(float32);
  TF_CHECK_ARG(is_floating(result), op, "Expected floating point type, got {}", dtype_name(result));
  return result;
}

bool is_numeric_tensor(const Tensor& x) {
  return x.defined() && !is_bool(x.dtype());
}

}  // namespace debugging

namespace prims {

void AssertThat::infer(std::span<const Tensor> in, std::span<TensorMeta>) const {
  TF_CHECK_T(InternalError, !in.empty() && in[0].dtype() == bool_ && in[0].rank() == 0, op.c_str(),
             "the check takes a bool scalar first");
  TF_CHECK_T(InternalError,
             !condition.empty()
                 ? in.size() == 2 + names.size()
                 : static_cast<size_t>(std::count_if(
                       pieces.begin(), pieces.end(),
                       [](const auto& p) { return std::holds_alternative<std::monostate>(p); })) ==
                       in.size() - 1,
             op.c_str(), "the check got {} inputs", in.size());
}

void AssertThat::eval_cpu(std::span<const Tensor> in, std::span<Tensor>) const {
  if (detail::host_elements<bool>(in[0])[0]) return;
  if (condition.empty()) {  // Assert: its data, each in brackets (TF's graph message)
    std::string text;
    size_t k = 1;
    for (const auto& piece : pieces) {
      if (!text.empty()) text += ' ';
      if (const auto* s = std::get_if<std::string>(&piece)) {
        text += "[" + *s + "]";
      } else {
        const Tensor& t = in[k++];  // tf::print's text has the brackets but for a scalar
        const std::string v = detail::print_v2_text(t, summarize);
        text += t.rank() == 0 ? "[" + v + "]" : v;
      }
    }
    TF_THROW(InvalidArgumentError, op.c_str(), "assertion failed: {}", text);
  }
  const Tensor& cond = in[1];
  std::string text = message.empty() ? "" : message + "\n";
  text += fmt::format("Condition {} did not hold{}.", condition,
                      detail.empty() ? "" : " (" + detail + ")");
  const std::vector<bool> holds = detail::host_elements<bool>(cond);
  std::vector<int64_t> bad;
  const size_t limit = summarize < 0 ? holds.size() : static_cast<size_t>(summarize);
  for (size_t i = 0; i < holds.size() && bad.size() < limit; ++i)
    if (!holds[i]) bad.push_back(static_cast<int64_t>(i));
  const std::span<const Tensor> operands = in.subspan(2);
  if (!bad.empty()) {
    text += fmt::format("\nIndices of first {} different values:\n{}", bad.size(),
                        coordinates_text(cond.shape(), bad));
    for (size_t k = 0; k < operands.size(); ++k) {
      std::vector<int64_t> at(bad.size());
      for (size_t i = 0; i < bad.size(); ++i)
        at[i] = broadcast_source(cond.shape(), operands[k].shape(), bad[i]);
      text += fmt::format("\nCorresponding {} values:\n{}", names[k],
                          detail::print_v2_elements(operands[k], at));
    }
  }
  for (size_t k = 0; k < operands.size(); ++k) {
    const std::vector<int64_t> first = first_positions(operands[k].num_elements(), summarize);
    text += fmt::format("\nFirst {} elements of {}:\n{}", first.size(), names[k],
                        detail::print_v2_elements(operands[k], first));
  }
  TF_THROW(InvalidArgumentError, op.c_str(), "{}", text);
}

// Host code either way: the values are read back through detail::host_elements.
void AssertThat::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  eval_cpu(in, out);
}

std::string AssertThat::attributes() const {
  std::string out = fmt::format("op={}", op);
  if (!condition.empty()) out += fmt::format(", condition=\"{}\"", condition);
  if (!detail.empty()) out += fmt::format(", {}", detail);
  if (!message.empty()) out += fmt::format(", message=\"{}\"", message);
  if (!pieces.empty()) {
    std::vector<std::string> data;
    for (const auto& piece : pieces) {
      const auto* s = std::get_if<std::string>(&piece);
      data.push_back(s ? fmt::format("\"{}\"", *s) : "<tensor>");
    }
    out += fmt::format(", data=[{}]", fmt::join(data, ", "));
  }
  return out + fmt::format(", summarize={}", summarize);
}

}  // namespace prims

}  // namespace tapeflow
