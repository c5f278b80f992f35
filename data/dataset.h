// tf::data::Dataset: TF2's input pipeline (from_tensor_slices, from_generator, zip, shuffle,
// batch, padded_batch, map, filter, flat_map, interleave, repeat, take, skip, cache, prefetch,
// ...) and its iterator. A Dataset is an immutable value: each
// transformation returns a new Dataset that shares its input, and each iteration (begin() or
// make_iterator()) starts from the beginning with its own state.
// Threading: a Dataset may be shared and iterated from several threads at once (the only shared
// state, the shuffle epoch counter and the cache, is synchronised; a second iterator that would
// write the same cache file while one does is refused, see cache(filename)). One Iterator
// belongs to one thread. prefetch() runs its input on a background thread owned by the
// Iterator, which stops and joins it when destroyed; functions given to map()/filter() may
// therefore run on that thread.
#pragma once

#include <concepts>
#include <cstdint>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"
#include "core/tensor_spec.h"

namespace tapeflow {
// TF's AlreadyExistsError and DataLossError, raised by the file-backed datasets (cache(filename),
// save, load). Declared here rather than in core/error.h only to keep that header (included
// everywhere) unchanged; they belong there with the other error classes.
// Something the call would create is already there (a cache file's lockfile: another iterator
// is writing it; a save() path that is not a saved dataset).
class AlreadyExistsError : public Error {
 public:
  using Error::Error;
};
// Stored data is truncated or corrupt (a cache or saved-dataset file).
class DataLossError : public Error {
 public:
  using Error::Error;
};
}  // namespace tapeflow

