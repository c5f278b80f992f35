// CPU gradient kernels of conv2d and pooling.
//  - Conv2DBackpropInput / Conv2DBackpropFilter: oneDNN's convolution_backward_data /
//    convolution_backward_weights for float32 (float16/bfloat16 through float32 copies, as the
//    forward kernel; ops/cpu/conv_onednn.h), direct loops for float64. oneDNN takes TF's
//    asymmetric SAME padding as separate left/right pads.
//  - AvgPool2DGrad: oneDNN's pooling_backward (avg_exclude_padding, the forward's divisor) for
//    float32, a gather loop for the other dtypes.
//  - MaxPool2DGrad: a loop for every dtype. It must route each dy element to the FIRST maximal
//    element of its window (TF's rule, and the forward loop's `max < v` comparison); oneDNN's
//    max pooling_backward needs the workspace of a forward_training pass, which would recompute
//    the forward anyway, and does not document its tie rule.
// oneDNN primitives are cached per geometry (a small cache, as in ops/cpu/conv.cpp) and run with
// a per-call scratchpad, so concurrent callers are safe.
#include "ops/nn_grad.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <dnnl.hpp>
#include <memory>
#include <mutex>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "core/check.h"
#include "core/parallel.h"
#include "ops/cpu/conv_onednn.h"
#include "ops/cuda/nn_grad_element.h"
#include "ops/nn.h"

namespace tapeflow::prims {

// Defined in ops/cpu/conv_onednn.cpp: the process's oneDNN engine and this thread's stream.
dnnl::engine& onednn_engine();
dnnl::stream& onednn_stream();

namespace {

using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

size_t hash_values(std::initializer_list<int64_t> v) {
  size_t h = 1469598103934665603ull;
  for (int64_t x : v) h = (h ^ static_cast<size_t>(x)) * 1099511628211ull;
  return h;
}

// Host scratch memory from tapeflow's caching allocator.
Tensor host_buffer(size_t bytes) {
  return detail::empty(TensorShape{static_cast<int64_t>(std::max<size_t>(bytes, 1))}, uint8,
                       Device{});
}

void zero(Tensor& t) {
  std::memset(t.raw_data(), 0, t.nbytes());
}

// ================================================================ convolution

struct ConvGeom {
  int64_t n, h, w, c;      // input
  int64_t kh, kw, o;       // filters (kh, kw, c, o)
  int64_t oh, ow;          // dy
  int64_t sh, sw, dh, dw;  // strides, dilations
  int64_t pt, pl, pb, pr;  // padding top, left, bottom, right
  int64_t groups;          // filters are (kh, kw, c / groups, o)
};
template <class P>
ConvGeom conv_geometry(const P& p, const TensorShape& x, const TensorShape& f,
                       const TensorShape& y) {
  ConvGeom g{};
  g.n = x[0], g.h = x[1], g.w = x[2], g.c = x[3];
  g.kh = f[0], g.kw = f[1], g.o = f[3];
  g.oh = y[1], g.ow = y[2];
  g.sh = p.stride_h, g.sw = p.stride_w, g.dh = p.dilation_h, g.dw = p.dilation_w;
  const auto dh = detail::window_dim(g.h, g.kh, p.stride_h, p.dilation_h, p.same);
  const auto dw = detail::window_dim(g.w, g.kw, p.stride_w, p.dilation_w, p.same);
  g.pt = dh.pad_before, g.pb = dh.pad_after, g.pl = dw.pad_before, g.pr = dw.pad_after;
  g.groups = p.groups;
  return g;
}

// ---- direct loops (float64) ----

// Gathers into each input pixel from the dy pixels whose windows cover it; rows = (n, ih). The
// filters (KH, KW, cg, O) are first transposed to (KH, KW, O, cg), so each tap is a run of axpys
// over the cg channels of output o's group (cg = C / groups).
template <class T>
void backprop_input_direct(const ConvGeom& g, const T* f, const T* dy, T* dx) {
  const int64_t cg = g.c / g.groups, og = g.o / g.groups;
  std::vector<T> ft(static_cast<size_t>(g.kh * g.kw * g.o * cg));
  for (int64_t k = 0; k < g.kh * g.kw; ++k)
    for (int64_t c = 0; c < cg; ++c)
      for (int64_t o = 0; o < g.o; ++o) ft[(k * g.o + o) * cg + c] = f[(k * cg + c) * g.o + o];
  const int64_t rows = g.n * g.h;
  const int64_t work = std::max<int64_t>(1, g.w * g.kh * g.kw * cg * g.o);
  const int64_t grain = std::max<int64_t>(1, 32768 / work);
  detail::parallel_for(rows, grain, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t n = r / g.h, ih = r % g.h;
      T* xrow = dx + r * g.w * g.c;
      std::fill(xrow, xrow + g.w * g.c, T(0));
      for (int64_t kh = 0; kh < g.kh; ++kh) {
        const int64_t th = ih + g.pt - kh * g.dh;  // = oh * sh for the covering dy row
        if (th < 0 || th % g.sh != 0 || th / g.sh >= g.oh) continue;
        const int64_t oh = th / g.sh;
        for (int64_t iw = 0; iw < g.w; ++iw) {
          T* __restrict xo = xrow + iw * g.c;
          for (int64_t kw = 0; kw < g.kw; ++kw) {
            const int64_t tw = iw + g.pl - kw * g.dw;
            if (tw < 0 || tw % g.sw != 0 || tw / g.sw >= g.ow) continue;
            const T* __restrict dyv = dy + ((n * g.oh + oh) * g.ow + tw / g.sw) * g.o;
            const T* __restrict fk = ft.data() + (kh * g.kw + kw) * g.o * cg;
            for (int64_t o = 0; o < g.o; ++o) {
              const T d = dyv[o];
              const T* __restrict fr = fk + o * cg;
              T* __restrict xq = xo + o / og * cg;
              for (int64_t c = 0; c < cg; ++c) xq[c] += fr[c] * d;
            }
          }
        }
      }
    }
  });
}

