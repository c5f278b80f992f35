// The tf::nn activations added for TF2 guides (softplus, softsign, elu, selu, leaky_relu, gelu,
// silu/swish) and the norm composites (norm, clip_by_norm): every floating dtype on every
// device against float64 references on random inputs and special values, TensorFlow 2.21's
// values at a few points, and the argument errors.
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "core/error.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/linalg.h"
#include "ops/nn.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
using tf::testing::check_values;
using tf::testing::require_error;
using tf::testing::rtol_of;

namespace {

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

const std::vector<tf::DType> kFloating = {tf::float16, tf::bfloat16, tf::float32, tf::float64};

double ref_softplus(double x) {
  return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
}
double ref_elu(double x) { return x < 0 ? std::expm1(x) : x; }
double ref_selu(double x) {
  return x < 0 ? 1.7580993408473768599402175208123 * std::expm1(x)
               : 1.0507009873554804934193349852946 * x;
}
double ref_gelu(double x) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); }
double ref_gelu_tanh(double x) {
  return 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}
double ref_silu(double x) { return x / (1 + std::exp(-x)); }

struct ActivationCase {
  const char* name;
  std::function<tf::Tensor(const tf::Tensor&)> fn;
  std::function<double(double)> ref;
};

const std::vector<ActivationCase>& activation_cases() {
  static const std::vector<ActivationCase> cases = {
      {"softplus", [](const tf::Tensor& x) { return tf::nn::softplus(x); }, ref_softplus},
      {"softsign", [](const tf::Tensor& x) { return tf::nn::softsign(x); },
       [](double x) { return x / (1 + std::abs(x)); }},
      {"elu", [](const tf::Tensor& x) { return tf::nn::elu(x); }, ref_elu},
      {"selu", [](const tf::Tensor& x) { return tf::nn::selu(x); }, ref_selu},
      {"leaky_relu", [](const tf::Tensor& x) { return tf::nn::leaky_relu(x); },
       [](double x) { return x > 0 ? x : x * 0.2; }},
      {"leaky_relu alpha 2", [](const tf::Tensor& x) { return tf::nn::leaky_relu(x, 2.0); },
       [](double x) { return x > 0 ? x : x * 2.0; }},
      {"gelu", [](const tf::Tensor& x) { return tf::nn::gelu(x); }, ref_gelu},
      {"gelu approximate", [](const tf::Tensor& x) { return tf::nn::gelu(x, true); },
       ref_gelu_tanh},
      {"silu", [](const tf::Tensor& x) { return tf::nn::silu(x); }, ref_silu},
      {"swish beta 1.5", [](const tf::Tensor& x) { return tf::nn::swish(x, 1.5); },
       [](double x) { return x / (1 + std::exp(-1.5 * x)); }},
  };
  return cases;
}

// Random values in [-20, 20) (both sides of softplus' and the exponentials' ranges) and the
// special points: signed zeros, tiny, TF's softplus cut-offs, large, infinities and NaN.
std::vector<double> activation_inputs(size_t n) {
  auto v = tf::testing::random_values(n, -20, 20, 5);
  for (double s : {0.0, -0.0, 1e-8, -1e-8, 1.0, -1.0, 13.9, 14.0, -14.0, 20.0, -20.0, 100.0,
                   -100.0, kInf, -kInf, kNan})
    v.push_back(s);
  return v;
}

}  // namespace

TEST_CASE("activations match float64 references on every floating dtype",
          "[cpu][cuda][nn][activation]") {
  for (const auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    for (const auto& c : activation_cases()) {
      for (const auto d : kFloating) {
        for (const size_t n : {size_t{0}, size_t{5}, size_t{5000}}) {
          INFO(c.name << " on " << tf::dtype_name(d) << ", n " << n << " on " << dev.to_string());
          const auto vals = activation_inputs(n);
          const int64_t size = static_cast<int64_t>(vals.size());
          const tf::Tensor x = tf::detail::from_doubles(vals, {size}, d);
          const tf::Tensor y = c.fn(x);
          REQUIRE(y.dtype() == d);
          REQUIRE(y.shape() == x.shape());
          CHECK(y.device() == dev.to_string());
          const auto xin = tf::detail::to_double_vector(x);
          std::vector<double> want(xin.size());
          for (size_t i = 0; i < xin.size(); ++i) want[i] = c.ref(xin[i]);
          want = tf::detail::to_double_vector(tf::detail::from_doubles(want, {size}, d));
          // A composite rounds after each of its few ops (in the half types too).
          const double tol = 4 * rtol_of(d);
          check_values(y, want, tol, tol);
        }
      }
    }
  }
}

