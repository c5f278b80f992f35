#include "testing.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>

#include "autograd/tape.h"
#include "core/error.h"
#include "jit/passes.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/reduce.h"
#include "ops/unary.h"

namespace tapeflow::testing {

std::vector<Device> devices_under_test() {
  std::vector<Device> d{Device{DeviceType::CPU, 0}};
  const int n = detail::num_logical_devices(DeviceType::GPU);
  for (int i = 0; i < n; ++i) d.push_back(Device{DeviceType::GPU, i});
  return d;
}

bool has_gpu() {
  return detail::num_logical_devices(DeviceType::GPU) > 0;
}

bool jit_compile_forced_off(const char* what) {
  if (jit::env_switch("TAPEFLOW_JIT_COMPILE").value_or(true)) return false;
  WARN("TAPEFLOW_JIT_COMPILE=0 turns jit_compile off: " << what << " not checked in this run");
  return true;
}

bool split_cpu_in_two() {
  try {
    config::set_logical_device_configuration(config::list_physical_devices("CPU")[0], {{}, {}});
  } catch (const FailedPreconditionError&) {
  }
  if (config::list_logical_devices("CPU").size() >= 2) return true;
  WARN("the CPU was looked up before this case: run it alone to split the CPU");
  return false;
}

std::string capture_stderr(const std::function<void()>& f) {
  std::fflush(stderr);
  char path[] = "/tmp/tapeflow_stderr_XXXXXX";
  const int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  const int saved = dup(2);
  REQUIRE(saved >= 0);
  dup2(fd, 2);
  struct Restore {  // also when f throws
    int saved, fd;
    ~Restore() {
      std::fflush(stderr);
      dup2(saved, 2);
      close(saved);
      close(fd);
    }
  };
  try {
    const Restore restore{saved, fd};
    f();
  } catch (...) {
    std::remove(path);
    throw;
  }
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::remove(path);
  return text.str();
}

void check_values(const Tensor& got, const std::vector<double>& expected, double rtol,
                  double atol) {
  REQUIRE(got.defined());
  REQUIRE(static_cast<size_t>(got.num_elements()) == expected.size());
  const auto v = detail::to_double_vector(got);
  // One assertion per tensor (a Catch INFO per element costs about 1 us each).
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    const double g = v[i], w = expected[i];
    const bool ok = std::isnan(w)   ? std::isnan(g)
                    : std::isinf(w) ? g == w
                                    : std::abs(g - w) <= atol + rtol * std::abs(w);
    if (!ok && bad++ == 0) first = i;
  }
  INFO(bad << " of " << v.size() << " elements differ; first: element " << first << " of shape "
           << got.shape().to_string() << ": got " << (bad ? v[first] : 0.0) << ", want "
           << (bad ? expected[first] : 0.0));
  CHECK(bad == 0);
}

void check_close(const Tensor& got, const Tensor& want, double rtol, double atol) {
  REQUIRE(got.shape() == want.shape());
  REQUIRE(got.dtype() == want.dtype());
  check_values(got, detail::to_double_vector(want), rtol, atol);
}

void require_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
  } catch (const InvalidArgumentError& e) {
    const std::string msg = e.what();
    for (const auto& p : parts) {
      INFO("message: " << msg << "; expected to contain: " << p);
      CHECK(msg.find(p) != std::string::npos);
    }
    return;
  }
  FAIL("no InvalidArgumentError was thrown");
}

double rtol_of(DType d) {
  if (d == float16) return 2e-3;
  if (d == bfloat16) return 1.6e-2;
  if (d == float32) return 2e-6;
  if (d == float64) return 1e-13;
  return 0.0;
}

bool contains(const std::vector<DType>& v, DType d) {
  for (auto x : v)
    if (x == d) return true;
  return false;
}

std::vector<double> random_values(size_t n, double lo, double hi, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

EnvScope::EnvScope(const char* name, const std::string& value) : name_(name) {
  if (const char* old = std::getenv(name)) old_ = old;
  ::setenv(name, value.c_str(), 1);
}
EnvScope::~EnvScope() {
  if (old_)
    ::setenv(name_.c_str(), old_->c_str(), 1);
  else
    ::unsetenv(name_.c_str());
}

std::vector<double> central_differences(const std::function<double(const std::vector<double>&)>& f,
                                        const std::vector<double>& at, double h) {
  std::vector<double> d(at.size());
  for (size_t i = 0; i < at.size(); ++i) {
    auto p = at, m = at;
    p[i] += h;
    m[i] -= h;
    d[i] = (f(p) - f(m)) / (2 * h);
  }
  return d;
}

void check_gradient(const std::function<Tensor(const Tensor&)>& f, const TensorShape& shape,
                    std::vector<double> data, double rtol, double atol, double h) {
  if (data.empty()) data = random_values(static_cast<size_t>(shape.num_elements()), -1, 1, 3);
  const Tensor x = detail::from_doubles(data, shape, float64);
  const Tensor y0 = f(x);
  const auto wv = random_values(static_cast<size_t>(y0.num_elements()), -1, 1, 7);
  const Tensor w = detail::from_doubles(wv, y0.shape(), float64);
  GradientTape tape;
  tape.watch(x);
  const Tensor loss = reduce_sum(f(x) * w);
  const Tensor g = tape.gradient(loss, x);
  REQUIRE(g.defined());
  auto at = [&](const std::vector<double>& d) {
    const auto y = detail::to_double_vector(f(detail::from_doubles(d, shape, float64)));
    double s = 0;
    for (size_t k = 0; k < y.size(); ++k) s += y[k] * wv[k];
    return s;
  };
  check_values(g, central_differences(at, data, h), rtol, atol);
}

std::vector<Tensor> value_and_gradients(
    const std::function<Tensor(const std::vector<Tensor>&)>& loss, const std::vector<Tensor>& xs) {
  GradientTape tape;
  for (const Tensor& x : xs) tape.watch(x);
  const Tensor l = loss(xs);
  std::vector<Tensor> out{l};
  for (const Tensor& g : tape.gradient(l, xs)) out.push_back(g);
  return out;
}

std::vector<Tensor> first_and_second(const std::function<Tensor(const Tensor&)>& op,
                                     const Tensor& x) {
  GradientTape outer;
  outer.watch(x);
  GradientTape inner;
  inner.watch(x);
  const Tensor l = reduce_sum(sin(op(x)));
  const Tensor g = inner.gradient(l, x);
  return {l, g, outer.gradient(reduce_sum(g * g), x)};
}

}  // namespace tapeflow::testing