// One filter row (kh, kw, c) per task: the sum over (n, oh, ow) of x * dy, where output o reads
// input channel c of its group (o / og) cg + c.
template <class T>
void backprop_filter_direct(const ConvGeom& g, const T* x, const T* dy, T* df) {
  const int64_t cg = g.c / g.groups, og = g.o / g.groups;
  const int64_t rows = g.kh * g.kw * cg;
  const int64_t work = std::max<int64_t>(1, g.n * g.oh * g.ow * g.o);
  const int64_t grain = std::max<int64_t>(1, 32768 / work);
  detail::parallel_for(rows, grain, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t c = r % cg, kk = r / cg;
      const int64_t kh = kk / g.kw, kw = kk % g.kw;
      T* frow = df + r * g.o;
      std::fill(frow, frow + g.o, T(0));
      for (int64_t n = 0; n < g.n; ++n) {
        for (int64_t oh = 0; oh < g.oh; ++oh) {
          const int64_t ih = oh * g.sh - g.pt + kh * g.dh;
          if (ih < 0 || ih >= g.h) continue;
          for (int64_t ow = 0; ow < g.ow; ++ow) {
            const int64_t iw = ow * g.sw - g.pl + kw * g.dw;
            if (iw < 0 || iw >= g.w) continue;
            const T* xv = x + ((n * g.h + ih) * g.w + iw) * g.c + c;
            const T* dyv = dy + ((n * g.oh + oh) * g.ow + ow) * g.o;
            for (int64_t q = 0; q < g.groups; ++q) {
              const T xq = xv[q * cg];
              for (int64_t o = q * og; o < (q + 1) * og; ++o) frow[o] += xq * dyv[o];
            }
          }
        }
      }
    }
  });
}

dnnl::primitive_attr user_scratchpad() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);  // per-call scratchpad: thread-safe
  return attr;
}

