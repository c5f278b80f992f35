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
  // The lists of tapes that live PauseTapes scopes set aside, outermost first: a tape that ends
  // while paused (destroyed there, or on another thread) leaves them too.
  std::vector<std::vector<TapeObserver*>*> paused_tapes;
  TraceObserver* trace = nullptr;    // innermost active trace
  // The active trace must serve several sizes of some dimensions (tf::function with None
  // dimensions): composites take sizes from tensors at run time instead of baking them in.
  bool open_shapes = false;
};

inline ThreadContext& thread_context() {
  static thread_local ThreadContext ctx;
  return ctx;
}

// Pauses every tape of this thread while alive (ops run but are not recorded).
class PauseTapes {
 public:
  PauseTapes() : ctx_(thread_context()) {
    saved_.swap(ctx_.tapes);
    ctx_.paused_tapes.push_back(&saved_);
  }
  ~PauseTapes() {
    ctx_.paused_tapes.pop_back();
    ctx_.tapes.swap(saved_);
  }
  PauseTapes(const PauseTapes&) = delete;
  PauseTapes& operator=(const PauseTapes&) = delete;

 private:
  ThreadContext& ctx_;
  std::vector<TapeObserver*> saved_;
};

}  // namespace tapeflow::detail
