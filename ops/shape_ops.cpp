#include "ops/shape_ops.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/check.h"
#include "ops/binary.h"
#include "ops/debugging.h"
#include "ops/dispatch.h"
#include "ops/dynamic_shape.h"
#include "ops/factory.h"
#include "ops/helpers.h"
#include "ops/movement.h"
#include "ops/unary.h"

namespace tapeflow {

namespace {

void check_out_type(const char* op, const Tensor& x, DType out_type) {
  TF_CHECK_ARG(x.defined(), op, "the input is an undefined tensor (TF's None)");
  TF_CHECK_ARG(out_type == int32 || out_type == int64, op,
               "out_type must be int32 or int64, got {}", dtype_name(out_type));
}

}  // namespace

Tensor shape(const Tensor& x, DType out_type) {
  check_out_type("shape", x, out_type);
  return detail::shape_of(x, out_type);
}

Tensor size(const Tensor& x, DType out_type) {
  check_out_type("size", x, out_type);
  std::vector<int> all(static_cast<size_t>(x.rank()));
  for (int d = 0; d < x.rank(); ++d) all[static_cast<size_t>(d)] = d;
  return detail::element_count(x, all, out_type);
}

Tensor rank(const Tensor& x) {
  TF_CHECK_ARG(x.defined(), "rank", "the input is an undefined tensor (TF's None)");
  return Tensor(static_cast<int32_t>(x.rank()));
}

Tensor ensure_shape(const Tensor& x, const TensorShape& want) {
  const char* op = "ensure_shape";
  TF_CHECK_ARG(x.defined(), op, "the input is an undefined tensor (TF's None)");
  const TensorShape& s = x.shape();
  // In a trace for None dimensions the traced sizes are stand-ins: every size `want` fixes is
  // checked when the graph runs. Otherwise the known sizes are checked now, the rest then.
  const bool open = detail::open_shapes();
  bool ok = s.rank() == want.rank();
  std::vector<int64_t> axes, sizes;
  for (int d = 0; ok && d < s.rank(); ++d) {
    if (want[d] == None) continue;
    if (open || s[d] == None) {
      axes.push_back(d);
      sizes.push_back(want[d]);
    } else {
      ok = s[d] == want[d];
    }
  }
  TF_CHECK_ARG(ok, op, "Shape of tensor input {} is not compatible with expected shape {}",
               s.to_string(), want.to_string());
  if (axes.empty()) return x;
  const auto n = static_cast<int64_t>(axes.size());
  const Tensor got = gather(shape(x, int64), constant(axes, TensorShape{n}));
  detail::check_elementwise(op,
                            fmt::format("the shape of input matches {} at axes [{}]",
                                        want.to_string(), fmt::join(axes, ", ")),
                            equal(got, constant(sizes, TensorShape{n})), {got}, {"input sizes"});
  return x;
}

std::vector<Tensor> shape_n(const std::vector<Tensor>& inputs, DType out_type) {
  std::vector<Tensor> out;
  out.reserve(inputs.size());
  for (const Tensor& x : inputs) {
    check_out_type("shape_n", x, out_type);
    out.push_back(detail::shape_of(x, out_type));
  }
  return out;
}

std::vector<Tensor> identity_n(const std::vector<Tensor>& inputs) {
  for (const Tensor& x : inputs)
    TF_CHECK_ARG(x.defined(), "identity_n", "an input is an undefined tensor (TF's None)");
  return inputs;
}

TensorShape broadcast_static_shape(const TensorShape& x, const TensorShape& y) {
  // The broadcast every binary op applies (a None size takes the other side's known size > 1),
  // with TF's message.
  try {
    return detail::broadcast_shapes("broadcast_static_shape", x, y);
  } catch (const InvalidArgumentError&) {
    TF_THROW(InvalidArgumentError, "broadcast_static_shape", "Incompatible shapes: {} and {}",
             x.to_string(), y.to_string());
  }
}

namespace {
std::string tf_shape_list(const std::vector<int64_t>& v) {  // TF's "[2,3]"
  return fmt::format("[{}]", fmt::join(v, ","));
}
}  // namespace

Tensor broadcast_dynamic_shape(const Tensor& shape_x, const Tensor& shape_y) {
  const char* op = "broadcast_dynamic_shape";
  for (const Tensor* t : {&shape_x, &shape_y}) {
    TF_CHECK_ARG(t->defined(), op, "an input is an undefined tensor (TF's None)");
    TF_CHECK_ARG(t->dtype() == int32 || t->dtype() == int64, op,
                 "shapes must be int32 or int64 tensors, got {}", dtype_name(t->dtype()));
    TF_CHECK_ARG(t->rank() == 1 && t->shape()[0] != None, op,
                 "shapes must be 1-D tensors of known length, got shape {}",
                 t->shape().to_string());
  }
  TF_CHECK_ARG(shape_x.dtype() == shape_y.dtype(), op, "dtypes differ: {} and {}",
               dtype_name(shape_x.dtype()), dtype_name(shape_y.dtype()));
  const DType dtype = shape_x.dtype();
  const int64_t nx = shape_x.shape()[0], ny = shape_y.shape()[0], r = std::max(nx, ny);
  if (!shape_x.is_symbolic() && !shape_y.is_symbolic()) {
    const std::vector<int64_t> x = cast(shape_x, int64).numpy<int64_t>();
    const std::vector<int64_t> y = cast(shape_y, int64).numpy<int64_t>();
    std::vector<int64_t> out(static_cast<size_t>(r));
    for (int64_t i = 0; i < r; ++i) {
      const int64_t ix = nx - r + i, iy = ny - r + i;
      const int64_t a = ix >= 0 ? x[static_cast<size_t>(ix)] : 1;
      const int64_t b = iy >= 0 ? y[static_cast<size_t>(iy)] : 1;
      TF_CHECK_ARG(a == b || a == 1 || b == 1, op, "Incompatible shapes: {} vs. {}",
                   tf_shape_list(x), tf_shape_list(y));
      out[static_cast<size_t>(i)] = a == 1 ? b : a;
    }
    return cast(constant(out, TensorShape{r}), dtype);
  }
  // Traced: both padded in front with ones to the larger rank, combined and checked per size.
  auto padded = [&](const Tensor& t, int64_t n) {
    if (n == r) return t;
    return concat({ones({r - n}, dtype), t}, 0);
  };
  const Tensor x = padded(shape_x, nx), y = padded(shape_y, ny);
  const Tensor one = ones({}, dtype);
  const Tensor x_one = equal(x, one), y_one = equal(y, one);
  detail::check_elementwise(op, "each pair of sizes is equal or has a 1",
                            logical_or(equal(x, y), logical_or(x_one, y_one)), {x, y},
                            {"shape_x", "shape_y"}, "Incompatible shapes");
  return where(x_one, y, x);
}

}  // namespace tapeflow
