// tf.signal (ops/signal.h) on every device of devices_under_test(): fft, ifft, fft2d, rfft,
// irfft and the 3-D transforms against a plain float64 DFT for power-of-two and other lengths
// (Bluestein's path), TF 2.21's values for the examples printed beside them (the tf.signal call
// named), frame, overlap_and_add, the windows, stft / inverse_stft, dct / idct, the mel matrix
// and mfccs; gradients against central differences in float64 (second order through nested
// tapes); traced equals eager, one trace for a None batch; the errors.
#include <cmath>
#include <complex>
#include <numbers>
#include <vector>

#include "autograd/tape.h"
#include "core/device.h"
#include "core/error.h"
#include "core/tensor.h"
#include "jit/function.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/linalg_more.h"
#include "ops/movement.h"
#include "ops/reduce.h"
#include "ops/signal.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
namespace sig = tapeflow::signal;
using tf::testing::check_close;
using tf::testing::check_gradient;
using tf::testing::check_values;
using tf::testing::random_values;
using tf::testing::require_error;

namespace {

using cd = std::complex<double>;

tf::Tensor make(const std::vector<double>& v, const tf::TensorShape& s, tf::DType d = tf::float64) {
  return tf::detail::from_doubles(v, s, d);
}

// The DFT of each row of n values (sign -1 forward, +1 inverse, unnormalised), in long double.
std::vector<cd> naive_dft(const std::vector<cd>& x, int64_t n, int sign) {
  std::vector<cd> y(x.size());
  const int64_t rows = n == 0 ? 0 : static_cast<int64_t>(x.size()) / n;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < n; ++k) {
      long double re = 0, im = 0;
      for (int64_t j = 0; j < n; ++j) {
        const long double a = 2.0L * std::numbers::pi_v<long double> *
                              static_cast<long double>((k * j) % n) / static_cast<long double>(n);
        const cd v = x[static_cast<size_t>(r * n + j)];
        re += v.real() * std::cos(a) - sign * v.imag() * std::sin(a);
        im += v.imag() * std::cos(a) + sign * v.real() * std::sin(a);
      }
      y[static_cast<size_t>(r * n + k)] = cd(static_cast<double>(re), static_cast<double>(im));
    }
  return y;
}

std::vector<double> reals(const std::vector<cd>& z) {
  std::vector<double> r;
  for (const cd& v : z) r.push_back(v.real());
  return r;
}
std::vector<double> imags(const std::vector<cd>& z) {
  std::vector<double> r;
  for (const cd& v : z) r.push_back(v.imag());
  return r;
}

// Tolerances for a transform of length n computed in dtype d against the exact DFT of values in
// [-1, 1): float64 rounds at 1e-16 relative, growing with log n; results near 0 need the
// absolute part (sqrt(n) sized sums).
double atol_of(tf::DType d, int64_t n) {
  const double scale = std::sqrt(static_cast<double>(std::max<int64_t>(n, 1)));
  return (d == tf::float32 ? 2e-6 : 1e-13) * scale * std::log2(static_cast<double>(n) + 2);
}

// Radix 4, 2, 3 and 5 butterflies, the plain DFT of 7, 11 and 13, and Bluestein (17, 257).
const std::vector<int64_t> kLengths = {1, 2, 3, 5, 8, 12, 17, 28, 64, 65, 66, 100, 257, 1000};

}  // namespace

TEST_CASE("signal: fft and ifft equal the plain DFT for every length", "[cpu][cuda][signal]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    for (tf::DType d : {tf::float32, tf::float64}) {
      for (int64_t n : kLengths) {
        INFO("dtype " << tf::dtype_name(d) << ", n " << n);
        const int64_t rows = 3;
        const auto re = random_values(static_cast<size_t>(rows * n), -1, 1, 3);
        const auto im = random_values(static_cast<size_t>(rows * n), -1, 1, 4);
        std::vector<cd> z;
        for (size_t i = 0; i < re.size(); ++i) z.emplace_back(re[i], im[i]);
        const sig::ComplexTensor x{make(re, {rows, 1, n}, d), make(im, {rows, 1, n}, d)};
        const sig::ComplexTensor y = sig::fft(x);
        CHECK(y.real.shape() == tf::TensorShape{rows, 1, n});
        CHECK(y.real.dtype() == d);
        const auto want = naive_dft(z, n, -1);
        const double atol = atol_of(d, n);
        check_values(y.real, reals(want), 0, atol);
        check_values(y.imag, imags(want), 0, atol);
        auto inv = naive_dft(z, n, +1);
        for (cd& v : inv) v /= static_cast<double>(n);
        const sig::ComplexTensor yi = sig::ifft(x);
        check_values(yi.real, reals(inv), 0, atol);
        check_values(yi.imag, imags(inv), 0, atol);
        // ifft(fft(x)) == x.
        const sig::ComplexTensor back = sig::ifft(y);
        check_values(back.real, re, 0, atol);
        check_values(back.imag, im, 0, atol);
      }
    }
  }
}

TEST_CASE("signal: rfft and irfft equal the plain DFT, crop and pad as TF", "[cpu][cuda][signal]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    for (tf::DType d : {tf::float32, tf::float64}) {
      for (int64_t n : kLengths) {
        INFO("dtype " << tf::dtype_name(d) << ", n " << n);
        const int64_t rows = 2, m = n / 2 + 1;
        const auto v = random_values(static_cast<size_t>(rows * n), -1, 1, 5);
        std::vector<cd> z(v.begin(), v.end());
        const auto full = naive_dft(z, n, -1);
        std::vector<cd> half;
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t k = 0; k < m; ++k) half.push_back(full[static_cast<size_t>(r * n + k)]);
        const sig::ComplexTensor y = sig::rfft(make(v, {rows, n}, d));
        CHECK(y.real.shape() == tf::TensorShape{rows, m});
        const double atol = atol_of(d, n);
        check_values(y.real, reals(half), 0, atol);
        check_values(y.imag, imags(half), 0, atol);
        // irfft(rfft(x), n) == x, for odd and even n.
        check_values(sig::irfft(y, n), v, 0, atol);
      }
      // tf.signal.rfft([1., 2, 3, 4, 5], [3]) and [8]: cropped and zero-padded.
      const tf::Tensor x = make({1, 2, 3, 4, 5}, {5}, d);
      const double tol = d == tf::float32 ? 1e-5 : 1e-12;
      const sig::ComplexTensor c3 = sig::rfft(x, 3);
      check_values(c3.real, {6.0, -1.5}, 0, tol);
      check_values(c3.imag, {0.0, 0.8660254037844386}, 0, tol);
      const sig::ComplexTensor c8 = sig::rfft(x, 8);
      check_values(c8.real, {15.0, -5.414213562373096, 3.0, -2.5857864376269046, 3.0}, 0, tol);
      check_values(c8.imag, {0.0, -7.242640687119285, 2.0, -1.2426406871192848, 0.0}, 0, tol);
      // tf.signal.irfft([1+1j, 2+2j, 3+3j]) (the imaginary parts of bins 0 and 2 are ignored)
      // and with fft_length [5] (the input then has bins 0..2 of 5, none ignored but bin 0's).
      const sig::ComplexTensor h{make({1, 2, 3}, {3}, d), make({1, 2, 3}, {3}, d)};
      check_values(sig::irfft(h), {2.0, -1.5, 0.0, 0.5}, 0, tol);
      check_values(sig::irfft(h, 5), {2.2, -1.98979431, 0.59464642, -0.74743282, 0.94258072}, 0,
                   1e-6);
      // fft_length 2 crops the three bins to two; 7 pads them to four.
      check_values(sig::irfft(h, 2), {1.5, -0.5}, 0, tol);
      CHECK(sig::irfft(h, 7).shape() == tf::TensorShape{7});
      // Empty batches and a length of 0 (TF's process aborts on fft_length 0).
      CHECK(sig::rfft(make({}, {0, 4}, d)).real.shape() == tf::TensorShape{0, 3});
      CHECK(sig::rfft(make({}, {2, 0}, d)).real.shape() == tf::TensorShape{2, 0});
      CHECK(sig::rfft(make({1, 2}, {2, 1}, d), 0).imag.shape() == tf::TensorShape{2, 0});
      CHECK(sig::irfft(h, 0).shape() == tf::TensorShape{0});
    }
  }
}

