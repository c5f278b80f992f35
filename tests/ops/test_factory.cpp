// tf::range and tf::constant(value, dtype) against TF's results for values a dtype cannot hold:
// integer ranges are exact in int64 and refuse values outside the dtype, constant follows the
// C++ scalar rule (a value an integer or bool dtype cannot hold exactly is an error), on every
// device under test.
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "ops/factory.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
using tf::testing::check_values;
using tf::testing::require_error;

// range with an explicit integer dtype went through doubles and a saturating cast: uint8 from -3
// wrapped to 253, int32 past INT32_MAX repeated 2147483647, and int64 near 2^63 was empty.
TEST_CASE("range with an integer dtype is exact and refuses values the dtype cannot hold",
          "[cpu][cuda][factory]") {
  const int64_t max64 = std::numeric_limits<int64_t>::max();
  for (auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    require_error([] { tf::range(-3, 3, 1, tf::uint8); },
                  {"[range]", "value -3 cannot be represented exactly as uint8"});
    require_error([] { tf::range(2147483640.0, 2147483657.0, 5, tf::int32); },
                  {"[range]", "value 2147483655 cannot be represented exactly as int32"});
    require_error([] { tf::range(0, 6e9, 3e9, tf::int32); },
                  {"[range]", "value 3000000000", "int32"});
    require_error([] { tf::range(0, 2, 1, tf::bool_); }, {"[range]", "bool"});
    require_error([] { tf::range(0.0, 2.0, 1.0, tf::bool_); }, {"[range]", "bool"});
    // A double argument beyond int64 (9223372036854775801.0 is 2^63 as a double).
    require_error([] { tf::range(9223372036854775801.0, 9223372036854775806.0, 2, tf::int64); },
                  {"[range]", "start", "int64"});
    // Values that fit are exact, including the last ones below a limit the dtype cannot hold.
    const tf::Tensor u = tf::range(250, 256, 1, tf::uint8);
    CHECK(u.dtype() == tf::uint8);
    CHECK(u.numpy<uint8_t>() == std::vector<uint8_t>{250, 251, 252, 253, 254, 255});
    CHECK(tf::range(2147483640, 2147483647, 5, tf::int32).numpy<int32_t>() ==
          std::vector<int32_t>{2147483640, 2147483645});
    CHECK(tf::range(-2147483648LL, -2147483646LL, 1, tf::int32).numpy<int32_t>() ==
          std::vector<int32_t>{-2147483647 - 1, -2147483647});
    // int64 arguments beyond 2^53 (TF: [...801, ...803, ...805]).
    const tf::Tensor big = tf::range(max64 - 6, max64 - 1, int64_t{2}, tf::int64);
    CHECK(big.numpy<int64_t>() == std::vector<int64_t>{max64 - 6, max64 - 4, max64 - 2});
    CHECK(tf::range(max64 - 2, max64, int64_t{1}, tf::int64).numpy<int64_t>() ==
          std::vector<int64_t>{max64 - 2, max64 - 1});
    CHECK(tf::range(std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::min() + 2,
                    int64_t{1}, tf::int64)
              .numpy<int64_t>() == std::vector<int64_t>{std::numeric_limits<int64_t>::min(),
                                                        std::numeric_limits<int64_t>::min() + 1});
    // A span wider than int64 (counted in uint64).
    CHECK(
        tf::range(std::numeric_limits<int64_t>::min(), max64, max64, tf::int64).numpy<int64_t>() ==
        std::vector<int64_t>{std::numeric_limits<int64_t>::min(), -1, max64 - 1});
    CHECK(tf::range(10, -3, -4, tf::int32).numpy<int32_t>() == std::vector<int32_t>{10, 6, 2, -2});
    CHECK(tf::range(5, 5, 1, tf::uint8).num_elements() == 0);
    // Floating dtypes from integer arguments.
    const tf::Tensor f = tf::range(0, 5, 2, tf::float32);
    CHECK(f.dtype() == tf::float32);
    check_values(f, {0, 2, 4});
    check_values(tf::range(0.0, 6.0, 2.0, tf::int64), {0, 2, 4});
    require_error([] { tf::range(uint64_t{1} << 63, uint64_t{1} << 63, 1); },
                  {"[range]", "9223372036854775808", "int64"});
  }
}

