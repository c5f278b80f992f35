// NCCL all-reduce between distinct GPUs (compiled only with the CUDA toolkit; linked with
// libnccl). One ncclCommInitAll per strategy in one process, or one non-blocking
// ncclCommInitRankConfig per local GPU across workers; each step's calls are enqueued by one
// thread inside ncclGroupStart/End, each on its device's stream (core/cuda/context.h), so they are
// ordered after the ops that produced the buffers and before the ops that read the results.
// Across workers the communicators are non-blocking, each all-reduce completes before it
// returns, and a watchdog thread aborts the communicators when NCCL reports an asynchronous
// error or an all-reduce outlives the group's timeout: a lost peer fails the step in bounded
// time, with an error, instead of leaving the host waiting forever or going on with garbage.
#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "core/check.h"
#include "core/cuda/context.h"
#include "core/log.h"
#include "distribute/nccl.h"
#include "distribute/worker_group.h"

#define TF_NCCL_CHECK(CALL)                                                                  \
  do {                                                                                       \
    ncclResult_t tf_nccl_res_ = (CALL);                                                      \
    if (tf_nccl_res_ != ncclSuccess)                                                         \
      throw ::tapeflow::InternalError(std::string("[all_reduce] ") + #CALL + " failed: " +   \
                                      ncclGetErrorString(tf_nccl_res_));                     \
  } while (0)

namespace tapeflow::distribute::detail {

namespace {

ncclDataType_t nccl_type(DType d) {
  switch (d.id) {
    case DTypeId::Float16: return ncclHalf;
    case DTypeId::BFloat16: return ncclBfloat16;
    case DTypeId::Float32: return ncclFloat;
    case DTypeId::Float64: return ncclDouble;
    case DTypeId::Int32: return ncclInt32;
    case DTypeId::Int64: return ncclInt64;
    case DTypeId::UInt8: return ncclUint8;
    case DTypeId::Bool: break;
  }
  TF_THROW(InvalidArgumentError, "all_reduce", "NCCL cannot all-reduce {} tensors",
           dtype_name(d));
}

class NcclCommsImpl final : public NcclComms {
 public:
  NcclCommsImpl(const std::vector<Device>& devices, WorkerGroup* workers) : devices_(devices) {
    std::vector<int> ordinals;
    for (Device d : devices) ordinals.push_back(tapeflow::detail::cuda::physical_gpu(d));
    comms_.resize(devices.size());
    if (workers == nullptr || workers->size() == 1) {
      TF_NCCL_CHECK(
          ncclCommInitAll(comms_.data(), static_cast<int>(comms_.size()), ordinals.data()));
      return;
    }
    // Across processes: worker 0's unique id reaches every worker over MPI; each local GPU
    // joins as rank (worker * local + i) of (workers * local). The communicators are
    // non-blocking (NCCL's fault-tolerance mode): no NCCL call waits for a peer, this class
    // polls instead, within the group's timeout, and can abort at any time.
    timeout_ = std::chrono::duration<double>(workers->timeout_seconds());
    ncclUniqueId id{};
    if (workers->rank() == 0) TF_NCCL_CHECK(ncclGetUniqueId(&id));
    workers->broadcast(&id, sizeof(id), "NcclAllReduce");
    const int local = static_cast<int>(devices.size());
    const int nranks = local * workers->size();
    std::unique_lock lock(mu_);
    try {
      TF_NCCL_CHECK(ncclGroupStart());
      ncclResult_t first = ncclSuccess;
      for (int i = 0; i < local && ok(first); ++i) {
        tapeflow::detail::cuda::set_device(devices[static_cast<size_t>(i)]);
        ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
        config.blocking = 0;
        first = ncclCommInitRankConfig(&comms_[static_cast<size_t>(i)], nranks, id,
                                       workers->rank() * local + i, &config);
      }
      const ncclResult_t end = ncclGroupEnd();
      TF_NCCL_CHECK(ok(first) ? ncclSuccess : first);
      TF_NCCL_CHECK(ok(end) ? ncclSuccess : end);
      wait_ready_locked("joining the NCCL communicator of every worker");
      // Events per device mark the start and the end of the last enqueued group.
      start_.resize(devices.size(), nullptr);
      done_.resize(devices.size(), nullptr);
      for (size_t i = 0; i < devices.size(); ++i) {
        tapeflow::detail::cuda::set_device(devices[i]);
        for (cudaEvent_t* e : {&start_[i], &done_[i]})
          if (cudaEventCreateWithFlags(e, cudaEventDisableTiming) != cudaSuccess) {
            cudaGetLastError();
            TF_THROW(InternalError, "all_reduce", "could not create a CUDA event on {}",
                     devices[i].to_string());
          }
      }
      watchdog_ = std::thread([this] { watch(); });
    } catch (...) {
      // The destructor does not run for a failed constructor: abort what was made (abort, not
      // destroy, which would wait for peers that may never join).
      for (ncclComm_t& c : comms_)
        if (c) ncclCommAbort(std::exchange(c, nullptr));
      destroy_events();
      throw;
    }
  }
  ~NcclCommsImpl() override {
    if (watchdog_.joinable()) {
      {
        std::lock_guard lock(mu_);
        stop_ = true;
      }
      wake_.notify_all();
      watchdog_.join();
    }
    if (done_.empty()) {  // one process: nothing can be left waiting for a peer
      for (ncclComm_t c : comms_)
        if (c) ncclCommDestroy(c);  // nothing to do about a failure at teardown
      return;
    }
    // Across workers a communicator is finalised together with the peers' (a collective: a
    // lost or stuck peer would make it wait forever), so the finalisation is polled, at most
    // kTeardownSeconds, and the communicators are aborted instead when it does not finish (or
    // when work is still in flight after a failed step).
    constexpr double kTeardownSeconds = 10;
    std::string why;
    bool clean = abort_reason_.empty() && events_state(done_, &why) == Events::Done;
    if (clean) {
      ncclGroupStart();
      for (ncclComm_t c : comms_) clean = clean && ok(ncclCommFinalize(c));
      ncclGroupEnd();
      if (clean) why = poll_ready("finalising the communicators", kTeardownSeconds);
      clean = clean && why.empty();
    }
    if (!clean && !why.empty())
      TF_LOG_WARN("all_reduce: aborting the NCCL communicators at teardown: {}", why);
    for (ncclComm_t c : comms_) {
      if (!c) continue;
      if (clean) ncclCommDestroy(c);
      else ncclCommAbort(c);
    }
    destroy_events();
  }

