#include "ops/conv3d.h"

#include "ops/no_cuda/no_cuda.h"

namespace tapeflow::prims {
TF_CONV3D_PRIMITIVES(TF_NO_CUDA_KERNEL)
}
