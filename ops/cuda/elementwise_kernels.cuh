// Elementwise CUDA machinery shared by ops/cuda/unary.cu and ops/cuda/binary.cu (internal; only
// .cu files include it). One kernel template per path, over functors and an input-type pack:
//  - flat: every input has the output's element count (same row-major layout) or exactly one
//    element (a scalar, read once per thread). Grid-stride over 16-byte vectors (float4, 8
//    halves, 16 bytes, ...; the width is 16 / the widest element of the output and inputs), then
//    a scalar pass over the elements before the first aligned vector (views may start anywhere)
//    and after the last one. When the operands cannot be aligned together, everything takes the
//    scalar pass (still one coalesced grid-stride loop).
//  - broadcast: any numpy broadcast. The host collapses the output dimensions as the CPU kernels
//    do (size-1 dimensions dropped, neighbours merged where every operand is contiguous across
//    them) and computes per-input element strides (0 along broadcast dimensions); the kernel maps
//    each output index to input offsets with 32-bit multiply-shift divisions when the output has
//    fewer than 2^31 elements, 64-bit division otherwise.
// Functors compute in dcompute_t (float for float16/bfloat16) exactly as the CPU functors of
// ops/cpu/unary_ops.h do. The kernel bodies, functors and plans are __host__ __device__ so that
// they can be exercised on the host without a GPU.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "ops/cuda/common.cuh"

#define TF_EW_HD __host__ __device__ __forceinline__
// #pragma unroll for the device pass only (the host compiler warns about it).
#ifdef __CUDA_ARCH__
#define TF_EW_UNROLL _Pragma("unroll")
#else
#define TF_EW_UNROLL
#endif

namespace tapeflow::cuda::ew {

// ---- element type classes (device element types) ----

template <class T>
inline constexpr bool is_half_v = std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;
template <class T>
inline constexpr bool is_float_v = std::is_floating_point_v<T> || is_half_v<T>;
template <class T>
inline constexpr bool is_int_v = std::is_integral_v<T> && !std::is_same_v<T, bool>;
template <class T>
inline constexpr bool is_signed_int_v = is_int_v<T> && std::is_signed_v<T>;
template <class T>
inline constexpr bool is_numeric_v = is_float_v<T> || is_int_v<T>;

// ---- storage <-> compute conversions (as cuda::load / cuda::store, callable on the host) ----

// Storage value to compute type C (the half types go through float).
template <class C, class T>
TF_EW_HD C ld(T v) {
  if constexpr (std::is_same_v<T, __half>) return static_cast<C>(__half2float(v));
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return static_cast<C>(__bfloat162float(v));
  else return static_cast<C>(v);
}
// Compute value to storage type O (to the half types: through float, rounded to nearest even).
template <class O, class C>
TF_EW_HD O st(C v) {
  if constexpr (std::is_same_v<O, __half>) return __float2half_rn(static_cast<float>(v));
  else if constexpr (std::is_same_v<O, __nv_bfloat16>)
    return __float2bfloat16_rn(static_cast<float>(v));
  else return static_cast<O>(v);
}

// ---- integer arithmetic wraps around (two's complement), as the CPU kernels' ----

template <class T>
TF_EW_HD T wrap_add(T a, T b) {
  if constexpr (is_int_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}
template <class T>
TF_EW_HD T wrap_sub(T a, T b) {
  if constexpr (is_int_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) - static_cast<U>(b));
  } else {
    return a - b;
  }
}
template <class T>
TF_EW_HD T wrap_mul(T a, T b) {
  if constexpr (is_int_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
  } else {
    return a * b;
  }
}
// Power by squaring, wrapping on overflow; negative exponents are rejected before any launch.
template <class T>
TF_EW_HD T ipow(T base, T e) {
  using U = std::make_unsigned_t<T>;
  U result = 1, b = static_cast<U>(base);
  while (e > 0) {
    if (e & 1) result = static_cast<U>(result * b);
    b = static_cast<U>(b * b);
    e = static_cast<T>(e >> 1);
  }
  return static_cast<T>(result);
}

