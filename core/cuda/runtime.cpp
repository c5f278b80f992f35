// CUDA runtime glue (host code): device count, a per-device allocator with statistics, and
// copies. The caching allocator and streams proper arrive with the CUDA backend issue.
#include <cuda_runtime.h>

#include <memory>
#include <mutex>
#include <vector>

#include "core/allocator.h"
#include "core/check.h"
#include "core/log.h"

#define TF_CUDA_CHECK(CALL)                                                                 \
  do {                                                                                      \
    cudaError_t tf_err_ = (CALL);                                                           \
    if (tf_err_ != cudaSuccess)                                                             \
      throw ::tapeflow::InternalError(fmt::format("CUDA call {} failed: {} ({})", #CALL,     \
                                                  cudaGetErrorString(tf_err_),              \
                                                  static_cast<int>(tf_err_)));              \
  } while (0)

namespace tapeflow::detail {

int physical_gpu_of(int logical_index);
std::optional<int64_t> logical_gpu_memory_limit(int logical_index);

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return n;
}

namespace {
class CudaAllocator final : public Allocator {
 public:
  explicit CudaAllocator(int logical) : logical_(logical), physical_(physical_gpu_of(logical)) {
    limit_ = logical_gpu_memory_limit(logical);
  }
  void* allocate(size_t nbytes) override {
    if (nbytes == 0) return nullptr;
    std::lock_guard lock(mu_);
    if (limit_ && stats_.bytes_in_use + static_cast<int64_t>(nbytes) > *limit_ * (1 << 20))
      TF_THROW(ResourceExhaustedError, "gpu_allocator",
               "out of memory on /device:GPU:{}: requested {} bytes, {} of the {} MiB limit in "
               "use",
               logical_, nbytes, stats_.bytes_in_use, *limit_);
    TF_CUDA_CHECK(cudaSetDevice(physical_));
    void* p = nullptr;
    if (cudaMalloc(&p, nbytes) != cudaSuccess) {
      cudaGetLastError();
      size_t free_b = 0, total_b = 0;
      cudaMemGetInfo(&free_b, &total_b);
      TF_THROW(ResourceExhaustedError, "gpu_allocator",
               "out of memory on /device:GPU:{}: requested {} bytes, {} bytes free of {}",
               logical_, nbytes, free_b, total_b);
    }
    ++stats_.num_allocs;
    stats_.bytes_in_use += static_cast<int64_t>(nbytes);
    stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
    return p;
  }
  void deallocate(void* p, size_t nbytes) override {
    if (!p) return;
    std::lock_guard lock(mu_);
    cudaSetDevice(physical_);
    cudaFree(p);
    stats_.bytes_in_use -= static_cast<int64_t>(nbytes);
  }
  AllocatorStats stats() const override {
    std::lock_guard lock(mu_);
    return stats_;
  }
  void reset_peak() override {
    std::lock_guard lock(mu_);
    stats_.peak_bytes_in_use = stats_.bytes_in_use;
  }
  void release_cached_memory() override {}

 private:
  int logical_, physical_;
  std::optional<int64_t> limit_;
  mutable std::mutex mu_;
  AllocatorStats stats_;
};
}  // namespace

Allocator& cuda_allocator(int logical_index) {
  static std::mutex mu;
  static std::vector<std::unique_ptr<CudaAllocator>>* allocators =
      new std::vector<std::unique_ptr<CudaAllocator>>();
  std::lock_guard lock(mu);
  if (static_cast<int>(allocators->size()) <= logical_index) allocators->resize(logical_index + 1);
  auto& a = (*allocators)[logical_index];
  if (!a) a = std::make_unique<CudaAllocator>(logical_index);
  return *a;
}

void cuda_copy_bytes(void* dst, Device dst_device, const void* src, Device src_device,
                     size_t nbytes) {
  cudaMemcpyKind kind = cudaMemcpyDefault;  // unified addressing works out the direction
  if (dst_device.is_gpu()) TF_CUDA_CHECK(cudaSetDevice(physical_gpu_of(dst_device.index)));
  else if (src_device.is_gpu()) TF_CUDA_CHECK(cudaSetDevice(physical_gpu_of(src_device.index)));
  TF_CUDA_CHECK(cudaMemcpy(dst, src, nbytes, kind));
}

}  // namespace tapeflow::detail
