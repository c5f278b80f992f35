// tf::data::Dataset's parallel map, stateful and windowing transformations and the dataset
// selectors: map(fn, num_parallel_calls), take_while, reduce, scan, window, rebatch,
// group_by_window, bucket_by_sequence_length, choose_from_datasets, sample_from_datasets and
// counter. Every iterator belongs to one thread, as in dataset.cpp; the parallel map's iterator
// owns its worker threads and joins them when destroyed.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/context.h"
#include "core/device.h"
#include "core/error.h"
#include "core/hash.h"
#include "data/dataset.h"
#include "data/dataset_internal.h"
#include "ops/random.h"

namespace tapeflow::data {
namespace detail {

int64_t to_key(const char* op, const Tensor& t) {
  TF_CHECK_ARG(t.defined() && !t.is_symbolic() && t.rank() == 0, op,
               "the key function must return an integer scalar, got {}",
               t.defined() ? "shape " + t.shape().to_string() : std::string("an undefined tensor"));
  if (t.dtype() == int64) return t.item<int64_t>();
  TF_CHECK_ARG(t.dtype() == int32, op,
               "the key function must return an integer scalar (int64 as TF asks, or int32), got "
               "{}",
               dtype_name(t.dtype()));
  return t.item<int32_t>();
}

const Tensor& single_component(const char* op, const Element& e, const char* what) {
  TF_CHECK_ARG(e.size() == 1, op,
               "a function taking (tf::Tensor, tf::Tensor) needs a one-component {}, got {} "
               "components (take std::vector<tf::Tensor> instead)",
               what, e.size());
  return e[0];
}

namespace {

using Node = std::shared_ptr<const DatasetBase>;
using tapeflow::detail::empty;
using tapeflow::detail::host_bytes;

// A function's result as a dataset element: defined tensors with values, on the CPU.
void check_result(const char* op, Element& e, const char* what) {
  for (size_t c = 0; c < e.size(); ++c) {
    Tensor& t = e[c];
    TF_CHECK_ARG(t.defined() && !t.is_symbolic(), op,
                 "the function returned {} as component {} of its {}; dataset elements must be "
                 "tensors with values",
                 t.defined() ? "a symbolic tensor" : "an undefined tensor", c, what);
    if (!t.placement().is_cpu()) t = tapeflow::detail::copy_to_device(t, Device{});
  }
}

// reduce's and scan's rule (TF's): the new state has the initial state's structure and dtypes.
void check_state(const char* op, const Element& initial, const Element& state) {
  bool same = initial.size() == state.size();
  for (size_t c = 0; same && c < state.size(); ++c) same = initial[c].dtype() == state[c].dtype();
  TF_CHECK_ARG(same, op,
               "the function's new state {} does not match the initial state {}: the state must "
               "keep its number of components and their dtypes",
               dtypes_of(state), dtypes_of(initial));
}

// ---- map with num_parallel_calls ----

// Worker threads take runs of consecutive input elements (under in_mu_), number them and apply
// their own copy of the function outside every lock; results wait in done_ until the consumer
// takes them, in input order (deterministic) or as they come. A run is one element until the
// function's cost is known, then as many as take about kRunTarget (at most kMaxRun): a cheap
// function (a few microseconds, e.g. a cast and a scale of a small image) would otherwise pay a
// lock hand-off and a consumer wake-up per element, which costs more than the function itself
// on a busy machine. has_space() bounds the elements taken and not yet consumed, so a slow
// consumer stops the workers.
class ParallelMapIterator final : public IteratorBase {
 public:
  ParallelMapIterator(std::unique_ptr<IteratorBase> in, const MapFn& fn, int threads,
                      bool deterministic)
      : in_(std::move(in)),
        threads_(static_cast<size_t>(threads)),
        deterministic_(deterministic),
        // The consumer spins briefly before sleeping only where a core is left for it: on a
        // machine whose cores all run workers the spin steals their time.
        spin_(static_cast<unsigned>(threads) < std::thread::hardware_concurrency()) {
    start_threads(
        workers_, threads, "Dataset.map",
        [&] { return std::function<void()>([this, f = fn]() mutable { work(f); }); },
        [this] { stop_all(); });
  }
  ~ParallelMapIterator() override { stop_all(); }
  bool next(Element& out) override {
    // A consumer about as fast as the workers would otherwise sleep and be woken for most
    // elements (tens of microseconds each on a busy machine): wait briefly without blocking.
    if (spin_ && !ready_hint_.load(std::memory_order_acquire)) {
      const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(50);
      while (!ready_hint_.load(std::memory_order_acquire) &&
             std::chrono::steady_clock::now() < until)
        std::this_thread::yield();
    }
    std::unique_lock lock(mu_);
    for (;;) {
      // A worker that could not store its results (out of memory) ended the iteration.
      if (fatal_) std::rethrow_exception(fatal_);
      auto it = deterministic_ ? done_.find(next_seq_) : done_.begin();
      if (it != done_.end()) {
        Result r = std::move(it->second);
        done_.erase(it);
        if (deterministic_) ++next_seq_;
        update_hint();
        --outstanding_;
        const bool wake = waiting_workers_ > 0 && has_space();
        lock.unlock();
        if (wake) space_.notify_one();
        if (r.error) std::rethrow_exception(r.error);
        out = std::move(r.value);
        return true;
      }
      // Every element taken is either in done_ or being mapped (active_ counts the workers
      // holding a run).
      if (input_end_ && active_ == 0) return false;
      consumer_waiting_ = true;
      ready_.wait(lock);
      consumer_waiting_ = false;
    }
  }

