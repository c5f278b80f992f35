// Keras layers against plain float64 references: Dense, Conv2D, pooling, Flatten, Dropout,
// BatchNormalization (training, inference, moving statistics), ReLU, Softmax, activations,
// initializers and regularizers, lazy building and its shape errors, naming, and the mirrored
// build when several replica threads make the first call at once.
#include <algorithm>
#include <atomic>
#include <barrier>
#include <cmath>
#include <optional>
#include <thread>
#include <vector>

#include "autograd/tape.h"
#include "autograd/variable.h"
#include "core/device.h"
#include "core/error.h"
#include "distribute/replica_context.h"
#include "jit/function.h"
#include "keras/initializers.h"
#include "keras/layers.h"
#include "keras/regularizers.h"
#include "ops/binary.h"
#include "ops/copy.h"
#include "ops/factory.h"
#include "ops/movement.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "support/testing.h"

namespace tf = tapeflow;
namespace layers = tf::keras::layers;
using tf::testing::check_values;

namespace {

std::vector<double> vals(const tf::Tensor& t) { return tf::detail::to_double_vector(t); }

// Layers made while it lives have float64 weights (Keras' set_floatx), so references can be
// compared tightly.
struct Float64Layers {
  Float64Layers() { tf::keras::backend::set_floatx(tf::float64); }
  ~Float64Layers() { tf::keras::backend::set_floatx(tf::float32); }
};

tf::Tensor input(const tf::TensorShape& s, unsigned seed = 1, double lo = -1, double hi = 1) {
  return tf::convert_to_tensor(tf::testing::random_values(s.num_elements(), lo, hi, seed), s);
}

// Reference y = x @ k + b over the last axis.
std::vector<double> dense_ref(const std::vector<double>& x, const std::vector<double>& k,
                              const std::vector<double>& b, int64_t rows, int64_t in,
                              int64_t units) {
  std::vector<double> y(rows * units);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t u = 0; u < units; ++u) {
      double s = b.empty() ? 0.0 : b[u];
      for (int64_t i = 0; i < in; ++i) s += x[r * in + i] * k[i * units + u];
      y[r * units + u] = s;
    }
  return y;
}

int64_t name_number(const std::string& name, const std::string& base) {
  if (name == base) return 0;
  REQUIRE(name.rfind(base + "_", 0) == 0);
  return std::stoll(name.substr(base.size() + 1));
}

}  // namespace

TEST_CASE("Dense matches x @ kernel + bias with each activation", "[cpu][keras]") {
  Float64Layers f64;
  const tf::Tensor x = input({4, 5});
  for (std::string act : {"", "linear", "relu", "sigmoid", "tanh", "softmax"}) {
    layers::Dense d(3, act, true, tf::keras::initializers::RandomUniform(-1, 1),
                    tf::keras::initializers::RandomUniform(-1, 1));
    CHECK_FALSE(d.built());
    tf::Tensor y = d(x);
    CHECK(d.built());
    REQUIRE(d.kernel().shape() == tf::TensorShape({5, 3}));
    REQUIRE(d.bias().shape() == tf::TensorShape({3}));
    CHECK(d.kernel().dtype() == tf::float64);
    CHECK(d.dtype() == tf::float64);
    auto ref = dense_ref(vals(x), vals(d.kernel()), vals(d.bias()), 4, 5, 3);
    for (int64_t r = 0; r < 4; ++r) {
      double mx = -1e300, sum = 0;
      for (int u = 0; u < 3; ++u) mx = std::max(mx, ref[r * 3 + u]);
      for (int u = 0; u < 3; ++u) sum += std::exp(ref[r * 3 + u] - mx);
      for (int u = 0; u < 3; ++u) {
        double& v = ref[r * 3 + u];
        if (act == "relu") v = std::max(v, 0.0);
        if (act == "sigmoid") v = 1 / (1 + std::exp(-v));
        if (act == "tanh") v = std::tanh(v);
        if (act == "softmax") v = std::exp(v - mx) / sum;
      }
    }
    check_values(y, ref, 1e-12, 1e-12);
  }
}

TEST_CASE("Dense without bias, on rank-3 inputs, and with float32 autocast", "[cpu][keras]") {
  {
    Float64Layers f64;
    layers::Dense d(2, {.use_bias = false, .kernel_initializer = "random_uniform"});
    const tf::Tensor x = input({2, 3, 4});
    tf::Tensor y = d(x);
    CHECK(y.shape() == tf::TensorShape({2, 3, 2}));
    check_values(y, dense_ref(vals(x), vals(d.kernel()), {}, 6, 4, 2), 1e-12, 1e-12);
    CHECK(d.variables().size() == 1);
    TF_REQUIRE_THROWS_CONTAINING(d.bias(), tf::FailedPreconditionError, "has no weight 'bias'");
  }
  // Default floatx: float32 weights; float64 and int inputs are cast (Keras' autocast).
  layers::Dense d(2);
  tf::Tensor y = d(tf::ones({1, 3}, tf::float64));
  CHECK(y.dtype() == tf::float32);
  CHECK(d.kernel().dtype() == tf::float32);
  CHECK(d(tf::ones({1, 3}, tf::int32)).dtype() == tf::float32);
}

