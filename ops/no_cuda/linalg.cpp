#include "ops/no_cuda/no_cuda.h"
#include "ops/linalg.h"

namespace tapeflow::prims {
TF_LINALG_PRIMITIVES(TF_NO_CUDA_KERNEL)
}

namespace tapeflow::detail {
void gemm_accumulate_device(bool, bool, const Tensor&, const Tensor&, double, const Tensor&,
                            const Tensor&, Tensor&) {
  TF_THROW(UnimplementedError, "variable_matmul_update", TF_NO_CUDA_REASON);
}
}  // namespace tapeflow::detail
