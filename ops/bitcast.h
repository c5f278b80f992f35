// tf::bitcast: a tensor's bytes read as another dtype, without copying (TF's tf.bitcast).
#pragma once

#include "ops/primitive.h"

namespace tapeflow {

// x's bytes as `dtype` (any dtype but bool, as TF's): the same shape when the element sizes are
// equal; a last dimension of size(x) / size(dtype) appended when dtype's elements are smaller;
// the last dimension (which must be size(dtype) / size(x)) removed when they are larger. A view:
// the result shares x's storage. No gradient (TF registers none), on every device and in traced
// functions (also for None dimensions).
Tensor bitcast(const Tensor& x, DType dtype);

namespace detail {
// x's values through which no gradient flows, for ops (which cannot call autograd's
// stop_gradient): a same-dtype bitcast, a view.
Tensor without_gradient(const Tensor& x);
}  // namespace detail

namespace prims {
struct Bitcast final : PrimitiveBase<Bitcast> {
  DType dtype;
  explicit Bitcast(DType d) : dtype(d) {}
  const char* name() const override { return "bitcast"; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override;
  // The output is a view made in produce(): no kernel runs.
  void eval_cpu(std::span<const Tensor>, std::span<Tensor>) const override {}
  void eval_cuda(std::span<const Tensor>, std::span<Tensor>) const override {}
  bool is_view() const override { return true; }
  bool produce(std::span<const Tensor> in, std::span<Tensor> out, Device device) const override;
  bool stops_gradients() const override { return true; }
  std::string attributes() const override;
  std::vector<Tensor> vjp(std::span<const Tensor>, std::span<const Tensor>,
                          std::span<const int> argnums, std::span<const Tensor>) const override {
    return std::vector<Tensor>(argnums.size());
  }
  uint32_t vjp_saves() const override { return 0; }
};
}  // namespace prims

}  // namespace tapeflow
