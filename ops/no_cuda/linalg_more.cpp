#include "ops/linalg_more.h"

#include "ops/no_cuda/no_cuda.h"

namespace tapeflow::prims {
TF_LINALG_MORE_PRIMITIVES(TF_NO_CUDA_KERNEL)
}
