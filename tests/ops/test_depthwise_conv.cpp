// tf::nn::depthwise_conv2d, separable_conv2d and grouped_conv2d: values against TF 2.21 literals
// and against a float64 reference loop (strides, SAME / VALID / explicit padding, dilations,
// channel multipliers) on every device of devices_under_test(); gradients against TF and against
// central differences in float64, second order through nested tapes; traced equals eager; the
// errors.
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "autograd/tape.h"
#include "core/device.h"
#include "core/error.h"
#include "core/tensor.h"
#include "jit/function.h"
#include "ops/binary.h"
#include "ops/depthwise.h"
#include "ops/factory.h"
#include "ops/movement.h"
#include "ops/nn.h"
#include "ops/reduce.h"
#include "support/testing.h"

namespace tf = tapeflow;
using tf::testing::central_differences;
using tf::testing::check_values;
using tf::testing::random_values;
using tf::testing::require_error;

namespace {

// The inputs the TF literals were computed on: element i of a tensor is
// (((i * a + b) mod m) - off) / den, i.e. numpy's ((arange(n) * a + b) % m - off) / den.
std::vector<double> pattern(int64_t n, int a, int b, int m, double den, int off) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = (((i * a + b) % m) - off) / den;
  return v;
}
tf::Tensor pat_x(const tf::TensorShape& s, tf::DType d) {
  return tf::detail::from_doubles(pattern(s.num_elements(), 7, 3, 11, 4.0, 5), s, d);
}
tf::Tensor pat_f(const tf::TensorShape& s, tf::DType d) {
  return tf::detail::from_doubles(pattern(s.num_elements(), 5, 1, 13, 8.0, 6), s, d);
}

struct Case {
  std::vector<int64_t> x, f;  // NHWC input, (KH, KW, C, M) filter
  int sh, sw, dh, dw;
  std::string padding;                    // "SAME", "VALID" or "" for explicit pads
  std::vector<std::pair<int, int>> pads;  // {top, bottom}, {left, right}
};

tf::Tensor run(const Case& c, const tf::Tensor& x, const tf::Tensor& f) {
  if (c.padding.empty()) return tf::nn::depthwise_conv2d(x, f, {c.sh, c.sw}, c.pads, {c.dh, c.dw});
  return tf::nn::depthwise_conv2d(x, f, {c.sh, c.sw}, c.padding, {c.dh, c.dw});
}

// The plain definition: y[n, oh, ow, c * M + m] = sum over the window of
// x[n, oh * sh - pt + kh * dh, ow * sw - pl + kw * dw, c] * f[kh, kw, c, m].
struct Ref {
  std::vector<int64_t> out;
  std::vector<double> y;
};
Ref reference(const Case& c, const std::vector<double>& x, const std::vector<double>& f) {
  const int64_t N = c.x[0], H = c.x[1], W = c.x[2], C = c.x[3];
  const int64_t KH = c.f[0], KW = c.f[1], M = c.f[3];
  int64_t pt = 0, pb = 0, pl = 0, pr = 0;
  const int64_t eh = (KH - 1) * c.dh + 1, ew = (KW - 1) * c.dw + 1;
  if (c.padding == "SAME") {
    const int64_t oh = (H + c.sh - 1) / c.sh, ow = (W + c.sw - 1) / c.sw;
    const int64_t th = std::max<int64_t>((oh - 1) * c.sh + eh - H, 0);
    const int64_t tw = std::max<int64_t>((ow - 1) * c.sw + ew - W, 0);
    pt = th / 2, pb = th - pt, pl = tw / 2, pr = tw - pl;
  } else if (c.padding.empty()) {
    pt = c.pads[0].first, pb = c.pads[0].second, pl = c.pads[1].first, pr = c.pads[1].second;
  }
  const int64_t OH = (H + pt + pb - eh) / c.sh + 1, OW = (W + pl + pr - ew) / c.sw + 1;
  Ref r{{N, OH, OW, C * M}, std::vector<double>(static_cast<size_t>(N * OH * OW * C * M), 0.0)};
  for (int64_t n = 0; n < N; ++n)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow)
        for (int64_t ch = 0; ch < C; ++ch)
          for (int64_t m = 0; m < M; ++m) {
            double s = 0;
            for (int64_t kh = 0; kh < KH; ++kh)
              for (int64_t kw = 0; kw < KW; ++kw) {
                const int64_t ih = oh * c.sh - pt + kh * c.dh, iw = ow * c.sw - pl + kw * c.dw;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                s += x[static_cast<size_t>(((n * H + ih) * W + iw) * C + ch)] *
                     f[static_cast<size_t>(((kh * KW + kw) * C + ch) * M + m)];
              }
            r.y[static_cast<size_t>(((n * OH + oh) * OW + ow) * C * M + ch * M + m)] = s;
          }
  return r;
}

