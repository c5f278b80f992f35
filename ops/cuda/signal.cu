// CUDA kernels of Fft, Rfft and Irfft (ops/signal.h) on cuFFT. tapeflow keeps a complex tensor as
// two real ones, cuFFT wants interleaved values: a kernel packs (real, imag) into a scratch
// buffer of float2/double2, cuFFT transforms it (C2C/Z2Z in place; R2C/D2Z from a copy of the
// real input into the buffer; C2R/Z2D from the buffer, which it overwrites, into the output),
// and a kernel unpacks and scales (cuFFT's inverses are unnormalised, as the CPU's: the 1/n is
// applied here). irfft's pack zeroes the imaginary parts of the zero and Nyquist bins, which
// cuFFT's C2R would otherwise read (the CPU kernel drops them too). Length 1 needs no transform.
//
// Plans: one per (physical GPU, transform type, length, batch), made on first use and kept for
// the life of the process (a captured CUDA graph may hold a plan's kernels and twiddle tables,
// so none is ever destroyed). Batches are cut into chunks of at most kMaxBatch rows whose sizes
// are powers of two, so a length has at most log2(kMaxBatch) + 1 plans whatever batch sizes come.
// Plans take their work area from the device's caching allocator at each call (no allocation
// of cuFFT's own after the plan is made): the calls hold one lock while they set the plan's
// stream and work area and queue the transform.
#include <cufft.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <tuple>

#include "ops/cuda/common.cuh"
#include "ops/cuda/handles.h"
#include "ops/signal.h"

namespace tapeflow::prims {

namespace {

namespace cu = ::tapeflow::detail::cuda;

constexpr int64_t kMaxBatch = int64_t{1} << 14;

const char* cufft_reason(cufftResult r) {
  switch (r) {
    case CUFFT_INVALID_PLAN:
      return "invalid plan";
    case CUFFT_ALLOC_FAILED:
      return "allocation failed";
    case CUFFT_INVALID_VALUE:
      return "invalid value";
    case CUFFT_INTERNAL_ERROR:
      return "internal error";
    case CUFFT_EXEC_FAILED:
      return "execution failed";
    case CUFFT_SETUP_FAILED:
      return "setup failed";
    case CUFFT_INVALID_SIZE:
      return "invalid size";
    default:
      return "";
  }
}

#define TF_CUFFT_CHECK(CALL)                                                                 \
  do {                                                                                       \
    cufftResult tf_r_ = (CALL);                                                              \
    if (tf_r_ != CUFFT_SUCCESS)                                                              \
      cu::throw_library_error(#CALL, "cuFFT", static_cast<int>(tf_r_), cufft_reason(tf_r_)); \
  } while (0)

struct Plan {
  cufftHandle handle = 0;
  size_t work_bytes = 0;
};

std::mutex& plan_mutex() {
  static std::mutex m;
  return m;
}

// The plan of a transform of `batch` rows of length n (the caller holds plan_mutex()).
const Plan& plan_for(Device dev, cufftType type, int64_t n, int64_t batch) {
  static std::map<std::tuple<int, int, int64_t, int64_t>, Plan> plans;
  const auto key = std::make_tuple(cu::physical_gpu(dev), static_cast<int>(type), n, batch);
  auto it = plans.find(key);
  if (it != plans.end()) return it->second;
  Plan p;
  TF_CUFFT_CHECK(cufftCreate(&p.handle));
  try {
    TF_CUFFT_CHECK(cufftSetAutoAllocation(p.handle, 0));
    long long dims[1] = {static_cast<long long>(n)};
    TF_CUFFT_CHECK(cufftMakePlanMany64(p.handle, 1, dims, nullptr, 1, 0, nullptr, 1, 0, type,
                                       static_cast<long long>(batch), &p.work_bytes));
  } catch (...) {
    cufftDestroy(p.handle);  // a plan that could not be made (out of memory) is not kept
    throw;
  }
  return plans.emplace(key, p).first->second;
}

template <class T>
struct complex_of;
template <>
struct complex_of<float> {
  using type = float2;
};
template <>
struct complex_of<double> {
  using type = double2;
};

// buf[i] = (re[i], im ? im[i] : 0); with edges_n > 0 the imaginary part is 0 at bin 0 and (even
// edges_n) at bin edges_n / 2 of each row of m bins.
template <class T, class V>
__global__ void __launch_bounds__(cuda::kThreads)
    pack_kernel(const T* __restrict__ re, const T* __restrict__ im, V* __restrict__ buf,
                int64_t count, int64_t m, int64_t edges_n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    T v = im ? im[i] : T(0);
    if (edges_n > 0) {
      const int64_t k = i % m;
      if (k == 0 || (edges_n % 2 == 0 && k == edges_n / 2)) v = T(0);
    }
    buf[i] = V{re[i], v};
  }
}

// re[i] = buf[i].x * scale, im[i] = buf[i].y * scale (im may be null).
template <class T, class V>
__global__ void __launch_bounds__(cuda::kThreads)
    unpack_kernel(const V* __restrict__ buf, T* __restrict__ re, T* __restrict__ im, int64_t count,
                  T scale) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    re[i] = buf[i].x * scale;
    if (im) im[i] = buf[i].y * scale;
  }
}

