#include "ops/nn_grad.h"

#include "ops/no_cuda/no_cuda.h"

namespace tapeflow::prims {
TF_NN_GRAD_PRIMITIVES(TF_NO_CUDA_KERNEL)
}
