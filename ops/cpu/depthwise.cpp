// CPU kernels of depthwise convolution and its two gradients: direct loops, split over the
// thread pool by (batch, row). Each output pixel accumulates its C * M channels in a row of the
// compute type (float for float16/bfloat16/float32, double for float64), tap by tap, so the
// innermost loop runs over contiguous channels and vectorises; the multiplier-1 case (MobileNet's)
// has its own loop without the channel / multiplier split.
// float32 with SAME or VALID padding, no dilation and strides up to kOneDnnMaxStride runs as the
// grouped convolution it is instead (C groups of one input channel and M outputs: oneDNN's
// depthwise kernels, through the Conv2D primitives' CPU kernels): the filter (KH, KW, C, M) is
// the grouped filter (KH, KW, 1, C * M) as it lies in memory, output channel c * M + m in both.
// On [32, 56, 56, 128] 3x3 (bench/bench_depthwise.cpp, 2 threads) that took the forward pass
// from 11.2 to 5.7 ms, the input gradient from 10.5 to 6.1 and the filter gradient from 10.1 to
// 8.0 ms.
#include "ops/depthwise.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

#include "core/check.h"
#include "core/parallel.h"
#include "ops/nn.h"
#include "ops/nn_grad.h"

namespace tapeflow::prims {

namespace {

using detail::DepthwiseGeom;

// acc[j] += a[j / m] * b[j] for j < c * m.
template <class A, class T>
inline void madd_channels(A* __restrict acc, const T* __restrict a, const T* __restrict b,
                          int64_t c, int64_t m) {
  if (m == 1) {
    for (int64_t j = 0; j < c; ++j) acc[j] += static_cast<A>(a[j]) * static_cast<A>(b[j]);
  } else {
    for (int64_t ci = 0; ci < c; ++ci) {
      const A av = static_cast<A>(a[ci]);
      A* __restrict ar = acc + ci * m;
      const T* __restrict br = b + ci * m;
      for (int64_t k = 0; k < m; ++k) ar[k] += av * static_cast<A>(br[k]);
    }
  }
}

// acc[ci] += sum_k a[ci * m + k] * b[ci * m + k].
template <class A, class T>
inline void dot_multipliers(A* __restrict acc, const T* __restrict a, const T* __restrict b,
                            int64_t c, int64_t m) {
  if (m == 1) {
    for (int64_t j = 0; j < c; ++j) acc[j] += static_cast<A>(a[j]) * static_cast<A>(b[j]);
  } else {
    for (int64_t ci = 0; ci < c; ++ci) {
      A s = 0;
      for (int64_t k = 0; k < m; ++k)
        s += static_cast<A>(a[ci * m + k]) * static_cast<A>(b[ci * m + k]);
      acc[ci] += s;
    }
  }
}

int64_t grain_for(int64_t work_per_row) {
  return std::max<int64_t>(1, 32768 / std::max<int64_t>(1, work_per_row));
}

template <class T>
void forward(const DepthwiseGeom& g, const T* x, const T* f, T* y) {
  using A = compute_t<T>;
  const int64_t cm = g.c * g.m;
  detail::parallel_for(g.n * g.oh, grain_for(g.ow * g.kh * g.kw * cm), [&](int64_t r0, int64_t r1) {
    std::vector<A> acc(static_cast<size_t>(cm));
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t n = r / g.oh, oh = r % g.oh;
      for (int64_t ow = 0; ow < g.ow; ++ow) {
        std::fill(acc.begin(), acc.end(), A(0));
        for (int64_t kh = 0; kh < g.kh; ++kh) {
          const int64_t ih = oh * g.sh - g.pt + kh * g.dh;
          if (ih < 0 || ih >= g.h) continue;
          for (int64_t kw = 0; kw < g.kw; ++kw) {
            const int64_t iw = ow * g.sw - g.pl + kw * g.dw;
            if (iw < 0 || iw >= g.w) continue;
            madd_channels(acc.data(), x + ((n * g.h + ih) * g.w + iw) * g.c,
                          f + (kh * g.kw + kw) * cm, g.c, g.m);
          }
        }
        T* yo = y + (r * g.ow + ow) * cm;
        for (int64_t j = 0; j < cm; ++j) yo[j] = static_cast<T>(acc[j]);
      }
    }
  });
}

// dx[n, ih, iw, c] = sum over the taps (kh, kw) whose output position (oh, ow) lands on a
// whole stride, of sum_m dy[n, oh, ow, c * M + m] * f[kh, kw, c, m]: a gather per input pixel,
// so rows split over threads without write conflicts.
template <class T>
void backprop_input(const DepthwiseGeom& g, const T* f, const T* dy, T* dx) {
  using A = compute_t<T>;
  const int64_t cm = g.c * g.m;
  detail::parallel_for(g.n * g.h, grain_for(g.w * g.kh * g.kw * cm), [&](int64_t r0, int64_t r1) {
    std::vector<A> acc(static_cast<size_t>(g.c));
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t n = r / g.h, ih = r % g.h;
      for (int64_t iw = 0; iw < g.w; ++iw) {
        std::fill(acc.begin(), acc.end(), A(0));
        for (int64_t kh = 0; kh < g.kh; ++kh) {
          const int64_t th = ih + g.pt - kh * g.dh;
          if (th < 0 || th % g.sh != 0) continue;
          const int64_t oh = th / g.sh;
          if (oh >= g.oh) continue;
          for (int64_t kw = 0; kw < g.kw; ++kw) {
            const int64_t tw = iw + g.pl - kw * g.dw;
            if (tw < 0 || tw % g.sw != 0) continue;
            const int64_t ow = tw / g.sw;
            if (ow >= g.ow) continue;
            dot_multipliers(acc.data(), dy + ((n * g.oh + oh) * g.ow + ow) * cm,
                            f + (kh * g.kw + kw) * cm, g.c, g.m);
          }
        }
        T* xo = dx + (r * g.w + iw) * g.c;
        for (int64_t c = 0; c < g.c; ++c) xo[c] = static_cast<T>(acc[c]);
      }
    }
  });
}

