// NVRTC compilation and launches of run-time compiled kernels (CUDA builds). libnvrtc is opened
// with dlopen on first use; modules are loaded with the runtime's context-independent library
// API (cudaLibraryLoadData), so tapeflow links no driver library.
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <nvrtc.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/cuda/context.h"
#include "core/log.h"
#include "jit/cuda_kernels.h"

namespace tapeflow::jit {

namespace {

struct Nvrtc {
  decltype(&::nvrtcCreateProgram) create = nullptr;
  decltype(&::nvrtcCompileProgram) compile = nullptr;
  decltype(&::nvrtcGetProgramLogSize) log_size = nullptr;
  decltype(&::nvrtcGetProgramLog) log = nullptr;
  decltype(&::nvrtcGetCUBINSize) cubin_size = nullptr;
  decltype(&::nvrtcGetCUBIN) cubin = nullptr;
  decltype(&::nvrtcGetPTXSize) ptx_size = nullptr;
  decltype(&::nvrtcGetPTX) ptx = nullptr;
  decltype(&::nvrtcDestroyProgram) destroy = nullptr;
  decltype(&::nvrtcGetErrorString) error_string = nullptr;
  decltype(&::nvrtcGetNumSupportedArchs) num_archs = nullptr;
  decltype(&::nvrtcGetSupportedArchs) archs = nullptr;
  std::string library;  // the file that was opened
  std::string error;    // why NVRTC is unavailable (empty when loaded)
};

const Nvrtc& nvrtc() {
  static const Nvrtc lib = [] {
    Nvrtc n;
    // The toolkit's major version first (the ABI of these calls is stable across versions).
    const std::string major = "libnvrtc.so." + std::to_string(CUDART_VERSION / 1000);
    void* h = nullptr;
    for (const std::string& name : {major, std::string("libnvrtc.so")}) {
      h = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (h) {
        n.library = name;
        break;
      }
    }
    if (!h) {
      const char* e = dlerror();
      n.error = fmt::format(
          "cannot load {} ({}); install the CUDA toolkit's NVRTC or put it on "
          "LD_LIBRARY_PATH",
          major, e ? e : "not found");
      return n;
    }
    bool ok = true;
    auto sym = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(h, name));
      if (!fn) {
        ok = false;
        n.error = fmt::format("{} lacks {}", n.library, name);
      }
    };
    sym(n.create, "nvrtcCreateProgram");
    sym(n.compile, "nvrtcCompileProgram");
    sym(n.log_size, "nvrtcGetProgramLogSize");
    sym(n.log, "nvrtcGetProgramLog");
    sym(n.cubin_size, "nvrtcGetCUBINSize");
    sym(n.cubin, "nvrtcGetCUBIN");
    sym(n.ptx_size, "nvrtcGetPTXSize");
    sym(n.ptx, "nvrtcGetPTX");
    sym(n.destroy, "nvrtcDestroyProgram");
    sym(n.error_string, "nvrtcGetErrorString");
    sym(n.num_archs, "nvrtcGetNumSupportedArchs");
    sym(n.archs, "nvrtcGetSupportedArchs");
    if (ok) TF_LOG_DEBUG("NVRTC loaded from {}", n.library);
    return n;
  }();
  return lib;
}

const Nvrtc& nvrtc_or_throw() {
  const Nvrtc& n = nvrtc();
  TF_CHECK_T(UnavailableError, n.error.empty(), "nvrtc", "{}", n.error);
  return n;
}

void check(const Nvrtc& n, nvrtcResult r, const char* what) {
  TF_CHECK_T(InternalError, r == NVRTC_SUCCESS, "nvrtc", "{} failed: {}", what, n.error_string(r));
}

class LoadedModule final : public CudaModule {
 public:
  LoadedModule(std::string image, std::string target)
      : image_(std::move(image)), target_(std::move(target)) {}

  void launch(const char* kernel, Device device, int64_t work_items, void** args) const override {
    cudaStream_t stream =
        ::tapeflow::detail::cuda::stream(device);  // also makes the device current
    const cudaKernel_t k = kernel_handle(kernel);
    constexpr int64_t kThreads = 256;
    const int64_t cap =
        int64_t{::tapeflow::detail::cuda::properties(device).multiProcessorCount} * 32;
    const int64_t blocks = std::clamp<int64_t>((work_items + kThreads - 1) / kThreads, 1, cap);
    TF_CUDA_CHECK(cudaLaunchKernel(reinterpret_cast<const void*>(k),
                                   dim3(static_cast<unsigned>(blocks)),
                                   dim3(static_cast<unsigned>(kThreads)), args, 0, stream));
  }
  const std::string& target() const override { return target_; }

