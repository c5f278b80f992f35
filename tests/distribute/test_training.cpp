// Data-parallel training end to end: THE INVARIANT (N SGD steps of an MLP with global batch B
// on 2 and 4 replicas give the variables of N steps with batch B on one device), eagerly and
// with the replica step as a tf::function (each replica traces and replays its own graph).
#include "autograd/tape.h"
#include "autograd/variable.h"
#include "core/error.h"
#include "distribute/strategy.h"
#include "distribute_testing.h"
#include "sgd_mlp.h"
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
using namespace sgd_mlp;

namespace {

void check_invariant(int replicas, bool traced) {
  const int epochs = 3;
  // Made once: a seeded op draws new numbers at each call (TF's per-seed counters).
  const auto init = initial_values();
  const auto data = dataset(40);
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