// The CPU kernels transform several rows at once (one per vector lane, a short batch padded
// with zeros): a row's result must not depend on how many rows come with it, nor where.
TEST_CASE("signal: a row's transform does not depend on the other rows", "[cpu][signal]") {
  for (tf::DType d : {tf::float32, tf::float64}) {
    for (int64_t n : {int64_t{8}, int64_t{15}, int64_t{17}, int64_t{1000}}) {
      INFO("dtype " << tf::dtype_name(d) << ", n " << n);
      const int64_t rows = 11;
      const auto re = random_values(static_cast<size_t>(rows * n), -1, 1, 7);
      const auto im = random_values(static_cast<size_t>(rows * n), -1, 1, 8);
      const sig::ComplexTensor x{make(re, {rows, n}, d), make(im, {rows, n}, d)};
      const sig::ComplexTensor all = sig::fft(x);
      const tf::Tensor real_all = sig::rfft(x.real).real, inv_all = sig::irfft(sig::rfft(x.real));
      for (int64_t r : {int64_t{0}, int64_t{5}, int64_t{10}}) {
        const auto row = [&](const tf::Tensor& t) { return tf::slice(t, {r, 0}, {1, -1}); };
        const sig::ComplexTensor one = sig::fft({row(x.real), row(x.imag)});
        check_close(one.real, row(all.real), 0, 0);
        check_close(one.imag, row(all.imag), 0, 0);
        check_close(sig::rfft(row(x.real)).real, row(real_all), 0, 0);
        check_close(sig::irfft(sig::rfft(row(x.real))), row(inv_all), 0, 0);
      }
    }
  }
}

TEST_CASE("signal: long transforms keep float64 accuracy", "[cpu][cuda][signal]") {
  // 4096 (radix 2) and 4099 (prime: Bluestein's convolution of length 16384).
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    for (int64_t n : {int64_t{4096}, int64_t{4099}}) {
      INFO("n " << n);
      const auto v = random_values(static_cast<size_t>(n), -1, 1, 11);
      std::vector<cd> z(v.begin(), v.end());
      const auto want = naive_dft(z, n, -1);
      const sig::ComplexTensor y = sig::fft({make(v, {n}), tf::zeros({n}, tf::float64)});
      check_values(y.real, reals(want), 0, 1e-11);
      check_values(y.imag, imags(want), 0, 1e-11);
    }
  }
}

TEST_CASE("signal: fft2d, abs and angle", "[cpu][cuda][signal]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    // tf.signal.fft2d(tf.complex([[1., 2, 0], [3, -1, 4]], [[0.5, -1, 2], [0, 1, -2]])).
    const sig::ComplexTensor z{make({1, 2, 0, 3, -1, 4}, {2, 3}),
                               make({0.5, -1, 2, 0, 1, -2}, {2, 3})};
    const sig::ComplexTensor f = sig::fft2d(z);
    check_values(f.real, {9.0, 1.5, 1.5, -3.0, -6.696152422706632, 3.696152422706632}, 0, 1e-12);
    check_values(f.imag,
                 {0.5, 3.0980762113533156, -2.0980762113533156, 2.5, -6.5621778264910695,
                  5.5621778264910695},
                 0, 1e-12);
    const sig::ComplexTensor back = sig::ifft2d(f);
    check_values(back.real, {1, 2, 0, 3, -1, 4}, 0, 1e-12);
    check_values(back.imag, {0.5, -1, 2, 0, 1, -2}, 0, 1e-12);
    // |z| without overflow in float32 (1e30^2 would be inf), 0 at 0.
    const sig::ComplexTensor big{make({3e30, 0, -3, 0}, {4}, tf::float32),
                                 make({4e30, 0, 4, -2}, {4}, tf::float32)};
    check_values(sig::abs(big), {5e30, 0, 5, 2}, 1e-6, 0);
    check_values(sig::angle(big),
                 {std::atan2(4.0, 3.0), 0.0, std::atan2(4.0, -3.0), -std::numbers::pi / 2}, 1e-6,
                 1e-7);
  }
}

TEST_CASE("signal: transform gradients equal central differences",
          "[cpu][cuda][signal][autograd]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    for (int64_t n : {int64_t{1}, int64_t{4}, int64_t{5}, int64_t{6}}) {
      INFO("n " << n);
      // x = [re; im] stacked on a leading axis of 2.
      auto parts = [n](const tf::Tensor& x) {
        auto p = tf::split(x, 2, 0);
        return sig::ComplexTensor{tf::reshape(p[0], {3, n}), tf::reshape(p[1], {3, n})};
      };
      auto joined = [](const sig::ComplexTensor& z) { return tf::concat({z.real, z.imag}, 0); };
      check_gradient([&](const tf::Tensor& x) { return joined(sig::fft(parts(x))); }, {2, 3, n});
      check_gradient([&](const tf::Tensor& x) { return joined(sig::ifft(parts(x))); }, {2, 3, n});
      // Only one part used: the other output's cotangent is undefined.
      check_gradient([&](const tf::Tensor& x) { return sig::fft(parts(x)).imag; }, {2, 3, n});
      check_gradient([&](const tf::Tensor& x) { return joined(sig::rfft(x)); }, {3, n});
      check_gradient([&](const tf::Tensor& x) { return joined(sig::rfft(x, n + 3)); }, {3, n});
      check_gradient([&](const tf::Tensor& x) { return sig::rfft(x, 2).real; }, {3, n});
      for (int64_t len : {n, 2 * n - 1, 2 * n, n + 5}) {
        INFO("irfft length " << len);
        check_gradient([&](const tf::Tensor& x) { return sig::irfft(parts(x), len); }, {2, 3, n});
      }
    }
    check_gradient(
        [](const tf::Tensor& x) {
          auto p = tf::split(x, 2, 0);
          const sig::ComplexTensor z{tf::reshape(p[0], {3, 4}), tf::reshape(p[1], {3, 4})};
          const sig::ComplexTensor f = sig::fft2d(z);
          return tf::concat({f.real, f.imag}, 0);
        },
        {2, 3, 4});
    // abs away from 0, then at an exact zero: TF's gradient there is 0.
    check_gradient(
        [](const tf::Tensor& x) {
          auto p = tf::split(x, 2, 0);
          return sig::abs({p[0], p[1]});
        },
        {2, 3}, {0.3, 0.7, -2, 0.5, -0.2, 1});
    tf::GradientTape tape;
    const tf::Tensor re = make({0, 3}, {2}), im = make({0, 4}, {2});
    tape.watch(re);
    tape.watch(im);
    const tf::Tensor m = tf::reduce_sum(sig::abs({re, im}));
    auto g = tape.gradient(m, std::vector<tf::Tensor>{re, im});
    check_values(g[0], {0, 0.6}, 0, 1e-12);
    check_values(g[1], {0, 0.8}, 0, 1e-12);
  }
}

TEST_CASE("signal: second-order gradients through nested tapes", "[cpu][cuda][signal][autograd]") {
  // d/dx of the first-order gradient of sum(w |rfft(x)|^2) + sum(v irfft(rfft(x) * x)): every
  // transform's vjp is recorded again and differentiated.
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    for (int64_t n : {int64_t{6}, int64_t{7}}) {
      INFO("n " << n);
      const int64_t m = n / 2 + 1;
      const tf::Tensor w = make(random_values(static_cast<size_t>(2 * m), 0, 1, 21), {2, m});
      const tf::Tensor v = make(random_values(static_cast<size_t>(2 * n), -1, 1, 22), {2, n});
      check_gradient(
          [&](const tf::Tensor& x) {
            tf::GradientTape inner;
            inner.watch(x);
            const sig::ComplexTensor f = sig::rfft(x);
            const tf::Tensor power = f.real * f.real + f.imag * f.imag;
            const tf::Tensor back = sig::irfft({f.real * tf::slice(x, {0, 0}, {-1, m}), f.imag}, n);
            const tf::Tensor l = tf::reduce_sum(power * w) + tf::reduce_sum(back * v);
            return inner.gradient(l, x);
          },
          {2, n}, {}, 1e-6, 1e-7);
    }
  }
}

