// Sizes read at run time. A graph traced for tf::None dimensions must not bake in sizes that
// come from those dimensions (reduce_mean's element count, a gradient broadcast back to its
// input's shape). While such a trace runs (detail::thread_context().open_shapes), composites
// and vjps use these ops, which take the sizes from a tensor when they run; otherwise they
// return the same results through the usual constant-shape ops.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace tapeflow::detail {

bool open_shapes();
// The product of x's dimensions over `axes` (normalised; 1 when empty): a scalar of `dtype`.
Tensor element_count(const Tensor& x, const std::vector<int>& axes, DType dtype);
// x's dimensions as a 1-D tensor of `dtype` (tf::shape).
Tensor shape_of(const Tensor& x, DType dtype);
// broadcast_to(x, like.shape()) and reshape(x, like.shape()).
Tensor broadcast_like(const Tensor& x, const Tensor& like);
// broadcast_to(x, want), where want is the broadcast shape of x and `others`: in a trace for None
// dimensions, the shape of one of them that has it, else of the sum of their zeros, read when
// the op runs.
Tensor broadcast_with(const Tensor& x, const std::vector<Tensor>& others, const TensorShape& want);
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
// x with axis `axis` split into dimensions `sizes` (known, their product its size): (B, T, 6)
// split at axis 2 into {2, 3} is (B, T, 2, 3) for every B and T. Undone by merge_axes.
Tensor split_axis(const Tensor& x, int axis, const std::vector<int64_t>& sizes);
// x[begin[i] : dim_i - trim[i]] along each axis i (Keras' Cropping layers): the sizes follow x
// when the op runs. begin[i] + trim[i] <= dim_i (InvalidArgumentError naming `op` otherwise).
Tensor crop(const char* op, const Tensor& x, const std::vector<int64_t>& begin,
            const std::vector<int64_t>& trim);

// A table made on the host from the size n of axis `axis` of x alone (a resize's indices and
// weights, an adaptive pooling's bins): make(n) gives its values and shape(n) its shape (n may
// be None), in `dtype`. In a trace for None dimensions it is made when the graph runs, so that
// one graph serves every size; otherwise it is a constant. `kind` and `params` name the function
// (graph passes compare them: equal names must mean equal functions). No gradient flows through
// it.
Tensor axis_table(const Tensor& x, int axis, std::string kind, std::vector<double> params,
                  DType dtype, std::function<std::vector<double>(int64_t)> make,
                  std::function<TensorShape(int64_t)> shape);

// The forward input's shape, as a gradient op that returns an input-shaped result takes it
// (conv2d's, depthwise_conv2d's and conv3d's backprop_input, avg_pool2d's gradient): a fixed
// attribute eagerly and in graphs of known shapes; in a trace for None dimensions, the shape of
// the forward input itself, the op's last input, read when the op runs (a stride-2 window cannot
// tell an input of 5 from one of 6 by its output). Channels-first inputs (N, C, spatial...) give
// the channels-last shape (N, spatial..., C) the gradient kernels work in.
enum class ShapeFrom : uint8_t { attribute, last_input, last_input_channels_first };

// The op's input shape: `attr` (the attribute) with its None dimensions from the last input
// when `from` says so (of attr's rank: InternalError otherwise).
TensorShape resolve_input_shape(const char* op, const TensorShape& attr, ShapeFrom from,
                                std::span<const Tensor> inputs);
// ", input_shape from the last input" (", ... (channels first)"), or "" for an attribute.
std::string shape_from_text(ShapeFrom from);

// What a vjp hands such an op for forward input x: `shape` (channels-last order) and `from`;
// `like` is x when the op reads the shape when it runs (then every dimension of `shape` is
// None, so that the attribute does not depend on the traced sizes).
struct ShapeSource {
  TensorShape shape;
  ShapeFrom from = ShapeFrom::attribute;
  Tensor like;
  // `inputs` with like appended when it is defined.
  std::vector<Tensor> with(std::vector<Tensor> inputs) const;
};
// x's shape under open_shapes() (a trace for None dimensions) reads x when the op runs; otherwise
// it is the attribute. channels_first: x is (N, C, spatial...).
ShapeSource shape_source(const Tensor& x, bool channels_first = false);

}  // namespace tapeflow::detail
