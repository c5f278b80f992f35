// tf.linalg's structure ops, triangular_solve, slogdet and lu (ops/linalg_more.h): values against
// TF 2.21 literals (tf.linalg.X / tf.tensordot / tf.math.l2_normalize on the same inputs, in
// /tmp/tfvenv), gradients against central finite differences in float64, the arguments TF
// rejects, and traced against eager; on every device under test.
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "autograd/tape.h"
#include "core/device.h"
#include "core/error.h"
#include "jit/function.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/linalg.h"
#include "ops/linalg_more.h"
#include "ops/movement.h"
#include "ops/reduce.h"
#include "ops/scan.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
using tf::testing::check_close;
using tf::testing::check_values;
using tf::testing::require_error;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

tf::Tensor make(const std::vector<double>& v, const tf::TensorShape& s,
                tf::DType dt = tf::float64) {
  return tf::detail::from_doubles(v, s, dt);
}

tf::Tensor iota(const tf::TensorShape& s, tf::DType dt = tf::float32) {
  std::vector<double> v(static_cast<size_t>(s.num_elements()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i);
  return make(v, s, dt);
}

// The matrices of the TF reference script.
tf::Tensor mat_a() {
  return make({2, -1, 0.5, 1, 3, -2, 0.5, 1, 4}, {3, 3});
}
tf::Tensor mat_b() {
  return make({1, 2, 0, 3, 1, 4, 0, 2, 5, 0, 1, 2, 1, 0, 3, 4, -3, 8}, {2, 3, 3});
}
tf::Tensor rhs_r() {
  return make({1, 2, -1, 0.5, 3, -2}, {3, 2});
}

// Checks d sum(w * f(x)) / dx from the tape against central differences (float64), w fixed
// pseudo-random weights so that every output element matters.
void check_gradient(const char* what, const std::function<tf::Tensor(const tf::Tensor&)>& f,
                    const tf::Tensor& x, double tol = 1e-6) {
  INFO(what);
  const tf::Tensor y0 = f(x);
  const tf::Tensor w = make(
      tf::testing::random_values(static_cast<size_t>(y0.num_elements()), -1, 1, 7), y0.shape());
  auto loss = [&](const tf::Tensor& v) { return tf::reduce_sum(f(v) * w); };
  tf::GradientTape tape;
  tape.watch(x);
  const tf::Tensor l = loss(x);
  const tf::Tensor g = tape.gradient(l, x);
  REQUIRE(g.shape() == x.shape());
  const std::vector<double> want = tf::testing::central_differences(
      [&](const std::vector<double>& v) { return loss(make(v, x.shape())).item<double>(); },
      tf::detail::to_double_vector(x), 1e-6);
  check_values(g, want, tol, tol);
}

}  // namespace

