// Random tensors from a counter-based Philox-4x32-10 stream: the same seeds give the same
// numbers on every device and for every thread count. Seeds follow TF: a global seed
// (set_seed) plus an op seed; without an op seed, each call draws the next one from a counter
// that set_seed resets.
//
// Seed resolution (TF's tf.random.get_seed):
//   global seed set,   op seed given   -> (global seed, op seed)
//   global seed set,   no op seed      -> (global seed, counter++); set_seed resets the counter
//   no global seed,    op seed given   -> (87654321, op seed)   (TF's DEFAULT_GRAPH_SEED)
//   neither                            -> two 64-bit seeds from std::random_device
// As TF's eager kernels (cached per seed pair), a second call with the same op seed continues
// that pair's stream and gives new numbers (so dropout(x, rate, seed) draws a new mask each
// step); set_seed resets every pair, so a program that sets its seed is reproducible.
//
// Algorithms (see ops/cpu/philox.h for the stream layout):
//   float uniform: 23-bit (float32; 10 for float16, 7 for bfloat16) or 52-bit (float64) mantissa
//     construction in [0, 1), scaled to [minval, maxval); a value that rounds up to maxval is
//     replaced by the largest value below it, so the interval stays half-open.
//   int32 / int64 uniform: minval + draw % (maxval - minval) with a 32- or 64-bit draw, as TF.
//     The modulo is biased by at most range / 2^32 (int32) or range / 2^64 (int64) relative
//     probability between values, which is below anything a test can see for ranges far from
//     2^32; TF accepts the same bias.
//   normal: Box-Muller on two uniforms (the first taken as 1 - u in (0, 1], so log never sees 0),
//     computed in float32 for the 16/32-bit types and in float64 for float64.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "ops/primitive.h"

namespace tapeflow::random {

Tensor normal(const TensorShape& shape, double mean = 0.0, double stddev = 1.0,
              DType dtype = float32, std::optional<int64_t> seed = std::nullopt);
// [minval, maxval); integer dtypes need maxval > minval.
Tensor uniform(const TensorShape& shape, double minval = 0.0, double maxval = 1.0,
               DType dtype = float32, std::optional<int64_t> seed = std::nullopt);
void set_seed(int64_t seed);

}  // namespace tapeflow::random

namespace tapeflow::detail {
// The (seed, seed2) pair of the next random op under the rules above (advances the counter).
std::pair<uint64_t, uint64_t> resolve_random_seeds(std::optional<int64_t> op_seed);
// random::uniform(like.shape(), ...) whose shape is read from `like` when it runs.
Tensor random_uniform_like(const Tensor& like, double minval, double maxval, DType dtype,
                           std::optional<int64_t> seed);
// random::normal(like.shape(), ...) whose shape is read from `like` when it runs.
Tensor random_normal_like(const Tensor& like, double mean, double stddev, DType dtype,
                          std::optional<int64_t> seed);
// The seed set by tf::random::set_seed, if any (reading it advances no stream).
std::optional<int64_t> global_random_seed();
// TF's DEFAULT_GRAPH_SEED, used with an op seed when no global seed is set.
int64_t default_graph_seed();
// Forgets the global seed (TF's tf.random.set_seed(None)); tests use it to reach the other rules.
void clear_random_seed();
inline constexpr int64_t kDefaultGraphSeed = 87654321;
// The seed2 of the n-th continuation (n >= 1) of a stream.
uint64_t continue_random_stream(uint64_t seed2, uint64_t n);
}  // namespace tapeflow::detail

namespace tapeflow::prims {

// No tensor inputs: placed on the innermost DeviceScope, else the default device. Not a side
// effect, but never merged with another op unless both drew the same seeds: attributes() names
// them, so equal attributes really mean equal values.
struct RandomNormal final : PrimitiveBase<RandomNormal> {
  TensorShape shape;
  DType dtype;
  double mean, stddev;
  uint64_t seed, seed2;
  RandomNormal(TensorShape s, DType d, double m, double sd, uint64_t k, uint64_t k2)
      : shape(s), dtype(d), mean(m), stddev(sd), seed(k), seed2(k2) {}
  const char* name() const override { return "random_normal"; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override;
  TF_DECLARE_KERNELS
  std::string attributes() const override;
  std::string trace_attributes() const override;
  // Shape from input 0 when it runs (graphs for None dimensions); `shape` is then unused.
  bool like = false;
  std::vector<Tensor> vjp(std::span<const Tensor>, std::span<const Tensor>,
                          std::span<const int> argnums, std::span<const Tensor>) const override {
    return std::vector<Tensor>(argnums.size());  // the numbers do not depend on the input
  }
  uint32_t vjp_saves() const override { return 0; }
  // Set when the op is traced into a graph: each replay continues the stream (the first uses
  // the traced seeds), so a traced function draws new numbers at every call, as TF's.
  std::shared_ptr<std::atomic<uint64_t>> executions;
  bool has_side_effects() const override { return executions != nullptr; }
  bool produce(std::span<const Tensor> in, std::span<Tensor> out, Device device) const override;
};

struct RandomUniform final : PrimitiveBase<RandomUniform> {
  TensorShape shape;
  DType dtype;
  double minval, maxval;       // floating dtypes
  int64_t imin = 0, imax = 0;  // integer dtypes
  uint64_t seed, seed2;
  RandomUniform(TensorShape s, DType d, double lo, double hi, uint64_t k, uint64_t k2)
      : shape(s), dtype(d), minval(lo), maxval(hi), seed(k), seed2(k2) {}
  const char* name() const override { return "random_uniform"; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override;
  TF_DECLARE_KERNELS
  std::string attributes() const override;
  std::string trace_attributes() const override;
  // Shape from input 0 when it runs (graphs for None dimensions); `shape` is then unused.
  bool like = false;
  std::vector<Tensor> vjp(std::span<const Tensor>, std::span<const Tensor>,
                          std::span<const int> argnums, std::span<const Tensor>) const override {
    return std::vector<Tensor>(argnums.size());  // the numbers do not depend on the input
  }
  uint32_t vjp_saves() const override { return 0; }
  // Set when the op is traced into a graph: each replay continues the stream (the first uses
  // the traced seeds), so a traced function draws new numbers at every call, as TF's.
  std::shared_ptr<std::atomic<uint64_t>> executions;
  bool has_side_effects() const override { return executions != nullptr; }
  bool produce(std::span<const Tensor> in, std::span<Tensor> out, Device device) const override;
};

}  // namespace tapeflow::prims

namespace tapeflow::detail {
// A RandomUniform of `shape` drawing from the pair (k, k2), after random::uniform's checks of
// the dtype (floating, int32, int64), the shape and the bounds (finite, minval < maxval, whole
// numbers within the integer dtype), named `op`. No execution counter.
prims::RandomUniform uniform_primitive(const char* op, const TensorShape& shape, double minval,
                                       double maxval, DType dtype, uint64_t k, uint64_t k2);
}  // namespace tapeflow::detail
