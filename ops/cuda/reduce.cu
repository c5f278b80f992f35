// CUDA kernels of the reductions (ReduceSum/Prod/Max/Min) and ArgMax/ArgMin.
//
// The host plan is the CPU kernel's (ops/cpu/reduce.cpp): drop size-1 dimensions, merge
// adjacent dimensions that are all reduced or all kept, then remove the last reduced group pass
// after pass. Every pass is an (outer, R, inner) reduction:
//   inner == 1 (rows):  R <= 1024: a warp per row, or a group of 1 to 16 lanes for short rows
//                       (about one 16-byte vector per lane); longer rows: a block per row; when
//                       there are too few rows to fill the device (a full reduction), each row
//                       is cut into equal chunks, one block each, whose partials a second
//                       (rows) pass combines: two kernels, no atomics, so results are
//                       deterministic. Rows are read with 16-byte vector loads (four in flight
//                       per thread) after a scalar head up to the first aligned address.
//   inner < 32:         one block per (outer, chunk of R); its 256 threads read consecutive
//                       elements (thread t always sees column t % inner) and combine the
//                       columns through shared memory in a fixed order.
//   inner >= 32:        (32 x 8) blocks over 32-column tiles; the 8 warps take every 8th row;
//                       R is split over gridDim.y (and a second pass) when the tiles alone do
//                       not fill the device.
// Intermediate results stay in the accumulator type, as on the CPU: float16/bfloat16/float32
// sums accumulate in double (each 16-byte vector, or four rows of a column, is first summed in
// float32, as the CPU's float32 lanes do), float64 sums in double; integer sums and products
// wrap around in the unsigned type of 32 or 64 bits (the same result modulo 2^bits as the CPU's
// type of the element's width); products and max/min of the half types in float. Max/min
// propagate NaN. Block sizes and grids depend only on the shape and the device, so a result
// does not change from run to run.
//
// ArgMax/ArgMin (outer, R, inner): a warp or block per row (inner == 1) or (32 x 8) tiles of
// columns; each thread scans its elements in increasing order keeping the first best one, and
// partial results are combined by (value, then smaller index), which gives the CPU's first
// index on ties; NaN counts as larger than every number.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

#include "ops/cuda/common.cuh"
#include "ops/reduce.h"

