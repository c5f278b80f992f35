// tf::data::Dataset's map with num_parallel_calls, take_while, reduce, scan, window, rebatch,
// group_by_window, bucket_by_sequence_length, choose_from_datasets, sample_from_datasets and
// counter: values, orders and cardinalities from TF 2.21 (tensorflow-cpu 2.21 on the same
// inputs), errors, threads.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"
#include "data/dataset.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/math.h"
#include "ops/movement.h"
#include "ops/random.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
using tf::data::Dataset;
using tf::data::Element;
using tf::data::INFINITE_CARDINALITY;
using tf::data::UNKNOWN_CARDINALITY;
using tf::testing::require_error;

namespace {

// Every element as a list of components, each flattened to doubles.
using Rows = std::vector<std::vector<std::vector<double>>>;
Rows all(const Dataset& ds) {
  Rows out;
  for (const Element& e : ds) {
    std::vector<std::vector<double>> comps;
    for (const tf::Tensor& t : e) comps.push_back(tf::detail::to_double_vector(t));
    out.push_back(std::move(comps));
  }
  return out;
}

// One-component elements, flattened.
std::vector<std::vector<double>> flat(const Dataset& ds) {
  std::vector<std::vector<double>> out;
  for (const Element& e : ds) {
    REQUIRE(e.size() == 1);
    out.push_back(tf::detail::to_double_vector(e[0]));
  }
  return out;
}

std::vector<double> firsts(const Dataset& ds) {
  std::vector<double> out;
  for (const Element& e : ds) {
    REQUIRE(e.at(0).rank() == 0);
    out.push_back(tf::detail::to_double_vector(e[0])[0]);
  }
  return out;
}

Dataset int64s(const std::vector<int64_t>& v) {
  return Dataset::from_tensor_slices(tf::convert_to_tensor(v, {static_cast<int64_t>(v.size())}));
}

// Variable-length int32 sequences, as TF's from_generator with TensorSpec([None], tf.int32).
Dataset sequences(std::vector<std::vector<int32_t>> seqs) {
  auto make = [seqs]() -> Dataset::Generator {
    return [seqs, i = size_t{0}]() mutable -> std::optional<Element> {
      if (i == seqs.size()) return std::nullopt;
      const auto& s = seqs[i++];
      return Element{tf::convert_to_tensor(s, {static_cast<int64_t>(s.size())})};
    };
  };
  return Dataset::from_generator(make, {tf::TensorSpec({tf::None}, tf::int32)});
}

int64_t length_of(const tf::Tensor& x) {
  return x.shape()[0];
}

}  // namespace

TEST_CASE("parallel map keeps the input order and matches map", "[cpu][data]") {
  // Elements take different times, so the workers finish out of order.
  auto slow_square = [](tf::Tensor x) {
    const int64_t v = x.item<int64_t>();
    std::this_thread::sleep_for(std::chrono::microseconds((v * 37) % 5 * 200));
    return tf::multiply(x, x);
  };
  const Dataset in = Dataset::range(60);
  const std::vector<double> want = firsts(in.map(slow_square));
  for (int64_t threads : {int64_t{1}, int64_t{3}, tf::data::AUTOTUNE}) {
    Dataset ds = in.map(slow_square, threads);
    CHECK(ds.cardinality() == 60);
    CHECK(firsts(ds) == want);
    CHECK(firsts(ds) == want);  // a second iteration starts over with its own threads
  }
  // deterministic = false: the same elements, in any order.
  std::vector<double> got = firsts(in.map(slow_square, 4, false));
  std::sort(got.begin(), got.end());
  CHECK(got == want);
  // Several components, after batch and before prefetch (threads of both).
  Dataset pairs = Dataset::zip({Dataset::range(10), Dataset::range(100, 110)})
                      .map(
                          [](tf::Tensor a, tf::Tensor b) {
                            return std::pair{b, tf::add(a, b)};
                          },
                          2)
                      .batch(4)
                      .prefetch(2);
  CHECK(all(pairs) == Rows{{{100, 101, 102, 103}, {100, 102, 104, 106}},
                           {{104, 105, 106, 107}, {108, 110, 112, 114}},
                           {{108, 109}, {116, 118}}});
}

