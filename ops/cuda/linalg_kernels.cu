// Small CUDA kernels of the linalg family; see ops/cuda/linalg_kernels.h.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>

#include "ops/cuda/common.cuh"
#include "ops/cuda/det_element.h"
#include "ops/cuda/linalg_kernels.h"

namespace tapeflow::detail::cuda_linalg {

namespace {

namespace tcu = ::tapeflow::cuda;
using tcu::grid_for;
using tcu::kThreads;

// Element offsets of batch t's matrices in a and b.
__device__ __forceinline__ void batch_offsets(int64_t t, const BatchLayout& l, int64_t& ao,
                                              int64_t& bo) {
  ao = 0;
  bo = 0;
  for (int d = l.rank - 1; d >= 0; --d) {
    const int64_t i = t % l.size[d];
    t /= l.size[d];
    ao += i * l.a_stride[d];
    bo += i * l.b_stride[d];
  }
}

// ---- integer matmul: 16 x 16 output tiles, k in steps of 16 through shared memory ----

constexpr int kTile = 16;

template <class T>
__global__ void int_gemm_kernel(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ c,
                                IntGemm g) {
  using U = std::make_unsigned_t<T>;  // wrapping arithmetic without signed overflow
  __shared__ T sa[kTile][kTile + 1];  // sa[i][q] = op(A)[row0 + i][q0 + q]
  __shared__ T sb[kTile][kTile + 1];  // sb[q][j] = op(B)[q0 + q][col0 + j]
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t tiles_m = (g.m + kTile - 1) / kTile, tiles_n = (g.n + kTile - 1) / kTile;
  for (int64_t t = blockIdx.z; t < g.batches; t += gridDim.z) {
    int64_t ao, bo;
    batch_offsets(t, g.layout, ao, bo);
    const T* A = a + ao;
    const T* B = b + bo;
    T* C = c + t * g.m * g.n;
    for (int64_t tm = blockIdx.y; tm < tiles_m; tm += gridDim.y) {
      for (int64_t tn = blockIdx.x; tn < tiles_n; tn += gridDim.x) {
        const int64_t row0 = tm * kTile, col0 = tn * kTile;
        U acc = 0;
        for (int64_t q0 = 0; q0 < g.k; q0 += kTile) {
          // Loads are coalesced along threadIdx.x in the stored layout of each operand.
          if (!g.ta) {
            const int64_t r = row0 + ty, q = q0 + tx;
            sa[ty][tx] = (r < g.m && q < g.k) ? A[r * g.lda + q] : T(0);
          } else {  // op(A)[r][q] = A[q][r]
            const int64_t r = row0 + tx, q = q0 + ty;
            sa[tx][ty] = (r < g.m && q < g.k) ? A[q * g.lda + r] : T(0);
          }
          if (!g.tb) {
            const int64_t q = q0 + ty, j = col0 + tx;
            sb[ty][tx] = (q < g.k && j < g.n) ? B[q * g.ldb + j] : T(0);
          } else {  // op(B)[q][j] = B[j][q]
            const int64_t q = q0 + tx, j = col0 + ty;
            sb[tx][ty] = (q < g.k && j < g.n) ? B[j * g.ldb + q] : T(0);
          }
          __syncthreads();
#pragma unroll
          for (int q = 0; q < kTile; ++q)
            acc += static_cast<U>(sa[ty][q]) * static_cast<U>(sb[q][tx]);
          __syncthreads();
        }
        const int64_t r = row0 + ty, j = col0 + tx;
        if (r < g.m && j < g.n) C[r * g.n + j] = static_cast<T>(acc);
      }
    }
  }
}

__global__ void gemm_pointers_kernel(const char* a, const char* b, char* c, BatchLayout l,
                                     int64_t elem, int64_t c_stride, int64_t batches,
                                     const void** pa, const void** pb, void** pc) {
  for (int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; t < batches;
       t += int64_t{gridDim.x} * blockDim.x) {
    int64_t ao, bo;
    batch_offsets(t, l, ao, bo);
    pa[t] = a + ao * elem;
    pb[t] = b + bo * elem;
    pc[t] = c + t * c_stride * elem;
  }
}

__global__ void strided_pointers_kernel(char* base, int64_t stride, int64_t count, void** ptrs) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x)
    ptrs[i] = base + i * stride;
}

template <class S>
__global__ void to_float_kernel(const S* in, float* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    out[i] = tcu::load(in[i]);
}

template <class D>
__global__ void from_float_kernel(const float* in, D* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    out[i] = tcu::store<D>(in[i]);
}

template <class T>
__global__ void identity_kernel(T* out, int64_t total, int64_t n) {
  const int64_t n2 = n * n;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i % n2;
    out[i] = (r / n == r % n) ? T(1) : T(0);
  }
}

