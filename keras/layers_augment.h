// More of Keras 3's image augmentation layers (keras.layers.Solarization, RandomInvert,
// RandomPosterization, AutoContrast, RandomSharpness, RandomErasing, RandomGaussianBlur,
// RandomColorDegeneration, Equalization, RandomShear, MixUp, CutMix, RandomPerspective,
// RandomColorJitter, RandomElasticTransform, RandAugment, AugMix,
// ContrastLimitedAdaptiveHistogramEqualization) and Pipeline, on NHWC images
// (rank 4, or a single rank-3 image) with Keras 3.15's options and semantics, composed of existing
// ops (so every device and traced functions with a None batch work). See docs/keras.md.
//
// As in keras/layers_preprocessing.h: the layers act only with training = true and are the
// identity otherwise (except AutoContrast, which always acts, as Keras); they draw tapeflow's
// uniform and normal random ops with the layer's seed as the op seed (new values on every call,
// the sequence repeats after tf::random::set_seed, not Keras' numbers); outputs are float32.
// Bad arguments raise InvalidArgumentError naming the layer and the value.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "keras/layers.h"
#include "keras/layers_preprocessing.h"

namespace tapeflow::keras::layers {

// Per image: the image scaled from value_range to [0, 255], plus an addition drawn from
// [addition_factor.lower, addition_factor.upper * 255), clipped to [0, 255]; pixels at or above a
// threshold drawn from [threshold_factor.lower, threshold_factor.upper * 255) become 255 - v;
// scaled back. A single f gives (0, f); every bound must be in [0, 1]. Keras 3.15 scales only
// the upper bounds by 255, and the defaults (0, 0) invert every pixel; both as Keras.
class Solarization : public Layer {
 public:
  explicit Solarization(Factor addition_factor = 0.0, Factor threshold_factor = 0.0,
                        std::pair<double, double> value_range = {0.0, 255.0},
                        std::optional<int64_t> seed = std::nullopt, std::string name = "");
};

// Per image, with probability p drawn from the factor's range (f gives (0, f), bounds in [0, 1]):
// value_range.second - x (Keras 3.15 subtracts from the upper bound only, not lower + upper).
class RandomInvert : public Layer {
 public:
  explicit RandomInvert(Factor factor = 1.0, std::pair<double, double> value_range = {0.0, 255.0},
                        std::optional<int64_t> seed = std::nullopt, std::string name = "");
};

// Per image, b bits (an integer drawn from [lower, upper), or lower when they are equal; f
// gives (1, f), bounds in [1, 8]) of each value scaled from value_range to [0, 255] and
// truncated to an integer are kept: v >> (8 - b) << (8 - b), scaled back. Values outside
// value_range are clipped to it first (Keras casts them to uint8, which wraps or saturates).
class RandomPosterization : public Layer {
 public:
  explicit RandomPosterization(Factor factor, std::pair<double, double> value_range = {0.0, 255.0},
                               std::optional<int64_t> seed = std::nullopt, std::string name = "");
};

// Stretches each image's channels to the full value_range: (v - min) * 255 / (max - min) on the
// image scaled to [0, 255] (min and max per image and channel), clipped and scaled back; a
// constant channel keeps its values. Acts in training and inference, as Keras.
class AutoContrast : public Layer {
 public:
  explicit AutoContrast(std::pair<double, double> value_range = {0.0, 255.0},
                        std::string name = "");
};

// Per image, s = 2 * u with u drawn from the factor's range (f gives (0, f), bounds in [0, 1]):
// x + (1 - s) * (smooth(x) - x), clipped to value_range, where smooth is the 3x3 kernel
// [[1, 1, 1], [1, 5, 1], [1, 1, 1]] / 13 per channel with zero padding (as Keras' depthwise
// convolution with padding "same").
class RandomSharpness : public Layer {
 public:
  explicit RandomSharpness(Factor factor, std::pair<double, double> value_range = {0.0, 255.0},
                           std::optional<int64_t> seed = std::nullopt, std::string name = "");
};

// Per image, with probability p drawn from the factor's range (f gives (0, f), bounds in [0, 1]):
// a box is erased. Its sides are sqrt(a) * width and sqrt(b) * height (a and b drawn from
// scale's range, s gives (0, s), bounds in [0, 1]) at a uniformly drawn offset; it is filled with
// fill_value (one value, or one per channel), or when fill_value is empty with Gaussian noise
// times value_range.second, clipped to value_range (as Keras' fill_value=None).
class RandomErasing : public Layer {
 public:
  explicit RandomErasing(Factor factor = 1.0, Factor scale = Factor{0.02, 0.33},
                         std::vector<double> fill_value = {},
                         std::pair<double, double> value_range = {0.0, 255.0},
                         std::optional<int64_t> seed = std::nullopt, std::string name = "");
};

// Per image, with probability p drawn from the factor's range (f gives (0, f), bounds in [0, 1]):
// a Gaussian blur with an odd kernel_size square kernel (zero padding, as Keras' depthwise
// convolution with padding "same"), clipped to value_range. The two sigmas (width, height) are
// drawn once per call from sigma's range (s gives (0, s), bounds in [0, 1], as Keras 3.15) plus
// 1e-6. Keras also takes a (width, height) kernel_size pair; only a square kernel here.
class RandomGaussianBlur : public Layer {
 public:
  explicit RandomGaussianBlur(Factor factor = 1.0, int64_t kernel_size = 3, Factor sigma = 1.0,
                              std::pair<double, double> value_range = {0.0, 255.0},
                              std::optional<int64_t> seed = std::nullopt, std::string name = "");
};

// Per image, u drawn from the factor's range (f gives (-|f|, |f|), bounds in [-1, 1]):
// x + u * (grey(x) - x), clipped to value_range; grey is tf::image::rgb_to_grayscale (inputs
// need 3 channels).
class RandomColorDegeneration : public Layer {
 public:
  explicit RandomColorDegeneration(Factor factor,
                                   std::pair<double, double> value_range = {0.0, 255.0},
                                   std::optional<int64_t> seed = std::nullopt,
                                   std::string name = "");
};

// Histogram equalization per channel, as Keras 3.15: the image scaled from value_range to
// [0, 255] falls into `bins` bins counted over the whole batch (Keras' histogram takes every
// image of the channel together), each value is replaced by round(255 * (cdf - cdf_min) /
// (total - cdf_min)) of its bin, clipped to [0, 255] and scaled back; a channel whose values fill
// at most one bin keeps them. The identity at inference, as Keras.
class Equalization : public Layer {
 public:
  explicit Equalization(std::pair<double, double> value_range = {0.0, 255.0}, int64_t bins = 256,
                        std::string name = "");
};

// Keras 3.15's RandAugment: num_ops times, one of eleven layers drawn for the whole batch
// (RandomShear, RandomTranslation, RandomRotation, RandomBrightness, RandomColorDegeneration,
// RandomContrast, RandomSharpness, RandomPosterization(max(1, floor(8 upper))), Solarization,
// AutoContrast, Equalization; each given factor's resolved range (f gives (0, f), in [0, 1]),
// value_range, seed, and the geometric ones interpolation "bilinear" or "nearest"). As Keras,
// every layer runs at every step and the drawn one is kept. A layer drawn twice draws its own
// randomness again (Keras reuses one draw per call).
class RandAugment : public Layer {
 public:
  explicit RandAugment(std::pair<double, double> value_range = {0.0, 255.0}, int64_t num_ops = 2,
                       Factor factor = 0.5, std::string interpolation = "bilinear",
                       std::optional<int64_t> seed = std::nullopt, std::string name = "");
};

// Keras 3.15's AugMix: num_chains chains of chain_depth steps, each step one of the layers
// (RandomShear, RandomTranslation, RandomRotation, RandomPosterization, Solarization,
// AutoContrast, Equalization, and with all_ops RandomBrightness, RandomColorDegeneration,
// RandomContrast, RandomSharpness; built as RandAugment's) or none, drawn for the batch; the
// chains' results are mixed with Dirichlet(alpha) weights, then with the images by a
// Beta(alpha, alpha) weight, and clipped to value_range. Keras draws the steps' layers with
// Python's random module (in a traced function, once per trace); tapeflow draws them on the
// device at every call (in a trace every layer runs and the drawn one is kept).
class AugMix : public Layer {
 public:
  explicit AugMix(std::pair<double, double> value_range = {0.0, 255.0}, int64_t num_chains = 3,
                  int64_t chain_depth = 3, Factor factor = 0.3, double alpha = 1.0,
                  bool all_ops = true, std::string interpolation = "bilinear",
                  std::optional<int64_t> seed = std::nullopt, std::string name = "");
};

// Keras 3.15's RandomElasticTransform: per image, with a probability drawn from factor's range
// (f gives (0, f), in [0, 1]), the image is warped by tf::image::elastic_transform with one
// distortion d drawn from scale's range per call (alpha = 0.1 d max(height, width), sigma =
// 0.05 d min(height, width)), interpolation "bilinear" or "nearest", fill_mode "reflect",
// "constant" (fill_value), "nearest", "wrap" or "mirror"; the result is clipped to value_range.
// Keras' TensorFlow backend moves every pixel along the diagonal (its two noise fields are one);
// tapeflow draws them independently.
class RandomElasticTransform : public Layer {
 public:
  explicit RandomElasticTransform(Factor factor = 1.0, Factor scale = 1.0,
                                  std::string interpolation = "bilinear",
                                  std::string fill_mode = "reflect", double fill_value = 0.0,
                                  std::pair<double, double> value_range = {0.0, 255.0},
                                  std::optional<int64_t> seed = std::nullopt,
                                  std::string name = "");
};

// Contrast-limited adaptive histogram equalization, as Keras 3.15's layer of that name: each
// image scaled from value_range to [0, 255] is padded (bottom and right, edge repeated) to a
// grid of tile_grid_size tiles; per tile and channel, a 256-bin histogram of the truncated
// values, its counts above clip_limit * tile area / 256 spread evenly over every bin (0: no
// clipping), maps a value to 255 (cdf - cdf_min) / (tile area - cdf_min); each pixel takes the
// bilinear blend of the maps of the four nearest tile centres, cropped and scaled back. Not
// random: it acts at inference too. The output is piecewise constant in the input (its
// gradient is zero).
class ContrastLimitedAdaptiveHistogramEqualization : public Layer {
 public:
  explicit ContrastLimitedAdaptiveHistogramEqualization(
      std::pair<double, double> value_range = {0.0, 255.0}, double clip_limit = 4.0,
      std::pair<int64_t, int64_t> tile_grid_size = {8, 8}, std::string name = "");
};

// Shears each image by tf::image::transform with [1, sx, 0, sy, 1, 0, 0, 0]: sx and sy drawn
// from x_factor's and y_factor's ranges (f gives (-f, f), every bound in [0, 1]), both negated
// when a first draw is above 0.5, as Keras. Options as RandomRotation's (fill_mode "reflect",
// "wrap", "constant" or "nearest"; interpolation "bilinear" or "nearest").
class RandomShear : public Layer {
 public:
  explicit RandomShear(Factor x_factor = 0.0, Factor y_factor = 0.0,
                       RandomTransformOptions options = {});
};

// Keras 3.15's MixUp: per image, lambda ~ Beta(alpha, alpha) and a random permutation p of the
// batch (one per call): lambda * x + (1 - lambda) * x[p]. Keras mixes a dict of images and
// labels with the same draws: call_with_labels(images, labels, training) returns both; the
// Layer call mixes the images only. Gamma draws (Marsaglia-Tsang, 16 vectorized proposal
// rounds) and the permutation (ranks of uniform draws) are composed of uniform and normal ops.
class MixUp : public Layer {
 public:
  explicit MixUp(double alpha = 0.2, std::optional<int64_t> seed = std::nullopt,
                 std::string name = "");
  // {mixed images, mixed labels}; labels are (batch, ...) with the images' batch size.
  std::pair<Tensor, Tensor> call_with_labels(const Tensor& images, const Tensor& labels,
                                             bool training = false) const;
};

// Keras 3.15's CutMix: per call alpha drawn from the factor's range (f gives (0, f), bounds in
// [0, 1]) plus 1e-6; per image lambda ~ Beta(alpha, alpha) and a box of sides
// sqrt(1 - lambda) * (width, height) at a uniform offset, filled from image p[b] of a random
// permutation; the labels mix with weight 1 - box area / image area. A single image (rank 3, or
// the Layer call on a batch of one) is left as it is, as Keras. call_with_labels as MixUp's.
class CutMix : public Layer {
 public:
  explicit CutMix(Factor factor = 1.0, std::optional<int64_t> seed = std::nullopt,
                  std::string name = "");
  std::pair<Tensor, Tensor> call_with_labels(const Tensor& images, const Tensor& labels,
                                             bool training = false) const;
};

// Keras 3.15's RandomPerspective: per image, with a probability drawn from factor's range (f
// gives (0, f), in [0, 1]), the corners (0, 0), (w - 1, 0), (0, h - 1), (w - 1, h - 1) each
// move by their own coordinates times a draw from [-scale / 2, scale / 2) (scale in [0, 1]),
// and the image is warped so that the moved corners land on the original ones
// (tf::image::perspective_transform; "constant" fill with fill_value; interpolation "bilinear"
// or "nearest").
class RandomPerspective : public Layer {
 public:
  explicit RandomPerspective(Factor factor = 1.0, double scale = 1.0,
                             std::string interpolation = "bilinear", double fill_value = 0.0,
                             std::optional<int64_t> seed = std::nullopt, std::string name = "");
};

// Keras 3.15's RandomColorJitter: RandomBrightness, RandomContrast, RandomSaturation and
// RandomHue (keras/layers_preprocessing.h), each with its factor, the value_range and the seed,
// applied in that order in training; an unset factor skips its layer. Identity in inference.
struct RandomColorJitterOptions {
  std::pair<double, double> value_range = {0.0, 255.0};
  std::optional<Factor> brightness_factor = std::nullopt;
  std::optional<Factor> contrast_factor = std::nullopt;
  std::optional<Factor> saturation_factor = std::nullopt;
  std::optional<Factor> hue_factor = std::nullopt;
  std::optional<int64_t> seed = std::nullopt;
  std::string name = "";
};
class RandomColorJitter : public Layer {
 public:
  explicit RandomColorJitter(RandomColorJitterOptions options = {});
};

// Keras 3.15's Pipeline: applies its layers in order (each with the call's training flag), as a
// preprocessing chain that is one layer, not a model. Its weights are its layers'. Unlike
// Sequential it casts nothing itself: integer ids reach a lookup layer as they are.
class Pipeline : public Layer {
 public:
  explicit Pipeline(std::vector<Layer> layers, std::string name = "");
  std::vector<Layer> layers() const;
};

}  // namespace tapeflow::keras::layers