 private:
  static constexpr size_t kMaxRun = 16;
  static constexpr int64_t kRunTargetNs = 100'000;

  struct Result {
    Element value;
    std::exception_ptr error;
  };

  void stop_all() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    space_.notify_all();
    for (std::thread& t : workers_) t.join();
    workers_.clear();
  }

  // Whether the consumer's next element is ready (under mu_; read without it by the spin).
  void update_hint() {
    const bool ready = deterministic_ ? done_.count(next_seq_) > 0 : !done_.empty();
    ready_hint_.store(ready || (input_end_ && active_ == 0) || fatal_ != nullptr,
                      std::memory_order_release);
  }

  // Whether a worker may take a run (under mu_): at most 4 elements per thread, plus 4, plus a
  // run per thread are taken and not yet consumed. A worker waits for room for a whole run, so
  // that a consumer faster than the workers does not cut the runs down to single elements.
  bool has_space() const {
    const size_t run = run_length();
    return outstanding_ + run <= 4 * threads_ + 4 + threads_ * run;
  }

  // The run length for the function's average cost so far (1 until one call was timed).
  size_t run_length() const {
    const int64_t ns = avg_ns_.load(std::memory_order_relaxed);
    if (ns <= 0) return 1;
    return std::clamp<size_t>(static_cast<size_t>(kRunTargetNs / ns), 1, kMaxRun);
  }

  // Ends the iteration with `error` (under mu_): the consumer rethrows it, the workers stop.
  void fail_locked(std::exception_ptr error) {
    if (!fatal_) fatal_ = std::move(error);
    stop_ = true;
    update_hint();
  }

  void work(MapFn& fn) {
    std::vector<std::pair<int64_t, Result>> run;
    std::vector<Element> inputs;
    try {
      // Room for the longest run, so that filling a run allocates nothing.
      run.reserve(kMaxRun);
      inputs.reserve(kMaxRun);
    } catch (...) {
      {
        std::lock_guard lock(mu_);
        fail_locked(std::current_exception());
      }
      ready_.notify_all();
      space_.notify_all();
      return;
    }
    for (;;) {
      size_t want = 0;
      {
        std::unique_lock lock(mu_);
        ++waiting_workers_;
        space_.wait(lock, [&] { return stop_ || input_end_ || has_space(); });
        --waiting_workers_;
        if (stop_ || input_end_) return;
        want = run_length();
        outstanding_ += want;
        ++active_;
      }
      run.clear();
      inputs.clear();
      bool input_done = false;
      {
        std::lock_guard in_lock(in_mu_);
        while (run.size() < want && !input_exhausted_) {
          Element e;
          Result r;
          bool got = false;
          try {
            got = in_->next(e);
            if (!got) input_exhausted_ = true;
          } catch (...) {
            // The input's error takes this element's place; nothing is read after it.
            r.error = std::current_exception();
            input_exhausted_ = true;
          }
          if (!got && !r.error) break;
          run.emplace_back(taken_++, std::move(r));
          inputs.push_back(std::move(e));
        }
        input_done = input_exhausted_;
      }
      const auto t0 = std::chrono::steady_clock::now();
      size_t mapped = 0;
      for (size_t i = 0; i < run.size(); ++i) {
        Result& r = run[i].second;
        if (r.error) continue;
        try {
          UserFnScope scope;
          r.value = fn(std::move(inputs[i]));
          check_result("Dataset.map", r.value, "result");
        } catch (...) {
          r.error = std::current_exception();
        }
        ++mapped;
      }
      if (mapped > 0) {
        const int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                               std::chrono::steady_clock::now() - t0)
                               .count() /
                           static_cast<int64_t>(mapped);
        // A running average (weight 1/4 for the newest run); races between workers only
        // lose an update, which the next run repeats.
        const int64_t old = avg_ns_.load(std::memory_order_relaxed);
        avg_ns_.store(old <= 0 ? std::max<int64_t>(ns, 1) : std::max<int64_t>((3 * old + ns) / 4, 1),
                      std::memory_order_relaxed);
      }
      bool wake_consumer = false;
      {
        std::lock_guard lock(mu_);
        --active_;
        outstanding_ -= want - run.size();
        try {
          for (auto& [seq, r] : run) done_.emplace(seq, std::move(r));
        } catch (...) {
          // Out of memory for the map's nodes: an element would be lost (and an ordered
          // consumer would wait for it forever), so the iteration ends with the error.
          fail_locked(std::current_exception());
          input_done = true;
        }
        if (input_done) input_end_ = true;
        update_hint();
        // Wake the consumer only for the element it waits for (or for the end).
        wake_consumer = consumer_waiting_ && ready_hint_.load(std::memory_order_relaxed);
      }
      if (wake_consumer) ready_.notify_one();
      if (want > run.size() || input_done) space_.notify_all();  // the other workers stop too
      if (input_done) return;
    }
  }

  std::unique_ptr<IteratorBase> in_;
  std::mutex in_mu_;  // guards in_, taken_ and input_exhausted_
  int64_t taken_ = 0;
  bool input_exhausted_ = false;

