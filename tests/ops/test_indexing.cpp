// gather_nd, scatter_nd, tensor_scatter_nd_add/_sub, boolean_mask, global_norm and
// clip_by_global_norm (ops/indexing.h) on every device of devices_under_test(): values against
// plain loops and TF 2.21's results, gradients against central differences, traced equals eager,
// and the errors TF raises for bad indices and shapes.
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "autograd/tape.h"
#include "core/device.h"
#include "core/error.h"
#include "core/tensor.h"
#include "jit/function.h"
#include "ops/binary.h"
#include "ops/copy.h"
#include "ops/factory.h"
#include "ops/indexing.h"
#include "ops/movement.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
using tf::testing::check_values;
using tf::testing::random_values;
using tf::testing::require_error;

namespace {

using tf::testing::check_gradient;

tf::Tensor iota(const tf::TensorShape& shape, tf::DType dtype = tf::float32) {
  return tf::reshape(tf::range(0.0, static_cast<double>(shape.num_elements()), 1.0, dtype), shape);
}

tf::Tensor idx(std::vector<int64_t> values, const tf::TensorShape& shape,
               tf::DType dtype = tf::int32) {
  return tf::cast(tf::constant(values, shape), dtype);
}

}  // namespace

TEST_CASE("gather_nd gives TF's values", "[cpu][cuda][indexing]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor p = iota({3, 4});
    for (tf::DType it : {tf::int32, tf::int64}) {
      // Full indices give elements; shorter ones give rows.
      check_values(tf::gather_nd(p, idx({0, 1, 2, 3, 1, 0}, {3, 2}, it)), {1, 11, 4}, 0, 0);
      check_values(tf::gather_nd(p, idx({2, 0}, {2, 1}, it)), {8, 9, 10, 11, 0, 1, 2, 3}, 0, 0);
      CHECK(tf::gather_nd(p, idx({2, 0}, {2, 1}, it)).shape() == tf::TensorShape({2, 4}));
      // Leading index dimensions stay: indices (2, 1, 2) give (2, 1).
      const tf::Tensor g = tf::gather_nd(p, idx({1, 1, 2, 2}, {2, 1, 2}, it));
      CHECK(g.shape() == tf::TensorShape({2, 1}));
      check_values(g, {5, 10}, 0, 0);
    }
    // An empty index picks the whole tensor; no indices give an empty result (TF 2.21).
    CHECK(tf::gather_nd(p, tf::zeros({2, 0}, tf::int32)).shape() == tf::TensorShape({2, 3, 4}));
    CHECK(tf::gather_nd(p, tf::zeros({0, 2}, tf::int32)).shape() == tf::TensorShape({0}));
    // batch_dims = 1 (TF 2.21: [[4..7], [12..15]] and [[6], [15]]).
    const tf::Tensor q = iota({2, 3, 4}, tf::int32);
    check_values(tf::gather_nd(q, idx({1, 0}, {2, 1}), 1), {4, 5, 6, 7, 12, 13, 14, 15}, 0, 0);
    const tf::Tensor b = tf::gather_nd(q, idx({1, 2, 0, 3}, {2, 1, 2}), 1);
    CHECK(b.shape() == tf::TensorShape({2, 1}));
    check_values(b, {6, 15}, 0, 0);
    // Every dtype gathers.
    for (tf::DType d : tf::testing::kAllDTypes) {
      INFO(tf::dtype_name(d));
      const tf::Tensor t = tf::cast(iota({2, 2}), d);
      check_values(tf::cast(tf::gather_nd(t, idx({1, 1}, {1, 2})), tf::float64),
                   {d == tf::bool_ ? 1.0 : 3.0}, 0, 0);
    }
  }
}

