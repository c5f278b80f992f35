// Elementwise ops: dispatch cost on tiny tensors and bandwidth on 16M float32, against a plain
// STREAM triad loop (the machine's bandwidth) and libtorch.
//   OMP_NUM_THREADS=2 ./bench_elementwise
// GB/s counts the bytes each iteration must move (inputs read + output written). The machine is
// shared and its load changes from second to second, so every 16M benchmark runs a STREAM triad
// right after each op call and reports both rates from the same time window: triad_GB/s, and
// vs_triad = GB/s / triad_GB/s (the figure to compare).
#include <benchmark/benchmark.h>
#include <omp.h>

#include <chrono>
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

// ---- the reference: STREAM triad a = b + s * c ----

// kBig floats per array, tapeflow's pool size, buffers made once and first touched by the
// threads that use them.
struct Triad {
  std::unique_ptr<float[]> a{new float[kBig]}, b{new float[kBig]}, c{new float[kBig]};
  int nt = tf::detail::num_threads();
  Triad() {
    float *pa = a.get(), *pb = b.get(), *pc = c.get();
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t i = 0; i < kBig; ++i) {
      pa[i] = 0.f;
      pb[i] = 1.f;
      pc[i] = 2.f;
    }
  }
  void run() {
    float* pa = a.get();
    const float* pb = b.get();
    const float* pc = c.get();
    const float s = 3.f;
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t i = 0; i < kBig; ++i) pa[i] = pb[i] + s * pc[i];
    benchmark::ClobberMemory();
  }
  static constexpr double kBytes = 3.0 * 4 * kBig;
};
Triad& triad() {
  static Triad t;
  return t;
}

void BM_StreamTriad(benchmark::State& state) {
  auto& tr = triad();
  for (auto _ : state) tr.run();
  state.counters["threads"] = tr.nt;
  state.counters["GB/s"] =
      benchmark::Counter(Triad::kBytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_StreamTriad)->UseRealTime()->Unit(benchmark::kMillisecond);

// Times op (the benchmark's time) and, right after each call, the triad.
template <class Op>
void paired_with_triad(benchmark::State& state, double op_bytes, Op&& op) {
  using clock = std::chrono::steady_clock;
  auto& tr = triad();
  double t_op = 0, t_tr = 0;
  for (auto _ : state) {
    const auto t0 = clock::now();
    op();
    const auto t1 = clock::now();
    tr.run();
    const auto t2 = clock::now();
    const double d_op = std::chrono::duration<double>(t1 - t0).count();
    t_op += d_op;
    t_tr += std::chrono::duration<double>(t2 - t1).count();
    state.SetIterationTime(d_op);
  }
  const double it = static_cast<double>(state.iterations());
  const double op_rate = op_bytes * it / t_op * 1e-9;
  const double tr_rate = Triad::kBytes * it / t_tr * 1e-9;
  state.counters["GB/s"] = op_rate;
  state.counters["triad_GB/s"] = tr_rate;
  state.counters["vs_triad"] = op_rate / tr_rate;
}
#define TF_BENCH_PAIRED(NAME) BENCHMARK(NAME)->UseManualTime()->Unit(benchmark::kMillisecond)

constexpr double kBinaryBytes = 3.0 * 4 * kBig;  // two inputs, one output
constexpr double kUnaryBytes = 2.0 * 4 * kBig;   // one input, one output

// STREAM scale a = s * b: what an op that reads one array and writes one can reach.
void BM_StreamScale(benchmark::State& state) {
  const int nt = tf::detail::num_threads();
  std::unique_ptr<float[]> a(new float[kBig]), b(new float[kBig]);
  float* pa = a.get();
  float* pb = b.get();
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t i = 0; i < kBig; ++i) {
    pa[i] = 0.f;
    pb[i] = 1.f;
  }
  paired_with_triad(state, kUnaryBytes, [&] {
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t i = 0; i < kBig; ++i) pa[i] = 3.f * pb[i];
    benchmark::ClobberMemory();
  });
}
TF_BENCH_PAIRED(BM_StreamScale);

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

// ---- 16M float32: tapeflow ----