TEST_CASE("linalg_more: band_part diag diag_part set_diag trace match TF", "[cpu][cuda][linalg]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    INFO(dev.to_string());
    const tf::Tensor x = iota({2, 3, 4});
    // tf.linalg.band_part(tf.reshape(tf.range(24.), [2, 3, 4]), 1, 0) / (0, -1) / (-1, 1)
    check_values(tf::linalg::band_part(x, 1, 0),
                 {0, 0, 0, 0, 4, 5, 0, 0, 0, 9, 10, 0, 12, 0, 0, 0, 16, 17, 0, 0, 0, 21, 22, 0}, 0,
                 0);
    check_values(
        tf::linalg::band_part(x, 0, -1),
        {0, 1, 2, 3, 0, 5, 6, 7, 0, 0, 10, 11, 12, 13, 14, 15, 0, 17, 18, 19, 0, 0, 22, 23}, 0, 0);
    check_values(
        tf::linalg::band_part(x, -1, 1),
        {0, 1, 0, 0, 4, 5, 6, 0, 8, 9, 10, 11, 12, 13, 0, 0, 16, 17, 18, 0, 20, 21, 22, 23}, 0, 0);
    CHECK(tf::linalg::band_part(iota({2, 2}, tf::int32), 0, 0).dtype() == tf::int32);
    // tf.linalg.diag([[1, 2, 3], [4, 5, 6]], k=0 / 1 / -2)
    const tf::Tensor v = make({1, 2, 3, 4, 5, 6}, {2, 3}, tf::float32);
    check_values(tf::linalg::diag(v), {1, 0, 0, 0, 2, 0, 0, 0, 3, 4, 0, 0, 0, 5, 0, 0, 0, 6}, 0, 0);
    const tf::Tensor d1 = tf::linalg::diag(v, 1);
    REQUIRE(d1.shape() == tf::TensorShape{2, 4, 4});
    check_values(d1, {0, 1, 0, 0, 0, 0, 2, 0, 0, 0, 0, 3, 0, 0, 0, 0,
                      0, 4, 0, 0, 0, 0, 5, 0, 0, 0, 0, 6, 0, 0, 0, 0},
                 0, 0);
    const tf::Tensor dm2 = tf::linalg::diag(v, -2);
    REQUIRE(dm2.shape() == tf::TensorShape{2, 5, 5});
    const auto dm2v = tf::detail::to_double_vector(dm2);
    CHECK(dm2v[10] == 1);  // [0, 2, 0]
    CHECK(dm2v[16] == 2);  // [0, 3, 1]
    CHECK(dm2v[22] == 3);  // [0, 4, 2]
    CHECK(dm2v[25 + 10] == 4);
    CHECK(tf::reduce_sum(dm2).item<float>() == 21);
    // tf.linalg.diag_part(x, k=0 / 1 / -1 / 3)
    check_values(tf::linalg::diag_part(x), {0, 5, 10, 12, 17, 22}, 0, 0);
    check_values(tf::linalg::diag_part(x, 1), {1, 6, 11, 13, 18, 23}, 0, 0);
    check_values(tf::linalg::diag_part(x, -1), {4, 9, 16, 21}, 0, 0);
    check_values(tf::linalg::diag_part(x, 3), {3, 15}, 0, 0);
    // bool (TF's diag_part takes it): [[0, 1, 2], [3, 4, 5]] != 0 -> {false, true}.
    const tf::Tensor flags = tf::linalg::diag_part(tf::cast(iota({2, 3}), tf::bool_));
    CHECK(flags.dtype() == tf::bool_);
    check_values(flags, {0, 1}, 0, 0);
    // tf.linalg.set_diag(tf.reshape(tf.range(12.), [3, 4]), d, k=0 / 1 / -1)
    const tf::Tensor y = iota({3, 4});
    check_values(tf::linalg::set_diag(y, make({10, 20, 30}, {3}, tf::float32)),
                 {10, 1, 2, 3, 4, 20, 6, 7, 8, 9, 30, 11}, 0, 0);
    check_values(tf::linalg::set_diag(y, make({10, 20, 30}, {3}, tf::float32), 1),
                 {0, 10, 2, 3, 4, 5, 20, 7, 8, 9, 10, 30}, 0, 0);
    check_values(tf::linalg::set_diag(y, make({10, 20}, {2}, tf::float32), -1),
                 {0, 1, 2, 3, 10, 5, 6, 7, 8, 20, 10, 11}, 0, 0);
    // tf.linalg.trace(x)
    check_values(tf::linalg::trace(x), {15, 51}, 0, 0);
    check_values(tf::linalg::trace(iota({2, 3}, tf::int32)), {4}, 0, 0);
    // Empty matrices.
    CHECK(tf::linalg::diag_part(tf::zeros({2, 0, 3})).shape() == tf::TensorShape{2, 0});
    CHECK(tf::linalg::band_part(tf::zeros({0, 4, 4}), 1, 1).shape() == tf::TensorShape{0, 4, 4});
    CHECK(tf::linalg::matrix_transpose(x).shape() == tf::TensorShape{2, 4, 3});
    check_close(tf::linalg::adjoint(x), tf::linalg::matrix_transpose(x), 0, 0);
  }
}

TEST_CASE("linalg_more: matvec tensordot cross l2_normalize match TF", "[cpu][cuda][linalg]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    INFO(dev.to_string());
    const tf::Tensor x = iota({2, 3, 4});
    // tf.linalg.matvec(x, [1, -1, 2, 0.5]); transpose_a with [1, -1, 2]
    check_values(tf::linalg::matvec(x, make({1, -1, 2, 0.5}, {4}, tf::float32)),
                 {4.5, 14.5, 24.5, 34.5, 44.5, 54.5}, 0, 0);
    check_values(tf::linalg::matvec(x, make({1, -1, 2}, {3}, tf::float32), true),
                 {12, 14, 16, 18, 36, 38, 40, 42}, 0, 0);
    // tf.tensordot(x, tf.reshape(tf.range(8.), [4, 2]), 1) and the pairs forms
    check_values(tf::linalg::tensordot(x, iota({4, 2}), 1),
                 {28, 34, 76, 98, 124, 162, 172, 226, 220, 290, 268, 354}, 0, 0);
    const tf::Tensor pairs = tf::linalg::tensordot(x, iota({3, 2}), {1}, {0});
    REQUIRE(pairs.shape() == tf::TensorShape{2, 4, 2});
    check_values(pairs, {40, 52, 46, 61, 52, 70, 58, 79, 112, 160, 118, 169, 124, 178, 130, 187}, 0,
                 0);
    check_values(
        tf::linalg::tensordot(make({1, 2}, {2}, tf::float32), make({3, 4, 5}, {3}, tf::float32), 0),
        {3, 4, 5, 6, 8, 10}, 0, 0);
    check_values(tf::linalg::tensordot(x, iota({3, 4, 2}), {1, 2}, {0, 1}),
                 {1012, 1078, 2596, 2806}, 0, 0);
    // tf.linalg.cross
    check_values(tf::linalg::cross(make({1, 2, 3, -1, 0.5, 2}, {2, 3}, tf::float32),
                                   make({4, 5, 6, 3, -2, 1}, {2, 3}, tf::float32)),
                 {-3, 6, -3, 4.5, 7, 0.5}, 0, 0);
    // tf.math.l2_normalize([[3, 4], [0, 0], [1, -2]], axis=-1)
    check_values(
        tf::linalg::l2_normalize(make({3, 4, 0, 0, 1, -2}, {3, 2}, tf::float32)),
        {0.6000000238418579, 0.800000011920929, 0, 0, 0.4472135901451111, -0.8944271802902222},
        1e-6, 1e-7);
  }
}

