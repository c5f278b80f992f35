#include "ops/sqrtm.h"

#include "ops/no_cuda/no_cuda.h"

namespace tapeflow::prims {
TF_SQRTM_PRIMITIVES(TF_NO_CUDA_KERNEL)
}  // namespace tapeflow::prims
