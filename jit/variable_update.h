// Variable updates fused into the product that computes them. A traced train step with plain
// gradient descent ends, for each weight matrix, in
//
//   %g = matmul(%a, %b)                  the weight's gradient, e.g. x^T dy
//   %d = multiply(%g, %lr)               optional: a 0-d learning rate (constant or tensor)
//   %r = read_variable() {variable=w}
//   %n = subtract(%r, %d)                (or add(%r, %d): assign_add)
//   assign_variable(%n) {variable=w}
//
// which writes the gradient, reads it back with the weight and writes a third buffer. The pass
// replaces the five nodes by one `variable_matmul_update` node that runs a single GEMM
// accumulating into the weight, w = alpha op(a) op(b) + beta w with alpha = -lr (or lr, or -1/+1
// without a multiply) and beta = 1, or a 0-d decay when the read is multiplied by one (a
// momentum slot, m = mu m - lr g): one pass over the weight instead of three, no gradient
// buffer, and the
// weight updated in place when no snapshot of it is held (copy-on-write otherwise, as
// Variable::assign). Values equal the unfused graph's up to rounding: the product is scaled
// inside the GEMM instead of being rounded before the scaling and the subtraction (about one
// unit in the last place of the weight).
//
// On the CPU the GEMM is detail::gemm_accumulate (oneDNN / OpenBLAS), on a GPU cuBLAS
// (detail::gemm_accumulate_device: alpha and beta are computed on the device from the scale and
// decay tensors, so a learning rate held on the GPU costs no host synchronisation).
//
// Matched only when every node is on one device, float32 or float64, the product is 2-D with
// the variable's exact shape and dtype, the intermediate values have no other reader and are not
// graph outputs, and no other assignment of the same variable lies between the read and the
// write (the fused node reads the variable where the assignment was). tf::function runs the pass
// with elementwise fusion (TAPEFLOW_FUSION=0 turns both off).
#pragma once

#include "jit/fusion.h"
#include "jit/graph.h"

namespace tapeflow::jit {

// Rewrites every matching update (see above); returns how many.
int fuse_variable_updates(Graph& graph);

// Elementwise updates in place: assign_variable(v, f(read_variable(v), ...)) where f is a
// fused elementwise node, or a single elementwise op made a one-step one (v.assign_add(m)),
// whose result has the variable's shape and dtype and is read by nothing else, and the read is
// read by nothing else, becomes one `variable_elementwise_update` node that computes f into the
// variable's buffer (each element is read before it is written, at the same index;
// copy-on-write when a snapshot is held): no new buffer per update, and the same values as the
// separate nodes. On a GPU f is a generated kernel (options.cuda: jit_compile), recompiled to
// write over its inputs (jit::fused_writing_over_inputs). Run after fuse_elementwise with the
// same options (tf::function does, with fusion on). Optimiser updates (SGD on biases, momentum,
// Adam's moments and weights) take this form.
int update_variables_in_place(Graph& graph, const FusionOptions& options = {});

}  // namespace tapeflow::jit
