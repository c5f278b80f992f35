#include "distribute/strategy.h"

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <utility>

#include "core/check.h"
#include "core/context.h"
#include "core/hash.h"
#include "core/log.h"
#include "core/parallel.h"
#include "distribute/collective.h"
#include "distribute/nccl.h"
#include "distribute/worker_group.h"
#include "ops/binary.h"
#include "ops/copy.h"
#include "ops/dispatch.h"
#include "ops/reduce.h"
#include "ops/unary.h"

namespace tapeflow::distribute {

namespace {
// The strategy whose scope is open on this thread, or whose replica this thread runs.
thread_local Strategy* t_strategy = nullptr;
// Set on replica threads while they run a step.
thread_local bool t_in_replica = false;
}  // namespace

namespace detail {

void throw_missing_result(size_t replica) {
  TF_THROW(InternalError, "strategy.run", "replica {} finished the step without a result",
           replica);
}

bool calling_thread_is_tracing() { return tapeflow::detail::thread_context().trace != nullptr; }

void throw_run_while_tracing() {
  TF_THROW(UnimplementedError, "strategy.run",
           "cannot run replicas while the calling thread traces a tf::function: tapeflow's "
           "replicas run on their own threads, which cannot add to the caller's graph. Make the "
           "replica step itself the tf::function and call strategy.run(step, ...) eagerly: each "
           "replica then traces and replays its own graph");
}

// The replica context of TF's default strategy: one replica, run on the caller's thread. Its
// all-reduce of a value is the value itself (SUM and MEAN over one replica).
class DefaultReplicaContext final : public ReplicaContext {
 public:
  int replica_id_in_sync_group() const override { return 0; }
  int num_replicas_in_sync() const override { return 1; }
  Tensor all_reduce(ReduceOp op, const Tensor& value) override {
    check_reduce_op(op, "all_reduce");
    TF_CHECK_ARG(value.defined(), "all_reduce", "the value is an undefined tensor");
    check_not_bool(value);
    return identity(value);
  }
  std::vector<Tensor> all_reduce(ReduceOp op, const std::vector<Tensor>& values) override {
    check_reduce_op(op, "all_reduce");
    std::vector<Tensor> out;
    out.reserve(values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      TF_CHECK_ARG(values[i].defined(), "all_reduce", "value {} is an undefined tensor", i);
      check_not_bool(values[i]);
      out.push_back(identity(values[i]));
    }
    return out;
  }

 private:
  // As a MirroredStrategy's all-reduce (of one replica too).
  static void check_not_bool(const Tensor& t) {
    TF_CHECK_ARG(t.dtype() != bool_, "all_reduce", "cannot all-reduce a bool tensor ({} {})",
                 dtype_name(t.dtype()), t.shape().to_string());
  }
};

// One persistent thread per replica; run() hands them a job and joins. Every wait is
// abortable through the collectives' StepBarrier.
class StrategyCore {
 public:
  StrategyCore(Strategy* owner, std::vector<Device> devices, CollectiveKind kind, bool inline_mode,
               std::shared_ptr<WorkerGroup> workers)
      : owner_(owner), devices_(std::move(devices)), inline_(inline_mode) {
    if (inline_) return;
    collectives_ = std::make_unique<Collectives>(devices_, kind, std::move(workers));
    new_variable_slots_.resize(devices_.size());
    for (size_t i = 0; i < devices_.size(); ++i)
      contexts_.push_back(
          std::make_unique<MirroredReplicaContext>(static_cast<int>(i), collectives_.get()));
    threads_.reserve(devices_.size());
    try {
      for (size_t i = 0; i < devices_.size(); ++i)
        threads_.emplace_back([this, i] { worker(static_cast<int>(i)); });
    } catch (const std::system_error& e) {
      // The system refused a thread (too many replicas for its limits): the started ones are
      // stopped and joined (a joinable std::thread destroyed would end the process).
      const size_t started = threads_.size();
      stop_threads();
      TF_THROW(ResourceExhaustedError, "MirroredStrategy",
               "could not start a thread for replica {} of {} (the strategy runs one thread per "
               "replica): {}",
               started, devices_.size(), e.what());
    }
  }

  ~StrategyCore() { stop_threads(); }