// ---- float / double math (the global C functions: inside namespace tapeflow an unqualified
// exp names tapeflow::exp(const Tensor&)) ----

#define TF_EW_MATH1(NAME, FN)                                          \
  template <class C>                                                   \
  TF_EW_HD C NAME(C x) {                                               \
    if constexpr (std::is_same_v<C, float>) return ::FN##f(x);         \
    else return ::FN(x);                                               \
  }
TF_EW_MATH1(m_log, log)
TF_EW_MATH1(m_log1p, log1p)
TF_EW_MATH1(m_sqrt, sqrt)
TF_EW_MATH1(m_tanh, tanh)
TF_EW_MATH1(m_sin, sin)
TF_EW_MATH1(m_cos, cos)
TF_EW_MATH1(m_erf, erf)
TF_EW_MATH1(m_erfc, erfc)
TF_EW_MATH1(m_floor, floor)
TF_EW_MATH1(m_ceil, ceil)
TF_EW_MATH1(m_rint, rint)  // round half to even (the default rounding mode)
TF_EW_MATH1(m_fabs, fabs)
TF_EW_MATH1(m_tan, tan)
TF_EW_MATH1(m_asin, asin)
TF_EW_MATH1(m_acos, acos)
TF_EW_MATH1(m_atan, atan)
TF_EW_MATH1(m_sinh, sinh)
TF_EW_MATH1(m_cosh, cosh)
TF_EW_MATH1(m_asinh, asinh)
TF_EW_MATH1(m_acosh, acosh)
TF_EW_MATH1(m_atanh, atanh)
TF_EW_MATH1(m_expm1, expm1)
#undef TF_EW_MATH1
// exp with subnormal float results rounded once: where e^x is below the normal range (x < ln
// 2^-126) it is computed as e^(x + 64) * e^-64, both normal numbers (relative error ~3e-7), so
// that only the final multiply rounds into the subnormals (as the CPU's exp_fast; sigmoid's
// negative tail relies on it). NaN and -inf take the plain path or give 0.
template <class C>
TF_EW_HD C m_exp(C x) {
  if constexpr (std::is_same_v<C, float>)
    return x < -87.3365447f ? ::expf(x + 64.0f) * 0x1.969d48p-93f : ::expf(x);
  else return ::exp(x);
}
template <class C>
TF_EW_HD C m_fmod(C a, C b) {
  if constexpr (std::is_same_v<C, float>) return ::fmodf(a, b);
  else return ::fmod(a, b);
}
template <class C>
TF_EW_HD C m_atan2(C y, C x) {
  if constexpr (std::is_same_v<C, float>) return ::atan2f(y, x);
  else return ::atan2(y, x);
}
template <class C>
TF_EW_HD C m_pow(C a, C b) {
  if constexpr (std::is_same_v<C, float>) return ::powf(a, b);
  else return ::pow(a, b);
}

// ---- unary functors: C operator()(C x), C the compute type ----

