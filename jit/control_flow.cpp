// tf::cond, tf::switch_case and tf::while_loop (jit/control_flow.h). Traced, each branch,
// condition or body is traced into a Graph of its own (a nested jit::Tracer that turns tensors
// of the enclosing trace into extra graph inputs, its captures) and one primitive runs those
// graphs when the enclosing graph runs:
//   cond, switch_case  inputs (pred or index, captures...), outputs the branches' results;
//   while_loop  inputs (loop vars..., captures...), outputs (final vars..., iteration count,
//               one history per var: the vars each iteration started from, stacked; kept only
//               when a gradient may be asked for);
//   while_loop_grad  runs the body's vector-Jacobian product once per iteration, last first,
//               on the history (its own gradient runs that loop again under a tape).
// Each sub-graph is a ShapedGraph (jit/control_flow_internal.h): a function traced for None
// dimensions serves other shapes by specialising the sub-graphs per call shape, so the nodes
// infer their result types from their inputs.
// Gradients re-run a branch or the body (from the saved inputs) under a tape, so they need
// sub-graphs without random ops or assignments. Variables that a sub-graph reads but that no
// sub-graph of the node writes are read by the enclosing graph and passed in as captures: tapes
// watch them there, and gradients reach them through the control-flow node.
#include "jit/control_flow.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "autograd/tape.h"
#include "autograd/variable.h"
#include "core/check.h"
#include "core/context.h"
#include "core/device.h"
#include "jit/control_flow_internal.h"
#include "jit/graph.h"
#include "ops/binary.h"
#include "ops/copy.h"
#include "ops/dispatch.h"
#include "ops/factory.h"
#include "ops/movement.h"
#include "ops/traced_loop.h"

namespace tapeflow {

namespace {

using namespace jit::cf;  // NOLINT(google-build-using-namespace)
using detail::PauseTapes;

void check_predicate(const char* op, std::string_view what, const Tensor& p) {
  TF_CHECK_ARG(p.defined(), op, "{} is an undefined tensor", what);
  TF_CHECK_ARG(p.dtype() == bool_ && p.rank() == 0, op, "{} must be a scalar bool tensor, got {}",
               what, type_text(p));
}

// ---------------------------------------------------------------------------------------------
// cond and switch_case

// What picks the branch: cond's scalar bool, switch_case's scalar integer index.
void check_selector(const char* op, const Tensor& s) {
  if (std::string_view(op) == "cond") {
    check_predicate(op, "pred", s);
    return;
  }
  TF_CHECK_ARG(s.defined(), op, "branch_index is an undefined tensor");
  TF_CHECK_ARG((s.dtype() == int32 || s.dtype() == int64) && s.rank() == 0, op,
               "branch_index must be a scalar int32 or int64 tensor, got {}", type_text(s));
}

// The branch a selector picks among n: cond's true is 0 and false 1; switch_case's index picks
// its branch when in [0, indexed), else the last branch (the default).
size_t branch_of(const Tensor& s, size_t n, size_t indexed) {
  if (s.dtype() == bool_) return s.item<bool>() ? 0 : 1;
  const int64_t i = s.dtype() == int64 ? s.item<int64_t>() : s.item<int32_t>();
  return i >= 0 && static_cast<uint64_t>(i) < indexed ? static_cast<size_t>(i) : n - 1;
}

class CondOp final : public ControlFlowOp {
 public:
  const char* op = "cond";  // or "switch_case"
  std::vector<ShapedGraph> branches;
  std::vector<std::vector<int>> feeds;  // the node input that feeds each branch input
  size_t indexed = 2;                   // switch_case: the branches an index picks
  int n_inputs = 1;

  const char* name() const override { return op; }
  int num_outputs() const override {
    return static_cast<int>(branches[0].traced()->outputs.size());
  }
  std::shared_ptr<Primitive> clone() const override { return std::make_shared<CondOp>(*this); }
  std::string structure() const override {
    if (std::string_view(op) == "cond")
      return fmt::format("true={} nodes, false={} nodes", branches[0].traced()->num_nodes(),
                         branches[1].traced()->num_nodes());
    std::vector<int> sizes;
    for (const ShapedGraph& b : branches) sizes.push_back(b.traced()->num_nodes());
    return fmt::format("branches=[{}] nodes{}", fmt::join(sizes, ", "),
                       indexed < branches.size() ? ", the last is the default" : "");
  }
  std::string branch_name(size_t b) const {
    if (std::string_view(op) == "cond") return b == 0 ? "true branch" : "false branch";
    return b < indexed ? fmt::format("branch {}", b) : std::string("default branch");
  }
  std::vector<std::pair<std::string, const ShapedGraph*>> parts() const override {
    std::vector<std::pair<std::string, const ShapedGraph*>> out;
    for (size_t b = 0; b < branches.size(); ++b) out.emplace_back(branch_name(b), &branches[b]);
    return out;
  }

