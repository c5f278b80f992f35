// Stable hashes, the same in every process and on every machine.
#pragma once

#include <cstdint>
#include <string_view>

namespace tapeflow::detail {

// FNV-1a over bytes, for comparing facts across processes (a GPU's UUID, what the workers of a
// job all-reduce).
inline uint64_t fnv1a(std::string_view bytes) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ull;
  return h;
}

// splitmix64's finalizer: a bijection of 64-bit words that spreads every input bit over every
// output bit (seeds derived from counters, hash of a seed pair).
constexpr uint64_t splitmix64_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// splitmix64's golden-ratio increment.
inline constexpr uint64_t kSplitmix64Gamma = 0x9E3779B97F4A7C15ull;

// The next draw of splitmix64, a small generator that gives the same sequence on every platform
// (std::uniform_int_distribution differs between standard libraries): advances `state`.
constexpr uint64_t splitmix64_next(uint64_t& state) {
  return splitmix64_mix(state += kSplitmix64Gamma);
}

}  // namespace tapeflow::detail
