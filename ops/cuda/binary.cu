// CUDA kernels of the binary elementwise ops and of where (Select); the CPU ones are in
// ops/cpu/elementwise_binary.cpp. Operands with the output's element count or a single element
// take the flat (vectorised) path of ops/cuda/elementwise_kernels.cuh, any other broadcast the
// strided path. Only the dtypes each op accepts are instantiated; greater and greater_equal run
// as less and less_equal with the operands swapped.
#include <cuda_runtime.h>

#include <string>
#include <type_traits>

#include "core/cuda/context.h"
#include "core/error.h"
#include "ops/binary.h"
#include "ops/cuda/common.cuh"
#include "ops/cuda/elementwise_kernels.cuh"

namespace tapeflow {
namespace {

namespace ew = cuda::ew;
using detail::BinaryKind;

template <BinaryKind K, class T>
constexpr bool accepts() {
  if constexpr (K == BinaryKind::Equality) return true;
  else if constexpr (K == BinaryKind::Logical) return std::is_same_v<T, bool>;
  else if constexpr (K == BinaryKind::Floating) return ew::is_float_v<T>;
  else if constexpr (K == BinaryKind::Bitwise) return ew::is_int_v<T>;
  else return ew::is_numeric_v<T>;
}

// Result element type: bool for comparisons; true division of integers gives float32 (uint8) or
// float64 (int32, int64).
template <BinaryKind K, class T>
struct result {
  using type = T;
};
template <class T>
struct result<BinaryKind::Compare, T> {
  using type = bool;
};
template <class T>
struct result<BinaryKind::Equality, T> {
  using type = bool;
};
template <class T>
struct result<BinaryKind::Logical, T> {
  using type = bool;
};
template <class T>
struct result<BinaryKind::TrueDivide, T> {
  using type = std::conditional_t<ew::is_int_v<T>,
                                  std::conditional_t<std::is_same_v<T, uint8_t>, float, double>, T>;
};

[[noreturn]] void rejected_dtype(const char* op, DType d) {
  throw InternalError(std::string("[") + op + "] dtype " + std::string(dtype_name(d)) +
                      " reached the CUDA kernel although infer rejects it");
}

// F applied to (a, b), or to (b, a) when `swap`; K is the op's kind (dtypes and result type).
template <BinaryKind K, class F, bool swap = false>
void binary_eval(const char* name, const Tensor& a, const Tensor& b, Tensor& out) {
  if (out.num_elements() == 0) return;
  TF_CUDA_DISPATCH_ALL_TYPES(a.dtype(), {
    if constexpr (accepts<K, T>()) {
      using O = typename result<K, T>::type;
      using C = cuda::dcompute_t<std::conditional_t<std::is_same_v<O, bool>, T, O>>;
      const ew::Map2<F, T, O, C> op{};
      if constexpr (swap) ew::launch<O, T, T>(name, op, out, {&b, &a});
      else ew::launch<O, T, T>(name, op, out, {&a, &b});
    } else {
      rejected_dtype(name, a.dtype());
    }
  })
}

struct IsNegative {
  template <class T>
  __device__ bool operator()(T v) const {
    if constexpr (std::is_signed_v<T>)
      return v < T(0);
    else
      return false;
  }
};
struct IsZero {
  template <class T>
  __device__ bool operator()(T v) const {
    return v == T(0);
  }
};

template <class T, class Pred>
__global__ void __launch_bounds__(cuda::kThreads)
    any_kernel(const T* __restrict__ e, int64_t n, Pred pred, int* __restrict__ flag) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  bool hit = false;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    hit = hit || pred(e[i]);
  if (hit) *flag = 1;
}

// Whether some element of e satisfies pred, for int32/int64/uint8 tensors (other dtypes: false,
// with no device work), read on the host: this synchronises the stream. Integer pow (negative
// exponents) and integer floordiv and floormod (zero divisors) check their operands before
// computing anything, as TF's CPU kernels (and ours) do. Inside a CUDA graph capture nothing may be read on the host, so it answers false:
// a negative exponent then gives 1 (the kernel's power by squaring), a zero divisor a / 1 and
// a % 1 (TF's GPU kernels do not check either).
template <class Pred>
bool any_element(const char* op, const Tensor& e, Pred pred) {
  const Device dev = e.placement();
  if (e.dtype() != int32 && e.dtype() != int64 && e.dtype() != uint8) return false;
  if (detail::cuda::in_capture_scope(dev)) return false;
  cudaStream_t st = detail::cuda::stream(dev);
  Tensor flag = detail::empty(TensorShape{}, int32, dev);
  TF_CUDA_CHECK(cudaMemsetAsync(flag.raw_data(), 0, sizeof(int), st));
  const int64_t n = e.num_elements();
  const unsigned grid = cuda::grid_for(n, dev);
  if (e.dtype() == int32)
    any_kernel<<<grid, cuda::kThreads, 0, st>>>(cuda::dptr<int32_t>(e), n, pred,
                                                cuda::dptr<int>(flag));
  else if (e.dtype() == int64)
    any_kernel<<<grid, cuda::kThreads, 0, st>>>(cuda::dptr<int64_t>(e), n, pred,
                                                cuda::dptr<int>(flag));
  else
    any_kernel<<<grid, cuda::kThreads, 0, st>>>(cuda::dptr<uint8_t>(e), n, pred,
                                                cuda::dptr<int>(flag));
  detail::cuda::check_launch(op);
  return flag.item<int32_t>() != 0;  // copies to the host after the stream's work
}

void check_int_exponents(const Tensor& e) {
  if (any_element("pow", e, IsNegative{}))
    throw InvalidArgumentError(std::string("[pow] Integers to negative integer powers are not "
                                           "allowed (") +
                               std::string(dtype_name(e.dtype())) + " exponent)");
}

void check_int_divisors(const char* op, const Tensor& b) {
  if (any_element(op, b, IsZero{}))
    throw InvalidArgumentError(std::string("[") + op + "] Integer division by zero (" +
                               std::string(dtype_name(b.dtype())) + " divisor)");
}

template <class E>
void select_typed(const Tensor& c, const Tensor& x, const Tensor& y, Tensor& out) {
  ew::launch<E, bool, E, E>("where", ew::SelectOp<E>{}, out, {&c, &x, &y});
}

}  // namespace

