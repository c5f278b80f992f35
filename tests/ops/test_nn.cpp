// tf::nn: conv2d and pooling against plain float64 loops (NHWC, HWIO, TF's SAME/VALID padding,
// strides, dilations, batches, every dtype), the composites (relu, softmax, losses, dropout,
// bias_add) against float64 references, and every error path. The conv/pool cases run on every
// device of devices_under_test() and are tagged [cuda] too: on a GPU they exercise cuDNN's
// convolution (NHWC and float64's NCHW path, explicit padding for TF's asymmetric SAME, cached
// algorithms, offset inputs) and the pooling kernels.
#include <algorithm>
#include <cmath>
#include <limits>
#include <thread>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "core/tensor.h"
#include "ops/factory.h"
#include "ops/movement.h"
#include "ops/nn.h"
#include "ops/random.h"
#include "support/testing.h"

namespace tf = tapeflow;
using tf::testing::check_values;

namespace {

std::vector<double> values(const tf::Tensor& t) {
  return tf::detail::to_double_vector(t);
}

// A tensor of `dtype` from doubles, and the doubles it actually holds (rounded to the dtype).
tf::Tensor make(const std::vector<double>& v, const tf::TensorShape& s, tf::DType dtype) {
  return tf::detail::from_doubles(v, s, dtype);
}

// TF's padding for one dimension, written out independently of the library.
struct Pad {
  int64_t out, before;
};
Pad tf_pad(int64_t in, int64_t k, int64_t stride, int64_t dilation, bool same) {
  const int64_t eff = (k - 1) * dilation + 1;
  if (!same) return {(in - eff + stride) / stride, 0};
  const int64_t out = (in + stride - 1) / stride;
  const int64_t total = std::max<int64_t>((out - 1) * stride + eff - in, 0);
  return {out, total / 2};
}

struct ConvCase {
  std::vector<int64_t> x, f;  // NHWC, HWIO
  std::vector<int> strides;
  std::string padding;
  std::vector<int> dilations;
};

// Direct float64 convolution.
std::vector<double> conv_ref(const std::vector<double>& x, const std::vector<double>& f,
                             const ConvCase& c, tf::TensorShape& out_shape) {
  const int64_t N = c.x[0], H = c.x[1], W = c.x[2], C = c.x[3];
  const int64_t KH = c.f[0], KW = c.f[1], O = c.f[3];
  auto hw = [](const std::vector<int>& v) -> std::pair<int64_t, int64_t> {
    if (v.size() == 1) return {v[0], v[0]};
    if (v.size() == 2) return {v[0], v[1]};
    return {v[1], v[2]};
  };
  const auto [sh, sw] = hw(c.strides);
  const auto [dh, dw] = hw(c.dilations);
  const bool same = c.padding == "SAME";
  const Pad ph = tf_pad(H, KH, sh, dh, same), pw = tf_pad(W, KW, sw, dw, same);
  out_shape = tf::TensorShape{N, ph.out, pw.out, O};
  std::vector<double> y(static_cast<size_t>(N * ph.out * pw.out * O), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t oh = 0; oh < ph.out; ++oh)
      for (int64_t ow = 0; ow < pw.out; ++ow)
        for (int64_t o = 0; o < O; ++o) {
          double acc = 0;
          for (int64_t kh = 0; kh < KH; ++kh)
            for (int64_t kw = 0; kw < KW; ++kw) {
              const int64_t ih = oh * sh - ph.before + kh * dh;
              const int64_t iw = ow * sw - pw.before + kw * dw;
              if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
              for (int64_t ci = 0; ci < C; ++ci)
                acc += x[((n * H + ih) * W + iw) * C + ci] * f[((kh * KW + kw) * C + ci) * O + o];
            }
          y[((n * ph.out + oh) * pw.out + ow) * O + o] = acc;
        }
  return y;
}

struct PoolCase {
  std::vector<int64_t> x;
  std::vector<int> ksize, strides;
  std::string padding;
};

std::vector<double> pool_ref(const std::vector<double>& x, const PoolCase& c, bool is_max,
                             tf::TensorShape& out_shape) {
  const int64_t N = c.x[0], H = c.x[1], W = c.x[2], C = c.x[3];
  auto hw = [](const std::vector<int>& v) -> std::pair<int64_t, int64_t> {
    if (v.size() == 1) return {v[0], v[0]};
    if (v.size() == 2) return {v[0], v[1]};
    return {v[1], v[2]};
  };
  const auto [kh, kw] = hw(c.ksize);
  const auto [sh, sw] = hw(c.strides);
  const bool same = c.padding == "SAME";
  const Pad ph = tf_pad(H, kh, sh, 1, same), pw = tf_pad(W, kw, sw, 1, same);
  out_shape = tf::TensorShape{N, ph.out, pw.out, C};
  std::vector<double> y;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t oh = 0; oh < ph.out; ++oh)
      for (int64_t ow = 0; ow < pw.out; ++ow)
        for (int64_t ch = 0; ch < C; ++ch) {
          double acc = is_max ? -std::numeric_limits<double>::infinity() : 0.0;
          int64_t count = 0;
          // The window's positions inside the input (the others are padding).
          const int64_t h0 = oh * sh - ph.before, w0 = ow * sw - pw.before;
          for (int64_t i = std::max<int64_t>(0, -h0); i < std::min(kh, H - h0); ++i)
            for (int64_t j = std::max<int64_t>(0, -w0); j < std::min(kw, W - w0); ++j) {
              const int64_t ih = h0 + i, iw = w0 + j;
              const double v = x[((n * H + ih) * W + iw) * C + ch];
              acc = is_max ? std::max(acc, v) : acc + v;
              ++count;
            }
          y.push_back(is_max ? acc : acc / static_cast<double>(count));
        }
  return y;
}

