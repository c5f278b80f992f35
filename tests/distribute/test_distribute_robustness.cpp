// Bad input and misuse of tf::distribute give clear errors (never a crash, a hang or a wrong
// value): the default strategy's replica context, out-of-range and mismatched reduce ops,
// mismatched all-reduce calls, integer overflow in all-reduces, PerReplica and dataset iterator
// bounds, compute_average_loss on empty shares and with (B, 1) weights, and a step cancelled
// on some replicas while the failing replica caught the failure.
#include <cstdint>
#include <limits>
#include <mutex>
#include <string>
#include <vector>

#include "autograd/tape.h"
#include "core/error.h"
#include "distribute/collective.h"
#include "distribute/strategy.h"
#include "distribute_testing.h"
#include "ops/binary.h"
#include "ops/factory.h"

namespace tf = tapeflow;
namespace ds = tapeflow::distribute;
using distribute_testing::cpus;
using distribute_testing::split_cpu;
using tf::testing::check_values;
using tf::testing::require_error;

namespace {
constexpr auto kBadOp = static_cast<ds::ReduceOp>(7);

// The message of what `f` throws (a tf::Error), or "" when it returns.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const tf::Error& e) {
    return e.what();
  }
  return {};
}

// Each replica's error message, recorded on the replica's thread (checked after run returns).
struct ReplicaErrors {
  std::mutex mu;
  std::vector<std::string> messages;
  explicit ReplicaErrors(size_t replicas) : messages(replicas) {}
  template <class F>
  auto record(int replica, F&& f) {
    try {
      return f();
    } catch (const tf::Error& e) {
      std::lock_guard lock(mu);
      messages[static_cast<size_t>(replica)] = e.what();
      throw;
    }
  }
};
}  // namespace

TEST_CASE("robustness: the default strategy's run has a one-replica replica context",
          "[cpu][distribute]") {
  split_cpu();
  REQUIRE_FALSE(ds::has_strategy());
  ds::Strategy& def = ds::get_strategy();
  // What fn saw, checked after run.
  bool had_context = false, in_replica = false;
  int id = -1, in_sync = -1;
  tf::Tensor sum, mean;
  std::vector<tf::Tensor> several;
  auto out = def.run([&](const tf::Tensor& x) {
    ds::ReplicaContext* ctx = ds::get_replica_context();
    had_context = ctx != nullptr;
    in_replica = !ds::in_cross_replica_context();
    if (ctx == nullptr) return x;
    id = ctx->replica_id_in_sync_group();
    in_sync = ctx->num_replicas_in_sync();
    // One replica: SUM and MEAN are the value itself (TF's default replica context).
    sum = ctx->all_reduce(ds::ReduceOp::SUM, x);
    mean = ctx->all_reduce(ds::ReduceOp::MEAN, x);
    several = ctx->all_reduce(ds::ReduceOp::SUM, std::vector<tf::Tensor>{x, x * 2.0f});
    return ctx->all_reduce(ds::ReduceOp::MEAN, x * 3.0f);
  }, tf::constant({1.0f, 2.0f}));
  REQUIRE(had_context);
  CHECK(in_replica);
  CHECK(id == 0);
  CHECK(in_sync == 1);
  check_values(sum, {1, 2}, 0, 0);
  check_values(mean, {1, 2}, 0, 0);
  REQUIRE(several.size() == 2);
  check_values(several[0], {1, 2}, 0, 0);
  check_values(several[1], {2, 4}, 0, 0);
  check_values(out[0], {3, 6}, 0, 0);
  // Back in the cross-replica context afterwards, also after fn threw.
  CHECK(ds::get_replica_context() == nullptr);
  CHECK(ds::in_cross_replica_context());
  TF_REQUIRE_THROWS_CONTAINING(def.run([] { throw tf::InvalidArgumentError("fn failed"); }),
                               tf::InvalidArgumentError, "fn failed");
  CHECK(ds::get_replica_context() == nullptr);
  CHECK(ds::in_cross_replica_context());
  // The all-reduce is differentiable (identity); bad values are errors.
  tf::Tensor x = tf::constant({1.0f, 2.0f});
  tf::Tensor grad;
  def.run([&] {
    tf::GradientTape tape;
    tape.watch(x);
    tf::Tensor y = ds::get_replica_context()->all_reduce(ds::ReduceOp::SUM, x * x);
    grad = tape.gradient(y, x);
  });
  check_values(grad, {2, 4}, 0, 0);
  require_error(
      [&] {
        def.run([] {
          ds::get_replica_context()->all_reduce(ds::ReduceOp::SUM, tf::constant({true}));
        });
      },
      {"[all_reduce]", "cannot all-reduce a bool tensor"});
  require_error(
      [&] {
        def.run([] { ds::get_replica_context()->all_reduce(ds::ReduceOp::SUM, tf::Tensor()); });
      },
      {"[all_reduce]", "undefined tensor"});
  // reduce belongs to the cross-replica context, as with every strategy.
  TF_REQUIRE_THROWS_CONTAINING(def.run([&] { def.reduce(ds::ReduceOp::SUM, out); }),
                               tf::FailedPreconditionError, "called in a replica context");
}

