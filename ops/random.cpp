#include "ops/random.h"

#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <random>
#include <tuple>

#include "core/check.h"
#include "core/context.h"
#include "core/hash.h"
#include "ops/dispatch.h"

namespace tapeflow {

namespace detail {
namespace {

struct SeedState {
  std::mutex mu;
  std::optional<int64_t> global;
  uint64_t counter = 0;
  // Calls made so far per (global seed, op seed) pair: TF's eager kernels for a seed pair keep
  // drawing new numbers, so a second call with the same op seed gives new values.
  std::map<std::pair<uint64_t, uint64_t>, uint64_t> calls;
  std::optional<std::mt19937_64> entropy;  // seeded from std::random_device on first use
};

SeedState& seed_state() {
  static SeedState s;
  return s;
}

}  // namespace

// The n-th call (n >= 1) with a given seed pair continues the stream under a mixed op seed.
uint64_t continue_random_stream(uint64_t op, uint64_t n) {
  return op ^ splitmix64_mix(n * kSplitmix64Gamma);
}

std::pair<uint64_t, uint64_t> resolve_random_seeds(std::optional<int64_t> op_seed) {
  SeedState& st = seed_state();
  std::lock_guard<std::mutex> lock(st.mu);
  if (op_seed) {
    const uint64_t g = st.global ? static_cast<uint64_t>(*st.global)
                                 : static_cast<uint64_t>(kDefaultGraphSeed);
    const uint64_t op = static_cast<uint64_t>(*op_seed);
    const uint64_t n = st.calls[{g, op}]++;
    return {g, n == 0 ? op : continue_random_stream(op, n)};
  }
  if (st.global) return {static_cast<uint64_t>(*st.global), st.counter++};
  if (!st.entropy) {
    std::random_device rd;
    std::seed_seq seq{rd(), rd(), rd(), rd(), rd(), rd(), rd(), rd()};
    st.entropy.emplace(seq);
  }
  const uint64_t a = (*st.entropy)();
  const uint64_t b = (*st.entropy)();
  return {a, b};
}

std::optional<int64_t> global_random_seed() {
  SeedState& st = seed_state();
  std::lock_guard<std::mutex> lock(st.mu);
  return st.global;
}

int64_t default_graph_seed() { return kDefaultGraphSeed; }

void clear_random_seed() {
  SeedState& st = seed_state();
  std::lock_guard<std::mutex> lock(st.mu);
  st.global.reset();
  st.counter = 0;
  st.calls.clear();
}

}  // namespace detail

namespace random {

void set_seed(int64_t seed) {
  auto& st = detail::seed_state();
  std::lock_guard<std::mutex> lock(st.mu);
  st.global = seed;
  st.counter = 0;
  st.calls.clear();
}

namespace {

void check_shape(const char* op, const TensorShape& shape) {
  TF_CHECK_ARG(shape.is_fully_defined(), op, "shape {} has an unknown dimension",
               shape.to_string());
}

}  // namespace

Tensor normal(const TensorShape& shape, double mean, double stddev, DType dtype,
              std::optional<int64_t> seed) {
  const char* op = "random_normal";
  TF_CHECK_ARG(is_floating(dtype), op,
               "dtype must be float16, bfloat16, float32 or float64, got {}", dtype_name(dtype));
  check_shape(op, shape);
  TF_CHECK_ARG(stddev >= 0, op, "stddev must be non-negative, got {}", stddev);
  TF_CHECK_ARG(std::isfinite(mean) && std::isfinite(stddev), op,
               "mean and stddev must be finite, got mean {} and stddev {}", mean, stddev);
  const auto [k, k2] = detail::resolve_random_seeds(seed);
  prims::RandomNormal prim(shape, dtype, mean, stddev, k, k2);
  if (detail::thread_context().trace) prim.executions = std::make_shared<std::atomic<uint64_t>>(0);
  return detail::dispatch(prim, std::span<const Tensor>{});
}

Tensor uniform(const TensorShape& shape, double minval, double maxval, DType dtype,
               std::optional<int64_t> seed) {
  // Checked before the seeds are resolved: a failed call does not advance the op counter.
  prims::RandomUniform prim =
      detail::uniform_primitive("random_uniform", shape, minval, maxval, dtype, 0, 0);
  std::tie(prim.seed, prim.seed2) = detail::resolve_random_seeds(seed);
  if (detail::thread_context().trace) prim.executions = std::make_shared<std::atomic<uint64_t>>(0);
  return detail::dispatch(prim, std::span<const Tensor>{});
}

}  // namespace random

namespace detail {

prims::RandomUniform uniform_primitive(const char* op, const TensorShape& shape, double minval,
                                       double maxval, DType dtype, uint64_t k, uint64_t k2) {
  const bool is_int = dtype == int32 || dtype == int64;
  TF_CHECK_ARG(is_floating(dtype) || is_int, op,
               "dtype must be float16, bfloat16, float32, float64, int32 or int64, got {}",
               dtype_name(dtype));
  random::check_shape(op, shape);
  TF_CHECK_ARG(std::isfinite(minval) && std::isfinite(maxval), op,
               "minval and maxval must be finite, got {} and {}", minval, maxval);
  TF_CHECK_ARG(maxval > minval, op, "needs minval < maxval, got minval {} and maxval {} ({})",
               minval, maxval, dtype_name(dtype));
  int64_t imin = 0, imax = 0;
  if (is_int) {
    TF_CHECK_ARG(minval == std::floor(minval) && maxval == std::floor(maxval), op,
                 "minval and maxval must be whole numbers for {}, got {} and {}", dtype_name(dtype),
                 minval, maxval);
    const double lim = dtype == int32 ? 2147483648.0 : 9223372036854775808.0;
    TF_CHECK_ARG(minval >= -lim && maxval <= lim, op,
                 "minval {} and maxval {} must lie in the range of {} (maxval may be one past it)",
                 minval, maxval, dtype_name(dtype));
    imin = static_cast<int64_t>(minval);
    // maxval is exclusive: 2^31 (int32) is allowed; 2^63 (int64) saturates to the largest int64.
    imax = maxval >= 9223372036854775807.0 ? std::numeric_limits<int64_t>::max()
                                           : static_cast<int64_t>(maxval);
  }
  prims::RandomUniform prim(shape, dtype, minval, maxval, k, k2);
  prim.imin = imin;
  prim.imax = imax;
  return prim;
}

Tensor random_uniform_like(const Tensor& like, double minval, double maxval, DType dtype,
                           std::optional<int64_t> seed) {
  if (!thread_context().open_shapes) return random::uniform(like.shape(), minval, maxval, dtype, seed);
  TF_CHECK_ARG(is_floating(dtype), "random_uniform", "random_uniform_like takes float dtypes, got {}",
               dtype_name(dtype));
  const auto [k, k2] = resolve_random_seeds(seed);
  prims::RandomUniform prim(TensorShape{}, dtype, minval, maxval, k, k2);
  prim.like = true;
  if (thread_context().trace) prim.executions = std::make_shared<std::atomic<uint64_t>>(0);
  const Tensor in[1] = {like};
  return dispatch(prim, in);
}
Tensor random_normal_like(const Tensor& like, double mean, double stddev, DType dtype,
                          std::optional<int64_t> seed) {
  if (!thread_context().open_shapes) return random::normal(like.shape(), mean, stddev, dtype, seed);
  TF_CHECK_ARG(is_floating(dtype), "random_normal", "random_normal_like takes float dtypes, got {}",
               dtype_name(dtype));
  TF_CHECK_ARG(stddev >= 0 && std::isfinite(mean) && std::isfinite(stddev), "random_normal",
               "needs a finite mean and a finite, non-negative stddev, got mean {} and stddev {}",
               mean, stddev);
  const auto [k, k2] = resolve_random_seeds(seed);
  prims::RandomNormal prim(TensorShape{}, dtype, mean, stddev, k, k2);
  prim.like = true;
  if (thread_context().trace) prim.executions = std::make_shared<std::atomic<uint64_t>>(0);
  const Tensor in[1] = {like};
  return dispatch(prim, in);
}
}  // namespace detail

namespace prims {

namespace {
// The seed2 of a traced random op's execution n >= 1: a hash of the pair. (Deriving it as eager
// calls do, seed2 ^ f(n), made two ops with one op seed in a body repeat each other's numbers:
// the second op's traced seed2 is itself op ^ f(1), so its first replay ran stream op.)
uint64_t replay_stream(uint64_t seed2, uint64_t n) {
  using detail::splitmix64_mix;
  return splitmix64_mix(seed2 ^
                        splitmix64_mix(n * detail::kSplitmix64Gamma + 0xD1B54A32D192ED03ull));
}
}  // namespace

// A traced random op: the first execution uses the traced seeds (the numbers the eager op would
// have drawn), execution n >= 1 a stream of its own derived from them.
template <class P>
static bool produce_next(const P& p, std::span<const Tensor> in, std::span<Tensor> out,
                         Device device) {
  if (!p.executions) return false;
  const uint64_t n = p.executions->fetch_add(1);
  if (n == 0) return false;
  P next(p);
  next.executions = nullptr;
  next.seed2 = replay_stream(p.seed2, n);
  out[0] = detail::empty(p.like ? in[0].shape() : p.shape, p.dtype, device);
  detail::run_kernel(next, device, in, out);
  return true;
}
bool RandomNormal::produce(std::span<const Tensor> in, std::span<Tensor> out, Device device) const {
  return produce_next(*this, in, out, device);
}
bool RandomUniform::produce(std::span<const Tensor> in, std::span<Tensor> out, Device device) const {
  return produce_next(*this, in, out, device);
}

void RandomNormal::infer(std::span<const Tensor> in, std::span<TensorMeta> out) const {
  out[0] = {like ? in[0].shape() : shape, dtype};
}
std::string RandomNormal::trace_attributes() const {
  return fmt::format("shape={}, dtype={}, mean={}, stddev={}", like ? "like" : shape.to_string(),
                     dtype_name(dtype), mean, stddev);
}
std::string RandomNormal::attributes() const {
  return fmt::format("shape={}, dtype={}, mean={}, stddev={}, seed={}, seed2={}", shape.to_string(),
                     dtype_name(dtype), mean, stddev, seed, seed2);
}

void RandomUniform::infer(std::span<const Tensor> in, std::span<TensorMeta> out) const {
  out[0] = {like ? in[0].shape() : shape, dtype};
}
std::string RandomUniform::trace_attributes() const {
  return fmt::format("shape={}, dtype={}, minval={}, maxval={}, imin={}, imax={}",
                     like ? "like" : shape.to_string(), dtype_name(dtype), minval, maxval, imin, imax);
}
std::string RandomUniform::attributes() const {
  if (is_integer(dtype))
    return fmt::format("shape={}, dtype={}, minval={}, maxval={}, seed={}, seed2={}",
                       shape.to_string(), dtype_name(dtype), imin, imax, seed, seed2);
  return fmt::format("shape={}, dtype={}, minval={}, maxval={}, seed={}, seed2={}",
                     like ? "like input" : shape.to_string(), dtype_name(dtype), minval, maxval,
                     seed, seed2);
}

}  // namespace prims

}  // namespace tapeflow
