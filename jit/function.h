// tf::function: wraps a callable for tracing into a graph. Tracing, the signature cache and
// replay arrive with the tracing issue; until then a Function runs its callable eagerly on every
// call (same results, no speed-up) and tracing_count() stays 0.
#pragma once

#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "core/tensor_spec.h"

namespace tapeflow {

struct FunctionOptions {
  std::vector<TensorSpec> input_signature;
  bool reduce_retracing = false;
  bool jit_compile = false;
  std::string name;
};

template <class F>
class Function {
 public:
  Function(F fn, FunctionOptions options) : fn_(std::move(fn)), options_(std::move(options)) {}

  // Arguments convert as the callable's parameters require (C++ scalars become tensors).
  template <class... Args>
  decltype(auto) operator()(Args&&... args) const {
    return fn_(std::forward<Args>(args)...);
  }

  // Number of graphs traced so far (0: this build runs the callable eagerly).
  int tracing_count() const { return 0; }
  const FunctionOptions& options() const { return options_; }

 private:
  F fn_;
  FunctionOptions options_;
};

template <class F>
Function<std::decay_t<F>> function(F&& fn, FunctionOptions options = {}) {
  return Function<std::decay_t<F>>(std::forward<F>(fn), std::move(options));
}

}  // namespace tapeflow
