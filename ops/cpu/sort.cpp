// CPU kernel of TopK: per row, the positions ordered by (value, index) under a strict total order
// (NaN above +inf, -0 equal to +0, ties by lower index), with std::partial_sort for the first k
// (std::sort when k is the whole row). Rows are split over the thread pool.
#include "ops/sort.h"

#include <algorithm>
#include <cmath>
#include <numeric>
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
    std::vector<C> key(static_cast<size_t>(n));
    std::vector<int32_t> pos(static_cast<size_t>(n));
    for (int64_t r = b; r < e; ++r) {
      const T* in = src + r * n;
      for (int64_t j = 0; j < n; ++j) key[static_cast<size_t>(j)] = static_cast<C>(in[j]);
      std::iota(pos.begin(), pos.end(), 0);
      // "a comes first": strictly before in the direction, NaN counting as the largest value.
      auto first = [&](int32_t a, int32_t c) {
        const C va = key[static_cast<size_t>(a)], vc = key[static_cast<size_t>(c)];
        const bool na = is_nan_value(va), nc = is_nan_value(vc);
        if (na || nc) {
          if (na && nc) return a < c;
          return ascending ? nc : na;
        }
        if (va != vc) return ascending ? va < vc : va > vc;
        return a < c;
      };
      if (k < n)
        std::partial_sort(pos.begin(), pos.begin() + k, pos.end(), first);
      else
        std::sort(pos.begin(), pos.end(), first);
      for (int64_t j = 0; j < k; ++j) {
        const int32_t p = pos[static_cast<size_t>(j)];
        val[r * k + j] = in[p];
        idx[r * k + j] = p;
      }
    }
  });
}

}  // namespace

void TopK::eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const {
  TF_DISPATCH_ALL_TYPES(in[0].dtype(), {
    if constexpr (!std::is_same_v<T, bool>) top_k_rows<T>(in[0], out[0], out[1], k, ascending);
  });
}

}  // namespace tapeflow::prims
