#include <bit>
#include <cmath>
#include <cstdint>
#include <sstream>

#include "core/allocator.h"
#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/shape.h"
#include "core/tensor.h"
#include "ops/factory.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
using tf::testing::check_values;

TEST_CASE("dtype names and sizes follow TF", "[cpu]") {
  CHECK(tf::dtype_name(tf::float32) == "float32");
  CHECK(tf::dtype_name(tf::bool_) == "bool");
  CHECK(tf::dtype_name(tf::bfloat16) == "bfloat16");
  CHECK(tf::dtype_name(tf::uint8) == "uint8");
  CHECK(tf::dtype_size(tf::float16) == 2);
  CHECK(tf::dtype_size(tf::int64) == 8);
  CHECK(tf::is_floating(tf::bfloat16));
  CHECK_FALSE(tf::is_floating(tf::int32));
  std::ostringstream os;
  os << tf::float64;
  CHECK(os.str() == "float64");
}

TEST_CASE("float16 and bfloat16 round to nearest even", "[cpu]") {
  CHECK(float(tf::half_t(1.0f)) == 1.0f);
  CHECK(float(tf::half_t(65504.0f)) == 65504.0f);
  CHECK(std::isinf(float(tf::half_t(65520.0f))));
  CHECK(float(tf::half_t(5.9604645e-08f)) == 5.9604645e-08f);  // smallest subnormal
  CHECK(float(tf::half_t(2.9802322e-08f)) == 0.0f);           // tie rounds to even (zero)
  CHECK(float(tf::half_t(1.0f + 1.0f / 2048)) == 1.0f);        // tie to even
  CHECK(float(tf::half_t(1.0f + 3.0f / 2048)) == 1.0f + 2.0f / 1024);
  CHECK(std::isnan(float(tf::half_t(NAN))));
  CHECK(float(tf::bfloat16_t(1.0f)) == 1.0f);
  CHECK(float(tf::bfloat16_t(3.140625f)) == 3.140625f);
  CHECK(float(tf::bfloat16_t(1.00390625f)) == 1.0f);  // tie to even
  for (int i = -1000; i < 1000; ++i) {
    const float f = static_cast<float>(i) / 8.0f;
    CHECK(float(tf::half_t(f)) == f);
  }
}

// The value of float16 bits h, from its fields (double arithmetic).
double half_value(uint16_t h) {
  const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  const double mag = e == 0    ? std::ldexp(m, -24)
                     : e == 31 ? (m ? std::nan("") : HUGE_VAL)
                               : std::ldexp(1024 + m, e - 25);
  return h & 0x8000 ? -mag : mag;
}
// The float16 nearest to x, ties to even, overflow to infinity (double arithmetic).
double nearest_half(double x) {
  const double a = std::abs(x);
  if (a >= 65520.0) return std::copysign(HUGE_VAL, x);
  const int e = a < std::ldexp(1.0, -14) ? -14 : std::ilogb(a);
  const double step = std::ldexp(1.0, e - 10);
  return std::copysign(std::nearbyint(a / step) * step, x);
}

TEST_CASE("float16 conversions are exact both ways and round ties to even", "[cpu]") {
  int64_t wrong = 0, checked = 0;
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = tf::half_t::to_float(static_cast<uint16_t>(h));
    const double want = half_value(static_cast<uint16_t>(h));
    if (std::isnan(want)) {
      wrong += !std::isnan(f) || tf::half_t::from_float(f) != ((h & 0x8000) | 0x7e00);
      continue;
    }
    wrong += double{f} != want || std::signbit(f) != ((h & 0x8000) != 0);
    wrong += tf::half_t::from_float(f) != h;  // every half round-trips
    // The midpoint to the next half of larger magnitude, and the floats either side of it.
    if ((h & 0x7fff) < 0x7bff) {
      const double mid = (want + half_value(static_cast<uint16_t>(h + 1))) / 2;
      const float fm = static_cast<float>(mid);  // exact: halves have 11 significant bits
      for (float v : {fm, std::nextafter(fm, 0.0f), std::nextafter(fm, 2 * fm)}) {
        const float got = tf::half_t::to_float(tf::half_t::from_float(v));
        wrong += double{got} != nearest_half(v);
        ++checked;
      }
    }
  }
  // Floats spread over every exponent, NaN patterns included.
  for (uint64_t b = 0; b < (uint64_t{1} << 32); b += 65521) {
    const float v = std::bit_cast<float>(static_cast<uint32_t>(b));
    const float got = tf::half_t::to_float(tf::half_t::from_float(v));
    if (std::isnan(v)) wrong += !std::isnan(got);
    else wrong += double{got} != nearest_half(v) || std::signbit(got) != std::signbit(v);
    ++checked;
  }
  CHECK(checked > 150000);
  CHECK(wrong == 0);
}