int64_t numel(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

}  // namespace

// ---------------------------------------------------------------- conv2d

TEST_CASE("conv2d matches a direct float64 loop", "[cpu][cuda][nn]") {
  const std::vector<ConvCase> cases = {
      {{1, 5, 5, 3}, {3, 3, 3, 8}, {1}, "SAME", {1}},
      {{2, 7, 6, 4}, {3, 2, 4, 5}, {2}, "VALID", {1}},
      {{2, 9, 9, 3}, {3, 3, 3, 4}, {2, 2}, "SAME", {1}},  // odd: pad 1 before, 1 after
      {{1, 8, 8, 2}, {4, 4, 2, 3}, {2}, "SAME", {1}},     // pad 1 before, 2 after
      {{1, 10, 11, 2}, {3, 3, 2, 3}, {1}, "SAME", {2}},   // dilation 2
      {{3, 12, 10, 16}, {5, 3, 16, 32}, {1, 2}, "VALID", {2, 1}},
      {{2, 11, 13, 5}, {3, 3, 5, 7}, {1, 2, 2, 1}, "SAME", {1, 1, 1, 1}},
      {{1, 6, 6, 3}, {1, 1, 3, 2}, {4}, "SAME", {1}},     // 1x1, stride 4
      {{4, 28, 28, 1}, {3, 3, 1, 32}, {1}, "SAME", {1}},  // the benchmark's first layer
      {{1, 3, 3, 2}, {3, 3, 2, 2}, {1}, "VALID", {1}},    // window = input
      {{1, 2, 2, 1}, {3, 3, 1, 1}, {1}, "SAME", {1}},     // filter larger than input
      // TF's asymmetric SAME padding (the extra row/column at the bottom/right), which the CUDA
      // kernel pads explicitly since cuDNN pads symmetrically:
      {{2, 9, 8, 5}, {2, 2, 5, 6}, {2}, "SAME", {1}},     // even kernel: pad rows 0/1, cols 0/0
      {{3, 8, 9, 3}, {4, 2, 3, 13}, {2}, "SAME", {1}},    // rows 1/1, cols 0/1
      {{2, 7, 7, 6}, {2, 4, 6, 5}, {2}, "SAME", {1}},     // rows 0/1, cols 1/2
      {{2, 10, 9, 3}, {2, 3, 3, 4}, {1}, "SAME", {3, 2}}, // dilated: rows 1/2, cols 2/2
      {{2, 11, 12, 7}, {3, 3, 7, 9}, {2}, "SAME", {2}},   // dilated, strided: rows 2/2, cols 1/2
      {{2, 15, 17, 9}, {3, 3, 9, 10}, {1}, "VALID", {1}}, // channels not multiples of 8
      {{4, 24, 24, 24}, {3, 3, 24, 40}, {1}, "SAME", {1}},  // larger: many blocks
  };
  struct Tol {
    tf::DType dtype;
    double rtol, atol;
  };
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    for (const Tol& t : {Tol{tf::float32, 1e-5, 1e-5}, Tol{tf::float64, 1e-12, 1e-12},
                         Tol{tf::float16, 2e-3, 1e-2}, Tol{tf::bfloat16, 1e-2, 5e-2}}) {
      for (size_t i = 0; i < cases.size(); ++i) {
        const ConvCase& c = cases[i];
        INFO("device " << dev.to_string() << ", dtype " << tf::dtype_name(t.dtype) << ", case "
                       << i);
        const tf::Tensor x = make(tf::testing::random_values(numel(c.x), -1, 1, 1 + i),
                                  tf::TensorShape(c.x), t.dtype);
        const tf::Tensor f = make(tf::testing::random_values(numel(c.f), -1, 1, 100 + i),
                                  tf::TensorShape(c.f), t.dtype);
        tf::TensorShape want_shape;
        const auto want = conv_ref(values(x), values(f), c, want_shape);
        const tf::Tensor y = tf::nn::conv2d(x, f, c.strides, c.padding, c.dilations);
        CHECK(y.dtype() == t.dtype);
        CHECK(y.device() == dev.to_string());
        REQUIRE(y.shape() == want_shape);
        check_values(y, want, t.rtol, t.atol);
        // Second call: the cached plan (oneDNN primitive, cuDNN algorithm) gives the same
        // result.
        tf::testing::check_close(tf::nn::conv2d(x, f, c.strides, c.padding, c.dilations), y, 0, 0);
      }
    }
  }
}

