// The layers of keras/layers_preprocessing.h. Each is a LayerImpl composed of tf::image and
// random ops; the random layers draw their factors with tensor shapes read from the input
// (random_uniform_like), so a graph traced for a None batch serves every batch size.
#include "keras/layers_preprocessing.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/check.h"
#include "core/error.h"
#include "keras/data_format.h"
#include "keras/layer_handle.h"
#include "keras/serialization_access_sequence.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/image.h"
#include "ops/image_color.h"
#include "ops/movement.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/unary.h"

namespace tapeflow::keras {

namespace detail {

// The target's aspect ratio cut from the centre, as Keras' crop_to_aspect_ratio (and
// smart_resize, which skips the max(.., 1)).
Tensor crop_to_aspect(const Tensor& x, int64_t th, int64_t tw, bool at_least_one) {
  const int h = x.rank() - 3;
  const int64_t H = x.shape()[h], W = x.shape()[h + 1];
  int64_t ch = std::min<int64_t>(
      H, static_cast<int64_t>(static_cast<float>(W * th) / static_cast<float>(tw)));
  int64_t cw = std::min<int64_t>(
      W, static_cast<int64_t>(static_cast<float>(H * tw) / static_cast<float>(th)));
  if (at_least_one) {
    ch = std::max<int64_t>(ch, 1);
    cw = std::max<int64_t>(cw, 1);
  }
  const auto hs = static_cast<int64_t>(static_cast<float>(H - ch) / 2);
  const auto ws = static_cast<int64_t>(static_cast<float>(W - cw) / 2);
  return image::crop_to_bounding_box(x, hs, ws, ch, cw);
}

}  // namespace detail

namespace {

using detail::LayerImpl;

// Base of the image layers: rank-3 or rank-4 inputs with known height and width in the layer's
// data_format (channels_last unless made under backend::image_data_format() "channels_first" or
// loaded from such a config); the layers compute on channels_last images (call_last,
// output_shape_last) between the moves.
class ImageLayerImpl : public LayerImpl, public detail::ImageFormat {
 public:
  using LayerImpl::LayerImpl;
  // The options the layer was made with, for its Keras config (keras/serialization_sequence.cpp).
  virtual void options(detail::layer_options::ImageLayerConfig& c) const = 0;
  TensorShape compute_output_shape(const TensorShape& s) const final {
    return format_.image_to_first(output_shape_last(format_.image_to_last(s)));
  }

 protected:
  void check_input(const TensorShape& s) const override {
    LayerImpl::check_input(s);
    if (const std::string m = format_.image_mismatch(s, true); !m.empty()) incompatible(s, m);
  }
  Tensor call(const Tensor& x, bool training) final {
    return format_.image_to_first(call_last(format_.image_to_last(x), training));
  }
  // The layer on channels_last images (rank 3 or 4).
  virtual Tensor call_last(const Tensor& x, bool training) = 0;
  virtual TensorShape output_shape_last(const TensorShape& s) const { return s; }
  // As a rank-4 batch: x itself, or a batch of one.
  static Tensor as_batch(const Tensor& x) { return x.rank() == 3 ? expand_dims(x, 0) : x; }
  static Tensor like_input(const Tensor& y, const Tensor& x) {
    return x.rank() == 3 ? squeeze(y, {0}) : y;
  }
  // A (batch, 1) tensor whose batch dimension is read from x (rank 4) when a traced graph runs.
  static Tensor batch_column(const Tensor& x4) {
    return reshape(slice(x4, {0, 0, 0, 0}, {-1, 1, 1, 1}), TensorShape({-1, 1}));
  }
  // lower + (upper - lower) * u with u uniform in [0, 1) shaped as `like` (float32): a draw
  // that gives exactly `lower` when the range is empty, as Keras' uniform(lower, lower).
  static Tensor draw(const Tensor& like, double lower, double upper, std::optional<int64_t> seed) {
    const Tensor u = ::tapeflow::detail::random_uniform_like(like, 0.0, 1.0, float32, seed);
    return u * static_cast<float>(upper - lower) + static_cast<float>(lower);
  }
};

TensorShape with_size(const TensorShape& s, int64_t h, int64_t w) {
  TensorShape o = s;
  if (o.rank() >= 3) {
    o[o.rank() - 3] = h;
    o[o.rank() - 2] = w;
  }
  return o;
}

// ---- Resizing ----
class ResizingImpl final : public ImageLayerImpl {
 public:
  ResizingImpl(int64_t h, int64_t w, layers::ResizingOptions o)
      : ImageLayerImpl("Resizing", "resizing", o.name), h_(h), w_(w), o_(std::move(o)) {
    TF_CHECK_ARG(h > 0 && w > 0, "Resizing", "height and width must be positive, got ({}, {})", h,
                 w);
    const std::string& m = o_.interpolation;
    TF_CHECK_ARG(m == "bilinear" || m == "nearest" || m == "bicubic" || m == "area" ||
                     m == "lanczos3" || m == "lanczos5",
                 "Resizing",
                 "interpolation must be \"bilinear\", \"nearest\", \"bicubic\", \"area\", "
                 "\"lanczos3\" or \"lanczos5\", got \"{}\"",
                 m);
    TF_CHECK_ARG(o_.fill_mode == "constant", "Resizing",
                 "fill_mode must be \"constant\" (the only one Keras offers), got \"{}\"",
                 o_.fill_mode);
    TF_CHECK_ARG(!(o_.crop_to_aspect_ratio && o_.pad_to_aspect_ratio), "Resizing",
                 "only one of crop_to_aspect_ratio and pad_to_aspect_ratio can be true");
  }

