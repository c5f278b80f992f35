// Keras 3's VarianceScaling initializer (keras/initializers.h): its three modes and three
// distributions checked by their statistics on large draws, fans from explicit axis lists,
// Keras' errors, its config as Keras 3.15 writes it (printed by Keras) read back and re-written,
// and EinsumDense's kernel fans (the largest |value| of a uniform draw sits just under its limit,
// as Keras' own kernels do: 0.7058 for a limit of 0.7071 in Keras 3.15).
#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "keras/initializers.h"
#include "keras/layers.h"
#include "keras/layers_core.h"
#include "keras/serialization.h"
#include "ops/binary.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
namespace K = tapeflow::keras;
using tf::testing::require_error;

namespace {

double stddev(const tf::Tensor& t) {
  const double mean = tf::reduce_mean(t).item<double>();
  return std::sqrt(tf::reduce_mean(tf::square(t - mean)).item<double>());
}
double max_abs(const tf::Tensor& t) {
  return tf::reduce_max(tf::abs(t)).item<double>();
}

}  // namespace

TEST_CASE("VarianceScaling: modes, distributions and explicit axes", "[cpu][keras][initializers]") {
  // (400, 300): fan_in 400, fan_out 300, fan_avg 350.
  struct Case {
    double scale;
    const char* mode;
    double n;
  };
  const std::vector<Case> cases = {
      {1.0, "fan_in", 400}, {2.0, "fan_out", 300}, {0.5, "fan_avg", 350}};
  for (const Case& c : cases) {
    INFO(c.mode);
    const double sd = std::sqrt(c.scale / c.n);
    const tf::Tensor t = K::initializers::VarianceScaling(c.scale, c.mode, "truncated_normal", 5)(
        {400, 300}, tf::float64);
    CHECK(stddev(t) == Approx(sd).epsilon(0.02));
    // Truncated at two standard deviations of the untruncated normal (sd / 0.8796...).
    CHECK(max_abs(t) <= 2 * sd / 0.87962566103423978 + 1e-12);
    CHECK(max_abs(t) > 0.99 * 2 * sd / 0.87962566103423978);
    const tf::Tensor n = K::initializers::VarianceScaling(c.scale, c.mode, "untruncated_normal", 6)(
        {400, 300}, tf::float64);
    CHECK(stddev(n) == Approx(sd).epsilon(0.02));
    CHECK(max_abs(n) > 3 * sd);  // 120000 normal draws: P(all within 3 sd) ~ e^-324
    const tf::Tensor u =
        K::initializers::VarianceScaling(c.scale, c.mode, "uniform", 7)({400, 300}, tf::float64);
    const double limit = std::sqrt(3 * c.scale / c.n);
    CHECK(max_abs(u) <= limit);
    CHECK(max_abs(u) > 0.999 * limit);
    CHECK(stddev(u) == Approx(sd).epsilon(0.02));
  }
  // "normal" is Keras' alias of truncated_normal, case-insensitive; float32 draws too.
  const tf::Tensor a = K::initializers::VarianceScaling(1.0, "fan_in", "Normal", 9)({400, 300});
  CHECK(a.dtype() == tf::float32);
  CHECK(max_abs(a) <= 2 * 0.05 / 0.87962566103423978 + 1e-6);
  // A convolution kernel (3, 3, 16, 32): fan_in 144, fan_out 288.
  const tf::Tensor conv =
      K::initializers::VarianceScaling(2.0, "fan_out", "uniform", 1)({3, 3, 16, 32}, tf::float64);
  CHECK(max_abs(conv) <= std::sqrt(6.0 / 288));
  CHECK(max_abs(conv) > 0.99 * std::sqrt(6.0 / 288));
  // Axis lists (both given): fan_in = 4 * 5 = 20 on (4, 5, 600), fan_out = 600 (axis -1).
  const tf::Tensor ax = K::initializers::VarianceScaling(1.0, "fan_in", "uniform", 2, {{0, 1}},
                                                         {{-1}})({4, 5, 600}, tf::float64);
  CHECK(max_abs(ax) <= std::sqrt(3.0 / 20));
  CHECK(max_abs(ax) > 0.99 * std::sqrt(3.0 / 20));
  const tf::Tensor ao = K::initializers::VarianceScaling(1.0, "fan_out", "uniform", 2, {{0, 1}},
                                                         {{-1}})({4, 5, 600}, tf::float64);
  CHECK(max_abs(ao) <= std::sqrt(3.0 / 600));
  // Only one list given: Keras ignores it and uses compute_fans (fan_in 5 * 4 = 20 here too,
  // fan_out 600 * 4 = 2400).
  const tf::Tensor one = K::initializers::VarianceScaling(1.0, "fan_out", "uniform", 2, {{0}})(
      {4, 5, 600}, tf::float64);
  CHECK(max_abs(one) <= std::sqrt(3.0 / 2400));
  CHECK(max_abs(one) > 0.99 * std::sqrt(3.0 / 2400));
  // A seed repeats its draw; identifiers.
  CHECK(tf::reduce_all(
            tf::equal(K::initializers::VarianceScaling(1.0, "fan_in", "uniform", 4)({3, 3}),
                      K::initializers::VarianceScaling(1.0, "fan_in", "uniform", 4)({3, 3})))
            .item<bool>());
  CHECK(K::Initializer("variance_scaling").name() == "variance_scaling");
  CHECK(K::initializers::get("variance_scaling")({2, 2}).shape() == tf::TensorShape({2, 2}));
}

