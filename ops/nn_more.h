// tf.nn ops the core nn family lacks, all composites of existing primitives (so every device and
// every gradient order come with them): conv1d, conv1d_transpose, max_pool1d, avg_pool1d,
// max_pool_with_argmax, relu6, crelu, log_sigmoid, l2_loss, softmax_cross_entropy_with_logits,
// weighted_cross_entropy_with_logits, log_poisson_loss, embedding_lookup, batch_normalization,
// normalize_moments, sufficient_statistics, local_response_normalization, space_to_depth and
// depth_to_space. ctc_loss is the one primitive (CtcLoss): a host kernel and a CUDA kernel
// (ops/cuda/ctc.cu), both in float64 log space. Argument order and defaults follow TF 2.21. See
// docs/ops.md.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ops/primitive.h"

namespace tapeflow::nn {

// min(max(x, 0), 6); the gradient is 1 on (0, 6) only, as TF's Relu6Grad.
Tensor relu6(const Tensor& features);
// concat([relu(x), relu(-x)], axis): TF's tf.nn.crelu (the axis doubles).
Tensor crelu(const Tensor& features, int axis = -1);
// log(sigmoid(x)) = -softplus(-x), finite for every finite x.
Tensor log_sigmoid(const Tensor& x);
// sum(t ** 2) / 2, a scalar of t's dtype.
Tensor l2_loss(const Tensor& t);
// -sum(labels * log_softmax(logits, axis), axis) for labels and logits of one shape and floating
// dtype; the gradient reaches the labels too (-log_softmax), as TF 2's.
Tensor softmax_cross_entropy_with_logits(const Tensor& labels, const Tensor& logits, int axis = -1);
// (1 - z) * x + (1 + (q - 1) * z) * (log1p(exp(-|x|)) + max(-x, 0)) with z = labels, x = logits,
// q = pos_weight (a scalar or a tensor broadcasting to them), TF's stable form.
Tensor weighted_cross_entropy_with_logits(const Tensor& labels, const Tensor& logits,
                                          const Tensor& pos_weight);
// TF's tf.nn.log_poisson_loss: exp(log_input) - log_input * targets for floating tensors of one
// shape; with compute_full_loss the Stirling term targets * log(targets) - targets +
// 0.5 * log(2 pi targets) is added where targets > 1 or < 0 (TF's rule; computed on a safe
// value elsewhere, so that a gradient with respect to targets of 0 is finite, where TF's is NaN).
Tensor log_poisson_loss(const Tensor& targets, const Tensor& log_input,
                        bool compute_full_loss = false);
// 1-D convolution: input (N, W, C) ("NWC") or (N, C, W) ("NCW"), filters (K, C, O); conv2d on
// a height of 1, as TF's tf.nn.conv1d.
Tensor conv1d(const Tensor& input, const Tensor& filters, int stride, const std::string& padding,
              const std::string& data_format = "NWC", int dilations = 1);
// TF's tf.nn.conv1d_transpose: filters (K, O, C), output_shape (N, W, O) ("NWC") or (N, O, W).
Tensor conv1d_transpose(const Tensor& input, const Tensor& filters,
                        const std::vector<int64_t>& output_shape, int stride,
                        const std::string& padding = "SAME", const std::string& data_format = "NWC",
                        int dilations = 1);
// 1-D pooling of (N, W, C) inputs, or (N, C, W) with data_format "NCW" (between two
// transposes), as TF's tf.nn.max_pool1d / avg_pool1d.
Tensor max_pool1d(const Tensor& input, int ksize, int strides, const std::string& padding,
                  const std::string& data_format = "NWC");
Tensor avg_pool1d(const Tensor& input, int ksize, int strides, const std::string& padding,
                  const std::string& data_format = "NWC");
// TF's tf.nn.max_pool_with_argmax on NHWC input: the max_pool2d output and, for each output,
// the flattened index of the first maximal input of its window, ((b * H + y) * W + x) * C + c
// (b included only with include_batch_in_index), int64. ksize and strides: 1, 2 or 4 values as
// max_pool2d's. Gradients flow through the pooled output only.
std::pair<Tensor, Tensor> max_pool_with_argmax(const Tensor& input, const std::vector<int>& ksize,
                                               const std::vector<int>& strides,
                                               const std::string& padding,
                                               bool include_batch_in_index = false);
// TF's tf.nn.embedding_lookup: gather(params, ids) (ids int32/int64); with max_norm > 0 each
// looked-up row whose L2 norm exceeds max_norm is scaled down to it (TF's clip_by_norm per row).
Tensor embedding_lookup(const Tensor& params, const Tensor& ids, double max_norm = 0.0);
// (x - mean) * scale / sqrt(variance + variance_epsilon) + offset, in TF's operation order
// (x * inv + (offset - mean * inv)); offset and scale may be undefined (TF's None).
Tensor batch_normalization(const Tensor& x, const Tensor& mean, const Tensor& variance,
                           const Tensor& offset, const Tensor& scale, double variance_epsilon);
// TF's tf.nn.sufficient_statistics: the element count over axes (of x's dtype), the sums of
// x - shift and of its squares (shift undefined: of x), and the shift.
struct SufficientStatistics {
  Tensor count, mean_ss, variance_ss, shift;
};
SufficientStatistics sufficient_statistics(const Tensor& x, const std::vector<int>& axes,
                                           const Tensor& shift = Tensor(), bool keepdims = false);
// TF's tf.nn.normalize_moments: (mean, variance) from sufficient statistics.
std::pair<Tensor, Tensor> normalize_moments(const Tensor& counts, const Tensor& mean_ss,
                                            const Tensor& variance_ss,
                                            const Tensor& shift = Tensor());
// TF's tf.nn.local_response_normalization on 4-D NHWC input: x / (bias + alpha * s) ** beta,
// with s the sum of squares over channels [c - depth_radius, c + depth_radius]. The window sum
// is a matmul with a band matrix (channels must be known).
Tensor local_response_normalization(const Tensor& input, int depth_radius = 5, double bias = 1.0,
                                    double alpha = 1.0, double beta = 0.5);
// tf.nn.lrn: TF's other name of local_response_normalization.
inline Tensor lrn(const Tensor& input, int depth_radius = 5, double bias = 1.0, double alpha = 1.0,
                  double beta = 0.5) {
  return local_response_normalization(input, depth_radius, bias, alpha, beta);
}
// TF's tf.nn.space_to_depth / depth_to_space on NHWC: block_size x block_size spatial blocks
// to channels (channel (by * b + bx) * C + c) and back.
// data_format "NCHW": the same blocks and channel order on (N, C, H, W) tensors (TF's GPU
// kernels take it; its CPU kernels refuse it).
Tensor space_to_depth(const Tensor& input, int block_size, const std::string& data_format = "NHWC");
Tensor depth_to_space(const Tensor& input, int block_size, const std::string& data_format = "NHWC");

// TF's tf.nn.ctc_loss with dense labels: -log p(labels | logits) per batch entry, the sum over
// every CTC alignment of softmax(logits) probabilities. labels (batch, max_label_length) int32 or
// int64 (entries past label_length ignored, none equal to the blank); logits (frames, batch,
// classes) with logits_time_major, else (batch, frames, classes), float32 or float64 (float16
// and bfloat16 through float32); label_length and logit_length (batch,) integers. blank_index
// may be negative (counted from classes). A label no alignment of its logit_length frames can
// produce has an infinite loss and a zero gradient (TF's dense path gives a large finite
// number). Differentiable once with respect to the logits (TF has no second derivative either).
Tensor ctc_loss(const Tensor& labels, const Tensor& logits, const Tensor& label_length,
                const Tensor& logit_length, bool logits_time_major = true, int blank_index = 0);

// TF's tf.nn.ctc_greedy_decoder: the best class of each frame of inputs (frames, batch, classes)
// within sequence_length (batch,) frames, repeats merged (merge_repeated) and blanks removed
// (blank_index, default classes - 1; negative counts from classes). decoded is (batch, frames)
// int64, each row's labels first and -1 after them: TF's SparseTensor as
// tf.sparse.to_dense(default_value=-1) gives it, padded to the frame count (a shape known before
// the values, so it traces). neg_sum_logits (batch, 1) is minus the sum of each frame's best
// logit, as TF's.
struct CtcDecoded {
  Tensor decoded;
  Tensor neg_sum_logits;
};
CtcDecoded ctc_greedy_decoder(const Tensor& inputs, const Tensor& sequence_length,
                              bool merge_repeated = true,
                              std::optional<int> blank_index = std::nullopt);

// TF's tf.nn.ctc_beam_search_decoder: the top_paths most probable labellings of inputs (frames,
// batch, classes) within sequence_length (batch,) frames, by TF's prefix beam search of
// beam_width beams. The blank is the last class; each frame is normalised by its log-sum-exp,
// so logits and their log-softmax give the same results, and log_probabilities (batch,
// top_paths) is each path's log probability under softmax(inputs) (TF 2.21's values; in float64
// tapeflow's are exact where TF's are off by about 1e-8). decoded[k] is the k-th best path of
// every batch entry as (batch, frames) int64 padded with -1 (ctc_greedy_decoder's layout of
// TF's SparseTensor). merge_repeated merges repeated labels of a path (TF 1's default; TF 2's
// decoder passes false). A host algorithm (TF's runs on the CPU only): eager only (an
// InvalidArgumentError inside tf::function: wrap it in tf::py_function there); inputs on a GPU
// are read back. InvalidArgumentError for top_paths outside [1, beam_width] or above the beams
// a short sequence leaves (TF's "Less leaves in the beam search than requested").
struct CtcBeamDecoded {
  std::vector<Tensor> decoded;
  Tensor log_probabilities;
};
CtcBeamDecoded ctc_beam_search_decoder(const Tensor& inputs, const Tensor& sequence_length,
                                       int beam_width = 100, int top_paths = 1,
                                       bool merge_repeated = false);

}  // namespace tapeflow::nn

