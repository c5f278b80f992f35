// tf::image metrics and filters (ops/image_metrics.h): psnr, ssim, total_variation,
// image_gradients and sobel_edges against TF 2.21 literals on every device (float32 and uint8),
// gradients against central finite differences in float64, traced against eager, and errors.
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
#include "ops/image_metrics.h"
#include "ops/movement.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
using tf::testing::check_values;
using tf::testing::random_values;

namespace {

// clang-format off
// psnr(a, b, 1.0)
const std::vector<double> kPsnr = {18.1452579, 18.1957359};
// ssim(a, b, 1.0)
const std::vector<double> kSsim = {0.891440272, 0.89677906};
// ssim(a, b, 2.0, filter_size=5, filter_sigma=0.8, k1=0.02, k2=0.05)
const std::vector<double> kSsimSmall = {0.870217562, 0.876830697};
// psnr(ua, ub, 255) with ua, ub = uint8(a * 255), uint8(b * 255)
const std::vector<double> kPsnrU8 = {18.1381168, 18.1917362};
// ssim(ua, ub, 255)
const std::vector<double> kSsimU8 = {0.891495228, 0.896515369};
// total_variation(a)
const std::vector<double> kTotalVariation = {142.416656, 142.416656};
// image_gradients(s), s = (1, 4, 5, 2) ((i * 37) % 101) / 100
const std::vector<double> kGradDy = {0.670000017, -0.340000004, -0.340000004, 0.669999957,
    -0.340000004, -0.339999974, 0.670000017, -0.339999974, -0.339999974, 0.670000017, -0.340000004,
    0.670000017, -0.340000004, -0.339999974, 0.670000017, -0.340000004, -0.340000033, 0.669999957,
    -0.340000033, -0.340000033, 0.669999957, -0.339999974, 0.670000017, -0.340000004, -0.340000004,
    0.669999957, -0.339999974, -0.339999974, 0.670000017, -0.340000004, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0};
const std::vector<double> kGradDx = {0.74000001, -0.270000011, -0.270000011, 0.73999995,
    -0.269999981, -0.269999981, 0.74000001, -0.269999981, 0, 0, -0.270000011, 0.74000001,
    -0.270000011, -0.269999981, 0.74000001, -0.269999981, -0.269999981, 0.74000001, 0, 0,
    -0.270000011, -0.269999981, 0.74000001, -0.270000011, -0.270000041, 0.74000001, -0.269999981,
    -0.269999981, 0, 0, -0.269999981, -0.270000011, -0.270000011, 0.74000001, -0.270000011,
    -0.269999981, 0.74000001, -0.270000011, 0, 0};
// sobel_edges(s)
const std::vector<double> kSobel = {-8.94069672e-08, 0, 5.96046448e-08, 0, 0, -0.140000045, 0, 1.88,
    0, -0.139999986, -1.49011612e-08, -0.139999941, -1.1920929e-07, 1.88000011, 0, -0.139999866,
    -1.1920929e-07, 0, -1.49011612e-08, 0, -0.700000048, 0, 1.31999993, 0, -0.699999988,
    -0.140000045, 0.310000032, 0.870000005, 0.309999824, 0.869999945, -0.699999928, -0.139999986,
    0.309999943, 0.870000064, 0.310000062, 0.870000124, -0.700000048, 0, 1.31999993, 0, 1.31999993,
    0, -0.699999809, 0, 1.32000005, -0.140000015, -0.699999988, -0.139999986, 0.310000062,
    0.869999945, 0.310000002, 0.870000005, -0.699999988, -0.140000045, 0.309999853, 0.870000124,
    -0.699999988, 0, -0.700000226, 0, -3.7252903e-09, 0, 5.96046448e-08, 0, 5.96046448e-08,
    -0.139999926, 2.98023224e-08, -0.140000015, -1.1920929e-07, -0.140000105, -5.96046448e-08,
    1.87999988, 0, -0.140000045, 1.1920929e-07, -0.139999986, 0, 0, 1.1920929e-07, 0};
// ssim_multiscale(a, b, 1.0, power_factors=(0.3, 0.5, 0.2), filter_size=3, filter_sigma=0.9)
const std::vector<double> kMsSsim = {0.833782732, 0.876832128};
// ssim_multiscale(A, B, 1.0) with TF's defaults; A, B (1, 177, 181, 1): a, b's formulas with
// weights 0.6 and 0.4.
const std::vector<double> kMsSsimDefault = {0.806098998};
// clang-format on

// The (2, 12, 13, 2) pair of the literals: a = ((i * 53) % 97) / 96, b = 0.7 a + 0.3 ((i * 31 +
// 7) % 89) / 88, rounded to dtype (uint8: truncating x * 255 of the float32 values).
std::pair<tf::Tensor, tf::Tensor> metric_pair(tf::DType dtype = tf::float32) {
  std::vector<double> a(2 * 12 * 13 * 2), b(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = static_cast<double>((i * 53) % 97) / 96.0;
    b[i] = 0.7 * a[i] + 0.3 * (static_cast<double>((i * 31 + 7) % 89) / 88.0);
  }
  tf::Tensor ta = tf::detail::from_doubles(a, {2, 12, 13, 2}, tf::float32);
  tf::Tensor tb = tf::detail::from_doubles(b, {2, 12, 13, 2}, tf::float32);
  if (dtype == tf::uint8) {
    const tf::Tensor k = tf::detail::from_doubles({255}, tf::TensorShape{}, tf::float32);
    return {tf::cast(ta * k, tf::uint8), tf::cast(tb * k, tf::uint8)};
  }
  return {tf::cast(ta, dtype), tf::cast(tb, dtype)};
}

tf::Tensor small_input() {
  std::vector<double> v(40);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>((i * 37) % 101) / 100.0;
  return tf::detail::from_doubles(v, {1, 4, 5, 2}, tf::float32);
}

// sum(f(x) * w) differentiated by the tape and by central differences, in float64; x in
// [0, 1).
void check_gradient(const std::function<tf::Tensor(const tf::Tensor&)>& f,
                    const tf::TensorShape& shape) {
  tf::testing::check_gradient(
      f, shape, random_values(static_cast<size_t>(shape.num_elements()), 0, 1, 3), 1e-6, 1e-7);
}

}  // namespace

