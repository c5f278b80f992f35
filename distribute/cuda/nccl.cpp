// NCCL all-reduce between distinct GPUs (compiled only with the CUDA toolkit; linked with
// libnccl). One ncclCommInitAll per strategy; each step's calls are enqueued by one thread
// inside ncclGroupStart/End, each on its device's stream (core/cuda/context.h), so they are
// ordered after the ops that produced the buffers and before the ops that read the results.
#include <nccl.h>

#include <string>
#include <utility>

#include "core/check.h"
#include "core/cuda/context.h"
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
  }
  ~NcclCommsImpl() override {
    for (ncclComm_t c : comms_)
      if (c) ncclCommDestroy(c);  // nothing to do about a failure at teardown
  }

  void all_reduce_group(const std::vector<const std::vector<NcclCall>*>& calls) override {
    TF_ASSERT(calls.size() == comms_.size());
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
  }

 private:
  std::vector<Device> devices_;
  std::vector<ncclComm_t> comms_;
};

}  // namespace

bool nccl_built() { return true; }

std::unique_ptr<NcclComms> make_nccl_comms(const std::vector<Device>& devices,
                                           WorkerGroup* workers) {
  return std::make_unique<NcclCommsImpl>(devices, workers);
}

}  // namespace tapeflow::distribute::detail