TEST_CASE("robustness: a ReduceOp outside SUM and MEAN is an error everywhere",
          "[cpu][distribute]") {
  split_cpu();
  ds::MirroredStrategy strategy(cpus(2));
  auto v = strategy.run([] { return tf::constant({1.0f, 2.0f}); });
  require_error([&] { strategy.reduce(kBadOp, v); },
                {"[strategy.reduce]", "ReduceOp::SUM or ReduceOp::MEAN, got ReduceOp(7)"});
  require_error([&] { strategy.reduce(kBadOp, v, 0); }, {"ReduceOp(7)"});
  require_error(
      [&] {
        strategy.run([] {
          return ds::get_replica_context()->all_reduce(kBadOp, tf::constant({1.0f}));
        });
      },
      {"[all_reduce]", "ReduceOp::SUM or ReduceOp::MEAN, got ReduceOp(7)"});
  require_error(
      [&] {
        strategy.run([] {
          return ds::get_replica_context()->all_reduce(
              kBadOp, std::vector<tf::Tensor>{tf::constant({1.0f}), tf::constant({2})});
        });
      },
      {"[all_reduce]", "got ReduceOp(7)"});
  // Also an empty list and a one-replica strategy (no communication at all).
  require_error(
      [&] {
        strategy.run([] {
          ds::get_replica_context()->all_reduce(kBadOp, std::vector<tf::Tensor>{});
        });
      },
      {"got ReduceOp(7)"});
  ds::MirroredStrategy one({"/cpu:0"});
  require_error(
      [&] {
        one.run([] { return ds::get_replica_context()->all_reduce(kBadOp, tf::constant(1.0f)); });
      },
      {"got ReduceOp(7)"});
  ds::Strategy& def = ds::get_strategy();
  require_error(
      [&] {
        def.run([] { return ds::get_replica_context()->all_reduce(kBadOp, tf::constant(1.0f)); });
      },
      {"got ReduceOp(7)"});
  CHECK(ds::detail::reduce_op_name(kBadOp) == "ReduceOp(7)");
  // The strategy is still usable.
  check_values(strategy.reduce(ds::ReduceOp::MEAN, v), {1, 2}, 0, 0);
  // An out-of-range CommunicationImplementation is rejected before any worker is contacted.
  ds::experimental::CommunicationOptions options;
  options.implementation = static_cast<ds::experimental::CommunicationImplementation>(5);
  require_error([&] { ds::MultiWorkerMirroredStrategy s({"/cpu:0"}, options); },
                {"[MultiWorkerMirroredStrategy]", "AUTO, RING or NCCL",
                 "CommunicationImplementation(5)"});
}

