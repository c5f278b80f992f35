// The nn gradient family: Conv2DBackpropInput, Conv2DBackpropFilter, MaxPool2DGrad and
// AvgPool2DGrad against plain float64 loops (the transposed convolution and the window scatters,
// TF's asymmetric SAME padding, strides, dilations, batches, odd channels, every floating dtype,
// ties in max pooling), the vjps of Conv2D/MaxPool2D/AvgPool2D and of the gradient ops
// themselves against central finite differences in float64 (with the inputs that vjp_saves()
// leaves out replaced by storage-less placeholders) and inside GradientTape (nested tapes for
// second order), and every error path. The cases that loop over devices_under_test() are tagged
// [cuda] too (cuDNN and the CUDA kernels on a GPU); the CUDA kernels' element functions also run
// on the host.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <vector>

#include "autograd/tape.h"
#include "core/error.h"
#include "core/tensor.h"
#include "ops/binary.h"
#include "ops/cuda/nn_grad_element.h"
#include "ops/dispatch.h"
#include "ops/factory.h"
#include "ops/nn.h"
#include "ops/nn_grad.h"
#include "ops/reduce.h"
#include "support/testing.h"

namespace tf = tapeflow;
using tf::testing::check_values;

namespace {

std::vector<double> values(const tf::Tensor& t) {
  return tf::detail::to_double_vector(t);
}

tf::Tensor make(const std::vector<double>& v, const tf::TensorShape& s, tf::DType dtype) {
  return tf::detail::from_doubles(v, s, dtype);
}

int64_t numel(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
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

// ---------------------------------------------------------------- convolution references

struct ConvCase {
  std::vector<int64_t> x, f;  // NHWC, HWIO (I = C / groups)
  int sh, sw, dh, dw;
  bool same;
  int groups = 1;
};

struct ConvDims {
  int64_t N, H, W, C, KH, KW, O, OH, OW, pt, pl;
};
ConvDims conv_dims(const ConvCase& c) {
  const Pad ph = tf_pad(c.x[1], c.f[0], c.sh, c.dh, c.same);
  const Pad pw = tf_pad(c.x[2], c.f[1], c.sw, c.dw, c.same);
  return {c.x[0], c.x[1], c.x[2], c.x[3],    c.f[0],   c.f[1],
          c.f[3], ph.out, pw.out, ph.before, pw.before};
}
std::vector<int64_t> conv_out_shape(const ConvCase& c) {
  const ConvDims d = conv_dims(c);
  return {d.N, d.OH, d.OW, d.O};
}

// Calls fn(x index, f index, dy index) for every multiply-add of the convolution.
template <class F>
void for_each_tap(const ConvCase& c, F fn) {
  const ConvDims d = conv_dims(c);
  for (int64_t n = 0; n < d.N; ++n)
    for (int64_t oh = 0; oh < d.OH; ++oh)
      for (int64_t ow = 0; ow < d.OW; ++ow)
        for (int64_t kh = 0; kh < d.KH; ++kh)
          for (int64_t kw = 0; kw < d.KW; ++kw) {
            const int64_t ih = oh * c.sh - d.pt + kh * c.dh;
            const int64_t iw = ow * c.sw - d.pl + kw * c.dw;
            if (ih < 0 || ih >= d.H || iw < 0 || iw >= d.W) continue;
            // Group q: input channels [q cg, (q + 1) cg), outputs [q og, (q + 1) og).
            const int64_t cg = d.C / c.groups, og = d.O / c.groups;
            for (int64_t ci = 0; ci < d.C; ++ci)
              for (int64_t o = ci / cg * og; o < (ci / cg + 1) * og; ++o)
                fn(((n * d.H + ih) * d.W + iw) * d.C + ci,
                   ((kh * d.KW + kw) * cg + ci % cg) * d.O + o,
                   ((n * d.OH + oh) * d.OW + ow) * d.O + o);
          }
}

// The transposed convolution: every tap scatters dy * f into dx.
std::vector<double> backprop_input_ref(const std::vector<double>& f, const std::vector<double>& dy,
                                       const ConvCase& c) {
  std::vector<double> dx(static_cast<size_t>(numel(c.x)), 0.0);
  for_each_tap(c, [&](int64_t xi, int64_t fi, int64_t yi) { dx[xi] += dy[yi] * f[fi]; });
  return dx;
}
std::vector<double> backprop_filter_ref(const std::vector<double>& x, const std::vector<double>& dy,
                                        const ConvCase& c) {
  std::vector<double> df(static_cast<size_t>(numel(c.f)), 0.0);
  for_each_tap(c, [&](int64_t xi, int64_t fi, int64_t yi) { df[fi] += x[xi] * dy[yi]; });
  return df;
}

const std::vector<ConvCase> kConvCases = {
    {{2, 7, 7, 3}, {4, 4, 3, 5}, 2, 2, 1, 1, true},      // even kernel, stride 2: pad 1 / 2
    {{1, 6, 6, 2}, {2, 2, 2, 3}, 1, 1, 1, 1, true},      // pad 0 / 1
    {{2, 7, 6, 3}, {3, 2, 3, 4}, 2, 1, 1, 1, false},     // VALID, rows left over
    {{1, 9, 10, 5}, {3, 3, 5, 3}, 1, 1, 2, 2, true},     // dilation 2
    {{2, 10, 9, 3}, {2, 3, 3, 2}, 1, 2, 3, 1, true},     // dilation 3 and stride 2, pad 1 / 2
    {{1, 11, 8, 3}, {3, 2, 3, 3}, 2, 3, 2, 1, false},    // VALID with strides and dilation
    {{3, 5, 5, 1}, {3, 3, 1, 1}, 3, 3, 1, 1, false},     // one window
    {{1, 2, 2, 3}, {3, 3, 3, 2}, 1, 1, 1, 1, true},      // filter larger than the input
    {{1, 5, 7, 2}, {1, 1, 2, 3}, 2, 2, 1, 1, true},      // 1x1, stride 2
    {{2, 12, 12, 8}, {3, 3, 8, 16}, 1, 1, 1, 1, true},   // larger, blocked layouts
    {{4, 16, 15, 17}, {5, 5, 17, 9}, 2, 2, 1, 1, true},  // odd channels, 5x5 stride 2
    // Grouped (filters (KH, KW, C / G, O)):
    {{2, 7, 7, 6}, {3, 3, 2, 6}, 1, 1, 1, 1, true, 3},      // 3 groups of 2 -> 2
    {{1, 9, 8, 8}, {3, 2, 2, 12}, 2, 1, 2, 1, true, 4},     // 4 groups of 2 -> 3, stride, dilation
    {{2, 6, 7, 12}, {2, 3, 4, 6}, 1, 2, 1, 1, false, 3},    // VALID, 3 groups of 4 -> 2
    {{2, 10, 10, 32}, {3, 3, 4, 32}, 1, 1, 1, 1, true, 8},  // 8 groups of 4 -> 4 (ResNeXt-like)
    {{1, 5, 5, 4}, {3, 3, 1, 8}, 2, 2, 1, 1, true, 4},      // one channel per group
};

// ---------------------------------------------------------------- pooling references

struct PoolCase {
  std::vector<int64_t> x;
  int kh, kw, sh, sw;
  bool same;
};

struct Window {
  int64_t hs, he, ws, we;  // valid rows [hs, he), columns [ws, we)
};
// Calls fn(n, oh, ow, window) for every output pixel.
template <class F>
void for_each_window(const PoolCase& c, F fn) {
  const int64_t N = c.x[0], H = c.x[1], W = c.x[2];
  const Pad ph = tf_pad(H, c.kh, c.sh, 1, c.same), pw = tf_pad(W, c.kw, c.sw, 1, c.same);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t oh = 0; oh < ph.out; ++oh)
      for (int64_t ow = 0; ow < pw.out; ++ow) {
        const int64_t h0 = oh * c.sh - ph.before, w0 = ow * c.sw - pw.before;
        fn(n, oh, ow,
           Window{std::max<int64_t>(h0, 0), std::min<int64_t>(h0 + c.kh, H),
                  std::max<int64_t>(w0, 0), std::min<int64_t>(w0 + c.kw, W)});
      }
}
std::vector<int64_t> pool_out_shape(const PoolCase& c) {
  return {c.x[0], tf_pad(c.x[1], c.kh, c.sh, 1, c.same).out,
          tf_pad(c.x[2], c.kw, c.sw, 1, c.same).out, c.x[3]};
}

// Each dy element goes to the first maximal element of its window (row-major), as TF's CPU.
std::vector<double> max_grad_ref(const std::vector<double>& x, const std::vector<double>& dy,
                                 const PoolCase& c) {
  const int64_t H = c.x[1], W = c.x[2], C = c.x[3];
  const auto ys = pool_out_shape(c);
  std::vector<double> dx(x.size(), 0.0);
  for_each_window(c, [&](int64_t n, int64_t oh, int64_t ow, const Window& w) {
    for (int64_t ch = 0; ch < C; ++ch) {
      int64_t best = -1;
      for (int64_t ih = w.hs; ih < w.he; ++ih)
        for (int64_t iw = w.ws; iw < w.we; ++iw) {
          const int64_t i = ((n * H + ih) * W + iw) * C + ch;
          if (best < 0 || x[i] > x[best]) best = i;
        }
      dx[best] += dy[((n * ys[1] + oh) * ys[2] + ow) * C + ch];
    }
  });
  return dx;
}

std::vector<double> avg_grad_ref(const std::vector<double>& dy, const PoolCase& c) {
  const int64_t H = c.x[1], W = c.x[2], C = c.x[3];
  const auto ys = pool_out_shape(c);
  std::vector<double> dx(static_cast<size_t>(numel(c.x)), 0.0);
  for_each_window(c, [&](int64_t n, int64_t oh, int64_t ow, const Window& w) {
    const double count = static_cast<double>((w.he - w.hs) * (w.we - w.ws));
    for (int64_t ch = 0; ch < C; ++ch)
      for (int64_t ih = w.hs; ih < w.he; ++ih)
        for (int64_t iw = w.ws; iw < w.we; ++iw)
          dx[((n * H + ih) * W + iw) * C + ch] +=
              dy[((n * ys[1] + oh) * ys[2] + ow) * C + ch] / count;
  });
  return dx;
}

const std::vector<PoolCase> kPoolCases = {
    {{2, 7, 7, 3}, 2, 2, 2, 2, true},     // pad 0 / 1
    {{1, 6, 6, 3}, 4, 4, 2, 2, true},     // pad 1 / 1
    {{2, 8, 7, 5}, 3, 3, 2, 2, true},     // pad 0 / 1 and 1 / 1
    {{1, 5, 5, 2}, 3, 3, 1, 1, true},     // overlapping windows
    {{2, 9, 8, 3}, 3, 2, 2, 3, false},    // VALID, rows left over
    {{1, 4, 4, 1}, 4, 4, 1, 1, false},    // one window
    {{3, 11, 13, 7}, 2, 3, 1, 2, true},   // mixed windows and strides
    {{1, 5, 5, 2}, 2, 2, 4, 4, true},     // stride larger than the window
    {{2, 32, 32, 33}, 3, 3, 2, 2, true},  // larger, channels beyond one block
};

struct Tol {
  tf::DType dtype;
  double rtol, atol;
};
const std::vector<Tol> kTols = {{tf::float32, 1e-5, 1e-4},
                                {tf::float64, 1e-12, 1e-12},
                                {tf::float16, 2e-3, 2e-2},
                                {tf::bfloat16, 1e-2, 1e-1}};

// ---------------------------------------------------------------- finite differences

using Fn = std::function<tf::Tensor(const std::vector<tf::Tensor>&)>;

// d/d inputs[k] of sum(g * fn(inputs)) by central differences (float64, current device).
std::vector<double> fd_grad(const Fn& fn, std::vector<tf::Tensor> inputs, size_t k,
                            const std::vector<double>& g, double h = 1e-5) {
  const std::vector<double> base = values(inputs[k]);
  const tf::TensorShape shape = inputs[k].shape();
  std::vector<double> grad(base.size());
  std::vector<double> v = base;
  for (size_t i = 0; i < base.size(); ++i) {
    v[i] = base[i] + h;
    inputs[k] = make(v, shape, tf::float64);
    const double plus = dot(g, values(fn(inputs)));
    v[i] = base[i] - h;
    inputs[k] = make(v, shape, tf::float64);
    const double minus = dot(g, values(fn(inputs)));
    v[i] = base[i];
    grad[i] = (plus - minus) / (2 * h);
  }
  return grad;
}

// The primals a tape would hand to vjp(): inputs outside vjp_saves() become placeholders.
std::vector<tf::Tensor> saved_only(const tf::Primitive& p, const std::vector<tf::Tensor>& in) {
  std::vector<tf::Tensor> out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (p.vjp_saves() & tf::Primitive::save_input(static_cast<int>(i)))
      out.push_back(in[i]);
    else
      out.push_back(tf::detail::symbolic(in[i].shape(), in[i].dtype(), in[i].placement()));
  }
  return out;
}

