// Shape and data-movement ops. reshape is a view (no copy); the rest copy.
#pragma once

#include <utility>
#include <vector>

#include "ops/primitive.h"

namespace tapeflow {

// One dimension may be -1 and is inferred.
Tensor reshape(const Tensor& x, const TensorShape& shape);
// perm defaults to reversing the dimensions.
Tensor transpose(const Tensor& x, const std::vector<int>& perm = {});
Tensor expand_dims(const Tensor& x, int axis);
// Removes the given size-1 axes, or all size-1 axes when none are given.
Tensor squeeze(const Tensor& x, const std::vector<int>& axes = {});
Tensor concat(const std::vector<Tensor>& values, int axis);
Tensor stack(const std::vector<Tensor>& values, int axis = 0);
// num_splits equal parts along axis.
std::vector<Tensor> split(const Tensor& x, int num_splits, int axis = 0);
// Parts of the given sizes along axis (one size may be -1).
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& size_splits, int axis = 0);
// size[i] == -1 takes everything from begin[i] to the end.
Tensor slice(const Tensor& x, const std::vector<int64_t>& begin, const std::vector<int64_t>& size);
// params[..., indices, ...] along axis; indices are int32 or int64, checked against the bounds.
Tensor gather(const Tensor& params, const Tensor& indices, int axis = 0);
// float32 one-hot vectors along a new last axis (TF's default axis = -1).
Tensor one_hot(const Tensor& indices, int64_t depth, float on_value = 1.0f, float off_value = 0.0f);
Tensor broadcast_to(const Tensor& x, const TensorShape& shape);
Tensor tile(const Tensor& x, const std::vector<int64_t>& multiples);
// paddings[i] = {before, after} for dimension i; new elements are constant_value.
Tensor pad(const Tensor& x, const std::vector<std::pair<int64_t, int64_t>>& paddings,
           double constant_value = 0.0);

}  // namespace tapeflow