// Without a dtype, C++ integers passed through double: (2^53 + 1) came out as 2^53 and repeated.
TEST_CASE("range of C++ integers beyond 2^53 is exact", "[cpu][cuda][factory]") {
  const int64_t p53 = int64_t{1} << 53;
  for (auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    const tf::Tensor r = tf::range(p53 + 1, p53 + 5, int64_t{1});
    CHECK(r.dtype() == tf::int64);
    CHECK(r.numpy<int64_t>() == std::vector<int64_t>{p53 + 1, p53 + 2, p53 + 3, p53 + 4});
    // int32 while the values fit (the documented rule), int64 beyond.
    CHECK(tf::range(int64_t{0}, int64_t{5}).dtype() == tf::int32);
    CHECK(tf::range(-2147483648LL, -2147483647LL).dtype() == tf::int32);
    CHECK(tf::range(2147483647LL, 2147483649LL).dtype() == tf::int64);
    check_values(tf::range(3), {0, 1, 2});
  }
}

// constant(value, dtype) converted like tf::cast: 2.5 to int32 gave 2, NaN 0, 3e9 saturated to
// 2147483647 (where tf::cast wraps) and 2 to bool gave true. It now follows the C++ scalar rule.
TEST_CASE("constant with a dtype refuses values the dtype cannot hold exactly",
          "[cpu][cuda][factory]") {
  for (auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    require_error([] { tf::constant(2.5f, tf::int32); },
                  {"[constant]", "value 2.5 cannot be represented exactly as int32"});
    require_error([] { tf::constant(std::nan(""), tf::int32); }, {"[constant]", "nan", "int32"});
    require_error([] { tf::constant(int64_t{3000000000}, tf::int32); },
                  {"[constant]", "value 3000000000", "int32"});
    require_error([] { tf::constant(2, tf::bool_); }, {"[constant]", "value 2", "bool"});
    require_error([] { tf::constant(-1, tf::uint8); }, {"[constant]", "value -1", "uint8"});
    require_error([] { tf::constant(256.0, tf::uint8); }, {"[constant]", "256", "uint8"});
    require_error([] { tf::constant(1e300, tf::int64); }, {"[constant]", "1e+300", "int64"});
    // Every element of a tensor is checked.
    require_error(
        [] {
          tf::constant(tf::constant({1.0f, 2.0f, 2.5f}), tf::int32);
        },
        {"[constant]", "2.5"});
    // Values the dtype holds convert; floating dtypes take any value, rounded.
    const tf::Tensor i = tf::constant(3.0, tf::int32);
    CHECK(i.dtype() == tf::int32);
    CHECK(i.item<int32_t>() == 3);
    CHECK(tf::constant(int64_t{-2147483647 - 1}, tf::int32).item<int32_t>() == -2147483647 - 1);
    CHECK(tf::constant(tf::constant({7}), tf::int64).item<int64_t>() == 7);
    CHECK(tf::constant(1, tf::bool_).item<bool>());
    CHECK_FALSE(tf::constant(0.0f, tf::bool_).item<bool>());
    CHECK(tf::constant(true, tf::int32).item<int32_t>() == 1);
    CHECK(tf::constant(255, tf::uint8).item<uint8_t>() == 255);
    check_values(tf::constant(2.5, tf::float16), {2.5});
    check_values(tf::constant(0.1, tf::float32), {0.1}, 1e-7);
    CHECK(std::isnan(tf::constant(std::nan(""), tf::float32).item<float>()));
    CHECK(tf::constant(int64_t{3000000000}, tf::float32).item<float>() == 3e9f);
    CHECK(tf::constant(tf::constant({1.0, 2.0}), tf::int64).numpy<int64_t>() ==
          std::vector<int64_t>{1, 2});
    // tf::cast still converts with truncation and wrapping.
    CHECK(tf::cast(tf::constant({2.5f}), tf::int32).numpy<int32_t>() == std::vector<int32_t>{2});
  }
}
