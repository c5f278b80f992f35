// unstack, roll, meshgrid, sequence_mask, reverse_sequence, repeat, the one-argument where and
// the random ops categorical, truncated_normal, shuffle, stateless_uniform and stateless_normal
// (ops/array_more.h) on every device of devices_under_test(): values against TF 2.21 literals,
// float64 gradients against central differences, traced equals eager, the errors for bad
// arguments, and distribution checks (moments, bounds, seeds) for the random ops.
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "autograd/tape.h"
#include "core/device.h"
#include "core/error.h"
#include "core/tensor.h"
#include "jit/function.h"
#include "ops/array_more.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/movement.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
using tf::testing::check_values;
using tf::testing::random_values;
using tf::testing::require_error;

namespace {

using tf::testing::check_gradient;

// Expected values, printed by TF 2.21 (tf.roll, tf.meshgrid, tf.sequence_mask,
// tf.reverse_sequence, tf.repeat, tf.where) on the inputs each test case builds.
// clang-format off
// roll 1 axis2: shape (2, 3, 4)
const std::vector<double> kRoll1Axis2 = {
    3, 0, 1, 2, 7, 4, 5, 6, 11, 8, 9, 10, 15, 12, 13, 14, 19, 16, 17, 18, 23, 20, 21, 22
};
// roll [-1,5,2] axes [0,1,2]: shape (2, 3, 4)
const std::vector<double> kRoll152Axes012 = {
    18, 19, 16, 17, 22, 23, 20, 21, 14, 15, 12, 13, 6, 7, 4, 5, 10, 11, 8, 9, 2, 3, 0, 1
};
// roll dup axis: shape (2, 3, 4)
const std::vector<double> kRollDupAxis = {
    1, 2, 3, 0, 5, 6, 7, 4, 9, 10, 11, 8, 13, 14, 15, 12, 17, 18, 19, 16, 21, 22, 23, 20
};
// mesh xy X: shape (2, 3, 4)
const std::vector<double> kMeshXyX = {
    1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3
};
// mesh xy Y: shape (2, 3, 4)
const std::vector<double> kMeshXyY = {
    4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5
};
// mesh xy Z: shape (2, 3, 4)
const std::vector<double> kMeshXyZ = {
    6, 7, 8, 9, 6, 7, 8, 9, 6, 7, 8, 9, 6, 7, 8, 9, 6, 7, 8, 9, 6, 7, 8, 9
};
// mesh ij X: shape (3, 2)
const std::vector<double> kMeshIjX = {
    1, 1, 2, 2, 3, 3
};
// mesh ij Y: shape (3, 2)
const std::vector<double> kMeshIjY = {
    4, 5, 4, 5, 4, 5
};
// seqmask: shape (2, 2, 4)
const std::vector<double> kSeqmask = {
    1, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 1, 1, 0, 0
};
// seqmask nomax: shape (3, 3)
const std::vector<double> kSeqmaskNomax = {
    1, 0, 0, 1, 1, 1, 1, 1, 0
};
// revseq: shape (2, 5, 2)
const std::vector<double> kRevseq = {
    4, 5, 2, 3, 0, 1, 6, 7, 8, 9, 18, 19, 16, 17, 14, 15, 12, 13, 10, 11
};
// revseq b1 s0: shape (5, 3)
const std::vector<double> kRevseqB1S0 = {
    3, 1, 11, 0, 4, 8, 6, 7, 5, 9, 10, 2, 12, 13, 14
};
// repeat scalar axis1: shape (2, 6)
const std::vector<double> kRepeatScalarAxis1 = {
    0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5
};
// repeat none: shape (12,)
const std::vector<double> kRepeatNone = {
    0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5
};
// repeat vec axis0: shape (4, 3)
const std::vector<double> kRepeatVecAxis0 = {
    0, 1, 2, 3, 4, 5, 3, 4, 5, 3, 4, 5
};
// repeat vec axis1: shape (2, 3)
const std::vector<double> kRepeatVecAxis1 = {
    1, 1, 2, 4, 4, 5
};
// where: shape (3, 2)
const std::vector<double> kWhere = {
    0, 0, 0, 2, 1, 2
};
// where float: shape (2, 2)
const std::vector<double> kWhereFloat = {
    0, 1, 1, 0
};
// clang-format on

tf::Tensor iota(const tf::TensorShape& shape, tf::DType dtype = tf::float32) {
  return tf::reshape(tf::range(0.0, static_cast<double>(shape.num_elements()), 1.0, dtype), shape);
}

tf::Tensor ints(const std::vector<int64_t>& v, const tf::TensorShape& shape,
                tf::DType dtype = tf::int32) {
  return tf::cast(tf::constant(v, shape), dtype);
}

}  // namespace

