#include "data/dataset.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <exception>
#include <limits>
#include <mutex>
#include <thread>
#include <tuple>
#include <utility>

#include "core/check.h"
#include "core/context.h"
#include "core/device.h"
#include "core/hash.h"
#include "data/dataset_internal.h"
#include "ops/random.h"

namespace tapeflow::data {
namespace detail {

using tapeflow::detail::empty;
using tapeflow::detail::host_bytes;

bool IteratorBase::next_row(int64_t&) {
  TF_ASSERT(false && "next_row() on an iterator without rows()");
  return false;
}

[[noreturn]] void throw_arity_error(const char* op, size_t takes, size_t components) {
  TF_THROW(InvalidArgumentError, op,
           "the function takes {} tensor argument(s) but the dataset's elements have {} "
           "component(s); take a std::vector<tf::Tensor> to receive the whole element",
           takes, components);
}

bool to_bool(const char* op, const Tensor& t) {
  TF_CHECK_ARG(t.defined() && t.num_elements() == 1 && is_bool(t.dtype()), op,
               "the predicate must return a bool or a one-element bool tensor, got {}",
               t.defined() ? fmt::format("a tensor of dtype {} and shape {}", dtype_name(t.dtype()),
                                         t.shape().to_string())
                           : std::string("an undefined tensor"));
  return t.item<bool>();
}

namespace {

// ---- helpers ----

int64_t row_bytes_of(const Tensor& t) {
  const int64_t n = t.shape()[0];
  return n == 0 ? 0 : static_cast<int64_t>(t.nbytes()) / n;
}

TensorShape row_shape_of(const Tensor& t) {
  TensorShape s;
  for (int i = 1; i < t.rank(); ++i) s.push_back(t.shape()[i]);
  return s;
}

// Element r of a row source: zero-copy views of each tensor's row r.
void row_views(const std::vector<Tensor>& src, int64_t r, Element& out) {
  out.resize(src.size());
  for (size_t c = 0; c < src.size(); ++c) {
    const Tensor& t = src[c];
    out[c] = tapeflow::detail::view(t, row_shape_of(t), static_cast<size_t>(r * row_bytes_of(t)));
  }
}

// rows[idx[0]], rows[idx[1]], ... of src stacked: a view of src when the rows are consecutive
// (an unshuffled batch costs no copy; tensors are immutable), else a new CPU tensor filled with
// one memcpy per run of consecutive indices.
Tensor gather_rows(const Tensor& src, const std::vector<int64_t>& idx) {
  TensorShape s = src.shape();
  s[0] = static_cast<int64_t>(idx.size());
  const size_t rb = static_cast<size_t>(row_bytes_of(src));
  if (rb != 0 && !idx.empty() && idx.back() - idx.front() + 1 == s[0] &&
      std::adjacent_find(idx.begin(), idx.end(), [](int64_t a, int64_t b) { return b != a + 1; }) ==
          idx.end())
    return tapeflow::detail::view(src, s, static_cast<size_t>(idx.front()) * rb);
  Tensor out = empty(s, src.dtype(), Device{});
  if (rb == 0 || idx.empty()) return out;
  const auto* base = static_cast<const uint8_t*>(src.raw_data());
  auto* dst = static_cast<uint8_t*>(out.raw_data());
  const size_t n = idx.size();
  for (size_t i = 0; i < n;) {
    size_t j = i + 1;
    while (j < n && idx[j] == idx[j - 1] + 1) ++j;
    std::memcpy(dst + i * rb, base + static_cast<size_t>(idx[i]) * rb, (j - i) * rb);
    i = j;
  }
  return out;
}

}  // namespace

// TF's error text for elements that cannot be stacked.
Tensor stack_elements(const std::vector<Element>& elems, size_t c, const char* op) {
  const Tensor& first = elems[0][c];
  for (size_t i = 1; i < elems.size(); ++i) {
    const Tensor& t = elems[i][c];
    TF_CHECK_ARG(t.dtype() == first.dtype(), op,
                 "cannot batch tensors of different dtypes in component {}: the first element "
                 "is {} and element {} is {}",
                 c, dtype_name(first.dtype()), i, dtype_name(t.dtype()));
    TF_CHECK_ARG(t.shape() == first.shape(), op,
                 "cannot batch tensors with different shapes in component {}: the first element "
                 "has shape {} and element {} has shape {}",
                 c, first.shape().to_string(), i, t.shape().to_string());
  }
  TensorShape s;
  s.push_back(static_cast<int64_t>(elems.size()));
  for (int64_t d : first.shape()) s.push_back(d);
  Tensor out = empty(s, first.dtype(), Device{});
  const size_t nb = first.nbytes();
  if (nb == 0) return out;
  auto* dst = static_cast<uint8_t*>(out.raw_data());
  for (size_t i = 0; i < elems.size(); ++i) {
    auto hb = host_bytes(elems[i][c]);
    std::memcpy(dst + i * nb, hb.data, nb);
  }
  return out;
}

namespace {

// splitmix64: a small, portable generator (std::uniform_int_distribution differs between
// standard libraries, and a seeded shuffle must give the same order everywhere).
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t next() { return tapeflow::detail::splitmix64_next(s_); }
  // Uniform in [0, n), unbiased (Lemire's multiply-and-reject).
  uint64_t below(uint64_t n) {
    unsigned __int128 m = static_cast<unsigned __int128>(next()) * n;
    uint64_t low = static_cast<uint64_t>(m);
    if (low < n) {
      const uint64_t threshold = (0 - n) % n;
      while (low < threshold) {
        m = static_cast<unsigned __int128>(next()) * n;
        low = static_cast<uint64_t>(m);
      }
    }
    return static_cast<uint64_t>(m >> 64);
  }

