// Scalar functors of the elementwise ops, shared by the CPU kernels (ops/cpu/elementwise*.cpp)
// and by anything that fuses elementwise loops. Each functor says which storage types it accepts
// (ok<T>), which type it computes in (calc_type<T>: float for float16/bfloat16, float64 for
// integer true division) and which type it stores (out_type<T>). Everything is inline and
// branch-free where it matters, so that the loops around it vectorise. Stateless: thread-safe.
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string_view>
#include <type_traits>

#include "core/dtype.h"
#include "ops/cpu/isa.h"

// For the loops around these functors to vectorise, the including file must let GCC if-convert
// floating-point selects and drop errno handling, and may let it fuse multiply-adds: it starts,
// before any #include, with
//   #pragma GCC optimize("no-math-errno", "no-trapping-math", "fp-contract=fast")
// (as ops/cpu/elementwise*.cpp do). Nothing in tapeflow reads errno or the FP exception flags.

namespace tapeflow::cpu {

template <class T>
inline constexpr bool is_half_v = std::is_same_v<T, half_t> || std::is_same_v<T, bfloat16_t>;
template <class T>
inline constexpr bool is_float_v = std::is_floating_point_v<T> || is_half_v<T>;
template <class T>
inline constexpr bool is_int_v = std::is_integral_v<T> && !std::is_same_v<T, bool>;
template <class T>
inline constexpr bool is_signed_int_v = is_int_v<T> && std::is_signed_v<T>;
template <class T>
inline constexpr bool is_numeric_v = is_float_v<T> || is_int_v<T>;

// Kernels move bool elements (0 or 1 bytes) as uint8_t: GCC vectorises byte loops, not bool ones.
template <class T>
using storage_t = std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>;

// Storage <-> compute conversions (the half types go through float).
template <class C, class T>
inline C load(T v) {
  return static_cast<C>(static_cast<compute_t<T>>(v));
}
template <class T, class C>
inline T store(C v) {
  if constexpr (is_half_v<T>) return T(static_cast<float>(v));
  else return static_cast<T>(v);
}

// Integer arithmetic wraps around (two's complement, as TF's) instead of overflowing.
template <class T>
inline T wrap_add(T a, T b) {
  if constexpr (is_int_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}
template <class T>
inline T wrap_sub(T a, T b) {
  if constexpr (is_int_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) - static_cast<U>(b));
  } else {
    return a - b;
  }
}
template <class T>
inline T wrap_mul(T a, T b) {
  if constexpr (is_int_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
  } else {
    return a * b;
  }
}

// ---- vectorisable float math ----

// Round half to even for |x| < 2^23 (2^52): adding and subtracting 2^23 rounds in the current
// (nearest-even) mode; larger magnitudes, infinities and NaN are already integral or returned.
template <class C>
inline C round_half_even(C x) {
  constexpr C big = std::is_same_v<C, float> ? C(8388608.0) : C(4503599627370496.0);
  const C ax = std::abs(x);
  const C r = std::copysign((ax + big) - big, x);
  return ax < big ? r : x;
}
template <class C>
inline C floor_fast(C x) {
  const C r = round_half_even(x);
  return r > x ? r - C(1) : r;
}
template <class C>
inline C ceil_fast(C x) {
  const C r = round_half_even(x);
  return std::copysign(r < x ? r + C(1) : r, x);  // ceil(-0.7) is -0, as std::ceil
}

// c[0] x^(N-1) + ... + c[N-1] by Horner's rule (each step p * x + c contracts to one FMA where
// the loops are built with FMA).
template <class C, size_t N>
inline C horner(const C (&c)[N], C x) {
  C p = c[0];
  for (size_t k = 1; k < N; ++k) p = p * x + c[k];
  return p;
}

// exp for float32 (Cephes): x = n ln2 + r, |r| <= ln2 / 2, degree-6 polynomial for exp(r), 2^n
// applied in two halves so that results near overflow and in the subnormal range are right.
// Measured max error 1.01 ulp over [-87, 88.7] (both ISA variants); exp(nan) = nan,
// exp(+-inf) = inf / 0, overflow gives inf, subnormal results are rounded once. The constants
// are shared with the AVX-512 form (ops/cpu/math_avx512.h).
inline constexpr float kExpLo = -104.0f, kExpHi = 89.0f;
inline constexpr float kExpLn2Hi = 0.693359375f, kExpLn2Lo = -2.12194440e-4f;
inline constexpr float kExpPoly[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                                      4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};
inline float exp_fast(float x) {
  // Clamp to where 2^n stays finite in two halves. NaN passes the clamp and every step below
  // (the integer part is garbage, but NaN times anything is NaN), so it needs no fix-up.
  float xc = x < kExpLo ? kExpLo : x;
  xc = xc > kExpHi ? kExpHi : xc;
  // n = round(x / ln2) through the 1.5 * 2^23 trick (also yields n as an integer).
  float fn = xc * 1.44269504088896341f + 12582912.0f;
  const int32_t n = std::bit_cast<int32_t>(fn) - 0x4B400000;
  fn -= 12582912.0f;
  float r = xc - fn * kExpLn2Hi;
  r = r - fn * kExpLn2Lo;
  const float p = horner(kExpPoly, r);
  const float y = p * r * r + r + 1.0f;
  const int32_t e1 = n >> 1, e2 = n - e1;
  const float s1 = std::bit_cast<float>((e1 + 127) << 23);
  const float s2 = std::bit_cast<float>((e2 + 127) << 23);
  return y * s1 * s2;
}

// log's special values over r, its value for finite x > 0: log(inf) = inf, log(+-0) = -inf,
// log(x < 0) = log(nan) = nan.
template <class C>
inline C log_specials(C x, C r) {
  constexpr C inf = std::numeric_limits<C>::infinity();
  r = x == inf ? x : r;
  r = x == C(0) ? -inf : r;
  return x < C(0) || x != x ? std::numeric_limits<C>::quiet_NaN() : r;
}