// Checks p.vjp() for every input (separately and all at once, in reverse order) against
// central differences of running p through dispatch.
void check_vjp(const tf::Primitive& p, const std::vector<tf::Tensor>& inputs,
               std::vector<int> argnums, unsigned seed, double tol = 1e-7) {
  const Fn fn = [&](const std::vector<tf::Tensor>& in) {
    return tf::detail::dispatch(p, std::span<const tf::Tensor>(in));
  };
  const tf::Tensor y = fn(inputs);
  const std::vector<double> gv = tf::testing::random_values(y.num_elements(), -1, 1, seed);
  const tf::Tensor g = make(gv, y.shape(), tf::float64);
  const std::vector<tf::Tensor> primals = saved_only(p, inputs);
  const std::vector<tf::Tensor> cot{g}, outs{y};
  std::vector<std::vector<double>> want;
  for (int a : argnums) want.push_back(fd_grad(fn, inputs, static_cast<size_t>(a), gv));
  for (size_t i = 0; i < argnums.size(); ++i) {
    INFO("argnum " << argnums[i]);
    const std::vector<int> one{argnums[i]};
    const auto grads = p.vjp(primals, cot, one, outs);
    REQUIRE(grads.size() == 1);
    CHECK(grads[0].shape() == inputs[static_cast<size_t>(argnums[i])].shape());
    CHECK(grads[0].dtype() == tf::float64);
    CHECK(grads[0].placement() == inputs[0].placement());
    check_values(grads[0], want[i], tol, tol);
  }
  std::reverse(argnums.begin(), argnums.end());
  std::reverse(want.begin(), want.end());
  const auto all = p.vjp(primals, cot, argnums, outs);
  REQUIRE(all.size() == argnums.size());
  for (size_t i = 0; i < argnums.size(); ++i) check_values(all[i], want[i], tol, tol);
}

}  // namespace

