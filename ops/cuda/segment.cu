// CUDA kernel of UnsortedSegmentReduce: the output is filled with the reducer's identity, then
// one thread per data element combines it into its segment's element with a compare-and-swap
// loop on the element's bits (16, 32 or 64 bits: no native atomic max/min/mul for floats and
// the half types). Max and min are order independent (NaN wins, as on the CPU); a product's
// rounding depends on the order, as on TF's GPU (the half types' products arrive in
// float32, see ops/segment.cpp). Ids >= num_segments raise the CPU kernel's
// InvalidArgumentError: a check kernel records the first bad row and the host reads it back
// (which waits for the stream); while a CUDA graph is being captured, where nothing may be read
// on the host, such rows are dropped instead.
#include <limits>
#include <string>
#include <type_traits>

#include "core/error.h"
#include "ops/cuda/common.cuh"
#include "ops/segment.h"

namespace tapeflow::prims {

namespace {
template <class T>
struct bits_of;
template <>
struct bits_of<__half> {
  using type = unsigned short;
};
template <>
struct bits_of<__nv_bfloat16> {
  using type = unsigned short;
};
template <>
struct bits_of<float> {
  using type = unsigned int;
};
template <>
struct bits_of<double> {
  using type = unsigned long long;
};
template <>
struct bits_of<int32_t> {
  using type = unsigned int;
};
template <>
struct bits_of<int64_t> {
  using type = unsigned long long;
};

// The type integer arithmetic wraps in: the unsigned one (floating types: themselves).
template <class C, bool = std::is_integral_v<C>>
struct wrapping {
  using type = C;
};
template <class C>
struct wrapping<C, true> {
  using type = std::make_unsigned_t<C>;
};

template <class C>
__device__ __forceinline__ C combine(SegmentReducer r, C a, C b) {
  // Integers in their unsigned type: wrapping, not signed overflow (undefined behaviour).
  using W = typename wrapping<C>::type;
  switch (r) {
    case SegmentReducer::Sum:
      return static_cast<C>(static_cast<W>(a) + static_cast<W>(b));
    case SegmentReducer::Prod:
      return static_cast<C>(static_cast<W>(a) * static_cast<W>(b));
    case SegmentReducer::Max:
      if constexpr (std::is_floating_point_v<C>)
        if (b != b) return b;
      return b > a ? b : a;
    case SegmentReducer::Min:
      if constexpr (std::is_floating_point_v<C>)
        if (b != b) return b;
      return b < a ? b : a;
  }
  return a;
}

template <class T>
__device__ void atomic_combine(SegmentReducer r, T* addr, cuda::dcompute_t<T> v) {
  using U = typename bits_of<T>::type;
  U* word = reinterpret_cast<U*>(addr);
  U old = *word, assumed;
  do {
    assumed = old;
    T cur;
    memcpy(&cur, &assumed, sizeof(T));
    const T next = cuda::store<T>(combine(r, cuda::load(cur), v));
    U next_bits;
    memcpy(&next_bits, &next, sizeof(T));
    if (next_bits == assumed) return;  // no change (also keeps a NaN in place)
    old = atomicCAS(word, assumed, next_bits);
  } while (old != assumed);
}

template <class T>
__global__ void fill_kernel(T* out, int64_t total, T value) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x)
    out[i] = value;
}

template <class T, class I>
__global__ void segment_reduce_kernel(SegmentReducer r, const T* data, const I* ids, T* out,
                                      int64_t n, int64_t d, int64_t segments) {
  const int64_t total = n * d;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t row = i / d, col = i - row * d;
    const int64_t id = static_cast<int64_t>(ids[row]);
    if (id >= 0 && id < segments) atomic_combine<T>(r, out + id * d + col, cuda::load(data[i]));
  }
}

// The first row whose id is >= segments, by atomicMin into *first_bad (all ones: none).
template <class I>
__global__ void check_ids_kernel(const I* ids, int64_t n, int64_t segments,
                                 unsigned long long* first_bad) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    if (static_cast<int64_t>(ids[i]) >= segments)
      atomicMin(first_bad, static_cast<unsigned long long>(i));
}

