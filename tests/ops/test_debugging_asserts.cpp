// tf.debugging's assertions (ops/debugging.h) on every device of devices_under_test(): the value
// checks pass and fail as TF 2.21's do (messages checked against TF's eager text, values in
// tf::print's format), broadcast, summarize, every dtype, inside traced functions at every call
// (one trace, None dimensions too, also under a GradientTape), and the static checks.
#include <limits>
#include <string>
#include <vector>

#include "autograd/tape.h"
#include "autograd/variable.h"
#include "core/device.h"
#include "core/error.h"
#include "core/tensor.h"
#include "jit/function.h"
#include "ops/binary.h"
#include "ops/debugging.h"
#include "ops/factory.h"
#include "ops/movement.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
using tf::testing::check_values;
using tf::testing::require_error;

namespace {

tf::Tensor values(const std::vector<double>& v, tf::DType dtype = tf::float32) {
  return tf::cast(tf::constant(v, {static_cast<int64_t>(v.size())}), dtype);
}

// No exception.
template <class F>
void passes(F&& f) {
  CHECK_NOTHROW(f());
}

}  // namespace

TEST_CASE("debugging asserts: comparisons pass, and fail with TF's message",
          "[cpu][cuda][debugging]") {
  namespace dbg = tf::debugging;
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor x = values({1, 2, 3, 4, 5}), y = values({1, 3, 2, 4, 0});
    // TF 2.21: tf.debugging.assert_less(x, y) raises "Condition x < y did not hold.\nIndices of
    // first 3 different values:\n[[0]\n [2]\n [3]]\nCorresponding x values:\n[1. 3. 4.]\n
    // Corresponding y values:\n[1. 2. 4.]\nFirst 3 elements of x:\n[1. 2. 3.]\nFirst 3 elements
    // of y:\n[1. 3. 2.]" (numpy's "1." where tf::print writes "1").
    require_error([&] { dbg::assert_less(x, y); },
                  {"[assert_less] Condition x < y did not hold.\nIndices of first 3 different "
                   "values:\n[[0]\n [2]\n [3]]\nCorresponding x values:\n[1 3 4]\nCorresponding "
                   "y values:\n[1 2 4]\nFirst 3 elements of x:\n[1 2 3]\nFirst 3 elements of "
                   "y:\n[1 3 2]"});
    // The message first; summarize caps every list.
    require_error([&] { dbg::assert_less(x, y, "my msg", 2); },
                  {"[assert_less] my msg\nCondition x < y did not hold.\nIndices of first 2 "
                   "different values:\n[[0]\n [2]]\nCorresponding x values:\n[1 3]\nCorresponding "
                   "y values:\n[1 2]\nFirst 2 elements of x:\n[1 2]\nFirst 2 elements of y:\n[1 "
                   "3]"});
    require_error([&] { dbg::assert_equal(x, y); },
                  {"[assert_equal] Condition x == y did not hold.\nIndices of first 3 different "
                   "values:\n[[1]\n [2]\n [4]]\nCorresponding x values:\n[2 3 5]"});
    require_error([&] { dbg::assert_none_equal(x, y); },
                  {"Condition x != y did not hold.\nIndices of first 2 different values:\n[[0]\n "
                   "[3]]"});
    require_error([&] { dbg::assert_greater_equal(x, y); },
                  {"[assert_greater_equal] Condition x >= y did not hold.\nIndices of first 1 "
                   "different values:\n[[1]]\nCorresponding x values:\n[2]\nCorresponding y "
                   "values:\n[3]"});
    require_error([&] { dbg::assert_greater(x, y); }, {"Condition x > y did not hold."});
    require_error([&] { dbg::assert_less_equal(x, y); }, {"Corresponding x values:\n[3 5]"});
    // A C++ scalar takes x's dtype (TF: "First 1 elements of y:\n[2.]").
    require_error([&] { dbg::assert_equal(x, 2.0); },
                  {"First 3 elements of x:\n[1 2 3]\nFirst 1 elements of y:\n[2]"});
    passes([&] { dbg::assert_less(x, x + 1.0f); });
    passes([&] { dbg::assert_less_equal(x, x); });
    passes([&] { dbg::assert_greater(x + 1.0f, x); });
    passes([&] { dbg::assert_greater_equal(x, y - 10.0f); });
    passes([&] { dbg::assert_equal(x, x); });
    passes([&] { dbg::assert_none_equal(x, x + 0.5f); });
    // Every element is checked: the failure is past the first thread's chunk and CUDA block.
    std::vector<double> big(300000, 0.5);
    big[299998] = 2;
    require_error([&] { dbg::assert_less(values(big), 1.0); },
                  {"Indices of first 1 different values:\n[[299998]]\nCorresponding x "
                   "values:\n[2]\nCorresponding y values:\n[1]\nFirst 3 elements of x:\n[0.5 0.5 "
                   "0.5]"});
    // Empty tensors pass (TF too).
    passes([&] { dbg::assert_less(tf::zeros({0, 3}), tf::zeros({0, 3})); });
    // summarize < 0: every element.
    require_error([&] { dbg::assert_equal(x, y, "", -1); },
                  {"First 5 elements of x:\n[1 2 3 4 5]"});
  }
}

