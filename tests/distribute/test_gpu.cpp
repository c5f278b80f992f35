// GPU replicas (skipped without a GPU): two logical GPUs on one physical GPU use the in-process
// all-reduce through host copies; two physical GPUs use NCCL. Each case configures the devices
// first (CTest runs every case in its own process).
#include "autograd/variable.h"
#include "core/error.h"
#include "distribute/strategy.h"
#include "distribute_testing.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/reduce.h"

namespace tf = tapeflow;
namespace ds = tapeflow::distribute;
using distribute_testing::bit_identical;
using tf::testing::check_values;

namespace {
// Runs a step that all-reduces one big and one small tensor and updates a mirrored variable;
// checks values, placement and bit-identical copies.
void check_gpu_strategy(ds::MirroredStrategy& strategy) {
  const int n = strategy.num_replicas_in_sync();
  tf::Variable v = [&] {
    auto scope = strategy.scope();
    return tf::Variable(tf::ones({3}), "v");
  }();
  const int64_t big = (1 << 20) + 7;
  auto out = strategy.run([&] {
    auto* ctx = ds::get_replica_context();
    const float r = static_cast<float>(ctx->replica_id_in_sync_group() + 1);
    auto reduced = ctx->all_reduce(ds::ReduceOp::SUM,
                                   {tf::fill({big}, tf::Tensor(r)), tf::fill({3}, tf::Tensor(r))});
    v.assign_add(reduced[1]);
    return ctx->all_reduce(ds::ReduceOp::MEAN, std::vector<tf::Tensor>{reduced[0]})[0];
  });
  const double sum = n * (n + 1) / 2.0;
  for (int r = 0; r < n; ++r) {
    CHECK(out[r].device() == "/device:GPU:" + std::to_string(r));
    CHECK(bit_identical(out[r], out[0]));
  }
  check_values(tf::reduce_max(out[0]), {sum});
  check_values(tf::reduce_min(out[0]), {sum});
  for (auto& c : v.components()) check_values(c.value(), {1 + sum, 1 + sum, 1 + sum});
  check_values(strategy.reduce(ds::ReduceOp::SUM, strategy.run([] { return tf::constant(2.0f); })),
               {2.0 * n});
}
}  // namespace

// [own_process]: tools/gpu_check.sh runs such cases each in a process of its own, as CTest does.
TEST_CASE("gpu: two logical GPUs on one GPU all-reduce in process",
          "[cuda][distribute][own_process]") {
  const auto gpus = tf::config::list_physical_devices("GPU");
  if (gpus.empty()) return;  // no GPU on this machine
  try {
    tf::config::set_logical_device_configuration(
        gpus[0], {tf::config::LogicalDeviceConfiguration{1024},
                  tf::config::LogicalDeviceConfiguration{1024}});
  } catch (const tf::FailedPreconditionError&) {
  }
  if (tf::config::list_logical_devices("GPU").size() < 2) {
    WARN("ops already ran on the GPU in this process; run this case alone to split the GPU");
    return;
  }
  ds::MirroredStrategy strategy({"/gpu:0", "/gpu:1"});
  CHECK(strategy.extended().cross_device_ops() == "ReductionToOneDevice");
  TF_REQUIRE_THROWS_CONTAINING(ds::MirroredStrategy({"/gpu:0", "/gpu:1"}, ds::NcclAllReduce{}),
                               tf::InvalidArgumentError, "NcclAllReduce needs every device");
  check_gpu_strategy(strategy);
}

TEST_CASE("gpu: NcclAllReduce over one GPU", "[cuda][distribute]") {
  // A one-rank communicator: the NCCL path (flattening, grouped calls, views of the results) on
  // any GPU machine; TAPEFLOW_ALL_REDUCE_SHORTCUT=0 keeps one replica from skipping it.
  if (tf::config::list_logical_devices("GPU").size() != 1) return;
  tf::testing::EnvScope no_shortcut("TAPEFLOW_ALL_REDUCE_SHORTCUT", "0");
  ds::MirroredStrategy strategy({"/gpu:0"}, ds::NcclAllReduce{});
  CHECK(strategy.extended().cross_device_ops() == "NcclAllReduce");
  check_gpu_strategy(strategy);
  // MEAN keeps each tensor's dtype, also for integers sharing a bucket.
  auto out = strategy.run([] {
    return ds::get_replica_context()->all_reduce(
        ds::ReduceOp::MEAN,
        {tf::constant(std::vector<int32_t>{3, -5, 7}, {3}), tf::constant(std::vector<int32_t>{9}, {1}),
         tf::constant(std::vector<float>{0.5f, 2.0f}, {2})});
  });
  const std::vector<tf::Tensor> got = out.values()[0];
  REQUIRE(got.size() == 3);
  CHECK(got[0].dtype() == tf::int32);
  CHECK(got[1].dtype() == tf::int32);
  check_values(got[0], {3, -5, 7}, 0, 0);
  check_values(got[1], {9}, 0, 0);
  check_values(got[2], {0.5, 2.0}, 0, 0);
}

TEST_CASE("gpu: every GPU with NCCL when there are two or more", "[cuda][distribute]") {
  if (tf::config::list_physical_devices("GPU").size() < 2) return;  // NCCL needs two GPUs
  ds::MirroredStrategy strategy;
  CHECK(strategy.extended().cross_device_ops() == "NcclAllReduce");
  check_gpu_strategy(strategy);
}