TEST_CASE("array_more: unstack gives the slices along an axis", "[cpu][cuda][array_more]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor x = iota({2, 3, 2});
    const auto rows = tf::unstack(x);
    REQUIRE(rows.size() == 2);
    check_values(rows[1], {6, 7, 8, 9, 10, 11}, 0, 0);
    CHECK(rows[1].shape() == tf::TensorShape{3, 2});
    const auto cols = tf::unstack(x, 3, 1);
    REQUIRE(cols.size() == 3);
    check_values(cols[2], {4, 5, 10, 11}, 0, 0);
    const auto last = tf::unstack(x, std::nullopt, -1);
    REQUIRE(last.size() == 2);
    check_values(last[0], {0, 2, 4, 6, 8, 10}, 0, 0);
    CHECK(tf::unstack(tf::zeros({0, 3})).empty());
  }
  check_gradient([](const tf::Tensor& x) { return tf::unstack(x, 3, 1)[1]; }, {2, 3, 2});
  require_error([] { tf::unstack(iota({2, 3}), 4, 1); }, {"unstack", "num = 4", "(2, 3)"});
  require_error([] { tf::unstack(tf::Tensor(1.0f)); }, {"unstack", "scalar"});
  require_error([] { tf::unstack(iota({2, 3}), std::nullopt, 2); }, {"unstack", "axis"});
}

TEST_CASE("array_more: roll shifts along one or several axes as TF", "[cpu][cuda][array_more]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor r = iota({2, 3, 4}, tf::int32);
    check_values(tf::roll(r, 1, 2), kRoll1Axis2, 0, 0);
    check_values(tf::roll(r, {-1, 5, 2}, {0, 1, 2}), kRoll152Axes012, 0, 0);
    check_values(tf::roll(r, {1, 2}, {2, 2}), kRollDupAxis, 0, 0);  // shifts on one axis add up
    check_values(tf::roll(r, {1, 2}, {-1, 2}), kRollDupAxis, 0, 0);
    check_values(tf::roll(r, 8, 2), tf::detail::to_double_vector(r), 0, 0);
    auto f = tf::function([](const tf::Tensor& x) { return tf::roll(x, {-1, 5, 2}, {0, 1, 2}); });
    check_values(f(r), kRoll152Axes012, 0, 0);
  }
  check_gradient([](const tf::Tensor& x) { return tf::roll(x, {1, -2}, {0, 1}); }, {3, 4});
  require_error([] { tf::roll(iota({2, 3}), {1, 2}, {0}); }, {"roll", "same length", "2", "1"});
  require_error([] { tf::roll(iota({2, 3}), 1, 2); }, {"roll", "axis 2", "(2, 3)"});
}

