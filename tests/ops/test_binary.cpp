// Binary elementwise ops, comparisons, logical ops, where and clip_by_value: every op on every
// accepted dtype and device against a float64 reference with numpy broadcasting written here,
// over same-shape, scalar and broadcast operands, plus TF's dtype rule and the error messages.
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "core/error.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/unary.h"
#include "support/testing.h"
#include "support/ulp.h"

namespace tf = tapeflow;
using tf::testing::contains;
using tf::testing::kAllDTypes;
using tf::testing::require_error;
using tf::testing::rtol_of;
using tf::testing::check_values;

namespace {

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

const std::vector<tf::DType> kNumeric = {tf::float16, tf::bfloat16, tf::float32, tf::float64,
                                         tf::int32,   tf::int64,    tf::uint8};

// numpy broadcasting of shapes and of element lookups, written plainly (div/mod per element).
tf::TensorShape bshape(const std::vector<tf::TensorShape>& shapes) {
  int r = 0;
  for (const auto& s : shapes) r = std::max(r, s.rank());
  std::vector<int64_t> out(r, 1);
  for (const auto& s : shapes)
    for (int i = 0; i < s.rank(); ++i) {
      int64_t& o = out[r - s.rank() + i];
      if (s[i] != 1) o = s[i];
    }
  return tf::TensorShape(out);
}
int64_t source_index(const tf::TensorShape& in, const tf::TensorShape& out, int64_t flat) {
  int64_t idx = 0, stride = 1;
  for (int d = out.rank() - 1; d >= 0; --d) {
    const int64_t coord = flat % out[d];
    flat /= out[d];
    const int j = d - (out.rank() - in.rank());
    if (j >= 0) {
      if (in[j] != 1) idx += coord * stride;
      stride *= in[j];
    }
  }
  return idx;
}
std::vector<double> reference(const std::function<double(double, double)>& f,
                              const std::vector<double>& a, const tf::TensorShape& sa,
                              const std::vector<double>& b, const tf::TensorShape& sb) {
  const auto so = bshape({sa, sb});
  std::vector<double> out(static_cast<size_t>(so.num_elements()));
  for (int64_t i = 0; i < so.num_elements(); ++i)
    out[i] = f(a[source_index(sa, so, i)], b[source_index(sb, so, i)]);
  return out;
}

struct BinaryCase {
  const char* name;
  tf::Tensor (*fn)(const tf::Tensor&, const tf::Tensor&);
  std::function<double(double, double)> ref;
  std::vector<tf::DType> dtypes;
  double lo, hi;        // operand range for floating dtypes
  bool bool_result;
};

double wrap_to(tf::DType d, double v) {
  // Integer results wrap like the hardware (int32 results stay small here; uint8 wraps).
  if (d == tf::uint8) return static_cast<double>(static_cast<uint8_t>(static_cast<int64_t>(v)));
  return v;
}

const std::vector<BinaryCase>& binary_cases() {
  static const std::vector<BinaryCase> cases = {
      {"add", tf::add, [](double a, double b) { return a + b; }, kNumeric, -10, 10, false},
      {"subtract", tf::subtract, [](double a, double b) { return a - b; }, kNumeric, -10, 10,
       false},
      {"multiply", tf::multiply, [](double a, double b) { return a * b; }, kNumeric, -10, 10,
       false},
      {"divide", tf::divide, [](double a, double b) { return a / b; }, kNumeric, 0.5, 10, false},
      {"pow", tf::pow, [](double a, double b) { return std::pow(a, b); }, kNumeric, 0.5, 3, false},
      {"maximum", tf::maximum, [](double a, double b) { return std::max(a, b); }, kNumeric, -10,
       10, false},
      {"minimum", tf::minimum, [](double a, double b) { return std::min(a, b); }, kNumeric, -10,
       10, false},
      // Whole-number operands (see operand()): the quotients' floors are exact in every dtype.
      {"floordiv", tf::floordiv, [](double a, double b) { return std::floor(a / b); }, kNumeric,
       -10, 10, false},
      {"floormod", tf::floormod, [](double a, double b) { return a - std::floor(a / b) * b; },
       kNumeric, -10, 10, false},
      {"equal", tf::equal, [](double a, double b) { return double(a == b); }, kAllDTypes, -2, 2,
       true},
      {"not_equal", tf::not_equal, [](double a, double b) { return double(a != b); }, kAllDTypes,
       -2, 2, true},
      {"less", tf::less, [](double a, double b) { return double(a < b); }, kNumeric, -2, 2, true},
      {"less_equal", tf::less_equal, [](double a, double b) { return double(a <= b); }, kNumeric,
       -2, 2, true},
      {"greater", tf::greater, [](double a, double b) { return double(a > b); }, kNumeric, -2, 2,
       true},
      {"greater_equal", tf::greater_equal, [](double a, double b) { return double(a >= b); },
       kNumeric, -2, 2, true},
      {"logical_and", tf::logical_and, [](double a, double b) { return double(a && b); },
       {tf::bool_}, 0, 1, true},
      {"logical_or", tf::logical_or, [](double a, double b) { return double(a || b); },
       {tf::bool_}, 0, 1, true},
  };
  return cases;
}

bool floors(const BinaryCase& c) {
  return std::string(c.name) == "floordiv" || std::string(c.name) == "floormod";
}
bool divides(const BinaryCase& c) { return std::string(c.name) == "divide" || floors(c); }

// Operand values for dtype d: floats in [lo, hi) (rounded to 1/4 so that comparisons see ties),
// small integers, 0/1 for bool. Exponents of integer pow are non-negative.
std::vector<double> operand(const BinaryCase& c, tf::DType d, int64_t n, unsigned seed,
                            bool exponent) {
  auto v = tf::testing::random_values(static_cast<size_t>(n), c.lo, c.hi, seed);
  for (auto& x : v) {
    if (d == tf::bool_) {
      x = x > (c.lo + c.hi) / 2 ? 1 : 0;
    } else if (tf::is_integer(d)) {
      const bool nonneg = d == tf::uint8 || exponent || c.lo >= 0;
      x = std::floor(nonneg ? std::abs(x) * 2 : x * 2);
      if (exponent) x = std::min(x, 4.0);
      if (divides(c) && x == 0) x = 3;
    } else if (c.bool_result) {
      x = std::round(x * 4) / 4;
    } else if (floors(c)) {
      x = std::floor(x);  // whole numbers in [-10, 10), never 0
      if (x == 0) x = 3;
    }
  }
  return v;
}

struct ShapePair {
  tf::TensorShape a, b;
};
const std::vector<ShapePair>& shape_pairs() {
  static const std::vector<ShapePair> pairs = {
      {{2, 3}, {2, 3}},        // same shape
      {{}, {2, 3}},            // scalar left
      {{2, 3}, {}},            // scalar right
      {{1}, {5}},              // one-element vector left
      {{3, 1}, {4}},           // broadcast both ways
      {{2, 1, 3}, {4, 1}},     // rank 3 x rank 2
      {{}, {2, 3, 4}},         // rank 0 x rank 3
      {{2, 3, 4}, {}},         // rank 3 x rank 0
      {{4, 1, 5}, {4, 3, 5}},  // middle broadcast, inner contiguous
      {{3, 4}, {1, 4}},        // row vector
      {{1, 2, 3}, {2, 3}},     // same elements, different ranks
      {{0, 3}, {3}},           // empty
      {{2, 0}, {1}},           // empty with a scalar-like operand
      {{20, 1, 40}, {1, 90, 40}},  // 72000 elements: the parallel broadcast path
      {{70001}, {70001}},          // parallel same-shape path
      {{70001}, {}},               // parallel scalar path
      {{30000, 3}, {3}},           // short rows: row operand tiled, parallel
      {{5}, {7, 5}},               // short rows, row operand first
      {{10000, 7}, {10000, 1}},    // short rows: column operand, parallel
      {{4, 1}, {4, 3}},            // short rows, column operand first
      {{2, 5, 3}, {3}},            // collapses to (10, 3) x (3)
  };
  return pairs;
}

}  // namespace