 private:
  uint64_t s_;
};

uint64_t mix_seed(uint64_t a, uint64_t b, uint64_t c) {
  Rng r(a ^ (b * tapeflow::detail::kSplitmix64Gamma));
  Rng r2(r.next() ^ (c * 0xD1B54A32D192ED03ull));
  return r2.next();
}

// ---- from_tensor_slices ----

class SlicesIterator final : public IteratorBase {
 public:
  explicit SlicesIterator(RowSource src) : src_(std::move(src)), n_((*src_)[0].shape()[0]) {}
  bool next(Element& out) override {
    int64_t r;
    if (!next_row(r)) return false;
    row_views(*src_, r, out);
    return true;
  }
  RowSource rows() const override { return src_; }
  bool next_row(int64_t& row) override {
    if (pos_ >= n_) return false;
    row = pos_++;
    return true;
  }

 private:
  RowSource src_;
  int64_t n_;
  int64_t pos_ = 0;
};

class SlicesDataset final : public DatasetBase {
 public:
  explicit SlicesDataset(RowSource src) : src_(std::move(src)) {}
  std::unique_ptr<IteratorBase> make_iterator() const override {
    return std::make_unique<SlicesIterator>(src_);
  }
  int64_t cardinality() const override { return (*src_)[0].shape()[0]; }

 private:
  RowSource src_;
};

// ---- from_tensors and the empty dataset ----

class ElementsIterator final : public IteratorBase {
 public:
  explicit ElementsIterator(std::shared_ptr<const std::vector<Element>> e) : elems_(std::move(e)) {}
  bool next(Element& out) override {
    if (pos_ >= elems_->size()) return false;
    out = (*elems_)[pos_++];
    return true;
  }

 private:
  std::shared_ptr<const std::vector<Element>> elems_;
  size_t pos_ = 0;
};

class ElementsDataset final : public DatasetBase {
 public:
  explicit ElementsDataset(std::vector<Element> e)
      : elems_(std::make_shared<const std::vector<Element>>(std::move(e))) {}
  std::unique_ptr<IteratorBase> make_iterator() const override {
    return std::make_unique<ElementsIterator>(elems_);
  }
  int64_t cardinality() const override { return static_cast<int64_t>(elems_->size()); }

 private:
  std::shared_ptr<const std::vector<Element>> elems_;
};

}  // namespace

Dataset elements_dataset(std::vector<Element> elements) {
  return Dataset(std::make_shared<ElementsDataset>(std::move(elements)));
}

namespace {

// ---- range ----

class RangeIterator final : public IteratorBase {
 public:
  RangeIterator(int64_t start, int64_t stop, int64_t step) : v_(start), stop_(stop), step_(step) {}
  bool next(Element& out) override {
    if (ended_ || (step_ > 0 ? v_ >= stop_ : v_ <= stop_)) return false;
    out.resize(1);
    out[0] = tapeflow::detail::from_host<int64_t>(&v_, TensorShape{}, Device{});
    // A next value past the int64 range is past stop as well.
    ended_ = __builtin_add_overflow(v_, step_, &v_);
    return true;
  }

 private:
  int64_t v_, stop_, step_;
  bool ended_ = false;
};

class RangeDataset final : public DatasetBase {
 public:
  RangeDataset(int64_t start, int64_t stop, int64_t step)
      : start_(start), stop_(stop), step_(step) {}
  std::unique_ptr<IteratorBase> make_iterator() const override {
    return std::make_unique<RangeIterator>(start_, stop_, step_);
  }
  int64_t cardinality() const override {
    // In 128 bits: the span and the step may not fit in int64 (saturates, see docs/data.md).
    const __int128 start = start_, stop = stop_, step = step_;
    const __int128 n = step > 0 ? (stop > start ? (stop - start + step - 1) / step : 0)
                                : (start > stop ? (start - stop - step - 1) / -step : 0);
    return n > std::numeric_limits<int64_t>::max() ? std::numeric_limits<int64_t>::max()
                                                   : static_cast<int64_t>(n);
  }

