// float32 matrix inverse side by side in one run: tf::linalg::inv, libtorch's torch::inverse
// (when built with it), and OpenBLAS's LAPACK called directly two ways: getrf + getri, and
// getrf + getrs against the identity. Also the LU alone (tf::linalg::det vs sgetrf).
//
//   OMP_NUM_THREADS=2 ./bench_inverse --benchmark_repetitions=5 \
//       --benchmark_report_aggregates_only=true
//
// Counters: GFLOP/s uses the nominal count of LU + two triangular solves against the identity,
// (2/3 + 2) N^3 = 8/3 N^3, for every inverse row (so the rates compare as 1/time; getri itself
// does 2 N^3 in all), and 2/3 N^3 for the LU rows. resid = max |A X - I| for the inverses.
#include <benchmark/benchmark.h>
#include <cblas.h>
#include <dnnl.h>
#include <omp.h>

#include <algorithm>
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

extern "C" {
void sgetrf_(const int* m, const int* n, float* a, const int* lda, int* ipiv, int* info);
void sgetri_(const int* n, float* a, const int* lda, const int* ipiv, float* work,
             const int* lwork, int* info);
void sgetrs_(const char* trans, const int* n, const int* nrhs, const float* a, const int* lda,
             const int* ipiv, float* b, const int* ldb, int* info, size_t trans_len);
}

namespace tf = tapeflow;

