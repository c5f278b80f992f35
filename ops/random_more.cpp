// tf::random::gamma and poisson and their stateless forms (ops/array_more.h): Marsaglia and
// Tsang's rejection sampler as a composite of the normal and uniform draws, with the implicit
// reparameterization gradient as a view op; Poisson by the inverse CDF below lambda = 10 and
// Hormann's PTRS rejection above. Also the draws (ops/random_draws.h) every composite sampler
// takes its numbers from.
#include <cmath>
#include <limits>
#include <vector>

#include "core/check.h"
#include "ops/array_more.h"
#include "ops/binary.h"
#include "ops/dispatch.h"
#include "ops/dynamic_shape.h"
#include "ops/factory.h"
#include "ops/gradient_view.h"
#include "ops/helpers.h"
#include "ops/math.h"
#include "ops/movement.h"
#include "ops/random.h"
#include "ops/random_draws.h"
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

namespace detail {

RandomDraws RandomDraws::stateful(std::optional<int64_t> seed) {
  RandomDraws d;
  d.seed_ = seed;
  return d;
}
RandomDraws RandomDraws::stateless(std::array<int64_t, 2> seed) {
  RandomDraws d;
  d.stateless_ = true;
  d.pair_ = {static_cast<uint64_t>(seed[0]), static_cast<uint64_t>(seed[1])};
  return d;
}
std::array<uint64_t, 2> RandomDraws::next_pair() {
  const uint64_t k = draws_++;
  return {pair_[0], k == 0 ? pair_[1] : continue_random_stream(pair_[1], k)};
}
Tensor RandomDraws::uniform(const TensorShape& shape, double minval, double maxval, DType dtype) {
  if (!stateless_) return random::uniform(shape, minval, maxval, dtype, seed_);
  const auto [k, k2] = next_pair();
  return random::stateless_uniform(shape, {static_cast<int64_t>(k), static_cast<int64_t>(k2)},
                                   minval, maxval, dtype);
}
Tensor RandomDraws::normal(const TensorShape& shape, double mean, double stddev, DType dtype) {
  if (!stateless_) return random::normal(shape, mean, stddev, dtype, seed_);
  const auto [k, k2] = next_pair();
  return random::stateless_normal(shape, {static_cast<int64_t>(k), static_cast<int64_t>(k2)}, mean,
                                  stddev, dtype);
}
Tensor RandomDraws::uniform_like(const Tensor& like, double minval, double maxval, DType dtype) {
  if (!stateless_) return random_uniform_like(like, minval, maxval, dtype, seed_);
  if (!open_shapes()) return uniform(like.shape(), minval, maxval, dtype);
  // The shape read when the graph runs; no execution counter: every run draws from this pair.
  const auto [k, k2] = next_pair();
  prims::RandomUniform prim(TensorShape{}, dtype, minval, maxval, k, k2);
  prim.like = true;
  const Tensor in[1] = {like};
  return dispatch(prim, in);
}

bool all_true(const Tensor& accepted) {
  return reduce_all(accepted).item<bool>();
}

}  // namespace detail

