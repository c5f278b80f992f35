// Tracer: installed as the thread's TraceObserver while tf::function traces a callable. Every op
// dispatched meanwhile becomes a Graph node with symbolic outputs instead of running; eager tensors
// that reach an op are captured as graph constants. Internal to jit/.
#pragma once

#include <unordered_map>
#include <vector>

#include "jit/graph.h"
#include "ops/hooks.h"

namespace tapeflow::jit {

class Tracer final : public detail::TraceObserver {
 public:
  // Installs itself as the thread's trace (restoring the previous one in the destructor).
  explicit Tracer(Graph& graph);
  // A trace nested in another (a branch of tf::cond, a while_loop's body): a symbolic tensor of
  // an enclosing trace becomes one more graph input, and the tensor is appended to `captures`
  // (the caller feeds it to that input when the graph runs).
  Tracer(Graph& graph, std::vector<Tensor>* captures);
  ~Tracer() override;
  Tracer(const Tracer&) = delete;
  Tracer& operator=(const Tracer&) = delete;

  // A symbolic tensor standing for graph input number graph.inputs.size().
  Tensor add_input(const TensorMeta& meta, Device device);
  void add_node(const Primitive& prim, std::span<const Tensor> inputs,
                std::span<const TensorMeta> metas, Device device,
                std::span<Tensor> outputs) override;
  // Marks the callable's results as the graph outputs (captures eager ones as constants).
  void set_outputs(const std::vector<Tensor>& outputs);

 private:
  Graph::Ref ref_of(const Tensor& t, const char* op);

  Graph& graph_;
  detail::TraceObserver* previous_;
  std::unordered_map<uint64_t, Graph::Ref> refs_;  // tensor id -> value
  std::vector<Tensor>* captures_ = nullptr;
};

}  // namespace tapeflow::jit