TEST_CASE("parallel map rethrows a function's error at its element and stops cleanly",
          "[cpu][data]") {
  Dataset ds = Dataset::range(20).map(
      [](tf::Tensor x) {
        if (x.item<int64_t>() == 7) throw tf::InvalidArgumentError("element 7 is bad");
        return x;
      },
      3);
  auto it = ds.begin();
  std::vector<int64_t> seen;
  bool threw = false;
  while (true) {
    try {
      auto e = it.get_next();
      if (!e) break;
      seen.push_back((*e)[0].item<int64_t>());
    } catch (const tf::InvalidArgumentError& err) {
      CHECK(std::string(err.what()).find("element 7 is bad") != std::string::npos);
      CHECK(seen.size() == 7);  // the elements before it came first, in order
      threw = true;
    }
  }
  CHECK(threw);
  CHECK(seen.size() == 7);  // as every pipeline here: an error ends the iteration

  // Leaving an infinite parallel map early joins its threads (no hang, no leak).
  int n = 0;
  for (const Element& e : Dataset::counter().map([](tf::Tensor x) { return x; }, 4)) {
    (void)e;
    if (++n == 5) break;
  }
  CHECK(n == 5);
  require_error([] { (void)Dataset::range(3).map([](tf::Tensor x) { return x; }, 0); },
                {"Dataset.map", "num_parallel_calls must be positive or AUTOTUNE, got 0"});
  require_error(
      [] {
        auto ds = Dataset::range(3).map([](tf::Tensor) { return tf::Tensor(); }, 2);
        (void)all(ds);
      },
      {"Dataset.map", "undefined tensor"});
}

TEST_CASE("take_while reduce and scan follow TF", "[cpu][data]") {
  const Dataset r = Dataset::range(10);
  // TF 2.21: range(10).take_while(lambda x: x < 4) -> [0, 1, 2, 3], cardinality -2.
  Dataset tw = r.take_while([](tf::Tensor x) { return x.item<int64_t>() < 4; });
  CHECK(firsts(tw) == std::vector<double>{0, 1, 2, 3});
  CHECK(tw.cardinality() == UNKNOWN_CARDINALITY);
  CHECK(firsts(r.take_while([](tf::Tensor x) {
          return tf::less(x, tf::constant(int64_t{0}));
        })).empty());

  // TF 2.21: range(10).reduce(0, lambda s, x: s + x) -> 45.
  tf::Tensor sum =
      r.reduce(tf::constant(int64_t{0}), [](tf::Tensor s, tf::Tensor x) { return tf::add(s, x); });
  CHECK(sum.item<int64_t>() == 45);
  CHECK(Dataset()
            .reduce(tf::constant(int64_t{5}), [](tf::Tensor s, tf::Tensor) { return s; })
            .item<int64_t>() == 5);
  // A two-component state: (count, sum of squares).
  Element st = r.reduce(Element{tf::constant(int64_t{0}), tf::constant(0.0)}, [](Element s,
                                                                                 Element x) {
    tf::Tensor xf = tf::cast(x[0], tf::float64);
    return Element{tf::add(s[0], tf::constant(int64_t{1})), tf::add(s[1], tf::multiply(xf, xf))};
  });
  CHECK(st[0].item<int64_t>() == 10);
  CHECK(st[1].item<double>() == 285.0);
  require_error(
      [&] {
        (void)r.reduce(tf::constant(int64_t{0}),
                       [](tf::Tensor s, tf::Tensor) { return tf::cast(s, tf::float32); });
      },
      {"Dataset.reduce", "new state (float32) does not match the initial state (int64)"});
  require_error(
      [] {
        (void)Dataset::zip({Dataset::range(2), Dataset::range(2)})
            .reduce(tf::constant(int64_t{0}), [](tf::Tensor s, tf::Tensor) { return s; });
      },
      {"Dataset.reduce", "one-component element, got 2 components"});

  // TF 2.21: range(10).scan(0, lambda s, x: (s + x, s * 10)) -> [0, 0, 10, 30, 60, 100, 150,
  // 210, 280, 360], cardinality 10.
  Dataset sc = r.scan(tf::constant(int64_t{0}), [](tf::Tensor s, tf::Tensor x) {
    return std::pair{tf::add(s, x), tf::multiply(s, tf::constant(int64_t{10}))};
  });
  CHECK(sc.cardinality() == 10);
  const std::vector<double> want{0, 0, 10, 30, 60, 100, 150, 210, 280, 360};
  CHECK(firsts(sc) == want);
  CHECK(firsts(sc) == want);  // each iteration starts from the initial state
  require_error(
      [&] {
        auto bad = r.scan(tf::constant(int64_t{0}), [](tf::Tensor s, tf::Tensor x) {
          return std::pair{tf::cast(s, tf::int32), x};
        });
        (void)all(bad);
      },
      {"Dataset.scan", "does not match the initial state"});
}