TEST_CASE("Dense kernels are glorot-uniform and biases zero", "[cpu][keras]") {
  tf::random::set_seed(7);
  layers::Dense d(300);
  (void)d(tf::zeros({2, 200}));
  const double limit = std::sqrt(6.0 / (200 + 300));
  auto k = vals(d.kernel());
  double mx = 0, sum = 0, sq = 0;
  for (double v : k) {
    mx = std::max(mx, std::abs(v));
    sum += v;
    sq += v * v;
  }
  const double n = double(k.size());
  CHECK(mx <= limit);
  CHECK(mx > 0.99 * limit);
  CHECK(std::abs(sum / n) < 0.01 * limit);
  // U(-a, a) has standard deviation a / sqrt(3).
  CHECK(std::sqrt(sq / n) == Approx(limit / std::sqrt(3.0)).epsilon(0.02));
  check_values(d.bias(), std::vector<double>(300, 0.0));
  // A convolution kernel's fans include the receptive field: (3*3*4, 3*3*8).
  layers::Conv2D c(8, 3);
  (void)c(tf::zeros({1, 5, 5, 4}));
  const double climit = std::sqrt(6.0 / (36 + 72));
  auto ck = vals(c.kernel());
  CHECK(*std::max_element(ck.begin(), ck.end()) <= climit);
  CHECK(*std::max_element(ck.begin(), ck.end()) > 0.9 * climit);
  CHECK(*std::min_element(ck.begin(), ck.end()) >= -climit);
  check_values(c.bias(), std::vector<double>(8, 0.0));
}

TEST_CASE("initializers follow Keras' formulas and names", "[cpu][keras]") {
  namespace init = tf::keras::initializers;
  auto [fi, fo] = tf::keras::detail::compute_fans({3, 3, 4, 8});
  CHECK(fi == 36);
  CHECK(fo == 72);
  check_values(init::Ones()({2}), {1, 1});
  check_values(init::Constant(2.5)({2}, tf::float64), {2.5, 2.5});
  // He normal: truncated at two standard deviations of sqrt(2 / fan_in) / 0.8796.
  tf::random::set_seed(3);
  auto h = vals(init::HeNormal()({100, 50}));
  const double sd = std::sqrt(2.0 / 100) / 0.87962566103423978;
  for (double v : h) CHECK(std::abs(v) <= 2 * sd + 1e-6);
  auto g = vals(init::GlorotNormal()({100, 100}));
  double sq = 0;
  for (double v : g) sq += v * v;
  CHECK(std::sqrt(sq / g.size()) == Approx(std::sqrt(2.0 / 200)).epsilon(0.05));
  auto hu = vals(init::HeUniform()({60, 10}));
  for (double v : hu) CHECK(std::abs(v) <= std::sqrt(6.0 / 60));
  CHECK(tf::keras::Initializer("he_normal").name() == "he_normal");
  TF_REQUIRE_THROWS_CONTAINING(tf::keras::Initializer("glorot_unifrom"),
                               tf::InvalidArgumentError, "glorot_unifrom");
}

TEST_CASE("activation strings: known names work and unknown ones name the string",
          "[cpu][keras]") {
  const tf::Tensor x = tf::constant({-1.0, 0.5});
  check_values(tf::keras::activations::get("relu")(x), {0, 0.5});
  check_values(tf::keras::activations::get("tanh")(x), {std::tanh(-1.0), std::tanh(0.5)}, 1e-12);
  check_values(tf::keras::activations::get("sigmoid")(x),
               {1 / (1 + std::exp(1.0)), 1 / (1 + std::exp(-0.5))}, 1e-12);
  CHECK_FALSE(tf::keras::activations::get("linear"));
  CHECK_FALSE(tf::keras::activations::get(""));
  // Keras 3.15's functions and defaults (its values on x = -1 and 0.5, float32 on TF).
  const tf::Tensor x32 = tf::constant({-1.0f, 0.5f});
  auto act = [&](const char* name) { return tf::keras::activations::get(name)(x32); };
  check_values(act("softplus"), {0.3132616877555847, 0.9740769863128662}, 1e-6);
  check_values(act("softsign"), {-0.5, 1.0 / 3.0}, 1e-6);
  check_values(act("elu"), {-0.6321205496788025, 0.5}, 1e-6);
  check_values(act("selu"), {-1.1113307476043701, 0.5253505110740662}, 1e-6);
  check_values(act("gelu"), {-0.15865525603294373, 0.34573123}, 1e-6);  // exact, not tanh
  check_values(act("silu"), {-0.2689414322376251, 0.3112296760082245}, 1e-6);
  check_values(act("swish"), {-0.2689414322376251, 0.3112296760082245}, 1e-6);
  check_values(act("leaky_relu"), {-0.2, 0.5}, 1e-6);  // negative_slope 0.2
  check_values(act("exponential"), {std::exp(-1.0), std::exp(0.5)}, 1e-6);
  layers::Dense gelu_dense(2, "gelu");
  CHECK(gelu_dense(tf::ones({3, 4})).shape() == tf::TensorShape({3, 2}));
  TF_REQUIRE_THROWS_CONTAINING(tf::keras::activations::get("rectifier"), tf::InvalidArgumentError,
                               "leaky_relu, exponential, relu6");
  TF_REQUIRE_THROWS_CONTAINING(layers::Dense(3, "relux"), tf::InvalidArgumentError, "'relux'");
  TF_REQUIRE_THROWS_CONTAINING(layers::Conv2D(3, 3, 1, "valid", "Relu"),
                               tf::InvalidArgumentError, "'Relu'");
}

namespace {
struct Pad {
  int64_t out, before;
};
Pad pad_of(int64_t in, int64_t k, int64_t s, bool same) {
  if (!same) return {(in - k) / s + 1, 0};
  const int64_t out = (in + s - 1) / s;
  return {out, std::max<int64_t>((out - 1) * s + k - in, 0) / 2};
}
}  // namespace