  std::mutex mu_;  // guards everything below but the atomics
  std::condition_variable ready_, space_;
  std::map<int64_t, Result> done_;
  size_t outstanding_ = 0;  // taken by a worker and not yet consumed
  size_t active_ = 0;       // workers holding a run they read or map
  int waiting_workers_ = 0;
  int64_t next_seq_ = 0;
  bool input_end_ = false, stop_ = false, consumer_waiting_ = false;
  std::exception_ptr fatal_;  // a worker's failure to store its results
  std::atomic<bool> ready_hint_{false};
  std::atomic<int64_t> avg_ns_{0};  // the function's average cost per element
  const size_t threads_;
  const bool deterministic_;
  const bool spin_;
  std::vector<std::thread> workers_;  // started last, once every member exists
};

class ParallelMapDataset final : public DatasetBase {
 public:
  ParallelMapDataset(Node in, MapFn fn, int threads, bool deterministic)
      : in_(std::move(in)), fn_(std::move(fn)), threads_(threads), deterministic_(deterministic) {}
  std::unique_ptr<IteratorBase> make_iterator() const override {
    return std::make_unique<ParallelMapIterator>(in_->make_iterator(), fn_, threads_,
                                                 deterministic_);
  }
  int64_t cardinality() const override { return in_->cardinality(); }

 private:
  Node in_;
  MapFn fn_;
  int threads_;
  bool deterministic_;
};

// ---- take_while ----

class TakeWhileIterator final : public IteratorBase {
 public:
  TakeWhileIterator(std::unique_ptr<IteratorBase> in, std::shared_ptr<const PredicateFn> pred)
      : in_(std::move(in)), pred_(std::move(pred)) {}
  bool next(Element& out) override {
    if (done_ || !in_->next(out)) return false;
    UserFnScope scope;
    if ((*pred_)(out)) return true;
    done_ = true;
    return false;
  }

 private:
  std::unique_ptr<IteratorBase> in_;
  std::shared_ptr<const PredicateFn> pred_;
  bool done_ = false;
};

class TakeWhileDataset final : public DatasetBase {
 public:
  TakeWhileDataset(Node in, PredicateFn pred)
      : in_(std::move(in)), pred_(std::make_shared<const PredicateFn>(std::move(pred))) {}
  std::unique_ptr<IteratorBase> make_iterator() const override {
    return std::make_unique<TakeWhileIterator>(in_->make_iterator(), pred_);
  }
  int64_t cardinality() const override { return UNKNOWN_CARDINALITY; }  // as TF

 private:
  Node in_;
  std::shared_ptr<const PredicateFn> pred_;
};

// ---- scan ----

class ScanIterator final : public IteratorBase {
 public:
  ScanIterator(std::unique_ptr<IteratorBase> in, std::shared_ptr<const Element> initial,
               std::shared_ptr<const ScanFn> fn)
      : in_(std::move(in)), initial_(std::move(initial)), state_(*initial_), fn_(std::move(fn)) {}
  bool next(Element& out) override {
    Element e;
    if (!in_->next(e)) return false;
    UserFnScope scope;
    auto [state, output] = (*fn_)(state_, std::move(e));
    check_result("Dataset.scan", state, "new state");
    check_state("Dataset.scan", *initial_, state);
    check_result("Dataset.scan", output, "output");
    state_ = std::move(state);
    out = std::move(output);
    return true;
  }

 private:
  std::unique_ptr<IteratorBase> in_;
  std::shared_ptr<const Element> initial_;
  Element state_;
  std::shared_ptr<const ScanFn> fn_;
};

class ScanDataset final : public DatasetBase {
 public:
  ScanDataset(Node in, Element initial, ScanFn fn)
      : in_(std::move(in)),
        initial_(std::make_shared<const Element>(std::move(initial))),
        fn_(std::make_shared<const ScanFn>(std::move(fn))) {}
  std::unique_ptr<IteratorBase> make_iterator() const override {
    return std::make_unique<ScanIterator>(in_->make_iterator(), initial_, fn_);
  }
  int64_t cardinality() const override { return in_->cardinality(); }

