// MirroredStrategy: construction, scope, run, reduce, mirrored variables, cancellation
// (API.md "Distribution"). Every case splits CPU:0 into 4 logical devices first.
#include <atomic>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "autograd/tape.h"
#include "autograd/variable.h"
#include "core/error.h"
#include "core/parallel.h"
#include "distribute/strategy.h"
#include "distribute_testing.h"
#include "ops/binary.h"
#include "ops/copy.h"
#include "ops/factory.h"
#include "ops/movement.h"
#include "ops/random.h"
#include "ops/reduce.h"

namespace tf = tapeflow;
namespace ds = tapeflow::distribute;
using distribute_testing::cpus;
using distribute_testing::split_cpu;
using tf::testing::check_values;

TEST_CASE("strategy: devices, worker_devices and the default device list", "[cpu][distribute]") {
  split_cpu();
  ds::MirroredStrategy two({"/cpu:0", "CPU:1"});
  CHECK(two.num_replicas_in_sync() == 2);
  CHECK(two.extended().worker_devices() ==
        std::vector<std::string>{"/device:CPU:0", "/device:CPU:1"});
  CHECK(two.extended().cross_device_ops() == "ReductionToOneDevice");
  ds::MirroredStrategy four(cpus(4));
  CHECK(four.num_replicas_in_sync() == 4);
  if (!tf::testing::has_gpu()) {
    // No GPU: TF's MirroredStrategy() takes the CPU as one device.
    ds::MirroredStrategy all;
    CHECK(all.num_replicas_in_sync() == 1);
    CHECK(all.extended().worker_devices() == std::vector<std::string>{"/device:CPU:0"});
  }
}

TEST_CASE("strategy: unknown, duplicate and empty device lists are errors", "[cpu][distribute]") {
  split_cpu();
  TF_REQUIRE_THROWS_CONTAINING(ds::MirroredStrategy({"/cpu:0", "/cpu:7"}),
                               tf::InvalidArgumentError, "'/cpu:7' (/device:CPU:7) does not exist");
  TF_REQUIRE_THROWS_CONTAINING(ds::MirroredStrategy({"/cpu:1", "/device:CPU:1"}),
                               tf::InvalidArgumentError, "no duplicates allowed");
  TF_REQUIRE_THROWS_CONTAINING(ds::MirroredStrategy(std::vector<std::string>{}),
                               tf::InvalidArgumentError, "the device list is empty");
  TF_REQUIRE_THROWS_CONTAINING(ds::MirroredStrategy({"/tpu:0"}), tf::InvalidArgumentError,
                               "cannot parse device name");
  TF_REQUIRE_THROWS_CONTAINING(ds::MirroredStrategy({"/cpu:0", "/cpu:1"}, ds::NcclAllReduce{}),
                               tf::InvalidArgumentError, "NcclAllReduce needs every device");
}

