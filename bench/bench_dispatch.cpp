// Eager dispatch cost of a tiny op: tf::add of two (2, 2) float32 tensors, against libtorch's
// torch::add on the same machine in the same run.
//   cmake -DTAPEFLOW_BUILD_BENCH=ON ... && OMP_NUM_THREADS=2 build/bench/bench_dispatch
#include <benchmark/benchmark.h>

#include "core/tensor.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/unary.h"
#ifdef TAPEFLOW_HAVE_TORCH
#include <torch/torch.h>
#endif

namespace tf = tapeflow;

static void BM_tapeflow_add_2x2(benchmark::State& state) {
  tf::Tensor a = tf::ones({2, 2}), b = tf::ones({2, 2});
  for (auto _ : state) {
    tf::Tensor c = tf::add(a, b);
    benchmark::DoNotOptimize(c.raw_data());
  }
}
BENCHMARK(BM_tapeflow_add_2x2);

static void BM_tapeflow_mul_scalar_2x2(benchmark::State& state) {
  tf::Tensor a = tf::ones({2, 2});
  for (auto _ : state) {
    tf::Tensor c = a * 2.0f;
    benchmark::DoNotOptimize(c.raw_data());
  }
}
BENCHMARK(BM_tapeflow_mul_scalar_2x2);

static void BM_tapeflow_exp_2x2(benchmark::State& state) {
  tf::Tensor a = tf::ones({2, 2});
  for (auto _ : state) {
    tf::Tensor c = tf::exp(a);
    benchmark::DoNotOptimize(c.raw_data());
  }
}
BENCHMARK(BM_tapeflow_exp_2x2);

#ifdef TAPEFLOW_HAVE_TORCH
static void BM_torch_add_2x2(benchmark::State& state) {
  torch::set_num_threads(1);
  auto a = torch::ones({2, 2}), b = torch::ones({2, 2});
  for (auto _ : state) {
    auto c = torch::add(a, b);
    benchmark::DoNotOptimize(c.data_ptr());
  }
}
BENCHMARK(BM_torch_add_2x2);

static void BM_torch_mul_scalar_2x2(benchmark::State& state) {
  auto a = torch::ones({2, 2});
  for (auto _ : state) {
    auto c = a * 2.0f;
    benchmark::DoNotOptimize(c.data_ptr());
  }
}
BENCHMARK(BM_torch_mul_scalar_2x2);

static void BM_torch_exp_2x2(benchmark::State& state) {
  auto a = torch::ones({2, 2});
  for (auto _ : state) {
    auto c = torch::exp(a);
    benchmark::DoNotOptimize(c.data_ptr());
  }
}
BENCHMARK(BM_torch_exp_2x2);
#endif

BENCHMARK_MAIN();