 private:
  int64_t start_, stop_, step_;
};

// ---- shuffle ----

// Shared by every iteration of one shuffle dataset: the epoch counter that makes
// reshuffle_each_iteration give each epoch a new (but reproducible) order.
struct ShuffleSeeds {
  uint64_t seed = 0, seed2 = 0;
  bool reshuffle = true;
  std::atomic<uint64_t> epoch{0};
};

class ShuffleIterator final : public IteratorBase {
 public:
  ShuffleIterator(std::unique_ptr<IteratorBase> in, int64_t buffer_size, uint64_t seed)
      : in_(std::move(in)),
        rows_(in_->rows()),
        cap_(static_cast<size_t>(buffer_size)),
        rng_(seed) {}

  bool next(Element& out) override {
    if (rows_) {
      int64_t r;
      if (!next_row(r)) return false;
      row_views(*rows_, r, out);
      return true;
    }
    return take_one(elems_, out, [&](Element& e) { return in_->next(e); });
  }
  RowSource rows() const override { return rows_; }
  bool next_row(int64_t& row) override {
    return take_one(indices_, row, [&](int64_t& r) { return in_->next_row(r); });
  }

 private:
  // The buffer starts full (or with all the input), then each draw is refilled from the input.
  template <class T, class Pull>
  bool take_one(std::vector<T>& buf, T& out, Pull pull) {
    if (!filled_) {
      filled_ = true;
      buf.reserve(std::min<size_t>(cap_, 1 << 20));
      T v{};
      while (!in_done_ && buf.size() < cap_) {
        if (pull(v))
          buf.push_back(std::move(v));
        else
          in_done_ = true;
      }
    }
    if (buf.empty()) return false;
    const size_t i = static_cast<size_t>(rng_.below(buf.size()));
    out = std::move(buf[i]);
    T v{};
    if (!in_done_ && pull(v)) {
      buf[i] = std::move(v);
    } else {
      in_done_ = true;
      if (i + 1 != buf.size()) buf[i] = std::move(buf.back());
      buf.pop_back();
    }
    return true;
  }

  std::unique_ptr<IteratorBase> in_;
  RowSource rows_;
  size_t cap_;
  Rng rng_;
  bool filled_ = false, in_done_ = false;
  std::vector<int64_t> indices_;
  std::vector<Element> elems_;
};

class ShuffleDataset final : public DatasetBase {
 public:
  ShuffleDataset(std::shared_ptr<const DatasetBase> in, int64_t buffer_size, uint64_t seed,
                 uint64_t seed2, bool reshuffle)
      : in_(std::move(in)), buffer_size_(buffer_size), seeds_(std::make_shared<ShuffleSeeds>()) {
    seeds_->seed = seed;
    seeds_->seed2 = seed2;
    seeds_->reshuffle = reshuffle;
  }
  std::unique_ptr<IteratorBase> make_iterator() const override {
    const uint64_t epoch = seeds_->reshuffle ? seeds_->epoch.fetch_add(1) : 0;
    return std::make_unique<ShuffleIterator>(in_->make_iterator(), buffer_size_,
                                             mix_seed(seeds_->seed, seeds_->seed2, epoch));
  }
  int64_t cardinality() const override { return in_->cardinality(); }

 private:
  std::shared_ptr<const DatasetBase> in_;
  int64_t buffer_size_;
  std::shared_ptr<ShuffleSeeds> seeds_;
};

// ---- batch ----

class BatchIterator final : public IteratorBase {
 public:
  BatchIterator(std::unique_ptr<IteratorBase> in, int64_t batch_size, bool drop_remainder)
      : in_(std::move(in)),
        rows_(in_->rows()),
        n_(static_cast<size_t>(batch_size)),
        drop_(drop_remainder) {}

  bool next(Element& out) override {
    if (done_) return false;
    if (rows_) {
      idx_.clear();
      int64_t r;
      while (idx_.size() < n_ && in_->next_row(r)) idx_.push_back(r);
      if (idx_.size() < n_) done_ = true;
      if (idx_.empty() || (drop_ && idx_.size() < n_)) return false;
      out.resize(rows_->size());
      for (size_t c = 0; c < rows_->size(); ++c) out[c] = gather_rows((*rows_)[c], idx_);
      return true;
    }
    elems_.clear();
    Element e;
    while (elems_.size() < n_ && in_->next(e)) elems_.push_back(std::move(e));
    if (elems_.size() < n_) done_ = true;
    if (elems_.empty() || (drop_ && elems_.size() < n_)) return false;
    const size_t nc = elems_[0].size();
    for (size_t i = 1; i < elems_.size(); ++i)
      TF_CHECK_ARG(elems_[i].size() == nc, "Dataset.batch",
                   "cannot batch elements with different numbers of components: the first has "
                   "{} and element {} has {}",
                   nc, i, elems_[i].size());
    out.resize(nc);
    for (size_t c = 0; c < nc; ++c) out[c] = stack_elements(elems_, c);
    return true;
  }

