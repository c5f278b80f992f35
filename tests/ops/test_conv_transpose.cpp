// tf::nn::conv2d_transpose against a float64 scatter loop on every device of
// devices_under_test(): strides, dilations, SAME and VALID, output sizes that leave rows and
// columns untouched; gradients against central differences; traced equals eager; the errors.
#include <functional>
#include <string>
#include <vector>

#include "autograd/tape.h"
#include "core/device.h"
#include "core/error.h"
#include "core/tensor.h"
#include "jit/function.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/movement.h"
#include "ops/nn.h"
#include "ops/reduce.h"
#include "support/testing.h"

namespace tf = tapeflow;
using tf::testing::check_values;
using tf::testing::random_values;
using tf::testing::require_error;

namespace {

struct Case {
  std::vector<int64_t> x, f, out;  // NHWC input, (KH, KW, Co, Ci) filters, NHWC output
  int stride_h, stride_w, dilation;
  bool same;
};

// Each input element adds x * f[kh, kw, co, ci] at output (i * s + kh * d - pad_before, ...),
// where pad_before is what a SAME conv2d of the output pads (0 for VALID).
std::vector<double> reference(const Case& c, const std::vector<double>& x,
                              const std::vector<double>& f) {
  const int64_t N = c.x[0], H = c.x[1], W = c.x[2], Ci = c.x[3];
  const int64_t KH = c.f[0], KW = c.f[1], Co = c.f[2];
  const int64_t OH = c.out[1], OW = c.out[2];
  auto pad = [&](int64_t in, int64_t out, int64_t k, int s) -> int64_t {
    if (!c.same) return 0;
    const int64_t eff = (k - 1) * c.dilation + 1;
    return std::max<int64_t>((in - 1) * s + eff - out, 0) / 2;
  };
  const int64_t ph = pad(H, OH, KH, c.stride_h), pw = pad(W, OW, KW, c.stride_w);
  std::vector<double> y(static_cast<size_t>(N * OH * OW * Co), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t i = 0; i < H; ++i)
      for (int64_t j = 0; j < W; ++j)
        for (int64_t ci = 0; ci < Ci; ++ci)
          for (int64_t kh = 0; kh < KH; ++kh)
            for (int64_t kw = 0; kw < KW; ++kw) {
              const int64_t oh = i * c.stride_h + kh * c.dilation - ph;
              const int64_t ow = j * c.stride_w + kw * c.dilation - pw;
              if (oh < 0 || oh >= OH || ow < 0 || ow >= OW) continue;
              for (int64_t co = 0; co < Co; ++co)
                y[static_cast<size_t>(((n * OH + oh) * OW + ow) * Co + co)] +=
                    x[static_cast<size_t>(((n * H + i) * W + j) * Ci + ci)] *
                    f[static_cast<size_t>(((kh * KW + kw) * Co + co) * Ci + ci)];
            }
  return y;
}

const std::vector<Case> kCases = {
    {{1, 2, 2, 3}, {3, 3, 2, 3}, {1, 4, 4, 2}, 2, 2, 1, true},
    {{1, 2, 2, 3}, {3, 3, 2, 3}, {1, 5, 5, 2}, 2, 2, 1, false},
    {{2, 3, 2, 2}, {2, 3, 4, 2}, {2, 6, 4, 4}, 2, 2, 1, true},
    {{2, 3, 2, 2}, {2, 3, 4, 2}, {2, 7, 6, 4}, 2, 2, 1, false},  // a row and column untouched
    {{1, 2, 3, 1}, {3, 2, 1, 1}, {1, 6, 9, 1}, 3, 3, 1, false},  // stride above the kernel
    {{1, 4, 5, 2}, {3, 3, 3, 2}, {1, 4, 5, 3}, 1, 1, 2, true},   // dilated
    {{1, 3, 3, 2}, {2, 2, 3, 2}, {1, 5, 5, 3}, 1, 1, 2, false},  // dilated VALID
    {{1, 2, 3, 3}, {3, 2, 2, 3}, {1, 3, 5, 2}, 2, 2, 1, true},   // odd SAME sizes
};

std::string describe(const Case& c) {
  return tf::TensorShape(c.x).to_string() + " " + tf::TensorShape(c.f).to_string() + " -> " +
         tf::TensorShape(c.out).to_string() + (c.same ? " SAME" : " VALID");
}

}  // namespace