std::string describe(const Case& c) {
  std::string p = c.padding;
  if (p.empty())
    p = "[[" + std::to_string(c.pads[0].first) + ", " + std::to_string(c.pads[0].second) + "], [" +
        std::to_string(c.pads[1].first) + ", " + std::to_string(c.pads[1].second) + "]]";
  return tf::TensorShape(c.x).to_string() + " * " + tf::TensorShape(c.f).to_string() + " strides " +
         std::to_string(c.sh) + "x" + std::to_string(c.sw) + " dilations " + std::to_string(c.dh) +
         "x" + std::to_string(c.dw) + " " + p;
}

// The cases of the TF literals below (A to E), then more against the reference loop: unequal
// strides, stride with dilation, channel counts that leave vector tails, a batch of 3, a window
// wider than the stride on both sides.
const std::vector<Case> kCases = {
    {{1, 4, 5, 2}, {3, 3, 2, 2}, 1, 1, 1, 1, "SAME", {}},
    {{1, 5, 6, 3}, {3, 3, 3, 1}, 2, 2, 1, 1, "VALID", {}},
    {{1, 4, 4, 2}, {2, 2, 2, 2}, 1, 1, 2, 2, "SAME", {}},
    {{1, 3, 4, 2}, {2, 3, 2, 1}, 1, 1, 1, 1, "", {{1, 2}, {0, 1}}},
    {{1, 5, 6, 2}, {3, 2, 2, 3}, 2, 2, 1, 1, "SAME", {}},
    {{2, 7, 6, 19}, {3, 3, 19, 1}, 1, 2, 1, 1, "SAME", {}},
    {{3, 6, 7, 5}, {3, 2, 5, 3}, 2, 1, 2, 1, "SAME", {}},
    {{2, 9, 8, 11}, {5, 3, 11, 2}, 2, 2, 1, 2, "VALID", {}},
    {{1, 5, 5, 4}, {3, 3, 4, 1}, 3, 3, 1, 1, "", {{2, 0}, {1, 3}}},
    {{2, 8, 8, 33}, {3, 3, 33, 1}, 2, 2, 1, 1, "SAME", {}},
};

