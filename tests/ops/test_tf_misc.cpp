// Smaller TF functions a porting user calls: tf::bitcast, add_n / accumulate_n, scalar_mul,
// truediv, realdiv, rint, reciprocal_no_nan, zero_fraction, shape_n, identity_n,
// broadcast_static_shape, broadcast_dynamic_shape, linalg::tridiagonal_matmul, tensor_diag,
// tensor_diag_part, nn::lrn, executing_eagerly / inside_function, assert_same_float_dtype and
// is_numeric_tensor, on every device of devices_under_test(): TF 2.21's values, gradients
// against central differences, traces (None dimensions too) and the errors.
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "autograd/tape.h"
#include "core/device.h"
#include "core/error.h"
#include "core/tensor.h"
#include "jit/function.h"
#include "ops/array_more.h"
#include "ops/binary.h"
#include "ops/bitcast.h"
#include "ops/debugging.h"
#include "ops/factory.h"
#include "ops/linalg.h"
#include "ops/linalg_more.h"
#include "ops/math_misc.h"
#include "ops/movement.h"
#include "ops/nn_more.h"
#include "ops/reduce.h"
#include "ops/shape_ops.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
using tf::testing::check_gradient;
using tf::testing::check_values;
using tf::testing::require_error;

TEST_CASE("bitcast reads the bytes as another dtype, as TF", "[cpu][cuda][bitcast]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    // TF 2.21: bitcast([1.0, -2.0], int32), bitcast([1.0] float64, int32),
    // bitcast([[0, 1072693248]], float64), bitcast(float16 1.0, uint8).
    const tf::Tensor f = tf::constant({1.0f, -2.0f});
    const tf::Tensor i = tf::bitcast(f, tf::int32);
    CHECK(i.shape() == tf::TensorShape{2});
    check_values(i, {1065353216, -1073741824}, 0, 0);
    const tf::Tensor d = tf::bitcast(tf::constant({1.0}), tf::int32);
    CHECK(d.shape() == tf::TensorShape{1, 2});
    check_values(d, {0, 1072693248}, 0, 0);
    const tf::Tensor back = tf::bitcast(tf::constant({{0, 1072693248}}), tf::float64);
    CHECK(back.shape() == tf::TensorShape{1});
    check_values(back, {1.0}, 0, 0);
    check_values(tf::bitcast(tf::cast(tf::Tensor(1.0f), tf::float16), tf::uint8), {0, 60}, 0, 0);
    // A round trip is the identity, and the int view can be edited with the bitwise ops: the
    // sign bit cleared gives |x|.
    const tf::Tensor x = tf::constant({-1.5f, 2.25f, -0.0f});
    check_values(tf::bitcast(tf::bitcast(x, tf::int32), tf::float32), {-1.5, 2.25, -0.0}, 0, 0);
    check_values(
        tf::bitcast(tf::bitwise::bitwise_and(tf::bitcast(x, tf::int32), 0x7fffffff), tf::float32),
        {1.5, 2.25, 0.0}, 0, 0);
    // Traced over a None batch: one graph for every batch size.
    auto fn = tf::function([](const tf::Tensor& t) { return tf::bitcast(t, tf::uint8); },
                           tf::FunctionOptions{.input_signature = {tf::TensorSpec({tf::None})}});
    for (int64_t n : {1, 3}) {
      const tf::Tensor t = tf::ones({n});
      const tf::Tensor got = fn(t);
      CHECK(got.shape() == tf::TensorShape{n, 4});
      std::vector<double> want;
      for (int64_t k = 0; k < n; ++k) want.insert(want.end(), {0, 0, 128, 63});
      check_values(got, want, 0, 0);
    }
    CHECK(fn.tracing_count() == 1);
  }
  require_error(
      [] {
        tf::bitcast(tf::constant({1, 2, 3}), tf::float64);
      },
      {"[bitcast] Cannot bitcast from int32 to float64", "(3,)", "last dimension of 2"});
  require_error([] { tf::bitcast(tf::constant(std::vector<bool>{true}), tf::uint8); },
                {"[bitcast] bool tensors cannot be bitcast"});
  // No gradient flows through the bytes.
  const tf::Tensor v = tf::constant({1.0f, 2.0f});
  tf::GradientTape tape;
  tape.watch(v);
  const tf::Tensor y = tf::reduce_sum(tf::bitcast(tf::cast(v, tf::float16), tf::bfloat16));
  CHECK_FALSE(tape.gradient(y, v).defined());
}

