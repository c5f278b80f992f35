// CRC-32C (core/crc32c.h): the published check values, the hardware path against the table, and
// extending a CRC piece by piece.
#include <cstdint>
#include <numeric>
#include <string_view>
#include <vector>

#include "core/crc32c.h"
#include "support/testing.h"

namespace tf = tapeflow;
using tf::detail::crc32c;
using tf::detail::crc32c_extend;
using tf::detail::crc32c_extend_portable;

TEST_CASE("crc32c: the check values of RFC 3720 and the usual test string", "[cpu]") {
  std::vector<uint8_t> b(32, 0);
  CHECK(crc32c(b.data(), b.size()) == 0x8A9136AAu);
  std::fill(b.begin(), b.end(), uint8_t{0xFF});
  CHECK(crc32c(b.data(), b.size()) == 0x62A8AB43u);
  std::iota(b.begin(), b.end(), uint8_t{0});
  CHECK(crc32c(b.data(), b.size()) == 0x46DD794Eu);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(31 - i);
  CHECK(crc32c(b.data(), b.size()) == 0x113FDB5Cu);
  const std::string_view digits = "123456789";
  CHECK(crc32c(digits.data(), digits.size()) == 0xE3069283u);
  CHECK(crc32c_extend_portable(0, digits.data(), digits.size()) == 0xE3069283u);
  CHECK(crc32c(nullptr, 0) == 0u);
}

TEST_CASE("crc32c: the hardware and table paths agree at every length and split", "[cpu]") {
  std::vector<uint8_t> b(300);
  uint32_t x = 12345;
  for (auto& v : b) v = static_cast<uint8_t>((x = x * 1103515245u + 12345u) >> 24);
  for (size_t n = 0; n <= b.size(); n += (n < 40 ? 1 : 37)) {
    const uint32_t whole = crc32c(b.data(), n);
    CHECK(crc32c_extend_portable(0, b.data(), n) == whole);
    // An odd start address as well (the word loads are unaligned).
    if (n > 1) CHECK(crc32c(b.data() + 1, n - 1) == crc32c_extend_portable(0, b.data() + 1, n - 1));
    for (size_t split = 0; split <= n; split += 7) {
      CHECK(crc32c_extend(crc32c(b.data(), split), b.data() + split, n - split) == whole);
      CHECK(crc32c_extend_portable(crc32c_extend_portable(0, b.data(), split), b.data() + split,
                                   n - split) == whole);
    }
  }
}