 protected:
  // Integer images keep their dtype (rounded and saturated after the resize, as Keras).
  bool casts_all_inputs() const override { return false; }
  TensorShape output_shape_last(const TensorShape& s) const override {
    return with_size(s, h_, w_);
  }
  Tensor call_last(const Tensor& x, bool) override {
    Tensor y = x;
    if (o_.crop_to_aspect_ratio) y = detail::crop_to_aspect(y, h_, w_, true);
    if (o_.pad_to_aspect_ratio) y = pad_to_aspect(y);
    y = image::resize(y, {h_, w_}, o_.interpolation, o_.antialias);
    if (y.dtype() == x.dtype()) return y;
    if (is_floating(x.dtype())) return cast(y, x.dtype());
    // Keras' _saturate_cast: round, clip to the integer dtype's range, cast.
    const double lo = x.dtype() == uint8 ? 0.0 : (x.dtype() == int32 ? -2147483648.0 : -9.2e18);
    const double hi = x.dtype() == uint8 ? 255.0 : (x.dtype() == int32 ? 2147483647.0 : 9.2e18);
    y = clip_by_value(round(y), constant(Tensor(static_cast<float>(lo))),
                      constant(Tensor(static_cast<float>(hi))));
    return cast(y, x.dtype());
  }

 private:
  // Keras pads each side by the same int(float(target - size) / 2) rows or columns.
  Tensor pad_to_aspect(const Tensor& x) const {
    const int h = x.rank() - 3;
    const int64_t H = x.shape()[h], W = x.shape()[h + 1];
    const int64_t ph = std::max<int64_t>(
        H, static_cast<int64_t>(static_cast<float>(W * h_) / static_cast<float>(w_)));
    const int64_t pw = std::max<int64_t>(
        W, static_cast<int64_t>(static_cast<float>(H * w_) / static_cast<float>(h_)));
    const auto hs = static_cast<int64_t>(static_cast<float>(ph - H) / 2);
    const auto ws = static_cast<int64_t>(static_cast<float>(pw - W) / 2);
    if (hs == 0 && ws == 0) return x;
    std::vector<std::pair<int64_t, int64_t>> p(static_cast<size_t>(x.rank()), {0, 0});
    p[static_cast<size_t>(h)] = {hs, hs};
    p[static_cast<size_t>(h + 1)] = {ws, ws};
    return pad(x, p, o_.fill_value);
  }
  int64_t h_, w_;
  layers::ResizingOptions o_;

 public:
  void options(detail::layer_options::ImageLayerConfig& c) const override {
    c.height = h_;
    c.width = w_;
    c.resizing = o_;
  }
};

// ---- CenterCrop ----
class CenterCropImpl final : public ImageLayerImpl {
 public:
  CenterCropImpl(int64_t h, int64_t w, std::string name)
      : ImageLayerImpl("CenterCrop", "center_crop", std::move(name)), h_(h), w_(w) {
    TF_CHECK_ARG(h > 0 && w > 0, "CenterCrop", "height and width must be positive, got ({}, {})", h,
                 w);
  }

 protected:
  TensorShape output_shape_last(const TensorShape& s) const override {
    return with_size(s, h_, w_);
  }
  Tensor call_last(const Tensor& x, bool) override {
    const int h = x.rank() - 3;
    const int64_t H = x.shape()[h], W = x.shape()[h + 1];
    if (H >= h_ && W >= w_)
      return image::crop_to_bounding_box(x, (H - h_) / 2, (W - w_) / 2, h_, w_);
    return image::resize(detail::crop_to_aspect(x, h_, w_, false), {h_, w_});
  }

 public:
  void options(detail::layer_options::ImageLayerConfig& c) const override {
    c.height = h_;
    c.width = w_;
  }

 private:
  int64_t h_, w_;
};

// ---- RandomCrop ----
class RandomCropImpl final : public ImageLayerImpl {
 public:
  RandomCropImpl(int64_t h, int64_t w, std::optional<int64_t> seed, std::string name)
      : ImageLayerImpl("RandomCrop", "random_crop", std::move(name)), h_(h), w_(w), seed_(seed) {
    TF_CHECK_ARG(h > 0 && w > 0, "RandomCrop", "height and width must be positive, got ({}, {})", h,
                 w);
  }

