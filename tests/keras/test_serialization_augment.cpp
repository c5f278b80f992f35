// Keras configs of the augmentation layers (keras/layers_augment.h, written and read by
// keras/serialization_augment.cpp): the configs Keras 3.15.1 writes (the literal: the "config"
// of keras.saving.serialize_keras_object for the Python layers named beside the C++ ones), read
// back into layers that compute what the originals compute.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "keras/layers.h"
#include "keras/layers_augment.h"
#include "keras/layers_more.h"
#include "keras/layers_preprocessing.h"
#include "keras/serialization_json.h"
#include "ops/binary.h"
#include "ops/movement.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
namespace K = tapeflow::keras;
namespace L = tapeflow::keras::layers;
using K::saving::Config;

TEST_CASE("serialization augment: the augmentation layers' configs are Keras'",
          "[keras][serialization]") {
  // keras.layers.X in order:
  //   Solarization(addition_factor=(0.1, 0.3), threshold_factor=0.4, value_range=(0, 1),
  //                seed=3, name="sol"),
  //   RandomInvert(factor=0.7, value_range=(0, 255), seed=4, name="inv"),
  //   RandomPosterization(factor=(2, 6), value_range=(0, 255), seed=5, name="post"),
  //   AutoContrast(value_range=(0, 1), name="ac"),
  //   RandomSharpness(factor=(0.2, 0.6), value_range=(0, 255), seed=6, name="sharp"),
  //   RandomErasing(factor=0.8, scale=(0.05, 0.2), fill_value=[1.0, 2.0, 3.0],
  //                 value_range=(0, 255), seed=7, name="erase"),
  //   RandomErasing(name="erase2"),
  //   RandomGaussianBlur(factor=0.5, kernel_size=5, sigma=(0.2, 0.8), value_range=(0, 255),
  //                      seed=8, name="blur"),
  //   RandomColorDegeneration(factor=(0.1, 0.5), value_range=(0, 255), seed=9, name="deg"),
  //   Equalization(value_range=(0, 255), bins=128, name="eq"),
  //   RandomShear(x_factor=0.3, y_factor=(0.1, 0.2), interpolation="nearest",
  //               fill_mode="constant", fill_value=1.0, seed=10, name="shear"),
  //   MixUp(alpha=0.4, seed=11, name="mix"), CutMix(factor=0.6, seed=12, name="cut")
  // One difference: Keras writes RandomShear's x_factor=0.3 as [-0.3, 0.3], which its own
  // from_config refuses; tapeflow writes 0.3 (and reads both, as the loop checks below).
  const Config keras = Config::parse(
      R"([{"name": "sol", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "data_format": "channels_last",
"value_range": [0, 1], "addition_factor": [0.1, 0.3], "threshold_factor": [0, 0.4], "seed": 3},
{"name": "inv", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "data_format": "channels_last", "factor":
[0, 0.7], "value_range": [0, 255], "seed": 4},
{"name": "post", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "data_format": "channels_last", "factor":
[2, 6], "value_range": [0, 255], "seed": 5},
{"name": "ac", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "data_format": "channels_last",
"value_range": [0, 1]},
{"name": "sharp", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "data_format": "channels_last", "factor":
[0.2, 0.6], "value_range": [0, 255], "seed": 6},
{"name": "erase", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "data_format": "channels_last", "factor":
[0, 0.8], "scale": [0.05, 0.2], "fill_value": [1.0, 2.0, 3.0], "value_range": [0, 255], "seed":
7},
{"name": "erase2", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "data_format": "channels_last", "factor":
[0, 1.0], "scale": [0.02, 0.33], "fill_value": null, "value_range": [0, 255], "seed": null},
{"name": "blur", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "data_format": "channels_last", "factor":
[0, 0.5], "kernel_size": [5, 5], "sigma": [0.2, 0.8], "value_range": [0, 255], "seed": 8},
{"name": "deg", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "data_format": "channels_last", "factor":
[0.1, 0.5], "value_range": [0, 255], "seed": 9},
{"name": "eq", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "data_format": "channels_last", "bins":
128, "value_range": [0, 255]},
{"name": "shear", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "data_format": "channels_last",
"x_factor": 0.3, "y_factor": [0.1, 0.2], "fill_mode": "constant", "interpolation":
"nearest", "seed": 10, "fill_value": 1.0},
{"name": "mix", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "data_format": "channels_last", "alpha":
0.4, "seed": 11},
{"name": "cut", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "data_format": "channels_last", "factor":
[0, 0.6], "seed": 12}])");
  L::RandomTransformOptions shear;
  shear.fill_mode = "constant";
  shear.interpolation = "nearest";
  shear.fill_value = 1.0;
  shear.seed = 10;
  shear.name = "shear";
  const std::vector<K::Layer> layers = {
      L::Solarization(L::Factor{0.1, 0.3}, 0.4, {0.0, 1.0}, 3, "sol"),
      L::RandomInvert(0.7, {0.0, 255.0}, 4, "inv"),
      L::RandomPosterization(L::Factor{2, 6}, {0.0, 255.0}, 5, "post"),
      L::AutoContrast({0.0, 1.0}, "ac"),
      L::RandomSharpness(L::Factor{0.2, 0.6}, {0.0, 255.0}, 6, "sharp"),
      L::RandomErasing(0.8, L::Factor{0.05, 0.2}, {1.0, 2.0, 3.0}, {0.0, 255.0}, 7, "erase"),
      L::RandomErasing(1.0, L::Factor{0.02, 0.33}, {}, {0.0, 255.0}, std::nullopt, "erase2"),
      L::RandomGaussianBlur(0.5, 5, L::Factor{0.2, 0.8}, {0.0, 255.0}, 8, "blur"),
      L::RandomColorDegeneration(L::Factor{0.1, 0.5}, {0.0, 255.0}, 9, "deg"),
      L::Equalization({0.0, 255.0}, 128, "eq"),
      L::RandomShear(0.3, L::Factor{0.1, 0.2}, shear),
      L::MixUp(0.4, 11, "mix"),
      L::CutMix(0.6, 12, "cut")};
  REQUIRE(keras.size() == layers.size());
  // Images in [0, 1] for "sol" and "ac", [0, 255] for the others.
  const tf::Tensor unit = tf::random::uniform({2, 8, 8, 3}, 0.0, 1.0, tf::float32, 1);
  const tf::Tensor bytes = tf::random::uniform({2, 8, 8, 3}, 0.0, 255.0, tf::float32, 2);
  for (size_t i = 0; i < layers.size(); ++i) {
    const K::Layer& layer = layers[i];
    CAPTURE(layer.name());
    const Config got = K::saving::get_config(layer);
    // As JSON values: Keras keeps (0, 255) as integers where tapeflow writes 0.0 and 255.0.
    const nlohmann::json g = nlohmann::json::parse(got.dump());
    const nlohmann::json w = nlohmann::json::parse(keras[i].dump());
    INFO("got  " << g.dump());
    INFO("want " << w.dump());
    CHECK(g == w);
    // Keras' config reads back into a layer that writes the same config and, from the same
    // random state, computes the same images.
    const K::Layer back = K::saving::from_config(layer.class_name(), keras[i]);
    CHECK(K::saving::get_config(back) == got);
    if (layer.name() == "shear") {  // Keras' own spelling of the symmetric factor reads too
      Config as_keras = keras[i];
      as_keras["x_factor"] = Config::parse("[-0.3, 0.3]");
      CHECK(K::saving::get_config(K::saving::from_config("RandomShear", as_keras)) == got);
    }
    const tf::Tensor x = layer.name() == "sol" || layer.name() == "ac" ? unit : bytes;
    tf::random::set_seed(5);
    const tf::Tensor want = layer(x, true);
    tf::random::set_seed(5);
    tf::testing::check_close(back(x, true), want, 0.0, 0.0);
  }
}

