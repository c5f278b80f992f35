// CPU kernels of the random family: Philox blocks generated in parallel (each thread takes a
// range of block indices, so the values do not depend on the thread count), converted to the
// output dtype. See ops/random.h for the algorithms and ops/cpu/philox.h for the stream layout.
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "core/parallel.h"
#include "ops/cpu/philox.h"
#include "ops/random.h"

namespace tapeflow::prims {

namespace {

using philox::Words;

// Runs fn(block, words, dst_index, count) for every Philox block covering n outputs, with
// `per_block` outputs per block (4 for 32-bit outputs, 2 for 64-bit ones).
template <class F>
void for_blocks(int64_t n, int per_block, uint64_t seed, uint64_t seed2, F&& fn) {
  const int64_t blocks = (n + per_block - 1) / per_block;
  detail::parallel_for(blocks, 2048, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const Words w = philox::block(seed, seed2, static_cast<uint64_t>(b));
      const int64_t i = b * per_block;
      fn(w, i, std::min<int64_t>(per_block, n - i));
    }
  });
}

// The largest value of T below x (keeps uniform samples below maxval after rounding).
template <class T>
T below(T x) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::nextafter(x, -std::numeric_limits<T>::infinity());
  } else {  // half_t, bfloat16_t: step the bit pattern one ulp toward -inf
    T y = x;
    constexpr uint16_t sign = 0x8000;  // both formats keep the sign in the top bit
    if ((y.bits & 0x7fff) == 0) y.bits = static_cast<uint16_t>(sign | 1);  // +-0 -> -min
    else if (y.bits & sign) y.bits = static_cast<uint16_t>(y.bits + 1);
    else y.bits = static_cast<uint16_t>(y.bits - 1);
    return y;
  }
}

template <class T>
constexpr int mantissa_bits() {
  if constexpr (std::is_same_v<T, half_t>) return 10;
  else if constexpr (std::is_same_v<T, bfloat16_t>) return 7;
  else return 23;
}

template <class T>
void uniform_float_kernel(const RandomUniform& p, T* out, int64_t n) {
  if constexpr (std::is_same_v<T, double>) {
    const double lo = p.minval, hi = p.maxval, range = hi - lo;
    const double top = below(hi);
    for_blocks(n, 2, p.seed, p.seed2, [&](const Words& w, int64_t i, int64_t cnt) {
      const double u[2] = {philox::uniform_double(w.v[0], w.v[1]),
                           philox::uniform_double(w.v[2], w.v[3])};
      for (int64_t j = 0; j < cnt; ++j) {
        const double v = lo + u[j] * range;
        out[i + j] = v < hi ? v : top;
      }
    });
  } else {
    const float lo = static_cast<float>(p.minval), range = static_cast<float>(p.maxval - p.minval);
    const T hi_t = T(static_cast<float>(p.maxval));
    const float hi = static_cast<float>(hi_t);
    const T top = below(hi_t);
    constexpr int bits = mantissa_bits<T>();
    for_blocks(n, 4, p.seed, p.seed2, [&](const Words& w, int64_t i, int64_t cnt) {
      for (int64_t j = 0; j < cnt; ++j) {
        const float u = bits == 23 ? philox::uniform_float(w.v[j])
                                   : philox::uniform_float_bits(w.v[j], bits);
        const T v = T(lo + u * range);
        out[i + j] = static_cast<float>(v) < hi ? v : top;
      }
    });
  }
}

template <class T>
void uniform_int_kernel(const RandomUniform& p, T* out, int64_t n) {
  const uint64_t range = static_cast<uint64_t>(p.imax) - static_cast<uint64_t>(p.imin);
  const uint64_t base = static_cast<uint64_t>(p.imin);
  if constexpr (std::is_same_v<T, int32_t>) {
    // range <= 2^32; a full 2^32 range takes the draw as it is.
    const bool full = range > 0xffffffffull;
    const uint32_t r32 = static_cast<uint32_t>(range);
    for_blocks(n, 4, p.seed, p.seed2, [&](const Words& w, int64_t i, int64_t cnt) {
      for (int64_t j = 0; j < cnt; ++j) {
        const uint32_t d = full ? w.v[j] : w.v[j] % r32;
        out[i + j] = static_cast<int32_t>(static_cast<uint32_t>(base) + d);
      }
    });
  } else {
    for_blocks(n, 2, p.seed, p.seed2, [&](const Words& w, int64_t i, int64_t cnt) {
      for (int64_t j = 0; j < cnt; ++j) {
        const uint64_t d =
            (static_cast<uint64_t>(w.v[2 * j]) << 32) | static_cast<uint64_t>(w.v[2 * j + 1]);
        out[i + j] = static_cast<int64_t>(base + (range == 0 ? d : d % range));
      }
    });
  }
}

constexpr double kTwoPi = 6.283185307179586476925286766559;

template <class T>
void normal_kernel(const RandomNormal& p, T* out, int64_t n) {
  if constexpr (std::is_same_v<T, double>) {
    const double mean = p.mean, sd = p.stddev;
    for_blocks(n, 2, p.seed, p.seed2, [&](const Words& w, int64_t i, int64_t cnt) {
      const double u1 = 1.0 - philox::uniform_double(w.v[0], w.v[1]);  // (0, 1]
      const double u2 = philox::uniform_double(w.v[2], w.v[3]);
      const double r = std::sqrt(-2.0 * std::log(u1));
      const double z[2] = {r * std::cos(kTwoPi * u2), r * std::sin(kTwoPi * u2)};
      for (int64_t j = 0; j < cnt; ++j) out[i + j] = mean + sd * z[j];
    });
  } else {
    const float mean = static_cast<float>(p.mean), sd = static_cast<float>(p.stddev);
    for_blocks(n, 4, p.seed, p.seed2, [&](const Words& w, int64_t i, int64_t cnt) {
      float z[4];
      for (int k = 0; k < 2; ++k) {
        const float u1 = 1.0f - philox::uniform_float(w.v[2 * k]);  // (0, 1]
        const float u2 = philox::uniform_float(w.v[2 * k + 1]);
        const float r = std::sqrt(-2.0f * std::log(u1));
        const float a = static_cast<float>(kTwoPi) * u2;
        z[2 * k] = r * std::cos(a);
        z[2 * k + 1] = r * std::sin(a);
      }
      for (int64_t j = 0; j < cnt; ++j) out[i + j] = T(mean + sd * z[j]);
    });
  }
}

}  // namespace

void RandomNormal::eval_cpu(std::span<const Tensor>, std::span<Tensor> out) const {
  const int64_t n = out[0].num_elements();
  TF_DISPATCH_FLOAT_TYPES(dtype, normal_kernel<T>(*this, out[0].data<T>(), n));
}

void RandomUniform::eval_cpu(std::span<const Tensor>, std::span<Tensor> out) const {
  const int64_t n = out[0].num_elements();
  if (dtype == int32) uniform_int_kernel<int32_t>(*this, out[0].data<int32_t>(), n);
  else if (dtype == int64) uniform_int_kernel<int64_t>(*this, out[0].data<int64_t>(), n);
  else TF_DISPATCH_FLOAT_TYPES(dtype, uniform_float_kernel<T>(*this, out[0].data<T>(), n));
}

}  // namespace tapeflow::prims
