// jit's CUDA entry points in builds without CUDA: nothing is compiled at run time and no graph
// is captured (no GPU nodes exist in such builds).
#include "core/check.h"
#include "jit/cuda_graph.h"
#include "jit/cuda_kernels.h"

namespace tapeflow::jit {

namespace {
constexpr const char* kNoCuda = "tapeflow was built without CUDA (TAPEFLOW_CUDA=OFF or no nvcc)";
}

bool nvrtc_available(std::string* why) {
  if (why) *why = kNoCuda;
  return false;
}

std::string nvrtc_compile(const std::string&, const std::string&) {
  TF_THROW(UnavailableError, "nvrtc", "{}", kNoCuda);
}

std::shared_ptr<const CudaModule> CudaModule::compile(const std::string&, Device) {
  TF_THROW(UnavailableError, "nvrtc", "{}", kNoCuda);
}

class CudaGraphReplay {};

std::shared_ptr<CudaGraphReplay> make_cuda_graph_replay(const Graph&, std::string* why_not) {
  if (why_not) *why_not = kNoCuda;
  return nullptr;
}

bool run_cuda_graph(CudaGraphReplay&, const Graph&, std::span<const Tensor>, std::vector<Tensor>&) {
  return false;
}

CudaGraphStats cuda_graph_stats(const CudaGraphReplay&) {
  return {};
}

}  // namespace tapeflow::jit
