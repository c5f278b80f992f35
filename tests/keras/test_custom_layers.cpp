// Custom layers the Keras way: a subclassed Model with a build() override that creates weights
// with add_weight, and add_loss inside call (values checked against Keras 3.15).
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "autograd/tape.h"
#include "core/error.h"
#include "distribute/strategy.h"
#include "jit/function.h"
#include "keras/model.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/linalg.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
namespace K = tf::keras;

namespace {

// The Keras guide's Linear layer.
class Linear : public K::Model {
 public:
  explicit Linear(int64_t units = 32, bool super_build = true)
      : units_(units), super_build_(super_build) {}
  tf::Tensor call(const tf::Tensor& x, bool) override { return tf::add(tf::matmul(x, w), b); }
  tf::Variable w, b;

  void build(const tf::TensorShape& input_shape) override {
    w = add_weight("w", {input_shape[-1], units_}, "random_normal");
    b = add_weight("b", {units_}, "zeros");
    if (super_build_) Model::build(input_shape);
  }

 private:
  int64_t units_;
  bool super_build_;
};

// The Keras guide's first Linear: weights made in the constructor.
class EagerLinear : public K::Model {
 public:
  EagerLinear(int64_t units, int64_t input_dim) {
    w = add_weight("w", {input_dim, units}, "random_normal");
    b = add_weight("b", {units}, "zeros");
  }
  tf::Tensor call(const tf::Tensor& x, bool) override { return tf::add(tf::matmul(x, w), b); }
  tf::Variable w, b;
};

// Keras' ActivityRegularization, written with add_loss.
class ActReg : public K::Model {
 public:
  explicit ActReg(double rate) : rate_(rate) {}
  tf::Tensor call(const tf::Tensor& x, bool) override {
    add_loss(tf::multiply(tf::reduce_sum(tf::square(x)), tf::Tensor(static_cast<float>(rate_))));
    return x;
  }

 private:
  double rate_;
};

tf::Tensor constant(std::vector<float> v, tf::TensorShape s) {
  return tf::constant(v, s);
}

struct TempFile {
  std::string path = (std::filesystem::temp_directory_path() /
                      ("tapeflow_custom_" + std::to_string(::getpid()) + ".safetensors"))
                         .string();
  ~TempFile() {
    std::error_code ec;
    std::filesystem::remove(path, ec);
  }
};

// Keras 3.15 test data (see the test using it).
const std::vector<float> kX = {0.5f, -1.0f, 2.0f, 1.5f, 0.25f, -0.5f, -1.0f, 1.0f, 0.0f,
                               0.3f, 0.2f,  0.1f, 2.0f, -2.0f, 1.0f,  -0.7f, 0.4f, 0.9f};
const std::vector<float> kY = {1.0f, 0.0f, 0.0f,  1.0f, 0.5f, 0.5f,
                               1.0f, 1.0f, -1.0f, 0.0f, 0.0f, -1.0f};

}  // namespace

TEST_CASE(
    "custom layer: build and add_weight give the Keras guide Linear with exact values and "
    "gradients",
    "[cpu][keras]") {
  Linear lin(2);
  CHECK_FALSE(lin.built());
  CHECK(lin.variables().empty());
  const tf::Tensor x = constant({1, 2, 3, -1, 0, 4}, {2, 3});
  (void)lin(x);
  CHECK(lin.built());
  CHECK(lin.input_shape() == tf::TensorShape({tf::None, 3}));
  CHECK(lin.output_shape() == tf::TensorShape({tf::None, 2}));
  REQUIRE(lin.trainable_variables().size() == 2);
  CHECK(lin.w.shape() == tf::TensorShape({3, 2}));
  CHECK(lin.w.name() == lin.name() + "/w:0");
  const auto tracked = lin.tracked_variables();
  REQUIRE(tracked.size() == 2);
  CHECK(tracked[0].first == "linear/w");
  CHECK(tracked[1].first == "linear/b");
  lin.set_weights({constant({0.5f, -1, 2, 0.25f, -0.5f, 1}, {3, 2}), constant({0.1f, -0.2f}, {2})});
  tf::Tensor y;
  std::vector<tf::Tensor> g;
  {
    tf::GradientTape tape;
    y = lin(x);
    g = tape.gradient(tf::reduce_sum(y), std::vector<tf::Variable>{lin.w, lin.b});
  }
  tf::testing::check_close(y, tf::add(tf::matmul(x, lin.w.value()), lin.b.value()), 0, 0);
  tf::testing::check_close(y, constant({3.1f, 2.3f, -2.4f, 4.8f}, {2, 2}));
  // d sum(x w + b) / dw = x^T 1, / db = the batch size.
  tf::testing::check_close(g[0], constant({0, 0, 2, 2, 7, 7}, {3, 2}), 0, 0);
  tf::testing::check_close(g[1], constant({2, 2}, {2}), 0, 0);
  // A second call reuses the weights.
  (void)lin(x);
  CHECK(lin.variables().size() == 2);
}

