// CUDA kernels of the movement primitives. Kernels move elements of 1, 2, 4, 8 or 16 bytes,
// never dtypes (the dtype matters only for pad's fill value).
//
// Transpose, BroadcastTo, Slice and Pad's interior are one operation, a box copy: for every
// index i of a box, dst[sum i_d * ds_d] = src[sum i_d * ss_d] (ss_d == 0 along broadcast
// dimensions). The host drops size-1 dimensions and merges dimensions that are adjacent in both
// layouts, then picks a kernel:
//   - one contiguous block: cudaMemcpyAsync;
//   - rows of runs, when the innermost dimension is contiguous on both sides (or repeats one
//     source element, a broadcast): a group of threads per row, as many as the run needs up to
//     a block, so short runs share blocks; contiguous runs are copied in elements widened to up
//     to 16 bytes when the run length, the strides and both pointers allow it (vector loads and
//     stores);
//   - the destination's innermost dimension is not the source's (a transpose): 32x32 tiles
//     through shared memory, read along the source's contiguous dimension and written along the
//     destination's;
//   - anything else: one thread per element, the offsets decoded from its index (32-bit
//     arithmetic when every offset fits).
// Concat copies up to 32 inputs per launch (gridDim.y = input), each a (rows, width) slab placed
// at a column offset of the (rows, W) output. Gather checks every index first (a kernel records
// the first bad position with atomicMin, then the host reads it back: the error must be thrown
// before returning, as the CPU kernel's, so this synchronises the stream), then copies one slab
// per index (rows of runs again). All offsets are 64-bit unless the kernel is the 32-bit variant chosen by the host.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "ops/cuda/common.cuh"
#include "ops/movement.h"

