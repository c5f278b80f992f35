// Weight initializers (tf.keras.initializers): small value objects that make a tensor of a given
// shape and dtype. Layers call them once, while they build. As Keras', a seeded random
// initializer gives the same values at every call (two layers built with GlorotUniform(3) get
// the same kernel); an unseeded one draws new values from tf::random's stream (ops/random.h) at
// every call, reproducible under tf::random::set_seed. They may be called from any thread.
//
// Fans follow Keras' _compute_fans: a 2-D (in, out) kernel has fan_in = in and fan_out = out; a
// convolution kernel (kh, kw, in, out) multiplies both by kh * kw; a 1-D shape uses its length for
// both.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "core/tensor.h"

namespace tapeflow::keras {

class Initializer {
 public:
  using Fn = std::function<Tensor(const TensorShape& shape, DType dtype)>;

  // No initializer: the layer's default applies (glorot_uniform kernels, zero biases).
  Initializer() = default;
  Initializer(std::string name, Fn fn) : name_(std::move(name)), fn_(std::move(fn)) {}
  // Keras' string identifiers: "glorot_uniform", "glorot_normal", "he_uniform", "he_normal",
  // "zeros", "ones", "random_normal", "random_uniform" (and Keras' aliases "normal", "uniform"),
  // "truncated_normal", "orthogonal", "lecun_normal", "lecun_uniform", "identity",
  // "variance_scaling". Anything else is an InvalidArgumentError.
  Initializer(const char* identifier);         // NOLINT(google-explicit-constructor): as Keras
  Initializer(const std::string& identifier);  // NOLINT(google-explicit-constructor)

  bool defined() const { return static_cast<bool>(fn_); }
  const std::string& name() const { return name_; }
  // A new tensor of `shape` and the floating `dtype`.
  Tensor operator()(const TensorShape& shape, DType dtype = float32) const;

  // The Keras arguments of an initializer made below (Keras' get_config), kept for
  // keras/serialization.h: each key with its value, in Keras' order. std::monostate is None (an
  // unset seed or axis list); a seed is an int64_t, a mode a string, an axis list a vector.
  // Empty for a custom initializer.
  using Value = std::variant<std::monostate, double, int64_t, std::string, std::vector<int64_t>>;
  using Config = std::vector<std::pair<std::string, Value>>;
  Initializer(std::string name, Config config, Fn fn)
      : name_(std::move(name)), fn_(std::move(fn)), config_(std::move(config)) {}
  const Config& config() const { return config_; }
  // The value of `key` in config() (std::monostate when it has none).
  Value config_value(const std::string& key) const;

 private:
  std::string name_;
  Fn fn_;
  Config config_;
};

namespace initializers {
Initializer Zeros();
Initializer Ones();
Initializer Constant(double value);
Initializer RandomNormal(double mean = 0.0, double stddev = 0.05,
                         std::optional<int64_t> seed = std::nullopt);
Initializer RandomUniform(double minval = -0.05, double maxval = 0.05,
                          std::optional<int64_t> seed = std::nullopt);
// Normal values redrawn until they lie within two standard deviations of the mean (Keras').
Initializer TruncatedNormal(double mean = 0.0, double stddev = 0.05,
                            std::optional<int64_t> seed = std::nullopt);
// U(-limit, limit) with limit = sqrt(6 / (fan_in + fan_out)).
Initializer GlorotUniform(std::optional<int64_t> seed = std::nullopt);
// Truncated normal with stddev = sqrt(2 / (fan_in + fan_out)) / 0.8796... (Keras' correction).
Initializer GlorotNormal(std::optional<int64_t> seed = std::nullopt);
// U(-limit, limit) with limit = sqrt(6 / fan_in).
Initializer HeUniform(std::optional<int64_t> seed = std::nullopt);
// Truncated normal with stddev = sqrt(2 / fan_in) / 0.8796...
Initializer HeNormal(std::optional<int64_t> seed = std::nullopt);
// A (semi-)orthogonal matrix times `gain`, as Keras' Orthogonal: the shape is flattened to
// (prod(shape[:-1]), shape[-1]), a normal matrix of (max, min) of those is orthonormalised (its
// QR's Q with the signs that make R's diagonal positive) and transposed when it has fewer rows
// than columns. Rank >= 2 (the recurrent kernels' default initializer).
Initializer Orthogonal(double gain = 1.0, std::optional<int64_t> seed = std::nullopt);
// Truncated normal with stddev = sqrt(1 / fan_in) / 0.8796... (Keras' LecunNormal, SELU's).
Initializer LecunNormal(std::optional<int64_t> seed = std::nullopt);
// U(-limit, limit) with limit = sqrt(3 / fan_in).
Initializer LecunUniform(std::optional<int64_t> seed = std::nullopt);
// gain times the identity matrix (ones on the main diagonal of a rectangular matrix), as Keras'
// Identity; 2-D shapes only. (Keras 3.15 leaves gain out of its config; tapeflow's config keeps
// it, which Keras reads back.)
Initializer Identity(double gain = 1.0);
// Keras' VarianceScaling: values of standard deviation sqrt(scale / n), where n is fan_in,
// fan_out or their mean (`mode` "fan_in", "fan_out" or "fan_avg"; n at least 1), drawn from
// `distribution` "truncated_normal" (the normal truncated at two standard deviations and
// rescaled by 0.8796...; "normal" is an alias), "untruncated_normal" or "uniform" (on
// (-sqrt(3 scale / n), sqrt(3 scale / n))). The fans are compute_fans' unless both axis lists are
// given: then fan_in is the product of the shape's `input_axes` and fan_out of its `output_axes`
// (negative axes count from the end). Keras' errors for a scale <= 0 and an unknown mode or
// distribution. GlorotUniform and the rest above are VarianceScaling with fixed arguments.
Initializer VarianceScaling(double scale = 1.0, const std::string& mode = "fan_in",
                            const std::string& distribution = "truncated_normal",
                            std::optional<int64_t> seed = std::nullopt,
                            std::optional<std::vector<int64_t>> input_axes = std::nullopt,
                            std::optional<std::vector<int64_t>> output_axes = std::nullopt);
// The initializer named by a Keras identifier (see Initializer(const char*)).
Initializer get(const std::string& identifier);
}  // namespace initializers

namespace detail {
// Keras' (fan_in, fan_out) of a weight shape.
std::pair<double, double> compute_fans(const TensorShape& shape);
// `init` with its fans fixed at (fan_in, fan_out) whatever the shape it draws, when it is a
// VarianceScaling (GlorotUniform and the rest included) whose axis lists are not both set, as
// Keras' EinsumDense gives its kernel initializer the kernel's input and output axes; any other
// initializer unchanged.
Initializer with_fans(const Initializer& init, int64_t fan_in, int64_t fan_out);
}  // namespace detail

}  // namespace tapeflow::keras