TEST_CASE("gather_nd against a loop over random indices", "[cpu][cuda][indexing]") {
  const std::vector<int64_t> dims{4, 3, 5, 2};
  const tf::Tensor p = iota(tf::TensorShape(dims), tf::float64);
  const auto r = random_values(6 * 2, 0, 1, 11);
  std::vector<int64_t> ix;
  std::vector<double> want;
  for (size_t i = 0; i < 6; ++i) {
    const int64_t a = static_cast<int64_t>(r[2 * i] * 4),
                  c = static_cast<int64_t>(r[2 * i + 1] * 3);
    ix.insert(ix.end(), {a, c});
    for (int64_t k = 0; k < 10; ++k) want.push_back(static_cast<double>((a * 3 + c) * 10 + k));
  }
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    const tf::Tensor g = tf::gather_nd(tf::identity(p), idx(ix, {3, 2, 2}, tf::int64));
    CHECK(g.shape() == tf::TensorShape({3, 2, 5, 2}));
    check_values(g, want, 0, 0);
  }
}

TEST_CASE("scatter_nd and tensor_scatter_nd_add give TF's values", "[cpu][cuda][indexing]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    // Duplicates add up (TF 2.21: [0, 3, 0, 3]).
    check_values(tf::scatter_nd(idx({1, 1, 3}, {3, 1}), tf::constant({1.f, 2.f, 3.f}), {4}),
                 {0, 3, 0, 3}, 0, 0);
    // Slices: rows of a (3, 2) tensor.
    check_values(tf::scatter_nd(idx({2, 0}, {2, 1}, tf::int64),
                                tf::constant({{1.0, 2.0}, {3.0, 4.0}}), {3, 2}),
                 {3, 4, 0, 0, 1, 2}, 0, 0);
    // Integers add exactly (TF 2.21: [0, 3, 0]); bools or together (TF: [False, True, False]).
    const tf::Tensor ints = tf::scatter_nd(idx({1, 1}, {2, 1}), tf::constant({1, 2}), {3});
    CHECK(ints.dtype() == tf::int32);
    check_values(ints, {0, 3, 0}, 0, 0);
    const tf::Tensor bools =
        tf::scatter_nd(idx({1, 1}, {2, 1}), tf::cast(tf::constant({1, 1}), tf::bool_), {3});
    CHECK(bools.dtype() == tf::bool_);
    CHECK(bools.numpy<bool>() == std::vector<bool>{false, true, false});
    // uint8 sums wrap as TF's: 200 + 100 = 44.
    check_values(
        tf::scatter_nd(idx({0, 0}, {2, 1}), tf::cast(tf::constant({200, 100}), tf::uint8), {1}),
        {44}, 0, 0);
    const tf::Tensor t = tf::ones({2, 2});
    check_values(tf::tensor_scatter_nd_add(t, idx({0, 1, 0, 1}, {2, 2}), tf::constant({5.f, 6.f})),
                 {1, 12, 1, 1}, 0, 0);
    check_values(tf::tensor_scatter_nd_sub(t, idx({1}, {1, 1}), tf::constant({{2.f, 3.f}})),
                 {1, 1, -1, -2}, 0, 0);
  }
}

