// The functional API (keras/functional.h) and the merge layers (keras/layers_merge.h): values
// and gradients against Keras 3.15, layer order and weight names, fit against a Sequential of
// the same weights, weights files, summary text, tracing, and every error.
//
// Reference values: Keras 3.15 / TF 2.21 (CPU) on the same weights and inputs, made by the
// formulas below (w() for kernels, b() for biases, xin() for inputs); each block names the
// Keras calls that produced its literals.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "autograd/tape.h"
#include "core/error.h"
#include "jit/function.h"
#include "keras/functional.h"
#include "keras/layers.h"
#include "keras/layers_merge.h"
#include "keras/layers_more.h"
#include "keras/layers_recurrent.h"
#include "keras/losses.h"
#include "keras/model.h"
#include "keras/optimizers.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
namespace K = tapeflow::keras;
namespace L = tapeflow::keras::layers;
using tf::testing::check_values;
using tf::testing::require_error;

namespace {

// ((k * m) % mod - off) / 10 for k = 0, 1, ... (numpy: the same formula, .astype("float32")).
tf::Tensor formula(const tf::TensorShape& s, int m, int mod, int off) {
  std::vector<double> v;
  for (int64_t k = 0; k < s.num_elements(); ++k)
    v.push_back(static_cast<double>((k * m) % mod - off) / 10.0);
  return tf::cast(tf::convert_to_tensor(v, s), tf::float32);
}
tf::Tensor w(const tf::TensorShape& s) {
  return formula(s, 7, 11, 5);
}
tf::Tensor b(const tf::TensorShape& s) {
  return formula(s, 3, 5, 2);
}
tf::Tensor xin(const tf::TensorShape& s) {
  return formula(s, 5, 13, 6);
}
tf::Tensor w2(const tf::TensorShape& s) {
  return formula(s, 5, 7, 3);
}

tf::Tensor sum_of_squares(const tf::Tensor& y) {
  return tf::reduce_sum(tf::multiply(y, y));
}

// The residual, two-input model of the tests: h = Dense(3)(a); res = Add([h, a]);
// cat = Concatenate([res, Multiply([res, b])]); o = Dense(2)(cat).
struct TwoInput {
  K::KerasTensor a = K::Input({3}, tf::float32, "a"), b_in = K::Input({3}, tf::float32, "b");
  L::Dense h{3, {.name = "h"}}, o{2, {.name = "o"}};
  K::Model model;
  TwoInput() : model(make()) {
    h.set_weights({w({3, 3}), b({3})});
    o.set_weights({w({6, 2}), b({2})});
  }
  K::Model make() {
    auto res = L::Add("res")({h(a), a});
    auto cat = L::Concatenate(-1, "cat")({res, L::Multiply("mul")({res, b_in})});
    return K::Model({a, b_in}, {o(cat)}, "two_input");
  }
};

// A user-defined layer (the Keras guide's Linear): weights made in build() by add_weight.
class Scale : public K::Model {
 public:
  tf::Tensor call(const tf::Tensor& x, bool) override { return tf::add(tf::multiply(x, k), 1.0f); }
  void build(const tf::TensorShape& input_shape) override {
    k = add_weight("k", {input_shape[-1]}, "ones");
    Model::build(input_shape);
  }
  tf::Variable k;
};

}  // namespace