TEST_CASE("linalg_more: triangular_solve matches TF with broadcast batches",
          "[cpu][cuda][linalg]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    INFO(dev.to_string());
    // tf.linalg.triangular_solve(A, R, lower=..., adjoint=...)
    struct Case {
      bool lower, adjoint;
      std::vector<double> want;
    };
    for (const Case& c :
         {Case{true, false, {0.5, 1.0, -0.5, -0.16666666666666666, 0.8125, -0.5833333333333334}},
          Case{true,
               true,
               {0.6041666666666666, 0.9583333333333334, -0.5833333333333333, 0.3333333333333333,
                0.75, -0.5}},
          Case{false,
               false,
               {0.39583333333333337, 1.0416666666666665, 0.16666666666666666, -0.16666666666666666,
                0.75, -0.5}},
          Case{false, true, {0.5, 1.0, -0.16666666666666666, 0.5, 0.6041666666666666, -0.375}}}) {
      INFO("lower " << c.lower << " adjoint " << c.adjoint);
      for (tf::DType dt : {tf::float64, tf::float32}) {
        const tf::Tensor got = tf::linalg::triangular_solve(
            tf::cast(mat_a(), dt), tf::cast(rhs_r(), dt), c.lower, c.adjoint);
        CHECK(got.dtype() == dt);
        check_values(got, c.want, dt == tf::float64 ? 1e-14 : 1e-6, 1e-14);
      }
    }
    // Batched matrix, one shared rhs: tf.linalg.triangular_solve(B, R) (B[1] has a zero on its
    // diagonal: infinities, no error).
    check_values(tf::linalg::triangular_solve(mat_b(), rhs_r()),
                 {1, 2, -4, -5.5, 2.2, 1.8, kInf, kInf, -kInf, -kInf, -kInf, -kInf}, 1e-14, 1e-14);
    // TF 2.x broadcasting: [2, 1, 3, 3] with [4, 3, 2] -> [2, 4, 3, 2].
    const tf::Tensor m = tf::ones({2, 1, 3, 3}) + tf::eye(3);
    CHECK(tf::linalg::triangular_solve(m, tf::ones({4, 3, 2})).shape() ==
          tf::TensorShape{2, 4, 3, 2});
    CHECK(tf::linalg::triangular_solve(tf::zeros({0, 3, 3}), tf::ones({3, 2})).shape() ==
          tf::TensorShape{0, 3, 2});
    CHECK(tf::linalg::triangular_solve(tf::zeros({0, 0}), tf::ones({0, 2})).shape() ==
          tf::TensorShape{0, 2});
    require_error(
        [] {
          tf::linalg::triangular_solve(tf::ones({2, 3}), tf::ones({2, 1}));
        },
        {"[triangular_solve]", "square", "(2, 3)"});
    require_error(
        [] {
          tf::linalg::triangular_solve(tf::ones({3, 3}), tf::ones({2, 1}));
        },
        {"[triangular_solve]", "(3, 3)", "(2, 1)"});
    require_error(
        [] {
          tf::linalg::triangular_solve(tf::ones({3, 3}, tf::int32), tf::ones({3, 1}, tf::int32));
        },
        {"[triangular_solve]", "int32"});
    require_error(
        [] {
          tf::linalg::triangular_solve(tf::ones({3, 3}), tf::ones({3, 1}, tf::float64));
        },
        {"[triangular_solve]", "float32", "float64"});
    require_error(
        [] {
          tf::linalg::triangular_solve(tf::ones({2, 3, 3}), tf::ones({4, 3, 1}));
        },
        {"[triangular_solve]", "(2, 3, 3)", "(4, 3, 1)"});
  }
}

