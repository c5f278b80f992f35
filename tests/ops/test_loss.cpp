// The loss family (ops/loss.h): Softmax, LogSoftmax and SparseSoftmaxCrossEntropy against
// float64 reference loops, for every float dtype on every device of devices_under_test(), rows
// of one class, of a few classes and of 5000 (the CUDA multi-warp path), rank 2 and 3, extreme
// logits (+-1e4, -inf entries), both outputs of the fused loss, first and second order gradients
// against finite differences, traced replay, and every error path.
#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "autograd/tape.h"
#include "core/error.h"
#include "jit/function.h"
#include "ops/binary.h"
#include "ops/dispatch.h"
#include "ops/factory.h"
#include "ops/loss.h"
#include "ops/movement.h"
#include "ops/nn.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
using tf::testing::check_values;

namespace {

const std::vector<tf::DType> kFloatTypes = {tf::float16, tf::bfloat16, tf::float32, tf::float64};

std::vector<double> values(const tf::Tensor& t) {
  return tf::detail::to_double_vector(t);
}

double tol_of(tf::DType d) {
  return d == tf::float64 ? 1e-12 : tf::testing::rtol_of(d) * 2;
}

struct Ref {
  std::vector<double> softmax, log_softmax, loss, backprop;
};

// Plain float64 loops over rows of C (x holds the values as rounded to the tested dtype).
Ref reference(const std::vector<double>& x, int64_t C, const std::vector<int64_t>& labels) {
  Ref r;
  const int64_t rows = static_cast<int64_t>(x.size()) / C;
  for (int64_t i = 0; i < rows; ++i) {
    double m = -INFINITY, s = 0;
    for (int64_t j = 0; j < C; ++j) m = std::max(m, x[i * C + j]);
    for (int64_t j = 0; j < C; ++j) s += std::exp(x[i * C + j] - m);
    for (int64_t j = 0; j < C; ++j) {
      r.softmax.push_back(std::exp(x[i * C + j] - m) / s);
      r.log_softmax.push_back(x[i * C + j] - m - std::log(s));
    }
    if (!labels.empty()) {
      const int64_t l = labels[i];
      r.loss.push_back(std::log(s) - (x[i * C + l] - m));
      for (int64_t j = 0; j < C; ++j)
        r.backprop.push_back(std::exp(x[i * C + j] - m) / s - (j == l ? 1.0 : 0.0));
    }
  }
  return r;
}

struct Shape {
  std::vector<int64_t> dims;  // logits; labels drop the last
};

void check_all(const tf::Device& dev, tf::DType dt, const tf::TensorShape& shape,
               const std::vector<double>& xv, const std::vector<int64_t>& lv) {
  INFO("device " << dev.to_string() << ", dtype " << tf::dtype_name(dt) << ", shape "
                 << shape.to_string());
  tf::DeviceScope scope(dev);
  const int64_t C = shape.dim(-1);
  const tf::Tensor x = tf::detail::from_doubles(xv, shape, dt);
  const Ref r = reference(values(x), C, lv);
  const double tol = tol_of(dt);

  const tf::Tensor sm = tf::nn::softmax(x);
  CHECK(sm.dtype() == dt);
  CHECK(sm.placement() == dev);
  check_values(sm, r.softmax, tol, tol);
  // log-probabilities reach -2e4: the absolute error scales with them.
  check_values(tf::nn::log_softmax(x), r.log_softmax, tol, tol);

  std::vector<int64_t> ldims;
  for (int d = 0; d + 1 < shape.rank(); ++d) ldims.push_back(shape[d]);
  for (tf::DType ldt : {tf::int32, tf::int64}) {
    INFO("labels " << tf::dtype_name(ldt));
    const tf::Tensor labels =
        tf::cast(tf::detail::from_doubles(std::vector<double>(lv.begin(), lv.end()),
                                          tf::TensorShape(ldims), tf::int64),
                 ldt);
    const tf::Tensor loss = tf::nn::sparse_softmax_cross_entropy_with_logits(labels, x);
    CHECK(loss.dtype() == dt);
    CHECK(loss.shape() == tf::TensorShape(ldims));
    CHECK(loss.placement() == dev);
    check_values(loss, r.loss, tol, tol);
    // Both outputs of the primitive, as TF's kernel.
    const std::array<tf::Tensor, 2> in{labels, x};
    const auto outs = tf::detail::dispatch_multi(tf::prims::SparseSoftmaxCrossEntropy{}, in);
    REQUIRE(outs.size() == 2);
    check_values(outs[0], r.loss, tol, tol);
    CHECK(outs[1].shape() == shape);
    check_values(outs[1], r.backprop, tol, tol);
  }
}

}  // namespace

