// CPU conv2d: oneDNN for float32 (and for float16/bfloat16 through float32 copies), a direct
// loop for float64. NHWC activations and HWIO filters are given to oneDNN as they are (format
// tags nhwc and hwio; grouped filters (KH, KW, C / G, O) are oneDNN's hwigo, output channel
// o = g O/G + o' of group g); oneDNN picks its own weight layout and the filters are reordered
// into it on each call (cheap next to the convolution). Primitives are cached per geometry.
#include <algorithm>
#include <cstring>
#include <dnnl.hpp>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "core/check.h"
#include "core/parallel.h"
#include "ops/nn.h"

namespace tapeflow::prims {

// The process's oneDNN CPU engine, shared with ops/cpu/pool.cpp (which declares these too).
dnnl::engine& onednn_engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}
// A CPU stream is a light handle; one per thread keeps concurrent callers independent.
dnnl::stream& onednn_stream() {
  thread_local dnnl::stream s(onednn_engine());
  return s;
}

// float32 weights of a 2-D convolution as oneDNN takes them, shared with ops/cpu/nn_grad.cpp:
// dims (O, C, KH, KW), or (G, O/G, C/G, KH, KW) for groups; `any` lets oneDNN choose the layout,
// else TF's HWIO as given (hwigo for groups: output channel g O/G + o of group g).
dnnl::memory::desc onednn_conv_weights(int64_t o, int64_t c, int64_t kh, int64_t kw, int64_t groups,
                                       bool any) {
  using tag = dnnl::memory::format_tag;
  const auto f32 = dnnl::memory::data_type::f32;
  if (groups == 1) return dnnl::memory::desc({o, c, kh, kw}, f32, any ? tag::any : tag::hwio);
  return dnnl::memory::desc({groups, o / groups, c / groups, kh, kw}, f32,
                            any ? tag::any : tag::hwigo);
}

namespace {

struct ConvGeom {
  int64_t n, h, w, c;      // input
  int64_t kh, kw, o;       // filters (kh, kw, c, o)
  int64_t oh, ow;          // output
  int64_t sh, sw, dh, dw;  // strides, dilations
  int64_t pt, pl, pb, pr;  // padding top, left, bottom, right
  int64_t groups;          // filters are (kh, kw, c / groups, o)
  bool operator==(const ConvGeom&) const = default;
};

struct ConvGeomHash {
  size_t operator()(const ConvGeom& g) const {
    const int64_t v[] = {g.n,  g.h,  g.w,  g.c,  g.kh, g.kw, g.o,  g.oh, g.ow,
                         g.sh, g.sw, g.dh, g.dw, g.pt, g.pl, g.pb, g.pr, g.groups};
    size_t h = 1469598103934665603ull;
    for (int64_t x : v) h = (h ^ static_cast<size_t>(x)) * 1099511628211ull;
    return h;
  }
};

ConvGeom geometry(const Conv2D& p, const Tensor& x, const Tensor& f, const Tensor& y) {
  ConvGeom g{};
  g.n = x.shape()[0], g.h = x.shape()[1], g.w = x.shape()[2], g.c = x.shape()[3];
  g.kh = f.shape()[0], g.kw = f.shape()[1], g.o = f.shape()[3];
  g.oh = y.shape()[1], g.ow = y.shape()[2];
  g.sh = p.stride_h, g.sw = p.stride_w, g.dh = p.dilation_h, g.dw = p.dilation_w;
  const auto dh = detail::window_dim(g.h, g.kh, p.stride_h, p.dilation_h, p.same);
  const auto dw = detail::window_dim(g.w, g.kw, p.stride_w, p.dilation_w, p.same);
  g.pt = dh.pad_before, g.pb = dh.pad_after, g.pl = dw.pad_before, g.pr = dw.pad_after;
  g.groups = p.groups;
  return g;
}

// ---- oneDNN (float32) ----

dnnl::engine& dnnl_engine() {
  return onednn_engine();
}
dnnl::stream& dnnl_stream() {
  return onednn_stream();
}

struct ConvPlan {
  dnnl::convolution_forward::primitive_desc pd;
  dnnl::convolution_forward conv;
  dnnl::memory::desc user_weights;  // HWIO as given
  bool reorder_weights = false;
  dnnl::reorder weights_reorder;
};

std::shared_ptr<const ConvPlan> make_plan(const ConvGeom& g) {
  using tag = dnnl::memory::format_tag;
  using dt = dnnl::memory::data_type;
  auto plan = std::make_shared<ConvPlan>();
  const dnnl::memory::desc src({g.n, g.c, g.h, g.w}, dt::f32, tag::nhwc);
  const dnnl::memory::desc dst({g.n, g.o, g.oh, g.ow}, dt::f32, tag::nhwc);
  plan->user_weights = onednn_conv_weights(g.o, g.c, g.kh, g.kw, g.groups, false);
  const dnnl::memory::desc weights_any = onednn_conv_weights(g.o, g.c, g.kh, g.kw, g.groups, true);
  const dnnl::convolution_forward::desc d(
      dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src, weights_any,
      dst, {g.sh, g.sw}, {g.dh - 1, g.dw - 1}, {g.pt, g.pl}, {g.pb, g.pr});
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);  // per-call scratchpad: thread-safe
  plan->pd = dnnl::convolution_forward::primitive_desc(d, attr, dnnl_engine());
  plan->conv = dnnl::convolution_forward(plan->pd);
  plan->reorder_weights = plan->pd.weights_desc() != plan->user_weights;
  if (plan->reorder_weights) {
    plan->weights_reorder = dnnl::reorder(dnnl::reorder::primitive_desc(
        dnnl_engine(), plan->user_weights, dnnl_engine(), plan->pd.weights_desc()));
  }
  return plan;
}

