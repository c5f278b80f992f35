// CUDA-graph replay of traced graphs (internal). A prepared graph whose nodes all run on one GPU,
// with static shapes and no side effects other than variable reads and writes (no printing,
// stateful random draws or collectives), replays as one captured CUDA graph: one launch instead
// of one per node.
//
// The first replay runs node by node (kernels load, library handles and algorithms are chosen
// outside any capture). The second captures: the nodes are recorded on the device's capture
// stream (cuda::CaptureScope) over static input buffers, and every value they make stays
// allocated for the life of the graph, as do the scratch buffers the nodes free while
// capturing (cuda::DeferredFrees), so the captured kernels' addresses stay valid and no other
// tensor is handed memory that a replay writes. Variables are read and written in their own
// buffers: while capturing, writes stay in place (detail::VariableWritesInPlaceScope; a write
// to a buffer that another value still holds fails the capture), a buffer the graph writes that
// a snapshot shares is first copied for the variable, and every call checks that each variable
// still holds the buffer recorded (captured again when one moved). Each replay then copies the
// arguments into the static inputs, launches the graph on the device's stream and copies the
// outputs into fresh tensors (three kinds of work on one stream, in order; outputs that are
// reads of variables are copied from the variables' buffers). A node that cannot be captured
// (one that waits for the device or reads values on the host) makes the capture fail: that is
// logged once and the graph replays node by node from then on. Builds without CUDA have the same
// interface and never capture.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace tapeflow {
class Graph;
class Primitive;
}

namespace tapeflow::jit {

class CudaGraphReplay;

// The variables the nodes of a graph read and write, by Variable::handle_id() (each once, in
// the order the nodes first touch them).
struct GraphVariables {
  std::vector<const void*> read;     // read_variable nodes
  std::vector<const void*> written;  // assignments and updates (Primitive::written_variables)
};

// Why the nodes of `graph` cannot be recorded into one CUDA graph whatever device they run on,
// or an empty string when they can: every side effect must be a variable read or write
// (printing, stateful random ops and collectives must run at every call, on the host's terms).
// Fills `vars` with the variables the nodes touch. Compiled in every build (tests check it on
// CPU graphs); make_cuda_graph_replay adds the device and shape conditions.
std::string capture_blocker(const Graph& graph, GraphVariables* vars);

// Whether a node reads or writes a variable (read_variable, assignments, updates): the side
// effects a capture may record.
bool touches_variables(const Primitive& prim);

// TAPEFLOW_CUDA_GRAPHS=0 keeps traced graphs from being captured (jit_compile's other effects
// stay); read each time a function is optimised. On unless set to 0.
bool cuda_graphs_enabled();

// A replay for `graph`, or null (with the reason in `why_not`) when it does not qualify.
std::shared_ptr<CudaGraphReplay> make_cuda_graph_replay(const Graph& graph,
                                                        std::string* why_not = nullptr);

// Runs `graph` through its captured CUDA graph (capturing it first). False when this call must
// replay node by node instead: another thread is replaying it, the arguments' shapes differ
// from the traced ones, or the capture failed.
bool run_cuda_graph(CudaGraphReplay& replay, const Graph& graph, std::span<const Tensor> args,
                    std::vector<Tensor>& outputs);

struct CudaGraphStats {
  bool captured = false;     // a CUDA graph was captured and instantiated
  bool failed = false;       // capture failed (or was given up); `failure` says why
  int captures = 0;          // captures made (again after a variable's buffer moved)
  int64_t launches = 0;      // replays that launched it
  int num_kernel_nodes = 0;  // nodes of the captured graph
  size_t kept_bytes = 0;     // device memory its static buffers hold
  std::string failure;
};
CudaGraphStats cuda_graph_stats(const CudaGraphReplay& replay);

}  // namespace tapeflow::jit
