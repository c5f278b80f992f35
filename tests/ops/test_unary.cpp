// Unary elementwise ops and cast: every op on every accepted dtype and every device against a
// float64 std:: reference, special values, and the dtype errors.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/hash.h"
#include "ops/cpu/math_avx512.h"
#include "ops/factory.h"
#include "ops/unary.h"
#include "support/scalar_forms.h"
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
constexpr float kInf32 = std::numeric_limits<float>::infinity();

const std::vector<tf::DType> kFloating = {tf::float16, tf::bfloat16, tf::float32, tf::float64};

struct UnaryCase {
  const char* name;
  tf::Tensor (*fn)(const tf::Tensor&);
  std::function<double(double)> ref;
  std::vector<tf::DType> dtypes;
  double lo, hi;  // input range for floating inputs
};

std::vector<tf::DType> floating_and(std::vector<tf::DType> more) {
  std::vector<tf::DType> v = kFloating;
  v.insert(v.end(), more.begin(), more.end());
  return v;
}

const std::vector<UnaryCase>& unary_cases() {
  static const std::vector<UnaryCase> cases = {
      {"negative", tf::negative, [](double x) { return -x; }, floating_and({tf::int32, tf::int64}),
       -10, 10},
      {"abs", tf::abs, [](double x) { return std::abs(x); },
       floating_and({tf::int32, tf::int64, tf::uint8}), -10, 10},
      {"sign", tf::sign, [](double x) { return double((x > 0) - (x < 0)); },
       floating_and({tf::int32, tf::int64}), -3, 3},
      {"exp", tf::exp, [](double x) { return std::exp(x); }, kFloating, -20, 20},
      {"log", tf::log, [](double x) { return std::log(x); }, kFloating, 1e-3, 100},
      {"log1p", tf::log1p, [](double x) { return std::log1p(x); }, kFloating, -0.9, 100},
      {"sqrt", tf::sqrt, [](double x) { return std::sqrt(x); }, kFloating, 0, 100},
      {"rsqrt", tf::rsqrt, [](double x) { return 1.0 / std::sqrt(x); }, kFloating, 1e-3, 100},
      {"square", tf::square, [](double x) { return x * x; },
       floating_and({tf::int32, tf::int64, tf::uint8}), -10, 10},
      {"tanh", tf::tanh, [](double x) { return std::tanh(x); }, kFloating, -6, 6},
      {"sigmoid", tf::sigmoid, [](double x) { return 1.0 / (1.0 + std::exp(-x)); }, kFloating,
       -30, 30},
      {"sin", tf::sin, [](double x) { return std::sin(x); }, kFloating, -6, 6},
      {"cos", tf::cos, [](double x) { return std::cos(x); }, kFloating, -6, 6},
      {"erf", tf::erf, [](double x) { return std::erf(x); }, kFloating, -4, 4},
      {"erfc", tf::erfc, [](double x) { return std::erfc(x); }, kFloating, -3, 9},
      {"floor", tf::floor, [](double x) { return std::floor(x); }, kFloating, -10, 10},
      {"ceil", tf::ceil, [](double x) { return std::ceil(x); }, kFloating, -10, 10},
      {"round", tf::round, [](double x) { return std::nearbyint(x); },
       floating_and({tf::int32, tf::int64, tf::uint8}), -10, 10},
      {"logical_not", tf::logical_not, [](double x) { return x == 0 ? 1.0 : 0.0; }, {tf::bool_},
       0, 2},
  };
  return cases;
}


// Inputs for dtype d: random values in [lo, hi) (integers for integer dtypes, 0/1 for bool).
std::vector<double> inputs_for(tf::DType d, double lo, double hi, size_t n, unsigned seed) {
  auto v = tf::testing::random_values(n, lo, hi, seed);
  if (d == tf::bool_) {
    for (auto& x : v) x = x > (lo + hi) / 2 ? 1.0 : 0.0;
  } else if (d == tf::uint8) {
    for (auto& x : v) x = std::min(std::floor(std::abs(x)), 15.0);  // whole numbers in [0, 15]
  } else if (tf::is_integer(d)) {
    for (auto& x : v) x = std::floor(x * 3);
  }
  return v;
}

}  // namespace

TEST_CASE("unary ops match a float64 reference on every accepted dtype", "[cpu][cuda][unary]") {
  for (const auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    for (const auto& c : unary_cases()) {
      for (const auto d : c.dtypes) {
        INFO(c.name << " on " << tf::dtype_name(d) << " on " << dev.to_string());
        // Sizes on both sides of the parallel split (2 x 32K cheap, 2 x 4K expensive).
        for (const int64_t n : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{70001}}) {
          const auto vals = inputs_for(d, c.lo, c.hi, static_cast<size_t>(n), 17);
          const tf::Tensor x = tf::detail::from_doubles(vals, {n}, d);
          const tf::Tensor y = c.fn(x);
          REQUIRE(y.dtype() == d);
          REQUIRE(y.shape() == x.shape());
          CHECK(y.device() == dev.to_string());
          // The reference sees the input as stored (float16 inputs are already rounded).
          const auto xin = tf::detail::to_double_vector(x);
          std::vector<double> want(xin.size());
          for (size_t i = 0; i < xin.size(); ++i) want[i] = c.ref(xin[i]);
          // ... and is rounded to the stored type (float16 overflows to inf above 65504).
          if (tf::is_floating(d)) want = tf::detail::to_double_vector(tf::detail::from_doubles(want, {n}, d));
          // Results of 1 or more in magnitude compare relatively; near zero the absolute error
          // of the stored type counts (sin near pi, log near 1).
          const double rtol = rtol_of(d);
          tf::testing::check_values(y, want, rtol, rtol);
        }
      }
    }
  }
}

