// tf::nn::conv3d (3x3x3 SAME, 32 -> 32 channels, input [4, 16, 32, 32, 32] float32) forward, and
// forward + backward (both gradients through a GradientTape); max_pool3d 2x2x2 forward +
// backward on the same input. conv3d is one primitive: oneDNN's 3-D convolution on the CPU, the
// depth taps folded into channels and cuDNN's 2-D convolution on a GPU.
//   cmake -DTAPEFLOW_BUILD_BENCH=ON ... && build/bench/bench_conv3d (on /cpu:0)
// Quiet 2-core machine, 2026-12-04, OMP_NUM_THREADS=2, medians of 3, two alternating rounds:
// forward 15.4-15.7 ms (the per-tap composite it replaced: 21.3-22.0), forward + backward
// 49.6-51.7 (63.6-64.8); TF 2.21 eager (bench/compare/conv_tf.py --cases conv3d) 16.5-16.8 and
// 50.9-55.1 ms. docs/performance.md has the table.
#include <benchmark/benchmark.h>

#include "autograd/tape.h"
#include "core/device.h"
#include "core/tensor.h"
#include "ops/binary.h"
#include "ops/conv3d.h"
#include "ops/random.h"
#include "ops/reduce.h"

namespace tf = tapeflow;

namespace {

constexpr int64_t kN = 4, kD = 16, kH = 32, kW = 32, kC = 32, kO = 32;

tf::Tensor input() {
  return tf::random::uniform({kN, kD, kH, kW, kC}, -1, 1, tf::float32, 1);
}
tf::Tensor filters() {
  return tf::random::uniform({3, 3, 3, kC, kO}, -0.1, 0.1, tf::float32, 2);
}

// Multiply-adds of one SAME stride-1 pass, times 2 for FLOPs.
constexpr double kConvFlops = 2.0 * kN * kD * kH * kW * kO * 27 * kC;

void set_counters(benchmark::State& state, double flops) {
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace

static void BM_conv3d_3x3x3_forward(benchmark::State& state) {
  tf::DeviceScope scope("/cpu:0");
  const tf::Tensor x = input(), f = filters();
  for (auto _ : state) {
    tf::Tensor y = tf::nn::conv3d(x, f, {1}, "SAME");
    benchmark::DoNotOptimize(y.raw_data());
  }
  set_counters(state, kConvFlops);
}
BENCHMARK(BM_conv3d_3x3x3_forward)
    ->Unit(benchmark::kMillisecond)
    ->Repetitions(3)
    ->ReportAggregatesOnly();

static void BM_conv3d_3x3x3_forward_backward(benchmark::State& state) {
  tf::DeviceScope scope("/cpu:0");
  const tf::Tensor x = input(), f = filters();
  const tf::Tensor up = tf::random::uniform({kN, kD, kH, kW, kO}, -1, 1, tf::float32, 3);
  for (auto _ : state) {
    tf::GradientTape tape({.persistent = true});
    tape.watch(x);
    tape.watch(f);
    const tf::Tensor loss = tf::reduce_sum(tf::nn::conv3d(x, f, {1}, "SAME") * up);
    tf::Tensor dx = tape.gradient(loss, x);
    tf::Tensor df = tape.gradient(loss, f);
    benchmark::DoNotOptimize(dx.raw_data());
    benchmark::DoNotOptimize(df.raw_data());
  }
  set_counters(state, 3 * kConvFlops);
}
BENCHMARK(BM_conv3d_3x3x3_forward_backward)
    ->Unit(benchmark::kMillisecond)
    ->Repetitions(3)
    ->ReportAggregatesOnly();

static void BM_max_pool3d_2x2x2_forward_backward(benchmark::State& state) {
  tf::DeviceScope scope("/cpu:0");
  const tf::Tensor x = input();
  const tf::Tensor up =
      tf::random::uniform({kN, kD / 2, kH / 2, kW / 2, kC}, -1, 1, tf::float32, 3);
  for (auto _ : state) {
    tf::GradientTape tape;
    tape.watch(x);
    const tf::Tensor loss = tf::reduce_sum(tf::nn::max_pool3d(x, {2}, {2}, "VALID") * up);
    tf::Tensor dx = tape.gradient(loss, x);
    benchmark::DoNotOptimize(dx.raw_data());
  }
}
BENCHMARK(BM_max_pool3d_2x2x2_forward_backward)
    ->Unit(benchmark::kMillisecond)
    ->Repetitions(3)
    ->ReportAggregatesOnly();

BENCHMARK_MAIN();
