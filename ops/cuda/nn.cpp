// CUDA kernels of the nn family (host side).
//
// conv2d runs on cuDNN's convolution (the descriptor API: cudnnConvolutionForward).
//  - Layout: float16, bfloat16 and float32 run in cuDNN's NHWC layout, so the activations are
//    used as they are and only the HWIO filters are gathered into cuDNN's KRSC = (O, KH, KW, C).
//    An NCHW op (data_format "NCHW") runs in cuDNN's NCHW layout, its activations as they are.
//    float64 runs in NCHW (input, filters as (O, C, KH, KW) and output are gathered around the
//    call): cuDNN's NHWC kernels are not meant for double (PyTorch keeps float64 convolutions in
//    NCHW for the same reason). Should cuDNN reject the preferred layout for a geometry (no
//    descriptor or no heuristic candidate), the other layout is used.
//  - Groups (filters (KH, KW, C / G, O)): cudnnSetConvolutionGroupCount, with the filter
//    descriptor's C the group's C / G; the gathered filters keep TF's output order.
//  - Padding: cuDNN pads symmetrically. TF's SAME puts the odd extra row/column of padding at the
//    bottom/right, so when pad_after = pad_before + 1 the input is copied with one zero row
//    (column) appended and cuDNN pads pad_before on both sides: the output is the same, since
//    the zero padding adds nothing to the sums.
//  - Math: float accumulation for float16/bfloat16 (tensor cores allowed), FMA kernels only for
//    float32 (no TF32) unless config::experimental::tensor_float_32_execution_enabled() (then
//    cuDNN's default math, which permits TF32 tensor cores), double for float64.
//  - Algorithm: benchmarked once per (device, dtype, math, shapes, padding, strides, dilations)
//    with cudnnFindConvolutionForwardAlgorithmEx on the call's own buffers (the fastest that ran;
//    the search is synchronous, once per geometry), its workspace sized by the heuristics'
//    candidates (at most 1 GiB each), and cached with the descriptors.
//  - cuDNN handles must not be used by two threads at once: one mutex serialises this file's
//    cuDNN calls (they only queue work, except the one-off search).
//  - Pointers handed to cuDNN are 256-byte aligned (fresh allocations): an input that is a view
//    at an offset is copied first.
// max_pool2d and avg_pool2d are direct kernels (ops/cuda/nn.cu): exact against the CPU loops,
//    every dtype the CPU accepts (cuDNN's pooling has no int32/int64/uint8), asymmetric SAME
//    padding included, since each window reduces its valid elements only.
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/check.h"
#include "core/cuda/context.h"
#include "core/device.h"
#include "ops/cuda/handles.h"
#include "ops/cuda/nn_kernels.h"
#include "ops/nn.h"

namespace tapeflow::prims {

namespace {

namespace cu = ::tapeflow::detail::cuda;
using cu::nn::Gather4;

using cu::cudnn_mutex;

bool aligned(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 256 == 0;
}

enum class Layout { NHWC, NCHW };

struct CudnnTypes {
  cudnnDataType_t data;
  cudnnDataType_t compute;
  cudnnMathType_t math;
};

CudnnTypes cudnn_types(DType dt, bool tf32) {
  switch (dt.id) {
    case DTypeId::Float16:
      return {CUDNN_DATA_HALF, CUDNN_DATA_FLOAT, CUDNN_TENSOR_OP_MATH};
    case DTypeId::BFloat16:
      return {CUDNN_DATA_BFLOAT16, CUDNN_DATA_FLOAT, CUDNN_TENSOR_OP_MATH};
    case DTypeId::Float32:
      return {CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT, tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH};
    case DTypeId::Float64:
      return {CUDNN_DATA_DOUBLE, CUDNN_DATA_DOUBLE, CUDNN_DEFAULT_MATH};
    default:
      TF_THROW(UnimplementedError, "conv2d", "has no CUDA kernel for {} tensors", dtype_name(dt));
  }
}

// The geometry as cuDNN sees it: h and w are the (possibly bottom/right-padded) input's, pad_h
// and pad_w the symmetric padding.
struct ConvKey {
  int device;
  DTypeId dtype;
  bool tf32;
  int64_t n, h, w, c, o, kh, kw, oh, ow, pad_h, pad_w, sh, sw, dh, dw;
  int64_t groups;       // filters (kh, kw, c / groups, o)
  bool channels_first;  // the op's input and output are NCHW (data_format "NCHW")
  bool operator==(const ConvKey&) const = default;
};

struct ConvKeyHash {
  size_t operator()(const ConvKey& k) const {
    const int64_t v[] = {k.device, static_cast<int64_t>(k.dtype),
                         k.tf32,   k.n,
                         k.h,      k.w,
                         k.c,      k.o,
                         k.kh,     k.kw,
                         k.oh,     k.ow,
                         k.pad_h,  k.pad_w,
                         k.sh,     k.sw,
                         k.dh,     k.dw,
                         k.groups, k.channels_first};
    size_t h = 1469598103934665603ull;
    for (int64_t x : v) h = (h ^ static_cast<size_t>(x)) * 1099511628211ull;
    return h;
  }
};

// Descriptors, layout and algorithm of one geometry. Built and read under cudnn_mutex().
struct ConvPlan {
  Layout layout = Layout::NHWC;
  cudnnTensorDescriptor_t x = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnTensorDescriptor_t y = nullptr;
  size_t search_bytes = 0;  // workspace offered to the algorithm search
  bool found = false;       // the search ran: algo and workspace_bytes are set
  cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  size_t workspace_bytes = 0;

