// tf::image::sample_distorted_bounding_box and its stateless form: every crop satisfies TF's
// constraints (inside the image, area and aspect ratio in range, the box covered), the offsets
// stay below image - crop as TF's sampler, impossible constraints give the whole image, seeds
// repeat, traced equals eager, on every device; TF's errors.
#include <array>
#include <cmath>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "core/tensor.h"
#include "jit/function.h"
#include "ops/factory.h"
#include "ops/image_random.h"
#include "ops/random.h"
#include "support/testing.h"

namespace tf = tapeflow;
using tf::testing::check_close;
using tf::testing::check_values;

namespace {

std::vector<double> values(const tf::Tensor& t) {
  return tf::detail::to_double_vector(t);
}

}  // namespace

TEST_CASE("image: sample_distorted_bounding_box keeps TF's constraints", "[cpu][cuda][image]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const double H = 480, W = 640;
    const tf::Tensor size = tf::detail::from_doubles({H, W, 3}, {3}, tf::int32);
    // Pixel rectangle of the box: rows 48..240, columns 128..576 (TF truncates box * size).
    const tf::Tensor box = tf::detail::from_doubles({0.1, 0.2, 0.5, 0.9}, {1, 1, 4}, tf::float32);
    int whole = 0;
    std::vector<double> heights;
    for (int64_t s = 0; s < 40; ++s) {
      INFO("seed " << s);
      const auto r = tf::image::stateless_sample_distorted_bounding_box(size, box, {s, 7}, 0.5);
      CHECK(r.begin.dtype() == tf::int32);
      CHECK(r.bboxes.shape() == tf::TensorShape{1, 1, 4});
      const auto b = values(r.begin), z = values(r.size), n = values(r.bboxes);
      CHECK(b[2] == 0);
      CHECK(z[2] == -1);
      const double y = b[0], x = b[1], h = z[0], w = z[1];
      REQUIRE(h >= 1);
      REQUIRE(w >= 1);
      if (h == H && w == W) {
        ++whole;
        continue;
      }
      heights.push_back(h);
      // TF's sampler draws offsets from [0, image - crop): the crop never touches the far edge
      // of an axis it does not fill.
      CHECK(y >= 0);
      CHECK(x >= 0);
      CHECK((y + h < H || (h == H && y == 0)));
      CHECK((x + w < W || (w == W && x == 0)));
      CHECK(w * h >= 0.05 * H * W);
      CHECK(w * h <= H * W);
      // The width is the height times a ratio in [0.75, 1.33], rounded.
      CHECK(w >= std::floor(0.75 * h) - 1);
      CHECK(w <= std::ceil(1.33 * h) + 1);
      const double ih = std::max(std::min(y + h, 240.0) - std::max(y, 48.0), 0.0);
      const double iw = std::max(std::min(x + w, 576.0) - std::max(x, 128.0), 0.0);
      CHECK(ih * iw >= 0.5 * (240 - 48) * (576 - 128));
      check_values(r.bboxes, {y / H, x / W, (y + h) / H, (x + w) / W}, 1e-6, 1e-7);
    }
    // Most draws find a crop, and they differ.
    CHECK(whole < 10);
    REQUIRE(heights.size() > 20);
    CHECK(*std::min_element(heights.begin(), heights.end()) <
          *std::max_element(heights.begin(), heights.end()));

    // The same seed pair, the same crop; eager equals traced.
    const auto a = tf::image::stateless_sample_distorted_bounding_box(size, box, {3, 4}, 0.3);
    const auto again = tf::image::stateless_sample_distorted_bounding_box(size, box, {3, 4}, 0.3);
    check_close(a.begin, again.begin, 0, 0);
    check_close(a.size, again.size, 0, 0);
    auto f = tf::function([](const tf::Tensor& sz, const tf::Tensor& bx) {
      const auto r = tf::image::stateless_sample_distorted_bounding_box(sz, bx, {3, 4}, 0.3);
      return std::vector<tf::Tensor>{r.begin, r.size, r.bboxes};
    });
    const std::vector<tf::Tensor> t = f(size, box);
    check_close(t[0], a.begin, 0, 0);
    check_close(t[1], a.size, 0, 0);
    check_close(t[2], a.bboxes, 0, 0);
    // A 7 x 5 image with the whole image as its box (TF 2.21 draws crops such as (2, 2) at
    // (2, 0)): small axes keep the offsets below image - crop.
    const tf::Tensor small = tf::detail::from_doubles({7, 5, 1}, {3}, tf::int64);
    const tf::Tensor all = tf::detail::from_doubles({0, 0, 1, 1}, {1, 1, 4}, tf::float32);
    for (int64_t s = 0; s < 20; ++s) {
      const auto r = tf::image::stateless_sample_distorted_bounding_box(small, all, {s, 2}, 0.0,
                                                                        {0.75, 1.33}, {0.1, 1.0});
      CHECK(r.begin.dtype() == tf::int64);
      const auto b = values(r.begin), z = values(r.size);
      CHECK(z[0] * z[1] >= 0.1 * 35);
      CHECK((b[0] + z[0] < 7 || (z[0] == 7 && b[0] == 0)));
      CHECK((b[1] + z[1] < 5 || (z[1] == 5 && b[1] == 0)));
    }
    // No crop can cover the whole 1 x 1 box with at most 6% of a 10 x 10 image: the whole image
    // (TF 2.21: begin [0, 0, 0], size [10, 10, -1], bboxes [0, 0, 1, 1]).
    const auto none = tf::image::stateless_sample_distorted_bounding_box(
        tf::detail::from_doubles({10, 10, 3}, {3}, tf::int32),
        tf::detail::from_doubles({0, 0, 0.1, 0.1}, {1, 1, 4}, tf::float32), {1, 2}, 1.0,
        {0.75, 1.33}, {0.05, 0.06}, 5);
    check_values(none.begin, {0, 0, 0}, 0, 0);
    check_values(none.size, {10, 10, -1}, 0, 0);
    check_values(none.bboxes, {0, 0, 1, 1}, 0, 0);
    // No boxes: the whole image is the box.
    const auto free = tf::image::stateless_sample_distorted_bounding_box(
        size, tf::zeros({1, 0, 4}), {5, 6}, 0.1, {0.75, 1.33}, {0.05, 1.0}, 100, true);
    CHECK(values(free.size)[0] >= 1);
    // The seeded form draws new crops at each call and repeats after set_seed.
    tf::random::set_seed(11);
    const auto s1 = tf::image::sample_distorted_bounding_box(size, box, 5);
    const auto s2 = tf::image::sample_distorted_bounding_box(size, box, 5);
    tf::random::set_seed(11);
    const auto s3 = tf::image::sample_distorted_bounding_box(size, box, 5);
    check_close(s3.begin, s1.begin, 0, 0);
    check_close(s3.size, s1.size, 0, 0);
    CHECK(values(s1.size) != values(s2.size));
  }
  using tf::testing::require_error;
  const tf::Tensor size = tf::detail::from_doubles({480, 640, 3}, {3}, tf::int32);
  require_error(
      [&] {
        tf::image::stateless_sample_distorted_bounding_box(
            size, tf::detail::from_doubles({1.2, 0.2, 0.5, 0.9}, {1, 1, 4}, tf::float32), {1, 2});
      },
      {"stateless_sample_distorted_bounding_box", "must be in [0.0, 1.0]", "1.2"});
  require_error(
      [&] {
        tf::image::stateless_sample_distorted_bounding_box(size, tf::zeros({1, 0, 4}), {1, 2});
      },
      {"No bounding boxes provided", "use_image_if_no_bounding_boxes"});
  require_error(
      [&] {
        tf::image::sample_distorted_bounding_box(size, tf::zeros({1, 1, 4}), 1, 0.1, {0.75, 1.33},
                                                 {0.5, 1.5});
      },
      {"sample_distorted_bounding_box", "area_range", "1.5"});
  require_error(
      [&] {
        tf::image::sample_distorted_bounding_box(tf::zeros({2}, tf::int32), tf::zeros({1, 1, 4}));
      },
      {"sample_distorted_bounding_box", "image_size", "(2,)"});
}
