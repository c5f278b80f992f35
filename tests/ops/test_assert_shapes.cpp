// tf::math::nextafter and tf::debugging::assert_shapes on every device of devices_under_test():
// TF 2.21's values and messages, nextafter's edge cases (zeros, infinities, NaN, the largest
// finite value) and gradient, and assert_shapes' checks when called, also inside tf::function
// over None dimensions (a call whose sizes break the shapes raises).
#include <cmath>
#include <cstdint>
#include <limits>
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
#include "ops/math_misc.h"
#include "ops/reduce.h"
#include "support/testing.h"

namespace tf = tapeflow;
using tf::testing::require_error;

namespace {

template <class T>
tf::Tensor vec(const std::vector<T>& v) {
  return tf::convert_to_tensor(v, {static_cast<int64_t>(v.size())});
}

}  // namespace

TEST_CASE("nextafter steps one representable value, as TF", "[cpu][cuda][nextafter]") {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float fmax = std::numeric_limits<float>::max();
  const float tiny = std::numeric_limits<float>::denorm_min();
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    // tf.math.nextafter(x, y) for these (TF 2.21 printed the same).
    const std::vector<float> x = {1.0f, 0.0f, -1.0f, 0.0f, 2.0f, nan, inf, tiny, fmax, -inf, 1.0f};
    const std::vector<float> y = {2.0f, 1.0f, -2.0f, -1.0f, 2.0f, 1.0f, 0.0f, 0.0f, inf, 0.0f, nan};
    const auto got = tf::math::nextafter(vec(x), vec(y)).numpy<float>();
    const std::vector<float> want = {std::nextafter(1.0f, 2.0f),
                                     tiny,
                                     std::nextafter(-1.0f, -2.0f),
                                     -tiny,
                                     2.0f,
                                     nan,
                                     fmax,
                                     0.0f,
                                     inf,
                                     -fmax,
                                     nan};
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      CAPTURE(i);
      if (std::isnan(want[i]))
        CHECK(std::isnan(got[i]));
      else
        CHECK(got[i] == want[i]);
    }
    // float64, and TF's nextafter(-0, 0) = 0 (x2 where they are equal).
    const auto d = tf::math::nextafter(vec(std::vector<double>{0.0, 1.0, -0.0}),
                                       vec(std::vector<double>{-1.0, 0.0, 0.0}))
                       .numpy<double>();
    CHECK(d[0] == -std::numeric_limits<double>::denorm_min());
    CHECK(d[1] == std::nextafter(1.0, 0.0));
    CHECK(d[2] == 0.0);
    CHECK(!std::signbit(d[2]));
    // Broadcasting: [[1], [2]] towards [2, 0].
    const auto b = tf::math::nextafter(tf::convert_to_tensor(std::vector<float>{1, 2}, {2, 1}),
                                       vec(std::vector<float>{2, 0}));
    CHECK(b.shape() == tf::TensorShape({2, 2}));
    CHECK(b.numpy<float>() == std::vector<float>{std::nextafter(1.0f, 2.0f),
                                                 std::nextafter(1.0f, 0.0f), 2.0f,
                                                 std::nextafter(2.0f, 0.0f)});
    // TF's gradient: the upstream gradient for x1 (summed over its broadcast), none for x2.
    tf::Variable v(tf::convert_to_tensor(std::vector<float>{1, 2}, {2, 1}), "v");
    tf::Variable w(vec(std::vector<float>{2, 0}), "w");
    tf::GradientTape tape;
    const tf::Tensor s = tf::reduce_sum(tf::math::nextafter(v.value(), w.value()) * 3.0);
    const auto g = tape.gradient(s, std::vector<tf::Variable>{v, w});
    CHECK(g[0].numpy<float>() == std::vector<float>{6.0f, 6.0f});
    CHECK(!g[1].defined());
  }
  require_error([] { tf::math::nextafter(tf::ones({2}, tf::float16), tf::ones({2}, tf::float16)); },
                {"[nextafter]", "float16"});
  require_error([] { tf::math::nextafter(tf::ones({2}), tf::ones({2}, tf::float64)); },
                {"[nextafter]", "float32", "float64"});
  require_error([] { tf::math::nextafter(tf::ones({2}), tf::ones({3})); }, {"[nextafter]", "(3,)"});
}

