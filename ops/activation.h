// Activation primitives with their own kernels, so that a tape keeps one tensor per layer:
// Relu's vjp reads only its output, and ReluGrad applies the mask in one pass (no temporaries).
// The public entry point is tf::nn::relu (ops/nn.h).
#pragma once

#include "ops/primitive.h"

namespace tapeflow::prims {

// max(x, 0) for every dtype but bool (NaN stays NaN, as TF; uint8 is unchanged).
struct Relu final : PrimitiveBase<Relu> {
  const char* name() const override { return "relu"; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override;
  bool is_elementwise() const override { return true; }
  TF_DECLARE_KERNELS
  TF_DECLARE_VJP
};

// Inputs {y = relu(x), dy} of one shape and dtype: dy where y > 0, else 0.
struct ReluGrad final : PrimitiveBase<ReluGrad> {
  const char* name() const override { return "relu_grad"; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override;
  bool is_elementwise() const override { return true; }
  TF_DECLARE_KERNELS
  TF_DECLARE_VJP
};

}  // namespace tapeflow::prims