TEST_CASE("strategy: run gives each replica its id, device and context", "[cpu][distribute]") {
  split_cpu();
  ds::MirroredStrategy strategy(cpus(4));
  CHECK(ds::get_replica_context() == nullptr);
  // What each replica sees, checked after run (Catch2's assertions are not thread-safe).
  struct Seen {
    bool context = false, in_sync = false, strategy = false, replica_context = false;
  };
  std::mutex mu;
  std::set<std::thread::id> threads;
  std::vector<Seen> seen(4);
  auto per_replica = strategy.run([&] {
    ds::ReplicaContext* ctx = ds::get_replica_context();
    if (ctx == nullptr) return tf::Tensor(-1.0f);
    std::lock_guard lock(mu);
    threads.insert(std::this_thread::get_id());
    Seen& s = seen[static_cast<size_t>(ctx->replica_id_in_sync_group())];
    s.context = true;
    s.in_sync = ctx->num_replicas_in_sync() == 4;
    s.strategy = ds::has_strategy() && &ds::get_strategy() == &strategy;
    s.replica_context = !ds::in_cross_replica_context();
    // Ops run on the replica's device.
    return tf::fill({2}, tf::Tensor(static_cast<float>(ctx->replica_id_in_sync_group())));
  });
  for (const Seen& s : seen) {
    CHECK(s.context);
    CHECK(s.in_sync);
    CHECK(s.strategy);
    CHECK(s.replica_context);
  }
  REQUIRE(per_replica.values().size() == 4);
  for (int i = 0; i < 4; ++i) {
    check_values(per_replica[i], {double(i), double(i)});
    CHECK(per_replica[i].device() == "/device:CPU:" + std::to_string(i));
  }
  CHECK(threads.size() == 4);
  CHECK(threads.count(std::this_thread::get_id()) == 0);
  // Persistent threads: a second run uses the same four threads.
  std::set<std::thread::id> again;
  strategy.run([&] {
    std::lock_guard lock(mu);
    again.insert(std::this_thread::get_id());
  });
  CHECK(again == threads);
  // The four CPU replicas share the cores: each kernel pool is a quarter of the process's.
  const int pool = tf::detail::num_threads();
  auto shares = strategy.run([] { return tf::detail::num_threads(); });
  for (int i = 0; i < 4; ++i) CHECK(shares[i] == std::max(1, pool / 4));
  // A bool per replica (std::vector<bool> holds no bools: operator[] returned a dangling
  // reference and crashed).
  auto odd = strategy.run([] { return ds::get_replica_context()->replica_id_in_sync_group() % 2; });
  auto is_odd =
      strategy.run([] { return ds::get_replica_context()->replica_id_in_sync_group() % 2 == 1; });
  for (int i = 0; i < 4; ++i) {
    CHECK(odd[i] == i % 2);
    const bool b = is_odd[i];
    CHECK(b == (i % 2 == 1));
  }
  CHECK(tf::detail::num_threads() == pool);
  CHECK(strategy.experimental_local_results(per_replica).size() == 4);
  std::ostringstream os;
  os << strategy.run([] { return tf::constant(1.0f); });
  CHECK(os.str().rfind("PerReplica:{\n  0: tf.Tensor(1.0, shape=(), dtype=float32),", 0) == 0);
}

TEST_CASE("strategy: PerReplica arguments are split and plain arguments shared",
          "[cpu][distribute]") {
  split_cpu();
  ds::MirroredStrategy strategy(cpus(2));
  ds::PerReplica<tf::Tensor> xs({tf::constant({1.0f, 2.0f}), tf::constant({3.0f, 4.0f})});
  tf::Tensor shared = tf::constant({10.0f, 20.0f});
  auto out = strategy.run([](const tf::Tensor& x, const tf::Tensor& s, int k) { return x * s + k; },
                          xs, shared, 1);
  check_values(out[0], {11, 41});
  check_values(out[1], {31, 81});
  // Vector and tuple results.
  auto vec = strategy.run([](tf::Tensor x) { return std::vector<tf::Tensor>{x, x + 1.0f}; }, xs);
  check_values(vec[1][1], {4, 5});
  auto tup = strategy.run([](tf::Tensor x) { return std::make_tuple(x, tf::reduce_sum(x)); }, xs);
  check_values(std::get<1>(tup[0]), {3});
  check_values(std::get<1>(tup[1]), {7});
  ds::PerReplica<tf::Tensor> three({xs[0], xs[0], xs[0]});
  TF_REQUIRE_THROWS_CONTAINING(strategy.run([](tf::Tensor x) { return x; }, three),
                               tf::InvalidArgumentError, "has 3 components but the strategy has 2");
}

