#include "jit/memory_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "core/check.h"
#include "core/log.h"
#include "jit/graph.h"
#include "jit/passes.h"

namespace tapeflow::jit {

namespace {

size_t round_up(size_t n) {
  return (n + MemoryPlan::kAlignment - 1) / MemoryPlan::kAlignment * MemoryPlan::kAlignment;
}

std::string bytes_text(size_t n) {
  if (n < 1024) return fmt::format("{} B", n);
  if (n < (size_t{1} << 20)) return fmt::format("{:.1f} KiB", static_cast<double>(n) / 1024.0);
  if (n < (size_t{1} << 30))
    return fmt::format("{:.1f} MiB", static_cast<double>(n) / (1024.0 * 1024.0));
  return fmt::format("{:.2f} GiB", static_cast<double>(n) / (1024.0 * 1024.0 * 1024.0));
}

// Whether a replay allocates this node's outputs itself (so the arena may provide them).
bool allocates_outputs(const Graph::Node& n) {
  const Primitive& p = *n.prim;
  // Side-effect ops make their own outputs (variable reads, random streams) or keep their
  // inputs; element_count makes its scalar in produce(); copies target another device.
  return !p.is_view() && !p.has_side_effects() && !p.target_device() && n.device.is_cpu() &&
         std::strcmp(p.name(), "element_count") != 0;
}

}  // namespace

std::shared_ptr<MemoryPlan> plan_memory(const Graph& graph, bool enabled) {
  auto plan = std::make_shared<MemoryPlan>();
  MemoryPlan& p = *plan;
  p.enabled_ = enabled;
  p.num_nodes_ = graph.num_nodes();
  p.first_slot_.resize(graph.nodes.size() + 1);
  int total = 0;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    p.first_slot_[i] = total;
    total += static_cast<int>(graph.nodes[i].outputs.size());
  }
  p.first_slot_[graph.nodes.size()] = total;
  p.slot_.assign(static_cast<size_t>(total), -1);
  p.stats_.num_values = total;
  for (const Graph::Ref& r : graph.outputs)
    p.output_slots_.push_back(r.source == Graph::Source::Node && r.index < p.num_nodes_
                                  ? p.first_slot_[static_cast<size_t>(r.index)] + r.output
                                  : -1);

  bool static_shapes = true;
  for (const Graph::Node& n : graph.nodes)
    for (const TensorMeta& m : n.outputs) static_shapes &= m.shape.is_fully_defined();
  if (!static_shapes) return plan;  // a shape-generic graph for display: nothing to plan

  // Candidate buffers, and for each node output the buffer whose storage it uses (its own, or
  // the source of a view chain); -1 for storage the plan does not own.
  std::vector<MemoryPlan::Buffer> cand;
  std::vector<bool> escapes;
  std::vector<int> root(static_cast<size_t>(total), -1);
  auto root_of = [&](const Graph::Ref& r) {
    if (r.source != Graph::Source::Node) return -1;
    return root[static_cast<size_t>(p.first_slot_[static_cast<size_t>(r.index)] + r.output)];
  };
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const Graph::Node& n = graph.nodes[i];
    const int at = static_cast<int>(i);
    for (const Graph::Ref& r : n.inputs) {
      const int b = root_of(r);
      if (b < 0) continue;
      auto& buf = cand[static_cast<size_t>(b)];
      buf.last = std::max(buf.last, at);
      // An assignment may adopt the buffer; printing and the like are rare enough to keep
      // conservative: no side-effect op reads arena memory.
      if (n.prim->has_side_effects()) escapes[static_cast<size_t>(b)] = true;
    }
    const bool view = n.prim->is_view();
    const bool owns = allocates_outputs(n);
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      int& r = root[static_cast<size_t>(p.first_slot_[i]) + k];
      if (view) {
        r = n.inputs.empty() ? -1 : root_of(n.inputs[0]);
      } else if (owns) {
        MemoryPlan::Buffer b;
        b.node = at;
        b.output = static_cast<int>(k);
        b.first = b.last = at;
        b.nbytes = n.outputs[k].nbytes();
        b.size = round_up(b.nbytes);
        r = static_cast<int>(cand.size());
        cand.push_back(b);
        escapes.push_back(b.nbytes == 0);
      }
    }
  }
  for (const Graph::Ref& r : graph.outputs) {
    const int b = root_of(r);
    if (b >= 0) escapes[static_cast<size_t>(b)] = true;
  }

  std::vector<int> keep;  // candidate index -> index in buffers_ (-1: not planned)
  keep.assign(cand.size(), -1);
  for (size_t b = 0; b < cand.size(); ++b)
    if (!escapes[b]) {
      keep[b] = static_cast<int>(p.buffers_.size());
      p.buffers_.push_back(cand[b]);
    }
  // Views of planned buffers read the arena too, but only their source gets an offset.
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const Graph::Node& n = graph.nodes[i];
    if (n.prim->is_view()) continue;
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      const size_t s = static_cast<size_t>(p.first_slot_[i]) + k;
      if (root[s] >= 0) p.slot_[s] = keep[static_cast<size_t>(root[s])];
    }
  }

  // Greedy by size, best fit: larger buffers first (ties by first use, for a stable layout);
  // each goes into the smallest gap between the placed buffers whose lifetimes overlap its own,
  // or after the last of them.
  std::vector<int> order(p.buffers_.size());
  for (size_t b = 0; b < order.size(); ++b) order[b] = static_cast<int>(b);
  std::stable_sort(order.begin(), order.end(), [&](int x, int y) {
    const auto& a = p.buffers_[static_cast<size_t>(x)];
    const auto& c = p.buffers_[static_cast<size_t>(y)];
    return a.size != c.size ? a.size > c.size : a.first < c.first;
  });
  std::vector<int> placed;
  std::vector<const MemoryPlan::Buffer*> live;
  for (int x : order) {
    MemoryPlan::Buffer& b = p.buffers_[static_cast<size_t>(x)];
    live.clear();
    for (int y : placed) {
      const auto& o = p.buffers_[static_cast<size_t>(y)];
      if (o.first <= b.last && b.first <= o.last) live.push_back(&o);
    }
    std::sort(live.begin(), live.end(),
              [](const auto* u, const auto* v) { return u->offset < v->offset; });
    size_t end = 0, best = 0, best_gap = SIZE_MAX;
    for (const auto* o : live) {
      if (o->offset >= end) {
        const size_t gap = o->offset - end;
        if (gap >= b.size && gap < best_gap) {
          best_gap = gap;
          best = end;
        }
      }
      end = std::max(end, o->offset + o->size);
    }
    b.offset = best_gap == SIZE_MAX ? end : best;
    placed.push_back(x);
    p.stats_.arena_bytes = std::max(p.stats_.arena_bytes, b.offset + b.size);
  }

  p.stats_.num_planned = static_cast<int>(p.buffers_.size());
  std::vector<int64_t> delta(graph.nodes.size() + 1, 0);
  for (const auto& b : p.buffers_) {
    p.stats_.planned_bytes += b.size;
    delta[static_cast<size_t>(b.first)] += static_cast<int64_t>(b.size);
    delta[static_cast<size_t>(b.last) + 1] -= static_cast<int64_t>(b.size);
  }
  int64_t live_bytes = 0;
  for (int64_t d : delta) {
    live_bytes += d;
    p.stats_.live_peak_bytes =
        std::max(p.stats_.live_peak_bytes, static_cast<size_t>(std::max<int64_t>(live_bytes, 0)));
  }
  return plan;
}

