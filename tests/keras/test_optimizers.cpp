// Optimizers and learning-rate schedules against plain double re-implementations of Keras 3's
// formulas; traced against eager; the replica path (all-reduce, mirrored slots and counter).
#include <barrier>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "autograd/tape.h"
#include "autograd/variable.h"
#include "core/device.h"
#include "core/error.h"
#include "distribute/replica_context.h"
#include "jit/function.h"
#include "keras/optimizers.h"
#include "keras/schedules.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
namespace opt = tapeflow::keras::optimizers;
namespace sched = tapeflow::keras::optimizers::schedules;
using tf::testing::check_values;

namespace {

const std::vector<double> kInit = {1.0, -2.0, 0.5};
const std::vector<std::vector<double>> kGrads = {
    {0.1, -0.2, 0.3}, {0.5, 0.4, -0.1}, {-0.3, 0.2, 0.05}};

// What tapeflow feeds the update: the learning rate goes through a float32 variable.
double f32(double v) { return static_cast<double>(static_cast<float>(v)); }

// The plain reference: one scalar at a time, per Keras 3 (keras/src/optimizers/*.py).
struct Ref {
  std::string kind;  // sgd adam rmsprop
  double lr = 0.01, momentum = 0, rho = 0.9, b1 = 0.9, b2 = 0.999, eps = 1e-7, wd = 0;
  bool nesterov = false, amsgrad = false, centered = false;
  std::function<double(int)> lr_at;  // a schedule, else the constant lr