TEST_CASE("TensorShape prints as a Python tuple", "[cpu]") {
  CHECK(tf::TensorShape({2, 3}).to_string() == "(2, 3)");
  CHECK(tf::TensorShape({5}).to_string() == "(5,)");
  CHECK(tf::TensorShape{}.to_string() == "()");
  CHECK(tf::TensorShape({tf::None, 784}).to_string() == "(None, 784)");
  CHECK(tf::TensorShape({2, 3, 4}).num_elements() == 24);
  CHECK(tf::TensorShape{}.num_elements() == 1);
  CHECK(tf::TensorShape({tf::None, 3}).num_elements() == -1);
  CHECK(tf::TensorShape({2, 3}) == tf::TensorShape({2, 3}));
  CHECK(tf::TensorShape({2, 3}) != tf::TensorShape({3, 2}));
  CHECK(tf::TensorShape({2, 3}).dim(-1) == 3);
  TF_REQUIRE_THROWS_CONTAINING(tf::TensorShape({1, 1, 1, 1, 1, 1, 1, 1, 1}),
                               tf::InvalidArgumentError, "maximum rank 8");
  TF_REQUIRE_THROWS_CONTAINING(tf::TensorShape({2, -3}), tf::InvalidArgumentError, "negative");
  TF_REQUIRE_THROWS_CONTAINING(tf::TensorShape({2, 3}).dim(2), tf::InvalidArgumentError,
                               "out of range");
}

TEST_CASE("TensorShape refuses element counts an int64 cannot hold", "[cpu]") {
  const int64_t big = int64_t{1} << 40;
  // 2^80 wraps to exactly 0 in int64: a count computed without overflow checks would pass.
  TF_REQUIRE_THROWS_CONTAINING(tf::TensorShape({big, big}), tf::InvalidArgumentError,
                               "more elements than an int64 can count");
  // Strides of the non-zero dimensions would overflow even when another dimension is 0.
  TF_REQUIRE_THROWS_CONTAINING(tf::TensorShape({0, big, big}), tf::InvalidArgumentError,
                               "[TensorShape]");
  TF_REQUIRE_THROWS_CONTAINING(tf::TensorShape({big, tf::None, big}), tf::InvalidArgumentError,
                               "int64");
  CHECK(tf::TensorShape({0, big, 1 << 20}).num_elements() == 0);
  CHECK(tf::TensorShape({big, 1 << 22}).num_elements() == int64_t{1} << 62);
  // A shape grown past the limit through push_back fails when its elements are counted.
  tf::TensorShape grown({big});
  grown.push_back(big);
  TF_REQUIRE_THROWS_CONTAINING(grown.num_elements(), tf::InvalidArgumentError, "int64");
}

