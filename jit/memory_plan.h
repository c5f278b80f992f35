// Memory planning for traced graphs (issue 5's last pass). Owns the arena layout of a prepared
// Graph's intermediates and the arena a replay borrows.
//
// From the node order, each value's readers and each output's byte size (shapes are static in a
// prepared graph), plan_memory() gives every planned intermediate an offset in one arena:
// greedy by size, each buffer at the best-fitting gap among the already placed buffers whose
// lifetimes (inclusive node intervals) overlap its own, offsets and sizes 64-byte aligned. Two
// buffers share bytes only when no node runs while both are live, so an output buffer never
// aliases an input of its own node.
//
// Planned: the outputs of CPU nodes that allocate them (no view, no side effect, no copy to
// another device, not element_count) and that never leave the call. Not planned: a value
// whose storage (itself, or a view of it) is a graph output or is read by a side-effect node (an
// assignment may adopt the buffer), empty values, and everything when a shape is not fully
// known. A view node's output shares its source's buffer, whose lifetime then extends to the
// view's last reader.
//
// Threading: a plan is immutable once built, except for the arena it caches: one replay at a
// time borrows it (an atomic flag); a replay that finds it taken allocates a fresh arena. Calls
// recorded by a tape or an enclosing trace go through dispatch and never use the plan.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace tapeflow {
class Graph;
struct TensorMeta;
}  // namespace tapeflow

namespace tapeflow::jit {

class MemoryPlan {
 public:
  static constexpr size_t kAlignment = 64;

  // One planned buffer: the output `output` of node `node`, live from node `first` to node
  // `last` inclusive (the last reader of the value or of a view of it).
  struct Buffer {
    int node = 0;
    int output = 0;
    int first = 0;
    int last = 0;
    size_t nbytes = 0;  // the tensor's bytes
    size_t size = 0;    // nbytes rounded up to kAlignment
    size_t offset = 0;  // into the arena, a multiple of kAlignment
  };

  struct Stats {
    int num_values = 0;          // node outputs in the graph
    int num_planned = 0;         // of them in the arena
    size_t arena_bytes = 0;      // the arena: what one replay allocates for them
    size_t planned_bytes = 0;    // the planned buffers' sizes added up (unplanned replay)
    size_t live_peak_bytes = 0;  // most planned bytes live at one node (the arena's lower bound)
  };

  const std::vector<Buffer>& buffers() const { return buffers_; }
  const Stats& stats() const { return stats_; }
  // Whether replays use the arena (TAPEFLOW_MEMORY_PLAN when the plan was built).
  bool enabled() const { return enabled_; }
  int num_nodes() const { return num_nodes_; }
  // Whether the plan was made for this graph's nodes and outputs (a graph edited after
  // prepare() replays unplanned).
  bool matches(const Graph& graph) const;
  // The arena offset of node `node`'s output `output`, or -1 when it is not planned.
  int64_t offset(int node, int output) const {
    const int b = slot_[static_cast<size_t>(first_slot_[static_cast<size_t>(node)] + output)];
    return b < 0 ? -1 : static_cast<int64_t>(buffers_[static_cast<size_t>(b)].offset);
  }
  const Buffer* buffer(int node, int output) const {
    const int b = slot_[static_cast<size_t>(first_slot_[static_cast<size_t>(node)] + output)];
    return b < 0 ? nullptr : &buffers_[static_cast<size_t>(b)];
  }
  // "memory plan: 7 of 12 values in a 1.5 KiB arena (unplanned 3.0 KiB, saves 50%, live peak
  // 1.5 KiB)", the last line of Graph::to_string().
  std::string summary() const;

 private:
  friend std::shared_ptr<MemoryPlan> plan_memory(const Graph& graph, bool enabled);
  friend class ArenaLease;
  int num_nodes_ = 0;
  bool enabled_ = true;
  std::vector<int> output_slots_;  // the graph outputs' slots (-1 for inputs and constants)
  std::vector<int> first_slot_;  // per node: index of its output 0 in slot_
  std::vector<int> slot_;        // per node output: index into buffers_, or -1
  std::vector<Buffer> buffers_;
  Stats stats_;
  // The arena one replay at a time reuses (guarded by arena_busy_).
  mutable std::atomic<bool> arena_busy_{false};
  mutable std::shared_ptr<detail::Storage> arena_;
};

// Plans the graph's intermediates (see the file comment); `enabled` is recorded in the plan.
std::shared_ptr<MemoryPlan> plan_memory(const Graph& graph, bool enabled);

// TAPEFLOW_MEMORY_PLAN=0 or 1 when set, else the default (on).
bool memory_planning_enabled();

// The arena of one replay: the plan's cached arena when no other replay holds it, else a fresh
// one. Destroy every tensor made from it before the lease (tensors keep the storage alive, so
// a leaked view only stops the cached arena from being reused).
class ArenaLease {
 public:
  explicit ArenaLease(const MemoryPlan* plan);
  ~ArenaLease();
  ArenaLease(const ArenaLease&) = delete;
  ArenaLease& operator=(const ArenaLease&) = delete;
  // A contiguous tensor at `offset` in the arena.
  Tensor tensor(const TensorMeta& meta, Device device, size_t offset) const;

 private:
  const MemoryPlan* plan_ = nullptr;
  std::shared_ptr<detail::Storage> storage_;
  bool borrowed_ = false;
};

}  // namespace tapeflow::jit
