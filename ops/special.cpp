#include "ops/special.h"

#include <limits>

#include "core/check.h"
#include "ops/binary.h"
#include "ops/dispatch.h"
#include "ops/dynamic_shape.h"
#include "ops/factory.h"
#include "ops/helpers.h"
#include "ops/movement.h"
#include "ops/reduce.h"
#include "ops/unary.h"

namespace tapeflow {

namespace prims {

namespace {
int arity(SpecialFn f) {
  return f == SpecialFn::Betainc ? 3 : f >= SpecialFn::Polygamma ? 2 : 1;
}

// TF's CPU kernel registrations of each function.
enum class Accepts { HalfUp, AllFloating, Float32Up };
Accepts accepts(SpecialFn f) {
  switch (f) {
    case SpecialFn::Lgamma:
    case SpecialFn::Digamma:
    case SpecialFn::BesselI0e:
    case SpecialFn::BesselI1e:
    case SpecialFn::BesselI0:
    case SpecialFn::BesselI1:
      return Accepts::HalfUp;
    case SpecialFn::Xlogy:
    case SpecialFn::Xdivy:
    case SpecialFn::Xlog1py:
      return Accepts::AllFloating;
    default:
      return Accepts::Float32Up;
  }
}
}  // namespace

const char* Special::name() const {
  switch (fn) {
    case SpecialFn::Lgamma:
      return "lgamma";
    case SpecialFn::Digamma:
      return "digamma";
    case SpecialFn::Erfinv:
      return "erfinv";
    case SpecialFn::Ndtri:
      return "ndtri";
    case SpecialFn::BesselI0e:
      return "bessel_i0e";
    case SpecialFn::BesselI1e:
      return "bessel_i1e";
    case SpecialFn::BesselI0:
      return "bessel_i0";
    case SpecialFn::BesselI1:
      return "bessel_i1";
    case SpecialFn::Polygamma:
      return "polygamma";
    case SpecialFn::Xlogy:
      return "xlogy";
    case SpecialFn::Xdivy:
      return "xdivy";
    case SpecialFn::Xlog1py:
      return "xlog1py";
    case SpecialFn::Igamma:
      return "igamma";
    case SpecialFn::Igammac:
      return "igammac";
    case SpecialFn::IgammaGradA:
      return "igamma_grad_a";
    case SpecialFn::Zeta:
      return "zeta";
    case SpecialFn::Betainc:
      return "betainc";
  }
  return "special";
}

void Special::infer(std::span<const Tensor> in, std::span<TensorMeta> out) const {
  const DType d = in[0].dtype();
  switch (accepts(fn)) {
    case Accepts::HalfUp:
      TF_CHECK_ARG(d == float16 || d == float32 || d == float64, name(),
                   "expects a float16, float32 or float64 tensor (TF has no other kernel), got {}",
                   dtype_name(d));
      break;
    case Accepts::AllFloating:
      TF_CHECK_ARG(is_floating(d), name(),
                   "expects a floating-point tensor (float16, bfloat16, float32, float64), got {}",
                   dtype_name(d));
      break;
    case Accepts::Float32Up:
      TF_CHECK_ARG(d == float32 || d == float64, name(),
                   "expects a float32 or float64 tensor (TF has no other kernel), got {}",
                   dtype_name(d));
      break;
  }
  TF_CHECK_ARG(static_cast<int>(in.size()) == arity(fn), name(), "expects {} inputs, got {}",
               arity(fn), in.size());
  for (size_t k = 1; k < in.size(); ++k)
    TF_CHECK_ARG(in[k].dtype() == d && in[k].shape() == in[0].shape(), name(),
                 "expects inputs of one shape and dtype, got {} {} and {} {}",
                 in[0].shape().to_string(), dtype_name(d), in[k].shape().to_string(),
                 dtype_name(in[k].dtype()));
  out[0] = {in[0].shape(), d};
}

uint32_t Special::vjp_saves() const {
  switch (fn) {
    case SpecialFn::Erfinv:
    case SpecialFn::Ndtri:
      return save_output(0);
    case SpecialFn::BesselI1e:
    case SpecialFn::BesselI1:
      return save_input(0) | save_output(0);
    default:
      return arity(fn) == 3   ? save_input(0) | save_input(1) | save_input(2)
             : arity(fn) == 2 ? save_input(0) | save_input(1)
                              : save_input(0);
  }
}

std::vector<Tensor> Special::vjp(std::span<const Tensor> p, std::span<const Tensor> cts,
                                 std::span<const int> argnums, std::span<const Tensor> outs) const {
  using math::xdivy;
  using math::xlog1py;
  using math::xlogy;
  const Tensor& g = cts[0];
  const Tensor& x = p[0];
  auto first = [&]() -> Tensor {
    switch (fn) {
      case SpecialFn::Lgamma:
        return g * math::digamma(x);
      case SpecialFn::Digamma: {
        // polygamma has float32/float64 kernels only (TF's): the half types go through float32.
        if (x.dtype() == float32 || x.dtype() == float64)
          return g * math::polygamma(ones_like(x), x);
        const Tensor xf = cast(x, float32);
        return g * cast(math::polygamma(ones_like(xf), xf), x.dtype());
      }
      case SpecialFn::Erfinv:
        return g * (0.88622692545275801 * exp(square(outs[0])));
      case SpecialFn::Ndtri:
        return g * (2.5066282746310002 * exp(square(outs[0]) * 0.5));
      case SpecialFn::BesselI0e:
        return g * (math::bessel_i1e(x) - sign(x) * math::bessel_i0e(x));
      case SpecialFn::BesselI0:
        return g * math::bessel_i1(x);
      case SpecialFn::BesselI1e:
      case SpecialFn::BesselI1: {
        // TF's guard: 0.5 where |x| is at most the dtype's smallest normal (1 / x overflows).
        // i1e' = i0e - y (sign(x) + 1 / x); I1' = I0 - y / x.
        const Tensor zero = zeros_like(x);
        const double tiny = x.dtype() == float64   ? std::numeric_limits<double>::min()
                            : x.dtype() == float16 ? 6.103515625e-05
                                                   : std::numeric_limits<float>::min();
        const Tensor at_zero = less_equal(abs(x), zero + tiny);
        const Tensor safe = where(at_zero, ones_like(x), x);
        const Tensor d = fn == SpecialFn::BesselI1e
                             ? math::bessel_i0e(x) - outs[0] * (sign(x) + 1 / safe)
                             : math::bessel_i0(x) - outs[0] / safe;
        return g * where(at_zero, zero + 0.5, d);
      }
      // TF's _XLogyGrad, _XDivyGrad, _XLog1pyGrad: 0 where x == 0.
      case SpecialFn::Xlogy:
      case SpecialFn::Xdivy:
      case SpecialFn::Xlog1py: {
        const Tensor nonzero = cast(not_equal(x, zeros_like(x)), x.dtype());
        if (fn == SpecialFn::Xlogy) return g * xlogy(nonzero, p[1]);
        if (fn == SpecialFn::Xdivy) return g * xdivy(nonzero, p[1]);
        return g * xlog1py(nonzero, p[1]);
      }
      // TF's IgammaGradA kernel; igammac = 1 - igamma.
      case SpecialFn::Igamma:
      case SpecialFn::Igammac: {
        const Tensor d = detail::dispatch(Special(SpecialFn::IgammaGradA), {x, p[1]});
        return fn == SpecialFn::Igamma ? g * d : negative(g) * d;
      }
      // polygamma's order, zeta's x and igamma_grad_a: no gradient, as in TF.
      default:
        return Tensor();
    }
  };
  auto second = [&]() -> Tensor {
    const Tensor& y = p[1];
    switch (fn) {
      case SpecialFn::Polygamma:
        return g * math::polygamma(x + 1, y);
      case SpecialFn::Zeta:  // TF's _ZetaGrad: none for x
        return g * negative(x) * math::zeta(x + 1, y);
      case SpecialFn::Xlogy:
        return g * xdivy(x, y);
      case SpecialFn::Xdivy:
        return g * xdivy(negative(x), square(y));
      case SpecialFn::Xlog1py:
        return g * xdivy(x, y + 1);
      case SpecialFn::Igamma:
      case SpecialFn::Igammac: {
        const Tensor d = exp(negative(y) + (x - 1) * log(y) - math::lgamma(x));
        return fn == SpecialFn::Igamma ? g * d : negative(g) * d;
      }
      default:
        return Tensor();
    }
  };
  // TF's _BetaincGrad: x only, exp(xlogy(a - 1, x) + xlog1py(b - 1, -x) - lbeta(a, b)).
  auto third = [&]() -> Tensor {
    const Tensor& a = p[0];
    const Tensor& b = p[1];
    const Tensor& z = p[2];
    const Tensor lbeta = math::lgamma(a) + math::lgamma(b) - math::lgamma(a + b);
    return g * exp(xlogy(a - 1, z) + xlog1py(b - 1, negative(z)) - lbeta);
  };
  std::vector<Tensor> out;
  for (int k : argnums) {
    if (fn == SpecialFn::Betainc)
      out.push_back(k == 2 ? third() : Tensor());
    else
      out.push_back(k == 0 ? first() : second());
  }
  return out;
}

}  // namespace prims

namespace math {
namespace {
// The inputs broadcast to their common shape s. In a trace for None dimensions the shape is read
// when the graph runs, from an input of shape s (or a sum of zeros of every input's shape), so
// that the graph serves every size of those dimensions.
void broadcast_all(std::vector<Tensor>& v, const TensorShape& s) {
  const std::vector<Tensor> all = v;
  for (Tensor& t : v) t = detail::broadcast_with(t, all, s);
}
Tensor unary(prims::SpecialFn f, const Tensor& x) {
  TF_CHECK_ARG(x.defined(), prims::Special(f).name(), "the input is undefined");
  return detail::dispatch(prims::Special(f), {x});
}
Tensor binary(prims::SpecialFn f, const Tensor& a, const Tensor& b) {
  const char* op = prims::Special(f).name();
  TF_CHECK_ARG(a.defined() && b.defined(), op, "an input is undefined");
  auto [x, y] = detail::unify_dtypes(op, a, b);
  std::vector<Tensor> v{x, y};
  broadcast_all(v, detail::broadcast_shapes(op, x.shape(), y.shape()));
  return detail::dispatch(prims::Special(f), {v[0], v[1]});
}
}  // namespace

using prims::SpecialFn;
Tensor lgamma(const Tensor& x) {
  return unary(SpecialFn::Lgamma, x);
}
Tensor digamma(const Tensor& x) {
  return unary(SpecialFn::Digamma, x);
}
Tensor erfinv(const Tensor& x) {
  return unary(SpecialFn::Erfinv, x);
}
Tensor ndtri(const Tensor& x) {
  return unary(SpecialFn::Ndtri, x);
}
Tensor bessel_i0e(const Tensor& x) {
  return unary(SpecialFn::BesselI0e, x);
}
Tensor bessel_i1e(const Tensor& x) {
  return unary(SpecialFn::BesselI1e, x);
}
Tensor bessel_i0(const Tensor& x) {
  return unary(SpecialFn::BesselI0, x);
}
Tensor bessel_i1(const Tensor& x) {
  return unary(SpecialFn::BesselI1, x);
}
Tensor polygamma(const Tensor& a, const Tensor& x) {
  return binary(SpecialFn::Polygamma, a, x);
}
Tensor zeta(const Tensor& x, const Tensor& q) {
  return binary(SpecialFn::Zeta, x, q);
}
Tensor lbeta(const Tensor& x) {
  const char* op = "lbeta";
  TF_CHECK_ARG(x.defined(), op, "the input is undefined");
  TF_CHECK_ARG(x.dtype() == float16 || x.dtype() == float32 || x.dtype() == float64, op,
               "expects a float16, float32 or float64 tensor (lgamma's dtypes), got {}",
               dtype_name(x.dtype()));
  TF_CHECK_ARG(x.rank() >= 1, op,
               "expects a tensor of rank >= 1 (it reduces the last axis), got shape {}",
               x.shape().to_string());
  return reduce_sum(lgamma(x), -1) - lgamma(reduce_sum(x, -1));
}
Tensor xlogy(const Tensor& x, const Tensor& y) {
  return binary(SpecialFn::Xlogy, x, y);
}
Tensor xdivy(const Tensor& x, const Tensor& y) {
  return binary(SpecialFn::Xdivy, x, y);
}
Tensor xlog1py(const Tensor& x, const Tensor& y) {
  return binary(SpecialFn::Xlog1py, x, y);
}
Tensor igamma(const Tensor& a, const Tensor& x) {
  return binary(SpecialFn::Igamma, a, x);
}
Tensor igammac(const Tensor& a, const Tensor& x) {
  return binary(SpecialFn::Igammac, a, x);
}

Tensor betainc(const Tensor& a, const Tensor& b, const Tensor& x) {
  const char* op = "betainc";
  TF_CHECK_ARG(a.defined() && b.defined() && x.defined(), op, "an input is undefined");
  std::vector<Tensor> v = {a, b, x};
  detail::unify_dtypes(op, v);
  const TensorShape s = detail::broadcast_shapes(
      op, detail::broadcast_shapes(op, v[0].shape(), v[1].shape()), v[2].shape());
  broadcast_all(v, s);
  return detail::dispatch(prims::Special(SpecialFn::Betainc), {v[0], v[1], v[2]});
}

}  // namespace math
}  // namespace tapeflow
