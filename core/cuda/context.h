// CUDA runtime context for kernels (internal: never included by a public header, never installed).
// Each logical GPU has one stream on its physical device; every kernel, library call and copy of
// that device is ordered on it, so the caching allocator may hand a freed block to the next op
// without waiting. Host reads synchronise the stream (detail::copy_bytes does).
#pragma once

#include <cuda_runtime.h>

#include "core/device.h"
#include "core/error.h"

// Throws InternalError naming the failed call and CUDA's reason.
#define TF_CUDA_CHECK(CALL)                                                                    \
  do {                                                                                         \
    cudaError_t tf_cuda_err_ = (CALL);                                                         \
    if (tf_cuda_err_ != cudaSuccess)                                                           \
      ::tapeflow::detail::cuda::throw_cuda_error(#CALL, tf_cuda_err_);                         \
  } while (0)

namespace tapeflow::detail::cuda {

[[noreturn]] void throw_cuda_error(const char* what, cudaError_t err);

// The physical CUDA ordinal behind a logical GPU device.
int physical_gpu(Device device);
// Makes the device current on this thread (cudaSetDevice, cached per thread).
void set_device(Device device);
// The device's stream; also makes the device current on this thread.
cudaStream_t stream(Device device);
// Waits for all work queued on the device's stream.
void synchronize(Device device);
// After a kernel launch: throws InternalError naming `op` if the launch failed.
void check_launch(const char* op);
// Properties of the physical device (multiprocessor count, shared memory, ...).
const cudaDeviceProp& properties(Device device);

}  // namespace tapeflow::detail::cuda
