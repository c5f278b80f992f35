// Data-parallel training end to end: THE INVARIANT (N SGD steps of an MLP with global batch B
// on 2 and 4 replicas give the variables of N steps with batch B on one device), eagerly and
// with the replica step as a tf::function (each replica traces and replays its own graph).
#include "autograd/tape.h"
#include "autograd/variable.h"
#include "core/error.h"
#include "distribute/strategy.h"
#include "distribute_testing.h"
#include "jit/function.h"
#include "ops/activation.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/linalg.h"
#include "ops/movement.h"
#include "ops/nn.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/unary.h"

namespace tf = tapeflow;
namespace ds = tapeflow::distribute;
using distribute_testing::bit_identical;
using distribute_testing::cpus;
using distribute_testing::split_cpu;

namespace {

constexpr float kLr = 0.05f;
constexpr int kIn = 6, kHidden = 16;

struct Mlp {
  std::vector<tf::Variable> vars;  // w1, b1, w2, b2
  tf::Tensor per_example_loss(const tf::Tensor& x, const tf::Tensor& y) const {
    tf::Tensor h = tf::nn::relu(tf::matmul(x, vars[0]) + vars[1]);
    tf::Tensor pred = tf::matmul(h, vars[2]) + vars[3];
    return tf::reduce_sum(tf::square(pred - y), 1);
  }
};

std::vector<tf::Tensor> initial_values() {
  return {tf::random::normal({kIn, kHidden}, 0.0, 0.5, tf::float32, 1), tf::zeros({kHidden}),
          tf::random::normal({kHidden, 1}, 0.0, 0.5, tf::float32, 2), tf::zeros({1})};
}

Mlp make_mlp(const std::vector<tf::Tensor>& init) {
  Mlp m;
  const char* names[] = {"w1", "b1", "w2", "b2"};
  for (size_t i = 0; i < init.size(); ++i) m.vars.emplace_back(init[i], names[i]);
  return m;
}

// 40 examples of a smooth target, batched by 16: batches of 16, 16 and a short one of 8.
std::vector<std::vector<tf::Tensor>> dataset() {
  const int items = 40, batch = 16;
  tf::Tensor x = tf::random::uniform({items, kIn}, -1.0, 1.0, tf::float32, 3);
  tf::Tensor y = tf::reduce_sum(tf::sin(x * 2.0f), 1, /*keepdims=*/true);
  std::vector<std::vector<tf::Tensor>> out;
  for (int b = 0; b < items; b += batch) {
    const int n = std::min(batch, items - b);
    out.push_back({tf::slice(x, {b, 0}, {n, kIn}), tf::slice(y, {b, 0}, {n, 1})});
  }
  return out;
}

// The single-device reference: plain SGD on the whole global batch.
std::vector<tf::Tensor> train_single(const std::vector<tf::Tensor>& init,
                                     const std::vector<std::vector<tf::Tensor>>& data, int epochs) {
  Mlp m = make_mlp(init);
  for (int e = 0; e < epochs; ++e)
    for (const auto& b : data) {
      tf::GradientTape tape;
      tf::Tensor loss = tf::nn::compute_average_loss(m.per_example_loss(b[0], b[1]),
                                                     b[0].shape()[0]);
      auto grads = tape.gradient(loss, m.vars);
      for (size_t i = 0; i < grads.size(); ++i) m.vars[i].assign_sub(grads[i] * kLr);
    }
  std::vector<tf::Tensor> out;
  for (auto& v : m.vars) out.push_back(v.value());
  return out;
}

// The replica step: local gradients of the globally scaled loss, summed over the replicas.
tf::Tensor replica_step(Mlp& m, const tf::Tensor& x, const tf::Tensor& y, int64_t global) {
  tf::GradientTape tape;
  tf::Tensor loss = tf::nn::compute_average_loss(m.per_example_loss(x, y), global);
  auto grads = tape.gradient(loss, m.vars);
  grads = ds::get_replica_context()->all_reduce(ds::ReduceOp::SUM, grads);
  for (size_t i = 0; i < grads.size(); ++i) m.vars[i].assign_sub(grads[i] * kLr);
  return loss;
}

void check_invariant(int replicas, bool traced) {
  const int epochs = 3;
  // Made once: a seeded op draws new numbers at each call (TF's per-seed counters).
  const auto init = initial_values();
  const auto data = dataset();
  const auto want = train_single(init, data, epochs);
  ds::MirroredStrategy strategy(cpus(replicas));
  Mlp m = [&] {
    auto scope = strategy.scope();
    return make_mlp(init);
  }();
  auto step_fn = tf::function(
      [&](tf::Tensor x, tf::Tensor y, int64_t global) { return replica_step(m, x, y, global); },
      tf::FunctionOptions{.name = "replica_step"});
  double first_loss = 0, last_loss = 0;
  for (int e = 0; e < epochs; ++e) {
    for (const auto& element : strategy.experimental_distribute_dataset(data)) {
      int64_t global = 0;
      for (const auto& c : element.values()) global += c[0].shape()[0];
      auto losses = strategy.run([&](const std::vector<tf::Tensor>& b) {
        return traced ? step_fn(b[0], b[1], global) : replica_step(m, b[0], b[1], global);
      }, element);
      const double loss = strategy.reduce(ds::ReduceOp::SUM, losses).item<double>();
      if (e == 0 && first_loss == 0) first_loss = loss;
      last_loss = loss;
    }
    if (traced && e == 0) {
      // Two batch shapes (16 and the short 8) per replica device, traced once each.
      CHECK(step_fn.tracing_count() == 2 * replicas);
    }
  }
  if (traced) CHECK(step_fn.tracing_count() == 2 * replicas);  // later epochs only replay
  CHECK(last_loss < first_loss);
  for (size_t i = 0; i < m.vars.size(); ++i) {
    auto copies = strategy.experimental_local_results(m.vars[i]);
    REQUIRE(copies.size() == static_cast<size_t>(replicas));
    // Identical updates keep the copies bit-identical...
    for (auto& c : copies) CHECK(bit_identical(c.value(), copies[0].value()));
    // ...and equal, to float rounding, to the single-device run.
    tf::testing::check_close(copies[0].value(), want[i], 1e-4, 1e-5);
  }
}

}  // namespace