namespace tapeflow::math {
using ::tapeflow::nn::log_sigmoid;  // TF's spelling is tf.math.log_sigmoid
}  // namespace tapeflow::math

namespace tapeflow::prims {

// Inputs {logits (T, B, C) float32/float64, labels (B, L), label_length (B,), logit_length (B,)}
// -> {loss (B,), gradient of loss with respect to the logits (T, B, C)}, as TF's CTCLoss op.
// Alpha-beta recursion in float64 log space: one batch entry per task on the host, one block per
// entry on the GPU (ops/cuda/ctc.cu). The label and length checks throw from the kernels: the
// host kernel's before any work, the CUDA kernel's after it (a flag read back, see ctc.cu).
struct CtcLoss final : PrimitiveBase<CtcLoss> {
  int blank;  // in [0, C)
  explicit CtcLoss(int b) : blank(b) {}
  const char* name() const override { return "ctc_loss"; }
  int num_outputs() const override { return 2; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override;
  bool vjp_accepts_undefined_cotangents() const override { return true; }
  TF_DECLARE_KERNELS
  TF_DECLARE_VJP
  std::string attributes() const override { return "blank_index=" + std::to_string(blank); }
  // Both kernels' argument checks on the inputs (read back to the host): the first bad entry
  // throws the InvalidArgumentError. The CUDA kernel calls it when it flagged an entry.
  void check_arguments(std::span<const Tensor> in) const;
};

}  // namespace tapeflow::prims
