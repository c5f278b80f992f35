#include "jit/cuda_codegen.h"

#include <fmt/format.h>

#include <array>
#include <utility>

#include "core/check.h"

namespace tapeflow::jit {

namespace {

// Device functions of the fusable ops, float32. Every multiply, add and divide whose operands
// or result can meet another step's is an _rn intrinsic: the compiler never merges those into
// fused multiply-adds, so a fused chain rounds as the op-by-op kernels do.
constexpr const char* kPrelude = R"(// tapeflow fused elementwise kernel (generated)
#define TF_D static __device__ __forceinline__
TF_D float tf_negative(float x) { return -x; }
TF_D float tf_abs(float x) { return fabsf(x); }
TF_D float tf_sign(float x) { return x > 0.f ? 1.f : (x < 0.f ? -1.f : (x == 0.f ? 0.f : x)); }
TF_D float tf_exp(float x) {
  // Results below the normal range are rounded once, as the eager kernel's exp.
  return x < -87.3365447f ? __fmul_rn(expf(__fadd_rn(x, 64.0f)), 0x1.969d48p-93f) : expf(x);
}
TF_D float tf_log(float x) { return logf(x); }
TF_D float tf_log1p(float x) { return log1pf(x); }
TF_D float tf_sqrt(float x) { return sqrtf(x); }
TF_D float tf_rsqrt(float x) { return __fdiv_rn(1.f, sqrtf(x)); }
TF_D float tf_square(float x) { return __fmul_rn(x, x); }
TF_D float tf_tanh(float x) { return tanhf(x); }
TF_D float tf_sigmoid(float x) {
  const float e = tf_exp(-fabsf(x));
  const float s = __fdiv_rn(1.f, __fadd_rn(1.f, e));
  return x >= 0.f ? s : __fmul_rn(e, s);
}
TF_D float tf_sin(float x) { return sinf(x); }
TF_D float tf_cos(float x) { return cosf(x); }
TF_D float tf_erf(float x) { return erff(x); }
TF_D float tf_erfc(float x) { return erfcf(x); }
TF_D float tf_tan(float x) { return tanf(x); }
TF_D float tf_asin(float x) { return asinf(x); }
TF_D float tf_acos(float x) { return acosf(x); }
TF_D float tf_atan(float x) { return atanf(x); }
TF_D float tf_sinh(float x) { return sinhf(x); }
TF_D float tf_cosh(float x) { return coshf(x); }
TF_D float tf_asinh(float x) { return asinhf(x); }
TF_D float tf_acosh(float x) { return acoshf(x); }
TF_D float tf_atanh(float x) { return atanhf(x); }
TF_D float tf_expm1(float x) { return expm1f(x); }
TF_D float tf_softsign(float x) { return __fdiv_rn(x, __fadd_rn(1.f, fabsf(x))); }
TF_D float tf_floor(float x) { return floorf(x); }
TF_D float tf_ceil(float x) { return ceilf(x); }
TF_D float tf_round(float x) { return rintf(x); }
TF_D float tf_relu(float x) { return x < 0.f ? 0.f : x; }
TF_D float tf_add(float a, float b) { return __fadd_rn(a, b); }
TF_D float tf_subtract(float a, float b) { return __fsub_rn(a, b); }
TF_D float tf_multiply(float a, float b) { return __fmul_rn(a, b); }
TF_D float tf_divide(float a, float b) { return __fdiv_rn(a, b); }
TF_D float tf_pow(float a, float b) { return powf(a, b); }
TF_D float tf_maximum(float a, float b) { return (a > b || a != a) ? a : b; }
TF_D float tf_minimum(float a, float b) { return (a < b || a != a) ? a : b; }
TF_D float tf_atan2(float a, float b) { return atan2f(a, b); }
)";

constexpr std::array<std::string_view, 30> kUnary = {
    "negative", "abs",  "sign", "exp",  "log",  "log1p",    "sqrt",  "rsqrt", "square", "tanh",
    "sigmoid",  "sin",  "cos",  "erf",  "erfc", "softsign", "floor", "ceil",  "round",  "relu",
    "tan",      "asin", "acos", "atan", "sinh", "cosh",     "asinh", "acosh", "atanh",  "expm1"};
constexpr std::array<std::string_view, 8> kBinary = {"add",     "subtract", "multiply", "divide",
                                                     "pow",     "maximum",  "minimum",  "atan2"};

template <size_t N>
bool contains(const std::array<std::string_view, N>& list, std::string_view op) {
  for (std::string_view s : list)
    if (s == op) return true;
  return false;
}

}  // namespace

