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
#include <optional>
#include <span>
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
  // TF's jit_compile: unset (TF's None) lets tapeflow choose (detail::default_jit_compile()),
  // true or false decides. It acts on graphs that run on a GPU: float32 elementwise chains as
  // NVRTC-generated kernels, static graphs replayed as captured CUDA graphs
  // (docs/function.md). CPU graphs are the same either way.
  std::optional<bool> jit_compile = std::nullopt;
  std::string name = {};
};

namespace detail {
// What a jit_compile left unset means: off until the GPU benchmarks measure the generated
// kernels and CUDA-graph replay faster on a GPU (docs/function.md, "jit_compile").
bool default_jit_compile();
struct GenericTrace;
}

namespace config {
// TF's tf.config.run_functions_eagerly: while true, calling a tf::function runs its C++ body
// eagerly at every call (no trace, no graph, no input_signature check), for debugging: C++
// side effects, std::cout and a debugger's breakpoints then see every call. Process-wide;
// get_concrete_function still traces. False by default.
void run_functions_eagerly(bool run_eagerly);
bool functions_run_eagerly();
}  // namespace config

// TF's tf.executing_eagerly(): false while this thread traces a tf::function's body (the ops
// then build a graph), true otherwise; tf.inside_function() is its negation.
bool executing_eagerly();
bool inside_function();

// One traced graph (TF's ConcreteFunction). A shape-generic one (traced for tf::None
// dimensions) shows those dimensions as None in graph() and specialises itself to each call's
// shapes (shape inference over the graph, no new trace).
class ConcreteFunction {
 public:
  const Graph& graph() const { return graph_; }
  // Runs the graph on the flat list of tensor arguments.
  std::vector<Tensor> call_flat(std::span<const Tensor> args) const;

  Graph graph_;
  // Sizes of vector results, in order, then the flat positions of undefined results and their
  // count (Function::trace_into).
  std::vector<size_t> output_structure_;
  std::shared_ptr<detail::GenericTrace> generic_;
};

namespace detail {

// A trace that may serve several shapes: the unoptimised graph traced with the call's shapes
// ("probe A") and a verdict from a second trace with every None dimension one larger ("probe
// B"): when both graphs have the same ops, attributes, constants and wiring, and inferring
// probe A's graph at probe B's shapes reproduces probe B, the graph does not depend on those
// dimensions and is specialised per call by shape inference alone.
struct GenericTrace {
  Graph raw;
  uint64_t first_traced_id = 0;
  std::vector<size_t> output_structure;
  std::vector<std::vector<bool>> mask;  // per tensor argument: which dimensions are None
  bool generic = false;
  bool jit_compile = false;  // the function's effective jit_compile (for specialisations)
  std::string function_name;  // for error messages
  std::string reason;  // why not, when not
  Graph shown;         // raw with the dimensions that vary shown as None (when generic)

  // The optimised graph for these argument shapes (cached; thread-safe). Arguments whose count,
  // ranks, dtypes, devices or known dimensions differ from the trace raise InvalidArgumentError.
  std::shared_ptr<ConcreteFunction> specialization(std::span<const Tensor> args);
  // Compares with probe B and sets `generic`/`reason`.
  void validate(const Graph& probe_b);
  // Why another probe's graph is not this one at other shapes ("" when it is).
  std::string mismatch(const Graph& probe) const;
  // Probe C gives every None dimension a size of its own. When it fails or traces another
  // graph (a gradient that sums a broadcast, a shape check), the graph holds only while the
  // None dimensions equal at the first call stay equal (probe D: only those at one axis
  // position, when it traces the same graph): for the k-th None dimension, the first one it
  // must equal (itself when free), and why.
  std::vector<int> equal_classes;
  std::string equal_reason;
  // Whether the graph holds for these arguments' None dimensions: the equalities that
  // equal_classes asks for hold (others may hold too).
  bool serves(std::span<const Tensor> args) const;

