// sqrtm and its gradient on the host (ops/sqrtm.h), in float64 for both dtypes, one matrix per
// task over the thread pool. Both work on the row-major buffers read as column-major, i.e. on
// the transposes: sqrtm(a^T) = sqrtm(a)^T, and the gradient's equation r^T x + x r^T = g keeps
// its form under transposition, so neither needs a copy into another layout.
//
// sqrtm (Higham, "Computing real square roots of a real matrix", 1987; TF's and Eigen's
// method): LAPACK's dgees gives a = z t z^T with t quasi-upper-triangular (1x1 blocks for real
// eigenvalues, standardized 2x2 blocks for complex pairs); the root s of t has the same block
// structure: sqrt of each 1x1 block, the real root alpha I + (t_jj - theta I) / (2 alpha) of a
// 2x2 block (eigenvalues theta +- i mu, alpha^2 = (theta + |lambda|) / 2), and the blocks above
// from s_ii x + x s_jj = t_ij - sum_k s_ik s_kj (a 1x1 to 4x4 linear system each), column by
// column, bottom up. The root is z s z^T.
//
// The gradient: with r = z s z^T (dgees of r), r^T x + x r^T = g becomes
// s^T y + y s^T = z^T g z, which LAPACK's dtrsyl solves on the Schur form; x = z y z^T.
#include "ops/sqrtm.h"

#include <cblas.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "core/check.h"
#include "ops/cpu/lapack_batch.h"

extern "C" {
// LAPACK (exported by OpenBLAS). Trailing size_t: Fortran's hidden lengths of the char args.
void dgees_(const char* jobvs, const char* sort, int (*select)(const double*, const double*),
            const int* n, double* a, const int* lda, int* sdim, double* wr, double* wi, double* vs,
            const int* ldvs, double* work, const int* lwork, int* bwork, int* info, size_t, size_t);
void dtrsyl_(const char* trana, const char* tranb, const int* isgn, const int* m, const int* n,
             const double* a, const int* lda, const double* b, const int* ldb, double* c,
             const int* ldc, double* scale, int* info, size_t, size_t);
}

