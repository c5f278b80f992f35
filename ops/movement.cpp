#include "ops/movement.h"

#include "ops/dynamic_shape.h"

#include <algorithm>
#include <numeric>

#include "core/check.h"
#include "ops/binary.h"
#include "ops/dispatch.h"
#include "ops/factory.h"
#include "ops/helpers.h"
#include "ops/reduce.h"
#include "ops/scatter.h"
#include "ops/unary.h"

namespace tapeflow {

namespace {

// A shape given by the caller, printed with -1 as -1 (TensorShape prints it as None).
std::string requested_shape(const TensorShape& s) {
  std::string out = "(";
  for (int i = 0; i < s.rank(); ++i) {
    if (i) out += ", ";
    out += std::to_string(s[i]);
  }
  if (s.rank() == 1) out += ",";
  return out + ")";
}

void check_defined(const char* op, const Tensor& x) {
  TF_CHECK_ARG(x.defined(), op, "an input is an undefined tensor (TF's None)");
}

// "[{1, 2}, {0, 0}]" for messages.
std::string pairs_to_string(const std::vector<std::pair<int64_t, int64_t>>& p) {
  std::string s = "[";
  for (size_t i = 0; i < p.size(); ++i)
    s += fmt::format("{}{{{}, {}}}", i ? ", " : "", p[i].first, p[i].second);
  return s + "]";
}

Tensor reshape_to(const Tensor& x, const TensorShape& s) {
  return detail::dispatch(prims::Reshape(s), {x});
}

// split's primitive: the pieces of x along `axis`, each a Slice (its kernels run them), with one
// vjp for all of them: the pieces' cotangents concatenated (zeros for a piece without one). As
// separate slices, each piece's vjp padded its cotangent to x's whole shape and the tape added
// those: n pieces cost n full-size pads and adds (quadratic in n: an unrolled RNN's timesteps).
class Split final : public PrimitiveBase<Split> {
 public:
  int axis = 0;
  std::vector<int64_t> sizes, offsets;  // offsets[k]: where piece k begins along axis
  Split(int a, std::vector<int64_t> s) : axis(a), sizes(std::move(s)) {
    int64_t at = 0;
    for (int64_t n : sizes) {
      offsets.push_back(at);
      at += n;
    }
  }
  const char* name() const override { return "split"; }
  int num_outputs() const override { return static_cast<int>(sizes.size()); }
  std::string attributes() const override {
    return fmt::format("axis={}, sizes={}", axis, detail::vec_to_string(sizes));
  }
  // Piece k as a Slice: whole in every other dimension (-1), so that the pieces of a None batch
  // stay open in a trace.
  prims::Slice piece(size_t k, int rank) const {
    std::vector<int64_t> begin(static_cast<size_t>(rank), 0), size(begin.size(), -1);
    begin[static_cast<size_t>(axis)] = offsets[k];
    size[static_cast<size_t>(axis)] = sizes[k];
    return prims::Slice(std::move(begin), std::move(size));
  }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override {
    for (size_t k = 0; k < sizes.size(); ++k) piece(k, in[0].rank()).infer(in, out.subspan(k, 1));
  }
  void eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const override {
    for (size_t k = 0; k < sizes.size(); ++k)
      piece(k, in[0].rank()).eval_cpu(in, out.subspan(k, 1));
  }
  void eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const override {
    for (size_t k = 0; k < sizes.size(); ++k)
      piece(k, in[0].rank()).eval_cuda(in, out.subspan(k, 1));
  }
  uint32_t vjp_saves() const override { return save_input(0); }  // zeros for missing pieces
  bool vjp_accepts_undefined_cotangents() const override { return true; }
  std::vector<Tensor> vjp(std::span<const Tensor> primals, std::span<const Tensor> cotangents,
                          std::span<const int>, std::span<const Tensor>) const override {
    std::vector<Tensor> parts;
    Tensor zero_x;  // zeros like x, made for the first piece without a cotangent
    for (size_t k = 0; k < sizes.size(); ++k) {
      if (cotangents[k].defined()) {
        parts.push_back(cotangents[k]);
        continue;
      }
      if (!zero_x.defined()) zero_x = zeros_like(primals[0]);
      const prims::Slice s = piece(k, primals[0].rank());
      parts.push_back(slice(zero_x, s.begin, s.size));
    }
    return {parts.size() == 1 ? parts[0] : concat(parts, axis)};
  }
};

// Concat's gradient in a trace for None dimensions: inputs (the cotangent, then each concat
// input), outputs the cotangent's pieces, piece k shaped as input k (its length along axis read
// when the graph runs: the inputs' lengths may be None dimensions).
class SplitLike final : public PrimitiveBase<SplitLike> {
 public:
  int axis = 0, n = 0;
  SplitLike(int a, int pieces) : axis(a), n(pieces) {}
  const char* name() const override { return "split_like"; }
  int num_outputs() const override { return n; }
  std::string attributes() const override {
    return fmt::format("axis={}, pieces shaped as inputs 1-{}", axis, n);
  }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override {
    TF_CHECK_T(InternalError, static_cast<int>(in.size()) == n + 1, name(),
               "takes the cotangent and {} tensors, got {} inputs", n, in.size());
    const TensorShape& s = in[0].shape();
    int64_t total = 0;
    bool known = true;
    for (int k = 0; k < n; ++k) {
      const TensorShape& p = in[static_cast<size_t>(k + 1)].shape();
      TF_CHECK_ARG(p.rank() == s.rank(), name(), "piece {} has shape {}, the tensor split {}", k,
                   p.to_string(), s.to_string());
      known = known && p[axis] != None;
      if (known) total += p[axis];
      TensorShape piece = s;
      piece[axis] = p[axis];
      out[static_cast<size_t>(k)] = {piece, in[0].dtype()};
    }
    TF_CHECK_ARG(!known || s[axis] == None || s[axis] == total, name(),
                 "the pieces' lengths along axis {} add up to {}, the tensor split has shape {}",
                 axis, total, s.to_string());
  }
  // Piece k as a Slice of the cotangent, at the offset the earlier pieces' lengths give.
  template <class Eval>
  void each_piece(std::span<const Tensor> in, std::span<Tensor> out, Eval eval) const {
    const int rank = in[0].rank();
    int64_t at = 0;
    for (int k = 0; k < n; ++k) {
      std::vector<int64_t> begin(static_cast<size_t>(rank), 0), size(begin.size(), -1);
      begin[static_cast<size_t>(axis)] = at;
      size[static_cast<size_t>(axis)] = out[static_cast<size_t>(k)].shape()[axis];
      at += size[static_cast<size_t>(axis)];
      eval(prims::Slice(std::move(begin), std::move(size)), in.subspan(0, 1),
           out.subspan(static_cast<size_t>(k), 1));
    }
  }
  void eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const override {
    each_piece(in, out, [](const prims::Slice& s, auto i, auto o) { s.eval_cpu(i, o); });
  }
  void eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const override {
    each_piece(in, out, [](const prims::Slice& s, auto i, auto o) { s.eval_cuda(i, o); });
  }
  uint32_t vjp_saves() const override { return 0; }
  bool vjp_accepts_undefined_cotangents() const override { return true; }
  // Linear in the cotangent: the pieces' cotangents concatenated (zeros for unused pieces);
  // the other inputs give only shapes.
  std::vector<Tensor> vjp(std::span<const Tensor> primals, std::span<const Tensor> cotangents,
                          std::span<const int> argnums, std::span<const Tensor>) const override {
    std::vector<Tensor> out;
    for (int a : argnums) {
      if (a != 0) {
        out.emplace_back();
        continue;
      }
      std::vector<Tensor> parts;
      for (int k = 0; k < n; ++k)
        parts.push_back(cotangents[static_cast<size_t>(k)].defined()
                            ? cotangents[static_cast<size_t>(k)]
                            : zeros_like(primals[static_cast<size_t>(k + 1)]));
      out.push_back(parts.size() == 1 ? parts[0] : concat(parts, axis));
    }
    return out;
  }
};

// SliceLike's and PadLike's check: `inner` (the window, or the tensor placed) at `begin` fits in
// `outer` (None sizes are checked when the graph runs); the nouns name them in the messages.
void check_placement(const char* op, const TensorShape& inner, const char* inner_noun,
                     const std::vector<int64_t>& begin, const TensorShape& outer,
                     const char* outer_noun, const char* prep) {
  TF_CHECK_ARG(inner.rank() == outer.rank() && static_cast<int>(begin.size()) == outer.rank(), op,
               "{} of shape {} at {} {} {} of shape {}", inner_noun, inner.to_string(),
               detail::vec_to_string(begin), prep, outer_noun, outer.to_string());
  for (int d = 0; d < outer.rank(); ++d)
    TF_CHECK_ARG(outer[d] == None || inner[d] == None ||
                     begin[static_cast<size_t>(d)] + inner[d] <= outer[d],
                 op, "{} of shape {} at {} does not fit in {} of shape {}", inner_noun,
                 inner.to_string(), detail::vec_to_string(begin), outer_noun, outer.to_string());
}

// pad's gradient in a trace for None dimensions and its own gradient: the window of x at `begin`
// shaped as `like` (SliceLike), and x placed at `begin` in zeros shaped as `like` (PadLike).
// The sizes are read when the graph runs (a padded None axis), and each is the other's vjp.
// Inputs (x, like); like gives only its shape.
class SliceLike final : public PrimitiveBase<SliceLike> {
 public:
  std::vector<int64_t> begin;
  explicit SliceLike(std::vector<int64_t> b) : begin(std::move(b)) {}
  const char* name() const override { return "slice_like"; }
  std::string attributes() const override {
    return fmt::format("begin={}", detail::vec_to_string(begin));
  }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override {
    const TensorShape& like = in[1].shape();
    check_placement(name(), like, "a window", begin, in[0].shape(), "a tensor", "of");
    out[0] = {like, in[0].dtype()};
  }
  prims::Slice window(const Tensor& out) const { return prims::Slice(begin, out.shape().dims()); }
  void eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const override {
    window(out[0]).eval_cpu(in.subspan(0, 1), out);
  }
  void eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const override {
    window(out[0]).eval_cuda(in.subspan(0, 1), out);
  }
  uint32_t vjp_saves() const override { return save_input(0); }
  std::vector<Tensor> vjp(std::span<const Tensor> primals, std::span<const Tensor> cotangents,
                          std::span<const int> argnums, std::span<const Tensor>) const override;
};

class PadLike final : public PrimitiveBase<PadLike> {
 public:
  std::vector<int64_t> begin;
  explicit PadLike(std::vector<int64_t> b) : begin(std::move(b)) {}
  const char* name() const override { return "pad_like"; }
  std::string attributes() const override {
    return fmt::format("begin={}", detail::vec_to_string(begin));
  }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override {
    const TensorShape& like = in[1].shape();
    check_placement(name(), in[0].shape(), "a tensor", begin, like, "zeros", "in");
    out[0] = {like, in[0].dtype()};
  }
  prims::Pad padding(const Tensor& x, const Tensor& out) const {
    std::vector<std::pair<int64_t, int64_t>> p;
    for (int d = 0; d < x.rank(); ++d) {
      const int64_t b = begin[static_cast<size_t>(d)];
      p.emplace_back(b, out.shape()[d] - b - x.shape()[d]);
    }
    return prims::Pad(std::move(p), 0.0);
  }
  void eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const override {
    padding(in[0], out[0]).eval_cpu(in.subspan(0, 1), out);
  }
  void eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const override {
    padding(in[0], out[0]).eval_cuda(in.subspan(0, 1), out);
  }
  uint32_t vjp_saves() const override { return save_input(0); }
  std::vector<Tensor> vjp(std::span<const Tensor> primals, std::span<const Tensor> cotangents,
                          std::span<const int> argnums, std::span<const Tensor>) const override {
    std::vector<Tensor> out;
    for (int a : argnums)
      out.push_back(a == 0 ? detail::dispatch(SliceLike(begin), {cotangents[0], primals[0]})
                           : Tensor());
    return out;
  }
};

std::vector<Tensor> SliceLike::vjp(std::span<const Tensor> primals,
                                   std::span<const Tensor> cotangents, std::span<const int> argnums,
                                   std::span<const Tensor>) const {
  std::vector<Tensor> out;
  for (int a : argnums)
    out.push_back(a == 0 ? detail::dispatch(PadLike(begin), {cotangents[0], primals[0]})
                         : Tensor());
  return out;
}

std::vector<Tensor> split_sizes(const Tensor& x, const std::vector<int64_t>& sizes, int axis) {
  const Tensor in[] = {x};
  return detail::dispatch_multi(Split(axis, sizes), in);
}

}  // namespace

Tensor reshape(const Tensor& x, const TensorShape& shape) {
  check_defined("reshape", x);
  const int64_t n = x.num_elements();  // -1 for a symbolic tensor with an unknown dimension
  int infer_at = -1;
  for (int i = 0; i < shape.rank(); ++i) {
    if (shape[i] == -1) {
      TF_CHECK_ARG(infer_at < 0, "reshape", "only one dimension of shape {} may be -1",
                   requested_shape(shape));
      infer_at = i;
    }
  }
  const int64_t known = shape.known_elements();
  TensorShape out = shape;
  if (n >= 0) {
    if (infer_at >= 0 && known == 0 && n == 0) {
      // An empty tensor to a shape with a 0 and a -1: TF infers the -1 from the nonzero
      // dimensions of both ((0, 3) to (0, -1) is (0, 3)).
      int64_t in_nonzero = 1, out_nonzero = 1;
      for (int64_t d : x.shape())
        if (d > 0) in_nonzero *= d;
      for (int i = 0; i < shape.rank(); ++i)
        if (i != infer_at && shape[i] > 0) out_nonzero *= shape[i];
      out[infer_at] = in_nonzero / out_nonzero;
    } else if (infer_at >= 0) {
      TF_CHECK_ARG(known != 0, "reshape",
                   "cannot reshape a tensor with {} elements to shape {}: the -1 dimension "
                   "cannot be inferred when another dimension is 0",
                   n, requested_shape(shape));
      TF_CHECK_ARG(n % known == 0, "reshape",
                   "cannot reshape a tensor with {} elements to shape {} ({} is not a multiple "
                   "of {})",
                   n, requested_shape(shape), n, known);
      out[infer_at] = n / known;
      // A graph for None dimensions keeps the -1: shape inference resolves it at each size.
      if (detail::open_shapes()) return detail::dispatch(prims::Reshape(shape), {x});
    } else {
      TF_CHECK_ARG(known == n, "reshape",
                   "cannot reshape a tensor with {} elements to shape {} ({} elements)", n,
                   requested_shape(shape), known);
    }
  }
  return reshape_to(x, out);
}

Tensor transpose(const Tensor& x, const std::vector<int>& perm) {
  check_defined("transpose", x);
  std::vector<int> p = perm;
  if (p.empty() && x.rank() > 0) {
    p.resize(static_cast<size_t>(x.rank()));
    for (int i = 0; i < x.rank(); ++i) p[i] = x.rank() - 1 - i;
  }
  // Negative entries count from the end, as TF's (perm [-1, 0, 1] is [2, 0, 1] for rank 3).
  if (static_cast<int>(p.size()) == x.rank())
    for (int& a : p)
      if (a < 0 && a >= -x.rank()) a += x.rank();
  return detail::dispatch(prims::Transpose(std::move(p)), {x});
}

Tensor expand_dims(const Tensor& x, int axis) {
  check_defined("expand_dims", x);
  const int r = x.rank();
  TF_CHECK_ARG(axis >= -r - 1 && axis <= r, "expand_dims",
               "axis {} is out of range for a tensor of shape {} (expected [{}, {}])", axis,
               x.shape().to_string(), -r - 1, r);
  TF_CHECK_ARG(r < TensorShape::kMaxRank, "expand_dims",
               "cannot add a dimension to shape {}: the maximum rank is {}", x.shape().to_string(),
               TensorShape::kMaxRank);
  const int a = axis < 0 ? axis + r + 1 : axis;
  if (detail::open_shapes()) return detail::insert_axes(x, {a});
  TensorShape s;
  for (int i = 0; i < r; ++i) {
    if (i == a) s.push_back(1);
    s.push_back(x.shape()[i]);
  }
  if (a == r) s.push_back(1);
  return reshape_to(x, s);
}

Tensor squeeze(const Tensor& x, const std::vector<int>& axes) {
  check_defined("squeeze", x);
  const int r = x.rank();
  std::vector<bool> drop(static_cast<size_t>(r), false);
  if (axes.empty()) {
    for (int i = 0; i < r; ++i) drop[i] = x.shape()[i] == 1;
  } else {
    for (int a : detail::normalize_axes("squeeze", axes, x.shape())) {
      TF_CHECK_ARG(x.shape()[a] == 1, "squeeze",
                   "cannot squeeze axis {} of shape {}: its size is {}, not 1", a,
                   x.shape().to_string(), x.shape()[a]);
      drop[a] = true;
    }
  }
  if (detail::open_shapes() && !axes.empty()) {
    std::vector<int> removed;
    for (int i = 0; i < r; ++i)
      if (drop[i]) removed.push_back(i);
    return detail::remove_axes(x, removed);
  }
  TensorShape s;
  for (int i = 0; i < r; ++i)
    if (!drop[i]) s.push_back(x.shape()[i]);
  return reshape_to(x, s);
}

Tensor concat(const std::vector<Tensor>& values, int axis) {
  TF_CHECK_ARG(!values.empty(), "concat", "needs at least one tensor");
  std::vector<Tensor> v = values;
  detail::unify_dtypes("concat", v);
  TF_CHECK_ARG(v[0].rank() > 0, "concat",
               "cannot concatenate scalars (values[0] has shape ()); use tf::stack");
  const int a = detail::normalize_axis("concat", axis, v[0].shape());
  return detail::dispatch(prims::Concat(a), std::span<const Tensor>(v));
}

Tensor stack(const std::vector<Tensor>& values, int axis) {
  TF_CHECK_ARG(!values.empty(), "stack", "needs at least one tensor");
  std::vector<Tensor> v = values;
  detail::unify_dtypes("stack", v);
  const TensorShape& s0 = v[0].shape();
  for (size_t i = 1; i < v.size(); ++i)
    TF_CHECK_ARG(v[i].shape() == s0, "stack", "shapes differ: values[0] is {}, values[{}] is {}",
                 s0.to_string(), i, v[i].shape().to_string());
  const int r = s0.rank();
  TF_CHECK_ARG(axis >= -r - 1 && axis <= r, "stack",
               "axis {} is out of range for stacking tensors of shape {} (expected [{}, {}])", axis,
               s0.to_string(), -r - 1, r);
  const int a = axis < 0 ? axis + r + 1 : axis;
  for (auto& t : v) t = expand_dims(t, a);
  return detail::dispatch(prims::Concat(a), std::span<const Tensor>(v));
}

std::vector<Tensor> split(const Tensor& x, int num_splits, int axis) {
  check_defined("split", x);
  const int a = detail::normalize_axis("split", axis, x.shape());
  const int64_t d = x.shape()[a];
  TF_CHECK_ARG(num_splits > 0, "split", "num_splits must be positive, got {}", num_splits);
  TF_CHECK_ARG(d % num_splits == 0, "split",
               "dimension {} of shape {} (size {}) is not divisible by num_splits {}", a,
               x.shape().to_string(), d, num_splits);
  return split_sizes(x, std::vector<int64_t>(static_cast<size_t>(num_splits), d / num_splits), a);
}

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& size_splits, int axis) {
  check_defined("split", x);
  const int a = detail::normalize_axis("split", axis, x.shape());
  const int64_t d = x.shape()[a];
  TF_CHECK_ARG(!size_splits.empty(), "split", "size_splits is empty");
  int infer_at = -1;
  int64_t known = 0;
  for (size_t i = 0; i < size_splits.size(); ++i) {
    const int64_t s = size_splits[i];
    if (s == -1) {
      TF_CHECK_ARG(infer_at < 0, "split", "size_splits {} may contain at most one -1",
                   detail::vec_to_string(size_splits));
      infer_at = static_cast<int>(i);
    } else {
      TF_CHECK_ARG(s >= 0, "split", "size_splits {} has a negative size",
                   detail::vec_to_string(size_splits));
      TF_CHECK_ARG(!__builtin_add_overflow(known, s, &known), "split",
                   "size_splits {} add up to more than an int64 can hold (dimension {} of shape "
                   "{} has size {})",
                   detail::vec_to_string(size_splits), a, x.shape().to_string(), d);
    }
  }
  std::vector<int64_t> sizes = size_splits;
  if (infer_at >= 0) {
    TF_CHECK_ARG(known <= d, "split",
                 "size_splits {} add up to {}, more than dimension {} of shape {} (size {})",
                 detail::vec_to_string(size_splits), known, a, x.shape().to_string(), d);
    sizes[infer_at] = d - known;
  } else {
    TF_CHECK_ARG(known == d, "split",
                 "size_splits {} add up to {}, but dimension {} of shape {} has size {}",
                 detail::vec_to_string(size_splits), known, a, x.shape().to_string(), d);
  }
  return split_sizes(x, sizes, a);
}

