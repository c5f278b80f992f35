// dispatch(): the one path of every op, eager or traced (see docs/architecture.md):
//   1. pick the device (innermost DeviceScope, else the inputs' device) and copy inputs there;
//   2. infer and check output shapes and dtypes;
//   3. under a trace, add a graph node and return symbolic outputs; otherwise run the kernel;
//   4. let every installed gradient tape record the op.
#pragma once

#include <initializer_list>
#include <span>
#include <string_view>
#include <vector>

#include "core/error.h"
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

// e raised again, of the same type, with "[op] " in front of its message.
[[noreturn]] void rethrow_named(std::string_view op, const Error& e);
// Runs f, a composite op's body: an error that does not name `op` first (one of its inner ops')
// is raised again naming `op` in front ("[separable_conv2d] [depthwise_conv2d] ...").
template <class F>
auto naming_errors(std::string_view op, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const Error& e) {
    const std::string_view what = e.what();
    if (what.size() > op.size() + 1 && what[0] == '[' && what.substr(1, op.size()) == op &&
        what[op.size() + 1] == ']')
      throw;
    rethrow_named(op, e);
  }
}

}  // namespace tapeflow::detail