TEST_CASE("functional: Input and symbolic layer calls give Keras' shapes dtypes and names",
          "[cpu][keras][functional]") {
  auto in = K::Input({784});
  CHECK(in.shape() == tf::TensorShape({tf::None, 784}));
  CHECK(in.dtype() == tf::float32);
  CHECK(in.layer().class_name() == "InputLayer");
  CHECK(in.name().rfind("keras_tensor", 0) == 0);
  CHECK(in.layer().name().rfind("input_layer", 0) == 0);
  CHECK(in.to_string() == "<KerasTensor shape=(None, 784), dtype=float32, name=" + in.name() + ">");
  auto named = K::Input({3}, tf::float32, "named", 8);
  CHECK(named.shape() == tf::TensorShape({8, 3}));
  CHECK(named.name() == "named");
  CHECK(named.layer().name() == "named");

  L::Dense d(64, "relu");
  auto x = d(in);
  CHECK(d.built());
  CHECK(d.kernel().shape() == tf::TensorShape({784, 64}));
  CHECK(x.shape() == tf::TensorShape({tf::None, 64}));
  CHECK(x.layer().id() == d.id());
  CHECK(x.node_index() == 0);
  CHECK(d(in).node_index() == 1);  // a second call is a second node of the same layer

  // Other layers build for the symbolic shape too.
  auto img = K::Input({8, 8, 1});
  auto c = L::Conv2D(2, 3)(img);
  CHECK(c.shape() == tf::TensorShape({tf::None, 6, 6, 2}));
  auto p = L::MaxPooling2D()(L::BatchNormalization()(c));
  CHECK(p.shape() == tf::TensorShape({tf::None, 3, 3, 2}));
  CHECK(L::Dropout(0.5)(L::Flatten()(p)).shape() == tf::TensorShape({tf::None, 18}));
  auto tokens = K::Input({5}, tf::int32);
  auto e = L::Embedding(10, 4)(tokens);
  CHECK(e.shape() == tf::TensorShape({tf::None, 5, 4}));
  CHECK(e.dtype() == tf::float32);
  CHECK(L::LSTM(3)(e).shape() == tf::TensorShape({tf::None, 3}));
  auto seq = K::Input({tf::None, 4});
  CHECK(L::LSTM(3, {.return_sequences = true})(seq).shape() ==
        tf::TensorShape({tf::None, tf::None, 3}));
}

TEST_CASE("functional: an MLP's values and gradients match Keras 3 and its tf::function trace",
          "[cpu][cuda][keras][functional]") {
  // keras.Model(inp, Dense(2)(Dense(3, activation="relu")(inp))) with the weights w()/b();
  // y = m(xin((2, 4))); gradients of reduce_sum(y * y) for m.trainable_variables.
  const std::vector<double> y_ref = {-0.238000005, 0.0960000008, -0.25999999, 0.187000006};
  const std::vector<std::vector<double>> g_ref = {
      {-0.132359996, -0.0856200084, 0.0631200075, 0.173240006, 0.155479997, 0.0105200009,
       0.0436000004, 0.0182799995, -0.0420800038, -0.010119997, 0.0108200014, 0.0420800038},
      {0.611199975, 0.482200027, -0.105200008},
      {-0.0740400031, 0.0397199988, -0.0827599987, 0.0580200031, -0.0428400002, 0.0172799993},
      {-0.995999992, 0.565999985}};
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    auto in = K::Input({4});
    L::Dense d1(3, "relu"), d2(2);
    K::Model m(in, d2(d1(in)));
    d1.set_weights({w({4, 3}), b({3})});
    d2.set_weights({w({3, 2}), b({2})});
    CHECK(m.class_name() == "Functional");
    CHECK(m.built());
    CHECK(m.output_shape() == tf::TensorShape({tf::None, 2}));
    const tf::Tensor x = xin({2, 4});
    tf::Tensor y;
    std::vector<tf::Tensor> g;
    {
      tf::GradientTape tape;
      y = m(x);
      g = tape.gradient(sum_of_squares(y), m.trainable_variables());
    }
    check_values(y, y_ref, 1e-5, 1e-6);
    REQUIRE(g.size() == 4);
    for (size_t i = 0; i < 4; ++i) check_values(g[i], g_ref[i], 1e-5, 1e-6);
    // The vector call returns the one output too.
    check_values(m(std::vector<tf::Tensor>{x}).at(0), y_ref, 1e-5, 1e-6);
    auto f = tf::function([&](const tf::Tensor& t) { return m(t); });
    tf::testing::check_close(f(x), y, 1e-6, 1e-7);
  }
}

