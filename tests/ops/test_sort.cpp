// Sorting and counting (ops/sort.h): top_k, sort, argsort, in_top_k, searchsorted, unique,
// unique_with_counts, bincount, histogram_fixed_width and confusion_matrix on every device of
// devices_under_test(): values against TF 2.21's results (the tf.* call that produced each is
// named beside it) and plain loops, gradients against central differences in float64, traced
// equals eager, and the errors TF raises.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "autograd/tape.h"
#include "core/device.h"
#include "core/error.h"
#include "core/tensor.h"
#include "jit/function.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/movement.h"
#include "ops/reduce.h"
#include "ops/sort.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
using tf::testing::check_gradient;
using tf::testing::check_values;
using tf::testing::random_values;
using tf::testing::require_error;

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

tf::Tensor make(const std::vector<double>& v, const tf::TensorShape& s, tf::DType d) {
  return tf::detail::from_doubles(v, s, d);
}

const std::vector<tf::DType> kSortTypes = {tf::float16, tf::bfloat16, tf::float32,
                                           tf::float64, tf::int32,    tf::int64};

}  // namespace

TEST_CASE("sort: top_k gives TF's values and indices with ties", "[cpu][cuda][sort]") {
  // tf.math.top_k(x, k) with x = [[1, 3, 3, 2, -0., 0.], [5, -1, 5, 5, 2, 0]].
  const std::vector<double> x = {1, 3, 3, 2, -0.0, 0.0, 5, -1, 5, 5, 2, 0};
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    for (tf::DType d : kSortTypes) {
      INFO("dtype " << tf::dtype_name(d));
      const tf::Tensor t = make(x, {2, 6}, d);
      auto [v3, i3] = tf::math::top_k(t, 3);
      CHECK(v3.dtype() == d);
      CHECK(i3.dtype() == tf::int32);
      check_values(v3, {3, 3, 2, 5, 5, 5}, 0, 0);
      check_values(i3, {1, 2, 3, 0, 2, 3}, 0, 0);
      auto [v6, i6] = tf::math::top_k(t, 6);
      check_values(v6, {3, 3, 2, 1, -0.0, 0, 5, 5, 5, 2, 0, -1}, 0, 0);
      check_values(i6, {1, 2, 3, 0, 4, 5, 0, 2, 3, 4, 5, 1}, 0, 0);
      // A leading batch of (2, 1) rows; k = 0 gives (2, 1, 0).
      auto [vb, ib] = tf::nn::top_k(tf::reshape(t, {2, 1, 6}), 2, /*sorted=*/false);
      CHECK(vb.shape() == tf::TensorShape{2, 1, 2});
      check_values(ib, {1, 2, 0, 2}, 0, 0);
      auto [v0, i0] = tf::math::top_k(tf::reshape(t, {2, 1, 6}), 0);
      CHECK(v0.shape() == tf::TensorShape{2, 1, 0});
      CHECK(i0.shape() == tf::TensorShape{2, 1, 0});
    }
    // -0 keeps its sign (it is the element at index 4).
    const auto v = tf::math::top_k(make(x, {2, 6}, tf::float32), 6).first.numpy<float>();
    CHECK(std::signbit(v[4]));
    CHECK_FALSE(std::signbit(v[5]));
    // tf.math.top_k(tf.constant([[2, -2147483648, 5, 2, 2147483647]]), 5).
    const tf::Tensor xi = tf::constant(std::vector<int32_t>{2, INT32_MIN, 5, 2, INT32_MAX}, {1, 5});
    auto [vi, ii] = tf::math::top_k(xi, 5);
    CHECK(vi.numpy<int32_t>() == std::vector<int32_t>{INT32_MAX, 5, 2, 2, INT32_MIN});
    check_values(ii, {4, 2, 0, 3, 1}, 0, 0);
    // tf.math.top_k(tf.zeros([0, 3]), 2): empty rows.
    auto [ve, ie] = tf::math::top_k(tf::zeros({0, 3}), 2);
    CHECK(ve.shape() == tf::TensorShape{0, 2});
    CHECK(ie.shape() == tf::TensorShape{0, 2});
    // uint8 (TF registers it too).
    auto [vu, iu] = tf::math::top_k(make({4, 250, 4, 0}, {4}, tf::uint8), 3);
    check_values(vu, {250, 4, 4}, 0, 0);
    check_values(iu, {1, 0, 2}, 0, 0);
  }
}