namespace tapeflow::prims {

namespace {

namespace tc = ::tapeflow::cuda;
namespace dc = ::tapeflow::detail::cuda;

constexpr int kMaxRank = TensorShape::kMaxRank;
constexpr int kThreads = 256;

// A box of up to 8 dimensions with source and destination strides, in elements.
struct Box {
  int rank = 0;
  int64_t size[kMaxRank] = {};
  int64_t ss[kMaxRank] = {};
  int64_t ds[kMaxRank] = {};
};

// Runs BODY with E bound to an element type of W bytes (1, 2, 4, 8 or 16).
#define TF_MOVE_DISPATCH_BYTES(W, ...) \
  if ((W) == 16) {                     \
    using E = uint4;                   \
    __VA_ARGS__;                       \
  } else {                             \
    TF_DISPATCH_BY_SIZE(W, __VA_ARGS__) \
  }

// ---------------------------------------------------------------------------------------------
// Kernels

// Offsets of the box index `rem` (row-major over b's dimensions), with a static loop so that
// the box stays in the parameter space.
template <class I>
__device__ __forceinline__ void decode(I rem, const Box& b, I& so, I& dof) {
  so = 0;
  dof = 0;
#pragma unroll
  for (int d = kMaxRank - 1; d >= 0; --d) {
    if (d >= b.rank) continue;
    const I n = static_cast<I>(b.size[d]);
    const I c = rem % n;
    rem /= n;
    so += c * static_cast<I>(b.ss[d]);
    dof += c * static_cast<I>(b.ds[d]);
  }
}

// Offsets (64-bit) of the box index `index`, dividing in I (uint32_t when every size and the
// index fit in 32 bits: much cheaper than 64-bit division).
template <class I>
__device__ __forceinline__ void decode_offsets(int64_t index, const Box& b, int64_t& so,
                                               int64_t& dof) {
  I rem = static_cast<I>(index);
  so = 0;
  dof = 0;
#pragma unroll
  for (int d = kMaxRank - 1; d >= 0; --d) {
    if (d >= b.rank) continue;
    const I n = static_cast<I>(b.size[d]);
    const I c = rem % n;
    rem /= n;
    so += static_cast<int64_t>(c) * b.ss[d];
    dof += static_cast<int64_t>(c) * b.ds[d];
  }
}
constexpr int64_t k32 = int64_t{1} << 32;

// One thread per element of the box (n elements). I is uint32_t when every index and offset is
// below 2^31, else int64_t.
template <class E, class I>
__global__ void __launch_bounds__(kThreads)
    copy_flat_kernel(const E* __restrict__ src, E* __restrict__ dst, I n, Box b) {
  const I stride = static_cast<I>(gridDim.x) * kThreads;
  for (I i = static_cast<I>(blockIdx.x) * kThreads + threadIdx.x; i < n; i += stride) {
    I so, dof;
    decode<I>(i, b, so, dof);
    dst[dof] = src[so];
  }
}

// Rows of runs: row r of the `outer` box starts at src + so(r) and dst + dof(r); element j of
// its run is src[so + j * s_inner] (s_inner 1, or 0 to repeat one element) and goes to
// dst[dof + j], j < run. A group of `lanes` threads (a power of two) takes a row: a block holds
// kThreads / lanes groups, so short runs do not leave threads idle.
template <class E>
__global__ void __launch_bounds__(kThreads)
    copy_runs_kernel(const E* __restrict__ src, E* __restrict__ dst, int64_t rows, int64_t run,
                     int64_t s_inner, int lanes, Box outer) {
  const int per_block = kThreads / lanes;
  const int g = threadIdx.x / lanes, t = threadIdx.x % lanes;
  const int64_t jstride = static_cast<int64_t>(gridDim.x) * lanes;
  const int64_t j0 = static_cast<int64_t>(blockIdx.x) * lanes + t;
  const int64_t rstride = static_cast<int64_t>(gridDim.y) * per_block;
  for (int64_t r = static_cast<int64_t>(blockIdx.y) * per_block + g; r < rows; r += rstride) {
    int64_t so, dof;
    if (rows < k32)
      decode_offsets<uint32_t>(r, outer, so, dof);
    else
      decode_offsets<int64_t>(r, outer, so, dof);
    const E* s = src + so;
    E* d = dst + dof;
    int64_t j = j0;
    for (; j + 3 * jstride < run; j += 4 * jstride) {  // four loads in flight, then the stores
      const E v0 = s[j * s_inner], v1 = s[(j + jstride) * s_inner];
      const E v2 = s[(j + 2 * jstride) * s_inner], v3 = s[(j + 3 * jstride) * s_inner];
      d[j] = v0;
      d[j + jstride] = v1;
      d[j + 2 * jstride] = v2;
      d[j + 3 * jstride] = v3;
    }
    for (; j < run; j += jstride) d[j] = s[j * s_inner];
  }
}

// Transpose tiles. Output dimension q is the source's contiguous one (source stride 1) and the
// destination's innermost dimension l has destination stride 1: the element (a, c) of (q, l)
// is src[so + a + c * S] and goes to dst[dof + a * Dq + c]. `batch` holds the other dimensions.
// Block (32, 8), looping over the tiles t of batch * tq * tl (ti = t % (tq * tl) covers
// a in [a0, a0 + 32), c in [c0, c0 + 32)); I (uint32_t when ntiles fits) divides the tile index.
template <class E, class I>
__global__ void __launch_bounds__(kThreads)
    transpose_kernel(const E* __restrict__ src, E* __restrict__ dst, Box batch, int64_t nq,
                     int64_t nl, int64_t S, int64_t Dq, int64_t tq, int64_t tl, int64_t ntiles) {
  __shared__ E tile[32][33];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const I per_batch = static_cast<I>(tq * tl), itl = static_cast<I>(tl);
  for (int64_t t = blockIdx.x; t < ntiles; t += gridDim.x) {  // uniform over the block
    const I bi = static_cast<I>(t) / per_batch, ti = static_cast<I>(t) - bi * per_batch;
    int64_t so, dof;
    decode_offsets<I>(bi, batch, so, dof);
    const I tile_a = ti / itl;
    const int64_t a0 = static_cast<int64_t>(tile_a) * 32;
    const int64_t c0 = static_cast<int64_t>(ti - tile_a * itl) * 32;
    {
      const int64_t a = a0 + tx;  // consecutive threads read consecutive source elements
#pragma unroll
      for (int m = 0; m < 32; m += 8) {
        const int64_t c = c0 + ty + m;
        if (a < nq && c < nl) tile[ty + m][tx] = src[so + a + c * S];
      }
    }
    __syncthreads();
    {
      const int64_t c = c0 + tx;  // consecutive threads write consecutive destination elements
#pragma unroll
      for (int m = 0; m < 32; m += 8) {
        const int64_t a = a0 + ty + m;
        if (a < nq && c < nl) dst[dof + a * Dq + c] = tile[tx][ty + m];
      }
    }
    __syncthreads();
  }
}

template <class E>
__global__ void __launch_bounds__(kThreads) fill_kernel(E* __restrict__ dst, int64_t n, E v) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < n; i += stride)
    dst[i] = v;
}