TEST_CASE("signal: frame and overlap_and_add as TF", "[cpu][cuda][signal]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    std::vector<double> r(10);
    for (int i = 0; i < 10; ++i) r[static_cast<size_t>(i)] = i;
    const tf::Tensor x = make(r, {10}, tf::float32);
    // tf.signal.frame(tf.range(10.), 4, 3) and with pad_end=True.
    const tf::Tensor f = sig::frame(x, 4, 3);
    CHECK(f.shape() == tf::TensorShape{3, 4});
    check_values(f, {0, 1, 2, 3, 3, 4, 5, 6, 6, 7, 8, 9}, 0, 0);
    const tf::Tensor fp = sig::frame(x, 4, 3, true);
    check_values(fp, {0, 1, 2, 3, 3, 4, 5, 6, 6, 7, 8, 9, 9, 0, 0, 0}, 0, 0);
    check_values(sig::frame(x, 4, 3, true, -1.0),
                 {0, 1, 2, 3, 3, 4, 5, 6, 6, 7, 8, 9, 9, -1, -1, -1}, 0, 0);
    // Along axis 0 of (10, 2): (frames, frame_length, 2); and too short a signal: no frames.
    const tf::Tensor x2 = tf::stack({x, x * 10.0}, 1);
    const tf::Tensor f2 = sig::frame(x2, 2, 4, false, 0.0, 0);
    CHECK(f2.shape() == tf::TensorShape{3, 2, 2});
    check_values(f2, {0, 0, 1, 10, 4, 40, 5, 50, 8, 80, 9, 90}, 0, 0);
    CHECK(sig::frame(make({1, 2, 3}, {3}), 4, 3).shape() == tf::TensorShape{0, 4});
    CHECK(sig::frame(make({}, {0}), 4, 3, true).shape() == tf::TensorShape{0, 4});
    CHECK(sig::frame(tf::zeros({2, 5, 3}), 2, 1, false, 0.0, 1).shape() ==
          tf::TensorShape{2, 4, 2, 3});
    // tf.signal.overlap_and_add(tf.reshape(tf.range(12.), [3, 4]), 3).
    const tf::Tensor ola = sig::overlap_and_add(tf::reshape(tf::range(0.0, 12.0), {3, 4}), 3);
    check_values(ola, {0, 1, 2, 7, 5, 6, 15, 9, 10, 11}, 0, 0);
    // Batched, and a hop longer than the frame (gaps of zeros).
    const tf::Tensor ob = sig::overlap_and_add(tf::reshape(tf::range(0.0, 8.0), {2, 2, 2}), 3);
    CHECK(ob.shape() == tf::TensorShape{2, 5});
    check_values(ob, {0, 1, 0, 2, 3, 4, 5, 0, 6, 7}, 0, 0);
    CHECK(sig::overlap_and_add(tf::zeros({0, 4}), 3).shape() == tf::TensorShape{0});
    check_gradient([](const tf::Tensor& s) { return sig::frame(s, 3, 2, true, 0.0, 1); }, {2, 7});
    check_gradient([](const tf::Tensor& s) { return sig::overlap_and_add(s, 2); }, {2, 4, 3});
  }
}

TEST_CASE("signal: windows, stft and inverse_stft as TF", "[cpu][cuda][signal]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    // tf.signal.hann_window(5) (periodic changes only even lengths), hann_window(6) both ways,
    // hamming_window(4).
    check_values(sig::hann_window(5), {0, 0.5, 1, 0.5, 0}, 0, 1e-7);
    check_values(sig::hann_window(5, false), {0, 0.5, 1, 0.5, 0}, 0, 1e-7);
    check_values(sig::hann_window(6), {0, 0.25, 0.75, 1, 0.75, 0.25}, 0, 1e-7);
    check_values(
        sig::hann_window(6, false),
        {0, 0.34549152851104736, 0.9045085310935974, 0.9045084714889526, 0.3454914391040802, 0}, 0,
        1e-7);
    check_values(sig::hamming_window(4), {0.08, 0.54, 1, 0.54}, 0, 1e-7);
    check_values(sig::hann_window(1, true, tf::float64), {1}, 0, 0);
    CHECK(sig::hann_window(0).shape() == tf::TensorShape{0});
    // tf.signal.stft(x, 4, 3, 4) and stft(x, 3, 2, pad_end=True) (fft_length 4) of a float64 x.
    const tf::Tensor x = make({0.5, -1.0, 2.0, 0.25, 3.0, -0.75, 1.5, 0.0, -2.0, 1.0}, {10});
    const sig::ComplexTensor s = sig::stft(x, 4, 3, 4);
    CHECK(s.real.shape() == tf::TensorShape{3, 3});
    check_values(s.real, {1.625, -2.0, 2.375, 1.5, 0.75, -3.0, -1.5, 2.0, -2.5}, 0, 1e-12);
    check_values(s.imag, {0, 0.625, 0, 0, -0.75, 0, 0, 0.5, 0}, 0, 1e-12);
    const sig::ComplexTensor s2 = sig::stft(x, 3, 2, -1, sig::hann_window_fn(), true);
    CHECK(s2.real.shape() == tf::TensorShape{5, 3});
    check_values(s2.real, {-1, 0, 1, 0.25, 0, -0.25, -0.75, 0, 0.75, 0, 0, 0, 1, 0, -1}, 0, 1e-12);
    check_values(s2.imag, {0, 1, 0, 0, -0.25, 0, 0, 0.75, 0, 0, 0, 0, 0, -1, 0}, 0, 1e-12);
    // tf.signal.inverse_stft_window_fn(3)(8, tf.float64), and inverse_stft of s with it.
    check_values(sig::inverse_stft_window_fn(3)(8, tf::float64),
                 {0.0, 0.14042339787513936, 0.5109583235891316, 0.872260419102717,
                  0.9588709389996283, 0.872260419102717, 0.5109583235891318, 0.14042339787513947},
                 0, 1e-12);
    check_values(sig::inverse_stft(s, 4, 3, 4, sig::inverse_stft_window_fn(3)),
                 {0.0, -1.0, 2.0, 0.25, 3.0, -0.75, 1.5, 0.0, -2.0, 1.0}, 0, 1e-12);
    // A batch of signals round-trips away from the edges (frame 512, hop 128, fft 512).
    const int64_t len = 4096;
    const tf::Tensor batch =
        make(random_values(static_cast<size_t>(2 * len), -1, 1, 31), {2, len}, tf::float32);
    const sig::ComplexTensor sb = sig::stft(batch, 512, 128);
    CHECK(sb.real.shape() == tf::TensorShape{2, 29, 257});
    const tf::Tensor rb = sig::inverse_stft(sb, 512, 128, -1, sig::inverse_stft_window_fn(128));
    CHECK(rb.shape() == tf::TensorShape{2, 28 * 128 + 512});
    check_close(tf::slice(rb, {0, 512}, {-1, 3000}), tf::slice(batch, {0, 512}, {-1, 3000}), 0,
                1e-5);
    check_gradient(
        [](const tf::Tensor& sx) {
          const sig::ComplexTensor z = sig::stft(sx, 5, 2, 8, sig::hamming_window_fn(), true);
          return tf::concat({z.real, z.imag}, 1);
        },
        {2, 11});
    check_gradient(
        [](const tf::Tensor& sx) {
          const sig::ComplexTensor z{tf::slice(sx, {0, 0, 0}, {-1, -1, 3}),
                                     tf::slice(sx, {0, 0, 3}, {-1, -1, 3})};
          return sig::inverse_stft(z, 4, 2, 4);
        },
        {2, 4, 6});
  }
}

