// CUDA gradient kernels of conv2d and pooling (host side; kernels in ops/cuda/nn_grad.cu).
//  - Conv2DBackpropInput / Conv2DBackpropFilter, float32/float16/bfloat16: cuDNN's
//    cudnnConvolutionBackwardData / cudnnConvolutionBackwardFilter on NHWC tensors. cuDNN wants
//    KRSC (OHWI) filters, so HWIO filters are transposed in and out. cuDNN pads symmetrically;
//    TF's SAME padding may put one more row/column after than before, so the input side is
//    grown by that one row/column: backward data writes a (H+1, W+1) gradient that is cropped,
//    backward filter reads a zero-padded copy of the input. The algorithm is cuDNN's first
//    heuristic choice that runs, cached per shape; float32 uses FMA math unless TF32 is enabled
//    (tf::config::experimental::enable_tensor_float_32_execution), the half types tensor-op
//    math with float accumulation. float64, and any shape cuDNN runs no algorithm for, use the
//    direct kernels. Groups (filters (KH, KW, C / G, O)): cudnnSetConvolutionGroupCount and a
//    filter descriptor of C / G channels; the direct kernels index the group's channels.
//    cuDNN gets 256-byte aligned buffers (views at an offset are copied) and
//    this file's own handle per device, used under one lock.
//  - MaxPool2DGrad / AvgPool2DGrad: direct gather kernels for every dtype (exact, and the same
//    first-maximum rule as the CPU kernel).
#include "ops/nn_grad.h"

#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/check.h"
#include "core/cuda/context.h"
#include "core/device.h"
#include "core/log.h"
#include "ops/cuda/handles.h"
#include "ops/cuda/nn_grad_kernels.h"
#include "ops/nn.h"

namespace tapeflow::prims {

namespace {

namespace cu = ::tapeflow::detail::cuda;
namespace ng = ::tapeflow::cuda::nngrad;

// ---------------------------------------------------------------- geometry

struct ConvGeom {
  ng::ConvGeom k;  // what the kernels need
  int64_t pb, pr;  // padding after (bottom, right)
};

template <class P>
ConvGeom conv_geometry(const P& p, const TensorShape& x, const TensorShape& f,
                       const TensorShape& y) {
  ConvGeom g{};
  g.k.n = x[0], g.k.h = x[1], g.k.w = x[2], g.k.c = x[3];
  g.k.kh = f[0], g.k.kw = f[1], g.k.o = f[3];
  g.k.oh = y[1], g.k.ow = y[2];
  g.k.sh = p.stride_h, g.k.sw = p.stride_w, g.k.dh = p.dilation_h, g.k.dw = p.dilation_w;
  const auto dh = detail::window_dim(g.k.h, g.k.kh, p.stride_h, p.dilation_h, p.same);
  const auto dw = detail::window_dim(g.k.w, g.k.kw, p.stride_w, p.dilation_w, p.same);
  g.k.pt = dh.pad_before, g.pb = dh.pad_after, g.k.pl = dw.pad_before, g.pr = dw.pad_after;
  g.k.groups = p.groups;
  return g;
}

template <class P>
ng::PoolGeom pool_geometry(const P& p, const TensorShape& x, const TensorShape& y) {
  ng::PoolGeom g{};
  g.n = x[0], g.h = x[1], g.w = x[2], g.c = x[3];
  g.oh = y[1], g.ow = y[2];
  g.kh = p.k_h, g.kw = p.k_w, g.sh = p.stride_h, g.sw = p.stride_w;
  g.pt = detail::window_dim(g.h, g.kh, p.stride_h, 1, p.same).pad_before;
  g.pl = detail::window_dim(g.w, g.kw, p.stride_w, 1, p.same).pad_before;
  return g;
}

void zero(Tensor& t) {
  if (t.nbytes() == 0) return;
  TF_CUDA_CHECK(cudaMemsetAsync(t.raw_data(), 0, t.nbytes(), cu::stream(t.placement())));
}

// ---------------------------------------------------------------- cuDNN

// cuDNN runs on ops/cuda/handles.h's handle of the device, under its lock (cu::cudnn_mutex()):
// inside a CUDA-graph capture that handle is the twin bound to the capture stream, so the
// backward convolutions are recorded with the rest of the graph. (A handle of this file's own,
// bound to the main stream, ran them outside the capture: the graph replayed stale gradients.)

// cuDNN gets 256-byte aligned pointers (fresh allocations are): a view at an offset is copied.
bool aligned(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 256 == 0;
}
Tensor aligned_copy(const Tensor& t) {
  if (aligned(t.raw_data())) return t;
  Tensor c = detail::empty(t.shape(), t.dtype(), t.placement());
  TF_CUDA_CHECK(cudaMemcpyAsync(c.raw_data(), t.raw_data(), t.nbytes(), cudaMemcpyDeviceToDevice,
                                cu::stream(t.placement())));
  return c;
}

// Candidates needing more workspace than this are skipped (as ops/cuda/nn.cpp does).
constexpr size_t kMaxWorkspace = size_t{1} << 30;

struct TensorDesc {
  cudnnTensorDescriptor_t d = nullptr;
  TensorDesc() { TF_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d)); }
  ~TensorDesc() { cudnnDestroyTensorDescriptor(d); }
  TensorDesc(const TensorDesc&) = delete;
  TensorDesc& operator=(const TensorDesc&) = delete;
};
struct FilterDesc {
  cudnnFilterDescriptor_t d = nullptr;
  FilterDesc() { TF_CUDNN_CHECK(cudnnCreateFilterDescriptor(&d)); }
  ~FilterDesc() { cudnnDestroyFilterDescriptor(d); }
  FilterDesc(const FilterDesc&) = delete;
  FilterDesc& operator=(const FilterDesc&) = delete;
};
struct ConvDesc {
  cudnnConvolutionDescriptor_t d = nullptr;
  ConvDesc() { TF_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&d)); }
  ~ConvDesc() { cudnnDestroyConvolutionDescriptor(d); }
  ConvDesc(const ConvDesc&) = delete;
  ConvDesc& operator=(const ConvDesc&) = delete;
};