namespace tapeflow::prims {

namespace {

namespace tc = ::tapeflow::cuda;
namespace dc = ::tapeflow::detail::cuda;

enum class Kind { Sum, Prod, Max, Min };

constexpr int kBlock = 256;          // threads per block of every reduction kernel
constexpr int64_t kWarpRowMax = 1024;  // rows up to this length: one warp per row

// ---------------------------------------------------------------------------------------------
// Types

// The element type kernels read: bool is read as its byte (0 or 1).
template <class T>
using read_t = std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>;

// Accumulator of reduction K over the (read) element type T; see the file comment.
template <Kind K, class T>
struct acc_type {
  using C = tc::dcompute_t<T>;
  using Wrap = std::conditional_t<sizeof(C) == 8, unsigned long long, unsigned int>;
  using type = std::conditional_t<
      std::is_floating_point_v<C>,
      std::conditional_t<K == Kind::Sum, double, C>,
      std::conditional_t<K == Kind::Sum || K == Kind::Prod, Wrap,
                         std::conditional_t<(sizeof(C) < 4), int, C>>>;
};
template <Kind K, class T>
using acc_t = typename acc_type<K, T>::type;

// What a thread sums a vector (or four column rows) in before adding it to the accumulator:
// float for float sums of 32 or 16 bits (as the CPU's lanes), else the accumulator itself.
template <Kind K, class In, class A>
using lane_t = std::conditional_t<K == Kind::Sum && std::is_same_v<tc::dcompute_t<In>, float>,
                                  float, A>;

template <class T>
struct alignas(16) Vec {
  static constexpr int N = 16 / static_cast<int>(sizeof(T));
  T v[N];
};

// ---------------------------------------------------------------------------------------------
// Device helpers

template <Kind K, class V>
__host__ __device__ __forceinline__ V identity() {
  if constexpr (K == Kind::Sum)
    return V(0);
  else if constexpr (K == Kind::Prod)
    return V(1);
  else if constexpr (K == Kind::Max)
    return std::is_floating_point_v<V> ? -std::numeric_limits<V>::infinity()
                                       : std::numeric_limits<V>::lowest();
  else
    return std::is_floating_point_v<V> ? std::numeric_limits<V>::infinity()
                                       : std::numeric_limits<V>::max();
}

// NaN sticks: a NaN `a` fails the comparison and is kept; a NaN `b` is returned.
template <Kind K, class V>
__device__ __forceinline__ V apply(V a, V b) {
  if constexpr (K == Kind::Sum)
    return static_cast<V>(a + b);
  else if constexpr (K == Kind::Prod)
    return static_cast<V>(a * b);
  else if constexpr (std::is_floating_point_v<V>) {
    const V m = K == Kind::Max ? (b > a ? b : a) : (b < a ? b : a);
    return b != b ? b : m;
  } else if constexpr (K == Kind::Max) {
    return b > a ? b : a;
  } else {
    return b < a ? b : a;
  }
}

template <class V, class In>
__device__ __forceinline__ V ld(In x) {
  return static_cast<V>(tc::load(x));
}

template <class Out, class A>
__device__ __forceinline__ Out to_out(A a) {
  if constexpr (std::is_same_v<Out, __half>)
    return __float2half_rn(static_cast<float>(a));
  else if constexpr (std::is_same_v<Out, __nv_bfloat16>)
    return __float2bfloat16_rn(static_cast<float>(a));
  else
    return static_cast<Out>(a);
}

// Warp shuffle of any 4- or 8-byte value (within segments of `width` lanes).
template <class V>
__device__ __forceinline__ V shfl_down(V v, int delta, int width = 32) {
  static_assert(sizeof(V) == 4 || sizeof(V) == 8);
  if constexpr (sizeof(V) == 8) {
    long long b;
    memcpy(&b, &v, 8);
    b = __shfl_down_sync(0xffffffffu, b, delta, width);
    memcpy(&v, &b, 8);
  } else {
    int b;
    memcpy(&b, &v, 4);
    b = __shfl_down_sync(0xffffffffu, b, delta, width);
    memcpy(&v, &b, 4);
  }
  return v;
}

// The combination of the 32 lanes' values, in lane 0. Every lane of the warp must call it.
template <Kind K, class A>
__device__ __forceinline__ A warp_reduce(A v) {
  for (int d = 16; d > 0; d >>= 1) v = apply<K>(v, shfl_down(v, d));
  return v;
}

// The combination of the block's values (blockDim.x * blockDim.y == kBlock), in thread 0.
// Every thread of the block must call it; `smem` holds kBlock / 32 values.
template <Kind K, class A>
__device__ __forceinline__ A block_reduce(A v, A* smem) {
  const int t = threadIdx.y * blockDim.x + threadIdx.x;
  const int lane = t & 31, warp = t >> 5;
  v = warp_reduce<K>(v);
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < kBlock / 32 ? smem[lane] : identity<K, A>();
    v = warp_reduce<K>(v);
  }
  __syncthreads();  // smem may be reused by the caller's next iteration
  return v;
}

template <Kind K, class In, class A>
__device__ __forceinline__ A vec_reduce(const Vec<In>& v) {
  using L = lane_t<K, In, A>;
  L s = ld<L>(v.v[0]);
#pragma unroll
  for (int j = 1; j < Vec<In>::N; ++j) s = apply<K>(s, ld<L>(v.v[j]));
  return static_cast<A>(s);
}

// acc combined with the elements p[i], i in [0, n), that belong to thread t of nt: a scalar head
// up to the first 16-byte aligned address, 16-byte vectors (four loads in flight), a scalar tail.
template <Kind K, class In, class A>
__device__ __forceinline__ A reduce_range(const In* __restrict__ p, int64_t n, int64_t t,
                                          int64_t nt, A acc) {
  constexpr int V = Vec<In>::N;
  const auto addr = reinterpret_cast<uintptr_t>(p);
  int64_t head = static_cast<int64_t>(((16 - (addr & 15)) & 15) / sizeof(In));
  if (head > n) head = n;
  for (int64_t i = t; i < head; i += nt) acc = apply<K>(acc, ld<A>(p[i]));
  const Vec<In>* vp = reinterpret_cast<const Vec<In>*>(p + head);
  const int64_t nv = (n - head) / V;
  int64_t i = t;
  for (; i + 3 * nt < nv; i += 4 * nt) {
    const Vec<In> a = vp[i], b = vp[i + nt], c = vp[i + 2 * nt], d = vp[i + 3 * nt];
    acc = apply<K>(acc, apply<K>(apply<K>(vec_reduce<K, In, A>(a), vec_reduce<K, In, A>(b)),
                                 apply<K>(vec_reduce<K, In, A>(c), vec_reduce<K, In, A>(d))));
  }
  for (; i < nv; i += nt) acc = apply<K>(acc, vec_reduce<K, In, A>(vp[i]));
  for (int64_t j = head + nv * V + t; j < n; j += nt) acc = apply<K>(acc, ld<A>(p[j]));
  return acc;
}

// Writes an output element: the accumulator itself (a partial or intermediate result) or the
// element type T.
template <class A, class T>
__device__ __forceinline__ void put(void* y, int64_t i, bool out_acc, A v) {
  if (out_acc)
    static_cast<A*>(y)[i] = v;
  else
    static_cast<T*>(y)[i] = to_out<T>(v);
}

// ---------------------------------------------------------------------------------------------
// Reduction kernels. In is T (the first pass) or A (later passes); y is A or T (out_acc).

// y[o] = reduce(x[o * R, (o + 1) * R)): a group of `width` lanes (a power of two up to 32) per
// row, 32 / width rows per warp at a time; lane 0 of the group holds the row's result.
template <Kind K, class T, class In>
__global__ void __launch_bounds__(kBlock)
    rows_warp_kernel(const In* __restrict__ x, void* y, bool out_acc, int64_t rows, int64_t R,
                     int width) {
  using A = acc_t<K, T>;
  const int lane = threadIdx.x & 31;
  const int group = lane / width, t = lane % width;
  const int per_warp = 32 / width;
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * kBlock + threadIdx.x) >> 5;
  const int64_t nwarps = (static_cast<int64_t>(gridDim.x) * kBlock) >> 5;
  for (int64_t o0 = warp * per_warp; o0 < rows; o0 += nwarps * per_warp) {  // uniform: warp
    const int64_t o = o0 + group;
    A acc = identity<K, A>();
    if (o < rows) acc = reduce_range<K, In, A>(x + o * R, R, t, width, acc);
    for (int d = width / 2; d > 0; d >>= 1) acc = apply<K>(acc, shfl_down(acc, d, width));
    if (t == 0 && o < rows) put<A, T>(y, o, out_acc, acc);
  }
}

