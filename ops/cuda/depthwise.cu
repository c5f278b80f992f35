// CUDA kernels of depthwise convolution and its two gradients (direct kernels; the arithmetic per
// element is too thin for cuDNN's grouped convolution to gain much, and these need no workspace
// or layout changes). Channels are fastest in every index, so neighbouring threads touch
// neighbouring addresses.
//  - forward: one thread per output element, summing its window (compute type: float for the
//    half types);
//  - backprop input: one thread per input element, gathering the outputs whose window holds it;
//  - backprop filter: a block per (tap, 32 filter channels, slice of output positions); threads
//    along x take the channels, along y the positions, reduce through shared memory and add
//    their sum to a compute-type buffer with atomicAdd, converted to the dtype at the end.
#include <algorithm>
#include <type_traits>

#include "ops/cuda/common.cuh"
#include "ops/depthwise.h"

namespace tapeflow::prims {

namespace {

using detail::DepthwiseGeom;
using ::tapeflow::cuda::dcompute_t;
using ::tapeflow::cuda::grid_for;
using ::tapeflow::cuda::kThreads;
using ::tapeflow::cuda::load;
using ::tapeflow::cuda::store;

template <class T>
__global__ void forward_kernel(const T* __restrict__ x, const T* __restrict__ f, T* __restrict__ y,
                               DepthwiseGeom g, int64_t total) {
  using A = dcompute_t<T>;
  const int64_t cm = g.c * g.m;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += step) {
    int64_t r = i;
    const int64_t j = r % cm;
    r /= cm;
    const int64_t ow = r % g.ow;
    r /= g.ow;
    const int64_t oh = r % g.oh;
    const int64_t n = r / g.oh;
    const int64_t c = j / g.m;
    A acc = A(0);
    for (int64_t kh = 0; kh < g.kh; ++kh) {
      const int64_t ih = oh * g.sh - g.pt + kh * g.dh;
      if (ih < 0 || ih >= g.h) continue;
      for (int64_t kw = 0; kw < g.kw; ++kw) {
        const int64_t iw = ow * g.sw - g.pl + kw * g.dw;
        if (iw < 0 || iw >= g.w) continue;
        acc += load(x[((n * g.h + ih) * g.w + iw) * g.c + c]) * load(f[(kh * g.kw + kw) * cm + j]);
      }
    }
    y[i] = store<T>(acc);
  }
}

template <class T>
__global__ void backprop_input_kernel(const T* __restrict__ f, const T* __restrict__ dy,
                                      T* __restrict__ dx, DepthwiseGeom g, int64_t total) {
  using A = dcompute_t<T>;
  const int64_t cm = g.c * g.m;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += step) {
    int64_t r = i;
    const int64_t c = r % g.c;
    r /= g.c;
    const int64_t iw = r % g.w;
    r /= g.w;
    const int64_t ih = r % g.h;
    const int64_t n = r / g.h;
    A acc = A(0);
    for (int64_t kh = 0; kh < g.kh; ++kh) {
      const int64_t th = ih + g.pt - kh * g.dh;
      if (th < 0 || th % g.sh != 0 || th / g.sh >= g.oh) continue;
      const int64_t oh = th / g.sh;
      for (int64_t kw = 0; kw < g.kw; ++kw) {
        const int64_t tw = iw + g.pl - kw * g.dw;
        if (tw < 0 || tw % g.sw != 0 || tw / g.sw >= g.ow) continue;
        const int64_t ow = tw / g.sw;
        const T* dyo = dy + ((n * g.oh + oh) * g.ow + ow) * cm + c * g.m;
        const T* fk = f + (kh * g.kw + kw) * cm + c * g.m;
        for (int64_t k = 0; k < g.m; ++k) acc += load(dyo[k]) * load(fk[k]);
      }
    }
    dx[i] = store<T>(acc);
  }
}

constexpr int kFilterX = 32;  // filter channels per block
constexpr int kFilterY = 8;   // output positions summed side by side per block