  // Branch b for the node's inputs `in` (another shape of a function's None dimensions gets a
  // specialisation of the traced branch).
  std::shared_ptr<const Graph> branch_for(size_t b, std::span<const Tensor> in) const {
    std::vector<TensorMeta> metas;
    for (int f : feeds[b])
      metas.push_back({in[static_cast<size_t>(f)].shape(), in[static_cast<size_t>(f)].dtype()});
    return branches[b].for_inputs(metas);
  }

  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override {
    TF_CHECK_T(InternalError, static_cast<int>(in.size()) == n_inputs, name(),
               "takes {} inputs, got {}", n_inputs, in.size());
    check_selector(op, in[0]);
    const std::vector<TensorMeta> first = output_metas(*branch_for(0, in));
    for (size_t b = 1; b < branches.size(); ++b) {
      const std::vector<TensorMeta> m = output_metas(*branch_for(b, in));
      for (size_t k = 0; k < m.size(); ++k)
        TF_CHECK_ARG(m[k] == first[k], name(),
                     "result {} is {} in the {} and {} in the {} at these shapes (every branch "
                     "gives the same dtypes and shapes)",
                     k, type_text(first[k]), branch_name(0), type_text(m[k]), branch_name(b));
    }
    for (size_t k = 0; k < out.size(); ++k) out[k] = first[k];
  }

  bool produce(std::span<const Tensor> in, std::span<Tensor> out, Device) const override {
    const size_t b = branch_of(in[0], branches.size(), indexed);
    std::vector<Tensor> args;
    for (int f : feeds[b]) args.push_back(in[static_cast<size_t>(f)]);
    const std::shared_ptr<const Graph> g = branch_for(b, in);
    std::vector<Tensor> result;
    {
      PauseTapes pause;  // tapes record this node, with its vjp
      result = g->run(args);
    }
    for (size_t k = 0; k < out.size(); ++k) out[k] = fresh(result[k]);
    return true;
  }

  std::vector<Tensor> vjp(std::span<const Tensor> primals, std::span<const Tensor> cotangents,
                          std::span<const int> argnums, std::span<const Tensor>) const override {
    TF_CHECK_T(UnimplementedError, effects.replay_blocker.empty(), name(),
               "the gradient re-runs the branch taken, which holds {} (random numbers and "
               "variable assignments would run again); take this gradient eagerly, or move "
               "the op out of the branch",
               effects.replay_blocker);
    std::vector<int> wanted;  // node inputs that get a gradient
    for (int a : argnums)
      if (a > 0 && is_floating(primals[static_cast<size_t>(a)].dtype())) wanted.push_back(a);
    const std::vector<Tensor> seeds(cotangents.begin(), cotangents.end());
    auto branch_grad = [&](size_t b) {
      const std::vector<int>& feed = feeds[b];
      std::vector<Tensor> args;
      for (int f : feed) args.push_back(primals[static_cast<size_t>(f)]);
      std::vector<int> sources;
      std::vector<size_t> slot;
      for (size_t w = 0; w < wanted.size(); ++w) {
        const auto it = std::find(feed.begin(), feed.end(), wanted[w]);
        if (it == feed.end()) continue;
        sources.push_back(static_cast<int>(it - feed.begin()));
        slot.push_back(w);
      }
      std::vector<Tensor> result(wanted.size());
      // Traced (a tape inside the function), the branch's primitive ops: the enclosing trace
      // may be specialised for other shapes, which fused nodes would not follow.
      const std::vector<TensorMeta> metas = metas_of(args);
      const std::shared_ptr<const Graph> g =
          tracing() ? branches[b].raw_for(metas) : branches[b].for_inputs(metas);
      const std::vector<Tensor> grads = graph_vjp(*g, args, sources, seeds);
      for (size_t j = 0; j < slot.size(); ++j) result[slot[j]] = grads[j];
      for (size_t w = 0; w < wanted.size(); ++w)
        if (!result[w].defined()) result[w] = zeros_like(primals[static_cast<size_t>(wanted[w])]);
      return result;
    };
    // The gradient picks its branch as the forward did.
    std::vector<detail::BranchFn> grad_fns;
    for (size_t b = 0; b < branches.size(); ++b)
      grad_fns.push_back([&branch_grad, b] { return branch_grad(b); });
    const std::vector<Tensor> grads = select_impl(op, primals[0], grad_fns, indexed);
    std::vector<Tensor> result;
    for (int a : argnums) {
      const auto it = std::find(wanted.begin(), wanted.end(), a);
      result.push_back(it == wanted.end() ? Tensor()
                                          : grads[static_cast<size_t>(it - wanted.begin())]);
    }
    return result;
  }

