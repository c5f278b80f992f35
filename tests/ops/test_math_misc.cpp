// tf::shape, size, rank, ensure_shape (ops/shape_ops.h) and count_nonzero, truncatediv,
// truncatemod, polyval, is_non_decreasing, is_strictly_increasing, invert_permutation,
// histogram_fixed_width_bins, erfcinv (ops/math_misc.h) on every device of
// devices_under_test(): values against TF 2.21 literals, gradients against central differences,
// None dimensions in traces (the shape read when the graph runs, checks at every call), errors.
#include <cmath>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "core/tensor.h"
#include "jit/function.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/math_misc.h"
#include "ops/movement.h"
#include "ops/reduce.h"
#include "ops/shape_ops.h"
#include "ops/sort.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
using tf::testing::check_gradient;
using tf::testing::check_values;
using tf::testing::require_error;

namespace {

tf::Tensor vec(const std::vector<double>& v, tf::DType dtype = tf::float32) {
  return tf::cast(tf::constant(v, {static_cast<int64_t>(v.size())}), dtype);
}

}  // namespace

TEST_CASE("shape, size, rank and ensure_shape, also for None dimensions",
          "[cpu][cuda][shape_ops]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor x = tf::zeros({2, 3});
    const tf::Tensor s = tf::shape(x);
    CHECK(s.dtype() == tf::int32);
    check_values(s, {2, 3}, 0, 0);
    CHECK(tf::shape(x, tf::int64).dtype() == tf::int64);
    check_values(tf::size(x), {6}, 0, 0);
    check_values(tf::rank(x), {2}, 0, 0);
    check_values(tf::shape(tf::Tensor(1.0f)), {}, 0, 0);
    CHECK(tf::shape(tf::Tensor(1.0f)).shape() == tf::TensorShape{0});
    CHECK(tf::ensure_shape(x, {2, tf::None}).raw_data() == x.raw_data());
    // TF 2.21: "Shape of tensor input [2,3] is not compatible with expected shape [2,4]."
    require_error(
        [&] {
          tf::ensure_shape(x, {2, 4});
        },
        {"[ensure_shape] Shape of tensor input (2, 3) is not compatible with expected "
         "shape (2, 4)"});
    require_error([&] { tf::ensure_shape(x, {6}); }, {"not compatible"});
    require_error([&] { tf::shape(x, tf::float32); }, {"out_type must be int32 or int64"});

    // A None batch: shape and size are that call's; ensure_shape checks the batch at every call.
    auto f = tf::function(
        [](const tf::Tensor& t) {
          const tf::Tensor checked = tf::ensure_shape(t, {4, 3});
          return tf::cast(tf::concat({tf::shape(checked), tf::reshape(tf::size(t), {1})}, 0),
                          tf::float32);
        },
        tf::FunctionOptions{.input_signature = {tf::TensorSpec({tf::None, 3})}});
    check_values(f(tf::zeros({4, 3})), {4, 3, 12}, 0, 0);
    CHECK(f.tracing_count() == 1);
    require_error(
        [&] {
          f(tf::zeros({5, 3}));
        },
        {"[ensure_shape] Condition the shape of input matches (4, 3) at axes [0, 1] did "
         "not hold.",
         "Corresponding input sizes values:\n[5]"});
    auto g = tf::function(
        [](const tf::Tensor& t) { return tf::cast(tf::shape(t), tf::float32) * 2.0f; },
        tf::FunctionOptions{.input_signature = {tf::TensorSpec({tf::None, tf::None})}});
    check_values(g(tf::zeros({2, 5})), {4, 10}, 0, 0);
    check_values(g(tf::zeros({7, 1})), {14, 2}, 0, 0);
    CHECK(g.tracing_count() == 1);
  }
}