struct NegativeF {
  template <class C>
  TF_EW_HD C operator()(C x) const {
    if constexpr (std::is_floating_point_v<C>) return -x;
    else return wrap_sub(C(0), x);
  }
};
struct AbsF {
  template <class C>
  TF_EW_HD C operator()(C x) const {
    if constexpr (std::is_floating_point_v<C>) return m_fabs(x);
    else if constexpr (std::is_signed_v<C>) return x < 0 ? wrap_sub(C(0), x) : x;
    else return x;
  }
};
struct SignF {
  template <class C>
  TF_EW_HD C operator()(C x) const {
    // Zeros of either sign give +0 (TF's sign(-0.0) is 0.0); NaN maps to itself.
    if constexpr (std::is_floating_point_v<C>)
      return x > C(0) ? C(1) : (x < C(0) ? C(-1) : (x == C(0) ? C(0) : x));
    else return static_cast<C>((x > 0) - (x < 0));
  }
};
struct ExpF {
  template <class C>
  TF_EW_HD C operator()(C x) const { return m_exp(x); }
};
struct LogF {
  template <class C>
  TF_EW_HD C operator()(C x) const { return m_log(x); }
};
struct Log1pF {
  template <class C>
  TF_EW_HD C operator()(C x) const { return m_log1p(x); }
};
struct SqrtF {
  template <class C>
  TF_EW_HD C operator()(C x) const { return m_sqrt(x); }
};
struct RsqrtF {
  // 1 / sqrt(x) with both operations correctly rounded (as the CPU), not the 2-ulp rsqrtf.
  template <class C>
  TF_EW_HD C operator()(C x) const { return C(1) / m_sqrt(x); }
};
struct SquareF {
  template <class C>
  TF_EW_HD C operator()(C x) const { return wrap_mul(x, x); }
};
struct TanhF {
  template <class C>
  TF_EW_HD C operator()(C x) const { return m_tanh(x); }
};
struct SigmoidF {
  // 1 / (1 + exp(-x)) for x >= 0, exp(x) / (1 + exp(x)) below: no overflow, relative accuracy
  // in the negative tail; NaN stays NaN.
  template <class C>
  TF_EW_HD C operator()(C x) const {
    const C e = m_exp(-m_fabs(x));
    const C s = C(1) / one_plus(e);
    return x >= C(0) ? s : e * s;
  }
  // 1 + e rounded on its own on the device (never contracted into an FMA with exp's last
  // step), as the NVRTC-generated sigmoid's __fadd_rn: fused and eager sigmoid agree bit for
  // bit.
  template <class C>
  static TF_EW_HD C one_plus(C e) {
#ifdef __CUDA_ARCH__
    if constexpr (std::is_same_v<C, float>) return __fadd_rn(1.0f, e);
    else if constexpr (std::is_same_v<C, double>) return __dadd_rn(1.0, e);
    else return C(1) + e;
#else
    return C(1) + e;
#endif
  }
};
struct SinF {
  template <class C>
  TF_EW_HD C operator()(C x) const { return m_sin(x); }
};
struct CosF {
  template <class C>
  TF_EW_HD C operator()(C x) const { return m_cos(x); }
};
struct ErfF {
  template <class C>
  TF_EW_HD C operator()(C x) const { return m_erf(x); }
};
struct ErfcF {
  template <class C>
  TF_EW_HD C operator()(C x) const { return m_erfc(x); }
};
// tan ... atanh and expm1: CUDA's math library functions (its documented error bounds are
// a few ulp).
struct TanF {
  template <class C>
  TF_EW_HD C operator()(C x) const { return m_tan(x); }
};
struct AsinF {
  template <class C>
  TF_EW_HD C operator()(C x) const { return m_asin(x); }
};
struct AcosF {
  template <class C>
  TF_EW_HD C operator()(C x) const { return m_acos(x); }
};
struct AtanF {
  template <class C>
  TF_EW_HD C operator()(C x) const { return m_atan(x); }
};
struct SinhF {
  template <class C>
  TF_EW_HD C operator()(C x) const { return m_sinh(x); }
};
struct CoshF {
  template <class C>
  TF_EW_HD C operator()(C x) const { return m_cosh(x); }
};
struct AsinhF {
  template <class C>
  TF_EW_HD C operator()(C x) const { return m_asinh(x); }
};
struct AcoshF {
  template <class C>
  TF_EW_HD C operator()(C x) const { return m_acosh(x); }
};
struct AtanhF {
  template <class C>
  TF_EW_HD C operator()(C x) const { return m_atanh(x); }
};
struct Expm1F {
  template <class C>
  TF_EW_HD C operator()(C x) const { return m_expm1(x); }
};
struct SoftsignF {
  template <class C>
  TF_EW_HD C operator()(C x) const { return x / (C(1) + m_fabs(x)); }
};
struct FloorF {
  template <class C>
  TF_EW_HD C operator()(C x) const { return m_floor(x); }
};
struct CeilF {
  template <class C>
  TF_EW_HD C operator()(C x) const { return m_ceil(x); }
};
struct RoundF {
  template <class C>
  TF_EW_HD C operator()(C x) const {
    if constexpr (std::is_floating_point_v<C>) return m_rint(x);
    else return x;
  }
};
struct LogicalNotF {
  TF_EW_HD bool operator()(bool x) const { return !x; }
};
struct InvertF {
  template <class C>
  TF_EW_HD C operator()(C x) const {
    return static_cast<C>(~x);
  }
};

