// The scalar function of each SpecialFn, shared by the CPU kernel (ops/cpu/special.cpp) and the
// CUDA kernel (ops/cuda/special.cu): one switch over ops/cpu/special_math.h, so the devices
// cannot drift apart.
#pragma once

#include "ops/cpu/special_math.h"
#include "ops/special.h"

namespace tapeflow::prims {

TF_SPECIAL_HD double apply_special(SpecialFn f, double a, double b, double c) {
  switch (f) {
    case SpecialFn::Lgamma:
      return special::lgamma(a);
    case SpecialFn::Digamma:
      return special::digamma(a);
    case SpecialFn::Erfinv:
      return special::erfinv(a);
    case SpecialFn::Ndtri:
      return special::ndtri(a);
    case SpecialFn::BesselI0e:
      return special::bessel_ie(0, a);
    case SpecialFn::BesselI1e:
      return special::bessel_ie(1, a);
    case SpecialFn::BesselI0:
      return special::bessel_i(0, a);
    case SpecialFn::BesselI1:
      return special::bessel_i(1, a);
    case SpecialFn::Polygamma:
      return special::polygamma(a, b);
    case SpecialFn::Xlogy:
      return special::xlogy(a, b);
    case SpecialFn::Xdivy:
      return special::xdivy(a, b);
    case SpecialFn::Xlog1py:
      return special::xlog1py(a, b);
    case SpecialFn::Igamma:
      return special::igamma(a, b);
    case SpecialFn::Igammac:
      return special::igammac(a, b);
    case SpecialFn::IgammaGradA:
      return special::igamma_grad_a(a, b);
    case SpecialFn::Zeta:
      return special::zeta(a, b);
    case SpecialFn::Betainc:
      return special::betainc(a, b, c);
  }
  return 0;
}

}  // namespace tapeflow::prims
