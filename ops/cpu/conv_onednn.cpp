// oneDNN float32 convolutions (ops/cpu/conv_onednn.h).
#include "ops/cpu/conv_onednn.h"

#include <algorithm>
#include <dnnl.hpp>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "core/check.h"
#include "core/parallel.h"
#include "core/tensor.h"

namespace tapeflow::prims {

// The process's oneDNN CPU engine, shared with the pooling kernels (ops/cpu/pool.cpp and
// nn_grad.cpp declare these too).
dnnl::engine& onednn_engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}
// A CPU stream is a light handle; one per thread keeps concurrent callers independent.
dnnl::stream& onednn_stream() {
  thread_local dnnl::stream s(onednn_engine());
  return s;
}

namespace onednn {

std::string ConvGeometry::describe() const {
  const char* names[3] = {"D", "H", "W"};
  const int first = 3 - spatial;
  std::string s = fmt::format("input (N={}", n);
  for (int i = 0; i < spatial; ++i) s += fmt::format(", {}={}", names[first + i], in[i]);
  s += fmt::format(", C={}), filters (", c);
  for (int i = 0; i < spatial; ++i) s += fmt::format("{}, ", k[i]);
  return s + fmt::format("{}, {}), {} groups", groups > 0 ? c / groups : c, o, groups);
}

namespace {

using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

struct GeometryHash {
  size_t operator()(const ConvGeometry& g) const {
    size_t h = 1469598103934665603ull;
    auto mix = [&h](int64_t v) { h = (h ^ static_cast<size_t>(v)) * 1099511628211ull; };
    mix(g.spatial), mix(g.n), mix(g.c), mix(g.o), mix(g.groups);
    for (int i = 0; i < 3; ++i) {
      mix(g.in[i]), mix(g.k[i]), mix(g.out[i]), mix(g.stride[i]), mix(g.dilation[i]);
      mix(g.pad_before[i]), mix(g.pad_after[i]);
    }
    return h;
  }
};

dnnl::memory::dims dims(int spatial, const int64_t (&v)[3], int64_t minus = 0) {
  dnnl::memory::dims d;
  for (int i = 0; i < spatial; ++i) d.push_back(v[i] - minus);
  return d;
}

// (N, C, spatial...) in channels-last order.
dnnl::memory::desc activations(const ConvGeometry& g, int64_t channels, const int64_t (&size)[3]) {
  dnnl::memory::dims d{g.n, channels};
  for (int i = 0; i < g.spatial; ++i) d.push_back(size[i]);
  return dnnl::memory::desc(d, dt::f32, g.spatial == 3 ? tag::ndhwc : tag::nhwc);
}

// Weights (O, C, spatial...), or (G, O/G, C/G, spatial...) for groups; `any` lets oneDNN choose
// the layout, else TF's (D)HWIO as given ((d)hwigo for groups).
dnnl::memory::desc weights(const ConvGeometry& g, bool any) {
  dnnl::memory::dims d;
  if (g.groups == 1) {
    d = {g.o, g.c};
  } else {
    d = {g.groups, g.o / g.groups, g.c / g.groups};
  }
  for (int i = 0; i < g.spatial; ++i) d.push_back(g.k[i]);
  tag t = tag::any;
  if (!any) {
    if (g.groups == 1)
      t = g.spatial == 3 ? tag::dhwio : tag::hwio;
    else
      t = g.spatial == 3 ? tag::dhwigo : tag::hwigo;
  }
  return dnnl::memory::desc(d, dt::f32, t);
}

struct Descs {
  dnnl::memory::desc src, dst, weights_any, user_weights;
  dnnl::memory::dims strides, dilates, pad_l, pad_r;
};
Descs descs(const ConvGeometry& g) {
  Descs d;
  d.src = activations(g, g.c, g.in);
  d.dst = activations(g, g.o, g.out);
  d.weights_any = weights(g, true);
  d.user_weights = weights(g, false);
  d.strides = dims(g.spatial, g.stride);
  d.dilates = dims(g.spatial, g.dilation, 1);  // oneDNN's dilation 0 is none
  d.pad_l = dims(g.spatial, g.pad_before);
  d.pad_r = dims(g.spatial, g.pad_after);
  return d;
}

dnnl::primitive_attr user_scratchpad() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);  // per-call scratchpad: thread-safe
  return attr;
}