// TF 2.21: tf.nn.depthwise_conv2d(x, f, strides, padding, dilations=...) on float32 x and f
// built by pat_x and pat_f (the shapes of kCases[0..4]).
const std::vector<std::vector<double>> kTfValues = {
    {0.46875,  0.1875,   -1.28125, -0.3125,  0.96875,  -0.78125, 0.4375,   0.8125,   -1.5625,
     1.34375,  0.6875,   -0.78125, 0.71875,  -0.65625, -1.46875, -0.3125,  0.1875,   0.28125,
     1.5,      0.8125,   -0.53125, 0.125,    -0.8125,  0.84375,  -0.8125,  0.15625,  1.1875,
     -1.46875, 1.5,      -1.625,   -1.75,    -0.0625,  0.03125,  0.03125,  -0.21875, 1.34375,
     -0.59375, 1.125,    1,        -2.0625,  -0.5,     0.0625,   -0.03125, 1.4375,   0.4375,
     -0.15625, -0.09375, 0.0625,   0,        -0.21875, -0.28125, 1.46875,  -1.46875, 1.4375,
     1.25,     -1.59375, 1.125,    -1.71875, -2.03125, 0.90625,  0.28125,  0.5625,   1.75,
     -0.28125, 0.875,    0.0625,   0,        0.09375,  -0.78125, 0.3125,   0.8125,   -0.4375,
     1.34375,  -1.84375, -0.78125, -0.625,   -1.15625, 1.21875,  0.65625,  1.125},
    {2.53125, 1.1875, 0.96875, 0.875, 0.75, 0.28125, 2.21875, 0.96875, 0.28125, -1.84375, -0.5,
     0.28125},
    {0.1875,   -0.3125,  0,       -0.3125,  0.59375,  -0.8125,  -0.9375, 0.46875,
     -0.53125, 0.53125,  -0.375,  0.75,     -0.625,   0.15625,  0.1875,  -0.0625,
     0.34375,  -0.65625, 0.09375, -0.53125, 0.09375,  0.03125,  0.03125, 0.09375,
     -0.96875, 1.15625,  -0.75,   1.5,      0,        -0.15625, 0.375,   -0.125,
     0.5,      -1,       0.0625,  -0.25,    -0.03125, -0.28125, -1.375,  1.25,
     -1.09375, 0.84375,  -0.4375, -0.09375, -0.28125, -0.125,   0.71875, -0.28125,
     0.1875,   -0.5625,  0.03125, -0.125,   -0.3125,  0.9375,   -0.6875, 0.625,
     -0.59375, 0.375,    -0.3125, 0.71875,  0.78125,  0,        0.3125,  -0.1875},
    {0.6875,   0.53125,  -1.28125, -0.5625,  0.375,    0.09375,  1.4375,  -0.46875,
     -1.03125, -1.03125, -1.03125, -0.03125, -0.53125, -0.65625, 0.4375,  -1.21875,
     -0.84375, 0.03125,  0.15625,  -0.28125, -1.375,   -1.125,   0.46875, -0.46875,
     0,        0,        0,        0,        0,        0},
    {-0.875,   1.3125,   -0.5625,  1.65625,  -0.90625, -0.21875, 1.3125,   -1.0625,  -0.59375,
     -0.5,     -0.40625, 0.90625,  -0.28125, 0,        1.09375,  0.09375,  0.09375,  -0.71875,
     -1.15625, -0.9375,  2.125,    -0.9375,  2.21875,  -1.125,   -0.78125, 2.25,     -0.8125,
     1.6875,   -1.28125, 0.21875,  0.28125,  -1.09375, 0.375,    -0.84375, 2.4375,   -1.1875,
     1.59375,  -0.5,     -0.96875, -0.875,   -0.40625, 0.0625,   -0.78125, -0.53125, 1.34375,
     -0.375,   0.71875,  -0.625,   1.3125,   -0.5625,  -0.8125,  -0.90625, -0.21875, 0.0625},
};

}  // namespace

TEST_CASE("depthwise_conv2d gives TF 2.21's values", "[cpu][cuda][nn]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    for (size_t i = 0; i < kTfValues.size(); ++i) {
      const Case& c = kCases[i];
      INFO(describe(c));
      // The inputs are multiples of 1/8 and the sums short: exact in every floating dtype.
      for (tf::DType d : {tf::float16, tf::bfloat16, tf::float32, tf::float64}) {
        INFO(tf::dtype_name(d));
        const tf::Tensor y = run(c, pat_x(tf::TensorShape(c.x), d), pat_f(tf::TensorShape(c.f), d));
        CHECK(y.dtype() == d);
        check_values(y, kTfValues[i], 0, 0);
      }
    }
  }
}

TEST_CASE("depthwise_conv2d matches a float64 reference loop", "[cpu][cuda][nn]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    for (const Case& c : kCases) {
      INFO(describe(c));
      const auto xv = random_values(static_cast<size_t>(tf::TensorShape(c.x).num_elements()));
      const auto fv =
          random_values(static_cast<size_t>(tf::TensorShape(c.f).num_elements()), -1, 1, 5);
      const Ref want = reference(c, xv, fv);
      for (tf::DType d : {tf::float16, tf::bfloat16, tf::float32, tf::float64}) {
        INFO(tf::dtype_name(d));
        const tf::Tensor y = run(c, tf::detail::from_doubles(xv, tf::TensorShape(c.x), d),
                                 tf::detail::from_doubles(fv, tf::TensorShape(c.f), d));
        CHECK(y.shape() == tf::TensorShape(want.out));
        // The half types round their inputs and the output: about 3 ulps of a sum of ~45 terms.
        const double tol = d == tf::float64   ? 1e-12
                           : d == tf::float32 ? 1e-5
                           : d == tf::float16 ? 2e-2
                                              : 1.5e-1;
        check_values(y, want.y, tol, tol);
      }
    }
  }
}