namespace tapeflow::data {

// One element of a dataset: one tensor per component (e.g. {image, label}).
using Element = std::vector<Tensor>;

// TF's cardinality constants (tf.data.INFINITE_CARDINALITY, tf.data.UNKNOWN_CARDINALITY).
inline constexpr int64_t INFINITE_CARDINALITY = -1;
inline constexpr int64_t UNKNOWN_CARDINALITY = -2;
// tf.data.AUTOTUNE for prefetch's buffer size (tapeflow uses a fixed buffer of 2 elements).
inline constexpr int64_t AUTOTUNE = -1;

class Dataset;

namespace detail {

// Rows of these CPU tensors (all with the same first dimension): a "row iterator" yields row r
// of each of them as an element, so batch() and shuffle() can work on row indices and gather
// each batch with one copy per component.
using RowSource = std::shared_ptr<const std::vector<Tensor>>;

class IteratorBase {
 public:
  virtual ~IteratorBase() = default;
  // Fills `out` with the next element; false at the end of the sequence (then `out` is
  // unspecified).
  virtual bool next(Element& out) = 0;
  // Non-null when every element is a row of these tensors; then next_row() may be used instead
  // of next() (never both on one iterator).
  virtual RowSource rows() const { return nullptr; }
  virtual bool next_row(int64_t& row);
};

class DatasetBase {
 public:
  virtual ~DatasetBase() = default;
  virtual std::unique_ptr<IteratorBase> make_iterator() const = 0;
  virtual int64_t cardinality() const = 0;
};

using MapFn = std::function<Element(Element)>;
// flat_map's and interleave's function: an element to a dataset (Dataset is declared below).
using DatasetFn = std::function<Dataset(Element)>;
using PredicateFn = std::function<bool(const Element&)>;

// Wraps the ways a user may write a map function: fn(Element), fn(Tensor), fn(Tensor, Tensor),
// ... returning a Tensor, an Element, a std::pair or a std::tuple of tensors.
template <class R>
Element to_element(R&& r) {
  using D = std::remove_cvref_t<R>;
  if constexpr (std::is_same_v<D, Element>) {
    return std::forward<R>(r);
  } else if constexpr (std::is_convertible_v<D, Tensor>) {
    return Element{Tensor(std::forward<R>(r))};
  } else {
    return std::apply([](auto&&... t) { return Element{Tensor(std::forward<decltype(t)>(t))...}; },
                      std::forward<R>(r));
  }
}

[[noreturn]] void throw_arity_error(const char* op, size_t takes, size_t components);
// A filter or take_while predicate's result (op names the caller): a bool, or a one-element
// bool tensor (TF asks for a bool scalar; another dtype is an InvalidArgumentError, not read as
// nonzero).
bool to_bool(const char* op, const Tensor& t);
inline bool to_bool(const char*, bool b) {
  return b;
}

template <class F, size_t... I>
decltype(auto) call_unpacked(F& fn, Element& e, std::index_sequence<I...>) {
  return fn(std::move(e[I])...);
}

// Calls fn on an element, unpacking its components when fn takes tensors; returns what fn returns.
template <size_t N, class F>
decltype(auto) invoke_on_element(const char* op, F& fn, Element& e) {
  if (e.size() != N) throw_arity_error(op, N, e.size());
  return call_unpacked(fn, e, std::make_index_sequence<N>{});
}

template <class F>
decltype(auto) invoke_element_fn(const char* op, F& fn, Element& e) {
  if constexpr (std::invocable<F&, Element>) {
    return fn(std::move(e));
  } else if constexpr (std::invocable<F&, Tensor>) {
    return invoke_on_element<1>(op, fn, e);
  } else if constexpr (std::invocable<F&, Tensor, Tensor>) {
    return invoke_on_element<2>(op, fn, e);
  } else if constexpr (std::invocable<F&, Tensor, Tensor, Tensor>) {
    return invoke_on_element<3>(op, fn, e);
  } else if constexpr (std::invocable<F&, Tensor, Tensor, Tensor, Tensor>) {
    return invoke_on_element<4>(op, fn, e);
  } else {
    static_assert(std::invocable<F&, Tensor>,
                  "a dataset function takes a std::vector<tf::Tensor> or 1 to 4 tf::Tensor");
  }
}

// reduce's and scan's function: (state, element) to the new state (and scan's output).
using StateFn = std::function<Element(Element, Element)>;
using ScanFn = std::function<std::pair<Element, Element>(Element, Element)>;
// group_by_window's key and bucket_by_sequence_length's length function.
using KeyFn = std::function<int64_t(const Element&)>;

// An integer key: an integral value, or an integer scalar tensor (op names the caller).
int64_t to_key(const char* op, const Tensor& t);
inline int64_t to_key(const char*, std::integral auto v) {
  return static_cast<int64_t>(v);
}
// One component from a one-component element (the Tensor overloads of reduce and scan).
const Tensor& single_component(const char* op, const Element& e, const char* what);

template <class F>
StateFn state_fn(const char* op, F& fn) {
  return [fn, op](Element state, Element e) mutable -> Element {
    if constexpr (std::invocable<F&, Element, Element>) {
      return to_element(fn(std::move(state), std::move(e)));
    } else {
      static_assert(std::invocable<F&, Tensor, Tensor>,
                    "a reduce function takes (std::vector<tf::Tensor> state, "
                    "std::vector<tf::Tensor> element) or (tf::Tensor state, tf::Tensor element)");
      return to_element(
          fn(single_component(op, state, "state"), single_component(op, e, "element")));
    }
  };
}

template <class F>
ScanFn scan_fn(F& fn) {
  constexpr const char* op = "Dataset.scan";
  return [fn](Element state, Element e) mutable -> std::pair<Element, Element> {
    if constexpr (std::invocable<F&, Element, Element>) {
      auto r = fn(std::move(state), std::move(e));
      return {to_element(std::move(r.first)), to_element(std::move(r.second))};
    } else {
      static_assert(std::invocable<F&, Tensor, Tensor>,
                    "a scan function takes (std::vector<tf::Tensor> state, std::vector<tf::Tensor> "
                    "element) or (tf::Tensor, tf::Tensor) and returns a std::pair (new state, "
                    "output)");
      auto r = fn(single_component(op, state, "state"), single_component(op, e, "element"));
      return {to_element(std::move(r.first)), to_element(std::move(r.second))};
    }
  };
}

template <class K>
KeyFn key_fn(const char* op, K& fn) {
  return [fn, op](const Element& e) mutable -> int64_t {
    Element copy = e;
    return to_key(op, invoke_element_fn(op, fn, copy));
  };
}

}  // namespace detail

class Dataset {
 public:
  // TF's iter(dataset). Range-for uses begin()/end(); get_next() is TF's
  // iterator.get_next_as_optional(). Move-only; destroying it stops any prefetch thread.
  class Iterator {
   public:
    using value_type = Element;
    using difference_type = std::ptrdiff_t;
    using iterator_concept = std::input_iterator_tag;