TEST_CASE("custom layer: build from outside and direct build calls and weights in the constructor",
          "[cpu][keras]") {
  // Through a handle (Layer::build) or on the subclass (the override, which ends with
  // Model::build): both complete the build.
  Linear a(3);
  K::Layer(a).build({tf::None, 4});
  CHECK(a.built());
  CHECK(a.w.shape() == tf::TensorShape({4, 3}));
  Linear b(3);
  b.build({tf::None, 4});
  CHECK(b.built());
  CHECK(b.variables().size() == 2);
  CHECK(b.output_shape() == tf::TensorShape({tf::None, 3}));
  const tf::Variable w = b.w;
  (void)b(tf::ones({2, 4}));
  CHECK(b.w.handle_id() == w.handle_id());
  CHECK(b.variables().size() == 2);
  // Without Model::build at its end, a direct call makes the weights; the first call reuses them.
  Linear c(3, /*super_build=*/false);
  c.build({tf::None, 4});
  CHECK_FALSE(c.built());
  REQUIRE(c.variables().size() == 2);
  const tf::Variable cw = c.w;
  (void)c(tf::ones({2, 4}));
  CHECK(c.built());
  CHECK(c.variables().size() == 2);
  CHECK(c.w.handle_id() == cw.handle_id());
  // The guide's first example: weights made in the constructor exist at once.
  EagerLinear e(4, 2);
  REQUIRE(e.trainable_variables().size() == 2);
  CHECK(e.tracked_variables()[0].first == "eager_linear/w");
  tf::testing::check_close(e(tf::ones({1, 2})),
                           tf::add(tf::matmul(tf::ones({1, 2}), e.w.value()), e.b.value()), 0, 0);
  CHECK(e.variables().size() == 2);
}

namespace {
// A layer with own weights (one non-trainable) and sub-layers, as in the Keras 3.15 check.
class Inner : public K::Model {
 public:
  tf::Tensor call(const tf::Tensor& x, bool) override {
    add_loss(tf::Tensor(7.0f));
    return tf::add(x, v);
  }
  tf::Variable v;

 protected:
  void build(const tf::TensorShape&) override { v = add_weight("v", {2}, "zeros"); }
};

class Outer : public K::Model {
 public:
  tf::Tensor call(const tf::Tensor& x, bool) override {
    add_loss(tf::Tensor(1.0f));
    tf::Tensor h = inner(d(x));
    add_loss(tf::Tensor(2.0f));
    return tf::add(tf::add(h, tf::matmul(x, w)), b);
  }
  K::layers::Dense d{2};
  Inner inner;
  tf::Variable w, m, b;

 protected:
  void build(const tf::TensorShape& s) override {
    w = add_weight("w", {s[-1], 2});
    m = add_weight("m", {2}, "zeros", /*trainable=*/false);
    b = add_weight("b", {2}, "zeros");
  }
};

std::vector<std::string> names_of(const std::vector<tf::Variable>& vs) {
  std::vector<std::string> out;
  for (const auto& v : vs) {
    const std::string n = v.name().substr(v.name().find('/') + 1);
    out.push_back(n.substr(0, n.find(':')));
  }
  return out;
}
}  // namespace

