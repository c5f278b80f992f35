// GradientTape: reverse-mode automatic differentiation with TF2's semantics.
//
//   tf::Variable w(tf::random::normal({3, 2}), "w");
//   tf::GradientTape tape;                 // records from here until it is destroyed
//   tf::Tensor loss = tf::reduce_sum(tf::matmul(x, w));
//   tf::Tensor dw = tape.gradient(loss, w);
//
// A tape records every op whose inputs it watches (tensors passed to watch(), trainable
// variables read while it records, and everything computed from them). Recording is RAII: it
// starts in the constructor and ends in the destructor, or at the first gradient() of a
// non-persistent tape. Gradients are computed with ops, so an outer tape records an inner tape's
// gradient computation (higher-order gradients), and a traced function traces its backward pass.
//
// The tape keeps only what each op's vjp reads (Primitive::vjp_saves) and frees every entry as
// the backward sweep passes it; a non-persistent tape holds nothing after gradient().
// A tape never records its own gradient() computation (nest a second tape around it for
// higher-order gradients); with RAII a persistent tape is usually still alive when gradient()
// runs, and recording the backward ops there would only grow it.
// A tape belongs to the thread that created it.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "autograd/variable.h"
#include "ops/hooks.h"

namespace tapeflow {

// What gradient() returns for a source the target does not depend on: an undefined tensor
// (TF's None) or zeros of the source's shape.
enum class UnconnectedGradients { NONE, ZERO };

struct TapeOptions {
  bool persistent = false;                // allow several gradient() calls
  bool watch_accessed_variables = true;   // watch trainable variables when they are read
};

class GradientTape;

// Pauses a tape's recording while alive (tape.stop_recording()).
class [[nodiscard]] StopRecording {
 public:
  explicit StopRecording(GradientTape& tape);
  ~StopRecording();
  StopRecording(const StopRecording&) = delete;
  StopRecording& operator=(const StopRecording&) = delete;

 private:
  GradientTape* tape_;
  bool was_recording_;
};

class GradientTape final : public detail::TapeObserver {
 public:
  explicit GradientTape(TapeOptions options = {});
  ~GradientTape() override;
  GradientTape(const GradientTape&) = delete;
  GradientTape& operator=(const GradientTape&) = delete;

  // Watches a floating tensor (an integer or bool tensor logs a warning and is ignored, as TF).
  void watch(const Tensor& t);
  void watch(const std::vector<Tensor>& ts);
  void watch(const Variable& v);
  void watch(const std::vector<Variable>& vs);
  // Variables watched so far, in the order they were made (TF's order).
  std::vector<Variable> watched_variables() const;

  // d(sum of target)/d(source), or the vector-Jacobian product with output_gradients (a tensor
  // of the target's shape). A non-persistent tape allows one call (FailedPreconditionError after).
  Tensor gradient(const Tensor& target, const Tensor& source,
                  UnconnectedGradients unconnected = UnconnectedGradients::NONE);
  Tensor gradient(const Tensor& target, const Variable& source,
                  UnconnectedGradients unconnected = UnconnectedGradients::NONE);
  Tensor gradient(const Tensor& target, const Tensor& source, const Tensor& output_gradients,
                  UnconnectedGradients unconnected = UnconnectedGradients::NONE);
  Tensor gradient(const Tensor& target, const Variable& source, const Tensor& output_gradients,
                  UnconnectedGradients unconnected = UnconnectedGradients::NONE);
  std::vector<Tensor> gradient(const Tensor& target, const std::vector<Variable>& sources,
                               UnconnectedGradients unconnected = UnconnectedGradients::NONE);
  std::vector<Tensor> gradient(const Tensor& target, const std::vector<Tensor>& sources,
                               UnconnectedGradients unconnected = UnconnectedGradients::NONE);
  std::vector<Tensor> gradient(const Tensor& target, const std::vector<Variable>& sources,
                               const Tensor& output_gradients,
                               UnconnectedGradients unconnected = UnconnectedGradients::NONE);
  // Several targets (TF's list of targets): the gradient of their sum; output_gradients, when
  // given, seeds each target (one tensor per target, an undefined one meaning ones). Integer and
  // bool targets contribute nothing.
  Tensor gradient(const std::vector<Tensor>& targets, const Tensor& source,
                  UnconnectedGradients unconnected = UnconnectedGradients::NONE);
  Tensor gradient(const std::vector<Tensor>& targets, const Variable& source,
                  UnconnectedGradients unconnected = UnconnectedGradients::NONE);
  std::vector<Tensor> gradient(const std::vector<Tensor>& targets,
                               const std::vector<Variable>& sources,
                               UnconnectedGradients unconnected = UnconnectedGradients::NONE);
  std::vector<Tensor> gradient(const std::vector<Tensor>& targets,
                               const std::vector<Tensor>& sources,
                               UnconnectedGradients unconnected = UnconnectedGradients::NONE);
  std::vector<Tensor> gradient(const std::vector<Tensor>& targets,
                               const std::vector<Variable>& sources,
                               const std::vector<Tensor>& output_gradients,
                               UnconnectedGradients unconnected = UnconnectedGradients::NONE);
  std::vector<Tensor> gradient(const std::vector<Tensor>& targets,
                               const std::vector<Tensor>& sources,
                               const std::vector<Tensor>& output_gradients,
                               UnconnectedGradients unconnected = UnconnectedGradients::NONE);

