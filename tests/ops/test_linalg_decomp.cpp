// cholesky, cholesky_solve, logdet, eigh, eigvalsh, qr, svd, pinv and lstsq: values against TF
// 2.21 (literals from tf.linalg.* on the same inputs, computed in float64 on the CPU), the
// factorisations' defining identities, and gradients against central differences in float64.
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
#include "ops/factory.h"
#include "ops/linalg.h"
#include "ops/linalg_decomp.h"
#include "ops/math.h"
#include "ops/movement.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
using tf::testing::check_close;
using tf::testing::check_values;
using tf::testing::random_values;

namespace {

tf::Tensor make(const std::vector<double>& v, const tf::TensorShape& s,
                tf::DType dt = tf::float64) {
  return tf::detail::from_doubles(v, s, dt);
}

// The inputs of the TF reference runs.
const std::vector<double> kSpd = {4, 2, 0.6, 2, 5, 1, 0.6, 1, 3};             // 3 x 3
const std::vector<double> kSpdBatch = {2, 1, 1, 2, 9, 3, 3, 5};               // 2 x 2 x 2
const std::vector<double> kSym = {2, 1, 0, 1, 3, 1, 0, 1, 4};                 // 3 x 3
const std::vector<double> kTall = {1, 2, 3, 4, 5, 6.5, 7, 8.5, 9, 1, -1, 2};  // 4 x 3
// kTall transposed, 3 x 4.
const std::vector<double> kWide = {1, 4, 7, 1, 2, 5, 8.5, -1, 3, 6.5, 9, 2};

tf::Tensor mT(const tf::Tensor& x) {
  std::vector<int> perm(x.rank());
  for (int i = 0; i < x.rank(); ++i) perm[i] = i;
  std::swap(perm[x.rank() - 1], perm[x.rank() - 2]);
  return tf::transpose(x, perm);
}

// [..., k] -> [..., k, k]
tf::Tensor diag(const tf::Tensor& v) {
  const int64_t k = v.shape()[v.rank() - 1];
  return tf::expand_dims(v, -1) * tf::eye(k, v.dtype());
}

// x^T x == I for the columns of x.
void check_orthonormal_columns(const tf::Tensor& x, double tol) {
  const int64_t k = x.shape()[x.rank() - 1];
  check_close(tf::matmul(x, x, true, false),
              tf::broadcast_to(tf::eye(k, x.dtype()), tf::matmul(x, x, true, false).shape()), tol,
              tol);
}

// R with each row multiplied by the sign of its diagonal element (Q's column signs are not
// unique), as a flat vector.
std::vector<double> sign_normalised_r(const tf::Tensor& r) {
  auto v = tf::detail::to_double_vector(r);
  const int64_t k = r.shape()[r.rank() - 2], n = r.shape()[r.rank() - 1];
  for (int64_t i = 0; i < k; ++i) {
    const double s = i < n && v[i * n + i] < 0 ? -1 : 1;
    for (int64_t j = 0; j < n; ++j) v[i * n + j] *= s;
  }
  return v;
}

// d loss(x) / dx by the tape against central differences, x float64 of the given shape.
void check_gradient(const std::function<tf::Tensor(const tf::Tensor&)>& loss,
                    const std::vector<double>& x0, const tf::TensorShape& shape,
                    double tol = 1e-6) {
  const tf::Tensor x = make(x0, shape);
  tf::GradientTape tape;
  tape.watch(x);
  const tf::Tensor y = loss(x);
  const tf::Tensor g = tape.gradient(y, x);
  REQUIRE(g.defined());
  REQUIRE(g.shape() == shape);
  const std::vector<double> want = tf::testing::central_differences(
      [&](const std::vector<double>& v) { return loss(make(v, shape)).item<double>(); }, x0, 1e-6);
  check_values(g, want, tol, tol);
}

// Symmetric positive definite from a free matrix: x x^T + 3 I.
tf::Tensor spd_of(const tf::Tensor& x) {
  const int64_t n = x.shape()[x.rank() - 1];
  return tf::matmul(x, x, false, true) + 3.0 * tf::eye(n, tf::float64);
}

tf::Tensor weights(const tf::TensorShape& s, unsigned seed) {
  return make(random_values(static_cast<size_t>(s.num_elements()), -1, 1, seed), s);
}

}  // namespace

TEST_CASE("cholesky matches TF and reconstructs its input", "[cpu][cuda][linalg]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    for (tf::DType dt : {tf::float32, tf::float64}) {
      const double tol = dt == tf::float32 ? 1e-5 : 1e-12;
      // tf.linalg.cholesky(kSpd)
      const tf::Tensor l = tf::linalg::cholesky(make(kSpd, {3, 3}, dt));
      check_values(l, {2.0, 0.0, 0.0, 1.0, 2.0, 0.0, 0.3, 0.35, 1.6695807857064}, tol, tol);
      // tf.linalg.cholesky(kSpdBatch)
      const tf::Tensor lb = tf::linalg::cholesky(make(kSpdBatch, {2, 2, 2}, dt));
      check_values(
          lb, {1.4142135623730951, 0.0, 0.7071067811865475, 1.224744871391589, 3.0, 0.0, 1.0, 2.0},
          tol, tol);
      check_close(tf::matmul(lb, lb, false, true), make(kSpdBatch, {2, 2, 2}, dt), tol, tol);
      // Only the lower triangle is read, as TF.
      std::vector<double> garbage_upper = kSpd;
      garbage_upper[1] = 100;
      garbage_upper[5] = -7;
      check_close(tf::linalg::cholesky(make(garbage_upper, {3, 3}, dt)), l, 0, 0);
    }
    CHECK(tf::linalg::cholesky(tf::zeros({2, 0, 0})).shape() == tf::TensorShape({2, 0, 0}));
    CHECK(tf::linalg::cholesky(tf::zeros({0, 4, 4})).shape() == tf::TensorShape({0, 4, 4}));
  }
}

