// Keras configs of MelSpectrogram and STFTSpectrogram (keras/layers_audio.h): Keras 3.15's
// get_config keys minus the base ones, in Keras' order (MelSpectrogram's sequence_length and
// max_freq resolved, as Keras writes them: fft_length and sampling_rate / 2 rounded down when
// not given); the readers are strict.
#include <cmath>
#include <string>

#include "keras/layers_audio.h"
#include "keras/serialization_internal.h"

namespace tapeflow::keras::saving::internal {
namespace {

namespace lo = detail::layer_options;

// An integral value as a JSON integer (Keras' sampling_rate=16000, max_freq=int(...)), else a
// float.
Config number_json(double v) {
  if (std::isfinite(v) && v == std::floor(v) && std::abs(v) < 9.0e15)
    return Config(static_cast<int64_t>(v));
  return Config(v);
}

// "" as null, as Keras writes None.
Config optional_string(const std::string& v) {
  return v.empty() ? Config(nullptr) : Config(v);
}
// A string or null (read as ""); `fallback` when the key is missing.
std::string string_or_null(Reader& r, const char* key, const std::string& fallback) {
  const Config* v = r.find(key);
  if (v == nullptr) return fallback;
  if (v->is_null()) return {};
  if (!v->is_string()) r.fail(key, "must be a string or null, got " + r.got(*v));
  return v->get<std::string>();
}
// A window name or null (no window); Keras' window arrays are not read.
std::string window_of(Reader& r, const std::string& fallback) {
  const Config* v = r.find("window");
  if (v != nullptr && !v->is_null() && !v->is_string())
    r.fail("window",
           "must be a window name or null (tapeflow reads no window arrays), got " + r.got(*v));
  return string_or_null(r, "window", fallback);
}

Layer mel_spectrogram_from(const Config& config) {
  Reader r("MelSpectrogram", config);
  Base b = read_base(r);
  layers::MelSpectrogramOptions o;
  o.fft_length = r.integer("fft_length", o.fft_length);
  o.sequence_stride = r.integer("sequence_stride", o.sequence_stride);
  o.sequence_length = r.optional_integer("sequence_length").value_or(0);
  o.window = window_of(r, o.window);
  o.sampling_rate = r.number("sampling_rate", o.sampling_rate);
  o.num_mel_bins = r.integer("num_mel_bins", o.num_mel_bins);
  o.min_freq = r.number("min_freq", o.min_freq);
  o.max_freq = r.optional_number("max_freq");
  o.power_to_db = r.boolean("power_to_db", o.power_to_db);
  o.top_db = r.number("top_db", o.top_db);
  o.mag_exp = r.number("mag_exp", o.mag_exp);
  o.min_power = r.number("min_power", o.min_power);
  o.ref_power = r.number("ref_power", o.ref_power);
  o.name = b.name;
  r.finish();
  Layer l = layers::MelSpectrogram(o);
  apply_base(l, b);
  return l;
}

Config mel_spectrogram_get(const Layer& layer) {
  const layers::MelSpectrogramOptions o = need(lo::mel_spectrogram(layer.impl()), layer);
  const double max_freq = o.max_freq ? *o.max_freq : std::floor(o.sampling_rate / 2.0);
  return Config{{"fft_length", o.fft_length},
                {"sequence_stride", o.sequence_stride},
                {"sequence_length", o.sequence_length == 0 ? o.fft_length : o.sequence_length},
                {"window", optional_string(o.window)},
                {"sampling_rate", number_json(o.sampling_rate)},
                {"num_mel_bins", o.num_mel_bins},
                {"min_freq", o.min_freq},
                {"max_freq", number_json(max_freq)},
                {"power_to_db", o.power_to_db},
                {"top_db", o.top_db},
                {"mag_exp", o.mag_exp},
                {"min_power", o.min_power},
                {"ref_power", o.ref_power}};
}

Config optional_positive(int64_t v) {
  return v == 0 ? Config(nullptr) : Config(v);
}

Layer stft_spectrogram_from(const Config& config) {
  Reader r("STFTSpectrogram", config);
  Base b = read_base(r);
  layers::STFTSpectrogramOptions o;
  o.mode = r.string("mode", o.mode);
  o.frame_length = r.integer("frame_length", o.frame_length);
  o.frame_step = r.optional_integer("frame_step").value_or(0);
  o.fft_length = r.optional_integer("fft_length").value_or(0);
  o.window = window_of(r, o.window);
  o.periodic = r.boolean("periodic", o.periodic);
  o.scaling = string_or_null(r, "scaling", o.scaling);
  o.padding = r.string("padding", o.padding);
  o.data_format = string_or_null(r, "data_format", "channels_last");
  if (o.data_format.empty()) o.data_format = "channels_last";
  o.expand_dims = r.boolean("expand_dims", o.expand_dims);
  o.name = b.name;
  r.finish();
  Layer l = layers::STFTSpectrogram(o);
  apply_base(l, b);
  return l;
}

Config stft_spectrogram_get(const Layer& layer) {
  const layers::STFTSpectrogramOptions o = need(lo::stft_spectrogram(layer.impl()), layer);
  return Config{{"mode", o.mode},
                {"frame_length", o.frame_length},
                {"frame_step", optional_positive(o.frame_step)},
                {"fft_length", optional_positive(o.fft_length)},
                {"window", optional_string(o.window)},
                {"periodic", o.periodic},
                {"scaling", optional_string(o.scaling)},
                {"padding", o.padding},
                {"data_format", o.data_format},
                {"expand_dims", o.expand_dims}};
}

}  // namespace

void add_audio_layers(Registry& m) {
  add_builtin(m, "STFTSpectrogram", stft_spectrogram_get, stft_spectrogram_from);
  add_builtin(m, "MelSpectrogram", mel_spectrogram_get, mel_spectrogram_from);
}

}  // namespace tapeflow::keras::saving::internal