TEST_CASE("functional: a residual two-input model matches Keras 3 in values gradients and order",
          "[cpu][cuda][keras][functional]") {
  // keras.Model([a, b], o(Concatenate()([r, Multiply()([r, b])]))) with r = Add()([h(a), a]);
  // y = m2([xin((2, 3)), w2((2, 3))]); gradients of reduce_sum(y * y) for
  // m2.trainable_variables + [a, b].
  const std::vector<double> y_ref = {0.107199982, -0.137800008, -0.149900019, 0.0461999923};
  const std::vector<std::vector<double>> g_ref = {
      {0.0358831882, 0.0684400201, -0.0387432054, 0.0380412042, 0.0364820026, -0.0163442008,
       0.0401992202, 0.00452399999, 0.00605480373},
      {0.00431603193, -0.0639160126, 0.0447980091},
      {-0.0506379828, 0.0973200053, -0.0668459982, 0.0478400029, -0.0307620317, -0.0512800068,
       0.018489195, -0.0302124005, -0.0172666013, 0.0107692005, -0.00929380208, 0.00286439992},
      {-0.0854000747, -0.183200032},
      {-0.157721594, -0.361064821, -0.0127471909, 0.138136804, 0.279475808, 0.0413524136},
      {-0.0334463939, 0.0218972024, 0.0337444022, 0.0131911999, 0.0191932023, -0.00502819708}};
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    TwoInput t;
    // Keras 3: [l.name for l in m2.layers] and [v.path for v in m2.trainable_variables] (TF 2
    // variable names, with ":0").
    std::vector<std::string> names;
    for (const K::Layer& l : t.model.layers()) names.push_back(l.name());
    CHECK(names == std::vector<std::string>{"a", "h", "res", "b", "mul", "cat", "o"});
    std::vector<std::string> vars;
    for (const auto& v : t.model.trainable_variables()) vars.push_back(v.name());
    CHECK(vars == std::vector<std::string>{"h/kernel:0", "h/bias:0", "o/kernel:0", "o/bias:0"});

    const tf::Tensor xa = xin({2, 3}), xb = w2({2, 3});
    std::vector<tf::Tensor> g;
    tf::Tensor y;
    {
      tf::GradientTape tape({.persistent = true});
      tape.watch(xa);
      tape.watch(xb);
      y = t.model(std::vector<tf::Tensor>{xa, xb}).at(0);
      const tf::Tensor loss = sum_of_squares(y);
      g = tape.gradient(loss, t.model.trainable_variables());
      for (const tf::Tensor& gi : tape.gradient(loss, std::vector<tf::Tensor>{xa, xb}))
        g.push_back(gi);
    }
    check_values(y, y_ref, 1e-5, 1e-6);
    REQUIRE(g.size() == 6);
    for (size_t i = 0; i < 6; ++i) check_values(g[i], g_ref[i], 1e-5, 1e-6);
    auto f = tf::function([&](const tf::Tensor& p, const tf::Tensor& q) {
      return t.model(std::vector<tf::Tensor>{p, q}).at(0);
    });
    tf::testing::check_close(f(xa, xb), y, 1e-6, 1e-7);
  }
}

