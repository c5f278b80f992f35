#include "ops/linalg_more.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/check.h"
#include "core/error.h"
#include "ops/array_more.h"
#include "ops/binary.h"
#include "ops/dispatch.h"
#include "ops/dynamic_shape.h"
#include "ops/factory.h"
#include "ops/helpers.h"
#include "ops/linalg.h"
#include "ops/movement.h"
#include "ops/reduce.h"
#include "ops/traced_loop.h"
#include "ops/unary.h"

namespace tapeflow {

namespace {

bool known(int64_t d) {
  return d != None;
}

void check_defined(const char* op, std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts)
    TF_CHECK_ARG(t->defined(), op, "an input is an undefined tensor (TF's None)");
}

void check_matrix(const char* op, const Tensor& x) {
  TF_CHECK_ARG(x.rank() >= 2, op, "expects a tensor of rank at least 2, got shape {}",
               x.shape().to_string());
}

// The last two dimensions, which the structure ops need known (they build masks from them).
std::pair<int64_t, int64_t> matrix_dims(const char* op, const Tensor& x) {
  check_matrix(op, x);
  const int64_t m = x.shape()[x.rank() - 2], n = x.shape()[x.rank() - 1];
  TF_CHECK_ARG(known(m) && known(n), op, "needs the last two dimensions known, got shape {}",
               x.shape().to_string());
  return {m, n};
}

// Rank >= 2, square, float32/float64: the LAPACK-backed primitives (TF has no CPU kernels for
// the half types there).
void check_square_float(const char* op, const TensorShape& s, DType dt) {
  TF_CHECK_ARG(dt == float32 || dt == float64, op, "expects float32 or float64, got {}",
               dtype_name(dt));
  TF_CHECK_ARG(s.rank() >= 2, op, "expects a tensor of rank at least 2, got shape {}",
               s.to_string());
  const int64_t r = s[s.rank() - 2], c = s[s.rank() - 1];
  TF_CHECK_ARG(r == c || !known(r) || !known(c), op, "expects square matrices, got shape {}",
               s.to_string());
}

TensorShape batch_of(const TensorShape& s, int keep_last) {
  TensorShape b;
  for (int i = 0; i + keep_last < s.rank(); ++i) b.push_back(s[i]);
  return b;
}

TensorShape with_tail(TensorShape s, std::initializer_list<int64_t> tail) {
  for (int64_t d : tail) s.push_back(d);
  return s;
}

Tensor scalar_of(double v, DType dt) {
  return detail::from_doubles({v}, {}, dt);
}

// j - i for the elements (i, j) of an [m, n] matrix, int64, computed where the ops run (masks
// for the structure ops: nothing of size m n built on the host).
Tensor diagonal_offsets(int64_t m, int64_t n) {
  const Tensor rows = reshape(detail::range_integers(0, m, 1, int64), {m, 1});
  return detail::range_integers(0, n, 1, int64) - rows;
}

// The [m, n] bool mask of diagonal k.
Tensor diagonal_mask(int64_t m, int64_t n, int64_t k) {
  return equal(diagonal_offsets(m, n), scalar_of(static_cast<double>(k), int64));
}

// x[..., lo:lo+len] along `axis` (negative counts from the end).
Tensor slice_axis(const Tensor& x, int axis, int64_t lo, int64_t len) {
  const int r = x.rank();
  axis = axis < 0 ? axis + r : axis;
  std::vector<int64_t> begin(r, 0), size(r, -1);
  begin[axis] = lo;
  size[axis] = len;
  return slice(x, begin, size);
}

// Pads the last axis with `before` and `after` zeros.
Tensor pad_last(const Tensor& x, int64_t before, int64_t after) {
  if (before == 0 && after == 0) return x;
  std::vector<std::pair<int64_t, int64_t>> p(x.rank(), {0, 0});
  p.back() = {before, after};
  return pad(x, p);
}

// The diagonal k of an [M, N] matrix exists for -M < k < N (TF's bound; any k when empty).
void check_diag_index(const char* op, int64_t k, int64_t m, int64_t n) {
  TF_CHECK_ARG(m == 0 || n == 0 || (-m < k && k < n), op,
               "diagonal index k = {} is out of bounds for {} x {} matrices (it must be in ({}, "
               "{}))",
               k, m, n, -m, n);
}

int64_t diag_length(int64_t k, int64_t m, int64_t n) {
  return std::max<int64_t>(0, std::min(m + std::min<int64_t>(k, 0), n - std::max<int64_t>(k, 0)));
}

// Permutation matrices P[..., i, perm[i]] = 1 of dtype dt: P x = x[..., perm, :].
Tensor permutation_matrix(const char* op, const Tensor& perm, int64_t n, DType dt) {
  TF_CHECK_ARG(perm.dtype() == int32 || perm.dtype() == int64, op,
               "expects perm of dtype int32 or int64, got {}", dtype_name(perm.dtype()));
  return cast(one_hot(perm, n), dt);
}

}  // namespace

