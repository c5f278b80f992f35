// Audio classification in the spirit of TF2's "Simple audio recognition" tutorial, on synthetic
// clips: tf::signal's STFT of one clip (its strongest frequency and the inverse STFT's error),
// then a Keras model whose first layer is MelSpectrogram, trained with fit to tell four kinds of
// one-second sounds apart (a low tone, a high tone, a rising and a falling chirp, each with a
// random pitch, phase, loudness and noise).
//   build/samples/audio_classification [epochs [min_accuracy]]
// Exits 1 unless the held-out accuracy reaches min_accuracy.
#include <tapeflow/tapeflow.h>

#include <cmath>
#include <cstdio>
#include <numbers>
#include <random>
#include <vector>

#include "../common/args.h"

namespace tf = tapeflow;
namespace K = tf::keras;
namespace L = tf::keras::layers;
namespace sig = tf::signal;

namespace {

constexpr int64_t kRate = 8000;     // samples per second
constexpr int64_t kSamples = 8000;  // one second
constexpr int kClasses = 4;
const char* const kNames[kClasses] = {"low tone", "high tone", "rising chirp", "falling chirp"};

// One clip of class `c`: a sine whose frequency is constant or sweeps linearly, plus noise.
std::vector<float> clip(int c, std::mt19937& rng) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::normal_distribution<double> noise(0.0, 0.3);
  double f0 = 0, f1 = 0;
  switch (c) {
    case 0: f0 = f1 = 200 + 300 * u(rng); break;     // 200-500 Hz
    case 1: f0 = f1 = 1500 + 1000 * u(rng); break;   // 1.5-2.5 kHz
    case 2: f0 = 300 + 200 * u(rng); f1 = f0 + 1500; break;
    default: f0 = 1800 + 200 * u(rng); f1 = f0 - 1500; break;
  }
  const double phase = 2 * std::numbers::pi * u(rng), gain = 0.5 + u(rng);
  std::vector<float> x(static_cast<size_t>(kSamples));
  for (int64_t i = 0; i < kSamples; ++i) {
    const double t = static_cast<double>(i) / kRate;
    // The phase of a linear sweep: 2 pi (f0 t + (f1 - f0) t^2 / 2).
    const double p = 2 * std::numbers::pi * (f0 * t + (f1 - f0) * t * t / 2) + phase;
    x[static_cast<size_t>(i)] = static_cast<float>(gain * std::sin(p) + noise(rng));
  }
  return x;
}

void make_set(int64_t n, std::mt19937& rng, tf::Tensor& x, tf::Tensor& y) {
  std::vector<float> xs;
  std::vector<int32_t> ys;
  for (int64_t i = 0; i < n; ++i) {
    const int c = static_cast<int>(i % kClasses);
    const std::vector<float> one = clip(c, rng);
    xs.insert(xs.end(), one.begin(), one.end());
    ys.push_back(c);
  }
  x = tf::constant(xs, {n, kSamples});
  y = tf::constant(ys, {n});
}

}  // namespace

int main(int argc, char** argv) {
  samples::Args args(argc, argv,
                     "Audio classification: tf::signal's STFT and a Keras model on MelSpectrogram.");
  const int epochs = args.epochs(4);
  const double min_accuracy = args.min_accuracy(0.9);
  args.done();
  tf::random::set_seed(7);
  std::mt19937 rng(7);

  // tf.signal on one clip: a 440 Hz tone's strongest STFT bin, and the inverse STFT.
  std::vector<float> tone(static_cast<size_t>(kSamples));
  for (int64_t i = 0; i < kSamples; ++i)
    tone[static_cast<size_t>(i)] =
        static_cast<float>(std::sin(2 * std::numbers::pi * 440.0 * static_cast<double>(i) / kRate));
  const tf::Tensor audio = tf::constant(tone, {kSamples});
  const sig::ComplexTensor stft = sig::stft(audio, 256, 64, 256);  // [frames, 129]
  const tf::Tensor spectrum = tf::reduce_mean(sig::abs(stft), 0);   // mean magnitude per bin
  const int64_t peak = tf::argmax(spectrum, 0).item<int64_t>();
  std::printf("stft of a 440 Hz tone: %lld frames x %lld bins, strongest bin %lld = %.1f Hz\n",
              static_cast<long long>(stft.real.shape()[0]),
              static_cast<long long>(stft.real.shape()[1]), static_cast<long long>(peak),
              static_cast<double>(peak) * kRate / 256.0);
  const tf::Tensor back =
      sig::inverse_stft(stft, 256, 64, 256, sig::inverse_stft_window_fn(64));
  const tf::Tensor inner = tf::slice(back, {256}, {kSamples - 512});
  const double err =
      tf::reduce_max(tf::abs(inner - tf::slice(audio, {256}, {kSamples - 512}))).item<float>();
  std::printf("inverse_stft reconstructs it to %.2g (away from the edges)\n", err);

  // The model: log-mel spectrogram (batch, 32 bands, 63 frames), a small CNN, 4 classes.
  tf::Tensor x_train, y_train, x_test, y_test;
  make_set(480, rng, x_train, y_train);
  make_set(160, rng, x_test, y_test);
  const K::KerasTensor in = K::Input({kSamples}, std::nullopt, "audio");
  K::KerasTensor h = L::MelSpectrogram({.fft_length = 256,
                                        .sequence_stride = 128,
                                        .sampling_rate = static_cast<double>(kRate),
                                        .num_mel_bins = 32,
                                        .name = "log_mel"})(in);
  h = L::Reshape({32, 63, 1})(h);
  h = L::Rescaling(1.0 / 80.0)(h);  // decibels to about [-1, 1]
  h = L::Conv2D(8, 3, {.activation = "relu"})(h);
  h = L::MaxPooling2D()(h);
  h = L::Flatten()(h);
  const K::KerasTensor out = L::Dense(kClasses, {.name = "logits"})(h);
  K::Model model({in}, {out}, "audio_classifier");
  model.summary();
  model.compile(K::optimizers::Adam(1e-3), K::losses::SparseCategoricalCrossentropy(true),
                {"accuracy"});
  model.fit(x_train, y_train, {.epochs = epochs, .batch_size = 32, .verbose = 2});
  const std::vector<double> scores = model.evaluate(x_test, y_test, {.verbose = 0});  // loss, acc
  const double accuracy = scores.at(1);
  std::printf("held-out accuracy: %.3f (loss %.3f)\n", accuracy, scores.at(0));

  // A few predictions.
  const tf::Tensor pred = tf::argmax(model.predict(tf::slice(x_test, {0, 0}, {4, kSamples})), 1);
  const auto p = pred.numpy<int64_t>();
  for (int i = 0; i < 4; ++i) std::printf("clip %d: %s -> %s\n", i, kNames[i], kNames[p[i]]);
  if (accuracy < min_accuracy) {
    std::fprintf(stderr, "accuracy %.3f is below %.3f\n", accuracy, min_accuracy);
    return 1;
  }
  return 0;
}