Tensor slice(const Tensor& x, const std::vector<int64_t>& begin, const std::vector<int64_t>& size) {
  check_defined("slice", x);
  const int r = x.rank();
  TF_CHECK_ARG(begin.size() == static_cast<size_t>(r) && size.size() == static_cast<size_t>(r),
               "slice", "begin {} and size {} need one entry per dimension of shape {}",
               detail::vec_to_string(begin), detail::vec_to_string(size), x.shape().to_string());
  std::vector<int64_t> sz(size);
  for (int i = 0; i < r; ++i) {
    const int64_t d = x.shape()[i], b = begin[i];
    TF_CHECK_ARG(b >= 0 && b <= d, "slice",
                 "begin[{}] = {} is out of bounds for dimension {} of shape {} (expected [0, {}])",
                 i, b, i, x.shape().to_string(), d);
    if (sz[i] == -1) continue;  // the rest of the dimension: the primitive keeps the -1
    TF_CHECK_ARG(sz[i] >= 0 && sz[i] <= d - b, "slice",
                 "size[{}] = {} is out of bounds for dimension {} of shape {} with begin[{}] = {} "
                 "(expected -1 or [0, {}])",
                 i, size[i], i, x.shape().to_string(), i, b, d - b);
  }
  return detail::dispatch(prims::Slice(begin, std::move(sz)), {x});
}