TEST_CASE("array_more: meshgrid gives TF's xy and ij grids", "[cpu][cuda][array_more]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor a = ints({1, 2, 3}, {3}), b = ints({4, 5}, {2}), c = ints({6, 7, 8, 9}, {4});
    const auto xy = tf::meshgrid({a, b, c});
    REQUIRE(xy.size() == 3);
    for (const auto& t : xy) CHECK(t.shape() == tf::TensorShape{2, 3, 4});
    check_values(xy[0], kMeshXyX, 0, 0);
    check_values(xy[1], kMeshXyY, 0, 0);
    check_values(xy[2], kMeshXyZ, 0, 0);
    const auto ij = tf::meshgrid({a, b}, "ij");
    CHECK(ij[0].shape() == tf::TensorShape{3, 2});
    check_values(ij[0], kMeshIjX, 0, 0);
    check_values(ij[1], kMeshIjY, 0, 0);
  }
  // The gradient sums over the broadcast copies.
  check_gradient(
      [](const tf::Tensor& x) {
        return tf::meshgrid({x, tf::ones({3}, tf::float64)})[0];
      },
      {4});
  require_error([] { tf::meshgrid({iota({2}), iota({2})}, "yx"); }, {"meshgrid", "\"yx\""});
  require_error(
      [] {
        tf::meshgrid({iota({2}), iota({2}, tf::int32)});
      },
      {"meshgrid", "float32", "int32"});
}

TEST_CASE("array_more: sequence_mask marks the first lengths positions",
          "[cpu][cuda][array_more]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    for (tf::DType it : {tf::int32, tf::int64}) {
      const tf::Tensor m = tf::sequence_mask(ints({1, 3, 0, 2}, {2, 2}, it), 4);
      CHECK(m.dtype() == tf::bool_);
      CHECK(m.shape() == tf::TensorShape{2, 2, 4});
      check_values(m, kSeqmask, 0, 0);
      const tf::Tensor f = tf::sequence_mask(ints({1, 3, 2}, {3}, it), std::nullopt, tf::float32);
      CHECK(f.dtype() == tf::float32);
      CHECK(f.shape() == tf::TensorShape{3, 3});
      check_values(f, kSeqmaskNomax, 0, 0);
    }
    auto traced = tf::function([](const tf::Tensor& l) { return tf::sequence_mask(l, 4); });
    check_values(traced(ints({1, 3, 0, 2}, {2, 2})), kSeqmask, 0, 0);
    auto no_max = tf::function([](const tf::Tensor& l) { return tf::sequence_mask(l); });
    require_error([&] { no_max(ints({1, 2}, {2})); }, {"sequence_mask", "maxlen"});
  }
  require_error([] { tf::sequence_mask(iota({2})); },
                {"sequence_mask", "int32 or int64", "float32"});
  require_error([] { tf::sequence_mask(ints({1}, {1}), -1); }, {"sequence_mask", "-1"});
}

TEST_CASE("array_more: reverse_sequence reverses each row's prefix", "[cpu][cuda][array_more]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    for (tf::DType it : {tf::int32, tf::int64}) {
      check_values(tf::reverse_sequence(iota({2, 5, 2}, tf::int32), ints({3, 5}, {2}, it), 1, 0),
                   kRevseq, 0, 0);
      check_values(tf::reverse_sequence(iota({5, 3}), ints({2, 0, 4}, {3}, it), 0, 1), kRevseqB1S0,
                   0, 0);
    }
    auto f = tf::function(
        [](const tf::Tensor& x, const tf::Tensor& l) { return tf::reverse_sequence(x, l, 1, 0); });
    check_values(f(iota({2, 5, 2}, tf::int32), ints({3, 5}, {2})), kRevseq, 0, 0);
    // Traced lengths are not checked: one past the sequence counts as all of it.
    check_values(f(iota({2, 5, 2}, tf::int32), ints({3, 9}, {2})), kRevseq, 0, 0);
  }
  check_gradient(
      [](const tf::Tensor& x) {
        return tf::reverse_sequence(x, ints({2, 0, 4}, {3}), 0, 1);
      },
      {5, 3});
  require_error(
      [] {
        tf::reverse_sequence(iota({2, 5}), ints({6, 1}, {2}), 1, 0);
      },
      {"reverse_sequence", "6", "[0, 5]", "(2, 5)"});
  require_error(
      [] {
        tf::reverse_sequence(iota({2, 5}), ints({1, 1, 1}, {3}), 1, 0);
      },
      {"reverse_sequence", "(3,)", "(2, 5)"});
  require_error(
      [] {
        tf::reverse_sequence(iota({2, 5}), ints({1, 1}, {2}), 1, 1);
      },
      {"reverse_sequence", "must differ"});
  require_error(
      [] {
        tf::reverse_sequence(iota({2, 5}), iota({2}), 1, 0);
      },
      {"reverse_sequence", "float32"});
}

