#include "jit/passes.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <string_view>
#include <string>
#include <typeinfo>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/context.h"
#include "core/log.h"
#include "ops/dispatch.h"
#include "ops/random.h"

namespace tapeflow::jit {

using Ref = Graph::Ref;
using Source = Graph::Source;

namespace {

std::string ref_text(const Ref& r) {
  switch (r.source) {
    case Source::Input: return fmt::format("%arg{}", r.index);
    case Source::Constant: return fmt::format("%const{}", r.index);
    case Source::Node: return fmt::format("%{}:{}", r.index, r.output);
  }
  return "?";
}

void debug_validate([[maybe_unused]] const Graph& graph) {
#ifndef NDEBUG
  validate_graph(graph);
#endif
}

// Per node, the reference that replaces each of its outputs (empty: the node stays).
// Replacements always point to constants or to earlier nodes that stay, so one lookup suffices.
using Replacements = std::vector<std::vector<Ref>>;

Ref resolve(const Ref& r, const Replacements& repl) {
  if (r.source == Source::Node && !repl[r.index].empty()) return repl[r.index][r.output];
  return r;
}

}  // namespace

void remove_nodes(Graph& graph, const std::vector<char>& keep) {
  const size_t n = graph.nodes.size();
  std::vector<int> new_index(n, -1);
  int kept = 0;
  for (size_t i = 0; i < n; ++i)
    if (keep[i]) new_index[i] = kept++;
  if (static_cast<size_t>(kept) == n) return;
  auto renumber = [&](Ref& r) {
    if (r.source != Source::Node) return;
    TF_ASSERT(r.index >= 0 && static_cast<size_t>(r.index) < n && new_index[r.index] >= 0);
    r.index = new_index[r.index];
  };
  std::vector<Graph::Node> nodes;
  nodes.reserve(kept);
  for (size_t i = 0; i < n; ++i) {
    if (!keep[i]) continue;
    Graph::Node& node = graph.nodes[i];
    for (Ref& r : node.inputs) renumber(r);
    nodes.push_back(std::move(node));
  }
  for (Ref& r : graph.outputs) renumber(r);
  graph.nodes = std::move(nodes);
}

namespace {

// Drops the constants that no node and no graph output reads, renumbering constant references.
void remove_unused_constants(Graph& graph) {
  const size_t n = graph.constants.size();
  std::vector<char> used(n, 0);
  auto mark = [&](const Ref& r) {
    if (r.source != Source::Constant) return;
    TF_ASSERT(r.index >= 0 && static_cast<size_t>(r.index) < n);
    used[r.index] = 1;
  };
  for (const Graph::Node& node : graph.nodes)
    for (const Ref& r : node.inputs) mark(r);
  for (const Ref& r : graph.outputs) mark(r);

  size_t n_used = 0;
  for (char u : used) n_used += u ? 1 : 0;
  if (n_used == n) return;
  std::vector<int> new_index(n, -1);
  std::vector<Tensor> constants;
  constants.reserve(n_used);
  for (size_t i = 0; i < n; ++i) {
    if (!used[i]) continue;
    new_index[i] = static_cast<int>(constants.size());
    constants.push_back(std::move(graph.constants[i]));
  }
  auto renumber = [&](Ref& r) {
    if (r.source == Source::Constant) r.index = new_index[r.index];
  };
  for (Graph::Node& node : graph.nodes)
    for (Ref& r : node.inputs) renumber(r);
  for (Ref& r : graph.outputs) renumber(r);
  graph.constants = std::move(constants);
}

// While constants are folded: no enclosing trace turns the evaluation into nodes of another
// graph (a function traced inside another one), and no gradient tape records it.
class SuspendRecording {
 public:
  SuspendRecording() { trace_ = std::exchange(detail::thread_context().trace, nullptr); }
  ~SuspendRecording() { detail::thread_context().trace = trace_; }
  SuspendRecording(const SuspendRecording&) = delete;
  SuspendRecording& operator=(const SuspendRecording&) = delete;