Tensor gather(const Tensor& params, const Tensor& indices, int axis) {
  check_defined("gather", params);
  check_defined("gather", indices);
  const int a = detail::normalize_axis("gather", axis, params.shape());
  return detail::dispatch(prims::Gather(a), {params, indices});
}

Tensor one_hot(const Tensor& indices, int64_t depth, float on_value, float off_value) {
  check_defined("one_hot", indices);
  const DType d = indices.dtype();
  TF_CHECK_ARG(d == int32 || d == int64 || d == uint8, "one_hot",
               "indices must be int32, int64 or uint8, got {}", dtype_name(d));
  // TF's depth is an int32 scalar.
  TF_CHECK_ARG(depth >= 0 && depth <= INT32_MAX, "one_hot",
               "depth must be in [0, 2^31 - 1] (TF's int32 depth), got {}", depth);
  TF_CHECK_ARG(indices.rank() < TensorShape::kMaxRank, "one_hot",
               "indices of shape {} leave no room for the new axis (maximum rank {})",
               indices.shape().to_string(), TensorShape::kMaxRank);
  const int64_t n = indices.shape().known_elements();
  TF_CHECK_ARG(depth == 0 || n <= INT64_MAX / depth, "one_hot",
               "indices of shape {} with depth {} give more elements than int64 can count",
               indices.shape().to_string(), depth);
  // Out-of-range (and negative) indices match no position and give all-off rows, as TF. The
  // positions are int32 or int64 (uint8 indices are compared as int32: a uint8 range past 255
  // would wrap).
  const Tensor idx = d == uint8 ? cast(indices, int32) : indices;
  const Tensor positions = range(0.0, static_cast<double>(depth), 1.0, idx.dtype());
  const Tensor hit = equal(expand_dims(idx, -1), positions);
  return where(hit, constant(Tensor(on_value)), constant(Tensor(off_value)));
}