// log for float32 (Cephes): x = m 2^e with m in [sqrt(1/2), sqrt(2)), log(m) from a degree-9
// polynomial in m - 1, e ln2 added in two parts. Measured max error 0.82 ulp; subnormal inputs
// are scaled first; log(0) = -inf, log(x < 0) = nan, log(inf) = inf, log(nan) = nan.
inline float log_fast(float x) {
  const bool sub = x < 1.17549435e-38f;  // subnormal (or zero / negative, fixed up below)
  const float xs = sub ? x * 8388608.0f : x;
  const int32_t ix = std::bit_cast<int32_t>(xs);
  int32_t e = ((ix >> 23) & 0xff) - 126 - (sub ? 23 : 0);
  float m = std::bit_cast<float>((ix & 0x007fffff) | 0x3f000000);  // [0.5, 1)
  const bool low = m < 0.707106781186547524f;
  e = low ? e - 1 : e;
  m = low ? m + m - 1.0f : m - 1.0f;
  const float z = m * m;
  float y = 7.0376836292e-2f;
  y = y * m - 1.1514610310e-1f;
  y = y * m + 1.1676998740e-1f;
  y = y * m - 1.2420140846e-1f;
  y = y * m + 1.4249322787e-1f;
  y = y * m - 1.6668057665e-1f;
  y = y * m + 2.0000714765e-1f;
  y = y * m - 2.4999993993e-1f;
  y = y * m + 3.3333331174e-1f;
  y = y * m * z;
  const float fe = static_cast<float>(e);
  y = y - 2.12194440e-4f * fe;
  y = y - 0.5f * z;
  float r = m + y;
  r = r + 0.693359375f * fe;
  return log_specials(x, r);
}

// log1p for float32: log(u) x / (u - 1) with u = 1 + x rounded (Goldberg's form: the rounding
// error of u cancels in the quotient), log from log_fast; x itself where u rounds to 1.
// Measured over every float32 from -1 up: at most 2.47 ulp, with FMA (the AVX2 and AVX-512
// loops) and without, 99% within 1 ulp; log1p(-1) = -inf, log1p(x < -1) = nan,
// log1p(inf) = inf, log1p(-0) = -0.
// Vectorised, 7.8 -> about 0.5 ns per element against the C library's scalar log1pf (the
// softplus term of sigmoid_cross_entropy_with_logits runs it).
inline float log1p_fast(float x) {
  const float u = 1.0f + x;
  const float d = u - 1.0f;
  float r = log_fast(u) * (x / d);
  r = d == 0.0f ? x : r;
  return x == std::numeric_limits<float>::infinity() ? x : r;
}

// ---- float64: the same vectorisable style, in double ----
// Before these, float64 ran the C library's scalar exp, tanh and log: 4.2, 15.6 and 7.9 ns per
// element on one core of an AMD EPYC VM (AVX-512), against 0.9, 1.6 and 1.4 here on the AVX-512
// loops, 1.4, 2.5 and 2.3 on the AVX2 ones. On the baseline loops (SSE2, two lanes, no FMA) tanh
// takes 8 ns and exp would take 6.3, so float64 exp runs the C library's there
// (ops/cpu/elementwise.cpp, ops/cpu/loss.cpp).

// n = round(x / ln2) as a double through the 1.5 * 2^52 trick, ln2 = kLn2Hi64 + kLn2Lo64 with
// kLn2Hi64 in 29 significant bits (n kLn2Hi64 is exact for every n used here).
inline constexpr double kRoundMagic64 = 6755399441055744.0;
inline constexpr double kLog2e64 = 1.4426950408889634;
inline constexpr double kLn2Hi64 = 0x1.62e42ffp-1, kLn2Lo64 = -0x1.718432a1b0e26p-35;
// (exp(r) - 1 - r) / r^2 for |r| <= ln2 / 2: the Taylor polynomial 1/2! + r/3! + ... + r^11/13!
// (truncation error below 0.02 ulp of exp(r)).
inline constexpr double kExpPoly64[12] = {
    1.6059043836821613e-10, 2.08767569878681e-09,   2.505210838544172e-08,
    2.755731922398589e-07,  2.7557319223985893e-06, 2.48015873015873e-05,
    1.984126984126984e-04,  1.388888888888889e-03,  8.333333333333333e-03,
    4.1666666666666664e-02, 1.6666666666666666e-01, 0.5};
// 2^n for an integral double n in [-1022, 1023], built from the bits with 64-bit integer adds
// and a shift (which AVX2 has; it has no 64-bit conversion from double).
inline double pow2_int64(double n) {
  const uint64_t k = std::bit_cast<uint64_t>(n + kRoundMagic64) -
                     std::bit_cast<uint64_t>(kRoundMagic64);
  return std::bit_cast<double>((k + 1023) << 52);
}
// exp(r) - 1 = r + r^2 P(r) after the reduction x = n ln2 + r; returns it and sets n.
inline double expm1_reduced64(double x, double& n) {
  n = (x * kLog2e64 + kRoundMagic64) - kRoundMagic64;
  double r = x - n * kLn2Hi64;
  r = r - n * kLn2Lo64;
  return horner(kExpPoly64, r) * (r * r) + r;
}

// exp for float64: (1 + expm1_reduced64) 2^n, 2^n applied in two halves so that results near
// overflow and in the subnormal range are right (rounded once). Measured against the long double
// exp (bench/accuracy/float64_ulp.cpp, 10M random inputs per range): at most 1.006 ulp (below 1,
// the rounding of 1 + p is a whole ulp of the result), with FMA and without. exp(nan) = nan,
// exp(+-inf) = inf / 0, overflow gives inf.
inline double exp_fast(double x) {
  double xc = x < -746.0 ? -746.0 : x;  // NaN passes both clamps, and every step below
  xc = xc > 710.0 ? 710.0 : xc;
  double n;
  const double y = expm1_reduced64(xc, n) + 1.0;
  const double n1 = (n * 0.5 + kRoundMagic64) - kRoundMagic64;
  return y * pow2_int64(n1) * pow2_int64(n - n1);
}

