// The fused optimizer updates of autograd/training_ops.h. The CPU loops keep each operation's
// rounding (fp-contract=off) and drop errno handling, so that GCC vectorises sqrt and divide
// (as ops/cpu/elementwise*.cpp do); an AVX-512 and an AVX2 version are picked at run time. GPUs
// run ops/cuda/training_kernels.cu.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-math-errno", "no-trapping-math", "fp-contract=off")
#endif

#include "autograd/training_ops.h"

#include <fmt/format.h>

#include <cmath>
#include <string>

#include "autograd/tape.h"
#include "core/check.h"
#include "core/parallel.h"
#include "ops/cpu/unary_ops.h"
#include "ops/cuda/training_kernels.h"
#include "ops/dispatch.h"

namespace tapeflow::detail {

namespace {

// Elements per thread below which the pool is not used (four buffers per element).
constexpr int64_t kAdamGrain = 8192;

#define TF_DEFINE_ADAM_LOOP(NAME, TARGET)                                                    \
  template <class T>                                                                         \
  TARGET void NAME(T* __restrict w, T* __restrict m, T* __restrict v, const T* __restrict g, \
                   T alpha, T c1, T c2, T eps, int64_t n) {                                  \
    for (int64_t i = 0; i < n; ++i) {                                                        \
      const T gi = g[i];                                                                     \
      const T mi = m[i] + (gi - m[i]) * c1;                                                  \
      const T vi = v[i] + (gi * gi - v[i]) * c2;                                             \
      m[i] = mi;                                                                             \
      v[i] = vi;                                                                             \
      w[i] = w[i] - (mi * alpha) / (std::sqrt(vi) + eps);                                    \
    }                                                                                        \
  }
TF_DEFINE_ADAM_LOOP(adam_loop, )
#if TF_CPU_MULTIVERSION
TF_DEFINE_ADAM_LOOP(adam_loop_avx2, TF_TARGET_AVX2)
TF_DEFINE_ADAM_LOOP(adam_loop_avx512, TF_TARGET_AVX512)
#endif
#undef TF_DEFINE_ADAM_LOOP

template <class T>
void run_adam(Tensor& w, Tensor& m, Tensor& v, const Tensor& g, double alpha, double c1, double c2,
              double eps) {
  auto loop = &adam_loop<T>;
#if TF_CPU_MULTIVERSION
  if (cpu::cpu_level() == cpu::CpuLevel::Avx512)
    loop = &adam_loop_avx512<T>;
  else if (cpu::cpu_has_avx2())
    loop = &adam_loop_avx2<T>;
#endif
  T* wp = w.data<T>();
  T* mp = m.data<T>();
  T* vp = v.data<T>();
  const T* gp = g.data<T>();
  const T a = static_cast<T>(alpha), k1 = static_cast<T>(c1), k2 = static_cast<T>(c2),
          e = static_cast<T>(eps);
  parallel_for(w.num_elements(), kAdamGrain, [&](int64_t begin, int64_t end) {
    loop(wp + begin, mp + begin, vp + begin, gp + begin, a, k1, k2, e, end - begin);
  });
}

// Inputs: grad, alpha. Writes var, m and v (resolved components of mirrored variables).
struct ApplyAdamOp final : PrimitiveBase<ApplyAdamOp> {
  Variable var, m, v;
  double c1, c2, epsilon;  // 1 - beta_1, 1 - beta_2 (as the separate ops compute them)
  ApplyAdamOp(Variable w, Variable mm, Variable vv, double one_minus_b1, double one_minus_b2,
              double eps)
      : var(std::move(w)),
        m(std::move(mm)),
        v(std::move(vv)),
        c1(one_minus_b1),
        c2(one_minus_b2),
        epsilon(eps) {}