  std::vector<double> run(int steps) const {
    std::vector<double> x = kInit, m(3, 0), v(3, 0), vhat(3, 0), ag(3, 0), mom(3, 0);
    for (int s = 0; s < steps; ++s) {
      const double a = lr_at ? f32(lr_at(s)) : f32(lr);
      const double t = s + 1;
      for (int i = 0; i < 3; ++i) {
        const double g = kGrads[static_cast<size_t>(s)][static_cast<size_t>(i)];
        if (wd > 0) x[i] = x[i] - x[i] * f32(wd) * a;  // Keras casts wd through float32
        if (kind == "sgd") {
          if (momentum == 0) {
            x[i] -= g * a;
          } else {
            m[i] = m[i] * f32(momentum) - g * a;  // Keras casts momentum through float32
            x[i] += nesterov ? m[i] * f32(momentum) - g * a : m[i];
          }
        } else if (kind == "adam") {
          // Keras casts the betas to the variable's dtype through float32 (ops.cast).
          const double alpha = a * std::sqrt(1 - std::pow(f32(b2), t)) / (1 - std::pow(f32(b1), t));
          m[i] += (g - m[i]) * (1 - b1);
          v[i] += (g * g - v[i]) * (1 - b2);
          double vv = v[i];
          if (amsgrad) vv = vhat[i] = std::max(vhat[i], v[i]);
          x[i] -= m[i] * alpha / (std::sqrt(vv) + eps);
        } else {  // rmsprop
          v[i] = rho * v[i] + (1 - rho) * g * g;
          double denom = v[i] + eps;
          if (centered) {
            ag[i] = rho * ag[i] + (1 - rho) * g;
            denom = v[i] - ag[i] * ag[i] + eps;
          }
          const double inc = a * g / std::sqrt(denom);
          if (momentum > 0) {
            mom[i] = momentum * mom[i] + inc;
            x[i] -= mom[i];
          } else {
            x[i] -= inc;
          }
        }
      }
    }
    return x;
  }
};

Ref make_ref(std::string kind) {
  Ref r;
  r.kind = std::move(kind);
  return r;
}

std::vector<double> run_optimizer(opt::Optimizer o, tf::DType dtype, int steps) {
  tf::Variable x(tf::constant(tf::convert_to_tensor(kInit, {3}), dtype), "x");
  for (int s = 0; s < steps; ++s)
    o.apply_gradients({tf::constant(tf::convert_to_tensor(kGrads[static_cast<size_t>(s)], {3}),
                                    dtype)},
                      {x});
  CHECK(o.iterations().value().item<int64_t>() == steps);
  return tf::detail::to_double_vector(x.value());
}

struct Case {
  std::string label;
  std::function<opt::Optimizer()> make;
  Ref ref;
};

std::vector<Case> cases() {
  std::vector<Case> c;
  auto sgd = [](double lr, double m, bool n) {
    Ref r = make_ref("sgd");
    r.lr = lr, r.momentum = m, r.nesterov = n;
    return r;
  };
  c.push_back({"SGD", [] { return opt::SGD(0.1); }, sgd(0.1, 0, false)});
  c.push_back({"SGD momentum", [] { return opt::SGD(0.1, 0.9); }, sgd(0.1, 0.9, false)});
  c.push_back({"SGD nesterov", [] { return opt::SGD(0.1, 0.9, true); }, sgd(0.1, 0.9, true)});
  Ref adam = make_ref("adam");
  adam.lr = 0.01;
  c.push_back({"Adam", [] { return opt::Adam(0.01); }, adam});
  Ref ams = adam;
  ams.amsgrad = true;
  c.push_back({"Adam amsgrad", [] { return opt::Adam(0.01, 0.9, 0.999, 1e-7, true); }, ams});
  Ref adam2 = adam;
  adam2.b1 = 0.8, adam2.b2 = 0.95, adam2.eps = 1e-3;
  c.push_back({"Adam betas", [] { return opt::Adam(0.01, 0.8, 0.95, 1e-3); }, adam2});
  Ref adamw = adam;
  adamw.wd = 0.004;
  c.push_back({"AdamW", [] { return opt::AdamW(0.01); }, adamw});
  Ref adamw2 = adam;
  adamw2.wd = 0.5;
  c.push_back({"AdamW wd 0.5", [] { return opt::AdamW(0.01, 0.5); }, adamw2});
  Ref rms = make_ref("rmsprop");
  rms.lr = 0.01;
  c.push_back({"RMSprop", [] { return opt::RMSprop(0.01); }, rms});
  Ref rmsm = rms;
  rmsm.momentum = 0.5;
  c.push_back({"RMSprop momentum", [] { return opt::RMSprop(0.01, 0.9, 0.5); }, rmsm});
  Ref rmsc = rms;
  rmsc.centered = true;
  c.push_back({"RMSprop centered", [] { return opt::RMSprop(0.01, 0.9, 0.0, 1e-7, true); },
               rmsc});
  Ref rmscm = rmsc;
  rmscm.momentum = 0.5, rmscm.rho = 0.8;
  c.push_back({"RMSprop centered momentum",
               [] { return opt::RMSprop(0.01, 0.8, 0.5, 1e-7, true); }, rmscm});
  Ref sched_sgd = sgd(0.0, 0.9, false);
  sched_sgd.lr_at = [](int s) { return 0.1 * std::pow(0.5, s / 2.0); };
  c.push_back({"SGD with ExponentialDecay",
               [] { return opt::SGD(sched::ExponentialDecay(0.1, 2, 0.5), 0.9); }, sched_sgd});
  return c;
}

}  // namespace

TEST_CASE("optimizers: 3 steps match Keras' formulas in double", "[keras][cpu]") {
  for (const auto& c : cases()) {
    INFO(c.label);
    const auto want = c.ref.run(3);
    // float64 variables: only the float32 learning rate and rounding order differ.
    check_values(tf::convert_to_tensor(run_optimizer(c.make(), tf::float64, 3), {3}), want, 1e-12,
                 1e-13);
    check_values(tf::convert_to_tensor(run_optimizer(c.make(), tf::float32, 3), {3}), want, 2e-6,
                 1e-6);
  }
}

