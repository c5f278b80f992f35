// CPU kernel of UnsortedSegmentReduce: the output starts at the reducer's identity, rows are
// combined in order (deterministic), columns split over the thread pool as UnsortedSegmentSum's.
// A NaN anywhere in a segment makes its max and min NaN (TF 2.21's result depends on where the
// NaN sits: [1, nan, 2] gives 2, [1, 2, nan] NaN). Integer sums and products wrap, as TF's.
#include "ops/segment.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/check.h"
#include "core/parallel.h"

namespace tapeflow::prims {

namespace {
template <class C>
C identity_of(SegmentReducer r) {
  switch (r) {
    case SegmentReducer::Sum:
      return C(0);
    case SegmentReducer::Prod:
      return C(1);
    case SegmentReducer::Max:
      return std::numeric_limits<C>::lowest();
    case SegmentReducer::Min:
      return std::numeric_limits<C>::max();
  }
  return C(0);
}

// The type integer arithmetic wraps in: the unsigned one (floating types: themselves).
template <class C, bool = std::is_integral_v<C>>
struct wrapping {
  using type = C;
};
template <class C>
struct wrapping<C, true> {
  using type = std::make_unsigned_t<C>;
};

template <class C>
C combine(SegmentReducer r, C a, C b) {
  // Integers in their unsigned type: wrapping, not signed overflow (undefined behaviour).
  using W = typename wrapping<C>::type;
  switch (r) {
    case SegmentReducer::Sum:
      return static_cast<C>(static_cast<W>(a) + static_cast<W>(b));
    case SegmentReducer::Prod:
      return static_cast<C>(static_cast<W>(a) * static_cast<W>(b));
    case SegmentReducer::Max:
      if constexpr (std::is_floating_point_v<C>)
        if (std::isnan(b)) return b;
      return b > a ? b : a;
    case SegmentReducer::Min:
      if constexpr (std::is_floating_point_v<C>)
        if (std::isnan(b)) return b;
      return b < a ? b : a;
  }
  return a;
}

template <class T, class I>
void segment_reduce(SegmentReducer r, const char* op, const Tensor& data, const Tensor& ids,
                    Tensor& out) {
  using C = compute_t<T>;
  const int64_t n = data.shape()[0], d = data.shape()[1], s = out.shape()[0];
  const T* src = data.data<T>();
  const I* id = ids.data<I>();
  T* dst = out.data<T>();
  for (int64_t i = 0; i < n; ++i)
    TF_CHECK_ARG(static_cast<int64_t>(id[i]) < s, op,
                 "segment_ids[{}] = {} is not less than num_segments {} (negative ids drop "
                 "their row)",
                 i, static_cast<int64_t>(id[i]), s);
  // The half types' lowest/highest are their own (-65504 for float16), not float's.
  C init = identity_of<C>(r);
  if constexpr (std::is_same_v<T, half_t> || std::is_same_v<T, bfloat16_t>) {
    const C top = std::is_same_v<T, half_t> ? C(65504.0f) : C(3.38953139e38f);
    if (r == SegmentReducer::Max) init = -top;
    if (r == SegmentReducer::Min) init = top;
  }
  detail::parallel_for(d, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, n)),
                       [&](int64_t b, int64_t e) {
                         std::vector<C> acc(static_cast<size_t>((e - b) * s), init);
                         for (int64_t i = 0; i < n; ++i) {
                           if (id[i] < 0) continue;
                           C* row = acc.data() + static_cast<int64_t>(id[i]) * (e - b);
                           const T* in = src + i * d + b;
                           for (int64_t j = 0; j < e - b; ++j)
                             row[j] = combine(r, row[j], static_cast<C>(in[j]));
                         }
                         for (int64_t k = 0; k < s; ++k)
                           for (int64_t j = 0; j < e - b; ++j)
                             dst[k * d + b + j] = static_cast<T>(acc[k * (e - b) + j]);
                       });
}
}  // namespace

void UnsortedSegmentReduce::eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const {
  // The dtypes infer() accepts (no uint8 or bool kernels): the others compile to nothing.
  auto run = [&]<class T>(T*) {
    if constexpr (!std::is_same_v<T, bool> && !std::is_same_v<T, uint8_t>) {
      if (in[1].dtype() == int32)
        segment_reduce<T, int32_t>(reducer, name(), in[0], in[1], out[0]);
      else
        segment_reduce<T, int64_t>(reducer, name(), in[0], in[1], out[0]);
    }
  };
  TF_DISPATCH_ALL_TYPES(in[0].dtype(), run(static_cast<T*>(nullptr)));
}

}  // namespace tapeflow::prims
