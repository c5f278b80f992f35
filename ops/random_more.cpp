// tf::random::gamma and poisson (ops/array_more.h): Marsaglia and Tsang's rejection sampler as a
// composite of the normal and uniform draws, with the implicit reparameterization gradient as a
// view op; Poisson by the inverse CDF below lambda = 10 and Hormann's PTRS rejection above.
#include <cmath>
#include <limits>
#include <vector>

#include "core/check.h"
#include "ops/array_more.h"
#include "ops/binary.h"
#include "ops/dispatch.h"
#include "ops/factory.h"
#include "ops/gradient_view.h"
#include "ops/helpers.h"
#include "ops/math.h"
#include "ops/movement.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/special.h"
#include "ops/unary.h"

namespace tapeflow {

namespace {

// Passes the standard gamma sample x (input 0) through; its vjp gives alpha (input 1) the
// implicit gradient d x / d alpha = -(d/d alpha P(alpha, x)) / p(x; alpha), with the density
// p(x; alpha) = exp(-x + (alpha - 1) log x - lgamma(alpha)), and x none (the sampler's own path,
// which the rejections make biased, is cut).
struct GammaSample final : detail::GradientView<GammaSample> {
  const char* name() const override { return "random_gamma_grad"; }
  Tensor gradient(const Tensor& a, const Tensor& x, const Tensor& g) const {
    const Tensor dp = detail::dispatch(prims::Special(prims::SpecialFn::IgammaGradA), {a, x});
    const Tensor log_density = negative(x) + (a - 1.0) * log(x) - math::lgamma(a);
    return g * negative(dp) * exp(negative(log_density));
  }
};

}  // namespace

namespace random {

Tensor gamma(const TensorShape& shape, const Tensor& alpha, const Tensor& beta, DType dtype,
             std::optional<int64_t> seed) {
  const char* op = "random_gamma";
  TF_CHECK_ARG(is_floating(dtype), op,
               "dtype must be float16, bfloat16, float32 or float64, got {}", dtype_name(dtype));
  TF_CHECK_ARG(shape.is_fully_defined(), op, "shape {} has an unknown dimension",
               shape.to_string());
  TF_CHECK_ARG(alpha.defined(), op, "alpha is an undefined tensor (TF's None)");
  TF_CHECK_ARG(is_floating(alpha.dtype()) || is_integer(alpha.dtype()), op,
               "alpha must be a number, got {}", dtype_name(alpha.dtype()));
  TF_CHECK_ARG(!beta.defined() || is_floating(beta.dtype()) || is_integer(beta.dtype()), op,
               "beta must be a number, got {}", dtype_name(beta.dtype()));
  const TensorShape params =
      beta.defined() ? detail::broadcast_shapes(op, alpha.shape(), beta.shape()) : alpha.shape();
  std::vector<int64_t> dims = shape.dims();
  for (int d = 0; d < params.rank(); ++d) {
    TF_CHECK_ARG(params[d] != None, op, "alpha and beta need known shapes, got {}",
                 params.to_string());
    dims.push_back(params[d]);
  }
  const TensorShape full(dims);
  return detail::naming_errors(op, [&] {
    // In float64 (the acceptance test is exact for every dtype), rounded once at the end. The
    // dtype's alpha is the one the gradient reaches (TF converts alpha to dtype first).
    const Tensor a = broadcast_to(cast(cast(alpha, dtype), float64), full);
    const Tensor small = less(a, 1.0);
    const Tensor a1 = where(small, a + 1.0, a);
    const Tensor d = a1 - 1.0 / 3;
    const Tensor c = 1.0 / sqrt(9.0 * d);
    // One round: a candidate d v with v = (1 + c z)^3, accepted when v > 0 and
    // log u < z^2 / 2 + d - d v + d log v.
    auto round = [&](Tensor& x, Tensor& accepted) {
      const Tensor z = normal(full, 0.0, 1.0, float64, seed);
      const Tensor u = uniform(full, 0.0, 1.0, float64, seed);
      const Tensor t = 1.0 + c * z;
      const Tensor v = t * t * t;
      const Tensor ok =
          logical_and(greater(t, 0.0), less(log(1.0 - u), 0.5 * z * z + d - d * v + d * log(v)));
      if (!x.defined()) {  // alpha <= 0 (or NaN) counts as accepted: it gives NaN below
        x = d * v;
        accepted = logical_or(ok, logical_not(greater(a, 0.0)));
        return;
      }
      x = where(accepted, x, d * v);
      accepted = logical_or(accepted, ok);
    };
    Tensor x, accepted;
    round(x, accepted);
    const bool traced = x.is_symbolic();
    for (int pass = 1; traced ? pass < 12 : !reduce_all(accepted).item<bool>(); ++pass)
      round(x, accepted);
    if (traced) x = where(accepted, x, d);
    // alpha < 1: Gamma(alpha + 1) u^(1 / alpha).
    const Tensor boost = pow(1.0 - uniform(full, 0.0, 1.0, float64, seed), 1.0 / a);
    x = where(small, x * boost, x);
    x = where(greater(a, 0.0), x, std::numeric_limits<double>::quiet_NaN());
    x = detail::dispatch(GammaSample(), {x, a});
    if (beta.defined()) x = x / broadcast_to(cast(cast(beta, dtype), float64), full);
    return cast(x, dtype);
  });
}

Tensor poisson(const TensorShape& shape, const Tensor& lam, DType dtype,
               std::optional<int64_t> seed) {
  const char* op = "random_poisson";
  TF_CHECK_ARG(
      dtype == float16 || dtype == float32 || dtype == float64 || dtype == int32 || dtype == int64,
      op, "dtype must be float16, float32, float64, int32 or int64, got {}", dtype_name(dtype));
  TF_CHECK_ARG(shape.is_fully_defined(), op, "shape {} has an unknown dimension",
               shape.to_string());
  TF_CHECK_ARG(lam.defined(), op, "lam is an undefined tensor (TF's None)");
  TF_CHECK_ARG(is_floating(lam.dtype()) || is_integer(lam.dtype()), op,
               "lam must be a number, got {}", dtype_name(lam.dtype()));
  std::vector<int64_t> dims = shape.dims();
  for (int d = 0; d < lam.rank(); ++d) {
    TF_CHECK_ARG(lam.shape()[d] != None, op, "lam needs a known shape, got {}",
                 lam.shape().to_string());
    dims.push_back(lam.shape()[d]);
  }
  const TensorShape full(dims);
  return detail::naming_errors(op, [&] {
    const Tensor l = broadcast_to(cast(lam, float64), full);
    const Tensor valid = greater(l, 0.0);  // lam <= 0 gives 0 (TF's kernel); NaN gives NaN
    const Tensor small = logical_and(valid, less(l, 10.0));
    const Tensor large = logical_and(valid, greater_equal(l, 10.0));
    bool traced = false;

    // Below 10: the inverse CDF, k = the first k with u <= F(k), F summed term by term (stops
    // where the terms underflow, so that a u above the float64 sum cannot loop forever).
    Tensor k;
    {
      const Tensor ls = where(small, l, 1.0);
      const Tensor u = uniform(full, 0.0, 1.0, float64, seed);
      traced = u.is_symbolic();
      Tensor p = exp(negative(ls)), f = p;
      k = zeros_like(ls);
      // 48 terms leave P(X > 48) < 1e-17 at lam = 10.
      for (int term = 1; traced ? term <= 48 : true; ++term) {
        const Tensor more = logical_and(logical_and(small, greater(u, f)), greater(p, 0.0));
        if (!traced && !reduce_any(more).item<bool>()) break;
        k = k + cast(more, float64);
        p = where(more, p * ls / k, p);
        f = where(more, f + p, f);
      }
    }

    // From 10: Hormann's transformed rejection with squeeze (PTRS), as TF's kernel.
    const Tensor lb = where(large, l, 10.0);
    const Tensor slam = sqrt(lb), log_lam = log(lb);
    const Tensor b = 0.931 + 2.53 * slam;
    const Tensor a = -0.059 + 0.02483 * b;
    const Tensor log_inv_alpha = log(1.1239 + 1.1328 / (b - 3.4));
    const Tensor vr = 0.9277 - 3.6224 / (b - 2.0);
    Tensor x, accepted;
    for (int pass = 0;; ++pass) {
      const Tensor uu = uniform(full, -0.5, 0.5, float64, seed);
      const Tensor v = uniform(full, 0.0, 1.0, float64, seed);
      const Tensor us = 0.5 - abs(uu);
      const Tensor kk = floor((2.0 * a / us + b) * uu + lb + 0.43);
      const Tensor fast = logical_and(greater_equal(us, 0.07), less_equal(v, vr));
      const Tensor reject = logical_or(less(kk, 0.0), logical_and(less(us, 0.013), greater(v, us)));
      const Tensor slow = less_equal(log(v) + log_inv_alpha - log(a / (us * us) + b),
                                     negative(lb) + kk * log_lam - math::lgamma(kk + 1.0));
      const Tensor ok = logical_or(fast, logical_and(logical_not(reject), slow));
      if (!x.defined()) {
        x = kk;
        accepted = logical_or(ok, logical_not(large));
      } else {
        x = where(accepted, x, kk);
        accepted = logical_or(accepted, ok);
      }
      // 12 rounds leave an element unaccepted with probability below 1e-12.
      if (traced ? pass + 1 >= 12 : reduce_all(accepted).item<bool>()) break;
    }
    if (traced) x = where(accepted, x, floor(lb));

    Tensor out = where(small, k, where(large, x, 0.0));
    out = where(math::is_nan(l), std::numeric_limits<double>::quiet_NaN(), out);
    if (is_integer(dtype)) out = where(math::is_nan(l), 0.0, out);
    return cast(out, dtype);
  });
}

}  // namespace random

}  // namespace tapeflow
