#include "autograd/variable.h"

#include "autograd/tape.h"
#include "core/context.h"
#include <mutex>
#include <ostream>

#include "core/check.h"
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

Variable::Variable(const Tensor& initial_value, std::string name, bool trainable) {
  TF_CHECK_ARG(initial_value.defined(), "Variable", "the initial value of '{}' is undefined",
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
  std::lock_guard lock(s.mu);
  auto& storage = s.value.impl()->storage;
  if (storage && storage.use_count() == 1 && s.value.impl().use_count() == 1 &&
      !v.is_symbolic()) {
    // Nobody holds a snapshot: write in place.
    detail::copy_bytes(s.value.raw_data(), s.device, v.raw_data(), v.placement(), v.nbytes());
  } else {
    s.value = v.placement() == s.device && !v.is_weak() ? v : detail::copy_to_device(v, s.device);
  }
  return *this;
}

// Updates are state changes, not differentiable ops: tapes do not record them.
Variable& Variable::assign_add(const Tensor& delta) {
  auto& s = checked(state_);
  Tensor cur;
  {
    std::lock_guard lock(s.mu);
    cur = s.value;
  }
  detail::PauseTapes pause;
  return assign(add(cur, delta));
}
Variable& Variable::assign_sub(const Tensor& delta) {
  auto& s = checked(state_);
  Tensor cur;
  {
    std::lock_guard lock(s.mu);
    cur = s.value;
  }
  detail::PauseTapes pause;
  return assign(subtract(cur, delta));
}

const std::string& Variable::name() const { return checked(state_).name; }
const TensorShape& Variable::shape() const { return checked(state_).shape; }
DType Variable::dtype() const { return checked(state_).dtype; }
bool Variable::trainable() const { return checked(state_).trainable; }
std::string Variable::device() const { return checked(state_).device.to_string(); }
Device Variable::placement() const { return checked(state_).device; }

std::ostream& operator<<(std::ostream& os, const Variable& v) {
  Tensor t = v.value();
  return os << "<tf.Variable '" << v.name() << "' shape=" << t.shape().to_string()
            << " dtype=" << dtype_name(t.dtype()) << ", numpy=" << detail::numpy_repr(t) << ">";
}

}  // namespace tapeflow