namespace linalg {

Tensor band_part(const Tensor& input, int64_t num_lower, int64_t num_upper) {
  const char* op = "band_part";
  check_defined(op, {&input});
  const auto [m, n] = matrix_dims(op, input);
  if (num_lower < 0 && num_upper < 0) return input;  // the whole matrix
  // Keep (i, j) when i - j <= num_lower and j - i <= num_upper (a negative bound: no limit).
  const Tensor offsets = diagonal_offsets(m, n);
  Tensor keep;
  if (num_lower >= 0)
    keep = greater_equal(offsets, scalar_of(-static_cast<double>(num_lower), int64));
  if (num_upper >= 0) {
    const Tensor upper = less_equal(offsets, scalar_of(static_cast<double>(num_upper), int64));
    keep = keep.defined() ? logical_and(keep, upper) : upper;
  }
  return where(keep, input, scalar_of(0, input.dtype()));
}

Tensor diag(const Tensor& diagonal, int64_t k) {
  const char* op = "diag";
  check_defined(op, {&diagonal});
  TF_CHECK_ARG(diagonal.rank() >= 1, op, "expects a tensor of rank at least 1, got shape {}",
               diagonal.shape().to_string());
  const int64_t n = diagonal.shape()[diagonal.rank() - 1];
  TF_CHECK_ARG(known(n), op, "needs the last dimension known, got shape {}",
               diagonal.shape().to_string());
  TF_CHECK_ARG(k > -(int64_t{1} << 31) && k < (int64_t{1} << 31), op,
               "k = {} would give matrices of more than 2^62 elements (diagonal shape {})", k,
               diagonal.shape().to_string());
  const int64_t size = n + (k < 0 ? -k : k);
  // Column j of row i + k holds v[i] (k >= 0), column j of row j - k holds v[j] (k < 0): one
  // value per column, which the mask keeps on the diagonal.
  return detail::naming_errors(op, [&] {
    const Tensor columns =
        expand_dims(k >= 0 ? pad_last(diagonal, k, 0) : pad_last(diagonal, 0, -k), -2);
    return where(diagonal_mask(size, size, k), columns, scalar_of(0, diagonal.dtype()));
  });
}

Tensor diag_part(const Tensor& input, int64_t k) {
  const char* op = "diag_part";
  check_defined(op, {&input});
  const auto [m, n] = matrix_dims(op, input);
  check_diag_index(op, k, m, n);
  const Tensor masked = where(diagonal_mask(m, n, k), input, scalar_of(0, input.dtype()));
  // One element per row (k >= 0) or column (k < 0) survives; sum it out, keep the first rows.
  const Tensor line = input.dtype() == bool_ ? reduce_any(masked, {k >= 0 ? -1 : -2})
                                             : reduce_sum(masked, {k >= 0 ? -1 : -2});
  return slice_axis(line, -1, 0, diag_length(k, m, n));
}

Tensor set_diag(const Tensor& input, const Tensor& diagonal, int64_t k) {
  const char* op = "set_diag";
  check_defined(op, {&input, &diagonal});
  const auto [m, n] = matrix_dims(op, input);
  check_diag_index(op, k, m, n);
  TF_CHECK_ARG(input.dtype() == diagonal.dtype(), op, "dtypes differ: input {} and diagonal {}",
               dtype_name(input.dtype()), dtype_name(diagonal.dtype()));
  const int64_t len = diag_length(k, m, n);
  const TensorShape want = with_tail(batch_of(input.shape(), 2), {len});
  bool ok = diagonal.rank() == want.rank();
  for (int i = 0; ok && i < want.rank(); ++i)
    ok = diagonal.shape()[i] == want[i] || !known(diagonal.shape()[i]) || !known(want[i]);
  TF_CHECK_ARG(ok, op, "input {} (k = {}) needs a diagonal of shape {}, got {}",
               input.shape().to_string(), k, want.to_string(), diagonal.shape().to_string());
  // One value per row (k >= 0) or per column (k < 0), broadcast along the other axis.
  const Tensor values = k >= 0 ? expand_dims(pad_last(diagonal, 0, m - len), -1)
                               : expand_dims(pad_last(diagonal, 0, n - len), -2);
  return where(diagonal_mask(m, n, k), values, input);
}

Tensor trace(const Tensor& x) {
  const char* op = "trace";
  check_defined(op, {&x});
  matrix_dims(op, x);
  detail::check_dtype_not_bool(op, x);
  return reduce_sum(diag_part(x), {-1});
}

Tensor matrix_transpose(const Tensor& a) {
  const char* op = "matrix_transpose";
  check_defined(op, {&a});
  check_matrix(op, a);
  std::vector<int> perm(a.rank());
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[a.rank() - 1], perm[a.rank() - 2]);
  return transpose(a, perm);
}

Tensor adjoint(const Tensor& a) {
  return detail::naming_errors("adjoint", [&] { return matrix_transpose(a); });
}

namespace {
Tensor matvec_body(const Tensor& a, const Tensor& x, bool transpose_a) {
  const char* op = "matvec";
  check_defined(op, {&a, &x});
  check_matrix(op, a);
  TF_CHECK_ARG(x.rank() >= 1, op, "expects vectors of rank at least 1, got shape {}",
               x.shape().to_string());
  return squeeze(tapeflow::matmul(a, expand_dims(x, -1), transpose_a, false), {-1});
}
}  // namespace

Tensor matvec(const Tensor& a, const Tensor& x, bool transpose_a) {
  return detail::naming_errors("matvec", [&] { return matvec_body(a, x, transpose_a); });
}

Tensor tensordot(const Tensor& a, const Tensor& b, int axes) {
  const char* op = "tensordot";
  check_defined(op, {&a, &b});
  TF_CHECK_ARG(axes >= 0 && axes <= a.rank() && axes <= b.rank(), op,
               "axes = {} must be in [0, min(rank(a), rank(b))], got shapes {} and {}", axes,
               a.shape().to_string(), b.shape().to_string());
  std::vector<int> aa, ba;
  for (int i = 0; i < axes; ++i) {
    aa.push_back(a.rank() - axes + i);
    ba.push_back(i);
  }
  return tensordot(a, b, aa, ba);
}