TEST_CASE("custom layer: weight lists and losses in Keras 3.15 order", "[cpu][keras]") {
  Outer o;
  (void)o(tf::ones({1, 3}));
  // Keras 3.15: weights [w, b, m, dense/kernel, dense/bias, inner/v]; trainable ones without m.
  CHECK(names_of(o.variables()) == std::vector<std::string>{"w", "b", "m", "kernel", "bias", "v"});
  CHECK(names_of(o.trainable_variables()) ==
        std::vector<std::string>{"w", "b", "kernel", "bias", "v"});
  CHECK(names_of(o.non_trainable_variables()) == std::vector<std::string>{"m"});
  CHECK(o.get_weights().size() == 6);
  CHECK(o.count_params() == 6 + 2 + 2 + 6 + 2 + 2);
  std::vector<std::string> tracked;
  for (const auto& [n, v] : o.tracked_variables()) tracked.push_back(n);
  // The root's own weights under its name, its layers' under theirs (as for any model).
  CHECK(tracked == std::vector<std::string>{"outer/w", "outer/m", "outer/b", "dense/kernel",
                                            "dense/bias", "inner/v"});
  K::Sequential holder({o});
  tracked.clear();
  for (const auto& [n, v] : holder.tracked_variables()) tracked.push_back(n);
  CHECK(tracked == std::vector<std::string>{"outer/w", "outer/m", "outer/b", "outer/dense/kernel",
                                            "outer/dense/bias", "outer/inner/v"});
  // Keras 3.15: [1, 2, 7] (own added losses, then the sub-layers').
  std::vector<double> losses;
  for (const auto& l : o.losses()) losses.push_back(l.item<float>());
  CHECK(losses == std::vector<double>{1, 2, 7});
  // Only the latest call's: a second call does not add to them.
  (void)o(tf::ones({1, 3}));
  CHECK(o.losses().size() == 3);
  const std::string s = o.summary_string();
  CHECK(s.find("Total params: 20\nTrainable params: 18\nNon-trainable params: 2\n") !=
        std::string::npos);
  // Keras 3's variables() also puts each layer's non-trainable weights after its trainable ones.
  K::Sequential seq({K::layers::Dense(2), K::layers::BatchNormalization(), K::layers::Dense(1)});
  seq.build({tf::None, 3});
  CHECK(names_of(seq.variables()) == std::vector<std::string>{"kernel", "bias", "gamma", "beta",
                                                              "moving_mean", "moving_variance",
                                                              "kernel", "bias"});
}

TEST_CASE("custom layer: save_weights and load_weights round trip", "[cpu][keras]") {
  TempFile f;
  Outer a, b;
  (void)a(tf::ones({1, 3}));
  a.m.assign(constant({3, 4}, {2}));
  a.save_weights(f.path);
  (void)b(tf::ones({1, 3}));
  b.load_weights(f.path);
  const auto wa = a.get_weights(), wb = b.get_weights();
  REQUIRE(wa.size() == wb.size());
  for (size_t i = 0; i < wa.size(); ++i) tf::testing::check_close(wa[i], wb[i], 0, 0);
  tf::testing::check_close(b(tf::ones({2, 3})), a(tf::ones({2, 3})), 0, 0);
  // set_weights in variables() order.
  Outer c;
  (void)c(tf::ones({1, 3}));
  c.set_weights(wa);
  tf::testing::check_close(c.m.value(), constant({3, 4}, {2}), 0, 0);
}

