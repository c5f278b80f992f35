// Graph optimisation passes: run on a traced Graph before it is replayed. Every pass keeps the
// graph's inputs (the signature) and outputs, keeps every node that must run (see must_keep) in
// its program order, and only ever removes nodes or redirects references to equal values, so a
// replay of the optimised graph gives the values and the side effects of the original one.
//
// After a pass, node references are renumbered to the remaining nodes; in debug builds each pass
// ends with validate_graph().
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "jit/graph.h"

namespace tapeflow::jit {

// Nodes of these primitives always run, in order, and are never merged or folded: those that
// declare side effects (printing, variable reads and assignments) and the random ops.
bool must_keep(const Primitive& prim);

// Removes nodes whose outputs the graph outputs do not need (directly or through other nodes),
// except must_keep nodes, which stay together with everything they read. Also removes the
// constants that nothing reads any more (constant references are renumbered).
void eliminate_dead_code(Graph& graph);

// Merges a node into an earlier one with an equivalent primitive (same type and attributes()),
// the same inputs (after earlier merges), the same device and the same output types: later
// references point to the earlier node and the duplicate is removed. must_keep nodes are never
// merged. Constant slots holding the same tensor object (Tensor::is_same) are merged too (the
// unused slot is left for eliminate_dead_code); equal values in distinct tensors are not.
void eliminate_common_subexpressions(Graph& graph);

// Evaluates, in one forward sweep, every node that is not must_keep, has at least one output,
// reads only foldable constants (including ones folded earlier in the sweep), or reads only its
// inputs' shapes (Primitive::reads_only_shapes) and they are fully known, and produces at most
// `max_elements` elements over all its outputs. Its outputs become new constants and the
// node is removed. Nodes whose evaluation throws a tapeflow::Error are left in place (the error
// then happens at replay, as it would eagerly). Evaluation runs through detail::dispatch_multi
// on the node's device with tapes and any enclosing trace suspended. Constants that are no
// longer read stay until eliminate_dead_code.
//
// Captured tensors: a constant whose Tensor::id() is below `first_traced_id` existed before the
// trace began (an eager tensor the callable captured). A GradientTape may watch it when the
// function is called, and a replay under the tape must then record the ops that read it, so it
// is never folded through. Tensors made while tracing (literals, factory results) have larger
// ids (ids grow process-wide) and fold. Pass the detail::next_tensor_id() taken just before
// tracing; 0 folds every constant (hand-built graphs, or replays that no tape can see).
inline constexpr int64_t kDefaultFoldLimit = 4096;
void fold_constants(Graph& graph, int64_t max_elements = kDefaultFoldLimit,
                    uint64_t first_traced_id = 0);

// fold_constants (default limit), eliminate_common_subexpressions, eliminate_dead_code, in that
// order. `first_traced_id` as for fold_constants.
void optimize(Graph& graph, uint64_t first_traced_id = 0);

// The jit's on/off environment switches (TAPEFLOW_FUSION, TAPEFLOW_MEMORY_PLAN,
// TAPEFLOW_JIT_COMPILE): nullopt when unset or empty, false for "0", true otherwise.
std::optional<bool> env_switch(const char* name);

// Removes the nodes with keep[i] == 0 and renumbers node references (for passes that rewrite
// nodes). No remaining reference may point to a removed node.
void remove_nodes(Graph& graph, const std::vector<char>& keep);

// Throws InternalError unless every reference is in range and every node reference points to an
// earlier node's existing output (as are the graph outputs), every node has a primitive, and
// every node has as many output types as its primitive has outputs.
void validate_graph(const Graph& graph);

}  // namespace tapeflow::jit