// tanh for float64: below |x| = 0.7, x + x^3 P(x^2) with P of degree 12 fitted to tanh
// (bench/accuracy/fit_tanh64.py: Chebyshev interpolation in 80-digit arithmetic, relative error
// 1.4e-17); above, 1 - 2 e / (1 + e) with e = exp(-2|x|) (no cancellation: the result is above
// 0.6). Both are computed and one is picked, so the loop vectorises. Measured as exp: at most
// 1.29 ulp (just above the switch, from the division), 0.83 in the polynomial range; odd;
// tanh(+-inf) = +-1, tanh(nan) = nan, x itself for tiny x.
inline constexpr double kTanhSwitch64 = 0.7;
inline constexpr double kTanhPoly64[13] = {
    -1.935265368692235e-06, 1.0938896099319773e-05, -3.567392597709144e-05,
    9.514406287829865e-05,  -2.385260361392742e-04, 5.898843923888812e-04,
    -1.4558109507053411e-03, 3.5921254479696534e-03, -8.86323534557735e-03,
    2.18694885283181e-02,   -5.396825396808037e-02, 1.3333333333333183e-01,
    -3.333333333333333e-01};
inline double tanh_fast(double x) {
  const double ax = std::abs(x);
  const double y = ax > 20.0 ? -40.0 : -2.0 * ax;  // tanh rounds to 1 from |x| = 19.06
  double n;
  const double e = (expm1_reduced64(y, n) + 1.0) * pow2_int64(n);
  const double big = 1.0 - (e + e) / (e + 1.0);
  const double t = ax * ax;
  const double small = ax + ax * (t * horner(kTanhPoly64, t));
  return std::copysign(ax < kTanhSwitch64 ? small : big, x);
}

// log for float64 (the form of fdlibm's log, with the Taylor coefficients of atanh): x = 2^k m
// with m in [sqrt(1/2), sqrt(2)), f = m - 1, s = f / (2 + f), log(1 + f) = 2 atanh(s) =
// f - f^2/2 + s (f^2/2 + R(s^2)) with R(z) = 2/3 z + 2/5 z^2 + ... + 2/23 z^11 (truncation below
// 0.01 ulp), k ln2 added in two parts. Measured against the long double log over 10M random
// inputs per range (bench/accuracy/float64_ulp.cpp): at most 0.86 ulp (0.76 with FMA); subnormal
// inputs are scaled first; log(0) = -inf, log(x < 0) = nan, log(inf) = inf, log(nan) = nan.
// 1.4 ns per element on the AVX-512 loops, 2.3 on the AVX2 ones, 7.5 on the baseline ones,
// against the C library's 7.9.
inline constexpr double kLogPoly64[11] = {
    2.0 / 23, 2.0 / 21, 2.0 / 19, 2.0 / 17, 2.0 / 15, 2.0 / 13, 2.0 / 11, 2.0 / 9, 2.0 / 7,
    2.0 / 5,  2.0 / 3};
// log(1 + f) + k ln2 for f in [sqrt(1/2) - 1, sqrt(2) - 1] and an integral k.
inline double log1p_core64(double f, double k) {
  const double s = f / (2.0 + f);
  const double z = s * s;
  const double r = z * horner(kLogPoly64, z);
  const double hfsq = 0.5 * f * f;
  return k * kLn2Hi64 - ((hfsq - (s * (hfsq + r) + k * kLn2Lo64)) - f);
}
// x = 2^k m with m in [sqrt(1/2), sqrt(2)) for a finite x > 0: returns m - 1 (exact) and sets k
// (a double: the exponent field is ORed into the mantissa of 2^52, since AVX2 has no 64-bit
// integer to double conversion).
inline double log_reduce64(double x, double& k) {
  const bool sub = x < 0x1p-1022;
  const uint64_t bits = std::bit_cast<uint64_t>(sub ? x * 0x1p54 : x);
  const double biased =
      std::bit_cast<double>(((bits >> 52) & 0x7ff) | 0x4330000000000000ull) - 0x1p52;
  double m = std::bit_cast<double>((bits & 0x000fffffffffffffull) | 0x3ff0000000000000ull);
  const bool high = m > 0x1.6a09e667f3bcdp+0;  // sqrt(2)
  m = high ? m * 0.5 : m;
  k = biased - 1023.0 + (high ? 1.0 : 0.0) - (sub ? 54.0 : 0.0);
  return m - 1.0;
}
inline double log_fast(double x) {
  double k;
  const double f = log_reduce64(x, k);
  return log_specials(x, log1p_core64(f, k));
}

// log1p for float64: where 1 + x lies in [sqrt(1/2), sqrt(2)), log1p_core64(x, 0) itself (no
// rounding of 1 + x); elsewhere log(u) + (x - (u - 1)) / u with u = 1 + x rounded (the
// correction restores what the rounding of u lost, to first order). Measured as log: at most
// 1.21 ulp (1.16 with FMA), 0.5 for tiny x; log1p(-1) = -inf, log1p(x < -1) = nan,
// log1p(inf) = inf, log1p(-0) = -0. 1.75 ns per element on the AVX-512 loops, 10.4 on the
// baseline ones, against the C library's 12.9.
inline double log1p_fast(double x) {
  const double u = 1.0 + x;
  const double d = u - 1.0;
  double k;
  const double fu = log_reduce64(u, k);
  const bool near = x > -0.2928 && x < 0.4142;  // 1 + x in [sqrt(1/2), sqrt(2))
  const double c = near || d == x ? 0.0 : (x - d) / u;
  double r = log1p_core64(near ? x : fu, near ? 0.0 : k) + c;
  r = x == std::numeric_limits<double>::infinity() ? x : r;
  r = x == -1.0 ? -std::numeric_limits<double>::infinity() : r;
  r = x == 0.0 ? x : r;  // -0 stays -0
  return x < -1.0 || x != x ? std::numeric_limits<double>::quiet_NaN() : r;
}