namespace {

// n elements of dtype d starting `offset` elements into a larger tensor (a view at a byte offset:
// on a GPU its pointer is not 16-byte aligned unless offset * size is).
tf::Tensor offset_input(const std::vector<double>& vals, tf::DType d, int64_t offset) {
  std::vector<double> padded(static_cast<size_t>(offset), 0.0);
  padded.insert(padded.end(), vals.begin(), vals.end());
  padded.push_back(0.0);  // a trailing element, so that the view ends before the storage does
  const auto base = tf::detail::from_doubles(padded, {static_cast<int64_t>(padded.size())}, d);
  return tf::detail::view(base, {static_cast<int64_t>(vals.size())},
                          static_cast<size_t>(offset) * tf::dtype_size(d));
}

void check_unary_case(const UnaryCase& c, tf::DType d, int64_t n, int64_t offset) {
  const auto vals = inputs_for(d, c.lo, c.hi, static_cast<size_t>(n), 23);
  const tf::Tensor x = offset_input(vals, d, offset);
  const tf::Tensor y = c.fn(x);
  REQUIRE(y.dtype() == d);
  REQUIRE(y.shape() == tf::TensorShape({n}));
  const auto xin = tf::detail::to_double_vector(x);
  std::vector<double> want(xin.size());
  for (size_t i = 0; i < xin.size(); ++i) want[i] = c.ref(xin[i]);
  if (tf::is_floating(d))
    want = tf::detail::to_double_vector(tf::detail::from_doubles(want, {n}, d));
  check_values(y, want, rtol_of(d), rtol_of(d));
}

}  // namespace

// Sizes around the GPU kernels' 16-byte vectors (1, 3, one element past a vector multiple, and a
// large odd size over many blocks) and inputs that start at an odd element of their storage, so
// that the vectorised range starts after a scalar head or is not taken at all.
TEST_CASE("unary ops on odd sizes and offset views", "[cpu][cuda][unary]") {
  for (const auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    for (const auto& c : unary_cases()) {
      for (const auto d : c.dtypes) {
        for (const int64_t n : {int64_t{1}, int64_t{3}, int64_t{4099}}) {
          for (const int64_t offset : {int64_t{0}, int64_t{1}, int64_t{3}}) {
            INFO(c.name << " on " << tf::dtype_name(d) << ", n " << n << ", offset " << offset
                        << " on " << dev.to_string());
            check_unary_case(c, d, n, offset);
          }
        }
      }
    }
    // Large, over many blocks and grid-stride iterations: one op per dtype class.
    for (const auto& c : unary_cases()) {
      const std::string name = c.name;
      if (name != "negative" && name != "abs" && name != "sigmoid" && name != "logical_not")
        continue;
      for (const auto d : c.dtypes) {
        if (name == "sigmoid" && d != tf::float32 && d != tf::float16) continue;
        for (const int64_t offset : {int64_t{0}, int64_t{1}}) {
          INFO(c.name << " on " << tf::dtype_name(d) << ", n 2^20 + 3, offset " << offset
                      << " on " << dev.to_string());
          check_unary_case(c, d, (int64_t{1} << 20) + 3, offset);
        }
      }
    }
  }
}

TEST_CASE("unary ops reject the dtypes TF rejects - naming op and dtype", "[cpu][unary]") {
  for (const auto& c : unary_cases()) {
    for (const auto d : kAllDTypes) {
      if (contains(c.dtypes, d)) continue;
      INFO(c.name << " on " << tf::dtype_name(d));
      const tf::Tensor x = tf::detail::from_doubles({1, 0}, {2}, d);
      require_error([&] { c.fn(x); },
                    {std::string("[") + c.name + "]", std::string(tf::dtype_name(d))});
    }
  }
  require_error([] { tf::exp(tf::constant({1, 2})); }, {"[exp]", "int32", "floating-point"});
  require_error([] { tf::negative(tf::detail::from_doubles({1}, {1}, tf::uint8)); },
                {"[negative]", "uint8"});
  require_error([] { tf::logical_not(tf::constant({1.f})); }, {"[logical_not]", "float32"});
  require_error([] { tf::exp(tf::Tensor()); }, {"[exp]", "undefined"});
}