// One block per (row o, chunk s) of rows * splits: y[o * splits + s] = reduce of the row's
// elements [s * chunk, min(R, (s + 1) * chunk)).
template <Kind K, class T, class In>
__global__ void __launch_bounds__(kBlock)
    rows_block_kernel(const In* __restrict__ x, void* y, bool out_acc, int64_t rows, int64_t R,
                      int64_t splits, int64_t chunk) {
  using A = acc_t<K, T>;
  __shared__ A smem[kBlock / 32];
  const int64_t nb = rows * splits;
  for (int64_t b = blockIdx.x; b < nb; b += gridDim.x) {  // uniform over the block
    const int64_t o = b / splits, s = b - o * splits;
    const int64_t begin = s * chunk;
    const int64_t end = R < begin + chunk ? R : begin + chunk;
    A acc = identity<K, A>();
    if (begin < end)
      acc = reduce_range<K, In, A>(x + o * R + begin, end - begin, threadIdx.x, kBlock, acc);
    acc = block_reduce<K>(acc, smem);
    if (threadIdx.x == 0) put<A, T>(y, b, out_acc, acc);
  }
}

// Columns, inner < 32: block (o, s) reduces rows [s * chunk, min(R, (s + 1) * chunk)) of the
// (R, inner) slab o. Thread t < G * inner (G = kBlock / inner rows per step) reads the flat
// elements r0 * inner + t + m * G * inner (consecutive threads, consecutive addresses), all of
// column t % inner; the G partials of each column are combined in shared memory in row order.
// y[(o * splits + s) * inner + k].
template <Kind K, class T, class In>
__global__ void __launch_bounds__(kBlock)
    cols_small_kernel(const In* __restrict__ x, void* y, bool out_acc, int64_t outer, int64_t R,
                      int inner, int64_t chunk) {
  using A = acc_t<K, T>;
  using L = lane_t<K, In, A>;
  __shared__ A smem[kBlock];
  const int t = threadIdx.x;
  const int G = kBlock / inner;
  const int ph = t / inner;
  const int64_t s = blockIdx.y, splits = gridDim.y;
  const int64_t r0 = s * chunk;
  const int64_t r1 = R < r0 + chunk ? R : r0 + chunk;
  const int64_t step = static_cast<int64_t>(G) * inner;
  for (int64_t o = blockIdx.x; o < outer; o += gridDim.x) {  // uniform over the block
    A acc = identity<K, A>();
    if (ph < G) {
      const In* p = x + (o * R + r0) * inner + t;
      const int64_t n = r1 - r0 - ph;  // rows r0 + ph, r0 + ph + G, ... below r1
      const int64_t cnt = n > 0 ? (n + G - 1) / G : 0;
      int64_t m = 0;
      for (; m + 4 <= cnt; m += 4) {
        const In* q = p + m * step;
        const L v = apply<K>(apply<K>(ld<L>(q[0]), ld<L>(q[step])),
                             apply<K>(ld<L>(q[2 * step]), ld<L>(q[3 * step])));
        acc = apply<K>(acc, static_cast<A>(v));
      }
      for (; m < cnt; ++m) acc = apply<K>(acc, ld<A>(p[m * step]));
    }
    smem[t] = acc;
    __syncthreads();
    if (t < inner) {
      for (int j = 1; j < G; ++j) acc = apply<K>(acc, smem[j * inner + t]);
      put<A, T>(y, (o * splits + s) * inner + t, out_acc, acc);
    }
    __syncthreads();
  }
}