// ---- binary functors: R operator()(C a, C b) ----

struct AddF {
  template <class C>
  TF_EW_HD C operator()(C a, C b) const { return wrap_add(a, b); }
};
struct SubtractF {
  template <class C>
  TF_EW_HD C operator()(C a, C b) const { return wrap_sub(a, b); }
};
struct MultiplyF {
  template <class C>
  TF_EW_HD C operator()(C a, C b) const { return wrap_mul(a, b); }
};
// True division; integers arrive converted (uint8 to float, int32/int64 to double).
struct DivideF {
  template <class C>
  TF_EW_HD C operator()(C a, C b) const { return a / b; }
};
// atan2(y, x), the first operand y.
struct Atan2F {
  template <class C>
  TF_EW_HD C operator()(C y, C x) const { return m_atan2(y, x); }
};
struct PowF {
  template <class C>
  TF_EW_HD C operator()(C a, C b) const {
    if constexpr (std::is_floating_point_v<C>) return m_pow(a, b);
    else return ipow(a, b);
  }
};
// NaN propagates from either operand, as numpy's and TF's maximum.
struct MaximumF {
  template <class C>
  TF_EW_HD C operator()(C a, C b) const {
    if constexpr (std::is_floating_point_v<C>) return (a > b || a != a) ? a : b;
    else return a > b ? a : b;
  }
};
struct MinimumF {
  template <class C>
  TF_EW_HD C operator()(C a, C b) const {
    if constexpr (std::is_floating_point_v<C>) return (a < b || a != a) ? a : b;
    else return a < b ? a : b;
  }
};
// Floor division and modulo (TF's FloorDiv, FloorMod), as cpu::FloorDivOp and cpu::FloorModOp.
// Integers: a zero divisor is replaced by 1 (the host checks for zeros before the launch, except
// inside a CUDA graph capture), and -1 never reaches the division (the most negative value
// wraps, as TF's result). S is the device storage type: the half types round the float quotient
// to S before the floor, as TF's Eigen half arithmetic.
template <class T>
TF_EW_HD T safe_divisor(T b) {
  if constexpr (std::is_signed_v<T>) return (b == T(0) || b == T(-1)) ? T(1) : b;
  else return b == T(0) ? T(1) : b;
}
template <class S>
struct FloorDivF {
  template <class C>
  TF_EW_HD C operator()(C a, C b) const {
    if constexpr (std::is_floating_point_v<C>) {
      C q = a / b;
      if constexpr (is_half_v<S>) q = ld<C>(st<S>(q));
      return m_floor(q);
    } else {
      const C d = safe_divisor(b);
      const C q = static_cast<C>(a / d);
      if constexpr (std::is_signed_v<C>) {
        const C r = static_cast<C>(a % d);
        const C fq = (r != 0 && ((r < 0) != (d < 0))) ? static_cast<C>(q - 1) : q;
        return b == C(-1) ? wrap_sub(C(0), a) : fq;
      } else {
        return q;
      }
    }
  }
};
struct FloorModF {
  template <class C>
  TF_EW_HD C operator()(C a, C b) const {
    if constexpr (std::is_floating_point_v<C>) {
      const C r = m_fmod(a, b);
      return (r != C(0) && ((b < C(0)) != (r < C(0)))) ? r + b : r;
    } else {
      const C d = safe_divisor(b);
      const C r = static_cast<C>(a % d);
      if constexpr (std::is_signed_v<C>) {
        const C fr = (r != 0 && ((r < 0) != (d < 0))) ? static_cast<C>(r + d) : r;
        return b == C(-1) ? C(0) : fr;
      } else {
        return r;
      }
    }
  }
};
struct EqualF {
  template <class C>
  TF_EW_HD bool operator()(C a, C b) const { return a == b; }
};
struct NotEqualF {
  template <class C>
  TF_EW_HD bool operator()(C a, C b) const { return a != b; }
};
// greater(a, b) runs as less(b, a) and greater_equal(a, b) as less_equal(b, a): the same truth
// table, NaN included, with half the kernels.
struct LessF {
  template <class C>
  TF_EW_HD bool operator()(C a, C b) const { return a < b; }
};
struct LessEqualF {
  template <class C>
  TF_EW_HD bool operator()(C a, C b) const { return a <= b; }
};
struct LogicalAndF {
  TF_EW_HD bool operator()(bool a, bool b) const { return a && b; }
};
struct LogicalOrF {
  TF_EW_HD bool operator()(bool a, bool b) const { return a || b; }
};
// tf.bitwise on integers, as the cpu:: functors: shift amounts clamped to [0, bits - 1], left
// shifts through the unsigned type.
struct BitwiseAndF {
  template <class C>
  TF_EW_HD C operator()(C a, C b) const {
    return static_cast<C>(a & b);
  }
};
struct BitwiseOrF {
  template <class C>
  TF_EW_HD C operator()(C a, C b) const {
    return static_cast<C>(a | b);
  }
};
struct BitwiseXorF {
  template <class C>
  TF_EW_HD C operator()(C a, C b) const {
    return static_cast<C>(a ^ b);
  }
};
template <class C>
TF_EW_HD C clamp_shift(C b) {
  constexpr C kMax = static_cast<C>(sizeof(C) * 8 - 1);
  if constexpr (std::is_signed_v<C>) b = b < 0 ? C(0) : b;
  return b > kMax ? kMax : b;
}
struct LeftShiftF {
  template <class C>
  TF_EW_HD C operator()(C a, C b) const {
    using U = std::make_unsigned_t<C>;
    return static_cast<C>(static_cast<U>(static_cast<U>(a) << clamp_shift(b)));
  }
};
struct RightShiftF {
  template <class C>
  TF_EW_HD C operator()(C a, C b) const {
    return static_cast<C>(a >> clamp_shift(b));
  }
};