 protected:
  TensorShape output_shape_last(const TensorShape& s) const override {
    return with_size(s, h_, w_);
  }
  Tensor call_last(const Tensor& x, bool training) override {
    if (!training) return x;
    const int h = x.rank() - 3;
    const int64_t H = x.shape()[h], W = x.shape()[h + 1];
    if (H > h_ && W > w_) {
      // One offset for the batch, as Keras; gathered by index tensors so a traced graph draws
      // a new offset on every run.
      const Tensor one = zeros({1});
      const Tensor hs = cast(floor(draw(one, 0.0, static_cast<double>(H - h_ + 1), seed_)), int64);
      const Tensor ws = cast(floor(draw(one, 0.0, static_cast<double>(W - w_ + 1), seed_)), int64);
      Tensor y = gather(x, hs + range(0.0, static_cast<double>(h_), 1.0, int64), h);
      return gather(y, ws + range(0.0, static_cast<double>(w_), 1.0, int64), h + 1);
    }
    // Keras 3.15: the offsets of the centred aspect-ratio box, then a window of the target's size
    // from there (cut short by the image's edge), resized to the target.
    const int64_t ch = std::max<int64_t>(
        std::min<int64_t>(H, static_cast<int64_t>(static_cast<double>(W * h_) / w_)), 1);
    const int64_t cw = std::max<int64_t>(
        std::min<int64_t>(W, static_cast<int64_t>(static_cast<double>(H * w_) / h_)), 1);
    const int64_t h0 = (H - ch) / 2, w0 = (W - cw) / 2;
    std::vector<int64_t> begin(static_cast<size_t>(x.rank()), 0), size(begin.size(), -1);
    begin[static_cast<size_t>(h)] = h0;
    begin[static_cast<size_t>(h + 1)] = w0;
    size[static_cast<size_t>(h)] = std::min(h_, H - h0);
    size[static_cast<size_t>(h + 1)] = std::min(w_, W - w0);
    Tensor y = slice(x, begin, size);
    if (y.shape()[h] != h_ || y.shape()[h + 1] != w_) y = image::resize(y, {h_, w_});
    return y;
  }

 private:
  int64_t h_, w_;
  std::optional<int64_t> seed_;

 public:
  void options(detail::layer_options::ImageLayerConfig& c) const override {
    c.height = h_;
    c.width = w_;
    c.seed = seed_;
  }
};

// ---- RandomFlip ----
class RandomFlipImpl final : public ImageLayerImpl {
 public:
  RandomFlipImpl(std::string mode, std::optional<int64_t> seed, std::string name)
      : ImageLayerImpl("RandomFlip", "random_flip", std::move(name)), seed_(seed) {
    horizontal_ = mode == "horizontal" || mode == "horizontal_and_vertical";
    vertical_ = mode == "vertical" || mode == "horizontal_and_vertical";
    TF_CHECK_ARG(horizontal_ || vertical_, "RandomFlip",
                 "mode must be \"horizontal\", \"vertical\" or \"horizontal_and_vertical\", got "
                 "\"{}\"",
                 mode);
  }

 protected:
  Tensor call_last(const Tensor& x, bool training) override {
    if (!training || x.shape().known_elements() == 0) return x;  // no pixels: nothing to do
    const Tensor x4 = as_batch(x);
    const Tensor flips =
        less_equal(draw(slice(x4, {0, 0, 0, 0}, {-1, 1, 1, 1}), 0.0, 1.0, seed_), 0.5f);
    Tensor y = x4;
    if (horizontal_) y = where(flips, image::flip_left_right(y), y);
    if (vertical_) y = where(flips, image::flip_up_down(y), y);
    return like_input(y, x);
  }

 private:
  std::optional<int64_t> seed_;
  bool horizontal_ = false, vertical_ = false;

 public:
  void options(detail::layer_options::ImageLayerConfig& c) const override {
    c.seed = seed_;
    c.mode = horizontal_ && vertical_ ? "horizontal_and_vertical"
             : horizontal_            ? "horizontal"
                                      : "vertical";
  }
};

// ---- RandomRotation, RandomZoom, RandomTranslation ----
// Shared: options, checks, and the transform by per-image (batch, 8) parameters.
class RandomTransformImpl : public ImageLayerImpl {
 public:
  RandomTransformImpl(const char* cls, const char* generic, layers::RandomTransformOptions o)
      : ImageLayerImpl(cls, generic, o.name), o_(std::move(o)) {
    const std::string& f = o_.fill_mode;
    TF_CHECK_ARG(f == "reflect" || f == "wrap" || f == "constant" || f == "nearest", cls,
                 "fill_mode must be \"reflect\", \"wrap\", \"constant\" or \"nearest\", got "
                 "\"{}\"",
                 f);
    TF_CHECK_ARG(o_.interpolation == "bilinear" || o_.interpolation == "nearest", cls,
                 "interpolation must be \"bilinear\" or \"nearest\", got \"{}\"", o_.interpolation);
  }