 private:
  std::unique_ptr<IteratorBase> in_;
  RowSource rows_;
  size_t n_;
  bool drop_;
  bool done_ = false;
  std::vector<int64_t> idx_;
  std::vector<Element> elems_;
};

class BatchDataset final : public DatasetBase {
 public:
  BatchDataset(std::shared_ptr<const DatasetBase> in, int64_t batch_size, bool drop_remainder)
      : in_(std::move(in)), n_(batch_size), drop_(drop_remainder) {}
  std::unique_ptr<IteratorBase> make_iterator() const override {
    return std::make_unique<BatchIterator>(in_->make_iterator(), n_, drop_);
  }
  int64_t cardinality() const override {
    const int64_t c = in_->cardinality();
    if (c < 0) return c;
    return c / n_ + ((c % n_ == 0 || drop_) ? 0 : 1);
  }

 private:
  std::shared_ptr<const DatasetBase> in_;
  int64_t n_;
  bool drop_;
};

// ---- map and filter ----

class MapIterator final : public IteratorBase {
 public:
  MapIterator(std::unique_ptr<IteratorBase> in, std::shared_ptr<const MapFn> fn)
      : in_(std::move(in)), fn_(std::move(fn)) {}
  bool next(Element& out) override {
    Element e;
    if (!in_->next(e)) return false;
    UserFnScope scope;
    out = (*fn_)(std::move(e));
    for (size_t c = 0; c < out.size(); ++c)
      TF_CHECK_ARG(out[c].defined() && !out[c].is_symbolic(), "Dataset.map",
                   "the function returned {} as component {}; dataset elements must be tensors "
                   "with values",
                   out[c].defined() ? "a symbolic tensor" : "an undefined tensor", c);
    return true;
  }

 private:
  std::unique_ptr<IteratorBase> in_;
  std::shared_ptr<const MapFn> fn_;
};

class MapDataset final : public DatasetBase {
 public:
  MapDataset(std::shared_ptr<const DatasetBase> in, MapFn fn)
      : in_(std::move(in)), fn_(std::make_shared<const MapFn>(std::move(fn))) {}
  std::unique_ptr<IteratorBase> make_iterator() const override {
    return std::make_unique<MapIterator>(in_->make_iterator(), fn_);
  }
  int64_t cardinality() const override { return in_->cardinality(); }

 private:
  std::shared_ptr<const DatasetBase> in_;
  std::shared_ptr<const MapFn> fn_;
};

class FilterIterator final : public IteratorBase {
 public:
  FilterIterator(std::unique_ptr<IteratorBase> in, std::shared_ptr<const PredicateFn> pred)
      : in_(std::move(in)), pred_(std::move(pred)) {}
  bool next(Element& out) override {
    while (in_->next(out)) {
      UserFnScope scope;
      if ((*pred_)(out)) return true;
    }
    return false;
  }

 private:
  std::unique_ptr<IteratorBase> in_;
  std::shared_ptr<const PredicateFn> pred_;
};

class FilterDataset final : public DatasetBase {
 public:
  FilterDataset(std::shared_ptr<const DatasetBase> in, PredicateFn pred)
      : in_(std::move(in)), pred_(std::make_shared<const PredicateFn>(std::move(pred))) {}
  std::unique_ptr<IteratorBase> make_iterator() const override {
    return std::make_unique<FilterIterator>(in_->make_iterator(), pred_);
  }
  int64_t cardinality() const override { return UNKNOWN_CARDINALITY; }

 private:
  std::shared_ptr<const DatasetBase> in_;
  std::shared_ptr<const PredicateFn> pred_;
};

// ---- repeat ----

class RepeatIterator final : public IteratorBase {
 public:
  RepeatIterator(std::shared_ptr<const DatasetBase> in, int64_t count)
      : in_node_(std::move(in)), count_(count), known_empty_(in_node_->cardinality() == 0) {
    if (count_ != 0) {
      it_ = in_node_->make_iterator();
      rows_ = it_->rows();
    }
  }
  bool next(Element& out) override {
    return pull([&] { return it_->next(out); });
  }
  RowSource rows() const override { return rows_; }
  bool next_row(int64_t& row) override {
    return pull([&] { return it_->next_row(row); });
  }

 private:
  // Restarts the input at its end. repeat() (forever) ends at an epoch that yields nothing, as
  // TF's, so repeat() of an empty dataset is empty rather than an endless loop; repeat(count)
  // runs all its epochs, as TF's, also past an empty one (a filter that keeps nothing once),
  // unless the input's cardinality says every epoch is empty (repeat(2^40) would never end).
  template <class Pull>
  bool pull(Pull p) {
    while (it_) {
      if (p()) {
        produced_in_epoch_ = true;
        return true;
      }
      ++epochs_done_;
      if (((count_ < 0 || known_empty_) && !produced_in_epoch_) ||
          (count_ > 0 && epochs_done_ >= count_)) {
        it_.reset();
        break;
      }
      produced_in_epoch_ = false;
      it_ = in_node_->make_iterator();
    }
    return false;
  }

