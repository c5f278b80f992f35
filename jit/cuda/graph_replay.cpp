// CUDA-graph replay of prepared graphs (see jit/cuda_graph.h).
#include <cuda_runtime.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <set>

#include "autograd/variable.h"
#include "core/check.h"
#include "core/device.h"
#include "core/cuda/context.h"
#include "core/log.h"
#include "jit/cuda_graph.h"
#include "jit/graph.h"
#include "ops/dispatch.h"

namespace tapeflow::jit {

namespace {
// A captured graph keeps every intermediate allocated; above this, one launch per node costs
// little next to the work anyway, and the memory is worth more.
constexpr size_t kMaxKeptBytes = size_t{256} << 20;
// A graph captures again when its variables' buffers moved since the last capture; once it has
// captured kMinCaptures times, it stays node by node unless its captures served
// kLaunchesPerCapture calls each on average.
constexpr int kMinCaptures = 4;
constexpr int64_t kLaunchesPerCapture = 8;

// One capture at a time per device: captures share the device's capture stream and its
// libraries' capture handles. (Logical devices beyond 64 share a lock: they wait, nothing more.)
std::mutex& capture_mutex(Device device) {
  static std::mutex locks[64];
  return locks[static_cast<size_t>(device.index) % 64];
}
}  // namespace

class CudaGraphReplay {
 public:
  CudaGraphReplay(const Graph& graph, Device device, const GraphVariables& vars)
      : device_(device) {
    for (const Graph::Node& n : graph.nodes) prims_.push_back(n.prim.get());
    outputs_ = graph.outputs;
    for (const void* h : vars.read) variables_.push_back({h, false, nullptr});
    for (const void* h : vars.written) {
      auto it = std::find_if(variables_.begin(), variables_.end(),
                             [&](const CapturedVariable& c) { return c.handle == h; });
      if (it == variables_.end())
        variables_.push_back({h, true, nullptr});
      else
        it->written = true;
    }
  }
  ~CudaGraphReplay() {
    // Errors are ignored: at exit the runtime may already be gone. An executable graph still
    // running is freed when it completes.
    if (exec_) cudaGraphExecDestroy(exec_);
    if (graph_) cudaGraphDestroy(graph_);
  }
  CudaGraphReplay(const CudaGraphReplay&) = delete;
  CudaGraphReplay& operator=(const CudaGraphReplay&) = delete;

