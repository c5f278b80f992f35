// TF's int forms of list arguments: conv2d's strides, the pools' ksize and strides, squeeze's
// axis; each equals its one-element list, and squeeze(x, {}) still removes every size-1 axis.
#include <vector>

#include "core/device.h"
#include "core/tensor.h"
#include "ops/factory.h"
#include "ops/movement.h"
#include "ops/nn.h"
#include "support/testing.h"

namespace tf = tapeflow;
using tf::testing::check_close;
using tf::testing::random_values;

TEST_CASE("ops: int strides, ksize and axis equal their one-element lists", "[cpu][cuda][nn]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor x =
        tf::detail::from_doubles(random_values(2 * 6 * 6 * 3, -1, 1, 5), {2, 6, 6, 3}, tf::float32);
    const tf::Tensor f =
        tf::detail::from_doubles(random_values(3 * 3 * 3 * 4, -1, 1, 6), {3, 3, 3, 4}, tf::float32);
    check_close(tf::nn::conv2d(x, f, 2, "SAME"),
                tf::nn::conv2d(x, f, std::vector<int>{2, 2}, "SAME"), 0, 0);
    check_close(tf::nn::conv2d(x, f, 1, "VALID", {2}),
                tf::nn::conv2d(x, f, std::vector<int>{1, 1}, "VALID", {2, 2}), 0, 0);
    check_close(tf::nn::max_pool2d(x, 2, 2, "VALID"),
                tf::nn::max_pool2d(x, std::vector<int>{2, 2}, std::vector<int>{2, 2}, "VALID"), 0,
                0);
    check_close(tf::nn::avg_pool2d(x, 3, 1, "SAME"),
                tf::nn::avg_pool2d(x, std::vector<int>{3, 3}, std::vector<int>{1, 1}, "SAME"), 0,
                0);
    const tf::Tensor y = tf::zeros({1, 3, 1, 2});
    CHECK(tf::squeeze(y, 2).shape() == tf::TensorShape{1, 3, 2});
    CHECK(tf::squeeze(y, -2).shape() == tf::TensorShape{1, 3, 2});
    CHECK(tf::squeeze(y, {0, 2}).shape() == tf::TensorShape{3, 2});
    CHECK(tf::squeeze(y, {}).shape() == tf::TensorShape{3, 2});
    CHECK(tf::squeeze(y).shape() == tf::TensorShape{3, 2});
  }
  tf::testing::require_error([] { tf::squeeze(tf::zeros({1, 3}), 1); }, {"squeeze", "(1, 3)"});
}