TEST_CASE("count_nonzero, truncatediv, truncatemod, polyval and the order tests match TF",
          "[cpu][cuda][math_misc]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor x = tf::cast(tf::constant<int64_t>({0, 1, 2, 3, 0, 0}, {2, 3}), tf::int32);
    // TF 2.21: 3, [2, 1], [[1, 1, 1]], 2 for [True, False, True].
    const tf::Tensor all = tf::math::count_nonzero(x);
    CHECK(all.dtype() == tf::int64);
    check_values(all, {3}, 0, 0);
    check_values(tf::math::count_nonzero(x, std::vector<int>{1}), {2, 1}, 0, 0);
    const tf::Tensor kept = tf::math::count_nonzero(x, std::vector<int>{0}, true, tf::int32);
    CHECK(kept.shape() == tf::TensorShape{1, 3});
    check_values(kept, {1, 1, 1}, 0, 0);
    check_values(tf::math::count_nonzero(tf::constant<bool>({true, false, true}, {3})), {2}, 0, 0);
    check_values(tf::math::count_nonzero(vec({0.5, 0, -0.0, 2}), std::nullopt, false, tf::float32),
                 {2}, 0, 0);

    // TF 2.21: truncatediv [3, -3, -3, 3, 2, -2], truncatemod [1, -1, 1, -1, 0, 0]; floats
    // [3, -3, -3, 3, 0] and [1.5, -1.5, 1.5, -1.5, 1].
    const tf::Tensor a = vec({7, -7, 7, -7, 6, -6}, tf::int32),
                     b = vec({2, 2, -2, -2, 3, 3}, tf::int32);
    check_values(tf::truncatediv(a, b), {3, -3, -3, 3, 2, -2}, 0, 0);
    check_values(tf::truncatemod(a, b), {1, -1, 1, -1, 0, 0}, 0, 0);
    check_values(tf::truncatediv(tf::cast(a, tf::int64), int64_t{4}), {1, -1, 1, -1, 1, -1}, 0, 0);
    const tf::Tensor fa = vec({7.5, -7.5, 7.5, -7.5, 1.0}),
                     fb = vec({2, 2, -2, -2, std::numeric_limits<double>::infinity()});
    check_values(tf::truncatediv(fa, fb), {3, -3, -3, 3, 0}, 0, 0);
    check_values(tf::truncatemod(fa, fb), {1.5, -1.5, 1.5, -1.5, 1}, 0, 0);
    require_error(
        [&] {
          tf::truncatediv(a, vec({1, 0, 1, 1, 1, 1}, tf::int32));
        },
        {"Integer division by zero"});
    require_error([&] { tf::truncatemod(vec({1}), vec({1}, tf::int32)); }, {"[truncatemod]"});

    // TF 2.21: polyval([2, -1, 3], [0, 1, 2, -1.5]) = [3, 4, 9, 9].
    const tf::Tensor px = vec({0, 1, 2, -1.5});
    check_values(tf::math::polyval({tf::Tensor(2.0f), tf::Tensor(-1.0f), tf::Tensor(3.0f)}, px),
                 {3, 4, 9, 9}, 0, 0);
    check_values(tf::math::polyval({}, px), {0, 0, 0, 0}, 0, 0);
    check_values(tf::math::polyval({tf::Tensor(5.0f)}, px), {5, 5, 5, 5}, 0, 0);
    check_gradient(
        [](const tf::Tensor& t) {
          return tf::math::polyval({tf::Tensor(2.0), tf::Tensor(-1.0), tf::Tensor(3.0)}, t);
        },
        {4});

    // TF 2.21: True, False (flattened), False, True.
    CHECK(tf::math::is_non_decreasing(vec({1, 1, 2})).item<bool>());
    CHECK_FALSE(tf::math::is_non_decreasing(vec({1, 2, 0, 3})).item<bool>());
    CHECK_FALSE(tf::math::is_strictly_increasing(vec({1, 1, 2})).item<bool>());
    CHECK(tf::math::is_strictly_increasing(vec({1})).item<bool>());
    CHECK(tf::math::is_strictly_increasing(vec({-2, 0, 7}, tf::int64)).item<bool>());

    // TF 2.21: erfcinv([0.1, 0.5, 1, 1.5, 1.9]).
    check_values(
        tf::math::erfcinv(vec({0.1, 0.5, 1.0, 1.5, 1.9}, tf::float64)),
        {1.1630871536766743, 0.4769362762044699, 0, -0.4769362762044699, -1.1630871536766738},
        1e-12, 1e-14);
    check_gradient([](const tf::Tensor& t) { return tf::math::erfcinv(t); }, {3}, {0.3, 1.0, 1.6});
  }
}

TEST_CASE("invert_permutation and histogram_fixed_width_bins check their inputs at every call",
          "[cpu][cuda][math_misc]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    // TF 2.21: invert_permutation([3, 4, 0, 2, 1]) = [2, 4, 3, 0, 1].
    const tf::Tensor p = vec({3, 4, 0, 2, 1}, tf::int32);
    const tf::Tensor inv = tf::invert_permutation(p);
    CHECK(inv.dtype() == tf::int32);
    check_values(inv, {2, 4, 3, 0, 1}, 0, 0);
    check_values(tf::gather(p, inv), {0, 1, 2, 3, 4}, 0, 0);
    check_values(tf::invert_permutation(vec({}, tf::int64)), {}, 0, 0);
    require_error(
        [&] {
          tf::invert_permutation(vec({0, 0, 1}, tf::int32));
        },
        {"[invert_permutation] Condition x is a permutation of 0 .. 2 did not hold."});
    auto f = tf::function([](const tf::Tensor& t) { return tf::invert_permutation(t); });
    check_values(f(vec({1, 2, 0}, tf::int64)), {2, 0, 1}, 0, 0);
    require_error([&] { f(vec({1, 3, 0}, tf::int64)); }, {"x is a permutation of 0 .. 2"});
    CHECK(f.tracing_count() == 1);

    // TF 2.21: bins of [-1, 0, 1.5, 2, 5, 12, 15] over [0, 15], 5 bins: [0, 0, 0, 0, 1, 4, 4].
    const tf::Tensor v = vec({-1, 0, 1.5, 2, 5, 12, 15});
    const tf::Tensor range = vec({0, 15});
    const tf::Tensor bins = tf::histogram_fixed_width_bins(v, range, 5);
    CHECK(bins.dtype() == tf::int32);
    check_values(bins, {0, 0, 0, 0, 1, 4, 4}, 0, 0);
    // Their counts are histogram_fixed_width's.
    const tf::Tensor many = vec(tf::testing::random_values(1000, -3, 18, 4));
    const tf::Tensor b = tf::histogram_fixed_width_bins(many, range, 7, tf::int64);
    const tf::Tensor hist = tf::histogram_fixed_width(many, range, 7, tf::int64);
    std::vector<double> counts(7, 0);
    for (double k : b.numpy<double>()) counts[static_cast<size_t>(k)] += 1;
    check_values(hist, counts, 0, 0);
    check_values(tf::histogram_fixed_width_bins(vec({1, 9}, tf::int32), vec({0, 10}, tf::int32), 2),
                 {0, 1}, 0, 0);
    require_error(
        [&] {
          tf::histogram_fixed_width_bins(v, vec({3, 3}), 5);
        },
        {"[histogram_fixed_width_bins] Condition value_range[0] < value_range[1] did "
         "not hold."});
    require_error(
        [&] {
          tf::histogram_fixed_width_bins(vec({1, std::nan("")}), range, 5);
        },
        {"Condition values are not NaN did not hold."});
    require_error([&] { tf::histogram_fixed_width_bins(v, range, 0); },
                  {"nbins should be a positive number, got 0"});
  }
}
