// tf::strided_slice (ops/strided_slice.h) on every device of devices_under_test(): TF 2.21's
// results for strides, negative strides, every mask and their combinations, clamping, the
// errors TF raises, the gradient against central differences, and a trace over a None batch.
#include <cstdint>
#include <vector>

#include "autograd/tape.h"
#include "core/device.h"
#include "core/error.h"
#include "core/tensor.h"
#include "jit/function.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/movement.h"
#include "ops/reduce.h"
#include "ops/strided_slice.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
using tf::testing::check_values;
using tf::testing::require_error;

namespace {

struct Case {
  std::vector<int64_t> begin, end, strides;
  int64_t begin_mask, end_mask, ellipsis_mask, new_axis_mask, shrink_axis_mask;
  tf::TensorShape shape;
  std::vector<double> values;
};

// tf.strided_slice(tf.reshape(tf.range(24), [2, 3, 4]), ...) in TF 2.21.
const std::vector<Case> kCases = {
    {{0, 0, 0}, {2, 3, 4}, {1, 1, 1}, 0, 0, 0, 0, 0, {2, 3, 4}, {}},
    {{1, 0, 1}, {2, 3, 4}, {1, 2, 2}, 0, 0, 0, 0, 0, {1, 2, 2}, {13, 15, 21, 23}},
    // x[:, ::-1, :]
    {{0, -1, 0},
     {0, 0, 0},
     {1, -1, 1},
     5,
     5,
     0,
     0,
     0,
     {2, 2, 4},
     {8, 9, 10, 11, 4, 5, 6, 7, 20, 21, 22, 23, 16, 17, 18, 19}},
    // x[1, :, -1::-2]
    {{1, 0, -1}, {2, 0, 0}, {1, 1, -2}, 0, 2, 0, 0, 1, {3, 2}, {15, 13, 19, 17, 23, 21}},
    // x[..., 1:2]
    {{0, 1}, {0, 2}, {1, 1}, 1, 0, 1, 0, 0, {2, 3, 1}, {1, 5, 9, 13, 17, 21}},
    // x[0:1, tf.newaxis, :]
    {{0, 0, 0},
     {1, 0, 0},
     {1, 1, 1},
     0,
     6,
     0,
     2,
     0,
     {1, 1, 3, 4},
     {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}},
    {{-1, -2, 3}, {-3, -4, 100}, {-1, -1, 1}, 0, 0, 0, 0, 0, {2, 2, 1}, {19, 15, 7, 3}},
    {{0, 5, 0}, {2, 7, 4}, {1, 1, 1}, 0, 0, 0, 0, 0, {2, 0, 4}, {}},
    // x[..., 2::-1]
    {{0, 2},
     {0, 0},
     {1, -1},
     1,
     2,
     1,
     0,
     0,
     {2, 3, 3},
     {2, 1, 0, 6, 5, 4, 10, 9, 8, 14, 13, 12, 18, 17, 16, 22, 21, 20}},
    // x[1]
    {{1}, {2}, {1}, 0, 0, 0, 0, 1, {3, 4}, {12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23}},
    // x[..., tf.newaxis, 0:0, tf.newaxis]
    {{0, 0, 0, 0}, {0, 0, 0, 0}, {1, 1, 1, 1}, 0, 0, 1, 10, 0, {2, 3, 1, 0, 1}, {}},
};

}  // namespace

TEST_CASE("strided_slice matches TF 2.21", "[cpu][cuda][strided_slice]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor x = tf::reshape(tf::range(0, 24), {2, 3, 4});
    for (size_t c = 0; c < kCases.size(); ++c) {
      const Case& k = kCases[c];
      INFO("case " << c);
      const tf::Tensor y = tf::strided_slice(x, k.begin, k.end, k.strides, k.begin_mask, k.end_mask,
                                             k.ellipsis_mask, k.new_axis_mask, k.shrink_axis_mask);
      CHECK(y.shape() == k.shape);
      CHECK(y.dtype() == tf::int32);
      if (c == 0)
        check_values(y, tf::cast(x, tf::float64).numpy<double>(), 0, 0);
      else
        check_values(y, k.values, 0, 0);
    }
    // Any dtype: bool.
    check_values(
        tf::strided_slice(tf::constant(std::vector<bool>{true, false, true}), {0}, {3}, {2}),
        {1, 1}, 0, 0);
  }
}

