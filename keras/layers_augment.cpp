// The layers of keras/layers_augment.h: LayerImpls composed of tf::image, elementwise and random
// ops. Per-image draws are shaped (batch, 1, 1, 1) from the input (random_uniform_like), so a
// graph traced for a None batch serves every batch size and draws anew on every run.
#include "keras/layers_augment.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/context.h"
#include "core/error.h"
#include "keras/data_format.h"
#include "keras/serialization_access_augment.h"
#include "keras/serialization_internal.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/image.h"
#include "ops/image_more.h"
#include "ops/movement.h"
#include "ops/nn.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/scan.h"
#include "ops/scatter.h"
#include "ops/unary.h"

namespace tapeflow::keras {
namespace {

using detail::LayerImpl;
using layers::Factor;
using Range = std::pair<double, double>;
using Json = saving::Config;
using saving::internal::range_json;
using saving::internal::seed_json;

Tensor scalar(double v) {
  return constant(Tensor(static_cast<float>(v)));
}

// Base of these layers: rank-3 or rank-4 images in the layer's data_format (channels_last
// unless made under backend::image_data_format() "channels_first" or loaded from such a
// config), computed as a rank-4 NHWC batch; the layers that work on pixel positions
// (needs_known_hw) need a known height and width.
class AugmentImpl : public LayerImpl, public detail::ImageFormat {
 public:
  using LayerImpl::LayerImpl;

 protected:
  void check_input(const TensorShape& s) const override {
    LayerImpl::check_input(s);
    if (const std::string m = format_.image_mismatch(s, needs_known_hw()); !m.empty())
      incompatible(s, m);
  }
  Tensor call(const Tensor& x, bool training) final {
    if (!training && !acts_in_inference()) return x;
    // Images without pixels (an axis of size 0) have nothing to transform, as in Keras.
    if (x.shape().known_elements() == 0) return x;
    // The layers compute in float32 whatever the compute dtype (float16 under mixed_float16,
    // float64 under a float64 policy), then return the compute dtype.
    const Tensor x32 = x.dtype() == float32 ? x : cast(x, float32);
    const Tensor x4 = format_.image_to_last(x32.rank() == 3 ? expand_dims(x32, 0) : x32);
    Tensor y = format_.image_to_first(apply(x4));
    if (x.rank() == 3) y = squeeze(y, {0});
    return y.dtype() == x.dtype() ? y : cast(y, x.dtype());
  }
  virtual bool acts_in_inference() const { return false; }

 public:
  // Keras 3.15's get_config keys after "data_format", in its order
  // (keras/serialization_augment.cpp).
  virtual void keras_config(Json& c) const = 0;

 protected:
  // False for the pixel-wise layers, which serve any image size from one trace.
  virtual bool needs_known_hw() const { return true; }
  virtual Tensor apply(const Tensor& x4) = 0;
  // lower + (upper - lower) * u, u uniform in [0, 1), one per image: (batch, 1, 1, 1) float32.
  // An empty range gives exactly lower, as Keras' uniform(lower, lower).
  static Tensor draw(const Tensor& x4, double lower, double upper, std::optional<int64_t> seed) {
    const Tensor col = slice(x4, {0, 0, 0, 0}, {-1, 1, 1, 1});
    const Tensor u = ::tapeflow::detail::random_uniform_like(col, 0.0, 1.0, float32, seed);
    return u * static_cast<float>(upper - lower) + static_cast<float>(lower);
  }
  // call_with_labels' results: images and labels in the compute dtype, as Keras casts them.
  std::pair<Tensor, Tensor> in_compute_dtype(const Tensor& images, const Tensor& labels) const {
    auto to = [&](const Tensor& t) {
      return t.dtype() == compute_dtype_ ? t : cast(t, compute_dtype_);
    };
    return {to(images), to(labels)};
  }
  void check_rgb(const Tensor& x4) const {
    TF_CHECK_ARG(x4.shape()[3] == 3, class_name().c_str(),
                 "inputs must have 3 channels (RGB) in the last axis, got shape {}",
                 x4.shape().to_string());
  }
};

// Keras' value_range: two finite numbers, sorted; an empty range cannot be scaled from.
Range value_range(const char* cls, Range r) {
  TF_CHECK_ARG(std::isfinite(r.first) && std::isfinite(r.second) && r.first != r.second, cls,
               "value_range must be two different finite numbers, got ({}, {})", r.first, r.second);
  if (r.first > r.second) std::swap(r.first, r.second);
  return r;
}

// x from `from` to `to` with Keras' _transform_value_range's float32 operations in its order
// ((x - lo) / (hi - lo) * (to_hi - to_lo) + to_lo), so values on a bin or floor boundary land
// where Keras puts them; the identity when the ranges are equal.
Tensor rescale(const Tensor& x, Range from, Range to) {
  if (from == to) return x;
  const auto lo = static_cast<float>(from.first), hi = static_cast<float>(from.second);
  const auto to_lo = static_cast<float>(to.first), to_hi = static_cast<float>(to.second);
  return (x - lo) / (hi - lo) * (to_hi - to_lo) + to_lo;
}
// Equalization's own scaling (Keras' _scale_values): x * scale + offset, scale and offset
// computed in double and applied in float32.
Tensor scale_values(const Tensor& x, Range from, Range to) {
  if (from == to) return x;
  const double scale = (to.second - to.first) / (from.second - from.first);
  const double offset = to.first - from.first * scale;
  return x * static_cast<float>(scale) + static_cast<float>(offset);
}

// Keras' BaseImagePreprocessingLayer._set_factor with bounds [lo, hi]: f (in [lo, hi]) gives
// (max(-|f|, lo), |f|); a pair must overlap [lo, hi].
Range base_factor(const char* cls, const char* arg, const Factor& f, double lo, double hi) {
  if (f.single) {
    TF_CHECK_ARG(f.lower >= lo && f.lower <= hi, cls, "{} must be in [{}, {}], got {}", arg, lo, hi,
                 f.lower);
    return {std::max(-std::abs(f.lower), lo), std::abs(f.lower)};
  }
  TF_CHECK_ARG(f.lower <= hi && f.upper >= lo, cls, "{} bounds must overlap [{}, {}], got ({}, {})",
               arg, lo, hi, f.lower, f.upper);
  return {f.lower, f.upper};
}

// ---- RandomPerspective ----
class RandomPerspectiveImpl final : public AugmentImpl {
 public:
  RandomPerspectiveImpl(const Factor& f, double scale, std::string interpolation, double fill_value,
                        std::optional<int64_t> seed, std::string name)
      : AugmentImpl("RandomPerspective", "random_perspective", std::move(name)),
        range_(base_factor("RandomPerspective", "factor", f, 0.0, 1.0)),
        scale_(scale),
        interpolation_(std::move(interpolation)),
        fill_value_(fill_value),
        seed_(seed) {
    TF_CHECK_ARG(scale >= 0.0 && scale <= 1.0, "RandomPerspective",
                 "The `scale` argument should be a number in the range [0,1]. Received: scale={}",
                 scale);
    TF_CHECK_ARG(interpolation_ == "bilinear" || interpolation_ == "nearest", "RandomPerspective",
                 "Unknown `interpolation` {}. Expected of one (\"bilinear\", \"nearest\")",
                 interpolation_);
  }

 protected:
  Tensor apply(const Tensor& x4) override {
    const int64_t h = x4.shape()[1], w = x4.shape()[2];
    const Tensor p = draw(x4, range_.first, range_.second, seed_);
    const Tensor u = draw(x4, 0.0, 1.0, seed_);
    // (batch, 4, 2) draws in [-scale / 2, scale / 2), made from the batch of x4.
    const Tensor col = reshape(slice(x4, {0, 0, 0, 0}, {-1, 1, 1, 1}), {-1, 1, 1});
    const Tensor shape_like = tile(col, {1, 4, 2});
    const Tensor moves = scale_ == 0.0
                             ? zeros_like(shape_like)
                             : ::tapeflow::detail::random_uniform_like(
                                   shape_like, -0.5 * scale_, 0.5 * scale_, float32, seed_);
    const auto fw = static_cast<float>(w - 1), fh = static_cast<float>(h - 1);
    const Tensor corners = constant(std::vector<float>{0, 0, fw, 0, 0, fh, fw, fh}, {1, 4, 2});
    const Tensor start = zeros_like(moves) + corners;
    const Tensor end = start + start * moves;
    const Tensor warped = image::perspective_transform(x4, start, end, interpolation_, fill_value_);
    return where(less(u, p), warped, x4);
  }

 private:
  Range range_;
  double scale_;
  std::string interpolation_;
  double fill_value_;
  std::optional<int64_t> seed_;