TEST_CASE("signal: dct, idct, mel matrix and mfccs as TF", "[cpu][cuda][signal]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor y = make({1.0, 2.0, -1.0, 0.5, 3.0}, {5});
    // tf.signal.dct(y, type=t) and with norm='ortho'.
    check_values(sig::dct(y, 1), {7.0, 0.12132034355964283, 6.0, -4.121320343559643, -3.0}, 0,
                 1e-12);
    check_values(
        sig::dct(y, 2),
        {11.0, -2.040870308303195, 6.927050983124842, -5.204310558055353, -3.572949016875158}, 0,
        1e-12);
    check_values(sig::dct(y, 2, -1, -1, "ortho"),
                 {2.4596747752497685, -0.6453798583248146, 2.1905258574783097, -1.6457475014316874,
                  -1.1298656856984886},
                 0, 1e-12);
    check_values(
        sig::dct(y, 3),
        {5.628079294972877, -1.8359834846250516, 9.0, -4.636152470374529, -3.155943339973298}, 0,
        1e-12);
    check_values(sig::dct(y, 3, -1, -1, "ortho"),
                 {1.9107407718980136, -0.44960312630366933, 2.977035723634662, -1.3350943091368621,
                  -0.8670110825923545},
                 0, 1e-12);
    check_values(sig::dct(y, 4),
                 {5.517786505551584, 0.11033313187833538, 4.949747468305834, -9.64659060536453,
                  2.117816888131638},
                 0, 1e-12);
    check_values(sig::dct(y, 4, -1, -1, "ortho"),
                 {1.744877300008432, 0.03489039981152716, 1.5652475842498532, -3.0505197968134414,
                  0.6697125033665995},
                 0, 1e-12);
    // tf.signal.idct(y) (type 2 -> dct type 3) and dct(y, n=3 / 7).
    check_values(
        sig::idct(y),
        {5.628079294972877, -1.8359834846250516, 9.0, -4.636152470374529, -3.155943339973298}, 0,
        1e-12);
    check_values(sig::dct(y, 2, 3), {4.0, 3.4641016151377553, -4.0}, 0, 1e-12);
    check_values(sig::dct(y, 2, 7),
                 {11.0, 1.606111841295301, -0.8019377358048383, 7.627551305920415,
                  -2.2469796037174667, -9.286596030236417, 0.5549581320873715},
                 0, 1e-12);
    // idct(dct(x)) with "ortho" is x for types 2-4; a float32 batch.
    const tf::Tensor xb = make(random_values(24, -1, 1, 41), {2, 3, 4}, tf::float32);
    for (int t : {2, 3, 4})
      check_close(sig::idct(sig::dct(xb, t, -1, -1, "ortho"), t, -1, -1, "ortho"), xb, 0, 1e-5);
    // tf.signal.mfccs_from_log_mel_spectrograms(tf.reshape(y, [1, 5])).
    check_values(sig::mfccs_from_log_mel_spectrograms(tf::reshape(y, {1, 5})),
                 {3.4785054261852175, -0.6453798583248146, 2.1905258574783097, -1.6457475014316874,
                  -1.1298656856984886},
                 0, 1e-12);
    // tf.signal.linear_to_mel_weight_matrix(3, 9, 16000, 20, 8000, tf.float64).
    check_values(sig::linear_to_mel_weight_matrix(3, 9, 16000, 20, 8000, tf::float64),
                 {0.0,
                  0.0,
                  0.0,
                  0.6208797222337807,
                  0.3791202777662193,
                  0.0,
                  0.0,
                  0.8782543236803699,
                  0.12174567631963004,
                  0.0,
                  0.372471161483482,
                  0.627528838516518,
                  0.0,
                  0.0,
                  0.9884482254247975,
                  0.0,
                  0.0,
                  0.67879003654831,
                  0.0,
                  0.0,
                  0.41931560987668376,
                  0.0,
                  0.0,
                  0.19600508745075187,
                  0.0,
                  0.0,
                  0.0},
                 0, 1e-12);
    // tf.signal.linear_to_mel_weight_matrix(4, 5, 8000, 125, 3800) in float32.
    check_values(sig::linear_to_mel_weight_matrix(4, 5, 8000, 125, 3800),
                 {0,        0,          0, 0, 0, 0.8690782, 0.13092178, 0, 0, 0,
                  0.505573, 0.49442706, 0, 0, 0, 0.5769244, 0,          0, 0, 0},
                 0, 1e-6);
    for (int t : {1, 2, 3, 4}) {
      INFO("dct type " << t);
      check_gradient([t](const tf::Tensor& v) { return sig::dct(v, t); }, {2, 5});
    }
    check_gradient([](const tf::Tensor& v) { return sig::mfccs_from_log_mel_spectrograms(v); },
                   {3, 4});
  }
}

TEST_CASE("signal: traced equals eager, one trace for a None batch", "[cpu][cuda][signal][jit]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    tf::FunctionOptions opts;
    opts.input_signature = {tf::TensorSpec({tf::None, tf::None, 64}, tf::float32)};
    // A log-mel spectrogram and its gradient, as an audio model's front end would.
    auto body = [](const tf::Tensor& x) {
      tf::GradientTape tape;
      tape.watch(x);
      const sig::ComplexTensor s = sig::stft(x, 16, 8, 16);
      const tf::Tensor mag = sig::abs(s);
      const tf::Tensor mel =
          tf::linalg::tensordot(mag, sig::linear_to_mel_weight_matrix(4, 9, 1000, 20, 500), 1);
      const tf::Tensor lm = tf::log(mel + 1e-3);
      const tf::Tensor back = sig::inverse_stft(s, 16, 8, 16);
      const tf::Tensor loss = tf::reduce_sum(lm) + tf::reduce_sum(back * back);
      return tf::concat({tf::reshape(lm, {-1}), tf::reshape(tape.gradient(loss, x), {-1})}, 0);
    };
    auto f = tf::function(body, opts);
    for (int64_t b : {int64_t{2}, int64_t{3}}) {
      for (int64_t c : {int64_t{1}, int64_t{2}}) {
        INFO("batch " << b << " x " << c);
        const tf::Tensor x = make(random_values(static_cast<size_t>(b * c * 64), -1, 1, 51),
                                  {b, c, 64}, tf::float32);
        check_close(f(x), body(x), 1e-5, 1e-5);
      }
    }
    CHECK(f.tracing_count() == 1);
    // The 3-D transforms with their gradient, the batch None.
    tf::FunctionOptions opts3;
    opts3.input_signature = {tf::TensorSpec({tf::None, 3, 4, 6}, tf::float64)};
    auto body3 = [](const tf::Tensor& x) {
      tf::GradientTape tape;
      tape.watch(x);
      const sig::ComplexTensor r = sig::rfft3d(x, {2, 5, 6});
      const sig::ComplexTensor c = sig::fft3d(r);
      const tf::Tensor back = sig::irfft3d(sig::ifft3d(c), {3, 4, 6});
      const tf::Tensor loss = tf::reduce_sum(sig::abs(c)) + tf::reduce_sum(back * x);
      return tf::concat({tf::reshape(back, {-1}), tf::reshape(tape.gradient(loss, x), {-1})}, 0);
    };
    auto f3 = tf::function(body3, opts3);
    for (int64_t b : {int64_t{1}, int64_t{3}}) {
      INFO("3-D batch " << b);
      const tf::Tensor x =
          make(random_values(static_cast<size_t>(b * 72), -1, 1, 52), {b, 3, 4, 6});
      check_close(f3(x), body3(x), 1e-12, 1e-12);
    }
    CHECK(f3.tracing_count() == 1);
  }
}

TEST_CASE("signal: errors name the op and the shapes or dtypes", "[cpu][signal]") {
  const tf::Tensor x = tf::zeros({2, 4});
  require_error([] { sig::rfft(tf::zeros({2, 4}, tf::float16)); }, {"rfft", "float16"});
  require_error([] { sig::rfft(tf::zeros({2, 4}, tf::int32)); }, {"rfft", "int32"});
  require_error([] { sig::rfft(tf::Tensor(1.0f)); }, {"rfft", "rank >= 1", "()"});
  require_error([&] { sig::rfft(x, -2); }, {"rfft", "fft_length", "-2"});
  require_error(
      [&] {
        sig::fft({x, tf::zeros({2, 3})});
      },
      {"fft", "one shape and dtype", "(2, 4)", "(2, 3)"});
  require_error(
      [&] {
        sig::fft({x, tf::zeros({2, 4}, tf::float64)});
      },
      {"fft", "float32", "float64"});
  require_error([&] { sig::ifft2d({tf::zeros({4}), tf::zeros({4})}); }, {"ifft2d", "rank >= 2"});
  require_error(
      [] {
        sig::irfft({tf::zeros({2, 0}), tf::zeros({2, 0})});
      },
      {"irfft", "at least one frequency"});
  require_error([&] { sig::frame(x, 0, 1); }, {"frame", "frame_length", "0"});
  require_error([&] { sig::frame(x, 2, 1, false, 0.0, 2); }, {"frame", "axis 2"});
  require_error([&] { sig::overlap_and_add(tf::zeros({4}), 1); }, {"overlap_and_add", "(4,)"});
  require_error([&] { sig::stft(tf::zeros({8}, tf::int64), 4, 2); }, {"stft", "int64"});
  require_error(
      [] { sig::stft(tf::zeros({8}), 4, 2, -1, [](int64_t, tf::DType) { return tf::ones({3}); }); },
      {"stft", "window_fn", "(4,)", "(3,)"});
  require_error([&] { sig::dct(x, 5); }, {"dct", "types 1, 2, 3 and 4", "5"});
  require_error([&] { sig::dct(x, 1, -1, -1, "ortho"); }, {"dct", "ortho", "type 1"});
  require_error([&] { sig::dct(x, 2, -1, 0); }, {"dct", "axis must be -1", "0"});
  require_error([&] { sig::dct(x, 2, -1, -1, "forward"); }, {"dct", "norm", "forward"});
  require_error([] { sig::linear_to_mel_weight_matrix(20, 129, 8000, 125, 5000); },
                {"linear_to_mel_weight_matrix", "Nyquist", "5000"});
  require_error([] { sig::linear_to_mel_weight_matrix(20, 129, 8000, 300, 200); },
                {"linear_to_mel_weight_matrix", "lower_edge_hertz 300", "200"});
  require_error([] { sig::hann_window(-1); }, {"hann_window", "-1"});
  require_error([] { sig::hamming_window(4, true, tf::int32); }, {"hamming_window", "int32"});
}