TEST_CASE("unary ops handle special values", "[cpu][cuda][unary]") {
  for (const auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    for (const auto d : {tf::float32, tf::float64}) {
      INFO(tf::dtype_name(d) << " on " << dev.to_string());
      auto t = [&](std::vector<double> v) {
        const int64_t n = static_cast<int64_t>(v.size());
        return tf::detail::from_doubles(v, {n}, d);
      };
      const auto specials = t({kNan, kInf, -kInf, 0.0, -0.0});
      check_values(tf::exp(specials), {kNan, kInf, 0, 1, 1});
      check_values(tf::log(t({kNan, kInf, 0.0, -1.0, 1.0})), {kNan, kInf, -kInf, kNan, 0});
      check_values(tf::log1p(t({-1.0, -2.0, kInf})), {-kInf, kNan, kInf});
      check_values(tf::sqrt(t({-1.0, kInf, 0.0})), {kNan, kInf, 0});
      check_values(tf::rsqrt(t({0.0, kInf, 4.0})), {kInf, 0, 0.5});
      check_values(tf::tanh(specials), {kNan, 1, -1, 0, 0});
      check_values(tf::sigmoid(specials), {kNan, 1, 0, 0.5, 0.5});
      check_values(tf::floor(specials), {kNan, kInf, -kInf, 0, 0});
      check_values(tf::ceil(specials), {kNan, kInf, -kInf, 0, 0});
      check_values(tf::round(specials), {kNan, kInf, -kInf, 0, 0});
      check_values(tf::sign(specials), {kNan, 1, -1, 0, 0});
      check_values(tf::abs(specials), {kNan, kInf, kInf, 0, 0});
      check_values(tf::negative(specials), {kNan, -kInf, kInf, 0, 0});
      check_values(tf::square(specials), {kNan, kInf, kInf, 0, 0});
      // Signs of zeros: |-0| is +0, -(+0) is -0, floor/ceil/round keep the sign.
      const auto zero_signs = [](const tf::Tensor& y) {
        std::vector<bool> s;
        for (double v : tf::detail::to_double_vector(y)) s.push_back(std::signbit(v));
        return s;
      };
      CHECK(zero_signs(tf::abs(t({-0.0, 0.0}))) == std::vector<bool>{false, false});
      CHECK(zero_signs(tf::negative(t({0.0, -0.0}))) == std::vector<bool>{true, false});
      CHECK(zero_signs(tf::round(t({-0.5, -0.0, 0.4}))) == std::vector<bool>{true, true, false});
      CHECK(zero_signs(tf::ceil(t({-0.5, -0.7, -0.0}))) == std::vector<bool>{true, true, true});
      // Round half to even, as tf.round and numpy.
      check_values(tf::round(t({0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.5, 0.49999997, 1e10, -7.5})),
                   {0, 2, 2, -0.0, -2, -2, 4, 0, 1e10, -8});
      check_values(tf::floor(t({-0.5, 0.5, -2.5, 2.5, -1.0, 1e10 + 0.5})),
                   {-1, 0, -3, 2, -1, std::floor(1e10 + 0.5)});
      check_values(tf::ceil(t({-0.5, 0.5, -2.5, 2.5, 1.0, 0.2})), {-0.0, 1, -2, 3, 1, 1});
    }
    // float32 exp over its whole range, including overflow and the subnormal results.
    {
      std::vector<double> xs;
      for (double x = -103.0; x <= 88.5; x += 0.37) xs.push_back(x);
      xs.push_back(88.72);
      const auto x = tf::detail::from_doubles(xs, {static_cast<int64_t>(xs.size())}, tf::float32);
      const auto xin = tf::detail::to_double_vector(x);
      std::vector<double> want;
      for (double v : xin) want.push_back(std::exp(v));
      check_values(tf::exp(x), want, 2e-6, 3e-45);
      check_values(tf::exp(tf::constant({89.0f, 100.0f, -104.0f, -200.0f})), {kInf, kInf, 0, 0},
                   0, 1.5e-45);
      // float32 log from the smallest subnormal to the largest float, and around 1.
      std::vector<double> lx = {1.4e-45, 1e-40, 1.1754942e-38, 1.17549435e-38, 1e-20, 0.5,
                                0.70710677, 0.70710683, 0.9999999, 1.0000001, 1.5, 2.0, 1e20,
                                3.4028235e38};
      for (double v = 1e-6; v < 1e6; v *= 1.37) lx.push_back(v);
      for (double v = 0.9; v < 1.1; v += 0.0013) lx.push_back(v);
      const auto l = tf::detail::from_doubles(lx, {static_cast<int64_t>(lx.size())}, tf::float32);
      std::vector<double> wl;
      for (double v : tf::detail::to_double_vector(l)) wl.push_back(std::log(v));
      check_values(tf::log(l), wl, 3e-7, 1e-7);
      // tanh and sigmoid: relative accuracy near zero and in the tails.
      std::vector<double> small = {1e-30, -1e-7, 3e-4, 0.6, 0.65, -0.7, 9.0, -20.0};
      const auto s = tf::detail::from_doubles(small, {8}, tf::float32);
      std::vector<double> wt, ws;
      for (double v : tf::detail::to_double_vector(s)) {
        wt.push_back(std::tanh(v));
        ws.push_back(1.0 / (1.0 + std::exp(-v)));
      }
      check_values(tf::tanh(s), wt, 2e-6, 0);
      check_values(tf::sigmoid(s), ws, 2e-6, 0);
      check_values(tf::sigmoid(tf::constant({-100.0f, -80.0f})),
                   {1.0 / (1.0 + std::exp(100.0)), 1.0 / (1.0 + std::exp(80.0))}, 1e-5, 1e-45);
    }
    // Integer negative and abs wrap around at the minimum, as TF's.
    const int32_t mn = std::numeric_limits<int32_t>::min();
    CHECK(tf::negative(tf::constant(std::vector<int32_t>{mn, 5})).numpy<int32_t>() ==
          std::vector<int32_t>{mn, -5});
    CHECK(tf::abs(tf::constant(std::vector<int32_t>{mn, -5})).numpy<int32_t>() ==
          std::vector<int32_t>{mn, 5});
    CHECK(tf::sign(tf::constant(std::vector<int64_t>{-7, 0, 9})).numpy<int64_t>() ==
          std::vector<int64_t>{-1, 0, 1});
    CHECK(tf::round(tf::constant(std::vector<int32_t>{-7, 3})).numpy<int32_t>() ==
          std::vector<int32_t>{-7, 3});
    CHECK(tf::square(tf::detail::from_doubles({15, 16}, {2}, tf::uint8)).numpy<int>() ==
          std::vector<int>{225, 0});  // uint8 wraps
    CHECK(tf::logical_not(tf::constant({true, false, true})).numpy<bool>() ==
          std::vector<bool>{false, true, false});
    // Unary minus is negative.
    check_values(-tf::constant({1.5f, -2.f}), {-1.5, 2});
    // Empty tensors keep their shape.
    const auto e = tf::exp(tf::zeros({0, 3}));
    CHECK(e.shape() == tf::TensorShape({0, 3}));
    CHECK(e.dtype() == tf::float32);
  }
}

// The largest distance in float32 ulps of ys[i] from ref(xs[i]) (float64), and where; `skip`
// is an input left out.
struct WorstUlp {
  double ulp = 0;
  float x = 0;
};
WorstUlp worst_ulp(const std::vector<float>& xs, const std::vector<float>& ys,
                   const std::function<double(double)>& ref,
                   float skip = std::numeric_limits<float>::quiet_NaN()) {
  WorstUlp w;
  for (size_t i = 0; i < xs.size(); ++i) {
    if (xs[i] == skip) continue;
    const double want = ref(double{xs[i]});
    // NaN for a finite value would compare false below: an infinite error.
    const double err = std::isnan(ys[i]) && !std::isnan(want)
                           ? kInf
                           : tf::testing::float32_ulp_error(ys[i], want);
    if (err > w.ulp) w = {err, xs[i]};
  }
  return w;
}