 private:
  Node in_;
  std::shared_ptr<const Element> initial_;
  std::shared_ptr<const ScanFn> fn_;
};

// ---- window ----

// The input elements a window spans, (size - 1) * stride + 1, saturated at INT64_MAX: a span past
// the int64 range holds every element there is.
int64_t window_span(int64_t size, int64_t stride) {
  int64_t span = 0;
  if (__builtin_mul_overflow(size - 1, stride, &span) || span == INT64_MAX) return INT64_MAX;
  return span + 1;
}

// Window k starts at input element k * shift and takes every stride-th element from there, up
// to size of them. buf_ holds the input from the current window's start on.
class WindowIterator final : public IteratorBase {
 public:
  WindowIterator(std::unique_ptr<IteratorBase> in, int64_t size, int64_t shift, int64_t stride,
                 bool drop)
      : in_(std::move(in)),
        size_(size),
        shift_(shift),
        stride_(stride),
        span_(window_span(size, stride)),
        drop_(drop) {}
  bool next(Element& out) override {
    // Move to the window's start, reading past the elements no window needs.
    while (buf_start_ < start_) {
      if (!buf_.empty()) {
        buf_.pop_front();
      } else {
        Element skipped;
        if (!pull(skipped)) return false;
      }
      ++buf_start_;
    }
    while (static_cast<int64_t>(buf_.size()) < span_) {
      Element e;
      if (!pull(e)) break;
      buf_.push_back(std::move(e));
    }
    std::vector<Element> members;
    for (int64_t j = 0; j < size_ && j * stride_ < static_cast<int64_t>(buf_.size()); ++j)
      members.push_back(buf_[static_cast<size_t>(j * stride_)]);
    if (members.empty() || (drop_ && static_cast<int64_t>(members.size()) < size_)) return false;
    const size_t nc = members[0].size();
    for (size_t i = 1; i < members.size(); ++i)
      TF_CHECK_ARG(members[i].size() == nc, "Dataset.window",
                   "elements have {} and {} components; every element needs the same number", nc,
                   members[i].size());
    out.resize(nc);
    for (size_t c = 0; c < nc; ++c) out[c] = stack_elements(members, c, "Dataset.window");
    if (__builtin_add_overflow(start_, shift_, &start_)) start_ = INT64_MAX;
    return true;
  }

 private:
  bool pull(Element& e) {
    if (in_done_) return false;
    if (in_->next(e)) return true;
    in_done_ = true;
    return false;
  }

  std::unique_ptr<IteratorBase> in_;
  int64_t size_, shift_, stride_, span_;
  bool drop_;
  std::deque<Element> buf_;
  int64_t buf_start_ = 0, start_ = 0;
  bool in_done_ = false;
};

class WindowDataset final : public DatasetBase {
 public:
  WindowDataset(Node in, int64_t size, int64_t shift, int64_t stride, bool drop)
      : in_(std::move(in)), size_(size), shift_(shift), stride_(stride), drop_(drop) {}
  std::unique_ptr<IteratorBase> make_iterator() const override {
    return std::make_unique<WindowIterator>(in_->make_iterator(), size_, shift_, stride_, drop_);
  }
  int64_t cardinality() const override {
    const int64_t n = in_->cardinality();
    if (n < 0) return n;
    if (!drop_) return n == 0 ? 0 : (n - 1) / shift_ + 1;
    const int64_t span = window_span(size_, stride_);
    return n < span ? 0 : (n - span) / shift_ + 1;
  }

 private:
  Node in_;
  int64_t size_, shift_, stride_;
  bool drop_;
};

// ---- rebatch ----

// Rows [from, to) of every component of a batch.
struct RowRange {
  Element batch;
  int64_t from, to;
};

int64_t rows_of(const Element& batch) {
  TF_CHECK_ARG(!batch.empty(), "Dataset.rebatch", "an element has no components");
  for (size_t c = 0; c < batch.size(); ++c)
    TF_CHECK_ARG(batch[c].rank() >= 1, "Dataset.rebatch",
                 "every component must be a batch (rank >= 1); component {} is a scalar", c);
  const int64_t n = batch[0].shape()[0];
  for (size_t c = 1; c < batch.size(); ++c)
    TF_CHECK_ARG(batch[c].shape()[0] == n, "Dataset.rebatch",
                 "components have batch sizes {} (component 0) and {} (component {})", n,
                 batch[c].shape()[0], c);
  return n;
}

Tensor gather_row_ranges(const std::vector<RowRange>& parts, size_t c, int64_t rows) {
  const Tensor& first = parts[0].batch[c];
  TensorShape s = first.shape();
  s[0] = rows;
  for (const RowRange& p : parts) {
    const Tensor& t = p.batch[c];
    TensorShape row = t.shape(), first_row = first.shape();
    row[0] = first_row[0] = 0;
    TF_CHECK_ARG(t.dtype() == first.dtype() && row == first_row, "Dataset.rebatch",
                 "cannot regroup rows of {} {} with rows of {} {} in component {}",
                 dtype_name(first.dtype()), first.shape().to_string(), dtype_name(t.dtype()),
                 t.shape().to_string(), c);
  }
  Tensor out = empty(s, first.dtype(), Device{});
  if (out.nbytes() == 0) return out;
  const size_t row_bytes = out.nbytes() / static_cast<size_t>(rows);
  auto* dst = static_cast<uint8_t*>(out.raw_data());
  for (const RowRange& p : parts) {
    auto hb = host_bytes(p.batch[c]);
    const size_t n = static_cast<size_t>(p.to - p.from) * row_bytes;
    std::memcpy(dst, static_cast<const uint8_t*>(hb.data) + static_cast<size_t>(p.from) * row_bytes,
                n);
    dst += n;
  }
  return out;
}

class RebatchIterator final : public IteratorBase {
 public:
  RebatchIterator(std::unique_ptr<IteratorBase> in, int64_t n, bool drop)
      : in_(std::move(in)), n_(n), drop_(drop) {}
  bool next(Element& out) override {
    std::vector<RowRange> parts;
    int64_t rows = 0;
    while (rows < n_) {
      if (pending_.from == pending_.to) {
        if (in_done_ || !in_->next(pending_.batch)) {
          in_done_ = true;
          break;
        }
        pending_.from = 0;
        pending_.to = rows_of(pending_.batch);
        if (!parts.empty() && pending_.batch.size() != parts[0].batch.size())
          TF_THROW(InvalidArgumentError, "Dataset.rebatch", "batches have {} and {} components",
                   parts[0].batch.size(), pending_.batch.size());
        continue;
      }
      const int64_t take = std::min(n_ - rows, pending_.to - pending_.from);
      parts.push_back({pending_.batch, pending_.from, pending_.from + take});
      pending_.from += take;
      rows += take;
    }
    if (rows == 0 || (drop_ && rows < n_)) return false;
    out.resize(parts[0].batch.size());
    for (size_t c = 0; c < out.size(); ++c) out[c] = gather_row_ranges(parts, c, rows);
    return true;
  }