dnnl::convolution_forward::desc forward_desc(const Descs& d, dnnl::prop_kind kind) {
  return dnnl::convolution_forward::desc(kind, dnnl::algorithm::convolution_direct, d.src,
                                         d.weights_any, d.dst, d.strides, d.dilates, d.pad_l,
                                         d.pad_r);
}

// The forward primitive descriptor that oneDNN's backward descriptors take as a hint.
dnnl::convolution_forward::primitive_desc hint(const Descs& d) {
  return dnnl::convolution_forward::primitive_desc(
      forward_desc(d, dnnl::prop_kind::forward_training), onednn_engine());
}

// A primitive, its descriptor, and the reorder between TF's filters and its weights layout
// (to it for the forward and the data gradient, from it for the weights gradient).
template <class PD, class P>
struct Plan {
  PD pd;
  P prim;
  dnnl::memory::desc user_weights;
  bool reorder_weights = false;
  dnnl::reorder weights_reorder;
};
using ForwardPlan = Plan<dnnl::convolution_forward::primitive_desc, dnnl::convolution_forward>;
using DataPlan =
    Plan<dnnl::convolution_backward_data::primitive_desc, dnnl::convolution_backward_data>;
using WeightsPlan =
    Plan<dnnl::convolution_backward_weights::primitive_desc, dnnl::convolution_backward_weights>;

template <class PlanT>
void finish(PlanT& plan, const dnnl::memory::desc& weights_desc, const Descs& d, bool to_user) {
  auto& eng = onednn_engine();
  plan.user_weights = d.user_weights;
  plan.reorder_weights = weights_desc != d.user_weights;
  if (!plan.reorder_weights) return;
  plan.weights_reorder =
      to_user
          ? dnnl::reorder(dnnl::reorder::primitive_desc(eng, weights_desc, eng, d.user_weights))
          : dnnl::reorder(dnnl::reorder::primitive_desc(eng, d.user_weights, eng, weights_desc));
}

std::shared_ptr<const ForwardPlan> make_forward(const ConvGeometry& g) {
  const Descs d = descs(g);
  auto plan = std::make_shared<ForwardPlan>();
  plan->pd = dnnl::convolution_forward::primitive_desc(
      forward_desc(d, dnnl::prop_kind::forward_inference), user_scratchpad(), onednn_engine());
  plan->prim = dnnl::convolution_forward(plan->pd);
  finish(*plan, plan->pd.weights_desc(), d, false);
  return plan;
}

std::shared_ptr<const DataPlan> make_data(const ConvGeometry& g) {
  const Descs d = descs(g);
  const dnnl::convolution_backward_data::desc bd(dnnl::algorithm::convolution_direct, d.src,
                                                 d.weights_any, d.dst, d.strides, d.dilates,
                                                 d.pad_l, d.pad_r);
  auto plan = std::make_shared<DataPlan>();
  plan->pd = dnnl::convolution_backward_data::primitive_desc(bd, user_scratchpad(), onednn_engine(),
                                                             hint(d));
  plan->prim = dnnl::convolution_backward_data(plan->pd);
  finish(*plan, plan->pd.weights_desc(), d, false);
  return plan;
}

std::shared_ptr<const WeightsPlan> make_weights(const ConvGeometry& g) {
  const Descs d = descs(g);
  const dnnl::convolution_backward_weights::desc bd(dnnl::algorithm::convolution_direct, d.src,
                                                    d.weights_any, d.dst, d.strides, d.dilates,
                                                    d.pad_l, d.pad_r);
  auto plan = std::make_shared<WeightsPlan>();
  plan->pd = dnnl::convolution_backward_weights::primitive_desc(bd, user_scratchpad(),
                                                                onednn_engine(), hint(d));
  plan->prim = dnnl::convolution_backward_weights(plan->pd);
  finish(*plan, plan->pd.diff_weights_desc(), d, true);
  return plan;
}

