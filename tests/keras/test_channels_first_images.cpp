// The image preprocessing and augmentation layers with data_format "channels_first": made while
// backend::image_data_format() is "channels_first" (Keras' data_format=None) or loaded from a
// config that says so, each computes on (C, H, W) / (N, C, H, W) images what its channels_last
// twin (same arguments and seed) computes on the transposed images; output shapes, the rank-3
// form, the layers that RandAugment, AugMix and RandomColorJitter build inside (channels_last
// whatever the global format), CutMix's call_with_labels, configs both ways, and the input
// checks. Every device of devices_under_test().
#include <functional>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "keras/layers.h"
#include "keras/layers_augment.h"
#include "keras/layers_preprocessing.h"
#include "keras/serialization_json.h"
#include "ops/factory.h"
#include "ops/movement.h"
#include "ops/random.h"
#include "support/testing.h"

namespace tf = tapeflow;
namespace K = tf::keras;
namespace L = tf::keras::layers;
using tf::testing::check_close;

namespace {

// Sets backend::image_data_format() for a scope.
struct GlobalFormat {
  explicit GlobalFormat(const std::string& f) : old_(K::backend::image_data_format()) {
    K::backend::set_image_data_format(f);
  }
  ~GlobalFormat() { K::backend::set_image_data_format(old_); }
  GlobalFormat(const GlobalFormat&) = delete;
  GlobalFormat& operator=(const GlobalFormat&) = delete;

 private:
  std::string old_;
};

struct Maker {
  const char* what;
  std::function<K::Layer()> make;
};

std::vector<Maker> makers() {
  const L::RandomTransformOptions geo{.seed = 3};
  return {
      {"Resizing", [] { return L::Resizing(5, 7); }},
      {"CenterCrop", [] { return L::CenterCrop(4, 5); }},
      {"RandomCrop", [] { return L::RandomCrop(4, 5, 3); }},
      {"RandomFlip", [] { return L::RandomFlip("horizontal_and_vertical", 3); }},
      {"RandomRotation", [=] { return L::RandomRotation(0.2, geo); }},
      {"RandomZoom", [=] { return L::RandomZoom(0.3, std::nullopt, geo); }},
      {"RandomTranslation", [=] { return L::RandomTranslation(0.2, 0.1, geo); }},
      {"RandomContrast",
       [] {
         return L::RandomContrast(0.5, {0.0, 255.0}, 3);
       }},
      {"RandomBrightness",
       [] {
         return L::RandomBrightness(0.3, {0.0, 255.0}, 3);
       }},
      {"RandomGrayscale", [] { return L::RandomGrayscale(0.5, 3); }},
      {"RandomSaturation",
       [] {
         return L::RandomSaturation(0.5, {0.0, 255.0}, 3);
       }},
      {"RandomHue",
       [] {
         return L::RandomHue(0.3, {0.0, 255.0}, 3);
       }},
      {"Solarization",
       [] {
         return L::Solarization(0.2, 0.3, {0.0, 255.0}, 3);
       }},
      {"RandomInvert",
       [] {
         return L::RandomInvert(0.5, {0.0, 255.0}, 3);
       }},
      {"RandomPosterization",
       [] {
         return L::RandomPosterization(4, {0.0, 255.0}, 3);
       }},
      {"AutoContrast", [] { return L::AutoContrast(); }},
      {"RandomSharpness",
       [] {
         return L::RandomSharpness(0.5, {0.0, 255.0}, 3);
       }},
      {"RandomErasing",
       [] {
         return L::RandomErasing(1.0, {0.1, 0.3}, {}, {0.0, 255.0}, 3);
       }},
      {"RandomGaussianBlur",
       [] {
         return L::RandomGaussianBlur(1.0, 3, 0.5, {0.0, 255.0}, 3);
       }},
      {"RandomColorDegeneration",
       [] {
         return L::RandomColorDegeneration(0.5, {0.0, 255.0}, 3);
       }},
      {"Equalization", [] { return L::Equalization(); }},
      {"RandAugment",
       [] {
         return L::RandAugment({0.0, 255.0}, 2, 0.5, "bilinear", 3);
       }},
      {"AugMix",
       [] {
         return L::AugMix({0.0, 255.0}, 2, 2, 0.3, 1.0, true, "bilinear", 3);
       }},
      {"RandomElasticTransform", [] { return L::RandomElasticTransform(1.0, 1.0); }},
      {"ContrastLimitedAdaptiveHistogramEqualization",
       [] {
         return L::ContrastLimitedAdaptiveHistogramEqualization({0.0, 255.0}, 4.0, {2, 2});
       }},
      {"RandomShear", [=] { return L::RandomShear(0.2, 0.1, geo); }},
      {"MixUp", [] { return L::MixUp(0.2, 3); }},
      {"CutMix", [] { return L::CutMix(1.0, 3); }},
      {"RandomPerspective", [] { return L::RandomPerspective(0.5, 1.0, "bilinear", 0.0, 3); }},
      {"RandomColorJitter",
       [] {
         return L::RandomColorJitter({.brightness_factor = 0.2,
                                      .contrast_factor = 0.3,
                                      .saturation_factor = 0.4,
                                      .hue_factor = 0.1,
                                      .seed = 3});
       }},
  };
}

tf::Tensor images_last(const tf::TensorShape& s) {
  return tf::random::uniform(s, 0, 255, tf::float32, 17);
}

}  // namespace