TEST_CASE("debugging asserts: broadcast operands, other dtypes, the sign checks",
          "[cpu][cuda][debugging]") {
  namespace dbg = tf::debugging;
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    // (2, 3) against (3,): the indices are of the broadcast shape and the values are the
    // broadcast operands' (TF leaves both out when the shapes differ).
    const tf::Tensor m = tf::reshape(tf::range(0.0, 6.0, 1.0, tf::float32), {2, 3});
    require_error(
        [&] {
          dbg::assert_less(m, values({1, 2, 3}));
        },
        {"Condition x < y did not hold.\nIndices of first 3 different values:\n[[1 "
         "0]\n [1 1]\n [1 2]]\nCorresponding x values:\n[3 4 5]\nCorresponding y "
         "values:\n[1 2 3]\nFirst 3 elements of x:\n[0 1 2]\nFirst 3 elements of "
         "y:\n[1 2 3]"});
    passes([&] { dbg::assert_less(m, tf::fill({2, 1}, 6.0f)); });
    // Shapes that do not broadcast and dtypes that differ: errors naming the assertion.
    require_error(
        [&] {
          dbg::assert_less(tf::zeros({2, 3}), tf::zeros({3, 2}));
        },
        {"[assert_less]", "(2, 3)", "(3, 2)"});
    require_error([&] { dbg::assert_equal(values({1}), values({1}, tf::int32)); },
                  {"[assert_equal]", "float32", "int32"});
    require_error([&] { dbg::assert_less(tf::Tensor(), values({1})); },
                  {"[assert_less] x is an undefined tensor"});
    // Integers, bools, float16 and float64.
    require_error(
        [&] {
          dbg::assert_equal(values({7, 8}, tf::int64), values({7, 9}, tf::int64));
        },
        {"Corresponding x values:\n[8]\nCorresponding y values:\n[9]"});
    const tf::Tensor t = tf::constant<bool>({true, false}, {2});
    require_error(
        [&] {
          dbg::assert_equal(t, tf::constant<bool>({true, true}, {2}));
        },
        {"Indices of first 1 different values:\n[[1]]\nCorresponding x "
         "values:\n[0]\nCorresponding y values:\n[1]"});
    passes([&] { dbg::assert_greater(values({1.5, 2}, tf::float16), 1.0); });
    require_error([&] { dbg::assert_less(values({0.25}, tf::float64), 0.125); },
                  {"Corresponding x values:\n[0.25]"});
    // TF 2.21's assert_positive(x - 2) fails on [-1, 0, 1, 2, 3] at -1 and 0.
    const tf::Tensor d = values({-1, 0, 1, 2, 3});
    require_error([&] { dbg::assert_positive(d); },
                  {"[assert_positive] Condition x > 0 did not hold.\nIndices of first 2 "
                   "different values:\n[[0]\n [1]]\nCorresponding x values:\n[-1 0]\nFirst 3 "
                   "elements of x:\n[-1 0 1]"});
    require_error([&] { dbg::assert_non_negative(d, "counts"); },
                  {"[assert_non_negative] counts\nCondition x >= 0 did not hold.",
                   "Corresponding x values:\n[-1]\n"});
    require_error([&] { dbg::assert_negative(d); }, {"Corresponding x values:\n[0 1 2]"});
    require_error([&] { dbg::assert_non_positive(d); }, {"Corresponding x values:\n[1 2 3]"});
    passes([&] { dbg::assert_non_negative(values({0, 4}, tf::uint8)); });
    passes([&] { dbg::assert_positive(d + 2.0f); });
    require_error([&] { dbg::assert_positive(tf::constant<bool>({true}, {1})); },
                  {"[assert_positive] x must be a numeric tensor, got bool"});
  }
}