TEST_CASE("sort: top_k rejects what TF rejects", "[cpu][sort]") {
  const tf::Tensor x = tf::zeros({2, 6});
  // TF 2.21: "Need k >= 0, got -1", "input must have at least k columns. Had 6, needed 7",
  // "input must be >= 1-D, got shape []".
  require_error([&] { tf::math::top_k(x, -1); }, {"top_k", "Need k >= 0, got -1"});
  require_error([&] { tf::math::top_k(x, 7); }, {"top_k", "at least k columns. Had 6, needed 7"});
  require_error([&] { tf::math::top_k(tf::zeros({}), 1); }, {"top_k", ">= 1-D", "()"});
  require_error([&] { tf::math::top_k(tf::cast(x, tf::bool_), 1); }, {"top_k", "bool"});
  require_error([&] { tf::math::top_k(tf::Tensor(), 1); }, {"top_k", "undefined"});
  require_error([&] { tf::sort(x, 2); }, {"sort", "axis 2"});
  require_error([&] { tf::sort(x, -1, "UP"); }, {"sort", "ASCENDING", "\"UP\""});
  require_error([&] { tf::argsort(tf::zeros({}), 0); }, {"argsort", "at least 1-D"});
}

TEST_CASE("sort: sort and argsort along every axis give TF's results", "[cpu][cuda][sort]") {
  // y of shape (2, 3, 4), with ties along every axis.
  const std::vector<double> y = {3, 1, 2, 1, 0, 5, -2, 1, 1, 1, 4, 2,
                                 7, 7, 7, 7, 1, 2, 3,  4, 4, 3, 2, 1};
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    for (tf::DType d : kSortTypes) {
      INFO("dtype " << tf::dtype_name(d));
      const tf::Tensor t = make(y, {2, 3, 4}, d);
      // tf.sort(y, axis=1) and with direction='DESCENDING'.
      check_values(tf::sort(t, 1),
                   {0, 1, -2, 1, 1, 1, 2, 1, 3, 5, 4, 2, 1, 2, 2, 1, 4, 3, 3, 4, 7, 7, 7, 7}, 0, 0);
      check_values(tf::sort(t, 1, "DESCENDING"),
                   {3, 5, 4, 2, 1, 1, 2, 1, 0, 1, -2, 1, 7, 7, 7, 7, 4, 3, 3, 4, 1, 2, 2, 1}, 0, 0);
      // tf.argsort(y, axis=1), DESCENDING, the last axis, and axis 0 DESCENDING.
      check_values(tf::argsort(t, 1),
                   {1, 0, 1, 0, 2, 2, 0, 1, 0, 1, 2, 2, 1, 1, 2, 2, 2, 2, 1, 1, 0, 0, 0, 0}, 0, 0);
      check_values(tf::argsort(t, 1, "DESCENDING"),
                   {0, 1, 2, 2, 2, 0, 0, 0, 1, 2, 1, 1, 0, 0, 0, 0, 2, 2, 1, 1, 1, 1, 2, 2}, 0, 0);
      check_values(tf::argsort(t),
                   {1, 3, 2, 0, 2, 0, 3, 1, 0, 1, 3, 2, 0, 1, 2, 3, 0, 1, 2, 3, 3, 2, 1, 0}, 0, 0);
      check_values(tf::argsort(t, 0, "DESCENDING", /*stable=*/true),
                   {1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 1}, 0, 0);
      CHECK(tf::argsort(t).dtype() == tf::int32);
    }
    // tf.sort / tf.argsort of [2, INT32_MIN, 5, 2, INT32_MAX] (no overflow at the extremes).
    const tf::Tensor xi = tf::constant(std::vector<int32_t>{2, INT32_MIN, 5, 2, INT32_MAX});
    CHECK(tf::sort(xi).numpy<int32_t>() == std::vector<int32_t>{INT32_MIN, 2, 2, 5, INT32_MAX});
    check_values(tf::argsort(xi), {1, 0, 3, 2, 4}, 0, 0);
    check_values(tf::argsort(xi, -1, "DESCENDING"), {4, 2, 0, 3, 1}, 0, 0);
    const tf::Tensor xl = tf::constant(std::vector<int64_t>{INT64_MAX, INT64_MIN, 0});
    CHECK(tf::sort(xl).numpy<int64_t>() == std::vector<int64_t>{INT64_MIN, 0, INT64_MAX});
    // Empty axes.
    CHECK(tf::sort(tf::zeros({3, 0})).shape() == tf::TensorShape{3, 0});
    CHECK(tf::argsort(tf::zeros({0, 2}), 0).shape() == tf::TensorShape{0, 2});
  }
}

