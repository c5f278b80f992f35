// Per-device library handles for the CUDA kernels (internal). Each handle is created on first use,
// bound to the device's stream (core/cuda/context.h), and lives until the process exits.
#pragma once

#include <cublas_v2.h>
#include <cudnn.h>
#include <cusolverDn.h>

#include <mutex>

#include "core/device.h"
#include "core/tensor.h"

// Throw InternalError naming the call and the library's status.
#define TF_CUBLAS_CHECK(CALL)                                                    \
  do {                                                                           \
    cublasStatus_t tf_st_ = (CALL);                                              \
    if (tf_st_ != CUBLAS_STATUS_SUCCESS)                                         \
      ::tapeflow::detail::cuda::throw_library_error(#CALL, "cuBLAS",             \
                                                    static_cast<int>(tf_st_),    \
                                                    cublasGetStatusString(tf_st_)); \
  } while (0)
#define TF_CUSOLVER_CHECK(CALL)                                                  \
  do {                                                                           \
    cusolverStatus_t tf_st_ = (CALL);                                            \
    if (tf_st_ != CUSOLVER_STATUS_SUCCESS)                                       \
      ::tapeflow::detail::cuda::throw_library_error(#CALL, "cuSOLVER",           \
                                                    static_cast<int>(tf_st_), "");  \
  } while (0)
#define TF_CUDNN_CHECK(CALL)                                                     \
  do {                                                                           \
    cudnnStatus_t tf_st_ = (CALL);                                               \
    if (tf_st_ != CUDNN_STATUS_SUCCESS)                                          \
      ::tapeflow::detail::cuda::throw_library_error(#CALL, "cuDNN",              \
                                                    static_cast<int>(tf_st_),    \
                                                    cudnnGetErrorString(tf_st_)); \
  } while (0)

namespace tapeflow::detail::cuda {

[[noreturn]] void throw_library_error(const char* call, const char* library, int status,
                                      const char* reason);

cublasHandle_t cublas(Device device);
// A second cuBLAS handle of the device, in device pointer mode: alpha and beta are device
// pointers (scalars computed on the GPU, read without a host synchronisation). A handle of its
// own, since pointer mode is handle state and the main handle serves every thread.
cublasHandle_t cublas_device_scalars(Device device);
cusolverDnHandle_t cusolver(Device device);
// cuSOLVER documents its functions as callable from several host threads, not one handle used
// by two at once: calls on cusolver()'s handles hold this lock (they only queue work).
std::mutex& cusolver_mutex();
cudnnHandle_t cudnn(Device device);
// A cuDNN handle must not be used from two host threads at once: every call on cudnn()'s handles
// (the convolutions of ops/cuda/nn.cpp and their gradients in ops/cuda/nn_grad.cpp) holds this
// lock. One lock for all devices; the calls only queue work, except a one-off algorithm search.
std::mutex& cudnn_mutex();

// Whether cuDNN's legacy convolution API can take one spatial dimension: it reads sizes,
// padding, strides and dilations as ints and works out the padded extent (in + 2 pad) and the
// window's span ((k - 1) dilation + 1) as ints, which wrap for a dilation or a SAME padding
// near 2^31 (a negative padding or addresses outside the tensors).
inline bool cudnn_window_fits(int64_t in, int64_t pad, int64_t k, int64_t stride,
                              int64_t dilation) {
  constexpr int64_t kMax = 2147483647;
  return in + 2 * pad < kMax && (k - 1) * dilation + 1 < kMax && stride < kMax;
}

// Scratch memory for library calls, from the device's caching allocator: keep the returned
// tensor alive until the call has been queued (stream order makes reuse safe afterwards).
Tensor workspace(Device device, size_t nbytes);

}  // namespace tapeflow::detail::cuda