// sin and cos for float32, computed in float64: q = round(x 2/pi) (the 1.5 * 2^52 trick, whose
// low bits are q's), r = x - q pi/2 with pi/2 in two parts (the first in 33 bits, so q pi/2_hi is
// exact for |q| < 2^20), then sin(r) or cos(r) by their Taylor polynomials to r^11 and r^12
// (|r| <= pi/4: below 1e-11 relative), picked and negated by the quadrant (q, or q + 1 for cos).
// Rounded once to float32 at the end: over every float32 with |x| <= 2^20, at most 0.5001 ulp from
// the float64 sin / cos rounded (tests/ops/test_unary.cpp checks every 4093rd); the same with and
// without FMA. Valid for |x| <= kTrigFastMax32: the loops run the C library's sinf / cosf on
// larger |x|, infinities and NaN (ops/cpu/elementwise.cpp). One core of an AMD EPYC VM,
// 64K elements: 0.7-0.9 ns per element on the AVX-512 loops, 1.0-1.4 on the AVX2 ones, 4.0 on
// the baseline ones, against 7.3 for sinf.
inline constexpr float kTrigFastMax32 = 1048576.0f;  // 2^20
inline constexpr double kTwoOverPi64 = 0.6366197723675814;
inline constexpr double kPio2Hi64 = 0x1.921fb544p+0, kPio2Lo64 = 0x1.0b4611a626331p-34;
// (sin(r) / r - 1) / r^2 and (cos(r) - 1) / r^2 in z = r^2, highest degree first.
inline constexpr double kSinPoly64[5] = {-2.505210838544172e-08, 2.7557319223985893e-06,
                                         -1.984126984126984e-04, 8.333333333333333e-03,
                                         -1.6666666666666666e-01};
inline constexpr double kCosPoly64[6] = {2.08767569878681e-09,  -2.755731922398589e-07,
                                         2.48015873015873e-05,  -1.388888888888889e-03,
                                         4.1666666666666664e-02, -0.5};
// sin(r) or cos(r) by the quadrant (its low two bits): c in odd quadrants, s in even ones,
// negated in quadrants 2 and 3; with bit masks, not a select (which the baseline ISA has no
// 64-bit compare for: it became a branch there).
inline double quadrant_pick(double s, double c, uint64_t quadrant) {
  const uint64_t odd = 0 - (quadrant & 1);
  const uint64_t negate = (quadrant & 2) << 62;
  const uint64_t v = (std::bit_cast<uint64_t>(c) & odd) | (std::bit_cast<uint64_t>(s) & ~odd);
  return std::bit_cast<double>(v ^ negate);
}
// Quarter 0: sin(x); quarter 1: cos(x) = sin(x + pi/2).
template <unsigned Quarter>
inline float sincos_fast(float x) {
  const double xd = x;
  const double k = xd * kTwoOverPi64 + kRoundMagic64;
  const double q = k - kRoundMagic64;
  const double r = (xd - q * kPio2Hi64) - q * kPio2Lo64;
  const uint64_t quadrant = std::bit_cast<uint64_t>(k) + Quarter;  // its low bits: q + Quarter
  const double z = r * r;
  const double s = r * (1.0 + z * horner(kSinPoly64, z));  // r times: sin(-0) = -0
  const double c = 1.0 + z * horner(kCosPoly64, z);
  return static_cast<float>(quadrant_pick(s, c, quadrant));
}

// sin and cos for float64: q = round(x 2/pi), r = x - q pi/2 with pi/2 in three parts (33, 33
// and 53 bits; q times the first two exact for |q| < 2^20) and r kept as a double-double
// (rh + rl: the subtraction's error recovered by Knuth's two-sum), then sin(r) = rh + (rl (1 -
// r^2/2) + rh^3 S(r^2)) and cos(r) = 1 - r^2/2 + (r^4 C(r^2) - rh rl) with 1 - r^2/2's rounding
// error added back (fdlibm's kernels' structure), S and C the Taylor polynomials to r^17 and
// r^18; the quadrant applied as for float32. Valid for |x| <= kTrigFastMax64 = 2^15: the
// reduction's error there is at most 0.24 ulp of r even for the doubles nearest k pi/2
// (checked in exact rational arithmetic for k up to 30000). Measured against the long double
// sin / cos (bench/accuracy/float64_ulp.cpp, and the doubles nearest k pi/2): at most 0.80 ulp
// with FMA, 0.81 without. 1.3-1.5 ns per element on the AVX-512 loops, 2.6 on the AVX2 ones,
// 6.5-7.7 on the baseline ones, against the C library's 18.
inline constexpr double kTrigFastMax64 = 32768.0;  // 2^15
inline constexpr double kPio2A64 = 0x1.921fb544p+0, kPio2B64 = 0x1.0b4611a6p-34,
                        kPio2C64 = 0x1.3198a2e037073p-69;
// (sin(r) / r - 1) / r^2 and (cos(r) - 1 + r^2 / 2) / r^4 in z = r^2, highest degree first.
inline constexpr double kSinPolyD[8] = {
    2.8114572543455206e-15, -7.647163731819816e-13, 1.6059043836821613e-10,
    -2.505210838544172e-08, 2.7557319223985893e-06, -1.984126984126984e-04,
    8.333333333333333e-03,  -1.6666666666666666e-01};
inline constexpr double kCosPolyD[8] = {
    -1.5619206968586225e-16, 4.779477332387385e-14, -1.1470745597729725e-11,
    2.08767569878681e-09,    -2.755731922398589e-07, 2.48015873015873e-05,
    -1.388888888888889e-03,  4.1666666666666664e-02};
template <unsigned Quarter>
inline double sincos_fast(double x) {
  const double k = x * kTwoOverPi64 + kRoundMagic64;
  const double q = k - kRoundMagic64;
  const double r1 = x - q * kPio2A64;  // exact
  const double w = q * kPio2B64;       // exact
  const double hi = r1 - w;            // r1 - w = hi + lo exactly (two-sum)
  const double bb = hi - r1;
  const double lo = ((r1 - (hi - bb)) + (-w - bb)) - q * kPio2C64;
  const double rh = hi + lo;
  const double rl = lo - (rh - hi);
  const double z = rh * rh;
  const double s = rh + (rl * (1.0 - 0.5 * z) + rh * z * horner(kSinPolyD, z));
  const double hz = 0.5 * z;
  const double w1 = 1.0 - hz;
  const double c = w1 + (((1.0 - w1) - hz) + (z * z * horner(kCosPolyD, z) - rh * rl));
  const double result = quadrant_pick(s, c, std::bit_cast<uint64_t>(k) + Quarter);
  return Quarter == 0 && x == 0.0 ? x : result;  // sin(-0) = -0
}

