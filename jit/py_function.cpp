// tf::py_function (jit/py_function.h): a primitive that calls a C++ callable in produce().
#include "jit/py_function.h"

#include <fmt/format.h>

#include <memory>
#include <string>

#include "autograd/tape.h"
#include "core/check.h"
#include "core/context.h"
#include "core/device.h"
#include "jit/control_flow_internal.h"
#include "ops/copy.h"
#include "ops/dispatch.h"
#include "ops/factory.h"
#include "ops/primitive.h"

namespace tapeflow {

namespace {

using jit::cf::next_node_id;

std::string type_text(DType dtype, const TensorShape& shape) {
  return jit::cf::type_text(TensorMeta{shape, dtype});
}

// fn's results against Tout: as many, each of its dtype and a compatible shape.
void check_results(const std::vector<Tensor>& r, const std::vector<TensorSpec>& Tout) {
  const char* op = "py_function";
  TF_CHECK_ARG(r.size() == Tout.size(), op, "fn returned {} tensors for the {} of Tout", r.size(),
               Tout.size());
  for (size_t k = 0; k < r.size(); ++k) {
    TF_CHECK_ARG(r[k].defined(), op, "fn's result {} is an undefined tensor", k);
    TF_CHECK_ARG(r[k].dtype() == Tout[k].dtype && Tout[k].is_compatible_with(r[k].shape()), op,
                 "fn's result {} is {}, but Tout[{}] is {}", k,
                 type_text(r[k].dtype(), r[k].shape()), k, type_text(Tout[k].dtype, Tout[k].shape));
  }
}

class PyFunctionOp final : public PrimitiveBase<PyFunctionOp> {
 public:
  PyFunctionFn fn;
  std::vector<TensorSpec> Tout;
  Device device;
  uint64_t id = 0;

  const char* name() const override { return "py_function"; }
  int num_outputs() const override { return static_cast<int>(Tout.size()); }
  void infer(std::span<const Tensor>, std::span<TensorMeta> out) const override {
    for (size_t k = 0; k < out.size(); ++k) out[k] = {Tout[k].shape, Tout[k].dtype};
  }
  void eval_cpu(std::span<const Tensor>, std::span<Tensor>) const override {
    TF_THROW(InternalError, name(), "runs through produce(), never as a kernel");
  }
  void eval_cuda(std::span<const Tensor>, std::span<Tensor>) const override {
    TF_THROW(InternalError, name(), "runs through produce(), never as a kernel");
  }
  bool produce(std::span<const Tensor> in, std::span<Tensor> out, Device) const override {
    std::vector<Tensor> r;
    {
      detail::PauseTapes pause;  // tapes record this node, with its vjp
      r = fn(std::vector<Tensor>(in.begin(), in.end()));
    }
    check_results(r, Tout);
    for (size_t k = 0; k < out.size(); ++k) {
      // A tensor of its own (fn may return an input, which a tape must tell apart).
      const Tensor here = r[k].placement() == device ? r[k] : detail::copy_to(r[k], device);
      out[k] = detail::view(here, here.shape());
    }
    return true;
  }
  bool has_side_effects() const override { return true; }
  std::optional<Device> target_device() const override { return device; }
  uint32_t vjp_saves() const override { return 0xFFFFFFFFu; }  // every input and output
  std::string attributes() const override {
    std::vector<std::string> types;
    for (const TensorSpec& s : Tout) types.push_back(type_text(s.dtype, s.shape));
    return fmt::format("Tout=[{}], id={}", fmt::join(types, ", "), id);
  }

