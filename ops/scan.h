// Running sums, products and log-sum-exps along an axis (TF's tf.math.cumsum, tf.math.cumprod,
// tf.math.cumulative_logsumexp) and tf.reverse. Primitives: Cumsum, Cumprod,
// CumulativeLogsumexp (one axis, exclusive / reverse flags). reverse is a
// composite (one gather per reversed axis). Everything here is stateless and thread-safe.
#pragma once

#include <initializer_list>
#include <vector>

#include "ops/primitive.h"

namespace tapeflow {

// x[..., 0] + ... + x[..., i] along axis, as TF's tf.math.cumsum: exclusive leaves the element
// itself out (the first result is 0), reverse runs from the end. Numeric dtypes (integers wrap
// around on overflow, as TF); axis in [-rank, rank), so a scalar is rejected as in TF. float16
// and bfloat16 accumulate in float32 and round each result once (TF rounds each partial sum to
// the half type). The gradient is the cumsum of the cotangent the other way round.
Tensor cumsum(const Tensor& x, int axis = 0, bool exclusive = false, bool reverse = false);
// The running product, as TF's tf.math.cumprod (exclusive: the first result is 1). Gradient as
// TF's: cumsum(cumprod(x) * g) the other way round, divided by x, 0 where x is 0 (TF's
// div_no_nan, so the gradient with respect to a zero element is 0, not its true value).
Tensor cumprod(const Tensor& x, int axis = 0, bool exclusive = false, bool reverse = false);

// log(exp(x[..., 0]) + ... + exp(x[..., i])) along axis, as TF's tf.math.cumulative_logsumexp
// (exclusive: the first result is -inf; reverse: from the end). Floating dtypes; each step
// combines the running value r and the next element v as max + log1p(exp(min - max)) (-inf
// while both are -inf), so values far below the running maximum neither underflow nor lose the
// earlier terms (cumulative_logsumexp([-200, 0]) is [-200, 0]). The gradient is TF's: the
// cotangent's positive and negative parts run through cumulative_logsumexp the other way round in
// log space.
Tensor cumulative_logsumexp(const Tensor& x, int axis = 0, bool exclusive = false,
                            bool reverse = false);

// x with the order of the elements along each of `axes` reversed, as TF's tf.reverse: any dtype;
// axes in [-rank, rank), each at most once ({}: x unchanged). A composite of gathers.
Tensor reverse(const Tensor& x, const std::vector<int>& axes);
inline Tensor reverse(const Tensor& x, std::initializer_list<int> axes) {
  return reverse(x, std::vector<int>(axes));
}

namespace math {
using tapeflow::cumprod;
using tapeflow::cumsum;
using tapeflow::cumulative_logsumexp;
}  // namespace math

namespace prims {

// axis normalised to [0, rank); the output has the input's shape and dtype (numeric).
#define TF_SCAN_PRIMITIVE(STRUCT, OPNAME)                                             \
  struct STRUCT final : PrimitiveBase<STRUCT> {                                       \
    int axis = 0;                                                                     \
    bool exclusive = false;                                                           \
    bool reverse = false;                                                             \
    STRUCT(int a, bool e, bool r) : axis(a), exclusive(e), reverse(r) {}              \
    const char* name() const override { return OPNAME; }                              \
    void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override; \
    TF_DECLARE_KERNELS                                                                \
    TF_DECLARE_VJP                                                                    \
    std::string attributes() const override;                                          \
  };
TF_SCAN_PRIMITIVE(Cumsum, "cumsum")
TF_SCAN_PRIMITIVE(Cumprod, "cumprod")
TF_SCAN_PRIMITIVE(CumulativeLogsumexp, "cumulative_logsumexp")  // floating dtypes only
#undef TF_SCAN_PRIMITIVE

}  // namespace prims

}  // namespace tapeflow
