// N-dimensional indexing: TF's gather_nd, scatter_nd, tensor_scatter_nd_add/_sub/_update/_max/_min,
// boolean_mask and clip_by_global_norm. All but tensor_scatter_nd_update (primitive
// ScatterRowsUpdate, ops/scatter.h) are composites of gather, unsorted_segment_sum, reshape and
// elementwise ops; all run on every device and are differentiable (gradients reach params,
// tensors and updates; indices and masks get none). See docs/ops.md.
#pragma once

#include <utility>
#include <vector>

#include "core/tensor.h"

namespace tapeflow {

// TF's tf.gather_nd: indices (int32 or int64) of shape (..., M) pick slices of params; the
// result has shape indices.shape[:-1] + params.shape[batch_dims + M:]. With batch_dims = b the
// first b dimensions of params and indices are batch dimensions that must match, and each index
// addresses params within its batch. An index outside params is an InvalidArgumentError naming
// it (as TF's CPU kernel); inside a traced function the check runs when the gather does (a GPU
// gives zeros there, as TF's GPU kernel).
Tensor gather_nd(const Tensor& params, const Tensor& indices, int batch_dims = 0);

// TF's tf.scatter_nd: a tensor of `shape`, zero except where indices (..., M) point; each update
// slice (updates has shape indices.shape[:-1] + shape[M:]) is added there, so duplicate indices
// sum (a logical or for bool). Numeric dtypes but int64 (and bool); out-of-range indices are an
// InvalidArgumentError, as for gather_nd.
Tensor scatter_nd(const Tensor& indices, const Tensor& updates, const TensorShape& shape);

// tensor plus (minus) scatter_nd(indices, updates, tensor.shape()): TF's
// tf.tensor_scatter_nd_add and tf.tensor_scatter_nd_sub.
Tensor tensor_scatter_nd_add(const Tensor& tensor, const Tensor& indices, const Tensor& updates);
Tensor tensor_scatter_nd_sub(const Tensor& tensor, const Tensor& indices, const Tensor& updates);

// TF's tf.tensor_scatter_nd_update: tensor with the slices at indices replaced by updates (shape
// indices.shape[:-1] + tensor.shape[M:]); when indices repeat, the last update wins, on every
// device (TF leaves the order unspecified). Every dtype; gradients reach tensor (zero where
// replaced) and the updates that won.
Tensor tensor_scatter_nd_update(const Tensor& tensor, const Tensor& indices, const Tensor& updates);

// TF's tf.tensor_scatter_nd_max / _min: tensor with each addressed slice replaced by its
// element-wise maximum (minimum) with the updates aimed at it (repeated indices: all of them).
// Floating, int32 and int64; gradients as maximum's and the segment reductions' (to the largest
// or smallest of tensor and updates).
Tensor tensor_scatter_nd_max(const Tensor& tensor, const Tensor& indices, const Tensor& updates);
Tensor tensor_scatter_nd_min(const Tensor& tensor, const Tensor& indices, const Tensor& updates);

// TF's tf.boolean_mask: the elements (or slices) of tensor where the bool mask is true. The mask
// covers dimensions [axis, axis + mask.rank()) of tensor, which collapse into one dimension as
// long as the number of true entries. The result's shape depends on the mask's values, so the
// mask is read on the host; inside a traced function that is an InvalidArgumentError (use
// tf::where with a fill value there).
Tensor boolean_mask(const Tensor& tensor, const Tensor& mask, int axis = 0);

// TF's tf.clip_by_global_norm: scales every tensor by clip_norm / max(global_norm, clip_norm),
// where global_norm is the euclidean norm of all their elements together (or use_norm when
// given). Undefined tensors (TF's None) stay undefined and are left out of the norm. Returns the
// clipped list and the global norm (float32 scalar, or the tensors' dtype). An infinite or NaN
// global norm makes every clipped element NaN, as in TF.
std::pair<std::vector<Tensor>, Tensor> clip_by_global_norm(const std::vector<Tensor>& t_list,
                                                           double clip_norm,
                                                           const Tensor& use_norm = Tensor());
// TF's tf.linalg.global_norm: sqrt of the sum of squares of every element of every tensor.
Tensor global_norm(const std::vector<Tensor>& t_list);

namespace linalg {
using ::tapeflow::global_norm;
}  // namespace linalg

}  // namespace tapeflow
