// The error of tapeflow's float32 tanh on the CPU over every float32 in [0, 9.5] (beyond it the
// result is +-1): the largest distance in ulp from the float64 tanh rounded to float32, where it
// occurs, and how many inputs are within 1 and 2 ulp; then whether tanh is odd, bounded by 1 and
// x itself below 2^-12.
// About a billion inputs: a minute or two on one core.
//   build/bench/tanh_ulp [stride]      (stride N: every Nth float32 only)
// The figures in ops/cpu/unary_ops.h come from this program; TAPEFLOW_CPU_ISA=baseline or avx2
// measures the other loop variants.
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <vector>

#include <fmt/format.h>
#include <tapeflow/tapeflow.h>

#include "support/ulp.h"

namespace tf = tapeflow;

int main(int argc, char** argv) {
  const int64_t stride = argc > 1 ? std::atoll(argv[1]) : 1;
  if (stride < 1) {
    std::cerr << "usage: tanh_ulp [stride >= 1]\n";
    return 2;
  }
  tf::DeviceScope cpu("/cpu:0");  // tapeflow's own loops, also where a GPU is the default
  const int64_t top = std::bit_cast<uint32_t>(9.5f);
  const int64_t chunk = int64_t{1} << 22;
  double worst = 0;
  float worst_x = 0;
  int64_t count = 0, within1 = 0, within2 = 0, bad_bound = 0, bad_odd = 0, bad_tiny = 0;
  int last_tenth = -1;
  std::vector<float> xs;
  for (int64_t b = 0; b < top; b += chunk * stride) {
    xs.clear();
    for (int64_t i = b; i < top && i < b + chunk * stride; i += stride)
      xs.push_back(std::bit_cast<float>(static_cast<uint32_t>(i)));
    const tf::Tensor x = tf::constant(xs);
    const std::vector<float> ys = tf::tanh(x).numpy<float>();
    const std::vector<float> neg = tf::tanh(-x).numpy<float>();
    for (size_t i = 0; i < xs.size(); ++i) {
      const double err = tf::testing::float32_ulp_error(ys[i], std::tanh(double{xs[i]}));
      if (err > worst) {
        worst = err;
        worst_x = xs[i];
      }
      within1 += err <= 1.0;
      within2 += err <= 2.0;
      bad_bound += std::abs(ys[i]) > 1.0f;
      bad_odd += neg[i] != -ys[i];
      bad_tiny += xs[i] < 0x1p-12f && ys[i] != xs[i];
    }
    count += static_cast<int64_t>(xs.size());
    const int tenth = static_cast<int>(10 * b / top);
    if (tenth != last_tenth) {
      std::cerr << fmt::format("  {}% of the inputs done\n", 10 * tenth);
      last_tenth = tenth;
    }
  }
  const float at = tf::tanh(tf::constant({worst_x})).numpy<float>()[0];
  std::cout << fmt::format(
      "float32 tanh over {} inputs in [0, 9.5]: at most {:.2f} ulp (x = {:.9g}: {:.9g}, "
      "float64 {:.9g}); within 1 ulp {:.2f}%, within 2 ulp {:.3f}%; |tanh| > 1: {}; "
      "tanh(-x) != -tanh(x): {}; tanh(x) != x below 2^-12: {}\n",
      count, worst, worst_x, at, std::tanh(static_cast<double>(worst_x)),
      100.0 * static_cast<double>(within1) / static_cast<double>(count),
      100.0 * static_cast<double>(within2) / static_cast<double>(count), bad_bound, bad_odd,
      bad_tiny);
  return bad_bound == 0 && bad_odd == 0 && bad_tiny == 0 ? 0 : 1;
}