TEST_CASE("allocations beyond the machine or size_t fail cleanly, naming the op", "[cpu]") {
  // More than RAM and swap: refused before malloc (a sanitizer's allocator would abort).
  const size_t too_big = tf::detail::host_memory_bytes() + 1;
  TF_REQUIRE_THROWS_CONTAINING(tf::cpu_allocator().allocate(too_big),
                               tf::ResourceExhaustedError, "more than this machine's memory");
  TF_REQUIRE_THROWS_CONTAINING(tf::zeros({int64_t{1} << 40, 1 << 20}), tf::ResourceExhaustedError,
                               "[zeros]");
  // 2^62 float32 elements need 2^64 bytes: the byte count itself overflows size_t.
  TF_REQUIRE_THROWS_CONTAINING(tf::ones({int64_t{1} << 62}), tf::ResourceExhaustedError,
                               "size_t");
  TF_REQUIRE_THROWS_CONTAINING(tf::eye(int64_t{1} << 40), tf::InvalidArgumentError, "[eye]");
  TF_REQUIRE_THROWS_CONTAINING(tf::eye(int64_t{1} << 30), tf::ResourceExhaustedError, "[eye]");
  // The allocator's statistics are unchanged by the refusals.
  const auto stats = tf::cpu_allocator().stats();
  CHECK_THROWS_AS(tf::ones({int64_t{1} << 45}), tf::ResourceExhaustedError);
  CHECK(tf::cpu_allocator().stats().bytes_in_use == stats.bytes_in_use);
}

TEST_CASE("device names parse case-insensitively", "[cpu]") {
  using tf::Device;
  using tf::DeviceType;
  CHECK(Device::parse("/device:GPU:1") == Device{DeviceType::GPU, 1});
  CHECK(Device::parse("/gpu:0") == Device{DeviceType::GPU, 0});
  CHECK(Device::parse("GPU:0") == Device{DeviceType::GPU, 0});
  CHECK(Device::parse("cpu") == Device{DeviceType::CPU, 0});
  CHECK(Device::parse("/job:localhost/replica:0/task:0/device:CPU:0") ==
        Device{DeviceType::CPU, 0});
  CHECK(Device{DeviceType::GPU, 1}.to_string() == "/device:GPU:1");
  TF_REQUIRE_THROWS_CONTAINING(Device::parse("/tpu:0"), tf::InvalidArgumentError,
                               "cannot parse device name");
  TF_REQUIRE_THROWS_CONTAINING(Device::parse("/cpu:x"), tf::InvalidArgumentError, "index");
}

TEST_CASE("device scopes place new tensors and nest", "[cpu]") {
  CHECK(tf::zeros({2}).device() == (tf::testing::has_gpu() ? "/device:GPU:0" : "/device:CPU:0"));
  {
    tf::DeviceScope scope("/cpu:0");
    CHECK(tf::zeros({2}).device() == "/device:CPU:0");
  }
  if (!tf::testing::has_gpu()) {
    // Soft placement: a missing GPU falls back to the CPU.
    tf::DeviceScope scope("/GPU:0");
    CHECK(tf::zeros({2}).device() == "/device:CPU:0");
  }
  TF_REQUIRE_THROWS_CONTAINING(tf::DeviceScope("/cpu:7"), tf::InvalidArgumentError,
                               "/device:CPU:7 does not exist");
}

TEST_CASE("physical and logical devices are listed as TF lists them", "[cpu]") {
  auto cpus = tf::config::list_physical_devices("CPU");
  REQUIRE(cpus.size() == 1);
  CHECK(cpus[0].name == "/physical_device:CPU:0");
  CHECK(cpus[0].device_type == "CPU");
  auto logical = tf::config::list_logical_devices("cpu");
  REQUIRE(logical.size() >= 1);
  CHECK(logical[0].name == "/device:CPU:0");
  // A made-up physical device whose index is not a number (std::stoi threw std::invalid_argument).
  TF_REQUIRE_THROWS_CONTAINING(
      tf::config::set_logical_device_configuration({"/physical_device:CPU:x", "CPU"}, {{}}),
      tf::InvalidArgumentError, "is not a physical CPU device");
  TF_REQUIRE_THROWS_CONTAINING(
      tf::config::set_logical_device_configuration({"/physical_device:CPU:99999999999", "CPU"},
                                                   {{}}),
      tf::InvalidArgumentError, "not a number");
  // After the first op the configuration is frozen.
  (void)tf::zeros({1});
  TF_REQUIRE_THROWS_CONTAINING(
      tf::config::set_logical_device_configuration(cpus[0], {{}, {}}),
      tf::FailedPreconditionError, "cannot be modified after being initialized");
}

