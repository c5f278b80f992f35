// TF's interleave(fn, cycle_length, block_length, num_parallel_calls, deterministic): the
// datasets of the cycle are opened and read ahead by worker threads; the consumer takes their
// elements in the order of the sequential interleave (data/dataset_more.cpp), or, with
// deterministic = false, from any slot that has one ready when the current slot has none.
#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/error.h"
#include "data/dataset.h"
#include "data/dataset_internal.h"

namespace tapeflow::data {
namespace detail {
namespace {

using Node = std::shared_ptr<const DatasetBase>;

// The consumer reads the input (in order, so that each slot gets the element the sequential
// interleave would give it) and hands each element to a slot; a worker calls fn on it to open
// the slot's dataset, then any idle worker reads the slot ahead, up to `capacity_` elements.
// A slot is served by one worker at a time (`busy`), so each inner iterator is used by one
// thread at a time. The slots are made as the first input elements fill them (a cycle_length
// of 2^40 allocates nothing), in a deque so that a worker's Slot* stays valid.
class ParallelInterleaveIterator final : public IteratorBase {
 public:
  ParallelInterleaveIterator(std::unique_ptr<IteratorBase> in, const DatasetFn& fn, int64_t cycle,
                             int64_t block, int threads, bool deterministic)
      : in_(std::move(in)),
        cycle_(static_cast<size_t>(cycle)),
        block_(block),
        capacity_(static_cast<size_t>(std::clamp<int64_t>(block, 2, kMaxReadAhead))),
        deterministic_(deterministic) {
    start_threads(
        workers_, threads, "Dataset.interleave",
        [&] { return std::function<void()>([this, f = fn]() mutable { work(f); }); },
        [this] { stop_all(); });
  }
  ~ParallelInterleaveIterator() override { stop_all(); }

  bool next(Element& out) override {
    std::unique_lock lock(mu_);
    if (!started_) {
      started_ = true;
      for (size_t k = 0; k < cycle_ && !input_done_; ++k) {
        slots_.emplace_back();
        fill(lock, k);
      }
    }
    for (;;) {
      if (fatal_) std::rethrow_exception(fatal_);
      if (open_ == 0 && input_done_) return false;
      Slot& s = slots_[k_];
      if (!s.open) {  // only once the input has ended
        advance();
        continue;
      }
      if (!s.buf.empty()) return take(lock, s, out, true);
      if (s.exhausted) {
        // As the sequential interleave: the cycle moves on, and this slot takes the next input
        // element (which it would take when the cycle comes back to it).
        std::unique_ptr<IteratorBase> dead = std::move(s.it);
        s = Slot{};
        --open_;
        const size_t k = k_;
        advance();
        lock.unlock();
        dead.reset();  // may join the threads of a nested parallel dataset
        lock.lock();
        if (!input_done_) fill(lock, k);
        continue;
      }
      if (!deterministic_) {
        for (Slot& other : slots_)
          if (other.open && !other.buf.empty()) return take(lock, other, out, false);
      }
      ready_.wait(lock);
    }
  }

 private:
  // A slot's read-ahead: a block_length of 2^40 must not buffer without bound.
  static constexpr int64_t kMaxReadAhead = 64;

  struct Result {
    Element value;
    std::exception_ptr error;
  };
  struct Slot {
    bool open = false;
    bool has_pending = false;  // an input element waiting for a worker to call fn on it
    Element pending;
    std::unique_ptr<IteratorBase> it;
    std::deque<Result> buf;
    bool busy = false;       // a worker is opening or reading this slot
    bool exhausted = false;  // its dataset ended (or failed); nothing more comes
  };

  // Reads the next input element into empty slot k (the lock is released while reading).
  void fill(std::unique_lock<std::mutex>& lock, size_t k) {
    Element e;
    bool got = false;
    lock.unlock();
    try {
      got = in_->next(e);
    } catch (...) {
      lock.lock();
      input_done_ = true;  // nothing is read after the input's error
      throw;
    }
    lock.lock();
    if (!got) {
      input_done_ = true;
      return;
    }
    Slot& s = slots_[k];
    s.open = true;
    s.has_pending = true;
    s.pending = std::move(e);
    ++open_;
    work_.notify_one();
  }

  bool take(std::unique_lock<std::mutex>& lock, Slot& s, Element& out, bool current) {
    Result r = std::move(s.buf.front());
    s.buf.pop_front();
    if (current && ++in_block_ == block_) advance();
    lock.unlock();
    work_.notify_one();  // the slot has room again
    if (r.error) std::rethrow_exception(r.error);
    out = std::move(r.value);
    return true;
  }

  void advance() {
    in_block_ = 0;
    k_ = (k_ + 1) % slots_.size();
  }

  void stop_all() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    work_.notify_all();
    for (std::thread& t : workers_) t.join();
    workers_.clear();
  }

