// dispatch(): the one path of every op, eager or traced (see docs/architecture.md):
//   1. pick the device (innermost DeviceScope, else the inputs' device) and copy inputs there;
//   2. infer and check output shapes and dtypes;
//   3. under a trace, add a graph node and return symbolic outputs; otherwise run the kernel;
//   4. let every installed gradient tape record the op.
#pragma once

#include <initializer_list>
#include <span>
#include <vector>

#include "ops/primitive.h"

namespace tapeflow::detail {

Tensor dispatch(const Primitive& prim, std::span<const Tensor> inputs);
inline Tensor dispatch(const Primitive& prim, std::initializer_list<Tensor> inputs) {
  return dispatch(prim, std::span<const Tensor>(inputs.begin(), inputs.size()));
}
std::vector<Tensor> dispatch_multi(const Primitive& prim, std::span<const Tensor> inputs);

// Runs a primitive's kernel on the given device with prepared outputs (used by dispatch and by
// graph replay).
void run_kernel(const Primitive& prim, Device device, std::span<const Tensor> inputs,
                std::span<Tensor> outputs);

// The device a new tensor goes to: the innermost DeviceScope, else TF's default placement.
Device current_device();

}  // namespace tapeflow::detail