TEST_CASE("array_more: repeat with scalar and per-element repeats", "[cpu][cuda][array_more]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor x = iota({2, 3}, tf::int32);
    const tf::Tensor s = tf::repeat(x, 2, 1);
    CHECK(s.shape() == tf::TensorShape{2, 6});
    check_values(s, kRepeatScalarAxis1, 0, 0);
    check_values(tf::repeat(x, 2), kRepeatNone, 0, 0);
    const tf::Tensor v = tf::repeat(x, std::vector<int64_t>{1, 3}, 0);
    CHECK(v.shape() == tf::TensorShape{4, 3});
    check_values(v, kRepeatVecAxis0, 0, 0);
    check_values(tf::repeat(x, ints({0, 2, 1}, {3}, tf::int64), 1), kRepeatVecAxis1, 0, 0);
    check_values(tf::repeat(x, tf::Tensor(int64_t{2}), 1), kRepeatScalarAxis1, 0, 0);
    // tf.repeat(5., 3, axis=0) and axis=-1: [5., 5., 5.] (a scalar reads as a vector of one).
    check_values(tf::repeat(tf::Tensor(5.0f), 3, 0), {5, 5, 5}, 0, 0);
    check_values(tf::repeat(tf::Tensor(5.0f), 3, -1), {5, 5, 5}, 0, 0);
    require_error([] { tf::repeat(tf::Tensor(5.0f), 3, 1); }, {"repeat", "axis 1", "scalar"});
    auto f = tf::function([](const tf::Tensor& t) { return tf::repeat(t, 2, 1); });
    check_values(f(x), kRepeatScalarAxis1, 0, 0);
    auto g =
        tf::function([](const tf::Tensor& t, const tf::Tensor& r) { return tf::repeat(t, r, 1); });
    require_error([&] { g(x, ints({0, 2, 1}, {3})); }, {"repeat", "values of repeats"});
  }
  check_gradient(
      [](const tf::Tensor& x) {
        return tf::repeat(x, std::vector<int64_t>{0, 2, 1}, 1);
      },
      {2, 3});
  check_gradient([](const tf::Tensor& x) { return tf::repeat(x, 3, 0); }, {2, 3});
  require_error(
      [] {
        tf::repeat(iota({2, 3}), std::vector<int64_t>{1, 2}, 1);
      },
      {"repeat", "2 entries", "(2, 3)"});
  require_error([] { tf::repeat(iota({2, 3}), -1, 1); }, {"repeat", "non-negative", "-1"});
}

TEST_CASE("array_more: where with one argument gives the true coordinates",
          "[cpu][cuda][array_more]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor c = tf::constant<bool>({true, false, true, false, false, true}, {2, 3});
    const tf::Tensor w = tf::where(c);
    CHECK(w.dtype() == tf::int64);
    CHECK(w.shape() == tf::TensorShape{3, 2});
    check_values(w, kWhere, 0, 0);
    check_values(tf::where(tf::constant<float>({0.0f, 1.5f, -2.0f, 0.0f}, {2, 2})), kWhereFloat, 0,
                 0);
    CHECK(tf::where(tf::zeros({2, 2}, tf::bool_)).shape() == tf::TensorShape{0, 2});
    auto f = tf::function([](const tf::Tensor& t) { return tf::where(t); });
    require_error([&] { f(c); }, {"where", "tf::where(cond, x, y)"});
  }
}