// The descriptors of one convolution as cuDNN sees it: input grown to (hp, wp) so that the
// symmetric padding (pt, pl) gives TF's output size.
struct CudnnConv {
  TensorDesc x, y;
  FilterDesc w;
  ConvDesc conv;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  int64_t hp = 0, wp = 0;
};

cudnnDataType_t cudnn_type(DType d) {
  if (d == float16) return CUDNN_DATA_HALF;
  if (d == bfloat16) return CUDNN_DATA_BFLOAT16;
  return CUDNN_DATA_FLOAT;
}

// cuDNN's legacy API takes int sizes and is not documented for 2^31 elements or more.
bool cudnn_sizes_ok(const ConvGeom& g) {
  const auto& k = g.k;
  const int64_t hp = k.h + (g.pb - k.pt), wp = k.w + (g.pr - k.pl);
  const int64_t biggest = std::max(
      {k.n * hp * wp * k.c, k.n * k.oh * k.ow * k.o, k.kh * k.kw * (k.c / k.groups) * k.o});
  return biggest < INT_MAX && cu::cudnn_window_fits(hp, k.pt, k.kh, k.sh, k.dh) &&
         cu::cudnn_window_fits(wp, k.pl, k.kw, k.sw, k.dw);
}

// cuDNN 9 groups statuses by thousands: 3000-3999 are the NOT_SUPPORTED family.
bool not_supported(cudnnStatus_t st) {
#if CUDNN_MAJOR >= 9
  return static_cast<int>(st) / 1000 == static_cast<int>(CUDNN_STATUS_NOT_SUPPORTED) / 1000;
#else
  return st == CUDNN_STATUS_NOT_SUPPORTED;
#endif
}

[[noreturn]] void throw_cudnn(const char* call, cudnnStatus_t st) {
  cu::throw_library_error(call, "cuDNN", static_cast<int>(st), cudnnGetErrorString(st));
}

// A descriptor call's status: true on success, false for a NOT_SUPPORTED status (the caller
// uses the direct kernels); any other failure throws.
bool described(cudnnStatus_t st, const char* call) {
  if (st == CUDNN_STATUS_SUCCESS) return true;
  if (not_supported(st)) return false;
  throw_cudnn(call, st);
}