 protected:
  Tensor call_last(const Tensor& x, bool training) override {
    if (!training || x.shape().known_elements() == 0) return x;  // no pixels: nothing to do
    const Tensor x4 = as_batch(x);
    const Tensor col = batch_column(x4);
    const Tensor t =
        params(col, static_cast<double>(x4.shape()[1]), static_cast<double>(x4.shape()[2]));
    return like_input(image::transform(x4, t, o_.interpolation, o_.fill_mode, o_.fill_value), x);
  }
  // The (batch, 8) transforms; col is a (batch, 1) float32 tensor to draw like.
  virtual Tensor params(const Tensor& col, double height, double width) const = 0;
  static Tensor row(const std::vector<Tensor>& columns) { return concat(columns, 1); }
  layers::RandomTransformOptions o_;
};

// Keras' factor checks: a number f gives (-|f|, |f|); every bound in [lo, hi] (lo open when
// lo_open).
std::pair<double, double> symmetric_range(const char* cls, const char* arg, const layers::Factor& f,
                                          double lo, bool lo_open) {
  const auto ok = [&](double v) { return (lo_open ? v > lo : v >= lo) && v <= 1.0; };
  if (f.single) {
    TF_CHECK_ARG(ok(f.lower) && ok(-std::abs(f.lower)), cls, "{} must be in {}{}, 1], got {}", arg,
                 lo_open ? "(" : "[", lo, f.lower);
    return {-std::abs(f.lower), std::abs(f.lower)};
  }
  TF_CHECK_ARG(ok(f.lower) && ok(f.upper), cls, "{} bounds must be in {}{}, 1], got ({}, {})", arg,
               lo_open ? "(" : "[", lo, f.lower, f.upper);
  return {f.lower, f.upper};
}

class RandomRotationImpl final : public RandomTransformImpl {
 public:
  RandomRotationImpl(const layers::Factor& f, layers::RandomTransformOptions o)
      : RandomTransformImpl("RandomRotation", "random_rotation", std::move(o)),
        range_(symmetric_range("RandomRotation", "factor", f, -1.0, false)) {}

 protected:
  // Keras' _compute_affine_matrix with scale 1, no shear or translation, about the centre
  // ((width - 1) / 2, (height - 1) / 2).
  Tensor params(const Tensor& col, double height, double width) const override {
    const Tensor deg = draw(col, range_.first * 360.0, range_.second * 360.0, o_.seed);
    const Tensor angle = deg * static_cast<float>(std::numbers::pi / 180.0);
    const Tensor c = cos(angle), s = sin(angle);
    const auto cx = static_cast<float>(0.5 * (width - 1)),
               cy = static_cast<float>(0.5 * (height - 1));
    const Tensor a1 = -s;
    const Tensor a2 = cx - c * cx - a1 * cy;
    const Tensor b2 = cy - s * cx - c * cy;
    const Tensor z = zeros_like(c);
    return row({c, a1, a2, s, c, b2, z, z});
  }

 private:
  std::pair<double, double> range_;

 public:
  void options(detail::layer_options::ImageLayerConfig& c) const override {
    c.transform = o_;
    c.factor = range_;
  }
};

class RandomZoomImpl final : public RandomTransformImpl {
 public:
  RandomZoomImpl(const layers::Factor& hf, const std::optional<layers::Factor>& wf,
                 layers::RandomTransformOptions o)
      : RandomTransformImpl("RandomZoom", "random_zoom", std::move(o)),
        h_(symmetric_range("RandomZoom", "height_factor", hf, -1.0, true)) {
    if (wf) w_ = symmetric_range("RandomZoom", "width_factor", *wf, -1.0, true);
  }

 protected:
  Tensor params(const Tensor& col, double height, double width) const override {
    const Tensor hz = draw(col, 1.0 + h_.first, 1.0 + h_.second, o_.seed);
    const Tensor wz = w_ ? draw(col, 1.0 + w_->first, 1.0 + w_->second, o_.seed) : hz;
    const Tensor z = zeros_like(hz);
    const auto hw = static_cast<float>((width - 1.0) / 2.0);
    const auto hh = static_cast<float>((height - 1.0) / 2.0);
    return row({wz, z, (1.0f - wz) * hw, z, hz, (1.0f - hz) * hh, z, z});
  }

 private:
  std::pair<double, double> h_;
  std::optional<std::pair<double, double>> w_;

 public:
  void options(detail::layer_options::ImageLayerConfig& c) const override {
    c.transform = o_;
    c.factor = h_;
    c.width_factor = w_;
  }
};

class RandomTranslationImpl final : public RandomTransformImpl {
 public:
  RandomTranslationImpl(const layers::Factor& hf, const layers::Factor& wf,
                        layers::RandomTransformOptions o)
      : RandomTransformImpl("RandomTranslation", "random_translation", std::move(o)),
        h_(symmetric_range("RandomTranslation", "height_factor", hf, -1.0, false)),
        w_(symmetric_range("RandomTranslation", "width_factor", wf, -1.0, false)) {}

 protected:
  Tensor params(const Tensor& col, double height, double width) const override {
    const Tensor ht = draw(col, h_.first, h_.second, o_.seed) * static_cast<float>(height);
    const Tensor wt = draw(col, w_.first, w_.second, o_.seed) * static_cast<float>(width);
    const Tensor z = zeros_like(ht), one = ones_like(ht);
    return row({one, z, -wt, z, one, -ht, z, z});
  }

 private:
  std::pair<double, double> h_, w_;

