// Variable: a mutable, shared handle to a tensor value (copying a Variable refers to the same
// state). Reads return immutable snapshots; assignments keep the shape and dtype fixed and
// write in place when no snapshot shares the buffer (copy-on-write otherwise). Reads and
// writes of one Variable are serialised by its mutex.
#pragma once

#include <iosfwd>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace tapeflow {

class Primitive;

class Variable {
 public:
  // An unusable handle (for containers); every method but defined() throws.
  Variable() = default;
  // The variable lives on the device of the innermost DeviceScope (TF's default placement
  // without one); the initial value is copied there.
  Variable(const Tensor& initial_value, std::string name = "Variable", bool trainable = true);

  bool defined() const { return state_ != nullptr; }
  // A snapshot of the current value (later assignments do not change it). While a
  // GradientTape records, each read is a fresh tensor that the tape may watch. Inside a traced
  // tf::function, reads and assignments become graph nodes that run at every replay.
  // Inside a detail::AutocastScope a floating variable's read comes cast to the scope's dtype.
  Tensor value() const;
  operator Tensor() const { return value(); }
  // value() in the variable's own dtype, whatever AutocastScope is open.
  Tensor read_value() const;

  // Assignments return *this, as TF's return the updated variable.
  Variable& assign(const Tensor& value);
  Variable& assign_add(const Tensor& delta);
  Variable& assign_sub(const Tensor& delta);

  // As TF: "weights:0" for a variable made with the name "weights".
  const std::string& name() const;
  const TensorShape& shape() const;
  DType dtype() const;
  bool trainable() const;
  // "/device:CPU:0"
  std::string device() const;
  Device placement() const;
  // Identity of the shared state (same for all copies of this handle).
  const void* handle_id() const { return state_.get(); }
  // Internal: increases with each variable made in the process (TF's variable ids: orders
  // GradientTape::watched_variables).
  uint64_t creation_order() const;

  // Mirrored variables (made under a strategy's scope, see detail::MirrorVariablesScope) hold
  // one copy per replica device. Inside a replica (detail::ReplicaComponentScope) every method
  // resolves to that replica's copy; outside, reads see the first copy and assignments write
  // every copy (TF's cross-replica context).
  bool is_mirrored() const;
  // The per-device copies as plain variables (one entry, *this, when not mirrored).
  std::vector<Variable> components() const;

  struct State;
  // Internal: the state's identity without keeping it alive (an optimizer's slots are keyed
  // by the variables they belong to, and must not outlive them with their weights).
  std::weak_ptr<State> weak_state() const { return state_; }
  // Internal: a handle on existing state (graph replay of variable reads and writes).
  static Variable from_state(std::shared_ptr<State> state) {
    Variable v;
    v.state_ = std::move(state);
    return v;
  }
  // Internal (graph replay of updates fused into one node, jit/variable_update.h): calls
  // `write` with a tensor holding the current value, to update it where it lies, and makes it
  // the value. That is the variable's own buffer when no snapshot shares it (an update in
  // place), else a fresh copy (copy-on-write: snapshots keep their values). Runs under the
  // variable's lock, outside any trace; a mirrored variable resolves as for value().
  void update(const std::function<void(Tensor& value)>& write);

 private:
  // assign_add (sub false) and assign_sub.
  Variable& update_by(const Tensor& delta, bool sub);
  std::shared_ptr<State> state_;
};

// <tf.Variable 'name:0' shape=(2, 2) dtype=float32, numpy=
// array([[0., 0.],
//        [0., 0.]], dtype=float32)>
std::ostream& operator<<(std::ostream& os, const Variable& v);

namespace detail {
// While it lives on this thread, each Variable constructed on the thread is mirrored: one copy of
// the initial value on each listed device (distribute/'s strategy.scope() opens one). Scopes nest;
// an empty list turns mirroring off inside an outer scope.
// How new variables are mirrored: over `devices`; with `initial_value` set (a strategy spanning
// processes), every initial value passes through it first, with the variable's name (worker 0's
// value reaches every worker).
struct MirrorSpec {
  std::vector<Device> devices;
  std::function<Tensor(const Tensor& value, const std::string& name)> initial_value;
};
// What a replica thread of strategy.run does with a Variable constructed there without a
// MirrorVariablesScope of its own (TF: every replica makes it, and all get one mirrored variable
// holding replica 0's initial value): called with the constructor's arguments.
using ReplicaVariableCreator =
    std::function<Variable(const Tensor& initial_value, const std::string& name, bool trainable)>;
// While it lives on this thread, collects the trainable variables read on it, each once, in order
// of first read (TF's VariableWatcher: custom_gradient checks that its function reads none).
// Watchers nest; a read is noted by every live one.
class VariableReadWatcher {
 public:
  VariableReadWatcher();
  ~VariableReadWatcher();
  VariableReadWatcher(const VariableReadWatcher&) = delete;
  VariableReadWatcher& operator=(const VariableReadWatcher&) = delete;
  const std::vector<Variable>& read() const { return read_; }
  void note(const Variable& v);

