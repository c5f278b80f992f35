// tf.debugging's numeric checks: check_numerics(x, message), which fails on NaN or Inf, and
// enable_check_numerics(), which checks the output of every op from then on (eager ops and the
// ops of functions traced afterwards) and names the first op that makes a NaN or an Inf.
// tf.debugging's assertions (ops/debugging_asserts.cpp): the value checks (assert_equal,
// assert_less, ..., assert_near, assert_positive, ..., Assert) check eagerly and, inside
// tf::function, at every call; the static ones (assert_rank, assert_type, ...) when called.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ops/primitive.h"
#include "ops/print.h"

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

// TF's tf.debugging.assert_all_finite: check_numerics(t, message).
Tensor assert_all_finite(const Tensor& t, const std::string& message);

// TF's element-wise assertions: each raises InvalidArgumentError unless the condition holds for
// every element of the broadcast of x and y (an empty tensor passes), with TF's eager message:
//   "[assert_less] <message>\nCondition x < y did not hold.\nIndices of first 2 different
//   values:\n[[0]\n [2]]\nCorresponding x values:\n[1 3]\nCorresponding y values:\n[1 2]\nFirst 3
//   elements of x:\n[1 2 3]\nFirst 3 elements of y:\n[1 3 2]"
// (values in tf::print's format; the indices are of the broadcast shape, also where x and y
// differ in shape, which TF leaves out). summarize caps each list (negative: all). x and y
// follow the comparison ops' rules (tf::less ...): one dtype after a C++ scalar adopts the
// other's, shapes that broadcast; their errors name the comparison. Inside tf::function the
// check is a graph node kept whatever uses it, run at every call (so that one trace checks every
// call's values; a function holding one is not captured as a CUDA graph: the check reads one
// bool back on the host per call). Nothing is returned (TF's eager None); no gradient is
// involved.
void assert_equal(const Tensor& x, const Tensor& y, const std::string& message = "",
                  int summarize = 3);
void assert_none_equal(const Tensor& x, const Tensor& y, const std::string& message = "",
                       int summarize = 3);
void assert_less(const Tensor& x, const Tensor& y, const std::string& message = "",
                 int summarize = 3);
void assert_less_equal(const Tensor& x, const Tensor& y, const std::string& message = "",
                       int summarize = 3);
void assert_greater(const Tensor& x, const Tensor& y, const std::string& message = "",
                    int summarize = 3);
void assert_greater_equal(const Tensor& x, const Tensor& y, const std::string& message = "",
                          int summarize = 3);
// |x - y| <= atol + rtol * |y| element-wise for floating x and y (TF's assert_near; NaN fails).
// rtol and atol default to 10 * epsilon of the dtype (float16: 1e-2 ... float64: 2.2e-15).
void assert_near(const Tensor& x, const Tensor& y, std::optional<double> rtol = std::nullopt,
                 std::optional<double> atol = std::nullopt, const std::string& message = "",
                 int summarize = 3);
// x > 0, x < 0, x >= 0, x <= 0 (the message says "Condition x > 0 did not hold.").
void assert_positive(const Tensor& x, const std::string& message = "", int summarize = 3);
void assert_negative(const Tensor& x, const std::string& message = "", int summarize = 3);
void assert_non_negative(const Tensor& x, const std::string& message = "", int summarize = 3);
void assert_non_positive(const Tensor& x, const std::string& message = "", int summarize = 3);
// TF's tf.debugging.Assert: raises InvalidArgumentError "[Assert] assertion failed: [x is]
// [1 2 3 ... 6 7 8]" unless the bool scalar `condition` is true: data's strings and scalars in
// brackets, its other tensors in tf::print's format, summarised to `summarize` elements per
// dimension edge.
// Checked at every call inside tf::function, as the assertions above.
void Assert(const Tensor& condition, const std::vector<PrintArg>& data, int summarize = 3);

// The static assertions: the shape or dtype, known when called (also while tracing), checked
// then; InvalidArgumentError "[assert_rank] <message> Tensor must have rank 2. Received rank 1,
// shape (5)" (TF raises ValueError or TypeError).
void assert_rank(const Tensor& x, int rank, const std::string& message = "");
void assert_rank_at_least(const Tensor& x, int rank, const std::string& message = "");
void assert_rank_in(const Tensor& x, const std::vector<int>& ranks,
                    const std::string& message = "");