TEST_CASE("depthwise_conv2d gradients give TF 2.21's values", "[cpu][cuda][nn][autograd]") {
  // TF 2.21: tf.GradientTape of reduce_sum(depthwise_conv2d(x, f, [1, 2, 2, 1], "SAME") * up)
  // with x (1, 5, 6, 2) and f (3, 2, 2, 3) from pat_x / pat_f, up from pattern(54, 3, 2, 7, 2, 3).
  const std::vector<double> tf_dx = {
      -0.8125, 0.875,   -0.25,   -0.4375, 0.875,   -1.1875, -0.5625, -0.5625, -0.9375, 1.125,
      -0.4375, -0.25,   3,       0.25,    -1.3125, 1.9375,  -1.5,    -0.5625, -0.1875, -1.375,
      0.5625,  -0.0625, 0.0625,  2.3125,  -0.5625, -0.9375, 1.875,   -0.375,  1.125,   1.375,
      -0.1875, -0.0625, -0.6875, -0.6875, -0.0625, -0.1875, -0.875,  0.4375,  -1.4375, -1.4375,
      -1,      -1.25,   2.3125,  0.0625,  1.0625,  2.75,    -1.375,  -0.1875, 1,       -0.5625,
      -0.375,  1.875,   -0.8125, 0.875,   -0.25,   -0.4375, 0.875,   -1.1875, -0.5625, -0.5625};
  const std::vector<double> tf_df = {
      -2.5,  1.125, 2.125, -4.5, 2.5,   -1.875, 3,      -2.75, 1.125,  1.625,  1.875, -2.25,
      3.375, -1.5,  3.25,  0,    -0.5,  0.75,   -6.875, 4.375, -3.625, -5.875, 4.25,  -3.125,
      1.375, -2,    -1,    0.75, 1.625, -0.125, 0.625,  0.125, 1.375,  3.25,   -5.25, 2.875};
  const Case& c = kCases[4];
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    for (tf::DType d : {tf::float32, tf::float64}) {
      const tf::Tensor x = pat_x(tf::TensorShape(c.x), d), f = pat_f(tf::TensorShape(c.f), d);
      const tf::Tensor up = tf::detail::from_doubles(pattern(54, 3, 2, 7, 2.0, 3), {1, 3, 3, 6}, d);
      tf::GradientTape tape({.persistent = true});
      tape.watch(x);
      tape.watch(f);
      const tf::Tensor loss = tf::reduce_sum(run(c, x, f) * up);
      check_values(tape.gradient(loss, x), tf_dx, 0, 0);
      check_values(tape.gradient(loss, f), tf_df, 0, 0);
    }
  }
}

TEST_CASE("depthwise_conv2d filter gradient sums many positions in parts",
          "[cpu][cuda][nn][autograd]") {
  // Shapes large enough that the filter gradient is reduced in parts (several CPU chunks of
  // output rows, several CUDA slices of positions added with atomics), checked against the
  // plain sum: dL/df[kh, kw, c, m] = sum over n, oh, ow of x[n, ih, iw, c] * up[n, oh, ow, cM+m],
  // for L = sum(depthwise_conv2d(x, f, stride 2, SAME) * up).
  const int64_t N = 4, H = 64, W = 48, C = 16, M = 2, KH = 3, KW = 3, OH = 32, OW = 24;
  const auto xv = random_values(static_cast<size_t>(N * H * W * C));
  const auto uv = random_values(static_cast<size_t>(N * OH * OW * C * M), -1, 1, 9);
  const auto fv = random_values(static_cast<size_t>(KH * KW * C * M), -1, 1, 5);
  // SAME with stride 2: 64 -> 32 and 48 -> 24 rows and columns, padded only at the end.
  std::vector<double> want(fv.size(), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow)
        for (int64_t kh = 0; kh < KH; ++kh)
          for (int64_t kw = 0; kw < KW; ++kw) {
            const int64_t ih = oh * 2 + kh, iw = ow * 2 + kw;
            if (ih >= H || iw >= W) continue;
            for (int64_t c = 0; c < C; ++c)
              for (int64_t m = 0; m < M; ++m)
                want[static_cast<size_t>(((kh * KW + kw) * C + c) * M + m)] +=
                    xv[static_cast<size_t>(((n * H + ih) * W + iw) * C + c)] *
                    uv[static_cast<size_t>(((n * OH + oh) * OW + ow) * C * M + c * M + m)];
          }
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    for (tf::DType d : {tf::float32, tf::float64}) {
      INFO(tf::dtype_name(d));
      const tf::Tensor x = tf::detail::from_doubles(xv, {N, H, W, C}, d);
      const tf::Tensor f = tf::detail::from_doubles(fv, {KH, KW, C, M}, d);
      const tf::Tensor up = tf::detail::from_doubles(uv, {N, OH, OW, C * M}, d);
      tf::GradientTape tape;
      tape.watch(f);
      const tf::Tensor loss =
          tf::reduce_sum(tf::nn::depthwise_conv2d(x, f, {2, 2}, "SAME", {1, 1}) * up);
      // Sums of about 3000 products of magnitude 1 in float32: about 1e-3 absolute.
      const bool f64 = d == tf::float64;
      check_values(tape.gradient(loss, f), want, f64 ? 1e-10 : 1e-2, f64 ? 1e-10 : 1e-3);
    }
  }
}