// float32 tanh is a rational function on the CPU (ops/cpu/unary_ops.h: 5.1 ulp at most over every
// float32 with FMA, 6.0 on the baseline loops) and tanhf on a GPU. Every 4093rd float32 in
// [0, 9.5], their negatives and a few beyond: within 6.5 ulp of the rounded float64 value, odd,
// never beyond +-1, x itself near 0.
TEST_CASE("float32 tanh is within 6.5 ulp of float64 and odd and at most 1 in magnitude",
          "[cpu][cuda][unary]") {
  std::vector<float> xs;
  const uint32_t top = std::bit_cast<uint32_t>(9.5f);
  for (uint32_t b = 0; b < top; b += 4093) xs.push_back(std::bit_cast<float>(b));
  for (float v : {9.0f, 9.02f, 9.1f, 12.0f, 1e30f}) xs.push_back(v);
  const size_t half = xs.size();
  for (size_t i = 0; i < half; ++i) xs.push_back(-xs[i]);
  for (const auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    INFO(dev.to_string());
    const std::vector<float> ys = tf::tanh(tf::constant(xs)).numpy<float>();
    REQUIRE(ys.size() == xs.size());
    const WorstUlp worst = worst_ulp(xs, ys, [](double x) { return std::tanh(x); });
    bool bounded = true, odd = true;
    for (size_t i = 0; i < xs.size(); ++i) {
      bounded = bounded && std::abs(ys[i]) <= 1.0f;
      if (i < half) odd = odd && ys[i + half] == -ys[i];
    }
    INFO("worst at x = " << worst.x);
    CHECK(worst.ulp <= 6.5);
    CHECK(bounded);
    // tapeflow's CPU tanh is odd by construction; the CUDA library does not document it.
    if (dev.is_cpu()) CHECK(odd);
  }
  // x itself near 0, subnormals included (tapeflow's CPU loops; GPUs may flush subnormals).
  tf::DeviceScope cpu("/cpu:0");
  const auto tiny = tf::tanh(tf::constant({1e-30f, -3e-5f, 1e-40f})).numpy<float>();
  CHECK(tiny == std::vector<float>{1e-30f, -3e-5f, 1e-40f});
}

// float32 log1p on the CPU is log(1 + x) x / ((1 + x) - 1) (ops/cpu/unary_ops.h: 2.47 ulp at most
// over every float32 from -1 up). Every 4093rd float32 of [-1, inf) and a few edges: within 3 ulp
// of the rounded float64 value; -1, -0, inf, below -1 and x where 1 + x rounds to 1.
TEST_CASE("float32 log1p is within 3 ulp of float64 from -1 to the largest float",
          "[cpu][cuda][unary]") {
  std::vector<float> xs;
  for (uint32_t b = 0; b < std::bit_cast<uint32_t>(kInf32); b += 4093)
    xs.push_back(std::bit_cast<float>(b));
  for (uint32_t b = 0; b < std::bit_cast<uint32_t>(1.0f); b += 4093)
    xs.push_back(-std::bit_cast<float>(b));
  for (float v : {-1.0f, -0.99999994f, -0.5f, 5.9604645e-8f, 1e-3f, 0.0156249395f, 1.0f, 1e38f,
                  std::numeric_limits<float>::max()})
    xs.push_back(v);
  for (const auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    INFO(dev.to_string());
    const std::vector<float> ys = tf::log1p(tf::constant(xs)).numpy<float>();
    REQUIRE(ys.size() == xs.size());
    // -1 gives -inf, checked below.
    const WorstUlp worst = worst_ulp(xs, ys, [](double x) { return std::log1p(x); }, -1.0f);
    INFO("worst at x = " << worst.x);
    CHECK(worst.ulp <= 3.0);
    const auto edges =
        tf::log1p(tf::constant({-1.0f, -0.0f, kInf32, -2.0f, -kInf32})).numpy<float>();
    CHECK(edges[0] == -kInf32);
    CHECK((edges[1] == 0.0f && std::signbit(edges[1])));
    CHECK(edges[2] == kInf32);
    CHECK(std::isnan(edges[3]));
    CHECK(std::isnan(edges[4]));
  }
  // x itself where 1 + x rounds to 1, subnormals included (tapeflow's CPU loops).
  tf::DeviceScope cpu("/cpu:0");
  const auto tiny = tf::log1p(tf::constant({1e-30f, -2e-8f, 1e-40f})).numpy<float>();
  CHECK(tiny == std::vector<float>{1e-30f, -2e-8f, 1e-40f});
}

// float32 sin and cos on the CPU are computed in float64 and rounded once for |x| <= 2^20
// (ops/cpu/unary_ops.h: at most 0.5001 ulp over every such float32), the C library's sinf / cosf
// beyond; on a GPU the CUDA math library's (2 ulp). Every 4093rd float32 up to 2^20 and their
// negatives (within 0.51 ulp on the CPU), larger values (1 ulp), odd / even; then blocks mixing
// the vectorised range with values beyond it, an infinity and NaN (a full block of 256 and the
// short last one); sin(-0) = -0.
TEST_CASE("float32 sin and cos are within 1 ulp of float64 over the whole float range",
          "[cpu][cuda][unary]") {
  std::vector<float> xs;
  const uint32_t top = std::bit_cast<uint32_t>(1048576.0f);
  for (uint32_t b = 0; b <= top; b += 4093) xs.push_back(std::bit_cast<float>(b));
  for (float v : {1048576.0f, 1048577.0f, 3.0e6f, 1.0e7f, 123456789.0f, 1e20f, 3.4e38f,
                  3.14159274f, 1.57079637f, 0.0f})
    xs.push_back(v);
  const size_t half = xs.size();
  for (size_t i = 0; i < half; ++i) xs.push_back(-xs[i]);
  for (const auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    INFO(dev.to_string());
    const auto x = tf::constant(xs);
    const std::vector<float> s = tf::sin(x).numpy<float>();
    const std::vector<float> c = tf::cos(x).numpy<float>();
    REQUIRE(s.size() == xs.size());
    // tapeflow's own form up to 2^20 (0.51 ulp), the C library's beyond (sinf / cosf: 1 ulp).
    std::vector<float> inside, inside_s, inside_c;
    double beyond_worst = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
      if (std::abs(xs[i]) <= 1048576.0f) {
        inside.push_back(xs[i]);
        inside_s.push_back(s[i]);
        inside_c.push_back(c[i]);
      } else {
        for (const auto& [got, want] : {std::pair{s[i], std::sin(double{xs[i]})},
                                        std::pair{c[i], std::cos(double{xs[i]})}})
          beyond_worst = std::max(beyond_worst, std::isnan(got)
                                                    ? kInf
                                                    : tf::testing::float32_ulp_error(got, want));
      }
    }
    const WorstUlp ws = worst_ulp(inside, inside_s, [](double v) { return std::sin(v); });
    const WorstUlp wc = worst_ulp(inside, inside_c, [](double v) { return std::cos(v); });
    INFO("sin worst " << ws.ulp << " ulp at x = " << ws.x << ", cos worst " << wc.ulp
                      << " ulp at x = " << wc.x << ", beyond 2^20 " << beyond_worst);
    CHECK(ws.ulp <= (dev.is_cpu() ? 0.51 : 2.0));
    CHECK(wc.ulp <= (dev.is_cpu() ? 0.51 : 2.0));
    CHECK(beyond_worst <= (dev.is_cpu() ? 1.0 : 2.0));
    bool symmetric = true;
    for (size_t i = 0; i < half; ++i)
      symmetric = symmetric && s[i + half] == -s[i] && c[i + half] == c[i];
    if (dev.is_cpu()) CHECK(symmetric);
  }
  tf::DeviceScope cpu("/cpu:0");
  // A block mixing the vectorised range with values beyond it, an infinity and NaN.
  std::vector<float> mixed(300);
  for (size_t i = 0; i < mixed.size(); ++i) mixed[i] = 0.37f * static_cast<float>(i) - 50.0f;
  mixed[7] = 5.0e8f;
  mixed[100] = kInf32;
  mixed[200] = std::numeric_limits<float>::quiet_NaN();
  mixed[250] = -0.0f;
  mixed[290] = -3.0e7f;  // in the short last block
  const std::vector<float> ms = tf::sin(tf::constant(mixed)).numpy<float>();
  const std::vector<float> mc = tf::cos(tf::constant(mixed)).numpy<float>();
  for (size_t i = 0; i < mixed.size(); ++i) {
    INFO("x = " << mixed[i]);
    if (std::isnan(mixed[i]) || std::isinf(mixed[i])) {
      CHECK(std::isnan(ms[i]));
      CHECK(std::isnan(mc[i]));
    } else {
      CHECK(tf::testing::float32_ulp_error(ms[i], std::sin(double{mixed[i]})) <= 1.0);
      CHECK(tf::testing::float32_ulp_error(mc[i], std::cos(double{mixed[i]})) <= 1.0);
    }
  }
  CHECK((ms[250] == 0.0f && std::signbit(ms[250])));
  CHECK(mc[250] == 1.0f);
}

