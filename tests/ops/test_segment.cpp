// The segment reductions (ops/segment.h): values against TF 2.21 literals (computed with
// tf.math.unsorted_segment_* and tf.math.segment_* on the same inputs) on every device and
// dtype, empty segments, dropped and out-of-range ids, sorted-id errors, multi-dimensional ids,
// gradients against TF's literals (ties, zeros in a product) and against central finite
// differences in float64, and traced against eager.
#include <cmath>
#include <functional>
#include <limits>
#include <vector>

#include "autograd/tape.h"
#include "core/device.h"
#include "core/error.h"
#include "jit/function.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/reduce.h"
#include "ops/segment.h"
#include "support/testing.h"

namespace tf = tapeflow;
using tf::testing::check_values;
using tf::testing::require_error;

namespace {

const std::vector<tf::DType> kFloating = {tf::float16, tf::bfloat16, tf::float32, tf::float64};

tf::Tensor make(const std::vector<double>& v, const tf::TensorShape& s, tf::DType dt) {
  return tf::detail::from_doubles(v, s, dt);
}

// The data of the value tests: (5, 2), with a tie in segment 0's column 1.
const std::vector<double> kData = {1, 5, 3, 5, 2, -1, 4, 0, 0, 2};

// Central finite differences of sum(f(x) * w) against the tape's gradient, float64.
void check_fd(const char* name, const std::function<tf::Tensor(const tf::Tensor&)>& f,
              const std::vector<double>& x0, const tf::TensorShape& shape) {
  INFO(name);
  tf::testing::check_gradient(f, shape, x0, 1e-6, 1e-6);
}

}  // namespace

TEST_CASE("segment: unsorted max min prod mean sqrt_n equal TF", "[cpu][cuda][segment]") {
  // tf.math.unsorted_segment_*(data, [0, 0, 2, -1, 0], 4) in float32 (TF 2.21).
  const double lo32 = -3.4028234663852886e+38;
  for (auto dev : tf::testing::devices_under_test()) {
    INFO(dev.to_string());
    tf::DeviceScope scope(dev);
    for (auto idt : {tf::int32, tf::int64}) {
      const auto ids = make({0, 0, 2, -1, 0}, {5}, idt);
      for (auto dt : kFloating) {
        INFO(tf::dtype_name(dt));
        const auto d = make(kData, {5, 2}, dt);
        const double lo = dt == tf::float16    ? -65504.0
                          : dt == tf::bfloat16 ? -3.3895313892515355e38
                          : dt == tf::float32  ? lo32
                                               : -std::numeric_limits<double>::max();
        const double tol = tf::testing::rtol_of(dt);
        check_values(tf::math::unsorted_segment_max(d, ids, 4), {3, 5, lo, lo, 2, -1, lo, lo}, 0,
                     0);
        check_values(tf::math::unsorted_segment_min(d, ids, 4), {0, 2, -lo, -lo, 2, -1, -lo, -lo},
                     0, 0);
        check_values(tf::math::unsorted_segment_prod(d, ids, 4), {0, 50, 1, 1, 2, -1, 1, 1}, 0, 0);
        check_values(tf::math::unsorted_segment_mean(d, ids, 4),
                     {1.3333333730697632, 4, 0, 0, 2, -1, 0, 0}, tol, 1e-6);
        check_values(tf::math::unsorted_segment_sqrt_n(d, ids, 4),
                     {2.309401035308838, 6.928203582763672, 0, 0, 2, -1, 0, 0}, tol, 1e-6);
      }
      // Integer data: TF's int32 lowest/highest fill the empty segments.
      const auto di = make(kData, {5, 2}, tf::int32);
      check_values(tf::math::unsorted_segment_max(di, ids, 3),
                   {3, 5, -2147483648.0, -2147483648.0, 2, -1}, 0, 0);
      check_values(tf::math::unsorted_segment_min(make(kData, {5, 2}, tf::int64), ids, 3),
                   {0, 2, 9.223372036854775807e18, 9.223372036854775807e18, 2, -1}, 0, 0);
      check_values(tf::math::unsorted_segment_prod(di, ids, 3), {0, 50, 1, 1, 2, -1}, 0, 0);
      // tf.math.unsorted_segment_sum of int32 data; floating data goes to tf::unsorted_segment_sum.
      check_values(tf::math::unsorted_segment_sum(di, ids, 3), {4, 12, 0, 0, 2, -1}, 0, 0);
      check_values(tf::math::unsorted_segment_sum(make(kData, {5, 2}, tf::float32), ids, 3),
                   {4, 12, 0, 0, 2, -1}, 0, 0);
    }
    // Multi-dimensional ids (a prefix of data's shape): TF gives [-65504, 1, 4] for float16 max.
    const auto ids2 = tf::constant(std::vector<int32_t>{1, 1, 0, 1}, {2, 2});
    check_values(tf::math::unsorted_segment_max(make({1, 2, 4, 3}, {2, 2}, tf::float16), ids2, 3),
                 {4, 3, -65504}, 0, 0);
    check_values(tf::math::unsorted_segment_mean(make({1, 2, 4, 3}, {2, 2}, tf::float32), ids2, 2),
                 {4, 2}, 1e-6, 0);
    const auto d3 = make({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2}, tf::float32);
    const auto r3 = tf::math::unsorted_segment_prod(d3, ids2, 2);
    CHECK(r3.shape() == tf::TensorShape({2, 2}));
    check_values(r3, {5, 6, 1 * 3 * 7, 2 * 4 * 8}, 0, 0);
    // NaN wins in max and min, as TF's CPU kernel.
    const double nan = std::numeric_limits<double>::quiet_NaN();
    check_values(
        tf::math::unsorted_segment_max(make({1, nan, 3}, {3}, tf::float32),
                                       tf::constant(std::vector<int32_t>{0, 0, 0}, {3}), 1),
        {nan}, 0, 0);
  }
}