 private:
  std::vector<Variable> read_;
  VariableReadWatcher* outer_;
};
// A MirrorVariablesScope decides the mirroring itself (a layer's build, optimizer slots): the
// thread's ReplicaVariableCreator is off while it lives.
class MirrorVariablesScope {
 public:
  explicit MirrorVariablesScope(std::vector<Device> devices);
  explicit MirrorVariablesScope(MirrorSpec spec);
  ~MirrorVariablesScope();
  MirrorVariablesScope(const MirrorVariablesScope&) = delete;
  MirrorVariablesScope& operator=(const MirrorVariablesScope&) = delete;

 private:
  MirrorSpec saved_;
  const ReplicaVariableCreator* saved_creator_;
};
// While it lives on this thread, Variables constructed outside any MirrorVariablesScope are made
// by `creator` (which must outlive the scope).
class ReplicaVariableCreatorScope {
 public:
  explicit ReplicaVariableCreatorScope(const ReplicaVariableCreator* creator);
  ~ReplicaVariableCreatorScope();
  ReplicaVariableCreatorScope(const ReplicaVariableCreatorScope&) = delete;
  ReplicaVariableCreatorScope& operator=(const ReplicaVariableCreatorScope&) = delete;

 private:
  const ReplicaVariableCreator* saved_;
};
// The mirroring in force on this thread (no devices: not mirrored).
const MirrorSpec& mirror_spec();
// The devices new variables are mirrored over on this thread (empty: not mirrored).
const std::vector<Device>& mirror_devices();

// While it lives on this thread, mirrored variables resolve to their copy number `index` (the
// replica id); distribute/'s replica threads open one. -1 (the default) is cross-replica.
class ReplicaComponentScope {
 public:
  explicit ReplicaComponentScope(int index);
  ~ReplicaComponentScope();
  ReplicaComponentScope(const ReplicaComponentScope&) = delete;
  ReplicaComponentScope& operator=(const ReplicaComponentScope&) = delete;

 private:
  int saved_;
};
int replica_component();

// Keras' AutocastScope (keras/mixed_precision.h): while one with a dtype lives on this thread,
// Variable::value() returns reads of floating variables of another dtype cast to it (the cast is
// an op after the read, so a tape sends the gradient back to the variable in its own dtype). A
// scope without a dtype turns autocasting off inside an outer one. Keras layers open one around
// their call under a mixed dtype policy.
class AutocastScope {
 public:
  explicit AutocastScope(std::optional<DType> dtype);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  std::optional<DType> saved_;
};
// The dtype of the innermost AutocastScope on this thread (none: no autocasting).
std::optional<DType> autocast_dtype();

// The variable state that a traced read (read_variable) or assignment (assign_variable) graph
// node acts on; null for every other primitive.
std::shared_ptr<Variable::State> read_variable_state(const Primitive& prim);
std::shared_ptr<Variable::State> assign_variable_state(const Primitive& prim);

// While one lives on this thread, writes to variables stay in the buffers the variables hold:
// an assignment copies its value into the variable's buffer instead of adopting the value's
// buffer, and an assignment or an update (Variable::update) of a buffer that a snapshot shares
// raises FailedPreconditionError before anything changes, instead of copying on write. A
// CUDA-graph capture of a traced step opens one (jit/cuda_graph.h): the captured kernels write
// the buffers they were recorded with, at every replay.
class VariableWritesInPlaceScope {
 public:
  VariableWritesInPlaceScope();
  ~VariableWritesInPlaceScope();
  VariableWritesInPlaceScope(const VariableWritesInPlaceScope&) = delete;
  VariableWritesInPlaceScope& operator=(const VariableWritesInPlaceScope&) = delete;

 private:
  bool saved_;
};

// The buffer a variable holds now: `storage` identifies the allocation (a tensor shares it when
// its impl()->storage is the same), `unshared` says whether nothing but the variable holds it.
// `handle` is the Variable::handle_id() of a plain (not mirrored) variable or of one copy of a
// mirrored one, as graph nodes hold them (what Primitive::written_variables() returns).
struct VariableBuffer {
  const void* storage = nullptr;
  const void* data = nullptr;
  bool unshared = false;
};
VariableBuffer variable_buffer(const void* handle);
// Gives the variable a buffer of its own when a snapshot shares its buffer (the copy a write
// would make; the snapshot keeps the old buffer). Same `handle` as variable_buffer.
void unshare_variable(const void* handle);

// numpy's repr() text of a tensor's value ("array([1., 2.], dtype=float32)"), core/print.cpp.
std::string numpy_repr(const Tensor& t);
}  // namespace detail

}  // namespace tapeflow
