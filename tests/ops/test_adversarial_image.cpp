// Adversarial inputs for tf::image: images of every rank and dtype (empty, one pixel, special
// values), bad and huge sizes, offsets, boxes, thresholds and factors, on every device under
// test. A readable result (and gradients where differentiable) or a tf::Error naming the op.
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "support/adversarial.h"
#include "support/testing.h"
#include "tapeflow/tapeflow.h"

namespace tf = tapeflow;
using adversarial::describe;
using adversarial::make;
using adversarial::on_every_device;
using adversarial::probe;
using adversarial::with_gradients;

namespace {

const std::vector<tf::TensorShape> kImages = {{},           {3},          {4, 4, 3},
                                              {2, 5, 4, 3}, {1, 0, 4, 3}, {0, 4, 4, 3},
                                              {2, 4, 4, 1}, {1, 1, 1, 3}, {2, 3, 3, 0}};
const std::vector<tf::DType> kDTypes = {tf::float32, tf::float64, tf::float16, tf::uint8,
                                        tf::int32};
const double kInf = std::numeric_limits<double>::infinity();
const double kNan = std::numeric_limits<double>::quiet_NaN();

}  // namespace

TEST_CASE("adversarial: image geometry, resizing and cropping", "[adversarial]") {
  namespace im = tf::image;
  on_every_device([&] {
    for (const auto& s : kImages)
      for (tf::DType d : kDTypes)
        for (bool special : {false, true}) {
          const tf::Tensor x = make(s, d, special);
          const std::string what = describe(x) + (special ? " special" : "");
          for (const auto& size : std::vector<std::vector<int64_t>>{
                   {2, 3}, {0, 3}, {-1, 2}, {1}, {int64_t{1} << 12, 1}, {1, int64_t{1} << 40}})
            for (const char* method : {"bilinear", "nearest", "bicubic", "area", "lanczos3",
                                       "gaussian", "mitchellcubic", "cubic?"})
              for (bool aa : {false, true})
                probe("resize", what + " " + method, [&] {
                  return with_gradients({x}, [&] { return im::resize(x, size, method, aa); });
                });
          probe("flip_left_right", what, [&] { return im::flip_left_right(x); });
          probe("flip_up_down", what, [&] { return im::flip_up_down(x); });
          probe("transpose", what, [&] { return im::transpose(x); });
          for (int k : {-5, 0, 1, 2, 3, 1 << 30})
            probe("rot90", what, [&] { return im::rot90(x, k); });
          for (double f : {-1.0, 0.0, 0.3, 1.0, 2.0, kNan})
            probe("central_crop", what, [&] { return im::central_crop(x, f); });
          for (const auto& box : std::vector<std::vector<int64_t>>{{0, 0, 1, 1},
                                                                   {1, 1, 2, 2},
                                                                   {-1, 0, 1, 1},
                                                                   {0, 0, 0, 0},
                                                                   {0, 0, 9, 9},
                                                                   {int64_t{1} << 40, 0, 1, 1},
                                                                   {0, 0, int64_t{1} << 20, 1}}) {
            probe("crop_to_bounding_box", what,
                  [&] { return im::crop_to_bounding_box(x, box[0], box[1], box[2], box[3]); });
            probe("pad_to_bounding_box", what,
                  [&] { return im::pad_to_bounding_box(x, box[0], box[1], box[2], box[3]); });
            probe("resize_with_crop_or_pad", what,
                  [&] { return im::resize_with_crop_or_pad(x, box[2], box[3]); });
            probe("resize_with_pad", what, [&] { return im::resize_with_pad(x, box[2], box[3]); });
          }
          for (const auto& sizes : std::vector<std::vector<int64_t>>{
                   {1, 1, 1, 1}, {1, 2, 2, 1}, {1, 0, 1, 1}, {2, 2}, {1, 1 << 30, 1, 1}})
            for (const char* padding : {"SAME", "VALID", "FULL"})
              probe("extract_patches", what, [&] {
                return with_gradients({x}, [&] {
                  return im::extract_patches(x, sizes, {1, 2, 1, 1}, {1, 1, 1, 1}, padding);
                });
              });
          for (const auto& ts : std::vector<tf::TensorShape>{{8}, {2, 8}, {1, 8}, {3}, {0, 8}})
            for (const char* interp : {"bilinear", "nearest", "cubic"})
              for (const char* fill : {"constant", "reflect", "wrap", "nearest", "edge?"})
                probe("transform", what, [&] {
                  return im::transform(x, make(ts, tf::float32, special, 3), interp, fill, 0.5,
                                       {3, 2});
                });
          for (const auto& bs : std::vector<tf::TensorShape>{{2, 4}, {0, 4}, {3}, {1, 5}})
            for (const auto& crop :
                 std::vector<std::vector<int64_t>>{{2, 2}, {0, 1}, {1 << 10, 1 << 10}, {-1, 2}}) {
              const tf::Tensor boxes = make(bs, tf::float32, special, 4);
              const tf::Tensor ids = make({bs.rank() >= 1 ? bs[0] : 1}, tf::int32, special, 5);
              probe("crop_and_resize", what + ", boxes " + describe(boxes), [&] {
                return with_gradients({x},
                                      [&] { return im::crop_and_resize(x, boxes, ids, crop); });
              });
              probe("extract_glimpse", what + ", offsets " + describe(boxes),
                    [&] { return im::extract_glimpse(x, crop, boxes, true, true, "zero", 1); });
              probe("draw_bounding_boxes", what + ", boxes " + describe(boxes),
                    [&] { return im::draw_bounding_boxes(x, tf::expand_dims(boxes, 0)); });
            }
        }
  });
}

