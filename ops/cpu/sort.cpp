// CPU kernels of SearchSorted (a binary search per value, in parallel over the values) and of
// TopK: per row, the positions ordered by (value, index) under a strict total order
// (NaN above +inf, -0 equal to +0, ties by lower index), with std::partial_sort for the first k
// (std::sort when k is the whole row). Rows are split over the thread pool.
#include "ops/sort.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/check.h"
#include "core/parallel.h"

namespace tapeflow::prims {

namespace {

template <class C>
bool is_nan_value(C v) {
  if constexpr (std::is_floating_point_v<C>)
    return std::isnan(v);
  else
    return false;
}

template <class T>
void top_k_rows(const Tensor& x, Tensor& values, Tensor& indices, int64_t k, bool ascending) {
  using C = compute_t<T>;
  const int64_t rows = x.shape()[0], n = x.shape()[1];
  const T* src = x.data<T>();
  T* val = values.data<T>();
  int32_t* idx = indices.data<int32_t>();
  if (k == 0) return;
  // Row-level grain: about 16K compared elements a task.
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, n));
  detail::parallel_for(rows, grain, [&](int64_t b, int64_t e) {
    // (value, position) pairs side by side: the comparisons read them without an indirection
    // into the row (a 1M-element row sorts about 1.5x faster than positions ordered by a key
    // array).
    struct Item {
      C v;
      int32_t p;
    };
    std::vector<Item> items(static_cast<size_t>(n));
    for (int64_t r = b; r < e; ++r) {
      const T* in = src + r * n;
      for (int64_t j = 0; j < n; ++j)
        items[static_cast<size_t>(j)] = {static_cast<C>(in[j]), static_cast<int32_t>(j)};
      // "a comes first": strictly before in the direction, NaN counting as the largest value.
      auto first = [ascending](const Item& a, const Item& c) {
        const bool na = is_nan_value(a.v), nc = is_nan_value(c.v);
        if (na || nc) {
          if (na && nc) return a.p < c.p;
          return ascending ? nc : na;
        }
        if (a.v != c.v) return ascending ? a.v < c.v : a.v > c.v;
        return a.p < c.p;
      };
      if (k < n)
        std::partial_sort(items.begin(), items.begin() + k, items.end(), first);
      else
        std::sort(items.begin(), items.end(), first);
      for (int64_t j = 0; j < k; ++j) {
        const int32_t p = items[static_cast<size_t>(j)].p;
        val[r * k + j] = in[p];
        idx[r * k + j] = p;
      }
    }
  });
}

// The first position of row[0, n) whose element is not less than v (left) or greater than v
// (right), by bisection with `<` only, as std::lower_bound / std::upper_bound: a NaN value lands
// at 0 (left) or n (right). Each search's probes are those of the textbook lo/hi loop, but 8
// searches advance in lockstep with branch-free updates, so their table reads overlap and no
// probe mispredicts (2^18 searches in a 2^16-element float table, one thread: 33 -> 10 ms; 16 or
// 32 lanes measured slower, 4 about 10% slower).
template <bool Right, class T, class O>
void bisect_block(const T* s, const T* v, O* o, int64_t b, int64_t e, int64_t n, int64_t m) {
  using C = compute_t<T>;
  constexpr int kLanes = 8;
  for (int64_t q0 = b; q0 < e; q0 += kLanes) {
    const int lanes = static_cast<int>(std::min<int64_t>(kLanes, e - q0));
    const T* row[kLanes];
    C x[kLanes];
    int64_t lo[kLanes], hi[kLanes];
    for (int l = 0; l < lanes; ++l) {
      row[l] = s + ((q0 + l) / m) * n;
      x[l] = static_cast<C>(v[q0 + l]);
      lo[l] = 0;
      hi[l] = n;
    }
    for (bool active = n > 0; active;) {
      active = false;
      for (int l = 0; l < lanes; ++l) {
        if (lo[l] >= hi[l]) continue;
        const int64_t mid = lo[l] + (hi[l] - lo[l]) / 2;
        const C y = static_cast<C>(row[l][mid]);
        // A coin toss per probe: blend with a mask (GCC turns a ?: here back into a branch).
        const int64_t go = -static_cast<int64_t>(Right ? !(x[l] < y) : y < x[l]);
        lo[l] = ((mid + 1) & go) | (lo[l] & ~go);
        hi[l] = (hi[l] & go) | (mid & ~go);
        active = active || lo[l] < hi[l];
      }
    }
    for (int l = 0; l < lanes; ++l) o[q0 + l] = static_cast<O>(lo[l]);
  }
}

template <class T, class O>
void search_rows(const Tensor& seq, const Tensor& values, Tensor& out, bool right) {
  const int64_t n = seq.shape()[1], m = values.shape()[1], total = values.num_elements();
  const T* s = seq.data<T>();
  const T* v = values.data<T>();
  O* o = out.data<O>();
  detail::parallel_for(total, 2048, [&](int64_t b, int64_t e) {
    if (right)
      bisect_block<true>(s, v, o, b, e, n, m);
    else
      bisect_block<false>(s, v, o, b, e, n, m);
  });
}

}  // namespace

void SearchSorted::eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const {
  TF_DISPATCH_ALL_TYPES(in[0].dtype(), {
    if constexpr (!std::is_same_v<T, bool>) {
      if (out_type == int32)
        search_rows<T, int32_t>(in[0], in[1], out[0], right);
      else
        search_rows<T, int64_t>(in[0], in[1], out[0], right);
    }
  });
}

void TopK::eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const {
  TF_DISPATCH_ALL_TYPES(in[0].dtype(), {
    if constexpr (!std::is_same_v<T, bool>) top_k_rows<T>(in[0], out[0], out[1], k, ascending);
  });
}

}  // namespace tapeflow::prims
