#include "ops/linalg_decomp.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/check.h"
#include "core/error.h"
#include "ops/binary.h"
#include "ops/dispatch.h"
#include "ops/factory.h"
#include "ops/gradient_view.h"
#include "ops/helpers.h"
#include "ops/linalg.h"
#include "ops/linalg_more.h"
#include "ops/math.h"
#include "ops/movement.h"
#include "ops/reduce.h"
#include "ops/scan.h"
#include "ops/unary.h"

namespace tapeflow {

namespace {

bool known(int64_t d) {
  return d != None;
}

// float32/float64, rank >= 2 and, when `square`, square matrices.
void check_input(const char* op, const Tensor& t, bool square) {
  TF_CHECK_ARG(t.defined(), op, "the input is an undefined tensor (TF's None)");
  const DType d = t.dtype();
  TF_CHECK_ARG(d == float32 || d == float64, op,
               "does not support dtype {} (expected float32 or float64; TF's kernels do not "
               "take float16, bfloat16 or integers either)",
               dtype_name(d));
  const TensorShape& s = t.shape();
  TF_CHECK_ARG(s.rank() >= 2, op, "expects a tensor of rank at least 2 ([..., M, N]), got shape {}",
               s.to_string());
  if (square) {
    const int64_t r = s[s.rank() - 2], c = s[s.rank() - 1];
    TF_CHECK_ARG(r == c || !known(r) || !known(c), op, "expects square matrices, got shape {}",
                 s.to_string());
  }
}

TensorShape batch_of(const TensorShape& s) {
  TensorShape b;
  for (int i = 0; i + 2 < s.rank(); ++i) b.push_back(s[i]);
  return b;
}

TensorShape with(TensorShape s, std::initializer_list<int64_t> tail) {
  for (int64_t d : tail) s.push_back(d);
  return s;
}

int64_t min_dim(int64_t a, int64_t b) {
  return known(a) && known(b) ? std::min(a, b) : None;
}

// Swaps the last two dimensions.
Tensor mT(const Tensor& x) {
  std::vector<int> perm(x.rank());
  for (int i = 0; i < x.rank(); ++i) perm[i] = i;
  std::swap(perm[x.rank() - 1], perm[x.rank() - 2]);
  return transpose(x, perm);
}

// Row and column numbers (from 1) of every element of x, in x's dtype and on its device (built
// from x so that they follow it onto any device and into traces).
Tensor row_numbers(const Tensor& x) {
  return cumsum(ones_like(x), -2);
}
Tensor col_numbers(const Tensor& x) {
  return cumsum(ones_like(x), -1);
}

// TF's band_part(x, -1, 0) and band_part(x, 0, -1).
Tensor lower_part(const Tensor& x) {
  return where(greater_equal(row_numbers(x), col_numbers(x)), x, zeros_like(x));
}
// The identity of x's shape (square matrices).
Tensor eye_like(const Tensor& x) {
  return cast(equal(row_numbers(x), col_numbers(x)), x.dtype());
}
// [..., n] -> [..., n, n] with v on the diagonal.
Tensor matrix_diag(const Tensor& v) {
  const Tensor col = expand_dims(v, -1);
  return col * eye_like(col * expand_dims(v, -2));
}
// TF's symmetrisation of a gradient for ops that read only the lower triangle: the strict lower
// part of g + g^T, and g's diagonal.
Tensor lower_gradient(const Tensor& g) {
  const Tensor sym = g + mT(g);
  const Tensor rows = row_numbers(g), cols = col_numbers(g);
  return where(equal(rows, cols), g, where(greater(rows, cols), sym, zeros_like(g)));
}

// TF's _SafeReciprocal: x / (x^2 + 1e-20), 0 (not inf) at x = 0 (equal eigen- or singular
// values).
Tensor safe_reciprocal(const Tensor& x) {
  return x * math::reciprocal(x * x + 1e-20);
}

// x r^{-T} for an upper-triangular r (TF's _TriangularSolve).
Tensor solve_right_transposed(const Tensor& x, const Tensor& r) {
  return mT(linalg::triangular_solve(r, mT(x), /*lower=*/false));
}

}  // namespace

namespace prims {

void Cholesky::infer(std::span<const Tensor> in, std::span<TensorMeta> out) const {
  check_input(name(), in[0], true);
  out[0] = {in[0].shape(), in[0].dtype()};
}

void SelfAdjointEig::infer(std::span<const Tensor> in, std::span<TensorMeta> out) const {
  check_input(name(), in[0], true);
  const TensorShape& s = in[0].shape();
  int64_t n = s[s.rank() - 1];
  if (!known(n)) n = s[s.rank() - 2];
  out[0] = {with(batch_of(s), {n}), in[0].dtype()};
  if (compute_v) out[1] = {with(batch_of(s), {n, n}), in[0].dtype()};
}
std::string SelfAdjointEig::attributes() const {
  return fmt::format("compute_v={}", compute_v);
}

void Qr::infer(std::span<const Tensor> in, std::span<TensorMeta> out) const {
  check_input(name(), in[0], false);
  const TensorShape& s = in[0].shape();
  const int64_t m = s[s.rank() - 2], n = s[s.rank() - 1];
  const int64_t k = full_matrices ? m : min_dim(m, n);
  out[0] = {with(batch_of(s), {m, k}), in[0].dtype()};
  out[1] = {with(batch_of(s), {k, n}), in[0].dtype()};
}
std::string Qr::attributes() const {
  return fmt::format("full_matrices={}", full_matrices);
}

void Svd::infer(std::span<const Tensor> in, std::span<TensorMeta> out) const {
  check_input(name(), in[0], false);
  const TensorShape& s = in[0].shape();
  const int64_t m = s[s.rank() - 2], n = s[s.rank() - 1], k = min_dim(m, n);
  out[0] = {with(batch_of(s), {k}), in[0].dtype()};
  if (compute_uv) {
    out[1] = {with(batch_of(s), {m, full_matrices ? m : k}), in[0].dtype()};
    out[2] = {with(batch_of(s), {n, full_matrices ? n : k}), in[0].dtype()};
  }
}
std::string Svd::attributes() const {
  return fmt::format("full_matrices={}, compute_uv={}", full_matrices, compute_uv);
}

}  // namespace prims

namespace linalg {

Tensor cholesky(const Tensor& a) {
  check_input("cholesky", a, true);
  return detail::dispatch(prims::Cholesky{}, {a});
}

Tensor cholesky_solve(const Tensor& chol, const Tensor& rhs) {
  const char* op = "cholesky_solve";
  check_input(op, chol, true);
  TF_CHECK_ARG(rhs.defined(), op, "the right-hand side is an undefined tensor (TF's None)");
  TF_CHECK_ARG(rhs.dtype() == chol.dtype(), op, "dtypes differ: chol is {}, rhs is {}",
               dtype_name(chol.dtype()), dtype_name(rhs.dtype()));
  const TensorShape &sc = chol.shape(), &sr = rhs.shape();
  bool ok = sr.rank() == sc.rank();
  for (int i = 0; ok && i + 1 < sc.rank(); ++i)
    ok = sc[i] == sr[i] || !known(sc[i]) || !known(sr[i]);
  TF_CHECK_ARG(ok, op,
               "chol is {} and rhs is {}: rhs must be [..., n, k] with chol's batch "
               "dimensions and n rows",
               sc.to_string(), sr.to_string());
  // chol chol^T x = rhs: forward, then backward substitution (as TF).
  return triangular_solve(chol, triangular_solve(chol, rhs, /*lower=*/true), /*lower=*/true,
                          /*adjoint=*/true);
}

namespace {
Tensor logdet_body(const Tensor& a) {
  check_input("logdet", a, true);
  return 2.0 * reduce_sum(log(diag_part(cholesky(a))), -1);
}
}  // namespace

Tensor logdet(const Tensor& a) {
  return detail::naming_errors("logdet", [&] { return logdet_body(a); });
}

EighResult eigh(const Tensor& a) {
  check_input("eigh", a, true);
  auto outs = detail::dispatch_multi(prims::SelfAdjointEig(true), std::vector<Tensor>{a});
  return {outs[0], outs[1]};
}

Tensor eigvalsh(const Tensor& a) {
  check_input("eigvalsh", a, true);
  return detail::dispatch(prims::SelfAdjointEig(false), {a});
}

QrResult qr(const Tensor& a, bool full_matrices) {
  check_input("qr", a, false);
  auto outs = detail::dispatch_multi(prims::Qr(full_matrices), std::vector<Tensor>{a});
  return {outs[0], outs[1]};
}

SvdResult svd(const Tensor& a, bool full_matrices, bool compute_uv) {
  check_input("svd", a, false);
  auto outs = detail::dispatch_multi(prims::Svd(full_matrices, compute_uv), std::vector<Tensor>{a});
  if (!compute_uv) return {outs[0], Tensor(), Tensor()};
  return {outs[0], outs[1], outs[2]};
}

namespace {

// pinv's gradient. The output is input 0, p = pinv(a) from the SVD, as a view (no kernel), and
// the vjp gives a (input 1) the Moore-Penrose derivative instead of the SVD's, which drops the
// terms of tied singular values (2 I, any orthogonal matrix): for the cotangent G of p,
//   da = -p^T G p^T + (I - a p) G^T p p^T + p^T p G^T (I - p a)
// (Golub and Pereyra, 1973; exact where the rank does not change, as pinv's own continuity).
// Input 0 gets no gradient, so none flows back through the SVD. Built from matmuls of a and p,
// the vjp is itself differentiable: a tape around it sees p depend on a through this op.
struct PinvGradient final : detail::GradientView<PinvGradient> {
  const char* name() const override { return "pinv_gradient"; }
  Tensor gradient(const Tensor& a, const Tensor& p, const Tensor& g) const {
    const Tensor first = -tapeflow::matmul(tapeflow::matmul(p, g, true, false), p, false, true);
    const Tensor w = tapeflow::matmul(tapeflow::matmul(g, p, true, false), p, false, true);
    const Tensor second = w - tapeflow::matmul(a, tapeflow::matmul(p, w));
    const Tensor y = tapeflow::matmul(tapeflow::matmul(p, p, true, false), g, false, true);
    const Tensor third = y - tapeflow::matmul(tapeflow::matmul(y, p), a);
    return first + second + third;
  }
};

// The machine epsilon of a's dtype (float32's for float32, else float64's), which the default
// rcond of pinv and of lstsq(fast=false) scale.
double epsilon_of(const Tensor& a) {
  return a.dtype() == float32 ? std::numeric_limits<float>::epsilon()
                              : std::numeric_limits<double>::epsilon();
}

Tensor pinv_body(const Tensor& a, double rcond) {
  check_input("pinv", a, false);
  const TensorShape& sa = a.shape();
  const int64_t m = sa[sa.rank() - 2], n = sa[sa.rank() - 1];
  TF_CHECK_ARG(known(m) && known(n), "pinv", "needs known matrix dimensions, got shape {}",
               sa.to_string());
  if (rcond < 0) rcond = 10.0 * static_cast<double>(std::max(m, n)) * epsilon_of(a);
  const SvdResult d = svd(a, false, true);
  // Singular values at most rcond * max(s) count as zero: 1 / inf = 0 drops them.
  const Tensor cutoff = rcond * reduce_max(d.s, -1, true);
  const Tensor inf = zeros_like(d.s) + std::numeric_limits<double>::infinity();
  const Tensor s = where(greater(d.s, cutoff), d.s, inf);
  const Tensor p = tapeflow::matmul(d.v / expand_dims(s, -2), d.u, false, true);
  return detail::dispatch(PinvGradient(), {p, a});
}
}  // namespace

Tensor matrix_rank(const Tensor& a, std::optional<double> tol) {
  const char* op = "matrix_rank";
  check_input(op, a, false);
  const TensorShape& sa = a.shape();
  const int64_t m = sa[sa.rank() - 2], n = sa[sa.rank() - 1];
  TF_CHECK_ARG(known(m) && known(n), op, "needs known matrix dimensions, got shape {}",
               sa.to_string());
  TF_CHECK_ARG(!tol || *tol >= 0, op, "tol must be non-negative, got {}", tol.value_or(0));
  const Tensor s = svd(a, false, false).s;
  const Tensor cutoff =
      tol ? detail::adopt_dtype(Tensor(*tol), s.dtype(), op)
          : static_cast<double>(std::max(m, n)) * epsilon_of(a) * reduce_max(s, -1, true);
  return reduce_sum(cast(greater(s, cutoff), int64), -1);
}

Tensor pinv(const Tensor& a, double rcond) {
  return detail::naming_errors("pinv", [&] { return pinv_body(a, rcond); });
}

namespace {
Tensor lstsq_body(const Tensor& a, const Tensor& b, double l2_regularizer, bool fast) {
  const char* op = "lstsq";
  check_input(op, a, false);
  TF_CHECK_ARG(b.defined(), op, "the right-hand side is an undefined tensor (TF's None)");
  TF_CHECK_ARG(b.dtype() == a.dtype(), op, "dtypes differ: matrix is {}, rhs is {}",
               dtype_name(a.dtype()), dtype_name(b.dtype()));
  const TensorShape &sa = a.shape(), &sb = b.shape();
  bool ok = sb.rank() == sa.rank();
  for (int i = 0; ok && i + 1 < sa.rank(); ++i)
    ok = sa[i] == sb[i] || !known(sa[i]) || !known(sb[i]);
  TF_CHECK_ARG(ok, op,
               "matrix is {} and rhs is {}: rhs must be [..., m, k] with the matrix's "
               "batch dimensions and m rows",
               sa.to_string(), sb.to_string());
  TF_CHECK_ARG(l2_regularizer >= 0, op, "l2_regularizer must be >= 0, got {}", l2_regularizer);
  const int64_t m = sa[sa.rank() - 2], n = sa[sa.rank() - 1];
  TF_CHECK_ARG(known(m) && known(n), op, "needs known matrix dimensions, got shape {}",
               sa.to_string());
  if (!fast) {
    // The minimum-norm least-squares solution through the pseudo-inverse: singular values at
    // most max(m, n) * epsilon * max(s) count as zero (the rank the complete orthogonal
    // factorisation of TF's CPU kernel, Eigen's, finds with its default threshold). With a
    // regulariser, the same for the stacked system [a; sqrt(l2) I] x = [b; 0], whose solution
    // is the regularised one and whose matrix has full column rank.
    const double rcond = static_cast<double>(std::max(m, n)) * epsilon_of(a);
    if (l2_regularizer == 0) return tapeflow::matmul(pinv(a, rcond), b);
    // I [..., n, n] and the zero rows [..., n, k] take their (possibly open) batch from a and
    // b through broadcasting column sums, whose values are never read (any m, 0 included).
    const Tensor col = mT(reduce_sum(a, {-2}, true));  // [..., n, 1]
    const Tensor eye = eye_like(col * mT(col));
    const Tensor stacked = concat({a, std::sqrt(l2_regularizer) * eye}, -2);
    const Tensor rhs = concat({b, zeros_like(col * reduce_sum(b, {-2}, true))}, -2);
    return tapeflow::matmul(pinv(stacked, rcond), rhs);
  }
  if (m >= n) {
    Tensor gram = tapeflow::matmul(a, a, true, false);
    if (l2_regularizer > 0) gram = gram + l2_regularizer * eye_like(gram);
    return cholesky_solve(cholesky(gram), tapeflow::matmul(a, b, true, false));
  }
  Tensor gram = tapeflow::matmul(a, a, false, true);
  if (l2_regularizer > 0) gram = gram + l2_regularizer * eye_like(gram);
  return tapeflow::matmul(a, cholesky_solve(cholesky(gram), b), true, false);
}
}  // namespace

Tensor lstsq(const Tensor& a, const Tensor& b, double l2_regularizer, bool fast) {
  return detail::naming_errors("lstsq", [&] { return lstsq_body(a, b, l2_regularizer, fast); });
}

}  // namespace linalg

}  // namespace tapeflow