namespace {

// Gamma(alpha, 1) samples of alpha's shape (float64, alpha given in the output dtype first, the
// one the gradient reaches), then divided by beta (undefined: 1), rounded to dtype once.
Tensor gamma_samples(const Tensor& alpha64, const Tensor& beta64, DType dtype,
                     detail::RandomDraws& draws) {
  const Tensor& a = alpha64;
  const TensorShape full = a.shape();
  const Tensor small = less(a, 1.0);
  const Tensor a1 = where(small, a + 1.0, a);
  const Tensor d = a1 - 1.0 / 3;
  const Tensor c = 1.0 / sqrt(9.0 * d);
  // alpha < 1 uses Gamma(alpha + 1) u^(1 / alpha): u is drawn first, so that it is the same draw
  // however many rounds the rejection takes (a stateless pair's eager and traced samples agree).
  const Tensor boost = pow(1.0 - draws.uniform(full, 0.0, 1.0, float64), 1.0 / a);
  // One round: a candidate d v with v = (1 + c z)^3, accepted when v > 0 and
  // log u < z^2 / 2 + d - d v + d log v. alpha <= 0 (or NaN) counts as accepted: it gives NaN
  // below. Traced: 12 rounds leave an element unaccepted with probability below 1e-15; it takes
  // d (alpha - 1/3), near the mode.
  Tensor x, accepted;
  const bool traced = detail::rejection_rounds(12, [&](int pass) {
    const Tensor z = draws.normal(full, 0.0, 1.0, float64);
    const Tensor u = draws.uniform(full, 0.0, 1.0, float64);
    const Tensor t = 1.0 + c * z;
    const Tensor v = t * t * t;
    const Tensor ok =
        logical_and(greater(t, 0.0), less(log(1.0 - u), 0.5 * z * z + d - d * v + d * log(v)));
    if (pass == 0) {
      x = d * v;
      accepted = logical_or(ok, logical_not(greater(a, 0.0)));
    } else {
      x = where(accepted, x, d * v);
      accepted = logical_or(accepted, ok);
    }
    return accepted;
  });
  if (traced) x = where(accepted, x, d);
  x = where(small, x * boost, x);
  x = where(greater(a, 0.0), x, std::numeric_limits<double>::quiet_NaN());
  x = detail::dispatch(GammaSample(), {x, a});
  if (beta64.defined()) x = x / beta64;
  return cast(x, dtype);
}

// Poisson(lam) samples of lam's shape (float64), in dtype.
Tensor poisson_samples(const Tensor& lam64, DType dtype, detail::RandomDraws& draws) {
  const Tensor& l = lam64;
  const TensorShape full = l.shape();
  const Tensor valid = greater(l, 0.0);  // lam <= 0 gives 0 (TF's kernel); NaN gives NaN
  const Tensor small = logical_and(valid, less(l, 10.0));
  const Tensor large = logical_and(valid, greater_equal(l, 10.0));

  // Below 10: the inverse CDF, k = the first k with u <= F(k), F summed term by term (stops
  // where the terms underflow, so that a u above the float64 sum cannot loop forever).
  Tensor k;
  {
    const Tensor ls = where(small, l, 1.0);
    const Tensor u = draws.uniform(full, 0.0, 1.0, float64);
    const bool traced = u.is_symbolic();
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

  // From 10: Hormann's transformed rejection with squeeze (PTRS), as TF's kernel. Traced: 12
  // rounds leave an element unaccepted with probability below 1e-12; it takes floor(lam).
  const Tensor lb = where(large, l, 10.0);
  const Tensor slam = sqrt(lb), log_lam = log(lb);
  const Tensor b = 0.931 + 2.53 * slam;
  const Tensor a = -0.059 + 0.02483 * b;
  const Tensor log_inv_alpha = log(1.1239 + 1.1328 / (b - 3.4));
  const Tensor vr = 0.9277 - 3.6224 / (b - 2.0);
  Tensor x, accepted;
  const bool traced = detail::rejection_rounds(12, [&](int pass) {
    const Tensor uu = draws.uniform(full, -0.5, 0.5, float64);
    const Tensor v = draws.uniform(full, 0.0, 1.0, float64);
    const Tensor us = 0.5 - abs(uu);
    const Tensor kk = floor((2.0 * a / us + b) * uu + lb + 0.43);
    const Tensor fast = logical_and(greater_equal(us, 0.07), less_equal(v, vr));
    const Tensor reject = logical_or(less(kk, 0.0), logical_and(less(us, 0.013), greater(v, us)));
    const Tensor slow = less_equal(log(v) + log_inv_alpha - log(a / (us * us) + b),
                                   negative(lb) + kk * log_lam - math::lgamma(kk + 1.0));
    const Tensor ok = logical_or(fast, logical_and(logical_not(reject), slow));
    if (pass == 0) {
      x = kk;
      accepted = logical_or(ok, logical_not(large));
    } else {
      x = where(accepted, x, kk);
      accepted = logical_or(accepted, ok);
    }
    return accepted;
  });
  if (traced) x = where(accepted, x, floor(lb));

  Tensor out = where(small, k, where(large, x, 0.0));
  out = where(math::is_nan(l), std::numeric_limits<double>::quiet_NaN(), out);
  if (is_integer(dtype)) out = where(math::is_nan(l), 0.0, out);
  return cast(out, dtype);
}

void check_gamma_args(const char* op, const TensorShape& shape, const Tensor& alpha,
                      const Tensor& beta, DType dtype) {
  TF_CHECK_ARG(is_floating(dtype), op,
               "dtype must be float16, bfloat16, float32 or float64, got {}", dtype_name(dtype));
  TF_CHECK_ARG(shape.is_fully_defined(), op, "shape {} has an unknown dimension",
               shape.to_string());
  TF_CHECK_ARG(alpha.defined(), op, "alpha is an undefined tensor (TF's None)");
  TF_CHECK_ARG(is_floating(alpha.dtype()) || is_integer(alpha.dtype()), op,
               "alpha must be a number, got {}", dtype_name(alpha.dtype()));
  TF_CHECK_ARG(!beta.defined() || is_floating(beta.dtype()) || is_integer(beta.dtype()), op,
               "beta must be a number, got {}", dtype_name(beta.dtype()));
}

void check_poisson_args(const char* op, const TensorShape& shape, const Tensor& lam, DType dtype) {
  TF_CHECK_ARG(
      dtype == float16 || dtype == float32 || dtype == float64 || dtype == int32 || dtype == int64,
      op, "dtype must be float16, float32, float64, int32 or int64, got {}", dtype_name(dtype));
  TF_CHECK_ARG(shape.is_fully_defined(), op, "shape {} has an unknown dimension",
               shape.to_string());
  TF_CHECK_ARG(lam.defined(), op, "lam is an undefined tensor (TF's None)");
  TF_CHECK_ARG(is_floating(lam.dtype()) || is_integer(lam.dtype()), op,
               "lam must be a number, got {}", dtype_name(lam.dtype()));
}

// A parameter in dtype (TF converts it first), then float64, broadcast to `full`: the
// stateless forms' parameters must broadcast to the output shape without growing it.
Tensor parameter(const char* op, const char* what, const Tensor& t, DType dtype,
                 const TensorShape& full, bool stateless) {
  if (stateless)
    TF_CHECK_ARG(detail::broadcast_shapes(op, t.shape(), full) == full, op,
                 "{} of shape {} does not broadcast to the output shape {}", what,
                 t.shape().to_string(), full.to_string());
  return broadcast_to(cast(cast(t, dtype), float64), full);
}

}  // namespace

namespace random {

Tensor gamma(const TensorShape& shape, const Tensor& alpha, const Tensor& beta, DType dtype,
             std::optional<int64_t> seed) {
  const char* op = "random_gamma";
  check_gamma_args(op, shape, alpha, beta, dtype);
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
    detail::RandomDraws draws = detail::RandomDraws::stateful(seed);
    return gamma_samples(
        parameter(op, "alpha", alpha, dtype, full, false),
        beta.defined() ? parameter(op, "beta", beta, dtype, full, false) : Tensor(), dtype, draws);
  });
}

