#include "ops/cuda/handles.h"

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

// One lazily created handle per logical GPU, and inside a CaptureScope (CUDA-graph capture) a
// second one bound to the device's capture stream, so that the library's work is recorded with
// the rest of the graph. Leaked on purpose (destroying library handles after the CUDA runtime
// has shut down at exit crashes).
template <class H>
struct HandleTables {
  std::mutex mu;
  std::vector<H> main, capture;

  // create(capture) makes the handle when the device has none yet.
  template <class Create>
  H get(Device device, Create create) {
    const bool in_capture = in_capture_scope(device);
    std::lock_guard lock(mu);
    std::vector<H>& table = in_capture ? capture : main;
    if (static_cast<int>(table.size()) <= device.index) table.resize(device.index + 1, H{});
    H& h = table[device.index];
    if (!h) h = create(in_capture);
    return h;
  }
  bool has_main(Device device) {
    std::lock_guard lock(mu);
    return device.index < static_cast<int>(main.size()) && main[device.index] != H{};
  }
};

HandleTables<cublasHandle_t>& cublas_tables() {
  static auto* t = new HandleTables<cublasHandle_t>();
  return *t;
}
HandleTables<cusolverDnHandle_t>& cusolver_tables() {
  static auto* t = new HandleTables<cusolverDnHandle_t>();
  return *t;
}
HandleTables<cudnnHandle_t>& cudnn_tables() {
  static auto* t = new HandleTables<cudnnHandle_t>();
  return *t;
}

}  // namespace

namespace {

// A cuBLAS handle on stream s; `capture`: a twin for CUDA-graph capture (see HandleTables).
cublasHandle_t make_cublas(Device device, cudaStream_t s, bool capture, cublasPointerMode_t mode) {
  cublasHandle_t h = nullptr;
  TF_CUBLAS_CHECK(cublasCreate(&h));
  TF_CUBLAS_CHECK(cublasSetStream(h, s));
  TF_CUBLAS_CHECK(cublasSetPointerMode(h, mode));
  if (capture) {
    // A workspace of its own (32 MiB, what Hopper's kernels may use; kept with the handle), so
    // that cuBLAS never allocates while a graph is being captured. It comes from the device's
    // allocator, so that a logical device's memory limit counts it.
    constexpr size_t kWorkspace = size_t{32} << 20;
    static std::mutex mu;
    static auto* kept = new std::vector<Tensor>();
    Tensor w = workspace(device, kWorkspace);
    TF_CUBLAS_CHECK(cublasSetWorkspace(h, w.raw_data(), kWorkspace));
    std::lock_guard lock(mu);
    kept->push_back(std::move(w));
  }
  return h;
}

HandleTables<cublasHandle_t>& cublas_device_scalar_tables() {
  static auto* t = new HandleTables<cublasHandle_t>();
  return *t;
}

}  // namespace

cublasHandle_t cublas(Device device) {
  cudaStream_t s = stream(device);
  return cublas_tables().get(device, [&](bool capture) {
    return make_cublas(device, s, capture, CUBLAS_POINTER_MODE_HOST);
  });
}

cublasHandle_t cublas_device_scalars(Device device) {
  cudaStream_t s = stream(device);
  return cublas_device_scalar_tables().get(device, [&](bool capture) {
    return make_cublas(device, s, capture, CUBLAS_POINTER_MODE_DEVICE);
  });
}

cusolverDnHandle_t cusolver(Device device) {
  cudaStream_t s = stream(device);
  return cusolver_tables().get(device, [&](bool) {
    cusolverDnHandle_t h = nullptr;
    TF_CUSOLVER_CHECK(cusolverDnCreate(&h));
    TF_CUSOLVER_CHECK(cusolverDnSetStream(h, s));
    return h;
  });
}

std::mutex& cusolver_mutex() {
  static std::mutex mu;
  return mu;
}

std::mutex& cudnn_mutex() {
  static std::mutex mu;
  return mu;
}

cudnnHandle_t cudnn(Device device) {
  cudaStream_t s = stream(device);
  return cudnn_tables().get(device, [&](bool) {
    cudnnHandle_t h = nullptr;
    TF_CUDNN_CHECK(cudnnCreate(&h));
    TF_CUDNN_CHECK(cudnnSetStream(h, s));
    return h;
  });
}

namespace {
// The capture twins are made before a capture begins (creating a handle while capturing may
// fail): cuBLAS's always, cuSOLVER's, cuDNN's and the device-scalar cuBLAS handle's where the
// device uses them (each takes a while and memory; graphs are captured at their second call,
// after a first one ran every op).
const bool g_capture_preparer = [] {
  add_capture_preparer([](Device device) {
    cublas(device);
    if (cublas_device_scalar_tables().has_main(device)) cublas_device_scalars(device);
    if (cusolver_tables().has_main(device)) cusolver(device);
    if (cudnn_tables().has_main(device)) cudnn(device);
  });
  return true;
}();
}  // namespace

Tensor workspace(Device device, size_t nbytes) {
  return detail::empty(TensorShape{static_cast<int64_t>(nbytes)}, uint8, device);
}

}  // namespace tapeflow::detail::cuda
