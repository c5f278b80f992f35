// The pieces that the control-flow nodes share (jit/control_flow_internal.h).
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <string_view>

#include "autograd/tape.h"
#include "jit/control_flow_internal.h"
#include "jit/fusion.h"
#include "jit/memory_plan.h"
#include "jit/passes.h"
#include "jit/reinfer.h"
#include "jit/subgraph_trace.h"
#include "jit/tracer.h"
#include "ops/copy.h"
#include "ops/factory.h"

namespace tapeflow::jit::cf {

namespace {

using Ref = Graph::Ref;
using Source = Graph::Source;
using detail::PauseTapes;

std::atomic<uint64_t> g_next_id{1};
thread_local int t_subgraph_depth = 0;

template <class T>
void add_once(std::vector<T>& list, const T& v) {
  if (std::find(list.begin(), list.end(), v) == list.end()) list.push_back(v);
}

// The variables that a graph's nodes may write.
void add_written(const Graph& g, std::vector<const void*>& written) {
  for (const Graph::Node& n : g.nodes) {
    if (const ControlFlowOp* inner = as_control_flow(*n.prim)) {
      // A nested node lists the variables it reads (unhoisted ones) with those it writes.
      if (inner->effects.writes)
        for (const void* v : inner->effects.variables) add_once(written, v);
      continue;
    }
    for (const void* v : n.prim->written_variables()) add_once(written, v);
  }
}

// Replaces the reads of variables outside `written` by inputs, and reads them in the enclosing
// trace instead (appended to captures): a tape there watches the read, and the gradient
// reaches the variable through the control-flow node's vjp.
void hoist_variable_reads(SubGraph& s, const std::vector<const void*>& written) {
  Graph& g = *s.graph;
  std::vector<char> keep(g.nodes.size(), 1);
  std::vector<std::optional<Ref>> replaced(g.nodes.size());
  std::vector<std::shared_ptr<Variable::State>> hoisted;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const auto state = detail::read_variable_state(*g.nodes[i].prim);
    if (!state || std::find(written.begin(), written.end(), state.get()) != written.end()) continue;
    const Ref input{Source::Input, static_cast<int>(g.inputs.size()), 0};
    g.inputs.push_back(g.nodes[i].outputs[0]);
    g.input_devices.push_back(g.nodes[i].device);
    hoisted.push_back(state);
    replaced[i] = input;
    keep[i] = 0;
  }
  if (hoisted.empty()) return;
  auto rewrite = [&](Ref& r) {
    if (r.source == Source::Node && replaced[static_cast<size_t>(r.index)])
      r = *replaced[static_cast<size_t>(r.index)];
  };
  for (Graph::Node& n : g.nodes)
    for (Ref& r : n.inputs) rewrite(r);
  for (Ref& r : g.outputs) rewrite(r);
  jit::remove_nodes(g, keep);
  for (const auto& state : hoisted) {
    Variable handle = Variable::from_state(state);
    for (const Variable& v : s.read_variables)
      for (const Variable& copy : v.components())
        if (copy.handle_id() == state.get()) handle = v;
    s.captures.push_back(handle.read_value());
  }
}

void optimize_subgraph(Graph& g, uint64_t first_traced_id) {
  // No variable-update fusion: an update in place could change a snapshot that the enclosing
  // graph holds, which this graph cannot see.
  jit::optimize(g, first_traced_id);
  if (jit::fusion_enabled()) jit::fuse_elementwise(g, jit::FusionOptions{});
  g.prepare(jit::memory_planning_enabled(), false);
}

}  // namespace

uint64_t next_node_id() {
  return g_next_id++;
}

std::string type_text(const TensorMeta& m) {
  return fmt::format("{} {}", dtype_name(m.dtype), m.shape.to_string());
}
std::string type_text(const Tensor& t) {
  return type_text(TensorMeta{t.shape(), t.dtype()});
}

TensorShape with_leading(int64_t n, const TensorShape& s) {
  std::vector<int64_t> dims{n};
  for (int d = 0; d < s.rank(); ++d) dims.push_back(s[d]);
  return TensorShape(dims);
}

TensorShape without_leading(const TensorShape& s) {
  std::vector<int64_t> dims;
  for (int d = 1; d < s.rank(); ++d) dims.push_back(s[d]);
  return TensorShape(dims);
}

void Effects::merge(const Effects& other) {
  for (const void* v : other.variables) add_once(variables, v);
  writes = writes || other.writes;
  if (replay_blocker.empty()) replay_blocker = other.replay_blocker;
}

std::string ControlFlowOp::attributes() const {
  return fmt::format("{}, id={}", structure(), id);
}

std::string ControlFlowOp::trace_attributes() const {
  std::string s = structure();
  for (const auto& [label, g] : parts())
    s += fmt::format(" {}{{{}}}", label, graph_structure(g->raw(), false));
  return s;
}

