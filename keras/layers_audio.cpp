// Keras 3's MelSpectrogram and STFTSpectrogram (keras/layers_audio.h). MelSpectrogram is written
// with tf::signal: a reflection pad (one gather), stft with the centred window, |.|^mag_exp, the
// mel matrix (a tensordot) and Keras' decibel scale. STFTSpectrogram is Keras' strided
// convolution with windowed DFT kernels (its weights), the channels folded into the batch.
// Keras 3.15's layers and backend stft are the reference; the results agree with Keras' to
// float32 rounding (tests/keras/test_layers_audio.cpp).
#include "keras/layers_audio.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <utility>
#include <vector>

#include "core/check.h"
#include "keras/initializers.h"
#include "keras/layer_handle.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/linalg_more.h"
#include "ops/movement.h"
#include "ops/nn_more.h"
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
    if (s.rank() != 1 && s.rank() != 2)
      incompatible(s, "expected (batch, samples) or (samples,) audio");
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

// SciPy's get_window(name, n, fftbins=periodic) for the names Keras' STFTSpectrogram takes: the
// symmetric window of n points (n + 1 without its last point when periodic).
std::vector<double> scipy_window(const std::string& name, int64_t n, bool periodic) {
  if (n == 1) return {1.0};
  const int64_t m = periodic ? n + 1 : n;
  std::vector<double> w(static_cast<size_t>(m), 1.0);
  for (int64_t k = 0; k < m; ++k) {
    const double x = 2.0 * std::numbers::pi * static_cast<double>(k) / static_cast<double>(m - 1);
    double v = 1.0;  // boxcar
    if (name == "hann") v = 0.5 - 0.5 * std::cos(x);
    if (name == "hamming") v = 0.54 - 0.46 * std::cos(x);
    if (name == "blackman") v = 0.42 - 0.5 * std::cos(x) + 0.08 * std::cos(2.0 * x);
    if (name == "bartlett")
      v = 1.0 - std::abs(2.0 * static_cast<double>(k) / static_cast<double>(m - 1) - 1.0);
    w[static_cast<size_t>(k)] = v;
  }
  w.resize(static_cast<size_t>(n));
  return w;
}

class STFTSpectrogramImpl final : public LayerImpl {
 public:
  explicit STFTSpectrogramImpl(layers::STFTSpectrogramOptions o)
      : LayerImpl("STFTSpectrogram", "stft_spectrogram", o.name), o_(std::move(o)) {
    const std::string n = name();
    const char* who = n.c_str();
    static const char* const kModes[] = {"log",  "magnitude", "psd", "real",
                                         "imag", "angle",     "stft"};
    TF_CHECK_ARG(std::find(std::begin(kModes), std::end(kModes), o_.mode) != std::end(kModes), who,
                 "Output mode is invalid, it must be one of log, magnitude, psd, real, imag, "
                 "angle, stft. Received: mode={} (layer \"{}\")",
                 o_.mode, n);
    TF_CHECK_ARG(o_.frame_length >= 1, who,
                 "layer \"{}\" (STFTSpectrogram) needs a positive frame_length, got {}", n,
                 o_.frame_length);
    TF_CHECK_ARG(o_.frame_step == 0 || (o_.frame_step >= 1 && o_.frame_step <= o_.frame_length),
                 who,
                 "`frame_step` should be a positive integer not greater than `frame_length`. "
                 "Received frame_step={}, frame_length={} (layer \"{}\")",
                 o_.frame_step, o_.frame_length, n);
    TF_CHECK_ARG(o_.fft_length == 0 || o_.fft_length >= o_.frame_length, who,
                 "`fft_length` should be not less than `frame_length`. Received fft_length={}, "
                 "frame_length={} (layer \"{}\")",
                 o_.fft_length, o_.frame_length, n);
    TF_CHECK_ARG(o_.scaling.empty() || o_.scaling == "density" || o_.scaling == "spectrum", who,
                 "Scaling is invalid, it must be \"\" (None), 'density' or 'spectrum'. Received "
                 "scaling={} (layer \"{}\")",
                 o_.scaling, n);
    TF_CHECK_ARG(o_.padding == "valid" || o_.padding == "same", who,
                 "Padding is invalid, it should be 'valid', 'same'. Received: padding={} (layer "
                 "\"{}\")",
                 o_.padding, n);
    static const char* const kWindows[] = {"", "hann", "hamming", "blackman", "bartlett", "boxcar"};
    TF_CHECK_ARG(
        std::find(std::begin(kWindows), std::end(kWindows), o_.window) != std::end(kWindows), who,
        "layer \"{}\" (STFTSpectrogram): window \"{}\" is not one of tapeflow's SciPy windows "
        "(hann, hamming, blackman, bartlett, boxcar, or \"\" for none)",
        n, o_.window);
    TF_CHECK_ARG(o_.data_format == "channels_last" || o_.data_format == "channels_first", who,
                 "layer \"{}\" (STFTSpectrogram): data_format must be \"channels_last\" or "
                 "\"channels_first\", got \"{}\"",
                 n, o_.data_format);
    step_ = o_.frame_step == 0 ? o_.frame_length / 2 : o_.frame_step;
    TF_CHECK_ARG(step_ >= 1, who,
                 "layer \"{}\" (STFTSpectrogram): frame_length {} gives a frame_step of 0; give "
                 "frame_step",
                 n, o_.frame_length);
    fft_ = o_.fft_length;
    if (fft_ == 0)
      for (fft_ = 1; fft_ < o_.frame_length;) fft_ *= 2;
  }
  const layers::STFTSpectrogramOptions& options() const { return o_; }

