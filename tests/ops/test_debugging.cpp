// tf.debugging.check_numerics and enable_check_numerics (ops/debugging.h) on every device of
// devices_under_test(): finite tensors pass through untouched, NaN and Inf raise TF's messages
// (checked against TF 2.21's text), gradients are checked, traced functions keep and run the
// check at every replay, and enable_check_numerics names the first op that makes a NaN or Inf.
#include <cmath>
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
#include "ops/reduce.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
using tf::testing::check_values;
using tf::testing::require_error;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

tf::Tensor values(const std::vector<double>& v, tf::DType dtype = tf::float32) {
  return tf::cast(tf::constant(v, {static_cast<int64_t>(v.size())}), dtype);
}

// enable_check_numerics for one scope (the switch is process-wide).
struct CheckNumericsOn {
  CheckNumericsOn() { tf::debugging::enable_check_numerics(); }
  ~CheckNumericsOn() { tf::debugging::disable_check_numerics(); }
  CheckNumericsOn(const CheckNumericsOn&) = delete;
  CheckNumericsOn& operator=(const CheckNumericsOn&) = delete;
};

}  // namespace

TEST_CASE("debugging: check_numerics passes finite tensors and raises TF's message on NaN/Inf",
          "[cpu][cuda][debugging]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    for (tf::DType dt : {tf::float16, tf::bfloat16, tf::float32, tf::float64}) {
      INFO("dtype " << tf::dtype_name(dt));
      const tf::Tensor ok = values({1, -2, 3.5, 0}, dt);
      const tf::Tensor same = tf::debugging::check_numerics(ok, "fine");
      CHECK(same.raw_data() == ok.raw_data());  // the same storage, no copy
      check_values(same, {1, -2, 3.5, 0});
      // TF 2.21: tf.debugging.check_numerics(tf.constant([1., nan, inf, 2.]), "my msg") raises
      // "my msg : Tensor had Inf and NaN values"; [nan] "... had NaN values"; [inf] "... had
      // Inf values".
      require_error(
          [&] {
            tf::debugging::check_numerics(values({1, kNaN, kInf, 2}, dt), "my msg");
          },
          {"[check_numerics] my msg : Tensor had Inf and NaN values"});
      require_error([&] { tf::debugging::check_numerics(values({kNaN}, dt), "my msg"); },
                    {"my msg : Tensor had NaN values"});
      require_error(
          [&] {
            tf::debugging::check_numerics(values({0, -kInf}, dt), "m");
          },
          {"m : Tensor had Inf values"});
    }
    // Past one thread's chunk of the CPU loop and one CUDA block: the lone NaN is found.
    std::vector<double> big(300000, 0.5);
    big[299999] = kNaN;
    require_error([&] { tf::debugging::check_numerics(values(big), "big"); },
                  {"big : Tensor had NaN values"});
    CHECK(tf::debugging::check_numerics(tf::zeros({0, 3}), "empty").shape() ==
          tf::TensorShape{0, 3});
  }
  // TF: "Value for attr 'T' of int32 is not in the list of allowed values".
  require_error(
      [] {
        tf::debugging::check_numerics(tf::constant(std::vector<int32_t>{1, 2}), "int");
      },
      {"check_numerics", "floating", "int32"});
}

TEST_CASE("debugging: check_numerics checks the gradient with TF's message", "[cpu][debugging]") {
  tf::Variable v(values({1.0, 0.0}), "v");
  {
    tf::GradientTape tape;
    tf::Tensor y = tf::debugging::check_numerics(v.value(), "fwd");
    tf::Tensor z = tf::reduce_sum(tf::square(y));
    check_values(tape.gradient(z, v), {2, 0});
  }
  // TF 2.21: log(check_numerics(v, "fwd")) at v = [1, 0]: the gradient 1/0 is Inf, and the
  // backward check raises "Not a number (NaN) or infinity (Inf) values detected in gradient.
  // b'fwd' : Tensor had Inf values".
  tf::GradientTape tape;
  tf::Tensor z = tf::reduce_sum(tf::log(tf::debugging::check_numerics(v.value(), "fwd")));
  require_error([&] { tape.gradient(z, v); },
                {"Not a number (NaN) or infinity (Inf) values detected in gradient. fwd : Tensor "
                 "had Inf values"});
}