  ConvPlan() = default;
  ConvPlan(const ConvPlan&) = delete;
  ConvPlan& operator=(const ConvPlan&) = delete;
  ~ConvPlan() {
    // Host-side frees; a failure here has no remedy, so the statuses are ignored.
    if (y) (void)cudnnDestroyTensorDescriptor(y);
    if (conv) (void)cudnnDestroyConvolutionDescriptor(conv);
    if (w) (void)cudnnDestroyFilterDescriptor(w);
    if (x) (void)cudnnDestroyTensorDescriptor(x);
  }
};

// The most workspace the algorithm search offers an algorithm (TF's default limit is 4 GiB).
constexpr size_t kMaxWorkspace = size_t{1} << 30;

bool not_supported(cudnnStatus_t st) {
  return CUDNN_STATUS_CATEGORY(st) == CUDNN_STATUS_NOT_SUPPORTED;
}

const char* layout_name(Layout l) {
  return l == Layout::NHWC ? "NHWC" : "NCHW";
}

[[noreturn]] void throw_unsupported(const ConvKey& k, DType dt, const std::string& reason) {
  TF_THROW(UnimplementedError, "conv2d",
           "cuDNN has no convolution algorithm for {} input (N={}, H={}, W={}, C={}) and filters "
           "({}, {}, {}, {}) with strides [{}, {}], dilations [{}, {}], {} groups: {}",
           dtype_name(dt), k.n, k.h, k.w, k.c, k.kh, k.kw, k.c / k.groups, k.o, k.sh, k.sw, k.dh,
           k.dw, k.groups, reason);
}

// The descriptors of the geometry in `layout`, or nullptr (with the reason in `why`) when cuDNN
// rejects that layout or its heuristics offer no algorithm for it. No device work.
std::shared_ptr<ConvPlan> describe(const ConvKey& k, const CudnnTypes& t, Layout layout,
                                   cudnnHandle_t h, std::string& why) {
  auto plan = std::make_shared<ConvPlan>();
  plan->layout = layout;
  const cudnnTensorFormat_t fmt = layout == Layout::NHWC ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
  auto i = [](int64_t v) { return static_cast<int>(v); };  // sizes were checked to fit an int
  // false (with the reason) for a not-supported status; throws on any other failure.
  auto ok = [&](cudnnStatus_t st, const char* call) {
    if (st == CUDNN_STATUS_SUCCESS) return true;
    if (not_supported(st)) {
      why = fmt::format("{} layout: {} returned {}", layout_name(layout), call,
                        cudnnGetErrorString(st));
      return false;
    }
    cu::throw_library_error(call, "cuDNN", static_cast<int>(st), cudnnGetErrorString(st));
  };
  TF_CUDNN_CHECK(cudnnCreateTensorDescriptor(&plan->x));
  TF_CUDNN_CHECK(cudnnCreateFilterDescriptor(&plan->w));
  TF_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&plan->conv));
  TF_CUDNN_CHECK(cudnnCreateTensorDescriptor(&plan->y));
  if (!ok(cudnnSetTensor4dDescriptor(plan->x, fmt, t.data, i(k.n), i(k.c), i(k.h), i(k.w)),
          "cudnnSetTensor4dDescriptor") ||
      !ok(cudnnSetFilter4dDescriptor(plan->w, t.data, fmt, i(k.o), i(k.c / k.groups), i(k.kh),
                                     i(k.kw)),
          "cudnnSetFilter4dDescriptor") ||
      !ok(cudnnSetConvolution2dDescriptor(plan->conv, i(k.pad_h), i(k.pad_w), i(k.sh), i(k.sw),
                                          i(k.dh), i(k.dw), CUDNN_CROSS_CORRELATION, t.compute),
          "cudnnSetConvolution2dDescriptor") ||
      !ok(cudnnSetConvolutionGroupCount(plan->conv, i(k.groups)),
          "cudnnSetConvolutionGroupCount") ||
      !ok(cudnnSetConvolutionMathType(plan->conv, t.math), "cudnnSetConvolutionMathType") ||
      !ok(cudnnSetTensor4dDescriptor(plan->y, fmt, t.data, i(k.n), i(k.o), i(k.oh), i(k.ow)),
          "cudnnSetTensor4dDescriptor")) {
    return nullptr;
  }
  // cuDNN's output size must be TF's (a mismatch would be a bug in the padding of eval_cuda).
  int on = 0, oc = 0, oh = 0, ow = 0;
  TF_CUDNN_CHECK(
      cudnnGetConvolution2dForwardOutputDim(plan->conv, plan->x, plan->w, &on, &oc, &oh, &ow));
  if (on != k.n || oc != k.o || oh != k.oh || ow != k.ow) {
    TF_THROW(InternalError, "conv2d",
             "cuDNN's output (N={}, C={}, H={}, W={}) differs from the expected (N={}, C={}, "
             "H={}, W={})",
             on, oc, oh, ow, k.n, k.o, k.oh, k.ow);
  }
  // The heuristics' candidates (no execution): is there any, and how much workspace do they
  // want (that sizes the search's workspace)?
  int max_algos = 0;
  TF_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(h, &max_algos));
  max_algos = std::max(max_algos, 1);
  std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(static_cast<size_t>(max_algos));
  int got = 0;
  if (!ok(cudnnGetConvolutionForwardAlgorithm_v7(h, plan->x, plan->w, plan->conv, plan->y,
                                                 max_algos, &got, perf.data()),
          "cudnnGetConvolutionForwardAlgorithm_v7")) {
    return nullptr;
  }
  bool any = false;
  for (int a = 0; a < got; ++a) {
    if (perf[a].status != CUDNN_STATUS_SUCCESS) continue;
    size_t bytes = perf[a].memory;
    size_t queried = 0;  // an algorithm whose size cannot be queried keeps the heuristic's
    if (cudnnGetConvolutionForwardWorkspaceSize(h, plan->x, plan->w, plan->conv, plan->y,
                                                perf[a].algo, &queried) == CUDNN_STATUS_SUCCESS)
      bytes = std::max(bytes, queried);
    if (bytes > kMaxWorkspace) continue;
    any = true;
    plan->search_bytes = std::max(plan->search_bytes, bytes);
  }
  if (!any) {
    why = fmt::format("{} layout: the heuristics offer no algorithm", layout_name(layout));
    return nullptr;
  }
  return plan;
}