 public:
  void options(detail::layer_options::ImageLayerConfig& c) const override {
    c.transform = o_;
    c.factor = h_;
    c.width_factor = w_;
  }
};

// ---- RandomContrast and RandomBrightness ----
std::pair<double, double> sorted_range(const char* cls, std::pair<double, double> r) {
  TF_CHECK_ARG(std::isfinite(r.first) && std::isfinite(r.second), cls,
               "value_range must be finite, got ({}, {})", r.first, r.second);
  if (r.first > r.second) std::swap(r.first, r.second);
  return r;
}

class RandomContrastImpl final : public ImageLayerImpl {
 public:
  RandomContrastImpl(const layers::Factor& f, std::pair<double, double> vr,
                     std::optional<int64_t> seed, std::string name)
      : ImageLayerImpl("RandomContrast", "random_contrast", std::move(name)),
        vr_(sorted_range("RandomContrast", vr)),
        seed_(seed) {
    // Keras' bounds for this layer are [0, 1]; a single f becomes (max(-f, 0), f) = (0, f).
    if (f.single) {
      TF_CHECK_ARG(f.lower >= 0.0 && f.lower <= 1.0, "RandomContrast",
                   "factor must be in [0, 1], got {}", f.lower);
      range_ = {0.0, f.lower};
    } else {
      TF_CHECK_ARG(f.lower <= 1.0 && f.upper >= 0.0, "RandomContrast",
                   "factor bounds must overlap [0, 1], got ({}, {})", f.lower, f.upper);
      range_ = {f.lower, f.upper};
    }
  }

 protected:
  Tensor call_last(const Tensor& x, bool training) override {
    if (!training || x.shape().known_elements() == 0) return x;  // no pixels: nothing to do
    const Tensor x4 = as_batch(x);
    const Tensor c = draw(slice(x4, {0, 0, 0, 0}, {-1, 1, 1, 1}), 1.0 - range_.first,
                          1.0 + range_.second, seed_);
    const Tensor mean = reduce_mean(x4, {1, 2}, true);
    const Tensor y = (x4 - mean) * c + mean;
    return like_input(clip_by_value(y, constant(Tensor(static_cast<float>(vr_.first))),
                                    constant(Tensor(static_cast<float>(vr_.second)))),
                      x);
  }

 private:
  std::pair<double, double> vr_, range_;
  std::optional<int64_t> seed_;

 public:
  void options(detail::layer_options::ImageLayerConfig& c) const override {
    c.factor = range_;
    c.value_range = vr_;
    c.seed = seed_;
  }
};

class RandomBrightnessImpl final : public ImageLayerImpl {
 public:
  RandomBrightnessImpl(const layers::Factor& f, std::pair<double, double> vr,
                       std::optional<int64_t> seed, std::string name)
      : ImageLayerImpl("RandomBrightness", "random_brightness", std::move(name)),
        vr_(sorted_range("RandomBrightness", vr)),
        range_(symmetric_range("RandomBrightness", "factor", f, -1.0, false)),
        seed_(seed) {}

 protected:
  Tensor call_last(const Tensor& x, bool training) override {
    if (!training || x.shape().known_elements() == 0) return x;  // no pixels: nothing to do
    const Tensor x4 = as_batch(x);
    const Tensor delta =
        draw(slice(x4, {0, 0, 0, 0}, {-1, 1, 1, 1}), range_.first, range_.second, seed_) *
        static_cast<float>(vr_.second - vr_.first);
    return like_input(clip_by_value(x4 + delta, constant(Tensor(static_cast<float>(vr_.first))),
                                    constant(Tensor(static_cast<float>(vr_.second)))),
                      x);
  }

 private:
  std::pair<double, double> vr_, range_;
  std::optional<int64_t> seed_;

 public:
  void options(detail::layer_options::ImageLayerConfig& c) const override {
    c.factor = range_;
    c.value_range = vr_;
    c.seed = seed_;
  }
};

// ---- RandomGrayscale ----
class RandomGrayscaleImpl final : public ImageLayerImpl {
 public:
  RandomGrayscaleImpl(double factor, std::optional<int64_t> seed, std::string name)
      : ImageLayerImpl("RandomGrayscale", "random_grayscale", std::move(name)),
        factor_(factor),
        seed_(seed) {
    TF_CHECK_ARG(factor >= 0.0 && factor <= 1.0, "RandomGrayscale",
                 "factor must be between 0 and 1, got {}", factor);
  }

 protected:
  Tensor call_last(const Tensor& x, bool training) override {
    if (!training || x.shape().known_elements() == 0) return x;  // no pixels: nothing to do
    TF_CHECK_ARG(x.shape()[x.rank() - 1] == 3, "RandomGrayscale",
                 "inputs must have 3 channels (RGB) in the last axis, got shape {}",
                 x.shape().to_string());
    const Tensor x4 = as_batch(x);
    // One draw per image; the grey value is repeated in the three channels.
    const Tensor u = draw(slice(x4, {0, 0, 0, 0}, {-1, 1, 1, 1}), 0.0, 1.0, seed_);
    const Tensor gray = image::rgb_to_grayscale(x4);
    const Tensor apply = less(u, constant(Tensor(static_cast<float>(factor_))));
    return like_input(where(apply, concat({gray, gray, gray}, 3), x4), x);
  }

 private:
  double factor_;
  std::optional<int64_t> seed_;

 public:
  void options(detail::layer_options::ImageLayerConfig& c) const override {
    c.grayscale_factor = factor_;
    c.seed = seed_;
  }
};

// ---- RandomSaturation ----
class RandomSaturationImpl final : public ImageLayerImpl {
 public:
  RandomSaturationImpl(const layers::Factor& f, std::pair<double, double> vr,
                       std::optional<int64_t> seed, std::string name)
      : ImageLayerImpl("RandomSaturation", "random_saturation", std::move(name)),
        vr_(sorted_range("RandomSaturation", vr)),
        range_(symmetric_range("RandomSaturation", "factor", f, -1.0, false)),
        seed_(seed) {}