template <class C>
inline C exp_any(C x) {
  return exp_fast(x);
}

// tanh for float32: x P(x^2) / Q(x^2) with x clamped to [-9.1, 9.1] (beyond 9.02 tanh rounds to
// +-1), P of degree 5 and Q of degree 4 in x^2, fitted (bench/accuracy/fit_tanh.py) to a relative
// error of 1.5e-9; the result is clamped to [-1, 1] so that 1 - tanh^2 (the gradient) is never
// negative. 16 vector operations with FMA (one division) against about 55 in the previous form's
// AVX-512 loop (1 - 2 / (exp(2|x|) + 1) blended with a small-x polynomial, 1.3 ulp): eager tanh
// over 64K float32 in cache, one core, 0.81 -> 0.42 ns per element, as fast as exp (AVX-512, an
// Intel Xeon VM). Measured over every float32 in [0, 9.5] (bench/accuracy/tanh_ulp.cpp): at most
// 5.1 ulp from the rounded float64 value on the AVX-512 and AVX2 loops, 6.0 on the baseline ones
// (no FMA): the float32 rounding of the two polynomials (TF's CPU tanh is a rational function of
// this kind too); 97.5% within 1 ulp, 99.9% within 2; tanh(x) = x below |x| = 2^-12, tanh(+-inf) =
// +-1, tanh(nan) = nan.
inline constexpr float kTanhClamp = 9.1f;
inline constexpr float kTanhP[6] = {-1.20924156e-11f, 3.04432319e-8f, 2.79513060e-5f,
                                    3.86563060e-3f,   1.36777863e-1f, 1.0f};
inline constexpr float kTanhQ[5] = {1.28335239e-6f, 3.93381371e-4f, 2.72360425e-2f,
                                    4.70111191e-1f, 1.0f};
template <class C>
inline C tanh_any(C x) {
  if constexpr (std::is_same_v<C, float>) {
    float xc = x > kTanhClamp ? kTanhClamp : x;  // NaN compares false and passes both clamps
    xc = xc < -kTanhClamp ? -kTanhClamp : xc;
    const float t = xc * xc;
    const float p = horner(kTanhP, t);
    const float q = horner(kTanhQ, t);
    float r = xc * p / q;
    r = r > 1.0f ? 1.0f : r;
    return r < -1.0f ? -1.0f : r;
  } else {
    return tanh_fast(x);
  }
}

// sigmoid = 1 / (1 + exp(-x)) for x >= 0 and exp(x) / (1 + exp(x)) below: no overflow, and
// relative accuracy for large negative x (subnormal results). Measured max error 2.7 ulp (float32,
// as 1 / (1 + e) times e below 0: the form math_avx512.h's sigmoid16 matches bit for bit); float64
// divides e itself (one rounding fewer): at most 2.39 ulp (bench/accuracy/float64_ulp.cpp).
template <class C>
inline C sigmoid_any(C x) {
  const C e = exp_any(-std::abs(x));
  if constexpr (std::is_same_v<C, double>) {
    return (x >= 0.0 ? 1.0 : e) / (1.0 + e);
  } else {
    const C s = C(1) / (C(1) + e);
    return x >= C(0) ? s : e * s;
  }
}

// Integer power by squaring, wrapping on overflow. Negative exponents are rejected before the
// loop (TF: "Integers to negative integer powers are not allowed"); here they give 1.
template <class T>
inline T ipow(T base, T e) {
  using U = std::make_unsigned_t<T>;
  U result = 1, b = static_cast<U>(base);
  while (e > 0) {
    if (e & 1) result = static_cast<U>(result * b);
    b = static_cast<U>(b * b);
    e = static_cast<T>(e >> 1);
  }
  return static_cast<T>(result);
}

// ---- unary functors: C operator()(C x) ----

struct UnaryOpBase {
  template <class T>
  using calc_type = compute_t<T>;
  template <class T>
  using out_type = T;
};