TEST_CASE("depthwise_conv2d gradients match central differences", "[cpu][cuda][nn][autograd]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    for (const Case& c : {kCases[0], kCases[2], kCases[3], kCases[6], kCases[7], kCases[8]}) {
      INFO(describe(c));
      const auto xv = random_values(static_cast<size_t>(tf::TensorShape(c.x).num_elements()));
      const auto fv =
          random_values(static_cast<size_t>(tf::TensorShape(c.f).num_elements()), -1, 1, 5);
      const Ref base = reference(c, xv, fv);
      const auto wv = random_values(base.y.size(), -1, 1, 9);
      auto loss_of = [&](const std::vector<double>& xs, const std::vector<double>& fs) {
        const auto y = reference(c, xs, fs).y;
        double s = 0;
        for (size_t i = 0; i < y.size(); ++i) s += y[i] * wv[i];
        return s;
      };
      const tf::Tensor x = tf::detail::from_doubles(xv, tf::TensorShape(c.x), tf::float64);
      const tf::Tensor f = tf::detail::from_doubles(fv, tf::TensorShape(c.f), tf::float64);
      const tf::Tensor w = tf::detail::from_doubles(wv, tf::TensorShape(base.out), tf::float64);
      tf::GradientTape tape({.persistent = true});
      tape.watch(x);
      tape.watch(f);
      const tf::Tensor loss = tf::reduce_sum(run(c, x, f) * w);
      const double h = 1e-6;
      const std::vector<double> gx =
          central_differences([&](const std::vector<double>& v) { return loss_of(v, fv); }, xv, h);
      const std::vector<double> gf =
          central_differences([&](const std::vector<double>& v) { return loss_of(xv, v); }, fv, h);
      check_values(tape.gradient(loss, x), gx, 1e-7, 1e-8);
      check_values(tape.gradient(loss, f), gf, 1e-7, 1e-8);
    }
  }
}

TEST_CASE("depthwise_conv2d second order through nested tapes", "[cpu][cuda][nn][autograd]") {
  // L = sum(y^2 * w) is quadratic in y, so its gradients are again depthwise convolutions of
  // x and f; d/dx and d/df of <gx, a> + <gf, b> run the vjps of both backprop primitives, and
  // are checked against central differences of the (already checked) first-order gradients.
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    for (const Case& c : {kCases[4], kCases[6]}) {
      INFO(describe(c));
      const tf::TensorShape xs(c.x), fs(c.f);
      const auto xv = random_values(static_cast<size_t>(xs.num_elements()));
      const auto fv = random_values(static_cast<size_t>(fs.num_elements()), -1, 1, 5);
      const tf::Tensor a =
          tf::detail::from_doubles(random_values(xv.size(), -1, 1, 7), xs, tf::float64);
      const tf::Tensor b =
          tf::detail::from_doubles(random_values(fv.size(), -1, 1, 8), fs, tf::float64);
      const tf::Tensor y0 = run(c, tf::detail::from_doubles(xv, xs, tf::float64),
                                tf::detail::from_doubles(fv, fs, tf::float64));
      const tf::Tensor w = tf::detail::from_doubles(random_values(y0.num_elements(), -1, 1, 9),
                                                    y0.shape(), tf::float64);
      // <gx, a> + <gf, b> at (xs_, fs_), the first-order gradients from one tape.
      auto first = [&](const std::vector<double>& xs_, const std::vector<double>& fs_) {
        const tf::Tensor x = tf::detail::from_doubles(xs_, xs, tf::float64);
        const tf::Tensor f = tf::detail::from_doubles(fs_, fs, tf::float64);
        tf::GradientTape t({.persistent = true});
        t.watch(x);
        t.watch(f);
        const tf::Tensor y = run(c, x, f);
        const tf::Tensor l = tf::reduce_sum(y * y * w);
        return tf::reduce_sum(t.gradient(l, x) * a).item<double>() +
               tf::reduce_sum(t.gradient(l, f) * b).item<double>();
      };
      const tf::Tensor x = tf::detail::from_doubles(xv, xs, tf::float64);
      const tf::Tensor f = tf::detail::from_doubles(fv, fs, tf::float64);
      tf::GradientTape outer({.persistent = true});
      outer.watch(x);
      outer.watch(f);
      tf::Tensor s;
      {
        tf::GradientTape inner({.persistent = true});
        inner.watch(x);
        inner.watch(f);
        const tf::Tensor y = run(c, x, f);
        const tf::Tensor l = tf::reduce_sum(y * y * w);
        s = tf::reduce_sum(inner.gradient(l, x) * a) + tf::reduce_sum(inner.gradient(l, f) * b);
      }
      const tf::Tensor hx = outer.gradient(s, x), hf = outer.gradient(s, f);
      REQUIRE(hx.defined());
      REQUIRE(hf.defined());
      const double h = 1e-5;
      const std::vector<double> want_x =
          central_differences([&](const std::vector<double>& v) { return first(v, fv); }, xv, h);
      const std::vector<double> want_f =
          central_differences([&](const std::vector<double>& v) { return first(xv, v); }, fv, h);
      check_values(hx, want_x, 1e-6, 1e-7);
      check_values(hf, want_f, 1e-6, 1e-7);
    }
  }
}