  const char* name() const override { return "apply_adam"; }
  int num_outputs() const override { return 0; }
  void infer(std::span<const Tensor>, std::span<TensorMeta>) const override {}
  void eval_cpu(std::span<const Tensor>, std::span<Tensor>) const override {
    TF_THROW(InternalError, name(), "runs through produce(), never as a kernel");
  }
  void eval_cuda(std::span<const Tensor>, std::span<Tensor>) const override {
    TF_THROW(InternalError, name(), "runs through produce(), never as a kernel");
  }
  bool has_side_effects() const override { return true; }
  std::vector<const void*> written_variables() const override {
    return {var.handle_id(), m.handle_id(), v.handle_id()};
  }
  std::optional<Device> target_device() const override { return var.placement(); }
  std::string attributes() const override {
    return fmt::format("variable={}, m={}, v={}, 1-beta_1={}, 1-beta_2={}, epsilon={}", var.name(),
                       m.name(), v.name(), c1, c2, epsilon);
  }

  bool produce(std::span<const Tensor> in, std::span<Tensor>, Device device) const override {
    const Tensor& g = in[0];
    const Tensor& alpha = in[1];
    const DType dt = var.dtype();
    TF_CHECK_T(InternalError,
               g.placement() == device && alpha.placement() == device && g.shape() == var.shape() &&
                   g.dtype() == dt && alpha.shape().rank() == 0 && alpha.dtype() == dt,
               name(),
               "expects a gradient of shape {} and a 0-d alpha, {}, on {}; got {} {} on {} and "
               "{} {} on {}",
               var.shape().to_string(), dtype_name(dt), device.to_string(), g.shape().to_string(),
               dtype_name(g.dtype()), g.placement().to_string(), alpha.shape().to_string(),
               dtype_name(alpha.dtype()), alpha.placement().to_string());
    // Locks in a fixed order (variable, m, v); each buffer is written in place when nothing
    // else holds it.
    Variable w = var, mm = m, vv = v;
    w.update([&](Tensor& wt) {
      mm.update([&](Tensor& mt) {
        vv.update([&](Tensor& vt) {
          if (device.is_gpu()) {
            // alpha is read on the device: no host synchronisation.
            cuda_training::apply_adam(device, dt, wt.raw_data(), mt.raw_data(), vt.raw_data(),
                                      g.raw_data(), alpha.raw_data(), c1, c2, epsilon,
                                      wt.num_elements());
            return;
          }
          const double a = dt == float64 ? alpha.item<double>() : alpha.item<float>();
          if (dt == float64)
            run_adam<double>(wt, mt, vt, g, a, c1, c2, epsilon);
          else
            run_adam<float>(wt, mt, vt, g, a, c1, c2, epsilon);
        });
      });
    });
    return true;
  }
};

// The copy of a mirrored variable this thread's replica works on (the variable itself when not
// mirrored); undefined in cross-replica context.
Variable resolved_component(const Variable& x) {
  if (!x.is_mirrored()) return x;
  const int r = replica_component();
  if (r < 0) return Variable();
  const std::vector<Variable> parts = x.components();
  return r < static_cast<int>(parts.size()) ? parts[static_cast<size_t>(r)] : Variable();
}

}  // namespace

bool apply_adam(const Variable& var, const Variable& m, const Variable& v, const Tensor& grad,
                const Tensor& alpha, double beta_1, double beta_2, double epsilon) {
  const Variable w = resolved_component(var), mm = resolved_component(m),
                 vv = resolved_component(v);
  if (!w.defined() || !mm.defined() || !vv.defined()) return false;
  // Three distinct variables (their locks are taken one inside the other).
  if (w.handle_id() == mm.handle_id() || w.handle_id() == vv.handle_id() ||
      mm.handle_id() == vv.handle_id())
    return false;
  const Device dev = w.placement();
  const DType dt = w.dtype();
  auto same = [&](const Variable& x) {
    return x.placement() == dev && x.dtype() == dt && x.shape() == w.shape();
  };
  if ((dt != float32 && dt != float64) || !same(mm) || !same(vv) || !grad.defined() ||
      grad.placement() != dev || grad.dtype() != dt || grad.shape() != w.shape() ||
      !alpha.defined() || alpha.placement() != dev || alpha.dtype() != dt ||
      alpha.shape().rank() != 0)
    return false;
  PauseTapes pause;  // a state change, not a differentiable op
  const Tensor in[2] = {grad, alpha};
  dispatch_multi(ApplyAdamOp(w, mm, vv, 1.0 - beta_1, 1.0 - beta_2, epsilon), in);
  return true;
}

}  // namespace tapeflow::detail