struct NegativeOp : UnaryOpBase {
  template <class T>
  static constexpr bool ok = is_float_v<T> || is_signed_int_v<T>;
  template <class C>
  C operator()(C x) const {
    if constexpr (std::is_floating_point_v<C>) return -x;
    else return wrap_sub(C(0), x);
  }
};
struct AbsOp : UnaryOpBase {
  template <class T>
  static constexpr bool ok = is_numeric_v<T>;
  template <class C>
  C operator()(C x) const {
    if constexpr (std::is_floating_point_v<C>) return std::abs(x);
    else if constexpr (std::is_signed_v<C>) return x < 0 ? wrap_sub(C(0), x) : x;
    else return x;
  }
};
struct SignOp : UnaryOpBase {
  template <class T>
  static constexpr bool ok = is_float_v<T> || is_signed_int_v<T>;
  template <class C>
  C operator()(C x) const {
    // Zeros of either sign give +0 (TF's sign(-0.0) is 0.0); NaN maps to itself.
    if constexpr (std::is_floating_point_v<C>)
      return x > C(0) ? C(1) : (x < C(0) ? C(-1) : (x == C(0) ? C(0) : x));
    else return static_cast<C>((x > 0) - (x < 0));
  }
};
struct ExpOp : UnaryOpBase {
  template <class T>
  static constexpr bool ok = is_float_v<T>;
  template <class C>
  C operator()(C x) const {
    return exp_any(x);
  }
};
struct LogOp : UnaryOpBase {
  template <class T>
  static constexpr bool ok = is_float_v<T>;
  template <class C>
  C operator()(C x) const {
    return log_fast(x);
  }
};
struct Log1pOp : UnaryOpBase {
  template <class T>
  static constexpr bool ok = is_float_v<T>;
  template <class C>
  C operator()(C x) const {
    return log1p_fast(x);
  }
};
struct SqrtOp : UnaryOpBase {
  template <class T>
  static constexpr bool ok = is_float_v<T>;
  template <class C>
  C operator()(C x) const {
    return std::sqrt(x);
  }
};
struct RsqrtOp : UnaryOpBase {
  template <class T>
  static constexpr bool ok = is_float_v<T>;
  template <class C>
  C operator()(C x) const {
    return C(1) / std::sqrt(x);
  }
};
struct SquareOp : UnaryOpBase {
  template <class T>
  static constexpr bool ok = is_numeric_v<T>;
  template <class C>
  C operator()(C x) const {
    return wrap_mul(x, x);
  }
};
struct TanhOp : UnaryOpBase {
  template <class T>
  static constexpr bool ok = is_float_v<T>;
  template <class C>
  C operator()(C x) const {
    return tanh_any(x);
  }
};
struct SigmoidOp : UnaryOpBase {
  template <class T>
  static constexpr bool ok = is_float_v<T>;
  template <class C>
  C operator()(C x) const {
    return sigmoid_any(x);
  }
};
// A functor whose vectorised form covers |x| <= fast_max<C>() only (0: all inputs) also has
// slow(x), the C library's function, which the loops run on those larger |x| and NaN (a block of
// 256 holding any of them is computed element by element, picking one of the two).
struct SinOp : UnaryOpBase {
  template <class T>
  static constexpr bool ok = is_float_v<T>;
  template <class C>
  static constexpr C fast_max() {
    return std::is_same_v<C, float> ? C(kTrigFastMax32) : C(kTrigFastMax64);
  }
  template <class C>
  C operator()(C x) const {
    return sincos_fast<0>(x);
  }
  template <class C>
  static C slow(C x) {
    return std::sin(x);
  }
};
struct CosOp : UnaryOpBase {
  template <class T>
  static constexpr bool ok = is_float_v<T>;
  template <class C>
  static constexpr C fast_max() {
    return std::is_same_v<C, float> ? C(kTrigFastMax32) : C(kTrigFastMax64);
  }
  template <class C>
  C operator()(C x) const {
    return sincos_fast<1>(x);
  }
  template <class C>
  static C slow(C x) {
    return std::cos(x);
  }
};
// The C library's erf and erfc (glibc: within 1 ulp in float32 and float64; not vectorised).
struct ErfOp : UnaryOpBase {
  template <class T>
  static constexpr bool ok = is_float_v<T>;
  template <class C>
  C operator()(C x) const {
    return std::erf(x);
  }
};
struct ErfcOp : UnaryOpBase {
  template <class T>
  static constexpr bool ok = is_float_v<T>;
  template <class C>
  C operator()(C x) const {
    return std::erfc(x);
  }
};
// tan, the inverse trigonometric and the (inverse) hyperbolic functions and expm1: the C
// library's scalar functions, as erf's (not vectorised; glibc's published error bounds are a
// few ulp at most; tests/ops/test_math_more.cpp checks them against float64 and TF 2.21).
// Special values are C99's: asin(2) = NaN, atanh(+-1) = +-inf, acosh(x < 1) = NaN,
// sinh(+-inf) = +-inf, cosh(+-inf) = inf, expm1(-inf) = -1.
struct TanOp : UnaryOpBase {
  template <class T>
  static constexpr bool ok = is_float_v<T>;
  template <class C>
  C operator()(C x) const {
    return std::tan(x);
  }
};
struct AsinOp : UnaryOpBase {
  template <class T>
  static constexpr bool ok = is_float_v<T>;
  template <class C>
  C operator()(C x) const {
    return std::asin(x);
  }
};
struct AcosOp : UnaryOpBase {
  template <class T>
  static constexpr bool ok = is_float_v<T>;
  template <class C>
  C operator()(C x) const {
    return std::acos(x);
  }
};
struct AtanOp : UnaryOpBase {
  template <class T>
  static constexpr bool ok = is_float_v<T>;
  template <class C>
  C operator()(C x) const {
    return std::atan(x);
  }
};
struct SinhOp : UnaryOpBase {
  template <class T>
  static constexpr bool ok = is_float_v<T>;
  template <class C>
  C operator()(C x) const {
    return std::sinh(x);
  }
};
struct CoshOp : UnaryOpBase {
  template <class T>
  static constexpr bool ok = is_float_v<T>;
  template <class C>
  C operator()(C x) const {
    return std::cosh(x);
  }
};
struct AsinhOp : UnaryOpBase {
  template <class T>
  static constexpr bool ok = is_float_v<T>;
  template <class C>
  C operator()(C x) const {
    return std::asinh(x);
  }
};
struct AcoshOp : UnaryOpBase {
  template <class T>
  static constexpr bool ok = is_float_v<T>;
  template <class C>
  C operator()(C x) const {
    return std::acosh(x);
  }
};
struct AtanhOp : UnaryOpBase {
  template <class T>
  static constexpr bool ok = is_float_v<T>;
  template <class C>
  C operator()(C x) const {
    return std::atanh(x);
  }
};
struct Expm1Op : UnaryOpBase {
  template <class T>
  static constexpr bool ok = is_float_v<T>;
  template <class C>
  C operator()(C x) const {
    return std::expm1(x);
  }
};
struct SoftsignOp : UnaryOpBase {
  template <class T>
  static constexpr bool ok = is_float_v<T>;
  template <class C>
  C operator()(C x) const {
    return x / (C(1) + std::abs(x));
  }
};
// fast_max<C>() of F, or 0 where F has none.
template <class F, class C>
constexpr C fast_max_of() {
  if constexpr (requires { F::template fast_max<C>(); }) return F::template fast_max<C>();
  else return C(0);
}
struct FloorOp : UnaryOpBase {
  template <class T>
  static constexpr bool ok = is_float_v<T>;
  template <class C>
  C operator()(C x) const {
    return floor_fast(x);
  }
};
struct CeilOp : UnaryOpBase {
  template <class T>
  static constexpr bool ok = is_float_v<T>;
  template <class C>
  C operator()(C x) const {
    return ceil_fast(x);
  }
};
struct RoundOp : UnaryOpBase {
  template <class T>
  static constexpr bool ok = is_numeric_v<T>;
  template <class C>
  C operator()(C x) const {
    if constexpr (std::is_floating_point_v<C>) return round_half_even(x);
    else return x;
  }
};
struct LogicalNotOp : UnaryOpBase {
  template <class T>
  static constexpr bool ok = std::is_same_v<T, bool>;
  template <class C>
  C operator()(C x) const {
    return !x;
  }
};
struct InvertOp : UnaryOpBase {
  template <class T>
  static constexpr bool ok = is_int_v<T>;
  template <class C>
  C operator()(C x) const {
    return static_cast<C>(~x);
  }
};

