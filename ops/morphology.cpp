#include "ops/morphology.h"

#include <limits>

#include "core/check.h"
#include "ops/binary.h"
#include "ops/dispatch.h"
#include "ops/factory.h"
#include "ops/helpers.h"
#include "ops/image_more.h"
#include "ops/movement.h"
#include "ops/nn.h"
#include "ops/reduce.h"
#include "ops/scan.h"
#include "ops/unary.h"

namespace tapeflow::nn {

namespace {

// {h, w} from {h, w} or TF's {1, h, w, 1}.
std::pair<int64_t, int64_t> pair_of(const char* op, const char* what,
                                    const std::vector<int64_t>& v) {
  const bool four = v.size() == 4 && v[0] == 1 && v[3] == 1;
  TF_CHECK_ARG(v.size() == 2 || four, op,
               "{} must be {{h, w}} or {{1, h, w, 1}} (no batch or channel stride), got {} "
               "entries",
               what, v.size());
  const int64_t h = four ? v[1] : v[0], w = four ? v[2] : v[1];
  TF_CHECK_ARG(h >= 1 && w >= 1, op, "{} must be positive, got {} and {}", what, h, w);
  return {h, w};
}

}  // namespace

Tensor dilation2d(const Tensor& input, const Tensor& filters, const std::vector<int64_t>& strides,
                  const std::string& padding, const std::string& data_format,
                  const std::vector<int64_t>& dilations) {
  const char* op = "dilation2d";
  TF_CHECK_ARG(input.defined() && filters.defined(), op,
               "an input is an undefined tensor (TF's None)");
  detail::check_dtype_floating(op, input);
  TF_CHECK_ARG(filters.dtype() == input.dtype(), op, "dtypes differ: input {} and filters {}",
               dtype_name(input.dtype()), dtype_name(filters.dtype()));
  TF_CHECK_ARG(data_format == "NHWC", op,
               "data_format must be \"NHWC\" (TF's kernels take no other), got \"{}\"",
               data_format);
  TF_CHECK_ARG(padding == "SAME" || padding == "VALID", op,
               "padding must be \"SAME\" or \"VALID\", got \"{}\"", padding);
  const TensorShape& s = input.shape();
  const TensorShape& f = filters.shape();
  TF_CHECK_ARG(s.rank() == 4 && s[1] != None && s[2] != None && s[3] != None, op,
               "input must be (batch, height, width, channels) with known height, width and "
               "channels, got shape {}",
               s.to_string());
  TF_CHECK_ARG(f.rank() == 3 && f.is_fully_defined() && f[2] == s[3] && f[0] >= 1 && f[1] >= 1, op,
               "filters must be (height, width, {}) for input of shape {}, got shape {}", s[3],
               s.to_string(), f.to_string());
  const auto [sh, sw] = pair_of(op, "strides", strides);
  const auto [rh, rw] = pair_of(op, "dilations", dilations);
  const bool same = padding == "SAME";
  const int64_t kh = f[0], kw = f[1], c = s[3];
  // TF's SAME / VALID output sizes and paddings, as the convolutions and poolings compute them.
  const detail::WindowDim y =
      detail::window_dim(s[1], kh, static_cast<int>(sh), static_cast<int>(rh), same);
  const detail::WindowDim x =
      detail::window_dim(s[2], kw, static_cast<int>(sw), static_cast<int>(rw), same);
  const int64_t oh = y.out, ow = x.out;
  // Taps outside the image take the lowest value, so that a maximum never picks them (TF's
  // kernel skips them).
  const double lowest = -std::numeric_limits<double>::infinity();
  const Tensor padded = pad(
      input, {{0, 0}, {y.pad_before, y.pad_after}, {x.pad_before, x.pad_after}, {0, 0}}, lowest);
  // (batch, oh, ow, kh * kw, channels): each window's taps in row-major order.
  const Tensor taps = reshape(image::extract_patches(padded, {kh, kw}, {sh, sw}, {rh, rw}, "VALID"),
                              {-1, oh, ow, kh * kw, c});
  const Tensor values = taps + reshape(filters, {kh * kw, c});
  // The first maximising tap carries the value and the gradient (TF's backprop picks one).
  const Tensor first = argmax(values, 3);
  const Tensor chosen = equal(reshape(range(int64_t{0}, kh * kw, int64_t{1}, int64), {kh * kw, 1}),
                              expand_dims(first, 3));
  return reduce_sum(where(chosen, values, zeros_like(values)), 3);
}

Tensor erosion2d(const Tensor& value, const Tensor& filters, const std::vector<int64_t>& strides,
                 const std::string& padding, const std::string& data_format,
                 const std::vector<int64_t>& dilations) {
  const char* op = "erosion2d";
  TF_CHECK_ARG(value.defined() && filters.defined(), op,
               "an input is an undefined tensor (TF's None)");
  detail::check_dtype_floating(op, value);
  return detail::naming_errors(op, [&] {
    return negative(dilation2d(negative(value), reverse(filters, {0, 1}), strides, padding,
                               data_format, dilations));
  });
}

}  // namespace tapeflow::nn
