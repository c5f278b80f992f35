#include "keras/initializers.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <vector>

#include "core/check.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/array_more.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/unary.h"

namespace tapeflow::keras {

namespace {
// Keras' VarianceScaling truncates at two standard deviations; this is the standard deviation of
// a unit normal truncated to (-2, 2), used to correct the scale.
constexpr double kTruncatedStddev = 0.87962566103423978;

void check_floating(const char* who, DType dtype) {
  TF_CHECK_ARG(is_floating(dtype), who, "initializes floating weights only, asked for dtype {}",
               dtype_name(dtype));
}

// A seed as Initializer::Config keeps it (std::monostate: None).
Initializer::Value seed_config(std::optional<int64_t> seed) {
  if (seed) return *seed;
  return std::monostate{};
}
Initializer::Value axes_config(const std::optional<std::vector<int64_t>>& axes) {
  if (axes) return *axes;
  return std::monostate{};
}

// The draws of an initializer. As Keras', a seeded one repeats its values at every call (the
// stateless ops with the pair (seed, 0)); an unseeded one draws from tf::random's stream (new
// values at every call, reproducible under tf::random::set_seed).
Tensor draw_uniform(const TensorShape& shape, double minval, double maxval, DType dtype,
                    std::optional<int64_t> seed) {
  if (seed) return random::stateless_uniform(shape, {*seed, 0}, minval, maxval, dtype);
  return random::uniform(shape, minval, maxval, dtype);
}
Tensor draw_normal(const TensorShape& shape, double mean, double stddev, DType dtype,
                   std::optional<int64_t> seed) {
  if (seed) return random::stateless_normal(shape, {*seed, 0}, mean, stddev, dtype);
  return random::normal(shape, mean, stddev, dtype);
}
// Normal values redrawn until they lie within two standard deviations of the mean.
Tensor truncated_normal(const TensorShape& shape, double mean, double stddev, DType dtype,
                        std::optional<int64_t> seed) {
  if (seed) return random::stateless_truncated_normal(shape, {*seed, 0}, mean, stddev, dtype);
  return random::truncated_normal(shape, mean, stddev, dtype);
}

// Keras' VarianceScaling(scale, mode, distribution, seed, input_axes, output_axes), under the
// name of the class it is (GlorotUniform: "glorot_uniform", ...; itself: "variance_scaling").
struct VarianceScalingArgs {
  std::string name;
  double scale = 1.0;
  std::string mode = "fan_in";                    // fan_in, fan_out, fan_avg
  std::string distribution = "truncated_normal";  // truncated_normal, untruncated_normal, uniform
  std::optional<int64_t> seed;
  std::optional<std::vector<int64_t>> input_axes, output_axes;
};

// The product of `shape`'s `axes` (Keras' compute_fans with axes; negative axes from the end).
double fan_of(const TensorShape& shape, const std::vector<int64_t>& axes, const char* which) {
  double fan = 1.0;
  for (int64_t a : axes) {
    const int64_t r = shape.rank();
    TF_CHECK_ARG(a >= -r && a < r, "variance_scaling", "{} {} is out of range for shape {}", which,
                 a, shape.to_string());
    fan *= double(shape[a < 0 ? a + r : a]);
  }
  return fan;
}

// The initializer of `a`; `fixed_fans` (EinsumDense's) replaces the fans of the shape drawn.
Initializer variance_scaling(const VarianceScalingArgs& a,
                             std::optional<std::pair<double, double>> fixed_fans = std::nullopt) {
  Initializer::Config c{{"seed", seed_config(a.seed)}};
  if (a.name == "variance_scaling") {
    c.emplace_back("scale", a.scale);
    c.emplace_back("mode", a.mode);
    c.emplace_back("distribution", a.distribution);
  }
  c.emplace_back("input_axes", axes_config(a.input_axes));
  c.emplace_back("output_axes", axes_config(a.output_axes));
  return Initializer(a.name, c, [a, fixed_fans](const TensorShape& shape, DType dtype) {
    check_floating(a.name.c_str(), dtype);
    std::pair<double, double> fans;
    if (fixed_fans)
      fans = *fixed_fans;
    else if (a.input_axes && a.output_axes)
      fans = {fan_of(shape, *a.input_axes, "input axis"),
              fan_of(shape, *a.output_axes, "output axis")};
    else
      fans = detail::compute_fans(shape);
    const double n = a.mode == "fan_in"    ? fans.first
                     : a.mode == "fan_out" ? fans.second
                                           : (fans.first + fans.second) / 2.0;
    const double s = a.scale / std::max(1.0, n);
    if (a.distribution == "uniform") {
      const double limit = std::sqrt(3.0 * s);
      return draw_uniform(shape, -limit, limit, dtype, a.seed);
    }
    if (a.distribution == "untruncated_normal")
      return draw_normal(shape, 0.0, std::sqrt(s), dtype, a.seed);
    return truncated_normal(shape, 0.0, std::sqrt(s) / kTruncatedStddev, dtype, a.seed);
  });
}

// The fixed arguments of VarianceScaling's subclasses, by name.
std::optional<VarianceScalingArgs> subclass_args(const std::string& name,
                                                 std::optional<int64_t> seed) {
  struct Fixed {
    const char* name;
    double scale;
    const char* mode;
    const char* distribution;
  };
  static constexpr Fixed kFixed[] = {
      {"glorot_uniform", 1.0, "fan_avg", "uniform"},
      {"glorot_normal", 1.0, "fan_avg", "truncated_normal"},
      {"he_uniform", 2.0, "fan_in", "uniform"},
      {"he_normal", 2.0, "fan_in", "truncated_normal"},
      {"lecun_uniform", 1.0, "fan_in", "uniform"},
      {"lecun_normal", 1.0, "fan_in", "truncated_normal"},
  };
  for (const Fixed& f : kFixed)
    if (name == f.name)
      return VarianceScalingArgs{f.name, f.scale, f.mode, f.distribution, seed, {}, {}};
  return std::nullopt;
}

Initializer subclass(const char* name, std::optional<int64_t> seed) {
  return variance_scaling(*subclass_args(name, seed));
}
}  // namespace

namespace detail {
std::pair<double, double> compute_fans(const TensorShape& shape) {
  const int r = shape.rank();
  if (r == 0) return {1.0, 1.0};
  if (r == 1) return {double(shape[0]), double(shape[0])};
  if (r == 2) return {double(shape[0]), double(shape[1])};
  double receptive = 1.0;
  for (int i = 0; i < r - 2; ++i) receptive *= double(shape[i]);
  return {double(shape[r - 2]) * receptive, double(shape[r - 1]) * receptive};
}

Initializer with_fans(const Initializer& init, int64_t fan_in, int64_t fan_out) {
  auto number = [&](const char* key) { return std::get<double>(init.config_value(key)); };
  auto text = [&](const char* key) { return std::get<std::string>(init.config_value(key)); };
  auto axes = [&](const char* key) -> std::optional<std::vector<int64_t>> {
    const Initializer::Value v = init.config_value(key);
    if (std::holds_alternative<std::vector<int64_t>>(v)) return std::get<std::vector<int64_t>>(v);
    return std::nullopt;
  };
  if (init.config().empty()) return init;  // a custom initializer (or one without arguments)
  const Initializer::Value seed_value = init.config_value("seed");
  const std::optional<int64_t> seed = std::holds_alternative<int64_t>(seed_value)
                                          ? std::optional<int64_t>(std::get<int64_t>(seed_value))
                                          : std::nullopt;
  std::optional<VarianceScalingArgs> args = subclass_args(init.name(), seed);
  if (!args && init.name() == "variance_scaling")
    args = VarianceScalingArgs{
        "variance_scaling", number("scale"), text("mode"), text("distribution"), seed, {}, {}};
  if (!args || (axes("input_axes") && axes("output_axes"))) return init;
  // Keras sets both axis lists when either is unset; the config stays the user's.
  Initializer fixed =
      variance_scaling(*args, std::pair<double, double>(double(fan_in), double(fan_out)));
  return Initializer(init.name(), init.config(), [fixed](const TensorShape& shape, DType dtype) {
    return fixed(shape, dtype);
  });
}
}  // namespace detail

Initializer::Value Initializer::config_value(const std::string& key) const {
  for (const auto& [k, v] : config_)
    if (k == key) return v;
  return std::monostate{};
}

Initializer::Initializer(const char* identifier) : Initializer(std::string(identifier)) {}
Initializer::Initializer(const std::string& identifier)
    : Initializer(initializers::get(identifier)) {}

Tensor Initializer::operator()(const TensorShape& shape, DType dtype) const {
  TF_CHECK_T(FailedPreconditionError, defined(), "Initializer",
             "the initializer is empty (default-constructed)");
  TF_CHECK_ARG(shape.is_fully_defined(), name_.c_str(), "needs a fully defined shape, got {}",
               shape.to_string());
  return fn_(shape, dtype);
}

namespace initializers {

Initializer Zeros() {
  return Initializer("zeros", [](const TensorShape& s, DType d) { return zeros(s, d); });
}
Initializer Ones() {
  return Initializer("ones", [](const TensorShape& s, DType d) { return ones(s, d); });
}
Initializer Constant(double value) {
  return Initializer("constant", {{"value", value}}, [value](const TensorShape& s, DType d) {
    return fill(s, cast(Tensor(value), d));
  });
}
Initializer RandomNormal(double mean, double stddev, std::optional<int64_t> seed) {
  Initializer::Config c{{"seed", seed_config(seed)}, {"mean", mean}, {"stddev", stddev}};
  return Initializer("random_normal", c, [=](const TensorShape& s, DType d) {
    check_floating("random_normal", d);
    return draw_normal(s, mean, stddev, d, seed);
  });
}
Initializer RandomUniform(double minval, double maxval, std::optional<int64_t> seed) {
  Initializer::Config c{{"seed", seed_config(seed)}, {"minval", minval}, {"maxval", maxval}};
  return Initializer("random_uniform", c, [=](const TensorShape& s, DType d) {
    check_floating("random_uniform", d);
    return draw_uniform(s, minval, maxval, d, seed);
  });
}
Initializer TruncatedNormal(double mean, double stddev, std::optional<int64_t> seed) {
  Initializer::Config c{{"seed", seed_config(seed)}, {"mean", mean}, {"stddev", stddev}};
  return Initializer("truncated_normal", c, [=](const TensorShape& s, DType d) {
    check_floating("truncated_normal", d);
    return truncated_normal(s, mean, stddev, d, seed);
  });
}
Initializer GlorotUniform(std::optional<int64_t> seed) {
  return subclass("glorot_uniform", seed);
}
Initializer GlorotNormal(std::optional<int64_t> seed) {
  return subclass("glorot_normal", seed);
}
Initializer HeUniform(std::optional<int64_t> seed) {
  return subclass("he_uniform", seed);
}
Initializer HeNormal(std::optional<int64_t> seed) {
  return subclass("he_normal", seed);
}

Initializer Orthogonal(double gain, std::optional<int64_t> seed) {
  Initializer::Config c{{"seed", seed_config(seed)}, {"gain", gain}};
  return Initializer("orthogonal", c, [=](const TensorShape& s, DType d) {
    check_floating("orthogonal", d);
    TF_CHECK_ARG(s.rank() >= 2, "orthogonal", "needs a shape of rank >= 2, got {}", s.to_string());
    const int64_t cols = s[s.rank() - 1], rows = s.num_elements() / std::max<int64_t>(cols, 1);
    const int64_t m = std::max(rows, cols), n = std::min(rows, cols);
    // Modified Gram-Schmidt of the columns of a normal (m, n) matrix, in float64 on the host:
    // the Q of its QR decomposition with R's diagonal made positive (Keras' q * sign(diag(r))).
    std::vector<double> a =
        ::tapeflow::detail::to_double_vector(draw_normal({m, n}, 0.0, 1.0, float64, seed));
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t k = 0; k < j; ++k) {
        double dot = 0.0;
        for (int64_t i = 0; i < m; ++i) dot += a[i * n + k] * a[i * n + j];
        for (int64_t i = 0; i < m; ++i) a[i * n + j] -= dot * a[i * n + k];
      }
      double norm = 0.0;
      for (int64_t i = 0; i < m; ++i) norm += a[i * n + j] * a[i * n + j];
      norm = std::sqrt(norm);
      for (int64_t i = 0; i < m; ++i) a[i * n + j] = norm > 0.0 ? a[i * n + j] / norm : 0.0;
    }
    std::vector<double> q(static_cast<size_t>(m * n));
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        const double v = gain * a[i * n + j];
        if (rows < cols)
          q[j * m + i] = v;  // the transpose: (n, m) = (rows, cols)
        else
          q[i * n + j] = v;
      }
    return cast(convert_to_tensor(q, s), d);
  });
}

