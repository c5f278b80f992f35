// Defines STRUCT::eval_cuda as an UnimplementedError naming the op, for the families whose
// CUDA kernels do not exist in this build (all of them without the toolkit).
#pragma once

#include "core/check.h"
#include "ops/op_list.h"

#ifdef TAPEFLOW_HAS_CUDA
#define TF_NO_CUDA_REASON "has no CUDA kernel yet"
#else
#define TF_NO_CUDA_REASON \
  "has no CUDA kernel: this tapeflow was built without CUDA (TAPEFLOW_CUDA=OFF or no nvcc)"
#endif

#define TF_NO_CUDA_KERNEL(STRUCT)                                                   \
  void STRUCT::eval_cuda(std::span<const Tensor>, std::span<Tensor>) const {        \
    TF_THROW(UnimplementedError, name(), TF_NO_CUDA_REASON);                        \
  }