 private:
  std::mutex mu_;
  std::list<std::pair<std::string, std::shared_ptr<ConcreteFunction>>> cache_;
};

// Signature keys: a byte string of every tensor argument's shape, dtype and device and every
// plain argument's value.
struct SignatureKey {
  std::string bytes;
  bool with_dims = true;  // false: the family key (ranks, dtypes, devices and values only)
  size_t values = 0;      // plain C++ values added (for error messages)
  void add_raw(const void* p, size_t n) { bytes.append(static_cast<const char*>(p), n); }
  void add_tensor(const Tensor& t);
  template <class T>
  void add_value(const T& v) {
    using D = std::decay_t<T>;
    if constexpr (std::is_same_v<D, Tensor>) {
      add_tensor(v);
    } else if constexpr (std::is_arithmetic_v<D> || std::is_enum_v<D>) {
      ++values;
      const char tag = 'v';
      add_raw(&tag, 1);
      add_raw(&v, sizeof(D));
    } else if constexpr (std::is_convertible_v<const D&, std::string_view>) {
      ++values;
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
  // Keeps a graph handed out by get_concrete_function (for signature `key`) alive for the
  // Function's lifetime; lookup() finds it after the cache evicted it.
  // Returns the pinned graph: the first one pinned for `key` when two threads traced it.
  std::shared_ptr<ConcreteFunction> pin(const std::string& key,
                                        std::shared_ptr<ConcreteFunction> f);
  // The shape-generic graph get_concrete_function handed out for these specs (`key`), or null.
  std::shared_ptr<ConcreteFunction> pinned_generic(const std::string& key) const;
  // Keeps it for the Function's lifetime; returns the one kept (another thread's, if first).
  std::shared_ptr<ConcreteFunction> pin_generic(const std::string& key,
                                                std::shared_ptr<ConcreteFunction> f);
  // Raises InvalidArgumentError naming argument `index` when the tensor is undefined.
  void check_defined(const Tensor& t, size_t index) const {
    if (!t.defined()) [[unlikely]]
      throw_undefined(index);
  }
  // Checks the tensor arguments against options.input_signature (`values`: how many plain C++
  // values the call passed, for the message when the counts differ).
  void check_signature(const std::vector<Tensor>& tensors, size_t values = 0) const;
  // Checks get_concrete_function's specs against options.input_signature.
  void check_specs(const std::vector<TensorSpec>& specs) const;
  // Which dimensions of each tensor argument one trace should leave open: the input_signature's
  // None dimensions, or (reduce_retracing) those that changed between calls of this family
  // (same ranks, dtypes, devices and plain values). Empty: trace these exact shapes.
  std::vector<std::vector<bool>> open_dimensions(const std::string& family,
                                                 const std::vector<Tensor>& tensors);
  std::shared_ptr<GenericTrace> lookup_generic(const std::string& key);
  // Counts one trace.
  void insert_generic(const std::string& key, std::shared_ptr<GenericTrace> g);
  // A cache miss served by specialising a generic trace (no new trace: not counted, and not
  // a retrace for the warning).
  void insert_specialized(const std::string& key, std::shared_ptr<ConcreteFunction> f);
  // Applies the graph passes before the first replay; tensors with ids below first_traced_id
  // existed before the trace (captured tensors a caller's tape may watch) and are never folded.
  // `jit_compile`: GPU elementwise chains become NVRTC kernels and GPU graphs replay as CUDA
  // graphs (jit/fusion.h, jit/cuda_graph.h).
  static void optimize(Graph& graph, uint64_t first_traced_id, bool jit_compile);
  // The effective jit_compile: options().jit_compile (unset: default_jit_compile()), unless
  // TAPEFLOW_JIT_COMPILE overrides it.
  bool jit_compile() const;
  int tracing_count() const {
    std::lock_guard lock(mu_);
    return tracing_count_;
  }
  const FunctionOptions& options() const { return options_; }
  std::string name() const;

  // Marks this thread as tracing `key` of this function while it lives. A call that misses the
  // cache with a key this thread is already tracing would trace again forever (a function
  // that calls itself, directly or through others, with the same signature): the constructor
  // raises InvalidArgumentError instead of letting the stack overflow.
  class TracingScope {
   public:
    TracingScope(const FunctionCore& core, const std::string& key);
    ~TracingScope();
    TracingScope(const TracingScope&) = delete;
    TracingScope& operator=(const TracingScope&) = delete;
  };

  static constexpr size_t kMaxCached = 64;

 private:
  FunctionOptions options_;
  mutable std::mutex mu_;
  std::list<std::pair<std::string, std::shared_ptr<ConcreteFunction>>> lru_;
  std::unordered_map<std::string, decltype(lru_)::iterator> index_;
  int tracing_count_ = 0;
  // The last 10 calls: the signature of each that missed the cache, nullopt for the others.
  // Threads missing one signature at once count as one trace (one graph is kept).
  std::vector<std::optional<std::string>> recent_;
  std::unordered_map<std::string, std::shared_ptr<ConcreteFunction>> pinned_;
  std::unordered_map<std::string, std::shared_ptr<ConcreteFunction>> pinned_generic_;
  int warnings_ = 0;
  std::unordered_map<std::string, std::shared_ptr<GenericTrace>> generic_;
  // reduce_retracing: the shapes first seen per family and the dimensions seen to vary (at most
  // kMaxFamilies; then it starts over, so ever-new plain values do not grow it without bound).
  static constexpr size_t kMaxFamilies = 256;
  std::unordered_map<std::string, std::pair<std::vector<TensorShape>, std::vector<std::vector<bool>>>>
      families_;
  bool logged_not_generic_ = false;
  void insert_locked(const std::string& key, std::shared_ptr<ConcreteFunction> f);
  void warn_if_retracing_locked();
  [[noreturn]] void throw_undefined(size_t index) const;
 public:
  // Logs once per function why one trace cannot serve all shapes.
  void log_not_generic(const GenericTrace& g);
};

// The key part for tensors (rank, dtype and dimensions) with their open dimensions written as
// None.
std::string masked_dims_key(const std::vector<Tensor>& tensors,
                            const std::vector<std::vector<bool>>& mask);
// The sizes of the open dimensions (arguments in order, then dimensions), and their axes.
std::vector<int64_t> open_sizes(std::span<const Tensor> tensors,
                                const std::vector<std::vector<bool>>& mask,
                                std::vector<int>* axes = nullptr);
// For the k-th open dimension, the index of the first open dimension of the same size.
std::vector<int> equal_size_classes(std::span<const Tensor> tensors,
                                    const std::vector<std::vector<bool>>& mask);
// `classes` split by axis: open dimensions stay together only at the same axis position.
std::vector<int> classes_by_axis(std::span<const Tensor> tensors,
                                 const std::vector<std::vector<bool>>& mask,
                                 const std::vector<int>& classes);
// Stand-ins whose open dimensions take one size per class (k-th open dimension: class
// classes[k]), all larger than every size of the other probes.
std::vector<Tensor> class_probe_tensors(const std::vector<Tensor>& tensors,
                                        const std::vector<std::vector<bool>>& mask,
                                        const std::vector<int>& classes);
// Stand-ins for probe B: each open dimension one larger.
std::vector<Tensor> probe_tensors(const std::vector<Tensor>& tensors,
                                  const std::vector<std::vector<bool>>& mask);
// For get_concrete_function(specs): stand-ins with None dimensions set to 2, and the mask.
Tensor example_for_generic(const TensorSpec& spec);

// Marks the thread's traces as serving open (None) dimensions while the handle lives.
std::shared_ptr<void> open_shapes_scope();
[[noreturn]] void throw_not_generic(const std::string& function, const std::string& reason);

// Installs a tracer on `graph` for the lifetime of the returned handle.
std::shared_ptr<void> begin_trace(Graph& graph);
Tensor trace_input(const std::shared_ptr<void>& tracer, const Tensor& t);
void end_trace(const std::shared_ptr<void>& tracer, const std::vector<Tensor>& outputs);
std::string current_device_key();
// A storage-less tensor of the spec's shape and dtype on the current device (fully known shape).
Tensor example_for(const TensorSpec& spec);

// Puts the undefined results a trace left out of its graph back into `flat`, at the positions
// that end `structure` (Function::trace_into).
inline void restore_undefined(std::vector<Tensor>& flat, const std::vector<size_t>& structure) {
  const size_t k = structure.back();
  for (size_t j = 0; j < k; ++j)
    flat.insert(flat.begin() + static_cast<std::ptrdiff_t>(structure[structure.size() - 1 - k + j]),
                Tensor());
}

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
    if (config::functions_run_eagerly()) return static_cast<R>(fn_(std::forward<Args>(args)...));
    std::vector<Tensor> tensors;
    const std::shared_ptr<ConcreteFunction> cf =
        find_or_trace<R>(tensors, nullptr, std::forward<Args>(args)...);
    std::vector<Tensor> flat = cf->call_flat(tensors);
    detail::restore_undefined(flat, cf->output_structure_);
    size_t pos = 0, spos = 0;
    return detail::Results<R>::unflatten(flat, pos, cf->output_structure_, spos);
  }

