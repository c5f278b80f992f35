// CUDA kernels of the unary elementwise ops and of cast (the CPU ones are in
// ops/cpu/elementwise.cpp). Inputs and outputs are contiguous with the same element count, so
// every op takes the flat path of ops/cuda/elementwise_kernels.cuh: 16-byte vectors, grid-stride.
// Only the dtypes each op accepts are instantiated.
#include <cuda_runtime.h>

#include <string>

#include "core/cuda/context.h"
#include "core/error.h"
#include "ops/cuda/common.cuh"
#include "ops/cuda/elementwise_kernels.cuh"
#include "ops/unary.h"

namespace tapeflow {
namespace {

namespace ew = cuda::ew;

// The device element types an op accepts (as detail::UnaryDTypes, checked by infer).
template <detail::UnaryDTypes K, class T>
constexpr bool accepts() {
  using detail::UnaryDTypes;
  if constexpr (K == UnaryDTypes::Floating) return ew::is_float_v<T>;
  else if constexpr (K == UnaryDTypes::FloatingSigned)
    return ew::is_float_v<T> || ew::is_signed_int_v<T>;
  else if constexpr (K == UnaryDTypes::FloatingInteger || K == UnaryDTypes::Numeric)
    return ew::is_numeric_v<T>;
  else if constexpr (K == UnaryDTypes::Integer) return ew::is_int_v<T>;
  else return std::is_same_v<T, bool>;
}

[[noreturn]] void rejected_dtype(const char* op, DType d) {
  throw InternalError(std::string("[") + op + "] dtype " + std::string(dtype_name(d)) +
                      " reached the CUDA kernel although infer rejects it");
}

template <class Prim, class F>
void unary_eval(const Prim& prim, const Tensor& x, Tensor& y) {
  if (y.num_elements() == 0) return;
  TF_CUDA_DISPATCH_ALL_TYPES(x.dtype(), {
    if constexpr (accepts<Prim::kDTypes, T>()) {
      using C = cuda::dcompute_t<T>;
      ew::launch<T, T>(prim.name(), ew::Map1<F, T, T, C>{}, y, {&x});
    } else {
      rejected_dtype(prim.name(), x.dtype());
    }
  })
}

// Cast from device type From to every other dtype.
template <class From>
void cast_from(const char* name, const Tensor& x, Tensor& y) {
  TF_CUDA_DISPATCH_ALL_TYPES(y.dtype(), {
    if constexpr (!std::is_same_v<T, From>) ew::launch<T, From>(name, ew::CastOp<T, From>{}, y, {&x});
  })
}

}  // namespace

namespace prims {

#define TF_UNARY_CUDA(STRUCT, FUNCTOR)                                                        \
  void STRUCT::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {           \
    unary_eval<STRUCT, ew::FUNCTOR>(*this, in[0], out[0]);                                     \
  }
TF_UNARY_CUDA(Negative, NegativeF)
TF_UNARY_CUDA(Abs, AbsF)
TF_UNARY_CUDA(Sign, SignF)
TF_UNARY_CUDA(Exp, ExpF)
TF_UNARY_CUDA(Log, LogF)
TF_UNARY_CUDA(Log1p, Log1pF)
TF_UNARY_CUDA(Sqrt, SqrtF)
TF_UNARY_CUDA(Rsqrt, RsqrtF)
TF_UNARY_CUDA(Square, SquareF)
TF_UNARY_CUDA(Tanh, TanhF)
TF_UNARY_CUDA(Sigmoid, SigmoidF)
TF_UNARY_CUDA(Sin, SinF)
TF_UNARY_CUDA(Cos, CosF)
TF_UNARY_CUDA(Erf, ErfF)
TF_UNARY_CUDA(Erfc, ErfcF)
TF_UNARY_CUDA(Softsign, SoftsignF)
TF_UNARY_CUDA(Tan, TanF)
TF_UNARY_CUDA(Asin, AsinF)
TF_UNARY_CUDA(Acos, AcosF)
TF_UNARY_CUDA(Atan, AtanF)
TF_UNARY_CUDA(Sinh, SinhF)
TF_UNARY_CUDA(Cosh, CoshF)
TF_UNARY_CUDA(Asinh, AsinhF)
TF_UNARY_CUDA(Acosh, AcoshF)
TF_UNARY_CUDA(Atanh, AtanhF)
TF_UNARY_CUDA(Expm1, Expm1F)
TF_UNARY_CUDA(Floor, FloorF)
TF_UNARY_CUDA(Ceil, CeilF)
TF_UNARY_CUDA(Round, RoundF)
TF_UNARY_CUDA(LogicalNot, LogicalNotF)
TF_UNARY_CUDA(Invert, InvertF)
#undef TF_UNARY_CUDA

void Cast::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  const Tensor& x = in[0];
  Tensor& y = out[0];
  if (y.num_elements() == 0) return;
  if (x.dtype() == y.dtype()) {  // only reached by graph replay: the frontend returns x itself
    TF_CUDA_CHECK(cudaMemcpyAsync(y.raw_data(), x.raw_data(), x.nbytes(),
                                  cudaMemcpyDeviceToDevice,
                                  detail::cuda::stream(y.placement())));
    return;
  }
  TF_CUDA_DISPATCH_ALL_TYPES(x.dtype(), cast_from<T>(name(), x, y))
}

}  // namespace prims
}  // namespace tapeflow