std::shared_ptr<const ConvPlan> get_plan(const ConvGeom& g) {
  static std::mutex mu;
  static std::unordered_map<ConvGeom, std::shared_ptr<const ConvPlan>, ConvGeomHash> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(g);
  if (it != cache.end()) return it->second;
  if (cache.size() >= 64) cache.clear();  // a small cache: many shapes means a changing model
  auto plan = make_plan(g);
  cache.emplace(g, plan);
  return plan;
}

// Host scratch memory from tapeflow's caching allocator.
Tensor host_buffer(size_t bytes) {
  return detail::empty(TensorShape{static_cast<int64_t>(std::max<size_t>(bytes, 1))}, uint8,
                       Device{});
}

void conv_f32_onednn(const ConvGeom& g, const float* x, const float* f, float* y) {
  std::shared_ptr<const ConvPlan> plan;
  try {
    plan = get_plan(g);
    auto& eng = dnnl_engine();
    auto& stream = dnnl_stream();
    dnnl::memory src(plan->pd.src_desc(), eng, const_cast<float*>(x));
    dnnl::memory dst(plan->pd.dst_desc(), eng, y);
    dnnl::memory user_w(plan->user_weights, eng, const_cast<float*>(f));
    Tensor wbuf, sbuf;
    dnnl::memory w = user_w;
    if (plan->reorder_weights) {
      wbuf = host_buffer(plan->pd.weights_desc().get_size());
      w = dnnl::memory(plan->pd.weights_desc(), eng, wbuf.raw_data());
      plan->weights_reorder.execute(stream, user_w, w);
    }
    sbuf = host_buffer(plan->pd.scratchpad_desc().get_size());
    dnnl::memory scratch(plan->pd.scratchpad_desc(), eng, sbuf.raw_data());
    plan->conv.execute(stream, {{DNNL_ARG_SRC, src},
                                {DNNL_ARG_WEIGHTS, w},
                                {DNNL_ARG_DST, dst},
                                {DNNL_ARG_SCRATCHPAD, scratch}});
    stream.wait();
  } catch (const dnnl::error& e) {
    TF_THROW(InternalError, "conv2d",
             "oneDNN failed ({}) for input (N={}, H={}, W={}, C={}), "
             "filters ({}, {}, {}, {}), {} groups",
             e.what(), g.n, g.h, g.w, g.c, g.kh, g.kw, g.c / g.groups, g.o, g.groups);
  }
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

// float16 / bfloat16 <-> float32 copies.
template <class S, class D>
void convert(const S* src, D* dst, int64_t n) {
  detail::parallel_for(n, 32768, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) dst[i] = D(static_cast<float>(src[i]));
  });
}

}  // namespace

void Conv2D::eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const {
  const Tensor& x = in[0];
  const Tensor& f = in[1];
  Tensor& y = out[0];
  if (y.num_elements() == 0) return;
  const ConvGeom g = geometry(*this, x, f, y);
  if (g.c == 0) {  // no input channels: every output is an empty sum
    std::memset(y.raw_data(), 0, y.nbytes());
    return;
  }
  const DType dt = x.dtype();
  if (dt == float32) {
    conv_f32_onednn(g, x.data<float>(), f.data<float>(), y.data<float>());
  } else if (dt == float64) {
    conv_direct(g, x.data<double>(), f.data<double>(), y.data<double>());
  } else {
    TF_DISPATCH_FLOAT_TYPES(dt, {
      if constexpr (!std::is_same_v<T, float> && !std::is_same_v<T, double>) {
        Tensor xf = detail::empty(x.shape(), float32, Device{});
        Tensor ff = detail::empty(f.shape(), float32, Device{});
        Tensor yf = detail::empty(y.shape(), float32, Device{});
        convert(x.data<T>(), xf.data<float>(), x.num_elements());
        convert(f.data<T>(), ff.data<float>(), f.num_elements());
        conv_f32_onednn(g, xf.data<float>(), ff.data<float>(), yf.data<float>());
        convert(yf.data<float>(), y.data<T>(), y.num_elements());
      }
    });
  }
}

}  // namespace tapeflow::prims
