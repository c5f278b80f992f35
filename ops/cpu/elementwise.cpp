// CPU kernels of the unary elementwise ops and of cast: straight loops over the contiguous
// elements, split over the OpenMP pool above a grain that depends on the op's cost. Binary ops
// and where are in elementwise_binary.cpp.
#if defined(__GNUC__) && !defined(__clang__)
// Lets GCC vectorise the loops (see ops/cpu/unary_ops.h); first, so that every function of this
// file, inlined header code included, is compiled with the same options.
#pragma GCC optimize("no-math-errno", "no-trapping-math", "fp-contract=fast")
#endif

#include <cstring>

#include "core/check.h"
#include "core/parallel.h"
#include "ops/cpu/fusion_kernels.h"
#include "ops/cpu/math_avx512.h"
#include "ops/cpu/unary_ops.h"
#include "ops/unary.h"

namespace tapeflow {
namespace {

// Elements per thread below which splitting does not pay: cheap ops are memory-bound and need
// large chunks; transcendental ones cost ~10x more per element.
constexpr int64_t kCheapGrain = 32768;
constexpr int64_t kMathGrain = 4096;

#define TF_AI inline __attribute__((always_inline))

// out = F(in). Where F's vectorised form covers a bounded range (cpu::fast_max_of: sin and cos),
// blocks of 256 are checked first: a block with any |x| beyond it (or NaN) runs
// F::slow, the C library's function, on those elements.
template <class F, class C, class T, class O>
TF_AI void map_unary(const T* __restrict in, O* __restrict out, int64_t n) {
  const F f{};
  constexpr C bound = cpu::fast_max_of<F, C>();
  if constexpr (bound == C(0)) {
    for (int64_t i = 0; i < n; ++i) out[i] = cpu::store<O>(f(cpu::load<C>(in[i])));
  } else {
    constexpr int64_t kBlock = 256;
    for (int64_t b = 0; b < n; b += kBlock) {
      const int64_t e = n - b < kBlock ? n : b + kBlock;
      int beyond = 0;
      for (int64_t i = b; i < e; ++i) beyond |= !(std::abs(cpu::load<C>(in[i])) <= bound);
      if (beyond == 0) {
        for (int64_t i = b; i < e; ++i) out[i] = cpu::store<O>(f(cpu::load<C>(in[i])));
      } else {
        for (int64_t i = b; i < e; ++i) {
          const C x = cpu::load<C>(in[i]);
          out[i] = cpu::store<O>(std::abs(x) <= bound ? f(x) : F::slow(x));
        }
      }
    }
  }
}

// One loop, compiled for the baseline ISA, AVX2 and AVX-512 (see ops/cpu/unary_ops.h).
#define TF_DEFINE_UNARY_RANGE(NAME, TARGET)                                           \
  template <class F, class T, class O>                                                \
  TARGET void NAME(const T* __restrict in, O* __restrict out, int64_t n) {            \
    map_unary<F, typename F::template calc_type<T>>(in, out, n);                      \
  }
TF_DEFINE_UNARY_RANGE(unary_range, )
#if TF_CPU_MULTIVERSION
// float64 exp on the baseline x86-64 ISA (SSE2, no FMA): the C library's scalar exp, 4.2 ns per
// element against 6.3 for two-lane SSE2 vectors of exp_fast (on the AVX2 and AVX-512 loops
// exp_fast runs at 1.4 and 0.9).
template <>
void unary_range<cpu::ExpOp, double, double>(const double* __restrict in,
                                             double* __restrict out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = std::exp(in[i]);
}
TF_DEFINE_UNARY_RANGE(unary_range_avx2, TF_TARGET_AVX2)
TF_DEFINE_UNARY_RANGE(unary_range_avx512, TF_TARGET_AVX512)
// float32 exp, tanh and sigmoid on AVX-512: the same arithmetic with vmaxps / vminps clamps and,
// for exp, vscalefps (ops/cpu/math_avx512.h); the same bits as the loops above in fewer
// instructions.
template <>
TF_TARGET_AVX512 void unary_range_avx512<cpu::ExpOp, float, float>(const float* __restrict in,
                                                                   float* __restrict out,
                                                                   int64_t n) {
  cpu::map16<cpu::exp16>(in, out, n);
}
template <>
TF_TARGET_AVX512 void unary_range_avx512<cpu::TanhOp, float, float>(const float* __restrict in,
                                                                    float* __restrict out,
                                                                    int64_t n) {
  cpu::map16<cpu::tanh16>(in, out, n);
}
template <>
TF_TARGET_AVX512 void unary_range_avx512<cpu::SigmoidOp, float, float>(
    const float* __restrict in, float* __restrict out, int64_t n) {
  cpu::map16<cpu::sigmoid16>(in, out, n);
}
#endif
#undef TF_DEFINE_UNARY_RANGE

template <class F, class T, class O>
auto pick_unary_range() {
#if TF_CPU_MULTIVERSION
  switch (cpu::cpu_level()) {
    case cpu::CpuLevel::Avx512: return &unary_range_avx512<F, T, O>;
    case cpu::CpuLevel::Avx2: return &unary_range_avx2<F, T, O>;
    case cpu::CpuLevel::Baseline: break;
  }
#endif
  return &unary_range<F, T, O>;
}

template <class F>
void unary_eval(const Tensor& x, Tensor& y, int64_t grain) {
  const int64_t n = x.num_elements();
  if (n == 0) return;
  TF_DISPATCH_ALL_TYPES(x.dtype(), {
    if constexpr (F::template ok<T>) {
      using S = cpu::storage_t<T>;
      using O = cpu::storage_t<typename F::template out_type<T>>;
      const S* in = x.data<S>();
      O* out = y.data<O>();
      const auto range = pick_unary_range<F, S, O>();
      detail::parallel_for(n, grain, [in, out, range](int64_t b, int64_t e) {
        range(in + b, out + b, e - b);
      });
    } else {
      TF_ASSERT(!"dtype was rejected by infer");
    }
  })
}

#define TF_DEFINE_CAST_RANGE(NAME, TARGET)                                            \
  template <class To, class From>                                                     \
  TARGET void NAME(const From* __restrict in, To* __restrict out, int64_t n) {        \
    for (int64_t i = 0; i < n; ++i) out[i] = cpu::cast_value<To>(in[i]);             \
  }
TF_DEFINE_CAST_RANGE(cast_range, )
#if TF_CPU_MULTIVERSION
TF_DEFINE_CAST_RANGE(cast_range_avx2, TF_TARGET_AVX2)
#endif
#undef TF_DEFINE_CAST_RANGE

// Bool sources are read as their 0 / 1 bytes (same values, vectorisable loads).
template <class From>
void cast_from(const Tensor& x, Tensor& y) {
  const From* in = x.data<From>();
  const int64_t n = x.num_elements();
  TF_DISPATCH_ALL_TYPES(y.dtype(), {
    T* out = y.data<T>();
    auto range = &cast_range<T, From>;
#if TF_CPU_MULTIVERSION
    if (cpu::cpu_has_avx2()) range = &cast_range_avx2<T, From>;
#endif
    detail::parallel_for(n, kCheapGrain, [in, out, range](int64_t b, int64_t e) {
      range(in + b, out + b, e - b);
    });
  })
}

}  // namespace

namespace prims {

#define TF_UNARY_EVAL(STRUCT, FUNCTOR, GRAIN)                                    \
  void STRUCT::eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const { \
    unary_eval<cpu::FUNCTOR>(in[0], out[0], GRAIN);                              \
  }
TF_UNARY_EVAL(Negative, NegativeOp, kCheapGrain)
TF_UNARY_EVAL(Abs, AbsOp, kCheapGrain)
TF_UNARY_EVAL(Sign, SignOp, kCheapGrain)
TF_UNARY_EVAL(Exp, ExpOp, kMathGrain)
TF_UNARY_EVAL(Log, LogOp, kMathGrain)
TF_UNARY_EVAL(Log1p, Log1pOp, kMathGrain)
TF_UNARY_EVAL(Sqrt, SqrtOp, kMathGrain)
TF_UNARY_EVAL(Rsqrt, RsqrtOp, kMathGrain)
TF_UNARY_EVAL(Square, SquareOp, kCheapGrain)
TF_UNARY_EVAL(Tanh, TanhOp, kMathGrain)
TF_UNARY_EVAL(Sigmoid, SigmoidOp, kMathGrain)
TF_UNARY_EVAL(Sin, SinOp, kMathGrain)
TF_UNARY_EVAL(Cos, CosOp, kMathGrain)
TF_UNARY_EVAL(Erf, ErfOp, kMathGrain)
TF_UNARY_EVAL(Erfc, ErfcOp, kMathGrain)
TF_UNARY_EVAL(Softsign, SoftsignOp, kCheapGrain)
TF_UNARY_EVAL(Tan, TanOp, kMathGrain)
TF_UNARY_EVAL(Asin, AsinOp, kMathGrain)
TF_UNARY_EVAL(Acos, AcosOp, kMathGrain)
TF_UNARY_EVAL(Atan, AtanOp, kMathGrain)
TF_UNARY_EVAL(Sinh, SinhOp, kMathGrain)
TF_UNARY_EVAL(Cosh, CoshOp, kMathGrain)
TF_UNARY_EVAL(Asinh, AsinhOp, kMathGrain)
TF_UNARY_EVAL(Acosh, AcoshOp, kMathGrain)
TF_UNARY_EVAL(Atanh, AtanhOp, kMathGrain)
TF_UNARY_EVAL(Expm1, Expm1Op, kMathGrain)
TF_UNARY_EVAL(Floor, FloorOp, kCheapGrain)
TF_UNARY_EVAL(Ceil, CeilOp, kCheapGrain)
TF_UNARY_EVAL(Round, RoundOp, kCheapGrain)
TF_UNARY_EVAL(LogicalNot, LogicalNotOp, kCheapGrain)
TF_UNARY_EVAL(Invert, InvertOp, kCheapGrain)
#undef TF_UNARY_EVAL

void Cast::eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const {
  const Tensor& x = in[0];
  Tensor& y = out[0];
  if (x.num_elements() == 0) return;
  if (x.dtype() == y.dtype()) {
    std::memcpy(y.raw_data(), x.raw_data(), x.nbytes());
    return;
  }
  TF_DISPATCH_ALL_TYPES(x.dtype(), cast_from<cpu::storage_t<T>>(x, y))
}

}  // namespace prims
}  // namespace tapeflow

