// tf::data::Dataset's combining and restructuring transformations: zip, concatenate, enumerate,
// unbatch, shard, from_generator, padded_batch, flat_map and interleave. Every iterator here
// belongs to one thread (as dataset.cpp's); the datasets hold only immutable state.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/device.h"
#include "data/dataset.h"
#include "data/dataset_internal.h"

namespace tapeflow::data {
namespace detail {
std::string dtypes_of(const Element& e) {
  std::string s;
  for (size_t c = 0; c < e.size(); ++c)
    s += (c ? ", " : "") + std::string(dtype_name(e[c].dtype()));
  return "(" + s + ")";
}

namespace {

using Node = std::shared_ptr<const DatasetBase>;

// An element that a user function produced, on the CPU (a generator may return GPU tensors).
void check_user_element(const char* op, Element& e) {
  for (size_t c = 0; c < e.size(); ++c) {
    Tensor& t = e[c];
    TF_CHECK_ARG(t.defined() && !t.is_symbolic(), op,
                 "component {} is {}; dataset elements must be tensors with values", c,
                 t.defined() ? "a symbolic tensor" : "an undefined tensor");
    if (!t.placement().is_cpu()) t = tapeflow::detail::copy_to_device(t, Device{});
  }
}

// ---- zip ----

class ZipIterator final : public IteratorBase {
 public:
  explicit ZipIterator(std::vector<std::unique_ptr<IteratorBase>> in) : in_(std::move(in)) {}
  bool next(Element& out) override {
    if (done_) return false;
    out.clear();
    for (auto& it : in_) {
      // As TF: the inputs are read in order, and the first one that ends ends the zip.
      if (!it->next(part_)) {
        done_ = true;
        return false;
      }
      for (Tensor& t : part_) out.push_back(std::move(t));
    }
    return true;
  }

 private:
  std::vector<std::unique_ptr<IteratorBase>> in_;
  Element part_;
  bool done_ = false;
};

class ZipDataset final : public DatasetBase {
 public:
  explicit ZipDataset(std::vector<Node> in) : in_(std::move(in)) {}
  std::unique_ptr<IteratorBase> make_iterator() const override {
    std::vector<std::unique_ptr<IteratorBase>> its;
    its.reserve(in_.size());
    for (const Node& n : in_) its.push_back(n->make_iterator());
    return std::make_unique<ZipIterator>(std::move(its));
  }
  // TF's rule: unknown if any input is unknown, else the smallest finite one, else infinite.
  int64_t cardinality() const override {
    int64_t n = INFINITE_CARDINALITY;
    for (const Node& d : in_) {
      const int64_t c = d->cardinality();
      if (c == UNKNOWN_CARDINALITY) return c;
      if (c != INFINITE_CARDINALITY) n = n == INFINITE_CARDINALITY ? c : std::min(n, c);
    }
    return n;
  }

 private:
  std::vector<Node> in_;
};

// ---- concatenate ----

class ConcatenateIterator final : public IteratorBase {
 public:
  ConcatenateIterator(std::unique_ptr<IteratorBase> first, Node second)
      : it_(std::move(first)), second_(std::move(second)) {}
  bool next(Element& out) override {
    while (it_) {
      if (it_->next(out)) {
        check(out);
        ++index_;
        return true;
      }
      if (in_second_) {
        it_.reset();
      } else {
        in_second_ = true;  // the second input starts only when the first has ended
        index_ = 0;
        it_ = second_->make_iterator();
      }
    }
    return false;
  }

 private:
  // TF checks at construction that the element structures match; without element specs this
  // checks each element of one input against the first element seen of the other.
  void check(const Element& e) {
    if (!seen_) {
      seen_ = true;
      first_from_second_ = in_second_;
      ref_.resize(e.size());
      for (size_t c = 0; c < e.size(); ++c) ref_[c] = e[c].dtype();
      ref_text_ = dtypes_of(e);
      return;
    }
    if (in_second_ == first_from_second_) return;
    bool same = e.size() == ref_.size();
    for (size_t c = 0; same && c < e.size(); ++c) same = e[c].dtype() == ref_[c];
    TF_CHECK_ARG(same, "Dataset.concatenate",
                 "the datasets' elements differ: the first dataset's have {} component(s) of "
                 "dtypes {} but element {} of the second has {} component(s) of dtypes {}",
                 first_from_second_ ? e.size() : ref_.size(),
                 first_from_second_ ? dtypes_of(e) : ref_text_, index_,
                 first_from_second_ ? ref_.size() : e.size(),
                 first_from_second_ ? ref_text_ : dtypes_of(e));
  }