TEST_CASE("custom layer inside a Sequential fits a tiny problem", "[cpu][keras]") {
  tf::random::set_seed(3);
  Linear lin(1);
  K::Sequential model({lin});
  model.build({tf::None, 2});
  CHECK(lin.built());
  CHECK(model.count_params() == 3);
  CHECK(model.summary_string().find("Total params: 3\n") != std::string::npos);
  // y = 2 x0 - x1 + 0.5, learnt by fit's traced train step.
  std::vector<float> xs, ys;
  for (int i = 0; i < 32; ++i) {
    const float x0 = static_cast<float>(i % 8) / 4 - 1, x1 = static_cast<float>(i / 8) / 2 - 0.75f;
    xs.insert(xs.end(), {x0, x1});
    ys.push_back(2 * x0 - x1 + 0.5f);
  }
  model.compile(K::optimizers::SGD(0.2), "mse");
  const K::History h = model.fit(tf::constant(xs, {32, 2}), tf::constant(ys, {32, 1}),
                                 {.epochs = 60, .batch_size = 8, .verbose = 0});
  CHECK(h.history.at("loss").back() < 1e-4);
  tf::testing::check_close(lin.w.value(), constant({2, -1}, {2, 1}), 1e-2, 1e-2);
  tf::testing::check_close(lin.b.value(), constant({0.5f}, {1}), 1e-2, 1e-2);
  // Inside another subclassed model, traced by tf::function.
  class Wrap : public K::Model {
   public:
    explicit Wrap(Linear l) : inner(std::move(l)) {}
    tf::Tensor call(const tf::Tensor& x, bool) override {
      return tf::multiply(inner(x), tf::Tensor(2.0f));
    }
    Linear inner;
  };
  Wrap wrap(lin);
  auto f = tf::function([&](const tf::Tensor& x) { return wrap(x); });
  tf::testing::check_close(f(tf::ones({1, 2})), constant({2 * (2 - 1 + 0.5f)}, {1, 1}), 1e-2, 1e-2);
  CHECK(wrap.trainable_variables().size() == 2);
}

TEST_CASE("custom layer under a MirroredStrategy: mirrored weights and fit match one device",
          "[cpu][keras][multi_device]") {
  if (!tf::testing::split_cpu_in_two()) return;
  const tf::Tensor x = tf::constant(kX, {6, 3}), y = tf::constant(kY, {6, 2});
  auto train = [&](Linear& lin, ActReg& reg, std::optional<K::Sequential>& model) {
    model.emplace(K::Sequential({lin, reg}));
    model->build({tf::None, 3});
    lin.set_weights(
        {constant({0.1f, -0.2f, 0.3f, 0.4f, -0.5f, 0.6f}, {3, 2}), constant({0.05f, -0.05f}, {2})});
    model->compile(K::optimizers::SGD(0.1), "mse");
    return model->fit(x, y, {.epochs = 2, .batch_size = 6, .verbose = 0, .shuffle = false});
  };
  // Keras 3 (TF backend) divides each replica's added losses by the number of replicas, as the
  // compiled loss: with two replicas the rate-0.01 penalty of each half batch counts half, which
  // on one device is a rate of 0.005 over the whole batch.
  Linear l1(2);
  ActReg r1(0.005);
  std::optional<K::Sequential> m1;
  const K::History h1 = train(l1, r1, m1);

  tf::distribute::MirroredStrategy strategy({"/cpu:0", "/cpu:1"});
  std::optional<Linear> l2;
  std::optional<ActReg> r2;
  std::optional<K::Sequential> m2;
  K::History h2;
  {
    auto scope = strategy.scope();
    l2.emplace(2);
    r2.emplace(0.01);
    h2 = train(*l2, *r2, m2);
  }
  REQUIRE(l2->w.is_mirrored());
  const auto c = l2->w.components();
  tf::testing::check_close(c[0].value(), c[1].value(), 0, 0);
  tf::testing::check_close(l2->w.value(), l1.w.value(), 1e-5, 1e-6);
  for (size_t e = 0; e < 2; ++e)
    CHECK(h2.history.at("loss")[e] == Approx(h1.history.at("loss")[e]).epsilon(1e-5));
  // The first epoch's loss is Keras 3.15's on batches of 3 (its evaluate below).
  CHECK(h2.history.at("loss")[0] == Approx(1.1523832082748413).epsilon(1e-6));
}