TEST_CASE("sort: NaN ranks above inf in every direction", "[cpu][cuda][sort]") {
  // TF 2.21 leaves NaN's place to its sort's internals (tf.sort([1, nan, -inf, 2]) gives
  // [-inf, 1, nan, 2]); tapeflow orders NaN above +inf, as numpy does.
  const std::vector<double> x = {1, kNaN, -kInf, 2, kNaN, kInf, -0.0, 0.0};
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    for (tf::DType d : {tf::float16, tf::bfloat16, tf::float32, tf::float64}) {
      INFO("dtype " << tf::dtype_name(d));
      const tf::Tensor t = make(x, {8}, d);
      auto [v, i] = tf::math::top_k(t, 8);
      check_values(v, {kNaN, kNaN, kInf, 2, 1, 0, 0, -kInf}, 0, 0);
      check_values(i, {1, 4, 5, 3, 0, 6, 7, 2}, 0, 0);
      check_values(tf::math::top_k(t, 1).second, {1}, 0, 0);
      check_values(tf::sort(t), {-kInf, 0, 0, 1, 2, kInf, kNaN, kNaN}, 0, 0);
      check_values(tf::argsort(t), {2, 6, 7, 0, 3, 5, 1, 4}, 0, 0);
      check_values(tf::argsort(t, 0, "DESCENDING"), {1, 4, 5, 3, 0, 6, 7, 2}, 0, 0);
    }
  }
}

TEST_CASE("sort: long rows and many ties equal a stable sort", "[cpu][cuda][sort]") {
  // Rows of 3000 (the CUDA kernel's global-memory path) and of 100 with values 0..6 (ties), against
  // std::stable_sort of the positions.
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    for (int64_t n : {int64_t{100}, int64_t{3000}}) {
      const int64_t rows = 3;
      auto data = random_values(static_cast<size_t>(rows * n), -1, 1, 11);
      if (n == 100)
        for (double& e : data) e = std::floor((e + 1) * 3.5);
      for (tf::DType d : {tf::float32, tf::int32}) {
        if (d == tf::int32 && n == 3000) continue;
        const tf::Tensor t = make(data, {rows, n}, d);
        const auto vals = tf::detail::to_double_vector(t);
        for (bool asc : {true, false}) {
          std::vector<double> want_v;
          std::vector<double> want_i;
          for (int64_t r = 0; r < rows; ++r) {
            std::vector<int64_t> p(static_cast<size_t>(n));
            std::iota(p.begin(), p.end(), 0);
            const double* row = vals.data() + r * n;
            std::stable_sort(p.begin(), p.end(), [&](int64_t a, int64_t b) {
              return asc ? row[a] < row[b] : row[a] > row[b];
            });
            for (int64_t q : p) {
              want_v.push_back(row[q]);
              want_i.push_back(static_cast<double>(q));
            }
          }
          const std::string dir = asc ? "ASCENDING" : "DESCENDING";
          check_values(tf::sort(t, -1, dir), want_v, 0, 0);
          check_values(tf::argsort(t, 1, dir), want_i, 0, 0);
          if (!asc) {
            // The first 7 of each row.
            auto [v, i] = tf::math::top_k(t, 7);
            std::vector<double> first_i;
            for (int64_t r = 0; r < rows; ++r)
              for (int64_t j = 0; j < 7; ++j) first_i.push_back(want_i[r * n + j]);
            check_values(i, first_i, 0, 0);
          }
        }
      }
    }
  }
}