 public:
  void keras_config(Json& c) const override {
    c["factor"] = range_json(range_);
    c["scale"] = scale_;
    c["interpolation"] = interpolation_;
    c["fill_value"] = fill_value_;
    c["seed"] = seed_json(seed_);
  }
};

// ---- RandomElasticTransform ----
class RandomElasticTransformImpl final : public AugmentImpl {
 public:
  RandomElasticTransformImpl(const Factor& f, const Factor& scale, std::string interpolation,
                             std::string fill_mode, double fill_value, Range vr,
                             std::optional<int64_t> seed, std::string name)
      : AugmentImpl("RandomElasticTransform", "random_elastic_transform", std::move(name)),
        range_(base_factor("RandomElasticTransform", "factor", f, 0.0, 1.0)),
        scale_(base_factor("RandomElasticTransform", "scale", scale, 0.0, 1.0)),
        interpolation_(std::move(interpolation)),
        fill_mode_(std::move(fill_mode)),
        fill_value_(fill_value),
        vr_(vr),
        seed_(seed) {
    TF_CHECK_ARG(
        interpolation_ == "bilinear" || interpolation_ == "nearest", "RandomElasticTransform",
        "Unknown `interpolation` {}. Expected of one (\"nearest\", \"bilinear\")", interpolation_);
    const std::string& m = fill_mode_;
    TF_CHECK_ARG(
        m == "constant" || m == "nearest" || m == "wrap" || m == "mirror" || m == "reflect",
        "RandomElasticTransform",
        "Unknown `fill_mode` {}. Expected of one (\"constant\", \"nearest\", \"wrap\", "
        "\"mirror\", \"reflect\")",
        m);
    if (vr_.first > vr_.second) std::swap(vr_.first, vr_.second);
  }

 protected:
  Tensor apply(const Tensor& x4) override {
    if (scale_.second == 0 || range_.second == 0) return x4;
    const int64_t h = x4.shape()[1], w = x4.shape()[2];
    // Keras' draws: the probability and the threshold per image, one distortion per call.
    const Tensor p = draw(x4, range_.first, range_.second, seed_);
    const Tensor u = draw(x4, 0.0, 1.0, seed_);
    // Drawn as draw() draws (an empty range gives exactly its bound).
    const Tensor d = ::tapeflow::detail::random_uniform_like(scalar(0), 0.0, 1.0, float32, seed_) *
                         static_cast<float>(scale_.second - scale_.first) +
                     static_cast<float>(scale_.first);
    const auto big = static_cast<float>(std::max(h, w)), small = static_cast<float>(std::min(h, w));
    const Tensor alpha = d * (0.1f * big), sigma = d * (0.05f * small);
    const auto radius = static_cast<int64_t>(
        3 * std::floor(0.05 * static_cast<double>(std::min(h, w)) * scale_.second));
    const Tensor moved = image::elastic_transform(x4, alpha, sigma, radius, interpolation_,
                                                  fill_mode_, fill_value_, seed_);
    return clip_by_value(where(less(u, p), moved, x4), scalar(vr_.first), scalar(vr_.second));
  }

 private:
  Range range_, scale_;
  std::string interpolation_, fill_mode_;
  double fill_value_;
  Range vr_;
  std::optional<int64_t> seed_;

 public:
  void keras_config(Json& c) const override {
    c["factor"] = range_json(range_);
    c["scale"] = range_json(scale_);
    c["interpolation"] = interpolation_;
    c["fill_mode"] = fill_mode_;
    c["fill_value"] = fill_value_;
    c["value_range"] = range_json(vr_);
    c["seed"] = seed_json(seed_);
  }
};

// ---- RandAugment and AugMix ----
// The layers RandAugment and AugMix draw from, by Keras' attribute names, each given the
// resolved factor range, value_range, seed and (the geometric ones) interpolation, as Keras
// builds them.
// A layer made inside another one, which hands it NHWC batches: channels_last whatever the
// global image_data_format.
Layer channels_last(Layer l) {
  if (auto* f = dynamic_cast<detail::ImageFormat*>(&l.impl())) f->set_data_format({});
  return l;
}

std::vector<Layer> augment_ops(const std::vector<std::string>& names, Range range, Range vr,
                               const std::string& interpolation, std::optional<int64_t> seed) {
  const Factor r{range.first, range.second};
  const layers::RandomTransformOptions geometric{.interpolation = interpolation, .seed = seed};
  std::vector<Layer> ops;
  for (const std::string& n : names) {
    if (n == "random_shear") ops.push_back(layers::RandomShear(r, r, geometric));
    if (n == "random_translation") ops.push_back(layers::RandomTranslation(r, r, geometric));
    if (n == "random_rotation") ops.push_back(layers::RandomRotation(r, geometric));
    if (n == "random_brightness") ops.push_back(layers::RandomBrightness(r, vr, seed));
    if (n == "random_color_degeneration")
      ops.push_back(layers::RandomColorDegeneration(r, vr, seed));
    if (n == "random_contrast") ops.push_back(layers::RandomContrast(r, vr, seed));
    if (n == "random_sharpness") ops.push_back(layers::RandomSharpness(r, vr, seed));
    if (n == "random_posterization")
      ops.push_back(layers::RandomPosterization(
          static_cast<double>(std::max<int64_t>(1, static_cast<int64_t>(8 * range.second))), vr,
          seed));
    if (n == "solarization") ops.push_back(layers::Solarization(r, r, vr, seed));
    if (n == "auto_contrast") ops.push_back(layers::AutoContrast(vr));
    if (n == "equalization") ops.push_back(layers::Equalization(vr));
  }
  for (Layer& l : ops) l = channels_last(l);
  return ops;
}

void check_geometric_interpolation(const char* cls, const std::string& interpolation) {
  TF_CHECK_ARG(interpolation == "bilinear" || interpolation == "nearest", cls,
               "interpolation must be \"bilinear\" or \"nearest\" (RandomShear's), got \"{}\"",
               interpolation);
}

// y through ops[pick] (pick: an int32 scalar; ops.size() or more leaves y as it is). Eagerly
// only the drawn layer runs; in a trace every layer runs and `where` keeps the drawn one (Keras'
// RandAugment's way), so that one graph serves every draw.
Tensor apply_drawn(const std::vector<Layer>& ops, const Tensor& pick, const Tensor& y) {
  if (::tapeflow::detail::thread_context().trace == nullptr) {
    const auto k = static_cast<size_t>(cast(pick, int64).item<int64_t>());
    return k < ops.size() ? ops[k](y, true) : y;
  }
  Tensor out = y;
  for (size_t k = 0; k < ops.size(); ++k) {
    const Tensor chosen = equal(pick, ::tapeflow::image_detail::i32(static_cast<int64_t>(k)));
    out = where(chosen, ops[k](y, true), out);
  }
  return out;
}

class RandAugmentImpl final : public AugmentImpl {
 public:
  RandAugmentImpl(Range vr, int64_t num_ops, const Factor& f, std::string interpolation,
                  std::optional<int64_t> seed, std::string name)
      : AugmentImpl("RandAugment", "rand_augment", std::move(name)),
        vr_(vr),
        num_ops_(num_ops),
        range_(base_factor("RandAugment", "factor", f, 0.0, 1.0)),
        interpolation_(std::move(interpolation)),
        seed_(seed) {
    TF_CHECK_ARG(num_ops >= 0 && num_ops <= 1000, "RandAugment",
                 "num_ops must be in [0, 1000], got {}", num_ops);
    check_geometric_interpolation("RandAugment", interpolation_);
    ops_ =
        augment_ops({"random_shear", "random_translation", "random_rotation", "random_brightness",
                     "random_color_degeneration", "random_contrast", "random_sharpness",
                     "random_posterization", "solarization", "auto_contrast", "equalization"},
                    range_, vr, interpolation_, seed);
  }

 protected:
  Tensor apply(const Tensor& x4) override {
    if (num_ops_ == 0) return x4;
    // One layer per step for the whole batch, as Keras' randint((num_ops,), 0, 11).
    const Tensor picks =
        random::uniform({num_ops_}, 0, static_cast<double>(ops_.size()), int32, seed_);
    Tensor y = x4;
    for (int64_t i = 0; i < num_ops_; ++i)
      y = apply_drawn(ops_, reshape(slice(picks, {i}, {1}), {}), y);
    return y;
  }

 private:
  Range vr_;
  int64_t num_ops_;
  Range range_;
  std::string interpolation_;
  std::optional<int64_t> seed_;
  std::vector<Layer> ops_;