TEST_CASE("linalg_more: slogdet and lu match TF", "[cpu][cuda][linalg]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    INFO(dev.to_string());
    for (tf::DType dt : {tf::float64, tf::float32}) {
      const double tol = dt == tf::float64 ? 1e-14 : 1e-6;
      // tf.linalg.slogdet(A), (B)
      auto [s, l] = tf::linalg::slogdet(tf::cast(mat_a(), dt));
      check_values(s, {1}, 0, 0);
      check_values(l, {3.4889029620812613}, tol, tol);
      auto [sb, lb] = tf::linalg::slogdet(tf::cast(mat_b(), dt));
      check_values(sb, {-1, -1}, 0, 0);
      check_values(lb, {3.4965075614664802, 0.6931471805599453}, tol, tol);
      // tf.linalg.lu(A), (B)
      auto [lu, p] = tf::linalg::lu(tf::cast(mat_a(), dt));
      CHECK(p.dtype() == tf::int32);
      check_values(lu, {2, -1, 0.5, 0.5, 3.5, -2.25, 0.25, 0.35714285714285715, 4.678571428571429},
                   tol, tol);
      check_values(p, {0, 1, 2}, 0, 0);
      auto [lub, pb] = tf::linalg::lu(tf::cast(mat_b(), dt), tf::int64);
      CHECK(pb.dtype() == tf::int64);
      check_values(lub,
                   {3, 1, 4, 0, 2, 5, 0.3333333333333333, 0.8333333333333334, -5.5, 4, -3, 8, 0, 1,
                    2, 0.25, 0.75, -0.5},
                   tol, tol);
      check_values(pb, {1, 2, 0, 2, 0, 1}, 0, 0);
      // tf.linalg.lu_solve(lu, p, tf.stack([R, 2 R])), lu_matrix_inverse, lu_reconstruct
      const tf::Tensor r = tf::cast(rhs_r(), dt);
      check_values(tf::linalg::lu_solve(lub, pb, tf::stack({r, r * 2.0})),
                   {-0.9393939393939394, 0.8181818181818181, 0.9696969696969697, 0.5909090909090908,
                    0.21212121212121213, -0.6363636363636364, -32, -5, -18, 0, 10, 2},
                   tol * 100, tol * 100);
      check_values(
          tf::linalg::lu_matrix_inverse(lub, pb),
          {0.0909090909090909, 0.30303030303030304, -0.24242424242424243, 0.4545454545454546,
           -0.15151515151515152, 0.12121212121212122, -0.18181818181818182, 0.06060606060606061,
           0.15151515151515152, -4.5, 7, -1.5, -2, 4, -1, 1.5, -2, 0.5},
          tol * 100, tol * 100);
      check_values(tf::linalg::lu_reconstruct(lub, pb),
                   {1, 2, 0, 3, 1, 4, 0, 2, 5, 0, 1, 2, 1, 0, 3, 4, -3, 8}, tol, tol);
    }
    // Singular: slogdet gives {0, -inf} (TF's), lu refuses it (TF's message).
    auto [s, l] = tf::linalg::slogdet(make({1, 2, 2, 4}, {2, 2}));
    check_values(s, {0}, 0, 0);
    check_values(l, {-kInf}, 0, 0);
    TF_REQUIRE_THROWS_CONTAINING(tf::linalg::lu(make({1, 2, 2, 4}, {2, 2})),
                                 tf::InvalidArgumentError, "[lu] Input is not invertible.");
    // Empty matrices: slogdet {1, 0}; lu's outputs are empty.
    auto [se, le] = tf::linalg::slogdet(tf::zeros({2, 0, 0}, tf::float64));
    check_values(se, {1, 1}, 0, 0);
    check_values(le, {0, 0}, 0, 0);
    auto [lue, pe] = tf::linalg::lu(tf::zeros({2, 0, 0}));
    CHECK(lue.shape() == tf::TensorShape{2, 0, 0});
    CHECK(pe.shape() == tf::TensorShape{2, 0});
    require_error([] { tf::linalg::lu(tf::ones({2, 3})); }, {"[lu]", "square", "(2, 3)"});
    require_error([] { tf::linalg::slogdet(tf::ones({3})); }, {"[slogdet]", "rank", "(3,)"});
    require_error([] { tf::linalg::slogdet(tf::ones({2, 2}, tf::int32)); }, {"[slogdet]", "int32"});
    require_error([] { tf::linalg::lu(tf::ones({2, 2}, tf::bfloat16)); }, {"[lu]", "bfloat16"});
  }
}

