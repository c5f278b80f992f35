#include "ops/no_cuda/no_cuda.h"
#include "ops/nn_grad.h"

namespace tapeflow::prims {
TF_NN_GRAD_PRIMITIVES(TF_NO_CUDA_KERNEL)
}