  const std::vector<Device>& devices() const { return devices_; }
  int size() const { return static_cast<int>(devices_.size()); }

  void run(const std::function<void(int)>& job) {
    if (inline_) {
      // TF's default strategy: fn runs on the caller's thread, in a replica context of one
      // replica (restored afterwards, also when fn throws).
      ReplicaContextScope context(&default_context_);
      struct InReplica {
        bool saved = std::exchange(t_in_replica, true);
        ~InReplica() { t_in_replica = saved; }
      } in_replica;
      job(0);
      return;
    }
    TF_CHECK_T(FailedPreconditionError, !t_in_replica, "strategy.run",
               "called inside a replica function (strategy.run does not nest)");
    std::lock_guard run_lock(run_mu_);
    // The workers compare their positions (steps and collectives) before each collective.
    WorkerGroup* workers = collectives_->workers();
    if (workers != nullptr) workers->begin_step();
    std::unique_lock lock(mu_);
    job_ = &job;
    pending_ = size();
    first_error_ = nullptr;
    cancelled_.clear();
    cancel_cause_.clear();
    ++generation_;
    work_cv_.notify_all();
    done_cv_.wait(lock, [&] { return pending_ == 0; });
    if (workers != nullptr) workers->end_step();
    job_ = nullptr;
    new_variable_ = Variable();  // the strategy must not keep the step's last new variable alive
    collectives_->barrier().reset();
    if (first_error_) {
      std::exception_ptr e = std::exchange(first_error_, nullptr);
      tell_other_workers(e);
      std::rethrow_exception(e);
    }
    if (!cancelled_.empty()) {
      // A collective failed and cancelled these replicas, but the replica that received the
      // failure caught it in fn and returned: the step did not run on every replica, and they
      // have no results. The failure was raised alike on every worker, or broke the group
      // (those tell the others themselves): nobody needs telling.
      std::sort(cancelled_.begin(), cancelled_.end());
      TF_THROW(FailedPreconditionError, "strategy.run",
               "the step was cancelled on replica(s) {} of {} because a collective failed ({}), "
               "but no replica's fn raised that failure: a replica caught it and returned. Let "
               "errors of collectives (all_reduce) propagate out of fn",
               fmt::join(cancelled_, ", "), size(),
               cancel_cause_.empty() ? std::string("no cause recorded") : cancel_cause_);
    }
  }

 private:
  void stop_threads() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    work_cv_.notify_all();
    for (auto& t : threads_) t.join();
  }

  void worker(int i) {
    t_strategy = owner_;
    uint64_t seen = 0;
    for (;;) {
      const std::function<void(int)>* job = nullptr;
      {
        std::unique_lock lock(mu_);
        work_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
        if (stop_) return;
        seen = generation_;
        job = job_;
      }
      std::exception_ptr error;
      bool cancelled = false;
      std::string cause;
      // Replicas on CPU devices share the cores: each takes its part of the pool (read again
      // at every step, in case the pool size changed).
      if (devices_[static_cast<size_t>(i)].is_cpu())
        tapeflow::detail::set_thread_share(static_cast<int>(devices_.size()));
      try {
        DeviceScope device(devices_[static_cast<size_t>(i)]);
        tapeflow::detail::ReplicaComponentScope component(i);
        ReplicaContextScope context(contexts_[static_cast<size_t>(i)].get());
        const ::tapeflow::detail::ReplicaVariableCreator creator =
            [this, i](const Tensor& initial_value, const std::string& name, bool trainable) {
              return create_variable(i, initial_value, name, trainable);
            };
        ::tapeflow::detail::ReplicaVariableCreatorScope creating(&creator);
        t_in_replica = true;
        (*job)(i);
        t_in_replica = false;
        collectives_->barrier().replica_finished();
      } catch (const StepCancelled& c) {
        // Another replica failed; its error is the one run() rethrows (or, when it caught it,
        // run() reports the cancellation).
        cancelled = true;
        cause = c.cause();
      } catch (...) {
        error = std::current_exception();
      }
      t_in_replica = false;
      std::lock_guard lock(mu_);
      if (cancelled) {
        cancelled_.push_back(i);
        if (cancel_cause_.empty()) cancel_cause_ = std::move(cause);
      }
      if (error) {
        // Moved, not copied: run() is then the only owner of the exception it rethrows (no
        // reference is dropped on this thread while the caller handles it).
        if (!first_error_) first_error_ = std::move(error);
        error = nullptr;
        // Wake every replica waiting in a collective of this step.
        collectives_->barrier().cancel();
      }
      if (--pending_ == 0) done_cv_.notify_all();
    }
  }

