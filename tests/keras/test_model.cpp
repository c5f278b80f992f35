// Models: Sequential (API.md's example, eager build, add, summary text, shape errors),
// subclassed models (member tracking, dispatch through copies, lifetime errors), nesting,
// gradients against finite differences, and tf::function tracing through layers.
#include <barrier>
#include <cmath>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include "autograd/tape.h"
#include "autograd/variable.h"
#include "core/error.h"
#include "jit/function.h"
#include "keras/layers.h"
#include "keras/model.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/nn.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
using tf::testing::check_values;

namespace {

std::vector<double> vals(const tf::Tensor& t) { return tf::detail::to_double_vector(t); }

tf::Tensor input(const tf::TensorShape& s, unsigned seed = 1) {
  return tf::convert_to_tensor(tf::testing::random_values(s.num_elements(), -1, 1, seed), s);
}

struct Float64Layers {
  Float64Layers() { tf::keras::backend::set_floatx(tf::float64); }
  ~Float64Layers() { tf::keras::backend::set_floatx(tf::float32); }
};

// The quickstart-expert model: Conv2D 3x3, Flatten, Dense relu, Dense.
class MyModel : public tf::keras::Model {
 public:
  tf::Tensor call(const tf::Tensor& x, bool training) override {
    (void)training;
    tf::Tensor h = conv1(x);
    h = flatten(h);
    h = d1(h);
    return d2(h);
  }

  tf::keras::layers::Conv2D conv1{4, 3, {.activation = "relu"}};
  tf::keras::layers::Flatten flatten;
  tf::keras::layers::Dense d1{8, "relu"};
  tf::keras::layers::Dense d2{3};
};

// Uses a layer only in training; track() makes it known before any call.
class Gated : public tf::keras::Model {
 public:
  Gated() : tf::keras::Model("gated") {}
  tf::Tensor call(const tf::Tensor& x, bool training) override {
    tf::Tensor h = body(x);
    return training ? extra(h) : h;
  }
  tf::keras::layers::Dense body{4};
  tf::keras::layers::Dense extra = track(tf::keras::layers::Dense(4));
};

class NoCall : public tf::keras::Model {};

MyModel make_model() {
  MyModel m;
  return m;
}

}  // namespace

TEST_CASE("API.md's Sequential builds from Flatten's input_shape and prints Keras' summary",
          "[cpu][keras]") {
  auto model = tf::keras::Sequential({tf::keras::layers::Flatten({28, 28}),
                                      tf::keras::layers::Dense(128, "relu"),
                                      tf::keras::layers::Dropout(0.2),
                                      tf::keras::layers::Dense(10)},
                                     "sequential_api");
  CHECK(model.built());
  CHECK(model.count_params() == 101770);
  CHECK(model.trainable_variables().size() == 4);
  CHECK(model.non_trainable_variables().empty());
  CHECK(model.output_shape() == tf::TensorShape({tf::None, 10}));
  auto ls = model.layers();
  REQUIRE(ls.size() == 4);
  const std::string f = ls[0].name(), d = ls[1].name(), o = ls[2].name(), d2 = ls[3].name();
  CHECK(ls[2].class_name() == "Dropout");
  auto row = [](const std::string& first, const std::string& shape, const std::string& params) {
    std::string line = " " + first;
    line += std::string(29 - line.size(), ' ') + shape;
    line += std::string(55 - line.size(), ' ') + params;
    line += std::string(65 - line.size(), ' ');
    return line + "\n";
  };
  const std::string blank = std::string(65, ' ') + "\n";
  const std::string expected =
      "Model: \"sequential_api\"\n" + std::string(65, '_') + "\n" +
      row("Layer (type)", "Output Shape", "Param #") + std::string(65, '=') + "\n" +
      row(f + " (Flatten)", "(None, 784)", "0") + blank +
      row(d + " (Dense)", "(None, 128)", "100480") + blank +
      row(o + " (Dropout)", "(None, 128)", "0") + blank +
      row(d2 + " (Dense)", "(None, 10)", "1290") + blank + std::string(65, '=') + "\n" +
      "Total params: 101,770\nTrainable params: 101,770\nNon-trainable params: 0\n" +
      std::string(65, '_') + "\n";
  CHECK(model.summary_string() == expected);
  std::ostringstream os;
  model.summary(os);
  CHECK(os.str() == expected);
  // The header row exactly as Keras prints it.
  CHECK(expected.find(" Layer (type)                Output Shape              Param #   \n") !=
        std::string::npos);

  tf::Tensor y = model(tf::zeros({3, 28, 28}));
  CHECK(y.shape() == tf::TensorShape({3, 10}));
  try {
    (void)model(tf::zeros({3, 784}));
    FAIL("no error");
  } catch (const tf::InvalidArgumentError& e) {
    const std::string m = e.what();
    CHECK(m.find(f) != std::string::npos);
    CHECK(m.find("(None, 28, 28)") != std::string::npos);
    CHECK(m.find("(3, 784)") != std::string::npos);
  }
}