    Iterator() = default;
    explicit Iterator(std::unique_ptr<detail::IteratorBase> impl);
    Iterator(Iterator&&) noexcept;
    Iterator& operator=(Iterator&&) noexcept;
    ~Iterator();

    // The next element, or nullopt at the end. Exceptions raised by the pipeline (a map
    // function, a prefetch thread) are thrown here.
    std::optional<Element> get_next();

    Element& operator*() const;
    Element* operator->() const { return &**this; }
    Iterator& operator++();
    void operator++(int) { ++*this; }
    bool operator==(std::default_sentinel_t) const;

   private:
    void fill() const;
    std::unique_ptr<detail::IteratorBase> impl_;
    mutable Element current_;
    mutable bool has_current_ = false;
    mutable bool done_ = true;
  };

  // An empty dataset (no elements, cardinality 0).
  Dataset();
  explicit Dataset(std::shared_ptr<const detail::DatasetBase> node);

  // ---- sources ----
  // One element per row of the tensors, which must share their first dimension:
  // from_tensor_slices({x, y}) yields {x[i], y[i]}. The tensors are copied to the CPU if needed.
  static Dataset from_tensor_slices(const std::vector<Tensor>& tensors);
  static Dataset from_tensor_slices(const Tensor& tensor);
  // A dataset of one element (TF's Dataset.from_tensors).
  static Dataset from_tensors(const std::vector<Tensor>& tensors);
  // int64 scalars start, start + step, ... before stop (TF's Dataset.range).
  static Dataset range(int64_t stop);
  static Dataset range(int64_t start, int64_t stop, int64_t step = 1);
  // TF's Dataset.from_generator with an output_signature. A generator returns the next element,
  // or nullopt at the end. Python calls the generator function anew for every iteration; here
  // make_generator plays that part: each iteration (begin(), each epoch) calls it once for a
  // fresh generator, so a dataset can be iterated again. Each element is checked against
  // output_signature (number of components, dtype, shape with tf::None for any size).
  using Generator = std::function<std::optional<Element>()>;
  static Dataset from_generator(std::function<Generator()> make_generator,
                                std::vector<TensorSpec> output_signature);
  // TF's Dataset.zip: element i is the components of element i of every dataset, concatenated
  // ({a, b} zipped with {c} gives {a, b, c}); ends with the shortest dataset.
  static Dataset zip(const std::vector<Dataset>& datasets);