  // A Variable constructed in the replica function (TF's rule): a collective in which every
  // replica passes its initial value, and replica 0 makes one mirrored variable from its own
  // under the strategy's scope (a multi-worker strategy: from worker 0's), which all return.
  Variable create_variable(int replica, const Tensor& initial_value, const std::string& name,
                           bool trainable) {
    StepBarrier& barrier = collectives_->barrier();
    new_variable_slots_[static_cast<size_t>(replica)] = {name, initial_value.dtype(),
                                                         initial_value.shape()};
    barrier.arrive_and_wait("Variable");
    std::exception_ptr failed;
    if (replica == 0) {
      new_variable_ = Variable();
      new_variable_error_.clear();
      new_variable_mismatch_ = false;
      const NewVariable& first = new_variable_slots_[0];
      for (size_t r = 1; r < new_variable_slots_.size() && new_variable_error_.empty(); ++r) {
        const NewVariable& other = new_variable_slots_[r];
        new_variable_mismatch_ = other.dtype != first.dtype || other.shape != first.shape;
        if (new_variable_mismatch_)
          new_variable_error_ = fmt::format(
              "replica 0 creates '{}' {} {} where replica {} creates '{}' {} {}; every replica "
              "must create the same variables (dtypes and shapes) in the same order",
              first.name, dtype_name(first.dtype), first.shape.to_string(), r, other.name,
              dtype_name(other.dtype), other.shape.to_string());
      }
      if (new_variable_error_.empty()) {
        try {
          tapeflow::detail::ReplicaComponentScope cross_replica(-1);
          Strategy::Scope scope(*owner_);
          new_variable_ = Variable(initial_value, name, trainable);
        } catch (const std::exception& e) {
          failed = std::current_exception();
          new_variable_error_ = e.what();
        }
      }
    }
    barrier.arrive_and_wait("Variable", /*cancellable=*/false);
    if (failed) std::rethrow_exception(failed);
    if (!new_variable_.defined()) {
      // Replica 0 raises its own failure to create it; the others are cancelled.
      if (!new_variable_mismatch_) throw StepCancelled(new_variable_error_);
      TF_THROW(InvalidArgumentError, "Variable", "in strategy.run, {}", new_variable_error_);
    }
    return new_variable_;
  }

  // A failure of this worker's step: the other workers may be waiting for it in a collective.
  // Errors every worker raised alike, and failures of the group itself, need no telling.
  void tell_other_workers(const std::exception_ptr& e) {
    WorkerGroup* workers = collectives_->workers();
    if (workers == nullptr || workers->size() == 1) return;
    try {
      std::rethrow_exception(e);
    } catch (const WorkersAgreedError&) {
    } catch (const std::exception& x) {
      workers->abort(x.what());
    } catch (...) {
      workers->abort("an exception that is not a std::exception");
    }
  }

  Strategy* owner_;
  std::vector<Device> devices_;
  bool inline_;
  std::unique_ptr<Collectives> collectives_;
  std::vector<std::unique_ptr<MirroredReplicaContext>> contexts_;
  DefaultReplicaContext default_context_;  // inline_ only
  std::mutex run_mu_;  // one step at a time
  std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  const std::function<void(int)>* job_ = nullptr;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
  std::exception_ptr first_error_;
  // create_variable's: what each replica creates (written before the first barrier), and what
  // replica 0 made of it (between the two barriers).
  struct NewVariable {
    std::string name;
    DType dtype = float32;
    TensorShape shape;
  };
  std::vector<NewVariable> new_variable_slots_;
  Variable new_variable_;
  std::string new_variable_error_;
  bool new_variable_mismatch_ = false;
  // The replicas of this step that ended with StepCancelled, and the first one's cause.
  std::vector<int> cancelled_;
  std::string cancel_cause_;
  std::vector<std::thread> threads_;
};

}  // namespace detail

