// tf::data::Dataset: TF2's input pipeline (from_tensor_slices, from_generator, zip, shuffle,
// batch, padded_batch, map, filter, flat_map, interleave, repeat, take, skip, cache, prefetch,
// ...) and its iterator. A Dataset is an immutable value: each
// transformation returns a new Dataset that shares its input, and each iteration (begin() or
// make_iterator()) starts from the beginning with its own state.
// Threading: a Dataset may be shared and iterated from several threads at once (the only shared
// state, the shuffle epoch counter and the cache, is synchronised). One Iterator belongs to one
// thread. prefetch() runs its input on a background thread owned by the Iterator, which stops and
// joins it when destroyed; functions given to map()/filter() may therefore run on that thread.
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

#include "core/tensor.h"
#include "core/tensor_spec.h"

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
// A filter predicate's result: a bool, or a one-element bool tensor (TF asks for a bool
// scalar; another dtype is an InvalidArgumentError, not read as nonzero).
bool to_bool(const Tensor& t);
inline bool to_bool(bool b) {
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
      return detail::to_bool(detail::invoke_element_fn("Dataset.filter", pred, copy));
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
  // Prepends an int64 scalar counter start, start + 1, ... to each element.
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
  // Keeps the elements of the first complete iteration in memory; later iterations replay them.
  Dataset cache() const;
  // Produces up to buffer_size elements ahead on a background thread.
  Dataset prefetch(int64_t buffer_size = AUTOTUNE) const;

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