TEST_CASE("binary ops match a float64 broadcast reference on every accepted dtype",
          "[cpu][cuda][binary]") {
  for (const auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    for (const auto& c : binary_cases()) {
      for (const auto d : c.dtypes) {
        for (const auto& sp : shape_pairs()) {
          INFO(c.name << " on " << tf::dtype_name(d) << ", shapes " << sp.a.to_string() << " x "
                      << sp.b.to_string() << " on " << dev.to_string());
          const bool is_pow = std::string(c.name) == "pow";
          const auto va = operand(c, d, sp.a.num_elements(), 3, false);
          const auto vb = operand(c, d, sp.b.num_elements(), 4, is_pow);
          const auto a = tf::detail::from_doubles(va, sp.a, d);
          const auto b = tf::detail::from_doubles(vb, sp.b, d);
          const auto y = c.fn(a, b);
          REQUIRE(y.shape() == bshape({sp.a, sp.b}));
          CHECK(y.device() == dev.to_string());
          tf::DType want_dtype = d;
          if (c.bool_result) want_dtype = tf::bool_;
          else if (std::string(c.name) == "divide" && d == tf::uint8) want_dtype = tf::float32;
          else if (std::string(c.name) == "divide" && tf::is_integer(d)) want_dtype = tf::float64;
          REQUIRE(y.dtype() == want_dtype);
          auto want = reference(c.ref, tf::detail::to_double_vector(a), sp.a,
                                tf::detail::to_double_vector(b), sp.b);
          if (tf::is_floating(want_dtype))
            want = tf::detail::to_double_vector(tf::detail::from_doubles(want, y.shape(),
                                                                         want_dtype));
          else
            for (auto& w : want) w = wrap_to(want_dtype, w);
          const double tol = rtol_of(want_dtype);
          tf::testing::check_values(y, want, tol, tol);
        }
      }
    }
  }
}

namespace {

// A tensor of `shape` whose elements start `offset` elements into a larger tensor (a view at a
// byte offset: on a GPU its pointer is not 16-byte aligned unless offset * size is).
tf::Tensor offset_input(const std::vector<double>& vals, const tf::TensorShape& shape,
                        tf::DType d, int64_t offset) {
  std::vector<double> padded(static_cast<size_t>(offset), 0.0);
  padded.insert(padded.end(), vals.begin(), vals.end());
  padded.push_back(0.0);
  const auto base = tf::detail::from_doubles(padded, {static_cast<int64_t>(padded.size())}, d);
  return tf::detail::view(base, shape, static_cast<size_t>(offset) * tf::dtype_size(d));
}

void check_binary_case(const BinaryCase& c, tf::DType d, const tf::TensorShape& sa, int64_t oa,
                       const tf::TensorShape& sb, int64_t ob) {
  const bool is_pow = std::string(c.name) == "pow";
  const auto a = offset_input(operand(c, d, sa.num_elements(), 3, false), sa, d, oa);
  const auto b = offset_input(operand(c, d, sb.num_elements(), 4, is_pow), sb, d, ob);
  const auto y = c.fn(a, b);
  REQUIRE(y.shape() == bshape({sa, sb}));
  tf::DType want_dtype = d;
  if (c.bool_result) want_dtype = tf::bool_;
  else if (std::string(c.name) == "divide" && d == tf::uint8) want_dtype = tf::float32;
  else if (std::string(c.name) == "divide" && tf::is_integer(d)) want_dtype = tf::float64;
  REQUIRE(y.dtype() == want_dtype);
  auto want = reference(c.ref, tf::detail::to_double_vector(a), sa,
                        tf::detail::to_double_vector(b), sb);
  if (tf::is_floating(want_dtype))
    want = tf::detail::to_double_vector(tf::detail::from_doubles(want, y.shape(), want_dtype));
  else
    for (auto& w : want) w = wrap_to(want_dtype, w);
  const double tol = rtol_of(want_dtype);
  check_values(y, want, tol, tol);
}

}  // namespace