Tensor tensordot(const Tensor& a, const Tensor& b, const std::vector<int>& a_axes,
                 const std::vector<int>& b_axes) {
  const char* op = "tensordot";
  check_defined(op, {&a, &b});
  TF_CHECK_ARG(a_axes.size() == b_axes.size(), op, "needs as many axes of a as of b, got {} and {}",
               detail::vec_to_string(a_axes), detail::vec_to_string(b_axes));
  std::vector<bool> a_used(a.rank(), false), b_used(b.rank(), false);
  std::vector<int> pa, pb;  // a: free then contracted; b: contracted then free
  for (size_t i = 0; i < a_axes.size(); ++i) {
    const int x = detail::normalize_axis(op, a_axes[i], a.shape());
    const int y = detail::normalize_axis(op, b_axes[i], b.shape());
    TF_CHECK_ARG(!a_used[x] && !b_used[y], op, "repeats an axis: {} and {}",
                 detail::vec_to_string(a_axes), detail::vec_to_string(b_axes));
    const int64_t dx = a.shape()[x], dy = b.shape()[y];
    TF_CHECK_ARG(known(dx) && known(dy) && dx == dy, op,
                 "contracted dimensions differ: axis {} of a {} and axis {} of b {}", a_axes[i],
                 a.shape().to_string(), b_axes[i], b.shape().to_string());
    a_used[x] = b_used[y] = true;
    pb.push_back(y);
  }
  for (int i = 0; i < a.rank(); ++i)
    if (!a_used[i]) {
      TF_CHECK_ARG(known(a.shape()[i]), op, "needs known dimensions, got a {}",
                   a.shape().to_string());
      pa.push_back(i);
    }
  for (size_t i = 0; i < a_axes.size(); ++i)
    pa.push_back(detail::normalize_axis(op, a_axes[i], a.shape()));
  for (int i = 0; i < b.rank(); ++i)
    if (!b_used[i]) {
      TF_CHECK_ARG(known(b.shape()[i]), op, "needs known dimensions, got b {}",
                   b.shape().to_string());
      pb.push_back(i);
    }
  // Free and contracted axes merged into a matrix product, and the free sizes taken back from
  // the transposed operands when the op runs: a graph traced for None dimensions serves every
  // size of them.
  const int fa = static_cast<int>(pa.size() - a_axes.size()), c = static_cast<int>(a_axes.size());
  const int fb = static_cast<int>(pb.size()) - c;
  const Tensor at = transpose(a, pa), bt = transpose(b, pb);
  const Tensor a2 = detail::merge_axes(at, {fa, c});
  const Tensor b2 = detail::merge_axes(bt, {c, fb});
  std::vector<std::pair<int, int>> parts;
  for (int i = 0; i < fa; ++i) parts.push_back({0, i});
  for (int j = 0; j < fb; ++j) parts.push_back({1, c + j});
  return detail::reshape_from(tapeflow::matmul(a2, b2), {at, bt}, parts);
}

Tensor cross(const Tensor& a, const Tensor& b) {
  const char* op = "cross";
  check_defined(op, {&a, &b});
  TF_CHECK_ARG(a.shape() == b.shape(), op, "needs inputs of one shape, got {} and {}",
               a.shape().to_string(), b.shape().to_string());
  TF_CHECK_ARG(a.rank() >= 1 && a.shape()[a.rank() - 1] == 3, op,
               "needs a last dimension of 3, got shape {}", a.shape().to_string());
  TF_CHECK_ARG(a.dtype() == b.dtype(), op, "dtypes differ: {} and {}", dtype_name(a.dtype()),
               dtype_name(b.dtype()));
  detail::check_dtype_not_bool(op, a);
  auto at = [](const Tensor& x, int64_t i) { return slice_axis(x, -1, i, 1); };
  const Tensor a0 = at(a, 0), a1 = at(a, 1), a2 = at(a, 2);
  const Tensor b0 = at(b, 0), b1 = at(b, 1), b2 = at(b, 2);
  return concat({a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0}, -1);
}

Tensor l2_normalize(const Tensor& x, const std::vector<int>& axes, double epsilon) {
  const char* op = "l2_normalize";
  check_defined(op, {&x});
  detail::check_dtype_floating(op, x);
  return detail::naming_errors(op, [&] {
    const Tensor square_sum = reduce_sum(square(x), axes, true);
    return x * rsqrt(maximum(square_sum, scalar_of(epsilon, x.dtype())));
  });
}

Tensor l2_normalize(const Tensor& x, int axis, double epsilon) {
  return l2_normalize(x, std::vector<int>{axis}, epsilon);
}

