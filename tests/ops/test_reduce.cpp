// Reductions and argmax/argmin against plain float64 reference loops, on every device under
// test: every axis subset of a (2, 3, 4) tensor in every dtype, keepdims both ways, negative
// axes, empty dimensions, integer wrap-around, NaN, the kernel's large-shape paths, and the
// error messages.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "autograd/tape.h"
#include "core/device.h"
#include "core/error.h"
#include "jit/function.h"
#include "ops/binary.h"
#include "ops/dispatch.h"
#include "ops/factory.h"
#include "ops/helpers.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "support/testing.h"

// From core/parallel.h, which test binaries (built without -fopenmp) cannot include: its
// OpenMP pragma is an unknown-pragma error there.
namespace tapeflow::detail {
int num_threads();
void set_num_threads(int n);
}  // namespace tapeflow::detail

namespace tf = tapeflow;
using tf::testing::check_values;

namespace {

enum class RK { Sum, Prod, Max, Min, Mean };

const char* rk_name(RK k) {
  switch (k) {
    case RK::Sum:
      return "reduce_sum";
    case RK::Prod:
      return "reduce_prod";
    case RK::Max:
      return "reduce_max";
    case RK::Min:
      return "reduce_min";
    case RK::Mean:
      return "reduce_mean";
  }
  return "";
}

tf::Tensor call(RK k, const tf::Tensor& x, const std::vector<int>& axes, bool keepdims) {
  switch (k) {
    case RK::Sum:
      return tf::reduce_sum(x, axes, keepdims);
    case RK::Prod:
      return tf::reduce_prod(x, axes, keepdims);
    case RK::Max:
      return tf::reduce_max(x, axes, keepdims);
    case RK::Min:
      return tf::reduce_min(x, axes, keepdims);
    case RK::Mean:
      return tf::reduce_mean(x, axes, keepdims);
  }
  return {};
}
tf::Tensor call_all(RK k, const tf::Tensor& x) {
  switch (k) {
    case RK::Sum:
      return tf::reduce_sum(x);
    case RK::Prod:
      return tf::reduce_prod(x);
    case RK::Max:
      return tf::reduce_max(x);
    case RK::Min:
      return tf::reduce_min(x);
    case RK::Mean:
      return tf::reduce_mean(x);
  }
  return {};
}
tf::Tensor call_one(RK k, const tf::Tensor& x, int axis, bool keepdims) {
  switch (k) {
    case RK::Sum:
      return tf::reduce_sum(x, axis, keepdims);
    case RK::Prod:
      return tf::reduce_prod(x, axis, keepdims);
    case RK::Max:
      return tf::reduce_max(x, axis, keepdims);
    case RK::Min:
      return tf::reduce_min(x, axis, keepdims);
    case RK::Mean:
      return tf::reduce_mean(x, axis, keepdims);
  }
  return {};
}

// The value an integer accumulator (wrapping modulo 2^bits) leaves in `dt`.
double wrap_int(uint64_t v, tf::DType dt) {
  if (dt == tf::int32) return static_cast<double>(static_cast<int32_t>(static_cast<uint32_t>(v)));
  if (dt == tf::uint8) return static_cast<double>(static_cast<uint8_t>(v));
  return static_cast<double>(static_cast<int64_t>(v));
}

double lowest_of(tf::DType dt) {
  if (tf::is_floating(dt)) return -INFINITY;
  if (dt == tf::int32) return std::numeric_limits<int32_t>::lowest();
  if (dt == tf::int64) return static_cast<double>(std::numeric_limits<int64_t>::lowest());
  return 0;
}
double highest_of(tf::DType dt) {
  if (tf::is_floating(dt)) return INFINITY;
  if (dt == tf::int32) return std::numeric_limits<int32_t>::max();
  if (dt == tf::int64) return static_cast<double>(std::numeric_limits<int64_t>::max());
  return 255;
}

struct Ref {
  std::vector<int64_t> shape;  // output shape
  std::vector<double> values;
};

// Plain loops: each input element goes to the output element of its kept coordinates.
Ref reference(RK k, const std::vector<double>& x, const std::vector<int64_t>& shape,
              const std::vector<int>& axes, bool keepdims, tf::DType dt) {
  const int r = static_cast<int>(shape.size());
  std::vector<bool> red(static_cast<size_t>(r), false);
  for (int a : axes) red[a < 0 ? a + r : a] = true;
  Ref out;
  int64_t n_out = 1, count = 1;
  for (int d = 0; d < r; ++d) {
    if (red[d]) {
      count *= shape[d];
      if (keepdims) out.shape.push_back(1);
    } else {
      out.shape.push_back(shape[d]);
      n_out *= shape[d];
    }
  }
  const bool fl = tf::is_floating(dt);
  std::vector<double> acc(static_cast<size_t>(n_out));
  std::vector<uint64_t> iacc(static_cast<size_t>(n_out));
  for (int64_t o = 0; o < n_out; ++o) {
    switch (k) {
      case RK::Sum:
      case RK::Mean:
        acc[o] = 0, iacc[o] = 0;
        break;
      case RK::Prod:
        acc[o] = 1, iacc[o] = 1;
        break;
      case RK::Max:
        acc[o] = lowest_of(dt);
        break;
      case RK::Min:
        acc[o] = highest_of(dt);
        break;
    }
  }
  for (size_t i = 0; i < x.size(); ++i) {
    int64_t rem = static_cast<int64_t>(i), o = 0, mul = 1;
    for (int d = r - 1; d >= 0; --d) {
      const int64_t c = rem % shape[d];
      rem /= shape[d];
      if (!red[d]) {
        o += c * mul;
        mul *= shape[d];
      }
    }
    const double v = x[i];
    switch (k) {
      case RK::Sum:
      case RK::Mean:
        acc[o] += v;
        iacc[o] += static_cast<uint64_t>(static_cast<int64_t>(v));
        break;
      case RK::Prod:
        acc[o] *= v;
        iacc[o] *= static_cast<uint64_t>(static_cast<int64_t>(v));
        break;
      case RK::Max:
        acc[o] = (std::isnan(v) || std::isnan(acc[o])) ? NAN : std::max(acc[o], v);
        break;
      case RK::Min:
        acc[o] = (std::isnan(v) || std::isnan(acc[o])) ? NAN : std::min(acc[o], v);
        break;
    }
  }
  for (int64_t o = 0; o < n_out; ++o) {
    double v = acc[o];
    if (!fl && (k == RK::Sum || k == RK::Prod)) v = wrap_int(iacc[o], dt);
    if (k == RK::Mean) {
      if (fl)
        v = acc[o] / static_cast<double>(count);
      else
        v = count == 0 ? 0.0 : std::trunc(wrap_int(iacc[o], dt) / static_cast<double>(count));
    }
    out.values.push_back(v);
  }
  return out;
}

double rtol_of(tf::DType dt) {
  if (dt == tf::float16) return 2e-3;
  if (dt == tf::bfloat16) return 1e-2;
  if (dt == tf::float32) return 1e-5;
  if (dt == tf::float64) return 1e-12;
  return 0;
}

// Deterministic inputs of `dt`: floats in [-1, 1); integers in a small range.
tf::Tensor input(const std::vector<int64_t>& shape, tf::DType dt, unsigned seed = 7) {
  size_t n = 1;
  for (auto d : shape) n *= static_cast<size_t>(d);
  auto v = tf::testing::random_values(n, -1.0, 1.0, seed);
  if (!tf::is_floating(dt))
    for (auto& x : v) x = dt == tf::uint8 ? std::floor((x + 1) * 6) : std::round(x * 5);
  return tf::detail::from_doubles(v, tf::TensorShape(shape), dt);
}

void check_against_reference(RK k, const tf::Tensor& x, const std::vector<int>& axes, bool keepdims,
                             const tf::Tensor& got) {
  const auto ref =
      reference(k, tf::detail::to_double_vector(x), x.shape().dims(), axes, keepdims, x.dtype());
  INFO(rk_name(k) << " of " << x.shape().to_string() << " " << tf::dtype_name(x.dtype()) << " axes "
                  << tf::detail::vec_to_string(axes) << " keepdims " << keepdims);
  CHECK(got.dtype() == x.dtype());
  CHECK(got.shape() == tf::TensorShape(ref.shape));
  const double rt = rtol_of(x.dtype());
  check_values(got, ref.values, rt, rt);
}

const std::vector<tf::DType> kNumeric = {tf::float32, tf::float64, tf::float16, tf::bfloat16,
                                         tf::int32,   tf::int64,   tf::uint8};

void run_subset_table(RK k) {
  const std::vector<int64_t> shape = {2, 3, 4};
  for (auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    for (auto dt : kNumeric) {
      const tf::Tensor x = input(shape, dt);
      for (int mask = 0; mask < 8; ++mask) {
        std::vector<int> axes, neg;
        for (int a = 0; a < 3; ++a)
          if (mask & (1 << a)) {
            axes.push_back(a);
            neg.push_back(a - 3);
          }
        for (bool keep : {false, true}) {
          check_against_reference(k, x, axes, keep, call(k, x, axes, keep));
          check_against_reference(k, x, neg, keep, call(k, x, neg, keep));
          if (axes.size() == 1)
            check_against_reference(k, x, axes, keep, call_one(k, x, neg[0], keep));
        }
        // Unsorted axes are accepted.
        if (axes.size() >= 2) {
          std::vector<int> rev(axes.rbegin(), axes.rend());
          check_against_reference(k, x, axes, false, call(k, x, rev, false));
        }
      }
      check_against_reference(k, x, {0, 1, 2}, false, call_all(k, x));
    }
  }
}

}  // namespace