  // Full Jacobian: shape target.shape + source.shape (one backward sweep per target element).
  Tensor jacobian(const Tensor& target, const Tensor& source,
                  UnconnectedGradients unconnected = UnconnectedGradients::NONE);
  Tensor jacobian(const Tensor& target, const Variable& source,
                  UnconnectedGradients unconnected = UnconnectedGradients::NONE);
  // Per-example Jacobian: target (b, y...) and source (b, x...) -> (b, y..., x...), assuming
  // example i of the target depends only on example i of the source (not checked, as TF). An
  // unconnected source gives zeros whatever `unconnected` says (TF's batch_jacobian), and
  // targets or sources of rank 1 are allowed (TF asks for rank 2).
  Tensor batch_jacobian(const Tensor& target, const Tensor& source,
                        UnconnectedGradients unconnected = UnconnectedGradients::NONE);

  // Pauses recording while the returned guard lives.
  StopRecording stop_recording() { return StopRecording(*this); }
  // Forgets everything recorded and watched so far (recording continues).
  void reset();
  bool persistent() const { return options_.persistent; }
  bool recording() const { return recording_; }

  // ---- internal (dispatch and Variable call these) ----
  void record(const Primitive& prim, std::span<const Tensor> inputs,
              std::span<const Tensor> outputs) override;
  // A variable read while this tape records: `read` is the fresh tensor the read returned.
  void variable_read(const Variable& v, const Tensor& read);
  // Number of ops recorded and not yet released (for tests and memory checks).
  size_t num_recorded() const;

 private:
  friend class StopRecording;
  struct Node;
  void install();
  void uninstall();
  // Stops recording before a gradient is computed; true when it should resume after.
  bool pause_for_gradient(const char* op);
  void check_usable(const char* what) const;
  bool is_tracked(const Tensor& t) const;
  std::vector<Tensor> compute(const std::vector<Tensor>& targets,
                              const std::vector<Tensor>& seeds,
                              const std::vector<std::vector<uint64_t>>& source_ids,
                              const std::vector<Tensor>& source_like,
                              UnconnectedGradients unconnected, bool keep);
  std::vector<Tensor> gradient_impl(std::span<const Tensor> targets,
                                    std::span<const Tensor> output_gradients,
                                    const std::vector<std::vector<uint64_t>>& source_ids,
                                    const std::vector<Tensor>& source_like,
                                    UnconnectedGradients unconnected);
  std::vector<uint64_t> ids_of(const Variable& v) const;
  Tensor jacobian_rows(const char* op, const Tensor& target, const std::vector<uint64_t>& ids,
                       const Tensor& like, int64_t count, int64_t period, int stack_axis,
                       const TensorShape& shape, UnconnectedGradients unconnected);
  void release_all();

  TapeOptions options_;
  bool recording_ = false;
  // The thread whose ops it records (while recording_) and whether that thread still runs.
  detail::ThreadContext* owner_ = nullptr;
  std::shared_ptr<std::atomic<bool>> owner_alive_;
  // Where uninstall() found it, and the position there: the list of tapes that was active at
  // PauseTapes depth home_depth_ (the thread's active list then, which a PauseTapes scope opened
  // since holds), or none (npos). install() puts it back there: recording resumes in place, also
  // when the pause scopes around it changed in between.
  static constexpr size_t npos = static_cast<size_t>(-1);
  size_t home_depth_ = npos;
  size_t home_index_ = 0;
  bool used_ = false;  // a non-persistent tape after gradient()
  std::vector<std::unique_ptr<Node>> nodes_;
  std::unordered_set<uint64_t> tracked_;  // ids of watched tensors and of recorded outputs
  std::vector<Variable> watched_vars_;
  std::unordered_map<const void*, std::vector<uint64_t>> var_reads_;  // variable -> read ids
};

namespace detail {}  // namespace detail

// Returns a tensor with x's value through which no gradient flows.
Tensor stop_gradient(const Tensor& x);

// TF's @tf.custom_gradient for one input: fn(x) returns the value and the map from the upstream
// gradient to x's gradient. The returned callable records one node from x to the result whose
// vjp is that map. The ops inside fn are recorded too (as TF's eager custom_gradient), so a tape
// around the one that computes the gradient sees how the values the map captured depend on x;
// the result's only recorded producer is the custom node.
using CustomGradientFn =
    std::function<std::pair<Tensor, std::function<Tensor(const Tensor&)>>(const Tensor&)>;
std::function<Tensor(const Tensor&)> custom_gradient(CustomGradientFn fn);
// Several inputs: fn(xs) returns the value and the map from the upstream gradient to one
// gradient per input (an undefined tensor for an input without gradient).
using CustomGradientFnN = std::function<
    std::pair<Tensor, std::function<std::vector<Tensor>(const Tensor&)>>(const std::vector<Tensor>&)>;
std::function<Tensor(const std::vector<Tensor>&)> custom_gradient(CustomGradientFnN fn);

}  // namespace tapeflow