TEST_CASE("window yields TF's windows batched", "[cpu][data]") {
  const Dataset r = Dataset::range(10);
  // TF 2.21: range(10).window(3, shift=2, stride=2) -> [0,2,4] [2,4,6] [4,6,8] [6,8] [8],
  // cardinality 5.
  Dataset w = r.window(3, 2, 2);
  CHECK(flat(w) == std::vector<std::vector<double>>{{0, 2, 4}, {2, 4, 6}, {4, 6, 8}, {6, 8}, {8}});
  CHECK(w.cardinality() == 5);
  // TF 2.21: window(3, shift=2, stride=1, drop_remainder=True) -> [0,1,2] [2,3,4] [4,5,6]
  // [6,7,8], cardinality 4; window(3, 2, 2, True) has cardinality 3.
  Dataset wd = r.window(3, 2, 1, true);
  CHECK(flat(wd) == std::vector<std::vector<double>>{{0, 1, 2}, {2, 3, 4}, {4, 5, 6}, {6, 7, 8}});
  CHECK(wd.cardinality() == 4);
  CHECK(r.window(3, 2, 2, true).cardinality() == 3);
  CHECK(flat(r.window(3, 2, 2, true)).size() == 3);
  // TF 2.21: window(4) -> cardinality 3, with drop_remainder 2; range(3).window(5): 1 and 0.
  CHECK(r.window(4).cardinality() == 3);
  CHECK(r.window(4, -1, 1, true).cardinality() == 2);
  CHECK(Dataset::range(3).window(5).cardinality() == 1);
  CHECK(Dataset::range(3).window(5, -1, 1, true).cardinality() == 0);
  CHECK(flat(Dataset::range(3).window(5, -1, 1, true)).empty());
  // TF 2.21: range(5).window(2, shift=3).flat_map(lambda w: w.batch(2)) -> [0, 1], [3, 4].
  CHECK(flat(Dataset::range(5).window(2, 3)) == std::vector<std::vector<double>>{{0, 1}, {3, 4}});
  // Every component is stacked; a window's first axis is its length.
  Dataset two = Dataset::zip({r, r.map([](tf::Tensor x) { return tf::cast(x, tf::float32); })});
  Element first = *two.window(4, 3).begin();
  CHECK(first[0].shape() == tf::TensorShape({4}));
  CHECK(first[1].dtype() == tf::float32);
  CHECK(all(two.window(4, 3)).back() == std::vector<std::vector<double>>{{9}, {9}});
  CHECK(r.repeat().window(3).cardinality() == INFINITE_CARDINALITY);
  require_error([&] { (void)r.window(0); }, {"Dataset.window", "size must be positive, got 0"});
  require_error([&] { (void)r.window(2, 0); }, {"Dataset.window", "shift must be positive"});
  require_error([&] { (void)r.window(2, 1, -1); }, {"Dataset.window", "stride must be positive"});
}