TEST_CASE("reduce_sum over every axis subset matches a float64 reference", "[cpu][reduce]") {
  run_subset_table(RK::Sum);
}
TEST_CASE("reduce_prod over every axis subset matches a float64 reference", "[cpu][reduce]") {
  run_subset_table(RK::Prod);
}
TEST_CASE("reduce_max over every axis subset matches a float64 reference", "[cpu][reduce]") {
  run_subset_table(RK::Max);
}
TEST_CASE("reduce_min over every axis subset matches a float64 reference", "[cpu][reduce]") {
  run_subset_table(RK::Min);
}
TEST_CASE("reduce_mean over every axis subset matches a float64 reference",
          "[cpu][reduce][reduce_mean]") {
  run_subset_table(RK::Mean);
}

TEST_CASE("reduce_mean truncates for integers and gives NaN over empty float sets",
          "[cpu][cuda][reduce][reduce_mean]") {
  for (auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    auto m = tf::reduce_mean(tf::constant({1, 2}));
    CHECK(m.dtype() == tf::int32);
    check_values(m, {1});
    check_values(tf::reduce_mean(tf::constant({-1, -2})), {-1});
    check_values(tf::reduce_mean(tf::constant<int64_t>({7, 7, 8})), {7});
    // The sum does not wrap in the input's type (TF's mean of values a type holds is one it
    // holds): two INT_MAX, uint8 200 and 101.
    const auto big = tf::reduce_mean(tf::constant<int32_t>({2147483647, 2147483647}));
    CHECK(big.dtype() == tf::int32);
    check_values(big, {2147483647.0});
    const auto bytes = tf::reduce_mean(tf::cast(tf::constant({200, 101}), tf::uint8));
    CHECK(bytes.dtype() == tf::uint8);
    check_values(bytes, {150});
    auto e = tf::reduce_mean(tf::zeros({2, 0}), 1);
    CHECK(e.shape() == tf::TensorShape({2}));
    check_values(e, {NAN, NAN});
    check_values(tf::reduce_mean(tf::zeros({2, 0}, tf::int32), 1), {0, 0});
    auto h = tf::reduce_mean(tf::ones({3000}, tf::float16));
    CHECK(h.dtype() == tf::float16);
    check_values(h, {1.0});
    TF_REQUIRE_THROWS_CONTAINING(tf::reduce_mean(tf::constant({true})), tf::InvalidArgumentError,
                                 "[reduce_mean] is not defined for bool");
  }
}