TEST_CASE("loss: softmax - log_softmax and the fused cross-entropy match float64 loops",
          "[cpu][cuda][loss]") {
  struct Case {
    std::vector<int64_t> dims;
    double lo, hi;
  };
  const std::vector<Case> cases = {
      {{4, 10}, -5, 5},
      {{2, 3, 7}, -5, 5},
      {{5, 1}, -3, 3},
      {{3, 5000}, -8, 8},
      {{2, 33}, -5, 5},
      {{1, 1025}, -4, 4},
      {{0, 6}, -1, 1},
      {{7}, -2, 2},
      // CPU: several blocks of short rows, the last short width, the first long one, and
      // enough rows to split over threads.
      {{1000, 10}, -6, 6},
      {{70, 127}, -3, 3},
      {{3, 128}, -3, 3},
  };
  for (const tf::Device& dev : tf::testing::devices_under_test())
    for (tf::DType dt : kFloatTypes)
      for (const Case& c : cases) {
        const tf::TensorShape shape(c.dims);
        const int64_t C = c.dims.back();
        const auto xv =
            tf::testing::random_values(static_cast<size_t>(shape.num_elements()), c.lo, c.hi, 7);
        std::vector<int64_t> lv;
        for (int64_t i = 0; i < shape.num_elements() / C; ++i) lv.push_back((i * 7 + 3) % C);
        check_all(dev, dt, shape, xv, lv);
      }
}

TEST_CASE("loss: extreme logits (+-1e4 and -inf entries) stay finite where TF's do",
          "[cpu][cuda][loss]") {
  const double inf = std::numeric_limits<double>::infinity();
  // Rows of 4: huge spread; -inf away from the label; one +1e4 winner; all equal.
  const std::vector<double> xv = {1e4,  -1e4, 0,    5e3,  // row 0
                                  -inf, 2,    -inf, 1,    // row 1
                                  -1e4, -1e4, -1e4, 1e4,  // row 2
                                  3,    3,    3,    3};   // row 3
  const std::vector<int64_t> lv = {1, 3, 3, 2};
  for (const tf::Device& dev : tf::testing::devices_under_test())
    for (tf::DType dt : kFloatTypes) {
      check_all(dev, dt, tf::TensorShape{4, 4}, xv, lv);
      INFO("device " << dev.to_string() << ", dtype " << tf::dtype_name(dt));
      tf::DeviceScope scope(dev);
      const tf::Tensor x = tf::detail::from_doubles(xv, {4, 4}, dt);
      // A label on a -inf logit costs +inf, as -log(0).
      const auto loss = values(tf::nn::sparse_softmax_cross_entropy_with_logits(
          tf::constant(std::vector<int32_t>{0}), tf::slice(x, {1, 0}, {1, 4})));
      CHECK(std::isinf(loss[0]));
      CHECK(loss[0] > 0);
      // -inf entries give probability 0, never NaN.
      const auto p = values(tf::nn::softmax(x));
      for (double v : p) CHECK(std::isfinite(v));
    }
}

TEST_CASE("loss: other axes take the composite and agree with the primitive", "[cpu][cuda][loss]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    const tf::Tensor x =
        tf::detail::from_doubles(tf::testing::random_values(24, -3, 3, 5), {2, 3, 4}, tf::float64);
    const tf::Tensor t = tf::transpose(x, {0, 2, 1});
    tf::testing::check_close(tf::nn::softmax(x, 1),
                             tf::transpose(tf::nn::softmax(t, -1), {0, 2, 1}), 1e-12, 1e-12);
    tf::testing::check_close(tf::nn::log_softmax(x, -2),
                             tf::transpose(tf::nn::log_softmax(t), {0, 2, 1}), 1e-12, 1e-12);
    tf::testing::check_close(tf::nn::softmax(x), tf::detail::softmax_composite(x, 2), 1e-12, 1e-12);
    tf::testing::check_close(tf::nn::log_softmax(x), tf::detail::log_softmax_composite(x, 2), 1e-12,
                             1e-12);
    const tf::Tensor labels =
        tf::constant(std::vector<int64_t>{0, 3, 2, 1, 1, 0}, tf::TensorShape{2, 3});
    tf::testing::check_close(tf::nn::sparse_softmax_cross_entropy_with_logits(labels, x),
                             tf::detail::sparse_softmax_cross_entropy_composite(labels, x), 1e-12,
                             1e-12);
  }
}

