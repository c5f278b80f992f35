// float32 GEMM side by side in one run: tf::matmul, oneDNN's dnnl_sgemm and OpenBLAS's
// cblas_sgemm called directly, libtorch's torch::mm (when built with it), and the fp32 FMA peak
// of this machine measured by a register-only FMA loop on the same threads.
//
//   OMP_NUM_THREADS=2 ./bench_matmul --benchmark_repetitions=5 \
//       --benchmark_report_aggregates_only=true
//
// Counters: GFLOP/s = 2 N^3 per product; pct_peak = GFLOP/s as a percentage of the FMA peak
// measured at start-up (also printed in the context); rel_err = max |C - C_ref| / max |C_ref|
// against a float64 OpenBLAS reference.
#include <benchmark/benchmark.h>
#include <cblas.h>
#include <dnnl.h>
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#ifdef TAPEFLOW_HAVE_TORCH
#include <torch/torch.h>
#endif

#include "core/device.h"
#include "core/parallel.h"
#include "ops/factory.h"
#include "ops/linalg.h"

namespace tf = tapeflow;

namespace {

// ---- fp32 FMA peak: independent FMA chains kept in registers ----

// 16 chains x 16 lanes x 2 flops = 512 flops per iteration.
__attribute__((target("avx512f"), noinline)) float fma_chains_avx512(int64_t iters, float seed) {
  __m512 acc[16];
  for (int i = 0; i < 16; ++i) acc[i] = _mm512_set1_ps(seed + 0.01f * i);
  const __m512 m = _mm512_set1_ps(0.9999999f), a = _mm512_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) acc[i] = _mm512_fmadd_ps(acc[i], m, a);
  }
  __m512 s = acc[0];
  for (int i = 1; i < 16; ++i) s = _mm512_add_ps(s, acc[i]);
  return _mm512_reduce_add_ps(s);
}
// 12 chains x 8 lanes x 2 flops = 192 flops per iteration.
__attribute__((target("avx2,fma"), noinline)) float fma_chains_avx2(int64_t iters, float seed) {
  __m256 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_ps(seed + 0.01f * i);
  const __m256 m = _mm256_set1_ps(0.9999999f), a = _mm256_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) acc[i] = _mm256_fmadd_ps(acc[i], m, a);
  }
  __m256 s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm256_add_ps(s, acc[i]);
  float out[8];
  _mm256_storeu_ps(out, s);
  return out[0] + out[1] + out[2] + out[3] + out[4] + out[5] + out[6] + out[7];
}

bool has_avx512() { return __builtin_cpu_supports("avx512f"); }
double flops_per_iter() { return has_avx512() ? 512.0 : 192.0; }

// Runs the FMA loop on every OpenMP thread; returns the flops done.
double run_fma_peak(int64_t iters) {
  float sink = 0;
  int threads = 1;
#pragma omp parallel reduction(+ : sink)
  {
#pragma omp single
    threads = omp_get_num_threads();
    sink += has_avx512() ? fma_chains_avx512(iters, 1.0f + omp_get_thread_num())
                         : fma_chains_avx2(iters, 1.0f + omp_get_thread_num());
  }
  benchmark::DoNotOptimize(sink);
  return flops_per_iter() * static_cast<double>(iters) * threads;
}

double g_peak_gflops = 0;  // measured in main()

double measure_peak_gflops() {
  run_fma_peak(1 << 20);  // warm up
  double best = 0;
  for (int r = 0; r < 7; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    const double flops = run_fma_peak(1 << 23);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, flops / s / 1e9);
  }
  return best;
}

void BM_FmaPeak(benchmark::State& state) {
  const int64_t iters = 1 << 22;
  double flops = 0;
  for (auto _ : state) flops = run_fma_peak(iters);
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["pct_peak"] = benchmark::Counter(flops / (g_peak_gflops * 1e9) * 100,
                                                  benchmark::Counter::kIsIterationInvariantRate);
}

// ---- operands and the float64 reference ----

struct Operands {
  std::vector<float> a, b;
  std::vector<double> ref;  // a @ b in float64, computed on first use
};

Operands& operands(int64_t n) {
  static std::map<int64_t, Operands> cache;
  auto it = cache.find(n);
  if (it != cache.end()) return it->second;
  Operands& o = cache[n];
  std::mt19937 gen(static_cast<unsigned>(n));
  std::uniform_real_distribution<float> d(-1, 1);
  o.a.resize(n * n);
  o.b.resize(n * n);
  for (float& x : o.a) x = d(gen);
  for (float& x : o.b) x = d(gen);
  return o;
}

