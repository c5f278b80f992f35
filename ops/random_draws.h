// The draws of tapeflow's composite samplers (truncated_normal, categorical, gamma, poisson and
// their stateless forms), and their shared rejection loop. A sampler takes its uniform and
// normal tensors from a RandomDraws: stateful, each draw is a new random op under the seed rules
// of ops/random.h (new numbers at every call, traced or not); stateless, draw k comes from the
// k-th continuation of the seed pair, so that one pair always gives the same samples, eagerly and
// at every call of a traced function.
#pragma once

#include <array>
#include <cstdint>
#include <optional>

#include "core/tensor.h"

namespace tapeflow::detail {

class RandomDraws {
 public:
  static RandomDraws stateful(std::optional<int64_t> seed);
  static RandomDraws stateless(std::array<int64_t, 2> seed);

  Tensor uniform(const TensorShape& shape, double minval, double maxval, DType dtype);
  Tensor normal(const TensorShape& shape, double mean, double stddev, DType dtype);
  // uniform(like.shape(), ...) with the shape read from `like` when a trace for None
  // dimensions runs.
  Tensor uniform_like(const Tensor& like, double minval, double maxval, DType dtype);

 private:
  RandomDraws() = default;
  // The seed pair of the next stateless draw (advances the draw count).
  std::array<uint64_t, 2> next_pair();
  bool stateless_ = false;
  std::optional<int64_t> seed_;
  std::array<uint64_t, 2> pair_{};
  uint64_t draws_ = 0;
};

// A rejection sampler's rounds: round(pass) draws candidates, keeps the accepted ones and
// returns the acceptance (a bool tensor over every sample) after pass. Eagerly it runs until
// every sample is accepted (reading one bool per round); traced (the first round's acceptance
// is symbolic) it runs `traced_rounds` rounds, and the caller settles what is left. Returns
// whether it ran traced.
template <class Round>
bool rejection_rounds(int traced_rounds, Round&& round);

// all(accepted), read on the host.
bool all_true(const Tensor& accepted);

template <class Round>
bool rejection_rounds(int traced_rounds, Round&& round) {
  Tensor accepted = round(0);
  const bool traced = accepted.is_symbolic();
  for (int pass = 1; traced ? pass < traced_rounds : !all_true(accepted); ++pass)
    accepted = round(pass);
  return traced;
}

}  // namespace tapeflow::detail