TEST_CASE("serialization augment: bad augmentation configs name the class and the key",
          "[keras][serialization]") {
  auto from = [](const std::string& cls, const std::string& config) {
    return K::saving::from_config(cls, Config::parse(config));
  };
  tf::testing::require_error([&] { from("RandomGaussianBlur", R"({"kernel_size": [3, 5]})"); },
                             {"RandomGaussianBlur config key \"kernel_size\"", "square"});
  tf::testing::require_error([&] { from("RandomSharpness", R"({"name": "s"})"); },
                             {"RandomSharpness config key \"factor\" is required"});
  tf::testing::require_error([&] { from("RandomPosterization", R"({"factor": [9, 12]})"); },
                             {"RandomPosterization config", "factor bounds must overlap [1, 8]"});
  tf::testing::require_error([&] { from("MixUp", R"({"alpha": 0.2, "beta": 0.3})"); },
                             {"MixUp config key \"beta\" is not supported"});
  tf::testing::require_error([&] { from("Equalization", R"({"data_format": "channels_middle"})"); },
                             {"Equalization config key \"data_format\"", "channels_middle"});
  tf::testing::require_error([&] { from("RandomErasing", R"({"fill_value": "noise"})"); },
                             {"RandomErasing config key \"fill_value\" must be a list of numbers"});
}