TEST_CASE("sort: gradients of top_k and sort against central differences", "[cpu][cuda][sort]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    check_gradient([](const tf::Tensor& x) { return tf::math::top_k(x, 2).first; }, {3, 5});
    check_gradient([](const tf::Tensor& x) { return tf::math::top_k(x, 5).first; }, {2, 2, 5});
    check_gradient([](const tf::Tensor& x) { return tf::sort(x, 1); }, {2, 3, 4});
    check_gradient([](const tf::Tensor& x) { return tf::sort(x, 0, "DESCENDING"); }, {4, 3});
    // k = 0: nothing flows back (zeros of the input's shape).
    tf::Tensor x = tf::ones({2, 3}, tf::float64);
    tf::GradientTape tape;
    tape.watch(x);
    const tf::Tensor y = tf::reduce_sum(tf::math::top_k(x, 0).first);
    check_values(tape.gradient(y, x), {0, 0, 0, 0, 0, 0}, 0, 0);
  }
  // Inside a function traced for a None number of rows: one graph serves every batch.
  tf::FunctionOptions opts;
  opts.input_signature = {tf::TensorSpec({tf::None, 4}, tf::float64)};
  auto grad = tf::function(
      [](const tf::Tensor& x) {
        tf::GradientTape tape;
        tape.watch(x);
        const tf::Tensor y =
            tf::reduce_sum(tf::math::top_k(x, 2).first * tf::constant({1.0, 10.0}));
        return tape.gradient(y, x);
      },
      opts);
  const tf::Tensor x = tf::constant({{1.0, 4.0, 3.0, 2.0}, {5.0, 6.0, 7.0, 8.0}});
  check_values(grad(x), {0, 1, 10, 0, 0, 0, 10, 1}, 0, 0);
  check_values(grad(tf::constant({{9.0, 0.0, 8.0, 1.0}})), {1, 0, 10, 0}, 0, 0);
  check_values(grad(tf::zeros({3, 4}, tf::float64)), {1, 10, 0, 0, 1, 10, 0, 0, 1, 10, 0, 0}, 0, 0);
  CHECK(grad.tracing_count() == 1);
}

TEST_CASE("sort: in_top_k traces once for a None batch", "[cpu][cuda][sort]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    auto body = [](const tf::Tensor& t, const tf::Tensor& p) {
      return tf::math::in_top_k(t, p, 2);
    };
    tf::FunctionOptions opts;
    opts.input_signature = {tf::TensorSpec({tf::None}, tf::int64), tf::TensorSpec({tf::None, 4})};
    auto f = tf::function(body, opts);
    for (int64_t n : {2, 5, 1}) {
      std::vector<double> p;
      std::vector<int64_t> t;
      for (int64_t i = 0; i < n; ++i) {
        t.push_back((i * 3) % 5 - (i == 4 ? 6 : 0));  // 0, 3, 1, 4 (out of range), -2
        for (int64_t j = 0; j < 4; ++j)
          p.push_back(double((i + 2 * j) % 4) / 4 + (j == 1 ? 0.0 : 0.1));
      }
      const tf::Tensor pred = make(p, {n, 4}, tf::float32);
      const tf::Tensor targets = tf::constant(t, tf::TensorShape({n}));
      tf::testing::check_close(tf::cast(f(targets, pred), tf::int32),
                               tf::cast(body(targets, pred), tf::int32), 0, 0);
    }
    CHECK(f.tracing_count() == 1);
  }
}

TEST_CASE("sort: in_top_k follows TF's rule for ties and non-finite rows", "[cpu][cuda][sort]") {
  // tf.math.in_top_k(targets, predictions, k) for k = 0, 1, 2, 4.
  const std::vector<double> p = {0.1, 0.3, 0.3,  0.2, 0.5, kInf, 0.1, 0.2, 0.2, 0.2,
                                 0.2, 0.2, kNaN, 1,   2,   3,    0.4, 0.1, 0.2, 0.3};
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor pred = make(p, {5, 4}, tf::float32);
    for (tf::DType it : {tf::int32, tf::int64}) {
      const tf::Tensor t = tf::cast(tf::constant({1, 0, 3, 3, 0}), it);
      check_values(tf::math::in_top_k(t, pred, 0), {0, 0, 0, 0, 0}, 0, 0);
      for (int64_t k : {1, 2, 4})
        check_values(tf::math::in_top_k(t, pred, k), {1, 0, 1, 0, 1}, 0, 0);
      // Targets outside [0, 4) are false, not an error (TF 2.21 on the CPU).
      const tf::Tensor oob = tf::cast(tf::constant({4, -1, 0, 0, 0}), it);
      check_values(tf::nn::in_top_k(oob, pred, 1), {0, 0, 1, 0, 1}, 0, 0);
    }
    CHECK(tf::math::in_top_k(tf::constant({0, 0, 0, 0, 0}), pred, 1).dtype() == tf::bool_);
  }
  require_error(
      [] {
        tf::math::in_top_k(tf::constant({0}), tf::zeros({1, 3}, tf::float64), 1);
      },
      {"in_top_k", "float32", "float64"});
  require_error(
      [] {
        tf::math::in_top_k(tf::constant({0, 1}), tf::zeros({1, 3}), 1);
      },
      {"in_top_k", "(1, 3)", "(2,)"});
  require_error(
      [] {
        tf::math::in_top_k(tf::constant({0.f}), tf::zeros({1, 3}), 1);
      },
      {"in_top_k", "targets must be int32 or int64"});
}