// df[kh, kw, c, m] = sum over (n, oh, ow) of x[n, ih, iw, c] * dy[n, oh, ow, c * M + m]. The
// output rows are split into chunks, each summing into its own filter-sized buffer; the buffers
// are added at the end (in chunk order, so the result does not depend on the thread count's
// timing).
template <class T>
void backprop_filter(const DepthwiseGeom& g, const T* x, const T* dy, T* df) {
  using A = compute_t<T>;
  const int64_t cm = g.c * g.m;
  const int64_t fsize = g.kh * g.kw * cm;
  const int64_t rows = g.n * g.oh;
  const int64_t per_row = std::max<int64_t>(1, g.ow * g.kh * g.kw * cm);
  // At most 4 chunks per thread, and none smaller than ~32K multiply-adds.
  const int64_t by_work = std::max<int64_t>(1, rows * per_row / 32768);
  const int64_t chunks =
      std::max<int64_t>(1, std::min<int64_t>({rows, by_work, int64_t{4} * detail::num_threads()}));
  std::vector<A> partial(static_cast<size_t>(chunks * fsize), A(0));
  detail::parallel_for(chunks, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t ch = c0; ch < c1; ++ch) {
      A* acc = partial.data() + ch * fsize;
      const int64_t rb = rows * ch / chunks, re = rows * (ch + 1) / chunks;
      for (int64_t r = rb; r < re; ++r) {
        const int64_t n = r / g.oh, oh = r % g.oh;
        for (int64_t ow = 0; ow < g.ow; ++ow) {
          const T* dyo = dy + (r * g.ow + ow) * cm;
          for (int64_t kh = 0; kh < g.kh; ++kh) {
            const int64_t ih = oh * g.sh - g.pt + kh * g.dh;
            if (ih < 0 || ih >= g.h) continue;
            for (int64_t kw = 0; kw < g.kw; ++kw) {
              const int64_t iw = ow * g.sw - g.pl + kw * g.dw;
              if (iw < 0 || iw >= g.w) continue;
              madd_channels(acc + (kh * g.kw + kw) * cm, x + ((n * g.h + ih) * g.w + iw) * g.c, dyo,
                            g.c, g.m);
            }
          }
        }
      }
    }
  });
  // madd_channels computed acc[j] += x[c] * dy[j] with j = c * m + k: the filter's layout.
  detail::parallel_for(fsize, 4096, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      A s = 0;
      for (int64_t ch = 0; ch < chunks; ++ch) s += partial[ch * fsize + i];
      df[i] = static_cast<T>(s);
    }
  });
}