template <class T>
__global__ void __launch_bounds__(cuda::kThreads)
    scale_kernel(T* __restrict__ y, int64_t count, T scale) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride)
    y[i] *= scale;
}

// One transform call per chunk of rows: `run(plan, first_row, rows)`.
template <class F>
void for_chunks(Device dev, cufftType type, int64_t n, int64_t rows, F&& run) {
  std::lock_guard lock(plan_mutex());
  cudaStream_t st = cu::stream(dev);
  int64_t done = 0;
  while (done < rows) {
    int64_t chunk = kMaxBatch;
    while (chunk > rows - done) chunk /= 2;
    const Plan& p = plan_for(dev, type, n, chunk);
    TF_CUFFT_CHECK(cufftSetStream(p.handle, st));
    const Tensor work = cu::workspace(dev, p.work_bytes > 0 ? p.work_bytes : 1);
    TF_CUFFT_CHECK(cufftSetWorkArea(p.handle, work.raw_data()));
    run(p.handle, done, chunk);
    done += chunk;
  }
}

template <class T>
void fft_eval(const Tensor& re, const Tensor& im, Tensor& out_re, Tensor& out_im, bool inverse) {
  using V = typename complex_of<T>::type;
  const int64_t n = re.shape()[-1];
  const int64_t count = re.shape().num_elements();
  if (count == 0) return;
  const int64_t rows = count / n;
  const Device dev = out_re.placement();
  cudaStream_t st = cu::stream(dev);
  const Tensor buf = cu::workspace(dev, static_cast<size_t>(count) * sizeof(V));
  V* b = static_cast<V*>(buf.raw_data());
  const unsigned grid = cuda::grid_for(count, dev);
  pack_kernel<T, V>
      <<<grid, cuda::kThreads, 0, st>>>(cuda::dptr<T>(re), cuda::dptr<T>(im), b, count, n, 0);
  cu::check_launch(inverse ? "ifft" : "fft");
  if (n > 1) {
    const cufftType type = std::is_same_v<T, float> ? CUFFT_C2C : CUFFT_Z2Z;
    for_chunks(dev, type, n, rows, [&](cufftHandle h, int64_t first, int64_t) {
      V* p = b + first * n;
      if constexpr (std::is_same_v<T, float>)
        TF_CUFFT_CHECK(cufftExecC2C(h, p, p, inverse ? CUFFT_INVERSE : CUFFT_FORWARD));
      else
        TF_CUFFT_CHECK(cufftExecZ2Z(h, p, p, inverse ? CUFFT_INVERSE : CUFFT_FORWARD));
    });
  }
  const T scale = inverse ? T(1) / static_cast<T>(n) : T(1);
  unpack_kernel<T, V><<<grid, cuda::kThreads, 0, st>>>(b, cuda::dptr<T>(out_re),
                                                       cuda::dptr<T>(out_im), count, scale);
  cu::check_launch(inverse ? "ifft" : "fft");
}