namespace prims {

#define TF_BINARY_CUDA(STRUCT, FUNCTOR, SWAP)                                                 \
  void STRUCT::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {           \
    binary_eval<kKind, ew::FUNCTOR, SWAP>(name(), in[0], in[1], out[0]);                      \
  }
TF_BINARY_CUDA(Add, AddF, false)
TF_BINARY_CUDA(Subtract, SubtractF, false)
TF_BINARY_CUDA(Multiply, MultiplyF, false)
TF_BINARY_CUDA(Divide, DivideF, false)
TF_BINARY_CUDA(Maximum, MaximumF, false)
TF_BINARY_CUDA(Minimum, MinimumF, false)
TF_BINARY_CUDA(Equal, EqualF, false)
TF_BINARY_CUDA(NotEqual, NotEqualF, false)
TF_BINARY_CUDA(Less, LessF, false)
TF_BINARY_CUDA(LessEqual, LessEqualF, false)
TF_BINARY_CUDA(Greater, LessF, true)
TF_BINARY_CUDA(GreaterEqual, LessEqualF, true)
TF_BINARY_CUDA(LogicalAnd, LogicalAndF, false)
TF_BINARY_CUDA(LogicalOr, LogicalOrF, false)
TF_BINARY_CUDA(Atan2, Atan2F, false)
TF_BINARY_CUDA(BitwiseAnd, BitwiseAndF, false)
TF_BINARY_CUDA(BitwiseOr, BitwiseOrF, false)
TF_BINARY_CUDA(BitwiseXor, BitwiseXorF, false)
TF_BINARY_CUDA(LeftShift, LeftShiftF, false)
TF_BINARY_CUDA(RightShift, RightShiftF, false)
#undef TF_BINARY_CUDA

void Pow::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  if (out[0].num_elements() == 0) return;
  if (in[1].dtype() == int32 || in[1].dtype() == int64) check_int_exponents(in[1]);
  binary_eval<kKind, ew::PowF>(name(), in[0], in[1], out[0]);
}

void FloorDiv::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  if (out[0].num_elements() == 0) return;
  check_int_divisors(name(), in[1]);
  // The functor takes the storage type (the half types round the quotient to it).
  TF_CUDA_DISPATCH_ALL_TYPES(in[0].dtype(), {
    if constexpr (ew::is_numeric_v<T>) {
      using C = cuda::dcompute_t<T>;
      ew::launch<T, T, T>(name(), ew::Map2<ew::FloorDivF<T>, T, T, C>{}, out[0],
                          {&in[0], &in[1]});
    } else {
      rejected_dtype(name(), in[0].dtype());
    }
  })
}

void FloorMod::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  if (out[0].num_elements() == 0) return;
  check_int_divisors(name(), in[1]);
  binary_eval<kKind, ew::FloorModF>(name(), in[0], in[1], out[0]);
}

void Select::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  if (out[0].num_elements() == 0) return;
  switch (dtype_size(in[1].dtype())) {
    case 1: select_typed<uint8_t>(in[0], in[1], in[2], out[0]); break;
    case 2: select_typed<uint16_t>(in[0], in[1], in[2], out[0]); break;
    case 4: select_typed<uint32_t>(in[0], in[1], in[2], out[0]); break;
    case 8: select_typed<uint64_t>(in[0], in[1], in[2], out[0]); break;
    default: throw InternalError("[where] unexpected element size");
  }
}

}  // namespace prims
}  // namespace tapeflow