TEST_CASE("optimizers: defaults follow Keras", "[keras][cpu]") {
  CHECK(opt::SGD().current_learning_rate() == Approx(0.01));
  CHECK(opt::Adam().current_learning_rate() == Approx(0.001));
  CHECK(opt::RMSprop().current_learning_rate() == Approx(0.001));
  CHECK(opt::AdamW().name() == "AdamW");
  CHECK(opt::get("adam").name() == "Adam");
  CHECK(opt::get("RMSprop").name() == "RMSprop");
  TF_REQUIRE_THROWS_CONTAINING(opt::get("adagradd"), tf::InvalidArgumentError, "adagradd");
  // AdamW's default decay 0.004 against Adam: one step from x = 1 with g = 0.
  opt::Adam adam(0.1);
  opt::AdamW adamw(0.1);
  tf::Variable a(tf::constant({1.0}), "a"), b(tf::constant({1.0}), "b");
  adam.apply_gradients({tf::constant({0.0})}, {a});
  adamw.apply_gradients({tf::constant({0.0})}, {b});
  check_values(a, {1.0});
  check_values(b, {1.0 - 1.0 * f32(0.004) * f32(0.1)}, 1e-12, 0);
  // exclude_from_weight_decay matches substrings of variable names; mixed dtypes in one call.
  opt::AdamW excl(0.1, 0.5, 0.9, 0.999, 1e-7, false, {.exclude_from_weight_decay = {"bias"}});
  tf::Variable k(tf::constant({2.0}), "dense/kernel"), bias(tf::constant({2.0f}), "dense/bias");
  excl.apply_gradients({tf::constant({0.0}), tf::constant({0.0f})}, {k, bias});
  check_values(k, {2.0 - 2.0 * 0.5 * f32(0.1)}, 1e-12, 0);
  check_values(bias, {2.0});
}

TEST_CASE("optimizers: undefined gradients are skipped, mismatches name the variable",
          "[keras][cpu]") {
  opt::SGD sgd(0.5);
  tf::Variable a(tf::constant({1.0f, 2.0f}), "dense/kernel");
  tf::Variable b(tf::constant({3.0f}), "dense/bias");
  // The warning names the variables without gradients, once per list (Keras' warnings.warn).
  const std::string first = tf::testing::capture_stderr([&] {
    sgd.apply_gradients({tf::constant({1.0f, 1.0f}), tf::Tensor()}, {a, b});
  });
  CHECK(first.find("Gradients do not exist for variables ['dense/bias:0']") != std::string::npos);
  check_values(a, {0.5, 1.5});
  const std::string again = tf::testing::capture_stderr([&] {
    sgd.apply_gradients({tf::constant({0.0f, 0.0f}), tf::Tensor()}, {a, b});
  });
  CHECK(again.find("Gradients do not exist") == std::string::npos);
  check_values(b, {3.0});
  CHECK(sgd.iterations().value().item<int64_t>() == 2);
  TF_REQUIRE_THROWS_CONTAINING(sgd.apply_gradients({tf::Tensor(), tf::Tensor()}, {a, b}),
                               tf::InvalidArgumentError, "No gradients provided for any variable");
  tf::testing::require_error([&] { sgd.apply_gradients({tf::constant({1.0f})}, {a}); },
                             {"dense/kernel:0", "(1,)", "(2,)"});
  // Keras 3 casts a gradient to its variable's dtype; integer gradients are refused.
  sgd.apply_gradients({tf::constant({1.0, -1.0})}, {a});
  check_values(a, {0.0, 2.0});
  tf::testing::require_error(
      [&] {
        sgd.apply_gradients({tf::constant(std::vector<int32_t>{1, 1}, {2})}, {a});
      },
      {"dense/kernel:0", "int32", "float32", "floating-point dtype"});
  tf::testing::require_error([&] { sgd.apply_gradients({tf::constant({1.0f})}, {a, b}); },
                             {"1 gradients for 2 variables"});
  TF_REQUIRE_THROWS_CONTAINING(opt::SGD(0.1, 0, false, {.clipnorm = 1.0, .clipvalue = 1.0}),
                               tf::InvalidArgumentError, "only one of clipnorm");
  opt::Optimizer empty;
  TF_REQUIRE_THROWS_CONTAINING(empty.iterations(), tf::FailedPreconditionError, "empty");
}