TEST_CASE("rebatch regroups the rows of batches", "[cpu][data]") {
  // TF 2.21: range(10).batch(4).rebatch(3) -> [0,1,2] [3,4,5] [6,7,8] [9], cardinality -2.
  Dataset rb = Dataset::range(10).batch(4).rebatch(3);
  CHECK(flat(rb) == std::vector<std::vector<double>>{{0, 1, 2}, {3, 4, 5}, {6, 7, 8}, {9}});
  CHECK(rb.cardinality() == UNKNOWN_CARDINALITY);
  CHECK(flat(Dataset::range(10).batch(4).rebatch(3, true)).size() == 3);
  // Rows of rank-2 components keep their shape; both components move together.
  tf::Tensor x = tf::reshape(tf::range(0.0, 24.0, 1.0), {6, 2, 2});
  Dataset xy = Dataset::from_tensor_slices({x, tf::range(int64_t{0}, int64_t{6})}).batch(4);
  Rows got = all(xy.rebatch(5));
  REQUIRE(got.size() == 2);
  CHECK(got[0][1] == std::vector<double>{0, 1, 2, 3, 4});
  CHECK(got[1][0] == std::vector<double>{20, 21, 22, 23});
  Element e = *xy.rebatch(5).begin();
  CHECK(e[0].shape() == tf::TensorShape({5, 2, 2}));
  require_error([] { (void)all(Dataset::range(3).rebatch(2)); },
                {"Dataset.rebatch", "component 0 is a scalar"});
  require_error([] { (void)Dataset::range(3).batch(2).rebatch(0); },
                {"Dataset.rebatch", "batch_size must be positive, got 0"});
}

TEST_CASE("group_by_window groups by key and flushes in key order", "[cpu][data]") {
  auto batch10 = [](int64_t, Dataset d) { return d.batch(10); };
  // TF 2.21: range(10).group_by_window(lambda x: x % 3, lambda k, d: d.batch(10), 2) ->
  // [0,3] [1,4] [2,5] [6,9] [7] [8].
  auto mod3 = [](tf::Tensor x) { return x.item<int64_t>() % 3; };
  Dataset g = Dataset::range(10).group_by_window(mod3, batch10, 2);
  CHECK(flat(g) == std::vector<std::vector<double>>{{0, 3}, {1, 4}, {2, 5}, {6, 9}, {7}, {8}});
  CHECK(g.cardinality() == UNKNOWN_CARDINALITY);
  // TF 2.21: [5, 2, 7, 1, 9, 4] with window 5 -> [9] [7, 1, 4] [5, 2] (keys 0, 1, 2).
  Dataset g2 = int64s({5, 2, 7, 1, 9, 4}).group_by_window(mod3, batch10, 5);
  CHECK(flat(g2) == std::vector<std::vector<double>>{{9}, {7, 1, 4}, {5, 2}});
  // A key given as an int64 tensor, the key passed to reduce_func, window_size_func.
  std::vector<int64_t> keys;
  Dataset g3 = Dataset::range(7).group_by_window(
      [](tf::Tensor x) { return tf::floormod(x, tf::constant(int64_t{2})); },
      [&keys](int64_t key, Dataset d) {
        keys.push_back(key);
        return d.batch(10);
      },
      std::function<int64_t(int64_t)>([](int64_t key) { return key == 0 ? 3 : 2; }));
  // Keys 0 1 0 1 0 1 0: [1, 3] fills key 1's window of 2, [0, 2, 4] key 0's window of 3; at
  // the end [6] (key 0) comes before [5] (key 1).
  CHECK(flat(g3) == std::vector<std::vector<double>>{{1, 3}, {0, 2, 4}, {6}, {5}});
  CHECK(keys == std::vector<int64_t>{1, 0, 0, 1});
  require_error(
      [] {
        (void)Dataset::range(3).group_by_window([](tf::Tensor) { return 0; },
                                                [](int64_t, Dataset d) { return d; }, 0);
      },
      {"Dataset.group_by_window", "window_size must be positive, got 0"});
  require_error(
      [] {
        auto ds =
            Dataset::range(3).group_by_window([](tf::Tensor x) { return tf::cast(x, tf::float32); },
                                              [](int64_t, Dataset d) { return d; }, 2);
        (void)all(ds);
      },
      {"Dataset.group_by_window", "integer scalar", "float32"});
}