TEST_CASE("functional: merge layers on eager tensors match Keras 3",
          "[cpu][cuda][keras][functional]") {
  // keras.layers.X()([...]) on u = xin((2, 3)), v = w2((2, 3)), z = b((2, 1)).
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    const tf::Tensor u = xin({2, 3}), v = w2({2, 3}), z = b({2, 1});
    using TV = std::vector<tf::Tensor>;
    check_values(L::Subtract()(TV{u, v}), {-0.3, -0.3, 0.4, -0.2, -0.2, 0.5}, 1e-6, 1e-6);
    check_values(
        L::Average()(TV{u, v, z}),
        {-0.366666675, -0.0333333351, 0.0666666701, -0.166666672, 0.166666672, 0.266666681}, 1e-6,
        1e-6);
    check_values(L::Maximum()(TV{u, v}), {-0.3, 0.2, 0.4, -0.2, 0.3, 0.6}, 1e-6, 1e-6);
    check_values(L::Minimum()(TV{u, v, z}), {-0.6, -0.2, -0.2, -0.4, 0.1, 0.1}, 1e-6, 1e-6);
    check_values(L::Multiply()(TV{u, z}), {0.12, 0.02, -0.08, -0.04, 0.01, 0.06}, 1e-6, 1e-6);
    check_values(L::Dot(1)(TV{u, v}), {0.160000011, 0.170000017}, 1e-6, 1e-6);
    check_values(L::Dot(1, true)(TV{u, v}), {0.609551489, 0.624089599}, 1e-6, 1e-6);
    // Dot((2, 1)) of (2, 3, 4) and (2, 4, 5): shape (2, 3, 5).
    tf::Tensor d3 = L::Dot(std::pair{2, 1})(TV{xin({2, 3, 4}), w2({2, 4, 5})});
    check_values(d3, {0.00999999046,  0.00999999791, 0.150000006,  -0.0600000061, -0.340000004,
                      0.13000001,     -0.100000001,  -0.25999999,  0.210000008,   0.120000005,
                      -0.00999999791, 0.0500000045,  0.109999999,  -0.0400000028, -0.330000013,
                      -0.319999993,   -0.0199999958, 0.0700000077, 0.0899999961,  -0.0300000012,
                      0.13000001,     -0.0299999975, 0.0900000036, 0.0700000077,  -0.0199999958,
                      -0.330000013,   -0.0399999991, 0.109999999,  0.0500000045,  -0.00999999046},
                 1e-5, 1e-6);
    CHECK(d3.shape() == tf::TensorShape({2, 3, 5}));
    // Dot((1, 2)) of (2, 3, 4) and (2, 5, 3): shape (2, 4, 5).
    tf::Tensor d3b = L::Dot(std::pair{1, 2})(TV{xin({2, 3, 4}), w2({2, 5, 3})});
    CHECK(d3b.shape() == tf::TensorShape({2, 4, 5}));
    check_values(d3b, {0.200000003,   0.100000009,   -0.0700000003, -0.170000002,  0.0800000057,
                       0.150000006,   0.200000003,   -0.170000002,  -0.120000005,  -0.0700000003,
                       -0.160000011,  -0.0900000185, 0.120000005,   0.190000013,   -0.0900000036,
                       0.180000007,   0.140000015,   -0.109999999,  -0.150000006,  0.0199999958,
                       -0.0199999996, -0.0100000016, -0.140000015,  -0.13000001,   0.159999996,
                       -0.0200000033, -0.120000005,  0.200000003,   0.100000009,   -0.0700000003,
                       -0.0200000014, 0.0300000012,  0.150000006,   0.200000003,   -0.170000002,
                       -0.0199999958, 0.0500000007,  -0.160000011,  -0.0900000185, 0.120000005},
                 1e-5, 1e-6);
    // Add of (2, 3) and (2, 4, 3): the lower-rank input broadcasts over axis 1.
    tf::Tensor ar = L::Add()(TV{xin({2, 3}), w2({2, 4, 3})});
    CHECK(ar.shape() == tf::TensorShape({2, 4, 3}));
    check_values(ar, {-0.9, 0.1, 0.4, -0.8, 0.2, 0.5, -0.7, -0.4, 0.6, -0.6, -0.3, 0.7,
                      -0.3, 0,   0.3, -0.2, 0.1, 0.4, -0.1, 0.2,  0.5, -0.7, 0.3,  0.6},
                 1e-6, 1e-6);
    tf::Tensor cat = L::Concatenate(1)(TV{xin({2, 2, 2}), w2({2, 1, 2})});
    CHECK(cat.shape() == tf::TensorShape({2, 3, 2}));
    check_values(cat, {-0.6, -0.1, 0.4, -0.4, -0.3, 0.2, 0.1, 0.6, -0.2, 0.3, 0, -0.2}, 1e-6, 1e-6);
  }
}

TEST_CASE("functional: merge layers' gradients match central differences in float64",
          "[cpu][keras][functional]") {
  tf::keras::backend::set_floatx(tf::float64);
  struct Restore {
    ~Restore() { tf::keras::backend::set_floatx(tf::float32); }
  } restore;
  const tf::Tensor u = tf::cast(xin({2, 3}), tf::float64), v = tf::cast(w2({2, 3}), tf::float64);
  std::vector<std::pair<std::string, std::function<tf::Tensor(const tf::Tensor&)>>> cases = {
      {"Average",
       [&](const tf::Tensor& p) {
         return L::Average()(std::vector<tf::Tensor>{p, v});
       }},
      {"Multiply",
       [&](const tf::Tensor& p) {
         return L::Multiply()(std::vector<tf::Tensor>{p, v});
       }},
      {"Dot",
       [&](const tf::Tensor& p) {
         return L::Dot(1, true)(std::vector<tf::Tensor>{p, v});
       }},
      {"Concatenate", [&](const tf::Tensor& p) {
         return L::Concatenate()(std::vector<tf::Tensor>{v, p});
       }}};
  for (auto& [name, fn] : cases) {
    CAPTURE(name);
    tf::Tensor g;
    {
      tf::GradientTape tape;
      tape.watch(u);
      g = tape.gradient(sum_of_squares(fn(u)), u);
    }
    const std::vector<double> base = tf::detail::to_double_vector(u);
    std::vector<double> numeric;
    const double eps = 1e-6;
    for (size_t i = 0; i < base.size(); ++i) {
      std::vector<double> hi = base, lo = base;
      hi[i] += eps;
      lo[i] -= eps;
      const double fh = sum_of_squares(fn(tf::convert_to_tensor(hi, u.shape()))).item<double>();
      const double fl = sum_of_squares(fn(tf::convert_to_tensor(lo, u.shape()))).item<double>();
      numeric.push_back((fh - fl) / (2 * eps));
    }
    check_values(g, numeric, 1e-6, 1e-8);
  }
}

