// CUDA runtime glue (host code): device count, one stream per logical GPU, a caching allocator per
// logical GPU with statistics, and copies through pinned staging buffers.
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

#include "core/allocator.h"
#include "core/check.h"
#include "core/cuda/context.h"
#include "core/device_memory.h"
#include "core/hash.h"
#include "core/host_to_device.h"
#include "core/log.h"
#include "core/parallel.h"

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

int64_t physical_gpu_identity(int physical_gpu) {
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, physical_gpu) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  // The UUID's 16 bytes, hashed and kept non-negative and non-zero.
  const uint64_t h = fnv1a(std::string_view(p.uuid.bytes, sizeof p.uuid.bytes));
  return static_cast<int64_t>(h >> 1) | 1;
}

size_t gpu_memory_bytes(int logical_index) {
  if (const std::optional<int64_t> limit = logical_gpu_memory_limit(logical_index))
    return static_cast<size_t>(*limit) << 20;
  return cuda::properties(Device{DeviceType::GPU, logical_index}).totalGlobalMem;
}

namespace cuda {

void throw_cuda_error(const char* what, cudaError_t err) {
  // Clear the runtime's last error (a non-sticky one stays set otherwise, and the next kernel's
  // launch check would report it under that kernel's op).
  (void)cudaGetLastError();
  throw InternalError(fmt::format("CUDA call {} failed: {} ({})", what, cudaGetErrorString(err),
                                  static_cast<int>(err)));
}

int physical_gpu(Device device) { return physical_gpu_of(device.index); }

void set_device(Device device) {
  thread_local int current = -1;
  const int p = physical_gpu(device);
  if (p != current) {
    TF_CUDA_CHECK(cudaSetDevice(p));
    current = p;
  }
}

namespace {
struct DeviceState {
  cudaStream_t stream = nullptr;
  cudaStream_t capture = nullptr;  // created on first use
  cudaDeviceProp props{};
};
std::mutex g_state_mu;
// Leaked on purpose: streams must not be destroyed after the runtime shuts down at exit.
std::vector<std::unique_ptr<DeviceState>>* g_states = new std::vector<std::unique_ptr<DeviceState>>();

DeviceState& state(Device device) {
  std::lock_guard lock(g_state_mu);
  if (static_cast<int>(g_states->size()) <= device.index) g_states->resize(device.index + 1);
  auto& s = (*g_states)[device.index];
  if (!s) {
    auto st = std::make_unique<DeviceState>();
    const int p = physical_gpu(device);
    // The stream belongs to device p. set_device keeps the per-thread cache true (a later
    // set_device of the thread's former device must not be skipped).
    set_device(device);
    TF_CUDA_CHECK(cudaStreamCreateWithFlags(&st->stream, cudaStreamNonBlocking));
    TF_CUDA_CHECK(cudaGetDeviceProperties(&st->props, p));
    TF_LOG_DEBUG("created stream for /device:GPU:{} on {} (physical GPU {})", device.index,
                 st->props.name, p);
    s = std::move(st);
  }
  return *s;
}
}  // namespace

namespace {
// The logical GPU whose stream is replaced by its capture stream on this thread (-1: none).
thread_local int t_capture_device = -1;
}  // namespace

cudaStream_t stream(Device device) {
  if (device.is_gpu() && device.index == t_capture_device) return capture_stream(device);
  cudaStream_t s = state(device).stream;
  set_device(device);
  return s;
}

cudaStream_t capture_stream(Device device) {
  DeviceState& st = state(device);
  set_device(device);
  std::lock_guard lock(g_state_mu);
  if (!st.capture) TF_CUDA_CHECK(cudaStreamCreateWithFlags(&st.capture, cudaStreamNonBlocking));
  return st.capture;
}

bool in_capture_scope(Device device) {
  return device.is_gpu() && device.index == t_capture_device;
}

namespace {
thread_local DeferredFrees* t_deferred = nullptr;
}  // namespace

DeferredFrees* deferred_frees_of_thread(int logical_gpu) {
  return t_deferred != nullptr && t_deferred->device().index == logical_gpu ? t_deferred : nullptr;
}

void defer_free(DeferredFrees& held, void* p, size_t nbytes) {
  held.blocks_.emplace_back(p, nbytes);
  held.bytes_ += nbytes;
}

DeferredFrees::~DeferredFrees() {
  Allocator& a = allocator_for(device_);
  for (const auto& [p, n] : blocks_) a.deallocate(p, n);
}

DeferFreesScope::DeferFreesScope(DeferredFrees& held) : previous_(t_deferred) {
  t_deferred = &held;
}
DeferFreesScope::~DeferFreesScope() { t_deferred = previous_; }

namespace {
std::mutex g_preparers_mu;
std::vector<void (*)(Device)>& preparers() {
  static auto* v = new std::vector<void (*)(Device)>();
  return *v;
}
}  // namespace

void add_capture_preparer(void (*prepare)(Device device)) {
  std::lock_guard lock(g_preparers_mu);
  preparers().push_back(prepare);
}

void prepare_capture(Device device) {
  std::vector<void (*)(Device)> fns;
  {
    std::lock_guard lock(g_preparers_mu);
    fns = preparers();
  }
  CaptureScope scope(device);
  for (auto* fn : fns) fn(device);
}

CaptureScope::CaptureScope(Device device) : previous_(t_capture_device) {
  t_capture_device = device.index;
}
CaptureScope::~CaptureScope() { t_capture_device = previous_; }

void synchronize(Device device) { TF_CUDA_CHECK(cudaStreamSynchronize(stream(device))); }

void check_launch(const char* op) {
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess)
    throw InternalError(fmt::format("[{}] CUDA kernel launch failed: {} ({})", op,
                                    cudaGetErrorString(err), static_cast<int>(err)));
}