TEST_CASE("tensor_scatter_nd_update gives TF's values with the last duplicate winning",
          "[cpu][cuda][indexing]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    // TF 2.21 (CPU): [1, 8, 3, 4].
    check_values(tf::tensor_scatter_nd_update(tf::constant({1.f, 2.f, 3.f, 4.f}),
                                              idx({1, 1}, {2, 1}), tf::constant({7.f, 8.f})),
                 {1, 8, 3, 4}, 0, 0);
    // Rows of an int matrix, bools, every dtype.
    check_values(tf::tensor_scatter_nd_update(tf::constant({{1, 2}, {3, 4}}), idx({1}, {1, 1}),
                                              tf::constant({{7, 8}})),
                 {1, 2, 7, 8}, 0, 0);
    const tf::Tensor b =
        tf::tensor_scatter_nd_update(tf::cast(tf::constant({1, 0}), tf::bool_), idx({1}, {1, 1}),
                                     tf::cast(tf::constant({1}), tf::bool_));
    CHECK(b.numpy<bool>() == std::vector<bool>{true, true});
    for (tf::DType d : tf::testing::kAllDTypes) {
      INFO(tf::dtype_name(d));
      const tf::Tensor t = tf::zeros({3, 2}, d);
      const tf::Tensor u = tf::ones({2, 2}, d);
      check_values(tf::cast(tf::tensor_scatter_nd_update(t, idx({2, 0}, {2, 1}), u), tf::float64),
                   {1, 1, 0, 0, 1, 1}, 0, 0);
    }
    // Many duplicates: the last of each wins (deterministic on a GPU too).
    const int64_t n = 5000;
    std::vector<int64_t> where;
    std::vector<double> vals, want(7, -1.0);
    for (int64_t i = 0; i < n; ++i) {
      where.push_back((i * 5) % 7);
      vals.push_back(static_cast<double>(i));
      want[static_cast<size_t>((i * 5) % 7)] = static_cast<double>(i);
    }
    check_values(
        tf::tensor_scatter_nd_update(tf::fill({7}, tf::Tensor(-1.0)), idx(where, {n, 1}, tf::int64),
                                     tf::constant(vals, {n})),
        want, 0, 0);
  }
}

TEST_CASE("boolean_mask gives TF's values", "[cpu][cuda][indexing]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor p = iota({3, 4});
    auto mask = [](std::vector<int> v, const tf::TensorShape& s) {
      return tf::cast(tf::constant(v, s), tf::bool_);
    };
    const tf::Tensor rows = tf::boolean_mask(p, mask({1, 0, 1}, {3}));
    CHECK(rows.shape() == tf::TensorShape({2, 4}));
    check_values(rows, {0, 1, 2, 3, 8, 9, 10, 11}, 0, 0);
    const tf::Tensor elems =
        tf::boolean_mask(p, mask({1, 0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1}, {3, 4}));
    CHECK(elems.shape() == tf::TensorShape({6}));
    check_values(elems, {0, 3, 4, 7, 8, 11}, 0, 0);
    const tf::Tensor cols = tf::boolean_mask(p, mask({1, 0, 0, 1}, {4}), 1);
    CHECK(cols.shape() == tf::TensorShape({3, 2}));
    check_values(cols, {0, 3, 4, 7, 8, 11}, 0, 0);
    const tf::Tensor none = tf::boolean_mask(p, mask({0, 0, 0}, {3}));
    CHECK(none.shape() == tf::TensorShape({0, 4}));
  }
}

TEST_CASE("global_norm and clip_by_global_norm give TF's values", "[cpu][cuda][indexing]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    // TF 2.21: ([1.5, 2], None, [6]) and 13.
    auto [out, norm] = tf::clip_by_global_norm(
        {tf::constant({3.f, 4.f}), tf::Tensor(), tf::constant({12.f})}, 6.5);
    REQUIRE(out.size() == 3);
    check_values(out[0], {1.5, 2}, 1e-6, 0);
    CHECK_FALSE(out[1].defined());
    check_values(out[2], {6}, 1e-6, 0);
    check_values(norm, {13}, 0, 0);
    CHECK(norm.dtype() == tf::float32);
    // Below the limit nothing changes.
    auto [same, n2] = tf::clip_by_global_norm({tf::constant({3.0, 4.0})}, 10.0);
    check_values(same[0], {3, 4}, 0, 0);
    check_values(n2, {5}, 0, 0);
    // An infinite norm gives NaNs (TF 2.21: [nan, nan] and inf).
    const float inf = std::numeric_limits<float>::infinity();
    auto [nans, n3] = tf::clip_by_global_norm({tf::constant({inf, 4.f})}, 1.0);
    CHECK(std::isnan(nans[0].numpy<float>()[0]));
    CHECK(std::isnan(nans[0].numpy<float>()[1]));
    CHECK(std::isinf(n3.item<float>()));
    // use_norm replaces the computed norm.
    auto [used, n4] = tf::clip_by_global_norm({tf::constant({3.f, 4.f})}, 1.0, tf::Tensor(10.f));
    check_values(used[0], {0.3, 0.4}, 1e-6, 0);
    check_values(n4, {10}, 0, 0);
    check_values(tf::linalg::global_norm({tf::constant({1.0, 2.0}), tf::constant({{2.0}})}), {3},
                 1e-15, 0);
  }
}