Tensor broadcast_to(const Tensor& x, const TensorShape& shape) {
  check_defined("broadcast_to", x);
  return detail::dispatch(prims::BroadcastTo(shape), {x});
}

namespace {

Tensor tile_to(const Tensor& x, const std::vector<int64_t>& multiples, const TensorShape& out) {
  const int r = x.rank();
  // tile is a broadcast of x with a size-1 axis inserted before every tiled dimension:
  // (d0, d1) tiled (m0, m1) = reshape(broadcast_to(reshape(x, (1, d0, 1, d1)), (m0, d0, m1, d1))).
  // Runs of untiled dimensions are merged first; when the result would exceed the maximum rank,
  // dimensions are tiled one at a time.
  std::vector<std::pair<int64_t, int64_t>> groups;  // {size, multiple}
  for (int i = 0; i < r; ++i) {
    if (multiples[i] == 1 && !groups.empty() && groups.back().second == 1)
      groups.back().first *= x.shape()[i];
    else
      groups.push_back({x.shape()[i], multiples[i]});
  }
  int tiled = 0;
  for (auto& g : groups) tiled += g.second != 1;
  if (static_cast<int>(groups.size()) + tiled <= TensorShape::kMaxRank) {
    TensorShape in_shape, b_shape;
    for (auto& [d, m] : groups) {
      if (m != 1) {
        in_shape.push_back(1);
        b_shape.push_back(m);
      }
      in_shape.push_back(d);
      b_shape.push_back(d);
    }
    return reshape_to(broadcast_to(reshape_to(x, in_shape), b_shape), out);
  }
  Tensor cur = x;
  TensorShape cs = x.shape();
  for (int i = 0; i < r; ++i) {
    if (multiples[i] == 1) continue;
    int64_t before = 1, after = 1;
    for (int j = 0; j < i; ++j) before *= cs[j];
    for (int j = i + 1; j < r; ++j) after *= cs[j];
    cur = broadcast_to(reshape_to(cur, {before, 1, cs[i], after}),
                       {before, multiples[i], cs[i], after});
    cs[i] *= multiples[i];
    cur = reshape_to(cur, cs);
  }
  return cur;
}

}  // namespace