TEST_CASE("conv2d handles empty tensors and concurrent callers", "[cpu][cuda][nn]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    INFO("device " << dev.to_string());
    // No batch: an empty output of the right shape.
    const auto y0 = tf::nn::conv2d(tf::zeros({0, 5, 5, 2}), tf::ones({3, 3, 2, 4}), {1}, "SAME");
    CHECK(y0.shape() == tf::TensorShape({0, 5, 5, 4}));
    CHECK(y0.device() == dev.to_string());
    // (A filter without input or output channels is TF's InvalidArgumentError: see
    // "conv2d refuses a filter without elements".)
    // Two threads at once on the same cached primitive / cuDNN plan (the inputs' device places
    // the threads' ops).
    const tf::Tensor x =
        make(tf::testing::random_values(2 * 16 * 16 * 8), {2, 16, 16, 8}, tf::float32);
    const tf::Tensor f =
        make(tf::testing::random_values(3 * 3 * 8 * 16, -1, 1, 3), {3, 3, 8, 16}, tf::float32);
    const tf::Tensor ref = tf::nn::conv2d(x, f, {1}, "SAME");
    std::vector<double> got[2];
    std::thread a([&] {
      for (int i = 0; i < 20; ++i) got[0] = values(tf::nn::conv2d(x, f, {1}, "SAME"));
    });
    std::thread b([&] {
      for (int i = 0; i < 20; ++i) got[1] = values(tf::nn::conv2d(x, f, {1}, "SAME"));
    });
    a.join();
    b.join();
    CHECK(got[0] == values(ref));
    CHECK(got[1] == values(ref));
  }
}

TEST_CASE("conv2d and pooling read inputs at an offset into their storage", "[cpu][cuda][nn]") {
  // Views one element into a larger buffer: the CUDA kernel hands cuDNN aligned copies.
  const ConvCase c{{2, 7, 6, 5}, {3, 3, 5, 4}, {1}, "SAME", {1}};
  const PoolCase pc{{2, 7, 6, 5}, {3}, {2}, "SAME"};
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    for (tf::DType dt : {tf::float16, tf::float32, tf::float64}) {
      INFO("device " << dev.to_string() << ", dtype " << tf::dtype_name(dt));
      const tf::Tensor big = make(tf::testing::random_values(numel(c.x) + 1, -1, 1, 21),
                                  tf::TensorShape{numel(c.x) + 1}, dt);
      const tf::Tensor x = tf::detail::view(big, tf::TensorShape(c.x), tf::dtype_size(dt));
      const tf::Tensor f =
          make(tf::testing::random_values(numel(c.f), -1, 1, 22), tf::TensorShape(c.f), dt);
      const double tol = dt == tf::float16 ? 1e-2 : 1e-5;
      tf::TensorShape shape;
      const auto want = conv_ref(values(x), values(f), c, shape);
      const tf::Tensor y = tf::nn::conv2d(x, f, c.strides, c.padding, c.dilations);
      REQUIRE(y.shape() == shape);
      check_values(y, want, tol, tol);
      const auto want_max = pool_ref(values(x), pc, true, shape);
      check_values(tf::nn::max_pool2d(x, pc.ksize, pc.strides, pc.padding), want_max, 0, 0);
      const auto want_avg = pool_ref(values(x), pc, false, shape);
      check_values(tf::nn::avg_pool2d(x, pc.ksize, pc.strides, pc.padding), want_avg, tol, tol);
    }
  }
}

TEST_CASE("conv2d with TensorFloat-32 enabled stays close to float32", "[cpu][cuda][nn]") {
  // The switch only changes GPU math (cuDNN may then use TF32 tensor cores: 10-bit mantissa
  // products, float32 accumulation); the CPU ignores it.
  struct Tf32Guard {
    Tf32Guard() { tf::config::experimental::enable_tensor_float_32_execution(true); }
    ~Tf32Guard() { tf::config::experimental::enable_tensor_float_32_execution(false); }
  } guard;
  const ConvCase c{{2, 12, 12, 16}, {3, 3, 16, 32}, {1}, "SAME", {1}};
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    INFO("device " << dev.to_string());
    const tf::Tensor x = make(tf::testing::random_values(numel(c.x), -1, 1, 31),
                              tf::TensorShape(c.x), tf::float32);
    const tf::Tensor f = make(tf::testing::random_values(numel(c.f), -1, 1, 32),
                              tf::TensorShape(c.f), tf::float32);
    tf::TensorShape shape;
    const auto want = conv_ref(values(x), values(f), c, shape);
    const tf::Tensor y = tf::nn::conv2d(x, f, c.strides, c.padding);
    REQUIRE(y.shape() == shape);
    check_values(y, want, 1e-2, 1e-2);
  }
}