TEST_CASE("strided_slice's gradient scatters the cotangent back", "[cpu][cuda][strided_slice]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    tf::testing::check_gradient(
        [](const tf::Tensor& x) {
          // x[1, ::-2, tf.newaxis, 1:]
          return tf::strided_slice(x, {1, 0, 0, 1}, {2, 0, 0, 0}, {1, -2, 1, 1}, 0, 10, 0, 4, 1);
        },
        {2, 5, 3});
    const tf::Tensor x = tf::ones({4});
    tf::GradientTape tape;
    tape.watch(x);
    const tf::Tensor y = tf::reduce_sum(tf::strided_slice(x, {0}, {4}, {3}));
    check_values(tape.gradient(y, x), {1, 0, 0, 1}, 0, 0);
  }
}

TEST_CASE("strided_slice traces over a None batch", "[cpu][cuda][strided_slice][jit]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    // x[:, 1::2, tf.newaxis] and x[..., 0] on a (None, 4) input.
    auto f = tf::function(
        [](const tf::Tensor& x) {
          return tf::strided_slice(x, {0, 1, 0}, {0, 0, 0}, {1, 2, 1}, 1, 3, 0, 4, 0);
        },
        tf::FunctionOptions{.input_signature = {tf::TensorSpec({tf::None, 4})}});
    for (int64_t n : {1, 3}) {
      const tf::Tensor in =
          tf::reshape(tf::range(0.0f, 4.0f * static_cast<float>(n), 1.0f), {n, 4});
      const tf::Tensor got = f(in);
      CHECK(got.shape() == tf::TensorShape{n, 2, 1});
      std::vector<double> want;
      for (int64_t r = 0; r < n; ++r) want.insert(want.end(), {4.0 * r + 1, 4.0 * r + 3});
      check_values(got, want, 0, 0);
    }
    CHECK(f.tracing_count() == 1);
    auto g = tf::function(
        [](const tf::Tensor& x) {
          return tf::strided_slice(x, {0, 0}, {0, 1}, {1, 1}, 0, 0, 1, 0, 2);
        },
        tf::FunctionOptions{.input_signature = {tf::TensorSpec({tf::None, 4})}});
    check_values(g(tf::reshape(tf::range(0.0f, 8.0f, 1.0f), {2, 4})), {0, 4}, 0, 0);
    check_values(g(tf::reshape(tf::range(0.0f, 12.0f, 1.0f), {3, 4})), {0, 4, 8}, 0, 0);
    CHECK(g.tracing_count() == 1);
  }
}

TEST_CASE("strided_slice rejects what TF rejects", "[cpu][strided_slice]") {
  const tf::Tensor x = tf::reshape(tf::range(0, 24), {2, 3, 4});
  require_error(
      [&] {
        tf::strided_slice(x, {0, 3}, {1, 4}, {1, 1}, 0, 0, 0, 0, 2);
      },
      {"[strided_slice] slice index 3 of dimension 1 out of bounds."});
  require_error(
      [&] {
        tf::strided_slice(x, {0, 0}, {1, 1}, {0, 1});
      },
      {"[strided_slice] strides[0] must be non-zero"});
  require_error(
      [&] {
        tf::strided_slice(x, {0, 0}, {1, 1}, {1, 1}, 0, 0, 3);
      },
      {"[strided_slice] Multiple ellipses in slice spec not allowed"});
  require_error(
      [&] {
        tf::strided_slice(x, {0, 0, 0, 0}, {1, 1, 1, 1}, {1, 1, 1, 1});
      },
      {"[strided_slice] Index out of range using input dim 3; input has only 3 dims"});
  require_error(
      [&] {
        tf::strided_slice(x, {0}, {1, 2});
      },
      {"[strided_slice] begin, end and strides must have one entry per spec item"});
}
