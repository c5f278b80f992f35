// Elementwise ops: dispatch cost on tiny tensors and bandwidth on 16M float32, against a plain
// STREAM triad loop (the machine's bandwidth, measured in the same run) and libtorch.
//   OMP_NUM_THREADS=2 ./bench_elementwise
// GB/s counters count the bytes each iteration must move (inputs read + output written).
#include <benchmark/benchmark.h>
#include <omp.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "core/parallel.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/unary.h"

#ifdef TAPEFLOW_HAVE_TORCH
#include <torch/torch.h>
#endif

namespace tf = tapeflow;

namespace {

constexpr int64_t kBig = int64_t{1} << 24;  // 16M elements

void set_bytes(benchmark::State& state, double bytes_per_iter) {
  state.counters["GB/s"] = benchmark::Counter(bytes_per_iter * 1e-9,
                                              benchmark::Counter::kIsIterationInvariantRate);
}

// Inputs built on the host (other op families are not needed to run this suite).
tf::Tensor host_uniform(const tf::TensorShape& shape, float lo, float hi, uint32_t seed) {
  std::vector<float> v(static_cast<size_t>(shape.num_elements()));
  uint32_t x = seed;
  for (auto& e : v) {
    x = x * 1664525u + 1013904223u;
    e = lo + (hi - lo) * static_cast<float>(x >> 8) * (1.0f / 16777216.0f);
  }
  return tf::convert_to_tensor(v, shape);
}
tf::Tensor big_input(float lo, float hi, uint32_t seed = 1) {
  return host_uniform({kBig}, lo, hi, seed);
}

// ---- tiny tensors: dispatch cost ----

void BM_TinyAdd_tapeflow(benchmark::State& state) {
  const auto a = tf::constant({{1.f, 2.f}, {3.f, 4.f}});
  const auto b = tf::constant({{5.f, 6.f}, {7.f, 8.f}});
  for (auto _ : state) benchmark::DoNotOptimize(tf::add(a, b));
}
BENCHMARK(BM_TinyAdd_tapeflow);

// The kernel alone (no dispatch, no allocation): what the op itself costs on 2x2.
void BM_TinyAdd_kernel_only(benchmark::State& state) {
  const std::vector<tf::Tensor> in = {tf::constant({{1.f, 2.f}, {3.f, 4.f}}),
                                      tf::constant({{5.f, 6.f}, {7.f, 8.f}})};
  std::vector<tf::Tensor> out = {tf::zeros({2, 2})};
  const tf::prims::Add add;
  for (auto _ : state) {
    add.eval_cpu(in, out);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_TinyAdd_kernel_only);

#ifdef TAPEFLOW_HAVE_TORCH
void BM_TinyAdd_torch(benchmark::State& state) {
  const auto a = torch::tensor({1.f, 2.f, 3.f, 4.f}).reshape({2, 2});
  const auto b = torch::tensor({5.f, 6.f, 7.f, 8.f}).reshape({2, 2});
  for (auto _ : state) benchmark::DoNotOptimize(torch::add(a, b));
}
BENCHMARK(BM_TinyAdd_torch);
#endif

// ---- 16M float32: bandwidth ----

// STREAM triad a = b + s * c on the same pool size, same buffers every iteration.
void BM_StreamTriad(benchmark::State& state) {
  const int nt = tf::detail::num_threads();
  std::unique_ptr<float[]> a(new float[kBig]), b(new float[kBig]), c(new float[kBig]);
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t i = 0; i < kBig; ++i) {
    a[i] = 0.f;
    b[i] = 1.f;
    c[i] = 2.f;
  }
  const float s = 3.f;
  float* pa = a.get();
  const float* pb = b.get();
  const float* pc = c.get();
  for (auto _ : state) {
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t i = 0; i < kBig; ++i) pa[i] = pb[i] + s * pc[i];
    benchmark::ClobberMemory();
  }
  state.counters["threads"] = nt;
  set_bytes(state, 3.0 * 4 * kBig);
}
BENCHMARK(BM_StreamTriad)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_Add_tapeflow(benchmark::State& state) {
  const auto a = big_input(-1, 1, 1), b = big_input(-1, 1, 2);
  for (auto _ : state) benchmark::DoNotOptimize(tf::add(a, b));
  set_bytes(state, 3.0 * 4 * kBig);
}
BENCHMARK(BM_Add_tapeflow)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_Multiply_tapeflow(benchmark::State& state) {
  const auto a = big_input(-1, 1, 1), b = big_input(-1, 1, 2);
  for (auto _ : state) benchmark::DoNotOptimize(tf::multiply(a, b));
  set_bytes(state, 3.0 * 4 * kBig);
}
BENCHMARK(BM_Multiply_tapeflow)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_Exp_tapeflow(benchmark::State& state) {
  const auto a = big_input(-10, 10);
  for (auto _ : state) benchmark::DoNotOptimize(tf::exp(a));
  set_bytes(state, 2.0 * 4 * kBig);
}
BENCHMARK(BM_Exp_tapeflow)->UseRealTime()->Unit(benchmark::kMillisecond);

