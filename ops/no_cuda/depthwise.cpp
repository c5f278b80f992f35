#include "ops/depthwise.h"

#include "ops/no_cuda/no_cuda.h"

namespace tapeflow::prims {
TF_DEPTHWISE_PRIMITIVES(TF_NO_CUDA_KERNEL)
}