// ---- storage-level operations handed to the kernels: O operator()(T...) ----

// Loads every operand into C, applies F, stores to O.
template <class F, class T, class O, class C>
struct Map1 {
  TF_EW_HD O operator()(T a) const { return st<O>(F{}(ld<C>(a))); }
};
template <class F, class T, class O, class C>
struct Map2 {
  TF_EW_HD O operator()(T a, T b) const { return st<O>(F{}(ld<C>(a), ld<C>(b))); }
};

// Float to a signed integer type, truncating toward zero and saturating (NaN gives 0), as
// cpu::saturate_cast; the hardware conversion does the same, this spells it out.
template <class I, class F>
TF_EW_HD I saturate_cast(F v) {
  constexpr F lo = static_cast<F>(std::numeric_limits<I>::min());  // -2^31 or -2^63: exact
  if (!(v == v)) return I(0);
  if (v <= lo) return std::numeric_limits<I>::min();
  if (v >= -lo) return std::numeric_limits<I>::max();
  return static_cast<I>(v);
}

// Any dtype to any other, as cpu::cast_value: float -> int truncates toward zero and saturates
// (NaN gives 0), float -> uint8 goes through int32 (wraps for |x| < 2^31), to bool is x != 0
// (NaN gives true), bool gives 0 / 1, and conversions to the half types round once from float.
template <class To, class From>
struct CastOp {
  TF_EW_HD To operator()(From v) const {
    using CF = dcompute_t<From>;
    const CF c = ld<CF>(v);
    if constexpr (std::is_same_v<To, bool>) return c != CF(0);
    else if constexpr (std::is_same_v<To, uint8_t> && is_float_v<From>)
      return static_cast<uint8_t>(saturate_cast<int32_t>(c));
    else if constexpr (std::is_integral_v<To> && is_float_v<From>) return saturate_cast<To>(c);
    else return st<To>(static_cast<dcompute_t<To>>(c));
  }
};

// where(c, x, y) on elements moved as raw bits of their size.
template <class E>
struct SelectOp {
  TF_EW_HD E operator()(bool c, E x, E y) const { return c ? x : y; }
};

// ---- flat path ----

template <class T, int V>
struct alignas(sizeof(T) * V) Vec {
  T v[V];
};

