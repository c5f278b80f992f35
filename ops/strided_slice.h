// tf::strided_slice: TF's tf.strided_slice, the op behind Python's x[1:5:2, ..., tf.newaxis, 0].
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace tapeflow {

// input[begin[i]:end[i]:strides[i]] for each entry i of the spec, as TF's tf.strided_slice.
// begin, end and strides (empty: all 1) have one entry per spec item; an entry's bit in
//   begin_mask / end_mask   ignores begin[i] / end[i] (the slice starts / runs to the end in
//                           the stride's direction: Python's x[:3], x[2:], x[::-1]);
//   ellipsis_mask           makes it Python's ... (at most one): it covers the dimensions the
//                           other entries leave;
//   new_axis_mask           inserts a size-1 dimension (tf.newaxis) there;
//   shrink_axis_mask        takes the one element begin[i] and drops the dimension (x[3]).
// Negative begin and end count from the end; out-of-range bounds are clamped, as Python's slices
// (an empty result where they cross), except a shrunk index, which must exist. Dimensions past
// the spec are taken whole. Any dtype, every device; the gradient scatters the cotangent back
// (zeros elsewhere). A composite of one slice (stride-1 entries) and one gather per other
// stride; in a trace for None dimensions, entries that take a dimension whole read its size when
// the graph runs.
Tensor strided_slice(const Tensor& input, const std::vector<int64_t>& begin,
                     const std::vector<int64_t>& end, const std::vector<int64_t>& strides = {},
                     int64_t begin_mask = 0, int64_t end_mask = 0, int64_t ellipsis_mask = 0,
                     int64_t new_axis_mask = 0, int64_t shrink_axis_mask = 0);

}  // namespace tapeflow
