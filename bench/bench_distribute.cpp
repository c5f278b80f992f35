// MirroredStrategy costs on logical CPU devices (CPU:0 split in two before the first op):
//   - an SGD step of a 784-256-256-10 MLP (ReLU, softmax cross-entropy) at global batch 256:
//     on one device, and mirrored on 2 replicas (128 each, gradients all-reduced, every copy
//     updated), eager and with the replica step as a tf::function;
//   - strategy.run of an empty step (the hand-off to the replica threads and the join);
//   - the in-process all-reduce (SUM, float32, 2 replicas) of one buffer of 64 KiB .. 64 MiB,
//     bytes = the buffer size per replica (algorithm bandwidth), against std::memcpy of the same
//     size on one thread and on two.
//
//   OMP_NUM_THREADS=2 ./bench_distribute --benchmark_repetitions=5 \
//       --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <cstring>
#include <thread>
#include <vector>

#include "autograd/tape.h"
#include "autograd/variable.h"
#include "core/device.h"
#include "distribute_mlp.h"
#include "distribute/strategy.h"
#include "jit/function.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/linalg.h"
#include "ops/movement.h"
#include "ops/nn.h"
#include "ops/random.h"
#include "ops/reduce.h"

namespace tf = tapeflow;
namespace ds = tapeflow::distribute;

namespace {

using namespace distribute_bench;


void BM_step_single_device(benchmark::State& state) {
  Mlp m = make_mlp();
  tf::Tensor x = features(), y = labels();
  for (auto _ : state) benchmark::DoNotOptimize(sgd_step(m, x, y, kBatch).raw_data());
  state.SetItemsProcessed(state.iterations() * kBatch);
}

void BM_step_mirrored_2(benchmark::State& state) {
  const bool traced = state.range(0) != 0;
  ds::MirroredStrategy strategy({"/cpu:0", "/cpu:1"});
  Mlp m = [&] {
    auto scope = strategy.scope();
    return make_mlp();
  }();
  std::vector<std::vector<tf::Tensor>> data = {{features(), labels()}};
  const ds::PerReplica<std::vector<tf::Tensor>> batch =
      *strategy.experimental_distribute_dataset(data).begin();
  auto step = tf::function(
      [&](tf::Tensor x, tf::Tensor y) { return sgd_step(m, x, y, kBatch); });
  for (auto _ : state) {
    auto losses = strategy.run([&](const std::vector<tf::Tensor>& b) {
      return traced ? step(b[0], b[1]) : sgd_step(m, b[0], b[1], kBatch);
    }, batch);
    benchmark::DoNotOptimize(losses[0].raw_data());
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
}

void BM_step_single_device_traced(benchmark::State& state) {
  Mlp m = make_mlp();
  tf::Tensor x = features(), y = labels();
  auto step = tf::function([&](tf::Tensor a, tf::Tensor b) { return sgd_step(m, a, b, kBatch); });
  for (auto _ : state) benchmark::DoNotOptimize(step(x, y).raw_data());
  state.SetItemsProcessed(state.iterations() * kBatch);
}

void BM_run_empty_step(benchmark::State& state) {
  ds::MirroredStrategy strategy({"/cpu:0", "/cpu:1"});
  for (auto _ : state) strategy.run([] {});
}

void BM_all_reduce_in_process(benchmark::State& state) {
  const int64_t bytes = state.range(0);
  ds::MirroredStrategy strategy({"/cpu:0", "/cpu:1"});
  auto inputs = strategy.run([&] { return tf::ones({bytes / 4}); });
  for (auto _ : state) {
    auto out = strategy.run([](const tf::Tensor& t) {
      return ds::get_replica_context()->all_reduce(ds::ReduceOp::SUM, t);
    }, inputs);
    benchmark::DoNotOptimize(out[0].raw_data());
  }
  state.SetBytesProcessed(state.iterations() * bytes);
}

void BM_memcpy(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  const int threads = static_cast<int>(state.range(1));
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  for (auto _ : state) {
    if (threads == 1) {
      std::memcpy(dst.data(), src.data(), bytes);
    } else {
      std::vector<std::thread> pool;
      const size_t part = bytes / static_cast<size_t>(threads);
      for (int t = 0; t < threads; ++t)
        pool.emplace_back([&, t] {
          std::memcpy(dst.data() + t * part, src.data() + t * part, part);
        });
      for (auto& th : pool) th.join();
    }
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(bytes));
}

}  // namespace

BENCHMARK(BM_step_single_device)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_step_single_device_traced)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_step_mirrored_2)->ArgName("traced")->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_run_empty_step)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_all_reduce_in_process)->RangeMultiplier(16)->Range(64 << 10, 64 << 20)->UseRealTime();
BENCHMARK(BM_memcpy)->ArgNames({"bytes", "threads"})->ArgsProduct({{64 << 10, 1 << 20, 16 << 20, 64 << 20}, {1, 2}})->UseRealTime();

int main(int argc, char** argv) {
  // Two logical CPU devices, before any op runs.
  tf::config::set_logical_device_configuration(
      tf::config::list_physical_devices("CPU").at(0),
      std::vector<tf::config::LogicalDeviceConfiguration>(2));
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
