#include "autograd/tape.h"

#include <algorithm>
#include <new>
#include <unordered_set>

#include "core/allocator.h"
#include "core/check.h"
#include "core/device_memory.h"
#include "core/log.h"
#include "ops/binary.h"
#include "ops/dispatch.h"
#include "ops/factory.h"
#include "ops/helpers.h"
#include "ops/movement.h"

namespace tapeflow {

// One recorded op: the primitive, the values its vjp reads (the others only as shape, dtype and
// device, turned into placeholders when the backward sweep reaches the op), and the ids that
// connect it to the rest of the tape.
struct GradientTape::Node {
  struct Value {
    Tensor kept;  // defined when vjp_saves() asks for it
    TensorMeta meta;
    Device device;
    uint64_t id = 0;
    bool tracked = false;  // inputs: floating and watched (or computed from watched)
    Tensor get() const {
      return kept.defined() ? kept : detail::symbolic(meta.shape, meta.dtype, device);
    }
  };
  std::shared_ptr<Primitive> prim;
  std::vector<Value> in, out;
  std::vector<Tensor> inputs() const {
    std::vector<Tensor> v;
    v.reserve(in.size());
    for (const Value& x : in) v.push_back(x.get());
    return v;
  }
  std::vector<Tensor> outputs() const {
    std::vector<Tensor> v;
    v.reserve(out.size());
    for (const Value& x : out) v.push_back(x.get());
    return v;
  }
};

namespace {

// A variable's shape, dtype and device without data (the zeros of an unconnected gradient).
Tensor placeholder_of(const Variable& v) {
  return detail::symbolic(v.shape(), v.dtype(), v.placement());
}

Tensor zeros_on(const TensorShape& shape, DType dtype, Device device) {
  DeviceScope scope(device);
  return zeros(shape, dtype);
}

Tensor one_hot_seed(const Tensor& target, int64_t flat_index, int64_t period) {
  const int64_t n = target.num_elements();
  std::vector<double> v(static_cast<size_t>(n), 0.0);
  for (int64_t i = flat_index; i < n; i += period) v[static_cast<size_t>(i)] = 1.0;
  DeviceScope scope(target.placement());
  return detail::from_doubles(v, target.shape(), target.dtype());
}

}  // namespace

// ---------------------------------------------------------------------------------------------

StopRecording::StopRecording(GradientTape& tape) : tape_(&tape), was_recording_(tape.recording_) {
  TF_CHECK_T(FailedPreconditionError, was_recording_, "GradientTape.stop_recording",
             "trying to stop recording a tape which is not recording");
  TF_CHECK_T(FailedPreconditionError, tape.owner_ == &detail::thread_context(),
             "GradientTape.stop_recording",
             "the tape records the ops of the thread that created it; pause it on that thread");
  tape_->uninstall();
}

StopRecording::~StopRecording() {
  if (was_recording_ && !tape_->used_) tape_->install();
}

GradientTape::GradientTape(TapeOptions options) : options_(options) { install(); }

GradientTape::~GradientTape() { uninstall(); }

namespace {
// False once this thread has ended: a tape destroyed on another thread checks it before it
// takes itself off this thread's list of tapes.
struct ThreadAlive {
  std::shared_ptr<std::atomic<bool>> flag = std::make_shared<std::atomic<bool>>(true);
  ~ThreadAlive() { flag->store(false); }
};
thread_local ThreadAlive t_alive;
}  // namespace

void GradientTape::install() {
  if (recording_) return;
  auto& ctx = detail::thread_context();
  // Back in the list it left (a pause, stop_recording or gradient inside a PauseTapes scope
  // resumes inside it; one begun outside a scope and ended inside it resumes in the list that
  // scope set aside, so recording resumes when the scope ends); a new tape, or one whose list
  // ended with its scope, goes innermost in the active list.
  const size_t depth = ctx.paused_tapes.size();
  std::vector<detail::TapeObserver*>* list = &ctx.tapes;
  if (owner_ == &ctx && home_depth_ < depth) list = ctx.paused_tapes[home_depth_];
  if (owner_ == &ctx && home_depth_ <= depth)
    list->insert(list->begin() + static_cast<std::ptrdiff_t>(std::min(home_index_, list->size())),
                 this);
  else
    list->push_back(this);
  home_depth_ = npos;
  owner_ = &ctx;
  owner_alive_ = t_alive.flag;
  recording_ = true;
}

void GradientTape::uninstall() {
  if (!recording_) return;
  recording_ = false;
  // On another thread only the destructor gets here (the other callers refuse first): the tape
  // leaves its thread's list unless that thread has ended. That thread must not run ops
  // meanwhile (as for any object two threads use).
  if (owner_ != &detail::thread_context() && !owner_alive_->load()) return;
  // Its thread's active list, or one that a PauseTapes scope there holds until it ends.
  auto leave = [&](std::vector<detail::TapeObserver*>& tapes, size_t depth) {
    auto it = std::find(tapes.begin(), tapes.end(), this);
    if (it == tapes.end()) return false;
    home_depth_ = depth;
    home_index_ = static_cast<size_t>(it - tapes.begin());
    tapes.erase(it);
    return true;
  };
  home_depth_ = npos;
  if (leave(owner_->tapes, owner_->paused_tapes.size())) return;
  for (size_t d = 0; d < owner_->paused_tapes.size(); ++d)
    if (leave(*owner_->paused_tapes[d], d)) return;
}

bool GradientTape::pause_for_gradient(const char* op) {
  if (recording_ && owner_ != &detail::thread_context()) {
    // The gradient's ops run on this thread, which the tape does not record: a persistent tape
    // goes on recording its own thread. A non-persistent one would stop for good, which only
    // its thread can do.
    TF_CHECK_T(FailedPreconditionError, options_.persistent, op,
               "this non-persistent tape is still recording the thread that created it; take "
               "its gradient on that thread, or make the tape persistent");
    return false;
  }
  const bool resume = options_.persistent && recording_;
  uninstall();
  return resume;
}

void GradientTape::check_usable(const char* what) const {
  TF_CHECK_T(FailedPreconditionError, !used_, what,
             "GradientTape.gradient can only be called once on non-persistent tapes (make the "
             "tape with tf::TapeOptions{{.persistent = true}} to call it several times)");
}

bool GradientTape::is_tracked(const Tensor& t) const {
  return t.defined() && is_floating(t.dtype()) && tracked_.count(t.id()) != 0;
}

void GradientTape::watch(const Tensor& t) {
  TF_CHECK_ARG(t.defined(), "GradientTape.watch", "cannot watch an undefined tensor");
  if (!is_floating(t.dtype())) {
    TF_LOG_WARN_ONCE("The dtype of the watched tensor must be floating (e.g. tf.float32), got {}",
                     dtype_name(t.dtype()));
    return;
  }
  tracked_.insert(t.id());
}

void GradientTape::watch(const std::vector<Tensor>& ts) {
  for (const Tensor& t : ts) watch(t);
}

void GradientTape::watch(const Variable& v) {
  TF_CHECK_ARG(v.defined(), "GradientTape.watch", "cannot watch an empty Variable handle");
  if (!is_floating(v.dtype())) {
    TF_LOG_WARN_ONCE("The dtype of the watched variable must be floating (e.g. tf.float32), got {}",
                     dtype_name(v.dtype()));
    return;
  }
  if (var_reads_.try_emplace(v.handle_id()).second) watched_vars_.push_back(v);
}

void GradientTape::watch(const std::vector<Variable>& vs) {
  for (const Variable& v : vs) watch(v);
}

std::vector<Variable> GradientTape::watched_variables() const {
  // In the order the variables were made, as TF's (which sorts them by id).
  std::vector<Variable> out = watched_vars_;
  std::stable_sort(out.begin(), out.end(), [](const Variable& a, const Variable& b) {
    return a.creation_order() < b.creation_order();
  });
  return out;
}

void GradientTape::variable_read(const Variable& v, const Tensor& read) {
  if (!recording_ || !is_floating(v.dtype())) return;
  auto it = var_reads_.find(v.handle_id());
  if (it == var_reads_.end()) {
    if (!options_.watch_accessed_variables || !v.trainable()) return;
    it = var_reads_.try_emplace(v.handle_id()).first;
    watched_vars_.push_back(v);
  }
  it->second.push_back(read.id());
  tracked_.insert(read.id());
}

void GradientTape::record(const Primitive& prim, std::span<const Tensor> inputs,
                          std::span<const Tensor> outputs) {
  if (!recording_ || prim.stops_gradients()) return;  // its outputs stay unwatched
  bool any = false;
  for (const Tensor& t : inputs) any = any || is_tracked(t);
  if (!any) return;
  bool float_out = false;
  for (const Tensor& t : outputs) float_out = float_out || is_floating(t.dtype());
  if (!float_out) return;  // bool and integer results carry no gradient

  auto node = std::make_unique<Node>();
  node->prim = prim.clone();
  // A graph for None dimensions: vjps take sizes from the primals themselves, which are
  // graph values anyway (keeping them costs nothing while tracing).
  // All bits set keeps every input and output, whatever their number (the per-index bits stop
  // at 16; control-flow nodes ask for everything).
  constexpr uint32_t kEverything = 0xFFFFFFFFu;
  const uint32_t saves = detail::thread_context().open_shapes ? kEverything : prim.vjp_saves();
  const size_t n_in = inputs.size(), n_out = outputs.size();
  node->in.resize(n_in);
  for (size_t i = 0; i < n_in; ++i) {
    Node::Value& v = node->in[i];
    if (saves == kEverything || (i < 16 && (saves & Primitive::save_input(static_cast<int>(i)))))
      v.kept = inputs[i];
    v.meta = {inputs[i].shape(), inputs[i].dtype()};
    v.device = inputs[i].placement();
    v.id = inputs[i].id();
    v.tracked = is_tracked(inputs[i]);
  }
  node->out.resize(n_out);
  for (size_t j = 0; j < n_out; ++j) {
    Node::Value& v = node->out[j];
    if (saves == kEverything || (j < 16 && (saves & Primitive::save_output(static_cast<int>(j)))))
      v.kept = outputs[j];
    v.meta = {outputs[j].shape(), outputs[j].dtype()};
    v.device = outputs[j].placement();
    v.id = outputs[j].id();
    if (is_floating(outputs[j].dtype()))
      tracked_.insert(outputs[j].id());
  }
  nodes_.push_back(std::move(node));
}

void GradientTape::reset() {
  release_all();
  nodes_.clear();
  tracked_.clear();
  watched_vars_.clear();
  var_reads_.clear();
}

void GradientTape::release_all() {
  for (auto& n : nodes_) n.reset();
  tracked_.clear();
}

size_t GradientTape::num_recorded() const {
  return static_cast<size_t>(std::count_if(nodes_.begin(), nodes_.end(),
                                            [](const auto& n) { return n != nullptr; }));
}

std::vector<uint64_t> GradientTape::ids_of(const Variable& v) const {
  TF_CHECK_ARG(v.defined(), "GradientTape.gradient", "a source is an empty Variable handle");
  auto it = var_reads_.find(v.handle_id());
  return it == var_reads_.end() ? std::vector<uint64_t>{} : it->second;
}

// The backward sweep. Visits, newest first, the recorded ops that lie between the targets and
// the sources, calls each one's vjp once with the summed cotangents of its outputs, and frees
// each cotangent and (unless `keep`) each op's saved tensors as soon as it has been used.
std::vector<Tensor> GradientTape::compute(const std::vector<Tensor>& targets,
                                          const std::vector<Tensor>& seeds,
                                          const std::vector<std::vector<uint64_t>>& source_ids,
                                          const std::vector<Tensor>& source_like,
                                          UnconnectedGradients unconnected, bool keep) {
  const int64_t n_nodes = static_cast<int64_t>(nodes_.size());
  std::unordered_set<uint64_t> sources;
  for (const auto& ids : source_ids) sources.insert(ids.begin(), ids.end());

  // Forward: which tensors depend on a source.
  std::unordered_set<uint64_t> depends(sources);
  std::vector<uint8_t> relevant(static_cast<size_t>(n_nodes), 0);
  for (int64_t i = 0; i < n_nodes; ++i) {
    const Node* n = nodes_[i].get();
    if (!n) continue;
    bool dep = false;
    for (const Node::Value& v : n->in) dep = dep || (v.tracked && depends.count(v.id));
    if (dep) {
      relevant[i] = 1;
      for (const Node::Value& v : n->out) depends.insert(v.id);
    }
  }
  // Backward: which of those the targets depend on.
  std::unordered_set<uint64_t> reach;
  for (const Tensor& t : targets) reach.insert(t.id());
  for (int64_t i = n_nodes - 1; i >= 0; --i) {
    if (!relevant[i]) continue;
    const Node* n = nodes_[i].get();
    bool hit = false;
    for (const Node::Value& v : n->out) hit = hit || reach.count(v.id);
    if (!hit) {
      relevant[i] = 0;
      continue;
    }
    for (const Node::Value& v : n->in)
      if (v.tracked) reach.insert(v.id);
  }

  std::unordered_map<uint64_t, Tensor> grads;
  auto accumulate = [&](uint64_t id, Tensor g) {
    auto [it, fresh] = grads.try_emplace(id, g);
    if (!fresh) it->second = add(it->second, g);
  };
  for (size_t k = 0; k < targets.size(); ++k) accumulate(targets[k].id(), seeds[k]);

  for (int64_t i = n_nodes - 1; i >= 0; --i) {
    if (!relevant[i]) continue;
    Node& n = *nodes_[i];
    std::vector<Tensor> cts(n.out.size());
    bool any = false;
    for (size_t j = 0; j < n.out.size(); ++j) {
      auto it = grads.find(n.out[j].id);
      if (it == grads.end()) continue;
      any = true;
      if (sources.count(n.out[j].id)) {
        cts[j] = it->second;  // also a source: keep its gradient for the result
      } else {
        cts[j] = std::move(it->second);
        grads.erase(it);
      }
    }
    if (any) {
      if (!n.prim->vjp_accepts_undefined_cotangents())
        for (size_t j = 0; j < cts.size(); ++j) {
          if (cts[j].defined()) continue;
          const Node::Value& o = n.out[j];
          // In a trace for None dimensions, zeros shaped like the kept output when the graph
          // runs (a constant would hold the traced shape).
          cts[j] = detail::thread_context().open_shapes && o.kept.defined()
                       ? zeros_like(o.kept)
                       : zeros_on(o.meta.shape, o.meta.dtype, o.device);
        }
      std::vector<int> argnums;
      for (size_t k = 0; k < n.in.size(); ++k)
        if (n.in[k].tracked && depends.count(n.in[k].id)) argnums.push_back(static_cast<int>(k));
      const std::vector<Tensor> primals = n.inputs(), outs = n.outputs();
      std::vector<Tensor> in_grads = n.prim->vjp(primals, cts, argnums, outs);
      TF_CHECK_T(InternalError, in_grads.size() == argnums.size(), n.prim->name(),
                 "vjp returned {} gradients for {} inputs", in_grads.size(), argnums.size());
      for (size_t a = 0; a < argnums.size(); ++a) {
        Tensor& g = in_grads[a];
        if (!g.defined()) continue;
        const Tensor& x = primals[argnums[a]];
        TF_CHECK_T(InternalError, g.shape() == x.shape() && g.dtype() == x.dtype(),
                   n.prim->name(),
                   "vjp of input {} gave shape {} dtype {}, the input has shape {} dtype {}",
                   argnums[a], g.shape().to_string(), dtype_name(g.dtype()),
                   x.shape().to_string(), dtype_name(x.dtype()));
        accumulate(n.in[argnums[a]].id, std::move(g));
      }
    }
    if (!keep) nodes_[i].reset();
  }

  std::vector<Tensor> result;
  result.reserve(source_ids.size());
  for (size_t s = 0; s < source_ids.size(); ++s) {
    Tensor total;
    for (uint64_t id : source_ids[s]) {
      auto it = grads.find(id);
      if (it == grads.end()) continue;
      total = total.defined() ? add(total, it->second) : it->second;
    }
    if (!total.defined() && unconnected == UnconnectedGradients::ZERO)
      total = zeros_on(source_like[s].shape(), source_like[s].dtype(),
                       source_like[s].placement());
    result.push_back(std::move(total));
  }
  return result;
}

std::vector<Tensor> GradientTape::gradient_impl(
    std::span<const Tensor> targets, std::span<const Tensor> output_gradients,
    const std::vector<std::vector<uint64_t>>& source_ids, const std::vector<Tensor>& source_like,
    UnconnectedGradients unconnected) {
  const char* op = "GradientTape.gradient";
  check_usable(op);
  TF_CHECK_ARG(output_gradients.empty() || output_gradients.size() == targets.size(), op,
               "{} output_gradients for {} targets (one per target)", output_gradients.size(),
               targets.size());
  // The floating targets and their seeds; an integer or bool target has no gradient.
  std::vector<Tensor> floating, seeds;
  for (size_t i = 0; i < targets.size(); ++i) {
    const Tensor& target = targets[i];
    const std::string which = targets.size() == 1 ? "the target" : fmt::format("target {}", i);
    TF_CHECK_ARG(target.defined(), op, "{} is an undefined tensor", which);
    const Tensor* given = output_gradients.empty() ? nullptr : &output_gradients[i];
    Tensor seed;
    if (given && given->defined()) {
      TF_CHECK_ARG(given->shape() == target.shape(), op,
                   "output_gradients has shape {}, {} has shape {}", given->shape().to_string(),
                   which, target.shape().to_string());
      seed = given->dtype() == target.dtype() ? *given
                                              : detail::adopt_dtype(*given, target.dtype(), op);
      TF_CHECK_ARG(seed.dtype() == target.dtype(), op,
                   "output_gradients has dtype {}, {} has dtype {}", dtype_name(given->dtype()),
                   which, dtype_name(target.dtype()));
    } else if (is_floating(target.dtype())) {
      DeviceScope scope(target.placement());
      seed = ones(target.shape(), target.dtype());
    }
    if (!is_floating(target.dtype())) continue;
    floating.push_back(target);
    seeds.push_back(std::move(seed));
  }
  // The tape never records its own gradient computation (an enclosing tape does: nest tapes
  // for higher orders); a non-persistent tape stops recording for good at its first gradient().
  const bool resume = pause_for_gradient(op);
  std::vector<Tensor> result;
  try {
    result = compute(floating, seeds, source_ids, source_like, unconnected, options_.persistent);
  } catch (...) {
    // A failed gradient (a vjp's error, out of memory) leaves a persistent tape recording.
    if (resume) install();
    throw;
  }
  if (resume) install();
  if (!options_.persistent) {
    used_ = true;
    release_all();
  }
  return result;
}

namespace {
std::span<const Tensor> one(const Tensor* t) {
  return t ? std::span<const Tensor>(t, 1) : std::span<const Tensor>();
}
}  // namespace

Tensor GradientTape::gradient(const Tensor& target, const Tensor& source,
                              UnconnectedGradients unconnected) {
  TF_CHECK_ARG(source.defined(), "GradientTape.gradient", "the source is an undefined tensor");
  return gradient_impl(one(&target), {}, {{source.id()}}, {source}, unconnected)[0];
}

Tensor GradientTape::gradient(const Tensor& target, const Variable& source,
                              UnconnectedGradients unconnected) {
  return gradient_impl(one(&target), {}, {ids_of(source)}, {placeholder_of(source)},
                       unconnected)[0];
}

Tensor GradientTape::gradient(const Tensor& target, const Tensor& source,
                              const Tensor& output_gradients, UnconnectedGradients unconnected) {
  TF_CHECK_ARG(source.defined(), "GradientTape.gradient", "the source is an undefined tensor");
  return gradient_impl(one(&target), one(&output_gradients), {{source.id()}}, {source},
                       unconnected)[0];
}

Tensor GradientTape::gradient(const Tensor& target, const Variable& source,
                              const Tensor& output_gradients, UnconnectedGradients unconnected) {
  return gradient_impl(one(&target), one(&output_gradients), {ids_of(source)},
                       {placeholder_of(source)}, unconnected)[0];
}

std::vector<Tensor> GradientTape::gradient(const Tensor& target,
                                           const std::vector<Variable>& sources,
                                           UnconnectedGradients unconnected) {
  return gradient(std::vector<Tensor>{target}, sources, std::vector<Tensor>{}, unconnected);
}

std::vector<Tensor> GradientTape::gradient(const Tensor& target,
                                           const std::vector<Variable>& sources,
                                           const Tensor& output_gradients,
                                           UnconnectedGradients unconnected) {
  return gradient(std::vector<Tensor>{target}, sources, std::vector<Tensor>{output_gradients},
                  unconnected);
}

std::vector<Tensor> GradientTape::gradient(const Tensor& target, const std::vector<Tensor>& sources,
                                           UnconnectedGradients unconnected) {
  return gradient(std::vector<Tensor>{target}, sources, std::vector<Tensor>{}, unconnected);
}

Tensor GradientTape::gradient(const std::vector<Tensor>& targets, const Tensor& source,
                              UnconnectedGradients unconnected) {
  return gradient(targets, std::vector<Tensor>{source}, std::vector<Tensor>{}, unconnected)[0];
}

Tensor GradientTape::gradient(const std::vector<Tensor>& targets, const Variable& source,
                              UnconnectedGradients unconnected) {
  return gradient(targets, std::vector<Variable>{source}, std::vector<Tensor>{}, unconnected)[0];
}

std::vector<Tensor> GradientTape::gradient(const std::vector<Tensor>& targets,
                                           const std::vector<Variable>& sources,
                                           UnconnectedGradients unconnected) {
  return gradient(targets, sources, std::vector<Tensor>{}, unconnected);
}

std::vector<Tensor> GradientTape::gradient(const std::vector<Tensor>& targets,
                                           const std::vector<Tensor>& sources,
                                           UnconnectedGradients unconnected) {
  return gradient(targets, sources, std::vector<Tensor>{}, unconnected);
}

std::vector<Tensor> GradientTape::gradient(const std::vector<Tensor>& targets,
                                           const std::vector<Variable>& sources,
                                           const std::vector<Tensor>& output_gradients,
                                           UnconnectedGradients unconnected) {
  std::vector<std::vector<uint64_t>> ids;
  std::vector<Tensor> like;
  for (const Variable& v : sources) {
    ids.push_back(ids_of(v));
    like.push_back(placeholder_of(v));
  }
  return gradient_impl(targets, output_gradients, ids, like, unconnected);
}

std::vector<Tensor> GradientTape::gradient(const std::vector<Tensor>& targets,
                                           const std::vector<Tensor>& sources,
                                           const std::vector<Tensor>& output_gradients,
                                           UnconnectedGradients unconnected) {
  std::vector<std::vector<uint64_t>> ids;
  for (const Tensor& s : sources) {
    TF_CHECK_ARG(s.defined(), "GradientTape.gradient", "a source is an undefined tensor");
    ids.push_back({s.id()});
  }
  return gradient_impl(targets, output_gradients, ids, sources, unconnected);
}

// ---- Jacobians: one backward sweep per target element, with the tape kept until the end ----


// Target shape followed by the source's dimensions (from index `from`).
static TensorShape jacobian_shape(const char* op, TensorShape shape, const TensorShape& src,
                                  int from) {
  TF_CHECK_ARG(shape.rank() + src.rank() - from <= TensorShape::kMaxRank, op,
               "the Jacobian of a target of shape {} by a source of shape {} would have rank {}, "
               "more than the {} a tensor can have",
               shape.to_string(), src.to_string(), shape.rank() + src.rank() - from,
               TensorShape::kMaxRank);
  for (int d = from; d < src.rank(); ++d) shape.push_back(src[d]);
  return shape;
}

// Rows of a Jacobian: one sweep per seed. Connectivity does not depend on the seed, so the
// first row tells whether the target depends on the source at all.
Tensor GradientTape::jacobian_rows(const char* op, const Tensor& target,
                                   const std::vector<uint64_t>& ids, const Tensor& like,
                                   int64_t count, int64_t period, int stack_axis,
                                   const TensorShape& shape, UnconnectedGradients unconnected) {
  check_usable(op);
  TF_CHECK_ARG(target.defined(), op, "the target is an undefined tensor");
  // The rows and the stacked result hold the Jacobian twice: refused up front when that cannot
  // fit in the memory of the source's device (else it failed after minutes, or, on the host,
  // std::bad_alloc escaped).
  const Device dev = like.placement();
  const size_t capacity =
      dev.is_cpu() ? detail::host_memory_bytes() : detail::gpu_memory_bytes(dev.index);
  size_t bytes = 0;
  if (__builtin_mul_overflow(static_cast<size_t>(shape.num_elements()),
                             2 * dtype_size(like.dtype()), &bytes) ||
      (capacity > 0 && bytes > capacity))
    TF_THROW(ResourceExhaustedError, op,
             "a Jacobian of shape {} ({}) needs {:.1f} GiB for its rows and result, more than {} "
             "({:.1f} GiB{})",
             shape.to_string(), dtype_name(like.dtype()),
             static_cast<double>(shape.num_elements()) * 2.0 *
                 static_cast<double>(dtype_size(like.dtype())) / (1024.0 * 1024.0 * 1024.0),
             dev.is_cpu() ? std::string("this machine's memory") : dev.to_string() + "'s memory",
             static_cast<double>(capacity) / (1024.0 * 1024.0 * 1024.0),
             dev.is_cpu() ? " of RAM and swap" : "");
  const bool resume = pause_for_gradient(op);
  std::vector<Tensor> rows;
  if (is_floating(target.dtype()) && !ids.empty()) {
    try {
      for (int64_t i = 0; i < count; ++i) {
        Tensor g = compute({target}, {one_hot_seed(target, i, period)}, {ids}, {like},
                           UnconnectedGradients::NONE, /*keep=*/true)[0];
        if (!g.defined()) break;
        rows.push_back(std::move(g));
      }
    } catch (const std::bad_alloc&) {
      if (resume) install();
      TF_THROW(ResourceExhaustedError, op,
               "out of memory after {} of the {} rows of a Jacobian of shape {}", rows.size(),
               count, shape.to_string());
    } catch (const ResourceExhaustedError& e) {  // a device's allocator ran out
      if (resume) install();
      TF_THROW(ResourceExhaustedError, op,
               "out of memory after {} of the {} rows of a Jacobian of shape {}: {}", rows.size(),
               count, shape.to_string(), e.what());
    } catch (...) {
      if (resume) install();
      throw;
    }
  }
  if (resume) install();
  if (!options_.persistent) {
    used_ = true;
    release_all();
  }
  if (rows.empty() || static_cast<int64_t>(rows.size()) != count) {
    if (unconnected == UnconnectedGradients::NONE && count > 0) return Tensor();
    return zeros_on(shape, like.dtype(), like.placement());
  }
  return reshape(stack(rows, stack_axis), shape);
}

Tensor GradientTape::jacobian(const Tensor& target, const Tensor& source,
                              UnconnectedGradients unconnected) {
  TF_CHECK_ARG(source.defined(), "GradientTape.jacobian", "the source is an undefined tensor");
  const int64_t n = target.defined() ? target.num_elements() : 0;
  return jacobian_rows(
      "GradientTape.jacobian", target, {source.id()}, source, n, n, 0,
      jacobian_shape("GradientTape.jacobian", target.defined() ? target.shape() : TensorShape{},
                     source.shape(), 0),
      unconnected);
}

Tensor GradientTape::jacobian(const Tensor& target, const Variable& source,
                              UnconnectedGradients unconnected) {
  const int64_t n = target.defined() ? target.num_elements() : 0;
  return jacobian_rows(
      "GradientTape.jacobian", target, ids_of(source), placeholder_of(source), n, n, 0,
      jacobian_shape("GradientTape.jacobian", target.defined() ? target.shape() : TensorShape{},
                     source.shape(), 0),
      unconnected);
}

Tensor GradientTape::batch_jacobian(const Tensor& target, const Tensor& source,
                                    UnconnectedGradients unconnected) {
  const char* op = "GradientTape.batch_jacobian";
  TF_CHECK_ARG(target.defined() && source.defined(), op, "target and source must be defined");
  TF_CHECK_ARG(target.rank() >= 1 && source.rank() >= 1, op,
               "target and source need a batch dimension, got shapes {} and {}",
               target.shape().to_string(), source.shape().to_string());
  TF_CHECK_ARG(target.shape()[0] == source.shape()[0], op,
               "need first dimension of target shape {} and source shape {} to match",
               target.shape().to_string(), source.shape().to_string());
  const int64_t b = target.shape()[0];
  const int64_t per = b == 0 ? 0 : target.num_elements() / b;
  const TensorShape shape = jacobian_shape(op, target.shape(), source.shape(), 1);
  // A source the target does not depend on gives zeros whatever `unconnected` asks, as TF's
  // batch_jacobian (kept so for compatibility there; its jacobian gives None).
  (void)unconnected;
  return jacobian_rows(op, target, {source.id()}, source, per, per, 1, shape,
                       UnconnectedGradients::ZERO);
}

// ---- stop_gradient and custom_gradient ----
// Both are identity ops on their first input (views: no copy, no kernel), dispatched like any
// other op, so that a traced function gets a graph node for them: a tape inside the function
// and a tape around its call (which records the replay) see the same gradient rules as eager
// code. Placed as any op (a DeviceScope elsewhere copies the inputs there, as TF's).

namespace {

// The output is input 0 itself, a view: its meta, no kernel.
template <class Derived>
struct IdentityViewOp : PrimitiveBase<Derived> {
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override {
    out[0] = {in[0].shape(), in[0].dtype()};
  }
  void eval_cpu(std::span<const Tensor>, std::span<Tensor>) const override {}
  void eval_cuda(std::span<const Tensor>, std::span<Tensor>) const override {}
  bool is_view() const override { return true; }
};

// y = x with no gradient: the vjp gives none, so a source reached only through it gets TF's
// None (or zeros with UnconnectedGradients::ZERO), as if no tape had seen the op.
struct StopGradientOp final : IdentityViewOp<StopGradientOp> {
  const char* name() const override { return "stop_gradient"; }
  bool stops_gradients() const override { return true; }
  uint32_t vjp_saves() const override { return 0; }
  std::vector<Tensor> vjp(std::span<const Tensor>, std::span<const Tensor>,
                          std::span<const int> argnums, std::span<const Tensor>) const override {
    return std::vector<Tensor>(argnums.size());
  }
};

}  // namespace

Tensor stop_gradient(const Tensor& x) {
  TF_CHECK_ARG(x.defined(), "stop_gradient", "the input is an undefined tensor (TF's None)");
  return detail::dispatch(StopGradientOp(), {x});
}

namespace {

// out = y (input 0) with the gradient map grad_fn for the inputs xs (inputs 1...): the ops
// inside fn, which made y from xs, are recorded but get no cotangent (y's only consumer is
// this op, whose vjp gives y none).
struct CustomGradientOp final : IdentityViewOp<CustomGradientOp> {
  std::shared_ptr<std::function<std::vector<Tensor>(const Tensor&)>> grad_fn;
  bool traced = false;  // made while tracing a tf::function
  const char* name() const override { return "custom_gradient"; }
  // Two custom gradients are never the same op (common-subexpression elimination compares
  // attributes), and the two probe traces of a function with None dimensions differ here, so
  // it traces per shape: a gradient function may depend on the shape through C++ values it
  // captured, and a tape around a call runs the graph's own.
  std::string attributes() const override {
    return fmt::format("grad_fn={}", static_cast<const void*>(grad_fn.get()));
  }
  uint32_t vjp_saves() const override { return 0; }
  std::vector<Tensor> vjp(std::span<const Tensor> primals, std::span<const Tensor> cotangents,
                          std::span<const int> argnums, std::span<const Tensor>) const override {
    const size_t n_x = primals.size() - 1;
    std::vector<Tensor> all;
    try {
      all = (*grad_fn)(cotangents[0]);
    } catch (const FailedPreconditionError& e) {
      if (!traced || detail::thread_context().trace != nullptr) throw;
      TF_THROW(FailedPreconditionError, name(),
               "the gradient function of a custom_gradient traced inside a tf::function ran "
               "after the trace (a tape around the function's call) and read a tensor of the "
               "trace; take the gradient with a GradientTape inside the function instead ({})",
               e.what());
    }
    TF_CHECK_ARG(all.size() == n_x, name(),
                 "the gradient function returned {} gradients for {} inputs", all.size(), n_x);
    std::vector<Tensor> out;
    for (int a : argnums) {
      if (a == 0) {  // y: its gradient is replaced by the map
        out.emplace_back();
        continue;
      }
      Tensor g = all[a - 1];
      const Tensor& x = primals[a];
      if (g.defined()) {
        TF_CHECK_ARG(g.shape() == x.shape(), name(),
                     "the gradient of input {} has shape {}, the input has shape {}", a - 1,
                     g.shape().to_string(), x.shape().to_string());
        if (g.dtype() != x.dtype()) g = detail::adopt_dtype(g, x.dtype(), name());
        TF_CHECK_ARG(g.dtype() == x.dtype(), name(),
                     "the gradient of input {} has dtype {}, the input has dtype {}", a - 1,
                     dtype_name(g.dtype()), dtype_name(x.dtype()));
      }
      out.push_back(g);
    }
    return out;
  }
};

Tensor record_custom(const std::vector<Tensor>& xs, const Tensor& y,
                     std::function<std::vector<Tensor>(const Tensor&)> grad) {
  TF_CHECK_ARG(y.defined(), "custom_gradient", "the function returned an undefined value");
  TF_CHECK_ARG(grad != nullptr, "custom_gradient", "the function returned no gradient function");
  for (size_t i = 0; i < xs.size(); ++i)
    TF_CHECK_ARG(xs[i].defined(), "custom_gradient",
                 "input {} of {} is an undefined tensor (TF's None)", i, xs.size());
  CustomGradientOp op;
  op.grad_fn = std::make_shared<std::function<std::vector<Tensor>(const Tensor&)>>(std::move(grad));
  op.traced = detail::thread_context().trace != nullptr;
  std::vector<Tensor> in;
  in.reserve(xs.size() + 1);
  in.push_back(y);
  in.insert(in.end(), xs.begin(), xs.end());
  return detail::dispatch(op, in);
}

// Runs fn(args) watching the trainable variables it reads: TF's custom_gradient raises when its
// function uses variables and grad_fn takes no `variables` argument, which tapeflow's gradient
// functions never do (such a variable would silently get no gradient).
template <class Fn, class Arg>
auto call_without_variables(const Fn& fn, const Arg& arg) {
  detail::VariableReadWatcher watcher;
  auto result = fn(arg);
  if (!watcher.read().empty()) {
    std::vector<std::string> names;
    for (const Variable& v : watcher.read()) names.push_back("'" + v.name() + "'");
    TF_THROW(InvalidArgumentError, "custom_gradient",
             "the function reads the trainable variable(s) {}, which its gradient function "
             "cannot give a gradient (TF's grad_fn would need a `variables` argument): pass "
             "their values as inputs of the multi-input custom_gradient (their gradients then "
             "reach the variables), or read them outside the function",
             fmt::join(names, ", "));
  }
  return result;
}

}  // namespace

std::function<Tensor(const Tensor&)> custom_gradient(CustomGradientFn fn) {
  TF_CHECK_ARG(fn != nullptr, "custom_gradient", "the function is empty");
  return [fn = std::move(fn)](const Tensor& x) {
    // Recorded as TF's eager custom_gradient does: out's only recorded producer is the custom
    // op, so first-order gradients follow grad; a tape around a tape also sees how values that
    // grad captured (e = exp(x)) depend on x, and differentiates the gradient correctly.
    auto [y, grad] = call_without_variables(fn, x);
    TF_CHECK_ARG(grad != nullptr, "custom_gradient", "the function returned no gradient function");
    std::function<std::vector<Tensor>(const Tensor&)> g =
        [grad = std::move(grad)](const Tensor& dy) { return std::vector<Tensor>{grad(dy)}; };
    return record_custom({x}, y, std::move(g));
  };
}

std::function<Tensor(const std::vector<Tensor>&)> custom_gradient(CustomGradientFnN fn) {
  TF_CHECK_ARG(fn != nullptr, "custom_gradient", "the function is empty");
  return [fn = std::move(fn)](const std::vector<Tensor>& xs) {
    for (size_t i = 0; i < xs.size(); ++i)
      TF_CHECK_ARG(xs[i].defined(), "custom_gradient",
                   "input {} of {} is an undefined tensor (TF's None)", i, xs.size());
    auto [y, grad] = call_without_variables(fn, xs);  // recorded, as in the one-input overload
    return record_custom(xs, y, std::move(grad));
  };
}

}  // namespace tapeflow
