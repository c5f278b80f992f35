// CUDA runtime context for kernels (internal: never included by a public header, never installed).
// Each logical GPU has one stream on its physical device; every kernel, library call and copy of
// that device is ordered on it, so the caching allocator may hand a freed block to the next op
// without waiting. Host reads synchronise the stream (detail::copy_bytes does).
#pragma once

#include <cuda_runtime.h>

#include <utility>
#include <vector>

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
// The stream that captures CUDA graphs of this device (one per device, created on first use):
// while a thread holds a CaptureScope for the device, stream(device) returns it on that thread,
// so that the capture records this thread's work only, never another thread's work on the
// device's stream.
cudaStream_t capture_stream(Device device);
// Whether this thread is inside a CaptureScope for the device (library handles switch to their
// capture twins then).
bool in_capture_scope(Device device);
// Hooks that prepare what a capture needs but must not create while capturing (library
// handles bound to the capture stream: ops/cuda/handles.cpp adds one). prepare_capture runs
// them for the device under a CaptureScope, before a capture begins.
void add_capture_preparer(void (*prepare)(Device device));
void prepare_capture(Device device);
class CaptureScope {
 public:
  explicit CaptureScope(Device device);
  ~CaptureScope();
  CaptureScope(const CaptureScope&) = delete;
  CaptureScope& operator=(const CaptureScope&) = delete;

 private:
  int previous_;
};
// Blocks of the device freed on a thread inside a DeferFreesScope are kept here instead of going
// back to the allocator's cache, until this object is destroyed: a captured CUDA graph writes
// its scratch buffers (freed while capturing) at every replay, so they must not serve other
// tensors while the graph lives. Destroy it after the graph's last launch was queued (the
// blocks then return to the cache in stream order, as any freed block).
class DeferredFrees {
 public:
  explicit DeferredFrees(Device device) : device_(device) {}
  ~DeferredFrees();
  DeferredFrees(const DeferredFrees&) = delete;
  DeferredFrees& operator=(const DeferredFrees&) = delete;
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }

 private:
  friend void defer_free(DeferredFrees& held, void* p, size_t nbytes);
  Device device_;
  std::vector<std::pair<void*, size_t>> blocks_;
  size_t bytes_ = 0;
};
// For the allocator: the thread's DeferredFrees for this logical GPU (null outside a scope).
DeferredFrees* deferred_frees_of_thread(int logical_gpu);
void defer_free(DeferredFrees& held, void* p, size_t nbytes);
class DeferFreesScope {
 public:
  explicit DeferFreesScope(DeferredFrees& held);
  ~DeferFreesScope();
  DeferFreesScope(const DeferFreesScope&) = delete;
  DeferFreesScope& operator=(const DeferFreesScope&) = delete;

 private:
  DeferredFrees* previous_;
};

// Waits for all work queued on the device's stream.
void synchronize(Device device);
// After a kernel launch: throws InternalError naming `op` if the launch failed.
void check_launch(const char* op);
// Properties of the physical device (multiprocessor count, shared memory, ...).
const cudaDeviceProp& properties(Device device);

}  // namespace tapeflow::detail::cuda