TEST_CASE("image metrics and filters give TF's values", "[cpu][cuda][image]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const auto [a, b] = metric_pair();
    const tf::Tensor p = tf::image::psnr(a, b, 1.0);
    CHECK(p.shape() == tf::TensorShape({2}));
    CHECK(p.dtype() == tf::float32);
    check_values(p, kPsnr, 1e-5, 0);
    check_values(tf::image::ssim(a, b, 1.0), kSsim, 1e-5, 0);
    check_values(tf::image::ssim(a, b, 2.0, 5, 0.8, 0.02, 0.05), kSsimSmall, 1e-5, 0);
    const auto [ua, ub] = metric_pair(tf::uint8);
    check_values(tf::image::psnr(ua, ub, 255), kPsnrU8, 1e-5, 0);
    check_values(tf::image::ssim(ua, ub, 255), kSsimU8, 1e-5, 0);
    // Rank-3 images give a scalar: the first image's value.
    const tf::Tensor a0 = tf::reshape(tf::slice(a, {0, 0, 0, 0}, {1, -1, -1, -1}), {12, 13, 2});
    const tf::Tensor b0 = tf::reshape(tf::slice(b, {0, 0, 0, 0}, {1, -1, -1, -1}), {12, 13, 2});
    const tf::Tensor p0 = tf::image::psnr(a0, b0, 1.0);
    CHECK(p0.rank() == 0);
    check_values(p0, {kPsnr[0]}, 1e-5, 0);
    check_values(tf::image::ssim(a0, b0, 1.0), {kSsim[0]}, 1e-5, 0);
    const tf::Tensor ms = tf::image::ssim_multiscale(a, b, 1.0, {0.3, 0.5, 0.2}, 3, 0.9);
    CHECK(ms.shape() == tf::TensorShape({2}));
    check_values(ms, kMsSsim, 1e-5, 0);
    {
      std::vector<double> va(177 * 181), vb(va.size());
      for (size_t i = 0; i < va.size(); ++i) {
        va[i] = static_cast<double>((i * 53) % 97) / 96.0;
        vb[i] = 0.6 * va[i] + 0.4 * (static_cast<double>((i * 31 + 7) % 89) / 88.0);
      }
      check_values(tf::image::ssim_multiscale(
                       tf::detail::from_doubles(va, {1, 177, 181, 1}, tf::float32),
                       tf::detail::from_doubles(vb, {1, 177, 181, 1}, tf::float32), 1.0),
                   kMsSsimDefault, 1e-5, 0);
    }
    const tf::Tensor tv = tf::image::total_variation(a);
    CHECK(tv.shape() == tf::TensorShape({2}));
    check_values(tv, kTotalVariation, 1e-5, 0);
    check_values(tf::image::total_variation(a0), {kTotalVariation[0]}, 1e-5, 0);
    const tf::Tensor s = small_input();
    const auto [dy, dx] = tf::image::image_gradients(s);
    check_values(dy, kGradDy, 1e-6, 1e-6);
    check_values(dx, kGradDx, 1e-6, 1e-6);
    const tf::Tensor e = tf::image::sobel_edges(s);
    CHECK(e.shape() == tf::TensorShape({1, 4, 5, 2, 2}));
    check_values(e, kSobel, 1e-5, 1e-5);
  }
}