 private:
  detail::TraceObserver* trace_ = nullptr;
  detail::PauseTapes pause_;
};

// A bucket key for common-subexpression elimination: op name, attributes, inputs and device
// (candidates in one bucket are then compared exactly).
std::string cse_key(const Graph::Node& node) {
  std::string key = node.prim->name();
  key += '\x1f';
  key += node.prim->attributes();
  key += '\x1f';
  for (const Ref& r : node.inputs) {
    key += ref_text(r);
    key += ',';
  }
  key += node.device.to_string();
  return key;
}

bool same_computation(const Graph::Node& a, const Graph::Node& b) {
  if (a.device != b.device || a.inputs != b.inputs || a.outputs.size() != b.outputs.size())
    return false;
  for (size_t k = 0; k < a.outputs.size(); ++k)
    if (a.outputs[k] != b.outputs[k]) return false;
  return a.prim->is_equivalent(*b.prim);
}

// The folded outputs have exactly the types and the device the trace recorded.
bool matches_trace(const std::vector<Tensor>& out, const Graph::Node& node) {
  if (out.size() != node.outputs.size()) return false;
  for (size_t k = 0; k < out.size(); ++k) {
    const Tensor& t = out[k];
    if (!t.defined() || t.is_symbolic() || t.placement() != node.device ||
        TensorMeta{t.shape(), t.dtype()} != node.outputs[k])
      return false;
  }
  return true;
}

}  // namespace

bool must_keep(const Primitive& prim) {
  // Random ops count as effects although their primitives do not declare any: a replay may
  // draw new numbers, so two draws are never one value and a draw is never a constant.
  return prim.has_side_effects() || typeid(prim) == typeid(prims::RandomNormal) ||
         typeid(prim) == typeid(prims::RandomUniform);
}

void validate_graph(const Graph& graph) {
  const int n_inputs = static_cast<int>(graph.inputs.size());
  const int n_constants = static_cast<int>(graph.constants.size());
  // `limit`: the number of nodes a reference may point to (those before the reader).
  auto check = [&](const Ref& r, int limit, const std::string& where) {
    switch (r.source) {
      case Source::Input:
        TF_CHECK_T(InternalError, r.index >= 0 && r.index < n_inputs && r.output == 0, "graph",
                   "{} reads {} (output {}) but the graph has {} inputs", where, ref_text(r),
                   r.output, n_inputs);
        return;
      case Source::Constant:
        TF_CHECK_T(InternalError, r.index >= 0 && r.index < n_constants && r.output == 0,
                   "graph", "{} reads {} (output {}) but the graph has {} constants", where,
                   ref_text(r), r.output, n_constants);
        return;
      case Source::Node: {
        TF_CHECK_T(InternalError, r.index >= 0 && r.index < limit, "graph",
                   "{} reads {}, which is not an earlier node", where, ref_text(r));
        const int n_out = static_cast<int>(graph.nodes[r.index].outputs.size());
        TF_CHECK_T(InternalError, r.output >= 0 && r.output < n_out, "graph",
                   "{} reads {} but node {} has {} outputs", where, ref_text(r), r.index, n_out);
        return;
      }
    }
    TF_THROW(InternalError, "graph", "{} holds a reference of unknown kind", where);
  };
  for (int i = 0; i < graph.num_nodes(); ++i) {
    const Graph::Node& node = graph.nodes[i];
    TF_CHECK_T(InternalError, node.prim != nullptr, "graph", "node {} has no primitive", i);
    TF_CHECK_T(InternalError,
               static_cast<int>(node.outputs.size()) == node.prim->num_outputs(), "graph",
               "node {} ({}) records {} output types for {} outputs", i, node.prim->name(),
               node.outputs.size(), node.prim->num_outputs());
    for (const Ref& r : node.inputs) check(r, i, fmt::format("node {} ({})", i, node.prim->name()));
  }
  for (size_t k = 0; k < graph.outputs.size(); ++k)
    check(graph.outputs[k], graph.num_nodes(), fmt::format("graph output {}", k));
}

void eliminate_dead_code(Graph& graph) {
  debug_validate(graph);
  const int n = graph.num_nodes();
  std::vector<char> live(n, 0);
  for (const Ref& r : graph.outputs)
    if (r.source == Source::Node) live[r.index] = 1;
  // References point backwards, so one backward sweep sees every reader before what it reads.
  for (int i = n - 1; i >= 0; --i) {
    const Graph::Node& node = graph.nodes[i];
    if (!live[i] && !must_keep(*node.prim)) continue;
    live[i] = 1;
    for (const Ref& r : node.inputs) {
      if (r.source != Source::Node) continue;
      TF_ASSERT(r.index >= 0 && r.index < i);
      live[r.index] = 1;
    }
  }
  remove_nodes(graph, live);
  remove_unused_constants(graph);
  debug_validate(graph);
}

void eliminate_common_subexpressions(Graph& graph) {
  debug_validate(graph);
  // Constant slots holding one tensor object: later slots map to the first.
  std::vector<int> constant_slot(graph.constants.size());
  {
    std::unordered_map<const detail::TensorImpl*, int> first;
    for (size_t i = 0; i < graph.constants.size(); ++i) {
      const detail::TensorImpl* impl = graph.constants[i].get();
      constant_slot[i] = impl ? first.emplace(impl, static_cast<int>(i)).first->second
                              : static_cast<int>(i);
    }
  }

  const int n = graph.num_nodes();
  Replacements repl(n);
  std::vector<char> keep(n, 1);
  std::unordered_map<std::string, std::vector<int>> buckets;
  auto canonical = [&](const Ref& r) {
    if (r.source == Source::Constant) {
      TF_ASSERT(r.index >= 0 && static_cast<size_t>(r.index) < constant_slot.size());
      return Ref{Source::Constant, constant_slot[r.index], r.output};
    }
    return resolve(r, repl);
  };
  for (int i = 0; i < n; ++i) {
    Graph::Node& node = graph.nodes[i];
    for (Ref& r : node.inputs) r = canonical(r);
    if (must_keep(*node.prim)) continue;
    std::vector<int>& candidates = buckets[cse_key(node)];
    int match = -1;
    for (int j : candidates)
      if (same_computation(graph.nodes[j], node)) {
        match = j;
        break;
      }
    if (match < 0) {
      candidates.push_back(i);
      continue;
    }
    keep[i] = 0;
    repl[i].resize(node.outputs.size());
    for (size_t k = 0; k < node.outputs.size(); ++k)
      repl[i][k] = Ref{Source::Node, match, static_cast<int>(k)};
  }
  for (Ref& r : graph.outputs) r = canonical(r);
  remove_nodes(graph, keep);
  debug_validate(graph);
}

void fold_constants(Graph& graph, int64_t max_elements, uint64_t first_traced_id) {
  debug_validate(graph);
  const int n = graph.num_nodes();
  Replacements repl(n);
  std::vector<char> keep(n, 1);
  SuspendRecording suspend;
  std::vector<Tensor> in;
  for (int i = 0; i < n; ++i) {
    Graph::Node& node = graph.nodes[i];
    for (Ref& r : node.inputs) r = resolve(r, repl);
    if (node.outputs.empty() || must_keep(*node.prim)) continue;

    bool foldable = true;
    for (const Ref& r : node.inputs) {
      if (r.source != Source::Constant) {
        foldable = false;
        break;
      }
      TF_ASSERT(r.index >= 0 && static_cast<size_t>(r.index) < graph.constants.size());
      const Tensor& c = graph.constants[r.index];
      foldable = c.defined() && !c.is_symbolic() && c.id() >= first_traced_id;
      if (!foldable) break;
    }
    // A shape query (element_count) folds once its inputs' shapes are known, whatever they
    // read.
    const bool shapes_only =
        !foldable && node.prim->reads_only_shapes() &&
        std::all_of(node.inputs.begin(), node.inputs.end(),
                    [&](const Ref& r) { return graph.meta_of(r).shape.num_elements() >= 0; });
    if (!foldable && !shapes_only) continue;
    int64_t elements = 0;
    bool small = true;
    for (const TensorMeta& m : node.outputs) {
      const int64_t e = m.shape.num_elements();  // -1: unknown size, never folded
      small = small && e >= 0 && e <= max_elements - elements;
      if (small) elements += e;
    }
    if (!small) continue;

    in.clear();
    for (const Ref& r : node.inputs) {
      if (shapes_only) {
        const TensorMeta m = graph.meta_of(r);
        in.push_back(detail::symbolic(m.shape, m.dtype, graph.device_of(r)));
      } else {
        in.push_back(graph.constants[r.index]);
      }
    }
    std::vector<Tensor> out;
    try {
      DeviceScope scope(node.device);
      if (shapes_only) {
        out.resize(node.outputs.size());
        if (!node.prim->produce(in, out, node.device)) continue;
      } else {
        out = detail::dispatch_multi(*node.prim, in);
      }
    } catch (const Error& e) {
      TF_LOG_DEBUG("fold_constants: node {} ({}) left in place: {}", i, node.prim->name(),
                   e.what());
      continue;
    }
    if (!matches_trace(out, node)) {
      TF_LOG_DEBUG("fold_constants: node {} ({}) left in place: its value does not have the "
                   "traced types or device",
                   i, node.prim->name());
      continue;
    }
    keep[i] = 0;
    repl[i].resize(out.size());
    for (size_t k = 0; k < out.size(); ++k) {
      repl[i][k] = Ref{Source::Constant, static_cast<int>(graph.constants.size()), 0};
      graph.constants.push_back(std::move(out[k]));
    }
  }
  for (Ref& r : graph.outputs) r = resolve(r, repl);
  remove_nodes(graph, keep);
  debug_validate(graph);
}

void optimize(Graph& graph, uint64_t first_traced_id) {
  fold_constants(graph, kDefaultFoldLimit, first_traced_id);
  eliminate_common_subexpressions(graph);
  eliminate_dead_code(graph);
}

std::optional<bool> env_switch(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string_view(v) != "0";
}

}  // namespace tapeflow::jit
