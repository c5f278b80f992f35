// More of TF's tf.math: count_nonzero, truncatediv, truncatemod, polyval, is_non_decreasing,
// is_strictly_increasing, invert_permutation, histogram_fixed_width_bins and erfcinv. All are
// composites of existing primitives (every device, and the gradients those give). See
// docs/ops.md.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/tensor.h"

namespace tapeflow::math {

// The number of non-zero (true) elements over axes (none: all; {}: each element alone), as TF's
// tf.math.count_nonzero; dtype int32 or int64 (TF's default) or a floating dtype.
Tensor count_nonzero(const Tensor& input, std::optional<std::vector<int>> axis = std::nullopt,
                     bool keepdims = false, DType dtype = int64);
// x / y rounded toward zero (C's integer division; floating tensors too: 7.5 / 2 is 3), as TF's
// tf.truncatediv. An integer division by zero is an InvalidArgumentError (eager) as floordiv's.
Tensor truncatediv(const Tensor& x, const Tensor& y);
// The remainder of truncatediv: x - truncatediv(x, y) * y, the sign of x (C's %, std::fmod for
// floating tensors), as TF's tf.math.truncatemod.
Tensor truncatemod(const Tensor& x, const Tensor& y);
// coeffs[0] * x^(n-1) + ... + coeffs[n-1] by Horner's rule, as TF's tf.math.polyval (no
// coefficients: zeros like x).
Tensor polyval(const std::vector<Tensor>& coeffs, const Tensor& x);
// Whether x (flattened, row-major) never decreases / always increases: a bool scalar (true for
// fewer than two elements), as TF's.
Tensor is_non_decreasing(const Tensor& x);
Tensor is_strictly_increasing(const Tensor& x);
// y with y[x[i]] = i for a 1-D int32 or int64 permutation x of 0 .. n-1, as TF's
// tf.math.invert_permutation. x must be a permutation: checked eagerly and, traced, at every
// call.
Tensor invert_permutation(const Tensor& x);
// The bin of each value of a histogram_fixed_width (nbins equal bins over value_range = [lo, hi];
// values outside go to the first or last bin), as TF's tf.histogram_fixed_width_bins.
Tensor histogram_fixed_width_bins(const Tensor& values, const Tensor& value_range,
                                  int64_t nbins = 100, DType dtype = int32);
// The inverse of erfc on (0, 2): -ndtri(x / 2) / sqrt(2), as TF's tf.math.erfcinv.
Tensor erfcinv(const Tensor& x);

}  // namespace tapeflow::math

namespace tapeflow {
using math::histogram_fixed_width_bins;
using math::invert_permutation;
using math::truncatediv;
using math::truncatemod;
}  // namespace tapeflow
