// float32 exp, tanh and sigmoid for 16 lanes with AVX-512 intrinsics: the AVX-512 loops of
// ExpOp, TanhOp and SigmoidOp (ops/cpu/elementwise.cpp) use these instead of the compiler's
// vectorisation of exp_fast, tanh_any and sigmoid_any (ops/cpu/unary_ops.h). The arithmetic is
// the same, operation for operation (the same constants, the same FMA contractions the compiler
// makes in the AVX-512 build), so the results are the same bits; what changes is the clamps and
// the scaling by 2^n:
// - The compiler turns `x < lo ? lo : x` into compares and blends around the computation (it
//   keeps NaN passing through); vmaxps / vminps with the bound first do the same in one
//   instruction each (they return the second operand when one is NaN).
// - exp's 2^n, applied as two integer-built halves so that results near overflow and in the
//   subnormal range are right, is one vscalefps here (scaled with a single rounding).
// exp: about 17 vector operations per 16 elements against about 30, tanh about 19 against 27;
// eager exp over 64K float32 in cache, one core of an AMD EPYC VM, 0.30 -> 0.22 ns per element,
// tanh 0.38 -> 0.24, sigmoid 0.43 -> 0.29, the fused 6-op chain over 16M elements 20.3 ->
// 15.4 ms.
// Checked against the compiler's loops over all 2^32 float32 inputs once (the same bits, NaN
// for NaN); tests/ops/test_unary.cpp checks every 4093rd input.
#pragma once

#include "ops/cpu/isa.h"
#include "ops/cpu/unary_ops.h"

#if TF_CPU_MULTIVERSION  // x86-64 with GCC or Clang

#include <immintrin.h>

// GCC 12 warns that the pass-through operand of its _mm512_max_ps / _mm512_min_ps
// (_mm512_undefined_ps) "may be used uninitialized": a false positive.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace tapeflow::cpu {

// (A lambda would not inherit the target attribute.)
TF_TARGET_AVX512 inline __m512 splat16(float v) { return _mm512_set1_ps(v); }

// horner() (ops/cpu/unary_ops.h) on 16 lanes: one FMA per coefficient, as its contraction.
template <size_t N>
TF_TARGET_AVX512 inline __m512 horner16(const float (&c)[N], __m512 x) {
  __m512 p = splat16(c[0]);
  for (size_t k = 1; k < N; ++k) p = _mm512_fmadd_ps(p, x, splat16(c[k]));
  return p;
}

TF_TARGET_AVX512 inline __m512 exp16(__m512 x) {
  __m512 xc = _mm512_max_ps(splat16(kExpLo), x);  // NaN passes
  xc = _mm512_min_ps(splat16(kExpHi), xc);
  // n = round(x / ln2) through the 1.5 * 2^23 trick, as exp_fast.
  const __m512 big = splat16(12582912.0f);
  const __m512 fn = _mm512_sub_ps(_mm512_fmadd_ps(xc, splat16(1.44269504088896341f), big), big);
  __m512 r = _mm512_fnmadd_ps(fn, splat16(kExpLn2Hi), xc);
  r = _mm512_fnmadd_ps(fn, splat16(kExpLn2Lo), r);
  const __m512 p = horner16(kExpPoly, r);
  // y = p r r + r + 1, contracted as the compiler does: fma(r, p r, r) + 1.
  const __m512 y = _mm512_add_ps(_mm512_fmadd_ps(r, _mm512_mul_ps(p, r), r), splat16(1.0f));
  return _mm512_scalef_ps(y, fn);
}

TF_TARGET_AVX512 inline __m512 tanh16(__m512 x) {
  __m512 xc = _mm512_min_ps(splat16(kTanhClamp), x);  // NaN passes
  xc = _mm512_max_ps(splat16(-kTanhClamp), xc);
  const __m512 t = _mm512_mul_ps(xc, xc);
  const __m512 p = horner16(kTanhP, t);
  const __m512 q = horner16(kTanhQ, t);
  const __m512 r = _mm512_div_ps(_mm512_mul_ps(xc, p), q);
  return _mm512_max_ps(splat16(-1.0f), _mm512_min_ps(splat16(1.0f), r));
}

// sigmoid_any: e = exp(-|x|), s = 1 / (1 + e), s for x >= 0 and e s below.
TF_TARGET_AVX512 inline __m512 sigmoid16(__m512 x) {
  const __m512 e = exp16(_mm512_or_ps(x, splat16(-0.0f)));  // -|x|
  const __m512 s = _mm512_div_ps(splat16(1.0f), _mm512_add_ps(splat16(1.0f), e));
  const __mmask16 below = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_NGE_UQ);  // !(x >= 0)
  return _mm512_mask_mul_ps(s, below, e, s);
}

// out[i] = f(in[i]) for i < n, 16 at a time, the tail through masks.
template <__m512 (*F)(__m512)>
TF_TARGET_AVX512 inline void map16(const float* __restrict in, float* __restrict out, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(out + i, F(_mm512_loadu_ps(in + i)));
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1u);
    _mm512_mask_storeu_ps(out + i, m, F(_mm512_maskz_loadu_ps(m, in + i)));
  }
}

}  // namespace tapeflow::cpu

#pragma GCC diagnostic pop

#endif
