// The replica context (TF's tf.distribute.get_replica_context()): inside strategy.run each
// replica thread has one; it names the replica and all-reduces tensors across the replicas of
// its step. Outside run, get_replica_context() returns nullptr. Every replica must make the same
// collective calls in the same order (as with TF and NCCL); the context's methods are called
// from the replica's own thread only.
#pragma once

#include <vector>

#include "core/tensor.h"

namespace tapeflow::distribute {

enum class ReduceOp { SUM, MEAN };

class ReplicaContext {
 public:
  virtual ~ReplicaContext() = default;
  virtual int replica_id_in_sync_group() const = 0;
  virtual int num_replicas_in_sync() const = 0;
  // The SUM or MEAN of `value` over all replicas; every replica gets the result on its device.
  virtual Tensor all_reduce(ReduceOp op, const Tensor& value) = 0;
  // Several tensors at once (an optimizer's gradients): flattened into fixed-order buckets so
  // the collectives are few and large. The result keeps the order, shapes and dtypes.
  virtual std::vector<Tensor> all_reduce(ReduceOp op, const std::vector<Tensor>& values) = 0;
};

// The calling thread's replica context, or nullptr outside strategy.run.
ReplicaContext* get_replica_context();

namespace detail {
// Installs a replica context on this thread while it lives (the strategy's replica threads).
class ReplicaContextScope {
 public:
  explicit ReplicaContextScope(ReplicaContext* context);
  ~ReplicaContextScope();
  ReplicaContextScope(const ReplicaContextScope&) = delete;
  ReplicaContextScope& operator=(const ReplicaContextScope&) = delete;

 private:
  ReplicaContext* saved_;
};
}  // namespace detail

}  // namespace tapeflow::distribute
