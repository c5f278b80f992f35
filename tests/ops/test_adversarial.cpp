// Adversarial inputs: every public op, given edge-case and invalid inputs (empty and zero-size
// tensors, scalars, every dtype pair, out-of-range axes and indices, NaN, infinities, integer
// extremes), on every device under test, either returns a well-formed tensor or raises a
// tf::Error whose message names the op. Never another exception, a crash or undefined behaviour
// (CI runs these under ASan + UBSan), and never a hang.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "ops/scatter.h"
#include "support/adversarial.h"
#include "support/testing.h"
#include "tapeflow/tapeflow.h"

namespace tf = tapeflow;
using adversarial::describe;
using adversarial::kShapes;
using adversarial::make;
using adversarial::on_every_device;
using adversarial::probe;
using tf::testing::kAllDTypes;

TEST_CASE("adversarial: unary ops", "[adversarial]") {
  on_every_device([&] {
    using Unary = tf::Tensor (*)(const tf::Tensor&);
    const std::vector<std::pair<std::string, Unary>> ops = {{"negative", tf::negative},
                                                            {"abs", tf::abs},
                                                            {"sign", tf::sign},
                                                            {"exp", tf::exp},
                                                            {"log", tf::log},
                                                            {"log1p", tf::log1p},
                                                            {"sqrt", tf::sqrt},
                                                            {"rsqrt", tf::rsqrt},
                                                            {"square", tf::square},
                                                            {"tanh", tf::tanh},
                                                            {"sigmoid", tf::sigmoid},
                                                            {"sin", tf::sin},
                                                            {"cos", tf::cos},
                                                            {"floor", tf::floor},
                                                            {"ceil", tf::ceil},
                                                            {"round", tf::round},
                                                            {"logical_not", tf::logical_not},
                                                            {"invert", tf::bitwise::invert},
                                                            {"relu", tf::nn::relu}};
    for (const auto& [name, op] : ops)
      for (const auto& shape : kShapes)
        for (tf::DType d : kAllDTypes)
          for (bool special : {false, true}) {
            tf::Tensor x = make(shape, d, special);
            probe(name, describe(x), [&] { return op(x); });
          }
    for (const auto& shape : kShapes)
      for (tf::DType from : kAllDTypes)
        for (tf::DType to : kAllDTypes)
          for (bool special : {false, true}) {
            tf::Tensor x = make(shape, from, special);
            probe("cast", describe(x) + " to " + std::string(tf::dtype_name(to)),
                  [&] { return tf::cast(x, to); });
          }
  });
}

TEST_CASE("adversarial: binary ops", "[adversarial]") {
  on_every_device([&] {
    using Binary = tf::Tensor (*)(const tf::Tensor&, const tf::Tensor&);
    const std::vector<std::pair<std::string, Binary>> ops = {
        {"add", tf::add},
        {"subtract", tf::subtract},
        {"multiply", tf::multiply},
        {"divide", tf::divide},
        {"pow", tf::pow},
        {"maximum", tf::maximum},
        {"minimum", tf::minimum},
        {"equal", tf::equal},
        {"not_equal", tf::not_equal},
        {"less", tf::less},
        {"less_equal", tf::less_equal},
        {"greater", tf::greater},
        {"greater_equal", tf::greater_equal},
        {"logical_and", tf::logical_and},
        {"logical_or", tf::logical_or},
        {"logical_xor", tf::logical_xor},
        {"bitwise_and", tf::bitwise::bitwise_and},
        {"bitwise_or", tf::bitwise::bitwise_or},
        {"bitwise_xor", tf::bitwise::bitwise_xor},
        {"left_shift", tf::bitwise::left_shift},
        {"right_shift", tf::bitwise::right_shift}};
    const std::vector<std::pair<tf::DType, tf::DType>> dtype_pairs = {
        {tf::float16, tf::float16}, {tf::bfloat16, tf::bfloat16}, {tf::float32, tf::float32},
        {tf::float64, tf::float64}, {tf::int32, tf::int32},       {tf::int64, tf::int64},
        {tf::uint8, tf::uint8},     {tf::bool_, tf::bool_},       {tf::float32, tf::float64},
        {tf::int32, tf::float32},   {tf::bool_, tf::int32}};
    for (const auto& [name, op] : ops)
      for (const auto& [da, db] : dtype_pairs)
        for (const auto& sa : kShapes)
          for (const auto& sb : kShapes)
            for (bool special : {false, true}) {
              tf::Tensor a = make(sa, da, special, 1);
              tf::Tensor b = make(sb, db, special, 2);
              probe(name, describe(a) + ", " + describe(b), [&] { return op(a, b); });
            }
  });
}

