#include "ops/random.h"

#include "ops/no_cuda/no_cuda.h"

namespace tapeflow::prims {
TF_RANDOM_PRIMITIVES(TF_NO_CUDA_KERNEL)
}
