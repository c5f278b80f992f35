// Keras 3's padding, cropping, activation, reshaping, noise and normalization layers beyond
// keras/layers.h and keras/layers_more.h: ZeroPadding1D/2D, Cropping1D/2D, LeakyReLU, PReLU, ELU,
// Permute, RepeatVector, UpSampling1D, SpatialDropout1D/2D/3D, GaussianNoise, GaussianDropout,
// ActivityRegularization, GroupNormalization, UnitNormalization and the TimeDistributed wrapper.
// See docs/keras.md.
//
// Each is a Layer handle on shared state with the threading rules of keras/layers.h, composed of
// existing ops (so every device runs it). Inputs are channels_last (Keras' default); the layers
// with a FormatOptions or SpatialDropoutOptions overload also take data_format "channels_first".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "keras/initializers.h"
#include "keras/layers.h"
#include "keras/regularizers.h"

namespace tapeflow::keras::layers {

// The amounts at the two ends of one axis (padding or cropping): one int for both ends, or
// {begin, end}.
struct Sides1D {
  int64_t begin = 0, end = 0;
  Sides1D(int64_t both) : begin(both), end(both) {}  // NOLINT(google-explicit-constructor)
  Sides1D(int64_t b, int64_t e) : begin(b), end(e) {}
};
// The amounts for height and width: one int for all four sides, {height, width} (each at both
// ends), or {{top, bottom}, {left, right}}, as Keras' int, pair or pair of pairs.
struct Sides2D {
  Sides1D height = 0, width = 0;
  Sides2D(int64_t all) : height(all), width(all) {}  // NOLINT(google-explicit-constructor)
  Sides2D(int64_t h, int64_t w) : height(h), width(w) {}
  Sides2D(Sides1D h, Sides1D w) : height(h), width(w) {}
};

// Zeros before and after the steps of (batch, steps, channels) inputs:
//   ZeroPadding1D()  ZeroPadding1D(2)  ZeroPadding1D({1, 2})
// ZeroPadding1D(1, {.data_format = "channels_first"}) pads (batch, channels, steps) inputs.
class ZeroPadding1D : public Layer {
 public:
  template <class = void>  // see FormatOptions
  explicit ZeroPadding1D(Sides1D padding = 1, std::string name = "")
      : ZeroPadding1D(padding, FormatOptions{.name = std::move(name)}) {}
  ZeroPadding1D(Sides1D padding, FormatOptions options);
  // {begin, end}: an overload of its own, since a braced pair such as {1, 0} also converts
  // to the std::string of the name (an ambiguous call otherwise).
  template <class = void>
  explicit ZeroPadding1D(const int64_t (&padding)[2], std::string name = "")
      : ZeroPadding1D(Sides1D(padding[0], padding[1]), FormatOptions{.name = std::move(name)}) {}
  ZeroPadding1D(const int64_t (&padding)[2], FormatOptions options)
      : ZeroPadding1D(Sides1D(padding[0], padding[1]), std::move(options)) {}
};
// Zero rows and columns around NHWC (with data_format "channels_first", NCHW) images:
//   ZeroPadding2D()  ZeroPadding2D({1, 2})  ZeroPadding2D({{1, 0}, {0, 2}})
//   ZeroPadding2D(1, {.data_format = "channels_first"})
class ZeroPadding2D : public Layer {
 public:
  template <class = void>  // see FormatOptions
  explicit ZeroPadding2D(Sides2D padding = 1, std::string name = "")
      : ZeroPadding2D(padding, FormatOptions{.name = std::move(name)}) {}
  ZeroPadding2D(Sides2D padding, FormatOptions options);
  // {height, width} and {{top, bottom}, {left, right}}: overloads of their own, since braced
  // pairs also convert to the std::string of the name (an ambiguous call otherwise).
  template <class = void>
  explicit ZeroPadding2D(const int64_t (&padding)[2], std::string name = "")
      : ZeroPadding2D(padding, FormatOptions{.name = std::move(name)}) {}
  ZeroPadding2D(const int64_t (&padding)[2], FormatOptions options)
      : ZeroPadding2D(Sides2D(padding[0], padding[1]), std::move(options)) {}
  template <class = void>
  explicit ZeroPadding2D(const int64_t (&padding)[2][2], std::string name = "")
      : ZeroPadding2D(padding, FormatOptions{.name = std::move(name)}) {}
  ZeroPadding2D(const int64_t (&padding)[2][2], FormatOptions options)
      : ZeroPadding2D(Sides2D({padding[0][0], padding[0][1]}, {padding[1][0], padding[1][1]}),
                      std::move(options)) {}
};
// Removes steps at the start and end of (batch, steps, channels) inputs; cropping the whole
// length (or more) is an InvalidArgumentError, as Keras' ValueError.
//   Cropping1D()  Cropping1D({1, 2})
class Cropping1D : public Layer {
 public:
  explicit Cropping1D(Sides1D cropping = 1, std::string name = "");
  // {begin, end}: an overload of its own, since a braced pair such as {1, 0} also converts
  // to the std::string of the name (an ambiguous call otherwise).
  explicit Cropping1D(const int64_t (&cropping)[2], std::string name = "")
      : Cropping1D(Sides1D(cropping[0], cropping[1]), std::move(name)) {}
};
// Removes rows and columns at the borders of NHWC images:
//   Cropping2D(1)  Cropping2D({{2, 2}, {4, 4}})
class Cropping2D : public Layer {
 public:
  template <class = void>  // see FormatOptions
  explicit Cropping2D(Sides2D cropping = 0, std::string name = "")
      : Cropping2D(cropping, FormatOptions{.name = std::move(name)}) {}
  // data_format "channels_first": NCHW images.
  Cropping2D(Sides2D cropping, FormatOptions options);
  // {height, width} and {{top, bottom}, {left, right}}: overloads of their own, since braced
  // pairs also convert to the std::string of the name (an ambiguous call otherwise).
  template <class = void>
  explicit Cropping2D(const int64_t (&cropping)[2], std::string name = "")
      : Cropping2D(cropping, FormatOptions{.name = std::move(name)}) {}
  Cropping2D(const int64_t (&cropping)[2], FormatOptions options)
      : Cropping2D(Sides2D(cropping[0], cropping[1]), std::move(options)) {}
  template <class = void>
  explicit Cropping2D(const int64_t (&cropping)[2][2], std::string name = "")
      : Cropping2D(cropping, FormatOptions{.name = std::move(name)}) {}
  Cropping2D(const int64_t (&cropping)[2][2], FormatOptions options)
      : Cropping2D(Sides2D({cropping[0][0], cropping[0][1]}, {cropping[1][0], cropping[1][1]}),
                   std::move(options)) {}
};

// x > 0 ? x : negative_slope * x (tf::nn::leaky_relu); Keras 3's default slope is 0.3.
class LeakyReLU : public Layer {
 public:
  explicit LeakyReLU(double negative_slope = 0.3, std::string name = "");
};
// x > 0 ? x : alpha * (exp(x) - 1), with Keras' gradient alpha at 0.
class ELU : public Layer {
 public:
  explicit ELU(double alpha = 1.0, std::string name = "");
};

struct PReLUOptions {
  Initializer alpha_initializer = {};  // zeros
  Regularizer alpha_regularizer = {};
  Constraint alpha_constraint = {};
  // 1-based axes (after the batch) that share one alpha, e.g. {1, 2} for the height and width
  // of images: alpha has size 1 there.
  std::vector<int> shared_axes = {};
  std::string name = "";
};
// Parametric ReLU: relu(x) - alpha * relu(-x) with a trainable alpha of the input's shape
// without the batch (size 1 on shared_axes).
//   PReLU()  PReLU({.alpha_initializer = Constant(0.25), .shared_axes = {1, 2}})
class PReLU : public Layer {
 public:
  PReLU() : PReLU(PReLUOptions{}) {}
  explicit PReLU(PReLUOptions options);
  Variable alpha() const;
};

// Permutes the axes after the batch; `dims` is 1-based, as Keras': Permute({2, 1}) swaps the
// two axes of (batch, a, b).
class Permute : public Layer {
 public:
  explicit Permute(std::vector<int> dims, std::string name = "");
};
// (batch, features) -> (batch, n, features).
class RepeatVector : public Layer {
 public:
  explicit RepeatVector(int64_t n, std::string name = "");
};
// Repeats each step of (batch, steps, channels) inputs `size` times.
class UpSampling1D : public Layer {
 public:
  explicit UpSampling1D(int64_t size = 2, std::string name = "");
};

// Dropout of whole channels with training = true: one mask per example and channel, shared by
// every step (1D, (batch, steps, channels)) or pixel (2D, NHWC); the kept channels are scaled
// by 1 / (1 - rate). The identity otherwise.
class SpatialDropout1D : public Layer {
 public:
  explicit SpatialDropout1D(double rate, std::optional<int64_t> seed = std::nullopt,
                            std::string name = "");
};
struct SpatialDropoutOptions {
  std::string data_format = "";  // "" or "channels_last", or "channels_first" (channels at axis 1)
  std::optional<int64_t> seed = std::nullopt;
  std::string name = "";
};
//   SpatialDropout2D(0.2)  SpatialDropout2D(0.2, {.data_format = "channels_first", .seed = 7})
class SpatialDropout2D : public Layer {
 public:
  template <class = void>  // see FormatOptions
  explicit SpatialDropout2D(double rate, std::optional<int64_t> seed = std::nullopt,
                            std::string name = "")
      : SpatialDropout2D(rate, SpatialDropoutOptions{.seed = seed, .name = std::move(name)}) {}
  SpatialDropout2D(double rate, SpatialDropoutOptions options);
};
// SpatialDropout2D for (batch, depth, height, width, channels) inputs.
class SpatialDropout3D : public Layer {
 public:
  template <class = void>  // see FormatOptions
  explicit SpatialDropout3D(double rate, std::optional<int64_t> seed = std::nullopt,
                            std::string name = "")
      : SpatialDropout3D(rate, SpatialDropoutOptions{.seed = seed, .name = std::move(name)}) {}
  SpatialDropout3D(double rate, SpatialDropoutOptions options);
};
// x + N(0, stddev^2) noise with training = true (stddev in [0, 1], as Keras); the identity
// otherwise.
class GaussianNoise : public Layer {
 public:
  explicit GaussianNoise(double stddev, std::optional<int64_t> seed = std::nullopt,
                         std::string name = "");
};
// x * N(1, rate / (1 - rate)) noise with training = true (rate in [0, 1)); the identity
// otherwise.
class GaussianDropout : public Layer {
 public:
  explicit GaussianDropout(double rate, std::optional<int64_t> seed = std::nullopt,
                           std::string name = "");
};
// The identity, which adds (l1 * sum|x| + l2 * sum x^2) / batch_size to losses() at every call
// (Keras 3's activity regularizer: training or not).
class ActivityRegularization : public Layer {
 public:
  explicit ActivityRegularization(double l1 = 0.0, double l2 = 0.0, std::string name = "");
};

struct GroupNormalizationOptions {
  int groups = 32;  // -1: one group per channel (instance normalization)
  int axis = -1;    // the channels
  double epsilon = 1e-3;
  bool center = true;                  // beta
  bool scale = true;                   // gamma
  Initializer beta_initializer = {};   // zeros
  Initializer gamma_initializer = {};  // ones
  Regularizer beta_regularizer = {};
  Regularizer gamma_regularizer = {};
  Constraint beta_constraint = {};
  Constraint gamma_constraint = {};
  std::string name = "";
};
// Splits the channels (at `axis`) into `groups` groups and normalises each example's group over
// its channels and all other non-batch axes with its own mean and biased variance; then gamma
// and beta per channel. The same in training and inference.
//   GroupNormalization(8)  GroupNormalization(4, 1)  GroupNormalization({.groups = -1})
class GroupNormalization : public Layer {
 public:
  GroupNormalization() : GroupNormalization(GroupNormalizationOptions{}) {}
  template <class G>
  requires std::is_integral_v<G>
  explicit GroupNormalization(G groups, int axis = -1, double epsilon = 1e-3, bool center = true,
                              bool scale = true)
      : GroupNormalization(GroupNormalizationOptions{.groups = static_cast<int>(groups),
                                                     .axis = axis,
                                                     .epsilon = epsilon,
                                                     .center = center,
                                                     .scale = scale}) {}
  explicit GroupNormalization(GroupNormalizationOptions options);
  Variable gamma() const;
  Variable beta() const;
};

// x / ||x|| over `axis` (L2; Keras' x * min(rsqrt(sum x^2), 1e12)).
//   UnitNormalization()  UnitNormalization(1)  UnitNormalization({1, 2})
class UnitNormalization : public Layer {
 public:
  explicit UnitNormalization(int axis = -1, std::string name = "")
      : UnitNormalization(std::vector<int>{axis}, std::move(name)) {}
  explicit UnitNormalization(std::vector<int> axis, std::string name = "");
};

// Applies `layer` to every step of (batch, steps, ...) inputs by folding the steps into the
// batch: (batch * steps, ...) -> layer -> (batch, steps, ...). The wrapped layer's weights are
// the wrapper's ("time_distributed/dense/kernel"); one set serves every step.
//   TimeDistributed(Dense(8))  TimeDistributed(Conv2D(16, 3))
class TimeDistributed : public Layer {
 public:
  explicit TimeDistributed(Layer layer, std::string name = "");
  Layer layer() const;
};

}  // namespace tapeflow::keras::layers
