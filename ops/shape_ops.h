// TF's tf.shape, tf.size, tf.rank and tf.ensure_shape: a tensor's shape as a tensor. Eagerly and
// in graphs of known shapes they are constants; in a trace for tf::None dimensions tf::shape and
// tf::size read the sizes when the graph runs (so `tf::shape(x)` of a None batch is that call's
// batch), and ensure_shape checks the sizes it can only know then at every call.
#pragma once

#include <vector>

#include "core/tensor.h"

namespace tapeflow {

// x's dimensions, 1-D of x's rank, int32 or int64 (TF's out_type).
Tensor shape(const Tensor& x, DType out_type = int32);
// The number of elements of x, a scalar int32 or int64.
Tensor size(const Tensor& x, DType out_type = int32);
// x's rank, an int32 scalar (always known).
Tensor rank(const Tensor& x);
// x itself, after checking that its shape is compatible with `shape` (same rank, equal sizes
// where both are known; tf::None in `shape` accepts any size): InvalidArgumentError "[ensure_shape]
// Shape of tensor input (2, 3) is not compatible with expected shape (2, 4)". A size x does not
// know yet (a trace for None dimensions) is checked when the graph runs, at every call (the
// check of tf::debugging's assertions); the result's static shape stays x's.
Tensor ensure_shape(const Tensor& x, const TensorShape& shape);
// tf::shape of each input, as TF's tf.shape_n.
std::vector<Tensor> shape_n(const std::vector<Tensor>& inputs, DType out_type = int32);
// The inputs themselves, as TF's tf.identity_n (tensors are immutable values: no copy).
std::vector<Tensor> identity_n(const std::vector<Tensor>& inputs);
// The numpy broadcast of two static shapes, as TF's tf.broadcast_static_shape: a None size
// broadcasts to the other side's size when that is not 1 and stays None otherwise; sizes that
// cannot broadcast are an InvalidArgumentError naming both shapes.
TensorShape broadcast_static_shape(const TensorShape& shape_x, const TensorShape& shape_y);
// The broadcast of two shapes given as 1-D int32 / int64 tensors (tf::shape's), as TF's
// tf.broadcast_dynamic_shape: of the larger rank, in the inputs' dtype. Incompatible sizes are an
// InvalidArgumentError ("Incompatible shapes: [2,3] vs. [4,3]", as TF), checked eagerly and, in a
// trace, whenever the graph runs.
Tensor broadcast_dynamic_shape(const Tensor& shape_x, const Tensor& shape_y);

}  // namespace tapeflow