TEST_CASE("Sequential builds on its first call, add() extends it, summary before that is an "
          "error",
          "[cpu][keras]") {
  Float64Layers f64;
  tf::keras::Sequential model;
  model.add(tf::keras::layers::Dense(4, "tanh"));
  TF_REQUIRE_THROWS_CONTAINING(model.summary_string(), tf::FailedPreconditionError,
                               "has not yet been built");
  CHECK_FALSE(model.built());
  CHECK(model.trainable_variables().empty());
  const tf::Tensor x = input({5, 3});
  tf::Tensor y1 = model(x);
  CHECK(model.built());
  CHECK(model.output_shape() == tf::TensorShape({tf::None, 4}));
  model.add(tf::keras::layers::Dense(2));
  CHECK(model.output_shape() == tf::TensorShape({tf::None, 2}));
  CHECK(model.trainable_variables().size() == 4);
  auto ls = model.layers();
  check_values(model(x), vals(ls[1](y1)), 1e-12, 1e-12);
  CHECK(model.summary_string().find("Total params: 26\n") != std::string::npos);
  // get_layer, get_weights and set_weights as Keras'.
  CHECK(model.get_layer(ls[1].name()).id() == ls[1].id());
  TF_REQUIRE_THROWS_CONTAINING(model.get_layer("nope"), tf::NotFoundError, ls[0].name());
  auto w = model.get_weights();
  REQUIRE(w.size() == 4);
  CHECK(w[0].shape() == tf::TensorShape({3, 4}));
  w[3] = tf::constant({5.0, 6.0});
  model.set_weights(w);
  check_values(ls[1].variables()[1], {5, 6});
  w[0] = tf::zeros({4, 3}, tf::float64);
  TF_REQUIRE_THROWS_CONTAINING(model.set_weights(w), tf::InvalidArgumentError, "(3, 4)");
  TF_REQUIRE_THROWS_CONTAINING(model.set_weights({}), tf::InvalidArgumentError, "4 weights");
  TF_REQUIRE_THROWS_CONTAINING(tf::keras::Sequential()(x), tf::FailedPreconditionError,
                               "has no layers");
  // A long name wraps onto a second line as Keras' print_row does.
  tf::keras::Sequential named({tf::keras::layers::Dense(
      2, {.input_shape = {3}, .name = "a_very_long_layer_name_for_wrapping"})});
  const std::string s = named.summary_string();
  CHECK(s.find(" a_very_long_layer_name_for_wr(None, 2)") == std::string::npos);
  CHECK(s.find(" a_very_long_layer_name_for_  (None, 2)") != std::string::npos);
  CHECK(s.find(" wrapping (Dense)") != std::string::npos);
}

