// Whether this thread is tracing the sub-graph of a control-flow node (a branch of tf::cond, a
// loop's body: tf::while_loop, tf::map_fn, tf::scan, a Keras RNN's timesteps). Tensors made
// there exist only inside that sub-graph: code that would keep one past it (Keras' add_loss)
// asks, to raise a clear error instead.
#pragma once

namespace tapeflow::jit {

bool tracing_subgraph();

}  // namespace tapeflow::jit
