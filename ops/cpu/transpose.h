// Layout moves with the CPU transpose kernel (ops/cpu/movement.cpp's, tiled and parallel) for
// CPU kernels that compute in another layout (the NCHW convolution of ops/cpu/conv.cpp).
#pragma once

#include "core/tensor.h"

namespace tapeflow::prims {

// t (N, C, H, W) as a new (N, H, W, C) host tensor, and src (N, H, W, C) into dst (N, C, H, W).
Tensor nchw_to_nhwc(const Tensor& t);
void nhwc_to_nchw(const Tensor& src, Tensor& dst);
// Whether an (N, C, H, W) tensor holds its elements in (N, H, W, C) order already (one channel,
// or one pixel): the moves above would copy it unchanged.
inline bool nchw_is_nhwc(const TensorShape& s) {
  return s[1] == 1 || s[2] * s[3] == 1;
}

}  // namespace tapeflow::prims
