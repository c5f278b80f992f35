#include "jit/graph.h"

#include <fmt/format.h>

#include <array>

#include "core/check.h"
#include "core/context.h"
#include "core/device.h"
#include "core/log.h"
#include "jit/control_flow.h"
#include "jit/cuda_graph.h"
#include "jit/memory_plan.h"
#include "jit/tracer.h"
#include "ops/dispatch.h"

namespace tapeflow {

namespace {

std::string ref_name(const Graph::Ref& r) {
  switch (r.source) {
    case Graph::Source::Input: return fmt::format("%arg{}", r.index);
    case Graph::Source::Constant: return fmt::format("%const{}", r.index);
    case Graph::Source::Node:
      return r.output == 0 ? fmt::format("%{}", r.index) : fmt::format("%{}:{}", r.index, r.output);
  }
  return "?";
}

std::string meta_text(const TensorMeta& m) {
  return fmt::format("{} {}", dtype_name(m.dtype), m.shape.to_string());
}

}  // namespace

std::string Graph::to_string() const {
  std::string s;
  for (size_t i = 0; i < inputs.size(); ++i)
    s += fmt::format("%arg{} : {} on {}\n", i, meta_text(inputs[i]),
                     i < input_devices.size() ? input_devices[i].to_string() : "?");
  for (size_t i = 0; i < constants.size(); ++i)
    s += fmt::format("%const{} : {} {}\n", i, dtype_name(constants[i].dtype()),
                     constants[i].shape().to_string());
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    std::string args;
    for (size_t k = 0; k < n.inputs.size(); ++k)
      args += (k ? ", " : "") + ref_name(n.inputs[k]);
    std::string outs;
    for (size_t k = 0; k < n.outputs.size(); ++k) outs += (k ? ", " : "") + meta_text(n.outputs[k]);
    const std::string attrs = n.prim->attributes();
    s += fmt::format("%{} = {}({}){}{} on {}{}\n", i, n.prim->name(), args,
                     outs.empty() ? "" : " -> ", outs, n.device.to_string(),
                     attrs.empty() ? "" : " {" + attrs + "}");
    // A control-flow node's sub-graphs, indented under it (their %argN: the node's inputs that
    // feed them).
    for (const auto& [label, sub] : jit::subgraphs_of(*n.prim)) {
      s += fmt::format("  %{} {}:\n", i, label);
      std::string text = sub->to_string();
      for (size_t at = 0; at < text.size();) {
        const size_t end = text.find('\n', at);
        s += "    " + text.substr(at, end - at) + "\n";
        at = end == std::string::npos ? text.size() : end + 1;
      }
    }
  }
  std::string outs;
  for (size_t k = 0; k < outputs.size(); ++k) outs += (k ? ", " : "") + ref_name(outputs[k]);
  s += "return " + outs + "\n";
  if (memory_plan_) s += memory_plan_->summary() + "\n";
  return s;
}

std::string Graph::to_dot() const {
  std::string s = "digraph tapeflow {\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\"];\n";
  for (size_t i = 0; i < inputs.size(); ++i)
    s += fmt::format("  arg{} [label=\"arg{}\\n{}\", shape=ellipse];\n", i, i, meta_text(inputs[i]));
  for (size_t i = 0; i < constants.size(); ++i)
    s += fmt::format("  const{} [label=\"const{}\\n{} {}\", shape=note];\n", i, i,
                     dtype_name(constants[i].dtype()), constants[i].shape().to_string());
  auto dot_name = [](const Ref& r) {
    switch (r.source) {
      case Source::Input: return fmt::format("arg{}", r.index);
      case Source::Constant: return fmt::format("const{}", r.index);
      case Source::Node: return fmt::format("n{}", r.index);
    }
    return std::string("?");
  };
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    std::string label = n.prim->name();
    for (const auto& m : n.outputs) label += "\\n" + meta_text(m);
    s += fmt::format("  n{} [label=\"{}\"{}];\n", i, label,
                     n.prim->has_side_effects() ? ", style=filled, fillcolor=lightyellow" : "");
    for (const Ref& r : n.inputs) s += fmt::format("  {} -> n{};\n", dot_name(r), i);
  }
  for (size_t k = 0; k < outputs.size(); ++k)
    s += fmt::format("  out{} [label=\"output {}\", shape=ellipse];\n  {} -> out{};\n", k, k,
                     dot_name(outputs[k]), k);
  return s + "}\n";
}

namespace {
std::vector<int> compute_last_use(const Graph& g) {
  std::vector<int> last(g.nodes.size(), -1);
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (const Graph::Ref& r : g.nodes[i].inputs)
      if (r.source == Graph::Source::Node) last[r.index] = static_cast<int>(i);
  for (const Graph::Ref& r : g.outputs)
    if (r.source == Graph::Source::Node) last[r.index] = static_cast<int>(g.nodes.size());
  return last;
}
}  // namespace

void Graph::prepare() { prepare(jit::memory_planning_enabled()); }

void Graph::prepare(bool plan_memory) { prepare(plan_memory, false); }