// The cached plan of a geometry: the preferred layout (NCHW for float64 and for NCHW tensors,
// NHWC otherwise), else the other one. Caller holds cudnn_mutex(). `capturing`: inside a CUDA-graph
// capture, which must not flush the cache (a plan made anew would search its algorithm, a
// synchronous call that ends the capture; the graph would then run node by node from then on).
std::shared_ptr<ConvPlan> get_plan(const ConvKey& k, DType dt, const CudnnTypes& t, cudnnHandle_t h,
                                   bool capturing) {
  // Leaked on purpose, as the handles: descriptors must not outlive the library at exit.
  static auto* cache = new std::unordered_map<ConvKey, std::shared_ptr<ConvPlan>, ConvKeyHash>();
  auto it = cache->find(k);
  if (it != cache->end()) return it->second;
  if (cache->size() >= 256 && !capturing) cache->clear();  // many shapes: a changing model
  const Layout preferred = dt == float64 || k.channels_first ? Layout::NCHW : Layout::NHWC;
  const Layout other = preferred == Layout::NHWC ? Layout::NCHW : Layout::NHWC;
  std::string why_preferred, why_other;
  std::shared_ptr<ConvPlan> plan = describe(k, t, preferred, h, why_preferred);
  if (!plan) plan = describe(k, t, other, h, why_other);
  if (!plan) throw_unsupported(k, dt, why_preferred + "; " + why_other);
  cache->emplace(k, plan);
  return plan;
}