namespace {
Tensor expm_body(const Tensor& input) {
  const char* op = "expm";
  check_defined(op, {&input});
  check_square_float(op, input.shape(), input.dtype());
  const auto [n, unused] = matrix_dims(op, input);
  (void)unused;
  if (input.num_elements() == 0) return input;
  const DType dt = input.dtype();
  const bool f64 = dt == float64;
  // Higham's bounds on the 1-norm for Pade orders 13 (float64) and 7 (float32).
  const double theta = f64 ? 5.371920351148152 : 3.925724783138660;
  const Tensor l1 = reduce_max(reduce_sum(abs(input), {-2}), {-1});
  const Tensor s = maximum(ceil(log(l1 / theta) / std::log(2.0)), scalar_of(0, dt));
  const Tensor s_mat = expand_dims(expand_dims(s, -1), -1);
  const Tensor a = input / pow(scalar_of(2, dt), s_mat);
  const Tensor ident = eye(n, dt);
  const Tensor a2 = tapeflow::matmul(a, a), a4 = tapeflow::matmul(a2, a2),
               a6 = tapeflow::matmul(a4, a2);
  Tensor u, v;
  if (f64) {
    const double b[] = {64764752532480000.,
                        32382376266240000.,
                        7771770303897600.,
                        1187353796428800.,
                        129060195264000.,
                        10559470521600.,
                        670442572800.,
                        33522128640.,
                        1323241920.,
                        40840800.,
                        960960.,
                        16380.,
                        182.,
                        1.};
    const Tensor inner_u = tapeflow::matmul(a6, a6 * b[13] + a4 * b[11] + a2 * b[9]);
    u = tapeflow::matmul(a, inner_u + a6 * b[7] + a4 * b[5] + a2 * b[3] + ident * b[1]);
    v = tapeflow::matmul(a6, a6 * b[12] + a4 * b[10] + a2 * b[8]) + a6 * b[6] + a4 * b[4] +
        a2 * b[2] + ident * b[0];
  } else {
    const double b[] = {17297280., 8648640., 1995840., 277200., 25200., 1512., 56., 1.};
    u = tapeflow::matmul(a, a6 * b[7] + a4 * b[5] + a2 * b[3] + ident * b[1]);
    v = a6 * b[6] + a4 * b[4] + a2 * b[2] + ident * b[0];
  }
  Tensor r = solve(v - u, v + u);
  // Each matrix squares its own s times (NaN norms: none).
  if (input.is_symbolic()) {
    // Traced, the count is known when the graph runs: a tf::while_loop up to the largest s (a
    // NaN ends it at once).
    const Tensor most = reduce_max(s);
    return detail::ops_while_loop(
        [&](const std::vector<Tensor>& v) { return less(v[0], most); },
        [&](const std::vector<Tensor>& v) {
          return std::vector<Tensor>{v[0] + scalar_of(1, dt),
                                     where(less(v[0], s_mat), tapeflow::matmul(v[1], v[1]), v[1])};
        },
        {scalar_of(0, dt), r})[1];
  }
  const double most = reduce_max(s).item<double>();
  const int64_t squarings = std::isnan(most) ? 0 : static_cast<int64_t>(most);
  for (int64_t i = 0; i < squarings; ++i)
    r = where(less(scalar_of(static_cast<double>(i), dt), s_mat), tapeflow::matmul(r, r), r);
  return r;
}
}  // namespace

Tensor expm(const Tensor& input) {
  return detail::naming_errors("expm", [&] { return expm_body(input); });
}

Tensor triangular_solve(const Tensor& matrix, const Tensor& rhs, bool lower, bool adjoint) {
  const char* op = "triangular_solve";
  check_defined(op, {&matrix, &rhs});
  TF_CHECK_ARG(matrix.dtype() == rhs.dtype(), op, "dtypes differ: matrix {} and rhs {}",
               dtype_name(matrix.dtype()), dtype_name(rhs.dtype()));
  check_square_float(op, matrix.shape(), matrix.dtype());
  TF_CHECK_ARG(rhs.rank() >= 2, op, "expects rhs of rank at least 2, got shape {}",
               rhs.shape().to_string());
  const int64_t m = matrix.shape()[matrix.rank() - 1], rows = rhs.shape()[rhs.rank() - 2];
  TF_CHECK_ARG(m == rows || !known(m) || !known(rows), op,
               "matrix {} and rhs {}: rhs must have as many rows as the matrix",
               matrix.shape().to_string(), rhs.shape().to_string());
  // Batch dimensions broadcast (TF 2.x's MatrixTriangularSolve); broadcast_to's gradient sums
  // them back.
  TensorShape batch;
  try {
    batch = detail::broadcast_shapes(op, batch_of(matrix.shape(), 2), batch_of(rhs.shape(), 2));
  } catch (const InvalidArgumentError&) {
    TF_THROW(InvalidArgumentError, op, "batch dimensions of matrix {} and rhs {} do not broadcast",
             matrix.shape().to_string(), rhs.shape().to_string());
  }
  auto broadcast = [&](const Tensor& x, const Tensor& other) {
    const TensorShape want = with_tail(batch, {x.shape()[x.rank() - 2], x.shape()[x.rank() - 1]});
    if (x.shape() == want || !detail::open_shapes()) return detail::broadcast_with(x, {}, want);
    // A trace for None dimensions: the batch read from `other` when the graph runs (x's
    // matrices broadcast with other's batch of 1 x 1 matrices have the shape wanted).
    std::vector<int64_t> begin(static_cast<size_t>(other.rank()), 0), size(begin.size(), -1);
    size[size.size() - 1] = size[size.size() - 2] = 1;
    return detail::broadcast_with(x, {slice(other, begin, size)}, want);
  };
  return detail::dispatch(prims::MatrixTriangularSolve(lower, adjoint),
                          {broadcast(matrix, rhs), broadcast(rhs, matrix)});
}

std::pair<Tensor, Tensor> slogdet(const Tensor& input) {
  check_defined("slogdet", {&input});
  const Tensor in[] = {input};
  auto out = detail::dispatch_multi(prims::LogMatrixDeterminant{}, in);
  return {out[0], out[1]};
}