TEST_CASE("Conv2D matches a direct NHWC/HWIO convolution", "[cpu][keras]") {
  Float64Layers f64;
  struct Case {
    int kh, kw, sh, sw;
    std::string padding;
  };
  for (const Case& c : {Case{3, 3, 1, 1, "valid"}, Case{3, 2, 2, 1, "same"},
                        Case{2, 2, 2, 2, "SAME"}, Case{1, 1, 1, 1, "valid"}}) {
    const int64_t N = 2, H = 6, W = 5, C = 3, O = 4;
    layers::Conv2D conv(O, {c.kh, c.kw},
                        {.strides = {c.sh, c.sw},
                         .padding = c.padding,
                         .bias_initializer = tf::keras::initializers::RandomUniform(-1, 1)});
    const tf::Tensor x = input({N, H, W, C}, 5);
    tf::Tensor y = conv(x);
    const bool same = c.padding != "valid";
    const Pad ph = pad_of(H, c.kh, c.sh, same), pw = pad_of(W, c.kw, c.sw, same);
    REQUIRE(y.shape() == tf::TensorShape({N, ph.out, pw.out, O}));
    CHECK(conv.output_shape() == tf::TensorShape({tf::None, ph.out, pw.out, O}));
    REQUIRE(conv.kernel().shape() == tf::TensorShape({c.kh, c.kw, C, O}));
    auto xv = vals(x), k = vals(conv.kernel()), b = vals(conv.bias());
    std::vector<double> ref;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t oh = 0; oh < ph.out; ++oh)
        for (int64_t ow = 0; ow < pw.out; ++ow)
          for (int64_t o = 0; o < O; ++o) {
            double s = b[o];
            for (int64_t i = 0; i < c.kh; ++i)
              for (int64_t j = 0; j < c.kw; ++j) {
                const int64_t ih = oh * c.sh + i - ph.before, iw = ow * c.sw + j - pw.before;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                for (int64_t ci = 0; ci < C; ++ci)
                  s += xv[((n * H + ih) * W + iw) * C + ci] * k[((i * c.kw + j) * C + ci) * O + o];
              }
            ref.push_back(s);
          }
    check_values(y, ref, 1e-12, 1e-12);
  }
}

TEST_CASE("MaxPooling2D and AveragePooling2D match window loops", "[cpu][keras]") {
  Float64Layers f64;
  const int64_t N = 1, H = 5, W = 5, C = 2;
  const tf::Tensor x = input({N, H, W, C}, 9);
  const auto xv = vals(x);
  for (bool max : {true, false})
    for (std::string padding : {"valid", "same"}) {
      tf::keras::Layer pool;
      if (max) pool = layers::MaxPooling2D(2, std::nullopt, padding);
      else pool = layers::AveragePooling2D(2, std::nullopt, padding);
      CHECK(pool.class_name() == (max ? "MaxPooling2D" : "AveragePooling2D"));
      tf::Tensor y = pool(x);
      const bool same = padding == "same";
      // strides default to the pool size
      const Pad p = pad_of(H, 2, 2, same);
      REQUIRE(y.shape() == tf::TensorShape({N, p.out, p.out, C}));
      std::vector<double> ref;
      for (int64_t oh = 0; oh < p.out; ++oh)
        for (int64_t ow = 0; ow < p.out; ++ow)
          for (int64_t c = 0; c < C; ++c) {
            double m = -1e300, s = 0;
            int cnt = 0;
            for (int i = 0; i < 2; ++i)
              for (int j = 0; j < 2; ++j) {
                const int64_t ih = oh * 2 + i - p.before, iw = ow * 2 + j - p.before;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                const double v = xv[(ih * W + iw) * C + c];
                m = std::max(m, v);
                s += v;
                ++cnt;
              }
            ref.push_back(max ? m : s / cnt);
          }
      check_values(y, ref, 1e-12, 1e-12);
    }
  layers::MaxPooling2D strided({3, 2}, tf::keras::Size2(1, 2));
  CHECK(strided(x).shape() == tf::TensorShape({1, 3, 2, 2}));
  TF_REQUIRE_THROWS_CONTAINING(layers::MaxPooling2D(2, std::nullopt, "full"),
                               tf::InvalidArgumentError, "\"full\"");
  TF_REQUIRE_THROWS_CONTAINING(layers::AveragePooling2D()(tf::zeros({2, 4, 4})),
                               tf::InvalidArgumentError, "(None, 4, 4)");
}

TEST_CASE("Flatten keeps the batch and checks a declared input_shape", "[cpu][keras]") {
  layers::Flatten f;
  const tf::Tensor x = tf::reshape(tf::range(24), {2, 3, 4});
  tf::Tensor y = f(x);
  CHECK(y.shape() == tf::TensorShape({2, 12}));
  CHECK(y.dtype() == tf::int32);  // Flatten keeps the dtype
  check_values(y, vals(x));
  CHECK(f.output_shape() == tf::TensorShape({tf::None, 12}));

  layers::Flatten g({28, 28});
  CHECK(g.built());
  CHECK(g.input_shape() == tf::TensorShape({tf::None, 28, 28}));
  CHECK(g.output_shape() == tf::TensorShape({tf::None, 784}));
  CHECK(g(tf::zeros({3, 28, 28})).shape() == tf::TensorShape({3, 784}));
  CHECK(g(tf::zeros({0, 28, 28})).shape() == tf::TensorShape({0, 784}));
  const std::string n = g.name();
  try {
    (void)g(tf::zeros({3, 784}));
    FAIL("no error");
  } catch (const tf::InvalidArgumentError& e) {
    const std::string m = e.what();
    CHECK(m.find("[" + n + "]") != std::string::npos);
    CHECK(m.find("(None, 28, 28)") != std::string::npos);
    CHECK(m.find("(3, 784)") != std::string::npos);
  }
}

