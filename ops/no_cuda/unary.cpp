#include "ops/no_cuda/no_cuda.h"
#include "ops/unary.h"

namespace tapeflow::prims {
TF_UNARY_PRIMITIVES(TF_NO_CUDA_KERNEL)
}  // namespace tapeflow::prims