TEST_CASE("RandomColorJitter and Pipeline: Keras configs and behaviour", "[keras][serialization]") {
  // keras.layers.RandomColorJitter(value_range=(0, 255), brightness_factor=0.2,
  //   contrast_factor=0.3, saturation_factor=(0.4, 0.6), hue_factor=0.1, seed=7, name="cj")
  //   .get_config()
  const Config cj = Config::parse(R"({"name": "cj", "trainable": true, "dtype": {"module":
"keras", "class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null},
"data_format": "channels_last", "value_range": [0, 255], "brightness_factor": 0.2,
"contrast_factor": 0.3, "saturation_factor": [0.4, 0.6], "hue_factor": 0.1, "seed": 7})");
  L::RandomColorJitter jitter({.brightness_factor = 0.2,
                               .contrast_factor = 0.3,
                               .saturation_factor = L::Factor{0.4, 0.6},
                               .hue_factor = 0.1,
                               .seed = 7,
                               .name = "cj"});
  CHECK(K::saving::serialize(jitter)["config"] == cj);
  CHECK(K::saving::serialize(K::saving::from_config("RandomColorJitter", cj))["config"] == cj);
  // Identity in inference; in training the four layers in Keras' order with the same seed.
  const tf::Tensor x = tf::random::uniform({2, 5, 6, 3}, 0.0, 255.0, tf::float32, 11);
  tf::testing::check_close(jitter(x), x, 0, 0);
  tf::random::set_seed(3);
  const tf::Tensor got = jitter(x, true);
  tf::random::set_seed(3);
  tf::Tensor want = L::RandomBrightness(0.2, {0.0, 255.0}, 7)(x, true);
  want = L::RandomContrast(0.3, {0.0, 255.0}, 7)(want, true);
  want = L::RandomSaturation(L::Factor{0.4, 0.6}, {0.0, 255.0}, 7)(want, true);
  want = L::RandomHue(0.1, {0.0, 255.0}, 7)(want, true);
  tf::testing::check_close(got, want, 1e-6, 1e-4);
  CHECK(tf::reduce_max(tf::abs(got - x)).item<float>() > 0.5f);
  // Unset factors skip their layers: only brightness here.
  const Config only = K::saving::serialize(L::RandomColorJitter({.brightness_factor = 0.1}));
  CHECK(only["config"]["contrast_factor"].is_null());

  // keras.layers.Pipeline([Rescaling(0.5), RandomFlip(seed=1)], name="pipe"):
  // serialize_keras_object.
  const Config pipe_json = Config::parse(R"({"module": "keras.layers", "class_name": "Pipeline",
"config": {"layers": [{"module": "keras.layers", "class_name": "Rescaling", "config": {"name":
"rescaling", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "scale": 0.5, "offset": 0.0},
"registered_name": null}, {"module": "keras.layers", "class_name": "RandomFlip", "config":
{"name": "random_flip", "trainable": true, "dtype": {"module": "keras", "class_name":
"DTypePolicy", "config": {"name": "float32"}, "registered_name": null}, "data_format":
"channels_last", "seed": 1, "mode": "horizontal_and_vertical"}, "registered_name": null}],
"name": "pipe"}, "registered_name": null})");
  L::Pipeline pipe({L::Rescaling(0.5, 0.0, "rescaling"),
                    L::RandomFlip("horizontal_and_vertical", 1, "random_flip")},
                   "pipe");
  CHECK(K::saving::serialize(pipe) == pipe_json);
  K::Layer back = K::saving::deserialize(pipe_json);
  CHECK(back.class_name() == "Pipeline");
  CHECK(K::saving::serialize(back) == pipe_json);
  // In order, with the call's training flag (the flip acts in training only).
  tf::testing::check_close(pipe(x), x * 0.5f, 0, 0);
  tf::testing::check_close(back(x), x * 0.5f, 0, 0);
  CHECK(pipe.layers().size() == 2);
}