// False when cuDNN does not support these descriptors (the caller uses the direct kernels).
bool describe(CudnnConv& d, const ConvGeom& g, DType dtype, const char* op) {
  const auto& k = g.k;
  const cudnnDataType_t t = cudnn_type(dtype);
  d.hp = k.h + (g.pb - k.pt);  // pad_after - pad_before is 0 or 1
  d.wp = k.w + (g.pr - k.pl);
  auto i = [](int64_t v) { return static_cast<int>(v); };
  if (!described(
          cudnnSetTensor4dDescriptor(d.x.d, CUDNN_TENSOR_NHWC, t, i(k.n), i(k.c), i(d.hp), i(d.wp)),
          "cudnnSetTensor4dDescriptor") ||
      !described(
          cudnnSetTensor4dDescriptor(d.y.d, CUDNN_TENSOR_NHWC, t, i(k.n), i(k.o), i(k.oh), i(k.ow)),
          "cudnnSetTensor4dDescriptor") ||
      // NHWC filters are KRSC: (O, KH, KW, C / groups) in memory.
      !described(cudnnSetFilter4dDescriptor(d.w.d, t, CUDNN_TENSOR_NHWC, i(k.o), i(k.c / k.groups),
                                            i(k.kh), i(k.kw)),
                 "cudnnSetFilter4dDescriptor") ||
      !described(
          cudnnSetConvolution2dDescriptor(d.conv.d, i(k.pt), i(k.pl), i(k.sh), i(k.sw), i(k.dh),
                                          i(k.dw), CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
          "cudnnSetConvolution2dDescriptor") ||
      !described(cudnnSetConvolutionGroupCount(d.conv.d, i(k.groups)),
                 "cudnnSetConvolutionGroupCount"))
    return false;
  if (dtype == float32)
    d.math = config::experimental::tensor_float_32_execution_enabled() ? CUDNN_DEFAULT_MATH
                                                                       : CUDNN_FMA_MATH;
  else
    d.math = CUDNN_TENSOR_OP_MATH;
  if (!described(cudnnSetConvolutionMathType(d.conv.d, d.math), "cudnnSetConvolutionMathType"))
    return false;
  // The grown input with symmetric padding must give exactly TF's output size.
  int n = 0, c = 0, h = 0, w = 0;
  if (!described(cudnnGetConvolution2dForwardOutputDim(d.conv.d, d.x.d, d.w.d, &n, &c, &h, &w),
                 "cudnnGetConvolution2dForwardOutputDim"))
    return false;
  if (n != k.n || c != k.o || h != k.oh || w != k.ow)
    TF_THROW(InternalError, op,
             "cuDNN's output size ({}, {}, {}, {}) differs from TF's ({}, {}, {}, {}) for input "
             "(N={}, H={}, W={}, C={}) grown to ({}, {})",
             n, h, w, c, k.n, k.oh, k.ow, k.o, k.n, k.h, k.w, k.c, d.hp, d.wp);
  return true;
}

// The algorithm chosen for one convolution shape; -1 means cuDNN runs none (direct kernel).
struct AlgoKey {
  int device, dtype, math, filter;
  int64_t n, hp, wp, c, kh, kw, o, oh, ow, sh, sw, dh, dw, pt, pl, groups;
  bool operator==(const AlgoKey&) const = default;
};
struct AlgoKeyHash {
  size_t operator()(const AlgoKey& k) const {
    const int64_t v[] = {k.device, k.dtype, k.math, k.filter, k.n,  k.hp,    k.wp,
                         k.c,      k.kh,    k.kw,   k.o,      k.oh, k.ow,    k.sh,
                         k.sw,     k.dh,    k.dw,   k.pt,     k.pl, k.groups};
    size_t h = 1469598103934665603ull;
    for (int64_t x : v) h = (h ^ static_cast<size_t>(x)) * 1099511628211ull;
    return h;
  }
};

class AlgoCache {
 public:
  bool find(const AlgoKey& k, int* algo) {
    std::lock_guard lock(mu_);
    auto it = map_.find(k);
    if (it == map_.end()) return false;
    *algo = it->second;
    return true;
  }
  void put(const AlgoKey& k, int algo) {
    std::lock_guard lock(mu_);
    if (map_.size() >= 256) map_.clear();  // many shapes means a changing model: start over
    map_[k] = algo;
  }

 private:
  std::mutex mu_;
  std::unordered_map<AlgoKey, int, AlgoKeyHash> map_;
};

AlgoCache& algo_cache() {
  static auto* cache = new AlgoCache();  // leaked: used until exit
  return *cache;
}

AlgoKey algo_key(Device dev, DType dtype, const CudnnConv& d, const ConvGeom& g, bool filter) {
  const auto& k = g.k;
  return AlgoKey{dev.index,
                 static_cast<int>(dtype.id),
                 static_cast<int>(d.math),
                 filter ? 1 : 0,
                 k.n,
                 d.hp,
                 d.wp,
                 k.c,
                 k.kh,
                 k.kw,
                 k.o,
                 k.oh,
                 k.ow,
                 k.sh,
                 k.sw,
                 k.dh,
                 k.dw,
                 k.pt,
                 k.pl,
                 k.groups};
}

std::string describe_key(const AlgoKey& k) {
  return fmt::format(
      "{} input (N={}, H={}, W={}, C={}) as grown for cuDNN, filters ({}, {}, {}, {}) in {} "
      "groups, dy ({}, {}), strides ({}, {}), dilations ({}, {}), padding ({}, {}), math type {}",
      dtype_name(DType{static_cast<DTypeId>(k.dtype)}), k.n, k.hp, k.wp, k.c, k.kh, k.kw,
      k.c / k.groups, k.o, k.groups, k.oh, k.ow, k.sh, k.sw, k.dh, k.dw, k.pt, k.pl, k.math);
}

// Runs `run(algo, workspace, bytes)` with the cached algorithm, or on the first call for this
// shape tries cuDNN's heuristic ranking in order (an algorithm may still report a NOT_SUPPORTED
// status when it is called; nothing is queued then) and caches the first that runs. Returns false
// when none runs: the caller uses the direct kernel.
template <class Perf, class GetWorkspace, class Run>
bool run_cudnn(const AlgoKey& key, Device dev, const Perf* perf, int returned,
               GetWorkspace workspace_size, Run run, const char* call) {
  for (int i = 0; i < returned; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS) continue;
    const int algo = static_cast<int>(perf[i].algo);
    size_t bytes = 0;
    if (workspace_size(algo, &bytes) != CUDNN_STATUS_SUCCESS || bytes > kMaxWorkspace) continue;
    const Tensor ws = cu::workspace(dev, bytes);
    const cudnnStatus_t st = run(algo, ws.raw_data(), bytes);
    if (st == CUDNN_STATUS_SUCCESS) {
      algo_cache().put(key, algo);
      TF_LOG_DEBUG("{}: algorithm {} ({} bytes of workspace, heuristic rank {}) for {}", call, algo,
                   bytes, i, describe_key(key));
      return true;
    }
    if (!not_supported(st)) throw_cudnn(call, st);
  }
  algo_cache().put(key, -1);
  TF_LOG_DEBUG("{}: no algorithm runs for {}; using the direct kernel", call, describe_key(key));
  return false;
}