  bool run(const Graph& g, std::span<const Tensor> args, std::vector<Tensor>& outputs) {
    std::unique_lock lock(mu_, std::try_to_lock);
    if (!lock.owns_lock() || stats_.failed || !matches(g)) return false;
    for (size_t i = 0; i < args.size(); ++i)
      if (args[i].shape() != g.inputs[i].shape) return false;  // a graph for None dimensions
    if (exec_ && !variables_as_captured()) {
      // A variable's buffer moved since the capture (assigned outside the function, or copied
      // on write because a snapshot held it), or a snapshot shares a buffer the graph writes:
      // captured again below, with the buffers as they are now.
      TF_LOG_DEBUG(
          "a variable of a captured graph of {} nodes on {} holds another buffer, or a "
          "snapshot shares one it writes: capturing it again",
          prims_.size(), device_.to_string());
      release();
    }
    if (!exec_) {
      // The first call replays node by node: kernels load, library handles and algorithm
      // choices are made outside the capture. The second captures.
      if (!warmed_up_) {
        warmed_up_ = true;
        return false;
      }
      if (stats_.captures >= kMinCaptures &&
          stats_.launches < kLaunchesPerCapture * stats_.captures) {
        give_up(fmt::format(
            "the buffers of its variables keep changing between calls ({} captures served {} "
            "calls; a variable assigned outside the function, or a snapshot of one held across "
            "calls, makes the next call capture again)",
            stats_.captures, stats_.launches));
        return false;
      }
      // Another graph capturing on this device: this call runs node by node, a later one
      // captures.
      std::unique_lock device_lock(capture_mutex(device_), std::try_to_lock);
      if (!device_lock.owns_lock() || !capture(g)) return false;
    }

    if (debugging::log_device_placement())  // as a node-by-node replay logs them
      for (const Graph::Node& n : g.nodes)
        TF_LOG_INFO("Executing op {} in device {}", n.prim->name(), n.device.to_string());
    cudaStream_t s = ::tapeflow::detail::cuda::stream(device_);
    for (size_t i = 0; i < args.size(); ++i)
      if (args[i].nbytes() > 0)
        TF_CUDA_CHECK(cudaMemcpyAsync(static_inputs_[i].raw_data(), args[i].raw_data(),
                                      args[i].nbytes(), cudaMemcpyDeviceToDevice, s));
    if (const cudaError_t launched = cudaGraphLaunch(exec_, s); launched != cudaSuccess) {
      // Node by node from now on (an error the device keeps raises again there).
      cudaGetLastError();
      release();
      give_up(fmt::format("cudaGraphLaunch: {}", cudaGetErrorString(launched)));
      return false;
    }
    outputs.clear();
    outputs.reserve(g.outputs.size());
    for (size_t k = 0; k < g.outputs.size(); ++k) {
      const Graph::Ref& r = g.outputs[k];
      if (r.source == Graph::Source::Input) {
        outputs.push_back(args[static_cast<size_t>(r.index)]);
      } else if (r.source == Graph::Source::Constant) {
        outputs.push_back(g.constants[static_cast<size_t>(r.index)]);
      } else {
        // A copy of the graph's buffer, or of the variable's buffer that the output is a read
        // of (its value at the end of the graph: a read that a later write would change makes
        // the capture fail).
        const TensorMeta& m = static_output_metas_[k];
        Tensor t = ::tapeflow::detail::empty(m.shape, m.dtype, device_);
        if (t.nbytes() > 0)
          TF_CUDA_CHECK(cudaMemcpyAsync(t.raw_data(), static_output_data_[k], t.nbytes(),
                                        cudaMemcpyDeviceToDevice, s));
        outputs.push_back(std::move(t));
      }
    }
    ++stats_.launches;
    return true;
  }

  CudaGraphStats stats() const {
    std::lock_guard lock(mu_);
    return stats_;
  }

 private:
  // The graph this replay was made for (prepare() makes a new one after edits; copies of a
  // graph share it and must not have been edited since).
  bool matches(const Graph& g) const {
    if (g.nodes.size() != prims_.size() || !(g.outputs == outputs_)) return false;
    for (size_t i = 0; i < prims_.size(); ++i)
      if (g.nodes[i].prim.get() != prims_[i]) return false;
    return true;
  }

  // Whether every variable holds the buffer the capture recorded, and nothing else holds the
  // buffers the graph writes.
  bool variables_as_captured() const {
    for (const CapturedVariable& v : variables_) {
      const ::tapeflow::detail::VariableBuffer b = ::tapeflow::detail::variable_buffer(v.handle);
      if (b.data != v.data || (v.written && !b.unshared)) return false;
    }
    return true;
  }

  // Drops the captured graph and what it keeps (a later call captures again).
  void release() {
    // An executable graph still running is freed when it completes; the blocks go back to the
    // allocator, whose later users run after it on the device's stream.
    if (exec_) cudaGraphExecDestroy(exec_);
    if (graph_) cudaGraphDestroy(graph_);
    exec_ = nullptr;
    graph_ = nullptr;
    static_inputs_.clear();
    static_outputs_.clear();
    static_output_data_.clear();
    static_output_metas_.clear();
    scratch_.reset();
    stats_.captured = false;
  }

  void give_up(const std::string& why) {
    stats_.failed = true;
    stats_.failure = why;
    TF_LOG_INFO("a traced graph of {} nodes on {} replays node by node: {}", prims_.size(),
                device_.to_string(), why);
  }