TEST_CASE("segment: unsorted ids are checked and negative ids dropped", "[cpu][cuda][segment]") {
  for (auto dev : tf::testing::devices_under_test()) {
    INFO(dev.to_string());
    tf::DeviceScope scope(dev);
    const auto d = make(kData, {5, 2}, tf::float32);
    // TF: "segment_ids[1] = 5 is out of range [0, 4)" (InvalidArgumentError on the CPU).
    const auto bad = tf::constant(std::vector<int32_t>{0, 5, 0, 0, 0}, {5});
    require_error([&] { tf::math::unsorted_segment_max(d, bad, 4); },
                  {"unsorted_segment_max", "segment_ids[1] = 5 is not less than num_segments 4"});
    require_error([&] { tf::math::unsorted_segment_min(d, bad, 4); }, {"unsorted_segment_min"});
    require_error([&] { tf::math::unsorted_segment_prod(d, bad, -1); },
                  {"num_segments must be non-negative"});
    require_error(
        [&] {
          tf::math::unsorted_segment_max(d, tf::constant({0, 1}), 4);
        },
        {"does not start with the segment_ids shape"});
    require_error(
        [&] {
          tf::math::unsorted_segment_max(d, make({0, 0, 0, 0, 0}, {5}, tf::float32), 4);
        },
        {"segment_ids must be int32 or int64, got float32"});
    require_error(
        [&] {
          tf::math::unsorted_segment_mean(make(kData, {5, 2}, tf::int32), bad, 6);
        },
        {"unsorted_segment_mean", "int32"});
    require_error(
        [&] {
          tf::math::unsorted_segment_max(make(kData, {5, 2}, tf::uint8), bad, 6);
        },
        {"unsorted_segment_max", "uint8"});
    // Integers wrap as TF's: [2^31 - 1, 1] sums to -2^31, 2^20 * 2^20 (int32) multiplies to 0.
    const auto pair_ids = tf::constant(std::vector<int32_t>{0, 0}, {2});
    check_values(tf::math::unsorted_segment_sum(
                     tf::constant(std::vector<int32_t>{2147483647, 1}, {2}), pair_ids, 1),
                 {-2147483648.0}, 0, 0);
    check_values(tf::math::unsorted_segment_prod(
                     tf::constant(std::vector<int32_t>{1 << 20, 1 << 20}, {2}), pair_ids, 1),
                 {0}, 0, 0);
    // Every id negative: all identities.
    const auto dropped = tf::constant(std::vector<int64_t>{-1, -2, -3, -4, -5}, {5});
    check_values(tf::math::unsorted_segment_prod(d, dropped, 1), {1, 1}, 0, 0);
    CHECK(tf::math::unsorted_segment_max(d, dropped, 0).shape() == tf::TensorShape({0, 2}));
  }
}