TEST_CASE("adversarial: image colour, metrics, random ops and detection", "[adversarial]") {
  namespace im = tf::image;
  on_every_device([&] {
    for (const auto& s : kImages)
      for (tf::DType d : kDTypes)
        for (bool special : {false, true}) {
          const tf::Tensor x = make(s, d, special);
          const std::string what = describe(x) + (special ? " special" : "");
          using Unary = tf::Tensor (*)(const tf::Tensor&);
          const std::vector<std::pair<std::string, Unary>> unary = {
              {"rgb_to_grayscale", im::rgb_to_grayscale},
              {"grayscale_to_rgb", im::grayscale_to_rgb},
              {"rgb_to_hsv", im::rgb_to_hsv},
              {"hsv_to_rgb", im::hsv_to_rgb},
              {"rgb_to_yuv", im::rgb_to_yuv},
              {"yuv_to_rgb", im::yuv_to_rgb},
              {"rgb_to_yiq", im::rgb_to_yiq},
              {"yiq_to_rgb", im::yiq_to_rgb},
              {"per_image_standardization", im::per_image_standardization},
              {"total_variation", im::total_variation},
              {"sobel_edges", im::sobel_edges}};
          for (const auto& [name, f] : unary)
            probe(name, what, [&, f = f] { return with_gradients({x}, [&] { return f(x); }); });
          for (double v : {-1.0, 0.0, 0.5, 2.0, kInf, kNan}) {
            probe("adjust_contrast", what, [&] { return im::adjust_contrast(x, v); });
            probe("adjust_brightness", what, [&] { return im::adjust_brightness(x, v); });
            probe("adjust_saturation", what, [&] { return im::adjust_saturation(x, v); });
            probe("adjust_hue", what, [&] { return im::adjust_hue(x, v); });
            probe("adjust_gamma", what, [&] { return im::adjust_gamma(x, v, 2.0); });
            probe("random_brightness", what, [&] { return im::random_brightness(x, v, 1); });
            probe("random_contrast", what, [&] { return im::random_contrast(x, v, 1.5, 1); });
            probe("random_saturation", what, [&] { return im::random_saturation(x, 0.5, v, 1); });
            probe("random_hue", what, [&] { return im::random_hue(x, v, 1); });
            probe("stateless_random_hue", what, [&] {
              return im::stateless_random_hue(x, v, {1, 2});
            });
            probe("psnr", what, [&] { return im::psnr(x, x, v); });
            probe("ssim", what, [&] { return im::ssim(x, x, v, 3); });
          }
          for (int64_t fs : {-1, 0, 1, 11, 1 << 20})
            probe("ssim", what + " filter", [&] { return im::ssim(x, x, 1.0, fs); });
          probe("ssim_multiscale", what, [&] { return im::ssim_multiscale(x, x, 1.0); });
          probe("image_gradients", what, [&] {
            auto [dy, dx] = im::image_gradients(x);
            return std::vector<tf::Tensor>{dy, dx};
          });
          for (tf::DType to : {tf::uint8, tf::float32, tf::int32, tf::bool_})
            for (bool sat : {false, true})
              probe("convert_image_dtype", what,
                    [&] { return im::convert_image_dtype(x, to, sat); });
          probe("random_flip_left_right", what, [&] { return im::random_flip_left_right(x, 1); });
          probe("stateless_random_flip_up_down", what, [&] {
            return im::stateless_random_flip_up_down(x, {3, 4});
          });
          for (const auto& size : std::vector<std::vector<int64_t>>{
                   {1, 1, 1}, {2, 2, 3}, {0, 1}, {9, 9, 9, 9}, {-1}, {1 << 30, 1, 1}}) {
            probe("random_crop", what, [&] { return im::random_crop(x, size, 1); });
            probe("stateless_random_crop", what, [&] {
              return im::stateless_random_crop(x, size, {1, 1});
            });
          }
        }
    // Detection: boxes and scores of every shape, thresholds and counts out of range.
    for (const auto& bs : std::vector<tf::TensorShape>{{4, 4}, {0, 4}, {3}, {4, 5}, {2, 4, 4}})
      for (bool special : {false, true}) {
        const tf::Tensor boxes = make(bs, tf::float32, special);
        const tf::Tensor scores = make({bs.rank() >= 1 ? bs[0] : 1}, tf::float32, special, 2);
        const std::string what = describe(boxes) + (special ? " special" : "");
        for (int64_t max_out : std::vector<int64_t>{-1, 0, 2, int64_t{1} << 40})
          for (double iou : {-0.5, 0.0, 0.5, 1.5, kNan}) {
            probe("non_max_suppression", what,
                  [&] { return im::non_max_suppression(boxes, scores, max_out, iou); });
            probe("non_max_suppression_padded", what, [&] {
              auto [idx, n] =
                  im::non_max_suppression_padded(boxes, scores, max_out, iou, 0.1, true);
              return std::vector<tf::Tensor>{idx, n};
            });
            probe("non_max_suppression_overlaps", what,
                  [&] { return im::non_max_suppression_overlaps(boxes, scores, max_out, iou); });
            probe("combined_non_max_suppression", what, [&] {
              const auto r = im::combined_non_max_suppression(
                  tf::expand_dims(tf::expand_dims(boxes, 0), 2),
                  tf::expand_dims(tf::expand_dims(scores, 0), -1), max_out, max_out, iou);
              return std::vector<tf::Tensor>{r.nmsed_boxes, r.nmsed_scores, r.nmsed_classes,
                                             r.valid_detections};
            });
          }
        for (const auto& size :
             std::vector<std::vector<int64_t>>{{4, 4, 3}, {0, 0, 3}, {3}, {-1, 2, 1}})
          probe("sample_distorted_bounding_box", what, [&] {
            const auto r = im::sample_distorted_bounding_box(
                tf::constant(size, {static_cast<int64_t>(size.size())}),
                tf::reshape(boxes, {1, -1, bs.rank() >= 1 ? bs[bs.rank() - 1] : 1}), 1);
            return std::vector<tf::Tensor>{r.begin, r.size, r.bboxes};
          });
      }
  });
}