// float64 exp, tanh, sigmoid, log, log1p, sin and cos on the CPU are tapeflow's vectorised forms
// (ops/cpu/unary_ops.h; sin and cos up to |x| = 2^15), on a GPU the CUDA math library's (1 ulp
// for exp, tanh, log and log1p, 2 for sin and cos).
// Against the long double functions (64 bits of mantissa here): evenly spaced inputs over each
// function's range (log-spaced for log and log1p), a denser grid where tanh changes form
// (|x| = 0.7), 20000 random values in [-1, 1], powers of two from 2^-1074 up and the special
// values. A non-finite reference (NaN, an infinity, an overflow) must be matched exactly, and a
// NaN where the reference is finite counts as an infinite error.
TEST_CASE("float64 exp tanh sigmoid log log1p sin and cos are within about 1 ulp of long double",
          "[cpu][cuda][unary]") {
  if (std::numeric_limits<long double>::digits < 64) {
    WARN("skipped: long double is no wider than double here");
    return;
  }
  const auto grid = [](double lo, double hi, int n, std::vector<double>& xs) {
    for (int i = 0; i <= n; ++i) xs.push_back(lo + (hi - lo) * i / n);
  };
  const auto log_grid = [](double lo, double hi, int n, double sign, std::vector<double>& xs) {
    for (int i = 0; i <= n; ++i)
      xs.push_back(sign * std::exp(std::log(lo) + (std::log(hi) - std::log(lo)) * i / n));
  };
  std::vector<double> common;
  uint64_t state = tf::detail::kSplitmix64Gamma;  // splitmix64: the same values everywhere
  for (int i = 0; i < 20000; ++i) {
    const uint64_t z = tf::detail::splitmix64_next(state);
    common.push_back(static_cast<double>(z >> 11) * 0x1p-52 - 1.0);
  }
  for (int e = -1074; e <= 1023; ++e) {
    common.push_back(std::ldexp(1.0, e));
    common.push_back(-std::ldexp(1.0, e));
  }
  for (double v : {0.0, -0.0, 1.0, -1.0, 0.5, 0.7, -0.7, std::nextafter(0.7, 0.0), kInf, -kInf,
                   kNan, -0.2928, 0.4142, std::numeric_limits<double>::max()})
    common.push_back(v);
  struct Fn {
    const char* name;
    tf::Tensor (*op)(const tf::Tensor&);
    long double (*ref)(long double);
    std::vector<double> xs;
    double cpu_bound, gpu_bound;
  };
  // The largest errors over these inputs on one AVX-512 machine, with FMA: 0.96, 1.24, 1.98,
  // 0.74, 0.98 and for sin and cos about 0.8 ulp (bench/accuracy/float64_ulp.cpp finds up to
  // 1.006, 1.29, 2.39, 0.86, 1.21 and 0.80 over 10M random inputs per range).
  std::vector<Fn> fns = {
      {"exp", &tf::exp, [](long double x) { return std::exp(x); }, common, 1.05, 2.0},
      {"tanh", &tf::tanh, [](long double x) { return std::tanh(x); }, common, 1.3, 2.0},
      {"sigmoid", &tf::sigmoid, [](long double x) { return 1 / (1 + std::exp(-x)); }, common,
       2.5, 3.5},
      {"log", &tf::log, [](long double x) { return std::log(x); }, common, 1.0, 2.0},
      {"log1p", &tf::log1p, [](long double x) { return std::log1p(x); }, common, 1.3, 2.0},
      {"sin", &tf::sin, [](long double x) { return std::sin(x); }, common, 1.0, 2.5},
      {"cos", &tf::cos, [](long double x) { return std::cos(x); }, common, 1.0, 2.5}};
  grid(-745.2, 709.8, 400000, fns[0].xs);
  grid(-21.0, 21.0, 400000, fns[1].xs);
  grid(0.6, 0.8, 100000, fns[1].xs);
  grid(-745.2, 40.0, 400000, fns[2].xs);
  log_grid(5e-324, 1.7e308, 400000, 1.0, fns[3].xs);
  grid(0.5, 2.0, 100000, fns[3].xs);
  grid(-1.0, 1.0, 200000, fns[4].xs);
  log_grid(1e-300, 1.7e308, 200000, 1.0, fns[4].xs);
  log_grid(1e-300, 0.999, 200000, -1.0, fns[4].xs);
  // sin and cos: a grid, and the doubles nearest k pi/2 (where the reduction cancels most) up to
  // and past the vectorised range's end (2^15), beyond which the C library's functions run.
  for (size_t f = 5; f <= 6; ++f) {
    grid(-40000.0, 40000.0, 400000, fns[f].xs);
    for (int k = 1; k <= 26000; ++k) {
      const double t = static_cast<double>(k * 1.5707963267948966192313216916397514L);
      for (double v : {t, std::nextafter(t, 0.0), std::nextafter(t, kInf)}) {
        fns[f].xs.push_back(v);
        fns[f].xs.push_back(-v);
      }
    }
  }
  for (const auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    for (const Fn& f : fns) {
      INFO(dev.to_string() << " " << f.name);
      const std::vector<double> ys = f.op(tf::constant(f.xs)).numpy<double>();
      REQUIRE(ys.size() == f.xs.size());
      double worst = 0, worst_x = 0;
      for (size_t i = 0; i < ys.size(); ++i) {
        const long double want = f.ref(f.xs[i]);
        const double w = static_cast<double>(want);
        double err;
        if (!std::isfinite(w))
          err = ys[i] == w || (std::isnan(w) && std::isnan(ys[i])) ? 0 : kInf;
        else
          err = std::isnan(ys[i]) ? kInf : tf::testing::float64_ulp_error(ys[i], want);
        if (err > worst) worst = err, worst_x = f.xs[i];
      }
      INFO("worst " << worst << " ulp at x = " << worst_x);
      CHECK(worst <= (dev.is_cpu() ? f.cpu_bound : f.gpu_bound));
    }
  }
  tf::DeviceScope cpu("/cpu:0");
  const auto e = tf::exp(tf::constant({kInf, -kInf, kNan, 709.8, -745.2, -0.0})).numpy<double>();
  CHECK(e[0] == kInf);
  CHECK(e[1] == 0.0);
  CHECK(std::isnan(e[2]));
  CHECK(e[3] == kInf);  // overflow
  CHECK(e[4] == 0.0);   // below the smallest subnormal
  CHECK(e[5] == 1.0);
  const auto t = tf::tanh(tf::constant({kInf, -kInf, kNan, -0.0, 1e-300, 19.1})).numpy<double>();
  CHECK(t[0] == 1.0);
  CHECK(t[1] == -1.0);
  CHECK(std::isnan(t[2]));
  CHECK((t[3] == 0.0 && std::signbit(t[3])));
  CHECK(t[4] == 1e-300);
  CHECK(t[5] == 1.0);
  const auto s = tf::sigmoid(tf::constant({kInf, -kInf, kNan, -800.0})).numpy<double>();
  CHECK(s[0] == 1.0);
  CHECK(s[1] == 0.0);
  CHECK(std::isnan(s[2]));
  CHECK(s[3] == 0.0);
  const auto l = tf::log(tf::constant({0.0, -0.0, -1e-300, kInf, kNan, 5e-324})).numpy<double>();
  CHECK(l[0] == -kInf);
  CHECK(l[1] == -kInf);
  CHECK(std::isnan(l[2]));
  CHECK(l[3] == kInf);
  CHECK(std::isnan(l[4]));
  CHECK(l[5] == std::log(5e-324));
  const auto l1 = tf::log1p(tf::constant({-1.0, -0.0, -2.0, kInf, 1e-300, -1e-310}))
                      .numpy<double>();
  CHECK(l1[0] == -kInf);
  CHECK((l1[1] == 0.0 && std::signbit(l1[1])));
  CHECK(std::isnan(l1[2]));
  CHECK(l1[3] == kInf);
  CHECK(l1[4] == 1e-300);
  CHECK(l1[5] == -1e-310);
  const auto sc = tf::sin(tf::constant({-0.0, kInf, kNan, 1e-310, 1e300})).numpy<double>();
  CHECK((sc[0] == 0.0 && std::signbit(sc[0])));
  CHECK(std::isnan(sc[1]));
  CHECK(std::isnan(sc[2]));
  CHECK(sc[3] == 1e-310);
  CHECK(sc[4] == std::sin(1e300));
}