TEST_CASE("add_loss: fit and evaluate and train_on_batch report Keras 3.15 losses",
          "[cpu][keras]") {
  const tf::Tensor x = tf::constant(kX, {6, 3}), y = tf::constant(kY, {6, 2});
  ActReg reg(0.01);  // a subclassed layer object lives while its handles are used
  auto make = [&] {
    K::Sequential m({K::layers::Dense(2), reg});
    m.build({tf::None, 3});
    m.layers()[0].set_weights(
        {constant({0.1f, -0.2f, 0.3f, 0.4f, -0.5f, 0.6f}, {3, 2}), constant({0.05f, -0.05f}, {2})});
    m.compile(K::optimizers::SGD(0.1), "mse");
    return m;
  };
  // Keras 3.15 on the same data and weights (shuffle=False): the compiled loss plus the added
  // one, in fit's logs and in evaluate's.
  K::Sequential m = make();
  CHECK(m.losses().empty());
  CHECK(m.evaluate(x, y, {.batch_size = 3, .verbose = 0})[0] ==
        Approx(1.1523832082748413).epsilon(1e-6));
  const K::History h = m.fit(x, y, {.epochs = 2, .batch_size = 3, .verbose = 0, .shuffle = false});
  CHECK(h.history.at("loss")[0] == Approx(1.120139241218567).epsilon(1e-6));
  CHECK(h.history.at("loss")[1] == Approx(0.8212526440620422).epsilon(1e-6));
  CHECK(m.evaluate(x, y, {.batch_size = 6, .verbose = 0})[0] ==
        Approx(0.6421293616294861).epsilon(1e-6));
  tf::testing::check_close(
      m.layers()[0].get_weights()[0],
      constant({0.036132846f, 0.083982855f, 0.25795686f, 0.36632735f, -0.23688795f, 0.40605462f},
               {3, 2}),
      1e-5, 1e-6);
  K::Sequential m2 = make();
  CHECK(m2.train_on_batch(x, y)[0] == Approx(1.1759142875671387).epsilon(1e-6));
  CHECK(m2.test_on_batch(x, y)[0] == Approx(0.9692432284355164).epsilon(1e-6));
  // The same eagerly (run_eagerly) as traced.
  K::Sequential m3 = make();
  m3.compile(K::optimizers::SGD(0.1), "mse", {}, {.run_eagerly = true});
  CHECK(m3.train_on_batch(x, y)[0] == Approx(1.1759142875671387).epsilon(1e-6));
}

TEST_CASE("add_loss in a custom training loop and a traced step", "[cpu][keras]") {
  const tf::Tensor x = tf::constant(kX, {6, 3});
  ActReg reg(0.01);
  K::Sequential model({K::layers::Dense(2), reg});
  model.build({tf::None, 3});
  model.layers()[0].set_weights(
      {constant({0.1f, -0.2f, 0.3f, 0.4f, -0.5f, 0.6f}, {3, 2}), constant({0.05f, -0.05f}, {2})});
  // Keras 3.15: model.losses right after model(x) is [0.04706225171685219].
  (void)model(x, true);
  REQUIRE(model.losses().size() == 1);
  CHECK(model.losses()[0].item<float>() == Approx(0.04706225171685219).epsilon(1e-6));
  // The guide's loop: loss_value += sum(model.losses); the gradient includes the added loss.
  const auto vars = model.trainable_variables();
  auto step = [&](const tf::Tensor& in) {
    tf::GradientTape tape;
    tf::Tensor out = model(in, true);
    tf::Tensor loss = tf::reduce_mean(tf::square(out));
    for (const tf::Tensor& l : model.losses()) loss = tf::add(loss, l);
    return std::pair{loss, tape.gradient(loss, vars)};
  };
  const auto [eager_loss, eager_grads] = step(x);
  const tf::Tensor h = tf::add(tf::matmul(x, vars[0].value()), vars[1].value());
  CHECK(eager_loss.item<float>() ==
        Approx(tf::reduce_mean(tf::square(h)).item<float>() + 0.04706225171685219).epsilon(1e-6));
  // d/db of (mean(h^2) + 0.01 sum(h^2)) = (2/12 + 0.02) sum over rows of h.
  tf::testing::check_close(eager_grads[1],
                           tf::multiply(tf::reduce_sum(h, 0), tf::Tensor(2.0f / 12 + 0.02f)), 1e-5,
                           1e-6);
  // Traced: the losses added during the trace are values of that trace.
  auto traced = tf::function([&](const tf::Tensor& in) {
    auto [loss, grads] = step(in);
    return std::vector<tf::Tensor>{loss, grads[0], grads[1]};
  });
  const auto t = traced(x);
  CHECK(t[0].item<float>() == Approx(eager_loss.item<float>()).epsilon(1e-6));
  tf::testing::check_close(t[2], eager_grads[1], 1e-5, 1e-6);
  // Read eagerly after the trace, the trace's values are not reported.
  for (const tf::Tensor& l : model.losses()) CHECK_FALSE(l.is_symbolic());
  // Nested: losses of layers inside a model inside a model are collected too.
  K::Sequential outer({model});
  (void)outer(x);
  CHECK(outer.losses().size() == 1);
}

