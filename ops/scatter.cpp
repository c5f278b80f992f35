#include "ops/scatter.h"

#include "core/check.h"
#include "core/context.h"
#include "ops/binary.h"
#include "ops/dispatch.h"
#include "ops/dynamic_shape.h"
#include "ops/factory.h"
#include "ops/helpers.h"
#include "ops/movement.h"
#include "ops/reduce.h"
#include "ops/scan.h"

namespace tapeflow {

namespace prims {

void UnsortedSegmentSum::infer(std::span<const Tensor> in, std::span<TensorMeta> out) const {
  TF_CHECK_ARG(in[0].rank() == 2 && in[1].rank() == 1 && in[1].shape()[0] == in[0].shape()[0],
               name(), "expects data (N, D) and ids (N), got {} and {}",
               in[0].shape().to_string(), in[1].shape().to_string());
  int64_t n = num_segments;
  if (like_axis >= 0) {
    TF_CHECK_T(InternalError, in.size() == 3 && like_axis < in[2].rank(), name(),
               "takes its segment count from dimension {} of a third input, got {} inputs",
               like_axis, in.size());
    n = in[2].shape()[like_axis];
  }
  out[0] = {TensorShape{n, in[0].shape()[1]}, in[0].dtype()};
}

// Linear in data: the cotangent of row i is the cotangent of its segment, and zero for a
// dropped row (negative id): TF's _GatherDropNegatives.
uint32_t UnsortedSegmentSum::vjp_saves() const { return save_input(1); }
std::vector<Tensor> UnsortedSegmentSum::vjp(std::span<const Tensor> p,
                                            std::span<const Tensor> cts,
                                            std::span<const int> argnums,
                                            std::span<const Tensor>) const {
  auto data_grad = [&] {
    const Tensor& ids = p[1];
    const Tensor& ct = cts[0];
    // No segments: every id was negative (the kernel refuses the others).
    if (ct.shape()[0] == 0) return zeros({ids.shape()[0], ct.shape()[1]}, ct.dtype());
    const Tensor zero = zeros_like(ids);
    const Tensor rows = gather(ct, maximum(ids, zero), 0);
    return where(expand_dims(greater_equal(ids, zero), 1), rows, zeros_like(rows));
  };
  std::vector<Tensor> out;
  for (int k : argnums) out.push_back(k == 0 ? data_grad() : Tensor());
  return out;
}

void ScatterRowsUpdate::infer(std::span<const Tensor> in, std::span<TensorMeta> out) const {
  const TensorShape &t = in[0].shape(), &p = in[1].shape(), &u = in[2].shape();
  TF_CHECK_ARG(t.rank() == 2 && p.rank() == 1 && u.rank() == 2 && u[0] == p[0] && u[1] == t[1] &&
                   in[1].dtype() == int64 && in[2].dtype() == in[0].dtype(),
               name(),
               "expects tensor (R, D), int64 positions (N) and updates (N, D) of its dtype, "
               "got {} {}, {} {} and {} {}",
               t.to_string(), dtype_name(in[0].dtype()), p.to_string(), dtype_name(in[1].dtype()),
               u.to_string(), dtype_name(in[2].dtype()));
  out[0] = {t, in[0].dtype()};
}

// The replaced rows pass no gradient to the tensor; an update gets its row's cotangent only if
// it won (a later update at the same position overwrote it otherwise). The winners come from the
// primitive itself: scattering each update's index leaves the last one at every position.
uint32_t ScatterRowsUpdate::vjp_saves() const {
  return save_input(1) | save_input(2);
}
// Built from values, not host sizes: in a trace for None dimensions the number of updates is
// unknown (only the tensor's rows are fixed).
std::vector<Tensor> ScatterRowsUpdate::vjp(std::span<const Tensor> p, std::span<const Tensor> cts,
                                           std::span<const int> argnums,
                                           std::span<const Tensor>) const {
  const Tensor& pos = p[1];
  const Tensor& ct = cts[0];
  std::vector<Tensor> out;
  for (int k : argnums) {
    if (k == 0) {
      out.push_back(detail::dispatch(ScatterRowsUpdate{}, {ct, pos, zeros_like(p[2])}));
    } else if (k == 2) {
      // Each update's index 0, 1, ... as an (n, 1) column.
      const Tensor ids = expand_dims(cumsum(ones_like(pos), 0, /*exclusive=*/true), 1);
      // A (rows, 1) column of -1 and the row count, from ct (not host sizes: a trace for None
      // dimensions reads them when the graph runs).
      const Tensor minus_one =
          reduce_sum(zeros_like(ct, int64), {1}, /*keepdims=*/true) - Tensor(int64_t{1});
      const Tensor last = detail::dispatch(ScatterRowsUpdate{}, {minus_one, pos, ids});
      const Tensor row_count = detail::element_count(ct, {0}, int64);
      // Positions outside [0, rows) were skipped (a GPU in a trace): they get no gradient.
      const Tensor inside = logical_and(greater_equal(pos, zeros_like(pos)), less(pos, row_count));
      const Tensor safe = where(inside, pos, zeros_like(pos));
      const Tensor won = logical_and(equal(gather(last, safe, 0), ids), expand_dims(inside, 1));
      const Tensor rows_ct = gather(ct, safe, 0);
      out.push_back(where(won, rows_ct, zeros_like(rows_ct)));
    } else {
      out.push_back(Tensor());
    }
  }
  return out;
}

}  // namespace prims

Tensor unsorted_segment_sum(const Tensor& data, const Tensor& segment_ids, int64_t num_segments) {
  const char* op = "unsorted_segment_sum";
  TF_CHECK_ARG(data.defined() && segment_ids.defined(), op, "an input is undefined");
  detail::check_dtype_floating(op, data);
  TF_CHECK_ARG(segment_ids.dtype() == int32 || segment_ids.dtype() == int64, op,
               "segment_ids must be int32 or int64, got {}", dtype_name(segment_ids.dtype()));
  TF_CHECK_ARG(num_segments >= 0, op, "num_segments must be non-negative, got {}", num_segments);
  const TensorShape& ds = data.shape();
  const TensorShape& is = segment_ids.shape();
  TF_CHECK_ARG(ds.rank() >= is.rank(), op,
               "data of shape {} does not start with the segment_ids shape {}", ds.to_string(),
               is.to_string());
  for (int d = 0; d < is.rank(); ++d)
    TF_CHECK_ARG(ds[d] == is[d], op, "data of shape {} does not start with the segment_ids shape {}",
                 ds.to_string(), is.to_string());
  // The CPU kernel checks the ids as it runs (eager or traced). Eager ids on another device are
  // checked here on the host (they are small next to the data), in int64 so that ids above 2^53
  // are named as they are; traced ones have no value yet and the CUDA kernel drops ids out of
  // range (as TF's GPU kernel). Negative ids drop their row everywhere, as in TF.
  const auto& scopes = detail::thread_context().device_stack;
  const Device runs_on = scopes.empty() ? data.placement() : scopes.back();
  if (!segment_ids.is_symbolic() && !runs_on.is_cpu()) {
    const auto ids = segment_ids.numpy<int64_t>();
    for (size_t i = 0; i < ids.size(); ++i)
      TF_CHECK_ARG(ids[i] < num_segments, op,
                   "segment_ids[{}] = {} is not less than num_segments {} (negative ids drop "
                   "their row)",
                   i, ids[i], num_segments);
  }
  // (ids..., rest...) -> (rows, inner), the sizes taken from the data when the op runs: a graph
  // traced for None dimensions then serves every size of them, leading or trailing.
  const int trailing = ds.rank() - is.rank();
  Tensor flat = detail::merge_axes(data, {is.rank(), trailing});
  Tensor flat_ids = reshape(segment_ids, TensorShape{-1});
  const Tensor summed = detail::dispatch(prims::UnsortedSegmentSum(num_segments), {flat, flat_ids});
  std::vector<std::pair<int, int>> parts{{0, 0}};
  for (int d = is.rank(); d < ds.rank(); ++d) parts.push_back({1, d});
  return detail::reshape_from(summed, {summed, data}, parts);
}

}  // namespace tapeflow