TEST_CASE("signal: rfft2d and irfft2d as TF", "[cpu][cuda][signal]") {
  std::vector<double> v(24);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(static_cast<int>(i % 7) - 3);
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor x = make(v, {2, 3, 4});
    // tf.signal.rfft2d(x) of x = (np.arange(24) % 7 - 3).reshape(2, 3, 4), float64.
    const sig::ComplexTensor r = sig::rfft2d(x);
    CHECK(r.real.shape() == tf::TensorShape{2, 3, 3});
    check_values(r.real,
                 {-5.0, -6.0, 1.0, -6.5, -6.06217782649107, -3.5, -6.5, 6.06217782649107, -3.5,
                  -1.0, 8.0, 1.0, 0.5, 3.5, -3.5, 0.5, 3.5, -3.5},
                 0, 1e-12);
    check_values(r.imag,
                 {0.0, -1.0, 0.0, -4.330127018922193, 3.5, -6.06217782649107, 4.330127018922193,
                  3.5, 6.06217782649107, 0.0, -1.0, 0.0, -4.330127018922193, -0.9378221735089296,
                  6.06217782649107, 4.330127018922193, -13.06217782649107, -6.06217782649107},
                 0, 1e-12);
    check_values(sig::irfft2d(r), v, 0, 1e-12);
    // tf.signal.rfft2d(x, [4, 6]): both axes zero-padded; irfft2d back with the same lengths.
    const sig::ComplexTensor r2 = sig::rfft2d(x, {4, 6});
    CHECK(r2.real.shape() == tf::TensorShape{2, 4, 4});
    check_values(tf::slice(tf::reshape(r2.real, {32}), {0}, {6}),
                 {-5.0, -3.5, -6.5, 1.0, -4.0, -4.330127018922193}, 0, 1e-12);
    check_values(tf::slice(tf::reshape(r2.imag, {32}), {0}, {6}),
                 {0.0, -0.8660254037844379, 2.598076211353316, 0.0, -3.0, -1.7679491924311228}, 0,
                 1e-12);
    check_values(tf::slice(tf::reshape(sig::irfft2d(r2, {4, 6}), {48}), {0}, {8}),
                 {-3.0, -2.0, -1.0, 0.0, 0.0, 0.0, 1.0, 2.0}, 0, 1e-12);
    check_gradient(
        [](const tf::Tensor& in) {
          const sig::ComplexTensor z = sig::rfft2d(in, {3, 5});
          return tf::concat({z.real, z.imag}, -1);
        },
        {2, 3, 4});
    check_gradient(
        [](const tf::Tensor& in) {
          auto p = tf::split(in, 2, 0);
          return sig::irfft2d({p[0], p[1]}, {3, 4});
        },
        {2, 3, 3});
  }
  require_error([] { sig::rfft2d(tf::zeros({4})); }, {"rfft2d", "rank >= 2", "(4,)"});
  require_error([] { sig::rfft2d(tf::zeros({2, 4}), {1, 2, 3}); }, {"rfft2d", "fft_length", "3"});
}

namespace {
// The 3-D DFT of each (d, h, w) block of x (sign -1 forward, +1 inverse, unnormalised), as a
// triple sum in long double.
std::vector<cd> naive_dft3(const std::vector<cd>& x, int64_t d, int64_t h, int64_t w, int sign) {
  const int64_t block = d * h * w;
  std::vector<cd> y(x.size());
  const long double two_pi = 2.0L * std::numbers::pi_v<long double>;
  for (size_t b = 0; b < x.size() / static_cast<size_t>(block); ++b)
    for (int64_t k0 = 0; k0 < d; ++k0)
      for (int64_t k1 = 0; k1 < h; ++k1)
        for (int64_t k2 = 0; k2 < w; ++k2) {
          long double re = 0, im = 0;
          for (int64_t j0 = 0; j0 < d; ++j0)
            for (int64_t j1 = 0; j1 < h; ++j1)
              for (int64_t j2 = 0; j2 < w; ++j2) {
                const long double a =
                    two_pi *
                    (static_cast<long double>((k0 * j0) % d) / static_cast<long double>(d) +
                     static_cast<long double>((k1 * j1) % h) / static_cast<long double>(h) +
                     static_cast<long double>((k2 * j2) % w) / static_cast<long double>(w));
                const cd v =
                    x[b * static_cast<size_t>(block) + static_cast<size_t>((j0 * h + j1) * w + j2)];
                re += v.real() * std::cos(a) - sign * v.imag() * std::sin(a);
                im += v.imag() * std::cos(a) + sign * v.real() * std::sin(a);
              }
          y[b * static_cast<size_t>(block) + static_cast<size_t>((k0 * h + k1) * w + k2)] =
              cd(static_cast<double>(re), static_cast<double>(im));
        }
  return y;
}
}  // namespace

TEST_CASE("signal: fft3d, ifft3d, rfft3d and irfft3d", "[cpu][cuda][signal]") {
  const int64_t batch = 2, d = 3, h = 4, w = 5;
  const size_t count = static_cast<size_t>(batch * d * h * w);
  const auto re = random_values(count, -1, 1, 31);
  const auto im = random_values(count, -1, 1, 32);
  std::vector<cd> z, real_z;
  for (size_t i = 0; i < count; ++i) {
    z.emplace_back(re[i], im[i]);
    real_z.emplace_back(re[i], 0.0);
  }
  const auto want = naive_dft3(z, d, h, w, -1);
  auto want_inv = naive_dft3(z, d, h, w, +1);
  for (cd& v : want_inv) v /= static_cast<double>(d * h * w);
  // The rfft3d of the real part: the w / 2 + 1 = 3 leading frequencies of its full DFT.
  const auto full_real = naive_dft3(real_z, d, h, w, -1);
  std::vector<cd> want_r;
  for (size_t i = 0; i < full_real.size(); ++i)
    if (static_cast<int64_t>(i) % w < 3) want_r.push_back(full_real[i]);
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    for (tf::DType dt : {tf::float32, tf::float64}) {
      INFO("dtype " << tf::dtype_name(dt));
      const double atol = atol_of(dt, d * h * w);
      const sig::ComplexTensor x{make(re, {batch, d, h, w}, dt), make(im, {batch, d, h, w}, dt)};
      const sig::ComplexTensor f = sig::fft3d(x);
      CHECK(f.real.shape() == tf::TensorShape{batch, d, h, w});
      check_values(f.real, reals(want), 0, atol);
      check_values(f.imag, imags(want), 0, atol);
      const sig::ComplexTensor fi = sig::ifft3d(x);
      check_values(fi.real, reals(want_inv), 0, atol);
      check_values(fi.imag, imags(want_inv), 0, atol);
      const sig::ComplexTensor back = sig::ifft3d(f);
      check_values(back.real, re, 0, atol);
      check_values(back.imag, im, 0, atol);
      const sig::ComplexTensor r = sig::rfft3d(x.real);
      CHECK(r.real.shape() == tf::TensorShape{batch, d, h, 3});
      check_values(r.real, reals(want_r), 0, atol);
      check_values(r.imag, imags(want_r), 0, atol);
      // Odd width: irfft3d needs the length given.
      check_values(sig::irfft3d(r, {d, h, w}), re, 0, atol);
    }
    // Cropped and zero-padded axes: rfft3d(x, {2, 6, 4}) is the DFT of x cut to depth 2 and
    // width 4, with two zero rows after its 4 rows; irfft3d undoes it with the same lengths.
    const tf::Tensor x = make(re, {batch, d, h, w});
    const tf::Tensor fitted =
        tf::pad(tf::slice(x, {0, 0, 0, 0}, {batch, 2, h, 4}), {{0, 0}, {0, 0}, {0, 2}, {0, 0}});
    const std::vector<double> fv = tf::detail::to_double_vector(fitted);
    std::vector<cd> fz;
    for (double v : fv) fz.emplace_back(v, 0.0);
    const auto full = naive_dft3(fz, 2, 6, 4, -1);
    std::vector<cd> want_fit;
    for (size_t i = 0; i < full.size(); ++i)
      if (i % 4 < 3) want_fit.push_back(full[i]);
    const sig::ComplexTensor rf = sig::rfft3d(x, {2, 6, 4});
    CHECK(rf.real.shape() == tf::TensorShape{batch, 2, 6, 3});
    check_values(rf.real, reals(want_fit), 0, 1e-12);
    check_values(rf.imag, imags(want_fit), 0, 1e-12);
    check_values(sig::irfft3d(rf, {2, 6, 4}), fv, 0, 1e-12);
    // The default width is 2 (m - 1): 4 here, so the same values come back.
    check_values(sig::irfft3d(rf), fv, 0, 1e-12);
    // TF 2.21 on x = (np.arange(120) % 7 - 3).reshape(2, 3, 4, 5): r = tf.signal.rfft3d(x, [2, 6,
    // 4]), then tf.signal.irfft3d(r, [3, 5, 7]) (depth padded, height cropped, the frequencies
    // padded to 4). TF computes them in float32; the values are NumPy's rfftn / irfftn, which
    // TF's equal to 1.1e-6.
    std::vector<double> steps(120);
    for (size_t i = 0; i < steps.size(); ++i) steps[i] = static_cast<double>(i % 7) - 3;
    const sig::ComplexTensor rs = sig::rfft3d(make(steps, {2, 3, 4, 5}), {2, 6, 4});
    check_values(tf::slice(tf::reshape(rs.real, {72}), {0}, {6}),
                 {-6.0, -2.0, -2.0, -3.5, 5.303847577293368, 10.5}, 0, 1e-12);
    check_values(tf::slice(tf::reshape(rs.imag, {72}), {0}, {6}),
                 {0.0, 2.0, 0.0, -9.526279441628825, -6.133974596215562, 0.8660254037844388}, 0,
                 1e-12);
    const tf::Tensor padded = sig::irfft3d(rs, {3, 5, 7});
    CHECK(padded.shape() == tf::TensorShape{2, 3, 5, 7});
    check_values(tf::slice(tf::reshape(padded, {210}), {0}, {6}),
                 {-1.6989743318610784, -1.3934512114729245, -0.4090133723711714,
                  -0.3263110712759944, -0.10615173915829948, 0.43482878084293686},
                 0, 1e-12);
    check_gradient(
        [](const tf::Tensor& in) {
          auto p = tf::split(in, 2, 0);
          const sig::ComplexTensor f = sig::fft3d({p[0], p[1]});
          return tf::concat({f.real, f.imag}, 0);
        },
        {2, 2, 3, 4});
    check_gradient(
        [](const tf::Tensor& in) {
          const sig::ComplexTensor f = sig::rfft3d(in, {3, 2, 5});
          return tf::concat({f.real, f.imag}, -1);
        },
        {2, 3, 4});
    check_gradient(
        [](const tf::Tensor& in) {
          auto p = tf::split(in, 2, 0);
          return sig::irfft3d({p[0], p[1]}, {3, 2, 4});
        },
        {2, 2, 3, 3});
  }
  require_error(
      [] {
        sig::fft3d({tf::zeros({4, 4}), tf::zeros({4, 4})});
      },
      {"fft3d", "rank >= 3", "(4, 4)"});
  require_error([] { sig::rfft3d(tf::zeros({2, 4})); }, {"rfft3d", "rank >= 3", "(2, 4)"});
  require_error([] { sig::rfft3d(tf::zeros({2, 2, 4}), {2, 4}); }, {"rfft3d", "fft_length", "2"});
  require_error(
      [] {
        sig::irfft3d({tf::zeros({2, 2, 4}), tf::zeros({2, 2, 4})}, {2, -1, 4});
      },
      {"irfft3d", "non-negative", "(2, -1, 4)"});
}