  bool capture(const Graph& g) {
    ++stats_.captures;
    std::string failure;
    cudaStream_t cs = nullptr;
    std::unique_ptr<::tapeflow::detail::cuda::DeferredFrees> scratch;
    try {
      for (CapturedVariable& v : variables_) {
        // A buffer the graph writes that a snapshot shares is copied for the variable first
        // (what the first write would do; the snapshot keeps its value).
        if (v.written) ::tapeflow::detail::unshare_variable(v.handle);
        v.data = ::tapeflow::detail::variable_buffer(v.handle).data;
      }
      static_inputs_.clear();
      for (const TensorMeta& m : g.inputs)
        static_inputs_.push_back(::tapeflow::detail::empty(m.shape, m.dtype, device_));
      cs = ::tapeflow::detail::cuda::capture_stream(device_);
      scratch = std::make_unique<::tapeflow::detail::cuda::DeferredFrees>(device_);
      ::tapeflow::detail::cuda::prepare_capture(device_);
    } catch (const std::exception& e) {
      // Nothing was captured (out of memory, a library handle that could not be made).
      failure = e.what();
    }
    std::vector<Tensor> outs;
    const cudaError_t begin =
        failure.empty() ? cudaStreamBeginCapture(cs, cudaStreamCaptureModeRelaxed) : cudaSuccess;
    if (!failure.empty()) {
      // Failed before capturing: nothing to end.
    } else if (begin != cudaSuccess) {
      failure = fmt::format("cudaStreamBeginCapture: {}", cudaGetErrorString(begin));
    } else {
      try {
        ::tapeflow::detail::cuda::CaptureScope scope(device_);
        // Scratch buffers the nodes free while capturing stay reserved for the graph.
        ::tapeflow::detail::cuda::DeferFreesScope defer(*scratch);
        // Variables are written where they lie (the kernels keep their addresses); a write to
        // a buffer that another value of the graph still holds fails the capture, before any
        // variable changes.
        ::tapeflow::detail::VariableWritesInPlaceScope in_place;
        outs = g.run_nodes(static_inputs_, /*through_dispatch=*/false, /*capture=*/true);
      } catch (const std::exception& e) {
        failure = e.what();
      } catch (...) {
        failure = "a node threw an exception that is not a std::exception";
      }
      cudaGraph_t graph = nullptr;
      const cudaError_t end = cudaStreamEndCapture(cs, &graph);
      if (failure.empty() && end != cudaSuccess)
        failure = fmt::format("cudaStreamEndCapture: {}", cudaGetErrorString(end));
      if (failure.empty()) {
        // Auto-free: should a library record a stream-ordered allocation it does not free
        // inside the graph, relaunching frees it first instead of failing.
        const cudaError_t inst =
            cudaGraphInstantiate(&exec_, graph, cudaGraphInstantiateFlagAutoFreeOnLaunch);
        if (inst != cudaSuccess) {
          exec_ = nullptr;
          failure = fmt::format("cudaGraphInstantiate: {}", cudaGetErrorString(inst));
        }
      }
      if (failure.empty()) {
        graph_ = graph;
      } else if (graph) {
        cudaGraphDestroy(graph);
      }
    }
    cudaGetLastError();  // capture errors are not sticky; clear the last one
    // The variables' allocations now (writes were in place: each buffer is the one recorded).
    std::vector<const void*> storages;
    bool moved = false;
    for (const CapturedVariable& v : variables_) {
      const ::tapeflow::detail::VariableBuffer b = ::tapeflow::detail::variable_buffer(v.handle);
      moved = moved || b.data != v.data;
      storages.push_back(b.storage);
    }
    if (failure.empty() && moved) {
      // Another thread assigned a variable meanwhile: a later call captures again (counted
      // towards the give-up rule in run()).
      TF_LOG_DEBUG("a variable's buffer changed while capturing a graph on {}: capturing again "
                   "later",
                   device_.to_string());
      release();
      return false;
    }
    if (!failure.empty()) {
      release();
      give_up("capturing it as a CUDA graph failed: " + failure);
      return false;
    }
    // Outputs that are reads of variables are copied from the variables' buffers (checked at
    // every call), not kept: holding them would make every in-place write copy.
    for (Tensor& t : outs) {
      static_output_data_.push_back(t.defined() ? t.raw_data() : nullptr);
      static_output_metas_.push_back({t.shape(), t.dtype()});
      if (t.defined() && std::find(storages.begin(), storages.end(),
                                   t.impl()->storage.get()) != storages.end())
        t = Tensor();
    }
    static_outputs_ = std::move(outs);
    scratch_ = std::move(scratch);
    size_t num = 0;
    if (cudaGraphGetNodes(graph_, nullptr, &num) == cudaSuccess)
      stats_.num_kernel_nodes = static_cast<int>(num);
    std::set<const void*> seen;
    size_t bytes = 0;
    auto count = [&](const Tensor& t) {
      if (t.defined() && seen.insert(t.raw_data()).second) bytes += t.nbytes();
    };
    for (const Tensor& t : static_inputs_) count(t);
    for (const Tensor& t : static_outputs_) count(t);
    stats_.kept_bytes = bytes + scratch_->bytes();
    stats_.captured = true;
    TF_LOG_DEBUG(
        "captured a traced graph of {} nodes on {} as a CUDA graph of {} nodes ({} "
        "bytes kept)",
        g.nodes.size(), device_.to_string(), stats_.num_kernel_nodes, stats_.kept_bytes);
    return true;
  }