const cudaDeviceProp& properties(Device device) { return state(device).props; }

}  // namespace cuda

namespace {

// Caching allocator for one logical GPU. Blocks are rounded to 512 bytes (small) or 2 MiB
// (large, >= 1 MiB) and kept by exact rounded size; all work of the device runs on its one
// stream, so a freed block may serve the next allocation at once (stream order). When cudaMalloc
// fails, the cache is released and the allocation retried before ResourceExhaustedError.
class CudaAllocator final : public Allocator {
 public:
  explicit CudaAllocator(int logical) : logical_(logical) {
    limit_ = logical_gpu_memory_limit(logical);
  }

  static size_t round(size_t n) {
    if (n < (size_t{1} << 20)) return (n + 511) & ~size_t{511};
    const size_t big = size_t{2} << 20;
    return (n + big - 1) / big * big;
  }

  void* allocate(size_t nbytes) override {
    if (nbytes == 0) return nullptr;
    // More than the GPU has can never succeed (and round() would wrap to 0 near SIZE_MAX): no
    // cache flush, no cudaMalloc.
    const size_t total = cuda::properties(Device{DeviceType::GPU, logical_}).totalGlobalMem;
    if (nbytes > total)
      TF_THROW(ResourceExhaustedError, "gpu_allocator",
               "out of memory on /device:GPU:{}: requested {} bytes, more than the GPU's {} bytes",
               logical_, nbytes, total);
    const size_t rounded = round(nbytes);
    std::lock_guard lock(mu_);
    auto it = free_.find(rounded);
    const bool cached = it != free_.end() && !it->second.empty();
    if (limit_ && !cached) {
      // A logical device's memory limit bounds what it reserves: drop cached blocks first.
      const int64_t limit = *limit_ << 20;
      if (reserved_ + static_cast<int64_t>(rounded) > limit) release_locked();
      if (reserved_ + static_cast<int64_t>(rounded) > limit)
        TF_THROW(ResourceExhaustedError, "gpu_allocator",
                 "out of memory on /device:GPU:{}: requested {} bytes, {} bytes in use of the "
                 "{} MiB limit of this logical device",
                 logical_, nbytes, stats_.bytes_in_use, *limit_);
      it = free_.end();
    }
    ++stats_.num_allocs;
    void* p = nullptr;
    if (cached) {
      p = it->second.back();
      it->second.pop_back();
      stats_.bytes_cached -= static_cast<int64_t>(rounded);
      ++stats_.num_cache_hits;
    } else {
      cuda::set_device(Device{DeviceType::GPU, logical_});
      if (cudaMalloc(&p, rounded) != cudaSuccess) {
        cudaGetLastError();
        release_locked();
        if (cudaMalloc(&p, rounded) != cudaSuccess) {
          cudaGetLastError();
          size_t free_b = 0, total_b = 0;
          cudaMemGetInfo(&free_b, &total_b);
          --stats_.num_allocs;
          TF_THROW(ResourceExhaustedError, "gpu_allocator",
                   "out of memory on /device:GPU:{}: requested {} bytes, {} bytes free of {} "
                   "({} bytes in use by tapeflow)",
                   logical_, nbytes, free_b, total_b, stats_.bytes_in_use);
        }
      }
      reserved_ += static_cast<int64_t>(rounded);
    }
    stats_.bytes_in_use += static_cast<int64_t>(nbytes);
    stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
    return p;
  }

