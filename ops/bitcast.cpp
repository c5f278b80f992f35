#include "ops/bitcast.h"

#include <fmt/format.h>

#include "core/check.h"
#include "ops/dispatch.h"

namespace tapeflow {

namespace {

// TF's shape rule for x's shape and the two element sizes.
TensorShape bitcast_shape(const TensorShape& s, DType from, DType to) {
  const char* op = "bitcast";
  const size_t a = dtype_size(from), b = dtype_size(to);
  if (a == b) return s;
  std::vector<int64_t> dims = s.dims();
  if (a > b) {
    dims.push_back(static_cast<int64_t>(a / b));
    return TensorShape(dims);
  }
  const auto ratio = static_cast<int64_t>(b / a);
  TF_CHECK_ARG(s.rank() >= 1 && (s[-1] == ratio || s[-1] == None), op,
               "Cannot bitcast from {} to {}: a {} tensor of shape {} needs a last dimension of "
               "{} ({} bytes per {} element)",
               dtype_name(from), dtype_name(to), dtype_name(from), s.to_string(), ratio, b,
               dtype_name(to));
  dims.pop_back();
  return TensorShape(dims);
}

void check_bitcast_dtypes(DType from, DType to) {
  TF_CHECK_ARG(!is_bool(from) && !is_bool(to), "bitcast",
               "bool tensors cannot be bitcast (TF has no bool kernel), got {} to {}",
               dtype_name(from), dtype_name(to));
}

}  // namespace

namespace prims {

void Bitcast::infer(std::span<const Tensor> in, std::span<TensorMeta> out) const {
  check_bitcast_dtypes(in[0].dtype(), dtype);
  out[0] = {bitcast_shape(in[0].shape(), in[0].dtype(), dtype), dtype};
}

bool Bitcast::produce(std::span<const Tensor> in, std::span<Tensor> out, Device) const {
  // The shape from the input that runs (a graph for None dimensions serves every size).
  out[0] = detail::reinterpret(in[0], bitcast_shape(in[0].shape(), in[0].dtype(), dtype), dtype);
  return true;
}

std::string Bitcast::attributes() const {
  return fmt::format("dtype={}", dtype_name(dtype));
}

}  // namespace prims

Tensor bitcast(const Tensor& x, DType dtype) {
  TF_CHECK_ARG(x.defined(), "bitcast", "the input is an undefined tensor (TF's None)");
  check_dtype_id("bitcast", dtype);
  check_bitcast_dtypes(x.dtype(), dtype);
  if (x.dtype() == dtype) return x;
  return detail::dispatch(prims::Bitcast(dtype), {x});
}

namespace detail {
Tensor without_gradient(const Tensor& x) {
  TF_CHECK_ARG(x.defined(), "without_gradient", "the input is an undefined tensor (TF's None)");
  if (!is_floating(x.dtype())) return x;  // no gradient flows through other dtypes anyway
  return dispatch(prims::Bitcast(x.dtype()), {x});
}
}  // namespace detail

}  // namespace tapeflow
