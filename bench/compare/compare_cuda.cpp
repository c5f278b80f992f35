// The GPU side of bench/compare/compare.py (--gpu): N x N matrix multiplication and inversion on
// one GPU through tapeflow (tf::matmul, tf::linalg::inv on device-resident inputs) and through
// cuBLAS and cuSOLVER called directly on the same stream with every buffer allocated up front:
// cublas{S,D}gemm into a fixed output, and for the inverse what tapeflow's kernel does (copy A to
// the LU buffer, the identity to the solution, getrf with a preallocated workspace, getrs
// against the identity, then read the pivot infos on the host, which waits for the stream).
// Each run is timed twice: wall time around the call and a stream synchronisation, and device
// time between CUDA events recorded around it on the stream. The timing rule is
// samples/matrix_benchmark's (one warm-up run, then at least --repeats runs and more, up to
// 1000, until they add up to --min-time seconds); the two implementations alternate by round.
// Prints CSV rows on stdout:
//   impl,op,dtype,n,runs,median_s,min_s,max_s,device_median_s,device_min_s,round
// and, as '#' comments, the GPU and the library versions.
//
//   compare_cuda --sizes 64,128,...,4096 --dtypes float32,float64 --ops matmul,inverse
//       --rounds 2
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusolverDn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "bench/compare/common.h"
#include "core/cuda/context.h"
#include "core/device.h"
#include "core/tensor.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/linalg.h"
#include "ops/random.h"

namespace tf = tapeflow;

namespace {

const tf::Device kGpu{tf::DeviceType::GPU, 0};

void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  std::fprintf(stderr, "compare_cuda: %s: %s\n", what, cudaGetErrorString(e));
  std::exit(1);
}
void check(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  std::fprintf(stderr, "compare_cuda: %s: cuBLAS status %d\n", what, static_cast<int>(s));
  std::exit(1);
}
void check(cusolverStatus_t s, const char* what) {
  if (s == CUSOLVER_STATUS_SUCCESS) return;
  std::fprintf(stderr, "compare_cuda: %s: cuSOLVER status %d\n", what, static_cast<int>(s));
  std::exit(1);
}

struct Stats {
  int runs = 0;
  double median = 0, min = 0, max = 0, device_median = 0, device_min = 0;
};