TEST_CASE("segment: sorted segment ops equal TF and check the ids", "[cpu][cuda][segment]") {
  // tf.math.segment_*(data, [0, 0, 2, 2, 3]) in float32 (TF 2.21): empty segment 1 holds 0
  // (1 for prod).
  for (auto dev : tf::testing::devices_under_test()) {
    INFO(dev.to_string());
    tf::DeviceScope scope(dev);
    for (auto idt : {tf::int32, tf::int64}) {
      const auto ids = make({0, 0, 2, 2, 3}, {5}, idt);
      for (auto dt : kFloating) {
        INFO(tf::dtype_name(dt));
        const auto d = make(kData, {5, 2}, dt);
        check_values(tf::math::segment_sum(d, ids), {4, 10, 0, 0, 6, -1, 0, 2}, 0, 0);
        check_values(tf::math::segment_mean(d, ids), {2, 5, 0, 0, 3, -0.5, 0, 2}, 0, 0);
        check_values(tf::math::segment_max(d, ids), {3, 5, 0, 0, 4, 0, 0, 2}, 0, 0);
        check_values(tf::math::segment_min(d, ids), {1, 5, 0, 0, 2, -1, 0, 2}, 0, 0);
        check_values(tf::math::segment_prod(d, ids), {3, 25, 1, 1, 8, 0, 0, 2}, 0, 0);
      }
      for (auto dt : {tf::int32, tf::int64}) {
        const auto d = make(kData, {5, 2}, dt);
        check_values(tf::math::segment_sum(d, ids), {4, 10, 0, 0, 6, -1, 0, 2}, 0, 0);
        check_values(tf::math::segment_max(d, ids), {3, 5, 0, 0, 4, 0, 0, 2}, 0, 0);
        check_values(tf::math::segment_min(d, ids), {1, 5, 0, 0, 2, -1, 0, 2}, 0, 0);
        check_values(tf::math::segment_prod(d, ids), {3, 25, 1, 1, 8, 0, 0, 2}, 0, 0);
      }
    }
    const auto d = make(kData, {5, 2}, tf::float32);
    // TF: "segment ids are not increasing" and "Segment id -1 out of range [0, 2), possibly
    // because 'segment_ids' input is not sorted."
    require_error(
        [&] {
          tf::math::segment_sum(d, tf::constant({0, 2, 1, 3, 3}));
        },
        {"segment_sum", "segment ids are not increasing"});
    require_error(
        [&] {
          tf::math::segment_max(d, tf::constant({-1, 0, 0, 1, 1}));
        },
        {"segment_max", "segment id -1 out of range [0, 2)"});
    require_error(
        [&] {
          tf::math::segment_min(d, tf::constant({0, 0, 1}));
        },
        {"segment_min", "size of data's dimension 0"});
    require_error(
        [&] {
          tf::math::segment_mean(make(kData, {5, 2}, tf::int32), tf::constant({0, 0, 1, 1, 1}));
        },
        {"segment_mean", "int32"});
    // No rows: no segments.
    const auto none = tf::math::segment_sum(tf::zeros({0, 3}), tf::zeros({0}, tf::int32));
    CHECK(none.shape() == tf::TensorShape({0, 3}));
    // Inside tf::function the output's row count is unknown: a clear error.
    auto f = tf::function(
        [](const tf::Tensor& x, const tf::Tensor& i) { return tf::math::segment_sum(x, i); });
    require_error([&] { f(d, tf::constant({0, 0, 1, 1, 1})); }, {"segment_sum", "eagerly only"});
  }
}