 private:
  std::unique_ptr<IteratorBase> in_;
  int64_t n_;
  bool drop_;
  RowRange pending_{{}, 0, 0};
  bool in_done_ = false;
};

class RebatchDataset final : public DatasetBase {
 public:
  RebatchDataset(Node in, int64_t n, bool drop) : in_(std::move(in)), n_(n), drop_(drop) {}
  std::unique_ptr<IteratorBase> make_iterator() const override {
    return std::make_unique<RebatchIterator>(in_->make_iterator(), n_, drop_);
  }
  // As TF: the number of rows per input batch is not known ahead.
  int64_t cardinality() const override {
    return in_->cardinality() == INFINITE_CARDINALITY ? INFINITE_CARDINALITY : UNKNOWN_CARDINALITY;
  }

 private:
  Node in_;
  int64_t n_;
  bool drop_;
};

// ---- group_by_window ----

struct GroupSpec {
  KeyFn key;
  Dataset::GroupReduceFn reduce;
  std::function<int64_t(int64_t)> window_size_func;
  int64_t window_size = 0;
  const char* op = "Dataset.group_by_window";
};

class GroupByWindowIterator final : public IteratorBase {
 public:
  GroupByWindowIterator(std::unique_ptr<IteratorBase> in, std::shared_ptr<const GroupSpec> spec)
      : in_(std::move(in)), spec_(std::move(spec)) {}
  bool next(Element& out) override {
    for (;;) {
      if (current_) {
        if (current_->next(out)) return true;
        current_.reset();
      }
      if (!in_done_) {
        Element e;
        if (!in_->next(e)) {
          in_done_ = true;
          continue;
        }
        int64_t key = 0, size = 0;
        {
          UserFnScope scope;
          key = spec_->key(e);
          size = spec_->window_size_func ? spec_->window_size_func(key) : spec_->window_size;
        }
        TF_CHECK_ARG(size > 0, spec_->op, "the window size must be positive, got {} for key {}",
                     size, key);
        std::vector<Element>& group = groups_[key];
        group.push_back(std::move(e));
        if (static_cast<int64_t>(group.size()) >= size) {
          std::vector<Element> window = std::move(group);
          groups_.erase(key);
          open(key, std::move(window));
        }
        continue;
      }
      // The input is done: the partial windows, in increasing key order (TF's std::map).
      if (groups_.empty()) return false;
      auto first = groups_.begin();
      const int64_t key = first->first;
      std::vector<Element> window = std::move(first->second);
      groups_.erase(first);
      open(key, std::move(window));
    }
  }

 private:
  void open(int64_t key, std::vector<Element> window) {
    UserFnScope scope;
    Dataset reduced = spec_->reduce(key, elements_dataset(std::move(window)));
    current_ = reduced.node()->make_iterator();
  }

  std::unique_ptr<IteratorBase> in_;
  std::shared_ptr<const GroupSpec> spec_;
  std::map<int64_t, std::vector<Element>> groups_;
  std::unique_ptr<IteratorBase> current_;
  bool in_done_ = false;
};

class GroupByWindowDataset final : public DatasetBase {
 public:
  GroupByWindowDataset(Node in, std::shared_ptr<const GroupSpec> spec)
      : in_(std::move(in)), spec_(std::move(spec)) {}
  std::unique_ptr<IteratorBase> make_iterator() const override {
    return std::make_unique<GroupByWindowIterator>(in_->make_iterator(), spec_);
  }
  int64_t cardinality() const override { return UNKNOWN_CARDINALITY; }  // as TF

 private:
  Node in_;
  std::shared_ptr<const GroupSpec> spec_;
};

// ---- choose_from_datasets and sample_from_datasets ----

// The index of the next input to read from, or nullopt when the selection ends.
using Selector = std::function<std::optional<size_t>(const std::vector<bool>& exhausted)>;

class SelectIterator final : public IteratorBase {
 public:
  SelectIterator(std::vector<std::unique_ptr<IteratorBase>> in, Selector select, bool stop,
                 const char* op)
      : in_(std::move(in)),
        exhausted_(in_.size(), false),
        select_(std::move(select)),
        stop_(stop),
        op_(op) {}
  bool next(Element& out) override {
    for (;;) {
      if (done_) return false;
      if (std::find(exhausted_.begin(), exhausted_.end(), false) == exhausted_.end()) {
        done_ = true;
        return false;
      }
      std::optional<size_t> k = select_(exhausted_);
      if (!k) {
        done_ = true;
        return false;
      }
      if (exhausted_[*k]) continue;  // (only without stop_on_empty_dataset)
      if (in_[*k]->next(out)) {
        check_signature(out);
        return true;
      }
      exhausted_[*k] = true;
      if (stop_) {
        done_ = true;
        return false;
      }
    }
  }