TEST_CASE("debugging: check_numerics in a traced function runs at every replay",
          "[cpu][cuda][debugging][function]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    // The check's output is unused: the node must stay all the same.
    auto f = tf::function([](const tf::Tensor& x) {
      tf::debugging::check_numerics(x, "input");
      return tf::sqrt(x) * 2.0f;
    });
    check_values(f(values({4, 9})), {4, 6});
    check_values(f(values({1, 16})), {2, 8});
    require_error([&] { f(values({1, kNaN})); }, {"input : Tensor had NaN values"});
    CHECK(f.tracing_count() == 1);
    CHECK(f.get_concrete_function(tf::TensorSpec({2})).graph().to_string().find("check_numerics") !=
          std::string::npos);
  }
}

TEST_CASE("debugging: enable_check_numerics names the eager op that made a NaN or Inf",
          "[cpu][cuda][debugging]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor x = values({-1, 1});
    CHECK(std::isnan(tf::log(x).numpy<float>()[0]));  // off: no check
    CheckNumericsOn on;
    CHECK(tf::debugging::check_numerics_enabled());
    // TF 2.21: '!!! Detected Infinity or NaN in output 0 of eagerly-executing op "Log" (# of
    // outputs: 1) !!! dtype: float32, shape: (2,), # of +NaN elements: 1'.
    require_error([&] { tf::log(x); },
                  {"[log] !!! Detected Infinity or NaN in output 0 of eagerly-executing op log (# "
                   "of outputs: 1) !!!",
                   "dtype: float32, shape: (2,), # of NaN elements: 1", "inputs: float32 (2,)"});
    require_error(
        [&] {
          tf::divide(values({1, -1, 0}), values({0, 0, 1}));
        },
        {"[divide]", "# of -Inf elements: 1, # of +Inf elements: 1"});
    check_values(tf::exp(x), {std::exp(-1.0), std::exp(1.0)}, 1e-6);  // finite: unchanged
    CHECK(tf::cast(values({1, 2}), tf::int32).dtype() == tf::int32);  // integers: not checked
  }
  CHECK_FALSE(tf::debugging::check_numerics_enabled());
}

TEST_CASE("debugging: enable_check_numerics checks backward ops and functions traced while on",
          "[cpu][debugging][function]") {
  auto before = tf::function([](const tf::Tensor& x) { return tf::sqrt(x) * 2.0f; });
  CHECK(std::isnan(before(values({-1, 1})).numpy<float>()[0]));
  CheckNumericsOn on;
  // Traced before: not instrumented (TF's rule), so the replay gives the NaN.
  CHECK(std::isnan(before(values({-4, 1})).numpy<float>()[0]));
  auto after = tf::function([](const tf::Tensor& x) { return tf::sqrt(x) * 2.0f; });
  check_values(after(values({4, 1})), {4, 2});
  // TF 2.21: '!!! Detected Infinity or NaN in output 0 of graph op "Sqrt" (# of outputs: 1)'.
  require_error(
      [&] {
        after(values({-1, 1}));
      },
      {"[sqrt] !!! Detected Infinity or NaN in output 0 of graph op sqrt (# of "
       "outputs: 1) !!!",
       "# of NaN elements: 1"});
  CHECK(after.tracing_count() == 1);
  // The gradient of sqrt at 0 is +Inf: the backward op that makes it is named.
  tf::Variable v(values({0, 1}), "v");
  tf::GradientTape tape;
  tf::Tensor z = tf::reduce_sum(tf::sqrt(v.value()));
  try {
    tape.gradient(z, v);
    FAIL("the Inf gradient was not detected");
  } catch (const tf::InvalidArgumentError& e) {
    const std::string what = e.what();
    CHECK(what.find("!!! Detected Infinity or NaN in output 0 of eagerly-executing op") !=
          std::string::npos);
    CHECK(what.find("# of +Inf elements: 1") != std::string::npos);
  }
}
