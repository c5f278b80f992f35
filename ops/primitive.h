// Primitive: one struct per op kernel, with shape/dtype inference, a CPU and a CUDA kernel, a
// vector-Jacobian product written with ops, and flags the graph passes read. Primitives are
// immutable after construction and may be shared between threads.
#pragma once

#include <iosfwd>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace tapeflow {

struct TensorMeta {
  TensorShape shape;
  DType dtype;
  // The bytes of a contiguous tensor of this shape and dtype (shape fully known).
  size_t nbytes() const { return static_cast<size_t>(shape.num_elements()) * dtype_size(dtype); }
  bool operator==(const TensorMeta& o) const { return dtype == o.dtype && shape == o.shape; }
};

class Primitive {
 public:
  Primitive() = default;
  virtual ~Primitive() = default;
  Primitive(const Primitive&) = default;
  Primitive& operator=(const Primitive&) = delete;

  // TF-style snake_case op name used in errors and graph dumps ("matmul").
  virtual const char* name() const = 0;
  virtual int num_outputs() const { return 1; }
  // Checks the inputs and writes each output's shape and dtype; throws InvalidArgumentError.
  virtual void infer(std::span<const Tensor> inputs, std::span<TensorMeta> outputs) const = 0;
  // Kernels. Inputs all live on one device; outputs arrive allocated there (unless is_view()).
  virtual void eval_cpu(std::span<const Tensor> inputs, std::span<Tensor> outputs) const = 0;
  virtual void eval_cuda(std::span<const Tensor> inputs, std::span<Tensor> outputs) const = 0;
  // Cotangents of the inputs listed in argnums, written with ops so that they can themselves be
  // recorded and traced. The default throws: the op has no gradient.
  virtual std::vector<Tensor> vjp(std::span<const Tensor> primals,
                                  std::span<const Tensor> cotangents,
                                  std::span<const int> argnums,
                                  std::span<const Tensor> outputs) const;
  // What vjp() reads besides the cotangents: bit i (i < 16) for input i, bit 16 + j for output
  // j. A tape keeps only these tensors alive; the others reach vjp() as storage-less
  // placeholders that carry shape, dtype and device (reading their data is an error).
  static constexpr uint32_t kSaveInputs = 0xFFFFu;
  static constexpr uint32_t save_input(int i) { return 1u << i; }
  static constexpr uint32_t save_output(int j) { return 1u << (16 + j); }
  virtual uint32_t vjp_saves() const { return kSaveInputs; }
  // Whether vjp() takes an undefined cotangent for an output that no target depends on (ops
  // with several outputs whose vjp can then skip that output's term); otherwise the tape hands
  // zeros of the output's shape.
  virtual bool vjp_accepts_undefined_cotangents() const { return false; }
  // A copy that outlives the call (tapes and graphs hold primitives).
  virtual std::shared_ptr<Primitive> clone() const = 0;

  // The output shares the first input's storage (no allocation, no kernel work).
  virtual bool is_view() const { return false; }
  // Ops that make their outputs themselves instead of filling allocated ones (a variable read
  // returns the variable's buffer; an assignment writes the variable): return true after
  // setting every output. Called by dispatch() and graph replay in place of the kernels, with
  // the device the op runs on.
  virtual bool produce(std::span<const Tensor> inputs, std::span<Tensor> outputs,
                       Device device) const {
    (void)inputs;
    (void)outputs;
    (void)device;
    return false;
  }
  // Elementwise over broadcast inputs: the fuser may merge it into a loop.
  virtual bool is_elementwise() const { return false; }
  // Its outputs depend on its inputs' shapes and dtypes only, never on their values (a count
  // of elements), and it makes them in produce(): constant folding evaluates it on symbolic
  // inputs once the shapes are known (a graph specialised from a shape-generic trace).
  virtual bool reads_only_shapes() const { return false; }
  // No gradient flows through it (stop_gradient): tapes do not record it, so nothing computed
  // from its outputs alone is recorded either.
  virtual bool stops_gradients() const { return false; }
  // Has effects beyond its outputs (printing, random state): never removed or merged.
  virtual bool has_side_effects() const { return false; }
  // The variables (by identity: Variable::handle_id()) an op writes: assignments, fused
  // variable updates, training ops such as apply_adam. Graph passes keep reads and writes of
  // one variable in order by it.
  virtual std::vector<const void*> written_variables() const { return {}; }
  // For ops that move data to another device: the output's device.
  virtual std::optional<Device> target_device() const { return std::nullopt; }
  // Attributes for graph dumps and equivalence ("axes=[0, 1], keepdims=false").
  virtual std::string attributes() const { return {}; }
  // What a shape-generic trace compares between its two probe traces: the attributes, minus
  // those that legitimately differ from trace to trace (random ops' freshly drawn seeds).
  virtual std::string trace_attributes() const { return attributes(); }
  // Same op with the same attributes (used by common-subexpression elimination).
  bool is_equivalent(const Primitive& other) const;
};

// CRTP helper that supplies clone().
template <class Derived>
class PrimitiveBase : public Primitive {
 public:
  std::shared_ptr<Primitive> clone() const override {
    return std::make_shared<Derived>(static_cast<const Derived&>(*this));
  }
};

// Declares the two kernels inside a primitive struct; eval_cuda is defined in ops/cuda/ or, in a
// build without CUDA, by the stubs in ops/no_cuda/ (generated from ops/op_list.h).
#define TF_DECLARE_KERNELS                                                                \
  void eval_cpu(std::span<const ::tapeflow::Tensor> inputs,                               \
                std::span<::tapeflow::Tensor> outputs) const override;                    \
  void eval_cuda(std::span<const ::tapeflow::Tensor> inputs,                              \
                 std::span<::tapeflow::Tensor> outputs) const override;

// Declares vjp() and vjp_saves() inside a primitive struct (defined beside the frontend).
#define TF_DECLARE_VJP                                                                    \
  std::vector<::tapeflow::Tensor> vjp(std::span<const ::tapeflow::Tensor> primals,        \
                                      std::span<const ::tapeflow::Tensor> cotangents,     \
                                      std::span<const int> argnums,                       \
                                      std::span<const ::tapeflow::Tensor> outputs)        \
      const override;                                                                     \
  uint32_t vjp_saves() const override;

}  // namespace tapeflow