std::pair<Tensor, Tensor> lu(const Tensor& input, DType output_idx_type) {
  check_defined("lu", {&input});
  TF_CHECK_ARG(output_idx_type == int32 || output_idx_type == int64, "lu",
               "output_idx_type must be int32 or int64, got {}", dtype_name(output_idx_type));
  const Tensor in[] = {input};
  auto out = detail::dispatch_multi(prims::Lu(output_idx_type), in);
  return {out[0], out[1]};
}

namespace {
// Unit-lower L and upper U from lu's packed factors.
Tensor unit_lower(const Tensor& lower_upper) {
  // Ones shaped like the diagonal (read when the graph runs in a trace for None dimensions).
  return set_diag(band_part(lower_upper, -1, 0), ones_like(diag_part(lower_upper)));
}

void check_lu_args(const char* op, const Tensor& lower_upper, const Tensor& perm) {
  check_defined(op, {&lower_upper, &perm});
  check_square_float(op, lower_upper.shape(), lower_upper.dtype());
  const int64_t n = lower_upper.shape()[lower_upper.rank() - 1];
  TF_CHECK_ARG(perm.rank() >= 1 && (perm.shape()[perm.rank() - 1] == n || !known(n) ||
                                    !known(perm.shape()[perm.rank() - 1])),
               op, "perm {} must be [..., n] for lower_upper {}", perm.shape().to_string(),
               lower_upper.shape().to_string());
}
}  // namespace

Tensor lu_solve(const Tensor& lower_upper, const Tensor& perm, const Tensor& rhs) {
  const char* op = "lu_solve";
  check_lu_args(op, lower_upper, perm);
  check_defined(op, {&rhs});
  TF_CHECK_ARG(rhs.dtype() == lower_upper.dtype(), op, "dtypes differ: lower_upper {} and rhs {}",
               dtype_name(lower_upper.dtype()), dtype_name(rhs.dtype()));
  const int64_t n = lower_upper.shape()[lower_upper.rank() - 1];
  TF_CHECK_ARG(rhs.rank() >= 2 && rhs.shape()[rhs.rank() - 2] == n, op,
               "rhs {} must be [..., n, k] for lower_upper {}", rhs.shape().to_string(),
               lower_upper.shape().to_string());
  // A x = b with P A = L U: L U x = P b.
  const Tensor permuted = tapeflow::matmul(permutation_matrix(op, perm, n, rhs.dtype()), rhs);
  const Tensor y = triangular_solve(unit_lower(lower_upper), permuted, true, false);
  return triangular_solve(lower_upper, y, false, false);
}

Tensor lu_matrix_inverse(const Tensor& lower_upper, const Tensor& perm) {
  const char* op = "lu_matrix_inverse";
  check_lu_args(op, lower_upper, perm);
  const int64_t n = lower_upper.shape()[lower_upper.rank() - 1];
  return lu_solve(lower_upper, perm,
                  detail::broadcast_like(eye(n, lower_upper.dtype()), lower_upper));
}

Tensor lu_reconstruct(const Tensor& lower_upper, const Tensor& perm) {
  const char* op = "lu_reconstruct";
  check_lu_args(op, lower_upper, perm);
  const int64_t n = lower_upper.shape()[lower_upper.rank() - 1];
  const Tensor product = tapeflow::matmul(unit_lower(lower_upper), band_part(lower_upper, 0, -1));
  // A = P^T (L U).
  return tapeflow::matmul(permutation_matrix(op, perm, n, lower_upper.dtype()), product, true,
                          false);
}

Tensor tridiagonal_solve(const Tensor& diagonals, const Tensor& rhs,
                         const std::string& diagonals_format, bool transpose_rhs,
                         bool partial_pivoting) {
  const char* op = "tridiagonal_solve";
  check_defined(op, {&diagonals, &rhs});
  TF_CHECK_ARG(diagonals_format == "compact" || diagonals_format == "matrix", op,
               "diagonals_format must be \"compact\" or \"matrix\" for one tensor (\"sequence\" "
               "takes three), got \"{}\"",
               diagonals_format);
  Tensor compact = diagonals;
  if (diagonals_format == "matrix") {
    const auto [m, n] = matrix_dims(op, diagonals);
    TF_CHECK_ARG(m == n, op, "expects square matrices, got shape {}",
                 diagonals.shape().to_string());
    if (m == 0) {
      compact = zeros(with_tail(batch_of(diagonals.shape(), 2), {3, 0}), diagonals.dtype());
    } else {
      const Tensor main = diag_part(diagonals);
      const Tensor super = m > 1 ? pad_last(diag_part(diagonals, 1), 0, 1) : zeros_like(main);
      const Tensor sub = m > 1 ? pad_last(diag_part(diagonals, -1), 1, 0) : zeros_like(main);
      compact = stack({super, main, sub}, -2);
    }
  }
  TF_CHECK_ARG(compact.rank() >= 2 && compact.shape()[compact.rank() - 2] == 3, op,
               "expects diagonals of shape [..., 3, M] in the compact format, got {}",
               compact.shape().to_string());
  TF_CHECK_ARG(compact.dtype() == rhs.dtype(), op, "dtypes differ: diagonals {} and rhs {}",
               dtype_name(compact.dtype()), dtype_name(rhs.dtype()));
  // A vector per system: rhs [..., M] has one dimension less than the compact diagonals.
  const bool vector = rhs.rank() == compact.rank() - 1;
  Tensor b = rhs;
  if (vector) {
    b = expand_dims(rhs, -1);
  } else if (transpose_rhs) {
    TF_CHECK_ARG(rhs.rank() >= 2, op,
                 "transpose_rhs needs rhs of rank at least 2 (or one less than the compact "
                 "diagonals'), got shape {} with diagonals {}",
                 rhs.shape().to_string(), compact.shape().to_string());
    b = matrix_transpose(rhs);
  }
  const Tensor x = detail::dispatch(prims::TridiagonalSolve(partial_pivoting), {compact, b});
  return vector ? squeeze(x, {-1}) : x;
}