TEST_CASE("a subclassed model tracks its member layers and works through copies",
          "[cpu][keras]") {
  MyModel model;
  CHECK(model.trainable_variables().empty());
  CHECK_FALSE(model.built());
  TF_REQUIRE_THROWS_CONTAINING(model.summary_string(), tf::FailedPreconditionError,
                               "Build the model first");
  const tf::Tensor x = input({2, 6, 6, 1}, 3);
  tf::Tensor y = model(x, true);
  CHECK(y.shape() == tf::TensorShape({2, 3}));
  CHECK(model.class_name() == "MyModel");
  CHECK(model.name().rfind("my_model", 0) == 0);
  auto ls = model.layers();
  REQUIRE(ls.size() == 4);
  CHECK(ls[0].id() == model.conv1.id());
  CHECK(ls[3].id() == model.d2.id());
  auto tv = model.trainable_variables();
  REQUIRE(tv.size() == 6);
  CHECK(tv[0].handle_id() == model.conv1.kernel().handle_id());
  CHECK(tv[5].handle_id() == model.d2.bias().handle_id());
  // conv 3*3*1*4 + 4, dense 64*8 + 8, dense 8*3 + 3
  CHECK(model.count_params() == 40 + 520 + 27);
  auto tracked = model.tracked_variables();
  REQUIRE(tracked.size() == 6);
  // Checkpoint names: each layer's base name, numbered among its siblings.
  CHECK(tracked[0].first == "conv2d/kernel");
  CHECK(tracked[2].first == "dense/kernel");
  CHECK(tracked[4].first == "dense_1/kernel");
  const std::string s = model.summary_string();
  CHECK(s.find("Model: \"" + model.name() + "\"") == 0);
  CHECK(s.find(model.conv1.name() + " (Conv2D)") != std::string::npos);
  CHECK(s.find("(None, 4, 4, 4)") != std::string::npos);
  CHECK(s.find("Total params: 587\n") != std::string::npos);

  // A model is a layer: inside a Sequential it still runs MyModel::call.
  tf::keras::Sequential probability({model, tf::keras::layers::Softmax()});
  tf::Tensor p = probability(x);
  check_values(p, vals(tf::nn::softmax(model(x))), 1e-6, 1e-6);
  CHECK(probability.trainable_variables().size() == 6);
  // Copies of the object share the model.
  MyModel copy = model;
  check_values(copy(x), vals(model(x)));
  tf::keras::Model as_base = model;
  check_values(as_base(x), vals(model(x)));
  MyModel returned = make_model();
  CHECK(returned(x).shape() == tf::TensorShape({2, 3}));
}

TEST_CASE("a subclassed model used after its object died is an error, not a crash",
          "[cpu][keras]") {
  tf::keras::Layer handle;
  tf::keras::Sequential outer;
  std::string name;
  {
    MyModel model;
    handle = model;
    outer.add(model);
    name = model.name();
    CHECK(handle(tf::zeros({1, 5, 5, 1})).shape() == tf::TensorShape({1, 3}));
    MyModel survivor = model;  // also goes out of scope
  }
  TF_REQUIRE_THROWS_CONTAINING(handle(tf::zeros({1, 5, 5, 1})), tf::FailedPreconditionError,
                               "was destroyed");
  TF_REQUIRE_THROWS_CONTAINING(outer(tf::zeros({1, 5, 5, 1})), tf::FailedPreconditionError,
                               name);
  // Its weights stay reachable (a checkpoint may still save them).
  CHECK(handle.trainable_variables().size() == 6);
  {
    // Assigning a plain layer through a Layer reference cannot corrupt the model's bookkeeping.
    MyModel m;
    tf::keras::Layer& ref = m;
    ref = tf::keras::layers::Dense(2);
    TF_REQUIRE_THROWS_CONTAINING(m.layers(), tf::FailedPreconditionError, "not a model");
  }
  NoCall nc;
  TF_REQUIRE_THROWS_CONTAINING(nc(tf::zeros({1})), tf::UnimplementedError,
                               "does not override call");
}

TEST_CASE("track() registers a layer before the first call", "[cpu][keras]") {
  Gated g;
  CHECK(g.name() == "gated");
  REQUIRE(g.layers().size() == 1);
  CHECK(g.layers()[0].id() == g.extra.id());
  (void)g(tf::zeros({2, 4}), false);
  auto ls = g.layers();
  REQUIRE(ls.size() == 2);
  CHECK(ls[1].id() == g.body.id());
  CHECK(g.trainable_variables().size() == 2);  // extra is not built yet
  (void)g(tf::zeros({2, 4}), true);
  CHECK(g.trainable_variables().size() == 4);
  CHECK(g.layers().size() == 2);
}