  std::unique_ptr<IteratorBase> it_;
  Node second_;
  bool in_second_ = false, seen_ = false, first_from_second_ = false;
  int64_t index_ = 0;
  std::vector<DType> ref_;
  std::string ref_text_;
};

class ConcatenateDataset final : public DatasetBase {
 public:
  ConcatenateDataset(Node a, Node b) : a_(std::move(a)), b_(std::move(b)) {}
  std::unique_ptr<IteratorBase> make_iterator() const override {
    return std::make_unique<ConcatenateIterator>(a_->make_iterator(), b_);
  }
  // TF's rule: infinite if either is, else unknown if either is, else the sum (saturating).
  int64_t cardinality() const override {
    const int64_t a = a_->cardinality(), b = b_->cardinality();
    if (a == INFINITE_CARDINALITY || b == INFINITE_CARDINALITY) return INFINITE_CARDINALITY;
    if (a == UNKNOWN_CARDINALITY || b == UNKNOWN_CARDINALITY) return UNKNOWN_CARDINALITY;
    int64_t n = 0;
    if (__builtin_add_overflow(a, b, &n)) return std::numeric_limits<int64_t>::max();
    return n;
  }

 private:
  Node a_, b_;
};

// ---- enumerate ----

class EnumerateIterator final : public IteratorBase {
 public:
  EnumerateIterator(std::unique_ptr<IteratorBase> in, int64_t start)
      : in_(std::move(in)), start_(start), i_(start) {}
  bool next(Element& out) override {
    if (!in_->next(e_)) return false;
    // TF's counter is a range(start, INT64_MAX) zipped in front, which ends the dataset
    // silently before INT64_MAX; here an element past INT64_MAX is an error, not a wrapped or
    // dropped one.
    TF_CHECK_ARG(!past_max_, "Dataset.enumerate",
                 "the counter would pass INT64_MAX: enumerate({}) of a dataset with more than {} "
                 "elements",
                 start_, uint64_t{INT64_MAX} - static_cast<uint64_t>(start_) + 1);
    out.clear();
    out.reserve(e_.size() + 1);
    out.push_back(tapeflow::detail::from_host<int64_t>(&i_, TensorShape{}, Device{}));
    for (Tensor& t : e_) out.push_back(std::move(t));
    past_max_ = __builtin_add_overflow(i_, 1, &i_);
    return true;
  }

 private:
  std::unique_ptr<IteratorBase> in_;
  Element e_;
  int64_t start_, i_;
  bool past_max_ = false;
};

class EnumerateDataset final : public DatasetBase {
 public:
  EnumerateDataset(Node in, int64_t start) : in_(std::move(in)), start_(start) {}
  std::unique_ptr<IteratorBase> make_iterator() const override {
    return std::make_unique<EnumerateIterator>(in_->make_iterator(), start_);
  }
  int64_t cardinality() const override { return in_->cardinality(); }

 private:
  Node in_;
  int64_t start_;
};

// ---- unbatch ----

class UnbatchIterator final : public IteratorBase {
 public:
  explicit UnbatchIterator(std::unique_ptr<IteratorBase> in) : in_(std::move(in)) {}
  bool next(Element& out) override {
    while (row_ >= rows_) {
      if (!in_->next(batch_)) return false;
      check_batch();
      row_ = 0;
    }
    out.resize(batch_.size());
    for (size_t c = 0; c < batch_.size(); ++c) {
      const Tensor& t = batch_[c];
      TensorShape s;
      for (int i = 1; i < t.rank(); ++i) s.push_back(t.shape()[i]);
      const size_t row_bytes = t.nbytes() / static_cast<size_t>(rows_);
      out[c] = tapeflow::detail::view(t, s, static_cast<size_t>(row_) * row_bytes);
    }
    ++row_;
    return true;
  }

