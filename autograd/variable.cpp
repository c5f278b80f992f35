#include "autograd/variable.h"

#include <mutex>
#include <ostream>

#include "autograd/tape.h"
#include "core/check.h"
#include "core/context.h"
#include "ops/binary.h"
#include "ops/copy.h"
#include "ops/dispatch.h"
#include "ops/helpers.h"

namespace tapeflow {

struct Variable::State {
  std::mutex mu;
  Tensor value;
  std::string name;
  bool trainable = true;
  TensorShape shape;
  DType dtype;
  Device device;
};

namespace {

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
    out[0] = Variable::from_state(state).value();
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
  auto s = std::make_shared<State>();
  s->device = detail::current_device();
  // A private copy: two variables never share memory.
  s->value = detail::copy_to_device(initial_value, s->device);
  // TF names the variable's tensor "<name>:0".
  if (name.find(':') == std::string::npos) name += ":0";
  s->name = std::move(name);
  s->trainable = trainable;
  s->shape = initial_value.shape();
  s->dtype = initial_value.dtype();
  state_ = std::move(s);
}

static Variable::State& checked(const std::shared_ptr<Variable::State>& s) {
  TF_CHECK_T(FailedPreconditionError, s != nullptr, "Variable",
             "the variable handle is empty (default-constructed)");
  return *s;
}

Tensor Variable::value() const {
  auto& s = checked(state_);
  auto& ctx = detail::thread_context();
  if (ctx.trace) {
    // Tracing: a graph node that reads the variable at every replay.
    Tensor read = detail::dispatch(ReadVariableOp(state_), {});
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

Variable& Variable::assign(const Tensor& value) {
  auto& s = checked(state_);
  TF_CHECK_ARG(value.defined(), "assign", "cannot assign an undefined tensor to '{}'", s.name);
  Tensor v = detail::adopt_dtype(value, s.dtype);
  TF_CHECK_ARG(v.shape() == s.shape && v.dtype() == s.dtype, "assign",
               "variable '{}' has shape {} and dtype {}, the value has shape {} and dtype {}",
               s.name, s.shape.to_string(), dtype_name(s.dtype), v.shape().to_string(),
               dtype_name(v.dtype()));
  if (detail::thread_context().trace) {
    // Tracing: a graph node that writes the variable at every replay.
    const Tensor in[1] = {v};
    detail::dispatch_multi(AssignVariableOp(state_), in);
    return *this;
  }
  std::lock_guard lock(s.mu);
  const auto& vs = v.impl()->storage;
  const bool whole = vs && v.impl()->offset == 0 && vs->nbytes == v.nbytes();
  auto& storage = s.value.impl()->storage;
  if (whole && v.placement() == s.device && !v.is_weak()) {
    // A tensor that owns exactly its buffer on the variable's device: adopt it (tensors are
    // immutable, and later in-place writes check that nobody else holds the buffer).
    s.value = v;
  } else if (storage && storage.use_count() == 1 && s.value.impl().use_count() == 1) {
    // Nobody holds a snapshot: write in place (a view or a value from another device).
    detail::copy_bytes(s.value.raw_data(), s.device, v.raw_data(), v.placement(), v.nbytes());
  } else {
    // A snapshot shares the current buffer: write a new one (never alias the caller's view).
    Tensor fresh = detail::empty(s.shape, s.dtype, s.device);
    detail::copy_bytes(fresh.raw_data(), s.device, v.raw_data(), v.placement(), v.nbytes());
    s.value = std::move(fresh);
  }
  return *this;
}

// The value an update starts from: the variable's buffer, or a traced read inside a trace.
Tensor Variable::current_for_update() const {
  auto& s = checked(state_);
  if (detail::thread_context().trace) return value();
  std::lock_guard lock(s.mu);
  return s.value;
}

// Updates are state changes, not differentiable ops: tapes do not record them.
Variable& Variable::assign_add(const Tensor& delta) {
  detail::PauseTapes pause;
  return assign(add(current_for_update(), delta));
}
Variable& Variable::assign_sub(const Tensor& delta) {
  detail::PauseTapes pause;
  return assign(subtract(current_for_update(), delta));
}

const std::string& Variable::name() const { return checked(state_).name; }
const TensorShape& Variable::shape() const { return checked(state_).shape; }
DType Variable::dtype() const { return checked(state_).dtype; }
bool Variable::trainable() const { return checked(state_).trainable; }
std::string Variable::device() const { return checked(state_).device.to_string(); }
Device Variable::placement() const { return checked(state_).device; }

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

std::ostream& operator<<(std::ostream& os, const Variable& v) {
  Tensor t = v.value();
  return os << "<tf.Variable '" << v.name() << "' shape=" << t.shape().to_string()
            << " dtype=" << dtype_name(t.dtype()) << ", numpy=" << detail::numpy_repr(t) << ">";
}

}  // namespace tapeflow