TEST_CASE("assert_shapes checks ranks and sizes with TF's messages", "[cpu][cuda][assert_shapes]") {
  namespace dbg = tf::debugging;
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor x = tf::zeros({10, 3}), y = tf::ones({10, 7});
    const tf::Tensor scalar = tf::constant(tf::Tensor(1.0f), tf::float32);
    // TF's docstring example, and the ways of saying "any size".
    dbg::assert_shapes({{x, {"N", "Q"}}, {y, {"N", "D"}}, {tf::zeros({3}), {"Q"}}, {scalar, {}}});
    dbg::assert_shapes({{x, {".", 3}}, {y, {"", "D"}}, {x, {"10", "3"}}});
    dbg::assert_shapes({{tf::zeros({4, 5, 10, 3}), {"*", "N", "Q"}}, {x, {"N", "Q"}}});
    dbg::assert_shapes({{tf::zeros({1}), {}}, {scalar, {"N"}}, {tf::zeros({1}), {"N"}}});
    // The messages TF 2.21 raised (as ValueError) for these, each prefixed "msg.  ".
    require_error(
        [&] {
          dbg::assert_shapes({{x, {"N", "D"}}, {y, {"N", "D"}}}, "msg");
        },
        {"[assert_shapes] msg.  Specified by tensor shape=(10, 3) dtype=float32 "
         "dimension 1.  Tensor shape=(10, 7) dtype=float32 dimension 1 must have size "
         "3.  Received size 7, shape (10, 7)"});
    require_error(
        [&] {
          dbg::assert_shapes({{x, {"N"}}}, "msg");
        },
        {"msg.  Tensor  must have rank in (0, 1).  Received rank 2, shape (10, 3)"});
    require_error(
        [&] {
          dbg::assert_shapes({{x, {10, 4}}});
        },
        {"[assert_shapes] Specified explicitly.  Tensor shape=(10, 3) dtype=float32 "
         "dimension 1 must have size 4.  Received size 3, shape (10, 3)"});
    require_error(
        [&] {
          dbg::assert_shapes({{scalar, {"N"}}, {tf::zeros({2}), {"N"}}});
        },
        {"Specified by tensor shape=() dtype=float32 dimension 0.  Tensor shape=(2,) "
         "dtype=float32 dimension 0 must have size 1.  Received size 2, shape (2,)"});
    require_error(
        [&] {
          dbg::assert_shapes({{tf::zeros({2}), {}}});
        },
        {"Specified explicitly.  Tensor shape=(2,) dtype=float32 dimension 0 must have "
         "size 1.  Received size 2, shape (2,)"});
    require_error(
        [&] {
          dbg::assert_shapes({{tf::zeros({4, 5, 10, 2}), {"...", "N", "Q"}}, {x, {"N", "Q"}}});
        },
        {"Specified by tensor shape=(4, 5, 10, 2) dtype=float32 dimension -1.  Tensor "
         "shape=(10, 3) dtype=float32 dimension 1 must have size 2.  Received size 3"});
    require_error(
        [&] {
          dbg::assert_shapes({{tf::zeros({3}), {"*", "N", "Q"}}});
        },
        {"Tensor  must have rank at least 2.  Received rank 1, shape (3,)"});
    require_error(
        [&] {
          dbg::assert_shapes({{x, {"N", "N"}}});
        },
        {"Specified by tensor shape=(10, 3) dtype=float32 dimension 0.  Tensor "
         "shape=(10, 3) dtype=float32 dimension 1 must have size 10.  Received size 3"});
    require_error(
        [&] {
          dbg::assert_shapes({{tf::zeros({2, 2, 2}), {"N", "Q"}}});
        },
        {"Tensor  must have rank 2.  Received rank 3, shape (2, 2, 2)"});
    require_error(
        [&] {
          dbg::assert_shapes({{x, {"N", "*"}}});
        },
        {"[assert_shapes]", "\"*\" may only be the first entry"});
  }
}

TEST_CASE("assert_shapes inside tf::function raises for a call that breaks the shapes",
          "[cpu][cuda][assert_shapes]") {
  namespace dbg = tf::debugging;
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    // Batch sizes of a and b must agree; the known inner size is checked while tracing.
    auto f = tf::function(
        [](const tf::Tensor& a, const tf::Tensor& b) {
          dbg::assert_shapes({{a, {"N", 3}}, {b, {"N"}}});
          return tf::reduce_sum(a) + tf::reduce_sum(b);
        },
        tf::FunctionOptions{
            .input_signature = {tf::TensorSpec({tf::None, 3}), tf::TensorSpec({tf::None})}});
    CHECK(f(tf::ones({4, 3}), tf::ones({4})).item<float>() == 16.0f);
    CHECK(f(tf::ones({2, 3}), tf::ones({2})).item<float>() == 8.0f);
    // A call whose batch sizes disagree raises, naming the sizes.
    require_error(
        [&] {
          f(tf::ones({5, 3}), tf::ones({4}));
        },
        {"[assert_shapes]", "dimension 0 must have size 5", "Received size 4"});
    CHECK(f(tf::ones({3, 3}), tf::ones({3})).item<float>() == 12.0f);
    // An explicit size for a None dimension.
    auto g = tf::function(
        [](const tf::Tensor& a) {
          dbg::assert_shapes({{a, {2}}}, "two rows");
          return a * 2.0;
        },
        tf::FunctionOptions{.input_signature = {tf::TensorSpec({tf::None})}});
    CHECK(g(tf::ones({2})).shape() == tf::TensorShape({2}));
    require_error([&] { g(tf::ones({3})); }, {"[assert_shapes] two rows", "Specified explicitly"});
  }
}