namespace {

// d/dx of sum(f(x) * w) by the tape and by central differences, in float64.
void check_gradient(const std::function<tf::Tensor(const tf::Tensor&)>& f,
                    const tf::TensorShape& shape, double lo, double hi) {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const auto xv =
        tf::testing::random_values(static_cast<size_t>(shape.num_elements()), lo, hi, 3);
    const tf::Tensor x = tf::detail::from_doubles(xv, shape, tf::float64);
    const tf::Tensor y0 = f(x);
    const auto wv = tf::testing::random_values(static_cast<size_t>(y0.num_elements()), -1, 1, 9);
    const tf::Tensor w = tf::detail::from_doubles(wv, y0.shape(), tf::float64);
    tf::GradientTape tape;
    tape.watch(x);
    const tf::Tensor g = tape.gradient(tf::reduce_sum(f(x) * w), x);
    REQUIRE(g.defined());
    const std::vector<double> want = tf::testing::central_differences(
        [&](const std::vector<double>& v) {
          const auto y = values(f(tf::detail::from_doubles(v, shape, tf::float64)));
          double s = 0;
          for (size_t k = 0; k < y.size(); ++k) s += y[k] * wv[k];
          return s;
        },
        xv, 1e-6);
    check_values(g, want, 1e-6, 1e-7);
  }
}

// The Hessian-vector product H v of sum(f(x) * w) through nested tapes, against central
// differences of the first-order gradient (itself checked above).
void check_second_order(const std::function<tf::Tensor(const tf::Tensor&)>& f,
                        const tf::TensorShape& shape) {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const auto xv = tf::testing::random_values(static_cast<size_t>(shape.num_elements()), -2, 2, 4);
    const auto vv = tf::testing::random_values(xv.size(), -1, 1, 6);
    const tf::Tensor v = tf::detail::from_doubles(vv, shape, tf::float64);
    auto first = [&](const std::vector<double>& at) {
      const tf::Tensor x = tf::detail::from_doubles(at, shape, tf::float64);
      tf::GradientTape t;
      t.watch(x);
      return values(t.gradient(tf::reduce_sum(f(x)), x));
    };
    const tf::Tensor x = tf::detail::from_doubles(xv, shape, tf::float64);
    tf::GradientTape outer;
    outer.watch(x);
    tf::Tensor g;
    {
      tf::GradientTape inner;
      inner.watch(x);
      g = inner.gradient(tf::reduce_sum(f(x)), x);
    }
    const tf::Tensor hv = outer.gradient(tf::reduce_sum(g * v), x);
    REQUIRE(hv.defined());
    std::vector<double> want(xv.size(), 0.0);
    const double h = 1e-5;
    auto p = xv, m = xv;
    for (size_t i = 0; i < xv.size(); ++i) {
      p[i] += h * vv[i];
      m[i] -= h * vv[i];
    }
    const auto gp = first(p), gm = first(m);
    for (size_t i = 0; i < xv.size(); ++i) want[i] = (gp[i] - gm[i]) / (2 * h);
    check_values(hv, want, 1e-5, 1e-7);
  }
}

}  // namespace

TEST_CASE("loss: gradients against central differences", "[cpu][cuda][loss][autograd]") {
  const tf::TensorShape s{3, 5}, s3{2, 2, 4};
  SECTION("softmax") {
    check_gradient([](const tf::Tensor& x) { return tf::nn::softmax(x); }, s, -2, 2);
  }
  SECTION("log_softmax") {
    check_gradient([](const tf::Tensor& x) { return tf::nn::log_softmax(x); }, s3, -2, 2);
  }
  SECTION("sparse_softmax_cross_entropy") {
    check_gradient(
        [](const tf::Tensor& x) {
          return tf::nn::sparse_softmax_cross_entropy_with_logits(
              tf::constant(std::vector<int64_t>{4, 0, 2}), x);
        },
        s, -2, 2);
    check_gradient(
        [](const tf::Tensor& x) {
          return tf::nn::sparse_softmax_cross_entropy_with_logits(
              tf::constant(std::vector<int32_t>{3, 0, 1, 1}, tf::TensorShape{2, 2}), x);
        },
        s3, -2, 2);
  }
}