TEST_CASE("robustness: replicas all-reducing with different ops is an error",
          "[cpu][distribute]") {
  split_cpu();
  ds::MirroredStrategy strategy(cpus(3));
  ReplicaErrors errors(3);
  auto step = [&] {
    auto* ctx = ds::get_replica_context();
    const int r = ctx->replica_id_in_sync_group();
    const ds::ReduceOp op = r == 2 ? ds::ReduceOp::MEAN : ds::ReduceOp::SUM;
    return errors.record(r, [&] { return ctx->all_reduce(op, tf::constant({1.0f, 2.0f})); });
  };
  require_error([&] { strategy.run(step); },
                {"[all_reduce]", "replica 0 all-reduces with ReduceOp::SUM and replica 2 with "
                                 "ReduceOp::MEAN"});
  // Every replica raised the same error (none got a silently mixed result).
  for (const std::string& m : errors.messages) CHECK(m == errors.messages[0]);
  // The list overload too, and the strategy stays usable.
  require_error(
      [&] {
        strategy.run([] {
          auto* ctx = ds::get_replica_context();
          const ds::ReduceOp op =
              ctx->replica_id_in_sync_group() == 0 ? ds::ReduceOp::MEAN : ds::ReduceOp::SUM;
          return ctx->all_reduce(op, std::vector<tf::Tensor>{tf::constant({1.0f})});
        });
      },
      {"replica 0 all-reduces with ReduceOp::MEAN and replica 1 with ReduceOp::SUM"});
  auto ok = strategy.run([] {
    return ds::get_replica_context()->all_reduce(ds::ReduceOp::MEAN, tf::constant({3.0f}));
  });
  for (int r = 0; r < 3; ++r) check_values(ok[r], {3}, 0, 0);
}

TEST_CASE("robustness: different tensor counts name each replica's own count",
          "[cpu][distribute]") {
  split_cpu();
  ds::MirroredStrategy strategy(cpus(3));
  ReplicaErrors errors(3);
  auto step = [&] {
    auto* ctx = ds::get_replica_context();
    const int r = ctx->replica_id_in_sync_group();
    std::vector<tf::Tensor> values(r == 1 ? 2 : 1, tf::constant({1.0f}));
    return errors.record(r, [&] { return ctx->all_reduce(ds::ReduceOp::SUM, values); });
  };
  require_error([&] { strategy.run(step); },
                {"replica 0 all-reduces 1 tensors and replica 1 all-reduces 2"});
  // The same (correct) message on every replica, replica 1's own included.
  for (const std::string& m : errors.messages) {
    INFO(m);
    CHECK(m.find("replica 0 all-reduces 1 tensors and replica 1 all-reduces 2") !=
          std::string::npos);
  }
}

TEST_CASE("robustness: integer all-reduces wrap around instead of overflowing",
          "[cpu][distribute]") {
  split_cpu();
  ds::MirroredStrategy strategy(cpus(2));
  constexpr int32_t kMax32 = std::numeric_limits<int32_t>::max();
  constexpr int64_t kMax64 = std::numeric_limits<int64_t>::max();
  auto out = strategy.run([] {
    auto* ctx = ds::get_replica_context();
    return ctx->all_reduce(ds::ReduceOp::SUM,
                           std::vector<tf::Tensor>{tf::constant({kMax32, 1}),
                                                   tf::constant(std::vector<int64_t>{kMax64})});
  });
  for (int r = 0; r < 2; ++r) {
    REQUIRE(out[r].size() == 2);
    // Two's complement: MAX + MAX == -2.
    CHECK(out[r][0].numpy<int32_t>() == std::vector<int32_t>{-2, 2});
    CHECK(out[r][1].numpy<int64_t>() == std::vector<int64_t>{-2});
  }
}