// The GPU kernels' paths: 16-byte vectors with a scalar head and tail (odd sizes, operands that
// start at odd elements of their storage, so misaligned against each other too), a one-element
// operand on either side, and strided broadcasting of offset views.
TEST_CASE("binary ops on odd sizes, offset views and scalars on either side",
          "[cpu][cuda][binary]") {
  struct Offsets {
    int64_t a, b;
  };
  const std::vector<Offsets> offsets = {{0, 0}, {1, 0}, {0, 3}, {1, 1}};
  for (const auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    for (const auto& c : binary_cases()) {
      for (const auto d : c.dtypes) {
        for (const int64_t n : {int64_t{1}, int64_t{3}, int64_t{4099}}) {
          for (const auto& o : offsets) {
            INFO(c.name << " on " << tf::dtype_name(d) << ", n " << n << ", offsets " << o.a
                        << ", " << o.b << " on " << dev.to_string());
            check_binary_case(c, d, {n}, o.a, {n}, o.b);
          }
        }
        INFO(c.name << " on " << tf::dtype_name(d) << " with a scalar or a broadcast on "
                    << dev.to_string());
        check_binary_case(c, d, {4099}, 1, {}, 1);
        check_binary_case(c, d, {}, 3, {4099}, 0);
        check_binary_case(c, d, {1}, 0, {4099}, 1);
        check_binary_case(c, d, {33, 1, 7}, 1, {5, 1}, 3);
        check_binary_case(c, d, {2, 3, 1, 4}, 1, {3, 5, 1}, 0);
      }
    }
    // Large, over many blocks and grid-stride iterations: one op per result-type class.
    struct Large {
      std::string name;
      tf::DType d;
    };
    const std::vector<Large> large = {{"add", tf::float32},     {"add", tf::float16},
                                      {"add", tf::uint8},       {"less", tf::float32},
                                      {"logical_or", tf::bool_}, {"divide", tf::int32},
                                      {"floordiv", tf::int64},   {"floormod", tf::float32}};
    for (const auto& l : large) {
      for (const auto& c : binary_cases()) {
        if (c.name != l.name) continue;
        INFO(c.name << " on " << tf::dtype_name(l.d) << ", 2^20 + 3 elements on "
                    << dev.to_string());
        const int64_t n = (int64_t{1} << 20) + 3;
        check_binary_case(c, l.d, {n}, 1, {n}, 1);
        check_binary_case(c, l.d, {}, 0, {n}, 1);
        if (l.d == tf::float32) check_binary_case(c, l.d, {1025, 1023}, 0, {1023}, 0);
      }
    }
  }
}

TEST_CASE("binary ops reject the dtypes TF rejects - naming op and dtype", "[cpu][binary]") {
  for (const auto& c : binary_cases()) {
    for (const auto d : kAllDTypes) {
      if (contains(c.dtypes, d)) continue;
      INFO(c.name << " on " << tf::dtype_name(d));
      const auto x = tf::detail::from_doubles({1, 0}, {2}, d);
      require_error([&] { c.fn(x, x); },
                    {std::string("[") + c.name + "]", std::string(tf::dtype_name(d))});
    }
  }
}

TEST_CASE("binary ops follow TF's dtype rule for C++ scalars and mixed tensors",
          "[cpu][cuda][binary]") {
  for (const auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    const auto x = tf::constant({1.5f, -2.0f});
    auto y = x * 2.0f;
    CHECK(y.dtype() == tf::float32);
    check_values(y, {3, -4});
    y = 2.0 * x;  // a double scalar still takes the tensor's dtype
    CHECK(y.dtype() == tf::float32);
    check_values(y, {3, -4});
    const auto x64 = tf::constant({1.5, -2.0});
    CHECK((x64 * 2.0f).dtype() == tf::float64);
    check_values(x64 * 2.0f, {3, -4});
    const auto i = tf::constant({1, 2, 3});
    CHECK((i + 1).dtype() == tf::int32);
    CHECK((i + 1).numpy<int>() == std::vector<int>{2, 3, 4});
    CHECK((1 - i).numpy<int>() == std::vector<int>{0, -1, -2});
    const auto i64 = tf::constant(std::vector<int64_t>{5, 6});
    CHECK((i64 * 3).dtype() == tf::int64);
    CHECK((i64 * 3).numpy<int64_t>() == std::vector<int64_t>{15, 18});
    const auto u = tf::detail::from_doubles({250, 3}, {2}, tf::uint8);
    CHECK((u + 10).dtype() == tf::uint8);
    CHECK((u + 10).numpy<int>() == std::vector<int>{4, 13});  // wraps modulo 256
    const auto h = tf::detail::from_doubles({1.5, 3.0}, {2}, tf::float16);
    CHECK((h * 2.0).dtype() == tf::float16);
    check_values(h * 2.0, {3, 6});
    CHECK(tf::less(x, 0.0).dtype() == tf::bool_);
    CHECK(tf::less(x, 0.0).numpy<bool>() == std::vector<bool>{false, true});
    // pow with a C++ exponent
    check_values(tf::pow(x, 2), {2.25, 4});
    CHECK(tf::pow(i, 2).numpy<int>() == std::vector<int>{1, 4, 9});
    // Operators.
    check_values(x + x, {3, -4});
    check_values(x - 1.0f, {0.5, -3});
    check_values(x / 2.0f, {0.75, -1});
    check_values(-x, {-1.5, 2});
    CHECK((i / 2).dtype() == tf::float64);  // true division
    check_values(i / 2, {0.5, 1, 1.5});
    // Two strong tensors of different dtypes are an error naming op and both dtypes.
    require_error([&] { tf::add(x, x64); }, {"[add]", "float32", "float64"});
    require_error([&] { (void)(x * i); }, {"[multiply]", "float32", "int32"});
    require_error([&] { tf::equal(x, tf::constant({true, false})); }, {"[equal]", "bool"});
    require_error([&] { tf::add(x, tf::Tensor()); }, {"[add]", "undefined"});
    // A C++ scalar that an integer or bool tensor's dtype cannot hold exactly is an error (TF:
    // "Cannot convert 2.5 to EagerTensor of dtype int32"), never a silently changed value.
    require_error([&] { (void)(i * 2.5f); }, {"[multiply]", "2.5", "int32"});
    require_error([&] { (void)(u + 300); }, {"[add]", "300", "uint8"});
    require_error([&] { (void)(u - (-1)); }, {"[subtract]", "-1", "uint8"});
    require_error([&] { (void)(i + (int64_t{1} << 40)); }, {"[add]", "1099511627776", "int32"});
    require_error([&] { tf::maximum(i, std::nan("")); }, {"[maximum]", "nan", "int32"});
    require_error([&] { tf::logical_and(tf::constant({true}), 2); }, {"[logical_and]", "bool"});
    CHECK((i * 2.0).numpy<int>() == std::vector<int>{2, 4, 6});  // whole values convert
    CHECK((u + 255.0f).numpy<int>() == std::vector<int>{249, 2});
    CHECK((i64 + 4e18).numpy<int64_t>() == std::vector<int64_t>{4000000000000000005,
                                                                 4000000000000000006});
    check_values(h * 1e-9, {0, 0});  // floating dtypes take any value, rounded
  }
}

