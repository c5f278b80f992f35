// CUDA kernels of TopK, under the CPU kernel's strict total order (NaN above +inf, -0 equal to
// +0, ties by lower index), so that both devices give the same values and indices.
//  - rows of up to 2048 elements: one block a row sorts (value, index) pairs in shared memory
//    with a bitonic network (padded to a power of two; the padding sorts last) and writes the
//    first k;
//  - longer rows: the same network in global scratch memory (keys and positions of every row),
//    one launch per step of the network over all rows, then the first k copied out.
// SearchSorted: one thread a value, a bisection of its row with `<` only (as the CPU kernel).
// Written without thrust or CUB to keep the device build small.
#include "ops/cuda/common.cuh"
#include "ops/sort.h"

namespace tapeflow::prims {

namespace {

constexpr int kSharedSortMax = 2048;
constexpr int kSortThreads = 512;

template <class C>
__device__ __forceinline__ bool is_nan_value(C v) {
  if constexpr (std::is_floating_point_v<C>) return isnan(v);
  else return false;
}

// Whether (va, ia) comes before (vb, ib); positions at or past n are padding and come last.
template <class C>
__device__ __forceinline__ bool before(C va, int ia, C vb, int ib, int n, bool ascending) {
  const bool pa = ia >= n, pb = ib >= n;
  if (pa || pb) return pa && pb ? ia < ib : pb;
  const bool na = is_nan_value(va), nb = is_nan_value(vb);
  if (na || nb) return na && nb ? ia < ib : (ascending ? nb : na);
  if (va != vb) return ascending ? va < vb : va > vb;
  return ia < ib;
}

// The bytes of the keys in shared memory, rounded up so that the int positions after them are
// aligned (uint8 keys of an odd row).
__host__ __device__ __forceinline__ size_t keys_bytes(int padded, size_t key_size) {
  return (static_cast<size_t>(padded) * key_size + 15) & ~size_t{15};
}

template <class T>
__global__ void top_k_shared_kernel(const T* x, T* values, int32_t* indices, int64_t rows, int n,
                                    int padded, int k, bool ascending) {
  using C = cuda::dcompute_t<T>;
  extern __shared__ __align__(16) unsigned char smem[];
  C* key = reinterpret_cast<C*>(smem);
  int* pos = reinterpret_cast<int*>(smem + keys_bytes(padded, sizeof(C)));
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* in = x + r * n;
    for (int i = threadIdx.x; i < padded; i += blockDim.x) {
      key[i] = i < n ? cuda::load(in[i]) : C(0);
      pos[i] = i;
    }
    for (int size = 2; size <= padded; size <<= 1) {
      for (int stride = size >> 1; stride > 0; stride >>= 1) {
        __syncthreads();
        for (int t = threadIdx.x; t < padded / 2; t += blockDim.x) {
          const int i = 2 * stride * (t / stride) + t % stride, j = i + stride;
          const bool up = (i & size) == 0;
          if (before(key[j], pos[j], key[i], pos[i], n, ascending) == up) {
            const C kv = key[i];
            key[i] = key[j];
            key[j] = kv;
            const int p = pos[i];
            pos[i] = pos[j];
            pos[j] = p;
          }
        }
      }
    }
    __syncthreads();
    for (int i = threadIdx.x; i < k; i += blockDim.x) {
      values[r * k + i] = in[pos[i]];
      indices[r * k + i] = pos[i];
    }
    __syncthreads();  // the next row reuses the shared arrays
  }
}

// Longer rows: the same bitonic network in global scratch memory, one launch per step over
// every row's pairs at once (log2(padded) * (log2(padded) + 1) / 2 launches).
template <class T, class C>
__global__ void bitonic_init_kernel(const T* x, C* key, int* pos, int64_t rows, int64_t n,
                                    int64_t padded) {
  const int64_t total = rows * padded;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = e / padded, i = e - r * padded;
    key[e] = i < n ? cuda::load(x[r * n + i]) : C(0);
    pos[e] = static_cast<int>(i);
  }
}

template <class C>
__global__ void bitonic_step_kernel(C* key, int* pos, int64_t rows, int n, int64_t padded,
                                    int64_t size, int64_t stride, bool ascending) {
  const int64_t half = padded / 2, total = rows * half;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = e / half, t = e - r * half;
    const int64_t i = 2 * stride * (t / stride) + t % stride, j = i + stride;
    const bool up = (i & size) == 0;
    C* kr = key + r * padded;
    int* pr = pos + r * padded;
    if (before(kr[j], pr[j], kr[i], pr[i], n, ascending) == up) {
      const C kv = kr[i];
      kr[i] = kr[j];
      kr[j] = kv;
      const int p = pr[i];
      pr[i] = pr[j];
      pr[j] = p;
    }
  }
}

template <class T>
__global__ void bitonic_out_kernel(const T* x, const int* pos, T* values, int32_t* indices,
                                   int64_t rows, int64_t n, int64_t padded, int64_t k) {
  const int64_t total = rows * k;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = e / k, i = e - r * k;
    const int p = pos[r * padded + i];
    values[e] = x[r * n + p];
    indices[e] = p;
  }
}