// Elements per vector: 16 bytes of the widest of the output and input types.
template <class O, class... T>
constexpr int vec_width() {
  size_t m = sizeof(O);
  ((m = sizeof(T) > m ? sizeof(T) : m), ...);
  return static_cast<int>(16 / m);
}

// One input of the flat kernel: a full operand, or a one-element operand broadcast to all.
template <class T, int V>
struct Src {
  const T* p;
  bool scalar;
  T s;  // the scalar's value, loaded once per thread by prepare()
  TF_EW_HD void prepare() {
    if (scalar) s = p[0];
  }
  TF_EW_HD Vec<T, V> vec(int64_t base) const {
    if (scalar) {
      Vec<T, V> r;
TF_EW_UNROLL
      for (int j = 0; j < V; ++j) r.v[j] = s;
      return r;
    }
    return *reinterpret_cast<const Vec<T, V>*>(p + base);
  }
  TF_EW_HD T at(int64_t i) const { return scalar ? s : p[i]; }
};

// The vectorised range: nvec vectors from element head on; elements [0, head) and
// [head + nvec * V, n) take the scalar pass.
struct FlatRange {
  int64_t n = 0, head = 0, nvec = 0;
};

// Picks head so that the output and every full (non-scalar) input are aligned to a whole vector
// there (the same element for all of them, or there is no vectorised range).
template <int V, class O, class... T>
FlatRange plan_flat(int64_t n, const bool* scalar, const O* out, const T*... in) {
  FlatRange r;
  r.n = n;
  const uintptr_t out_addr = reinterpret_cast<uintptr_t>(out);
  if (out_addr % sizeof(O) != 0) return r;  // not aligned to its element: scalar pass only
  const uintptr_t mis = out_addr % (V * sizeof(O));
  const int64_t head = mis == 0 ? 0 : static_cast<int64_t>((V * sizeof(O) - mis) / sizeof(O));
  if (head >= n) return r;
  bool aligned = true;
  int k = 0;
  ((aligned = aligned && (scalar[k++] || reinterpret_cast<uintptr_t>(in + head) %
                                                  (V * sizeof(T)) == 0)),
   ...);
  if (!aligned) return r;
  r.nvec = (n - head) / V;
  r.head = r.nvec > 0 ? head : 0;
  return r;
}

template <class O, int V, class Op, class... T>
TF_EW_HD Vec<O, V> apply_vec(const Op& op, const Vec<T, V>&... x) {
  Vec<O, V> r;
TF_EW_UNROLL
  for (int j = 0; j < V; ++j) r.v[j] = op(x.v[j]...);
  return r;
}

// Thread `tid` of `stride` threads: vectors tid, tid + stride, ..., then the leftover elements.
template <int V, class Op, class O, class... T>
TF_EW_HD void flat_body(const Op& op, O* out, const FlatRange& r, int64_t tid, int64_t stride,
                        const Src<T, V>&... src) {
  for (int64_t v = tid; v < r.nvec; v += stride) {
    const int64_t base = r.head + v * V;
    *reinterpret_cast<Vec<O, V>*>(out + base) = apply_vec<O, V>(op, src.vec(base)...);
  }
  const int64_t tail0 = r.head + r.nvec * V;
  const int64_t rest = r.head + (r.n - tail0);
  for (int64_t j = tid; j < rest; j += stride) {
    const int64_t i = j < r.head ? j : tail0 + (j - r.head);
    out[i] = op(src.at(i)...);
  }
}

template <int V, class Op, class O, class... T>
__global__ void __launch_bounds__(kThreads)
    flat_kernel(Op op, O* out, FlatRange r, Src<T, V>... src) {
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  (src.prepare(), ...);
  flat_body<V>(op, out, r, tid, stride, src...);
}

// ---- broadcast path ----

inline constexpr int kMaxRank = TensorShape::kMaxRank;