TEST_CASE("segment: gradients equal TF with ties and zeros", "[cpu][cuda][segment]") {
  // TF 2.21: d/dx sum(f(x, [0, 0, 0, -1, 2], 3) * w), w = [[1, 2], [3, 4], [5, 6]], float64.
  const std::vector<double> x0 = {1, 5, 3, 5, 3, -1, 4, 0, 0, 2};
  const std::vector<double> w = {1, 2, 3, 4, 5, 6};
  using F = tf::Tensor (*)(const tf::Tensor&, const tf::Tensor&, int64_t);
  struct Row {
    F f;
    std::vector<double> want;
  };
  const std::vector<Row> rows = {
      {tf::math::unsorted_segment_max, {0, 1, 0.5, 1, 0.5, 0, 0, 0, 5, 6}},
      {tf::math::unsorted_segment_min, {1, 0, 0, 0, 0, 2, 0, 0, 5, 6}},
      {tf::math::unsorted_segment_prod, {9, -10, 3, -10, 3, 50, 0, 0, 5, 6}},
  };
  for (auto dev : tf::testing::devices_under_test()) {
    INFO(dev.to_string());
    tf::DeviceScope scope(dev);
    const auto ids = tf::constant(std::vector<int32_t>{0, 0, 0, -1, 2}, {5});
    const auto wt = make(w, {3, 2}, tf::float64);
    for (const auto& r : rows) {
      const auto x = make(x0, {5, 2}, tf::float64);
      tf::GradientTape tape;
      tape.watch(x);
      const auto loss = tf::reduce_sum(r.f(x, ids, 3) * wt);
      check_values(tape.gradient(loss, x), r.want, 1e-12, 1e-12);
    }
    // Sorted: segment_max and segment_prod over [0, 0, 0, 2, 2] (TF 2.21).
    const auto sids = tf::constant(std::vector<int32_t>{0, 0, 0, 2, 2}, {5});
    {
      const auto x = make(x0, {5, 2}, tf::float64);
      tf::GradientTape tape;
      tape.watch(x);
      const auto loss = tf::reduce_sum(tf::math::segment_max(x, sids) * wt);
      check_values(tape.gradient(loss, x), {0, 1, 0.5, 1, 0.5, 0, 5, 0, 0, 6}, 1e-12, 1e-12);
    }
    {
      const auto x = make(x0, {5, 2}, tf::float64);
      tf::GradientTape tape;
      tape.watch(x);
      const auto loss = tf::reduce_sum(tf::math::segment_prod(x, sids) * wt);
      check_values(tape.gradient(loss, x), {9, -10, 3, -10, 3, 50, 0, 12, 20, 0}, 1e-12, 1e-12);
    }
    // One zero in a segment gets the product of the others; two zeros give 0 everywhere.
    {
      const auto x = make({0, 0, 3, 0, 2, 2}, {3, 2}, tf::float64);
      tf::GradientTape tape;
      tape.watch(x);
      const auto y =
          tf::math::unsorted_segment_prod(x, tf::constant(std::vector<int32_t>{0, 0, 1}, {3}), 2);
      const auto loss = tf::reduce_sum(y * make({1, 2, 3, 4}, {2, 2}, tf::float64));
      check_values(tape.gradient(loss, x), {3, 0, 0, 0, 3, 4}, 1e-12, 1e-12);
    }
  }
}

