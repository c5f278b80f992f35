#include "ops/linalg.h"

#include <fmt/format.h>

#include <cmath>

#include "core/check.h"
#include "core/error.h"
#include "ops/dispatch.h"
#include "ops/binary.h"
#include "ops/helpers.h"
#include "ops/linalg_decomp.h"
#include "ops/movement.h"
#include "ops/reduce.h"
#include "ops/unary.h"

namespace tapeflow {

namespace {

bool known(int64_t d) { return d != None; }

void check_matmul_dtype(DType d) {
  TF_CHECK_ARG(is_floating(d) || d == int32 || d == int64, "matmul",
               "does not support dtype {} (expected float16, bfloat16, float32, float64, int32 "
               "or int64)",
               dtype_name(d));
}

// Rank >= 2 and square last two dimensions.
void check_square(const char* op, const TensorShape& s) {
  TF_CHECK_ARG(s.rank() >= 2, op, "expects a tensor of rank at least 2, got shape {}",
               s.to_string());
  const int64_t r = s[s.rank() - 2], c = s[s.rank() - 1];
  TF_CHECK_ARG(r == c || !known(r) || !known(c), op, "expects square matrices, got shape {}",
               s.to_string());
}

void check_lu_dtype(const char* op, DType d) {
  TF_CHECK_ARG(is_floating(d), op,
               "expects a floating-point tensor (float16, bfloat16, float32, float64), got {}",
               dtype_name(d));
}

TensorShape batch_of(const TensorShape& s) {
  TensorShape b;
  for (int i = 0; i + 2 < s.rank(); ++i) b.push_back(s[i]);
  return b;
}

}  // namespace

namespace prims {

void MatMul::infer(std::span<const Tensor> in, std::span<TensorMeta> out) const {
  const TensorShape& sa = in[0].shape();
  const TensorShape& sb = in[1].shape();
  TF_CHECK_ARG(sa.rank() >= 2 && sb.rank() >= 2, "matmul",
               "expects tensors of rank at least 2, got shapes {} and {}", sa.to_string(),
               sb.to_string());
  TF_CHECK_ARG(in[0].dtype() == in[1].dtype(), "matmul", "dtypes differ: {} and {}",
               dtype_name(in[0].dtype()), dtype_name(in[1].dtype()));
  check_matmul_dtype(in[0].dtype());
  const int ra = sa.rank(), rb = sb.rank();
  const int64_t m = transpose_a ? sa[ra - 1] : sa[ra - 2];
  const int64_t ka = transpose_a ? sa[ra - 2] : sa[ra - 1];
  const int64_t kb = transpose_b ? sb[rb - 1] : sb[rb - 2];
  const int64_t n = transpose_b ? sb[rb - 2] : sb[rb - 1];
  if (ka != kb && known(ka) && known(kb)) {
    TF_THROW(InvalidArgumentError, "matmul", "inner dimensions differ: a is {}{}, b is {}{}",
             sa.to_string(), transpose_a ? " (transpose_a=true)" : "", sb.to_string(),
             transpose_b ? " (transpose_b=true)" : "");
  }
  // Batch dimensions broadcast as in numpy.
  const TensorShape ba = batch_of(sa), bb = batch_of(sb);
  TensorShape shape;
  const int r = std::max(ba.rank(), bb.rank());
  for (int i = 0; i < r; ++i) {
    const int ia = ba.rank() - r + i, ib = bb.rank() - r + i;
    const int64_t da = ia >= 0 ? ba[ia] : 1, db = ib >= 0 ? bb[ib] : 1;
    int64_t d;
    if (da == db || db == 1) d = da;
    else if (da == 1) d = db;
    else if (!known(da) || !known(db)) d = known(da) ? da : db;
    else
      TF_THROW(InvalidArgumentError, "matmul",
               "batch dimensions {} and {} cannot be broadcast together (a is {}, b is {})",
               ba.to_string(), bb.to_string(), sa.to_string(), sb.to_string());
    shape.push_back(d);
  }
  shape.push_back(m);
  shape.push_back(n);
  out[0] = {shape, in[0].dtype()};
}

std::string MatMul::attributes() const {
  return fmt::format("transpose_a={}, transpose_b={}", transpose_a, transpose_b);
}

void MatrixInverse::infer(std::span<const Tensor> in, std::span<TensorMeta> out) const {
  check_lu_dtype(name(), in[0].dtype());
  check_square(name(), in[0].shape());
  out[0] = {in[0].shape(), in[0].dtype()};
}

void MatrixSolve::infer(std::span<const Tensor> in, std::span<TensorMeta> out) const {
  const TensorShape& sa = in[0].shape();
  const TensorShape& sb = in[1].shape();
  TF_CHECK_ARG(in[0].dtype() == in[1].dtype(), name(), "dtypes differ: {} and {}",
               dtype_name(in[0].dtype()), dtype_name(in[1].dtype()));
  check_lu_dtype(name(), in[0].dtype());
  check_square(name(), sa);
  TF_CHECK_ARG(sb.rank() == sa.rank(), name(),
               "expects b of the same rank as a ([..., n, n] and [..., n, k]), got a {} and b {}",
               sa.to_string(), sb.to_string());
  bool ok = true;
  for (int i = 0; i + 1 < sa.rank(); ++i)
    ok = ok && (sa[i] == sb[i] || !known(sa[i]) || !known(sb[i]));
  TF_CHECK_ARG(ok, name(),
               "a is {} and b is {}: b must be [..., n, k] with a's batch dimensions and n rows",
               sa.to_string(), sb.to_string());
  TensorShape shape = sb;
  for (int i = 0; i + 1 < sa.rank(); ++i)
    if (!known(shape[i])) shape[i] = sa[i];
  out[0] = {shape, in[0].dtype()};
}

void MatrixDeterminant::infer(std::span<const Tensor> in, std::span<TensorMeta> out) const {
  check_lu_dtype(name(), in[0].dtype());
  check_square(name(), in[0].shape());
  out[0] = {batch_of(in[0].shape()), in[0].dtype()};
}

}  // namespace prims

Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b) {
  auto [x, y] = detail::unify_dtypes("matmul", a, b);
  return detail::dispatch(prims::MatMul(transpose_a, transpose_b), {x, y});
}