  // cond and switch_case: the branch that `selector` picks, run eagerly or traced into a node.
  static std::vector<Tensor> select_impl(const char* op, const Tensor& selector,
                                         const std::vector<detail::BranchFn>& fns, size_t indexed);
};

std::vector<Tensor> CondOp::select_impl(const char* op, const Tensor& selector,
                                        const std::vector<detail::BranchFn>& fns, size_t indexed) {
  check_selector(op, selector);
  if (!tracing() || !selector.is_symbolic()) return fns[branch_of(selector, fns.size(), indexed)]();

  const bool is_cond = std::string_view(op) == "cond";
  auto branch_name = [&](size_t b) {
    if (is_cond) return std::string(b == 0 ? "the true branch" : "the false branch");
    return b < indexed ? fmt::format("branch {}", b) : std::string("the default branch");
  };
  // Every result on one device: the scope's, else that of the first branch's first result.
  const auto& stack = detail::thread_context().device_stack;
  std::optional<Device> device;
  if (!stack.empty()) device = stack.back();
  std::vector<SubGraph> parts;
  for (size_t b = 0; b < fns.size(); ++b)
    parts.push_back(trace_subgraph({}, {}, [&](const std::vector<Tensor>&) {
      std::vector<Tensor> out = fns[b]();
      for (size_t k = 0; k < out.size(); ++k) {
        TF_CHECK_ARG(out[k].defined(), op, "{}'s result {} is an undefined tensor", branch_name(b),
                     k);
        if (!device) device = out[k].placement();
        out[k] = moved_to(out[k], *device);
      }
      return out;
    }));
  std::vector<SubGraph*> all;
  for (SubGraph& p : parts) all.push_back(&p);
  std::vector<ShapedGraph> finished = finish_subgraphs(all);
  const std::vector<TensorMeta> first = output_metas(*parts[0].graph);
  for (size_t b = 1; b < parts.size(); ++b) {
    const std::vector<TensorMeta> m = output_metas(*parts[b].graph);
    TF_CHECK_ARG(m.size() == first.size(), op, "{} returns {} tensors and {} {}", branch_name(0),
                 first.size(), branch_name(b), m.size());
    for (size_t k = 0; k < m.size(); ++k)
      TF_CHECK_ARG(m[k] == first[k], op,
                   "result {} is {} in {} and {} in {} (traced, every branch must give "
                   "the same dtypes and shapes)",
                   k, type_text(first[k]), branch_name(0), type_text(m[k]), branch_name(b));
  }

  auto node = std::make_shared<CondOp>();
  node->op = is_cond ? "cond" : "switch_case";
  node->indexed = indexed;
  CaptureSet captures(1);
  for (size_t b = 0; b < parts.size(); ++b) {
    node->feeds.push_back(captures.add(parts[b].captures));
    node->effects.merge(effects_of(*parts[b].graph));
    node->branches.push_back(std::move(finished[b]));
  }
  node->device = device.value_or(selector.placement());
  node->id = next_node_id();
  std::vector<Tensor> inputs{selector};
  inputs.insert(inputs.end(), captures.tensors().begin(), captures.tensors().end());
  node->n_inputs = static_cast<int>(inputs.size());
  return detail::dispatch_multi(*node, inputs);
}

// ---------------------------------------------------------------------------------------------
// while_loop

class WhileOp final : public ControlFlowOp {
 public:
  ShapedGraph cond, body;  // served for other shapes by specialising (a None batch)
  // The node input that feeds each graph input after the loop variables.
  std::vector<int> cond_feeds, body_feeds;
  std::vector<TensorMeta> var_metas;  // as traced
  int n_inputs = 0;
  int64_t maximum_iterations = -1;
  bool keep_history = false;  // a tape recorded the trace: its gradient reads the history
  // The body's gradient graphs, traced at the first vjp for each shape and shared by the copies
  // of this op (a tape around each call of a function asks for one at every step).
  std::shared_ptr<KeyedCache<ShapedGraph>> grad_cache = std::make_shared<KeyedCache<ShapedGraph>>();