bool MemoryPlan::matches(const Graph& graph) const {
  if (graph.num_nodes() != num_nodes_ || graph.outputs.size() != output_slots_.size())
    return false;
  for (size_t i = 0; i < output_slots_.size(); ++i) {
    const Graph::Ref& r = graph.outputs[i];
    const int slot = r.source == Graph::Source::Node && r.index < num_nodes_
                         ? first_slot_[static_cast<size_t>(r.index)] + r.output
                         : -1;
    if (slot != output_slots_[i]) return false;
  }
  return true;
}

std::string MemoryPlan::summary() const {
  const Stats& s = stats_;
  std::string line =
      fmt::format("memory plan: {} of {} values in a {} arena", s.num_planned, s.num_values,
                  bytes_text(s.arena_bytes));
  if (s.num_planned > 0) {
    const double saved =
        100.0 * (1.0 - static_cast<double>(s.arena_bytes) / static_cast<double>(s.planned_bytes));
    line += fmt::format(" (unplanned {}, saves {:.0f}%, live peak {})", bytes_text(s.planned_bytes),
                        saved, bytes_text(s.live_peak_bytes));
  }
  if (!enabled_) line += ", off (TAPEFLOW_MEMORY_PLAN=0)";
  return line;
}

bool memory_planning_enabled() {
  // On by default: as fast as unplanned replay and less memory taken from the system
  // (docs/performance.md, "Memory planning").
  return env_switch("TAPEFLOW_MEMORY_PLAN").value_or(true);
}

ArenaLease::ArenaLease(const MemoryPlan* plan) : plan_(plan) {
  if (plan_ == nullptr || plan_->stats_.arena_bytes == 0) return;
  if (!plan_->arena_busy_.exchange(true, std::memory_order_acquire)) {
    borrowed_ = true;
    storage_ = std::move(plan_->arena_);
  }
  if (!storage_)
    storage_ = std::make_shared<detail::Storage>(plan_->stats_.arena_bytes, Device{});
}

ArenaLease::~ArenaLease() {
  if (!borrowed_) return;
  // Every view made from the arena is gone unless something kept one: then the arena is left
  // to that tensor and the next replay allocates a new one.
  if (storage_.use_count() == 1) plan_->arena_ = std::move(storage_);
  else TF_LOG_DEBUG("memory plan: a replay's arena outlives the call; not reusing it");
  storage_.reset();
  plan_->arena_busy_.store(false, std::memory_order_release);
}

Tensor ArenaLease::tensor(const TensorMeta& meta, Device device, size_t offset) const {
  auto impl = std::make_shared<detail::TensorImpl>();
  impl->shape = meta.shape;
  impl->dtype = meta.dtype;
  impl->device = device;
  impl->id = detail::next_tensor_id();
  impl->storage = storage_;
  impl->offset = offset;
  return Tensor(std::move(impl));
}

}  // namespace tapeflow::jit
