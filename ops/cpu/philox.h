// Philox-4x32-10, the counter-based generator of Salmon, Moraes, Dror and Shaw, "Parallel random
// numbers: as easy as 1, 2, 3" (SC 2011), as in Random123, TF, JAX and cuRAND: a 128-bit counter
// and a 64-bit key go through ten rounds of two 32x32->64-bit multiplies, giving four 32-bit
// words. Nothing is stateful, so any element of a stream can be computed on its own.
//
// How tapeflow lays out a stream (shared by the CPU kernels and a future CUDA kernel, which is why
// this header depends on <cstdint> only and its functions are plain inline code that can become
// __host__ __device__):
//   key     = seed  (the 64-bit global seed: key[0] = low word, key[1] = high word)
//   counter = {block low, block high, seed2 low, seed2 high}  (seed2 = the 64-bit op seed)
// Block b gives four 32-bit words. 32-bit outputs (float16/bfloat16/float32 uniforms and
// normals, int32 uniforms) use one word each: element i comes from block i / 4. 64-bit outputs
// (float64, int64) use two words each: element i comes from block i / 2. So element i's value
// depends only on (seed, seed2, i), whatever the thread count or device.
#pragma once

#include <cstdint>

namespace tapeflow::philox {

struct Words {
  uint32_t v[4];
};

inline constexpr uint32_t kMul0 = 0xD2511F53u;
inline constexpr uint32_t kMul1 = 0xCD9E8D57u;
inline constexpr uint32_t kWeyl0 = 0x9E3779B9u;  // golden ratio
inline constexpr uint32_t kWeyl1 = 0xBB67AE85u;  // sqrt(3) - 1

// One Philox round: the counter words go through two multiplies and are mixed with the key.
inline void round(uint32_t& c0, uint32_t& c1, uint32_t& c2, uint32_t& c3, uint32_t k0,
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
inline Words philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0,
                           uint32_t k1) {
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
inline Words block(uint64_t seed, uint64_t seed2, uint64_t block) {
  return philox4x32_10(static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
                       static_cast<uint32_t>(seed2), static_cast<uint32_t>(seed2 >> 32),
                       static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

// ---- words to uniform numbers in [0, 1) ----
// The classic mantissa construction (23 random bits as the mantissa of a float in [1, 2), minus
// 1) written as exact arithmetic, so that it needs no bit casts: the result is the same value.

// k * 2^-23 for the top 23 bits k: a float32 in [0, 1 - 2^-23].
inline float uniform_float(uint32_t w) {
  return static_cast<float>(w >> 9) * (1.0f / 8388608.0f);
}
// k * 2^-52 for the top 52 bits of (hi:lo): a float64 in [0, 1 - 2^-52].
inline double uniform_double(uint32_t hi, uint32_t lo) {
  const uint64_t x = (static_cast<uint64_t>(hi) << 32) | lo;
  return static_cast<double>(x >> 12) * (1.0 / 4503599627370496.0);
}
// Top `bits` bits of w scaled to [0, 1): the construction for a format with a `bits`-bit
// mantissa (10 for float16, 7 for bfloat16), so that every value is exact in that format.
inline float uniform_float_bits(uint32_t w, int bits) {
  return static_cast<float>(w >> (32 - bits)) / static_cast<float>(1u << bits);
}

}  // namespace tapeflow::philox
