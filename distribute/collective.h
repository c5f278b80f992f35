// Internal to distribute/: the collectives that a strategy's replicas run together (the
// in-process all-reduce and the NCCL one), the step barrier that makes every wait abortable,
// gradient bucketing, and the concrete ReplicaContext.
//
// Threading: one Collectives object per strategy, shared by its replica threads. Each replica
// calls all_reduce() from its own thread; the calls of one step meet at the StepBarrier. Between
// steps (no replica inside) the strategy calls reset().
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "distribute/replica_context.h"
#include "ops/primitive.h"

namespace tapeflow::distribute::detail {

// Thrown in a replica whose step was cancelled because another replica (or a collective run on
// another replica's thread) failed; `cause` is that failure's message. strategy.run never
// rethrows it: it rethrows the failure that caused it, or, when the failing replica's fn caught
// that failure and returned normally, a FailedPreconditionError naming the cause.
class StepCancelled final : public std::exception {
 public:
  explicit StepCancelled(std::string cause = {}) : cause_(std::move(cause)) {}
  const char* what() const noexcept override {
    return "the distributed step was cancelled because another replica failed";
  }
  const std::string& cause() const { return cause_; }

 private:
  std::string cause_;
};

// A reusable barrier for the replicas of one step. A cancellable wait ends early with
// StepCancelled when the step is cancelled, or with FailedPreconditionError when a replica has
// already finished its step (the replicas made different collective calls): no replica waits
// forever.
class StepBarrier {
 public:
  explicit StepBarrier(int n) : n_(n) {}
  // `what` names the collective for the mismatch errors: replicas that meet at different
  // collectives (one all-reduces, another creates a variable) all raise FailedPreconditionError.
  // A non-cancellable wait is for points that every replica is known to reach (after a barrier
  // all have passed, with no throw between).
  void arrive_and_wait(const char* what, bool cancellable = true);
  // `cause`: the failure's message, carried by the StepCancelled of the waiting replicas (the
  // first cause of a step is kept).
  void cancel(const std::string& cause = {});
  void replica_finished();
  bool cancelled() const;
  // Between steps only (no replica inside).
  void reset();

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  const int n_;
  int count_ = 0;
  uint64_t generation_ = 0;
  bool cancelled_ = false;
  std::string cause_;
  int finished_ = 0;
  // The collective named by the first arrival of the current meeting, and the first other one.
  std::string first_what_, other_what_;
  // Of the last completed meeting: "<a> and <b>" when two collectives met there.
  std::string met_different_;
};

// Fixed-order gradient buckets: tensors grouped per dtype (dtypes in order of first appearance,
// tensors in list order), a bucket closed when adding the next tensor would pass its capacity;
// the first bucket holds at most `first_bytes` (so that the first all-reduce starts early), the
// others `bytes`. A tensor larger than a bucket gets a bucket of its own.
struct Bucket {
  DType dtype;
  std::vector<size_t> tensors;  // indices into the list
  int64_t num_elements = 0;
  size_t nbytes() const { return static_cast<size_t>(num_elements) * dtype_size(dtype); }
};
inline constexpr size_t kFirstBucketBytes = size_t{1} << 20;  // 1 MiB
inline constexpr size_t kBucketBytes = size_t{25} << 20;      // 25 MiB
std::vector<Bucket> plan_buckets(std::span<const TensorMeta> tensors,
                                 size_t first_bytes = kFirstBucketBytes,
                                 size_t bytes = kBucketBytes);

enum class CollectiveKind { InProcess, Nccl };

class NcclComms;    // distribute/nccl.h
class WorkerGroup;  // distribute/worker_group.h

// The collectives of one strategy's replicas. With a WorkerGroup of several processes (a
// MultiWorkerMirroredStrategy), an all-reduce first sums over this process's replicas, then the
// first replica's thread sums over the workers (a ring over MPI), and every replica copies the
// result out; NCCL communicators then span every worker's GPUs.
class Collectives {
 public:
  Collectives(std::vector<Device> devices, CollectiveKind kind,
              std::shared_ptr<WorkerGroup> workers = nullptr);
  ~Collectives();
  Collectives(const Collectives&) = delete;
  Collectives& operator=(const Collectives&) = delete;