TEST_CASE("robustness: PerReplica indices and exhausted dataset iterators are errors",
          "[cpu][distribute]") {
  split_cpu();
  ds::Strategy& def = ds::get_strategy();
  auto one = def.run([] { return tf::constant(1.0f); });
  REQUIRE(one.size() == 1);
  check_values(one[0], {1});
  require_error([&] { (void)one[1].shape(); },
                {"[PerReplica]", "replica index 1 is out of range", "1 components"});
  ds::PerReplica<tf::Tensor> empty;
  require_error([&] { (void)empty[0].shape(); }, {"replica index 0", "0 components"});

  ds::MirroredStrategy strategy(cpus(2));
  std::vector<std::vector<tf::Tensor>> data = {{tf::constant({1.0f, 2.0f})}};
  auto dist = strategy.experimental_distribute_dataset(data);
  auto it = dist.begin();
  REQUIRE_FALSE(it == dist.end());
  check_values((*it)[1][0], {2});
  ++it;
  REQUIRE(it == dist.end());
  TF_REQUIRE_THROWS_CONTAINING(*it, tf::FailedPreconditionError,
                               "iterator dereferenced at the end of the dataset");
  TF_REQUIRE_THROWS_CONTAINING(it->size(), tf::FailedPreconditionError,
                               "at the end of the dataset");
  TF_REQUIRE_THROWS_CONTAINING(++it, tf::FailedPreconditionError,
                               "iterator incremented at the end of the dataset");
  decltype(dist)::iterator none;
  CHECK(none == dist.end());
  TF_REQUIRE_THROWS_CONTAINING(*none, tf::FailedPreconditionError, "default-constructed");
  TF_REQUIRE_THROWS_CONTAINING(++none, tf::FailedPreconditionError, "default-constructed");
}

TEST_CASE("robustness: compute_average_loss on a replica with an empty share is 0",
          "[cpu][distribute]") {
  split_cpu();
  ds::MirroredStrategy strategy(cpus(4));
  // A global batch of 2 over 4 replicas: replicas 2 and 3 get empty components.
  std::vector<std::vector<tf::Tensor>> data = {{tf::constant({3.0f, 5.0f})}};
  int steps = 0;
  for (const auto& batch : strategy.experimental_distribute_dataset(data)) {
    ++steps;
    std::vector<std::string> errors(4);
    auto losses = strategy.run([&](const std::vector<tf::Tensor>& b) {
      const int r = ds::get_replica_context()->replica_id_in_sync_group();
      try {
        return tf::nn::compute_average_loss(b[0]);
      } catch (const tf::Error& e) {
        errors[static_cast<size_t>(r)] = e.what();
        return tf::constant(-1.0f);
      }
    }, batch);
    for (const std::string& e : errors) CHECK(e.empty());
    // TF: the per-replica batch times the replicas; div_no_nan for an empty share.
    check_values(losses[0], {3.0 / 4}, 0, 0);
    check_values(losses[1], {5.0 / 4}, 0, 0);
    check_values(losses[2], {0}, 0, 0);
    check_values(losses[3], {0}, 0, 0);
    CHECK(losses[3].dtype() == tf::float32);
    CHECK(losses[3].shape() == tf::TensorShape{});
  }
  CHECK(steps == 1);
  // The empty share's loss stays differentiable (zero gradients, as TF's div_no_nan).
  tf::Tensor x = tf::zeros({0, 3});
  tf::Tensor grad;
  ds::get_strategy().run([&] {
    tf::GradientTape tape;
    tape.watch(x);
    grad = tape.gradient(tf::nn::compute_average_loss(x * 2.0f), x);
  });
  REQUIRE(grad.defined());
  CHECK(grad.shape() == tf::TensorShape{0, 3});
  // An explicit global batch size must not be negative, and the message says it was the argument.
  require_error(
      [] { tf::nn::compute_average_loss(tf::constant({1.0f}), -3); },
      {"global_batch_size must not be negative, got -3 (the global_batch_size argument)"});
}