// ---------------------------------------------------------------- gradient primitives

TEST_CASE("conv2d_backprop_input and conv2d_backprop_filter match float64 loops",
          "[cpu][cuda][nn_grad]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    for (const Tol& t : kTols) {
      for (size_t i = 0; i < kConvCases.size(); ++i) {
        const ConvCase& c = kConvCases[i];
        INFO("device " << dev.to_string() << ", dtype " << tf::dtype_name(t.dtype) << ", case "
                       << i);
        const auto ys = conv_out_shape(c);
        const tf::Tensor x = make(tf::testing::random_values(numel(c.x), -1, 1, 1 + i),
                                  tf::TensorShape(c.x), t.dtype);
        const tf::Tensor f = make(tf::testing::random_values(numel(c.f), -1, 1, 100 + i),
                                  tf::TensorShape(c.f), t.dtype);
        const tf::Tensor dy = make(tf::testing::random_values(numel(ys), -1, 1, 200 + i),
                                   tf::TensorShape(ys), t.dtype);
        const tf::Tensor dx = tf::detail::conv2d_backprop_input(tf::TensorShape(c.x), f, dy, c.sh,
                                                                c.sw, c.dh, c.dw, c.same, c.groups);
        CHECK(dx.dtype() == t.dtype);
        CHECK(dx.placement() == dev);
        REQUIRE(dx.shape() == tf::TensorShape(c.x));
        check_values(dx, backprop_input_ref(values(f), values(dy), c), t.rtol, t.atol);
        const tf::Tensor df = tf::detail::conv2d_backprop_filter(
            x, tf::TensorShape(c.f), dy, c.sh, c.sw, c.dh, c.dw, c.same, c.groups);
        CHECK(df.dtype() == t.dtype);
        CHECK(df.placement() == dev);
        REQUIRE(df.shape() == tf::TensorShape(c.f));
        // Filter gradients sum N * OH * OW products: a looser absolute bound for the half types.
        check_values(df, backprop_filter_ref(values(x), values(dy), c), t.rtol,
                     t.atol * (t.dtype == tf::float32 || t.dtype == tf::float64 ? 1 : 4));
        // Second call: the cached oneDNN plan gives the same bits (cuDNN's algorithms need
        // not be deterministic, so the GPU is only held to the reference above).
        if (dev.is_cpu())
          tf::testing::check_close(
              tf::detail::conv2d_backprop_input(tf::TensorShape(c.x), f, dy, c.sh, c.sw, c.dh, c.dw,
                                                c.same, c.groups),
              dx, 0, 0);
      }
    }
  }
}

TEST_CASE("grouped conv2d matches a float64 loop", "[cpu][cuda][nn_grad]") {
  // The Conv2D primitive with its group count, and tf::nn::conv2d, which finds the groups from
  // the filters' depth (one channel per group runs as depthwise_conv2d there).
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    for (const Tol& t : kTols) {
      for (size_t i = 0; i < kConvCases.size(); ++i) {
        const ConvCase& c = kConvCases[i];
        if (c.groups == 1) continue;
        INFO("device " << dev.to_string() << ", dtype " << tf::dtype_name(t.dtype) << ", case "
                       << i);
        const auto xv = tf::testing::random_values(numel(c.x), -1, 1, 1 + i);
        const auto fv = tf::testing::random_values(numel(c.f), -1, 1, 100 + i);
        const auto ys = conv_out_shape(c);
        std::vector<double> want(static_cast<size_t>(numel(ys)), 0.0);
        for_each_tap(c, [&](int64_t xi, int64_t fi, int64_t yi) { want[yi] += xv[xi] * fv[fi]; });
        const tf::Tensor x = make(xv, tf::TensorShape(c.x), t.dtype);
        const tf::Tensor f = make(fv, tf::TensorShape(c.f), t.dtype);
        const tf::Tensor y = tf::detail::dispatch(
            tf::prims::Conv2D(c.sh, c.sw, c.dh, c.dw, c.same, c.groups), {x, f});
        CHECK(y.dtype() == t.dtype);
        CHECK(y.placement() == dev);
        REQUIRE(y.shape() == tf::TensorShape(ys));
        check_values(y, want, t.rtol, t.atol);
        const tf::Tensor z =
            tf::nn::conv2d(x, f, {c.sh, c.sw}, c.same ? "SAME" : "VALID", {c.dh, c.dw});
        REQUIRE(z.shape() == tf::TensorShape(ys));
        check_values(z, want, t.rtol, t.atol);
      }
    }
  }
}

TEST_CASE("grouped conv2d primitives check their group count", "[cpu][nn_grad]") {
  using tf::testing::require_error;
  const tf::Tensor x = tf::ones({1, 4, 4, 6}), f = tf::ones({3, 3, 2, 6});
  require_error(
      [&] {
        tf::detail::dispatch(tf::prims::Conv2D(1, 1, 1, 1, true, 2), {x, f});
      },
      {"[conv2d]", "input depth 6 does not match filter depth 2 times 2 groups"});
  require_error(
      [&] {
        tf::detail::dispatch(tf::prims::Conv2D(1, 1, 1, 1, true, 0), {x, f});
      },
      {"[conv2d]", "groups must be positive, got 0"});
  require_error(
      [&] {
        tf::detail::dispatch(tf::prims::Conv2D(1, 1, 1, 1, true, 3), {x, tf::ones({3, 3, 2, 4})});
      },
      {"[conv2d]", "4 output channels must be divisible by the 3 groups"});
  const tf::Tensor dy = tf::ones({1, 4, 4, 6});
  require_error(
      [&] {
        tf::detail::conv2d_backprop_input(tf::TensorShape{1, 4, 4, 6}, f, dy, 1, 1, 1, 1, true, 2);
      },
      {"[conv2d_backprop_input]", "filter depth 2 times 2 groups"});
  require_error(
      [&] {
        tf::detail::conv2d_backprop_filter(x, tf::TensorShape{3, 3, 2, 6}, dy, 1, 1, 1, 1, true, 2);
      },
      {"[conv2d_backprop_filter]", "filter depth 2 times 2 groups"});
  // The group count is an attribute: graph dumps show it and equivalence compares it.
  CHECK(tf::prims::Conv2D(1, 1, 1, 1, true, 3).attributes() ==
        "strides=[1, 1], dilations=[1, 1], padding=SAME, groups=3");
  CHECK_FALSE(
      tf::prims::Conv2D(1, 1, 1, 1, true, 3).is_equivalent(tf::prims::Conv2D(1, 1, 1, 1, true)));
  CHECK_FALSE(
      tf::prims::Conv2DBackpropFilter({3, 3, 2, 6}, 1, 1, 1, 1, true, 3)
          .is_equivalent(tf::prims::Conv2DBackpropFilter({3, 3, 2, 6}, 1, 1, 1, 1, true, 2)));
}