// The other kernel paths: a C++ scalar operand and a row broadcast (4096 x 4096 + 4096).
void BM_AddScalar_tapeflow(benchmark::State& state) {
  const auto a = big_input(-1, 1);
  for (auto _ : state) benchmark::DoNotOptimize(a + 2.0f);
  set_bytes(state, 2.0 * 4 * kBig);
}
BENCHMARK(BM_AddScalar_tapeflow)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_AddRowBroadcast_tapeflow(benchmark::State& state) {
  const auto a = host_uniform({4096, 4096}, -1, 1, 1);
  const auto b = host_uniform({4096}, -1, 1, 2);
  for (auto _ : state) benchmark::DoNotOptimize(tf::add(a, b));
  set_bytes(state, 2.0 * 4 * kBig);
}
BENCHMARK(BM_AddRowBroadcast_tapeflow)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_Sigmoid_tapeflow(benchmark::State& state) {
  const auto a = big_input(-10, 10);
  for (auto _ : state) benchmark::DoNotOptimize(tf::sigmoid(a));
  set_bytes(state, 2.0 * 4 * kBig);
}
BENCHMARK(BM_Sigmoid_tapeflow)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_Maximum_tapeflow(benchmark::State& state) {
  const auto a = big_input(-1, 1, 1), b = big_input(-1, 1, 2);
  for (auto _ : state) benchmark::DoNotOptimize(tf::maximum(a, b));
  set_bytes(state, 3.0 * 4 * kBig);
}
BENCHMARK(BM_Maximum_tapeflow)->UseRealTime()->Unit(benchmark::kMillisecond);

#ifdef TAPEFLOW_HAVE_TORCH
torch::Tensor torch_big(double lo, double hi) {
  at::set_num_threads(tf::detail::num_threads());
  return torch::rand({kBig}) * (hi - lo) + lo;
}

void BM_Add_torch(benchmark::State& state) {
  const auto a = torch_big(-1, 1), b = torch_big(-1, 1);
  for (auto _ : state) benchmark::DoNotOptimize(torch::add(a, b));
  set_bytes(state, 3.0 * 4 * kBig);
}
BENCHMARK(BM_Add_torch)->UseRealTime()->Unit(benchmark::kMillisecond);

// Into a preallocated output (libtorch's allocator does not cache large CPU blocks).
void BM_Add_torch_out(benchmark::State& state) {
  const auto a = torch_big(-1, 1), b = torch_big(-1, 1);
  auto c = torch::empty({kBig});
  for (auto _ : state) {
    torch::add_out(c, a, b);
    benchmark::ClobberMemory();
  }
  set_bytes(state, 3.0 * 4 * kBig);
}
BENCHMARK(BM_Add_torch_out)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_Multiply_torch(benchmark::State& state) {
  const auto a = torch_big(-1, 1), b = torch_big(-1, 1);
  for (auto _ : state) benchmark::DoNotOptimize(torch::mul(a, b));
  set_bytes(state, 3.0 * 4 * kBig);
}
BENCHMARK(BM_Multiply_torch)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_Exp_torch(benchmark::State& state) {
  const auto a = torch_big(-10, 10);
  for (auto _ : state) benchmark::DoNotOptimize(torch::exp(a));
  set_bytes(state, 2.0 * 4 * kBig);
}
BENCHMARK(BM_Exp_torch)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_Exp_torch_out(benchmark::State& state) {
  const auto a = torch_big(-10, 10);
  auto c = torch::empty({kBig});
  for (auto _ : state) {
    torch::exp_out(c, a);
    benchmark::ClobberMemory();
  }
  set_bytes(state, 2.0 * 4 * kBig);
}
BENCHMARK(BM_Exp_torch_out)->UseRealTime()->Unit(benchmark::kMillisecond);
#endif

}  // namespace

BENCHMARK_MAIN();