namespace tapeflow::cpu {

template <class T>
UnaryRange<T> unary_range(const Primitive& p) {
#define TF_FUSABLE_UNARY(STRUCT, FUNCTOR) \
  if (typeid(p) == typeid(prims::STRUCT)) return pick_unary_range<cpu::FUNCTOR, T, T>();
  TF_FUSABLE_UNARY(Negative, NegativeOp)
  TF_FUSABLE_UNARY(Abs, AbsOp)
  TF_FUSABLE_UNARY(Sign, SignOp)
  TF_FUSABLE_UNARY(Exp, ExpOp)
  TF_FUSABLE_UNARY(Log, LogOp)
  TF_FUSABLE_UNARY(Log1p, Log1pOp)
  TF_FUSABLE_UNARY(Sqrt, SqrtOp)
  TF_FUSABLE_UNARY(Rsqrt, RsqrtOp)
  TF_FUSABLE_UNARY(Square, SquareOp)
  TF_FUSABLE_UNARY(Tanh, TanhOp)
  TF_FUSABLE_UNARY(Sigmoid, SigmoidOp)
  TF_FUSABLE_UNARY(Sin, SinOp)
  TF_FUSABLE_UNARY(Cos, CosOp)
  TF_FUSABLE_UNARY(Erf, ErfOp)
  TF_FUSABLE_UNARY(Erfc, ErfcOp)
  TF_FUSABLE_UNARY(Softsign, SoftsignOp)
  TF_FUSABLE_UNARY(Tan, TanOp)
  TF_FUSABLE_UNARY(Asin, AsinOp)
  TF_FUSABLE_UNARY(Acos, AcosOp)
  TF_FUSABLE_UNARY(Atan, AtanOp)
  TF_FUSABLE_UNARY(Sinh, SinhOp)
  TF_FUSABLE_UNARY(Cosh, CoshOp)
  TF_FUSABLE_UNARY(Asinh, AsinhOp)
  TF_FUSABLE_UNARY(Acosh, AcoshOp)
  TF_FUSABLE_UNARY(Atanh, AtanhOp)
  TF_FUSABLE_UNARY(Expm1, Expm1Op)
  TF_FUSABLE_UNARY(Floor, FloorOp)
  TF_FUSABLE_UNARY(Ceil, CeilOp)
  TF_FUSABLE_UNARY(Round, RoundOp)
#undef TF_FUSABLE_UNARY
  return nullptr;
}
template UnaryRange<float> unary_range<float>(const Primitive&);
template UnaryRange<double> unary_range<double>(const Primitive&);

}  // namespace tapeflow::cpu