 private:
  void check_batch() {
    TF_CHECK_ARG(!batch_.empty(), "Dataset.unbatch", "cannot unbatch elements with no component");
    for (size_t c = 0; c < batch_.size(); ++c)
      TF_CHECK_ARG(batch_[c].rank() >= 1, "Dataset.unbatch",
                   "cannot unbatch an element with a scalar component: component {} of element "
                   "{} has shape ()",
                   c, index_);
    rows_ = batch_[0].shape()[0];
    for (size_t c = 1; c < batch_.size(); ++c)
      TF_CHECK_ARG(batch_[c].shape()[0] == rows_, "Dataset.unbatch",
                   "the components of element {} must have the same first dimension: component "
                   "0 has shape {} and component {} has shape {}",
                   index_, batch_[0].shape().to_string(), c, batch_[c].shape().to_string());
    ++index_;
  }

  std::unique_ptr<IteratorBase> in_;
  Element batch_;
  int64_t rows_ = 0, row_ = 0, index_ = 0;
};

class UnbatchDataset final : public DatasetBase {
 public:
  explicit UnbatchDataset(Node in) : in_(std::move(in)) {}
  std::unique_ptr<IteratorBase> make_iterator() const override {
    return std::make_unique<UnbatchIterator>(in_->make_iterator());
  }
  // Without static shapes the batch sizes are unknown until the elements are read (TF knows the
  // count only when the batch dimension is static, e.g. after batch(n, drop_remainder=True)).
  // Infinite stays infinite; anything else is unknown, an empty input too, as TF reports.
  int64_t cardinality() const override {
    return in_->cardinality() == INFINITE_CARDINALITY ? INFINITE_CARDINALITY : UNKNOWN_CARDINALITY;
  }

 private:
  Node in_;
};

// ---- shard ----

class ShardIterator final : public IteratorBase {
 public:
  ShardIterator(std::unique_ptr<IteratorBase> in, int64_t n, int64_t index)
      : in_(std::move(in)), rows_(in_->rows()), n_(n), index_(index) {}
  bool next(Element& out) override {
    return pull([&] { return in_->next(out); });
  }
  // Over from_tensor_slices (and shuffle, take, ...) the shard stays a row iterator, so a
  // batch() after it still gathers rows with memcpy.
  RowSource rows() const override { return rows_; }
  bool next_row(int64_t& row) override {
    return pull([&] { return in_->next_row(row); });
  }

 private:
  template <class Pull>
  bool pull(Pull p) {
    while (p()) {
      if (pos_++ % n_ == index_) return true;
    }
    return false;
  }

  std::unique_ptr<IteratorBase> in_;
  RowSource rows_;
  int64_t n_, index_, pos_ = 0;
};

class ShardDataset final : public DatasetBase {
 public:
  ShardDataset(Node in, int64_t n, int64_t index) : in_(std::move(in)), n_(n), index_(index) {}
  std::unique_ptr<IteratorBase> make_iterator() const override {
    return std::make_unique<ShardIterator>(in_->make_iterator(), n_, index_);
  }
  int64_t cardinality() const override {
    const int64_t c = in_->cardinality();
    if (c < 0) return c;
    return c / n_ + (c % n_ > index_ ? 1 : 0);
  }

 private:
  Node in_;
  int64_t n_, index_;
};

// ---- from_generator ----

class GeneratorIterator final : public IteratorBase {
 public:
  GeneratorIterator(Dataset::Generator gen, std::shared_ptr<const std::vector<TensorSpec>> specs)
      : gen_(std::move(gen)), specs_(std::move(specs)) {}
  bool next(Element& out) override {
    if (done_) return false;
    std::optional<Element> e;
    {
      UserFnScope scope;
      e = gen_();
    }
    if (!e) {
      done_ = true;
      gen_ = nullptr;  // release what the generator holds as soon as it has ended
      return false;
    }
    check(*e);
    out = std::move(*e);
    ++index_;
    return true;
  }

