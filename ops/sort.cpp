#include "ops/sort.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>
#include <vector>

#include "core/check.h"
#include "ops/binary.h"
#include "ops/dispatch.h"
#include "ops/factory.h"
#include "ops/helpers.h"
#include "ops/indexing.h"
#include "ops/math.h"
#include "ops/movement.h"
#include "ops/reduce.h"
#include "ops/scan.h"
#include "ops/scatter.h"
#include "ops/unary.h"

namespace tapeflow {

namespace prims {

void TopK::infer(std::span<const Tensor> in, std::span<TensorMeta> out) const {
  const TensorShape& s = in[0].shape();
  TF_CHECK_ARG(s.rank() == 2 && in[0].dtype() != bool_, name(),
               "expects a (rows, n) input of a numeric dtype, got {} {}", s.to_string(),
               dtype_name(in[0].dtype()));
  TF_CHECK_ARG(k >= 0 && (s[1] < 0 || k <= s[1]), name(),
               "input must have at least k columns. Had {}, needed {}", s[1], k);
  TF_CHECK_ARG(s[1] <= int64_t{2147483647}, name(),
               "rows of {} elements do not fit the int32 indices", s[1]);
  out[0] = {TensorShape{s[0], k}, in[0].dtype()};
  out[1] = {TensorShape{s[0], k}, int32};
}

// TF's TopKV2 gradient: each value's cotangent goes back to the input position it came from
// (positions are distinct within a row, so a scatter that replaces is a scatter that adds). The
// indices have no gradient. Built from values, not host sizes (the row offsets are a cumsum),
// so that a graph traced for a None number of rows serves every batch.
uint32_t TopK::vjp_saves() const {
  return save_output(1);
}
std::vector<Tensor> TopK::vjp(std::span<const Tensor> p, std::span<const Tensor> cts,
                              std::span<const int> argnums, std::span<const Tensor> outs) const {
  auto input_grad = [&]() -> Tensor {
    const Tensor& g = cts[0];
    if (!g.defined()) return Tensor();
    const int64_t n = p[0].shape()[1];
    // Zeros of the input's shape (rows, n), made from g so that no row count is baked in.
    const Tensor zero = zeros_like(pad(g, {{0, 0}, {0, n - k}}));
    if (k == 0 || p[0].shape()[0] == 0) return zero;
    const Tensor idx = cast(outs[1], int64);
    const Tensor row_start =
        multiply(cumsum(ones_like(idx), 0, /*exclusive=*/true), constant(Tensor(n)));
    const Tensor pos = reshape(add(idx, row_start), TensorShape{-1});
    const Tensor flat =
        detail::dispatch(ScatterRowsUpdate{},
                         {reshape(zero, TensorShape{-1, 1}), pos, reshape(g, TensorShape{-1, 1})});
    return reshape(flat, TensorShape{-1, n});
  };
  std::vector<Tensor> out;
  for (int a : argnums) out.push_back(a == 0 ? input_grad() : Tensor());
  return out;
}

void SearchSorted::infer(std::span<const Tensor> in, std::span<TensorMeta> out) const {
  const TensorShape &s = in[0].shape(), &v = in[1].shape();
  TF_CHECK_ARG(s.rank() == 2 && v.rank() == 2 && s[0] == v[0] && in[0].dtype() == in[1].dtype() &&
                   in[0].dtype() != bool_,
               name(),
               "expects sorted_sequence (R, N) and values (R, M) of one numeric dtype, "
               "got {} {} and {} {}",
               s.to_string(), dtype_name(in[0].dtype()), v.to_string(), dtype_name(in[1].dtype()));
  TF_CHECK_ARG(out_type == int64 || s[1] <= int64_t{2147483647}, name(),
               "a sequence of {} elements does not fit out_type int32", s[1]);
  out[0] = {v, out_type};
}

}  // namespace prims

namespace {

void check_sortable(const char* op, const Tensor& x, const char* what) {
  TF_CHECK_ARG(x.defined(), op, "{} is undefined", what);
  TF_CHECK_ARG(x.dtype() != bool_, op, "{} must be a numeric dtype, got bool", what);
}

bool parse_direction(const char* op, const std::string& direction) {
  TF_CHECK_ARG(direction == "ASCENDING" || direction == "DESCENDING", op,
               "direction must be \"ASCENDING\" or \"DESCENDING\", got \"{}\"", direction);
  return direction == "ASCENDING";
}

// TopK over the last axis of x (rank >= 1, last dimension known): values and int32 indices of
// shape x.shape[:-1] + [k].
std::pair<Tensor, Tensor> topk_last(const Tensor& x, int64_t k, bool ascending) {
  const TensorShape& s = x.shape();
  const int64_t n = s[-1];
  TensorShape lead(std::span<const int64_t>(s.begin(), s.end() - 1));
  // A None leading dimension is left to the reshape (-1) when the rows are not empty.
  const int64_t rows = lead.is_fully_defined() ? lead.num_elements() : -1;
  const Tensor flat = reshape(x, TensorShape{n > 0 ? -1 : rows, n});
  const Tensor in[] = {flat};
  auto res = detail::dispatch_multi(prims::TopK(k, ascending), in);
  TensorShape out_shape = lead;
  out_shape.push_back(k);
  // The first dimension as -1 where it can be inferred: a graph traced for a None batch then
  // serves every batch size (a fixed size made it retrace per size).
  if (out_shape.rank() >= 2 && out_shape.num_elements() > 0) out_shape[0] = -1;
  return {reshape(res[0], out_shape), reshape(res[1], out_shape)};
}

// sort and argsort: the axis moved last (a swap of two axes, its own inverse), TopK over all of
// it, and moved back.
std::pair<Tensor, Tensor> sort_along(const char* op, const Tensor& values, int axis,
                                     bool ascending) {
  check_sortable(op, values, "values");
  TF_CHECK_ARG(values.rank() >= 1, op, "values must be at least 1-D, got shape {}",
               values.shape().to_string());
  const int a = detail::normalize_axis(op, axis, values.shape());
  const int last = values.rank() - 1;
  std::vector<int> perm(static_cast<size_t>(values.rank()));
  for (int d = 0; d <= last; ++d) perm[static_cast<size_t>(d)] = d;
  std::swap(perm[static_cast<size_t>(a)], perm[static_cast<size_t>(last)]);
  const Tensor moved = a == last ? values : transpose(values, perm);
  const int64_t n = moved.shape()[-1];
  TF_CHECK_ARG(n >= 0, op, "the sorted axis of values {} must have a known length",
               values.shape().to_string());
  auto [v, i] = topk_last(moved, n, ascending);
  if (a != last) {
    v = transpose(v, perm);
    i = transpose(i, perm);
  }
  return {v, i};
}

void check_int_dtype(const char* op, DType d, const char* what) {
  TF_CHECK_ARG(d == int32 || d == int64, op, "{} must be int32 or int64, got {}", what,
               dtype_name(d));
}

// Sums data (N) (float64; undefined: ones) into `length` bins at ids (N) int64 and casts the
// counts to dtype. Ids outside [0, length) are dropped. Counting in float64 is exact up to 2^53.
Tensor count_into(const Tensor& ids, const Tensor& data, int64_t length, DType dtype) {
  const Tensor inside =
      logical_and(greater_equal(ids, zeros_like(ids)), less(ids, constant(Tensor(length))));
  const Tensor safe = where(inside, ids, constant(Tensor(int64_t{-1})));
  const Tensor w = data.defined() ? data : ones_like(ids, float64);
  const int64_t n = ids.shape()[0];
  const Tensor col = reshape(w, TensorShape{n == 0 ? 0 : -1, 1});
  return cast(reshape(unsorted_segment_sum(col, safe, length), TensorShape{length}), dtype);
}

}  // namespace

Tensor sort(const Tensor& values, int axis, const std::string& direction) {
  return sort_along("sort", values, axis, parse_direction("sort", direction)).first;
}

Tensor argsort(const Tensor& values, int axis, const std::string& direction, bool stable) {
  // TF has only the stable sort; stable=false gives it too.
  (void)stable;
  return sort_along("argsort", values, axis, parse_direction("argsort", direction)).second;
}

Tensor searchsorted(const Tensor& sorted_sequence, const Tensor& values, const std::string& side,
                    DType out_type) {
  const char* op = "searchsorted";
  check_sortable(op, sorted_sequence, "sorted_sequence");
  check_sortable(op, values, "values");
  TF_CHECK_ARG(side == "left" || side == "right", op,
               "side must be \"left\" or \"right\", got \"{}\"", side);
  check_int_dtype(op, out_type, "out_type");
  TF_CHECK_ARG(sorted_sequence.dtype() == values.dtype(), op,
               "sorted_sequence ({}) and values ({}) must have one dtype",
               dtype_name(sorted_sequence.dtype()), dtype_name(values.dtype()));
  const TensorShape &ss = sorted_sequence.shape(), &vs = values.shape();
  bool lead_ok = ss.rank() >= 1 && ss.rank() == vs.rank();
  for (int d = 0; lead_ok && d + 1 < ss.rank(); ++d) lead_ok = ss[d] == vs[d];
  TF_CHECK_ARG(lead_ok, op,
               "sorted_sequence {} and values {} must have one rank (at least 1) and the same "
               "leading dimensions",
               ss.to_string(), vs.to_string());
  const int64_t n = ss[-1], m = vs[-1];
  TF_CHECK_ARG(n >= 0 && m >= 0, op, "the last dimensions of {} and {} must be known",
               ss.to_string(), vs.to_string());
  if (n == 0) return zeros_like(values, out_type);
  // Rows of (R, N) and (R, M): -1 rows when there are any, so that a None batch stays open.
  TensorShape lead(std::span<const int64_t>(ss.begin(), ss.end() - 1));
  const int64_t rows = lead.is_fully_defined() ? lead.num_elements() : -1;
  if (rows == 0 || m == 0) return zeros_like(values, out_type);
  const Tensor in[] = {reshape(sorted_sequence, TensorShape{-1, n}),
                       reshape(values, TensorShape{-1, m})};
  TensorShape out_shape = vs;
  if (out_shape.rank() >= 2) out_shape[0] = -1;
  return reshape(detail::dispatch(prims::SearchSorted(side == "right", out_type), in), out_shape);
}

namespace {
std::tuple<Tensor, Tensor, Tensor> unique_impl(const char* op, const Tensor& x, DType out_idx);
}  // namespace

std::pair<Tensor, Tensor> unique(const Tensor& x, DType out_idx) {
  auto [y, idx, count] = unique_impl("unique", x, out_idx);
  (void)count;
  return {y, idx};
}

std::tuple<Tensor, Tensor, Tensor> unique_with_counts(const Tensor& x, DType out_idx) {
  return unique_impl("unique_with_counts", x, out_idx);
}

namespace {
std::tuple<Tensor, Tensor, Tensor> unique_impl(const char* op, const Tensor& x, DType out_idx) {
  TF_CHECK_ARG(x.defined(), op, "x is undefined");
  TF_CHECK_ARG(x.rank() == 1, op, "x must be 1-D, got shape {}", x.shape().to_string());
  check_int_dtype(op, out_idx, "out_idx");
  TF_CHECK_ARG(!x.is_symbolic(), op,
               "the result's length depends on x's values, which a traced function does not "
               "have: call unique eagerly");
  // Floats compare as doubles (exact for every floating dtype): -0 equals +0 and each NaN is a
  // value of its own, as in TF's hash table. Integers and bool compare as int64.
  const bool fp = is_floating(x.dtype());
  const int64_t n = x.shape()[0];
  std::vector<int64_t> first, idx(static_cast<size_t>(n)), count;
  auto add = [&](auto& seen, auto key, size_t i) {
    auto [it, fresh] = seen.try_emplace(key, static_cast<int64_t>(first.size()));
    if (fresh) {
      first.push_back(static_cast<int64_t>(i));
      count.push_back(0);
    }
    idx[i] = it->second;
    ++count[static_cast<size_t>(it->second)];
  };
  if (fp) {
    const std::vector<double> v = x.numpy<double>();
    std::unordered_map<double, int64_t> seen;
    for (size_t i = 0; i < v.size(); ++i) {
      if (std::isnan(v[i])) {
        idx[i] = static_cast<int64_t>(first.size());
        first.push_back(static_cast<int64_t>(i));
        count.push_back(1);
      } else {
        add(seen, v[i] == 0 ? 0.0 : v[i], i);
      }
    }
  } else {
    const std::vector<int64_t> v = cast(x, int64).numpy<int64_t>();
    std::unordered_map<int64_t, int64_t> seen;
    for (size_t i = 0; i < v.size(); ++i) add(seen, v[i], i);
  }
  const auto u = static_cast<int64_t>(first.size());
  return {gather(x, constant(first, TensorShape{u})), cast(constant(idx, TensorShape{n}), out_idx),
          cast(constant(count, TensorShape{u}), out_idx)};
}
}  // namespace

Tensor histogram_fixed_width(const Tensor& values, const Tensor& value_range, int64_t nbins,
                             DType dtype) {
  const char* op = "histogram_fixed_width";
  TF_CHECK_ARG(values.defined() && value_range.defined(), op, "an input is undefined");
  const DType t = values.dtype();
  TF_CHECK_ARG(is_floating(t) || t == int32 || t == int64, op,
               "values must be floating, int32 or int64, got {}", dtype_name(t));
  TF_CHECK_ARG(value_range.dtype() == t && value_range.shape() == TensorShape{2}, op,
               "value_range must be a ({},) {} tensor (values' dtype), got {} {}", 2, dtype_name(t),
               value_range.shape().to_string(), dtype_name(value_range.dtype()));
  TF_CHECK_ARG(nbins > 0, op, "nbins should be a positive number, got {}", nbins);
  check_int_dtype(op, dtype, "dtype");
  if (!value_range.is_symbolic()) {
    const auto r = value_range.numpy<double>();
    TF_CHECK_ARG(r[0] < r[1], op,
                 "value_range should satisfy value_range[0] < value_range[1], "
                 "but got [{}, {}]",
                 r[0], r[1]);
  }
  if (!values.is_symbolic() && is_floating(t) && values.num_elements() > 0)
    TF_CHECK_ARG(!reduce_any(math::is_nan(values)).numpy<bool>()[0], op,
                 "Histogram values must not contain NaN");
  // TF's kernel: the distance from the low end (in the values' dtype, after clamping below),
  // in float64, over step = (hi - lo) / nbins, truncated and clamped to the last bin.
  const Tensor lo = gather(value_range, constant(Tensor(int64_t{0})));
  const Tensor hi = gather(value_range, constant(Tensor(int64_t{1})));
  const Tensor step =
      divide(cast(subtract(hi, lo), float64), constant(Tensor(static_cast<double>(nbins))));
  const Tensor flat = reshape(values, TensorShape{values.num_elements() == 0 ? 0 : -1});
  const Tensor dist = cast(subtract(maximum(flat, lo), lo), float64);
  const Tensor bin = minimum(divide(dist, step), constant(Tensor(static_cast<double>(nbins - 1))));
  return count_into(cast(bin, int64), Tensor(), nbins, dtype);
}

namespace math {

std::pair<Tensor, Tensor> top_k(const Tensor& input, int64_t k, bool sorted) {
  const char* op = "top_k";
  // The result is always sorted; TF leaves the order of sorted=false unspecified.
  (void)sorted;
  check_sortable(op, input, "input");
  TF_CHECK_ARG(input.rank() >= 1, op, "input must be >= 1-D, got shape {}",
               input.shape().to_string());
  TF_CHECK_ARG(k >= 0, op, "Need k >= 0, got {}", k);
  const int64_t n = input.shape()[-1];
  TF_CHECK_ARG(n >= 0, op, "the last dimension of input {} must be known",
               input.shape().to_string());
  TF_CHECK_ARG(k <= n, op, "input must have at least k columns. Had {}, needed {}", n, k);
  return topk_last(input, k, /*ascending=*/false);
}

Tensor in_top_k(const Tensor& targets, const Tensor& predictions, int64_t k) {
  const char* op = "in_top_k";
  TF_CHECK_ARG(targets.defined() && predictions.defined(), op, "an input is undefined");
  check_int_dtype(op, targets.dtype(), "targets");
  TF_CHECK_ARG(predictions.dtype() == float32, op, "predictions must be float32 (as TF), got {}",
               dtype_name(predictions.dtype()));
  const TensorShape &ts = targets.shape(), &ps = predictions.shape();
  TF_CHECK_ARG(ps.rank() == 2 && ts.rank() == 1 && ts[0] == ps[0], op,
               "expects predictions (batch, classes) and targets (batch), got {} and {}",
               ps.to_string(), ts.to_string());
  const int64_t classes = ps[1];
  TF_CHECK_ARG(classes >= 0, op, "the number of classes of predictions {} must be known",
               ps.to_string());
  // TF's kernel: false for a target outside [0, classes) or a row with a non-finite
  // prediction; else true when fewer than k classes predict strictly more than the target.
  const Tensor t = cast(targets, int64);
  const Tensor valid =
      logical_and(greater_equal(t, zeros_like(t)), less(t, constant(Tensor(classes))));
  if (classes == 0) return valid;
  // The target's prediction, selected by comparison with the class ids rather than gathered
  // (gather_nd with batch_dims needs the batch size, which a trace with a None batch lacks).
  // An invalid target selects nothing: -inf, and `valid` makes its row false anyway.
  const Tensor hit = equal(expand_dims(t, 1), range(0.0, double(classes), 1.0, int64));
  const Tensor target_pred = reduce_max(
      where(hit, predictions,
            constant(Tensor(-std::numeric_limits<float>::infinity()), predictions.dtype())),
      1);
  const Tensor finite = reduce_all(is_finite(predictions), 1);
  const Tensor above =
      reduce_sum(cast(greater(predictions, expand_dims(target_pred, 1)), int64), 1);
  return logical_and(logical_and(valid, finite), less(above, constant(Tensor(k))));
}

Tensor bincount(const Tensor& arr, const Tensor& weights, int64_t minlength, int64_t maxlength,
                DType dtype) {
  const char* op = "bincount";
  TF_CHECK_ARG(arr.defined(), op, "arr is undefined");
  check_int_dtype(op, arr.dtype(), "arr");
  TF_CHECK_ARG(minlength >= -1 && maxlength >= -1, op,
               "minlength and maxlength must be non-negative (or -1: none), got {} and {}",
               minlength, maxlength);
  if (weights.defined()) {
    TF_CHECK_ARG(weights.shape() == arr.shape(), op, "weights {} must have the shape of arr {}",
                 weights.shape().to_string(), arr.shape().to_string());
    const DType w = weights.dtype();
    TF_CHECK_ARG(w == float32 || w == float64 || w == int32 || w == int64, op,
                 "weights must be float32, float64, int32 or int64, got {}", dtype_name(w));
  } else {
    TF_CHECK_ARG(dtype == int32 || dtype == int64 || dtype == float32 || dtype == float64, op,
                 "dtype must be int32, int64, float32 or float64, got {}", dtype_name(dtype));
  }
  const DType out = weights.defined() ? weights.dtype() : dtype;
  const int64_t n = arr.num_elements();
  TF_CHECK_ARG(n >= 0, op, "arr {} must have a known shape", arr.shape().to_string());
  const Tensor ids = cast(reshape(arr, TensorShape{n}), int64);
  int64_t length = minlength >= 0 && minlength == maxlength ? minlength : -1;
  if (!arr.is_symbolic()) {
    const std::vector<int64_t> v = ids.numpy<int64_t>();
    int64_t top = 0;
    for (int64_t e : v) {
      TF_CHECK_ARG(e >= 0, op, "Input arr must be non-negative! Got {}", e);
      top = std::max(top, e + 1);
    }
    if (length < 0) {
      length = std::max(top, minlength);
      if (maxlength >= 0) length = std::min(length, maxlength);
    }
  }
  TF_CHECK_ARG(length >= 0, op,
               "the output's length depends on arr's values, which a traced function does not "
               "have: give minlength == maxlength to fix it, or call bincount eagerly");
  const Tensor w = weights.defined() ? cast(reshape(weights, TensorShape{n}), float64) : Tensor();
  return count_into(ids, w, length, out);
}

Tensor confusion_matrix(const Tensor& labels, const Tensor& predictions, int64_t num_classes,
                        const Tensor& weights, DType dtype) {
  const char* op = "confusion_matrix";
  TF_CHECK_ARG(labels.defined() && predictions.defined(), op, "an input is undefined");
  check_int_dtype(op, labels.dtype(), "labels");
  check_int_dtype(op, predictions.dtype(), "predictions");
  TF_CHECK_ARG(labels.rank() == 1 && labels.shape() == predictions.shape(), op,
               "labels {} and predictions {} must be 1-D of one length", labels.shape().to_string(),
               predictions.shape().to_string());
  TF_CHECK_ARG(!weights.defined() || weights.shape() == labels.shape(), op,
               "weights {} must have the shape of labels {}",
               weights.defined() ? weights.shape().to_string() : "", labels.shape().to_string());
  TF_CHECK_ARG(dtype == int32 || dtype == int64 || dtype == float32 || dtype == float64, op,
               "dtype must be int32, int64, float32 or float64, got {}", dtype_name(dtype));
  TF_CHECK_ARG(num_classes >= -1, op, "num_classes must be non-negative (or -1), got {}",
               num_classes);
  const Tensor l = cast(labels, int64), p = cast(predictions, int64);
  if (!labels.is_symbolic() && !predictions.is_symbolic()) {
    const auto lv = l.numpy<int64_t>(), pv = p.numpy<int64_t>();
    int64_t top = 0;
    for (size_t i = 0; i < lv.size(); ++i) {
      TF_CHECK_ARG(lv[i] >= 0, op, "`labels` contains negative values: labels[{}] = {}", i, lv[i]);
      TF_CHECK_ARG(pv[i] >= 0, op, "`predictions` contains negative values: predictions[{}] = {}",
                   i, pv[i]);
      top = std::max({top, lv[i] + 1, pv[i] + 1});
    }
    if (num_classes >= 0) {
      for (size_t i = 0; i < lv.size(); ++i) {
        TF_CHECK_ARG(lv[i] < num_classes, op, "`labels` out of bound: labels[{}] = {} >= {}", i,
                     lv[i], num_classes);
        TF_CHECK_ARG(pv[i] < num_classes, op,
                     "`predictions` out of bound: predictions[{}] = {} >= {}", i, pv[i],
                     num_classes);
      }
    } else {
      num_classes = top;
    }
  }
  TF_CHECK_ARG(num_classes >= 0, op,
               "without num_classes the output's shape depends on the values, which a traced "
               "function does not have: give num_classes");
  // Traced, out-of-range pairs are dropped (the eager checks above raise instead).
  const Tensor inside =
      logical_and(less(l, constant(Tensor(num_classes))), less(p, constant(Tensor(num_classes))));
  const Tensor ids = where(inside, add(multiply(l, constant(Tensor(num_classes))), p),
                           constant(Tensor(int64_t{-1})));
  const Tensor w = weights.defined() ? cast(weights, float64) : Tensor();
  return reshape(count_into(ids, w, num_classes * num_classes, dtype),
                 TensorShape{num_classes, num_classes});
}

}  // namespace math

}  // namespace tapeflow