TEST_CASE("optimizers: clipnorm, global_clipnorm and clipvalue", "[keras][cpu]") {
  // SGD with lr 1: the update is the clipped gradient.
  auto step = [](opt::OptimizerOptions o, std::vector<std::vector<double>> g) {
    opt::SGD sgd(1.0, 0, false, o);
    std::vector<tf::Variable> vars;
    std::vector<tf::Tensor> grads;
    for (size_t i = 0; i < g.size(); ++i) {
      vars.emplace_back(tf::zeros({static_cast<int64_t>(g[i].size())}, tf::float64), "v");
      grads.push_back(tf::convert_to_tensor(g[i], {static_cast<int64_t>(g[i].size())}));
    }
    sgd.apply_gradients(grads, vars);
    std::vector<std::vector<double>> out;
    for (auto& v : vars) out.push_back(tf::detail::to_double_vector(v.value()));
    return out;
  };
  // ||(3, 4)|| = 5 -> scaled to norm 1; (0.3, 0.4) is under the limit and unchanged.
  auto r = step({.clipnorm = 1.0}, {{3, 4}, {0.3, 0.4}});
  CHECK(r[0][0] == Approx(-0.6));
  CHECK(r[0][1] == Approx(-0.8));
  CHECK(r[1][0] == Approx(-0.3));
  // Global norm of (3, 4, 0, 12) is 13 -> everything scaled by 2/13.
  r = step({.global_clipnorm = 2.0}, {{3, 4}, {0, 12}});
  CHECK(r[0][0] == Approx(-6.0 / 13));
  CHECK(r[1][1] == Approx(-24.0 / 13));
  r = step({.clipvalue = 0.5}, {{3, -4, 0.25}});
  CHECK(r[0] == std::vector<double>{-0.5, 0.5, -0.25});
  // A zero gradient stays zero under clipnorm (no 0/0).
  r = step({.clipnorm = 1.0}, {{0, 0}});
  CHECK(r[0] == std::vector<double>{0, 0});
}

TEST_CASE("optimizers: tracked names and lazily built slots", "[keras][cpu]") {
  opt::Adam adam(0.01, 0.9, 0.999, 1e-7, /*amsgrad=*/true);
  tf::Variable k(tf::ones({2, 2}), "dense/kernel");
  tf::Variable b(tf::zeros({2}), "dense/bias");
  tf::Variable dup(tf::zeros({2}), "dense/bias");  // same name: a suffix keeps names unique
  auto names = [&] {
    std::vector<std::string> n;
    for (auto& [name, v] : adam.tracked_variables()) n.push_back(name);
    return n;
  };
  CHECK(names() == std::vector<std::string>{"iterations", "learning_rate"});
  adam.apply_gradients({tf::ones({2, 2}), tf::ones({2}), tf::ones({2})}, {k, b, dup});
  CHECK(names() == std::vector<std::string>{"iterations", "learning_rate", "dense/kernel/m",
                                            "dense/kernel/v", "dense/kernel/vhat", "dense/bias/m",
                                            "dense/bias/v", "dense/bias/vhat", "dense/bias_1/m",
                                            "dense/bias_1/v", "dense/bias_1/vhat"});
  // m after one step = (1 - beta_1) * g.
  check_values(adam.tracked_variables()[2].second, {0.1, 0.1, 0.1, 0.1});
  CHECK(adam.variables().size() == 11);
  // A copy of the handle shares the state.
  opt::Optimizer alias = adam;
  alias.apply_gradients({tf::ones({2, 2})}, {k});
  CHECK(adam.iterations().value().item<int64_t>() == 2);
  // set_learning_rate changes later updates; a schedule cannot be overwritten.
  opt::SGD sgd(0.1);
  sgd.set_learning_rate(0.25);
  tf::Variable x(tf::constant({1.0}), "x");
  sgd.apply_gradients({tf::constant({1.0})}, {x});
  check_values(x, {0.75});
  opt::SGD scheduled(sched::ExponentialDecay(0.1, 10, 0.5));
  TF_REQUIRE_THROWS_CONTAINING(scheduled.set_learning_rate(0.1), tf::FailedPreconditionError,
                               "ExponentialDecay");
}