  void deallocate(void* p, size_t nbytes) override {
    if (!p) return;
    if (cuda::DeferredFrees* held = cuda::deferred_frees_of_thread(logical_)) {
      cuda::defer_free(*held, p, nbytes);  // still counted in use: a captured graph owns it
      return;
    }
    const size_t rounded = round(nbytes);
    std::lock_guard lock(mu_);
    stats_.bytes_in_use -= static_cast<int64_t>(nbytes);
    try {
      free_[rounded].push_back(p);
      stats_.bytes_cached += static_cast<int64_t>(rounded);
    } catch (const std::bad_alloc&) {
      // Host memory ran out (this runs in tensor destructors, which must not throw): the block
      // goes back to CUDA instead of the cache, after the queued kernels that may read it (or
      // stays reserved while this thread captures a graph, where neither is allowed).
      const Device dev{DeviceType::GPU, logical_};
      if (cuda::in_capture_scope(dev)) return;
      try {  // nothing may throw out of here (stream() may, through the device's setup)
        (void)cudaStreamSynchronize(cuda::stream(dev));
      } catch (...) {
        return;  // no safe point to free it: it stays reserved
      }
      (void)cudaFree(p);
      reserved_ -= static_cast<int64_t>(rounded);
    }
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
    std::lock_guard lock(mu_);
    release_locked();
  }

 private:
  void release_locked() {
    if (free_.empty()) return;
    const Device dev{DeviceType::GPU, logical_};
    // Not while this thread captures a CUDA graph: neither waiting for a stream nor cudaFree is
    // allowed then (the caller reports the memory as exhausted, and the capture fails).
    if (cuda::in_capture_scope(dev)) return;
    // Queued kernels may still read blocks freed by the host: wait before handing them back.
    cuda::synchronize(dev);
    for (auto& [size, blocks] : free_)
      for (void* b : blocks) {
        cudaFree(b);
        reserved_ -= static_cast<int64_t>(size);
      }
    free_.clear();
    stats_.bytes_cached = 0;
  }

