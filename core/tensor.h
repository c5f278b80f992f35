// Tensor: an immutable value behind a cheap shared handle (copies share the same TensorImpl).
// Elements are stored contiguously in row-major order, possibly at an offset into a shared
// Storage (views made by reshape share their input's storage). A Tensor may be read from several
// threads at once; TensorImpl is never mutated after an op has produced it.
#pragma once

#include <cmath>
#include <cstdint>
#include <iosfwd>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "core/allocator.h"
#include "core/device.h"
#include "core/dtype.h"
#include "core/shape.h"

namespace tapeflow {

namespace detail {

// A block of device memory, returned to its allocator when the last tensor using it dies.
struct Storage {
  void* data = nullptr;
  size_t nbytes = 0;
  Device device;
  Allocator* allocator = nullptr;

  Storage(size_t n, Device d);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
};

struct TensorImpl {
  TensorShape shape;
  DType dtype;
  Device device;
  // A C++ scalar converted implicitly: takes the other operand's dtype in a binary op.
  bool weak = false;
  // A placeholder made while tracing: shape and dtype only, no storage.
  bool symbolic = false;
  uint64_t id = 0;  // unique per process, for tapes and traces
  std::shared_ptr<Storage> storage;
  size_t offset = 0;  // bytes into storage
};

uint64_t next_tensor_id();
// InvalidArgumentError: `what` (an accessor such as "Tensor::shape") on the undefined tensor.
[[noreturn]] void throw_undefined_tensor(const char* what);
// InvalidArgumentError: a C++ uint64 scalar above int64's range (tapeflow has no uint64).
[[noreturn]] void throw_scalar_out_of_range(uint64_t value);

// A floating value converted to the integer type T as tf::cast converts it: NaN is 0, values
// beyond the range saturate (types narrower than 32 bits wrap from int32, as cast to uint8).
template <class T, class F>
T float_to_integer(F v) {
  using W = std::conditional_t<(sizeof(T) < 4), int32_t, T>;
  if (std::isnan(v)) return T(0);
  constexpr W lo = std::numeric_limits<W>::min(), hi = std::numeric_limits<W>::max();
  W w;
  if (v <= static_cast<F>(lo)) w = lo;
  else if (v >= static_cast<F>(hi)) w = hi;  // F(hi) rounds up to a power of two: v < 2^k below
  else w = static_cast<W>(v);
  return static_cast<T>(w);
}

}  // namespace detail

class Tensor {
 public:
  // The undefined tensor (TF's None): defined() is false.
  Tensor() = default;
  // A C++ scalar: float -> float32, double -> float64, int -> int32, int64_t -> int64,
  // bool -> bool_, uint8_t -> uint8. Weakly typed, as Python scalars are in TF.
  template <class T>
    requires std::is_arithmetic_v<T>
  Tensor(T value) : Tensor(make_scalar(value)) {}