TEST_CASE("strategy: reduce SUM and MEAN without an axis", "[cpu][distribute]") {
  split_cpu();
  ds::MirroredStrategy strategy(cpus(4));
  auto v = strategy.run([] {
    const float r = static_cast<float>(ds::get_replica_context()->replica_id_in_sync_group());
    return tf::constant({r, 10.0f * r + 1.0f});
  });
  tf::Tensor sum = strategy.reduce(ds::ReduceOp::SUM, v);
  check_values(sum, {0 + 1 + 2 + 3, 1 + 11 + 21 + 31}, 0, 0);
  CHECK(sum.device() == tf::zeros({}).device());  // the caller's device (GPU:0 where there is one)
  check_values(strategy.reduce(ds::ReduceOp::MEAN, v), {1.5, 16}, 0, 0);
  {
    tf::DeviceScope scope("/cpu:2");
    CHECK(strategy.reduce(ds::ReduceOp::SUM, v).device() == "/device:CPU:2");
  }
  // int32 values stay int32.
  auto ints = strategy.run([] {
    return tf::constant({ds::get_replica_context()->replica_id_in_sync_group() + 1});
  });
  tf::Tensor isum = strategy.reduce(ds::ReduceOp::SUM, ints);
  CHECK(isum.dtype() == tf::int32);
  CHECK(isum.numpy<int>() == std::vector<int>{10});
  // bool components are refused by name (the error named an internal add).
  auto flags = strategy.run([] { return tf::greater(tf::constant({1.0f, -1.0f}), 0.0f); });
  TF_REQUIRE_THROWS_CONTAINING(strategy.reduce(ds::ReduceOp::SUM, flags), tf::InvalidArgumentError,
                               "[strategy.reduce] cannot reduce bool components (bool (2,)");
  // MEAN divides truly, as TF's value / n: float64 for integers.
  tf::Tensor imean = strategy.reduce(ds::ReduceOp::MEAN, ints);
  CHECK(imean.dtype() == tf::float64);
  check_values(imean, {2.5}, 0, 0);
  TF_REQUIRE_THROWS_CONTAINING(
      strategy.reduce(ds::ReduceOp::SUM, ds::PerReplica<tf::Tensor>({sum, sum})),
      tf::InvalidArgumentError, "has 2 components but the strategy has 4");
}

TEST_CASE("strategy: reduce with an axis averages over every element of uneven batches",
          "[cpu][distribute]") {
  split_cpu();
  ds::MirroredStrategy strategy(cpus(2));
  // Per-example losses of an uneven batch: 3 on replica 0, 1 on replica 1.
  ds::PerReplica<tf::Tensor> losses({tf::constant({1.0f, 2.0f, 3.0f}), tf::constant({6.0f})});
  check_values(strategy.reduce(ds::ReduceOp::SUM, losses, 0), {12}, 0, 0);
  // TF: the total over the total count (12 / 4), not the mean of the means ((2 + 6) / 2).
  check_values(strategy.reduce(ds::ReduceOp::MEAN, losses, 0), {3}, 0, 0);
  ds::PerReplica<tf::Tensor> mats({tf::constant({{1.0f, 2.0f}, {3.0f, 4.0f}}),
                                   tf::constant({{5.0f, 6.0f}, {7.0f, 8.0f}})});
  check_values(strategy.reduce(ds::ReduceOp::SUM, mats, 1), {3 + 11, 7 + 15}, 0, 0);
  check_values(strategy.reduce(ds::ReduceOp::MEAN, mats, -1), {14.0 / 4, 22.0 / 4}, 0, 0);
  check_values(strategy.reduce(ds::ReduceOp::MEAN, mats, 0), {16.0 / 4, 20.0 / 4}, 0, 0);
  TF_REQUIRE_THROWS_CONTAINING(strategy.reduce(ds::ReduceOp::SUM, losses),
                               tf::InvalidArgumentError, "components differ in shape: (3,)");
  TF_REQUIRE_THROWS_CONTAINING(strategy.reduce(ds::ReduceOp::SUM, losses, 1),
                               tf::InvalidArgumentError, "axis 1 is out of range");
  ds::PerReplica<tf::Tensor> ragged({tf::zeros({3, 2}), tf::zeros({1, 2})});
  check_values(strategy.reduce(ds::ReduceOp::SUM, ragged, 0), {0, 0});
  TF_REQUIRE_THROWS_CONTAINING(strategy.reduce(ds::ReduceOp::SUM, ragged, 1),
                               tf::InvalidArgumentError,
                               "components differ in shape outside axis 1: (3, 2) for replica 0, "
                               "(1, 2) for replica 1");
}