// Division by a constant d in [1, 2^31) for dividends below 2^31: q = (umulhi(x, m) + x) >> s
// (the multiply-shift of Granlund & Montgomery, as PyTorch's IntDivider).
struct FastDiv {
  uint32_t d = 1, m = 1;
  uint32_t s = 0;
  FastDiv() = default;
  explicit FastDiv(uint32_t divisor) : d(divisor) {
    s = 0;
    while (s < 32 && (uint64_t{1} << s) < d) ++s;
    const uint64_t magic = ((uint64_t{1} << 32) * ((uint64_t{1} << s) - d)) / d + 1;
    m = static_cast<uint32_t>(magic);  // < 2^32 for every d <= 2^31
  }
  TF_EW_HD uint32_t div(uint32_t x) const {
#ifdef __CUDA_ARCH__
    const uint32_t t = __umulhi(x, m);
#else
    const uint32_t t = static_cast<uint32_t>((static_cast<uint64_t>(x) * m) >> 32);
#endif
    return (t + x) >> s;  // t <= x < 2^31: no overflow
  }
};

// Collapsed output dimensions and each input's element strides along them (0 where broadcast),
// stored innermost first, so that the kernel's unrolled loop indexes them with constants (a
// kernel parameter indexed at run time would be copied to local memory).
template <int N>
struct BcastPlan {
  int64_t n = 0;
  int rank = 1;
  bool use32 = true;  // n < 2^31: 32-bit index arithmetic
  int64_t dims[kMaxRank] = {};
  FastDiv div[kMaxRank];
  int64_t strides[N][kMaxRank] = {};
};

// As the CPU's make_plan (ops/cpu/elementwise_binary.cpp): drops size-1 output dimensions and
// merges a dimension into the previous one where every input is contiguous across both.
template <int N>
BcastPlan<N> make_bcast_plan(const TensorShape& out, const std::array<TensorShape, N>& in) {
  int64_t full[N][kMaxRank];
  for (int k = 0; k < N; ++k) {
    const TensorShape& s = in[k];
    const int lead = out.rank() - s.rank();
    int64_t stride = 1;
    for (int d = out.rank() - 1; d >= 0; --d) {
      const int j = d - lead;
      if (j < 0 || s[j] == 1) {
        full[k][d] = 0;
      } else {
        full[k][d] = stride;
        stride *= s[j];
      }
    }
  }
  // Outermost first while collapsing.
  int rank = 0;
  int64_t dims[kMaxRank];
  int64_t strides[N][kMaxRank];
  for (int d = 0; d < out.rank(); ++d) {
    if (out[d] == 1) continue;
    if (rank > 0) {
      const int q = rank - 1;
      bool merge = true;
      for (int k = 0; k < N; ++k) merge = merge && strides[k][q] == full[k][d] * out[d];
      if (merge) {
        dims[q] *= out[d];
        for (int k = 0; k < N; ++k) strides[k][q] = full[k][d];
        continue;
      }
    }
    dims[rank] = out[d];
    for (int k = 0; k < N; ++k) strides[k][rank] = full[k][d];
    ++rank;
  }
  if (rank == 0) {  // a one-element output
    rank = 1;
    dims[0] = 1;
    for (int k = 0; k < N; ++k) strides[k][0] = 0;
  }
  BcastPlan<N> p;
  p.n = out.num_elements();
  p.rank = rank;
  p.use32 = p.n <= 0x7fffffff;
  for (int e = 0; e < rank; ++e) {  // innermost first
    p.dims[e] = dims[rank - 1 - e];
    for (int k = 0; k < N; ++k) p.strides[k][e] = strides[k][rank - 1 - e];
    if (p.use32) p.div[e] = FastDiv(static_cast<uint32_t>(p.dims[e]));
  }
  return p;
}