TEST_CASE("activations give TensorFlow 2.21's float32 values", "[cpu][cuda][nn][activation]") {
  for (const auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    INFO(dev.to_string());
    const tf::Tensor x = tf::constant({-14.0f, -1.0f, 1.0f, 14.0f});
    // Each list is TF 2.21's output (CPU) for x.
    // softplus(-14): TF returns exp(-14) below its cut-off (-13.94), 4e-7 above the true value
    // that tapeflow gives (8.3152838e-07).
    check_values(tf::nn::softplus(x),
                 {8.315287232107949e-07, 0.3132616877555847, 1.31326162815094, 14.0}, 5e-7, 0);
    check_values(tf::nn::softsign(x),
                 {-0.9333333373069763, -0.5, 0.5, 0.9333333373069763}, 1e-7, 0);
    check_values(tf::nn::elu(x), {-0.9999991655349731, -0.6321205496788025, 1.0, 14.0}, 1e-7,
                 0);
    // selu(-1): the GPU's expm1 is one ulp (1.1e-7 relative) from TF's.
    check_values(tf::nn::selu(x),
                 {-1.7580978870391846, -1.1113307476043701, 1.0507010221481323, 14.709814071655273},
                 dev.is_gpu() ? 2.2e-7 : 1e-7, 0);
    check_values(tf::nn::leaky_relu(x),
                 {-2.799999952316284, -0.20000000298023224, 1.0, 14.0}, 0, 0);
    check_values(tf::nn::silu(x), {-1.1641392120509408e-05, -0.26894140243530273,
                                   0.7310585379600525, 13.999988555908203},
                 2e-7, 0);
    const tf::Tensor g = tf::constant({-3.0f, -1.0f, 0.0f, 1.0f, 3.0f});
    check_values(tf::nn::gelu(g), {-0.004049695562571287, -0.15865525603294373, 0.0,
                                   0.8413447141647339, 2.995950222015381},
                 2e-7, 0);
    check_values(tf::nn::gelu(g, true),
                 {-0.00363752, -0.15880799293518066, 0.0, 0.8411920070648193, 2.9963627}, 2e-7,
                 3e-7);
    // -3 and 3: the 8 digits of TF's docstring. At -3, 1 + tanh(-3.357) cancels: one float32 ulp
    // of the tanh moves the result by 9e-8 (the exact value is -0.00363739); TF's Eigen tanh, the
    // vectorised loop's and the scalar one (the -O1 sanitizer build) differ by up to two ulps.
    // Special values, as TF: softsign(+-inf) and gelu(-inf) are NaN, elu(-inf) is -1.
    const tf::Tensor s = tf::constant({kInf, -kInf, kNan});
    const tf::Tensor s32 = tf::cast(s, tf::float32);
    check_values(tf::nn::softplus(s32), {kInf, 0.0, kNan}, 0, 0);
    check_values(tf::nn::softsign(s32), {kNan, kNan, kNan}, 0, 0);
    check_values(tf::nn::elu(s32), {kInf, -1.0, kNan}, 0, 0);
    check_values(tf::nn::selu(s32), {kInf, -1.7580993175506592, kNan}, 1e-7, 0);
    check_values(tf::nn::leaky_relu(s32), {kInf, -kInf, kNan}, 0, 0);
    check_values(tf::nn::gelu(s32), {kInf, kNan, kNan}, 0, 0);
    check_values(tf::nn::gelu(s32, true), {kInf, kNan, kNan}, 0, 0);
    check_values(tf::nn::silu(s32), {kInf, kNan, kNan}, 0, 0);
    // Signed zeros: -0.0 stays -0.0 where TF keeps it.
    const tf::Tensor mz = tf::constant({-0.0f});
    for (const auto& [name, y] : std::vector<std::pair<std::string, tf::Tensor>>{
             {"softsign", tf::nn::softsign(mz)},
             {"elu", tf::nn::elu(mz)},
             {"selu", tf::nn::selu(mz)},
             {"leaky_relu", tf::nn::leaky_relu(mz)},
             {"gelu", tf::nn::gelu(mz)},
             {"silu", tf::nn::silu(mz)}}) {
      INFO(name);
      CHECK(std::signbit(y.numpy<float>()[0]));
    }
    // No overflow far out in float64 either.
    check_values(tf::nn::softplus(tf::constant({-800.0, 800.0})), {0.0, 800.0}, 0, 0);
  }
}