TEST_CASE("invariant: SGD on 2 replicas matches one device at the same global batch",
          "[cpu][distribute]") {
  split_cpu();
  check_invariant(2, false);
}

TEST_CASE("invariant: SGD on 4 replicas matches one device at the same global batch",
          "[cpu][distribute]") {
  split_cpu();
  check_invariant(4, false);
}

TEST_CASE("invariant: a traced replica step on 2 replicas matches one device",
          "[cpu][distribute]") {
  split_cpu();
  check_invariant(2, true);
}

TEST_CASE("invariant: a traced replica step on 4 replicas matches one device",
          "[cpu][distribute]") {
  split_cpu();
  check_invariant(4, true);
}

TEST_CASE("tf::function: each replica traces its own graph on its device", "[cpu][distribute]") {
  split_cpu();
  ds::MirroredStrategy strategy(cpus(3));
  tf::Variable v = [&] {
    auto scope = strategy.scope();
    return tf::Variable(tf::zeros({2}), "v");
  }();
  auto f = tf::function([&](tf::Tensor x) {
    v.assign_add(x);  // each replica's graph writes its own copy
    auto* ctx = ds::get_replica_context();
    if (ctx == nullptr) throw tf::FailedPreconditionError("traced outside strategy.run");
    return ctx->all_reduce(ds::ReduceOp::SUM, x * 2.0f);
  });
  ds::PerReplica<tf::Tensor> xs(
      {tf::constant({1.0f, 0.0f}), tf::constant({2.0f, 0.0f}), tf::constant({3.0f, 1.0f})});
  for (int call = 1; call <= 3; ++call) {
    auto out = strategy.run(f, xs);
    for (int r = 0; r < 3; ++r) {
      tf::testing::check_values(out[r], {12, 2}, 0, 0);
      CHECK(out[r].device() == "/device:CPU:" + std::to_string(r));
    }
    CHECK(f.tracing_count() == 3);  // one graph per replica device, replayed afterwards
    auto copies = v.components();
    tf::testing::check_values(copies[0].value(), {1.0 * call, 0}, 0, 0);
    tf::testing::check_values(copies[2].value(), {3.0 * call, 1.0 * call}, 0, 0);
  }
  // The graph's all_reduce is a collective: replaying replica 0's graph outside run is an error
  // ("[all_reduce] ran outside strategy.run ...").
  tf::DeviceScope scope("/cpu:0");
  TF_REQUIRE_THROWS_CONTAINING(f(tf::constant({1.0f, 0.0f})), tf::FailedPreconditionError,
                               "outside strategy.run");
}

TEST_CASE("tf::function: strategy.run inside a traced function is an UnimplementedError",
          "[cpu][distribute]") {
  split_cpu();
  ds::MirroredStrategy strategy(cpus(2));
  auto outer = tf::function([&](tf::Tensor x) {
    auto per_replica = strategy.run([](const tf::Tensor& t) { return t * 2.0f; }, x);
    return strategy.reduce(ds::ReduceOp::SUM, per_replica);
  });
  TF_REQUIRE_THROWS_CONTAINING(outer(tf::constant(1.0f)), tf::UnimplementedError,
                               "Make the replica step itself the tf::function");
}