TEST_CASE("conv2d gradients of empty tensors", "[cpu][cuda][nn_grad]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    INFO("device " << dev.to_string());
    // No batch: empty dx, and a filter gradient of empty sums.
    const tf::Tensor dx = tf::detail::conv2d_backprop_input(
        {0, 5, 5, 2}, tf::ones({3, 3, 2, 4}), tf::zeros({0, 5, 5, 4}), 1, 1, 1, 1, true);
    CHECK(dx.shape() == tf::TensorShape({0, 5, 5, 2}));
    const tf::Tensor df = tf::detail::conv2d_backprop_filter(
        tf::zeros({0, 5, 5, 2}), {3, 3, 2, 4}, tf::zeros({0, 5, 5, 4}), 1, 1, 1, 1, true);
    CHECK(df.shape() == tf::TensorShape({3, 3, 2, 4}));
    check_values(df, std::vector<double>(72, 0.0));
    // No output channels: dx is zero.
    const tf::Tensor dx0 = tf::detail::conv2d_backprop_input(
        {1, 3, 3, 2}, tf::ones({2, 2, 2, 0}), tf::zeros({1, 2, 2, 0}), 1, 1, 1, 1, false);
    check_values(dx0, std::vector<double>(18, 0.0));
  }
}

TEST_CASE("pooling gradients of inputs with an empty spatial dimension", "[cpu][cuda][nn_grad]") {
  // SAME windows are clamped to the input; an empty height or width once made a window of
  // 1 - stride (the gradient failed with "ksize must be positive, got [-1, 3]").
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    INFO("device " << dev.to_string());
    for (const tf::TensorShape& shape :
         {tf::TensorShape{1, 0, 5, 1}, tf::TensorShape{1, 5, 0, 1}, tf::TensorShape{1, 0, 0, 1}}) {
      for (bool max : {true, false}) {
        INFO("shape " << shape.to_string() << (max ? " max" : " avg"));
        const tf::Tensor x = tf::ones(shape);
        tf::GradientTape tape;
        tape.watch(x);
        const tf::Tensor y = max ? tf::nn::max_pool2d(x, {3}, {2}, "SAME")
                                 : tf::nn::avg_pool2d(x, {3}, {2}, "SAME");
        CHECK(y.shape() == tf::TensorShape({1, (shape[1] + 1) / 2, (shape[2] + 1) / 2, 1}));
        const tf::Tensor g = tape.gradient(tf::reduce_sum(y), x);
        CHECK(g.shape() == shape);
      }
    }
  }
}

TEST_CASE("nn gradient ops read inputs at an offset into their storage", "[cpu][cuda][nn_grad]") {
  // Views one element into a larger buffer: the CUDA code hands cuDNN aligned copies.
  const ConvCase c{{2, 7, 6, 5}, {3, 3, 5, 4}, 2, 2, 1, 1, true};   // grown for cuDNN
  const ConvCase c1{{2, 7, 6, 5}, {3, 3, 5, 4}, 1, 1, 1, 1, true};  // not grown
  const PoolCase pc{{2, 7, 6, 5}, 3, 3, 2, 2, true};
  auto offset_view = [](const std::vector<int64_t>& s, tf::DType dt, unsigned seed) {
    const tf::Tensor big = make(tf::testing::random_values(numel(s) + 1, -1, 1, seed),
                                tf::TensorShape{numel(s) + 1}, dt);
    return tf::detail::view(big, tf::TensorShape(s), tf::dtype_size(dt));
  };
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    for (tf::DType dt : {tf::float16, tf::float32, tf::float64}) {
      INFO("device " << dev.to_string() << ", dtype " << tf::dtype_name(dt));
      const double tol = dt == tf::float16 ? 2e-2 : 1e-5;
      for (const ConvCase& cc : {c, c1}) {
        const tf::Tensor x = offset_view(cc.x, dt, 1), f = offset_view(cc.f, dt, 2),
                         dy = offset_view(conv_out_shape(cc), dt, 3);
        check_values(tf::detail::conv2d_backprop_input(tf::TensorShape(cc.x), f, dy, cc.sh, cc.sw,
                                                       cc.dh, cc.dw, cc.same),
                     backprop_input_ref(values(f), values(dy), cc), tol, tol);
        check_values(tf::detail::conv2d_backprop_filter(x, tf::TensorShape(cc.f), dy, cc.sh, cc.sw,
                                                        cc.dh, cc.dw, cc.same),
                     backprop_filter_ref(values(x), values(dy), cc), tol, 4 * tol);
      }
      const tf::Tensor x = offset_view(pc.x, dt, 4), dy = offset_view(pool_out_shape(pc), dt, 5);
      check_values(tf::detail::max_pool2d_grad(x, dy, pc.kh, pc.kw, pc.sh, pc.sw, pc.same),
                   max_grad_ref(values(x), values(dy), pc), tol, tol);
      check_values(tf::detail::avg_pool2d_grad(tf::TensorShape(pc.x), dy, pc.kh, pc.kw, pc.sh,
                                               pc.sw, pc.same),
                   avg_grad_ref(values(dy), pc), tol, tol);
    }
  }
}

TEST_CASE("max_pool2d_grad and avg_pool2d_grad match float64 loops", "[cpu][cuda][nn_grad]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    for (const Tol& t : kTols) {
      for (size_t i = 0; i < kPoolCases.size(); ++i) {
        const PoolCase& c = kPoolCases[i];
        INFO("device " << dev.to_string() << ", dtype " << tf::dtype_name(t.dtype) << ", case "
                       << i);
        const auto ys = pool_out_shape(c);
        const tf::Tensor x = make(tf::testing::random_values(numel(c.x), -1, 1, 7 + i),
                                  tf::TensorShape(c.x), t.dtype);
        const tf::Tensor dy = make(tf::testing::random_values(numel(ys), -1, 1, 300 + i),
                                   tf::TensorShape(ys), t.dtype);
        const tf::Tensor mx = tf::detail::max_pool2d_grad(x, dy, c.kh, c.kw, c.sh, c.sw, c.same);
        CHECK(mx.dtype() == t.dtype);
        CHECK(mx.placement() == dev);
        REQUIRE(mx.shape() == tf::TensorShape(c.x));
        check_values(mx, max_grad_ref(values(x), values(dy), c), t.rtol, t.atol);
        const tf::Tensor av =
            tf::detail::avg_pool2d_grad(tf::TensorShape(c.x), dy, c.kh, c.kw, c.sh, c.sw, c.same);
        CHECK(av.dtype() == t.dtype);
        CHECK(av.placement() == dev);
        REQUIRE(av.shape() == tf::TensorShape(c.x));
        check_values(av, avg_grad_ref(values(dy), c), t.rtol, t.atol);
      }
    }
  }
}

