// MelSpectrogram (keras/layers_audio.h): outputs against Keras 3.15.1's (TF backend) for the
// same audio and options, shapes, gradients w.r.t. the audio against central differences
// (float64 policy), Keras configs both ways, a functional model saved and loaded, training in
// fit's traced step, and the errors.
#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "keras/functional.h"
#include "keras/layers.h"
#include "keras/layers_audio.h"
#include "keras/mixed_precision.h"
#include "keras/model.h"
#include "keras/optimizers.h"
#include "keras/serialization.h"
#include "keras/serialization_json.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/movement.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "support/temp_dir.h"
#include "support/testing.h"

namespace tf = tapeflow;
namespace K = tapeflow::keras;
namespace L = tapeflow::keras::layers;
using K::saving::Config;
using tf::testing::check_close;
using tf::testing::require_error;

namespace {

// The two signals of 300 samples the Keras reference was computed on:
//   t = np.arange(300)
//   x = np.stack([np.sin(0.3 t) + 0.5 np.cos(0.05 t t / 50), 0.25 np.sin(1.1 t) - np.cos(0.7 t)])
//       .astype("float32")
tf::Tensor audio() {
  std::vector<float> v;
  for (int row = 0; row < 2; ++row)
    for (int i = 0; i < 300; ++i) {
      const double t = i;
      v.push_back(static_cast<float>(row == 0
                                         ? std::sin(0.3 * t) + 0.5 * std::cos(0.05 * t * t / 50)
                                         : 0.25 * std::sin(1.1 * t) - std::cos(0.7 * t)));
    }
  return tf::constant(v, {2, 300});
}

std::vector<float> picks(const tf::Tensor& y, const std::vector<int>& at) {
  const auto v = y.numpy<float>();
  std::vector<float> out;
  for (int i : at) out.push_back(v[static_cast<size_t>(i)]);
  return out;
}

void check_picks(const tf::Tensor& y, const std::vector<int>& at, const std::vector<double>& want,
                 double atol) {
  const auto got = picks(y, at);
  for (size_t i = 0; i < want.size(); ++i) {
    INFO("flat index " << at[i]);
    CHECK(std::abs(got[i] - want[i]) <= atol + 1e-4 * std::abs(want[i]));
  }
}

const std::vector<int> kAt = {0, 5, 17, 40, 77, 100, 150, 200, 207};

}  // namespace