  // ---- transformations (each returns a new dataset sharing this one) ----
  // TF's buffered shuffle: fills a buffer of buffer_size elements, then emits a uniformly chosen
  // one and replaces it by the next input. buffer_size >= the dataset size gives a uniform
  // permutation. With a seed (or a global tf::random::set_seed) the order is reproducible;
  // reshuffle_each_iteration gives each iteration (epoch) a new order, as in TF.
  Dataset shuffle(int64_t buffer_size, std::optional<int64_t> seed = std::nullopt,
                  bool reshuffle_each_iteration = true) const;
  // Stacks batch_size consecutive elements along a new first axis; the last batch is smaller
  // unless drop_remainder.
  Dataset batch(int64_t batch_size, bool drop_remainder = false) const;
  // Applies fn to each element. fn takes a std::vector<tf::Tensor> (the element) or one
  // tf::Tensor per component, and returns a tf::Tensor, a std::vector<tf::Tensor>, a std::pair
  // or a std::tuple of tensors. It runs eagerly on the CPU, outside any GradientTape or trace.
  template <class F>
  Dataset map(F fn) const {
    return map_impl([fn = std::move(fn)](Element e) mutable -> Element {
      return detail::to_element(detail::invoke_element_fn("Dataset.map", fn, e));
    });
  }
  // Keeps the elements for which pred returns true (a bool or a scalar bool tensor); the
  // function takes the element as map's does.
  template <class F>
  Dataset filter(F pred) const {
    return filter_impl([pred = std::move(pred)](const Element& e) mutable -> bool {
      Element copy = e;
      return detail::to_bool("Dataset.filter",
                             detail::invoke_element_fn("Dataset.filter", pred, copy));
    });
  }
  // The dataset count times (forever when count is -1).
  Dataset repeat(int64_t count = -1) const;
  // The first count elements (all of them when count is -1).
  Dataset take(int64_t count) const;
  // All but the first count elements (none when count is -1).
  Dataset skip(int64_t count) const;
  // This dataset's elements followed by other's. Elements must have the same number of
  // components and dtypes (checked while iterating); shapes may differ.
  Dataset concatenate(const Dataset& other) const;
  // Prepends an int64 scalar counter start, start + 1, ... to each element (an element whose
  // counter would pass INT64_MAX is an InvalidArgumentError, where TF's silently ends).
  Dataset enumerate(int64_t start = 0) const;
  // Splits each element along its first dimension into that many elements (every component
  // must have the same first dimension); the inverse of batch().
  Dataset unbatch() const;
  // Every num_shards-th element, starting at element index (TF's Dataset.shard).
  Dataset shard(int64_t num_shards, int64_t index) const;
  // batch() for elements whose shapes differ: each component is padded at the end of every
  // dimension with its padding value (0 by default) to padded_shapes[c] (tf::None, or no
  // padded_shapes, pads to the largest element of the batch in that dimension).
  Dataset padded_batch(int64_t batch_size, std::vector<TensorShape> padded_shapes = {},
                       std::vector<Tensor> padding_values = {}, bool drop_remainder = false) const;
  // fn maps an element (taken as map's function takes it) to a Dataset; the result is the
  // elements of those datasets, one after another.
  template <class F>
  Dataset flat_map(F fn) const {
    return flat_map_impl([fn = std::move(fn)](Element e) mutable -> Dataset {
      return detail::invoke_element_fn("Dataset.flat_map", fn, e);
    });
  }
  // flat_map that cycles through cycle_length of the datasets at a time, block_length elements
  // from each in turn, in TF's deterministic order. AUTOTUNE: the number of CPU cores, as TF.
  template <class F>
  Dataset interleave(F fn, int64_t cycle_length = AUTOTUNE, int64_t block_length = 1) const {
    return interleave_impl(
        [fn = std::move(fn)](Element e) mutable -> Dataset {
          return detail::invoke_element_fn("Dataset.interleave", fn, e);
        },
        cycle_length, block_length);
  }
  // TF's interleave(fn, cycle_length, block_length, num_parallel_calls, deterministic): the
  // cycle's datasets are opened (fn) and read ahead on num_parallel_calls threads (AUTOTUNE: one
  // per CPU core; at most cycle_length and 256) that the iterator owns and joins when destroyed,
  // each slot up to max(2, block_length) elements ahead (at most 64). deterministic (TF's default)
  // gives the order of the interleave above; false takes an element from any slot that has one
  // ready when the current slot has none. The input is read ahead to fill the cycle, so an error of
  // the input itself can come before elements the sequential interleave would give first. Each
  // thread calls its own copy of fn; the datasets fn returns are each read by one thread at a
  // time. An exception from fn or an inner dataset is rethrown at its element's place.
  template <class F>
  Dataset interleave(F fn, int64_t cycle_length, int64_t block_length, int64_t num_parallel_calls,
                     bool deterministic = true) const {
    return parallel_interleave_impl(
        [fn = std::move(fn)](Element e) mutable -> Dataset {
          return detail::invoke_element_fn("Dataset.interleave", fn, e);
        },
        cycle_length, block_length, num_parallel_calls, deterministic);
  }
  // Keeps the elements of the first complete iteration in memory; later iterations replay them.
  Dataset cache() const;
  // TF's cache(filename) (an empty filename is cache() above). The first iteration that runs to
  // the end (or yields the input's known cardinality) writes the elements to the file
  // `filename` itself (one file, where TF writes filename.index and filename.data-*); later
  // iterations, other Dataset objects and later processes that find the file read it without
  // running the input. The file is written under a temporary name and renamed when complete;
  // an iteration stopped early discards it with a warning. While one iterator writes it,
  // another one is an AlreadyExistsError (filename.lockfile exists; a lockfile left by a
  // crashed process stays until deleted by hand, as TF's). A truncated or corrupt file is a
  // DataLossError; a file whose element count differs from the input's known cardinality an
  // InvalidArgumentError. Elements must keep the number of components, dtypes and ranks.
  Dataset cache(const std::string& filename) const;
  // TF's Dataset.save(path, shard_func): writes every element to the directory `path` (built
  // under a temporary name and renamed when complete, replacing an earlier save there).
  // shard_func (taking the element as map's function does) gives each element a shard index,
  // an int64_t or an integer scalar tensor >= 0; without it every element goes to shard 0
  // (TF's default spreads elements over one shard per CPU core, which changes their order on
  // load). Not compressed. Elements must keep the number of components, dtypes and ranks.
  void save(const std::string& path) const;
  template <class F>
  void save(const std::string& path, F shard_func) const {
    save_impl(path, detail::key_fn<F>("Dataset.save", shard_func));
  }
  // TF's Dataset.load(path, element_spec): the saved elements, shard after shard in increasing
  // shard index (each shard in the order it was written; TF's default reader interleaves the
  // shards instead), with the saved cardinality. A non-empty element_spec must agree with the
  // saved one (an InvalidArgumentError otherwise); saved_element_spec(path) gives that.
  static Dataset load(const std::string& path, const std::vector<TensorSpec>& element_spec = {});
  // The element_spec stored by save(): per component the dtype and the shape, tf::None where
  // the elements' sizes differ (empty for a saved dataset without elements).
  static std::vector<TensorSpec> saved_element_spec(const std::string& path);
  // Produces up to buffer_size elements ahead on a background thread.
  Dataset prefetch(int64_t buffer_size = AUTOTUNE) const;

