// CPU max and average pooling: direct NHWC loops, vectorised over channels. Each output pixel
// reduces the valid (non-padded) part of its window, so SAME padding never contributes: max
// takes the largest valid element and avg divides by the number of valid elements, as TF.
// (bench/bench_nn.cpp compares this loop with oneDNN's pooling.)
#include <algorithm>
#include <type_traits>
#include <vector>

#include "core/parallel.h"
#include "ops/nn.h"

namespace tapeflow::prims {

namespace {

struct PoolGeom {
  int64_t n, h, w, c, oh, ow;
  int64_t kh, kw, sh, sw, pt, pl;
};

template <class P>
PoolGeom geometry(const P& p, const Tensor& x, const Tensor& y) {
  PoolGeom g{};
  g.n = x.shape()[0], g.h = x.shape()[1], g.w = x.shape()[2], g.c = x.shape()[3];
  g.oh = y.shape()[1], g.ow = y.shape()[2];
  g.kh = p.k_h, g.kw = p.k_w, g.sh = p.stride_h, g.sw = p.stride_w;
  g.pt = detail::window_dim(g.h, g.kh, p.stride_h, 1, p.same).pad_before;
  g.pl = detail::window_dim(g.w, g.kw, p.stride_w, 1, p.same).pad_before;
  return g;
}

// A = accumulation type: T itself for max over float32/float64/ints, float for the half types,
// and float/double for averages.
template <class T, bool kMax>
void pool(const PoolGeom& g, const T* x, T* y) {
  using A = compute_t<T>;
  constexpr bool kDirect = std::is_same_v<A, T>;  // accumulate in the output row itself
  const int64_t rows = g.n * g.oh;
  const int64_t work = std::max<int64_t>(1, g.ow * g.kh * g.kw * g.c);
  const int64_t grain = std::max<int64_t>(1, 65536 / work);
  detail::parallel_for(rows, grain, [&](int64_t r0, int64_t r1) {
    std::vector<A> acc_buf(kDirect ? 0 : static_cast<size_t>(g.c));
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t n = r / g.oh, oh = r % g.oh;
      const int64_t h0 = oh * g.sh - g.pt;
      const int64_t hs = std::max<int64_t>(h0, 0), he = std::min<int64_t>(h0 + g.kh, g.h);
      const T* xn = x + n * g.h * g.w * g.c;
      for (int64_t ow = 0; ow < g.ow; ++ow) {
        const int64_t w0 = ow * g.sw - g.pl;
        const int64_t ws = std::max<int64_t>(w0, 0), we = std::min<int64_t>(w0 + g.kw, g.w);
        T* yo = y + (r * g.ow + ow) * g.c;
        A* acc;
        if constexpr (kDirect) acc = yo;
        else acc = acc_buf.data();
        // Windows always hold at least one valid element (TF's SAME padding is < the window).
        const T* first = xn + (hs * g.w + ws) * g.c;
        if constexpr (kMax) {
          for (int64_t c = 0; c < g.c; ++c) acc[c] = static_cast<A>(first[c]);
        } else {
          for (int64_t c = 0; c < g.c; ++c) acc[c] = A(0);
        }
        for (int64_t ih = hs; ih < he; ++ih) {
          for (int64_t iw = ws; iw < we; ++iw) {
            const T* xi = xn + (ih * g.w + iw) * g.c;
            if constexpr (kMax) {
              for (int64_t c = 0; c < g.c; ++c) {
                const A v = static_cast<A>(xi[c]);
                acc[c] = acc[c] < v ? v : acc[c];
              }
            } else {
              for (int64_t c = 0; c < g.c; ++c) acc[c] += static_cast<A>(xi[c]);
            }
          }
        }
        if constexpr (!kMax) {
          const A count = static_cast<A>((he - hs) * (we - ws));
          for (int64_t c = 0; c < g.c; ++c) acc[c] /= count;
        }
        if constexpr (!kDirect) {
          for (int64_t c = 0; c < g.c; ++c) yo[c] = T(acc[c]);
        }
      }
    }
  });
}

}  // namespace

void MaxPool2D::eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const {
  if (out[0].num_elements() == 0) return;
  const PoolGeom g = geometry(*this, in[0], out[0]);
  TF_DISPATCH_ALL_TYPES(in[0].dtype(), {
    if constexpr (!std::is_same_v<T, bool>) pool<T, true>(g, in[0].data<T>(), out[0].data<T>());
  });
}

void AvgPool2D::eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const {
  if (out[0].num_elements() == 0) return;
  const PoolGeom g = geometry(*this, in[0], out[0]);
  TF_DISPATCH_FLOAT_TYPES(in[0].dtype(), pool<T, false>(g, in[0].data<T>(), out[0].data<T>()));
}

}  // namespace tapeflow::prims