void BM_Add_tapeflow(benchmark::State& state) {
  const auto a = big_input(-1, 1, 1), b = big_input(-1, 1, 2);
  paired_with_triad(state, kBinaryBytes, [&] { benchmark::DoNotOptimize(tf::add(a, b)); });
}
TF_BENCH_PAIRED(BM_Add_tapeflow);

void BM_Multiply_tapeflow(benchmark::State& state) {
  const auto a = big_input(-1, 1, 1), b = big_input(-1, 1, 2);
  paired_with_triad(state, kBinaryBytes, [&] { benchmark::DoNotOptimize(tf::multiply(a, b)); });
}
TF_BENCH_PAIRED(BM_Multiply_tapeflow);

void BM_Exp_tapeflow(benchmark::State& state) {
  const auto a = big_input(-10, 10);
  paired_with_triad(state, kUnaryBytes, [&] { benchmark::DoNotOptimize(tf::exp(a)); });
}
TF_BENCH_PAIRED(BM_Exp_tapeflow);

void BM_Log_tapeflow(benchmark::State& state) {
  const auto a = big_input(1e-3f, 100.f);
  paired_with_triad(state, kUnaryBytes, [&] { benchmark::DoNotOptimize(tf::log(a)); });
}
TF_BENCH_PAIRED(BM_Log_tapeflow);

void BM_Sigmoid_tapeflow(benchmark::State& state) {
  const auto a = big_input(-10, 10);
  paired_with_triad(state, kUnaryBytes, [&] { benchmark::DoNotOptimize(tf::sigmoid(a)); });
}
TF_BENCH_PAIRED(BM_Sigmoid_tapeflow);

void BM_Maximum_tapeflow(benchmark::State& state) {
  const auto a = big_input(-1, 1, 1), b = big_input(-1, 1, 2);
  paired_with_triad(state, kBinaryBytes, [&] { benchmark::DoNotOptimize(tf::maximum(a, b)); });
}
TF_BENCH_PAIRED(BM_Maximum_tapeflow);

// The other kernel paths: a C++ scalar operand, a row broadcast (4096 x 4096 + 4096) and a
// 4-channel bias ((16M / 4) x 4 + 4, the tiled short-row path).
void BM_AddScalar_tapeflow(benchmark::State& state) {
  const auto a = big_input(-1, 1);
  paired_with_triad(state, kUnaryBytes, [&] { benchmark::DoNotOptimize(a + 2.0f); });
}
TF_BENCH_PAIRED(BM_AddScalar_tapeflow);

void BM_AddRowBroadcast_tapeflow(benchmark::State& state) {
  const auto a = host_uniform({4096, 4096}, -1, 1, 1);
  const auto b = host_uniform({4096}, -1, 1, 2);
  paired_with_triad(state, kUnaryBytes, [&] { benchmark::DoNotOptimize(tf::add(a, b)); });
}
TF_BENCH_PAIRED(BM_AddRowBroadcast_tapeflow);

void BM_AddShortRows_tapeflow(benchmark::State& state) {
  const auto a = host_uniform({kBig / 4, 4}, -1, 1, 1);
  const auto b = host_uniform({4}, -1, 1, 2);
  paired_with_triad(state, kUnaryBytes, [&] { benchmark::DoNotOptimize(tf::add(a, b)); });
}
TF_BENCH_PAIRED(BM_AddShortRows_tapeflow);

// Kernels that were branchy or scalar until 2026-12-01 (a branch per element that mispredicts
// on random data, or the C library's scalar function), kept here so that a regression shows:
// where on a random condition (both operands full size, and a scalar 0 as dropout uses it),
// log1p, and the float16 conversions (a cast each way and a float16 add: 2-byte elements).
void BM_WhereRandom_tapeflow(benchmark::State& state) {
  const auto a = big_input(-1, 1, 1), b = big_input(-1, 1, 2);
  const auto c = tf::greater(a, b);
  paired_with_triad(state, 13.0 * kBig, [&] { benchmark::DoNotOptimize(tf::where(c, a, b)); });
}
TF_BENCH_PAIRED(BM_WhereRandom_tapeflow);