TEST_CASE("bucket_by_sequence_length batches sequences of similar lengths", "[cpu][data]") {
  const std::vector<std::vector<int32_t>> seqs{
      {1}, {1, 2, 3}, {1, 2}, {1, 2, 3, 4, 5}, {1, 2, 3, 4}, {7, 7, 7, 7, 7, 7, 7}, {1}};
  Dataset d = sequences(seqs);
  auto len = [](tf::Tensor x) { return length_of(x); };
  // TF 2.21: d.bucket_by_sequence_length(lambda x: tf.shape(x)[0], [3, 5], [2, 2, 2]) ->
  // [[1,0],[1,2]], [[1,2,3,0],[1,2,3,4]], [[1,2,3,4,5,0,0],[7,7,7,7,7,7,7]], [[1]].
  Dataset b = d.bucket_by_sequence_length(len, {3, 5}, {2, 2, 2});
  CHECK(flat(b) == std::vector<std::vector<double>>{{1, 0, 1, 2},
                                                    {1, 2, 3, 0, 1, 2, 3, 4},
                                                    {1, 2, 3, 4, 5, 0, 0, 7, 7, 7, 7, 7, 7, 7},
                                                    {1}});
  auto it = b.begin();
  ++it;
  ++it;
  Element third = *it;
  CHECK(third[0].shape() == tf::TensorShape({2, 7}));
  CHECK(third[0].dtype() == tf::int32);
  // TF 2.21: the same with drop_remainder=True -> the first three batches.
  CHECK(flat(d.bucket_by_sequence_length(len, {3, 5}, {2, 2, 2}, {}, {}, false, false, true))
            .size() == 3);
  // TF 2.21: d.take(5) with boundaries [3, 6] and pad_to_bucket_boundary=True ->
  // [[1,0],[1,2]], [[1,2,3,0,0],[1,2,3,4,5]], [[1,2,3,4,0]] (here with padded_shapes [None]).
  Dataset bp = d.take(5).bucket_by_sequence_length(len, {3, 6}, {2, 2, 2}, {{tf::None}}, {}, true);
  Rows got = all(bp);
  CHECK(flat(bp) == std::vector<std::vector<double>>{
                        {1, 0, 1, 2}, {1, 2, 3, 0, 0, 1, 2, 3, 4, 5}, {1, 2, 3, 4, 0}});
  // no_padding batches equal lengths only; a padding value.
  Dataset same = sequences({{1, 1}, {2, 2}, {3}, {4}});
  CHECK(flat(same.bucket_by_sequence_length(len, {2}, {2, 2}, {}, {}, false, true)) ==
        std::vector<std::vector<double>>{{1, 1, 2, 2}, {3, 4}});
  CHECK(flat(sequences({{1}, {2, 2}})
                 .bucket_by_sequence_length(len, {5}, {2, 2}, {{tf::None}},
                                            {tf::constant(int32_t{-1})})) ==
        std::vector<std::vector<double>>{{1, -1, 2, 2}});
  require_error(
      [&] {
        (void)d.bucket_by_sequence_length(len, {3, 5}, {2, 2});
      },
      {"Dataset.bucket_by_sequence_length", "2 boundaries make 3 buckets", "2 bucket_batch_sizes"});
  require_error(
      [&] {
        (void)d.bucket_by_sequence_length(len, {5, 3}, {2, 2, 2});
      },
      {"Dataset.bucket_by_sequence_length", "sorted in increasing order"});
  require_error(
      [&] {
        (void)d.bucket_by_sequence_length(len, {3, 5}, {2, 2, 2}, {}, {}, true);
      },
      {"Dataset.bucket_by_sequence_length", "pad_to_bucket_boundary needs padded_shapes"});
  require_error(
      [&] {
        (void)all(d.bucket_by_sequence_length(len, {3, 5}, {2, 2, 2}, {{tf::None}}, {}, true));
      },
      {"Dataset.bucket_by_sequence_length", "below the largest boundary 5"});
}