TEST_CASE("MelSpectrogram equals Keras 3.15's on every device", "[keras][layers]") {
  const tf::Tensor x = audio();
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    // keras.layers.MelSpectrogram(fft_length=64, sequence_stride=16, sequence_length=48,
    //   num_mel_bins=8, sampling_rate=8000, min_freq=50.0, max_freq=3500.0)(x)
    L::MelSpectrogram mel({.fft_length = 64,
                           .sequence_stride = 16,
                           .sequence_length = 48,
                           .sampling_rate = 8000,
                           .num_mel_bins = 8,
                           .min_freq = 50.0,
                           .max_freq = 3500.0});
    const tf::Tensor y = mel(x);
    CHECK(y.shape() == tf::TensorShape{2, 8, 19});
    CHECK(y.dtype() == tf::float32);
    check_picks(y, kAt,
                {24.007423400878906, 13.521199226379395, 18.119855880737305, 15.726186752319336,
                 -8.115650177001953, -35.57820129394531, -48.626522064208984, 16.98493194580078,
                 16.984779357910156},
                2e-3);
    CHECK(tf::reduce_sum(y).item<float>() == Approx(-2043.699).margin(0.05));
    // Floored at the batch's largest value minus top_db, as Keras.
    CHECK(tf::reduce_max(y).item<float>() == Approx(25.638866).margin(1e-3));
    CHECK(tf::reduce_min(y).item<float>() == Approx(25.638866 - 80.0).margin(1e-3));
    // MelSpectrogram(fft_length=64, sequence_stride=16, num_mel_bins=8, sampling_rate=8000,
    //   power_to_db=False, mag_exp=1.0, window="hamming")(x)
    L::MelSpectrogram mag({.fft_length = 64,
                           .sequence_stride = 16,
                           .window = "hamming",
                           .sampling_rate = 8000,
                           .num_mel_bins = 8,
                           .power_to_db = false,
                           .mag_exp = 1.0});
    const tf::Tensor m = mag(x);
    check_picks(m, kAt,
                {19.478565216064453, 6.367900848388672, 5.851168632507324, 3.8363797664642334,
                 1.2456787824630737, 0.18113616108894348, 0.1503666788339615, 7.93973970413208,
                 8.670069694519043},
                1e-4);
    CHECK(tf::reduce_sum(m).item<float>() == Approx(1629.1942).epsilon(1e-5));
    // MelSpectrogram(fft_length=32, sequence_stride=10, num_mel_bins=4, sampling_rate=1000,
    //   window=None, power_to_db=False)(x[0]): unbatched audio.
    L::MelSpectrogram bare({.fft_length = 32,
                            .sequence_stride = 10,
                            .window = "",
                            .sampling_rate = 1000,
                            .num_mel_bins = 4,
                            .power_to_db = false});
    const tf::Tensor b = bare(tf::slice(tf::reshape(x, {600}), {0}, {300}));
    CHECK(b.shape() == tf::TensorShape{4, 31});
    check_picks(b, {0, 3, 20, 50, 100, 123},
                {73.52804565429688, 86.51756286621094, 245.83840942382812, 14.558687210083008,
                 2.5921146869659424, 0.15949700772762299},
                1e-3);
    CHECK(tf::reduce_sum(b).item<float>() == Approx(4505.8018).epsilon(1e-5));
  }
}

TEST_CASE("MelSpectrogram: shapes, dtypes and gradients w.r.t. the audio", "[keras][layers]") {
  L::MelSpectrogram mel(
      {.fft_length = 16, .sequence_stride = 4, .sampling_rate = 100, .num_mel_bins = 3});
  CHECK(mel.impl().compute_output_shape({tf::None, 37}) == tf::TensorShape{tf::None, 3, 10});
  CHECK(mel.impl().compute_output_shape({37}) == tf::TensorShape{3, 10});
  // 39 samples: Keras 3.15's compute_output_shape says 11 frames; the layer returns 10.
  CHECK(mel(tf::zeros({2, 39})).shape() == tf::TensorShape{2, 3, 10});
  CHECK(mel.impl().compute_output_shape({2, 39}) == tf::TensorShape{2, 3, 10});
  // A mixed_float16 layer computes in float32 and returns float16.
  L::MelSpectrogram half(
      {.fft_length = 16, .sequence_stride = 4, .sampling_rate = 100, .num_mel_bins = 3});
  half.set_dtype_policy(K::mixed_precision::Policy("mixed_float16"));
  CHECK(half(tf::ones({1, 20})).dtype() == tf::float16);
  // Gradients of the power spectrum in decibels (no floor reached), float64 policy.
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    L::MelSpectrogram f64({.fft_length = 8,
                           .sequence_stride = 3,
                           .sampling_rate = 100,
                           .num_mel_bins = 2,
                           .top_db = 1e6});
    f64.set_dtype_policy(K::mixed_precision::Policy("float64"));
    tf::testing::check_gradient([&](const tf::Tensor& a) { return f64(a); }, {2, 13},
                                tf::testing::random_values(26, 0.5, 1.5, 3), 1e-6, 1e-7);
  }
}

