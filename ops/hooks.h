// The two observers that dispatch() calls: gradient tapes (autograd/) record executed ops, and
// the tracer (jit/) turns ops into graph nodes. Both live in the thread's ThreadContext; an
// observer is only ever called from the thread that installed it.
#pragma once

#include <span>

#include "core/context.h"
#include "ops/primitive.h"

namespace tapeflow::detail {

class TapeObserver {
 public:
  virtual ~TapeObserver() = default;
  // Called after every op while the tape is installed; the tape decides whether an input is
  // watched and what to keep.
  virtual void record(const Primitive& prim, std::span<const Tensor> inputs,
                      std::span<const Tensor> outputs) = 0;
};

class TraceObserver {
 public:
  virtual ~TraceObserver() = default;
  // Adds a node for prim and fills `outputs` with symbolic tensors of the inferred metas.
  virtual void add_node(const Primitive& prim, std::span<const Tensor> inputs,
                        std::span<const TensorMeta> metas, Device device,
                        std::span<Tensor> outputs) = 0;
};

}  // namespace tapeflow::detail