TEST_CASE("gather_nd scatter_nd boolean_mask and clip_by_global_norm gradients",
          "[cpu][cuda][indexing][autograd]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    // Repeated indices: their gradients add up.
    check_gradient(
        [](const tf::Tensor& x) {
          return tf::gather_nd(x, idx({0, 1, 2, 3, 0, 1}, {3, 2}));
        },
        {3, 4});
    check_gradient(
        [](const tf::Tensor& x) {
          return tf::gather_nd(x, idx({2, 0, 2}, {3, 1}));
        },
        {3, 4});
    check_gradient(
        [](const tf::Tensor& x) {
          return tf::gather_nd(x, idx({1, 2, 0, 3}, {2, 1, 2}), 1);
        },
        {2, 3, 4});
    check_gradient(
        [](const tf::Tensor& u) {
          return tf::scatter_nd(idx({1, 1, 3}, {3, 1}), u, {5, 2});
        },
        {3, 2});
    check_gradient(
        [](const tf::Tensor& t) {
          return tf::tensor_scatter_nd_add(t, idx({0, 2}, {2, 1}), tf::ones({2, 3}, tf::float64));
        },
        {3, 3});
    // The replaced entries pass nothing to the tensor; an overwritten update gets nothing (TF
    // 2.21 gives both duplicates the row's gradient: [2, 2] where this gives [0, 2]).
    check_gradient(
        [](const tf::Tensor& t) {
          return tf::tensor_scatter_nd_update(t, idx({1, 1}, {2, 1}), tf::constant({7.0, 8.0}));
        },
        {4});
    check_gradient(
        [](const tf::Tensor& u) {
          return tf::tensor_scatter_nd_update(tf::ones({3, 2}, tf::float64), idx({1, 2, 1}, {3, 1}),
                                              u);
        },
        {3, 2});
    {
      const tf::Tensor x = tf::constant({1.f, 2.f, 3.f, 4.f}), u = tf::constant({7.f, 8.f});
      tf::GradientTape tape({.persistent = true});
      tape.watch(x);
      tape.watch(u);
      const tf::Tensor l = tf::reduce_sum(tf::tensor_scatter_nd_update(x, idx({1, 1}, {2, 1}), u) *
                                          tf::constant({1.f, 2.f, 3.f, 4.f}));
      check_values(tape.gradient(l, x), {1, 0, 3, 4}, 0, 0);
      check_values(tape.gradient(l, u), {0, 2}, 0, 0);
    }
    check_gradient(
        [](const tf::Tensor& x) {
          return tf::boolean_mask(x, tf::cast(tf::constant({1, 0, 1}), tf::bool_), 1);
        },
        {2, 3});
    check_gradient(
        [](const tf::Tensor& x) {
          return tf::clip_by_global_norm({x, tf::square(x)}, 0.5).first[1];
        },
        {2, 2});
  }
}