NormOrder::NormOrder(const char* name) : name_(name == nullptr ? "" : name) {
  TF_CHECK_ARG(name_ == "euclidean" || name_ == "fro", "norm",
               "'ord' must be \"euclidean\", \"fro\" or a number, got \"{}\"",
               name == nullptr ? "(null)" : name);
}
NormOrder::NormOrder(const std::string& name) : NormOrder(name.c_str()) {}
std::string NormOrder::to_string() const {
  if (!is_number()) return name_;
  if (std::isinf(p_)) return p_ > 0 ? "inf" : "-inf";
  return fmt::format("{}", p_);
}

namespace {

// TF's linalg_ops.norm: the reductions keep their dimensions, then the reduced axes are
// squeezed unless keepdims. `axes` empty: every axis (TF's axis=None).
Tensor norm_impl(const Tensor& t, const NormOrder& ord, std::vector<int> axes, bool all,
                 bool keepdims) {
  const char* op = "norm";
  TF_CHECK_ARG(t.defined(), op, "the input is an undefined tensor (TF's None)");
  detail::check_dtype_not_bool(op, t);
  const bool matrix = !all && axes.size() == 2;
  TF_CHECK_ARG(all || axes.size() == 1 || axes.size() == 2, op,
               "'axis' must be none, one axis or two distinct axes, got {}",
               detail::vec_to_string(axes));
  for (int& a : axes) a = detail::normalize_axis(op, a, t.shape());
  if (matrix)
    TF_CHECK_ARG(axes[0] != axes[1], op,
                 "'axis' must be none, one axis or two distinct axes, got the same axis twice");
  const double p = ord.p();
  const bool inf = ord.is_number() && std::isinf(p) && p > 0;
  if (matrix) {
    TF_CHECK_ARG(!ord.is_number() || p == 1 || p == 2 || inf, op,
                 "'ord' must be a supported matrix norm (euclidean, fro, 1, 2, inf), got {}",
                 ord.to_string());
  } else {
    TF_CHECK_ARG(!ord.is_fro(), op, "'ord' must be a supported vector norm, got fro");
    TF_CHECK_ARG(!ord.is_number() || p > 0, op,
                 "'ord' must be a supported vector norm (euclidean, 1, 2, inf or p > 0), got {}",
                 ord.to_string());
  }
  std::vector<int> reduce_axes = axes;
  if (all) {
    reduce_axes.clear();
    for (int d = 0; d < t.rank(); ++d) reduce_axes.push_back(d);
  }
  // Only the 1 and inf norms (sums and maxima of absolute values) take integer tensors.
  TF_CHECK_ARG(is_floating(t.dtype()) || (ord.is_number() && (p == 1 || inf)), op,
               "ord {} needs a floating-point tensor (float16, bfloat16, float32, float64), "
               "got {}",
               ord.to_string(), dtype_name(t.dtype()));
  Tensor result;
  if (matrix && ord.is_number() && p == 2) {
    // The spectral norm: the largest singular value of the matrices over the two axes (moved
    // last), then size-1 dimensions back at the axes' places, as the other reductions keep.
    std::vector<int> perm;
    for (int d = 0; d < t.rank(); ++d)
      if (d != axes[0] && d != axes[1]) perm.push_back(d);
    perm.push_back(axes[0]);
    perm.push_back(axes[1]);
    result = reduce_max(linalg::svd(transpose(t, perm), false, false).s, -1);
    result =
        expand_dims(expand_dims(result, std::min(axes[0], axes[1])), std::max(axes[0], axes[1]));
  } else if (!ord.is_number() || p == 2) {
    result = sqrt(reduce_sum(t * t, reduce_axes, true));
  } else if (p == 1) {
    result = abs(t);
    result = reduce_sum(result, matrix ? std::vector<int>{axes[0]} : reduce_axes, true);
    if (matrix) result = reduce_max(result, std::vector<int>{axes[1]}, true);
  } else if (inf) {
    result = abs(t);
    if (matrix) result = reduce_sum(result, std::vector<int>{axes[1]}, true);
    result = reduce_max(result, matrix ? std::vector<int>{axes[0]} : reduce_axes, true);
  } else {
    // General p-norms, as TF: pow(sum(pow(|x|, p)), 1 / p).
    result = pow(reduce_sum(pow(abs(t), p), reduce_axes, true), 1.0 / p);
  }
  if (keepdims) return result;
  return all ? squeeze(result) : squeeze(result, axes);
}

}  // namespace