 public:
  void keras_config(Json& c) const override {
    c["value_range"] = range_json(vr_);
    c["num_ops"] = num_ops_;
    c["factor"] = range_json(range_);
    c["interpolation"] = interpolation_;
    c["seed"] = seed_json(seed_);
  }
};

// ---- RandomColorJitter ----
class RandomColorJitterImpl final : public AugmentImpl {
 public:
  explicit RandomColorJitterImpl(layers::RandomColorJitterOptions o)
      : AugmentImpl("RandomColorJitter", "random_color_jitter", o.name),
        o_(std::move(o)),
        vr_(value_range("RandomColorJitter", o_.value_range)) {
    if (o_.brightness_factor)
      parts_.push_back(layers::RandomBrightness(*o_.brightness_factor, vr_, o_.seed));
    if (o_.contrast_factor)
      parts_.push_back(layers::RandomContrast(*o_.contrast_factor, vr_, o_.seed));
    if (o_.saturation_factor)
      parts_.push_back(layers::RandomSaturation(*o_.saturation_factor, vr_, o_.seed));
    if (o_.hue_factor) parts_.push_back(layers::RandomHue(*o_.hue_factor, vr_, o_.seed));
    for (Layer& l : parts_) l = channels_last(l);
  }

 protected:
  bool needs_known_hw() const override { return false; }
  Tensor apply(const Tensor& x4) override {
    Tensor y = x4;
    for (const Layer& l : parts_) y = l(y, true);
    return y.dtype() == float32 ? y : cast(y, float32);
  }

 private:
  layers::RandomColorJitterOptions o_;
  Range vr_;
  std::vector<Layer> parts_;

 public:
  void keras_config(Json& c) const override {
    auto factor = [](const std::optional<Factor>& f) -> Json {
      if (!f) return nullptr;
      if (f->single) return f->lower;
      return Json::array({f->lower, f->upper});
    };
    c["value_range"] = range_json(vr_);
    c["brightness_factor"] = factor(o_.brightness_factor);
    c["contrast_factor"] = factor(o_.contrast_factor);
    c["saturation_factor"] = factor(o_.saturation_factor);
    c["hue_factor"] = factor(o_.hue_factor);
    c["seed"] = seed_json(o_.seed);
  }
};

// ---- Pipeline ----
class PipelineImpl final : public LayerImpl {
 public:
  PipelineImpl(std::vector<Layer> layers, std::string name)
      : LayerImpl("Pipeline", "pipeline", std::move(name)), layers_(std::move(layers)) {
    for (size_t i = 0; i < layers_.size(); ++i)
      TF_CHECK_ARG(layers_[i].defined(), "Pipeline", "layer {} of the pipeline is an empty handle",
                   i);
  }
  std::vector<Layer> sublayers() const override { return layers_; }
  TensorShape compute_output_shape(const TensorShape& s) const override {
    TensorShape shape = s;
    for (const Layer& l : layers_) shape = l.impl().compute_output_shape(shape);
    return shape;
  }

 protected:
  bool casts_all_inputs() const override { return false; }
  bool autocast() const override { return false; }
  Tensor call(const Tensor& x, bool training) override {
    Tensor y = x;
    for (const Layer& l : layers_) y = l(y, training);
    return y;
  }

 private:
  std::vector<Layer> layers_;
};

// ---- Solarization ----
class SolarizationImpl final : public AugmentImpl {
 public:
  SolarizationImpl(const Factor& add, const Factor& thr, Range vr, std::optional<int64_t> seed,
                   std::string name)
      : AugmentImpl("Solarization", "solarization", std::move(name)),
        add_(unit_factor("addition_factor", add)),
        thr_(unit_factor("threshold_factor", thr)),
        vr_(value_range("Solarization", vr)),
        seed_(seed) {}

 protected:
  bool needs_known_hw() const override { return false; }
  Tensor apply(const Tensor& x4) override {
    // Keras 3.15 draws from [lower, upper * 255): only the upper bound is scaled.
    const Tensor add = draw(x4, add_.first, add_.second * 255.0, seed_);
    const Tensor thr = draw(x4, thr_.first, thr_.second * 255.0, seed_);
    const Tensor v = clip_by_value(rescale(x4, vr_, {0.0, 255.0}) + add, scalar(0), scalar(255));
    return rescale(where(less(v, thr), v, 255.0f - v), {0.0, 255.0}, vr_);
  }

 private:
  // Solarization's own check: every bound in [0, 1]; f gives (0, f).
  static Range unit_factor(const char* arg, const Factor& f) {
    const auto ok = [](double v) { return v >= 0.0 && v <= 1.0; };
    if (f.single) {
      TF_CHECK_ARG(ok(f.lower), "Solarization", "{} must be in [0, 1], got {}", arg, f.lower);
      return {0.0, f.lower};
    }
    TF_CHECK_ARG(ok(f.lower) && ok(f.upper), "Solarization",
                 "{} bounds must be in [0, 1], got ({}, {})", arg, f.lower, f.upper);
    return {f.lower, f.upper};
  }
  Range add_, thr_, vr_;
  std::optional<int64_t> seed_;

 public:
  void keras_config(Json& c) const override {
    c["value_range"] = range_json(vr_);
    c["addition_factor"] = range_json(add_);
    c["threshold_factor"] = range_json(thr_);
    c["seed"] = seed_json(seed_);
  }
};

// ---- RandomInvert ----
class RandomInvertImpl final : public AugmentImpl {
 public:
  RandomInvertImpl(const Factor& f, Range vr, std::optional<int64_t> seed, std::string name)
      : AugmentImpl("RandomInvert", "random_invert", std::move(name)),
        range_(base_factor("RandomInvert", "factor", f, 0.0, 1.0)),
        vr_(value_range("RandomInvert", vr)),
        seed_(seed) {}

 protected:
  bool needs_known_hw() const override { return false; }
  Tensor apply(const Tensor& x4) override {
    // Keras: a probability from the factor's range, then a threshold in [0, 1) below it.
    const Tensor p = draw(x4, range_.first, range_.second, seed_);
    const Tensor u = draw(x4, 0.0, 1.0, seed_);
    return where(less(u, p), static_cast<float>(vr_.second) - x4, x4);
  }

 private:
  Range range_, vr_;
  std::optional<int64_t> seed_;

 public:
  void keras_config(Json& c) const override {
    c["factor"] = range_json(range_);
    c["value_range"] = range_json(vr_);
    c["seed"] = seed_json(seed_);
  }
};

// ---- RandomPosterization ----
class RandomPosterizationImpl final : public AugmentImpl {
 public:
  RandomPosterizationImpl(const Factor& f, Range vr, std::optional<int64_t> seed, std::string name)
      : AugmentImpl("RandomPosterization", "random_posterization", std::move(name)),
        range_(base_factor("RandomPosterization", "factor", f, 1.0, 8.0)),
        vr_(value_range("RandomPosterization", vr)),
        seed_(seed) {}

 protected:
  bool needs_known_hw() const override { return false; }
  Tensor apply(const Tensor& x4) override {
    // Bits kept: Keras' randint(lower, upper) (upper excluded), or lower when they are equal.
    const Tensor bits =
        range_.first == range_.second
            ? draw(x4, range_.first, range_.first, seed_)
            : floor(draw(x4, std::ceil(range_.first), std::ceil(range_.second), seed_));
    const Tensor step = pow(scalar(2), 8.0f - floor(bits));
    const Tensor v = floor(clip_by_value(rescale(x4, vr_, {0.0, 255.0}), scalar(0), scalar(255)));
    return rescale(floor(v / step) * step, {0.0, 255.0}, vr_);
  }

 private:
  Range range_, vr_;
  std::optional<int64_t> seed_;

 public:
  void keras_config(Json& c) const override {
    c["factor"] = range_json(range_);
    c["value_range"] = range_json(vr_);
    c["seed"] = seed_json(seed_);
  }
};

// ---- AutoContrast ----
class AutoContrastImpl final : public AugmentImpl {
 public:
  AutoContrastImpl(Range vr, std::string name)
      : AugmentImpl("AutoContrast", "auto_contrast", std::move(name)),
        vr_(value_range("AutoContrast", vr)) {}

 protected:
  bool needs_known_hw() const override { return false; }
  bool acts_in_inference() const override { return true; }
  Tensor apply(const Tensor& x4) override {
    const Tensor v = scale_values(x4, vr_, {0.0, 255.0});
    const Tensor lo = reduce_min(v, {1, 2}, true), hi = reduce_max(v, {1, 2}, true);
    // Keras computes 255 / 0 for a constant channel and keeps the input where that gives NaN; a
    // positive span gives the same values without the division by zero.
    const Tensor flat = less_equal(hi - lo, scalar(0));
    const Tensor span = where(flat, ones_like(hi), hi - lo);
    const Tensor y = clip_by_value((v - lo) * (255.0f / span), scalar(0), scalar(255));
    return where(flat, x4, rescale(y, {0.0, 255.0}, vr_));
  }

 private:
  Range vr_;