// One small cache per plan kind (many shapes means a changing model: start over).
template <class PlanT, class Make>
std::shared_ptr<const PlanT> cached(const ConvGeometry& g, Make make) {
  static std::mutex mu;
  static std::unordered_map<ConvGeometry, std::shared_ptr<const PlanT>, GeometryHash> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(g);
  if (it != cache.end()) return it->second;
  if (cache.size() >= 64) cache.clear();
  auto plan = make(g);
  cache.emplace(g, plan);
  return plan;
}

// Host scratch memory from tapeflow's caching allocator.
Tensor host_buffer(size_t bytes) {
  return detail::empty(TensorShape{static_cast<int64_t>(std::max<size_t>(bytes, 1))}, uint8,
                       Device{});
}

// Runs `body` and turns a oneDNN error into an InternalError naming the op and the geometry.
template <class F>
void guarded(const ConvGeometry& g, const char* op, F&& body) {
  try {
    body();
  } catch (const dnnl::error& e) {
    TF_THROW(InternalError, op, "oneDNN failed ({}) for {}", e.what(), g.describe());
  }
}

// t itself when float32, else a float32 copy (float16 / bfloat16).
Tensor to_float32(const Tensor& t) {
  if (t.dtype() == float32) return t;
  Tensor f = detail::empty(t.shape(), float32, Device{});
  TF_DISPATCH_FLOAT_TYPES(t.dtype(), {
    const T* src = t.data<T>();
    float* dst = f.data<float>();
    detail::parallel_for(t.num_elements(), 32768, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) dst[i] = static_cast<float>(src[i]);
    });
  });
  return f;
}
// A float32 tensor for a result of t's shape: t itself when it is float32.
Tensor float32_result(const Tensor& t) {
  return t.dtype() == float32 ? t : detail::empty(t.shape(), float32, Device{});
}
// f (float32) rounded into t when t is not f itself.
void store_result(const Tensor& f, Tensor& t) {
  if (t.dtype() == float32) return;
  TF_DISPATCH_FLOAT_TYPES(t.dtype(), {
    const float* src = f.data<float>();
    T* dst = t.data<T>();
    detail::parallel_for(t.num_elements(), 32768, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) dst[i] = T(src[i]);
    });
  });
}

// Runs a forward or data-gradient plan: `args` (its activations) plus the weights, TF's filters
// `f` reordered into the primitive's layout when that differs, and a per-call scratchpad.
template <class PlanT>
void run_with_filters(const PlanT& plan, const float* f,
                      std::unordered_map<int, dnnl::memory> args) {
  auto& eng = onednn_engine();
  auto& stream = onednn_stream();
  dnnl::memory user_w(plan.user_weights, eng, const_cast<float*>(f));
  Tensor wbuf;
  dnnl::memory w = user_w;
  if (plan.reorder_weights) {
    wbuf = host_buffer(plan.pd.weights_desc().get_size());
    w = dnnl::memory(plan.pd.weights_desc(), eng, wbuf.raw_data());
    plan.weights_reorder.execute(stream, user_w, w);
  }
  Tensor sbuf = host_buffer(plan.pd.scratchpad_desc().get_size());
  args[DNNL_ARG_WEIGHTS] = w;
  args[DNNL_ARG_SCRATCHPAD] = dnnl::memory(plan.pd.scratchpad_desc(), eng, sbuf.raw_data());
  plan.prim.execute(stream, args);
  stream.wait();
}

