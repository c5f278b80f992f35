// The CPU transpose kernel (ops/cpu/movement.cpp's, tiled and parallel) for other CPU kernels
// that move layouts around a computation (the NCHW convolutions of ops/cpu/conv.cpp and
// nn_grad.cpp).
#pragma once

#include <span>

#include "core/tensor.h"

namespace tapeflow::prims {

// out (host, allocated, of the permuted shape) = in's elements with axis i of out taken from
// axis perm[i] of in, as the Transpose primitive.
void transpose_host(const Tensor& in, Tensor& out, std::span<const int> perm);

// t (N, C, H, W) as a new (N, H, W, C) host tensor, and src (N, H, W, C) into dst (N, C, H, W).
Tensor nchw_to_nhwc(const Tensor& t);
void nhwc_to_nchw(const Tensor& src, Tensor& dst);
// Whether an (N, C, H, W) tensor holds its elements in (N, H, W, C) order already (one channel,
// or one pixel): the moves above would copy it unchanged.
inline bool nchw_is_nhwc(const TensorShape& s) {
  return s[1] == 1 || s[2] * s[3] == 1;
}

}  // namespace tapeflow::prims
