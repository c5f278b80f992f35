// CUDA kernels of the fused optimizer updates (autograd/training_ops.h; internal). No CUDA types,
// so that host code compiled by g++ includes it; builds without CUDA link stubs
// (ops/no_cuda/training_kernels.cpp) that raise UnimplementedError. Pointers are device
// pointers on `dev`; the kernel is queued on the device's stream.
#pragma once

#include <cstdint>

#include "core/device.h"
#include "core/dtype.h"

namespace tapeflow::detail::cuda_training {

// Adam over n elements of float32 or float64 w, m, v and g, alpha read on the device (one
// element): m += (g - m) c1, v += (g g - v) c2, w -= m alpha / (sqrt(v) + eps), every operation
// correctly rounded on its own (no fused multiply-adds), as the separate eager kernels compute.
void apply_adam(Device dev, DType dt, void* w, void* m, void* v, const void* g, const void* alpha,
                double c1, double c2, double eps, int64_t n);

}  // namespace tapeflow::detail::cuda_training
