#include "ops/loss.h"

#include "core/check.h"
#include "core/context.h"
#include "ops/binary.h"
#include "ops/dispatch.h"
#include "ops/factory.h"
#include "ops/helpers.h"
#include "ops/movement.h"
#include "ops/reduce.h"
#include "ops/unary.h"

namespace tapeflow {

namespace prims {

namespace {
void infer_row_op(const char* op, const Tensor& x, std::span<TensorMeta> out) {
  detail::check_dtype_floating(op, x);
  TF_CHECK_ARG(x.rank() >= 1, op, "expects a tensor of rank at least 1, got shape {}",
               x.shape().to_string());
  out[0] = {x.shape(), x.dtype()};
}

// float one-hot rows of `like`'s dtype on `like`'s device: labels == class index.
Tensor onehot_like(const Tensor& labels, const Tensor& like) {
  const DeviceScope scope(like.placement());
  const Tensor cls = range(0.0, static_cast<double>(like.shape().dim(-1)), 1.0, labels.dtype());
  return cast(equal(expand_dims(labels, -1), cls), like.dtype());
}
}  // namespace

void Softmax::infer(std::span<const Tensor> in, std::span<TensorMeta> out) const {
  infer_row_op(name(), in[0], out);
}
void LogSoftmax::infer(std::span<const Tensor> in, std::span<TensorMeta> out) const {
  infer_row_op(name(), in[0], out);
}

void SparseSoftmaxCrossEntropy::infer(std::span<const Tensor> in, std::span<TensorMeta> out) const {
  const Tensor& labels = in[0];
  const Tensor& logits = in[1];
  TF_CHECK_ARG(labels.dtype() == int32 || labels.dtype() == int64, name(),
               "labels must be int32 or int64 class indices, got {}", dtype_name(labels.dtype()));
  detail::check_dtype_floating(name(), logits);
  TF_CHECK_ARG(logits.rank() >= 1, name(), "logits must have rank at least 1, got shape {}",
               logits.shape().to_string());
  bool leading_equal = labels.rank() == logits.rank() - 1;
  for (int i = 0; leading_equal && i < labels.rank(); ++i)
    leading_equal = labels.shape()[i] == logits.shape()[i];
  TF_CHECK_ARG(leading_equal, name(),
               "labels must have the shape of logits without its last dimension: labels are "
               "{}, logits {}",
               labels.shape().to_string(), logits.shape().to_string());
  out[0] = {labels.shape(), logits.dtype()};
  out[1] = {logits.shape(), logits.dtype()};
}

uint32_t Softmax::vjp_saves() const {
  return save_output(0);
}
std::vector<Tensor> Softmax::vjp(std::span<const Tensor>, std::span<const Tensor> cts,
                                 std::span<const int>, std::span<const Tensor> outs) const {
  const Tensor& y = outs[0];
  const Tensor& g = cts[0];
  return {y * (g - reduce_sum(g * y, -1, true))};
}

uint32_t LogSoftmax::vjp_saves() const {
  return save_output(0);
}
std::vector<Tensor> LogSoftmax::vjp(std::span<const Tensor>, std::span<const Tensor> cts,
                                    std::span<const int>, std::span<const Tensor> outs) const {
  const Tensor& g = cts[0];
  return {g - exp(outs[0]) * reduce_sum(g, -1, true)};
}

uint32_t SparseSoftmaxCrossEntropy::vjp_saves() const {
  return save_input(0) | save_output(1);
}
std::vector<Tensor> SparseSoftmaxCrossEntropy::vjp(std::span<const Tensor> primals,
                                                   std::span<const Tensor> cts,
                                                   std::span<const int> argnums,
                                                   std::span<const Tensor> outs) const {
  std::vector<Tensor> grads;
  for (int k : argnums) {
    if (k == 0) {  // integer labels: no gradient (the tape never asks; kept for completeness)
      grads.emplace_back();
      continue;
    }
    const Tensor& backprop = outs[1];
    Tensor g;
    if (cts[0].defined())
      g = detail::dispatch(SparseSoftmaxCrossEntropyGrad(), {cts[0], backprop});
    if (cts[1].defined()) {
      // d(backprop)/d(logits) is softmax's Jacobian diag(s) - s s^T (symmetric).
      const Tensor s = backprop + onehot_like(primals[0], backprop);
      const Tensor& c1 = cts[1];
      const Tensor term = s * (c1 - reduce_sum(c1 * s, -1, true));
      g = g.defined() ? g + term : term;
    }
    grads.push_back(std::move(g));
  }
  return grads;
}

void SparseSoftmaxCrossEntropyGrad::infer(std::span<const Tensor> in,
                                          std::span<TensorMeta> out) const {
  const Tensor& g = in[0];
  const Tensor& b = in[1];
  detail::check_dtype_floating(name(), b);
  bool leading_equal = g.dtype() == b.dtype() && b.rank() >= 1 && g.rank() == b.rank() - 1;
  for (int i = 0; leading_equal && i < g.rank(); ++i) leading_equal = g.shape()[i] == b.shape()[i];
  TF_CHECK_ARG(leading_equal, name(),
               "g must have the backprop's dtype and shape without its last dimension: g is {} "
               "{}, backprop {} {}",
               g.shape().to_string(), dtype_name(g.dtype()), b.shape().to_string(),
               dtype_name(b.dtype()));
  out[0] = {b.shape(), b.dtype()};
}

uint32_t SparseSoftmaxCrossEntropyGrad::vjp_saves() const {
  return save_input(0) | save_input(1);
}
std::vector<Tensor> SparseSoftmaxCrossEntropyGrad::vjp(std::span<const Tensor> primals,
                                                       std::span<const Tensor> cts,
                                                       std::span<const int> argnums,
                                                       std::span<const Tensor>) const {
  std::vector<Tensor> grads;
  for (int k : argnums) {
    if (k == 0) {
      grads.push_back(reduce_sum(cts[0] * primals[1], -1));
      continue;
    }
    // The backprop's cotangent: the loss's vjp turns it into the logits' gradient.
    grads.push_back(expand_dims(primals[0], -1) * cts[0]);
  }
  return grads;
}

}  // namespace prims

namespace detail {

Tensor softmax_composite(const Tensor& logits, int axis) {
  const Tensor e = exp(logits - reduce_max(logits, axis, true));
  return e / reduce_sum(e, axis, true);
}

Tensor log_softmax_composite(const Tensor& logits, int axis) {
  const Tensor s = logits - reduce_max(logits, axis, true);
  return s - log(reduce_sum(exp(s), axis, true));
}

Tensor sparse_softmax_cross_entropy_composite(const Tensor& labels, const Tensor& logits) {
  const int64_t classes = logits.shape().dim(-1);
  const Tensor logp = log_softmax_composite(logits, -1);
  // -logp[label] per example: a mask row (label == class) selects one log-probability; where()
  // keeps a -inf elsewhere in the row from turning into NaN.
  Tensor cls;
  {
    const DeviceScope scope(logits.placement());
    cls = range(0.0, static_cast<double>(classes), 1.0, labels.dtype());
  }
  const Tensor mask = equal(expand_dims(labels, -1), cls);
  return negative(reduce_sum(where(mask, logp, 0), -1));
}

}  // namespace detail
}  // namespace tapeflow