TEST_CASE("MelSpectrogram: Keras configs, models and saving", "[keras][serialization]") {
  // keras.layers.MelSpectrogram(fft_length=64, sequence_stride=16, sequence_length=48,
  //   num_mel_bins=8, sampling_rate=8000, min_freq=50.0, max_freq=3500.0, name="mel"):
  //   serialize_keras_object
  const std::string keras = R"({"module": "keras.layers", "class_name": "MelSpectrogram",
"config": {"name": "mel", "trainable": true, "dtype": {"module": "keras",
"class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null},
"fft_length": 64, "sequence_stride": 16, "sequence_length": 48, "window": "hann",
"sampling_rate": 8000, "num_mel_bins": 8, "min_freq": 50.0, "max_freq": 3500.0,
"power_to_db": true, "top_db": 80.0, "mag_exp": 2.0, "min_power": 1e-10, "ref_power": 1.0},
"registered_name": null})";
  L::MelSpectrogram mel({.fft_length = 64,
                         .sequence_stride = 16,
                         .sequence_length = 48,
                         .sampling_rate = 8000,
                         .num_mel_bins = 8,
                         .min_freq = 50.0,
                         .max_freq = 3500.0,
                         .name = "mel"});
  CHECK(K::saving::serialize(mel) == Config::parse(keras));
  // Keras' defaults (MelSpectrogram(window=None)): sequence_length and max_freq resolved.
  const Config defaults = K::saving::serialize(L::MelSpectrogram({.window = "", .name = "m2"}));
  CHECK(defaults["config"]["sequence_length"] == 2048);
  CHECK(defaults["config"]["max_freq"] == 8000);
  CHECK(defaults["config"]["window"].is_null());
  K::Layer back = K::saving::deserialize(Config::parse(keras));
  CHECK(back.class_name() == "MelSpectrogram");
  CHECK(K::saving::serialize(back) == Config::parse(keras));
  check_close(back(audio()), mel(audio()), 0, 0);

  // A functional model: mel spectrogram, then a small classifier; saved and loaded whole.
  auto in = K::Input({300}, std::nullopt, "audio");
  auto h = L::MelSpectrogram({.fft_length = 64,
                              .sequence_stride = 16,
                              .sampling_rate = 8000,
                              .num_mel_bins = 8,
                              .name = "mel"})(in);
  CHECK(h.shape() == tf::TensorShape{tf::None, 8, 19});
  auto o = L::Dense(3, {.name = "head"})(L::Flatten()(h));
  K::Model model(std::vector<K::KerasTensor>{in}, std::vector<K::KerasTensor>{o}, "audio_model");
  const tf::Tensor want = model(audio());
  tf::testing::TempDir dir;
  model.save(dir / "audio.tfmodel");
  K::Model loaded = K::models::load_model(dir / "audio.tfmodel");
  check_close(loaded(audio()), want, 0.0, 0.0);
  CHECK(K::models::to_json(loaded) == K::models::to_json(model));

  // Strict reading.
  Config bad = Config::parse(keras);
  bad["config"]["window"] = Config::array({0.5, 1.0});
  require_error([&] { K::saving::deserialize(bad); },
                {"MelSpectrogram config key \"window\"", "no window arrays"});
  bad = Config::parse(keras);
  bad["config"]["center"] = true;
  require_error([&] { K::saving::deserialize(bad); }, {"MelSpectrogram", "center"});
}

