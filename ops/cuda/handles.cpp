#include "ops/cuda/handles.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "core/check.h"
#include "core/cuda/context.h"

namespace tapeflow::detail::cuda {

void throw_library_error(const char* call, const char* library, int status, const char* reason) {
  throw InternalError(fmt::format("{} call {} failed with status {}{}{}", library, call, status,
                                  *reason ? ": " : "", reason));
}

namespace {

// One lazily created handle per logical GPU, leaked on purpose (destroying library handles
// after the CUDA runtime has shut down at exit crashes).
template <class H, class Create>
H handle_for(Device device, std::vector<H>& table, std::mutex& mu, Create create) {
  std::lock_guard lock(mu);
  if (static_cast<int>(table.size()) <= device.index) table.resize(device.index + 1, H{});
  H& h = table[device.index];
  if (!h) h = create();
  return h;
}

}  // namespace

// Inside a CaptureScope (CUDA-graph capture) the calls go to a second handle per device bound
// to the capture stream, so that the library's work is recorded with the rest of the graph.
cublasHandle_t cublas(Device device) {
  static std::mutex mu;
  static auto* table = new std::vector<cublasHandle_t>();
  static auto* capture_table = new std::vector<cublasHandle_t>();
  cudaStream_t s = stream(device);
  const bool capture = in_capture_scope(device);
  return handle_for(device, capture ? *capture_table : *table, mu, [&] {
    cublasHandle_t h = nullptr;
    TF_CUBLAS_CHECK(cublasCreate(&h));
    TF_CUBLAS_CHECK(cublasSetStream(h, s));
    if (capture) {
      // A workspace of its own (32 MiB, what Hopper's kernels may use; leaked with the handle),
      // so that cuBLAS never allocates while a graph is being captured.
      constexpr size_t kWorkspace = size_t{32} << 20;
      void* w = nullptr;
      TF_CUDA_CHECK(cudaMalloc(&w, kWorkspace));
      TF_CUBLAS_CHECK(cublasSetWorkspace(h, w, kWorkspace));
    }
    return h;
  });
}


cusolverDnHandle_t cusolver(Device device) {
  static std::mutex mu;
  static auto* table = new std::vector<cusolverDnHandle_t>();
  static auto* capture_table = new std::vector<cusolverDnHandle_t>();
  cudaStream_t s = stream(device);
  return handle_for(device, in_capture_scope(device) ? *capture_table : *table, mu, [&] {
    cusolverDnHandle_t h = nullptr;
    TF_CUSOLVER_CHECK(cusolverDnCreate(&h));
    TF_CUSOLVER_CHECK(cusolverDnSetStream(h, s));
    return h;
  });
}

namespace {
// Logical GPUs (index below 64) whose cuDNN handle exists: captures make the cuDNN twin only
// where cuDNN is in use (cudnnCreate takes a while and memory).
std::atomic<uint64_t> g_cudnn_devices{0};
}  // namespace

cudnnHandle_t cudnn(Device device) {
  static std::mutex mu;
  static auto* table = new std::vector<cudnnHandle_t>();
  static auto* capture_table = new std::vector<cudnnHandle_t>();
  cudaStream_t s = stream(device);
  const bool capture = in_capture_scope(device);
  return handle_for(device, capture ? *capture_table : *table, mu, [&] {
    cudnnHandle_t h = nullptr;
    TF_CUDNN_CHECK(cudnnCreate(&h));
    TF_CUDNN_CHECK(cudnnSetStream(h, s));
    if (!capture && device.index < 64) g_cudnn_devices |= uint64_t{1} << device.index;
    return h;
  });
}

namespace {
// The capture twins are made before a capture begins (creating a handle while capturing may
// fail): cuBLAS's always, cuDNN's where the device has used cuDNN (graphs are captured at their
// second call, after a first one ran every op).
const bool g_capture_preparer = [] {
  add_capture_preparer([](Device device) {
    cublas(device);
    if (device.index < 64 && ((g_cudnn_devices.load() >> device.index) & 1) != 0) cudnn(device);
  });
  return true;
}();
}  // namespace

Tensor workspace(Device device, size_t nbytes) {
  return detail::empty(TensorShape{static_cast<int64_t>(nbytes)}, uint8, device);
}

}  // namespace tapeflow::detail::cuda