// Up to kConcatParts inputs per launch: input p is a (rows, width[p]) slab that goes to columns
// [offset[p], offset[p] + width[p]) of the (rows, W) output.
constexpr int kConcatParts = 32;
struct ConcatParts {
  const void* src[kConcatParts];
  int64_t width[kConcatParts];
  int64_t offset[kConcatParts];
};

template <class E, class I>
__global__ void __launch_bounds__(kThreads)
    concat_kernel(E* __restrict__ dst, int64_t rows, int64_t W, ConcatParts parts) {
  const int p = blockIdx.y;
  const I w = static_cast<I>(parts.width[p]);
  const I n = static_cast<I>(rows) * w;
  const E* __restrict__ src = static_cast<const E*>(parts.src[p]);
  E* d = dst + parts.offset[p];
  const I stride = static_cast<I>(gridDim.x) * kThreads;
  for (I i = static_cast<I>(blockIdx.x) * kThreads + threadIdx.x; i < n; i += stride) {
    const I r = i / w;
    d[static_cast<int64_t>(r) * W + (i - r * w)] = src[i];
  }
}

// Records in *first_bad the smallest j with idx[j] outside [0, N).
template <class Idx>
__global__ void __launch_bounds__(kThreads)
    check_indices_kernel(const Idx* __restrict__ idx, int64_t n, int64_t N,
                         unsigned long long* first_bad) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  for (int64_t j = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; j < n; j += stride) {
    const int64_t v = static_cast<int64_t>(idx[j]);
    if (v < 0 || v >= N) atomicMin(first_bad, static_cast<unsigned long long>(j));
  }
}

// out[row, k] = params[o, idx[j], k] for the rows (o, j) of (outer, n) and k < inner: a group of
// `lanes` threads (a power of two) per row, as copy_runs_kernel.
template <class E, class Idx>
__global__ void __launch_bounds__(kThreads)
    gather_kernel(const E* __restrict__ src, const Idx* __restrict__ idx, E* __restrict__ dst,
                  int64_t rows, int64_t n, int64_t N, int64_t inner, int lanes) {
  const int per_block = kThreads / lanes;
  const int g = threadIdx.x / lanes, t = threadIdx.x % lanes;
  const int64_t kstride = static_cast<int64_t>(gridDim.x) * lanes;
  const int64_t k0 = static_cast<int64_t>(blockIdx.x) * lanes + t;
  const int64_t rstride = static_cast<int64_t>(gridDim.y) * per_block;
  for (int64_t row = static_cast<int64_t>(blockIdx.y) * per_block + g; row < rows;
       row += rstride) {
    const int64_t o = row / n, j = row - o * n;
    const int64_t ix = static_cast<int64_t>(idx[j]);
    E* d = dst + row * inner;
    if (ix < 0 || ix >= N) {
      // Unchecked indices (a captured CUDA graph; eager calls check them first): zeros, as TF's
      // GPU kernel writes for an index out of range.
      for (int64_t k = k0; k < inner; k += kstride) d[k] = E{};
      continue;
    }
    const E* s = src + (o * N + ix) * inner;
    int64_t k = k0;
    for (; k + 3 * kstride < inner; k += 4 * kstride) {  // four loads in flight, then the stores
      const E v0 = s[k], v1 = s[k + kstride], v2 = s[k + 2 * kstride], v3 = s[k + 3 * kstride];
      d[k] = v0;
      d[k + kstride] = v1;
      d[k + 2 * kstride] = v2;
      d[k + 3 * kstride] = v3;
    }
    for (; k < inner; k += kstride) d[k] = s[k];
  }
}