 private:
  void check(Element& e) {
    constexpr const char* op = "Dataset.from_generator";
    const auto& specs = *specs_;
    TF_CHECK_ARG(e.size() == specs.size(), op,
                 "the generator yielded element {} with {} component(s) where the output "
                 "signature has {}",
                 index_, e.size(), specs.size());
    check_user_element(op, e);
    for (size_t c = 0; c < e.size(); ++c) {
      const Tensor& t = e[c];
      TF_CHECK_ARG(t.dtype() == specs[c].dtype, op,
                   "the generator yielded a {} tensor as component {} of element {} where the "
                   "output signature expects {}",
                   dtype_name(t.dtype()), c, index_, dtype_name(specs[c].dtype));
      TF_CHECK_ARG(specs[c].is_compatible_with(t.shape()), op,
                   "the generator yielded a tensor of shape {} as component {} of element {} "
                   "where the output signature expects shape {}",
                   t.shape().to_string(), c, index_, specs[c].shape.to_string());
    }
  }

  Dataset::Generator gen_;
  std::shared_ptr<const std::vector<TensorSpec>> specs_;
  int64_t index_ = 0;
  bool done_ = false;
};

class GeneratorDataset final : public DatasetBase {
 public:
  GeneratorDataset(std::function<Dataset::Generator()> make, std::vector<TensorSpec> specs)
      : make_(std::make_shared<const std::function<Dataset::Generator()>>(std::move(make))),
        specs_(std::make_shared<const std::vector<TensorSpec>>(std::move(specs))) {}
  std::unique_ptr<IteratorBase> make_iterator() const override {
    Dataset::Generator gen;
    {
      UserFnScope scope;
      gen = (*make_)();
    }
    TF_CHECK_ARG(gen != nullptr, "Dataset.from_generator",
                 "make_generator returned an empty std::function");
    return std::make_unique<GeneratorIterator>(std::move(gen), specs_);
  }
  int64_t cardinality() const override { return UNKNOWN_CARDINALITY; }