TEST_CASE("cholesky of a matrix that is not positive definite raises", "[cpu][cuda][linalg]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    tf::testing::require_error(
        [] {
          tf::linalg::cholesky(make({4, 0, 0, 1, 1, 2, 2, 1}, {2, 2, 2}));
        },
        {"cholesky", "Cholesky decomposition was not successful. The input might not be valid.",
         "matrix 1", "(2, 2, 2)"});
    tf::testing::require_error(
        [] {
          tf::linalg::cholesky(make({NAN, 0, 0, 1}, {2, 2}, tf::float32));
        },
        {"Cholesky decomposition was not successful"});
  }
}

TEST_CASE("cholesky_solve and logdet match TF", "[cpu][cuda][linalg]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor a = make(kSpd, {3, 3});
    const tf::Tensor rhs = make({1, 2, 3, 4, 5, 6}, {3, 2});
    // tf.linalg.cholesky_solve(tf.linalg.cholesky(kSpd), rhs)
    check_values(tf::linalg::cholesky_solve(tf::linalg::cholesky(a), rhs),
                 {-0.16143497757847533, 0.008968609865470822, 0.3479820627802691,
                  0.4251121076233183, 1.5829596412556053, 1.8565022421524668},
                 1e-12, 1e-12);
    check_values(tf::linalg::logdet(a), {3.7977338590260183}, 1e-12, 1e-12);  // tf.linalg.logdet
    tf::testing::require_error(
        [&] {
          tf::linalg::cholesky_solve(tf::linalg::cholesky(a), make({1, 2}, {2, 1}));
        },
        {"cholesky_solve", "(3, 3)", "(2, 1)"});
  }
}

TEST_CASE("decompositions reject bad shapes and dtypes naming the op", "[cpu][cuda][linalg]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    using tf::testing::require_error;
    require_error(
        [] {
          tf::linalg::cholesky(tf::zeros({2, 3}));
        },
        {"cholesky", "square", "(2, 3)"});
    require_error([] { tf::linalg::eigh(tf::zeros({4, 2, 3})); }, {"eigh", "square", "(4, 2, 3)"});
    require_error([] { tf::linalg::eigvalsh(tf::zeros({3})); }, {"eigvalsh", "rank", "(3,)"});
    require_error([] { tf::linalg::qr(tf::zeros({3})); }, {"qr", "rank at least 2", "(3,)"});
    require_error([] { tf::linalg::svd(tf::zeros({2, 2}, tf::int32)); }, {"svd", "int32"});
    require_error(
        [] {
          tf::linalg::cholesky(tf::zeros({2, 2}, tf::float16));
        },
        {"cholesky", "float16"});
    require_error([] { tf::linalg::qr(tf::zeros({2, 2}, tf::bfloat16)); }, {"qr", "bfloat16"});
    require_error([] { tf::linalg::logdet(tf::zeros({2, 3})); }, {"logdet", "(2, 3)"});
    require_error([] { tf::linalg::pinv(tf::zeros({2}, tf::float64)); }, {"pinv", "(2,)"});
    require_error(
        [] {
          tf::linalg::lstsq(tf::zeros({3, 2}), tf::zeros({2, 1}));
        },
        {"lstsq", "(3, 2)", "(2, 1)"});
    require_error(
        [] {
          tf::linalg::lstsq(tf::zeros({3, 2}), tf::zeros({3, 1}), -1, false);
        },
        {"lstsq", "l2_regularizer must be >= 0"});
  }
}

TEST_CASE("eigh matches TF eigenvalues and reconstructs its input", "[cpu][cuda][linalg]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    for (tf::DType dt : {tf::float32, tf::float64}) {
      const double tol = dt == tf::float32 ? 2e-5 : 1e-12;
      const tf::Tensor s = make(kSym, {3, 3}, dt);
      const auto d = tf::linalg::eigh(s);
      // tf.linalg.eigh(kSym)[0]
      check_values(d.eigenvalues, {1.2679491924311224, 2.9999999999999996, 4.7320508075688785}, tol,
                   tol);
      check_orthonormal_columns(d.eigenvectors, tol);
      check_close(
          tf::matmul(d.eigenvectors, tf::matmul(diag(d.eigenvalues), d.eigenvectors, false, true)),
          s, tol, tol);
      check_close(tf::linalg::eigvalsh(s), d.eigenvalues, tol, tol);
      // A batch; tf.linalg.eigh(kSpdBatch)[0].
      const tf::Tensor b = make(kSpdBatch, {2, 2, 2}, dt);
      const auto db = tf::linalg::eigh(b);
      check_values(db.eigenvalues,
                   {0.9999999999999998, 2.9999999999999996, 3.39444872453601, 10.605551275463988},
                   tol, tol);
      check_close(tf::matmul(db.eigenvectors,
                             tf::matmul(diag(db.eigenvalues), db.eigenvectors, false, true)),
                  b, tol, tol);
    }
    const auto e = tf::linalg::eigh(tf::zeros({2, 0, 0}));
    CHECK(e.eigenvalues.shape() == tf::TensorShape({2, 0}));
    CHECK(e.eigenvectors.shape() == tf::TensorShape({2, 0, 0}));
  }
}

