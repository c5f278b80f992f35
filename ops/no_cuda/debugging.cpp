#include "ops/debugging.h"

#include "ops/no_cuda/no_cuda.h"

namespace tapeflow::detail {
NonFiniteCounts count_nonfinite_cuda(const Tensor&) {
  TF_THROW(UnimplementedError, "check_numerics", TF_NO_CUDA_REASON);
}
}  // namespace tapeflow::detail
