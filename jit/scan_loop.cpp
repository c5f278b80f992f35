// The loop of tf::map_fn, tf::foldl, tf::foldr and tf::scan inside tf::function (the hook of
// ops/traced_loop.h). Eagerly those run fn once per element (ops/higher_order.cpp); traced, fn
// is traced once into a body graph and one node (named after the caller: `map_fn`, `foldl`,
// `foldr`, `scan`) runs it for each slice along the first dimension of its elems:
//   inputs   (carries nc, elems nx, captures...)
//   body     (carries, one slice of each elems, captures) -> (next carries, results ny)
//   outputs  (final carries nc, each result stacked ny, carry histories nc: the carries that
//            each step started from, stacked in elems' order; kept only when a gradient may be
//            asked for, else (0, ...))
// The graph holds one copy of fn whatever the number of elements, and a function with a None
// first dimension serves every length with one trace. Other None dimensions may reach the body
// (a batch inside the slices): the node keeps the body before optimising and specialises it for
// each new input shape (cached), and tells tf::function's probes (probe_mismatch) whether the
// body traced at one size infers the body traced at the next. Its gradient is the same kind of node
// (`map_fn_grad`, ...) running the body's vector-Jacobian product over the elems the other way
// round, carrying the carries' cotangents and the captures' summed gradients; the gradient of
// that gradient is one more such node, to any order, eager or traced.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "jit/control_flow_internal.h"
#include "ops/binary.h"
#include "ops/dispatch.h"
#include "ops/factory.h"
#include "ops/movement.h"
#include "ops/traced_loop.h"

namespace tapeflow {

namespace {

using namespace jit::cf;  // NOLINT(google-build-using-namespace)
using detail::PauseTapes;

template <class T>
std::vector<T> pick(const std::vector<T>& all, const std::vector<int>& which) {
  std::vector<T> out;
  for (int i : which) out.push_back(all[static_cast<size_t>(i)]);
  return out;
}

std::vector<int> floating_of(const std::vector<TensorMeta>& metas) {
  std::vector<int> out;
  for (size_t i = 0; i < metas.size(); ++i)
    if (is_floating(metas[i].dtype)) out.push_back(static_cast<int>(i));
  return out;
}

class ScanOp final : public ControlFlowOp {
 public:
  std::string op;  // map_fn, foldl, foldr, scan, or one of those with "_grad" for a gradient
  ShapedGraph body;        // served for other shapes by specialising (a None batch)
  std::vector<int> feeds;  // the node input of each body capture
  int nc = 0, nx = 0;
  std::vector<TensorMeta> carry_metas, y_metas;  // as traced
  bool reverse = false;
  bool keep_history = false;  // a tape recorded the trace: its gradient reads the history
  int n_inputs = 0;
  // The gradient nodes built at the first vjp for each shape (with and without cotangents for
  // the histories), shared by the copies of this op.
  using Cache = KeyedCache<std::shared_ptr<const ScanOp>>;
  std::shared_ptr<Cache> cache = std::make_shared<Cache>();

  int ny() const { return static_cast<int>(y_metas.size()); }
  int m() const { return static_cast<int>(feeds.size()); }

  // The body's input types for a run on the node's inputs `in`.
  std::vector<TensorMeta> body_inputs(std::span<const Tensor> in) const {
    std::vector<TensorMeta> metas;
    for (int k = 0; k < nc; ++k)
      metas.push_back({in[static_cast<size_t>(k)].shape(), in[static_cast<size_t>(k)].dtype()});
    for (int j = 0; j < nx; ++j) {
      const Tensor& x = in[static_cast<size_t>(nc + j)];
      metas.push_back({without_leading(x.shape()), x.dtype()});
    }
    for (int f : feeds)
      metas.push_back({in[static_cast<size_t>(f)].shape(), in[static_cast<size_t>(f)].dtype()});
    return metas;
  }
  // The body for inputs of these types: the traced one, else a specialisation (cached).
  std::shared_ptr<const Graph> body_for(const std::vector<TensorMeta>& metas) const {
    std::shared_ptr<const Graph> g = body.for_inputs(metas);
    if (g == body.traced()) return g;
    const std::vector<TensorMeta> outs = output_metas(*g);
    for (int k = 0; k < nc; ++k)
      TF_CHECK_ARG(outs[static_cast<size_t>(k)] == metas[static_cast<size_t>(k)], name(),
                   "fn turns the accumulator {} into {} at these shapes (it keeps its type when "
                   "traced)",
                   type_text(metas[static_cast<size_t>(k)]),
                   type_text(outs[static_cast<size_t>(k)]));
    return g;
  }