TEST_CASE("reduce_any and reduce_all over bool tensors", "[cpu][cuda][reduce]") {
  for (auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    // (2, 3): rows [T F F], [F F F]
    auto x = tf::constant(std::vector<bool>{true, false, false, false, false, false}, {2, 3});
    auto any1 = tf::reduce_any(x, 1);
    CHECK(any1.dtype() == tf::bool_);
    check_values(any1, {1, 0});
    check_values(tf::reduce_all(x, 1), {0, 0});
    check_values(tf::reduce_any(x, 0), {1, 0, 0});
    check_values(tf::reduce_any(x), {1});
    check_values(tf::reduce_all(x), {0});
    auto keep = tf::reduce_any(x, {-1}, true);
    CHECK(keep.shape() == tf::TensorShape({2, 1}));
    auto t = tf::constant(std::vector<bool>{true, true, true, false}, {2, 2});
    check_values(tf::reduce_all(t, 1), {1, 0});
    check_values(tf::reduce_all(t, 0), {1, 0});
    check_values(tf::reduce_all(t, std::vector<int>{}), {1, 1, 1, 0});
    // Over empty sets: any is false, all is true.
    auto e = tf::zeros({2, 0}, tf::bool_);
    check_values(tf::reduce_any(e, 1), {0, 0});
    check_values(tf::reduce_all(e, 1), {1, 1});
    check_values(tf::reduce_all(e), {1});
    TF_REQUIRE_THROWS_CONTAINING(tf::reduce_any(tf::constant({1.0f})), tf::InvalidArgumentError,
                                 "[reduce_any] expects a bool tensor, got float32");
    TF_REQUIRE_THROWS_CONTAINING(tf::reduce_all(tf::constant({1})), tf::InvalidArgumentError,
                                 "[reduce_all] expects a bool tensor, got int32");
  }
}

TEST_CASE("reductions over empty dimensions give the identity", "[cpu][cuda][reduce]") {
  for (auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    for (auto dt : kNumeric) {
      INFO(tf::dtype_name(dt));
      const auto x = tf::zeros({2, 0, 3}, dt);
      auto s = tf::reduce_sum(x, 1);
      CHECK(s.shape() == tf::TensorShape({2, 3}));
      CHECK(s.dtype() == dt);
      check_values(s, std::vector<double>(6, 0.0));
      check_values(tf::reduce_prod(x, 1), std::vector<double>(6, 1.0));
      check_values(tf::reduce_max(x, {1}, true), std::vector<double>(6, lowest_of(dt)));
      check_values(tf::reduce_min(x, 1), std::vector<double>(6, highest_of(dt)));
      check_values(tf::reduce_sum(x), {0.0});
      // Keeping the empty dimension leaves an empty result.
      auto k = tf::reduce_sum(x, 0);
      CHECK(k.shape() == tf::TensorShape({0, 3}));
      CHECK(k.num_elements() == 0);
    }
  }
}

TEST_CASE("reductions keep the dtype: integer sums wrap around as TF's", "[cpu][cuda][reduce]") {
  for (auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    auto s = tf::reduce_sum(tf::constant({2147483647, 1}));
    CHECK(s.dtype() == tf::int32);
    check_values(s, {-2147483648.0});
    auto u = tf::reduce_sum(tf::constant<uint8_t>({200, 100}));
    CHECK(u.dtype() == tf::uint8);
    check_values(u, {44});
    auto p = tf::reduce_prod(tf::constant<int64_t>({1LL << 40, 1LL << 30}));
    CHECK(p.dtype() == tf::int64);
    check_values(p, {0});  // 2^70 wraps to 0 modulo 2^64
    // A scalar reduces to itself.
    auto sc = tf::reduce_sum(tf::constant(3.5f));
    CHECK(sc.shape() == tf::TensorShape{});
    check_values(sc, {3.5});
    check_values(tf::reduce_max(tf::constant(-2), std::vector<int>{}, true), {-2});
  }
}