  // This process's replicas.
  int size() const { return static_cast<int>(devices_.size()); }
  // Every worker's replicas, and the global id of this process's first replica.
  int global_size() const { return global_size_; }
  int global_offset() const { return global_offset_; }
  WorkerGroup* workers() const { return workers_.get(); }
  CollectiveKind kind() const { return kind_; }
  StepBarrier& barrier() { return barrier_; }
  // Called by every replica with its tensors (same count, dtypes and shapes on every replica,
  // checked); writes the reduced tensors to `out` on the replica's device. Deterministic: every
  // replica gets bit-identical results (in-process: sums in replica order; NCCL: its own
  // order, and MEAN is its average, which scales float inputs before summing).
  void all_reduce(int replica, ReduceOp op, std::span<const Tensor> in, std::span<Tensor> out);

 private:
  void in_process(int replica, ReduceOp op, std::span<const Tensor> in, std::span<Tensor> out);
  void nccl(int replica, ReduceOp op, std::span<const Tensor> in, std::span<Tensor> out);
  // Every replica checks the same published metadata (ops, tensor counts, shapes and dtypes,
  // each replica's against replica 0's), so all get the same answer; thrown after the caller's
  // barrier.
  std::string mismatch() const;
  bool multi_worker() const;
  // The first replica's part of a multi-worker all-reduce, after the local sums are in `sums`
  // (its own outputs): checks that every worker reduces the same tensors (`local_bad`: this
  // process's replicas already disagree), then sums each bucket over the workers into
  // worker_sums_. Failures are kept for every local replica to see (worker_failure_).
  void reduce_over_workers(ReduceOp op, std::span<const Tensor> sums,
                           const std::string& local_bad);
  // Fails every worker alike when their tensors or ops differ (called by the first replica).
  void check_workers_agree(ReduceOp op, std::span<const Tensor> tensors,
                           const std::string& local_bad);

  std::vector<Device> devices_;
  CollectiveKind kind_;
  StepBarrier barrier_;
  // Published by each replica before the first barrier of a call, read by all after it.
  std::vector<std::span<const Tensor>> in_slots_;
  std::vector<ReduceOp> op_slots_;
  std::vector<std::span<Tensor>> out_slots_;
  std::vector<const void*> nccl_slots_;
  std::unique_ptr<NcclComms> comms_;
  std::shared_ptr<WorkerGroup> workers_;
  int global_size_ = 0;
  int global_offset_ = 0;
  bool shortcut_ = true;  // one replica returns its tensors (TAPEFLOW_ALL_REDUCE_SHORTCUT=0: not)
  // Written by the first replica between the second and third barrier of a multi-worker
  // all-reduce, read by every local replica after the third.
  std::vector<Tensor> worker_sums_;
  std::exception_ptr worker_failure_;
};

// The replica context of one replica thread.
class MirroredReplicaContext final : public ReplicaContext {
 public:
  // `id`: the replica's index in this process.
  MirroredReplicaContext(int id, Collectives* collectives) : id_(id), collectives_(collectives) {}
  int replica_id_in_sync_group() const override { return collectives_->global_offset() + id_; }
  int num_replicas_in_sync() const override { return collectives_->global_size(); }
  int local_id() const { return id_; }
  Tensor all_reduce(ReduceOp op, const Tensor& value) override;
  std::vector<Tensor> all_reduce(ReduceOp op, const std::vector<Tensor>& values) override;
  Collectives& collectives() const { return *collectives_; }

 private:
  int id_;
  Collectives* collectives_;
};

// "SUM", "MEAN", or "ReduceOp(7)" for a value outside the enum.
std::string reduce_op_name(ReduceOp op);
// InvalidArgumentError naming `who` unless op is ReduceOp::SUM or ReduceOp::MEAN.
void check_reduce_op(ReduceOp op, const char* who);

// Element-wise `a + b` in the compute type; integers wrap around (two's complement) instead of
// overflowing, as TF's integer add.
template <class C>
inline C wrapping_add(C a, C b) {
  if constexpr (std::is_integral_v<C> && !std::is_same_v<C, bool>) {
    using U = std::make_unsigned_t<C>;
    return static_cast<C>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}

}  // namespace tapeflow::distribute::detail