// A small per-geometry cache (many shapes means a changing model: start over).
template <class Plan, class Key, class Hash, class Make>
std::shared_ptr<const Plan> cached_plan(const Key& k, Make make) {
  static std::mutex mu;
  static std::unordered_map<Key, std::shared_ptr<const Plan>, Hash> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(k);
  if (it != cache.end()) return it->second;
  if (cache.size() >= 64) cache.clear();
  auto plan = make(k);
  cache.emplace(k, plan);
  return plan;
}

// ================================================================ pooling

struct PoolGeom {
  int64_t n, h, w, c, oh, ow;
  int64_t kh, kw, sh, sw, pt, pl, pb, pr;
  bool operator==(const PoolGeom&) const = default;
};
struct PoolGeomHash {
  size_t operator()(const PoolGeom& g) const {
    return hash_values(
        {g.n, g.h, g.w, g.c, g.oh, g.ow, g.kh, g.kw, g.sh, g.sw, g.pt, g.pl, g.pb, g.pr});
  }
};

template <class P>
PoolGeom pool_geometry(const P& p, const TensorShape& x, const TensorShape& y) {
  PoolGeom g{};
  g.n = x[0], g.h = x[1], g.w = x[2], g.c = x[3];
  g.oh = y[1], g.ow = y[2];
  g.kh = p.k_h, g.kw = p.k_w, g.sh = p.stride_h, g.sw = p.stride_w;
  const auto dh = detail::window_dim(g.h, g.kh, p.stride_h, 1, p.same);
  const auto dw = detail::window_dim(g.w, g.kw, p.stride_w, 1, p.same);
  g.pt = dh.pad_before, g.pb = dh.pad_after, g.pl = dw.pad_before, g.pr = dw.pad_after;
  detail::shrink_single_output_strides(g);
  return g;
}

// ---- oneDNN average pooling backward (float32) ----

struct AvgPlan {
  dnnl::pooling_backward::primitive_desc pd;
  dnnl::pooling_backward prim;
};

std::shared_ptr<const AvgPlan> make_avg_plan(const PoolGeom& g) {
  auto& eng = onednn_engine();
  const dnnl::memory::desc src({g.n, g.c, g.h, g.w}, dt::f32, tag::nhwc);
  const dnnl::memory::desc dst({g.n, g.c, g.oh, g.ow}, dt::f32, tag::nhwc);
  const dnnl::memory::dims strides{g.sh, g.sw}, kernel{g.kh, g.kw}, pad_l{g.pt, g.pl},
      pad_r{g.pb, g.pr};
  const auto alg = dnnl::algorithm::pooling_avg_exclude_padding;
  const dnnl::pooling_forward::desc fwd(dnnl::prop_kind::forward_training, alg, src, dst, strides,
                                        kernel, pad_l, pad_r);
  const dnnl::pooling_forward::primitive_desc hint(fwd, eng);
  const dnnl::pooling_backward::desc bwd(alg, src, dst, strides, kernel, pad_l, pad_r);
  auto plan = std::make_shared<AvgPlan>();
  plan->pd = dnnl::pooling_backward::primitive_desc(bwd, user_scratchpad(), eng, hint);
  plan->prim = dnnl::pooling_backward(plan->pd);
  return plan;
}

void avg_grad_f32(const PoolGeom& g, const float* dy, float* dx) {
  try {
    const auto plan = cached_plan<AvgPlan, PoolGeom, PoolGeomHash>(g, make_avg_plan);
    auto& eng = onednn_engine();
    auto& stream = onednn_stream();
    dnnl::memory diff_dst(plan->pd.diff_dst_desc(), eng, const_cast<float*>(dy));
    dnnl::memory diff_src(plan->pd.diff_src_desc(), eng, dx);
    Tensor sbuf = host_buffer(plan->pd.scratchpad_desc().get_size());
    dnnl::memory scratch(plan->pd.scratchpad_desc(), eng, sbuf.raw_data());
    plan->prim.execute(stream, {{DNNL_ARG_DIFF_DST, diff_dst},
                                {DNNL_ARG_DIFF_SRC, diff_src},
                                {DNNL_ARG_SCRATCHPAD, scratch}});
    stream.wait();
  } catch (const dnnl::error& e) {
    TF_THROW(InternalError, "avg_pool2d_grad",
             "oneDNN failed ({}) for input (N={}, H={}, W={}, C={})", e.what(), g.n, g.h, g.w, g.c);
  }
}

