// tf::function: traces a C++ callable into a Graph on the first call with a new signature and
// replays the optimised graph on later calls, without running the C++ body or paying eager
// dispatch per op. See docs/function.md.
//
//   auto step = tf::function([&](tf::Tensor x, tf::Tensor y) { ... return loss; },
//                            tf::FunctionOptions{.name = "train_step"});
//   tf::Tensor loss = step(x, y);      // traces, then runs the graph
//   loss = step(x2, y2);               // same shapes and dtypes: replays
//
// The signature of a call is each tensor argument's shape, dtype and device, each plain C++
// argument's value, and the device of the caller's DeviceScope. C++ side effects in the body
// happen only while tracing; tf::print and Variable reads and assignments happen at every call.
#pragma once

#include <cstring>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "core/tensor_spec.h"
#include "jit/graph.h"

namespace tapeflow {

struct FunctionOptions {
  // Expected shapes and dtypes of the tensor arguments (tf::None matches any size); a call that
  // does not match raises InvalidArgumentError naming the argument and both shapes.
  std::vector<TensorSpec> input_signature = {};
  bool reduce_retracing = false;
  bool jit_compile = false;
  std::string name = {};
};

// One traced graph (TF's ConcreteFunction).
class ConcreteFunction {
 public:
  const Graph& graph() const { return graph_; }
  // Runs the graph on the flat list of tensor arguments.
  std::vector<Tensor> call_flat(std::span<const Tensor> args) const { return graph_.run(args); }

  Graph graph_;
  std::vector<size_t> output_structure_;  // sizes of vector results, in order
};

namespace detail {

// Signature keys: a byte string of every tensor argument's shape, dtype and device and every
// plain argument's value.
struct SignatureKey {
  std::string bytes;
  void add_raw(const void* p, size_t n) { bytes.append(static_cast<const char*>(p), n); }
  void add_tensor(const Tensor& t);
  template <class T>
  void add_value(const T& v) {
    using D = std::decay_t<T>;
    if constexpr (std::is_same_v<D, Tensor>) {
      add_tensor(v);
    } else if constexpr (std::is_arithmetic_v<D> || std::is_enum_v<D>) {
      const char tag = 'v';
      add_raw(&tag, 1);
      add_raw(&v, sizeof(D));
    } else if constexpr (std::is_convertible_v<const D&, std::string_view>) {
      const std::string_view s = v;
      const size_t n = s.size();
      add_raw(&n, sizeof n);
      add_raw(s.data(), n);
    } else {
      static_assert(std::is_same_v<D, Tensor>,
                    "tf::function arguments are tf::Tensor, arithmetic values, enums or strings");
    }
  }
};

// The non-template part of tf::function: the trace cache (bounded, least recently used first
// out), the retracing warning and the input_signature check. Thread-safe: several threads may
// call one function (two threads missing the same signature at once may both trace it; one
// graph is kept).
class FunctionCore {
 public:
  explicit FunctionCore(FunctionOptions options);
  // The graph for this key, or null (counts the call for the retracing warning).
  std::shared_ptr<ConcreteFunction> lookup(const std::string& key);
  void insert(const std::string& key, std::shared_ptr<ConcreteFunction> f);
  // Keeps a graph handed out by get_concrete_function alive for the Function's lifetime.
  void pin(std::shared_ptr<ConcreteFunction> f);
  // Checks the tensor arguments against options.input_signature.
  void check_signature(const std::vector<Tensor>& tensors) const;
  // Applies the graph passes before the first replay; tensors with ids below first_traced_id
  // existed before the trace (captured tensors a caller's tape may watch) and are never folded.
  static void optimize(Graph& graph, uint64_t first_traced_id);
  int tracing_count() const {
    std::lock_guard lock(mu_);
    return tracing_count_;
  }
  const FunctionOptions& options() const { return options_; }
  std::string name() const;

  static constexpr size_t kMaxCached = 64;