TEST_CASE("max_pool2d_grad routes ties to the first maximal element", "[cpu][cuda][nn_grad]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    INFO("device " << dev.to_string());
    // A constant image: every window's first valid element takes its dy.
    {
      const tf::Tensor x = tf::ones({1, 4, 4, 1});
      const tf::Tensor dy = make({1, 2, 3, 4}, {1, 2, 2, 1}, tf::float32);
      const tf::Tensor dx = tf::detail::max_pool2d_grad(x, dy, 2, 2, 2, 2, false);
      check_values(dx, {1, 0, 2, 0, 0, 0, 0, 0, 3, 0, 4, 0, 0, 0, 0, 0}, 0, 0);
    }
    // Overlapping 3x3 SAME windows (pad 1 / 1) over a 3x4 image with two equal maxima at
    // columns 1 and 3 of row 1: windows at output columns 0-2 hold column 1 (column 2 holds
    // both, and the first in row-major order wins); column 3 holds only column 3.
    {
      const tf::Tensor x = make({0, 0, 0, 0, 0, 5, 0, 5, 0, 0, 0, 0}, {1, 3, 4, 1}, tf::float64);
      const tf::Tensor dy =
          make({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {1, 3, 4, 1}, tf::float64);
      const tf::Tensor dx = tf::detail::max_pool2d_grad(x, dy, 3, 3, 1, 1, true);
      check_values(dx, {0, 0, 0, 0, 0, 6 + 18 + 30, 0, 4 + 8 + 12, 0, 0, 0, 0}, 0, 0);
    }
    // NaN: a NaN first element keeps its window (the forward's `max < v` keeps it as the
    // maximum); a later NaN never takes one.
    for (tf::DType dt : {tf::float32, tf::float64, tf::float16}) {
      const double nan = std::numeric_limits<double>::quiet_NaN();
      const tf::Tensor x = make({nan, 1, 2, 3, 0, 5, nan, 1}, {1, 2, 4, 1}, dt);
      const tf::Tensor dy = make({10, 20}, {1, 1, 2, 1}, dt);
      check_values(tf::detail::max_pool2d_grad(x, dy, 2, 2, 2, 2, false),
                   {10, 0, 0, 20, 0, 0, 0, 0}, 0, 0);
    }
    // Integer-valued random inputs (many ties) in every dtype and case, against the reference.
    for (const Tol& t : kTols) {
      for (size_t i = 0; i < kPoolCases.size(); ++i) {
        const PoolCase& c = kPoolCases[i];
        INFO("dtype " << tf::dtype_name(t.dtype) << ", case " << i);
        std::vector<double> xv = tf::testing::random_values(numel(c.x), 0, 3, 40 + i);
        for (double& v : xv) v = std::floor(v);
        const auto ys = pool_out_shape(c);
        const tf::Tensor x = make(xv, tf::TensorShape(c.x), t.dtype);
        const tf::Tensor dy = make(tf::testing::random_values(numel(ys), 0, 1, 400 + i),
                                   tf::TensorShape(ys), t.dtype);
        const tf::Tensor dx = tf::detail::max_pool2d_grad(x, dy, c.kh, c.kw, c.sh, c.sw, c.same);
        check_values(dx, max_grad_ref(xv, values(dy), c), t.rtol, t.atol);
      }
    }
  }
}

// The CUDA kernels' per-element bodies (ops/cuda/nn_grad_element.h) run here on the host, so
// their index arithmetic is checked on machines without a GPU too.
TEST_CASE("the CUDA gradient kernels' element functions match float64 loops", "[cpu][nn_grad]") {
  namespace ng = tf::cuda::nngrad;
  for (size_t i = 0; i < kConvCases.size(); ++i) {
    const ConvCase& c = kConvCases[i];
    INFO("conv case " << i);
    const ConvDims d = conv_dims(c);
    const auto ys = conv_out_shape(c);
    const ng::ConvGeom g{d.N,  d.H,  d.W,  d.C,  d.KH, d.KW, d.O,  d.OH,
                         d.OW, c.sh, c.sw, c.dh, c.dw, d.pt, d.pl, c.groups};
    const auto x = tf::testing::random_values(numel(c.x), -1, 1, 1 + i);
    const auto f = tf::testing::random_values(numel(c.f), -1, 1, 100 + i);
    const auto dy = tf::testing::random_values(numel(ys), -1, 1, 200 + i);
    const auto want_dx = backprop_input_ref(f, dy, c), want_df = backprop_filter_ref(x, dy, c);
    size_t bad = 0;
    for (size_t j = 0; j < want_dx.size(); ++j)
      bad +=
          std::abs(ng::conv_input_element<double>(g, f.data(), dy.data(), static_cast<int64_t>(j)) -
                   want_dx[j]) > 1e-12;
    for (size_t j = 0; j < want_df.size(); ++j)
      bad += std::abs(
                 ng::conv_filter_element<double>(g, x.data(), dy.data(), static_cast<int64_t>(j)) -
                 want_df[j]) > 1e-12;
    CHECK(bad == 0);
    // The cuDNN path's bottom/right growth and crop: pad by one row and column, crop back.
    std::vector<double> grown(static_cast<size_t>(d.N * (d.H + 1) * (d.W + 1) * d.C));
    for (size_t j = 0; j < grown.size(); ++j) {
      const int64_t s = ng::resize_source(static_cast<int64_t>(j), d.H, d.W, d.C, d.H + 1, d.W + 1);
      grown[j] = s >= 0 ? x[static_cast<size_t>(s)] : 0.0;
    }
    double grown_sum = 0, x_sum = 0;
    for (double v : grown) grown_sum += v;
    for (double v : x) x_sum += v;
    CHECK(grown_sum == Approx(x_sum).epsilon(1e-12));
    for (size_t j = 0; j < x.size(); ++j) {
      const int64_t s = ng::resize_source(static_cast<int64_t>(j), d.H + 1, d.W + 1, d.C, d.H, d.W);
      bad += s < 0 || grown[static_cast<size_t>(s)] != x[j];
    }
    CHECK(bad == 0);
  }
  for (size_t i = 0; i < kPoolCases.size(); ++i) {
    const PoolCase& c = kPoolCases[i];
    INFO("pool case " << i);
    const auto ys = pool_out_shape(c);
    const ng::PoolGeom g{c.x[0],
                         c.x[1],
                         c.x[2],
                         c.x[3],
                         ys[1],
                         ys[2],
                         c.kh,
                         c.kw,
                         c.sh,
                         c.sw,
                         tf_pad(c.x[1], c.kh, c.sh, 1, c.same).before,
                         tf_pad(c.x[2], c.kw, c.sw, 1, c.same).before};
    // Integer values in [0, 3): ties everywhere.
    std::vector<double> x = tf::testing::random_values(numel(c.x), 0, 3, 40 + i);
    for (double& v : x) v = std::floor(v);
    const auto dy = tf::testing::random_values(numel(ys), -1, 1, 300 + i);
    const auto want_max = max_grad_ref(x, dy, c), want_avg = avg_grad_ref(dy, c);
    size_t bad = 0;
    for (size_t j = 0; j < x.size(); ++j) {
      const auto k = static_cast<int64_t>(j);
      bad += std::abs(ng::max_pool_grad_element<double>(g, x.data(), dy.data(), k) - want_max[j]) >
             1e-12;
      bad += std::abs(ng::avg_pool_grad_element<double>(g, dy.data(), k) - want_avg[j]) > 1e-12;
    }
    CHECK(bad == 0);
  }
}

TEST_CASE("the CUDA max-pool gradient element follows the CPU rule for NaN", "[cpu][nn_grad]") {
  namespace ng = tf::cuda::nngrad;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> x{nan, 1, 2, 3, 0, 5, nan, 1}, dy{10, 20};
  const ng::PoolGeom g{1, 2, 4, 1, 1, 2, 2, 2, 2, 2, 0, 0};  // 2x2/2 VALID over (1, 2, 4, 1)
  const std::vector<double> want{10, 0, 0, 20, 0, 0, 0, 0};
  for (int64_t i = 0; i < 8; ++i) {
    INFO("element " << i);
    CHECK(ng::max_pool_grad_element<double>(g, x.data(), dy.data(), i) ==
          want[static_cast<size_t>(i)]);
  }
}

// ---------------------------------------------------------------- vjps

