// Shape and data-movement ops. reshape is a view (no copy); the rest copy.
// Primitives: Reshape (a host view: no kernel work), Transpose, BroadcastTo, Slice, Concat, Pad,
// Gather, and split (its pieces run Slice's kernels; one vjp concatenates their cotangents).
// expand_dims and squeeze are reshapes; stack, tile and one_hot are composites.
// Everything here is stateless and thread-safe.
#pragma once

#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "ops/primitive.h"

namespace tapeflow {

// One dimension may be -1 and is inferred.
Tensor reshape(const Tensor& x, const TensorShape& shape);
// perm defaults to reversing the dimensions.
Tensor transpose(const Tensor& x, const std::vector<int>& perm = {});
Tensor expand_dims(const Tensor& x, int axis);
// Removes the given size-1 axes, or all size-1 axes when none are given. squeeze(x, 1) removes
// axis 1; a braced list, {} included, takes the initializer_list overload, so squeeze(x, {})
// removes every size-1 axis (TF's axis=None) instead of meaning axis 0.
Tensor squeeze(const Tensor& x, const std::vector<int>& axes = {});
inline Tensor squeeze(const Tensor& x, int axis) {
  return squeeze(x, std::vector<int>{axis});
}
inline Tensor squeeze(const Tensor& x, std::initializer_list<int> axes) {
  return squeeze(x, std::vector<int>(axes));
}
Tensor concat(const std::vector<Tensor>& values, int axis);
Tensor stack(const std::vector<Tensor>& values, int axis = 0);
// num_splits equal parts along axis.
std::vector<Tensor> split(const Tensor& x, int num_splits, int axis = 0);
// Parts of the given sizes along axis (one size may be -1).
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& size_splits, int axis = 0);
// size[i] == -1 takes everything from begin[i] to the end.
Tensor slice(const Tensor& x, const std::vector<int64_t>& begin, const std::vector<int64_t>& size);
// params[..., indices, ...] along axis; indices are int32 or int64, checked against the bounds.
Tensor gather(const Tensor& params, const Tensor& indices, int axis = 0);
// float32 one-hot vectors along a new last axis (TF's default axis = -1).
Tensor one_hot(const Tensor& indices, int64_t depth, float on_value = 1.0f, float off_value = 0.0f);
Tensor broadcast_to(const Tensor& x, const TensorShape& shape);
Tensor tile(const Tensor& x, const std::vector<int64_t>& multiples);
// paddings[i] = {before, after} for dimension i; new elements are constant_value.
Tensor pad(const Tensor& x, const std::vector<std::pair<int64_t, int64_t>>& paddings,
           double constant_value = 0.0);

namespace prims {

// The output shares the input's storage with another (fully known) shape of the same size.
struct Reshape final : PrimitiveBase<Reshape> {
  TensorShape shape;
  explicit Reshape(const TensorShape& s) : shape(s) {}
  const char* name() const override { return "reshape"; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override;
  void eval_cpu(std::span<const Tensor> inputs, std::span<Tensor> outputs) const override;
  void eval_cuda(std::span<const Tensor> inputs, std::span<Tensor> outputs) const override;
  bool is_view() const override { return true; }
  std::string attributes() const override { return "shape=" + shape.to_string(); }
  TF_DECLARE_VJP
};

// perm: a permutation of [0, rank); output dimension i is input dimension perm[i].
struct Transpose final : PrimitiveBase<Transpose> {
  std::vector<int> perm;
  explicit Transpose(std::vector<int> p) : perm(std::move(p)) {}
  const char* name() const override { return "transpose"; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override;
  TF_DECLARE_KERNELS
  TF_DECLARE_VJP
  std::string attributes() const override;
};

// numpy broadcasting of the input (aligned to the right) to `shape`.
struct BroadcastTo final : PrimitiveBase<BroadcastTo> {
  TensorShape shape;
  explicit BroadcastTo(const TensorShape& s) : shape(s) {}
  const char* name() const override { return "broadcast_to"; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override;
  TF_DECLARE_KERNELS
  TF_DECLARE_VJP
  std::string attributes() const override { return "shape=" + shape.to_string(); }
};

// 0 <= begin[i] <= begin[i] + size[i] <= dim; size[i] = -1 takes the rest of dimension i
// (dim - begin[i]), so that a graph traced for a None dimension does not bake its size in, and
// size[i] = -1 - t the rest but the last t (x[b:-t]; detail::crop; tf::slice allows -1 only).
struct Slice final : PrimitiveBase<Slice> {
  std::vector<int64_t> begin, size;
  Slice(std::vector<int64_t> b, std::vector<int64_t> s) : begin(std::move(b)), size(std::move(s)) {}
  const char* name() const override { return "slice"; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override;
  TF_DECLARE_KERNELS
  TF_DECLARE_VJP
  std::string attributes() const override;
};

// Inputs of one dtype and rank, equal in every dimension but axis (normalised).
struct Concat final : PrimitiveBase<Concat> {
  int axis = 0;
  explicit Concat(int a) : axis(a) {}
  const char* name() const override { return "concat"; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override;
  TF_DECLARE_KERNELS
  TF_DECLARE_VJP
  std::string attributes() const override { return "axis=" + std::to_string(axis); }
};

// paddings[i] = {before, after} (non-negative) per dimension; new elements are constant_value
// converted to the input's dtype.
struct Pad final : PrimitiveBase<Pad> {
  std::vector<std::pair<int64_t, int64_t>> paddings;
  double constant_value = 0.0;
  Pad(std::vector<std::pair<int64_t, int64_t>> p, double c)
      : paddings(std::move(p)), constant_value(c) {}
  const char* name() const override { return "pad"; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override;
  TF_DECLARE_KERNELS
  TF_DECLARE_VJP
  std::string attributes() const override;
};

// Inputs: params, indices (int32 or int64); axis normalised. The kernel checks every index
// against params' dimension before copying (InvalidArgumentError "indices[1] = 5 is not in
// [0, 3)").
struct Gather final : PrimitiveBase<Gather> {
  int axis = 0;
  explicit Gather(int a) : axis(a) {}
  const char* name() const override { return "gather"; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override;
  TF_DECLARE_KERNELS
  TF_DECLARE_VJP
  std::string attributes() const override { return "axis=" + std::to_string(axis); }
};

}  // namespace prims

}  // namespace tapeflow
