#include "jit/function.h"

#include <algorithm>

#include "autograd/tape.h"
#include "core/check.h"
#include "core/log.h"
#include "ops/dispatch.h"
#include "jit/fusion.h"
#include "jit/passes.h"
#include "jit/tracer.h"

namespace tapeflow::detail {

void SignatureKey::add_tensor(const Tensor& t) {
  const char tag = 't';
  add_raw(&tag, 1);
  const int r = t.rank();
  add_raw(&r, sizeof r);
  for (int d = 0; d < r; ++d) {
    const int64_t v = t.shape()[d];
    add_raw(&v, sizeof v);
  }
  const DType dt = t.dtype();
  add_raw(&dt, sizeof dt);
  const Device dev = t.placement();
  add_raw(&dev, sizeof dev);
}

std::string current_device_key() {
  const Device d = current_device();
  return std::string(reinterpret_cast<const char*>(&d), sizeof d);
}

Tensor example_for(const TensorSpec& spec) {
  TF_CHECK_ARG(spec.shape.is_fully_defined(), "get_concrete_function",
               "the spec shape {} has unknown (None) dimensions; tapeflow traces one graph per "
               "fully known shape",
               spec.shape.to_string());
  return symbolic(spec.shape, spec.dtype, current_device());
}

FunctionCore::FunctionCore(FunctionOptions options) : options_(std::move(options)) {}

std::string FunctionCore::name() const {
  return options_.name.empty() ? std::string("function") : options_.name;
}

std::shared_ptr<ConcreteFunction> FunctionCore::lookup(const std::string& key) {
  std::lock_guard lock(mu_);
  auto it = index_.find(key);
  const bool hit = it != index_.end();
  recent_.push_back(!hit);
  if (recent_.size() > 10) recent_.erase(recent_.begin());
  if (!hit) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);  // most recently used first
  return it->second->second;
}

void FunctionCore::insert(const std::string& key, std::shared_ptr<ConcreteFunction> f) {
  std::lock_guard lock(mu_);
  if (index_.count(key)) return;  // another thread traced the same signature meanwhile
  ++tracing_count_;
  lru_.emplace_front(key, std::move(f));
  index_[key] = lru_.begin();
  if (lru_.size() > kMaxCached) {
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
  const auto traced = std::count(recent_.begin(), recent_.end(), true);
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

void FunctionCore::pin(std::shared_ptr<ConcreteFunction> f) {
  std::lock_guard lock(mu_);
  if (std::find(pinned_.begin(), pinned_.end(), f) == pinned_.end()) pinned_.push_back(std::move(f));
}

void FunctionCore::check_signature(const std::vector<Tensor>& tensors) const {
  const auto& sig = options_.input_signature;
  if (sig.empty()) return;
  const std::string n = name();
  TF_CHECK_ARG(tensors.size() == sig.size(), n.c_str(),
               "the input_signature has {} tensors, the call passed {}", sig.size(),
               tensors.size());
  for (size_t i = 0; i < sig.size(); ++i) {
    const Tensor& t = tensors[i];
    TF_CHECK_ARG(sig[i].is_compatible_with(t.shape()) && sig[i].dtype == t.dtype(), n.c_str(),
                 "argument {}{} has shape {} and dtype {}, which does not match the "
                 "input_signature's {} {}",
                 i, sig[i].name.empty() ? "" : " ('" + sig[i].name + "')", t.shape().to_string(),
                 dtype_name(t.dtype()), sig[i].shape.to_string(), dtype_name(sig[i].dtype));
  }
}

void FunctionCore::optimize(Graph& graph, uint64_t first_traced_id) {
  jit::optimize(graph, first_traced_id);
  jit::fuse_elementwise(graph);
  graph.prepare();
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