 private:
  cudaKernel_t kernel_handle(const char* name) const {
    std::lock_guard lock(mu_);
    if (!library_) {
      // Left loaded for the process: unloading after the runtime shut down at exit would fail.
      TF_CUDA_CHECK(
          cudaLibraryLoadData(&library_, image_.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
    }
    auto it = kernels_.find(name);
    if (it != kernels_.end()) return it->second;
    cudaKernel_t k = nullptr;
    TF_CUDA_CHECK(cudaLibraryGetKernel(&k, library_, name));
    kernels_.emplace(name, k);
    return k;
  }

  std::string image_;  // CUBIN or NUL-terminated PTX
  std::string target_;
  mutable std::mutex mu_;
  mutable cudaLibrary_t library_ = nullptr;
  mutable std::map<std::string, cudaKernel_t, std::less<>> kernels_;
};

}  // namespace

bool nvrtc_available(std::string* why) {
  const Nvrtc& n = nvrtc();
  if (!n.error.empty() && why) *why = n.error;
  return n.error.empty();
}

std::string nvrtc_compile(const std::string& source, const std::string& arch) {
  const Nvrtc& n = nvrtc_or_throw();
  const bool ptx = arch.rfind("compute_", 0) == 0;
  TF_CHECK_ARG(ptx || arch.rfind("sm_", 0) == 0, "nvrtc",
               "the architecture '{}' is neither sm_XY nor compute_XY", arch);
  nvrtcProgram prog = nullptr;
  check(n, n.create(&prog, source.c_str(), "tapeflow_generated.cu", 0, nullptr, nullptr),
        "nvrtcCreateProgram");
  struct Destroy {
    const Nvrtc& n;
    nvrtcProgram& p;
    ~Destroy() { n.destroy(&p); }
  } destroy{n, prog};
  const std::string arch_flag = "--gpu-architecture=" + arch;
  const char* options[] = {arch_flag.c_str(), "--std=c++17", "--fmad=true"};
  const nvrtcResult r = n.compile(prog, 3, options);
  size_t log_size = 0;
  n.log_size(prog, &log_size);
  std::string log(log_size, '\0');
  if (log_size > 1) n.log(prog, log.data());
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  TF_CHECK_ARG(r == NVRTC_SUCCESS, "nvrtc", "compiling for {} failed ({}):\n{}", arch,
               n.error_string(r), log);
  std::string image;
  size_t size = 0;
  if (ptx) {
    check(n, n.ptx_size(prog, &size), "nvrtcGetPTXSize");
    image.resize(size);
    check(n, n.ptx(prog, image.data()), "nvrtcGetPTX");
  } else {
    check(n, n.cubin_size(prog, &size), "nvrtcGetCUBINSize");
    image.resize(size);
    check(n, n.cubin(prog, image.data()), "nvrtcGetCUBIN");
  }
  return image;
}

std::shared_ptr<const CudaModule> CudaModule::compile(const std::string& source, Device device) {
  TF_CHECK_ARG(device.is_gpu(), "nvrtc", "CUDA modules run on GPUs, not {}", device.to_string());
  const Nvrtc& n = nvrtc_or_throw();
  const cudaDeviceProp& props = ::tapeflow::detail::cuda::properties(device);
  const int cc = props.major * 10 + props.minor;
  int count = 0;
  check(n, n.num_archs(&count), "nvrtcGetNumSupportedArchs");
  std::vector<int> archs(static_cast<size_t>(count));
  if (count > 0) check(n, n.archs(archs.data()), "nvrtcGetSupportedArchs");
  std::string arch;
  if (std::find(archs.begin(), archs.end(), cc) != archs.end()) {
    arch = fmt::format("sm_{}", cc);
  } else {
    int below = -1;
    for (int a : archs)
      if (a <= cc) below = std::max(below, a);
    TF_CHECK_T(UnavailableError, below > 0, "nvrtc",
               "{} (compute capability {}.{}) is older than every architecture NVRTC supports",
               props.name, props.major, props.minor);
    arch = fmt::format("compute_{}", below);
  }

  static std::mutex mu;
  static auto* cache =
      new std::map<std::pair<std::string, std::string>, std::shared_ptr<const CudaModule>>();
  const auto key = std::make_pair(arch, source);
  {
    std::lock_guard lock(mu);
    auto it = cache->find(key);
    if (it != cache->end()) return it->second;
  }
  // Compiled outside the lock (tens of milliseconds); a concurrent twin compile is harmless.
  auto module = std::make_shared<LoadedModule>(
      nvrtc_compile(source, arch), arch.rfind("compute_", 0) == 0 ? arch + " (PTX)" : arch);
  std::lock_guard lock(mu);
  return cache->emplace(key, std::move(module)).first->second;
}

}  // namespace tapeflow::jit
