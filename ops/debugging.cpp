#include "ops/debugging.h"

#include <fmt/format.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <mutex>
#include <vector>

#include "core/check.h"
#include "core/parallel.h"
#include "ops/dispatch.h"

namespace tapeflow {

namespace {

std::atomic<bool> g_check_numerics{false};

// Counts over [b, e) of one dtype's elements, reading the bits: a half's or bfloat16's
// exponent field all ones is Inf (zero mantissa) or NaN.
template <class Bits, Bits kExp, Bits kMantissa, Bits kSign>
detail::NonFiniteCounts count_bits(const Bits* p, int64_t b, int64_t e) {
  detail::NonFiniteCounts c;
  for (int64_t i = b; i < e; ++i) {
    const Bits v = p[i];
    if ((v & kExp) != kExp) continue;
    if ((v & kMantissa) != 0)
      ++c.nan;
    else if ((v & kSign) != 0)
      ++c.neg_inf;
    else
      ++c.pos_inf;
  }
  return c;
}

template <class T>
detail::NonFiniteCounts count_floats(const T* p, int64_t b, int64_t e) {
  detail::NonFiniteCounts c;
  for (int64_t i = b; i < e; ++i) {
    const T v = p[i];
    if (std::isfinite(v)) continue;
    if (std::isnan(v))
      ++c.nan;
    else if (v < 0)
      ++c.neg_inf;
    else
      ++c.pos_inf;
  }
  return c;
}

detail::NonFiniteCounts count_cpu(const Tensor& t) {
  const int64_t n = t.num_elements();
  const void* data = t.raw_data();
  std::mutex mu;
  detail::NonFiniteCounts total;
  detail::parallel_for(n, int64_t{1} << 16, [&](int64_t b, int64_t e) {
    detail::NonFiniteCounts c;
    switch (t.dtype().id) {
      case DTypeId::Float16:
        c = count_bits<uint16_t, 0x7c00, 0x03ff, 0x8000>(static_cast<const uint16_t*>(data), b, e);
        break;
      case DTypeId::BFloat16:
        c = count_bits<uint16_t, 0x7f80, 0x007f, 0x8000>(static_cast<const uint16_t*>(data), b, e);
        break;
      case DTypeId::Float32:
        c = count_floats(static_cast<const float*>(data), b, e);
        break;
      case DTypeId::Float64:
        c = count_floats(static_cast<const double*>(data), b, e);
        break;
      default:
        break;
    }
    std::lock_guard lock(mu);
    total.nan += c.nan;
    total.pos_inf += c.pos_inf;
    total.neg_inf += c.neg_inf;
  });
  return total;
}

// TF's CheckNumerics message tail.
const char* had(const detail::NonFiniteCounts& c) {
  const bool inf = c.pos_inf + c.neg_inf > 0;
  if (inf && c.nan > 0) return "Tensor had Inf and NaN values";
  return inf ? "Tensor had Inf values" : "Tensor had NaN values";
}

std::string shapes_of(std::span<const Tensor> inputs) {
  std::string s;
  for (const Tensor& t : inputs) {
    if (!s.empty()) s += ", ";
    s += fmt::format("{} {}", dtype_name(t.dtype()), t.shape().to_string());
  }
  return s.empty() ? "none" : s;
}

// enable_check_numerics' message (TF's, with the counts of each kind).
[[noreturn]] void throw_detected(const std::string& op, bool graph, int index, int num_outputs,
                                 const Tensor& out, const std::string& input_shapes,
                                 const detail::NonFiniteCounts& c) {
  std::string counts;
  if (c.neg_inf > 0) counts += fmt::format(", # of -Inf elements: {}", c.neg_inf);
  if (c.pos_inf > 0) counts += fmt::format(", # of +Inf elements: {}", c.pos_inf);
  if (c.nan > 0) counts += fmt::format(", # of NaN elements: {}", c.nan);
  TF_THROW(InvalidArgumentError, op.c_str(),
           "!!! Detected Infinity or NaN in output {} of {} op {} (# of outputs: {}) !!! dtype: "
           "{}, shape: {}{}; inputs: {} (tf::debugging::enable_check_numerics is on)",
           index, graph ? "graph" : "eagerly-executing", op, num_outputs, dtype_name(out.dtype()),
           out.shape().to_string(), counts, input_shapes);
}

}  // namespace

namespace debugging {

void enable_check_numerics() {
  g_check_numerics.store(true, std::memory_order_relaxed);
}
void disable_check_numerics() {
  g_check_numerics.store(false, std::memory_order_relaxed);
}
bool check_numerics_enabled() {
  return g_check_numerics.load(std::memory_order_relaxed);
}

Tensor check_numerics(const Tensor& x, const std::string& message) {
  TF_CHECK_ARG(x.defined(), "check_numerics", "x is undefined");
  prims::CheckNumerics p;
  p.message = message;
  return detail::dispatch(p, {x});
}

}  // namespace debugging

namespace detail {

NonFiniteCounts count_nonfinite(const Tensor& t) {
  if (t.num_elements() == 0 || !is_floating(t.dtype())) return {};
  return t.placement().is_cpu() ? count_cpu(t) : count_nonfinite_cuda(t);
}

bool instrumented(const Primitive& prim) {
  return debugging::check_numerics_enabled() && !prim.is_view() && !prim.target_device() &&
         typeid(prim) != typeid(prims::CheckNumerics);
}

void check_op_outputs(const Primitive& prim, std::span<const Tensor> inputs,
                      std::span<const Tensor> outputs) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& out = outputs[i];
    if (!out.defined() || !is_floating(out.dtype())) continue;
    const NonFiniteCounts c = count_nonfinite(out);
    if (c.any())
      throw_detected(prim.name(), false, static_cast<int>(i), static_cast<int>(outputs.size()), out,
                     shapes_of(inputs), c);
  }
}