TEST_CASE("binary ops name the op and both shapes when shapes do not broadcast",
          "[cpu][binary]") {
  const auto a = tf::zeros({2, 3});
  const auto b = tf::zeros({4});
  require_error([&] { tf::add(a, b); }, {"[add]", "(2, 3)", "(4,)"});
  require_error([&] { tf::less(a, b); }, {"[less]", "(2, 3)", "(4,)"});
  require_error([&] { tf::pow(tf::zeros({2, 1, 3}), tf::zeros({5, 2})); },
                {"[pow]", "(2, 1, 3)", "(5, 2)"});
  require_error([&] { tf::maximum(tf::zeros({0}), tf::zeros({2})); }, {"[maximum]", "(0,)", "(2,)"});
}

TEST_CASE("pow by 0 1 2 one half and -1 keeps the C99 special values and rounds once",
          "[cpu][cuda][binary]") {
  // The CPU kernel runs these one-element exponents as x * x, sqrt and 1 / x: the exact power
  // rounded once, so float32 results equal the float64 power rounded to float32. Other devices
  // run pow itself (within 4 ulp; subnormal float32 results not compared, as they may flush).
  // The last four: floats whose square root the C library's powf(x, 0.5f) misrounds by one ulp
  // (0x1.00376ep+0 for 0x1.006ee6p+0, where sqrt gives 0x1.00376cp+0), and a square that is an
  // exact tie between two floats (1 + 2^-11 + 2^-24).
  std::vector<double> xs = {0.0, -0.0, 1.0, -1.0, kInf, -kInf, kNan, 0.25, 4.0, -4.0, 3.0,
                            1e-30, 1e30, 1e-40, -1e-40, 3.4e38, -2.5, 0x1.006ee6p+0,
                            0x1.011aecp+0, 0x1.0149ep+0, 1.0 + 0x1p-12};
  const std::vector<double> rs = tf::testing::random_values(500, -1e3, 1e3, 7);
  xs.insert(xs.end(), rs.begin(), rs.end());
  for (const auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    const bool cpu = dev.is_cpu();
    for (const auto d : {tf::float32, tf::float64}) {
      const tf::Tensor x = tf::detail::from_doubles(xs, {static_cast<int64_t>(xs.size())}, d);
      for (const double c : {0.0, -0.0, 1.0, 2.0, 0.5, -1.0}) {
        INFO(dev << " " << tf::dtype_name(d) << " exponent " << c);
        const tf::Tensor y = tf::pow(x, tf::detail::from_doubles({c}, {}, d));
        const std::vector<double> got = tf::cast(y, tf::float64).numpy<double>();
        for (size_t i = 0; i < xs.size(); ++i) {
          const double xi = d == tf::float32 ? double{static_cast<float>(xs[i])} : xs[i];
          const double want = std::pow(xi, c);
          INFO("x = " << xi << ": got " << got[i] << ", want " << want);
          if (std::isnan(want)) {
            CHECK(std::isnan(got[i]));
          } else if (d == tf::float32) {
            const float wf = static_cast<float>(want);
            if (cpu || std::isinf(wf) || wf == 0) {
              CHECK(got[i] == double{wf});
              CHECK(std::signbit(got[i]) == std::signbit(wf));
            } else if (std::abs(wf) >= std::numeric_limits<float>::min()) {
              CHECK(tf::testing::float32_ulp_error(static_cast<float>(got[i]), want) <= 4.0);
            }
          } else if (std::isinf(want) || want == 0) {
            CHECK(got[i] == want);
            CHECK(std::signbit(got[i]) == std::signbit(want));
          } else {
            CHECK(std::abs(got[i] - want) <= (cpu ? 2.3e-16 : 1e-15) * std::abs(want));
          }
        }
      }
      // Other exponents, and one next to 2, go to pow (float32 within 1 ulp on the CPU).
      const float next2 = std::nextafter(2.0f, 3.0f);
      for (const double c : {3.0, -0.5, double{next2}, kNan}) {
        INFO(dev << " " << tf::dtype_name(d) << " exponent " << c);
        const double cd = d == tf::float32 ? double{static_cast<float>(c)} : c;
        const std::vector<double> got =
            tf::cast(tf::pow(x, tf::detail::from_doubles({c}, {}, d)), tf::float64)
                .numpy<double>();
        for (size_t i = 7; i < xs.size(); ++i) {  // finite, nonzero x
          const double xi = d == tf::float32 ? double{static_cast<float>(xs[i])} : xs[i];
          const double want = std::pow(xi, cd);
          const double wf = d == tf::float32 ? double{static_cast<float>(want)} : want;
          INFO("x = " << xi << ": got " << got[i] << ", want " << want);
          if (std::isnan(want)) CHECK(std::isnan(got[i]));
          else if (std::isinf(wf) || wf == 0) CHECK(got[i] == wf);
          else if (d == tf::float32 && std::abs(wf) >= std::numeric_limits<float>::min())
            CHECK(tf::testing::float32_ulp_error(static_cast<float>(got[i]), want) <=
                  (cpu ? 1.0 : 4.0));
          else if (d == tf::float64) CHECK(std::abs(got[i] - want) <= 1e-15 * std::abs(want));
        }
      }
      // A one-element exponent of higher rank broadcasts x: the output gains its dimensions.
      const tf::Tensor y = tf::pow(x, tf::detail::from_doubles({2.0}, {1, 1}, d));
      CHECK(y.shape() == tf::TensorShape({1, static_cast<int64_t>(xs.size())}));
      CHECK(tf::cast(y, tf::float64).numpy<double>()[8] == 16.0);
    }
  }
}