void forward_f32(const ConvGeometry& g, const float* x, const float* f, float* y, const char* op) {
  guarded(g, op, [&] {
    const auto plan = cached<ForwardPlan>(g, make_forward);
    auto& eng = onednn_engine();
    run_with_filters(*plan, f,
                     {{DNNL_ARG_SRC, dnnl::memory(plan->pd.src_desc(), eng, const_cast<float*>(x))},
                      {DNNL_ARG_DST, dnnl::memory(plan->pd.dst_desc(), eng, y)}});
  });
}

void backward_data_f32(const ConvGeometry& g, const float* f, const float* dy, float* dx,
                       const char* op) {
  guarded(g, op, [&] {
    const auto plan = cached<DataPlan>(g, make_data);
    auto& eng = onednn_engine();
    run_with_filters(
        *plan, f,
        {{DNNL_ARG_DIFF_DST, dnnl::memory(plan->pd.diff_dst_desc(), eng, const_cast<float*>(dy))},
         {DNNL_ARG_DIFF_SRC, dnnl::memory(plan->pd.diff_src_desc(), eng, dx)}});
  });
}

void backward_weights_f32(const ConvGeometry& g, const float* x, const float* dy, float* df,
                          const char* op) {
  guarded(g, op, [&] {
    const auto plan = cached<WeightsPlan>(g, make_weights);
    auto& eng = onednn_engine();
    auto& stream = onednn_stream();
    dnnl::memory src(plan->pd.src_desc(), eng, const_cast<float*>(x));
    dnnl::memory diff_dst(plan->pd.diff_dst_desc(), eng, const_cast<float*>(dy));
    dnnl::memory user_dw(plan->user_weights, eng, df);
    Tensor wbuf;
    dnnl::memory dw = user_dw;
    if (plan->reorder_weights) {
      wbuf = host_buffer(plan->pd.diff_weights_desc().get_size());
      dw = dnnl::memory(plan->pd.diff_weights_desc(), eng, wbuf.raw_data());
    }
    Tensor sbuf = host_buffer(plan->pd.scratchpad_desc().get_size());
    dnnl::memory scratch(plan->pd.scratchpad_desc(), eng, sbuf.raw_data());
    plan->prim.execute(stream, {{DNNL_ARG_SRC, src},
                                {DNNL_ARG_DIFF_DST, diff_dst},
                                {DNNL_ARG_DIFF_WEIGHTS, dw},
                                {DNNL_ARG_SCRATCHPAD, scratch}});
    if (plan->reorder_weights) plan->weights_reorder.execute(stream, dw, user_dw);
    stream.wait();
  });
}

}  // namespace

namespace {
// run(a, b, out) on float32 views of two inputs and a result: copies for float16 and bfloat16
// tensors, the tensors themselves for float32 ones; the result rounded back into out.
template <class F>
void in_float32(const Tensor& a, const Tensor& b, Tensor& out, F run) {
  const Tensor af = to_float32(a), bf = to_float32(b);
  Tensor of = float32_result(out);
  run(af.data<float>(), bf.data<float>(), of.data<float>());
  store_result(of, out);
}
}  // namespace

void conv_forward(const ConvGeometry& g, const Tensor& x, const Tensor& f, Tensor& y,
                  const char* op) {
  in_float32(x, f, y,
             [&](const float* xp, const float* fp, float* yp) { forward_f32(g, xp, fp, yp, op); });
}

void conv_backward_data(const ConvGeometry& g, const Tensor& f, const Tensor& dy, Tensor& dx,
                        const char* op) {
  in_float32(f, dy, dx, [&](const float* fp, const float* dyp, float* dxp) {
    backward_data_f32(g, fp, dyp, dxp, op);
  });
}

void conv_backward_weights(const ConvGeometry& g, const Tensor& x, const Tensor& dy, Tensor& df,
                           const char* op) {
  in_float32(x, dy, df, [&](const float* xp, const float* dyp, float* dfp) {
    backward_weights_f32(g, xp, dyp, dfp, op);
  });
}

}  // namespace onednn

}  // namespace tapeflow::prims
