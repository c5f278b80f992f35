// The depth folding of conv3d's float64 CPU kernels and its CUDA kernels (ops/cpu/conv3d.cpp,
// ops/cuda/conv3d.cu), per element. A 3-D convolution of x (N, D, H, W, C) with filters
// (KD, KH, KW, CI, O) (CI = C / G for G groups) is the 2-D convolution of
//   X' (N * OD, H, W, KD * C): row (n, od) holds, side by side, the KD input planes that output
//      depth od reads (id = od * sd - pf + kd * dd; zeros where id is padding), channels ordered
//      (group, kd, ci) so that each group's KD * CI channels stay together;
//   F' (KH, KW, KD * CI, O): the filters with the depth tap moved next to the input channel;
// with the same height/width strides, dilations, padding and groups; its output (N * OD, OH, OW,
// O) is the 3-D output as it lies in memory. The gradients unfold: dx sums, for each input
// plane, the X' slots that copied it (kd ascending), and dfilters is dF' with the tap moved back.
// The functions are __host__ __device__ and free of CUDA headers, so the CPU suite checks them
// (tests/ops/test_conv3d.cpp).
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define TF_CONV3D_HD __host__ __device__ __forceinline__
#else
#define TF_CONV3D_HD inline
#endif

namespace tapeflow::detail {

struct Conv3DFold {
  int64_t n, d, hw, c;     // input (N, D, H * W, C)
  int64_t groups, kd;      // C = groups * ci
  int64_t od, sd, dd, pf;  // output depth, depth stride, dilation, padding before
};

// The index into x of X' element i, or -1 where it is depth padding (a zero).
TF_CONV3D_HD int64_t conv3d_fold_source(const Conv3DFold& g, int64_t i) {
  const int64_t ci = g.c / g.groups, row = g.kd * g.c;
  const int64_t q = i % row;
  int64_t r = i / row;
  const int64_t p = r % g.hw;
  r /= g.hw;
  const int64_t od = r % g.od, n = r / g.od;
  const int64_t grp = q / (g.kd * ci), rem = q % (g.kd * ci);
  const int64_t kd = rem / ci, c = rem % ci;
  const int64_t id = od * g.sd - g.pf + kd * g.dd;
  if (id < 0 || id >= g.d) return -1;
  return ((n * g.d + id) * g.hw + p) * g.c + grp * ci + c;
}

// dx element j (of x's shape) = the sum of the dX' elements add(k) is called with, kd ascending.
template <class Add>
TF_CONV3D_HD void conv3d_unfold_sources(const Conv3DFold& g, int64_t j, Add&& add) {
  const int64_t ci = g.c / g.groups, row = g.kd * g.c;
  const int64_t ch = j % g.c;
  int64_t r = j / g.c;
  const int64_t p = r % g.hw;
  r /= g.hw;
  const int64_t id = r % g.d, n = r / g.d;
  const int64_t base = (ch / ci) * g.kd * ci + ch % ci;
  for (int64_t kd = 0; kd < g.kd; ++kd) {
    const int64_t t = id + g.pf - kd * g.dd;  // = od * sd for the output depth reading id
    if (t < 0 || t % g.sd != 0 || t / g.sd >= g.od) continue;
    add(((n * g.od + t / g.sd) * g.hw + p) * row + base + kd * ci);
  }
}

// Filters (KD, KHW, CIO) <-> F' (KHW, KD, CIO), CIO = CI * O: the source index of element i of
// F' (to_folded) or of the filters (from F').
TF_CONV3D_HD int64_t conv3d_filter_source(int64_t kd, int64_t khw, int64_t cio, int64_t i,
                                          bool to_folded) {
  const int64_t co = i % cio, r = i / cio;
  if (to_folded) return ((r % kd) * khw + r / kd) * cio + co;  // i = (k2, k1, co)
  return ((r % khw) * kd + r / khw) * cio + co;                // i = (k1, k2, co)
}

}  // namespace tapeflow::detail