TEST_CASE("the CPU allocator caches and reports statistics", "[cpu]") {
  auto& a = tf::cpu_allocator();
  auto before = a.stats();
  void* p = a.allocate(1000);
  REQUIRE(p != nullptr);
  CHECK(reinterpret_cast<uintptr_t>(p) % 64 == 0);
  CHECK(a.stats().bytes_in_use == before.bytes_in_use + 1000);
  a.deallocate(p, 1000);
  CHECK(a.stats().bytes_in_use == before.bytes_in_use);
  void* q = a.allocate(1000);  // same size class: served from the cache
  CHECK(q == p);
  CHECK(a.stats().num_cache_hits >= before.num_cache_hits + 1);
  a.deallocate(q, 1000);
  a.reset_peak();
  void* big = a.allocate(size_t{1} << 20);
  CHECK(a.stats().peak_bytes_in_use >= (int64_t{1} << 20));
  a.deallocate(big, size_t{1} << 20);
}

TEST_CASE("factories make the documented values and dtypes", "[cpu]") {
  auto z = tf::zeros({2, 3});
  CHECK(z.dtype() == tf::float32);
  CHECK(z.shape() == tf::TensorShape({2, 3}));
  check_values(z, std::vector<double>(6, 0.0));
  check_values(tf::ones({2}, tf::int64), {1, 1});
  CHECK(tf::ones({2}, tf::int64).dtype() == tf::int64);
  auto f = tf::fill({2, 2}, 7.0f);
  CHECK(f.dtype() == tf::float32);
  check_values(f, {7, 7, 7, 7});
  check_values(tf::eye(3), {1, 0, 0, 0, 1, 0, 0, 0, 1});
  check_values(tf::eye(2, 3, tf::int32), {1, 0, 0, 0, 1, 0});
  auto r = tf::range(0, 10, 3);
  CHECK(r.dtype() == tf::int32);
  check_values(r, {0, 3, 6, 9});
  auto rf = tf::range(0.0, 1.0, 0.25);
  CHECK(rf.dtype() == tf::float32);
  check_values(rf, {0, 0.25, 0.5, 0.75});
  check_values(tf::range(4), {0, 1, 2, 3});
  check_values(tf::range(5, 1, -2), {5, 3});
  // Integers beyond int32 give int64 (TF's Python ints do), not wrapped int32 values.
  auto big = tf::range(int64_t{0}, int64_t{6000000000}, int64_t{2000000000});
  CHECK(big.dtype() == tf::int64);
  CHECK(big.numpy<int64_t>() == std::vector<int64_t>{0, 2000000000, 4000000000});
  // The dtype follows the C++ types, as TF's follows Python's: any floating argument gives
  // float32, even with whole values.
  CHECK(tf::range(0, 6e9, 2e9).dtype() == tf::float32);
  CHECK(tf::range(0.0, 5.0).dtype() == tf::float32);
  check_values(tf::range(0.0, 3.0), {0, 1, 2});
  CHECK(tf::range(0, 5).dtype() == tf::int32);
  CHECK(tf::range(int64_t{0}, 5).dtype() == tf::int32);  // int64 only where values need it
  // An integer dtype needs whole arguments (TF would cast delta 0.5 to 0 and fail on it).
  TF_REQUIRE_THROWS_CONTAINING(tf::range(0, 2, 0.5, tf::int32), tf::InvalidArgumentError,
                               "[range] start 0, limit 2 and delta 0.5 must be whole numbers");
  CHECK(tf::range(-2147483647, -2147483640, 5).dtype() == tf::int32);
  TF_REQUIRE_THROWS_CONTAINING(tf::range(0, 1e300, 1e-300), tf::InvalidArgumentError,
                               "[range]");
  // An explicit integer dtype refuses values it cannot hold (never saturated or wrapped).
  TF_REQUIRE_THROWS_CONTAINING(tf::range(0, 6e9, 3e9, tf::int32), tf::InvalidArgumentError,
                               "[range] value 3000000000 cannot be represented exactly as int32");
  check_values(tf::linspace(0, 1, 5), {0, 0.25, 0.5, 0.75, 1});
  CHECK(tf::linspace(0, 1, 0).shape() == tf::TensorShape({0}));  // empty, as TF's
  TF_REQUIRE_THROWS_CONTAINING(tf::linspace(0, 1, -1), tf::InvalidArgumentError,
                               "[linspace] num must not be negative, got -1");
  auto c = tf::constant({{1.f, 2.f}, {3.f, 4.f}});
  CHECK(c.shape() == tf::TensorShape({2, 2}));
  check_values(c, {1, 2, 3, 4});
  auto ci = tf::constant({1, 2, 3});
  CHECK(ci.dtype() == tf::int32);
  auto cs = tf::constant(6.0f);
  CHECK(cs.rank() == 0);
  CHECK_FALSE(cs.is_weak());
  CHECK(tf::constant(2, tf::float64).dtype() == tf::float64);
  std::vector<double> host(9, 0.5);
  auto h = tf::convert_to_tensor(host, {3, 3});
  CHECK(h.dtype() == tf::float64);
  CHECK(h.numpy<double>() == host);
  std::vector<bool> flags{true, false};
  auto b = tf::convert_to_tensor(flags, {2});
  CHECK(b.dtype() == tf::bool_);
  CHECK(b.numpy<bool>() == flags);
  CHECK(tf::zeros_like(c).shape() == c.shape());
  CHECK(tf::ones_like(c, tf::int32).dtype() == tf::int32);
  TF_REQUIRE_THROWS_CONTAINING(tf::constant(std::vector<float>{1, 2, 3}, {2, 2}),
                               tf::InvalidArgumentError, "3 values cannot fill a tensor of shape (2, 2)");
  TF_REQUIRE_THROWS_CONTAINING(tf::range(0, 1, 0), tf::InvalidArgumentError, "delta");
  TF_REQUIRE_THROWS_CONTAINING(tf::fill({2}, tf::constant({1.f, 2.f})), tf::InvalidArgumentError,
                               "scalar");
}

