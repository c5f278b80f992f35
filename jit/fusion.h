// Elementwise fusion for traced graphs: a chain of float32 elementwise ops on the CPU (unary
// math, relu, add/subtract/multiply/divide/maximum/minimum with full-size or one-element operands)
// becomes one `fused_elementwise` node. Its kernel walks the output in tiles of 1024 elements and
// runs every step on a tile while the intermediates stay in cache, with the same vectorised loops
// as eager execution (ops/cpu/fusion_kernels.h), so fused results equal unfused ones. The node's
// gradient recomputes the chain under a tape, so fused graphs stay differentiable.
#pragma once

#include "jit/graph.h"

namespace tapeflow::jit {

// Replaces every fusable chain of two or more nodes by one fused node; returns how many.
int fuse_elementwise(Graph& graph);

}  // namespace tapeflow::jit
