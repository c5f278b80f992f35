#include "ops/dynamic_shape.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "core/check.h"
#include "core/context.h"
#include "ops/binary.h"
#include "ops/dispatch.h"
#include "ops/factory.h"
#include "ops/helpers.h"
#include "ops/movement.h"
#include "ops/nn.h"
#include "ops/reduce.h"

namespace tapeflow {
namespace {

std::string axes_text(const std::vector<int>& axes) {
  return fmt::format("axes=[{}]", fmt::join(axes, ", "));
}

// An op whose output is made on the host from its inputs' shapes alone when it runs (produce(),
// never a kernel): constant folding evaluates it once the shapes are known. No gradient.
template <class Derived>
struct ShapeFunctionOp : PrimitiveBase<Derived> {
  void eval_cpu(std::span<const Tensor>, std::span<Tensor>) const override {
    TF_THROW(InternalError, this->name(), "runs through produce(), never as a kernel");
  }
  void eval_cuda(std::span<const Tensor>, std::span<Tensor>) const override {
    TF_THROW(InternalError, this->name(), "runs through produce(), never as a kernel");
  }
  bool reads_only_shapes() const override { return true; }
  bool produce(std::span<const Tensor> in, std::span<Tensor> out, Device device) const override {
    out[0] = detail::copy_to_device(static_cast<const Derived&>(*this).host(in), device);
    return true;
  }
  std::vector<Tensor> vjp(std::span<const Tensor>, std::span<const Tensor>,
                          std::span<const int> argnums, std::span<const Tensor>) const override {
    return std::vector<Tensor>(argnums.size());
  }
  uint32_t vjp_saves() const override { return 0; }
};

// A scalar holding a product of input dimensions (it does not change with x's values).
struct ElementCount final : ShapeFunctionOp<ElementCount> {
  std::vector<int> axes;
  DType dtype;
  ElementCount(std::vector<int> a, DType d) : axes(std::move(a)), dtype(d) {}
  const char* name() const override { return "element_count"; }
  void infer(std::span<const Tensor>, std::span<TensorMeta> out) const override {
    out[0] = {TensorShape{}, dtype};
  }
  Tensor host(std::span<const Tensor> in) const {
    const int64_t n = detail::reduced_count(in[0].shape(), axes);
    return detail::from_doubles({static_cast<double>(n)}, {}, dtype);
  }
  std::string attributes() const override {
    return axes_text(axes) + ", dtype=" + std::string(dtype_name(dtype));
  }
};

// x's dimensions, 1-D (tf::shape in a trace for None dimensions).
struct ShapeOf final : ShapeFunctionOp<ShapeOf> {
  DType dtype;
  explicit ShapeOf(DType d) : dtype(d) {}
  const char* name() const override { return "shape"; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override {
    out[0] = {TensorShape{in[0].rank()}, dtype};
  }
  static Tensor of(const TensorShape& s, DType dtype) {
    std::vector<double> v;
    for (int d = 0; d < s.rank(); ++d) v.push_back(static_cast<double>(s[d]));
    return detail::from_doubles(v, TensorShape{s.rank()}, dtype);
  }
  Tensor host(std::span<const Tensor> in) const { return of(in[0].shape(), dtype); }
  std::string attributes() const override { return "out_type=" + std::string(dtype_name(dtype)); }
};

// broadcast_to(x, like.shape()).
struct BroadcastLike final : PrimitiveBase<BroadcastLike> {
  const char* name() const override { return "broadcast_like"; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override {
    prims::BroadcastTo(in[1].shape()).infer(in.first(1), out);
  }
  void eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const override {
    prims::BroadcastTo(out[0].shape()).eval_cpu(in.first(1), out);
  }
  void eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const override {
    prims::BroadcastTo(out[0].shape()).eval_cuda(in.first(1), out);
  }
  std::vector<Tensor> vjp(std::span<const Tensor> p, std::span<const Tensor> cts,
                          std::span<const int> argnums, std::span<const Tensor>) const override {
    std::vector<Tensor> g;
    for (int k : argnums) g.push_back(k == 0 ? detail::sum_to_shape(cts[0], p[0].shape()) : Tensor());
    return g;
  }
  uint32_t vjp_saves() const override { return 0; }
};

// A view of its first input: no kernel work (the derived op gives the shape and the vjp).
template <class Derived>
struct ViewOp : PrimitiveBase<Derived> {
  void eval_cpu(std::span<const Tensor>, std::span<Tensor>) const override {}
  void eval_cuda(std::span<const Tensor>, std::span<Tensor>) const override {}
  bool is_view() const override { return true; }
};

// A view of x with its dimensions regrouped (merge_axes, split_axis): the cotangent is reshaped
// like x (a graph value in a traced vjp, so x is saved).
template <class Derived>
struct RegroupOp : ViewOp<Derived> {
  std::vector<Tensor> vjp(std::span<const Tensor> p, std::span<const Tensor> cts,
                          std::span<const int>, std::span<const Tensor>) const override {
    return {detail::reshape_like(cts[0], p[0])};
  }
  uint32_t vjp_saves() const override { return Primitive::save_input(0); }
};

// reshape(x, like.shape()) (a view).
struct ReshapeLike final : ViewOp<ReshapeLike> {
  const char* name() const override { return "reshape_like"; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override {
    prims::Reshape(in[1].shape()).infer(in.first(1), out);
  }
  std::vector<Tensor> vjp(std::span<const Tensor> p, std::span<const Tensor> cts,
                          std::span<const int> argnums, std::span<const Tensor>) const override {
    std::vector<Tensor> g;
    for (int k : argnums) g.push_back(k == 0 ? detail::reshape_like(cts[0], p[0]) : Tensor());
    return g;
  }
  // The cotangent is reshaped like input 0, which a traced vjp must see as a graph value.
  uint32_t vjp_saves() const override { return save_input(0); }
};

// x with size-1 dimensions inserted at the output positions `axes` (sorted).
struct InsertAxes final : ViewOp<InsertAxes> {
  std::vector<int> axes;
  explicit InsertAxes(std::vector<int> a) : axes(std::move(a)) {}
  const char* name() const override { return "insert_axes"; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override {
    const TensorShape& xs = in[0].shape();
    TensorShape s;
    int src = 0;
    const int r = xs.rank() + static_cast<int>(axes.size());
    for (int d = 0; d < r; ++d) {
      if (std::find(axes.begin(), axes.end(), d) != axes.end()) s.push_back(1);
      else s.push_back(xs[src++]);
    }
    out[0] = {s, in[0].dtype()};
  }
  std::vector<Tensor> vjp(std::span<const Tensor>, std::span<const Tensor> cts,
                          std::span<const int>, std::span<const Tensor>) const override {
    return {detail::remove_axes(cts[0], axes)};
  }
  uint32_t vjp_saves() const override { return 0; }
  std::string attributes() const override { return axes_text(axes); }
};

// x without the dimensions `axes` (each of size 1 when it runs).
struct RemoveAxes final : ViewOp<RemoveAxes> {
  std::vector<int> axes;
  explicit RemoveAxes(std::vector<int> a) : axes(std::move(a)) {}
  const char* name() const override { return "remove_axes"; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override {
    const TensorShape& xs = in[0].shape();
    TensorShape s;
    for (int d = 0; d < xs.rank(); ++d) {
      if (std::find(axes.begin(), axes.end(), d) == axes.end()) {
        s.push_back(xs[d]);
        continue;
      }
      TF_CHECK_ARG(xs[d] == 1, "squeeze", "cannot remove axis {} of shape {}: its size is not 1",
                   d, xs.to_string());
    }
    out[0] = {s, in[0].dtype()};
  }
  std::vector<Tensor> vjp(std::span<const Tensor>, std::span<const Tensor> cts,
                          std::span<const int>, std::span<const Tensor>) const override {
    return {detail::insert_axes(cts[0], axes)};
  }
  uint32_t vjp_saves() const override { return 0; }
  std::string attributes() const override { return axes_text(axes); }
};

TensorShape merged_shape(const TensorShape& xs, const std::vector<int>& groups) {
  TensorShape s;
  int axis = 0;
  for (int g : groups) {
    int64_t n = 1;
    for (int i = 0; i < g; ++i) {
      const int64_t d = xs[axis++];
      n = (n == None || d == None) ? None : n * d;
    }
    s.push_back(n);
  }
  TF_CHECK_T(InternalError, axis == xs.rank(), "merge_axes",
             "groups [{}] do not cover the {} axes of shape {}", fmt::join(groups, ", "), xs.rank(),
             xs.to_string());
  return s;
}

// Consecutive axes merged (a view; sizes from the input when it runs).
struct MergeAxes final : RegroupOp<MergeAxes> {
  std::vector<int> groups;
  explicit MergeAxes(std::vector<int> g) : groups(std::move(g)) {}
  const char* name() const override { return "merge_axes"; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override {
    out[0] = {merged_shape(in[0].shape(), groups), in[0].dtype()};
  }
  std::string attributes() const override {
    return fmt::format("groups=[{}]", fmt::join(groups, ", "));
  }
};

// detail::axis_table's op: the table for the size of one axis of its input.
struct AxisTable final : ShapeFunctionOp<AxisTable> {
  int axis;
  std::string kind;
  std::vector<double> params;
  DType dtype;
  std::function<std::vector<double>(int64_t)> make;
  std::function<TensorShape(int64_t)> shape;
  const char* name() const override { return "axis_table"; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override {
    out[0] = {shape(in[0].shape()[axis]), dtype};
  }
  bool stops_gradients() const override { return true; }
  Tensor host(std::span<const Tensor> in) const {
    const int64_t n = in[0].shape()[axis];
    return detail::from_doubles(make(n), shape(n), dtype);
  }
  std::string attributes() const override {
    return fmt::format("kind={}, axis={}, params=[{}], dtype={}", kind, axis,
                       fmt::join(params, ", "), dtype_name(dtype));
  }
};

TensorShape split_shape(const TensorShape& s, int axis, const std::vector<int64_t>& sizes) {
  TensorShape o;
  for (int i = 0; i < s.rank(); ++i) {
    if (i != axis) {
      o.push_back(s[i]);
      continue;
    }
    for (int64_t n : sizes) o.push_back(n);
  }
  return o;
}

// x with one axis split into known sizes (a view; the other sizes follow x).
struct SplitAxis final : RegroupOp<SplitAxis> {
  int axis;
  std::vector<int64_t> sizes;
  SplitAxis(int a, std::vector<int64_t> s) : axis(a), sizes(std::move(s)) {}
  const char* name() const override { return "split_axis"; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override {
    prims::Reshape(split_shape(in[0].shape(), axis, sizes)).infer(in, out);
  }
  std::string attributes() const override {
    return fmt::format("axis={}, sizes=[{}]", axis, fmt::join(sizes, ", "));
  }
};

TensorShape parts_shape(std::span<const Tensor> sources,
                        const std::vector<std::pair<int, int>>& parts) {
  TensorShape s;
  for (const auto& [k, axis] : parts) s.push_back(sources[static_cast<size_t>(k)].shape()[axis]);
  return s;
}

// x (input 0) reshaped to sizes read from the other inputs' shapes (a view).
struct ReshapeFrom final : ViewOp<ReshapeFrom> {
  std::vector<std::pair<int, int>> parts;
  explicit ReshapeFrom(std::vector<std::pair<int, int>> p) : parts(std::move(p)) {}
  const char* name() const override { return "reshape_from"; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override {
    prims::Reshape(parts_shape(in.subspan(1), parts)).infer(in.first(1), out);
  }
  std::vector<Tensor> vjp(std::span<const Tensor> p, std::span<const Tensor> cts,
                          std::span<const int> argnums, std::span<const Tensor>) const override {
    std::vector<Tensor> g;  // the sources give sizes only: no gradient
    for (int k : argnums) g.push_back(k == 0 ? detail::reshape_like(cts[0], p[0]) : Tensor());
    return g;
  }
  uint32_t vjp_saves() const override { return save_input(0); }
  std::string attributes() const override {
    std::vector<std::string> t;
    for (const auto& [k, axis] : parts) t.push_back(fmt::format("{}:{}", k, axis));
    return fmt::format("parts=[{}]", fmt::join(t, ", "));
  }
};

}  // namespace

namespace detail {

Tensor merge_axes(const Tensor& x, const std::vector<int>& groups) {
  if (std::all_of(groups.begin(), groups.end(), [](int g) { return g == 1; }) &&
      static_cast<int>(groups.size()) == x.rank())
    return x;
  if (!open_shapes()) return reshape(x, merged_shape(x.shape(), groups));
  return dispatch(MergeAxes(groups), {x});
}

Tensor reshape_from(const Tensor& x, const std::vector<Tensor>& sources,
                    const std::vector<std::pair<int, int>>& parts) {
  if (!open_shapes()) {
    const TensorShape s = parts_shape(sources, parts);
    return s == x.shape() ? x : reshape(x, s);
  }
  std::vector<Tensor> in = {x};
  in.insert(in.end(), sources.begin(), sources.end());
  return dispatch(ReshapeFrom(parts), in);
}

Tensor axis_table(const Tensor& x, int axis, std::string kind, std::vector<double> params,
                  DType dtype, std::function<std::vector<double>(int64_t)> make,
                  std::function<TensorShape(int64_t)> shape) {
  const int a = normalize_axis("axis_table", axis, x.shape());
  if (!open_shapes()) {
    const int64_t n = x.shape()[a];
    return from_doubles(make(n), shape(n), dtype);
  }
  AxisTable op;
  op.axis = a;
  op.kind = std::move(kind);
  op.params = std::move(params);
  op.dtype = dtype;
  op.make = std::move(make);
  op.shape = std::move(shape);
  return dispatch(op, {x});
}

Tensor broadcast_with(const Tensor& x, const std::vector<Tensor>& others, const TensorShape& want) {
  if (x.shape() == want) return x;
  if (!open_shapes()) return broadcast_to(x, want);
  for (const Tensor& o : others)
    if (o.shape() == want) return broadcast_like(x, o);
  Tensor like = zeros_like(x);
  for (const Tensor& o : others) like = like + zeros_like(o);
  return broadcast_like(x, like);
}

Tensor split_axis(const Tensor& x, int axis, const std::vector<int64_t>& sizes) {
  const int a = normalize_axis("split_axis", axis, x.shape());
  int64_t n = 1;
  for (int64_t k : sizes) n *= k;
  TF_CHECK_ARG(x.shape()[a] == None || x.shape()[a] == n, "split_axis",
               "cannot split axis {} of shape {} into [{}]", a, x.shape().to_string(),
               fmt::join(sizes, ", "));
  if (!open_shapes()) return reshape(x, split_shape(x.shape(), a, sizes));
  return dispatch(SplitAxis(a, sizes), {x});
}

Tensor crop(const char* op, const Tensor& x, const std::vector<int64_t>& begin,
            const std::vector<int64_t>& trim) {
  TF_CHECK_ARG(begin.size() == static_cast<size_t>(x.rank()) && trim.size() == begin.size(), op,
               "begin [{}] and trim [{}] need one entry per dimension of shape {}",
               fmt::join(begin, ", "), fmt::join(trim, ", "), x.shape().to_string());
  std::vector<int64_t> size(begin.size());
  for (size_t i = 0; i < begin.size(); ++i) {
    const int64_t d = x.shape()[static_cast<int>(i)];
    TF_CHECK_ARG(begin[i] >= 0 && trim[i] >= 0 && (d == None || begin[i] + trim[i] <= d), op,
                 "cropping {} from the start and {} from the end exceeds dimension {} of shape {}",
                 begin[i], trim[i], i, x.shape().to_string());
    size[i] = -1 - trim[i];  // the rest of the dimension but its last trim[i]
  }
  return dispatch(prims::Slice(begin, std::move(size)), {x});
}

Tensor insert_axes(const Tensor& x, const std::vector<int>& axes) {
  if (axes.empty()) return x;
  return dispatch(InsertAxes(axes), {x});
}

Tensor remove_axes(const Tensor& x, const std::vector<int>& axes) {
  if (axes.empty()) return x;
  return dispatch(RemoveAxes(axes), {x});
}

bool open_shapes() { return thread_context().open_shapes; }

Tensor element_count(const Tensor& x, const std::vector<int>& axes, DType dtype) {
  if (!open_shapes()) {
    return from_doubles({static_cast<double>(reduced_count(x.shape(), axes))}, {}, dtype);
  }
  return dispatch(ElementCount(axes, dtype), {x});
}

Tensor shape_of(const Tensor& x, DType dtype) {
  if (!open_shapes()) return ShapeOf::of(x.shape(), dtype);
  return dispatch(ShapeOf(dtype), {x});
}

Tensor broadcast_like(const Tensor& x, const Tensor& like) {
  if (!open_shapes()) return broadcast_to(x, like.shape());
  if (x.shape() == like.shape()) return x;
  return dispatch(BroadcastLike(), {x, like});
}

Tensor reshape_like(const Tensor& x, const Tensor& like) {
  if (!open_shapes()) return reshape(x, like.shape());
  return dispatch(ReshapeLike(), {x, like});
}

TensorShape resolve_input_shape(const char* op, const TensorShape& attr, ShapeFrom from,
                                std::span<const Tensor> inputs) {
  if (from == ShapeFrom::attribute) return attr;
  TF_CHECK_T(InternalError, !inputs.empty(), op, "expects the forward input as its last input");
  const TensorShape& x = inputs.back().shape();
  const TensorShape like =
      from == ShapeFrom::last_input_channels_first ? channels_last_shape(x) : x;
  TF_CHECK_T(InternalError, like.rank() == attr.rank(), op,
             "input_shape {} and its last input {} differ in rank", attr.to_string(),
             x.to_string());
  TensorShape out = attr;
  for (int i = 0; i < attr.rank(); ++i)
    if (out[i] == None) out[i] = like[i];
  return out;
}

std::string shape_from_text(ShapeFrom from) {
  switch (from) {
    case ShapeFrom::attribute:
      return {};
    case ShapeFrom::last_input:
      return ", input_shape from the last input";
    case ShapeFrom::last_input_channels_first:
      return ", input_shape from the last input (channels first)";
  }
  return {};
}

std::vector<Tensor> ShapeSource::with(std::vector<Tensor> inputs) const {
  if (like.defined()) inputs.push_back(like);
  return inputs;
}

ShapeSource shape_source(const Tensor& x, bool channels_first) {
  if (!open_shapes())
    return {channels_first ? channels_last_shape(x.shape()) : x.shape(), ShapeFrom::attribute,
            Tensor()};
  return {TensorShape(std::vector<int64_t>(static_cast<size_t>(x.rank()), None)),
          channels_first ? ShapeFrom::last_input_channels_first : ShapeFrom::last_input, x};
}

}  // namespace detail
}  // namespace tapeflow