  int n() const { return static_cast<int>(var_metas.size()); }
  const char* name() const override { return "while_loop"; }
  int num_outputs() const override { return 2 * n() + 1; }
  std::shared_ptr<Primitive> clone() const override { return std::make_shared<WhileOp>(*this); }
  std::string structure() const override {
    return fmt::format("cond={} nodes, body={} nodes, maximum_iterations={}",
                       cond.traced()->num_nodes(), body.traced()->num_nodes(), maximum_iterations);
  }
  std::vector<std::pair<std::string, const ShapedGraph*>> parts() const override {
    return {{"cond", &cond}, {"body", &body}};
  }
  std::shared_ptr<Primitive> with_history() const override {
    if (keep_history) return nullptr;
    auto copy = std::make_shared<WhileOp>(*this);
    copy->keep_history = true;
    return copy;
  }
  bool vjp_accepts_undefined_cotangents() const override { return true; }

  // The input types of a graph fed the loop variables and then `feeds`, for the node's inputs.
  std::vector<TensorMeta> graph_inputs(std::span<const Tensor> in,
                                       const std::vector<int>& feeds) const {
    std::vector<TensorMeta> metas;
    for (int k = 0; k < n(); ++k)
      metas.push_back({in[static_cast<size_t>(k)].shape(), in[static_cast<size_t>(k)].dtype()});
    for (int f : feeds)
      metas.push_back({in[static_cast<size_t>(f)].shape(), in[static_cast<size_t>(f)].dtype()});
    return metas;
  }
  // The condition and the body for the node's inputs: as traced, else specialised for the
  // shapes of this call (a function's None dimensions); the body keeps every variable's type.
  std::pair<std::shared_ptr<const Graph>, std::shared_ptr<const Graph>> graphs_for(
      std::span<const Tensor> in) const {
    const std::vector<TensorMeta> metas = graph_inputs(in, body_feeds);
    std::shared_ptr<const Graph> b = body.for_inputs(metas);
    if (b != body.traced()) {
      const std::vector<TensorMeta> outs = output_metas(*b);
      for (int k = 0; k < n(); ++k)
        TF_CHECK_ARG(outs[static_cast<size_t>(k)] == metas[static_cast<size_t>(k)], name(),
                     "loop variable {} enters the body as {} and leaves it as {} at these "
                     "shapes (traced, each loop variable keeps its dtype and shape: TF's shape "
                     "invariants)",
                     k, type_text(metas[static_cast<size_t>(k)]),
                     type_text(outs[static_cast<size_t>(k)]));
    }
    return {cond.for_inputs(graph_inputs(in, cond_feeds)), std::move(b)};
  }

  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override {
    TF_CHECK_T(InternalError, static_cast<int>(in.size()) == n_inputs, name(),
               "takes {} inputs, got {}", n_inputs, in.size());
    graphs_for(in);  // checks that the sub-graphs take these shapes
    for (int k = 0; k < n(); ++k) {
      const TensorMeta v{in[static_cast<size_t>(k)].shape(), in[static_cast<size_t>(k)].dtype()};
      out[static_cast<size_t>(k)] = v;
      out[static_cast<size_t>(n() + 1 + k)] = {with_leading(None, v.shape), v.dtype};
    }
    out[static_cast<size_t>(n())] = {TensorShape{}, int64};
  }

  std::vector<Tensor> args_for(const std::vector<Tensor>& vars, std::span<const Tensor> in,
                               const std::vector<int>& feeds) const {
    std::vector<Tensor> args = vars;
    for (int f : feeds) args.push_back(in[static_cast<size_t>(f)]);
    return args;
  }

  bool produce(std::span<const Tensor> in, std::span<Tensor> out, Device) const override {
    const bool keep = keep_history || !detail::thread_context().tapes.empty();
    PauseTapes pause;
    DeviceScope scope(device);
    const auto [cond_graph, body_graph] = graphs_for(in);
    std::vector<Tensor> vars(in.begin(), in.begin() + n());
    std::vector<std::vector<Tensor>> history(static_cast<size_t>(n()));
    int64_t count = 0;
    while (maximum_iterations < 0 || count < maximum_iterations) {
      const Tensor p = cond_graph->run(args_for(vars, in, cond_feeds))[0];
      if (!p.item<bool>()) break;
      if (keep)
        for (int k = 0; k < n(); ++k)
          history[static_cast<size_t>(k)].push_back(vars[static_cast<size_t>(k)]);
      vars = body_graph->run(args_for(vars, in, body_feeds));
      ++count;
    }
    for (int k = 0; k < n(); ++k) {
      const Tensor& v = in[static_cast<size_t>(k)];
      out[static_cast<size_t>(k)] = fresh(vars[static_cast<size_t>(k)]);
      out[static_cast<size_t>(n() + 1 + k)] = keep && count > 0
                                                  ? stack(history[static_cast<size_t>(k)])
                                                  : zeros(with_leading(0, v.shape()), v.dtype());
    }
    out[static_cast<size_t>(n())] = constant(std::vector<int64_t>{count}, TensorShape{});
    return true;
  }

