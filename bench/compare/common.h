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
// naming `program`) for an unknown option, an option without its value, or a count, time or
// size that is not a positive number (zero for --min-time).
inline bool parse(int argc, char** argv, const char* program, Options& o,
                  const std::function<bool(const std::string&, const std::string&)>& extra) {
  auto bad = [&](const std::string& what) {
    std::fprintf(stderr, "%s: %s\n", program, what.c_str());
    return false;
  };
  auto whole = [](const std::string& v, long long& out) {
    char* end = nullptr;
    out = std::strtoll(v.c_str(), &end, 10);
    return !v.empty() && *end == '\0';
  };
  for (int i = 1; i < argc; i += 2) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return bad("option " + a + " needs a value");
    const std::string v = argv[i + 1];
    long long n = 0;
    if (a == "--repeats") {
      if (!whole(v, n) || n < 1) return bad("--repeats needs a count >= 1, got " + v);
      o.repeats = static_cast<int>(n);
    } else if (a == "--min-time") {
      char* end = nullptr;
      o.min_time = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0' || !(o.min_time >= 0))
        return bad("--min-time needs seconds >= 0, got " + v);
    } else if (a == "--ops") {
      o.ops = split(v);
    } else if (a == "--dtypes") {
      o.dtypes = split(v);
    } else if (a == "--sizes") {
      o.sizes.clear();
      for (const std::string& s : split(v)) {
        if (!whole(s, n) || n < 1) return bad("--sizes needs sizes >= 1, got " + s);
        o.sizes.push_back(n);
      }
    } else if (!extra(a, v)) {
      return bad("unknown option " + a);
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
