#include "jit/function.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <optional>
#include <set>
#include <string_view>
#include <typeinfo>

#include "autograd/tape.h"
#include "autograd/variable.h"
#include "core/check.h"
#include "core/context.h"
#include "core/log.h"
#include "jit/control_flow_internal.h"
#include "jit/cuda_graph.h"
#include "jit/fusion.h"
#include "jit/memory_plan.h"
#include "jit/passes.h"
#include "jit/reinfer.h"
#include "jit/tracer.h"
#include "jit/variable_update.h"
#include "ops/dispatch.h"

namespace tapeflow::config {
namespace {
std::atomic<bool> g_run_functions_eagerly{false};
}  // namespace
void run_functions_eagerly(bool run_eagerly) {
  g_run_functions_eagerly.store(run_eagerly, std::memory_order_relaxed);
}
bool functions_run_eagerly() {
  return g_run_functions_eagerly.load(std::memory_order_relaxed);
}
}  // namespace tapeflow::config

namespace tapeflow {
bool executing_eagerly() {
  return detail::thread_context().trace == nullptr;
}
bool inside_function() {
  return !executing_eagerly();
}
}  // namespace tapeflow

namespace tapeflow::detail {

void SignatureKey::add_tensor(const Tensor& t) {
  TF_CHECK_ARG(t.defined(), "function", "a tensor argument is undefined");
  const char tag = 't';
  add_raw(&tag, 1);
  const int r = t.rank();
  add_raw(&r, sizeof r);
  if (with_dims)
    for (int d = 0; d < r; ++d) {
      const int64_t v = t.shape()[d];
      add_raw(&v, sizeof v);
    }
  const DType dt = t.dtype();
  add_raw(&dt, sizeof dt);
  // Field by field: Device has padding bytes, whose values are unspecified.
  const Device dev = t.placement();
  const auto type = static_cast<uint8_t>(dev.type);
  add_raw(&type, 1);
  add_raw(&dev.index, sizeof dev.index);
}

std::string current_device_key() {
  const Device d = current_device();
  std::string key(1, static_cast<char>(d.type));
  key.append(reinterpret_cast<const char*>(&d.index), sizeof d.index);
  // Inside a replica a mirrored variable resolves to that replica's copy (and writes only it):
  // a graph traced there must not serve calls outside, and the other way round.
  const int32_t replica = replica_component();
  key.append(reinterpret_cast<const char*>(&replica), sizeof replica);
  return key;
}

Tensor example_for(const TensorSpec& spec) {
  TF_CHECK_ARG(spec.shape.is_fully_defined(), "get_concrete_function",
               "the spec shape {} has unknown (None) dimensions; tapeflow traces one graph per "
               "fully known shape",
               spec.shape.to_string());
  return symbolic(spec.shape, spec.dtype, current_device());
}

Tensor example_for_generic(const TensorSpec& spec) {
  TensorShape s = spec.shape;
  for (int d = 0; d < s.rank(); ++d)
    if (s[d] < 0) s[d] = 2;
  return symbolic(s, spec.dtype, current_device());
}

std::string masked_dims_key(const std::vector<Tensor>& tensors,
                            const std::vector<std::vector<bool>>& mask) {
  std::string k = "|open";
  for (size_t i = 0; i < tensors.size(); ++i) {
    const int r = tensors[i].rank();
    const DType dt = tensors[i].dtype();
    k.append(reinterpret_cast<const char*>(&r), sizeof r);
    k.append(reinterpret_cast<const char*>(&dt), sizeof dt);
    for (int d = 0; d < r; ++d) {
      const int64_t v = mask[i][static_cast<size_t>(d)] ? None : tensors[i].shape()[d];
      k.append(reinterpret_cast<const char*>(&v), sizeof v);
    }
  }
  return k;
}

std::vector<int64_t> open_sizes(std::span<const Tensor> tensors,
                                const std::vector<std::vector<bool>>& mask,
                                std::vector<int>* axes) {
  std::vector<int64_t> sizes;
  for (size_t i = 0; i < tensors.size() && i < mask.size(); ++i)
    for (int d = 0; d < tensors[i].rank() && static_cast<size_t>(d) < mask[i].size(); ++d)
      if (mask[i][static_cast<size_t>(d)]) {
        sizes.push_back(tensors[i].shape()[d]);
        if (axes) axes->push_back(d);
      }
  return sizes;
}

std::vector<int> classes_by_axis(std::span<const Tensor> tensors,
                                 const std::vector<std::vector<bool>>& mask,
                                 const std::vector<int>& classes) {
  std::vector<int> axes;
  (void)open_sizes(tensors, mask, &axes);
  std::vector<int> out(classes.size());
  for (size_t k = 0; k < classes.size(); ++k) {
    out[k] = static_cast<int>(k);
    for (size_t j = 0; j < k; ++j)
      if (classes[j] == classes[k] && axes[j] == axes[k]) {
        out[k] = static_cast<int>(j);
        break;
      }
  }
  return out;
}

std::vector<int> equal_size_classes(std::span<const Tensor> tensors,
                                    const std::vector<std::vector<bool>>& mask) {
  const std::vector<int64_t> sizes = open_sizes(tensors, mask);
  std::vector<int> classes(sizes.size());
  for (size_t k = 0; k < sizes.size(); ++k) {
    classes[k] = static_cast<int>(k);
    for (size_t j = 0; j < k; ++j)
      if (sizes[j] == sizes[k]) {
        classes[k] = static_cast<int>(j);
        break;
      }
  }
  return classes;
}

std::vector<Tensor> class_probe_tensors(const std::vector<Tensor>& tensors,
                                        const std::vector<std::vector<bool>>& mask,
                                        const std::vector<int>& classes) {
  int64_t base = 2;  // past every size of the other probes
  for (const Tensor& t : tensors)
    for (int d = 0; d < t.rank(); ++d) base = std::max(base, t.shape()[d] + 2);
  std::vector<Tensor> out;
  size_t k = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    TensorShape s = tensors[i].shape();
    for (int d = 0; d < s.rank(); ++d)
      if (mask[i][static_cast<size_t>(d)]) s[d] = base + classes[k++];
    out.push_back(symbolic(s, tensors[i].dtype(), tensors[i].placement()));
  }
  return out;
}