// grid: x = taps * channel tiles, y = slices of the N * OH * OW output positions.
template <class T, class A>
__global__ void backprop_filter_kernel(const T* __restrict__ x, const T* __restrict__ dy,
                                       A* __restrict__ acc, DepthwiseGeom g, int64_t tiles,
                                       int64_t positions) {
  __shared__ A part[kFilterY][kFilterX];
  const int64_t cm = g.c * g.m;
  const int64_t tap = blockIdx.x / tiles;
  const int64_t j = (blockIdx.x % tiles) * kFilterX + threadIdx.x;
  const int64_t kh = tap / g.kw, kw = tap % g.kw;
  const int64_t per_slice = (positions + gridDim.y - 1) / gridDim.y;
  const int64_t p0 = blockIdx.y * per_slice;
  const int64_t p1 = p0 + per_slice < positions ? p0 + per_slice : positions;
  A s = A(0);
  if (j < cm) {
    const int64_t c = j / g.m;
    for (int64_t p = p0 + threadIdx.y; p < p1; p += kFilterY) {
      int64_t r = p;
      const int64_t ow = r % g.ow;
      r /= g.ow;
      const int64_t oh = r % g.oh;
      const int64_t n = r / g.oh;
      const int64_t ih = oh * g.sh - g.pt + kh * g.dh;
      const int64_t iw = ow * g.sw - g.pl + kw * g.dw;
      if (ih < 0 || ih >= g.h || iw < 0 || iw >= g.w) continue;
      s += load(x[((n * g.h + ih) * g.w + iw) * g.c + c]) * load(dy[p * cm + j]);
    }
  }
  part[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && j < cm) {
    A t = A(0);
    for (int y = 0; y < kFilterY; ++y) t += part[y][threadIdx.x];
    atomicAdd(acc + tap * cm + j, t);
  }
}

template <class T, class A>
__global__ void store_kernel(const A* __restrict__ src, T* __restrict__ dst, int64_t total) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += step)
    dst[i] = store<T>(src[i]);
}

}  // namespace

void DepthwiseConv2D::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  const int64_t total = out[0].num_elements();
  if (total == 0) return;
  const DepthwiseGeom g = detail::depthwise_geometry(win, in[0].shape(), in[1].shape());
  const Device dev = out[0].placement();
  cudaStream_t s = detail::cuda::stream(dev);
  TF_CUDA_DISPATCH_FLOAT_TYPES(in[0].dtype(), {
    forward_kernel<T><<<grid_for(total, dev), kThreads, 0, s>>>(
        cuda::dptr<T>(in[0]), cuda::dptr<T>(in[1]), cuda::dptr<T>(out[0]), g, total);
  });
  detail::cuda::check_launch(name());
}

void DepthwiseConv2DBackpropInput::eval_cuda(std::span<const Tensor> in,
                                             std::span<Tensor> out) const {
  const int64_t total = out[0].num_elements();
  if (total == 0) return;
  const DepthwiseGeom g = detail::depthwise_geometry(win, out[0].shape(), in[0].shape());
  const Device dev = out[0].placement();
  cudaStream_t s = detail::cuda::stream(dev);
  TF_CUDA_DISPATCH_FLOAT_TYPES(in[0].dtype(), {
    backprop_input_kernel<T><<<grid_for(total, dev), kThreads, 0, s>>>(
        cuda::dptr<T>(in[0]), cuda::dptr<T>(in[1]), cuda::dptr<T>(out[0]), g, total);
  });
  detail::cuda::check_launch(name());
}

void DepthwiseConv2DBackpropFilter::eval_cuda(std::span<const Tensor> in,
                                              std::span<Tensor> out) const {
  const int64_t total = out[0].num_elements();
  if (total == 0) return;
  const DepthwiseGeom g = detail::depthwise_geometry(win, in[0].shape(), out[0].shape());
  const Device dev = out[0].placement();
  cudaStream_t s = detail::cuda::stream(dev);
  const int64_t cm = g.c * g.m;
  const int64_t tiles = (cm + kFilterX - 1) / kFilterX;
  const int64_t positions = g.n * g.oh * g.ow;
  const int64_t blocks_x = g.kh * g.kw * tiles;
  // Enough position slices to give every SM a few blocks, none shorter than 256 positions.
  const int64_t sms = detail::cuda::properties(dev).multiProcessorCount;
  int64_t slices = (4 * sms + blocks_x - 1) / blocks_x;
  slices = std::max<int64_t>(1, std::min<int64_t>({slices, (positions + 255) / 256, 65535}));
  TF_CUDA_DISPATCH_FLOAT_TYPES(in[0].dtype(), {
    using A = dcompute_t<T>;
    Tensor buf =
        detail::empty(TensorShape{total}, std::is_same_v<A, double> ? float64 : float32, dev);
    cudaMemsetAsync(buf.raw_data(), 0, buf.nbytes(), s);
    if (positions > 0) {
      backprop_filter_kernel<T, A>
          <<<dim3(static_cast<unsigned>(blocks_x), static_cast<unsigned>(slices)),
             dim3(kFilterX, kFilterY), 0, s>>>(cuda::dptr<T>(in[0]), cuda::dptr<T>(in[1]),
                                               static_cast<A*>(buf.raw_data()), g, tiles,
                                               positions);
    }
    store_kernel<T, A><<<grid_for(total, dev), kThreads, 0, s>>>(
        static_cast<const A*>(buf.raw_data()), cuda::dptr<T>(out[0]), total);
  });
  detail::cuda::check_launch(name());
}

}  // namespace tapeflow::prims
