// Philox-4x32-10, the counter-based generator of Salmon, Moraes, Dror and Shaw, "Parallel random
// numbers: as easy as 1, 2, 3" (SC 2011), as in Random123, TF, JAX and cuRAND: a 128-bit counter
// and a 64-bit key go through ten rounds of two 32x32->64-bit multiplies, giving four 32-bit
// words. Nothing is stateful, so any element of a stream can be computed on its own.
//
// How tapeflow lays out a stream (shared by the CPU kernels and the CUDA kernels of
// ops/cuda/random.cu, which is why this header depends on <cstdint> only and every function is
// TF_PHILOX_HD: __host__ __device__ under nvcc, nothing for g++):
//   key     = seed  (the 64-bit global seed: key[0] = low word, key[1] = high word)
//   counter = {block low, block high, seed2 low, seed2 high}  (seed2 = the 64-bit op seed)
// Block b gives four 32-bit words. 32-bit outputs (float16/bfloat16/float32 uniforms and
// normals, int32 uniforms) use one word each: element i comes from block i / 4. 64-bit outputs
// (float64, int64) use two words each: element i comes from block i / 2. So element i's value
// depends only on (seed, seed2, i), whatever the thread count or device.
//
// Uniforms: minval + u * (maxval - minval) with u from uniform_float (uniform_double for
// float64, uniform_float_bits for the half types), in float32 (float64 for float64), a value that
// rounds to maxval replaced by the largest one below it.
// Normals (float16/bfloat16/float32): Box-Muller on words (2k, 2k + 1) of a block, with the
// branch-free polynomials log_unit and sincos_2pi below (vectorisable; libm's scalar logf and
// sincosf dominated the time):
//   v = -2 * log_unit(1 - uniform_float(w[2k]))      (1 - u lies in (0, 1]: never log(0))
//   sincos_2pi(uniform_float(w[2k + 1]), s, c)
//   z[2k] = mean + stddev * (sqrt(v) * c),  z[2k + 1] = mean + stddev * (sqrt(v) * s)
// All of it is plain IEEE float arithmetic, so it gives the same bits on every machine and
// device as long as no multiply-add is fused: GCC fuses by default when the target has FMA
// (e.g. the AVX2/AVX-512 variants of the CPU kernels), so this header and ops/cpu/random.cpp turn
// contraction off; nvcc fuses by default too (-fmad=true) and has no pragma against it, so the
// float arithmetic below goes through mul_rn/add_rn/sub_rn, which are the plain operators on the
// host and __fmul_rn/__fadd_rn/__fsub_rn (never fused) on the device; the CUDA kernels use those
// too, and __fsqrt_rn for the square root. float64 normals use tapeflow's vectorised float64
// log/sin/cos on the CPU (ops/cpu/unary_ops.h, without contraction: the same bits on every CPU)
// and CUDA's on a GPU, so the two devices may differ in the last bits.
#pragma once

#include <cstdint>

#if defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__)
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
#define TF_PHILOX_POP_OPTIONS 1
#endif

// Host and device qualifiers for nvcc; nothing for the host compiler.
#if defined(__CUDACC__)
#define TF_PHILOX_HD __host__ __device__
#else
#define TF_PHILOX_HD
#endif

namespace tapeflow::philox {

// Unfused float arithmetic (see the top of this file): one rounding per operation everywhere.
TF_PHILOX_HD inline float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
TF_PHILOX_HD inline float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
TF_PHILOX_HD inline float sub_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}

struct Words {
  uint32_t v[4];
};

inline constexpr uint32_t kMul0 = 0xD2511F53u;
inline constexpr uint32_t kMul1 = 0xCD9E8D57u;
inline constexpr uint32_t kWeyl0 = 0x9E3779B9u;  // golden ratio
inline constexpr uint32_t kWeyl1 = 0xBB67AE85u;  // sqrt(3) - 1

// One Philox round: the counter words go through two multiplies and are mixed with the key.
TF_PHILOX_HD inline void round(uint32_t& c0, uint32_t& c1, uint32_t& c2, uint32_t& c3, uint32_t k0,
                               uint32_t k1) {
  const uint64_t p0 = static_cast<uint64_t>(kMul0) * c0;
  const uint64_t p1 = static_cast<uint64_t>(kMul1) * c2;
  const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
  const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
  const uint32_t n0 = hi1 ^ c1 ^ k0;
  const uint32_t n2 = hi0 ^ c3 ^ k1;
  c0 = n0;
  c1 = lo1;
  c2 = n2;
  c3 = lo0;
}

// Philox-4x32 with ten rounds; the key is bumped by the Weyl constants between rounds.
TF_PHILOX_HD inline Words philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3,
                                        uint32_t k0, uint32_t k1) {
  for (int r = 0; r < 10; ++r) {
    if (r > 0) {
      k0 += kWeyl0;
      k1 += kWeyl1;
    }
    round(c0, c1, c2, c3, k0, k1);
  }
  return Words{{c0, c1, c2, c3}};
}