TEST_CASE("adversarial: reductions", "[adversarial]") {
  on_every_device([&] {
    using Axis = tf::Tensor (*)(const tf::Tensor&, int, bool);
    using Axes = tf::Tensor (*)(const tf::Tensor&, const std::vector<int>&, bool);
    using All = tf::Tensor (*)(const tf::Tensor&);
    struct Reduction {
      std::string name;
      All all;
      Axis axis;
      Axes axes;
    };
    const std::vector<Reduction> ops = {
        {"reduce_sum", tf::reduce_sum, tf::reduce_sum, tf::reduce_sum},
        {"reduce_mean", tf::reduce_mean, tf::reduce_mean, tf::reduce_mean},
        {"reduce_max", tf::reduce_max, tf::reduce_max, tf::reduce_max},
        {"reduce_min", tf::reduce_min, tf::reduce_min, tf::reduce_min},
        {"reduce_prod", tf::reduce_prod, tf::reduce_prod, tf::reduce_prod},
        {"reduce_any", tf::reduce_any, tf::reduce_any, tf::reduce_any},
        {"reduce_all", tf::reduce_all, tf::reduce_all, tf::reduce_all}};
    const std::vector<std::vector<int>> axes_lists = {
        {}, {0}, {0, 0}, {0, -1}, {-1, 0}, {1, 2}, {5}, {-5}, {0, 1, 2, 3}, {3, 2, 1, 0, 0}};
    for (const auto& op : ops)
      for (const auto& shape : kShapes)
        for (tf::DType d : kAllDTypes)
          for (bool special : {false, true}) {
            tf::Tensor x = make(shape, d, special);
            probe(op.name, describe(x), [&] { return op.all(x); });
            for (int axis = -5; axis <= 4; ++axis)
              for (bool keep : {false, true})
                probe(op.name, describe(x) + ", axis " + std::to_string(axis),
                      [&] { return op.axis(x, axis, keep); });
            for (const auto& axes : axes_lists)
              for (bool keep : {false, true})
                probe(op.name, describe(x) + ", axes", [&] { return op.axes(x, axes, keep); });
          }
    for (const auto& shape : kShapes)
      for (tf::DType d : kAllDTypes)
        for (bool special : {false, true}) {
          tf::Tensor x = make(shape, d, special);
          for (int axis = -5; axis <= 4; ++axis) {
            probe("argmax", describe(x) + ", axis " + std::to_string(axis),
                  [&] { return tf::argmax(x, axis); });
            probe("argmin", describe(x) + ", axis " + std::to_string(axis),
                  [&] { return tf::argmin(x, axis); });
          }
        }
  });
}

