// Per-thread state that every op reads: the device scope stack, the active gradient tapes and the
// active trace. Owned by the thread; nothing here is shared between threads.
#pragma once

#include <vector>

#include "core/device.h"

namespace tapeflow::detail {

class TapeObserver;   // ops/hooks.h: implemented by autograd's GradientTape
class TraceObserver;  // ops/hooks.h: implemented by jit's tracer

struct ThreadContext {
  std::vector<Device> device_stack;
  std::vector<TapeObserver*> tapes;  // innermost last
  TraceObserver* trace = nullptr;    // innermost active trace
  // The active trace must serve several sizes of some dimensions (tf::function with None
  // dimensions): composites take sizes from tensors at run time instead of baking them in.
  bool open_shapes = false;
};

inline ThreadContext& thread_context() {
  static thread_local ThreadContext ctx;
  return ctx;
}

}  // namespace tapeflow::detail
