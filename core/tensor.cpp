#include "core/tensor.h"

#include <atomic>
#include <cstring>

#include "core/check.h"

namespace tapeflow {
namespace detail {

Storage::Storage(size_t n, Device d) : nbytes(n), device(d), allocator(&allocator_for(d)) {
  data = allocator->allocate(n);
}

Storage::~Storage() { allocator->deallocate(data, nbytes); }

uint64_t next_tensor_id() {
  static std::atomic<uint64_t> counter{1};
  return counter.fetch_add(1, std::memory_order_relaxed);
}

Tensor empty(const TensorShape& shape, DType dtype, Device device) {
  TF_ASSERT(shape.is_fully_defined());
  check_dtype_id("tensor", dtype);
  auto impl = std::make_shared<TensorImpl>();
  impl->shape = shape;
  impl->dtype = dtype;
  impl->device = device;
  impl->id = next_tensor_id();
  size_t n;
  if (__builtin_mul_overflow(static_cast<size_t>(shape.num_elements()), dtype_size(dtype), &n))
    TF_THROW(ResourceExhaustedError, "allocate",
             "a {} tensor of shape {} on {} needs more bytes than a size_t can count",
             dtype_name(dtype), shape.to_string(), device.to_string());
  if (n > 0) impl->storage = std::make_shared<Storage>(n, device);
  return Tensor(std::move(impl));
}

Tensor symbolic(const TensorShape& shape, DType dtype, Device device) {
  check_dtype_id("tensor", dtype);
  auto impl = std::make_shared<TensorImpl>();
  impl->shape = shape;
  impl->dtype = dtype;
  impl->device = device;
  impl->symbolic = true;
  impl->id = next_tensor_id();
  return Tensor(std::move(impl));
}

Tensor view(const Tensor& src, const TensorShape& shape, size_t byte_offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->shape = shape;
  impl->dtype = src.dtype();
  impl->device = src.placement();
  impl->symbolic = src.is_symbolic();
  impl->id = next_tensor_id();
  impl->storage = src.impl()->storage;
  impl->offset = src.impl()->offset + byte_offset;
  return Tensor(std::move(impl));
}

Tensor reinterpret(const Tensor& src, const TensorShape& shape, DType dtype) {
  Tensor t = view(src, shape);
  t.impl()->dtype = dtype;
  return t;
}

template <class T>
Tensor from_host(const T* data, const TensorShape& shape, Device device, bool weak) {
  Tensor t = empty(shape, dtype_of<T>(), device);
  t.impl()->weak = weak;
  if constexpr (std::is_same_v<T, bool>) {
    // Normalise to 0/1 bytes.
    auto* dst = static_cast<uint8_t*>(t.raw_data());
    const size_t n = static_cast<size_t>(shape.num_elements());
    if (device.is_cpu()) {
      for (size_t i = 0; i < n; ++i) dst[i] = data[i] ? 1 : 0;
    } else {
      std::vector<uint8_t> tmp(n);
      for (size_t i = 0; i < n; ++i) tmp[i] = data[i] ? 1 : 0;
      copy_bytes(dst, device, tmp.data(), Device{}, n);
    }
  } else {
    copy_bytes(t.raw_data(), device, data, Device{}, t.nbytes());
  }
  return t;
}

template Tensor from_host<half_t>(const half_t*, const TensorShape&, Device, bool);
template Tensor from_host<bfloat16_t>(const bfloat16_t*, const TensorShape&, Device, bool);
template Tensor from_host<float>(const float*, const TensorShape&, Device, bool);
template Tensor from_host<double>(const double*, const TensorShape&, Device, bool);
template Tensor from_host<int32_t>(const int32_t*, const TensorShape&, Device, bool);
template Tensor from_host<int64_t>(const int64_t*, const TensorShape&, Device, bool);
template Tensor from_host<uint8_t>(const uint8_t*, const TensorShape&, Device, bool);
template Tensor from_host<bool>(const bool*, const TensorShape&, Device, bool);

Tensor copy_to_device(const Tensor& src, Device device) {
  TF_CHECK_ARG(!src.is_symbolic(), "copy_to_device", "a symbolic tensor has no value to copy");
  Tensor out = empty(src.shape(), src.dtype(), device);
  copy_bytes(out.raw_data(), device, src.raw_data(), src.placement(), src.nbytes());
  return out;
}

HostBytes host_bytes(const Tensor& t) {
  TF_CHECK_ARG(t.defined(), "numpy", "the tensor is undefined (TF's None)");
  TF_CHECK_ARG(!t.is_symbolic(), "numpy",
               "a symbolic tensor of shape {} has no value while a function is being traced; "
               "use tf::print to see values at every call",
               t.shape().to_string());
  HostBytes hb;
  if (t.placement().is_cpu()) {
    hb.keep = t.impl();
    hb.data = t.raw_data();
    return hb;
  }
  const size_t n = t.nbytes();
  std::shared_ptr<uint8_t[]> buf(new uint8_t[n]);
  copy_bytes(buf.get(), Device{}, t.raw_data(), t.placement(), n);
  hb.data = buf.get();
  hb.keep = std::shared_ptr<void>(buf, buf.get());
  return hb;
}

void throw_undefined_tensor(const char* what) {
  TF_THROW(InvalidArgumentError, what,
           "the tensor is undefined (TF's None: a default-constructed tf::Tensor, or the "
           "gradient of a source the target does not depend on)");
}

void throw_scalar_out_of_range(uint64_t value) {
  TF_THROW(InvalidArgumentError, "Tensor",
           "the C++ scalar {} is beyond int64's range (tapeflow has no uint64 dtype)", value);
}

void throw_item_error(const Tensor& t) {
  TF_THROW(InvalidArgumentError, "item", "item() needs a tensor with one element, got shape {}",
           t.shape().to_string());
}

std::vector<double> to_double_vector(const Tensor& t) { return host_elements<double>(t); }

}  // namespace detail

void* Tensor::raw_data() const {
  const auto& s = checked("Tensor::raw_data").storage;
  if (!s) return nullptr;
  return static_cast<char*>(s->data) + impl_->offset;
}

}  // namespace tapeflow
