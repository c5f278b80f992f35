#include "ops/special.h"

#include "ops/no_cuda/no_cuda.h"

namespace tapeflow::prims {
TF_SPECIAL_PRIMITIVES(TF_NO_CUDA_KERNEL)
}  // namespace tapeflow::prims
