#include "ops/no_cuda/no_cuda.h"
#include "ops/linalg.h"

namespace tapeflow::prims {
TF_LINALG_PRIMITIVES(TF_NO_CUDA_KERNEL)
}