TEST_CASE("add_n, scalar_mul, truediv, realdiv, rint, reciprocal_no_nan and zero_fraction",
          "[cpu][cuda][math]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor a = tf::constant({1, 2}), b = tf::constant({3, 4}), c = tf::constant({5, 6});
    check_values(tf::add_n({a, b, c}), {9, 12}, 0, 0);
    check_values(tf::math::accumulate_n({tf::constant({1.0f, 2.0f}), tf::constant({3.0f, 4.0f})}),
                 {4, 6}, 0, 0);
    CHECK(tf::add_n({a}).raw_data() == a.raw_data());
    check_values(tf::math::scalar_mul(2.0, tf::constant({1.0f, 2.0f})), {2, 4}, 0, 0);
    const tf::Tensor q = tf::truediv(tf::constant({7, -7}), tf::constant({2, 2}));
    CHECK(q.dtype() == tf::float64);
    check_values(q, {3.5, -3.5}, 0, 0);
    check_values(tf::realdiv(tf::constant({7.0f, -7.0f}), tf::constant({2.0f, 0.0f})),
                 {3.5, -INFINITY}, 0, 0);
    check_values(tf::math::rint(tf::constant({0.5f, 1.5f, -0.5f, 2.5f, -1.7f})),
                 {0, 2, -0.0, 2, -2}, 0, 0);
    check_values(tf::math::reciprocal_no_nan(tf::constant({0.0f, 2.0f, -0.0f, INFINITY})),
                 {0, 0.5, 0, 0}, 0, 0);
    const tf::Tensor zf = tf::math::zero_fraction(tf::constant({{0, 1}, {0, 0}}));
    CHECK(zf.dtype() == tf::float32);
    check_values(zf, {0.75}, 0, 0);
    check_values(tf::nn::zero_fraction(tf::zeros({0})), {NAN}, 0, 0);

    // add_n's gradient is the cotangent for each input; scalar_mul's the scalar times it.
    check_gradient(
        [](const tf::Tensor& x) {
          return tf::add_n({x, tf::square(x), x * 3.0}) + tf::math::scalar_mul(2.0, x);
        },
        {2, 3});
  }
  require_error([] { tf::add_n({}); }, {"[add_n] needs at least one input tensor"});
  require_error(
      [] {
        tf::add_n({tf::constant({1, 2}), tf::constant({3})});
      },
      {"[add_n] inputs must have the same size and shape: input 0 has shape (2,), "
       "input 1 has shape (1,)"});
  require_error(
      [] {
        tf::add_n({tf::constant({1, 2}), tf::constant({1.0f, 2.0f})});
      },
      {"[add_n] inputs must have one dtype"});
  require_error(
      [] {
        tf::math::scalar_mul(tf::constant({1.0f, 2.0f}), tf::ones({2}));
      },
      {"[scalar_mul] Only scalar multiply works"});
  require_error([] { tf::realdiv(tf::constant({7}), tf::constant({2})); },
                {"[realdiv] expects floating-point tensors", "int32"});
  require_error([] { tf::math::rint(tf::constant({1, 2})); }, {"[rint]", "int32"});
  require_error(
      [] {
        tf::math::reciprocal_no_nan(tf::constant({1, 2}));
      },
      {"[reciprocal_no_nan]", "int32"});
}

TEST_CASE("shape_n, identity_n, broadcast_static_shape and broadcast_dynamic_shape",
          "[cpu][cuda][shape_ops]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const auto shapes = tf::shape_n({tf::zeros({2, 3}), tf::zeros({4})});
    REQUIRE(shapes.size() == 2);
    check_values(shapes[0], {2, 3}, 0, 0);
    check_values(shapes[1], {4}, 0, 0);
    const tf::Tensor z = tf::zeros({2});
    CHECK(tf::identity_n({z, z})[1].raw_data() == z.raw_data());

    CHECK(tf::broadcast_static_shape({2, 1, 3}, {4, 3}) == tf::TensorShape{2, 4, 3});
    CHECK(tf::broadcast_static_shape({tf::None, 1}, {5}) == tf::TensorShape{tf::None, 5});
    CHECK(tf::broadcast_static_shape({tf::None}, {1}) == tf::TensorShape{tf::None});
    require_error(
        [] {
          tf::broadcast_static_shape({2, 3}, {4, 3});
        },
        {"[broadcast_static_shape] Incompatible shapes: (2, 3) and (4, 3)"});

    // TF 2.21: broadcast_dynamic_shape([2, 1, 3], [4, 3]) = [2, 4, 3].
    const tf::Tensor bds =
        tf::broadcast_dynamic_shape(tf::constant({2, 1, 3}), tf::constant({4, 3}));
    CHECK(bds.dtype() == tf::int32);
    check_values(bds, {2, 4, 3}, 0, 0);
    require_error(
        [] {
          tf::broadcast_dynamic_shape(tf::constant({2, 3}), tf::constant({4, 3}));
        },
        {"[broadcast_dynamic_shape] Incompatible shapes: [2,3] vs. [4,3]"});
    // Traced over None dimensions: the shapes of that call, checked at every call.
    auto f = tf::function(
        [](const tf::Tensor& x, const tf::Tensor& y) {
          return tf::broadcast_dynamic_shape(tf::shape(x), tf::shape(y));
        },
        tf::FunctionOptions{
            .input_signature = {tf::TensorSpec({tf::None, 1}), tf::TensorSpec({tf::None})}});
    check_values(f(tf::zeros({3, 1}), tf::zeros({5})), {3, 5}, 0, 0);
    check_values(f(tf::zeros({2, 1}), tf::zeros({1})), {2, 1}, 0, 0);
    CHECK(f.tracing_count() == 1);
  }
}

