// The error of tapeflow's float64 exp, tanh, sigmoid, log, log1p, sin and cos on the CPU, against
// the long double functions (64 bits of mantissa on x86-64): for each function and input range,
// the largest distance in ulp of float64 and where it occurs, over random inputs (a fixed seed;
// uniform, or uniform in log |x| for the log ranges marked so).
//   build/bench/float64_ulp [millions of inputs per range, default 10]
// The figures in ops/cpu/unary_ops.h come from this program; TAPEFLOW_CPU_ISA=baseline or avx2
// measures the other loop variants.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <tapeflow/tapeflow.h>

#include "support/ulp.h"

namespace tf = tapeflow;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

struct Range {
  const char* fn;
  double lo, hi;
  bool log_spaced = false;  // |x| uniform in log between |lo| and |hi| (same signs)
};

tf::Tensor run(const char* fn, const tf::Tensor& x) {
  const std::string f = fn;
  if (f == "exp") return tf::exp(x);
  if (f == "tanh") return tf::tanh(x);
  if (f == "sigmoid") return tf::sigmoid(x);
  if (f == "log") return tf::log(x);
  if (f == "sin") return tf::sin(x);
  if (f == "cos") return tf::cos(x);
  return tf::log1p(x);
}

long double reference(const char* fn, long double x) {
  const std::string f = fn;
  if (f == "exp") return std::exp(x);
  if (f == "tanh") return std::tanh(x);
  if (f == "sigmoid") return 1 / (1 + std::exp(-x));
  if (f == "log") return std::log(x);
  if (f == "sin") return std::sin(x);
  if (f == "cos") return std::cos(x);
  return std::log1p(x);
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t millions = argc > 1 ? std::atoll(argv[1]) : 10;
  if (millions < 1) {
    std::cerr << "usage: float64_ulp [millions of inputs per range >= 1]\n";
    return 2;
  }
  if (std::numeric_limits<long double>::digits < 64) {
    std::cerr << "float64_ulp: long double is no wider than double here\n";
    return 1;
  }
  tf::DeviceScope cpu("/cpu:0");  // tapeflow's own loops, also where a GPU is the default
  const Range ranges[] = {{"exp", -1, 1},
                          {"exp", -745.2, 709.8},
                          {"tanh", 0, 0.7},
                          {"tanh", 0.7, 3},
                          {"tanh", 3, 20},
                          {"sigmoid", -745, 0},
                          {"sigmoid", -5, 5},
                          {"sigmoid", 0, 40},
                          {"log", 0.5, 2},
                          {"log", 5e-324, 1.7e308, true},
                          {"log1p", -1, 1},
                          {"log1p", 1e-300, 1.7e308, true},
                          {"log1p", -1e-300, -1, true},
                          {"sin", -4, 4},
                          {"sin", -32768, 32768},
                          {"sin", 32768, 1e6},
                          {"cos", -4, 4},
                          {"cos", -32768, 32768},
                          {"cos", 32768, 1e6}};
  std::mt19937_64 gen(7);
  constexpr int64_t kChunk = 1 << 20;
  for (const Range& r : ranges) {
    double worst = 0, worst_x = 0;
    std::uniform_real_distribution<double> u(r.log_spaced ? std::log(std::abs(r.lo)) : r.lo,
                                             r.log_spaced ? std::log(std::abs(r.hi)) : r.hi);
    const double sign = r.lo < 0 ? -1.0 : 1.0;
    for (int64_t done = 0; done < millions * 1000000; done += kChunk) {
      std::vector<double> xs(kChunk);
      for (double& v : xs) v = r.log_spaced ? sign * std::exp(u(gen)) : u(gen);
      const std::vector<double> ys = run(r.fn, tf::constant(xs)).numpy<double>();
      for (int64_t i = 0; i < kChunk; ++i) {
        const long double want = reference(r.fn, xs[i]);
        const double w = static_cast<double>(want);
        // A non-finite reference must be matched; NaN for a finite one is an infinite error.
        const double err = !std::isfinite(w)
                               ? (ys[i] == w || (std::isnan(w) && std::isnan(ys[i])) ? 0 : kInf)
                           : std::isnan(ys[i]) ? kInf
                                               : tf::testing::float64_ulp_error(ys[i], want);
        if (err > worst) worst = err, worst_x = xs[i];
      }
    }
    fmt::print("{:8} [{}, {}]: at most {:.4f} ulp (at x = {:.17g})\n", r.fn, r.lo, r.hi, worst,
               worst_x);
  }
  return 0;
}