void BM_WhereScalar_tapeflow(benchmark::State& state) {
  const auto a = big_input(-1, 1, 1), b = big_input(-1, 1, 2);
  const auto c = tf::greater(a, b);
  const auto zero = tf::Tensor(0.0f);
  paired_with_triad(state, 9.0 * kBig, [&] { benchmark::DoNotOptimize(tf::where(c, a, zero)); });
}
TF_BENCH_PAIRED(BM_WhereScalar_tapeflow);

void BM_Log1p_tapeflow(benchmark::State& state) {
  const auto a = big_input(-0.9f, 100.f);
  paired_with_triad(state, kUnaryBytes, [&] { benchmark::DoNotOptimize(tf::log1p(a)); });
}
TF_BENCH_PAIRED(BM_Log1p_tapeflow);

void BM_CastToFloat16_tapeflow(benchmark::State& state) {
  const auto a = big_input(-100, 100);
  paired_with_triad(state, 6.0 * kBig,
                    [&] { benchmark::DoNotOptimize(tf::cast(a, tf::float16)); });
}
TF_BENCH_PAIRED(BM_CastToFloat16_tapeflow);

void BM_CastFromFloat16_tapeflow(benchmark::State& state) {
  const auto a = tf::cast(big_input(-100, 100), tf::float16);
  paired_with_triad(state, 6.0 * kBig,
                    [&] { benchmark::DoNotOptimize(tf::cast(a, tf::float32)); });
}
TF_BENCH_PAIRED(BM_CastFromFloat16_tapeflow);

void BM_AddFloat16_tapeflow(benchmark::State& state) {
  const auto a = tf::cast(big_input(-1, 1, 1), tf::float16);
  const auto b = tf::cast(big_input(-1, 1, 2), tf::float16);
  paired_with_triad(state, 6.0 * kBig, [&] { benchmark::DoNotOptimize(tf::add(a, b)); });
}
TF_BENCH_PAIRED(BM_AddFloat16_tapeflow);

// ---- math functions on 64K elements (in cache: the functions' cost, not memory's) ----

constexpr int64_t kSmall = int64_t{1} << 16;

void math_64k(benchmark::State& state, tf::Tensor (*op)(const tf::Tensor&), tf::DType dtype,
              float lo, float hi) {
  const auto a = tf::cast(host_uniform({kSmall}, lo, hi, 5), dtype);
  for (auto _ : state) benchmark::DoNotOptimize(op(a));
  state.SetItemsProcessed(state.iterations() * kSmall);
}
#define TF_MATH_64K(NAME, OP, DTYPE, LO, HI) \
  BENCHMARK_CAPTURE(math_64k, NAME, OP, DTYPE, LO, HI)->Unit(benchmark::kMicrosecond)
TF_MATH_64K(Exp64_tapeflow, &tf::exp, tf::float64, -3, 3);
TF_MATH_64K(Tanh64_tapeflow, &tf::tanh, tf::float64, -3, 3);
TF_MATH_64K(Sigmoid64_tapeflow, &tf::sigmoid, tf::float64, -3, 3);
TF_MATH_64K(Log64_tapeflow, &tf::log, tf::float64, 1e-3, 100);
TF_MATH_64K(Log1p64_tapeflow, &tf::log1p, tf::float64, -0.9, 100);
TF_MATH_64K(Sin32_tapeflow, &tf::sin, tf::float32, -10, 10);
TF_MATH_64K(Cos32_tapeflow, &tf::cos, tf::float32, -10, 10);
TF_MATH_64K(Sin64_tapeflow, &tf::sin, tf::float64, -10, 10);
TF_MATH_64K(Cos64_tapeflow, &tf::cos, tf::float64, -10, 10);

#ifdef TAPEFLOW_HAVE_TORCH
// Into a preallocated output, as tapeflow's caching allocator hands back the same block.
void math_64k_torch(benchmark::State& state,
                    torch::Tensor& (*op)(torch::Tensor&, const torch::Tensor&),
                    torch::ScalarType dtype, double lo, double hi) {
  at::set_num_threads(tf::detail::num_threads());
  const auto a = torch::rand({kSmall}, dtype) * (hi - lo) + lo;
  auto c = torch::empty({kSmall}, dtype);
  for (auto _ : state) {
    op(c, a);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * kSmall);
}
#define TF_MATH_64K_TORCH(NAME, OP, DTYPE, LO, HI) \
  BENCHMARK_CAPTURE(math_64k_torch, NAME, OP, DTYPE, LO, HI)->Unit(benchmark::kMicrosecond)