TEST_CASE("sort: searchsorted gives TF's insertion points", "[cpu][cuda][sort]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    // tf.searchsorted([[1, 3, 3, 5], [0, 2, 4, 6]], [[3, 0, 6, nan, 2], [-1, 2, 5, 7, 4]]).
    const tf::Tensor seq = tf::constant({{1.f, 3.f, 3.f, 5.f}, {0.f, 2.f, 4.f, 6.f}});
    const tf::Tensor v = make({3, 0, 6, kNaN, 2, -1, 2, 5, 7, 4}, {2, 5}, tf::float32);
    const tf::Tensor left = tf::searchsorted(seq, v);
    CHECK(left.dtype() == tf::int32);
    check_values(left, {1, 0, 4, 0, 1, 0, 1, 3, 4, 2}, 0, 0);
    check_values(tf::searchsorted(seq, v, "right"), {3, 0, 4, 4, 1, 0, 2, 3, 4, 3}, 0, 0);
    // tf.searchsorted([1, 2, 2, 3], [2, 0, 4], side='right', out_type=tf.int64).
    const tf::Tensor r =
        tf::searchsorted(tf::constant({1, 2, 2, 3}), tf::constant({2, 0, 4}), "right", tf::int64);
    CHECK(r.dtype() == tf::int64);
    check_values(r, {3, 0, 4}, 0, 0);
    check_values(tf::searchsorted(tf::zeros({0}), tf::constant({1.f})), {0}, 0, 0);
    CHECK(tf::searchsorted(tf::zeros({2, 3}), tf::zeros({2, 0})).shape() == tf::TensorShape{2, 0});
  }
  require_error(
      [] {
        tf::searchsorted(tf::zeros({2, 3}), tf::zeros({3, 3}));
      },
      {"searchsorted", "(2, 3)", "(3, 3)"});
  require_error([] { tf::searchsorted(tf::zeros({3}), tf::constant({1})); },
                {"searchsorted", "float32", "int32"});
  require_error([] { tf::searchsorted(tf::zeros({3}), tf::zeros({1}), "middle"); },
                {"searchsorted", "\"middle\""});
}

TEST_CASE("sort: searchsorted equals std bounds on batches and traces once", "[cpu][cuda][sort]") {
  // A (2, 3, 50) sorted sequence with repeats and (2, 3, 40) values against std::lower_bound /
  // std::upper_bound row by row; int64 and float64.
  auto seqv = random_values(300, 0, 20, 5);
  for (double& e : seqv) e = std::floor(e);
  for (size_t r = 0; r < 6; ++r) std::sort(seqv.begin() + r * 50, seqv.begin() + (r + 1) * 50);
  auto valv = random_values(240, -1, 21, 6);
  for (double& e : valv) e = std::floor(e * 2) / 2;
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    for (tf::DType d : {tf::float64, tf::int64}) {
      const tf::Tensor seq = make(seqv, {2, 3, 50}, d), val = make(valv, {2, 3, 40}, d);
      const auto sv = tf::detail::to_double_vector(seq), vv = tf::detail::to_double_vector(val);
      for (const char* side : {"left", "right"}) {
        std::vector<double> want;
        for (size_t q = 0; q < vv.size(); ++q) {
          const auto b = sv.begin() + static_cast<std::ptrdiff_t>((q / 40) * 50), e = b + 50;
          const auto it = std::string(side) == "left" ? std::lower_bound(b, e, vv[q])
                                                      : std::upper_bound(b, e, vv[q]);
          want.push_back(static_cast<double>(it - b));
        }
        check_values(tf::searchsorted(seq, val, side, tf::int64), want, 0, 0);
      }
    }
  }
  tf::FunctionOptions opts;
  opts.input_signature = {tf::TensorSpec({tf::None, 3}), tf::TensorSpec({tf::None, 2})};
  auto f = tf::function(
      [](const tf::Tensor& s, const tf::Tensor& v) { return tf::searchsorted(s, v, "right"); },
      opts);
  check_values(f(tf::constant({{1.f, 2.f, 3.f}}), tf::constant({{2.f, 0.f}})), {2, 0}, 0, 0);
  check_values(
      f(tf::constant({{1.f, 2.f, 3.f}, {0.f, 0.f, 0.f}}), tf::constant({{9.f, 1.f}, {0.f, -1.f}})),
      {3, 1, 3, 0}, 0, 0);
  CHECK(f.tracing_count() == 1);
}