TEST_CASE("linalg_more: expm matches TF", "[cpu][cuda][linalg]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    INFO(dev.to_string());
    // tf.linalg.expm(A) (1-norm 7.5: one squaring in float64, two in float32)
    check_values(tf::linalg::expm(mat_a()),
                 {8.718118182517667, -1.984651635241942, 25.0220866226613, -2.3843957838563,
                  -4.58889614908423, -43.29073004236811, 16.283991784464842, 19.460841311634955,
                  30.16361112939459},
                 1e-13, 1e-13);
    check_values(tf::linalg::expm(tf::cast(mat_a(), tf::float32)),
                 {8.718122482299805, -1.9846463203430176, 25.0220947265625, -2.3844046592712402,
                  -4.5889081954956055, -43.29075241088867, 16.28400230407715, 19.460851669311523,
                  30.163616180419922},
                 2e-6, 2e-6);
    // A batch of a small-norm and a large-norm matrix (different squaring counts).
    check_values(tf::linalg::expm(make({0.1, 0.2, -0.3, 0.05, 6, -5, 4, -3}, {2, 2, 2})),
                 {1.072723714165671, 0.21344984212019538, -0.3201747631802931, 1.0193612536356218,
                  26.072153180817153, -23.3538713523581, 18.68309708188648, -15.964815253427426},
                 1e-13, 1e-13);
    check_values(tf::linalg::expm(tf::zeros({2, 2}, tf::float64)), {1, 0, 0, 1}, 1e-15, 1e-15);
    CHECK(tf::linalg::expm(tf::zeros({2, 0, 0})).shape() == tf::TensorShape{2, 0, 0});
    require_error([] { tf::linalg::expm(tf::ones({2, 3})); }, {"[expm]", "square", "(2, 3)"});
    require_error([] { tf::linalg::expm(tf::ones({2, 2}, tf::int32)); }, {"[expm]", "int32"});
  }
}

TEST_CASE("linalg_more: tridiagonal_solve matches TF", "[cpu][cuda][linalg]") {
  // diagonals [2, 3, 4] (compact); the second system needs a row interchange (main[0] = 0).
  const tf::Tensor diags =
      make({2, -1, 0.5, 9, 1, 3, -2, 4, 7, 0.5, 1, 4, 0.1, 1, 2, 9, 0, 1e-3, 3, 1, 7, 5, 1, -2},
           {2, 3, 4});
  const tf::Tensor r = make({1, 2, -1, 0.5, 3, -2, 0.25, 1}, {4, 2});
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    INFO(dev.to_string());
    const tf::Tensor rhs = tf::stack({r, r * 2.0});
    // tf.linalg.tridiagonal_solve(D, tf.stack([R, 2 R]))
    const std::vector<double> want = {4.359375,
                                      1.5625,
                                      -1.6796875,
                                      0.21875,
                                      -1.859375,
                                      0.9375,
                                      1.921875,
                                      -0.6875,
                                      0.024571428571428466,
                                      1.5634285714285716,
                                      19.999999999999996,
                                      40.0,
                                      -2.1428571428571423,
                                      -6.857142857142858,
                                      -3.785714285714285,
                                      -11.714285714285715};
    check_values(tf::linalg::tridiagonal_solve(diags, rhs), want, 1e-12, 1e-12);
    check_values(
        tf::linalg::tridiagonal_solve(tf::cast(diags, tf::float32), tf::cast(rhs, tf::float32)),
        want, 1e-4, 1e-4);
    // partial_pivoting=False: the zero pivot of the second system gives NaNs, as TF.
    const tf::Tensor np = tf::linalg::tridiagonal_solve(diags, rhs, "compact", false, false);
    const auto npv = tf::detail::to_double_vector(np);
    check_values(tf::slice(np, {0, 0, 0}, {1, 4, 2}),
                 std::vector<double>(want.begin(), want.begin() + 8), 1e-12, 1e-12);
    for (size_t i = 8; i < 16; ++i) CHECK(std::isnan(npv[i]));
    // Vectors: tf.linalg.tridiagonal_solve(D, [[1, 2, 3, 4], [0, 1, 0, 1]])
    check_values(tf::linalg::tridiagonal_solve(diags, make({1, 2, 3, 4, 0, 1, 0, 1}, {2, 4})),
                 {0.375, 0.3125, -0.875, 1.875, 0.2571428571428571, -1.1102230246251565e-16,
                  -0.2857142857142857, 0.4285714285714286},
                 1e-12, 1e-12);
    // The matrix and sequence formats, and transpose_rhs, give the same.
    // The first system as a matrix (the 9 off the three diagonals is not read).
    const tf::Tensor dense = make({1, 2, 0, 9, 0.5, 3, -1, 0, 0, 1, -2, 0.5, 0, 0, 4, 4}, {4, 4});
    check_values(tf::linalg::tridiagonal_solve(dense, r, "matrix"),
                 std::vector<double>(want.begin(), want.begin() + 8), 1e-12, 1e-12);
    std::vector<tf::Tensor> seq;
    for (int64_t i = 0; i < 3; ++i)
      seq.push_back(tf::squeeze(tf::slice(diags, {0, i, 0}, {2, 1, 4}), {1}));
    check_values(tf::linalg::tridiagonal_solve(seq, rhs), want, 1e-12, 1e-12);
    check_values(tf::linalg::tridiagonal_solve(seq, tf::linalg::matrix_transpose(rhs), true), want,
                 1e-12, 1e-12);
    // Singular with pivoting: NaNs, no error (TF's).
    const auto sing = tf::detail::to_double_vector(tf::linalg::tridiagonal_solve(
        make({1, 1, 9, 0, 0, 4, 7, 0, 1}, {3, 3}), tf::ones({3, 1}, tf::float64)));
    for (double v : sing) CHECK(std::isnan(v));
    CHECK(tf::linalg::tridiagonal_solve(tf::zeros({2, 3, 0}), tf::zeros({2, 0, 2})).shape() ==
          tf::TensorShape{2, 0, 2});
    require_error(
        [] {
          tf::linalg::tridiagonal_solve(tf::ones({2, 3}), tf::ones({3, 1}));
        },
        {"[tridiagonal_solve]", "[..., 3, M]", "(2, 3)"});
    require_error(
        [] {
          tf::linalg::tridiagonal_solve(tf::ones({3, 3}, tf::int32), tf::ones({3, 1}, tf::int32));
        },
        {"[tridiagonal_solve]", "int32"});
    require_error(
        [] {
          tf::linalg::tridiagonal_solve(tf::ones({2, 3, 4}), tf::ones({4, 4, 2}));
        },
        {"[tridiagonal_solve]", "(2, 3, 4)", "(4, 4, 2)"});
    require_error(
        [] {
          tf::linalg::tridiagonal_solve(tf::ones({3, 4}), tf::ones({4, 1}), "band");
        },
        {"[tridiagonal_solve]", "band"});
  }
}