TEST_CASE("loss: second order through nested tapes (TF raises for the fused op)",
          "[cpu][cuda][loss][autograd]") {
  const tf::TensorShape s{3, 4};
  SECTION("softmax") {
    check_second_order([](const tf::Tensor& x) { return tf::nn::softmax(x) * x; }, s);
  }
  SECTION("log_softmax") {
    check_second_order([](const tf::Tensor& x) { return tf::square(tf::nn::log_softmax(x)); }, s);
  }
  SECTION("sparse_softmax_cross_entropy") {
    check_second_order(
        [](const tf::Tensor& x) {
          return tf::nn::sparse_softmax_cross_entropy_with_logits(
              tf::constant(std::vector<int32_t>{1, 3, 0}), x);
        },
        s);
    // The loss squared: the inner vjp's loss cotangent depends on x as well.
    check_second_order(
        [](const tf::Tensor& x) {
          return tf::square(tf::nn::sparse_softmax_cross_entropy_with_logits(
              tf::constant(std::vector<int32_t>{2, 2, 1}), x));
        },
        s);
  }
}

TEST_CASE("loss: third order of the fused cross-entropy through three tapes",
          "[cpu][loss][autograd]") {
  // f(x) = xent(label 0, [x, 0]) = log(1 + e^x) - x: f''' = s(1-s)(1-2s) with s = sigmoid(x).
  const double xv = 0.4;
  const tf::Tensor x = tf::constant(tf::Tensor(xv), tf::float64);
  tf::GradientTape t3;
  t3.watch(x);
  tf::GradientTape t2;
  t2.watch(x);
  tf::Tensor g1, g2;
  {
    tf::GradientTape t1;
    t1.watch(x);
    const tf::Tensor logits = tf::stack({x, tf::zeros(tf::TensorShape{}, tf::float64)});
    const tf::Tensor loss =
        tf::nn::sparse_softmax_cross_entropy_with_logits(tf::constant(tf::Tensor(0)), logits);
    g1 = t1.gradient(loss, x);
  }
  g2 = t2.gradient(g1, x);
  const tf::Tensor g3 = t3.gradient(g2, x);
  const double s = 1 / (1 + std::exp(-xv));
  check_values(g1, {s - 1}, 1e-12, 1e-12);
  check_values(g2, {s * (1 - s)}, 1e-12, 1e-12);
  REQUIRE(g3.defined());
  check_values(g3, {s * (1 - s) * (1 - 2 * s)}, 1e-12, 1e-12);
}

TEST_CASE("loss: a traced train step runs the primitives and checks labels at every call",
          "[cpu][loss][jit]") {
  auto step = tf::function([](const tf::Tensor& labels, const tf::Tensor& x) {
    tf::GradientTape tape;
    tape.watch(x);
    const tf::Tensor loss =
        tf::reduce_mean(tf::nn::sparse_softmax_cross_entropy_with_logits(labels, x));
    return std::vector<tf::Tensor>{loss, tape.gradient(loss, x)};
  });
  const auto xv = tf::testing::random_values(12, -2, 2, 8);
  const tf::Tensor x = tf::detail::from_doubles(xv, {3, 4}, tf::float64);
  const std::vector<int64_t> lv = {1, 0, 3};
  const Ref r = reference(values(x), 4, lv);
  for (int call = 0; call < 2; ++call) {
    const auto out = step(tf::constant(std::vector<int32_t>{1, 0, 3}), x);
    check_values(out[0], {(r.loss[0] + r.loss[1] + r.loss[2]) / 3}, 1e-12, 1e-12);
    std::vector<double> g = r.backprop;
    for (double& v : g) v /= 3;
    check_values(out[1], g, 1e-12, 1e-12);
  }
  // The replay checks the labels too (the composite's host check could not see traced labels).
  TF_REQUIRE_THROWS_CONTAINING(
      step(tf::constant(std::vector<int32_t>{1, 4, 3}), x), tf::InvalidArgumentError,
      "[sparse_softmax_cross_entropy_with_logits] Received a label value of 4 which is outside "
      "the valid range of [0, 4)");
}

TEST_CASE("loss: a traced first-order gradient differentiates again under a tape",
          "[cpu][loss][jit][autograd]") {
  auto grad_fn = tf::function([](const tf::Tensor& labels, const tf::Tensor& x) {
    tf::GradientTape tape;
    tape.watch(x);
    return tape.gradient(
        tf::reduce_sum(tf::nn::sparse_softmax_cross_entropy_with_logits(labels, x)), x);
  });
  const tf::Tensor labels = tf::constant(std::vector<int32_t>{1, 0});
  const tf::Tensor x =
      tf::detail::from_doubles(tf::testing::random_values(6, -1, 1, 2), {2, 3}, tf::float64);
  const Ref r = reference(values(x), 3, {1, 0});
  check_values(grad_fn(labels, x), r.backprop, 1e-12, 1e-12);
  // The same second-order gradient eagerly, through nested tapes.
  tf::Tensor want;
  {
    tf::GradientTape outer;
    outer.watch(x);
    tf::GradientTape inner;
    inner.watch(x);
    const tf::Tensor g = inner.gradient(
        tf::reduce_sum(tf::nn::sparse_softmax_cross_entropy_with_logits(labels, x)), x);
    want = outer.gradient(tf::reduce_sum(g * g), x);
  }
  // d/dx sum((softmax - onehot)^2) = 2 J^T (s - onehot), J = diag(s) - s s^T per row: nonzero.
  double norm = 0;
  for (double v : want.numpy<double>()) norm += std::abs(v);
  CHECK(norm > 0.1);
  tf::GradientTape outer;
  outer.watch(x);
  const tf::Tensor g = grad_fn(labels, x);  // replayed op by op for the outer tape
  check_values(g, r.backprop, 1e-12, 1e-12);
  tf::testing::check_close(outer.gradient(tf::reduce_sum(g * g), x), want, 1e-12, 1e-12);
}

