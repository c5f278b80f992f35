// Graph: what tf::function traces a callable into. A straight-line list of nodes in program
// order (C++ control flow was unrolled while tracing), each a primitive applied to values: graph
// inputs, captured constants, or outputs of earlier nodes. Replaying the nodes in order preserves
// every side effect's order (variable reads and writes, printing).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ops/primitive.h"

namespace tapeflow {

namespace jit {
class MemoryPlan;
class CudaGraphReplay;
}

class Graph {
 public:
  enum class Source : uint8_t { Input, Constant, Node };
  // A value: input k, constant k, or output `output` of node k.
  struct Ref {
    Source source = Source::Input;
    int index = 0;
    int output = 0;
    bool operator==(const Ref&) const = default;
  };
  struct Node {
    std::shared_ptr<Primitive> prim;
    std::vector<Ref> inputs;
    std::vector<TensorMeta> outputs;  // shapes and dtypes seen while tracing
    Device device;
  };

  std::vector<TensorMeta> inputs;      // the traced signature
  std::vector<Device> input_devices;
  std::vector<Tensor> constants;       // captured eager tensors (weak scalars, factories' results)
  std::vector<Node> nodes;
  std::vector<Ref> outputs;
  // For each node, the last node that reads its outputs (nodes.size() for graph outputs, -1 for
  // none): run() frees intermediates there. Filled by prepare() (call it again after editing
  // the nodes); run() derives it itself when its size does not match the nodes.
  std::vector<int> last_use;

  // Computes last_use and plans the intermediates' memory (jit/memory_plan.h) once the nodes
  // are final (tf::function calls it after the passes). `plan_memory` defaults to
  // TAPEFLOW_MEMORY_PLAN (on unless set to 0); false keeps the plan's statistics but replays
  // allocate every intermediate from the caching allocator.
  void prepare();
  void prepare(bool plan_memory);
  // `cuda_graph`: replay as one captured CUDA graph when the graph qualifies (jit/cuda_graph.h:
  // every node on one GPU, static shapes, no side effects but variable reads and writes);
  // tf::function asks for it with jit_compile.
  void prepare(bool plan_memory, bool cuda_graph);
  // The memory plan prepare() made (null before prepare()).
  const jit::MemoryPlan* memory_plan() const { return memory_plan_.get(); }
  // The CUDA-graph replay prepare() set up (null when not asked for or when the graph does not
  // qualify; cuda_graph_note() then says why).
  const jit::CudaGraphReplay* cuda_graph() const { return cuda_graph_.get(); }
  const std::string& cuda_graph_note() const { return cuda_graph_note_; }
  int num_nodes() const { return static_cast<int>(nodes.size()); }
  // The shape and dtype (as traced) and the device of a value.
  TensorMeta meta_of(const Ref& r) const;
  Device device_of(const Ref& r) const;
  // One line per node: "%2 = add(%arg0, %1) -> float32 (2, 3) on /device:CPU:0 [attrs]", then
  // (once prepared) the memory plan's summary line.
  std::string to_string() const;
  // Graphviz source.
  std::string to_dot() const;

  // Runs the nodes in order on `args` (shapes, dtypes and devices as traced). With a tape or an
  // enclosing trace active, every node goes through dispatch() so that it is recorded; otherwise
  // kernels run directly, skipping eager dispatch's placement and inference, on buffers in the
  // memory plan's arena for the planned intermediates. Thread-safe: several threads may run
  // one graph at once.
  std::vector<Tensor> run(std::span<const Tensor> args) const;

 private:
  friend class jit::CudaGraphReplay;
  // The node loop of run(). `capture`: the memory plan's arena is not used (a CUDA-graph
  // capture records the addresses of what the nodes allocate, and keeps the blocks they free).
  std::vector<Tensor> run_nodes(std::span<const Tensor> args, bool through_dispatch,
                                bool capture) const;

  // Shared by copies of the graph; prepare() replaces it (never edits it in place).
  std::shared_ptr<const jit::MemoryPlan> memory_plan_;
  std::shared_ptr<jit::CudaGraphReplay> cuda_graph_;
  std::string cuda_graph_note_;
};

}  // namespace tapeflow