TEST_CASE("strategy: mirrored variables", "[cpu][distribute]") {
  split_cpu();
  ds::MirroredStrategy strategy(cpus(3));
  tf::Variable plain(tf::constant({1.0f}), "plain");
  tf::Variable v = [&] {
    auto scope = strategy.scope();
    CHECK(ds::has_strategy());
    CHECK(&ds::get_strategy() == &strategy);
    return tf::Variable(tf::random::normal({4}, 0.0, 1.0, tf::float32, 7), "w");
  }();
  CHECK_FALSE(ds::has_strategy());
  CHECK_FALSE(plain.is_mirrored());
  REQUIRE(v.is_mirrored());
  auto copies = strategy.experimental_local_results(v);
  REQUIRE(copies.size() == 3);
  for (int i = 0; i < 3; ++i) {
    CHECK(copies[i].device() == "/device:CPU:" + std::to_string(i));
    CHECK(distribute_testing::bit_identical(copies[i].value(), copies[0].value()));
  }
  const std::vector<float> init = copies[0].value().numpy<float>();
  // Inside a replica: reads see that replica's copy, assignments change only it.
  std::vector<std::string> devices(3);  // checked after run (Catch2 is not thread-safe)
  auto seen = strategy.run([&] {
    const int r = ds::get_replica_context()->replica_id_in_sync_group();
    devices[static_cast<size_t>(r)] = v.device();
    v.assign_add(tf::fill({4}, tf::Tensor(static_cast<float>(r))));
    return v.value();
  });
  for (int r = 0; r < 3; ++r) CHECK(devices[r] == "/device:CPU:" + std::to_string(r));
  for (int r = 0; r < 3; ++r) {
    std::vector<double> want;
    for (float x : init) want.push_back(double(x + float(r)));
    check_values(seen[r], want, 0, 0);
    check_values(copies[r].value(), want, 0, 0);
  }
  // Cross-replica: reads see copy 0, assignments write all copies.
  check_values(v.value(), std::vector<double>(init.begin(), init.end()), 0, 0);
  v.assign(tf::constant({1.0f, 2.0f, 3.0f, 4.0f}));
  for (auto& c : copies) check_values(c.value(), {1, 2, 3, 4}, 0, 0);
  v.assign_sub(tf::constant({1.0f, 1.0f, 1.0f, 1.0f}));
  for (auto& c : copies) check_values(c.value(), {0, 1, 2, 3}, 0, 0);
  CHECK(strategy.experimental_local_results(plain).size() == 1);
}

