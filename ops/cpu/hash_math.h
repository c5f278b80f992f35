// FarmHash's Fingerprint64 (farmhashna::Hash64, what TF's tf.strings.to_hash_bucket_fast and
// Fingerprint64 use), SipHash-2-4 (TF's StrongKeyedHash, for to_hash_bucket_strong), TF's
// FingerprintCat64 (tf.sparse.cross_hashed) and the decimal text of an int64
// (tf.strings.as_string), shared by the CPU kernels (ops/cpu/hash.cpp) and the CUDA kernels
// (ops/cuda/hash.cu, where they compile as __host__ __device__). Written from the published
// algorithms; the tests pin them to values TF 2.21 printed for strings of 0 to 160 bytes.
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __CUDACC__
#define TF_HASH_HD __host__ __device__ inline
#else
#define TF_HASH_HD inline
#endif

namespace tapeflow::hashing {

// Little-endian loads, as FarmHash's and SipHash's on every machine.
TF_HASH_HD uint64_t fetch64(const unsigned char* p) {
  uint64_t r = 0;
  for (int i = 7; i >= 0; --i) r = (r << 8) | p[i];
  return r;
}
TF_HASH_HD uint64_t fetch32(const unsigned char* p) {
  return uint64_t{p[0]} | (uint64_t{p[1]} << 8) | (uint64_t{p[2]} << 16) | (uint64_t{p[3]} << 24);
}
TF_HASH_HD uint64_t rotr(uint64_t v, int s) {
  return s == 0 ? v : (v >> s) | (v << (64 - s));
}
TF_HASH_HD uint64_t rotl(uint64_t v, int s) {
  return (v << s) | (v >> (64 - s));
}
TF_HASH_HD uint64_t shift_mix(uint64_t v) {
  return v ^ (v >> 47);
}
constexpr uint64_t k0 = 0xc3a5c85c97cb3127ULL;
constexpr uint64_t k1 = 0xb492b66fbe98f273ULL;
constexpr uint64_t k2 = 0x9ae16a3b2f90404fULL;
TF_HASH_HD uint64_t hash_len16(uint64_t u, uint64_t v, uint64_t mul) {
  uint64_t a = (u ^ v) * mul;
  a ^= a >> 47;
  uint64_t b = (v ^ a) * mul;
  b ^= b >> 47;
  return b * mul;
}
// FarmHash's WeakHashLen32WithSeeds.
struct Pair {
  uint64_t first, second;
};
TF_HASH_HD Pair weak32(const unsigned char* s, uint64_t a, uint64_t b) {
  const uint64_t w = fetch64(s), x = fetch64(s + 8), y = fetch64(s + 16), z = fetch64(s + 24);
  a += w;
  b = rotr(b + a + z, 21);
  const uint64_t c = a;
  a += x;
  a += y;
  b += rotr(a, 44);
  return {a + z, b + c};
}
// FarmHash Fingerprint64 of len bytes.
TF_HASH_HD uint64_t fingerprint64(const unsigned char* s, size_t len) {
  if (len <= 16) {
    if (len >= 8) {
      const uint64_t mul = k2 + len * 2;
      const uint64_t a = fetch64(s) + k2, b = fetch64(s + len - 8);
      const uint64_t c = rotr(b, 37) * mul + a, d = (rotr(a, 25) + b) * mul;
      return hash_len16(c, d, mul);
    }
    if (len >= 4) {
      const uint64_t mul = k2 + len * 2;
      return hash_len16(len + (fetch32(s) << 3), fetch32(s + len - 4), mul);
    }
    if (len > 0) {
      const uint32_t y = uint32_t{s[0]} + (uint32_t{s[len >> 1]} << 8);
      const uint32_t z = static_cast<uint32_t>(len) + (uint32_t{s[len - 1]} << 2);
      return shift_mix(y * k2 ^ z * k0) * k2;
    }
    return k2;
  }
  if (len <= 32) {
    const uint64_t mul = k2 + len * 2;
    const uint64_t a = fetch64(s) * k1, b = fetch64(s + 8);
    const uint64_t c = fetch64(s + len - 8) * mul, d = fetch64(s + len - 16) * k2;
    return hash_len16(rotr(a + b, 43) + rotr(c, 30) + d, a + rotr(b + k2, 18) + c, mul);
  }
  if (len <= 64) {
    const uint64_t mul = k2 + len * 2;
    const uint64_t a = fetch64(s) * k2, b = fetch64(s + 8);
    const uint64_t c = fetch64(s + len - 8) * mul, d = fetch64(s + len - 16) * k2;
    const uint64_t y = rotr(a + b, 43) + rotr(c, 30) + d;
    const uint64_t z = hash_len16(y, a + rotr(b + k2, 18) + c, mul);
    const uint64_t e = fetch64(s + 16) * mul, f = fetch64(s + 24);
    const uint64_t g = (y + fetch64(s + len - 32)) * mul, h = (z + fetch64(s + len - 24)) * mul;
    return hash_len16(rotr(e + f, 43) + rotr(g, 30) + h, e + rotr(f + a, 18) + g, mul);
  }
  const uint64_t seed = 81;
  uint64_t x = seed, y = seed * k1 + 113, z = shift_mix(y * k2 + 113) * k2;
  Pair v{0, 0}, w{0, 0};
  x = x * k2 + fetch64(s);
  const unsigned char* end = s + ((len - 1) / 64) * 64;
  const unsigned char* last64 = end + ((len - 1) & 63) - 63;
  do {
    x = rotr(x + y + v.first + fetch64(s + 8), 37) * k1;
    y = rotr(y + v.second + fetch64(s + 48), 42) * k1;
    x ^= w.second;
    y += v.first + fetch64(s + 40);
    z = rotr(z + w.first, 33) * k1;
    v = weak32(s, v.second * k1, x + w.first);
    w = weak32(s + 32, z + w.second, y + fetch64(s + 16));
    const uint64_t t = z;
    z = x;
    x = t;
    s += 64;
  } while (s != end);
  const uint64_t mul = k1 + ((z & 0xff) << 1);
  s = last64;
  w.first += ((len - 1) & 63);
  v.first += w.first;
  w.first += v.first;
  x = rotr(x + y + v.first + fetch64(s + 8), 37) * mul;
  y = rotr(y + v.second + fetch64(s + 48), 42) * mul;
  x ^= w.second * 9;
  y += v.first * 9 + fetch64(s + 40);
  z = rotr(z + w.first, 33) * mul;
  v = weak32(s, v.second * mul, x + w.first);
  w = weak32(s + 32, z + w.second, y + fetch64(s + 16));
  {
    const uint64_t t = z;
    z = x;
    x = t;
  }
  return hash_len16(hash_len16(v.first, w.first, mul) + shift_mix(y) * k0 + z,
                    hash_len16(v.second, w.second, mul) + x, mul);
}
// SipHash-2-4 of len bytes under the 128-bit key (key0, key1).
TF_HASH_HD uint64_t siphash(uint64_t key0, uint64_t key1, const unsigned char* s, size_t len) {
  uint64_t v0 = key0 ^ 0x736f6d6570736575ULL, v1 = key1 ^ 0x646f72616e646f6dULL;
  uint64_t v2 = key0 ^ 0x6c7967656e657261ULL, v3 = key1 ^ 0x7465646279746573ULL;
  auto sip_round = [&]() {
    v0 += v1;
    v1 = rotl(v1, 13);
    v1 ^= v0;
    v0 = rotl(v0, 32);
    v2 += v3;
    v3 = rotl(v3, 16);
    v3 ^= v2;
    v0 += v3;
    v3 = rotl(v3, 21);
    v3 ^= v0;
    v2 += v1;
    v1 = rotl(v1, 17);
    v1 ^= v2;
    v2 = rotl(v2, 32);
  };
  size_t i = 0;
  for (; i + 8 <= len; i += 8) {
    const uint64_t m = fetch64(s + i);
    v3 ^= m;
    sip_round();
    sip_round();
    v0 ^= m;
  }
  uint64_t b = uint64_t(len & 0xff) << 56;
  for (size_t j = 0; i + j < len; ++j) b |= uint64_t{s[i + j]} << (8 * j);
  v3 ^= b;
  sip_round();
  sip_round();
  v0 ^= b;
  v2 ^= 0xff;
  sip_round();
  sip_round();
  sip_round();
  sip_round();
  return v0 ^ v1 ^ v2 ^ v3;
}

// TF's FingerprintCat64: combines two fingerprints (cross_hashed chains the features' values).
TF_HASH_HD uint64_t fingerprint_cat64(uint64_t fp1, uint64_t fp2) {
  constexpr uint64_t kMul = 0xc6a4a7935bd1e995ULL;
  uint64_t r = fp1 ^ kMul;
  r ^= shift_mix(fp2 * kMul) * kMul;
  r *= kMul;
  r = shift_mix(r) * kMul;
  return shift_mix(r);
}

// The decimal text of v as tf.strings.as_string writes it ("-42"), into buf (20 bytes hold
// every int64); returns its length.
TF_HASH_HD int decimal(int64_t v, unsigned char* buf) {
  uint64_t u = v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  unsigned char digits[20];
  int n = 0;
  do {
    digits[n++] = static_cast<unsigned char>('0' + u % 10);
    u /= 10;
  } while (u != 0);
  int len = 0;
  if (v < 0) buf[len++] = '-';
  while (n > 0) buf[len++] = digits[--n];
  return len;
}

}  // namespace tapeflow::hashing
