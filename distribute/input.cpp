#include "distribute/input.h"

#include "core/check.h"
#include "distribute/strategy.h"
#include "ops/binary.h"
#include "ops/copy.h"
#include "ops/reduce.h"

namespace tapeflow {

namespace distribute::detail {

std::vector<int64_t> replica_batch_sizes(int64_t global_batch, int num_replicas) {
  TF_CHECK_ARG(num_replicas > 0, "experimental_distribute_dataset", "{} replicas", num_replicas);
  const int64_t floor = global_batch / num_replicas;
  const int64_t num_ceil = global_batch - floor * num_replicas;
  std::vector<int64_t> sizes(static_cast<size_t>(num_replicas), floor);
  for (int64_t r = 0; r < num_ceil; ++r) ++sizes[static_cast<size_t>(r)];
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
  if (sample_weight.defined()) loss = multiply(loss, sample_weight);
  int64_t global = 0;
  if (global_batch_size) {
    global = *global_batch_size;
  } else {
    TF_CHECK_T(FailedPreconditionError,
               !distribute::has_strategy() || !distribute::in_cross_replica_context(), name,
               "called in the cross-replica context of a strategy without global_batch_size; "
               "call it inside strategy.run, or pass global_batch_size");
    global = per_example_loss.shape()[0] * distribute::get_strategy().num_replicas_in_sync();
  }
  TF_CHECK_ARG(global > 0, name, "global_batch_size must be positive, got {}", global);
  return divide(reduce_sum(loss), Tensor(static_cast<double>(global)));
}

}  // namespace nn

}  // namespace tapeflow