TEST_CASE("MelSpectrogram trains a model in fit's traced step", "[keras][layers]") {
  // Two classes of tones (low and high frequency) told apart from their mel spectrograms. Seeded:
  // unseeded, about one initialisation in 150 already separates the classes by a margin so wide
  // (the dB features are large) that the first epoch's loss is 0.
  tf::random::set_seed(3);
  std::vector<float> xs;
  std::vector<int32_t> ys;
  for (int i = 0; i < 40; ++i) {
    const int cls = i % 2;
    const double f = (cls == 0 ? 0.2 : 1.2) + 0.01 * i;
    for (int t = 0; t < 128; ++t) xs.push_back(static_cast<float>(std::sin(f * t + i)));
    ys.push_back(cls);
  }
  auto in = K::Input({128});
  auto h = L::MelSpectrogram(
      {.fft_length = 32, .sequence_stride = 16, .sampling_rate = 1000, .num_mel_bins = 6})(in);
  auto o = L::Dense(2)(L::Flatten()(h));
  K::Model model(std::vector<K::KerasTensor>{in}, std::vector<K::KerasTensor>{o}, "tones");
  model.compile(K::optimizers::Adam(0.01), K::losses::SparseCategoricalCrossentropy(true),
                {"accuracy"});
  const tf::Tensor x = tf::constant(xs, {40, 128});
  const tf::Tensor y = tf::constant(ys, {40});
  auto hist = model.fit(x, y, {.epochs = 15, .batch_size = 16, .verbose = 0});
  const auto& loss = hist.history.at("loss");
  CHECK((loss.back() < 0.5 * loss.front() || loss.back() < 1e-6));
  CHECK(hist.history.at("accuracy").back() == Approx(1.0));
}

TEST_CASE("MelSpectrogram: bad options and inputs are errors naming the layer", "[keras][layers]") {
  require_error([] { L::MelSpectrogram({.fft_length = 64, .sequence_length = 65, .name = "m"}); },
                {"fft_length", "sequence_length", "65"});
  require_error([] { L::MelSpectrogram({.window = "kaiser"}); }, {"window", "kaiser"});
  require_error([] { L::MelSpectrogram({.sampling_rate = 8000, .max_freq = 5000.0}); },
                {"MelSpectrogram", "max_freq 5000", "sampling_rate 8000"});
  require_error([] { L::MelSpectrogram({.sequence_stride = 0}); },
                {"MelSpectrogram", "sequence_stride", "0"});
  L::MelSpectrogram mel({.fft_length = 64, .sequence_stride = 16, .name = "mel"});
  require_error([&] { mel(tf::zeros({2, 32})); }, {"mel", "more than 32 samples", "(2, 32)"});
  require_error([&] { mel(tf::zeros({2, 3, 100})); }, {"mel", "MelSpectrogram", "(2, 3, 100)"});
}

namespace {

// The (2, 60, 2) signals of the STFTSpectrogram references:
//   t = np.arange(60)
//   x = np.stack([np.sin(0.3 t) + 0.2 np.cos(1.7 t), np.cos(0.05 t t / 10)], -1)[None]
//       .repeat(2, 0).astype("float32"); x[1] *= 0.5
tf::Tensor two_channels() {
  std::vector<float> v;
  for (int b = 0; b < 2; ++b)
    for (int i = 0; i < 60; ++i) {
      const double t = i;
      const float scale = b == 0 ? 1.0f : 0.5f;
      v.push_back(static_cast<float>(std::sin(0.3 * t) + 0.2 * std::cos(1.7 * t)) * scale);
      v.push_back(static_cast<float>(std::cos(0.05 * t * t / 10)) * scale);
    }
  return tf::constant(v, {2, 60, 2});
}

struct StftCase {
  L::STFTSpectrogramOptions options;
  tf::TensorShape shape;
  std::vector<double> picks;  // at flat indices 0, 3, 7, 11, 20, 33, 50, 77 (mod the size)
  double sum;
};

}  // namespace