TEST_CASE("linalg_more: primitives agree with inv and det at larger sizes", "[cpu][cuda][linalg]") {
  // Batches of small matrices (the CUDA batched paths) and single big ones (the blocked /
  // cuSOLVER paths), against the existing LU-based ops.
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    INFO(dev.to_string());
    struct Case {
      int64_t batches, n;
    };
    for (const Case& c : {Case{16, 5}, Case{3, 40}, Case{1, 150}}) {
      INFO("batches " << c.batches << " n " << c.n);
      const tf::TensorShape s{c.batches, c.n, c.n};
      // Diagonally dominant and well conditioned, for the triangular solves.
      // (Scaled by 1 / n so that det stays finite at n = 150.)
      tf::Tensor a = (make(tf::testing::random_values(s.num_elements(), -1, 1, 21), s) +
                      tf::eye(c.n, tf::float64) * static_cast<double>(c.n)) /
                     static_cast<double>(c.n);
      a = tf::linalg::matrix_transpose(a) * 0.5 + a;
      const tf::Tensor b =
          make(tf::testing::random_values(c.batches * c.n * 3, -1, 1, 22), {c.batches, c.n, 3});
      // triangular_solve against solve on the triangle.
      for (bool lower : {true, false})
        for (bool adjoint : {false, true}) {
          INFO("lower " << lower << " adjoint " << adjoint);
          const tf::Tensor t =
              lower ? tf::linalg::band_part(a, -1, 0) : tf::linalg::band_part(a, 0, -1);
          const tf::Tensor want =
              tf::linalg::solve(adjoint ? tf::linalg::matrix_transpose(t) : t, b);
          check_close(tf::linalg::triangular_solve(a, b, lower, adjoint), want, 1e-10, 1e-10);
        }
      // lu reconstructs its input; lu_matrix_inverse is inv; slogdet is det's. The rows
      // reversed, so that pivoting exchanges rows.
      const tf::Tensor ar = tf::reverse(a, {1});
      auto [lu, p] = tf::linalg::lu(ar);
      CHECK(
          tf::reduce_sum(tf::cast(tf::not_equal(p, tf::cast(tf::range(c.n), tf::int32)), tf::int32))
              .item<int32_t>() > 0);
      check_close(tf::linalg::lu_reconstruct(lu, p), ar, 1e-12, 1e-12);
      check_close(tf::linalg::lu_matrix_inverse(lu, p), tf::linalg::inv(ar), 1e-10, 1e-12);
      auto [sign, logdet] = tf::linalg::slogdet(ar);
      const tf::Tensor d = tf::linalg::det(ar);
      check_close(sign, tf::sign(d), 0, 0);
      check_close(logdet, tf::log(tf::abs(d)), 1e-12, 1e-12);
      // Tridiagonal: the same system as a dense matrix.
      const tf::Tensor tri = tf::linalg::band_part(a, 1, 1);
      check_close(tf::linalg::tridiagonal_solve(tri, b, "matrix"), tf::linalg::solve(tri, b), 1e-10,
                  1e-10);
    }
  }
}