TEST_CASE("strategy: a variable made in a replica function is one mirrored variable",
          "[cpu][distribute]") {
  split_cpu();
  ds::MirroredStrategy strategy(cpus(3));
  // TF: every replica makes it, all get one MirroredVariable with replica 0's initial value.
  std::vector<tf::Variable> made(3);
  auto read = strategy.run([&] {
    const int r = ds::get_replica_context()->replica_id_in_sync_group();
    tf::Variable v(tf::constant({11.0f + static_cast<float>(r), 1.0f}), "made_in_run");
    made[static_cast<size_t>(r)] = v;
    v.assign_add(tf::fill({2}, tf::Tensor(static_cast<float>(r))));
    return v.value();
  });
  for (int r = 0; r < 3; ++r) {
    REQUIRE(made[r].is_mirrored());
    CHECK(made[r].handle_id() == made[0].handle_id());
    check_values(read[r], {11.0 + r, 1.0 + r}, 0, 0);
  }
  const auto copies = strategy.experimental_local_results(made[0]);
  REQUIRE(copies.size() == 3);
  for (int r = 0; r < 3; ++r) CHECK(copies[r].device() == "/device:CPU:" + std::to_string(r));
  // Outside run it reads copy 0; trainable, and watched by a replica's tape.
  check_values(made[0].value(), {11, 1}, 0, 0);
  // The strategy keeps none alive: the last handle gone, the variable is gone.
  const std::weak_ptr<tf::Variable::State> state = made[0].weak_state();
  made.clear();
  CHECK(state.expired());
  auto grads = strategy.run([&] {
    tf::Variable w(tf::constant(3.0f), "w");
    tf::GradientTape tape;
    const tf::Tensor y = w * w;
    return tape.gradient(y, w);
  });
  for (int r = 0; r < 3; ++r) check_values(grads[r], {6}, 0, 0);
  // Every replica must make the same variables: shapes, then a missing one, then a variable
  // where another replica all-reduces; the strategy stays usable.
  TF_REQUIRE_THROWS_CONTAINING(strategy.run([] {
    const int64_t n = ds::get_replica_context()->replica_id_in_sync_group() == 1 ? 3 : 2;
    tf::Variable v(tf::zeros({n}), "odd");
  }),
                               tf::InvalidArgumentError,
                               "replica 0 creates 'odd' float32 (2,) where replica 1 creates "
                               "'odd' float32 (3,)");
  TF_REQUIRE_THROWS_CONTAINING(strategy.run([] {
    if (ds::get_replica_context()->replica_id_in_sync_group() != 2)
      tf::Variable v(tf::zeros({2}), "missing");
  }),
                               tf::FailedPreconditionError, "same collective calls");
  TF_REQUIRE_THROWS_CONTAINING(strategy.run([] {
    auto* ctx = ds::get_replica_context();
    if (ctx->replica_id_in_sync_group() == 0)
      tf::Variable v(tf::zeros({2}), "here");
    else
      ctx->all_reduce(ds::ReduceOp::SUM, tf::zeros({2}));
  }),
                               tf::FailedPreconditionError,
                               "met at different collective calls (Variable and all_reduce)");
  auto ok = strategy.run([] {
    return ds::get_replica_context()->all_reduce(ds::ReduceOp::SUM, tf::constant({2.0f}));
  });
  for (int r = 0; r < 3; ++r) check_values(ok[r], {6}, 0, 0);
  // A plain tensor is its own only local result (no variable is made of it).
  auto scope = strategy.scope();
  const auto local = strategy.experimental_local_results(tf::constant({1.0f, 2.0f}));
  REQUIRE(local.size() == 1);
  check_values(local[0], {1, 2}, 0, 0);
}

TEST_CASE("strategy: scopes of two strategies do not mix", "[cpu][distribute]") {
  split_cpu();
  ds::MirroredStrategy a(cpus(2)), b({"/cpu:2", "/cpu:3"});
  auto scope = a.scope();
  { auto again = a.scope(); }  // the same strategy nests
  TF_REQUIRE_THROWS_CONTAINING(b.scope(), tf::FailedPreconditionError,
                               "mixing different tf::distribute::Strategy objects");
}

TEST_CASE("strategy: an exception in one replica cancels the step and is rethrown once",
          "[cpu][distribute]") {
  split_cpu();
  ds::MirroredStrategy strategy(cpus(4));
  std::atomic<int> cancelled{0};
  auto step = [&] {
    auto* ctx = ds::get_replica_context();
    if (ctx->replica_id_in_sync_group() == 2) throw tf::InvalidArgumentError("replica 2 failed");
    try {
      // The other replicas wait here for replica 2, which never comes.
      return ctx->all_reduce(ds::ReduceOp::SUM, tf::constant({1.0f}));
    } catch (...) {
      ++cancelled;
      throw;
    }
  };
  for (int attempt = 0; attempt < 3; ++attempt) {
    cancelled = 0;
    TF_REQUIRE_THROWS_CONTAINING(strategy.run(step), tf::InvalidArgumentError, "replica 2 failed");
    CHECK(cancelled == 3);
    // The strategy is usable afterwards: collectives work again.
    auto ok = strategy.run([] {
      return ds::get_replica_context()->all_reduce(ds::ReduceOp::SUM, tf::constant({2.0f}));
    });
    for (int r = 0; r < 4; ++r) check_values(ok[r], {8}, 0, 0);
  }
}

