// The adversarial tests' helpers (tests/ops/test_adversarial*.cpp): inputs with special values
// (NaN, infinities, signed zeros, extremes) and probes that accept a readable result or a
// tf::Error naming the op, and fail on anything else (another exception; a crash ends the test
// binary).
#pragma once

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "core/log.h"
#include "support/testing.h"
#include "tapeflow/tapeflow.h"

namespace adversarial {

namespace tf = tapeflow;
using tf::testing::kAllDTypes;

inline const std::vector<tf::TensorShape> kShapes = {
    {}, {0}, {1}, {3}, {2, 3}, {3, 0}, {0, 3}, {2, 1, 3}, {1, 1, 1, 1}, {2, 3, 4, 5}};

// Values of a tensor of `shape` and `dtype`: ordinary ones, or the dtype's special values
// (NaN, infinities, zero and signed zero for floats; the extremes, -1 and 0 for integers).
inline tf::Tensor make(const tf::TensorShape& shape, tf::DType dtype, bool special,
                       unsigned seed = 1) {
  const size_t n = static_cast<size_t>(shape.num_elements());
  std::vector<double> v = tf::testing::random_values(n, -3.0, 3.0, seed);
  if (dtype == tf::bool_) {
    for (size_t i = 0; i < n; ++i) v[i] = (special ? i % 3 == 0 : v[i] > 0) ? 1.0 : 0.0;
    return tf::cast(tf::constant(v, shape), tf::bool_);
  }
  if (!special) {
    if (dtype == tf::uint8) {
      for (double& x : v) x = std::fabs(x);
    }
    return tf::cast(tf::constant(v, shape), dtype);
  }
  if (dtype == tf::int32 || dtype == tf::int64) {
    std::vector<int64_t> w(n);
    const int64_t lo = dtype == tf::int32 ? std::numeric_limits<int32_t>::min()
                                          : std::numeric_limits<int64_t>::min();
    const int64_t hi = dtype == tf::int32 ? std::numeric_limits<int32_t>::max()
                                          : std::numeric_limits<int64_t>::max();
    const int64_t pool[] = {lo, hi, -1, 0, 1, lo + 1, hi - 1};
    for (size_t i = 0; i < n; ++i) w[i] = pool[(i + 2 * (seed - 1)) % 7];
    if (dtype == tf::int64) return tf::constant(w, shape);
    std::vector<int32_t> w32(w.begin(), w.end());
    return tf::constant(w32, shape);
  }
  if (dtype == tf::uint8) {
    std::vector<uint8_t> w(n);
    const uint8_t pool[] = {0, 255, 1, 128, 254};
    for (size_t i = 0; i < n; ++i) w[i] = pool[(i + 2 * (seed - 1)) % 5];
    return tf::constant(w, shape);
  }
  const double inf = std::numeric_limits<double>::infinity();
  const double pool[] = {std::nan(""), inf, -inf, 0.0, -0.0, 1e300, -1e-300, 2.5};
  for (size_t i = 0; i < n; ++i) v[i] = pool[(i + 2 * (seed - 1)) % 8];
  return tf::cast(tf::constant(v, shape), dtype);
}

inline std::string describe(const tf::Tensor& t) {
  if (!t.defined()) return "undefined";
  return std::string(tf::dtype_name(t.dtype())) + t.shape().to_string();
}

// Runs f: a result must be a defined, readable tensor; an error must be a tf::Error naming `op`.
inline void probe(const std::string& op, const std::string& inputs,
                  const std::function<std::vector<tf::Tensor>()>& f) {
  INFO(op << "(" << inputs << ")");
  try {
    for (const tf::Tensor& r : f()) {
      REQUIRE(r.defined());
      const std::vector<double> values = r.numpy<double>();
      REQUIRE(static_cast<int64_t>(values.size()) == r.num_elements());
    }
  } catch (const tf::Error& e) {
    const std::string message = e.what();
    CHECK_THAT(message, Catch::Matchers::Contains(op));
  } catch (const std::exception& e) {
    FAIL("not a tf::Error: " << e.what());
  }
}

// Runs f: it returns, or raises a tf::Error whose message starts with a bracketed name
// ("[op] ...", "[layer_name] ..."); any other exception fails the test.
inline void attempt(const std::function<void()>& f) {
  try {
    f();
  } catch (const tf::Error& e) {
    CHECK(std::string(e.what()).rfind('[', 0) == 0);
  } catch (const std::exception& e) {
    FAIL("not a tf::Error: " << e.what());
  }
}

// attempt() for f's results: each defined one must be readable (undefined ones, TF's None, are
// allowed).
inline void probe_readable(const std::string& what,
                           const std::function<std::vector<tf::Tensor>()>& f) {
  INFO(what);
  attempt([&] {
    for (const tf::Tensor& r : f()) {
      if (!r.defined()) continue;
      const std::vector<double> values = r.numpy<double>();
      REQUIRE(static_cast<int64_t>(values.size()) == r.num_elements());
    }
  });
}

// Silences warnings for a scope (probes that mean to provoke them by the thousand).
class QuietLogs {
 public:
  QuietLogs() : previous_(tf::logging::level()) {
    tf::logging::set_level(tf::logging::Level::error);
  }
  ~QuietLogs() { tf::logging::set_level(previous_); }
  QuietLogs(const QuietLogs&) = delete;
  QuietLogs& operator=(const QuietLogs&) = delete;

 private:
  tf::logging::Level previous_;
};

// Runs body once on every device under test (CPU:0 and each GPU), as the default device.
inline void on_every_device(const std::function<void()>& body) {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("on " << dev.to_string());
    tf::DeviceScope scope(dev);
    body();
  }
}

inline void probe(const std::string& op, const std::string& inputs,
                  const std::function<tf::Tensor()>& f) {
  probe(op, inputs, [&] { return std::vector<tf::Tensor>{f()}; });
}

// The value and the gradients of sum(y^2) (sum of squares of every output) with respect to
// the watched floating inputs.
inline std::vector<tf::Tensor> with_gradients(const std::vector<tf::Tensor>& inputs,
                                              const std::function<std::vector<tf::Tensor>()>& f) {
  tf::GradientTape tape({.persistent = true});
  for (const tf::Tensor& t : inputs)
    if (tf::is_floating(t.dtype())) tape.watch(t);
  std::vector<tf::Tensor> out;
  for (const tf::Tensor& y : f())
    if (y.defined()) out.push_back(y);  // (svd's u and v without compute_uv)
  std::optional<tf::Tensor> l;
  for (const tf::Tensor& y : out) {
    if (!y.defined() || !tf::is_floating(y.dtype())) continue;
    const tf::Tensor s = tf::reduce_sum(y * y);
    l = l ? *l + s : s;
  }
  if (!l) return out;
  for (const tf::Tensor& t : inputs) {
    if (!tf::is_floating(t.dtype())) continue;
    const tf::Tensor g = tape.gradient(*l, t);
    if (g.defined()) out.push_back(g);
  }
  return out;
}
inline std::vector<tf::Tensor> with_gradients(const std::vector<tf::Tensor>& inputs,
                                              const std::function<tf::Tensor()>& f) {
  return with_gradients(inputs, std::function<std::vector<tf::Tensor>()>(
                                    [&] { return std::vector<tf::Tensor>{f()}; }));
}

}  // namespace adversarial