// A function template, so that the bool instantiation (never dispatched: infer rejects bool) is
// discarded rather than instantiated.
template <class T>
void launch_top_k(const Tensor& in, Tensor& values, Tensor& indices, int64_t k, bool ascending,
                  Device dev, cudaStream_t s) {
  if constexpr (!std::is_same_v<T, bool>) {
    using C = cuda::dcompute_t<T>;
    const int64_t rows = in.shape()[0], n = in.shape()[1];
    const T* x = cuda::dptr<T>(in);
    T* v = cuda::dptr<T>(values);
    int32_t* idx = cuda::dptr<int32_t>(indices);
    if (n <= kSharedSortMax) {
      int padded = 1;
      while (padded < n) padded <<= 1;
      const size_t shared =
          keys_bytes(padded, sizeof(C)) + static_cast<size_t>(padded) * sizeof(int);
      const int half = padded / 2;
      const int threads = half < 32 ? 32 : (half < kSortThreads ? half : kSortThreads);
      const unsigned grid = static_cast<unsigned>(rows < 65535 ? rows : 65535);
      top_k_shared_kernel<T><<<grid, threads, shared, s>>>(
          x, v, idx, rows, static_cast<int>(n), padded, static_cast<int>(k), ascending);
    } else {
      int64_t padded = 1;
      while (padded < n) padded <<= 1;
      // Scratch from the device's caching allocator: the keys (compute type) and positions.
      Tensor keys = detail::empty(TensorShape{rows * padded * static_cast<int64_t>(sizeof(C))},
                                  uint8, dev);
      Tensor pos = detail::empty(TensorShape{rows * padded}, int32, dev);
      C* kp = static_cast<C*>(keys.raw_data());
      int* pp = static_cast<int*>(pos.raw_data());
      bitonic_init_kernel<T, C><<<cuda::grid_for(rows * padded, dev), cuda::kThreads, 0, s>>>(
          x, kp, pp, rows, n, padded);
      const unsigned grid = cuda::grid_for(rows * padded / 2, dev);
      for (int64_t size = 2; size <= padded; size <<= 1)
        for (int64_t stride = size >> 1; stride > 0; stride >>= 1)
          bitonic_step_kernel<C><<<grid, cuda::kThreads, 0, s>>>(
              kp, pp, rows, static_cast<int>(n), padded, size, stride, ascending);
      bitonic_out_kernel<T><<<cuda::grid_for(rows * k, dev), cuda::kThreads, 0, s>>>(
          x, pp, v, idx, rows, n, padded, k);
    }
  }
}

template <class T, class O>
__global__ void search_kernel(const T* seq, const T* values, O* out, int64_t total, int64_t n,
                              int64_t m, bool right) {
  for (int64_t q = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; q < total;
       q += int64_t{gridDim.x} * blockDim.x) {
    const T* row = seq + (q / m) * n;
    const auto x = cuda::load(values[q]);
    int64_t lo = 0, hi = n;
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      const auto y = cuda::load(row[mid]);
      if (right ? !(x < y) : y < x) lo = mid + 1;
      else hi = mid;
    }
    out[q] = static_cast<O>(lo);
  }
}

template <class T>
void launch_search(const Tensor& seq, const Tensor& values, Tensor& out, bool right, Device dev,
                   cudaStream_t s) {
  if constexpr (!std::is_same_v<T, bool>) {
    const int64_t n = seq.shape()[1], m = values.shape()[1], total = values.num_elements();
    const unsigned grid = cuda::grid_for(total, dev);
    if (out.dtype() == int32)
      search_kernel<T, int32_t><<<grid, cuda::kThreads, 0, s>>>(
          cuda::dptr<T>(seq), cuda::dptr<T>(values), cuda::dptr<int32_t>(out), total, n, m, right);
    else
      search_kernel<T, int64_t><<<grid, cuda::kThreads, 0, s>>>(
          cuda::dptr<T>(seq), cuda::dptr<T>(values), cuda::dptr<int64_t>(out), total, n, m, right);
  }
}

}  // namespace

void SearchSorted::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  const Device dev = out[0].placement();
  cudaStream_t s = detail::cuda::stream(dev);
  if (out[0].num_elements() == 0) return;
  TF_CUDA_DISPATCH_ALL_TYPES(in[0].dtype(),
                             { launch_search<T>(in[0], in[1], out[0], right, dev, s); });
  detail::cuda::check_launch(name());
}

void TopK::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  const Device dev = out[0].placement();
  cudaStream_t s = detail::cuda::stream(dev);
  if (in[0].shape()[0] == 0 || k == 0) return;
  TF_CUDA_DISPATCH_ALL_TYPES(in[0].dtype(),
                             { launch_top_k<T>(in[0], out[0], out[1], k, ascending, dev, s); });
  detail::cuda::check_launch(name());
}

}  // namespace tapeflow::prims
