// Shape inference of a whole graph at new input shapes: what lets one trace serve other shapes
// of its None dimensions (tf::function's generic traces, the loop of map_fn and scan).
#pragma once

#include <vector>

#include "jit/graph.h"

namespace tapeflow::jit {

// Infers every node's outputs for new input shapes, in place (the ops' own shape checks run,
// so a shape the graph cannot take raises the op's usual error).
void reinfer(Graph& g, const std::vector<TensorMeta>& inputs);

}  // namespace tapeflow::jit
