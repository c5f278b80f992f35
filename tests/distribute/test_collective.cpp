// ReplicaContext::all_reduce on the in-process path: exact sums in replica order, bit-identical
// results on every replica, bucketing of mixed dtypes, the gradient of all_reduce.
#include <cstring>

#include "autograd/tape.h"
#include "autograd/variable.h"
#include "core/error.h"
#include "distribute/collective.h"
#include "distribute/strategy.h"
#include "distribute_testing.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/reduce.h"
#include "ops/unary.h"

namespace tf = tapeflow;
namespace ds = tapeflow::distribute;
using distribute_testing::bit_identical;
using distribute_testing::cpus;
using distribute_testing::split_cpu;
using tf::testing::check_values;

namespace {
// Replica r's input: deterministic values that differ per replica.
tf::Tensor replica_input(int r, int64_t n, tf::DType dtype) {
  auto vals = tf::testing::random_values(static_cast<size_t>(n), -100.0, 100.0,
                                         static_cast<unsigned>(17 + r));
  if (dtype == tf::int32 || dtype == tf::int64 || dtype == tf::uint8)
    for (auto& v : vals) v = std::floor(std::abs(v) / (dtype == tf::uint8 ? 2 : 1));
  return tf::detail::from_doubles(vals, {n}, dtype);
}
}  // namespace

TEST_CASE("all_reduce: SUM and MEAN are exact sums in replica order, bit-identical everywhere",
          "[cpu][distribute]") {
  split_cpu();
  for (int replicas : {2, 3, 4}) {
    ds::MirroredStrategy strategy(cpus(replicas));
    // Odd sizes: the replicas' chunks and the 2048-element blocks do not line up.
    for (int64_t n : {int64_t{1}, int64_t{5}, int64_t{4099}, int64_t{300001}}) {
      for (ds::ReduceOp op : {ds::ReduceOp::SUM, ds::ReduceOp::MEAN}) {
        auto out = strategy.run([&] {
          auto* ctx = ds::get_replica_context();
          return ctx->all_reduce(op, replica_input(ctx->replica_id_in_sync_group(), n, tf::float32));
        });
        // Reference: float32 additions in replica order, as the collective promises.
        std::vector<std::vector<float>> in;
        for (int r = 0; r < replicas; ++r) in.push_back(replica_input(r, n, tf::float32).numpy<float>());
        std::vector<float> want(static_cast<size_t>(n));
        for (size_t j = 0; j < want.size(); ++j) {
          float s = in[0][j];
          for (int r = 1; r < replicas; ++r) s += in[static_cast<size_t>(r)][j];
          if (op == ds::ReduceOp::MEAN) s /= static_cast<float>(replicas);
          want[j] = s;
        }
        const std::vector<float> got = out[0].numpy<float>();
        REQUIRE(got.size() == want.size());
        CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);
        for (int r = 0; r < replicas; ++r) {
          CHECK(out[r].device() == "/device:CPU:" + std::to_string(r));
          CHECK(bit_identical(out[r], out[0]));
        }
      }
    }
  }
}

TEST_CASE("all_reduce: integer and half dtypes", "[cpu][distribute]") {
  split_cpu();
  ds::MirroredStrategy strategy(cpus(4));
  for (tf::DType dt : {tf::int32, tf::int64, tf::float64, tf::float16, tf::bfloat16}) {
    auto out = strategy.run([&] {
      auto* ctx = ds::get_replica_context();
      const double r = ctx->replica_id_in_sync_group();
      return ctx->all_reduce(ds::ReduceOp::SUM,
                             tf::detail::from_doubles({r, 2 * r, -r, 100 + r}, {2, 2}, dt));
    });
    CHECK(out[3].dtype() == dt);
    CHECK(out[3].shape() == tf::TensorShape{2, 2});
    check_values(out[3], {6, 12, -6, 406}, 0, 0);
  }
  // MEAN of integers divides as integers.
  auto mean = strategy.run([] {
    auto* ctx = ds::get_replica_context();
    return ctx->all_reduce(ds::ReduceOp::MEAN, tf::constant({ctx->replica_id_in_sync_group() * 3}));
  });
  CHECK(mean[1].numpy<int>() == std::vector<int>{(0 + 3 + 6 + 9) / 4});
}

TEST_CASE("all_reduce: one replica without the shortcut runs the whole path", "[cpu][distribute]") {
  // TAPEFLOW_ALL_REDUCE_SHORTCUT=0 (read when the strategy is made) sends a one-replica
  // all-reduce through the collective itself, as the GPU tests do for NCCL over one GPU.
  tf::testing::EnvScope no_shortcut("TAPEFLOW_ALL_REDUCE_SHORTCUT", "0");
  ds::MirroredStrategy strategy(std::vector<std::string>{"/cpu:0"});
  auto out = strategy.run([] {
    return ds::get_replica_context()->all_reduce(
        ds::ReduceOp::MEAN, {tf::constant(std::vector<int32_t>{3, -5, 7}, {3}),
                             tf::constant(std::vector<float>{0.5f, 2.0f}, {2})});
  });
  const std::vector<tf::Tensor> got = out.values()[0];
  REQUIRE(got.size() == 2);
  CHECK(got[0].dtype() == tf::int32);
  check_values(got[0], {3, -5, 7}, 0, 0);
  check_values(got[1], {0.5, 2.0}, 0, 0);
  // The result is the collective's, not the input handed back.
  const tf::Tensor in = tf::constant(std::vector<float>{1.0f}, {1});
  auto same = strategy.run([&] {
    return ds::get_replica_context()->all_reduce(ds::ReduceOp::SUM, std::vector<tf::Tensor>{in});
  });
  CHECK(same.values()[0][0].get() != in.get());
}

