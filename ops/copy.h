// Moving tensors between devices: the Copy primitive (recorded by tapes, so gradients flow back
// across devices) and tf::identity.
#pragma once

#include "ops/primitive.h"

namespace tapeflow {

// A copy of x on the device of the innermost DeviceScope (or x's own device without one).
Tensor identity(const Tensor& x);

namespace detail {
// x on `device` (x itself when it is already there).
Tensor copy_to(const Tensor& x, Device device);
}  // namespace detail

namespace prims {
struct Copy final : PrimitiveBase<Copy> {
  Device target;
  explicit Copy(Device t) : target(t) {}
  const char* name() const override { return "copy"; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override;
  TF_DECLARE_KERNELS
  std::vector<Tensor> vjp(std::span<const Tensor> primals, std::span<const Tensor> cotangents,
                          std::span<const int> argnums,
                          std::span<const Tensor> outputs) const override;
  // The vjp needs only the source's device: a tape keeps no copy of it (a host batch copied
  // to a GPU is not held until the backward pass).
  uint32_t vjp_saves() const override { return 0; }
  std::optional<Device> target_device() const override { return target; }
  std::string attributes() const override { return "device=" + target.to_string(); }
};
}  // namespace prims

}  // namespace tapeflow