std::vector<std::pair<std::string, const Graph*>> ControlFlowOp::subgraphs() const {
  std::vector<std::pair<std::string, const Graph*>> out;
  for (const auto& [label, g] : parts()) out.emplace_back(label, g->traced().get());
  return out;
}

std::string ControlFlowOp::probe_mismatch(const ControlFlowOp& other) const {
  const auto mine = parts();
  const auto theirs = other.parts();
  if (structure() != other.structure() || mine.size() != theirs.size())
    return "runs other sub-graphs";
  for (size_t i = 0; i < mine.size(); ++i) {
    const std::string why = mine[i].second->probe_mismatch(*theirs[i].second);
    if (!why.empty()) return fmt::format("{} (its {})", why, mine[i].first);
  }
  return "";
}

std::string graph_structure(const Graph& g, bool shapes) {
  std::string s;
  auto ref = [](const Ref& r) {
    const char* kind = r.source == Source::Input ? "in" : r.source == Source::Constant ? "c" : "%";
    return fmt::format("{}{}:{}", kind, r.index, r.output);
  };
  auto type = [&](const TensorMeta& m) {
    return shapes ? type_text(m) : fmt::format("{} rank {}", dtype_name(m.dtype), m.shape.rank());
  };
  for (const TensorMeta& m : g.inputs) s += type(m) + ";";
  for (const Tensor& c : g.constants) {
    const Tensor host = c.placement().is_cpu() ? c : detail::copy_to(c, Device{});
    s += fmt::format(
        "c {} {:02x};", type_text(host),
        fmt::join(std::span(static_cast<const uint8_t*>(host.raw_data()), host.nbytes()), ""));
  }
  for (const Graph::Node& n : g.nodes) {
    s += fmt::format("{}[{}](", n.prim->name(), n.prim->trace_attributes());
    for (const Ref& r : n.inputs) s += ref(r) + ",";
    s += ")->";
    for (const TensorMeta& m : n.outputs) s += type(m) + ",";
    s += n.device.to_string() + ";";
  }
  for (const Ref& r : g.outputs) s += ref(r) + ",";
  return s;
}

const ControlFlowOp* as_control_flow(const Primitive& p) {
  return dynamic_cast<const ControlFlowOp*>(&p);
}

Effects effects_of(const Graph& g) {
  Effects e;
  for (const Graph::Node& n : g.nodes) {
    const Primitive& p = *n.prim;
    if (const auto state = detail::read_variable_state(p)) {
      add_once(e.variables, static_cast<const void*>(state.get()));
      continue;
    }
    if (const ControlFlowOp* inner = as_control_flow(p)) {
      e.merge(inner->effects);
      continue;
    }
    const std::vector<const void*> written = p.written_variables();
    for (const void* v : written) add_once(e.variables, v);
    if (!written.empty()) e.writes = true;
    const bool repeats =
        !written.empty() || (jit::must_keep(p) && std::string_view(p.name()) != "print");
    if (repeats && e.replay_blocker.empty()) e.replay_blocker = p.name();
  }
  return e;
}

SubGraph trace_subgraph(const std::vector<TensorMeta>& params, const std::vector<Device>& devices,
                        const TraceFn& fn) {
  SubGraph s;
  s.graph = std::make_shared<Graph>();
  const uint64_t first_traced_id = detail::next_tensor_id();
  {
    // The enclosing tapes record the control-flow node, not the ops inside it.
    PauseTapes pause;
    ++t_subgraph_depth;
    struct Leave {
      ~Leave() { --t_subgraph_depth; }
    } leave;
    detail::VariableReadWatcher reads;
    jit::Tracer tracer(*s.graph, &s.captures);
    std::vector<Tensor> args;
    args.reserve(params.size());
    for (size_t i = 0; i < params.size(); ++i)
      args.push_back(tracer.add_input(params[i], devices[i]));
    tracer.set_outputs(fn(args));
    s.read_variables = reads.read();
  }
  s.first_traced_id = first_traced_id;
  return s;
}

std::vector<ShapedGraph> finish_subgraphs(std::span<SubGraph* const> parts) {
  std::vector<const void*> written;
  for (SubGraph* s : parts) add_written(*s->graph, written);
  std::vector<ShapedGraph> out;
  for (SubGraph* s : parts) {
    hoist_variable_reads(*s, written);
    auto raw = std::make_shared<const Graph>(*s->graph);
    optimize_subgraph(*s->graph, s->first_traced_id);
    out.emplace_back(s->graph, std::move(raw), s->first_traced_id);
  }
  return out;
}

std::string key_of(const std::vector<TensorMeta>& metas) {
  std::string key;
  for (const TensorMeta& m : metas) key += type_text(m) + ";";
  return key;
}

ShapedGraph::ShapedGraph(std::shared_ptr<const Graph> traced, std::shared_ptr<const Graph> raw,
                         uint64_t first_traced_id)
    : traced_(std::move(traced)), raw_(std::move(raw)), first_traced_id_(first_traced_id) {}

