#include "autograd/variable.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <ostream>
#include <utility>

#include "autograd/tape.h"
#include "core/check.h"
#include "core/context.h"
#include "ops/binary.h"
#include "ops/copy.h"
#include "ops/dispatch.h"
#include "ops/helpers.h"
#include "ops/unary.h"

namespace tapeflow {

namespace {
std::atomic<uint64_t> g_variables_made{0};
}  // namespace

struct Variable::State {
  const uint64_t serial = g_variables_made.fetch_add(1, std::memory_order_relaxed);
  std::mutex mu;
  Tensor value;
  std::string name;
  bool trainable = true;
  TensorShape shape;
  DType dtype;
  Device device;
  // A mirrored variable: one plain state per replica device (this state then only names them).
  std::vector<std::shared_ptr<State>> mirrors;
};

namespace detail {
namespace {
thread_local MirrorSpec t_mirror;
thread_local int t_replica_component = -1;
thread_local bool t_writes_in_place = false;
thread_local const ReplicaVariableCreator* t_replica_creator = nullptr;
thread_local VariableReadWatcher* t_read_watcher = nullptr;
thread_local std::optional<DType> t_autocast;
}  // namespace
VariableReadWatcher::VariableReadWatcher() : outer_(std::exchange(t_read_watcher, this)) {}
VariableReadWatcher::~VariableReadWatcher() {
  t_read_watcher = outer_;
}
AutocastScope::AutocastScope(std::optional<DType> dtype)
    : saved_(std::exchange(t_autocast, dtype)) {}
AutocastScope::~AutocastScope() {
  t_autocast = saved_;
}
std::optional<DType> autocast_dtype() {
  return t_autocast;
}

void VariableReadWatcher::note(const Variable& v) {
  for (VariableReadWatcher* w = this; w != nullptr; w = w->outer_) {
    const bool seen = std::any_of(w->read_.begin(), w->read_.end(), [&](const Variable& r) {
      return r.handle_id() == v.handle_id();
    });
    if (!seen) w->read_.push_back(v);
  }
}
VariableWritesInPlaceScope::VariableWritesInPlaceScope()
    : saved_(std::exchange(t_writes_in_place, true)) {}
VariableWritesInPlaceScope::~VariableWritesInPlaceScope() { t_writes_in_place = saved_; }
MirrorVariablesScope::MirrorVariablesScope(std::vector<Device> devices)
    : MirrorVariablesScope(MirrorSpec{std::move(devices), {}}) {}
MirrorVariablesScope::MirrorVariablesScope(MirrorSpec spec)
    : saved_(std::exchange(t_mirror, std::move(spec))),
      saved_creator_(std::exchange(t_replica_creator, nullptr)) {}
MirrorVariablesScope::~MirrorVariablesScope() {
  t_mirror = std::move(saved_);
  t_replica_creator = saved_creator_;
}
ReplicaVariableCreatorScope::ReplicaVariableCreatorScope(const ReplicaVariableCreator* creator)
    : saved_(std::exchange(t_replica_creator, creator)) {}
ReplicaVariableCreatorScope::~ReplicaVariableCreatorScope() {
  t_replica_creator = saved_;
}
const MirrorSpec& mirror_spec() { return t_mirror; }
const std::vector<Device>& mirror_devices() { return t_mirror.devices; }
ReplicaComponentScope::ReplicaComponentScope(int index)
    : saved_(std::exchange(t_replica_component, index)) {}
ReplicaComponentScope::~ReplicaComponentScope() { t_replica_component = saved_; }
int replica_component() { return t_replica_component; }
}  // namespace detail

namespace {

// Whether nothing but the variable holds its value's buffer (no snapshot): it may be written in
// place.
bool sole_owner(const Tensor& value) {
  const auto& storage = value.impl()->storage;
  return storage && storage.use_count() == 1 && value.impl().use_count() == 1;
}

// Inside a VariableWritesInPlaceScope: the write must go to the variable's own buffer.
void require_in_place(const Variable::State& s, const char* op) {
  TF_CHECK_T(FailedPreconditionError, sole_owner(s.value), op,
             "'{}' must be written in place (a CUDA-graph capture records its buffer), but "
             "another tensor holds that buffer: a read of the variable still in use, or a "
             "snapshot",
             s.name);
}

// Graph nodes for variables inside a traced tf::function: at every replay a read returns the
// variable's current buffer and an assignment writes it, in program order (both are marked as
// side effects, so graph passes neither drop nor merge them).
struct ReadVariableOp final : PrimitiveBase<ReadVariableOp> {
  std::shared_ptr<Variable::State> state;
  explicit ReadVariableOp(std::shared_ptr<Variable::State> s) : state(std::move(s)) {}
  const char* name() const override { return "read_variable"; }
  void infer(std::span<const Tensor>, std::span<TensorMeta> out) const override;
  void eval_cpu(std::span<const Tensor>, std::span<Tensor>) const override;
  void eval_cuda(std::span<const Tensor>, std::span<Tensor>) const override;
  bool produce(std::span<const Tensor>, std::span<Tensor> out, Device) const override {
    out[0] = Variable::from_state(state).read_value();  // the trace recorded any autocast
    return true;
  }
  bool has_side_effects() const override { return true; }
  std::optional<Device> target_device() const override;
  std::string attributes() const override;
};

struct AssignVariableOp final : PrimitiveBase<AssignVariableOp> {
  std::shared_ptr<Variable::State> state;
  explicit AssignVariableOp(std::shared_ptr<Variable::State> s) : state(std::move(s)) {}
  const char* name() const override { return "assign_variable"; }
  int num_outputs() const override { return 0; }
  void infer(std::span<const Tensor>, std::span<TensorMeta>) const override {}
  void eval_cpu(std::span<const Tensor>, std::span<Tensor>) const override;
  void eval_cuda(std::span<const Tensor>, std::span<Tensor>) const override;
  bool produce(std::span<const Tensor> in, std::span<Tensor>, Device) const override {
    Variable v = Variable::from_state(state);
    v.assign(in[0]);
    return true;
  }
  bool has_side_effects() const override { return true; }
  std::vector<const void*> written_variables() const override { return {state.get()}; }
  std::optional<Device> target_device() const override;
  std::string attributes() const override;
};

}  // namespace

Variable::Variable(const Tensor& initial_value, std::string name, bool trainable) {
  TF_CHECK_ARG(initial_value.defined(), "Variable", "the initial value of '{}' is undefined",
               name);
  TF_CHECK_T(FailedPreconditionError, detail::thread_context().trace == nullptr, "Variable",
             "cannot create the variable '{}' inside a traced tf::function: a graph replays its "
             "ops at every call and would not create it again; create the variable outside the "
             "function and capture it",
             name);
  if (const detail::ReplicaVariableCreator* create = detail::t_replica_creator) {
    // Made in a replica function: every replica's call meets in one mirrored variable.
    state_ = (*create)(initial_value, name, trainable).state_;
    return;
  }
  // TF names the variable's tensor "<name>:0".
  if (name.find(':') == std::string::npos) name += ":0";
  auto make = [&](const Tensor& value, Device device) {
    auto s = std::make_shared<State>();
    s->device = device;
    // A private copy: two variables never share memory.
    if (value.defined()) s->value = detail::copy_to_device(value, device);
    s->name = name;
    s->trainable = trainable;
    s->shape = initial_value.shape();
    s->dtype = initial_value.dtype();
    return s;
  };
  const detail::MirrorSpec& spec = detail::mirror_spec();
  const auto& mirror = spec.devices;
  if (mirror.empty()) {
    state_ = make(initial_value, detail::current_device());
    return;
  }
  Tensor init = initial_value;
  if (spec.initial_value) {
    init = spec.initial_value(initial_value, name);
    TF_ASSERT(init.shape() == initial_value.shape() && init.dtype() == initial_value.dtype());
  }
  auto s = make(Tensor(), mirror.front());  // names the copies, which hold the values
  for (Device d : mirror) s->mirrors.push_back(make(init, d));
  state_ = std::move(s);
}

static Variable::State& checked(const std::shared_ptr<Variable::State>& s) {
  TF_CHECK_T(FailedPreconditionError, s != nullptr, "Variable",
             "the variable handle is empty (default-constructed)");
  return *s;
}

// The state that reads and writes act on: the replica's copy of a mirrored variable inside a
// replica, its first copy outside one.
static const std::shared_ptr<Variable::State>& resolved(const std::shared_ptr<Variable::State>& p) {
  auto& s = checked(p);
  if (s.mirrors.empty()) return p;
  const int r = detail::replica_component();
  if (r < 0) return s.mirrors.front();
  TF_CHECK_T(FailedPreconditionError, r < static_cast<int>(s.mirrors.size()), "Variable",
             "'{}' is mirrored over {} devices but is used in replica {}; create it in the "
             "scope of the strategy that runs it",
             s.name, s.mirrors.size(), r);
  return s.mirrors[static_cast<size_t>(r)];
}

uint64_t Variable::creation_order() const {
  return checked(state_).serial;
}

bool Variable::is_mirrored() const { return !checked(state_).mirrors.empty(); }

std::vector<Variable> Variable::components() const {
  auto& s = checked(state_);
  if (s.mirrors.empty()) return {*this};
  std::vector<Variable> out;
  for (const auto& m : s.mirrors) out.push_back(from_state(m));
  return out;
}

Tensor Variable::value() const {
  Tensor v = read_value();
  // Keras' autocasting inside a mixed-precision layer's call (detail::AutocastScope).
  if (detail::t_autocast && is_floating(v.dtype()) && v.dtype() != *detail::t_autocast)
    return cast(v, *detail::t_autocast);
  return v;
}

Tensor Variable::read_value() const {
  const auto& target = resolved(state_);
  auto& s = *target;
  if (detail::t_read_watcher != nullptr && s.trainable) detail::t_read_watcher->note(*this);
  auto& ctx = detail::thread_context();
  if (ctx.trace) {
    // Tracing: a graph node that reads the variable at every replay.
    Tensor read = detail::dispatch(ReadVariableOp(target), {});
    for (detail::TapeObserver* t : ctx.tapes)
      if (auto* tape = dynamic_cast<GradientTape*>(t)) tape->variable_read(*this, read);
    return read;
  }
  Tensor v;
  {
    std::lock_guard lock(s.mu);
    v = s.value;
  }
  auto& tapes = detail::thread_context().tapes;
  if (tapes.empty()) return v;
  // A read under tapes: a fresh handle (its own id) that each tape may watch.
  Tensor read = detail::view(v, v.shape());
  for (detail::TapeObserver* t : tapes)
    if (auto* tape = dynamic_cast<GradientTape*>(t)) tape->variable_read(*this, read);
  return read;
}

namespace {

// `value` as the variable's dtype, checked against its shape and dtype.
Tensor assignable(const Variable::State& s, const Tensor& value, const char* op) {
  TF_CHECK_ARG(value.defined(), op, "cannot assign an undefined tensor to '{}'", s.name);
  // A symbolic tensor kept from a trace that ended has no storage to copy from.
  TF_CHECK_T(FailedPreconditionError,
             !value.is_symbolic() || detail::thread_context().trace != nullptr, op,
             "the value assigned to '{}' is a symbolic tensor from a finished trace; symbolic "
             "tensors exist only while a tf::function is being traced",
             s.name);
  Tensor v = detail::adopt_dtype(value, s.dtype, op);
  TF_CHECK_ARG(v.shape() == s.shape && v.dtype() == s.dtype, op,
               "variable '{}' has shape {} and dtype {}, the value has shape {} and dtype {}",
               s.name, s.shape.to_string(), dtype_name(s.dtype), v.shape().to_string(),
               dtype_name(v.dtype()));
  return v;
}

// Makes v (checked by assignable) the value; the caller holds s.mu.
void write_locked(Variable::State& s, const Tensor& v, const char* op) {
  const auto& vs = v.impl()->storage;
  const bool whole = vs && v.impl()->offset == 0 && vs->nbytes == v.nbytes();
  if (detail::t_writes_in_place) {
    require_in_place(s, op);
    if (v.raw_data() != s.value.raw_data())
      detail::copy_bytes(s.value.raw_data(), s.device, v.raw_data(), v.placement(), v.nbytes());
  } else if (whole && v.placement() == s.device && !v.is_weak()) {
    // A tensor that owns exactly its buffer on the variable's device: adopt it (tensors are
    // immutable, and later in-place writes check that nobody else holds the buffer).
    s.value = v;
  } else if (sole_owner(s.value)) {
    // Nobody holds a snapshot: write in place (a view or a value from another device).
    detail::copy_bytes(s.value.raw_data(), s.device, v.raw_data(), v.placement(), v.nbytes());
  } else {
    // A snapshot shares the current buffer: write a new one (never alias the caller's view).
    Tensor fresh = detail::empty(s.shape, s.dtype, s.device);
    detail::copy_bytes(fresh.raw_data(), s.device, v.raw_data(), v.placement(), v.nbytes());
    s.value = std::move(fresh);
  }
}

}  // namespace

Variable& Variable::assign(const Tensor& value) {
  auto& p = checked(state_);
  if (!p.mirrors.empty() && detail::replica_component() < 0) {
    // Cross-replica context: every copy takes the value.
    for (const auto& m : p.mirrors) from_state(m).assign(value);
    return *this;
  }
  const auto& target = resolved(state_);
  auto& s = *target;
  const Tensor v = assignable(s, value, "assign");
  if (detail::thread_context().trace) {
    // Tracing: a graph node that writes the variable at every replay.
    const Tensor in[1] = {v};
    detail::dispatch_multi(AssignVariableOp(target), in);
    return *this;
  }
  std::lock_guard lock(s.mu);
  write_locked(s, v, "assign");
  return *this;
}

void Variable::update(const std::function<void(Tensor& value)>& write) {
  auto& s = *resolved(state_);
  TF_ASSERT(detail::thread_context().trace == nullptr);
  std::lock_guard lock(s.mu);
  if (detail::t_writes_in_place) require_in_place(s, "update");
  if (sole_owner(s.value)) {
    write(s.value);
    return;
  }
  Tensor fresh = detail::empty(s.shape, s.dtype, s.device);
  detail::copy_bytes(fresh.raw_data(), s.device, s.value.raw_data(), s.device, s.value.nbytes());
  write(fresh);
  s.value = std::move(fresh);
}

// Updates are state changes, not differentiable ops: tapes do not record them.
Variable& Variable::assign_add(const Tensor& delta) { return update_by(delta, false); }
Variable& Variable::assign_sub(const Tensor& delta) { return update_by(delta, true); }

Variable& Variable::update_by(const Tensor& delta, bool sub) {
  {
    // Checked before the arithmetic, so that errors name this op and the delta as given (TF:
    // the shapes must be equal; a scalar is also accepted here and added to every element).
    const char* op = sub ? "assign_sub" : "assign_add";
    const auto& s = checked(state_);
    TF_CHECK_ARG(delta.defined(), op, "the delta for '{}' is an undefined tensor", s.name);
    const Tensor d = detail::adopt_dtype(delta, s.dtype, op);
    TF_CHECK_ARG(d.dtype() == s.dtype && (d.shape() == s.shape || d.rank() == 0), op,
                 "variable '{}' has shape {} and dtype {}, the delta has shape {} and dtype {} "
                 "(a delta has the variable's shape and dtype, or is a scalar)",
                 s.name, s.shape.to_string(), dtype_name(s.dtype), d.shape().to_string(),
                 dtype_name(d.dtype()));
  }
  detail::PauseTapes pause;
  if (is_mirrored() && detail::replica_component() < 0) {
    for (auto& c : components()) c.update_by(delta, sub);
    return *this;
  }
  if (detail::thread_context().trace) {
    // Traced: a read, the op and a write, graph nodes in program order.
    const Tensor current = read_value();
    return assign(sub ? subtract(current, delta) : add(current, delta));
  }
  // Eager: read, combine and write under the variable's lock, so that updates from several
  // threads at once are never lost (TF's AssignAddVariableOp holds the variable's lock too).
  auto& s = *resolved(state_);
  const char* op = sub ? "assign_sub" : "assign_add";
  std::lock_guard lock(s.mu);
  Tensor result;
  {
    // The current value is released before the write (which may then write in place).
    const Tensor current = s.value;
    result = sub ? subtract(current, delta) : add(current, delta);
  }
  write_locked(s, assignable(s, result, op), op);
  return *this;
}

const std::string& Variable::name() const { return checked(state_).name; }
const TensorShape& Variable::shape() const { return checked(state_).shape; }
DType Variable::dtype() const { return checked(state_).dtype; }
bool Variable::trainable() const { return checked(state_).trainable; }
std::string Variable::device() const { return resolved(state_)->device.to_string(); }
Device Variable::placement() const { return resolved(state_)->device; }

namespace {
void ReadVariableOp::infer(std::span<const Tensor>, std::span<TensorMeta> out) const {
  out[0] = {state->shape, state->dtype};
}
void ReadVariableOp::eval_cpu(std::span<const Tensor>, std::span<Tensor>) const {
  TF_THROW(InternalError, name(), "runs through produce(), never as a kernel");
}
void ReadVariableOp::eval_cuda(std::span<const Tensor>, std::span<Tensor>) const {
  TF_THROW(InternalError, name(), "runs through produce(), never as a kernel");
}
std::optional<Device> ReadVariableOp::target_device() const { return state->device; }
std::string ReadVariableOp::attributes() const { return "variable=" + state->name; }
void AssignVariableOp::eval_cpu(std::span<const Tensor>, std::span<Tensor>) const {
  TF_THROW(InternalError, name(), "runs through produce(), never as a kernel");
}
void AssignVariableOp::eval_cuda(std::span<const Tensor>, std::span<Tensor>) const {
  TF_THROW(InternalError, name(), "runs through produce(), never as a kernel");
}
std::optional<Device> AssignVariableOp::target_device() const { return state->device; }
std::string AssignVariableOp::attributes() const { return "variable=" + state->name; }
}  // namespace

namespace detail {
std::shared_ptr<Variable::State> read_variable_state(const Primitive& prim) {
  const auto* read = dynamic_cast<const ReadVariableOp*>(&prim);
  return read ? read->state : nullptr;
}
std::shared_ptr<Variable::State> assign_variable_state(const Primitive& prim) {
  const auto* assign = dynamic_cast<const AssignVariableOp*>(&prim);
  return assign ? assign->state : nullptr;
}
namespace {
Variable::State& state_of_handle(const void* handle) {
  TF_ASSERT(handle != nullptr);
  auto& s = const_cast<Variable::State&>(*static_cast<const Variable::State*>(handle));
  // Graph nodes hold the copy they act on, never a mirrored variable's naming state.
  TF_ASSERT(s.mirrors.empty());
  return s;
}
}  // namespace
VariableBuffer variable_buffer(const void* handle) {
  Variable::State& s = state_of_handle(handle);
  std::lock_guard lock(s.mu);
  if (!s.value.defined()) return {};
  return {s.value.impl()->storage.get(), s.value.raw_data(), sole_owner(s.value)};
}
void unshare_variable(const void* handle) {
  Variable::State& s = state_of_handle(handle);
  std::lock_guard lock(s.mu);
  if (!s.value.defined() || sole_owner(s.value)) return;
  Tensor fresh = detail::empty(s.shape, s.dtype, s.device);
  detail::copy_bytes(fresh.raw_data(), s.device, s.value.raw_data(), s.device, s.value.nbytes());
  s.value = std::move(fresh);
}
}  // namespace detail

std::ostream& operator<<(std::ostream& os, const Variable& v) {
  Tensor t = v.read_value();
  return os << "<tf.Variable '" << v.name() << "' shape=" << t.shape().to_string()
            << " dtype=" << dtype_name(t.dtype()) << ", numpy=" << detail::numpy_repr(t) << ">";
}

}  // namespace tapeflow