 public:
  void keras_config(Json& c) const override { c["value_range"] = range_json(vr_); }
};

// ---- RandomSharpness ----
class RandomSharpnessImpl final : public AugmentImpl {
 public:
  RandomSharpnessImpl(const Factor& f, Range vr, std::optional<int64_t> seed, std::string name)
      : AugmentImpl("RandomSharpness", "random_sharpness", std::move(name)),
        range_(base_factor("RandomSharpness", "factor", f, 0.0, 1.0)),
        vr_(value_range("RandomSharpness", vr)),
        seed_(seed) {}

 protected:
  Tensor apply(const Tensor& x4) override {
    const Tensor s = draw(x4, range_.first, range_.second, seed_) * 2.0f;
    // The 3x3 smoothing kernel as nine shifted copies of the zero-padded image.
    const int64_t H = x4.shape()[1], W = x4.shape()[2];
    const Tensor p = pad(x4, {{0, 0}, {1, 1}, {1, 1}, {0, 0}}, 0.0);
    Tensor sum;
    for (int64_t dy = 0; dy < 3; ++dy)
      for (int64_t dx = 0; dx < 3; ++dx) {
        if (dy == 1 && dx == 1) continue;
        const Tensor t = slice(p, {0, dy, dx, 0}, {-1, H, W, -1});
        sum = sum.defined() ? sum + t : t;
      }
    const Tensor smooth = (sum + x4 * 5.0f) * static_cast<float>(1.0 / 13.0);
    return clip_by_value(x4 + (1.0f - s) * (smooth - x4), scalar(vr_.first), scalar(vr_.second));
  }

 private:
  Range range_, vr_;
  std::optional<int64_t> seed_;

 public:
  void keras_config(Json& c) const override {
    c["factor"] = range_json(range_);
    c["value_range"] = range_json(vr_);
    c["seed"] = seed_json(seed_);
  }
};

// ---- RandomErasing ----
class RandomErasingImpl final : public AugmentImpl {
 public:
  RandomErasingImpl(const Factor& f, const Factor& scale, std::vector<double> fill, Range vr,
                    std::optional<int64_t> seed, std::string name)
      : AugmentImpl("RandomErasing", "random_erasing", std::move(name)),
        range_(base_factor("RandomErasing", "factor", f, 0.0, 1.0)),
        scale_(base_factor("RandomErasing", "scale", scale, 0.0, 1.0)),
        fill_(std::move(fill)),
        vr_(value_range("RandomErasing", vr)),
        seed_(seed) {
    TF_CHECK_ARG(fill_.size() <= 1 || fill_.size() == 3, "RandomErasing",
                 "fill_value must be empty (noise), one value or three, got {} values",
                 fill_.size());
  }

 protected:
  Tensor apply(const Tensor& x4) override {
    const int64_t H = x4.shape()[1], W = x4.shape()[2], C = x4.shape()[3];
    TF_CHECK_ARG(fill_.size() != 3 || C == 3, "RandomErasing",
                 "three fill values need 3 channels, got inputs of shape {}",
                 x4.shape().to_string());
    // Keras' order: the two sides' scales, the x and y offsets, the probability, the threshold.
    const Tensor rw = sqrt(draw(x4, scale_.first, scale_.second, seed_));
    const Tensor rh = sqrt(draw(x4, scale_.first, scale_.second, seed_));
    const auto bounds = [&](const Tensor& r, int64_t n) {
      const Tensor len = r * static_cast<float>(n);
      const Tensor start = draw(x4, 0.0, 1.0, seed_) * (static_cast<float>(n) - len);
      return std::pair{start, start + len};
    };
    const auto [x0, x1] = bounds(rw, W);
    const auto [y0, y1] = bounds(rh, H);
    const Tensor p = draw(x4, range_.first, range_.second, seed_);
    const Tensor apply = less(draw(x4, 0.0, 1.0, seed_), p);
    const Tensor gx = reshape(range(0.0, static_cast<double>(W), 1.0, float32), {1, 1, W, 1});
    const Tensor gy = reshape(range(0.0, static_cast<double>(H), 1.0, float32), {1, H, 1, 1});
    const Tensor in_box = logical_and(logical_and(greater_equal(gx, x0), less(gx, x1)),
                                      logical_and(greater_equal(gy, y0), less(gy, y1)));
    Tensor fill;
    if (fill_.empty())
      fill = ::tapeflow::detail::random_normal_like(x4, 0.0, 1.0, float32, seed_) *
             static_cast<float>(vr_.second);
    else if (fill_.size() == 1)
      fill = zeros_like(x4) + static_cast<float>(fill_[0]);
    else
      fill = zeros_like(x4) + ::tapeflow::detail::from_doubles(fill_, {3}, float32);
    fill = clip_by_value(fill, scalar(vr_.first), scalar(vr_.second));
    return where(logical_and(in_box, apply), fill, x4);
  }

 private:
  Range range_, scale_;
  std::vector<double> fill_;
  Range vr_;
  std::optional<int64_t> seed_;

 public:
  void keras_config(Json& c) const override {
    c["factor"] = range_json(range_);
    c["scale"] = range_json(scale_);
    c["fill_value"] = fill_.empty()       ? Json(nullptr)
                      : fill_.size() == 1 ? Json(fill_[0])
                                          : Json(fill_);
    c["value_range"] = range_json(vr_);
    c["seed"] = seed_json(seed_);
  }
};

// ---- RandomGaussianBlur ----
class RandomGaussianBlurImpl final : public AugmentImpl {
 public:
  RandomGaussianBlurImpl(const Factor& f, int64_t k, const Factor& sigma, Range vr,
                         std::optional<int64_t> seed, std::string name)
      : AugmentImpl("RandomGaussianBlur", "random_gaussian_blur", std::move(name)),
        range_(base_factor("RandomGaussianBlur", "factor", f, 0.0, 1.0)),
        k_(k),
        sigma_(base_factor("RandomGaussianBlur", "sigma", sigma, 0.0, 1.0)),
        vr_(value_range("RandomGaussianBlur", vr)),
        seed_(seed) {
    TF_CHECK_ARG(k > 0 && k % 2 == 1, "RandomGaussianBlur",
                 "kernel_size must be a positive odd number, got {}", k);
  }

 protected:
  Tensor apply(const Tensor& x4) override {
    const Tensor p = draw(x4, range_.first, range_.second, seed_);
    const Tensor apply = less(draw(x4, 0.0, 1.0, seed_), p);
    // One (width, height) pair of sigmas for the call, as Keras.
    const Tensor sig = random::uniform({2}, 0.0, 1.0, float32, seed_) *
                           static_cast<float>(sigma_.second - sigma_.first) +
                       static_cast<float>(sigma_.first + 1e-6);
    const Tensor pos = range(0.0, static_cast<double>(k_), 1.0, float32) -
                       static_cast<float>(static_cast<double>(k_ - 1) / 2.0);
    const auto kernel = [&](int64_t i) {
      const Tensor g = exp(square(pos / slice(sig, {i}, {1})) * -0.5f);
      return g / reduce_sum(g);
    };
    const Tensor kx = kernel(0), ky = kernel(1);
    // The separable blur of the zero-padded image: along the width, then the height.
    const int64_t H = x4.shape()[1], W = x4.shape()[2], r = (k_ - 1) / 2;
    const Tensor padded = pad(x4, {{0, 0}, {r, r}, {r, r}, {0, 0}}, 0.0);
    Tensor rows, out;
    for (int64_t j = 0; j < k_; ++j) {
      const Tensor t = slice(padded, {0, 0, j, 0}, {-1, -1, W, -1}) * slice(kx, {j}, {1});
      rows = rows.defined() ? rows + t : t;
    }
    for (int64_t i = 0; i < k_; ++i) {
      const Tensor t = slice(rows, {0, i, 0, 0}, {-1, H, -1, -1}) * slice(ky, {i}, {1});
      out = out.defined() ? out + t : t;
    }
    return clip_by_value(where(apply, out, x4), scalar(vr_.first), scalar(vr_.second));
  }

 private:
  Range range_;
  int64_t k_;
  Range sigma_, vr_;
  std::optional<int64_t> seed_;

 public:
  void keras_config(Json& c) const override {
    c["factor"] = range_json(range_);
    c["kernel_size"] = Json::array({k_, k_});
    c["sigma"] = range_json(sigma_);
    c["value_range"] = range_json(vr_);
    c["seed"] = seed_json(seed_);
  }
};

// ---- RandomColorDegeneration ----
class RandomColorDegenerationImpl final : public AugmentImpl {
 public:
  RandomColorDegenerationImpl(const Factor& f, Range vr, std::optional<int64_t> seed,
                              std::string name)
      : AugmentImpl("RandomColorDegeneration", "random_color_degeneration", std::move(name)),
        range_(base_factor("RandomColorDegeneration", "factor", f, -1.0, 1.0)),
        vr_(value_range("RandomColorDegeneration", vr)),
        seed_(seed) {}