TEST_CASE("conv2d vjp matches finite differences", "[cpu][cuda][nn_grad]") {
  const std::vector<ConvCase> cases = {
      {{2, 5, 5, 2}, {2, 2, 2, 3}, 2, 2, 1, 1, true},   // pad 0 / 1
      {{1, 6, 5, 3}, {3, 3, 3, 2}, 1, 1, 2, 1, false},  // VALID, dilation
      {{1, 5, 6, 2}, {3, 2, 2, 2}, 1, 2, 2, 1, true},
      {{2, 4, 4, 1}, {4, 4, 1, 2}, 3, 3, 1, 1, true},      // pad 1 / 2
      {{1, 5, 4, 4}, {3, 2, 2, 4}, 1, 1, 1, 1, true, 2},   // 2 groups of 2 -> 2
      {{2, 6, 5, 6}, {2, 2, 2, 3}, 2, 1, 1, 2, false, 3},  // 3 groups of 2 -> 1, VALID
  };
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    for (size_t i = 0; i < cases.size(); ++i) {
      const ConvCase& c = cases[i];
      INFO("device " << dev.to_string() << ", case " << i);
      const tf::Tensor x = make(tf::testing::random_values(numel(c.x), -1, 1, 10 + i),
                                tf::TensorShape(c.x), tf::float64);
      const tf::Tensor f = make(tf::testing::random_values(numel(c.f), -1, 1, 20 + i),
                                tf::TensorShape(c.f), tf::float64);
      const tf::prims::Conv2D p(c.sh, c.sw, c.dh, c.dw, c.same, c.groups);
      check_vjp(p, {x, f}, {0, 1}, 30 + static_cast<unsigned>(i));
      // The gradient ops' own vjps (second order).
      const auto ys = conv_out_shape(c);
      const tf::Tensor dy = make(tf::testing::random_values(numel(ys), -1, 1, 40 + i),
                                 tf::TensorShape(ys), tf::float64);
      check_vjp(tf::prims::Conv2DBackpropInput(tf::TensorShape(c.x), c.sh, c.sw, c.dh, c.dw, c.same,
                                               c.groups),
                {f, dy}, {0, 1}, 50 + static_cast<unsigned>(i));
      check_vjp(tf::prims::Conv2DBackpropFilter(tf::TensorShape(c.f), c.sh, c.sw, c.dh, c.dw,
                                                c.same, c.groups),
                {x, dy}, {0, 1}, 60 + static_cast<unsigned>(i));
    }
  }
}

TEST_CASE("conv2d with SAME padding drops the dilated taps that read only padding",
          "[cpu][cuda][nn_grad]") {
  // Dilations longer than the input: the taps that never reach it are dropped (a VALID
  // convolution of the useful taps over the stretch of padded input they read); values and
  // gradients stay those of the whole filter.
  const std::vector<ConvCase> cases = {
      {{1, 4, 4, 2}, {3, 3, 2, 3}, 1, 1, 5, 5, true},  // only the centre tap
      {{2, 7, 9, 3}, {3, 4, 3, 2}, 2, 1, 4, 3, true},  // some taps, strided rows
      {{1, 5, 6, 2}, {5, 5, 2, 2}, 2, 3, 2, 4, true},  // rows whole, columns trimmed
      {{1, 6, 3, 1}, {2, 3, 1, 2}, 1, 1, 1, 7, true},  // even kernel: pad 0 / more
      {{1, 4, 4, 1}, {3, 3, 1, 1}, 1, 1, 100000000, 100000000, true},  // took minutes
      {{1, 3, 5, 2}, {4, 3, 2, 1}, 1, 1, 2147483647, 1, true},         // INT_MAX
  };
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    for (size_t i = 0; i < cases.size(); ++i) {
      const ConvCase& c = cases[i];
      INFO("device " << dev.to_string() << ", case " << i);
      const auto xv = tf::testing::random_values(numel(c.x), -1, 1, 70 + i);
      const auto fv = tf::testing::random_values(numel(c.f), -1, 1, 80 + i);
      const auto ys = conv_out_shape(c);
      const auto dyv = tf::testing::random_values(numel(ys), -1, 1, 90 + i);
      std::vector<double> want(static_cast<size_t>(numel(ys)), 0.0);
      for_each_tap(c, [&](int64_t xi, int64_t fi, int64_t yi) { want[yi] += xv[xi] * fv[fi]; });
      const tf::Tensor x = make(xv, tf::TensorShape(c.x), tf::float64);
      const tf::Tensor f = make(fv, tf::TensorShape(c.f), tf::float64);
      tf::GradientTape tape;
      tape.watch(x);
      tape.watch(f);
      const tf::Tensor y = tf::nn::conv2d(x, f, {c.sh, c.sw}, "SAME", {c.dh, c.dw});
      REQUIRE(y.shape() == tf::TensorShape(ys));
      CHECK(y.placement() == dev);
      check_values(y, want, 1e-12, 1e-12);
      const auto g = tape.gradient({y}, std::vector<tf::Tensor>{x, f},
                                   {make(dyv, tf::TensorShape(ys), tf::float64)});
      check_values(g[0], backprop_input_ref(fv, dyv, c), 1e-12, 1e-12);
      check_values(g[1], backprop_filter_ref(xv, dyv, c), 1e-12, 1e-12);
    }
  }
  // The filter checks still see the filter as given.
  TF_REQUIRE_THROWS_CONTAINING(
      tf::nn::conv2d(tf::ones({1, 4, 4, 2}), tf::ones({3, 3, 3, 1}), {1}, "SAME", {9}),
      tf::InvalidArgumentError, "input depth 2 does not match filter depth 3");
}

TEST_CASE("conv2d refuses a filter without elements", "[cpu][nn_grad]") {
  // TF: "filter must not have zero elements" (an empty output or zeros were returned).
  TF_REQUIRE_THROWS_CONTAINING(
      tf::nn::conv2d(tf::ones({1, 4, 4, 1}), tf::ones({3, 3, 1, 0}), {1}, "SAME"),
      tf::InvalidArgumentError, "filter must not have zero elements, got (3, 3, 1, 0)");
  TF_REQUIRE_THROWS_CONTAINING(
      tf::nn::conv2d(tf::ones({1, 4, 4, 0}), tf::ones({3, 3, 0, 1}), {1}, "VALID"),
      tf::InvalidArgumentError, "filter must not have zero elements");
}

