// The query, key, value, gate and output projections of MultiHeadAttention and
// GroupQueryAttention (keras/layers_attention.cpp, keras/layers_kerasmore.cpp): Keras'
// EinsumDense sub-layers with bias_axes = the output axes. Internal to those two layers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "keras/constraints.h"
#include "keras/initializers.h"
#include "keras/layers.h"
#include "keras/regularizers.h"

namespace tapeflow::keras::detail {

// The weight options a projection takes from its attention layer.
struct ProjectionWeights {
  bool use_bias = true;
  Initializer kernel_initializer, bias_initializer;  // defined
  Regularizer kernel_regularizer, bias_regularizer;
  Constraint kernel_constraint, bias_constraint;
};
template <class Options>
ProjectionWeights projection_weights(const Options& o) {
  return {o.use_bias,         o.kernel_initializer, o.bias_initializer, o.kernel_regularizer,
          o.bias_regularizer, o.kernel_constraint,  o.bias_constraint};
}

// y = einsum(x, kernel) + bias over the last `bound` axes of x: kernel x.shape[-bound:] +
// out_dims, bias out_dims. A VarianceScaling kernel initializer takes the kernel's input and
// output axes for its fans, as Keras 3.15's EinsumDense.
class AttentionProjection final : public LayerImpl {
 public:
  AttentionProjection(std::string name, int bound, std::vector<int64_t> out_dims,
                      ProjectionWeights w);
  // Set by the owning layer's build before this one builds (MultiHeadAttention's depend on the
  // inputs).
  void set_out_dims(std::vector<int64_t> d) { out_dims_ = std::move(d); }
  TensorShape compute_output_shape(const TensorShape& s) const override;

 protected:
  void build(const TensorShape& s) override;
  Tensor call(const Tensor& x, bool training) override;

 private:
  int bound_;
  std::vector<int64_t> out_dims_;
  ProjectionWeights w_;
  std::string equation_;
  Variable kernel_, bias_;
};

}  // namespace tapeflow::keras::detail