std::vector<Tensor> probe_tensors(const std::vector<Tensor>& tensors,
                                  const std::vector<std::vector<bool>>& mask) {
  std::vector<Tensor> out;
  for (size_t i = 0; i < tensors.size(); ++i) {
    TensorShape s = tensors[i].shape();
    for (int d = 0; d < s.rank(); ++d)
      if (mask[i][static_cast<size_t>(d)]) s[d] += 1;
    out.push_back(symbolic(s, tensors[i].dtype(), tensors[i].placement()));
  }
  return out;
}

std::shared_ptr<void> open_shapes_scope() {
  auto& ctx = thread_context();
  const bool saved = ctx.open_shapes;
  ctx.open_shapes = true;
  return std::shared_ptr<void>(nullptr, [saved](void*) { thread_context().open_shapes = saved; });
}

void throw_not_generic(const std::string& function, const std::string& reason) {
  TF_THROW(InvalidArgumentError, function.c_str(),
           "one graph cannot serve every shape of the None dimensions: {}. Compute shapes with "
           "-1 in reshape, or give fully known shapes",
           reason);
}

namespace {

bool same_constant(const Tensor& a, const Tensor& b) {
  if (a.impl() == b.impl()) return true;
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  if (a.nbytes() == 0) return true;  // empty: no storage (memcmp's pointers may be null)
  const Tensor ha = a.placement().is_cpu() ? a : copy_to_device(a, Device{});
  const Tensor hb = b.placement().is_cpu() ? b : copy_to_device(b, Device{});
  return std::memcmp(ha.raw_data(), hb.raw_data(), ha.nbytes()) == 0;
}

}  // namespace