 protected:
  Tensor call_last(const Tensor& x, bool training) override {
    if (!training || x.shape().known_elements() == 0) return x;  // no pixels: nothing to do
    TF_CHECK_ARG(x.shape()[x.rank() - 1] == 3, "RandomSaturation",
                 "inputs must have 3 channels (RGB) in the last axis, got shape {}",
                 x.shape().to_string());
    const Tensor x4 = as_batch(x);
    // Keras 3.15: a draw u per image becomes the multiplier u / (1 - u + epsilon) of the HSV
    // saturation, which is then clipped to value_range (not to [0, 1]) on the unscaled image.
    const Tensor u =
        draw(slice(x4, {0, 0, 0, 0}, {-1, 1, 1, 1}), range_.first, range_.second, seed_);
    const Tensor m = u / (1.0f - u + 1e-7f);
    const Tensor hsv = image::rgb_to_hsv(x4);
    const auto ch = [&](int64_t c) { return slice(hsv, {0, 0, 0, c}, {-1, -1, -1, 1}); };
    const Tensor sat = clip_by_value(ch(1) * m, constant(Tensor(static_cast<float>(vr_.first))),
                                     constant(Tensor(static_cast<float>(vr_.second))));
    return like_input(image::hsv_to_rgb(concat({ch(0), sat, ch(2)}, 3)), x);
  }

 private:
  std::pair<double, double> vr_, range_;
  std::optional<int64_t> seed_;

 public:
  void options(detail::layer_options::ImageLayerConfig& c) const override {
    c.factor = range_;
    c.value_range = vr_;
    c.seed = seed_;
  }
};

// ---- RandomHue ----
class RandomHueImpl final : public ImageLayerImpl {
 public:
  RandomHueImpl(const layers::Factor& f, std::pair<double, double> vr, std::optional<int64_t> seed,
                std::string name)
      : ImageLayerImpl("RandomHue", "random_hue", std::move(name)),
        vr_(sorted_range("RandomHue", vr)),
        seed_(seed) {
    // Keras' factor bounds for RandomHue are [0, 1]: f gives (0, |f|).
    if (f.single) {
      TF_CHECK_ARG(f.lower >= 0.0 && f.lower <= 1.0, "RandomHue",
                   "factor must be in [0, 1], got {}", f.lower);
      range_ = {0.0, std::abs(f.lower)};
    } else {
      TF_CHECK_ARG(f.lower <= 1.0 && f.upper >= 0.0, "RandomHue",
                   "factor bounds must overlap [0, 1], got ({}, {})", f.lower, f.upper);
      range_ = {f.lower, f.upper};
    }
  }

 protected:
  Tensor call_last(const Tensor& x, bool training) override {
    if (!training || x.shape().known_elements() == 0) return x;  // no pixels: nothing to do
    TF_CHECK_ARG(x.shape()[x.rank() - 1] == 3, "RandomHue",
                 "inputs must have 3 channels (RGB) in the last axis, got shape {}",
                 x.shape().to_string());
    const Tensor x4 = as_batch(x);
    // Keras 3.15: per image a sign (-1 where a first draw is > 0.5) times a factor from the
    // range, halved, shifts the hue of the image scaled to [0, 1]; the result is clipped to
    // [0, 1] and scaled back to value_range.
    const Tensor col = slice(x4, {0, 0, 0, 0}, {-1, 1, 1, 1});
    const Tensor flip = draw(col, 0.0, 1.0, seed_);
    const Tensor f = draw(col, range_.first, range_.second, seed_);
    const Tensor delta = where(greater(flip, constant(Tensor(0.5f))), -f, f) * 0.5f;
    const auto lo = static_cast<float>(vr_.first),
               span = static_cast<float>(vr_.second - vr_.first);
    const Tensor unit = (x4 - lo) / span;
    const Tensor hsv = image::rgb_to_hsv(unit);
    const auto ch = [&](int64_t c) { return slice(hsv, {0, 0, 0, c}, {-1, -1, -1, 1}); };
    Tensor h = ch(0) + delta;
    h = where(greater(h, constant(Tensor(1.0f))), h - 1.0f, h);
    h = where(less(h, constant(Tensor(0.0f))), h + 1.0f, h);
    const Tensor rgb = clip_by_value(image::hsv_to_rgb(concat({h, ch(1), ch(2)}, 3)),
                                     constant(Tensor(0.0f)), constant(Tensor(1.0f)));
    return like_input(rgb * span + lo, x);
  }

 private:
  std::pair<double, double> vr_, range_;
  std::optional<int64_t> seed_;

 public:
  void options(detail::layer_options::ImageLayerConfig& c) const override {
    c.factor = range_;
    c.value_range = vr_;
    c.seed = seed_;
  }
};

// ---- Normalization ----
class NormalizationImpl final : public LayerImpl {
 public:
  explicit NormalizationImpl(layers::NormalizationOptions o)
      : LayerImpl("Normalization", "normalization", o.name), o_(std::move(o)) {
    TF_CHECK_ARG(o_.mean.empty() == o_.variance.empty(), "Normalization",
                 "mean and variance must be given together, got {} mean and {} variance values",
                 o_.mean.size(), o_.variance.size());
  }