  std::shared_ptr<const DatasetBase> in_node_;
  int64_t count_;
  bool known_empty_;  // the input's cardinality is 0
  std::unique_ptr<IteratorBase> it_;
  RowSource rows_;
  int64_t epochs_done_ = 0;
  bool produced_in_epoch_ = false;
};

class RepeatDataset final : public DatasetBase {
 public:
  RepeatDataset(std::shared_ptr<const DatasetBase> in, int64_t count)
      : in_(std::move(in)), count_(count) {}
  std::unique_ptr<IteratorBase> make_iterator() const override {
    return std::make_unique<RepeatIterator>(in_, count_);
  }
  int64_t cardinality() const override {
    const int64_t n = in_->cardinality();
    if (count_ < 0) return n == 0 ? 0 : INFINITE_CARDINALITY;
    if (count_ == 0) return 0;
    if (n < 0) return n;
    int64_t total = 0;  // saturates, see docs/data.md
    if (__builtin_mul_overflow(n, count_, &total)) return std::numeric_limits<int64_t>::max();
    return total;
  }

 private:
  std::shared_ptr<const DatasetBase> in_;
  int64_t count_;
};

// ---- take and skip ----

class TakeIterator final : public IteratorBase {
 public:
  TakeIterator(std::unique_ptr<IteratorBase> in, int64_t count)
      : in_(std::move(in)), rows_(in_->rows()), left_(count) {}
  bool next(Element& out) override {
    if (left_ == 0 || !in_->next(out)) return false;
    if (left_ > 0) --left_;
    return true;
  }
  RowSource rows() const override { return rows_; }
  bool next_row(int64_t& row) override {
    if (left_ == 0 || !in_->next_row(row)) return false;
    if (left_ > 0) --left_;
    return true;
  }

 private:
  std::unique_ptr<IteratorBase> in_;
  RowSource rows_;
  int64_t left_;  // -1: no limit
};

class TakeDataset final : public DatasetBase {
 public:
  TakeDataset(std::shared_ptr<const DatasetBase> in, int64_t count)
      : in_(std::move(in)), count_(count) {}
  std::unique_ptr<IteratorBase> make_iterator() const override {
    return std::make_unique<TakeIterator>(in_->make_iterator(), count_);
  }
  int64_t cardinality() const override {
    const int64_t n = in_->cardinality();
    if (n == UNKNOWN_CARDINALITY) return n;
    if (n == INFINITE_CARDINALITY) return count_;
    if (count_ < 0) return n;
    return std::min(n, count_);
  }

 private:
  std::shared_ptr<const DatasetBase> in_;
  int64_t count_;
};

class SkipIterator final : public IteratorBase {
 public:
  SkipIterator(std::unique_ptr<IteratorBase> in, int64_t count)
      : in_(std::move(in)), rows_(in_->rows()), to_skip_(count) {}
  bool next(Element& out) override {
    if (to_skip_ < 0) return false;
    for (; to_skip_ > 0; --to_skip_)
      if (!in_->next(out)) return false;
    return in_->next(out);
  }
  RowSource rows() const override { return rows_; }
  bool next_row(int64_t& row) override {
    if (to_skip_ < 0) return false;
    for (; to_skip_ > 0; --to_skip_)
      if (!in_->next_row(row)) return false;
    return in_->next_row(row);
  }

 private:
  std::unique_ptr<IteratorBase> in_;
  RowSource rows_;
  int64_t to_skip_;  // -1: skip everything
};

class SkipDataset final : public DatasetBase {
 public:
  SkipDataset(std::shared_ptr<const DatasetBase> in, int64_t count)
      : in_(std::move(in)), count_(count) {}
  std::unique_ptr<IteratorBase> make_iterator() const override {
    return std::make_unique<SkipIterator>(in_->make_iterator(), count_);
  }
  int64_t cardinality() const override {
    const int64_t n = in_->cardinality();
    if (n < 0) return n;
    if (count_ < 0) return 0;
    return std::max<int64_t>(0, n - count_);
  }

