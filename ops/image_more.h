// More of TF's tf.image: the resampling resize methods (bicubic, area, lanczos, gaussian,
// mitchellcubic, antialiasing) and the resize-to-fit helpers. Resampling is separable: each axis
// is a (new_size, size) weight matrix built on the host with TF's kernel arithmetic (float32, as
// TF's ResizeBicubic, ResizeArea and ScaleAndTranslate kernels) and applied with matmul, so every
// method runs on every device and its gradient is the exact adjoint (matmul's). See docs/ops.md.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ops/image.h"

namespace tapeflow::image {

// TF's tf.image.resize_with_pad: resizes images (keeping the aspect ratio) to fit inside
// target_height x target_width with `method` and `antialias` (as resize), then pads the rest with
// zeros around the centre. Returns resize's dtype.
Tensor resize_with_pad(const Tensor& images, int64_t target_height, int64_t target_width,
                       const std::string& method = "bilinear", bool antialias = false);

// TF's tf.image.resize_with_crop_or_pad: crops the centre of or pads (with zeros) each image to
// target_height x target_width; keeps the dtype.
Tensor resize_with_crop_or_pad(const Tensor& images, int64_t target_height, int64_t target_width);

// TF's tf.image.extract_patches on (batch, height, width, channels): the sizes[0] x sizes[1]
// windows (taps rates apart) every strides pixels, each flattened in (row, column, channel) order
// into the last axis: (batch, out_height, out_width, sizes[0] * sizes[1] * channels). padding
// "VALID" keeps the windows inside the image; "SAME" pads with zeros so that out = ceil(in /
// stride). sizes, strides and rates are {height, width} (TF's [1, h, w, 1]), all positive.
Tensor extract_patches(const Tensor& images, const std::vector<int64_t>& sizes,
                       const std::vector<int64_t>& strides, const std::vector<int64_t>& rates,
                       const std::string& padding);

// Keras' keras.ops.image.perspective_transform: the projective transform that maps each image's
// end_points onto its start_points (4 (x, y) corners each, (4, 2) for every image or (batch, 4,
// 2)), found by solving Keras' 8 x 8 homography system in float32 (batched linalg::solve), then
// applied with transform() ("constant" fill with fill_value; interpolation "bilinear" or
// "nearest"). images (batch, height, width, channels) or one (height, width, channels) image.
// Points that make the system singular raise solve's error.
Tensor perspective_transform(const Tensor& images, const Tensor& start_points,
                             const Tensor& end_points,
                             const std::string& interpolation = "bilinear",
                             double fill_value = 0.0);
// TF's tf.image.transpose (height and width swapped) and rot90 (k quarter turns
// counter-clockwise, any k) of (batch, height, width, channels) or (height, width, channels)
// images; any dtype.
Tensor transpose(const Tensor& images);
Tensor rot90(const Tensor& images, int k = 1);
// TF's tf.image.crop_and_resize: for each box [y1, x1, y2, x2] (normalised, y1 > y2 flips; a
// box may reach outside [0, 1]) of image box_indices[i], a crop_size {height, width} grid
// sampled at y1 (H - 1) + i (y2 - y1) (H - 1) / (height - 1) (the box centre for one row),
// likewise along the width, "bilinear" or "nearest" (half away from zero), points outside the
// image giving extrapolation_value. image (batch, height, width, channels) of any real dtype;
// the result is float32 (float64 for a float64 image), (num_boxes, height, width, channels).
// Gradients flow to floating images and to the boxes (through bilinear sampling for both
// methods, as TF); the image gradient is itself differentiable with respect to the crop's
// cotangent. box_indices outside the batch raise InvalidArgumentError eagerly; in a traced
// function they are clipped into it. One primitive, CropAndResize (ops/image.h).
Tensor crop_and_resize(const Tensor& image, const Tensor& boxes, const Tensor& box_indices,
                       const std::vector<int64_t>& crop_size,
                       const std::string& method = "bilinear", double extrapolation_value = 0.0);
// TF's tf.image.extract_glimpse (v2): a size {height, width} window of each float32 image at
// offsets (batch, 2) of (y, x): with normalized and centered (the defaults) in [-1, 1] around
// the centre; normalized alone in [0, 1] from the top-left corner; otherwise pixels (centered:
// from the centre). The top-left pixel follows TF's kernel arithmetic (float32, truncated toward
// zero; with normalized and centered the window is centred on the offset). Pixels outside the
// image are noise: "uniform" between the image's smallest and largest value, "gaussian" with
// each channel's mean and deviation clipped to its range (random with `seed`; not TF's numbers),
// or "zero".
Tensor extract_glimpse(const Tensor& input, const std::vector<int64_t>& size, const Tensor& offsets,
                       bool centered = true, bool normalized = true,
                       const std::string& noise = "uniform",
                       std::optional<int64_t> seed = std::nullopt);
// TF's tf.image.draw_bounding_boxes: the one-pixel outline of each box [y_min, x_min, y_max,
// x_max] (normalised; boxes (batch, num_boxes, 4)) drawn on its image in box order, box k in
// colors[k % num_colors] (num_colors, channels >= depth), TF's RGBA palette of ten when colors
// is undefined or empty (1 for one-channel images). Edges are y (height - 1) truncated toward
// zero; edges outside the image are left out, and inverted boxes or boxes wholly outside are not
// drawn (TF logs a warning for each; tapeflow draws nothing silently, as the check is per image
// on the device). Floating images (batch, height, width, depth); keeps the dtype.
Tensor draw_bounding_boxes(const Tensor& images, const Tensor& boxes,
                           const Tensor& colors = Tensor());
// TF's greedy non-maximum suppression (tf.image.non_max_suppression): of boxes (num_boxes, 4)
// [y1, x1, y2, x2] (corners in either order) with scores (num_boxes,), repeatedly takes the
// highest-scoring remaining box (ties to the lower index) whose score is above score_threshold
// and drops every box whose intersection over union with it exceeds iou_threshold (a box of zero
// area overlaps nothing); at most max_output_size indices (int32), in selection order. Its
// length depends on the values, so inside a traced function use non_max_suppression_padded
// with pad_to_max_output_size, which returns the indices padded with 0 to max_output_size and
// the number selected (int32 scalar), with static shapes on every device. (TF's padded op is a
// tiled variant that assumes y1 <= y2 and x1 <= x2; tapeflow's gives non_max_suppression's
// selection for every box.) non_max_suppression_overlaps takes a (num_boxes, num_boxes) overlap
// matrix instead of boxes.
Tensor non_max_suppression(const Tensor& boxes, const Tensor& scores, int64_t max_output_size,
                           double iou_threshold = 0.5,
                           double score_threshold = -std::numeric_limits<double>::infinity());
std::pair<Tensor, Tensor> non_max_suppression_padded(
    const Tensor& boxes, const Tensor& scores, int64_t max_output_size, double iou_threshold = 0.5,
    double score_threshold = -std::numeric_limits<double>::infinity(),
    bool pad_to_max_output_size = false);
Tensor non_max_suppression_overlaps(
    const Tensor& overlaps, const Tensor& scores, int64_t max_output_size,
    double overlap_threshold = 0.5,
    double score_threshold = -std::numeric_limits<double>::infinity());
// TF's tf.image.combined_non_max_suppression: greedy non-maximum suppression per batch entry and
// class, then the best detections over all classes. boxes (batch, num_boxes, q, 4) with q = 1
// (one box for every class) or num_classes; scores (batch, num_boxes, num_classes). Each class
// keeps at most max_output_size_per_class boxes whose score is above score_threshold, a box
// dropped once its intersection over union with a kept one of its class exceeds iou_threshold
// (as non_max_suppression); the kept ones of all classes, best score first (ties: the lower
// class, then the earlier pick), fill max_total_size slots (with pad_per_class, min(
// max_output_size_per_class * num_classes, max_total_size) slots), the rest zeros. clip_boxes
// clips the coordinates into [0, 1]. The results: nmsed_boxes (batch, slots, 4), nmsed_scores and
// nmsed_classes (batch, slots) (classes as float32, as TF), valid_detections (batch,) int32.
// Static shapes, so it runs inside traced functions (as tensor ops over every class at once,
// with num_boxes and num_classes known); eagerly the selection runs on the host. The boxes and
// scores come out through gathers, so gradients reach the selected ones (TF has none).
struct CombinedNms {
  Tensor nmsed_boxes, nmsed_scores, nmsed_classes, valid_detections;
};
CombinedNms combined_non_max_suppression(
    const Tensor& boxes, const Tensor& scores, int64_t max_output_size_per_class,
    int64_t max_total_size, double iou_threshold = 0.5,
    double score_threshold = -std::numeric_limits<double>::infinity(), bool pad_per_class = false,
    bool clip_boxes = true);
// keras.ops.image.map_coordinates (scipy.ndimage.map_coordinates' semantics): the input sampled
// at coordinates (input rank, ...) -> coordinates.shape()[1:], order 0 (nearest, half to even) or
// 1 (linear); points outside map back by fill_mode "constant" (fill_value; SciPy's
// "grid-constant"), "nearest", "wrap" (periodic; SciPy's "grid-wrap"), "mirror" (d c b | a b c d
// | c b a) or "reflect" (d c b a | a b c d | d c b a). Computed in the coordinates' dtype;
// integer inputs are rounded back. Keras' TensorFlow backend maps negative coordinates in
// "reflect" as "mirror" and fails on "mirror" at the far edge; tapeflow follows SciPy and
// Keras' JAX backend there. Differentiable in the input and the coordinates.
Tensor map_coordinates(const Tensor& input, const Tensor& coordinates, int order,
                       const std::string& fill_mode = "constant", double fill_value = 0.0);
// keras.ops.image.elastic_transform on (batch, height, width, channels) or one (height, width,
// channels) image: per image, two fields of standard normal noise times sigma (independent:
// Keras' TensorFlow backend draws both from one seed, moving every pixel along the diagonal),
// each blurred by Keras' Gaussian kernel of 6 floor(sigma) + 1 taps (zero padding), shift the
// sampling grid by alpha times the fields; the image is resampled there with map_coordinates'
// rules (interpolation "bilinear" or "nearest"). alpha and sigma are scalar tensors (they may be
// random); taps beyond max_kernel_radius (give at least 3 floor(largest sigma)) are left out.
Tensor elastic_transform(const Tensor& images, const Tensor& alpha, const Tensor& sigma,
                         int64_t max_kernel_radius, const std::string& interpolation = "bilinear",
                         const std::string& fill_mode = "reflect", double fill_value = 0.0,
                         std::optional<int64_t> seed = std::nullopt);
// The (batch, 8) transforms of perspective_transform (Keras' compute_homography_matrix).
Tensor homography_matrix(const Tensor& start_points, const Tensor& end_points);

}  // namespace tapeflow::image

