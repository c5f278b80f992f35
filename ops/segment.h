// Segment reductions, as TF's tf.math.unsorted_segment_{max,min,prod,mean,sqrt_n} and the
// sorted tf.math.segment_{sum,mean,max,min,prod}. tapeflow::unsorted_segment_sum (ops/scatter.h)
// is the sum of the unsorted family (floating data); tf::math::unsorted_segment_sum adds int32 and
// int64 data.
//
// Unsorted (segment_ids of any shape that prefixes data's shape, int32 or int64; output
// (num_segments, data.shape[ids.rank:]...)): a negative id drops its element (no gradient); an
// id >= num_segments is an InvalidArgumentError (the CPU kernel, eager or traced; eager ids on a
// GPU are checked on the host; traced, the CUDA kernel drops them as TF's GPU kernel). An empty
// segment holds 0 (sum, mean, sqrt_n), 1 (prod), the dtype's lowest value (max) or its highest
// (min): TF's identities, e.g. -3.4028235e38 for float32 max, -65504 for float16.
//
// Sorted (1-D segment_ids of data's first dimension, non-decreasing, >= 0): the output has
// segment_ids[-1] + 1 rows (0 for no rows), a value-dependent shape: the ids are read on the
// host, so these run eagerly only; inside tf::function they raise an InvalidArgumentError
// naming the op (use the unsorted variant with a known num_segments there). Empty segments
// hold 0 for every reduction but prod (1), as TF's SegmentMax/Min (unlike the unsorted ones).
//
// Dtypes: max, min, prod, segment_sum: float16, bfloat16, float32, float64, int32, int64 (TF's
// CPU registrations); mean, sqrt_n, segment_mean: floating only (TF's integer mean truncates,
// not supported here). Gradients (floating data) as TF's math_grad.py: max/min share a
// segment's cotangent equally among the elements equal to its result (ties); prod's gradient is
// prod / x where no zero is in the segment, the product of the other elements at a segment's
// single zero, and 0 everywhere in a segment with two or more zeros.
#pragma once

#include "ops/primitive.h"
#include "ops/scatter.h"

namespace tapeflow {

namespace math {
// tapeflow::unsorted_segment_sum for floating data, and int32/int64 data as TF (integers wrap).
Tensor unsorted_segment_sum(const Tensor& data, const Tensor& segment_ids, int64_t num_segments);
Tensor unsorted_segment_max(const Tensor& data, const Tensor& segment_ids, int64_t num_segments);
Tensor unsorted_segment_min(const Tensor& data, const Tensor& segment_ids, int64_t num_segments);
Tensor unsorted_segment_prod(const Tensor& data, const Tensor& segment_ids, int64_t num_segments);
// sum / count and sum / sqrt(count) per segment (count clipped to >= 1: empty segments are 0).
Tensor unsorted_segment_mean(const Tensor& data, const Tensor& segment_ids, int64_t num_segments);
Tensor unsorted_segment_sqrt_n(const Tensor& data, const Tensor& segment_ids, int64_t num_segments);

Tensor segment_sum(const Tensor& data, const Tensor& segment_ids);
Tensor segment_mean(const Tensor& data, const Tensor& segment_ids);
Tensor segment_max(const Tensor& data, const Tensor& segment_ids);
Tensor segment_min(const Tensor& data, const Tensor& segment_ids);
Tensor segment_prod(const Tensor& data, const Tensor& segment_ids);
}  // namespace math

namespace prims {

enum class SegmentReducer : uint8_t { Sum, Max, Min, Prod };

// Inputs: data (N, D) (floating, int32, int64), ids (N) int32/int64. Output (num_segments, D),
// each segment's reduction of its rows (the reducer's identity where it has none). Negative ids
// drop their row; ids >= num_segments: the CPU kernel raises, the CUDA kernel drops the row.
// Sum is used only for integer data (floating sums go to UnsortedSegmentSum).
struct UnsortedSegmentReduce final : PrimitiveBase<UnsortedSegmentReduce> {
  SegmentReducer reducer;
  int64_t num_segments = 0;
  UnsortedSegmentReduce(SegmentReducer r, int64_t n) : reducer(r), num_segments(n) {}
  const char* name() const override;
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override;
  TF_DECLARE_KERNELS
  TF_DECLARE_VJP
  std::string attributes() const override { return "num_segments=" + std::to_string(num_segments); }
};

}  // namespace prims
}  // namespace tapeflow