TEST_CASE("Dropout is the identity in inference and drops with scaling in training",
          "[cpu][keras]") {
  layers::Dropout d(0.25);
  CHECK(d.rate() == 0.25);
  const tf::Tensor x = tf::ones({100, 100});
  check_values(d(x), std::vector<double>(10000, 1.0));
  check_values(d(x, false), std::vector<double>(10000, 1.0));
  tf::random::set_seed(11);
  auto a = vals(d(x, true)), b = vals(d(x, true));
  int zeros = 0;
  for (double v : a) {
    if (v == 0) ++zeros;
    else CHECK(v == Approx(1 / 0.75));
  }
  CHECK(zeros / 10000.0 == Approx(0.25).margin(0.02));
  CHECK(a != b);  // a new mask per call
  layers::Dropout none(0.0);
  check_values(none(x, true), std::vector<double>(10000, 1.0));
  TF_REQUIRE_THROWS_CONTAINING(layers::Dropout(1.0), tf::InvalidArgumentError, "[0, 1)");
}

TEST_CASE("BatchNormalization: batch statistics and moving updates in training, moving "
          "statistics in inference",
          "[cpu][keras]") {
  Float64Layers f64;
  const int64_t N = 6, C = 3;
  layers::BatchNormalization bn;
  const tf::Tensor x = input({N, C}, 21, -2, 3);
  const auto xv = vals(x);
  tf::Tensor y = bn(x, true);
  REQUIRE(bn.trainable_variables().size() == 2);  // gamma, beta
  REQUIRE(bn.non_trainable_variables().size() == 2);
  CHECK(bn.trainable_variables()[0].name() == bn.name() + "/gamma:0");
  CHECK(bn.non_trainable_variables()[1].name() == bn.name() + "/moving_variance:0");
  CHECK(bn.count_params() == 4 * C);
  std::vector<double> mean(C, 0), var(C, 0), ref(N * C);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) mean[c] += xv[n * C + c] / N;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) var[c] += std::pow(xv[n * C + c] - mean[c], 2) / N;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      ref[n * C + c] = (xv[n * C + c] - mean[c]) / std::sqrt(var[c] + 1e-3);
  check_values(y, ref, 1e-10, 1e-10);
  std::vector<double> mm(C), mv(C);
  for (int64_t c = 0; c < C; ++c) {
    mm[c] = 0.01 * mean[c];
    mv[c] = 0.99 + 0.01 * var[c];
  }
  check_values(bn.moving_mean(), mm, 1e-12, 1e-12);
  check_values(bn.moving_variance(), mv, 1e-12, 1e-12);

  // Inference: moving statistics, gamma and beta, no update.
  bn.gamma().assign(tf::constant({2.0, 0.5, 1.0}));
  bn.beta().assign(tf::constant({0.1, -0.2, 0.3}));
  const std::vector<double> g = {2.0, 0.5, 1.0}, be = {0.1, -0.2, 0.3};
  tf::Tensor z = bn(x);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      ref[n * C + c] = (xv[n * C + c] - mm[c]) / std::sqrt(mv[c] + 1e-3) * g[c] + be[c];
  check_values(z, ref, 1e-10, 1e-10);
  check_values(bn.moving_mean(), mm, 1e-12, 1e-12);

  // A frozen layer runs in inference mode even with training = true (Keras).
  bn.set_trainable(false);
  check_values(bn(x, true), ref, 1e-10, 1e-10);
  CHECK(bn.trainable_variables().empty());
  CHECK(bn.non_trainable_variables().size() == 4);
  check_values(bn.moving_mean(), mm, 1e-12, 1e-12);
}

TEST_CASE("BatchNormalization over NHWC channels and over axis 1", "[cpu][keras]") {
  Float64Layers f64;
  const tf::Tensor x = input({2, 3, 2, 4}, 4);
  const auto xv = vals(x);
  for (int axis : {-1, 1}) {
    layers::BatchNormalization bn(axis, 0.9, 1e-5);
    tf::Tensor y = bn(x, true);
    const int a = axis < 0 ? 3 : axis;
    const int64_t dims[4] = {2, 3, 2, 4};
    const int64_t C = dims[a];
    CHECK(bn.gamma().shape() == tf::TensorShape({C}));
    std::vector<double> mean(C, 0), var(C, 0), cnt(C, 0);
    auto chan = [&](int64_t i) {
      int64_t idx[4];
      for (int d = 3; d >= 0; --d) {
        idx[d] = i % dims[d];
        i /= dims[d];
      }
      return idx[a];
    };
    for (int64_t i = 0; i < 48; ++i) mean[chan(i)] += xv[i], cnt[chan(i)] += 1;
    for (int64_t c = 0; c < C; ++c) mean[c] /= cnt[c];
    for (int64_t i = 0; i < 48; ++i) var[chan(i)] += std::pow(xv[i] - mean[chan(i)], 2);
    for (int64_t c = 0; c < C; ++c) var[c] /= cnt[c];
    std::vector<double> ref(48);
    for (int64_t i = 0; i < 48; ++i)
      ref[i] = (xv[i] - mean[chan(i)]) / std::sqrt(var[chan(i)] + 1e-5);
    check_values(y, ref, 1e-10, 1e-10);
    std::vector<double> mm(C);
    for (int64_t c = 0; c < C; ++c) mm[c] = 0.1 * mean[c];
    check_values(bn.moving_mean(), mm, 1e-12, 1e-12);
    TF_REQUIRE_THROWS_CONTAINING(bn(tf::zeros({2, 5}, tf::float64)), tf::InvalidArgumentError,
                                 "(2, 5)");
  }
}

