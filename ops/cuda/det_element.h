// The determinant's product of U's diagonal as parts that combine in any order (the CPU's loop
// in ops/cpu/lapack.cpp and the CUDA determinant kernels, ops/cuda/linalg_kernels.cu): a float64
// mantissa in [0.5, 1) with its own exponent, so that no partial product overflows or
// underflows, and the sign of the pivots' row swaps. One thread per matrix pushes every diagonal
// entry into one part; for a large matrix each thread of a block pushes a strided share and the
// block combines the parts in a tree. The functions are __host__ __device__ and free of CUDA
// headers, so the CPU suite checks that the tree gives the sequential product
// (tests/ops/test_linalg.cpp).
#pragma once

#include <cmath>
#include <cstdint>

#ifdef __CUDACC__
#define TF_DET_HD __host__ __device__ __forceinline__
#else
#define TF_DET_HD inline
#endif

namespace tapeflow::detail {

struct DetPart {
  double mant;  // 0.5 <= |mant| < 1, or 0, inf or NaN
  long long ex;
  bool negative;  // an odd number of row swaps
};

TF_DET_HD DetPart det_identity() {
  return DetPart{1.0, 0, false};
}

// p times one diagonal entry u; `swapped`: the entry's row was swapped (ipiv[i] != i + 1).
TF_DET_HD DetPart det_push(DetPart p, double u, bool swapped) {
  int e = 0;
  p.mant = frexp(p.mant * u, &e);
  p.ex += e;
  p.negative = p.negative != swapped;
  return p;
}

TF_DET_HD DetPart det_combine(DetPart a, DetPart b) {
  int e = 0;
  DetPart r;
  r.mant = frexp(a.mant * b.mant, &e);
  r.ex = a.ex + b.ex + e;
  r.negative = a.negative != b.negative;
  return r;
}

// The determinant: mant * 2^ex with the permutation's sign (the exponent clamped so that ldexp
// takes an int; beyond +-100000 the result is inf or 0 anyway).
TF_DET_HD double det_finish(DetPart p) {
  const long long clamped = p.ex < -100000 ? -100000 : (p.ex > 100000 ? 100000 : p.ex);
  const double d = ldexp(p.mant, static_cast<int>(clamped));
  return p.negative ? -d : d;
}

// A matrix's determinant: NaN where its input held a NaN (whatever pivots getrf chose around
// it), 0 for an exact zero pivot (getrf's info > 0), else the product `p`.
TF_DET_HD double det_value(bool has_nan, bool zero_pivot, DetPart p) {
  if (has_nan) return static_cast<double>(NAN);
  if (zero_pivot) return 0.0;
  return det_finish(p);
}

}  // namespace tapeflow::detail
