// Shared checks and shape arithmetic for op frontends and kernels: broadcasting, axes, dtype
// rules. Written once here; every op family uses them.
#pragma once

#include <array>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/tensor.h"

namespace tapeflow::detail {

// numpy broadcasting of two shapes; "[op] shapes (2, 3) and (4,) cannot be broadcast".
TensorShape broadcast_shapes(const char* op, const TensorShape& a, const TensorShape& b);

// axis in [-rank, rank) -> [0, rank); "[op] axis 3 is out of range for a tensor of rank 2".
int normalize_axis(const char* op, int64_t axis, const TensorShape& shape);
// Normalised, sorted, checked for duplicates.
std::vector<int> normalize_axes(const char* op, std::span<const int> axes,
                                const TensorShape& shape);

// Applies TF's dtype rule to a binary op's operands: a weak C++ scalar takes the other operand's
// dtype; two strong tensors of different dtypes are an InvalidArgumentError.
std::pair<Tensor, Tensor> unify_dtypes(const char* op, const Tensor& a, const Tensor& b);
// Same for three operands (where, clip_by_value); `first` is the index of the first operand that
// takes part in the rule.
void unify_dtypes(const char* op, std::span<Tensor> operands);
// x converted to `dtype` when x is a weak scalar (for ops that fix the dtype, e.g. pow's
// exponent); an InvalidArgumentError naming op when the value does not survive (2.5 or 300 to
// uint8, NaN to int32).
Tensor adopt_dtype(const Tensor& x, DType dtype, const char* op);
// An InvalidArgumentError naming op and `what` (e.g. "constant_value") when v is not exactly
// representable in an integer or bool dtype (a fraction, NaN, out of range); floating dtypes
// take any value.
void check_value_fits(const char* op, const char* what, double v, DType dtype);
// The same for an integer value (exact beyond 2^53).
void check_integer_fits(const char* op, const char* what, int64_t v, DType dtype);

void check_dtype_floating(const char* op, const Tensor& x);
// Two operands of one floating dtype (the convolutions' and their gradients' inputs); the
// message names both with their dtypes and shapes.
void check_float_pair(const char* op, const char* a_name, const Tensor& a, const char* b_name,
                      const Tensor& b);
void check_dtype_not_bool(const char* op, const Tensor& x);
void check_dtype_bool(const char* op, const Tensor& x);
void check_rank_at_least(const char* op, const Tensor& x, int rank);
// An output shape built dimension by dimension must have an element count an int64 can hold
// (its non-zero dimensions multiplied, as TensorShape checks).
void check_element_count(const char* op, const TensorShape& s);

// Row-major strides in elements.
std::array<int64_t, TensorShape::kMaxRank> contiguous_strides(const TensorShape& s);
// Strides of `in` read as if broadcast to `out` (0 along broadcast dimensions); `in` is aligned
// to the right of `out`.
std::array<int64_t, TensorShape::kMaxRank> broadcast_strides(const TensorShape& in,
                                                             const TensorShape& out);

// InvalidArgumentError naming op unless t is a defined int32 or int64 tensor (`what` names it).
void check_int_tensor(const char* op, const Tensor& t, const std::string& what);
// An integer tensor's values on the host, for a result whose shape depends on them: a traced
// (symbolic) tensor has none, an InvalidArgumentError that says so.
std::vector<int64_t> host_ints(const char* op, const Tensor& t, const std::string& what);
// The coordinates of row-major position `flat` in a tensor of shape s.
std::vector<int64_t> unravel_flat(const TensorShape& s, int64_t flat);

// "[2, 3]"-style text for vectors in messages.
std::string vec_to_string(std::span<const int64_t> v);
std::string vec_to_string(std::span<const int> v);

}  // namespace tapeflow::detail