namespace tapeflow::detail {

namespace {

// Column-major n x n views.
struct Mat {
  double* p;
  int n;
  double& operator()(int i, int j) const { return p[i + static_cast<int64_t>(j) * n]; }
};

// The real Schur form of a (overwritten by t), z its orthogonal factor; returns dgees' info.
int schur(int n, double* a, double* z) {
  int sdim = 0, info = 0, lwork = -1;
  std::vector<double> wr(static_cast<size_t>(n)), wi(static_cast<size_t>(n));
  std::vector<int> bwork(static_cast<size_t>(n));
  double query = 0;
  dgees_("V", "N", nullptr, &n, a, &n, &sdim, wr.data(), wi.data(), z, &n, &query, &lwork,
         bwork.data(), &info, 1, 1);
  if (info != 0) return info;
  lwork = std::max(static_cast<int>(query), 3 * n);
  std::vector<double> work(static_cast<size_t>(lwork));
  dgees_("V", "N", nullptr, &n, a, &n, &sdim, wr.data(), wi.data(), z, &n, work.data(), &lwork,
         bwork.data(), &info, 1, 1);
  return info;
}

// Solves a x + x b = c for x (p x p, q x q and p x q blocks, p and q 1 or 2) by Gaussian
// elimination with partial pivoting on the (p q) x (p q) Kronecker system; a zero pivot gives
// inf or NaN (no root exists there), as TF's.
void small_sylvester(const double* a, int p, const double* b, int q, double* c) {
  const int m = p * q;
  double k[4][5] = {};
  for (int col = 0; col < q; ++col)
    for (int r = 0; r < p; ++r) {
      const int row = r + col * p;
      for (int t = 0; t < p; ++t) k[row][t + col * p] += a[r + t * p];
      for (int t = 0; t < q; ++t) k[row][r + t * p] += b[t + col * q];
      k[row][m] = c[row];
    }
  for (int i = 0; i < m; ++i) {
    int best = i;
    for (int r = i + 1; r < m; ++r)
      if (std::abs(k[r][i]) > std::abs(k[best][i])) best = r;
    if (best != i)
      for (int t = 0; t <= m; ++t) std::swap(k[i][t], k[best][t]);
    for (int r = i + 1; r < m; ++r) {
      const double f = k[r][i] / k[i][i];
      for (int t = i; t <= m; ++t) k[r][t] -= f * k[i][t];
    }
  }
  for (int i = m - 1; i >= 0; --i) {
    double v = k[i][m];
    for (int t = i + 1; t < m; ++t) v -= k[i][t] * c[t];
    c[i] = v / k[i][i];
  }
}

// s = the real square root of the quasi-upper-triangular t (both n x n, column-major).
void sqrt_quasi_triangular(int n, const double* tp, double* sp) {
  const Mat t{const_cast<double*>(tp), n}, s{sp, n};
  std::memset(sp, 0, sizeof(double) * static_cast<size_t>(n) * static_cast<size_t>(n));
  std::vector<int> start, size;
  for (int i = 0; i < n;) {
    const int w = (i + 1 < n && t(i + 1, i) != 0.0) ? 2 : 1;
    start.push_back(i);
    size.push_back(w);
    i += w;
  }
  const int nb = static_cast<int>(start.size());
  for (int jb = 0; jb < nb; ++jb) {
    const int j = start[jb], q = size[jb];
    if (q == 1) {
      s(j, j) = std::sqrt(t(j, j));  // NaN for a negative eigenvalue, as TF's
    } else {
      const double theta = (t(j, j) + t(j + 1, j + 1)) / 2;
      const double det = t(j, j) * t(j + 1, j + 1) - t(j, j + 1) * t(j + 1, j);
      const double alpha = std::sqrt((theta + std::sqrt(det)) / 2);
      for (int r = 0; r < 2; ++r)
        for (int c = 0; c < 2; ++c)
          s(j + r, j + c) =
              (r == c ? alpha : 0.0) + (t(j + r, j + c) - (r == c ? theta : 0.0)) / (2 * alpha);
    }
    for (int ib = jb - 1; ib >= 0; --ib) {
      const int i = start[ib], p = size[ib];
      double rhs[4], a[4], b[4];
      for (int c = 0; c < q; ++c)
        for (int r = 0; r < p; ++r) {
          double v = t(i + r, j + c);
          for (int k = i + p; k < j; ++k) v -= s(i + r, k) * s(k, j + c);
          rhs[r + c * p] = v;
        }
      for (int c = 0; c < p; ++c)
        for (int r = 0; r < p; ++r) a[r + c * p] = s(i + r, i + c);
      for (int c = 0; c < q; ++c)
        for (int r = 0; r < q; ++r) b[r + c * q] = s(j + r, j + c);
      small_sylvester(a, p, b, q, rhs);
      for (int c = 0; c < q; ++c)
        for (int r = 0; r < p; ++r) s(i + r, j + c) = rhs[r + c * p];
    }
  }
}

// out = x * y * x^T (column-major n x n; tmp: n x n scratch).
void congruence(int n, const double* x, const double* y, double* tmp, double* out,
                bool transpose_first) {
  // transpose_first: out = x^T * y * x.
  cblas_dgemm(CblasColMajor, transpose_first ? CblasTrans : CblasNoTrans, CblasNoTrans, n, n, n,
              1.0, x, n, y, n, 0.0, tmp, n);
  cblas_dgemm(CblasColMajor, CblasNoTrans, transpose_first ? CblasNoTrans : CblasTrans, n, n, n,
              1.0, tmp, n, x, n, 0.0, out, n);
}

// A matrix holding a NaN or an infinity has a NaN root and gradient (LAPACK never sees it):
// fills `result` with NaN and returns true for one.
bool nan_unless_finite(const std::vector<double>& in, double* result) {
  for (double v : in)
    if (!std::isfinite(v)) {
      std::fill(result, result + in.size(), std::numeric_limits<double>::quiet_NaN());
      return true;
    }
  return false;
}

// Runs fn(n, inputs, result) for each n x n matrix of the batch (the inputs' b-th matrices
// copied into float64 buffers, float32 converted; result written back in the dtype), over the
// thread pool; a nonzero info from fn (dgees' failure) raises for the first such matrix.
template <class F>
void for_each_matrix_f64(const char* op, DType dtype, const TensorShape& shape,
                         std::vector<const void*> ins, void* out, F&& fn) {
  int64_t batches = 1;
  for (int i = 0; i + 2 < shape.rank(); ++i) batches *= shape[i];
  const int64_t n64 = shape[-1];
  TF_CHECK_T(UnimplementedError, n64 <= 46340, op,
             "matrices of order {} exceed LAPACK's 32-bit sizes", n64);
  const int n = static_cast<int>(n64);
  const size_t nn = static_cast<size_t>(n) * static_cast<size_t>(n);
  if (n == 0 || batches == 0) return;
  const auto failed = for_each_matrix(batches, [&](int64_t b) {
    std::vector<std::vector<double>> in(ins.size(), std::vector<double>(nn));
    for (size_t k = 0; k < ins.size(); ++k) {
      if (dtype == float64) {
        std::memcpy(in[k].data(), static_cast<const double*>(ins[k]) + b * nn, nn * sizeof(double));
      } else {
        const float* src = static_cast<const float*>(ins[k]) + b * nn;
        for (size_t e = 0; e < nn; ++e) in[k][e] = src[e];
      }
    }
    std::vector<double> result(nn);
    const int info = fn(n, in, result.data());
    if (dtype == float64) {
      std::memcpy(static_cast<double*>(out) + b * nn, result.data(), nn * sizeof(double));
    } else {
      float* dst = static_cast<float*>(out) + b * nn;
      for (size_t e = 0; e < nn; ++e) dst[e] = static_cast<float>(result[e]);
    }
    return info;
  });
  if (failed.first >= 0)
    TF_THROW(InvalidArgumentError, op,
             "LAPACK's dgees (the Schur decomposition) did not converge for matrix {} of the "
             "batch of {} {}x{} matrices (info {})",
             failed.first, batches, n, n, failed.second);
}

}  // namespace

void sqrtm_host(DType dtype, const TensorShape& shape, const void* a, void* out) {
  for_each_matrix_f64("sqrtm", dtype, shape, {a}, out,
                      [](int m, std::vector<std::vector<double>>& in, double* result) {
                        if (nan_unless_finite(in[0], result)) return 0;
                        const size_t nn = in[0].size();
                        std::vector<double> z(nn), s(nn), tmp(nn);
                        const int info = schur(m, in[0].data(), z.data());
                        if (info != 0) return info;
                        sqrt_quasi_triangular(m, in[0].data(), s.data());
                        congruence(m, z.data(), s.data(), tmp.data(), result, false);
                        return 0;
                      });
}

void sqrtm_grad_host(DType dtype, const TensorShape& shape, const void* r, const void* g,
                     void* out) {
  for_each_matrix_f64("sqrtm_grad", dtype, shape, {r, g}, out,
                      [](int m, std::vector<std::vector<double>>& in, double* result) {
                        if (nan_unless_finite(in[0], result)) return 0;
                        const size_t nn = in[0].size();
                        std::vector<double> z(nn), c(nn), tmp(nn);
                        const int info = schur(m, in[0].data(), z.data());  // in[0] becomes s
                        if (info != 0) return info;
                        congruence(m, z.data(), in[1].data(), tmp.data(), c.data(),
                                   true);  // z^T g z
                        const int isgn = 1;
                        double scale = 1;
                        int sinfo = 0;
                        // s^T y + y s^T = scale c; info 1 (s and -s share an eigenvalue: a singular
                        // root) means LAPACK perturbed the system, which gives large values where
                        // TF's solve raises.
                        dtrsyl_("T", "T", &isgn, &m, &m, in[0].data(), &m, in[0].data(), &m,
                                c.data(), &m, &scale, &sinfo, 1, 1);
                        if (scale != 1.0)
                          for (double& v : c) v /= scale;
                        congruence(m, z.data(), c.data(), tmp.data(), result, false);  // z y z^T
                        return 0;
                      });
}

}  // namespace tapeflow::detail

namespace tapeflow::prims {

void MatrixSquareRoot::eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const {
  detail::sqrtm_host(in[0].dtype(), in[0].shape(), in[0].raw_data(), out[0].raw_data());
}

void MatrixSquareRootGrad::eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const {
  detail::sqrtm_grad_host(in[0].dtype(), in[0].shape(), in[0].raw_data(), in[1].raw_data(),
                          out[0].raw_data());
}

}  // namespace tapeflow::prims