// Block `block` of the stream (seed, seed2) in tapeflow's layout (see the top of this file).
TF_PHILOX_HD inline Words block(uint64_t seed, uint64_t seed2, uint64_t block) {
  return philox4x32_10(static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
                       static_cast<uint32_t>(seed2), static_cast<uint32_t>(seed2 >> 32),
                       static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

// ---- words to uniform numbers in [0, 1) ----
// The classic mantissa construction (23 random bits as the mantissa of a float in [1, 2), minus
// 1) written as exact arithmetic, so that it needs no bit casts: the result is the same value.

// k * 2^-23 for the top 23 bits k: a float32 in [0, 1 - 2^-23].
TF_PHILOX_HD inline float uniform_float(uint32_t w) {
  return static_cast<float>(w >> 9) * (1.0f / 8388608.0f);
}
// k * 2^-52 for the top 52 bits k of (hi:lo): a float64 in [0, 1 - 2^-52], as (1 + k 2^-52) - 1
// with 1 + k 2^-52 built from the bits (both steps exact): AVX2 has no 64-bit integer to double
// conversion, and with one the CPU's float64 loops would not vectorise there.
TF_PHILOX_HD inline double uniform_double(uint32_t hi, uint32_t lo) {
  union {
    uint64_t u;
    double d;
  } v;
  v.u = (((static_cast<uint64_t>(hi) << 32) | lo) >> 12) | 0x3ff0000000000000ull;
  return v.d - 1.0;
}
// Top `bits` bits of w scaled to [0, 1): the construction for a format with a `bits`-bit
// mantissa (10 for float16, 7 for bfloat16), so that every value is exact in that format.
TF_PHILOX_HD inline float uniform_float_bits(uint32_t w, int bits) {
  return static_cast<float>(w >> (32 - bits)) / static_cast<float>(1u << bits);
}

// ---- float32 Box-Muller pieces ----

// Bit casts through a union: defined behaviour in GCC, Clang and NVCC (and no <cstring>).
TF_PHILOX_HD inline uint32_t float_bits(float f) {
  union {
    float f;
    uint32_t u;
  } v;
  v.f = f;
  return v.u;
}
TF_PHILOX_HD inline float bits_float(uint32_t u) {
  union {
    uint32_t u;
    float f;
  } v;
  v.u = u;
  return v.f;
}

// log(x) for a normal float x in (0, 1] (Cephes' logf polynomial).
TF_PHILOX_HD inline float log_unit(float x) {
  const uint32_t b = float_bits(x);
  float e = static_cast<float>(static_cast<int32_t>(b >> 23) - 126);
  float m = bits_float((b & 0x007fffffu) | 0x3f000000u);  // [0.5, 1)
  // Below sqrt(1/2): use 2m and e - 1, so that m - 1 lies in [sqrt(1/2) - 1, sqrt(2) - 1].
  const uint32_t small = 0u - static_cast<uint32_t>(m < 0.70710678118654752440f);
  e = sub_rn(e, bits_float(float_bits(1.0f) & small));
  m = add_rn(sub_rn(m, 1.0f), bits_float(float_bits(m) & small));
  const float z = mul_rn(m, m);
  float y = 7.0376836292e-2f;
  y = sub_rn(mul_rn(y, m), 1.1514610310e-1f);
  y = add_rn(mul_rn(y, m), 1.1676998740e-1f);
  y = sub_rn(mul_rn(y, m), 1.2420140846e-1f);
  y = add_rn(mul_rn(y, m), 1.4249322787e-1f);
  y = sub_rn(mul_rn(y, m), 1.6668057665e-1f);
  y = add_rn(mul_rn(y, m), 2.0000714765e-1f);
  y = sub_rn(mul_rn(y, m), 2.4999993993e-1f);
  y = add_rn(mul_rn(y, m), 3.3333331174e-1f);
  y = mul_rn(mul_rn(y, m), z);
  y = add_rn(y, mul_rn(-2.12194440e-4f, e));
  y = add_rn(y, mul_rn(-0.5f, z));
  return add_rn(add_rn(m, y), mul_rn(0.693359375f, e));
}

// sin(2 pi t) and cos(2 pi t) for t in [0, 1): exact reduction to a quadrant (t - q / 4 is exact
// for the 23-bit t values used here), then Cephes' sinf/cosf polynomials on [-pi/4, pi/4].
TF_PHILOX_HD inline void sincos_2pi(float t, float& s, float& c) {
  const int32_t q = static_cast<int32_t>(add_rn(mul_rn(t, 4.0f), 0.5f));  // 0..4
  const float x = mul_rn(sub_rn(t, mul_rn(static_cast<float>(q), 0.25f)), 6.28318530717958647692f);
  const float z = mul_rn(x, x);
  float ps = -1.9515295891e-4f;
  ps = add_rn(mul_rn(ps, z), 8.3321608736e-3f);
  ps = sub_rn(mul_rn(ps, z), 1.6666654611e-1f);
  const float sn = add_rn(mul_rn(mul_rn(ps, z), x), x);
  float pc = 2.443315711809948e-5f;
  pc = sub_rn(mul_rn(pc, z), 1.388731625493765e-3f);
  pc = add_rn(mul_rn(pc, z), 4.166664568298827e-2f);
  const float cs = add_rn(sub_rn(mul_rn(mul_rn(pc, z), z), mul_rn(0.5f, z)), 1.0f);
  const int32_t k = q & 3;
  const uint32_t swap = 0u - static_cast<uint32_t>(k & 1);  // quadrants 1 and 3 swap sin, cos
  const uint32_t sb = float_bits(sn), cb = float_bits(cs);
  const float s_abs = bits_float((cb & swap) | (sb & ~swap));
  const float c_abs = bits_float((sb & swap) | (cb & ~swap));
  // Signs: sin < 0 in quadrants 2 and 3, cos < 0 in quadrants 1 and 2 (flipped as sign bits).
  s = bits_float(float_bits(s_abs) ^ (static_cast<uint32_t>(k >> 1) << 31));
  c = bits_float(float_bits(c_abs) ^ (static_cast<uint32_t>(((k + 1) >> 1) & 1) << 31));
}

}  // namespace tapeflow::philox

#ifdef TF_PHILOX_POP_OPTIONS
#pragma GCC pop_options
#undef TF_PHILOX_POP_OPTIONS
#endif