namespace {

// tile in a trace for None dimensions: copies concatenated along each tiled axis (doubling, then
// the binary digits of the multiple: O(log m) concats), whose shapes (and gradients' shapes)
// follow the input's when the graph runs, where the broadcast above bakes the traced sizes in.
Tensor tile_by_concat(const Tensor& x, const std::vector<int64_t>& multiples) {
  Tensor cur = x;
  for (int i = 0; i < x.rank(); ++i) {
    int64_t m = multiples[static_cast<size_t>(i)];
    if (m == 1) continue;
    if (m == 0) {
      // No slice along axis i: a gather of no indices (its gradient, zeros, takes its shape
      // from the input when the graph runs, where a slice's would pad to the traced length).
      cur = gather(cur, constant(std::vector<int64_t>{}, TensorShape{0}), i);
      continue;
    }
    Tensor power = cur;  // cur tiled 2^j times
    std::vector<Tensor> parts;
    for (; m > 0; m >>= 1) {
      if (m & 1) parts.push_back(power);
      if (m > 1) power = concat({power, power}, i);
    }
    cur = parts.size() == 1 ? parts[0] : concat(parts, i);
  }
  return cur;
}

}  // namespace

Tensor tile(const Tensor& x, const std::vector<int64_t>& multiples) {
  check_defined("tile", x);
  const int r = x.rank();
  TF_CHECK_ARG(multiples.size() == static_cast<size_t>(r), "tile",
               "multiples {} has {} entries, but the tensor of shape {} has rank {}",
               detail::vec_to_string(multiples), multiples.size(), x.shape().to_string(), r);
  TensorShape out;
  for (int i = 0; i < r; ++i) {
    TF_CHECK_ARG(multiples[i] >= 0, "tile", "multiples {} has a negative entry (shape {})",
                 detail::vec_to_string(multiples), x.shape().to_string());
    int64_t d;
    TF_CHECK_ARG(!__builtin_mul_overflow(x.shape()[i], multiples[i], &d), "tile",
                 "multiples {} make dimension {} of shape {} larger than an int64",
                 detail::vec_to_string(multiples), i, x.shape().to_string());
    out.push_back(d);
  }
  detail::check_element_count("tile", out);
  // A zero-size dimension stays 0 whatever its multiple: tile it once (no huge intermediate).
  std::vector<int64_t> effective = multiples;
  for (int i = 0; i < r; ++i)
    if (x.shape()[i] == 0) effective[i] = 1;
  if (detail::open_shapes() && x.is_symbolic()) return tile_by_concat(x, effective);
  try {
    return tile_to(x, effective, out);
  } catch (const ResourceExhaustedError& e) {  // the output did not fit: say it was tile's
    TF_THROW(ResourceExhaustedError, "tile", "its output of shape {}: {}", out.to_string(),
             e.what());
  }
}