TEST_CASE("binary ops: special values - integer wrap-around and pow", "[cpu][cuda][binary]") {
  for (const auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    for (const auto d : {tf::float32, tf::float64}) {
      INFO(tf::dtype_name(d));
      const auto a = tf::detail::from_doubles({kNan, 1.0, kNan, kInf, -0.0}, {5}, d);
      const auto b = tf::detail::from_doubles({1.0, kNan, kNan, 1.0, 0.0}, {5}, d);
      // NaN propagates from either side of maximum and minimum.
      check_values(tf::maximum(a, b), {kNan, kNan, kNan, kInf, 0});
      check_values(tf::minimum(a, b), {kNan, kNan, kNan, 1, 0});
      CHECK(tf::equal(a, b).numpy<bool>() == std::vector<bool>{false, false, false, false, true});
      CHECK(tf::not_equal(a, b).numpy<bool>() == std::vector<bool>{true, true, true, true, false});
      CHECK(tf::less(a, b).numpy<bool>() == std::vector<bool>{false, false, false, false, false});
      check_values(tf::divide(tf::detail::from_doubles({1, -1, 0}, {3}, d), 0.0),
                   {kInf, -kInf, kNan});
    }
    // Integer division by zero is float division (no trap).
    check_values(tf::divide(tf::constant({1, -1, 0}), 0), {kInf, -kInf, kNan});
    check_values(tf::divide(tf::detail::from_doubles({7}, {1}, tf::uint8), 0), {kInf});
    // int32 arithmetic wraps.
    const int32_t mx = std::numeric_limits<int32_t>::max();
    CHECK((tf::constant(std::vector<int32_t>{mx}) + 1).numpy<int32_t>() ==
          std::vector<int32_t>{std::numeric_limits<int32_t>::min()});
    CHECK((tf::constant(std::vector<int32_t>{65536}) * 65536).numpy<int32_t>() ==
          std::vector<int32_t>{0});
    // Integer pow: by squaring, exact; negative exponents are rejected as in TF.
    CHECK(tf::pow(tf::constant(std::vector<int64_t>{3, -2, 0, 7}),
                  tf::constant(std::vector<int64_t>{13, 3, 0, 1}))
              .numpy<int64_t>() == std::vector<int64_t>{1594323, -8, 1, 7});
    CHECK(tf::pow(tf::constant({2}), tf::constant({31})).numpy<int32_t>() ==
          std::vector<int32_t>{std::numeric_limits<int32_t>::min()});  // wraps
    require_error([] { tf::pow(tf::constant({2, 3}), tf::constant({1, -1})); },
                  {"[pow]", "negative integer powers"});
    check_values(tf::pow(tf::constant({4.0f, 2.0f, -8.0f}), tf::constant({0.5f, -1.0f, 2.0f})),
                 {2, 0.5, 64});
    // Logical ops on every combination.
    const auto p = tf::constant({true, true, false, false});
    const auto q = tf::constant({true, false, true, false});
    CHECK(tf::logical_and(p, q).numpy<bool>() == std::vector<bool>{true, false, false, false});
    CHECK(tf::logical_or(p, q).numpy<bool>() == std::vector<bool>{true, true, true, false});
    CHECK(tf::logical_and(p, true).numpy<bool>() == std::vector<bool>{true, true, false, false});
    CHECK(tf::equal(p, q).numpy<bool>() == std::vector<bool>{true, false, false, true});
    require_error([&] { tf::logical_and(tf::constant({1.f}), tf::constant({1.f})); },
                  {"[logical_and]", "float32"});
  }
}