namespace {

// True when every device is a GPU on a physical GPU of its own (what NCCL needs).
bool distinct_physical_gpus(const std::vector<Device>& devices) {
  std::vector<int> physical;
  for (Device d : devices) {
    if (!d.is_gpu()) return false;
    const int p = tapeflow::detail::physical_gpu_of(d.index);
    if (std::find(physical.begin(), physical.end(), p) != physical.end()) return false;
    physical.push_back(p);
  }
  return true;
}

// The workers' common all-reduce: NCCL only when every worker can use it (one worker on NCCL
// and another on the ring would hang) and no GPU serves two workers (processes on one machine
// that each took every visible GPU; NCCL rejects a GPU that appears twice). Decided from
// gathered facts, so every worker decides the same; where NCCL was asked for explicitly and
// cannot serve, every worker raises.
bool agree_on_nccl(detail::WorkerGroup& workers, const std::vector<Device>& devices, bool nccl,
                   bool required, const char* who) {
  const std::vector<int64_t> wants = workers.all_gather(nccl ? (required ? 2 : 1) : 0, who);
  const auto count = [&](int64_t v) { return std::count(wants.begin(), wants.end(), v); };
  const int64_t n = static_cast<int64_t>(wants.size());
  if (count(0) == n) return false;
  // GPUs by identity, device by device (every worker has as many devices, checked before).
  std::vector<int64_t> seen;
  bool shared_gpu = false;
  for (Device d : devices) {
    const int64_t id = d.is_gpu()
                           ? tapeflow::detail::physical_gpu_identity(
                                 tapeflow::detail::physical_gpu_of(d.index))
                           : 0;
    for (int64_t other : workers.all_gather(id, who)) {
      shared_gpu = shared_gpu ||
                   (other != 0 && std::find(seen.begin(), seen.end(), other) != seen.end());
      seen.push_back(other);
    }
  }
  const bool everyone = count(0) == 0;
  if (everyone && !shared_gpu) return true;
  const std::string why =
      !everyone ? fmt::format("{} of {} workers cannot use NCCL (a worker with CPU devices, or "
                              "logical devices sharing a GPU)",
                              count(0), n)
                : "a GPU is used by more than one worker (processes on one machine that each "
                  "took every visible GPU: give each its own with CUDA_VISIBLE_DEVICES)";
  if (count(2) > 0)
    throw detail::WorkersAgreedError(
        fmt::format("[{}] CommunicationImplementation::NCCL cannot serve this job: {}", who, why));
  TF_LOG_INFO("{}: all-reduce over the ring, not NCCL: {}", who, why);
  return false;
}

// Checks the devices and picks the all-reduce (TF's select_cross_device_ops).
detail::CollectiveKind choose_collectives(const std::vector<Device>& devices,
                                          const CrossDeviceOps& ops, std::string& name) {
  const bool distinct_gpus = distinct_physical_gpus(devices);
  if (std::holds_alternative<NcclAllReduce>(ops)) {
    TF_CHECK_ARG(std::get<NcclAllReduce>(ops).num_packs >= 0, "MirroredStrategy",
                 "NcclAllReduce requires num_packs >= 0, got {}",
                 std::get<NcclAllReduce>(ops).num_packs);
    TF_CHECK_ARG(distinct_gpus, "MirroredStrategy",
                 "NcclAllReduce needs every device to be a GPU on its own physical GPU; use "
                 "ReductionToOneDevice for CPU devices or logical devices sharing a GPU");
    TF_CHECK_T(UnimplementedError, detail::nccl_built(), "MirroredStrategy",
               "NcclAllReduce: tapeflow was built without NCCL");
    name = "NcclAllReduce";
    return detail::CollectiveKind::Nccl;
  }
  if (std::holds_alternative<std::monostate>(ops) && devices.size() > 1 && distinct_gpus &&
      detail::nccl_built()) {
    name = "NcclAllReduce";
    return detail::CollectiveKind::Nccl;
  }
  name = "ReductionToOneDevice";
  return detail::CollectiveKind::InProcess;
}

std::vector<Device> parse_devices(const std::vector<std::string>& names) {
  TF_CHECK_ARG(!names.empty(), "MirroredStrategy", "the device list is empty");
  std::vector<Device> out;
  for (const std::string& n : names) {
    const Device d = Device::parse(n);
    const int count = tapeflow::detail::num_logical_devices(d.type);
    TF_CHECK_ARG(d.index >= 0 && d.index < count, "MirroredStrategy",
                 "device '{}' ({}) does not exist: there are {} logical {} devices{}", n,
                 d.to_string(), count, d.is_cpu() ? "CPU" : "GPU",
                 d.is_cpu() ? " (split the CPU with tf::config::set_logical_device_configuration "
                              "before the first op)"
                            : "");
    TF_CHECK_ARG(std::find(out.begin(), out.end(), d) == out.end(), "MirroredStrategy",
                 "no duplicates allowed in the devices argument: '{}' ({}) is listed twice", n,
                 d.to_string());
    out.push_back(d);
  }
  return out;
}

std::vector<Device> all_local_devices() {
  const int gpus = tapeflow::detail::num_logical_devices(DeviceType::GPU);
  std::vector<Device> out;
  for (int i = 0; i < gpus; ++i) out.push_back(Device{DeviceType::GPU, i});
  if (out.empty()) out.push_back(Device{DeviceType::CPU, 0});
  return out;
}

}  // namespace