// ---------------------------------------------------------------------------------------------
// Host side

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

// Blocks beyond which kernels loop (grid-stride).
int64_t grid_cap(Device dev) {
  return int64_t{32} * dc::properties(dev).multiProcessorCount;
}
unsigned grid1(int64_t n, Device dev) {
  return static_cast<unsigned>(max64(1, min64(ceil_div(n, kThreads), grid_cap(dev))));
}

bool aligned(const void* p, int64_t w) { return reinterpret_cast<uintptr_t>(p) % w == 0; }

// Launch shape of the row kernels (copy_runs_kernel, gather_kernel) for `rows` rows of `len`
// elements: lanes per row (a power of two up to kThreads, at least len when it fits), blocks
// along a row (each thread about four elements of it), blocks over the rows.
struct RowsLaunch {
  int lanes;
  dim3 grid;
};
RowsLaunch rows_launch(int64_t rows, int64_t len, Device dev) {
  int lanes = 1;
  while (lanes < kThreads && lanes < len) lanes *= 2;
  const int64_t cap = grid_cap(dev);
  const int64_t gx = max64(1, min64(ceil_div(len, int64_t{4} * lanes), cap));
  const int64_t per_block = kThreads / lanes;
  const int64_t gy = max64(1, min64(min64(ceil_div(rows, per_block), 65535), cap / gx));
  return {lanes, dim3(static_cast<unsigned>(gx), static_cast<unsigned>(gy))};
}

// Drops size-1 dimensions and merges dimensions adjacent in both layouts. False when the box is
// empty.
bool simplify(Box& b) {
  Box o;
  for (int d = 0; d < b.rank; ++d) {
    if (b.size[d] == 0) return false;
    if (b.size[d] == 1) continue;
    if (o.rank > 0 && o.ss[o.rank - 1] == b.ss[d] * b.size[d] &&
        o.ds[o.rank - 1] == b.ds[d] * b.size[d]) {
      const int m = o.rank - 1;
      o.size[m] *= b.size[d];
      o.ss[m] = b.ss[d];
      o.ds[m] = b.ds[d];
    } else {
      o.size[o.rank] = b.size[d];
      o.ss[o.rank] = b.ss[d];
      o.ds[o.rank] = b.ds[d];
      ++o.rank;
    }
  }
  b = o;
  return true;
}

void memcpy_d2d(Device dev, void* dst, const void* src, int64_t nbytes) {
  if (nbytes > 0)
    TF_CUDA_CHECK(cudaMemcpyAsync(dst, src, static_cast<size_t>(nbytes), cudaMemcpyDeviceToDevice,
                                  dc::stream(dev)));
}

// One thread per element; elements of w bytes, b in those elements.
void launch_flat(Device dev, const char* op, const void* src, void* dst, int64_t w, const Box& b) {
  int64_t n = 1, smax = 0, dmax = 0;
  for (int d = 0; d < b.rank; ++d) {
    n *= b.size[d];
    smax += (b.size[d] - 1) * b.ss[d];
    dmax += (b.size[d] - 1) * b.ds[d];
  }
  constexpr int64_t k31 = int64_t{1} << 31;
  const bool small = n < k31 && smax < k31 && dmax < k31;
  cudaStream_t st = dc::stream(dev);
  const unsigned grid = grid1(n, dev);
  TF_MOVE_DISPATCH_BYTES(w, {
    if (small)
      copy_flat_kernel<E, uint32_t><<<grid, kThreads, 0, st>>>(
          static_cast<const E*>(src), static_cast<E*>(dst), static_cast<uint32_t>(n), b);
    else
      copy_flat_kernel<E, int64_t><<<grid, kThreads, 0, st>>>(static_cast<const E*>(src),
                                                              static_cast<E*>(dst), n, b);
  });
  dc::check_launch(op);
}