TEST_CASE("choose_from_datasets and sample_from_datasets select among datasets", "[cpu][data]") {
  const Dataset a = Dataset::range(3), b = Dataset::range(10, 12), c = Dataset::range(20, 30);
  // TF 2.21: choices [0, 1, 2, 1, 0, 0] over range(3), range(10, 12), range(20, 30) ->
  // [0, 10, 20, 11, 1, 2], cardinality -2.
  Dataset ch = Dataset::choose_from_datasets({a, b, c}, int64s({0, 1, 2, 1, 0, 0}));
  CHECK(firsts(ch) == std::vector<double>{0, 10, 20, 11, 1, 2});
  CHECK(ch.cardinality() == UNKNOWN_CARDINALITY);
  // TF 2.21: choices [1, 1, 1, 0, 1, 0] over range(3), range(10, 12): [10, 11] (stop on the
  // empty dataset), [10, 11, 0, 1] without stop_on_empty_dataset.
  Dataset choices = int64s({1, 1, 1, 0, 1, 0});
  CHECK(firsts(Dataset::choose_from_datasets({a, b}, choices)) == std::vector<double>{10, 11});
  CHECK(firsts(Dataset::choose_from_datasets({a, b}, choices, false)) ==
        std::vector<double>{10, 11, 0, 1});
  require_error(
      [&] {
        (void)all(Dataset::choose_from_datasets({a, b}, int64s({0, 5})));
      },
      {"Dataset.choose_from_datasets", "selector index out of range: 5"});
  require_error(
      [&] {
        (void)all(Dataset::choose_from_datasets(
            {a, b}, Dataset::range(2).map([](tf::Tensor x) { return tf::cast(x, tf::int32); })));
      },
      {"Dataset.choose_from_datasets", "int64 scalars", "(int32)"});
  require_error(
      [&] {
        auto f = a.map([](tf::Tensor x) { return tf::cast(x, tf::float32); });
        (void)all(Dataset::choose_from_datasets({a, f}, int64s({0, 1})));
      },
      {"Dataset.choose_from_datasets", "(int64) and (float32)"});

  // sample_from_datasets: every element once (TF 2.21 gives these 5 in some order), the same
  // draws for the same seed, each iteration alike.
  Dataset s = Dataset::sample_from_datasets({a, b}, {0.5, 0.5}, 1);
  std::vector<double> got = firsts(s);
  CHECK(firsts(s) == got);
  std::vector<double> sorted = got;
  std::sort(sorted.begin(), sorted.end());
  CHECK(sorted == std::vector<double>{0, 1, 2, 10, 11});
  CHECK(s.cardinality() == UNKNOWN_CARDINALITY);
  // With stop_on_empty_dataset, the result ends when a drawn dataset is exhausted.
  // Until then it draws as without it: a prefix of the same seed's draws.
  std::vector<double> stopped = firsts(Dataset::sample_from_datasets({a, b}, {}, 1, true));
  REQUIRE(stopped.size() <= got.size());
  CHECK(std::equal(stopped.begin(), stopped.end(), got.begin()));
  // Weights 3:1 over two infinite datasets: about 75% from the first.
  Dataset ones = Dataset::counter(0, 0), twos = Dataset::counter(1, 0);
  int from_first = 0;
  for (double v : firsts(Dataset::sample_from_datasets({ones, twos}, {3, 1}, 7).take(4000)))
    from_first += v == 0;
  CHECK(from_first > 2850);
  CHECK(from_first < 3150);
  // With a global seed and no op seed, TF's op-seed counter makes two datasets draw differently,
  // and set_seed repeats both.
  tf::random::set_seed(5);
  const std::vector<double> s1 =
      firsts(Dataset::sample_from_datasets({ones, twos}, {1, 1}).take(40));
  const std::vector<double> s2 =
      firsts(Dataset::sample_from_datasets({ones, twos}, {1, 1}).take(40));
  CHECK(s1 != s2);
  tf::random::set_seed(5);
  CHECK(firsts(Dataset::sample_from_datasets({ones, twos}, {1, 1}).take(40)) == s1);
  tf::detail::clear_random_seed();
  // A zero weight is never drawn.
  CHECK(firsts(Dataset::sample_from_datasets({ones, twos}, {0, 1}, 7).take(50)) ==
        std::vector<double>(50, 1));
  require_error(
      [&] {
        (void)Dataset::sample_from_datasets({a, b}, {1});
      },
      {"Dataset.sample_from_datasets", "got 1 weights for 2 datasets"});
  require_error(
      [&] {
        (void)Dataset::sample_from_datasets({a, b}, {0, 0});
      },
      {"Dataset.sample_from_datasets", "sum to zero"});
  require_error(
      [&] {
        (void)Dataset::sample_from_datasets({a, b}, {1, -1});
      },
      {"Dataset.sample_from_datasets", "finite and non-negative, got -1"});

  // counter and apply.
  Dataset ctr = Dataset::counter(5, -2);
  CHECK(ctr.cardinality() == INFINITE_CARDINALITY);
  CHECK(firsts(ctr.take(4)) == std::vector<double>{5, 3, 1, -1});
  CHECK(firsts(Dataset::range(6).apply([](const Dataset& d) { return d.skip(2).take(2); })) ==
        std::vector<double>{2, 3});
}