TEST_CASE("qr matches TF up to signs and reconstructs its input", "[cpu][cuda][linalg]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    for (tf::DType dt : {tf::float32, tf::float64}) {
      const double tol = dt == tf::float32 ? 2e-5 : 1e-12;
      const tf::Tensor tall = make(kTall, {4, 3}, dt), wide = make(kWide, {3, 4}, dt);
      const auto t = tf::linalg::qr(tall);
      REQUIRE(t.q.shape() == tf::TensorShape({4, 3}));
      REQUIRE(t.r.shape() == tf::TensorShape({3, 3}));
      // tf.linalg.qr(kTall)[1], rows multiplied by the signs of the diagonal
      CHECK_THAT(sign_normalised_r(t.r),
                 Catch::Matchers::Approx(
                     std::vector<double>{8.18535277187245, 9.834640270682572, 11.483927769492691,
                                         0.0, 2.3515634684755287, 0.025387999659656102, 0.0, 0.0,
                                         2.090157514291187})
                     .margin(tol * 10));
      check_close(tf::matmul(t.q, t.r), tall, tol, tol);
      check_orthonormal_columns(t.q, tol);
      const auto w = tf::linalg::qr(wide);
      REQUIRE(w.q.shape() == tf::TensorShape({3, 3}));
      REQUIRE(w.r.shape() == tf::TensorShape({3, 4}));
      CHECK_THAT(sign_normalised_r(w.r),  // tf.linalg.qr(kWide)[1], sign-normalised
                 Catch::Matchers::Approx(
                     std::vector<double>{3.7416573867739413, 8.953251604066217, 13.630323337533646,
                                         1.3363062095621223, 0.0, 1.7576363999091846,
                                         3.962301710777929, 0.020319495952707545, 0.0, 0.0,
                                         0.8743288094601618, -2.0527719874282044})
                     .margin(tol * 10));
      check_close(tf::matmul(w.q, w.r), wide, tol, tol);
      // full_matrices: TF's shapes (4, 4) and (4, 3).
      const auto f = tf::linalg::qr(tall, true);
      REQUIRE(f.q.shape() == tf::TensorShape({4, 4}));
      REQUIRE(f.r.shape() == tf::TensorShape({4, 3}));
      check_close(tf::matmul(f.q, f.r), tall, tol, tol);
      check_orthonormal_columns(f.q, tol);
      check_values(tf::slice(f.r, {3, 0}, {1, 3}), {0, 0, 0}, 0, 0);
      // A batch.
      const tf::Tensor batch = tf::stack({tall, 2.0 * tall - 1.0}, 0);
      const auto bq = tf::linalg::qr(batch);
      check_close(tf::matmul(bq.q, bq.r), batch, tol * 10, tol * 10);
    }
    // Empty: a 3 x 0 matrix has Q = I (full) as TF.
    const auto e = tf::linalg::qr(tf::zeros({3, 0}, tf::float64), true);
    check_values(e.q, {1, 0, 0, 0, 1, 0, 0, 0, 1}, 0, 0);
    CHECK(e.r.shape() == tf::TensorShape({3, 0}));
  }
}

TEST_CASE("svd matches TF singular values and reconstructs its input", "[cpu][cuda][linalg]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    for (tf::DType dt : {tf::float32, tf::float64}) {
      const double tol = dt == tf::float32 ? 2e-5 : 1e-12;
      const std::vector<double> want_s = {17.303763413795934, 2.235668182936956,
                                          1.0399805263467994};  // tf.linalg.svd(kTall)[0]
      for (bool full : {false, true}) {
        INFO("full_matrices " << full);
        for (const tf::Tensor& a : {make(kTall, {4, 3}, dt), make(kWide, {3, 4}, dt)}) {
          const int64_t m = a.shape()[0], n = a.shape()[1];
          const auto d = tf::linalg::svd(a, full);
          check_values(d.s, want_s, tol, tol);
          REQUIRE(d.u.shape() == tf::TensorShape({m, full ? m : 3}));
          REQUIRE(d.v.shape() == tf::TensorShape({n, full ? n : 3}));
          check_orthonormal_columns(d.u, tol);
          check_orthonormal_columns(d.v, tol);
          const tf::Tensor u3 = tf::slice(d.u, {0, 0}, {m, 3}), v3 = tf::slice(d.v, {0, 0}, {n, 3});
          check_close(tf::matmul(u3, tf::matmul(diag(d.s), v3, false, true)), a, tol, tol);
        }
      }
      const auto s_only = tf::linalg::svd(make(kTall, {4, 3}, dt), false, false);
      check_values(s_only.s, want_s, tol, tol);
      CHECK_FALSE(s_only.u.defined());
      // A batch.
      const tf::Tensor batch = make(random_values(2 * 3 * 5 * 4, -1, 1, 3), {2, 3, 5, 4}, dt);
      const auto db = tf::linalg::svd(batch);
      check_close(tf::matmul(db.u, tf::matmul(diag(db.s), db.v, false, true)), batch, tol * 10,
                  tol * 10);
    }
    const auto e = tf::linalg::svd(tf::zeros({3, 0}, tf::float64), true);
    CHECK(e.s.shape() == tf::TensorShape({0}));
    check_values(e.u, {1, 0, 0, 0, 1, 0, 0, 0, 1}, 0, 0);  // as TF
    CHECK(e.v.shape() == tf::TensorShape({0, 0}));
  }
}