TEST_CASE("optimizers: slots do not keep their variables alive", "[keras][cpu]") {
  // One optimizer outliving the models it trained (a new model per run) kept every model's
  // weights and slots alive: memory grew with each model.
  opt::Adam adam(0.01);
  std::weak_ptr<tf::Variable::State> gone;
  {
    tf::Variable w(tf::ones({16, 16}), "dense/kernel");
    adam.apply_gradients({tf::ones({16, 16})}, {w});
    CHECK(adam.variables().size() == 4);  // iterations, learning_rate, m, v
    gone = w.weak_state();
  }
  CHECK(gone.expired());
  CHECK(adam.variables().size() == 2);
  CHECK(adam.slots().empty());
  // A new variable of the same name takes the name back (its slots are dropped meanwhile).
  tf::Variable again(tf::ones({4}), "dense/kernel");
  adam.apply_gradients({tf::ones({4})}, {again});
  std::vector<std::string> names;
  for (auto& [name, v] : adam.tracked_variables()) names.push_back(name);
  CHECK(names == std::vector<std::string>{"iterations", "learning_rate", "dense/kernel/m",
                                          "dense/kernel/v"});
  REQUIRE(adam.slots().size() == 1);
  CHECK(adam.slots()[0].first.handle_id() == again.handle_id());
  CHECK(adam.slots()[0].second[0].shape() == tf::TensorShape({4}));
}

TEST_CASE("optimizers: a traced step gives the eager values, schedule and set_learning_rate "
          "included",
          "[keras][cpu]") {
  for (bool schedule : {false, true}) {
    INFO("schedule " << schedule);
    auto make = [&]() -> opt::Optimizer {
      if (schedule) return opt::Adam(sched::ExponentialDecay(0.05, 1, 0.5));
      return opt::Adam(0.05);
    };
    opt::Optimizer eager_opt = make(), traced_opt = make();
    tf::Variable w_e(tf::constant({1.0f, -1.0f, 2.0f}), "w"), w_t(w_e.value(), "w");
    auto grad_of = [](const tf::Variable& w) { return tf::square(w.value()) - 0.5f; };
    auto traced = tf::function([&](const tf::Tensor& scale) {
      traced_opt.apply_gradients({grad_of(w_t) * scale}, {w_t});
      return tf::reduce_sum(w_t.value());
    });
    for (int i = 0; i < 4; ++i) {
      if (i == 2 && !schedule) {
        eager_opt.set_learning_rate(0.01);
        traced_opt.set_learning_rate(0.01);
      }
      eager_opt.apply_gradients({grad_of(w_e) * tf::constant(1.0f)}, {w_e});
      traced(tf::constant(1.0f));
      tf::testing::check_close(w_t.value(), w_e.value(), 1e-6, 1e-7);
    }
    CHECK(traced.tracing_count() == 1);
    CHECK(traced_opt.iterations().value().item<int64_t>() == 4);
    auto se = eager_opt.tracked_variables(), st = traced_opt.tracked_variables();
    REQUIRE(se.size() == st.size());
    for (size_t i = 0; i < se.size(); ++i) {
      CHECK(se[i].first == st[i].first);
      tf::testing::check_close(st[i].second.value(), se[i].second.value(), 1e-6, 1e-7);
    }
  }
}

TEST_CASE("optimizers: minimize records the loss and applies its gradient", "[keras][cpu]") {
  opt::SGD sgd(0.1);
  tf::Variable x(tf::constant(3.0), "x");
  tf::Tensor loss = sgd.minimize([&] { return tf::square(x.value()); }, {x});
  CHECK(loss.item<double>() == 9.0);
  check_values(x, {3.0 - 0.1 * 6.0}, 1e-7, 0);
}