TEST_CASE("parallel map runs tensor ops on several threads at once", "[cpu][data]") {
  // The map function does real work with ops on its thread; the results equal the sequential
  // map's, and the workers overlap (at least two calls were in flight together).
  std::atomic<int> in_flight{0}, most{0};
  auto fn = [&](tf::Tensor x) {
    const int now = ++in_flight;
    int m = most.load();
    while (now > m && !most.compare_exchange_weak(m, now)) {
    }
    tf::Tensor v = tf::cast(x, tf::float64);
    tf::Tensor y = tf::add(tf::multiply(v, v), tf::sin(v));
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    --in_flight;
    return y;
  };
  const Dataset in = Dataset::range(40);
  std::vector<double> seq = firsts(in.map(fn));
  most = 0;
  std::vector<double> par = firsts(in.map(fn, 4));
  CHECK(par == seq);
  CHECK(most.load() >= 2);
}

TEST_CASE("parallel map of a cheap function takes runs of elements and keeps every rule",
          "[cpu][data]") {
  // A function of a few microseconds makes the workers take runs of consecutive elements
  // (data/dataset_extra.cpp); order, completeness, errors and the input's end stay as for one
  // element at a time.
  auto cheap = [](tf::Tensor x) { return tf::add(tf::multiply(x, x), x); };
  const Dataset in = Dataset::range(3000);
  const std::vector<double> want = firsts(in.map(cheap));
  for (int64_t threads : {int64_t{1}, int64_t{2}, int64_t{4}}) {
    CHECK(firsts(in.map(cheap, threads)) == want);
    std::vector<double> any = firsts(in.map(cheap, threads, false));
    std::sort(any.begin(), any.end());
    CHECK(any == want);
    // A function that turns slow after cheap elements: runs shrink back, values stay.
    auto mixed = [](tf::Tensor x) {
      if (x.item<int64_t>() >= 2960) std::this_thread::sleep_for(std::chrono::microseconds(300));
      return tf::add(tf::multiply(x, x), x);
    };
    CHECK(firsts(in.map(mixed, threads)) == want);
    // The function's error at element 2001 arrives after exactly the 2001 elements before it.
    Dataset bad = in.map(
        [](tf::Tensor x) {
          if (x.item<int64_t>() == 2001) throw tf::InvalidArgumentError("element 2001 is bad");
          return x;
        },
        threads);
    int64_t seen = 0;
    TF_REQUIRE_THROWS_CONTAINING(
        [&] {
          for (const Element& e : bad) {
            CHECK(e[0].item<int64_t>() == seen);
            ++seen;
          }
        }(),
        tf::InvalidArgumentError, "element 2001 is bad");
    CHECK(seen == 2001);
  }
  // The input's error (a generator failing at its 1500th element) ends a run early and
  // arrives in its place.
  auto make = []() -> Dataset::Generator {
    return [i = int64_t{0}]() mutable -> std::optional<Element> {
      if (i == 1500) throw tf::FailedPreconditionError("the generator broke");
      return Element{tf::constant(i++)};
    };
  };
  Dataset broken =
      Dataset::from_generator(make, {tf::TensorSpec({}, tf::int64)}).map(cheap, 2);
  int64_t seen = 0;
  TF_REQUIRE_THROWS_CONTAINING(
      [&] {
        for (const Element& e : broken) {
          CHECK(e[0].item<int64_t>() == seen * seen + seen);
          ++seen;
        }
      }(),
      tf::FailedPreconditionError, "the generator broke");
  CHECK(seen == 1500);
}