TEST_CASE("pinv lstsq and the spectral norm match TF", "[cpu][cuda][linalg]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor tall = make(kTall, {4, 3}), wide = make(kWide, {3, 4});
    check_values(
        tf::linalg::pinv(tall),  // tf.linalg.pinv(kTall)
        {-0.6639508842381652, -0.26434473704533157, 0.3465132442659663, 0.2957371225577264,
         0.14047416788941233, 0.03289829330450228, 0.0182253455865318, -0.39964476021314377,
         0.36358019924318474, 0.20279558267047637, -0.1881226349525058, 0.1420959147424511},
        1e-10, 1e-12);
    // tf.linalg.lstsq(kTall, [[1], [2], [3], [4]])
    check_values(tf::linalg::lstsq(tall, make({1, 2, 3, 4}, {4, 1})),
                 {1.029847864699973, -1.337632249594561, 0.7731871186964251}, 1e-10, 1e-12);
    // tf.linalg.lstsq(kWide, [[1], [2], [3]], l2_regularizer=0.1)
    check_values(
        tf::linalg::lstsq(wide, make({1, 2, 3}, {3, 1}), 0.1),
        {0.6534402080407118, 0.38655550211727885, -0.15426803947153456, -0.059089248250912996},
        1e-10, 1e-12);
    // tf.norm(kTall, ord=2, axis=[-2, -1])
    check_values(tf::norm(tall, 2, {-2, -1}), {17.303763413795934}, 1e-12, 1e-12);
    const tf::Tensor stacked = tf::stack({tall, 2.0 * tall}, 1);  // [4, 2, 3]
    check_values(tf::norm(stacked, 2, {0, 2}, true), {17.303763413795934, 2 * 17.303763413795934},
                 1e-12, 1e-12);
    CHECK(tf::norm(stacked, 2, {0, 2}, true).shape() == tf::TensorShape({1, 2, 1}));
  }
}

TEST_CASE("lstsq with fast=false matches TF's complete orthogonal factorisation",
          "[cpu][cuda][linalg]") {
  // The rank-deficient matrix: its third column is the sum of the first two (rank 2).
  const std::vector<double> rank2 = {1, 2, 3, 4, 5, 9, 7, 8, 15, 1, -1, 0};
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor tall = make(kTall, {4, 3}), wide = make(kWide, {3, 4});
    // tf.linalg.lstsq(kTall, [[1], [2], [3], [4]], fast=False)
    check_values(tf::linalg::lstsq(tall, make({1, 2, 3, 4}, {4, 1}), 0, false),
                 {1.0298478646999798, -1.337632249594564, 0.7731871186964223}, 1e-10, 1e-12);
    // tf.linalg.lstsq(kWide, [[1], [2], [3]], fast=False): the minimum-norm solution
    check_values(
        tf::linalg::lstsq(wide, make({1, 2, 3}, {3, 1}), 0, false),
        {0.7077380492702148, 0.4098385975751018, -0.18140396941848785, -0.07726465364120796}, 1e-10,
        1e-12);
    // tf.linalg.lstsq(rank2, [[1, 0], [2, 1], [3, 0], [4, 1]], fast=False): where the fast
    // path's normal equations are singular, the minimum-norm least-squares solution
    const tf::Tensor rd = make(rank2, {4, 3});
    check_values(tf::linalg::lstsq(rd, make({1, 0, 2, 1, 3, 0, 4, 1}, {4, 2}), 0, false),
                 {1.7506775067750677, 0.39837398373983707, -1.5176151761517613, -0.3577235772357721,
                  0.2330623306233061, 0.040650406504065005},
                 1e-9, 1e-11);
    // tf.linalg.lstsq(rank2^T, [[1], [2], [3]], fast=False)
    check_values(
        tf::linalg::lstsq(mT(rd), make({1, 2, 3}, {3, 1}), 0, false),
        {0.14634146341463414, 0.12195121951219502, 0.09756097560975614, -0.31707317073170727}, 1e-9,
        1e-11);
    // float32 and a batch: each matrix on its own.
    const tf::Tensor batch = tf::stack({tall, 2.0 * tall});
    const tf::Tensor rhs = make({1, 2, 3, 4, 1, 2, 3, 4}, {2, 4, 1});
    const tf::Tensor x32 =
        tf::linalg::lstsq(tf::cast(batch, tf::float32), tf::cast(rhs, tf::float32), 0, false);
    CHECK(x32.dtype() == tf::float32);
    check_values(x32,
                 {1.0298478646999798, -1.337632249594564, 0.7731871186964223,
                  1.0298478646999798 / 2, -1.337632249594564 / 2, 0.7731871186964223 / 2},
                 2e-5, 2e-6);
    // With a regulariser (TF ignores it with fast=False): the regularised solution, which the
    // fast path gives too, also for the rank-deficient matrix.
    for (const tf::Tensor& a : {tall, wide, rd}) {
      const int64_t m = a.shape()[0];
      const tf::Tensor b = make(random_values(static_cast<size_t>(m * 2), -1, 1, 31), {m, 2});
      check_close(tf::linalg::lstsq(a, b, 0.5, false), tf::linalg::lstsq(a, b, 0.5, true), 1e-10,
                  1e-12);
    }
    // Batches, also traced for an open batch (one graph), and no rows at all (the solution of
    // min |x|^2 l2 is 0).
    const tf::Tensor ab = make(random_values(24, -1, 1, 32), {2, 4, 3});
    const tf::Tensor bb = make(random_values(16, -1, 1, 33), {2, 4, 2});
    const tf::Tensor want = tf::linalg::lstsq(ab, bb, 0.5, true);
    check_close(tf::linalg::lstsq(ab, bb, 0.5, false), want, 1e-10, 1e-12);
    auto traced = tf::function(
        [](const tf::Tensor& a, const tf::Tensor& b) {
          return tf::linalg::lstsq(a, b, 0.5, false);
        },
        tf::FunctionOptions{.input_signature = {tf::TensorSpec({tf::None, 4, 3}, tf::float64),
                                                tf::TensorSpec({tf::None, 4, 2}, tf::float64)}});
    check_close(traced(ab, bb), want, 1e-10, 1e-12);
    check_close(
        traced(tf::slice(ab, {0, 0, 0}, {1, -1, -1}), tf::slice(bb, {0, 0, 0}, {1, -1, -1})),
        tf::slice(want, {0, 0, 0}, {1, -1, -1}), 1e-10, 1e-12);
    REQUIRE(traced.tracing_count() == 1);
    check_values(tf::linalg::lstsq(tf::zeros({0, 3}, tf::float64), tf::zeros({0, 2}, tf::float64),
                                   0.5, false),
                 std::vector<double>(6, 0.0));
  }
}