TEST_CASE("adversarial: shape ops", "[adversarial]") {
  on_every_device([&] {
    const int64_t big = int64_t{1} << 40;
    const int64_t huge = std::numeric_limits<int64_t>::max();
    const std::vector<std::vector<int64_t>> targets = {
        {}, {0}, {-1}, {-1, -1}, {0, -1}, {-1, 0}, {3, -1}, {-2}, {6}, {2, 3}, {big, big, big}};
    const std::vector<std::vector<int>> perms = {{},        {0},       {1, 0}, {0, 0},
                                                 {2, 0, 1}, {0, 1, 5}, {-1, 0}};
    const std::vector<std::vector<int64_t>> vectors = {
        {},     {0},      {1},          {-1},   {5},          {0, 0},    {1, 2},    {-1, -1},
        {2, 2}, {big, 2}, {1, 1, 1, 1}, {huge}, {huge, huge}, {1, huge}, {-huge, 1}};
    for (const auto& shape : kShapes)
      for (tf::DType d : {tf::float32, tf::int64, tf::bool_}) {
        tf::Tensor x = make(shape, d, false);
        const std::string xs = describe(x);
        for (const auto& dims : targets) {
          std::optional<tf::TensorShape> t;
          try {
            t = tf::TensorShape(dims);  // negative dimensions other than -1 are refused here
          } catch (const tf::InvalidArgumentError& e) {
            CHECK_THAT(e.what(), Catch::Matchers::Contains("TensorShape"));
            continue;
          }
          probe("reshape", xs + " to " + t->to_string(), [&] { return tf::reshape(x, *t); });
          probe("broadcast_to", xs + " to " + t->to_string(),
                [&] { return tf::broadcast_to(x, *t); });
        }
        for (const auto& p : perms) probe("transpose", xs, [&] { return tf::transpose(x, p); });
        for (int axis = -6; axis <= 5; ++axis) {
          probe("expand_dims", xs, [&] { return tf::expand_dims(x, axis); });
          probe("squeeze", xs, [&] { return tf::squeeze(x, {axis}); });
          probe("concat", xs, [&] { return tf::concat({x, x}, axis); });
          probe("stack", xs, [&] { return tf::stack({x, x, x}, axis); });
          for (int n : {-1, 0, 1, 2, 3}) probe("split", xs, [&] { return tf::split(x, n, axis); });
          for (const auto& sizes : vectors)
            probe("split", xs, [&] { return tf::split(x, sizes, axis); });
        }
        probe("squeeze", xs, [&] { return tf::squeeze(x); });
        probe("concat", xs, [&] { return tf::concat({x, make({7}, d, false)}, 0); });
        probe("concat", xs, [&] { return tf::concat({x, make(shape, tf::float64, false)}, 0); });
        probe("concat", xs, [&] { return tf::concat({}, 0); });
        probe("stack", xs, [&] { return tf::stack({}, 0); });
        probe("stack", xs, [&] { return tf::stack({x, make({7}, d, false)}, 0); });
        for (const auto& begin : vectors)
          for (const auto& size : vectors)
            probe("slice", xs, [&] { return tf::slice(x, begin, size); });
        for (const auto& m : vectors) probe("tile", xs, [&] { return tf::tile(x, m); });
        for (const auto& p :
             std::vector<std::vector<std::pair<int64_t, int64_t>>>{{},
                                                                   {{0, 0}},
                                                                   {{1, 2}},
                                                                   {{-1, 0}},
                                                                   {{0, -5}},
                                                                   {{1, 1}, {1, 1}},
                                                                   {{0, 0}, {0, 0}, {0, 0}},
                                                                   {{big, big}},
                                                                   {{huge, huge}},
                                                                   {{huge, 1}},
                                                                   {{1, 1}, {huge, 0}},
                                                                   {{-huge, 0}}})
          probe("pad", xs, [&] { return tf::pad(x, p); });
        for (const auto& idx_shape : kShapes)
          for (tf::DType id : {tf::int32, tf::int64, tf::float32, tf::uint8})
            for (bool special : {false, true}) {
              tf::Tensor indices = make(idx_shape, id, special);
              for (int axis = -5; axis <= 4; ++axis)
                probe("gather", xs + ", " + describe(indices),
                      [&] { return tf::gather(x, indices, axis); });
              for (int64_t depth : {-1, 0, 1, 3})
                probe("one_hot", describe(indices), [&] { return tf::one_hot(indices, depth); });
              for (int64_t segments : {-1, 0, 1, 3, 1000})
                probe("unsorted_segment_sum", xs + ", " + describe(indices),
                      [&] { return tf::unsorted_segment_sum(x, indices, segments); });
            }
      }
  });
}

