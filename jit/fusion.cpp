#include "jit/fusion.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "autograd/tape.h"
#include "core/check.h"
#include "core/parallel.h"
#include "ops/activation.h"
#include "ops/binary.h"
#include "ops/cpu/fusion_kernels.h"
#include "ops/dispatch.h"
#include "ops/reduce.h"

namespace tapeflow {

namespace {

constexpr int64_t kTile = 1024;    // floats per tile and step: 4 KiB, several stay in L1/L2
constexpr int64_t kGrain = 16384;  // elements per thread below which the pool is not used

struct FusedElementwise final : PrimitiveBase<FusedElementwise> {
  // Operand o of a step: o < num_inputs is a node input, else the result of step o - num_inputs.
  struct Step {
    std::shared_ptr<Primitive> prim;
    int a = -1, b = -1;
    cpu::UnaryRangeF32 unary = nullptr;
    cpu::BinaryRangesF32 binary;
    int slot = -1;  // tile buffer of the result (-1: the last step writes the output)
  };
  int num_inputs = 0;
  std::vector<Step> steps;
  TensorMeta meta;
  int num_slots = 0;

  const char* name() const override { return "fused_elementwise"; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override {
    TF_CHECK_T(InternalError, static_cast<int>(in.size()) == num_inputs, name(),
               "expects {} inputs, got {}", num_inputs, in.size());
    out[0] = meta;
  }
  void eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const override;
  void eval_cuda(std::span<const Tensor>, std::span<Tensor>) const override {
    TF_THROW(InternalError, name(), "fused nodes are made for CPU graphs only");
  }
  bool is_elementwise() const override { return true; }
  std::vector<Tensor> vjp(std::span<const Tensor> primals, std::span<const Tensor> cotangents,
                          std::span<const int> argnums, std::span<const Tensor>) const override {
    // Recompute the chain op by op under a tape and differentiate it.
    std::vector<Tensor> xs(primals.begin(), primals.end());
    GradientTape tape;
    for (int k : argnums) tape.watch(xs[k]);
    Tensor y = unfused(xs);
    Tensor target = reduce_sum(multiply(y, cotangents[0]));
    std::vector<Tensor> sources;
    for (int k : argnums) sources.push_back(xs[k]);
    std::vector<Tensor> g = tape.gradient(target, sources);
    for (size_t i = 0; i < g.size(); ++i)
      if (g[i].defined()) g[i] = detail::sum_to_shape(g[i], primals[argnums[i]].shape());
    return g;
  }
  std::string attributes() const override {
    std::string s;
    for (size_t i = 0; i < steps.size(); ++i) {
      const Step& st = steps[i];
      s += fmt::format("{}{}(%{}{})", i ? ", " : "", st.prim->name(), st.a,
                       st.b >= 0 ? fmt::format(", %{}", st.b) : "");
    }
    return s;
  }
  Tensor unfused(std::span<const Tensor> in) const {
    std::vector<Tensor> vals(in.begin(), in.end());
    for (const Step& st : steps) {
      std::vector<Tensor> args{vals[st.a]};
      if (st.b >= 0) args.push_back(vals[st.b]);
      vals.push_back(detail::dispatch(*st.prim, args));
    }
    return vals.back();
  }
};

void FusedElementwise::eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const {
  const int64_t n = out[0].num_elements();
  if (n == 0) return;
  std::vector<const float*> ptr(num_inputs);
  std::vector<uint8_t> scalar(num_inputs);
  for (int k = 0; k < num_inputs; ++k) {
    ptr[k] = in[k].data<float>();
    scalar[k] = in[k].num_elements() == 1 && n > 1;
  }
  float* dst = out[0].data<float>();
  const int64_t grain = std::max<int64_t>(kGrain / static_cast<int64_t>(steps.size()), kTile);
  detail::parallel_for(n, grain, [&](int64_t begin, int64_t end) {
    std::vector<float> buffers(static_cast<size_t>(num_slots * kTile));
    for (int64_t t = begin; t < end; t += kTile) {
      const int64_t len = std::min(kTile, end - t);
      auto vec = [&](int o) -> const float* {
        if (o < num_inputs) return ptr[o] + t;
        const int slot = steps[o - num_inputs].slot;
        return buffers.data() + slot * kTile;
      };
      auto is_scalar = [&](int o) { return o < num_inputs && scalar[o]; };
      for (const Step& st : steps) {
        float* o = st.slot < 0 ? dst + t : buffers.data() + st.slot * kTile;
        if (st.unary) {
          st.unary(vec(st.a), o, len);
        } else if (is_scalar(st.a)) {
          st.binary.sv(*ptr[st.a], vec(st.b), o, len);
        } else if (is_scalar(st.b)) {
          st.binary.vs(vec(st.a), *ptr[st.b], o, len);
        } else {
          st.binary.vv(vec(st.a), vec(st.b), o, len);
        }
      }
    }
  });
}

cpu::UnaryRangeF32 unary_kernel(const Primitive& p) {
  if (auto f = cpu::unary_range_f32(p)) return f;
  return cpu::relu_range_f32(p);
}

}  // namespace

namespace jit {

int fuse_elementwise(Graph& g) {
  using Ref = Graph::Ref;
  using Source = Graph::Source;
  const int n_nodes = g.num_nodes();
  auto meta_of = [&](const Ref& r) -> TensorMeta {
    switch (r.source) {
      case Source::Input: return g.inputs[r.index];
      case Source::Constant: return {g.constants[r.index].shape(), g.constants[r.index].dtype()};
      case Source::Node: break;
    }
    return g.nodes[r.index].outputs[r.output];
  };
  // Uses of each node's (single) output, by nodes and by graph outputs.
  std::vector<int> uses(n_nodes, 0);
  std::vector<int> consumer(n_nodes, -1);
  for (int i = 0; i < n_nodes; ++i)
    for (const Ref& r : g.nodes[i].inputs)
      if (r.source == Source::Node) {
        ++uses[r.index];
        consumer[r.index] = i;
      }
  for (const Ref& r : g.outputs)
    if (r.source == Source::Node) {
      ++uses[r.index];
      consumer[r.index] = -2;  // a graph output
    }

  auto fusable = [&](int i) {
    const Graph::Node& nd = g.nodes[i];
    if (nd.outputs.size() != 1 || !nd.device.is_cpu() || nd.prim->has_side_effects()) return false;
    if (nd.outputs[0].dtype != float32) return false;
    const bool unary = unary_kernel(*nd.prim) != nullptr && nd.inputs.size() == 1;
    const bool binary = static_cast<bool>(cpu::binary_ranges_f32(*nd.prim)) && nd.inputs.size() == 2;
    if (!unary && !binary) return false;
    const int64_t n = nd.outputs[0].shape.num_elements();
    for (const Ref& r : nd.inputs) {
      const TensorMeta m = meta_of(r);
      if (m.dtype != float32) return false;
      const int64_t k = m.shape.num_elements();
      if (k != n && k != 1) return false;
      if (k != n && r.source == Source::Node) return false;  // broadcast intermediates: no
    }
    return true;
  };

  // Grow groups along single-use edges: a fusable node joins the group of a producer whose only
  // use it is (and whose output has its element count); otherwise it starts a group.
  std::vector<int> group(n_nodes, -1);
  std::vector<std::vector<int>> groups;
  for (int i = 0; i < n_nodes; ++i) {
    if (!fusable(i)) continue;
    const int64_t n = g.nodes[i].outputs[0].shape.num_elements();
    int join = -1;
    bool conflict = false;
    for (const Ref& r : g.nodes[i].inputs) {
      if (r.source != Source::Node || group[r.index] < 0) continue;
      const bool internal = uses[r.index] == 1 &&
                            g.nodes[r.index].outputs[0].shape.num_elements() == n;
      if (!internal) continue;
      if (join >= 0 && join != group[r.index]) conflict = true;
      join = group[r.index];
    }
    if (join < 0 || conflict) {
      group[i] = static_cast<int>(groups.size());
      groups.push_back({i});
    } else {
      group[i] = join;
      groups[join].push_back(i);
    }
  }

  // A group is fused when only its last member is used outside it.
  std::vector<int> replace_at(n_nodes, -1);  // last member -> group
  std::vector<uint8_t> removed(n_nodes, 0);
  int fused = 0;
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const auto& members = groups[gi];
    if (members.size() < 2) continue;
    bool ok = true;
    for (size_t m = 0; m + 1 < members.size() && ok; ++m) {
      const int c = consumer[members[m]];
      ok = uses[members[m]] == 1 && c >= 0 && group[c] == static_cast<int>(gi);
    }
    if (!ok) continue;
    ++fused;
    replace_at[members.back()] = static_cast<int>(gi);
    for (size_t m = 0; m + 1 < members.size(); ++m) removed[members[m]] = 1;
  }
  if (fused == 0) return 0;