  // Traces (or finds) the graph for arguments of these specs, without running it. The returned
  // graph stays valid as long as the Function (it is never evicted from the cache).
  template <class... Specs>
  const ConcreteFunction& get_concrete_function(const Specs&... specs) const {
    using R = std::decay_t<std::invoke_result_t<const F&, decltype((specs, Tensor()))...>>;
    std::vector<Tensor> tensors;
    core_->check_specs(std::vector<TensorSpec>{specs...});
    const bool open = (false || ... || !specs.shape.is_fully_defined());
    if (!open) {
      // Storage-less stand-ins: only their shapes, dtypes and devices matter for tracing.
      std::string key;
      std::shared_ptr<ConcreteFunction> cf =
          find_or_trace<R>(tensors, &key, detail::example_for(specs)...);
      // Two threads tracing the same specs at once: the first pinned graph is the one kept.
      return *core_->pin(key, std::move(cf));
    }
    // None dimensions: one generic trace (None dimensions probed at 2 and 3).
    std::vector<std::vector<bool>> mask;
    (mask.push_back([&] {
       std::vector<bool> m(static_cast<size_t>(specs.shape.rank()));
       for (int d = 0; d < specs.shape.rank(); ++d) m[static_cast<size_t>(d)] = specs.shape[d] < 0;
       return m;
     }()),
     ...);
    return *generic_concrete<R>(mask, tensors, detail::example_for_generic(specs)...);
  }