TEST_CASE("conv2d rejects bad arguments", "[cpu][nn]") {
  using tf::InvalidArgumentError;
  const auto x = tf::zeros({1, 5, 5, 3});
  const auto f = tf::zeros({3, 3, 3, 8});
  TF_REQUIRE_THROWS_CONTAINING(
      tf::nn::conv2d(x, tf::zeros({3, 3, 4, 8}), {1}, "SAME"), InvalidArgumentError,
      "[conv2d] input depth 3 does not match filter depth 4: input is (1, 5, 5, 3), filters "
      "(3, 3, 4, 8)");
  TF_REQUIRE_THROWS_CONTAINING(tf::nn::conv2d(tf::zeros({5, 5, 3}), f, {1}, "SAME"),
                               InvalidArgumentError,
                               "[conv2d] input must be rank 4 (NHWC), got shape (5, 5, 3)");
  TF_REQUIRE_THROWS_CONTAINING(tf::nn::conv2d(x, tf::zeros({3, 3, 3}), {1}, "SAME"),
                               InvalidArgumentError,
                               "[conv2d] filters must be rank 4 (HWIO), got shape (3, 3, 3)");
  TF_REQUIRE_THROWS_CONTAINING(tf::nn::conv2d(x, f, {1}, "same"), InvalidArgumentError,
                               "[conv2d] padding must be \"SAME\" or \"VALID\", got \"same\"");
  TF_REQUIRE_THROWS_CONTAINING(tf::nn::conv2d(x, f, {1, 2, 3}, "SAME"), InvalidArgumentError,
                               "[conv2d] strides must have 1, 2 or 4 values, got [1, 2, 3]");
  TF_REQUIRE_THROWS_CONTAINING(tf::nn::conv2d(x, f, {2, 1, 1, 1}, "SAME"), InvalidArgumentError,
                               "[conv2d] strides [2, 1, 1, 1] must be 1 in the batch and channel");
  TF_REQUIRE_THROWS_CONTAINING(tf::nn::conv2d(x, f, {0}, "SAME"), InvalidArgumentError,
                               "[conv2d] strides must be positive, got [0]");
  TF_REQUIRE_THROWS_CONTAINING(tf::nn::conv2d(x, f, {1}, "SAME", {1, 0}), InvalidArgumentError,
                               "[conv2d] dilations must be positive, got [1, 0]");
  TF_REQUIRE_THROWS_CONTAINING(tf::nn::conv2d(x, f, {1}, "SAME", {1, 2, 2}), InvalidArgumentError,
                               "[conv2d] dilations must have 1, 2 or 4");
  TF_REQUIRE_THROWS_CONTAINING(tf::nn::conv2d(x, tf::zeros({3, 3, 3, 8}, tf::float64), {1}, "SAME"),
                               InvalidArgumentError,
                               "[conv2d] input and filters dtypes differ: float32 and float64");
  TF_REQUIRE_THROWS_CONTAINING(
      tf::nn::conv2d(tf::zeros({1, 5, 5, 3}, tf::int32), tf::zeros({3, 3, 3, 8}, tf::int32), {1},
                     "SAME"),
      InvalidArgumentError,
      "[conv2d] expects float16, bfloat16, float32 or float64 tensors, got int32");
  TF_REQUIRE_THROWS_CONTAINING(tf::nn::conv2d(x, tf::zeros({6, 3, 3, 8}), {1}, "VALID"),
                               InvalidArgumentError,
                               "[conv2d] the window's effective height 6 (size 6, dilation 1) "
                               "exceeds the input height 5 with VALID padding");
  TF_REQUIRE_THROWS_CONTAINING(tf::nn::conv2d(x, f, {1}, "VALID", {3}), InvalidArgumentError,
                               "effective height 7 (size 3, dilation 3)");
}

// ---------------------------------------------------------------- pooling