TEST_CASE("ReLU options and Softmax axis", "[cpu][keras]") {
  const tf::Tensor x = tf::constant({-2.0f, -0.5f, 0.5f, 3.0f});
  check_values(layers::ReLU()(x), {0, 0, 0.5, 3});
  check_values(layers::ReLU(1.0)(x), {0, 0, 0.5, 1});
  check_values(layers::ReLU(std::nullopt, 0.1)(x), {-0.2, -0.05, 0.5, 3});
  check_values(layers::ReLU(std::nullopt, 0.0, 1.0)(x), {0, 0, 0, 3});
  // Values and gradients at the boundaries are Keras 3's (TF 2.21's numbers): x > threshold is
  // strict, leaky_relu's slope at 0, relu6's zero gradient at 6.
  auto value_and_grad = [](const tf::keras::Layer& relu) {
    const tf::Tensor at = tf::constant({0.0f, 1.0f, 6.0f});
    tf::GradientTape tape;
    tape.watch(at);
    const tf::Tensor y = relu(at);
    return std::pair{y, tape.gradient(tf::reduce_sum(y), at)};
  };
  struct Edge {
    tf::keras::Layer relu;
    std::vector<double> y, dy;
  };
  const std::vector<Edge> edges = {
      {layers::ReLU(std::nullopt, 0.0, 1.0), {0, 0, 6}, {0, 0, 1}},
      {layers::ReLU(6.0, 0.1, 1.0), {-0.1, 0, 6}, {0.1, 0, 1}},
      {layers::ReLU(6.0), {0, 1, 6}, {0, 1, 0}},
      {layers::ReLU(5.0), {0, 1, 5}, {0, 1, 0}},
      {layers::ReLU(std::nullopt, 0.1), {0, 1, 6}, {0.1, 1, 1}},
      {layers::ReLU(), {0, 1, 6}, {0, 1, 1}},
  };
  for (size_t i = 0; i < edges.size(); ++i) {
    INFO("case " << i);
    const auto [y, dy] = value_and_grad(edges[i].relu);
    check_values(y, edges[i].y, 1e-6, 1e-6);
    check_values(dy, edges[i].dy, 1e-6, 1e-6);
  }
  TF_REQUIRE_THROWS_CONTAINING(layers::ReLU(std::nullopt, 0.0, -1.0), tf::InvalidArgumentError,
                               "[ReLU] threshold must be finite and >= 0, got -1");
  // Non-finite arguments are refused (threshold NaN zeroed every output).
  TF_REQUIRE_THROWS_CONTAINING(layers::ReLU(std::nullopt, 0.0, std::nan("")),
                               tf::InvalidArgumentError, "[ReLU] threshold must be finite");
  TF_REQUIRE_THROWS_CONTAINING(layers::ReLU(std::nullopt, INFINITY), tf::InvalidArgumentError,
                               "negative_slope");
  TF_REQUIRE_THROWS_CONTAINING(
      layers::BatchNormalization(layers::BatchNormalizationOptions{.epsilon = INFINITY}),
      tf::InvalidArgumentError, "[BatchNormalization] epsilon must be positive and finite");
  const tf::Tensor m = tf::constant({{1.0f, 2.0f}, {3.0f, 5.0f}});
  const double e1 = 1 / (1 + std::exp(-1.0)), e2 = 1 / (1 + std::exp(-2.0));
  check_values(layers::Softmax()(m), {1 - e1, e1, 1 - e2, e2}, 1e-6, 1e-6);
  const double e3 = 1 / (1 + std::exp(-3.0));
  check_values(layers::Softmax(0)(m), {1 - e2, 1 - e3, e2, e3}, 1e-6, 1e-6);
  TF_REQUIRE_THROWS_CONTAINING(layers::Softmax(2)(m), tf::InvalidArgumentError, "axis 2");
}

TEST_CASE("regularizers add L1 and L2 penalties to losses()", "[cpu][keras]") {
  Float64Layers f64;
  namespace reg = tf::keras::regularizers;
  layers::Dense d(3, "", true, {}, "ones", reg::L2(0.1), reg::L1(0.5));
  CHECK(d.losses().empty());  // nothing to penalise before the build
  (void)d(tf::ones({1, 2}, tf::float64));
  auto losses = d.losses();
  REQUIRE(losses.size() == 2);
  double sq = 0;
  for (double v : vals(d.kernel())) sq += v * v;
  CHECK(losses[0].item<double>() == Approx(0.1 * sq));
  CHECK(losses[1].item<double>() == Approx(0.5 * 3));
  check_values(reg::L1L2(1, 2)(tf::constant({-1.0, 2.0})), {3 + 2 * 5});
  // The penalty is differentiable through the variable reads.
  tf::GradientTape tape;
  tf::Tensor l = d.losses()[0];
  auto g = tape.gradient(l, d.kernel());
  auto k = vals(d.kernel());
  for (auto& v : k) v *= 0.2;
  check_values(g, k, 1e-12, 1e-12);
}