// The widest element (16, 8, 4, 2 or 1 bytes) that divides every byte count and pointer given.
int64_t widest(std::initializer_list<int64_t> byte_counts, std::initializer_list<const void*> ptrs,
               const int64_t* more = nullptr, int n_more = 0) {
  for (int64_t w = 16; w > 1; w /= 2) {
    bool ok = true;
    for (int64_t c : byte_counts) ok = ok && c % w == 0;
    for (const void* p : ptrs) ok = ok && aligned(p, w);
    for (int i = 0; i < n_more; ++i) ok = ok && more[i] % w == 0;
    if (ok) return w;
  }
  return 1;
}

// dst[sum i_d * ds_d] = src[sum i_d * ss_d] over the box; strides in elements of es bytes.
void copy_box(Device dev, const char* op, const void* src, void* dst, int64_t es, Box b) {
  if (!simplify(b)) return;
  if (b.rank == 0) {  // a single element
    memcpy_d2d(dev, dst, src, es);
    return;
  }
  const int l = b.rank - 1;
  if (b.ds[l] == 1 && (b.ss[l] == 1 || b.ss[l] == 0)) {
    if (b.rank == 1 && b.ss[l] == 1) {
      memcpy_d2d(dev, dst, src, b.size[0] * es);
      return;
    }
    // Rows of contiguous runs (or of one repeated element): widen the element as far as the
    // run, the strides and the pointers allow.
    int64_t w = es;
    if (b.ss[l] == 1) {
      int64_t strides[2 * kMaxRank] = {};
      for (int d = 0; d < l; ++d) {
        strides[2 * d] = b.ss[d] * es;
        strides[2 * d + 1] = b.ds[d] * es;
      }
      w = widest({b.size[l] * es}, {src, dst}, strides, 2 * l);
    }
    Box outer;
    outer.rank = l;
    int64_t rows = 1;
    for (int d = 0; d < l; ++d) {
      outer.size[d] = b.size[d];
      outer.ss[d] = b.ss[d] * es / w;
      outer.ds[d] = b.ds[d] * es / w;
      rows *= b.size[d];
    }
    const int64_t run = b.size[l] * es / w;
    const RowsLaunch rl = rows_launch(rows, run, dev);
    cudaStream_t st = dc::stream(dev);
    TF_MOVE_DISPATCH_BYTES(w, copy_runs_kernel<E><<<rl.grid, kThreads, 0, st>>>(
                                  static_cast<const E*>(src), static_cast<E*>(dst), rows, run,
                                  b.ss[l], rl.lanes, outer));
    dc::check_launch(op);
    return;
  }
  if (b.ds[l] == 1) {
    int q = -1;
    for (int d = 0; d < l; ++d)
      if (b.ss[d] == 1) q = d;
    if (q >= 0) {
      Box batch;
      int64_t nb = 1;
      for (int d = 0; d < l; ++d) {
        if (d == q) continue;
        batch.size[batch.rank] = b.size[d];
        batch.ss[batch.rank] = b.ss[d];
        batch.ds[batch.rank] = b.ds[d];
        ++batch.rank;
        nb *= b.size[d];
      }
      const int64_t nq = b.size[q], nl = b.size[l];
      const int64_t tq = ceil_div(nq, 32), tl = ceil_div(nl, 32);
      const int64_t ntiles = nb * tq * tl;
      const unsigned grid = static_cast<unsigned>(min64(ntiles, grid_cap(dev)));
      cudaStream_t st = dc::stream(dev);
      TF_DISPATCH_BY_SIZE(es, {
        if (ntiles < k32)
          transpose_kernel<E, uint32_t><<<grid, dim3(32, 8), 0, st>>>(
              static_cast<const E*>(src), static_cast<E*>(dst), batch, nq, nl, b.ss[l], b.ds[q],
              tq, tl, ntiles);
        else
          transpose_kernel<E, int64_t><<<grid, dim3(32, 8), 0, st>>>(
              static_cast<const E*>(src), static_cast<E*>(dst), batch, nq, nl, b.ss[l], b.ds[q],
              tq, tl, ntiles);
      });
      dc::check_launch(op);
      return;
    }
  }
  launch_flat(dev, op, src, dst, es, b);
}