TEST_CASE("sort: unique and unique_with_counts keep the first occurrence", "[cpu][cuda][sort]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    // tf.unique_with_counts([1, 2, 1, 3, 2, 2, 0]).
    for (tf::DType d : {tf::int32, tf::int64, tf::float32}) {
      auto [y, idx, count] = tf::unique_with_counts(make({1, 2, 1, 3, 2, 2, 0}, {7}, d));
      CHECK(y.dtype() == d);
      check_values(y, {1, 2, 3, 0}, 0, 0);
      check_values(idx, {0, 1, 0, 2, 1, 1, 3}, 0, 0);
      check_values(count, {2, 3, 1, 1}, 0, 0);
      CHECK(idx.dtype() == tf::int32);
    }
    // tf.unique([1., nan, nan, 1., -0., 0.]): each NaN is its own value, -0 equals 0.
    auto [y, idx] = tf::unique(make({1, kNaN, kNaN, 1, -0.0, 0.0}, {6}, tf::float32), tf::int64);
    check_values(y, {1, kNaN, kNaN, 0}, 0, 0);
    CHECK(std::signbit(y.numpy<float>()[3]));
    CHECK(idx.dtype() == tf::int64);
    check_values(idx, {0, 1, 2, 0, 3, 3}, 0, 0);
    auto [ye, ie] = tf::unique(tf::zeros({0}));
    CHECK(ye.shape() == tf::TensorShape{0});
    CHECK(ie.shape() == tf::TensorShape{0});
  }
  require_error([] { tf::unique(tf::zeros({2, 2})); }, {"unique", "1-D", "(2, 2)"});
  auto traced = tf::function([](const tf::Tensor& x) { return tf::unique(x).first; });
  require_error([&] { traced(tf::zeros({3})); }, {"unique", "traced function"});
}

TEST_CASE("sort: bincount gives TF's counts", "[cpu][cuda][sort]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor b = tf::constant({1, 1, 3, 0, 7});
    // tf.math.bincount(b), minlength=10, maxlength=3, and with weights.
    const tf::Tensor c = tf::math::bincount(b);
    CHECK(c.dtype() == tf::int32);
    check_values(c, {1, 2, 0, 1, 0, 0, 0, 1}, 0, 0);
    check_values(tf::math::bincount(b, {}, 10), {1, 2, 0, 1, 0, 0, 0, 1, 0, 0}, 0, 0);
    check_values(tf::math::bincount(b, {}, -1, 3), {1, 2, 0}, 0, 0);
    const tf::Tensor w = tf::math::bincount(b, tf::constant({0.5f, 1.5f, 2.f, 3.f, 1.f}));
    CHECK(w.dtype() == tf::float32);
    check_values(w, {3, 2, 0, 2, 0, 0, 0, 1}, 0, 0);
    CHECK(tf::math::bincount(tf::zeros({0}, tf::int32)).shape() == tf::TensorShape{0});
    // tf.math.bincount([[1, 2], [2, 0]]): every element counts.
    check_values(tf::math::bincount(tf::constant({{1, 2}, {2, 0}}), {}, -1, -1, tf::int64),
                 {1, 1, 2}, 0, 0);
  }
  // TF 2.21: "Input arr must be non-negative!".
  require_error(
      [] {
        tf::math::bincount(tf::constant({1, -1}));
      },
      {"bincount", "Input arr must be non-negative"});
  require_error([] { tf::math::bincount(tf::constant({1.f})); }, {"bincount", "float32"});
  require_error(
      [] {
        tf::math::bincount(tf::constant({1}), tf::constant({1.f, 2.f}));
      },
      {"bincount", "(2,)", "(1,)"});
  auto open_length = tf::function([](const tf::Tensor& a) { return tf::math::bincount(a); });
  require_error([&] { open_length(tf::constant({1})); }, {"bincount", "minlength == maxlength"});
}

