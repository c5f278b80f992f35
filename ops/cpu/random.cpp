// CPU kernels of the random family: Philox blocks generated in parallel (each thread takes a
// range of block indices, so the values do not depend on the thread count), converted to the
// output dtype. See ops/random.h for the algorithms and ops/cpu/philox.h for the stream layout.

// No fused multiply-adds anywhere in this file: the AVX2/AVX-512 variants below would otherwise
// fuse (GCC contracts by default when the target has FMA) and give other bits than the SSE2
// build, and the same seed must give the same numbers on every machine (see ops/cpu/philox.h).
// First, so that the inline math of ops/cpu/unary_ops.h is compiled the same way; errno and
// trapping math off let GCC vectorise its selects (neither changes a value).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=off", "no-math-errno", "no-trapping-math")
#endif

#include "ops/random.h"

#include <cmath>
#include <limits>
#include <type_traits>

#include "core/check.h"
#include "core/parallel.h"
#include "ops/cpu/isa.h"
#include "ops/cpu/philox.h"
#include "ops/cpu/unary_ops.h"

namespace tapeflow::prims {

namespace {

using philox::Words;

// The hot loops below are plain C++ that the compiler vectorises; the library is built for
// baseline x86-64 (SSE2), so they are also compiled for AVX2 and AVX-512 and picked at run time
// (ops/cpu/isa.h). Every variant does the same IEEE operations in the same order (contraction is
// off, above), so the numbers do not depend on the machine.
#define TF_RANDOM_BODY [[gnu::always_inline]] inline

// ---- Philox words for a range of blocks, in chunks that stay in L1 ----

constexpr int64_t kChunkBlocks = 256;

// Words of blocks [b0, b0 + nb) into w (4 per block). Written as a plain loop over independent
// blocks so that the compiler vectorises it (the 32x32->64-bit products become pmuludq).
TF_RANDOM_BODY void fill_words_body(uint64_t seed, uint64_t seed2, uint64_t b0, int64_t nb,
                                     uint32_t* __restrict w) {
  const uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  const uint32_t c2 = static_cast<uint32_t>(seed2), c3 = static_cast<uint32_t>(seed2 >> 32);
  const uint32_t lo0 = static_cast<uint32_t>(b0);
  const uint32_t hi = static_cast<uint32_t>(b0 >> 32);
  if (static_cast<uint64_t>(lo0) + static_cast<uint64_t>(nb) > 0x100000000ull) {
    for (int64_t j = 0; j < nb; ++j) {  // the low counter word wraps inside this chunk
      const Words x = philox::block(seed, seed2, b0 + static_cast<uint64_t>(j));
      for (int k = 0; k < 4; ++k) w[4 * j + k] = x.v[k];
    }
    return;
  }
  for (int64_t j = 0; j < nb; ++j) {
    const Words x = philox::philox4x32_10(lo0 + static_cast<uint32_t>(j), hi, c2, c3, k0, k1);
    w[4 * j + 0] = x.v[0];
    w[4 * j + 1] = x.v[1];
    w[4 * j + 2] = x.v[2];
    w[4 * j + 3] = x.v[3];
  }
}

TF_CPU_VARIANTS(fill_words, fill_words_body,
                (uint64_t seed, uint64_t seed2, uint64_t b0, int64_t nb, uint32_t* __restrict w),
                (seed, seed2, b0, nb, w))

// Runs fn(words, first, count) over the outputs [0, n), `per_block` outputs per Philox block
// (4 for 32-bit outputs, 2 for 64-bit ones): words holds the blocks of outputs
// [first, first + count). Threads take disjoint block ranges, so the values do not depend on
// the thread count.
template <class F>
void for_chunks(int64_t n, int per_block, uint64_t seed, uint64_t seed2, F&& fn) {
  const int64_t blocks = (n + per_block - 1) / per_block;
  detail::parallel_for(blocks, 1024, [&](int64_t b0, int64_t b1) {
    alignas(64) uint32_t w[4 * kChunkBlocks];
    for (int64_t c = b0; c < b1; c += kChunkBlocks) {
      const int64_t nb = std::min<int64_t>(kChunkBlocks, b1 - c);
      TF_CPU_DISPATCH(fill_words, seed, seed2, static_cast<uint64_t>(c), nb, w);
      const int64_t first = c * per_block;
      fn(static_cast<const uint32_t*>(w), first, std::min<int64_t>(nb * per_block, n - first));
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
    if ((y.bits & 0x7fff) == 0)
      y.bits = static_cast<uint16_t>(sign | 1);  // +-0 -> -min
    else if (y.bits & sign)
      y.bits = static_cast<uint16_t>(y.bits + 1);
    else
      y.bits = static_cast<uint16_t>(y.bits - 1);
    return y;
  }
}

template <class T>
constexpr int mantissa_bits() {
  if constexpr (std::is_same_v<T, half_t>)
    return 10;
  else if constexpr (std::is_same_v<T, bfloat16_t>)
    return 7;
  else
    return 23;
}

// Box-Muller, the vectorisable part: for each pair j, v = -2 log(u1) with u1 = 1 - uniform in
// (0, 1] (never log(0)), and sin/cos of 2 pi u2.
TF_RANDOM_BODY void box_muller_prepare_body(const uint32_t* __restrict w, int64_t pairs,
                                            float* __restrict v, float* __restrict s,
                                            float* __restrict c) {
  for (int64_t j = 0; j < pairs; ++j) {
    const float u1 = 1.0f - philox::uniform_float(w[2 * j]);
    const float u2 = philox::uniform_float(w[2 * j + 1]);
    v[j] = -2.0f * philox::log_unit(u1);
    philox::sincos_2pi(u2, s[j], c[j]);
  }
}

TF_RANDOM_BODY void uniform_f32_body(const uint32_t* __restrict w, int64_t n, float lo,
                                     float range, float hi, float top, float* __restrict out) {
  for (int64_t j = 0; j < n; ++j) {
    const float v = lo + philox::uniform_float(w[j]) * range;
    out[j] = v < hi ? v : top;
  }
}

// float64: the same with the vectorised float64 log, sin and cos of ops/cpu/unary_ops.h (within
// 0.86 and 0.81 ulp; plain IEEE arithmetic without contraction here, so the same bits on every
// CPU), one Philox block per pair.
constexpr double kTwoPi = 6.283185307179586476925286766559;
TF_RANDOM_BODY void box_muller_prepare64_body(const uint32_t* __restrict w, int64_t pairs,
                                              double* __restrict v, double* __restrict s,
                                              double* __restrict c) {
  for (int64_t j = 0; j < pairs; ++j) {
    const uint32_t* b = w + 4 * j;
    const double u1 = 1.0 - philox::uniform_double(b[0], b[1]);  // (0, 1]
    const double t = kTwoPi * philox::uniform_double(b[2], b[3]);
    v[j] = -2.0 * cpu::log_fast(u1);
    s[j] = cpu::sincos_fast<0>(t);
    c[j] = cpu::sincos_fast<1>(t);
  }
}

TF_CPU_VARIANTS(box_muller_prepare, box_muller_prepare_body,
                (const uint32_t* __restrict w, int64_t pairs, float* __restrict v,
                 float* __restrict s, float* __restrict c),
                (w, pairs, v, s, c))
TF_CPU_VARIANTS(box_muller_prepare64, box_muller_prepare64_body,
                (const uint32_t* __restrict w, int64_t pairs, double* __restrict v,
                 double* __restrict s, double* __restrict c),
                (w, pairs, v, s, c))
TF_CPU_VARIANTS(uniform_f32, uniform_f32_body,
                (const uint32_t* __restrict w, int64_t n, float lo, float range, float hi,
                 float top, float* __restrict out),
                (w, n, lo, range, hi, top, out))

// ---- kernels ----

template <class T>
void uniform_float_kernel(const RandomUniform& p, T* out, int64_t n) {
  if constexpr (std::is_same_v<T, double>) {
    const double lo = p.minval, hi = p.maxval, range = hi - lo;
    const double top = below(hi);
    for_chunks(n, 2, p.seed, p.seed2, [&](const uint32_t* w, int64_t first, int64_t cnt) {
      double* o = out + first;
      for (int64_t j = 0; j < cnt; ++j) {
        const double v = lo + philox::uniform_double(w[2 * j], w[2 * j + 1]) * range;
        o[j] = v < hi ? v : top;
      }
    });
  } else {
    const float lo = static_cast<float>(p.minval), range = static_cast<float>(p.maxval - p.minval);
    const T hi_t = T(static_cast<float>(p.maxval));
    const float hi = static_cast<float>(hi_t);
    const T top = below(hi_t);
    constexpr int bits = mantissa_bits<T>();
    for_chunks(n, 4, p.seed, p.seed2, [&](const uint32_t* w, int64_t first, int64_t cnt) {
      T* o = out + first;
      if constexpr (std::is_same_v<T, float>) {
        TF_CPU_DISPATCH(uniform_f32, w, cnt, lo, range, hi, top, o);
      } else {
        for (int64_t j = 0; j < cnt; ++j) {
          const T v = T(lo + philox::uniform_float_bits(w[j], bits) * range);
          o[j] = static_cast<float>(v) < hi ? v : top;
        }
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
    for_chunks(n, 4, p.seed, p.seed2, [&](const uint32_t* w, int64_t first, int64_t cnt) {
      for (int64_t j = 0; j < cnt; ++j) {
        const uint32_t d = full ? w[j] : w[j] % r32;
        out[first + j] = static_cast<int32_t>(static_cast<uint32_t>(base) + d);
      }
    });
  } else {
    for_chunks(n, 2, p.seed, p.seed2, [&](const uint32_t* w, int64_t first, int64_t cnt) {
      for (int64_t j = 0; j < cnt; ++j) {
        const uint64_t d =
            (static_cast<uint64_t>(w[2 * j]) << 32) | static_cast<uint64_t>(w[2 * j + 1]);
        out[first + j] = static_cast<int64_t>(base + (range == 0 ? d : d % range));
      }
    });
  }
}

template <class T>
void normal_kernel(const RandomNormal& p, T* out, int64_t n) {
  if constexpr (std::is_same_v<T, double>) {
    const double mean = p.mean, sd = p.stddev;
    for_chunks(n, 2, p.seed, p.seed2, [&](const uint32_t* w, int64_t first, int64_t cnt) {
      alignas(64) double v[kChunkBlocks], sn[kChunkBlocks], cs[kChunkBlocks];
      const int64_t pairs = (cnt + 1) / 2;  // one block per pair of outputs
      TF_CPU_DISPATCH(box_muller_prepare64, w, pairs, v, sn, cs);
      double* o = out + first;
      const int64_t full = cnt / 2;
      for (int64_t j = 0; j < full; ++j) {
        const double r = std::sqrt(v[j]);
        o[2 * j] = mean + sd * (r * cs[j]);
        o[2 * j + 1] = mean + sd * (r * sn[j]);
      }
      if (cnt % 2) o[cnt - 1] = mean + sd * (std::sqrt(v[full]) * cs[full]);
    });
  } else {
    const float mean = static_cast<float>(p.mean), sd = static_cast<float>(p.stddev);
    for_chunks(n, 4, p.seed, p.seed2, [&](const uint32_t* w, int64_t first, int64_t cnt) {
      constexpr int64_t kPairs = 2 * kChunkBlocks;
      alignas(64) float v[kPairs], sn[kPairs], cs[kPairs];
      const int64_t pairs = (cnt + 1) / 2;
      TF_CPU_DISPATCH(box_muller_prepare, w, pairs, v, sn, cs);
      // The square root is correctly rounded, vectorised or not (no errno path in this file).
      T* o = out + first;
      const int64_t full = cnt / 2;
      for (int64_t j = 0; j < full; ++j) {
        const float r = std::sqrt(v[j]);
        o[2 * j] = T(mean + sd * (r * cs[j]));
        o[2 * j + 1] = T(mean + sd * (r * sn[j]));
      }
      if (cnt % 2) o[cnt - 1] = T(mean + sd * (std::sqrt(v[full]) * cs[full]));
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
  if (dtype == int32)
    uniform_int_kernel<int32_t>(*this, out[0].data<int32_t>(), n);
  else if (dtype == int64)
    uniform_int_kernel<int64_t>(*this, out[0].data<int64_t>(), n);
  else
    TF_DISPATCH_FLOAT_TYPES(dtype, uniform_float_kernel<T>(*this, out[0].data<T>(), n));
}

}  // namespace tapeflow::prims