Strategy::Strategy(std::vector<Device> devices, CrossDeviceOps cross_device_ops,
                   bool inline_default, const char* who) {
  const detail::CollectiveKind kind =
      choose_collectives(devices, cross_device_ops, extended_.cross_device_ops_);
  for (Device d : devices) extended_.names_.push_back(d.to_string());
  if (!inline_default)
    TF_LOG_INFO("Using {} with devices ({})", who, fmt::join(extended_.names_, ", "));
  default_ = inline_default;
  layout_ = {devices, static_cast<int>(devices.size()), 0};
  core_ = std::make_unique<detail::StrategyCore>(this, std::move(devices), kind, inline_default,
                                                 nullptr);
}

Strategy::Strategy(detail::MultiWorkerSetup setup, const char* who)
    : workers_(std::move(setup.workers)) {
  std::vector<Device>& devices = setup.devices;
  const int local = static_cast<int>(devices.size());
  // TF requires as many devices on every worker; the global replica ids depend on it.
  const std::vector<int64_t> counts = workers_->all_gather(local, who);
  for (size_t w = 0; w < counts.size(); ++w)
    TF_CHECK_ARG(counts[w] == local, who,
                 "every worker needs as many replica devices: worker {} has {}, worker {} has {}",
                 workers_->rank(), local, w, counts[w]);
  setup.nccl = agree_on_nccl(*workers_, devices, setup.nccl, setup.nccl_required, who);
  for (Device d : devices)
    extended_.names_.push_back(
        fmt::format("/job:worker/replica:0/task:{}{}", workers_->rank(), d.to_string()));
  extended_.cross_device_ops_ = setup.nccl ? "NCCL" : "RING";
  TF_LOG_INFO("Using {} on worker {} of {} with local devices ({}), all-reduce {}", who,
              workers_->rank(), workers_->size(), fmt::join(extended_.names_, ", "),
              extended_.cross_device_ops_);
  layout_ = {devices, local * workers_->size(), local * workers_->rank()};
  core_ = std::make_unique<detail::StrategyCore>(
      this, std::move(devices),
      setup.nccl ? detail::CollectiveKind::Nccl : detail::CollectiveKind::InProcess, false,
      workers_);
}

Strategy::~Strategy() = default;

std::weak_ptr<const void> detail::strategy_lifetime(const Strategy& strategy) {
  return strategy.alive_;
}

int Strategy::num_replicas_in_sync() const { return layout_.global_replicas; }
const std::vector<Device>& Strategy::devices() const { return core_->devices(); }

void Strategy::check_per_replica_size(size_t n) const {
  TF_CHECK_ARG(n == devices().size(), "strategy.run",
               "a PerReplica argument has {} components but the strategy has {} replicas{}", n,
               devices().size(), workers_ ? " in this worker" : "");
}

void Strategy::run_replicas(const std::function<void(int)>& job) { core_->run(job); }