#if TF_CPU_MULTIVERSION
// ops/cpu/math_avx512.h claims the bits of the compiler's AVX-512 loops over exp_fast, tanh_any
// and sigmoid_any (checked once over all 2^32 inputs); here every 4093rd float32 bit pattern and
// every tail length up to 37.
TEST_CASE("AVX-512 exp tanh and sigmoid give the bits of the scalar forms' loops",
          "[cpu][unary]") {
  if (tf::cpu::cpu_level() != tf::cpu::CpuLevel::Avx512) {
    WARN("this CPU runs no AVX-512 loops (or TAPEFLOW_CPU_ISA caps them): skipped");
    return;
  }
  std::vector<float> xs;
  for (uint64_t b = 0; b < (uint64_t{1} << 32); b += 4093)
    xs.push_back(std::bit_cast<float>(static_cast<uint32_t>(b)));
  for (float v : {-104.0f, -103.97f, 88.72f, 89.0f, 9.1f, -9.1f, 0.0f, -0.0f, kInf32, -kInf32})
    xs.push_back(v);
  const int64_t n = static_cast<int64_t>(xs.size());
  std::vector<float> want(xs.size()), got(xs.size());
  auto same = [&](int64_t count) {
    for (int64_t i = 0; i < count; ++i) {
      const float w = want[static_cast<size_t>(i)], g = got[static_cast<size_t>(i)];
      if (std::isnan(w) ? !std::isnan(g) : std::bit_cast<uint32_t>(w) != std::bit_cast<uint32_t>(g))
        return false;
    }
    return true;
  };
  tf::testing::exp_scalar_form_avx512(xs.data(), want.data(), n);
  tf::cpu::map16<tf::cpu::exp16>(xs.data(), got.data(), n);
  CHECK(same(n));
  tf::testing::tanh_scalar_form_avx512(xs.data(), want.data(), n);
  tf::cpu::map16<tf::cpu::tanh16>(xs.data(), got.data(), n);
  CHECK(same(n));
  tf::testing::sigmoid_scalar_form_avx512(xs.data(), want.data(), n);
  tf::cpu::map16<tf::cpu::sigmoid16>(xs.data(), got.data(), n);
  CHECK(same(n));
  // Tails: the masked last vector reads and writes only the first n elements. The input is a
  // heap block of exactly n floats (AddressSanitizer sees an unmasked read past it) and the
  // output is followed by guard values.
  for (int64_t len = 0; len <= 37; ++len) {
    std::unique_ptr<float[]> in(new float[static_cast<size_t>(len)]);
    std::copy_n(xs.begin() + 1000, len, in.get());
    std::fill(got.begin(), got.begin() + 64, -7.0f);
    tf::testing::exp_scalar_form_avx512(in.get(), want.data(), len);
    tf::cpu::map16<tf::cpu::exp16>(in.get(), got.data(), len);
    CHECK(same(len));
    CHECK(std::all_of(got.begin() + len, got.begin() + 64, [](float v) { return v == -7.0f; }));
  }
}
#endif