TEST_CASE("functional: layers and weights follow Keras 3's depth order with an unused input",
          "[cpu][keras][functional]") {
  // Keras 3: p = Dense(2)(i); r = Dense(2)(Dense(3)(i)); out = Dense(1)(Concatenate()([p, r]));
  // keras.Model([i, unused], out): [l.name for l in m.layers], [v.path for v in
  // m.trainable_variables].
  auto i = K::Input({4}, tf::float32, "i");
  auto p = L::Dense(2, {.name = "p"})(i);
  auto q = L::Dense(3, {.name = "q"})(i);
  auto r = L::Dense(2, {.name = "r"})(q);
  auto c = L::Concatenate(-1, "c")({p, r});
  auto unused = K::Input({1}, tf::float32, "unused");
  K::Model m({i, unused}, {L::Dense(1, {.name = "out"})(c)});
  std::vector<std::string> names, vars;
  for (const K::Layer& l : m.layers()) names.push_back(l.name());
  for (const auto& [n, v] : m.tracked_variables()) vars.push_back(n);
  CHECK(names == std::vector<std::string>{"i", "q", "p", "r", "c", "unused", "out"});
  CHECK(vars == std::vector<std::string>{"q/kernel", "q/bias", "p/kernel", "p/bias", "r/kernel",
                                         "r/bias", "out/kernel", "out/bias"});
  // The unused input is still one of the model's.
  CHECK(m(std::vector<tf::Tensor>{xin({2, 4}), tf::zeros({2, 1})}).at(0).shape() ==
        tf::TensorShape({2, 1}));
}

TEST_CASE("functional: a shared layer has one set of weights and Keras' node indices",
          "[cpu][keras][functional]") {
  auto a = K::Input({4}, tf::float32, "sa"), c = K::Input({4}, tf::float32, "sc");
  L::Dense shared(2, {.name = "shared"});
  auto out = L::Subtract("diff")({shared(a), shared(c)});
  K::Model m({a, c}, {out}, "siamese");
  CHECK(m.trainable_variables().size() == 2);
  CHECK(m.count_params() == 10);
  shared.set_weights({w({4, 2}), b({2})});
  // The same input twice gives zero: both branches use the same weights.
  const tf::Tensor x = xin({3, 4});
  check_values(m(std::vector<tf::Tensor>{x, x}).at(0), std::vector<double>(6, 0.0));
  // Keras prints the second call of "shared" as shared[1][0] in the Connected to column.
  const std::string s = m.summary_string(98);
  CHECK(s.find("shared[0][0],") != std::string::npos);
  CHECK(s.find(" shared[1][0]") != std::string::npos);
  CHECK(s.find("sa[0][0],") != std::string::npos);
}

TEST_CASE("functional: fit matches a Sequential model of the same weights",
          "[cpu][keras][functional]") {
  const tf::Tensor x = xin({20, 4});
  const tf::Tensor y = w2({20, 2});
  auto in = K::Input({4});
  L::Dense f1(3, "relu"), f2(2);
  K::Model functional(in, f2(f1(in)));
  K::Sequential sequential({L::Dense(3, "relu"), L::Dense(2)});
  sequential.build({tf::None, 4});
  const std::vector<tf::Tensor> weights = {w({4, 3}), b({3}), w({3, 2}), b({2})};
  functional.set_weights(weights);
  sequential.set_weights(weights);
  std::vector<std::vector<double>> losses;
  std::vector<tf::Tensor> preds;
  for (K::Model* m : {static_cast<K::Model*>(&functional), static_cast<K::Model*>(&sequential)}) {
    m->compile(K::optimizers::SGD(0.1), "mse");
    K::History h = m->fit(x, y, {.epochs = 4, .batch_size = 8, .verbose = 0, .shuffle = false});
    losses.push_back(h.history.at("loss"));
    preds.push_back(m->predict(x));
  }
  REQUIRE(losses[0].size() == 4);
  CHECK(losses[0] == losses[1]);
  CHECK(losses[0].back() < losses[0].front());
  tf::testing::check_close(preds[0], preds[1], 0, 0);
  const std::vector<double> ev = functional.evaluate(x, y, {.verbose = 0});
  CHECK(ev.at(0) == Approx(sequential.evaluate(x, y, {.verbose = 0}).at(0)).epsilon(0));
}