TEST_CASE("layers build lazily, name themselves as Keras and report shape errors",
          "[cpu][keras]") {
  layers::Dense a(4), b(4);
  CHECK(name_number(b.name(), "dense") == name_number(a.name(), "dense") + 1);
  CHECK(layers::Dense(1, {.name = "head"}).name() == "head");
  CHECK(layers::BatchNormalization().name().rfind("batch_normalization", 0) == 0);
  CHECK(layers::MaxPooling2D().name().rfind("max_pooling2d", 0) == 0);
  CHECK(layers::ReLU().name().rfind("re_lu", 0) == 0);
  CHECK(tf::keras::detail::to_snake_case("MyModel") == "my_model");
  CHECK(tf::keras::detail::to_snake_case("Conv2D") == "conv2d");
  CHECK(tf::keras::detail::to_snake_case("AveragePooling2D") == "average_pooling2d");

  CHECK(a.variables().empty());
  TF_REQUIRE_THROWS_CONTAINING(a.kernel(), tf::FailedPreconditionError, "not been built");
  TF_REQUIRE_THROWS_CONTAINING(a.output_shape(), tf::FailedPreconditionError, "not been built");
  (void)a(tf::zeros({2, 5}));
  REQUIRE(a.variables().size() == 2);
  CHECK(a.kernel().name() == a.name() + "/kernel:0");
  auto tracked = a.tracked_variables();
  REQUIRE(tracked.size() == 2);
  // Checkpoint names drop the automatic number ("dense_3" -> "dense").
  CHECK(tracked[0].first == "dense/kernel");
  CHECK(tracked[1].first == "dense/bias");
  CHECK(tracked[0].second.handle_id() == a.kernel().handle_id());
  CHECK(a.count_params() == 5 * 4 + 4);
  // Copies are the same layer.
  tf::keras::Layer copy = a;
  CHECK(copy.id() == a.id());
  CHECK(copy.trainable_variables()[0].handle_id() == a.kernel().handle_id());

  const std::string n = a.name();
  try {
    (void)a(tf::zeros({2, 7}));
    FAIL("no error");
  } catch (const tf::InvalidArgumentError& e) {
    const std::string m = e.what();
    CHECK(m.find("[" + n + "]") != std::string::npos);
    CHECK(m.find("(None, 5)") != std::string::npos);
    CHECK(m.find("(2, 7)") != std::string::npos);
  }
  TF_REQUIRE_THROWS_CONTAINING(b(tf::zeros({5})), tf::InvalidArgumentError, "(None,)");
  CHECK_FALSE(b.built());  // a failed build leaves the layer unbuilt
  layers::Conv2D c(2, 3);
  TF_REQUIRE_THROWS_CONTAINING(c(tf::zeros({4, 4, 1})), tf::InvalidArgumentError, "rank 4");
  (void)c(tf::zeros({1, 4, 4, 1}));
  TF_REQUIRE_THROWS_CONTAINING(c(tf::zeros({1, 4, 4, 2})), tf::InvalidArgumentError,
                               "(None, 4, 4, 1)");
  TF_REQUIRE_THROWS_CONTAINING(layers::Dense(0), tf::InvalidArgumentError, "units");
  TF_REQUIRE_THROWS_CONTAINING(tf::keras::Layer()(tf::zeros({1})), tf::FailedPreconditionError,
                               "empty");
  // Explicit build without data.
  layers::Dense e(3);
  e.build({tf::None, 6});
  CHECK(e.kernel().shape() == tf::TensorShape({6, 3}));
  CHECK(e.output_shape() == tf::TensorShape({tf::None, 3}));
}