  void all_reduce_group(const std::vector<const std::vector<NcclCall>*>& calls) override {
    TF_ASSERT(calls.size() == comms_.size());
    // The streams first: cuda::stream() may initialise a device, which is not allowed inside a
    // group.
    std::vector<cudaStream_t> streams;
    for (Device d : devices_) streams.push_back(tapeflow::detail::cuda::stream(d));
    const bool across_workers = !done_.empty();
    std::unique_lock lock(mu_);
    throw_if_aborted();
    if (across_workers) record(start_, streams);
    TF_NCCL_CHECK(ncclGroupStart());
    ncclResult_t first = ncclSuccess;
    for (size_t r = 0; r < calls.size() && ok(first); ++r) {
      for (const NcclCall& c : *calls[r]) {
        first = ncclAllReduce(c.send, c.recv, c.count, nccl_type(c.dtype),
                              c.mean ? ncclAvg : ncclSum, comms_[r], streams[r]);
        if (!ok(first)) break;
      }
    }
    // The group is always closed, also after a failed call.
    const ncclResult_t end = ncclGroupEnd();
    if (!across_workers) {
      TF_NCCL_CHECK(first);
      TF_NCCL_CHECK(end);
      return;
    }
    try {
      TF_NCCL_CHECK(ok(first) ? ncclSuccess : first);
      TF_NCCL_CHECK(ok(end) ? ncclSuccess : end);
      // Non-blocking: the kernels are on the streams once every communicator is ready.
      wait_ready_locked("enqueueing an all-reduce");
      record(done_, streams);
    } catch (const UnavailableError&) {
      throw;
    } catch (const std::exception& e) {
      abort_locked(e.what());
      throw_if_aborted();
    }
    in_flight_ = true;
    started_ = false;
    lock.unlock();
    // Across workers the all-reduce completes before it returns: if a peer is lost the watchdog
    // aborts the kernels, and the step must fail here rather than go on with garbage (the
    // workers' fingerprint exchange before each all-reduce already waits for every peer).
    std::string failed;
    for (size_t r = 0; r < done_.size() && failed.empty(); ++r) {
      const cudaError_t err = cudaEventSynchronize(done_[r]);
      if (err != cudaSuccess)
        failed = fmt::format("waiting for the all-reduce on {} failed: {}",
                             devices_[r].to_string(), cudaGetErrorString(err));
    }
    lock.lock();
    in_flight_ = false;
    if (!failed.empty()) abort_locked(std::move(failed));
    throw_if_aborted();
  }