// zeros, ones and fill on every device and dtype: on a GPU the value is copied once and repeated
// by broadcast_to's kernel, so scalars, empty shapes and every element width are covered.
TEST_CASE("factories fill every dtype on every device", "[core][cuda]") {
  for (const tf::Device d : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(d);
    for (const tf::DType t : tf::testing::kAllDTypes) {
      INFO(d.to_string() << " " << tf::dtype_name(t));
      for (const tf::TensorShape& s : {tf::TensorShape{}, tf::TensorShape{0, 3},
                                       tf::TensorShape{3, 1, 5}, tf::TensorShape{4099}}) {
        const auto n = static_cast<size_t>(s.num_elements());
        const tf::Tensor z = tf::zeros(s, t);
        CHECK(z.placement() == d);
        CHECK(z.dtype() == t);
        check_values(z, std::vector<double>(n, 0.0));
        check_values(tf::ones(s, t), std::vector<double>(n, 1.0));
        const tf::Tensor f = tf::fill(s, tf::cast(tf::constant(3.0), t));
        CHECK(f.placement() == d);
        check_values(f, std::vector<double>(n, t == tf::bool_ ? 1.0 : 3.0));
      }
    }
  }
}

TEST_CASE("C++ scalars convert to weak tensors of the documented dtypes", "[cpu]") {
  tf::Tensor f = 2.0f, d = 2.0, i = 3, l = int64_t{4}, b = true;
  CHECK(f.dtype() == tf::float32);
  CHECK(d.dtype() == tf::float64);
  CHECK(i.dtype() == tf::int32);
  CHECK(l.dtype() == tf::int64);
  CHECK(b.dtype() == tf::bool_);
  CHECK(f.is_weak());
  CHECK(i.item<int>() == 3);
  CHECK(l.item<double>() == 4.0);
  tf::Tensor undefined;
  CHECK_FALSE(undefined.defined());
  TF_REQUIRE_THROWS_CONTAINING(tf::constant({1.f, 2.f}).item<float>(), tf::InvalidArgumentError,
                               "one element");
}