TEST_CASE("max_pool2d and avg_pool2d match reference loops", "[cpu][cuda][nn]") {
  const std::vector<PoolCase> cases = {
      {{1, 5, 5, 2}, {3}, {2}, "SAME"},  // edge windows cut by the padding
      {{2, 7, 6, 3}, {2, 3}, {2, 1}, "VALID"},
      {{1, 4, 4, 1}, {2}, {2}, "VALID"},
      {{1, 6, 7, 5}, {3}, {3}, "SAME"},
      {{2, 5, 7, 33}, {3}, {1}, "SAME"},  // channels not a multiple of the vector width
      {{1, 8, 8, 4}, {1, 2, 2, 1}, {1, 2, 2, 1}, "SAME"},
      {{3, 28, 28, 32}, {2}, {2}, "VALID"},
      {{1, 3, 3, 2}, {4}, {1}, "SAME"},  // window larger than the input
      {{2, 9, 8, 5}, {2}, {2}, "SAME"},        // even window: padding rows 0/1, columns 0/0
      {{3, 7, 10, 9}, {4, 3}, {3, 2}, "SAME"},  // rows 1/2, columns 0/1
      {{4, 33, 31, 67}, {3}, {2}, "SAME"},      // many blocks, odd channel count
      // SAME windows around the length that covers the whole input at every position (in +
      // (out - 1) * stride + 1: 12 rows, 10 columns here), and far beyond it.
      {{1, 6, 5, 2}, {11, 9}, {1, 2}, "SAME"},
      {{1, 6, 5, 2}, {12, 10}, {1, 2}, "SAME"},
      {{1, 6, 5, 2}, {13, 1000}, {1, 2}, "SAME"},
      {{2, 5, 7, 3}, {1 << 30}, {2}, "SAME"},
  };
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    for (size_t i = 0; i < cases.size(); ++i) {
      const PoolCase& c = cases[i];
      for (tf::DType dt :
           {tf::float32, tf::float64, tf::float16, tf::bfloat16, tf::int32, tf::int64, tf::uint8}) {
        INFO("device " << dev.to_string() << ", dtype " << tf::dtype_name(dt) << ", case " << i);
        const bool is_int = tf::is_integer(dt);
        const tf::Tensor x =
            make(tf::testing::random_values(numel(c.x), is_int ? 0 : -10, is_int ? 200 : 10, 7 + i),
                 tf::TensorShape(c.x), dt);
        const auto xv = values(x);
        tf::TensorShape shape;
        const auto want_max = pool_ref(xv, c, true, shape);
        const tf::Tensor ymax = tf::nn::max_pool2d(x, c.ksize, c.strides, c.padding);
        CHECK(ymax.dtype() == dt);
        CHECK(ymax.device() == dev.to_string());
        REQUIRE(ymax.shape() == shape);
        check_values(ymax, want_max, 0, 0);  // max is exact in every dtype
        if (is_int) continue;
        const auto want_avg = pool_ref(xv, c, false, shape);
        const tf::Tensor yavg = tf::nn::avg_pool2d(x, c.ksize, c.strides, c.padding);
        CHECK(yavg.dtype() == dt);
        REQUIRE(yavg.shape() == shape);
        const double tol = dt == tf::float64   ? 1e-12
                           : dt == tf::float32 ? 1e-6
                           : dt == tf::float16 ? 1e-3
                                               : 8e-3;
        check_values(yavg, want_avg, tol, tol);
      }
    }
  }
  // TF's SAME average counts only the valid elements: the corner of a 2x2 input with a 3x3
  // window averages 4 values, not 9.
  const auto x = tf::constant(std::vector<float>{1.f, 2.f, 3.f, 4.f}, tf::TensorShape{1, 2, 2, 1});
  check_values(tf::nn::avg_pool2d(x, {3}, {1}, "SAME"), {2.5, 2.5, 2.5, 2.5});
  check_values(tf::nn::max_pool2d(x, {3}, {1}, "SAME"), {4, 4, 4, 4});
  const auto neg =
      tf::constant(std::vector<float>{-1.f, -2.f, -3.f, -4.f}, tf::TensorShape{1, 2, 2, 1});
  check_values(tf::nn::max_pool2d(neg, {2}, {1}, "SAME"), {-1, -2, -3, -4});
  CHECK(tf::nn::max_pool2d(tf::zeros({0, 4, 4, 3}), {2}, {2}, "VALID").shape() ==
        tf::TensorShape({0, 2, 2, 3}));
  // SAME windows and strides of 2^31 - 1: one output, the global max and mean (oneDNN refused
  // the stride before it was clamped to the input's size).
  const auto x5 = tf::reshape(tf::range(0.0f, 25.0f), {1, 5, 5, 1});
  check_values(tf::nn::max_pool2d(x5, {INT32_MAX}, {INT32_MAX}, "SAME"), {24});
  check_values(tf::nn::avg_pool2d(x5, {INT32_MAX}, {INT32_MAX}, "SAME"), {12});
  check_values(tf::nn::max_pool2d(x5, {2}, {INT32_MAX}, "SAME"), {6});
  check_values(tf::nn::max_pool2d(x5, {3}, {4}, "SAME"), {6, 9, 21, 24});
}