TEST_CASE("a braced empty axis list reduces nothing as TF axis=[] does", "[cpu][reduce]") {
  // {} takes the initializer_list overload (it used to value-initialise the int axis: axis 0).
  const tf::Tensor x = tf::constant(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  for (bool keepdims : {false, true}) {
    for (const tf::Tensor& r :
         {tf::reduce_sum(x, {}, keepdims), tf::reduce_mean(x, {}, keepdims),
          tf::reduce_max(x, {}, keepdims), tf::reduce_min(x, {}, keepdims),
          tf::reduce_prod(x, {}, keepdims)}) {
      CHECK(r.shape() == tf::TensorShape({2, 3}));
      check_values(r, {1, 2, 3, 4, 5, 6});
    }
    const tf::Tensor b = tf::greater(x, 2.5f);
    check_values(tf::reduce_any(b, {}, keepdims), {0, 0, 1, 1, 1, 1});
    check_values(tf::reduce_all(b, {}, keepdims), {0, 0, 1, 1, 1, 1});
  }
  // Braced lists of axes mean those axes; a plain int is one axis.
  check_values(tf::reduce_sum(x, {1}), {6, 15});
  check_values(tf::reduce_sum(x, {0, 1}), {21});
  check_values(tf::reduce_sum(x, {-1}, true), {6, 15});
  check_values(tf::reduce_sum(x, 0), {5, 7, 9});
}

TEST_CASE("reduce_max and reduce_min propagate NaN", "[cpu][cuda][reduce]") {
  for (auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    for (auto dt : {tf::float32, tf::float64, tf::float16, tf::bfloat16}) {
      auto x = tf::detail::from_doubles({1, NAN, 3, 4, 5, 6, -INFINITY, 2, INFINITY}, {3, 3}, dt);
      check_values(tf::reduce_max(x, 1), {NAN, 6, INFINITY});
      check_values(tf::reduce_min(x, 1), {NAN, 4, -INFINITY});
      check_values(tf::reduce_max(x, 0), {4, NAN, INFINITY});
      check_values(tf::reduce_min(x), {NAN});
      check_values(tf::reduce_sum(x, 1), {NAN, 15, NAN});
    }
  }
}

TEST_CASE("reductions over large shapes take every kernel path", "[cpu][cuda][reduce]") {
  struct Case {
    std::vector<int64_t> shape;
    std::vector<int> axes;
  };
  const std::vector<Case> cases = {
      {{3, 70001}, {1}},                         // long rows (chunked)
      {{3, 70001}, {0}},                         // columns
      {{200001}, {0}},                           // everything, long
      {{50, 100}, {1}},                          // rows longer than the lanes, a remainder
      {{9, 4097}, {1}},                          // rows of more than one block
      {{1500, 7}, {0}},                          // few columns, many rows (row chunks)
      {{2, 1300, 3}, {1}},                       // (K, R, K) with row chunks
      {{70, 90, 130}, {1}},                      // (K, R, K), many tasks
      {{4, 5, 6, 7}, {0, 2}},                    // (R, K, R, K): two passes
      {{4, 5, 6, 7}, {1, 3}},                    // (K, R, K, R)
      {{4, 5, 6, 7}, {0, 1, 3}},                 // (R, K, R)
      {{2, 1, 3, 1, 2, 3, 1, 2}, {0, 2, 4, 6}},  // rank 8, size-1 dims
      {{2, 1, 3, 1, 2, 3, 1, 2}, {1, 3, 5, 7}},
      {{5, 1, 1}, {0}},  // reduces only size-1 dims after dropping: rows of 5
      {{5, 1, 7}, {1}},  // reduces only a size-1 dim: a copy
  };
  for (auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    for (const auto& c : cases) {
      for (auto dt : {tf::float32, tf::float64, tf::int64, tf::float16}) {
        const auto x = input(c.shape, dt, 11);
        for (RK k : {RK::Sum, RK::Max, RK::Min}) {
          check_against_reference(k, x, c.axes, false, call(k, x, c.axes, false));
          check_against_reference(k, x, c.axes, true, call(k, x, c.axes, true));
        }
      }
      // Products of values near 1 stay finite.
      auto v = tf::testing::random_values(
          static_cast<size_t>(tf::TensorShape(c.shape).num_elements()), 0.999, 1.001, 5);
      const auto x = tf::detail::from_doubles(v, tf::TensorShape(c.shape), tf::float64);
      check_against_reference(RK::Prod, x, c.axes, false, tf::reduce_prod(x, c.axes));
    }
  }
}

TEST_CASE("float32 sums stay accurate for long inputs and do not depend on the thread count",
          "[cpu][reduce]") {
  const int64_t n = 3'000'004;  // 7 * 428572
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = 0.1 + static_cast<double>(i % 7) * 0.01;
  const auto x = tf::detail::from_doubles(v, {n}, tf::float32);
  double want = 0;
  for (double e : tf::detail::to_double_vector(x)) want += e;
  const int saved = tf::detail::num_threads();
  tf::detail::set_num_threads(1);
  const double one = tf::reduce_sum(x).item<double>();
  const auto cols1 = tf::reduce_sum(tf::detail::from_doubles(v, {n / 7, 7}, tf::float32), 0);
  tf::detail::set_num_threads(2);
  const double two = tf::reduce_sum(x).item<double>();
  const auto cols2 = tf::reduce_sum(tf::detail::from_doubles(v, {n / 7, 7}, tf::float32), 0);
  tf::detail::set_num_threads(saved);
  CHECK(std::abs(one - want) <= 1e-6 * want);
  CHECK(one == two);
  CHECK(cols1.numpy<float>() == cols2.numpy<float>());
}

TEST_CASE("reduction errors name the op - the axes and the shape", "[cpu][reduce]") {
  auto x = tf::zeros({2, 3});
  TF_REQUIRE_THROWS_CONTAINING(tf::reduce_sum(x, 3), tf::InvalidArgumentError,
                               "[reduce_sum] axis 3 is out of range for a tensor of rank 2");
  TF_REQUIRE_THROWS_CONTAINING(tf::reduce_max(x, {0, -3}), tf::InvalidArgumentError,
                               "[reduce_max] axis -3 is out of range for a tensor of rank 2");
  TF_REQUIRE_THROWS_CONTAINING(tf::reduce_prod(x, {1, -1}), tf::InvalidArgumentError,
                               "[reduce_prod] axes [1, -1] contain a duplicate");
  TF_REQUIRE_THROWS_CONTAINING(tf::reduce_sum(tf::constant({true})), tf::InvalidArgumentError,
                               "[reduce_sum] is not defined for bool tensors");
  TF_REQUIRE_THROWS_CONTAINING(tf::reduce_prod(tf::constant({true})), tf::InvalidArgumentError,
                               "[reduce_prod] is not defined for bool tensors");
  TF_REQUIRE_THROWS_CONTAINING(tf::reduce_max(tf::constant({true})), tf::InvalidArgumentError,
                               "[reduce_max] is not defined for bool tensors");
  TF_REQUIRE_THROWS_CONTAINING(tf::reduce_min(tf::constant({true}), 0), tf::InvalidArgumentError,
                               "[reduce_min] is not defined for bool tensors");
  TF_REQUIRE_THROWS_CONTAINING(tf::reduce_sum(tf::Tensor()), tf::InvalidArgumentError,
                               "[reduce_sum]");
  TF_REQUIRE_THROWS_CONTAINING(tf::reduce_sum(tf::constant(1.0f), 0), tf::InvalidArgumentError,
                               "rank 0");
  TF_REQUIRE_THROWS_CONTAINING(tf::argmax(x, 2), tf::InvalidArgumentError,
                               "[argmax] axis 2 is out of range for a tensor of rank 2");
  TF_REQUIRE_THROWS_CONTAINING(tf::argmin(tf::zeros({2, 0}), 1), tf::InvalidArgumentError,
                               "[argmin] cannot reduce over axis 1 of shape (2, 0)");
  // The primitive checks its axes too.
  TF_REQUIRE_THROWS_CONTAINING(tf::detail::dispatch(tf::prims::ReduceSum({1, 0}, false), {x}),
                               tf::InvalidArgumentError, "[reduce_sum] axes [1, 0]");
}

namespace {

std::vector<double> arg_reference(bool is_max, const std::vector<double>& x,
                                  const std::vector<int64_t>& shape, int axis) {
  int64_t outer = 1, R = shape[axis], inner = 1;
  for (int d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = static_cast<size_t>(axis) + 1; d < shape.size(); ++d) inner *= shape[d];
  // NaN is larger than every number.
  auto greater = [](double a, double b) {
    return (std::isnan(a) && !std::isnan(b)) || (!std::isnan(a) && !std::isnan(b) && a > b);
  };
  std::vector<double> out;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      int64_t best = 0;
      for (int64_t r = 1; r < R; ++r) {
        const double v = x[(o * R + r) * inner + i], b = x[(o * R + best) * inner + i];
        if (is_max ? greater(v, b) : greater(b, v)) best = r;
      }
      out.push_back(static_cast<double>(best));
    }
  return out;
}

}  // namespace