TEST_CASE("linalg_more: structure ops reject bad arguments", "[cpu][linalg]") {
  require_error([] { tf::linalg::band_part(tf::ones({3}), 1, 1); },
                {"[band_part]", "rank", "(3,)"});
  require_error(
      [] {
        tf::linalg::diag_part(tf::ones({3, 3}), 3);
      },
      {"[diag_part]", "k = 3", "3 x 3"});
  require_error([] { tf::linalg::diag_part(tf::ones({3, 3}), -3); }, {"[diag_part]", "k = -3"});
  require_error(
      [] {
        tf::linalg::set_diag(tf::ones({2, 3, 3}), tf::ones({3}));
      },
      {"[set_diag]", "(2, 3)", "(3,)"});
  require_error([] { tf::linalg::diag(tf::ones(tf::TensorShape{})); }, {"[diag]", "rank"});
  require_error(
      [] {
        tf::linalg::cross(tf::ones({2, 3}), tf::ones({3}));
      },
      {"[cross]", "(2, 3)", "(3,)"});
  require_error([] { tf::linalg::cross(tf::ones({2, 4}), tf::ones({2, 4})); }, {"[cross]", "3"});
  require_error(
      [] {
        tf::linalg::tensordot(tf::ones({2, 3}), tf::ones({4, 2}), 1);
      },
      {"[tensordot]", "(2, 3)", "(4, 2)"});
  require_error(
      [] {
        tf::linalg::tensordot(tf::ones({2, 3}), tf::ones({3}), 3);
      },
      {"[tensordot]", "axes = 3"});
  require_error([] { tf::linalg::matvec(tf::ones({3}), tf::ones({3})); }, {"[matvec]", "rank"});
  require_error([] { tf::linalg::l2_normalize(tf::ones({3}, tf::int32)); }, {"l2_normalize"});
  require_error([] { tf::linalg::trace(tf::ones({3})); }, {"[trace]", "rank"});
  require_error(
      [] {
        auto [lu, p] = tf::linalg::lu(tf::eye(3));
        tf::linalg::lu_solve(lu, p, tf::ones({2, 1}));
      },
      {"[lu_solve]", "(2, 1)"});
  require_error([] { tf::linalg::lu_reconstruct(tf::eye(3), tf::ones({3})); },
                {"[lu_reconstruct]", "perm", "float32"});
}