TEST_CASE("adversarial: factories and random ops", "[adversarial]") {
  on_every_device([&] {
    const double nan = std::nan(""), inf = std::numeric_limits<double>::infinity();
    const int64_t huge = std::numeric_limits<int64_t>::max();
    const std::vector<std::vector<int64_t>> shapes = {
        {}, {0}, {3}, {2, 0}, {-1}, {2, -1}, {int64_t{1} << 62}, {huge}, {int64_t{1} << 40, 8}};
    for (const auto& dims : shapes) {
      std::optional<tf::TensorShape> s;
      try {
        s = tf::TensorShape(dims);
      } catch (const tf::InvalidArgumentError&) {
        continue;
      }
      const std::string ss = s->to_string();
      for (tf::DType d : kAllDTypes) {
        probe("zeros", ss, [&] { return tf::zeros(*s, d); });
        probe("ones", ss, [&] { return tf::ones(*s, d); });
        probe("fill", ss, [&] { return tf::fill(*s, tf::cast(tf::constant(2.0), d)); });
        for (double mean : {0.0, nan, inf})
          for (double stddev : {1.0, 0.0, -1.0, nan})
            probe("normal", ss, [&] { return tf::random::normal(*s, mean, stddev, d, 7); });
        for (auto [lo, hi] : std::vector<std::pair<double, double>>{
                 {0, 1}, {1, 0}, {0, 0}, {-inf, inf}, {nan, 1}, {0, 1e300}, {-1e300, 1e300}})
          probe("uniform", ss, [&] { return tf::random::uniform(*s, lo, hi, d, 7); });
      }
      probe("fill", ss, [&] { return tf::fill(*s, tf::ones({2})); });
      probe("fill", ss, [&] { return tf::fill(*s, tf::Tensor()); });
    }
    for (int64_t n : {int64_t{-1}, int64_t{0}, int64_t{3}, int64_t{1} << 40, huge})
      for (int64_t m : {int64_t{-1}, int64_t{0}, int64_t{2}, int64_t{1} << 40}) {
        probe("eye", std::to_string(n), [&] { return tf::eye(n); });
        probe("eye", std::to_string(n) + ", " + std::to_string(m), [&] { return tf::eye(n, m); });
      }
    for (double start : {0.0, -5.0, nan, inf, 1e300})
      for (double limit : {0.0, 10.0, -10.0, nan, inf, 1e300})
        for (double delta : {1.0, -1.0, 0.0, 0.3, nan, inf, 1e-300}) {
          const std::string args =
              std::to_string(start) + ", " + std::to_string(limit) + ", " + std::to_string(delta);
          for (tf::DType d : kAllDTypes)
            probe("range", args, [&] { return tf::range(start, limit, delta, d); });
          probe("range", args, [&] { return tf::range(start, limit, delta); });
        }
    for (double start : {0.0, nan, -inf})
      for (double stop : {1.0, inf})
        for (int64_t num : {int64_t{-1}, int64_t{0}, int64_t{1}, int64_t{5}, huge})
          probe("linspace", std::to_string(num), [&] { return tf::linspace(start, stop, num); });
    probe("constant", "6 values as (2, 2)", [&] {
      return tf::constant(std::vector<float>(6, 1.0f), tf::TensorShape{2, 2});
    });
    probe("constant", "ragged rows", [&] { return tf::constant({{1.f, 2.f}, {3.f}}); });
    probe("convert_to_tensor", "3 values as (2, 2)", [&] {
      return tf::convert_to_tensor(std::vector<double>(3, 1.0), {2, 2});
    });
    probe("convert_to_tensor", "3 values as (-1,)",
          [&] { return tf::convert_to_tensor(std::vector<double>(3, 1.0), {-1}); });
    for (tf::DType d : kAllDTypes) {
      tf::Tensor x = make({2, 3}, d, true);
      for (tf::DType to : kAllDTypes) {
        probe("zeros_like", describe(x), [&] { return tf::zeros_like(x, to); });
        probe("ones_like", describe(x), [&] { return tf::ones_like(x, to); });
      }
    }
  });
}

TEST_CASE("adversarial: linear algebra", "[adversarial]") {
  on_every_device([&] {
    const std::vector<tf::TensorShape> shapes = {
        {},     {3},    {0, 0},    {2, 3},    {3, 2},       {3, 3},    {0, 3},
        {3, 0}, {1, 1}, {2, 3, 3}, {4, 3, 3}, {2, 1, 3, 3}, {1, 0, 0}, {2, 3, 1}};
    for (tf::DType d : kAllDTypes)
      for (bool special : {false, true}) {
        for (const auto& sa : shapes)
          for (const auto& sb : shapes) {
            tf::Tensor a = make(sa, d, special, 1), b = make(sb, d, special, 2);
            for (bool ta : {false, true})
              for (bool tb : {false, true})
                probe("matmul", describe(a) + ", " + describe(b),
                      [&] { return tf::matmul(a, b, ta, tb); });
            probe("solve", describe(a) + ", " + describe(b),
                  [&] { return tf::linalg::solve(a, b); });
          }
        for (const auto& s : shapes) {
          tf::Tensor a = make(s, d, special);
          probe("inv", describe(a), [&] { return tf::linalg::inv(a); });
          probe("det", describe(a), [&] { return tf::linalg::det(a); });
          tf::Tensor singular = tf::zeros(s, d);
          probe("inv", "zeros " + describe(a), [&] { return tf::linalg::inv(singular); });
          probe("det", "zeros " + describe(a), [&] { return tf::linalg::det(singular); });
          probe("solve", "zeros " + describe(a),
                [&] { return tf::linalg::solve(singular, singular); });
        }
      }
    probe("matmul", "float32, float64", [&] {
      return tf::matmul(tf::ones({2, 2}), tf::ones({2, 2}, tf::float64));
    });
  });
}