TEST_CASE("pinv and lstsq fast=false gradients hold where singular values tie",
          "[cpu][cuda][linalg]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    // d sum(pinv(a) o w) / da = -pinv(a)^T w pinv(a)^T: at a = 2 I, -w / 4. (TF 2.21 gives only
    // the diagonal, -0.25, -1.25, -2.25: its SVD gradient drops the terms of tied values.)
    const tf::Tensor w = make({1, 2, 3, 4, 5, 6, 7, 8, 9}, {3, 3});
    const tf::Tensor two = 2.0 * tf::eye(3, tf::float64);
    tf::GradientTape tape;
    tape.watch(two);
    const tf::Tensor g = tape.gradient(tf::reduce_sum(tf::linalg::pinv(two) * w), two);
    check_values(g, {-0.25, -0.5, -0.75, -1, -1.25, -1.5, -1.75, -2, -2.25}, 1e-12, 1e-12);
    // The same inside a traced function, with the tape inside it.
    auto traced = tf::function([&](tf::Tensor x) {
      tf::GradientTape t;
      t.watch(x);
      const tf::Tensor y = tf::reduce_sum(tf::linalg::lstsq(x, w, 0, false));
      return t.gradient(y, x);
    });
    tf::GradientTape eager;
    eager.watch(two);
    const tf::Tensor want =
        eager.gradient(tf::reduce_sum(tf::linalg::lstsq(two, w, 0, false)), two);
    check_close(traced(two), want, 1e-12, 1e-12);
    check_close(traced(two), want, 1e-12, 1e-12);  // the replay
    // A rotation (all singular values 1), a tall matrix with orthogonal columns of equal norm,
    // and generic ones, through pinv and through lstsq(fast=false) in both arguments.
    const double c = std::cos(0.3), sn = std::sin(0.3);
    const std::vector<std::pair<std::vector<double>, tf::TensorShape>> cases = {
        {{c, -sn, 0, sn, c, 0, 0, 0, 1}, {3, 3}},
        {{1, 0, 0, 1, 0, 0}, {3, 2}},
        {random_values(12, -1, 1, 32), {4, 3}},
        {random_values(12, -1, 1, 33), {3, 4}},
        {random_values(18, -1, 1, 34), {2, 3, 3}}};
    for (const auto& [x0, shape] : cases) {
      INFO("shape " << shape.to_string());
      const int64_t m = shape[shape.rank() - 2];
      const tf::Tensor wp = weights(mT(make(x0, shape)).shape(), 35);
      check_gradient([&](const tf::Tensor& x) { return tf::reduce_sum(tf::linalg::pinv(x) * wp); },
                     x0, shape, 1e-6);
      std::vector<int64_t> bshape = shape.dims();
      bshape.back() = 2;
      bshape[bshape.size() - 2] = m;
      const tf::Tensor b = weights(tf::TensorShape(bshape), 36);
      const tf::Tensor wx = weights(tf::matmul(make(x0, shape), b, true, false).shape(), 37);
      check_gradient(
          [&](const tf::Tensor& x) {
            return tf::reduce_sum(tf::linalg::lstsq(x, b, 0, false) * wx);
          },
          x0, shape, 1e-6);
      check_gradient(
          [&](const tf::Tensor& x) {
            return tf::reduce_sum(tf::linalg::lstsq(x, b, 0.3, false) * wx);
          },
          x0, shape, 1e-6);
      const tf::Tensor a = make(x0, shape);
      check_gradient(
          [&](const tf::Tensor& bb) {
            return tf::reduce_sum(tf::linalg::lstsq(a, bb, 0, false) * wx);
          },
          b.numpy<double>(), b.shape(), 1e-6);
    }
    // Second order: the gradient's own gradient (a tape inside the loss).
    const auto x0 = random_values(12, -1, 1, 38);
    const tf::Tensor w1 = weights({3, 4}, 39), w2 = weights({4, 3}, 40);
    check_gradient(
        [&](const tf::Tensor& x) {
          tf::GradientTape inner;
          inner.watch(x);
          const tf::Tensor gx = inner.gradient(tf::reduce_sum(tf::linalg::pinv(x) * w1), x);
          return tf::reduce_sum(gx * w2);
        },
        x0, {4, 3}, 1e-5);
  }
}