// Row-major strides of a shape, in elements.
void contiguous(const TensorShape& s, int64_t* st) {
  int64_t acc = 1;
  for (int d = s.rank() - 1; d >= 0; --d) {
    st[d] = acc;
    acc *= s[d];
  }
}

// `value` converted to T as the CPU kernel does (integers saturate; NaN gives 0).
template <class T>
T convert_value(double value) {
  if constexpr (std::is_same_v<T, bool>) {
    return value != 0;
  } else if constexpr (std::is_integral_v<T>) {
    if (std::isnan(value)) return 0;
    const double lo = static_cast<double>(std::numeric_limits<T>::lowest());
    const double hi = static_cast<double>(std::numeric_limits<T>::max());
    if (value <= lo) return std::numeric_limits<T>::lowest();
    if (value >= hi) return std::numeric_limits<T>::max();
    return static_cast<T>(value);
  } else {
    return T(static_cast<compute_t<T>>(value));
  }
}

void fill_bits(Device dev, const char* op, void* dst, int64_t n, int64_t es, uint64_t bits) {
  if (n == 0) return;
  const unsigned grid = grid1(n, dev);
  cudaStream_t st = dc::stream(dev);
  TF_DISPATCH_BY_SIZE(es, {
    E v;
    std::memcpy(&v, &bits, sizeof(E));  // little-endian: the low bytes
    fill_kernel<E><<<grid, kThreads, 0, st>>>(static_cast<E*>(dst), n, v);
  });
  dc::check_launch(op);
}

// "1,0" for flat position `flat` of shape s (as the CPU kernel's message).
std::string index_position(const TensorShape& s, int64_t flat) {
  std::vector<int64_t> idx(static_cast<size_t>(s.rank()));
  for (int d = s.rank() - 1; d >= 0; --d) {
    idx[d] = s[d] ? flat % s[d] : 0;
    if (s[d]) flat /= s[d];
  }
  std::string out;
  for (size_t i = 0; i < idx.size(); ++i) {
    if (i) out += ",";
    out += std::to_string(idx[i]);
  }
  return out;
}

template <class Idx>
void gather_cuda(const char* op, const Tensor& params, const Tensor& indices, Tensor& out,
                 int axis) {
  const Device dev = out.placement();
  const int64_t n = indices.num_elements();
  const int64_t N = params.shape()[axis];
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= params.shape()[d];
  for (int d = axis + 1; d < params.rank(); ++d) inner *= params.shape()[d];
  if (n == 0) return;
  const Idx* idx = static_cast<const Idx*>(indices.raw_data());
  cudaStream_t st = dc::stream(dev);
  // Check every index before copying, as the CPU kernel does; recorded into a CUDA graph, where
  // nothing may be read on the host, the copy kernel writes zeros for bad indices instead.
  if (!dc::in_capture_scope(dev)) {
    Tensor flag = detail::empty(TensorShape{1}, int64, dev);
    auto* first_bad = static_cast<unsigned long long*>(flag.raw_data());
    TF_CUDA_CHECK(cudaMemsetAsync(first_bad, 0xff, sizeof(unsigned long long), st));
    check_indices_kernel<Idx><<<grid1(n, dev), kThreads, 0, st>>>(idx, n, N, first_bad);
    dc::check_launch(op);
    // The host must know the answer before it returns (an error is thrown here, not later):
    // copy_bytes waits for the stream.
    unsigned long long bad = 0;
    detail::copy_bytes(&bad, Device{}, first_bad, dev, sizeof(bad));
    if (bad != std::numeric_limits<unsigned long long>::max()) {
      const auto j = static_cast<int64_t>(bad);
      Idx v{};
      detail::copy_bytes(&v, Device{}, idx + j, dev, sizeof(Idx));
      throw InvalidArgumentError(
          std::string("[") + op + "] indices[" + index_position(indices.shape(), j) +
          "] = " + std::to_string(static_cast<int64_t>(v)) + " is not in [0, " +
          std::to_string(N) + ") (params of shape " + params.shape().to_string() + ", axis " +
          std::to_string(axis) + ", indices of shape " + indices.shape().to_string() + ")");
    }
  }
  const int64_t es = static_cast<int64_t>(dtype_size(params.dtype()));
  if (outer == 0 || inner == 0) return;
  const void* src = params.raw_data();
  void* dst = out.raw_data();
  const int64_t w = widest({inner * es}, {src, dst});
  const int64_t in_w = inner * es / w;  // slab length in elements of w bytes
  const int64_t rows = outer * n;
  const RowsLaunch rl = rows_launch(rows, in_w, dev);
  TF_MOVE_DISPATCH_BYTES(w, gather_kernel<E, Idx><<<rl.grid, kThreads, 0, st>>>(
                                static_cast<const E*>(src), idx, static_cast<E*>(dst), rows, n,
                                N, in_w, rl.lanes));
  dc::check_launch(op);
}