constexpr int kOneDnnMaxStride = 16;

// The grouped Conv2D of a float32 depthwise window oneDNN takes (see the top of this file).
std::optional<Conv2D> as_grouped_conv(const detail::DepthwiseWindow& w, DType dtype,
                                      int64_t channels) {
  const bool zero_pads = w.pad_top == 0 && w.pad_bottom == 0 && w.pad_left == 0 && w.pad_right == 0;
  if (dtype != float32 || !(w.same || zero_pads) || w.dilation_h != 1 || w.dilation_w != 1 ||
      w.stride_h > kOneDnnMaxStride || w.stride_w > kOneDnnMaxStride || channels < 1 ||
      channels > INT32_MAX)
    return std::nullopt;
  return Conv2D(w.stride_h, w.stride_w, 1, 1, w.same, static_cast<int>(channels));
}

// The depthwise filter shape (KH, KW, C, M) as the grouped one (KH, KW, 1, C * M).
TensorShape grouped_filter_shape(const TensorShape& f) {
  return TensorShape{f[0], f[1], 1, f[2] * f[3]};
}

}  // namespace

void DepthwiseConv2D::eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const {
  if (out[0].num_elements() == 0) return;
  const DepthwiseGeom g = detail::depthwise_geometry(win, in[0].shape(), in[1].shape());
  if (const auto conv = as_grouped_conv(win, in[0].dtype(), g.c); conv && g.c * g.m > 0) {
    const Tensor args[2] = {in[0], detail::view(in[1], grouped_filter_shape(in[1].shape()))};
    conv->eval_cpu(args, out);
    return;
  }
  TF_DISPATCH_FLOAT_TYPES(in[0].dtype(),
                          forward(g, in[0].data<T>(), in[1].data<T>(), out[0].data<T>()));
}

void DepthwiseConv2DBackpropInput::eval_cpu(std::span<const Tensor> in,
                                            std::span<Tensor> out) const {
  if (out[0].num_elements() == 0) return;
  const DepthwiseGeom g = detail::depthwise_geometry(win, out[0].shape(), in[0].shape());
  if (const auto conv = as_grouped_conv(win, in[0].dtype(), g.c);
      conv && g.c * g.m > 0 && in[1].num_elements() > 0) {
    const Conv2DBackpropInput op(out[0].shape(), win.stride_h, win.stride_w, 1, 1, win.same,
                                 conv->groups);
    const Tensor args[2] = {detail::view(in[0], grouped_filter_shape(in[0].shape())), in[1]};
    op.eval_cpu(args, out);
    return;
  }
  TF_DISPATCH_FLOAT_TYPES(in[0].dtype(),
                          backprop_input(g, in[0].data<T>(), in[1].data<T>(), out[0].data<T>()));
}

void DepthwiseConv2DBackpropFilter::eval_cpu(std::span<const Tensor> in,
                                             std::span<Tensor> out) const {
  if (out[0].num_elements() == 0) return;
  const DepthwiseGeom g = detail::depthwise_geometry(win, in[0].shape(), out[0].shape());
  if (in[1].num_elements() == 0) {  // no outputs: every filter gradient is an empty sum
    std::memset(out[0].raw_data(), 0, out[0].nbytes());
    return;
  }
  if (const auto conv = as_grouped_conv(win, in[0].dtype(), g.c); conv && g.c * g.m > 0) {
    const TensorShape fs = grouped_filter_shape(out[0].shape());
    const Conv2DBackpropFilter op(fs, win.stride_h, win.stride_w, 1, 1, win.same, conv->groups);
    Tensor df[1] = {detail::view(out[0], fs)};
    op.eval_cpu(in, df);
    return;
  }
  TF_DISPATCH_FLOAT_TYPES(in[0].dtype(),
                          backprop_filter(g, in[0].data<T>(), in[1].data<T>(), out[0].data<T>()));
}

}  // namespace tapeflow::prims