TEST_CASE("gather_nd and scatter_nd inside a traced function equal eager",
          "[cpu][cuda][indexing]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    auto f = tf::function([](const tf::Tensor& p, const tf::Tensor& i) {
      return tf::scatter_nd(i, tf::gather_nd(p, i) * 2.0f, {3, 4});
    });
    const tf::Tensor p = iota({3, 4});
    const tf::Tensor i1 = idx({0, 1, 2, 3}, {2, 2}), i2 = idx({1, 1, 0, 0}, {2, 2});
    for (const tf::Tensor& i : {i1, i2, i1}) {
      const tf::Tensor eager = tf::scatter_nd(i, tf::gather_nd(p, i) * 2.0f, {3, 4});
      tf::testing::check_close(f(p, i), eager, 0, 0);
    }
    CHECK(f.tracing_count() == 1);
    auto up = tf::function([](const tf::Tensor& t, const tf::Tensor& i, const tf::Tensor& u) {
      return tf::tensor_scatter_nd_update(t, i, u);
    });
    for (const tf::Tensor& i : {i1, i2})
      tf::testing::check_close(up(p, i, tf::constant({5.f, 6.f})),
                               tf::tensor_scatter_nd_update(p, i, tf::constant({5.f, 6.f})), 0, 0);
  }
  // Gradients inside a function traced for a None number of indices (one graph, exact values).
  tf::FunctionOptions gopts;
  gopts.input_signature = {tf::TensorSpec({4}), tf::TensorSpec({tf::None, 1}, tf::int32),
                           tf::TensorSpec({tf::None})};
  auto grads = tf::function(
      [](const tf::Tensor& t, const tf::Tensor& i, const tf::Tensor& u) {
        tf::GradientTape tape;
        tape.watch(t);
        tape.watch(u);
        const tf::Tensor l = tf::reduce_sum(tf::tensor_scatter_nd_update(t, i, u) *
                                            tf::constant({1.f, 2.f, 3.f, 4.f}));
        return tape.gradient(l, std::vector<tf::Tensor>{t, u});
      },
      gopts);
  const tf::Tensor t4 = tf::constant({1.f, 2.f, 3.f, 4.f});
  auto g2 = grads(t4, idx({1, 1}, {2, 1}), tf::constant({7.f, 8.f}));
  check_values(g2[0], {1, 0, 3, 4}, 0, 0);
  check_values(g2[1], {0, 2}, 0, 0);
  auto g3 = grads(t4, idx({3, 0, 3}, {3, 1}), tf::constant({7.f, 8.f, 9.f}));
  check_values(g3[0], {0, 2, 3, 0}, 0, 0);
  check_values(g3[1], {0, 1, 4}, 0, 0);
  CHECK(grads.tracing_count() == 1);
  // On a GPU a replay cannot check the traced indices: an update out of range goes nowhere
  // (docs/ops.md), as in TF's GPU kernels.
  auto update_one = [](const tf::Tensor& t, const tf::Tensor& i) {
    return tf::tensor_scatter_nd_update(t, i, tf::constant({1.f}));
  };
  if (tf::testing::has_gpu()) {
    tf::DeviceScope gpu("/GPU:0");
    auto up = tf::function(update_one);
    check_values(up(tf::zeros({3}), idx({1}, {1, 1})), {0, 1, 0}, 0, 0);
    check_values(up(tf::zeros({3}), idx({3}, {1, 1})), {0, 0, 0}, 0, 0);
  }
  // A traced update with an index out of range fails at replay on the CPU.
  tf::DeviceScope cpu("/CPU:0");
  auto up = tf::function(update_one);
  (void)up(tf::zeros({3}), idx({1}, {1, 1}));
  require_error(
      [&] {
        (void)up(tf::zeros({3}), idx({3}, {1, 1}));
      },
      {"[tensor_scatter_nd_update]", "outside the tensor's 3 rows"});
  // On the CPU an out-of-range index still fails at replay, from the check of the gather that
  // reads the flattened (12,) params: a bad index shows there as position 12.
  auto g =
      tf::function([](const tf::Tensor& p, const tf::Tensor& i) { return tf::gather_nd(p, i); });
  (void)g(iota({3, 4}), idx({0, 1}, {1, 2}));
  require_error(
      [&] {
        (void)g(iota({3, 4}), idx({0, 7}, {1, 2}));
      },
      {"[gather] indices[0] = 12 is not in [0, 12)"});
  // With a None batch of indices.
  tf::FunctionOptions opts;
  opts.input_signature = {tf::TensorSpec({3, 4}), tf::TensorSpec({tf::None, 2}, tf::int32)};
  auto h = tf::function(
      [](const tf::Tensor& p, const tf::Tensor& i) { return tf::gather_nd(p, i); }, opts);
  check_values(h(iota({3, 4}), idx({2, 3}, {1, 2})), {11}, 0, 0);
  check_values(h(iota({3, 4}), idx({2, 3, 0, 0, 1, 1}, {3, 2})), {11, 0, 5}, 0, 0);
}

