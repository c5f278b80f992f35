// More of TF's tf.math: count_nonzero, truncatediv, truncatemod, polyval, is_non_decreasing,
// is_strictly_increasing, invert_permutation, histogram_fixed_width_bins, erfcinv, add_n,
// accumulate_n, scalar_mul, truediv, realdiv, rint, reciprocal_no_nan, zero_fraction and
// nextafter. All are
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
// The elementwise sum of the inputs, as TF's tf.add_n: one or more tensors of one shape and
// dtype (numeric; no broadcasting, as TF's AddN), summed left to right; the gradient of each
// input is the cotangent. accumulate_n is TF's deprecated alias with the same result.
Tensor add_n(const std::vector<Tensor>& inputs);
Tensor accumulate_n(const std::vector<Tensor>& inputs);
// scalar * x for a one-element scalar, as TF's tf.math.scalar_mul (a C++ number takes x's dtype).
Tensor scalar_mul(const Tensor& scalar, const Tensor& x);
// x / y as TF's tf.math.truediv: integers are converted first (uint8 to float32, int32 and int64
// to float64), floats divide as they are; the operands must share a dtype (tapeflow's divide).
Tensor truediv(const Tensor& x, const Tensor& y);
// x / y for floating tensors, as TF's tf.realdiv (TF has no CPU kernel for integers; tapeflow
// raises an InvalidArgumentError naming realdiv).
Tensor realdiv(const Tensor& x, const Tensor& y);
// The nearest integer, halves to even, as TF's tf.math.rint (tf::round's values; floating dtypes
// only, as TF's).
Tensor rint(const Tensor& x);
// 1 / x, 0 where x is 0 (either sign), as TF's tf.math.reciprocal_no_nan: floating dtypes.
Tensor reciprocal_no_nan(const Tensor& x);
// The fraction of x's elements that are zero (false), a float32 scalar, as TF's
// tf.math.zero_fraction (also tf.nn.zero_fraction); NaN for an empty x, as TF.
Tensor zero_fraction(const Tensor& value);
// The next representable value after x1 towards x2, elementwise with broadcasting, as TF's
// tf.math.nextafter: float32 or float64 (both the same), x2 where x1 == x2, NaN where either is
// NaN, +-the smallest subnormal from 0. Its gradient is the upstream gradient for x1 (TF's) and
// none for x2.
Tensor nextafter(const Tensor& x1, const Tensor& x2);

}  // namespace tapeflow::math

namespace tapeflow {
using math::add_n;
using math::histogram_fixed_width_bins;
using math::invert_permutation;
using math::realdiv;
using math::scalar_mul;
using math::truediv;
using math::truncatediv;
using math::truncatemod;
}  // namespace tapeflow

namespace tapeflow::nn {
using math::zero_fraction;
}  // namespace tapeflow::nn
