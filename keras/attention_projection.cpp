#include "keras/attention_projection.h"

#include <utility>

#include "ops/binary.h"
#include "ops/einsum.h"

namespace tapeflow::keras::detail {

AttentionProjection::AttentionProjection(std::string name, int bound, std::vector<int64_t> out_dims,
                                         ProjectionWeights w)
    : LayerImpl("EinsumDense", "einsum_dense", std::move(name)),
      bound_(bound),
      out_dims_(std::move(out_dims)),
      w_(std::move(w)) {}

TensorShape AttentionProjection::compute_output_shape(const TensorShape& s) const {
  std::vector<int64_t> d;
  for (int i = 0; i < s.rank() - bound_; ++i) d.push_back(s[i]);
  d.insert(d.end(), out_dims_.begin(), out_dims_.end());
  return TensorShape(d);
}

void AttentionProjection::build(const TensorShape& s) {
  const int free = s.rank() - bound_;
  std::vector<int64_t> kd;
  for (int i = free; i < s.rank(); ++i) kd.push_back(s[i]);
  kd.insert(kd.end(), out_dims_.begin(), out_dims_.end());
  // "abc,cde->abde": the free axes, then the bound ones, then the output ones.
  std::string in, ker, out;
  char c = 'a';
  for (int i = 0; i < free; ++i, ++c) in += c, out += c;
  for (int i = 0; i < bound_; ++i, ++c) in += c, ker += c;
  for (size_t i = 0; i < out_dims_.size(); ++i, ++c) ker += c, out += c;
  equation_ = in + "," + ker + "->" + out;
  int64_t fan_in = 1, fan_out = 1;
  for (int i = free; i < s.rank(); ++i) fan_in *= s[i];
  for (int64_t d : out_dims_) fan_out *= d;
  kernel_ = add_weight("kernel", TensorShape(kd), with_fans(w_.kernel_initializer, fan_in, fan_out),
                       true, w_.kernel_regularizer, w_.kernel_constraint);
  if (w_.use_bias)
    bias_ = add_weight("bias", TensorShape(out_dims_), w_.bias_initializer, true,
                       w_.bias_regularizer, w_.bias_constraint);
}

Tensor AttentionProjection::call(const Tensor& x, bool /*training*/) {
  Tensor y = einsum(equation_, x, kernel_.value());
  return w_.use_bias ? y + bias_.value() : y;
}

}  // namespace tapeflow::keras::detail