  std::vector<Tensor> vjp(std::span<const Tensor> primals, std::span<const Tensor> cotangents,
                          std::span<const int> argnums,
                          std::span<const Tensor> outputs) const override;

 private:
  // The body's vjp traced from `fwd`, the body at the shapes of the run differentiated.
  ShapedGraph body_gradient_graph(const Graph& fwd, const std::vector<int>& float_vars,
                                  const std::vector<int>& float_caps) const;
};

// The gradient of a while_loop: the body's vjp on each iteration's saved loop variables, from
// the last iteration to the first.
//   inputs:  histories (n), iteration count, body captures (m), cotangents of the final floating
//            loop variables (f)
//   outputs: cotangents of the initial floating loop variables (f), of the floating captures
// The shapes come from the inputs (a function's None dimensions: the gradient graph is
// specialised for them).
class WhileGradOp final : public ControlFlowOp {
 public:
  // (vars n, captures m, cotangents f) -> (f, floating captures)
  ShapedGraph grad;
  int nv = 0, nm = 0;
  std::vector<int> float_vars, float_captures;  // indices into the vars and the captures
  // The inputs end with cotangents of the floating vars' histories (a gradient of the gradient
  // reaches the loop variables of every iteration through them).
  bool history_cotangents = false;

  int n() const { return nv; }
  int m() const { return nm; }
  size_t nf() const { return float_vars.size(); }
  size_t n_inputs() const {
    return static_cast<size_t>(n() + 1 + m()) + nf() * (history_cotangents ? 2 : 1);
  }
  const char* name() const override { return "while_loop_grad"; }
  int num_outputs() const override {
    return static_cast<int>(float_vars.size() + float_captures.size());
  }
  std::shared_ptr<Primitive> clone() const override { return std::make_shared<WhileGradOp>(*this); }
  std::string structure() const override {
    return fmt::format("grad={} nodes", grad.traced()->num_nodes());
  }
  std::vector<std::pair<std::string, const ShapedGraph*>> parts() const override {
    return {{"body gradient", &grad}};
  }
  // Loop variable k's type: a row of its history.
  static TensorMeta row_meta(const Tensor& history) {
    return {without_leading(history.shape()), history.dtype()};
  }
  static TensorMeta meta(const Tensor& t) { return {t.shape(), t.dtype()}; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override {
    TF_CHECK_T(InternalError, in.size() == n_inputs(), name(), "takes {} inputs, got {}",
               n_inputs(), in.size());
    size_t o = 0;
    for (int k : float_vars) out[o++] = row_meta(in[static_cast<size_t>(k)]);
    for (int j : float_captures) out[o++] = meta(in[static_cast<size_t>(n() + 1 + j)]);
  }

  // The backward loop. `recorded`: rows are taken with ops (a tape differentiates them: the
  // gradient of this gradient), else as views of the histories.
  std::vector<Tensor> backward(std::span<const Tensor> in, bool recorded) const {
    const int64_t count = in[static_cast<size_t>(n())].item<int64_t>();
    for (int k = 0; k < n(); ++k)
      TF_CHECK_T(InternalError, in[static_cast<size_t>(k)].shape()[0] == count, name(),
                 "loop variable {}'s history has {} entries for {} iterations (the loop ran "
                 "without a tape)",
                 k, in[static_cast<size_t>(k)].shape()[0], count);
    DeviceScope scope(device);
    auto row = [&](const Tensor& h, int64_t i) {
      if (recorded) return gather(h, constant(std::vector<int64_t>{i}, TensorShape{}), 0);
      // In place: the history is contiguous (stack made it).
      const TensorMeta r = row_meta(h);
      return detail::view(h, r.shape, static_cast<size_t>(i) * r.nbytes());
    };
    const size_t first_cot = static_cast<size_t>(n() + 1 + m());
    std::vector<Tensor> cots(in.begin() + static_cast<std::ptrdiff_t>(first_cot),
                             in.begin() + static_cast<std::ptrdiff_t>(first_cot + nf()));
    std::vector<TensorMeta> metas;
    for (int k = 0; k < n(); ++k) metas.push_back(row_meta(in[static_cast<size_t>(k)]));
    for (int j = 0; j < m(); ++j) metas.push_back(meta(in[static_cast<size_t>(n() + 1 + j)]));
    for (const Tensor& c : cots) metas.push_back(meta(c));
    const std::shared_ptr<const Graph> grad_graph = grad.for_inputs(metas);
    std::vector<Tensor> dcaps(float_captures.size());
    for (int64_t i = count - 1; i >= 0; --i) {
      std::vector<Tensor> args;
      for (int k = 0; k < n(); ++k) args.push_back(row(in[static_cast<size_t>(k)], i));
      for (int j = 0; j < m(); ++j) args.push_back(in[static_cast<size_t>(n() + 1 + j)]);
      for (const Tensor& c : cots) args.push_back(c);
      std::vector<Tensor> r = grad_graph->run(args);
      for (size_t k = 0; k < nf(); ++k) {
        cots[k] = std::move(r[k]);
        if (history_cotangents) cots[k] = add(cots[k], row(in[first_cot + nf() + k], i));
      }
      for (size_t j = 0; j < dcaps.size(); ++j)
        dcaps[j] = dcaps[j].defined() ? add(dcaps[j], r[nf() + j]) : std::move(r[nf() + j]);
    }
    std::vector<Tensor> out = cots;
    for (size_t j = 0; j < dcaps.size(); ++j) {
      const Tensor& c = in[static_cast<size_t>(n() + 1 + float_captures[j])];
      out.push_back(dcaps[j].defined() ? dcaps[j] : zeros(c.shape(), c.dtype()));
    }
    return out;
  }

  bool produce(std::span<const Tensor> in, std::span<Tensor> out, Device) const override {
    PauseTapes pause;
    std::vector<Tensor> result = backward(in, false);
    for (size_t k = 0; k < out.size(); ++k) out[k] = std::move(result[k]);
    return true;
  }

  // The gradient of the gradient: the backward loop once more, under a tape.
  std::vector<Tensor> vjp(std::span<const Tensor> primals, std::span<const Tensor> cotangents,
                          std::span<const int> argnums, std::span<const Tensor>) const override {
    TF_CHECK_T(UnimplementedError, !tracing(), name(),
               "second-order gradients through a traced while_loop with the tapes inside "
               "tf::function are not implemented; put the tapes around the call (the loop then "
               "differentiates its own gradient) or run eagerly");
    const std::vector<Tensor> in(primals.begin(), primals.end());
    GradientTape tape;
    std::vector<Tensor> sources;
    std::vector<size_t> slot;
    for (size_t w = 0; w < argnums.size(); ++w) {
      const Tensor& t = in[static_cast<size_t>(argnums[w])];
      if (!is_floating(t.dtype())) continue;
      tape.watch(t);
      sources.push_back(t);
      slot.push_back(w);
    }
    std::vector<Tensor> result(argnums.size());
    if (sources.empty()) return result;
    const std::vector<Tensor> outs = backward(in, true);
    std::vector<Tensor> targets, seeds;
    for (size_t k = 0; k < outs.size(); ++k) {
      if (!cotangents[k].defined()) continue;
      targets.push_back(outs[k]);
      seeds.push_back(cotangents[k]);
    }
    if (targets.empty()) return result;
    const std::vector<Tensor> grads =
        tape.gradient(targets, sources, seeds, UnconnectedGradients::ZERO);
    for (size_t j = 0; j < slot.size(); ++j) result[slot[j]] = grads[j];
    return result;
  }
};

// The body's vjp as a graph: (vars, captures, cotangents of the floating vars) -> (cotangents
// of the floating vars, gradients of the floating captures).
ShapedGraph WhileOp::body_gradient_graph(const Graph& fwd, const std::vector<int>& float_vars,
                                         const std::vector<int>& float_caps) const {
  const int nv = n();
  const int nb = static_cast<int>(body_feeds.size());
  std::vector<TensorMeta> params(fwd.inputs.begin(), fwd.inputs.end());
  std::vector<Device> devices(fwd.input_devices.begin(), fwd.input_devices.end());
  for (int k : float_vars) {
    params.push_back(fwd.inputs[static_cast<size_t>(k)]);
    devices.push_back(device);
  }
  SubGraph grad = trace_subgraph(params, devices, [&](const std::vector<Tensor>& a) {
    const std::vector<Tensor> args(a.begin(), a.begin() + nv + nb);
    std::vector<int> sources;
    for (int k : float_vars) sources.push_back(k);
    for (int j : float_caps) sources.push_back(nv + j);
    std::vector<Tensor> seeds(static_cast<size_t>(nv));
    for (size_t i = 0; i < float_vars.size(); ++i)
      seeds[static_cast<size_t>(float_vars[i])] = a[static_cast<size_t>(nv + nb) + i];
    std::vector<Tensor> g = graph_vjp(fwd, args, sources, seeds);
    for (Tensor& t : g) t = moved_to(t, device);
    return g;
  });
  std::vector<ShapedGraph> finished = finish_subgraphs(std::array<SubGraph*, 1>{&grad});
  TF_CHECK_T(InternalError, grad.captures.empty(), name(),
             "the body's gradient graph captured {} tensors", grad.captures.size());
  return std::move(finished[0]);
}

std::vector<Tensor> WhileOp::vjp(std::span<const Tensor> primals,
                                 std::span<const Tensor> cotangents, std::span<const int> argnums,
                                 std::span<const Tensor> outputs) const {
  TF_CHECK_T(UnimplementedError, effects.replay_blocker.empty(), name(),
             "the gradient re-runs the body, which holds {} (random numbers and variable "
             "assignments would run again); take this gradient eagerly, or move the op out of "
             "the loop",
             effects.replay_blocker);
  const int nv = n();
  const int nb = static_cast<int>(body_feeds.size());
  std::vector<int> float_vars, float_caps;
  for (int k = 0; k < nv; ++k)
    if (is_floating(var_metas[static_cast<size_t>(k)].dtype)) float_vars.push_back(k);
  for (int j = 0; j < nb; ++j)
    if (is_floating(body.inputs()[static_cast<size_t>(nv + j)].dtype)) float_caps.push_back(j);

  // The gradient graph for the shapes of this run (traced from the unoptimised body: fused
  // nodes keep the shapes they were fused at).
  const std::vector<TensorMeta> metas = graph_inputs(primals, body_feeds);
  ShapedGraph grad = grad_cache->get(key_of(metas), [&] {
    return body_gradient_graph(*body.raw_for(metas), float_vars, float_caps);
  });

  auto op = std::make_shared<WhileGradOp>();
  op->grad = std::move(grad);
  op->nv = nv;
  op->nm = nb;
  op->float_vars = float_vars;
  op->float_captures = float_caps;
  op->device = device;
  op->id = next_node_id();
  std::vector<Tensor> inputs;
  for (int k = 0; k < nv; ++k) inputs.push_back(outputs[static_cast<size_t>(nv + 1 + k)]);
  inputs.push_back(outputs[static_cast<size_t>(nv)]);
  for (int f : body_feeds) inputs.push_back(primals[static_cast<size_t>(f)]);
  for (int k : float_vars) {
    const Tensor& c = cotangents[static_cast<size_t>(k)];
    inputs.push_back(c.defined() ? moved_to(c, device)
                                 : zeros_like(outputs[static_cast<size_t>(k)]));
  }
  // Cotangents of the histories: only a gradient of this gradient gives them.
  for (int k : float_vars)
    op->history_cotangents =
        op->history_cotangents || cotangents[static_cast<size_t>(nv + 1 + k)].defined();
  if (op->history_cotangents)
    for (int k : float_vars) {
      const Tensor& c = cotangents[static_cast<size_t>(nv + 1 + k)];
      inputs.push_back(c.defined() ? moved_to(c, device)
                                   : zeros_like(outputs[static_cast<size_t>(nv + 1 + k)]));
    }
  const std::vector<Tensor> grads = detail::dispatch_multi(*op, inputs);

  std::vector<Tensor> result;
  for (int a : argnums) {
    Tensor g;
    if (a < nv) {
      const auto it = std::find(float_vars.begin(), float_vars.end(), a);
      if (it != float_vars.end()) g = grads[static_cast<size_t>(it - float_vars.begin())];
    } else if (is_floating(primals[static_cast<size_t>(a)].dtype())) {
      for (size_t j = 0; j < float_caps.size(); ++j)
        if (body_feeds[static_cast<size_t>(float_caps[j])] == a) g = grads[float_vars.size() + j];
      if (!g.defined()) g = zeros_like(primals[static_cast<size_t>(a)]);  // read by cond only
    }
    result.push_back(g);
  }
  return result;
}

}  // namespace

std::vector<std::pair<std::string, const Graph*>> jit::subgraphs_of(const Primitive& prim) {
  if (const cf::ControlFlowOp* c = cf::as_control_flow(prim)) return c->subgraphs();
  return {};
}

namespace {
// ops/ (expm's squarings) loops through tf::while_loop (ops/traced_loop.h).
const bool g_registered_for_ops = [] {
  detail::set_while_loop_hook([](const detail::OpsLoopCond& cond, const detail::OpsLoopBody& body,
                                 std::vector<Tensor> loop_vars) {
    return detail::while_loop_impl(cond, body, std::move(loop_vars), {});
  });
  return true;
}();
}  // namespace

namespace detail {

std::vector<Tensor> cond_impl(const Tensor& pred, const BranchFn& true_fn,
                              const BranchFn& false_fn) {
  return CondOp::select_impl("cond", pred, {true_fn, false_fn}, 2);
}

std::vector<Tensor> switch_case_impl(const Tensor& branch_index,
                                     const std::vector<BranchFn>& branch_fns,
                                     const BranchFn& default_fn) {
  TF_CHECK_ARG(!branch_fns.empty(), "switch_case", "branch_fns is empty");
  for (size_t b = 0; b < branch_fns.size(); ++b)
    TF_CHECK_ARG(static_cast<bool>(branch_fns[b]), "switch_case", "branch_fns[{}] is empty", b);
  std::vector<BranchFn> fns = branch_fns;
  if (default_fn) fns.push_back(default_fn);
  return CondOp::select_impl("switch_case", branch_index, fns, branch_fns.size());
}

std::vector<Tensor> while_loop_impl(const LoopCondFn& cond, const LoopBodyFn& body,
                                    std::vector<Tensor> loop_vars,
                                    const WhileLoopOptions& options) {
  const char* op_name = "while_loop";
  TF_CHECK_ARG(options.maximum_iterations >= -1, op_name,
               "maximum_iterations must be -1 (no limit) or at least 0, got {}",
               options.maximum_iterations);
  for (size_t k = 0; k < loop_vars.size(); ++k)
    TF_CHECK_ARG(loop_vars[k].defined(), op_name, "loop variable {} is an undefined tensor", k);
  auto check_body = [&](const std::vector<Tensor>& before, const std::vector<Tensor>& after,
                        bool shapes) {
    TF_CHECK_ARG(after.size() == before.size(), op_name,
                 "the body returns {} tensors for {} loop variables", after.size(), before.size());
    for (size_t k = 0; k < after.size(); ++k) {
      TF_CHECK_ARG(after[k].defined(), op_name, "the body's result {} is an undefined tensor", k);
      TF_CHECK_ARG(after[k].dtype() == before[k].dtype() &&
                       (!shapes || after[k].shape() == before[k].shape()),
                   op_name, "loop variable {} enters the body as {} and leaves it as {}{}", k,
                   type_text(before[k]), type_text(after[k]),
                   shapes ? " (traced, each loop variable keeps its dtype and shape: TF's shape "
                            "invariants)"
                          : " (each loop variable keeps its dtype)");
    }
  };

  if (!tracing()) {
    int64_t count = 0;
    while (options.maximum_iterations < 0 || count < options.maximum_iterations) {
      const Tensor p = cond(loop_vars);
      check_predicate(op_name, "cond's result", p);
      if (!p.item<bool>()) break;
      std::vector<Tensor> next = body(loop_vars);
      check_body(loop_vars, next, false);
      loop_vars = std::move(next);
      ++count;
    }
    return loop_vars;
  }

  // Traced: every loop variable on one device (the scope's, else the first variable's).
  const auto& stack = thread_context().device_stack;
  const Device device = !stack.empty()      ? stack.back()
                        : loop_vars.empty() ? default_device()
                                            : loop_vars[0].placement();
  for (Tensor& v : loop_vars) v = moved_to(v, device);
  const std::vector<TensorMeta> metas = metas_of(loop_vars);
  const std::vector<Device> devices(loop_vars.size(), device);
  SubGraph cond_g = trace_subgraph(metas, devices, [&](const std::vector<Tensor>& v) {
    const Tensor p = cond(v);
    check_predicate(op_name, "cond's result", p);
    return std::vector<Tensor>{p};
  });
  SubGraph body_g = trace_subgraph(metas, devices, [&](const std::vector<Tensor>& v) {
    std::vector<Tensor> next = body(v);
    check_body(v, next, true);
    for (Tensor& t : next) t = moved_to(t, device);
    return next;
  });
  std::vector<ShapedGraph> finished = finish_subgraphs(std::array<SubGraph*, 2>{&cond_g, &body_g});

  const int n = static_cast<int>(loop_vars.size());
  auto op = std::make_shared<WhileOp>();
  CaptureSet captures(n);
  op->cond_feeds = captures.add(cond_g.captures);
  op->body_feeds = captures.add(body_g.captures);
  op->cond = std::move(finished[0]);
  op->body = std::move(finished[1]);
  op->var_metas = metas;
  op->maximum_iterations = options.maximum_iterations;
  op->keep_history = !thread_context().tapes.empty();
  op->device = device;
  op->id = next_node_id();
  op->effects = effects_of(*cond_g.graph);
  op->effects.merge(effects_of(*body_g.graph));
  std::vector<Tensor> inputs = loop_vars;
  inputs.insert(inputs.end(), captures.tensors().begin(), captures.tensors().end());
  op->n_inputs = static_cast<int>(inputs.size());
  std::vector<Tensor> out = dispatch_multi(*op, inputs);
  out.resize(static_cast<size_t>(n));
  return out;
}

}  // namespace detail
}  // namespace tapeflow