TEST_CASE("where broadcasts condition - x and y", "[cpu][cuda][binary][where]") {
  for (const auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    // Reference: numpy.where with broadcasting over all three.
    struct Shapes {
      tf::TensorShape c, x, y;
    };
    const std::vector<Shapes> cases = {
        {{2, 3}, {2, 3}, {2, 3}}, {{3, 1}, {1, 4}, {}},       {{4}, {3, 4}, {3, 1}},
        {{}, {2, 2}, {2, 2}},     {{2, 1, 3}, {4, 1}, {3}},   {{0, 2}, {2}, {}},
        {{300, 1}, {1, 400}, {300, 400}},  // parallel broadcast path
        {{70001}, {70001}, {70001}},       // parallel same-shape path
    };
    for (const auto d : kAllDTypes) {
      for (const auto& s : cases) {
        INFO(tf::dtype_name(d) << ": " << s.c.to_string() << ", " << s.x.to_string() << ", "
                               << s.y.to_string());
        auto vc = tf::testing::random_values(static_cast<size_t>(s.c.num_elements()), 0, 1, 5);
        for (auto& v : vc) v = v > 0.5;
        auto vx = tf::testing::random_values(static_cast<size_t>(s.x.num_elements()), 0, 100, 6);
        auto vy = tf::testing::random_values(static_cast<size_t>(s.y.num_elements()), 0, 100, 7);
        for (auto* v : {&vx, &vy})
          for (auto& e : *v) e = d == tf::bool_ ? double(e > 50) : std::floor(e);
        const auto c = tf::detail::from_doubles(vc, s.c, tf::bool_);
        const auto x = tf::detail::from_doubles(vx, s.x, d);
        const auto y = tf::detail::from_doubles(vy, s.y, d);
        const auto r = tf::where(c, x, y);
        const auto so = bshape({s.c, s.x, s.y});
        REQUIRE(r.shape() == so);
        REQUIRE(r.dtype() == d);
        std::vector<double> want(static_cast<size_t>(so.num_elements()));
        for (int64_t i = 0; i < so.num_elements(); ++i)
          want[i] = vc[source_index(s.c, so, i)] != 0 ? vx[source_index(s.x, so, i)]
                                                      : vy[source_index(s.y, so, i)];
        tf::testing::check_values(r, want, 0, 0);
      }
    }
    // C++ scalars take the tensor operand's dtype.
    const auto x64 = tf::constant({1.0, 2.0, 3.0});
    const auto r = tf::where(tf::greater(x64, 1.5), x64, 0.0f);
    CHECK(r.dtype() == tf::float64);
    check_values(r, {0, 2, 3});
    CHECK(tf::where(true, tf::constant({1, 2}), -1).numpy<int>() == std::vector<int>{1, 2});
  }
  require_error([] { tf::where(tf::constant({1.f}), tf::constant({1.f}), tf::constant({2.f})); },
                {"[where]", "bool", "float32"});
  require_error([] {
    tf::where(tf::constant({true}), tf::constant({1.f}), tf::constant({2.0}));
  }, {"[where]", "float32", "float64"});
  require_error([] {
    tf::where(tf::zeros({2, 3}, tf::bool_), tf::zeros({3}), tf::zeros({4}));
  }, {"[where]", "(2, 3)", "(3,)", "(4,)"});
  CHECK(tf::prims::Select{}.is_elementwise());
  CHECK(std::string(tf::prims::Select{}.name()) == "where");
}

// where on the GPU kernels' paths: odd sizes, offset views, one-element operands in any position
// (the flat path), and strided broadcasting, for every dtype (elements of 1, 2, 4 and 8 bytes).
TEST_CASE("where on odd sizes, offset views and scalars", "[cpu][cuda][binary][where]") {
  struct Operand {
    tf::TensorShape shape;
    int64_t offset;
  };
  struct Case {
    Operand c, x, y;
  };
  const std::vector<Case> cases = {
      {{{4099}, 0}, {{4099}, 0}, {{4099}, 0}},
      {{{4099}, 1}, {{4099}, 3}, {{4099}, 0}},
      {{{3}, 1}, {{3}, 1}, {{3}, 1}},
      {{{}, 0}, {{4099}, 1}, {{4099}, 0}},
      {{{4099}, 1}, {{}, 0}, {{4099}, 1}},
      {{{4099}, 0}, {{4099}, 1}, {{1}, 1}},
      {{{4099}, 3}, {{}, 0}, {{}, 1}},
      {{{1}, 0}, {{1}, 0}, {{1}, 0}},
      {{{33, 1}, 1}, {{1, 65}, 1}, {{65}, 3}},
      {{{(int64_t{1} << 20) + 3}, 1}, {{(int64_t{1} << 20) + 3}, 1}, {{}, 0}},
  };
  for (const auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    for (const auto d : kAllDTypes) {
      for (const auto& s : cases) {
        INFO(tf::dtype_name(d) << ": " << s.c.shape.to_string() << "+" << s.c.offset << ", "
                               << s.x.shape.to_string() << "+" << s.x.offset << ", "
                               << s.y.shape.to_string() << "+" << s.y.offset << " on "
                               << dev.to_string());
        auto vc = tf::testing::random_values(static_cast<size_t>(s.c.shape.num_elements()), 0, 1, 8);
        for (auto& v : vc) v = v > 0.5;
        auto vx = tf::testing::random_values(static_cast<size_t>(s.x.shape.num_elements()), 0, 100, 9);
        auto vy = tf::testing::random_values(static_cast<size_t>(s.y.shape.num_elements()), 0, 100, 10);
        for (auto* v : {&vx, &vy})
          for (auto& e : *v) e = d == tf::bool_ ? double(e > 50) : std::floor(e);
        const auto c = offset_input(vc, s.c.shape, tf::bool_, s.c.offset);
        const auto x = offset_input(vx, s.x.shape, d, s.x.offset);
        const auto y = offset_input(vy, s.y.shape, d, s.y.offset);
        const auto r = tf::where(c, x, y);
        const auto so = bshape({s.c.shape, s.x.shape, s.y.shape});
        REQUIRE(r.shape() == so);
        REQUIRE(r.dtype() == d);
        std::vector<double> want(static_cast<size_t>(so.num_elements()));
        for (int64_t i = 0; i < so.num_elements(); ++i)
          want[i] = vc[source_index(s.c.shape, so, i)] != 0 ? vx[source_index(s.x.shape, so, i)]
                                                            : vy[source_index(s.y.shape, so, i)];
        check_values(r, want, 0, 0);
      }
    }
  }
}

