// The stateless samplers (ops/array_more.h): stateless_truncated_normal, stateless_categorical,
// stateless_gamma, stateless_poisson, integer stateless_uniform, fold_in and split, on every
// device of devices_under_test(). One seed pair gives the same samples eagerly, again, and at
// every call of a traced function (also over a None batch); another pair gives others; the
// samples follow their distributions (moments on 20000 draws); the stateless shape rule and the
// errors name the op.
#include <algorithm>
#include <array>
#include <cmath>
#include <set>
#include <vector>

#include "autograd/tape.h"
#include "core/device.h"
#include "core/error.h"
#include "core/tensor.h"
#include "jit/function.h"
#include "ops/array_more.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/movement.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
using tf::testing::check_close;
using tf::testing::require_error;

namespace {

constexpr std::array<int64_t, 2> kSeed{7, 11};
constexpr std::array<int64_t, 2> kOther{7, 12};

double mean_of(const tf::Tensor& t) {
  return tf::reduce_mean(tf::cast(t, tf::float64)).item<double>();
}
double variance_of(const tf::Tensor& t) {
  const tf::Tensor x = tf::cast(t, tf::float64);
  return tf::reduce_mean(tf::square(x - tf::reduce_mean(x))).item<double>();
}
bool same(const tf::Tensor& a, const tf::Tensor& b) {
  return tf::reduce_all(tf::equal(a, b)).item<bool>();
}

}  // namespace

TEST_CASE("stateless samplers repeat for one seed pair, eagerly and traced",
          "[cpu][cuda][random][stateless]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor logits = tf::constant({{0.0f, 1.0f, 2.0f}, {3.0f, 0.0f, -1.0f}});
    const tf::Tensor alpha = tf::constant({0.5f, 2.0f, 9.0f});
    const tf::Tensor lam = tf::constant({0.5f, 4.0f, 40.0f});
    auto draw = [&](std::array<int64_t, 2> seed) {
      return std::vector<tf::Tensor>{tf::random::stateless_truncated_normal({64}, seed, 1.0, 2.0),
                                     tf::random::stateless_categorical(logits, 32, seed),
                                     tf::random::stateless_gamma({4, 3}, seed, alpha),
                                     tf::random::stateless_poisson({4, 3}, seed, lam),
                                     tf::random::stateless_uniform({64}, seed, -5, 5, tf::int32)};
    };
    const std::vector<tf::Tensor> a = draw(kSeed), b = draw(kSeed), c = draw(kOther);
    auto f = tf::function([&](const tf::Tensor&) { return draw(kSeed); });
    const std::vector<tf::Tensor> t1 = f(tf::zeros({1})), t2 = f(tf::zeros({1}));
    for (size_t i = 0; i < a.size(); ++i) {
      INFO("sampler " << i);
      CHECK(same(a[i], b[i]));
      CHECK_FALSE(same(a[i], c[i]));
      CHECK(same(a[i], t1[i]));
      CHECK(same(a[i], t2[i]));
    }
    // The first draw of truncated_normal is stateless_normal's for the pair (in float64).
    const tf::Tensor n = tf::random::stateless_normal({64}, kSeed, 0.0, 1.0, tf::float64);
    const tf::Tensor kept = tf::cast(n * 2.0 + 1.0, tf::float32);
    CHECK(same(tf::where(tf::less_equal(tf::abs(n), 2.0), kept, a[0]), a[0]));

    // Over a None batch, one graph draws what eager calls draw for each batch size.
    auto g = tf::function(
        [](const tf::Tensor& lg) { return tf::random::stateless_categorical(lg, 5, kSeed); },
        tf::FunctionOptions{.input_signature = {tf::TensorSpec({tf::None, 3})}});
    for (int64_t rows : {2, 5}) {
      const tf::Tensor lg = tf::reshape(tf::cast(tf::range(0, 3 * rows), tf::float32), {rows, 3});
      CHECK(same(g(lg), tf::random::stateless_categorical(lg, 5, kSeed)));
    }
    CHECK(g.tracing_count() == 1);
  }
}