// Columns, inner >= 32: block (32, 8) per 32-column tile b of outer * tiles and row chunk s;
// warp ty takes rows r0 + ty, r0 + ty + 8, ...; the 8 partials of a column are combined in
// shared memory in warp order. y[(o * splits + s) * inner + k].
template <Kind K, class T, class In>
__global__ void __launch_bounds__(kBlock)
    cols_tiled_kernel(const In* __restrict__ x, void* y, bool out_acc, int64_t outer, int64_t R,
                      int64_t inner, int64_t tiles, int64_t chunk) {
  using A = acc_t<K, T>;
  using L = lane_t<K, In, A>;
  __shared__ A smem[8][32];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t s = blockIdx.y, splits = gridDim.y;
  const int64_t r0 = s * chunk;
  const int64_t r1 = R < r0 + chunk ? R : r0 + chunk;
  const int64_t nb = outer * tiles;
  for (int64_t b = blockIdx.x; b < nb; b += gridDim.x) {  // uniform over the block
    const int64_t o = b / tiles;
    const int64_t k = (b - o * tiles) * 32 + tx;
    A acc = identity<K, A>();
    if (k < inner) {
      const In* p = x + o * R * inner + k;
      int64_t r = r0 + ty;
      for (; r + 24 < r1; r += 32) {
        const In* q = p + r * inner;
        const L v = apply<K>(apply<K>(ld<L>(q[0]), ld<L>(q[8 * inner])),
                             apply<K>(ld<L>(q[16 * inner]), ld<L>(q[24 * inner])));
        acc = apply<K>(acc, static_cast<A>(v));
      }
      for (; r < r1; r += 8) acc = apply<K>(acc, ld<A>(p[r * inner]));
    }
    smem[ty][tx] = acc;
    __syncthreads();
    if (ty == 0) {
      for (int j = 1; j < 8; ++j) acc = apply<K>(acc, smem[j][tx]);
      if (k < inner) put<A, T>(y, (o * splits + s) * inner + k, out_acc, acc);
    }
    __syncthreads();
  }
}

__global__ void fill_kernel(uint64_t* __restrict__ y8, uint32_t* __restrict__ y4,
                            uint16_t* __restrict__ y2, uint8_t* __restrict__ y1, int64_t n,
                            uint64_t bits) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    if (y8) y8[i] = bits;
    else if (y4) y4[i] = static_cast<uint32_t>(bits);
    else if (y2) y2[i] = static_cast<uint16_t>(bits);
    else y1[i] = static_cast<uint8_t>(bits);
  }
}