std::string GenericTrace::mismatch(const Graph& b) const {
  const Graph& a = raw;
  if (a.nodes.size() != b.nodes.size())
    return fmt::format("the function runs {} ops at the first shapes and {} at the next",
                       a.nodes.size(), b.nodes.size());
  if (a.constants.size() != b.constants.size())
    return "the number of captured constants depends on the None dimensions";
  for (size_t k = 0; k < a.constants.size(); ++k)
    if (!same_constant(a.constants[k], b.constants[k]))
      return fmt::format("the constant %const{} ({} {}) is computed from a None dimension", k,
                         dtype_name(a.constants[k].dtype()), a.constants[k].shape().to_string());
  for (size_t i = 0; i < a.nodes.size(); ++i) {
    const Graph::Node& x = a.nodes[i];
    const Graph::Node& y = b.nodes[i];
    // A control-flow node compares its sub-graphs (a loop's body may serve other shapes).
    const jit::cf::ControlFlowOp* flow = jit::cf::as_control_flow(*x.prim);
    if (flow != nullptr && typeid(*x.prim) == typeid(*y.prim)) {
      const std::string why = flow->probe_mismatch(*jit::cf::as_control_flow(*y.prim));
      if (!why.empty())
        return fmt::format("op %{} ({}) {} at the next shapes", i, x.prim->name(), why);
    }
    if (typeid(*x.prim) != typeid(*y.prim) ||
        (flow == nullptr && x.prim->trace_attributes() != y.prim->trace_attributes()) ||
        x.inputs != y.inputs || x.device != y.device || x.outputs.size() != y.outputs.size())
      return fmt::format("op %{} ({}) has {{{}}} at the first shapes and {} {{{}}} at the next", i,
                         x.prim->name(), x.prim->attributes(), y.prim->name(),
                         y.prim->attributes());
  }
  if (a.outputs != b.outputs) return "the results depend on the None dimensions";
  Graph check = a;
  try {
    jit::reinfer(check, b.inputs);
  } catch (const std::exception& e) {
    return std::string("shape inference at the next shapes failed: ") + e.what();
  }
  for (size_t i = 0; i < a.nodes.size(); ++i)
    for (size_t k = 0; k < check.nodes[i].outputs.size(); ++k)
      if (!(check.nodes[i].outputs[k].shape == b.nodes[i].outputs[k].shape) ||
          check.nodes[i].outputs[k].dtype != b.nodes[i].outputs[k].dtype)
        return fmt::format("op %{} ({}) infers {} but traces {}", i, a.nodes[i].prim->name(),
                           check.nodes[i].outputs[k].shape.to_string(),
                           b.nodes[i].outputs[k].shape.to_string());
  return "";
}

void GenericTrace::validate(const Graph& b) {
  generic = false;
  reason = mismatch(b);
  if (!reason.empty()) return;
  const Graph& a = raw;
  generic = true;
  // For display: dimensions that differ between the probes are None.
  shown = a;
  auto open = [](TensorShape& s, const TensorShape& other) {
    for (int d = 0; d < s.rank(); ++d)
      if (s[d] != other[d]) s[d] = None;
  };
  for (size_t i = 0; i < shown.inputs.size(); ++i) open(shown.inputs[i].shape, b.inputs[i].shape);
  for (size_t i = 0; i < shown.nodes.size(); ++i)
    for (size_t k = 0; k < shown.nodes[i].outputs.size(); ++k)
      open(shown.nodes[i].outputs[k].shape, b.nodes[i].outputs[k].shape);
}

bool GenericTrace::serves(std::span<const Tensor> args) const {
  if (equal_classes.empty()) return true;
  const std::vector<int64_t> sizes = open_sizes(args, mask);
  if (sizes.size() != equal_classes.size()) return false;
  for (size_t k = 0; k < sizes.size(); ++k)
    if (sizes[k] != sizes[static_cast<size_t>(equal_classes[k])]) return false;
  return true;
}

std::shared_ptr<ConcreteFunction> GenericTrace::specialization(std::span<const Tensor> args) {
  // The graph was validated for its None dimensions only: everything else must be as traced
  // (reinfer below would otherwise read inputs the graph does not have, or build kernels for
  // another rank, dtype or device).
  const char* op = function_name.empty() ? "function" : function_name.c_str();
  TF_CHECK_ARG(args.size() == raw.inputs.size(), op,
               "the graph takes {} tensors, the call passed {}", raw.inputs.size(), args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    const Tensor& t = args[i];
    TF_CHECK_ARG(t.defined(), op, "tensor argument {} is undefined", i);
    const TensorMeta& want = shown.inputs[i];
    bool ok = t.dtype() == want.dtype && t.rank() == want.shape.rank() &&
              t.placement() == raw.input_devices[i];
    for (int d = 0; ok && d < t.rank(); ++d)
      ok = want.shape[d] == None || want.shape[d] == t.shape()[d];
    TF_CHECK_ARG(ok, op,
                 "argument {} has shape {} and dtype {} on {}, but the graph takes shape {} and "
                 "dtype {} on {}",
                 i, t.shape().to_string(), dtype_name(t.dtype()), t.device(),
                 want.shape.to_string(), dtype_name(want.dtype),
                 raw.input_devices[i].to_string());
  }
  if (!serves(args)) {
    std::vector<std::string> shapes;
    for (const Tensor& t : args) shapes.push_back(t.shape().to_string());
    TF_THROW(InvalidArgumentError, op,
             "the graph was traced with None dimensions of equal sizes and depends on their "
             "equality ({}), but they differ in this call: {}",
             equal_reason, fmt::join(shapes, ", "));
  }
  std::string key;
  for (const Tensor& t : args)
    for (int d = 0; d < t.rank(); ++d) {
      const int64_t v = t.shape()[d];
      key.append(reinterpret_cast<const char*>(&v), sizeof v);
    }
  {
    std::lock_guard lock(mu_);
    for (auto it = cache_.begin(); it != cache_.end(); ++it)
      if (it->first == key) {
        cache_.splice(cache_.begin(), cache_, it);
        return cache_.front().second;
      }
  }
  auto cf = std::make_shared<ConcreteFunction>();
  cf->graph_ = raw;
  cf->output_structure_ = output_structure;
  std::vector<TensorMeta> metas;
  for (const Tensor& t : args) metas.push_back({t.shape(), t.dtype()});
  jit::reinfer(cf->graph_, metas);
  FunctionCore::optimize(cf->graph_, first_traced_id, jit_compile);
  std::lock_guard lock(mu_);
  cache_.emplace_front(std::move(key), cf);
  if (cache_.size() > FunctionCore::kMaxCached) cache_.pop_back();
  return cf;
}

}  // namespace tapeflow::detail

