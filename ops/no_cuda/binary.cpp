#include "ops/no_cuda/no_cuda.h"
#include "ops/binary.h"

namespace tapeflow::prims {
TF_BINARY_PRIMITIVES(TF_NO_CUDA_KERNEL)
}  // namespace tapeflow::prims
