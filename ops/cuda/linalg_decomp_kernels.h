// Small CUDA kernels of the decompositions (internal): launched by ops/cuda/linalg_decomp.cpp,
// defined in ops/cuda/linalg_decomp_kernels.cu. No CUDA types here (included by host code).
#pragma once

#include <cstdint>

#include "core/device.h"
#include "core/dtype.h"

namespace tapeflow::detail::cuda_linalg {

// Zeroes, in each of `batches` row-major rows x cols matrices (float32 or float64, contiguous),
// the elements strictly above the diagonal (upper = true) or strictly below it.
void zero_triangle(Device dev, DType dt, void* x, int64_t batches, int64_t rows, int64_t cols,
                   bool upper);

}  // namespace tapeflow::detail::cuda_linalg