// ---------------------------------------------------------------------------------------------
// Host side

int sm_count(Device dev) { return dc::properties(dev).multiProcessorCount; }

// Blocks of `kernel` (kBlock threads) that fit on the device at once: one full wave.
template <class Kernel>
int64_t wave_blocks(Device dev, Kernel kernel) {
  int per_sm = 0;
  TF_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kBlock, 0));
  if (per_sm < 1) per_sm = 1;
  return static_cast<int64_t>(per_sm) * sm_count(dev);
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

// Scratch memory from the device's caching allocator (stream order makes reuse safe).
Tensor scratch(Device dev, int64_t nbytes) {
  return detail::empty(TensorShape{nbytes}, uint8, dev);
}

// Splits of R so that `base` blocks times the splits fill one wave, each split at least
// `min_len` long; 1 when not worth it.
int64_t choose_splits(int64_t base, int64_t R, int64_t wave, int64_t min_len) {
  if (base >= wave) return 1;
  return max64(1, min64(ceil_div(wave, base), R / min_len));
}

// One pass: y[o, k] = reduce over r of x[o, r, k]. x holds In (T, or A when in_acc), y holds A
// (out_acc) or T. allow_split permits a partial pass plus a second pass.
template <Kind K, class T, bool InAcc>
void reduce_pass(Device dev, const char* op, const void* xv, void* y, bool out_acc, int64_t outer,
                 int64_t R, int64_t inner, bool allow_split) {
  using A = acc_t<K, T>;
  using In = std::conditional_t<InAcc, A, T>;
  const In* x = static_cast<const In*>(xv);
  cudaStream_t st = dc::stream(dev);
  const int64_t cap = int64_t{32} * sm_count(dev);  // grid-stride loops beyond this
  if (inner == 1) {
    if (R <= kWarpRowMax) {
      // About one 16-byte vector per lane: short rows share a warp.
      const int64_t nvec = R * static_cast<int64_t>(sizeof(In)) / 16;
      int width = 1;
      while (width < 32 && 2 * width <= nvec) width *= 2;
      const int64_t rows_per_block = (kBlock / 32) * (32 / width);
      const int64_t grid = min64(ceil_div(outer, rows_per_block), cap);
      rows_warp_kernel<K, T, In><<<static_cast<unsigned>(grid), kBlock, 0, st>>>(
          x, y, out_acc, outer, R, width);
      dc::check_launch(op);
      return;
    }
    auto kernel = rows_block_kernel<K, T, In>;
    int64_t splits =
        allow_split ? choose_splits(outer, R, wave_blocks(dev, kernel), int64_t{16} * kBlock) : 1;
    int64_t chunk = R;
    if (splits > 1) {
      chunk = ceil_div(ceil_div(R, splits), 16) * 16;  // aligned chunk starts for aligned rows
      splits = ceil_div(R, chunk);
    }
    Tensor part;
    void* dst = y;
    if (splits > 1) {
      part = scratch(dev, outer * splits * static_cast<int64_t>(sizeof(A)));
      dst = part.raw_data();
    }
    const int64_t grid = min64(outer * splits, cap);
    kernel<<<static_cast<unsigned>(grid), kBlock, 0, st>>>(x, dst, splits > 1 || out_acc, outer, R,
                                                          splits, chunk);
    dc::check_launch(op);
    if (splits > 1)
      reduce_pass<K, T, true>(dev, op, part.raw_data(), y, out_acc, outer, splits, 1, false);
    return;
  }
  // Columns.
  const bool small = inner < 32;
  const int64_t tiles = small ? 1 : ceil_div(inner, 32);
  const int64_t base = outer * tiles;
  int64_t splits = 1;
  if (allow_split) {
    const int64_t rows_per_step = small ? kBlock / inner : 8;
    const int64_t wave = small ? wave_blocks(dev, cols_small_kernel<K, T, In>)
                               : wave_blocks(dev, cols_tiled_kernel<K, T, In>);
    splits = min64(choose_splits(base, R, wave, 32 * rows_per_step), 65535);
  }
  const int64_t chunk = ceil_div(R, splits);
  splits = ceil_div(R, chunk);
  Tensor part;
  void* dst = y;
  if (splits > 1) {
    part = scratch(dev, outer * splits * inner * static_cast<int64_t>(sizeof(A)));
    dst = part.raw_data();
  }
  const dim3 grid(static_cast<unsigned>(min64(base, cap)), static_cast<unsigned>(splits));
  if (small) {
    cols_small_kernel<K, T, In><<<grid, kBlock, 0, st>>>(x, dst, splits > 1 || out_acc, outer, R,
                                                        static_cast<int>(inner), chunk);
  } else {
    cols_tiled_kernel<K, T, In><<<grid, dim3(32, 8), 0, st>>>(x, dst, splits > 1 || out_acc,
                                                              outer, R, inner, tiles, chunk);
  }
  dc::check_launch(op);
  if (splits > 1)
    reduce_pass<K, T, true>(dev, op, part.raw_data(), y, out_acc, outer, splits, inner, false);
}