template <class T>
void rfft_eval(const Tensor& x, Tensor& out_re, Tensor& out_im, int64_t n) {
  using V = typename complex_of<T>::type;
  const int64_t count = x.shape().num_elements();
  if (count == 0 || n == 0) return;
  const int64_t rows = count / n, m = n / 2 + 1;
  const Device dev = out_re.placement();
  cudaStream_t st = cu::stream(dev);
  const Tensor buf = cu::workspace(dev, static_cast<size_t>(rows * m) * sizeof(V));
  V* b = static_cast<V*>(buf.raw_data());
  if (n == 1) {
    pack_kernel<T, V><<<cuda::grid_for(count, dev), cuda::kThreads, 0, st>>>(
        cuda::dptr<T>(x), nullptr, b, count, 1, 0);
    cu::check_launch("rfft");
  } else {
    // cuFFT's R2C takes a non-const input that it may use as scratch: a copy of the signal.
    const Tensor copy = cu::workspace(dev, static_cast<size_t>(count) * sizeof(T));
    TF_CUDA_CHECK(cudaMemcpyAsync(copy.raw_data(), x.raw_data(),
                                  static_cast<size_t>(count) * sizeof(T), cudaMemcpyDeviceToDevice,
                                  st));
    T* in = static_cast<T*>(copy.raw_data());
    const cufftType type = std::is_same_v<T, float> ? CUFFT_R2C : CUFFT_D2Z;
    for_chunks(dev, type, n, rows, [&](cufftHandle h, int64_t first, int64_t) {
      if constexpr (std::is_same_v<T, float>)
        TF_CUFFT_CHECK(cufftExecR2C(h, in + first * n, b + first * m));
      else
        TF_CUFFT_CHECK(cufftExecD2Z(h, in + first * n, b + first * m));
    });
  }
  unpack_kernel<T, V><<<cuda::grid_for(rows * m, dev), cuda::kThreads, 0, st>>>(
      b, cuda::dptr<T>(out_re), cuda::dptr<T>(out_im), rows * m, T(1));
  cu::check_launch("rfft");
}

template <class T>
void irfft_eval(const Tensor& re, const Tensor& im, Tensor& out, int64_t n) {
  using V = typename complex_of<T>::type;
  const int64_t count = out.shape().num_elements();
  if (count == 0 || n == 0) return;
  const int64_t rows = count / n, m = n / 2 + 1;
  const Device dev = out.placement();
  cudaStream_t st = cu::stream(dev);
  const Tensor buf = cu::workspace(dev, static_cast<size_t>(rows * m) * sizeof(V));
  V* b = static_cast<V*>(buf.raw_data());
  pack_kernel<T, V><<<cuda::grid_for(rows * m, dev), cuda::kThreads, 0, st>>>(
      cuda::dptr<T>(re), cuda::dptr<T>(im), b, rows * m, m, n);
  cu::check_launch("irfft");
  T* y = cuda::dptr<T>(out);
  if (n == 1) {
    unpack_kernel<T, V>
        <<<cuda::grid_for(rows, dev), cuda::kThreads, 0, st>>>(b, y, nullptr, rows, T(1));
    cu::check_launch("irfft");
    return;
  }
  const cufftType type = std::is_same_v<T, float> ? CUFFT_C2R : CUFFT_Z2D;
  for_chunks(dev, type, n, rows, [&](cufftHandle h, int64_t first, int64_t) {
    if constexpr (std::is_same_v<T, float>)
      TF_CUFFT_CHECK(cufftExecC2R(h, b + first * m, y + first * n));
    else
      TF_CUFFT_CHECK(cufftExecZ2D(h, b + first * m, y + first * n));
  });
  scale_kernel<T>
      <<<cuda::grid_for(count, dev), cuda::kThreads, 0, st>>>(y, count, T(1) / static_cast<T>(n));
  cu::check_launch("irfft");
}

}  // namespace

void Fft::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  if (in[0].dtype() == float32)
    fft_eval<float>(in[0], in[1], out[0], out[1], inverse);
  else
    fft_eval<double>(in[0], in[1], out[0], out[1], inverse);
}

void Rfft::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  if (in[0].dtype() == float32)
    rfft_eval<float>(in[0], out[0], out[1], fft_length);
  else
    rfft_eval<double>(in[0], out[0], out[1], fft_length);
}

void Irfft::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  if (in[0].dtype() == float32)
    irfft_eval<float>(in[0], in[1], out[0], fft_length);
  else
    irfft_eval<double>(in[0], in[1], out[0], fft_length);
}

}  // namespace tapeflow::prims
