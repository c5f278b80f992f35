#include "ops/partition.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <limits>
#include <string>

#include "core/check.h"
#include "ops/binary.h"
#include "ops/debugging.h"
#include "ops/dynamic_shape.h"
#include "ops/factory.h"
#include "ops/helpers.h"
#include "ops/movement.h"
#include "ops/unary.h"

namespace tapeflow {

namespace {

// "[1, 0]": the coordinates of flat position i of shape s.
std::string coordinates(const TensorShape& s, int64_t i) {
  return fmt::format("[{}]", fmt::join(detail::unravel_flat(s, i), ", "));
}

// x with its first `lead` axes merged into one (a new axis of 1 when lead is 0).
Tensor rows_of(const Tensor& x, int lead) {
  std::vector<int> groups{lead};
  for (int d = lead; d < x.rank(); ++d) groups.push_back(1);
  return detail::merge_axes(x, groups);
}

// Whether data's shape begins with `lead`'s (known dimensions must agree).
bool begins_with(const TensorShape& data, const TensorShape& lead) {
  if (lead.rank() > data.rank()) return false;
  for (int d = 0; d < lead.rank(); ++d)
    if (lead[d] != data[d] && lead[d] != None && data[d] != None) return false;
  return true;
}

// s without its first `lead` dimensions.
TensorShape trailing(const TensorShape& s, int lead) {
  std::vector<int64_t> d;
  for (int i = lead; i < s.rank(); ++i) d.push_back(s[i]);
  return TensorShape(d);
}

}  // namespace

std::vector<Tensor> dynamic_partition(const Tensor& data, const Tensor& partitions,
                                      int num_partitions) {
  const char* op = "dynamic_partition";
  TF_CHECK_ARG(data.defined(), op, "data is an undefined tensor (TF's None)");
  detail::check_int_tensor(op, partitions, "partitions");
  TF_CHECK_ARG(num_partitions >= 1, op, "num_partitions must be at least 1, got {}",
               num_partitions);
  TF_CHECK_ARG(begins_with(data.shape(), partitions.shape()), op,
               "data.shape must start with partitions.shape, got data.shape = {}, "
               "partitions.shape = {}",
               data.shape().to_string(), partitions.shape().to_string());
  const std::vector<int64_t> p = detail::host_ints(op, partitions, "partitions");
  std::vector<std::vector<int64_t>> members(static_cast<size_t>(num_partitions));
  for (size_t i = 0; i < p.size(); ++i) {
    TF_CHECK_ARG(p[i] >= 0 && p[i] < num_partitions, op, "partitions{} = {} is not in [0, {})",
                 coordinates(partitions.shape(), static_cast<int64_t>(i)), p[i], num_partitions);
    members[static_cast<size_t>(p[i])].push_back(static_cast<int64_t>(i));
  }
  const Tensor rows = rows_of(data, partitions.rank());
  std::vector<Tensor> out;
  out.reserve(members.size());
  for (const std::vector<int64_t>& m : members) out.push_back(gather(rows, constant(m)));
  return out;
}

Tensor dynamic_stitch(const std::vector<Tensor>& indices, const std::vector<Tensor>& data) {
  const char* op = "dynamic_stitch";
  TF_CHECK_ARG(!indices.empty() && indices.size() == data.size(), op,
               "needs as many data tensors as indices tensors, at least one; got {} and {}",
               indices.size(), data.size());
  std::vector<Tensor> rows;
  std::vector<int64_t> source;  // the row each result row takes; -1: none
  std::vector<int64_t> counts;
  int64_t total = 0;
  TensorShape rest;
  for (size_t m = 0; m < indices.size(); ++m) {
    detail::check_int_tensor(op, indices[m], fmt::format("indices[{}]", m));
    TF_CHECK_ARG(data[m].defined(), op, "data[{}] is an undefined tensor (TF's None)", m);
    TF_CHECK_ARG(begins_with(data[m].shape(), indices[m].shape()), op,
                 "data[{}].shape = {} does not start with indices[{}].shape = {}", m,
                 data[m].shape().to_string(), m, indices[m].shape().to_string());
    const TensorShape r = trailing(data[m].shape(), indices[m].rank());
    if (m == 0) rest = r;
    TF_CHECK_ARG(data[m].dtype() == data[0].dtype(), op,
                 "the data tensors must have one dtype: data[0] is {}, data[{}] is {}",
                 dtype_name(data[0].dtype()), m, dtype_name(data[m].dtype()));
    TF_CHECK_ARG(r == rest, op,
                 "data[{}] has shape {} after its indices' dimensions, data[0] has {}: they must "
                 "be equal",
                 m, r.to_string(), rest.to_string());
    const std::vector<int64_t> idx =
        detail::host_ints(op, indices[m], fmt::format("indices[{}]", m));
    for (size_t i = 0; i < idx.size(); ++i) {
      TF_CHECK_ARG(idx[i] >= 0, op, "indices[{}]{} = {} is negative", m,
                   coordinates(indices[m].shape(), static_cast<int64_t>(i)), idx[i]);
      if (idx[i] >= static_cast<int64_t>(source.size()))
        source.resize(static_cast<size_t>(idx[i]) + 1, -1);
      source[static_cast<size_t>(idx[i])] = total + static_cast<int64_t>(i);
    }
    total += static_cast<int64_t>(idx.size());
    counts.push_back(static_cast<int64_t>(idx.size()));
    rows.push_back(rows_of(data[m], indices[m].rank()));
  }
  // Positions no index names take a row of zeros after the others (the shape of a row of a
  // data tensor that has one: some index exists where a position is missing).
  if (std::find(source.begin(), source.end(), -1) != source.end()) {
    size_t k = 0;
    while (counts[k] == 0) ++k;
    std::vector<int64_t> begin(static_cast<size_t>(rows[k].rank()), 0), size(begin.size(), -1);
    size[0] = 1;
    rows.push_back(zeros_like(slice(rows[k], begin, size)));
    for (int64_t& s : source)
      if (s < 0) s = total;
  }
  return gather(concat(rows, 0), constant(source));
}

Tensor unravel_index(const Tensor& indices, const std::vector<int64_t>& dims) {
  const char* op = "unravel_index";
  detail::check_int_tensor(op, indices, "indices");
  TF_CHECK_ARG(indices.rank() <= 1, op, "indices must be a scalar or 1-D, got shape {}",
               indices.shape().to_string());
  TF_CHECK_ARG(!dims.empty(), op, "dims must have at least one entry");
  int64_t total = 1;
  for (int64_t d : dims) {
    TF_CHECK_ARG(d >= 1, op, "dims must be positive, got [{}]", fmt::join(dims, ", "));
    TF_CHECK_ARG(total <= std::numeric_limits<int64_t>::max() / d, op,
                 "the product of dims [{}] overflows int64", fmt::join(dims, ", "));
    total *= d;
  }
  const Tensor idx = cast(indices, int64);
  detail::check_elementwise(
      op, fmt::format("0 <= indices < {} (the product of dims [{}])", total, fmt::join(dims, ", ")),
      logical_and(greater_equal(idx, Tensor(int64_t{0})), less(idx, Tensor(total))), {indices},
      {"indices"});
  std::vector<Tensor> coords;
  int64_t stride = total;
  for (int64_t d : dims) {
    stride /= d;
    coords.push_back(floormod(floordiv(idx, Tensor(stride)), Tensor(d)));
  }
  return cast(stack(coords, 0), indices.dtype());
}

}  // namespace tapeflow
