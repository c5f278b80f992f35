// The samples' positional command-line arguments, checked. Each argument is declared with its
// name, default, range and meaning; done() then handles `-h` / `--help` (prints the usage and
// the arguments, exits 0) and bad input: a value that is not a number in its range, or one
// argument too many, prints what is wrong and the usage and exits 2, before anything is loaded
// or trained. Header-only, for the samples.
//
//   samples::Args args(argc, argv, "Trains ... on Fashion-MNIST.", "Exits 77 without the data.");
//   const int epochs = args.epochs(10);
//   const double min_accuracy = args.min_accuracy(0.87);
//   const int steps = args.integer<int>("steps", 100, 1, 1000, "steps per epoch");
//   args.done();
#pragma once

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace samples {

class Args {
 public:
  Args(int argc, char** argv, std::string about, std::string epilogue = "")
      : argc_(argc), argv_(argv), about_(std::move(about)), epilogue_(std::move(epilogue)) {
    const std::string path = argc > 0 ? argv[0] : "sample";
    program_ = path.substr(path.find_last_of('/') + 1);
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      help_ = help_ || a == "-h" || a == "--help";
    }
  }

  // The next argument as an integer in [min, max] (or equal to `sentinel`, such as -1 for "no
  // limit"), `fallback` when there is none; T holds every value of the range.
  template <class T = long long>
  T integer(const char* name, long long fallback, long long min, long long max,
            const char* meaning, std::optional<long long> sentinel = std::nullopt) {
    std::string want = "an integer " + range(std::to_string(min), max == kNoMax
                                                                       ? std::string()
                                                                       : std::to_string(max));
    if (sentinel) want += " or " + std::to_string(*sentinel);
    declare(name, meaning, std::to_string(fallback));
    const char* a = next();
    if (!a) return static_cast<T>(fallback);
    errno = 0;
    char* end = nullptr;
    const long long v = std::strtoll(a, &end, 10);
    const bool parsed = *a != '\0' && *end == '\0' && errno == 0;
    if (!parsed || ((v < min || v > max) && (!sentinel || v != *sentinel))) {
      error(std::string(name) + " must be " + want + ", got '" + a + "'");
      return static_cast<T>(fallback);
    }
    return static_cast<T>(v);
  }

  // The next argument as a number in [min, max], `fallback` when there is none.
  double real(const char* name, double fallback, double min, double max, const char* meaning) {
    declare(name, meaning, num(fallback));
    const char* a = next();
    if (!a) return fallback;
    errno = 0;
    char* end = nullptr;
    const double v = std::strtod(a, &end);
    const bool parsed = *a != '\0' && *end == '\0' && errno == 0;
    if (!parsed || !(v >= min && v <= max)) {
      error(std::string(name) + " must be a number " + range(num(min), num(max)) + ", got '" +
            a + "'");
      return fallback;
    }
    return v;
  }

  // The arguments most samples share: epochs to train, and the test accuracy below which the
  // sample exits 1 (the check CI runs).
  int epochs(int fallback) {
    return integer<int>("epochs", fallback, 1, 1000, "passes over the training set");
  }
  double min_accuracy(double fallback,
                      const char* meaning = "test accuracy below which it exits 1") {
    return real("min_accuracy", fallback, 0, 1, meaning);
  }

  // The next argument as text (a path), `fallback` when there is none.
  std::string text(const char* name, const std::string& fallback, const char* meaning) {
    declare(name, meaning, fallback.empty() ? "none" : fallback);
    const char* a = next();
    return a ? std::string(a) : fallback;
  }

  // After every argument is declared: --help, or the first error, ends the program here.
  void done() {
    if (help_) {
      std::printf("usage: %s\n%s\n", usage().c_str(), about_.c_str());
      for (const auto& [name, text] : described_)
        std::printf("  %-*s  %s\n", static_cast<int>(width_), name.c_str(), text.c_str());
      if (!epilogue_.empty()) std::printf("%s\n", epilogue_.c_str());
      std::exit(0);
    }
    if (error_.empty() && next_ < argc_)
      error_ = std::string("unexpected argument '") + argv_[next_] + "'";
    if (!error_.empty()) {
      std::fprintf(stderr, "%s: %s\nusage: %s\n(%s --help says more)\n", program_.c_str(),
                   error_.c_str(), usage().c_str(), program_.c_str());
      std::exit(2);
    }
  }

 private:
  static constexpr long long kNoMax = std::numeric_limits<long long>::max();

  static std::string num(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    return buf;
  }
  static std::string range(const std::string& lo, const std::string& hi) {
    return hi.empty() ? ">= " + lo : "in [" + lo + ", " + hi + "]";
  }
  void declare(const char* name, const char* meaning, const std::string& fallback) {
    described_.emplace_back(name, std::string(meaning) + " (default " + fallback + ")");
    width_ = std::max(width_, described_.back().first.size());
  }
  const char* next() {
    if (help_ || next_ >= argc_) return nullptr;
    return argv_[next_++];
  }
  void error(std::string why) {
    if (error_.empty()) error_ = std::move(why);
  }
  // "program [a [b [c]]]"
  std::string usage() const {
    std::string u = program_;
    for (const auto& d : described_) u += " [" + d.first;
    u += std::string(described_.size(), ']');
    return u;
  }

  int argc_;
  char** argv_;
  int next_ = 1;
  bool help_ = false;
  std::string program_, about_, epilogue_, error_;
  std::vector<std::pair<std::string, std::string>> described_;
  size_t width_ = 0;
};

}  // namespace samples