  void adapt(const Tensor& data) {
    prepare_adapt(data.shape());
    const std::vector<int> axes = reduce_axes(data.rank());
    const Tensor x = cast(data, float32);
    const Tensor mean = axes.empty() ? x : reduce_mean(x, axes);
    const Tensor var =
        axes.empty() ? zeros_like(x) : reduce_mean(square(x - reduce_mean(x, axes, true)), axes);
    store(mean, var);
  }

  void adapt(const data::Dataset& ds) {
    Tensor total_mean, total_var;
    int64_t total_count = 0;
    for (auto it = ds.begin(); auto e = it.get_next();) {
      TF_CHECK_ARG(!e->empty(), "Normalization", "adapt() got a dataset element with no tensors");
      const Tensor b = cast((*e)[0], float32);
      if (!total_mean.defined()) prepare_adapt(b.shape());
      check_batch(b.shape());
      const std::vector<int> axes = reduce_axes(b.rank());
      const Tensor bm = axes.empty() ? b : reduce_mean(b, axes);
      const Tensor bv =
          axes.empty() ? zeros_like(b) : reduce_mean(square(b - reduce_mean(b, axes, true)), axes);
      int64_t count = 1;
      for (int a : axes) count *= b.shape()[a];
      total_count += count;
      // Keras' running combination of batch means and variances.
      const auto bw = static_cast<float>(static_cast<double>(count) / total_count);
      const float ew = 1.0f - bw;
      if (!total_mean.defined()) {
        total_mean = zeros_like(bm);
        total_var = zeros_like(bv);
      }
      const Tensor nm = total_mean * ew + bm * bw;
      total_var = (total_var + square(total_mean - nm)) * ew + (bv + square(bm - nm)) * bw;
      total_mean = nm;
    }
    TF_CHECK_ARG(total_mean.defined(), "Normalization", "adapt() got an empty dataset");
    store(total_mean, total_var);
  }

  Tensor mean() const { return weight("mean").value(); }
  Tensor variance() const { return weight("variance").value(); }

 protected:
  void build(const TensorShape& s) override {
    const int64_t n = kept_size(s);
    const auto init = [&](const std::vector<double>& v, double dflt) -> Initializer {
      if (v.empty()) return dflt == 0.0 ? initializers::Zeros() : initializers::Ones();
      TF_CHECK_ARG(v.size() == 1 || static_cast<int64_t>(v.size()) == n, name_.c_str(),
                   "layer \"{}\" (Normalization) got {} mean/variance values for inputs of shape "
                   "{} (expected 1 or {})",
                   name_, v.size(), s.to_string(), n);
      return Initializer("constant", [v, n](const TensorShape& shape, DType dt) {
        return ::tapeflow::detail::from_doubles(
            v.size() == 1 ? std::vector<double>(static_cast<size_t>(n), v[0]) : v, shape, dt);
      });
    };
    const TensorShape ws = o_.axis ? TensorShape{n} : TensorShape{};
    add_weight("mean", ws, init(o_.mean, 0.0), false);
    add_weight("variance", ws, init(o_.variance, 1.0), false);
  }
  void check_input(const TensorShape& s) const override {
    LayerImpl::check_input(s);
    if (!o_.axis || !built()) return;
    const TensorShape b = built_input_shape();
    const int a = *o_.axis < 0 ? *o_.axis + s.rank() : *o_.axis;
    if (s.rank() != b.rank() || a < 0 || a >= s.rank() || s[a] != b[a])
      incompatible(s, "expected shape " + b.to_string() + " along axis " + std::to_string(a));
  }
  Tensor call(const Tensor& x, bool) override {
    Tensor m = weight("mean").value(), v = weight("variance").value();
    if (o_.axis) {
      TensorShape bs;
      const int a = *o_.axis < 0 ? *o_.axis + x.rank() : *o_.axis;
      for (int d = 0; d < x.rank(); ++d) bs.push_back(d == a ? x.shape()[d] : 1);
      m = reshape(m, bs);
      v = reshape(v, bs);
    }
    const Tensor sd = maximum(sqrt(v), constant(Tensor(1e-7f)));
    return o_.invert ? m + x * sd : (x - m) / sd;
  }

