#include "ops/no_cuda/no_cuda.h"
#include "ops/nn.h"

namespace tapeflow::prims {
TF_NN_PRIMITIVES(TF_NO_CUDA_KERNEL)
}