TEST_CASE("strategy: different collective calls on the replicas are an error, not a hang",
          "[cpu][distribute]") {
  split_cpu();
  ds::MirroredStrategy strategy(cpus(2));
  // Replica 1 skips the all-reduce.
  TF_REQUIRE_THROWS_CONTAINING(strategy.run([] {
    auto* ctx = ds::get_replica_context();
    if (ctx->replica_id_in_sync_group() == 0) ctx->all_reduce(ds::ReduceOp::SUM, tf::constant(1.0f));
  }),
                               tf::FailedPreconditionError, "same collective calls");
  // Different shapes.
  TF_REQUIRE_THROWS_CONTAINING(strategy.run([] {
    auto* ctx = ds::get_replica_context();
    const int64_t n = ctx->replica_id_in_sync_group() + 2;
    return ctx->all_reduce(ds::ReduceOp::SUM, tf::zeros({n}));
  }),
                               tf::InvalidArgumentError,
                               "tensor 0 is float32 (2,) on replica 0 and float32 (3,) on replica 1");
  TF_REQUIRE_THROWS_CONTAINING(strategy.run([] {
    return ds::get_replica_context()->all_reduce(ds::ReduceOp::SUM,
                                                 tf::constant({true, false}));
  }),
                               tf::InvalidArgumentError, "cannot all-reduce a bool tensor");
  // Nested runs and reduce inside a replica.
  TF_REQUIRE_THROWS_CONTAINING(strategy.run([&] { strategy.run([] {}); }),
                               tf::FailedPreconditionError, "does not nest");
  auto v = strategy.run([] { return tf::constant(1.0f); });
  TF_REQUIRE_THROWS_CONTAINING(strategy.run([&] { return strategy.reduce(ds::ReduceOp::SUM, v); }),
                               tf::FailedPreconditionError, "cross-replica context");
  check_values(strategy.reduce(ds::ReduceOp::SUM, v), {2});
}

TEST_CASE("strategy: the default strategy runs on the caller's thread", "[cpu][distribute]") {
  split_cpu();
  CHECK_FALSE(ds::has_strategy());
  ds::Strategy& def = ds::get_strategy();
  CHECK(def.num_replicas_in_sync() == 1);
  const auto caller = std::this_thread::get_id();
  auto out = def.run([&](tf::Tensor x) {
    CHECK(std::this_thread::get_id() == caller);
    return x * 2.0f;
  }, tf::constant({1.0f, 2.0f}));
  check_values(def.reduce(ds::ReduceOp::SUM, out), {2, 4});
  {
    auto scope = def.scope();
    tf::Variable v(tf::constant(1.0f));
    CHECK_FALSE(v.is_mirrored());
  }
}

TEST_CASE("copies between logical CPUs carry gradients back and keep no source",
          "[cpu][distribute]") {
  split_cpu();
  // The copy's vjp needs only the source's device (vjp_saves() == 0): a tape does not hold a
  // host batch copied to another device until the backward pass.
  CHECK(tf::prims::Copy(tf::Device{tf::DeviceType::CPU, 1}).vjp_saves() == 0);
  tf::Tensor x;
  {
    tf::DeviceScope scope("/cpu:0");
    x = tf::constant({1.0f, -2.0f, 3.0f});
  }
  tf::GradientTape tape;
  tape.watch(x);
  tf::Tensor y;
  {
    tf::DeviceScope scope("/cpu:1");
    y = tf::reduce_sum(tf::identity(x) * tf::identity(x));  // copies to CPU:1
  }
  CHECK(y.device() == "/device:CPU:1");
  const tf::Tensor g = tape.gradient(y, x);
  CHECK(g.device() == "/device:CPU:0");
  check_values(g, {2, -4, 6}, 0, 0);
}