using Group = detail::ReduceGroup;

template <Kind K, class T>
void run_reduce(const char* op, const Tensor& in, Tensor& out, std::span<const int> axes) {
  using A = acc_t<K, T>;
  const Device dev = out.placement();
  const int64_t n_in = in.num_elements();
  Group g[TensorShape::kMaxRank];
  int m = detail::merge_reduce_axes(in.shape(), axes, g);
  int n_red = 0;
  for (int i = 0; i < m; ++i) n_red += g[i].reduced;
  if (n_red == 0) {  // only size-1 dimensions are reduced: a copy
    TF_CUDA_CHECK(cudaMemcpyAsync(out.raw_data(), in.raw_data(),
                                  static_cast<size_t>(n_in) * dtype_size(in.dtype()),
                                  cudaMemcpyDeviceToDevice, dc::stream(dev)));
    return;
  }
  Tensor bufs[2];  // intermediate results (A), alive until every pass is queued
  const void* cur = in.raw_data();
  for (int pass = 0; n_red > 0; ++pass) {
    const bool last = n_red == 1;
    int64_t outer = 1, R, inner = 1;
    if (g[m - 1].reduced) {  // [..., R]: rows
      R = g[m - 1].n;
      for (int i = 0; i < m - 1; ++i) outer *= g[i].n;
      --m;
    } else {  // [..., R, K]: columns
      inner = g[m - 1].n;
      R = g[m - 2].n;
      for (int i = 0; i < m - 2; ++i) outer *= g[i].n;
      if (m >= 3) {
        g[m - 3].n *= inner;
        m -= 2;
      } else {
        g[0] = g[1];
        m = 1;
      }
    }
    --n_red;
    void* next = out.raw_data();
    if (!last) {
      bufs[pass & 1] = scratch(dev, outer * inner * static_cast<int64_t>(sizeof(A)));
      next = bufs[pass & 1].raw_data();
    }
    if (pass == 0)
      reduce_pass<K, T, false>(dev, op, cur, next, !last, outer, R, inner, true);
    else
      reduce_pass<K, T, true>(dev, op, cur, next, !last, outer, R, inner, true);
    cur = next;
  }
}

// The bits of the identity of reduction K in dtype d, as the CPU kernel writes it for an empty
// reduction (bool: any -> false, all -> true).
template <Kind K>
uint64_t identity_bits(DType d) {
  uint64_t bits = 0;
  TF_DISPATCH_ALL_TYPES(d, {
    T v{};
    if constexpr (std::is_same_v<T, bool>) {
      v = K == Kind::Min || K == Kind::Prod;
    } else {
      using C = compute_t<T>;
      C c;
      if constexpr (K == Kind::Sum)
        c = C(0);
      else if constexpr (K == Kind::Prod)
        c = C(1);
      else if constexpr (K == Kind::Max)
        c = std::is_floating_point_v<C> ? -std::numeric_limits<C>::infinity()
                                        : std::numeric_limits<C>::lowest();
      else
        c = std::is_floating_point_v<C> ? std::numeric_limits<C>::infinity()
                                        : std::numeric_limits<C>::max();
      v = T(c);
    }
    std::memcpy(&bits, &v, sizeof(T));
  });
  return bits;
}

