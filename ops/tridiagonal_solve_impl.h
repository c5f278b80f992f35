// One tridiagonal system solved in place (internal): Gaussian elimination with optional partial
// pivoting by row interchanges, as LAPACK's gtsv, for the CPU kernel (ops/cpu/lapack_more.cpp) and
// the CUDA kernel (ops/cuda/linalg_more.cu, one thread per system). Plain C++ callable from
// host and device code.
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define TF_TRIDIAGONAL_HD __host__ __device__
#else
#define TF_TRIDIAGONAL_HD
#endif

namespace tapeflow::detail {

// diagonals: TF's compact [3, m] layout of one system (row 0 the superdiagonal, its last entry
// ignored; row 1 the main diagonal; row 2 the subdiagonal, its first entry ignored). b: m x k,
// row-major, overwritten by the solution. scratch: 4 m elements. No singularity check: a zero
// pivot gives infinities or NaNs, as TF's kernel.
template <class T>
TF_TRIDIAGONAL_HD void tridiagonal_solve_one(const T* diagonals, T* b, int64_t m, int64_t k,
                                             bool partial_pivoting, T* scratch) {
  if (m == 0) return;
  T* d = scratch;            // main diagonal, m
  T* du = scratch + m;       // first superdiagonal, m - 1
  T* dl = scratch + 2 * m;   // subdiagonal: dl[i] = A[i + 1, i], m - 1
  T* du2 = scratch + 3 * m;  // second superdiagonal (fill from interchanges), m - 2
  for (int64_t i = 0; i < m; ++i) {
    d[i] = diagonals[m + i];
    du[i] = diagonals[i];
    dl[i] = i + 1 < m ? diagonals[2 * m + i + 1] : T(0);
    du2[i] = T(0);
  }
  for (int64_t i = 0; i + 1 < m; ++i) {
    const T ad = d[i] < T(0) ? -d[i] : d[i];
    const T al = dl[i] < T(0) ? -dl[i] : dl[i];
    if (!partial_pivoting || ad >= al) {
      // Row i + 1 -= fact * row i.
      const T fact = dl[i] / d[i];
      d[i + 1] -= fact * du[i];
      for (int64_t c = 0; c < k; ++c) b[(i + 1) * k + c] -= fact * b[i * k + c];
    } else {
      // Interchange rows i and i + 1, then eliminate: row i is (dl[i], d[i+1], du[i+1]), row
      // i + 1 becomes the old row i minus fact times it.
      const T fact = d[i] / dl[i];
      d[i] = dl[i];
      const T temp = d[i + 1];
      d[i + 1] = du[i] - fact * temp;
      if (i + 2 < m) {
        du2[i] = du[i + 1];
        du[i + 1] = -fact * du2[i];
      }
      du[i] = temp;
      for (int64_t c = 0; c < k; ++c) {
        const T top = b[i * k + c];
        b[i * k + c] = b[(i + 1) * k + c];
        b[(i + 1) * k + c] = top - fact * b[(i + 1) * k + c];
      }
    }
  }
  for (int64_t c = 0; c < k; ++c) {
    b[(m - 1) * k + c] /= d[m - 1];
    if (m > 1)
      b[(m - 2) * k + c] = (b[(m - 2) * k + c] - du[m - 2] * b[(m - 1) * k + c]) / d[m - 2];
    for (int64_t i = m - 3; i >= 0; --i)
      b[i * k + c] =
          (b[i * k + c] - du[i] * b[(i + 1) * k + c] - du2[i] * b[(i + 2) * k + c]) / d[i];
  }
}

}  // namespace tapeflow::detail