namespace tapeflow {
std::vector<Tensor> ConcreteFunction::call_flat(std::span<const Tensor> args) const {
  if (generic_) return generic_->specialization(args)->graph_.run(args);
  return graph_.run(args);
}
}  // namespace tapeflow

namespace tapeflow::detail {

FunctionCore::FunctionCore(FunctionOptions options) : options_(std::move(options)) {}

std::string FunctionCore::name() const {
  return options_.name.empty() ? std::string("function") : options_.name;
}

namespace {
// The (function, signature) pairs this thread is tracing, innermost last.
thread_local std::vector<std::pair<const FunctionCore*, std::string>> t_tracing;
}  // namespace

FunctionCore::TracingScope::TracingScope(const FunctionCore& core, const std::string& key) {
  for (const auto& [c, k] : t_tracing)
    TF_CHECK_ARG(c != &core || k != key, "function",
                 "'{}' is called from inside its own trace with the same signature (recursion "
                 "through a tf::function never ends while tracing: each call would trace "
                 "again); recurse on the plain C++ callable, or make the signatures differ "
                 "until a base case",
                 core.name());
  t_tracing.emplace_back(&core, key);
}

FunctionCore::TracingScope::~TracingScope() { t_tracing.pop_back(); }

std::shared_ptr<ConcreteFunction> FunctionCore::lookup(const std::string& key) {
  std::lock_guard lock(mu_);
  auto it = index_.find(key);
  const bool hit = it != index_.end();
  if (!hit) {
    // A graph get_concrete_function pinned is kept even after the cache evicted it.
    if (auto p = pinned_.find(key); p != pinned_.end()) {
      recent_.emplace_back();
      if (recent_.size() > 10) recent_.erase(recent_.begin());
      insert_locked(key, p->second);
      return p->second;
    }
  }
  recent_.push_back(hit ? std::nullopt : std::optional<std::string>(key));
  if (recent_.size() > 10) recent_.erase(recent_.begin());
  if (!hit) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);  // most recently used first
  return it->second->second;
}