  int logical_;
  std::optional<int64_t> limit_;
  mutable std::mutex mu_;
  std::map<size_t, std::vector<void*>> free_;
  int64_t reserved_ = 0;  // bytes obtained from cudaMalloc (in use + cached, rounded)
  AllocatorStats stats_;
};

// Two pinned host buffers per thread for staging copies, used in turn: the host copy of one
// chunk overlaps the DMA of the other. An event per buffer and physical GPU marks the end of the
// DMA that last used it; `pending` holds, per buffer, the event of a DMA that may still read or
// write it (a host-to-device copy that returned without waiting), to wait for before reuse.
struct PinnedStage {
  std::array<void*, 2> ptr{};
  size_t size = 0;
  std::map<int, std::array<cudaEvent_t, 2>> events;  // by physical GPU
  std::array<cudaEvent_t, 2> pending{};
  int turn = 0;  // the buffer the next host-to-device chunk uses
  ~PinnedStage() {
    for (int b = 0; b < 2; ++b) {
      if (pending[static_cast<size_t>(b)]) cudaEventSynchronize(pending[static_cast<size_t>(b)]);
    }
    for (void* p : ptr)
      if (p) cudaFreeHost(p);
    for (auto& [gpu, ev] : events)
      for (cudaEvent_t e : ev) cudaEventDestroy(e);
  }
  // Waits for the DMA that last used buffer b, if it may still run.
  void wait(int b) {
    cudaEvent_t& e = pending[static_cast<size_t>(b)];
    if (!e) return;
    TF_CUDA_CHECK(cudaEventSynchronize(e));
    e = nullptr;
  }
  // Both buffers hold at least n bytes.
  void reserve(size_t n) {
    if (n <= size) return;
    wait(0);
    wait(1);
    for (void*& p : ptr) {
      if (p) cudaFreeHost(p);
      p = nullptr;
    }
    size = 0;
    for (void*& p : ptr) TF_CUDA_CHECK(cudaMallocHost(&p, n));
    size = n;
  }
  cudaEvent_t event(Device device, int which) {
    const int gpu = cuda::physical_gpu(device);
    auto it = events.find(gpu);
    if (it == events.end()) {
      cuda::set_device(device);
      std::array<cudaEvent_t, 2> ev{};
      for (cudaEvent_t& e : ev) TF_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
      it = events.emplace(gpu, ev).first;
    }
    return it->second[static_cast<size_t>(which)];
  }
};
// 16 MiB chunks: small enough to pipeline, large enough for full DMA speed.
constexpr size_t kStageChunk = size_t{16} << 20;

// Pinned memory takes a few GB/s per writing thread: large chunks are copied by several.
void host_copy(void* dst, const void* src, size_t n) {
  auto* d = static_cast<uint8_t*>(dst);
  const auto* s = static_cast<const uint8_t*>(src);
  parallel_for(static_cast<int64_t>(n), int64_t{1} << 20, [&](int64_t b, int64_t e) {
    std::memcpy(d + b, s + b, static_cast<size_t>(e - b));
  });
}

// TAPEFLOW_ASYNC_HOST_TO_DEVICE, read once; set_async_host_to_device overrides it.
std::atomic<int>& async_h2d_flag() {
  static std::atomic<int> on{[] {
    const char* v = std::getenv("TAPEFLOW_ASYNC_HOST_TO_DEVICE");
    return v && *v && std::string_view(v) != "0" ? 1 : 0;
  }()};
  return on;
}

}  // namespace

bool async_host_to_device() {
  return async_h2d_flag().load(std::memory_order_relaxed) != 0;
}
void set_async_host_to_device(bool on) {
  async_h2d_flag().store(on ? 1 : 0);
}

Allocator& cuda_allocator(int logical_index) {
  static std::mutex mu;
  static auto* allocators = new std::vector<std::unique_ptr<CudaAllocator>>();
  std::lock_guard lock(mu);
  if (static_cast<int>(allocators->size()) <= logical_index) allocators->resize(logical_index + 1);
  auto& a = (*allocators)[logical_index];
  if (!a) a = std::make_unique<CudaAllocator>(logical_index);
  return *a;
}

