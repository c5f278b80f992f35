#include "ops/indexing.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <string>

#include "core/check.h"
#include "core/context.h"
#include "core/error.h"
#include "ops/binary.h"
#include "ops/dispatch.h"
#include "ops/factory.h"
#include "ops/movement.h"
#include "ops/reduce.h"
#include "ops/scatter.h"
#include "ops/segment.h"
#include "ops/unary.h"

namespace tapeflow {

namespace {

void check_defined(const char* op, const Tensor& t, const char* what) {
  TF_CHECK_ARG(t.defined(), op, "{} is an undefined tensor (TF's None)", what);
}

void check_indices(const char* op, const Tensor& indices) {
  check_defined(op, indices, "indices");
  TF_CHECK_ARG(indices.dtype() == int32 || indices.dtype() == int64, op,
               "indices must be int32 or int64, got {}", dtype_name(indices.dtype()));
  TF_CHECK_ARG(indices.rank() >= 1, op,
               "indices must have rank at least 1 (the last dimension holds each index), got "
               "shape {}",
               indices.shape().to_string());
  TF_CHECK_ARG(indices.shape()[-1] != None, op,
               "the last dimension of indices (each index's length) must be known, got shape {}",
               indices.shape().to_string());
}

std::string shape_list(const std::vector<int64_t>& dims) {  // TF's "[3,4]"
  return fmt::format("[{}]", fmt::join(dims, ","));
}

// The addressed dimensions (dims) must be known: the strides are constants.
void require_known(const char* op, const TensorShape& shape, int from, int to, const char* what) {
  for (int d = from; d < to; ++d)
    TF_CHECK_ARG(shape[d] != None, op,
                 "dimension {} of {} (shape {}) must be known: indices address it (a traced "
                 "function gives it with tf::None)",
                 d, what, shape.to_string());
}

// Flat positions (int64, shape indices.shape[:-1]) of the indexed slices in a tensor whose
// dimensions [0, dims.size()) are `dims`. Out-of-range indices are an InvalidArgumentError when
// the indices have values (`what` names the indexed shape as TF does); in a trace they become
// `bad` instead, which the consuming kernel rejects (or, on a GPU, drops).
Tensor flat_positions(const char* op, const Tensor& indices, const std::vector<int64_t>& dims,
                      const char* what, int64_t bad) {
  const int64_t m = indices.shape()[-1];
  if (!indices.is_symbolic()) {
    const std::vector<int64_t> host = indices.numpy<int64_t>();
    for (size_t i = 0; m > 0 && i < host.size(); i += static_cast<size_t>(m)) {
      bool ok = true;
      for (int64_t j = 0; j < m; ++j) {
        const int64_t v = host[i + static_cast<size_t>(j)];
        ok = ok && v >= 0 && v < dims[static_cast<size_t>(j)];
      }
      if (!ok)
        TF_THROW(InvalidArgumentError, op, "indices[{}] = [{}] does not index into {} {}",
                 i / static_cast<size_t>(m),
                 fmt::join(host.begin() + static_cast<std::ptrdiff_t>(i),
                           host.begin() + static_cast<std::ptrdiff_t>(i) + m, ", "),
                 what, shape_list(dims));
    }
  }
  const Tensor idx = cast(indices, int64);
  std::vector<int64_t> strides(static_cast<size_t>(m), 1), limits(dims.begin(), dims.end());
  for (int64_t j = m - 2; j >= 0; --j)
    strides[static_cast<size_t>(j)] =
        strides[static_cast<size_t>(j) + 1] * dims[static_cast<size_t>(j) + 1];
  const Tensor pos = reduce_sum(multiply(idx, constant(strides)), std::vector<int>{-1}, false);
  if (!indices.is_symbolic() || m == 0) return pos;
  const Tensor inside = reduce_all(
      logical_and(greater_equal(idx, constant(Tensor(int64_t{0}))), less(idx, constant(limits))),
      std::vector<int>{-1}, false);
  return where(inside, pos, constant(Tensor(bad)));
}

int64_t product(const std::vector<int64_t>& dims) {
  int64_t p = 1;
  for (int64_t d : dims) p *= d;
  return p;
}

// Where scatter_nd and tensor_scatter_nd_update write in a target of the fully known `shape`:
// indices (..., M) address its first M dimensions, and updates must be indices.shape[:-1] +
// shape[M:] (messages name the target as `shape` or, of_tensor, as the tensor's). rows: the
// number of addressed slices; slice: shape[M:]; pos: each update's flat row, as a vector.
struct ScatterRows {
  int64_t rows;
  std::vector<int64_t> slice;
  Tensor pos;
};
ScatterRows scatter_rows(const char* op, const Tensor& indices, const Tensor& updates,
                         const TensorShape& shape, bool of_tensor) {
  const TensorShape& is = indices.shape();
  const int64_t m = is[-1];
  TF_CHECK_ARG(m <= shape.rank(), op,
               "indices of shape {} hold {} coordinates, more than the {} dimensions of {} {}",
               is.to_string(), m, shape.rank(), of_tensor ? "the tensor of shape" : "shape",
               shape.to_string());
  std::vector<int64_t> want(is.begin(), is.end() - 1);
  want.insert(want.end(), shape.begin() + m, shape.end());
  bool match = static_cast<int>(want.size()) == updates.rank();
  for (int i = 0; match && i < updates.rank(); ++i)
    match = updates.shape()[i] == want[static_cast<size_t>(i)] || updates.shape()[i] == None ||
            want[static_cast<size_t>(i)] == None;
  TF_CHECK_ARG(match, op,
               "updates of shape {} must have shape {} (indices.shape[:-1] + {}[{}:]) for "
               "indices of shape {} and {} {}",
               updates.shape().to_string(), TensorShape(want).to_string(),
               of_tensor ? "tensor.shape" : "shape", m, is.to_string(),
               of_tensor ? "a tensor of shape" : "shape", shape.to_string());
  const std::vector<int64_t> dims = shape.dims();
  const std::vector<int64_t> addressed(dims.begin(), dims.begin() + m);
  const int64_t rows = product(addressed);
  return {rows, std::vector<int64_t>(dims.begin() + m, dims.end()),
          reshape(flat_positions(op, indices, addressed, "shape", rows), {-1})};
}

}  // namespace

Tensor gather_nd(const Tensor& params, const Tensor& indices, int batch_dims) {
  const char* op = "gather_nd";
  check_defined(op, params, "params");
  check_indices(op, indices);
  const TensorShape& ps = params.shape();
  const TensorShape& is = indices.shape();
  TF_CHECK_ARG(batch_dims >= 0 && batch_dims < is.rank() && batch_dims <= ps.rank(), op,
               "batch_dims must be in [0, {}) for indices of shape {} and params of shape {}, "
               "got {}",
               std::min(is.rank(), ps.rank() + 1), is.to_string(), ps.to_string(), batch_dims);
  const int b = batch_dims;
  const int64_t m = is[-1];
  TF_CHECK_ARG(b + m <= ps.rank(), op,
               "index innermost dimension length must be <= params rank: indices of shape {} "
               "hold {} coordinates, params of shape {} have {} dimensions after {} batch "
               "dimensions",
               is.to_string(), m, ps.to_string(), ps.rank() - b, b);
  for (int d = 0; d < b; ++d)
    TF_CHECK_ARG(ps[d] == is[d] || ps[d] == None || is[d] == None, op,
                 "batch dimension {} differs: params of shape {}, indices of shape {}", d,
                 ps.to_string(), is.to_string());
  const int mi = static_cast<int>(m);
  require_known(op, ps, 0, b + mi, "params");
  require_known(op, ps, b + mi, ps.rank(), "params");
  const std::vector<int64_t> all = ps.dims();
  const std::vector<int64_t> batch(all.begin(), all.begin() + b);
  const std::vector<int64_t> addressed(all.begin() + b, all.begin() + b + mi);
  const int64_t slices = product(addressed);
  // One flat row per (batch, addressed position); the slice dims follow.
  std::vector<int64_t> flat_shape{product(batch) * slices};
  flat_shape.insert(flat_shape.end(), all.begin() + b + mi, all.end());
  Tensor pos = flat_positions(op, indices, addressed, "param shape", flat_shape[0]);
  if (b > 0) {
    // Each index's batch row, broadcast over the index dimensions between batch and coordinate.
    std::vector<int64_t> bshape(batch);
    bshape.resize(static_cast<size_t>(is.rank() - 1), 1);
    const Tensor rows =
        multiply(reshape(range(int64_t{0}, product(batch), int64_t{1}, int64), bshape),
                 constant(Tensor(slices)));
    pos = add(pos, rows);
  }
  return gather(reshape(params, TensorShape(flat_shape)), pos, 0);
}

Tensor scatter_nd(const Tensor& indices, const Tensor& updates, const TensorShape& shape) {
  const char* op = "scatter_nd";
  check_indices(op, indices);
  check_defined(op, updates, "updates");
  TF_CHECK_ARG(shape.is_fully_defined(), op, "shape must be fully known, got {}",
               shape.to_string());
  const DType d = updates.dtype();
  TF_CHECK_ARG(d != int64, op,
               "int64 updates are not supported (their sums go through float64, exact only "
               "below 2^53): cast them to float64 or int32");
  const ScatterRows target = scatter_rows(op, indices, updates, shape, /*of_tensor=*/false);
  const int64_t slices = target.rows;
  const Tensor& pos = target.pos;
  std::vector<int64_t> rows{-1};
  rows.insert(rows.end(), target.slice.begin(), target.slice.end());
  // The segment sum adds floating rows: integers go through float64 (exact for int32 sums),
  // bools through float32 (any true makes a true).
  const bool floating = is_floating(d);
  const Tensor data = floating ? updates : cast(updates, d == bool_ ? float32 : float64);
  Tensor out = reshape(unsorted_segment_sum(reshape(data, TensorShape(rows)), pos, slices), shape);
  if (d == bool_) return not_equal(out, zeros_like(out));
  // Integer sums wrap as TF's do: through int64, whose narrowing is modular.
  return floating ? out : cast(cast(out, int64), d);
}

Tensor tensor_scatter_nd_add(const Tensor& tensor, const Tensor& indices, const Tensor& updates) {
  check_defined("tensor_scatter_nd_add", tensor, "tensor");
  TF_CHECK_ARG(tensor.shape().is_fully_defined(), "tensor_scatter_nd_add",
               "the tensor's shape must be fully known, got {}", tensor.shape().to_string());
  return detail::naming_errors("tensor_scatter_nd_add", [&] {
    return add(tensor, scatter_nd(indices, updates, tensor.shape()));
  });
}

Tensor tensor_scatter_nd_sub(const Tensor& tensor, const Tensor& indices, const Tensor& updates) {
  check_defined("tensor_scatter_nd_sub", tensor, "tensor");
  TF_CHECK_ARG(tensor.shape().is_fully_defined(), "tensor_scatter_nd_sub",
               "the tensor's shape must be fully known, got {}", tensor.shape().to_string());
  return detail::naming_errors("tensor_scatter_nd_sub", [&] {
    return subtract(tensor, scatter_nd(indices, updates, tensor.shape()));
  });
}

namespace {
// The checks of the tensor_scatter_nd ops that write into `tensor`, and where they write.
ScatterRows tensor_target(const char* op, const Tensor& tensor, const Tensor& indices,
                          const Tensor& updates) {
  check_defined(op, tensor, "tensor");
  check_indices(op, indices);
  check_defined(op, updates, "updates");
  const TensorShape& ts = tensor.shape();
  TF_CHECK_ARG(ts.is_fully_defined(), op, "the tensor's shape must be fully known, got {}",
               ts.to_string());
  TF_CHECK_ARG(updates.dtype() == tensor.dtype(), op,
               "updates are {} but the tensor is {}: they must match", dtype_name(updates.dtype()),
               dtype_name(tensor.dtype()));
  return scatter_rows(op, indices, updates, ts, /*of_tensor=*/true);
}
}  // namespace

Tensor tensor_scatter_nd_update(const Tensor& tensor, const Tensor& indices,
                                const Tensor& updates) {
  const char* op = "tensor_scatter_nd_update";
  const ScatterRows target = tensor_target(op, tensor, indices, updates);
  const TensorShape& ts = tensor.shape();
  const int64_t rows = target.rows, width = product(target.slice);
  const Tensor& pos = target.pos;
  const Tensor out =
      detail::dispatch(prims::ScatterRowsUpdate{},
                       {reshape(tensor, {rows, width}), pos, reshape(updates, {-1, width})});
  return reshape(out, ts);
}

namespace {
// tensor_scatter_nd_max / _min: the updates' maximum (minimum) per addressed slice, by the
// segment reduction (empty segments hold the dtype's lowest / highest value), then the element-
// wise maximum (minimum) with the tensor.
Tensor scatter_extreme(const char* op, bool take_max, const Tensor& tensor, const Tensor& indices,
                       const Tensor& updates) {
  const ScatterRows target = tensor_target(op, tensor, indices, updates);
  const TensorShape& ts = tensor.shape();
  const DType dt = tensor.dtype();
  TF_CHECK_ARG(is_floating(dt) || dt == int32 || dt == int64, op,
               "expects floating, int32 or int64 tensors, got {}", dtype_name(dt));
  const int64_t rows = target.rows, width = product(target.slice);
  const Tensor upd = reshape(updates, {-1, width});
  const Tensor flat = reshape(tensor, {rows, width});
  return detail::naming_errors(op, [&] {
    const Tensor seg = take_max ? math::unsorted_segment_max(upd, target.pos, rows)
                                : math::unsorted_segment_min(upd, target.pos, rows);
    return reshape(take_max ? maximum(flat, seg) : minimum(flat, seg), ts);
  });
}
}  // namespace

Tensor tensor_scatter_nd_max(const Tensor& tensor, const Tensor& indices, const Tensor& updates) {
  return scatter_extreme("tensor_scatter_nd_max", true, tensor, indices, updates);
}
Tensor tensor_scatter_nd_min(const Tensor& tensor, const Tensor& indices, const Tensor& updates) {
  return scatter_extreme("tensor_scatter_nd_min", false, tensor, indices, updates);
}

Tensor boolean_mask(const Tensor& tensor, const Tensor& mask, int axis) {
  const char* op = "boolean_mask";
  check_defined(op, tensor, "the tensor");
  check_defined(op, mask, "the mask");
  TF_CHECK_ARG(mask.dtype() == bool_, op, "the mask must be bool, got {}",
               dtype_name(mask.dtype()));
  const int k = mask.rank();
  TF_CHECK_ARG(k >= 1, op, "the mask must have rank at least 1, got a scalar");
  const TensorShape& ts = tensor.shape();
  const int a = axis < 0 ? axis + ts.rank() : axis;
  TF_CHECK_ARG(a >= 0 && a + k <= ts.rank(), op,
               "axis {} with a mask of rank {} does not fit a tensor of shape {}", axis, k,
               ts.to_string());
  for (int i = 0; i < k; ++i)
    TF_CHECK_ARG(ts[a + i] == mask.shape()[i], op,
                 "the mask of shape {} does not match dimensions [{}, {}) of the tensor of shape "
                 "{}",
                 mask.shape().to_string(), a, a + k, ts.to_string());
  TF_CHECK_ARG(!mask.is_symbolic(), op,
               "the result's shape depends on the mask's values, which a traced function does "
               "not have: inside tf::function use tf::where(mask, x, fill) instead");
  require_known(op, ts, 0, ts.rank(), "the tensor");
  const std::vector<bool> host = mask.numpy<bool>();
  std::vector<int64_t> picked;
  for (size_t i = 0; i < host.size(); ++i)
    if (host[i]) picked.push_back(static_cast<int64_t>(i));
  std::vector<int64_t> flat(ts.begin(), ts.begin() + a);
  flat.push_back(static_cast<int64_t>(host.size()));
  flat.insert(flat.end(), ts.begin() + a + k, ts.end());
  return gather(reshape(tensor, TensorShape(flat)),
                constant(picked, {static_cast<int64_t>(picked.size())}), a);
}

Tensor global_norm(const std::vector<Tensor>& t_list) {
  const char* op = "global_norm";
  Tensor sum;
  for (size_t i = 0; i < t_list.size(); ++i) {
    const Tensor& t = t_list[i];
    if (!t.defined()) continue;
    TF_CHECK_ARG(is_floating(t.dtype()), op, "t_list[{}] is {}: the tensors must be floating", i,
                 dtype_name(t.dtype()));
    TF_CHECK_ARG(!sum.defined() || t.dtype() == sum.dtype(), op,
                 "t_list[{}] is {} but an earlier tensor is {}: the tensors must share a dtype", i,
                 dtype_name(t.dtype()), dtype_name(sum.dtype()));
    const Tensor s = reduce_sum(square(t));
    sum = sum.defined() ? add(sum, s) : s;
  }
  TF_CHECK_ARG(sum.defined(), op, "t_list holds no defined tensor (TF requires at least one)");
  return sqrt(sum);
}

std::pair<std::vector<Tensor>, Tensor> clip_by_global_norm(const std::vector<Tensor>& t_list,
                                                           double clip_norm,
                                                           const Tensor& use_norm) {
  const char* op = "clip_by_global_norm";
  TF_CHECK_ARG(clip_norm >= 0 && !std::isnan(clip_norm), op,
               "clip_norm must be a non-negative number, got {}", clip_norm);
  Tensor norm = use_norm.defined() ? use_norm
                                   : detail::naming_errors(op, [&] { return global_norm(t_list); });
  TF_CHECK_ARG(norm.rank() == 0, op, "use_norm must be a scalar, got shape {}",
               norm.shape().to_string());
  // clip_norm / max(norm, clip_norm); an infinite or NaN norm makes it NaN, as TF.
  const Tensor limit = constant(Tensor(clip_norm), norm.dtype());
  Tensor scale = divide(limit, maximum(norm, limit));
  const Tensor finite = less(abs(norm), constant(Tensor(INFINITY), norm.dtype()));
  scale = where(finite, scale, constant(Tensor(NAN), norm.dtype()));
  std::vector<Tensor> out;
  out.reserve(t_list.size());
  for (const Tensor& t : t_list)
    out.push_back(t.defined()
                      ? multiply(t, t.dtype() == scale.dtype() ? scale : cast(scale, t.dtype()))
                      : Tensor());
  return {out, norm};
}

}  // namespace tapeflow