std::shared_ptr<const Graph> ShapedGraph::for_inputs(const std::vector<TensorMeta>& inputs) const {
  if (inputs == traced_->inputs) return traced_;
  return cache_->get(key_of(inputs), [&]() -> std::shared_ptr<const Graph> {
    auto g = std::make_shared<Graph>(*raw_);
    jit::reinfer(*g, inputs);
    // With None dimensions left (a generic graph's display) it is only inferred, never run.
    bool known = true;
    for (const TensorMeta& m : inputs) known = known && m.shape.is_fully_defined();
    if (known) optimize_subgraph(*g, first_traced_id_);
    return g;
  });
}

std::shared_ptr<const Graph> ShapedGraph::raw_for(const std::vector<TensorMeta>& inputs) const {
  if (inputs == raw_->inputs) return raw_;
  return cache_->get("raw;" + key_of(inputs), [&]() -> std::shared_ptr<const Graph> {
    auto g = std::make_shared<Graph>(*raw_);
    jit::reinfer(*g, inputs);
    return g;
  });
}

std::string ShapedGraph::probe_mismatch(const ShapedGraph& other) const {
  if (graph_structure(*raw_, false) != graph_structure(*other.raw_, false))
    return "runs other sub-graphs";
  Graph check = *raw_;
  try {
    jit::reinfer(check, other.raw_->inputs);
  } catch (const std::exception& e) {
    return fmt::format("cannot infer its sub-graph's shapes ({})", e.what());
  }
  for (size_t i = 0; i < check.nodes.size(); ++i)
    for (size_t k = 0; k < check.nodes[i].outputs.size(); ++k)
      if (!(check.nodes[i].outputs[k] == other.raw_->nodes[i].outputs[k]))
        return fmt::format("infers {} for its sub-graph's op %{} ({}), which traces {}",
                           type_text(check.nodes[i].outputs[k]), i, check.nodes[i].prim->name(),
                           type_text(other.raw_->nodes[i].outputs[k]));
  return "";
}

std::vector<int> CaptureSet::add(const std::vector<Tensor>& captures) {
  std::vector<int> feeds;
  for (const Tensor& t : captures) {
    auto [it, fresh] = index_.try_emplace(t.id(), base_ + static_cast<int>(tensors_.size()));
    if (fresh) tensors_.push_back(t);
    feeds.push_back(it->second);
  }
  return feeds;
}

std::vector<TensorMeta> output_metas(const Graph& g) {
  std::vector<TensorMeta> m;
  for (const Ref& r : g.outputs) m.push_back(g.meta_of(r));
  return m;
}

std::vector<TensorMeta> metas_of(const std::vector<Tensor>& ts) {
  std::vector<TensorMeta> m;
  for (const Tensor& t : ts) m.push_back({t.shape(), t.dtype()});
  return m;
}

Tensor fresh(const Tensor& t) {
  return detail::view(t, t.shape());
}

Tensor moved_to(const Tensor& t, Device device) {
  return t.placement() == device ? t : detail::copy_to(t, device);
}

std::vector<Tensor> graph_vjp(const Graph& g, const std::vector<Tensor>& args,
                              const std::vector<int>& sources, const std::vector<Tensor>& seeds) {
  std::vector<Tensor> result(sources.size());
  if (sources.empty()) return result;
  GradientTape tape;
  std::vector<Tensor> watched;
  for (int k : sources) {
    tape.watch(args[static_cast<size_t>(k)]);
    watched.push_back(args[static_cast<size_t>(k)]);
  }
  // Loops inside run again under this tape, traced or not: their vjps read their histories.
  Graph copy;
  const Graph* run = &g;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ControlFlowOp* node = as_control_flow(*g.nodes[i].prim);
    std::shared_ptr<Primitive> keeping = node != nullptr ? node->with_history() : nullptr;
    if (!keeping) continue;
    if (run == &g) {
      copy = g;
      run = &copy;
    }
    copy.nodes[i].prim = std::move(keeping);
  }
  const std::vector<Tensor> outs = run->run(args);
  std::vector<Tensor> targets, grads;
  for (size_t k = 0; k < outs.size(); ++k) {
    if (!is_floating(outs[k].dtype()) || !seeds[k].defined()) continue;
    targets.push_back(outs[k]);
    grads.push_back(seeds[k]);
  }
  if (targets.empty()) {
    for (size_t j = 0; j < sources.size(); ++j) result[j] = zeros_like(watched[j]);
    return result;
  }
  // Unconnected ones as zeros like the argument (inside a trace with None dimensions, zeros
  // whose shape is read when the graph runs, not a constant of the traced shape).
  result = tape.gradient(targets, watched, grads, UnconnectedGradients::NONE);
  for (size_t j = 0; j < sources.size(); ++j)
    if (!result[j].defined()) result[j] = zeros_like(watched[j]);
  return result;
}

}  // namespace tapeflow::jit::cf

bool tapeflow::jit::tracing_subgraph() {
  return jit::cf::t_subgraph_depth > 0;
}