  explicit Tensor(std::shared_ptr<detail::TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  // The accessors below raise InvalidArgumentError on the undefined tensor (TF: None has no
  // shape), e.g. the gradient of a source the target does not depend on.
  const TensorShape& shape() const { return checked("Tensor::shape").shape; }
  DType dtype() const { return checked("Tensor::dtype").dtype; }
  // "/device:CPU:0", "/device:GPU:1"
  std::string device() const { return checked("Tensor::device").device.to_string(); }
  Device placement() const { return checked("Tensor::placement").device; }
  int rank() const { return checked("Tensor::rank").shape.rank(); }
  int64_t num_elements() const { return checked("Tensor::num_elements").shape.num_elements(); }

  // Copies the elements to the host in row-major order, converted to T.
  template <class T>
  std::vector<T> numpy() const;
  // The value of a one-element tensor, converted to T.
  template <class T>
  T item() const;

  // ---- for the library's own use ----
  const std::shared_ptr<detail::TensorImpl>& impl() const { return impl_; }
  detail::TensorImpl* get() const { return impl_.get(); }
  bool is_weak() const { return checked("Tensor::is_weak").weak; }
  bool is_symbolic() const { return checked("Tensor::is_symbolic").symbolic; }
  uint64_t id() const { return checked("Tensor::id").id; }
  size_t nbytes() const { return static_cast<size_t>(num_elements()) * dtype_size(dtype()); }
  // Device pointer to the first element (null for an empty or symbolic tensor).
  void* raw_data() const;
  template <class T>
  T* data() const {
    return static_cast<T*>(raw_data());
  }
  // Two handles to the same value.
  bool is_same(const Tensor& o) const { return impl_ == o.impl_; }

 private:
  const detail::TensorImpl& checked(const char* what) const {
    if (!impl_) [[unlikely]]
      detail::throw_undefined_tensor(what);
    return *impl_;
  }
  template <class T>
  static Tensor make_scalar(T value);
  std::shared_ptr<detail::TensorImpl> impl_;
};

namespace detail {
// A new tensor with uninitialised storage on `device`.
Tensor empty(const TensorShape& shape, DType dtype, Device device);
// A symbolic tensor (no storage) for tracing.
Tensor symbolic(const TensorShape& shape, DType dtype, Device device);
// A tensor sharing `src`'s storage with another shape (same number of elements) or offset.
Tensor view(const Tensor& src, const TensorShape& shape, size_t byte_offset = 0);
// A tensor sharing `src`'s bytes read as another dtype (the same number of bytes: tf::bitcast).
Tensor reinterpret(const Tensor& src, const TensorShape& shape, DType dtype);
// Copies host elements of type T into a new tensor of dtype_of<T>() on `device`.
template <class T>
Tensor from_host(const T* data, const TensorShape& shape, Device device, bool weak = false);
// Copies a tensor's bytes to another device (same shape and dtype).
Tensor copy_to_device(const Tensor& src, Device device);
// Host copy of all elements converted to double (used by printing and tests).
std::vector<double> to_double_vector(const Tensor& t);
}  // namespace detail

// Prints as TF2's print(t): tf.Tensor([1. 2.], shape=(2,), dtype=float32)
std::ostream& operator<<(std::ostream& os, const Tensor& t);

// ---- template definitions ----
template <class T>
Tensor Tensor::make_scalar(T value) {
  if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, float> || std::is_same_v<T, double> ||
                std::is_same_v<T, uint8_t>) {
    return detail::from_host<T>(&value, TensorShape{}, Device{}, /*weak=*/true);
  } else if constexpr (std::is_floating_point_v<T>) {
    double v = static_cast<double>(value);
    return detail::from_host<double>(&v, TensorShape{}, Device{}, true);
  } else if constexpr (std::is_signed_v<T> && sizeof(T) <= 4) {
    int32_t v = static_cast<int32_t>(value);
    return detail::from_host<int32_t>(&v, TensorShape{}, Device{}, true);
  } else {
    if constexpr (std::is_unsigned_v<T> && sizeof(T) == 8)
      if (value > static_cast<T>(std::numeric_limits<int64_t>::max())) [[unlikely]]
        detail::throw_scalar_out_of_range(value);
    int64_t v = static_cast<int64_t>(value);
    return detail::from_host<int64_t>(&v, TensorShape{}, Device{}, true);
  }
}

namespace detail {
// Bytes of a tensor copied to host memory (no copy for a CPU tensor: returns its pointer).
struct HostBytes {
  std::shared_ptr<void> keep;
  const void* data = nullptr;
};
HostBytes host_bytes(const Tensor& t);
[[noreturn]] void throw_item_error(const Tensor& t);

template <class T>
std::vector<T> host_elements(const Tensor& t) {
  HostBytes hb = host_bytes(t);
  const size_t n = static_cast<size_t>(t.num_elements());
  std::vector<T> out(n);
  switch (t.dtype().id) {
#define TF_HOST_CONVERT(ID, S)                                                \
  case DTypeId::ID: {                                                         \
    const S* src = static_cast<const S*>(hb.data);                            \
    for (size_t i = 0; i < n; ++i) {                                          \
      if constexpr (std::is_same_v<T, bool>)                                  \
        out[i] = static_cast<compute_t<S>>(src[i]) != 0;                      \
      else if constexpr (std::is_same_v<T, half_t> || std::is_same_v<T, bfloat16_t>) \
        out[i] = T(static_cast<float>(static_cast<compute_t<S>>(src[i])));    \
      else if constexpr (std::is_integral_v<T> &&                            \
                         std::is_floating_point_v<compute_t<S>>)              \
        out[i] = float_to_integer<T>(static_cast<compute_t<S>>(src[i]));      \
      else                                                                    \
        out[i] = static_cast<T>(static_cast<compute_t<S>>(src[i]));           \
    }                                                                         \
    break;                                                                    \
  }
    TF_HOST_CONVERT(Float16, half_t)
    TF_HOST_CONVERT(BFloat16, bfloat16_t)
    TF_HOST_CONVERT(Float32, float)
    TF_HOST_CONVERT(Float64, double)
    TF_HOST_CONVERT(Int32, int32_t)
    TF_HOST_CONVERT(Int64, int64_t)
    TF_HOST_CONVERT(UInt8, uint8_t)
    TF_HOST_CONVERT(Bool, bool)
#undef TF_HOST_CONVERT
  }
  return out;
}
}  // namespace detail

template <class T>
std::vector<T> Tensor::numpy() const {
  return detail::host_elements<T>(*this);
}

template <class T>
T Tensor::item() const {
  if (!defined()) detail::throw_undefined_tensor("item");
  if (num_elements() != 1) detail::throw_item_error(*this);
  auto v = detail::host_elements<T>(*this);
  return v[0];
}

}  // namespace tapeflow
