// TF's tf.space_to_batch_nd / tf.batch_to_space_nd (tf.space_to_batch and tf.batch_to_space in
// TF 2 are the same ops) and tf.nn.atrous_conv2d / atrous_conv2d_transpose. Composites of pad,
// reshape, transpose and slice, so every device, dtype and gradient order comes with them.
// Argument order follows TF 2.21. See docs/ops.md.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace tapeflow {

// input [batch] + spatial (M dimensions, M = block_shape.size() >= 1) + remaining: the spatial
// dimensions zero-padded by paddings[i] = {before, after}, then cut into block_shape[i] blocks
// whose offsets go to the batch: [batch * prod(block_shape)] + padded_i / block_shape[i] +
// remaining, batch index (offset, b) at offset * batch + b, as TF's. Each padded size must be a
// multiple of its block. The dimensions but the batch must be known (the batch may be None).
Tensor space_to_batch_nd(const Tensor& input, const std::vector<int64_t>& block_shape,
                         const std::vector<std::pair<int64_t, int64_t>>& paddings);
// The inverse: input [batch] + spatial + remaining, batch a multiple of prod(block_shape), to
// [batch / prod(block_shape)] + spatial_i * block_shape[i] + remaining, then cropped by
// crops[i] = {start, end}.
Tensor batch_to_space_nd(const Tensor& input, const std::vector<int64_t>& block_shape,
                         const std::vector<std::pair<int64_t, int64_t>>& crops);
// TF 2's names for the same ops.
inline Tensor space_to_batch(const Tensor& input, const std::vector<int64_t>& block_shape,
                             const std::vector<std::pair<int64_t, int64_t>>& paddings) {
  return space_to_batch_nd(input, block_shape, paddings);
}
inline Tensor batch_to_space(const Tensor& input, const std::vector<int64_t>& block_shape,
                             const std::vector<std::pair<int64_t, int64_t>>& crops) {
  return batch_to_space_nd(input, block_shape, crops);
}

namespace nn {
using tapeflow::batch_to_space;
using tapeflow::space_to_batch;
// TF's tf.nn.atrous_conv2d: conv2d of NHWC value with filters (KH, KW, C, O) dilated by rate
// (>= 1), stride 1. One dilated conv2d primitive (TF reaches the same result through
// space_to_batch).
Tensor atrous_conv2d(const Tensor& value, const Tensor& filters, int rate,
                     const std::string& padding);
// TF's tf.nn.atrous_conv2d_transpose: conv2d_transpose with filters (KH, KW, O, C) dilated by
// rate, stride 1, to output_shape (N, H, W, O).
Tensor atrous_conv2d_transpose(const Tensor& value, const Tensor& filters,
                               const TensorShape& output_shape, int rate,
                               const std::string& padding);
}  // namespace nn

}  // namespace tapeflow