 private:
  std::shared_ptr<const std::function<Dataset::Generator()>> make_;
  std::shared_ptr<const std::vector<TensorSpec>> specs_;
};

// ---- padded_batch ----

struct PaddingSpec {
  std::vector<TensorShape> shapes;  // empty: every dimension to the batch's largest
  std::vector<Tensor> values;       // empty: zeros; else CPU scalars, one per component
};

// Copies `src` (shape s) into the leading corner of `dst` (shape d, same rank, d[i] >= s[i]).
void copy_padded(const uint8_t* src, const TensorShape& s, uint8_t* dst, const TensorShape& d,
                 size_t item) {
  const int rank = s.rank();
  if (rank == 0) {
    std::memcpy(dst, src, item);
    return;
  }
  int64_t outer = 1;
  for (int i = 0; i + 1 < rank; ++i) outer *= s[i];
  const size_t run = static_cast<size_t>(s[rank - 1]) * item;
  if (run == 0 || outer == 0) return;
  std::vector<int64_t> idx(static_cast<size_t>(rank), 0);
  for (int64_t r = 0; r < outer; ++r) {
    // Destination offset of the run starting at idx[0..rank-2], 0.
    int64_t off = 0;
    for (int i = 0; i + 1 < rank; ++i) off = off * d[i] + idx[static_cast<size_t>(i)];
    off *= d[rank - 1];
    std::memcpy(dst + static_cast<size_t>(off) * item, src + static_cast<size_t>(r) * run, run);
    for (int i = rank - 2; i >= 0; --i) {
      if (++idx[static_cast<size_t>(i)] < s[i]) break;
      idx[static_cast<size_t>(i)] = 0;
    }
  }
}

Tensor pad_and_stack(const std::vector<Element>& elems, size_t c, const PaddingSpec& spec) {
  constexpr const char* op = "Dataset.padded_batch";
  const Tensor& first = elems[0][c];
  const int rank = first.rank();
  for (size_t i = 1; i < elems.size(); ++i) {
    const Tensor& t = elems[i][c];
    TF_CHECK_ARG(t.dtype() == first.dtype(), op,
                 "cannot batch tensors of different dtypes in component {}: the first element "
                 "is {} and element {} is {}",
                 c, dtype_name(first.dtype()), i, dtype_name(t.dtype()));
    TF_CHECK_ARG(t.rank() == rank, op,
                 "cannot pad tensors of different ranks in component {}: the first element has "
                 "shape {} and element {} has shape {}",
                 c, first.shape().to_string(), i, t.shape().to_string());
  }
  TensorShape target;
  for (int d = 0; d < rank; ++d) {
    int64_t m = 0;
    for (const Element& e : elems) m = std::max(m, e[c].shape()[d]);
    target.push_back(m);
  }
  if (!spec.shapes.empty()) {
    const TensorShape& want = spec.shapes[c];
    TF_CHECK_ARG(want.rank() == rank, op,
                 "padded shape {} of component {} does not match the rank of its elements "
                 "(shape {})",
                 want.to_string(), c, first.shape().to_string());
    for (int d = 0; d < rank; ++d) {
      if (want[d] == None) continue;
      TF_CHECK_ARG(
          target[d] <= want[d], op,
          "cannot pad component {} to padded shape {}: the largest element of the batch has "
          "size {} in dimension {}",
          c, want.to_string(), target[d], d);
      target[d] = want[d];
    }
  }
  const DType dt = first.dtype();
  if (!spec.values.empty())
    TF_CHECK_ARG(spec.values[c].dtype() == dt, op,
                 "padding value {} is {} but the elements' component {} is {}", c,
                 dtype_name(spec.values[c].dtype()), c, dtype_name(dt));
  TensorShape s;
  s.push_back(static_cast<int64_t>(elems.size()));
  for (int64_t d : target) s.push_back(d);
  Tensor out;
  try {
    out = tapeflow::detail::empty(s, dt, Device{});
  } catch (const ResourceExhaustedError& e) {  // padded shapes too large for the machine
    TF_THROW(ResourceExhaustedError, op,
             "cannot allocate the padded batch {} {} of component {}: {}", dtype_name(dt),
             s.to_string(), c, e.what());
  } catch (const InvalidArgumentError& e) {  // or for int64 to count
    TF_THROW(InvalidArgumentError, op, "cannot make the padded batch {} {} of component {}: {}",
             dtype_name(dt), s.to_string(), c, e.what());
  }
  const size_t item = dtype_size(dt);
  const size_t total = out.nbytes();
  if (total == 0) return out;
  auto* dst = static_cast<uint8_t*>(out.raw_data());
  if (spec.values.empty()) {
    std::memset(dst, 0, total);
  } else {
    auto pad = tapeflow::detail::host_bytes(spec.values[c]);
    for (size_t off = 0; off < total; off += item) std::memcpy(dst + off, pad.data, item);
  }
  const size_t stride = total / elems.size();
  for (size_t i = 0; i < elems.size(); ++i) {
    auto hb = tapeflow::detail::host_bytes(elems[i][c]);
    copy_padded(static_cast<const uint8_t*>(hb.data), elems[i][c].shape(), dst + i * stride, target,
                item);
  }
  return out;
}

class PaddedBatchIterator final : public IteratorBase {
 public:
  PaddedBatchIterator(std::unique_ptr<IteratorBase> in, int64_t n, bool drop,
                      std::shared_ptr<const PaddingSpec> spec)
      : in_(std::move(in)), n_(static_cast<size_t>(n)), drop_(drop), spec_(std::move(spec)) {}
  bool next(Element& out) override {
    if (done_) return false;
    elems_.clear();
    Element e;
    while (elems_.size() < n_ && in_->next(e)) elems_.push_back(std::move(e));
    if (elems_.size() < n_) done_ = true;
    if (elems_.empty() || (drop_ && elems_.size() < n_)) return false;
    const size_t nc = elems_[0].size();
    for (size_t i = 1; i < elems_.size(); ++i)
      TF_CHECK_ARG(elems_[i].size() == nc, "Dataset.padded_batch",
                   "cannot batch elements with different numbers of components: the first has "
                   "{} and element {} has {}",
                   nc, i, elems_[i].size());
    check_spec_size("padded_shapes", spec_->shapes.size(), nc);
    check_spec_size("padding_values", spec_->values.size(), nc);
    out.resize(nc);
    for (size_t c = 0; c < nc; ++c) out[c] = pad_and_stack(elems_, c, *spec_);
    return true;
  }

 private:
  static void check_spec_size(const char* what, size_t given, size_t nc) {
    TF_CHECK_ARG(given == 0 || given == nc, "Dataset.padded_batch",
                 "{} has {} entries but the elements have {} component(s)", what, given, nc);
  }

