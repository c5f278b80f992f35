// Per-element bodies of the nn_grad CUDA kernels (ops/cuda/nn_grad.cu): one output element from
// its linear index. They are __host__ __device__ and free of CUDA headers, so the CPU test suite
// runs this very index arithmetic against its float64 references on machines without a GPU
// (tests/ops/test_nn_grad.cpp). T is the stored element type, A the accumulation type (float for
// the half types; static_cast<A> converts __half and __nv_bfloat16 on both sides).
#pragma once

#include <cstdint>

#include "ops/cuda/nn_grad_kernels.h"

#ifdef __CUDACC__
#define TF_NNGRAD_HD __host__ __device__ __forceinline__
#else
#define TF_NNGRAD_HD inline
#endif

namespace tapeflow::cuda::nngrad {

TF_NNGRAD_HD int64_t min64(int64_t a, int64_t b) {
  return a < b ? a : b;
}
TF_NNGRAD_HD int64_t max64(int64_t a, int64_t b) {
  return a > b ? a : b;
}

// NHWC coordinates of linear index i of an (n, h, w, c) tensor.
struct Nhwc {
  int64_t n, h, w, c;
};
TF_NNGRAD_HD Nhwc nhwc_of(int64_t i, int64_t h, int64_t w, int64_t c) {
  Nhwc p;
  p.c = i % c;
  i /= c;
  p.w = i % w;
  i /= w;
  p.h = i % h;
  p.n = i / h;
  return p;
}

// Element i of the (n, dst_h, dst_w, c) result of resize_nhwc: its source index, or -1 (zero).
TF_NNGRAD_HD int64_t resize_source(int64_t i, int64_t src_h, int64_t src_w, int64_t c,
                                   int64_t dst_h, int64_t dst_w) {
  const Nhwc p = nhwc_of(i, dst_h, dst_w, c);
  if (p.h >= src_h || p.w >= src_w) return -1;
  return ((p.n * src_h + p.h) * src_w + p.w) * c + p.c;
}

// dx[n, ih, iw, c] = sum over the taps (kh, kw) whose dy pixel exists and over the outputs o of
// c's group of dy[n, oh, ow, o] * f[kh, kw, c', o], where ih = oh * sh - pt + kh * dh (likewise
// w) and c' = c - q cg is c's place in its group q (cg = c / groups channels per group).
template <class A, class T>
TF_NNGRAD_HD A conv_input_element(const ConvGeom& g, const T* f, const T* dy, int64_t i) {
  const Nhwc p = nhwc_of(i, g.h, g.w, g.c);
  const int64_t cg = g.c / g.groups, og = g.o / g.groups;
  const int64_t q = p.c / cg, cl = p.c - q * cg;
  A acc = A(0);
  for (int64_t kh = 0; kh < g.kh; ++kh) {
    const int64_t th = p.h + g.pt - kh * g.dh;
    if (th < 0 || th % g.sh != 0 || th / g.sh >= g.oh) continue;
    const int64_t oh = th / g.sh;
    for (int64_t kw = 0; kw < g.kw; ++kw) {
      const int64_t tw = p.w + g.pl - kw * g.dw;
      if (tw < 0 || tw % g.sw != 0 || tw / g.sw >= g.ow) continue;
      const int64_t ow = tw / g.sw;
      const T* dyv = dy + ((p.n * g.oh + oh) * g.ow + ow) * g.o + q * og;
      const T* fr = f + ((kh * g.kw + kw) * cg + cl) * g.o + q * og;
      for (int64_t o = 0; o < og; ++o) acc += static_cast<A>(fr[o]) * static_cast<A>(dyv[o]);
    }
  }
  return acc;
}

// df[kh, kw, c', o] (element i of HWIO, c' < cg = c / groups) = sum over (n, oh, ow) with a valid
// input pixel of x * dy, x at channel c' of output o's group.
template <class A, class T>
TF_NNGRAD_HD A conv_filter_element(const ConvGeom& g, const T* x, const T* dy, int64_t i) {
  const int64_t cg = g.c / g.groups, og = g.o / g.groups;
  const Nhwc p = nhwc_of(i, g.kw, cg, g.o);  // (kh, kw, c', o) read as (n, h, w, c)
  const int64_t kh = p.n, kw = p.h, o = p.c, c = o / og * cg + p.w;
  A acc = A(0);
  for (int64_t n = 0; n < g.n; ++n) {
    for (int64_t oh = 0; oh < g.oh; ++oh) {
      const int64_t ih = oh * g.sh - g.pt + kh * g.dh;
      if (ih < 0 || ih >= g.h) continue;
      for (int64_t ow = 0; ow < g.ow; ++ow) {
        const int64_t iw = ow * g.sw - g.pl + kw * g.dw;
        if (iw < 0 || iw >= g.w) continue;
        acc += static_cast<A>(x[((n * g.h + ih) * g.w + iw) * g.c + c]) *
               static_cast<A>(dy[((n * g.oh + oh) * g.ow + ow) * g.o + o]);
      }
    }
  }
  return acc;
}

// The dy rows [lo, hi] whose windows [o * s - p, o * s - p + k) cover input row i (empty when
// lo > hi).
struct Range {
  int64_t lo, hi;
};
TF_NNGRAD_HD Range covering(int64_t i, int64_t k, int64_t s, int64_t p, int64_t out) {
  const int64_t a = i + p - k + 1;
  return {a <= 0 ? 0 : (a + s - 1) / s, min64((i + p) / s, out - 1)};
}

// Each window sends its dy to its FIRST maximal valid element in row-major order (the CPU
// kernel's and TF's rule; `best < v` keeps the first of equal values and a leading NaN): the dx
// element re-derives the argmax of every window that covers it.
template <class A, class T>
TF_NNGRAD_HD A max_pool_grad_element(const PoolGeom& g, const T* x, const T* dy, int64_t i) {
  const Nhwc p = nhwc_of(i, g.h, g.w, g.c);
  const T* xn = x + p.n * g.h * g.w * g.c + p.c;
  const Range rh = covering(p.h, g.kh, g.sh, g.pt, g.oh);
  const Range rw = covering(p.w, g.kw, g.sw, g.pl, g.ow);
  A acc = A(0);
  for (int64_t oh = rh.lo; oh <= rh.hi; ++oh) {
    const int64_t h0 = oh * g.sh - g.pt;
    const int64_t hs = max64(h0, 0), he = min64(h0 + g.kh, g.h);
    for (int64_t ow = rw.lo; ow <= rw.hi; ++ow) {
      const int64_t w0 = ow * g.sw - g.pl;
      const int64_t ws = max64(w0, 0), we = min64(w0 + g.kw, g.w);
      // Every window holds a valid element (TF's SAME padding is smaller than the window).
      A best = static_cast<A>(xn[(hs * g.w + ws) * g.c]);
      int64_t bh = hs, bw = ws;
      for (int64_t hh = hs; hh < he; ++hh) {
        for (int64_t ww = ws; ww < we; ++ww) {
          const A v = static_cast<A>(xn[(hh * g.w + ww) * g.c]);
          if (best < v) {
            best = v;
            bh = hh;
            bw = ww;
          }
        }
      }
      if (bh == p.h && bw == p.w)
        acc += static_cast<A>(dy[((p.n * g.oh + oh) * g.ow + ow) * g.c + p.c]);
    }
  }
  return acc;
}

// Element i of max_pool2d_grad_grad's (n, oh, ow, c) output: g at the window's argmax, by
// max_pool_grad_element's rule (the first maximal valid element; a leading NaN wins).
template <class A, class T>
TF_NNGRAD_HD A max_pool_grad_grad_element(const PoolGeom& gm, const T* x, const T* g, int64_t i) {
  const Nhwc p = nhwc_of(i, gm.oh, gm.ow, gm.c);
  const int64_t base = p.n * gm.h * gm.w * gm.c + p.c;
  const int64_t h0 = p.h * gm.sh - gm.pt, w0 = p.w * gm.sw - gm.pl;
  const int64_t hs = max64(h0, 0), he = min64(h0 + gm.kh, gm.h);
  const int64_t ws = max64(w0, 0), we = min64(w0 + gm.kw, gm.w);
  // Every window holds a valid element (TF's SAME padding is smaller than the window).
  int64_t at = base + (hs * gm.w + ws) * gm.c;
  A best = static_cast<A>(x[at]);
  for (int64_t hh = hs; hh < he; ++hh) {
    for (int64_t ww = ws; ww < we; ++ww) {
      const int64_t k = base + (hh * gm.w + ww) * gm.c;
      const A v = static_cast<A>(x[k]);
      if (best < v) {
        best = v;
        at = k;
      }
    }
  }
  return static_cast<A>(g[at]);
}

// dx = the sum of dy / (the window's count of valid elements) over the windows covering it.
template <class A, class T>
TF_NNGRAD_HD A avg_pool_grad_element(const PoolGeom& g, const T* dy, int64_t i) {
  const Nhwc p = nhwc_of(i, g.h, g.w, g.c);
  const Range rh = covering(p.h, g.kh, g.sh, g.pt, g.oh);
  const Range rw = covering(p.w, g.kw, g.sw, g.pl, g.ow);
  A acc = A(0);
  for (int64_t oh = rh.lo; oh <= rh.hi; ++oh) {
    const int64_t h0 = oh * g.sh - g.pt;
    const int64_t ch = min64(h0 + g.kh, g.h) - max64(h0, 0);
    for (int64_t ow = rw.lo; ow <= rw.hi; ++ow) {
      const int64_t w0 = ow * g.sw - g.pl;
      const int64_t cw = min64(w0 + g.kw, g.w) - max64(w0, 0);
      acc +=
          static_cast<A>(dy[((p.n * g.oh + oh) * g.ow + ow) * g.c + p.c]) / static_cast<A>(ch * cw);
    }
  }
  return acc;
}

}  // namespace tapeflow::cuda::nngrad