namespace {

// Random well-conditioned matrix: uniform [-1, 1) plus sqrt(n) on the diagonal.
const std::vector<float>& matrix(int64_t n) {
  static std::map<int64_t, std::vector<float>> cache;
  auto it = cache.find(n);
  if (it != cache.end()) return it->second;
  std::vector<float>& a = cache[n];
  a.resize(n * n);
  std::mt19937 gen(static_cast<unsigned>(n));
  std::uniform_real_distribution<float> d(-1, 1);
  for (float& x : a) x = d(gen);
  for (int64_t i = 0; i < n; ++i) a[i * n + i] += std::sqrt(static_cast<float>(n));
  return a;
}

void inverse_counters(benchmark::State& state, int64_t n, const float* x) {
  state.counters["GFLOP/s"] = benchmark::Counter(8.0 / 3.0 * n * n * n / 1e9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
  // max |A X - I| (X row-major, as is A)
  const std::vector<float>& a = matrix(n);
  std::vector<float> r(n * n);
  dnnl_sgemm('N', 'N', n, n, n, 1.0f, a.data(), n, x, n, 0.0f, r.data(), n);
  double resid = 0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j)
      resid = std::max(resid, std::abs(r[i * n + j] - (i == j ? 1.0 : 0.0)));
  state.counters["resid"] = resid;
}

void BM_TfInv(benchmark::State& state) {
  const int64_t n = state.range(0);
  tf::DeviceScope scope("/cpu:0");
  const tf::Tensor a = tf::convert_to_tensor(matrix(n), {n, n});
  tf::Tensor x;
  for (auto _ : state) {
    x = tf::linalg::inv(a);
    benchmark::DoNotOptimize(x.raw_data());
  }
  inverse_counters(state, n, x.data<float>());
}

#ifdef TAPEFLOW_HAVE_TORCH
void BM_TorchInverse(benchmark::State& state) {
  const int64_t n = state.range(0);
  torch::NoGradGuard guard;
  std::vector<float> copy = matrix(n);
  const torch::Tensor a = torch::from_blob(copy.data(), {n, n}, torch::kFloat32).clone();
  torch::Tensor x;
  for (auto _ : state) {
    x = torch::inverse(a);
    benchmark::DoNotOptimize(x.data_ptr());
  }
  x = x.contiguous();
  inverse_counters(state, n, x.data_ptr<float>());
}
#endif

// Column-major view of the row-major buffer (A^T): inv(A^T) column-major = inv(A) row-major.
void BM_OpenBlasGetrfGetri(benchmark::State& state) {
  const int64_t n = state.range(0);
  const int ni = static_cast<int>(n);
  std::vector<float> x(n * n), work(static_cast<size_t>(n) * 64);
  std::vector<int> ipiv(n);
  const int lwork = static_cast<int>(work.size());
  for (auto _ : state) {
    x = matrix(n);
    int info = 0;
    sgetrf_(&ni, &ni, x.data(), &ni, ipiv.data(), &info);
    sgetri_(&ni, x.data(), &ni, ipiv.data(), work.data(), &lwork, &info);
    benchmark::ClobberMemory();
  }
  inverse_counters(state, n, x.data());
}

void BM_OpenBlasGetrfGetrs(benchmark::State& state) {
  const int64_t n = state.range(0);
  const int ni = static_cast<int>(n);
  std::vector<float> lu(n * n), x(n * n);
  std::vector<int> ipiv(n);
  for (auto _ : state) {
    lu = matrix(n);
    int info = 0;
    sgetrf_(&ni, &ni, lu.data(), &ni, ipiv.data(), &info);
    std::fill(x.begin(), x.end(), 0.0f);
    for (int64_t i = 0; i < n; ++i) x[i * n + i] = 1.0f;
    sgetrs_("N", &ni, &ni, lu.data(), &ni, ipiv.data(), x.data(), &ni, &info, 1);
    benchmark::ClobberMemory();
  }
  inverse_counters(state, n, x.data());
}

// ---- LU alone ----

void lu_counters(benchmark::State& state, int64_t n) {
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 / 3.0 * n * n * n / 1e9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

void BM_TfDet(benchmark::State& state) {
  const int64_t n = state.range(0);
  tf::DeviceScope scope("/cpu:0");
  const tf::Tensor a = tf::convert_to_tensor(matrix(n), {n, n});
  for (auto _ : state) {
    tf::Tensor d = tf::linalg::det(a);
    benchmark::DoNotOptimize(d.raw_data());
  }
  lu_counters(state, n);
}

void BM_OpenBlasGetrf(benchmark::State& state) {
  const int64_t n = state.range(0);
  const int ni = static_cast<int>(n);
  std::vector<float> lu(n * n);
  std::vector<int> ipiv(n);
  for (auto _ : state) {
    lu = matrix(n);
    int info = 0;
    sgetrf_(&ni, &ni, lu.data(), &ni, ipiv.data(), &info);
    benchmark::ClobberMemory();
  }
  lu_counters(state, n);
}

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

void sizes(benchmark::internal::Benchmark* b) {
  for (int64_t n : {256, 1024, 2048, 4096}) b->Arg(n);
  b->UseRealTime()->Unit(benchmark::kMillisecond);
  best_of(b);
}

}  // namespace

BENCHMARK(BM_TfInv)->Apply(sizes);
#ifdef TAPEFLOW_HAVE_TORCH
BENCHMARK(BM_TorchInverse)->Apply(sizes);
#endif
BENCHMARK(BM_OpenBlasGetrfGetri)->Apply(sizes);
BENCHMARK(BM_OpenBlasGetrfGetrs)->Apply(sizes);
BENCHMARK(BM_TfDet)->Apply(sizes);
BENCHMARK(BM_OpenBlasGetrf)->Apply(sizes);

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
#ifdef TAPEFLOW_HAVE_TORCH
  torch::set_num_threads(tf::detail::num_threads());
#endif
  const char* core = openblas_get_corename();
  benchmark::AddCustomContext("openblas_core", core ? core : "unknown");
  benchmark::AddCustomContext("gemm_backend", tf::detail::gemm_backend_info());
  benchmark::AddCustomContext("threads", std::to_string(tf::detail::num_threads()));
  benchmark::AddCustomContext("inverse_flops", "8/3 N^3 (LU 2/3 N^3 + two solves 2 N^3)");
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