TEST_CASE("depthwise_conv2d inside a traced function equals eager", "[cpu][cuda][nn]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const Case& c = kCases[6];
    const tf::Tensor x =
        tf::detail::from_doubles(random_values(630), tf::TensorShape(c.x), tf::float32);
    const tf::Tensor f =
        tf::detail::from_doubles(random_values(90, -1, 1, 3), tf::TensorShape(c.f), tf::float32);
    // The forward value and both gradients, traced and eager.
    auto step = [&](const tf::Tensor& xi, const tf::Tensor& fi) {
      tf::GradientTape t({.persistent = true});
      t.watch(xi);
      t.watch(fi);
      const tf::Tensor y = run(c, xi, fi);
      const tf::Tensor l = tf::reduce_sum(y * y);
      return std::vector<tf::Tensor>{y, t.gradient(l, xi), t.gradient(l, fi)};
    };
    auto g = tf::function([&](const tf::Tensor& xi, const tf::Tensor& fi) {
      const auto r = step(xi, fi);
      return tf::concat({tf::reshape(r[0], {-1}), tf::reshape(r[1], {-1}), tf::reshape(r[2], {-1})},
                        0);
    });
    const auto e = step(x, f);
    const tf::Tensor eager =
        tf::concat({tf::reshape(e[0], {-1}), tf::reshape(e[1], {-1}), tf::reshape(e[2], {-1})}, 0);
    for (int rep = 0; rep < 2; ++rep) tf::testing::check_close(g(x, f), eager, 0, 0);
  }
}

TEST_CASE("separable_conv2d gives TF 2.21's values", "[cpu][cuda][nn]") {
  // TF 2.21: tf.nn.separable_conv2d(x, d, p, [1, 1, 1, 1], "SAME") with x (1, 4, 5, 2) and
  // d (3, 3, 2, 2) from pat_x / pat_f, p (1, 1, 4, 3) = pattern(12, 3, 1, 5, 4, 2).
  const std::vector<double> tf221 = {
      -0.9296875, 0.359375,   0.4375,     0.5703125,  0.0859375,  0.3828125,  -0.1328125, -0.25,
      -1.0703125, -0.6640625, 0.2734375,  0.7421875,  0.765625,   -0.0390625, -0.4140625, -0.125,
      -0.4453125, 0.796875,   0.3515625,  0,          -1.3671875, -0.453125,  0.359375,   1.25,
      0.203125,   -0.3125,    0.7734375,  -0.4296875, 0.5,        -1.8125,    0.4375,     -0.59375,
      0.71875,    -0.0625,    0.1640625,  0.1171875,  0.3359375,  -0.421875,  0.9296875,  -0.125,
      0.0234375,  -1.78125,   -0.2109375, -0.09375,   1.8984375,  0.453125,   0.3515625,  -1.15625,
      -0.2265625, 0.4296875,  0.03125,    0.3359375,  -0.203125,  -0.703125,  0.0390625,  0.3671875,
      0.5390625,  0.2890625,  -0.5546875, -0.0703125};
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    for (tf::DType d : {tf::float32, tf::float64}) {
      const tf::Tensor x = pat_x({1, 4, 5, 2}, d), dw = pat_f({3, 3, 2, 2}, d);
      const tf::Tensor pw = tf::detail::from_doubles(pattern(12, 3, 1, 5, 4.0, 2), {1, 1, 4, 3}, d);
      check_values(tf::nn::separable_conv2d(x, dw, pw, {1}, "SAME"), tf221, 0, 0);
    }
  }
}