// Benchmarks the algorithms on the call's own buffers (x, w, y in the plan's layout; y is
// overwritten) and keeps the fastest that ran. Synchronous, once per plan. Caller holds
// cudnn_mutex().
void find_algorithm(ConvPlan& plan, const ConvKey& k, DType dt, cudnnHandle_t h, Device dev,
                    const void* x, const void* w, void* y) {
  int max_algos = 0;
  TF_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(h, &max_algos));
  max_algos = std::max(max_algos, 1);
  std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(static_cast<size_t>(max_algos));
  Tensor search_ws = cu::workspace(dev, plan.search_bytes);
  int got = 0;
  const cudnnStatus_t st = cudnnFindConvolutionForwardAlgorithmEx(
      h, plan.x, x, plan.w, w, plan.conv, plan.y, y, max_algos, &got, perf.data(),
      search_ws.raw_data(), plan.search_bytes);
  if (not_supported(st)) {
    throw_unsupported(k, dt,
                      fmt::format("{} layout: cudnnFindConvolutionForwardAlgorithmEx returned {}",
                                  layout_name(plan.layout), cudnnGetErrorString(st)));
  }
  TF_CUDNN_CHECK(st);
  // Results come fastest first; forward algorithms are deterministic, but prefer those cuDNN
  // marks so.
  const cudnnConvolutionFwdAlgoPerf_t* best = nullptr;
  for (int pass = 0; pass < 2 && !best; ++pass) {
    for (int a = 0; a < got; ++a) {
      if (perf[a].status != CUDNN_STATUS_SUCCESS || perf[a].memory > plan.search_bytes) continue;
      if (pass == 0 && perf[a].determinism != CUDNN_DETERMINISTIC) continue;
      best = &perf[a];
      break;
    }
  }
  if (!best) {
    throw_unsupported(k, dt,
                      fmt::format("{} layout: no algorithm ran", layout_name(plan.layout)));
  }
  size_t need = 0;
  TF_CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(h, plan.x, plan.w, plan.conv, plan.y,
                                                         best->algo, &need));
  plan.algo = best->algo;
  plan.workspace_bytes = std::max(need, best->memory);
  plan.found = true;
}

Gather4 gather(std::initializer_list<int64_t> size, std::initializer_list<int64_t> stride,
               std::initializer_list<int64_t> limit) {
  Gather4 g;
  std::copy(size.begin(), size.end(), g.size);
  std::copy(stride.begin(), stride.end(), g.stride);
  std::copy(limit.begin(), limit.end(), g.limit);
  return g;
}

}  // namespace

