// Segment sums: the gradient of gather. unsorted_segment_sum(data, ids, n) adds row i of data
// into row ids[i] of an (n, ...) zero tensor, as TF's tf.math.unsorted_segment_sum (one id per
// leading row). As in TF, a row with a negative id is dropped (its gradient is zero); an id >= n
// is an InvalidArgumentError, except on a GPU inside a traced function, where the kernel drops
// it as TF's GPU kernel does. ScatterRowsUpdate replaces rows: tensor_scatter_nd_update's kernel.
#pragma once

#include "ops/primitive.h"

namespace tapeflow {

Tensor unsorted_segment_sum(const Tensor& data, const Tensor& segment_ids, int64_t num_segments);

namespace prims {

// Inputs: data (N, D) of a floating dtype, ids (N) int32/int64 (negative: the row is dropped;
// >= num_segments: the CPU kernel raises, the CUDA kernel drops). Output (num_segments, D).
// With like_axis >= 0 a third input's dimension like_axis is num_segments, read when the op
// runs (gather's gradient in a trace for None dimensions: the gathered axis may be one); the
// kernels take the count from their output.
struct UnsortedSegmentSum final : PrimitiveBase<UnsortedSegmentSum> {
  int64_t num_segments = 0;
  int like_axis = -1;
  explicit UnsortedSegmentSum(int64_t n) : num_segments(n) {}
  // num_segments = dimension `axis` of the third input.
  static UnsortedSegmentSum like(int axis) {
    UnsortedSegmentSum p(-1);
    p.like_axis = axis;
    return p;
  }
  const char* name() const override { return "unsorted_segment_sum"; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override;
  TF_DECLARE_KERNELS
  TF_DECLARE_VJP
  std::string attributes() const override {
    return like_axis >= 0 ? "num_segments=dimension " + std::to_string(like_axis) + " of input 2"
                          : "num_segments=" + std::to_string(num_segments);
  }
};

// Inputs: tensor (R, D) of any dtype, positions (N) int64, updates (N, D) of the tensor's
// dtype. Output: the tensor with row positions[i] replaced by updates row i; when positions
// repeat, the last update wins (on every device). A position outside [0, R): the CPU kernel
// raises, the CUDA kernel skips it (inside a traced function; eager callers check first).
struct ScatterRowsUpdate final : PrimitiveBase<ScatterRowsUpdate> {
  const char* name() const override { return "tensor_scatter_nd_update"; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override;
  TF_DECLARE_KERNELS
  TF_DECLARE_VJP
};

}  // namespace prims
}  // namespace tapeflow
