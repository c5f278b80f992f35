// tf::Variable: a shared mutable handle with TF's rules (API.md "Variables and gradients").
#include <atomic>
#include <thread>
#include <vector>

#include "autograd/tape.h"
#include "autograd/variable.h"
#include "core/error.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/reduce.h"
#include "support/testing.h"

namespace tf = tapeflow;
using tf::testing::check_values;

TEST_CASE("variable: copies share one state and value() is a snapshot", "[autograd][cuda]") {
  for (tf::Device dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    tf::Variable v(tf::constant({1.0f, 2.0f}), "v");
    tf::Variable alias = v;
    tf::Tensor before = v.value();
    alias.assign(tf::constant({5.0f, 6.0f}));
    check_values(v, {5, 6});
    check_values(before, {1, 2});  // the snapshot did not change
    v.assign_add(tf::constant({1.0f, 1.0f}));
    check_values(alias, {6, 7});
    v.assign_sub(tf::constant({0.5f, 0.5f}));
    check_values(alias, {5.5, 6.5});
    CHECK(v.device() == dev.to_string());
  }
}

TEST_CASE("variable: assign adopts a fresh tensor or writes in place, never aliasing a snapshot",
          "[autograd]") {
  tf::Variable v(tf::zeros({1024}), "v");
  tf::Tensor fresh = tf::ones({1024});
  v.assign(fresh);  // owns its whole buffer: adopted without a copy
  CHECK(v.value().raw_data() == fresh.raw_data());
  const void* p = v.value().raw_data();
  // A view into a larger buffer is copied, never aliased: into a new buffer while a snapshot
  // (`fresh`) holds the current one (copy-on-write), in place once nobody else does.
  tf::Tensor big = tf::fill({2048}, tf::Tensor(2.0f));
  v.assign(tf::detail::view(big, {1024}, 0));  // a view into a larger buffer
  CHECK(v.value().raw_data() != p);
  check_values(fresh, std::vector<double>(1024, 1.0));  // the snapshot kept its value
  const void* q = v.value().raw_data();
  v.assign(tf::detail::view(big, {1024}, 4096));  // the buffer is the variable's alone: in place
  CHECK(v.value().raw_data() == q);
  // assign_add/assign_sub compute the sum into a fresh buffer that the variable adopts.
  v.assign_add(tf::ones({1024}));
  check_values(tf::reduce_sum(v), {3072});
}

TEST_CASE("variable: shape and dtype are fixed and C++ scalars adopt the dtype", "[autograd]") {
  tf::Variable v(tf::constant({1.0f, 2.0f}), "weights");
  CHECK(v.name() == "weights:0");
  CHECK(v.shape() == tf::TensorShape{2});
  CHECK(v.dtype() == tf::float32);
  CHECK(v.trainable());
  tf::testing::require_error([&] { v.assign(tf::constant({1.0f, 2.0f, 3.0f})); },
                             {"[assign]", "weights:0", "(2,)", "(3,)"});
  tf::testing::require_error([&] { v.assign(tf::constant({1.0, 2.0})); },
                             {"[assign]", "float32", "float64"});
  v.assign_add(1);  // a weak C++ scalar broadcasts and becomes float32
  CHECK(v.dtype() == tf::float32);
  check_values(v, {2, 3});
  tf::Variable frozen(tf::constant(1), "step", /*trainable=*/false);
  CHECK_FALSE(frozen.trainable());
  CHECK(frozen.dtype() == tf::int32);
}

TEST_CASE("variable: used directly as an op input", "[autograd]") {
  tf::Variable w(tf::constant({{1.0f, 2.0f}, {3.0f, 4.0f}}), "w");
  check_values(tf::multiply(w, 2.0f), {2, 4, 6, 8});
  check_values(tf::reduce_sum(w), {10});
}

TEST_CASE("variable: an empty handle is an error, not a crash", "[autograd]") {
  tf::Variable v;
  CHECK_FALSE(v.defined());
  REQUIRE_THROWS_AS(v.value(), tf::FailedPreconditionError);
  REQUIRE_THROWS_AS(v.assign(tf::constant(1.0f)), tf::FailedPreconditionError);
  REQUIRE_THROWS_AS(tf::Variable(tf::Tensor(), "x"), tf::InvalidArgumentError);
}

TEST_CASE("variable: updates from several threads at once are never lost", "[autograd]") {
  // Each thread adds 1 to every element, many times, while a reader takes snapshots and tapes
  // differentiate through reads; as TF's AssignAddVariableOp, an update is atomic.
  constexpr int kThreads = 4, kUpdates = 300;
  tf::Variable counter(tf::zeros({64}, tf::int64), "counter");
  tf::Variable total(tf::zeros({8}), "total");
  std::atomic<bool> torn{false}, bad_gradient{false};
  std::atomic<int> running{kThreads};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < kUpdates; ++i) {
        counter.assign_add(tf::constant(int64_t{1}));
        if (i % 2 == 0) total.assign_add(tf::ones({8}));
        else total.assign_sub(tf::fill({8}, tf::Tensor(-1.0f)));
        if (i % 50 == t) {
          tf::GradientTape tape;
          const tf::Tensor y = tf::reduce_sum(total * 2.0f);
          const tf::Tensor g = tape.gradient(y, total);
          for (float x : g.numpy<float>()) bad_gradient = bad_gradient || x != 2.0f;
        }
      }
      --running;
    });
  // Snapshots never see half an update: every element of a snapshot is the same.
  while (running > 0) {
    const std::vector<int64_t> snap = counter.value().numpy<int64_t>();
    for (int64_t x : snap) torn = torn || x != snap[0];
  }
  for (auto& th : threads) th.join();
  CHECK_FALSE(torn);
  CHECK_FALSE(bad_gradient);
  check_values(counter, std::vector<double>(64, kThreads * kUpdates));
  check_values(total, std::vector<double>(8, kThreads * kUpdates));
}
