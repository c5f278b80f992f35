// tf::random::gamma (ops/array_more.h): Marsaglia and Tsang's rejection sampler as a composite
// of the normal and uniform draws, and the implicit reparameterization gradient as a view op.
#include <cmath>
#include <limits>

#include "core/check.h"
#include "ops/array_more.h"
#include "ops/binary.h"
#include "ops/dispatch.h"
#include "ops/helpers.h"
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
struct GammaSample final : PrimitiveBase<GammaSample> {
  const char* name() const override { return "random_gamma_grad"; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override {
    out[0] = {in[0].shape(), in[0].dtype()};
  }
  void eval_cpu(std::span<const Tensor>, std::span<Tensor>) const override {}
  void eval_cuda(std::span<const Tensor>, std::span<Tensor>) const override {}
  bool is_view() const override { return true; }
  uint32_t vjp_saves() const override { return save_input(1) | save_output(0); }
  std::vector<Tensor> vjp(std::span<const Tensor> primals, std::span<const Tensor> cotangents,
                          std::span<const int> argnums,
                          std::span<const Tensor> outputs) const override {
    const Tensor &a = primals[1], &x = outputs[0], &g = cotangents[0];
    std::vector<Tensor> out;
    for (int i : argnums) {
      if (i == 0) {
        out.emplace_back();
        continue;
      }
      const Tensor dp = detail::dispatch(prims::Special(prims::SpecialFn::IgammaGradA), {a, x});
      const Tensor log_density = negative(x) + (a - 1.0) * log(x) - math::lgamma(a);
      out.push_back(g * negative(dp) * exp(negative(log_density)));
    }
    return out;
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

}  // namespace random

}  // namespace tapeflow