TEST_CASE("cholesky logdet and cholesky_solve gradients match finite differences",
          "[cpu][cuda][linalg]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const auto x0 = random_values(2 * 3 * 3, -1, 1, 5);
    const tf::Tensor w = weights({2, 3, 3}, 6);
    check_gradient(
        [&](const tf::Tensor& x) { return tf::reduce_sum(tf::linalg::cholesky(spd_of(x)) * w); },
        x0, {2, 3, 3});
    check_gradient(
        [&](const tf::Tensor& x) { return tf::reduce_sum(tf::linalg::logdet(spd_of(x))); }, x0,
        {2, 3, 3});
    const tf::Tensor rhs = weights({2, 3, 2}, 7);
    check_gradient(
        [&](const tf::Tensor& x) {
          const tf::Tensor l = tf::linalg::cholesky(spd_of(x));
          // Two consumers of the factor.
          return tf::reduce_sum(tf::linalg::cholesky_solve(l, rhs) * rhs) +
                 tf::reduce_sum(l * l * w);
        },
        x0, {2, 3, 3});
  }
}

TEST_CASE("eigh and eigvalsh gradients match finite differences", "[cpu][cuda][linalg]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const auto x0 = random_values(2 * 4 * 4, -1, 1, 8);
    const tf::Tensor we = weights({2, 4}, 9), wv = weights({2, 4, 4}, 10);
    auto sym = [](const tf::Tensor& x) { return x + mT(x); };
    // Both outputs; V o V does not depend on the eigenvectors' signs.
    check_gradient(
        [&](const tf::Tensor& x) {
          const auto d = tf::linalg::eigh(sym(x));
          return tf::reduce_sum(d.eigenvalues * we) +
                 tf::reduce_sum(d.eigenvectors * d.eigenvectors * wv);
        },
        x0, {2, 4, 4});
    // Only the eigenvectors (the eigenvalues' cotangent is undefined).
    check_gradient(
        [&](const tf::Tensor& x) {
          const auto d = tf::linalg::eigh(sym(x));
          return tf::reduce_sum(tf::square(d.eigenvectors * d.eigenvectors) * wv);
        },
        x0, {2, 4, 4});
    check_gradient(
        [&](const tf::Tensor& x) {
          return tf::reduce_sum(tf::square(tf::linalg::eigvalsh(sym(x))) * we);
        },
        x0, {2, 4, 4});
    // The input's upper triangle is not read: its gradient is zero.
    const tf::Tensor a = make(kSym, {3, 3});
    tf::GradientTape tape;
    tape.watch(a);
    const tf::Tensor g =
        tape.gradient(tf::reduce_sum(tf::linalg::eigvalsh(a) * make({1, 2, 3}, {3})), a);
    const auto gv = tf::detail::to_double_vector(g);
    CHECK(gv[1] == 0);
    CHECK(gv[2] == 0);
    CHECK(gv[5] == 0);
    // Equal eigenvalues: TF's safe reciprocal keeps the gradient finite (d trace / da = I).
    const tf::Tensor twice_eye = 2.0 * tf::eye(3, tf::float64);
    tf::GradientTape tape2;
    tape2.watch(twice_eye);
    const auto d = tf::linalg::eigh(twice_eye);
    const tf::Tensor loss =
        tf::reduce_sum(d.eigenvalues) + 0.0 * tf::reduce_sum(d.eigenvectors * d.eigenvectors);
    check_values(tape2.gradient(loss, twice_eye), {1, 0, 0, 0, 1, 0, 0, 0, 1}, 1e-12, 1e-12);
  }
}

TEST_CASE("qr gradients match finite differences", "[cpu][cuda][linalg]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    for (const tf::TensorShape& shape :
         {tf::TensorShape{4, 3}, tf::TensorShape{3, 3}, tf::TensorShape{2, 3, 5}}) {
      INFO("shape " << shape.to_string());
      const auto x0 = random_values(static_cast<size_t>(shape.num_elements()), -1, 1, 11);
      for (bool full : {false, true}) {
        if (full && shape[shape.rank() - 2] > shape[shape.rank() - 1]) continue;
        const auto ref = tf::linalg::qr(make(x0, shape), full);
        const tf::Tensor wq = weights(ref.q.shape(), 12), wr = weights(ref.r.shape(), 13);
        check_gradient(
            [&](const tf::Tensor& x) {
              const auto d = tf::linalg::qr(x, full);
              return tf::reduce_sum(d.q * wq) + tf::reduce_sum(d.r * wr) +
                     tf::reduce_sum(d.q * d.q * d.q * wq);
            },
            x0, shape);
      }
    }
    // Tall with full_matrices has no gradient, as TF.
    const tf::Tensor a = make(kTall, {4, 3});
    tf::GradientTape tape;
    tape.watch(a);
    const auto d = tf::linalg::qr(a, true);
    TF_REQUIRE_THROWS_CONTAINING(tape.gradient(tf::reduce_sum(d.q) + tf::reduce_sum(d.r), a),
                                 tf::UnimplementedError, "(4, 3)");
  }
}