namespace {
// A variable's name without Keras' automatic numbering ("dense_3/kernel:0" -> "dense/kernel"):
// a worker that made more auto-named layers elsewhere numbers the same layer differently.
std::string name_without_numbering(const std::string& name) {
  std::string out;
  size_t start = 0;
  while (start <= name.size()) {
    size_t end = name.find('/', start);
    if (end == std::string::npos) end = name.size();
    std::string part = name.substr(start, end - start);
    for (const char sep : {':', '_'}) {
      const size_t at = part.rfind(sep);
      if (at != std::string::npos && at + 1 < part.size() &&
          part.find_first_not_of("0123456789", at + 1) == std::string::npos)
        part.resize(at);
    }
    out += (out.empty() && start == 0 ? "" : "/") + part;
    start = end + 1;
  }
  return out;
}

// Variables of a multi-worker strategy start from worker 0's initial value (TF broadcasts them
// too): unseeded initialisers differ between processes. The workers first compare the variable's
// name (without automatic numbering), dtype and shape: worker 0's bytes must not land in another
// variable, shape or dtype.
// The spec may outlive the strategy (layers keep it for a later build): it shares the group.
::tapeflow::detail::MirrorSpec mirror_spec_of(Strategy& strategy, bool is_default,
                                              std::shared_ptr<detail::WorkerGroup> workers) {
  ::tapeflow::detail::MirrorSpec spec;
  if (is_default) return spec;
  spec.devices = strategy.devices();
  if (workers != nullptr && workers->size() > 1)
    spec.initial_value = [workers](const Tensor& value, const std::string& name) {
      detail::check_workers_agree(
          *workers, "Variable",
          fmt::format("creates '{}' {} {}", name_without_numbering(name), dtype_name(value.dtype()),
                      value.shape().to_string()),
          [](int w) {
            return fmt::format(
                "worker {} creates another variable than worker 0 in the "
                "strategy's scope",
                w);
          },
          "every worker must create the same variables (names, dtypes and shapes) in the same "
          "order in the strategy's scope: each starts from worker 0's initial value");
      Tensor host = tapeflow::detail::copy_to_device(value, Device{DeviceType::CPU, 0});
      if (host.get() == value.get()) host = identity(host);  // never write the caller's tensor
      if (host.nbytes() > 0) workers->broadcast(host.raw_data(), host.nbytes(), "Variable");
      return host;
    };
  return spec;
}
}  // namespace

Strategy::Scope::Scope(Strategy& strategy)
    : mirror_(mirror_spec_of(strategy, strategy.default_, strategy.workers_)),
      saved_(t_strategy) {
  TF_CHECK_T(FailedPreconditionError, t_strategy == nullptr || t_strategy == &strategy,
             "strategy.scope",
             "mixing different tf::distribute::Strategy objects: a scope of another strategy "
             "is open on this thread");
  t_strategy = &strategy;
}

Strategy::Scope::~Scope() { t_strategy = saved_; }

