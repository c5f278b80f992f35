// tf::distribute strategies (TF's tf.distribute.Strategy and MirroredStrategy): synchronous
// data-parallel replicas in one process, one replica per device. See docs/distribute.md.
//
//   tf::distribute::MirroredStrategy strategy({"/cpu:0", "/cpu:1"});
//   tf::Variable w = [&] { auto scope = strategy.scope(); return tf::Variable(init); }();
//   auto losses = strategy.run(step, per_replica_batch);          // PerReplica<tf::Tensor>
//   tf::Tensor loss = strategy.reduce(tf::distribute::ReduceOp::SUM, losses);
//
// Threading: a MirroredStrategy owns one persistent thread per replica. run() hands every
// replica thread the step, runs them in parallel and joins; calls of run() on one strategy are
// serialised. Each replica thread runs inside tf::DeviceScope(its device), sees its own copy of
// every mirrored variable and has a ReplicaContext (get_replica_context()). `fn` is called
// concurrently from the replica threads: it must not mutate shared C++ state unsynchronised.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "autograd/variable.h"
#include "core/tensor.h"
#include "distribute/input.h"
#include "distribute/replica_context.h"
#include "distribute/values.h"

namespace tapeflow::distribute {

// Cross-device all-reduce implementations, named as TF's (cross_device_ops=...).
// ReductionToOneDevice: tapeflow's in-process all-reduce (replicas sum each other's buffers
// directly, in replica order; GPU tensors through host copies). NcclAllReduce: NCCL between
// distinct physical GPUs. The default (std::monostate) chooses as TF does: NCCL when every
// device is a GPU of its own and NCCL is built, else the in-process path.
struct ReductionToOneDevice {};
struct NcclAllReduce {
  int num_packs = 1;  // accepted for TF compatibility; tapeflow packs into ~25 MiB buckets
};
using CrossDeviceOps = std::variant<std::monostate, ReductionToOneDevice, NcclAllReduce>;

namespace experimental {
// TF's tf.distribute.experimental.CommunicationImplementation: how a MultiWorkerMirroredStrategy
// all-reduces across workers. AUTO: NCCL when every local device is a GPU of its own and NCCL is
// built, else RING. RING: each process sums its replicas, then a ring over MPI between the
// processes (tensors on GPUs go through host copies). NCCL: one communicator over every
// worker's GPUs.
enum class CommunicationImplementation { AUTO, RING, NCCL };
// TF's tf.distribute.experimental.CommunicationOptions.
struct CommunicationOptions {
  int64_t bytes_per_pack = 0;  // accepted for TF compatibility: tapeflow packs into ~25 MiB buckets
  // How long a collective waits for the other workers before DeadlineExceededError. 0: the
  // variable TAPEFLOW_COLLECTIVE_TIMEOUT (seconds), else 300. TF's default waits forever.
  double timeout_seconds = 0;
  CommunicationImplementation implementation = CommunicationImplementation::AUTO;
};
}  // namespace experimental

class Strategy;

// TF's strategy.extended.
class StrategyExtended {
 public:
  // "/device:CPU:0", ... one per replica, in replica order.
  const std::vector<std::string>& worker_devices() const { return names_; }
  const std::vector<std::string>& parameter_devices() const { return names_; }
  // "ReductionToOneDevice" or "NcclAllReduce".
  const std::string& cross_device_ops() const { return cross_device_ops_; }

 private:
  friend class Strategy;
  std::vector<std::string> names_;
  std::string cross_device_ops_;
};

namespace detail {
class StrategyCore;
class WorkerGroup;
// `value` summed over the workers of a multi-worker strategy (a collective: every worker calls it
// in the same order; all get the sum, on the caller's device); `value` itself for one worker.
// `how` ("SUM", "MEAN along axis 0") must be the same on every worker too (checked with the
// dtype and shape: an InvalidArgumentError on every worker).
Tensor sum_over_workers(const Strategy& strategy, const Tensor& value,
                        const std::string& how = "SUM");
// Every worker's `values` (the same count on each), worker after worker: a collective of a
// multi-worker strategy (every worker calls it at the same point; `what` names the caller in the
// check that they do, and in its errors); `values` itself for one worker.
std::vector<int64_t> gather_over_workers(const Strategy& strategy,
                                         const std::vector<int64_t>& values, const char* what);
// This process's index among the workers (0 without several) and their number.
int worker_index(const Strategy& strategy);
int num_workers(const Strategy& strategy);
// A multi-worker strategy's replica devices, its all-reduce (NCCL or the ring) and its workers.
struct MultiWorkerSetup {
  std::vector<Device> devices;
  bool nccl = false;
  bool nccl_required = false;  // CommunicationImplementation::NCCL (not chosen by AUTO)
  std::shared_ptr<WorkerGroup> workers;
};
// Expires when `strategy` is destroyed: for objects that keep a pointer to a strategy (a model
// compiled in its scope) to refuse a dead one instead of using freed memory.
std::weak_ptr<const void> strategy_lifetime(const Strategy& strategy);
// Thrown into run() when the caller is tracing a tf::function (see run()).
[[noreturn]] void throw_run_while_tracing();
bool calling_thread_is_tracing();
// An InternalError: replica `replica` of a run that returned has no result.
[[noreturn]] void throw_missing_result(size_t replica);
}  // namespace detail

class Strategy {
 public:
  virtual ~Strategy();
  Strategy(const Strategy&) = delete;
  Strategy& operator=(const Strategy&) = delete;

