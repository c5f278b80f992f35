// TF's tf.dynamic_partition, tf.dynamic_stitch and tf.unravel_index. Composites of gather,
// concat and the integer ops, so every device, dtype and gradient comes with them. Argument
// order follows TF 2.21. See docs/ops.md.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace tapeflow {

// data split by partitions (int32 or int64, of a shape that begins data's, values in [0,
// num_partitions)): result i stacks the entries data[j...] whose partitions[j...] == i, in
// row-major order, shape [count_i] + data.shape[partitions.rank:]. The counts depend on the
// values, which are read on the host: an InvalidArgumentError inside tf::function (as
// boolean_mask). The gradient scatters each result's back.
std::vector<Tensor> dynamic_partition(const Tensor& data, const Tensor& partitions,
                                      int num_partitions);
// merged[indices[m][i...], ...] = data[m][i..., ...]: indices int32 or int64 (non-negative),
// data[m]'s shape indices[m]'s followed by one shape shared by all; result [max index + 1] +
// that shape. Where an index repeats, the later entry (higher m, then later i) wins; positions
// no index names are zero (TF's kernel too). Values read on the host as dynamic_partition's.
// Gradients reach the winning entries only (TF's also reach the overwritten ones).
Tensor dynamic_stitch(const std::vector<Tensor>& indices, const std::vector<Tensor>& data);
// The coordinates in an array of shape dims (positive) of the flat (row-major) positions
// `indices` (int32 or int64, a scalar or 1-D, in [0, prod(dims))): shape [dims.size()] or
// [dims.size(), n], indices' dtype. The range is checked eagerly and, inside tf::function, at
// every call (a check node as tf::debugging's assertions).
Tensor unravel_index(const Tensor& indices, const std::vector<int64_t>& dims);

}  // namespace tapeflow
