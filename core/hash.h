// FNV-1a over bytes: a stable 64-bit hash, the same in every process and on every machine, for
// comparing facts across processes (a GPU's UUID, what the workers of a job all-reduce).
#pragma once

#include <cstdint>
#include <string_view>

namespace tapeflow::detail {

inline uint64_t fnv1a(std::string_view bytes) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace tapeflow::detail