// Host<->device copies go through two pinned staging buffers in 16 MiB chunks (one DMA per chunk
// on the device's stream, ordered after the kernels that produced the data; the host side of one
// chunk overlaps the DMA of the next); both return when the copy is complete, except a
// host-to-device copy with async_host_to_device(), which returns once its last chunk's DMA is
// queued (the source may then be freed: the DMA reads the staging buffer). Device<->device
// copies are queued on the source's stream and waited for, so the destination device sees the data.
void cuda_copy_bytes(void* dst, Device dst_device, const void* src, Device src_device,
                     size_t nbytes) {
  thread_local PinnedStage stage;
  if (dst_device.is_gpu() && src_device.is_gpu()) {
    cudaStream_t s = cuda::stream(src_device);
    if (dst_device.index != src_device.index) cuda::synchronize(dst_device);
    const int pd = cuda::physical_gpu(dst_device), ps = cuda::physical_gpu(src_device);
    if (pd == ps)
      TF_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToDevice, s));
    else
      TF_CUDA_CHECK(cudaMemcpyPeerAsync(dst, pd, src, ps, nbytes, s));
    if (dst_device.index != src_device.index) TF_CUDA_CHECK(cudaStreamSynchronize(s));
    return;
  }
  if (dst_device.is_gpu()) {  // host -> device
    cudaStream_t s = cuda::stream(dst_device);
    const auto* from = static_cast<const uint8_t*>(src);
    auto* to = static_cast<uint8_t*>(dst);
    // Inside a capture the copy would be recorded into the graph, reading the staging buffer at
    // every replay: there it waits as always (which fails the capture, as before).
    const bool async = async_host_to_device() && !cuda::in_capture_scope(dst_device);
    stage.reserve(std::min(kStageChunk, nbytes));
    for (size_t done = 0; done < nbytes;) {
      const size_t n = std::min(kStageChunk, nbytes - done);
      const int b = stage.turn;
      stage.turn ^= 1;
      stage.wait(b);  // the DMA that last used this buffer (chunk k-2, or an earlier copy's)
      host_copy(stage.ptr[static_cast<size_t>(b)], from + done, n);
      TF_CUDA_CHECK(cudaMemcpyAsync(to + done, stage.ptr[static_cast<size_t>(b)], n,
                                    cudaMemcpyHostToDevice, s));
      cudaEvent_t ev = stage.event(dst_device, b);
      TF_CUDA_CHECK(cudaEventRecord(ev, s));
      stage.pending[static_cast<size_t>(b)] = ev;
      done += n;
    }
    if (!async) {
      // The copy is complete (and both buffers free) when this returns.
      TF_CUDA_CHECK(cudaStreamSynchronize(s));
      stage.pending = {};
    }
    return;
  }
  // device -> host: chunk k+1's DMA runs while chunk k is copied out of its buffer (after any
  // host-to-device DMA still reading a buffer, which may be queued on another device).
  stage.wait(0);
  stage.wait(1);
  cudaStream_t s = cuda::stream(src_device);
  const auto* from = static_cast<const uint8_t*>(src);
  auto* to = static_cast<uint8_t*>(dst);
  stage.reserve(std::min(kStageChunk, nbytes));
  const size_t chunks = (nbytes + kStageChunk - 1) / kStageChunk;
  auto issue = [&](size_t k) {
    const size_t off = k * kStageChunk, n = std::min(kStageChunk, nbytes - off);
    const int b = static_cast<int>(k & 1);
    TF_CUDA_CHECK(cudaMemcpyAsync(stage.ptr[static_cast<size_t>(b)], from + off, n,
                                  cudaMemcpyDeviceToHost, s));
    TF_CUDA_CHECK(cudaEventRecord(stage.event(src_device, b), s));
  };
  for (size_t k = 0; k < std::min<size_t>(2, chunks); ++k) issue(k);
  for (size_t k = 0; k < chunks; ++k) {
    const size_t off = k * kStageChunk, n = std::min(kStageChunk, nbytes - off);
    const int b = static_cast<int>(k & 1);
    TF_CUDA_CHECK(cudaEventSynchronize(stage.event(src_device, b)));
    host_copy(to + off, stage.ptr[static_cast<size_t>(b)], n);
    if (k + 2 < chunks) issue(k + 2);
  }
}

}  // namespace tapeflow::detail
