#include "keras/initializers.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/check.h"
#include "ops/binary.h"
#include "ops/factory.h"
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

// A seed as Initializer::Config keeps it (nullopt: None).
std::optional<double> seed_config(std::optional<int64_t> seed) {
  return seed ? std::optional<double>(static_cast<double>(*seed)) : std::nullopt;
}

Tensor truncated_normal(const TensorShape& shape, double mean, double stddev, DType dtype,
                        std::optional<int64_t> seed) {
  // Redraw the values outside (-2, 2) until none is left: each pass keeps about 95% of them, so a
  // handful of passes suffice. Built eagerly while a layer builds (never inside a trace).
  Tensor z = random::normal(shape, 0.0, 1.0, dtype, seed);
  for (int pass = 0; pass < 64; ++pass) {
    Tensor outside = greater_equal(abs(z), 2.0);
    if (!reduce_any(outside).item<bool>()) break;
    z = where(outside, random::normal(shape, 0.0, 1.0, dtype, seed), z);
  }
  return z * stddev + mean;
}

// Keras' VarianceScaling(scale, mode, distribution).
Initializer variance_scaling(std::string name, double scale, bool fan_in_only, bool uniform,
                             std::optional<int64_t> seed) {
  Initializer::Config c{{"seed", seed_config(seed)}};
  return Initializer(name, c, [=](const TensorShape& shape, DType dtype) {
    auto [fan_in, fan_out] = detail::compute_fans(shape);
    const double n = fan_in_only ? fan_in : (fan_in + fan_out) / 2.0;
    const double s = scale / std::max(1.0, n);
    if (uniform) {
      const double limit = std::sqrt(3.0 * s);
      return random::uniform(shape, -limit, limit, dtype, seed);
    }
    return truncated_normal(shape, 0.0, std::sqrt(s) / kTruncatedStddev, dtype, seed);
  });
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
}  // namespace detail

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
    return random::normal(s, mean, stddev, d, seed);
  });
}
Initializer RandomUniform(double minval, double maxval, std::optional<int64_t> seed) {
  Initializer::Config c{{"seed", seed_config(seed)}, {"minval", minval}, {"maxval", maxval}};
  return Initializer("random_uniform", c, [=](const TensorShape& s, DType d) {
    check_floating("random_uniform", d);
    return random::uniform(s, minval, maxval, d, seed);
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
  return variance_scaling("glorot_uniform", 1.0, false, true, seed);
}
Initializer GlorotNormal(std::optional<int64_t> seed) {
  return variance_scaling("glorot_normal", 1.0, false, false, seed);
}
Initializer HeUniform(std::optional<int64_t> seed) {
  return variance_scaling("he_uniform", 2.0, true, true, seed);
}
Initializer HeNormal(std::optional<int64_t> seed) {
  return variance_scaling("he_normal", 2.0, true, false, seed);
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
        ::tapeflow::detail::to_double_vector(random::normal({m, n}, 0.0, 1.0, float64, seed));
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
  return variance_scaling("lecun_normal", 1.0, true, false, seed);
}
Initializer LecunUniform(std::optional<int64_t> seed) {
  return variance_scaling("lecun_uniform", 1.0, true, true, seed);
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
  TF_THROW(InvalidArgumentError, "initializers",
           "unknown initializer '{}': expected one of glorot_uniform, glorot_normal, he_uniform, "
           "he_normal, zeros, ones, random_normal, random_uniform, truncated_normal, orthogonal, "
           "lecun_normal, lecun_uniform, identity",
           id);
}

}  // namespace initializers
}  // namespace tapeflow::keras