namespace {
// The sequence format {super, main, sub} (each [..., M]) stacked into the compact [..., 3, M].
Tensor compact_diagonals(const char* op, const std::vector<Tensor>& diagonals) {
  TF_CHECK_ARG(diagonals.size() == 3, op,
               "the sequence format takes 3 diagonals (super, main, sub), got {}",
               diagonals.size());
  for (const Tensor& t : diagonals) check_defined(op, {&t});
  const TensorShape& s = diagonals[1].shape();
  TF_CHECK_ARG(diagonals[0].shape() == s && diagonals[2].shape() == s, op,
               "the three diagonals need one shape [..., M], got {}, {} and {}",
               diagonals[0].shape().to_string(), s.to_string(), diagonals[2].shape().to_string());
  return stack(diagonals, -2);
}
}  // namespace

Tensor tridiagonal_solve(const std::vector<Tensor>& diagonals, const Tensor& rhs,
                         bool transpose_rhs, bool partial_pivoting) {
  return tridiagonal_solve(compact_diagonals("tridiagonal_solve", diagonals), rhs, "compact",
                           transpose_rhs, partial_pivoting);
}

namespace {
// rows of x [..., M, N] moved by one along axis -2: next (row i holds row i + 1, the last zero)
// or previous (row i holds row i - 1, the first zero).
Tensor shifted_rows(const Tensor& x, bool next) {
  const int r = x.rank();
  std::vector<std::pair<int64_t, int64_t>> pads(static_cast<size_t>(r), {0, 0});
  pads[static_cast<size_t>(r - 2)] =
      next ? std::pair<int64_t, int64_t>{0, 1} : std::pair<int64_t, int64_t>{1, 0};
  const Tensor p = pad(x, pads);
  std::vector<int64_t> begin(static_cast<size_t>(r), 0), size(static_cast<size_t>(r), -1);
  if (next)
    begin[static_cast<size_t>(r - 2)] = 1;
  else
    size[static_cast<size_t>(r - 2)] = x.shape()[-2];
  return slice(p, begin, size);
}
}  // namespace

Tensor tridiagonal_matmul(const Tensor& diagonals, const Tensor& rhs,
                          const std::string& diagonals_format) {
  const char* op = "tridiagonal_matmul";
  check_defined(op, {&diagonals, &rhs});
  TF_CHECK_ARG(is_floating(rhs.dtype()) && diagonals.dtype() == rhs.dtype(), op,
               "expects floating-point diagonals and rhs of one dtype, got {} and {}",
               dtype_name(diagonals.dtype()), dtype_name(rhs.dtype()));
  TF_CHECK_ARG(rhs.rank() >= 2, op, "rhs must be [..., M, N], got shape {}",
               rhs.shape().to_string());
  const int64_t m = rhs.shape()[-2];
  Tensor super, main, sub;
  if (diagonals_format == "compact") {
    const TensorShape& d = diagonals.shape();
    TF_CHECK_ARG(d.rank() >= 2 && d[-2] == 3 && d[-1] == m, op,
                 "compact diagonals must be [..., 3, M] with M = {} (rhs of shape {}), got "
                 "shape {}",
                 m, rhs.shape().to_string(), d.to_string());
    const auto parts = unstack(diagonals, 3, -2);
    super = parts[0];
    main = parts[1];
    sub = parts[2];
  } else if (diagonals_format == "matrix") {
    const TensorShape& d = diagonals.shape();
    TF_CHECK_ARG(d.rank() >= 2 && d[-2] == m && d[-1] == m, op,
                 "a matrix must be [..., M, M] with M = {} (rhs of shape {}), got shape {}", m,
                 rhs.shape().to_string(), d.to_string());
    main = diag_part(diagonals);
    // The off-diagonals have M - 1 entries: padded to M where the compact format ignores one.
    std::vector<std::pair<int64_t, int64_t>> pads(static_cast<size_t>(d.rank() - 1), {0, 0});
    pads.back() = {0, 1};
    super = m > 0 ? pad(diag_part(diagonals, 1), pads) : main;
    pads.back() = {1, 0};
    sub = m > 0 ? pad(diag_part(diagonals, -1), pads) : main;
  } else {
    TF_THROW(InvalidArgumentError, op,
             "diagonals_format must be \"compact\" or \"matrix\" (the sequence format is "
             "the std::vector overload), got \"{}\"",
             diagonals_format);
  }
  TF_CHECK_ARG(main.rank() == rhs.rank() - 1, op,
               "diagonals of shape {} and rhs of shape {} need the same batch dimensions",
               diagonals.shape().to_string(), rhs.shape().to_string());
  return expand_dims(super, -1) * shifted_rows(rhs, true) + expand_dims(main, -1) * rhs +
         expand_dims(sub, -1) * shifted_rows(rhs, false);
}