Tensor stateless_gamma(const TensorShape& shape, std::array<int64_t, 2> seed, const Tensor& alpha,
                       const Tensor& beta, DType dtype) {
  const char* op = "stateless_random_gamma";
  check_gamma_args(op, shape, alpha, beta, dtype);
  return detail::naming_errors(op, [&] {
    detail::RandomDraws draws = detail::RandomDraws::stateless(seed);
    return gamma_samples(
        parameter(op, "alpha", alpha, dtype, shape, true),
        beta.defined() ? parameter(op, "beta", beta, dtype, shape, true) : Tensor(), dtype, draws);
  });
}

Tensor poisson(const TensorShape& shape, const Tensor& lam, DType dtype,
               std::optional<int64_t> seed) {
  const char* op = "random_poisson";
  check_poisson_args(op, shape, lam, dtype);
  std::vector<int64_t> dims = shape.dims();
  for (int d = 0; d < lam.rank(); ++d) {
    TF_CHECK_ARG(lam.shape()[d] != None, op, "lam needs a known shape, got {}",
                 lam.shape().to_string());
    dims.push_back(lam.shape()[d]);
  }
  const TensorShape full(dims);
  return detail::naming_errors(op, [&] {
    detail::RandomDraws draws = detail::RandomDraws::stateful(seed);
    return poisson_samples(broadcast_to(cast(lam, float64), full), dtype, draws);
  });
}

Tensor stateless_poisson(const TensorShape& shape, std::array<int64_t, 2> seed, const Tensor& lam,
                         DType dtype) {
  const char* op = "stateless_random_poisson";
  check_poisson_args(op, shape, lam, dtype);
  TF_CHECK_ARG(detail::broadcast_shapes(op, lam.shape(), shape) == shape, op,
               "lam of shape {} does not broadcast to the output shape {}", lam.shape().to_string(),
               shape.to_string());
  return detail::naming_errors(op, [&] {
    detail::RandomDraws draws = detail::RandomDraws::stateless(seed);
    return poisson_samples(broadcast_to(cast(lam, float64), shape), dtype, draws);
  });
}

}  // namespace random

}  // namespace tapeflow
