// tf.linalg's decompositions side by side in one run: tapeflow's cholesky, eigh, qr, svd,
// triangular_solve, slogdet and sqrtm against the same LAPACK routines called directly (for
// sqrtm: its Schur decomposition dgees alone, the lower bound) (OpenBLAS's
// LAPACK, which tapeflow's CPU kernels call), on a copy of the same float64 matrix. The ratio
// is tapeflow's overhead: its checks, the copy into a new tensor, the row- to column-major
// transposes, the workspace queries. Compare TF 2.21 at the same sizes with
// bench/compare/linalg_tf.py.
//
//   OMP_NUM_THREADS=2 ./bench_linalg --benchmark_repetitions=5 \
//       --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <vector>

#include "ops/factory.h"
#include "ops/linalg_decomp.h"
#include "ops/dispatch.h"
#include "ops/linalg_more.h"
#include "ops/sqrtm.h"

extern "C" {
void dpotrf_(const char* uplo, const int* n, double* a, const int* lda, int* info, size_t);
void dsyevd_(const char* jobz, const char* uplo, const int* n, double* a, const int* lda, double* w,
             double* work, const int* lwork, int* iwork, const int* liwork, int* info, size_t,
             size_t);
void dgeqrf_(const int* m, const int* n, double* a, const int* lda, double* tau, double* work,
             const int* lwork, int* info);
void dorgqr_(const int* m, const int* n, const int* k, double* a, const int* lda, const double* tau,
             double* work, const int* lwork, int* info);
void dgesdd_(const char* jobz, const int* m, const int* n, double* a, const int* lda, double* s,
             double* u, const int* ldu, double* vt, const int* ldvt, double* work, const int* lwork,
             int* iwork, int* info, size_t);
void dgetrf_(const int* m, const int* n, double* a, const int* lda, int* ipiv, int* info);
void dgees_(const char* jobvs, const char* sort, int (*select)(const double*, const double*),
            const int* n, double* a, const int* lda, int* sdim, double* wr, double* wi, double* vs,
            const int* ldvs, double* work, const int* lwork, int* bwork, int* info, size_t, size_t);
}

namespace tf = tapeflow;

namespace {

// A symmetric positive-definite matrix: B B^T / n + I with B uniform in [-1, 1).
const std::vector<double>& spd(int n) {
  static std::map<int, std::vector<double>> cache;
  auto it = cache.find(n);
  if (it != cache.end()) return it->second;
  std::vector<double> b(static_cast<size_t>(n) * n);
  std::mt19937 gen(static_cast<unsigned>(n));
  std::uniform_real_distribution<double> d(-1, 1);
  for (double& x : b) x = d(gen);
  std::vector<double>& a = cache[n];
  a.assign(b.size(), 0.0);
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1.0 / n, b.data(), n, b.data(), n,
              0.0, a.data(), n);
  for (int i = 0; i < n; ++i) a[static_cast<size_t>(i) * n + i] += 1.0;
  return a;
}

tf::Tensor spd_tensor(int n) {
  return tf::constant(spd(n), {n, n});
}

// The lower Cholesky factor of spd(n) (for the triangular solves).
tf::Tensor chol_tensor(int n) {
  static std::map<int, tf::Tensor> cache;
  auto it = cache.find(n);
  if (it == cache.end()) it = cache.emplace(n, tf::linalg::cholesky(spd_tensor(n))).first;
  return it->second;
}

void sizes(benchmark::internal::Benchmark* b) {
  for (int n : {64, 256, 768}) b->Arg(n);
  b->Unit(benchmark::kMillisecond)->UseRealTime();
}