TEST_CASE("VarianceScaling: Keras' errors", "[cpu][keras][initializers]") {
  // Keras 3.15's messages.
  require_error([] { K::initializers::VarianceScaling(0.0); },
                {"[variance_scaling] Argument `scale` must be positive float. Received: scale=0"});
  require_error(
      [] { K::initializers::VarianceScaling(1.0, "x"); },
      {"[variance_scaling] Invalid `mode` argument: x. Please use one of fan_in, fan_out, "
       "fan_avg"});
  require_error([] { K::initializers::VarianceScaling(1.0, "fan_in", "x"); },
                {"[variance_scaling] Invalid `distribution` argument: x."});
  // Keras: IndexError (tuple index out of range).
  require_error(
      [] {
        K::initializers::VarianceScaling(1.0, "fan_in", "uniform", {}, {{5}}, {{0}})({2, 3});
      },
      {"[variance_scaling] input axis 5 is out of range for shape (2, 3)"});
  require_error(
      [] {
        K::initializers::VarianceScaling(1.0, "fan_in", "uniform", {}, {{0}}, {{-3}})({2, 3});
      },
      {"[variance_scaling] output axis -3 is out of range for shape (2, 3)"});
  require_error(
      [] {
        K::initializers::VarianceScaling()({2, 3}, tf::int32);
      },
      {"[variance_scaling] initializes floating weights only", "int32"});
}

TEST_CASE("VarianceScaling: configs as Keras 3.15 writes and reads them",
          "[cpu][keras][initializers][serialization]") {
  K::layers::Dense dense(
      3, "", true, K::initializers::VarianceScaling(2.0, "fan_out", "normal", 3, {{0, 1}}, {{-1}}));
  dense.build({tf::None, 4});
  const std::string json = K::saving::get_config_json(dense);
  // json.dumps(keras.layers.Dense(3, kernel_initializer=keras.initializers.VarianceScaling(
  //     scale=2.0, mode='fan_out', distribution='normal', seed=3, input_axes=[0, 1],
  //     output_axes=[-1])).get_config()['kernel_initializer'], separators=(',', ':')).
  CHECK(json.find(R"({"module":"keras.initializers","class_name":"VarianceScaling","config":)"
                  R"({"seed":3,"scale":2.0,"mode":"fan_out","distribution":"truncated_normal",)"
                  R"("input_axes":[0,1],"output_axes":[-1]},"registered_name":null})") !=
        std::string::npos);
  CHECK(K::saving::get_config_json(K::saving::from_config_json("Dense", json)) == json);
  // keras.initializers.get('variance_scaling').get_config(): Keras' defaults.
  K::layers::Dense plain(3, "", true, K::Initializer("variance_scaling"));
  CHECK(K::saving::get_config_json(plain).find(
            R"("config":{"seed":null,"scale":1.0,"mode":"fan_in","distribution":)"
            R"("truncated_normal","input_axes":null,"output_axes":null})") != std::string::npos);
  // GlorotUniform and the other subclasses keep writing seed and the two null axis lists.
  K::layers::Dense glorot(3);
  CHECK(K::saving::get_config_json(glorot).find(
            R"("class_name":"GlorotUniform","config":{"seed":null,"input_axes":null,)"
            R"("output_axes":null})") != std::string::npos);

  // A Keras 2 style object (no module, keys left out: Keras' defaults), as Keras applications'
  // EfficientNet writes its convolution kernels' initializer.
  const std::string keras2 = R"({"name": "d", "units": 2, "kernel_initializer": {"class_name":
      "VarianceScaling", "config": {"scale": 2.0, "mode": "fan_out", "distribution":
      "truncated_normal"}}})";
  K::Layer read = K::saving::from_config_json("Dense", keras2);
  read.build({tf::None, 5});
  const std::string back = K::saving::get_config_json(read);
  CHECK(back.find(R"("config":{"seed":null,"scale":2.0,"mode":"fan_out","distribution":)"
                  R"("truncated_normal","input_axes":null,"output_axes":null})") !=
        std::string::npos);
  // fan_out 2: standard deviation 1, truncated at 2 / 0.8796...
  CHECK(read.weights()[0].shape() == tf::TensorShape({5, 2}));

  // Bad values name the key and Keras' complaint; a stray key is refused.
  require_error(
      [] {
        K::saving::from_config_json(
            "Dense", R"({"units": 2, "kernel_initializer": {"class_name": "VarianceScaling",
            "config": {"mode": "fan_sideways"}}})");
      },
      {"[from_config] Dense config key \"kernel_initializer\" is not a valid VarianceScaling",
       "Invalid `mode` argument: fan_sideways"});
  require_error(
      [] {
        K::saving::from_config_json(
            "Dense", R"({"units": 2, "kernel_initializer": {"class_name": "VarianceScaling",
            "config": {"input_axes": "0"}}})");
      },
      {"input_axes\" must be a list of integers, got \"0\""});
  require_error(
      [] {
        K::saving::from_config_json(
            "Dense", R"({"units": 2, "kernel_initializer": {"class_name": "VarianceScaling",
            "config": {"gain": 1.0}}})");
      },
      {"config key \"gain\" is not supported by tapeflow"});
}

