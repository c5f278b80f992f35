// Test helpers shared by every test binary: the devices under test, value comparison against
// plain references, and error-message matching.
#pragma once

#include <catch2/catch.hpp>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/tensor.h"

namespace tapeflow::testing {

// CPU:0 plus every GPU this machine has (the [cuda] cases skip themselves without one).
std::vector<Device> devices_under_test();
bool has_gpu();
// True, with a Catch2 warning naming the case's subject, when TAPEFLOW_JIT_COMPILE=0 turns
// jit_compile off for every function (tools/gpu_check.sh's unfused pass): the cases about what
// jit_compile does skip themselves then.
bool jit_compile_forced_off(const char* what);
// Splits the CPU into two logical devices if nothing looked the CPUs up yet; false (with a
// Catch2 warning to run the case alone, as CTest does) when that came too late.
bool split_cpu_in_two();

// Checks shape and every element against `expected` (row-major) within
// |got - want| <= atol + rtol * |want|; NaNs must match NaNs.
void check_values(const Tensor& got, const std::vector<double>& expected, double rtol = 1e-6,
                  double atol = 1e-6);
void check_close(const Tensor& got, const Tensor& want, double rtol = 1e-6, double atol = 1e-6);
// Requires that `f` throws InvalidArgumentError with every one of `parts` in its message.
void require_error(const std::function<void()>& f, const std::vector<std::string>& parts);
// Tolerance of a float64 reference against a result stored in dtype d (0 for integers).
double rtol_of(DType d);
bool contains(const std::vector<DType>& v, DType d);
inline const std::vector<DType> kAllDTypes = {float16, bfloat16, float32, float64,
                                              int32,   int64,    uint8,   bool_};

// What `f` writes to the process's standard error (tapeflow's log goes there), read back from a
// temporary file that fd 2 points to meanwhile.
std::string capture_stderr(const std::function<void()>& f);

// Sets an environment variable while it lives, then restores it (the jit reads its switches,
// e.g. TAPEFLOW_FUSION and TAPEFLOW_MEMORY_PLAN, when a graph is optimised).
class EnvScope {
 public:
  EnvScope(const char* name, const std::string& value);
  ~EnvScope();
  EnvScope(const EnvScope&) = delete;
  EnvScope& operator=(const EnvScope&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// Deterministic pseudo-random doubles in [lo, hi) for building inputs.
std::vector<double> random_values(size_t n, double lo = -1.0, double hi = 1.0, unsigned seed = 1);

// The central differences (f(at + h e_i) - f(at - h e_i)) / 2h of a scalar function, one per
// element of `at`.
std::vector<double> central_differences(const std::function<double(const std::vector<double>&)>& f,
                                        const std::vector<double>& at, double h);

// The tape's gradient of sum(f(x) * w) (w fixed random weights) for a float64 x of `shape`,
// starting at `data` (else random values in [-1, 1)), against central differences of step h.
void check_gradient(const std::function<Tensor(const Tensor&)>& f, const TensorShape& shape,
                    std::vector<double> data = {}, double rtol = 1e-7, double atol = 1e-8,
                    double h = 1e-6);

// {loss(xs), d loss / d xs[0], d loss / d xs[1], ...}: a tape watches xs while `loss` runs
// (eagerly, or traced inside a tf::function whose body this is).
std::vector<Tensor> value_and_gradients(
    const std::function<Tensor(const std::vector<Tensor>&)>& loss, const std::vector<Tensor>& xs);

// {l, dl/dx, d|dl/dx|^2/dx} for l = sum(sin(op(x))): nested tapes (inside the function when
// traced), for sweeps that check first and second-order gradients.
std::vector<Tensor> first_and_second(const std::function<Tensor(const Tensor&)>& op,
                                     const Tensor& x);

}  // namespace tapeflow::testing

// REQUIRE that EXPR throws exception type E whose message contains SUBSTRING.
#define TF_REQUIRE_THROWS_CONTAINING(EXPR, E, SUBSTRING)                                          \
  REQUIRE_THROWS_MATCHES(                                                                         \
      EXPR, E,                                                                                    \
      Catch::Matchers::Predicate<const E&>(                                                       \
          [&](const E& e) { return std::string(e.what()).find(SUBSTRING) != std::string::npos; }, \
          std::string("message contains \"") + (SUBSTRING) + "\""))