bool cuda_codegen_supports(std::string_view op, int num_operands) {
  if (num_operands == 1) return contains(kUnary, op);
  if (num_operands == 2) return contains(kBinary, op);
  return false;
}

std::string cuda_fused_source(std::string_view kernel_name, int num_inputs,
                              const std::vector<int64_t>& period,
                              std::span<const CudaFusedStep> steps, bool output_may_alias) {
  const char* op = "cuda_fusion";
  // Pointers that may alias are not declared __restrict__.
  const char* restrict_ = output_may_alias ? "" : " __restrict__";
  TF_CHECK_ARG(num_inputs >= 1 && static_cast<int>(period.size()) == num_inputs, op,
               "{} inputs with {} periods", num_inputs, period.size());
  for (int64_t m : period)
    TF_CHECK_ARG(m >= 0, op, "an input's period is {} (0: full size, 1: one element, m: a row "
                 "of m elements)", m);
  TF_CHECK_ARG(!steps.empty(), op, "a fused kernel needs at least one step");
  const int num_steps = static_cast<int>(steps.size());
  auto operand = [&](int o, int step) {
    TF_CHECK_ARG(o >= 0 && o < num_inputs + step, op,
                 "step {} reads operand {}, which is neither an input nor an earlier step", step,
                 o);
    return o < num_inputs ? fmt::format("x{}", o) : fmt::format("t{}", o - num_inputs);
  };

  // The per-element function: inputs in, the last step's value out.
  std::string params;
  for (int k = 0; k < num_inputs; ++k) params += fmt::format("{}float x{}", k ? ", " : "", k);
  std::string body;
  for (int s = 0; s < num_steps; ++s) {
    const CudaFusedStep& st = steps[static_cast<size_t>(s)];
    const int arity = st.b >= 0 ? 2 : 1;
    TF_CHECK_ARG(cuda_codegen_supports(st.op, arity), op,
                 "no generated CUDA form for {} with {} operand(s)", st.op, arity);
    const std::string args =
        arity == 2 ? operand(st.a, s) + ", " + operand(st.b, s) : operand(st.a, s);
    body += fmt::format("  const float t{} = tf_{}({});\n", s, st.op, args);
  }
  body += fmt::format("  return t{};\n", num_steps - 1);

  std::string src = kPrelude;
  src += fmt::format("TF_D float tf_fused_element({}) {{\n{}}}\n", params, body);

  // Kernel parameters and the code around the element function in each loop. Rows are read
  // through a running position (p: element kernel and tail, q: lane 0 of the float4 kernel),
  // advanced by the stride modulo the period: no division per element.
  std::string kparams, scalars, elem_args, tail_args, vec_loads, row_init, vec_row_init,
      tail_row_init, row_step, vec_row_step, tail_row_step;
  std::array<std::string, 4> lane_args;
  constexpr std::array<const char*, 4> lanes = {"x", "y", "z", "w"};
  for (int k = 0; k < num_inputs; ++k) {
    kparams += fmt::format("const float*{} in{}, ", restrict_, k);
    const std::string sep = k ? ", " : "";
    const int64_t m = period[static_cast<size_t>(k)];
    if (m == 1) {
      scalars += fmt::format("  const float s{} = in{}[0];\n", k, k);
      elem_args += fmt::format("{}s{}", sep, k);
      tail_args += fmt::format("{}s{}", sep, k);
      for (auto& l : lane_args) l += fmt::format("{}s{}", sep, k);
    } else if (m == 0) {
      elem_args += fmt::format("{}in{}[i]", sep, k);
      tail_args += fmt::format("{}in{}[i]", sep, k);
      vec_loads +=
          fmt::format("    const float4 v{} = reinterpret_cast<const float4*>(in{})[i];\n", k, k);
      for (size_t l = 0; l < 4; ++l) lane_args[l] += fmt::format("{}v{}.{}", sep, k, lanes[l]);
    } else {
      const std::string mm = fmt::format("{}LL", m);
      row_init += fmt::format("  long long p{0} = first % {1};\n  const long long dp{0} = stride "
                              "% {1};\n",
                              k, mm);
      row_step += fmt::format("    p{0} += dp{0};\n    if (p{0} >= {1}) p{0} -= {1};\n", k, mm);
      elem_args += fmt::format("{}in{}[p{}]", sep, k, k);
      tail_row_init += fmt::format("  long long p{0} = ((n4 << 2) + first) % {1};\n  const long "
                                   "long dp{0} = stride % {1};\n",
                                   k, mm);
      tail_args += fmt::format("{}in{}[p{}]", sep, k, k);
      vec_row_init += fmt::format("  long long q{0} = (4 * first) % {1};\n  const long long dq{0} "
                                  "= (4 * stride) % {1};\n",
                                  k, mm);
      vec_row_step += fmt::format("    q{0} += dq{0};\n    if (q{0} >= {1}) q{0} -= {1};\n", k, mm);
      // Lanes 1-3 of a row: the next positions, wrapped (more than once for rows under 4).
      for (size_t l = 0; l < 4; ++l) {
        const std::string pos = l == 0 ? fmt::format("q{}", k)
                                : m >= 4 ? fmt::format("(q{0} + {1} >= {2} ? q{0} + {1} - {2} : q{0} + {1})", k, l, mm)
                                         : fmt::format("(q{0} + {1}) % {2}", k, l, mm);
        lane_args[l] += fmt::format("{}in{}[{}]", sep, k, pos);
      }
    }
  }
  // The tail advances its row positions as the element kernel does.
  for (int k = 0; k < num_inputs; ++k) {
    const int64_t m = period[static_cast<size_t>(k)];
    if (m >= 2)
      tail_row_step += fmt::format("    p{0} += dp{0};\n    if (p{0} >= {1}LL) p{0} -= {1}LL;\n",
                                   k, m);
  }
  kparams += fmt::format("float*{} out, long long n", restrict_);
  const std::string head =
      "  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;\n"
      "  const long long first = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;\n";

  src += fmt::format(
      "extern \"C\" __global__ void __launch_bounds__(256) {}({}) {{\n{}{}{}"
      "  for (long long i = first; i < n; i += stride) {{\n"
      "    out[i] = tf_fused_element({});\n{}  }}\n}}\n",
      kernel_name, kparams, head, scalars, row_init, elem_args, row_step);

  std::string vec_body = vec_loads + "    float4 r;\n";
  for (size_t l = 0; l < 4; ++l)
    vec_body += fmt::format("    r.{} = tf_fused_element({});\n", lanes[l], lane_args[l]);
  vec_body += "    reinterpret_cast<float4*>(out)[i] = r;\n" + vec_row_step;
  src += fmt::format(
      "extern \"C\" __global__ void __launch_bounds__(256) {}_v4({}) {{\n{}{}"
      "  const long long n4 = n >> 2;\n{}"
      "  for (long long i = first; i < n4; i += stride) {{\n{}  }}\n{}"
      "  for (long long i = (n4 << 2) + first; i < n; i += stride) {{\n"
      "    out[i] = tf_fused_element({});\n{}  }}\n}}\n",
      kernel_name, kparams, head, scalars, vec_row_init, vec_body, tail_row_init, tail_args,
      tail_row_step);
  return src;
}

}  // namespace tapeflow::jit
