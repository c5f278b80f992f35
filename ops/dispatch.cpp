#include "ops/dispatch.h"
#include "ops/rethrow.h"

#include <array>
#include <string>
#include <string_view>
#include <typeinfo>

#include "core/check.h"
#include "core/log.h"
#include "ops/copy.h"
#include "ops/debugging.h"
#include "ops/hooks.h"

namespace tapeflow {

std::vector<Tensor> Primitive::vjp(std::span<const Tensor>, std::span<const Tensor>,
                                   std::span<const int>, std::span<const Tensor>) const {
  TF_THROW(InvalidArgumentError, name(),
           "no gradient is defined for this op (see docs/autodiff.md for the ops without "
           "gradients)");
}

bool Primitive::is_equivalent(const Primitive& other) const {
  return typeid(*this) == typeid(other) && attributes() == other.attributes();
}

namespace detail {

Device current_device() {
  auto& st = thread_context().device_stack;
  return st.empty() ? default_device() : st.back();
}

namespace {

template <class E>
void rethrow_if(const Error& e, const std::string& message) {
  if (dynamic_cast<const E*>(&e) != nullptr) throw E(message);
}

}  // namespace

[[noreturn]] void rethrow_with_message(const Error& e, const std::string& message) {
  rethrow_if<InvalidArgumentError>(e, message);
  rethrow_if<NotFoundError>(e, message);
  rethrow_if<ResourceExhaustedError>(e, message);
  rethrow_if<FailedPreconditionError>(e, message);
  rethrow_if<UnimplementedError>(e, message);
  rethrow_if<DeadlineExceededError>(e, message);
  rethrow_if<UnavailableError>(e, message);
  rethrow_if<InternalError>(e, message);
  if (typeid(e) != typeid(Error)) throw;  // a subclass this layer does not know: keep it
  throw Error(message);
}

[[noreturn]] void rethrow_named(std::string_view op, const Error& e) {
  rethrow_with_message(e, fmt::format("[{}] {}", op, e.what()));
}

void run_kernel(const Primitive& prim, Device device, std::span<const Tensor> inputs,
                std::span<Tensor> outputs) {
  if (device.is_cpu()) {
    prim.eval_cpu(inputs, outputs);
    return;
  }
  try {
    prim.eval_cuda(inputs, outputs);
  } catch (const Error& e) {
    // An error without an op's name (a CUDA, cuBLAS, cuDNN or cuSOLVER call's, which name the
    // call) is raised again, of the same type, with the primitive's name in front.
    if (std::string_view(e.what()).starts_with('[')) throw;  // names an op already
    rethrow_named(prim.name(), e);
  }
}

namespace {

// The op's device: the target of a copy, the innermost DeviceScope, else the first strongly
// typed input's device (weak C++ scalars follow it), else TF's default placement.
Device choose_device(const Primitive& prim, std::span<const Tensor> inputs,
                     const ThreadContext& ctx) {
  if (auto t = prim.target_device()) return *t;
  if (!ctx.device_stack.empty()) return ctx.device_stack.back();
  if (inputs.empty()) return default_device();
  for (const Tensor& t : inputs)
    if (!t.is_weak()) return t.placement();
  return inputs[0].placement();
}

template <class Outputs>
void execute(const Primitive& prim, std::span<const Tensor> inputs, Outputs& outputs) {
  auto& ctx = thread_context();
  const int n_out = prim.num_outputs();

  for (const Tensor& t : inputs)
    TF_CHECK_ARG(t.defined(), prim.name(), "an input is an undefined tensor (TF's None)");

  // 1. placement (inputs on other devices are copied through the Copy op, so tapes see it).
  const Device dev = choose_device(prim, inputs, ctx);
  bool any_moved = false;
  if (!prim.target_device())
    for (const Tensor& t : inputs) any_moved |= t.placement() != dev;
  std::array<Tensor, 4> moved_small;
  std::vector<Tensor> moved_big;
  std::span<const Tensor> in = inputs;
  if (any_moved) {
    std::span<Tensor> moved;
    if (inputs.size() <= moved_small.size()) {
      moved = std::span<Tensor>(moved_small.data(), inputs.size());
    } else {
      moved_big.resize(inputs.size());
      moved = moved_big;
    }
    for (size_t i = 0; i < inputs.size(); ++i)
      moved[i] = inputs[i].placement() == dev ? inputs[i] : copy_to(inputs[i], dev);
    in = moved;
  }

  // 2. inference
  std::array<TensorMeta, 4> metas_small;
  std::vector<TensorMeta> metas_big;
  std::span<TensorMeta> metas;
  if (n_out <= 4) {
    metas = std::span<TensorMeta>(metas_small.data(), n_out);
  } else {
    metas_big.resize(n_out);
    metas = metas_big;
  }
  try {
    prim.infer(in, metas);
  } catch (const InvalidArgumentError& e) {
    // An output shape too large to count fails in TensorShape: say which op made it.
    if (!std::string_view(e.what()).starts_with("[TensorShape]")) throw;
    rethrow_named(prim.name(), e);
  }

  // 3. trace or run
  bool symbolic_input = false;
  for (const Tensor& t : in) symbolic_input |= t.is_symbolic();
  if (ctx.trace) {
    ctx.trace->add_node(prim, in, metas, dev, outputs);
  } else {
    TF_CHECK_T(FailedPreconditionError, !symbolic_input, prim.name(),
               "an input is a symbolic tensor from a finished trace; symbolic tensors exist "
               "only while a tf::function is being traced");
    if (debugging::log_device_placement())
      TF_LOG_INFO("Executing op {} in device {}", prim.name(), dev.to_string());
    if (!prim.produce(in, std::span<Tensor>(outputs.data(), n_out), dev)) {
      if (prim.is_view()) {
        for (int i = 0; i < n_out; ++i) outputs[i] = view(in[0], metas[i].shape);
      } else {
        for (int i = 0; i < n_out; ++i) {
          try {
            outputs[i] = empty(metas[i].shape, metas[i].dtype, dev);
          } catch (const ResourceExhaustedError& e) {  // say which op's output did not fit
            TF_THROW(ResourceExhaustedError, prim.name(), "its {} output of shape {}: {}",
                     dtype_name(metas[i].dtype), metas[i].shape.to_string(), e.what());
          } catch (const InvalidArgumentError& e) {  // too many elements to count
            if (!std::string_view(e.what()).starts_with("[TensorShape]")) throw;
            rethrow_named(prim.name(), e);
          }
        }
      }
      run_kernel(prim, dev, in, outputs);
    }
    if (instrumented(prim))
      check_op_outputs(prim, in, std::span<const Tensor>(outputs.data(), n_out));
  }

  // 4. tapes (a tape may pause itself while it records, so iterate over a snapshot count)
  if (!ctx.tapes.empty()) {
    const size_t n_tapes = ctx.tapes.size();
    for (size_t i = 0; i < n_tapes && i < ctx.tapes.size(); ++i)
      ctx.tapes[i]->record(prim, in, std::span<const Tensor>(outputs.data(), n_out));
  }

  // 5. enable_check_numerics in a trace: each floating output passes through a check node.
  if (ctx.trace && instrumented(prim))
    for (int i = 0; i < n_out; ++i) outputs[i] = check_traced_output(prim, in, outputs[i], i);
}

}  // namespace

Tensor dispatch(const Primitive& prim, std::span<const Tensor> inputs) {
  TF_ASSERT(prim.num_outputs() == 1);
  std::array<Tensor, 1> out;
  execute(prim, inputs, out);
  return std::move(out[0]);
}

std::vector<Tensor> dispatch_multi(const Primitive& prim, std::span<const Tensor> inputs) {
  std::vector<Tensor> out(prim.num_outputs());
  execute(prim, inputs, out);
  return out;
}

}  // namespace detail
}  // namespace tapeflow