TEST_CASE("all_reduce: bucket plan keeps order, one dtype per bucket, a small first bucket",
          "[cpu][distribute]") {
  std::vector<tf::TensorMeta> metas;
  for (int i = 0; i < 300; ++i) metas.push_back({{1000}, i % 3 == 0 ? tf::float64 : tf::float32});
  metas.push_back({{8 << 20}, tf::float32});  // 32 MiB: a bucket of its own
  metas.push_back({{100}, tf::int32});
  metas.push_back({{3 << 20}, tf::float32});
  const auto buckets = ds::detail::plan_buckets(metas);
  std::vector<int> seen(metas.size(), 0);
  for (size_t b = 0; b < buckets.size(); ++b) {
    const auto& bucket = buckets[b];
    REQUIRE_FALSE(bucket.tensors.empty());
    int64_t elements = 0;
    for (size_t k = 0; k < bucket.tensors.size(); ++k) {
      const size_t t = bucket.tensors[k];
      CHECK(metas[t].dtype == bucket.dtype);
      if (k > 0) CHECK(t > bucket.tensors[k - 1]);  // list order inside a bucket
      ++seen[t];
      elements += metas[t].shape.num_elements();
    }
    CHECK(elements == bucket.num_elements);
    const size_t cap = b == 0 ? ds::detail::kFirstBucketBytes : ds::detail::kBucketBytes;
    if (bucket.tensors.size() > 1) CHECK(bucket.nbytes() <= cap);
  }
  for (int s : seen) CHECK(s == 1);  // every tensor exactly once
  CHECK(buckets[0].dtype == tf::float64);  // dtypes in order of first appearance
  CHECK(buckets[0].nbytes() <= ds::detail::kFirstBucketBytes);
  CHECK(buckets.back().dtype == tf::int32);
}

TEST_CASE("all_reduce: many small and a few big tensors of mixed dtypes in one call",
          "[cpu][distribute]") {
  split_cpu();
  ds::MirroredStrategy strategy(cpus(3));
  // 200 small tensors, two that cross 25 MiB buckets, mixed float32/float64/int32.
  std::vector<std::pair<int64_t, tf::DType>> specs;
  for (int i = 0; i < 200; ++i)
    specs.push_back({7 + i, i % 3 == 0 ? tf::float64 : (i % 3 == 1 ? tf::float32 : tf::int32)});
  specs.push_back({7 << 20, tf::float32});  // 28 MiB
  specs.push_back({1 << 20, tf::float64});
  specs.push_back({(5 << 20) + 3, tf::float32});
  auto make = [&](int r) {
    std::vector<tf::Tensor> v;
    for (size_t i = 0; i < specs.size(); ++i)
      v.push_back(replica_input(r * 1000 + static_cast<int>(i), specs[i].first, specs[i].second));
    return v;
  };
  auto out = strategy.run([&] {
    auto* ctx = ds::get_replica_context();
    return ctx->all_reduce(ds::ReduceOp::SUM, make(ctx->replica_id_in_sync_group()));
  });
  std::vector<std::vector<tf::Tensor>> ins = {make(0), make(1), make(2)};
  for (size_t i = 0; i < specs.size(); ++i) {
    const tf::Tensor& got = out[1][i];
    CHECK(got.dtype() == specs[i].second);
    CHECK(got.shape() == tf::TensorShape{specs[i].first});
    // Reference in the tensor's own dtype, in replica order.
    tf::Tensor want = tf::add(tf::add(ins[0][i], ins[1][i]), ins[2][i]);
    CHECK(bit_identical(got, want));
    CHECK(bit_identical(out[0][i], got));
    CHECK(bit_identical(out[2][i], got));
  }
}

TEST_CASE("all_reduce: outside strategy.run there is no replica context", "[cpu][distribute]") {
  split_cpu();
  CHECK(ds::get_replica_context() == nullptr);
  ds::MirroredStrategy one({"/cpu:1"});
  // One replica: the value comes back unchanged (no communication).
  auto out = one.run([] {
    return ds::get_replica_context()->all_reduce(ds::ReduceOp::MEAN, tf::constant({3.0f}));
  });
  check_values(out[0], {3});
  auto empty = one.run([] {
    return ds::get_replica_context()->all_reduce(ds::ReduceOp::SUM, std::vector<tf::Tensor>{});
  });
  CHECK(empty[0].empty());
}

TEST_CASE("all_reduce: its gradient is the all-reduce of the upstream gradients",
          "[cpu][distribute]") {
  split_cpu();
  ds::MirroredStrategy strategy(cpus(2));
  auto grads = strategy.run([] {
    auto* ctx = ds::get_replica_context();
    const float r = static_cast<float>(ctx->replica_id_in_sync_group() + 1);
    tf::Tensor x = tf::constant({r, 2 * r});
    tf::GradientTape tape;
    tape.watch(x);
    tf::Tensor y = ctx->all_reduce(ds::ReduceOp::SUM, x * x);
    // d/dx_r of sum_s (y * c_s) with c_s = s + 1: all-reduce of the upstream (1 + 2) * 2 x_r.
    tf::Tensor loss = tf::reduce_sum(y * r);
    return tape.gradient(loss, x);
  });
  check_values(grads[0], {6 * 1, 6 * 2});
  check_values(grads[1], {6 * 2, 6 * 4});
}
