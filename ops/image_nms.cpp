// tf.image's greedy non-maximum suppression (ops/image_more.h): max_output_size rounds of "take
// the best remaining candidate, drop every candidate that overlaps it too much", each round a
// few tensor ops (argmax, a gather, elementwise), so the padded forms run on every device and
// inside traced functions with static shapes; combined_non_max_suppression runs the rounds for
// every batch entry and class at once. Eagerly the selection runs on the host.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <utility>
#include <vector>

#include "core/allocator.h"
#include "core/check.h"
#include "core/context.h"
#include "core/parallel.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/image_more.h"
#include "ops/movement.h"
#include "ops/reduce.h"
#include "ops/scan.h"
#include "ops/sort.h"
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

// Every row of boxes (rows, 4) as iou_rows computes its corners (each pair ordered) and area.
struct Box {
  float y1, x1, y2, x2, area;
};
std::vector<Box> host_boxes(const Tensor& boxes) {
  const std::vector<double> b = detail::to_double_vector(boxes);
  std::vector<Box> out(b.size() / 4);
  for (size_t i = 0; i < out.size(); ++i) {
    const auto a = static_cast<float>(b[4 * i]), c = static_cast<float>(b[4 * i + 2]);
    const auto d = static_cast<float>(b[4 * i + 1]), e = static_cast<float>(b[4 * i + 3]);
    Box& r = out[i];
    r = {std::min(a, c), std::min(d, e), std::max(a, c), std::max(d, e), 0.0f};
    r.area = (r.y2 - r.y1) * (r.x2 - r.x1);
  }
  return out;
}

