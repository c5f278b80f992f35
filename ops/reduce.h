// Reductions over axes (negative axes count from the end; no axes reduces everything) and
// argmax/argmin. Results keep the input dtype, as TF's (no upcast of ints).
// Primitives: ReduceSum, ReduceProd, ReduceMax, ReduceMin (normalised sorted axes + keepdims)
// and ArgMax, ArgMin (one axis). reduce_mean, reduce_any and reduce_all are composites.
// Everything here is stateless and thread-safe.
#pragma once

#include <initializer_list>
#include <vector>

#include "ops/primitive.h"

namespace tapeflow {

// A braced list of axes, {} (no axis: TF's axis=[], the input unchanged) included, takes the
// initializer_list overload: without it, {} would value-initialise the int overload's axis
// and reduce axis 0.
#define TF_DECLARE_REDUCTION(NAME)                                                     \
  Tensor NAME(const Tensor& x);                                                        \
  Tensor NAME(const Tensor& x, int axis, bool keepdims = false);                       \
  Tensor NAME(const Tensor& x, const std::vector<int>& axes, bool keepdims = false);   \
  inline Tensor NAME(const Tensor& x, std::initializer_list<int> axes, bool keepdims = false) { \
    return NAME(x, std::vector<int>(axes), keepdims);                                  \
  }

TF_DECLARE_REDUCTION(reduce_sum)
TF_DECLARE_REDUCTION(reduce_mean)
TF_DECLARE_REDUCTION(reduce_max)
TF_DECLARE_REDUCTION(reduce_min)
TF_DECLARE_REDUCTION(reduce_prod)
TF_DECLARE_REDUCTION(reduce_any)  // bool input
TF_DECLARE_REDUCTION(reduce_all)  // bool input
#undef TF_DECLARE_REDUCTION

// Index (int64) of the largest / smallest element along axis; the first one on ties.
// NaN counts as larger than every number: argmax returns the first NaN, argmin skips NaNs
// (unless every element is NaN, then it returns 0).
Tensor argmax(const Tensor& x, int axis = 0);
Tensor argmin(const Tensor& x, int axis = 0);

namespace detail {
// A run of adjacent input dimensions that are all reduced or all kept.
struct ReduceGroup {
  int64_t n;
  bool reduced;
};
// The input's dimensions with the size-1 ones dropped and neighbours of the same kind merged
// (what the CPU and CUDA reduction kernels iterate over); axes sorted. Returns the group count.
int merge_reduce_axes(const TensorShape& shape, std::span<const int> axes, ReduceGroup* groups);

// Number of elements that each output element of a reduction over `axes` combines (the product
// of those dimensions; 1 for no axes).
int64_t reduced_count(const TensorShape& shape, std::span<const int> axes);

// Sums g over the dimensions that numpy broadcasting added or stretched to reach g's shape from
// `shape` (the gradient of a broadcast), then reshapes it to `shape`.
Tensor sum_to_shape(const Tensor& g, const TensorShape& shape);
}  // namespace detail

namespace prims {

// axes: normalised to [0, rank), sorted, without duplicates (an empty list copies the input).
// Reductions over an empty set give the identity: 0, 1, the lowest / highest value (-inf/+inf).
// ReduceMax/ReduceMin accept bool (they implement reduce_any/reduce_all); Sum/Prod do not.
#define TF_REDUCTION_PRIMITIVE(STRUCT, OPNAME)                                        \
  struct STRUCT final : PrimitiveBase<STRUCT> {                                       \
    std::vector<int> axes;                                                            \
    bool keepdims = false;                                                            \
    STRUCT(std::vector<int> a, bool k) : axes(std::move(a)), keepdims(k) {}           \
    const char* name() const override { return OPNAME; }                              \
    void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override; \
    TF_DECLARE_KERNELS                                                                \
    TF_DECLARE_VJP                                                                    \
    std::string attributes() const override;                                          \
  };
TF_REDUCTION_PRIMITIVE(ReduceSum, "reduce_sum")
TF_REDUCTION_PRIMITIVE(ReduceProd, "reduce_prod")
TF_REDUCTION_PRIMITIVE(ReduceMax, "reduce_max")
TF_REDUCTION_PRIMITIVE(ReduceMin, "reduce_min")
#undef TF_REDUCTION_PRIMITIVE

// axis normalised to [0, rank); int64 output without that axis.
#define TF_ARG_REDUCTION_PRIMITIVE(STRUCT, OPNAME)                                    \
  struct STRUCT final : PrimitiveBase<STRUCT> {                                       \
    int axis = 0;                                                                     \
    explicit STRUCT(int a) : axis(a) {}                                               \
    const char* name() const override { return OPNAME; }                              \
    void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override; \
    TF_DECLARE_KERNELS                                                                \
    std::string attributes() const override;                                          \
  };
TF_ARG_REDUCTION_PRIMITIVE(ArgMax, "argmax")
TF_ARG_REDUCTION_PRIMITIVE(ArgMin, "argmin")
#undef TF_ARG_REDUCTION_PRIMITIVE

}  // namespace prims

}  // namespace tapeflow
