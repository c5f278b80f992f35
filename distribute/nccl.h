// Internal to distribute/: NCCL all-reduce between distinct GPUs, behind an interface without
// CUDA types (distribute/cuda/nccl.cpp with the CUDA toolkit, distribute/no_cuda/nccl.cpp
// otherwise). One communicator set per strategy (ncclCommInitAll over its devices, or, across
// the processes of a MultiWorkerMirroredStrategy, a non-blocking ncclCommInitRankConfig for each
// local GPU with an id that worker 0 broadcasts); the calls of a step are issued by one thread
// per process inside ncclGroupStart/End, on each device's stream.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"

namespace tapeflow::distribute::detail {

class WorkerGroup;  // distribute/worker_group.h

// One all-reduce of `count` elements for one replica: device pointers on its device. `mean`:
// NCCL's average (ncclAvg: the sum divided by the number of ranks in the dtype itself, integer
// division for integers) instead of the sum.
struct NcclCall {
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;
  DType dtype;
  bool mean = false;
};

class NcclComms {
 public:
  virtual ~NcclComms() = default;
  // calls[r] are replica r's all-reduces, in the same order and sizes on every replica; they
  // are enqueued in one group on each replica device's stream (asynchronous to the host within
  // one process; across workers this returns when they completed).
  virtual void all_reduce_group(const std::vector<const std::vector<NcclCall>*>& calls) = 0;
  // Raises UnavailableError, saying why, once the communicators were aborted. Across workers
  // (non-blocking communicators; all_reduce_group then returns when its all-reduces completed)
  // a watchdog aborts them on an asynchronous NCCL error, such as a peer that is gone, or when
  // an all-reduce has not completed within the worker group's timeout; the aborted kernels end,
  // and the waiting all_reduce_group raises. Later all-reduces raise the same.
  virtual void check_healthy() const = 0;
};

// True when tapeflow was built with NCCL.
bool nccl_built();
// Communicators over the devices (logical GPUs on distinct physical GPUs); with a group of
// several workers, over every worker's devices (each worker passing as many), ranked worker by
// worker.
std::unique_ptr<NcclComms> make_nccl_comms(const std::vector<Device>& devices,
                                           WorkerGroup* workers = nullptr);

}  // namespace tapeflow::distribute::detail
