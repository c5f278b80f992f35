#include "ops/cuda/training_kernels.h"

#include "core/check.h"
#include "ops/no_cuda/no_cuda.h"

namespace tapeflow::detail::cuda_training {
void apply_adam(Device, DType, void*, void*, void*, const void*, const void*, double, double,
                double, int64_t) {
  TF_THROW(UnimplementedError, "apply_adam", TF_NO_CUDA_REASON);
}
}  // namespace tapeflow::detail::cuda_training