 private:
  FunctionOptions options_;
  mutable std::mutex mu_;
  std::list<std::pair<std::string, std::shared_ptr<ConcreteFunction>>> lru_;
  std::unordered_map<std::string, decltype(lru_)::iterator> index_;
  int tracing_count_ = 0;
  std::vector<bool> recent_;  // last 10 calls: traced or not
  std::vector<std::shared_ptr<ConcreteFunction>> pinned_;
  int warnings_ = 0;
};

// Installs a tracer on `graph` for the lifetime of the returned handle.
std::shared_ptr<void> begin_trace(Graph& graph);
Tensor trace_input(const std::shared_ptr<void>& tracer, const Tensor& t);
void end_trace(const std::shared_ptr<void>& tracer, const std::vector<Tensor>& outputs);
std::string current_device_key();
// A storage-less tensor of the spec's shape and dtype on the current device (fully known shape).
Tensor example_for(const TensorSpec& spec);

// Flattening of results: Tensor, std::vector<Tensor>, std::tuple of those.
template <class R>
struct Results;
template <>
struct Results<Tensor> {
  static void flatten(const Tensor& r, std::vector<Tensor>& out, std::vector<size_t>&) {
    out.push_back(r);
  }
  static Tensor unflatten(const std::vector<Tensor>& flat, size_t& pos,
                          const std::vector<size_t>&, size_t&) {
    return flat[pos++];
  }
};
template <>
struct Results<std::vector<Tensor>> {
  static void flatten(const std::vector<Tensor>& r, std::vector<Tensor>& out,
                      std::vector<size_t>& structure) {
    structure.push_back(r.size());
    out.insert(out.end(), r.begin(), r.end());
  }
  static std::vector<Tensor> unflatten(const std::vector<Tensor>& flat, size_t& pos,
                                       const std::vector<size_t>& structure, size_t& spos) {
    const size_t n = structure[spos++];
    std::vector<Tensor> r(flat.begin() + static_cast<std::ptrdiff_t>(pos),
                          flat.begin() + static_cast<std::ptrdiff_t>(pos + n));
    pos += n;
    return r;
  }
};
template <class... Ts>
struct Results<std::tuple<Ts...>> {
  static void flatten(const std::tuple<Ts...>& r, std::vector<Tensor>& out,
                      std::vector<size_t>& structure) {
    std::apply([&](const auto&... e) {
      (Results<std::decay_t<decltype(e)>>::flatten(e, out, structure), ...);
    }, r);
  }
  static std::tuple<Ts...> unflatten(const std::vector<Tensor>& flat, size_t& pos,
                                     const std::vector<size_t>& structure, size_t& spos) {
    return std::tuple<Ts...>{Results<Ts>::unflatten(flat, pos, structure, spos)...};
  }
};

}  // namespace detail

template <class F>
class Function {
 public:
  Function(F fn, FunctionOptions options)
      : fn_(std::move(fn)), core_(std::make_shared<detail::FunctionCore>(std::move(options))) {}

  template <class... Args>
  auto operator()(Args&&... args) const {
    using R = std::decay_t<std::invoke_result_t<const F&, Args...>>;
    std::vector<Tensor> tensors;
    const std::shared_ptr<ConcreteFunction> cf = find_or_trace<R>(tensors, std::forward<Args>(args)...);
    const std::vector<Tensor> flat = cf->call_flat(tensors);
    size_t pos = 0, spos = 0;
    return detail::Results<R>::unflatten(flat, pos, cf->output_structure_, spos);
  }

  // Traces (or finds) the graph for arguments of these specs, without running it. The returned
  // graph stays valid as long as the Function (it is never evicted from the cache).
  template <class... Specs>
  const ConcreteFunction& get_concrete_function(const Specs&... specs) const {
    using R = std::decay_t<std::invoke_result_t<const F&, decltype((specs, Tensor()))...>>;
    std::vector<Tensor> tensors;
    // Storage-less stand-ins: only their shapes, dtypes and devices matter for tracing.
    std::shared_ptr<ConcreteFunction> cf = find_or_trace<R>(tensors, detail::example_for(specs)...);
    core_->pin(cf);
    return *cf;
  }

  // Number of graphs traced so far.
  int tracing_count() const { return core_->tracing_count(); }
  const FunctionOptions& options() const { return core_->options(); }

 private:
  template <class T>
  static void collect(const T& arg, std::vector<Tensor>& tensors, detail::SignatureKey& key) {
    if constexpr (std::is_same_v<std::decay_t<T>, Tensor>) tensors.push_back(arg);
    key.add_value(arg);
  }

  // The graph for this call's signature (the tensor arguments are appended to `tensors`):
  // from the cache, or traced now.
  template <class R, class... Args>
  std::shared_ptr<ConcreteFunction> find_or_trace(std::vector<Tensor>& tensors,
                                                  Args&&... args) const {
    detail::SignatureKey key;
    key.bytes = detail::current_device_key();
    (collect(args, tensors, key), ...);
    core_->check_signature(tensors);
    std::shared_ptr<ConcreteFunction> cf = core_->lookup(key.bytes);
    if (!cf) {
      cf = trace<R>(std::forward<Args>(args)...);
      core_->insert(key.bytes, cf);
    }
    return cf;
  }

  template <class A>
  static decltype(auto) traced_arg(const std::shared_ptr<void>& tracer, A&& a) {
    if constexpr (std::is_same_v<std::decay_t<A>, Tensor>) return detail::trace_input(tracer, a);
    else return std::forward<A>(a);
  }

  template <class R, class... Args>
  std::shared_ptr<ConcreteFunction> trace(Args&&... args) const {
    auto cf = std::make_shared<ConcreteFunction>();
    std::vector<Tensor> outputs;
    const uint64_t first_traced_id = detail::next_tensor_id();
    {
      auto tracer = detail::begin_trace(cf->graph_);
      // Symbolic tensors are made in argument order (the graph's input order).
      auto converted = std::tuple<decltype(traced_arg(tracer, std::forward<Args>(args)))...>{
          traced_arg(tracer, std::forward<Args>(args))...};
      R result = std::apply(fn_, std::move(converted));
      detail::Results<R>::flatten(result, outputs, cf->output_structure_);
      detail::end_trace(tracer, outputs);
    }
    detail::FunctionCore::optimize(cf->graph_, first_traced_id);
    return cf;
  }

  F fn_;
  std::shared_ptr<detail::FunctionCore> core_;
};

template <class F>
Function<std::decay_t<F>> function(F&& fn, FunctionOptions options = {}) {
  return Function<std::decay_t<F>>(std::forward<F>(fn), std::move(options));
}

}  // namespace tapeflow