const std::vector<double>& reference(int64_t n) {
  Operands& o = operands(n);
  if (o.ref.empty()) {
    std::vector<double> a(o.a.begin(), o.a.end()), b(o.b.begin(), o.b.end());
    o.ref.resize(n * n);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(n),
                static_cast<int>(n), static_cast<int>(n), 1.0, a.data(), static_cast<int>(n),
                b.data(), static_cast<int>(n), 0.0, o.ref.data(), static_cast<int>(n));
  }
  return o.ref;
}

void finish(benchmark::State& state, int64_t n, const float* c) {
  const double flops = 2.0 * n * n * n;
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["pct_peak"] = benchmark::Counter(flops / (g_peak_gflops * 1e9) * 100,
                                                  benchmark::Counter::kIsIterationInvariantRate);
  const std::vector<double>& ref = reference(n);
  double err = 0, scale = 0;
  for (int64_t i = 0; i < n * n; ++i) {
    err = std::max(err, std::abs(c[i] - ref[i]));
    scale = std::max(scale, std::abs(ref[i]));
  }
  state.counters["rel_err"] = err / std::max(scale, 1e-30);
}

void BM_TfMatmul(benchmark::State& state) {
  const int64_t n = state.range(0);
  Operands& o = operands(n);
  tf::DeviceScope scope("/cpu:0");
  const tf::Tensor a = tf::convert_to_tensor(o.a, {n, n});
  const tf::Tensor b = tf::convert_to_tensor(o.b, {n, n});
  tf::Tensor c;
  for (auto _ : state) {
    c = tf::matmul(a, b);
    benchmark::DoNotOptimize(c.raw_data());
  }
  finish(state, n, c.data<float>());
}

void BM_OneDnnSgemm(benchmark::State& state) {
  const int64_t n = state.range(0);
  Operands& o = operands(n);
  std::vector<float> c(n * n);
  for (auto _ : state) {
    dnnl_sgemm('N', 'N', n, n, n, 1.0f, o.a.data(), n, o.b.data(), n, 0.0f, c.data(), n);
    benchmark::ClobberMemory();
  }
  finish(state, n, c.data());
}

void BM_OpenBlasSgemm(benchmark::State& state) {
  const int64_t n = state.range(0);
  const int ni = static_cast<int>(n);
  Operands& o = operands(n);
  std::vector<float> c(n * n);
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, ni, ni, ni, 1.0f, o.a.data(), ni,
                o.b.data(), ni, 0.0f, c.data(), ni);
    benchmark::ClobberMemory();
  }
  finish(state, n, c.data());
}

#ifdef TAPEFLOW_HAVE_TORCH
void BM_TorchMm(benchmark::State& state) {
  const int64_t n = state.range(0);
  Operands& o = operands(n);
  torch::NoGradGuard guard;
  const torch::Tensor a = torch::from_blob(o.a.data(), {n, n}, torch::kFloat32).clone();
  const torch::Tensor b = torch::from_blob(o.b.data(), {n, n}, torch::kFloat32).clone();
  torch::Tensor c;
  for (auto _ : state) {
    c = torch::mm(a, b);
    benchmark::DoNotOptimize(c.data_ptr());
  }
  finish(state, n, c.data_ptr<float>());
}
#endif