TEST_CASE("signal: fftnd, ifftnd, rfftnd and irfftnd as NumPy's fftn family",
          "[cpu][cuda][signal]") {
  std::vector<double> xv(24), yv(24);
  for (size_t i = 0; i < xv.size(); ++i) {
    xv[i] = static_cast<double>(static_cast<int>(i % 7) - 3);
    yv[i] = static_cast<double>(static_cast<int>(i % 5) - 2);
  }
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor x = make(xv, {2, 3, 4}), y = make(yv, {2, 3, 4});
    // np.fft.fftn(x + 1j y, s=[3, 5], axes=[0, 2], norm="ortho"): both axes padded, or cropped.
    const sig::ComplexTensor f = sig::fftnd({x, y}, {3, 5}, {0, 2}, "ortho");
    CHECK(f.real.shape() == tf::TensorShape{3, 3, 5});
    check_values(f.real,
                 {-1.549193338482967, 1.530209192173651,  -1.68249845842769,  -0.20912803886242,
                  0.619616194863621,  1.290994448735806,  -1.261740651773124, 0.009181429198535,
                  -0.366003518971625, 0.327568292810408,  -1.290994448735806, 0.298852827263958,
                  1.57706133170281,   0.291283386222621,  0.414791352282222,  -1.325586540732988,
                  -2.88648008182017,  -0.460834052787759, -0.264985901343293, -0.226091218259013,
                  0.96361137499428,   -0.341680382053669, -0.559882741095287, 0.226942924693208,
                  0.529466507815281,  -0.576313040373538, -0.7757915355167,   -0.322053493152955,
                  -1.689713991508205, -3.390676487523712, -1.772800136232946, -2.011566026476687,
                  1.11489141844195,   -1.117104574823024, -1.377398475852516, 0.069184183994364,
                  0.92807785401169,   -0.10193354479434,  -0.165758687357885, 2.324955855999774,
                  0.318114150626377,  -0.92020611310441,  -0.29089756615572,  -0.932015536505609,
                  -0.45740752793617},
                 0, 1e-12);
    check_values(f.imag,
                 {-0.258198889747161, -0.667315806719388, -1.079498907373801, 0.206279038106388,
                  -0.783254331737651, 0.258198889747161,  -1.569102350389246, 1.759826842804502,
                  -0.088728524930927, 0.930799591504316,  -0.516397779494322, 1.525141480062038,
                  -0.510723344184327, -0.742600394220854, -1.046414410898341, -0.645497224367903,
                  -2.207028817245959, 1.445320416048643,  -0.80991240486336,  -2.600938844542824,
                  -0.96361137499428,  0.428285212800121,  1.960071674418241,  -0.199843498923803,
                  3.120618097289131,  0.929019282997098,  0.73793967743717,   -1.5712020338594,
                  -1.011414949597064, 0.143544954244122,  -0.645497224367903, 2.387792799918224,
                  -0.875081655845975, -0.253442355468952, -0.959692484207216, -0.069184183994364,
                  -1.367204135384373, 2.352773286469334,  -0.657792695224749, 1.850859861223771,
                  -0.412621503502776, 2.062209896951393,  0.603718994006864,  0.838586382036294,
                  2.84419709422952},
                 0, 1e-12);
    // np.fft.ifftn(x + 1j y, s=[2, 2], axes=[-1, 1], norm="forward").
    const sig::ComplexTensor g = sig::ifftnd({x, y}, {2, 2}, {-1, 1}, "forward");
    CHECK(g.real.shape() == tf::TensorShape{2, 2, 2});
    check_values(g.real, {-2.0, -2.0, -8.0, 0.0, 4.0, -2.0, 6.0, 0.0}, 0, 1e-12);
    check_values(g.imag, {-3.0, 3.0, -3.0, -5.0, 0.0, -2.0, 2.0, 0.0}, 0, 1e-12);
    // np.fft.rfftn(x, s=[3, 2], axes=[2, 0]): the real axis is the last of `axes`, axis 0.
    const sig::ComplexTensor r = sig::rfftnd(x, {3, 2}, {2, 0});
    CHECK(r.real.shape() == tf::TensorShape{2, 3, 3});
    check_values(r.real,
                 {-4.0, 0.5, 0.5, 6.0, -3.0, -3.0, -5.0, 4.0, 4.0, -8.0, -3.5, -3.5, 6.0, 0.0, 0.0,
                  -1.0, -7.0, -7.0},
                 0, 1e-12);
    check_values(r.imag,
                 {0.0, -4.330127018922193, 4.330127018922193, 0.0, 1.732050807568877,
                  -1.732050807568877, 0.0, 1.732050807568877, -1.732050807568877, 0.0,
                  6.06217782649107, -6.06217782649107, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0},
                 0, 1e-12);
    check_values(sig::irfftnd(r, {3, 2}, {2, 0}),
                 {-3.0, -2.0, -1.0, 1.0, 2.0, 3.0, -2.0, -1.0, 0.0, 2.0, 3.0, -3.0, -1.0, 0.0, 1.0,
                  3.0, -3.0, -2.0},
                 0, 1e-12);
    // Default lengths (axis 0: 2 (m - 1) = 2), "ortho".
    const tf::Tensor b2 = sig::irfftnd(r, {}, {2, 0}, "ortho");
    CHECK(b2.shape() == tf::TensorShape{2, 3, 3});
    check_values(b2,
                 {-7.348469228349534, -4.898979485566357, -2.449489742783178, 2.449489742783178,
                  4.898979485566357, 7.348469228349535, -4.898979485566356, -2.449489742783178, 0.0,
                  4.898979485566356, 7.348469228349534, -7.348469228349535, -2.449489742783178, 0.0,
                  2.449489742783178, 7.348469228349534, -7.348469228349535, -4.898979485566357},
                 0, 1e-12);
    // Every axis by default; the 3-D functions are the innermost three.
    const sig::ComplexTensor all = sig::fftnd({x, y});
    const sig::ComplexTensor three = sig::fft3d({x, y});
    check_values(all.real, tf::detail::to_double_vector(three.real), 0, 1e-12);
    check_values(all.imag, tf::detail::to_double_vector(three.imag), 0, 1e-12);
    const sig::ComplexTensor back = sig::ifftnd(all);
    check_values(back.real, xv, 0, 1e-12);
    check_values(back.imag, yv, 0, 1e-12);
    check_values(sig::irfftnd(sig::rfftnd(x), {2, 3, 4}), xv, 0, 1e-12);
    for (const std::string norm : {"backward", "ortho", "forward"}) {
      INFO("norm " << norm);
      const sig::ComplexTensor t = sig::fftnd({x, y}, {}, {1, 2}, norm);
      const sig::ComplexTensor u = sig::ifftnd(t, {}, {1, 2}, norm);
      check_values(u.real, xv, 0, 1e-12);
      check_values(u.imag, yv, 0, 1e-12);
    }
    check_gradient(
        [](const tf::Tensor& in) {
          auto p = tf::split(in, 2, 0);
          const sig::ComplexTensor t = sig::fftnd({p[0], p[1]}, {3, 2}, {0, 2}, "ortho");
          return tf::concat({t.real, t.imag}, 0);
        },
        {2, 2, 3, 4});
    check_gradient(
        [](const tf::Tensor& in) {
          const sig::ComplexTensor t = sig::rfftnd(in, {2, 4}, {2, 1}, "forward");
          return tf::concat({t.real, t.imag}, 0);
        },
        {2, 3, 4});
    check_gradient(
        [](const tf::Tensor& in) {
          auto p = tf::split(in, 2, 0);
          return sig::irfftnd({p[0], p[1]}, {2, 3}, {2, 1});
        },
        {2, 2, 3, 4});
  }
  const sig::ComplexTensor z{tf::zeros({2, 3}), tf::zeros({2, 3})};
  require_error([&] { sig::fftnd(z, {}, {0, 2}); }, {"fftnd", "axis 2", "out of range", "(2, 3)"});
  require_error([&] { sig::fftnd(z, {}, {1, -1}); }, {"fftnd", "axis 1", "twice"});
  require_error(
      [&] {
        sig::ifftnd(z, {2}, {0, 1});
      },
      {"ifftnd", "fft_length", "one length per axis"});
  require_error([&] { sig::fftnd(z, {}, {}, "none"); }, {"fftnd", "norm", "none"});
  require_error([] { sig::rfftnd(tf::zeros({2}, tf::int32)); }, {"rfftnd", "int32"});
  require_error(
      [] {
        sig::irfftnd({tf::zeros({2, 0}), tf::zeros({2, 0})});
      },
      {"irfftnd", "non-negative"});
}