TEST_CASE("adversarial: neural-network ops and losses", "[adversarial]") {
  on_every_device([&] {
    const std::vector<tf::TensorShape> inputs = {
        {},           {3},          {1, 5, 5, 2}, {2, 4, 4, 3},
        {1, 0, 5, 2}, {0, 3, 3, 1}, {1, 1, 1, 1}, {1, 5, 5, 2, 1}};
    const std::vector<tf::TensorShape> filters = {{3, 3, 2, 4}, {1, 1, 3, 1}, {6, 6, 2, 1},
                                                  {3, 3, 5, 1}, {0, 0, 2, 1}, {3, 3, 2},
                                                  {2, 2, 2, 0}};
    const std::vector<std::vector<int>> windows = {{1},  {2}, {1, 2},    {1, 2, 2, 1}, {0},
                                                   {-1}, {},  {1, 2, 3}, {2, 2, 2, 2}, {1 << 30}};
    for (tf::DType d : {tf::float32, tf::float64, tf::float16, tf::int32, tf::bool_})
      for (const auto& si : inputs) {
        tf::Tensor x = make(si, d, false);
        for (const auto& sf : filters) {
          tf::Tensor f = make(sf, d, false, 2);
          for (const auto& strides : windows)
            for (const char* padding : {"SAME", "VALID", "same", "FULL"}) {
              probe("conv2d", describe(x) + ", " + describe(f) + ", " + padding,
                    [&] { return tf::nn::conv2d(x, f, strides, padding); });
              probe("conv2d", describe(x) + ", " + describe(f) + ", dilated",
                    [&] { return tf::nn::conv2d(x, f, {1}, padding, strides); });
            }
        }
        for (const auto& ksize : windows)
          for (const auto& strides : windows)
            for (const char* padding : {"SAME", "VALID", "BAD"}) {
              probe("max_pool2d", describe(x),
                    [&] { return tf::nn::max_pool2d(x, ksize, strides, padding); });
              probe("avg_pool2d", describe(x),
                    [&] { return tf::nn::avg_pool2d(x, ksize, strides, padding); });
            }
      }
    for (const auto& s : kShapes)
      for (tf::DType d : kAllDTypes) {
        tf::Tensor x = make(s, d, true);
        for (int axis = -5; axis <= 4; ++axis) {
          probe("softmax", describe(x), [&] { return tf::nn::softmax(x, axis); });
          probe("log_softmax", describe(x), [&] { return tf::nn::log_softmax(x, axis); });
        }
        for (double rate : {-0.5, 0.0, 0.5, 1.0, 1.5, std::nan("")})
          probe("dropout", describe(x) + ", rate " + std::to_string(rate),
                [&] { return tf::nn::dropout(x, rate, 3); });
        for (const auto& sb : kShapes) {
          tf::Tensor b = make(sb, d, false, 2);
          probe("bias_add", describe(x) + ", " + describe(b),
                [&] { return tf::nn::bias_add(x, b); });
          probe("sigmoid_cross_entropy_with_logits", describe(b) + ", " + describe(x),
                [&] { return tf::nn::sigmoid_cross_entropy_with_logits(b, x); });
          for (tf::DType ld : {tf::int32, tf::int64, tf::float32})
            for (bool special : {false, true}) {
              tf::Tensor labels = make(sb, ld, special, 3);
              probe("sparse_softmax_cross_entropy_with_logits",
                    describe(labels) + ", " + describe(x),
                    [&] { return tf::nn::sparse_softmax_cross_entropy_with_logits(labels, x); });
            }
        }
      }
  });
}