  // ---- more transformations (data/dataset_extra.cpp) ----
  // TF's map(fn, num_parallel_calls, deterministic): fn runs on num_parallel_calls threads
  // (AUTOTUNE: one per CPU core) that the iterator owns and joins when destroyed. deterministic
  // (TF's default) yields the results in input order; false yields each one as soon as it is
  // ready. Each thread calls its own copy of fn, so state fn captures by value is per thread;
  // whatever it reaches through references or pointers must be safe to use from several
  // threads. An exception thrown by fn is rethrown by the iterator at that element's place.
  template <class F>
  Dataset map(F fn, int64_t num_parallel_calls, bool deterministic = true) const {
    return parallel_map_impl(
        [fn = std::move(fn)](Element e) mutable -> Element {
          return detail::to_element(detail::invoke_element_fn("Dataset.map", fn, e));
        },
        num_parallel_calls, deterministic);
  }
  // The elements up to the first one for which pred (as filter's) is false (TF's take_while).
  template <class F>
  Dataset take_while(F pred) const {
    return take_while_impl([pred = std::move(pred)](const Element& e) mutable -> bool {
      Element copy = e;
      return detail::to_bool("Dataset.take_while",
                             detail::invoke_element_fn("Dataset.take_while", pred, copy));
    });
  }
  // TF's reduce: state = fn(state, element) for every element, in order; returns the final
  // state (initial_state for an empty dataset). fn takes (std::vector<tf::Tensor> state,
  // std::vector<tf::Tensor> element) and returns the new state (a vector or one tensor); the
  // Tensor overload takes fn(tf::Tensor state, tf::Tensor element) for one-component elements.
  // The state must keep its number of components and their dtypes. Runs eagerly on the CPU.
  template <class F>
  Element reduce(Element initial_state, F fn) const {
    return reduce_impl(std::move(initial_state), detail::state_fn<F>("Dataset.reduce", fn));
  }
  template <class F>
  Tensor reduce(const Tensor& initial_state, F fn) const {
    return reduce_impl({initial_state}, detail::state_fn<F>("Dataset.reduce", fn))[0];
  }
  // TF's scan: fn(state, element) returns {new state, output element} (a std::pair of
  // vectors, or of tensors in the Tensor overload); the dataset yields the output elements.
  template <class F>
  Dataset scan(Element initial_state, F fn) const {
    return scan_impl(std::move(initial_state), detail::scan_fn<F>(fn));
  }
  template <class F>
  Dataset scan(const Tensor& initial_state, F fn) const {
    return scan_impl({initial_state}, detail::scan_fn<F>(fn));
  }
  // Sliding windows: window k holds elements k*shift, k*shift + stride, ... (size of them; shift
  // -1 means size), each component stacked along a new first axis, as a batch. Unlike TF, whose
  // window() yields a dataset of datasets that one then batches, this yields the batches:
  // TF's ds.window(n, shift, stride, drop).flat_map(lambda w: w.batch(n)) is
  // ds.window(n, shift, stride, drop) here. The last windows are shorter unless drop_remainder.
  Dataset window(int64_t size, int64_t shift = -1, int64_t stride = 1,
                 bool drop_remainder = false) const;
  // TF's rebatch(batch_size, drop_remainder): the batches' rows regrouped into batches of
  // batch_size (unbatch().batch(batch_size, drop_remainder) without the per-row copies).
  Dataset rebatch(int64_t batch_size, bool drop_remainder = false) const;
  // TF's group_by_window: key_func (taking the element as map's function does) gives each
  // element an integer key (an int64_t or an integer scalar tensor; TF asks for int64); the
  // elements of each key gather in a window, and when a key's window holds window_size (or
  // window_size_func(key)) elements, reduce_func(key, the window as a dataset) is called and
  // its dataset's elements are yielded. At the end of the input the partial windows are
  // reduced in increasing key order, as TF.
  using GroupReduceFn = std::function<Dataset(int64_t key, Dataset window)>;
  template <class K>
  Dataset group_by_window(K key_func, GroupReduceFn reduce_func, int64_t window_size) const {
    return group_by_window_impl(detail::key_fn<K>("Dataset.group_by_window", key_func),
                                std::move(reduce_func), nullptr, window_size);
  }
  template <class K>
  Dataset group_by_window(K key_func, GroupReduceFn reduce_func,
                          std::function<int64_t(int64_t key)> window_size_func) const {
    return group_by_window_impl(detail::key_fn<K>("Dataset.group_by_window", key_func),
                                std::move(reduce_func), std::move(window_size_func), 0);
  }
  // TF's bucket_by_sequence_length: element_length_func (as group_by_window's key_func) gives
  // each element a length; bucket i holds lengths in [bucket_boundaries[i - 1],
  // bucket_boundaries[i]) (n boundaries, n + 1 buckets) and is padded_batch'ed with
  // bucket_batch_sizes[i] (padded_shapes and padding_values as padded_batch's;
  // pad_to_bucket_boundary pads the unknown dimensions to bucket_boundaries[i] - 1; no_padding
  // batches without padding).
  template <class L>
  Dataset bucket_by_sequence_length(L element_length_func, std::vector<int64_t> bucket_boundaries,
                                    std::vector<int64_t> bucket_batch_sizes,
                                    std::vector<TensorShape> padded_shapes = {},
                                    std::vector<Tensor> padding_values = {},
                                    bool pad_to_bucket_boundary = false, bool no_padding = false,
                                    bool drop_remainder = false) const {
    return bucket_impl(detail::key_fn<L>("Dataset.bucket_by_sequence_length", element_length_func),
                       std::move(bucket_boundaries), std::move(bucket_batch_sizes),
                       std::move(padded_shapes), std::move(padding_values), pad_to_bucket_boundary,
                       no_padding, drop_remainder);
  }
  // TF's apply: fn(*this).
  template <class F>
  Dataset apply(F fn) const {
    return fn(*this);
  }
  // TF's choose_from_datasets: element i comes from datasets[choice_i], where choice_dataset
  // yields int64 scalars. An exhausted dataset ends the result when stop_on_empty_dataset (TF's
  // default), else its choices are skipped.
  static Dataset choose_from_datasets(std::vector<Dataset> datasets, const Dataset& choice_dataset,
                                      bool stop_on_empty_dataset = true);
  // TF's sample_from_datasets: each element comes from a dataset drawn at random with the given
  // weights (equal when empty; normalised); exhausted datasets drop out of the draw unless
  // stop_on_empty_dataset, which ends the result at the first one. The draws are reproducible
  // with a seed (or a global tf::random::set_seed) but are not TF's random stream.
  static Dataset sample_from_datasets(std::vector<Dataset> datasets,
                                      std::vector<double> weights = {},
                                      std::optional<int64_t> seed = std::nullopt,
                                      bool stop_on_empty_dataset = false);
  // int64 scalars start, start + step, ... forever, wrapping past the int64 range as TF's
  // (TF's Dataset.counter).
  static Dataset counter(int64_t start = 0, int64_t step = 1);