// Raises the CPU kernel's error for the first id >= segments (outside a CUDA-graph capture).
template <class I>
void check_ids(const char* op, const Tensor& ids, int64_t segments, const Device& dev,
               cudaStream_t s) {
  const int64_t n = ids.num_elements();
  if (n == 0 || detail::cuda::in_capture_scope(dev)) return;
  Tensor flag = detail::empty(TensorShape{1}, int64, dev);
  auto* first_bad = static_cast<unsigned long long*>(flag.raw_data());
  TF_CUDA_CHECK(cudaMemsetAsync(first_bad, 0xff, sizeof(unsigned long long), s));
  check_ids_kernel<I><<<cuda::grid_for(n, dev), cuda::kThreads, 0, s>>>(cuda::dptr<I>(ids), n,
                                                                        segments, first_bad);
  detail::cuda::check_launch(op);
  unsigned long long bad = 0;
  detail::copy_bytes(&bad, Device{}, first_bad, dev, sizeof(bad));
  if (bad == std::numeric_limits<unsigned long long>::max()) return;
  I v{};
  detail::copy_bytes(&v, Device{}, cuda::dptr<I>(ids) + bad, dev, sizeof(I));
  throw InvalidArgumentError(std::string("[") + op + "] segment_ids[" + std::to_string(bad) +
                             "] = " + std::to_string(static_cast<int64_t>(v)) +
                             " is not less than num_segments " + std::to_string(segments) +
                             " (negative ids drop their row)");
}

template <class T>
T identity_of(SegmentReducer r) {
  using C = cuda::dcompute_t<T>;
  C top;
  if constexpr (std::is_same_v<T, __half>)
    top = 65504.0f;
  else if constexpr (std::is_same_v<T, __nv_bfloat16>)
    top = 3.38953139e38f;
  else
    top = std::numeric_limits<C>::max();
  const C lowest = std::is_integral_v<C> ? std::numeric_limits<C>::lowest() : -top;
  switch (r) {
    case SegmentReducer::Sum:
      return static_cast<T>(C(0));
    case SegmentReducer::Prod:
      return static_cast<T>(C(1));
    case SegmentReducer::Max:
      return static_cast<T>(lowest);
    case SegmentReducer::Min:
      return static_cast<T>(top);
  }
  return static_cast<T>(C(0));
}
}  // namespace

void UnsortedSegmentReduce::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  const Device dev = out[0].placement();
  cudaStream_t s = detail::cuda::stream(dev);
  const int64_t n = in[0].shape()[0], d = in[0].shape()[1];
  const int64_t segments = out[0].shape()[0];
  const int64_t total_out = segments * d;
  if (in[1].dtype() == int32)
    check_ids<int32_t>(name(), in[1], segments, dev, s);
  else
    check_ids<int64_t>(name(), in[1], segments, dev, s);
  // The dtypes infer() accepts (no uint8 or bool kernels): the others compile to nothing.
  auto run = [&]<class T>(T*) {
    if constexpr (!std::is_same_v<T, bool> && !std::is_same_v<T, uint8_t>) {
      if (total_out > 0) {
        fill_kernel<T><<<cuda::grid_for(total_out, dev), cuda::kThreads, 0, s>>>(
            cuda::dptr<T>(out[0]), total_out, identity_of<T>(reducer));
        detail::cuda::check_launch(name());
      }
      if (n * d == 0 || total_out == 0) return;
      const unsigned grid = cuda::grid_for(n * d, dev);
      if (in[1].dtype() == int32)
        segment_reduce_kernel<T, int32_t><<<grid, cuda::kThreads, 0, s>>>(
            reducer, cuda::dptr<T>(in[0]), cuda::dptr<int32_t>(in[1]), cuda::dptr<T>(out[0]), n, d,
            segments);
      else
        segment_reduce_kernel<T, int64_t><<<grid, cuda::kThreads, 0, s>>>(
            reducer, cuda::dptr<T>(in[0]), cuda::dptr<int64_t>(in[1]), cuda::dptr<T>(out[0]), n, d,
            segments);
      detail::cuda::check_launch(name());
    }
  };
  TF_CUDA_DISPATCH_ALL_TYPES(in[0].dtype(), run(static_cast<T*>(nullptr)));
}

}  // namespace tapeflow::prims
