#include "ops/conv3d.h"

#include <algorithm>
#include <array>
#include <limits>
#include <optional>

#include "core/check.h"
#include "core/context.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/helpers.h"
#include "ops/movement.h"
#include "ops/nn.h"
#include "ops/reduce.h"
#include "ops/unary.h"

namespace tapeflow::nn {

namespace {

// 1, 3 or 5 values (TF's forms) -> {depth, height, width}.
std::array<int, 3> parse_dhw(const char* op, const char* what, const std::vector<int>& v) {
  std::array<int, 3> dhw{};
  if (v.size() == 1) {
    dhw = {v[0], v[0], v[0]};
  } else if (v.size() == 3) {
    dhw = {v[0], v[1], v[2]};
  } else if (v.size() == 5) {
    TF_CHECK_ARG(v[0] == 1 && v[4] == 1, op,
                 "{} {} must be 1 in the batch and channel dimensions (NDHWC)", what,
                 detail::vec_to_string(v));
    dhw = {v[1], v[2], v[3]};
  } else {
    TF_THROW(InvalidArgumentError, op, "{} must have 1, 3 or 5 values, got {}", what,
             detail::vec_to_string(v));
  }
  TF_CHECK_ARG(dhw[0] >= 1 && dhw[1] >= 1 && dhw[2] >= 1, op, "{} must be positive, got {}", what,
               detail::vec_to_string(v));
  return dhw;
}

bool parse_padding(const char* op, const std::string& padding) {
  TF_CHECK_ARG(padding == "SAME" || padding == "VALID", op,
               "padding must be \"SAME\" or \"VALID\", got \"{}\"", padding);
  return padding == "SAME";
}

// Rank 5, a floating dtype and known depth, height and width (the batch may be None: it is
// folded with the depth through reshapes to -1).
void check_input(const char* op, const Tensor& x) {
  const TensorShape& s = x.shape();
  TF_CHECK_ARG(x.rank() == 5, op, "input must be rank 5 (NDHWC), got shape {}", s.to_string());
  TF_CHECK_ARG(is_floating(x.dtype()), op,
               "expects float16, bfloat16, float32 or float64 tensors, got {} (input is {})",
               dtype_name(x.dtype()), s.to_string());
  TF_CHECK_ARG(s[1] != None && s[2] != None && s[3] != None && s[4] != None, op,
               "needs known depth, height, width and channels, got input shape {}", s.to_string());
}

// The output size of one dimension; a VALID window larger than the input is an error.
int64_t out_size(const char* op, const char* dim, int64_t in, int64_t k, int stride, int dilation,
                 bool same, const TensorShape& input, const std::string& window) {
  const int64_t eff = (k - 1) * dilation + 1;
  TF_CHECK_ARG(same || in >= eff, op,
               "the window's effective {} {} (size {}, dilation {}) exceeds the input {} {} with "
               "VALID padding (input is {}, window {})",
               dim, eff, k, dilation, dim, in, input.to_string(), window);
  return detail::window_dim(in, k, stride, dilation, same).out;
}

// Constants (indices, counts) go where the input lives unless a DeviceScope says otherwise.
void enter_scope(std::optional<DeviceScope>& scope, const Tensor& x) {
  if (detail::thread_context().device_stack.empty()) scope.emplace(x.placement());
}

// x's slices along axis 1 at start, start + stride, ... (count of them).
Tensor depth_slices(const Tensor& x, int64_t start, int64_t count, int stride) {
  if (stride == 1) return tapeflow::slice(x, {0, start, 0, 0, 0}, {-1, count, -1, -1, -1});
  std::vector<int64_t> idx(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) idx[static_cast<size_t>(i)] = start + i * stride;
  std::optional<DeviceScope> scope;
  enter_scope(scope, x);
  return tapeflow::gather(x, constant(idx), 1);
}

// The depth windows of a pooling: x (N, D, ...) padded by wd's pads -> (N, OD, KD, ...), the
// window of output depth o at [o, :].
Tensor depth_windows(const Tensor& x, const detail::WindowDim& wd, int kd, int sd) {
  std::vector<int64_t> idx(static_cast<size_t>(wd.out * kd));
  for (int64_t o = 0; o < wd.out; ++o)
    for (int k = 0; k < kd; ++k) idx[static_cast<size_t>(o * kd + k)] = o * sd + k;
  std::optional<DeviceScope> scope;
  enter_scope(scope, x);
  return tapeflow::gather(x, constant(idx, TensorShape{wd.out, kd}), 1);
}

enum class Pool { kMax, kAvg };

Tensor pool3d(const char* op, Pool kind, const Tensor& input, const std::vector<int>& ksize,
              const std::vector<int>& strides, const std::string& padding) {
  TF_CHECK_ARG(input.defined(), op, "the input is an undefined tensor (TF's None)");
  const auto k = parse_dhw(op, "ksize", ksize);
  const auto s = parse_dhw(op, "strides", strides);
  const bool same = parse_padding(op, padding);
  check_input(op, input);
  const TensorShape& xs = input.shape();
  // (A string: a huge SAME window's sizes overflow a TensorShape's element count.)
  const std::string window = detail::vec_to_string(k);
  const char* dims[3] = {"depth", "height", "width"};
  int64_t out[3];
  for (int i = 0; i < 3; ++i)
    out[i] = out_size(op, dims[i], xs[1 + i], k[i], s[i], 1, same, xs, window);
  const int64_t d = xs[1], c = xs[4];
  // Each depth slice pooled in 2-D: (N * D, H, W, C) -> (N, D, OH, OW, C).
  const Tensor flat = tapeflow::reshape(input, {-1, xs[2], xs[3], c});
  const Tensor p2 = kind == Pool::kMax ? max_pool2d(flat, {k[1], k[2]}, {s[1], s[2]}, padding)
                                       : avg_pool2d(flat, {k[1], k[2]}, {s[1], s[2]}, padding);
  const Tensor p = tapeflow::reshape(p2, {-1, d, out[1], out[2], c});
  if (k[0] == 1 && s[0] == 1) return p;
  // A SAME depth window longer than d + (out - 1) * stride covers the whole depth at every
  // output once clipped: that length gives the same result without an index table of, say,
  // 2^30 mostly padded taps (max_pool2d clamps its windows alike).
  const int kd =
      same && d > 0 ? static_cast<int>(std::min<int64_t>(k[0], d + (out[0] - 1) * s[0] + 1)) : k[0];
  const auto wd = detail::window_dim(d, kd, s[0], 1, same);
  // Padding that no window result sees: -inf for the maximum (every SAME window holds at least
  // one valid element), 0 for the sum.
  std::vector<std::pair<int64_t, int64_t>> pads(5, {0, 0});
  pads[1] = {wd.pad_before, wd.pad_after};
  if (kind == Pool::kMax) {
    const Tensor padded = wd.pad_before + wd.pad_after > 0
                              ? tapeflow::pad(p, pads, -std::numeric_limits<double>::infinity())
                              : p;
    return reduce_max(depth_windows(padded, wd, kd, s[0]), 2);
  }
  const Tensor padded = wd.pad_before + wd.pad_after > 0 ? tapeflow::pad(p, pads) : p;
  const Tensor sum = reduce_sum(depth_windows(padded, wd, kd, s[0]), 2);
  // 1 / (the number of valid depth slices in each window), per output depth.
  std::vector<double> inv(static_cast<size_t>(wd.out));
  for (int64_t o = 0; o < wd.out; ++o) {
    const int64_t lo = std::max<int64_t>(o * s[0] - wd.pad_before, 0);
    const int64_t hi = std::min<int64_t>(o * s[0] - wd.pad_before + kd, d);
    inv[static_cast<size_t>(o)] = hi > lo ? 1.0 / static_cast<double>(hi - lo) : 0.0;
  }
  std::optional<DeviceScope> scope;
  enter_scope(scope, input);
  const Tensor scale = cast(constant(inv, TensorShape{wd.out, 1, 1, 1}), input.dtype());
  return sum * scale;
}

}  // namespace

Tensor conv3d(const Tensor& input, const Tensor& filters, const std::vector<int>& strides,
              const std::string& padding, const std::vector<int>& dilations) {
  const char* op = "conv3d";
  TF_CHECK_ARG(input.defined() && filters.defined(), op,
               "an input is an undefined tensor (TF's None)");
  const auto s = parse_dhw(op, "strides", strides);
  const auto dl = parse_dhw(op, "dilations", dilations);
  const bool same = parse_padding(op, padding);
  const bool strided = s[0] > 1 || s[1] > 1 || s[2] > 1;
  const bool dilated = dl[0] > 1 || dl[1] > 1 || dl[2] > 1;
  TF_CHECK_ARG(!(strided && dilated), op,
               "strides {} above 1 cannot be combined with dilations {} above 1",
               detail::vec_to_string(strides), detail::vec_to_string(dilations));
  check_input(op, input);
  const TensorShape &xs = input.shape(), &fs = filters.shape();
  TF_CHECK_ARG(filters.rank() == 5, op,
               "filters must be rank 5 (depth, height, width, in, out), got shape {} (input is {})",
               fs.to_string(), xs.to_string());
  TF_CHECK_ARG(filters.dtype() == input.dtype(), op,
               "input and filters dtypes differ: {} and {} (input is {}, filters {})",
               dtype_name(input.dtype()), dtype_name(filters.dtype()), xs.to_string(),
               fs.to_string());
  TF_CHECK_ARG(fs.is_fully_defined(), op, "filters need a known shape, got {}", fs.to_string());
  TF_CHECK_ARG(fs[0] >= 1 && fs[1] >= 1 && fs[2] >= 1 && fs[3] >= 1 && fs[4] >= 1, op,
               "filters must have a positive size in every dimension, got {}", fs.to_string());
  const int64_t c = xs[4], fc = fs[3], o = fs[4];
  TF_CHECK_ARG(c % fc == 0 && o % (c / fc) == 0, op,
               "input depth {} does not match filter depth {}: input is {}, filters {} (a filter "
               "depth that divides the input's gives groups, whose count must divide the {} "
               "output channels)",
               c, fc, xs.to_string(), fs.to_string(), o);
  const char* dims[3] = {"depth", "height", "width"};
  int64_t out[3];
  for (int i = 0; i < 3; ++i)
    out[i] = out_size(op, dims[i], xs[1 + i], fs[i], s[i], dl[i], same, xs, fs.to_string());
  const auto wd = detail::window_dim(xs[1], fs[0], s[0], dl[0], same);
  std::vector<std::pair<int64_t, int64_t>> pads(5, {0, 0});
  pads[1] = {wd.pad_before, wd.pad_after};
  const Tensor padded = wd.pad_before + wd.pad_after > 0 ? tapeflow::pad(input, pads) : input;
  const std::vector<Tensor> taps = tapeflow::split(filters, static_cast<int>(fs[0]), 0);
  std::optional<Tensor> sum;
  for (int64_t k = 0; k < fs[0]; ++k) {
    const Tensor slices = depth_slices(padded, k * dl[0], out[0], s[0]);
    const Tensor y = conv2d(tapeflow::reshape(slices, {-1, xs[2], xs[3], c}),
                            tapeflow::reshape(taps[static_cast<size_t>(k)], {fs[1], fs[2], fc, o}),
                            {s[1], s[2]}, padding, {dl[1], dl[2]});
    sum = sum ? *sum + y : y;
  }
  return tapeflow::reshape(*sum, {-1, out[0], out[1], out[2], o});
}

Tensor conv3d_transpose(const Tensor& input, const Tensor& filters, const TensorShape& output_shape,
                        const std::vector<int>& strides, const std::string& padding,
                        const std::vector<int>& dilations) {
  const char* op = "conv3d_transpose";
  TF_CHECK_ARG(input.defined() && filters.defined(), op,
               "an input is an undefined tensor (TF's None)");
  const auto s = parse_dhw(op, "strides", strides);
  const auto dl = parse_dhw(op, "dilations", dilations);
  const bool same = parse_padding(op, padding);
  TF_CHECK_ARG(std::max({s[0], s[1], s[2]}) == 1 || std::max({dl[0], dl[1], dl[2]}) == 1, op,
               "strides {} above 1 cannot be combined with dilations {} above 1",
               detail::vec_to_string(strides), detail::vec_to_string(dilations));
  check_input(op, input);
  const TensorShape &xs = input.shape(), &fs = filters.shape(), &os = output_shape;
  TF_CHECK_ARG(filters.rank() == 5, op,
               "filters must be (depth, height, width, out_channels, in_channels) of rank 5, got "
               "shape {}",
               fs.to_string());
  TF_CHECK_ARG(filters.dtype() == input.dtype(), op,
               "input and filters dtypes differ: {} and {} (input is {}, filters {})",
               dtype_name(input.dtype()), dtype_name(filters.dtype()), xs.to_string(),
               fs.to_string());
  TF_CHECK_ARG(
      fs.is_fully_defined() && fs[0] >= 1 && fs[1] >= 1 && fs[2] >= 1 && fs[3] >= 1 && fs[4] >= 1,
      op, "filters need a known, positive size in every dimension, got {}", fs.to_string());
  TF_CHECK_ARG(fs[4] == xs[4], op,
               "the input has {} channels but filters {} expect {} (their last dimension)", xs[4],
               fs.to_string(), fs[4]);
  TF_CHECK_ARG(os.rank() == 5, op, "output_shape must be NDHWC of rank 5, got {}", os.to_string());
  TF_CHECK_ARG(os[4] == None || os[4] == fs[3], op,
               "output_shape {} has {} channels but filters {} give {} (their fourth dimension)",
               os.to_string(), os[4], fs.to_string(), fs[3]);
  TF_CHECK_ARG(os[0] == None || xs[0] == None || os[0] == xs[0], op,
               "output_shape {} has batch {} but the input {} has {}", os.to_string(), os[0],
               xs.to_string(), xs[0]);
  const char* dims[3] = {"depth", "height", "width"};
  for (int i = 0; i < 3; ++i) {
    TF_CHECK_ARG(os[1 + i] != None && os[1 + i] >= 0, op,
                 "output_shape {} needs a known, non-negative depth, height and width",
                 os.to_string());
    const int64_t eff = (fs[i] - 1) * dl[i] + 1;
    const int64_t back =
        same || os[1 + i] >= eff ? detail::window_dim(os[1 + i], fs[i], s[i], dl[i], same).out : 0;
    TF_CHECK_ARG(back == xs[1 + i], op,
                 "output_shape {} does not fit the input {}: a conv3d of that output with filters "
                 "{}, strides {}, dilations {} and {} padding gives {} {}, not {}",
                 os.to_string(), xs.to_string(), fs.to_string(), detail::vec_to_string(strides),
                 detail::vec_to_string(dilations), padding, dims[i], back, xs[1 + i]);
  }
  const int64_t di = xs[1], od = os[1], oh = os[2], ow = os[3], oc = fs[3];
  const int64_t rest = oh * ow * oc;
  const auto wd = detail::window_dim(od, fs[0], s[0], dl[0], same);
  // Output depth p (padded coordinates) receives input slice i through tap k where
  // p = i * stride + k * dilation; the output is [pad_before, pad_before + od) of that.
  const int64_t length = std::max(di * s[0] + (fs[0] - 1) * dl[0], wd.pad_before + od);
  const Tensor flat = tapeflow::reshape(input, {-1, xs[2], xs[3], xs[4]});
  const TensorShape tap_out{xs[0] == None ? None : xs[0] * di, oh, ow, oc};
  const std::vector<Tensor> taps = tapeflow::split(filters, static_cast<int>(fs[0]), 0);
  std::optional<Tensor> sum;
  for (int64_t k = 0; k < fs[0]; ++k) {
    const Tensor f2 = tapeflow::reshape(taps[static_cast<size_t>(k)], {fs[1], fs[2], oc, fs[4]});
    Tensor z = tapeflow::reshape(
        conv2d_transpose(flat, f2, tap_out, {s[1], s[2]}, padding, {dl[1], dl[2]}),
        {-1, di, 1, rest});
    // Spread out by the stride: s - 1 zero slices after each input slice.
    if (s[0] > 1) z = tapeflow::pad(z, {{0, 0}, {0, 0}, {0, s[0] - 1}, {0, 0}});
    z = tapeflow::reshape(z, {-1, di * s[0], rest});
    const int64_t front = k * dl[0];
    z = tapeflow::pad(z, {{0, 0}, {front, length - front - di * s[0]}, {0, 0}});
    sum = sum ? *sum + z : z;
  }
  const Tensor y = tapeflow::slice(*sum, {0, wd.pad_before, 0}, {-1, od, -1});
  return tapeflow::reshape(y, {-1, od, oh, ow, oc});
}

Tensor max_pool3d(const Tensor& input, const std::vector<int>& ksize,
                  const std::vector<int>& strides, const std::string& padding) {
  return pool3d("max_pool3d", Pool::kMax, input, ksize, strides, padding);
}

Tensor avg_pool3d(const Tensor& input, const std::vector<int>& ksize,
                  const std::vector<int>& strides, const std::string& padding) {
  return pool3d("avg_pool3d", Pool::kAvg, input, ksize, strides, padding);
}

}  // namespace tapeflow::nn
