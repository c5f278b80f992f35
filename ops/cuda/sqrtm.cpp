// sqrtm and its gradient for tensors on a GPU: TF has no GPU kernel (it places sqrtm on the
// CPU), and neither CUDA library offers a real Schur decomposition, so the matrices go to the
// host, run the CPU routine (ops/cpu/sqrtm.cpp) and come back. The copies wait for the stream,
// so inside a CUDA graph capture (jit_compile) the kernel refuses, and that graph replays node by
// node (docs/function.md).
#include <cuda_runtime.h>

#include <vector>

#include "core/allocator.h"
#include "core/check.h"
#include "core/cuda/context.h"
#include "core/device.h"
#include "ops/sqrtm.h"

namespace tapeflow::prims {

namespace {

namespace cu = detail::cuda;

void refuse_capture(const char* op, Device dev) {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  TF_CUDA_CHECK(cudaStreamIsCapturing(cu::stream(dev), &capture));
  TF_CHECK_T(UnimplementedError, capture == cudaStreamCaptureStatusNone, op,
             "goes through the host on a GPU, which a CUDA graph cannot capture");
}

std::vector<char> to_host(const Tensor& t, Device dev) {
  std::vector<char> h(t.nbytes());
  detail::copy_bytes(h.data(), Device{}, t.raw_data(), dev, h.size());
  return h;
}

}  // namespace

void MatrixSquareRoot::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  if (out[0].num_elements() == 0) return;
  const Device dev = out[0].placement();
  refuse_capture(name(), dev);
  const std::vector<char> a = to_host(in[0], dev);
  std::vector<char> r(out[0].nbytes());
  detail::sqrtm_host(in[0].dtype(), in[0].shape(), a.data(), r.data());
  detail::copy_bytes(out[0].raw_data(), dev, r.data(), Device{}, r.size());
}

void MatrixSquareRootGrad::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  if (out[0].num_elements() == 0) return;
  const Device dev = out[0].placement();
  refuse_capture(name(), dev);
  const std::vector<char> root = to_host(in[0], dev), g = to_host(in[1], dev);
  std::vector<char> x(out[0].nbytes());
  detail::sqrtm_grad_host(in[0].dtype(), in[0].shape(), root.data(), g.data(), x.data());
  detail::copy_bytes(out[0].raw_data(), dev, x.data(), Device{}, x.size());
}

}  // namespace tapeflow::prims
