// What the control-flow nodes share (jit/control_flow.cpp: cond, switch_case, while_loop;
// jit/scan_loop.cpp: the loop of map_fn, foldl, foldr and scan): the primitive base, tracing a
// callable into a sub-graph with its captures, and a sub-graph's vector-Jacobian product.
// Internal to jit/.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "autograd/variable.h"
#include "core/check.h"
#include "core/context.h"
#include "core/device.h"
#include "core/tensor.h"
#include "jit/graph.h"
#include "ops/primitive.h"

namespace tapeflow::jit::cf {

// A tape keeps every input and output of these nodes for their vjp (any count; the per-index
// bits of Primitive::vjp_saves stop at 16).
constexpr uint32_t kSaveEverything = 0xFFFFFFFFu;

// An id for graph dumps (each control-flow node has its own).
uint64_t next_node_id();

inline bool tracing() {
  return detail::thread_context().trace != nullptr;
}

// "float32 (2, 3)".
std::string type_text(const TensorMeta& m);
std::string type_text(const Tensor& t);
// s with a leading dimension of size n: a stack of n tensors of shape s (a loop's history).
TensorShape with_leading(int64_t n, const TensorShape& s);
// s without its first dimension: one entry of a stack.
TensorShape without_leading(const TensorShape& s);

// What a sub-graph does besides computing its outputs.
struct Effects {
  std::vector<const void*> variables;  // read or written (after hoisting: written ones and
                                       // those read where something writes them)
  bool writes = false;                 // assigns a variable
  std::string replay_blocker;          // an op that a gradient's re-run would repeat

  // Adds another sub-graph's effects (a node's other branch, a nested node's).
  void merge(const Effects& other);
};

// A small cache of values by key (a sub-graph's specialisations, a loop's gradient graphs per
// shape), shared by the copies of a node through a shared_ptr; past kMaxCached entries the
// oldest goes. get() makes a missing value under the lock, so one thread makes it.
template <class V>
class KeyedCache {
 public:
  static constexpr size_t kMaxCached = 16;
  template <class Make>
  V get(const std::string& key, Make&& make) {
    std::lock_guard lock(mu_);
    for (const auto& [k, v] : entries_)
      if (k == key) return v;
    V v = make();
    if (entries_.size() >= kMaxCached) entries_.erase(entries_.begin());
    entries_.emplace_back(key, v);
    return v;
  }

 private:
  std::mutex mu_;
  std::vector<std::pair<std::string, V>> entries_;
};

// A sub-graph (a branch, a loop's condition or body, a gradient's body) traced at one set of
// input types that serves others: a function's None dimensions (another batch size, another
// length) reach it through the node's inputs. It keeps the graph as traced before optimising
// and specialises that per new input types (re-inferred, optimised and memory-planned; in a
// KeyedCache shared by the copies of the node).
class ShapedGraph {
 public:
  ShapedGraph() = default;
  ShapedGraph(std::shared_ptr<const Graph> traced, std::shared_ptr<const Graph> raw,
              uint64_t first_traced_id);

  // Optimised, for the input types it was traced at.
  const std::shared_ptr<const Graph>& traced() const { return traced_; }
  // Before optimising (as traced).
  const Graph& raw() const { return *raw_; }
  const std::vector<TensorMeta>& inputs() const { return traced_->inputs; }
  // The optimised graph for inputs of these types: the traced one, else a specialisation
  // (an op that cannot take those shapes raises its own error).
  std::shared_ptr<const Graph> for_inputs(const std::vector<TensorMeta>& inputs) const;
  // The unoptimised graph at these input types (vjps are traced from primitive ops: fused
  // nodes keep the shapes they were fused at).
  std::shared_ptr<const Graph> raw_for(const std::vector<TensorMeta>& inputs) const;
  // Why this graph, traced at one shape of a function's None dimensions, cannot serve as
  // `other`, the same sub-graph traced at the next ("" when it can): the same nodes, wiring and
  // constants, and this one's shapes inferred at other's inputs are other's shapes.
  std::string probe_mismatch(const ShapedGraph& other) const;

 private:
  std::shared_ptr<const Graph> traced_, raw_;
  uint64_t first_traced_id_ = 0;
  using Cache = KeyedCache<std::shared_ptr<const Graph>>;
  std::shared_ptr<Cache> cache_ = std::make_shared<Cache>();
};

// "float32 (2, 3);int64 ();": a cache key for a list of types.
std::string key_of(const std::vector<TensorMeta>& metas);

// The base of the control-flow primitives: run through produce(), never as kernels.
class ControlFlowOp : public Primitive {
 public:
  Effects effects;
  Device device;
  uint64_t id = 0;

