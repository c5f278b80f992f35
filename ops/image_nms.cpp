// tf.image's greedy non-maximum suppression (ops/image_more.h): max_output_size rounds of "take
// the best remaining candidate, drop every candidate that overlaps it too much", each round a
// few tensor ops (argmax, a gather, elementwise), so the padded forms run on every device and
// inside traced functions with static shapes.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/context.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/image_more.h"
#include "ops/movement.h"
#include "ops/reduce.h"
#include "ops/scan.h"
#include "ops/unary.h"

namespace tapeflow::image {

namespace {

using image_detail::i32;

void check_greedy(const char* op, const Tensor& scores, int64_t max_output_size,
                  double overlap_threshold, double score_threshold) {
  TF_CHECK_ARG(scores.rank() == 1 && is_floating(scores.dtype()), op,
               "scores must be a floating (num_boxes,) tensor, got {} {}",
               dtype_name(scores.dtype()), scores.shape().to_string());
  TF_CHECK_ARG(max_output_size >= 0 && max_output_size <= 100000, op,
               "max_output_size must be in [0, 100000], got {}", max_output_size);
  TF_CHECK_ARG(!std::isnan(overlap_threshold) && !std::isnan(score_threshold), op,
               "the thresholds must not be NaN");
}

// The greedy selection over candidates scored by `scores` (N,), where overlap_row(i) gives the
// (N,) overlaps of candidate i with every candidate: (selected indices padded with 0 to
// max_output_size, int32; the number selected, int32 scalar). A candidate needs a score above
// score_threshold; it is dropped once its overlap with a selected one exceeds the threshold.
// Ties in score go to the lower index (argmax's first maximum), as TF's priority queue.
std::pair<Tensor, Tensor> greedy(const char* op, const Tensor& scores, int64_t max_output_size,
                                 double overlap_threshold, double score_threshold,
                                 const std::function<Tensor(const Tensor&)>& overlap_row) {
  check_greedy(op, scores, max_output_size, overlap_threshold, score_threshold);
  const Tensor s = cast(scores, float32);
  const Tensor none = constant(Tensor(-std::numeric_limits<float>::infinity()), float32);
  // Candidates at or below the score threshold (and NaN scores) never count.
  Tensor live =
      where(greater(s, constant(Tensor(score_threshold), float32)), s, zeros_like(s) + none);
  const Tensor positions = cast(cumsum(ones_like(s), 0), int32) - i32(1);
  std::vector<Tensor> picks;
  Tensor count = constant(std::vector<int32_t>{0}, TensorShape{});
  const int64_t n = scores.shape()[0];
  const int64_t rounds = n >= 0 ? std::min(max_output_size, n) : max_output_size;
  for (int64_t k = 0; k < rounds; ++k) {
    const Tensor best = cast(argmax(live, 0), int32);
    const Tensor found = greater(reduce_max(live), none);
    const Tensor drop =
        logical_or(greater(overlap_row(best), constant(Tensor(overlap_threshold), float32)),
                   equal(positions, best));
    live = where(logical_and(drop, found), zeros_like(live) + none, live);
    picks.push_back(where(found, best, i32(0)));
    count = count + cast(found, int32);
  }
  for (int64_t k = rounds; k < max_output_size; ++k) picks.push_back(i32(0));
  const Tensor selected = picks.empty() ? zeros({0}, int32) : stack(picks, 0);
  return {selected, count};
}

// The (N,) intersection over union of box i with every box; a box of zero area overlaps
// nothing. Corners in either order (TF takes the min and max of each pair).
std::function<Tensor(const Tensor&)> iou_rows(const Tensor& boxes) {
  const Tensor b = cast(boxes, float32);
  const auto col = [&](int64_t j) { return reshape(slice(b, {0, j}, {-1, 1}), {-1}); };
  const Tensor y1 = minimum(col(0), col(2)), y2 = maximum(col(0), col(2));
  const Tensor x1 = minimum(col(1), col(3)), x2 = maximum(col(1), col(3));
  const Tensor area = (y2 - y1) * (x2 - x1);
  return [=](const Tensor& i) {
    const auto at = [&](const Tensor& v) { return gather(v, i); };
    const Tensor zero = zeros_like(area);
    const Tensor ih = maximum(minimum(y2, at(y2)) - maximum(y1, at(y1)), zero);
    const Tensor iw = maximum(minimum(x2, at(x2)) - maximum(x1, at(x1)), zero);
    const Tensor inter = ih * iw;
    const Tensor ai = at(area);
    const Tensor valid = logical_and(greater(area, zero), greater(ai + zero, zero));
    const Tensor uni = area + ai - inter;
    return where(valid, inter / where(valid, uni, ones_like(uni)), zero);
  };
}

// Eagerly the same greedy selection runs on the host (a few hundred tensor ops per call cost
// more than the arithmetic): the scores and overlaps in float32 as the tensor path computes
// them, so both select the same boxes.
std::pair<Tensor, Tensor> host_greedy(const Tensor& scores, int64_t max_output_size,
                                      double overlap_threshold, double score_threshold,
                                      const std::function<float(int64_t, int64_t)>& overlap) {
  const std::vector<double> sd = detail::to_double_vector(scores);
  const auto thr = static_cast<float>(score_threshold);
  const auto limit = static_cast<float>(overlap_threshold);
  // Candidates above the threshold, best first, ties to the lower index (the order in which the
  // tensor path's argmax takes them); each is kept unless it overlaps a kept one too much.
  std::vector<std::pair<float, int32_t>> order;
  for (size_t i = 0; i < sd.size(); ++i) {
    const auto v = static_cast<float>(sd[i]);
    if (v > thr) order.emplace_back(v, static_cast<int32_t>(i));
  }
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<int32_t> picks;
  for (const auto& [score, i] : order) {
    if (static_cast<int64_t>(picks.size()) >= max_output_size) break;
    bool keep = true;
    for (int32_t j : picks)
      if (overlap(j, i) > limit) {
        keep = false;
        break;
      }
    if (keep) picks.push_back(i);
  }
  const auto count = static_cast<int32_t>(picks.size());
  picks.resize(static_cast<size_t>(max_output_size), 0);
  return {constant(picks, TensorShape{max_output_size}),
          constant(std::vector<int32_t>{count}, TensorShape{})};
}

// Box i against box j as iou_rows computes it.
std::function<float(int64_t, int64_t)> host_iou(const Tensor& boxes) {
  const std::vector<double> b = detail::to_double_vector(boxes);
  const size_t n = b.size() / 4;
  std::vector<float> y1(n), x1(n), y2(n), x2(n), area(n);
  for (size_t i = 0; i < n; ++i) {
    const auto a = static_cast<float>(b[4 * i]), c = static_cast<float>(b[4 * i + 2]);
    const auto d = static_cast<float>(b[4 * i + 1]), e = static_cast<float>(b[4 * i + 3]);
    y1[i] = std::min(a, c);
    y2[i] = std::max(a, c);
    x1[i] = std::min(d, e);
    x2[i] = std::max(d, e);
    area[i] = (y2[i] - y1[i]) * (x2[i] - x1[i]);
  }
  return [=](int64_t bi, int64_t bj) {
    const auto i = static_cast<size_t>(bi), j = static_cast<size_t>(bj);
    if (!(area[i] > 0.0f && area[j] > 0.0f)) return 0.0f;
    const float ih = std::max(std::min(y2[j], y2[i]) - std::max(y1[j], y1[i]), 0.0f);
    const float iw = std::max(std::min(x2[j], x2[i]) - std::max(x1[j], x1[i]), 0.0f);
    const float inter = ih * iw;
    const float uni = area[j] + area[i] - inter;
    return inter / uni;
  };
}

bool eager() {
  return detail::thread_context().trace == nullptr;
}

// The selected indices alone: eagerly, the padded result cut to its count; a traced function
// cannot give a result whose length depends on the values.
Tensor cut(const char* op, const std::pair<Tensor, Tensor>& padded) {
  TF_CHECK_ARG(detail::thread_context().trace == nullptr, op,
               "the number of selected boxes depends on the values, which a traced function "
               "cannot return: use non_max_suppression_padded (with pad_to_max_output_size) "
               "there");
  const int64_t k = padded.second.item<int32_t>();
  return slice(padded.first, {0}, {k});
}

// The checked selection of boxes by scores: on the host eagerly, as tensor ops in a trace.
std::pair<Tensor, Tensor> select_boxes(const char* op, const Tensor& boxes, const Tensor& scores,
                                       int64_t max_output_size, double iou_threshold,
                                       double score_threshold) {
  TF_CHECK_ARG(boxes.defined() && scores.defined(), op, "boxes and scores must be defined");
  TF_CHECK_ARG(boxes.rank() == 2 && boxes.shape()[1] == 4 && is_floating(boxes.dtype()), op,
               "boxes must be a floating (num_boxes, 4) tensor of [y1, x1, y2, x2] rows, got {} {}",
               dtype_name(boxes.dtype()), boxes.shape().to_string());
  TF_CHECK_ARG(boxes.shape()[0] == scores.shape()[0] || boxes.shape()[0] < 0 || scores.rank() != 1,
               op, "boxes {} and scores {} must have one row per box", boxes.shape().to_string(),
               scores.shape().to_string());
  if (!eager())
    return greedy(op, scores, max_output_size, iou_threshold, score_threshold, iou_rows(boxes));
  check_greedy(op, scores, max_output_size, iou_threshold, score_threshold);
  return host_greedy(scores, max_output_size, iou_threshold, score_threshold, host_iou(boxes));
}

}  // namespace

std::pair<Tensor, Tensor> non_max_suppression_padded(const Tensor& boxes, const Tensor& scores,
                                                     int64_t max_output_size, double iou_threshold,
                                                     double score_threshold,
                                                     bool pad_to_max_output_size) {
  const char* op = "non_max_suppression_padded";
  auto out = select_boxes(op, boxes, scores, max_output_size, iou_threshold, score_threshold);
  if (!pad_to_max_output_size) out.first = cut(op, out);
  return out;
}

Tensor non_max_suppression(const Tensor& boxes, const Tensor& scores, int64_t max_output_size,
                           double iou_threshold, double score_threshold) {
  const char* op = "non_max_suppression";
  return cut(op, select_boxes(op, boxes, scores, max_output_size, iou_threshold, score_threshold));
}

Tensor non_max_suppression_overlaps(const Tensor& overlaps, const Tensor& scores,
                                    int64_t max_output_size, double overlap_threshold,
                                    double score_threshold) {
  const char* op = "non_max_suppression_overlaps";
  TF_CHECK_ARG(overlaps.defined() && scores.defined(), op, "overlaps and scores must be defined");
  TF_CHECK_ARG(overlaps.rank() == 2 && overlaps.shape()[0] == overlaps.shape()[1] &&
                   is_floating(overlaps.dtype()),
               op, "overlaps must be a floating (num_boxes, num_boxes) tensor, got {} {}",
               dtype_name(overlaps.dtype()), overlaps.shape().to_string());
  TF_CHECK_ARG(scores.rank() != 1 || scores.shape()[0] == overlaps.shape()[0], op,
               "overlaps {} and scores {} must have one row per box", overlaps.shape().to_string(),
               scores.shape().to_string());
  const Tensor ov = cast(overlaps, float32);
  auto rows = [ov](const Tensor& i) { return reshape(gather(ov, reshape(i, {1}), 0), {-1}); };
  if (eager()) {
    check_greedy(op, scores, max_output_size, overlap_threshold, score_threshold);
    const std::vector<double> m = detail::to_double_vector(ov);
    const int64_t n = overlaps.shape()[0];
    return cut(op, host_greedy(scores, max_output_size, overlap_threshold, score_threshold,
                               [m, n](int64_t i, int64_t j) {
                                 return static_cast<float>(m[static_cast<size_t>(i * n + j)]);
                               }));
  }
  return cut(op, greedy(op, scores, max_output_size, overlap_threshold, score_threshold, rows));
}

}  // namespace tapeflow::image