TEST_CASE("argmax and argmin return the first extreme index as int64", "[cpu][cuda][reduce]") {
  for (auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    for (auto dt :
         {tf::float32, tf::float64, tf::float16, tf::bfloat16, tf::int32, tf::int64, tf::uint8}) {
      for (const std::vector<int64_t>& shape :
           {std::vector<int64_t>{2, 3, 4}, std::vector<int64_t>{7}, std::vector<int64_t>{3, 600},
            std::vector<int64_t>{300, 2, 300}}) {
        // Few distinct values: many ties.
        auto v = tf::testing::random_values(
            static_cast<size_t>(tf::TensorShape(shape).num_elements()), 0, 4, 3);
        for (auto& e : v) e = std::floor(e);
        const auto x = tf::detail::from_doubles(v, tf::TensorShape(shape), dt);
        const int r = static_cast<int>(shape.size());
        for (int axis = -r; axis < r; ++axis) {
          const int a = axis < 0 ? axis + r : axis;
          INFO(tf::dtype_name(dt) << " shape " << tf::TensorShape(shape).to_string() << " axis "
                                  << axis);
          auto mx = tf::argmax(x, axis);
          auto mn = tf::argmin(x, axis);
          CHECK(mx.dtype() == tf::int64);
          std::vector<int64_t> os;
          for (int d = 0; d < r; ++d)
            if (d != a) os.push_back(shape[d]);
          CHECK(mx.shape() == tf::TensorShape(os));
          check_values(mx, arg_reference(true, v, shape, a), 0, 0);
          check_values(mn, arg_reference(false, v, shape, a), 0, 0);
        }
      }
    }
    // Ties: the first index; default axis 0.
    check_values(tf::argmax(tf::constant({1, 3, 3, 2})), {1});
    check_values(tf::argmin(tf::constant({2.0f, 1.0f, 1.0f})), {1});
    // NaN counts as the largest value.
    auto n = tf::constant({1.0f, NAN, 5.0f, NAN});
    check_values(tf::argmax(n), {1});
    check_values(tf::argmin(n), {0});
    check_values(tf::argmin(tf::constant({NAN, NAN})), {0});
    check_values(tf::argmax(tf::constant({-INFINITY, INFINITY, 2.0f})), {1});
    // bool works too.
    check_values(tf::argmax(tf::constant(std::vector<bool>{false, true, true})), {1});
    // A size-1 axis gives zeros.
    check_values(tf::argmax(tf::zeros({3, 1}), 1), {0, 0, 0});
  }
}

namespace {

// `values` in a tensor that starts one element into its storage: unaligned vector loads.
tf::Tensor offset_view(const std::vector<double>& values, const std::vector<int64_t>& shape,
                       tf::DType dt) {
  std::vector<double> padded(values.size() + 1, 0.0);
  std::copy(values.begin(), values.end(), padded.begin() + 1);
  const auto base =
      tf::detail::from_doubles(padded, {static_cast<int64_t>(padded.size())}, dt);
  return tf::detail::view(base, tf::TensorShape(shape), tf::dtype_size(dt));
}

constexpr int64_t kBig = (int64_t{1} << 20) + 7;

}  // namespace

