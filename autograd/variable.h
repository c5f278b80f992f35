// Variable: a mutable, shared handle to a tensor value (copying a Variable refers to the same
// state). Reads return immutable snapshots; assignments keep the shape and dtype fixed and
// write in place when no snapshot shares the buffer (copy-on-write otherwise). Reads and
// writes of one Variable are serialised by its mutex.
#pragma once

#include <iosfwd>
#include <memory>
#include <string>

#include "core/tensor.h"

namespace tapeflow {

class Variable {
 public:
  // An unusable handle (for containers); every method but defined() throws.
  Variable() = default;
  // The variable lives on the device of the innermost DeviceScope (TF's default placement
  // without one); the initial value is copied there.
  Variable(const Tensor& initial_value, std::string name = "Variable", bool trainable = true);

  bool defined() const { return state_ != nullptr; }
  // A snapshot of the current value (later assignments do not change it). While a
  // GradientTape records, each read is a fresh tensor that the tape may watch.
  Tensor value() const;
  operator Tensor() const { return value(); }

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

  struct State;

 private:
  std::shared_ptr<State> state_;
};

// <tf.Variable 'name:0' shape=(2, 2) dtype=float32, numpy=
// array([[0., 0.],
//        [0., 0.]], dtype=float32)>
std::ostream& operator<<(std::ostream& os, const Variable& v);

namespace detail {
// numpy's repr() text of a tensor's value ("array([1., 2.], dtype=float32)"), core/print.cpp.
std::string numpy_repr(const Tensor& t);
}  // namespace detail

}  // namespace tapeflow