 private:
  void check_signature(const Element& e) {
    const std::string sig = dtypes_of(e);
    if (signature_.empty()) signature_ = sig;
    TF_CHECK_ARG(sig == signature_, op_,
                 "the datasets' elements differ: {} and {} (every dataset must yield the same "
                 "components and dtypes)",
                 signature_, sig);
  }

  std::vector<std::unique_ptr<IteratorBase>> in_;
  std::vector<bool> exhausted_;
  Selector select_;
  bool stop_;
  const char* op_;
  std::string signature_;
  bool done_ = false;
};

class ChooseDataset final : public DatasetBase {
 public:
  ChooseDataset(std::vector<Node> in, Node choice, bool stop)
      : in_(std::move(in)), choice_(std::move(choice)), stop_(stop) {}
  std::unique_ptr<IteratorBase> make_iterator() const override {
    std::vector<std::unique_ptr<IteratorBase>> its;
    for (const Node& n : in_) its.push_back(n->make_iterator());
    auto choice = std::shared_ptr<IteratorBase>(choice_->make_iterator());
    const size_t n = in_.size();
    Selector select = [choice, n](const std::vector<bool>&) -> std::optional<size_t> {
      constexpr const char* op = "Dataset.choose_from_datasets";
      Element c;
      if (!choice->next(c)) return std::nullopt;
      TF_CHECK_ARG(c.size() == 1 && c[0].rank() == 0 && c[0].dtype() == int64, op,
                   "choice_dataset must yield int64 scalars, got {} with shape {}", dtypes_of(c),
                   c.size() == 1 ? c[0].shape().to_string() : "(several)");
      const int64_t k = c[0].item<int64_t>();
      TF_CHECK_ARG(k >= 0 && k < static_cast<int64_t>(n), op,
                   "selector index out of range: {} is not in [0, {}) (the number of datasets)", k,
                   n);
      return static_cast<size_t>(k);
    };
    return std::make_unique<SelectIterator>(std::move(its), std::move(select), stop_,
                                            "Dataset.choose_from_datasets");
  }
  int64_t cardinality() const override { return UNKNOWN_CARDINALITY; }  // as TF

 private:
  std::vector<Node> in_;
  Node choice_;
  bool stop_;
};

// splitmix64 (as shuffle's): the same draws on every platform for a given seed.
uint64_t splitmix64(uint64_t& s) {
  return tapeflow::detail::splitmix64_next(s);
}

class SampleDataset final : public DatasetBase {
 public:
  SampleDataset(std::vector<Node> in, std::vector<double> weights, uint64_t seed, bool stop)
      : in_(std::move(in)), weights_(std::move(weights)), seed_(seed), stop_(stop) {}
  std::unique_ptr<IteratorBase> make_iterator() const override {
    std::vector<std::unique_ptr<IteratorBase>> its;
    for (const Node& n : in_) its.push_back(n->make_iterator());
    // Each iteration draws the same sequence (TF's seeded sample_from_datasets does too).
    auto state = std::make_shared<uint64_t>(seed_);
    Selector select = [state,
                       w = weights_](const std::vector<bool>& exhausted) -> std::optional<size_t> {
      // The exhausted inputs drop out and the others' weights are renormalised.
      double total = 0;
      for (size_t i = 0; i < w.size(); ++i)
        if (!exhausted[i]) total += w[i];
      if (total <= 0) return std::nullopt;
      const double u = static_cast<double>(splitmix64(*state) >> 11) * 0x1.0p-53 * total;
      double acc = 0;
      size_t last = 0;
      for (size_t i = 0; i < w.size(); ++i) {
        if (exhausted[i] || w[i] <= 0) continue;
        last = i;
        acc += w[i];
        if (u < acc) return i;
      }
      return last;
    };
    return std::make_unique<SelectIterator>(std::move(its), std::move(select), stop_,
                                            "Dataset.sample_from_datasets");
  }
  int64_t cardinality() const override { return UNKNOWN_CARDINALITY; }  // as TF

 private:
  std::vector<Node> in_;
  std::vector<double> weights_;
  uint64_t seed_;
  bool stop_;
};

// ---- counter ----

class CounterIterator final : public IteratorBase {
 public:
  CounterIterator(int64_t start, int64_t step) : value_(start), step_(step) {}
  bool next(Element& out) override {
    out.resize(1);
    out[0] = tapeflow::detail::from_host<int64_t>(&value_, TensorShape{}, Device{});
    // Wraps past the int64 range, as TF's counter (a scan adding step to an int64 state).
    value_ = static_cast<int64_t>(static_cast<uint64_t>(value_) + static_cast<uint64_t>(step_));
    return true;
  }

 private:
  int64_t value_, step_;
};

class CounterDataset final : public DatasetBase {
 public:
  CounterDataset(int64_t start, int64_t step) : start_(start), step_(step) {}
  std::unique_ptr<IteratorBase> make_iterator() const override {
    return std::make_unique<CounterIterator>(start_, step_);
  }
  int64_t cardinality() const override { return INFINITE_CARDINALITY; }