TEST_CASE("conv2d_transpose matches a float64 scatter loop", "[cpu][cuda][nn]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    for (const Case& c : kCases) {
      INFO(describe(c));
      const auto xv = random_values(static_cast<size_t>(tf::TensorShape(c.x).num_elements()));
      const auto fv =
          random_values(static_cast<size_t>(tf::TensorShape(c.f).num_elements()), -1, 1, 5);
      const auto want = reference(c, xv, fv);
      for (tf::DType d : {tf::float32, tf::float64}) {
        const tf::Tensor y = tf::nn::conv2d_transpose(
            tf::detail::from_doubles(xv, tf::TensorShape(c.x), d),
            tf::detail::from_doubles(fv, tf::TensorShape(c.f), d), tf::TensorShape(c.out),
            {c.stride_h, c.stride_w}, c.same ? "SAME" : "VALID", {c.dilation});
        CHECK(y.shape() == tf::TensorShape(c.out));
        check_values(y, want, d == tf::float32 ? 1e-5 : 1e-12, d == tf::float32 ? 1e-5 : 1e-12);
      }
    }
  }
}

TEST_CASE("conv2d_transpose gives TF's values", "[cpu][cuda][nn]") {
  // TF 2.21: tf.nn.conv2d_transpose(x, f, [1, 4, 4, 2], 2, "SAME") with x = arange(12)/10 in
  // (1, 2, 2, 3) and f = (arange(54) - 20)/10 in (3, 3, 2, 3): the first eight values.
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    const tf::Tensor x = tf::reshape(tf::range(0.0f, 12.0f, 1.0f), {1, 2, 2, 3}) / 10.0f;
    const tf::Tensor f = (tf::reshape(tf::range(0.0f, 54.0f, 1.0f), {3, 3, 2, 3}) - 20.0f) / 10.0f;
    const tf::Tensor y = tf::nn::conv2d_transpose(x, f, {1, 4, 4, 2}, {2}, "SAME");
    const auto v = y.numpy<float>();
    const std::vector<double> tf221 = {-0.55, -0.46, -0.37, -0.28, -2.45, -2.0, -1.54, -1.18};
    for (size_t i = 0; i < tf221.size(); ++i) CHECK(v[i] == Approx(tf221[i]).margin(1e-6));
  }
}

TEST_CASE("conv2d_transpose gradients match central differences", "[cpu][cuda][nn][autograd]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    for (const Case& c : {kCases[0], kCases[3], kCases[5]}) {
      INFO(describe(c));
      auto xv = random_values(static_cast<size_t>(tf::TensorShape(c.x).num_elements()));
      auto fv = random_values(static_cast<size_t>(tf::TensorShape(c.f).num_elements()), -1, 1, 5);
      const auto wv =
          random_values(static_cast<size_t>(tf::TensorShape(c.out).num_elements()), -1, 1, 9);
      auto loss_of = [&](const std::vector<double>& xs, const std::vector<double>& fs) {
        const auto y = reference(c, xs, fs);
        double s = 0;
        for (size_t i = 0; i < y.size(); ++i) s += y[i] * wv[i];
        return s;
      };
      const tf::Tensor x = tf::detail::from_doubles(xv, tf::TensorShape(c.x), tf::float64);
      const tf::Tensor f = tf::detail::from_doubles(fv, tf::TensorShape(c.f), tf::float64);
      const tf::Tensor w = tf::detail::from_doubles(wv, tf::TensorShape(c.out), tf::float64);
      tf::GradientTape tape({.persistent = true});
      tape.watch(x);
      tape.watch(f);
      const tf::Tensor loss = tf::reduce_sum(
          tf::nn::conv2d_transpose(x, f, tf::TensorShape(c.out), {c.stride_h, c.stride_w},
                                   c.same ? "SAME" : "VALID", {c.dilation}) *
          w);
      const double h = 1e-6;
      const std::vector<double> gx = tf::testing::central_differences(
          [&](const std::vector<double>& v) { return loss_of(v, fv); }, xv, h);
      const std::vector<double> gf = tf::testing::central_differences(
          [&](const std::vector<double>& v) { return loss_of(xv, v); }, fv, h);
      check_values(tape.gradient(loss, x), gx, 1e-7, 1e-8);
      check_values(tape.gradient(loss, f), gf, 1e-7, 1e-8);
    }
  }
}