void fill_bits(Device dev, const char* op, void* y, int64_t n, size_t es, uint64_t bits) {
  const unsigned grid = tc::grid_for(n, dev);
  fill_kernel<<<grid, tc::kThreads, 0, dc::stream(dev)>>>(
      es == 8 ? static_cast<uint64_t*>(y) : nullptr, es == 4 ? static_cast<uint32_t*>(y) : nullptr,
      es == 2 ? static_cast<uint16_t*>(y) : nullptr, es == 1 ? static_cast<uint8_t*>(y) : nullptr,
      n, bits);
  dc::check_launch(op);
}

template <Kind K>
void reduce_cuda(const char* op, const Tensor& in, Tensor& out, std::span<const int> axes) {
  const int64_t n_out = out.num_elements();
  if (n_out == 0) return;
  const DType d = in.dtype();
  if constexpr (K == Kind::Sum || K == Kind::Prod)
    if (is_bool(d))
      throw InvalidArgumentError(std::string("[") + op + "] is not defined for bool tensors");
  if (in.num_elements() == 0) {
    fill_bits(out.placement(), op, out.raw_data(), n_out, dtype_size(d), identity_bits<K>(d));
    return;
  }
  TF_CUDA_DISPATCH_ALL_TYPES(d, {
    if constexpr (!(std::is_same_v<T, bool> && (K == Kind::Sum || K == Kind::Prod)))
      run_reduce<K, read_t<T>>(op, in, out, axes);
  });
}

// ---------------------------------------------------------------------------------------------
// ArgMax / ArgMin

// The compare type: float for the half types, int for 8-bit integers and bool.
template <class T>
using arg_t = std::conditional_t<(sizeof(tc::dcompute_t<T>) < 4), int, tc::dcompute_t<T>>;

// a > b in the order where NaN is larger than every number (and equal to itself).
template <class C>
__device__ __forceinline__ bool greater(C a, C b) {
  if constexpr (std::is_floating_point_v<C>)
    return a > b || (a != a && b == b);
  else
    return a > b;
}

template <bool IsMax, class C>
struct ArgBest {
  C v;
  int64_t i;  // -1: no element yet

  __device__ __forceinline__ static bool better(C a, C b) {
    return IsMax ? greater(a, b) : greater(b, a);
  }
  // Takes element (v, i) when it is better; elements come in increasing i, so the first of
  // equal ones stays.
  __device__ __forceinline__ void take(C x, int64_t xi) {
    if (i < 0 || better(x, v)) {
      v = x;
      i = xi;
    }
  }
  // The better of two partial results; of equal values the smaller index.
  __device__ __forceinline__ void merge(const ArgBest& o) {
    if (o.i < 0) return;
    if (i < 0 || better(o.v, v) || (!better(v, o.v) && o.i < i)) {
      v = o.v;
      i = o.i;
    }
  }
  __device__ __forceinline__ void merge_down(int delta) {
    ArgBest o;
    o.v = shfl_down(v, delta);
    o.i = shfl_down(i, delta);
    merge(o);
  }
};

// Rows (inner == 1): one group of GROUP threads (a warp, or the block) per row.
template <bool IsMax, class T, int GROUP>
__global__ void __launch_bounds__(kBlock)
    arg_rows_kernel(const T* __restrict__ x, int64_t* __restrict__ y, int64_t rows, int64_t R) {
  using C = arg_t<T>;
  using B = ArgBest<IsMax, C>;
  __shared__ C sv[kBlock / 32];
  __shared__ int64_t si[kBlock / 32];
  constexpr int kGroups = kBlock / GROUP;  // groups per block
  const int g = threadIdx.x / GROUP, t = threadIdx.x % GROUP;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kGroups + g;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kGroups;
  // Uniform over the group: over the warp (GROUP == 32) or the block (GROUP == kBlock).
  for (int64_t o = first; o < rows; o += stride) {
    B best{C{}, -1};
    const T* row = x + o * R;
    for (int64_t r = t; r < R; r += GROUP) best.take(static_cast<C>(tc::load(row[r])), r);
    for (int d = 16; d > 0; d >>= 1) best.merge_down(d);
    if constexpr (GROUP == 32) {
      if (lane == 0) y[o] = best.i;
    } else {
      if (lane == 0) {
        sv[warp] = best.v;
        si[warp] = best.i;
      }
      __syncthreads();
      if (warp == 0) {
        B w{C{}, -1};
        if (lane < kBlock / 32) w = B{sv[lane], si[lane]};
        for (int d = 16; d > 0; d >>= 1) w.merge_down(d);
        if (lane == 0) y[o] = w.i;
      }
      __syncthreads();
    }
  }
}