TEST_CASE("robustness: compute_average_loss squeezes (B, 1) weights and never grows the loss",
          "[cpu][distribute]") {
  split_cpu();
  tf::Tensor losses = tf::constant({1.0f, 2.0f, 3.0f});
  // (3, 1) weights for (3,) losses: (1*1 + 2*0 + 3*2) / 3, not a (3, 3) product.
  check_values(tf::nn::compute_average_loss(losses, 3, tf::constant({{1.0f}, {0.0f}, {2.0f}})),
               {7.0 / 3});
  check_values(tf::nn::compute_average_loss(losses, 3, tf::constant({1.0f, 0.0f, 2.0f})),
               {7.0 / 3});
  check_values(tf::nn::compute_average_loss(losses, 3, tf::constant(2.0f)), {12.0 / 3});
  // (2, 2) losses with per-column weights (2,) and per-row weights (2, 1) broadcast to them.
  tf::Tensor mat = tf::constant({{1.0f, 2.0f}, {3.0f, 4.0f}});
  check_values(tf::nn::compute_average_loss(mat, 2, tf::constant({1.0f, 0.0f})), {2});
  check_values(tf::nn::compute_average_loss(mat, 2, tf::constant({{1.0f}, {0.0f}})), {1.5});
  // Weights that would grow the loss's shape are errors naming both shapes.
  require_error(
      [&] { tf::nn::compute_average_loss(losses, 3, tf::ones({3, 3})); },
      {"[compute_average_loss]", "sample_weight of shape (3, 3) does not broadcast to "
                                 "per_example_loss's shape (3,)"});
  require_error([&] { tf::nn::compute_average_loss(losses, 3, tf::ones({2})); },
                {"sample_weight of shape (2,)", "per_example_loss's shape (3,)"});
  require_error([&] { tf::nn::compute_average_loss(losses, 3, tf::ones({2, 1})); },
                {"sample_weight of shape (2, 1)", "per_example_loss's shape (3,)"});
  require_error([&] { tf::nn::compute_average_loss(mat, 2, tf::ones({2, 2, 2})); },
                {"sample_weight of shape (2, 2, 2)", "per_example_loss's shape (2, 2)"});
}

TEST_CASE("robustness: a step cancelled on some replicas never returns normally",
          "[cpu][distribute]") {
  split_cpu();
  ds::MirroredStrategy strategy(cpus(3));
  // As when a collective fails on replica 0's thread (NCCL, or the ring across workers) and
  // cancels the others, but replica 0's fn catches the failure and returns: the cancelled
  // replicas have no result. (Simulated: the others end as a cancelled collective ends them.)
  auto cancelled_on_others = [] {
    if (ds::get_replica_context()->replica_id_in_sync_group() != 0)
      throw ds::detail::StepCancelled("[all_reduce] the collective failed on replica 0");
  };
  const std::string with_result = error_of([&] {
    strategy.run([&] {
      cancelled_on_others();
      return tf::constant(1.0f);
    });
  });
  CHECK(with_result.find("[strategy.run] the step was cancelled on replica(s) 1, 2 of 3") !=
        std::string::npos);
  CHECK(with_result.find("the collective failed on replica 0") != std::string::npos);
  TF_REQUIRE_THROWS_CONTAINING(strategy.run(cancelled_on_others), tf::FailedPreconditionError,
                               "a replica caught it and returned");
  // A real failure on another replica is still the error that run rethrows.
  TF_REQUIRE_THROWS_CONTAINING(strategy.run([] {
    auto* ctx = ds::get_replica_context();
    if (ctx->replica_id_in_sync_group() == 2) throw tf::InvalidArgumentError("replica 2 failed");
    try {
      return ctx->all_reduce(ds::ReduceOp::SUM, tf::constant({1.0f}));
    } catch (...) {
      return tf::constant({0.0f});  // swallows its cancellation
    }
  }),
                               tf::InvalidArgumentError, "replica 2 failed");
  // Mismatched shapes with replica 0 catching its error: the others' error is raised.
  require_error(
      [&] {
        strategy.run([] {
          auto* ctx = ds::get_replica_context();
          const int64_t n = ctx->replica_id_in_sync_group() + 1;
          try {
            return ctx->all_reduce(ds::ReduceOp::SUM, tf::zeros({n}));
          } catch (const tf::InvalidArgumentError&) {
            if (ctx->replica_id_in_sync_group() == 0) return tf::zeros({1});
            throw;
          }
        });
      },
      {"tensor 0 is float32 (1,) on replica 0 and float32 (2,) on replica 1"});
  // The strategy is usable afterwards.
  auto ok = strategy.run([] {
    return ds::get_replica_context()->all_reduce(ds::ReduceOp::SUM, tf::constant({1.0f}));
  });
  for (int r = 0; r < 3; ++r) check_values(ok[r], {3}, 0, 0);
}