TEST_CASE("activations reject non-floating dtypes - leaky_relu casts integers to float32",
          "[cpu][nn][activation]") {
  for (const char* name : {"softplus", "softsign", "elu", "selu", "gelu", "silu", "swish"}) {
    for (const auto d : {tf::int32, tf::int64, tf::uint8, tf::bool_}) {
      INFO(name << " on " << tf::dtype_name(d));
      const tf::Tensor x = tf::detail::from_doubles({1, 0}, {2}, d);
      const std::string op = std::string(name) == "swish" ? "silu" : name;
      require_error(
          [&] {
            const std::string n = name;
            if (n == "softplus") tf::nn::softplus(x);
            else if (n == "softsign") tf::nn::softsign(x);
            else if (n == "elu") tf::nn::elu(x);
            else if (n == "selu") tf::nn::selu(x);
            else if (n == "gelu") tf::nn::gelu(x);
            else if (n == "silu") tf::nn::silu(x);
            else tf::nn::swish(x);
          },
          {"[" + op + "]", std::string(tf::dtype_name(d))});
    }
  }
  for (const auto d : {tf::int32, tf::int64, tf::uint8}) {
    INFO(tf::dtype_name(d));
    const tf::Tensor y = tf::nn::leaky_relu(tf::detail::from_doubles({3, 0}, {2}, d));
    CHECK(y.dtype() == tf::float32);
    check_values(y, {3, 0}, 0, 0);
  }
  check_values(tf::nn::leaky_relu(tf::constant({-5, 2})), {-1.0, 2.0}, 1e-7, 0);
  require_error([] { tf::nn::leaky_relu(tf::detail::from_doubles({1}, {1}, tf::bool_)); },
                {"[leaky_relu]", "bool"});
  require_error([] { tf::nn::softplus(tf::Tensor()); }, {"[softplus]", "undefined"});
}

// ---- norm and clip_by_norm ----

TEST_CASE("norm matches TensorFlow 2.21 for every ord and axis form", "[cpu][cuda][linalg][norm]") {
  const double inf = kInf;
  for (const auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    INFO(dev.to_string());
    const tf::Tensor x = tf::constant({{3.0f, -4.0f}, {0.0f, 1.0f}});
    // TF 2.21's outputs on x.
    check_values(tf::norm(x), {5.099019527435303}, 1e-7, 0);
    CHECK(tf::norm(x).shape() == tf::TensorShape{});
    check_values(tf::norm(x, "euclidean", 0), {3.0, 4.123105525970459}, 1e-7, 0);
    check_values(tf::norm(x, "euclidean", -1), {5.0, 1.0}, 1e-7, 0);
    check_values(tf::norm(x, "euclidean", {0, 1}), {5.099019527435303}, 1e-7, 0);
    check_values(tf::norm(x, "fro", {1, 0}), {5.099019527435303}, 1e-7, 0);
    check_values(tf::norm(x, 2, 1), {5.0, 1.0}, 1e-7, 0);
    check_values(tf::norm(x, 2), {5.099019527435303}, 1e-7, 0);
    check_values(tf::norm(x, 1), {8.0}, 0, 0);
    check_values(tf::norm(x, 1, 0), {3.0, 5.0}, 0, 0);
    check_values(tf::norm(x, 1, 1), {7.0, 1.0}, 0, 0);
    check_values(tf::norm(x, 1, {0, 1}), {5.0}, 0, 0);
    check_values(tf::norm(x, 1, {1, 0}), {7.0}, 0, 0);
    check_values(tf::norm(x, inf), {4.0}, 0, 0);
    check_values(tf::norm(x, inf, 0), {3.0, 4.0}, 0, 0);
    check_values(tf::norm(x, inf, {0, 1}), {7.0}, 0, 0);
    check_values(tf::norm(x, inf, {1, 0}), {5.0}, 0, 0);
    check_values(tf::norm(x, 3), {4.514357566833496}, 1e-6, 0);
    check_values(tf::norm(x, 3, 1), {4.497941493988037, 1.0}, 1e-6, 0);
    check_values(tf::norm(x, 0.5), {22.392305374145508}, 1e-6, 0);
    check_values(tf::norm(x, 0.5, 1), {13.928203582763672, 1.0}, 1e-6, 0);
    const tf::Tensor kd = tf::norm(x, "euclidean", 1, true);
    CHECK(kd.shape() == tf::TensorShape({2, 1}));
    check_values(kd, {5.0, 1.0}, 1e-7, 0);
    CHECK(tf::norm(x, 1, {0, 1}, true).shape() == tf::TensorShape({1, 1}));
    // Integers with ord 1 and inf (as TF); the half types; a scalar; float32 overflow (TF: inf).
    const tf::Tensor n1 = tf::norm(tf::constant({3, -4}), 1);
    CHECK(n1.dtype() == tf::int32);
    check_values(n1, {7}, 0, 0);
    check_values(tf::norm(tf::constant({3, -4}), inf), {4}, 0, 0);
    check_values(tf::norm(tf::cast(tf::constant({3.0f, 4.0f}), tf::float16)), {5.0}, 0, 0);
    check_values(tf::norm(tf::constant(-3.0f)), {3.0}, 0, 0);
    check_values(tf::norm(tf::constant({3e30f, 4e30f})), {kInf}, 0, 0);
  }
}

