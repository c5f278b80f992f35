#include "jit/variable_update.h"

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "autograd/variable.h"
#include "core/check.h"
#include "core/log.h"
#include "jit/fusion.h"
#include "jit/passes.h"
#include "ops/dispatch.h"
#include "ops/linalg.h"

namespace tapeflow::jit {

namespace {

using Ref = Graph::Ref;
using Source = Graph::Source;

// What both fused updates are: a side effect on one variable (on its device), no outputs, run
// through produce() like assign_variable.
template <class Derived>
struct VariableUpdate : PrimitiveBase<Derived> {
  std::shared_ptr<Variable::State> state;
  explicit VariableUpdate(std::shared_ptr<Variable::State> s) : state(std::move(s)) {}
  int num_outputs() const override { return 0; }
  void infer(std::span<const Tensor>, std::span<TensorMeta>) const override {}
  void eval_cpu(std::span<const Tensor>, std::span<Tensor>) const override {
    TF_THROW(InternalError, this->name(), "runs through produce(), never as a kernel");
  }
  void eval_cuda(std::span<const Tensor>, std::span<Tensor>) const override {
    TF_THROW(InternalError, this->name(), "runs through produce(), never as a kernel");
  }
  bool has_side_effects() const override { return true; }
  std::vector<const void*> written_variables() const override { return {state.get()}; }
  std::optional<Device> target_device() const override {
    return Variable::from_state(state).placement();
  }
};

// variable = alpha op(a) op(b) + beta variable: alpha = +-scale (the next input, 0-d) or +-1,
// beta = decay (the last input, 0-d: a momentum) or 1.
struct VariableMatMulUpdate final : VariableUpdate<VariableMatMulUpdate> {
  bool transpose_a = false;
  bool transpose_b = false;
  bool negate = false;
  bool scaled = false;
  bool decayed = false;
  VariableMatMulUpdate(std::shared_ptr<Variable::State> s, bool ta, bool tb, bool neg, bool sc,
                       bool dec)
      : VariableUpdate(std::move(s)),
        transpose_a(ta),
        transpose_b(tb),
        negate(neg),
        scaled(sc),
        decayed(dec) {}

  const char* name() const override { return "variable_matmul_update"; }
  std::string attributes() const override {
    return fmt::format("variable={}, transpose_a={}, transpose_b={}, alpha={}{}, beta={}",
                       Variable::from_state(state).name(), transpose_a, transpose_b,
                       negate ? "-" : "", scaled ? "scale" : "1", decayed ? "decay" : "1");
  }

  bool produce(std::span<const Tensor> in, std::span<Tensor>, Device device) const override {
    const size_t n_in = 2 + (scaled ? 1 : 0) + (decayed ? 1 : 0);
    TF_CHECK_T(InternalError, in.size() == n_in, name(), "expects {} inputs, got {}", n_in,
               in.size());
    const Tensor& a = in[0];
    const Tensor& b = in[1];
    const DType dt = a.dtype();
    TF_CHECK_T(InternalError,
               a.shape().rank() == 2 && b.shape().rank() == 2 && b.dtype() == dt &&
                   (dt == float32 || dt == float64),
               name(), "expects two 2-D float32 or float64 operands, got {} {} and {} {}",
               a.shape().to_string(), dtype_name(dt), b.shape().to_string(), dtype_name(b.dtype()));
    const int64_t m = transpose_a ? a.shape()[1] : a.shape()[0];
    const int64_t k = transpose_a ? a.shape()[0] : a.shape()[1];
    const int64_t kb = transpose_b ? b.shape()[1] : b.shape()[0];
    const int64_t n = transpose_b ? b.shape()[0] : b.shape()[1];
    Variable v = Variable::from_state(state);
    TF_CHECK_ARG(k == kb && TensorShape({m, n}) == v.shape() && v.dtype() == dt, name(),
                 "'{}' has shape {} and dtype {}; the product of {} and {} (transpose_a={}, "
                 "transpose_b={}) does not match it",
                 v.name(), v.shape().to_string(), dtype_name(v.dtype()), a.shape().to_string(),
                 b.shape().to_string(), transpose_a, transpose_b);
    if (device.is_gpu()) {
      // cuBLAS reads the scale and the decay on the device.
      const Tensor none;
      v.update([&](Tensor& w) {
        detail::gemm_accumulate_device(transpose_a, transpose_b, a, b, negate ? -1.0 : 1.0,
                                       scaled ? in[2] : none, decayed ? in.back() : none, w);
      });
      return true;
    }
    auto scalar = [](const Tensor& t) {
      return t.dtype() == float64 ? t.item<double>() : static_cast<double>(t.item<float>());
    };
    double alpha = negate ? -1.0 : 1.0;
    if (scaled) alpha *= scalar(in[2]);
    const double beta = decayed ? scalar(in.back()) : 1.0;
    const int64_t lda = a.shape()[1];
    const int64_t ldb = b.shape()[1];
    v.update([&](Tensor& w) {
      if (dt == float32)
        detail::gemm_accumulate(transpose_a, transpose_b, m, n, k, static_cast<float>(alpha),
                                a.data<float>(), lda, b.data<float>(), ldb,
                                static_cast<float>(beta), w.data<float>(), n);
      else
        detail::gemm_accumulate(transpose_a, transpose_b, m, n, k, alpha, a.data<double>(), lda,
                                b.data<double>(), ldb, beta, w.data<double>(), n);
    });
    return true;
  }
};

// variable = inner(inputs with the variable's value inserted at each of `slots`), computed into
// the variable's buffer: a fused elementwise node reads each element before writing it, at the
// same index (and copes with its output aliasing those inputs, jit/fusion.cpp).
struct VariableElementwiseUpdate final : VariableUpdate<VariableElementwiseUpdate> {
  std::shared_ptr<Primitive> inner;
  std::vector<int> slots;  // ascending positions in inner's inputs
  VariableElementwiseUpdate(std::shared_ptr<Variable::State> s, std::shared_ptr<Primitive> op,
                            std::vector<int> k)
      : VariableUpdate(std::move(s)), inner(std::move(op)), slots(std::move(k)) {}