TEST_CASE("functional: save_weights and load_weights round trip by Keras' layer names",
          "[cpu][keras][functional]") {
  const std::string path =
      (std::filesystem::temp_directory_path() / "tapeflow_functional_weights.safetensors").string();
  TwoInput src;
  std::vector<std::string> tracked;
  for (const auto& [n, v] : src.model.tracked_variables()) tracked.push_back(n);
  CHECK(tracked == std::vector<std::string>{"h/kernel", "h/bias", "o/kernel", "o/bias"});
  src.model.save_weights(path);
  TwoInput dst;
  dst.h.set_weights({tf::zeros({3, 3}), tf::zeros({3})});
  dst.o.set_weights({tf::zeros({6, 2}), tf::zeros({2})});
  dst.model.load_weights(path);
  std::filesystem::remove(path);
  const std::vector<tf::Tensor> in = {xin({2, 3}), w2({2, 3})};
  tf::testing::check_close(dst.model(in).at(0), src.model(in).at(0), 0, 0);
}

TEST_CASE("functional: summary prints input_layer rows and Keras' Connected to column",
          "[cpu][keras][functional]") {
  auto row = [](const std::vector<std::string>& fields, const std::vector<int>& pos) {
    std::string line;
    for (size_t i = 0; i < fields.size(); ++i) {
      line += (i == 0 ? " " : "") + fields[i];
      line += std::string(static_cast<size_t>(pos[i]) - line.size(), ' ');
    }
    return line + "\n";
  };
  auto in = K::Input({4}, tf::float32, "inp");
  auto hidden = L::Dense(3, {.activation = "relu", .name = "hidden"})(in);
  K::Model chain(in, L::Dense(2, {.name = "logits"})(hidden), "chain");
  const std::vector<int> p3 = {29, 55, 65};
  const std::string blank = std::string(65, ' ') + "\n";
  const std::string expected =
      "Model: \"chain\"\n" + std::string(65, '_') + "\n" +
      row({"Layer (type)", "Output Shape", "Param #"}, p3) + std::string(65, '=') + "\n" +
      row({"inp (InputLayer)", "(None, 4)", "0"}, p3) + blank +
      row({"hidden (Dense)", "(None, 3)", "15"}, p3) + blank +
      row({"logits (Dense)", "(None, 2)", "8"}, p3) + blank + std::string(65, '=') + "\n" +
      "Total params: 23\nTrainable params: 23\nNon-trainable params: 0\n" + std::string(65, '_') +
      "\n";
  CHECK(chain.summary_string() == expected);

  // Not a chain: the 4-column table (positions 0.3, 0.56, 0.74 of the line), connections as
  // Keras 3 lists them, each on its own line (print_row breaks after "]," as Keras' text rows).
  TwoInput t;
  const std::string s = t.model.summary_string(100);
  const std::vector<int> p4 = {30, 56, 74, 100};
  const std::string blank4 = std::string(100, ' ') + "\n";
  const std::string expected4 =
      "Model: \"two_input\"\n" + std::string(100, '_') + "\n" +
      row({"Layer (type)", "Output Shape", "Param #", "Connected to"}, p4) + std::string(100, '=') +
      "\n" + row({"a (InputLayer)", "(None, 3)", "0", "-"}, p4) + blank4 +
      row({"h (Dense)", "(None, 3)", "12", "a[0][0]"}, p4) + blank4 +
      row({"res (Add)", "(None, 3)", "0", "h[0][0],"}, p4) + row({"", "", "", " a[0][0]"}, p4) +
      blank4 + row({"b (InputLayer)", "(None, 3)", "0", "-"}, p4) + blank4 +
      row({"mul (Multiply)", "(None, 3)", "0", "res[0][0],"}, p4) +
      row({"", "", "", " b[0][0]"}, p4) + blank4 +
      row({"cat (Concatenate)", "(None, 6)", "0", "res[0][0],"}, p4) +
      row({"", "", "", " mul[0][0]"}, p4) + blank4 +
      row({"o (Dense)", "(None, 2)", "14", "cat[0][0]"}, p4) + blank4 + std::string(100, '=') +
      "\n" + "Total params: 26\nTrainable params: 26\nNon-trainable params: 0\n" +
      std::string(100, '_') + "\n";
  CHECK(s == expected4);
}