Tensor tridiagonal_matmul(const std::vector<Tensor>& diagonals, const Tensor& rhs) {
  return tridiagonal_matmul(compact_diagonals("tridiagonal_matmul", diagonals), rhs, "compact");
}

Tensor tensor_diag(const Tensor& diagonal) {
  const char* op = "tensor_diag";
  check_defined(op, {&diagonal});
  const TensorShape& s = diagonal.shape();
  TF_CHECK_ARG(s.is_fully_defined(), op, "the diagonal's shape must be known, got {}",
               s.to_string());
  std::vector<int64_t> dims = s.dims();
  dims.insert(dims.end(), s.begin(), s.end());
  return reshape(diag(reshape(diagonal, {-1})), TensorShape(dims));
}

Tensor tensor_diag_part(const Tensor& input) {
  const char* op = "tensor_diag_part";
  check_defined(op, {&input});
  const TensorShape& s = input.shape();
  const int half = s.rank() / 2;
  bool ok = s.rank() % 2 == 0 && s.is_fully_defined();
  for (int d = 0; ok && d < half; ++d) ok = s[d] == s[d + half];
  TF_CHECK_ARG(ok, op,
               "expects a known shape s + s (an even rank whose two halves are equal), got {}",
               s.to_string());
  const std::vector<int64_t> part(s.begin(), s.begin() + half);
  int64_t n = 1;
  for (int64_t d : part) n *= d;
  return reshape(diag_part(reshape(input, {n, n})), TensorShape(part));
}

}  // namespace linalg

