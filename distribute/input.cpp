#include "distribute/input.h"

#include <algorithm>
#include <string>

#include "core/check.h"
#include "distribute/strategy.h"
#include "ops/binary.h"
#include "ops/copy.h"
#include "ops/factory.h"
#include "ops/movement.h"
#include "ops/reduce.h"

namespace tapeflow {

namespace distribute::detail {

void throw_replica_index(size_t replica, size_t size) {
  TF_THROW(InvalidArgumentError, "PerReplica",
           "replica index {} is out of range: the value has {} components (size() is {})",
           replica, size, size);
}

void throw_iterator_exhausted(const char* what, bool at_end) {
  TF_THROW(FailedPreconditionError, "DistributedDataset",
           "iterator {} {}: there is no current element (compare it with end(), or iterate "
           "with a range-for)",
           what,
           at_end ? "at the end of the dataset" : "without a dataset (default-constructed)");
}

std::vector<int64_t> replica_batch_sizes(int64_t global_batch, int num_replicas) {
  TF_CHECK_ARG(num_replicas > 0, "experimental_distribute_dataset", "{} replicas", num_replicas);
  // Every replica takes up to ceil(batch / replicas) rows, in order: the last ones get fewer or
  // none (4 rows over 3 replicas: 2, 2, 0), as TF 2's experimental_distribute_dataset splits.
  const int64_t share = (global_batch + num_replicas - 1) / num_replicas;
  std::vector<int64_t> sizes(static_cast<size_t>(num_replicas), 0);
  int64_t left = global_batch;
  for (auto& size : sizes) {
    size = std::min(share, left);
    left -= size;
  }
  return sizes;
}

int64_t batch_dim(const std::vector<Tensor>& element) {
  TF_CHECK_ARG(!element.empty(), "experimental_distribute_dataset",
               "a dataset element has no tensors");
  int64_t n = -1;
  for (size_t i = 0; i < element.size(); ++i) {
    const Tensor& t = element[i];
    TF_CHECK_ARG(t.defined() && t.rank() >= 1, "experimental_distribute_dataset",
                 "tensor {} of a dataset element has shape {}: batches need a first (batch) "
                 "dimension to split over the replicas",
                 i, t.defined() ? t.shape().to_string() : std::string("undefined"));
    if (i == 0) n = t.shape()[0];
    TF_CHECK_ARG(t.shape()[0] == n, "experimental_distribute_dataset",
                 "the tensors of a dataset element differ in batch size: tensor 0 is {}, tensor "
                 "{} is {}",
                 element[0].shape().to_string(), i, t.shape().to_string());
  }
  return n;
}

PerReplica<std::vector<Tensor>> split_batch(const std::vector<Tensor>& element,
                                            const std::vector<int64_t>& sizes,
                                            const std::vector<Device>& devices) {
  const int64_t n = batch_dim(element);
  std::vector<std::vector<Tensor>> out(sizes.size());
  int64_t begin = 0;
  for (size_t r = 0; r < sizes.size(); ++r) {
    const int64_t rows = std::min(sizes[r], n - begin);
    for (const Tensor& t : element) {
      std::vector<int64_t> dims;
      for (int d = 0; d < t.rank(); ++d) dims.push_back(t.shape()[d]);
      dims[0] = rows;
      const size_t stride = n > 0 ? t.nbytes() / static_cast<size_t>(n) : 0;
      // Rows [begin, begin + rows) are contiguous: a view, copied to the replica's device.
      Tensor part = tapeflow::detail::view(t, TensorShape(dims), stride * static_cast<size_t>(begin));
      out[r].push_back(tapeflow::detail::copy_to(part, devices[r]));
    }
    begin += rows;
  }
  return PerReplica<std::vector<Tensor>>(std::move(out));
}

PerReplica<std::vector<Tensor>> split_global_batch(const std::vector<Tensor>& element,
                                                   const ReplicaLayout& layout) {
  const int64_t n = batch_dim(element);
  const std::vector<int64_t> all = replica_batch_sizes(n, layout.global_replicas);
  const auto first = all.begin() + layout.first_replica;
  const std::vector<int64_t> mine(first, first + static_cast<std::ptrdiff_t>(layout.devices.size()));
  if (layout.first_replica == 0) return split_batch(element, mine, layout.devices);
  // Another worker's rows come first: this worker splits the rows after them.
  int64_t skip = 0;
  for (auto it = all.begin(); it != first; ++it) skip += *it;
  int64_t rows = 0;
  for (int64_t m : mine) rows += m;
  std::vector<Tensor> part;
  for (const Tensor& t : element) {
    std::vector<int64_t> dims;
    for (int d = 0; d < t.rank(); ++d) dims.push_back(t.shape()[d]);
    dims[0] = rows;
    const size_t stride = n > 0 ? t.nbytes() / static_cast<size_t>(n) : 0;
    part.push_back(tapeflow::detail::view(t, TensorShape(dims), stride * static_cast<size_t>(skip)));
  }
  return split_batch(part, mine, layout.devices);
}

}  // namespace distribute::detail

namespace nn {

namespace {
// TF's handling of sample_weight: a trailing dimension of 1 beyond the loss's rank is squeezed
// ((B, 1) weights for (B,) losses), then the weight must broadcast to the loss's shape (never
// grow it: (B, 1) against (B,) would otherwise give a (B, B) product and a wrong loss).
Tensor weight_for(const Tensor& loss, Tensor weight) {
  const char* name = "compute_average_loss";
  const TensorShape& ls = loss.shape();
  const std::string given = weight.shape().to_string();
  if (weight.rank() == ls.rank() + 1 && weight.shape()[weight.rank() - 1] == 1)
    weight = squeeze(weight, {weight.rank() - 1});
  const TensorShape& ws = weight.shape();
  bool ok = ws.rank() <= ls.rank();
  for (int d = 0; ok && d < ws.rank(); ++d) {
    const int64_t w = ws[ws.rank() - 1 - d], l = ls[ls.rank() - 1 - d];
    ok = w == 1 || w == l;
  }
  TF_CHECK_ARG(ok, name,
               "sample_weight of shape {} does not broadcast to per_example_loss's shape {}",
               given, ls.to_string());
  return weight;
}
}  // namespace

Tensor compute_average_loss(const Tensor& per_example_loss, std::optional<int64_t> global_batch_size,
                            const Tensor& sample_weight) {
  const char* name = "compute_average_loss";
  TF_CHECK_ARG(per_example_loss.defined(), name, "per_example_loss is an undefined tensor");
  TF_CHECK_ARG(per_example_loss.rank() >= 1, name,
               "invalid value passed for per_example_loss: expected a tensor with at least rank "
               "1, got shape {}",
               per_example_loss.shape().to_string());
  TF_CHECK_ARG(is_floating(per_example_loss.dtype()), name,
               "per_example_loss must be a floating tensor, got {}",
               dtype_name(per_example_loss.dtype()));
  Tensor loss = per_example_loss;
  if (sample_weight.defined()) loss = multiply(loss, weight_for(per_example_loss, sample_weight));
  int64_t global = 0;
  if (global_batch_size) {
    global = *global_batch_size;
    TF_CHECK_ARG(global >= 0, name,
                 "global_batch_size must not be negative, got {} (the global_batch_size "
                 "argument)",
                 global);
  } else {
    TF_CHECK_T(FailedPreconditionError,
               !distribute::has_strategy() || !distribute::in_cross_replica_context(), name,
               "called in the cross-replica context of a strategy without global_batch_size; "
               "call it inside strategy.run, or pass global_batch_size");
    const int64_t replicas = distribute::get_strategy().num_replicas_in_sync();
    global = per_example_loss.shape()[0] * replicas;
    TF_CHECK_ARG(global >= 0, name,
                 "the global batch size (per-replica batch {} times {} replicas) must not be "
                 "negative, got {}",
                 per_example_loss.shape()[0], replicas, global);
  }
  const Tensor sum = reduce_sum(loss);
  // TF's div_no_nan: a replica whose share of a short last batch is empty has a global batch
  // size of 0 here and contributes 0 (still connected to the loss, so its gradients are zeros).
  if (global == 0) return where(Tensor(false), sum, zeros_like(sum));
  return divide(sum, Tensor(static_cast<double>(global)));
}

Tensor scale_regularization_loss(const Tensor& regularization_loss) {
  return scale_regularization_loss(std::vector<Tensor>{regularization_loss});
}

Tensor scale_regularization_loss(const std::vector<Tensor>& regularization_losses) {
  const char* name = "scale_regularization_loss";
  TF_CHECK_T(FailedPreconditionError,
             !distribute::has_strategy() || !distribute::in_cross_replica_context(), name,
             "called in the cross-replica context of a strategy; call it inside strategy.run");
  TF_CHECK_ARG(!regularization_losses.empty(), name, "no regularization losses given");
  Tensor sum;
  for (size_t i = 0; i < regularization_losses.size(); ++i) {
    const Tensor& loss = regularization_losses[i];
    TF_CHECK_ARG(loss.defined(), name, "regularization loss {} is an undefined tensor", i);
    TF_CHECK_ARG(is_floating(loss.dtype()), name,
                 "regularization loss {} must be a floating tensor, got {} {}", i,
                 dtype_name(loss.dtype()), loss.shape().to_string());
    TF_CHECK_ARG(i == 0 || loss.dtype() == sum.dtype(), name,
                 "regularization losses differ in dtype: {} for loss 0, {} for loss {}",
                 dtype_name(sum.dtype()), dtype_name(loss.dtype()), i);
    sum = i == 0 ? reduce_sum(loss) : add(sum, reduce_sum(loss));
  }
  const int replicas = distribute::get_strategy().num_replicas_in_sync();
  return divide(sum, Tensor(static_cast<double>(replicas)));
}

}  // namespace nn

}  // namespace tapeflow