TEST_CASE("tridiagonal_matmul, tensor_diag and tensor_diag_part match TF 2.21",
          "[cpu][cuda][linalg]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor d = tf::constant(
        {{1.0f, 2.0f, 3.0f, 4.0f}, {5.0f, 6.0f, 7.0f, 8.0f}, {9.0f, 10.0f, 11.0f, 12.0f}});
    const tf::Tensor rhs = tf::reshape(tf::range(0.0f, 8.0f, 1.0f), {4, 2});
    const std::vector<double> want = {2, 8, 20, 38, 68, 89, 96, 116};
    check_values(tf::linalg::tridiagonal_matmul(d, rhs), want, 1e-6, 0);
    const auto parts = tf::unstack(d);
    check_values(tf::linalg::tridiagonal_matmul(parts, rhs), want, 1e-6, 0);
    // The same A as a matrix (the ignored corners of the compact form left out).
    const tf::Tensor a = tf::constant({{5.0f, 1.0f, 0.0f, 0.0f},
                                       {10.0f, 6.0f, 2.0f, 0.0f},
                                       {0.0f, 11.0f, 7.0f, 3.0f},
                                       {0.0f, 0.0f, 12.0f, 8.0f}});
    check_values(tf::linalg::tridiagonal_matmul(a, rhs, "matrix"), want, 1e-6, 0);
    check_values(tf::matmul(a, rhs), want, 1e-6, 0);
    // Gradients with respect to the diagonals and rhs, batched.
    check_gradient(
        [](const tf::Tensor& x) {
          const tf::Tensor diag = tf::reshape(tf::slice(x, {0}, {12}), {1, 3, 4});
          const tf::Tensor r = tf::reshape(tf::slice(x, {12}, {8}), {1, 4, 2});
          return tf::linalg::tridiagonal_matmul(diag, r);
        },
        {20});

    const tf::Tensor td = tf::linalg::tensor_diag(tf::constant({{1, 2}, {3, 4}}));
    CHECK(td.shape() == tf::TensorShape{2, 2, 2, 2});
    check_values(tf::linalg::tensor_diag_part(td), {1, 2, 3, 4}, 0, 0);
    // TF 2.21: tensor_diag_part(reshape(range(16), [2, 2, 2, 2])) = [[0, 5], [10, 15]].
    check_values(tf::linalg::tensor_diag_part(tf::reshape(tf::range(0, 16), {2, 2, 2, 2})),
                 {0, 5, 10, 15}, 0, 0);
  }
  require_error(
      [] {
        tf::linalg::tridiagonal_matmul(tf::ones({3, 4}), tf::ones({5, 2}));
      },
      {"[tridiagonal_matmul] compact diagonals must be [..., 3, M] with M = 5"});
  require_error(
      [] {
        tf::linalg::tridiagonal_matmul(tf::ones({4, 4}), tf::ones({4, 2}), "band");
      },
      {"[tridiagonal_matmul] diagonals_format must be"});
  require_error(
      [] {
        tf::linalg::tensor_diag_part(tf::ones({2, 3}));
      },
      {"[tensor_diag_part] expects a known shape s + s", "(2, 3)"});
}

TEST_CASE("lrn, executing_eagerly and the dtype assertions", "[cpu][debugging]") {
  const tf::Tensor img = tf::reshape(tf::range(0.0f, 8.0f, 1.0f), {1, 1, 2, 4});
  tf::testing::check_close(tf::nn::lrn(img, 1, 1.0, 0.5, 0.75),
                           tf::nn::local_response_normalization(img, 1, 1.0, 0.5, 0.75), 0, 0);
  CHECK(tf::executing_eagerly());
  CHECK_FALSE(tf::inside_function());
  bool eager_inside = true, inside = false;
  auto f = tf::function([&](const tf::Tensor& t) {
    eager_inside = tf::executing_eagerly();
    inside = tf::inside_function();
    return t * 2.0f;
  });
  f(tf::ones({2}));
  CHECK_FALSE(eager_inside);
  CHECK(inside);

  CHECK(tf::debugging::assert_same_float_dtype({tf::ones({2}), tf::zeros({3})}) == tf::float32);
  CHECK(tf::debugging::assert_same_float_dtype({}) == tf::float32);
  CHECK(tf::debugging::assert_same_float_dtype({}, tf::float64) == tf::float64);
  require_error(
      [] {
        tf::debugging::assert_same_float_dtype({tf::ones({2}), tf::ones({2}, tf::float64)});
      },
      {"[assert_same_float_dtype] Expected float32 for tensor 1, got float64"});
  require_error([] { tf::debugging::assert_same_float_dtype({tf::constant({1})}); },
                {"[assert_same_float_dtype] Expected floating point type, got int32"});
  CHECK(tf::debugging::is_numeric_tensor(tf::ones({2})));
  CHECK_FALSE(tf::debugging::is_numeric_tensor(tf::constant(std::vector<bool>{true})));
  CHECK_FALSE(tf::debugging::is_numeric_tensor(tf::Tensor()));
}
