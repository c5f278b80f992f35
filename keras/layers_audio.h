// Keras 3's audio preprocessing layers MelSpectrogram (on tf::signal, ops/signal.h) and
// STFTSpectrogram. See docs/keras.md ("MelSpectrogram", "STFTSpectrogram").
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "keras/layers.h"

namespace tapeflow::keras::layers {

struct MelSpectrogramOptions {
  int64_t fft_length = 2048;
  int64_t sequence_stride = 512;  // the hop between frames
  // The window length; 0 (Keras' None) means fft_length. A window shorter than fft_length is
  // zero-padded on both sides (centred) to fft_length.
  int64_t sequence_length = 0;
  std::string window = "hann";  // "hann", "hamming" or "" (Keras' None: no window)
  double sampling_rate = 16000;
  int64_t num_mel_bins = 128;
  double min_freq = 20.0;
  // The upper edge of the highest mel band; unset (Keras' None) means sampling_rate / 2 rounded
  // down to an integer, as Keras.
  std::optional<double> max_freq = std::nullopt;
  bool power_to_db = true;
  double top_db = 80.0;
  double mag_exp = 2.0;  // 1: magnitude, 2: power
  double min_power = 1e-10;
  double ref_power = 1.0;
  std::string name = "";
};

// Mel spectrograms of raw audio, as Keras' MelSpectrogram: input (batch, samples) or
// (samples,), float; output (batch, num_mel_bins, frames) or (num_mel_bins, frames) with
// frames = 1 + samples / sequence_stride. Each signal is padded by fft_length / 2 samples on
// both sides by reflection (Keras' center=True; it needs more than fft_length / 2 samples), cut
// into windowed frames of fft_length every sequence_stride samples, transformed
// (|rfft|^mag_exp), mapped to num_mel_bins triangular HTK mel bands between min_freq and
// max_freq, and with power_to_db converted to decibels: 10 log10(max(x, min_power)) -
// 10 log10(max(|ref_power|, min_power)), floored at (the largest value of the whole batch) -
// top_db, as Keras. Computes in float32 (float64 for a float64 compute dtype) and returns the
// compute dtype. No weights; differentiable w.r.t. the audio.
class MelSpectrogram : public Layer {
 public:
  explicit MelSpectrogram(MelSpectrogramOptions options = {});
  const MelSpectrogramOptions& options() const;
};

struct STFTSpectrogramOptions {
  // "log" (log |X|), "magnitude" (|X|), "psd" (|X|^2, the bins between 0 and Nyquist doubled),
  // "real", "imag", "angle" or "stft" (real and imaginary parts concatenated along the
  // frequencies).
  std::string mode = "log";
  int64_t frame_length = 256;
  int64_t frame_step = 0;  // 0 (Keras' None): frame_length / 2
  int64_t fft_length = 0;  // 0 (Keras' None): the smallest power of two >= frame_length
  // SciPy's window names Keras takes: "hann", "hamming", "blackman", "bartlett", "boxcar"; ""
  // for none. Symmetric unless periodic (SciPy's fftbins).
  std::string window = "hann";
  bool periodic = false;
  std::string scaling = "density";  // "density", "spectrum" or "" (Keras' None)
  std::string padding = "valid";    // "valid" or "same" (of the framing convolution)
  bool expand_dims = false;         // channels as an axis of their own
  std::string data_format = "channels_last";
  std::string name = "";
};

// Keras' STFTSpectrogram: spectrograms of (batch, time, channels) signals (channels_first:
// (batch, channels, time)) by a strided convolution with the DFT's cosine and sine rows times
// the window (divided by sqrt(sum(window^2)) with "density", by sum(window) with "spectrum"),
// Keras' weights real_kernel and imag_kernel (frame_length, 1, fft_length / 2 + 1), trainable
// as in Keras. Output (batch, frames, channels * bins) (bins doubled for "stft"); with
// expand_dims (batch, frames, bins, channels) (channels_first: (batch, channels * bins, frames)
// and (batch, channels, frames, bins)). Magnitudes are floored at 1e-7 (Keras' epsilon) before
// the log.
class STFTSpectrogram : public Layer {
 public:
  explicit STFTSpectrogram(STFTSpectrogramOptions options = {});
  const STFTSpectrogramOptions& options() const;
};

}  // namespace tapeflow::keras::layers

namespace tapeflow::keras::detail::layer_options {
// What MelSpectrogram was made with (keras/serialization_audio.cpp writes it); nullopt for
// another class.
std::optional<layers::MelSpectrogramOptions> mel_spectrogram(const LayerImpl& layer);
// What STFTSpectrogram was made with (frame_step and fft_length as given: 0 for Keras' None).
std::optional<layers::STFTSpectrogramOptions> stft_spectrogram(const LayerImpl& layer);
}  // namespace tapeflow::keras::detail::layer_options