Tensor Strategy::reduce(ReduceOp op, const PerReplica<Tensor>& value,
                        std::optional<int> axis) const {
  const char* name = "strategy.reduce";
  detail::check_reduce_op(op, name);
  TF_CHECK_T(FailedPreconditionError, !t_in_replica, name,
             "called in a replica context: reduce runs in the cross-replica context (outside "
             "strategy.run); inside use get_replica_context()->all_reduce");
  TF_CHECK_ARG(value.size() == devices().size(), name,
               "the value has {} components but the strategy has {} replicas{}", value.size(),
               devices().size(), workers_ ? " in this worker" : "");
  const Tensor& first = value[0];
  for (size_t i = 0; i < value.size(); ++i) {
    TF_CHECK_ARG(value[i].defined(), name, "component {} is an undefined tensor", i);
    TF_CHECK_ARG(value[i].dtype() == first.dtype(), name,
                 "components differ in dtype: {} for replica 0, {} for replica {}",
                 dtype_name(first.dtype()), dtype_name(value[i].dtype()), i);
  }
  TF_CHECK_ARG(first.dtype() != bool_, name,
               "cannot reduce bool components (bool {} for replica 0): cast them to a number "
               "first",
               first.shape().to_string());
  // The result goes to the caller's device (TF copies it to the current device).
  DeviceScope scope(tapeflow::detail::current_device());
  std::vector<Tensor> parts;
  int64_t count = 0;
  std::string how = detail::reduce_op_name(op);  // compared across workers
  if (axis) {
    int a = *axis;
    const int rank = first.rank();
    TF_CHECK_ARG(a >= -rank && a < rank, name, "axis {} is out of range for components of rank {}",
                 *axis, rank);
    if (a < 0) a += rank;
    how += fmt::format(" along axis {}", a);
    for (size_t i = 0; i < value.size(); ++i) {
      bool same = value[i].rank() == rank;
      for (int d = 0; same && d < rank; ++d)
        same = d == a || value[i].shape()[d] == first.shape()[d];
      TF_CHECK_ARG(same, name,
                   "components differ in shape outside axis {}: {} for replica 0, {} for "
                   "replica {}",
                   a, first.shape().to_string(), value[i].shape().to_string(), i);
      count += value[i].shape()[a];
      parts.push_back(reduce_sum(value[i], a));
    }
  } else {
    for (size_t i = 0; i < value.size(); ++i) {
      TF_CHECK_ARG(value[i].shape() == first.shape(), name,
                   "components differ in shape: {} for replica 0, {} for replica {} (reduce "
                   "with an axis to combine batches of different sizes)",
                   first.shape().to_string(), value[i].shape().to_string(), i);
      parts.push_back(value[i]);
    }
    count = static_cast<int64_t>(value.size());
  }
  // Summed in replica order: the same result on every call.
  Tensor sum = identity(parts[0]);
  for (size_t i = 1; i < parts.size(); ++i) sum = add(sum, parts[i]);
  if (workers_ != nullptr && workers_->size() > 1) {
    // Then over the workers (each must call reduce), and the counts (the batch sizes along the
    // axis may differ between workers).
    sum = detail::sum_over_workers(*this, sum, how);
    int64_t total = 0;
    for (int64_t c : workers_->all_gather(count, name)) total += c;
    count = total;
  }
  if (op == ReduceOp::SUM) return sum;
  // MEAN: divided by the replica count, or with an axis by the total count along it (a weak
  // scalar takes the sum's dtype).
  return divide(sum, Tensor(static_cast<double>(count)));
}

MirroredStrategy::MirroredStrategy()
    : Strategy(all_local_devices(), std::monostate{}, false, "MirroredStrategy") {}

MirroredStrategy::MirroredStrategy(const std::vector<std::string>& devices,
                                   CrossDeviceOps cross_device_ops)
    : Strategy(parse_devices(devices), std::move(cross_device_ops), false, "MirroredStrategy") {}

namespace {

// The all-reduce of a multi-worker strategy (TF's choice for CommunicationImplementation).
bool multi_worker_uses_nccl(const std::vector<Device>& devices,
                            experimental::CommunicationImplementation impl) {
  using experimental::CommunicationImplementation;
  const bool distinct_gpus = distinct_physical_gpus(devices);
  if (impl == CommunicationImplementation::NCCL) {
    TF_CHECK_ARG(distinct_gpus, "MultiWorkerMirroredStrategy",
                 "CommunicationImplementation::NCCL needs every local device to be a GPU on its "
                 "own physical GPU; use RING for CPU devices");
    TF_CHECK_T(UnimplementedError, detail::nccl_built(), "MultiWorkerMirroredStrategy",
               "CommunicationImplementation::NCCL: tapeflow was built without NCCL");
    return true;
  }
  return impl == CommunicationImplementation::AUTO && distinct_gpus && detail::nccl_built();
}

detail::MultiWorkerSetup multi_worker_setup(std::vector<Device> devices,
                                            const experimental::CommunicationOptions& o) {
  TF_CHECK_ARG(o.timeout_seconds >= 0, "MultiWorkerMirroredStrategy",
               "timeout_seconds must not be negative, got {}", o.timeout_seconds);
  TF_CHECK_ARG(o.bytes_per_pack >= 0, "MultiWorkerMirroredStrategy",
               "bytes_per_pack must not be negative, got {}", o.bytes_per_pack);
  using experimental::CommunicationImplementation;
  TF_CHECK_ARG(o.implementation == CommunicationImplementation::AUTO ||
                   o.implementation == CommunicationImplementation::RING ||
                   o.implementation == CommunicationImplementation::NCCL,
               "MultiWorkerMirroredStrategy",
               "CommunicationOptions::implementation must be AUTO, RING or NCCL, got "
               "CommunicationImplementation({})",
               static_cast<int>(o.implementation));
  detail::MultiWorkerSetup setup;
  setup.nccl = multi_worker_uses_nccl(devices, o.implementation);
  setup.nccl_required = o.implementation == experimental::CommunicationImplementation::NCCL;
  setup.devices = std::move(devices);
  setup.workers = detail::world_worker_group(
      o.timeout_seconds > 0 ? o.timeout_seconds : detail::default_collective_timeout());
  return setup;
}

}  // namespace