TEST_CASE("norm matches float64 loops on random tensors", "[cpu][cuda][linalg][norm]") {
  for (const auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    const auto v = tf::testing::random_values(60, -3, 3, 7);
    for (const auto d : kFloating) {
      INFO(tf::dtype_name(d) << " on " << dev.to_string());
      const tf::Tensor x = tf::detail::from_doubles(v, {3, 4, 5}, d);
      const auto xv = tf::detail::to_double_vector(x);
      const double tol = 4 * rtol_of(d);
      auto at = [&](int i, int j, int k) { return xv[static_cast<size_t>((i * 4 + j) * 5 + k)]; };
      // Along axis 1: euclidean, 1, inf, 3.
      std::vector<double> e, o, m, p3;
      for (int i = 0; i < 3; ++i)
        for (int k = 0; k < 5; ++k) {
          double s2 = 0, s1 = 0, mx = 0, s3 = 0;
          for (int j = 0; j < 4; ++j) {
            const double a = std::abs(at(i, j, k));
            s2 += a * a;
            s1 += a;
            mx = std::max(mx, a);
            s3 += a * a * a;
          }
          e.push_back(std::sqrt(s2));
          o.push_back(s1);
          m.push_back(mx);
          p3.push_back(std::cbrt(s3));
        }
      check_values(tf::norm(x, "euclidean", 1), e, tol, tol);
      check_values(tf::norm(x, 1, 1), o, tol, tol);
      check_values(tf::norm(x, kInf, -2), m, tol, tol);
      check_values(tf::norm(x, 3, 1), p3, tol, tol);
      // Matrix norms over (0, 2): the largest column sum (1) and row sum (inf), and fro.
      std::vector<double> m1, minf, fro;
      for (int j = 0; j < 4; ++j) {
        double best1 = 0, bestinf = 0, f = 0;
        for (int k = 0; k < 5; ++k) {
          double col = 0;
          for (int i = 0; i < 3; ++i) col += std::abs(at(i, j, k));
          best1 = std::max(best1, col);
        }
        for (int i = 0; i < 3; ++i) {
          double row = 0;
          for (int k = 0; k < 5; ++k) {
            row += std::abs(at(i, j, k));
            f += at(i, j, k) * at(i, j, k);
          }
          bestinf = std::max(bestinf, row);
        }
        m1.push_back(best1);
        minf.push_back(bestinf);
        fro.push_back(std::sqrt(f));
      }
      check_values(tf::norm(x, 1, {0, 2}), m1, tol, tol);
      check_values(tf::norm(x, kInf, {0, -1}), minf, tol, tol);
      check_values(tf::norm(x, "fro", {2, 0}), fro, tol, tol);
      double all = 0;
      for (double a : xv) all += a * a;
      check_values(tf::norm(x), {std::sqrt(all)}, tol, tol);
    }
  }
}

