// Sizes read at run time. A graph traced for tf::None dimensions must not bake in sizes that
// come from those dimensions (reduce_mean's element count, a gradient broadcast back to its
// input's shape). While such a trace runs (detail::thread_context().open_shapes), composites
// and vjps use these ops, which take the sizes from a tensor when they run; otherwise they
// return the same results through the usual constant-shape ops.
#pragma once

#include <utility>
#include <vector>

#include "core/tensor.h"

namespace tapeflow::detail {

bool open_shapes();
// The product of x's dimensions over `axes` (normalised; 1 when empty): a scalar of `dtype`.
Tensor element_count(const Tensor& x, const std::vector<int>& axes, DType dtype);
// broadcast_to(x, like.shape()) and reshape(x, like.shape()).
Tensor broadcast_like(const Tensor& x, const Tensor& like);
Tensor reshape_like(const Tensor& x, const Tensor& like);
// Views that add size-1 dimensions at the (sorted, output) positions `axes`, or remove the
// listed size-1 (or, for remove_axes of leading dimensions, any) dimensions: the other sizes
// come from x when the op runs.
Tensor insert_axes(const Tensor& x, const std::vector<int>& axes);
Tensor remove_axes(const Tensor& x, const std::vector<int>& axes);
// x with each run of groups[i] consecutive axes merged into one dimension, their product (1
// for a group of no axes); the groups cover x's axes in order. The sizes come from x when the
// op runs: (B, T, C) with groups {2, 1} is (B * T, C) for every B and T.
Tensor merge_axes(const Tensor& x, const std::vector<int>& groups);
// x reshaped to the dimensions parts[i] = (k, axis): the size of axis `axis` of sources[k] when
// the op runs (x must have that many elements). Undoes merge_axes: (B * T, C) back to (B, T, C)
// with parts {(0, 0), (0, 1), (1, 1)} of sources {x3, w}.
Tensor reshape_from(const Tensor& x, const std::vector<Tensor>& sources,
                    const std::vector<std::pair<int, int>>& parts);

}  // namespace tapeflow::detail