Tensor norm(const Tensor& tensor, const NormOrder& ord) {
  return norm_impl(tensor, ord, {}, true, false);
}
Tensor norm(const Tensor& tensor, const NormOrder& ord, int axis, bool keepdims) {
  return norm_impl(tensor, ord, {axis}, false, keepdims);
}
Tensor norm(const Tensor& tensor, const NormOrder& ord, const std::vector<int>& axes,
            bool keepdims) {
  return norm_impl(tensor, ord, axes, false, keepdims);
}

namespace linalg {

Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b) {
  return tapeflow::matmul(a, b, transpose_a, transpose_b);
}

Tensor inv(const Tensor& a) {
  TF_CHECK_ARG(a.defined(), "inv", "an input is an undefined tensor (TF's None)");
  return detail::dispatch(prims::MatrixInverse{}, {a});
}

Tensor solve(const Tensor& a, const Tensor& b) {
  auto [x, y] = detail::unify_dtypes("solve", a, b);
  return detail::dispatch(prims::MatrixSolve{}, {x, y});
}

Tensor det(const Tensor& a) {
  TF_CHECK_ARG(a.defined(), "det", "an input is an undefined tensor (TF's None)");
  return detail::dispatch(prims::MatrixDeterminant{}, {a});
}

}  // namespace linalg

}  // namespace tapeflow

