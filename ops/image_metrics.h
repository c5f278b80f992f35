// TF's tf.image metrics and filters on NHWC images: psnr, ssim, total_variation, image_gradients
// and sobel_edges, as composites (slices, reductions, and per-axis weight matrices applied with
// matmul for the separable filters), so they run on every device and have gradients. Stateless
// and thread-safe. See docs/ops.md.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "ops/primitive.h"

namespace tapeflow::image {

// TF's tf.image.psnr: 20 log10(max_val) - 10 log10(mean((a - b)^2)) over each image's height,
// width and channels; shape: the batch dimensions (a scalar for rank-3 images). a and b have the
// same shape and dtype; integer images are converted to float32 with convert_image_dtype (and
// max_val with them), as TF.
Tensor psnr(const Tensor& a, const Tensor& b, double max_val);

// TF's tf.image.ssim: the structural similarity of each pair of images with an
// filter_size x filter_size Gaussian window (filter_sigma) over the valid positions, averaged over
// positions and channels; k1, k2 as TF. Height and width must be >= filter_size. Integer images
// are converted as psnr.
Tensor ssim(const Tensor& a, const Tensor& b, double max_val, int64_t filter_size = 11,
            double filter_sigma = 1.5, double k1 = 0.01, double k2 = 0.03);

// TF's tf.image.ssim_multiscale: the product over scales (each halving height and width with a
// 2x2 average pool) of relu(contrast-structure) ** power_factors[k], with relu(ssim) at the last
// scale, averaged over channels. Every scale must be >= filter_size (11 * 16 = 176 pixels for
// TF's five default factors).
Tensor ssim_multiscale(const Tensor& a, const Tensor& b, double max_val,
                       const std::vector<double>& power_factors = {0.0448, 0.2856, 0.3001, 0.2363,
                                                                   0.1333},
                       int64_t filter_size = 11, double filter_sigma = 1.5, double k1 = 0.01,
                       double k2 = 0.03);

// TF's tf.image.total_variation: the sum of absolute differences of neighbouring pixels along
// height and width; a scalar for a rank-3 image, (batch,) for rank 4. Keeps the dtype.
Tensor total_variation(const Tensor& images);

// TF's tf.image.image_gradients on (batch, height, width, channels): {dy, dx}, the forward
// differences along height and width with a zero last row (dy) or column (dx).
std::pair<Tensor, Tensor> image_gradients(const Tensor& images);

// TF's tf.image.sobel_edges on (batch, height, width, channels) floating images: the 3x3 Sobel
// responses with reflect padding, shape (batch, height, width, channels, 2), [..., 0] the vertical
// (dy) and [..., 1] the horizontal (dx) one. Height and width must be >= 2.
Tensor sobel_edges(const Tensor& images);

}  // namespace tapeflow::image