TEST_CASE("segment: gradients match finite differences", "[cpu][cuda][segment]") {
  for (auto dev : tf::testing::devices_under_test()) {
    INFO(dev.to_string());
    tf::DeviceScope scope(dev);
    // Distinct values (no ties): max and min are differentiable there.
    const auto x0 = tf::testing::random_values(12, 0.5, 2.0, 3);
    const tf::TensorShape s{6, 2};
    // No empty segment: the identity of max/min (+-1.8e308) would swamp the differences.
    const auto ids = tf::constant(std::vector<int64_t>{1, 0, -1, 1, 2, 1}, {6});
    const auto sids = tf::constant(std::vector<int64_t>{0, 0, 1, 3, 3, 3}, {6});
    using V = const tf::Tensor&;
    check_fd(
        "unsorted_segment_max", [&](V x) { return tf::math::unsorted_segment_max(x, ids, 3); }, x0,
        s);
    check_fd(
        "unsorted_segment_min", [&](V x) { return tf::math::unsorted_segment_min(x, ids, 3); }, x0,
        s);
    check_fd(
        "unsorted_segment_prod", [&](V x) { return tf::math::unsorted_segment_prod(x, ids, 3); },
        x0, s);
    check_fd(
        "unsorted_segment_mean", [&](V x) { return tf::math::unsorted_segment_mean(x, ids, 3); },
        x0, s);
    check_fd(
        "unsorted_segment_sqrt_n",
        [&](V x) { return tf::math::unsorted_segment_sqrt_n(x, ids, 3); }, x0, s);
    check_fd(
        "segment_sum", [&](V x) { return tf::math::segment_sum(x, sids); }, x0, s);
    check_fd(
        "segment_mean", [&](V x) { return tf::math::segment_mean(x, sids); }, x0, s);
    check_fd(
        "segment_max", [&](V x) { return tf::math::segment_max(x, sids); }, x0, s);
    check_fd(
        "segment_min", [&](V x) { return tf::math::segment_min(x, sids); }, x0, s);
    check_fd(
        "segment_prod", [&](V x) { return tf::math::segment_prod(x, sids); }, x0, s);
  }
}

TEST_CASE("segment: traced unsorted reductions equal eager", "[cpu][cuda][segment]") {
  for (auto dev : tf::testing::devices_under_test()) {
    INFO(dev.to_string());
    tf::DeviceScope scope(dev);
    const auto d = make(tf::testing::random_values(12, -2, 2, 5), {6, 2}, tf::float32);
    const auto ids = tf::constant(std::vector<int32_t>{2, 0, -1, 2, 0, 0}, {6});
    // Node by node: a captured CUDA graph (jit_compile, the default on a GPU) cannot check
    // traced ids on the host, and drops those out of range as TF's GPU kernels do.
    const tf::FunctionOptions node_by_node{.jit_compile = false};
    auto f = tf::function(
        [](const tf::Tensor& x, const tf::Tensor& i) {
          return tf::math::unsorted_segment_max(x, i, 3) + tf::math::unsorted_segment_min(x, i, 3) +
                 tf::math::unsorted_segment_prod(x, i, 3) +
                 tf::math::unsorted_segment_mean(x, i, 3) +
                 tf::math::unsorted_segment_sqrt_n(x, i, 3);
        },
        node_by_node);
    const auto eager =
        tf::math::unsorted_segment_max(d, ids, 3) + tf::math::unsorted_segment_min(d, ids, 3) +
        tf::math::unsorted_segment_prod(d, ids, 3) + tf::math::unsorted_segment_mean(d, ids, 3) +
        tf::math::unsorted_segment_sqrt_n(d, ids, 3);
    tf::testing::check_close(f(d, ids), eager, 1e-6, 1e-6);
    // Both kernels check traced ids.
    require_error(
        [&] {
          f(d, tf::constant(std::vector<int32_t>{0, 0, 0, 3, 0, 0}, {6}));
        },
        {"segment_ids[3] = 3 is not less than num_segments 3"});
    auto g =
        tf::function([](const tf::Tensor& x,
                        const tf::Tensor& i) { return tf::math::unsorted_segment_prod(x, i, 2); },
                     node_by_node);
    require_error(
        [&] {
          g(d, tf::constant(std::vector<int64_t>{0, 0, 0, 0, 7, 0}, {6}));
        },
        {"segment_ids[4] = 7 is not less than num_segments 2"});
    // A float16 product rounds once (accumulated in float32) on every device: 300 * 300 / 300.
    const auto h = make({300, 300, 1.0 / 300, 2, 3, 4}, {6}, tf::float16);
    const auto hi = tf::constant(std::vector<int32_t>{0, 0, 0, 1, 1, 1}, {6});
    check_values(tf::math::unsorted_segment_prod(h, hi, 2), {300, 24}, 1e-3, 0);
    check_values(g(h, hi), {300, 24}, 1e-3, 0);
  }
}