Tensor pad(const Tensor& x, const std::vector<std::pair<int64_t, int64_t>>& paddings,
           double constant_value) {
  check_defined("pad", x);
  detail::check_value_fits("pad", "constant_value", constant_value, x.dtype());
  return detail::dispatch(prims::Pad(paddings, constant_value), {x});
}

namespace prims {

void Reshape::infer(std::span<const Tensor> in, std::span<TensorMeta> out) const {
  const Tensor& x = in[0];
  TensorShape s = shape;
  if (x.shape().is_fully_defined()) {
    // One -1 (kept by graphs for None dimensions) takes the size the element count leaves.
    int at = -1;
    for (int i = 0; i < s.rank(); ++i) {
      if (s[i] != -1) continue;
      TF_CHECK_ARG(at < 0, name(), "only one dimension of shape {} may be -1", s.to_string());
      at = i;
    }
    const int64_t known = s.known_elements();
    if (at >= 0) {
      TF_CHECK_ARG(known > 0 && x.num_elements() % known == 0, name(),
                   "cannot reshape a tensor with {} elements to shape {}", x.num_elements(),
                   shape.to_string());
      s[at] = x.num_elements() / known;
    }
  }
  if (x.shape().is_fully_defined() && s.is_fully_defined())
    TF_CHECK_ARG(x.num_elements() == s.num_elements(), name(),
                 "cannot reshape a tensor with {} elements to shape {} ({} elements)",
                 x.num_elements(), s.to_string(), s.num_elements());
  out[0] = {s, x.dtype()};
}
// A view: dispatch makes the output share the input's storage; there is nothing to run.
void Reshape::eval_cpu(std::span<const Tensor>, std::span<Tensor>) const {}
void Reshape::eval_cuda(std::span<const Tensor>, std::span<Tensor>) const {}

void Transpose::infer(std::span<const Tensor> in, std::span<TensorMeta> out) const {
  const Tensor& x = in[0];
  const int r = x.rank();
  TF_CHECK_ARG(perm.size() == static_cast<size_t>(r), name(),
               "perm {} has {} entries, but the tensor of shape {} has rank {}",
               detail::vec_to_string(perm), perm.size(), x.shape().to_string(), r);
  std::vector<bool> seen(static_cast<size_t>(r), false);
  TensorShape s;
  for (int p : perm) {
    TF_CHECK_ARG(p >= 0 && p < r && !seen[p], name(),
                 "perm {} is not a permutation of [0, {}) (tensor of shape {})",
                 detail::vec_to_string(perm), r, x.shape().to_string());
    seen[p] = true;
    s.push_back(x.shape()[p]);
  }
  out[0] = {s, x.dtype()};
}
std::string Transpose::attributes() const {
  return "perm=" + detail::vec_to_string(perm);
}

void BroadcastTo::infer(std::span<const Tensor> in, std::span<TensorMeta> out) const {
  const Tensor& x = in[0];
  const int r = x.rank(), R = shape.rank();
  TF_CHECK_ARG(shape.is_fully_defined(), name(), "the target shape {} has an unknown dimension",
               shape.to_string());
  bool ok = r <= R;
  for (int i = 0; ok && i < r; ++i) {
    const int64_t d = x.shape()[i], D = shape[R - r + i];
    ok = d == D || d == 1;
  }
  TF_CHECK_ARG(ok, name(), "cannot broadcast a tensor of shape {} to shape {}",
               x.shape().to_string(), shape.to_string());
  out[0] = {shape, x.dtype()};
}

void Slice::infer(std::span<const Tensor> in, std::span<TensorMeta> out) const {
  const Tensor& x = in[0];
  const int r = x.rank();
  TF_CHECK_ARG(begin.size() == static_cast<size_t>(r) && size.size() == static_cast<size_t>(r),
               name(), "begin {} and size {} need one entry per dimension of shape {}",
               detail::vec_to_string(begin), detail::vec_to_string(size), x.shape().to_string());
  std::vector<int64_t> os(size);
  for (int i = 0; i < r; ++i) {
    const int64_t d = x.shape()[i];
    // A symbolic tensor's unknown dimension (-1) is checked when the graph runs.
    // (size -1 - t: the rest of the dimension but its last t.)
    const int64_t trim = size[i] < 0 ? -1 - size[i] : 0;
    TF_CHECK_ARG(begin[i] >= 0 && (d < 0 || (begin[i] + trim <= d && size[i] <= d - begin[i])),
                 name(), "begin {} and size {} are out of bounds for shape {}",
                 detail::vec_to_string(begin), detail::vec_to_string(size), x.shape().to_string());
    if (size[i] < 0) os[static_cast<size_t>(i)] = d < 0 ? -1 : d - begin[i] - trim;
  }
  out[0] = {TensorShape(std::move(os)), x.dtype()};
}
std::string Slice::attributes() const {
  return fmt::format("begin={}, size={}", detail::vec_to_string(begin),
                     detail::vec_to_string(size));
}

void Concat::infer(std::span<const Tensor> in, std::span<TensorMeta> out) const {
  TF_CHECK_ARG(!in.empty(), name(), "needs at least one tensor");
  const TensorShape& s0 = in[0].shape();
  const int r = s0.rank();
  TF_CHECK_ARG(axis >= 0 && axis < r, name(),
               "axis {} is out of range for a tensor of rank {} (shape {})", axis, r,
               s0.to_string());
  TensorShape s = s0;
  for (size_t i = 1; i < in.size(); ++i) {
    const TensorShape& si = in[i].shape();
    TF_CHECK_ARG(in[i].dtype() == in[0].dtype(), name(),
                 "dtypes differ: values[0] is {}, values[{}] is {}", dtype_name(in[0].dtype()), i,
                 dtype_name(in[i].dtype()));
    TF_CHECK_ARG(si.rank() == r, name(), "ranks differ: values[0] has shape {}, values[{}] has {}",
                 s0.to_string(), i, si.to_string());
    for (int d = 0; d < r; ++d)
      TF_CHECK_ARG(d == axis || si[d] == s0[d], name(),
                   "shapes {} (values[0]) and {} (values[{}]) differ in dimension {}; only "
                   "dimension {} (the axis) may differ",
                   s0.to_string(), si.to_string(), i, d, axis);
    if (s[axis] == None || si[axis] == None) {
      s[axis] = None;  // a graph for None dimensions
    } else {
      int64_t sum;
      TF_CHECK_ARG(!__builtin_add_overflow(s[axis], si[axis], &sum), name(),
                   "the sizes along axis {} add up to more than an int64 (values[{}] has shape {})",
                   axis, i, si.to_string());
      s[axis] = sum;
    }
  }
  detail::check_element_count(name(), s);
  out[0] = {s, in[0].dtype()};
}

void Pad::infer(std::span<const Tensor> in, std::span<TensorMeta> out) const {
  const Tensor& x = in[0];
  const int r = x.rank();
  TF_CHECK_ARG(paddings.size() == static_cast<size_t>(r), name(),
               "paddings {} has {} pairs, but the tensor of shape {} has rank {}",
               pairs_to_string(paddings), paddings.size(), x.shape().to_string(), r);
  TensorShape s;
  for (int i = 0; i < r; ++i) {
    TF_CHECK_ARG(paddings[i].first >= 0 && paddings[i].second >= 0, name(),
                 "paddings {} has a negative entry (tensor of shape {})", pairs_to_string(paddings),
                 x.shape().to_string());
    int64_t d;
    TF_CHECK_ARG(!__builtin_add_overflow(x.shape()[i], paddings[i].first, &d) &&
                     !__builtin_add_overflow(d, paddings[i].second, &d),
                 name(), "paddings {} make dimension {} of shape {} larger than an int64",
                 pairs_to_string(paddings), i, x.shape().to_string());
    s.push_back(d);
  }
  detail::check_element_count(name(), s);
  out[0] = {s, x.dtype()};
}
std::string Pad::attributes() const {
  return fmt::format("paddings={}, constant_value={}", pairs_to_string(paddings), constant_value);
}

void Gather::infer(std::span<const Tensor> in, std::span<TensorMeta> out) const {
  const Tensor& p = in[0];
  const Tensor& idx = in[1];
  TF_CHECK_ARG(idx.dtype() == int32 || idx.dtype() == int64, name(),
               "indices must be int32 or int64, got {}", dtype_name(idx.dtype()));
  TF_CHECK_ARG(axis >= 0 && axis < p.rank(), name(),
               "axis {} is out of range for params of shape {}", axis, p.shape().to_string());
  TF_CHECK_ARG(p.rank() - 1 + idx.rank() <= TensorShape::kMaxRank, name(),
               "params of shape {} and indices of shape {} give a result of rank {} (maximum {})",
               p.shape().to_string(), idx.shape().to_string(), p.rank() - 1 + idx.rank(),
               TensorShape::kMaxRank);
  TensorShape s;
  for (int i = 0; i < axis; ++i) s.push_back(p.shape()[i]);
  for (int i = 0; i < idx.rank(); ++i) s.push_back(idx.shape()[i]);
  for (int i = axis + 1; i < p.rank(); ++i) s.push_back(p.shape()[i]);
  out[0] = {s, p.dtype()};
}

}  // namespace prims

}  // namespace tapeflow