TEST_CASE("RandomPerspective: Keras config and behaviour", "[keras][serialization]") {
  // keras.layers.RandomPerspective(factor=0.7, scale=0.4, interpolation="nearest",
  //   fill_value=2.0, seed=3, name="rp").get_config()
  const Config rp = Config::parse(R"({"name": "rp", "trainable": true, "dtype": {"module":
"keras", "class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null},
"data_format": "channels_last", "factor": [0, 0.7], "scale": 0.4, "interpolation": "nearest",
"fill_value": 2.0, "seed": 3})");
  L::RandomPerspective layer(0.7, 0.4, "nearest", 2.0, 3, "rp");
  CHECK(K::saving::serialize(layer)["config"] == rp);
  CHECK(K::saving::serialize(K::saving::from_config("RandomPerspective", rp))["config"] == rp);
  const tf::Tensor x = tf::random::uniform({3, 8, 9, 3}, 0.0, 255.0, tf::float32, 21);
  // Inference, a zero factor and a zero scale leave the images as they are.
  tf::testing::check_close(layer(x), x, 0, 0);
  tf::testing::check_close(L::RandomPerspective(0.0, 1.0)(x, true), x, 0, 0);
  tf::testing::check_close(L::RandomPerspective(1.0, 0.0)(x, true), x, 0, 1e-3);
  // A probability range of (1, 1) applies it to every image (a single 1.0 is Keras' (0, 1): a
  // probability drawn per image); with scale 1 every image moves. A single image too.
  const tf::Tensor y = L::RandomPerspective(L::Factor{1.0, 1.0}, 1.0, "bilinear", 0.0, 5)(x, true);
  CHECK(y.shape() == x.shape());
  CHECK(tf::reduce_min(tf::reduce_max(tf::abs(y - x), std::vector<int>{1, 2, 3})).item<float>() >
        1.0f);
  CHECK(L::RandomPerspective()(tf::slice(tf::reshape(x, {27, 8, 3}), {0, 0, 0}, {8, 8, 3}), true)
            .shape() == tf::TensorShape({8, 8, 3}));
  tf::testing::require_error([] { L::RandomPerspective(1.0, 1.5); }, {"scale", "1.5"});
  tf::testing::require_error([] { L::RandomPerspective(1.0, 0.5, "bicubic"); }, {"bicubic"});
}

TEST_CASE("ContrastLimitedAdaptiveHistogramEqualization: Keras config", "[keras][serialization]") {
  // keras.layers.ContrastLimitedAdaptiveHistogramEqualization(value_range=(0, 1),
  //   clip_limit=0.0, tile_grid_size=(2, 3), name="clahe").get_config()
  const Config keras = Config::parse(R"({"name": "clahe", "trainable": true, "dtype": {"module":
"keras", "class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null},
"data_format": "channels_last", "value_range": [0, 1], "clip_limit": 0.0, "tile_grid_size":
[2, 3]})");
  L::ContrastLimitedAdaptiveHistogramEqualization layer({0.0, 1.0}, 0.0, {2, 3}, "clahe");
  // As JSON values: Keras keeps (0, 1) as integers where tapeflow writes 0.0 and 1.0.
  const nlohmann::json got = nlohmann::json::parse(K::saving::serialize(layer)["config"].dump());
  CHECK(got == nlohmann::json::parse(keras.dump()));
  const K::Layer back =
      K::saving::from_config("ContrastLimitedAdaptiveHistogramEqualization", keras);
  const tf::Tensor x = tf::random::uniform({2, 9, 10, 3}, 0.0, 1.0, tf::float32, 4);
  tf::testing::check_close(back(x), layer(x), 0, 0);
  // The defaults: (0, 255), 4.0, (8, 8).
  const K::Layer defaults = K::saving::from_config("ContrastLimitedAdaptiveHistogramEqualization",
                                                   Config::parse(R"({"name": "c"})"));
  const Config d = K::saving::get_config(defaults);
  CHECK(d["clip_limit"] == 4.0);
  CHECK(d["tile_grid_size"] == Config::parse("[8, 8]"));
  tf::testing::require_error(
      [] {
        K::saving::from_config("ContrastLimitedAdaptiveHistogramEqualization",
                               Config::parse(R"({"tile_grid_size": [2, 2.5]})"));
      },
      {"ContrastLimitedAdaptiveHistogramEqualization", "tile_grid_size", "2 integers"});
}