// Float to a signed integer type, truncating toward zero and saturating: NaN gives 0, values
// beyond the type's range its minimum or maximum. That is what CUDA's conversion instructions do,
// so every device agrees (a plain static_cast is undefined there; x86 gives the minimum for all).
template <class I, class F>
inline I saturate_cast(F v) {
  static_assert(std::is_signed_v<I>);
  constexpr F lo = static_cast<F>(std::numeric_limits<I>::min());  // -2^31 or -2^63: exact
  if (!(v == v)) return I(0);
  if (v <= lo) return std::numeric_limits<I>::min();
  if (v >= -lo) return std::numeric_limits<I>::max();
  return static_cast<I>(v);
}

// Any dtype to any dtype: float -> int truncates toward zero and saturates (saturate_cast; float
// -> uint8 goes through int32, so it wraps for |x| < 2^31 as TF's CPU kernel does), to bool is
// x != 0 (NaN gives true), bool gives 0 / 1.
template <class To, class From>
inline To cast_value(From v) {
  using CF = compute_t<From>;
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<To, bool>) {
    return static_cast<CF>(v) != CF(0);
  } else if constexpr (std::is_same_v<To, uint8_t> && is_float_v<From>) {
    return static_cast<uint8_t>(saturate_cast<int32_t>(static_cast<CF>(v)));
  } else if constexpr (is_int_v<To> && is_float_v<From>) {
    return saturate_cast<To>(static_cast<CF>(v));
  } else {
    return store<To>(static_cast<compute_t<To>>(static_cast<CF>(v)));
  }
}

// ---- binary functors: R operator()(C a, C b) ----

struct BinaryOpBase {
  template <class T>
  using calc_type = compute_t<T>;
  template <class T>
  using out_type = T;
};
struct CompareOpBase {
  template <class T>
  using calc_type = compute_t<T>;
  template <class T>
  using out_type = bool;
  template <class T>
  static constexpr bool ok = is_numeric_v<T>;
};

