// slice with size -1 and pad's gradient in a tf::function traced for a None batch: one graph
// serves every batch size (the -1 is resolved when the graph runs), with the eager values and
// gradients, on every device under test.
#include <vector>

#include "autograd/tape.h"
#include "core/device.h"
#include "jit/function.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/movement.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
using tf::testing::check_values;

TEST_CASE("slice to the end and pad gradients trace once for a None batch",
          "[cpu][cuda][movement]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    // y = slice(pad(x)) with its gradient: the pad's vjp slices to the end of the batch, the
    // slice's vjp pads nothing after a -1.
    auto body = [](const tf::Tensor& x) {
      tf::GradientTape tape;
      tape.watch(x);
      const tf::Tensor p = tf::pad(x, {{0, 0}, {2, 1}, {0, 0}});
      const tf::Tensor y = tf::slice(p, {0, 1, 1}, {-1, 4, -1});
      const tf::Tensor loss = tf::reduce_sum(tf::square(y) * tf::cast(tf::range(2), y.dtype()));
      return std::vector<tf::Tensor>{y, tape.gradient(loss, x)};
    };
    auto f = tf::function(
        body, tf::FunctionOptions{.input_signature = {tf::TensorSpec({tf::None, 3, 3})}});
    for (int64_t n : {2, 5, 1, 0}) {
      CAPTURE(n);
      const tf::Tensor x = tf::random::normal({n, 3, 3}, 0, 1, tf::float32, n + 1);
      const auto want = body(x);
      const auto got = f(x);
      REQUIRE(got.size() == 2);
      CHECK(got[0].shape() == tf::TensorShape({n, 4, 2}));
      CHECK(got[0].placement() == device);
      check_values(got[0], tf::detail::to_double_vector(want[0]), 0, 0);
      check_values(got[1], tf::detail::to_double_vector(want[1]), 1e-6, 1e-7);
    }
    CHECK(f.tracing_count() == 1);
    // An explicit batch size in the slice depends on the batch: one trace per batch size, still
    // with the eager values.
    auto g = tf::function(
        [](const tf::Tensor& x) {
          return tf::slice(x, {0, 1}, {x.shape()[0], 2});
        },
        tf::FunctionOptions{.input_signature = {tf::TensorSpec({tf::None, 3})}});
    for (int64_t n : {2, 3}) {
      const tf::Tensor x = tf::random::normal({n, 3}, 0, 1, tf::float32, n);
      check_values(g(x), tf::detail::to_double_vector(tf::slice(x, {0, 1}, {n, 2})), 0, 0);
    }
    CHECK(g.tracing_count() >= 2);
  }
}
