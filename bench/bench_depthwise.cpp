// depthwise_conv2d (3x3 SAME, multiplier 1, MobileNet's shape [32, 56, 56, 128] float32) and its
// two gradients, next to the dense conv2d a depthwise-separable block replaces (3x3, 128 -> 128),
// the 1x1 pointwise conv2d that follows a depthwise one, and grouped 3x3 convolutions (4 and 32
// groups) with and without their gradients.
//   cmake -DTAPEFLOW_BUILD_BENCH=ON ... && build/bench/bench_depthwise
// Measured on the 2-core AMD EPYC development machine (shared with other builds: wall time, CPU
// time about a third of it), median (ms):
//   depthwise_conv2d 3x3 forward 98, backprop input 85, backprop filter 71
//   conv2d 3x3 128 -> 128 (oneDNN) 1565, conv2d 1x1 128 -> 128 (oneDNN) 110
// The machine is shared: look at the spread, not only the median.
// Quiet machine, 2026-12-04, OMP_NUM_THREADS=2: depthwise forward 11.2 -> 5.7, backprop input
// 10.5 -> 6.1, backprop filter 10.1 -> 8.0 ms once float32 runs oneDNN's depthwise kernels (TF
// 2.21's tf.nn.depthwise_conv2d: forward 16.9 ms, forward with both gradients 34.8 ms).
// Grouped 3x3 (128 -> 128, OMP_NUM_THREADS=2, 2026-12-04), forward / forward and both gradients:
//   4 groups 39 / 134 ms, 32 groups 20 / 87 ms (one conv2d per group before: 45 / 142, 50 / 224).
#include <benchmark/benchmark.h>

#include "autograd/tape.h"
#include "core/tensor.h"
#include "ops/depthwise.h"
#include "ops/factory.h"
#include "ops/nn.h"
#include "ops/random.h"

namespace tf = tapeflow;

namespace {

constexpr int64_t kN = 32, kH = 56, kW = 56, kC = 128;

tf::Tensor input() {
  return tf::random::uniform({kN, kH, kW, kC}, -1, 1, tf::float32, 1);
}

void set_counters(benchmark::State& state, double flops) {
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace

static void BM_depthwise_conv2d_3x3(benchmark::State& state) {
  tf::DeviceScope scope("/cpu:0");
  const tf::Tensor x = input();
  const tf::Tensor f = tf::random::uniform({3, 3, kC, 1}, -1, 1, tf::float32, 2);
  for (auto _ : state) {
    tf::Tensor y = tf::nn::depthwise_conv2d(x, f, {1}, "SAME");
    benchmark::DoNotOptimize(y.raw_data());
  }
  set_counters(state, 2.0 * kN * kH * kW * kC * 9);
}
BENCHMARK(BM_depthwise_conv2d_3x3)
    ->Unit(benchmark::kMillisecond)
    ->Repetitions(5)
    ->ReportAggregatesOnly();

static void BM_depthwise_conv2d_3x3_backprop_input(benchmark::State& state) {
  tf::DeviceScope scope("/cpu:0");
  const tf::Tensor dy = input();
  const tf::Tensor f = tf::random::uniform({3, 3, kC, 1}, -1, 1, tf::float32, 2);
  tf::detail::DepthwiseWindow win;
  win.same = true;
  for (auto _ : state) {
    tf::Tensor dx = tf::detail::depthwise_conv2d_backprop_input(dy.shape(), f, dy, win);
    benchmark::DoNotOptimize(dx.raw_data());
  }
  set_counters(state, 2.0 * kN * kH * kW * kC * 9);
}
BENCHMARK(BM_depthwise_conv2d_3x3_backprop_input)
    ->Unit(benchmark::kMillisecond)
    ->Repetitions(5)
    ->ReportAggregatesOnly();

static void BM_depthwise_conv2d_3x3_backprop_filter(benchmark::State& state) {
  tf::DeviceScope scope("/cpu:0");
  const tf::Tensor x = input();
  const tf::Tensor dy = tf::random::uniform({kN, kH, kW, kC}, -1, 1, tf::float32, 3);
  tf::detail::DepthwiseWindow win;
  win.same = true;
  for (auto _ : state) {
    tf::Tensor df = tf::detail::depthwise_conv2d_backprop_filter(x, {3, 3, kC, 1}, dy, win);
    benchmark::DoNotOptimize(df.raw_data());
  }
  set_counters(state, 2.0 * kN * kH * kW * kC * 9);
}
BENCHMARK(BM_depthwise_conv2d_3x3_backprop_filter)
    ->Unit(benchmark::kMillisecond)
    ->Repetitions(5)
    ->ReportAggregatesOnly();

// The dense 3x3 convolution (128 -> 128) of the same input, and the 1x1 pointwise one.
static void BM_conv2d(benchmark::State& state) {
  const int64_t k = state.range(0);
  tf::DeviceScope scope("/cpu:0");
  const tf::Tensor x = input();
  const tf::Tensor f = tf::random::uniform({k, k, kC, kC}, -1, 1, tf::float32, 2);
  for (auto _ : state) {
    tf::Tensor y = tf::nn::conv2d(x, f, {1}, "SAME");
    benchmark::DoNotOptimize(y.raw_data());
  }
  set_counters(state, 2.0 * kN * kH * kW * kC * kC * k * k);
}
BENCHMARK(BM_conv2d)
    ->Arg(3)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond)
    ->Repetitions(3)
    ->ReportAggregatesOnly();

// A grouped 3x3 convolution (128 -> 128 in G groups, ResNeXt's block has 32): 1/G of the dense
// one's work.
static void BM_grouped_conv2d(benchmark::State& state) {
  const int64_t groups = state.range(0);
  tf::DeviceScope scope("/cpu:0");
  const tf::Tensor x = input();
  const tf::Tensor f = tf::random::uniform({3, 3, kC / groups, kC}, -1, 1, tf::float32, 2);
  for (auto _ : state) {
    tf::Tensor y = tf::nn::conv2d(x, f, {1}, "SAME");
    benchmark::DoNotOptimize(y.raw_data());
  }
  set_counters(state, 2.0 * kN * kH * kW * kC * (kC / groups) * 9);
}
BENCHMARK(BM_grouped_conv2d)
    ->Arg(4)
    ->Arg(32)
    ->Unit(benchmark::kMillisecond)
    ->Repetitions(3)
    ->ReportAggregatesOnly();

// The same grouped convolution with both gradients (a training step's three convolutions).
static void BM_grouped_conv2d_step(benchmark::State& state) {
  const int64_t groups = state.range(0);
  tf::DeviceScope scope("/cpu:0");
  const tf::Tensor x = input();
  const tf::Tensor f = tf::random::uniform({3, 3, kC / groups, kC}, -1, 1, tf::float32, 2);
  for (auto _ : state) {
    tf::GradientTape tape;
    tape.watch(x);
    tape.watch(f);
    const tf::Tensor y = tf::nn::conv2d(x, f, {1}, "SAME");
    const std::vector<tf::Tensor> g = tape.gradient(y, std::vector<tf::Tensor>{x, f});
    benchmark::DoNotOptimize(g[1].raw_data());
  }
  set_counters(state, 3 * 2.0 * kN * kH * kW * kC * (kC / groups) * 9);
}
BENCHMARK(BM_grouped_conv2d_step)
    ->Arg(4)
    ->Arg(32)
    ->Unit(benchmark::kMillisecond)
    ->Repetitions(3)
    ->ReportAggregatesOnly();

BENCHMARK_MAIN();