  // Number of graphs traced so far.
  int tracing_count() const { return core_->tracing_count(); }
  const FunctionOptions& options() const { return core_->options(); }

 private:
  template <class T>
  void collect(const T& arg, std::vector<Tensor>& tensors, detail::SignatureKey& key) const {
    if constexpr (std::is_same_v<std::decay_t<T>, Tensor>) {
      core_->check_defined(arg, tensors.size());
      tensors.push_back(arg);
    }
    key.add_value(arg);
  }

  // The graph for this call's signature (the tensor arguments are appended to `tensors`):
  // from the cache, specialised from a generic trace, or traced now.
  template <class R, class... Args>
  std::shared_ptr<ConcreteFunction> find_or_trace(std::vector<Tensor>& tensors,
                                                  std::string* key_out, Args&&... args) const {
    detail::SignatureKey key;
    key.bytes.reserve(128);  // one allocation for the usual key
    key.bytes += detail::current_device_key();
    (collect(args, tensors, key), ...);
    core_->check_signature(tensors, key.values);
    if (key_out) *key_out = key.bytes;
    std::shared_ptr<ConcreteFunction> cf = core_->lookup(key.bytes);
    if (cf) return cf;
    const detail::FunctionCore::TracingScope tracing(*core_, key.bytes);
    // A miss: the family key (no dimensions) decides whether one trace serves several shapes.
    detail::SignatureKey family;
    family.with_dims = false;
    family.bytes = detail::current_device_key();
    (family.add_value(args), ...);
    const auto mask = core_->open_dimensions(family.bytes, tensors);
    if (mask.empty()) {
      cf = trace<R>(std::forward<Args>(args)...);
      core_->insert(key.bytes, cf);
      return cf;
    }
    const std::string gkey = family.bytes + detail::masked_dims_key(tensors, mask);
    std::shared_ptr<detail::GenericTrace> g = core_->lookup_generic(gkey);
    if (!g) {
      g = trace_generic<R>(mask, tensors, args...);
      core_->insert_generic(gkey, g);
      if (!g->generic) {
        // Probe A was traced at these very shapes: it serves this call.
        cf = std::make_shared<ConcreteFunction>();
        cf->graph_ = g->raw;
        cf->output_structure_ = g->output_structure;
        detail::FunctionCore::optimize(cf->graph_, g->first_traced_id, core_->jit_compile());
        core_->insert_specialized(key.bytes, cf);
        return cf;
      }
    }
    if (!g->generic || !g->serves(tensors)) {
      cf = trace<R>(std::forward<Args>(args)...);
      core_->insert(key.bytes, cf);
      return cf;
    }
    cf = g->specialization(tensors);
    core_->insert_specialized(key.bytes, cf);
    return cf;
  }