TEST_CASE("signal: fftshift, ifftshift and the kaiser, KBD and vorbis windows as TF",
          "[cpu][cuda][signal]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    std::vector<double> a(12), b(15);
    for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<double>(i);
    for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<double>(i);
    // tf.signal.fftshift / ifftshift of np.arange(12).reshape(3, 4), and of
    // np.arange(15).reshape(3, 5) with axes=1.
    check_values(sig::fftshift(make(a, {3, 4})),
                 {10.0, 11.0, 8.0, 9.0, 2.0, 3.0, 0.0, 1.0, 6.0, 7.0, 4.0, 5.0}, 0, 0);
    check_values(sig::ifftshift(make(a, {3, 4})),
                 {6.0, 7.0, 4.0, 5.0, 10.0, 11.0, 8.0, 9.0, 2.0, 3.0, 0.0, 1.0}, 0, 0);
    check_values(sig::fftshift(make(b, {3, 5}), {1}),
                 {3.0, 4.0, 0.0, 1.0, 2.0, 8.0, 9.0, 5.0, 6.0, 7.0, 13.0, 14.0, 10.0, 11.0, 12.0},
                 0, 0);
    check_values(sig::ifftshift(make(b, {3, 5}), {-1}),
                 {2.0, 3.0, 4.0, 0.0, 1.0, 7.0, 8.0, 9.0, 5.0, 6.0, 12.0, 13.0, 14.0, 10.0, 11.0},
                 0, 0);
    check_values(sig::ifftshift(sig::fftshift(make(b, {3, 5}))), b, 0, 0);
    // tf.signal.kaiser_window(8), (5, beta=3), kaiser_bessel_derived_window(8), (6, beta=4),
    // vorbis_window(6), all float64.
    check_values(
        sig::kaiser_window(8, 12.0, tf::float64),
        {5.277344132009767e-05, 0.03276828844175176, 0.33089863665707414, 0.8888676640466583,
         0.8888676640466583, 0.33089863665707414, 0.03276828844175176, 5.277344132009767e-05},
        0, 1e-14);
    check_values(
        sig::kaiser_window(5, 3.0, tf::float64),
        {0.20488475640125361, 0.7269255302876368, 1.0, 0.7269255302876368, 0.20488475640125361}, 0,
        1e-14);
    check_values(sig::kaiser_window(1, 12.0, tf::float64), {1.0}, 0, 0);
    CHECK(sig::kaiser_window(0).shape() == tf::TensorShape{0});  // TF's range op fails here
    check_values(sig::kaiser_bessel_derived_window(8, 12.0, tf::float64),
                 {0.006071827976921457, 0.388206239873495, 0.921572523094782, 0.9999815662826084,
                  0.9999815662826084, 0.921572523094782, 0.388206239873495, 0.006071827976921457},
                 0, 1e-14);
    check_values(sig::kaiser_bessel_derived_window(6, 4.0, tf::float64),
                 {0.22047876123724325, 0.7071067811865476, 0.9753917755667671, 0.9753917755667671,
                  0.7071067811865476, 0.22047876123724325},
                 0, 1e-14);
    check_values(sig::vorbis_window(6, tf::float64),
                 {0.10502933764982532, 0.7071067811865474, 0.9944691238207645, 0.9944691238207645,
                  0.7071067811865477, 0.10502933764982555},
                 0, 1e-14);
    const tf::Tensor w = sig::kaiser_window_fn(2.0)(16, tf::float32);
    CHECK(w.dtype() == tf::float32);
    // Large beta stays finite (I0(800) overflows float64; the scaled i0e does not).
    const std::vector<double> big =
        tf::detail::to_double_vector(sig::kaiser_window(9, 800.0, tf::float64));
    CHECK(big[4] == 1.0);
    CHECK(std::isfinite(big[0]));
  }
  require_error([] { sig::kaiser_bessel_derived_window(7); },
                {"kaiser_bessel_derived_window", "even", "7"});
  require_error([] { sig::vorbis_window(-1); }, {"vorbis_window", ">= 0", "-1"});
  require_error([] { sig::kaiser_window(4, 12.0, tf::int32); }, {"kaiser_window", "int32"});
  require_error([] { sig::fftshift(tf::zeros({2, 3}), {3}); }, {"fftshift", "axis 3"});
}