TEST_CASE("max_pool2d and avg_pool2d vjps match finite differences", "[cpu][cuda][nn_grad]") {
  const std::vector<PoolCase> cases = {
      {{2, 5, 5, 2}, 2, 2, 2, 2, true},   // pad 0 / 1
      {{1, 6, 6, 3}, 3, 3, 1, 1, true},   // overlapping windows
      {{1, 7, 6, 2}, 3, 2, 2, 3, false},  // VALID
      {{1, 5, 4, 1}, 4, 2, 3, 1, true},   // pad 1 / 2 rows
  };
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    for (size_t i = 0; i < cases.size(); ++i) {
      const PoolCase& c = cases[i];
      INFO("device " << dev.to_string() << ", case " << i);
      // Distinct values (no ties within 2h), so max pooling is differentiable at x.
      const tf::Tensor x = make(tf::testing::random_values(numel(c.x), -1, 1, 70 + i),
                                tf::TensorShape(c.x), tf::float64);
      check_vjp(tf::prims::MaxPool2D(c.kh, c.kw, c.sh, c.sw, c.same), {x}, {0},
                80 + static_cast<unsigned>(i));
      check_vjp(tf::prims::AvgPool2D(c.kh, c.kw, c.sh, c.sw, c.same), {x}, {0},
                90 + static_cast<unsigned>(i));
      const auto ys = pool_out_shape(c);
      const tf::Tensor dy = make(tf::testing::random_values(numel(ys), -1, 1, 100 + i),
                                 tf::TensorShape(ys), tf::float64);
      check_vjp(tf::prims::AvgPool2DGrad(tf::TensorShape(c.x), c.kh, c.kw, c.sh, c.sw, c.same),
                {dy}, {0}, 110 + static_cast<unsigned>(i));
      // MaxPool2DGrad: zero with respect to the input; linear in dy, whose vjp gathers at the
      // argmax (MaxPool2DGradGrad), and that one's vjp routes back (MaxPool2DGrad).
      const tf::prims::MaxPool2DGrad mg(c.kh, c.kw, c.sh, c.sw, c.same);
      check_vjp(mg, {x, dy}, {0, 1}, 120 + static_cast<unsigned>(i));
      const tf::Tensor g = tf::ones(tf::TensorShape(c.x), tf::float64);
      const std::vector<tf::Tensor> primals = saved_only(mg, {x, dy}), cot{g}, outs{g};
      const std::vector<int> zero{0};
      const auto gx = mg.vjp(primals, cot, zero, outs);
      check_values(gx.at(0), std::vector<double>(static_cast<size_t>(numel(c.x)), 0.0), 0, 0);
      CHECK(gx.at(0).placement() == dev);
      const tf::Tensor h = make(tf::testing::random_values(numel(c.x), -1, 1, 130 + i),
                                tf::TensorShape(c.x), tf::float64);
      check_vjp(tf::prims::MaxPool2DGradGrad(c.kh, c.kw, c.sh, c.sw, c.same), {x, h}, {0, 1},
                140 + static_cast<unsigned>(i));
    }
  }
}

TEST_CASE("nn gradient ops need only what vjp_saves keeps", "[cpu][nn_grad]") {
  using P = tf::Primitive;
  CHECK(tf::prims::Conv2D(1, 1, 1, 1, true).vjp_saves() == (P::save_input(0) | P::save_input(1)));
  CHECK(tf::prims::MaxPool2D(2, 2, 2, 2, true).vjp_saves() == P::save_input(0));
  CHECK(tf::prims::AvgPool2D(2, 2, 2, 2, true).vjp_saves() == 0u);
  CHECK(tf::prims::AvgPool2DGrad({1, 4, 4, 1}, 2, 2, 2, 2, true).vjp_saves() == 0u);
  CHECK(tf::prims::MaxPool2DGrad(2, 2, 2, 2, true).vjp_saves() == P::save_input(0));
  CHECK(tf::prims::MaxPool2DGradGrad(2, 2, 2, 2, true).vjp_saves() == P::save_input(0));
  // Attributes name the shape attribute, so two gradient ops of different shapes differ.
  const tf::prims::Conv2DBackpropInput a({1, 5, 5, 2}, 2, 2, 1, 1, true);
  const tf::prims::Conv2DBackpropInput b({1, 6, 6, 2}, 2, 2, 1, 1, true);
  CHECK(a.attributes() ==
        "input_shape=(1, 5, 5, 2), strides=[2, 2], dilations=[1, 1], padding=SAME");
  CHECK_FALSE(a.is_equivalent(b));
  CHECK(a.is_equivalent(tf::prims::Conv2DBackpropInput({1, 5, 5, 2}, 2, 2, 1, 1, true)));
  CHECK(tf::prims::AvgPool2DGrad({1, 4, 4, 1}, 2, 2, 2, 2, false).attributes() ==
        "input_shape=(1, 4, 4, 1), ksize=[2, 2], strides=[2, 2], padding=VALID");
}

// The vjps inside the real tape (placeholders for what vjp_saves() leaves out), and second order
// through nested tapes: the outer tape records the gradient ops the inner tape runs.
TEST_CASE("conv2d and pooling gradients through GradientTape, second order included",
          "[cpu][cuda][nn_grad]") {
  const ConvCase c{{2, 5, 5, 2}, {2, 2, 2, 3}, 2, 2, 1, 1, true};  // pad 0 / 1
  const PoolCase pc{{2, 5, 5, 3}, 3, 3, 2, 2, true};               // pad 1 / 1
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    INFO("device " << dev.to_string());
    const auto ys = conv_out_shape(c);
    auto rnd = [](const std::vector<int64_t>& s, unsigned seed) {
      return make(tf::testing::random_values(numel(s), -1, 1, seed), tf::TensorShape(s),
                  tf::float64);
    };
    const tf::Tensor x = rnd(c.x, 1), f = rnd(c.f, 2), g = rnd(ys, 3), h = rnd(c.f, 4);
    {
      tf::GradientTape tape(tf::TapeOptions{.persistent = true});
      tape.watch(x);
      tape.watch(f);
      const tf::Tensor y = tf::nn::conv2d(x, f, {2}, "SAME");
      check_values(tape.gradient(y, x, g), backprop_input_ref(values(f), values(g), c), 1e-12,
                   1e-12);
      check_values(tape.gradient(y, f, g), backprop_filter_ref(values(x), values(g), c), 1e-12,
                   1e-12);
    }
    {
      // d/dx sum(h * d/df sum(g * conv2d(x, f))) = backprop_input(filters h, dy g).
      tf::GradientTape outer;
      outer.watch(x);
      tf::Tensor df;
      {
        tf::GradientTape inner;
        inner.watch(f);
        df = inner.gradient(tf::nn::conv2d(x, f, {2}, "SAME"), f, g);
      }
      check_values(outer.gradient(df, x, h), backprop_input_ref(values(h), values(g), c), 1e-12,
                   1e-12);
    }
    const auto ps = pool_out_shape(pc);
    const tf::Tensor px = rnd(pc.x, 5), pg = rnd(ps, 6), ph = rnd(pc.x, 7);
    {
      tf::GradientTape tape(tf::TapeOptions{.persistent = true});
      tape.watch(px);
      const tf::Tensor ym = tf::nn::max_pool2d(px, {3}, {2}, "SAME");
      const tf::Tensor ya = tf::nn::avg_pool2d(px, {3}, {2}, "SAME");
      check_values(tape.gradient(ym, px, pg), max_grad_ref(values(px), values(pg), pc), 1e-12,
                   1e-12);
      check_values(tape.gradient(ya, px, pg), avg_grad_ref(values(pg), pc), 1e-12, 1e-12);
    }
    {
      // avg_pool2d's gradient is linear in its upstream gradient, with avg_pool2d as its vjp.
      tf::GradientTape outer;
      outer.watch(pg);
      tf::Tensor dx;
      {
        tf::GradientTape inner;
        inner.watch(px);
        dx = inner.gradient(tf::nn::avg_pool2d(px, {3}, {2}, "SAME"), px, pg);
      }
      tf::testing::check_close(outer.gradient(dx, pg, ph), tf::nn::avg_pool2d(ph, {3}, {2}, "SAME"),
                               1e-12, 1e-12);
    }
    {
      // max_pool2d's gradient: zero with respect to the input; with respect to dy, the
      // direction's values at each window's argmax: max_pool2d's derivative along ph, here by
      // central differences (no ties in px).
      tf::GradientTape outer(tf::TapeOptions{.persistent = true});
      outer.watch(px);
      outer.watch(pg);
      tf::Tensor dx;
      {
        tf::GradientTape inner;
        inner.watch(px);
        dx = inner.gradient(tf::nn::max_pool2d(px, {3}, {2}, "SAME"), px, pg);
      }
      check_values(outer.gradient(dx, px, ph),
                   std::vector<double>(static_cast<size_t>(numel(pc.x)), 0.0), 0, 0);
      const tf::Tensor step = ph * 1e-6;
      const tf::Tensor jvp = (tf::nn::max_pool2d(px + step, {3}, {2}, "SAME") -
                              tf::nn::max_pool2d(px - step, {3}, {2}, "SAME")) *
                             5e5;
      tf::testing::check_close(outer.gradient(dx, pg, ph), jvp, 1e-8, 1e-8);
    }
  }
}