void Conv2D::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  const Tensor& x = in[0];
  const Tensor& f = in[1];
  Tensor& y = out[0];
  if (y.num_elements() == 0) return;
  const Device dev = y.placement();
  const DType dt = x.dtype();
  const TensorShape xs = layout.nhwc(x.shape()), ys = layout.nhwc(y.shape());
  const int64_t N = xs[0], H = xs[1], W = xs[2], C = xs[3];
  const int64_t KH = f.shape()[0], KW = f.shape()[1], CI = f.shape()[2], O = f.shape()[3];
  const int64_t OH = ys[1], OW = ys[2];
  const bool nchw = layout.channels_first;
  // x's strides along (n, c, h, w) in the op's layout.
  const int64_t xn = H * W * C, xc_ = nchw ? H * W : 1, xh = nchw ? W : W * C, xw = nchw ? 1 : C;
  if (C == 0) {  // no input channels: every output is an empty sum
    TF_CUDA_CHECK(cudaMemsetAsync(y.raw_data(), 0, y.nbytes(), cu::stream(dev)));
    return;
  }
  const bool tf32 = config::experimental::tensor_float_32_execution_enabled();
  const CudnnTypes types = cudnn_types(dt, tf32);
  const auto dh = detail::window_dim(H, KH, stride_h, dilation_h, same);
  const auto dw = detail::window_dim(W, KW, stride_w, dilation_w, same);
  // The extra bottom row / right column of TF's SAME padding (0 or 1), padded explicitly.
  const int64_t HP = H + (dh.pad_after - dh.pad_before);
  const int64_t WP = W + (dw.pad_after - dw.pad_before);
  const bool pad = HP != H || WP != W;
  if (N * C * HP * WP > INT_MAX || N * O * OH * OW > INT_MAX || O * CI * KH * KW > INT_MAX) {
    TF_THROW(UnimplementedError, "conv2d",
             "the CUDA kernel (cuDNN) takes tensors of fewer than 2^31 elements: input is {}, "
             "filters {}, output {}",
             x.shape().to_string(), f.shape().to_string(), y.shape().to_string());
  }
  if (!cu::cudnn_window_fits(HP, dh.pad_before, KH, stride_h, dilation_h) ||
      !cu::cudnn_window_fits(WP, dw.pad_before, KW, stride_w, dilation_w)) {
    TF_THROW(UnimplementedError, "conv2d",
             "the CUDA kernel (cuDNN) takes the geometry as 32-bit ints: input {}, filters {}, "
             "strides [{}, {}], dilations [{}, {}] and padding ({}, {}) exceed them",
             x.shape().to_string(), f.shape().to_string(), stride_h, stride_w, dilation_h,
             dilation_w, dh.pad_before, dw.pad_before);
  }
  const ConvKey key{dev.index,
                    dt.id,
                    tf32,
                    N,
                    HP,
                    WP,
                    C,
                    O,
                    KH,
                    KW,
                    OH,
                    OW,
                    dh.pad_before,
                    dw.pad_before,
                    stride_h,
                    stride_w,
                    dilation_h,
                    dilation_w,
                    groups,
                    nchw};
  const size_t es = dtype_size(dt);

  // One lock for the whole call: the plan is built and read under it, and the work it queues
  // (gathers, search, convolution) are launches on the device's stream.
  std::lock_guard<std::mutex> lock(cudnn_mutex());
  cudnnHandle_t h = cu::cudnn(dev);
  const std::shared_ptr<ConvPlan> plan = get_plan(key, dt, types, h, cu::in_capture_scope(dev));

  const Layout plan_layout = plan->layout;
  const bool same_layout = (plan_layout == Layout::NCHW) == nchw;

  // cuDNN's input: x itself (in the plan's layout, aligned, no extra padding), else a gathered
  // copy.
  Tensor xc = x;
  if (plan_layout == Layout::NCHW && (!same_layout || pad || !aligned(x.raw_data()))) {
    xc = detail::empty(TensorShape{N, C, HP, WP}, dt, dev);
    cu::nn::gather4(x.raw_data(), xc.raw_data(),
                    gather({N, C, HP, WP}, {xn, xc_, xh, xw}, {N, C, H, W}), es, dev, name());
  } else if (plan_layout == Layout::NHWC && (!same_layout || pad || !aligned(x.raw_data()))) {
    xc = detail::empty(TensorShape{N, HP, WP, C}, dt, dev);
    cu::nn::gather4(x.raw_data(), xc.raw_data(),
                    gather({N, HP, WP, C}, {xn, xh, xw, xc_}, {N, H, W, C}), es, dev, name());
  }
  // Filters: HWIO (KH, KW, CI, O) -> KRSC (O, KH, KW, CI) for NHWC, KCRS (O, CI, KH, KW) for
  // NCHW (CI = C / groups).
  Tensor fc;
  if (plan_layout == Layout::NCHW) {
    fc = detail::empty(TensorShape{O, CI, KH, KW}, dt, dev);
    cu::nn::gather4(f.raw_data(), fc.raw_data(),
                    gather({O, CI, KH, KW}, {1, O, KW * CI * O, CI * O}, {O, CI, KH, KW}), es, dev,
                    name());
  } else {
    fc = detail::empty(TensorShape{O, KH, KW, CI}, dt, dev);
    cu::nn::gather4(f.raw_data(), fc.raw_data(),
                    gather({O, KH, KW, CI}, {1, KW * CI * O, CI * O, O}, {O, KH, KW, CI}), es, dev,
                    name());
  }
  // cuDNN's output: y itself (in the plan's layout, aligned), else a temporary copied/gathered
  // into y below.
  const bool direct_out = same_layout && aligned(y.raw_data());
  Tensor yc = y;
  if (!direct_out) {
    yc = detail::empty(
        plan_layout == Layout::NCHW ? TensorShape{N, O, OH, OW} : TensorShape{N, OH, OW, O}, dt,
        dev);
  }

  if (!plan->found) find_algorithm(*plan, key, dt, h, dev, xc.raw_data(), fc.raw_data(),
                                   yc.raw_data());
  Tensor ws = cu::workspace(dev, plan->workspace_bytes);
  // Scaling factors are double for double data, float otherwise.
  const float one_f = 1.0f, zero_f = 0.0f;
  const double one_d = 1.0, zero_d = 0.0;
  const void* alpha = dt == float64 ? static_cast<const void*>(&one_d) : &one_f;
  const void* beta = dt == float64 ? static_cast<const void*>(&zero_d) : &zero_f;
  TF_CUDNN_CHECK(cudnnConvolutionForward(h, alpha, plan->x, xc.raw_data(), plan->w, fc.raw_data(),
                                         plan->conv, plan->algo, ws.raw_data(),
                                         plan->workspace_bytes, beta, plan->y, yc.raw_data()));

  if (!same_layout && plan_layout == Layout::NCHW) {  // (N, O, OH, OW) -> (N, OH, OW, O)
    cu::nn::gather4(yc.raw_data(), y.raw_data(),
                    gather({N, OH, OW, O}, {O * OH * OW, OW, 1, OH * OW}, {N, OH, OW, O}), es,
                    dev, name());
  } else if (!same_layout) {  // (N, OH, OW, O) -> (N, O, OH, OW)
    cu::nn::gather4(yc.raw_data(), y.raw_data(),
                    gather({N, O, OH, OW}, {OH * OW * O, 1, OW * O, O}, {N, O, OH, OW}), es, dev,
                    name());
  } else if (!direct_out) {
    TF_CUDA_CHECK(cudaMemcpyAsync(y.raw_data(), yc.raw_data(), y.nbytes(),
                                  cudaMemcpyDeviceToDevice, cu::stream(dev)));
  }
}