TEST_CASE("conv2d_transpose inside a traced function equals eager", "[cpu][cuda][nn]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    auto g = tf::function([](const tf::Tensor& x, const tf::Tensor& f) {
      return tf::nn::conv2d_transpose(x, f, {2, 6, 4, 4}, {2}, "SAME");
    });
    const tf::Tensor x = tf::detail::from_doubles(random_values(24), {2, 3, 2, 2}, tf::float32);
    const tf::Tensor f =
        tf::detail::from_doubles(random_values(48, -1, 1, 3), {2, 3, 4, 2}, tf::float32);
    for (int rep = 0; rep < 2; ++rep)
      tf::testing::check_close(g(x, f), tf::nn::conv2d_transpose(x, f, {2, 6, 4, 4}, {2}, "SAME"),
                               0, 0);
  }
}

TEST_CASE("conv2d_transpose rejects shapes that do not fit", "[cpu][nn]") {
  const tf::Tensor x = tf::ones({1, 2, 2, 3}), f = tf::ones({3, 3, 2, 3});
  require_error(
      [&] {
        tf::nn::conv2d_transpose(x, f, {1, 5, 5, 2}, {2}, "SAME");
      },
      {"[conv2d_transpose]", "output_shape (1, 5, 5, 2) does not fit the input",
       "gives height 3, not 2"});
  require_error(
      [&] {
        tf::nn::conv2d_transpose(x, f, {1, 4, 5, 2}, {2}, "VALID");
      },
      {"gives height 1, not 2"});
  require_error(
      [&] {
        tf::nn::conv2d_transpose(x, f, {1, 4, 4, 3}, {2}, "SAME");
      },
      {"output_shape (1, 4, 4, 3) has 3 channels but filters (3, 3, 2, 3) give 2"});
  require_error(
      [&] {
        tf::nn::conv2d_transpose(x, f, {2, 4, 4, 2}, {2}, "SAME");
      },
      {"has batch 2 but the input (1, 2, 2, 3) has 1"});
  require_error(
      [&] {
        tf::nn::conv2d_transpose(tf::ones({1, 2, 2, 2}), f, {1, 4, 4, 2}, {2});
      },
      {"the input has 2 channels but filters (3, 3, 2, 3) expect 3"});
  require_error(
      [&] {
        tf::nn::conv2d_transpose(tf::ones({2, 2, 3}), f, {1, 4, 4, 2}, {2});
      },
      {"the input must be NHWC of rank 4"});
  require_error(
      [&] {
        tf::nn::conv2d_transpose(x, f, {4, 4, 2}, {2});
      },
      {"output_shape must be NHWC of rank 4"});
  require_error(
      [&] {
        tf::nn::conv2d_transpose(x, f, {1, 4, 4, 2}, {2}, "same");
      },
      {"padding must be \"SAME\" or \"VALID\""});
  require_error(
      [&] {
        tf::nn::conv2d_transpose(x, tf::ones({3, 3, 2, 3}, tf::float64), {1, 4, 4, 2}, {2});
      },
      {"conv2d_backprop_input"});
}