TEST_CASE("functional: a subclassed model and a Sequential are layers of a functional model",
          "[cpu][keras][functional]") {
  K::Sequential inner({L::Dense(3, "relu"), L::Dense(2)});
  auto in = K::Input({4});
  auto out = inner(in);
  CHECK(out.shape() == tf::TensorShape({tf::None, 2}));
  K::Model outer(in, L::Dense(1)(out));
  CHECK(outer.trainable_variables().size() == 6);
  const tf::Tensor x = xin({5, 4});
  tf::testing::check_close(outer(x), outer.layers()[2](inner(x)), 0, 0);
  // A functional model nests too.
  auto in2 = K::Input({4});
  K::Model twice(in2, outer(in2));
  tf::testing::check_close(twice(x), outer(x), 0, 0);
}

TEST_CASE("functional: a user-defined layer builds from the KerasTensor and trains in the graph",
          "[cpu][keras][functional]") {
  Scale scale;
  auto in = K::Input({3});
  auto h = scale(in);
  CHECK(scale.built());
  CHECK(scale.k.shape() == tf::TensorShape({3}));
  CHECK(h.shape() == tf::TensorShape({tf::None, 3}));
  K::Model m(in, L::Dense(1, {.name = "head"})(h));
  CHECK(m.trainable_variables().size() == 3);
  CHECK(m.trainable_variables()[0].name() == scale.k.name());
  const tf::Tensor x = xin({2, 3});
  tf::Tensor g;
  {
    tf::GradientTape tape;
    g = tape.gradient(sum_of_squares(m(x)), scale.k);
  }
  REQUIRE(g.defined());
  CHECK(g.shape() == tf::TensorShape({3}));
  // y = head((x * k + 1)): with k = 1 the model equals the head on x + 1.
  tf::testing::check_close(m(x), m.get_layer("head")(tf::add(x, 1.0f)), 1e-6, 1e-7);
}

TEST_CASE("functional: a pinned training flag and the model's flag reach Dropout",
          "[cpu][keras][functional]") {
  auto in = K::Input({100});
  K::Model free(in, L::Dropout(0.5)(in));
  K::Model pinned(in, L::Dropout(0.5)(in, true));
  const tf::Tensor x = tf::ones({2, 100});
  tf::testing::check_close(free(x, false), x, 0, 0);
  CHECK(tf::reduce_min(free(x, true)).item<float>() == 0.0f);
  CHECK(tf::reduce_min(pinned(x, false)).item<float>() == 0.0f);
  CHECK(tf::reduce_min(pinned(x, true)).item<float>() == 0.0f);
  // Keras 3.15: a call pinned to training=False still drops when the model trains (fit passes
  // training=True to every layer): Dropout(0.5)(inp, training=False) in m(x, training=True)
  // zeroed 518 of 1000 values.
  K::Model frozen(in, L::Dropout(0.5)(in, false));
  tf::testing::check_close(frozen(x, false), x, 0, 0);
  CHECK(tf::reduce_min(frozen(x, true)).item<float>() == 0.0f);
}

TEST_CASE("functional: Input takes floatx and Dot normalizes with Keras' epsilon",
          "[cpu][keras][functional]") {
  K::backend::set_floatx(tf::float64);
  const auto in = K::Input({3});
  L::Activation linear("linear");  // a float64 layer
  K::backend::set_floatx(tf::float32);
  CHECK(in.dtype() == tf::float64);
  CHECK(K::Input({3}).dtype() == tf::float32);
  // The model casts a float32 input to its Input's float64, which the layer keeps.
  K::Model id(in, linear(in));
  CHECK(id(tf::ones({2, 3})).dtype() == tf::float64);
  // Keras 3.15: Dot(axes=1, normalize=True)([[1e-7, 0, 0]], [[1, 0, 0]]) is [[1.0]]: the
  // inverse norm is capped at 1 / backend.epsilon() = 1e7 (a floor of 1e-12 on the sum of
  // squares, tf.math.l2_normalize's, gives 0.1).
  const tf::Tensor a = tf::constant({{1e-7f, 0.0f, 0.0f}}), b = tf::constant({{1.0f, 0.0f, 0.0f}});
  tf::testing::check_values(L::Dot(1, true)({a, b}), {1.0}, 1e-6);
  // A zero row: the cap gives 0 (not NaN).
  tf::testing::check_values(L::Dot(1, true)({tf::zeros({1, 3}), b}), {0.0}, 0);
}