  // Every replica of every worker (one process: its devices).
  int num_replicas_in_sync() const;
  const StrategyExtended& extended() const { return extended_; }
  // This process's replica devices (PerReplica values have one component per device).
  const std::vector<Device>& devices() const;
  // Where this process's replicas sit among all of them.
  const detail::ReplicaLayout& layout() const { return layout_; }

  // While it lives: variables created on this thread are mirrored over the strategy's devices,
  // and get_strategy() returns this strategy. Opening the scope of another strategy inside it
  // is a FailedPreconditionError (TF's "Mixing different tf.distribute.Strategy objects").
  class Scope {
   public:
    explicit Scope(Strategy& strategy);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    ::tapeflow::detail::MirrorVariablesScope mirror_;
    Strategy* saved_;
  };
  [[nodiscard]] Scope scope() { return Scope(*this); }

  // Runs fn once per replica, in parallel on the replica threads, and returns what each returned
  // (PerReplica<R>; nothing when fn returns void). PerReplica arguments are replaced by the
  // replica's component; other arguments are passed to every replica as they are (by const
  // reference). An exception in one replica cancels the step on all (no replica stays blocked in
  // a collective) and the first one is rethrown; the strategy stays usable. When a collective
  // failed and cancelled some replicas but the replica that received the failure caught it in
  // fn, run throws FailedPreconditionError naming the cancelled replicas and the cause.
  // fn may be a tf::function: each replica thread traces (once per device) and replays its own
  // graph. Calling run while the calling thread traces a tf::function is an UnimplementedError:
  // make the replica step the tf::function instead (docs/distribute.md).
  template <class F, class... Args>
  auto run(const F& fn, const Args&... args) {
    if (detail::calling_thread_is_tracing()) detail::throw_run_while_tracing();
    (check_run_arg(args), ...);
    using R = std::invoke_result_t<const F&, detail::component_t<Args>...>;
    if constexpr (std::is_void_v<R>) {
      run_replicas([&](int i) {
        (void)i;  // unused when fn takes no arguments
        std::invoke(fn, detail::component(args, static_cast<size_t>(i))...);
      });
    } else {
      using V = std::decay_t<R>;
      std::vector<std::optional<V>> results(devices().size());
      run_replicas([&](int i) {
        (void)i;
        results[static_cast<size_t>(i)].emplace(
            std::invoke(fn, detail::component(args, static_cast<size_t>(i))...));
      });
      std::vector<V> values;
      values.reserve(results.size());
      for (size_t i = 0; i < results.size(); ++i) {
        if (!results[i]) detail::throw_missing_result(i);  // run_replicas threw: never here
        values.push_back(std::move(*results[i]));
      }
      return PerReplica<V>(std::move(values));
    }
  }

  // Combines the replicas' values into one tensor on the caller's device (TF's strategy.reduce):
  // SUM or MEAN across replicas; with an axis, also across that axis of each value (MEAN then
  // divides by the total number of elements along it over all replicas, so uneven batches
  // average correctly). Across workers too: every worker must call it (a collective), and all
  // get the same result.
  Tensor reduce(ReduceOp op, const PerReplica<Tensor>& value,
                std::optional<int> axis = std::nullopt) const;

  // The per-replica components (TF's experimental_local_results).
  template <class T>
  std::vector<T> experimental_local_results(const PerReplica<T>& value) const {
    return value.values();
  }
  std::vector<Variable> experimental_local_results(const Variable& v) const {
    return v.components();
  }
  // A plain value is its own only component (TF returns (value,)); without this overload a
  // Tensor would convert to a new Variable.
  std::vector<Tensor> experimental_local_results(const Tensor& value) const { return {value}; }