TEST_CASE("EinsumDense gives VarianceScaling initializers the kernel's fans",
          "[cpu][keras][initializers]") {
  // "ab,bcd->acd", output (4, 5), input (None, 6): kernel (6, 4, 5), fan_in 6 (from the input),
  // fan_out 20. compute_fans would give fan_in 24. Keras 3.15's LecunUniform kernel: largest
  // |value| 0.7058, limit sqrt(3 / 6) = 0.7071.
  struct Case {
    K::Initializer init;
    double limit;
  };
  const std::vector<Case> cases = {
      {K::initializers::LecunUniform(1), std::sqrt(3.0 / 6)},
      {K::initializers::HeUniform(2), std::sqrt(6.0 / 6)},
      {K::initializers::GlorotUniform(3), std::sqrt(6.0 / 26)},
      {K::initializers::VarianceScaling(1.0, "fan_out", "uniform", 4), std::sqrt(3.0 / 20)},
      // One axis list only: Keras replaces both with the kernel's.
      {K::initializers::VarianceScaling(1.0, "fan_in", "uniform", 5, {{0, 1}}), std::sqrt(3.0 / 6)},
      // Both given: kept (fan_in 6 * 4 = 24; Keras 3.15: 0.3512 for a limit of 0.3536).
      {K::initializers::VarianceScaling(1.0, "fan_in", "uniform", 6, {{0, 1}}, {{2}}),
       std::sqrt(3.0 / 24)},
  };
  for (const Case& c : cases) {
    INFO(c.init.name() << " limit " << c.limit);
    K::layers::EinsumDenseOptions o;
    o.kernel_initializer = c.init;
    K::layers::EinsumDense e("ab,bcd->acd", std::vector<int64_t>{4, 5}, o);
    e.build({tf::None, 6});
    const double m = max_abs(e.kernel().value());
    CHECK(m <= c.limit * (1 + 1e-6));
    CHECK(m > 0.9 * c.limit);
  }
}

TEST_CASE("Seeded initializers repeat their values at every call; unseeded ones do not",
          "[cpu][keras][initializers]") {
  namespace I = K::initializers;
  auto same = [](const tf::Tensor& a, const tf::Tensor& b) {
    return tf::reduce_all(tf::equal(a, b)).item<bool>();
  };
  const std::vector<K::Initializer> seeded = {
      I::RandomNormal(0.0, 1.0, 11),
      I::RandomUniform(-1.0, 1.0, 11),
      I::TruncatedNormal(0.0, 1.0, 11),
      I::GlorotUniform(11),
      I::GlorotNormal(11),
      I::HeUniform(11),
      I::HeNormal(11),
      I::LecunUniform(11),
      I::LecunNormal(11),
      I::Orthogonal(1.0, 11),
      I::VarianceScaling(1.0, "fan_avg", "untruncated_normal", 11)};
  const std::vector<K::Initializer> unseeded = {
      I::RandomNormal(),
      I::RandomUniform(),
      I::TruncatedNormal(),
      I::GlorotUniform(),
      I::HeNormal(),
      I::Orthogonal(),
      I::VarianceScaling(1.0, "fan_avg", "untruncated_normal")};
  for (const K::Initializer& init : seeded) {
    INFO(init.name());
    CHECK(same(init({6, 5}), init({6, 5})));
    // A copy, as two layers given one initializer hold.
    const K::Initializer copy = init;
    CHECK(same(init({6, 5}, tf::float64), copy({6, 5}, tf::float64)));
  }
  for (const K::Initializer& init : unseeded) {
    INFO(init.name());
    CHECK_FALSE(same(init({6, 5}), init({6, 5})));
  }
  // As in Keras, two Dense layers given one seeded initializer get the same kernel.
  K::layers::Dense a(3, "", true, I::GlorotUniform(5)), b(3, "", true, I::GlorotUniform(5));
  a.build({tf::None, 4});
  b.build({tf::None, 4});
  CHECK(same(a.weights()[0].value(), b.weights()[0].value()));
  // Under a global seed the unseeded draws are reproducible.
  tf::random::set_seed(7);
  const tf::Tensor first = I::GlorotUniform()({4, 4});
  tf::random::set_seed(7);
  CHECK(same(first, I::GlorotUniform()({4, 4})));
  tf::detail::clear_random_seed();
}