Tensor check_traced_output(const Primitive& prim, std::span<const Tensor> inputs,
                           const Tensor& output, int index) {
  if (!is_floating(output.dtype())) return output;
  prims::CheckNumerics p;
  p.op = prim.name();
  p.output = index;
  p.num_op_outputs = prim.num_outputs();
  p.input_shapes = shapes_of(inputs);
  return dispatch(p, {output});
}

}  // namespace detail

namespace prims {

void CheckNumerics::infer(std::span<const Tensor> in, std::span<TensorMeta> out) const {
  TF_CHECK_ARG(is_floating(in[0].dtype()), name(),
               "x must be a floating tensor (float16, bfloat16, float32 or float64), got {} of "
               "shape {}",
               dtype_name(in[0].dtype()), in[0].shape().to_string());
  out[0] = {in[0].shape(), in[0].dtype()};
}

bool CheckNumerics::produce(std::span<const Tensor> in, std::span<Tensor> out, Device) const {
  const detail::NonFiniteCounts c = detail::count_nonfinite(in[0]);
  if (c.any()) {
    if (!op.empty()) throw_detected(op, true, output, num_op_outputs, in[0], input_shapes, c);
    TF_THROW(
        InvalidArgumentError, name(), "{}{} : {}",
        gradient_check ? "Not a number (NaN) or infinity (Inf) values detected in gradient. " : "",
        message, had(c));
  }
  // A new tensor on the same storage: tapes tell values apart by their tensors.
  out[0] = detail::view(in[0], in[0].shape());
  return true;
}

// produce() does the work on every device.
void CheckNumerics::eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const {
  produce(in, out, in[0].placement());
}
void CheckNumerics::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  produce(in, out, in[0].placement());
}

std::vector<Tensor> CheckNumerics::vjp(std::span<const Tensor>, std::span<const Tensor> cot,
                                       std::span<const int>, std::span<const Tensor>) const {
  // An enable_check_numerics node passes the gradient on: the ops that made it were checked.
  if (!op.empty()) return {cot[0]};
  CheckNumerics p;
  p.message = message;
  p.gradient_check = true;
  return {detail::dispatch(p, {cot[0]})};
}

std::string CheckNumerics::attributes() const {
  if (!op.empty()) return fmt::format("op={}, output={}", op, output);
  return fmt::format("message=\"{}\"{}", message, gradient_check ? ", gradient" : "");
}

}  // namespace prims

}  // namespace tapeflow