// ---- gradients (TF's linalg_grad.py formulas) ----
namespace tapeflow::prims {

namespace {
using Span = std::span<const Tensor>;

// The gradient of qr for square and tall matrices (m >= n, reduced).
Tensor qr_grad_square_or_tall(const Tensor& q, const Tensor& r, const Tensor& dq,
                              const Tensor& dr) {
  const Tensor qdq = tapeflow::matmul(q, dq, true, false);
  const Tensor qdq_ = qdq - mT(qdq);
  const Tensor rdr = tapeflow::matmul(r, dr, false, true);
  const Tensor rdr_ = rdr - mT(rdr);
  const Tensor tril = lower_part(qdq_ + rdr_);
  const Tensor grad_a = tapeflow::matmul(q, dr + solve_right_transposed(tril, r));
  const Tensor grad_b = solve_right_transposed(dq - tapeflow::matmul(q, qdq), r);
  return grad_a + grad_b;
}
}  // namespace

// a = L L^T: da = sym(L^{-T} phi(L^T gL) L^{-1}), phi = the lower triangle with the diagonal
// halved.
uint32_t Cholesky::vjp_saves() const {
  return save_output(0);
}
std::vector<Tensor> Cholesky::vjp(Span, Span cts, std::span<const int>, Span outs) const {
  const Tensor& l = outs[0];
  const Tensor l_inv = linalg::triangular_solve(l, eye_like(l), /*lower=*/true);  // as TF
  Tensor middle = tapeflow::matmul(l, cts[0], true, false);
  const Tensor rows = row_numbers(middle), cols = col_numbers(middle);
  middle = where(equal(rows, cols), 0.5 * middle,
                 where(greater(rows, cols), middle, zeros_like(middle)));
  const Tensor g = tapeflow::matmul(tapeflow::matmul(l_inv, middle, true, false), l_inv);
  return {0.5 * (g + mT(g))};
}

// a = V diag(e) V^T: da = V (diag(ge) + F o (V^T gV)) V^T with F_ij = 1 / (e_j - e_i) off the
// diagonal (TF's safe reciprocal: 0 for equal eigenvalues), then folded onto the lower triangle
// (the part the op reads). eigvalsh's gradient recomputes the eigenvectors.
bool SelfAdjointEig::vjp_accepts_undefined_cotangents() const {
  return true;
}
uint32_t SelfAdjointEig::vjp_saves() const {
  return compute_v ? save_output(0) | save_output(1) : save_input(0);
}
std::vector<Tensor> SelfAdjointEig::vjp(Span p, Span cts, std::span<const int>, Span outs) const {
  Tensor e, v;
  if (compute_v) {
    e = outs[0];
    v = outs[1];
  } else {
    const auto d = linalg::eigh(p[0]);
    e = d.eigenvalues;
    v = d.eigenvectors;
  }
  Tensor inner = cts[0].defined() ? matrix_diag(cts[0]) : zeros_like(v);
  if (compute_v && cts[1].defined()) {
    const Tensor diff = expand_dims(e, -2) - expand_dims(e, -1);
    const Tensor f =
        where(equal(row_numbers(diff), col_numbers(diff)), zeros_like(diff), safe_reciprocal(diff));
    inner = inner + f * tapeflow::matmul(v, cts[1], true, false);
  }
  return {lower_gradient(tapeflow::matmul(v, tapeflow::matmul(inner, v, false, true)))};
}

// TF's _QrGrad: square and tall matrices directly; wide ones (m < n) split a = [x, y] with x
// square: dy = Q dR_y, dx = the square gradient with dQ + y dR_y^T.
uint32_t Qr::vjp_saves() const {
  return save_input(0) | save_output(0) | save_output(1);
}
std::vector<Tensor> Qr::vjp(Span p, Span cts, std::span<const int>, Span outs) const {
  const Tensor &a = p[0], &q = outs[0], &r = outs[1];
  const TensorShape& s = a.shape();
  const int64_t m = s[s.rank() - 2], n = s[s.rank() - 1];
  if (!known(m) || !known(n) || (full_matrices && m > n))
    TF_THROW(UnimplementedError, "qr",
             "the gradient is not implemented for matrices with more rows than columns and "
             "full_matrices=true, or unknown dimensions (input of shape {}), as TF's",
             s.to_string());
  const Tensor &dq = cts[0], &dr = cts[1];
  if (m >= n) return {qr_grad_square_or_tall(q, r, dq, dr)};
  const int rank = s.rank();
  auto cols = [&](const Tensor& t, int64_t begin, int64_t size) {
    std::vector<int64_t> b(rank, 0), sz(rank, -1);
    b[rank - 1] = begin;
    sz[rank - 1] = size;
    return slice(t, b, sz);
  };
  const Tensor y = cols(a, m, -1), u = cols(r, 0, m);
  const Tensor dv = cols(dr, m, -1), du = cols(dr, 0, m);
  const Tensor dy = tapeflow::matmul(q, dv);
  const Tensor dx = qr_grad_square_or_tall(q, u, dq + tapeflow::matmul(y, dv, false, true), du);
  return {concat({dx, dy}, -1)};
}

// TF's _SvdGrad. compute_uv=false: da = U diag(gs) V^T. Otherwise, with m <= n (a tall matrix
// is handled through its transpose), F_ij = 1 / (s_j^2 - s_i^2) off the diagonal:
//   da = U (diag(gs) + (F o U^T gU + its transpose) S + S (F o V1^T gV1 + its transpose)) V1^T
//        + U S^{-1} (gV1^T - gV1^T V1 V1^T [- V1^T gV2 V2^T when full]) for m < n.
bool Svd::vjp_accepts_undefined_cotangents() const {
  return true;
}
uint32_t Svd::vjp_saves() const {
  return compute_uv ? save_input(0) | save_output(0) | save_output(1) | save_output(2)
                    : save_input(0);
}
std::vector<Tensor> Svd::vjp(Span p, Span cts, std::span<const int>, Span outs) const {
  const Tensor& a = p[0];
  const TensorShape& shape = a.shape();
  int64_t m = shape[shape.rank() - 2], n = shape[shape.rank() - 1];
  const Tensor gs = cts[0].defined() ? cts[0] : Tensor();
  if (!compute_uv) {
    const auto d = linalg::svd(a, false, true);
    return {tapeflow::matmul(d.u, tapeflow::matmul(matrix_diag(gs), d.v, false, true))};
  }
  if (!known(m) || !known(n) || (full_matrices && std::abs(m - n) > 1))
    TF_THROW(UnimplementedError, "svd",
             "the gradient is not implemented for full_matrices=true with |m - n| > 1 or for "
             "unknown dimensions (input of shape {}), as TF's",
             shape.to_string());
  Tensor s = outs[0], u = outs[1], v = outs[2];
  auto or_zeros = [](const Tensor& g, const Tensor& like) {
    return g.defined() ? g : zeros_like(like);
  };
  Tensor gu = or_zeros(cts[1], u), gv = or_zeros(cts[2], v);
  const Tensor grad_s = or_zeros(gs, s);
  const bool use_adjoint = m > n;
  if (use_adjoint) {
    std::swap(m, n);
    std::swap(u, v);
    std::swap(gu, gv);
  }
  const int rank = shape.rank();
  auto cols = [&](const Tensor& t, int64_t begin, int64_t size) {
    std::vector<int64_t> b(rank, 0), sz(rank, -1);
    b[rank - 1] = begin;
    sz[rank - 1] = size;
    return slice(t, b, sz);
  };
  const Tensor s_mat = matrix_diag(s);
  const Tensor s2 = s * s;
  const Tensor diff = expand_dims(s2, -2) - expand_dims(s2, -1);
  const Tensor f =
      where(equal(row_numbers(diff), col_numbers(diff)), zeros_like(diff), safe_reciprocal(diff));
  const Tensor v1 = cols(v, 0, m), gv1 = cols(gv, 0, m);
  const Tensor f_u = f * tapeflow::matmul(u, gu, true, false);
  const Tensor f_v = f * tapeflow::matmul(v1, gv1, true, false);
  const Tensor term1_nouv = matrix_diag(grad_s) + tapeflow::matmul(f_u + mT(f_u), s_mat) +
                            tapeflow::matmul(s_mat, f_v + mT(f_v));
  Tensor grad = tapeflow::matmul(u, tapeflow::matmul(term1_nouv, v1, false, true));
  if (m != n) {
    const Tensor gv1t = mT(gv1);
    Tensor term2_nous = gv1t - tapeflow::matmul(tapeflow::matmul(gv1t, v1), v1, false, true);
    if (full_matrices) {
      const Tensor v2 = cols(v, m, n - m), gv2 = cols(gv, m, n - m);
      term2_nous =
          term2_nous - tapeflow::matmul(tapeflow::matmul(v1, gv2, true, false), v2, false, true);
    }
    const Tensor u_s_inv = tapeflow::matmul(u, matrix_diag(safe_reciprocal(s)));
    grad = grad + tapeflow::matmul(u_s_inv, term2_nous);
  }
  return {use_adjoint ? mT(grad) : grad};
}

}  // namespace tapeflow::prims