// Element offsets of output element i in each input.
template <int N>
TF_EW_HD void bcast_offsets(const BcastPlan<N>& p, int64_t i, int64_t (&off)[N]) {
TF_EW_UNROLL
  for (int k = 0; k < N; ++k) off[k] = 0;
  if (p.use32) {
    uint32_t rest = static_cast<uint32_t>(i);
TF_EW_UNROLL
    for (int e = 0; e < kMaxRank; ++e) {
      if (e == p.rank - 1) {  // the outermost dimension takes what is left
TF_EW_UNROLL
        for (int k = 0; k < N; ++k) off[k] += static_cast<int64_t>(rest) * p.strides[k][e];
        break;
      }
      const uint32_t q = p.div[e].div(rest);
      const int64_t idx = rest - q * p.div[e].d;
TF_EW_UNROLL
      for (int k = 0; k < N; ++k) off[k] += idx * p.strides[k][e];
      rest = q;
    }
  } else {
    int64_t rest = i;
TF_EW_UNROLL
    for (int e = 0; e < kMaxRank; ++e) {
      if (e == p.rank - 1) {
TF_EW_UNROLL
        for (int k = 0; k < N; ++k) off[k] += rest * p.strides[k][e];
        break;
      }
      const int64_t q = rest / p.dims[e];
      const int64_t idx = rest - q * p.dims[e];
TF_EW_UNROLL
      for (int k = 0; k < N; ++k) off[k] += idx * p.strides[k][e];
      rest = q;
    }
  }
}

template <class Op, class O, class... T, size_t... I>
TF_EW_HD void bcast_body_impl(std::index_sequence<I...>, const Op& op, O* out,
                              const BcastPlan<sizeof...(T)>& p, int64_t tid, int64_t stride,
                              const T*... src) {
  for (int64_t i = tid; i < p.n; i += stride) {
    int64_t off[sizeof...(T)];
    bcast_offsets(p, i, off);
    out[i] = op(src[off[I]]...);
  }
}
template <class Op, class O, class... T>
TF_EW_HD void bcast_body(const Op& op, O* out, const BcastPlan<sizeof...(T)>& p, int64_t tid,
                         int64_t stride, const T*... src) {
  bcast_body_impl(std::index_sequence_for<T...>{}, op, out, p, tid, stride, src...);
}

template <class Op, class O, class... T>
__global__ void __launch_bounds__(kThreads)
    bcast_kernel(Op op, O* out, BcastPlan<sizeof...(T)> p, const T*... src) {
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  bcast_body(op, out, p, tid, stride, src...);
}

// ---- host launchers ----

template <class O, class... T, class Op, size_t... I>
void launch_impl(std::index_sequence<I...>, const char* name, const Op& op, Tensor& out,
                 const std::array<const Tensor*, sizeof...(T)>& in) {
  constexpr int N = sizeof...(T);
  const int64_t n = out.num_elements();
  if (n == 0) return;
  const Device dev = out.placement();
  cudaStream_t st = ::tapeflow::detail::cuda::stream(dev);  // also makes dev current
  O* o = dptr<O>(out);
  bool flat = true;
  for (int k = 0; k < N; ++k) {
    const int64_t nk = in[k]->num_elements();
    flat = flat && (nk == n || nk == 1);
  }
  if (flat) {
    constexpr int V = vec_width<O, T...>();
    // A one-element operand is a scalar unless the output has one element too.
    const bool scalar[N] = {(in[I]->num_elements() == 1 && n > 1)...};
    const FlatRange r = plan_flat<V>(n, scalar, o, dptr<T>(*in[I])...);
    const int64_t work = r.nvec > 0 ? r.nvec : n;
    flat_kernel<V, Op, O, T...><<<grid_for(work, dev), kThreads, 0, st>>>(
        op, o, r, Src<T, V>{dptr<T>(*in[I]), scalar[I], T()}...);
  } else {
    const BcastPlan<N> p = make_bcast_plan<N>(out.shape(), {in[I]->shape()...});
    bcast_kernel<Op, O, T...><<<grid_for(n, dev), kThreads, 0, st>>>(op, o, p,
                                                                      dptr<T>(*in[I])...);
  }
  ::tapeflow::detail::cuda::check_launch(name);
}

// Runs op over the inputs (element types T...) into out (element type O), broadcasting as numpy.
// Zero-element outputs launch nothing.
template <class O, class... T, class Op>
void launch(const char* name, const Op& op, Tensor& out,
            const std::array<const Tensor*, sizeof...(T)>& in) {
  launch_impl<O, T...>(std::index_sequence_for<T...>{}, name, op, out, in);
}

}  // namespace tapeflow::cuda::ew
