// tf::print: prints its arguments (tensors and text) separated by spaces, at every call, also
// inside a traced function where it becomes a graph node (TF's tf.print).
#pragma once

#include <iosfwd>
#include <string>
#include <variant>
#include <vector>

#include "ops/primitive.h"

namespace tapeflow {

using PrintArg = std::variant<Tensor, std::string>;

void print_args(const std::vector<PrintArg>& args);

inline PrintArg to_print_arg(const Tensor& t) { return t; }
inline PrintArg to_print_arg(const std::string& s) { return s; }
inline PrintArg to_print_arg(const char* s) { return std::string(s); }
template <class T>
  requires std::is_arithmetic_v<T>
PrintArg to_print_arg(T v) {
  return Tensor(v);
}

// tf::print(x), tf::print("loss:", loss)
template <class... Args>
void print(const Args&... args) {
  std::vector<PrintArg> v;
  (v.emplace_back(to_print_arg(args)), ...);
  print_args(v);
}

namespace detail {
// Where tf::print writes: std::cerr by default, as TF's tf.print writes to stderr.
void set_print_stream(std::ostream* os);
// TF's tf.print text of a tensor: "[1 2 3 ... 8 9 10]", summarising 3 items per edge.
std::string print_v2_text(const Tensor& t, int summarize = 3);
// The elements of t at the given row-major flat positions, as one line in print_v2_text's
// format: "[1 3 4]" (t is read back to the host; the positions must be in range).
std::string print_v2_elements(const Tensor& t, const std::vector<int64_t>& flat);
}  // namespace detail

namespace prims {
struct Print final : PrimitiveBase<Print> {
  // Text pieces; std::monostate marks the position of the next tensor input.
  std::vector<std::variant<std::monostate, std::string>> pieces;
  const char* name() const override { return "print"; }
  int num_outputs() const override { return 0; }
  void infer(std::span<const Tensor>, std::span<TensorMeta>) const override {}
  TF_DECLARE_KERNELS
  bool has_side_effects() const override { return true; }
  std::string attributes() const override;
};
}  // namespace prims

}  // namespace tapeflow
