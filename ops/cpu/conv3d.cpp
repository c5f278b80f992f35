// CPU kernels of conv3d and its gradients: oneDNN's 3-D convolutions for float32 (float16 and
// bfloat16 through float32 copies; ops/cpu/conv_onednn.h); float64 folds the depth taps into
// channels (ops/cuda/conv3d_element.h) and runs the Conv2D primitive's direct loops.
#include "ops/conv3d.h"

#include <cstring>
#include <type_traits>

#include "core/check.h"
#include "core/parallel.h"
#include "ops/cpu/conv_onednn.h"
#include "ops/cuda/conv3d_element.h"
#include "ops/nn.h"
#include "ops/nn_grad.h"

namespace tapeflow::prims {

namespace {

// x (N, D, H, W, C), filters (KD, KH, KW, C / G, O), y (N, OD, OH, OW, O).
onednn::ConvGeometry geometry(const detail::Conv3DWindow& win, const TensorShape& x,
                              const TensorShape& f, const TensorShape& y) {
  onednn::ConvGeometry g;
  g.spatial = 3;
  g.n = x[0], g.c = x[4], g.o = f[4], g.groups = win.groups;
  for (int i = 0; i < 3; ++i) {
    g.in[i] = x[1 + i], g.k[i] = f[i], g.out[i] = y[1 + i];
    g.stride[i] = win.strides[i], g.dilation[i] = win.dilations[i];
    const auto w = detail::window_dim(g.in[i], g.k[i], win.strides[i], win.dilations[i], win.same);
    g.pad_before[i] = w.pad_before, g.pad_after[i] = w.pad_after;
  }
  return g;
}

// ---- depth folding (float64) ----

TensorShape folded_input_shape(const detail::Conv3DFold& g, const TensorShape& x) {
  return TensorShape{g.n * g.od, x[2], x[3], g.kd * g.c};
}
TensorShape folded_filter_shape(const TensorShape& f) {
  return TensorShape{f[1], f[2], f[0] * f[3], f[4]};
}
// The 2-D convolution of the folded tensors.
Conv2D conv2d_of(const detail::Conv3DWindow& w) {
  return Conv2D(w.strides[1], w.strides[2], w.dilations[1], w.dilations[2], w.same, w.groups);
}

template <class T>
Tensor fold_input(const detail::Conv3DFold& g, const Tensor& x) {
  Tensor xf = detail::empty(folded_input_shape(g, x.shape()), x.dtype(), Device{});
  const T* src = x.data<T>();
  T* dst = xf.data<T>();
  detail::parallel_for(xf.num_elements(), 32768, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const int64_t s = detail::conv3d_fold_source(g, i);
      dst[i] = s < 0 ? T(0) : src[s];
    }
  });
  return xf;
}

template <class T>
void unfold_input(const detail::Conv3DFold& g, const Tensor& dxf, Tensor& dx) {
  const T* src = dxf.data<T>();
  T* dst = dx.data<T>();
  detail::parallel_for(dx.num_elements(), 32768, [&](int64_t b, int64_t e) {
    for (int64_t j = b; j < e; ++j) {
      T sum = T(0);
      detail::conv3d_unfold_sources(g, j, [&](int64_t k) { sum += src[k]; });
      dst[j] = sum;
    }
  });
}

// Filters (KD, KH, KW, CI, O) <-> F' (KH, KW, KD * CI, O).
template <class T>
void move_filter_taps(const T* src, T* dst, const TensorShape& f, bool to_folded) {
  const int64_t kd = f[0], khw = f[1] * f[2], cio = f[3] * f[4];
  detail::parallel_for(kd * khw * cio, 32768, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      dst[i] = src[detail::conv3d_filter_source(kd, khw, cio, i, to_folded)];
  });
}
template <class T>
Tensor fold_filter(const Tensor& f) {
  Tensor ff = detail::empty(folded_filter_shape(f.shape()), f.dtype(), Device{});
  move_filter_taps(f.data<T>(), ff.data<T>(), f.shape(), true);
  return ff;
}

}  // namespace

void Conv3D::eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const {
  const Tensor& x = in[0];
  const Tensor& f = in[1];
  Tensor& y = out[0];
  if (y.num_elements() == 0) return;
  if (x.shape()[4] == 0) {  // no input channels: every output is an empty sum
    std::memset(y.raw_data(), 0, y.nbytes());
    return;
  }
  if (x.dtype() != float64)
    return onednn::conv_forward(geometry(win, x.shape(), f.shape(), y.shape()), x, f, y, name());
  const detail::Conv3DFold g = detail::conv3d_fold(win, x.shape(), f.shape());
  const Tensor args[2] = {fold_input<double>(g, x), fold_filter<double>(f)};
  const TensorShape ys{g.n * g.od, y.shape()[2], y.shape()[3], y.shape()[4]};
  Tensor y2[1] = {detail::view(y, ys)};
  conv2d_of(win).eval_cpu(args, y2);
}

void Conv3DBackpropInput::eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const {
  const Tensor& f = in[0];
  const Tensor& dy = in[1];
  Tensor& dx = out[0];
  if (dx.num_elements() == 0) return;
  if (dy.num_elements() == 0) {  // no output channels or no windows
    std::memset(dx.raw_data(), 0, dx.nbytes());
    return;
  }
  if (dx.dtype() != float64)
    return onednn::conv_backward_data(geometry(win, dx.shape(), f.shape(), dy.shape()), f, dy, dx,
                                      name());
  const detail::Conv3DFold g = detail::conv3d_fold(win, dx.shape(), f.shape());
  const TensorShape xs2 = folded_input_shape(g, dx.shape());
  const TensorShape& ys = dy.shape();
  const Tensor args[2] = {fold_filter<double>(f),
                          detail::view(dy, TensorShape{g.n * g.od, ys[2], ys[3], ys[4]})};
  Tensor dx2[1] = {detail::empty(xs2, dx.dtype(), Device{})};
  const Conv2D c = conv2d_of(win);
  Conv2DBackpropInput(xs2, c.stride_h, c.stride_w, c.dilation_h, c.dilation_w, c.same, c.groups)
      .eval_cpu(args, dx2);
  unfold_input<double>(g, dx2[0], dx);
}

void Conv3DBackpropFilter::eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const {
  const Tensor& x = in[0];
  const Tensor& dy = in[1];
  Tensor& df = out[0];
  if (df.num_elements() == 0) return;
  if (dy.num_elements() == 0) {  // no batch or no windows: empty sums
    std::memset(df.raw_data(), 0, df.nbytes());
    return;
  }
  if (df.dtype() != float64)
    return onednn::conv_backward_weights(geometry(win, x.shape(), df.shape(), dy.shape()), x, dy,
                                         df, name());
  const detail::Conv3DFold g = detail::conv3d_fold(win, x.shape(), df.shape());
  const TensorShape& ys = dy.shape();
  const Tensor args[2] = {fold_input<double>(g, x),
                          detail::view(dy, TensorShape{g.n * g.od, ys[2], ys[3], ys[4]})};
  const TensorShape fs2 = folded_filter_shape(df.shape());
  Tensor df2[1] = {detail::empty(fs2, df.dtype(), Device{})};
  const Conv2D c = conv2d_of(win);
  Conv2DBackpropFilter(fs2, c.stride_h, c.stride_w, c.dilation_h, c.dilation_w, c.same, c.groups)
      .eval_cpu(args, df2);
  move_filter_taps(df2[0].data<double>(), df.data<double>(), df.shape(), false);
}

}  // namespace tapeflow::prims