  void check_healthy() const override {
    std::lock_guard lock(mu_);
    throw_if_aborted();
  }

 private:
  using Clock = std::chrono::steady_clock;

  static bool ok(ncclResult_t r) { return r == ncclSuccess || r == ncclInProgress; }
  // In double: a timeout may be huge (TAPEFLOW_COLLECTIVE_TIMEOUT=inf), which no clock
  // duration holds.
  static double seconds_since(Clock::time_point start) {
    return std::chrono::duration<double>(Clock::now() - start).count();
  }

  void throw_if_aborted() const {
    if (!abort_reason_.empty())
      TF_THROW(UnavailableError, "all_reduce", "the NCCL communicators were aborted: {}",
               abort_reason_);
  }
  // Polls the non-blocking communicators until none is in progress, at most the timeout;
  // aborts them on an error or past the timeout and raises.
  void wait_ready_locked(const char* what) {
    if (std::string why = poll_ready(what, timeout_.count(),
                                     "; CommunicationOptions::timeout_seconds or "
                                     "TAPEFLOW_COLLECTIVE_TIMEOUT");
        !why.empty()) {
      abort_locked(std::move(why));
      throw_if_aborted();
    }
  }
  // Polls the communicators until none is in progress, at most `seconds`: empty when they are
  // all ready, else what went wrong (an error, or the time ran out: then `hint` is added).
  std::string poll_ready(const char* what, double seconds, const char* hint = "") const {
    const Clock::time_point start = Clock::now();
    for (;;) {
      bool busy = false;
      for (size_t i = 0; i < comms_.size(); ++i) {
        ncclResult_t state = ncclSuccess;
        const ncclResult_t q = ncclCommGetAsyncError(comms_[i], &state);
        if (q != ncclSuccess) state = q;
        if (state == ncclInProgress) {
          busy = true;
        } else if (state != ncclSuccess) {
          return fmt::format("{} failed on {}: {} (last NCCL message: {})", what,
                             devices_[i].to_string(), ncclGetErrorString(state),
                             ncclGetLastError(nullptr));
        }
      }
      if (!busy) return {};
      if (seconds_since(start) > seconds)
        return fmt::format("{} did not finish within {} s (a worker is gone or stuck{})", what,
                           seconds, hint);
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }
  void record(const std::vector<cudaEvent_t>& events, const std::vector<cudaStream_t>& streams) {
    for (size_t r = 0; r < events.size(); ++r) {
      tapeflow::detail::cuda::set_device(devices_[r]);
      if (cudaEventRecord(events[r], streams[r]) != cudaSuccess) {
        const cudaError_t err = cudaGetLastError();
        TF_THROW(InternalError, "all_reduce", "cudaEventRecord failed on {}: {}",
                 devices_[r].to_string(), cudaGetErrorString(err));
      }
    }
  }
  // Whether every event has completed (Done for none); Failed says why in *why.
  enum class Events { Done, Pending, Failed };
  static Events events_state(const std::vector<cudaEvent_t>& events, std::string* why) {
    Events state = Events::Done;
    for (cudaEvent_t e : events) {
      const cudaError_t q = cudaEventQuery(e);
      if (q == cudaErrorNotReady) {
        state = Events::Pending;
      } else if (q != cudaSuccess) {
        *why = fmt::format("cudaEventQuery failed: {}", cudaGetErrorString(q));
        return Events::Failed;
      }
    }
    return state;
  }
  void destroy_events() {
    for (auto* events : {&start_, &done_})
      for (cudaEvent_t& e : *events)
        if (e) cudaEventDestroy(std::exchange(e, nullptr));
  }

  // The watchdog: every 100 ms, NCCL's asynchronous errors (a peer's connection lost, ...) and
  // the age of the all-reduce in flight, counted from when the GPUs reached it (its start
  // events); either aborts every communicator of this worker, which ends their kernels, and
  // the waiting all-reduce raises UnavailableError. The worker's failure then reaches the other
  // workers through the worker group.
  void watch() {
    try {
      tapeflow::detail::cuda::set_device(devices_[0]);  // no stray context on another GPU
    } catch (const std::exception& e) {
      TF_LOG_WARN("all_reduce: the NCCL watchdog could not select {}: {}",
                  devices_[0].to_string(), e.what());
    }
    std::unique_lock lock(mu_);
    while (!stop_ && abort_reason_.empty()) {
      wake_.wait_for(lock, std::chrono::milliseconds(100));
      if (stop_) break;
      for (size_t i = 0; i < comms_.size() && abort_reason_.empty(); ++i) {
        ncclResult_t async = ncclSuccess;
        if (ncclCommGetAsyncError(comms_[i], &async) != ncclSuccess) continue;
        if (async != ncclSuccess && async != ncclInProgress)
          abort_locked(fmt::format("NCCL reported an asynchronous error on {}: {} (last NCCL "
                                   "message: {})",
                                   devices_[i].to_string(), ncclGetErrorString(async),
                                   ncclGetLastError(nullptr)));
      }
      if (!abort_reason_.empty() || !in_flight_) continue;
      std::string why;
      if (!started_) {
        const Events s = events_state(start_, &why);
        if (s == Events::Failed) {
          abort_locked("waiting for an all-reduce to start: " + why);
        } else if (s == Events::Done) {
          started_ = true;
          since_ = Clock::now();
        }
      } else if (seconds_since(since_) > timeout_.count()) {
        const Events s = events_state(done_, &why);
        if (s == Events::Failed)
          abort_locked("waiting for an all-reduce: " + why);
        else if (s == Events::Pending)
          abort_locked(fmt::format(
              "an all-reduce did not complete within {} s (a worker is gone or stuck; "
              "CommunicationOptions::timeout_seconds or TAPEFLOW_COLLECTIVE_TIMEOUT)",
              timeout_.count()));
      }
    }
  }
  void abort_locked(std::string reason) {
    if (!abort_reason_.empty()) return;
    TF_LOG_ERROR("all_reduce: aborting the NCCL communicators: {}", reason);
    abort_reason_ = std::move(reason);
    for (ncclComm_t& c : comms_)
      if (c) ncclCommAbort(std::exchange(c, nullptr));
  }

  std::vector<Device> devices_;
  std::vector<ncclComm_t> comms_;
  // Across workers only (empty, and no watchdog, within one process):
  std::vector<cudaEvent_t> start_, done_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::thread watchdog_;
  bool stop_ = false, in_flight_ = false, started_ = false;
  Clock::time_point since_;
  std::chrono::duration<double> timeout_{0};
  std::string abort_reason_;
};

}  // namespace

bool nccl_built() { return true; }

std::unique_ptr<NcclComms> make_nccl_comms(const std::vector<Device>& devices,
                                           WorkerGroup* workers) {
  return std::make_unique<NcclCommsImpl>(devices, workers);
}

}  // namespace tapeflow::distribute::detail