TEST_CASE("sort: histogram_fixed_width clamps out-of-range values", "[cpu][cuda][sort]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    // tf.histogram_fixed_width([-1., 0., 1.5, 2., 5., 15., 4.99], [0., 5.], nbins=5).
    for (tf::DType d : {tf::float32, tf::float64}) {
      const tf::Tensor h = tf::histogram_fixed_width(make({-1, 0, 1.5, 2, 5, 15, 4.99}, {7}, d),
                                                     make({0, 5}, {2}, d), 5);
      CHECK(h.dtype() == tf::int32);
      check_values(h, {2, 1, 1, 0, 3}, 0, 0);
    }
    // No values: every bin empty.
    check_values(tf::histogram_fixed_width(tf::zeros({0}), tf::constant({0.f, 1.f}), 3), {0, 0, 0},
                 0, 0);
    // tf.histogram_fixed_width([0, 1, 2, 3, 9, -3], [0, 4], nbins=3).
    check_values(tf::histogram_fixed_width(tf::constant({0, 1, 2, 3, 9, -3}), tf::constant({0, 4}),
                                           3, tf::int64),
                 {3, 1, 2}, 0, 0);
  }
  // TF 2.21: "Histogram values must not contain NaN".
  require_error(
      [] {
        tf::histogram_fixed_width(make({1, kNaN}, {2}, tf::float32), tf::constant({0.f, 1.f}), 2);
      },
      {"histogram_fixed_width", "must not contain NaN"});
  require_error(
      [] {
        tf::histogram_fixed_width(tf::zeros({2}), tf::constant({1.f, 0.f}), 2);
      },
      {"histogram_fixed_width", "value_range[0] < value_range[1]"});
  require_error(
      [] {
        tf::histogram_fixed_width(tf::zeros({2}), tf::constant({0.f, 1.f}), 0);
      },
      {"histogram_fixed_width", "nbins"});
  require_error(
      [] {
        tf::histogram_fixed_width(tf::zeros({2}), tf::constant({0, 1}), 2);
      },
      {"histogram_fixed_width", "value_range", "int32"});
}

TEST_CASE("sort: confusion_matrix gives TF's matrices", "[cpu][cuda][sort]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    // tf.math.confusion_matrix([1, 2, 4], [2, 2, 4]).
    const tf::Tensor cm =
        tf::math::confusion_matrix(tf::constant({1, 2, 4}), tf::constant({2, 2, 4}));
    CHECK(cm.shape() == tf::TensorShape{5, 5});
    CHECK(cm.dtype() == tf::int32);
    std::vector<double> want(25, 0);
    want[1 * 5 + 2] = 1;
    want[2 * 5 + 2] = 1;
    want[4 * 5 + 4] = 1;
    check_values(cm, want, 0, 0);
    // num_classes=6, weights=[0.5, 1., 2.], dtype=tf.float32.
    const tf::Tensor cw =
        tf::math::confusion_matrix(tf::constant({1, 2, 4}), tf::constant({2, 2, 4}), 6,
                                   tf::constant({0.5f, 1.f, 2.f}), tf::float32);
    std::vector<double> want_w(36, 0);
    want_w[1 * 6 + 2] = 0.5;
    want_w[2 * 6 + 2] = 1;
    want_w[4 * 6 + 4] = 2;
    check_values(cw, want_w, 0, 0);
    // No pairs: zeros of num_classes (or a 0 x 0 matrix without it).
    const tf::Tensor none = tf::zeros({0}, tf::int32);
    check_values(tf::math::confusion_matrix(none, none, 2), {0, 0, 0, 0}, 0, 0);
    CHECK(tf::math::confusion_matrix(none, none).shape() == tf::TensorShape{0, 0});
  }
  require_error(
      [] {
        tf::math::confusion_matrix(tf::constant({1, -2}), tf::constant({2, 2}));
      },
      {"confusion_matrix", "`labels` contains negative values"});
  require_error(
      [] {
        tf::math::confusion_matrix(tf::constant({1, 5}), tf::constant({2, 2}), 3);
      },
      {"confusion_matrix", "`labels` out of bound"});
  require_error(
      [] {
        tf::math::confusion_matrix(tf::constant({1}), tf::constant({2, 2}));
      },
      {"confusion_matrix", "(1,)", "(2,)"});
}