  // A slot a worker can serve, the consumer's current one first (under mu_).
  Slot* pick() {
    for (size_t i = 0; i < slots_.size(); ++i) {
      Slot& s = slots_[(k_ + i) % slots_.size()];
      if (!s.open || s.busy || s.exhausted) continue;
      if (s.has_pending || (s.it && s.buf.size() < capacity_)) return &s;
    }
    return nullptr;
  }

  void work(DatasetFn& fn) {
    std::unique_lock lock(mu_);
    for (;;) {
      Slot* s = nullptr;
      work_.wait(lock, [&] { return stop_ || (s = pick()) != nullptr; });
      if (stop_) return;
      s->busy = true;
      Result r;
      bool got = false;
      const bool opening = s->has_pending;
      if (opening) {
        Element e = std::move(s->pending);
        s->has_pending = false;
        lock.unlock();
        std::unique_ptr<IteratorBase> it;
        try {
          UserFnScope scope;
          it = fn(std::move(e)).node()->make_iterator();
        } catch (...) {
          r.error = std::current_exception();
        }
        lock.lock();
        s->it = std::move(it);
      } else {
        IteratorBase* it = s->it.get();
        lock.unlock();
        try {
          UserFnScope scope;
          got = it->next(r.value);
        } catch (...) {
          r.error = std::current_exception();
        }
        lock.lock();
      }
      s->busy = false;
      const bool failed = r.error != nullptr;
      try {
        // An error takes the place of the next element, and nothing is read after it.
        if (failed || got) s->buf.push_back(std::move(r));
        if (failed || (!opening && !got)) s->exhausted = true;
      } catch (...) {
        // Out of memory for the buffer: the element would be lost, so the iteration ends.
        if (!fatal_) fatal_ = std::current_exception();
      }
      ready_.notify_one();
    }
  }

  std::unique_ptr<IteratorBase> in_;  // read by the consumer only
  std::mutex mu_;                     // guards everything below
  std::condition_variable ready_, work_;
  const size_t cycle_;
  std::deque<Slot> slots_;
  const int64_t block_;
  const size_t capacity_;
  const bool deterministic_;
  size_t k_ = 0, open_ = 0;
  int64_t in_block_ = 0;
  bool started_ = false, input_done_ = false, stop_ = false;
  std::exception_ptr fatal_;
  std::vector<std::thread> workers_;  // started last, once every member exists
};

class ParallelInterleaveDataset final : public DatasetBase {
 public:
  ParallelInterleaveDataset(Node in, DatasetFn fn, int64_t cycle, int64_t block, int threads,
                            bool deterministic)
      : in_(std::move(in)),
        fn_(std::move(fn)),
        cycle_(cycle),
        block_(block),
        threads_(threads),
        deterministic_(deterministic) {}
  std::unique_ptr<IteratorBase> make_iterator() const override {
    return std::make_unique<ParallelInterleaveIterator>(in_->make_iterator(), fn_, cycle_, block_,
                                                        threads_, deterministic_);
  }
  // As TF: unknown, even over an empty or infinite input.
  int64_t cardinality() const override { return UNKNOWN_CARDINALITY; }

 private:
  Node in_;
  DatasetFn fn_;
  int64_t cycle_, block_;
  int threads_;
  bool deterministic_;
};

}  // namespace
}  // namespace detail

Dataset Dataset::parallel_interleave_impl(detail::DatasetFn fn, int64_t cycle_length,
                                          int64_t block_length, int64_t num_parallel_calls,
                                          bool deterministic) const {
  constexpr const char* op = "Dataset.interleave";
  TF_CHECK_ARG(cycle_length > 0 || cycle_length == AUTOTUNE, op,
               "cycle_length must be positive or AUTOTUNE, got {}", cycle_length);
  TF_CHECK_ARG(block_length > 0, op, "block_length must be positive, got {}", block_length);
  TF_CHECK_ARG(num_parallel_calls > 0 || num_parallel_calls == AUTOTUNE, op,
               "num_parallel_calls must be positive or AUTOTUNE, got {}", num_parallel_calls);
  const auto cores =
      std::max<int64_t>(1, static_cast<int64_t>(std::thread::hardware_concurrency()));
  if (cycle_length == AUTOTUNE) cycle_length = cores;
  if (num_parallel_calls == AUTOTUNE) num_parallel_calls = cores;
  // More threads than slots would have nothing to do (TF caps them at cycle_length too), and
  // more than map's cap only cost memory.
  num_parallel_calls = std::min({num_parallel_calls, cycle_length, int64_t{256}});
  return Dataset(std::make_shared<detail::ParallelInterleaveDataset>(
      node_, std::move(fn), cycle_length, block_length, static_cast<int>(num_parallel_calls),
      deterministic));
}

}  // namespace tapeflow::data