void assert_scalar(const Tensor& x, const std::string& message = "");
void assert_type(const Tensor& x, DType dtype, const std::string& message = "");
void assert_integer(const Tensor& x, const std::string& message = "");
// TF's tf.debugging.assert_same_float_dtype: the one floating dtype of the tensors and of
// `dtype` (when given); an InvalidArgumentError when they differ or one is not floating. float32
// when there is neither a tensor nor a dtype, as TF.
DType assert_same_float_dtype(const std::vector<Tensor>& tensors,
                              std::optional<DType> dtype = std::nullopt);
// TF's tf.debugging.is_numeric_tensor: a defined tensor of a numeric dtype (not bool).
bool is_numeric_tensor(const Tensor& x);

// One size of a shape given to assert_shapes: an integer (or a string that parses as one) is an
// explicit size; "." (or "") any size; "*" or "..." as the first entry any number of outer
// dimensions (the rest then constrain the innermost ones); any other string names a size that
// must be the same wherever the name appears.
struct ShapeDim {
  ShapeDim(int64_t size) : size(size) {}                       // NOLINT: implicit, as Python's ints
  ShapeDim(int size) : size(size) {}                           // NOLINT
  ShapeDim(const char* name) : ShapeDim(std::string(name)) {}  // NOLINT
  ShapeDim(std::string name);                                  // NOLINT
  std::optional<int64_t> size;
  std::string name;
};
// TF's tf.debugging.assert_shapes: every tensor has its shape, and the named sizes agree:
//   assert_shapes({{x, {"N", "Q"}}, {y, {"N", "D"}}, {param, {"Q"}}, {scalar, {}}});
// As TF, a scalar and a shape of no entries count as a shape of one entry of size 1. The ranks
// and the known sizes are checked when called (also while tracing), with TF's messages
// ("<message>.  Specified by tensor shape=(10, 3) dtype=float32 dimension 1.  Tensor shape=(10,
// 7) dtype=float32 dimension 1 must have size 3.  Received size 7, shape (10, 7)"),
// InvalidArgumentError (TF raises ValueError). Inside tf::function each trace sees its call's
// sizes, and a graph traced for None dimensions serves only calls whose sizes keep the traced
// equalities, so a call that breaks the shapes retraces and raises. An unknown size (a Keras
// symbolic tensor's None) is not checked.
void assert_shapes(const std::vector<std::pair<Tensor, std::vector<ShapeDim>>>& shapes,
                   const std::string& message = "");

}  // namespace debugging

namespace detail {

// The value check behind the assertions, for other ops' run-time checks: raises
// InvalidArgumentError "[op] <message>\nCondition <condition> did not hold.\nIndices of first
// ...\nCorresponding <names[k]> values: ..." unless every element of the bool tensor cond holds;
// operands (one name each) broadcast to cond's shape. Eagerly now; traced, at every call.
void check_elementwise(const char* op, const std::string& condition, const Tensor& cond,
                       const std::vector<Tensor>& operands, const std::vector<std::string>& names,
                       const std::string& message = "", int summarize = 3);

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
// The value check behind the assertions above: inputs (ok, ...) where ok is a bool scalar,
// then, for a comparison, the element-wise result and the operands (cond, x, y) or (cond, x),
// for Assert the data tensors. Raises InvalidArgumentError when ok is false; no outputs. A host
// op on every device (it reads ok back, and the rest only to write the message).
struct AssertThat final : PrimitiveBase<AssertThat> {
  std::string op;         // "assert_less", "Assert"
  std::string message;    // the user's message
  std::string condition;  // "x < y", "x > 0"; empty for Assert
  std::string detail;     // a line after the condition (assert_near's tolerances)
  std::vector<std::string> names;  // the operands' names in the message ("x", "y")
  // Assert's data: text pieces, std::monostate for the next tensor input.
  std::vector<std::variant<std::monostate, std::string>> pieces;
  int summarize = 3;

  const char* name() const override { return "assert"; }
  int num_outputs() const override { return 0; }
  void infer(std::span<const Tensor> inputs, std::span<TensorMeta> outputs) const override;
  TF_DECLARE_KERNELS
  bool has_side_effects() const override { return true; }
  std::string attributes() const override;
};
}  // namespace prims

}  // namespace tapeflow