TEST_CASE("pooling rejects bad arguments", "[cpu][nn]") {
  using tf::InvalidArgumentError;
  const auto x = tf::zeros({1, 4, 4, 2});
  TF_REQUIRE_THROWS_CONTAINING(tf::nn::max_pool2d(tf::zeros({4, 4, 2}), {2}, {2}, "VALID"),
                               InvalidArgumentError,
                               "[max_pool2d] input must be rank 4 (NHWC), got shape (4, 4, 2)");
  TF_REQUIRE_THROWS_CONTAINING(tf::nn::avg_pool2d(tf::zeros({4, 4}), {2}, {2}, "VALID"),
                               InvalidArgumentError,
                               "[avg_pool2d] input must be rank 4 (NHWC), got shape (4, 4)");
  TF_REQUIRE_THROWS_CONTAINING(tf::nn::max_pool2d(x, {2, 2, 2}, {2}, "VALID"), InvalidArgumentError,
                               "[max_pool2d] ksize must have 1, 2 or 4 values, got [2, 2, 2]");
  TF_REQUIRE_THROWS_CONTAINING(
      tf::nn::max_pool2d(x, {2, 2, 2, 1}, {2}, "VALID"), InvalidArgumentError,
      "[max_pool2d] ksize [2, 2, 2, 1] must be 1 in the batch and channel");
  TF_REQUIRE_THROWS_CONTAINING(tf::nn::avg_pool2d(x, {2}, {1, 1, 1, 2}, "VALID"),
                               InvalidArgumentError,
                               "[avg_pool2d] strides [1, 1, 1, 2] must be 1 in the batch");
  TF_REQUIRE_THROWS_CONTAINING(tf::nn::avg_pool2d(x, {0}, {1}, "VALID"), InvalidArgumentError,
                               "[avg_pool2d] ksize must be positive, got [0]");
  TF_REQUIRE_THROWS_CONTAINING(tf::nn::max_pool2d(x, {2}, {2}, "FULL"), InvalidArgumentError,
                               "[max_pool2d] padding must be \"SAME\" or \"VALID\", got \"FULL\"");
  TF_REQUIRE_THROWS_CONTAINING(
      tf::nn::avg_pool2d(tf::zeros({1, 4, 4, 2}, tf::int32), {2}, {2}, "VALID"),
      InvalidArgumentError, "[avg_pool2d] expects a floating-point tensor");
  TF_REQUIRE_THROWS_CONTAINING(
      tf::nn::max_pool2d(tf::zeros({1, 4, 4, 2}, tf::bool_), {2}, {2}, "VALID"),
      InvalidArgumentError, "[max_pool2d] is not defined for bool");
  TF_REQUIRE_THROWS_CONTAINING(
      tf::nn::max_pool2d(x, {5, 1}, {1}, "VALID"), InvalidArgumentError,
      "[max_pool2d] the window's effective height 5 (size 5, dilation 1) "
      "exceeds the input height 4 with VALID padding (input is (1, 4, 4, 2))");
}

// ---------------------------------------------------------------- composites

TEST_CASE("relu - softmax and log_softmax match float64 references", "[cpu][cuda][nn][composite]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    const auto xv = tf::testing::random_values(24, -5, 5, 11);
    for (tf::DType dt : {tf::float32, tf::float64, tf::float16}) {
      INFO("device " << dev.to_string() << ", dtype " << tf::dtype_name(dt));
      const double tol = dt == tf::float64 ? 1e-12 : dt == tf::float32 ? 1e-6 : 2e-3;
      const tf::Tensor x = make(xv, {2, 3, 4}, dt);
      const auto xr = values(x);
      std::vector<double> relu;
      for (double v : xr) relu.push_back(std::max(v, 0.0));
      const auto r = tf::nn::relu(x);
      CHECK(r.dtype() == dt);
      check_values(r, relu, 0, 0);
      // softmax along each axis, negative axes too.
      for (int axis : {-1, 0, 1, 2, -2}) {
        INFO("axis " << axis);
        const int a = axis < 0 ? axis + 3 : axis;
        const int64_t dims[3] = {2, 3, 4};
        int64_t stride = 1;
        for (int d = 2; d > a; --d) stride *= dims[d];
        std::vector<double> sm(xr.size()), lsm(xr.size());
        for (size_t i = 0; i < xr.size(); ++i) {
          const int64_t pos = (static_cast<int64_t>(i) / stride) % dims[a];
          const int64_t base = static_cast<int64_t>(i) - pos * stride;
          double m = -INFINITY, s = 0;
          for (int64_t k = 0; k < dims[a]; ++k) m = std::max(m, xr[base + k * stride]);
          for (int64_t k = 0; k < dims[a]; ++k) s += std::exp(xr[base + k * stride] - m);
          sm[i] = std::exp(xr[i] - m) / s;
          lsm[i] = xr[i] - m - std::log(s);
        }
        check_values(tf::nn::softmax(x, axis), sm, tol, tol);
        check_values(tf::nn::log_softmax(x, axis), lsm, tol, tol);
      }
    }
    // Numerically stable: huge logits neither overflow nor give NaN.
    const auto big = tf::constant({1000.f, 1001.f, 1002.f});
    const double e1 = std::exp(-1.0), e2 = std::exp(-2.0), z = 1 + e1 + e2;
    check_values(tf::nn::softmax(big), {e2 / z, e1 / z, 1 / z}, 1e-6, 1e-6);
    check_values(tf::nn::log_softmax(big), {-2 - std::log(z), -1 - std::log(z), -std::log(z)}, 1e-5,
                 1e-5);
    check_values(tf::nn::relu(tf::constant({-2, 0, 3})), {0, 0, 3});
    CHECK(tf::nn::relu(tf::constant({-2, 0, 3})).dtype() == tf::int32);
  }
}

