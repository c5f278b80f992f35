// libtorch's side of bench/compare/compare.py: torch::mm and torch::linalg_inv on the CPU for the
// sizes and dtypes given, timed by the same rule as samples/matrix_benchmark (one warm-up run,
// then at least --repeats timed runs and more, up to 1000, until they add up to --min-time
// seconds; the median, min and max of the runs). Prints CSV rows on stdout:
//   impl,op,dtype,n,runs,median_s,min_s,max_s
// and, as '#' comments, the thread count and the OpenBLAS build libtorch calls.
//
//   compare_torch --threads 2 --sizes 64,128,...,4096 --dtypes float32,float64 --ops matmul,inverse
#include <dlfcn.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/compare/common.h"

namespace {

// The OpenBLAS loaded into this process (through libtorch's libblas.so.3), found at run time.
std::string openblas_info() {
  using Fn = char* (*)();
  auto config = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "openblas_get_config"));
  auto core = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  if (!config) return "OpenBLAS not loaded";
  return std::string(config()) + "; core " + (core ? core() : "?");
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 1;
  compare::Options o;
  o.sizes = {64, 256, 1024};
  const bool ok = compare::parse(argc, argv, "compare_torch", o,
                                 [&](const std::string& a, const std::string& v) {
                                   if (a != "--threads") return false;
                                   threads = std::atoi(v.c_str());
                                   return true;
                                 });
  if (!ok) return 2;
  torch::set_num_threads(threads);
  torch::NoGradGuard no_grad;
  std::printf("# torch %s, threads %d, BLAS: %s\n", TORCH_VERSION, torch::get_num_threads(),
              openblas_info().c_str());
  std::printf("impl,op,dtype,n,runs,median_s,min_s,max_s\n");
  for (const std::string& op : o.ops)
    for (const std::string& dt : o.dtypes)
      for (int64_t n : o.sizes) {
        const auto st = dt == "float64" ? torch::kFloat64 : torch::kFloat32;
        torch::manual_seed(static_cast<uint64_t>(n));
        torch::Tensor a = torch::rand({n, n}, st) * 2 - 1;
        torch::Tensor b = torch::rand({n, n}, st) * 2 - 1;
        if (op == "inverse") a += torch::eye(n, st) * std::sqrt(static_cast<double>(n));
        torch::Tensor c;
        auto once = [&] { c = op == "matmul" ? torch::mm(a, b) : torch::linalg_inv(a); };
        once();  // warm-up
        std::vector<double> times;
        double total = 0;
        while (compare::more_runs(times.size(), total, o)) {
          const auto t0 = std::chrono::steady_clock::now();
          once();
          const double t =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          times.push_back(t);
          total += t;
        }
        const auto [lo, hi] = std::minmax_element(times.begin(), times.end());
        std::printf("torch,%s,%s,%lld,%zu,%.6e,%.6e,%.6e\n", op.c_str(), dt.c_str(),
                    static_cast<long long>(n), times.size(), compare::median(times), *lo, *hi);
        std::fflush(stdout);
      }
  return 0;
}
