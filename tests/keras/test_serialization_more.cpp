// Keras configs of Dot and the adaptive poolings (keras/serialization.cpp,
// keras/serialization_conv.cpp): the configs Keras 3.15.1 writes (the Python line above each),
// read back, and a functional model with them saved and loaded whole.
#include <string>
#include <vector>

#include "core/error.h"
#include "keras/functional.h"
#include "keras/layers.h"
#include "keras/layers_extra.h"
#include "keras/layers_merge.h"
#include "keras/model.h"
#include "keras/serialization.h"
#include "keras/serialization_json.h"
#include "ops/random.h"
#include "support/temp_dir.h"
#include "support/testing.h"

namespace tf = tapeflow;
namespace K = tapeflow::keras;
namespace L = tapeflow::keras::layers;
using K::saving::Config;

namespace {
// Keras' base keys of a float32 layer named `name`, then `rest`.
Config keras_config(const std::string& name, const std::string& rest) {
  return Config::parse(R"({"name": ")" + name + R"(", "trainable": true, "dtype": {"module":
"keras", "class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null}, )" +
                       rest + "}");
}
}  // namespace

TEST_CASE("serialization: Dot and the adaptive poolings write Keras' configs",
          "[keras][serialization]") {
  struct Case {
    K::Layer layer;
    Config keras;
  };
  const std::vector<Case> cases = {
      // keras.layers.Dot(axes=1, name="d1")
      {L::Dot(1, false, "d1"), keras_config("d1", R"("axes": 1, "normalize": false)")},
      // keras.layers.Dot(axes=(2, 1), normalize=True, name="d2")
      {L::Dot(std::pair{2, 1}, true, "d2"),
       keras_config("d2", R"("axes": [2, 1], "normalize": true)")},
      // keras.layers.AdaptiveAveragePooling2D((3, 4), name="ap")
      {L::AdaptiveAveragePooling2D(K::Size2(3, 4), "ap"),
       keras_config("ap", R"("output_size": [3, 4], "data_format": "channels_last")")},
      // keras.layers.AdaptiveMaxPooling1D(5, name="mp")
      {L::AdaptiveMaxPooling1D(5, "mp"),
       keras_config("mp", R"("output_size": [5], "data_format": "channels_last")")},
      // keras.layers.AdaptiveMaxPooling3D((1, 2, 3), name="mp3")
      {L::AdaptiveMaxPooling3D(L::Size3(1, 2, 3), "mp3"),
       keras_config("mp3", R"("output_size": [1, 2, 3], "data_format": "channels_last")")}};
  for (const Case& c : cases) {
    CAPTURE(c.layer.name());
    CHECK(K::saving::get_config(c.layer) == c.keras);
    const K::Layer back = K::saving::from_config(c.layer.class_name(), c.keras);
    CHECK(K::saving::get_config(back) == c.keras);
  }
  // Keras also takes one int for every dimension of output_size.
  Config one = keras_config("ap", R"("output_size": 2, "data_format": "channels_last")");
  CHECK(K::saving::get_config(K::saving::from_config(
            "AdaptiveAveragePooling2D", one))["output_size"] == Config::parse("[2, 2]"));
  tf::testing::require_error(
      [&] {
        K::saving::from_config(
            "AdaptiveMaxPooling2D",
            keras_config("x", R"("output_size": [2, 2], "data_format": "channels_first")"));
      },
      {"AdaptiveMaxPooling2D config key \"data_format\""});
  tf::testing::require_error(
      [&] { K::saving::from_config("Dot", keras_config("x", R"("axes": "last")")); },
      {"Dot config key \"axes\" must be an integer or a list of 2 integers"});

  // A functional model with both: saved and loaded whole, the same outputs.
  auto a = K::Input({6, 4}, std::nullopt, "a");
  auto b = K::Input({6, 4}, std::nullopt, "b");
  auto pa = L::AdaptiveAveragePooling1D(3, "pool_a")(a);
  auto pb = L::AdaptiveMaxPooling1D(3, "pool_b")(b);
  auto d = L::Dot(std::pair{2, 2}, true, "cos")({pa, pb});
  K::Model model(std::vector<K::KerasTensor>{a, b}, std::vector<K::KerasTensor>{d}, "two");
  const tf::Tensor xa = tf::random::normal({2, 6, 4}, 0.0, 1.0, tf::float32, 1);
  const tf::Tensor xb = tf::random::normal({2, 6, 4}, 0.0, 1.0, tf::float32, 2);
  const tf::Tensor want = model({xa, xb})[0];
  CHECK(want.shape() == tf::TensorShape({2, 3, 3}));
  tf::testing::TempDir dir;
  model.save(dir / "two.tfmodel");
  const K::Model loaded = K::models::load_model(dir / "two.tfmodel");
  tf::testing::check_close(loaded({xa, xb})[0], want, 0.0, 0.0);
}