// ---- gradients ----
namespace tapeflow::prims {

namespace {
using Span = std::span<const Tensor>;
}

uint32_t Reshape::vjp_saves() const { return 0; }
std::vector<Tensor> Reshape::vjp(Span p, Span cts, std::span<const int>, Span) const {
  return {detail::reshape_like(cts[0], p[0])};
}

uint32_t Transpose::vjp_saves() const { return 0; }
std::vector<Tensor> Transpose::vjp(Span, Span cts, std::span<const int>, Span) const {
  std::vector<int> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inverse[perm[i]] = static_cast<int>(i);
  return {transpose(cts[0], inverse)};
}

uint32_t BroadcastTo::vjp_saves() const { return 0; }
std::vector<Tensor> BroadcastTo::vjp(Span p, Span cts, std::span<const int>, Span) const {
  return {detail::sum_to_shape(cts[0], p[0].shape())};
}

// The cotangent goes back into its window; zeros elsewhere.
uint32_t Slice::vjp_saves() const { return 0; }
std::vector<Tensor> Slice::vjp(Span p, Span cts, std::span<const int>, Span) const {
  std::vector<std::pair<int64_t, int64_t>> paddings;
  for (int d = 0; d < p[0].rank(); ++d)
    paddings.emplace_back(begin[d],
                          size[d] < 0 ? -1 - size[d] : p[0].shape()[d] - begin[d] - size[d]);
  return {pad(cts[0], paddings)};
}

uint32_t Concat::vjp_saves() const { return 0; }
std::vector<Tensor> Concat::vjp(Span p, Span cts, std::span<const int> argnums, Span) const {
  if (detail::open_shapes() && p.size() > 1) {
    // A shape-generic trace: the inputs' lengths along axis (a None batch concatenated) are
    // read when the graph runs. (Every input is kept in such a trace.)
    std::vector<Tensor> in{cts[0]};
    in.insert(in.end(), p.begin(), p.end());
    const std::vector<Tensor> pieces =
        detail::dispatch_multi(SplitLike(axis, static_cast<int>(p.size())), in);
    std::vector<Tensor> out;
    for (int k : argnums) out.push_back(pieces[static_cast<size_t>(k)]);
    return out;
  }
  std::vector<int64_t> offsets(p.size() + 1, 0);
  for (size_t i = 0; i < p.size(); ++i) offsets[i + 1] = offsets[i] + p[i].shape()[axis];
  std::vector<Tensor> out;
  for (int k : argnums) {
    // -1 (the whole dimension) off the axis: a None batch stays open in a traced gradient.
    std::vector<int64_t> b(p[k].rank(), 0), s(static_cast<size_t>(p[k].rank()), -1);
    b[axis] = offsets[k];
    s[axis] = p[k].shape()[axis];
    out.push_back(slice(cts[0], b, s));
  }
  return out;
}

uint32_t Pad::vjp_saves() const { return 0; }
std::vector<Tensor> Pad::vjp(Span p, Span cts, std::span<const int>, Span) const {
  if (detail::open_shapes()) {
    // A trace for None dimensions: the input's window, shaped as the input when the graph runs
    // (something padded after a None axis). (Every input is kept in such a trace.)
    std::vector<int64_t> begin;
    for (const auto& pd : paddings) begin.push_back(pd.first);
    return {detail::dispatch(SliceLike(std::move(begin)), {cts[0], p[0]})};
  }
  // The input's window; -1 (the rest) where nothing was padded after, so that a None batch
  // (never padded) stays open in a traced gradient.
  std::vector<int64_t> b, s = p[0].shape().dims();
  for (size_t d = 0; d < paddings.size(); ++d) {
    b.push_back(paddings[d].first);
    if (paddings[d].second == 0) s[d] = -1;
  }
  return {slice(cts[0], b, s)};
}

// Rows gathered several times sum their cotangents: a segment sum over the gather axis.
uint32_t Gather::vjp_saves() const { return save_input(1); }
std::vector<Tensor> Gather::vjp(Span p, Span cts, std::span<const int> argnums, Span) const {
  std::vector<Tensor> out;
  for (int k : argnums) {
    if (k != 0) {
      out.emplace_back();
      continue;
    }
    const TensorShape& ps = p[0].shape();
    const Tensor& idx = p[1];
    const int ir = idx.rank(), pr = ps.rank();
    // g: ps[:axis] + idx.shape + ps[axis+1:]; bring the index dimensions to the front.
    std::vector<int> perm;
    for (int d = 0; d < ir; ++d) perm.push_back(axis + d);
    for (int d = 0; d < axis; ++d) perm.push_back(d);
    for (int d = axis + ir; d < cts[0].rank(); ++d) perm.push_back(d);
    // axis 0 (an embedding lookup's case) needs no transpose: skip the copy.
    Tensor g = axis == 0 ? cts[0] : transpose(cts[0], perm);
    std::vector<int> back;
    for (int d = 1; d <= axis; ++d) back.push_back(d);
    back.push_back(0);
    for (int d = axis + 1; d < pr; ++d) back.push_back(d);
    if (detail::open_shapes()) {
      // A shape-generic trace: the sizes come from g and from params (the number of segments,
      // the gathered axis's length) when the graph runs, so any number of None dimensions
      // (indices or params, the gathered axis included) is served by one graph.
      const Tensor summed = detail::dispatch(
          UnsortedSegmentSum::like(axis),
          {detail::merge_axes(g, {ir, pr - 1}), detail::merge_axes(idx, {ir}), p[0]});
      std::vector<std::pair<int, int>> parts{{0, 0}};
      for (int d = 0; d + 1 < pr; ++d) parts.push_back({1, ir + d});
      const Tensor shaped = detail::reshape_from(summed, {summed, g}, parts);
      out.push_back(axis == 0 ? shaped : transpose(shaped, back));
      continue;
    }
    int64_t rest = 1;
    TensorShape seg_shape{ps[axis]};
    for (int d = 0; d < pr; ++d)
      if (d != axis) {
        rest *= ps[d];
        seg_shape.push_back(ps[d]);
      }
    // Sizes that a graph traced for a None dimension must not bake in are left -1. Along axis 0
    // (an embedding lookup) that is the number of indices (a None batch of ids). Along another
    // axis the indices are usually fixed and params' leading dimension is the None batch (a
    // gather over the features of activations): the count stays, ps[0] is left to the reshapes.
    const int64_t count = idx.num_elements();
    const bool open_lead = axis > 0 && ps.is_fully_defined() && count > 0 && rest > 0;
    const int64_t n = open_lead ? count : ps.is_fully_defined() && rest > 0 ? -1 : count;
    if (open_lead) seg_shape[1] = -1;
    // The indices were checked by the forward gather: call the kernel without the host check.
    Tensor summed = detail::dispatch(
        UnsortedSegmentSum(ps[axis]),
        {reshape(g, TensorShape{n, open_lead ? -1 : rest}), reshape(idx, TensorShape{n})});
    summed = reshape(summed, seg_shape);  // (ps[axis], ps[:axis], ps[axis+1:])
    out.push_back(axis == 0 ? summed : transpose(summed, back));
  }
  return out;
}

}  // namespace tapeflow::prims