// Box i against box j as iou_rows computes it.
std::function<float(int64_t, int64_t)> host_iou(const Tensor& boxes) {
  return [all = host_boxes(boxes)](int64_t bi, int64_t bj) {
    const Box& i = all[static_cast<size_t>(bi)];
    const Box& j = all[static_cast<size_t>(bj)];
    if (!(i.area > 0.0f && j.area > 0.0f)) return 0.0f;
    const float ih = std::max(std::min(j.y2, i.y2) - std::max(j.y1, i.y1), 0.0f);
    const float iw = std::max(std::min(j.x2, i.x2) - std::max(j.x1, i.x1), 0.0f);
    const float inter = ih * iw;
    const float uni = j.area + i.area - inter;
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

namespace {

// The selection of combined_non_max_suppression as indices, for both paths: per batch entry and
// slot, the row of the selected box in boxes seen as (rows, 4), its element in scores seen
// flat, its class (float32), whether the slot holds a detection; and the count per entry.
struct CombinedPicks {
  Tensor box_row, score_index, classes, valid, count;
};

// Whether candidate c (of positive area) overlaps any of the k kept boxes of positive area
// (columns y1 .. area) by more than limit, with iou_rows' arithmetic. Branch-free, so that it
// vectorises (the union is positive: both areas are); no early exit.
bool suppressed(const Box& c, const float* y1, const float* x1, const float* y2, const float* x2,
                const float* area, size_t k, float limit) {
  int any = 0;
  for (size_t j = 0; j < k; ++j) {
    const float ih = std::max(std::min(c.y2, y2[j]) - std::max(c.y1, y1[j]), 0.0f);
    const float iw = std::max(std::min(c.x2, x2[j]) - std::max(c.x1, x1[j]), 0.0f);
    const float inter = ih * iw;
    any |= static_cast<int>(inter / (c.area + area[j] - inter) > limit);
  }
  return any != 0;
}

// Eagerly, on the host: per entry and class (split over the thread pool) the greedy selection
// of host_greedy, then the kept boxes of all classes by score.
CombinedPicks combined_host(const Tensor& boxes, const Tensor& scores, int64_t per_class,
                            int64_t slots, double iou_threshold, double score_threshold) {
  const int64_t batch = scores.shape()[0], n = scores.shape()[1], classes = scores.shape()[2];
  const int64_t q = boxes.shape()[2];
  const std::vector<double> sd = detail::to_double_vector(scores);
  const auto thr = static_cast<float>(score_threshold);
  const auto limit = static_cast<float>(iou_threshold);
  const std::vector<Box> all = host_boxes(boxes);  // (batch * n * q) rows
  struct Pick {
    float score;
    int32_t cls, box;
  };
  // Each (entry, class) on its own: candidates above the threshold in a heap, best first (ties
  // to the lower index, as the tensor path's argmax), popped only while picks are wanted.
  std::vector<std::vector<Pick>> per(static_cast<size_t>(batch * classes));
  detail::parallel_for(batch * classes, 4, [&](int64_t begin, int64_t end) {
    std::vector<std::pair<float, int32_t>> heap;
    // The kept boxes' corners and areas as columns: each candidate is checked against all of
    // them in one loop the compiler vectorises.
    std::vector<float> ky1, kx1, ky2, kx2, karea;
    const auto later = [](const std::pair<float, int32_t>& x, const std::pair<float, int32_t>& y) {
      return x.first < y.first || (x.first == y.first && x.second > y.second);
    };
    for (int64_t u = begin; u < end; ++u) {
      const int64_t b = u / classes, c = u % classes;
      heap.clear();
      for (std::vector<float>* v : {&ky1, &kx1, &ky2, &kx2, &karea}) v->clear();
      for (int64_t i = 0; i < n; ++i) {
        const auto v = static_cast<float>(sd[static_cast<size_t>((b * n + i) * classes + c)]);
        if (v > thr) heap.emplace_back(v, static_cast<int32_t>(i));
      }
      std::make_heap(heap.begin(), heap.end(), later);
      std::vector<Pick>& out = per[static_cast<size_t>(u)];
      // A box of zero area overlaps nothing: it is kept (when its turn comes) but never
      // suppresses, so only boxes of positive area go into the columns.
      int64_t kept = 0;
      while (!heap.empty() && kept < per_class) {
        std::pop_heap(heap.begin(), heap.end(), later);
        const auto [v, i] = heap.back();
        heap.pop_back();
        const Box& cand = all[static_cast<size_t>((b * n + i) * q + (q == 1 ? 0 : c))];
        if (cand.area > 0.0f) {
          if (suppressed(cand, ky1.data(), kx1.data(), ky2.data(), kx2.data(), karea.data(),
                         karea.size(), limit))
            continue;
          ky1.push_back(cand.y1);
          kx1.push_back(cand.x1);
          ky2.push_back(cand.y2);
          kx2.push_back(cand.x2);
          karea.push_back(cand.area);
        }
        ++kept;
        out.push_back({v, static_cast<int32_t>(c), i});
      }
    }
  });
  const size_t total = static_cast<size_t>(batch * slots);
  std::vector<int32_t> box_row(total, 0), score_index(total, 0), valid(total, 0), count;
  std::vector<float> cls(total, 0.0f);
  for (int64_t b = 0; b < batch; ++b) {
    // The picks of all classes by score (stable: lower class, then earlier pick, first).
    std::vector<Pick> picks;
    for (int64_t c = 0; c < classes; ++c) {
      const std::vector<Pick>& pc = per[static_cast<size_t>(b * classes + c)];
      picks.insert(picks.end(), pc.begin(), pc.end());
    }
    std::stable_sort(picks.begin(), picks.end(),
                     [](const Pick& x, const Pick& y) { return x.score > y.score; });
    const int64_t k = std::min<int64_t>(slots, static_cast<int64_t>(picks.size()));
    for (int64_t j = 0; j < k; ++j) {
      const Pick& p = picks[static_cast<size_t>(j)];
      const size_t o = static_cast<size_t>(b * slots + j);
      box_row[o] = static_cast<int32_t>((b * n + p.box) * q + (q == 1 ? 0 : p.cls));
      score_index[o] = static_cast<int32_t>((b * n + p.box) * classes + p.cls);
      cls[o] = static_cast<float>(p.cls);
      valid[o] = 1;
    }
    count.push_back(static_cast<int32_t>(k));
  }
  const TensorShape s{batch, slots};
  return {constant(box_row, s), constant(score_index, s), constant(cls, s),
          cast(constant(valid, s), bool_), constant(count, TensorShape{batch})};
}

// In a trace: per_class rounds of the greedy selection for every (entry, class) at once, then
// top_k over the kept scores of all classes (its ties go to the lower flat index: the lower
// class, then the earlier round, as the host path).
CombinedPicks combined_traced(const Tensor& boxes, const Tensor& scores, int64_t per_class,
                              int64_t slots, double iou_threshold, double score_threshold) {
  const int64_t n = scores.shape()[1], classes = scores.shape()[2], q = boxes.shape()[2];
  const Tensor none = constant(Tensor(-std::numeric_limits<float>::infinity()), float32);
  const Tensor zero = constant(Tensor(0.0), float32);
  const Tensor s = transpose(cast(scores, float32), {0, 2, 1});     // (batch, classes, n)
  const Tensor bx = transpose(cast(boxes, float32), {0, 2, 1, 3});  // (batch, q, n, 4)
  const auto coord = [&](int64_t j) {
    return reshape(slice(bx, {0, 0, 0, j}, {-1, -1, -1, 1}), {-1, q, n});
  };
  const Tensor y1 = minimum(coord(0), coord(2)), y2 = maximum(coord(0), coord(2));
  const Tensor x1 = minimum(coord(1), coord(3)), x2 = maximum(coord(1), coord(3));
  const Tensor area = (y2 - y1) * (x2 - x1);  // (batch, q, n)
  Tensor live =
      where(greater(s, constant(Tensor(score_threshold), float32)), s, zeros_like(s) + none);
  const Tensor positions = reshape(cast(cumsum(ones({n}), 0), int32) - i32(1), {1, 1, n});
  const auto picked = [&](const Tensor& onehot, const Tensor& v) {
    return reduce_sum(where(onehot, v, zero), {2}, true);  // (batch, classes, 1)
  };
  std::vector<Tensor> idx, best_scores;
  const int64_t rounds = std::min(per_class, n);
  for (int64_t k = 0; k < rounds; ++k) {
    const Tensor best = cast(argmax(live, 2), int32);  // (batch, classes)
    const Tensor top = reduce_max(live, {2});
    const Tensor found = greater(top, none);
    const Tensor onehot = equal(positions, expand_dims(best, 2));
    const Tensor by1 = picked(onehot, y1), by2 = picked(onehot, y2);
    const Tensor bx1 = picked(onehot, x1), bx2 = picked(onehot, x2);
    const Tensor ba = picked(onehot, area);
    const Tensor ih = maximum(minimum(y2, by2) - maximum(y1, by1), zero);
    const Tensor iw = maximum(minimum(x2, bx2) - maximum(x1, bx1), zero);
    const Tensor inter = ih * iw;
    const Tensor ok = logical_and(greater(area, zero), greater(ba, zero));
    const Tensor uni = area + ba - inter;
    const Tensor overlap = where(ok, inter / where(ok, uni, ones_like(uni)), zero);
    const Tensor drop =
        logical_or(greater(overlap, constant(Tensor(iou_threshold), float32)), onehot);
    live = where(logical_and(drop, expand_dims(found, 2)), zeros_like(live) + none, live);
    idx.push_back(where(found, best, i32(0)));
    best_scores.push_back(top);
  }
  // (batch, classes * rounds) kept scores (-inf where a round found nothing) and box indices.
  const int64_t kept = classes * rounds;
  const Tensor flat_scores = reshape(stack(best_scores, 2), {-1, kept});
  const Tensor flat_idx = reshape(stack(idx, 2), {-1, kept});
  const int64_t take = std::min(slots, kept);
  auto [vals, order] = math::top_k(flat_scores, take);  // (batch, take)
  const Tensor valid = greater(vals, none);
  const Tensor entry =
      cast(cumsum(ones_like(slice(vals, {0, 0}, {-1, 1})), 0), int32) - i32(1);  // (batch, 1)
  const Tensor box_i =
      reshape(gather(reshape(flat_idx, {-1}), entry * i32(kept) + order), {-1, take});
  const Tensor cls = floordiv(order, i32(rounds));
  const Tensor box_row = (entry * i32(n) + box_i) * i32(q) + (q == 1 ? zeros_like(cls) : cls);
  const Tensor score_index = (entry * i32(n) + box_i) * i32(classes) + cls;
  CombinedPicks p{box_row, score_index, cast(cls, float32), valid,
                  reduce_sum(cast(valid, int32), {1})};
  if (take < slots) {  // fewer detections than slots: pad
    const auto pad_to = [&](const Tensor& t) {
      return concat(
          {t, zeros_like(slice(t, {0, 0}, {-1, 1})) + zeros({1, slots - take}, t.dtype())}, 1);
    };
    p.box_row = pad_to(p.box_row);
    p.score_index = pad_to(p.score_index);
    p.classes = pad_to(p.classes);
    p.valid = cast(pad_to(cast(p.valid, int32)), bool_);
  }
  return p;
}

}  // namespace

CombinedNms combined_non_max_suppression(const Tensor& boxes, const Tensor& scores,
                                         int64_t max_output_size_per_class, int64_t max_total_size,
                                         double iou_threshold, double score_threshold,
                                         bool pad_per_class, bool clip_boxes) {
  const char* op = "combined_non_max_suppression";
  TF_CHECK_ARG(boxes.defined() && scores.defined(), op, "boxes and scores must be defined");
  const TensorShape& bs = boxes.shape();
  const TensorShape& ss = scores.shape();
  TF_CHECK_ARG(boxes.rank() == 4 && bs[3] == 4 && is_floating(boxes.dtype()), op,
               "boxes must be a floating (batch, num_boxes, q, 4) tensor, got {} {}",
               dtype_name(boxes.dtype()), bs.to_string());
  TF_CHECK_ARG(scores.rank() == 3 && is_floating(scores.dtype()), op,
               "scores must be a floating (batch, num_boxes, num_classes) tensor, got {} {}",
               dtype_name(scores.dtype()), ss.to_string());
  TF_CHECK_ARG(ss[1] >= 0 && ss[2] >= 1 && bs[2] >= 1, op,
               "num_boxes, num_classes and q must be known, got boxes {} and scores {}",
               bs.to_string(), ss.to_string());
  TF_CHECK_ARG((bs[0] < 0 || ss[0] < 0 || bs[0] == ss[0]) && bs[1] == ss[1], op,
               "boxes {} and scores {} must agree on the batch and num_boxes", bs.to_string(),
               ss.to_string());
  TF_CHECK_ARG(bs[2] == 1 || bs[2] == ss[2], op,
               "q (boxes' third dimension) must be 1 or num_classes ({}), got boxes {}", ss[2],
               bs.to_string());
  TF_CHECK_ARG(max_output_size_per_class > 0 && max_total_size > 0, op,
               "max_output_size_per_class and max_total_size must be positive, got {} and {}",
               max_output_size_per_class, max_total_size);
  TF_CHECK_ARG(iou_threshold >= 0.0 && iou_threshold <= 1.0, op,
               "iou_threshold must be in [0, 1], got {}", iou_threshold);
  TF_CHECK_ARG(!std::isnan(score_threshold), op, "score_threshold must not be NaN");
  const int64_t slots =
      pad_per_class ? std::min(max_output_size_per_class * ss[2], max_total_size) : max_total_size;
  // Every image's outputs are padded to `slots` detections (boxes, scores, classes and the
  // picks' index tables): refused up front when that cannot fit in the host's memory.
  const double batch = bs[0] > 0 ? static_cast<double>(bs[0]) : 1.0;
  TF_CHECK_T(ResourceExhaustedError,
             batch * static_cast<double>(slots) * 64.0 <=
                 static_cast<double>(tapeflow::detail::host_memory_bytes()),
             op,
             "{} output slots per image (max_total_size {}, max_output_size_per_class {}) for {} "
             "images need more than this machine's memory",
             slots, max_total_size, max_output_size_per_class, bs[0]);
  const CombinedPicks p = eager() ? combined_host(boxes, scores, max_output_size_per_class, slots,
                                                  iou_threshold, score_threshold)
                                  : combined_traced(boxes, scores, max_output_size_per_class, slots,
                                                    iou_threshold, score_threshold);
  if (bs[1] == 0) {  // no boxes: every slot is padding
    const Tensor z = cast(zeros_like(p.valid), float32);
    return {tile(expand_dims(z, 2), {1, 1, 4}), z, zeros_like(p.classes), p.count};
  }
  const Tensor rows = reshape(cast(boxes, float32), {-1, 4});
  Tensor out_boxes = gather(rows, p.box_row, 0);  // (batch, slots, 4)
  if (clip_boxes)
    out_boxes =
        clip_by_value(out_boxes, constant(Tensor(0.0), float32), constant(Tensor(1.0), float32));
  const Tensor keep = expand_dims(p.valid, 2);
  out_boxes = where(keep, out_boxes, zeros_like(out_boxes));
  const Tensor picked = gather(reshape(cast(scores, float32), {-1}), p.score_index, 0);
  return {out_boxes, where(p.valid, picked, zeros_like(picked)),
          where(p.valid, p.classes, zeros_like(p.classes)), p.count};
}

}  // namespace tapeflow::image