TEST_CASE("loss: error messages", "[cpu][cuda][loss]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor x = tf::zeros({2, 4});
    const char* sce = "[sparse_softmax_cross_entropy_with_logits] ";
    TF_REQUIRE_THROWS_CONTAINING(
        tf::nn::sparse_softmax_cross_entropy_with_logits(tf::constant({1, 4}), x),
        tf::InvalidArgumentError,
        std::string(sce) +
            "Received a label value of 4 which is outside the valid range of [0, 4)");
    TF_REQUIRE_THROWS_CONTAINING(
        tf::nn::sparse_softmax_cross_entropy_with_logits(tf::constant(std::vector<int64_t>{-3, 0}),
                                                         x),
        tf::InvalidArgumentError,
        std::string(sce) +
            "Received a label value of -3 which is outside the valid range of [0, 4)");
    // Half logits and a bad label in the last row of many (the CUDA block path).
    std::vector<int32_t> many(300, 1);
    many.back() = 5000;
    TF_REQUIRE_THROWS_CONTAINING(
        tf::nn::sparse_softmax_cross_entropy_with_logits(tf::constant(many),
                                                         tf::zeros({300, 5000}, tf::float16)),
        tf::InvalidArgumentError,
        std::string(sce) +
            "Received a label value of 5000 which is outside the valid range of [0, 5000)");
    // No class at all: every label is out of range.
    TF_REQUIRE_THROWS_CONTAINING(
        tf::nn::sparse_softmax_cross_entropy_with_logits(tf::constant({0}), tf::zeros({1, 0})),
        tf::InvalidArgumentError, "outside the valid range of [0, 0)");
    TF_REQUIRE_THROWS_CONTAINING(
        tf::nn::sparse_softmax_cross_entropy_with_logits(tf::constant({1.f, 2.f}), x),
        tf::InvalidArgumentError,
        std::string(sce) + "labels must be int32 or int64 class indices, got float32");
    TF_REQUIRE_THROWS_CONTAINING(
        tf::nn::sparse_softmax_cross_entropy_with_logits(tf::constant({1, 2, 3}), x),
        tf::InvalidArgumentError,
        std::string(sce) +
            "labels must have the shape of logits without its last dimension: labels are (3,), "
            "logits (2, 4)");
    TF_REQUIRE_THROWS_CONTAINING(tf::nn::sparse_softmax_cross_entropy_with_logits(
                                     tf::constant({1, 2}), tf::zeros({2, 4}, tf::int32)),
                                 tf::InvalidArgumentError,
                                 std::string(sce) + "expects a floating-point tensor");
    TF_REQUIRE_THROWS_CONTAINING(tf::nn::softmax(tf::zeros({2}, tf::int32)),
                                 tf::InvalidArgumentError,
                                 "[softmax] expects a floating-point tensor");
    TF_REQUIRE_THROWS_CONTAINING(tf::nn::log_softmax(x, 2), tf::InvalidArgumentError,
                                 "[log_softmax] axis 2 is out of range for a tensor of rank 2");
    // The primitive's own checks (for callers that dispatch it directly).
    TF_REQUIRE_THROWS_CONTAINING(
        tf::detail::dispatch(tf::prims::Softmax{}, {tf::constant(tf::Tensor(1.0f))}),
        tf::InvalidArgumentError, "[softmax] expects a tensor of rank at least 1, got shape ()");
    TF_REQUIRE_THROWS_CONTAINING(
        tf::detail::dispatch(tf::prims::LogSoftmax{}, {tf::zeros({3}, tf::int64)}),
        tf::InvalidArgumentError, "[log_softmax] expects a floating-point tensor");
  }
}