TEST_CASE("clip_by_value clips into min..max with TF's broadcasting", "[cpu][cuda][binary]") {
  for (const auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    const auto t = tf::constant({{-3.f, 0.5f, 7.f}, {2.f, -0.25f, 10.f}});
    auto r = tf::clip_by_value(t, -1.0f, 5.0f);
    CHECK(r.dtype() == tf::float32);
    CHECK(r.shape() == tf::TensorShape({2, 3}));
    check_values(r, {-1, 0.5, 5, 2, -0.25, 5});
    // Per-column bounds broadcast to t's shape.
    r = tf::clip_by_value(t, tf::constant({0.f, 0.f, 8.f}), tf::constant({1.f, 1.f, 9.f}));
    check_values(r, {0, 0.5, 8, 1, 0, 9});
    const auto ti = tf::constant({-5, 3, 12});
    CHECK(tf::clip_by_value(ti, 0, 10).numpy<int>() == std::vector<int>{0, 3, 10});
    check_values(tf::clip_by_value(tf::constant({kNan, 1.0}), 0.0, 0.5), {kNan, 0.5});
    // TF's order when min > max: minimum with max first, then maximum with min.
    check_values(tf::clip_by_value(tf::constant({0.f, 10.f}), 6.0f, 4.0f), {6, 6});
  }
  require_error([] { tf::clip_by_value(tf::zeros({2}), tf::zeros({3, 2}), 1.0f); },
                {"[clip_by_value]", "(3, 2)", "(2,)"});
  require_error([] { tf::clip_by_value(tf::zeros({2}), 0.0f, tf::zeros({2}, tf::float64)); },
                {"[clip_by_value]", "float32", "float64"});
  require_error([] { tf::clip_by_value(tf::constant({true}), false, true); },
                {"[clip_by_value]", "bool"});
}

TEST_CASE("binary primitives are elementwise", "[cpu][binary]") {
  CHECK(tf::prims::Add{}.is_elementwise());
  CHECK(tf::prims::LogicalOr{}.is_elementwise());
  CHECK(std::string(tf::prims::GreaterEqual{}.name()) == "greater_equal");
  CHECK(tf::prims::Add{}.is_equivalent(tf::prims::Add{}));
  CHECK_FALSE(tf::prims::Add{}.is_equivalent(tf::prims::Subtract{}));
}

namespace {
// The sign bit of each element, so that -0.0 and +0.0 differ (false for NaN, whose sign TF does
// not define).
std::vector<bool> sign_bits_of(const std::vector<double>& v) {
  std::vector<bool> out;
  for (double e : v) out.push_back(!std::isnan(e) && std::signbit(e));
  return out;
}
std::vector<bool> sign_bits(const tf::Tensor& t) {
  return sign_bits_of(tf::detail::to_double_vector(t));
}
}  // namespace

TEST_CASE("floordiv and floormod give TensorFlow 2.21's values and signed zeros",
          "[cpu][cuda][binary][floordiv]") {
  // TF 2.21's results (CPU) on these operands, the same in float16, bfloat16, float32, float64.
  const std::vector<double> a = {7,    -7,    7, -7, 0,  -0.0, 1,   -1,
                                 kInf, -kInf, 1, 5,  -5, kNan, 7.5, -7.5};
  const std::vector<double> b = {2, 2, -2, -2, 3, 3, kInf, kInf, 2, 2, 0, -0.0, 0, 2, 0.5, -0.5};
  const std::vector<double> div = {3, -4, -4, 3, 0, -0.0, 0, -0.0, kInf, -kInf, kInf, -kInf, -kInf,
                                   kNan, 15, 15};
  const std::vector<double> mod = {1, 1, -1, -1, 0, -0.0, 1, kInf, kNan, kNan, kNan, kNan, kNan,
                                   kNan, 0, -0.0};
  for (const auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    for (const auto d : {tf::float16, tf::bfloat16, tf::float32, tf::float64}) {
      INFO(tf::dtype_name(d) << " on " << dev.to_string());
      const int64_t n = static_cast<int64_t>(a.size());
      const auto x = tf::detail::from_doubles(a, {n}, d), y = tf::detail::from_doubles(b, {n}, d);
      const tf::Tensor q = tf::floordiv(x, y), r = tf::floormod(x, y);
      CHECK(q.dtype() == d);
      check_values(q, div, 0, 0);
      check_values(r, mod, 0, 0);
      CHECK(sign_bits(q) == sign_bits_of(div));
      CHECK(sign_bits(r) == sign_bits_of(mod));
      check_values(x % y, mod, 0, 0);
    }
    // Integers: floor toward -inf, the remainder takes the divisor's sign; the most negative
    // value divided by -1 wraps to itself with remainder 0 (TF), and never traps.
    for (const auto d : {tf::int32, tf::int64}) {
      INFO(tf::dtype_name(d) << " on " << dev.to_string());
      const auto x = tf::detail::from_doubles({7, -7, 7, -7, 0, 6, -6, 1, -1}, {9}, d);
      const auto y = tf::detail::from_doubles({2, 2, -2, -2, 3, 3, -3, 5, 5}, {9}, d);
      CHECK(tf::floordiv(x, y).dtype() == d);
      check_values(tf::floordiv(x, y), {3, -4, -4, 3, 0, 2, 2, 0, -1}, 0, 0);
      check_values(tf::floormod(x, y), {1, 1, -1, -1, 0, 0, 0, 1, 4}, 0, 0);
      check_values(tf::floordiv(x, -1), {-7, 7, -7, 7, 0, -6, 6, -1, 1}, 0, 0);
      check_values(tf::floormod(x, -1), {0, 0, 0, 0, 0, 0, 0, 0, 0}, 0, 0);
    }
    const tf::Tensor min32 = tf::constant({std::numeric_limits<int32_t>::min(), 5});
    const tf::Tensor m1 = tf::constant({-1, -1});
    CHECK(tf::floordiv(min32, m1).numpy<int32_t>() ==
          std::vector<int32_t>{std::numeric_limits<int32_t>::min(), -5});
    CHECK(tf::floormod(min32, m1).numpy<int32_t>() == std::vector<int32_t>{0, 0});
    CHECK(tf::floordiv(min32, 1).numpy<int32_t>()[0] == std::numeric_limits<int32_t>::min());
    const tf::Tensor min64 =
        tf::constant(std::vector<int64_t>{std::numeric_limits<int64_t>::min()}, {1});
    CHECK(tf::floordiv(min64, int64_t{-1}).numpy<int64_t>()[0] ==
          std::numeric_limits<int64_t>::min());
    CHECK(tf::floormod(min64, int64_t{-1}).numpy<int64_t>()[0] == 0);
    CHECK(tf::floormod(min64, int64_t{3}).numpy<int64_t>()[0] == 1);  // -2^63 = 3 * q + 1
    const auto u = tf::detail::from_doubles({7, 255, 0, 200}, {4}, tf::uint8);
    const auto v = tf::detail::from_doubles({2, 3, 5, 7}, {4}, tf::uint8);
    check_values(tf::floordiv(u, v), {3, 85, 0, 28}, 0, 0);
    check_values(tf::floormod(u, v), {1, 0, 0, 4}, 0, 0);
    // Broadcasting and C++ scalars (which take the tensor's dtype).
    check_values(tf::floordiv(tf::constant({{7}, {-7}}), tf::constant({2, -2, 3})),
                 {3, -4, 2, -4, 3, -3}, 0, 0);
    check_values(tf::floordiv(tf::constant({7.5f}), 2), {3}, 0, 0);
    check_values(tf::constant({-7}) % 3, {2}, 0, 0);
  }
}