template <class T>
__device__ __forceinline__ T read_scalar(const void* p, bool f64, T fallback) {
  if (p == nullptr) return fallback;
  return f64 ? static_cast<T>(*static_cast<const double*>(p))
             : static_cast<T>(*static_cast<const float*>(p));
}

template <class T>
__global__ void gemm_scalars_kernel(T sign, const void* scale, bool scale_f64, const void* decay,
                                    bool decay_f64, T* out) {
  out[0] = sign * read_scalar<T>(scale, scale_f64, T(1));
  out[1] = read_scalar<T>(decay, decay_f64, T(1));
}

// dst[t][j][i] = src[t][i][j]; the writes are coalesced.
template <class E>
__global__ void transpose_kernel(const E* src, E* dst, int64_t total, int64_t rows, int64_t cols) {
  const int64_t mat = rows * cols;
  for (int64_t o = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; o < total;
       o += int64_t{gridDim.x} * blockDim.x) {
    const int64_t t = o / mat, r = o % mat;
    const int64_t j = r / rows, i = r % rows;
    dst[o] = src[t * mat + i * cols + j];
  }
}

// A NaN on U's diagonal marks the matrix singular (info n + 1).
template <class T>
__global__ void nan_pivots_kernel(const T* lu, int* info, int64_t batches, int64_t n) {
  // One thread per diagonal element (a thread per matrix walked a 4096-long diagonal one
  // dependent load at a time: 1.4 ms, 8% of an H200's float32 inverse at N = 4096). Every
  // writer of a matrix's info writes the same value.
  const int64_t total = batches * n;
  for (int64_t k = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; k < total;
       k += int64_t{gridDim.x} * blockDim.x) {
    const int64_t t = k / n, i = k - t * n;
    const T v = lu[t * n * n + i * n + i];
    if (v != v) info[t] = static_cast<int>(n) + 1;
  }
}

// Grid-stride over every element: flags[t] = 1 where matrix t holds a NaN (every writer writes
// the same value).
template <class T>
__global__ void nan_matrices_kernel(const T* a, int* flags, int64_t total, int64_t mat) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x)
    if (a[i] != a[i]) flags[i / mat] = 1;
}

// One thread per matrix: n multiplications, as the CPU's loop.
template <class T>
__global__ void determinant_kernel(const T* lu, const int* ipiv, const int* info,
                                   const int* has_nan, T* out, int64_t batches, int64_t n) {
  for (int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; t < batches;
       t += int64_t{gridDim.x} * blockDim.x) {
    const bool nan_input = n > 0 && has_nan[t], zero_pivot = n > 0 && info[t] > 0;
    const T* m = lu + t * n * n;
    const int* p = ipiv + t * n;
    // Product of U's diagonal with separate exponent bookkeeping (no spurious overflow or
    // underflow in the partial products), and the sign of the row permutation.
    DetPart part = det_identity();
    if (!nan_input && !zero_pivot)
      for (int64_t i = 0; i < n; ++i)
        part = det_push(part, static_cast<double>(m[i * n + i]), p[i] != i + 1);
    out[t] = static_cast<T>(det_value(nan_input, zero_pivot, part));
  }
}

// Large matrices: one block per matrix, each thread pushing a strided share of the diagonal
// (coalesced pivots, independent loads) and the block combining the parts in a tree.
constexpr int kDetThreads = 256;
template <class T>
__global__ void __launch_bounds__(kDetThreads)
    determinant_block_kernel(const T* lu, const int* ipiv, const int* info, const int* has_nan,
                             T* out, int64_t batches, int64_t n) {
  __shared__ DetPart parts[kDetThreads];
  for (int64_t t = blockIdx.x; t < batches; t += gridDim.x) {
    const T* m = lu + t * n * n;
    const int* p = ipiv + t * n;
    DetPart part = det_identity();
    for (int64_t i = threadIdx.x; i < n; i += kDetThreads)
      part = det_push(part, static_cast<double>(m[i * n + i]), p[i] != i + 1);
    parts[threadIdx.x] = part;
    __syncthreads();
    for (int half = kDetThreads / 2; half > 0; half /= 2) {
      if (static_cast<int>(threadIdx.x) < half)
        parts[threadIdx.x] = det_combine(parts[threadIdx.x], parts[threadIdx.x + half]);
      __syncthreads();
    }
    if (threadIdx.x == 0)
      out[t] = static_cast<T>(det_value(has_nan[t] != 0, info[t] > 0, parts[0]));
    __syncthreads();  // parts[] is reused by the block's next matrix
  }
}