// ---- loops ----

// Gathers into each input pixel dy / count from every window that covers it; rows = (n, ih).
// Every window holds at least one valid element (TF's SAME padding is smaller than the window).
template <class T>
void avg_grad_loop(const PoolGeom& g, const T* dy, T* dx) {
  using A = compute_t<T>;
  const int64_t rows = g.n * g.h;
  const int64_t work =
      std::max<int64_t>(1, g.w * g.c * ((g.kh + g.sh - 1) / g.sh) * ((g.kw + g.sw - 1) / g.sw));
  const int64_t grain = std::max<int64_t>(1, 65536 / work);
  detail::parallel_for(rows, grain, [&](int64_t r0, int64_t r1) {
    std::vector<A> acc(static_cast<size_t>(g.c));
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t n = r / g.h, ih = r % g.h;
      // dy rows oh with oh * sh - pt <= ih <= oh * sh - pt + kh - 1.
      const int64_t ah = ih + g.pt - g.kh + 1;
      const int64_t oh0 = ah <= 0 ? 0 : (ah + g.sh - 1) / g.sh;
      const int64_t oh1 = std::min<int64_t>(g.oh - 1, (ih + g.pt) / g.sh);
      for (int64_t iw = 0; iw < g.w; ++iw) {
        const int64_t aw = iw + g.pl - g.kw + 1;
        const int64_t ow0 = aw <= 0 ? 0 : (aw + g.sw - 1) / g.sw;
        const int64_t ow1 = std::min<int64_t>(g.ow - 1, (iw + g.pl) / g.sw);
        A* __restrict a = acc.data();
        for (int64_t c = 0; c < g.c; ++c) a[c] = A(0);
        for (int64_t oh = oh0; oh <= oh1; ++oh) {
          const int64_t h0 = oh * g.sh - g.pt;
          const int64_t ch = std::min(h0 + g.kh, g.h) - std::max<int64_t>(h0, 0);
          for (int64_t ow = ow0; ow <= ow1; ++ow) {
            const int64_t w0 = ow * g.sw - g.pl;
            const int64_t cw = std::min(w0 + g.kw, g.w) - std::max<int64_t>(w0, 0);
            const A count = static_cast<A>(ch * cw);
            const T* __restrict dyv = dy + ((n * g.oh + oh) * g.ow + ow) * g.c;
            for (int64_t c = 0; c < g.c; ++c) a[c] += static_cast<A>(dyv[c]) / count;
          }
        }
        T* __restrict xo = dx + (r * g.w + iw) * g.c;
        for (int64_t c = 0; c < g.c; ++c) xo[c] = T(a[c]);
      }
    }
  });
}

// Moves `rest` into `acc` where `hit`, leaving zero in `rest` (acc gains +0 elsewhere). Written
// with bit masks: as `acc += hit ? rest : 0` GCC turns the select into a branch and gives up
// vectorising, and a 0/1 multiply would spread a NaN or infinite dy over the whole window.
template <class A>
inline void route(bool hit, A& rest, A& acc) {
  using U = std::conditional_t<sizeof(A) == 8, uint64_t, uint32_t>;
  const U mask = U(0) - static_cast<U>(hit);
  const U bits = std::bit_cast<U>(rest);
  acc += std::bit_cast<A>(bits & mask);
  rest = std::bit_cast<A>(bits & ~mask);
}

