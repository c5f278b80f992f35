// Keras 3's audio preprocessing layer MelSpectrogram, on tf::signal (ops/signal.h). See
// docs/keras.md ("MelSpectrogram").
#pragma once

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

}  // namespace tapeflow::keras::layers

namespace tapeflow::keras::detail::layer_options {
// What MelSpectrogram was made with (keras/serialization_audio.cpp writes it); nullopt for
// another class.
std::optional<layers::MelSpectrogramOptions> mel_spectrogram(const LayerImpl& layer);
}  // namespace tapeflow::keras::detail::layer_options