void concat_cuda(const char* op, std::span<const Tensor> in, Tensor& out, int axis) {
  const Device dev = out.placement();
  const TensorShape& os = out.shape();
  if (out.num_elements() == 0) return;
  const int64_t es = static_cast<int64_t>(dtype_size(out.dtype()));
  int64_t rows = 1, inner = 1;
  for (int d = 0; d < axis; ++d) rows *= os[d];
  for (int d = axis + 1; d < os.rank(); ++d) inner *= os[d];
  const int64_t W = os[axis] * inner;  // output row length, elements
  struct Part {
    const void* src;
    int64_t width, offset;  // elements
  };
  std::vector<Part> parts;
  int64_t offset = 0;
  for (const Tensor& t : in) {
    const int64_t width = t.shape()[axis] * inner;
    if (width > 0) parts.push_back({t.raw_data(), width, offset});
    offset += width;
  }
  char* dst = static_cast<char*>(out.raw_data());
  if (rows == 1 && parts.size() <= 8) {  // each input is one contiguous block of the output
    for (const Part& p : parts) memcpy_d2d(dev, dst + p.offset * es, p.src, p.width * es);
    return;
  }
  cudaStream_t st = dc::stream(dev);
  for (size_t first = 0; first < parts.size(); first += kConcatParts) {
    const size_t count = std::min(parts.size() - first, static_cast<size_t>(kConcatParts));
    // The widest element that divides every width, offset, W and pointer of this launch.
    int64_t counts[2 * kConcatParts + 1];
    const void* ptrs[kConcatParts + 1];
    int nc = 0, np = 0;
    counts[nc++] = W * es;
    ptrs[np++] = dst;
    int64_t max_width = 0;
    for (size_t i = first; i < first + count; ++i) {
      counts[nc++] = parts[i].width * es;
      counts[nc++] = parts[i].offset * es;
      ptrs[np++] = parts[i].src;
      max_width = max64(max_width, parts[i].width);
    }
    int64_t w = 16;
    for (; w > 1; w /= 2) {
      bool ok = true;
      for (int i = 0; i < nc; ++i) ok = ok && counts[i] % w == 0;
      for (int i = 0; i < np; ++i) ok = ok && aligned(ptrs[i], w);
      if (ok) break;
    }
    ConcatParts args{};
    for (size_t i = 0; i < count; ++i) {
      args.src[i] = parts[first + i].src;
      args.width[i] = parts[first + i].width * es / w;
      args.offset[i] = parts[first + i].offset * es / w;
    }
    const int64_t Ww = W * es / w;
    const int64_t per_part = rows * max_width * es / w;  // the most elements of one input
    const dim3 grid(grid1(per_part, dev), static_cast<unsigned>(count));
    const bool small = rows * Ww < (int64_t{1} << 31);
    TF_MOVE_DISPATCH_BYTES(w, {
      if (small)
        concat_kernel<E, uint32_t><<<grid, kThreads, 0, st>>>(reinterpret_cast<E*>(dst), rows, Ww,
                                                              args);
      else
        concat_kernel<E, int64_t><<<grid, kThreads, 0, st>>>(reinterpret_cast<E*>(dst), rows, Ww,
                                                             args);
    });
    dc::check_launch(op);
  }
}

}  // namespace