TEST_CASE("float16 and bfloat16 inputs compute in float and store back", "[cpu][cuda][unary]") {
  for (const auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    const auto h = tf::detail::from_doubles({0.5, 1.5, 2.5, -1.0, 11.0, 65504.0}, {6}, tf::float16);
    auto y = tf::round(h);
    CHECK(y.dtype() == tf::float16);
    check_values(y, {0, 2, 2, -1, 11, 65504});
    // exp(11) = 59874.14 is stored as the nearest float16, 59872.
    check_values(tf::exp(h), {std::exp(0.5), std::exp(1.5), std::exp(2.5), std::exp(-1.0), 59872,
                              kInf},
                 1e-3);
    const auto b = tf::detail::from_doubles({1.0, 4.0, 100.0}, {3}, tf::bfloat16);
    auto s = tf::sqrt(b);
    CHECK(s.dtype() == tf::bfloat16);
    check_values(s, {1, 2, 10});
    check_values(tf::square(b), {1, 16, 9984});  // 10000 rounded to bfloat16
    check_values(tf::negative(b), {-1, -4, -100});
  }
}

TEST_CASE("cast converts between every pair of dtypes", "[cpu][cuda][unary][cast]") {
  for (const auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    // Values every dtype holds exactly.
    const std::vector<double> small = {0, 1, 2, 3, 0, 100};
    for (const auto from : kAllDTypes) {
      for (const auto to : kAllDTypes) {
        INFO(tf::dtype_name(from) << " -> " << tf::dtype_name(to) << " on " << dev.to_string());
        const auto x = tf::detail::from_doubles(small, {2, 3}, from);
        const auto y = tf::cast(x, to);
        CHECK(y.dtype() == to);
        CHECK(y.shape() == tf::TensorShape({2, 3}));
        std::vector<double> want;
        for (double v : tf::detail::to_double_vector(x)) want.push_back(to == tf::bool_ ? v != 0 : v);
        check_values(y, want, 0, 0);
      }
    }
    // float -> int truncates toward zero.
    const auto f = tf::constant({1.7f, -1.7f, 2.5f, -0.5f, 0.0f, 1e9f});
    CHECK(tf::cast(f, tf::int32).numpy<int32_t>() ==
          std::vector<int32_t>{1, -1, 2, 0, 0, 1000000000});
    CHECK(tf::cast(f, tf::int64).numpy<int64_t>() ==
          std::vector<int64_t>{1, -1, 2, 0, 0, 1000000000});
    CHECK(tf::cast(tf::constant({3.9, 200.2, 255.0}), tf::uint8).numpy<int>() ==
          std::vector<int>{3, 200, 255});
    // Beyond the integer's range float -> int saturates and NaN gives 0, on every device (as
    // CUDA's conversions; C++'s static_cast is undefined there). uint8 goes through int32.
    const float inf32 = std::numeric_limits<float>::infinity();
    auto saturated = [](double v, double limit) {  // limit: 2^31 or 2^63
      return std::isnan(v) ? 0.0 : v <= -limit ? -limit : v >= limit ? limit - 1 : std::trunc(v);
    };
    for (const auto from : {tf::float16, tf::bfloat16, tf::float32, tf::float64}) {
      INFO(tf::dtype_name(from) << " on " << dev.to_string());
      const auto x = tf::cast(tf::constant({float(kNan), inf32, -inf32, 1e10f, -1e10f, 65504.0f,
                                            2147483648.0f, -2147483648.0f, -1.5f}),
                              from);
      std::vector<int32_t> want32;
      std::vector<int64_t> want64;
      std::vector<int> want8;
      for (double v : tf::cast(x, tf::float64).numpy<double>()) {
        const double s32 = saturated(v, 0x1p31);
        want32.push_back(s32 == 0x1p31 - 1 ? std::numeric_limits<int32_t>::max()
                                           : static_cast<int32_t>(s32));
        want8.push_back(static_cast<uint8_t>(want32.back()));
        const double s64 = saturated(v, 0x1p63);
        want64.push_back(s64 >= 0x1p63 - 1 ? std::numeric_limits<int64_t>::max()
                                           : static_cast<int64_t>(s64));
      }
      CHECK(tf::cast(x, tf::int32).numpy<int32_t>() == want32);
      CHECK(tf::cast(x, tf::int64).numpy<int64_t>() == want64);
      CHECK(tf::cast(x, tf::uint8).numpy<int>() == want8);
    }
    CHECK(
        tf::cast(tf::constant({1e19, -1e19, 9.2233720368547758e18}), tf::int64).numpy<int64_t>() ==
        std::vector<int64_t>{std::numeric_limits<int64_t>::max(),
                             std::numeric_limits<int64_t>::min(),
                             std::numeric_limits<int64_t>::max()});
    // To bool: x != 0 (NaN is true); from bool: 0 / 1.
    CHECK(tf::cast(tf::constant({0.0f, -0.0f, 0.5f, float(kNan), -2.0f}), tf::bool_)
              .numpy<bool>() == std::vector<bool>{false, false, true, true, true});
    CHECK(tf::cast(tf::constant(std::vector<int64_t>{0, 7, -1}), tf::bool_).numpy<bool>() ==
          std::vector<bool>{false, true, true});
    check_values(tf::cast(tf::constant({true, false, true}), tf::float32), {1, 0, 1});
    check_values(tf::cast(tf::constant({true, false}), tf::float16), {1, 0});
    // To and from float16: rounding to nearest even, overflow to inf.
    const auto h = tf::cast(tf::constant({2049.0f, 65520.0f, 1.0f / 3.0f, -0.0f}), tf::float16);
    CHECK(h.dtype() == tf::float16);
    check_values(h, {2048, kInf, 0.333251953125, 0}, 0, 0);
    check_values(tf::cast(h, tf::float32), {2048, kInf, 0.333251953125, 0}, 0, 0);
    check_values(tf::cast(tf::cast(tf::constant({-3.75f, 1000.5f}), tf::float16), tf::int32),
                 {-3, 1000}, 0, 0);
    check_values(tf::cast(tf::constant({3.140625f, 1.00390625f}), tf::bfloat16), {3.140625, 1},
                 0, 0);
    check_values(tf::cast(tf::constant(std::vector<int32_t>{2049, -3}), tf::float16),
                 {2048, -3}, 0, 0);
    // int64 -> int32 wraps modulo 2^32.
    CHECK(tf::cast(tf::constant(std::vector<int64_t>{(int64_t{1} << 32) + 5, -1}), tf::int32)
              .numpy<int32_t>() == std::vector<int32_t>{5, -1});
    // Same dtype: the tensor itself; a C++ scalar becomes a strong tensor.
    const auto g = tf::constant({1.f, 2.f});
    CHECK(tf::cast(g, tf::float32).is_same(g));
    const auto s = tf::cast(2.5f, tf::float32);
    CHECK_FALSE(s.is_weak());
    CHECK(s.item<float>() == 2.5f);
    CHECK(tf::cast(tf::zeros({0, 2}), tf::int32).shape() == tf::TensorShape({0, 2}));
  }
  require_error([] { tf::cast(tf::Tensor(), tf::float32); }, {"[cast]", "undefined"});
}