TEST_CASE("signal: mdct and inverse_mdct as TF", "[cpu][cuda][signal]") {
  std::vector<double> v(20);
  for (size_t i = 0; i < v.size(); ++i) v[i] = 0.5 * (static_cast<double>(i % 7) - 3);
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor x = make(v, {2, 10});
    // x = (np.arange(20) % 7 - 3).reshape(2, 10) * 0.5: tf.signal.mdct(x, 4) (vorbis window),
    // mdct(x, 8, norm="ortho", pad_end=True), mdct(x, 4, window_fn=None), and their
    // inverse_mdct with the same window and norm.
    const tf::Tensor m = sig::mdct(x, 4);
    CHECK(m.shape() == tf::TensorShape{2, 4, 2});
    check_values(m,
                 {1.382975980398185, -0.7945089828509095, -1.4081153311244667, -0.3364595414772006,
                  -2.724602271966397, 0.7323910293671058, 3.389322765630107, -2.498138074218484,
                  -2.803660986885792, -0.10743482079034605, 2.1766495193115047, 3.5696346521338898,
                  1.382975980398185, -0.7945089828509095, -1.4081153311244667, -0.3364595414772006},
                 0, 1e-12);
    const tf::Tensor m8 = sig::mdct(x, 8, sig::vorbis_window_fn(), true, "ortho");
    CHECK(m8.shape() == tf::TensorShape{2, 3, 4});
    check_values(
        m8, {-1.3776580760537382,  -0.8032537406846562,  -0.36451922981140794, -0.0938901298073087,
             1.3748550720702517,   -0.5984895774558934,  -0.8140678741196011,  1.163936683480854,
             -0.05561919191898673, 0.13298377033800834,  -0.14525135687110735, 0.12648423922251012,
             0.977413285133023,    1.7450786293612957,   -1.1890268915553839,  -0.8623731664691711,
             -0.9455120788926902,  -0.37986325944654725, -0.02772387992781876, 0.037758922230171924,
             0.07602986011849375,  -0.20381157954558055, 0.2781391243670016,   -0.3056617579385381},
        0, 1e-12);
    const tf::Tensor mn = sig::mdct(x, 4, nullptr);
    check_values(
        mn,
        {0.38268343236508984, 0.9238795325112867, -2.230442497387663, -0.15851266778110729,
         -0.27059805007309834, 0.6532814824381883, 3.583432747753155, -3.1078947444098337,
         -3.5370054622640392, -0.6997087679273043, 2.9958093621178423, 2.0062717328036808,
         0.38268343236508984, 0.9238795325112867, -2.230442497387663, -0.15851266778110729},
        0, 1e-12);
    check_values(sig::inverse_mdct(m),
                 {0.14402212210821158,
                  -0.6149975877187435,
                  -0.5,
                  -2.7755575615628914e-17,
                  0.5000000000000001,
                  1.0,
                  1.4999999999999998,
                  -1.5,
                  -1.0590134280449564,
                  -0.24800318618140507,
                  -0.1110039600815533,
                  0.4740047339817016,
                  0.9999999999999998,
                  1.5000000000000007,
                  -1.5,
                  -1.0000000000000004,
                  -0.5,
                  -2.7755575615628914e-17,
                  0.6960126541448084,
                  0.16299449211815015},
                 0, 1e-12);
    check_values(sig::inverse_mdct(m8, sig::vorbis_window_fn(), "ortho"),
                 {-0.005354962461716228,
                  -0.01104169318248423,
                  0.020960835166538624,
                  0.08946378076969451,
                  0.4999999999999996,
                  1.0000000000000009,
                  1.5000000000000004,
                  -1.5,
                  -1.0,
                  -0.5000000000000003,
                  -8.326672684688674e-17,
                  -2.0122792321330962e-16,
                  -1.7142205472848626e-17,
                  -1.8449503406330965e-17,
                  -9.718780495307167e-18,
                  -1.026067376410574e-18,
                  -0.08946378076969441,
                  -0.3037431465539359,
                  0.576606315957279,
                  1.4946450375382838,
                  -1.5000000000000002,
                  -1.0000000000000009,
                  -0.5000000000000002,
                  -2.7755575615628914e-16,
                  0.4999999999999999,
                  1.0000000000000007,
                  2.220446049250313e-16,
                  6.938893903907228e-17,
                  -3.918218393793972e-17,
                  4.34105962501905e-18,
                  2.286771881248745e-18,
                  -2.3452968603670265e-18},
                 0, 1e-12);
    check_values(
        sig::inverse_mdct(mn, nullptr),
        {-0.24999999999999994, 0.24999999999999994,    -0.4999999999999999,  2.7755575615628914e-17,
         0.4999999999999999,   0.9999999999999999,     1.4999999999999998,   -1.4999999999999998,
         -0.7499999999999999,  -0.7499999999999999,    -0.24999999999999994, 0.24999999999999994,
         0.9999999999999998,   1.4999999999999998,     -1.4999999999999996,  -0.9999999999999996,
         -0.4999999999999999,  2.7755575615628914e-17, 0.7499999999999999,   0.7499999999999999},
        0, 1e-12);
    // With KBD windows and "ortho" the inner samples come back exactly.
    const sig::WindowFn kbd = sig::kaiser_bessel_derived_window_fn(4.0);
    const tf::Tensor round = sig::inverse_mdct(sig::mdct(x, 4, kbd, false, "ortho"), kbd, "ortho");
    check_close(tf::slice(round, {0, 2}, {2, 6}), tf::slice(x, {0, 2}, {2, 6}), 0, 1e-12);
    check_gradient(
        [](const tf::Tensor& s) { return sig::mdct(s, 8, sig::vorbis_window_fn(), true); },
        {2, 11});
    check_gradient([](const tf::Tensor& s) { return sig::inverse_mdct(s, nullptr, "ortho"); },
                   {2, 3, 4});
  }
  require_error([] { sig::mdct(tf::zeros({2, 10}), 6); }, {"mdct", "multiple of 4", "6"});
  require_error(
      [] {
        sig::mdct(tf::zeros({2, 10}), 4, sig::vorbis_window_fn(), false, "l2");
      },
      {"mdct", "norm", "l2"});
  require_error([] { sig::inverse_mdct(tf::zeros({2, 3})); }, {"inverse_mdct", "even", "(2, 3)"});
  require_error(
      [] { sig::mdct(tf::zeros({8}), 4, [](int64_t, tf::DType) { return tf::zeros({3}); }); },
      {"mdct", "window_fn", "(4,)", "(3,)"});
}

namespace {

// dct of every row of x ([rows, n]) by its definition, TF's scaling (the float64 reference).
std::vector<double> dct_by_definition(const std::vector<double>& x, int64_t rows, int64_t n,
                                      int type, bool ortho) {
  const double pi = std::numbers::pi, nn = static_cast<double>(n);
  std::vector<double> y(x.size(), 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < n; ++k) {
      double s = 0;
      for (int64_t j = 0; j < n; ++j) {
        const double xj = x[static_cast<size_t>(r * n + j)];
        const double dj = static_cast<double>(j), dk = static_cast<double>(k);
        switch (type) {
          case 1:
            s += (j == 0 || j == n - 1 ? 1.0 : 2.0) * xj * std::cos(pi * dk * dj / (nn - 1));
            break;
          case 2:
            s += 2.0 * xj * std::cos(pi * dk * (2 * dj + 1) / (2 * nn)) *
                 (!ortho   ? 1.0
                  : k == 0 ? std::sqrt(1 / (4 * nn))
                           : std::sqrt(1 / (2 * nn)));
            break;
          case 3:
            s += (j == 0 ? xj : 2.0 * xj * std::cos(pi * dj * (2 * dk + 1) / (2 * nn))) *
                 (!ortho   ? 1.0
                  : j == 0 ? 1 / std::sqrt(nn)
                           : std::sqrt(1 / (2 * nn)));
            break;
          default:
            s += 2.0 * xj * std::cos(pi * (2 * dj + 1) * (2 * dk + 1) / (4 * nn)) *
                 (ortho ? std::sqrt(1 / (2 * nn)) : 1.0);
        }
      }
      y[static_cast<size_t>(r * n + k)] = s;
    }
  return y;
}

}  // namespace

TEST_CASE("signal: long dcts run through the FFT and match their definition",
          "[cpu][cuda][signal]") {
  // Lengths above 128 take rfft/irfft (ops/signal.cpp, dct_by_fft); even, odd and prime.
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    for (int64_t n : {129, 200, 257}) {
      const int64_t rows = 3;
      const auto xv = random_values(static_cast<size_t>(rows * n));
      for (int type : {1, 2, 3, 4})
        for (bool ortho : {false, true}) {
          if (type == 1 && ortho) continue;
          INFO("n " << n << " type " << type << (ortho ? " ortho" : ""));
          const auto want = dct_by_definition(xv, rows, n, type, ortho);
          for (tf::DType d : {tf::float64, tf::float32}) {
            const tf::Tensor x = tf::detail::from_doubles(xv, {rows, n}, d);
            const tf::Tensor y = sig::dct(x, type, -1, -1, ortho ? "ortho" : "");
            CHECK(y.dtype() == d);
            CHECK(y.shape() == tf::TensorShape{rows, n});
            // Sums of n products of magnitude up to 2.
            const double tol = d == tf::float64 ? 1e-11 : 2e-4;
            check_values(y, want, tol, tol);
          }
        }
      // The inverses with "ortho", and a cropped / padded length.
      const tf::Tensor x = tf::detail::from_doubles(xv, {rows, n}, tf::float64);
      for (int type : {2, 3, 4})
        check_close(sig::idct(sig::dct(x, type, -1, -1, "ortho"), type, -1, -1, "ortho"), x, 0,
                    1e-12);
      check_values(sig::dct(x, 2, n + 7),
                   dct_by_definition(
                       [&] {
                         std::vector<double> p;
                         for (int64_t r = 0; r < rows; ++r) {
                           for (int64_t j = 0; j < n; ++j)
                             p.push_back(xv[static_cast<size_t>(r * n + j)]);
                           for (int j = 0; j < 7; ++j) p.push_back(0.0);
                         }
                         return p;
                       }(),
                       rows, n + 7, 2, false),
                   1e-11, 1e-11);
    }
    for (int t : {1, 2, 3, 4}) {
      INFO("dct type " << t << " gradient at n 131");
      // (Linear: a long step keeps the central differences' rounding small.)
      check_gradient([t](const tf::Tensor& v) { return sig::dct(v, t); }, {1, 131}, {}, 1e-7, 1e-8,
                     1e-2);
    }
    // A length whose N x N matrix (2^40 entries) could not be built.
    const tf::Tensor big = sig::dct(tf::ones({1, 3}, tf::float32), 2, 1 << 20);
    CHECK(big.shape() == tf::TensorShape{1, 1 << 20});
    CHECK(std::abs(big.numpy<float>()[0] - 6.0f) < 1e-4f);  // 2 * sum(x)
  }
}
