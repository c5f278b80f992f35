// Keras 3's MelSpectrogram (keras/layers_audio.h), written with tf::signal: a reflection pad
// (one gather), stft with the centred window, |.|^mag_exp, the mel matrix (a tensordot) and
// Keras' decibel scale. Keras 3.15's MelSpectrogram.call and backend stft are the reference;
// the results agree with Keras' to float32 rounding (tests/keras/test_layers_audio.cpp).
#include "keras/layers_audio.h"

#include <cmath>
#include <utility>
#include <vector>

#include "core/check.h"
#include "keras/layer_handle.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/linalg_more.h"
#include "ops/movement.h"
#include "ops/reduce.h"
#include "ops/signal.h"
#include "ops/unary.h"

namespace tapeflow::keras {
namespace {

using detail::LayerImpl;

class MelSpectrogramImpl final : public LayerImpl {
 public:
  explicit MelSpectrogramImpl(layers::MelSpectrogramOptions o)
      : LayerImpl("MelSpectrogram", "mel_spectrogram", o.name), options_(std::move(o)) {
    const auto& p = options_;
    const std::string n = name();
    const char* who = n.c_str();
    TF_CHECK_ARG(p.fft_length >= 1 && p.sequence_stride >= 1, who,
                 "layer \"{}\" (MelSpectrogram) needs a positive fft_length and sequence_stride, "
                 "got {} and {}",
                 n, p.fft_length, p.sequence_stride);
    TF_CHECK_ARG(p.sequence_length >= 0 && p.sequence_length <= p.fft_length, who,
                 "`fft_length` must be greater than or equal to `sequence_length`. Received: "
                 "`sequence_length`={}, `fft_length`={} (layer \"{}\")",
                 p.sequence_length, p.fft_length, n);
    TF_CHECK_ARG(p.window.empty() || p.window == "hann" || p.window == "hamming", who,
                 "If a string is passed to `window`, it must be one of `\"hann\"`, "
                 "`\"hamming\"` (or \"\" for no window). Received: window={} (layer \"{}\")",
                 p.window, n);
    TF_CHECK_ARG(p.num_mel_bins >= 1 && p.sampling_rate > 0, who,
                 "layer \"{}\" (MelSpectrogram) needs a positive num_mel_bins and sampling_rate, "
                 "got {} and {}",
                 n, p.num_mel_bins, p.sampling_rate);
    const double max_freq = this->max_freq();
    TF_CHECK_ARG(p.min_freq >= 0 && p.min_freq < max_freq && max_freq <= p.sampling_rate / 2, who,
                 "layer \"{}\" (MelSpectrogram) needs 0 <= min_freq < max_freq <= sampling_rate "
                 "/ 2, got min_freq {}, max_freq {}, sampling_rate {}",
                 n, p.min_freq, max_freq, p.sampling_rate);
    TF_CHECK_ARG(p.min_power > 0, who,
                 "layer \"{}\" (MelSpectrogram) needs a positive min_power, got {}", n,
                 p.min_power);
  }

  const layers::MelSpectrogramOptions& options() const { return options_; }

  TensorShape compute_output_shape(const TensorShape& s) const override {
    // Keras 3.15 gives (samples + stride + 1) // stride frames, one too many when samples + 1
    // is a multiple of the stride; this is the number the layer returns.
    auto frames = [&](int64_t samples) {
      return samples == None ? None : 1 + samples / options_.sequence_stride;
    };
    if (s.rank() == 1) return TensorShape{options_.num_mel_bins, frames(s[0])};
    return TensorShape{s[0], options_.num_mel_bins, frames(s[1])};
  }

 protected:
  void check_input(const TensorShape& s) const override {
    LayerImpl::check_input(s);
    if (s.rank() != 1 && s.rank() != 2)
      incompatible(s, "expected (batch, samples) or (samples,) audio");
  }

