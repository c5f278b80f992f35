#include "ops/factory.h"

#include <algorithm>
#include <cmath>
#include <new>

#include "core/allocator.h"
#include "core/check.h"
#include "core/context.h"
#include "ops/copy.h"
#include "ops/cpu/unary_ops.h"
#include "ops/dispatch.h"
#include "ops/dynamic_shape.h"
#include "ops/helpers.h"
#include "ops/movement.h"

namespace tapeflow {

namespace detail {

void throw_constant_size(const char* op, size_t n, const TensorShape& shape) {
  TF_CHECK_ARG(shape.is_fully_defined(), op, "shape {} has an unknown (None) dimension",
               shape.to_string());
  TF_THROW(InvalidArgumentError, op, "{} values cannot fill a tensor of shape {} ({} elements)",
           n, shape.to_string(), shape.num_elements());
}

void check_convert(const void* data, const TensorShape& shape, double staged_bytes) {
  const char* op = "convert_to_tensor";
  TF_CHECK_ARG(shape.is_fully_defined(), op, "shape {} has an unknown (None) dimension",
               shape.to_string());
  TF_CHECK_ARG(data != nullptr || shape.num_elements() == 0, op,
               "data is a null pointer for shape {} ({} elements)", shape.to_string(),
               shape.num_elements());
  TF_CHECK_T(ResourceExhaustedError,
             staged_bytes <= static_cast<double>(detail::host_memory_bytes()), op,
             "converting {} elements needs {:.1f} GiB of host memory, more than this machine's "
             "{:.1f} GiB of RAM and swap",
             shape.num_elements(), staged_bytes / (1 << 30),
             static_cast<double>(detail::host_memory_bytes()) / (1 << 30));
}

Tensor constant_impl(const void* data, DType src_dtype, const TensorShape& shape) {
  TF_CHECK_ARG(shape.is_fully_defined(), "constant", "shape {} has an unknown dimension",
               shape.to_string());
  const Device dev = current_device();
  Tensor t = empty(shape, src_dtype, dev);
  copy_bytes(t.raw_data(), dev, data, Device{}, t.nbytes());
  return t;
}

Tensor from_doubles(const std::vector<double>& values, const TensorShape& shape, DType dtype) {
  const size_t n = values.size();
  TF_ASSERT(static_cast<int64_t>(n) == shape.num_elements());
  std::vector<uint8_t> bytes(n * dtype_size(dtype));
  TF_DISPATCH_ALL_TYPES(dtype, {
    T* dst = reinterpret_cast<T*>(bytes.data());
    // As tf::cast from float64: integers truncate toward zero and saturate (NaN gives 0).
    for (size_t i = 0; i < n; ++i) dst[i] = cpu::cast_value<T>(values[i]);
  });
  return constant_impl(bytes.data(), dtype, shape);
}

}  // namespace detail

Tensor constant(const Tensor& scalar) {
  TF_CHECK_ARG(scalar.defined(), "constant", "the value is an undefined tensor");
  if (!scalar.is_weak()) return scalar;
  // A C++ scalar: same value, strongly typed, on the current device.
  auto hb = detail::host_bytes(scalar);
  return detail::constant_impl(hb.data, scalar.dtype(), scalar.shape());
}

Tensor constant(const Tensor& value, DType dtype) {
  TF_CHECK_ARG(value.defined(), "constant", "the value is an undefined tensor");
  if (value.dtype() == dtype) return constant(value);
  check_dtype_id("constant", dtype);
  // The rule for C++ scalars (docs/architecture.md), as TF's convert_to_tensor: an integer or
  // bool dtype takes only values it holds exactly (TF: "Cannot convert 2.5 to EagerTensor of
  // dtype int32"; NaN, 3e9 to int32 or 2 to bool are refused too, never truncated, saturated or
  // wrapped), a floating dtype any value, rounded. tf::cast converts with truncation.
  if (!is_floating(value.dtype())) {
    auto v = value.numpy<int64_t>();
    for (int64_t x : v) detail::check_integer_fits("constant", "value", x, dtype);
    if (dtype == int64) return detail::constant_impl(v.data(), int64, value.shape());
  } else if (!is_floating(dtype)) {
    for (double x : detail::to_double_vector(value))
      detail::check_value_fits("constant", "value", x, dtype);
  }
  return detail::from_doubles(detail::to_double_vector(value), value.shape(), dtype);
}

namespace {
// fill, with `op` (the factory the user called) named in its errors.
Tensor fill_as(const char* op, const TensorShape& shape, const Tensor& value) {
  TF_CHECK_ARG(value.defined() && value.num_elements() == 1, op,
               "value must be a scalar, got shape {}",
               value.defined() ? value.shape().to_string() : "None");
  TF_CHECK_ARG(shape.is_fully_defined(), op, "shape {} has an unknown dimension",
               shape.to_string());
  const Device dev = detail::current_device();
  auto hb = detail::host_bytes(value);
  const size_t es = dtype_size(value.dtype());
  const int64_t n = shape.num_elements();
  Tensor t;
  try {
    t = detail::empty(shape, value.dtype(), dev);
  } catch (const ResourceExhaustedError& e) {
    TF_THROW(ResourceExhaustedError, op, "its {} output of shape {}: {}", dtype_name(value.dtype()),
             shape.to_string(), e.what());
  }
  if (dev.is_cpu()) {
    auto* dst = static_cast<uint8_t*>(t.raw_data());
    if (es == 4) {
      uint32_t v;
      std::memcpy(&v, hb.data, 4);
      std::fill_n(reinterpret_cast<uint32_t*>(dst), n, v);
    } else {
      for (int64_t i = 0; i < n; ++i) std::memcpy(dst + i * es, hb.data, es);
    }
  } else if (n > 0) {
    // On a GPU the value goes to the device once and broadcast_to's kernel repeats it there
    // (stream-ordered, so the one-element tensor may be freed when this returns). A host
    // buffer of the whole tensor, copied over, cost a host allocation and a transfer per call.
    Tensor one = detail::empty(TensorShape{}, value.dtype(), dev);
    detail::copy_bytes(one.raw_data(), dev, hb.data, Device{}, es);
    detail::run_kernel(prims::BroadcastTo(shape), dev, std::span<const Tensor>(&one, 1),
                       std::span<Tensor>(&t, 1));
  }
  return t;
}
}  // namespace

Tensor fill(const TensorShape& shape, const Tensor& value) {
  // A value a tape may record or a trace produces goes through broadcast_to, an op: its
  // gradient is the sum of the output's (TF's fill), and a traced value is read when the graph
  // runs. (The host copy below has neither.)
  const auto& ctx = detail::thread_context();
  if (value.defined() && (value.is_symbolic() || !ctx.tapes.empty())) {
    TF_CHECK_ARG(value.num_elements() == 1, "fill", "value must be a scalar, got shape {}",
                 value.shape().to_string());
    TF_CHECK_ARG(shape.is_fully_defined(), "fill", "shape {} has an unknown dimension",
                 shape.to_string());
    const Device dev = detail::current_device();
    const Tensor one = reshape(value, TensorShape{});
    return broadcast_to(detail::copy_to(one, dev), shape);
  }
  return fill_as("fill", shape, value);
}

Tensor zeros(const TensorShape& shape, DType dtype) {
  return fill_as("zeros", shape, detail::from_doubles({0.0}, TensorShape{}, dtype));
}
Tensor ones(const TensorShape& shape, DType dtype) {
  return fill_as("ones", shape, detail::from_doubles({1.0}, TensorShape{}, dtype));
}
namespace {
// In a graph for None dimensions the size comes from x when the graph runs.
Tensor filled_like(const Tensor& x, double value, DType dtype) {
  DeviceScope scope(x.placement());
  if (detail::open_shapes() && x.is_symbolic())
    return detail::broadcast_like(
        detail::copy_to_device(detail::from_doubles({value}, TensorShape{}, dtype), x.placement()),
        x);
  return fill_as("fill", x.shape(), detail::from_doubles({value}, TensorShape{}, dtype));
}
}  // namespace

Tensor zeros_like(const Tensor& x, std::optional<DType> dtype) {
  TF_CHECK_ARG(x.defined(), "zeros_like", "the input is an undefined tensor");
  return filled_like(x, 0.0, dtype.value_or(x.dtype()));
}
Tensor ones_like(const Tensor& x, std::optional<DType> dtype) {
  TF_CHECK_ARG(x.defined(), "ones_like", "the input is an undefined tensor");
  return filled_like(x, 1.0, dtype.value_or(x.dtype()));
}

Tensor eye(int64_t num_rows, DType dtype) { return eye(num_rows, num_rows, dtype); }

namespace {
// Host staging for a factory's `count` values (as doubles or int64s, then converted to `dtype`):
// refused with the op's name when it cannot fit in this machine's memory.
template <class V = double>
std::vector<V> staging(const char* op, int64_t count, DType dtype) {
  const double need = static_cast<double>(count) * static_cast<double>(8 + dtype_size(dtype));
  TF_CHECK_T(ResourceExhaustedError, need <= static_cast<double>(detail::host_memory_bytes()), op,
             "{} elements of {} need {:.1f} GiB of host memory to build, more than this "
             "machine's {:.1f} GiB of RAM and swap",
             count, dtype_name(dtype), need / (1 << 30),
             static_cast<double>(detail::host_memory_bytes()) / (1 << 30));
  try {
    return std::vector<V>(static_cast<size_t>(count), V(0));
  } catch (const std::bad_alloc&) {
    TF_THROW(ResourceExhaustedError, op, "out of host memory building {} elements of {}", count,
             dtype_name(dtype));
  }
}
}  // namespace

Tensor eye(int64_t num_rows, int64_t num_columns, DType dtype) {
  TF_CHECK_ARG(num_rows >= 0 && num_columns >= 0, "eye", "sizes must be non-negative, got {}x{}",
               num_rows, num_columns);
  int64_t count;
  TF_CHECK_ARG(!__builtin_mul_overflow(num_rows, num_columns, &count), "eye",
               "a {}x{} matrix has more elements than an int64 can count", num_rows, num_columns);
  std::vector<double> v = staging("eye", count, dtype);
  for (int64_t i = 0; i < std::min(num_rows, num_columns); ++i) v[i * num_columns + i] = 1.0;
  return detail::from_doubles(v, TensorShape{num_rows, num_columns}, dtype);
}

namespace {

void check_range_dtype(DType dtype) {
  check_dtype_id("range", dtype);
  TF_CHECK_ARG(!is_bool(dtype), "range", "is not defined for dtype bool (as in TF)");
}

// start + i * delta for i in [0, n) of an integer range, exactly: the arithmetic wraps (unsigned),
// and the true values lie between start and limit, so they are int64 values and come out
// unchanged. Each must be representable in an integer dtype (InvalidArgumentError naming the first
// or last value otherwise: the values are monotonic); a floating dtype takes each rounded once.
// Without a dtype: int32 when the values fit, else int64 (TF infers int32 from Python ints).
Tensor range_exact(int64_t start, int64_t limit, int64_t delta, std::optional<DType> dtype) {
  if (dtype) check_range_dtype(*dtype);
  TF_CHECK_ARG(delta != 0, "range", "delta must not be zero");
  TF_CHECK_ARG((delta > 0 && start <= limit) || (delta < 0 && start >= limit), "range",
               "requires start <= limit when delta > 0 (or >= when delta < 0), got start {}, "
               "limit {}, delta {}",
               start, limit, delta);
  const auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
  const uint64_t span = delta > 0 ? u(limit) - u(start) : u(start) - u(limit);
  const uint64_t step = delta > 0 ? u(delta) : uint64_t{0} - u(delta);
  const uint64_t count = span / step + (span % step != 0 ? 1 : 0);
  TF_CHECK_ARG(count < (uint64_t{1} << 62), "range",
               "start {}, limit {} and delta {} give {} elements", start, limit, delta, count);
  const int64_t n = static_cast<int64_t>(count);
  const auto value = [&](int64_t i) { return static_cast<int64_t>(u(start) + u(i) * u(delta)); };
  const int64_t last = n > 0 ? value(n - 1) : start;
  const auto fits_int32 = [](int64_t v) { return v >= INT32_MIN && v <= INT32_MAX; };
  const DType dt = dtype.value_or(fits_int32(start) && fits_int32(last) ? int32 : int64);
  if (is_floating(dt)) {
    std::vector<double> v = staging("range", n, dt);
    for (int64_t i = 0; i < n; ++i) v[i] = static_cast<double>(value(i));
    return detail::from_doubles(v, TensorShape{n}, dt);
  }
  if (n > 0) {
    detail::check_integer_fits("range", "value", start, dt);
    detail::check_integer_fits("range", "value", last, dt);
  }
  std::vector<int64_t> v = staging<int64_t>("range", n, dt);
  for (int64_t i = 0; i < n; ++i) v[i] = value(i);
  std::vector<uint8_t> bytes(static_cast<size_t>(n) * dtype_size(dt));
  TF_DISPATCH_ALL_TYPES(dt, {
    if constexpr (std::is_integral_v<T>) {
      T* dst = reinterpret_cast<T*>(bytes.data());
      for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<T>(v[i]);
    }
  });
  return detail::constant_impl(bytes.data(), dt, TensorShape{n});
}

// Floating start, limit and delta: values start + i * delta computed in double and rounded once to
// a floating dtype (float32 without one). An integer dtype takes whole numbers only, computed
// exactly by range_exact.
Tensor range_impl(double start, double limit, double delta, std::optional<DType> dtype) {
  if (dtype) check_range_dtype(*dtype);
  TF_CHECK_ARG(delta != 0, "range", "delta must not be zero");
  TF_CHECK_ARG(std::isfinite(start) && std::isfinite(limit) && std::isfinite(delta), "range",
               "start, limit and delta must be finite, got {}, {}, {}", start, limit, delta);
  TF_CHECK_ARG((delta > 0 && start <= limit) || (delta < 0 && start >= limit), "range",
               "requires start <= limit when delta > 0 (or >= when delta < 0), got start {}, "
               "limit {}, delta {}",
               start, limit, delta);
  if (dtype && !is_floating(*dtype)) {
    TF_CHECK_ARG(start == std::floor(start) && limit == std::floor(limit) &&
                     delta == std::floor(delta),
                 "range", "start {}, limit {} and delta {} must be whole numbers for dtype {}",
                 start, limit, delta, dtype_name(*dtype));
    detail::check_value_fits("range", "start", start, int64);
    detail::check_value_fits("range", "limit", limit, int64);
    detail::check_value_fits("range", "delta", delta, int64);
    return range_exact(static_cast<int64_t>(start), static_cast<int64_t>(limit),
                       static_cast<int64_t>(delta), dtype);
  }
  const double count = std::ceil(std::abs((limit - start) / delta));
  TF_CHECK_ARG(count < 0x1p62, "range", "start {}, limit {} and delta {} give {} elements", start,
               limit, delta, count);
  const int64_t n = static_cast<int64_t>(count);
  const DType dt = dtype.value_or(float32);
  std::vector<double> v = staging("range", n, dt);
  for (int64_t i = 0; i < n; ++i) v[i] = start + static_cast<double>(i) * delta;
  return detail::from_doubles(v, TensorShape{n}, dt);
}

}  // namespace

Tensor range(double start, double limit, double delta, DType dtype) {
  return range_impl(start, limit, delta, dtype);
}

namespace detail {
Tensor range_inferred(double start, double limit, double delta) {
  return range_impl(start, limit, delta, std::nullopt);
}
Tensor range_integers(int64_t start, int64_t limit, int64_t delta, std::optional<DType> dtype) {
  return range_exact(start, limit, delta, dtype);
}
int64_t range_argument(unsigned long long v) {
  TF_CHECK_ARG(v <= static_cast<unsigned long long>(INT64_MAX), "range",
               "the argument {} does not fit in int64", v);
  return static_cast<int64_t>(v);
}
}  // namespace detail

Tensor linspace(double start, double stop, int64_t num) {
  // num = 0 is an empty tensor, as TF's.
  TF_CHECK_ARG(num >= 0, "linspace", "num must not be negative, got {}", num);
  std::vector<double> v = staging("linspace", num, float32);
  const double step = num > 1 ? (stop - start) / static_cast<double>(num - 1) : 0.0;
  for (int64_t i = 0; i < num; ++i) v[i] = start + static_cast<double>(i) * step;
  if (num > 1) v[num - 1] = stop;
  return detail::from_doubles(v, TensorShape{num}, float32);
}

}  // namespace tapeflow