  TensorShape compute_output_shape(const TensorShape& s) const override {
    if (s.rank() != 3) incompatible(s, "expected ndim=3");
    const bool last = o_.data_format == "channels_last";
    const int64_t channels = last ? s[2] : s[1], time = last ? s[1] : s[2];
    int64_t bins = fft_ / 2 + 1;
    if (o_.mode == "stft") bins *= 2;
    const int64_t frames = frames_of(time);
    if (o_.expand_dims)
      return last ? TensorShape{s[0], frames, bins, channels}
                  : TensorShape{s[0], channels, frames, bins};
    const int64_t features = channels == None ? None : channels * bins;
    return last ? TensorShape{s[0], frames, features} : TensorShape{s[0], features, frames};
  }

 protected:
  void check_input(const TensorShape& s) const override {
    LayerImpl::check_input(s);
    if (s.rank() != 3) incompatible(s, "expected ndim=3");
  }

  void build(const TensorShape&) override {
    const int64_t bins = fft_ / 2 + 1;
    const TensorShape shape{o_.frame_length, 1, bins};
    if (o_.mode != "imag") real_ = add_weight("real_kernel", shape, kernel_init(true), true, {});
    if (o_.mode != "real") imag_ = add_weight("imag_kernel", shape, kernel_init(false), true, {});
  }

  Tensor call(const Tensor& x, bool) override {
    const std::string n = name();
    TF_CHECK_ARG(is_floating(x.dtype()), n.c_str(),
                 "Invalid input type. Expected `float16`, `float32` or `float64`. Received: "
                 "input type={} (layer \"{}\")",
                 dtype_name(x.dtype()), n);
    const bool last = o_.data_format == "channels_last";
    const int64_t channels = last ? x.shape()[2] : x.shape()[1];
    const int64_t time = last ? x.shape()[1] : x.shape()[2];
    TF_CHECK_ARG(channels != None && time != None, n.c_str(),
                 "layer \"{}\" (STFTSpectrogram) needs known time and channel dimensions, got "
                 "shape {}",
                 n, x.shape().to_string());
    // Keras: "Computed output size would be zero or negative".
    TF_CHECK_ARG(o_.padding == "same" || time >= o_.frame_length, n.c_str(),
                 "layer \"{}\" (STFTSpectrogram): signals of {} samples (input shape {}) are "
                 "shorter than frame_length {} with padding \"valid\", so no frame fits; pad "
                 "them or use padding \"same\"",
                 n, time, x.shape().to_string(), o_.frame_length);
    // (B, T, C) or (B, C, T) -> (B * C, T, 1): every channel a signal of its own.
    const Tensor signals = reshape(last ? transpose(x, {0, 2, 1}) : x, {-1, time, 1});
    // (B * C, frames, bins) -> (B, C, bins, frames), Keras' layout before _adjust_shapes.
    auto apply = [&](const Variable& kernel) {
      const Tensor k =
          kernel.value().dtype() == x.dtype() ? kernel.value() : cast(kernel.value(), x.dtype());
      const Tensor y =
          nn::conv1d(signals, k, static_cast<int>(step_), o_.padding == "same" ? "SAME" : "VALID");
      const int64_t frames = y.shape()[1], bins = y.shape()[2];
      return transpose(reshape(y, {-1, channels, frames, bins}), {0, 1, 3, 2});
    };
    Tensor out;
    if (o_.mode == "real") {
      out = apply(real_);
    } else if (o_.mode == "imag") {
      out = apply(imag_);
    } else {
      const Tensor re = apply(real_), im = apply(imag_);
      if (o_.mode == "angle") {
        out = atan2(im, re);
      } else if (o_.mode == "stft") {
        out = concat({re, im}, 2);
      } else {
        const Tensor power = add(square(re), square(im));
        if (o_.mode == "psd") {
          // The bins between 0 and Nyquist counted twice (Keras pads power[:, :, 1:-1]).
          const int64_t bins = power.shape()[2];
          const Tensor inner =
              bins > 2 ? slice(power, {0, 0, 1, 0}, {-1, -1, bins - 2, -1}) : Tensor();
          out = inner.defined() ? add(power, pad(inner, {{0, 0}, {0, 0}, {1, 1}, {0, 0}})) : power;
        } else {
          const double eps = 1e-7;  // Keras' backend.epsilon()
          const Tensor mag = sqrt(maximum(power, Tensor(eps)));
          out = o_.mode == "magnitude" ? mag : log(maximum(mag, Tensor(eps)));
        }
      }
    }
    // Keras' _adjust_shapes: (B, C, F, T) to the output layout.
    const int64_t f = out.shape()[2], t = out.shape()[3];
    if (last)
      return o_.expand_dims ? transpose(out, {0, 3, 2, 1})
                            : transpose(reshape(out, {-1, channels * f, t}), {0, 2, 1});
    return o_.expand_dims ? transpose(out, {0, 1, 3, 2}) : reshape(out, {-1, channels * f, t});
  }