TEST_CASE("norm rejects what TF rejects", "[cpu][linalg][norm]") {
  const tf::Tensor x = tf::zeros({2, 2});
  require_error([&] { tf::norm(x, "fro"); }, {"[norm]", "supported vector norm, got fro"});
  require_error([&] { tf::norm(x, "fro", 1); }, {"[norm]", "supported vector norm, got fro"});
  require_error([&] { tf::norm(x, 0); }, {"[norm]", "supported vector norm", "got 0"});
  require_error([&] { tf::norm(x, -1, 1); }, {"[norm]", "got -1"});
  require_error([&] { tf::norm(x, 3, {0, 1}); }, {"[norm]", "supported matrix norm", "got 3"});
  require_error([&] { tf::norm(x, "euclidean", {0, 0}); }, {"[norm]", "distinct"});
  require_error([&] { tf::norm(x, "euclidean", {0, 1, 1}); }, {"[norm]", "'axis'"});
  require_error([&] { tf::norm(x, "euclidean", 2); }, {"[norm]", "out of range"});
  require_error([&] { tf::norm(x, "l2"); }, {"[norm]", "\"l2\""});
  require_error([] { tf::norm(tf::constant({3, 4})); }, {"[norm]", "floating-point", "int32"});
  require_error([] { tf::norm(tf::constant({3, 4}), 3); }, {"[norm]", "int32"});
  require_error([] { tf::norm(tf::detail::from_doubles({1}, {1}, tf::bool_), 1); },
                {"[norm]", "bool"});
  // The spectral norm runs on svd, which (as TF's) takes float32 and float64 only.
  require_error([] { tf::norm(tf::zeros({2, 2}, tf::float16), 2, {0, 1}); }, {"[svd]", "float16"});
}

TEST_CASE("clip_by_norm matches TensorFlow 2.21", "[cpu][cuda][binary][norm]") {
  for (const auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    INFO(dev.to_string());
    const tf::Tensor v = tf::constant({{3.0f, 4.0f}, {1.0f, 0.0f}});
    // TF 2.21's outputs.
    check_values(tf::clip_by_norm(v, 1.0f),
                 {0.588348388671875, 0.7844645380973816, 0.1961161345243454, 0.0}, 1e-7, 0);
    check_values(tf::clip_by_norm(v, 1.0f, {1}), {0.6, 0.8, 1.0, 0.0}, 1e-7, 0);
    check_values(tf::clip_by_norm(v, 1.0f, 0), {0.9486832618713379, 1.0, 0.3162277638912201, 0},
                 1e-7, 0);
    check_values(tf::clip_by_norm(v, 100.0f), {3, 4, 1, 0}, 0, 0);
    check_values(tf::clip_by_norm(v, -1.0f), {0, 0, 0, 0}, 0, 0);
    check_values(tf::clip_by_norm(v, tf::constant({1.0f, 2.0f})),
                 {0.588348388671875, 1.5689290761947632, 0.1961161345243454, 0.0}, 1e-7, 0);
    check_values(tf::clip_by_norm(tf::constant({3.0, 4.0}), 1.0), {0.6, 0.8}, 1e-15, 0);
    check_values(tf::clip_by_norm(tf::constant({kInf, 4.0}), 1.0), {kNan, 0.0}, 0, 0);
    check_values(tf::clip_by_norm(tf::constant({3e30f, 4e30f}), 1.0f), {0, 0}, 0, 0);
    check_values(tf::clip_by_norm(tf::zeros({2, 2}), 1.0f), {0, 0, 0, 0}, 0, 0);
    // An integer clip_norm is cast to t's dtype; axes {} clips each element alone (TF's []).
    check_values(tf::clip_by_norm(tf::constant({3.0f, -0.5f}), 1, {}), {1.0, -0.5}, 0, 0);
    // The half types, against the float64 formula.
    for (const auto d : {tf::float16, tf::bfloat16}) {
      INFO(tf::dtype_name(d));
      const tf::Tensor h = tf::cast(v, d);
      const tf::Tensor y = tf::clip_by_norm(h, 2.0f, 1);
      CHECK(y.dtype() == d);
      check_values(y, {1.2, 1.6, 1.0, 0.0}, 2 * rtol_of(d), 0);
    }
  }
  require_error([] { tf::clip_by_norm(tf::constant({3, 4}), 1); },
                {"[clip_by_norm]", "floating-point", "int32"});
  require_error([] { tf::clip_by_norm(tf::zeros({2}), tf::zeros({3})); },
                {"[clip_by_norm]", "(3,)", "(2,)"});
  require_error([] { tf::clip_by_norm(tf::zeros({2}), tf::zeros({2, 2})); },
                {"[clip_by_norm]", "does not broadcast to t's shape (2,)"});
  require_error([] { tf::clip_by_norm(tf::zeros({2}), 1.0f, 1); },
                {"[", "out of range"});
}
