// Reductions and transpose side by side with libtorch (when built with it), float32:
//   reduce_sum over all of 16M elements, over axis 0 and axis 1 of a 4096x4096 matrix, and the
//   transpose of a 4096x4096 matrix (copied into a new contiguous tensor).
//
//   OMP_NUM_THREADS=2 ./bench_reduce --benchmark_repetitions=5 \
//       --benchmark_report_aggregates_only=true
//
// Counter GB/s: bytes read (reductions) or read + written (transpose) per second, in 1e9 B/s.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#ifdef TAPEFLOW_HAVE_TORCH
#include <torch/torch.h>
#endif

#include "core/parallel.h"
#include "ops/factory.h"
#include "ops/movement.h"
#include "ops/reduce.h"

namespace tf = tapeflow;

namespace {

constexpr int64_t kN = 4096;
constexpr int64_t kElems = kN * kN;  // 16M floats, 64 MiB

const std::vector<float>& host_data() {
  static const std::vector<float> v = [] {
    std::vector<float> d(static_cast<size_t>(kElems));
    std::mt19937 gen(42);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (auto& x : d) x = dist(gen);
    return d;
  }();
  return v;
}

const tf::Tensor& tf_matrix() {
  static const tf::Tensor t = tf::convert_to_tensor(host_data(), {kN, kN});
  return t;
}
const tf::Tensor& tf_flat() {
  static const tf::Tensor t = tf::reshape(tf_matrix(), {kElems});
  return t;
}

void set_gbps(benchmark::State& state, double bytes) {
  state.counters["GB/s"] =
      benchmark::Counter(bytes / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

constexpr double kBytes = static_cast<double>(kElems) * sizeof(float);

void BM_tf_reduce_sum_all(benchmark::State& state) {
  const auto& x = tf_flat();
  for (auto _ : state) benchmark::DoNotOptimize(tf::reduce_sum(x));
  set_gbps(state, kBytes);
}
void BM_tf_reduce_sum_axis0(benchmark::State& state) {
  const auto& x = tf_matrix();
  for (auto _ : state) benchmark::DoNotOptimize(tf::reduce_sum(x, 0));
  set_gbps(state, kBytes);
}
void BM_tf_reduce_sum_axis1(benchmark::State& state) {
  const auto& x = tf_matrix();
  for (auto _ : state) benchmark::DoNotOptimize(tf::reduce_sum(x, 1));
  set_gbps(state, kBytes);
}
void BM_tf_transpose(benchmark::State& state) {
  const auto& x = tf_matrix();
  for (auto _ : state) benchmark::DoNotOptimize(tf::transpose(x));
  set_gbps(state, 2 * kBytes);
}
BENCHMARK(BM_tf_reduce_sum_all)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_tf_reduce_sum_axis0)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_tf_reduce_sum_axis1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_tf_transpose)->Unit(benchmark::kMillisecond)->UseRealTime();

#ifdef TAPEFLOW_HAVE_TORCH
const torch::Tensor& torch_matrix() {
  static const torch::Tensor t = [] {
    torch::set_num_threads(tf::detail::num_threads());
    return torch::from_blob(const_cast<float*>(host_data().data()), {kN, kN}, torch::kFloat32)
        .clone();
  }();
  return t;
}

void BM_torch_reduce_sum_all(benchmark::State& state) {
  const auto x = torch_matrix().reshape({kElems});
  for (auto _ : state) benchmark::DoNotOptimize(x.sum());
  set_gbps(state, kBytes);
}
void BM_torch_reduce_sum_axis0(benchmark::State& state) {
  const auto& x = torch_matrix();
  for (auto _ : state) benchmark::DoNotOptimize(x.sum(0));
  set_gbps(state, kBytes);
}
void BM_torch_reduce_sum_axis1(benchmark::State& state) {
  const auto& x = torch_matrix();
  for (auto _ : state) benchmark::DoNotOptimize(x.sum(1));
  set_gbps(state, kBytes);
}
void BM_torch_transpose(benchmark::State& state) {
  const auto& x = torch_matrix();
  for (auto _ : state) benchmark::DoNotOptimize(x.t().contiguous());
  set_gbps(state, 2 * kBytes);
}
BENCHMARK(BM_torch_reduce_sum_all)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_torch_reduce_sum_axis0)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_torch_reduce_sum_axis1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_torch_transpose)->Unit(benchmark::kMillisecond)->UseRealTime();
#endif

}  // namespace

BENCHMARK_MAIN();