 protected:
  bool needs_known_hw() const override { return false; }
  Tensor apply(const Tensor& x4) override {
    check_rgb(x4);
    const Tensor u = draw(x4, range_.first, range_.second, seed_);
    const Tensor y = x4 + u * (image::rgb_to_grayscale(x4) - x4);
    return clip_by_value(y, scalar(vr_.first), scalar(vr_.second));
  }

 private:
  Range range_, vr_;
  std::optional<int64_t> seed_;

 public:
  void keras_config(Json& c) const override {
    c["factor"] = range_json(range_);
    c["value_range"] = range_json(vr_);
    c["seed"] = seed_json(seed_);
  }
};

// ---- Equalization ----
class EqualizationImpl final : public AugmentImpl {
 public:
  EqualizationImpl(Range vr, int64_t bins, std::string name)
      : AugmentImpl("Equalization", "equalization", std::move(name)),
        vr_(value_range("Equalization", vr)),
        bins_(bins) {
    TF_CHECK_ARG(bins >= 1 && bins <= (int64_t{1} << 24), "Equalization",
                 "bins must be in [1, 2^24], got {}", bins);
  }

 protected:
  Tensor apply(const Tensor& x4) override {
    const int64_t C = x4.shape()[3];
    const auto nb = static_cast<float>(bins_ - 1);
    const Tensor v = scale_values(x4, vr_, {0.0, 255.0});
    // Keras' two bin indices: the histogram's v * (bins - 1) / 255 and the lookup's
    // v / 255 * (bins - 1), each truncated and clipped to [0, bins - 1].
    const auto bin = [&](const Tensor& scaled) {
      return cast(clip_by_value(scaled, scalar(0), scalar(nb)), int32);
    };
    const Tensor hist_bin = bin(v * nb / 255.0f), lut_bin = bin(v / 255.0f * nb);
    // Channel c's bins are segments c * bins .. c * bins + bins - 1.
    const Tensor offset =
        reshape(range(0.0, static_cast<double>(C * bins_), static_cast<double>(bins_), int32),
                {1, 1, 1, C});
    const Tensor hist =
        reshape(unsorted_segment_sum(ones_like(v), hist_bin + offset, C * bins_), {C, bins_});
    const Tensor cdf = cumsum(hist, 1);
    const Tensor total = slice(cdf, {0, bins_ - 1}, {-1, 1});
    // The first non-zero entry of the cdf is its smallest positive one.
    const Tensor cdf_min =
        reduce_min(where(greater(cdf, scalar(0)), cdf, zeros_like(cdf) + total), {1}, true);
    Tensor den = total - cdf_min;
    den = where(equal(den, scalar(0)), ones_like(den), den);
    const Tensor lut = clip_by_value(round((cdf - cdf_min) * 255.0f / den), scalar(0), scalar(255));
    const Tensor eq = reshape(gather(reshape(lut, {C * bins_}), lut_bin + offset),
                              {-1, x4.shape()[1], x4.shape()[2], C});
    // A channel with at most one non-empty bin keeps its values.
    const Tensor filled = reduce_sum(cast(greater(hist, scalar(0)), float32), {1});
    const Tensor keep = reshape(less_equal(filled, scalar(1)), {1, 1, 1, C});
    return scale_values(where(keep, v, eq), {0.0, 255.0}, vr_);
  }

 private:
  Range vr_;
  int64_t bins_;

 public:
  void keras_config(Json& c) const override {
    c["bins"] = bins_;
    c["value_range"] = range_json(vr_);
  }
};

// ---- ContrastLimitedAdaptiveHistogramEqualization ----
class ClaheImpl final : public AugmentImpl {
 public:
  ClaheImpl(Range vr, double clip_limit, std::pair<int64_t, int64_t> grid, std::string name)
      : AugmentImpl("ContrastLimitedAdaptiveHistogramEqualization",
                    "contrast_limited_adaptive_histogram_equalization", std::move(name)),
        vr_(value_range("ContrastLimitedAdaptiveHistogramEqualization", vr)),
        clip_(clip_limit),
        grid_(grid) {
    TF_CHECK_ARG(std::isfinite(clip_limit) && clip_limit >= 0,
                 "ContrastLimitedAdaptiveHistogramEqualization",
                 "clip_limit must be a finite number >= 0 (0: no clipping), got {}", clip_limit);
    TF_CHECK_ARG(grid.first >= 1 && grid.second >= 1 && grid.first <= 4096 && grid.second <= 4096,
                 "ContrastLimitedAdaptiveHistogramEqualization",
                 "tile_grid_size must be two integers in [1, 4096], got ({}, {})", grid.first,
                 grid.second);
  }

 protected:
  bool acts_in_inference() const override { return true; }
  Tensor apply(const Tensor& x4) override {
    const TensorShape& s = x4.shape();
    const int64_t B = s[0], H = s[1], W = s[2], C = s[3];
    const int64_t gh = grid_.first, gw = grid_.second;
    TF_CHECK_ARG(B != None && C != None, class_name().c_str(),
                 "layer \"{}\" needs a known batch size and channel count (one histogram per "
                 "tile, image and channel), got shape {}",
                 name(), s.to_string());
    const int64_t th = (H + gh - 1) / gh, tw = (W + gw - 1) / gw;
    const int64_t Hp = th * gh, Wp = tw * gw;
    const int64_t segments = B * gh * gw * C * 256;
    TF_CHECK_ARG(B * (gh + 2) * (gw + 2) * C * 256 <= int64_t{1} << 31, class_name().c_str(),
                 "layer \"{}\": {} images of {} channels in a {}x{} grid of tiles need more "
                 "than 2^31 histogram entries; call it on smaller batches",
                 name(), B, C, gh, gw);
    // Keras pads the bottom and right edges symmetrically (the edge sample repeated) up to
    // whole tiles.
    const auto symmetric = [](int64_t n, int64_t padded) {
      std::vector<int32_t> idx(static_cast<size_t>(padded));
      for (int64_t i = 0; i < padded; ++i) {
        const int64_t r = i % (2 * n);
        idx[static_cast<size_t>(i)] = static_cast<int32_t>(r < n ? r : 2 * n - 1 - r);
      }
      return constant(idx, TensorShape{padded});
    };
    Tensor v = rescale(x4, vr_, {0.0, 255.0});
    if (Hp > H) v = gather(v, symmetric(H, Hp), 1);
    if (Wp > W) v = gather(v, symmetric(W, Wp), 2);
    const Tensor pix = cast(clip_by_value(v, scalar(0), scalar(255)), int32);
    using ::tapeflow::image_detail::i32;
    // Per pixel: its image b, tile (ty, tx) and channel c select a histogram of 256 bins.
    std::vector<int32_t> tile(static_cast<size_t>(Hp * Wp)), chan(static_cast<size_t>(C)),
        image(static_cast<size_t>(B));
    for (int64_t y = 0; y < Hp; ++y)
      for (int64_t x = 0; x < Wp; ++x)
        tile[static_cast<size_t>(y * Wp + x)] = static_cast<int32_t>((y / th) * gw + x / tw);
    for (int64_t c = 0; c < C; ++c) chan[static_cast<size_t>(c)] = static_cast<int32_t>(c);
    for (int64_t b = 0; b < B; ++b) image[static_cast<size_t>(b)] = static_cast<int32_t>(b);
    const Tensor tiles = constant(tile, TensorShape{1, Hp, Wp, 1});
    const Tensor chans = constant(chan, TensorShape{1, 1, 1, C});
    const Tensor images = constant(image, TensorShape{B, 1, 1, 1});
    const Tensor seg = ((images * i32(gh * gw) + tiles) * i32(C) + chans) * i32(256) + pix;
    Tensor hist = reshape(unsorted_segment_sum(ones_like(v), seg, segments), {B, gh, gw, C, 256});
    const auto area = static_cast<float>(th * tw);
    if (clip_ > 0) {
      // Counts above the limit are spread evenly over the 256 bins.
      const Tensor clipped =
          minimum(hist, scalar(static_cast<float>(clip_ * static_cast<double>(th * tw) / 256.0)));
      hist = clipped + reduce_sum(hist - clipped, {4}, true) / 256.0f;
    }
    const Tensor cdf = cumsum(hist, 4);
    const Tensor cdf_min = reduce_min(cdf, {4}, true);
    Tensor den = area - cdf_min;
    den = where(equal(den, scalar(0)), ones_like(den), den);
    const Tensor lut = clip_by_value((cdf - cdf_min) * 255.0f / den, scalar(0), scalar(255));
    // The tile grid padded by its edge tiles, so that every pixel interpolates between four.
    const auto edge = [](int64_t n) {
      std::vector<int32_t> idx{0};
      for (int64_t i = 0; i < n; ++i) idx.push_back(static_cast<int32_t>(i));
      idx.push_back(static_cast<int32_t>(n - 1));
      return constant(idx, TensorShape{n + 2});
    };
    const Tensor flat = reshape(gather(gather(lut, edge(gh), 1), edge(gw), 2), {-1});
    // Each pixel's tile centres above/below and left/right, and its weights, in float32 as
    // Keras computes them.
    const int64_t stride_x = 256 * C, stride_y = stride_x * (gw + 2),
                  stride_b = stride_y * (gh + 2);
    const auto axis = [](int64_t n, int64_t t, int64_t g, int64_t stride, std::vector<int32_t>& i0,
                         std::vector<int32_t>& i1, std::vector<float>& w) {
      for (int64_t i = 0; i < n; ++i) {
        const float pos =
            (static_cast<float>(i) - static_cast<float>(t) / 2.0f) / static_cast<float>(t) + 1.0f;
        const float f0 = std::floor(pos);
        w.push_back(pos - f0);
        const auto clamp = [g](float f) {
          return static_cast<int64_t>(std::clamp(f, 0.0f, static_cast<float>(g + 1)));
        };
        i0.push_back(static_cast<int32_t>(clamp(f0) * stride));
        i1.push_back(static_cast<int32_t>(clamp(f0 + 1.0f) * stride));
      }
    };
    std::vector<int32_t> y0, y1, x0, x1;
    std::vector<float> wy, wx;
    axis(Hp, th, gh, stride_y, y0, y1, wy);
    axis(Wp, tw, gw, stride_x, x0, x1, wx);
    const Tensor base = images * i32(stride_b) + chans * i32(256) + pix;
    const TensorShape col{1, Hp, 1, 1}, row{1, 1, Wp, 1};
    const Tensor top = base + constant(y0, col), bottom = base + constant(y1, col);
    const Tensor left = constant(x0, row), right = constant(x1, row);
    const Tensor fx = constant(wx, row), fy = constant(wy, col);
    const Tensor upper = gather(flat, top + left) * (1.0f - fx) + gather(flat, top + right) * fx;
    const Tensor lower =
        gather(flat, bottom + left) * (1.0f - fx) + gather(flat, bottom + right) * fx;
    const Tensor out = upper * (1.0f - fy) + lower * fy;
    return rescale(slice(out, {0, 0, 0, 0}, {-1, H, W, -1}), {0.0, 255.0}, vr_);
  }