TEST_CASE("STFTSpectrogram equals Keras 3.15's for every mode and window", "[keras][layers]") {
  // keras.layers.STFTSpectrogram(**options)(x), Keras 3.15.1 (TF backend, SciPy's windows).
  const std::vector<StftCase> cases = {
      {{.mode = "log", .frame_length = 16, .frame_step = 4, .fft_length = 16},
       {2, 12, 18},
       {0.5575746297836304, -2.3707022666931152, -5.175666809082031, -2.007420778274536,
        -0.4618985950946808, -5.911744117736816, -5.108767986297607, -1.4151182174682617},
       -1384.724853515625},
      {{.mode = "magnitude",
        .frame_length = 12,
        .frame_step = 5,
        .fft_length = 16,
        .window = "hamming",
        .periodic = true,
        .scaling = "spectrum",
        .padding = "same"},
       {2, 12, 18},
       {0.6344727873802185, 0.09172796458005905, 0.0071134720928967, 0.1814141869544983,
        0.24778762459754944, 0.00996564980596304, 0.006370236165821552, 0.08332975953817368},
       51.76335144042969},
      {{.mode = "psd",
        .frame_length = 10,
        .frame_step = 3,
        .window = "blackman",
        .scaling = "",
        .expand_dims = true},
       {2, 17, 9, 2},
       {11.310429573059082, 20.426916122436523, 1.2036709785461426, 0.00011148377961944789,
        11.87165355682373, 5.455875680127065e-07, 0.024551451206207275, 0.9364157915115356},
       982.2028198242188},
      {{.mode = "stft", .frame_length = 8, .frame_step = 8, .window = ""},
       {2, 7, 20},
       {5.534385681152344, -0.5906611680984497, 0.7325018644332886, -0.011693514883518219,
        -1.792606234550476, 0.2935642898082733, -2.507720947265625, 0.7022940516471863},
       20.030681610107422},
  };
  const tf::Tensor x = two_channels();
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    for (const StftCase& c : cases) {
      INFO("mode " << c.options.mode << ", window " << c.options.window);
      L::STFTSpectrogram layer(c.options);
      const tf::Tensor y = layer(x);
      CHECK(y.shape() == c.shape);
      CHECK(layer.impl().compute_output_shape({tf::None, 60, 2}) == tf::TensorShape([&] {
              auto d = c.shape.dims();
              d[0] = tf::None;
              return d;
            }()));
      const auto v = y.numpy<float>();
      const std::vector<int> at = {0, 3, 7, 11, 20, 33, 50, 77};
      for (size_t i = 0; i < at.size(); ++i) {
        const double want = c.picks[i];
        const double got = v[static_cast<size_t>(at[i]) % v.size()];
        INFO("flat index " << at[i]);
        // Keras computes its kernels' cosines in float32 (args up to 2 pi 15 * 8 / 16);
        // tapeflow's in float64: the last digits differ, and a log of a tiny value more.
        CHECK(std::abs(got - want) <= 2e-5 + 2e-4 * std::abs(want));
      }
      CHECK(tf::reduce_sum(y).item<float>() == Approx(c.sum).epsilon(1e-4));
    }
    // angle = atan2(imag, real) of the same kernels; channels_first = channels_last transposed
    // (Keras' channels_first does not run on TF's CPU).
    L::STFTSpectrogramOptions o{.mode = "angle",
                                .frame_length = 9,
                                .frame_step = 4,
                                .fft_length = 12,
                                .window = "bartlett"};
    const tf::Tensor angle = L::STFTSpectrogram(o)(x);
    CHECK(angle.shape() == tf::TensorShape{2, 13, 14});
    o.mode = "real";
    const tf::Tensor re = L::STFTSpectrogram(o)(x);
    o.mode = "imag";
    const tf::Tensor im = L::STFTSpectrogram(o)(x);
    check_close(angle, tf::atan2(im, re), 1e-6, 1e-6);
    o.data_format = "channels_first";
    const tf::Tensor first = L::STFTSpectrogram(o)(tf::transpose(x, {0, 2, 1}));
    CHECK(first.shape() == tf::TensorShape{2, 14, 13});
    check_close(first, tf::transpose(im, {0, 2, 1}), 1e-6, 1e-6);
  }
}

