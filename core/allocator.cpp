#include "core/allocator.h"

#include <sys/sysinfo.h>

#include <array>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <vector>

#include "core/check.h"

namespace tapeflow {

namespace detail {
Allocator& cuda_allocator(int logical_index);  // core/cuda/ or core/no_cuda.cpp
void cuda_copy_bytes(void* dst, Device dst_device, const void* src, Device src_device,
                     size_t nbytes);
}  // namespace detail

namespace detail {
size_t host_memory_bytes() {
  static const size_t bytes = [] {
    struct sysinfo info {};
    if (sysinfo(&info) != 0) return std::numeric_limits<size_t>::max();
    const unsigned __int128 total =
        (static_cast<unsigned __int128>(info.totalram) + info.totalswap) * info.mem_unit;
    return total > std::numeric_limits<size_t>::max() ? std::numeric_limits<size_t>::max()
                                                      : static_cast<size_t>(total);
  }();
  return bytes;
}
}  // namespace detail

namespace {

// Size classes: multiples of 64 bytes up to 1 KiB, then four classes per power of two.
constexpr size_t kAlign = 64;
constexpr int kNumClasses = 4 * 64;

int size_class(size_t n, size_t* rounded) {
  if (n <= 1024) {
    size_t r = (n + kAlign - 1) / kAlign * kAlign;
    if (r == 0) r = kAlign;
    *rounded = r;
    return static_cast<int>(r / kAlign) - 1;  // 0..15
  }
  const int lg = std::bit_width(n - 1) - 1;  // 2^lg < n <= 2^(lg+1)
  const size_t base = size_t{1} << lg;
  const size_t step = base / 4;
  const size_t k = (n - base + step - 1) / step;  // 1..4
  *rounded = base + k * step;
  return 16 + (lg - 10) * 4 + static_cast<int>(k) - 1;
}

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

class CachingCpuAllocator final : public Allocator {
 public:
  ~CachingCpuAllocator() override { release_cached_memory(); }

  void* allocate(size_t nbytes) override {
    if (nbytes == 0) return nullptr;
    // More than the machine's RAM and swap together cannot succeed: refused here with the sizes
    // (malloc would refuse it too, or a sanitizer's allocator abort on it).
    if (nbytes > detail::host_memory_bytes())
      TF_THROW(ResourceExhaustedError, "cpu_allocator",
               "cannot allocate {} bytes ({:.1f} GiB) on /device:CPU:0: more than this machine's "
               "memory ({:.1f} GiB of RAM and swap)",
               nbytes, nbytes / kGiB, detail::host_memory_bytes() / kGiB);
    size_t rounded;
    const int c = size_class(nbytes, &rounded);
    {
      std::lock_guard lock(mu_);
      ++stats_.num_allocs;
      stats_.bytes_in_use += static_cast<int64_t>(nbytes);
      if (stats_.bytes_in_use > stats_.peak_bytes_in_use)
        stats_.peak_bytes_in_use = stats_.bytes_in_use;
      if (c < kNumClasses && !free_[c].empty()) {
        void* p = free_[c].back();
        free_[c].pop_back();
        stats_.bytes_cached -= static_cast<int64_t>(rounded);
        ++stats_.num_cache_hits;
        return p;
      }
    }
    void* p = std::aligned_alloc(kAlign, rounded);
    if (!p) {
      release_cached_memory();
      p = std::aligned_alloc(kAlign, rounded);
    }
    if (!p) {
      std::lock_guard lock(mu_);
      stats_.bytes_in_use -= static_cast<int64_t>(nbytes);
      TF_THROW(ResourceExhaustedError, "cpu_allocator",
               "out of memory allocating {} bytes on /device:CPU:0 ({} bytes in use)", nbytes,
               stats_.bytes_in_use);
    }
    return p;
  }

  void deallocate(void* ptr, size_t nbytes) override {
    if (!ptr) return;
    size_t rounded;
    const int c = size_class(nbytes, &rounded);
    {
      std::lock_guard lock(mu_);
      stats_.bytes_in_use -= static_cast<int64_t>(nbytes);
      if (c < kNumClasses &&
          stats_.bytes_cached + static_cast<int64_t>(rounded) <= kMaxCachedBytes) {
        // Growing the free list may fail when memory has run out (deallocate runs in tensor
        // destructors, which must not throw): the block is then freed instead of cached.
        try {
          free_[c].push_back(ptr);
          stats_.bytes_cached += static_cast<int64_t>(rounded);
          return;
        } catch (const std::bad_alloc&) {
        }
      }
    }
    std::free(ptr);
  }

  AllocatorStats stats() const override {
    std::lock_guard lock(mu_);
    return stats_;
  }
  void reset_peak() override {
    std::lock_guard lock(mu_);
    stats_.peak_bytes_in_use = stats_.bytes_in_use;
  }
  void release_cached_memory() override {
    std::array<std::vector<void*>, kNumClasses> drop;
    {
      std::lock_guard lock(mu_);
      drop.swap(free_);
      stats_.bytes_cached = 0;
    }
    for (auto& v : drop)
      for (void* p : v) std::free(p);
  }

 private:
  static constexpr int64_t kMaxCachedBytes = int64_t{2} << 30;
  mutable std::mutex mu_;
  std::array<std::vector<void*>, kNumClasses> free_;
  AllocatorStats stats_;
};

}  // namespace

Allocator& cpu_allocator() {
  // Leaked on purpose: tensors in static storage may be freed after main returns.
  static auto* a = new CachingCpuAllocator();
  return *a;
}

Allocator& allocator_for(Device device) {
  if (device.is_cpu()) return cpu_allocator();
  return detail::cuda_allocator(device.index);
}

namespace detail {
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes) {
  if (nbytes == 0) return;
  if (dst_device.is_cpu() && src_device.is_cpu()) {
    std::memcpy(dst, src, nbytes);
    return;
  }
  cuda_copy_bytes(dst, dst_device, src, src_device, nbytes);
}
}  // namespace detail

}  // namespace tapeflow