  // A py_function of (inputs, cotangents) that runs fn again under a tape.
  std::vector<Tensor> vjp(std::span<const Tensor> primals, std::span<const Tensor> cotangents,
                          std::span<const int> argnums,
                          std::span<const Tensor> outputs) const override {
    std::vector<int> wanted;
    std::vector<TensorSpec> grad_types;
    for (int a : argnums) {
      const Tensor& p = primals[static_cast<size_t>(a)];
      if (!is_floating(p.dtype())) continue;
      wanted.push_back(a);
      grad_types.push_back(TensorSpec(p.shape(), p.dtype()));
    }
    std::vector<Tensor> result(argnums.size());
    if (wanted.empty()) return result;
    const size_t n_in = primals.size();
    PyFunctionFn forward = fn;
    const std::vector<TensorSpec> types = Tout;
    auto grad_fn = [forward, types, wanted, n_in](const std::vector<Tensor>& a) {
      const std::vector<Tensor> inputs(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(n_in));
      GradientTape tape;
      std::vector<Tensor> sources;
      for (int w : wanted) {
        tape.watch(inputs[static_cast<size_t>(w)]);
        sources.push_back(inputs[static_cast<size_t>(w)]);
      }
      const std::vector<Tensor> outs = forward(inputs);
      check_results(outs, types);
      std::vector<Tensor> targets, seeds;
      for (size_t k = 0; k < outs.size(); ++k) {
        if (!is_floating(outs[k].dtype())) continue;
        targets.push_back(outs[k]);
        seeds.push_back(a[n_in + k]);
      }
      if (targets.empty()) {
        std::vector<Tensor> zeros;
        for (const Tensor& s : sources) zeros.push_back(zeros_like(s));
        return zeros;
      }
      return tape.gradient(targets, sources, seeds, UnconnectedGradients::ZERO);
    };
    std::vector<Tensor> inputs(primals.begin(), primals.end());
    for (size_t k = 0; k < cotangents.size(); ++k)
      inputs.push_back(cotangents[k].defined() ? cotangents[k] : zeros_like(outputs[k]));
    const std::vector<Tensor> grads = py_function(grad_fn, inputs, grad_types);
    for (size_t w = 0, j = 0; w < argnums.size() && j < wanted.size(); ++w)
      if (argnums[w] == wanted[j]) result[w] = grads[j++];
    return result;
  }
};

}  // namespace

std::vector<Tensor> py_function(const PyFunctionFn& fn, const std::vector<Tensor>& inputs,
                                const std::vector<TensorSpec>& Tout) {
  const char* op = "py_function";
  TF_CHECK_ARG(static_cast<bool>(fn), op, "fn is empty");
  for (size_t k = 0; k < inputs.size(); ++k)
    TF_CHECK_ARG(inputs[k].defined(), op, "input {} is an undefined tensor", k);
  const auto& ctx = detail::thread_context();
  if (ctx.trace == nullptr) {
    std::vector<Tensor> r = fn(inputs);
    check_results(r, Tout);
    return r;
  }
  for (size_t k = 0; k < Tout.size(); ++k)
    TF_CHECK_ARG(Tout[k].shape.is_fully_defined(), op,
                 "Tout[{}] is {}: inside tf::function every result's shape must be known (the "
                 "graph's later ops are shaped by it)",
                 k, type_text(Tout[k].dtype, Tout[k].shape));
  auto node = std::make_shared<PyFunctionOp>();
  node->fn = fn;
  node->Tout = Tout;
  node->device = !ctx.device_stack.empty() ? ctx.device_stack.back()
                 : inputs.empty()          ? detail::default_device()
                                           : inputs[0].placement();
  node->id = next_node_id();
  return detail::dispatch_multi(*node, inputs);
}

Tensor py_function(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                   const std::vector<Tensor>& inputs, const TensorSpec& Tout) {
  TF_CHECK_ARG(static_cast<bool>(fn), "py_function", "fn is empty");
  // By value: a traced call keeps fn in its graph node.
  return py_function([fn](const std::vector<Tensor>& x) { return std::vector<Tensor>{fn(x)}; },
                     inputs, std::vector<TensorSpec>{Tout})[0];
}

}  // namespace tapeflow
