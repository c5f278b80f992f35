// The Layer handle and the shared machinery of every layer: naming, the once-only thread-safe
// build, input checks, weights and their lists. The built-in layers are in layers_builtin.cpp.
#include "keras/layers.h"

#include <algorithm>
#include <cctype>
#include <deque>
#include <new>
#include <regex>
#include <string_view>
#include <tuple>
#include <unordered_map>

#include "autograd/tape.h"
#include "core/allocator.h"
#include "core/check.h"
#include "core/log.h"
#include "jit/subgraph_trace.h"
#include "keras/activations.h"
#include "keras/data_format.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/nn.h"
#include "ops/nn_more.h"
#include "ops/rethrow.h"
#include "ops/unary.h"

namespace tapeflow::keras {

namespace {
std::mutex g_floatx_mu;
DType g_floatx = float32;

// The layers whose call is running on this thread, innermost last (for member tracking).
thread_local std::vector<detail::LayerImpl*> t_call_stack;

// The masks of the masked calls running on this thread (LayerImpl::invoke_masked), innermost
// last; `depth` is t_call_stack's size when the call began, so that a layer reads a mask only in
// the call it was given to (not in a plain call nested inside it).
struct MaskFrame {
  const detail::LayerImpl* layer = nullptr;
  size_t depth = 0;
  Tensor mask;
  Tensor output_mask;
  bool output_mask_set = false;
};
thread_local std::vector<MaskFrame*> t_mask_frames;

MaskFrame* current_mask_frame(const detail::LayerImpl* layer) {
  if (t_mask_frames.empty()) return nullptr;
  MaskFrame* f = t_mask_frames.back();
  if (f->layer != layer || f->depth + 1 != t_call_stack.size() || t_call_stack.back() != layer)
    return nullptr;
  return f;
}
// Layers this thread is building (build() may call sublayers, and a model itself).
// Each with the depth of t_call_stack when its build began: a call of the layer opened after that
// (a subclassed model's shape probe) is a call, not the build.
thread_local std::vector<std::pair<const detail::LayerImpl*, size_t>> t_building;
bool is_building(const detail::LayerImpl* l) {
  return std::any_of(t_building.begin(), t_building.end(),
                     [l](const auto& b) { return b.first == l; });
}
// Whether `l`'s innermost activity on this thread is its build (add_weight's place).
bool in_build_proper(const detail::LayerImpl* l) {
  for (auto it = t_building.rbegin(); it != t_building.rend(); ++it)
    if (it->first == l)
      return std::find(t_call_stack.begin() + static_cast<std::ptrdiff_t>(it->second),
                       t_call_stack.end(), l) == t_call_stack.end();
  return false;
}
// Layers this thread is publishing as built (set_built_shapes hands deferred checkpoint values
// to their weights first): their weights are visible to this thread's checkpoint lookups.
thread_local std::vector<const detail::LayerImpl*> t_publishing;
// Nested layer calls beyond this depth are a layer that calls itself without end (or a cycle):
// an error before the thread's stack overflows.
constexpr size_t kMaxLayerNesting = 256;
// Outermost layer calls, numbered across threads: add_loss records belong to one of them.
std::atomic<uint64_t> g_outer_calls{0};
thread_local uint64_t t_outer_call = 0;  // this thread's current (or latest) outermost call
// BuildScopes open on this thread: calls inside one (a subclassed model's shape probe) are no
// forward pass of the user's, so their add_loss records are dropped.
thread_local int t_build_scopes = 0;
// Records kept per layer beyond this many threads drop the oldest.
constexpr size_t kMaxLossThreads = 64;
}  // namespace

namespace backend {
DType floatx() {
  std::lock_guard lock(g_floatx_mu);
  return g_floatx;
}
void set_floatx(DType dtype) {
  TF_CHECK_ARG(is_floating(dtype), "set_floatx", "floatx must be a floating dtype, got {}",
               dtype_name(dtype));
  std::lock_guard lock(g_floatx_mu);
  g_floatx = dtype;
}
}  // namespace backend

namespace activations {
Activation get(const std::string& name) {
  if (name.empty() || name == "linear") return nullptr;
  if (name == "relu") return [](const Tensor& x) { return nn::relu(x); };
  if (name == "softmax") return [](const Tensor& x) { return nn::softmax(x, -1); };
  if (name == "sigmoid") return [](const Tensor& x) { return tapeflow::sigmoid(x); };
  if (name == "tanh") return [](const Tensor& x) { return tapeflow::tanh(x); };
  // Keras 3's functions with their defaults (elu alpha 1, gelu exact, leaky_relu
  // negative_slope 0.2), on the TF backend: the tf.nn ops.
  if (name == "softplus") return [](const Tensor& x) { return nn::softplus(x); };
  if (name == "softsign") return [](const Tensor& x) { return nn::softsign(x); };
  if (name == "elu") return [](const Tensor& x) { return nn::elu(x); };
  if (name == "selu") return [](const Tensor& x) { return nn::selu(x); };
  if (name == "gelu") return [](const Tensor& x) { return nn::gelu(x, false); };
  if (name == "silu" || name == "swish") return [](const Tensor& x) { return nn::silu(x); };
  if (name == "leaky_relu") return [](const Tensor& x) { return nn::leaky_relu(x, 0.2); };
  if (name == "exponential") return [](const Tensor& x) { return tapeflow::exp(x); };
  if (name == "relu6") return [](const Tensor& x) { return nn::relu6(x); };
  if (name == "log_softmax") return [](const Tensor& x) { return nn::log_softmax(x, -1); };
  if (name == "log_sigmoid") return [](const Tensor& x) { return math::log_sigmoid(x); };
  // keras/activations.h, with Keras' defaults.
  if (name == "hard_sigmoid") return [](const Tensor& x) { return hard_sigmoid(x); };
  if (name == "hard_silu" || name == "hard_swish")
    return [](const Tensor& x) { return hard_silu(x); };
  if (name == "mish") return [](const Tensor& x) { return mish(x); };
  if (name == "celu") return [](const Tensor& x) { return celu(x); };
  if (name == "glu") return [](const Tensor& x) { return glu(x); };
  if (name == "hard_tanh") return [](const Tensor& x) { return hard_tanh(x); };
  if (name == "hard_shrink") return [](const Tensor& x) { return hard_shrink(x); };
  if (name == "soft_shrink") return [](const Tensor& x) { return soft_shrink(x); };
  if (name == "tanh_shrink") return [](const Tensor& x) { return tanh_shrink(x); };
  if (name == "squareplus") return [](const Tensor& x) { return squareplus(x); };
  if (name == "sparse_plus") return [](const Tensor& x) { return sparse_plus(x); };
  if (name == "sparse_sigmoid") return [](const Tensor& x) { return sparse_sigmoid(x); };
  if (name == "sparsemax") return [](const Tensor& x) { return sparsemax(x); };
  TF_THROW(InvalidArgumentError, "activations",
           "unknown activation function '{}': expected one of relu, softmax, sigmoid, tanh, "
           "softplus, softsign, elu, selu, gelu, silu, swish, leaky_relu, exponential, relu6, "
           "log_softmax, log_sigmoid, hard_sigmoid, hard_silu, hard_swish, mish, celu, glu, "
           "hard_tanh, hard_shrink, soft_shrink, tanh_shrink, squareplus, sparse_plus, "
           "sparse_sigmoid, sparsemax, linear or \"\"",
           name);
}
}  // namespace activations

namespace detail {

CallFrame::CallFrame(LayerImpl* layer) { t_call_stack.push_back(layer); }
CallFrame::~CallFrame() { t_call_stack.pop_back(); }

std::string unique_name(const std::string& base) {
  static std::mutex mu;
  static std::unordered_map<std::string, int> counts;
  std::lock_guard lock(mu);
  const int n = counts[base]++;
  return n == 0 ? base : base + "_" + std::to_string(n);
}

std::string to_snake_case(const std::string& class_name) {
  static const std::regex first("(.)([A-Z][a-z0-9]+)");
  static const std::regex second("([a-z])([A-Z])");
  std::string s = std::regex_replace(class_name, first, "$1_$2");
  s = std::regex_replace(s, second, "$1_$2");
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (!s.empty() && s[0] == '_') s = "private" + s;
  return s;
}

TensorShape with_unknown_batch(TensorShape shape) {
  if (shape.rank() > 0) shape[0] = None;
  return shape;
}

BuildScope::BuildScope(const ::tapeflow::detail::MirrorSpec& mirror)
    : saved_trace_(std::exchange(::tapeflow::detail::thread_context().trace, nullptr)),
      mirror_(mirror),
      replica_(-1) {
  ++t_build_scopes;
}
BuildScope::~BuildScope() {
  --t_build_scopes;
  ::tapeflow::detail::thread_context().trace = saved_trace_;
}

LayerImpl::LayerImpl(std::string class_name, const std::string& generic_name, std::string name)
    : class_name_(std::move(class_name)),
      name_(name.empty() ? (generic_name.empty() ? std::string() : unique_name(generic_name))
                         : name),
      auto_named_(name.empty()),
      mirror_spec_(::tapeflow::detail::mirror_spec()) {
  // Keras 3: a layer keeps the global policy of its construction.
  const mixed_precision::Policy policy = mixed_precision::global_policy();
  dtype_ = policy.variable_dtype();
  compute_dtype_ = policy.compute_dtype();
  policy_name_ = policy.name();
}

void LayerImpl::set_dtype_policy(const mixed_precision::Policy& policy) {
  bool has_weights = false;
  {
    std::lock_guard lock(weights_mu_);
    has_weights = !weights_.empty();
  }
  TF_CHECK_T(FailedPreconditionError, !built() && !has_weights, name().c_str(),
             "layer \"{}\" ({}) already has weights in {}: set its dtype policy (to \"{}\") "
             "before it is built",
             name(), class_name(), dtype_name(dtype_), policy.name());
  dtype_ = policy.variable_dtype();
  compute_dtype_ = policy.compute_dtype();
  policy_name_ = policy.name();
}

Tensor LayerImpl::invoke(const Tensor& x, bool training) {
  TF_CHECK_ARG(x.defined(), name().c_str(),
               "the input of layer \"{}\" is an undefined tensor (TF's None)", name());
  TF_CHECK_T(FailedPreconditionError, t_call_stack.size() < kMaxLayerNesting, name().c_str(),
             "layer calls are nested {} deep at layer \"{}\": a layer that calls itself "
             "without end, or layers that contain each other",
             t_call_stack.size(), name());
  if (!t_call_stack.empty() && t_call_stack.back() != this)
    t_call_stack.back()->on_sublayer_called(*this);
  // Keras clears a layer's add_loss records when a call begins that is not part of the
  // outermost call that recorded them.
  if (t_call_stack.empty()) t_outer_call = ++g_outer_calls;
  note_call(t_outer_call);
  CallFrame frame(this);
  try {
    return run(x, training);
  } catch (const Error& e) {
    rethrow_from_call(e, {x});
  }
}

void LayerImpl::rethrow_from_call(const Error& e, const std::vector<Tensor>& inputs) const {
  // Keras' "Exception encountered when calling Conv2D.call()": an error that does not name
  // this layer first (an op's, a sub-layer's) gets the layer and its inputs in front.
  const std::string n = name();
  const std::string_view what = e.what();
  if (what.starts_with("[" + n + "]")) throw;
  std::vector<std::string> described;
  for (const Tensor& t : inputs)
    described.push_back(t.defined()
                            ? fmt::format("{} {}", dtype_name(t.dtype()), t.shape().to_string())
                            : std::string("an undefined tensor"));
  const std::string on =
      inputs.size() == 1 ? described[0] : fmt::format("[{}]", fmt::join(described, ", "));
  ::tapeflow::detail::rethrow_with_message(
      e, fmt::format("[{}] layer \"{}\" ({}) called on {}: {}", n, n, class_name(), on, what));
}

MaskedTensor LayerImpl::invoke_masked(const Tensor& x, const Tensor& mask, bool training) {
  TF_CHECK_ARG(x.defined(), name().c_str(),
               "the input of layer \"{}\" is an undefined tensor (TF's None)", name());
  Tensor m = mask;
  if (m.defined()) {
    const TensorShape& ms = m.shape();
    const TensorShape& xs = x.shape();
    bool ok = ms.rank() >= 1 && ms.rank() <= xs.rank();
    if (mask_broadcasts_from_last_axis()) {
      for (int j = 1; ok && j <= ms.rank(); ++j) {
        const int64_t md = ms[ms.rank() - j], xd = xs[xs.rank() - j];
        ok = md == xd || md == 1 || md == None || xd == None;
      }
      TF_CHECK_ARG(ok, name().c_str(),
                   "layer \"{}\" ({}) was given a mask of shape {} for an input of shape {}: "
                   "the mask must broadcast against the input from its last axis (each "
                   "dimension 1 or the input's), as Keras' Softmax",
                   name(), class_name(), ms.to_string(), xs.to_string());
    } else {
      for (int i = 0; ok && i < ms.rank(); ++i)
        ok = ms[i] == xs[i] || ms[i] == None || xs[i] == None;
      TF_CHECK_ARG(ok, name().c_str(),
                   "layer \"{}\" ({}) was given a mask of shape {} for an input of shape {}: "
                   "the mask must have the input's leading dimensions, e.g. (batch, timesteps)",
                   name(), class_name(), ms.to_string(), xs.to_string());
    }
    if (m.dtype() != bool_) m = not_equal(m, zeros_like(m));
  }
  MaskFrame frame;
  frame.layer = this;
  frame.depth = t_call_stack.size();
  frame.mask = m;
  t_mask_frames.push_back(&frame);
  Tensor y;
  try {
    y = invoke(x, training);
  } catch (...) {
    t_mask_frames.pop_back();
    throw;
  }
  t_mask_frames.pop_back();
  if (frame.output_mask_set) return {y, frame.output_mask};
  if (supports_masking()) return {y, compute_mask(x, m)};
  if (m.defined() && !warned_mask_drop_.exchange(true))
    TF_LOG_WARN(
        "Layer \"{}\" ({}) was passed an input with a mask attached to it, but does not "
        "support masking and drops the mask: downstream layers will not see it",
        name(), class_name());
  return {y, Tensor()};
}

Tensor LayerImpl::call_mask() const {
  const MaskFrame* f = current_mask_frame(this);
  return f != nullptr ? f->mask : Tensor();
}

void LayerImpl::set_output_mask(const Tensor& mask) {
  MaskFrame* f = current_mask_frame(this);
  if (f == nullptr) return;  // a plain call: nobody asks for the mask
  f->output_mask = mask;
  f->output_mask_set = true;
}

Tensor LayerImpl::run(const Tensor& x, bool training) {
  // Keras' convert_input: floating inputs to the compute dtype (to the variable dtype for a
  // layer that does not autocast, which computes in it).
  const DType in_dtype = autocast() ? compute_dtype_ : dtype_;
  Tensor in = x;
  if (in.dtype() != in_dtype && (is_floating(in.dtype()) || casts_all_inputs()))
    in = cast(in, in_dtype);
  ensure_built(in.shape());
  check_input(in.shape());
  // Keras' autocast scope around the call: variable reads come as the compute dtype in a mixed
  // layer; a layer that does not autocast (or does not compute in a floating dtype) clears an
  // outer layer's scope, and a layer of another compute dtype replaces it.
  std::optional<::tapeflow::detail::AutocastScope> scope;
  const auto outer = ::tapeflow::detail::autocast_dtype();
  if (outer) {
    if (!autocast() || !is_floating(compute_dtype_))
      scope.emplace(std::nullopt);
    else if (*outer != compute_dtype_)
      scope.emplace(compute_dtype_);
  } else if (compute_dtype_ != dtype_ && autocast()) {
    scope.emplace(compute_dtype_);
  }
  Tensor y = call(in, training);
  if (!autocast() && compute_dtype_ != dtype_ && y.defined() && is_floating(y.dtype()) &&
      y.dtype() != compute_dtype_)
    y = cast(y, compute_dtype_);
  return y;
}

void LayerImpl::ensure_built(const TensorShape& input_shape) {
  if (built()) return;
  // Called again while this thread builds it (a subclassed model's build calls call(), which
  // may call the model itself): that call runs as the build does, without building again (it
  // deadlocked on build_mu_). A cycle of layers then recurses until the nesting limit.
  if (is_building(this)) return;
  // Replica threads may arrive together: one builds, the others wait here and then reuse it.
  std::lock_guard lock(build_mu_);
  if (built_.load(std::memory_order_relaxed)) return;
  const TensorShape s = with_unknown_batch(input_shape);
  TensorShape out;
  // A failed build removes its weights: a later call retries from scratch.
  run_as_build([&] {
    build(s);
    out = compute_output_shape(s);
  });
  set_built_shapes(s, out);
}

bool LayerImpl::building_here() const {
  return is_building(this);
}

void LayerImpl::run_as_build(const std::function<void()>& fn) {
  BuildScope scope(mirror_spec_);
  uint64_t pass = 0, outer_pass = 0;
  {
    std::lock_guard lock(weights_mu_);
    outer_pass = build_pass_;
    pass = build_pass_ = ++build_passes_;
  }
  t_building.emplace_back(this, t_call_stack.size());
  auto finish = [&](bool ok) {
    t_building.pop_back();
    std::lock_guard lock(weights_mu_);
    if (ok) {
      for (auto& w : weights_)
        if (w.pass == pass) w.published = true;
    } else {
      std::erase_if(weights_, [&](const Weight& w) { return w.pass == pass && !w.outside_build; });
      for (auto& w : weights_)
        if (w.pass == pass) w.pass = 0;
    }
    build_pass_ = outer_pass;
  };
  try {
    fn();
  } catch (...) {
    finish(false);
    throw;
  }
  finish(true);
}

void LayerImpl::set_built_shapes(const TensorShape& input_shape,
                                 const TensorShape& output_shape) {
  {
    std::lock_guard lock(shape_mu_);
    if (built_.load(std::memory_order_relaxed) || publishing_) return;
    publishing_ = true;
    input_shape_ = input_shape;
    output_shape_ = output_shape;
  }
  // Deferred checkpoint values reach the new weights before the layer is published as built: a
  // thread that finds it built (ensure_built's fast path) computes with them. Meanwhile this
  // thread sees the layer's weights (built_here). A value that fails is raised after the layer
  // is published; it keeps waiting (the status's waiting() lists it).
  t_publishing.push_back(this);
  std::exception_ptr error;
  try {
    after_build();
  } catch (...) {
    error = std::current_exception();
  }
  t_publishing.pop_back();
  built_.store(true, std::memory_order_release);
  if (error) std::rethrow_exception(error);
}

bool LayerImpl::built_here() const {
  return built() || std::find(t_publishing.begin(), t_publishing.end(), this) != t_publishing.end();
}

void LayerImpl::defer_restore(std::string tracked_name, DeferredRestore restore) {
  std::lock_guard lock(deferred_mu_);
  deferred_.emplace_back(std::move(tracked_name), std::move(restore));
  has_deferred_.store(true, std::memory_order_release);
}

bool LayerImpl::stateful() const {
  for (const Layer& child : sublayers())
    if (child.impl().stateful()) return true;
  return false;
}

void LayerImpl::reset_states() {
  for (const Layer& child : sublayers()) child.impl().reset_states();
}

bool LayerImpl::fully_built() const {
  std::vector<const LayerImpl*> todo{this};
  std::vector<const LayerImpl*> seen;
  while (!todo.empty()) {
    const LayerImpl* l = todo.back();
    todo.pop_back();
    if (std::find(seen.begin(), seen.end(), l) != seen.end()) continue;
    seen.push_back(l);
    if (!l->built_here()) return false;
    for (const Layer& child : l->sublayers()) todo.push_back(&child.impl());
  }
  return true;
}

void LayerImpl::after_build() {
  // Every holder gets its turn even when one fails; the first error is rethrown after.
  std::exception_ptr first_error;
  auto run = [&](LayerImpl* holder) {
    try {
      holder->restore_deferred();
    } catch (...) {
      if (!first_error) first_error = std::current_exception();
    }
  };
  const std::vector<LayerImpl*> callers = t_call_stack;  // innermost last
  for (auto it = callers.rbegin(); it != callers.rend(); ++it)
    if (*it != this && (*it)->has_deferred_.load(std::memory_order_acquire)) run(*it);
  run(this);
  if (first_error) std::rethrow_exception(first_error);
}

void LayerImpl::restore_deferred() {
  if (!has_deferred_.load(std::memory_order_acquire)) return;
  const auto tracked = Layer(shared_from_this()).tracked_variables();
  std::vector<std::tuple<std::string, DeferredRestore, Variable>> ready;
  std::vector<std::string> leftovers;
  {
    std::lock_guard lock(deferred_mu_);
    for (auto it = deferred_.begin(); it != deferred_.end();) {
      auto t = std::find_if(tracked.begin(), tracked.end(),
                            [&](const auto& nv) { return nv.first == it->first; });
      if (t == tracked.end()) {
        ++it;
        continue;
      }
      ready.emplace_back(it->first, std::move(it->second), t->second);
      it = deferred_.erase(it);
    }
    if (deferred_.empty()) has_deferred_.store(false, std::memory_order_release);
    // Values still waiting once everything below is built: say so once. They keep waiting (a
    // subclassed model's layer that its calls have not reached yet may still create them).
    if (!deferred_.empty() && !warned_leftovers_ && fully_built()) {
      warned_leftovers_ = true;
      for (const auto& [name, fn] : deferred_) leftovers.push_back(name);
    }
  }
  if (!leftovers.empty())
    TF_LOG_WARN(
        "\"{}\" ({}) was built without weights named {}: their checkpoint values wait for "
        "layers that create them",
        name(), class_name(), fmt::join(leftovers, ", "));
  // Every value is handed over even when one fails (it keeps waiting, so the restore's status
  // still lists it); the first error is rethrown after.
  BuildScope scope(mirror_spec_);
  std::exception_ptr first_error;
  for (auto& [tracked_name, restore, variable] : ready) {
    try {
      restore(variable);
    } catch (...) {
      if (!first_error) first_error = std::current_exception();
    }
  }
  if (first_error) std::rethrow_exception(first_error);
}

void LayerImpl::set_output_shape(const TensorShape& output_shape) {
  std::lock_guard lock(shape_mu_);
  output_shape_ = output_shape;
}

void LayerImpl::build_from_declared_shape(const std::vector<int64_t>& input_shape) {
  TensorShape s;
  s.push_back(None);
  for (int64_t d : input_shape) {
    TF_CHECK_ARG(d > 0 || d == None, name_.c_str(),
                 "input_shape of layer \"{}\" must have positive sizes (or tf::None), got ({})",
                 name_, fmt::join(input_shape, ", "));
    s.push_back(d);
  }
  declared_input_shape_ = s;
  ensure_built(s);
}

TensorShape LayerImpl::built_input_shape() const {
  TF_CHECK_T(FailedPreconditionError, built(), name().c_str(),
             "layer \"{}\" has not been built yet: call it on a batch of data or call build()",
             name());
  std::lock_guard lock(shape_mu_);
  return input_shape_;
}
TensorShape LayerImpl::built_output_shape() const {
  TF_CHECK_T(FailedPreconditionError, built(), name().c_str(),
             "layer \"{}\" has not been built yet: call it on a batch of data or call build()",
             name());
  std::lock_guard lock(shape_mu_);
  return output_shape_;
}

void LayerImpl::check_input(const TensorShape& s) const {
  if (!declared_input_shape_) return;
  const TensorShape& d = *declared_input_shape_;
  bool ok = s.rank() == d.rank();
  for (int i = 1; ok && i < d.rank(); ++i) ok = d[i] == None || s[i] == None || d[i] == s[i];
  if (!ok) incompatible(s, fmt::format("expected shape={}", d.to_string()));
}

void LayerImpl::incompatible(const TensorShape& got, const std::string& expectation) const {
  const std::string n = name();
  TF_THROW(InvalidArgumentError, n.c_str(),
           "Input 0 of layer \"{}\" ({}) is incompatible with the layer: {}, found shape={}", n,
           class_name(), expectation, got.to_string());
}

void LayerImpl::require_rank_and_channels(const TensorShape& got, int rank, int64_t channels,
                                          bool channels_first) const {
  const DataFormat f = channels_first ? DataFormat::first() : DataFormat();
  const std::string m = f.mismatch(got, rank, channels);
  if (!m.empty())
    incompatible(got, fmt::format("{} (the layer was built for input shape {})", m,
                                  built_input_shape().to_string()));
}

Variable LayerImpl::add_weight(const std::string& name, const TensorShape& shape,
                               const Initializer& initializer, bool trainable,
                               const Regularizer& regularizer, const Constraint& constraint) {
  const std::string n = this->name();
  const bool in_build = in_build_proper(this);
  if (!in_build) {
    TF_CHECK_T(FailedPreconditionError,
               std::find(t_call_stack.begin(), t_call_stack.end(), this) == t_call_stack.end(),
               n.c_str(),
               "add_weight('{}') inside a call of layer \"{}\": create weights in build() (or "
               "the constructor), not in call()",
               name, n);
    TF_CHECK_T(FailedPreconditionError, !built(), n.c_str(),
               "add_weight('{}'): layer \"{}\" is already built; weights are created in build() "
               "(or the constructor)",
               name, n);
  }
  TF_CHECK_ARG(!name.empty() && name.find('/') == std::string::npos, n.c_str(),
               "add_weight: a weight name must be non-empty and without '/', got '{}'", name);
  for (int64_t d : shape.dims())
    TF_CHECK_ARG(d >= 0, n.c_str(),
                 "add_weight('{}'): the shape must be fully defined (no tf::None), got {}", name,
                 shape.to_string());
  {
    std::lock_guard lock(weights_mu_);
    for (auto& w : weights_) {
      if (w.name != name) continue;
      // A weight made before the build (a direct call of the build override) is the one the
      // build asks for again.
      const bool reusable = in_build && w.outside_build && w.pass != build_pass_ &&
                            w.variable.shape() == shape && w.variable.trainable() == trainable;
      TF_CHECK_ARG(reusable, n.c_str(),
                   "layer \"{}\" ({}) already has a weight named '{}': weight names must be "
                   "unique within a layer",
                   n, class_name(), name);
      w.pass = build_pass_;
      if (constraint.defined()) constraints::attach(w.variable, constraint);
      return w.variable;
    }
  }
  Variable v;
  {
    // Outside a build (a constructor) the initial value is still computed eagerly, mirrored as
    // the layer's weights are.
    std::optional<BuildScope> scope;
    if (!in_build) scope.emplace(mirror_spec_);
    const Initializer& init = initializer.defined() ? initializer : Initializer("glorot_uniform");
    // Initializers stage their values as doubles: refuse a weight this machine cannot hold
    // (Dense(2^40)) up front, naming the layer, rather than failing deep in an allocation.
    const double need =
        static_cast<double>(shape.num_elements()) * static_cast<double>(8 + dtype_size(dtype_));
    TF_CHECK_T(ResourceExhaustedError,
               need <= static_cast<double>(::tapeflow::detail::host_memory_bytes()), n.c_str(),
               "layer \"{}\" ({}): weight '{}' of shape {} and dtype {} needs {:.1f} GiB to "
               "initialize, more than this machine's {:.1f} GiB of RAM and swap",
               n, class_name(), name, shape.to_string(), dtype_name(dtype_), need / (1 << 30),
               static_cast<double>(::tapeflow::detail::host_memory_bytes()) / (1 << 30));
    try {
      v = Variable(init(shape, dtype_), n + "/" + name, trainable);
    } catch (const std::bad_alloc&) {
      TF_THROW(ResourceExhaustedError, n.c_str(),
               "layer \"{}\" ({}): out of host memory initializing weight '{}' of shape {}", n,
               class_name(), name, shape.to_string());
    }
  }
  if (constraint.defined()) constraints::attach(v, constraint);
  std::lock_guard lock(weights_mu_);
  weights_.push_back({.name = name,
                      .variable = v,
                      .regularizer = regularizer,
                      .outside_build = !in_build,
                      .published = !in_build,
                      .pass = in_build ? build_pass_ : 0});
  return v;
}

const std::vector<Weight>& LayerImpl::visible_weights(std::vector<Weight>& scratch) const {
  if (built()) return weights_;
  std::lock_guard lock(weights_mu_);
  scratch.clear();
  for (const auto& w : weights_)
    if (visible(w)) scratch.push_back(w);
  return scratch;
}

void LayerImpl::note_call(uint64_t call) {
  // Most layers never see add_loss: their calls skip the lock (records start in add_loss).
  if (!has_call_records_.load(std::memory_order_acquire)) return;
  std::lock_guard lock(losses_mu_);
  note_call_locked(call);
}

LayerImpl::CallLosses& LayerImpl::note_call_locked(uint64_t call) {
  const auto me = std::this_thread::get_id();
  for (auto& r : call_losses_) {
    if (r.thread != me) continue;
    if (r.call != call) {
      r.call = call;
      r.losses.clear();
    }
    return r;
  }
  if (call_losses_.size() >= kMaxLossThreads) {
    auto oldest = std::min_element(call_losses_.begin(), call_losses_.end(),
                                   [](const auto& a, const auto& b) { return a.call < b.call; });
    call_losses_.erase(oldest);
  }
  call_losses_.push_back({me, call, {}});
  return call_losses_.back();
}

void LayerImpl::add_loss(const Tensor& loss) {
  const std::string n = name();
  TF_CHECK_ARG(loss.defined(), n.c_str(), "add_loss: the loss is an undefined tensor");
  TF_CHECK_T(FailedPreconditionError,
             std::find(t_call_stack.begin(), t_call_stack.end(), this) != t_call_stack.end(),
             n.c_str(),
             "add_loss() outside a call of layer \"{}\": call it inside call(), where Keras "
             "records the losses of the forward pass",
             n);
  if (t_build_scopes > 0) return;  // a shape probe, not the user's forward pass
  TF_CHECK_T(FailedPreconditionError, !jit::tracing_subgraph(), n.c_str(),
             "add_loss() of layer \"{}\" inside a traced loop or branch (an RNN's timesteps, "
             "tf::map_fn, tf::cond): the loss cannot leave it; give the RNN unroll = true, or "
             "add the loss outside",
             n);
  // Notes the current call in this layer and in its callers on this thread. The first loss
  // starts their records (until then their calls note nothing); a caller whose records another
  // thread began during this call gets its record for this thread here.
  for (LayerImpl* l : t_call_stack) {
    if (l == this) continue;
    std::lock_guard lock(l->losses_mu_);
    l->note_call_locked(t_outer_call);
    l->has_call_records_.store(true, std::memory_order_release);
  }
  std::lock_guard lock(losses_mu_);
  note_call_locked(t_outer_call).losses.push_back(loss);
  has_call_records_.store(true, std::memory_order_release);
}

std::vector<Tensor> LayerImpl::added_losses() const {
  // The call to report: this thread's latest, else the latest on any thread.
  std::thread::id thread;
  uint64_t call = 0;
  {
    const auto me = std::this_thread::get_id();
    std::lock_guard lock(losses_mu_);
    for (const auto& r : call_losses_)
      if (r.thread == me || (thread != me && r.call > call)) {
        thread = r.thread;
        call = r.call;
      }
  }
  if (call == 0) return {};
  // Keras' _flatten_layers: this layer, then a deque of sub-layers where each visited layer's
  // own sub-layers go to the front (extendleft, so in reverse order).
  std::vector<const LayerImpl*> order{this};
  std::vector<const void*> seen;
  std::deque<Layer> todo;
  for (const Layer& l : sublayers()) todo.push_back(l);
  while (!todo.empty()) {
    const Layer l = todo.front();
    todo.pop_front();
    if (std::find(seen.begin(), seen.end(), l.id()) != seen.end()) continue;
    seen.push_back(l.id());
    order.push_back(&l.impl());
    for (const Layer& child : l.impl().sublayers()) todo.push_front(child);
  }
  // Graph values of another trace (or of a finished one, seen eagerly) are not this caller's.
  const bool tracing = ::tapeflow::detail::thread_context().trace != nullptr;
  std::vector<Tensor> out;
  for (const LayerImpl* l : order) {
    std::lock_guard lock(l->losses_mu_);
    for (const auto& r : l->call_losses_)
      if (r.thread == thread && r.call == call)
        for (const Tensor& t : r.losses)
          if (tracing || !t.is_symbolic()) out.push_back(t);
  }
  return out;
}

const Variable& LayerImpl::weight(const std::string& name) const {
  TF_CHECK_T(FailedPreconditionError, built(), name_.c_str(),
             "layer \"{}\" has not been built yet, so it has no weight '{}': its weights are "
             "created on the first call (or by build(input_shape))",
             name_, name);
  for (const auto& w : weights_)
    if (w.name == name) return w.variable;
  TF_THROW(FailedPreconditionError, name_.c_str(), "layer \"{}\" ({}) has no weight '{}'", name_,
           class_name(), name);
}

void LayerImpl::set_trainable(bool t) {
  trainable_.store(t, std::memory_order_relaxed);
  for (const Layer& child : sublayers()) child.impl().set_trainable(t);
}

void LayerImpl::collect(std::vector<std::pair<Variable, bool>>& out, bool parent_trainable,
                        std::vector<const void*>& seen) const {
  const bool effective = parent_trainable && trainable();
  // Keras 3's layer.weights: own trainable weights, own non-trainable ones, then sub-layers.
  std::vector<Weight> scratch;
  const std::vector<Weight>& own = visible_weights(scratch);
  for (const bool trainable_group : {true, false})
    for (const auto& w : own) {
      if (w.variable.trainable() != trainable_group) continue;
      if (std::find(seen.begin(), seen.end(), w.variable.handle_id()) != seen.end()) continue;
      seen.push_back(w.variable.handle_id());
      out.emplace_back(w.variable, effective && w.variable.trainable());
    }
  for (const Layer& child : sublayers()) child.impl().collect(out, effective, seen);
}

std::string LayerImpl::local_base_name() const {
  const std::string n = name();
  if (!auto_named_) return n;
  // "dense_12" -> "dense": automatic names are "<base>" or "<base>_<number>".
  const size_t us = n.rfind('_');
  if (us == std::string::npos || us + 1 == n.size()) return n;
  for (size_t i = us + 1; i < n.size(); ++i)
    if (n[i] < '0' || n[i] > '9') return n;
  return n.substr(0, us);
}

void LayerImpl::collect_tracked(std::vector<std::pair<std::string, Variable>>& out,
                                std::vector<const void*>& seen_layers, const std::string& path,
                                bool root) const {
  if (std::find(seen_layers.begin(), seen_layers.end(), this) != seen_layers.end()) return;
  seen_layers.push_back(this);
  std::vector<Weight> scratch;
  for (const auto& w : built_here() ? weights_ : visible_weights(scratch))
    out.emplace_back(path + "/" + w.name, w.variable);
  // Names by position among siblings, not the process-wide automatic names, so a second model
  // of the same architecture (or the same program in another process) matches a checkpoint.
  // Explicit names are kept (two equal ones clash below, as Keras refuses them); automatic
  // ones take their base and the first free number ("dense", "dense_1", ...).
  const std::vector<Layer> children = sublayers();
  std::vector<std::string> taken;
  for (const Layer& child : children)
    if (!child.impl().auto_named_) taken.push_back(child.impl().name());
  for (const Layer& child : children) {
    std::string local = child.impl().local_base_name();
    if (child.impl().auto_named_) {
      const std::string base = local;
      for (int k = 1; std::find(taken.begin(), taken.end(), local) != taken.end(); ++k)
        local = base + "_" + std::to_string(k);
      taken.push_back(local);
    }
    child.impl().collect_tracked(out, seen_layers, root ? local : path + "/" + local, false);
  }
}

void LayerImpl::collect_losses(std::vector<Tensor>& out, bool parent_trainable,
                               std::vector<const void*>& seen) const {
  const bool effective = parent_trainable && trainable();
  if (!effective) return;  // Keras 3 penalises trainable weights only
  std::vector<Weight> scratch;
  for (const auto& w : visible_weights(scratch)) {
    if (!w.variable.trainable()) continue;
    if (std::find(seen.begin(), seen.end(), w.variable.handle_id()) != seen.end()) continue;
    seen.push_back(w.variable.handle_id());
    if (w.regularizer.defined()) out.push_back(w.regularizer(w.variable.value()));
  }
  for (const Layer& child : sublayers()) child.impl().collect_losses(out, effective, seen);
}

}  // namespace detail

// ---- Layer handle ----

detail::LayerImpl& Layer::impl() const {
  TF_CHECK_T(FailedPreconditionError, impl_ != nullptr, "Layer",
             "the layer handle is empty (default-constructed)");
  return *impl_;
}

Tensor Layer::operator()(const Tensor& x, bool training) const {
  return impl().invoke(x, training);
}
MaskedTensor Layer::call_with_mask(const Tensor& x, const Tensor& mask, bool training) const {
  return impl().invoke_masked(x, mask, training);
}
bool Layer::supports_masking() const {
  return impl().supports_masking();
}
Tensor Layer::compute_mask(const Tensor& x, const Tensor& mask) const {
  return impl().supports_masking() ? impl().compute_mask(x, mask) : Tensor();
}
std::string Layer::name() const { return impl().name(); }
std::string Layer::class_name() const { return impl().class_name(); }
bool Layer::built() const { return impl().built(); }
DType Layer::dtype() const { return impl().dtype(); }
DType Layer::compute_dtype() const {
  return impl().compute_dtype();
}
mixed_precision::Policy Layer::dtype_policy() const {
  return mixed_precision::Policy(impl().policy_name());
}
void Layer::set_dtype_policy(const mixed_precision::Policy& policy) const {
  impl().set_dtype_policy(policy);
}
void Layer::build(const TensorShape& input_shape) const { impl().ensure_built(input_shape); }
TensorShape Layer::input_shape() const { return impl().built_input_shape(); }
TensorShape Layer::output_shape() const { return impl().built_output_shape(); }

namespace {
// variables() with each one's effective trainability; `which`: 1 trainable, 0 not, -1 all.
std::vector<Variable> weight_list(const detail::LayerImpl& l, int which) {
  std::vector<std::pair<Variable, bool>> all;
  std::vector<const void*> seen;
  l.collect(all, true, seen);
  std::vector<Variable> out;
  for (auto& [v, t] : all)
    if (which < 0 || t == (which == 1)) out.push_back(v);
  return out;
}
}  // namespace

std::vector<Variable> Layer::trainable_variables() const {
  return weight_list(impl(), 1);
}
std::vector<Variable> Layer::non_trainable_variables() const {
  return weight_list(impl(), 0);
}
std::vector<Variable> Layer::variables() const {
  return weight_list(impl(), -1);
}
std::vector<Tensor> Layer::get_weights() const {
  std::vector<Tensor> out;
  for (const auto& v : variables()) out.push_back(v.value());
  return out;
}
void Layer::set_weights(const std::vector<Tensor>& values) const {
  auto vars = variables();
  const std::string n = name();
  TF_CHECK_ARG(values.size() == vars.size(), n.c_str(),
               "set_weights: layer \"{}\" has {} weights, {} values were given", n, vars.size(),
               values.size());
  for (size_t i = 0; i < vars.size(); ++i)
    TF_CHECK_ARG(values[i].defined() && values[i].shape() == vars[i].shape(), n.c_str(),
                 "set_weights: weight '{}' has shape {}, the value {} has shape {}",
                 vars[i].name(), vars[i].shape().to_string(), i,
                 values[i].defined() ? values[i].shape().to_string() : "undefined");
  for (size_t i = 0; i < vars.size(); ++i) vars[i].assign(values[i]);
}
int64_t Layer::count_params() const {
  int64_t n = 0;
  for (const auto& v : variables()) n += v.shape().num_elements();
  return n;
}
std::vector<Tensor> Layer::losses() const {
  std::vector<Tensor> out = impl().added_losses();
  std::vector<const void*> seen;
  impl().collect_losses(out, true, seen);
  return out;
}
bool Layer::trainable() const { return impl().trainable(); }
void Layer::set_trainable(bool trainable) const { impl().set_trainable(trainable); }

std::vector<std::pair<std::string, Variable>> Layer::tracked_variables() const {
  std::vector<std::pair<std::string, Variable>> out;
  std::vector<const void*> seen;
  impl().collect_tracked(out, seen, impl().local_base_name(), true);
  // A checkpoint matches weights by these names, so two layers with one name would clash.
  std::vector<std::string> names;
  for (const auto& [n, v] : out) {
    TF_CHECK_ARG(std::find(names.begin(), names.end(), n) == names.end(), name().c_str(),
                 "two weights of \"{}\" are named '{}': the layers inside a model need unique "
                 "names (rename one of the layers called \"{}\")",
                 name(), n, n.substr(0, n.rfind('/')));
    names.push_back(n);
  }
  return out;
}

}  // namespace tapeflow::keras