TEST_CASE("debugging asserts: assert_near's default tolerances and NaN", "[cpu][cuda][debugging]") {
  namespace dbg = tf::debugging;
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor x = values({1, 2, 3});
    // float32: 10 * eps = 1.19e-6 relative and absolute (TF's defaults).
    passes([&] { dbg::assert_near(x, x + 1e-6f); });
    require_error([&] { dbg::assert_near(x, x + 1e-5f); },
                  {"[assert_near] Condition |x - y| <= atol + rtol * |y| did not hold (rtol = "
                   "1.1920928955078125e-06, atol = 1.1920928955078125e-06).\nIndices of first 3 "
                   "different values:\n[[0]\n [1]\n [2]]"});
    passes([&] { dbg::assert_near(x, x + 1e-5f, 1e-4, 0.0); });
    passes([&] { dbg::assert_near(x, x + 0.5f, 0.0, 0.5); });
    // float64: 2.2e-15; float16: 9.8e-3.
    const tf::Tensor x64 = values({1, 2, 3}, tf::float64);
    require_error([&] { dbg::assert_near(x64, x64 + 1e-13); }, {"did not hold"});
    passes([&] {
      dbg::assert_near(values({1, 2}, tf::float16), values({1.0078125, 2}, tf::float16));
    });
    // NaN never holds.
    require_error(
        [&] { dbg::assert_near(values({std::numeric_limits<double>::quiet_NaN()}), values({0})); },
        {"Corresponding x values:\n[nan]"});
    require_error([&] { dbg::assert_near(values({1}, tf::int32), values({1}, tf::int32)); },
                  {"[assert_near] x and y must be floating tensors", "int32"});
    require_error([&] { dbg::assert_near(x, x, -1.0); }, {"rtol and atol must be non-negative"});
  }
}

TEST_CASE("debugging asserts: Assert prints its data when the condition is false",
          "[cpu][cuda][debugging]") {
  namespace dbg = tf::debugging;
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor x = values({1, 2, 3, 4, 5, 6, 7, 8});
    passes([&] { dbg::Assert(tf::reduce_all(tf::greater(x, 0.0f)), {"x is", x}); });
    // TF's graph text: "assertion failed: [x is] [1 2 3 ... 6 7 8]".
    require_error(
        [&] {
          dbg::Assert(tf::reduce_all(tf::greater(x, 2.0f)), {"x is", x});
        },
        {"[Assert] assertion failed: [x is] [1 2 3 ... 6 7 8]"});
    require_error(
        [&] {
          dbg::Assert(tf::reduce_any(tf::greater(x, 9.0f)), {x, "and", x}, 1);
        },
        {"assertion failed: [1 ... 8] [and] [1 ... 8]"});
    require_error([&] { dbg::Assert(tf::Tensor(false), {}); }, {"[Assert] assertion failed: "});
    require_error([&] { dbg::Assert(tf::greater(x, 0.0f), {"x"}); },
                  {"[Assert] condition must be a bool scalar, got bool of shape (8,)"});
  }
}