 private:
  int64_t start_, step_;
};

std::vector<Node> nodes_of(const char* op, const std::vector<Dataset>& datasets) {
  TF_CHECK_ARG(!datasets.empty(), op, "needs at least one dataset");
  std::vector<Node> nodes;
  for (const Dataset& d : datasets) nodes.push_back(d.node());
  return nodes;
}

}  // namespace
}  // namespace detail

// ---- Dataset ----

Dataset Dataset::parallel_map_impl(detail::MapFn fn, int64_t num_parallel_calls,
                                   bool deterministic) const {
  TF_CHECK_ARG(num_parallel_calls > 0 || num_parallel_calls == AUTOTUNE, "Dataset.map",
               "num_parallel_calls must be positive or AUTOTUNE, got {}", num_parallel_calls);
  if (num_parallel_calls == AUTOTUNE)
    num_parallel_calls =
        std::max<int64_t>(1, static_cast<int64_t>(std::thread::hardware_concurrency()));
  // More threads than this only cost memory (each holds a copy of fn and a stack).
  num_parallel_calls = std::min<int64_t>(num_parallel_calls, 256);
  return Dataset(std::make_shared<detail::ParallelMapDataset>(
      node_, std::move(fn), static_cast<int>(num_parallel_calls), deterministic));
}

Dataset Dataset::take_while_impl(detail::PredicateFn pred) const {
  return Dataset(std::make_shared<detail::TakeWhileDataset>(node_, std::move(pred)));
}

Element Dataset::reduce_impl(Element state, detail::StateFn fn) const {
  constexpr const char* op = "Dataset.reduce";
  detail::check_result(op, state, "initial state");
  const Element initial = state;
  auto it = node_->make_iterator();
  Element e;
  while (it->next(e)) {
    detail::UserFnScope scope;
    Element next = fn(std::move(state), std::move(e));
    detail::check_result(op, next, "new state");
    detail::check_state(op, initial, next);
    state = std::move(next);
  }
  return state;
}

Dataset Dataset::scan_impl(Element state, detail::ScanFn fn) const {
  detail::check_result("Dataset.scan", state, "initial state");
  return Dataset(std::make_shared<detail::ScanDataset>(node_, std::move(state), std::move(fn)));
}

Dataset Dataset::window(int64_t size, int64_t shift, int64_t stride, bool drop_remainder) const {
  constexpr const char* op = "Dataset.window";
  if (shift == -1) shift = size;
  TF_CHECK_ARG(size > 0, op, "size must be positive, got {}", size);
  TF_CHECK_ARG(shift > 0, op, "shift must be positive (or -1 for size), got {}", shift);
  TF_CHECK_ARG(stride > 0, op, "stride must be positive, got {}", stride);
  return Dataset(
      std::make_shared<detail::WindowDataset>(node_, size, shift, stride, drop_remainder));
}

Dataset Dataset::rebatch(int64_t batch_size, bool drop_remainder) const {
  TF_CHECK_ARG(batch_size > 0, "Dataset.rebatch", "batch_size must be positive, got {}",
               batch_size);
  return Dataset(std::make_shared<detail::RebatchDataset>(node_, batch_size, drop_remainder));
}

Dataset Dataset::group_by_window_impl(detail::KeyFn key_func, GroupReduceFn reduce_func,
                                      std::function<int64_t(int64_t)> window_size_func,
                                      int64_t window_size) const {
  constexpr const char* op = "Dataset.group_by_window";
  TF_CHECK_ARG(reduce_func != nullptr, op, "reduce_func is an empty std::function");
  if (!window_size_func) {
    TF_CHECK_ARG(window_size > 0, op, "window_size must be positive, got {}", window_size);
  }
  auto spec = std::make_shared<detail::GroupSpec>();
  spec->key = std::move(key_func);
  spec->reduce = std::move(reduce_func);
  spec->window_size_func = std::move(window_size_func);
  spec->window_size = window_size;
  return Dataset(std::make_shared<detail::GroupByWindowDataset>(node_, std::move(spec)));
}