TEST_CASE("a layer made under a mirror scope builds once, mirrored, when replica threads "
          "call it together",
          "[cpu][keras][multi_device]") {
  // Two logical CPUs, before any op in this process (each CTest case runs in its own process;
  // when the whole binary runs, the configuration may be frozen already: then both replicas
  // use CPU:0, which still has two copies per variable).
  auto cpus = tf::config::list_physical_devices("CPU");
  bool split = true;
  try {
    tf::config::set_logical_device_configuration(cpus[0], {{}, {}});
  } catch (const tf::FailedPreconditionError&) {
    split = false;
  }
  if (split) REQUIRE(tf::config::list_logical_devices("CPU").size() == 2);
  std::vector<tf::Device> devices = {tf::Device{tf::DeviceType::CPU, 0},
                                     tf::Device{tf::DeviceType::CPU, 0}};
  if (tf::config::list_logical_devices("CPU").size() >= 2) devices[1].index = 1;

  tf::keras::backend::set_floatx(tf::float64);
  std::vector<tf::keras::Layer> model;
  {
    tf::detail::MirrorVariablesScope mirror(devices);
    model = {layers::Dense(8, "relu"), layers::BatchNormalization(), layers::Dense(3)};
  }
  tf::keras::backend::set_floatx(tf::float32);
  const tf::Tensor x = input({4, 5}, 33);
  constexpr int kThreads = 2;
  std::barrier start(kThreads);
  std::vector<tf::Tensor> out(kThreads);
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (int r = 0; r < kThreads; ++r)
    threads.emplace_back([&, r] {
      try {
        tf::DeviceScope dev(devices[r]);
        tf::detail::ReplicaComponentScope replica(r);
        tf::Tensor h = tf::identity(x);
        start.arrive_and_wait();
        for (const auto& l : model) h = l(h, false);
        out[r] = h;
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < kThreads; ++r) REQUIRE(errors[r].empty());
  // Built once: each layer has exactly its weights, each mirrored with equal copies.
  REQUIRE(model[0].variables().size() == 2);
  REQUIRE(model[1].variables().size() == 4);
  REQUIRE(model[2].variables().size() == 2);
  for (const auto& l : model)
    for (const auto& v : l.variables()) {
      REQUIRE(v.is_mirrored());
      auto comps = v.components();
      REQUIRE(comps.size() == 2);
      CHECK(comps[0].placement() == devices[0]);
      CHECK(comps[1].placement() == devices[1]);
      CHECK(vals(comps[0].value()) == vals(comps[1].value()));
    }
  CHECK(vals(out[0]) == vals(out[1]));
  // Both replicas computed with the same weights as a plain evaluation.
  tf::Tensor h = x;
  for (const auto& l : model) h = l(h, false);
  check_values(out[0], vals(h), 1e-12, 1e-12);
}

namespace {
// An in-process all-reduce for two replica threads (what distribute/'s CPU collective does).
struct TwoReplicaExchange {
  std::barrier<> sync{2};
  std::vector<std::vector<tf::Tensor>> slots = std::vector<std::vector<tf::Tensor>>(2);
};
class TestReplicaContext final : public tf::distribute::ReplicaContext {
 public:
  TestReplicaContext(TwoReplicaExchange& x, int id) : x_(x), id_(id) {}
  int replica_id_in_sync_group() const override { return id_; }
  int num_replicas_in_sync() const override { return 2; }
  tf::Tensor all_reduce(tf::distribute::ReduceOp op, const tf::Tensor& v) override {
    return all_reduce(op, std::vector<tf::Tensor>{v})[0];
  }
  std::vector<tf::Tensor> all_reduce(tf::distribute::ReduceOp op,
                                     const std::vector<tf::Tensor>& values) override {
    ++calls;
    x_.slots[id_] = values;
    x_.sync.arrive_and_wait();
    std::vector<tf::Tensor> out;
    for (size_t i = 0; i < values.size(); ++i) {
      tf::Tensor s = x_.slots[0][i] + x_.slots[1][i];
      out.push_back(op == tf::distribute::ReduceOp::MEAN ? s * 0.5 : s);
    }
    x_.sync.arrive_and_wait();  // both have read the slots before the next exchange
    return out;
  }
  int calls = 0;

 private:
  TwoReplicaExchange& x_;
  int id_;
};
}  // namespace

TEST_CASE("BatchNormalization under two replicas: local normalisation, one mirrored update",
          "[cpu][keras][multi_device]") {
  Float64Layers f64;
  const std::vector<tf::Device> devices = {tf::Device{tf::DeviceType::CPU, 0},
                                           tf::Device{tf::DeviceType::CPU, 0}};
  // Each replica's batch size: equal shares, an uneven split of the last global batch, and a
  // replica whose share is empty (it must not make the moving statistics NaN).
  const auto sizes = GENERATE(std::pair<int64_t, int64_t>{4, 4}, std::pair<int64_t, int64_t>{3, 1},
                              std::pair<int64_t, int64_t>{2, 0});
  CAPTURE(sizes.first, sizes.second);
  std::optional<layers::BatchNormalization> bn;
  {
    tf::detail::MirrorVariablesScope mirror(devices);
    bn.emplace();
  }
  const int64_t C = 2;
  const int64_t ns[2] = {sizes.first, sizes.second};
  const tf::Tensor xs[2] = {input({ns[0], C}, 41, -1, 1), input({ns[1], C}, 42, 0, 4)};
  TwoReplicaExchange exchange;
  TestReplicaContext contexts[2] = {{exchange, 0}, {exchange, 1}};
  tf::Tensor out[2];
  std::string errors[2];
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      try {
        tf::detail::ReplicaComponentScope replica(r);
        tf::distribute::detail::ReplicaContextScope ctx(&contexts[r]);
        out[r] = (*bn)(xs[r], true);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  REQUIRE(errors[0].empty());
  REQUIRE(errors[1].empty());
  CHECK(contexts[0].calls == 1);
  CHECK(contexts[1].calls == 1);
  // The moving statistics move toward the replicas' statistics weighted by their batch sizes.
  std::vector<double> mean_avg(C, 0), var_avg(C, 0);
  for (int r = 0; r < 2; ++r) {
    const int64_t N = ns[r];
    CHECK(out[r].shape() == tf::TensorShape({N, C}));
    if (N == 0) continue;
    auto xv = vals(xs[r]);
    std::vector<double> mean(C, 0), var(C, 0), ref(N * C);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = 0; c < C; ++c) mean[c] += xv[n * C + c] / N;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = 0; c < C; ++c) var[c] += std::pow(xv[n * C + c] - mean[c], 2) / N;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = 0; c < C; ++c)
        ref[n * C + c] = (xv[n * C + c] - mean[c]) / std::sqrt(var[c] + 1e-3);
    check_values(out[r], ref, 1e-10, 1e-10);  // each replica normalises its own batch
    const double w = static_cast<double>(N) / static_cast<double>(ns[0] + ns[1]);
    for (int64_t c = 0; c < C; ++c) {
      mean_avg[c] += w * mean[c];
      var_avg[c] += w * var[c];
    }
  }
  std::vector<double> mm(C), mv(C);
  for (int64_t c = 0; c < C; ++c) {
    mm[c] = 0.01 * mean_avg[c];
    mv[c] = 0.99 + 0.01 * var_avg[c];
  }
  for (const auto& comp : bn->moving_mean().components()) check_values(comp.value(), mm, 1e-12);
  for (const auto& comp : bn->moving_variance().components())
    check_values(comp.value(), mv, 1e-12);
}

