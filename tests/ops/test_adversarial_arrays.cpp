// Adversarial inputs for the array ops of ops/array_more.h and ops/indexing.h, the math and
// special functions and the random ops: empty, scalar, mismatched and special-valued tensors,
// out-of-range indices, axes, counts and shapes, in every dtype on every device under test. A
// readable result (and gradients where differentiable) or a tf::Error naming the op.
#include <array>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "support/adversarial.h"
#include "support/testing.h"
#include "tapeflow/tapeflow.h"

namespace tf = tapeflow;
using adversarial::describe;
using adversarial::kShapes;
using adversarial::make;
using adversarial::on_every_device;
using adversarial::probe;
using adversarial::with_gradients;
using tf::testing::kAllDTypes;

namespace {

const std::vector<std::vector<int64_t>> kIndexRows = {{},     {0},       {2},       {-1},
                                                      {0, 1}, {1, 0, 2}, {1 << 30}, {0, 0}};

}  // namespace

TEST_CASE("adversarial: array ops", "[adversarial]") {
  on_every_device([&] {
    for (const auto& s : kShapes)
      for (tf::DType d : kAllDTypes) {
        const tf::Tensor x = make(s, d, true);
        const std::string what = describe(x);
        for (int axis : {-4, -1, 0, 1, 3}) {
          probe("unstack", what, [&] { return tf::unstack(x, std::nullopt, axis); });
          probe("unstack", what + " num", [&] { return tf::unstack(x, 2, axis); });
          probe("roll", what,
                [&] { return with_gradients({x}, [&] { return tf::roll(x, -7, axis); }); });
          probe("repeat", what,
                [&] { return with_gradients({x}, [&] { return tf::repeat(x, 2, axis); }); });
          probe("repeat", what + " list", [&] { return tf::repeat(x, {1, 0, 2}, axis); });
          probe("repeat", what + " negative", [&] { return tf::repeat(x, -1, axis); });
          probe("boolean_mask", what, [&] {
            return tf::boolean_mask(x, make({2, 3}, tf::bool_, true), axis);
          });
          for (int batch_axis : {0, 1, 5})
            probe("reverse_sequence", what, [&] {
              return tf::reverse_sequence(x, make({2}, tf::int32, false), axis, batch_axis);
            });
        }
        probe("roll", what + " lists", [&] { return tf::roll(x, {1, 2}, {0}); });
        probe("repeat", what + " huge", [&] { return tf::repeat(x, int64_t{1} << 40); });
        probe("repeat", what + " tensor", [&] { return tf::repeat(x, x, 0); });
        probe("meshgrid", what, [&] { return tf::meshgrid({x, x}, "ij"); });
        probe("meshgrid", what, [&] { return tf::meshgrid({x}, "yx"); });
        probe("where", what, [&] { return tf::where(x); });
        for (std::optional<int64_t> maxlen :
             {std::optional<int64_t>{}, std::optional<int64_t>{-1}, std::optional<int64_t>{0},
              std::optional<int64_t>{int64_t{1} << 40}})
          probe("sequence_mask", what, [&] { return tf::sequence_mask(x, maxlen); });
        for (const auto& rows : kIndexRows)
          for (tf::DType it : {tf::int32, tf::int64, tf::float32}) {
            const int64_t n = static_cast<int64_t>(rows.size());
            const tf::Tensor idx1 = tf::cast(tf::constant(rows, {n, 1}), it);
            const tf::Tensor idx2 = tf::cast(tf::constant(rows, {n}), it);
            const std::string wi = what + ", indices " + describe(idx1);
            for (int batch_dims : {-1, 0, 1})
              probe("gather_nd", wi, [&] {
                return with_gradients({x}, [&] { return tf::gather_nd(x, idx1, batch_dims); });
              });
            probe("scatter_nd", wi, [&] { return tf::scatter_nd(idx1, x, tf::TensorShape{3, 2}); });
            probe("scatter_nd", wi + " vector",
                  [&] { return tf::scatter_nd(idx1, make({n}, d, true), tf::TensorShape{3}); });
            probe("tensor_scatter_nd_update", wi, [&] {
              return with_gradients({x}, [&] { return tf::tensor_scatter_nd_update(x, idx1, x); });
            });
            probe("tensor_scatter_nd_add", wi,
                  [&] { return tf::tensor_scatter_nd_add(x, idx1, make({n}, d, false)); });
            probe("tensor_scatter_nd_sub", wi,
                  [&] { return tf::tensor_scatter_nd_sub(x, idx2, make({n}, d, false)); });
          }
        probe("clip_by_global_norm", what, [&] {
          auto [clipped, norm] = tf::clip_by_global_norm({x, x}, 1.0);
          clipped.push_back(norm);
          return clipped;
        });
        probe("clip_by_global_norm", what + " negative",
              [&] { return tf::clip_by_global_norm({x}, -1.0).second; });
        probe("global_norm", what, [&] { return tf::global_norm({x, make({2}, d, true)}); });
      }
  });
}