TEST_CASE("stateless samplers follow their distributions", "[cpu][cuda][random][stateless]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    // Truncated at two standard deviations: variance 0.7737 sigma^2, inside [mean +- 2 sigma].
    const tf::Tensor t =
        tf::random::stateless_truncated_normal({20000}, kSeed, 1.0, 2.0, tf::float64);
    CHECK(mean_of(t) == Approx(1.0).margin(0.03));
    CHECK(variance_of(t) == Approx(0.77374 * 4).epsilon(0.03));
    CHECK(tf::reduce_max(tf::abs(t - 1.0)).item<double>() <= 4.0);

    // Categorical: the class frequencies of softmax([0, 1, 2]).
    const tf::Tensor cls = tf::random::stateless_categorical(tf::constant({{0.0f, 1.0f, 2.0f}}),
                                                             20000, kSeed, tf::int32);
    const double z = 1 + std::exp(1.0) + std::exp(2.0);
    for (int k = 0; k < 3; ++k)
      CHECK(mean_of(tf::equal(cls, k)) == Approx(std::exp(double(k)) / z).margin(0.01));

    // Gamma(alpha, beta) with alpha of shape (2,) broadcast along (10000, 2): mean alpha / beta,
    // variance alpha / beta^2, on both sides of alpha = 1.
    const tf::Tensor g = tf::random::stateless_gamma({10000, 2}, kSeed, tf::constant({0.4, 5.0}),
                                                     tf::constant({2.0}), tf::float64);
    const std::vector<double> alphas = {0.4, 5.0};
    for (int64_t j = 0; j < 2; ++j) {
      const tf::Tensor col = tf::slice(g, {0, j}, {-1, 1});
      const double a = alphas[static_cast<size_t>(j)];
      CHECK(mean_of(col) == Approx(a / 2).epsilon(0.04));
      CHECK(variance_of(col) == Approx(a / 4).epsilon(0.08));
    }

    // Poisson on both samplers' sides of lam = 10, as int32.
    const tf::Tensor p =
        tf::random::stateless_poisson({10000, 2}, kSeed, tf::constant({3.0f, 30.0f}), tf::int32);
    CHECK(p.dtype() == tf::int32);
    CHECK(mean_of(tf::slice(p, {0, 0}, {-1, 1})) == Approx(3.0).epsilon(0.03));
    CHECK(mean_of(tf::slice(p, {0, 1}, {-1, 1})) == Approx(30.0).epsilon(0.02));
    CHECK(variance_of(tf::slice(p, {0, 1}, {-1, 1})) == Approx(30.0).epsilon(0.08));

    // Integer uniform: every value of [-3, 3) appears, nothing else.
    const tf::Tensor u = tf::random::stateless_uniform({5000}, kSeed, -3, 3, tf::int64);
    CHECK(u.dtype() == tf::int64);
    const std::vector<int64_t> values = u.numpy<int64_t>();
    CHECK(std::set<int64_t>(values.begin(), values.end()) ==
          std::set<int64_t>{-3, -2, -1, 0, 1, 2});
  }
}

TEST_CASE("stateless_gamma's gradient is the implicit one", "[cpu][cuda][random][stateless]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    // d E[x] / d alpha = 1 / beta and d E[x] / d beta = -alpha / beta^2, averaged over samples.
    const tf::Tensor alpha = tf::constant({1.5}), beta = tf::constant({2.0});
    tf::GradientTape tape(tf::TapeOptions{.persistent = true});
    tape.watch(alpha);
    tape.watch(beta);
    const tf::Tensor x = tf::random::stateless_gamma({20000}, kSeed, alpha, beta, tf::float64);
    const tf::Tensor m = tf::reduce_mean(x);
    CHECK(tape.gradient(m, alpha).item<double>() == Approx(0.5).epsilon(0.03));
    CHECK(tape.gradient(m, beta).item<double>() == Approx(-1.5 / 4).epsilon(0.03));
  }
}

TEST_CASE("fold_in and split derive distinct, repeatable pairs", "[cpu][random][stateless]") {
  const auto a = tf::random::fold_in(kSeed, 3), b = tf::random::fold_in(kSeed, 3);
  CHECK(a == b);
  CHECK(a != tf::random::fold_in(kSeed, 4));
  CHECK(a != tf::random::fold_in(kOther, 3));
  const auto parts = tf::random::split(kSeed, 4);
  REQUIRE(parts.size() == 4);
  std::set<std::array<int64_t, 2>> distinct(parts.begin(), parts.end());
  distinct.insert(kSeed);
  CHECK(distinct.size() == 5);
  CHECK(tf::random::split(kSeed, 4) == parts);
  // Streams of derived pairs are unrelated: correlation near 0.
  const tf::Tensor x = tf::random::stateless_normal({20000}, parts[0], 0, 1, tf::float64);
  const tf::Tensor y = tf::random::stateless_normal({20000}, parts[1], 0, 1, tf::float64);
  CHECK(std::abs(tf::reduce_mean(x * y).item<double>()) < 0.03);
  require_error([] { tf::random::split(kSeed, -1); }, {"[split] num must be non-negative"});
}

TEST_CASE("stateless samplers reject bad arguments naming the op", "[cpu][random][stateless]") {
  require_error([] { tf::random::stateless_truncated_normal({2}, kSeed, 0, 1, tf::int32); },
                {"[stateless_truncated_normal] dtype must be"});
  require_error([] { tf::random::stateless_categorical(tf::zeros({3}), 2, kSeed); },
                {"[stateless_categorical] logits must be (batch, classes)"});
  require_error(
      [] {
        tf::random::stateless_gamma({2}, kSeed, tf::constant({1.0f, 2.0f, 3.0f}));
      },
      {"[stateless_random_gamma]", "(3,)", "(2,)"});
  require_error(
      [] {
        tf::random::stateless_gamma({3}, kSeed, tf::ones({2, 3}));
      },
      {"[stateless_random_gamma] alpha of shape (2, 3) does not broadcast to the "
       "output shape (3,)"});
  require_error([] { tf::random::stateless_poisson({2}, kSeed, tf::ones({2}), tf::uint8); },
                {"[stateless_random_poisson] dtype must be"});
  require_error([] { tf::random::stateless_uniform({2}, kSeed, 0.5, 3, tf::int32); },
                {"[stateless_random_uniform] minval and maxval must be whole numbers"});
  require_error([] { tf::random::stateless_uniform({2}, kSeed, 0, 1, tf::bool_); },
                {"[stateless_random_uniform] dtype must be"});
}