TEST_CASE("BatchNormalization: an empty training batch leaves the moving statistics unchanged",
          "[cpu][keras]") {
  Float64Layers f64;
  layers::BatchNormalization bn;
  const tf::Tensor x = input({4, 3}, 7, -1, 1);
  (void)bn(x, true);
  const auto mm = vals(bn.moving_mean()), mv = vals(bn.moving_variance());
  {
    // Its gradients are sums over no elements: 0, not NaN (the statistics of no elements are).
    tf::GradientTape tape;
    const tf::Tensor y = bn(tf::zeros({0, 3}, tf::float64), true);
    CHECK(y.shape() == tf::TensorShape({0, 3}));
    const auto grads = tape.gradient(tf::reduce_sum(y), bn.trainable_variables());
    REQUIRE(grads.size() == 2);
    for (const auto& g : grads) CHECK(vals(g) == std::vector<double>(3, 0.0));
  }
  CHECK(vals(bn.moving_mean()) == mm);
  CHECK(vals(bn.moving_variance()) == mv);

  // Traced for a None batch: whether the batch is empty is known when the graph runs.
  auto step = tf::function([&](const tf::Tensor& t) { return bn(t, true); },
                           {.input_signature = {tf::TensorSpec({tf::None, 3}, tf::float64)}});
  CHECK(step(tf::zeros({0, 3}, tf::float64)).shape() == tf::TensorShape({0, 3}));
  auto grad_step = tf::function(
      [&](const tf::Tensor& t) {
        tf::GradientTape tape;
        const tf::Tensor y = bn(t, true);
        return tape.gradient(tf::reduce_sum(y), bn.trainable_variables());
      },
      {.input_signature = {tf::TensorSpec({tf::None, 3}, tf::float64)}});
  for (const auto& g : grad_step(tf::zeros({0, 3}, tf::float64)))
    CHECK(vals(g) == std::vector<double>(3, 0.0));
  CHECK(vals(bn.moving_mean()) == mm);
  CHECK(vals(bn.moving_variance()) == mv);
  (void)step(x);
  CHECK(step.tracing_count() == 1);
  const auto xv = vals(x);
  for (int64_t c = 0; c < 3; ++c) {
    double mean = 0, var = 0;
    for (int64_t n = 0; n < 4; ++n) mean += xv[n * 3 + c] / 4;
    for (int64_t n = 0; n < 4; ++n) var += std::pow(xv[n * 3 + c] - mean, 2) / 4;
    CHECK(vals(bn.moving_mean())[c] == Approx(mm[c] + 0.01 * (mean - mm[c])).epsilon(1e-12));
    CHECK(vals(bn.moving_variance())[c] == Approx(mv[c] + 0.01 * (var - mv[c])).epsilon(1e-12));
  }
}

TEST_CASE("the constructor spellings of docs/keras.md configure the layers", "[cpu][keras]") {
  using namespace tf::keras::layers;
  const tf::Tensor img = tf::zeros({2, 28, 28, 1});
  CHECK(Dense(10)(tf::zeros({2, 3})).shape() == tf::TensorShape({2, 10}));
  Dense nobias(64, "relu", /*use_bias=*/false, "he_normal");
  (void)nobias(tf::zeros({1, 3}));
  CHECK(nobias.variables().size() == 1);
  Dense hidden(64, {.activation = "relu",
                    .kernel_regularizer = tf::keras::regularizers::L2(1e-4),
                    .input_shape = {784},
                    .name = "hidden"});
  CHECK(hidden.built());
  CHECK(hidden.name() == "hidden");
  CHECK(hidden.losses().size() == 1);
  CHECK(Conv2D(32, 3)(img).shape() == tf::TensorShape({2, 26, 26, 32}));
  CHECK(Conv2D(32, {3, 3}, 2, "same", "relu")(img).shape() == tf::TensorShape({2, 14, 14, 32}));
  Conv2D first(32, 3, {.activation = "relu", .input_shape = {28, 28, 1}});
  CHECK(first.output_shape() == tf::TensorShape({tf::None, 26, 26, 32}));
  CHECK(Conv2D(4, 3, {.strides = 2})(img).shape() == tf::TensorShape({2, 13, 13, 4}));
  CHECK(MaxPooling2D()(img).shape() == tf::TensorShape({2, 14, 14, 1}));
  CHECK(AveragePooling2D({3, 3}, 2, "same")(img).shape() == tf::TensorShape({2, 14, 14, 1}));
  CHECK(Flatten()(img).shape() == tf::TensorShape({2, 784}));
  CHECK(Dropout(0.2, /*seed=*/42)(img, true).shape() == img.shape());
  BatchNormalization b1, b2(-1, 0.9, 1e-5), b3({.momentum = 0.9});
  for (auto* b : {&b1, &b2, &b3}) (void)(*b)(tf::ones({2, 3}), true);
  // momentum 0.99 vs 0.9: the moving mean moved by 1% or 10% of the batch mean (1).
  check_values(b1.moving_mean(), {0.01, 0.01, 0.01}, 1e-6);
  check_values(b2.moving_mean(), {0.1, 0.1, 0.1}, 1e-6);
  check_values(b3.moving_mean(), {0.1, 0.1, 0.1}, 1e-6);
  check_values(ReLU(/*max_value=*/6.0)(tf::constant({-1.0f, 3.0f, 9.0f})), {0, 3, 6});
  CHECK(Softmax(/*axis=*/-1)(tf::zeros({1, 4})).shape() == tf::TensorShape({1, 4}));
}

TEST_CASE("Flatten reports a flattened size that overflows int64", "[cpu][keras]") {
  const int64_t big = int64_t{1} << 40;
  tf::testing::require_error(
      [&] {
        layers::Flatten f({big, big});
      },
      {"(Flatten)", "overflows int64"});
}