TEST_CASE("cross-entropy losses match float64 references", "[cpu][cuda][nn][composite]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    for (tf::DType dt : {tf::float32, tf::float64}) {
      INFO("device " << dev.to_string() << ", dtype " << tf::dtype_name(dt));
      const double tol = dt == tf::float64 ? 1e-12 : 2e-6;
      // sigmoid: TF's stable formula, extreme logits included.
      std::vector<double> xv = tf::testing::random_values(10, -8, 8, 3);
      xv.push_back(200.0);
      xv.push_back(-200.0);
      std::vector<double> zv = tf::testing::random_values(12, 0, 1, 4);
      const tf::Tensor x = make(xv, {3, 4}, dt), z = make(zv, {3, 4}, dt);
      const auto xr = values(x), zr = values(z);
      std::vector<double> want;
      for (size_t i = 0; i < xr.size(); ++i)
        want.push_back(std::max(xr[i], 0.0) - xr[i] * zr[i] +
                       std::log1p(std::exp(-std::abs(xr[i]))));
      const auto loss = tf::nn::sigmoid_cross_entropy_with_logits(z, x);
      CHECK(loss.dtype() == dt);
      check_values(loss, want, tol, tol);

      // sparse softmax: -log_softmax(logits)[label], labels int32 and int64, rank 1 and 2.
      const auto lv = tf::testing::random_values(2 * 3 * 5, -4, 4, 5);
      const tf::Tensor logits = make(lv, {2, 3, 5}, dt);
      const auto lr = values(logits);
      const std::vector<int32_t> labels = {0, 4, 2, 1, 3, 4};
      std::vector<double> ce;
      for (int r = 0; r < 6; ++r) {
        double m = -INFINITY, s = 0;
        for (int k = 0; k < 5; ++k) m = std::max(m, lr[r * 5 + k]);
        for (int k = 0; k < 5; ++k) s += std::exp(lr[r * 5 + k] - m);
        ce.push_back(m + std::log(s) - lr[r * 5 + labels[r]]);
      }
      const auto l32 = tf::constant(labels, tf::TensorShape{2, 3});
      const auto l64 =
          tf::constant(std::vector<int64_t>(labels.begin(), labels.end()), tf::TensorShape{2, 3});
      const auto c32 = tf::nn::sparse_softmax_cross_entropy_with_logits(l32, logits);
      CHECK(c32.shape() == tf::TensorShape({2, 3}));
      CHECK(c32.dtype() == dt);
      check_values(c32, ce, tol, tol);
      check_values(tf::nn::sparse_softmax_cross_entropy_with_logits(l64, logits), ce, tol, tol);
    }
    // A -inf logit away from the label does not poison the loss.
    const auto lg = tf::constant(std::vector<float>{0.f, -INFINITY, 0.f}, tf::TensorShape{1, 3});
    check_values(tf::nn::sparse_softmax_cross_entropy_with_logits(tf::constant({0}), lg),
                 {std::log(2.0)}, 1e-6, 1e-6);
  }
}

TEST_CASE("dropout keeps 1 - rate of the elements - scaled", "[cpu][cuda][nn][composite]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    const int64_t n = 200000;
    const tf::Tensor x = tf::ones({n});
    for (double rate : {0.0, 0.25, 0.5, 0.9}) {
      INFO("rate " << rate);
      tf::random::set_seed(3);
      const auto y = tf::nn::dropout(x, rate, 17);
      CHECK(y.dtype() == tf::float32);
      CHECK(y.device() == dev.to_string());
      int64_t kept = 0;
      for (double v : values(y)) {
        if (v != 0) {
          ++kept;
          REQUIRE(std::abs(v - 1.0 / (1.0 - rate)) < 1e-6);
        }
      }
      CHECK(std::abs(static_cast<double>(kept) / n - (1 - rate)) < 0.01);
      // A second call with the same seed draws a new mask (as TF's eager dropout); after
      // set_seed the first mask comes back; the mask is uniform(seed) >= rate.
      if (rate > 0) CHECK(values(tf::nn::dropout(x, rate, 17)) != values(y));
      tf::random::set_seed(3);
      CHECK(values(tf::nn::dropout(x, rate, 17)) == values(y));
      tf::random::set_seed(3);
      const auto u = values(tf::random::uniform({n}, 0, 1, tf::float32, 17));
      const auto yv = values(y);
      for (int64_t i = 0; i < 1000; ++i) CHECK((yv[i] != 0) == (u[i] >= rate));
    }
    // Values are scaled, not replaced; float64 works too.
    const auto xs = tf::constant({1.0, -2.0, 3.0, -4.0, 5.0, -6.0});
    const auto ys = values(tf::nn::dropout(xs, 0.5, 1));
    const auto xsv = values(xs);
    for (size_t i = 0; i < ys.size(); ++i) CHECK((ys[i] == 0 || ys[i] == 2 * xsv[i]));
  }
}