  // A ConcreteFunction for specs with None dimensions (get_concrete_function).
  template <class R, class... Args>
  std::shared_ptr<ConcreteFunction> generic_concrete(const std::vector<std::vector<bool>>& mask,
                                                     std::vector<Tensor>& tensors,
                                                     Args&&... args) const {
    (collect_tensor(args, tensors), ...);
    // Asked again for the same specs: the graph handed out before (no new trace).
    const std::string key =
        detail::current_device_key() + detail::masked_dims_key(tensors, mask) + "#concrete";
    if (std::shared_ptr<ConcreteFunction> cf = core_->pinned_generic(key)) return cf;
    std::shared_ptr<detail::GenericTrace> g = core_->lookup_generic(key);
    if (!g) {
      g = trace_generic<R>(mask, tensors, args...);
      core_->insert_generic(key, g);
    }
    if (!g->generic) detail::throw_not_generic(core_->name(), g->reason);
    auto cf = std::make_shared<ConcreteFunction>();
    cf->graph_ = g->shown;
    cf->output_structure_ = g->output_structure;
    cf->generic_ = g;
    return core_->pin_generic(key, std::move(cf));
  }

  template <class T>
  static void collect_tensor(const T& arg, std::vector<Tensor>& tensors) {
    if constexpr (std::is_same_v<std::decay_t<T>, Tensor>) tensors.push_back(arg);
  }

  // Probe A (the call's shapes) and probe B (open dimensions one larger), then the verdict.
  template <class R, class... Args>
  std::shared_ptr<detail::GenericTrace> trace_generic(const std::vector<std::vector<bool>>& mask,
                                                      const std::vector<Tensor>& tensors,
                                                      Args&&... args) const {
    auto g = std::make_shared<detail::GenericTrace>();
    g->jit_compile = core_->jit_compile();
    g->function_name = core_->name();
    const auto open = detail::open_shapes_scope();  // sizes read at run time while tracing
    g->mask = mask;
    g->first_traced_id = detail::next_tensor_id();
    trace_into<R>(g->raw, g->output_structure, args...);
    const std::vector<Tensor> probe = detail::probe_tensors(tensors, mask);
    Graph b;
    std::vector<size_t> structure_b;
    try {
      trace_substituted<R>(probe, b, structure_b, args...);
    } catch (const std::exception& e) {
      g->reason = std::string("tracing again with the None dimensions one larger failed: ") + e.what();
      return g;
    }
    if (structure_b != g->output_structure) {
      g->reason = "the result's structure depends on the None dimensions";
      return g;
    }
    g->validate(b);
    if (g->generic) check_equalities<R>(*g, tensors, args...);
    return g;
  }