Initializer LecunNormal(std::optional<int64_t> seed) {
  return subclass("lecun_normal", seed);
}
Initializer LecunUniform(std::optional<int64_t> seed) {
  return subclass("lecun_uniform", seed);
}

Initializer Identity(double gain) {
  return Initializer("identity", {{"gain", gain}}, [gain](const TensorShape& s, DType d) {
    check_floating("identity", d);
    TF_CHECK_ARG(s.rank() == 2, "identity",
                 "Identity matrix initializer can only be used for 2D matrices, got shape {}",
                 s.to_string());
    return cast(eye(s[0], s[1], float64) * gain, d);
  });
}

Initializer VarianceScaling(double scale, const std::string& mode, const std::string& distribution,
                            std::optional<int64_t> seed,
                            std::optional<std::vector<int64_t>> input_axes,
                            std::optional<std::vector<int64_t>> output_axes) {
  TF_CHECK_ARG(scale > 0.0, "variance_scaling",
               "Argument `scale` must be positive float. Received: scale={}", scale);
  TF_CHECK_ARG(mode == "fan_in" || mode == "fan_out" || mode == "fan_avg", "variance_scaling",
               "Invalid `mode` argument: {}. Please use one of fan_in, fan_out, fan_avg", mode);
  std::string dist = distribution;
  std::transform(dist.begin(), dist.end(), dist.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  if (dist == "normal") dist = "truncated_normal";
  TF_CHECK_ARG(dist == "uniform" || dist == "truncated_normal" || dist == "untruncated_normal",
               "variance_scaling",
               "Invalid `distribution` argument: {}. Please use one of truncated_normal, "
               "untruncated_normal, uniform",
               distribution);
  return variance_scaling(VarianceScalingArgs{"variance_scaling", scale, mode, dist, seed,
                                              std::move(input_axes), std::move(output_axes)});
}

Initializer get(const std::string& id) {
  if (id == "glorot_uniform") return GlorotUniform();
  if (id == "glorot_normal") return GlorotNormal();
  if (id == "he_uniform") return HeUniform();
  if (id == "he_normal") return HeNormal();
  if (id == "zeros") return Zeros();
  if (id == "ones") return Ones();
  if (id == "random_normal" || id == "normal") return RandomNormal();
  if (id == "random_uniform" || id == "uniform") return RandomUniform();
  if (id == "truncated_normal") return TruncatedNormal();
  if (id == "orthogonal") return Orthogonal();
  if (id == "lecun_normal") return LecunNormal();
  if (id == "lecun_uniform") return LecunUniform();
  if (id == "identity") return Identity();
  if (id == "variance_scaling") return VarianceScaling();
  TF_THROW(InvalidArgumentError, "initializers",
           "unknown initializer '{}': expected one of glorot_uniform, glorot_normal, he_uniform, "
           "he_normal, zeros, ones, random_normal, random_uniform, truncated_normal, orthogonal, "
           "lecun_normal, lecun_uniform, identity, variance_scaling",
           id);
}

}  // namespace initializers
}  // namespace tapeflow::keras