namespace {

template <class P>
cu::nn::PoolGeom pool_geometry(const P& p, const Tensor& x, const Tensor& y) {
  cu::nn::PoolGeom g{};
  g.n = x.shape()[0], g.h = x.shape()[1], g.w = x.shape()[2], g.c = x.shape()[3];
  g.oh = y.shape()[1], g.ow = y.shape()[2];
  g.kh = p.k_h, g.kw = p.k_w, g.sh = p.stride_h, g.sw = p.stride_w;
  g.pt = detail::window_dim(g.h, g.kh, p.stride_h, 1, p.same).pad_before;
  g.pl = detail::window_dim(g.w, g.kw, p.stride_w, 1, p.same).pad_before;
  return g;
}

}  // namespace

void MaxPool2D::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  if (out[0].num_elements() == 0) return;
  if (is_bool(in[0].dtype())) {
    TF_THROW(UnimplementedError, name(), "has no CUDA kernel for bool tensors");
  }
  cu::nn::max_pool2d(in[0], out[0], pool_geometry(*this, in[0], out[0]));
}

void AvgPool2D::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  if (out[0].num_elements() == 0) return;
  if (!is_floating(in[0].dtype())) {
    TF_THROW(UnimplementedError, name(), "has no CUDA kernel for {} tensors",
             dtype_name(in[0].dtype()));
  }
  cu::nn::avg_pool2d(in[0], out[0], pool_geometry(*this, in[0], out[0]));
}

}  // namespace tapeflow::prims