  const char* name() const override { return op.c_str(); }
  int num_outputs() const override { return 2 * nc + ny(); }
  std::shared_ptr<Primitive> clone() const override { return std::make_shared<ScanOp>(*this); }
  std::string structure() const override {
    return fmt::format("carries={}, elems={}, results={}, body={} nodes{}", nc, nx, ny(),
                       body.traced()->num_nodes(), reverse ? ", reverse" : "");
  }
  std::vector<std::pair<std::string, const ShapedGraph*>> parts() const override {
    return {{"body", &body}};
  }
  std::shared_ptr<Primitive> with_history() const override {
    if (keep_history || nc == 0) return nullptr;
    auto copy = std::make_shared<ScanOp>(*this);
    copy->keep_history = true;
    return copy;
  }
  bool vjp_accepts_undefined_cotangents() const override { return true; }

  // The number of elements: the elems' common first dimension (None when unknown).
  int64_t length(std::span<const Tensor> in) const {
    int64_t n = None;
    for (int j = 0; j < nx; ++j) {
      const Tensor& x = in[static_cast<size_t>(nc + j)];
      const int64_t d = x.shape()[0];
      if (d == None) continue;
      TF_CHECK_ARG(n == None || d == n, name(),
                   "the elems have different first dimensions: {} and {} (every elems gives "
                   "one slice per step)",
                   n, d);
      n = d;
    }
    return n;
  }

  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override {
    TF_CHECK_T(InternalError, static_cast<int>(in.size()) == n_inputs, name(),
               "takes {} inputs, got {}", n_inputs, in.size());
    const int64_t n = length(in);
    const std::vector<TensorMeta> metas = body_inputs(in);
    const std::vector<TensorMeta> outs = output_metas(*body_for(metas));
    for (int k = 0; k < nc; ++k) {
      const TensorMeta& c = metas[static_cast<size_t>(k)];
      out[static_cast<size_t>(k)] = c;
      // Kept: one entry per element; else empty, unless a tape is active when it runs.
      out[static_cast<size_t>(nc + ny() + k)] = {with_leading(keep_history ? n : None, c.shape),
                                                 c.dtype};
    }
    for (int j = 0; j < ny(); ++j) {
      const TensorMeta& y = outs[static_cast<size_t>(nc + j)];
      out[static_cast<size_t>(nc + j)] = {with_leading(n, y.shape), y.dtype};
    }
  }

  // (0, ...) of `meta`: the stack of no steps.
  Tensor empty_stack(const TensorMeta& meta, const char* what, int j) const {
    TF_CHECK_ARG(meta.shape.is_fully_defined(), name(),
                 "elems has no elements and {} {}'s shape {} is not fully known (it was traced "
                 "from None dimensions), so its empty stack has no shape",
                 what, j, meta.shape.to_string());
    return zeros(with_leading(0, meta.shape), meta.dtype);
  }

