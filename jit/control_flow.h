// Data-dependent control flow: TF's tf.cond, tf.switch_case and tf.while_loop. Eagerly they are
// C++ control flow (the predicate is read and one branch, or one iteration after another, runs).
// Inside tf::function, where C++ control flow is unrolled at trace time, they trace each branch
// (the loop's condition and body) once into a sub-graph of its own and add one node, `cond`,
// `switch_case` or `while_loop`, that picks the branch or repeats the body when the graph runs,
// reading the predicate each time (from the GPU: one synchronisation). Gradients flow through
// them, eagerly and traced (docs/function.md, "Control flow").
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace tapeflow {

struct WhileLoopOptions {
  // TF's maximum_iterations: at most this many iterations, even while cond is still true
  // (-1: no limit).
  int64_t maximum_iterations = -1;
};

namespace detail {
using BranchFn = std::function<std::vector<Tensor>()>;
using LoopCondFn = std::function<Tensor(const std::vector<Tensor>&)>;
using LoopBodyFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
std::vector<Tensor> cond_impl(const Tensor& pred, const BranchFn& true_fn,
                              const BranchFn& false_fn);
std::vector<Tensor> switch_case_impl(const Tensor& branch_index,
                                     const std::vector<BranchFn>& branch_fns,
                                     const BranchFn& default_fn);
std::vector<Tensor> while_loop_impl(const LoopCondFn& cond, const LoopBodyFn& body,
                                    std::vector<Tensor> loop_vars, const WhileLoopOptions& options);

// What the templates below take: branches that return a Tensor or a vector of them, a loop's
// condition and body over a vector of tensors or over one tensor.
template <class F>
concept TensorBranch = std::is_invocable_r_v<Tensor, F&>;
template <class F>
concept TensorsBranch = std::is_invocable_r_v<std::vector<Tensor>, F&> && !TensorBranch<F>;
template <class F>
concept TensorsLoopCond = std::is_invocable_r_v<Tensor, F&, const std::vector<Tensor>&>;
template <class F>
concept TensorsLoopBody =
    std::is_invocable_r_v<std::vector<Tensor>, F&, const std::vector<Tensor>&>;
template <class F>
concept TensorLoopFn = std::is_invocable_r_v<Tensor, F&, const Tensor&>;
}  // namespace detail

// TF's tf.cond(pred, true_fn, false_fn): true_fn() if the scalar bool tensor pred is true, else
// false_fn(). Both branches return a Tensor (this form) or a std::vector<Tensor> (the next);
// traced, they must return as many tensors with the same dtypes and shapes (else an
// InvalidArgumentError naming the output and both types), and only the branch taken runs, side
// effects (tf::print, variable assignments) included.
template <detail::TensorBranch T, detail::TensorBranch F>
Tensor cond(const Tensor& pred, T true_fn, F false_fn) {
  return detail::cond_impl(
      pred, [&]() -> std::vector<Tensor> { return {Tensor(true_fn())}; },
      [&]() -> std::vector<Tensor> { return {Tensor(false_fn())}; })[0];
}
template <detail::TensorsBranch T, detail::TensorsBranch F>
std::vector<Tensor> cond(const Tensor& pred, T true_fn, F false_fn) {
  return detail::cond_impl(pred, detail::BranchFn(std::ref(true_fn)),
                           detail::BranchFn(std::ref(false_fn)));
}

// TF's tf.switch_case(branch_index, branch_fns, default): branch_fns[branch_index]() for a
// scalar int32 or int64 branch_index; an index outside [0, branch_fns.size()) runs default_fn,
// or the last branch when there is none (TF's rule). Traced as cond is: every branch must return
// as many tensors with the same dtypes and shapes, and only the branch taken runs.
inline Tensor switch_case(const Tensor& branch_index,
                          const std::vector<std::function<Tensor()>>& branch_fns,
                          const std::function<Tensor()>& default_fn = nullptr) {
  auto wrap = [](const std::function<Tensor()>& f) -> detail::BranchFn {
    if (!f) return nullptr;
    return [&f]() -> std::vector<Tensor> { return {f()}; };
  };
  std::vector<detail::BranchFn> fns;
  for (const auto& f : branch_fns) fns.push_back(wrap(f));
  return detail::switch_case_impl(branch_index, fns, wrap(default_fn))[0];
}
// Branches that return several tensors.
inline std::vector<Tensor> switch_case(
    const Tensor& branch_index, const std::vector<std::function<std::vector<Tensor>()>>& branch_fns,
    const std::function<std::vector<Tensor>()>& default_fn = nullptr) {
  return detail::switch_case_impl(branch_index, branch_fns, default_fn);
}

// TF's tf.while_loop(cond, body, loop_vars): while cond(vars) is true (a scalar bool tensor),
// vars = body(vars); returns the last vars. body returns as many tensors as it takes, with the
// same dtypes; traced, also with the same shapes (TF's shape invariants; eagerly a shape may
// change, as in TF). options.maximum_iterations bounds the number of iterations.
template <detail::TensorsLoopCond C, detail::TensorsLoopBody B>
std::vector<Tensor> while_loop(C cond, B body, std::vector<Tensor> loop_vars,
                               const WhileLoopOptions& options = {}) {
  return detail::while_loop_impl(
      [&](const std::vector<Tensor>& v) { return Tensor(cond(v)); },
      [&](const std::vector<Tensor>& v) { return std::vector<Tensor>(body(v)); },
      std::move(loop_vars), options);
}
// One loop variable: cond(x) -> bool scalar, body(x) -> the next x.
template <detail::TensorLoopFn C, detail::TensorLoopFn B>
Tensor while_loop(C cond, B body, const Tensor& loop_var, const WhileLoopOptions& options = {}) {
  return detail::while_loop_impl(
      [&](const std::vector<Tensor>& v) { return Tensor(cond(v[0])); },
      [&](const std::vector<Tensor>& v) { return std::vector<Tensor>{Tensor(body(v[0]))}; },
      {loop_var}, options)[0];
}

class Graph;
class Primitive;
namespace jit {
// The sub-graphs that a control-flow node runs, each with a label ("true branch", "body"), for
// graph dumps (Graph::to_string lists them under the node); empty for any other primitive.
std::vector<std::pair<std::string, const Graph*>> subgraphs_of(const Primitive& prim);
}  // namespace jit

}  // namespace tapeflow
