#include "ops/activation.h"

#include "core/check.h"
#include "ops/dispatch.h"
#include "ops/factory.h"

namespace tapeflow::prims {

void Relu::infer(std::span<const Tensor> in, std::span<TensorMeta> out) const {
  const DType d = in[0].dtype();
  TF_CHECK_ARG(d != bool_, name(), "is not defined for bool");
  out[0] = {in[0].shape(), d};
}

void ReluGrad::infer(std::span<const Tensor> in, std::span<TensorMeta> out) const {
  TF_CHECK_ARG(in[0].shape() == in[1].shape() && in[0].dtype() == in[1].dtype(), name(),
               "y and dy must match, got {} {} and {} {}", in[0].shape().to_string(),
               dtype_name(in[0].dtype()), in[1].shape().to_string(), dtype_name(in[1].dtype()));
  out[0] = {in[0].shape(), in[0].dtype()};
}

uint32_t Relu::vjp_saves() const { return save_output(0); }
std::vector<Tensor> Relu::vjp(std::span<const Tensor>, std::span<const Tensor> cts,
                              std::span<const int>, std::span<const Tensor> outs) const {
  return {detail::dispatch(ReluGrad{}, {outs[0], cts[0]})};
}

// Linear in dy (the same mask again); piecewise constant in y.
uint32_t ReluGrad::vjp_saves() const { return save_input(0); }
std::vector<Tensor> ReluGrad::vjp(std::span<const Tensor> p, std::span<const Tensor> cts,
                                  std::span<const int> argnums, std::span<const Tensor>) const {
  std::vector<Tensor> out;
  for (int k : argnums)
    out.push_back(k == 1 ? detail::dispatch(ReluGrad{}, {p[0], cts[0]}) : zeros_like(cts[0]));
  return out;
}

}  // namespace tapeflow::prims