  // Number of elements, or INFINITE_CARDINALITY / UNKNOWN_CARDINALITY.
  int64_t cardinality() const;

  // ---- iteration ----
  Iterator begin() const;
  std::default_sentinel_t end() const { return {}; }
  Iterator make_iterator() const { return begin(); }

  const std::shared_ptr<const detail::DatasetBase>& node() const { return node_; }

 private:
  Dataset map_impl(detail::MapFn fn) const;
  Dataset filter_impl(detail::PredicateFn pred) const;
  Dataset flat_map_impl(detail::DatasetFn fn) const;
  Dataset interleave_impl(detail::DatasetFn fn, int64_t cycle_length, int64_t block_length) const;
  Dataset parallel_interleave_impl(detail::DatasetFn fn, int64_t cycle_length, int64_t block_length,
                                   int64_t num_parallel_calls, bool deterministic) const;
  Dataset parallel_map_impl(detail::MapFn fn, int64_t num_parallel_calls, bool deterministic) const;
  Dataset take_while_impl(detail::PredicateFn pred) const;
  void save_impl(const std::string& path, detail::KeyFn shard_func) const;
  Element reduce_impl(Element state, detail::StateFn fn) const;
  Dataset scan_impl(Element state, detail::ScanFn fn) const;
  Dataset group_by_window_impl(detail::KeyFn key_func, GroupReduceFn reduce_func,
                               std::function<int64_t(int64_t)> window_size_func,
                               int64_t window_size) const;
  Dataset bucket_impl(detail::KeyFn length_func, std::vector<int64_t> boundaries,
                      std::vector<int64_t> batch_sizes, std::vector<TensorShape> padded_shapes,
                      std::vector<Tensor> padding_values, bool pad_to_bucket_boundary,
                      bool no_padding, bool drop_remainder) const;
  std::shared_ptr<const detail::DatasetBase> node_;
};

namespace detail {
// dataset.shuffle with its (seed, seed2) pair given, as shuffle resolves it from the global and
// op seeds: for callers that must shuffle alike in several processes (fit under a
// MultiWorkerMirroredStrategy takes worker 0's pair).
Dataset shuffle_with_seeds(const Dataset& dataset, int64_t buffer_size, uint64_t seed,
                           uint64_t seed2, bool reshuffle_each_iteration = true);
}  // namespace detail

}  // namespace tapeflow::data