// Routes each dy element to the first maximal element of its window, in two vectorised passes
// over the window per block of channels: the maximum (as the forward loop computes it), then the
// first position holding it takes dy. `max < v` never lets a NaN in after the first element, and
// a NaN first element stays the maximum; the first position then matches through `max != max`.
// So this is the argmax rule of the CUDA kernel, without a per-channel index. Tasks are (image,
// channel block) pairs, which write disjoint parts of dx; the half types accumulate in a float
// buffer.
template <class T>
void max_grad_loop(const PoolGeom& g, const T* x, const T* dy, T* dx) {
  using A = compute_t<T>;
  constexpr bool kDirect = std::is_same_v<A, T>;
  constexpr int64_t kBlock = 64;
  const int64_t blocks = (g.c + kBlock - 1) / kBlock;
  const int64_t tasks = g.n * blocks;
  // In double: a window (an attribute) can be far larger than the input.
  const double work = std::max(1.0, static_cast<double>(g.oh) * static_cast<double>(g.ow) *
                                        static_cast<double>(g.kh) * static_cast<double>(g.kw) *
                                        static_cast<double>(std::min(g.c, kBlock)));
  const int64_t grain = std::max<int64_t>(1, static_cast<int64_t>(65536 / work));
  const int64_t hw = g.h * g.w;
  detail::parallel_for(tasks, grain, [&](int64_t t0, int64_t t1) {
    std::vector<A> buf(kDirect ? 0 : static_cast<size_t>(hw * kBlock));
    alignas(64) A best_buf[kBlock];
    alignas(64) A rest_buf[kBlock];
    A* __restrict best = best_buf;
    A* __restrict rest = rest_buf;  // dy not yet routed
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t n = t / blocks, c0 = (t % blocks) * kBlock;
      const int64_t nc = std::min(kBlock, g.c - c0);
      const T* __restrict xn = x + n * hw * g.c + c0;
      // acc[p * stride + c] accumulates dx at pixel p, channel c0 + c.
      A* acc;
      int64_t stride;
      if constexpr (kDirect) {
        acc = dx + n * hw * g.c + c0;
        stride = g.c;
      } else {
        acc = buf.data();
        stride = nc;
      }
      for (int64_t p = 0; p < hw; ++p)
        for (int64_t c = 0; c < nc; ++c) acc[p * stride + c] = A(0);
      for (int64_t oh = 0; oh < g.oh; ++oh) {
        const int64_t h0 = oh * g.sh - g.pt;
        const int64_t hs = std::max<int64_t>(h0, 0), he = std::min(h0 + g.kh, g.h);
        for (int64_t ow = 0; ow < g.ow; ++ow) {
          const int64_t w0 = ow * g.sw - g.pl;
          const int64_t ws = std::max<int64_t>(w0, 0), we = std::min(w0 + g.kw, g.w);
          // Every window holds a valid element (TF's SAME padding is smaller than the window).
          const T* __restrict first = xn + (hs * g.w + ws) * g.c;
          for (int64_t c = 0; c < nc; ++c) best[c] = static_cast<A>(first[c]);
          for (int64_t ih = hs; ih < he; ++ih) {
            for (int64_t iw = ws; iw < we; ++iw) {
              const T* __restrict xp = xn + (ih * g.w + iw) * g.c;
              for (int64_t c = 0; c < nc; ++c) {
                const A v = static_cast<A>(xp[c]);
                best[c] = best[c] < v ? v : best[c];
              }
            }
          }
          const T* __restrict dyv = dy + ((n * g.oh + oh) * g.ow + ow) * g.c + c0;
          for (int64_t c = 0; c < nc; ++c) rest[c] = static_cast<A>(dyv[c]);
          {  // the first position, NaN maximum included
            A* __restrict ap = acc + (hs * g.w + ws) * stride;
            for (int64_t c = 0; c < nc; ++c) {
              const A v = static_cast<A>(first[c]);
              route(v == best[c] || best[c] != best[c], rest[c], ap[c]);
            }
          }
          for (int64_t ih = hs; ih < he; ++ih) {
            for (int64_t iw = ih == hs ? ws + 1 : ws; iw < we; ++iw) {
              const T* __restrict xp = xn + (ih * g.w + iw) * g.c;
              A* __restrict ap = acc + (ih * g.w + iw) * stride;
              for (int64_t c = 0; c < nc; ++c)
                route(static_cast<A>(xp[c]) == best[c], rest[c], ap[c]);
            }
          }
        }
      }
      if constexpr (!kDirect) {
        T* xo = dx + n * hw * g.c + c0;
        for (int64_t p = 0; p < hw; ++p)
          for (int64_t c = 0; c < nc; ++c) xo[p * g.c + c] = T(acc[p * stride + c]);
      }
    }
  });
}

}  // namespace