// ---- tapeflow ----
void BM_Cholesky_tapeflow(benchmark::State& state) {
  const tf::Tensor a = spd_tensor(static_cast<int>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(tf::linalg::cholesky(a).raw_data());
}
void BM_Eigh_tapeflow(benchmark::State& state) {
  const tf::Tensor a = spd_tensor(static_cast<int>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(tf::linalg::eigh(a).eigenvalues.raw_data());
}
void BM_Qr_tapeflow(benchmark::State& state) {
  const tf::Tensor a = spd_tensor(static_cast<int>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(tf::linalg::qr(a).q.raw_data());
}
void BM_Svd_tapeflow(benchmark::State& state) {
  const tf::Tensor a = spd_tensor(static_cast<int>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(tf::linalg::svd(a).s.raw_data());
}
void BM_TriangularSolve_tapeflow(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const tf::Tensor l = chol_tensor(n), b = spd_tensor(n);
  for (auto _ : state) benchmark::DoNotOptimize(tf::linalg::triangular_solve(l, b).raw_data());
}
void BM_Slogdet_tapeflow(benchmark::State& state) {
  const tf::Tensor a = spd_tensor(static_cast<int>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(tf::linalg::slogdet(a).second.raw_data());
}

void BM_Sqrtm_tapeflow(benchmark::State& state) {
  const tf::Tensor a = spd_tensor(static_cast<int>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(tf::linalg::sqrtm(a).raw_data());
}
// sqrtm's gradient alone: the Schur decomposition of the root and a Sylvester solve.
void BM_SqrtmGrad_tapeflow(benchmark::State& state) {
  const tf::Tensor a = spd_tensor(static_cast<int>(state.range(0)));
  const tf::Tensor r = tf::linalg::sqrtm(a);
  for (auto _ : state)
    benchmark::DoNotOptimize(
        tf::detail::dispatch(tf::prims::MatrixSquareRootGrad{}, {r, a}).raw_data());
}

// ---- LAPACK called directly, on a copy (the routines overwrite their input) ----
void BM_Cholesky_lapack(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  std::vector<double> a;
  int info = 0;
  for (auto _ : state) {
    a = spd(n);
    dpotrf_("U", &n, a.data(), &n, &info, 1);  // row-major lower = column-major upper
    benchmark::DoNotOptimize(a.data());
  }
}
void BM_Eigh_lapack(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  std::vector<double> a, w(n);
  int info = 0, lwork = -1, liwork = -1, iwq = 0;
  double wq = 0;
  a = spd(n);
  dsyevd_("V", "U", &n, a.data(), &n, w.data(), &wq, &lwork, &iwq, &liwork, &info, 1, 1);
  lwork = static_cast<int>(wq);
  liwork = iwq;
  std::vector<double> work(static_cast<size_t>(lwork));
  std::vector<int> iwork(static_cast<size_t>(liwork));
  for (auto _ : state) {
    a = spd(n);
    dsyevd_("V", "U", &n, a.data(), &n, w.data(), work.data(), &lwork, iwork.data(), &liwork, &info,
            1, 1);
    benchmark::DoNotOptimize(w.data());
  }
}
void BM_Qr_lapack(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  std::vector<double> a = spd(n), tau(n);
  int info = 0, lwork = -1;
  double wq = 0;
  dgeqrf_(&n, &n, a.data(), &n, tau.data(), &wq, &lwork, &info);
  lwork = std::max(static_cast<int>(wq), n * 64);
  std::vector<double> work(static_cast<size_t>(lwork));
  for (auto _ : state) {
    a = spd(n);
    dgeqrf_(&n, &n, a.data(), &n, tau.data(), work.data(), &lwork, &info);
    dorgqr_(&n, &n, &n, a.data(), &n, tau.data(), work.data(), &lwork, &info);
    benchmark::DoNotOptimize(a.data());
  }
}
void BM_Svd_lapack(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  std::vector<double> a = spd(n), s(n), u(static_cast<size_t>(n) * n), vt(u.size());
  std::vector<int> iwork(static_cast<size_t>(8) * n);
  int info = 0, lwork = -1;
  double wq = 0;
  dgesdd_("S", &n, &n, a.data(), &n, s.data(), u.data(), &n, vt.data(), &n, &wq, &lwork,
          iwork.data(), &info, 1);
  lwork = static_cast<int>(wq);
  std::vector<double> work(static_cast<size_t>(lwork));
  for (auto _ : state) {
    a = spd(n);
    dgesdd_("S", &n, &n, a.data(), &n, s.data(), u.data(), &n, vt.data(), &n, work.data(), &lwork,
            iwork.data(), &info, 1);
    benchmark::DoNotOptimize(s.data());
  }
}
void BM_TriangularSolve_lapack(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const std::vector<double> l = tf::detail::to_double_vector(chol_tensor(n));
  std::vector<double> b;
  for (auto _ : state) {
    b = spd(n);
    cblas_dtrsm(CblasRowMajor, CblasLeft, CblasLower, CblasNoTrans, CblasNonUnit, n, n, 1.0,
                l.data(), n, b.data(), n);
    benchmark::DoNotOptimize(b.data());
  }
}
void BM_Schur_lapack(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const std::vector<double>& a0 = spd(n);
  std::vector<double> a(a0.size()), z(a0.size()), wr(static_cast<size_t>(n)),
      wi(static_cast<size_t>(n));
  std::vector<int> bwork(static_cast<size_t>(n));
  int sdim = 0, info = 0, lwork = -1;
  double query = 0;
  dgees_("V", "N", nullptr, &n, a.data(), &n, &sdim, wr.data(), wi.data(), z.data(), &n, &query,
         &lwork, bwork.data(), &info, 1, 1);
  lwork = static_cast<int>(query);
  std::vector<double> work(static_cast<size_t>(lwork));
  for (auto _ : state) {
    std::memcpy(a.data(), a0.data(), a0.size() * sizeof(double));
    dgees_("V", "N", nullptr, &n, a.data(), &n, &sdim, wr.data(), wi.data(), z.data(), &n,
           work.data(), &lwork, bwork.data(), &info, 1, 1);
    benchmark::DoNotOptimize(a.data());
  }
}
void BM_Slogdet_lapack(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  std::vector<double> a;
  std::vector<int> ipiv(n);
  int info = 0;
  for (auto _ : state) {
    a = spd(n);
    dgetrf_(&n, &n, a.data(), &n, ipiv.data(), &info);
    double s = 0;
    for (int i = 0; i < n; ++i) s += std::log(std::abs(a[static_cast<size_t>(i) * n + i]));
    benchmark::DoNotOptimize(s);
  }
}

}  // namespace

BENCHMARK(BM_Cholesky_tapeflow)->Apply(sizes);
BENCHMARK(BM_Cholesky_lapack)->Apply(sizes);
BENCHMARK(BM_Eigh_tapeflow)->Apply(sizes);
BENCHMARK(BM_Eigh_lapack)->Apply(sizes);
BENCHMARK(BM_Qr_tapeflow)->Apply(sizes);
BENCHMARK(BM_Qr_lapack)->Apply(sizes);
BENCHMARK(BM_Svd_tapeflow)->Apply(sizes);
BENCHMARK(BM_Svd_lapack)->Apply(sizes);
BENCHMARK(BM_TriangularSolve_tapeflow)->Apply(sizes);
BENCHMARK(BM_TriangularSolve_lapack)->Apply(sizes);
BENCHMARK(BM_Slogdet_tapeflow)->Apply(sizes);
BENCHMARK(BM_Slogdet_lapack)->Apply(sizes);
BENCHMARK(BM_Sqrtm_tapeflow)->Apply(sizes);
BENCHMARK(BM_SqrtmGrad_tapeflow)->Apply(sizes);
BENCHMARK(BM_Schur_lapack)->Apply(sizes);

BENCHMARK_MAIN();