MultiWorkerMirroredStrategy::MultiWorkerMirroredStrategy(experimental::CommunicationOptions options)
    : Strategy(multi_worker_setup(all_local_devices(), options), "MultiWorkerMirroredStrategy") {}

MultiWorkerMirroredStrategy::MultiWorkerMirroredStrategy(const std::vector<std::string>& devices,
                                                         experimental::CommunicationOptions options)
    : Strategy(multi_worker_setup(parse_devices(devices), options),
               "MultiWorkerMirroredStrategy") {}

int MultiWorkerMirroredStrategy::worker_index() const { return workers()->rank(); }
int MultiWorkerMirroredStrategy::num_workers() const { return workers()->size(); }

namespace {
class DefaultStrategy final : public Strategy {
 public:
  DefaultStrategy()
      : Strategy({tapeflow::detail::default_device()}, ReductionToOneDevice{}, true,
                 "DefaultStrategy") {}
};
}  // namespace

Strategy& get_strategy() {
  if (t_strategy) return *t_strategy;
  static DefaultStrategy default_strategy;
  return default_strategy;
}

bool has_strategy() { return t_strategy != nullptr; }

Tensor detail::sum_over_workers(const Strategy& strategy, const Tensor& value,
                                const std::string& how) {
  WorkerGroup* workers = strategy.workers_.get();
  if (workers == nullptr || workers->size() == 1) return value;
  const char* name = "strategy.reduce";
  // Every worker must sum the same dtype and shape (the ring would otherwise exchange messages
  // of different sizes: a failed or stuck collective), for the same op (SUM on one worker and
  // MEAN on another gave each its own answer). Checked on gathered facts, so every worker raises
  // alike and the group stays usable.
  check_workers_agree(
      *workers, name,
      fmt::format("{} {} {}", how, dtype_name(value.dtype()), value.shape().to_string()),
      [](int w) {
        return fmt::format(
            "the workers reduce values of different dtypes or shapes, or with "
            "different ops: worker {} differs from worker 0",
            w);
      },
      "every worker must reduce values of the same dtype and shape, with the same op");
  TF_CHECK_ARG(value.dtype() != bool_, name, "cannot sum a bool tensor across workers");
  // A host copy summed in place by the ring (never the caller's buffer).
  Tensor host = tapeflow::detail::copy_to_device(value, Device{DeviceType::CPU, 0});
  if (host.get() == value.get()) host = identity(host);
  if (host.nbytes() > 0)
    workers->all_reduce_sum(host.raw_data(), static_cast<size_t>(host.num_elements()),
                            host.dtype(), name);
  return tapeflow::detail::copy_to_device(host, tapeflow::detail::current_device());
}
std::vector<int64_t> detail::gather_over_workers(const Strategy& strategy,
                                                 const std::vector<int64_t>& values,
                                                 const char* what) {
  WorkerGroup* workers = strategy.workers_.get();
  if (workers == nullptr || workers->size() == 1) return values;
  check_workers_agree(
      *workers, what, fmt::format("gathers {} values", values.size()),
      [](int w) { return fmt::format("worker {} gathers other values than worker 0", w); },
      "every worker must gather as many values at the same point");
  std::vector<int64_t> all(values.size() * static_cast<size_t>(workers->size()), 0);
  std::copy(values.begin(), values.end(),
            all.begin() + static_cast<std::ptrdiff_t>(values.size()) * workers->rank());
  if (!all.empty()) workers->all_reduce_sum(all.data(), all.size(), int64, what);
  return all;
}

int detail::worker_index(const Strategy& strategy) {
  return strategy.layout().first_replica / static_cast<int>(strategy.devices().size());
}

int detail::num_workers(const Strategy& strategy) {
  return strategy.layout().global_replicas / static_cast<int>(strategy.devices().size());
}

bool in_cross_replica_context() { return !t_in_replica; }

}  // namespace tapeflow::distribute