 private:
  Range vr_;
  double clip_;
  std::pair<int64_t, int64_t> grid_;

 public:
  void keras_config(Json& c) const override {
    c["value_range"] = range_json(vr_);
    c["clip_limit"] = clip_;
    c["tile_grid_size"] = Json::array({grid_.first, grid_.second});
  }
};

// ---- RandomShear ----
class RandomShearImpl final : public AugmentImpl {
 public:
  RandomShearImpl(const Factor& xf, const Factor& yf, layers::RandomTransformOptions o)
      : AugmentImpl("RandomShear", "random_shear", o.name),
        x_(shear_factor("x_factor", xf)),
        y_(shear_factor("y_factor", yf)),
        o_(std::move(o)) {
    const std::string& f = o_.fill_mode;
    TF_CHECK_ARG(f == "reflect" || f == "wrap" || f == "constant" || f == "nearest", "RandomShear",
                 "fill_mode must be \"reflect\", \"wrap\", \"constant\" or \"nearest\", got "
                 "\"{}\"",
                 f);
    TF_CHECK_ARG(o_.interpolation == "bilinear" || o_.interpolation == "nearest", "RandomShear",
                 "interpolation must be \"bilinear\" or \"nearest\", got \"{}\"", o_.interpolation);
  }

 protected:
  Tensor apply(const Tensor& x4) override {
    // Keras' order: the sign, then y, then x; each (batch, 1).
    const Tensor col = reshape(slice(x4, {0, 0, 0, 0}, {-1, 1, 1, 1}), {-1, 1});
    const auto uniform = [&](double lo, double hi) {
      return ::tapeflow::detail::random_uniform_like(col, 0.0, 1.0, float32, o_.seed) *
                 static_cast<float>(hi - lo) +
             static_cast<float>(lo);
    };
    const Tensor sign =
        where(greater(uniform(0.0, 1.0), scalar(0.5)), -ones_like(col), ones_like(col));
    const Tensor sy = uniform(y_.first, y_.second) * sign;
    const Tensor sx = uniform(x_.first, x_.second) * sign;
    const Tensor one = ones_like(sx), z = zeros_like(sx);
    const Tensor t = concat({one, sx, z, sy, one, z, z, z}, 1);
    return image::transform(x4, t, o_.interpolation, o_.fill_mode, o_.fill_value);
  }

 private:
  // RandomShear's own check: every bound in [0, 1]; f gives (-f, f).
  static Range shear_factor(const char* arg, const Factor& f) {
    const auto ok = [](double v) { return v >= 0.0 && v <= 1.0; };
    if (f.single) {
      TF_CHECK_ARG(ok(f.lower), "RandomShear", "{} must be in [0, 1], got {}", arg, f.lower);
      return {-f.lower, f.lower};
    }
    TF_CHECK_ARG(ok(f.lower) && ok(f.upper), "RandomShear",
                 "{} bounds must be in [0, 1], got ({}, {})", arg, f.lower, f.upper);
    return {f.lower, f.upper};
  }
  Range x_, y_;
  layers::RandomTransformOptions o_;

