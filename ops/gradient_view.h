// A primitive that passes the value of one computation (input 0, as a view: no kernel) with the
// gradient of another: its vjp gives input 0 nothing and input 1 what Derived::gradient(x, y, g)
// returns for input x (input 1), output y and cotangent g. pinv (the Moore-Penrose derivative
// instead of the SVD's) and random::gamma (the implicit reparameterization instead of the
// sampler's path) use it.
#pragma once

#include <span>
#include <vector>

#include "ops/primitive.h"

namespace tapeflow::detail {

template <class Derived>
struct GradientView : PrimitiveBase<Derived> {
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override {
    out[0] = {in[0].shape(), in[0].dtype()};
  }
  void eval_cpu(std::span<const Tensor>, std::span<Tensor>) const override {}
  void eval_cuda(std::span<const Tensor>, std::span<Tensor>) const override {}
  bool is_view() const override { return true; }
  uint32_t vjp_saves() const override {
    return Primitive::save_input(1) | Primitive::save_output(0);
  }
  std::vector<Tensor> vjp(std::span<const Tensor> primals, std::span<const Tensor> cotangents,
                          std::span<const int> argnums,
                          std::span<const Tensor> outputs) const override {
    std::vector<Tensor> out;
    for (int i : argnums)
      out.push_back(i == 0 ? Tensor()
                           : static_cast<const Derived&>(*this).gradient(primals[1], outputs[0],
                                                                         cotangents[0]));
    return out;
  }
};

}  // namespace tapeflow::detail