TEST_CASE("nested models: Sequential in a subclassed model in a Sequential", "[cpu][keras]") {
  class Outer : public tf::keras::Model {
   public:
    tf::Tensor call(const tf::Tensor& x, bool training) override {
      return head(block(x, training), training);
    }
    tf::keras::Sequential block{{tf::keras::layers::Dense(6, "relu"),
                                 tf::keras::layers::BatchNormalization(),
                                 tf::keras::layers::Dropout(0.5)}};
    tf::keras::layers::Dense head{2};
  };
  Outer inner;
  tf::keras::Sequential model({inner, tf::keras::layers::Softmax()});
  // Building the Sequential statically calls the subclassed model once on zeros.
  model.build({tf::None, 3});
  CHECK(model.built());
  CHECK(model.output_shape() == tf::TensorShape({tf::None, 2}));
  CHECK(model.trainable_variables().size() == 6);      // dense, gamma, beta, head
  CHECK(model.non_trainable_variables().size() == 2);  // moving statistics
  CHECK(model.variables().size() == 8);
  CHECK(model.count_params() == 24 + 24 + 14);
  auto tracked = model.tracked_variables();
  REQUIRE(tracked.size() == 8);
  for (size_t i = 0; i < tracked.size(); ++i)
    for (size_t j = i + 1; j < tracked.size(); ++j) CHECK(tracked[i].first != tracked[j].first);
  const std::string s = model.summary_string();
  CHECK(s.find(inner.name() + " (Outer)") != std::string::npos);
  CHECK(s.find("Total params: 62\nTrainable params: 50\nNon-trainable params: 12\n") !=
        std::string::npos);
  // Freezing a model freezes every nested layer (Keras' trainable setter).
  model.set_trainable(false);
  CHECK_FALSE(inner.block.layers()[1].trainable());
  CHECK(model.trainable_variables().empty());
  CHECK(model.non_trainable_variables().size() == 8);
  CHECK(model.summary_string().find("Trainable params: 0\nNon-trainable params: 62\n") !=
        std::string::npos);
  model.set_trainable(true);
  CHECK(model.trainable_variables().size() == 6);
  tf::Tensor y = model(input({4, 3}), true);
  auto v = vals(y);
  for (int r = 0; r < 4; ++r) CHECK(v[2 * r] + v[2 * r + 1] == Approx(1.0));
  // Two layers with one explicit name clash in a checkpoint's names.
  tf::keras::Sequential clash({tf::keras::layers::Dense(2, {.input_shape = {2}, .name = "same"}),
                               tf::keras::layers::Dense(2, {.name = "same"})});
  TF_REQUIRE_THROWS_CONTAINING(clash.tracked_variables(), tf::InvalidArgumentError,
                               "'same/kernel'");
}

TEST_CASE("gradients of a small model match central finite differences", "[cpu][keras]") {
  Float64Layers f64;
  tf::random::set_seed(5);
  tf::keras::Sequential model({tf::keras::layers::Dense(4, "tanh"),
                               tf::keras::layers::Dense(3, "sigmoid"),
                               tf::keras::layers::Dense(2)});
  const tf::Tensor x = input({5, 3}, 8);
  auto loss = [&] { return tf::reduce_sum(tf::square(model(x, true))); };
  (void)loss();
  auto vars = model.trainable_variables();
  REQUIRE(vars.size() == 6);
  tf::GradientTape tape;
  tf::Tensor l = loss();
  auto grads = tape.gradient(l, vars);
  REQUIRE(grads.size() == vars.size());
  const double h = 1e-6;
  for (size_t i = 0; i < vars.size(); ++i) {
    REQUIRE(grads[i].defined());
    REQUIRE(grads[i].shape() == vars[i].shape());
    auto base = vals(vars[i].value());
    auto g = vals(grads[i]);
    for (size_t j = 0; j < base.size(); ++j) {
      auto p = base, m = base;
      p[j] += h;
      m[j] -= h;
      vars[i].assign(tf::convert_to_tensor(p, vars[i].shape()));
      const double lp = loss().item<double>();
      vars[i].assign(tf::convert_to_tensor(m, vars[i].shape()));
      const double lm = loss().item<double>();
      vars[i].assign(tf::convert_to_tensor(base, vars[i].shape()));
      CHECK(g[j] == Approx((lp - lm) / (2 * h)).epsilon(1e-6).margin(1e-8));
    }
  }
}

TEST_CASE("a tape around model(x, true) reaches every trainable variable", "[cpu][keras]") {
  // Seeded: with some draws of weights and dropout every ReLU unit is dead for both samples,
  // and the last layer's gradients are then exactly zero.
  tf::random::set_seed(7);
  tf::keras::Sequential model({tf::keras::layers::Conv2D(3, 3, 1, "same", "relu"),
                               tf::keras::layers::BatchNormalization(),
                               tf::keras::layers::MaxPooling2D(),
                               tf::keras::layers::AveragePooling2D(),
                               tf::keras::layers::Flatten(),
                               tf::keras::layers::Dropout(0.1),
                               tf::keras::layers::Dense(4),
                               tf::keras::layers::ReLU(),
                               tf::keras::layers::Dense(2, "softmax")});
  const tf::Tensor x = input({2, 8, 8, 2}, 6);
  tf::GradientTape tape;
  tf::Tensor l = tf::reduce_sum(tf::square(model(x, true)));
  auto vars = model.trainable_variables();
  REQUIRE(vars.size() == 8);
  auto grads = tape.gradient(l, vars);
  for (size_t i = 0; i < grads.size(); ++i) {
    INFO(vars[i].name());
    REQUIRE(grads[i].defined());
    CHECK(grads[i].shape() == vars[i].shape());
    double norm = 0;
    for (double v : vals(grads[i])) norm += std::abs(v);
    CHECK(norm > 0);
  }
}