void Graph::prepare(bool plan_memory, bool cuda_graph) {
  last_use = compute_last_use(*this);
  memory_plan_ = jit::plan_memory(*this, plan_memory);
  cuda_graph_.reset();
  cuda_graph_note_.clear();
  if (cuda_graph) cuda_graph_ = jit::make_cuda_graph_replay(*this, &cuda_graph_note_);
}

std::vector<Tensor> Graph::run(std::span<const Tensor> args) const {
  TF_CHECK_ARG(args.size() == inputs.size(), "function", "the graph takes {} inputs, got {}",
               inputs.size(), args.size());
  // Kernels were chosen for the traced devices and dtypes: another device's buffer would be read
  // as this one's (tf::function keys its traces by both, so only hand-made calls can differ).
  for (size_t i = 0; i < args.size(); ++i) {
    TF_CHECK_ARG(args[i].defined(), "function", "input {} is an undefined tensor", i);
    const Device want = i < input_devices.size() ? input_devices[i] : args[i].placement();
    TF_CHECK_ARG(args[i].dtype() == inputs[i].dtype && args[i].placement() == want, "function",
                 "input {} is {} on {} but the graph was traced for {} on {}", i,
                 dtype_name(args[i].dtype()), args[i].device(),
                 dtype_name(inputs[i].dtype), want.to_string());
    // Buffers, kernels and the memory plan were sized for the traced shapes.
    TF_CHECK_ARG(args[i].shape() == inputs[i].shape, "function",
                 "input {} has shape {} but the graph was traced for shape {}{}", i,
                 args[i].shape().to_string(), inputs[i].shape.to_string(),
                 inputs[i].shape.is_fully_defined()
                     ? ""
                     : " (a graph with None dimensions runs through ConcreteFunction::call_flat, "
                       "which specialises it to each call's shapes)");
  }
  const auto& ctx = detail::thread_context();
  // Recorded replay: tapes (gradients through the call) and enclosing traces see every node.
  const bool through_dispatch = !ctx.tapes.empty() || ctx.trace != nullptr;
  if (!through_dispatch && cuda_graph_) {
    std::vector<Tensor> result;
    if (jit::run_cuda_graph(*cuda_graph_, *this, args, result)) return result;
  }
  return run_nodes(args, through_dispatch, /*capture=*/false);
}

TensorMeta Graph::meta_of(const Ref& r) const {
  switch (r.source) {
    case Source::Input: return inputs[r.index];
    case Source::Constant: return {constants[r.index].shape(), constants[r.index].dtype()};
    case Source::Node: break;
  }
  return nodes[r.index].outputs[r.output];
}

Device Graph::device_of(const Ref& r) const {
  switch (r.source) {
    case Source::Input: return input_devices[r.index];
    case Source::Constant: return constants[r.index].placement();
    case Source::Node: break;
  }
  return nodes[r.index].device;
}

std::vector<Tensor> Graph::run_nodes(std::span<const Tensor> args, bool through_dispatch,
                                     bool capture) const {
  // Intermediates are freed after their last reader, as in eager mode.
  std::vector<int> derived;
  if (last_use.size() != nodes.size()) derived = compute_last_use(*this);
  const std::vector<int>& last_use = derived.empty() ? this->last_use : derived;

  // Planned intermediates are views into one arena (recorded replays never use it: a tape
  // keeps what it records). A plan made for other nodes (edited since prepare()) is ignored.
  const jit::MemoryPlan* plan = memory_plan_.get();
  if (through_dispatch || capture || plan == nullptr || !plan->enabled() ||
      !plan->matches(*this))
    plan = nullptr;
  // Declared before every tensor of the replay, so that they are gone when it ends.
  const jit::ArenaLease arena = [&] {
    try {
      return jit::ArenaLease(plan);
    } catch (const ResourceExhaustedError& e) {
      TF_THROW(ResourceExhaustedError, "function",
               "the traced graph's arena for its planned intermediates ({} bytes): {}",
               plan->stats().arena_bytes, e.what());
    }
  }();

  std::vector<std::vector<Tensor>> values(nodes.size());
  auto value_of = [&](const Ref& r) -> const Tensor& {
    switch (r.source) {
      case Source::Input: return args[r.index];
      case Source::Constant: return constants[r.index];
      case Source::Node: break;
    }
    return values[r.index][r.output];
  };

  std::vector<Tensor> in;
  // tf.debugging.set_log_device_placement: graph nodes are logged as eager ops are (a replay
  // through dispatch logs there).
  const bool log_placement = !through_dispatch && debugging::log_device_placement();
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    in.clear();
    for (const Ref& r : n.inputs) in.push_back(value_of(r));
    if (log_placement)
      TF_LOG_INFO("Executing op {} in device {}", n.prim->name(), n.device.to_string());
    try {
      if (through_dispatch) {
        DeviceScope scope(n.device);
        values[i] = detail::dispatch_multi(*n.prim, in);
      } else {
        std::vector<Tensor>& out = values[i];
        out.resize(n.outputs.size());
        if (!n.prim->produce(in, out, n.device)) {
          for (size_t k = 0; k < out.size(); ++k) {
            const TensorMeta& m = n.outputs[k];
            const jit::MemoryPlan::Buffer* b =
                plan ? plan->buffer(static_cast<int>(i), static_cast<int>(k)) : nullptr;
            if (n.prim->is_view())
              out[k] = detail::view(in[0], m.shape);
            else if (b != nullptr && b->nbytes == m.nbytes())
              out[k] = arena.tensor(m, n.device, b->offset);
            else
              out[k] = detail::empty(m.shape, m.dtype, n.device);
          }
          detail::run_kernel(*n.prim, n.device, in, out);
        }
      }
    } catch (const ResourceExhaustedError& e) {
      // Say which node's outputs did not fit, as eager ops do (unless the op said it already).
      const std::string_view what = e.what();
      if (what.starts_with(fmt::format("[{}]", n.prim->name()))) throw;
      std::vector<std::string> outs;
      for (const TensorMeta& m : n.outputs)
        outs.push_back(fmt::format("{} {}", dtype_name(m.dtype), m.shape.to_string()));
      TF_THROW(ResourceExhaustedError, n.prim->name(),
               "node {} of the traced graph, with output{} {}: {}", i, outs.size() == 1 ? "" : "s",
               fmt::join(outs, ", "), what);
    }
    // Free inputs that no later node reads, and outputs that nothing reads (a variable
    // written in place must be the only holder of its buffer by then).
    for (const Ref& r : n.inputs)
      if (r.source == Source::Node && last_use[r.index] == static_cast<int>(i))
        values[r.index].clear();
    if (last_use[i] < 0) values[i].clear();
  }
  std::vector<Tensor> result;
  result.reserve(outputs.size());
  for (const Ref& r : outputs) result.push_back(value_of(r));
  return result;
}