TEST_CASE("grouped_conv2d gives TF 2.21's values and its gradients match differences",
          "[cpu][cuda][nn][autograd]") {
  // TF 2.21: tf.nn.conv2d(x, f, 1, "VALID") with x (1, 4, 5, 4) and f (3, 3, 2, 6) from
  // pat_x / pat_f: two groups of two input channels, three outputs each.
  const std::vector<double> tf221 = {
      -0.46875, 0.5625,   -2.0625, -2.21875, 2.625,    -2.6875, -0.125,   -0.625,  1.71875,
      2.0625,   -1.84375, 1.5625,  -1.5,     0.9375,   -0.6875, -1.90625, 1.59375, -1.40625,
      3.65625,  -2.96875, 1.375,   3.03125,  -0.8125,  1.03125, -2.53125, 2.71875, -1.375,
      -1.625,   1.9375,   -2.625,  1.59375,  -1.90625, 0.6875,  0.9375,   -1.5,    0.9375};
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    for (tf::DType d : {tf::float32, tf::float64}) {
      const tf::Tensor y =
          tf::nn::grouped_conv2d(pat_x({1, 4, 5, 4}, d), pat_f({3, 3, 2, 6}, d), {1}, "VALID");
      CHECK(y.shape() == tf::TensorShape{1, 2, 3, 6});
      check_values(y, tf221, 1e-6, 1e-6);
      // tf::nn::conv2d takes the same filters as TF's: a grouped convolution.
      tf::testing::check_close(
          tf::nn::conv2d(pat_x({1, 4, 5, 4}, d), pat_f({3, 3, 2, 6}, d), {1}, "VALID"), y, 0, 0);
      // One input channel per group (groups = 4, two outputs each) runs as a depthwise
      // convolution: equal to a conv2d per group.
      const tf::Tensor x4 = pat_x({1, 5, 6, 4}, d), f1 = pat_f({3, 3, 1, 8}, d);
      std::vector<tf::Tensor> per_group;
      const auto xg = tf::split(x4, 4, 3);
      const auto fg = tf::split(f1, 4, 3);
      for (size_t g = 0; g < 4; ++g)
        per_group.push_back(tf::nn::conv2d(xg[g], fg[g], {2}, "SAME", {1}));
      tf::testing::check_close(tf::nn::conv2d(x4, f1, {2}, "SAME"), tf::concat(per_group, 3), 1e-6,
                               1e-6);
    }
    // Gradients: a 3-group SAME stride-2 case, against differences of the op itself (float64).
    const tf::TensorShape xs{2, 5, 4, 6}, fs{3, 2, 2, 9};
    const auto xv = random_values(static_cast<size_t>(xs.num_elements()));
    const auto fv = random_values(static_cast<size_t>(fs.num_elements()), -1, 1, 5);
    const tf::Tensor w =
        tf::detail::from_doubles(random_values(2 * 3 * 2 * 9, -1, 1, 9), {2, 3, 2, 9}, tf::float64);
    auto loss_of = [&](const std::vector<double>& a, const std::vector<double>& b) {
      return tf::reduce_sum(tf::nn::grouped_conv2d(tf::detail::from_doubles(a, xs, tf::float64),
                                                   tf::detail::from_doubles(b, fs, tf::float64),
                                                   {2}, "SAME") *
                            w)
          .item<double>();
    };
    const tf::Tensor x = tf::detail::from_doubles(xv, xs, tf::float64);
    const tf::Tensor f = tf::detail::from_doubles(fv, fs, tf::float64);
    tf::GradientTape tape({.persistent = true});
    tape.watch(x);
    tape.watch(f);
    const tf::Tensor loss = tf::reduce_sum(tf::nn::grouped_conv2d(x, f, {2}, "SAME") * w);
    const double h = 1e-6;
    const std::vector<double> gx =
        central_differences([&](const std::vector<double>& v) { return loss_of(v, fv); }, xv, h);
    const std::vector<double> gf =
        central_differences([&](const std::vector<double>& v) { return loss_of(xv, v); }, fv, h);
    check_values(tape.gradient(loss, x), gx, 1e-7, 1e-8);
    check_values(tape.gradient(loss, f), gf, 1e-7, 1e-8);
  }
}