 private:
  std::shared_ptr<const DatasetBase> in_;
  int64_t count_;
};

// ---- cache ----

// What the first complete iteration saw: row indices when the input is a row iterator (the
// rows themselves are already in memory), else the elements.
struct CacheContents {
  RowSource rows;
  std::vector<int64_t> indices;
  std::vector<Element> elems;
};

struct CacheState {
  std::mutex mu;
  std::shared_ptr<const CacheContents> done;  // null until an iteration completes
};

class CacheIterator final : public IteratorBase {
 public:
  CacheIterator(std::shared_ptr<const DatasetBase> in, std::shared_ptr<CacheState> state)
      : state_(std::move(state)) {
    {
      std::lock_guard lock(state_->mu);
      replay_ = state_->done;
    }
    if (replay_) {
      rows_ = replay_->rows;
    } else {
      in_ = in->make_iterator();
      rows_ = in_->rows();
      fill_ = std::make_shared<CacheContents>();
      fill_->rows = rows_;
      const int64_t n = in->cardinality();
      expected_ = n >= 0 ? static_cast<size_t>(n) : SIZE_MAX;
    }
  }
  bool next(Element& out) override {
    if (rows_) {
      int64_t r;
      if (!next_row(r)) return false;
      row_views(*rows_, r, out);
      return true;
    }
    if (replay_) {
      if (pos_ >= replay_->elems.size()) return false;
      out = replay_->elems[pos_++];
      return true;
    }
    if (!in_ || !in_->next(out)) return finish();
    fill_->elems.push_back(out);
    if (fill_->elems.size() == expected_) finish();  // complete without reading the end
    return true;
  }
  RowSource rows() const override { return rows_; }
  bool next_row(int64_t& row) override {
    if (replay_) {
      if (pos_ >= replay_->indices.size()) return false;
      row = replay_->indices[pos_++];
      return true;
    }
    if (!in_ || !in_->next_row(row)) return finish();
    fill_->indices.push_back(row);
    if (fill_->indices.size() == expected_) finish();
    return true;
  }

 private:
  // The input is exhausted, or yielded as many elements as its known cardinality (a take()
  // that read every element): publish what this iteration saw, as TF completes its cache then.
  // An iteration stopped earlier publishes nothing, as TF discards a partial cache.
  bool finish() {
    if (in_) {
      in_.reset();
      std::lock_guard lock(state_->mu);
      if (!state_->done) state_->done = std::move(fill_);
      fill_.reset();
    }
    return false;
  }

  std::shared_ptr<CacheState> state_;
  std::shared_ptr<const CacheContents> replay_;
  std::shared_ptr<CacheContents> fill_;
  std::unique_ptr<IteratorBase> in_;
  RowSource rows_;
  size_t pos_ = 0;
  size_t expected_ = SIZE_MAX;  // the input's known cardinality
};

class CacheDataset final : public DatasetBase {
 public:
  explicit CacheDataset(std::shared_ptr<const DatasetBase> in)
      : in_(std::move(in)), state_(std::make_shared<CacheState>()) {}
  std::unique_ptr<IteratorBase> make_iterator() const override {
    return std::make_unique<CacheIterator>(in_, state_);
  }
  int64_t cardinality() const override { return in_->cardinality(); }

 private:
  std::shared_ptr<const DatasetBase> in_;
  std::shared_ptr<CacheState> state_;
};

// ---- prefetch ----

// A producer thread pulls from the input into a bounded queue. The iterator owns the thread:
// its destructor asks the producer to stop and joins it, so an early break or an exception in
// the consumer never leaves a thread behind. An exception in the producer is handed to the
// consumer after the elements produced before it.
class PrefetchIterator final : public IteratorBase {
 public:
  PrefetchIterator(std::unique_ptr<IteratorBase> in, size_t capacity)
      : in_(std::move(in)), cap_(capacity) {
    thread_ = std::thread([this] { produce(); });
  }
  ~PrefetchIterator() override {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    space_.notify_all();
    thread_.join();
  }
  bool next(Element& out) override {
    // A consumer faster than the producer would otherwise sleep and be woken for every element
    // (tens of microseconds each on a busy machine): wait briefly without blocking first.
    if (ready_count_.load(std::memory_order_acquire) == 0) {
      const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(50);
      while (ready_count_.load(std::memory_order_acquire) == 0 &&
             std::chrono::steady_clock::now() < until)
        std::this_thread::yield();
    }
    std::unique_lock lock(mu_);
    ready_.wait(lock, [&] { return !queue_.empty() || finished_; });
    if (!queue_.empty()) {
      out = std::move(queue_.front());
      queue_.pop_front();
      ready_count_.fetch_sub(1, std::memory_order_relaxed);
      lock.unlock();
      space_.notify_one();
      return true;
    }
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
    return false;
  }

 private:
  void produce() {
    try {
      for (;;) {
        {
          std::unique_lock lock(mu_);
          space_.wait(lock, [&] { return stop_ || queue_.size() < cap_; });
          if (stop_) break;
        }
        Element e;
        if (!in_->next(e)) break;
        {
          std::lock_guard lock(mu_);
          queue_.push_back(std::move(e));
          ready_count_.fetch_add(1, std::memory_order_release);
        }
        ready_.notify_one();
      }
    } catch (...) {
      std::lock_guard lock(mu_);
      error_ = std::current_exception();
    }
    {
      std::lock_guard lock(mu_);
      finished_ = true;
      ready_count_.fetch_add(1, std::memory_order_release);  // ends the consumer's spin
    }
    ready_.notify_all();
  }

