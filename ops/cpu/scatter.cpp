// CPU kernels of UnsortedSegmentSum (rows are added in order, deterministic; columns are split
// over the thread pool) and ScatterRowsUpdate (rows copied in order).
#include <algorithm>
#include <cstring>

#include "core/check.h"
#include "core/parallel.h"
#include "ops/scatter.h"

namespace tapeflow::prims {

namespace {
template <class T, class I>
void segment_sum(const Tensor& data, const Tensor& ids, Tensor& out) {
  using C = compute_t<T>;
  const int64_t n = data.shape()[0], d = data.shape()[1], s = out.shape()[0];
  const T* src = data.data<T>();
  const I* id = ids.data<I>();
  T* dst = out.data<T>();
  // The public op checks eager ids on the host; ids computed inside a traced function reach
  // the kernel unchecked. A negative id drops its row (TF).
  for (int64_t i = 0; i < n; ++i)
    TF_CHECK_ARG(static_cast<int64_t>(id[i]) < s, "unsorted_segment_sum",
                 "segment_ids[{}] = {} is not less than num_segments {} (negative ids drop "
                 "their row)",
                 i, static_cast<int64_t>(id[i]), s);
  detail::parallel_for(d, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, n)),
                       [&](int64_t b, int64_t e) {
    std::vector<C> acc(static_cast<size_t>((e - b) * s), C(0));
    for (int64_t i = 0; i < n; ++i) {
      if (id[i] < 0) continue;
      C* row = acc.data() + static_cast<int64_t>(id[i]) * (e - b);
      const T* in = src + i * d + b;
      for (int64_t j = 0; j < e - b; ++j) row[j] += static_cast<C>(in[j]);
    }
    for (int64_t r = 0; r < s; ++r)
      for (int64_t j = 0; j < e - b; ++j) dst[r * d + b + j] = static_cast<T>(acc[r * (e - b) + j]);
  });
}
}  // namespace

void UnsortedSegmentSum::eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const {
  TF_DISPATCH_FLOAT_TYPES(in[0].dtype(), {
    if (in[1].dtype() == int32) segment_sum<T, int32_t>(in[0], in[1], out[0]);
    else segment_sum<T, int64_t>(in[0], in[1], out[0]);
  });
}

void ScatterRowsUpdate::eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const {
  const int64_t rows = in[0].shape()[0], n = in[1].shape()[0];
  const size_t row_bytes = static_cast<size_t>(in[0].shape()[1]) * dtype_size(in[0].dtype());
  const int64_t* pos = in[1].data<int64_t>();
  // The public op checks eager indices on the host; traced ones arrive here unchecked.
  for (int64_t i = 0; i < n; ++i)
    TF_CHECK_ARG(pos[i] >= 0 && pos[i] < rows, "tensor_scatter_nd_update",
                 "update {} goes to flat row {}, outside the tensor's {} rows (an index out of "
                 "range)",
                 i, pos[i], rows);
  auto* dst = static_cast<char*>(out[0].raw_data());
  if (in[0].nbytes() > 0) std::memcpy(dst, in[0].raw_data(), in[0].nbytes());
  const auto* src = static_cast<const char*>(in[2].raw_data());
  // In order: the last update at a position wins.
  for (int64_t i = 0; i < n && row_bytes > 0; ++i)
    std::memcpy(dst + static_cast<size_t>(pos[i]) * row_bytes,
                src + static_cast<size_t>(i) * row_bytes, row_bytes);
}

}  // namespace tapeflow::prims