  Tensor call(const Tensor& x, bool) override {
    const auto& p = options_;
    const std::string n = name();
    TF_CHECK_ARG(is_floating(x.dtype()), n.c_str(),
                 "layer \"{}\" (MelSpectrogram) needs floating audio, got {}", n,
                 dtype_name(x.dtype()));
    const DType out_dtype = x.dtype();
    // Keras runs the transform in float32 unless the compute dtype is float64.
    const DType dt = out_dtype == float64 ? float64 : float32;
    Tensor a = out_dtype == dt ? x : cast(x, dt);
    const bool unbatched = a.shape().rank() == 1;
    if (unbatched) a = expand_dims(a, 0);
    const int64_t samples = a.shape()[1], half = p.fft_length / 2;
    TF_CHECK_ARG(samples != None, n.c_str(),
                 "layer \"{}\" (MelSpectrogram) needs a known number of samples, got shape {}", n,
                 x.shape().to_string());
    TF_CHECK_ARG(samples > half, n.c_str(),
                 "layer \"{}\" (MelSpectrogram) pads each signal by reflection with fft_length / "
                 "2 = {} samples on each side, which needs more than {} samples, got shape {}",
                 n, half, half, x.shape().to_string());
    // Reflection padding (no edge repeated): index i - half, mirrored at 0 and samples - 1.
    std::vector<int64_t> idx(static_cast<size_t>(samples + 2 * half));
    for (int64_t q = 0; q < samples + 2 * half; ++q) {
      int64_t i = q - half;
      if (i < 0) i = -i;
      if (i >= samples) i = 2 * (samples - 1) - i;
      idx[static_cast<size_t>(q)] = i;
    }
    a = gather(a, constant(idx, TensorShape{samples + 2 * half}), 1);
    signal::WindowFn window;
    if (!p.window.empty()) {
      const int64_t len = p.sequence_length == 0 ? p.fft_length : p.sequence_length;
      const int64_t left = (p.fft_length - len) / 2, right = p.fft_length - len - left;
      const Tensor base = p.window == "hann" ? signal::hann_window(len, true, dt)
                                             : signal::hamming_window(len, true, dt);
      const Tensor padded = pad(base, {{left, right}});
      window = [padded](int64_t, DType) { return padded; };
    }
    const signal::ComplexTensor z =
        signal::stft(a, p.fft_length, p.sequence_stride, p.fft_length, window);
    // |z|^2 straight from the parts (exact, and its gradient is finite at 0).
    const Tensor power = add(square(z.real), square(z.imag));
    Tensor spec = p.mag_exp == 2.0   ? power
                  : p.mag_exp == 1.0 ? signal::abs(z)
                                     : tapeflow::pow(signal::abs(z), Tensor(p.mag_exp));
    const Tensor mel = signal::linear_to_mel_weight_matrix(
        p.num_mel_bins, p.fft_length / 2 + 1, p.sampling_rate, p.min_freq, max_freq(), dt);
    spec = linalg::tensordot(spec, mel, 1);  // (batch, frames, mel)
    if (p.power_to_db) {
      const double ref = 10.0 * std::log10(std::max(std::abs(p.ref_power), p.min_power));
      Tensor db = multiply(log(maximum(spec, Tensor(p.min_power))), Tensor(10.0 / std::log(10.0)));
      db = subtract(db, Tensor(ref));
      spec = maximum(db, subtract(reduce_max(db), Tensor(p.top_db)));
    }
    spec = transpose(spec, {0, 2, 1});  // (batch, mel, frames)
    if (unbatched) spec = squeeze(spec, {0});
    return spec.dtype() == out_dtype ? spec : cast(spec, out_dtype);
  }

 private:
  double max_freq() const {
    return options_.max_freq ? *options_.max_freq : std::floor(options_.sampling_rate / 2.0);
  }

  layers::MelSpectrogramOptions options_;
};

}  // namespace

namespace layers {

MelSpectrogram::MelSpectrogram(MelSpectrogramOptions options)
    : Layer(std::make_shared<MelSpectrogramImpl>(std::move(options))) {}

const MelSpectrogramOptions& MelSpectrogram::options() const {
  return impl_as<MelSpectrogramImpl>(*this, "MelSpectrogram").options();
}

}  // namespace layers

namespace detail::layer_options {
std::optional<layers::MelSpectrogramOptions> mel_spectrogram(const LayerImpl& layer) {
  const auto* p = dynamic_cast<const MelSpectrogramImpl*>(&layer);
  if (p == nullptr) return std::nullopt;
  return p->options();
}
}  // namespace detail::layer_options

}  // namespace tapeflow::keras