TEST_CASE("functional: errors name the tensors layers and shapes as Keras does",
          "[cpu][keras][functional]") {
  auto a = K::Input({3}, tf::float32, "ea"), c = K::Input({4}, tf::float32, "ec");
  auto h = L::Dense(2, {.name = "eh"})(c);
  // An output that does not come from the inputs.
  require_error([&] { (void)K::Model(a, h); }, {"Graph disconnected", "at layer 'eh'", c.name()});
  require_error([&] { (void)K::Model(a, c); }, {"Graph disconnected", c.name(), "ec"});
  // Inputs of the wrong shape, count or dtype-less list.
  auto in = K::Input({4}, tf::float32, "shape_in");
  K::Model m(in, L::Dense(2)(in), "shape_model");
  require_error(
      [&] {
        m(tf::zeros({2, 5}));
      },
      {"Input 0 with name 'shape_in'", "'shape_model'", "expected shape=(None, 4)",
       "found shape=(2, 5)"});
  require_error([&] { m(tf::zeros({2, 4, 1})); }, {"found shape=(2, 4, 1)"});
  TwoInput t;
  require_error([&] { t.model(tf::zeros({2, 3})); }, {"has 2 inputs (a, b)", "std::vector"});
  // Several outputs need the vector call.
  auto o1 = L::Dense(1)(a), o2 = L::Dense(1)(a);
  K::Model two_out({a}, {o1, o2});
  require_error([&] { two_out(tf::zeros({1, 3})); }, {"has 2 outputs"});
  CHECK(two_out(std::vector<tf::Tensor>{tf::zeros({1, 3})}).size() == 2);
  // Two layers of one name.
  require_error(
      [&] {
        auto d = L::Dense(2, {.name = "dup"})(a);
        (void)K::Model(a, L::Dense(2, {.name = "dup"})(d));
      },
      {"The name \"dup\" is used 2 times"});
  // A layer built for another shape.
  L::Dense d3(2);
  (void)d3(a);
  require_error([&] { (void)d3(c); }, {"incompatible", "(None, 4)"});

  // Merge layers.
  require_error([&] { (void)L::Add()(a); }, {"A merge layer should be called on a list of inputs"});
  require_error(
      [&] {
        (void)L::Add()(tf::zeros({2, 3}));
      },
      {"A merge layer should be called on a list of inputs"});
  require_error(
      [&] {
        (void)L::Add()({a, c});
      },
      {"Inputs have incompatible shapes. Received shapes (3,) and (4,)"});
  require_error(
      [&] {
        (void)L::Add()(std::vector<tf::Tensor>{tf::zeros({2, 3}), tf::zeros({4, 3})});
      },
      {"Cannot merge tensors with different batch sizes", "[(2, 3), (4, 3)]"});
  require_error(
      [&] {
        (void)L::Subtract()({a, a, a});
      },
      {"A `Subtract` layer should be called on exactly 2 inputs"});
  require_error([&] { (void)L::Add()(std::vector<K::KerasTensor>{}); }, {"at least 1 input"});
  auto img = K::Input({2, 5});
  require_error(
      [&] {
        (void)L::Concatenate()({img, c});
      },
      {"A `Concatenate` layer requires inputs with matching shapes except for the "
       "concatenation axis",
       "[(None, 2, 5), (None, 4)]"});
  require_error(
      [&] {
        (void)L::Dot(1)({a, c});
      },
      {"Incompatible input shapes: axis values 3 (at axis 1) != 4 (at axis 1)",
       "(None, 3), (None, 4)"});
  require_error([&] { (void)L::Dot(1)({a, a, a}); }, {"should be called on a list of 2 inputs"});
  require_error(
      [&] {
        (void)L::Dot(1)(std::vector<tf::Tensor>{tf::zeros({3}), tf::zeros({3})});
      },
      {"rank < 2"});
  require_error([&] { (void)L::Dot(0)({a, a}); }, {"batch axis 0 cannot be contracted"});
  require_error([&] { (void)L::Dense(1)(K::KerasTensor()); }, {"empty KerasTensor"});
}