 public:
  void keras_config(Json& c) const override {
    // A symmetric range as the number that made it: Keras 3.15 writes [-f, f], which its own
    // from_config refuses (its pairs must lie in [0, 1]); tapeflow reads both.
    auto factor = [](Range r) { return r.first == -r.second ? Json(r.second) : range_json(r); };
    c["x_factor"] = factor(x_);
    c["y_factor"] = factor(y_);
    c["fill_mode"] = o_.fill_mode;
    c["interpolation"] = o_.interpolation;
    c["seed"] = seed_json(o_.seed);
    c["fill_value"] = o_.fill_value;
  }
};

// ---- MixUp and CutMix ----
// log Gamma(a) draws shaped as `col` (float32; a broadcasts to it, a > 0): Marsaglia and Tsang's
// method with 16 vectorized proposal rounds (each accepted with probability above 0.95, so the
// fallback to the mode is practically never used), boosted by U^(1/a) for a < 1. Kept in logs so
// that tiny shapes (a Beta draw with alpha near 0) do not underflow to 0 / 0.
Tensor random_log_gamma_like(const Tensor& col, const Tensor& a, std::optional<int64_t> seed) {
  const Tensor boost = less(a, scalar(1));
  const Tensor d = where(boost, a + 1.0f, a) - static_cast<float>(1.0 / 3.0);
  const Tensor c = 1.0f / sqrt(d * 9.0f);
  Tensor out = zeros_like(col) + log(d);
  Tensor done = less(col, col);  // all false, shaped as col
  for (int k = 0; k < 16; ++k) {
    const Tensor x = ::tapeflow::detail::random_normal_like(col, 0.0, 1.0, float32, seed);
    const Tensor u = ::tapeflow::detail::random_uniform_like(col, 0.0, 1.0, float32, seed);
    const Tensor t = 1.0f + x * c;
    const Tensor v = t * t * t;
    const Tensor pos = greater(v, scalar(0));
    const Tensor log_v = log(where(pos, v, ones_like(v)));
    const Tensor accept = logical_and(pos, less(log(u), x * x * 0.5f + d - v * d + log_v * d));
    out = where(logical_and(accept, logical_not(done)), log(d) + log_v, out);
    done = logical_or(done, accept);
  }
  // u = 0 would give log 0 in both gammas of a Beta draw: keep it above float32's tiniest normal.
  const Tensor u =
      maximum(::tapeflow::detail::random_uniform_like(col, 0.0, 1.0, float32, seed), scalar(1e-37));
  return out + where(boost, log(u) / a, zeros_like(col));
}

// Beta(a, a) draws shaped as col: G1 / (G1 + G2) = sigmoid(log G1 - log G2).
Tensor random_beta_like(const Tensor& col, const Tensor& a, std::optional<int64_t> seed) {
  const Tensor l1 = random_log_gamma_like(col, a, seed);
  return sigmoid(l1 - random_log_gamma_like(col, a, seed));
}

// A random permutation of the batch (int64, (batch,)): the rank of each image's uniform draw,
// equal draws ordered by position (float32 draws repeat in large batches).
Tensor random_permutation(const Tensor& u) {
  const Tensor flat = reshape(u, {-1});
  const Tensor pos = cumsum(ones_like(flat), 0);  // 1, 2, ... (follows the batch in traces)
  const Tensor uj = reshape(flat, {1, -1}), ui = reshape(flat, {-1, 1});
  const Tensor pj = reshape(pos, {1, -1}), pi = reshape(pos, {-1, 1});
  const Tensor below = logical_or(less(uj, ui), logical_and(equal(uj, ui), less(pj, pi)));
  return cast(reduce_sum(cast(below, float32), {1}), int64);
}

// labels[b] * w[b] + labels[perm[b]] * (1 - w[b]) with w (batch, 1, 1, 1).
Tensor mix_labels(const Tensor& y, const Tensor& w, const Tensor& perm) {
  std::vector<int64_t> shape(static_cast<size_t>(y.rank()), 1);
  shape[0] = -1;
  const Tensor wy = reshape(w, TensorShape(shape));
  return wy * y + (1.0f - wy) * gather(y, perm, 0);
}

// The checks and casts of MixUp's and CutMix's call_with_labels.
std::pair<Tensor, Tensor> image_label_inputs(const char* cls, const Tensor& images,
                                             const Tensor& labels) {
  TF_CHECK_ARG(images.rank() == 3 || images.rank() == 4, cls,
               "expected images of rank 3 or 4, got shape {}", images.shape().to_string());
  TF_CHECK_ARG(labels.rank() >= 1, cls, "labels must have a batch dimension, got shape {}",
               labels.shape().to_string());
  // A single image (rank 3) comes with its own label vector: no batch to compare.
  const int64_t nb = images.rank() == 4 ? images.shape()[0] : None, lb = labels.shape()[0];
  TF_CHECK_ARG(nb == None || lb == None || nb == lb, cls,
               "images {} and labels {} must have the same batch size", images.shape().to_string(),
               labels.shape().to_string());
  return {cast(images, float32), cast(labels, float32)};
}

// ---- AugMix ----
class AugMixImpl final : public AugmentImpl {
 public:
  AugMixImpl(Range vr, int64_t chains, int64_t depth, const Factor& f, double alpha, bool all_ops,
             std::string interpolation, std::optional<int64_t> seed, std::string name)
      : AugmentImpl("AugMix", "aug_mix", std::move(name)),
        vr_(vr),
        chains_(chains),
        depth_(depth),
        range_(base_factor("AugMix", "factor", f, 0.0, 1.0)),
        alpha_(alpha),
        all_ops_(all_ops),
        interpolation_(std::move(interpolation)),
        seed_(seed) {
    TF_CHECK_ARG(chains >= 1 && chains <= 64 && depth >= 0 && depth <= 64, "AugMix",
                 "num_chains must be in [1, 64] and chain_depth in [0, 64], got {} and {}", chains,
                 depth);
    TF_CHECK_ARG(std::isfinite(alpha) && alpha > 0, "AugMix",
                 "alpha must be a positive number, got {}", alpha);
    check_geometric_interpolation("AugMix", interpolation_);
    std::vector<std::string> names = {
        "random_shear", "random_translation", "random_rotation", "random_posterization",
        "solarization", "auto_contrast",      "equalization"};
    if (all_ops)
      for (const char* n : {"random_brightness", "random_color_degeneration", "random_contrast",
                            "random_sharpness"})
        names.emplace_back(n);
    ops_ = augment_ops(names, range_, vr_, interpolation_, seed);
  }

 protected:
  Tensor apply(const Tensor& x4) override {
    const auto a = static_cast<float>(alpha_);
    // Dirichlet(alpha) chain weights (normalised Gamma draws: a softmax of their logs) and a
    // Beta(alpha, alpha) weight for the original images, one each per call, as Keras.
    const Tensor chain_like = zeros({chains_});
    const Tensor w = nn::softmax(random_log_gamma_like(chain_like, scalar(a), seed_));
    const Tensor m = random_beta_like(scalar(0), scalar(a), seed_);
    // Each step of each chain draws one of the layers or none (Keras' random.choice over the
    // layers and None), for the whole batch.
    const Tensor picks = random::uniform({chains_ * std::max<int64_t>(depth_, 1)}, 0,
                                         static_cast<double>(ops_.size() + 1), int32, seed_);
    Tensor mixed;
    for (int64_t c = 0; c < chains_; ++c) {
      Tensor y = x4;
      for (int64_t d = 0; d < depth_; ++d)
        y = apply_drawn(ops_, reshape(slice(picks, {c * depth_ + d}, {1}), {}), y);
      const Tensor part = y * reshape(slice(w, {c}, {1}), {});
      mixed = mixed.defined() ? mixed + part : part;
    }
    const Tensor out = m * x4 + (1.0f - m) * mixed;
    return clip_by_value(out, scalar(std::min(vr_.first, vr_.second)),
                         scalar(std::max(vr_.first, vr_.second)));
  }

 private:
  Range vr_;
  int64_t chains_, depth_;
  Range range_;
  double alpha_;
  bool all_ops_;
  std::string interpolation_;
  std::optional<int64_t> seed_;
  std::vector<Layer> ops_;

 public:
  void keras_config(Json& c) const override {
    c["value_range"] = range_json(vr_);
    c["num_chains"] = chains_;
    c["chain_depth"] = depth_;
    c["factor"] = range_json(range_);
    c["alpha"] = alpha_;
    c["all_ops"] = all_ops_;
    c["interpolation"] = interpolation_;
    c["seed"] = seed_json(seed_);
  }
};

class MixUpImpl final : public AugmentImpl {
 public:
  MixUpImpl(double alpha, std::optional<int64_t> seed, std::string name)
      : AugmentImpl("MixUp", "mix_up", std::move(name)), alpha_(alpha), seed_(seed) {
    TF_CHECK_ARG(std::isfinite(alpha) && alpha > 0.0, "MixUp",
                 "alpha must be a positive number, got {}", alpha);
  }

  std::pair<Tensor, Tensor> mix(const Tensor& images, const Tensor& labels, bool training) {
    const auto [x, y] = image_label_inputs("MixUp", images, labels);
    if (!training) return in_compute_dtype(x, y);
    const Tensor x4 = x.rank() == 3 ? expand_dims(x, 0) : x;
    const auto [lambda, perm] = draws(x4);
    const Tensor mx = lambda * x4 + (1.0f - lambda) * gather(x4, perm, 0);
    return in_compute_dtype(x.rank() == 3 ? squeeze(mx, {0}) : mx, mix_labels(y, lambda, perm));
  }

 protected:
  bool needs_known_hw() const override { return false; }
  Tensor apply(const Tensor& x4) override {
    const auto [lambda, perm] = draws(x4);
    return lambda * x4 + (1.0f - lambda) * gather(x4, perm, 0);
  }

 private:
  // lambda (batch, 1, 1, 1) ~ Beta(alpha, alpha) and a permutation (batch,) int64: the rank of
  // each image's uniform draw among the batch's.
  std::pair<Tensor, Tensor> draws(const Tensor& x4) const {
    const Tensor col = slice(x4, {0, 0, 0, 0}, {-1, 1, 1, 1});
    const Tensor perm = random_permutation(draw(x4, 0.0, 1.0, seed_));
    return {random_beta_like(col, scalar(alpha_), seed_), perm};
  }
  double alpha_;
  std::optional<int64_t> seed_;

 public:
  void keras_config(Json& c) const override {
    c["alpha"] = alpha_;
    c["seed"] = seed_json(seed_);
  }
};

class CutMixImpl final : public AugmentImpl {
 public:
  CutMixImpl(const Factor& f, std::optional<int64_t> seed, std::string name)
      : AugmentImpl("CutMix", "cut_mix", std::move(name)),
        range_(base_factor("CutMix", "factor", f, 0.0, 1.0)),
        seed_(seed) {}

  std::pair<Tensor, Tensor> mix(const Tensor& images, const Tensor& labels, bool training) {
    const auto [x, y] = image_label_inputs("CutMix", images, labels);
    // Keras leaves a single image (rank 3) and its label as they are.
    if (!training || x.rank() == 3) return in_compute_dtype(x, y);
    const Tensor xl = format_.image_to_last(x);
    const Transform t = transformation(xl);
    return in_compute_dtype(format_.image_to_first(where(t.mask, gather(xl, t.perm, 0), xl)),
                            mix_labels(y, t.weight, t.perm));
  }

 protected:
  Tensor apply(const Tensor& x4) override {
    // A single image (batch of one) is its own permutation: left as it is, as Keras.
    const Transform t = transformation(x4);
    return where(t.mask, gather(x4, t.perm, 0), x4);
  }

