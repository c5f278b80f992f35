// TF's tf.shape, tf.size, tf.rank and tf.ensure_shape: a tensor's shape as a tensor. Eagerly and
// in graphs of known shapes they are constants; in a trace for tf::None dimensions tf::shape and
// tf::size read the sizes when the graph runs (so `tf::shape(x)` of a None batch is that call's
// batch), and ensure_shape checks the sizes it can only know then at every call.
#pragma once

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

}  // namespace tapeflow