TEST_CASE("debugging asserts: a traced function checks at every call with one trace",
          "[cpu][cuda][debugging][function]") {
  namespace dbg = tf::debugging;
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    // Nothing reads the assertions: their nodes stay all the same (TF's automatic control
    // dependencies).
    auto f = tf::function([](const tf::Tensor& a, const tf::Tensor& b) {
      dbg::assert_less(a, b, "traced");
      dbg::assert_positive(b);
      dbg::Assert(tf::less(tf::reduce_sum(a), 100.0f), {"sum too large:", tf::reduce_sum(a)});
      return a + b;
    });
    check_values(f(values({1, 2}), values({3, 4})), {4, 6});
    check_values(f(values({0, 5}), values({1, 6})), {1, 11});
    require_error(
        [&] {
          f(values({1, 5}), values({2, 4}));
        },
        {"[assert_less] traced\nCondition x < y did not hold.\nIndices of first 1 "
         "different values:\n[[1]]\nCorresponding x values:\n[5]\nCorresponding y "
         "values:\n[4]"});
    require_error(
        [&] {
          f(values({-3, -2}), values({-1, 4}));
        },
        {"[assert_positive] Condition x > 0 did not hold."});
    require_error(
        [&] {
          f(values({60, 50}), values({70, 80}));
        },
        {"[Assert] assertion failed: [sum too large:] [110]"});
    CHECK(f.tracing_count() == 1);
    const std::string g =
        f.get_concrete_function(tf::TensorSpec({2}), tf::TensorSpec({2})).graph().to_string();
    CHECK(g.find("assert") != std::string::npos);
    CHECK(g.find("op=assert_less") != std::string::npos);

    // A None batch: one trace serves every length.
    auto h = tf::function(
        [](const tf::Tensor& a) {
          dbg::assert_non_negative(a);
          return tf::sqrt(a);
        },
        tf::FunctionOptions{.input_signature = {tf::TensorSpec({tf::None})}});
    check_values(h(values({4, 9})), {2, 3});
    check_values(h(values({1, 4, 16})), {1, 2, 4});
    require_error(
        [&] {
          h(values({1, 4, -16, 0}));
        },
        {"Indices of first 1 different values:\n[[2]]\nCorresponding x values:\n[-16]"});
    CHECK(h.tracing_count() == 1);

    // With jit_compile (fused kernels; on a GPU, CUDA graphs, which the check keeps out).
    auto k = tf::function(
        [](const tf::Tensor& a) {
          dbg::assert_less(a, 10.0f);
          return a * 2.0f + 1.0f;
        },
        tf::FunctionOptions{.jit_compile = true});
    check_values(k(values({1, 2})), {3, 5});
    check_values(k(values({3, 4})), {7, 9});
    require_error([&] { k(values({1, 20})); }, {"Corresponding x values:\n[20]"});

    // Under a tape the gradient flows around the check.
    tf::Variable v(values({1, 4}));
    tf::GradientTape tape;
    const tf::Tensor z = tf::reduce_sum(h(v.value()));
    check_values(tape.gradient(z, v), {0.5, 0.25});
  }
}

TEST_CASE("debugging asserts: rank, type and scalar are checked when called", "[cpu][debugging]") {
  namespace dbg = tf::debugging;
  const tf::Tensor x = values({1, 2, 3, 4, 5});
  // TF 2.21: "Tensor  must have rank 2.  Received rank 1, shape (5,)" (a ValueError).
  require_error([&] { dbg::assert_rank(x, 2); },
                {"[assert_rank] Tensor must have rank 2. Received rank 1, shape (5,)"});
  require_error([&] { dbg::assert_rank(x, 0, "need a scalar"); },
                {"[assert_rank] need a scalar Tensor must have rank 0."});
  passes([&] { dbg::assert_rank(x, 1); });
  passes([&] { dbg::assert_rank_at_least(x, 1); });
  require_error([&] { dbg::assert_rank_at_least(x, 2); }, {"must have rank at least 2"});
  passes([&] { dbg::assert_rank_in(x, {0, 1}); });
  require_error([&] { dbg::assert_rank_in(x, {2, 3}); }, {"must have rank in (2, 3)"});
  require_error([&] { dbg::assert_scalar(x); },
                {"[assert_scalar] Expected scalar shape, saw shape: (5,)"});
  passes([&] { dbg::assert_scalar(tf::Tensor(1.0f)); });
  require_error([&] { dbg::assert_type(x, tf::int32); },
                {"[assert_type] tensor must be of type int32; got float32"});
  passes([&] { dbg::assert_type(x, tf::float32); });
  require_error([&] { dbg::assert_integer(x); }, {"[assert_integer]", "float32"});
  passes([&] { dbg::assert_integer(values({1}, tf::int64)); });
  // In a trace the check runs while tracing, on the traced shape.
  auto f = tf::function([](const tf::Tensor& a) {
    dbg::assert_rank(a, 1);
    return a * 2.0f;
  });
  check_values(f(x), {2, 4, 6, 8, 10});
  require_error([&] { f(tf::zeros({2, 2})); }, {"Tensor must have rank 1. Received rank 2"});
  // assert_all_finite is check_numerics.
  require_error(
      [&] {
        dbg::assert_all_finite(values({std::numeric_limits<double>::infinity()}), "inf here");
      },
      {"inf here : Tensor had Inf values"});
}