// Many small products in one call (batch 512 of 32x32 @ 32x32): the per-thread path.
void BM_TfMatmulBatched32(benchmark::State& state) {
  const int64_t batch = 512, n = 32;
  std::vector<float> v(batch * n * n);
  std::mt19937 gen(5);
  std::uniform_real_distribution<float> d(-1, 1);
  for (float& x : v) x = d(gen);
  tf::DeviceScope scope("/cpu:0");
  const tf::Tensor a = tf::convert_to_tensor(v, {batch, n, n});
  for (auto _ : state) {
    tf::Tensor c = tf::matmul(a, a);
    benchmark::DoNotOptimize(c.raw_data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * batch * n * n * n / 1e9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

#ifdef TAPEFLOW_HAVE_TORCH
void BM_TorchBmm32(benchmark::State& state) {
  const int64_t batch = 512, n = 32;
  torch::NoGradGuard guard;
  const torch::Tensor a = torch::rand({batch, n, n});
  for (auto _ : state) {
    torch::Tensor c = torch::bmm(a, a);
    benchmark::DoNotOptimize(c.data_ptr());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * batch * n * n * n / 1e9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}
#endif

// Best-of-repetitions rows besides the median: the machine is shared, and other work only ever
// slows a run down ("_max" holds the best rate, "_min" the best time).
void best_of(benchmark::internal::Benchmark* b) {
  b->ComputeStatistics("max", [](const std::vector<double>& v) {
    return *std::max_element(v.begin(), v.end());
  });
  b->ComputeStatistics("min", [](const std::vector<double>& v) {
    return *std::min_element(v.begin(), v.end());
  });
}

// Other dtypes through tf::matmul (float64 on OpenBLAS dgemm, int32 on the loop kernel) and
// OpenBLAS's dgemm directly.
void tf_matmul_dtype(benchmark::State& state, tf::DType dt) {
  const int64_t n = state.range(0);
  std::vector<double> v(n * n);
  std::mt19937 gen(9);
  std::uniform_int_distribution<int> d(-4, 4);
  for (double& x : v) x = d(gen);
  tf::DeviceScope scope("/cpu:0");
  const tf::Tensor a = tf::detail::from_doubles(v, {n, n}, dt);
  for (auto _ : state) {
    tf::Tensor c = tf::matmul(a, a);
    benchmark::DoNotOptimize(c.raw_data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * n * n * n / 1e9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}
void BM_TfMatmulFloat64(benchmark::State& state) { tf_matmul_dtype(state, tf::float64); }
void BM_TfMatmulInt32(benchmark::State& state) { tf_matmul_dtype(state, tf::int32); }
void BM_TfMatmulBFloat16(benchmark::State& state) { tf_matmul_dtype(state, tf::bfloat16); }

void BM_OpenBlasDgemm(benchmark::State& state) {
  const int64_t n = state.range(0);
  const int ni = static_cast<int>(n);
  std::vector<double> a(n * n, 0.5), c(n * n);
  for (auto _ : state) {
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, ni, ni, ni, 1.0, a.data(), ni,
                a.data(), ni, 0.0, c.data(), ni);
    benchmark::ClobberMemory();
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * n * n * n / 1e9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

void sizes(benchmark::internal::Benchmark* b) {
  for (int64_t n : {2, 8, 32, 64, 128, 256, 512, 1024, 2048, 4096}) b->Arg(n);
  b->UseRealTime()->Unit(benchmark::kMicrosecond);
  best_of(b);
}

}  // namespace

BENCHMARK(BM_FmaPeak)->UseRealTime()->Unit(benchmark::kMillisecond)->Apply(best_of);
BENCHMARK(BM_TfMatmul)->Apply(sizes);
BENCHMARK(BM_OneDnnSgemm)->Apply(sizes);
BENCHMARK(BM_OpenBlasSgemm)->Apply(sizes);
#ifdef TAPEFLOW_HAVE_TORCH
BENCHMARK(BM_TorchMm)->Apply(sizes);
#endif
BENCHMARK(BM_TfMatmulFloat64)->Arg(1024)->UseRealTime()->Unit(benchmark::kMicrosecond)->Apply(best_of);
BENCHMARK(BM_OpenBlasDgemm)->Arg(1024)->UseRealTime()->Unit(benchmark::kMicrosecond)->Apply(best_of);
BENCHMARK(BM_TfMatmulBFloat16)->Arg(1024)->UseRealTime()->Unit(benchmark::kMicrosecond)->Apply(best_of);
BENCHMARK(BM_TfMatmulInt32)->Arg(512)->UseRealTime()->Unit(benchmark::kMicrosecond)->Apply(best_of);
BENCHMARK(BM_TfMatmulBatched32)->UseRealTime()->Unit(benchmark::kMicrosecond)->Apply(best_of);
#ifdef TAPEFLOW_HAVE_TORCH
BENCHMARK(BM_TorchBmm32)->UseRealTime()->Unit(benchmark::kMicrosecond)->Apply(best_of);
#endif

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
#ifdef TAPEFLOW_HAVE_TORCH
  torch::set_num_threads(tf::detail::num_threads());
#endif
  g_peak_gflops = measure_peak_gflops();
  const char* core = openblas_get_corename();
  benchmark::AddCustomContext("openblas_core", core ? core : "unknown");
  benchmark::AddCustomContext("gemm_backend", tf::detail::gemm_backend_info());
  benchmark::AddCustomContext("threads", std::to_string(tf::detail::num_threads()));
  benchmark::AddCustomContext("fma_peak_gflops", std::to_string(g_peak_gflops));
  benchmark::AddCustomContext("fma_peak_isa", has_avx512() ? "avx512f" : "avx2");
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