  // Probe C (every None dimension of its own size) for a generic trace whose None dimensions
  // had equal sizes: unless it traces the same graph, calls must keep those equal.
  template <class R, class... Args>
  void check_equalities(detail::GenericTrace& g, const std::vector<Tensor>& tensors,
                        Args&&... args) const {
    const std::vector<int> classes = detail::equal_size_classes(tensors, g.mask);
    bool any_equal = false;
    for (size_t k = 0; k < classes.size(); ++k) any_equal |= classes[k] != static_cast<int>(k);
    if (!any_equal) return;
    // Why a probe with these classes of sizes does not trace the same graph ("" when it does).
    auto probe_with = [&](const std::vector<int>& probe_classes) -> std::string {
      const std::vector<Tensor> probe = detail::class_probe_tensors(tensors, g.mask, probe_classes);
      Graph c;
      std::vector<size_t> structure_c;
      try {
        trace_substituted<R>(probe, c, structure_c, args...);
        return structure_c != g.output_structure ? "the result's structure changes" : g.mismatch(c);
      } catch (const std::exception& e) {
        return e.what();
      }
    };
    std::vector<int> distinct(classes.size());
    for (size_t k = 0; k < distinct.size(); ++k) distinct[k] = static_cast<int>(k);
    const std::string why = probe_with(distinct);
    if (why.empty()) return;
    g.equal_classes = classes;
    g.equal_reason = why;
    // Probe D: equal only at one axis position (get_concrete_function's stand-ins are all 2, so
    // x (None, None) + y (None, None) needs x0 = y0 and x1 = y1, not all four equal).
    const std::vector<int> by_axis = detail::classes_by_axis(tensors, g.mask, classes);
    if (by_axis != classes && probe_with(by_axis).empty()) g.equal_classes = by_axis;
  }

  // Traces the callable with its tensor arguments replaced by `probe`, in order.
  template <class R, class... Args>
  void trace_substituted(const std::vector<Tensor>& probe, Graph& graph,
                         std::vector<size_t>& structure, Args&&... args) const {
    size_t next = 0;
    // Braced initialisation: the tensor arguments are substituted left to right.
    auto substituted =
        std::tuple<decltype(substitute(args, probe, next))...>{substitute(args, probe, next)...};
    std::apply(
        [&](auto&&... a) { trace_into<R>(graph, structure, std::forward<decltype(a)>(a)...); },
        std::move(substituted));
  }

  template <class A>
  static decltype(auto) substitute(A&& a, const std::vector<Tensor>& probe, size_t& next) {
    if constexpr (std::is_same_v<std::decay_t<A>, Tensor>) return Tensor(probe[next++]);
    else return std::forward<A>(a);
  }

  template <class A>
  static decltype(auto) traced_arg(const std::shared_ptr<void>& tracer, A&& a) {
    if constexpr (std::is_same_v<std::decay_t<A>, Tensor>) return detail::trace_input(tracer, a);
    else return std::forward<A>(a);
  }

  // Runs the callable once with symbolic tensors, recording `graph` (unoptimised).
  template <class R, class... Args>
  void trace_into(Graph& graph, std::vector<size_t>& structure, Args&&... args) const {
    std::vector<Tensor> outputs;
    auto tracer = detail::begin_trace(graph);
    // Symbolic tensors are made in argument order (the graph's input order).
    auto converted = std::tuple<decltype(traced_arg(tracer, std::forward<Args>(args)))...>{
        traced_arg(tracer, std::forward<Args>(args))...};
    R result = std::apply(fn_, std::move(converted));
    detail::Results<R>::flatten(result, outputs, structure);
    // TF's None results (an undefined tensor: a gradient that does not reach its source) stay
    // out of the graph; their flat positions, then their count, end `structure`, and
    // operator() puts them back (so which results are undefined is part of the structure).
    std::vector<Tensor> defined;
    size_t undefined = 0;
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (outputs[i].defined()) {
        defined.push_back(outputs[i]);
      } else {
        structure.push_back(i);
        ++undefined;
      }
    }
    structure.push_back(undefined);
    detail::end_trace(tracer, defined);
  }

  template <class R, class... Args>
  std::shared_ptr<ConcreteFunction> trace(Args&&... args) const {
    auto cf = std::make_shared<ConcreteFunction>();
    const uint64_t first_traced_id = detail::next_tensor_id();
    trace_into<R>(cf->graph_, cf->output_structure_, std::forward<Args>(args)...);
    detail::FunctionCore::optimize(cf->graph_, first_traced_id, core_->jit_compile());
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
