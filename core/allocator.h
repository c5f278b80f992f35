// Allocators own device memory. The CPU allocator caches freed blocks by size class so that a
// hot loop reuses buffers instead of page-faulting fresh ones (about 1 us per 4 KiB page here).
// All allocators are thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/device.h"

namespace tapeflow {

struct AllocatorStats {
  int64_t bytes_in_use = 0;       // requested bytes of live allocations
  int64_t peak_bytes_in_use = 0;  // high-water mark of bytes_in_use since the last reset
  int64_t bytes_cached = 0;       // freed bytes kept for reuse
  int64_t num_allocs = 0;         // allocations served
  int64_t num_cache_hits = 0;     // allocations served from the cache
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  // Never returns null for nbytes > 0; throws ResourceExhaustedError when memory runs out.
  virtual void* allocate(size_t nbytes) = 0;
  virtual void deallocate(void* ptr, size_t nbytes) = 0;
  virtual AllocatorStats stats() const = 0;
  virtual void reset_peak() = 0;
  // Returns cached blocks to the system.
  virtual void release_cached_memory() = 0;
};

// The process-wide CPU allocator (64-byte aligned blocks), shared by all logical CPU devices.
Allocator& cpu_allocator();
// The allocator of a device.
Allocator& allocator_for(Device device);

namespace detail {
// Copies between devices; CPU<->CPU is memcpy, anything touching a GPU goes through CUDA.
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes);
// This machine's RAM plus swap in bytes (read once): no host allocation larger can succeed.
size_t host_memory_bytes();
}  // namespace detail

}  // namespace tapeflow