TEST_CASE("image layers made under image_data_format channels_first compute their twins' results",
          "[cpu][cuda][keras]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(device.to_string());
    for (const Maker& m : makers()) {
      CAPTURE(device.to_string(), m.what);
      K::Layer first = [&] {
        GlobalFormat f("channels_first");
        return m.make();
      }();
      const K::Layer last = m.make();
      REQUIRE(K::saving::get_config(first)["data_format"] == "channels_first");
      REQUIRE(K::saving::get_config(last)["data_format"] == "channels_last");
      const tf::Tensor x = images_last({2, 8, 9, 3});
      const tf::Tensor xf = tf::transpose(x, {0, 3, 1, 2});
      // Seeded draws follow TF's rules (a global counter per seed): the same start for both.
      tf::random::set_seed(11);
      const tf::Tensor y = last(x, true);
      tf::random::set_seed(11);
      const tf::Tensor yf = first(xf, true);
      REQUIRE(yf.shape() == tf::transpose(y, {0, 3, 1, 2}).shape());
      CHECK(first.impl().compute_output_shape({tf::None, 3, 8, 9}) ==
            tf::TensorShape({tf::None, y.shape()[3], y.shape()[1], y.shape()[2]}));
      check_close(yf, tf::transpose(y, {0, 3, 1, 2}), 1e-4, 1e-3);
      // One image (C, H, W), inference: the deterministic layers only.
      const tf::Tensor one = tf::slice(xf, {0, 0, 0, 0}, {1, -1, -1, -1});
      const tf::Tensor one_last = tf::slice(x, {0, 0, 0, 0}, {1, -1, -1, -1});
      const tf::Tensor z = first(tf::squeeze(one, {0}), false);
      const tf::Tensor zl = last(tf::squeeze(one_last, {0}), false);
      REQUIRE(z.rank() == 3);
      check_close(z, tf::transpose(zl, {2, 0, 1}), 1e-4, 1e-3);
    }
  }
}

TEST_CASE("channels_first image layer configs load, say so and round trip", "[keras]") {
  for (const Maker& m : makers()) {
    CAPTURE(m.what);
    const K::Layer last = m.make();
    auto config = K::saving::get_config(last);
    config["data_format"] = "channels_first";
    const K::Layer loaded = K::saving::from_config(last.class_name(), config);
    REQUIRE(K::saving::get_config(loaded)["data_format"] == "channels_first");
    const tf::Tensor x = images_last({2, 8, 9, 3});
    const tf::Tensor y = last(x, false);
    check_close(loaded(tf::transpose(x, {0, 3, 1, 2}), false), tf::transpose(y, {0, 3, 1, 2}), 1e-4,
                1e-3);
  }
  // null is Keras' default format, channels_last here.
  auto config = K::saving::get_config(L::RandomFlip());
  config["data_format"] = nullptr;
  REQUIRE(K::saving::get_config(K::saving::from_config("RandomFlip", config))["data_format"] ==
          "channels_last");
  config["data_format"] = "channels_middle";
  tf::testing::require_error([&] { K::saving::from_config("RandomFlip", config); },
                             {"data_format", "channels_middle"});
}

TEST_CASE("CutMix and MixUp mix channels_first images with their labels", "[cpu][cuda][keras]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(device.to_string());
    CAPTURE(device.to_string());
    const tf::Tensor x = images_last({4, 8, 9, 3});
    const tf::Tensor labels = tf::one_hot(tf::constant(std::vector<int32_t>{0, 1, 1, 0}, {4}), 2);
    auto twins = [&](auto make) {
      const auto last = make();
      const auto first = [&] {
        GlobalFormat f("channels_first");
        return make();
      }();
      tf::random::set_seed(11);
      const auto [y, ly] = last.call_with_labels(x, labels, true);
      tf::random::set_seed(11);
      const auto [yf, lf] = first.call_with_labels(tf::transpose(x, {0, 3, 1, 2}), labels, true);
      check_close(yf, tf::transpose(y, {0, 3, 1, 2}), 1e-5, 1e-4);
      check_close(lf, ly, 1e-6, 1e-6);
    };
    twins([] { return L::CutMix(1.0, 5); });
    twins([] { return L::MixUp(0.2, 5); });
  }
}

TEST_CASE("channels_first image layers check their inputs in their own layout", "[keras]") {
  GlobalFormat f("channels_first");
  const K::Layer flip = L::RandomFlip("horizontal", 1);
  tf::testing::require_error(
      [&] {
        flip(tf::ones({2, 3, 4, 5, 6}), true);
      },
      {"expected images of rank 3 (channels, height, width) or 4 (batch, "
       "channels, height, width)"});
  // A channels_first CenterCrop crops axes 2 and 3.
  const K::Layer crop = L::CenterCrop(2, 3);
  REQUIRE(crop(tf::ones({1, 5, 6, 7}), false).shape() == tf::TensorShape({1, 5, 2, 3}));
}
