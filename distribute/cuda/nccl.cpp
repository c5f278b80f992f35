// NCCL all-reduce between distinct GPUs (compiled only with the CUDA toolkit; linked with
// libnccl). One ncclCommInitAll per strategy; each step's calls are enqueued by one thread
// inside ncclGroupStart/End, each on its device's stream (core/cuda/context.h), so they are
// ordered after the ops that produced the buffers and before the ops that read the results.
// Across workers a watchdog thread aborts the communicators when NCCL reports an asynchronous
// error or enqueued work outlives the group's timeout, so that a lost peer fails the step in
// bounded time instead of leaving the host waiting for a stream forever.
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
    // joins as rank (worker * local + i) of (workers * local).
    ncclUniqueId id{};
    if (workers->rank() == 0) TF_NCCL_CHECK(ncclGetUniqueId(&id));
    workers->broadcast(&id, sizeof(id), "NcclAllReduce");
    const int local = static_cast<int>(devices.size());
    const int nranks = local * workers->size();
    TF_NCCL_CHECK(ncclGroupStart());
    ncclResult_t first = ncclSuccess;
    for (int i = 0; i < local && first == ncclSuccess; ++i) {
      tapeflow::detail::cuda::set_device(devices[static_cast<size_t>(i)]);
      first = ncclCommInitRank(&comms_[static_cast<size_t>(i)], nranks, id,
                               workers->rank() * local + i);
    }
    const ncclResult_t end = ncclGroupEnd();
    if (first != ncclSuccess || end != ncclSuccess) {
      // The destructor does not run for a failed constructor: abort what was made (abort, not
      // destroy, which would wait for peers that may never join).
      for (ncclComm_t& c : comms_)
        if (c) ncclCommAbort(std::exchange(c, nullptr));
    }
    TF_NCCL_CHECK(first);
    TF_NCCL_CHECK(end);
    // One event per device marks the end of the last enqueued group (for the watchdog).
    done_.resize(devices.size(), nullptr);
    for (size_t i = 0; i < devices.size(); ++i) {
      tapeflow::detail::cuda::set_device(devices[i]);
      if (cudaEventCreateWithFlags(&done_[i], cudaEventDisableTiming) != cudaSuccess) {
        cudaGetLastError();
        for (ncclComm_t& c : comms_)
          if (c) ncclCommAbort(std::exchange(c, nullptr));
        destroy_events();
        TF_THROW(InternalError, "all_reduce", "could not create a CUDA event on {}",
                 devices[i].to_string());
      }
    }
    timeout_ = std::chrono::duration<double>(workers->timeout_seconds());
    watchdog_ = std::thread([this] { watch(); });
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
    // Work still in flight (a step that failed on the host after enqueueing, a lost peer) would
    // make ncclCommDestroy wait for it: abort then.
    const bool idle = !aborted() && work_done();
    for (ncclComm_t c : comms_) {
      if (!c) continue;
      if (idle) ncclCommDestroy(c);  // nothing to do about a failure at teardown
      else ncclCommAbort(c);
    }
    destroy_events();
  }

  void all_reduce_group(const std::vector<const std::vector<NcclCall>*>& calls) override {
    TF_ASSERT(calls.size() == comms_.size());
    // The watchdog aborts (and clears comms_) under mu_: hold it while enqueueing.
    std::unique_lock lock(mu_);
    throw_if_aborted();
    // The streams first: cuda::stream() may initialise a device, which is not allowed inside a
    // group.
    std::vector<cudaStream_t> streams;
    for (Device d : devices_) streams.push_back(tapeflow::detail::cuda::stream(d));
    TF_NCCL_CHECK(ncclGroupStart());
    ncclResult_t first = ncclSuccess;
    for (size_t r = 0; r < calls.size() && first == ncclSuccess; ++r) {
      for (const NcclCall& c : *calls[r]) {
        first = ncclAllReduce(c.send, c.recv, c.count, nccl_type(c.dtype),
                              c.mean ? ncclAvg : ncclSum, comms_[r], streams[r]);
        if (first != ncclSuccess) break;
      }
    }
    // The group is always closed, also after a failed call.
    const ncclResult_t end = ncclGroupEnd();
    TF_NCCL_CHECK(first);
    TF_NCCL_CHECK(end);
    if (!done_.empty()) {
      for (size_t r = 0; r < done_.size(); ++r) {
        tapeflow::detail::cuda::set_device(devices_[r]);
        if (cudaEventRecord(done_[r], streams[r]) != cudaSuccess) cudaGetLastError();
      }
      if (!in_flight_) since_ = Clock::now();  // the oldest unfinished group's time counts
      in_flight_ = true;
    }
  }

  void check_healthy() const override {
    std::lock_guard lock(mu_);
    throw_if_aborted();
  }

 private:
  using Clock = std::chrono::steady_clock;

  void throw_if_aborted() const {
    if (!abort_reason_.empty())
      TF_THROW(UnavailableError, "all_reduce", "the NCCL communicators were aborted: {}",
               abort_reason_);
  }
  bool aborted() const {
    std::lock_guard lock(mu_);
    return !abort_reason_.empty();
  }
  // Whether every device's last enqueued group has completed (true without events).
  bool work_done() const {
    for (cudaEvent_t e : done_) {
      const cudaError_t q = cudaEventQuery(e);
      if (q == cudaErrorNotReady) return false;
      if (q != cudaSuccess) cudaGetLastError();
    }
    return true;
  }
  void destroy_events() {
    for (cudaEvent_t& e : done_)
      if (e) cudaEventDestroy(std::exchange(e, nullptr));
  }

  // The watchdog: every 100 ms, NCCL's asynchronous errors (a peer's connection lost, ...) and
  // the age of the work in flight; either aborts every communicator of this worker, which ends
  // their kernels. The step then fails with UnavailableError (check_healthy, the next
  // all-reduce), and the worker's failure reaches the others through the worker group.
  void watch() {
    std::unique_lock lock(mu_);
    while (!stop_ && abort_reason_.empty()) {
      wake_.wait_for(lock, std::chrono::milliseconds(100));
      if (stop_) break;
      for (size_t i = 0; i < comms_.size() && abort_reason_.empty(); ++i) {
        ncclResult_t async = ncclSuccess;
        if (ncclCommGetAsyncError(comms_[i], &async) != ncclSuccess) continue;
        if (async != ncclSuccess && async != ncclInProgress)
          abort_locked(fmt::format("NCCL reported an asynchronous error on {}: {} ({})",
                                   devices_[i].to_string(), ncclGetErrorString(async),
                                   ncclGetLastError(comms_[i])));
      }
      if (!abort_reason_.empty() || !in_flight_) continue;
      if (work_done()) {
        in_flight_ = false;
      } else if (Clock::now() - since_ > timeout_) {
        abort_locked(fmt::format(
            "an all-reduce did not complete within {} s (a worker is gone or stuck; "
            "CommunicationOptions::timeout_seconds or TAPEFLOW_COLLECTIVE_TIMEOUT)",
            timeout_.count()));
      }
    }
  }
  void abort_locked(std::string reason) {
    TF_LOG_ERROR("all_reduce: aborting the NCCL communicators: {}", reason);
    abort_reason_ = std::move(reason);
    for (ncclComm_t& c : comms_)
      if (c) ncclCommAbort(std::exchange(c, nullptr));
  }

  std::vector<Device> devices_;
  std::vector<ncclComm_t> comms_;
  // Across workers only (empty and no thread otherwise):
  std::vector<cudaEvent_t> done_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::thread watchdog_;
  bool stop_ = false, in_flight_ = false;
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