// dx (NHWC, grown to hp x wp) from OHWI filters and dy. False: no cuDNN algorithm runs.
bool cudnn_backward_data(Device dev, DType dtype, const CudnnConv& d, const ConvGeom& g,
                         const void* w_ohwi, const void* dy, void* dx_grown) {
  cudnnHandle_t h = cu::cudnn(dev);
  const float one = 1.0f, zero_f = 0.0f;  // scaling factors are float for these data types
  const AlgoKey key = algo_key(dev, dtype, d, g, false);
  auto workspace_size = [&](int algo, size_t* bytes) {
    return cudnnGetConvolutionBackwardDataWorkspaceSize(
        h, d.w.d, d.y.d, d.conv.d, d.x.d, static_cast<cudnnConvolutionBwdDataAlgo_t>(algo), bytes);
  };
  auto run = [&](int algo, void* ws, size_t bytes) {
    return cudnnConvolutionBackwardData(h, &one, d.w.d, w_ohwi, d.y.d, dy, d.conv.d,
                                        static_cast<cudnnConvolutionBwdDataAlgo_t>(algo), ws, bytes,
                                        &zero_f, d.x.d, dx_grown);
  };
  int algo = 0;
  if (algo_cache().find(key, &algo)) {
    if (algo < 0) return false;
    size_t bytes = 0;
    TF_CUDNN_CHECK(workspace_size(algo, &bytes));
    const Tensor ws = cu::workspace(dev, bytes);
    TF_CUDNN_CHECK(run(algo, ws.raw_data(), bytes));
    return true;
  }
  cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
  int returned = 0;
  const cudnnStatus_t st = cudnnGetConvolutionBackwardDataAlgorithm_v7(
      h, d.w.d, d.y.d, d.conv.d, d.x.d, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &returned, perf);
  if (not_supported(st))
    returned = 0;
  else if (st != CUDNN_STATUS_SUCCESS)
    throw_cudnn("cudnnGetConvolutionBackwardDataAlgorithm_v7", st);
  return run_cudnn(key, dev, perf, returned, workspace_size, run, "cudnnConvolutionBackwardData");
}

