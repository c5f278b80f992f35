// CUDA kernel of Special: one thread per element (grid-stride), each evaluating the float64
// scalar function of ops/cpu/special_math.h (the CPU kernels' code, compiled for the device),
// so both devices agree to the last bit but for the C library's erf/erfc/lgamma/log differing
// by an ulp.
#include "ops/cpu/special_apply.h"
#include "ops/cuda/common.cuh"
#include "ops/special.h"

namespace tapeflow::prims {

namespace {
template <class T>
__global__ void special_kernel(SpecialFn f, const T* a, const T* b, const T* c, T* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const double u = static_cast<double>(cuda::load(a[i]));
    const double v = b ? static_cast<double>(cuda::load(b[i])) : 0.0;
    const double w = c ? static_cast<double>(cuda::load(c[i])) : 0.0;
    y[i] = cuda::store<T>(apply_special(f, u, v, w));
  }
}
}  // namespace

void Special::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  const int64_t n = out[0].num_elements();
  if (n == 0) return;
  const Device dev = out[0].placement();
  cudaStream_t s = detail::cuda::stream(dev);
  TF_CUDA_DISPATCH_FLOAT_TYPES(in[0].dtype(), {
    const T* b = in.size() > 1 ? cuda::dptr<T>(in[1]) : nullptr;
    const T* c = in.size() > 2 ? cuda::dptr<T>(in[2]) : nullptr;
    special_kernel<T><<<cuda::grid_for(n, dev), cuda::kThreads, 0, s>>>(
        fn, cuda::dptr<T>(in[0]), b, c, cuda::dptr<T>(out[0]), n);
  });
  detail::cuda::check_launch(name());
}

}  // namespace tapeflow::prims