// ================================================================ kernels

void Conv2DBackpropInput::eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const {
  const Tensor& f = in[0];
  const Tensor& dy = in[1];
  Tensor& dx = out[0];
  if (dx.num_elements() == 0) return;
  if (dy.num_elements() == 0) return zero(dx);  // no output channels or no windows
  const ConvGeom g = conv_geometry(*this, dx.shape(), f.shape(), dy.shape());
  if (dx.dtype() == float64) {
    backprop_input_direct(g, f.data<double>(), dy.data<double>(), dx.data<double>());
  } else {
    onednn::conv_backward_data(onednn::from_2d(g), f, dy, dx, name());
  }
}

void Conv2DBackpropFilter::eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const {
  const Tensor& x = in[0];
  const Tensor& dy = in[1];
  Tensor& df = out[0];
  if (df.num_elements() == 0) return;
  if (dy.num_elements() == 0) return zero(df);  // no batch or no windows: empty sums
  const ConvGeom g = conv_geometry(*this, x.shape(), df.shape(), dy.shape());
  if (df.dtype() == float64) {
    backprop_filter_direct(g, x.data<double>(), dy.data<double>(), df.data<double>());
  } else {
    onednn::conv_backward_weights(onednn::from_2d(g), x, dy, df, name());
  }
}

void MaxPool2DGrad::eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const {
  Tensor& dx = out[0];
  if (dx.num_elements() == 0) return;
  const PoolGeom g = pool_geometry(*this, dx.shape(), in[1].shape());
  TF_DISPATCH_FLOAT_TYPES(dx.dtype(),
                          max_grad_loop<T>(g, in[0].data<T>(), in[1].data<T>(), dx.data<T>()));
}

void MaxPool2DGradGrad::eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const {
  Tensor& y = out[0];
  if (y.num_elements() == 0) return;
  const PoolGeom p = pool_geometry(*this, in[0].shape(), y.shape());
  // The CUDA kernel's element function, so both devices pick the same argmax.
  const cuda::nngrad::PoolGeom g{p.n,  p.h,  p.w,  p.c,  p.oh, p.ow,
                                 p.kh, p.kw, p.sh, p.sw, p.pt, p.pl};
  const double window = std::max(1.0, static_cast<double>(g.kh) * static_cast<double>(g.kw));
  const int64_t grain = std::max<int64_t>(1, static_cast<int64_t>(65536 / window));
  TF_DISPATCH_FLOAT_TYPES(y.dtype(), {
    const T* x = in[0].data<T>();
    const T* gr = in[1].data<T>();
    T* o = y.data<T>();
    detail::parallel_for(y.num_elements(), grain, [=](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i)
        o[i] = static_cast<T>(cuda::nngrad::max_pool_grad_grad_element<compute_t<T>>(g, x, gr, i));
    });
  });
}

void AvgPool2DGrad::eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const {
  Tensor& dx = out[0];
  if (dx.num_elements() == 0) return;
  const PoolGeom g = pool_geometry(*this, dx.shape(), in[0].shape());
  if (dx.dtype() == float32) return avg_grad_f32(g, in[0].data<float>(), dx.data<float>());
  TF_DISPATCH_FLOAT_TYPES(dx.dtype(), avg_grad_loop<T>(g, in[0].data<T>(), dx.data<T>()));
}

}  // namespace tapeflow::prims