TEST_CASE("reductions over large shapes: long, split and unaligned rows, columns, middle axes",
          "[cpu][cuda][reduce]") {
  struct Case {
    std::vector<int64_t> shape;
    std::vector<int> axes;
  };
  const std::vector<Case> cases = {
      {{kBig}, {0}},               // everything: rows split over the device, then combined
      {{3, 349529}, {1}},          // few long rows (split)
      {{1031, 1017}, {-1}},        // many rows of warp length
      {{517, 2053}, {1}},          // rows of block length
      {{149797, 7}, {0}},          // few narrow columns (split)
      {{16411, 64}, {0}},          // 64 columns (tiled, split)
      {{2, 524291}, {0}},          // many columns, two rows
      {{33, 1001, 33}, {1}},       // middle axis, 33 columns
      {{7, 5003, 29}, {-2}},       // middle axis, 29 columns
      {{61, 67, 257}, {0, 2}},     // (R, K, R): two passes
      {{61, 67, 257}, {0, 1, 2}},  // all axes
  };
  for (auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    for (const auto& c : cases) {
      for (auto dt : kNumeric) {
        const auto x = input(c.shape, dt, 13);
        const auto xv = tf::detail::to_double_vector(x);
        for (RK k : {RK::Sum, RK::Max, RK::Min}) {
          const auto ref = reference(k, xv, c.shape, c.axes, false, dt);
          INFO(rk_name(k) << " of " << tf::TensorShape(c.shape).to_string() << " "
                          << tf::dtype_name(dt) << " axes " << tf::detail::vec_to_string(c.axes)
                          << " on " << dev.to_string());
          const double rt = rtol_of(dt);
          const auto got = call(k, x, c.axes, false);
          CHECK(got.dtype() == dt);
          CHECK(got.shape() == tf::TensorShape(ref.shape));
          check_values(got, ref.values, rt, rt);
          const auto kept = call(k, x, c.axes, true);
          CHECK(kept.shape() ==
                tf::TensorShape(reference(k, {}, c.shape, c.axes, true, dt).shape));
          check_values(kept, ref.values, rt, rt);
        }
      }
      // Products of values near 1 stay finite.
      auto v = tf::testing::random_values(
          static_cast<size_t>(tf::TensorShape(c.shape).num_elements()), 0.999, 1.001, 5);
      const auto x = tf::detail::from_doubles(v, tf::TensorShape(c.shape), tf::float64);
      const auto ref = reference(RK::Prod, v, c.shape, c.axes, false, tf::float64);
      check_values(tf::reduce_prod(x, c.axes), ref.values, 1e-10, 1e-10);
    }
  }
}

TEST_CASE("reductions of unaligned inputs and NaN anywhere in long rows", "[cpu][cuda][reduce]") {
  for (auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    for (auto dt : {tf::float32, tf::float16, tf::bfloat16, tf::float64, tf::uint8, tf::int64}) {
      INFO(tf::dtype_name(dt) << " on " << dev.to_string());
      for (const std::vector<int64_t>& shape :
           {std::vector<int64_t>{kBig}, std::vector<int64_t>{5, 3001},
            std::vector<int64_t>{3, 333}}) {
        const int64_t n = tf::TensorShape(shape).num_elements();
        auto v = tf::testing::random_values(static_cast<size_t>(n), -1, 1, 21);
        if (!tf::is_floating(dt))
          for (auto& e : v) e = std::floor((e + 1) * 6);
        const auto x = offset_view(v, shape, dt);
        const std::vector<double> xv = tf::detail::to_double_vector(x);
        const std::vector<int> last = {static_cast<int>(shape.size()) - 1};
        for (RK k : {RK::Sum, RK::Max, RK::Min}) {
          const auto ref = reference(k, xv, shape, last, false, dt);
          check_values(call(k, x, last, false), ref.values, rtol_of(dt), rtol_of(dt));
        }
      }
      if (!tf::is_floating(dt)) continue;
      // NaN at the first element (the scalar head of an unaligned row), in the vector body and
      // at the last element (the tail).
      for (int64_t at : {int64_t{0}, int64_t{777777}, kBig - 1}) {
        std::vector<double> v(static_cast<size_t>(kBig), 0.5);
        v[static_cast<size_t>(at)] = NAN;
        for (const auto& x : {offset_view(v, {kBig}, dt),
                              tf::detail::from_doubles(v, {kBig}, dt)}) {
          check_values(tf::reduce_max(x), {NAN});
          check_values(tf::reduce_min(x), {NAN});
          check_values(tf::reduce_sum(x), {NAN});
        }
        // (7, 149797) rows and columns, NaN at the same flat position (when inside).
        constexpr int64_t kCols = kBig / 7;
        const std::vector<double> v7(v.begin(), v.begin() + 7 * kCols);
        const auto rows = tf::detail::from_doubles(v7, {7, kCols}, dt);
        const bool inside = at < 7 * kCols;
        std::vector<double> want_rows(7, 0.5), want_cols(kCols, 0.5);
        if (inside) {
          want_rows[static_cast<size_t>(at / kCols)] = NAN;
          want_cols[static_cast<size_t>(at % kCols)] = NAN;
        }
        check_values(tf::reduce_max(rows, 1), want_rows);
        check_values(tf::reduce_min(rows, 0), want_cols);
      }
    }
  }
}