TEST_CASE("optimizers and schedules refuse hyperparameters that would diverge", "[keras][cpu]") {
  using tf::testing::require_error;
  // Each of these trained to NaN or with negative learning rates some steps later.
  require_error([] { opt::Adam(0.1, 1.0); }, {"[Adam]", "beta_1 must be in [0, 1), got 1"});
  require_error([] { opt::Adam(0.1, 0.9, -0.5); }, {"[Adam]", "beta_2"});
  require_error([] { opt::AdamW(0.1, 0.004, 0.9, 1.5); }, {"[AdamW]", "beta_2"});
  require_error([] { opt::RMSprop(0.1, 2.0); }, {"[RMSprop]", "rho must be in [0, 1), got 2"});
  require_error([] { opt::RMSprop(0.1, 0.9, -1.0); }, {"[RMSprop]", "momentum"});
  require_error([] { opt::RMSprop(0.1, 0.9, 0.0, -1e-7); }, {"[RMSprop]", "epsilon"});
  require_error([] { sched::InverseTimeDecay(0.1, 1, -2.0); },
                {"[InverseTimeDecay]", "decay_rate must be finite and >= 0, got -2"});
  require_error([] { sched::ExponentialDecay(-0.1, 10, 0.9); },
                {"[ExponentialDecay]", "initial_learning_rate"});
  require_error([] { sched::ExponentialDecay(0.1, 10, std::nan("")); }, {"decay_rate"});
  require_error([] { sched::PiecewiseConstantDecay({10}, {0.1, -0.01}); },
                {"[PiecewiseConstantDecay]", "each value"});
  require_error([] { sched::CosineDecay(0.1, 100, -0.5); }, {"[CosineDecay]", "alpha"});
  require_error([] { sched::CosineDecay(0.1, 100, 0.0, -1.0, 10); }, {"warmup_target"});
  // Growth is allowed (an exponential rate above 1), as in Keras.
  CHECK(sched::ExponentialDecay(0.1, 10, 1.5)(10) > 0.1);
  opt::SGD sgd(0.1);
  tf::Variable x(tf::constant(3.0), "x");
  require_error([&] { sgd.minimize(nullptr, {x}); }, {"[SGD]", "the loss function is empty"});
}

TEST_CASE("schedules: host and op forms agree with the formulas", "[keras][cpu]") {
  sched::ExponentialDecay exp_decay(0.1, 10, 0.5);
  sched::ExponentialDecay stair(0.1, 10, 0.5, true);
  sched::PiecewiseConstantDecay piece({10, 20}, {1.0, 0.5, 0.1});
  sched::InverseTimeDecay inv(0.1, 5, 2.0);
  sched::InverseTimeDecay inv_stair(0.1, 5, 2.0, true);
  sched::CosineDecay cosine(0.1, 100, 0.1);
  sched::CosineDecay warm(0.0, 100, 0.0, 0.2, 10);
  const double pi = 3.14159265358979323846;
  struct Row {
    sched::LearningRateSchedule s;
    std::function<double(double)> f;
  };
  std::vector<Row> rows = {
      {exp_decay, [](double t) { return 0.1 * std::pow(0.5, t / 10); }},
      {stair, [](double t) { return 0.1 * std::pow(0.5, std::floor(t / 10)); }},
      {piece, [](double t) { return t <= 10 ? 1.0 : t <= 20 ? 0.5 : 0.1; }},
      {inv, [](double t) { return 0.1 / (1 + 2.0 * t / 5); }},
      {inv_stair, [](double t) { return 0.1 / (1 + 2.0 * std::floor(t / 5)); }},
      {cosine,
       [&](double t) {
         t = std::min(t, 100.0);
         return 0.1 * (0.9 * 0.5 * (1 + std::cos(pi * t / 100)) + 0.1);
       }},
      {warm, [&](double t) {
         t = std::min(t, 110.0);
         if (t < 10) return 0.2 * t / 10;
         return 0.2 * 0.5 * (1 + std::cos(pi * (t - 10) / 100));
       }}};
  for (const auto& row : rows) {
    for (int64_t step : {0, 1, 5, 9, 10, 11, 15, 20, 21, 50, 100, 150}) {
      INFO(row.s.name() << " at step " << step);
      const double want = row.f(static_cast<double>(step));
      CHECK(row.s(step) == Approx(want).epsilon(1e-12).margin(1e-15));
      tf::Tensor t = row.s(tf::constant(tf::Tensor(step), tf::int64));
      CHECK(t.dtype() == tf::float32);
      CHECK(t.item<double>() == Approx(want).epsilon(2e-6).margin(1e-7));
    }
  }
  TF_REQUIRE_THROWS_CONTAINING(sched::PiecewiseConstantDecay({10}, {1.0}),
                               tf::InvalidArgumentError, "one more entry");
  TF_REQUIRE_THROWS_CONTAINING(sched::ExponentialDecay(0.1, 0, 0.5), tf::InvalidArgumentError,
                               "decay_steps");
  sched::LearningRateSchedule custom([](const tf::Tensor& s) { return tf::cast(s, tf::float32) * 0.5f; });
  CHECK(custom(4) == 2.0);
}

