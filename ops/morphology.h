// Grayscale morphology: TF's tf.nn.dilation2d and tf.nn.erosion2d.
#pragma once

#include <string>
#include <vector>

#include "core/tensor.h"

namespace tapeflow::nn {

// TF's tf.nn.dilation2d on NHWC input (batch, height, width, channels) with filters (kh, kw,
// channels): out[b, y, x, c] = max over (dy, dx) of input[b, y * sh + dy * rh - pad_top,
// x * sw + dx * rw - pad_left, c] + filters[dy, dx, c], taps outside the image left out.
// strides and dilations are {h, w} or TF's {1, h, w, 1}; padding "SAME" (out = ceil(in / s)) or
// "VALID"; data_format "NHWC" only (as TF's kernels). Floating dtypes; height, width and channels
// must be known (a traced function may leave the batch None). The gradient goes, as TF's, to the
// first maximising tap of each output (row-major over the window) and to its filter entry.
Tensor dilation2d(const Tensor& input, const Tensor& filters, const std::vector<int64_t>& strides,
                  const std::string& padding, const std::string& data_format = "NHWC",
                  const std::vector<int64_t>& dilations = {1, 1});
// TF's tf.nn.erosion2d: -dilation2d(-value, filters reversed along height and width).
Tensor erosion2d(const Tensor& value, const Tensor& filters, const std::vector<int64_t>& strides,
                 const std::string& padding, const std::string& data_format = "NHWC",
                 const std::vector<int64_t>& dilations = {1, 1});

}  // namespace tapeflow::nn
