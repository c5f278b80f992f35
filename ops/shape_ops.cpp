#include "ops/shape_ops.h"

#include <fmt/format.h>

#include <string>
#include <vector>

#include "core/check.h"
#include "ops/binary.h"
#include "ops/debugging.h"
#include "ops/dispatch.h"
#include "ops/dynamic_shape.h"
#include "ops/factory.h"
#include "ops/movement.h"

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

}  // namespace tapeflow
