// tf::nn::conv3d (3x3x3 SAME, 32 -> 32 channels, input [4, 16, 32, 32, 32] float32) forward, and
// forward + backward (both gradients through a GradientTape); max_pool3d 2x2x2 forward +
// backward on the same input. conv3d is a composite: one conv2d (oneDNN on the CPU, cuDNN on a
// GPU) per depth tap over the depth slices folded into the batch, summed.
//   cmake -DTAPEFLOW_BUILD_BENCH=ON ... && build/bench/bench_conv3d (on /cpu:0)
// Measured on the 2-core AMD EPYC development machine while shared with other sessions' builds
// (load average 3.4: wall time, CPU time about half of it; the spread is wide), median (ms):
//   conv3d forward 154, forward + backward 516, max_pool3d 2x2x2 forward + backward 124.
// TF 2.21 (CPU, tf.function) on the same machine and shapes at the same time: conv3d forward
// 180, forward + backward 1068. On the quiet machine (2026-12-04, OMP_NUM_THREADS=2, against
// bench/compare/conv_tf.py --cases conv3d): forward 19.5-19.7 against TF's 16.2-16.3,
// forward + backward 57.4-60.2 against 48.7-50.7 (TF runs oneDNN's own 3-D convolution).
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
