// keras.layers.RandomGrayscale: Keras 3.15's values with factor 1, the identity with factor 0
// and at inference, each image grey or unchanged by its own draw, traced against eager, errors.
#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "jit/function.h"
#include "keras/layers.h"
#include "keras/layers_preprocessing.h"
#include "ops/factory.h"
#include "ops/image.h"
#include "ops/movement.h"
#include "ops/random.h"
#include "support/testing.h"

namespace tf = tapeflow;
namespace layers = tf::keras::layers;
using tf::testing::check_close;
using tf::testing::check_values;

namespace {

// clang-format off
// keras.layers.RandomGrayscale(factor=1.0)(x, training=True) (Keras 3.15), x = (2, 2, 3, 3) ((i * 53) % 97) / 96 * 255
const std::vector<double> kGray = {85.3639069, 85.3639069, 85.3639069, 98.7907181, 98.7907181, 98.7907181, 157.075485, 157.075485, 157.075485, 141.129486, 141.129486, 141.129486, 77.5428467, 77.5428467, 77.5428467, 135.827606, 135.827606, 135.827606, 149.254425, 149.254425, 149.254425, 56.2949677, 56.2949677, 56.2949677, 114.579735, 114.579735, 114.579735, 128.006546, 128.006546, 128.006546, 186.291336, 186.291336, 186.291336, 93.3318634, 93.3318634, 93.3318634};
// clang-format on

tf::Tensor gray_input(int64_t n = 2) {
  std::vector<double> v(static_cast<size_t>(n * 18));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>((i * 53) % 97) / 96.0 * 255;
  return tf::detail::from_doubles(v, {n, 2, 3, 3}, tf::float32);
}

}  // namespace

TEST_CASE("RandomGrayscale gives Keras values and keeps or greys each image",
          "[cpu][cuda][keras][preprocessing]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor x = gray_input();
    const tf::Tensor all = layers::RandomGrayscale(1.0, 3)(x, true);
    CHECK(all.shape() == x.shape());
    check_values(all, kGray, 1e-6, 1e-4);
    check_close(layers::RandomGrayscale(0.0, 3)(x, true), x, 0, 0);
    check_close(layers::RandomGrayscale(1.0, 3)(x, false), x, 0, 0);
    // factor 0.5: image b is grey where its draw (the layer's op stream) is below 0.5.
    const int64_t n = 8;
    const tf::Tensor xb = gray_input(n);
    const tf::Tensor grey = layers::RandomGrayscale(1.0)(xb, true);
    tf::random::set_seed(13);
    const auto u =
        tf::detail::to_double_vector(tf::random::uniform({n, 1, 1, 1}, 0, 1, tf::float32, 6));
    tf::random::set_seed(13);
    const tf::Tensor y = layers::RandomGrayscale(0.5, 6)(xb, true);
    int greyed = 0;
    for (int64_t b = 0; b < n; ++b) {
      const auto pick = [b](const tf::Tensor& t) {
        return tf::slice(t, {b, 0, 0, 0}, {1, -1, -1, -1});
      };
      const bool g = u[static_cast<size_t>(b)] < 0.5;
      greyed += g ? 1 : 0;
      check_close(pick(y), pick(g ? grey : xb), 0, 0);
    }
    CHECK(greyed > 0);
    CHECK(greyed < n);
    // A single image (rank 3).
    const tf::Tensor x3 = tf::reshape(tf::slice(x, {0, 0, 0, 0}, {1, -1, -1, -1}), {2, 3, 3});
    check_values(layers::RandomGrayscale(1.0)(x3, true),
                 std::vector<double>(kGray.begin(), kGray.begin() + 18), 1e-6, 1e-4);
  }
}

TEST_CASE("RandomGrayscale traced equals eager and rejects bad arguments",
          "[cpu][keras][preprocessing]") {
  const layers::RandomGrayscale layer(1.0);
  tf::FunctionOptions opts;
  opts.input_signature = {tf::TensorSpec({tf::None, 2, 3, 3})};
  auto f = tf::function([&](const tf::Tensor& x) { return layer(x, true); }, opts);
  for (int64_t n : {1, 3}) {
    const tf::Tensor x = gray_input(n);
    check_close(f(x), layer(x, true), 0, 0);
  }
  CHECK(f.tracing_count() == 1);
  using tf::testing::require_error;
  require_error([] { layers::RandomGrayscale(1.5); }, {"[RandomGrayscale]", "between 0 and 1"});
  require_error(
      [&] {
        layer(tf::zeros({1, 2, 2, 4}), true);
      },
      {"[RandomGrayscale]", "3 channels", "(1, 2, 2, 4)"});
}
