// Special functions, as TF's tf.math.lgamma, digamma, polygamma, erfinv, ndtri, xlogy, xdivy,
// xlog1py, bessel_i0e, bessel_i1e, bessel_i0, bessel_i1, igamma, igammac, zeta, lbeta and
// betainc. Elementwise; the
// binary ones broadcast their two inputs (and promote C++ scalars) as the other binary ops. Every
// dtype computes in float64 (ops/cpu/special_math.h, shared with the CUDA kernels, states the
// measured accuracy). Special values as TF 2.21: lgamma(0) = +inf, digamma(0) = NaN,
// erfinv(+-1) = +-inf, ndtri(0) = -inf, polygamma(n, x) NaN for a negative or non-integer n,
// xlogy(0, y) = 0 for every y (NaN included), igamma(a, x) NaN for x < 0 or a <= 0 (but
// igamma(0, 0) = 0), bessel_i*e(+-inf) = 0.
//
// Dtypes (TF's CPU registrations): lgamma, digamma, bessel_i0e, bessel_i1e: float16, float32,
// float64; xlogy, xdivy, xlog1py: every floating dtype (bfloat16 too); erfinv,
// ndtri, polygamma, igamma, igammac: float32, float64. Others raise InvalidArgumentError.
//
// Gradients as TF's math_grad.py: lgamma' = digamma, digamma' = polygamma(1, x),
// polygamma'(n, x) = polygamma(n + 1, x) (none for n), erfinv' = sqrt(pi) / 2 exp(y^2),
// ndtri' = sqrt(2 pi) exp(y^2 / 2), i0e' = i1e - sign(x) i0e, i1e' = i0e - y (sign(x) + 1 / x)
// (0.5 at 0), xlogy: (xlogy(x != 0, y), xdivy(x, y)), xdivy: (xdivy(x != 0, y),
// xdivy(-x, y^2)), xlog1py: (xlog1py(x != 0, y), xdivy(x, y + 1)) (all 0 where x == 0),
// igamma / igammac w.r.t. x: +-exp(-x + (a - 1) log x - lgamma(a)), w.r.t. a: +-d/da P(a, x)
// (TF's igamma_grad_a, itself without a gradient, as in TF).
#pragma once

#include "ops/primitive.h"

namespace tapeflow {

namespace math {
Tensor lgamma(const Tensor& x);
Tensor digamma(const Tensor& x);
Tensor polygamma(const Tensor& a, const Tensor& x);
Tensor erfinv(const Tensor& x);
Tensor ndtri(const Tensor& x);
Tensor bessel_i0e(const Tensor& x);
Tensor bessel_i1e(const Tensor& x);
// I0(x) and I1(x), as tf.math.bessel_i0 / bessel_i1 (float16, float32, float64): computed in
// float64 as bessel_i0e / bessel_i1e times exp(|x|), so a float32 result is finite up to its own
// overflow (I0(89) = 1.9e37; TF's float32 kernel gives inf from 88.7 on) and I0(+-inf) = inf,
// I1(+-inf) = +-inf (TF gives NaN). Gradients: I0' = I1, I1' = I0 - I1 / x, 0.5 at 0 (the true
// value: I1(x) = x / 2 + ...; TF 2.21 imputes 1 there).
Tensor bessel_i0(const Tensor& x);
Tensor bessel_i1(const Tensor& x);
// The Hurwitz zeta function sum_k (q + k)^-x, as tf.math.zeta (float32, float64; broadcast):
// inf at x = 1, NaN for x < 1; at q = 0, -1, ... inf for even x and NaN for odd x, as TF. The
// gradient is TF's: -x zeta(x + 1, q) for q, none for x.
Tensor zeta(const Tensor& x, const Tensor& q);
// log(|Beta(x)|) over the last axis, as tf.math.lbeta: sum(lgamma(x), -1) - lgamma(sum(x, -1))
// (float16, float32, float64; rank >= 1). An empty last axis gives -inf and a one-element one 0,
// as TF. Its gradient is digamma(x) - digamma(sum(x)).
Tensor lbeta(const Tensor& x);
Tensor xlogy(const Tensor& x, const Tensor& y);
Tensor xdivy(const Tensor& x, const Tensor& y);
Tensor xlog1py(const Tensor& x, const Tensor& y);
Tensor igamma(const Tensor& a, const Tensor& x);
Tensor igammac(const Tensor& a, const Tensor& x);
// The regularized incomplete beta function I_x(a, b), as tf.math.betainc: float32/float64, the
// three inputs broadcast; NaN for a <= 0, b <= 0 or x outside [0, 1]. Gradient w.r.t. x only
// (x^(a-1) (1-x)^(b-1) / B(a, b)); none for a and b, as TF.
Tensor betainc(const Tensor& a, const Tensor& b, const Tensor& x);
}  // namespace math

namespace prims {

enum class SpecialFn : uint8_t {
  // One input.
  Lgamma,
  Digamma,
  Erfinv,
  Ndtri,
  BesselI0e,
  BesselI1e,
  BesselI0,
  BesselI1,
  // Two inputs of one shape and dtype (the frontend broadcasts).
  Polygamma,
  Xlogy,
  Xdivy,
  Xlog1py,
  Igamma,
  Igammac,
  // d/da igamma(a, x) (TF's IgammaGradA): the gradients of igamma and igammac w.r.t. a.
  IgammaGradA,
  // The Hurwitz zeta function zeta(x, q).
  Zeta,
  // Three inputs of one shape and dtype: betainc(a, b, x).
  Betainc,
};

// One primitive for the family, the function as its attribute: an elementwise loop in float64
// on either device. Output: the inputs' shape and dtype.
struct Special final : PrimitiveBase<Special> {
  SpecialFn fn;
  explicit Special(SpecialFn f) : fn(f) {}
  const char* name() const override;
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override;
  TF_DECLARE_KERNELS
  TF_DECLARE_VJP
};

}  // namespace prims
}  // namespace tapeflow