// ---- the replica path, with two logical CPUs and a hand-made all-reduce ----

namespace {

// Splits CPU:0 into two logical devices; false (with a warning) when ops already ran in this
// process (the whole binary run at once rather than one CTest test per process).
bool split_cpu() {
  try {
    tf::config::set_logical_device_configuration(tf::config::list_physical_devices("CPU")[0],
                                                 {{}, {}});
  } catch (const tf::FailedPreconditionError&) {
  }
  if (tf::config::list_logical_devices("CPU").size() >= 2) return true;
  WARN("ops already ran in this process; run this case alone to split the CPU");
  return false;
}

struct SharedReduce {
  explicit SharedReduce(int n) : sync(n), inputs(static_cast<size_t>(n)) {}
  std::barrier<> sync;
  std::vector<std::vector<tf::Tensor>> inputs;
};

class FakeContext final : public tf::distribute::ReplicaContext {
 public:
  FakeContext(int id, int n, SharedReduce* shared) : id_(id), n_(n), shared_(shared) {}
  int replica_id_in_sync_group() const override { return id_; }
  int num_replicas_in_sync() const override { return n_; }
  tf::Tensor all_reduce(tf::distribute::ReduceOp op, const tf::Tensor& value) override {
    return all_reduce(op, std::vector<tf::Tensor>{value})[0];
  }
  std::vector<tf::Tensor> all_reduce(tf::distribute::ReduceOp op,
                                     const std::vector<tf::Tensor>& values) override {
    shared_->inputs[static_cast<size_t>(id_)] = values;
    shared_->sync.arrive_and_wait();
    std::vector<tf::Tensor> out;
    for (size_t k = 0; k < values.size(); ++k) {
      tf::Tensor s = shared_->inputs[0][k];
      for (int r = 1; r < n_; ++r) s = s + shared_->inputs[static_cast<size_t>(r)][k];
      if (op == tf::distribute::ReduceOp::MEAN) s = s / static_cast<double>(n_);
      out.push_back(s);
    }
    shared_->sync.arrive_and_wait();  // nobody overwrites inputs before all have read them
    return out;
  }

 private:
  int id_, n_;
  SharedReduce* shared_;
};

}  // namespace