TF_MATH_64K_TORCH(Exp64_torch, &torch::exp_out, torch::kFloat64, -3, 3);
TF_MATH_64K_TORCH(Tanh64_torch, &torch::tanh_out, torch::kFloat64, -3, 3);
TF_MATH_64K_TORCH(Sigmoid64_torch, &torch::sigmoid_out, torch::kFloat64, -3, 3);
TF_MATH_64K_TORCH(Log64_torch, &torch::log_out, torch::kFloat64, 1e-3, 100);
TF_MATH_64K_TORCH(Log1p64_torch, &torch::log1p_out, torch::kFloat64, -0.9, 100);
TF_MATH_64K_TORCH(Sin32_torch, &torch::sin_out, torch::kFloat32, -10, 10);
TF_MATH_64K_TORCH(Cos32_torch, &torch::cos_out, torch::kFloat32, -10, 10);
TF_MATH_64K_TORCH(Sin64_torch, &torch::sin_out, torch::kFloat64, -10, 10);
TF_MATH_64K_TORCH(Cos64_torch, &torch::cos_out, torch::kFloat64, -10, 10);
#undef TF_MATH_64K_TORCH
#endif
#undef TF_MATH_64K

// ---- 16M float32: libtorch ----

#ifdef TAPEFLOW_HAVE_TORCH
torch::Tensor torch_big(double lo, double hi) {
  at::set_num_threads(tf::detail::num_threads());
  return torch::rand({kBig}) * (hi - lo) + lo;
}

void BM_Add_torch(benchmark::State& state) {
  const auto a = torch_big(-1, 1), b = torch_big(-1, 1);
  paired_with_triad(state, kBinaryBytes, [&] { benchmark::DoNotOptimize(torch::add(a, b)); });
}
TF_BENCH_PAIRED(BM_Add_torch);

// Into a preallocated output (libtorch's allocator does not cache large CPU blocks, so the
// allocating calls above page-fault a fresh output every time).
void BM_Add_torch_out(benchmark::State& state) {
  const auto a = torch_big(-1, 1), b = torch_big(-1, 1);
  auto c = torch::empty({kBig});
  paired_with_triad(state, kBinaryBytes, [&] {
    torch::add_out(c, a, b);
    benchmark::ClobberMemory();
  });
}
TF_BENCH_PAIRED(BM_Add_torch_out);

void BM_Multiply_torch(benchmark::State& state) {
  const auto a = torch_big(-1, 1), b = torch_big(-1, 1);
  paired_with_triad(state, kBinaryBytes, [&] { benchmark::DoNotOptimize(torch::mul(a, b)); });
}
TF_BENCH_PAIRED(BM_Multiply_torch);

void BM_Exp_torch(benchmark::State& state) {
  const auto a = torch_big(-10, 10);
  paired_with_triad(state, kUnaryBytes, [&] { benchmark::DoNotOptimize(torch::exp(a)); });
}
TF_BENCH_PAIRED(BM_Exp_torch);

void BM_Exp_torch_out(benchmark::State& state) {
  const auto a = torch_big(-10, 10);
  auto c = torch::empty({kBig});
  paired_with_triad(state, kUnaryBytes, [&] {
    torch::exp_out(c, a);
    benchmark::ClobberMemory();
  });
}
TF_BENCH_PAIRED(BM_Exp_torch_out);

void BM_Log_torch_out(benchmark::State& state) {
  const auto a = torch_big(1e-3, 100);
  auto c = torch::empty({kBig});
  paired_with_triad(state, kUnaryBytes, [&] {
    torch::log_out(c, a);
    benchmark::ClobberMemory();
  });
}
TF_BENCH_PAIRED(BM_Log_torch_out);
#endif

}  // namespace

BENCHMARK_MAIN();