namespace {
// Adds a loss only when asked: a call without one must clear the previous call's.
class Sometimes : public K::Model {
 public:
  tf::Tensor call(const tf::Tensor& x, bool) override {
    if (add) add_loss(tf::reduce_sum(x));
    return x;
  }
  bool add = false;
};
}  // namespace

TEST_CASE("add_loss: records start with the first loss and later calls clear them",
          "[cpu][keras]") {
  Sometimes s;
  K::Sequential parent({K::layers::Dense(2, {.kernel_initializer = "ones"}), s});
  const tf::Tensor x = tf::ones({1, 2});
  (void)parent(x);  // no loss yet: no layer keeps call records
  CHECK(parent.losses().empty());
  CHECK(s.losses().empty());
  s.add = true;
  (void)parent(x);  // dense gives [2, 2]: the loss is 4
  REQUIRE(parent.losses().size() == 1);
  CHECK(parent.losses()[0].item<float>() == 4.0f);
  REQUIRE(s.losses().size() == 1);
  s.add = false;
  (void)parent(x);  // the parent's and the layer's records move to this call: no losses
  CHECK(parent.losses().empty());
  CHECK(s.losses().empty());
  s.add = true;
  (void)s(tf::fill({1, 3}, 2.0f));  // a direct call: the layer's own latest call
  REQUIRE(s.losses().size() == 1);
  CHECK(s.losses()[0].item<float>() == 6.0f);
  // Each thread sees the losses of its own latest call.
  std::vector<float> seen(2, -1.0f);
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([&, t] {
      (void)parent(tf::fill({1, 2}, static_cast<float>(t + 1)));
      // (No exception may leave the thread: an empty list shows as -2 in the CHECK below.)
      const auto losses = parent.losses();
      seen[static_cast<size_t>(t)] = losses.empty() ? -2.0f : losses[0].item<float>();
    });
  for (auto& th : threads) th.join();
  CHECK(seen == std::vector<float>{4.0f, 8.0f});
}

TEST_CASE(
    "custom layer errors: add_weight in call or after the build and duplicate names and "
    "add_loss outside a call",
    "[cpu][keras]") {
  class InCall : public K::Model {
   public:
    tf::Tensor call(const tf::Tensor& x, bool) override {
      (void)add_weight("w", {1});
      return x;
    }
    void loss_outside() { add_loss(tf::Tensor(1.0f)); }
  };
  InCall a;
  TF_REQUIRE_THROWS_CONTAINING(a(tf::ones({1, 1})), tf::FailedPreconditionError,
                               "create weights in build()");
  CHECK(a.variables().empty());
  class Dup : public K::Model {
   public:
    tf::Tensor call(const tf::Tensor& x, bool) override { return x; }

   protected:
    void build(const tf::TensorShape&) override {
      (void)add_weight("w", {1});
      (void)add_weight("w", {2});
    }
  };
  Dup d;
  tf::testing::require_error(
      [&] {
        (void)d(tf::ones({1, 1}));
      },
      {"already has a weight named 'w'"});
  CHECK_FALSE(d.built());
  CHECK(d.variables().empty());  // the failed build left nothing behind
  // The default build calls the model once on zeros: that is a call too.
  InCall b;
  TF_REQUIRE_THROWS_CONTAINING(b.build({tf::None, 1}), tf::FailedPreconditionError,
                               "create weights in build()");
  TF_REQUIRE_THROWS_CONTAINING(a.loss_outside(), tf::FailedPreconditionError,
                               "add_loss() outside a call");
  class Plain : public K::Model {
   public:
    tf::Tensor call(const tf::Tensor& x, bool) override { return x; }
    void late() { (void)add_weight("late", {1}); }
  };
  Plain p;
  (void)p(tf::ones({1, 1}));
  TF_REQUIRE_THROWS_CONTAINING(p.late(), tf::FailedPreconditionError, "already built");
  tf::testing::require_error([&] { EagerLinear(2, tf::None); }, {"fully defined"});
}
