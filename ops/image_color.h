// TF's tf.image colour-space conversions and colour adjustments on NHWC images (rank 3 or 4,
// channels last), as composites of slicing, reductions, matmul and elementwise ops: they run on
// every device and their gradients come from those ops (TF registers none for AdjustHue and
// AdjustSaturation). Stateless and thread-safe. See docs/ops.md.
#pragma once

#include "ops/primitive.h"

namespace tapeflow::image {

// TF's tf.image.convert_image_dtype: floating images are in [0, 1], integer images in [0, max]
// of their dtype. int -> float casts and multiplies by 1 / max; float -> int multiplies by
// max + 0.5 and truncates (saturate: clamps to the dtype's range first); int -> int shifts by the
// ratio of the ranges (dividing with floor or multiplying); float -> float casts. Same dtype is
// the identity. dtypes: float16, bfloat16, float32, float64, uint8, int32, int64.
Tensor convert_image_dtype(const Tensor& images, DType dtype, bool saturate = false);

// RGB (last axis 3, floating, values in [0, 1]) to HSV with hue in [0, 1), and back (TF's
// RGBToHSV and HSVToRGB).
Tensor rgb_to_hsv(const Tensor& images);
Tensor hsv_to_rgb(const Tensor& images);
// RGB to YUV and back with TF's 3x3 matrices (floating images, last axis 3).
Tensor rgb_to_yuv(const Tensor& images);
Tensor yuv_to_rgb(const Tensor& images);
// RGB to YIQ and back with TF's 3x3 matrices (tf.image.rgb_to_yiq / yiq_to_rgb).
Tensor rgb_to_yiq(const Tensor& images);
Tensor yiq_to_rgb(const Tensor& images);
// Repeats a last axis of 1 three times (any dtype).
Tensor grayscale_to_rgb(const Tensor& images);

// TF's tf.image.adjust_saturation: the HSV saturation times factor, clipped to [0, 1]. TF's
// tf.image.adjust_hue: the HSV hue plus delta (in [-1, 1]), wrapped to [0, 1). Integer images
// go through convert_image_dtype to float32 and back, as TF; float64 is computed in float64.
Tensor adjust_saturation(const Tensor& images, double saturation_factor);
Tensor adjust_hue(const Tensor& images, double delta);
// TF's tf.image.adjust_gamma: gain * images ** gamma (gamma >= 0), integer images through
// convert_image_dtype (float32) and back with saturation.
Tensor adjust_gamma(const Tensor& images, double gamma = 1.0, double gain = 1.0);
// TF's tf.image.per_image_standardization: (x - mean) / max(stddev, 1 / sqrt(N)) over each
// image's N = height * width * channels values; integer images are cast to float32.
Tensor per_image_standardization(const Tensor& images);

}  // namespace tapeflow::image

namespace tapeflow::image_detail {
// adjust_saturation and adjust_hue with the factor or delta as a scalar tensor (the random_*
// ops draw it); the same checks.
Tensor adjust_saturation_by(const Tensor& images, const Tensor& saturation_factor);
Tensor adjust_hue_by(const Tensor& images, const Tensor& delta);
}  // namespace tapeflow::image_detail
