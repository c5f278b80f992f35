// Random tensors from a counter-based Philox-4x32-10 stream: the same seeds give the same
// numbers on every device and for every thread count. Seeds follow TF: a global seed
// (set_seed) plus an op seed; without an op seed, each call draws the next one from a counter
// that set_seed resets.
#pragma once

#include <cstdint>
#include <optional>

#include "ops/primitive.h"

namespace tapeflow::random {

Tensor normal(const TensorShape& shape, double mean = 0.0, double stddev = 1.0,
              DType dtype = float32, std::optional<int64_t> seed = std::nullopt);
// [minval, maxval); integer dtypes need maxval > minval.
Tensor uniform(const TensorShape& shape, double minval = 0.0, double maxval = 1.0,
               DType dtype = float32, std::optional<int64_t> seed = std::nullopt);
void set_seed(int64_t seed);

}  // namespace tapeflow::random