TEST_CASE("bias_add adds along the last dimension", "[cpu][cuda][nn][composite]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    const auto v =
        tf::constant(std::vector<float>{1.f, 2.f, 3.f, 4.f, 5.f, 6.f}, tf::TensorShape{2, 3});
    const auto b = tf::constant({10.f, 20.f, 30.f});
    check_values(tf::nn::bias_add(v, b), {11, 22, 33, 14, 25, 36});
    const auto v4 = tf::zeros({2, 2, 2, 3}, tf::float64);
    const auto out = tf::nn::bias_add(v4, tf::constant({1.0, 2.0, 3.0}));
    CHECK(out.shape() == tf::TensorShape({2, 2, 2, 3}));
    const auto ov = values(out);
    for (size_t i = 0; i < ov.size(); ++i) CHECK(ov[i] == static_cast<double>(i % 3 + 1));
  }
}

TEST_CASE("nn composites reject bad arguments", "[cpu][nn]") {
  using tf::InvalidArgumentError;
  const auto x = tf::zeros({2, 5});
  TF_REQUIRE_THROWS_CONTAINING(tf::nn::softmax(tf::zeros({2}, tf::int32)), InvalidArgumentError,
                               "[softmax] expects a floating-point tensor");
  TF_REQUIRE_THROWS_CONTAINING(tf::nn::log_softmax(x, 2), InvalidArgumentError,
                               "[log_softmax] axis 2 is out of range for a tensor of rank 2");
  TF_REQUIRE_THROWS_CONTAINING(tf::nn::relu(tf::zeros({2}, tf::bool_)), InvalidArgumentError,
                               "[relu] is not defined for bool");
  TF_REQUIRE_THROWS_CONTAINING(
      tf::nn::sigmoid_cross_entropy_with_logits(tf::zeros({2, 4}), x), InvalidArgumentError,
      "[sigmoid_cross_entropy_with_logits] logits and labels must have the same shape: labels "
      "are (2, 4), logits (2, 5)");
  TF_REQUIRE_THROWS_CONTAINING(
      tf::nn::sigmoid_cross_entropy_with_logits(tf::zeros({2, 5}, tf::float64), x),
      InvalidArgumentError, "dtypes differ: float64 and float32");
  const char* sce = "[sparse_softmax_cross_entropy_with_logits] ";
  TF_REQUIRE_THROWS_CONTAINING(
      tf::nn::sparse_softmax_cross_entropy_with_logits(tf::constant({1, 7}), x),
      InvalidArgumentError,
      std::string(sce) + "Received a label value of 7 which is outside the valid range of [0, 5)");
  TF_REQUIRE_THROWS_CONTAINING(
      tf::nn::sparse_softmax_cross_entropy_with_logits(tf::constant({-1, 0}), x),
      InvalidArgumentError,
      "Received a label value of -1 which is outside the valid range of [0, 5)");
  TF_REQUIRE_THROWS_CONTAINING(
      tf::nn::sparse_softmax_cross_entropy_with_logits(tf::constant({1.f, 2.f}), x),
      InvalidArgumentError,
      std::string(sce) + "labels must be int32 or int64 class indices, got float32");
  TF_REQUIRE_THROWS_CONTAINING(
      tf::nn::sparse_softmax_cross_entropy_with_logits(tf::constant({1, 2, 3}), x),
      InvalidArgumentError,
      std::string(sce) +
          "labels must have the shape of logits without its last dimension: "
          "labels are (3,), logits (2, 5)");
  TF_REQUIRE_THROWS_CONTAINING(tf::nn::sparse_softmax_cross_entropy_with_logits(
                                   tf::constant({1, 2}), tf::zeros({2}, tf::int32)),
                               InvalidArgumentError,
                               std::string(sce) + "expects a floating-point tensor");
  TF_REQUIRE_THROWS_CONTAINING(tf::nn::dropout(x, 1.0), InvalidArgumentError,
                               "[dropout] rate must be in the range [0, 1), got 1");
  TF_REQUIRE_THROWS_CONTAINING(tf::nn::dropout(x, -0.1), InvalidArgumentError,
                               "[dropout] rate must be in the range [0, 1), got -0.1");
  TF_REQUIRE_THROWS_CONTAINING(tf::nn::dropout(tf::zeros({2}, tf::int32), 0.5),
                               InvalidArgumentError, "[dropout] expects a floating-point tensor");
  TF_REQUIRE_THROWS_CONTAINING(tf::nn::bias_add(x, tf::zeros({4})), InvalidArgumentError,
                               "[bias_add] bias shape (4,) must match the last dimension of value "
                               "shape (2, 5)");
  TF_REQUIRE_THROWS_CONTAINING(tf::nn::bias_add(x, tf::zeros({1, 5})), InvalidArgumentError,
                               "[bias_add] bias must be 1-D, got shape (1, 5) (value is (2, 5))");
  TF_REQUIRE_THROWS_CONTAINING(
      tf::nn::bias_add(tf::zeros({5}), tf::zeros({5})), InvalidArgumentError,
      "[bias_add] value must be at least 2-D, got shape (5,) (bias is (5,))");
  TF_REQUIRE_THROWS_CONTAINING(tf::nn::bias_add(x, tf::zeros({5}, tf::float64)),
                               InvalidArgumentError,
                               "[bias_add] dtypes differ: float32 and float64");
}