Dataset Dataset::bucket_impl(detail::KeyFn length_func, std::vector<int64_t> boundaries,
                             std::vector<int64_t> batch_sizes,
                             std::vector<TensorShape> padded_shapes,
                             std::vector<Tensor> padding_values, bool pad_to_bucket_boundary,
                             bool no_padding, bool drop_remainder) const {
  constexpr const char* op = "Dataset.bucket_by_sequence_length";
  TF_CHECK_ARG(batch_sizes.size() == boundaries.size() + 1, op,
               "needs one batch size per bucket: {} boundaries make {} buckets, but {} "
               "bucket_batch_sizes were given",
               boundaries.size(), boundaries.size() + 1, batch_sizes.size());
  for (size_t i = 1; i < boundaries.size(); ++i)
    TF_CHECK_ARG(boundaries[i - 1] < boundaries[i], op,
                 "bucket_boundaries must be sorted in increasing order, got {} before {}",
                 boundaries[i - 1], boundaries[i]);
  for (int64_t b : batch_sizes)
    TF_CHECK_ARG(b > 0, op, "every bucket batch size must be positive, got {}", b);
  TF_CHECK_ARG(!(no_padding &&
                 (pad_to_bucket_boundary || !padded_shapes.empty() || !padding_values.empty())),
               op,
               "no_padding cannot be combined with padded_shapes, padding_values or "
               "pad_to_bucket_boundary");
  if (pad_to_bucket_boundary) {
    TF_CHECK_ARG(!boundaries.empty(), op, "pad_to_bucket_boundary needs bucket_boundaries");
    // tapeflow's datasets carry no static shapes to say which dimensions vary, so the caller
    // marks them: tf::None in padded_shapes is padded to the bucket's boundary - 1.
    TF_CHECK_ARG(!padded_shapes.empty(), op,
                 "pad_to_bucket_boundary needs padded_shapes with tf::None marking the "
                 "dimensions to pad to the bucket boundary (tapeflow datasets carry no static "
                 "shapes to find them from)");
  }
  auto key = [length_func = std::move(length_func),
              boundaries](const Element& e) mutable -> int64_t {
    const int64_t len = length_func(e);
    // Bucket i holds boundaries[i - 1] <= len < boundaries[i] (TF's element_to_bucket_id).
    return static_cast<int64_t>(std::upper_bound(boundaries.begin(), boundaries.end(), len) -
                                boundaries.begin());
  };
  auto sizes = std::make_shared<const std::vector<int64_t>>(batch_sizes);
  GroupReduceFn reduce = [=](int64_t bucket, Dataset window) -> Dataset {
    const int64_t batch = (*sizes)[static_cast<size_t>(bucket)];
    if (no_padding) return window.batch(batch, drop_remainder);
    std::vector<TensorShape> shapes = padded_shapes;
    if (pad_to_bucket_boundary) {
      TF_CHECK_ARG(bucket < static_cast<int64_t>(boundaries.size()), op,
                   "with pad_to_bucket_boundary, every length must be below the largest "
                   "boundary {}",
                   boundaries.back());
      for (TensorShape& s : shapes)
        for (int i = 0; i < s.rank(); ++i)
          if (s[i] == None) s[i] = boundaries[static_cast<size_t>(bucket)] - 1;
    }
    return window.padded_batch(batch, shapes, padding_values, drop_remainder);
  };
  auto window_size = [sizes](int64_t bucket) { return (*sizes)[static_cast<size_t>(bucket)]; };
  auto spec = std::make_shared<detail::GroupSpec>();
  spec->key = std::move(key);
  spec->reduce = std::move(reduce);
  spec->window_size_func = std::move(window_size);
  spec->op = op;
  return Dataset(std::make_shared<detail::GroupByWindowDataset>(node_, std::move(spec)));
}

Dataset Dataset::choose_from_datasets(std::vector<Dataset> datasets, const Dataset& choice_dataset,
                                      bool stop_on_empty_dataset) {
  auto nodes = detail::nodes_of("Dataset.choose_from_datasets", datasets);
  return Dataset(std::make_shared<detail::ChooseDataset>(std::move(nodes), choice_dataset.node(),
                                                         stop_on_empty_dataset));
}

Dataset Dataset::sample_from_datasets(std::vector<Dataset> datasets, std::vector<double> weights,
                                      std::optional<int64_t> seed, bool stop_on_empty_dataset) {
  constexpr const char* op = "Dataset.sample_from_datasets";
  auto nodes = detail::nodes_of(op, datasets);
  if (weights.empty()) weights.assign(nodes.size(), 1.0);
  TF_CHECK_ARG(weights.size() == nodes.size(), op,
               "got {} weights for {} datasets; give one weight per dataset", weights.size(),
               nodes.size());
  double total = 0;
  for (double w : weights) {
    TF_CHECK_ARG(w >= 0 && w < std::numeric_limits<double>::infinity(), op,
                 "weights must be finite and non-negative, got {}", w);
    total += w;
  }
  TF_CHECK_ARG(total > 0, op, "the weights sum to zero; at least one must be positive");
  // Scaled by the largest, so that their sum cannot overflow (two weights of DBL_MAX would send
  // every draw to the last dataset); a positive weight stays positive.
  const double largest = *std::max_element(weights.begin(), weights.end());
  for (double& w : weights)
    if (w > 0) w = std::max(w / largest, std::numeric_limits<double>::denorm_min());
  // TF's seed rules for datasets (random_seed.get_seed): an op seed with the global seed (or
  // TF's default graph seed) gives the same draws every time; the global seed alone takes the
  // next op seed from its counter, so two such datasets draw differently; neither: entropy.
  uint64_t s = 0;
  if (seed) {
    const uint64_t g = static_cast<uint64_t>(
        tapeflow::detail::global_random_seed().value_or(tapeflow::detail::default_graph_seed()));
    s = g * tapeflow::detail::kSplitmix64Gamma ^
        (static_cast<uint64_t>(*seed) + 0xD1B54A32D192ED03ull);
  } else if (tapeflow::detail::global_random_seed()) {
    const auto [a, b] = tapeflow::detail::resolve_random_seeds(std::nullopt);
    s = a * tapeflow::detail::kSplitmix64Gamma ^ (b + 0xD1B54A32D192ED03ull);
  } else {
    s = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  }
  return Dataset(std::make_shared<detail::SampleDataset>(std::move(nodes), std::move(weights), s,
                                                         stop_on_empty_dataset));
}

Dataset Dataset::counter(int64_t start, int64_t step) {
  return Dataset(std::make_shared<detail::CounterDataset>(start, step));
}

}  // namespace tapeflow::data
