#include "ops/strided_slice.h"

#include <algorithm>

#include "core/check.h"
#include "ops/dynamic_shape.h"
#include "ops/factory.h"
#include "ops/movement.h"

namespace tapeflow {

namespace {

bool bit(int64_t mask, size_t i) {
  return ((mask >> i) & 1) != 0;
}

// What the spec does to one input dimension.
struct DimSlice {
  int64_t begin = 0, count = 0, stride = 1;
  bool whole = true;  // the dimension as it is (its size may be read at run time)
  bool shrink = false;
};

}  // namespace

Tensor strided_slice(const Tensor& input, const std::vector<int64_t>& begin,
                     const std::vector<int64_t>& end, const std::vector<int64_t>& strides_in,
                     int64_t begin_mask, int64_t end_mask, int64_t ellipsis_mask,
                     int64_t new_axis_mask, int64_t shrink_axis_mask) {
  const char* op = "strided_slice";
  TF_CHECK_ARG(input.defined(), op, "the input is an undefined tensor (TF's None)");
  const size_t n = begin.size();
  const std::vector<int64_t> strides = strides_in.empty() ? std::vector<int64_t>(n, 1) : strides_in;
  TF_CHECK_ARG(end.size() == n && strides.size() == n, op,
               "begin, end and strides must have one entry per spec item, got {}, {} and {}", n,
               end.size(), strides.size());
  TF_CHECK_ARG(n <= 64, op, "the spec has {} items; masks hold 64", n);
  const TensorShape& shape = input.shape();
  const int rank = shape.rank();

  // The input dimensions the entries other than the ellipsis and the new axes cover.
  int ellipses = 0, real = 0;
  for (size_t i = 0; i < n; ++i) {
    if (bit(ellipsis_mask, i))
      ++ellipses;
    else if (!bit(new_axis_mask, i))
      ++real;
  }
  TF_CHECK_ARG(ellipses <= 1, op, "Multiple ellipses in slice spec not allowed");
  TF_CHECK_ARG(real <= rank, op, "Index out of range using input dim {}; input has only {} dims",
               rank, rank);

  std::vector<DimSlice> dims(static_cast<size_t>(rank));
  std::vector<int> new_axes;  // positions in the result
  int d = 0;                  // the next input dimension
  int kept = 0;               // result axes so far (kept dimensions and new axes)
  for (size_t i = 0; i < n; ++i) {
    if (bit(ellipsis_mask, i)) {  // the dimensions no other entry covers, whole
      const int cover = rank - real;
      d += cover;
      kept += cover;
      continue;
    }
    if (bit(new_axis_mask, i)) {
      new_axes.push_back(kept++);
      continue;
    }
    TF_CHECK_ARG(strides[i] != 0, op, "strides[{}] must be non-zero", i);
    const int64_t size = shape[d];
    DimSlice& s = dims[static_cast<size_t>(d)];
    if (bit(shrink_axis_mask, i)) {
      TF_CHECK_ARG(size != None, op, "dimension {} of the input (shape {}) is unknown", d,
                   shape.to_string());
      const int64_t idx = begin[i] < 0 ? begin[i] + size : begin[i];
      TF_CHECK_ARG(idx >= 0 && idx < size, op, "slice index {} of dimension {} out of bounds.",
                   begin[i], d);
      s = DimSlice{idx, 1, 1, false, true};
    } else if (!(bit(begin_mask, i) && bit(end_mask, i) && strides[i] == 1)) {
      TF_CHECK_ARG(size != None, op,
                   "dimension {} of the input (shape {}) is unknown: only a whole dimension "
                   "(begin and end masked, stride 1) can be sliced without its size",
                   d, shape.to_string());
      const int64_t stride = strides[i];
      const bool up = stride > 0;
      // Python's clamping: [0, size] upwards, [-1, size - 1] downwards.
      const int64_t lo = up ? 0 : -1, hi = up ? size : size - 1;
      auto bound = [&](int64_t v, bool masked, int64_t if_masked) {
        if (masked) return if_masked;
        return std::clamp(v < 0 ? v + size : v, lo, hi);
      };
      const int64_t b = bound(begin[i], bit(begin_mask, i), up ? 0 : size - 1);
      const int64_t e = bound(end[i], bit(end_mask, i), up ? size : -1);
      const int64_t span = up ? e - b : b - e, step = up ? stride : -stride;
      const int64_t count = span <= 0 ? 0 : (span + step - 1) / step;
      s = DimSlice{b, count, stride, stride == 1 && b == 0 && count == size, false};
    }
    ++d;
    if (!s.shrink) ++kept;
  }

  // One slice for the stride-1 entries (size -1: the dimension whole, read when it runs) ...
  std::vector<int64_t> sb(static_cast<size_t>(rank), 0), ss(static_cast<size_t>(rank), -1);
  bool sliced = false;
  for (int k = 0; k < rank; ++k) {
    const DimSlice& s = dims[static_cast<size_t>(k)];
    if (s.whole) continue;
    if (s.stride == 1 || s.count == 0) {
      sb[static_cast<size_t>(k)] = s.stride == 1 ? s.begin : 0;
      ss[static_cast<size_t>(k)] = s.count;
      sliced = true;
    }
  }
  Tensor y = sliced ? slice(input, sb, ss) : input;
  // ... a gather for each other stride ...
  for (int k = 0; k < rank; ++k) {
    const DimSlice& s = dims[static_cast<size_t>(k)];
    if (s.whole || s.stride == 1 || s.count == 0) continue;
    std::vector<int64_t> idx(static_cast<size_t>(s.count));
    for (int64_t j = 0; j < s.count; ++j) idx[static_cast<size_t>(j)] = s.begin + j * s.stride;
    y = gather(y, constant(idx, TensorShape{s.count}), k);
  }
  // ... then the shrunk dimensions removed and the new axes inserted (views whose other sizes
  // come from y when they run).
  std::vector<int> shrunk;
  for (int k = 0; k < rank; ++k)
    if (dims[static_cast<size_t>(k)].shrink) shrunk.push_back(k);
  if (!shrunk.empty()) y = detail::remove_axes(y, shrunk);
  if (!new_axes.empty()) y = detail::insert_axes(y, new_axes);
  return y;
}

}  // namespace tapeflow
