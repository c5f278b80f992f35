// tf.debugging's numeric checks: check_numerics(x, message), which fails on NaN or Inf, and
// enable_check_numerics(), which checks the output of every op from then on (eager ops and the
// ops of functions traced afterwards) and names the first op that makes a NaN or an Inf.
#pragma once

#include <cstdint>
#include <string>

#include "ops/primitive.h"

namespace tapeflow {
namespace debugging {

// TF's tf.debugging.check_numerics: returns x (the same storage, no copy) when every element is
// finite, else raises InvalidArgumentError "[check_numerics] <message> : Tensor had NaN values"
// ("Inf values", "Inf and NaN values"), as TF. Floating dtypes only (float16, bfloat16, float32,
// float64: others are an InvalidArgumentError naming the dtype, as TF). Inside tf::function the
// check is a graph node that runs at every replay and is never removed (a function holding one
// is not captured as a CUDA graph: the check reads the count back on the host). Its gradient is
// the incoming gradient, checked with the message "Not a number (NaN) or infinity (Inf) values
// detected in gradient. <message>", as TF's.
Tensor check_numerics(const Tensor& x, const std::string& message);

// TF's tf.debugging.enable_check_numerics(): from now on, every floating output of every op is
// checked as it is made, and the first NaN or Inf raises InvalidArgumentError naming the op,
// the output, its dtype and shape, the counts of NaN, +Inf and -Inf elements and the inputs'
// shapes: "[log] !!! Detected Infinity or NaN in output 0 of eagerly-executing op log (# of
// outputs: 1) !!! ...". Backward ops are checked too (a gradient tape runs ops). Functions
// traced while it is on get a check node after each op ("graph op" in the message), which
// stays in those graphs after disable_check_numerics(); graphs traced before are not checked
// (TF's rule). Process-wide; meant for debugging: each check reads the counts back (a device
// synchronisation on CUDA) and traced graphs lose their fusion.
void enable_check_numerics();
// TF's tf.debugging.disable_check_numerics(): eager ops and later traces are not checked.
void disable_check_numerics();
bool check_numerics_enabled();

}  // namespace debugging

namespace detail {

// The non-finite elements of a floating tensor (any device; CUDA waits for the stream).
struct NonFiniteCounts {
  int64_t nan = 0, pos_inf = 0, neg_inf = 0;
  bool any() const { return nan + pos_inf + neg_inf > 0; }
};
NonFiniteCounts count_nonfinite(const Tensor& t);
// The CUDA kernel behind it (ops/cuda/debugging.cu; builds without CUDA raise
// UnimplementedError).
NonFiniteCounts count_nonfinite_cuda(const Tensor& t);

// enable_check_numerics' eager check, called by dispatch() after an op ran on real tensors.
void check_op_outputs(const Primitive& prim, std::span<const Tensor> inputs,
                      std::span<const Tensor> outputs);
// Whether dispatch() instruments this op's outputs (check_numerics_enabled() and an op that
// computes values: not a view, a copy or a check itself).
bool instrumented(const Primitive& prim);
// enable_check_numerics' check of output `index` of `prim` in a trace: a CheckNumerics node.
Tensor check_traced_output(const Primitive& prim, std::span<const Tensor> inputs,
                           const Tensor& output, int index);

}  // namespace detail

namespace prims {
// Passes its input through (produce(): the same storage) after checking it; raises on NaN/Inf.
struct CheckNumerics final : PrimitiveBase<CheckNumerics> {
  // check_numerics(x, message): the user's message. An enable_check_numerics node: the checked
  // op's name, output index, output count and input shapes instead.
  std::string message;
  std::string op;  // empty for check_numerics()
  int output = 0, num_op_outputs = 1;
  std::string input_shapes;
  bool gradient_check = false;  // the check of a gradient (TF's message prefix)

  const char* name() const override { return "check_numerics"; }
  void infer(std::span<const Tensor> inputs, std::span<TensorMeta> outputs) const override;
  TF_DECLARE_KERNELS
  bool produce(std::span<const Tensor> inputs, std::span<Tensor> outputs,
               Device device) const override;
  std::vector<Tensor> vjp(std::span<const Tensor> primals, std::span<const Tensor> cotangents,
                          std::span<const int> argnums,
                          std::span<const Tensor> outputs) const override;
  uint32_t vjp_saves() const override { return 0; }
  bool has_side_effects() const override { return true; }
  std::string attributes() const override;
};
}  // namespace prims

}  // namespace tapeflow