TEST_CASE("RandomElasticTransform: Keras config", "[keras][serialization]") {
  // keras.layers.RandomElasticTransform(factor=0.8, scale=(0.2, 0.5), interpolation="nearest",
  //   fill_mode="constant", fill_value=3.0, value_range=(0, 1), seed=4, name="ret").get_config()
  const Config keras = Config::parse(R"({"name": "ret", "trainable": true, "dtype": {"module":
"keras", "class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null},
"data_format": "channels_last", "factor": [0, 0.8], "scale": [0.2, 0.5], "interpolation":
"nearest", "fill_mode": "constant", "fill_value": 3.0, "value_range": [0, 1], "seed": 4})");
  L::RandomElasticTransform layer(0.8, L::Factor{0.2, 0.5}, "nearest", "constant", 3.0, {0, 1}, 4,
                                  "ret");
  const nlohmann::json got = nlohmann::json::parse(K::saving::serialize(layer)["config"].dump());
  CHECK(got == nlohmann::json::parse(keras.dump()));
  const K::Layer back = K::saving::from_config("RandomElasticTransform", keras);
  CHECK(K::saving::get_config(back) == K::saving::get_config(layer));
  // Keras' defaults: factor (0, 1), scale (0, 1), bilinear, reflect, 0, (0, 255), no seed.
  const Config d = K::saving::get_config(
      K::saving::from_config("RandomElasticTransform", Config::parse(R"({"name": "e"})")));
  CHECK(nlohmann::json::parse(d.dump()) ==
        nlohmann::json::parse(R"({"name": "e", "trainable": true, "dtype": {"module": "keras",
"class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null},
"data_format": "channels_last", "factor": [0, 1.0], "scale": [0, 1.0], "interpolation":
"bilinear", "fill_mode": "reflect", "fill_value": 0.0, "value_range": [0, 255], "seed": null})"));
  tf::testing::require_error(
      [] {
        K::saving::from_config("RandomElasticTransform",
                               Config::parse(R"({"fill_mode": "grid-wrap"})"));
      },
      {"RandomElasticTransform", "grid-wrap"});
}

TEST_CASE("RandAugment: Keras config", "[keras][serialization]") {
  // keras.layers.RandAugment(value_range=(0, 1), num_ops=3, factor=(0.2, 0.7),
  //   interpolation="nearest", seed=5, name="ra").get_config(), and RandAugment().get_config()
  const Config keras = Config::parse(R"({"name": "ra", "trainable": true, "dtype": {"module":
"keras", "class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null},
"data_format": "channels_last", "value_range": [0, 1], "num_ops": 3, "factor": [0.2, 0.7],
"interpolation": "nearest", "seed": 5})");
  L::RandAugment layer({0, 1}, 3, L::Factor{0.2, 0.7}, "nearest", 5, "ra");
  CHECK(nlohmann::json::parse(K::saving::serialize(layer)["config"].dump()) ==
        nlohmann::json::parse(keras.dump()));
  const K::Layer back = K::saving::from_config("RandAugment", keras);
  CHECK(K::saving::get_config(back) == K::saving::get_config(layer));
  const Config d =
      K::saving::get_config(K::saving::from_config("RandAugment", Config::parse("{}")));
  CHECK(nlohmann::json::parse(d.dump())["factor"] == nlohmann::json::parse("[0, 0.5]"));
  CHECK(d["num_ops"] == 2);
  CHECK(d["name"].get<std::string>().rfind("rand_augment", 0) == 0);
}

TEST_CASE("AugMix: Keras config", "[keras][serialization]") {
  // keras.layers.AugMix(value_range=(0, 1), num_chains=2, chain_depth=4, factor=(0.1, 0.6),
  //   alpha=0.5, all_ops=False, interpolation="nearest", seed=7, name="am").get_config()
  const Config keras = Config::parse(R"({"name": "am", "trainable": true, "dtype": {"module":
"keras", "class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null},
"data_format": "channels_last", "value_range": [0, 1], "num_chains": 2, "chain_depth": 4,
"factor": [0.1, 0.6], "alpha": 0.5, "all_ops": false, "interpolation": "nearest", "seed": 7})");
  L::AugMix layer({0, 1}, 2, 4, L::Factor{0.1, 0.6}, 0.5, false, "nearest", 7, "am");
  CHECK(nlohmann::json::parse(K::saving::serialize(layer)["config"].dump()) ==
        nlohmann::json::parse(keras.dump()));
  CHECK(K::saving::get_config(K::saving::from_config("AugMix", keras)) ==
        K::saving::get_config(layer));
  // Keras' AugMix().get_config() after the name: its defaults.
  Config d = K::saving::get_config(K::saving::from_config("AugMix", Config::parse("{}")));
  d.erase("name");
  CHECK(nlohmann::json::parse(d.dump()) == nlohmann::json::parse(R"({"trainable": true, "dtype":
{"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"},
"registered_name": null}, "data_format": "channels_last", "value_range": [0, 255],
"num_chains": 3, "chain_depth": 3, "factor": [0, 0.3], "alpha": 1.0, "all_ops": true,
"interpolation": "bilinear", "seed": null})"));
}
