// oneDNN float32 convolutions of 2 or 3 spatial dimensions, forward and both gradients, for the
// CPU kernels of Conv2D / Conv3D and their gradient ops (ops/cpu/conv.cpp, nn_grad.cpp,
// conv3d.cpp). Activations are TF's channels-last layouts as they are (nhwc / ndhwc); filters
// are TF's HWIO / DHWIO (hwigo / dhwigo for groups: output channel g O/G + o' of group g).
// oneDNN picks its own weight layout and the filters are reordered to and from it on each call
// (cheap next to the convolution). Primitives are cached per geometry (a small cache: many
// shapes means a changing model) and run with a per-call scratchpad, so concurrent callers are
// safe. A oneDNN failure is an InternalError naming `op` and the geometry.
#pragma once

#include <cstdint>
#include <string>

#include "core/tensor.h"

namespace tapeflow::prims::onednn {

// The geometry of one convolution. spatial = 2: (h, w) in [0, 2); spatial = 3: (d, h, w).
struct ConvGeometry {
  int spatial = 2;
  int64_t n = 0, c = 0, o = 0, groups = 1;  // batch, input and output channels, groups
  int64_t in[3] = {};                       // input size
  int64_t k[3] = {};                        // window
  int64_t out[3] = {};                      // output size
  int64_t stride[3] = {};
  int64_t dilation[3] = {};  // TF's (1: no dilation)
  int64_t pad_before[3] = {};
  int64_t pad_after[3] = {};
  bool operator==(const ConvGeometry&) const = default;
  // "input (N=2, H=8, W=8, C=3), filters (3, 3, 3, 16), 1 groups" for error messages.
  std::string describe() const;
};

// The geometry of a 2-D convolution from a struct with the fields n, h, w, c, kh, kw, o, oh, ow,
// sh, sw, dh, dw, pt, pl, pb, pr, groups (the CPU kernels' ConvGeom).
template <class G>
ConvGeometry from_2d(const G& g) {
  ConvGeometry r;
  r.spatial = 2;
  r.n = g.n, r.c = g.c, r.o = g.o, r.groups = g.groups;
  r.in[0] = g.h, r.in[1] = g.w, r.k[0] = g.kh, r.k[1] = g.kw, r.out[0] = g.oh, r.out[1] = g.ow;
  r.stride[0] = g.sh, r.stride[1] = g.sw, r.dilation[0] = g.dh, r.dilation[1] = g.dw;
  r.pad_before[0] = g.pt, r.pad_before[1] = g.pl, r.pad_after[0] = g.pb, r.pad_after[1] = g.pr;
  return r;
}

// y (N, spatial..., O) = the convolution of x (N, spatial..., C) and f (spatial k..., C / G, O).
// float32 tensors as they are; float16 and bfloat16 through float32 copies (not float64).
void conv_forward(const ConvGeometry& g, const Tensor& x, const Tensor& f, Tensor& y,
                  const char* op);
// dx (input's shape) from f and dy (output's shape).
void conv_backward_data(const ConvGeometry& g, const Tensor& f, const Tensor& dy, Tensor& dx,
                        const char* op);
// df (filters' shape) from x and dy.
void conv_backward_weights(const ConvGeometry& g, const Tensor& x, const Tensor& dy, Tensor& df,
                           const char* op);

}  // namespace tapeflow::prims::onednn