namespace prims {

void MatrixTriangularSolve::infer(std::span<const Tensor> in, std::span<TensorMeta> out) const {
  const TensorShape& sa = in[0].shape();
  const TensorShape& sb = in[1].shape();
  TF_CHECK_ARG(in[0].dtype() == in[1].dtype(), name(), "dtypes differ: {} and {}",
               dtype_name(in[0].dtype()), dtype_name(in[1].dtype()));
  check_square_float(name(), sa, in[0].dtype());
  bool ok = sb.rank() == sa.rank();
  for (int i = 0; ok && i + 1 < sa.rank(); ++i)
    ok = sa[i] == sb[i] || !known(sa[i]) || !known(sb[i]);
  TF_CHECK_ARG(ok, name(), "matrix {} and rhs {}: rhs must be [..., M, K] with the same batch",
               sa.to_string(), sb.to_string());
  TensorShape shape = sb;
  for (int i = 0; i + 1 < sa.rank(); ++i)
    if (!known(shape[i])) shape[i] = sa[i];
  out[0] = {shape, in[0].dtype()};
}

std::string MatrixTriangularSolve::attributes() const {
  return fmt::format("lower={}, adjoint={}", lower, adjoint);
}

void LogMatrixDeterminant::infer(std::span<const Tensor> in, std::span<TensorMeta> out) const {
  check_square_float(name(), in[0].shape(), in[0].dtype());
  out[0] = {batch_of(in[0].shape(), 2), in[0].dtype()};
  out[1] = out[0];
}

void Lu::infer(std::span<const Tensor> in, std::span<TensorMeta> out) const {
  check_square_float(name(), in[0].shape(), in[0].dtype());
  out[0] = {in[0].shape(), in[0].dtype()};
  out[1] = {batch_of(in[0].shape(), 1), index_dtype};
}

void TridiagonalSolve::infer(std::span<const Tensor> in, std::span<TensorMeta> out) const {
  const TensorShape& sd = in[0].shape();
  const TensorShape& sb = in[1].shape();
  const DType dt = in[0].dtype();
  TF_CHECK_ARG(dt == in[1].dtype(), name(), "dtypes differ: diagonals {} and rhs {}",
               dtype_name(dt), dtype_name(in[1].dtype()));
  TF_CHECK_ARG(dt == float32 || dt == float64, name(), "expects float32 or float64, got {}",
               dtype_name(dt));
  TF_CHECK_ARG(sd.rank() >= 2 && sd[sd.rank() - 2] == 3, name(),
               "expects diagonals of shape [..., 3, M], got {}", sd.to_string());
  bool ok = sb.rank() == sd.rank();
  for (int i = 0; ok && i + 2 < sd.rank(); ++i)
    ok = sd[i] == sb[i] || !known(sd[i]) || !known(sb[i]);
  const int64_t m = sd[sd.rank() - 1];
  ok = ok && (sb[sb.rank() - 2] == m || !known(m) || !known(sb[sb.rank() - 2]));
  TF_CHECK_ARG(ok, name(),
               "diagonals {} and rhs {}: rhs must be [..., M, K] (or [..., M]) with the "
               "diagonals' batch dimensions",
               sd.to_string(), sb.to_string());
  out[0] = {sb, dt};
}

std::string TridiagonalSolve::attributes() const {
  return fmt::format("partial_pivoting={}", partial_pivoting);
}

std::string Lu::attributes() const {
  return fmt::format("output_idx_type={}", dtype_name(index_dtype));
}

// ---- gradients ----
namespace {
using Span = std::span<const Tensor>;
Tensor expand_matrix(const Tensor& x) {
  return expand_dims(expand_dims(x, -1), -1);
}
}  // namespace

// x = op(A)^-1 b: db = op(A)^-T g; dA = -db x^T (or -x db^T when adjoint), on A's triangle.
uint32_t MatrixTriangularSolve::vjp_saves() const {
  return save_input(0) | save_output(0);
}
std::vector<Tensor> MatrixTriangularSolve::vjp(Span p, Span cts, std::span<const int> argnums,
                                               Span outs) const {
  const Tensor db = linalg::triangular_solve(p[0], cts[0], lower, !adjoint);
  std::vector<Tensor> out;
  for (int k : argnums) {
    if (k == 1) {
      out.push_back(db);
      continue;
    }
    const Tensor da = adjoint ? negative(tapeflow::matmul(outs[0], db, false, true))
                              : negative(tapeflow::matmul(db, outs[0], false, true));
    out.push_back(lower ? linalg::band_part(da, -1, 0) : linalg::band_part(da, 0, -1));
  }
  return out;
}

// d log|det A| = g inv(A)^T; the sign is piecewise constant.
uint32_t LogMatrixDeterminant::vjp_saves() const {
  return save_input(0);
}
std::vector<Tensor> LogMatrixDeterminant::vjp(Span p, Span cts, std::span<const int>, Span) const {
  if (!cts[1].defined()) return {zeros_like(p[0])};
  Tensor inverse;
  try {
    inverse = linalg::inv(p[0]);
  } catch (const InvalidArgumentError& e) {
    TF_THROW(InvalidArgumentError, "slogdet",
             "its gradient at a singular matrix is not computed: it goes through the inverse, "
             "as TF's does ({})",
             e.what());
  }
  return {expand_matrix(cts[1]) * linalg::matrix_transpose(inverse)};
}

// A x = b: gb = A^-T g, the tridiagonal A^T in compact form (its superdiagonal is A's subdiagonal
// shifted left, its subdiagonal A's superdiagonal shifted right); gA = -gb x^T on the three
// diagonals: super[i] = -gb[i] . x[i + 1], main[i] = -gb[i] . x[i], sub[i] = -gb[i] . x[i - 1].
uint32_t TridiagonalSolve::vjp_saves() const {
  return save_input(0) | save_output(0);
}
std::vector<Tensor> TridiagonalSolve::vjp(Span p, Span cts, std::span<const int> argnums,
                                          Span outs) const {
  const Tensor& diags = p[0];
  const Tensor& x = outs[0];
  const int64_t m = diags.shape()[diags.rank() - 1];
  if (m == 0) {
    std::vector<Tensor> out;
    for (int k : argnums) out.push_back(zeros_like(p[k]));
    return out;
  }
  const int r = diags.rank();
  auto row = [&](int64_t i) { return squeeze(slice_axis(diags, r - 2, i, 1), {-2}); };
  const Tensor super = row(0), main = row(1), sub = row(2);
  const Tensor super_t = pad_last(slice_axis(sub, -1, 1, m - 1), 0, 1);
  const Tensor sub_t = pad_last(slice_axis(super, -1, 0, m - 1), 1, 0);
  const Tensor gb = detail::dispatch(TridiagonalSolve(partial_pivoting),
                                     {stack({super_t, main, sub_t}, -2), cts[0]});
  std::vector<Tensor> out;
  for (int k : argnums) {
    if (k == 1) {
      out.push_back(gb);
      continue;
    }
    // x shifted by one row either way (zeros past the ends).
    auto pad_rows = [](const Tensor& t, int64_t before, int64_t after) {
      std::vector<std::pair<int64_t, int64_t>> pp(t.rank(), {0, 0});
      pp[t.rank() - 2] = {before, after};
      return pad(t, pp);
    };
    const Tensor x_next = pad_rows(slice_axis(x, -2, 1, m - 1), 0, 1);
    const Tensor x_prev = pad_rows(slice_axis(x, -2, 0, m - 1), 1, 0);
    const Tensor g_super = negative(reduce_sum(gb * x_next, {-1}));
    const Tensor g_main = negative(reduce_sum(gb * x, {-1}));
    const Tensor g_sub = negative(reduce_sum(gb * x_prev, {-1}));
    out.push_back(stack({g_super, g_main, g_sub}, -2));
  }
  return out;
}

// P A = L U. With the cotangent G of the packed factors split into G_L (strictly lower) and
// G_U (upper): dA' = L^-T (tril(L^T G_L, -1) + triu(G_U U^T)) U^-T for A' = P A, and dA = P^T dA'.
uint32_t Lu::vjp_saves() const {
  return save_output(0) | save_output(1);
}
std::vector<Tensor> Lu::vjp(Span, Span cts, std::span<const int>, Span outs) const {
  const Tensor& packed = outs[0];
  const int64_t n = packed.shape()[packed.rank() - 1];
  if (!cts[0].defined()) return {zeros_like(packed)};
  const Tensor& g = cts[0];
  const Tensor l = linalg::unit_lower(packed), u = linalg::band_part(packed, 0, -1);
  const Tensor g_u = linalg::band_part(g, 0, -1);
  const Tensor g_l = g - g_u;
  const Tensor lg = tapeflow::matmul(l, g_l, true, false);
  const Tensor inner = (lg - linalg::band_part(lg, 0, -1)) +
                       linalg::band_part(tapeflow::matmul(g_u, u, false, true), 0, -1);
  const Tensor left = linalg::triangular_solve(l, inner, true, true);  // L^-T inner
  // left U^-T = (U^-1 left^T)^T
  const Tensor permuted = linalg::matrix_transpose(
      linalg::triangular_solve(u, linalg::matrix_transpose(left), false, false));
  const Tensor p = cast(one_hot(outs[1], n), packed.dtype());
  return {tapeflow::matmul(p, permuted, true, false)};
}

}  // namespace prims

}  // namespace tapeflow