TEST_CASE("depthwise_conv2d separable_conv2d and grouped_conv2d reject bad arguments",
          "[cpu][nn]") {
  const tf::Tensor x = tf::ones({1, 5, 5, 3});
  require_error(
      [&] {
        tf::nn::depthwise_conv2d(x, tf::ones({3, 3, 4, 2}), {1}, "SAME");
      },
      {"[depthwise_conv2d]", "input and filter must have the same depth: 3 vs 4", "(1, 5, 5, 3)",
       "(3, 3, 4, 2)"});
  require_error(
      [&] {
        tf::nn::depthwise_conv2d(x, tf::ones({3, 3, 3}), {1}, "SAME");
      },
      {"[depthwise_conv2d]", "filter must be 4-dimensional: (3, 3, 3)"});
  require_error(
      [&] {
        tf::nn::depthwise_conv2d(tf::ones({5, 5, 3}), tf::ones({3, 3, 3, 1}), {1}, "SAME");
      },
      {"input must be 4-dimensional: (5, 5, 3)"});
  require_error(
      [&] {
        tf::nn::depthwise_conv2d(x, tf::ones({3, 3, 3, 2}, tf::float64), {1}, "SAME");
      },
      {"[depthwise_conv2d]", "input and filter dtypes differ: float32 and float64"});
  require_error(
      [&] {
        tf::nn::depthwise_conv2d(tf::ones({1, 5, 5, 3}, tf::int32),
                                 tf::ones({3, 3, 3, 2}, tf::int32), {1}, "SAME");
      },
      {"expects float16, bfloat16, float32 or float64 tensors, got int32"});
  require_error(
      [&] {
        tf::nn::depthwise_conv2d(x, tf::ones({7, 7, 3, 2}), {1}, "VALID");
      },
      {"Computed output size would be negative", "input_size: 5", "effective_filter_size: 7"});
  require_error(
      [&] {
        tf::nn::depthwise_conv2d(x, tf::ones({3, 3, 3, 2}), {1}, "VALID", {3});
      },
      {"effective_filter_size: 7"});
  require_error(
      [&] {
        tf::nn::depthwise_conv2d(x, tf::ones({3, 3, 3, 2}), {1}, "same");
      },
      {"padding must be \"SAME\" or \"VALID\""});
  require_error(
      [&] {
        tf::nn::depthwise_conv2d(x, tf::ones({3, 3, 3, 2}), {1, 2, 3}, "SAME");
      },
      {"strides must have 1, 2 or 4 values, got [1, 2, 3]"});
  require_error(
      [&] {
        tf::nn::depthwise_conv2d(x, tf::ones({3, 3, 3, 2}), {2, 1, 1, 1}, "SAME");
      },
      {"must be 1 in the batch and channel dimensions"});
  require_error(
      [&] {
        tf::nn::depthwise_conv2d(x, tf::ones({3, 3, 3, 2}), {0}, "SAME");
      },
      {"strides must be positive"});
  require_error(
      [&] {
        tf::nn::depthwise_conv2d(x, tf::ones({3, 3, 3, 2}), {1}, {{1, -1}, {0, 0}});
      },
      {"explicit paddings must be non-negative"});
  require_error(
      [&] {
        tf::nn::depthwise_conv2d(x, tf::ones({3, 3, 3, 2}), {1},
                                 std::vector<std::pair<int, int>>{{1, 1}});
      },
      {"explicit padding must give"});
  require_error(
      [&] {
        tf::nn::separable_conv2d(x, tf::ones({3, 3, 3, 2}), tf::ones({1, 1, 5, 4}), {1}, "SAME");
      },
      {"[separable_conv2d]", "pointwise_filter (1, 1, 5, 4) must have", "3 * 2"});
  require_error(
      [&] {
        tf::nn::separable_conv2d(x, tf::ones({3, 3, 3, 2}), tf::ones({3, 1, 6, 4}), {1}, "SAME");
      },
      {"pointwise_filter must be 1x1"});
  require_error(
      [&] {
        tf::nn::grouped_conv2d(x, tf::ones({3, 3, 2, 4}), {1}, "SAME");
      },
      {"[conv2d]", "input depth must be a positive multiple of the filter depth: 3 vs 2"});
  require_error(
      [&] {
        tf::nn::grouped_conv2d(tf::ones({1, 5, 5, 4}), tf::ones({3, 3, 2, 3}), {1}, "SAME");
      },
      {"[conv2d]", "3 output channels must be divisible by the 2 groups"});
}
