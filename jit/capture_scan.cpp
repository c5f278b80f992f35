// capture_blocker (jit/cuda_graph.h): which graphs a CUDA-graph capture may record, decided
// from the nodes alone so that every build compiles and tests it.
#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "autograd/variable.h"
#include "jit/control_flow.h"
#include "jit/cuda_graph.h"
#include "jit/graph.h"
#include "jit/passes.h"

namespace tapeflow::jit {

namespace {
void add_once(std::vector<const void*>& list, const void* handle) {
  if (std::find(list.begin(), list.end(), handle) == list.end()) list.push_back(handle);
}
}  // namespace

std::string capture_blocker(const Graph& graph, GraphVariables* vars) {
  GraphVariables found;
  for (const Graph::Node& n : graph.nodes) {
    const Primitive& p = *n.prim;
    // Control-flow nodes (jit/control_flow.h: the nodes that run sub-graphs) read their
    // predicate, index or iteration count on the host.
    if (!subgraphs_of(p).empty())
      return fmt::format("{} reads its predicate or iteration count on the host", p.name());
    if (const auto read = detail::read_variable_state(p)) {
      add_once(found.read, read.get());
      continue;
    }
    for (const void* h : p.written_variables()) add_once(found.written, h);
    if (!touches_variables(p) && p.has_side_effects())
      return fmt::format(
          "{} has side effects (printing, random numbers and collectives run node by node)",
          p.name());
  }
  if (vars) *vars = std::move(found);
  return {};
}

bool touches_variables(const Primitive& prim) {
  return detail::read_variable_state(prim) != nullptr || !prim.written_variables().empty();
}

bool cuda_graphs_enabled() {
  return env_switch("TAPEFLOW_CUDA_GRAPHS").value_or(true);
}

}  // namespace tapeflow::jit