// Every pair of dtypes over sizes and offsets that take the GPU's vector, head and tail paths:
// the element sizes differ, so the vector width is set by the wider type.
TEST_CASE("cast between every pair of dtypes on odd sizes and offset views",
          "[cpu][cuda][unary][cast]") {
  for (const auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    for (const int64_t n : {int64_t{1}, int64_t{5}, int64_t{4099}}) {
      std::vector<double> vals(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) vals[i] = static_cast<double>((i * 37) % 101);  // exact
      for (const auto from : kAllDTypes) {
        for (const int64_t offset : {int64_t{0}, int64_t{1}}) {
          const auto x = offset_input(vals, from, offset);
          const auto xin = tf::detail::to_double_vector(x);
          for (const auto to : kAllDTypes) {
            INFO(tf::dtype_name(from) << " -> " << tf::dtype_name(to) << ", n " << n
                                      << ", offset " << offset << " on " << dev.to_string());
            const auto y = tf::cast(x, to);
            REQUIRE(y.dtype() == to);
            std::vector<double> want;
            for (double v : xin) want.push_back(to == tf::bool_ ? v != 0 : v);
            check_values(y, want, 0, 0);
          }
        }
      }
    }
    // Fractions and negatives from each floating dtype to the integer ones (truncation toward
    // zero; uint8 wraps through int32) and to bool, at an odd size.
    std::vector<double> f;
    for (int i = 0; i < 1031; ++i) f.push_back((i % 2 ? -1 : 1) * (i % 97) * 0.375);
    for (const auto from : {tf::float16, tf::bfloat16, tf::float32, tf::float64}) {
      const auto x = offset_input(f, from, 1);
      const auto xin = tf::detail::to_double_vector(x);
      for (const auto to : {tf::int32, tf::int64, tf::uint8, tf::bool_}) {
        INFO(tf::dtype_name(from) << " -> " << tf::dtype_name(to) << " on " << dev.to_string());
        std::vector<double> want;
        for (double v : xin) {
          if (to == tf::bool_) want.push_back(v != 0);
          else if (to == tf::uint8) want.push_back(static_cast<uint8_t>(static_cast<int32_t>(v)));
          else want.push_back(std::trunc(v));
        }
        check_values(tf::cast(x, to), want, 0, 0);
      }
    }
  }
}

TEST_CASE("unary primitives are elementwise and carry their attributes", "[cpu][unary]") {
  CHECK(tf::prims::Exp{}.is_elementwise());
  CHECK(tf::prims::LogicalNot{}.is_elementwise());
  CHECK(tf::prims::Cast{tf::int32}.is_elementwise());
  CHECK(std::string(tf::prims::Round{}.name()) == "round");
  CHECK(tf::prims::Cast{tf::int32}.attributes() == "dtype=int32");
  CHECK(tf::prims::Cast{tf::int32}.is_equivalent(tf::prims::Cast{tf::int32}));
  CHECK_FALSE(tf::prims::Cast{tf::int32}.is_equivalent(tf::prims::Cast{tf::int64}));
}

// sign(-0.0) returned -0.0; TF's is +0 (sign of either zero is 0.0), on every floating dtype and
// device. NaN stays NaN.
TEST_CASE("sign of a negative zero is positive zero", "[cpu][cuda][unary]") {
  for (const auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    for (const auto d : {tf::float16, tf::bfloat16, tf::float32, tf::float64}) {
      INFO(tf::dtype_name(d) << " on " << dev.to_string());
      const auto x = tf::detail::from_doubles({-0.0, 0.0, -2.0, 3.0, std::nan("")}, {5}, d);
      const auto y = tf::detail::to_double_vector(tf::sign(x));
      CHECK_FALSE(std::signbit(y[0]));
      CHECK(y[0] == 0.0);
      CHECK_FALSE(std::signbit(y[1]));
      CHECK(y[2] == -1.0);
      CHECK(y[3] == 1.0);
      CHECK(std::isnan(y[4]));
    }
  }
}