// OHWI filter gradient from x (NHWC, grown to hp x wp) and dy. False: no cuDNN algorithm runs.
bool cudnn_backward_filter(Device dev, DType dtype, const CudnnConv& d, const ConvGeom& g,
                           const void* x_grown, const void* dy, void* dw_ohwi) {
  cudnnHandle_t h = cu::cudnn(dev);
  const float one = 1.0f, zero_f = 0.0f;
  const AlgoKey key = algo_key(dev, dtype, d, g, true);
  auto workspace_size = [&](int algo, size_t* bytes) {
    return cudnnGetConvolutionBackwardFilterWorkspaceSize(
        h, d.x.d, d.y.d, d.conv.d, d.w.d, static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo),
        bytes);
  };
  auto run = [&](int algo, void* ws, size_t bytes) {
    return cudnnConvolutionBackwardFilter(h, &one, d.x.d, x_grown, d.y.d, dy, d.conv.d,
                                          static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo), ws,
                                          bytes, &zero_f, d.w.d, dw_ohwi);
  };
  int algo = 0;
  if (algo_cache().find(key, &algo)) {
    if (algo < 0) return false;
    size_t bytes = 0;
    TF_CUDNN_CHECK(workspace_size(algo, &bytes));
    const Tensor ws = cu::workspace(dev, bytes);
    TF_CUDNN_CHECK(run(algo, ws.raw_data(), bytes));
    return true;
  }
  cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
  int returned = 0;
  const cudnnStatus_t st = cudnnGetConvolutionBackwardFilterAlgorithm_v7(
      h, d.x.d, d.y.d, d.conv.d, d.w.d, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &returned, perf);
  if (not_supported(st))
    returned = 0;
  else if (st != CUDNN_STATUS_SUCCESS)
    throw_cudnn("cudnnGetConvolutionBackwardFilterAlgorithm_v7", st);
  return run_cudnn(key, dev, perf, returned, workspace_size, run, "cudnnConvolutionBackwardFilter");
}

// cuDNN's backward data into dx (HWIO filters); false when cuDNN runs nothing for this shape.
bool cudnn_backprop_input(const ConvGeom& g, DType dtype, Device dev, const Tensor& f,
                          const Tensor& dy, Tensor& dx, const char* op) {
  if (dtype == float64 || !cudnn_sizes_ok(g)) return false;
  const auto& k = g.k;
  std::lock_guard<std::mutex> lock(cu::cudnn_mutex());
  CudnnConv d;
  if (!describe(d, g, dtype, op)) return false;
  const size_t es = dtype_size(dtype);
  const int64_t ci = k.c / k.groups;  // the filters' input channels
  // HWIO (KH*KW*CI rows, O columns) -> OHWI.
  Tensor w = detail::empty(TensorShape{k.o, k.kh, k.kw, ci}, dtype, dev);
  ng::transpose(op, f.raw_data(), w.raw_data(), k.kh * k.kw * ci, k.o, es, dev);
  const Tensor dya = aligned_copy(dy);
  // cuDNN writes dx itself unless it is grown (the extra bottom row / right column is dropped
  // below) or unaligned.
  const bool grown = d.hp != k.h || d.wp != k.w;
  const bool direct_out = !grown && aligned(dx.raw_data());
  Tensor target = direct_out ? dx : detail::empty(TensorShape{k.n, d.hp, d.wp, k.c}, dtype, dev);
  if (!cudnn_backward_data(dev, dtype, d, g, w.raw_data(), dya.raw_data(), target.raw_data()))
    return false;
  if (!direct_out)
    ng::resize_nhwc(op, target.raw_data(), k.n, d.hp, d.wp, k.c, dx.raw_data(), k.h, k.w, es, dev);
  return true;
}