  Device device_;
  std::vector<const Primitive*> prims_;
  std::vector<Graph::Ref> outputs_;
  mutable std::mutex mu_;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
  // A variable the graph reads or writes, and the buffer the capture recorded for it.
  struct CapturedVariable {
    const void* handle;
    bool written;
    const void* data;
  };
  std::vector<CapturedVariable> variables_;
  std::vector<Tensor> static_inputs_;
  // The graph's results: buffers it keeps (undefined for reads of variables) and where each
  // result lies after a launch.
  std::vector<Tensor> static_outputs_;
  std::vector<const void*> static_output_data_;
  std::vector<TensorMeta> static_output_metas_;
  // Freed while capturing (scratch of the captured kernels); returned to the allocator when the
  // replay is destroyed, after exec_ (the destructor's body) and with the tensors above.
  std::unique_ptr<::tapeflow::detail::cuda::DeferredFrees> scratch_;
  bool warmed_up_ = false;
  CudaGraphStats stats_;
};

std::shared_ptr<CudaGraphReplay> make_cuda_graph_replay(const Graph& graph, std::string* why_not) {
  auto no = [&](std::string why) -> std::shared_ptr<CudaGraphReplay> {
    if (why_not) *why_not = std::move(why);
    return nullptr;
  };
  if (graph.nodes.empty()) return no("it has no nodes");
  const Device device = graph.nodes[0].device;
  if (!device.is_gpu()) return no("its nodes run on " + device.to_string());
  if (graph.nodes.size() < 2) return no("one node needs no graph");
  GraphVariables vars;
  if (std::string why = capture_blocker(graph, &vars); !why.empty()) return no(std::move(why));
  size_t bytes = 0;
  for (const Graph::Node& n : graph.nodes) {
    if (n.device != device) return no("its nodes run on more than one device");
    // Variable nodes name their variable's device as their target: it must be this one.
    const bool variable_node = touches_variables(*n.prim);
    if (const auto target = n.prim->target_device();
        target && (!variable_node || *target != device))
      return no(fmt::format("{} {} between devices", n.prim->name(),
                            variable_node ? "acts on a variable" : "copies"));
    for (const TensorMeta& m : n.outputs) {
      if (m.shape.num_elements() < 0) return no("a shape is not fully known");
      if (!n.prim->is_view() && !variable_node) bytes += m.nbytes();
    }
  }
  for (size_t i = 0; i < graph.inputs.size(); ++i) {
    if (i < graph.input_devices.size() && graph.input_devices[i] != device)
      return no(fmt::format("input {} is on {}", i, graph.input_devices[i].to_string()));
    if (graph.inputs[i].shape.num_elements() < 0) return no("an input shape is not fully known");
    bytes += graph.inputs[i].nbytes();
  }
  for (const Tensor& c : graph.constants)
    if (c.placement() != device) return no("a captured constant is on " + c.device());
  if (bytes > kMaxKeptBytes)
    return no(fmt::format("its values take {} MiB (CUDA graphs are kept for graphs up to {} MiB)",
                          bytes >> 20, kMaxKeptBytes >> 20));
  return std::make_shared<CudaGraphReplay>(graph, device, vars);
}

bool run_cuda_graph(CudaGraphReplay& replay, const Graph& graph, std::span<const Tensor> args,
                    std::vector<Tensor>& outputs) {
  return replay.run(graph, args, outputs);
}

CudaGraphStats cuda_graph_stats(const CudaGraphReplay& replay) {
  return replay.stats();
}

}  // namespace tapeflow::jit