struct AddOp : BinaryOpBase {
  template <class T>
  static constexpr bool ok = is_numeric_v<T>;
  template <class C>
  C operator()(C a, C b) const {
    return wrap_add(a, b);
  }
};
struct SubtractOp : BinaryOpBase {
  template <class T>
  static constexpr bool ok = is_numeric_v<T>;
  template <class C>
  C operator()(C a, C b) const {
    return wrap_sub(a, b);
  }
};
struct MultiplyOp : BinaryOpBase {
  template <class T>
  static constexpr bool ok = is_numeric_v<T>;
  template <class C>
  C operator()(C a, C b) const {
    return wrap_mul(a, b);
  }
};
// True division: integers are converted first (uint8 to float32, wider ones to float64), so an
// integer division by zero is a float one (inf or nan), never a trap.
struct DivideOp {
  template <class T>
  static constexpr bool ok = is_numeric_v<T>;
  template <class T>
  using out_type = std::conditional_t<
      is_int_v<T>, std::conditional_t<std::is_same_v<T, uint8_t>, float, double>, T>;
  template <class T>
  using calc_type = compute_t<out_type<T>>;
  template <class C>
  C operator()(C a, C b) const {
    return a / b;
  }
};
struct PowOp : BinaryOpBase {
  template <class T>
  static constexpr bool ok = is_numeric_v<T>;
  template <class C>
  C operator()(C a, C b) const {
    if constexpr (std::is_floating_point_v<C>) return std::pow(a, b);
    else return ipow(a, b);
  }
};
// pow(x, c) for the one-element exponents c that Pow's CPU kernel runs without pow (0, 1, 2,
// 1/2, -1; float32 and float64): the second operand is c itself and is ignored. Each is the
// exact power rounded once (the C library's pow is within 0.82 ulp for float32) and keeps C99's
// special values: pow(x, 0) = 1 and pow(x, 1) = x even for NaN, pow(-0, 1/2) = +0,
// pow(-inf, 1/2) = +inf (where sqrt gives -0 and NaN), pow(+-0, -1) = +-inf.
struct PowByConstantBase {
  template <class T>
  static constexpr bool ok = std::is_floating_point_v<T>;
  template <class T>
  using calc_type = T;
  template <class T>
  using out_type = T;
};
struct PowZeroOp : PowByConstantBase {
  template <class C>
  C operator()(C, C) const {
    return C(1);
  }
};
struct PowOneOp : PowByConstantBase {
  template <class C>
  C operator()(C x, C) const {
    return x;
  }
};
struct PowTwoOp : PowByConstantBase {
  template <class C>
  C operator()(C x, C) const {
    return x * x;
  }
};
struct PowHalfOp : PowByConstantBase {
  template <class C>
  C operator()(C x, C) const {
    const C r = std::sqrt(x);
    return x == C(0) ? C(0) : (x == -std::numeric_limits<C>::infinity() ? -x : r);
  }
};
struct PowMinusOneOp : PowByConstantBase {
  template <class C>
  C operator()(C x, C) const {
    return C(1) / x;
  }
};
// Integer floor division and modulo (TF's FloorDiv, FloorMod): the quotient rounds toward -inf,
// the remainder has the divisor's sign. A zero divisor is rejected before the loop; here it is
// replaced by 1 so that no element can trap. b == -1 never reaches the hardware division either:
// the most negative value divided by -1 traps on x86; the quotient wraps to -a (TF's result).
template <class T>
inline T safe_divisor(T b) {
  if constexpr (std::is_signed_v<T>) return (b == T(0) || b == T(-1)) ? T(1) : b;
  else return b == T(0) ? T(1) : b;
}
template <class T>
inline T floor_div_int(T a, T b) {
  const T d = safe_divisor(b);
  const T q = static_cast<T>(a / d);
  if constexpr (std::is_signed_v<T>) {
    const T r = static_cast<T>(a % d);
    const T fq = (r != 0 && ((r < 0) != (d < 0))) ? static_cast<T>(q - 1) : q;
    return b == T(-1) ? wrap_sub(T(0), a) : fq;
  } else {
    return q;
  }
}
template <class T>
inline T floor_mod_int(T a, T b) {
  const T d = safe_divisor(b);
  const T r = static_cast<T>(a % d);
  if constexpr (std::is_signed_v<T>) {
    const T fr = (r != 0 && ((r < 0) != (d < 0))) ? static_cast<T>(r + d) : r;
    return b == T(-1) ? T(0) : fr;
  } else {
    return r;
  }
}
// Float floor division: floor(a / b). S is the storage type: for float16 and bfloat16 the
// quotient is rounded to S before the floor, as TF's Eigen half arithmetic does
// (floordiv(0.3, 0.1) in float16 is 3, not the 2 of the float quotient 2.9998).
template <class S>
struct FloorDivOp : BinaryOpBase {
  template <class T>
  static constexpr bool ok = std::is_same_v<T, S> && is_numeric_v<T>;
  template <class C>
  C operator()(C a, C b) const {
    if constexpr (std::is_floating_point_v<C>) {
      C q = a / b;
      if constexpr (is_half_v<S>) q = static_cast<C>(static_cast<float>(S(static_cast<float>(q))));
      return std::floor(q);
    } else {
      return floor_div_int(a, b);
    }
  }
};
// Float floor modulo as TF's: the truncated remainder fmod(a, b), plus b where it is nonzero
// and its sign differs from b's (so -0.0 stays -0.0 and floormod(-1, inf) is inf).
struct FloorModOp : BinaryOpBase {
  template <class T>
  static constexpr bool ok = is_numeric_v<T>;
  template <class C>
  C operator()(C a, C b) const {
    if constexpr (std::is_floating_point_v<C>) {
      const C r = std::fmod(a, b);
      return (r != C(0) && ((b < C(0)) != (r < C(0)))) ? r + b : r;
    } else {
      return floor_mod_int(a, b);
    }
  }
};
// atan2(y, x): the angle of the point (x, y) in [-pi, pi], the C library's (C99's special
// values: atan2(+-0, -0) = +-pi, atan2(+-inf, +-inf) = +-pi/4 or +-3pi/4; NaN propagates).
struct Atan2Op : BinaryOpBase {
  template <class T>
  static constexpr bool ok = is_float_v<T>;
  template <class C>
  C operator()(C y, C x) const {
    return std::atan2(y, x);
  }
};
// NaN propagates (either operand), as numpy's and TF's maximum.
struct MaximumOp : BinaryOpBase {
  template <class T>
  static constexpr bool ok = is_numeric_v<T>;
  template <class C>
  C operator()(C a, C b) const {
    if constexpr (std::is_floating_point_v<C>) return (a > b || a != a) ? a : b;
    else return a > b ? a : b;
  }
};
struct MinimumOp : BinaryOpBase {
  template <class T>
  static constexpr bool ok = is_numeric_v<T>;
  template <class C>
  C operator()(C a, C b) const {
    if constexpr (std::is_floating_point_v<C>) return (a < b || a != a) ? a : b;
    else return a < b ? a : b;
  }
};
struct EqualOp : CompareOpBase {
  template <class T>
  static constexpr bool ok = true;
  template <class C>
  bool operator()(C a, C b) const {
    return a == b;
  }
};
struct NotEqualOp : CompareOpBase {
  template <class T>
  static constexpr bool ok = true;
  template <class C>
  bool operator()(C a, C b) const {
    return a != b;
  }
};
struct LessOp : CompareOpBase {
  template <class C>
  bool operator()(C a, C b) const {
    return a < b;
  }
};
struct LessEqualOp : CompareOpBase {
  template <class C>
  bool operator()(C a, C b) const {
    return a <= b;
  }
};
struct GreaterOp : CompareOpBase {
  template <class C>
  bool operator()(C a, C b) const {
    return a > b;
  }
};
struct GreaterEqualOp : CompareOpBase {
  template <class C>
  bool operator()(C a, C b) const {
    return a >= b;
  }
};
struct LogicalAndOp : BinaryOpBase {
  template <class T>
  static constexpr bool ok = std::is_same_v<T, bool>;
  bool operator()(bool a, bool b) const { return a && b; }
};
struct LogicalOrOp : BinaryOpBase {
  template <class T>
  static constexpr bool ok = std::is_same_v<T, bool>;
  bool operator()(bool a, bool b) const { return a || b; }
};

// tf.bitwise on integers. The shift amount is clamped to [0, bits - 1] (TF's kernels do the
// same, to avoid C++'s undefined shifts); left shifts go through the unsigned type (wrap).
struct BitwiseOpBase : BinaryOpBase {
  template <class T>
  static constexpr bool ok = is_int_v<T>;
};
struct BitwiseAndOp : BitwiseOpBase {
  template <class C>
  C operator()(C a, C b) const {
    return static_cast<C>(a & b);
  }
};
struct BitwiseOrOp : BitwiseOpBase {
  template <class C>
  C operator()(C a, C b) const {
    return static_cast<C>(a | b);
  }
};
struct BitwiseXorOp : BitwiseOpBase {
  template <class C>
  C operator()(C a, C b) const {
    return static_cast<C>(a ^ b);
  }
};
template <class C>
inline C clamp_shift(C b) {
  constexpr C kMax = static_cast<C>(sizeof(C) * 8 - 1);
  if constexpr (std::is_signed_v<C>) b = b < 0 ? C(0) : b;
  return b > kMax ? kMax : b;
}
struct LeftShiftOp : BitwiseOpBase {
  template <class C>
  C operator()(C a, C b) const {
    using U = std::make_unsigned_t<C>;
    return static_cast<C>(static_cast<U>(static_cast<U>(a) << clamp_shift(b)));
  }
};
struct RightShiftOp : BitwiseOpBase {
  template <class C>
  C operator()(C a, C b) const {
    return static_cast<C>(a >> clamp_shift(b));
  }
};

}  // namespace tapeflow::cpu