TEST_CASE("optimizers: mirrored variables get mirrored slots and the replica path sums "
          "gradients",
          "[keras][cpu][multi_device]") {
  // Two logical CPUs, before any op of this process (each CTest test runs alone).
  if (!split_cpu()) return;
  const std::vector<tf::Device> devs = {tf::Device::parse("/cpu:0"), tf::Device::parse("/cpu:1")};
  for (const char* which : {"sgd", "adam"}) {
    INFO(which);
    opt::Optimizer o;
    tf::Variable w;
    {
      tf::detail::MirrorVariablesScope mirror(devs);
      if (std::string(which) == "sgd")
        o = opt::SGD(0.1, 0.9);
      else
        o = opt::Adam(0.01);
      w = tf::Variable(tf::constant(tf::convert_to_tensor(kInit, {3}), tf::float64), "w");
    }
    REQUIRE(w.is_mirrored());
    CHECK(o.iterations().is_mirrored());
    SharedReduce shared(2);
    // Replica r's gradient is g * (r + 1): the all-reduced sum is 3 g.
    auto replica = [&](int r) {
      FakeContext ctx(r, 2, &shared);
      tf::distribute::detail::ReplicaContextScope rc(&ctx);
      tf::detail::ReplicaComponentScope comp(r);
      tf::DeviceScope place(devs[static_cast<size_t>(r)]);
      for (int s = 0; s < 3; ++s) {
        tf::Tensor g = tf::convert_to_tensor(kGrads[static_cast<size_t>(s)], {3}) *
                       static_cast<double>(r + 1);
        o.apply_gradients({g}, {w});
      }
    };
    std::thread t0(replica, 0), t1(replica, 1);
    t0.join();
    t1.join();
    const bool is_sgd = std::string(which) == "sgd";
    std::vector<double> want;
    {
      // The reference on the summed gradient 3 g.
      std::vector<double> x = kInit, m(3, 0), v(3, 0);
      for (int s = 0; s < 3; ++s)
        for (int i = 0; i < 3; ++i) {
          const double g = 3 * kGrads[static_cast<size_t>(s)][static_cast<size_t>(i)];
          const double a = f32(is_sgd ? 0.1 : 0.01);
          if (is_sgd) {
            m[static_cast<size_t>(i)] = m[static_cast<size_t>(i)] * f32(0.9) - g * a;
            x[static_cast<size_t>(i)] += m[static_cast<size_t>(i)];
          } else {
            const double t = s + 1;
            const double alpha =
                a * std::sqrt(1 - std::pow(f32(0.999), t)) / (1 - std::pow(f32(0.9), t));
            m[static_cast<size_t>(i)] += (g - m[static_cast<size_t>(i)]) * 0.1;
            v[static_cast<size_t>(i)] += (g * g - v[static_cast<size_t>(i)]) * (1 - 0.999);
            x[static_cast<size_t>(i)] -=
                m[static_cast<size_t>(i)] * alpha / (std::sqrt(v[static_cast<size_t>(i)]) + 1e-7);
          }
        }
      want = x;
    }
    auto comps = w.components();
    REQUIRE(comps.size() == 2);
    for (size_t r = 0; r < 2; ++r) {
      CHECK(comps[r].placement() == devs[r]);
      check_values(comps[r].value(), want, 1e-12, 1e-13);
    }
    for (const auto& c : o.iterations().components()) CHECK(c.value().item<int64_t>() == 3);
    // Every slot is mirrored over the variable's devices, each copy on its device.
    int slots = 0;
    for (auto& [name, v] : o.tracked_variables()) {
      if (name == "iterations" || name == "learning_rate") continue;
      ++slots;
      INFO(name);
      REQUIRE(v.is_mirrored());
      auto sc = v.components();
      REQUIRE(sc.size() == 2);
      CHECK(sc[0].placement() == devs[0]);
      CHECK(sc[1].placement() == devs[1]);
      tf::testing::check_close(sc[1].value(), sc[0].value(), 0, 0);
    }
    CHECK(slots == (is_sgd ? 1 : 2));
  }
  // A plain variable updated from a replica would take one update per replica: refused.
  {
    tf::Variable plain(tf::constant({1.0}), "plain");
    opt::SGD sgd(0.1);
    SharedReduce shared(2);
    FakeContext ctx(0, 2, &shared);
    tf::distribute::detail::ReplicaContextScope rc(&ctx);
    TF_REQUIRE_THROWS_CONTAINING(sgd.apply_gradients({tf::constant({1.0})}, {plain}),
                                 tf::FailedPreconditionError, "strategy.scope()");
  }
  // Cross-replica use of a mirrored variable (no replica context): every copy is updated.
  tf::Variable m;
  {
    tf::detail::MirrorVariablesScope mirror(devs);
    m = tf::Variable(tf::constant({1.0}), "m");
  }
  opt::SGD sgd(0.5, 0.5);
  sgd.apply_gradients({tf::constant({1.0})}, {m});
  for (const auto& c : m.components()) check_values(c.value(), {0.5});
}

TEST_CASE("optimizers: apply is Keras 3's name for apply_gradients", "[keras]") {
  tf::Variable a(tf::constant({1.0f, 2.0f}), "a");
  tf::Variable b(tf::constant({1.0f, 2.0f}), "b");
  opt::Adam first(0.1), second(0.1);
  for (int step = 0; step < 3; ++step) {
    const tf::Tensor g = tf::constant({0.5f, -1.0f}) * static_cast<float>(step + 1);
    first.apply_gradients({g}, {a});
    second.apply({g}, {b});
  }
  CHECK(b.value().numpy<float>() == a.value().numpy<float>());
  CHECK(a.value().numpy<float>() != std::vector<float>{1.0f, 2.0f});
  CHECK(second.iterations().value().item<int64_t>() == 3);
  tf::testing::require_error([&] { second.apply({}, {b}); }, {"0 gradients for 1 variables"});
}