  std::unique_ptr<IteratorBase> in_;
  size_t cap_;
  std::mutex mu_;
  std::condition_variable ready_, space_;
  std::deque<Element> queue_;
  bool stop_ = false, finished_ = false;
  // Queued elements (plus one once finished), readable without the lock for the spin.
  std::atomic<size_t> ready_count_{0};
  std::exception_ptr error_;
  std::thread thread_;  // started in the constructor body, once every member exists
};

class PrefetchDataset final : public DatasetBase {
 public:
  PrefetchDataset(std::shared_ptr<const DatasetBase> in, int64_t buffer_size)
      : in_(std::move(in)), n_(buffer_size) {}
  std::unique_ptr<IteratorBase> make_iterator() const override {
    return std::make_unique<PrefetchIterator>(in_->make_iterator(), static_cast<size_t>(n_));
  }
  int64_t cardinality() const override { return in_->cardinality(); }

 private:
  std::shared_ptr<const DatasetBase> in_;
  int64_t n_;
};

// The global seed (tf::random::set_seed), else TF's DEFAULT_GRAPH_SEED.
uint64_t global_seed_or_default() {
  return static_cast<uint64_t>(
      tapeflow::detail::global_random_seed().value_or(tapeflow::detail::default_graph_seed()));
}

}  // namespace
}  // namespace detail

// ---- Dataset ----

Dataset::Dataset() : node_(std::make_shared<detail::ElementsDataset>(std::vector<Element>{})) {}

Dataset::Dataset(std::shared_ptr<const detail::DatasetBase> node) : node_(std::move(node)) {
  TF_CHECK_ARG(node_ != nullptr, "Dataset", "a dataset needs a non-null node");
}

Dataset Dataset::from_tensor_slices(const std::vector<Tensor>& tensors) {
  constexpr const char* op = "Dataset.from_tensor_slices";
  TF_CHECK_ARG(!tensors.empty(), op, "needs at least one tensor");
  auto src = std::make_shared<std::vector<Tensor>>();
  src->reserve(tensors.size());
  for (size_t c = 0; c < tensors.size(); ++c) {
    const Tensor& t = tensors[c];
    TF_CHECK_ARG(t.defined(), op, "component {} is an undefined tensor", c);
    TF_CHECK_ARG(!t.is_symbolic(), op,
                 "component {} (shape {}) is a symbolic tensor of a function being traced; "
                 "build datasets outside tf::function",
                 c, t.shape().to_string());
    TF_CHECK_ARG(t.rank() >= 1, op,
                 "component {} has shape (), but slicing needs at least one dimension", c);
    src->push_back(t.placement().is_cpu() ? t : tapeflow::detail::copy_to_device(t, Device{}));
  }
  for (size_t c = 1; c < tensors.size(); ++c) {
    if (tensors[c].shape()[0] != tensors[0].shape()[0]) {
      std::string shapes;
      for (size_t i = 0; i < tensors.size(); ++i)
        shapes += (i ? ", " : "") + tensors[i].shape().to_string();
      TF_THROW(InvalidArgumentError, op,
               "all components must have the same size in dimension 0: component 0 has shape "
               "{} and component {} has shape {} (shapes: {})",
               tensors[0].shape().to_string(), c, tensors[c].shape().to_string(), shapes);
    }
  }
  return Dataset(std::make_shared<detail::SlicesDataset>(std::move(src)));
}

Dataset Dataset::from_tensor_slices(const Tensor& tensor) {
  return from_tensor_slices(std::vector<Tensor>{tensor});
}

Dataset Dataset::from_tensors(const std::vector<Tensor>& tensors) {
  Element e;
  for (size_t c = 0; c < tensors.size(); ++c) {
    const Tensor& t = tensors[c];
    TF_CHECK_ARG(t.defined() && !t.is_symbolic(), "Dataset.from_tensors",
                 "component {} must be a tensor with a value", c);
    e.push_back(t.placement().is_cpu() ? t : tapeflow::detail::copy_to_device(t, Device{}));
  }
  std::vector<Element> elems;
  elems.push_back(std::move(e));
  return Dataset(std::make_shared<detail::ElementsDataset>(std::move(elems)));
}

Dataset Dataset::range(int64_t stop) {
  return range(0, stop, 1);
}

Dataset Dataset::range(int64_t start, int64_t stop, int64_t step) {
  TF_CHECK_ARG(step != 0, "Dataset.range", "step must not be 0 (start {}, stop {})", start, stop);
  return Dataset(std::make_shared<detail::RangeDataset>(start, stop, step));
}

Dataset Dataset::shuffle(int64_t buffer_size, std::optional<int64_t> seed,
                         bool reshuffle_each_iteration) const {
  TF_CHECK_ARG(buffer_size > 0, "Dataset.shuffle", "buffer_size must be positive, got {}",
               buffer_size);
  // TF's seed rules (tf.random.get_seed): (global or default seed, op seed) when an op seed is
  // given, else (global seed, counter) or fresh entropy. Unlike a random op's, a dataset's op
  // seed does not continue a stream: two shuffles with one seed give one order, as in TF.
  uint64_t s1, s2;
  if (seed) {
    s1 = detail::global_seed_or_default();
    s2 = static_cast<uint64_t>(*seed);
  } else {
    std::tie(s1, s2) = tapeflow::detail::resolve_random_seeds(std::nullopt);
  }
  return detail::shuffle_with_seeds(*this, buffer_size, s1, s2, reshuffle_each_iteration);
}