void FunctionCore::insert_locked(const std::string& key, std::shared_ptr<ConcreteFunction> f) {
  lru_.emplace_front(key, std::move(f));
  index_[key] = lru_.begin();
  if (lru_.size() > kMaxCached) {
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
}

void FunctionCore::insert(const std::string& key, std::shared_ptr<ConcreteFunction> f) {
  std::lock_guard lock(mu_);
  if (index_.count(key)) return;  // another thread traced the same signature meanwhile
  ++tracing_count_;
  insert_locked(key, std::move(f));
  warn_if_retracing_locked();
}

void FunctionCore::insert_specialized(const std::string& key, std::shared_ptr<ConcreteFunction> f) {
  std::lock_guard lock(mu_);
  if (!recent_.empty()) recent_.back().reset();  // served without a trace
  if (index_.count(key)) return;
  insert_locked(key, std::move(f));
}

std::shared_ptr<GenericTrace> FunctionCore::lookup_generic(const std::string& key) {
  std::lock_guard lock(mu_);
  auto it = generic_.find(key);
  return it == generic_.end() ? nullptr : it->second;
}

void FunctionCore::insert_generic(const std::string& key, std::shared_ptr<GenericTrace> g) {
  std::lock_guard lock(mu_);
  if (generic_.size() >= kMaxCached) generic_.clear();  // bounded, like the graph cache
  if (!generic_.try_emplace(key, g).second) return;
  ++tracing_count_;
  if (!g->generic && !logged_not_generic_) {
    logged_not_generic_ = true;
    TF_LOG_INFO("{}: one graph cannot serve every shape of its None dimensions ({}); it is "
                "traced once per distinct shape",
                name(), g->reason);
  }
  warn_if_retracing_locked();
}

void FunctionCore::log_not_generic(const GenericTrace& g) {
  std::lock_guard lock(mu_);
  if (logged_not_generic_) return;
  logged_not_generic_ = true;
  TF_LOG_INFO("{}: one graph cannot serve every shape of its None dimensions ({})", name(),
              g.reason);
}

std::vector<std::vector<bool>> FunctionCore::open_dimensions(const std::string& family,
                                                             const std::vector<Tensor>& tensors) {
  std::vector<std::vector<bool>> mask(tensors.size());
  bool any = false;
  const auto& sig = options_.input_signature;
  if (!sig.empty()) {
    for (size_t i = 0; i < tensors.size() && i < sig.size(); ++i) {
      mask[i].assign(static_cast<size_t>(tensors[i].rank()), false);
      for (int d = 0; d < sig[i].shape.rank(); ++d)
        if (sig[i].shape[d] < 0) any = mask[i][static_cast<size_t>(d)] = true;
    }
    return any ? mask : std::vector<std::vector<bool>>{};
  }
  if (!options_.reduce_retracing) return {};
  std::lock_guard lock(mu_);
  if (families_.size() >= kMaxFamilies && !families_.count(family)) families_.clear();
  auto [it, first] = families_.try_emplace(family);
  auto& [shapes, varied] = it->second;
  if (first) {
    for (const Tensor& t : tensors) {
      shapes.push_back(t.shape());
      varied.emplace_back(static_cast<size_t>(t.rank()), false);
    }
    return {};
  }
  // TF's reduce_retracing: dimensions that changed since the first call become None.
  for (size_t i = 0; i < tensors.size(); ++i)
    for (int d = 0; d < tensors[i].rank(); ++d)
      if (tensors[i].shape()[d] != shapes[i][d]) varied[i][static_cast<size_t>(d)] = true;
  for (const auto& v : varied)
    for (bool b : v) any |= b;
  return any ? varied : std::vector<std::vector<bool>>{};
}

void FunctionCore::warn_if_retracing_locked() {
  std::set<std::string_view> keys;
  for (const auto& k : recent_)
    if (k) keys.insert(*k);
  const size_t traced = keys.size();
  if (recent_.size() >= 5 && traced >= 5 && warnings_ < 2) {
    ++warnings_;
    TF_LOG_WARN(
        "{} out of the last {} calls to {} triggered tf::function retracing. Tracing is "
        "expensive and the excessive number of tracings could be due to (1) calling it with "
        "tensors of different shapes or dtypes each time, (2) passing different plain C++ "
        "values (each value is part of the signature), (3) calling it on different devices. "
        "Give it an input_signature or pass tensors instead of C++ values.",
        traced, recent_.size(), name());
  }
}

std::shared_ptr<ConcreteFunction> FunctionCore::pin(const std::string& key,
                                                    std::shared_ptr<ConcreteFunction> f) {
  std::lock_guard lock(mu_);
  return pinned_.try_emplace(key, std::move(f)).first->second;
}

std::shared_ptr<ConcreteFunction> FunctionCore::pinned_generic(const std::string& key) const {
  std::lock_guard lock(mu_);
  auto it = pinned_generic_.find(key);
  return it == pinned_generic_.end() ? nullptr : it->second;
}

std::shared_ptr<ConcreteFunction> FunctionCore::pin_generic(const std::string& key,
                                                            std::shared_ptr<ConcreteFunction> f) {
  std::lock_guard lock(mu_);
  return pinned_generic_.try_emplace(key, std::move(f)).first->second;
}

void FunctionCore::throw_undefined(size_t index) const {
  TF_THROW(InvalidArgumentError, name().c_str(),
           "tensor argument {} is undefined (a default-constructed tf::Tensor); pass a tensor",
           index);
}

void FunctionCore::check_signature(const std::vector<Tensor>& tensors, size_t values) const {
  const auto& sig = options_.input_signature;
  if (sig.empty()) return;
  const std::string n = name();
  TF_CHECK_ARG(tensors.size() == sig.size(), n.c_str(),
               "the input_signature has {} tensors, the call passed {}{}", sig.size(),
               tensors.size(),
               values == 0 ? std::string()
                           : fmt::format(" and {} plain C++ value{} (plain values are not "
                                         "tensors: pass tf::constant(value) for a signature's "
                                         "tensor)",
                                         values, values == 1 ? "" : "s"));
  for (size_t i = 0; i < sig.size(); ++i) {
    const Tensor& t = tensors[i];
    TF_CHECK_ARG(sig[i].is_compatible_with(t.shape()) && sig[i].dtype == t.dtype(), n.c_str(),
                 "argument {}{} has shape {} and dtype {}, which does not match the "
                 "input_signature's {} {}",
                 i, sig[i].name.empty() ? "" : " ('" + sig[i].name + "')", t.shape().to_string(),
                 dtype_name(t.dtype()), sig[i].shape.to_string(), dtype_name(sig[i].dtype));
  }
}

void FunctionCore::check_specs(const std::vector<TensorSpec>& specs) const {
  const auto& sig = options_.input_signature;
  if (sig.empty()) return;
  const std::string n = name();
  TF_CHECK_ARG(specs.size() == sig.size(), n.c_str(),
               "the input_signature has {} tensors, get_concrete_function was given {} specs",
               sig.size(), specs.size());
  for (size_t i = 0; i < sig.size(); ++i) {
    // A None dimension of the spec matches only a None dimension of the signature: the graph
    // must serve every size the spec allows.
    bool ok = specs[i].dtype == sig[i].dtype && specs[i].shape.rank() == sig[i].shape.rank();
    for (int d = 0; ok && d < sig[i].shape.rank(); ++d)
      ok = sig[i].shape[d] == None || sig[i].shape[d] == specs[i].shape[d];
    TF_CHECK_ARG(ok, n.c_str(),
                 "spec {} is {} {}, which does not match the input_signature's {} {}", i,
                 specs[i].shape.to_string(), dtype_name(specs[i].dtype),
                 sig[i].shape.to_string(), dtype_name(sig[i].dtype));
  }
}

void FunctionCore::optimize(Graph& graph, uint64_t first_traced_id, bool jit_compile) {
  jit::optimize(graph, first_traced_id);
  if (jit::fusion_enabled()) {
    jit::fuse_variable_updates(graph);
    const jit::FusionOptions fusion{.cuda = jit_compile};
    jit::fuse_elementwise(graph, fusion);
    jit::update_variables_in_place(graph, fusion);
  }
  graph.prepare(jit::memory_planning_enabled(), jit_compile && jit::cuda_graphs_enabled());
}

// On: on an H200 (2026-12-04, bench_cuda, medians) the generated kernels and the CUDA-graph
// replay beat the unfused node-by-node replay everywhere: a 6-op chain over 16M floats 0.042 ms
// against 0.236, 100 tiny ops 11.4 us against 603, the MLP train step 73 us against 212.
// CPU graphs are the same either way (no generated kernels, never captured).
bool default_jit_compile() {
  return true;
}

bool FunctionCore::jit_compile() const {
  // Read once: TAPEFLOW_JIT_COMPILE=1 (or 0) sets jit_compile for every function.
  static const std::optional<bool> forced = jit::env_switch("TAPEFLOW_JIT_COMPILE");
  return forced.value_or(options_.jit_compile.value_or(default_jit_compile()));
}

namespace {
// While tracing, the caller's tapes are paused (they record the replay instead, which runs
// through dispatch when a tape is active); tapes created inside the body record the trace.
struct TraceSession {
  PauseTapes pause;
  jit::Tracer tracer;
  explicit TraceSession(Graph& g) : tracer(g) {}
};
}  // namespace

std::shared_ptr<void> begin_trace(Graph& graph) { return std::make_shared<TraceSession>(graph); }

Tensor trace_input(const std::shared_ptr<void>& session, const Tensor& t) {
  TF_CHECK_ARG(t.defined(), "function", "a tensor argument is undefined");
  return static_cast<TraceSession*>(session.get())
      ->tracer.add_input(TensorMeta{t.shape(), t.dtype()}, t.placement());
}

void end_trace(const std::shared_ptr<void>& session, const std::vector<Tensor>& outputs) {
  static_cast<TraceSession*>(session.get())->tracer.set_outputs(outputs);
}

}  // namespace tapeflow::detail