  const char* name() const override { return "variable_elementwise_update"; }
  std::string attributes() const override {
    std::string at;
    for (int k : slots) at += fmt::format("{}%{}", at.empty() ? "" : ", ", k);
    return fmt::format("variable={} at {}, {}: {}", Variable::from_state(state).name(), at,
                       inner->name(), inner->attributes());
  }

  bool produce(std::span<const Tensor> in, std::span<Tensor>, Device device) const override {
    std::vector<Tensor> args(in.begin(), in.end());
    Variable v = Variable::from_state(state);
    v.update([&](Tensor& w) {
      for (int k : slots) args.insert(args.begin() + k, w);
      std::vector<TensorMeta> meta(1);
      inner->infer(args, meta);
      TF_CHECK_T(InternalError, meta[0] == (TensorMeta{w.shape(), w.dtype()}), name(),
                 "{} gives {} {} for '{}' of shape {} and dtype {}", inner->name(),
                 meta[0].shape.to_string(), dtype_name(meta[0].dtype), v.name(),
                 w.shape().to_string(), dtype_name(w.dtype()));
      Tensor out[1] = {w};
      detail::run_kernel(*inner, device, args, out);
    });
    return true;
  }
};

// Whether a node in (from, to) writes `state` (assignments, fused updates, training ops).
bool written_between(const Graph& g, int from, int to,
                     const std::shared_ptr<Variable::State>& state) {
  for (int j = from + 1; j < to; ++j)
    for (const void* id : g.nodes[j].prim->written_variables())
      if (id == state.get()) return true;
  return false;
}

// Readers of each node's outputs; a graph output counts as one more.
std::vector<int> reader_counts(const Graph& g) {
  std::vector<int> uses(static_cast<size_t>(g.num_nodes()), 0);
  for (const Graph::Node& node : g.nodes)
    for (const Ref& r : node.inputs)
      if (r.source == Source::Node) ++uses[static_cast<size_t>(r.index)];
  for (const Ref& r : g.outputs)
    if (r.source == Source::Node) ++uses[static_cast<size_t>(r.index)];
  return uses;
}

// The variable an assign_variable node writes (null for every other node).
std::shared_ptr<Variable::State> assignment(const Graph::Node& node) {
  if (node.inputs.size() != 1) return nullptr;
  return detail::assign_variable_state(*node.prim);
}

// Offers every assign_variable node i to `rewrite(assign, i, state, uses, keep)` (state: the
// variable it writes; uses: each node's readers, reader_counts), which replaces the node and
// returns true, clearing in `keep` the nodes it absorbed, or returns false and changes nothing.
// Removes the absorbed nodes; returns how many assignments were rewritten.
template <class Rewrite>
int rewrite_assignments(Graph& g, Rewrite rewrite) {
  const std::vector<int> uses = reader_counts(g);
  std::vector<char> keep(g.nodes.size(), 1);
  int rewritten = 0;
  for (int i = 0; i < g.num_nodes(); ++i) {
    Graph::Node& assign = g.nodes[i];
    const std::shared_ptr<Variable::State> state = assignment(assign);
    if (state && rewrite(assign, i, state, uses, keep)) ++rewritten;
  }
  if (rewritten > 0) remove_nodes(g, keep);
  return rewritten;
}

}  // namespace

int fuse_variable_updates(Graph& g) {
  auto fuse = [&](Graph::Node& assign, int i, const std::shared_ptr<Variable::State>& state,
                  const std::vector<int>& uses, std::vector<char>& keep) {
    const Device dev = assign.device;
    // A node whose only reader is the update being matched, on the same device.
    auto sole = [&](const Ref& r) -> const Graph::Node* {
      if (r.source != Source::Node || !keep[r.index] || uses[r.index] != 1) return nullptr;
      const Graph::Node& node = g.nodes[r.index];
      return node.device == dev && node.outputs.size() == 1 ? &node : nullptr;
    };
    auto is = [](const Graph::Node* node, std::string_view op) {
      return node != nullptr && node->prim->name() == op;
    };

    const Ref sum_ref = assign.inputs[0];
    const Graph::Node* sum = sole(sum_ref);
    if (!is(sum, "subtract") && !is(sum, "add")) return false;
    const bool negate = is(sum, "subtract");
    const TensorMeta var_meta = sum->outputs[0];
    if (var_meta.dtype != float32 && var_meta.dtype != float64) return false;

    // A 0-d float operand on this device (a learning rate, a momentum).
    auto is_scale = [&](const Ref& r) {
      const TensorMeta m = g.meta_of(r);
      return m.shape.rank() == 0 && (m.dtype == float32 || m.dtype == float64) &&
             g.device_of(r) == dev;
    };
    auto is_read = [&](const Graph::Node* node) {
      return node != nullptr && detail::read_variable_state(*node->prim) == state;
    };
    // The read: subtract's first operand, either of add's; directly, or times a 0-d decay
    // (momentum: m = mu m - lr g).
    int read_slot = -1;
    Ref read_ref, decayed_ref;
    std::optional<Ref> decay_ref;
    for (int s = 0; s < (negate ? 1 : 2) && read_slot < 0; ++s) {
      const Graph::Node* node = sole(sum->inputs[s]);
      if (is_read(node)) {
        read_slot = s;
        read_ref = sum->inputs[s];
      } else if (is(node, "multiply") && node->outputs[0] == var_meta) {
        for (int t = 0; t < 2 && read_slot < 0; ++t)
          if (is_read(sole(node->inputs[t])) && is_scale(node->inputs[1 - t])) {
            read_slot = s;
            read_ref = node->inputs[t];
            decayed_ref = sum->inputs[s];
            decay_ref = node->inputs[1 - t];
          }
      }
    }
    if (read_slot < 0) return false;
    const Ref delta_ref = sum->inputs[1 - read_slot];

    // The delta: the product, or the product times a 0-d scale.
    Ref product_ref = delta_ref;
    std::optional<Ref> scale_ref;
    const Graph::Node* delta = sole(delta_ref);
    if (delta == nullptr || delta->outputs[0] != var_meta) return false;
    if (is(delta, "multiply")) {
      for (int s = 0; s < 2; ++s) {
        const Ref other = delta->inputs[1 - s];
        if (is(sole(delta->inputs[s]), "matmul") && is_scale(other)) {
          product_ref = delta->inputs[s];
          scale_ref = other;
          break;
        }
      }
      if (!scale_ref) return false;
    }
    const Graph::Node* product = sole(product_ref);
    const auto* mm = product ? dynamic_cast<const prims::MatMul*>(product->prim.get()) : nullptr;
    if (mm == nullptr || product->outputs[0] != var_meta || var_meta.shape.rank() != 2)
      return false;
    const TensorMeta am = g.meta_of(product->inputs[0]);
    const TensorMeta bm = g.meta_of(product->inputs[1]);
    if (am.shape.rank() != 2 || bm.shape.rank() != 2 || am.dtype != var_meta.dtype ||
        bm.dtype != var_meta.dtype)
      return false;

    // The fused node reads the variable where the assignment was: no other assignment of it
    // may come between.
    if (written_between(g, read_ref.index, i, state)) return false;

    std::vector<Ref> inputs = {product->inputs[0], product->inputs[1]};
    if (scale_ref) inputs.push_back(*scale_ref);
    if (decay_ref) inputs.push_back(*decay_ref);
    keep[read_ref.index] = 0;
    keep[sum_ref.index] = 0;
    keep[delta_ref.index] = 0;
    keep[product_ref.index] = 0;
    if (decay_ref) keep[decayed_ref.index] = 0;
    assign.prim =
        std::make_shared<VariableMatMulUpdate>(state, mm->transpose_a, mm->transpose_b, negate,
                                               scale_ref.has_value(), decay_ref.has_value());
    assign.inputs = std::move(inputs);
    return true;
  };
  const int fused = rewrite_assignments(g, fuse);
  TF_LOG_DEBUG("fuse_variable_updates: {} update(s) fused into their product", fused);
  return fused;
}

int update_variables_in_place(Graph& g, const FusionOptions& options) {
  auto rewrite = [&](Graph::Node& assign, int i, const std::shared_ptr<Variable::State>& state,
                     const std::vector<int>& uses, std::vector<char>& keep) {
    const Ref value_ref = assign.inputs[0];
    if (value_ref.source != Source::Node || uses[value_ref.index] != 1) return false;
    const Graph::Node& value = g.nodes[value_ref.index];
    if (value.device != assign.device || value.outputs.size() != 1) return false;
    const TensorMeta var_meta = value.outputs[0];
    if (var_meta.dtype != float32 && var_meta.dtype != float64) return false;
    // A read of the variable that only this update uses (with no assignment of the variable
    // between it and this one, so it holds the current value).
    auto is_current_read = [&](const Ref& r) {
      if (r.source != Source::Node || uses[r.index] != 1 || !keep[r.index]) return false;
      const Graph::Node& read = g.nodes[r.index];
      return detail::read_variable_state(*read.prim) == state && read.device == assign.device &&
             read.outputs[0] == var_meta && !written_between(g, r.index, i, state);
    };
    // The chain computing the new value: a fused node, or a single elementwise op that reads
    // the variable (v.assign_add(m)) as a one-step fused node.
    std::shared_ptr<Primitive> chain = value.prim;
    std::vector<Ref> chain_inputs = value.inputs;
    if (value.prim->name() != std::string_view("fused_elementwise")) {
      // A binary op with one operand the variable's read and the other not one element
      // broadcast over it (the in-place loops read it as a tensor of elements).
      if (value.inputs.size() != 2 ||
          is_current_read(value.inputs[0]) == is_current_read(value.inputs[1]))
        return false;
      const Ref& other = is_current_read(value.inputs[0]) ? value.inputs[1] : value.inputs[0];
      if (g.meta_of(other).shape.num_elements() == 1 && var_meta.shape.num_elements() > 1)
        return false;
      chain = fuse_single_op(g, value_ref.index, options, &chain_inputs);
      if (!chain) return false;
    }
    std::vector<int> slots;  // the chain's inputs that are the variable's reads
    for (size_t k = 0; k < chain_inputs.size(); ++k)
      if (is_current_read(chain_inputs[k])) slots.push_back(static_cast<int>(k));
    if (slots.empty()) return false;
    // On a GPU, the chain's kernels compiled to write over their inputs.
    std::shared_ptr<Primitive> inner;
    try {
      inner = fused_writing_over_inputs(chain, assign.device);
    } catch (const Error& e) {
      TF_LOG_WARN("an update of '{}' on {} is not computed in place: {}",
                  Variable::from_state(state).name(), assign.device.to_string(), e.what());
    }
    if (!inner) return false;

    std::vector<Ref> inputs;
    for (size_t k = 0; k < chain_inputs.size(); ++k) {
      if (std::find(slots.begin(), slots.end(), static_cast<int>(k)) != slots.end())
        keep[chain_inputs[k].index] = 0;
      else
        inputs.push_back(chain_inputs[k]);
    }
    keep[value_ref.index] = 0;
    assign.prim = std::make_shared<VariableElementwiseUpdate>(state, std::move(inner), slots);
    assign.inputs = std::move(inputs);
    return true;
  };
  const int rewritten = rewrite_assignments(g, rewrite);
  TF_LOG_DEBUG("update_variables_in_place: {} elementwise update(s) in the variable's buffer",
               rewritten);
  return rewritten;
}

}  // namespace tapeflow::jit
