// The samples' positional command-line arguments, checked: `-h` or `--help` prints the usage and
// exits 0; an argument that is not a number in its range, or one too many, prints what is wrong
// and the usage and exits 2 (before anything is loaded or trained). Header-only, for the samples.
//
//   samples::Args args(argc, argv, "[epochs [min_accuracy]]", "Trains ... (defaults: ...)");
//   const int epochs = static_cast<int>(args.integer("epochs", 10, 1));
//   const double min_accuracy = args.real("min_accuracy", 0.87, 0.0, 1.0);
//   args.done();
#pragma once

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <utility>

namespace samples {

class Args {
 public:
  Args(int argc, char** argv, std::string usage, std::string help)
      : argc_(argc), argv_(argv), usage_(std::move(usage)), help_(std::move(help)) {
    const std::string path = argc > 0 ? argv[0] : "sample";
    program_ = path.substr(path.find_last_of('/') + 1);
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      if (a == "-h" || a == "--help") {
        std::printf("usage: %s %s\n%s\n", program_.c_str(), usage_.c_str(), help_.c_str());
        std::exit(0);
      }
    }
  }

  // The next argument as an integer in [min, max], or `fallback` when there is none. A
  // `sentinel` (such as -1 for "no limit") is accepted outside the range.
  long long integer(const char* name, long long fallback, long long min,
                    long long max = std::numeric_limits<long long>::max(),
                    std::optional<long long> sentinel = std::nullopt) {
    if (next_ >= argc_) return fallback;
    const std::string a = argv_[next_++];
    errno = 0;
    char* end = nullptr;
    const long long v = std::strtoll(a.c_str(), &end, 10);
    const bool parsed = !a.empty() && end && *end == '\0' && errno == 0;
    if (!parsed || ((v < min || v > max) && (!sentinel || v != *sentinel))) {
      std::string want = std::string(name) + " must be an integer " +
                         range(std::to_string(min), max == std::numeric_limits<long long>::max()
                                                        ? std::string()
                                                        : std::to_string(max));
      if (sentinel) want += " or " + std::to_string(*sentinel);
      fail(want + ", got '" + a + "'");
    }
    return v;
  }

  // The next argument as a number in [min, max], or `fallback` when there is none.
  double real(const char* name, double fallback, double min, double max) {
    if (next_ >= argc_) return fallback;
    const std::string a = argv_[next_++];
    errno = 0;
    char* end = nullptr;
    const double v = std::strtod(a.c_str(), &end);
    const bool parsed = !a.empty() && end && *end == '\0' && errno == 0;
    if (!parsed || !(v >= min && v <= max))
      fail(std::string(name) + " must be a number " + range(num(min), num(max)) + ", got '" + a +
           "'");
    return v;
  }

  // Every argument was used.
  void done() {
    if (next_ < argc_) fail(std::string("unexpected argument '") + argv_[next_] + "'");
  }

 private:
  static std::string num(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    return buf;
  }
  static std::string range(const std::string& lo, const std::string& hi) {
    return hi.empty() ? ">= " + lo : "in [" + lo + ", " + hi + "]";
  }
  [[noreturn]] void fail(const std::string& why) const {
    std::fprintf(stderr, "%s: %s\nusage: %s %s\n(%s --help says more)\n", program_.c_str(),
                 why.c_str(), program_.c_str(), usage_.c_str(), program_.c_str());
    std::exit(2);
  }

  int argc_;
  char** argv_;
  int next_ = 1;
  std::string program_, usage_, help_;
};

}  // namespace samples
