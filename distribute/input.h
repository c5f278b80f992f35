// Distributed input and loss scaling: DistributedDataset (what strategy.experimental_distribute_
// dataset returns) splits each global batch of any range whose elements are
// std::vector<tf::Tensor> (tf::data::Dataset is one) into one component per replica, and
// tf::nn::compute_average_loss scales per-example losses by the global batch size.
// Iterating a DistributedDataset is single-threaded (the caller's thread).
#pragma once

#include <cstdint>
#include <iterator>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "distribute/values.h"

namespace tapeflow {

namespace distribute {

namespace detail {
// FailedPreconditionError: a DistributedDataset iterator used (`what`) at the end of the data
// or default-constructed (`at_end` false).
[[noreturn]] void throw_iterator_exhausted(const char* what, bool at_end);
// TF's split of a global batch over replicas: each takes up to ceil(global / n) rows in order, so
// the last replicas get fewer or none (4 over 3: 2, 2, 0; TF's experimental_distribute_dataset).
std::vector<int64_t> replica_batch_sizes(int64_t global_batch, int num_replicas);
// One global batch split along axis 0: replica r takes the next sizes[r] rows (sizes sum to the
// batch size; a zero gives an empty component with the trailing dimensions). Every tensor of
// the element must have the same first dimension. Component r is placed on devices[r].
PerReplica<std::vector<Tensor>> split_batch(const std::vector<Tensor>& element,
                                            const std::vector<int64_t>& sizes,
                                            const std::vector<Device>& devices);
// The first dimension of an element's tensors (checked equal).
int64_t batch_dim(const std::vector<Tensor>& element);

// Where this process's replicas sit among all replicas of a strategy (several processes for a
// MultiWorkerMirroredStrategy): devices[i] runs the global replica first_replica + i.
struct ReplicaLayout {
  std::vector<Device> devices;
  int global_replicas = 0;
  int first_replica = 0;
};
// One global batch split as TF does over every replica of every worker (replica_batch_sizes of
// its size over global_replicas); this process's components, in order, on their devices.
PerReplica<std::vector<Tensor>> split_global_batch(const std::vector<Tensor>& element,
                                                   const ReplicaLayout& layout);
}  // namespace detail

// Yields a PerReplica<std::vector<Tensor>> per global batch of the wrapped range, each batch
// split by replica_batch_sizes of its own size (a short last batch too: replicas left without
// rows get an empty component). D is a value or an lvalue reference (then the range must outlive
// this object).
template <class D>
class DistributedDataset {
 public:
  using value_type = PerReplica<std::vector<Tensor>>;

  DistributedDataset(D dataset, detail::ReplicaLayout layout)
      : dataset_(std::forward<D>(dataset)), layout_(std::move(layout)) {}

  class iterator {
   public:
    using value_type = PerReplica<std::vector<Tensor>>;
    using difference_type = std::ptrdiff_t;
    using inner_iterator = decltype(std::begin(std::declval<std::remove_reference_t<D>&>()));
    using inner_sentinel = decltype(std::end(std::declval<std::remove_reference_t<D>&>()));

    iterator() = default;
    iterator(inner_iterator it, inner_sentinel end, const detail::ReplicaLayout* layout)
        : it_(std::move(it)), end_(std::move(end)), layout_(layout) {
      load();
    }
    // At the end of the data (or default-constructed), dereferencing or incrementing is a
    // FailedPreconditionError (as tf::data's iterators; TF raises OutOfRangeError).
    const value_type& operator*() const {
      check_valid("dereferenced");
      return *current_;
    }
    const value_type* operator->() const {
      check_valid("dereferenced");
      return &*current_;
    }
    iterator& operator++() {
      check_valid("incremented");
      ++*it_;
      load();
      return *this;
    }
    void operator++(int) { ++*this; }
    bool operator==(std::default_sentinel_t) const { return !current_.has_value(); }

   private:
    void check_valid(const char* what) const {
      if (!current_.has_value()) [[unlikely]]
        detail::throw_iterator_exhausted(what, layout_ != nullptr);
    }
    void load() {
      current_.reset();
      if (!(*it_ != *end_)) return;
      const std::vector<Tensor>& element = **it_;
      current_ = detail::split_global_batch(element, *layout_);
    }
    std::optional<inner_iterator> it_;
    std::optional<inner_sentinel> end_;
    const detail::ReplicaLayout* layout_ = nullptr;
    std::optional<value_type> current_;
  };

  iterator begin() { return iterator(std::begin(dataset_), std::end(dataset_), &layout_); }
  std::default_sentinel_t end() const { return {}; }
  // Every replica of every worker (each global batch is split over all of them).
  int num_replicas_in_sync() const { return layout_.global_replicas; }

 private:
  D dataset_;
  detail::ReplicaLayout layout_;
};

}  // namespace distribute

namespace nn {
// TF's tf.nn.compute_average_loss: sum(per_example_loss * sample_weight) / global_batch_size.
// Without global_batch_size: the per-replica batch (the loss's first dimension) times the
// current strategy's num_replicas_in_sync (call it inside strategy.run then). per_example_loss
// needs rank >= 1; sample_weight (optional) broadcasts against it.
Tensor compute_average_loss(const Tensor& per_example_loss,
                            std::optional<int64_t> global_batch_size = std::nullopt,
                            const Tensor& sample_weight = Tensor());
// TF's tf.nn.scale_regularization_loss: the sum of the regularization losses divided by the
// current strategy's num_replicas_in_sync (inside strategy.run; outside it, with a strategy in
// scope, a FailedPreconditionError), so that summing the replicas' losses counts it once.
Tensor scale_regularization_loss(const Tensor& regularization_loss);
Tensor scale_regularization_loss(const std::vector<Tensor>& regularization_losses);
}  // namespace nn

}  // namespace tapeflow