TEST_CASE("svd pinv and spectral norm gradients match finite differences", "[cpu][cuda][linalg]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    for (const tf::TensorShape& shape : {tf::TensorShape{4, 3}, tf::TensorShape{3, 4},
                                         tf::TensorShape{3, 3}, tf::TensorShape{2, 3, 5}}) {
      INFO("shape " << shape.to_string());
      const auto x0 = random_values(static_cast<size_t>(shape.num_elements()), -1, 1, 14);
      const int64_t m = shape[shape.rank() - 2], n = shape[shape.rank() - 1];
      for (bool full : {false, true}) {
        if (full && std::abs(m - n) > 1) continue;
        INFO("full_matrices " << full);
        const auto ref = tf::linalg::svd(make(x0, shape), full);
        const tf::Tensor ws = weights(ref.s.shape(), 15), wu = weights(ref.u.shape(), 16);
        const tf::Tensor wv = weights(ref.v.shape(), 17);
        // Sign-invariant: s, u o u, v o v, and u diag(w) v^T over the first k columns.
        check_gradient(
            [&](const tf::Tensor& x) {
              const auto d = tf::linalg::svd(x, full);
              const int64_t k = d.s.shape()[d.s.rank() - 1];
              std::vector<int64_t> b(x.rank(), 0), su(x.rank(), -1);
              su[x.rank() - 1] = k;
              const tf::Tensor uk = tf::slice(d.u, b, su), vk = tf::slice(d.v, b, su);
              return tf::reduce_sum(d.s * ws) + tf::reduce_sum(d.u * d.u * wu) +
                     tf::reduce_sum(d.v * d.v * wv) +
                     tf::reduce_sum(tf::matmul(uk * tf::expand_dims(ws, -2), vk, false, true));
            },
            x0, shape);
      }
      check_gradient(
          [&](const tf::Tensor& x) {
            return tf::reduce_sum(tf::square(tf::linalg::svd(x, false, false).s));
          },
          x0, shape);
      const tf::Tensor wp = weights(mT(make(x0, shape)).shape(), 18);
      check_gradient([&](const tf::Tensor& x) { return tf::reduce_sum(tf::linalg::pinv(x) * wp); },
                     x0, shape, 1e-5);
    }
    check_gradient(
        [&](const tf::Tensor& x) {
          return tf::norm(x, 2, {-2, -1});
        },
        random_values(12, -1, 1, 19), {4, 3});
    // full_matrices with |m - n| > 1 has no gradient through u and v, as TF.
    const tf::Tensor a = make(random_values(10, -1, 1, 24), {5, 2});
    tf::GradientTape tape;
    tape.watch(a);
    const auto d = tf::linalg::svd(a, true);
    TF_REQUIRE_THROWS_CONTAINING(tape.gradient(tf::reduce_sum(d.u * d.u), a),
                                 tf::UnimplementedError, "(5, 2)");
  }
}

TEST_CASE("lstsq gradients match finite differences", "[cpu][cuda][linalg]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor b = weights({4, 2}, 20), w = weights({3, 2}, 21);
    check_gradient(
        [&](const tf::Tensor& x) { return tf::reduce_sum(tf::linalg::lstsq(x, b, 0.01) * w); },
        random_values(12, -1, 1, 22), {4, 3}, 1e-5);
  }
}

TEST_CASE("traced decompositions equal eager ones", "[cpu][cuda][linalg]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    auto f = tf::function([](const tf::Tensor& x) {
      const auto d = tf::linalg::svd(x);
      const auto q = tf::linalg::qr(x);
      const tf::Tensor spd = tf::matmul(x, x, true, false) + 1.0;
      return tf::reduce_sum(d.s) + tf::reduce_sum(q.r * q.r) +
             tf::reduce_sum(tf::linalg::cholesky(spd)) + tf::reduce_sum(tf::linalg::eigvalsh(spd));
    });
    const tf::Tensor x = make(kTall, {4, 3});
    const auto d = tf::linalg::svd(x);
    const auto q = tf::linalg::qr(x);
    const tf::Tensor spd = tf::matmul(x, x, true, false) + 1.0;
    const tf::Tensor eager = tf::reduce_sum(d.s) + tf::reduce_sum(q.r * q.r) +
                             tf::reduce_sum(tf::linalg::cholesky(spd)) +
                             tf::reduce_sum(tf::linalg::eigvalsh(spd));
    for (int rep = 0; rep < 2; ++rep) check_close(f(x), eager, 1e-12, 1e-12);
  }
}

TEST_CASE("decompositions of bigger matrices and long batches reconstruct their inputs",
          "[cpu][cuda][linalg]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    // One 120 x 120 matrix (the threaded library) and 40 small ones (spread over the threads).
    for (const tf::TensorShape& shape : {tf::TensorShape{120, 120}, tf::TensorShape{40, 6, 6}}) {
      INFO("shape " << shape.to_string());
      const int64_t n = shape[shape.rank() - 1];
      const tf::Tensor x =
          make(random_values(static_cast<size_t>(shape.num_elements()), -1, 1, 23), shape);
      const tf::Tensor eye = tf::broadcast_to(tf::eye(n, tf::float64), shape);
      const tf::Tensor spd = tf::matmul(x, x, false, true) + static_cast<double>(n) * eye;
      const tf::Tensor l = tf::linalg::cholesky(spd);
      check_close(tf::matmul(l, l, false, true), spd, 1e-10, 1e-10);
      const auto e = tf::linalg::eigh(spd);
      check_close(
          tf::matmul(e.eigenvectors, tf::matmul(diag(e.eigenvalues), e.eigenvectors, false, true)),
          spd, 1e-10, 1e-10);
      const auto q = tf::linalg::qr(x);
      check_close(tf::matmul(q.q, q.r), x, 1e-10, 1e-10);
      const auto s = tf::linalg::svd(x);
      check_close(tf::matmul(s.u, tf::matmul(diag(s.s), s.v, false, true)), x, 1e-10, 1e-10);
      check_close(tf::linalg::logdet(spd), tf::math::log(tf::linalg::det(spd)), 1e-10, 1e-10);
    }
  }
}