namespace {
struct Stats {
  double mean = 0, var = 0, min = 0, max = 0;
};
Stats stats(const tf::Tensor& t) {
  const auto v = tf::detail::to_double_vector(t);
  Stats s;
  s.min = *std::min_element(v.begin(), v.end());
  s.max = *std::max_element(v.begin(), v.end());
  for (double x : v) s.mean += x;
  s.mean /= static_cast<double>(v.size());
  for (double x : v) s.var += (x - s.mean) * (x - s.mean);
  s.var /= static_cast<double>(v.size());
  return s;
}
}  // namespace

TEST_CASE("array_more: random categorical follows softmax of the logits",
          "[cpu][cuda][array_more]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    tf::random::set_seed(7);
    const std::vector<double> p = {0.1, 0.2, 0.3, 0.4};
    std::vector<double> logits;
    for (double q : p) logits.push_back(std::log(q));
    for (double q : p) logits.push_back(std::log(q) + 5.0);  // a shift changes nothing
    const tf::Tensor l = tf::detail::from_doubles(logits, {2, 4}, tf::float32);
    const int64_t n = 40000;
    const tf::Tensor s = tf::random::categorical(l, n);
    CHECK(s.dtype() == tf::int64);
    CHECK(s.shape() == tf::TensorShape{2, n});
    const auto v = s.numpy<int64_t>();
    for (int row = 0; row < 2; ++row) {
      std::vector<double> freq(4, 0.0);
      for (int64_t j = 0; j < n; ++j) {
        const int64_t k = v[static_cast<size_t>(row * n + j)];
        REQUIRE((k >= 0 && k < 4));
        freq[static_cast<size_t>(k)] += 1.0 / static_cast<double>(n);
      }
      // 4.5 standard errors of a frequency near 0.4 over 40000 draws is 0.011.
      for (size_t k = 0; k < 4; ++k) CHECK(std::abs(freq[k] - p[k]) < 0.011);
    }
    // -inf logits are never drawn; int32 output; seeds repeat after set_seed.
    const tf::Tensor masked = tf::constant<float>({0.0f, -INFINITY, 0.0f}, {1, 3});
    const auto m = tf::random::categorical(masked, 2000, tf::int32, 3).numpy<int32_t>();
    CHECK(std::count(m.begin(), m.end(), 1) == 0);
    // The last class with any mass is drawn too (-inf after it), and a row of -inf logits gives
    // num_classes, TF's out-of-range marker.
    const tf::Tensor tail = tf::constant<float>(
        {0.0f, 0.0f, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY}, {2, 4});
    const auto t = tf::random::categorical(tail, 4000, tf::int64, 9).numpy<int64_t>();
    const auto ones = std::count(t.begin(), t.begin() + 4000, int64_t{1});
    CHECK(std::count(t.begin(), t.begin() + 4000, int64_t{0}) + ones == 4000);
    CHECK(std::abs(static_cast<double>(ones) / 4000.0 - 0.5) < 0.04);
    CHECK(std::count(t.begin() + 4000, t.end(), int64_t{4}) == 4000);
    // Memory grows with batch x (classes + samples): 1000 samples over 100000 classes.
    const tf::Tensor wide = tf::zeros({2, 100000});
    const auto w = tf::random::categorical(wide, 1000, tf::int32, 2).numpy<int32_t>();
    CHECK(*std::max_element(w.begin(), w.end()) < 100000);
    CHECK(*std::min_element(w.begin(), w.end()) >= 0);
    tf::random::set_seed(11);
    const auto a = tf::random::categorical(l, 50, tf::int64, 5).numpy<int64_t>();
    tf::random::set_seed(11);
    const auto b = tf::random::categorical(l, 50, tf::int64, 5).numpy<int64_t>();
    CHECK(a == b);
    auto f = tf::function([](const tf::Tensor& x) { return tf::random::categorical(x, 5); });
    CHECK(f(l).shape() == tf::TensorShape{2, 5});
  }
  require_error([] { tf::random::categorical(iota({4}), 3); }, {"categorical", "(4,)"});
  require_error(
      [] {
        tf::random::categorical(iota({1, 4}), 3, tf::float32);
      },
      {"categorical", "int32 or int64"});
  require_error(
      [] {
        tf::random::categorical(iota({1, 4}, tf::int32), 3);
      },
      {"categorical", "floating", "int32"});
}