TEST_CASE("floordiv and floormod on fractional operands match a reference in the stored type",
          "[cpu][cuda][binary][floordiv]") {
  for (const auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    for (const auto d : {tf::float16, tf::bfloat16, tf::float32, tf::float64}) {
      INFO(tf::dtype_name(d) << " on " << dev.to_string());
      const int64_t n = 4099;
      const auto x = tf::detail::from_doubles(tf::testing::random_values(n, -50, 50, 8), {n}, d);
      auto bv = tf::testing::random_values(n, -3, 3, 9);
      for (auto& e : bv)
        if (std::abs(e) < 0.05) e = 0.3;
      const auto y = tf::detail::from_doubles(bv, {n}, d);
      const auto xa = tf::detail::to_double_vector(x), ya = tf::detail::to_double_vector(y);
      // The quotient rounded to the stored type (exact division rounded once; the half types
      // round the float quotient again, as TF's Eigen half arithmetic), then floored.
      std::vector<double> quot(xa.size()), mod(xa.size());
      for (size_t i = 0; i < xa.size(); ++i) {
        quot[i] = d == tf::float64 ? xa[i] / ya[i]
                                   : static_cast<double>(static_cast<float>(xa[i]) /
                                                         static_cast<float>(ya[i]));
        const double r = std::fmod(xa[i], ya[i]);  // exact
        mod[i] = (r != 0 && ((ya[i] < 0) != (r < 0))) ? r + ya[i] : r;
      }
      quot = tf::detail::to_double_vector(tf::detail::from_doubles(quot, {n}, d));
      for (auto& q : quot) q = std::floor(q);
      mod = tf::detail::to_double_vector(tf::detail::from_doubles(mod, {n}, d));
      check_values(tf::floordiv(x, y), quot, 0, 0);
      check_values(tf::floormod(x, y), mod, 0, 0);
    }
    // float16's quotient rounding: 0.3 / 0.1 is 2.9998 in float but 3 in float16 (TF: 3).
    const auto h = [](double v) { return tf::detail::from_doubles({v}, {1}, tf::float16); };
    check_values(tf::floordiv(h(0.3), h(0.1)), {3}, 0, 0);
  }
}

TEST_CASE("integer floordiv and floormod by zero are TF's InvalidArgumentError",
          "[cpu][cuda][binary][floordiv]") {
  for (const auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    INFO(dev.to_string());
    for (const auto d : {tf::int32, tf::int64, tf::uint8}) {
      const auto x = tf::detail::from_doubles({7, 8, 9}, {3}, d);
      const auto y = tf::detail::from_doubles({1, 0, 2}, {3}, d);  // one zero is enough
      require_error([&] { tf::floordiv(x, y); },
                    {"[floordiv]", "Integer division by zero", std::string(tf::dtype_name(d))});
      require_error([&] { tf::floormod(x, y); }, {"[floormod]", "Integer division by zero"});
      require_error([&] { tf::floordiv(x, tf::detail::from_doubles({0}, {}, d)); },
                    {"Integer division by zero"});
    }
    require_error([] { tf::constant({7, 8}) % 0; }, {"[floormod]", "Integer division by zero"});
    // Floats divide by zero as IEEE does.
    check_values(tf::floordiv(tf::constant({1.0f, -1.0f}), 0.0f), {kInf, -kInf}, 0, 0);
    // Empty operands check nothing.
    CHECK(tf::floordiv(tf::zeros({0}, tf::int32), tf::zeros({0}, tf::int32)).num_elements() == 0);
  }
  require_error([] { tf::floordiv(tf::constant({7}), tf::constant({2.0f})); },
                {"[floordiv]", "dtypes differ: int32 and float32"});
}
