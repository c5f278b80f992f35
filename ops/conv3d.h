// 3-D convolution and pooling (NDHWC inputs, DHWIO filters, "SAME" or "VALID" padding), as TF's
// tf.nn.conv3d, tf.nn.max_pool3d and tf.nn.avg_pool3d. All three are composites of the 2-D ops
// (ops/nn.h) with slice/gather/pad/reduce along the depth, so they run on every device and
// differentiate (to any order) through those ops' gradients.
#pragma once

#include <string>
#include <vector>

#include "ops/primitive.h"

namespace tapeflow::nn {

// input (N, D, H, W, C) and filters (KD, KH, KW, C / G, O) of one floating dtype
// -> (N, OD, OH, OW, O). strides and dilations: 1, 3 or 5 values (TF's 5-vector has 1s in the
// batch and channel places). Strides above 1 together with dilations above 1 are refused, as
// TF/Keras do. Filters whose depth divides the input's are a grouped convolution (G groups,
// G must divide O), as conv2d's. SAME pads each dimension as TF: the odd extra at the end.
// D, H and W must be known (the batch may be tf::None in a trace).
// Each depth tap k is a conv2d of the input's depth slices k * dilation + od * stride (after
// the depth padding) folded into the batch, and the taps are summed.
Tensor conv3d(const Tensor& input, const Tensor& filters, const std::vector<int>& strides,
              const std::string& padding, const std::vector<int>& dilations = {1});
// TF's tf.nn.conv3d_transpose: the gradient of conv3d with respect to its input, as a forward
// op. filters are (KD, KH, KW, out_channels, in_channels), as TF's; output_shape is the NDHWC
// output shape (depth, height and width known), which a conv3d with these filters, strides,
// padding and dilations must map back to the input's depth, height and width (else an
// InvalidArgumentError naming both). Each depth tap is a conv2d_transpose of the input's depth
// slices folded into the batch, spread out by the stride and shifted by the tap.
Tensor conv3d_transpose(const Tensor& input, const Tensor& filters, const TensorShape& output_shape,
                        const std::vector<int>& strides, const std::string& padding = "SAME",
                        const std::vector<int>& dilations = {1});
// ksize and strides: 1, 3 or 5 values, as conv3d's strides. SAME windows ignore the padding:
// max_pool3d takes the maximum of the valid elements and avg_pool3d divides by their count, as
// TF. Both pool each depth slice in 2-D (ops/nn.h) and then combine the depth window (a box
// window's valid count is the product of its per-dimension counts, so the depth average of the
// 2-D averages over the valid depth slices is TF's average).
Tensor max_pool3d(const Tensor& input, const std::vector<int>& ksize,
                  const std::vector<int>& strides, const std::string& padding);
Tensor avg_pool3d(const Tensor& input, const std::vector<int>& ksize,
                  const std::vector<int>& strides, const std::string& padding);

}  // namespace tapeflow::nn