TEST_CASE("tf::function traces through layers: variables are read and dropout redrawn at "
          "every replay",
          "[cpu][keras]") {
  tf::keras::layers::Dense dense(5, {.kernel_initializer = "ones"});
  tf::keras::layers::Dropout drop(0.5);
  tf::keras::Sequential model({dense, drop});
  // The first (traced) call builds the model: its variables are created eagerly.
  auto f = tf::function([&](tf::Tensor x) { return model(x, true); });
  const tf::Tensor x = tf::ones({4, 50});
  auto a = vals(f(x));
  auto b = vals(f(x));
  CHECK(f.tracing_count() == 1);
  CHECK(model.built());
  CHECK(a != b);
  int zeros = 0;
  for (double v : a) {
    if (v == 0) ++zeros;
    else CHECK(v == Approx(100.0));  // 50 ones * kernel 1, scaled by 2
  }
  CHECK(zeros > 0);
  CHECK(zeros < 20);
  // A later assignment is seen by the next replay.
  dense.kernel().assign(tf::fill({50, 5}, tf::Tensor(0.5f)));
  auto inference = tf::function([&](tf::Tensor x) { return model(x, false); });
  check_values(inference(x), std::vector<double>(20, 25.0));
  dense.kernel().assign(tf::fill({50, 5}, tf::Tensor(2.0f)));
  check_values(inference(x), std::vector<double>(20, 100.0));
  CHECK(inference.tracing_count() == 1);

  // A traced train step with a tape inside: one SGD step equals the eager one.
  tf::keras::Sequential m2({tf::keras::layers::Dense(3, "tanh", true, "ones"),
                            tf::keras::layers::Dense(1, "", true, "ones")});
  auto step = tf::function([&](tf::Tensor xb) {
    tf::GradientTape tape;
    tf::Tensor loss = tf::reduce_mean(tf::square(m2(xb, true)));
    auto vars = m2.trainable_variables();
    auto grads = tape.gradient(loss, vars);
    for (size_t i = 0; i < vars.size(); ++i) vars[i].assign_sub(grads[i] * 0.1f);
    return loss;
  });
  const tf::Tensor xb = input({4, 2}, 12);
  const float l1 = step(xb).item<float>();
  const float l2 = step(xb).item<float>();
  CHECK(step.tracing_count() == 1);
  CHECK(l2 < l1);
}

TEST_CASE("a subclassed model first called by several threads builds and tracks once",
          "[cpu][keras][multi_device]") {
  const std::vector<tf::Device> devices = {tf::Device{tf::DeviceType::CPU, 0},
                                           tf::Device{tf::DeviceType::CPU, 0}};
  std::optional<MyModel> model;
  {
    tf::detail::MirrorVariablesScope mirror(devices);
    model.emplace();
  }
  constexpr int kThreads = 4;
  const tf::Tensor x = input({2, 5, 5, 1}, 17);
  std::barrier start(kThreads);
  std::vector<tf::Tensor> out(kThreads);
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      try {
        tf::detail::ReplicaComponentScope replica(t % 2);
        start.arrive_and_wait();
        out[t] = (*model)(x);
      } catch (const std::exception& e) {
        errors[t] = e.what();
      }
    });
  for (auto& th : threads) th.join();
  for (const auto& e : errors) REQUIRE(e.empty());
  auto ls = model->layers();
  REQUIRE(ls.size() == 4);
  CHECK(ls[0].id() == model->conv1.id());
  CHECK(ls[1].id() == model->flatten.id());
  CHECK(ls[2].id() == model->d1.id());
  CHECK(ls[3].id() == model->d2.id());
  auto vars = model->trainable_variables();
  REQUIRE(vars.size() == 6);
  for (const auto& v : vars) {
    REQUIRE(v.is_mirrored());
    auto c = v.components();
    CHECK(vals(c[0].value()) == vals(c[1].value()));
  }
  for (int t = 1; t < kThreads; ++t) CHECK(vals(out[t]) == vals(out[0]));
}