TEST_CASE("STFTSpectrogram: Keras configs, trainable kernels, saving, errors",
          "[keras][serialization]") {
  // STFTSpectrogram(mode="magnitude", frame_length=12, frame_step=5, fft_length=16,
  //   window="hamming", periodic=True, scaling="spectrum", padding="same", name="st"),
  //   built on (None, 60, 2): serialize_keras_object.
  const std::string keras = R"({"module": "keras.layers", "class_name": "STFTSpectrogram",
"config": {"name": "st", "trainable": true, "dtype": {"module": "keras", "class_name":
"DTypePolicy", "config": {"name": "float32"}, "registered_name": null}, "mode": "magnitude",
"frame_length": 12, "frame_step": 5, "fft_length": 16, "window": "hamming", "periodic": true,
"scaling": "spectrum", "padding": "same", "data_format": "channels_last", "expand_dims": false},
"registered_name": null, "build_config": {"input_shape": [null, 60, 2]}})";
  L::STFTSpectrogram st({.mode = "magnitude",
                         .frame_length = 12,
                         .frame_step = 5,
                         .fft_length = 16,
                         .window = "hamming",
                         .periodic = true,
                         .scaling = "spectrum",
                         .padding = "same",
                         .name = "st"});
  st.build({tf::None, 60, 2});
  CHECK(K::saving::serialize(st) == Config::parse(keras));
  // Keras' real_kernel and imag_kernel, trainable as in Keras.
  CHECK(st.trainable_variables().size() == 2);
  CHECK(st.get_weights()[0].shape() == tf::TensorShape{12, 1, 9});
  K::Layer back = K::saving::deserialize(Config::parse(keras));
  check_close(back(two_channels()), st(two_channels()), 0, 0);
  // Keras' defaults: frame_step and fft_length null.
  const Config d = K::saving::serialize(L::STFTSpectrogram({.name = "d"}))["config"];
  CHECK(d["frame_step"].is_null());
  CHECK(d["fft_length"].is_null());
  CHECK(d["scaling"] == "density");

  auto in = K::Input({60, 2}, std::nullopt, "audio");
  auto h = L::STFTSpectrogram({.frame_length = 16, .frame_step = 4, .name = "spec"})(in);
  CHECK(h.shape() == tf::TensorShape{tf::None, 12, 18});
  auto o = L::Dense(2, {.name = "head"})(L::Flatten()(h));
  K::Model model(std::vector<K::KerasTensor>{in}, std::vector<K::KerasTensor>{o}, "spec_model");
  tf::testing::TempDir dir;
  model.save(dir / "spec.tfmodel");
  K::Model loaded = K::models::load_model(dir / "spec.tfmodel");
  check_close(loaded(two_channels()), model(two_channels()), 0, 0);

  require_error([] { L::STFTSpectrogram({.mode = "power"}); }, {"mode", "power"});
  require_error([] { L::STFTSpectrogram({.frame_length = 8, .frame_step = 9}); },
                {"frame_step", "9"});
  require_error([] { L::STFTSpectrogram({.frame_length = 8, .fft_length = 4}); },
                {"fft_length", "4"});
  require_error([] { L::STFTSpectrogram({.window = "kaiser"}); }, {"kaiser"});
  require_error(
      [] {
        L::STFTSpectrogram({.frame_length = 4})(tf::zeros({2, 10}));
      },
      {"STFTSpectrogram", "ndim=3"});
  // A signal shorter than one frame (Keras: "Computed output size would be zero or negative").
  require_error(
      [] {
        L::STFTSpectrogram({.frame_length = 8, .frame_step = 4, .name = "short"})(
            tf::zeros({1, 5, 1}));
      },
      {"layer \"short\" (STFTSpectrogram): signals of 5 samples (input shape (1, 5, 1)) are "
       "shorter than frame_length 8 with padding \"valid\""});
  CHECK(L::STFTSpectrogram({.frame_length = 8, .frame_step = 4, .padding = "same"})(
            tf::zeros({1, 5, 1}))
            .shape() == tf::TensorShape{1, 2, 5});
  Config bad = Config::parse(keras);
  bad["config"]["window"] = Config::array({1.0, 2.0});
  require_error([&] { K::saving::deserialize(bad); },
                {"STFTSpectrogram config key \"window\"", "no window arrays"});
}