// From this order on a matrix gets a block (a thread per matrix walks n dependent products).
constexpr int64_t kDetBlockMinN = 256;

[[noreturn]] void bad_dtype(const char* what, DType dt) {
  throw InternalError(std::string("linalg CUDA kernel ") + what + ": unexpected dtype " +
                      std::string(dtype_name(dt)));
}

}  // namespace

void int_matmul(Device dev, DType dt, const void* a, const void* b, void* c, const IntGemm& g) {
  if (g.batches == 0 || g.m == 0 || g.n == 0) return;
  cudaStream_t s = cuda::stream(dev);
  const int64_t tiles_m = (g.m + kTile - 1) / kTile, tiles_n = (g.n + kTile - 1) / kTile;
  const dim3 block(kTile, kTile);
  const dim3 grid(static_cast<unsigned>(tiles_n < 0x7fffffff ? tiles_n : 0x7fffffff),
                  static_cast<unsigned>(tiles_m < 65535 ? tiles_m : 65535),
                  static_cast<unsigned>(g.batches < 65535 ? g.batches : 65535));
  if (dt == int32)
    int_gemm_kernel<int32_t><<<grid, block, 0, s>>>(static_cast<const int32_t*>(a),
                                                    static_cast<const int32_t*>(b),
                                                    static_cast<int32_t*>(c), g);
  else if (dt == int64)
    int_gemm_kernel<int64_t><<<grid, block, 0, s>>>(static_cast<const int64_t*>(a),
                                                    static_cast<const int64_t*>(b),
                                                    static_cast<int64_t*>(c), g);
  else
    bad_dtype("int_matmul", dt);
  cuda::check_launch("matmul");
}

void gemm_pointers(Device dev, size_t elem, const void* a, const void* b, void* c,
                   const BatchLayout& layout, int64_t c_stride, int64_t batches, const void** pa,
                   const void** pb, void** pc) {
  if (batches == 0) return;
  cudaStream_t s = cuda::stream(dev);
  gemm_pointers_kernel<<<grid_for(batches, dev), kThreads, 0, s>>>(
      static_cast<const char*>(a), static_cast<const char*>(b), static_cast<char*>(c), layout,
      static_cast<int64_t>(elem), c_stride, batches, pa, pb, pc);
  cuda::check_launch("matmul");
}

void strided_pointers(Device dev, void* base, int64_t stride_bytes, int64_t count, void** ptrs) {
  if (count == 0) return;
  cudaStream_t s = cuda::stream(dev);
  strided_pointers_kernel<<<grid_for(count, dev), kThreads, 0, s>>>(static_cast<char*>(base),
                                                                    stride_bytes, count, ptrs);
  cuda::check_launch("linalg");
}

void to_float(Device dev, DType src, const void* in, float* out, int64_t n) {
  if (n == 0) return;
  cudaStream_t s = cuda::stream(dev);
  if (src == float16)
    to_float_kernel<<<grid_for(n, dev), kThreads, 0, s>>>(static_cast<const __half*>(in), out, n);
  else if (src == bfloat16)
    to_float_kernel<<<grid_for(n, dev), kThreads, 0, s>>>(static_cast<const __nv_bfloat16*>(in),
                                                          out, n);
  else
    bad_dtype("to_float", src);
  cuda::check_launch("linalg");
}

void from_float(Device dev, DType dst, const float* in, void* out, int64_t n) {
  if (n == 0) return;
  cudaStream_t s = cuda::stream(dev);
  if (dst == float16)
    from_float_kernel<<<grid_for(n, dev), kThreads, 0, s>>>(in, static_cast<__half*>(out), n);
  else if (dst == bfloat16)
    from_float_kernel<<<grid_for(n, dev), kThreads, 0, s>>>(in, static_cast<__nv_bfloat16*>(out),
                                                            n);
  else
    bad_dtype("from_float", dst);
  cuda::check_launch("linalg");
}

void gemm_scalars(Device dev, DType dt, double sign, const void* scale, DType scale_dt,
                  const void* decay, DType decay_dt, void* out) {
  auto check_scalar = [](const void* p, DType t) {
    if (p != nullptr && t != float32 && t != float64) bad_dtype("gemm_scalars", t);
  };
  check_scalar(scale, scale_dt);
  check_scalar(decay, decay_dt);
  cudaStream_t s = cuda::stream(dev);
  const bool s64 = scale_dt == float64, d64 = decay_dt == float64;
  if (dt == float32)
    gemm_scalars_kernel<<<1, 1, 0, s>>>(static_cast<float>(sign), scale, s64, decay, d64,
                                        static_cast<float*>(out));
  else if (dt == float64)
    gemm_scalars_kernel<<<1, 1, 0, s>>>(sign, scale, s64, decay, d64, static_cast<double*>(out));
  else
    bad_dtype("gemm_scalars", dt);
  cuda::check_launch("variable_matmul_update");
}

