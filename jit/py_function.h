// TF's tf.py_function: a C++ callable that runs at every call of a traced function, on the
// call's concrete tensors, instead of once while tracing (where C++ side effects otherwise
// happen). Eagerly it is a plain call. Gradients flow through it: its vector-Jacobian product
// runs the callable again under a GradientTape (as TF's py_function differentiates with its
// eager tape). docs/function.md, "Side effects, variables, randomness".
#pragma once

#include <functional>
#include <vector>

#include "core/tensor.h"
#include "core/tensor_spec.h"

namespace tapeflow {

using PyFunctionFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

// Calls fn(inputs). Inside tf::function the call becomes one `py_function` node that runs fn at
// every replay; Tout gives each result's dtype and shape (fully known: the graph's later ops
// are shaped by it), and a result that differs raises an InvalidArgumentError naming it. fn
// runs with no trace active, on tensors placed where the inputs are; its results come back on
// the node's device (the scope's, else the first input's). The node counts as a side effect:
// it is never folded, merged, removed or captured into a CUDA graph.
std::vector<Tensor> py_function(const PyFunctionFn& fn, const std::vector<Tensor>& inputs,
                                const std::vector<TensorSpec>& Tout);
// One result.
Tensor py_function(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                   const std::vector<Tensor>& inputs, const TensorSpec& Tout);

}  // namespace tapeflow
