// What bench/compare's native sides (compare_torch, compare_cuda) share: the command line and
// the timing rule of samples/matrix_benchmark (one warm-up run, then at least `repeats` timed
// runs and more, up to 1000, until they add up to `min_time` seconds; the median).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

namespace compare {

// "a,b,,c" -> {"a", "b", "c"}.
inline std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

struct Options {
  int repeats = 5;
  double min_time = 0.2;
  std::vector<std::string> ops{"matmul", "inverse"}, dtypes{"float32", "float64"};
  std::vector<int64_t> sizes;
};

// Parses --repeats, --min-time, --ops, --dtypes and --sizes into `o`, and hands any other
// option with its value to `extra`, which returns whether it knows it. False (with a message
// naming `program`) for an unknown option.
inline bool parse(int argc, char** argv, const char* program, Options& o,
                  const std::function<bool(const std::string&, const std::string&)>& extra) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--repeats") {
      o.repeats = std::atoi(v.c_str());
    } else if (a == "--min-time") {
      o.min_time = std::atof(v.c_str());
    } else if (a == "--ops") {
      o.ops = split(v);
    } else if (a == "--dtypes") {
      o.dtypes = split(v);
    } else if (a == "--sizes") {
      o.sizes.clear();
      for (const std::string& s : split(v)) o.sizes.push_back(std::atoll(s.c_str()));
    } else if (!extra(a, v)) {
      std::fprintf(stderr, "%s: unknown option %s\n", program, a.c_str());
      return false;
    }
  }
  return true;
}

// Whether another timed run is due after `runs` runs that took `total` seconds.
inline bool more_runs(size_t runs, double total, const Options& o) {
  return static_cast<int>(runs) < o.repeats || (total < o.min_time && runs < 1000);
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

}  // namespace compare