 private:
  struct Transform {
    Tensor mask, weight, perm;
  };
  // Keras' order: alpha (one per call) + 1e-6, lambda ~ Beta(alpha, alpha) per image, the box's
  // x and y offsets, the permutation. The box has sides sqrt(1 - lambda) * (width, height); the
  // label weight is 1 - its (continuous) area over the image's.
  Transform transformation(const Tensor& x4) const {
    const int64_t H = x4.shape()[1], W = x4.shape()[2];
    const Tensor col = slice(x4, {0, 0, 0, 0}, {-1, 1, 1, 1});
    const Tensor alpha = random::uniform({1, 1, 1, 1}, 0.0, 1.0, float32, seed_) *
                             static_cast<float>(range_.second - range_.first) +
                         static_cast<float>(range_.first + 1e-6);
    const Tensor lambda = random_beta_like(col, alpha, seed_);
    const Tensor ratio = sqrt(1.0f - lambda);
    const auto bounds = [&](int64_t n) {
      const Tensor len = ratio * static_cast<float>(n);
      const Tensor start = draw(x4, 0.0, 1.0, seed_) * (static_cast<float>(n) - len);
      return std::pair{start, start + len};
    };
    const auto [x0, x1] = bounds(W);
    const auto [y0, y1] = bounds(H);
    const Tensor perm = random_permutation(draw(x4, 0.0, 1.0, seed_));
    const Tensor gx = reshape(range(0.0, static_cast<double>(W), 1.0, float32), {1, 1, W, 1});
    const Tensor gy = reshape(range(0.0, static_cast<double>(H), 1.0, float32), {1, H, 1, 1});
    const Tensor mask = logical_and(logical_and(greater_equal(gx, x0), less(gx, x1)),
                                    logical_and(greater_equal(gy, y0), less(gy, y1)));
    const Tensor weight = 1.0f - (x1 - x0) * (y1 - y0) / static_cast<float>(W * H);
    return {mask, weight, perm};
  }
  Range range_;
  std::optional<int64_t> seed_;

 public:
  void keras_config(Json& c) const override {
    c["factor"] = range_json(range_);
    c["seed"] = seed_json(seed_);
  }
};

}  // namespace

namespace layers {

Solarization::Solarization(Factor addition_factor, Factor threshold_factor,
                           std::pair<double, double> value_range, std::optional<int64_t> seed,
                           std::string name)
    : Layer(std::make_shared<SolarizationImpl>(addition_factor, threshold_factor, value_range, seed,
                                               std::move(name))) {}
RandomPerspective::RandomPerspective(Factor factor, double scale, std::string interpolation,
                                     double fill_value, std::optional<int64_t> seed,
                                     std::string name)
    : Layer(std::make_shared<RandomPerspectiveImpl>(factor, scale, std::move(interpolation),
                                                    fill_value, seed, std::move(name))) {}
RandomColorJitter::RandomColorJitter(RandomColorJitterOptions options)
    : Layer(std::make_shared<RandomColorJitterImpl>(std::move(options))) {}
Pipeline::Pipeline(std::vector<Layer> layers, std::string name)
    : Layer(std::make_shared<PipelineImpl>(std::move(layers), std::move(name))) {}
std::vector<Layer> Pipeline::layers() const {
  return impl().sublayers();
}
RandomInvert::RandomInvert(Factor factor, std::pair<double, double> value_range,
                           std::optional<int64_t> seed, std::string name)
    : Layer(std::make_shared<RandomInvertImpl>(factor, value_range, seed, std::move(name))) {}
RandomPosterization::RandomPosterization(Factor factor, std::pair<double, double> value_range,
                                         std::optional<int64_t> seed, std::string name)
    : Layer(std::make_shared<RandomPosterizationImpl>(factor, value_range, seed, std::move(name))) {
}
RandomErasing::RandomErasing(Factor factor, Factor scale, std::vector<double> fill_value,
                             std::pair<double, double> value_range, std::optional<int64_t> seed,
                             std::string name)
    : Layer(std::make_shared<RandomErasingImpl>(factor, scale, std::move(fill_value), value_range,
                                                seed, std::move(name))) {}
RandomGaussianBlur::RandomGaussianBlur(Factor factor, int64_t kernel_size, Factor sigma,
                                       std::pair<double, double> value_range,
                                       std::optional<int64_t> seed, std::string name)
    : Layer(std::make_shared<RandomGaussianBlurImpl>(factor, kernel_size, sigma, value_range, seed,
                                                     std::move(name))) {}
AutoContrast::AutoContrast(std::pair<double, double> value_range, std::string name)
    : Layer(std::make_shared<AutoContrastImpl>(value_range, std::move(name))) {}
RandomSharpness::RandomSharpness(Factor factor, std::pair<double, double> value_range,
                                 std::optional<int64_t> seed, std::string name)
    : Layer(std::make_shared<RandomSharpnessImpl>(factor, value_range, seed, std::move(name))) {}
RandomColorDegeneration::RandomColorDegeneration(Factor factor,
                                                 std::pair<double, double> value_range,
                                                 std::optional<int64_t> seed, std::string name)
    : Layer(std::make_shared<RandomColorDegenerationImpl>(factor, value_range, seed,
                                                          std::move(name))) {}
Equalization::Equalization(std::pair<double, double> value_range, int64_t bins, std::string name)
    : Layer(std::make_shared<EqualizationImpl>(value_range, bins, std::move(name))) {}
AugMix::AugMix(std::pair<double, double> value_range, int64_t num_chains, int64_t chain_depth,
               Factor factor, double alpha, bool all_ops, std::string interpolation,
               std::optional<int64_t> seed, std::string name)
    : Layer(std::make_shared<AugMixImpl>(value_range, num_chains, chain_depth, factor, alpha,
                                         all_ops, std::move(interpolation), seed,
                                         std::move(name))) {}
RandAugment::RandAugment(std::pair<double, double> value_range, int64_t num_ops, Factor factor,
                         std::string interpolation, std::optional<int64_t> seed, std::string name)
    : Layer(std::make_shared<RandAugmentImpl>(value_range, num_ops, factor,
                                              std::move(interpolation), seed, std::move(name))) {}
RandomElasticTransform::RandomElasticTransform(Factor factor, Factor scale,
                                               std::string interpolation, std::string fill_mode,
                                               double fill_value,
                                               std::pair<double, double> value_range,
                                               std::optional<int64_t> seed, std::string name)
    : Layer(std::make_shared<RandomElasticTransformImpl>(factor, scale, std::move(interpolation),
                                                         std::move(fill_mode), fill_value,
                                                         value_range, seed, std::move(name))) {}
ContrastLimitedAdaptiveHistogramEqualization::ContrastLimitedAdaptiveHistogramEqualization(
    std::pair<double, double> value_range, double clip_limit,
    std::pair<int64_t, int64_t> tile_grid_size, std::string name)
    : Layer(std::make_shared<ClaheImpl>(value_range, clip_limit, tile_grid_size, std::move(name))) {
}
RandomShear::RandomShear(Factor x_factor, Factor y_factor, RandomTransformOptions options)
    : Layer(std::make_shared<RandomShearImpl>(x_factor, y_factor, std::move(options))) {}
MixUp::MixUp(double alpha, std::optional<int64_t> seed, std::string name)
    : Layer(std::make_shared<MixUpImpl>(alpha, seed, std::move(name))) {}
std::pair<Tensor, Tensor> MixUp::call_with_labels(const Tensor& images, const Tensor& labels,
                                                  bool training) const {
  auto* p = dynamic_cast<MixUpImpl*>(&impl());
  TF_CHECK_T(FailedPreconditionError, p != nullptr, "MixUp",
             "this MixUp handle refers to layer \"{}\" ({}), which is not a MixUp", impl().name(),
             impl().class_name());
  return p->mix(images, labels, training);
}
CutMix::CutMix(Factor factor, std::optional<int64_t> seed, std::string name)
    : Layer(std::make_shared<CutMixImpl>(factor, seed, std::move(name))) {}
std::pair<Tensor, Tensor> CutMix::call_with_labels(const Tensor& images, const Tensor& labels,
                                                   bool training) const {
  auto* p = dynamic_cast<CutMixImpl*>(&impl());
  TF_CHECK_T(FailedPreconditionError, p != nullptr, "CutMix",
             "this CutMix handle refers to layer \"{}\" ({}), which is not a CutMix", impl().name(),
             impl().class_name());
  return p->mix(images, labels, training);
}

}  // namespace layers

namespace detail::layer_options {
bool augment_config(const LayerImpl& layer, nlohmann::ordered_json& config) {
  const auto* p = dynamic_cast<const AugmentImpl*>(&layer);
  if (p == nullptr) return false;
  p->keras_config(config);
  return true;
}
}  // namespace detail::layer_options

}  // namespace tapeflow::keras