 private:
  int64_t frames_of(int64_t time) const {
    if (time == None) return None;
    if (o_.padding == "same") return (time + step_ - 1) / step_;
    return time >= o_.frame_length ? (time - o_.frame_length) / step_ + 1 : 0;
  }

  // Keras' initializers.STFT: cos (real) or sin (imag) of -2 pi t k / ((bins - 1) 2), times the
  // window divided by its scaling.
  Initializer kernel_init(bool real) const {
    const layers::STFTSpectrogramOptions o = o_;
    return Initializer("STFT", [o, real](const TensorShape& shape, DType dtype) {
      const int64_t frame = shape[0], bins = shape[2];
      const double full = static_cast<double>((bins - 1) * 2);
      std::vector<double> win(static_cast<size_t>(frame), 1.0);
      double scaling = 1.0;
      if (!o.window.empty()) {
        win = scipy_window(o.window, frame, o.periodic);
        if (o.scaling == "density") {
          double s = 0;
          for (double v : win) s += v * v;
          scaling = std::sqrt(s);
        } else if (o.scaling == "spectrum") {
          double s = 0;
          for (double v : win) s += std::abs(v);
          scaling = s;
        }
      }
      std::vector<double> k(static_cast<size_t>(frame * bins));
      for (int64_t t = 0; t < frame; ++t)
        for (int64_t f = 0; f < bins; ++f) {
          const double a =
              -2.0 * std::numbers::pi * static_cast<double>(t) * static_cast<double>(f) / full;
          k[static_cast<size_t>(t * bins + f)] =
              (real ? std::cos(a) : std::sin(a)) * win[static_cast<size_t>(t)] / scaling;
        }
      return ::tapeflow::detail::from_doubles(k, shape, dtype);
    });
  }

  layers::STFTSpectrogramOptions o_;
  int64_t step_ = 1, fft_ = 1;
  Variable real_, imag_;
};

}  // namespace

namespace layers {

STFTSpectrogram::STFTSpectrogram(STFTSpectrogramOptions options)
    : Layer(std::make_shared<STFTSpectrogramImpl>(std::move(options))) {}

const STFTSpectrogramOptions& STFTSpectrogram::options() const {
  return impl_as<STFTSpectrogramImpl>(*this, "STFTSpectrogram").options();
}

MelSpectrogram::MelSpectrogram(MelSpectrogramOptions options)
    : Layer(std::make_shared<MelSpectrogramImpl>(std::move(options))) {}

const MelSpectrogramOptions& MelSpectrogram::options() const {
  return impl_as<MelSpectrogramImpl>(*this, "MelSpectrogram").options();
}

}  // namespace layers

namespace detail::layer_options {
std::optional<layers::STFTSpectrogramOptions> stft_spectrogram(const LayerImpl& layer) {
  const auto* p = dynamic_cast<const STFTSpectrogramImpl*>(&layer);
  if (p == nullptr) return std::nullopt;
  return p->options();
}
std::optional<layers::MelSpectrogramOptions> mel_spectrogram(const LayerImpl& layer) {
  const auto* p = dynamic_cast<const MelSpectrogramImpl*>(&layer);
  if (p == nullptr) return std::nullopt;
  return p->options();
}
}  // namespace detail::layer_options

}  // namespace tapeflow::keras