Dataset detail::shuffle_with_seeds(const Dataset& dataset, int64_t buffer_size, uint64_t seed,
                                   uint64_t seed2, bool reshuffle_each_iteration) {
  TF_CHECK_ARG(buffer_size > 0, "Dataset.shuffle", "buffer_size must be positive, got {}",
               buffer_size);
  return Dataset(std::make_shared<ShuffleDataset>(dataset.node(), buffer_size, seed, seed2,
                                                  reshuffle_each_iteration));
}

Dataset Dataset::batch(int64_t batch_size, bool drop_remainder) const {
  TF_CHECK_ARG(batch_size > 0, "Dataset.batch", "batch_size must be positive, got {}", batch_size);
  return Dataset(std::make_shared<detail::BatchDataset>(node_, batch_size, drop_remainder));
}

Dataset Dataset::map_impl(detail::MapFn fn) const {
  return Dataset(std::make_shared<detail::MapDataset>(node_, std::move(fn)));
}

Dataset Dataset::filter_impl(detail::PredicateFn pred) const {
  return Dataset(std::make_shared<detail::FilterDataset>(node_, std::move(pred)));
}

Dataset Dataset::repeat(int64_t count) const {
  TF_CHECK_ARG(count >= -1, "Dataset.repeat", "count must be -1 (forever) or >= 0, got {}", count);
  return Dataset(std::make_shared<detail::RepeatDataset>(node_, count));
}

Dataset Dataset::take(int64_t count) const {
  TF_CHECK_ARG(count >= -1, "Dataset.take", "count must be -1 (all) or >= 0, got {}", count);
  return Dataset(std::make_shared<detail::TakeDataset>(node_, count));
}

Dataset Dataset::skip(int64_t count) const {
  TF_CHECK_ARG(count >= -1, "Dataset.skip", "count must be -1 (all) or >= 0, got {}", count);
  return Dataset(std::make_shared<detail::SkipDataset>(node_, count));
}

Dataset Dataset::cache() const {
  return Dataset(std::make_shared<detail::CacheDataset>(node_));
}

Dataset Dataset::prefetch(int64_t buffer_size) const {
  TF_CHECK_ARG(buffer_size >= -1, "Dataset.prefetch",
               "buffer_size must be AUTOTUNE (-1) or >= 0, got {}", buffer_size);
  if (buffer_size == 0) return *this;  // TF: no prefetching
  const int64_t n = buffer_size == AUTOTUNE ? 2 : buffer_size;
  return Dataset(std::make_shared<detail::PrefetchDataset>(node_, n));
}

int64_t Dataset::cardinality() const {
  return node_->cardinality();
}

Dataset::Iterator Dataset::begin() const {
  return Iterator(node_->make_iterator());
}

// ---- Iterator ----

Dataset::Iterator::Iterator(std::unique_ptr<detail::IteratorBase> impl)
    : impl_(std::move(impl)), done_(impl_ == nullptr) {}
// A moved-from iterator is at the end (as a default-constructed one), not a null pipeline.
Dataset::Iterator::Iterator(Iterator&& o) noexcept
    : impl_(std::move(o.impl_)),
      current_(std::move(o.current_)),
      has_current_(std::exchange(o.has_current_, false)),
      done_(std::exchange(o.done_, true)) {
  o.current_.clear();
}
Dataset::Iterator& Dataset::Iterator::operator=(Iterator&& o) noexcept {
  if (this == &o) return *this;
  impl_ = std::move(o.impl_);
  current_ = std::move(o.current_);
  has_current_ = std::exchange(o.has_current_, false);
  done_ = std::exchange(o.done_, true);
  o.current_.clear();
  return *this;
}
Dataset::Iterator::~Iterator() = default;

void Dataset::Iterator::fill() const {
  if (has_current_ || done_) return;
  if (!impl_) {
    done_ = true;
    return;
  }
  try {
    if (impl_->next(current_)) {
      has_current_ = true;
    } else {
      done_ = true;
      current_.clear();
    }
  } catch (...) {
    // A failed pipeline is over: later calls see the end rather than a half-built state.
    done_ = true;
    current_.clear();
    throw;
  }
}

std::optional<Element> Dataset::Iterator::get_next() {
  fill();
  if (!has_current_) return std::nullopt;
  has_current_ = false;
  return std::move(current_);
}

Element& Dataset::Iterator::operator*() const {
  fill();
  TF_CHECK_T(FailedPreconditionError, has_current_, "Dataset.Iterator",
             "dereferenced past the end of the dataset");
  return current_;
}

Dataset::Iterator& Dataset::Iterator::operator++() {
  fill();
  has_current_ = false;
  return *this;
}

bool Dataset::Iterator::operator==(std::default_sentinel_t) const {
  fill();
  return !has_current_;
}

}  // namespace tapeflow::data