  std::unique_ptr<IteratorBase> in_;
  size_t n_;
  bool drop_;
  std::shared_ptr<const PaddingSpec> spec_;
  bool done_ = false;
  std::vector<Element> elems_;
};

class PaddedBatchDataset final : public DatasetBase {
 public:
  PaddedBatchDataset(Node in, int64_t n, bool drop, std::shared_ptr<const PaddingSpec> spec)
      : in_(std::move(in)), n_(n), drop_(drop), spec_(std::move(spec)) {}
  std::unique_ptr<IteratorBase> make_iterator() const override {
    return std::make_unique<PaddedBatchIterator>(in_->make_iterator(), n_, drop_, spec_);
  }
  int64_t cardinality() const override {
    const int64_t c = in_->cardinality();
    if (c < 0) return c;
    return c / n_ + ((c % n_ == 0 || drop_) ? 0 : 1);
  }

 private:
  Node in_;
  int64_t n_;
  bool drop_;
  std::shared_ptr<const PaddingSpec> spec_;
};

// ---- flat_map and interleave ----

// An element's dataset, made by the user's function under UserFnScope, and its iterator.
std::unique_ptr<IteratorBase> open_inner(const DatasetFn& fn, Element e) {
  UserFnScope scope;
  Dataset d = fn(std::move(e));
  return d.node()->make_iterator();
}

// flat_map is interleave with a cycle of one: each element's dataset is read to its end.
// TF's deterministic interleave: slot k of the cycle yields block_length elements, then the
// next slot; a slot whose dataset ends is refilled from the next input element when the cycle
// comes back to it (the cycle moves on first), and an empty slot is filled before it yields.
class InterleaveIterator final : public IteratorBase {
 public:
  InterleaveIterator(std::unique_ptr<IteratorBase> in, std::shared_ptr<const DatasetFn> fn,
                     int64_t cycle, int64_t block)
      : in_(std::move(in)),
        fn_(std::move(fn)),
        cycle_(static_cast<uint64_t>(cycle)),
        block_(block) {}
  bool next(Element& out) override {
    while (!input_done_ || open_ > 0) {
      // The slots are made as the input fills them: a cycle_length of 2^40 allocates nothing.
      if (k_ == slots_.size()) slots_.emplace_back();
      auto& slot = slots_[k_];
      if (slot) {
        if (slot->next(out)) {
          if (++in_block_ == block_) advance();
          return true;
        }
        slot.reset();
        --open_;
        advance();
      } else if (!input_done_) {
        Element e;
        if (in_->next(e)) {
          slot = open_inner(*fn_, std::move(e));
          ++open_;
        } else {
          input_done_ = true;
        }
      } else {
        advance();
      }
    }
    return false;
  }

 private:
  // The cycle's slots past the last one made are empty, and stay so once the input has ended.
  void advance() {
    in_block_ = 0;
    ++k_;
    if (k_ == cycle_ || (k_ == slots_.size() && input_done_)) k_ = 0;
  }

  std::unique_ptr<IteratorBase> in_;
  std::shared_ptr<const DatasetFn> fn_;
  uint64_t cycle_;
  std::vector<std::unique_ptr<IteratorBase>> slots_;
  int64_t block_;
  size_t k_ = 0, open_ = 0;
  int64_t in_block_ = 0;
  bool input_done_ = false;
};

class InterleaveDataset final : public DatasetBase {
 public:
  InterleaveDataset(Node in, DatasetFn fn, int64_t cycle, int64_t block)
      : in_(std::move(in)),
        fn_(std::make_shared<const DatasetFn>(std::move(fn))),
        cycle_(cycle),
        block_(block) {}
  std::unique_ptr<IteratorBase> make_iterator() const override {
    return std::make_unique<InterleaveIterator>(in_->make_iterator(), fn_, cycle_, block_);
  }
  // As TF: unknown, even over an empty or infinite input.
  int64_t cardinality() const override { return UNKNOWN_CARDINALITY; }

