#include "ops/linalg_decomp.h"

#include "ops/no_cuda/no_cuda.h"

namespace tapeflow::prims {
TF_LINALG_DECOMP_PRIMITIVES(TF_NO_CUDA_KERNEL)
}  // namespace tapeflow::prims