// ---------------------------------------------------------------------------------------------

namespace jit {

Tracer::Tracer(Graph& graph) : graph_(graph) {
  auto& ctx = detail::thread_context();
  previous_ = ctx.trace;
  ctx.trace = this;
}

Tracer::Tracer(Graph& graph, std::vector<Tensor>* captures) : Tracer(graph) {
  captures_ = captures;
}

Tracer::~Tracer() { detail::thread_context().trace = previous_; }

Tensor Tracer::add_input(const TensorMeta& meta, Device device) {
  Tensor t = detail::symbolic(meta.shape, meta.dtype, device);
  refs_[t.id()] = Graph::Ref{Graph::Source::Input, static_cast<int>(graph_.inputs.size()), 0};
  graph_.inputs.push_back(meta);
  graph_.input_devices.push_back(device);
  return t;
}

Graph::Ref Tracer::ref_of(const Tensor& t, const char* op) {
  auto it = refs_.find(t.id());
  if (it != refs_.end()) return it->second;
  if (captures_ != nullptr && t.is_symbolic()) {
    const Graph::Ref r{Graph::Source::Input, static_cast<int>(graph_.inputs.size()), 0};
    graph_.inputs.push_back(TensorMeta{t.shape(), t.dtype()});
    graph_.input_devices.push_back(t.placement());
    captures_->push_back(t);
    refs_[t.id()] = r;
    return r;
  }
  TF_CHECK_T(FailedPreconditionError, !t.is_symbolic(), op,
             "an input is a symbolic tensor of another trace (a tensor from inside one traced "
             "function used in another, or kept from an earlier trace)");
  // An eager tensor used inside the function: captured as a constant of the graph.
  Graph::Ref r{Graph::Source::Constant, static_cast<int>(graph_.constants.size()), 0};
  graph_.constants.push_back(t);
  refs_[t.id()] = r;
  return r;
}

void Tracer::add_node(const Primitive& prim, std::span<const Tensor> inputs,
                      std::span<const TensorMeta> metas, Device device,
                      std::span<Tensor> outputs) {
  Graph::Node node;
  node.prim = prim.clone();
  node.inputs.reserve(inputs.size());
  for (const Tensor& t : inputs) node.inputs.push_back(ref_of(t, prim.name()));
  node.outputs.assign(metas.begin(), metas.end());
  node.device = device;
  const int index = static_cast<int>(graph_.nodes.size());
  for (size_t k = 0; k < metas.size(); ++k) {
    outputs[k] = detail::symbolic(metas[k].shape, metas[k].dtype, device);
    refs_[outputs[k].id()] = Graph::Ref{Graph::Source::Node, index, static_cast<int>(k)};
  }
  graph_.nodes.push_back(std::move(node));
}

void Tracer::set_outputs(const std::vector<Tensor>& outputs) {
  graph_.outputs.clear();
  for (const Tensor& t : outputs) {
    TF_CHECK_ARG(t.defined(), "function", "the traced function returned an undefined tensor");
    graph_.outputs.push_back(ref_of(t, "function"));
  }
}

}  // namespace jit
}  // namespace tapeflow