TEST_CASE("a model traced with an input_signature of unknown batch size",
          "[cpu][keras]") {
  tf::keras::Sequential model({tf::keras::layers::Flatten({4, 4}),
                               tf::keras::layers::Dense(8, "relu"),
                               tf::keras::layers::BatchNormalization(),
                               tf::keras::layers::Dense(3)});
  auto f = tf::function([&](tf::Tensor x) { return model(x, true); },
                        tf::FunctionOptions{.input_signature = {tf::TensorSpec({tf::None, 4, 4})}});
  for (int64_t n : {2, 5}) {
    const tf::Tensor x = tf::cast(input({n, 4, 4}, 30 + unsigned(n)), tf::float32);
    tf::Tensor y = f(x);
    CHECK(y.shape() == tf::TensorShape({n, 3}));
    // Training mode normalises with the batch's statistics: the eager call gives the same.
    check_values(y, vals(model(x, true)), 1e-5, 1e-5);
  }
}

TEST_CASE("Sequential with an already-built Dense rejects a rank-0 input", "[cpu][keras]") {
  tf::keras::layers::Dense d(3);
  (void)d(input({2, 4}));
  tf::keras::Sequential m({d});
  tf::testing::require_error([&] { (void)m(tf::constant(1.0f)); },
                             {"[" + d.name() + "]", "(Dense)", "min_ndim=2"});
  // A layer added to a built model is checked against the model's output shape as well.
  tf::keras::Sequential built({tf::keras::layers::Dense(5)});
  built.build({tf::None, 2});
  tf::testing::require_error([&] { built.add(d); }, {"[" + d.name() + "]", "(Dense)"});
  CHECK(built.layers().size() == 1);
}

TEST_CASE("Sequential models cannot contain each other", "[cpu][keras]") {
  tf::keras::Sequential a({tf::keras::layers::Dense(2)}, "outer_a");
  tf::keras::Sequential b({a}, "middle_b");
  tf::keras::Sequential c({b}, "inner_c");
  tf::testing::require_error([&] { a.add(b); }, {"[outer_a]", "middle_b", "contain itself"});
  tf::testing::require_error([&] { a.add(c); }, {"[outer_a]", "inner_c", "contain itself"});
  CHECK(a.layers().size() == 1);
  // The models still work and list their weights once (no cycle was formed).
  (void)c(input({1, 3}));
  CHECK(c.trainable_variables().size() == 2);
}

TEST_CASE("a Sequential or Dense handle assigned another kind through a base reference",
          "[cpu][keras]") {
  tf::keras::Sequential s;
  NoCall other;
  tf::keras::Model& as_model = s;
  as_model = other;
  TF_REQUIRE_THROWS_CONTAINING(s.add(tf::keras::layers::Dense(2)), tf::FailedPreconditionError,
                               "[Sequential]");
  tf::keras::layers::Dense d(3);
  tf::keras::Layer& as_layer = d;
  as_layer = tf::keras::layers::Dropout(0.5);
  TF_REQUIRE_THROWS_CONTAINING((void)d.units(), tf::FailedPreconditionError, "[Dense]");
}

TEST_CASE(
    "a model that recurses without end is an error and one that recurses while it builds works",
    "[cpu][keras]") {
  // (A model added to a Sequential it owns recurses the same way; not tested here: the handles
  // of such a cycle hold each other, which LeakSanitizer reports.)
  // A call that calls its own model with no base case: an error before the stack overflows.
  class Endless : public tf::keras::Model {
   public:
    tf::Tensor call(const tf::Tensor& x, bool training) override {
      return (*this)(d(x), training);
    }
    tf::keras::layers::Dense d{2};
  };
  Endless e;
  TF_REQUIRE_THROWS_CONTAINING(e(tf::ones({1, 2})), tf::FailedPreconditionError,
                               "nested 256 deep");
  // Recursion with a base case works, also while the model builds.
  class Countdown : public tf::keras::Model {
   public:
    int left = 5;
    tf::Tensor call(const tf::Tensor& x, bool training) override {
      if (left-- == 0) return x;
      return (*this)(x + 1.0f, training);
    }
  };
  Countdown c;
  check_values(c(tf::zeros({1, 1})), {5});
}