TEST_CASE("sort: traced functions equal eager", "[cpu][cuda][sort]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    auto f = tf::function([](const tf::Tensor& x, const tf::Tensor& t) {
      auto [v, i] = tf::math::top_k(x, 3);
      return std::vector<tf::Tensor>{v,
                                     i,
                                     tf::sort(x, 0, "DESCENDING"),
                                     tf::argsort(x),
                                     tf::math::in_top_k(t, x, 2),
                                     tf::searchsorted(tf::sort(x), x, "right"),
                                     tf::histogram_fixed_width(x, tf::constant({-0.5f, 0.5f}), 4),
                                     tf::math::bincount(t, {}, 5, 5),
                                     tf::math::confusion_matrix(t, t, 4)};
    });
    for (unsigned seed : {1u, 2u}) {
      const auto data = random_values(20, -1, 1, seed);
      const tf::Tensor x = make(data, {4, 5}, tf::float32);
      const tf::Tensor t = tf::constant({seed % 4, 3u, 1u, 0u});
      const tf::Tensor ti = tf::cast(t, tf::int32);
      const auto got = f(x, ti);
      auto [v, i] = tf::math::top_k(x, 3);
      const std::vector<tf::Tensor> want = {
          v,
          i,
          tf::sort(x, 0, "DESCENDING"),
          tf::argsort(x),
          tf::math::in_top_k(ti, x, 2),
          tf::searchsorted(tf::sort(x), x, "right"),
          tf::histogram_fixed_width(x, tf::constant({-0.5f, 0.5f}), 4),
          tf::math::bincount(ti, {}, 5, 5),
          tf::math::confusion_matrix(ti, ti, 4)};
      REQUIRE(got.size() == want.size());
      for (size_t k = 0; k < got.size(); ++k) {
        INFO("output " << k);
        tf::testing::check_close(got[k], want[k], 0, 0);
      }
    }
    CHECK(f.tracing_count() == 1);
  }
}

TEST_CASE("sort: the docs example gives the values its comments state", "[cpu][sort]") {
  // docs/ops.md, "Sorting and counting".
  tf::Tensor x = tf::constant({{1.f, 3.f, 3.f, 2.f}, {5.f, -1.f, 5.f, 0.f}});
  auto [v, i] = tf::math::top_k(x, 2);          // [[3, 3], [5, 5]], [[1, 2], [0, 2]]
  tf::Tensor s = tf::sort(x, 0, "DESCENDING");  // [[5, 3, 5, 2], [1, -1, 3, 0]]
  tf::Tensor a = tf::argsort(x);                // [[0, 3, 1, 2], [1, 3, 0, 2]]
  tf::Tensor ok = tf::math::in_top_k(tf::constant({2, 1}), x, 1);  // [true, false]
  tf::Tensor p = tf::searchsorted(tf::constant({1.f, 3.f, 3.f}), tf::constant({3.f}), "right");
  auto [y, idx] = tf::unique(tf::constant({1, 2, 1}));  // [1, 2], [0, 1, 0]
  check_values(v, {3, 3, 5, 5}, 0, 0);
  check_values(i, {1, 2, 0, 2}, 0, 0);
  check_values(s, {5, 3, 5, 2, 1, -1, 3, 0}, 0, 0);
  check_values(a, {0, 3, 1, 2, 1, 3, 0, 2}, 0, 0);
  check_values(ok, {1, 0}, 0, 0);
  check_values(p, {3}, 0, 0);
  check_values(y, {1, 2}, 0, 0);
  check_values(idx, {0, 1, 0}, 0, 0);
}
