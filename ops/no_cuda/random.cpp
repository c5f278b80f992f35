#include "ops/no_cuda/no_cuda.h"
#include "ops/random.h"

namespace tapeflow::prims {
TF_RANDOM_PRIMITIVES(TF_NO_CUDA_KERNEL)
}
