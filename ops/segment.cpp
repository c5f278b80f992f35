#include "ops/segment.h"

#include <limits>
#include <vector>

#include "core/check.h"
#include "core/context.h"
#include "ops/binary.h"
#include "ops/dispatch.h"
#include "ops/factory.h"
#include "ops/helpers.h"
#include "ops/movement.h"
#include "ops/unary.h"

namespace tapeflow {

namespace prims {

const char* UnsortedSegmentReduce::name() const {
  switch (reducer) {
    case SegmentReducer::Sum:
      return "unsorted_segment_sum";
    case SegmentReducer::Max:
      return "unsorted_segment_max";
    case SegmentReducer::Min:
      return "unsorted_segment_min";
    case SegmentReducer::Prod:
      return "unsorted_segment_prod";
  }
  return "unsorted_segment_reduce";
}

void UnsortedSegmentReduce::infer(std::span<const Tensor> in, std::span<TensorMeta> out) const {
  TF_CHECK_ARG(in[0].rank() == 2 && in[1].rank() == 1 && in[1].shape()[0] == in[0].shape()[0],
               name(), "expects data (N, D) and ids (N), got {} and {}", in[0].shape().to_string(),
               in[1].shape().to_string());
  out[0] = {TensorShape{num_segments, in[0].shape()[1]}, in[0].dtype()};
}

namespace {
// Row i of a (segments, D) tensor at clip(ids[i], 0): the value of i's segment (a dropped row
// reads segment 0 and is masked by the caller).
Tensor gather_clipped(const Tensor& t, const Tensor& ids) {
  return gather(t, maximum(ids, zeros_like(ids)), 0);
}
}  // namespace

uint32_t UnsortedSegmentReduce::vjp_saves() const {
  return save_input(0) | save_input(1) | save_output(0);
}
std::vector<Tensor> UnsortedSegmentReduce::vjp(std::span<const Tensor> p,
                                               std::span<const Tensor> cts,
                                               std::span<const int> argnums,
                                               std::span<const Tensor> outs) const {
  const Tensor& x = p[0];
  const Tensor& ids = p[1];
  const Tensor& g = cts[0];
  const Tensor kept = expand_dims(greater_equal(ids, zeros_like(ids)), 1);
  auto data_grad = [&]() -> Tensor {
    if (num_segments == 0) return zeros_like(x);
    switch (reducer) {
      case SegmentReducer::Sum:
        return where(kept, gather_clipped(g, ids), zeros_like(x));
      case SegmentReducer::Max:
      case SegmentReducer::Min: {
        // TF's _UnsortedSegmentMinOrMaxGrad: the elements equal to their segment's result share
        // its cotangent equally.
        const Tensor selected = logical_and(equal(x, gather_clipped(outs[0], ids)), kept);
        const Tensor count = unsorted_segment_sum(cast(selected, x.dtype()), ids, num_segments);
        const Tensor share = gather_clipped(g / maximum(count, ones_like(count)), ids);
        return where(selected, share, zeros_like(x));
      }
      case SegmentReducer::Prod: {
        // TF's _UnsortedSegmentProdGrad: prod / x without zeros; at a segment's only zero, the
        // product of the others; 0 in a segment with two or more zeros.
        const Tensor zero = zeros_like(x);
        const Tensor is_zero = equal(x, zero);
        const Tensor zeros_in = unsorted_segment_sum(cast(is_zero, x.dtype()), ids, num_segments);
        const Tensor g_kept = where(greater(zeros_in, ones_like(zeros_in)), zeros_like(g), g);
        const Tensor nonzero = where(is_zero, ones_like(x), x);
        const Tensor nonzero_prod = detail::dispatch(
            UnsortedSegmentReduce(SegmentReducer::Prod, num_segments), {nonzero, ids});
        const Tensor partial =
            where(is_zero, gather_clipped(nonzero_prod, ids), gather_clipped(outs[0], ids) / x);
        return where(kept, gather_clipped(g_kept, ids) * partial, zero);
      }
    }
    return Tensor();
  };
  std::vector<Tensor> out;
  for (int k : argnums) out.push_back(k == 0 ? data_grad() : Tensor());
  return out;
}

}  // namespace prims

namespace math {
namespace {

void check_ids_prefix(const char* op, const Tensor& data, const Tensor& ids) {
  TF_CHECK_ARG(data.defined() && ids.defined(), op, "an input is undefined");
  TF_CHECK_ARG(ids.dtype() == int32 || ids.dtype() == int64, op,
               "segment_ids must be int32 or int64, got {}", dtype_name(ids.dtype()));
  const TensorShape& ds = data.shape();
  const TensorShape& is = ids.shape();
  bool prefix = ds.rank() >= is.rank();
  for (int d = 0; prefix && d < is.rank(); ++d) prefix = ds[d] == is[d];
  TF_CHECK_ARG(prefix, op, "data of shape {} does not start with the segment_ids shape {}",
               ds.to_string(), is.to_string());
}

void check_data_dtype(const char* op, const Tensor& data, bool integers) {
  TF_CHECK_ARG(data.defined(), op, "data is undefined");
  const DType d = data.dtype();
  if (integers)
    TF_CHECK_ARG(is_floating(d) || d == int32 || d == int64, op,
                 "expects floating-point, int32 or int64 data, got {}", dtype_name(d));
  else
    detail::check_dtype_floating(op, data);
}

// The unsorted reductions through the primitive: checks, flattening to (N, D), the output
// shape (num_segments, data.shape[ids.rank:]...).
Tensor unsorted_reduce(const char* op, prims::SegmentReducer r, const Tensor& data,
                       const Tensor& ids, int64_t num_segments) {
  check_ids_prefix(op, data, ids);
  check_data_dtype(op, data, /*integers=*/true);
  TF_CHECK_ARG(num_segments >= 0, op, "num_segments must be non-negative, got {}", num_segments);
  // As unsorted_segment_sum: eager ids bound for another device are checked on the host; the
  // CPU kernel checks them itself (eager or traced).
  const auto& scopes = detail::thread_context().device_stack;
  const Device runs_on = scopes.empty() ? data.placement() : scopes.back();
  if (!ids.is_symbolic() && !runs_on.is_cpu()) {
    const auto v = ids.numpy<int64_t>();
    for (size_t i = 0; i < v.size(); ++i)
      TF_CHECK_ARG(v[i] < num_segments, op,
                   "segment_ids[{}] = {} is not less than num_segments {} (negative ids drop "
                   "their row)",
                   i, v[i], num_segments);
  }
  const TensorShape& ds = data.shape();
  int64_t inner = 1;
  TensorShape rest{num_segments};
  for (int d = ids.rank(); d < ds.rank(); ++d) {
    inner *= ds[d];
    rest.push_back(ds[d]);
  }
  const int64_t rows = inner > 0 ? -1 : ids.shape().num_elements();
  const Tensor flat = reshape(data, TensorShape{rows, inner});
  const Tensor flat_ids = reshape(ids, TensorShape{-1});
  // A float16 / bfloat16 product accumulates in float32 and rounds once, on every device (the
  // CUDA kernel's compare-and-swap would round after every factor: 300 * 300 / 300 overflows).
  const bool half = data.dtype() == float16 || data.dtype() == bfloat16;
  if (r == prims::SegmentReducer::Prod && half)
    return cast(reshape(detail::dispatch(prims::UnsortedSegmentReduce(r, num_segments),
                                         {cast(flat, float32), flat_ids}),
                        rest),
                data.dtype());
  return reshape(detail::dispatch(prims::UnsortedSegmentReduce(r, num_segments), {flat, flat_ids}),
                 rest);
}

// The number of elements of each segment, shaped (num_segments, 1, ...) to broadcast against
// the result, clipped to >= 1 (TF's _unsorted_segment_N).
Tensor segment_counts(const Tensor& data, const Tensor& ids, int64_t num_segments) {
  const Tensor ones = ones_like(ids, data.dtype());
  Tensor n = tapeflow::unsorted_segment_sum(ones, ids, num_segments);
  n = maximum(n, ones_like(n));
  TensorShape s{num_segments};
  for (int d = ids.rank(); d < data.rank(); ++d) s.push_back(1);
  return reshape(n, s);
}

// Sorted ids: read on the host (the output's row count is their last value + 1), checked as
// TF's CPU kernels check them. Returns the ids and the number of segments.
std::vector<int64_t> sorted_ids(const char* op, const Tensor& data, const Tensor& ids) {
  TF_CHECK_ARG(data.defined() && ids.defined(), op, "an input is undefined");
  TF_CHECK_ARG(ids.dtype() == int32 || ids.dtype() == int64, op,
               "segment_ids must be int32 or int64, got {}", dtype_name(ids.dtype()));
  TF_CHECK_ARG(!ids.is_symbolic(), op,
               "needs segment_ids with values (the output has segment_ids[-1] + 1 rows): it "
               "runs eagerly only; inside tf::function use unsorted_segment_* with num_segments");
  TF_CHECK_ARG(ids.rank() == 1 && data.rank() >= 1 && ids.shape()[0] == data.shape()[0], op,
               "segment_ids should be a vector of the size of data's dimension 0, got data {} "
               "and segment_ids {}",
               data.shape().to_string(), ids.shape().to_string());
  std::vector<int64_t> v = ids.numpy<int64_t>();
  const int64_t n = v.empty() ? 0 : v.back() + 1;
  for (size_t i = 0; i < v.size(); ++i) {
    TF_CHECK_ARG(v[i] >= 0 && v[i] < n, op,
                 "segment id {} out of range [0, {}), possibly because segment_ids is not sorted",
                 v[i], n);
    TF_CHECK_ARG(i == 0 || v[i] >= v[i - 1], op,
                 "segment ids are not increasing: segment_ids[{}] = {} after {}", i, v[i],
                 v[i - 1]);
  }
  return v;
}

int64_t segments_of(const std::vector<int64_t>& v) {
  return v.empty() ? 0 : v.back() + 1;
}

// Empty sorted segments hold 0 (TF's SegmentMax/Min), not the unsorted identity.
Tensor zero_empty_segments(const Tensor& r, const std::vector<int64_t>& v) {
  const int64_t n = segments_of(v);
  std::vector<double> used(static_cast<size_t>(n), 0.0);
  for (int64_t id : v) used[static_cast<size_t>(id)] = 1.0;
  TensorShape s{n};
  for (int d = 1; d < r.rank(); ++d) s.push_back(1);
  const Tensor mask = detail::from_doubles(used, s, bool_);
  return where(mask, r, zeros_like(r));
}

}  // namespace

Tensor unsorted_segment_sum(const Tensor& data, const Tensor& ids, int64_t num_segments) {
  if (data.defined() && !is_floating(data.dtype()))
    return unsorted_reduce("unsorted_segment_sum", prims::SegmentReducer::Sum, data, ids,
                           num_segments);
  return tapeflow::unsorted_segment_sum(data, ids, num_segments);
}
Tensor unsorted_segment_max(const Tensor& data, const Tensor& ids, int64_t num_segments) {
  return unsorted_reduce("unsorted_segment_max", prims::SegmentReducer::Max, data, ids,
                         num_segments);
}
Tensor unsorted_segment_min(const Tensor& data, const Tensor& ids, int64_t num_segments) {
  return unsorted_reduce("unsorted_segment_min", prims::SegmentReducer::Min, data, ids,
                         num_segments);
}
Tensor unsorted_segment_prod(const Tensor& data, const Tensor& ids, int64_t num_segments) {
  return unsorted_reduce("unsorted_segment_prod", prims::SegmentReducer::Prod, data, ids,
                         num_segments);
}
Tensor unsorted_segment_mean(const Tensor& data, const Tensor& ids, int64_t num_segments) {
  const char* op = "unsorted_segment_mean";
  check_ids_prefix(op, data, ids);
  check_data_dtype(op, data, /*integers=*/false);
  return detail::naming_errors(op, [&] {
    return tapeflow::unsorted_segment_sum(data, ids, num_segments) /
           segment_counts(data, ids, num_segments);
  });
}
Tensor unsorted_segment_sqrt_n(const Tensor& data, const Tensor& ids, int64_t num_segments) {
  const char* op = "unsorted_segment_sqrt_n";
  check_ids_prefix(op, data, ids);
  check_data_dtype(op, data, /*integers=*/false);
  return detail::naming_errors(op, [&] {
    return tapeflow::unsorted_segment_sum(data, ids, num_segments) /
           sqrt(segment_counts(data, ids, num_segments));
  });
}

Tensor segment_sum(const Tensor& data, const Tensor& ids) {
  const char* op = "segment_sum";
  check_data_dtype(op, data, /*integers=*/true);
  return math::unsorted_segment_sum(data, ids, segments_of(sorted_ids(op, data, ids)));
}
Tensor segment_mean(const Tensor& data, const Tensor& ids) {
  const char* op = "segment_mean";
  check_data_dtype(op, data, /*integers=*/false);
  return unsorted_segment_mean(data, ids, segments_of(sorted_ids(op, data, ids)));
}
Tensor segment_max(const Tensor& data, const Tensor& ids) {
  const char* op = "segment_max";
  check_data_dtype(op, data, /*integers=*/true);
  const auto v = sorted_ids(op, data, ids);
  return zero_empty_segments(unsorted_segment_max(data, ids, segments_of(v)), v);
}
Tensor segment_min(const Tensor& data, const Tensor& ids) {
  const char* op = "segment_min";
  check_data_dtype(op, data, /*integers=*/true);
  const auto v = sorted_ids(op, data, ids);
  return zero_empty_segments(unsorted_segment_min(data, ids, segments_of(v)), v);
}
Tensor segment_prod(const Tensor& data, const Tensor& ids) {
  const char* op = "segment_prod";
  check_data_dtype(op, data, /*integers=*/true);
  return unsorted_segment_prod(data, ids, segments_of(sorted_ids(op, data, ids)));
}

}  // namespace math
}  // namespace tapeflow