TEST_CASE("reduce_any and reduce_all over long bool inputs", "[cpu][cuda][reduce]") {
  for (auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    for (int64_t at : {int64_t{0}, int64_t{12345}, kBig - 1}) {
      std::vector<double> one(static_cast<size_t>(kBig), 0.0);
      one[static_cast<size_t>(at)] = 1;
      std::vector<double> all_but(static_cast<size_t>(kBig), 1.0);
      all_but[static_cast<size_t>(at)] = 0;
      const auto a = tf::detail::from_doubles(one, {kBig}, tf::bool_);
      const auto b = tf::detail::from_doubles(all_but, {kBig}, tf::bool_);
      check_values(tf::reduce_any(a), {1});
      check_values(tf::reduce_all(a), {0});
      check_values(tf::reduce_any(b), {1});
      check_values(tf::reduce_all(b), {0});
      check_values(tf::reduce_all(offset_view(all_but, {kBig}, tf::bool_)), {0});
      check_values(tf::reduce_any(offset_view(one, {kBig}, tf::bool_)), {1});
      // Columns: (149797, 7) over axis 0.
      const int64_t n7 = (kBig / 7) * 7;
      const std::vector<double> one7(one.begin(), one.begin() + n7);
      const std::vector<double> all_but7(all_but.begin(), all_but.begin() + n7);
      const auto ac = tf::detail::from_doubles(one7, {kBig / 7, 7}, tf::bool_);
      std::vector<double> want(7, 0.0);
      if (at < n7) want[static_cast<size_t>(at % 7)] = 1;
      check_values(tf::reduce_any(ac, 0), want);
      const auto bc = tf::detail::from_doubles(all_but7, {kBig / 7, 7}, tf::bool_);
      for (auto& w : want) w = 1 - w;
      check_values(tf::reduce_all(bc, 0), want);
    }
    const auto t = tf::detail::from_doubles(std::vector<double>(kBig, 1.0), {kBig}, tf::bool_);
    check_values(tf::reduce_all(t), {1});
    const auto f = tf::detail::from_doubles(std::vector<double>(kBig, 0.0), {kBig}, tf::bool_);
    check_values(tf::reduce_any(f), {0});
    check_values(tf::reduce_all(f, 0), {0});
  }
}

TEST_CASE("argmax and argmin over long rows and wide columns", "[cpu][cuda][reduce]") {
  for (auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    for (auto dt : {tf::float32, tf::float16, tf::bfloat16, tf::float64, tf::int32, tf::int64,
                    tf::uint8}) {
      for (const std::vector<int64_t>& shape :
           {std::vector<int64_t>{3, 100003}, std::vector<int64_t>{100003, 3},
            std::vector<int64_t>{20, 2001, 40}, std::vector<int64_t>{kBig},
            std::vector<int64_t>{1500, 700}}) {
        // Few distinct values: many ties; some NaN for the float types.
        auto v = tf::testing::random_values(
            static_cast<size_t>(tf::TensorShape(shape).num_elements()), 0, 50, 9);
        for (size_t i = 0; i < v.size(); ++i) {
          v[i] = std::floor(v[i]);
          if (tf::is_floating(dt) && i % 100003 == 4099) v[i] = NAN;
        }
        const auto x = tf::detail::from_doubles(v, tf::TensorShape(shape), dt);
        const int r = static_cast<int>(shape.size());
        for (int axis = 0; axis < r; ++axis) {
          INFO(tf::dtype_name(dt) << " shape " << tf::TensorShape(shape).to_string() << " axis "
                                  << axis << " on " << dev.to_string());
          check_values(tf::argmax(x, axis), arg_reference(true, v, shape, axis), 0, 0);
          check_values(tf::argmin(x, axis), arg_reference(false, v, shape, axis), 0, 0);
        }
      }
    }
    // bool: the first true / false.
    std::vector<double> b(static_cast<size_t>(kBig), 0.0);
    b[5000] = b[70000] = 1;
    const auto x = tf::detail::from_doubles(b, {kBig}, tf::bool_);
    check_values(tf::argmax(x), {5000});
    check_values(tf::argmin(x), {0});
  }
}

TEST_CASE("row reductions of every short length at every alignment", "[cpu][cuda][reduce]") {
  std::vector<int64_t> lengths;
  for (int64_t r = 1; r <= 40; ++r) lengths.push_back(r);
  for (int64_t r : {63, 64, 65, 127, 128, 129, 255, 256, 257, 1023, 1024, 1025}) lengths.push_back(r);
  for (auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    for (auto dt : {tf::float32, tf::float16, tf::float64, tf::uint8, tf::int64}) {
      for (int64_t R : lengths) {
        const std::vector<int64_t> shape = {37, R};
        const auto x = input(shape, dt, static_cast<unsigned>(R));
        const auto xv = tf::detail::to_double_vector(x);
        INFO(tf::dtype_name(dt) << " rows of " << R << " on " << dev.to_string());
        for (RK k : {RK::Sum, RK::Max}) {
          check_values(call(k, x, {1}, false), reference(k, xv, shape, {1}, false, dt).values,
                       rtol_of(dt), rtol_of(dt));
          // The same rows starting one element into the storage.
          check_values(call(k, offset_view(xv, shape, dt), {1}, false),
                       reference(k, xv, shape, {1}, false, dt).values, rtol_of(dt), rtol_of(dt));
        }
      }
    }
  }
}