TEST_CASE("gradients at unconstrained inputs equal TF's", "[cpu][cuda][linalg]") {
  // TF's own folding of the gradient onto what the op reads (cholesky: symmetric, eigh: the
  // lower triangle), which central differences of a symmetric parametrisation cannot tell.
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor w3 = make({1, 2, 3}, {3});
    const tf::Tensor w = make({0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8}, {3, 3});
    auto grad = [](const std::function<tf::Tensor(const tf::Tensor&)>& f, const tf::Tensor& x) {
      tf::GradientTape tape;
      tape.watch(x);
      return tape.gradient(f(x), x);
    };
    const tf::Tensor a = make(kSpd, {3, 3}), s = make(kSym, {3, 3}), m = make(kTall, {4, 3});
    // tape.gradient(reduce_sum(tf.linalg.cholesky(a) * w), a)
    check_values(
        grad([&](const tf::Tensor& x) { return tf::reduce_sum(tf::linalg::cholesky(x) * w); }, a),
        {-0.01547038633088206, 0.01668291827353021, 0.047526181294113026, 0.01668291827353021,
         0.07671217116588462, 0.13307330762351638, 0.047526181294113026, 0.13307330762351638,
         0.23958109929419194},
        1e-10, 1e-12);
    // tape.gradient(reduce_sum(tf.linalg.eigvalsh(s) * [1, 2, 3]), s)
    check_values(
        grad([&](const tf::Tensor& x) { return tf::reduce_sum(tf::linalg::eigvalsh(x) * w3); }, s),
        {1.4226497308103738, 0.0, 0.0, 1.1547005383792512, 1.9999999999999996, 0.0, 0.0,
         1.1547005383792515, 2.5773502691896266},
        1e-10, 1e-12);
    // tape.gradient(reduce_sum(tf.linalg.svd(m, compute_uv=False) * [1, 2, 3]), m)
    check_values(
        grad(
            [&](const tf::Tensor& x) {
              return tf::reduce_sum(tf::linalg::svd(x, false, false).s * w3);
            },
            m),
        {-1.9842310160689909, 0.45693071652720285, 1.3138692095108775, -0.6148001475822468,
         0.26197540564849703, 0.992909572155336, 1.3880464626487425, 0.5598065175301301,
         -0.22951421137093792, 0.9855639743450402, -1.6531097737120444, 0.8357440865015369},
        1e-10, 1e-12);
    // tape.gradient(tf.linalg.logdet(a), a)
    check_values(grad([](const tf::Tensor& x) { return tf::linalg::logdet(x); }, a),
                 {0.31390134529147984, -0.1210762331838565, -0.022421524663677132,
                  -0.1210762331838565, 0.2609865470852018, -0.06278026905829596,
                  -0.022421524663677132, -0.06278026905829596, 0.3587443946188341},
                 1e-10, 1e-12);
  }
}

TEST_CASE("svd of a matrix with a NaN or an infinity is NaN, as TF's", "[cpu][linalg]") {
  // LAPACK's gesdd refuses a NaN (argument 4 invalid) and need not converge on an infinity; TF's
  // kernel returns NaNs, and so does tapeflow's CPU kernel, per matrix of a batch. (The CUDA
  // kernel's result for such input is cuSOLVER's and not checked yet.)
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  for (tf::DType d : {tf::float32, tf::float64}) {
    const tf::Tensor a =
        tf::cast(tf::constant(std::vector<double>{1, 2, 3, 4, 1, nan, 0, 1, inf, 2, 3, 1},
                              tf::TensorShape{3, 2, 2}),
                 d);
    const auto r = tf::linalg::svd(a);
    const auto s = r.s.numpy<double>(), u = r.u.numpy<double>(), v = r.v.numpy<double>();
    // The first matrix is finite: its singular values are those of [[1, 2], [3, 4]].
    CHECK(s[0] == Catch::Detail::Approx(5.464985704219043).epsilon(1e-6));
    CHECK(s[1] == Catch::Detail::Approx(0.365966190626258).epsilon(1e-5));
    for (int b = 1; b < 3; ++b) {
      INFO("matrix " << b);
      for (int i = 0; i < 2; ++i) CHECK(std::isnan(s[static_cast<size_t>(b * 2 + i)]));
      for (int i = 0; i < 4; ++i) {
        CHECK(std::isnan(u[static_cast<size_t>(b * 4 + i)]));
        CHECK(std::isnan(v[static_cast<size_t>(b * 4 + i)]));
      }
    }
    // Through pinv too (no LAPACK error).
    CHECK(std::isnan(tf::linalg::pinv(a).numpy<double>()[4]));
  }
}