TEST_CASE("adversarial: 3-D convolution and pooling", "[adversarial]") {
  // Empty dimensions, mismatched channels, groups, zero-size filters, bad and huge windows: a
  // result (and its gradients) or a tf::Error naming the op, never a crash.
  on_every_device([&] {
    const std::vector<tf::TensorShape> inputs = {{},
                                                 {1, 3, 3, 3, 2},
                                                 {2, 2, 3, 4, 4},
                                                 {1, 0, 3, 3, 2},
                                                 {0, 2, 2, 2, 2},
                                                 {1, 2, 2, 2, 0},
                                                 {1, 3, 3, 3}};
    const std::vector<tf::TensorShape> filters = {{1, 1, 1, 2, 3}, {2, 2, 2, 2, 2}, {2, 1, 2, 1, 4},
                                                  {3, 3, 3, 2, 0}, {0, 1, 1, 2, 1}, {4, 4, 4, 2, 1},
                                                  {1, 1, 1, 0, 1}, {2, 2, 2, 3}};
    const std::vector<std::vector<int>> windows = {
        {1}, {2}, {1, 2, 3}, {1, 2, 2, 2, 1}, {0}, {-1}, {}, {2, 2, 2, 2, 2}, {1 << 30}, {1, 1}};
    for (tf::DType d : {tf::float32, tf::float64, tf::float16, tf::int32})
      for (const auto& si : inputs) {
        const tf::Tensor x = make(si, d, false);
        for (const auto& sf : filters) {
          const tf::Tensor f = make(sf, d, false, 2);
          for (const auto& w : windows)
            for (const char* padding : {"SAME", "VALID", "same"}) {
              const std::string what = describe(x) + ", " + describe(f) + ", " + padding;
              probe("conv3d", what, [&] {
                tf::GradientTape tape({.persistent = true});
                tape.watch(x);
                tape.watch(f);
                const tf::Tensor y = tf::nn::conv3d(x, f, w, padding);
                const tf::Tensor l = tf::reduce_sum(y * y);
                return std::vector<tf::Tensor>{y, tape.gradient(l, x), tape.gradient(l, f)};
              });
              probe("conv3d", what + ", dilated",
                    [&] { return tf::nn::conv3d(x, f, {1}, padding, w); });
              if (si.rank() == 5 && sf.rank() == 5) {
                tf::TensorShape out = si;
                out[4] = sf[3];
                // An input of the filters' in-channels whose conv3d output would be `out`.
                const tf::Tensor t = make({si[0], si[1], si[2], si[3], sf[4]}, d, false, 3);
                probe("conv3d_transpose", what,
                      [&] { return tf::nn::conv3d_transpose(t, f, out, w, padding); });
              }
            }
        }
        for (const auto& k : windows)
          for (const char* padding : {"SAME", "VALID"}) {
            probe("max_pool3d", describe(x),
                  [&] { return tf::nn::max_pool3d(x, k, {2}, padding); });
            probe("avg_pool3d", describe(x), [&] { return tf::nn::avg_pool3d(x, k, k, padding); });
          }
      }
  });
}

TEST_CASE("adversarial: where and clip_by_value", "[adversarial]") {
  on_every_device([&] {
    for (const auto& sc : kShapes)
      for (const auto& sx : kShapes)
        for (tf::DType cd : {tf::bool_, tf::float32})
          for (auto [dx, dy] : std::vector<std::pair<tf::DType, tf::DType>>{
                   {tf::float32, tf::float32}, {tf::int64, tf::int64}, {tf::float32, tf::int32}}) {
            tf::Tensor c = make(sc, cd, true), x = make(sx, dx, true, 2), y = make(sx, dy, true, 3);
            probe("where", describe(c) + ", " + describe(x) + ", " + describe(y),
                  [&] { return tf::where(c, x, y); });
            probe("clip_by_value", describe(x) + ", " + describe(y),
                  [&] { return tf::clip_by_value(x, y, c); });
            probe("clip_by_value", describe(x) + ", " + describe(y),
                  [&] { return tf::clip_by_value(x, 2.0f, -2.0f); });
          }
  });
}

