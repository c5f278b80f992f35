#include "ops/nn_more.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "core/allocator.h"
#include "core/check.h"
#include "core/error.h"
#include "core/parallel.h"
#include "ops/binary.h"
#include "ops/debugging.h"
#include "ops/dispatch.h"
#include "ops/factory.h"
#include "ops/helpers.h"
#include "ops/image_more.h"
#include "ops/linalg.h"
#include "ops/movement.h"
#include "ops/nn.h"
#include "ops/reduce.h"
#include "ops/scan.h"
#include "ops/sort.h"
#include "ops/unary.h"

namespace tapeflow::nn {

namespace {

void check_floating_input(const char* op, const Tensor& x, const char* what) {
  TF_CHECK_ARG(x.defined(), op, "{} is an undefined tensor (TF's None)", what);
  TF_CHECK_ARG(is_floating(x.dtype()), op, "{} must be floating, got {}", what,
               dtype_name(x.dtype()));
}

void check_same(const char* op, const Tensor& a, const Tensor& b, const char* an, const char* bn) {
  TF_CHECK_ARG(a.dtype() == b.dtype(), op, "{} ({}) and {} ({}) must share a dtype", an,
               dtype_name(a.dtype()), bn, dtype_name(b.dtype()));
  TF_CHECK_ARG(a.shape() == b.shape(), op,
               "{} of shape {} and {} of shape {} must have the same shape", an,
               a.shape().to_string(), bn, b.shape().to_string());
}

// A scalar of x's dtype.
Tensor scalar_like(double v, const Tensor& x) {
  return constant(Tensor(v), x.dtype());
}

}  // namespace

Tensor relu6(const Tensor& features) {
  TF_CHECK_ARG(features.defined(), "relu6", "the input is an undefined tensor (TF's None)");
  // On a tie at 6 the constant (first operand) takes the gradient, so x gets 0 there as in TF.
  return detail::naming_errors(
      "relu6", [&] { return tapeflow::minimum(scalar_like(6.0, features), relu(features)); });
}

Tensor crelu(const Tensor& features, int axis) {
  check_floating_input("crelu", features, "the input");
  TF_CHECK_ARG(features.rank() >= 1, "crelu", "the input must have rank at least 1, got a scalar");
  const int a = detail::normalize_axis("crelu", axis, features.shape());
  return tapeflow::concat({relu(features), relu(tapeflow::negative(features))}, a);
}

Tensor log_sigmoid(const Tensor& x) {
  check_floating_input("log_sigmoid", x, "the input");
  return tapeflow::negative(softplus(tapeflow::negative(x)));
}

Tensor l2_loss(const Tensor& t) {
  check_floating_input("l2_loss", t, "the input");
  return tapeflow::reduce_sum(tapeflow::square(t)) * scalar_like(0.5, t);
}

Tensor softmax_cross_entropy_with_logits(const Tensor& labels, const Tensor& logits, int axis) {
  const char* op = "softmax_cross_entropy_with_logits";
  check_floating_input(op, labels, "labels");
  check_floating_input(op, logits, "logits");
  check_same(op, labels, logits, "labels", "logits");
  TF_CHECK_ARG(logits.rank() >= 1, op, "logits must have rank at least 1, got a scalar");
  const int a = detail::normalize_axis(op, axis, logits.shape());
  return tapeflow::negative(tapeflow::reduce_sum(labels * log_softmax(logits, a), a));
}

Tensor weighted_cross_entropy_with_logits(const Tensor& labels, const Tensor& logits,
                                          const Tensor& pos_weight) {
  const char* op = "weighted_cross_entropy_with_logits";
  check_floating_input(op, labels, "labels");
  check_floating_input(op, logits, "logits");
  check_same(op, labels, logits, "labels", "logits");
  TF_CHECK_ARG(pos_weight.defined(), op, "pos_weight is an undefined tensor (TF's None)");
  const Tensor q = tapeflow::cast(pos_weight, logits.dtype());
  const Tensor one = scalar_like(1.0, logits);
  const Tensor log_weight = one + (q - one) * labels;
  return (one - labels) * logits +
         log_weight * (tapeflow::log1p(tapeflow::exp(tapeflow::negative(tapeflow::abs(logits)))) +
                       relu(tapeflow::negative(logits)));
}

Tensor log_poisson_loss(const Tensor& targets, const Tensor& log_input, bool compute_full_loss) {
  const char* op = "log_poisson_loss";
  check_floating_input(op, targets, "targets");
  check_floating_input(op, log_input, "log_input");
  check_same(op, targets, log_input, "targets", "log_input");
  const Tensor loss = tapeflow::exp(log_input) - log_input * targets;
  if (!compute_full_loss) return loss;
  // Stirling's approximation of log(targets!), left out for targets in [0, 1].
  const Tensor small =
      tapeflow::logical_and(tapeflow::greater_equal(targets, 0), tapeflow::less_equal(targets, 1));
  const Tensor t = tapeflow::where(small, 2, targets);
  const Tensor stirling = t * tapeflow::log(t) - t + 0.5 * tapeflow::log(2 * M_PI * t);
  return loss + tapeflow::where(small, 0, stirling);
}

CtcDecoded ctc_greedy_decoder(const Tensor& inputs, const Tensor& sequence_length,
                              bool merge_repeated, std::optional<int> blank_index) {
  const char* op = "ctc_greedy_decoder";
  check_floating_input(op, inputs, "inputs");
  TF_CHECK_ARG(inputs.rank() == 3, op, "inputs must be (frames, batch, classes), got shape {}",
               inputs.shape().to_string());
  TF_CHECK_ARG(sequence_length.defined(), op, "sequence_length is an undefined tensor");
  TF_CHECK_ARG(sequence_length.dtype() == int32 || sequence_length.dtype() == int64, op,
               "sequence_length must be int32 or int64, got {}",
               dtype_name(sequence_length.dtype()));
  const TensorShape& s = inputs.shape();
  TF_CHECK_ARG(sequence_length.shape() == TensorShape{s[1]}, op,
               "sequence_length must be (batch,) = ({},), got shape {}", s[1],
               sequence_length.shape().to_string());
  const int64_t frames = s[0], classes = s[2];
  TF_CHECK_ARG(frames != None && classes != None, op,
               "needs known frame and class counts, got shape {}", s.to_string());
  TF_CHECK_ARG(classes >= 1, op, "inputs must have at least one class, got shape {}",
               s.to_string());
  int64_t blank = blank_index ? *blank_index : classes - 1;
  if (blank < 0) blank += classes;
  TF_CHECK_ARG(blank >= 0 && blank < classes, op, "blank_index {} is out of range for {} classes",
               blank_index.value_or(0), classes);
  const Tensor lengths = tapeflow::cast(sequence_length, int64);
  detail::check_elementwise(op, fmt::format("0 <= sequence_length <= {} (the frame count)", frames),
                            tapeflow::logical_and(tapeflow::greater_equal(lengths, int64_t{0}),
                                                  tapeflow::less_equal(lengths, frames)),
                            {lengths}, {"sequence_length"});
  if (frames == 0)  // nothing decoded; the sum of no logits is 0
    return {tapeflow::zeros({s[1], 0}, int64),
            tapeflow::expand_dims(tapeflow::reduce_sum(inputs, {0, 2}), 1)};
  const Tensor best = tapeflow::argmax(inputs, 2);  // (frames, batch) int64
  // valid[t, b]: frame t is within sequence b.
  const Tensor t_index = tapeflow::cumsum(tapeflow::ones_like(best), 0) - int64_t{1};
  const Tensor valid = tapeflow::less(t_index, tapeflow::expand_dims(lengths, 0));
  const Tensor top = tapeflow::reduce_max(inputs, 2);
  const Tensor neg_sum = tapeflow::negative(
      tapeflow::reduce_sum(tapeflow::where(valid, top, scalar_like(0.0, top)), 0));
  Tensor keep = tapeflow::logical_and(valid, tapeflow::not_equal(best, blank));
  if (merge_repeated) {
    // The previous frame's best class (-1 before the first).
    const Tensor earlier =
        tapeflow::pad(tapeflow::slice(best, {0, 0}, {frames - 1, -1}), {{1, 0}, {0, 0}}, -1);
    keep = tapeflow::logical_and(keep, tapeflow::not_equal(best, earlier));
  }
  // Compaction by sorting each sequence on key = rank * (classes + 1) + label + 1, with rank the
  // label's place among the kept ones and `frames` for the others: the kept labels come first,
  // in order (no shape depends on the values or the batch).
  const int64_t base = classes + 1;
  const Tensor rank = tapeflow::cumsum(tapeflow::cast(keep, int64), 0) - int64_t{1};
  const Tensor key = tapeflow::where(keep, rank, frames) * base + best + int64_t{1};
  const Tensor sorted = sort(tapeflow::transpose(key), -1);
  const Tensor decoded = tapeflow::where(tapeflow::less(sorted, frames * base),
                                         floormod(sorted, base) - int64_t{1}, int64_t{-1});
  return {decoded, tapeflow::expand_dims(neg_sum, 1)};
}

Tensor conv1d(const Tensor& input, const Tensor& filters, int stride, const std::string& padding,
              const std::string& data_format, int dilations) {
  const char* op = "conv1d";
  check_floating_input(op, input, "the input");
  check_floating_input(op, filters, "the filters");
  const bool ncw = detail::parse_channels_first(op, data_format, "NWC", "NCW");
  TF_CHECK_ARG(input.rank() == 3, op, "the input must be 3-D ({}), got shape {}", data_format,
               input.shape().to_string());
  TF_CHECK_ARG(filters.rank() == 3, op, "the filters must be (width, in, out), got shape {}",
               filters.shape().to_string());
  TF_CHECK_ARG(stride >= 1 && dilations >= 1, op,
               "stride and dilations must be positive, got {} and {}", stride, dilations);
  // A conv2d on a height of 1: (N, 1, W, C), or (N, C, 1, W) for NCW (conv2d's NCHW).
  return detail::naming_errors(op, [&] {
    const int h = ncw ? 2 : 1;
    const Tensor y = conv2d(tapeflow::expand_dims(input, h), tapeflow::expand_dims(filters, 0),
                            {1, stride}, padding, {1, dilations}, ncw ? "NCHW" : "NHWC");
    return tapeflow::squeeze(y, {h});
  });
}

Tensor conv1d_transpose(const Tensor& input, const Tensor& filters,
                        const std::vector<int64_t>& output_shape, int stride,
                        const std::string& padding, const std::string& data_format, int dilations) {
  const char* op = "conv1d_transpose";
  check_floating_input(op, input, "the input");
  check_floating_input(op, filters, "the filters");
  const bool ncw = detail::parse_channels_first(op, data_format, "NWC", "NCW");
  TF_CHECK_ARG(input.rank() == 3, op, "the input must be 3-D ({}), got shape {}", data_format,
               input.shape().to_string());
  TF_CHECK_ARG(filters.rank() == 3, op, "the filters must be (width, out, in), got shape {}",
               filters.shape().to_string());
  TF_CHECK_ARG(output_shape.size() == 3, op, "output_shape must have 3 entries, got {}",
               output_shape.size());
  TF_CHECK_ARG(stride >= 1 && dilations >= 1, op,
               "stride and dilations must be positive, got {} and {}", stride, dilations);
  return detail::naming_errors(op, [&] {
    const Tensor x = ncw ? tapeflow::transpose(input, {0, 2, 1}) : input;
    const int64_t w = ncw ? output_shape[2] : output_shape[1];
    const int64_t o = ncw ? output_shape[1] : output_shape[2];
    const Tensor y = conv2d_transpose(
        tapeflow::expand_dims(x, 1), tapeflow::expand_dims(filters, 0),
        TensorShape{output_shape[0], 1, w, o}, {1, stride}, padding, {1, dilations});
    const Tensor out = tapeflow::squeeze(y, {1});
    return ncw ? tapeflow::transpose(out, {0, 2, 1}) : out;
  });
}

namespace {
Tensor pool1d(const char* op, bool max, const Tensor& input, int ksize, int strides,
              const std::string& padding, const std::string& data_format) {
  if (detail::parse_channels_first(op, data_format, "NWC", "NCW"))
    return detail::move_channels_first(pool1d(
        op, max, detail::move_channels_last(op, input, 3, "NCW"), ksize, strides, padding, "NWC"));
  TF_CHECK_ARG(input.defined(), op, "the input is an undefined tensor (TF's None)");
  TF_CHECK_ARG(input.rank() == 3, op, "the input must be (batch, width, channels), got shape {}",
               input.shape().to_string());
  TF_CHECK_ARG(ksize >= 1 && strides >= 1, op, "ksize and strides must be positive, got {} and {}",
               ksize, strides);
  return detail::naming_errors(op, [&] {
    const Tensor x = tapeflow::expand_dims(input, 1);
    const Tensor y = max ? max_pool2d(x, {1, ksize}, {1, strides}, padding)
                         : avg_pool2d(x, {1, ksize}, {1, strides}, padding);
    return tapeflow::squeeze(y, {1});
  });
}
}  // namespace

Tensor max_pool1d(const Tensor& input, int ksize, int strides, const std::string& padding,
                  const std::string& data_format) {
  return pool1d("max_pool1d", true, input, ksize, strides, padding, data_format);
}
Tensor avg_pool1d(const Tensor& input, int ksize, int strides, const std::string& padding,
                  const std::string& data_format) {
  return pool1d("avg_pool1d", false, input, ksize, strides, padding, data_format);
}

std::pair<Tensor, Tensor> max_pool_with_argmax(const Tensor& input, const std::vector<int>& ksize,
                                               const std::vector<int>& strides,
                                               const std::string& padding,
                                               bool include_batch_in_index) {
  const char* op = "max_pool_with_argmax";
  check_floating_input(op, input, "the input");
  const TensorShape& s = input.shape();
  TF_CHECK_ARG(s.rank() == 4 && s.is_fully_defined(), op,
               "the input must be NHWC with known dimensions, got shape {}", s.to_string());
  TF_CHECK_ARG(padding == "SAME" || padding == "VALID", op,
               "padding must be \"SAME\" or \"VALID\", got \"{}\"", padding);
  auto two = [&](const std::vector<int>& v, const char* what) {
    TF_CHECK_ARG(v.size() == 1 || v.size() == 2 || (v.size() == 4 && v[0] == 1 && v[3] == 1), op,
                 "{} must have 1, 2 or 4 values (4 with 1 for batch and channels), got {}", what,
                 v.size());
    const std::pair<int, int> hw = v.size() == 1   ? std::pair{v[0], v[0]}
                                   : v.size() == 2 ? std::pair{v[0], v[1]}
                                                   : std::pair{v[1], v[2]};
    TF_CHECK_ARG(hw.first >= 1 && hw.second >= 1, op, "{} must be positive, got {} and {}", what,
                 hw.first, hw.second);
    return hw;
  };
  auto [kh, kw] = two(ksize, "ksize");
  const auto [sh, sw] = two(strides, "strides");
  const Tensor pooled =
      detail::naming_errors(op, [&] { return max_pool2d(input, ksize, strides, padding); });
  if (pooled.num_elements() == 0) return {pooled, tapeflow::zeros(pooled.shape(), int64)};
  // The argmax: pad with -inf (never a window's maximum unless everything is -inf), take VALID
  // patches of the input and of its flat indices, and pick each window's first maximum.
  const int64_t n = s[0], h = s[1], w = s[2], c = s[3];
  const bool same = padding == "SAME";
  // A SAME window clipped to the input plus the strides' reach (detail::clamp_same_window, as
  // max_pool2d) keeps the patches small (a 2^30 window padded the input to 2^30 rows).
  if (same) {
    kh = static_cast<int>(detail::clamp_same_window(h, kh, sh));
    kw = static_cast<int>(detail::clamp_same_window(w, kw, sw));
  }
  const auto dh = detail::window_dim(h, kh, sh, 1, same);
  const auto dw = detail::window_dim(w, kw, sw, 1, same);
  const double lowest = -std::numeric_limits<double>::infinity();
  // (The argmax is an integer result: no gradient reaches these ops.)
  const Tensor padded = tapeflow::pad(
      input, {{0, 0}, {dh.pad_before, dh.pad_after}, {dw.pad_before, dw.pad_after}, {0, 0}},
      lowest);
  const Tensor flat = tapeflow::reshape(
      tapeflow::range(0.0, static_cast<double>(s.num_elements()), 1.0, float64), s);
  const Tensor flat_padded = tapeflow::pad(
      flat, {{0, 0}, {dh.pad_before, dh.pad_after}, {dw.pad_before, dw.pad_after}, {0, 0}}, -1.0);
  const std::vector<int64_t> size = {kh, kw}, step = {sh, sw}, rate = {1, 1};
  const TensorShape win{n, dh.out, dw.out, int64_t{kh} * kw, c};
  const Tensor vp =
      tapeflow::reshape(image::extract_patches(padded, size, step, rate, "VALID"), win);
  const Tensor ip =
      tapeflow::reshape(image::extract_patches(flat_padded, size, step, rate, "VALID"), win);
  const Tensor pick = tapeflow::expand_dims(tapeflow::argmax(vp, 3), 3);  // (N, OH, OW, 1, C)
  const Tensor taps =
      tapeflow::reshape(tapeflow::range(0.0, static_cast<double>(int64_t{kh} * kw), 1.0, int64),
                        {1, 1, 1, int64_t{kh} * kw, 1});
  const Tensor chosen = tapeflow::equal(taps, pick);
  // Float64 holds every flat index below 2^53 exactly.
  Tensor idx = tapeflow::reduce_sum(tapeflow::where(chosen, ip, tapeflow::zeros_like(ip)), 3);
  idx = tapeflow::cast(idx, int64);
  if (!include_batch_in_index) idx = tapeflow::floormod(idx, Tensor(h * w * c));
  return {pooled, idx};
}

Tensor embedding_lookup(const Tensor& params, const Tensor& ids, double max_norm) {
  const char* op = "embedding_lookup";
  TF_CHECK_ARG(params.defined() && ids.defined(), op,
               "params and ids must be defined tensors (TF's None)");
  TF_CHECK_ARG(ids.dtype() == int32 || ids.dtype() == int64, op,
               "ids must be int32 or int64, got {}", dtype_name(ids.dtype()));
  TF_CHECK_ARG(params.rank() >= 1, op, "params must have rank at least 1, got a scalar");
  Tensor rows = detail::naming_errors(op, [&] { return tapeflow::gather(params, ids, 0); });
  if (max_norm > 0) {
    TF_CHECK_ARG(is_floating(params.dtype()), op, "max_norm needs floating params, got {}",
                 dtype_name(params.dtype()));
    std::vector<int> axes;
    for (int i = ids.rank(); i < rows.rank(); ++i) axes.push_back(i);
    rows = tapeflow::clip_by_norm(rows, scalar_like(max_norm, rows), axes);
  }
  return rows;
}

Tensor batch_normalization(const Tensor& x, const Tensor& mean, const Tensor& variance,
                           const Tensor& offset, const Tensor& scale, double variance_epsilon) {
  const char* op = "batch_normalization";
  check_floating_input(op, x, "x");
  check_floating_input(op, mean, "mean");
  check_floating_input(op, variance, "variance");
  return detail::naming_errors(op, [&] {
    Tensor inv = tapeflow::rsqrt(variance + scalar_like(variance_epsilon, variance));
    if (scale.defined()) inv = inv * scale;
    const Tensor shift = offset.defined() ? offset - mean * inv : tapeflow::negative(mean * inv);
    return x * tapeflow::cast(inv, x.dtype()) + tapeflow::cast(shift, x.dtype());
  });
}

SufficientStatistics sufficient_statistics(const Tensor& x, const std::vector<int>& axes,
                                           const Tensor& shift, bool keepdims) {
  const char* op = "sufficient_statistics";
  check_floating_input(op, x, "x");
  std::vector<int> norm;
  double count = 1;
  for (int a : axes) {
    const int k = detail::normalize_axis(op, a, x.shape());
    TF_CHECK_ARG(x.shape()[k] != None, op, "dimension {} of shape {} must be known", k,
                 x.shape().to_string());
    count *= static_cast<double>(x.shape()[k]);
    norm.push_back(k);
  }
  const Tensor m = shift.defined() ? x - tapeflow::cast(shift, x.dtype()) : x;
  return {scalar_like(count, x), tapeflow::reduce_sum(m, norm, keepdims),
          tapeflow::reduce_sum(tapeflow::square(m), norm, keepdims), shift};
}

std::pair<Tensor, Tensor> normalize_moments(const Tensor& counts, const Tensor& mean_ss,
                                            const Tensor& variance_ss, const Tensor& shift) {
  const char* op = "normalize_moments";
  check_floating_input(op, counts, "counts");
  check_floating_input(op, mean_ss, "mean_ss");
  check_floating_input(op, variance_ss, "variance_ss");
  return detail::naming_errors(op, [&] {
    const Tensor divisor = scalar_like(1.0, counts) / counts;
    const Tensor shifted_mean = mean_ss * divisor;
    const Tensor mean = shift.defined() ? shifted_mean + shift : shifted_mean;
    const Tensor variance = variance_ss * divisor - tapeflow::square(shifted_mean);
    return std::pair<Tensor, Tensor>{mean, variance};
  });
}

Tensor local_response_normalization(const Tensor& input, int depth_radius, double bias,
                                    double alpha, double beta) {
  const char* op = "local_response_normalization";
  check_floating_input(op, input, "the input");
  TF_CHECK_ARG(input.rank() == 4, op, "the input must be 4-D (NHWC), got shape {}",
               input.shape().to_string());
  TF_CHECK_ARG(depth_radius >= 0, op, "depth_radius must be non-negative, got {}", depth_radius);
  const int64_t c = input.shape()[3];
  TF_CHECK_ARG(c != None, op, "the channel dimension of shape {} must be known",
               input.shape().to_string());
  // band[i][j] = 1 where |i - j| <= depth_radius: square(x) @ band sums each channel's window.
  std::vector<double> band(static_cast<size_t>(c * c), 0.0);
  for (int64_t i = 0; i < c; ++i)
    for (int64_t j = 0; j < c; ++j)
      if (std::abs(i - j) <= depth_radius) band[static_cast<size_t>(i * c + j)] = 1.0;
  const Tensor b = detail::from_doubles(band, {c, c}, input.dtype());
  const Tensor sqr_sum = tapeflow::matmul(tapeflow::square(input), b);
  const Tensor base = scalar_like(bias, input) + scalar_like(alpha, input) * sqr_sum;
  return input * tapeflow::pow(base, scalar_like(-beta, input));
}

namespace {
void check_blocks(const char* op, const Tensor& input, int block_size, bool nchw) {
  TF_CHECK_ARG(input.defined(), op, "the input is an undefined tensor (TF's None)");
  TF_CHECK_ARG(block_size >= 2, op, "block_size must be at least 2, got {}", block_size);
  TF_CHECK_ARG(input.rank() == 4, op, "the input must be 4-D ({}), got shape {}",
               nchw ? "NCHW" : "NHWC", input.shape().to_string());
  for (int i = 1; i < 4; ++i)
    TF_CHECK_ARG(input.shape()[i] != None, op, "dimension {} of shape {} must be known", i,
                 input.shape().to_string());
}
}  // namespace

Tensor space_to_depth(const Tensor& input, int block_size, const std::string& data_format) {
  const char* op = "space_to_depth";
  const bool nchw = detail::parse_channels_first(op, data_format, "NHWC", "NCHW");
  check_blocks(op, input, block_size, nchw);
  const TensorShape& s = input.shape();
  const int64_t b = block_size, h = s[nchw ? 2 : 1], w = s[nchw ? 3 : 2], c = s[nchw ? 1 : 3];
  TF_CHECK_ARG(h % b == 0 && w % b == 0, op,
               "height and width of shape {} must be divisible by block_size {}", s.to_string(),
               block_size);
  if (nchw) {  // (N, C, H/b, by, W/b, bx) -> (N, by, bx, C, H/b, W/b): channel (by b + bx) C + c
    const Tensor t = tapeflow::reshape(input, {-1, c, h / b, b, w / b, b});
    return tapeflow::reshape(tapeflow::transpose(t, {0, 3, 5, 1, 2, 4}),
                             {-1, b * b * c, h / b, w / b});
  }
  const Tensor t = tapeflow::reshape(input, {-1, h / b, b, w / b, b, c});
  return tapeflow::reshape(tapeflow::transpose(t, {0, 1, 3, 2, 4, 5}),
                           {-1, h / b, w / b, b * b * c});
}

Tensor depth_to_space(const Tensor& input, int block_size, const std::string& data_format) {
  const char* op = "depth_to_space";
  const bool nchw = detail::parse_channels_first(op, data_format, "NHWC", "NCHW");
  check_blocks(op, input, block_size, nchw);
  const TensorShape& s = input.shape();
  const int64_t b = block_size, h = s[nchw ? 2 : 1], w = s[nchw ? 3 : 2], c = s[nchw ? 1 : 3];
  TF_CHECK_ARG(c % (b * b) == 0, op,
               "the depth of shape {} must be divisible by block_size * block_size = {}",
               s.to_string(), b * b);
  if (nchw) {  // (N, by, bx, C', H, W) -> (N, C', H, by, W, bx)
    const Tensor t = tapeflow::reshape(input, {-1, b, b, c / (b * b), h, w});
    return tapeflow::reshape(tapeflow::transpose(t, {0, 3, 4, 1, 5, 2}),
                             {-1, c / (b * b), h * b, w * b});
  }
  const Tensor t = tapeflow::reshape(input, {-1, h, w, b, b, c / (b * b)});
  return tapeflow::reshape(tapeflow::transpose(t, {0, 1, 3, 2, 4, 5}),
                           {-1, h * b, w * b, c / (b * b)});
}

Tensor ctc_loss(const Tensor& labels, const Tensor& logits, const Tensor& label_length,
                const Tensor& logit_length, bool logits_time_major, int blank_index) {
  const char* op = "ctc_loss";
  check_floating_input(op, logits, "logits");
  auto check_int = [&](const Tensor& t, const char* what) {
    TF_CHECK_ARG(t.defined(), op, "{} is an undefined tensor (TF's None)", what);
    TF_CHECK_ARG(t.dtype() == int32 || t.dtype() == int64, op, "{} must be int32 or int64, got {}",
                 what, dtype_name(t.dtype()));
  };
  check_int(labels, "labels");
  check_int(label_length, "label_length");
  check_int(logit_length, "logit_length");
  TF_CHECK_ARG(logits.rank() == 3, op,
               "logits must be (frames, batch, classes) or (batch, frames, classes), got shape {}",
               logits.shape().to_string());
  const Tensor tm = logits_time_major ? logits : tapeflow::transpose(logits, {1, 0, 2});
  const TensorShape& s = tm.shape();
  const int64_t b = s[1], c = s[2];
  TF_CHECK_ARG(c != None && c >= 1, op, "the class dimension of logits of shape {} must be known",
               logits.shape().to_string());
  TF_CHECK_ARG(blank_index >= -c && blank_index < c, op,
               "blank_index {} is out of range for {} classes (logits of shape {})", blank_index, c,
               logits.shape().to_string());
  auto batch_matches = [&](int64_t d) { return d == None || b == None || d == b; };
  TF_CHECK_ARG(labels.rank() == 2 && batch_matches(labels.shape()[0]), op,
               "labels must be (batch, max_label_length) with the batch {} of logits of shape {}, "
               "got shape {}",
               b, logits.shape().to_string(), labels.shape().to_string());
  for (const Tensor* t : {&label_length, &logit_length})
    TF_CHECK_ARG(t->rank() == 1 && batch_matches(t->shape()[0]), op,
                 "label_length and logit_length must be (batch,) for logits of shape {}, got "
                 "shape {}",
                 logits.shape().to_string(), t->shape().to_string());
  const int blank = static_cast<int>(blank_index < 0 ? blank_index + c : blank_index);
  const bool narrow = tm.dtype() == float16 || tm.dtype() == bfloat16;
  const Tensor x = narrow ? tapeflow::cast(tm, float32) : tm;
  const Tensor in[4] = {x, labels, label_length, logit_length};
  const std::vector<Tensor> outs = detail::dispatch_multi(prims::CtcLoss(blank), in);
  return narrow ? tapeflow::cast(outs[0], tm.dtype()) : outs[0];
}

}  // namespace tapeflow::nn