  bool produce(std::span<const Tensor> in, std::span<Tensor> out, Device) const override {
    const bool keep = nc > 0 && (keep_history || !detail::thread_context().tapes.empty());
    PauseTapes pause;  // tapes record this node, with its vjp
    DeviceScope scope(device);
    const int64_t n = length(in);
    const std::shared_ptr<const Graph> g = body_for(body_inputs(in));
    std::vector<Tensor> carries(in.begin(), in.begin() + nc);
    std::vector<TensorShape> row_shapes;
    std::vector<size_t> row_bytes;
    for (int j = 0; j < nx; ++j) {
      const Tensor& x = in[static_cast<size_t>(nc + j)];
      row_shapes.push_back(without_leading(x.shape()));
      row_bytes.push_back(n > 0 ? x.nbytes() / static_cast<size_t>(n) : 0);
    }
    std::vector<std::vector<Tensor>> ys(static_cast<size_t>(ny()),
                                        std::vector<Tensor>(static_cast<size_t>(n)));
    std::vector<std::vector<Tensor>> history(static_cast<size_t>(keep ? nc : 0),
                                             std::vector<Tensor>(static_cast<size_t>(n)));
    std::vector<Tensor> args(static_cast<size_t>(nc + nx + m()));
    for (int c = 0; c < m(); ++c)
      args[static_cast<size_t>(nc + nx + c)] =
          in[static_cast<size_t>(feeds[static_cast<size_t>(c)])];
    for (int64_t t = 0; t < n; ++t) {
      const int64_t i = reverse ? n - 1 - t : t;
      const auto row = static_cast<size_t>(i);
      for (int k = 0; k < nc; ++k) {
        args[static_cast<size_t>(k)] = carries[static_cast<size_t>(k)];
        if (keep) history[static_cast<size_t>(k)][row] = carries[static_cast<size_t>(k)];
      }
      for (int j = 0; j < nx; ++j) {
        const auto jj = static_cast<size_t>(j);
        // In place: tensors are dense, so row i starts i rows in.
        args[static_cast<size_t>(nc + j)] =
            detail::view(in[static_cast<size_t>(nc + j)], row_shapes[jj], row * row_bytes[jj]);
      }
      std::vector<Tensor> r = g->run(args);
      for (int k = 0; k < nc; ++k) carries[static_cast<size_t>(k)] = r[static_cast<size_t>(k)];
      for (int j = 0; j < ny(); ++j)
        ys[static_cast<size_t>(j)][row] = std::move(r[static_cast<size_t>(nc + j)]);
    }
    for (int k = 0; k < nc; ++k) {
      out[static_cast<size_t>(k)] = fresh(carries[static_cast<size_t>(k)]);
      const TensorMeta& c = carry_metas[static_cast<size_t>(k)];
      out[static_cast<size_t>(nc + ny() + k)] =
          keep && n > 0 ? stack(history[static_cast<size_t>(k)], 0)
                        : zeros(with_leading(0, carries[static_cast<size_t>(k)].shape()), c.dtype);
    }
    const std::vector<TensorMeta> outs = n > 0 ? std::vector<TensorMeta>() : output_metas(*g);
    for (int j = 0; j < ny(); ++j)
      out[static_cast<size_t>(nc + j)] =
          n > 0 ? stack(ys[static_cast<size_t>(j)], 0)
                : empty_stack(outs[static_cast<size_t>(nc + j)], "result", j);
    return true;
  }

  std::vector<Tensor> vjp(std::span<const Tensor> primals, std::span<const Tensor> cotangents,
                          std::span<const int> argnums,
                          std::span<const Tensor> outputs) const override;

