// Distance in float32 ulp between a float32 result and the exact (float64) value: the error
// divided by the spacing of float32 values at the float64 value rounded to float32, on the
// exact value's side of it (just below a power of two, the smaller spacing there; an exact float
// takes the result's side; the smallest subnormal at 0; at the largest float, the spacing below
// it; a value beyond the largest float must be matched by an infinity). Header-only: the math
// accuracy tests and bench/accuracy/tanh_ulp.cpp share it.
#pragma once

#include <cmath>
#include <limits>

namespace tapeflow::testing {

inline double float32_ulp_error(float got, double want) {
  const double a = std::abs(want);
  const float rounded = static_cast<float>(a);
  constexpr float inf = std::numeric_limits<float>::infinity();
  if (rounded == inf) return got == static_cast<float>(want) ? 0.0 : inf;  // beyond FLT_MAX
  const float above = std::nextafter(rounded, inf);
  // An exact value on a float takes the side of the result.
  const bool below = a < rounded || (a == rounded && std::abs(got) < rounded) || above == inf;
  const double ulp = rounded == 0.0f ? std::numeric_limits<float>::denorm_min()
                     : below ? static_cast<double>(rounded) - std::nextafter(rounded, 0.0f)
                             : static_cast<double>(above) - rounded;
  return std::abs(static_cast<double>(got) - want) / ulp;
}

// The same for a float64 result against a long double reference (64-bit mantissa on x86-64,
// 113 bits on AArch64 Linux), in the spacing of float64 values on the reference's side of its
// float64 rounding (below a power of two, the smaller spacing there; at the largest double, the
// spacing below it).
inline double float64_ulp_error(double got, long double want) {
  const long double a = std::abs(want);
  const double rounded = static_cast<double>(a);
  constexpr double inf = std::numeric_limits<double>::infinity();
  if (rounded == inf) return got == static_cast<double>(want) ? 0.0 : inf;  // beyond DBL_MAX
  const double above = std::nextafter(rounded, inf);
  // An exact value on a double takes the side of the result.
  const bool below = a < rounded || (a == rounded && std::abs(got) < rounded) || above == inf;
  const long double ulp = rounded == 0.0 ? std::numeric_limits<double>::denorm_min()
                          : below ? static_cast<long double>(rounded) - std::nextafter(rounded, 0.0)
                                  : static_cast<long double>(above) - rounded;
  return static_cast<double>(std::abs(static_cast<long double>(got) - want) / ulp);
}

}  // namespace tapeflow::testing