namespace tapeflow::image_detail {

// Raises InvalidArgumentError naming op unless images is a defined NHWC image or batch (rank 3
// or 4).
void check_image(const char* op, const Tensor& images);
// An int32 scalar on the current device (index arithmetic of the composite image ops).
Tensor i32(int64_t v);
// resize's check of an input height or width, also made by its tables when a graph traced for
// None dimensions runs: InvalidArgumentError unless positive.
void check_resize_length(int64_t n);

// resize for every method and antialias setting except antialias-free "bilinear" and "nearest"
// (ops/image.cpp has those); h is the height axis; the arguments are already checked.
Tensor resize_resampled(const Tensor& images, int h, const std::vector<int64_t>& size,
                        const std::string& method, bool antialias);

// x with the (out, x.shape()[axis]) row-major weights applied along axis (the height, rank - 3,
// or the width, rank - 2) by a broadcast matmul; weights are converted to x's dtype.
Tensor apply_axis_weights(const Tensor& x, int axis, const std::vector<double>& weights,
                          int64_t out);

// The (out_size, in_size) row-major weight matrix of one axis for `method` (as resize), in the
// float32 arithmetic of TF's kernels. Exposed for the tests.
std::vector<double> resize_weights(const std::string& method, bool antialias, int64_t in_size,
                                   int64_t out_size);

}  // namespace tapeflow::image_detail