TEST_CASE("adversarial: math, special functions and random ops", "[adversarial]") {
  on_every_device([&] {
    for (const auto& s : kShapes)
      for (tf::DType d : kAllDTypes) {
        const tf::Tensor x = make(s, d, true);
        const std::string what = describe(x);
        using Unary = tf::Tensor (*)(const tf::Tensor&);
        const std::vector<std::pair<std::string, Unary>> unary = {
            {"reciprocal", tf::math::reciprocal}, {"is_nan", tf::math::is_nan},
            {"is_inf", tf::math::is_inf},         {"is_finite", tf::math::is_finite},
            {"lgamma", tf::math::lgamma},         {"digamma", tf::math::digamma},
            {"erfinv", tf::math::erfinv},         {"ndtri", tf::math::ndtri},
            {"bessel_i0e", tf::math::bessel_i0e}, {"bessel_i1e", tf::math::bessel_i1e}};
        for (const auto& [name, f] : unary)
          probe(name, what, [&, f = f] { return with_gradients({x}, [&] { return f(x); }); });
        using Binary = tf::Tensor (*)(const tf::Tensor&, const tf::Tensor&);
        const std::vector<std::pair<std::string, Binary>> binary = {
            {"squared_difference", tf::math::squared_difference},
            {"polygamma", tf::math::polygamma},
            {"xlogy", tf::math::xlogy},
            {"xdivy", tf::math::xdivy},
            {"xlog1py", tf::math::xlog1py},
            {"igamma", tf::math::igamma},
            {"igammac", tf::math::igammac}};
        for (const auto& sb :
             {tf::TensorShape{}, tf::TensorShape{3}, tf::TensorShape{2, 1}, tf::TensorShape{0}})
          for (tf::DType db : {d, tf::float32}) {
            const tf::Tensor y = make(sb, db, true, 2);
            for (const auto& [name, f] : binary)
              probe(name, what + ", " + describe(y),
                    [&, f = f] { return with_gradients({x}, [&] { return f(x, y); }); });
            probe("betainc", what + ", " + describe(y),
                  [&] { return tf::math::betainc(x, y, make(sb, db, false, 3)); });
          }
        for (const auto& axes : std::vector<std::vector<int>>{{}, {0}, {-1, 0}, {5}, {0, 0}})
          probe("moments", what, [&] {
            auto [mean, var] = tf::nn::moments(x, axes, true);
            return std::vector<tf::Tensor>{mean, var};
          });
        for (int64_t n : std::vector<int64_t>{-1, 0, 3, int64_t{1} << 40})
          probe("categorical", what + ", " + std::to_string(n),
                [&] { return tf::random::categorical(x, n, tf::int32, 7); });
        probe("shuffle", what, [&] { return tf::random::shuffle(x, 3); });
      }
    for (const auto& s : std::vector<tf::TensorShape>{{}, {0}, {3, 2}, {-1}, {int64_t{1} << 40}})
      for (tf::DType d : kAllDTypes) {
        const std::string what = s.to_string() + " " + std::string(tf::dtype_name(d));
        for (double stddev : {-1.0, 0.0, 1.0, std::numeric_limits<double>::infinity()}) {
          probe("truncated_normal", what,
                [&] { return tf::random::truncated_normal(s, 0.0, stddev, d, 1); });
          probe("stateless", what + " normal", [&] {
            return tf::random::stateless_normal(s, {1, 2}, 0.0, stddev, d);
          });
          probe("stateless", what + " uniform", [&] {
            return tf::random::stateless_uniform(s, {-1, 0}, stddev, 0.0, d);
          });
        }
      }
  });
}
