// Sorting and counting: TF's tf.sort, tf.argsort, tf.math.top_k (tf.nn.top_k),
// tf.math.in_top_k, tf.searchsorted, tf.unique, tf.unique_with_counts, tf.math.bincount,
// tf.histogram_fixed_width and tf.math.confusion_matrix.
//
// Two primitives: SearchSorted (a binary search per value) and TopK, which sorts (or selects
// the first k of) every row of the last axis; sort and argsort are TopK with k = the axis'
// length after moving the axis last, as TF's are. The order
// is total: NaN ranks above +inf (first in a descending order, last in an ascending one), -0 and
// +0 are equal, and equal values keep their input order (lower index first) in both directions.
// TF 2.21 leaves the order of NaNs to its sort's internals (see docs/ops.md). The others are
// composites of existing ops; unique, unique_with_counts, bincount without a fixed length and
// confusion_matrix without num_classes have a shape that depends on values, and are eager only.
#pragma once

#include <string>
#include <tuple>
#include <utility>

#include "ops/primitive.h"

namespace tapeflow {

// The input sorted along axis; direction "ASCENDING" or "DESCENDING" (TF's spelling). Every
// dtype but bool. Differentiable for floating dtypes (the cotangent goes back to the positions
// the values came from).
Tensor sort(const Tensor& values, int axis = -1, const std::string& direction = "ASCENDING");
// The int32 positions that sort values along axis. Always stable (TF's stable=false also gives
// the stable order: TF has no unstable sort).
Tensor argsort(const Tensor& values, int axis = -1, const std::string& direction = "ASCENDING",
               bool stable = false);

// For each of values' last axis, its insertion point in the matching row of sorted_sequence:
// the first position whose element is not less than it ("left") or greater than it ("right"),
// by binary search, as TF's tf.searchsorted. The leading dimensions of both must match; out_type
// int32 or int64.
Tensor searchsorted(const Tensor& sorted_sequence, const Tensor& values,
                    const std::string& side = "left", DType out_type = int32);

// The distinct elements of a 1-D x in order of first occurrence, and for each element of x the
// position of its value in them (out_idx int32 or int64). Eager only. NaNs are all distinct.
std::pair<Tensor, Tensor> unique(const Tensor& x, DType out_idx = int32);
// unique plus, for every distinct value, how many times it occurs (out_idx's dtype).
std::tuple<Tensor, Tensor, Tensor> unique_with_counts(const Tensor& x, DType out_idx = int32);

// Counts of values in nbins equal bins over [value_range[0], value_range[1]]; values below the
// range go to the first bin and values above it to the last, as TF. dtype int32 or int64.
Tensor histogram_fixed_width(const Tensor& values, const Tensor& value_range, int64_t nbins = 100,
                             DType dtype = int32);

namespace math {

// The k largest entries of every row of input's last axis and their int32 positions; equal
// values keep the lower index first. sorted=false also returns them sorted (TF leaves that
// order unspecified).
std::pair<Tensor, Tensor> top_k(const Tensor& input, int64_t k = 1, bool sorted = true);

// Whether each row's target class is among the k largest predictions, TF 2's argument order
// (targets first). A class tied with the target's prediction does not push it out; a row
// with a non-finite prediction or a target outside [0, classes) is false, as TF's kernel.
Tensor in_top_k(const Tensor& targets, const Tensor& predictions, int64_t k);

// How often each value of the non-negative int32/int64 arr occurs (or the sum of its weights).
// The length is max(arr) + 1, at least minlength and at most maxlength (-1: no bound); values
// at or above it are dropped. dtype: int32 default, or the weights' dtype (float32/float64)
// when weights are given. A length fixed by minlength == maxlength also works traced.
Tensor bincount(const Tensor& arr, const Tensor& weights = Tensor(), int64_t minlength = -1,
                int64_t maxlength = -1, DType dtype = int32);

// cm[labels[i], predictions[i]] += weights[i] (1 without weights) for 1-D int labels and
// predictions; num_classes -1: max(labels, predictions) + 1 (eager only). dtype int32 default.
Tensor confusion_matrix(const Tensor& labels, const Tensor& predictions, int64_t num_classes = -1,
                        const Tensor& weights = Tensor(), DType dtype = int32);

}  // namespace math

namespace nn {
using math::in_top_k;
using math::top_k;
}  // namespace nn

namespace prims {

// Inputs: x (R, N) of any dtype but bool. Outputs: values (R, k) and their int32 positions
// (R, k), the first k of each row in descending (or ascending) order under the total order of
// the header comment.
struct TopK final : PrimitiveBase<TopK> {
  int64_t k = 1;
  bool ascending = false;
  TopK(int64_t k_, bool asc) : k(k_), ascending(asc) {}
  const char* name() const override { return ascending ? "sort" : "top_k"; }
  int num_outputs() const override { return 2; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override;
  TF_DECLARE_KERNELS
  TF_DECLARE_VJP
  bool vjp_accepts_undefined_cotangents() const override { return true; }
  std::string attributes() const override {
    return "k=" + std::to_string(k) + ", ascending=" + (ascending ? "true" : "false");
  }
};

// Inputs: sorted_sequence (R, N) and values (R, M) of one dtype (not bool). Output (R, M) of
// out_type (int32 or int64): each value's insertion point in its row by binary search, TF's
// LowerBound (right = false: the first position whose element is not less than the value) or
// UpperBound (right = true: the first whose element is greater than the value).
struct SearchSorted final : PrimitiveBase<SearchSorted> {
  bool right = false;
  DType out_type = int32;
  SearchSorted(bool r, DType t) : right(r), out_type(t) {}
  const char* name() const override { return "searchsorted"; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override;
  TF_DECLARE_KERNELS
  std::string attributes() const override {
    return std::string("side=") + (right ? "right" : "left") +
           ", out_type=" + std::string(dtype_name(out_type));
  }
};

}  // namespace prims
}  // namespace tapeflow