 private:
  int64_t kept_size(const TensorShape& s) const {
    if (!o_.axis) return 1;
    const int a = *o_.axis < 0 ? *o_.axis + s.rank() : *o_.axis;
    TF_CHECK_ARG(a >= 0 && a < s.rank(), name_.c_str(),
                 "layer \"{}\" (Normalization): axis {} is out of range for inputs of shape {}",
                 name_, *o_.axis, s.to_string());
    TF_CHECK_ARG(s[a] != None, name_.c_str(),
                 "layer \"{}\" (Normalization): axis {} of inputs of shape {} must be known", name_,
                 *o_.axis, s.to_string());
    return s[a];
  }
  std::vector<int> reduce_axes(int rank) const {
    std::vector<int> axes;
    const int a = o_.axis ? (*o_.axis < 0 ? *o_.axis + rank : *o_.axis) : -1;
    for (int d = 0; d < rank; ++d)
      if (d != a) axes.push_back(d);
    return axes;
  }
  void prepare_adapt(const TensorShape& s) {
    TF_CHECK_ARG(o_.mean.empty(), name_.c_str(),
                 "layer \"{}\" (Normalization) was given mean and variance; adapt() cannot "
                 "change them",
                 name_);
    TensorShape bs = s;
    if (bs.rank() > 0) bs[0] = None;
    if (!built()) ensure_built(bs);
    check_batch(s);
  }
  void check_batch(const TensorShape& s) const {
    if (!o_.axis) return;
    const TensorShape b = built_input_shape();
    const int a = *o_.axis < 0 ? *o_.axis + s.rank() : *o_.axis;
    TF_CHECK_ARG(s.rank() == b.rank() && a >= 0 && a < s.rank() && s[a] == b[a], name_.c_str(),
                 "layer \"{}\" (Normalization) was built for inputs of shape {}, but adapt() got "
                 "data of shape {}",
                 name_, b.to_string(), s.to_string());
  }
  void store(const Tensor& mean, const Tensor& var) {
    const TensorShape ws = weight("mean").shape();
    Variable m = weight("mean"), v = weight("variance");
    m.assign(reshape(cast(mean, m.dtype()), ws));
    v.assign(reshape(cast(var, v.dtype()), ws));
  }
  layers::NormalizationOptions o_;

 public:
  const layers::NormalizationOptions& options() const { return o_; }
};

}  // namespace

std::optional<detail::layer_options::ImageLayerConfig> detail::layer_options::image_layer(
    const LayerImpl& layer) {
  const auto* p = dynamic_cast<const ImageLayerImpl*>(&layer);
  if (p == nullptr) return std::nullopt;
  ImageLayerConfig c;
  c.class_name = p->class_name();
  p->options(c);
  return c;
}
std::optional<layers::NormalizationOptions> detail::layer_options::normalization(
    const LayerImpl& layer) {
  const auto* p = dynamic_cast<const NormalizationImpl*>(&layer);
  if (p == nullptr) return std::nullopt;
  return p->options();
}

namespace layers {

Resizing::Resizing(int64_t height, int64_t width, ResizingOptions options)
    : Layer(std::make_shared<ResizingImpl>(height, width, std::move(options))) {}
CenterCrop::CenterCrop(int64_t height, int64_t width, std::string name)
    : Layer(std::make_shared<CenterCropImpl>(height, width, std::move(name))) {}
RandomCrop::RandomCrop(int64_t height, int64_t width, std::optional<int64_t> seed, std::string name)
    : Layer(std::make_shared<RandomCropImpl>(height, width, seed, std::move(name))) {}
RandomFlip::RandomFlip(std::string mode, std::optional<int64_t> seed, std::string name)
    : Layer(std::make_shared<RandomFlipImpl>(std::move(mode), seed, std::move(name))) {}
RandomRotation::RandomRotation(Factor factor, RandomTransformOptions options)
    : Layer(std::make_shared<RandomRotationImpl>(factor, std::move(options))) {}
RandomZoom::RandomZoom(Factor height_factor, std::optional<Factor> width_factor,
                       RandomTransformOptions options)
    : Layer(std::make_shared<RandomZoomImpl>(height_factor, width_factor, std::move(options))) {}
RandomTranslation::RandomTranslation(Factor height_factor, Factor width_factor,
                                     RandomTransformOptions options)
    : Layer(std::make_shared<RandomTranslationImpl>(height_factor, width_factor,
                                                    std::move(options))) {}
RandomContrast::RandomContrast(Factor factor, std::pair<double, double> value_range,
                               std::optional<int64_t> seed, std::string name)
    : Layer(std::make_shared<RandomContrastImpl>(factor, value_range, seed, std::move(name))) {}
RandomBrightness::RandomBrightness(Factor factor, std::pair<double, double> value_range,
                                   std::optional<int64_t> seed, std::string name)
    : Layer(std::make_shared<RandomBrightnessImpl>(factor, value_range, seed, std::move(name))) {}

RandomGrayscale::RandomGrayscale(double factor, std::optional<int64_t> seed, std::string name)
    : Layer(std::make_shared<RandomGrayscaleImpl>(factor, seed, std::move(name))) {}

RandomSaturation::RandomSaturation(Factor factor, std::pair<double, double> value_range,
                                   std::optional<int64_t> seed, std::string name)
    : Layer(std::make_shared<RandomSaturationImpl>(factor, value_range, seed, std::move(name))) {}

RandomHue::RandomHue(Factor factor, std::pair<double, double> value_range,
                     std::optional<int64_t> seed, std::string name)
    : Layer(std::make_shared<RandomHueImpl>(factor, value_range, seed, std::move(name))) {}

Normalization::Normalization(NormalizationOptions options)
    : Layer(std::make_shared<NormalizationImpl>(std::move(options))) {}
void Normalization::adapt(const Tensor& data) const {
  impl_as<NormalizationImpl>(*this, "Normalization").adapt(data);
}
void Normalization::adapt(const data::Dataset& dataset) const {
  impl_as<NormalizationImpl>(*this, "Normalization").adapt(dataset);
}
Tensor Normalization::mean() const {
  return impl_as<NormalizationImpl>(*this, "Normalization").mean();
}
Tensor Normalization::variance() const {
  return impl_as<NormalizationImpl>(*this, "Normalization").variance();
}

}  // namespace layers
}  // namespace tapeflow::keras
