// The "loss" family: fused fast paths of softmax, log_softmax and the sparse softmax
// cross-entropy, one pass per row of the last axis (max, sum of exponentials, log-sum-exp in
// float for the half types). Each primitive names its composite fallback below; the public entry
// points stay tf::nn::softmax, log_softmax and sparse_softmax_cross_entropy_with_logits
// (ops/nn.h), which pick the primitive or the composite. Primitives are immutable and may be
// shared between threads.
#pragma once

#include "ops/primitive.h"

namespace tapeflow::prims {

// softmax over the last axis of a floating tensor (rank >= 1). Fallback: detail::softmax_composite.
struct Softmax final : PrimitiveBase<Softmax> {
  const char* name() const override { return "softmax"; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override;
  TF_DECLARE_KERNELS
  // y * (g - sum(g * y, -1, keepdims)): reads only the output.
  TF_DECLARE_VJP
};

// log_softmax over the last axis. Fallback: detail::log_softmax_composite.
struct LogSoftmax final : PrimitiveBase<LogSoftmax> {
  const char* name() const override { return "log_softmax"; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override;
  TF_DECLARE_KERNELS
  // g - exp(y) * sum(g, -1, keepdims): reads only the output.
  TF_DECLARE_VJP
};

// Inputs {labels (int32/int64, shape [...]), logits (floating, shape [..., C])}; two outputs as
// TF's kernel: the loss per example ([...], logits' dtype) and the backprop softmax - onehot
// ([..., C]). A label outside [0, C) is an InvalidArgumentError on every device (the CUDA kernel
// flags it on the device; the host reads the flag once per call). Fallback:
// detail::sparse_softmax_cross_entropy_composite.
//
// vjp: loss cotangent (broadcast over classes) times the saved backprop; none for the labels.
// The backprop is itself a function of the logits (softmax - onehot): when the vjp's ops are
// recorded by an enclosing tape (higher-order gradients, or a first-order gradient traced in a
// tf::function and replayed under a tape) the product reads that output, and the enclosing
// tape's vjp adds the softmax Jacobian applied to its cotangent, written with ops on
// s = backprop + onehot, so every order stays differentiable. The tape hands an unreached
// output's cotangent over undefined (vjp_accepts_undefined_cotangents), so a first-order step
// skips that term.
struct SparseSoftmaxCrossEntropy final : PrimitiveBase<SparseSoftmaxCrossEntropy> {
  const char* name() const override { return "sparse_softmax_cross_entropy_with_logits"; }
  int num_outputs() const override { return 2; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override;
  bool vjp_accepts_undefined_cotangents() const override { return true; }
  TF_DECLARE_KERNELS
  TF_DECLARE_VJP
};

// Inputs {g ([...]), backprop ([..., C])} of one floating dtype: g[..., None] * backprop, the
// fused loss's gradient. Linear in each input; its vjp w.r.t. the backprop flows back into the
// loss's second output (see above).
struct SparseSoftmaxCrossEntropyGrad final : PrimitiveBase<SparseSoftmaxCrossEntropyGrad> {
  const char* name() const override { return "sparse_softmax_cross_entropy_grad"; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override;
  TF_DECLARE_KERNELS
  TF_DECLARE_VJP
};

}  // namespace tapeflow::prims

namespace tapeflow::detail {

// The composites the primitives replace, written with other ops (any axis; used for axes other
// than the last, and kept as the reference the primitives are measured against). They check
// nothing: the tf::nn frontends do.
Tensor softmax_composite(const Tensor& logits, int axis);
Tensor log_softmax_composite(const Tensor& logits, int axis);
// -log_softmax(logits)[label] per example; labels already range-checked by the caller.
Tensor sparse_softmax_cross_entropy_composite(const Tensor& labels, const Tensor& logits);

}  // namespace tapeflow::detail