namespace tapeflow::prims {

void CtcLoss::infer(std::span<const Tensor> in, std::span<TensorMeta> out) const {
  const DType d = in[0].dtype();
  TF_CHECK_ARG(d == float32 || d == float64, name(), "logits must be float32 or float64, got {}",
               dtype_name(d));
  out[0] = {TensorShape{in[0].shape()[1]}, d};
  out[1] = {in[0].shape(), d};
}

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

double log_add(double a, double b) {
  if (a == kNegInf) return b;
  if (b == kNegInf) return a;
  const double m = std::max(a, b);
  return m + std::log1p(std::exp(-std::abs(a - b)));
}

// One batch entry: lp (T, C) log-softmax rows of its first t_b frames, label (its l_b classes).
// Writes the loss and the gradient rows of those frames (the caller zeroes the rest).
double ctc_one(const std::vector<double>& lp, int64_t t_b, int64_t c, const int64_t* label,
               int64_t l_b, int64_t blank, double* grad) {
  const int64_t n = 2 * l_b + 1;  // the extended label: blank, l1, blank, l2, ..., blank
  auto ext = [&](int64_t s) { return s % 2 == 0 ? blank : label[s / 2]; };
  auto can_skip = [&](int64_t s) { return s >= 2 && ext(s) != blank && ext(s) != ext(s - 2); };
  if (t_b == 0) return l_b == 0 ? 0.0 : std::numeric_limits<double>::infinity();
  std::vector<double> alpha(static_cast<size_t>(t_b * n), kNegInf), beta(alpha.size(), kNegInf);
  auto a = [&](int64_t t, int64_t s) -> double& { return alpha[size_t(t * n + s)]; };
  auto bt = [&](int64_t t, int64_t s) -> double& { return beta[size_t(t * n + s)]; };
  auto y = [&](int64_t t, int64_t k) { return lp[size_t(t * c + k)]; };
  a(0, 0) = y(0, blank);
  if (n > 1) a(0, 1) = y(0, ext(1));
  for (int64_t t = 1; t < t_b; ++t)
    for (int64_t s = 0; s < n; ++s) {
      double v = a(t - 1, s);
      if (s >= 1) v = log_add(v, a(t - 1, s - 1));
      if (can_skip(s)) v = log_add(v, a(t - 1, s - 2));
      a(t, s) = v == kNegInf ? kNegInf : v + y(t, ext(s));
    }
  bt(t_b - 1, n - 1) = y(t_b - 1, blank);
  if (n > 1) bt(t_b - 1, n - 2) = y(t_b - 1, ext(n - 2));
  for (int64_t t = t_b - 2; t >= 0; --t)
    for (int64_t s = 0; s < n; ++s) {
      double v = bt(t + 1, s);
      if (s + 1 < n) v = log_add(v, bt(t + 1, s + 1));
      if (s + 2 < n && can_skip(s + 2)) v = log_add(v, bt(t + 1, s + 2));
      bt(t, s) = v == kNegInf ? kNegInf : v + y(t, ext(s));
    }
  double log_p = a(t_b - 1, n - 1);
  if (n > 1) log_p = log_add(log_p, a(t_b - 1, n - 2));
  if (log_p == kNegInf) return std::numeric_limits<double>::infinity();  // zero gradient
  // d(-log p)/d(logit t, k) = softmax(t, k) - sum over s with ext(s) = k of
  // alpha(t, s) beta(t, s) / (p softmax(t, k)) (both alpha and beta hold frame t's emission).
  std::vector<double> occ(static_cast<size_t>(c));
  for (int64_t t = 0; t < t_b; ++t) {
    std::fill(occ.begin(), occ.end(), kNegInf);
    for (int64_t s = 0; s < n; ++s)
      occ[size_t(ext(s))] = log_add(occ[size_t(ext(s))], a(t, s) + bt(t, s));
    for (int64_t k = 0; k < c; ++k) {
      const double soft = std::exp(y(t, k));
      const double share =
          occ[size_t(k)] == kNegInf ? 0.0 : std::exp(occ[size_t(k)] - log_p - y(t, k));
      grad[t * c + k] = soft - share;
    }
  }
  return -log_p;
}

// The kernels' argument checks over the inputs read to the host, in batch order (the first bad
// entry throws).
void check_ctc_entries(const CtcLoss& p, std::span<const Tensor> in,
                       const std::vector<int64_t>& labels, const std::vector<int64_t>& label_len,
                       const std::vector<int64_t>& frames) {
  const TensorShape& s = in[0].shape();
  const int64_t tn = s[0], bn = s[1], cn = s[2], ln = in[1].shape()[1];
  const char* op = p.name();
  for (int64_t b = 0; b < bn; ++b) {
    const int64_t lb = label_len[size_t(b)], tb = frames[size_t(b)];
    TF_CHECK_ARG(lb >= 0 && lb <= ln, op,
                 "label_length[{}] = {} is not in [0, {}] (labels of shape {})", b, lb, ln,
                 in[1].shape().to_string());
    TF_CHECK_ARG(tb >= 0 && tb <= tn, op,
                 "logit_length[{}] = {} is not in [0, {}] (logits of shape {}, time major)", b, tb,
                 tn, s.to_string());
    for (int64_t i = 0; i < lb; ++i) {
      const int64_t v = labels[size_t(b * ln + i)];
      TF_CHECK_ARG(v >= 0 && v < cn && v != p.blank, op,
                   "labels[{}, {}] = {} must be a class in [0, {}) other than the blank {}", b, i,
                   v, cn, p.blank);
    }
  }
}

template <class T>
void ctc_host(const CtcLoss& p, std::span<const Tensor> in, std::span<Tensor> out) {
  const TensorShape& s = in[0].shape();
  const int64_t tn = s[0], bn = s[1], cn = s[2], ln = in[1].shape()[1];
  const std::vector<double> logits = detail::host_elements<double>(in[0]);
  const std::vector<int64_t> labels = detail::host_elements<int64_t>(in[1]);
  const std::vector<int64_t> label_len = detail::host_elements<int64_t>(in[2]);
  const std::vector<int64_t> frames = detail::host_elements<int64_t>(in[3]);
  // Every check before any work: nothing throws inside the parallel region.
  check_ctc_entries(p, in, labels, label_len, frames);
  std::vector<T> loss(static_cast<size_t>(bn));
  std::vector<T> grad(static_cast<size_t>(tn * bn * cn), T(0));
  detail::parallel_for(bn, 1, [&](int64_t b0, int64_t b1) {
    std::vector<double> lp, g;
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t tb = frames[size_t(b)];
      lp.assign(size_t(tb * cn), 0.0);
      g.assign(size_t(tb * cn), 0.0);
      for (int64_t t = 0; t < tb; ++t) {
        const double* row = &logits[size_t((t * bn + b) * cn)];
        double m = kNegInf;
        for (int64_t k = 0; k < cn; ++k) m = std::max(m, row[k]);
        double sum = 0;
        for (int64_t k = 0; k < cn; ++k) sum += std::exp(row[k] - m);
        const double lse = m + std::log(sum);
        for (int64_t k = 0; k < cn; ++k) lp[size_t(t * cn + k)] = row[k] - lse;
      }
      loss[size_t(b)] = static_cast<T>(
          ctc_one(lp, tb, cn, labels.data() + b * ln, label_len[size_t(b)], p.blank, g.data()));
      for (int64_t t = 0; t < tb; ++t)
        for (int64_t k = 0; k < cn; ++k)
          grad[size_t((t * bn + b) * cn + k)] = static_cast<T>(g[size_t(t * cn + k)]);
    }
  });
  // The outputs are host tensors here (eval_cpu); copy_bytes also waits for the copy.
  detail::copy_bytes(out[0].raw_data(), out[0].placement(), loss.data(), Device{},
                     loss.size() * sizeof(T));
  detail::copy_bytes(out[1].raw_data(), out[1].placement(), grad.data(), Device{},
                     grad.size() * sizeof(T));
}

}  // namespace

