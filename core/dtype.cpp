#include "core/dtype.h"

#include <ostream>

namespace tapeflow {

std::string_view dtype_name(DType d) {
  switch (d.id) {
    case DTypeId::Float16: return "float16";
    case DTypeId::BFloat16: return "bfloat16";
    case DTypeId::Float32: return "float32";
    case DTypeId::Float64: return "float64";
    case DTypeId::Int32: return "int32";
    case DTypeId::Int64: return "int64";
    case DTypeId::UInt8: return "uint8";
    case DTypeId::Bool: return "bool";
  }
  return "unknown";
}

std::ostream& operator<<(std::ostream& os, DType d) { return os << dtype_name(d); }

// Round-to-nearest-even float32 -> binary16, with subnormals, infinities and NaN.
uint16_t half_t::from_float(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  x &= 0x7fffffffu;
  if (x > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
  if (x >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (x < 0x38800000u) {                                                // subnormal or zero
    if (x < 0x33000000u) return static_cast<uint16_t>(sign);            // rounds to zero
    const uint32_t exp = x >> 23;
    const uint32_t mant = (x & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126u - exp;  // 14 + (127 - 15) - exp + 1
    uint32_t h = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u);
    const uint32_t halfway = 1u << (shift - 1u);
    if (rem > halfway || (rem == halfway && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = ((x >> 13) - (112u << 10));
  const uint32_t rem = x & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

float half_t::to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t x;
  if (exp == 0) {
    if (mant == 0) {
      x = sign;
    } else {  // subnormal: normalise
      exp = 113;
      while ((mant & 0x400u) == 0) {
        mant <<= 1;
        --exp;
      }
      mant &= 0x3ffu;
      x = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 31) {
    x = sign | 0x7f800000u | (mant << 13);
  } else {
    x = sign | ((exp + 112u) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

}  // namespace tapeflow