void Transpose::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  const Tensor& x = in[0];
  if (x.num_elements() == 0) return;
  int64_t st[kMaxRank];
  contiguous(x.shape(), st);
  Box b;
  b.rank = x.rank();
  for (int i = 0; i < b.rank; ++i) {
    b.size[i] = x.shape()[perm[i]];
    b.ss[i] = st[perm[i]];
  }
  contiguous(out[0].shape(), b.ds);
  copy_box(out[0].placement(), name(), x.raw_data(), out[0].raw_data(),
           static_cast<int64_t>(dtype_size(x.dtype())), b);
}

void BroadcastTo::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  const Tensor& x = in[0];
  const TensorShape& os = out[0].shape();
  if (out[0].num_elements() == 0) return;
  int64_t xs[kMaxRank];
  contiguous(x.shape(), xs);
  Box b;
  b.rank = os.rank();
  const int off = os.rank() - x.rank();
  for (int i = 0; i < b.rank; ++i) {
    b.size[i] = os[i];
    b.ss[i] = i < off || x.shape()[i - off] == 1 ? 0 : xs[i - off];
  }
  contiguous(os, b.ds);
  copy_box(out[0].placement(), name(), x.raw_data(), out[0].raw_data(),
           static_cast<int64_t>(dtype_size(x.dtype())), b);
}

void Slice::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  const Tensor& x = in[0];
  if (out[0].num_elements() == 0) return;
  const int64_t es = static_cast<int64_t>(dtype_size(x.dtype()));
  int64_t xs[kMaxRank];
  contiguous(x.shape(), xs);
  Box b;
  b.rank = x.rank();
  int64_t start = 0;
  for (int i = 0; i < b.rank; ++i) {
    b.size[i] = out[0].shape()[i];  // size with its -1 entries resolved
    b.ss[i] = xs[i];
    start += begin[i] * xs[i];
  }
  contiguous(out[0].shape(), b.ds);
  copy_box(out[0].placement(), name(), static_cast<const char*>(x.raw_data()) + start * es,
           out[0].raw_data(), es, b);
}

void Concat::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  concat_cuda(name(), in, out[0], axis);
}

void Pad::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  const Tensor& x = in[0];
  Tensor& y = out[0];
  const int64_t n = y.num_elements();
  if (n == 0) return;
  const Device dev = y.placement();
  const int64_t es = static_cast<int64_t>(dtype_size(x.dtype()));
  if (n != x.num_elements()) {
    uint64_t bits = 0;
    TF_DISPATCH_ALL_TYPES(x.dtype(), {
      const T v = convert_value<T>(constant_value);
      std::memcpy(&bits, &v, sizeof(T));
    });
    fill_bits(dev, name(), y.raw_data(), n, es, bits);
  }
  if (x.num_elements() == 0) return;
  int64_t ys[kMaxRank];
  contiguous(y.shape(), ys);
  Box b;
  b.rank = x.rank();
  int64_t start = 0;
  contiguous(x.shape(), b.ss);
  for (int i = 0; i < b.rank; ++i) {
    b.size[i] = x.shape()[i];
    b.ds[i] = ys[i];
    start += paddings[i].first * ys[i];
  }
  copy_box(dev, name(), x.raw_data(), static_cast<char*>(y.raw_data()) + start * es, es, b);
}

void Gather::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  if (in[1].dtype() == int32)
    gather_cuda<int32_t>(name(), in[0], in[1], out[0], axis);
  else
    gather_cuda<int64_t>(name(), in[0], in[1], out[0], axis);
}

}  // namespace tapeflow::prims