TEST_CASE("array_more: random truncated_normal stays within two stddevs",
          "[cpu][cuda][array_more]") {
  // Moments of a standard normal truncated to (-2, 2): variance 1 - 4 phi(2) / (2 Phi(2) - 1).
  const double trunc_var = 0.77374130354992321;
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    tf::random::set_seed(5);
    for (tf::DType d : {tf::float32, tf::float64, tf::float16}) {
      INFO("dtype " << tf::dtype_name(d));
      const tf::Tensor t = tf::random::truncated_normal({200000}, 1.0, 0.5, d);
      CHECK(t.dtype() == d);
      const Stats s = stats(t);
      CHECK(s.min >= 0.0);
      CHECK(s.max <= 2.0);
      CHECK(s.min < 0.01);  // the range is covered to its ends
      CHECK(s.max > 1.99);
      CHECK(std::abs(s.mean - 1.0) < 0.005);
      CHECK(std::abs(s.var - 0.25 * trunc_var) < 0.004);
    }
    tf::random::set_seed(9);
    const auto a = tf::random::truncated_normal({100}, 0, 1, tf::float32, 4).numpy<float>();
    tf::random::set_seed(9);
    const auto b = tf::random::truncated_normal({100}, 0, 1, tf::float32, 4).numpy<float>();
    CHECK(a == b);
    auto f = tf::function([]() { return tf::random::truncated_normal({50000}, 0.0, 2.0); });
    const Stats s = stats(f());
    CHECK(s.min >= -4.0);
    CHECK(s.max <= 4.0);
    CHECK(std::abs(s.var - 4 * trunc_var) < 0.06);
  }
  require_error([] { tf::random::truncated_normal({2}, 0, 1, tf::int32); },
                {"truncated_normal", "int32"});
  require_error([] { tf::random::truncated_normal({2}, 0, -1); }, {"truncated_normal", "-1"});
}

TEST_CASE("array_more: random shuffle permutes the first dimension", "[cpu][cuda][array_more]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    tf::random::set_seed(3);
    const tf::Tensor x = iota({100, 2}, tf::int32);
    const auto v = tf::random::shuffle(x).numpy<int32_t>();
    std::vector<int32_t> firsts;
    int moved = 0;
    for (int i = 0; i < 100; ++i) {
      CHECK(v[size_t(2 * i + 1)] == v[size_t(2 * i)] + 1);  // rows stay whole
      firsts.push_back(v[size_t(2 * i)] / 2);
      moved += firsts.back() != i;
    }
    std::sort(firsts.begin(), firsts.end());
    for (int i = 0; i < 100; ++i) CHECK(firsts[size_t(i)] == i);  // a permutation
    CHECK(moved > 80);
    // Empty rows (tf.random.shuffle(tf.zeros((3, 0))) has shape (3, 0)).
    CHECK(tf::random::shuffle(tf::zeros({3, 0})).shape() == tf::TensorShape{3, 0});
    tf::random::set_seed(4);
    const auto a = tf::random::shuffle(x, 1).numpy<int32_t>();
    tf::random::set_seed(4);
    CHECK(tf::random::shuffle(x, 1).numpy<int32_t>() == a);
    // Traced: the first call draws the traced seeds, so it equals eager with the same seeds;
    // later calls draw new permutations.
    auto f = tf::function([](const tf::Tensor& t) { return tf::random::shuffle(t, 1); });
    tf::random::set_seed(4);
    const auto traced = f(x).numpy<int32_t>();
    CHECK(traced == a);
    std::vector<int32_t> sorted = traced;
    std::sort(sorted.begin(), sorted.end());
    CHECK(sorted == x.numpy<int32_t>());
    CHECK(f(x).numpy<int32_t>() != traced);
    // An unknown first dimension: each call permutes whatever rows it gets.
    tf::FunctionOptions opts;
    opts.input_signature = {tf::TensorSpec({tf::None, 2}, tf::int32)};
    auto open = tf::function([](const tf::Tensor& t) { return tf::random::shuffle(t); }, opts);
    for (int64_t n : {5, 9}) {
      auto rows = open(iota({n, 2}, tf::int32)).numpy<int32_t>();
      CHECK(rows.size() == size_t(2 * n));
      std::sort(rows.begin(), rows.end());
      CHECK(rows == iota({n, 2}, tf::int32).numpy<int32_t>());
    }
  }
  require_error([] { tf::random::shuffle(tf::Tensor(1.0f)); }, {"shuffle", "scalar"});
}

