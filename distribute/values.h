// PerReplica<T>: one value per replica of a strategy (TF's tf.distribute.DistributedValues of
// the PerReplica kind): what strategy.run returns and what a distributed dataset yields. An
// immutable list; safe to read from several threads.
#pragma once

#include <cstddef>
#include <ostream>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace tapeflow::distribute {

namespace detail {
// InvalidArgumentError: index `replica` of a PerReplica value with `size` components.
[[noreturn]] void throw_replica_index(size_t replica, size_t size);
}  // namespace detail

template <class T>
class PerReplica {
 public:
  PerReplica() = default;
  explicit PerReplica(std::vector<T> values) : values_(std::move(values)) {}

  // The components, in replica order (TF's per_replica.values).
  const std::vector<T>& values() const { return values_; }
  size_t size() const { return values_.size(); }
  // Component `replica`; an index >= size() is an InvalidArgumentError. (const_reference: a
  // PerReplica<bool>'s component is a bool value, std::vector<bool> holds no bools to refer to.)
  typename std::vector<T>::const_reference operator[](size_t replica) const {
    if (replica >= values_.size()) [[unlikely]]
      detail::throw_replica_index(replica, values_.size());
    return values_[replica];
  }

 private:
  std::vector<T> values_;
};

// PerReplica:{
//   0: tf.Tensor(1.0, shape=(), dtype=float32),
//   1: tf.Tensor(2.0, shape=(), dtype=float32)
// }
inline std::ostream& operator<<(std::ostream& os, const PerReplica<Tensor>& v) {
  os << "PerReplica:{\n";
  for (size_t i = 0; i < v.size(); ++i)
    os << "  " << i << ": " << v[i] << (i + 1 < v.size() ? ",\n" : "\n");
  return os << "}";
}

namespace detail {
template <class T>
struct IsPerReplica : std::false_type {};
template <class T>
struct IsPerReplica<PerReplica<T>> : std::true_type {};
template <class T>
inline constexpr bool is_per_replica_v = IsPerReplica<std::decay_t<T>>::value;

// What replica `i` receives for a run argument: its component of a PerReplica, else the
// argument itself.
template <class A>
decltype(auto) component(const A& arg, size_t i) {
  if constexpr (is_per_replica_v<A>) return arg[i];
  else return (arg);
}
template <class A>
using component_t = decltype(component(std::declval<const A&>(), 0));
}  // namespace detail

}  // namespace tapeflow::distribute