  std::vector<Graph::Node> nodes;
  std::vector<int> new_index(n_nodes, -1);
  auto remap = [&](Ref r) {
    if (r.source == Source::Node) r.index = new_index[r.index];
    return r;
  };
  for (int i = 0; i < n_nodes; ++i) {
    if (removed[i]) continue;
    if (replace_at[i] < 0) {
      Graph::Node nd = g.nodes[i];
      for (Ref& r : nd.inputs) r = remap(r);
      new_index[i] = static_cast<int>(nodes.size());
      nodes.push_back(std::move(nd));
      continue;
    }
    const auto& members = groups[replace_at[i]];
    auto op = std::make_shared<FusedElementwise>();
    std::vector<Ref> ext;  // the fused node's inputs (original numbering)
    std::map<int, int> step_of;  // member node -> step index
    auto operand = [&](const Ref& r) {
      if (r.source == Source::Node && step_of.count(r.index))
        return -2 - step_of[r.index];  // a step (fixed below; -1 means "no operand")
      for (size_t k = 0; k < ext.size(); ++k)
        if (ext[k] == r) return static_cast<int>(k);
      ext.push_back(r);
      return static_cast<int>(ext.size()) - 1;
    };
    for (int m : members) {
      const Graph::Node& nd = g.nodes[m];
      FusedElementwise::Step st;
      st.prim = nd.prim;
      st.a = operand(nd.inputs[0]);
      if (nd.inputs.size() > 1) st.b = operand(nd.inputs[1]);
      st.unary = nd.inputs.size() == 1 ? unary_kernel(*nd.prim) : nullptr;
      if (!st.unary) st.binary = cpu::binary_ranges_f32(*nd.prim);
      step_of[m] = static_cast<int>(op->steps.size());
      op->steps.push_back(st);
    }
    op->num_inputs = static_cast<int>(ext.size());
    // Step operands: -2 - s means step s, numbered after the inputs.
    for (auto& st : op->steps) {
      if (st.a <= -2) st.a = op->num_inputs + (-2 - st.a);
      if (st.b <= -2) st.b = op->num_inputs + (-2 - st.b);
    }
    // Tile slots: a step's buffer is free again after its last reader (the last step writes
    // the output).
    const int S = static_cast<int>(op->steps.size());
    std::vector<int> last_read(S, -1);
    for (int s = 0; s < S; ++s)
      for (int o : {op->steps[s].a, op->steps[s].b})
        if (o >= op->num_inputs) last_read[o - op->num_inputs] = s;
    std::vector<int> free_slots;
    for (int s = 0; s < S; ++s) {
      // The loops take __restrict pointers, so a step never writes over its own operands: its
      // slot is chosen before the operands it reads for the last time are released.
      if (s == S - 1) {
        op->steps[s].slot = -1;
      } else if (!free_slots.empty()) {
        op->steps[s].slot = free_slots.back();
        free_slots.pop_back();
      } else {
        op->steps[s].slot = op->num_slots++;
      }
      const int a = op->steps[s].a, b = op->steps[s].b;
      for (int o : {a, b == a ? -1 : b})
        if (o >= op->num_inputs && last_read[o - op->num_inputs] == s)
          free_slots.push_back(op->steps[o - op->num_inputs].slot);
    }
    op->meta = g.nodes[members.back()].outputs[0];
    Graph::Node nd;
    nd.prim = op;
    for (const Ref& r : ext) nd.inputs.push_back(remap(r));
    nd.outputs = {op->meta};
    nd.device = g.nodes[members.back()].device;
    new_index[i] = static_cast<int>(nodes.size());
    nodes.push_back(std::move(nd));
  }
  for (Ref& r : g.outputs) r = remap(r);
  g.nodes = std::move(nodes);
  return fused;
}

}  // namespace jit
}  // namespace tapeflow