TEST_CASE("array_more: stateless random ops repeat for a seed pair", "[cpu][cuda][array_more]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor u = tf::random::stateless_uniform({100000}, {1, 2}, -1.0, 3.0);
    CHECK(tf::random::stateless_uniform({100000}, {1, 2}, -1.0, 3.0).numpy<float>() ==
          u.numpy<float>());
    CHECK(tf::random::stateless_uniform({100000}, {1, 3}, -1.0, 3.0).numpy<float>() !=
          u.numpy<float>());
    const Stats su = stats(u);
    CHECK(su.min >= -1.0);
    CHECK(su.max < 3.0);
    CHECK(std::abs(su.mean - 1.0) < 0.02);
    CHECK(std::abs(su.var - 16.0 / 12) < 0.02);
    const tf::Tensor z = tf::random::stateless_normal({100000}, {5, 6}, 2.0, 0.5, tf::float64);
    CHECK(z.dtype() == tf::float64);
    const Stats sz = stats(z);
    CHECK(std::abs(sz.mean - 2.0) < 0.006);
    CHECK(std::abs(sz.var - 0.25) < 0.005);
    // A traced function gives the same numbers at every call, and eager's.
    auto f = tf::function([]() { return tf::random::stateless_normal({64}, {5, 6}, 2.0, 0.5); });
    const auto first = f().numpy<float>();
    CHECK(f().numpy<float>() == first);
    CHECK(tf::random::stateless_normal({64}, {5, 6}, 2.0, 0.5).numpy<float>() == first);
  }
  require_error(
      [] {
        tf::random::stateless_uniform({2}, {1, 2}, 1.0, 1.0);
      },
      {"stateless_random_uniform", "minval"});
  require_error(
      [] {
        tf::random::stateless_normal({2}, {1, 2}, 0, 1, tf::int32);
      },
      {"stateless_random_normal", "int32"});
}

TEST_CASE("array_more: traced with an unknown batch equals eager", "[cpu][cuda][array_more]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    auto body = [](const tf::Tensor& x, const tf::Tensor& lengths) {
      const tf::Tensor m = tf::cast(tf::sequence_mask(lengths, 3), tf::float32);  // (N, 3)
      const tf::Tensor r = tf::roll(x * m, 1, 1);
      return tf::concat({tf::repeat(r, 2, 1), tf::repeat(r, std::vector<int64_t>{1, 0, 1}, 1)}, 1);
    };
    tf::FunctionOptions opts;
    opts.input_signature = {tf::TensorSpec({tf::None, 3}), tf::TensorSpec({tf::None}, tf::int32)};
    auto f = tf::function(body, opts);
    for (int64_t n : {2, 4}) {
      const tf::Tensor x = iota({n, 3});
      std::vector<int64_t> l;
      for (int64_t i = 0; i < n; ++i) l.push_back(i % 4);
      const tf::Tensor lengths = ints(l, {n});
      tf::testing::check_close(f(x, lengths), body(x, lengths), 0, 0);
    }
  }
}