 private:
  // The node that runs the body's vjp, with inputs
  //   carries: cotangents of the floating carries, gradients of the floating captures (zeros)
  //   elems:   histories (every carry), elems, cotangents of the floating results[, of the
  //            floating carries' histories (with_history_cotangents)]
  //   captures: the body's captures
  // and outputs (cotangents of the initial floating carries, gradients of the floating
  // captures, cotangents of the floating elems stacked).
  // `fwd` is the body at the shapes of the run being differentiated.
  std::shared_ptr<const ScanOp> gradient_op(bool with_history_cotangents, const Graph& fwd) const;
};

std::shared_ptr<const ScanOp> ScanOp::gradient_op(bool dh, const Graph& fwd) const {
  const std::vector<TensorMeta> fwd_outs = output_metas(fwd);
  const std::vector<TensorMeta> carries(fwd.inputs.begin(), fwd.inputs.begin() + nc);
  const std::vector<TensorMeta> ys(fwd_outs.begin() + nc, fwd_outs.end());
  const std::vector<int> fc = floating_of(carries);
  const std::vector<int> fy = floating_of(ys);
  std::vector<TensorMeta> slices, captures;
  std::vector<Device> capture_devices;
  for (int j = 0; j < nx; ++j) slices.push_back(fwd.inputs[static_cast<size_t>(nc + j)]);
  for (int c = 0; c < m(); ++c) {
    captures.push_back(fwd.inputs[static_cast<size_t>(nc + nx + c)]);
    capture_devices.push_back(fwd.input_devices[static_cast<size_t>(nc + nx + c)]);
  }
  const std::vector<int> fx = floating_of(slices);
  const std::vector<int> fcap = floating_of(captures);
  const size_t nfc = fc.size(), nfcap = fcap.size(), nfx = fx.size(), nfy = fy.size();

  std::vector<TensorMeta> params;
  std::vector<Device> devices;
  auto append = [&](const std::vector<TensorMeta>& metas, const std::vector<Device>* on) {
    for (size_t i = 0; i < metas.size(); ++i) {
      params.push_back(metas[i]);
      devices.push_back(on != nullptr ? (*on)[i] : device);
    }
  };
  const std::vector<Device> fcap_devices = pick(capture_devices, fcap);
  append(pick(carries, fc), nullptr);
  append(pick(captures, fcap), &fcap_devices);
  append(carries, nullptr);
  append(slices, nullptr);
  append(pick(ys, fy), nullptr);
  if (dh) append(pick(carries, fc), nullptr);
  append(captures, &capture_devices);
  const size_t o_dcap = nfc, o_h = o_dcap + nfcap, o_x = o_h + static_cast<size_t>(nc),
               o_dy = o_x + static_cast<size_t>(nx), o_dh = o_dy + nfy,
               o_cap = o_dh + (dh ? nfc : 0);

  SubGraph grad = trace_subgraph(params, devices, [&](const std::vector<Tensor>& a) {
    std::vector<Tensor> args(a.begin() + static_cast<std::ptrdiff_t>(o_h),
                             a.begin() + static_cast<std::ptrdiff_t>(o_dy));
    args.insert(args.end(), a.begin() + static_cast<std::ptrdiff_t>(o_cap), a.end());
    std::vector<int> sources = fc;
    for (int j : fx) sources.push_back(nc + j);
    for (int c : fcap) sources.push_back(nc + nx + c);
    std::vector<Tensor> seeds(static_cast<size_t>(nc + ny()));
    for (size_t i = 0; i < nfc; ++i) seeds[static_cast<size_t>(fc[i])] = a[i];
    for (size_t j = 0; j < nfy; ++j) seeds[static_cast<size_t>(nc + fy[j])] = a[o_dy + j];
    const std::vector<Tensor> g = graph_vjp(fwd, args, sources, seeds);
    std::vector<Tensor> result;
    for (size_t i = 0; i < nfc; ++i)
      result.push_back(moved_to(dh ? add(g[i], a[o_dh + i]) : g[i], device));
    for (size_t c = 0; c < nfcap; ++c)
      result.push_back(moved_to(add(a[o_dcap + c], g[nfc + nfx + c]), fcap_devices[c]));
    for (size_t j = 0; j < nfx; ++j) result.push_back(moved_to(g[nfc + j], device));
    return result;
  });
  std::vector<ShapedGraph> finished = finish_subgraphs(std::array<SubGraph*, 1>{&grad});
  TF_CHECK_T(InternalError, grad.captures.empty(), name(),
             "the body's gradient graph captured {} tensors", grad.captures.size());

  auto g = std::make_shared<ScanOp>();
  g->op = op + "_grad";
  g->body = std::move(finished[0]);
  g->nc = static_cast<int>(nfc + nfcap);
  g->nx = static_cast<int>(o_cap - o_h);
  for (int c = 0; c < m(); ++c) g->feeds.push_back(static_cast<int>(o_cap) + c);
  g->carry_metas.assign(params.begin(), params.begin() + static_cast<std::ptrdiff_t>(o_h));
  g->y_metas = pick(slices, fx);
  g->reverse = !reverse;
  g->device = device;
  g->effects = effects_of(*grad.graph);
  g->n_inputs = static_cast<int>(params.size());
  return g;
}

std::vector<Tensor> ScanOp::vjp(std::span<const Tensor> primals, std::span<const Tensor> cotangents,
                                std::span<const int> argnums,
                                std::span<const Tensor> outputs) const {
  TF_CHECK_T(UnimplementedError, effects.replay_blocker.empty(), name(),
             "the gradient re-runs fn, which holds {} (random numbers and variable assignments "
             "would run again); take this gradient eagerly, or move the op out of fn",
             effects.replay_blocker);
  const std::vector<int> fc = floating_of(carry_metas);
  const std::vector<int> fy = floating_of(y_metas);
  // (Types as traced: other shapes keep the dtypes.)
  const std::vector<TensorMeta>& traced = body.inputs();
  const std::vector<TensorMeta> slices(traced.begin() + nc, traced.begin() + nc + nx);
  const std::vector<TensorMeta> captures(traced.begin() + nc + nx, traced.end());
  const std::vector<int> fx = floating_of(slices);
  const std::vector<int> fcap = floating_of(captures);

  const int64_t n = length(primals);
  for (int k = 0; k < nc; ++k) {
    const Tensor& h = outputs[static_cast<size_t>(nc + ny() + k)];
    TF_CHECK_T(InternalError, h.is_symbolic() || n == None || h.shape()[0] == n, name(),
               "carry {}'s history has {} entries for {} elements (the loop ran without a tape)", k,
               h.shape()[0], n);
  }
  bool dh = false;
  for (int k : fc) dh = dh || cotangents[static_cast<size_t>(nc + ny() + k)].defined();

  const std::vector<TensorMeta> metas = body_inputs(primals);
  const std::string key = (dh ? "h;" : "-;") + key_of(metas);
  // The body unoptimised (its vjp is traced from primitive ops, which a specialisation for
  // other shapes can infer again; fused nodes keep the shapes they were fused at).
  const std::shared_ptr<const ScanOp> cached = cache->get(
      key,
      [&]() -> std::shared_ptr<const ScanOp> { return gradient_op(dh, *body.raw_for(metas)); });
  auto g = std::make_shared<ScanOp>(*cached);
  g->keep_history = !detail::thread_context().tapes.empty();
  g->id = next_node_id();

  auto cotangent_or_zeros = [&](size_t k, Device on) {
    const Tensor& c = cotangents[k];
    return c.defined() ? moved_to(c, on) : moved_to(zeros_like(outputs[k]), on);
  };
  std::vector<Tensor> inputs;
  for (int k : fc) inputs.push_back(cotangent_or_zeros(static_cast<size_t>(k), device));
  for (int c : fcap) inputs.push_back(zeros_like(primals[static_cast<size_t>(feeds[c])]));
  for (int k = 0; k < nc; ++k) inputs.push_back(outputs[static_cast<size_t>(nc + ny() + k)]);
  for (int j = 0; j < nx; ++j) inputs.push_back(primals[static_cast<size_t>(nc + j)]);
  for (int j : fy) inputs.push_back(cotangent_or_zeros(static_cast<size_t>(nc + j), device));
  if (dh)
    for (int k : fc)
      inputs.push_back(cotangent_or_zeros(static_cast<size_t>(nc + ny() + k), device));
  for (int c = 0; c < m(); ++c) inputs.push_back(primals[static_cast<size_t>(feeds[c])]);
  const std::vector<Tensor> grads = detail::dispatch_multi(*g, inputs);
  const size_t first_dcap = fc.size(), first_dx = fc.size() + fcap.size();

  std::vector<Tensor> result;
  for (int a : argnums) {
    Tensor r;
    if (a < nc) {
      const auto it = std::find(fc.begin(), fc.end(), a);
      if (it != fc.end()) r = grads[static_cast<size_t>(it - fc.begin())];
    } else if (a < nc + nx) {
      const auto it = std::find(fx.begin(), fx.end(), a - nc);
      if (it != fx.end()) r = grads[first_dx + static_cast<size_t>(it - fx.begin())];
    } else if (is_floating(primals[static_cast<size_t>(a)].dtype())) {
      for (size_t c = 0; c < fcap.size(); ++c) {
        if (feeds[static_cast<size_t>(fcap[c])] != a) continue;
        const Tensor& d = grads[first_dcap + c];
        r = r.defined() ? add(r, d) : d;
      }
      if (!r.defined()) r = zeros_like(primals[static_cast<size_t>(a)]);
    }
    result.push_back(r);
  }
  return result;
}

// ops_scan's hook: traces body and adds the node, or declines (std::nullopt).
std::optional<std::vector<Tensor>> scan_loop(const char* op, const detail::OpsScanBody& fn,
                                             std::vector<Tensor> init, std::vector<Tensor> elems,
                                             bool reverse) {
  if (!tracing() || elems.empty()) return std::nullopt;
  const auto& stack_ = detail::thread_context().device_stack;
  const Device device = !stack_.empty() ? stack_.back() : elems[0].placement();
  for (Tensor& t : init) t = moved_to(t, device);
  for (Tensor& t : elems) t = moved_to(t, device);
  const int nc = static_cast<int>(init.size());
  const int nx = static_cast<int>(elems.size());
  std::vector<TensorMeta> params = metas_of(init);
  for (const Tensor& x : elems) params.push_back({without_leading(x.shape()), x.dtype()});
  const std::vector<Device> devices(params.size(), device);
  SubGraph body = trace_subgraph(params, devices, [&](const std::vector<Tensor>& a) {
    const std::vector<Tensor> carries(a.begin(), a.begin() + nc);
    const std::vector<Tensor> slices(a.begin() + nc, a.end());
    std::vector<Tensor> r = fn(carries, slices);
    TF_CHECK_T(InternalError, static_cast<int>(r.size()) >= nc, op,
               "the loop body returned {} tensors for {} carries", r.size(), nc);
    for (size_t k = 0; k < r.size(); ++k) {
      TF_CHECK_ARG(r[k].defined(), op, "fn returned an undefined tensor");
      if (static_cast<int>(k) < nc)
        TF_CHECK_ARG(r[k].dtype() == carries[k].dtype() && r[k].shape() == carries[k].shape(), op,
                     "fn turned the accumulator {} into {}", type_text(carries[k]),
                     type_text(r[k]));
      r[k] = moved_to(r[k], device);
    }
    return r;
  });
  // fn's random ops and assignments would run again in the gradient: the caller unrolls.
  const Effects effects = effects_of(*body.graph);
  if (!effects.replay_blocker.empty()) return std::nullopt;
  std::vector<ShapedGraph> finished = finish_subgraphs(std::array<SubGraph*, 1>{&body});

  auto node = std::make_shared<ScanOp>();
  node->op = op;
  node->body = std::move(finished[0]);
  node->nc = nc;
  node->nx = nx;
  CaptureSet captures(nc + nx);
  node->feeds = captures.add(body.captures);
  node->carry_metas = metas_of(init);
  const std::vector<TensorMeta> outs = output_metas(*body.graph);
  node->y_metas.assign(outs.begin() + nc, outs.end());
  node->reverse = reverse;
  node->keep_history = !detail::thread_context().tapes.empty();
  node->device = device;
  node->id = next_node_id();
  node->effects = effects_of(*body.graph);
  std::vector<Tensor> inputs = init;
  inputs.insert(inputs.end(), elems.begin(), elems.end());
  inputs.insert(inputs.end(), captures.tensors().begin(), captures.tensors().end());
  node->n_inputs = static_cast<int>(inputs.size());
  std::vector<Tensor> out = detail::dispatch_multi(*node, inputs);
  out.resize(static_cast<size_t>(nc + node->ny()));
  return out;
}

const bool g_registered = [] {
  detail::set_scan_hook(&scan_loop);
  return true;
}();

}  // namespace

}  // namespace tapeflow