TEST_CASE("indexing ops reject bad indices and shapes as TF does", "[cpu][indexing]") {
  const tf::Tensor p = iota({3, 4});
  // TF 2.21: "indices[0] = [0, 5] does not index into param shape [3,4]".
  require_error(
      [&] {
        tf::gather_nd(p, idx({0, 5}, {1, 2}));
      },
      {"[gather_nd]", "indices[0] = [0, 5] does not index into param shape [3,4]"});
  require_error(
      [&] {
        tf::gather_nd(p, idx({0, 0, -1, 0}, {2, 2}));
      },
      {"indices[1] = [-1, 0] does not index into param shape [3,4]"});
  require_error(
      [&] {
        tf::gather_nd(p, tf::constant({{0.f, 1.f}}));
      },
      {"indices must be int32 or int64, got float32"});
  require_error(
      [&] {
        tf::gather_nd(p, idx({0, 1, 2}, {1, 3}));
      },
      {"index innermost dimension length must be <= params rank"});
  require_error([&] { tf::gather_nd(p, tf::Tensor(int32_t{1})); }, {"rank at least 1"});
  require_error([&] { tf::gather_nd(p, idx({0}, {1, 1}), 2); }, {"batch_dims must be in"});
  require_error(
      [&] {
        tf::gather_nd(iota({2, 3}), idx({0, 0, 0}, {3, 1}), 1);
      },
      {"batch dimension 0 differs"});
  require_error(
      [&] {
        tf::scatter_nd(idx({5}, {1, 1}), tf::constant({1.f}), {4});
      },
      {"[scatter_nd]", "indices[0] = [5] does not index into shape [4]"});
  require_error(
      [&] {
        tf::scatter_nd(idx({1}, {1, 1}), tf::constant({1.f, 2.f}), {4});
      },
      {"updates of shape (2,) must have shape (1,)"});
  require_error(
      [&] {
        tf::scatter_nd(idx({1}, {1, 1}), tf::constant({int64_t{1}}), {4});
      },
      {"int64 updates are not supported"});
  require_error(
      [&] {
        tf::scatter_nd(idx({1}, {1, 1}), tf::constant({1.f}), {tf::None});
      },
      {"shape must be fully known"});
  require_error(
      [&] {
        tf::tensor_scatter_nd_update(tf::constant({1.f, 2.f}), idx({5}, {1, 1}),
                                     tf::constant({1.f}));
      },
      {"[tensor_scatter_nd_update]", "indices[0] = [5] does not index into shape [2]"});
  require_error(
      [&] {
        tf::tensor_scatter_nd_update(tf::constant({1.f, 2.f}), idx({1}, {1, 1}), tf::constant({1}));
      },
      {"updates are int32 but the tensor is float32"});
  require_error(
      [&] {
        tf::tensor_scatter_nd_update(p, idx({1}, {1, 1}), tf::ones({1, 3}));
      },
      {"updates of shape (1, 3) must have shape (1, 4)"});
  require_error(
      [&] {
        tf::boolean_mask(p, tf::cast(tf::constant({1, 0}), tf::bool_));
      },
      {"[boolean_mask]", "the mask of shape (2,) does not match dimensions [0, 1)"});
  require_error([&] { tf::boolean_mask(p, tf::constant({1, 0, 1})); }, {"the mask must be bool"});
  require_error(
      [&] {
        tf::boolean_mask(p, tf::cast(tf::constant({1, 0, 1, 1}), tf::bool_), 2);
      },
      {"axis 2 with a mask of rank 1 does not fit"});
  auto traced =
      tf::function([](const tf::Tensor& x, const tf::Tensor& m) { return tf::boolean_mask(x, m); });
  require_error(
      [&] {
        traced(p, tf::cast(tf::constant({1, 0, 1}), tf::bool_));
      },
      {"depends on the mask's values", "tf::where"});
  require_error([&] { tf::clip_by_global_norm({tf::Tensor()}, 1.0); }, {"no defined tensor"});
  require_error([&] { tf::clip_by_global_norm({tf::ones({1})}, -1.0); },
                {"clip_norm must be a non-negative number"});
  require_error(
      [&] {
        tf::global_norm({tf::ones({1}), tf::ones({1}, tf::float64)});
      },
      {"must share a dtype"});
  require_error([&] { tf::global_norm({tf::constant({1})}); }, {"must be floating"});
}