// Columns (inner > 1): block (32, 8) per 32-column tile; warp ty scans rows ty, ty + 8, ...
template <bool IsMax, class T>
__global__ void __launch_bounds__(kBlock)
    arg_cols_kernel(const T* __restrict__ x, int64_t* __restrict__ y, int64_t outer, int64_t R,
                    int64_t inner, int64_t tiles) {
  using C = arg_t<T>;
  using B = ArgBest<IsMax, C>;
  __shared__ C sv[8][32];
  __shared__ int64_t si[8][32];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t nb = outer * tiles;
  for (int64_t b = blockIdx.x; b < nb; b += gridDim.x) {  // uniform over the block
    const int64_t o = b / tiles;
    const int64_t k = (b - o * tiles) * 32 + tx;
    B best{C{}, -1};
    if (k < inner) {
      const T* p = x + o * R * inner + k;
      for (int64_t r = ty; r < R; r += 8) best.take(static_cast<C>(tc::load(p[r * inner])), r);
    }
    sv[ty][tx] = best.v;
    si[ty][tx] = best.i;
    __syncthreads();
    if (ty == 0) {
      for (int j = 1; j < 8; ++j) best.merge(B{sv[j][tx], si[j][tx]});
      if (k < inner) y[o * inner + k] = best.i;
    }
    __syncthreads();
  }
}

template <bool IsMax>
void arg_cuda(const char* op, const Tensor& in, Tensor& out, int axis) {
  int64_t outer = 1, R = in.shape()[axis], inner = 1;
  for (int i = 0; i < axis; ++i) outer *= in.shape()[i];
  for (int i = axis + 1; i < in.rank(); ++i) inner *= in.shape()[i];
  if (outer * inner == 0) return;  // (R == 0 is rejected by infer)
  const Device dev = out.placement();
  cudaStream_t st = dc::stream(dev);
  const int64_t cap = int64_t{32} * sm_count(dev);
  int64_t* y = out.data<int64_t>();
  TF_CUDA_DISPATCH_ALL_TYPES(in.dtype(), {
    using E = read_t<T>;
    const E* x = static_cast<const E*>(in.raw_data());
    if (inner == 1) {
      if (R <= kWarpRowMax) {
        const int64_t grid = min64(ceil_div(outer, kBlock / 32), cap);
        arg_rows_kernel<IsMax, E, 32><<<static_cast<unsigned>(grid), kBlock, 0, st>>>(x, y, outer,
                                                                                     R);
      } else {
        const int64_t grid = min64(outer, cap);
        arg_rows_kernel<IsMax, E, kBlock><<<static_cast<unsigned>(grid), kBlock, 0, st>>>(
            x, y, outer, R);
      }
    } else {
      const int64_t tiles = ceil_div(inner, 32);
      const int64_t grid = min64(outer * tiles, cap);
      arg_cols_kernel<IsMax, E><<<static_cast<unsigned>(grid), dim3(32, 8), 0, st>>>(
          x, y, outer, R, inner, tiles);
    }
    dc::check_launch(op);
  });
}

}  // namespace

void ReduceSum::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  reduce_cuda<Kind::Sum>(name(), in[0], out[0], axes);
}
void ReduceProd::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  reduce_cuda<Kind::Prod>(name(), in[0], out[0], axes);
}
void ReduceMax::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  reduce_cuda<Kind::Max>(name(), in[0], out[0], axes);
}
void ReduceMin::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  reduce_cuda<Kind::Min>(name(), in[0], out[0], axes);
}
void ArgMax::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  arg_cuda<true>(name(), in[0], out[0], axis);
}
void ArgMin::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  arg_cuda<false>(name(), in[0], out[0], axis);
}

}  // namespace tapeflow::prims