// ---- gradients ----
namespace tapeflow::prims {

namespace {
using Span = std::span<const Tensor>;

// Swaps the last two dimensions.
Tensor matrix_transpose(const Tensor& x) {
  std::vector<int> perm(x.rank());
  for (int i = 0; i < x.rank(); ++i) perm[i] = i;
  std::swap(perm[x.rank() - 1], perm[x.rank() - 2]);
  return transpose(x, perm);
}
// x[..., None, None]
Tensor expand_matrix(const Tensor& x) { return expand_dims(expand_dims(x, -1), -1); }
}  // namespace

// C = op(a) op(b): d op(a) = g op(b)^T, d op(b) = op(a)^T g, each transposed back when the
// operand was used transposed, then summed over broadcast batch dimensions.
uint32_t MatMul::vjp_saves() const { return save_input(0) | save_input(1); }
std::vector<Tensor> MatMul::vjp(Span p, Span cts, std::span<const int> argnums, Span) const {
  const Tensor &a = p[0], &b = p[1], &g = cts[0];
  std::vector<Tensor> out;
  for (int k : argnums) {
    Tensor d;
    if (k == 0)
      d = transpose_a ? matmul(b, g, transpose_b, true) : matmul(g, b, false, !transpose_b);
    else
      d = transpose_b ? matmul(g, a, true, transpose_a) : matmul(a, g, !transpose_a, false);
    out.push_back(detail::sum_to_shape(d, p[k].shape()));
  }
  return out;
}

// d inv(a) = -inv(a)^T g inv(a)^T
uint32_t MatrixInverse::vjp_saves() const { return save_output(0); }
std::vector<Tensor> MatrixInverse::vjp(Span, Span cts, std::span<const int>, Span outs) const {
  const Tensor& y = outs[0];
  return {negative(matmul(y, matmul(cts[0], y, false, true), true, false))};
}

// x = solve(a, b): db = solve(a^T, g), da = -db x^T.
uint32_t MatrixSolve::vjp_saves() const { return save_input(0) | save_output(0); }
std::vector<Tensor> MatrixSolve::vjp(Span p, Span cts, std::span<const int> argnums,
                                     Span outs) const {
  const Tensor db = linalg::solve(matrix_transpose(p[0]), cts[0]);
  std::vector<Tensor> out;
  for (int k : argnums)
    out.push_back(k == 1 ? db : negative(matmul(db, outs[0], false, true)));
  return out;
}

// d det(a) = g det(a) inv(a)^T (a singular matrix has no gradient here, as TF's inverse fails).
uint32_t MatrixDeterminant::vjp_saves() const { return save_input(0) | save_output(0); }
std::vector<Tensor> MatrixDeterminant::vjp(Span p, Span cts, std::span<const int>,
                                           Span outs) const {
  Tensor inverse;
  try {
    inverse = linalg::inv(p[0]);
  } catch (const InvalidArgumentError& e) {
    TF_THROW(InvalidArgumentError, "det",
             "its gradient at a singular matrix is not computed: it goes through the inverse, "
             "as TF's does ({})",
             e.what());
  }
  return {expand_matrix(cts[0] * outs[0]) * matrix_transpose(inverse)};
}

}  // namespace tapeflow::prims

namespace tapeflow::detail {

Tensor matmul_along(const Tensor& w, const Tensor& x, int axis) {
  const int a = normalize_axis("matmul_along", axis, x.shape());
  if (a == x.rank() - 2) return matmul(w, x);
  std::vector<int> perm(static_cast<size_t>(x.rank()));
  for (int d = 0; d < x.rank(); ++d) perm[static_cast<size_t>(d)] = d;
  std::swap(perm[static_cast<size_t>(a)], perm[static_cast<size_t>(x.rank() - 2)]);
  return transpose(matmul(w, transpose(x, perm)), perm);
}

}  // namespace tapeflow::detail