  // Splits each global batch of `dataset` (any range of std::vector<Tensor>) over the replicas
  // (of every worker: each worker reads the whole dataset and keeps its replicas' rows, so the
  // workers must see the same batches, e.g. shuffles with a seed). An lvalue dataset is
  // referenced (it must outlive the result); an rvalue is moved in.
  template <class D>
  DistributedDataset<D> experimental_distribute_dataset(D&& dataset) const {
    return DistributedDataset<D>(std::forward<D>(dataset), layout_);
  }

 protected:
  // A strategy over `devices` (validated), with threads; `inline_default` makes TF's default
  // strategy (one replica run on the caller's thread). `workers`: the processes of a
  // multi-worker strategy (its all-reduce chosen by the caller: NCCL or the ring), else null.
  Strategy(std::vector<Device> devices, CrossDeviceOps cross_device_ops, bool inline_default,
           const char* who);
  Strategy(detail::MultiWorkerSetup setup, const char* who);
  detail::WorkerGroup* workers() const { return workers_.get(); }
  friend Tensor detail::sum_over_workers(const Strategy&, const Tensor&, const std::string&);
  friend std::vector<int64_t> detail::gather_over_workers(const Strategy&,
                                                          const std::vector<int64_t>&, const char*);
  friend std::weak_ptr<const void> detail::strategy_lifetime(const Strategy&);

 private:
  template <class A>
  void check_run_arg(const A& arg) const {
    if constexpr (detail::is_per_replica_v<A>) check_per_replica_size(arg.size());
  }
  void check_per_replica_size(size_t n) const;
  void run_replicas(const std::function<void(int)>& job);

  std::unique_ptr<detail::StrategyCore> core_;
  StrategyExtended extended_;
  bool default_ = false;  // TF's default strategy: its scope mirrors nothing
  std::shared_ptr<detail::WorkerGroup> workers_;
  detail::ReplicaLayout layout_;
  std::shared_ptr<const bool> alive_ = std::make_shared<const bool>(true);
};

// Synchronous training on the devices of this process (TF's tf.distribute.MirroredStrategy).
class MirroredStrategy : public Strategy {
 public:
  // Every GPU, or /device:CPU:0 when there is none.
  MirroredStrategy();
  // The named devices ("/gpu:0", "GPU:1", "/cpu:1" after splitting the CPU with
  // tf::config::set_logical_device_configuration). Unknown or duplicate devices and an empty
  // list are InvalidArgumentErrors.
  explicit MirroredStrategy(const std::vector<std::string>& devices,
                            CrossDeviceOps cross_device_ops = {});
};

// Synchronous training across processes (TF's tf.distribute.MultiWorkerMirroredStrategy), one
// MPI rank per worker, launched with mpirun:
//
//   mpirun -np 2 ./train        (each process: MultiWorkerMirroredStrategy strategy;)
//
// Each worker runs replicas on its own devices (every GPU, or /device:CPU:0; every worker must
// have as many); num_replicas_in_sync counts every worker's. Variables made in scope() start from
// worker 0's initial values (every worker must create the same ones, in the same order; checked);
// all-reduces sum over every replica of every worker, so all copies
// stay identical; strategy.reduce and datasets span the workers too. Every worker must run the
// same steps (the same collectives in the same order). A worker that is gone or stuck makes the
// others raise DeadlineExceededError within CommunicationOptions::timeout_seconds (mpirun also
// ends the job when a process dies). Started without mpirun, it is a one-worker strategy.
class MultiWorkerMirroredStrategy : public Strategy {
 public:
  explicit MultiWorkerMirroredStrategy(experimental::CommunicationOptions options = {});
  // This process's devices, by name (tapeflow's addition; TF takes them from the cluster).
  explicit MultiWorkerMirroredStrategy(const std::vector<std::string>& devices,
                                       experimental::CommunicationOptions options = {});
  // This process's index among the workers (TF's cluster_resolver.task_id) and their number.
  int worker_index() const;
  int num_workers() const;
};

// The current strategy: inside a scope() or on a replica thread, that strategy; otherwise TF's
// default strategy (one replica, fn runs on the caller's thread, no mirroring).
Strategy& get_strategy();
// True inside a strategy's scope() or on its replica threads.
bool has_strategy();
// True unless the calling thread is a replica thread inside strategy.run.
bool in_cross_replica_context();

}  // namespace tapeflow::distribute
