// Run-time compiled CUDA kernels (internal). NVRTC is loaded on first use (dlopen of the
// toolkit's libnvrtc), so a program runs on machines without it: jit_compile then keeps the
// unfused kernels and says why once. Builds without CUDA have the same interface; every entry
// point there reports that CUDA is not built in.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/tensor.h"

namespace tapeflow::jit {

// Whether NVRTC can be used; when not, `why` (if given) receives the reason.
bool nvrtc_available(std::string* why = nullptr);

// Compiles CUDA C++ `source` with NVRTC for `arch`: "sm_90" gives a CUBIN, "compute_90" PTX.
// Needs no GPU. Throws UnavailableError without NVRTC, InvalidArgumentError with the compiler's
// log when the source does not compile.
std::string nvrtc_compile(const std::string& source, const std::string& arch);

// A compiled module: compiled once per source and GPU architecture (cached for the process),
// loaded into each device's context when it first launches there.
class CudaModule {
 public:
  virtual ~CudaModule() = default;
  // Compiles for the architecture of `device` (a GPU): a CUBIN when NVRTC knows it, else PTX
  // for the newest architecture NVRTC has below it (the driver finishes it).
  static std::shared_ptr<const CudaModule> compile(const std::string& source, Device device);
  // Launches `kernel` on the device's stream with 256 threads per block and enough blocks for
  // `work_items` (a grid-stride kernel), `args` pointing at each argument as cudaLaunchKernel
  // expects.
  virtual void launch(const char* kernel, Device device, int64_t work_items, void** args) const = 0;
  // "sm_90" or "compute_90 (PTX)": what was compiled.
  virtual const std::string& target() const = 0;
};

namespace detail {

// How each input of a fused kernel over `n` outputs is read (cuda_fused_source's periods): 0
// with n elements, else its element count (1: one element; m: a row repeated along the output).
std::vector<int64_t> fused_input_periods(std::span<const Tensor> in, int64_t n);
// Launches a module made by cuda_fused_source (kernels "tf_fused" and "tf_fused_v4") over out's
// elements: the float4 kernel when out and every full-size input are 16-byte aligned (rows and
// one-element inputs are read element by element), else the element kernel. Used by the fused
// node on GPUs (and by a test with a module run on the host).
// `period` as fused_input_periods gives it (the fused node has it already).
void launch_fused(const CudaModule& module, Device device, std::span<const Tensor> in,
                  std::span<const int64_t> period, Tensor& out);
void launch_fused(const CudaModule& module, Device device, std::span<const Tensor> in, Tensor& out);

}  // namespace detail

}  // namespace tapeflow::jit