TEST_CASE("tensor_scatter_nd_max and _min take the extremes of tensor and updates",
          "[cpu][cuda][indexing]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor t = tf::constant<float>({1, 5, 3, 2, 0, 0}, {3, 2});
    const tf::Tensor rows = tf::cast(tf::constant<int64_t>({0, 2, 0, 1}, {4, 1}), tf::int32);
    const tf::Tensor u = tf::constant<float>({4, 1, -1, -2, 0, 7, 2, 9}, {4, 2});
    // TF 2.21 values (row 0 is updated twice).
    check_values(tf::tensor_scatter_nd_max(t, rows, u), {4, 7, 3, 9, 0, 0}, 0, 0);
    check_values(tf::tensor_scatter_nd_min(t, rows, u), {0, 1, 2, 2, -1, -2}, 0, 0);
    const tf::Tensor cells = tf::constant<int64_t>({0, 1, 2, 0, 0, 1}, {3, 2});
    const tf::Tensor v = tf::constant<float>({9, -3, 6}, {3});
    check_values(tf::tensor_scatter_nd_max(t, cells, v), {1, 9, 3, 2, 0, 0}, 0, 0);
    check_values(tf::tensor_scatter_nd_min(t, cells, v), {1, 5, 3, 2, -3, 0}, 0, 0);
    check_values(tf::tensor_scatter_nd_max(tf::cast(t, tf::int64), cells, tf::cast(v, tf::int64)),
                 {1, 9, 3, 2, 0, 0}, 0, 0);
    // Gradients reach the winners: the tensor where it stays, the updates where they win.
    check_gradient(
        [&](const tf::Tensor& x) {
          return tf::tensor_scatter_nd_max(x, rows, tf::cast(u, tf::float64));
        },
        {3, 2}, {1, 5, 3, 2, 0.5, 0.25});
    check_gradient(
        [&](const tf::Tensor& x) {
          return tf::tensor_scatter_nd_min(tf::cast(t, tf::float64), rows, x);
        },
        {4, 2}, {4, 1, -1, -2, 0.5, 7, 2, 9});
    // TF 2.21: "indices[0] = [3] does not index into shape [3,2]".
    require_error(
        [&] {
          tf::tensor_scatter_nd_max(t, tf::constant<int32_t>({3}, {1, 1}),
                                    tf::constant<float>({1, 1}, {1, 2}));
        },
        {"[tensor_scatter_nd_max] indices[0] = [3] does not index into"});
    require_error([&] { tf::tensor_scatter_nd_min(t, rows, tf::cast(u, tf::float64)); },
                  {"[tensor_scatter_nd_min] updates are float64 but the tensor is float32"});
  }
}
