// Keras 3's image preprocessing and augmentation layers (keras.layers.Resizing, CenterCrop,
// RandomCrop, RandomFlip, RandomRotation, RandomZoom, RandomTranslation, RandomContrast,
// RandomBrightness, RandomGrayscale, RandomSaturation, RandomHue) and Normalization, on NHWC
// images (rank 4, or a single rank-3 image) with Keras 3.15's options and semantics. Built on
// tf::image (ops/image.h). See docs/keras.md.
//
// The random layers act only when called with training = true and are the identity otherwise,
// as Keras. They draw from tapeflow's random ops (uniform) with the layer's seed as the op seed,
// so a seeded layer draws new values on every call and repeats its sequence after
// tf::random::set_seed; they cannot reproduce Keras' own random streams. Outputs are float32
// (integer images are cast first), except Resizing, which rounds integer images back to their
// dtype as Keras does. Each is a Layer handle on shared state; calls are thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "data/dataset.h"
#include "keras/layers.h"

namespace tapeflow::keras::layers {

// A Keras factor argument: a single number f (each layer turns it into its own range, usually
// (-|f|, |f|)) or a pair (lower, upper), sorted as Keras does.
struct Factor {
  double lower = 0.0, upper = 0.0;
  bool single = false;
  Factor(double f) : lower(f), upper(f), single(true) {}  // NOLINT(google-explicit-constructor)
  Factor(double a, double b) : lower(a < b ? a : b), upper(a < b ? b : a) {}
};

struct ResizingOptions {
  // "bilinear", "nearest", "bicubic", "area", "lanczos3" or "lanczos5" (tf::image::resize's)
  std::string interpolation = "bilinear";
  bool crop_to_aspect_ratio = false;       // centre crop to the target's aspect ratio first
  bool pad_to_aspect_ratio = false;        // or pad evenly with fill_value to it
  std::string fill_mode = "constant";      // the only one Keras offers
  double fill_value = 0.0;
  bool antialias = false;  // tf::image::resize's antialias (downscaling)
  std::string name = "";
};

// Resizes to (height, width) with tf::image::resize (antialias off by default, as Keras).
//   Resizing(180, 180)  Resizing(64, 64, {.crop_to_aspect_ratio = true})
class Resizing : public Layer {
 public:
  Resizing(int64_t height, int64_t width, ResizingOptions options = {});
};

// Crops the central (height, width) window; an input smaller than that in either dimension is
// cropped to the target's aspect ratio and resized instead (Keras' smart_resize).
class CenterCrop : public Layer {
 public:
  CenterCrop(int64_t height, int64_t width, std::string name = "");
};

// Training: a (height, width) window at a random offset (one for the whole batch, as Keras);
// an input not larger than the target in both dimensions is centre-cropped to the target's
// aspect ratio and resized. Inference: the identity (Keras 3.15 leaves the input as it is).
class RandomCrop : public Layer {
 public:
  RandomCrop(int64_t height, int64_t width, std::optional<int64_t> seed = std::nullopt,
             std::string name = "");
};

// Flips each image with probability 1/2: mode "horizontal", "vertical" or
// "horizontal_and_vertical" (one draw per image decides both flips, as Keras).
class RandomFlip : public Layer {
 public:
  explicit RandomFlip(std::string mode = "horizontal_and_vertical",
                      std::optional<int64_t> seed = std::nullopt, std::string name = "");
};

// Options of the layers built on tf::image::transform.
struct RandomTransformOptions {
  std::string fill_mode = "reflect";       // "reflect", "wrap", "constant" or "nearest"
  // "bilinear", "nearest", "bicubic", "area", "lanczos3" or "lanczos5" (tf::image::resize's)
  std::string interpolation = "bilinear";
  std::optional<int64_t> seed = std::nullopt;
  double fill_value = 0.0;  // for fill_mode "constant"
  std::string name = "";
};

// Rotates each image about its centre by an angle drawn uniformly from
// [lower * 360, upper * 360) degrees (factor f gives (-|f|, |f|), in [-1, 1]), counter-clockwise
// for a positive angle as Keras.
class RandomRotation : public Layer {
 public:
  explicit RandomRotation(Factor factor, RandomTransformOptions options = {});
};

// Zooms each image about its centre: the sampled window spans 1 + z of the height (z drawn from
// height_factor's range, each bound in (-1, 1]), and of the width from width_factor's range, or
// the same z when width_factor is not given. A positive z zooms out, as Keras.
class RandomZoom : public Layer {
 public:
  explicit RandomZoom(Factor height_factor, std::optional<Factor> width_factor = std::nullopt,
                      RandomTransformOptions options = {});
};

// Shifts each image by fractions of its height and width drawn from the factors' ranges (each
// in [-1, 1]); a positive fraction moves the content down / right.
class RandomTranslation : public Layer {
 public:
  RandomTranslation(Factor height_factor, Factor width_factor, RandomTransformOptions options = {});
};

// (x - mean) * c + mean per image and channel (mean over height and width), with c drawn per
// image from [1 - lower, 1 + upper), then clipped to value_range. Keras 3.15 takes a single
// factor f as (lower, upper) = (0, f), so c lies in [1, 1 + f); pass {f, f} for [1 - f, 1 + f).
class RandomContrast : public Layer {
 public:
  explicit RandomContrast(Factor factor, std::pair<double, double> value_range = {0.0, 255.0},
                          std::optional<int64_t> seed = std::nullopt, std::string name = "");
};

// Adds delta * (value_range.second - value_range.first) per image, delta drawn from the
// factor's range (f gives (-|f|, |f|), in [-1, 1]), then clips to value_range.
class RandomBrightness : public Layer {
 public:
  explicit RandomBrightness(Factor factor, std::pair<double, double> value_range = {0.0, 255.0},
                            std::optional<int64_t> seed = std::nullopt, std::string name = "");
};

// Keras 3.15's RandomGrayscale: each image (one draw per image) becomes its grey value
// (tf::image::rgb_to_grayscale's weights) in all three channels with probability factor (in
// [0, 1]); inputs need 3 channels.
class RandomGrayscale : public Layer {
 public:
  explicit RandomGrayscale(double factor = 0.5, std::optional<int64_t> seed = std::nullopt,
                           std::string name = "");
};

// Keras 3.15's RandomSaturation: per image, u drawn from the factor's range (f gives (-|f|,
// |f|), in [-1, 1]) scales the HSV saturation by u / (1 - u + 1e-7), clipped to value_range
// as Keras does (on the unscaled image); inputs need 3 channels.
class RandomSaturation : public Layer {
 public:
  explicit RandomSaturation(Factor factor, std::pair<double, double> value_range = {0.0, 255.0},
                            std::optional<int64_t> seed = std::nullopt, std::string name = "");
};

// Keras 3.15's RandomHue: per image, a factor from the range (f gives (0, f), in [0, 1]) with a
// random sign, halved, shifts the HSV hue of the image scaled from value_range to [0, 1]; the
// result is clipped to [0, 1] and scaled back. Inputs need 3 channels.
class RandomHue : public Layer {
 public:
  explicit RandomHue(Factor factor, std::pair<double, double> value_range = {0.0, 255.0},
                     std::optional<int64_t> seed = std::nullopt, std::string name = "");
};

struct NormalizationOptions {
  // The axis kept (one mean and variance per position along it); std::nullopt for one mean and
  // variance over everything (Keras' axis=None).
  std::optional<int> axis = -1;
  // Keras' mean= and variance= arguments: one value for every position, or one per position
  // along axis. Both or neither; without them, call adapt() before the layer is used.
  std::vector<double> mean = {};
  std::vector<double> variance = {};
  bool invert = false;  // mean + x * std instead of (x - mean) / std
  std::string name = "";
};

// (x - mean) / max(sqrt(variance), 1e-7), with mean and variance given or computed by adapt().
// Weights "mean" and "variance" (non-trainable; Keras' "count" weight is not kept).
class Normalization : public Layer {
 public:
  explicit Normalization(NormalizationOptions options = {});
  // Keras' adapt: the mean and (biased) variance of `data` over every axis but `axis`; builds the
  // layer for data's shape if needed.
  void adapt(const Tensor& data) const;
  // The same over a batched dataset (the first component of each element), combined batch by
  // batch as Keras.
  void adapt(const data::Dataset& dataset) const;
  Tensor mean() const;
  Tensor variance() const;
};

}  // namespace tapeflow::keras::layers

namespace tapeflow::keras::detail {
// The Resizing layer's central crop of (..., height, width, channels) images to the aspect
// ratio of (th, tw) (Keras' crop_to_aspect_ratio; smart_resize's without at_least_one), which
// keras::utils' image loading shares.
Tensor crop_to_aspect(const Tensor& x, int64_t th, int64_t tw, bool at_least_one);
}  // namespace tapeflow::keras::detail