// One warm-up run, then timed runs while compare::more_runs says so.
Stats time_runs(const std::function<void()>& run, cudaStream_t s, const compare::Options& o) {
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  run();
  check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  std::vector<double> wall, device;
  double total = 0;
  while (compare::more_runs(wall.size(), total, o)) {
    const auto t0 = std::chrono::steady_clock::now();
    check(cudaEventRecord(start, s), "cudaEventRecord");
    run();
    check(cudaEventRecord(stop, s), "cudaEventRecord");
    check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    const double w = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    wall.push_back(w);
    device.push_back(ms * 1e-3);
    total += w;
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  Stats st;
  st.runs = static_cast<int>(wall.size());
  st.median = compare::median(wall);
  st.min = *std::min_element(wall.begin(), wall.end());
  st.max = *std::max_element(wall.begin(), wall.end());
  st.device_median = compare::median(device);
  st.device_min = *std::min_element(device.begin(), device.end());
  return st;
}

// cuBLAS and cuSOLVER on tapeflow's stream, with their buffers made once per size.
class Direct {
 public:
  Direct(cudaStream_t s, int64_t n, bool f64, const tf::Tensor& a, const tf::Tensor& b,
         const tf::Tensor& identity)
      : s_(s), n_(static_cast<int>(n)), f64_(f64), a_(a), b_(b), identity_(identity) {
    const size_t bytes = static_cast<size_t>(n) * n * (f64 ? 8 : 4);
    bytes_ = bytes;
    check(cublasCreate(&blas_), "cublasCreate");
    check(cublasSetStream(blas_, s), "cublasSetStream");
    check(cusolverDnCreate(&solver_), "cusolverDnCreate");
    check(cusolverDnSetStream(solver_, s), "cusolverDnSetStream");
    check(cudaMalloc(&c_, bytes), "cudaMalloc");
    check(cudaMalloc(&lu_, bytes), "cudaMalloc");
    check(cudaMalloc(&ipiv_, sizeof(int) * static_cast<size_t>(n)), "cudaMalloc");
    check(cudaMalloc(&info_, 2 * sizeof(int)), "cudaMalloc");
    int lwork = 0;
    if (f64)
      check(cusolverDnDgetrf_bufferSize(solver_, n_, n_, static_cast<double*>(lu_), n_, &lwork),
            "getrf_bufferSize");
    else
      check(cusolverDnSgetrf_bufferSize(solver_, n_, n_, static_cast<float*>(lu_), n_, &lwork),
            "getrf_bufferSize");
    check(cudaMalloc(&work_, static_cast<size_t>(std::max(lwork, 1)) * (f64 ? 8 : 4)),
          "cudaMalloc");
  }
  ~Direct() {
    cudaFree(c_);
    cudaFree(lu_);
    cudaFree(ipiv_);
    cudaFree(info_);
    cudaFree(work_);
    cublasDestroy(blas_);
    cusolverDnDestroy(solver_);
  }
  Direct(const Direct&) = delete;
  Direct& operator=(const Direct&) = delete;

  // Row-major C = A B is column-major C^T = B^T A^T.
  void matmul() {
    if (f64_) {
      const double one = 1, zero = 0;
      check(cublasDgemm(blas_, CUBLAS_OP_N, CUBLAS_OP_N, n_, n_, n_, &one, b_.data<double>(), n_,
                        a_.data<double>(), n_, &zero, static_cast<double*>(c_), n_),
            "cublasDgemm");
    } else {
      const float one = 1, zero = 0;
      check(cublasSgemm(blas_, CUBLAS_OP_N, CUBLAS_OP_N, n_, n_, n_, &one, b_.data<float>(), n_,
                        a_.data<float>(), n_, &zero, static_cast<float*>(c_), n_),
            "cublasSgemm");
    }
  }

  // Row-major A read as column-major is A^T: solving A^T X = I gives inv(A^T) column-major,
  // which is inv(A) row-major.
  void inverse() {
    check(cudaMemcpyAsync(lu_, a_.raw_data(), bytes_, cudaMemcpyDeviceToDevice, s_), "copy A");
    check(cudaMemcpyAsync(c_, identity_.raw_data(), bytes_, cudaMemcpyDeviceToDevice, s_),
          "copy I");
    if (f64_) {
      check(cusolverDnDgetrf(solver_, n_, n_, static_cast<double*>(lu_), n_,
                             static_cast<double*>(work_), ipiv_, info_),
            "cusolverDnDgetrf");
      check(cusolverDnDgetrs(solver_, CUBLAS_OP_N, n_, n_, static_cast<double*>(lu_), n_, ipiv_,
                             static_cast<double*>(c_), n_, info_ + 1),
            "cusolverDnDgetrs");
    } else {
      check(cusolverDnSgetrf(solver_, n_, n_, static_cast<float*>(lu_), n_,
                             static_cast<float*>(work_), ipiv_, info_),
            "cusolverDnSgetrf");
      check(cusolverDnSgetrs(solver_, CUBLAS_OP_N, n_, n_, static_cast<float*>(lu_), n_, ipiv_,
                             static_cast<float*>(c_), n_, info_ + 1),
            "cusolverDnSgetrs");
    }
    int info = 0;
    check(cudaMemcpyAsync(&info, info_, sizeof(int), cudaMemcpyDeviceToHost, s_), "read info");
    check(cudaStreamSynchronize(s_), "cudaStreamSynchronize");
    if (info > 0) {
      std::fprintf(stderr, "compare_cuda: getrf reports a singular matrix (info %d)\n", info);
      std::exit(1);
    }
  }

  const void* result() const { return c_; }

 private:
  cudaStream_t s_;
  int n_;
  bool f64_;
  size_t bytes_ = 0;
  tf::Tensor a_, b_, identity_;
  cublasHandle_t blas_ = nullptr;
  cusolverDnHandle_t solver_ = nullptr;
  void* c_ = nullptr;
  void* lu_ = nullptr;
  int* ipiv_ = nullptr;
  int* info_ = nullptr;
  void* work_ = nullptr;
};

// Largest |x - y| over |y| + 1 between tapeflow's result and the direct one (both on the host).
double difference(const tf::Tensor& t, const void* direct, bool f64) {
  const size_t n = static_cast<size_t>(t.num_elements());
  std::vector<double> a(n), b(n);
  if (f64) {
    const std::vector<double> x = t.numpy<double>();
    a.assign(x.begin(), x.end());
    check(cudaMemcpy(b.data(), direct, n * 8, cudaMemcpyDeviceToHost), "read result");
  } else {
    const std::vector<float> x = t.numpy<float>();
    a.assign(x.begin(), x.end());
    std::vector<float> y(n);
    check(cudaMemcpy(y.data(), direct, n * 4, cudaMemcpyDeviceToHost), "read result");
    b.assign(y.begin(), y.end());
  }
  double worst = 0;
  for (size_t i = 0; i < n; ++i)
    worst = std::max(worst, std::abs(a[i] - b[i]) / (std::abs(b[i]) + 1));
  return worst;
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 2;
  compare::Options o;
  o.sizes = {64, 256, 1024, 4096};
  const bool ok = compare::parse(argc, argv, "compare_cuda", o,
                                 [&](const std::string& a, const std::string& v) {
                                   if (a != "--rounds") return false;
                                   rounds = std::atoi(v.c_str());
                                   return true;
                                 });
  if (!ok) return 2;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::fprintf(stderr, "compare_cuda: no GPU on this machine\n");
    return 3;
  }
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  int cublas_version = 0, cusolver_version = 0;
  {
    cublasHandle_t h;
    check(cublasCreate(&h), "cublasCreate");
    cublasGetVersion(h, &cublas_version);
    cublasDestroy(h);
  }
  cusolverGetProperty(MAJOR_VERSION, &cusolver_version);
  std::printf("# GPU 0: %s; cuBLAS %d, cuSOLVER major %d; float32 without TF32\n", prop.name,
              cublas_version, cusolver_version);
  std::printf("impl,op,dtype,n,runs,median_s,min_s,max_s,device_median_s,device_min_s,round\n");

  tf::DeviceScope scope(kGpu);
  const cudaStream_t s = tf::detail::cuda::stream(kGpu);
  for (const std::string& op : o.ops)
    for (const std::string& dt_name : o.dtypes) {
      const bool f64 = dt_name == "float64";
      const tf::DType dt = f64 ? tf::float64 : tf::float32;
      for (int64_t n : o.sizes) {
        tf::Tensor a = tf::random::uniform({n, n}, -1.0, 1.0, dt, static_cast<uint64_t>(n));
        const tf::Tensor b =
            tf::random::uniform({n, n}, -1.0, 1.0, dt, static_cast<uint64_t>(n + 1));
        const tf::Tensor identity = tf::eye(n, dt);
        if (op == "inverse")  // well conditioned, as the NumPy and libtorch sides
          a = tf::add(a,
                      tf::multiply(identity, tf::constant(tf::Tensor(std::sqrt(double(n))), dt)));
        Direct direct(s, n, f64, a, b, identity);
        tf::Tensor out;
        auto ours = [&] { out = op == "matmul" ? tf::matmul(a, b) : tf::linalg::inv(a); };
        auto theirs = [&] { op == "matmul" ? direct.matmul() : direct.inverse(); };
        // The same answer (checked once per size).
        ours();
        theirs();
        check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
        const double diff = difference(out, direct.result(), f64);
        const double tol = f64 ? 1e-9 : 1e-3;
        if (!(diff <= tol)) {
          std::fprintf(stderr,
                       "compare_cuda: %s %s N=%lld: tapeflow and cuBLAS/cuSOLVER differ by %g\n",
                       op.c_str(), dt_name.c_str(), static_cast<long long>(n), diff);
          return 1;
        }
        for (int r = 0; r < rounds; ++r) {
          const bool first = (r % 2) == 0;
          for (int k = 0; k < 2; ++k) {
            const bool tapeflow = (k == 0) == first;
            std::fprintf(stderr, "%s %s N=%lld round %d/%d: %s\n", op.c_str(), dt_name.c_str(),
                         static_cast<long long>(n), r + 1, rounds,
                         tapeflow ? "tapeflow" : "cuBLAS/cuSOLVER");
            const Stats st = tapeflow ? time_runs(ours, s, o) : time_runs(theirs, s, o);
            std::printf("%s,%s,%s,%lld,%d,%.9g,%.9g,%.9g,%.9g,%.9g,%d\n",
                        tapeflow ? "tapeflow" : "cuda", op.c_str(), dt_name.c_str(),
                        static_cast<long long>(n), st.runs, st.median, st.min, st.max,
                        st.device_median, st.device_min, r + 1);
            std::fflush(stdout);
          }
        }
      }
    }
  return 0;
}
