#include "support/scalar_forms.h"

#include "ops/cpu/isa.h"
#include "ops/cpu/unary_ops.h"

#if TF_CPU_MULTIVERSION
namespace tapeflow::testing {
namespace {

template <class F>
TF_TARGET_AVX512 void scalar_form_loop(const float* in, float* out, int64_t n) {
  const F f{};
  for (int64_t i = 0; i < n; ++i) out[i] = f(in[i]);
}

}  // namespace

TF_TARGET_AVX512 void exp_scalar_form_avx512(const float* in, float* out, int64_t n) {
  scalar_form_loop<cpu::ExpOp>(in, out, n);
}
TF_TARGET_AVX512 void tanh_scalar_form_avx512(const float* in, float* out, int64_t n) {
  scalar_form_loop<cpu::TanhOp>(in, out, n);
}
TF_TARGET_AVX512 void sigmoid_scalar_form_avx512(const float* in, float* out, int64_t n) {
  scalar_form_loop<cpu::SigmoidOp>(in, out, n);
}

}  // namespace tapeflow::testing
#endif