// ---------------------------------------------------------------- errors

TEST_CASE("nn gradient ops reject bad shapes and dtypes", "[cpu][nn_grad]") {
  using tf::testing::require_error;
  const tf::Tensor f = tf::ones({3, 3, 2, 4});
  const tf::Tensor x = tf::ones({1, 5, 5, 2});
  const tf::Tensor dy = tf::ones({1, 3, 3, 4});  // conv2d(x, f, 2, SAME)
  // conv2d_backprop_input
  require_error(
      [&] {
        tf::detail::conv2d_backprop_input({1, 5, 5, 2}, f, tf::ones({1, 2, 3, 4}), 2, 2, 1, 1,
                                          true);
      },
      {"[conv2d_backprop_input]", "dy shape (1, 2, 3, 4)", "(1, 3, 3, 4)"});
  require_error(
      [&] {
        tf::detail::conv2d_backprop_input({1, 5, 5, 3}, f, dy, 2, 2, 1, 1, true);
      },
      {"[conv2d_backprop_input]", "input depth 3", "filter depth 2"});
  require_error(
      [&] {
        tf::detail::conv2d_backprop_input({1, 5, 5, 2}, f, tf::ones({1, 3, 3, 4}, tf::float64), 2,
                                          2, 1, 1, true);
      },
      {"[conv2d_backprop_input]", "float32", "float64"});
  require_error(
      [&] {
        tf::detail::conv2d_backprop_input({1, 5, 5, 2}, tf::ones({3, 3, 2, 4}, tf::int32),
                                          tf::ones({1, 3, 3, 4}, tf::int32), 2, 2, 1, 1, true);
      },
      {"[conv2d_backprop_input]", "int32"});
  require_error(
      [&] {
        tf::detail::conv2d_backprop_input({5, 5, 2}, f, dy, 2, 2, 1, 1, true);
      },
      {"[conv2d_backprop_input]", "input_shape must be rank 4", "(5, 5, 2)"});
  require_error(
      [&] {
        tf::detail::conv2d_backprop_input({1, 5, 5, 2}, tf::ones({3, 3, 2}), dy, 2, 2, 1, 1, true);
      },
      {"[conv2d_backprop_input]", "filters must be rank 4", "(3, 3, 2)"});
  require_error(
      [&] {
        tf::detail::conv2d_backprop_input({1, 2, 2, 2}, f, dy, 1, 1, 1, 1, false);
      },
      {"[conv2d_backprop_input]", "exceeds the input", "VALID"});
  require_error(
      [&] {
        tf::detail::conv2d_backprop_input({1, 5, 5, 2}, f, dy, 0, 2, 1, 1, true);
      },
      {"[conv2d_backprop_input]", "strides must be positive"});
  // conv2d_backprop_filter
  require_error(
      [&] {
        tf::detail::conv2d_backprop_filter(x, {3, 3, 2, 4}, tf::ones({1, 3, 3, 5}), 2, 2, 1, 1,
                                           true);
      },
      {"[conv2d_backprop_filter]", "dy shape (1, 3, 3, 5)", "(1, 3, 3, 4)"});
  require_error(
      [&] {
        tf::detail::conv2d_backprop_filter(x, {3, 3, 1, 4}, dy, 2, 2, 1, 1, true);
      },
      {"[conv2d_backprop_filter]", "input depth 2", "filter depth 1"});
  require_error(
      [&] {
        tf::detail::conv2d_backprop_filter(x, {3, 3, 2, 4}, dy, 1, 1, 1, 1, true);
      },
      {"[conv2d_backprop_filter]", "dy shape (1, 3, 3, 4)", "(1, 5, 5, 4)"});
  require_error(
      [&] {
        tf::detail::conv2d_backprop_filter(tf::ones({1, 5, 5, 2}, tf::float16), {3, 3, 2, 4}, dy, 2,
                                           2, 1, 1, true);
      },
      {"[conv2d_backprop_filter]", "float16", "float32"});
  require_error(
      [&] {
        tf::detail::conv2d_backprop_filter(x, {3, 3, 2}, dy, 2, 2, 1, 1, true);
      },
      {"[conv2d_backprop_filter]", "filter_shape must be rank 4"});
  // max_pool2d_grad
  require_error(
      [&] {
        tf::detail::max_pool2d_grad(x, tf::ones({1, 3, 3, 3}), 2, 2, 2, 2, true);
      },
      {"[max_pool2d_grad]", "dy shape (1, 3, 3, 3)", "(1, 3, 3, 2)"});
  require_error(
      [&] {
        tf::detail::max_pool2d_grad(x, tf::ones({1, 3, 3, 2}, tf::float64), 2, 2, 2, 2, true);
      },
      {"[max_pool2d_grad]", "float32", "float64"});
  require_error(
      [&] {
        tf::detail::max_pool2d_grad(tf::ones({1, 5, 5, 2}, tf::int32),
                                    tf::ones({1, 3, 3, 2}, tf::int32), 2, 2, 2, 2, true);
      },
      {"[max_pool2d_grad]", "int32"});
  require_error(
      [&] {
        tf::detail::max_pool2d_grad(tf::ones({5, 5, 2}), dy, 2, 2, 2, 2, true);
      },
      {"[max_pool2d_grad]", "input must be rank 4"});
  require_error([&] { tf::detail::max_pool2d_grad(x, dy, 0, 2, 2, 2, true); },
                {"[max_pool2d_grad]", "ksize must be positive"});
  // avg_pool2d_grad
  require_error(
      [&] {
        tf::detail::avg_pool2d_grad({1, 5, 5, 2}, tf::ones({1, 2, 2, 2}), 2, 2, 2, 2, true);
      },
      {"[avg_pool2d_grad]", "dy shape (1, 2, 2, 2)", "(1, 3, 3, 2)"});
  require_error(
      [&] {
        tf::detail::avg_pool2d_grad({1, 5, 5, 2}, tf::ones({1, 3, 3, 2}, tf::int64), 2, 2, 2, 2,
                                    true);
      },
      {"[avg_pool2d_grad]", "int64"});
  require_error(
      [&] {
        tf::detail::avg_pool2d_grad({5, 5, 2}, tf::ones({1, 3, 3, 2}), 2, 2, 2, 2, true);
      },
      {"[avg_pool2d_grad]", "input_shape must be rank 4"});
  require_error(
      [&] {
        tf::detail::avg_pool2d_grad({1, 2, 2, 2}, tf::ones({1, 1, 1, 2}), 3, 3, 1, 1, false);
      },
      {"[avg_pool2d_grad]", "exceeds the input"});
}