// Gradients and traced calls of the same ops on edge-case shapes (empty, scalar, size-1 axes)
// and special values: the gradient has the source's shape and dtype, a traced call gives the
// eager result's shape, or both raise tf::Errors naming an op.
TEST_CASE("adversarial: gradients and traced calls on edge cases", "[adversarial]") {
  on_every_device([&] {
    using Fn = std::function<tf::Tensor(const tf::Tensor&)>;
    const std::vector<std::pair<std::string, Fn>> fns = {
        {"exp", [](const tf::Tensor& x) { return tf::exp(x); }},
        {"log", [](const tf::Tensor& x) { return tf::log(x); }},
        {"sqrt", [](const tf::Tensor& x) { return tf::sqrt(x); }},
        {"rsqrt", [](const tf::Tensor& x) { return tf::rsqrt(x); }},
        {"abs", [](const tf::Tensor& x) { return tf::abs(x); }},
        {"tanh", [](const tf::Tensor& x) { return tf::tanh(x); }},
        {"relu", [](const tf::Tensor& x) { return tf::nn::relu(x); }},
        {"divide", [](const tf::Tensor& x) { return tf::divide(1.0f, x); }},
        {"pow", [](const tf::Tensor& x) { return tf::pow(x, x); }},
        {"maximum", [](const tf::Tensor& x) { return tf::maximum(x, tf::negative(x)); }},
        {"reduce_sum", [](const tf::Tensor& x) { return tf::reduce_sum(x, {0}, true); }},
        {"reduce_mean", [](const tf::Tensor& x) { return tf::reduce_mean(x, -1); }},
        {"reduce_max", [](const tf::Tensor& x) { return tf::reduce_max(x, 0); }},
        {"reduce_min", [](const tf::Tensor& x) { return tf::reduce_min(x); }},
        {"reduce_prod", [](const tf::Tensor& x) { return tf::reduce_prod(x, 0); }},
        {"softmax", [](const tf::Tensor& x) { return tf::nn::softmax(x); }},
        {"log_softmax", [](const tf::Tensor& x) { return tf::nn::log_softmax(x); }},
        {"transpose", [](const tf::Tensor& x) { return tf::transpose(x); }},
        {"reshape", [](const tf::Tensor& x) { return tf::reshape(x, {-1}); }},
        {"concat",
         [](const tf::Tensor& x) {
           return tf::concat({x, x}, 0);
         }},
        {"stack",
         [](const tf::Tensor& x) {
           return tf::stack({x, x}, -1);
         }},
        {"tile",
         [](const tf::Tensor& x) { return tf::tile(x, std::vector<int64_t>(x.rank(), 2)); }},
        {"pad",
         [](const tf::Tensor& x) {
           return tf::pad(x, std::vector<std::pair<int64_t, int64_t>>(x.rank(), {1, 0}));
         }},
        {"gather",
         [](const tf::Tensor& x) {
           return tf::gather(x, tf::constant({0, 0}));
         }},
        {"matmul", [](const tf::Tensor& x) { return tf::matmul(x, x, false, true); }},
        {"inv", [](const tf::Tensor& x) { return tf::linalg::inv(x); }},
        {"det", [](const tf::Tensor& x) { return tf::linalg::det(x); }},
        {"broadcast_to", [](const tf::Tensor& x) {
           std::vector<int64_t> dims = x.shape().dims();
           dims.insert(dims.begin(), 2);
           return tf::broadcast_to(x, tf::TensorShape(dims));
         }}};
    for (const auto& [name, fn] : fns)
      for (const auto& shape : kShapes)
        for (tf::DType d : {tf::float32, tf::float64})
          for (bool special : {false, true}) {
            tf::Tensor x = make(shape, d, special);
            probe(name, "gradient of " + describe(x), [&] {
              tf::GradientTape tape;
              tape.watch(x);
              tf::Tensor y = fn(x);
              tf::Tensor g = tape.gradient(y, x);
              REQUIRE(g.defined());
              CHECK(g.shape() == x.shape());
              CHECK(g.dtype() == x.dtype());
              return g;
            });
            probe(name, "traced on " + describe(x), [&] {
              std::optional<tf::TensorShape> eager_shape;
              try {
                eager_shape = fn(x).shape();
              } catch (const tf::Error&) {
              }
              auto f = tf::function([&](tf::Tensor t) { return fn(t); });
              tf::Tensor y = f(x);
              CHECK(eager_shape == y.shape());
              return y;
            });
          }
  });
}