void fill_identity(Device dev, DType dt, void* out, int64_t batches, int64_t n) {
  const int64_t total = batches * n * n;
  if (total == 0) return;
  cudaStream_t s = cuda::stream(dev);
  if (dt == float32)
    identity_kernel<<<grid_for(total, dev), kThreads, 0, s>>>(static_cast<float*>(out), total, n);
  else if (dt == float64)
    identity_kernel<<<grid_for(total, dev), kThreads, 0, s>>>(static_cast<double*>(out), total, n);
  else
    bad_dtype("fill_identity", dt);
  cuda::check_launch("inv");
}

void transpose(Device dev, size_t elem, const void* src, void* dst, int64_t batches, int64_t rows,
               int64_t cols) {
  const int64_t total = batches * rows * cols;
  if (total == 0) return;
  cudaStream_t s = cuda::stream(dev);
  if (elem == 4)
    transpose_kernel<<<grid_for(total, dev), kThreads, 0, s>>>(
        static_cast<const uint32_t*>(src), static_cast<uint32_t*>(dst), total, rows, cols);
  else if (elem == 8)
    transpose_kernel<<<grid_for(total, dev), kThreads, 0, s>>>(
        static_cast<const uint64_t*>(src), static_cast<uint64_t*>(dst), total, rows, cols);
  else
    throw InternalError("linalg CUDA kernel transpose: unexpected element size " +
                        std::to_string(elem));
  cuda::check_launch("solve");
}

void flag_nan_pivots(Device dev, DType dt, const void* lu, int* info, int64_t batches,
                     int64_t n) {
  if (batches == 0 || n == 0) return;
  cudaStream_t s = cuda::stream(dev);
  if (dt == float32)
    nan_pivots_kernel<<<grid_for(batches * n, dev), kThreads, 0, s>>>(
        static_cast<const float*>(lu), info, batches, n);
  else if (dt == float64)
    nan_pivots_kernel<<<grid_for(batches * n, dev), kThreads, 0, s>>>(
        static_cast<const double*>(lu), info, batches, n);
  else
    bad_dtype("flag_nan_pivots", dt);
  cuda::check_launch("inv");
}

void flag_nan_matrices(Device dev, DType dt, const void* a, int* flags, int64_t batches,
                       int64_t n) {
  if (batches == 0) return;
  cudaStream_t s = cuda::stream(dev);
  TF_CUDA_CHECK(cudaMemsetAsync(flags, 0, sizeof(int) * static_cast<size_t>(batches), s));
  const int64_t mat = n * n, total = batches * mat;
  if (total == 0) return;
  if (dt == float32)
    nan_matrices_kernel<<<grid_for(total, dev), kThreads, 0, s>>>(static_cast<const float*>(a),
                                                                  flags, total, mat);
  else if (dt == float64)
    nan_matrices_kernel<<<grid_for(total, dev), kThreads, 0, s>>>(static_cast<const double*>(a),
                                                                  flags, total, mat);
  else
    bad_dtype("flag_nan_matrices", dt);
  cuda::check_launch("det");
}

void determinant(Device dev, DType dt, const void* lu, const int* ipiv, const int* info,
                 const int* has_nan, void* out, int64_t batches, int64_t n) {
  if (batches == 0) return;
  cudaStream_t s = cuda::stream(dev);
  if (n >= kDetBlockMinN) {
    const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(batches, 65535));
    if (dt == float32)
      determinant_block_kernel<<<blocks, kDetThreads, 0, s>>>(
          static_cast<const float*>(lu), ipiv, info, has_nan, static_cast<float*>(out), batches,
          n);
    else if (dt == float64)
      determinant_block_kernel<<<blocks, kDetThreads, 0, s>>>(
          static_cast<const double*>(lu), ipiv, info, has_nan, static_cast<double*>(out),
          batches, n);
    else
      bad_dtype("determinant", dt);
    cuda::check_launch("det");
    return;
  }
  if (dt == float32)
    determinant_kernel<<<grid_for(batches, dev), kThreads, 0, s>>>(
        static_cast<const float*>(lu), ipiv, info, has_nan, static_cast<float*>(out), batches,
        n);
  else if (dt == float64)
    determinant_kernel<<<grid_for(batches, dev), kThreads, 0, s>>>(
        static_cast<const double*>(lu), ipiv, info, has_nan, static_cast<double*>(out), batches,
        n);
  else
    bad_dtype("determinant", dt);
  cuda::check_launch("det");
}

}  // namespace tapeflow::detail::cuda_linalg
