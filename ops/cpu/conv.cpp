// CPU conv2d: oneDNN for float32 (and for float16/bfloat16 through float32 copies;
// ops/cpu/conv_onednn.h), a direct loop for float64; both NHWC.
// NCHW (data_format "NCHW") moves the input to NHWC and the output back with the tiled transpose
// kernel: oneDNN's kernel for plain nchw memory is a gemm over an im2col, which on the 2-core AMD
// EPYC development machine (OMP_NUM_THREADS=2, bench_nn, median us, 32 images, 3x3 SAME) never
// beat the nhwc kernel between transposes: 28x28, 1 -> 32 channels: 204-206 against 203-211;
// 3 -> 32: 401-425 against 345-347; 4 -> 32: 664-784 against 395-399; 14x14, 32 -> 64: 2070
// against 1048. (Letting oneDNN choose the layout, `any`, gave nhwc and its own reorders, slower
// than the transposes: 384 us for the first case.)
#include <algorithm>
#include <cstring>

#include "core/check.h"
#include "core/parallel.h"
#include "ops/cpu/conv_onednn.h"
#include "ops/cpu/transpose.h"
#include "ops/nn.h"

namespace tapeflow::prims {

namespace {

struct ConvGeom {
  int64_t n, h, w, c;      // input
  int64_t kh, kw, o;       // filters (kh, kw, c, o)
  int64_t oh, ow;          // output
  int64_t sh, sw, dh, dw;  // strides, dilations
  int64_t pt, pl, pb, pr;  // padding top, left, bottom, right
  int64_t groups;          // filters are (kh, kw, c / groups, o)
};

// xs and ys NHWC (an NCHW convolution's shapes moved there).
ConvGeom geometry(const Conv2D& p, const TensorShape& xs, const Tensor& f, const TensorShape& ys) {
  ConvGeom g{};
  g.n = xs[0], g.h = xs[1], g.w = xs[2], g.c = xs[3];
  g.kh = f.shape()[0], g.kw = f.shape()[1], g.o = f.shape()[3];
  g.oh = ys[1], g.ow = ys[2];
  g.sh = p.stride_h, g.sw = p.stride_w, g.dh = p.dilation_h, g.dw = p.dilation_w;
  const auto dh = detail::window_dim(g.h, g.kh, p.stride_h, p.dilation_h, p.same);
  const auto dw = detail::window_dim(g.w, g.kw, p.stride_w, p.dilation_w, p.same);
  g.pt = dh.pad_before, g.pb = dh.pad_after, g.pl = dw.pad_before, g.pr = dw.pad_after;
  g.groups = p.groups;
  return g;
}

// ---- direct loop (float64) ----

// Group q's input channels [q cg, (q + 1) cg) meet filter rows [0, cg) and output channels
// [q og, (q + 1) og).
template <class T>
void conv_direct(const ConvGeom& g, const T* x, const T* f, T* y) {
  const int64_t cg = g.c / g.groups, og = g.o / g.groups;
  const int64_t rows = g.n * g.oh;
  const int64_t work = std::max<int64_t>(1, g.ow * g.kh * g.kw * cg * g.o);
  const int64_t grain = std::max<int64_t>(1, 32768 / work);
  detail::parallel_for(rows, grain, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t n = r / g.oh, oh = r % g.oh;
      T* yrow = y + r * g.ow * g.o;
      std::fill(yrow, yrow + g.ow * g.o, T(0));
      for (int64_t ow = 0; ow < g.ow; ++ow) {
        T* yo = yrow + ow * g.o;
        for (int64_t kh = 0; kh < g.kh; ++kh) {
          const int64_t ih = oh * g.sh - g.pt + kh * g.dh;
          if (ih < 0 || ih >= g.h) continue;
          for (int64_t kw = 0; kw < g.kw; ++kw) {
            const int64_t iw = ow * g.sw - g.pl + kw * g.dw;
            if (iw < 0 || iw >= g.w) continue;
            const T* xi = x + ((n * g.h + ih) * g.w + iw) * g.c;
            const T* fk = f + (kh * g.kw + kw) * cg * g.o;
            for (int64_t q = 0; q < g.groups; ++q) {
              T* yq = yo + q * og;
              for (int64_t c = 0; c < cg; ++c) {
                const T xv = xi[q * cg + c];
                const T* fr = fk + c * g.o + q * og;
                for (int64_t o = 0; o < og; ++o) yq[o] += xv * fr[o];
              }
            }
          }
        }
      }
    }
  });
}

}  // namespace

void Conv2D::eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const {
  const Tensor& x = in[0];
  const Tensor& f = in[1];
  Tensor& y = out[0];
  if (y.num_elements() == 0) return;
  const ConvGeom g = geometry(*this, layout.nhwc(x.shape()), f, layout.nhwc(y.shape()));
  if (g.c == 0) {  // no input channels: every output is an empty sum
    std::memset(y.raw_data(), 0, y.nbytes());
    return;
  }
  // NCHW runs the NHWC kernels between two transposes (see the top of this file); a tensor of one
  // channel or one pixel is in NHWC order already.
  const bool move_x = layout.channels_first && !nchw_is_nhwc(x.shape());
  const bool move_y = layout.channels_first && !nchw_is_nhwc(y.shape());
  const Tensor xn = move_x ? nchw_to_nhwc(x) : x;
  Tensor yn = move_y ? detail::empty(layout.nhwc(y.shape()), y.dtype(), Device{}) : y;
  if (x.dtype() == float64) {
    conv_direct(g, xn.data<double>(), f.data<double>(), yn.data<double>());
  } else {
    onednn::conv_forward(onednn::from_2d(g), xn, f, yn, name());
  }
  if (move_y) nhwc_to_nchw(yn, y);
}

}  // namespace tapeflow::prims
