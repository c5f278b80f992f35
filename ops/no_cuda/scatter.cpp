#include "ops/scatter.h"

#include "ops/no_cuda/no_cuda.h"

namespace tapeflow::prims {
TF_SCATTER_PRIMITIVES(TF_NO_CUDA_KERNEL)
}  // namespace tapeflow::prims
