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
#include <sstream>
#include <string>
#include <vector>

#include "bench/compare/cli.h"

namespace {

using compare::split;

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
  int threads = 1, repeats = 5;
  double min_time = 0.2;
  std::vector<std::string> ops{"matmul", "inverse"}, dtypes{"float32", "float64"};
  std::vector<int64_t> sizes{64, 256, 1024};
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--threads") threads = std::atoi(v.c_str());
    else if (a == "--repeats") repeats = std::atoi(v.c_str());
    else if (a == "--min-time") min_time = std::atof(v.c_str());
    else if (a == "--ops") ops = split(v);
    else if (a == "--dtypes") dtypes = split(v);
    else if (a == "--sizes") {
      sizes.clear();
      for (const std::string& s : split(v)) sizes.push_back(std::atoll(s.c_str()));
    } else {
      std::fprintf(stderr, "compare_torch: unknown option %s\n", a.c_str());
      return 2;
    }
  }
  torch::set_num_threads(threads);
  torch::NoGradGuard no_grad;
  std::printf("# torch %s, threads %d, BLAS: %s\n", TORCH_VERSION, torch::get_num_threads(),
              openblas_info().c_str());
  std::printf("impl,op,dtype,n,runs,median_s,min_s,max_s\n");
  for (const std::string& op : ops)
    for (const std::string& dt : dtypes)
      for (int64_t n : sizes) {
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
        while (static_cast<int>(times.size()) < repeats || (total < min_time && times.size() < 1000)) {
          const auto t0 = std::chrono::steady_clock::now();
          once();
          const double t =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          times.push_back(t);
          total += t;
        }
        std::vector<double> s = times;
        std::sort(s.begin(), s.end());
        const size_t m = s.size() / 2;
        const double median = s.size() % 2 ? s[m] : 0.5 * (s[m - 1] + s[m]);
        std::printf("torch,%s,%s,%lld,%zu,%.6e,%.6e,%.6e\n", op.c_str(), dt.c_str(),
                    static_cast<long long>(n), s.size(), median, s.front(), s.back());
        std::fflush(stdout);
      }
  return 0;
}