TEST_CASE("image metric and filter gradients match finite differences", "[cpu][cuda][image]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor ref =
        tf::detail::from_doubles(random_values(2 * 6 * 7 * 2, 0, 1, 11), {2, 6, 7, 2}, tf::float64);
    check_gradient([&](const tf::Tensor& x) { return tf::image::psnr(x, ref, 1.0); }, {2, 6, 7, 2});
    check_gradient([&](const tf::Tensor& x) { return tf::image::ssim(x, ref, 1.0, 5, 1.0); },
                   {2, 6, 7, 2});
    check_gradient(
        [&](const tf::Tensor& x) {
          return tf::image::ssim_multiscale(x, ref, 1.0, {0.4, 0.6}, 3, 1.0);
        },
        {2, 6, 7, 2});
    check_gradient([](const tf::Tensor& x) { return tf::image::total_variation(x); }, {2, 4, 5, 2});
    check_gradient([](const tf::Tensor& x) { return tf::image::image_gradients(x).second; },
                   {2, 4, 5, 2});
    check_gradient([](const tf::Tensor& x) { return tf::image::sobel_edges(x); }, {2, 4, 5, 2});
  }
}

TEST_CASE("image metrics inside a traced function equal eager", "[cpu][cuda][image]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    auto score = [](const tf::Tensor& x, const tf::Tensor& y) {
      return tf::image::ssim(x, y, 1.0, 5) + tf::image::psnr(x, y, 1.0) +
             tf::image::total_variation(x) +
             tf::reduce_sum(tf::image::sobel_edges(y), {1, 2, 3, 4});
    };
    tf::FunctionOptions opts;
    opts.input_signature = {tf::TensorSpec({tf::None, 6, 7, 2}),
                            tf::TensorSpec({tf::None, 6, 7, 2})};
    auto f = tf::function(score, opts);
    for (int64_t n : {1, 3}) {
      const auto sz = static_cast<size_t>(n * 84);
      const tf::Tensor x =
          tf::detail::from_doubles(random_values(sz, 0, 1, 5), {n, 6, 7, 2}, tf::float32);
      const tf::Tensor y =
          tf::detail::from_doubles(random_values(sz, 0, 1, 6), {n, 6, 7, 2}, tf::float32);
      tf::testing::check_close(f(x, y), score(x, y), 1e-5, 1e-5);
    }
    CHECK(f.tracing_count() == 1);
  }
}

TEST_CASE("image metrics reject bad shapes and dtypes", "[cpu][image]") {
  using tf::testing::require_error;
  const tf::Tensor x = tf::zeros({1, 12, 12, 3});
  require_error(
      [&] {
        tf::image::psnr(x, tf::zeros({1, 12, 11, 3}), 1.0);
      },
      {"[psnr]", "same shape", "(1, 12, 12, 3)", "(1, 12, 11, 3)"});
  require_error(
      [&] {
        tf::image::psnr(tf::zeros({12, 3}), tf::zeros({12, 3}), 1.0);
      },
      {"[psnr]", "rank 3", "(12, 3)"});
  require_error([&] { tf::image::ssim(x, tf::cast(x, tf::float64), 1.0); },
                {"[ssim]", "float32", "float64"});
  require_error(
      [&] {
        tf::image::ssim(tf::zeros({1, 8, 12, 3}), tf::zeros({1, 8, 12, 3}), 1.0);
      },
      {"[ssim]", "filter_size 11", "(1, 8, 12, 3)"});
  require_error(
      [&] {
        tf::image::ssim_multiscale(tf::zeros({1, 40, 40, 1}), tf::zeros({1, 40, 40, 1}), 1.0);
      },
      {"[ssim_multiscale]", "filter_size 11", "(1, 10, 10, 1)", "(1, 40, 40, 1)"});
  require_error([&] { tf::image::ssim_multiscale(x, x, 1.0, {}); },
                {"[ssim_multiscale]", "power_factors"});
  require_error(
      [&] {
        tf::image::total_variation(tf::zeros({5, 5}));
      },
      {"[total_variation]", "(5, 5)"});
  require_error(
      [&] {
        tf::image::image_gradients(tf::zeros({4, 5, 1}));
      },
      {"[image_gradients]", "rank 4", "(4, 5, 1)"});
  require_error([&] { tf::image::sobel_edges(tf::cast(x, tf::int32)); },
                {"[sobel_edges]", "int32"});
  require_error(
      [&] {
        tf::image::sobel_edges(tf::zeros({1, 1, 5, 1}));
      },
      {"[sobel_edges]", ">= 2", "(1, 1, 5, 1)"});
}