// cuDNN's backward filter into df (HWIO); false when cuDNN runs nothing for this shape.
bool cudnn_backprop_filter(const ConvGeom& g, DType dtype, Device dev, const Tensor& x,
                           const Tensor& dy, Tensor& df, const char* op) {
  if (dtype == float64 || !cudnn_sizes_ok(g)) return false;
  const auto& k = g.k;
  std::lock_guard<std::mutex> lock(cu::cudnn_mutex());
  CudnnConv d;
  if (!describe(d, g, dtype, op)) return false;
  const size_t es = dtype_size(dtype);
  Tensor xg;
  if (d.hp != k.h || d.wp != k.w) {  // zero rows/columns at the bottom/right: TF's extra padding
    xg = detail::empty(TensorShape{k.n, d.hp, d.wp, k.c}, dtype, dev);
    ng::resize_nhwc(op, x.raw_data(), k.n, k.h, k.w, k.c, xg.raw_data(), d.hp, d.wp, es, dev);
  } else {
    xg = aligned_copy(x);
  }
  const Tensor dya = aligned_copy(dy);
  const int64_t ci = k.c / k.groups;  // the filters' input channels
  Tensor w = detail::empty(TensorShape{k.o, k.kh, k.kw, ci}, dtype, dev);
  if (!cudnn_backward_filter(dev, dtype, d, g, xg.raw_data(), dya.raw_data(), w.raw_data()))
    return false;
  // OHWI (O rows, KH*KW*CI columns) -> HWIO.
  ng::transpose(op, w.raw_data(), df.raw_data(), k.o, k.kh * k.kw * ci, es, dev);
  return true;
}

}  // namespace

// ================================================================ kernels

void Conv2DBackpropInput::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  const Tensor& f = in[0];
  const Tensor& dy = in[1];
  Tensor& dx = out[0];
  if (dx.num_elements() == 0) return;
  if (dy.num_elements() == 0) return zero(dx);  // no output channels or no windows
  const Device dev = dx.placement();
  const ConvGeom g = conv_geometry(*this, dx.shape(), f.shape(), dy.shape());
  if (!cudnn_backprop_input(g, dx.dtype(), dev, f, dy, dx, name()))
    ng::conv_backprop_input_direct(dx.dtype(), g.k, f.raw_data(), dy.raw_data(), dx.raw_data(),
                                   dev);
}

void Conv2DBackpropFilter::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  const Tensor& x = in[0];
  const Tensor& dy = in[1];
  Tensor& df = out[0];
  if (df.num_elements() == 0) return;
  if (dy.num_elements() == 0) return zero(df);  // no batch or no windows: empty sums
  const Device dev = df.placement();
  const ConvGeom g = conv_geometry(*this, x.shape(), df.shape(), dy.shape());
  if (!cudnn_backprop_filter(g, df.dtype(), dev, x, dy, df, name()))
    ng::conv_backprop_filter_direct(df.dtype(), g.k, x.raw_data(), dy.raw_data(), df.raw_data(),
                                    dev);
}

void MaxPool2DGrad::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  Tensor& dx = out[0];
  if (dx.num_elements() == 0) return;
  const ng::PoolGeom g = pool_geometry(*this, dx.shape(), in[1].shape());
  ng::max_pool_grad(dx.dtype(), g, in[0].raw_data(), in[1].raw_data(), dx.raw_data(),
                    dx.placement());
}

void MaxPool2DGradGrad::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  Tensor& y = out[0];
  if (y.num_elements() == 0) return;
  const ng::PoolGeom g = pool_geometry(*this, in[0].shape(), y.shape());
  ng::max_pool_grad_grad(y.dtype(), g, in[0].raw_data(), in[1].raw_data(), y.raw_data(),
                         y.placement());
}

void AvgPool2DGrad::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  Tensor& dx = out[0];
  if (dx.num_elements() == 0) return;
  const ng::PoolGeom g = pool_geometry(*this, dx.shape(), in[0].shape());
  ng::avg_pool_grad(dx.dtype(), g, in[0].raw_data(), dx.raw_data(), dx.placement());
}

}  // namespace tapeflow::prims