 private:
  Node in_;
  std::shared_ptr<const DatasetFn> fn_;
  int64_t cycle_, block_;
};

}  // namespace
}  // namespace detail

// ---- Dataset ----

Dataset Dataset::zip(const std::vector<Dataset>& datasets) {
  TF_CHECK_ARG(!datasets.empty(), "Dataset.zip", "needs at least one dataset");
  std::vector<detail::Node> nodes;
  nodes.reserve(datasets.size());
  for (const Dataset& d : datasets) nodes.push_back(d.node());
  return Dataset(std::make_shared<detail::ZipDataset>(std::move(nodes)));
}

Dataset Dataset::concatenate(const Dataset& other) const {
  return Dataset(std::make_shared<detail::ConcatenateDataset>(node_, other.node()));
}

Dataset Dataset::enumerate(int64_t start) const {
  return Dataset(std::make_shared<detail::EnumerateDataset>(node_, start));
}

Dataset Dataset::unbatch() const {
  return Dataset(std::make_shared<detail::UnbatchDataset>(node_));
}

Dataset Dataset::shard(int64_t num_shards, int64_t index) const {
  TF_CHECK_ARG(num_shards > 0, "Dataset.shard", "num_shards must be positive, got {}", num_shards);
  TF_CHECK_ARG(index >= 0 && index < num_shards, "Dataset.shard",
               "index must be between 0 and {} (num_shards - 1), got {}", num_shards - 1, index);
  return Dataset(std::make_shared<detail::ShardDataset>(node_, num_shards, index));
}

Dataset Dataset::from_generator(std::function<Generator()> make_generator,
                                std::vector<TensorSpec> output_signature) {
  constexpr const char* op = "Dataset.from_generator";
  TF_CHECK_ARG(make_generator != nullptr, op, "make_generator is an empty std::function");
  TF_CHECK_ARG(!output_signature.empty(), op,
               "the output signature needs at least one tf::TensorSpec");
  return Dataset(std::make_shared<detail::GeneratorDataset>(std::move(make_generator),
                                                            std::move(output_signature)));
}

Dataset Dataset::padded_batch(int64_t batch_size, std::vector<TensorShape> padded_shapes,
                              std::vector<Tensor> padding_values, bool drop_remainder) const {
  constexpr const char* op = "Dataset.padded_batch";
  TF_CHECK_ARG(batch_size > 0, op, "batch_size must be positive, got {}", batch_size);
  for (const TensorShape& s : padded_shapes)
    for (int64_t d : s)
      TF_CHECK_ARG(d >= 0 || d == None, op,
                   "padded shape {} has a negative dimension (use tf::None to pad to the batch's "
                   "largest)",
                   s.to_string());
  if (!padded_shapes.empty() && !padding_values.empty())
    TF_CHECK_ARG(padded_shapes.size() == padding_values.size(), op,
                 "padded_shapes has {} entries but padding_values has {}", padded_shapes.size(),
                 padding_values.size());
  auto spec = std::make_shared<detail::PaddingSpec>();
  spec->shapes = std::move(padded_shapes);
  for (size_t c = 0; c < padding_values.size(); ++c) {
    const Tensor& v = padding_values[c];
    TF_CHECK_ARG(
        v.defined() && !v.is_symbolic() && v.rank() == 0, op,
        "padding value {} must be a scalar tensor with a value, got {}", c,
        v.defined() ? "shape " + v.shape().to_string() : std::string("an undefined tensor"));
    spec->values.push_back(v.placement().is_cpu() ? v
                                                  : tapeflow::detail::copy_to_device(v, Device{}));
  }
  return Dataset(
      std::make_shared<detail::PaddedBatchDataset>(node_, batch_size, drop_remainder, spec));
}

Dataset Dataset::flat_map_impl(detail::DatasetFn fn) const {
  return Dataset(std::make_shared<detail::InterleaveDataset>(node_, std::move(fn), 1, INT64_MAX));
}

Dataset Dataset::interleave_impl(detail::DatasetFn fn, int64_t cycle_length,
                                 int64_t block_length) const {
  constexpr const char* op = "Dataset.interleave";
  TF_CHECK_ARG(cycle_length > 0 || cycle_length == AUTOTUNE, op,
               "cycle_length must be positive or AUTOTUNE, got {}", cycle_length);
  TF_CHECK_ARG(block_length > 0, op, "block_length must be positive, got {}", block_length);
  if (cycle_length == AUTOTUNE)
    cycle_length = std::max<int64_t>(1, static_cast<int64_t>(std::thread::hardware_concurrency()));
  return Dataset(std::make_shared<detail::InterleaveDataset>(node_, std::move(fn), cycle_length,
                                                             block_length));
}

}  // namespace tapeflow::data