  void eval_cpu(std::span<const Tensor>, std::span<Tensor>) const override {
    TF_THROW(InternalError, name(), "runs through produce(), never as a kernel");
  }
  void eval_cuda(std::span<const Tensor>, std::span<Tensor>) const override {
    TF_THROW(InternalError, name(), "runs through produce(), never as a kernel");
  }
  // Never folded, merged or removed, and never captured into a CUDA graph (the predicate or the
  // loop's length is read on the host).
  bool has_side_effects() const override { return true; }
  std::vector<const void*> written_variables() const override { return effects.variables; }
  // The inputs stay where they are (the sub-graphs were traced for their devices).
  std::optional<Device> target_device() const override { return device; }
  uint32_t vjp_saves() const override { return kSaveEverything; }
  // attributes() without the id, and every sub-graph's nodes and constants without their
  // shapes: two traces (at two shapes of a function's None dimensions) that made the same
  // sub-graphs give the same text (probe_mismatch then compares their shapes).
  std::string trace_attributes() const override;

  // The sub-graphs it runs, each with a label ("true branch", "body").
  virtual std::vector<std::pair<std::string, const ShapedGraph*>> parts() const = 0;
  // Those sub-graphs as traced and optimised (graph dumps show them).
  std::vector<std::pair<std::string, const Graph*>> subgraphs() const;
  // A copy that keeps what its vjp needs when run without a tape (a loop's history), or null
  // when it always does.
  virtual std::shared_ptr<Primitive> with_history() const { return nullptr; }
  // attributes() less the id.
  virtual std::string structure() const = 0;
  std::string attributes() const override;
  // Why this node, traced at one shape of a function's None dimensions, cannot serve as
  // `other`, the same node traced at the next ("" when it can): tf::function's generic traces
  // (jit/function.h) ask: their trace_attributes() must be equal, and every part's shapes
  // inferred at the other's inputs must be the other's (ShapedGraph::probe_mismatch).
  std::string probe_mismatch(const ControlFlowOp& other) const;
};

const ControlFlowOp* as_control_flow(const Primitive& p);

Effects effects_of(const Graph& g);

// A traced branch, condition or body.
struct SubGraph {
  std::shared_ptr<Graph> graph;
  std::vector<Tensor> captures;  // the enclosing trace's tensors fed to the inputs after params
  uint64_t first_traced_id = 0;  // tensors made while tracing it have this id or a larger one
  // The trainable variables it read, as the handles the caller read them through (a mirrored
  // variable's handle, not the replica's copy that the read node holds): tapes key their
  // variable reads by those handles.
  std::vector<Variable> read_variables;
};

using TraceFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

// Traces fn on symbolic parameters of the given types into a new graph (finish_subgraphs
// completes it).
SubGraph trace_subgraph(const std::vector<TensorMeta>& params, const std::vector<Device>& devices,
                        const TraceFn& fn);
// Hoists the variable reads of the sub-graphs of one node (those of a variable that none of
// them writes: a loop's condition must read again what its body assigns), optimises them, and
// returns each as a ShapedGraph (that keeps it as it was before optimising too).
std::vector<ShapedGraph> finish_subgraphs(std::span<SubGraph* const> parts);
// A graph's nodes (name, trace_attributes, wiring, devices), constants (values) and, with
// `shapes`, its input and output types; without, their dtypes and ranks.
std::string graph_structure(const Graph& g, bool shapes);

// The tensors that the control-flow node takes after its leading inputs: each capture once.
class CaptureSet {
 public:
  explicit CaptureSet(int base) : base_(base) {}
  // The node input index of each of the sub-graph's captures.
  std::vector<int> add(const std::vector<Tensor>& captures);
  const std::vector<Tensor>& tensors() const { return tensors_; }

 private:
  int base_;
  std::vector<Tensor> tensors_;
  std::unordered_map<uint64_t, int> index_;
};

std::vector<TensorMeta> output_metas(const Graph& g);
std::vector<TensorMeta> metas_of(const std::vector<Tensor>& ts);

// A result that may be one of the node's inputs (a branch or a loop that returns what it was
// given) as a tensor of its own: tapes tell values apart by tensor, and an output that is its
// own input would take its cotangent twice.
Tensor fresh(const Tensor& t);
Tensor moved_to(const Tensor& t, Device device);

// The gradients of `sources` (graph inputs given by index) for one run of `g` on `args`,
// seeded with `seeds` (one per graph output; undefined: no seed). Unconnected ones are zeros.
// Loops inside run keeping their histories.
std::vector<Tensor> graph_vjp(const Graph& g, const std::vector<Tensor>& args,
                              const std::vector<int>& sources, const std::vector<Tensor>& seeds);

}  // namespace tapeflow::jit::cf