// Half types were summed in their own dtype before the division: 100000 float16 ones summed to
// inf, and a bfloat16 sum rounded to its 8-bit grid. Now summed and divided in float32, rounded
// once, eagerly, in gradients and in traced functions with a None dimension.
TEST_CASE("reduce_mean of float16 and bfloat16 sums and divides in float32",
          "[cpu][cuda][reduce][reduce_mean]") {
  for (auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    const tf::Tensor ones = tf::ones({100000}, tf::float16);
    const tf::Tensor m = tf::reduce_mean(ones);
    CHECK(m.dtype() == tf::float16);
    check_values(m, {1.0}, 0, 0);
    check_values(tf::reduce_mean(tf::fill({100}, tf::constant(1000.0f, tf::float16))), {1000.0}, 0,
                 0);
    // bfloat16(0.1) is 0.10009765625; TF gives 0.100098 too.
    const tf::Tensor tenths = tf::cast(tf::fill({100000}, 0.1f), tf::bfloat16);
    const tf::Tensor bm = tf::reduce_mean(tenths);
    CHECK(bm.dtype() == tf::bfloat16);
    check_values(bm, {0.10009765625}, 0, 0);
    // Along an axis and with keepdims.
    const tf::Tensor rows = tf::ones({2, 70000}, tf::float16);
    const tf::Tensor rm = tf::reduce_mean(rows, 1, true);
    CHECK(rm.shape() == tf::TensorShape({2, 1}));
    check_values(rm, {1.0, 1.0}, 0, 0);
    // The gradient is 1 / n in the input's dtype.
    tf::GradientTape tape;
    tape.watch(ones);
    const tf::Tensor g = tape.gradient(tf::reduce_mean(ones), ones);
    CHECK(g.dtype() == tf::float16);
    check_values(tf::reduce_max(g), {1e-5}, 1e-2, 0);
    // Traced with a None dimension: the count is read when the graph runs.
    for (tf::DType d : {tf::float16, tf::bfloat16}) {
      auto f =
          tf::function([](const tf::Tensor& x) { return tf::reduce_mean(x); },
                       tf::FunctionOptions{.input_signature = {tf::TensorSpec({tf::None}, d)}});
      const tf::Tensor r = f(tf::ones({100000}, d));
      CHECK(r.dtype() == d);
      check_values(r, {1.0}, 0, 0);
    }
  }
}

// int64 means were divided in float64 (2^60 + 1 and 2^60 + 3 gave 2^60); now exact, truncating
// toward zero as TF's integer division.
TEST_CASE("reduce_mean of int64 divides exactly and truncates toward zero",
          "[cpu][cuda][reduce][reduce_mean]") {
  const int64_t big = int64_t{1} << 60;
  const int64_t max = std::numeric_limits<int64_t>::max();
  const int64_t min = std::numeric_limits<int64_t>::min();
  for (auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    auto mean = [](std::vector<int64_t> v) {
      const tf::Tensor m = tf::reduce_mean(tf::constant(v));
      CHECK(m.dtype() == tf::int64);
      return m.item<int64_t>();
    };
    CHECK(mean({big + 1, big + 3}) == big + 2);
    CHECK(mean({(int64_t{1} << 53) + 1}) == (int64_t{1} << 53) + 1);
    CHECK(mean({-big - 1, -big - 4}) == -big - 2);  // -(2^60 + 2.5) truncates to -(2^60 + 2)
    CHECK(mean({-7, 0, 0}) == -2);
    CHECK(mean({7, 0, 0}) == 2);
    CHECK(mean({max}) == max);
    CHECK(mean({min}) == min);
    CHECK(mean({max / 3, max / 3, max / 3 - 1}) == max / 3 - 1);
    // Against C++'s integer division (which truncates) for many sums and counts.
    const auto r = tf::testing::random_values(70, -1.0, 1.0, 7);
    for (size_t n = 1; n <= 6; ++n) {
      std::vector<int64_t> v(n);
      int64_t sum = 0;
      for (size_t i = 0; i < n; ++i) {
        v[i] = static_cast<int64_t>(r[n * 10 + i] * 0x1p59) + static_cast<int64_t>(i);
        sum += v[i];
      }
      CHECK(mean(v) == sum / static_cast<int64_t>(n));
    }
    // Rows of a matrix: each its own quotient.
    const tf::Tensor m =
        tf::reduce_mean(tf::constant(std::vector<int64_t>{big + 1, big + 2, big + 4, -5, -5, -6},
                                     tf::TensorShape{2, 3}),
                        1);
    CHECK(m.numpy<int64_t>() == std::vector<int64_t>{big + 2, -5});
  }
}

// An empty integer reduction returned the widened int64 sum: the mean keeps the input's dtype,
// also traced with a None dimension (where int32 + the int64 mean failed).
TEST_CASE("reduce_mean over an empty integer reduction keeps the dtype",
          "[cpu][cuda][reduce][reduce_mean]") {
  for (auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    const tf::Tensor i = tf::reduce_mean(tf::zeros({0, 3}, tf::int32), 0);
    CHECK(i.dtype() == tf::int32);
    check_values(i, {0, 0, 0});
    const tf::Tensor u = tf::reduce_mean(tf::zeros({0}, tf::uint8));
    CHECK(u.dtype() == tf::uint8);
    check_values(u, {0});
    CHECK(tf::reduce_mean(tf::zeros({0}, tf::int64)).dtype() == tf::int64);
    auto f = tf::function(
        [](const tf::Tensor& x) { return tf::zeros({3}, tf::int32) + tf::reduce_mean(x, 0); },
        tf::FunctionOptions{.input_signature = {tf::TensorSpec({tf::None, 3}, tf::int32)}});
    const tf::Tensor e = f(tf::zeros({0, 3}, tf::int32));
    CHECK(e.dtype() == tf::int32);
    check_values(e, {0, 0, 0});
    check_values(f(tf::constant({{1, 2, 3}, {4, 5, 7}})), {2, 3, 5});
    check_values(f(tf::constant({{-1, -2, -3}, {-4, -6, -8}})), {-2, -4, -5});
  }
}