void CtcLoss::eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const {
  if (in[0].dtype() == float64)
    ctc_host<double>(*this, in, out);
  else
    ctc_host<float>(*this, in, out);
}

void CtcLoss::check_arguments(std::span<const Tensor> in) const {
  check_ctc_entries(*this, in, detail::host_elements<int64_t>(in[1]),
                    detail::host_elements<int64_t>(in[2]), detail::host_elements<int64_t>(in[3]));
}

uint32_t CtcLoss::vjp_saves() const {
  return save_output(1);
}

std::vector<Tensor> CtcLoss::vjp(std::span<const Tensor>, std::span<const Tensor> cts,
                                 std::span<const int> argnums, std::span<const Tensor> outs) const {
  // The gradient output is the fused op's own derivative; differentiating through it again
  // would need the second derivative of the recursion, which TF does not offer either.
  TF_CHECK_ARG(!cts[1].defined(), name(),
               "no second derivative: ctc_loss's gradient is computed by its fused kernel, as "
               "TF's (which raises LookupError there)");
  std::vector<Tensor> grads;
  for (int k : argnums) {
    if (k != 0 || !cts[0].defined()) {
      grads.emplace_back();
      continue;
    }
    grads.push_back(tapeflow::expand_dims(tapeflow::expand_dims(cts[0], 0), 2) * outs[1]);
  }
  return grads;
}

}  // namespace tapeflow::prims