TEST_CASE("linalg_more: gradients match finite differences", "[cpu][cuda][linalg]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    INFO(dev.to_string());
    const tf::Tensor a = mat_a(), b = mat_b(), r = rhs_r();
    const tf::Tensor x = make(tf::testing::random_values(24, -1, 1, 3), {2, 3, 4});
    const tf::Tensor other = make(tf::testing::random_values(24, -1, 1, 4), {2, 3, 4});
    check_gradient(
        "band_part", [](const tf::Tensor& t) { return tf::linalg::band_part(t, 1, 0); }, x);
    check_gradient(
        "diag", [](const tf::Tensor& t) { return tf::linalg::diag(t, -1); }, x);
    check_gradient(
        "diag_part", [](const tf::Tensor& t) { return tf::linalg::diag_part(t, 1); }, x);
    check_gradient(
        "trace", [](const tf::Tensor& t) { return tf::linalg::trace(t); }, x);
    check_gradient(
        "set_diag input",
        [&](const tf::Tensor& t) {
          return tf::linalg::set_diag(t, make({1, 2, 3, 4}, {2, 2}), -1) * t;
        },
        x);
    check_gradient(
        "set_diag diagonal",
        [&](const tf::Tensor& d) { return tf::linalg::set_diag(x, d, -1) * x; },
        make({1, 2, 3, 4}, {2, 2}));
    check_gradient(
        "tensordot",
        [&](const tf::Tensor& t) {
          return tf::linalg::tensordot(t, other, {0, 2}, {0, 2});
        },
        x);
    check_gradient(
        "matvec", [&](const tf::Tensor& t) { return tf::linalg::matvec(x, t, true); },
        make({1, -2, 0.5}, {3}));
    check_gradient(
        "cross",
        [&](const tf::Tensor& t) {
          return tf::linalg::cross(t, make({4, 5, 6}, {1, 3}));
        },
        make({1, 2, 3}, {1, 3}));
    check_gradient(
        "l2_normalize", [](const tf::Tensor& t) { return tf::linalg::l2_normalize(t, 1); }, x);
    for (bool lower : {true, false})
      for (bool adjoint : {false, true}) {
        INFO("triangular_solve lower " << lower << " adjoint " << adjoint);
        check_gradient(
            "triangular_solve matrix",
            [&](const tf::Tensor& m) { return tf::linalg::triangular_solve(m, r, lower, adjoint); },
            a);
        check_gradient(
            "triangular_solve rhs",
            [&](const tf::Tensor& y) { return tf::linalg::triangular_solve(a, y, lower, adjoint); },
            r);
      }
    // Broadcast batches: one matrix for two right-hand sides, gradient summed over the batch.
    const tf::Tensor well = b + tf::eye(3, tf::float64) * 6.0;
    check_gradient(
        "triangular_solve broadcast",
        [&](const tf::Tensor& m) { return tf::linalg::triangular_solve(m, well); }, a);
    check_gradient(
        "slogdet", [](const tf::Tensor& m) { return tf::linalg::slogdet(m).second; }, b);
    check_gradient(
        "lu 2-D", [](const tf::Tensor& m) { return tf::linalg::lu(m).first; }, a);
    check_gradient(
        "lu batched", [](const tf::Tensor& m) { return tf::linalg::lu(m).first; }, b);
    check_gradient(
        "lu_solve",
        [&](const tf::Tensor& m) {
          auto [lu, p] = tf::linalg::lu(m);
          return tf::linalg::lu_solve(lu, p, r);
        },
        b);
  }
}

TEST_CASE("linalg_more: traced equals eager", "[cpu][cuda][jit][linalg]") {
  auto body = [](const tf::Tensor& m, const tf::Tensor& y) {
    auto [s, l] = tf::linalg::slogdet(m);
    auto [lu, p] = tf::linalg::lu(m);
    const tf::Tensor x =
        tf::linalg::triangular_solve(m, y, false, true) + tf::linalg::lu_solve(lu, p, y) +
        tf::expand_dims(
            tf::linalg::matvec(tf::linalg::band_part(m, 1, 0), tf::linalg::diag_part(m)), -1);
    return x * tf::expand_dims(tf::expand_dims(s * l + tf::linalg::trace(m), -1), -1);
  };
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    INFO(dev.to_string());
    auto f = tf::function(body);
    for (tf::DType dt : {tf::float32, tf::float64}) {
      const tf::Tensor m = tf::cast(mat_b(), dt);
      const tf::Tensor y = make(tf::testing::random_values(12, -1, 1, 5), {2, 3, 2}, dt);
      const tf::Tensor want = body(m, y);
      for (int rep = 0; rep < 2; ++rep) check_close(f(m, y), want, 1e-5, 1e-5);
    }
    // expm's squarings, counted when the graph runs (a tf::while_loop; more in
    // tests/jit/test_control_flow.cpp).
    auto g = tf::function([](const tf::Tensor& m) { return tf::linalg::expm(m); });
    check_close(g(mat_a()), tf::linalg::expm(mat_a()), 1e-13, 1e-13);
  }
}

TEST_CASE("linalg_more: the docs example", "[cpu][linalg]") {
  // docs/ops.md's example, checked.
  tf::Tensor a = tf::constant<double>({{4, 1}, {2, 3}});
  auto [lu, p] = tf::linalg::lu(a);
  tf::Tensor x = tf::linalg::lu_solve(lu, p, tf::constant<double>({{1}, {2}}));  // a x = b
  auto [sign, logdet] = tf::linalg::slogdet(a);                                  // 1, log(10)
  tf::Tensor l = tf::linalg::band_part(a, -1, 0);                                // lower triangle
  tf::Tensor y = tf::linalg::triangular_solve(l, tf::constant<double>({{4}, {5}}));  // {1, 1}
  check_values(x, {0.1, 0.6}, 1e-15, 1e-15);
  check_values(sign, {1}, 0, 0);
  check_values(logdet, {std::log(10.0)}, 1e-15, 1e-15);
  check_values(y, {1, 1}, 1e-15, 1e-15);
}
