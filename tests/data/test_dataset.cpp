// tf::data::Dataset: every transformation on small tensors with exact expected values,
// cardinalities as TF reports them, shuffle determinism, and prefetch's thread handling.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <limits>
#include <numeric>
#include <set>
#include <thread>

#include "autograd/tape.h"
#include "core/device.h"
#include "core/error.h"
#include "core/tensor.h"
#include "data/dataset.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/movement.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
using tf::data::Dataset;
using tf::data::Element;
using tf::testing::check_values;

namespace {

// 0, 1, ..., n-1 as int64 (a vector of n rows).
tf::Tensor iota(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  return tf::convert_to_tensor(v, {n});
}

// The first component of every element, as one flat list (elements of any shape).
std::vector<double> flat(const Dataset& ds) {
  std::vector<double> out;
  for (const Element& e : ds) {
    auto v = tf::detail::to_double_vector(e.at(0));
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

std::vector<double> range_values(int64_t n) {
  std::vector<double> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0.0);
  return v;
}

bool is_permutation_of_range(std::vector<double> v, int64_t n) {
  std::sort(v.begin(), v.end());
  return v == range_values(n);
}

}  // namespace

TEST_CASE("from_tensor_slices yields rows of every component", "[cpu][data]") {
  tf::Tensor x = tf::constant({{1.f, 2.f}, {3.f, 4.f}, {5.f, 6.f}});
  tf::Tensor y = tf::constant(std::vector<int32_t>{7, 8, 9}, {3});
  Dataset ds = Dataset::from_tensor_slices({x, y});
  CHECK(ds.cardinality() == 3);
  int i = 0;
  for (const Element& e : ds) {
    REQUIRE(e.size() == 2);
    CHECK(e[0].shape() == tf::TensorShape({2}));
    CHECK(e[0].dtype() == tf::float32);
    CHECK(e[0].device() == "/device:CPU:0");
    check_values(e[0], {2.0 * i + 1, 2.0 * i + 2});
    CHECK(e[1].shape() == tf::TensorShape{});
    CHECK(e[1].item<int32_t>() == 7 + i);
    ++i;
  }
  CHECK(i == 3);
  // Immutable: a second iteration starts again.
  CHECK(flat(ds) == std::vector<double>{1, 2, 3, 4, 5, 6});

  Dataset one = Dataset::from_tensor_slices(y);
  CHECK(one.cardinality() == 3);
  CHECK(flat(one) == std::vector<double>{7, 8, 9});
  CHECK(flat(Dataset::from_tensor_slices({y})) == std::vector<double>{7, 8, 9});
}

TEST_CASE("from_tensor_slices errors name the shapes", "[cpu][data]") {
  tf::Tensor a = tf::zeros({3, 2});
  tf::Tensor b = tf::zeros({4});
  TF_REQUIRE_THROWS_CONTAINING(Dataset::from_tensor_slices({a, b}), tf::InvalidArgumentError,
                               "component 0 has shape (3, 2) and component 1 has shape (4,)");
  TF_REQUIRE_THROWS_CONTAINING(Dataset::from_tensor_slices({a, b}), tf::InvalidArgumentError,
                               "[Dataset.from_tensor_slices]");
  TF_REQUIRE_THROWS_CONTAINING(Dataset::from_tensor_slices(tf::Tensor(1.0f)),
                               tf::InvalidArgumentError, "component 0 has shape ()");
  TF_REQUIRE_THROWS_CONTAINING(Dataset::from_tensor_slices(std::vector<tf::Tensor>{}),
                               tf::InvalidArgumentError, "at least one tensor");
  TF_REQUIRE_THROWS_CONTAINING(Dataset::from_tensor_slices({a, tf::Tensor()}),
                               tf::InvalidArgumentError, "component 1 is an undefined tensor");
}

TEST_CASE("an empty dataset and from_tensors", "[cpu][data]") {
  Dataset empty;
  CHECK(empty.cardinality() == 0);
  CHECK(empty.begin() == empty.end());
  Dataset zero_rows = Dataset::from_tensor_slices(tf::zeros({0, 3}));
  CHECK(zero_rows.cardinality() == 0);
  CHECK(flat(zero_rows).empty());
  CHECK(zero_rows.batch(2).cardinality() == 0);
  CHECK(flat(zero_rows.batch(2)).empty());

  Dataset single = Dataset::from_tensors({tf::constant({1.f, 2.f}), tf::Tensor(int64_t{5})});
  CHECK(single.cardinality() == 1);
  int n = 0;
  for (const Element& e : single) {
    check_values(e[0], {1, 2});
    CHECK(e[1].item<int64_t>() == 5);
    ++n;
  }
  CHECK(n == 1);
}

TEST_CASE("range counts like Python's range", "[cpu][data]") {
  CHECK(flat(Dataset::range(4)) == std::vector<double>{0, 1, 2, 3});
  CHECK(flat(Dataset::range(2, 9, 3)) == std::vector<double>{2, 5, 8});
  CHECK(flat(Dataset::range(5, 0, -2)) == std::vector<double>{5, 3, 1});
  CHECK(Dataset::range(2, 9, 3).cardinality() == 3);
  CHECK(Dataset::range(5, 0, -2).cardinality() == 3);
  CHECK(Dataset::range(3, 3).cardinality() == 0);
  CHECK(Dataset::range(4).begin()->at(0).dtype() == tf::int64);
  TF_REQUIRE_THROWS_CONTAINING(Dataset::range(0, 3, 0), tf::InvalidArgumentError,
                               "step must not be 0");
}

TEST_CASE("batch stacks rows, with and without drop_remainder", "[cpu][data]") {
  tf::DeviceScope cpu("/cpu:0");  // batches of a host source are views of it (checked below)
  tf::Tensor x = tf::reshape(tf::cast(iota(10), tf::float32), {5, 2});
  tf::Tensor y = iota(5);
  Dataset ds = Dataset::from_tensor_slices({x, y});

  Dataset b = ds.batch(2);
  CHECK(b.cardinality() == 3);
  std::vector<std::vector<double>> xs, ys;
  std::vector<tf::TensorShape> shapes;
  for (const Element& e : b) {
    shapes.push_back(e[0].shape());
    CHECK(e[0].dtype() == tf::float32);
    CHECK(e[1].dtype() == tf::int64);
    xs.push_back(tf::detail::to_double_vector(e[0]));
    ys.push_back(tf::detail::to_double_vector(e[1]));
  }
  CHECK(shapes == std::vector<tf::TensorShape>{{2, 2}, {2, 2}, {1, 2}});
  CHECK(xs == std::vector<std::vector<double>>{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9}});
  CHECK(ys == std::vector<std::vector<double>>{{0, 1}, {2, 3}, {4}});

  Dataset d = ds.batch(2, /*drop_remainder=*/true);
  CHECK(d.cardinality() == 2);
  CHECK(flat(d) == std::vector<double>{0, 1, 2, 3, 4, 5, 6, 7});
  CHECK(ds.batch(5, true).cardinality() == 1);
  CHECK(ds.batch(6, true).cardinality() == 0);
  CHECK(flat(ds.batch(6, true)).empty());
  CHECK(ds.batch(7).cardinality() == 1);
  // Batching a batched dataset adds another leading axis.
  for (const Element& e : ds.batch(2, true).batch(2)) {
    CHECK(e[0].shape() == tf::TensorShape({2, 2, 2}));
    CHECK(e[1].shape() == tf::TensorShape({2, 2}));
  }
  // Consecutive rows are a view of the source (no copy); shuffled rows are gathered.
  auto first_batch = [](const Dataset& d) { return *d.begin(); };
  CHECK(first_batch(ds.batch(2))[0].get()->storage == x.get()->storage);
  CHECK(first_batch(ds.shuffle(5, 1).batch(5))[0].get()->storage != x.get()->storage);
  TF_REQUIRE_THROWS_CONTAINING(ds.batch(0), tf::InvalidArgumentError,
                               "batch_size must be positive, got 0");
}

TEST_CASE("batch after map stacks computed elements and checks their shapes", "[cpu][data]") {
  Dataset ds = Dataset::range(5).map([](tf::Tensor v) {
    return tf::multiply(tf::cast(v, tf::float32), tf::constant({1.f, 10.f}));
  });
  std::vector<tf::TensorShape> shapes;
  for (const Element& e : ds.batch(2)) shapes.push_back(e[0].shape());
  CHECK(shapes == std::vector<tf::TensorShape>{{2, 2}, {2, 2}, {1, 2}});
  CHECK(flat(ds.batch(2)) == std::vector<double>{0, 0, 1, 10, 2, 20, 3, 30, 4, 40});

  Dataset ragged =
      Dataset::range(3).map([](tf::Tensor v) { return tf::zeros({v.item<int64_t>() + 1}); });
  TF_REQUIRE_THROWS_CONTAINING(flat(ragged.batch(3)), tf::InvalidArgumentError,
                               "the first element has shape (1,) and element 1 has shape (2,)");
}

TEST_CASE("shuffle is a seeded permutation that changes each epoch", "[cpu][data]") {
  const int64_t n = 50;
  Dataset src = Dataset::from_tensor_slices(iota(n));

  Dataset a = src.shuffle(n, 7);
  Dataset b = src.shuffle(n, 7);
  const auto a1 = flat(a), a2 = flat(a), b1 = flat(b), b2 = flat(b);
  CHECK(is_permutation_of_range(a1, n));
  CHECK(is_permutation_of_range(a2, n));
  CHECK(a1 != range_values(n));
  // Same seed, same sequence of epochs; each epoch reshuffles (TF's reshuffle_each_iteration).
  CHECK(a1 == b1);
  CHECK(a2 == b2);
  CHECK(a1 != a2);
  CHECK(flat(src.shuffle(n, 8)) != a1);
  CHECK(a.cardinality() == n);

  Dataset fixed = src.shuffle(n, 7, /*reshuffle_each_iteration=*/false);
  CHECK(flat(fixed) == flat(fixed));
  CHECK(is_permutation_of_range(flat(fixed), n));

  // Row indices and whole elements are shuffled by the same algorithm: same seed, same order.
  CHECK(flat(Dataset::range(n).shuffle(n, 7)) == a1);

  // A buffer of one keeps the order; a small buffer moves each element a bounded distance:
  // output k is one of the first k + buffer_size inputs.
  CHECK(flat(src.shuffle(1, 3)) == range_values(n));
  const auto small = flat(src.shuffle(4, 3));
  CHECK(is_permutation_of_range(small, n));
  for (size_t k = 0; k < small.size(); ++k) CHECK(small[k] < static_cast<double>(k + 4));

  TF_REQUIRE_THROWS_CONTAINING(src.shuffle(0), tf::InvalidArgumentError,
                               "buffer_size must be positive");
}

TEST_CASE("shuffle then batch gathers shuffled rows of every component", "[cpu][data]") {
  const int64_t n = 23;
  tf::Tensor x = tf::reshape(tf::cast(iota(n * 3), tf::float32), {n, 3});
  tf::Tensor y = iota(n);
  Dataset ds = Dataset::from_tensor_slices({x, y}).shuffle(100, 1).batch(4);
  CHECK(ds.cardinality() == 6);
  std::vector<double> labels;
  for (const Element& e : ds) {
    const auto xv = tf::detail::to_double_vector(e[0]);
    const auto yv = tf::detail::to_double_vector(e[1]);
    REQUIRE(xv.size() == 3 * yv.size());
    for (size_t i = 0; i < yv.size(); ++i) {
      CHECK(xv[3 * i] == 3 * yv[i]);  // rows stay paired across components
      CHECK(xv[3 * i + 2] == 3 * yv[i] + 2);
    }
    labels.insert(labels.end(), yv.begin(), yv.end());
  }
  CHECK(is_permutation_of_range(labels, n));
  CHECK(labels != range_values(n));
}

TEST_CASE("repeat and take, with TF's cardinalities", "[cpu][data]") {
  Dataset ds = Dataset::from_tensor_slices(iota(3));
  CHECK(flat(ds.repeat(2)) == std::vector<double>{0, 1, 2, 0, 1, 2});
  CHECK(ds.repeat(2).cardinality() == 6);
  CHECK(ds.repeat().cardinality() == tf::data::INFINITE_CARDINALITY);
  CHECK(ds.repeat(0).cardinality() == 0);
  CHECK(flat(ds.repeat(0)).empty());
  CHECK(flat(ds.repeat().take(7)) == std::vector<double>{0, 1, 2, 0, 1, 2, 0});
  CHECK(ds.repeat().take(7).cardinality() == 7);
  CHECK(ds.take(2).cardinality() == 2);
  CHECK(ds.take(10).cardinality() == 3);
  CHECK(ds.take(-1).cardinality() == 3);
  CHECK(flat(ds.take(10)) == std::vector<double>{0, 1, 2});
  CHECK(flat(ds.take(0)).empty());
  CHECK(ds.repeat().batch(2).cardinality() == tf::data::INFINITE_CARDINALITY);
  CHECK(flat(ds.repeat().batch(2).take(2)) == std::vector<double>{0, 1, 2, 0});
  // repeat() of an empty dataset is empty rather than an endless loop (as TF).
  CHECK(flat(ds.take(0).repeat()).empty());
  CHECK(ds.take(0).repeat().cardinality() == 0);
  // repeat(count) runs every epoch, also after one that yields nothing (TF's numbers: a filter
  // keeping all of epoch 1, none of epoch 2, all of epoch 3 gives 6 elements).
  auto epoch = std::make_shared<std::atomic<int>>(0);
  Dataset alternating = Dataset::range(3).filter([epoch](tf::Tensor v) {
    if (v.item<int64_t>() == 0) ++*epoch;
    return tf::constant(*epoch % 2 == 1);
  });
  CHECK(flat(alternating.repeat(3)) == std::vector<double>{0, 1, 2, 0, 1, 2});

  // shuffle().repeat(): every epoch is a permutation, and the epochs differ.
  const auto two = flat(Dataset::from_tensor_slices(iota(20)).shuffle(20, 5).repeat(2));
  REQUIRE(two.size() == 40);
  std::vector<double> e1(two.begin(), two.begin() + 20), e2(two.begin() + 20, two.end());
  CHECK(is_permutation_of_range(e1, 20));
  CHECK(is_permutation_of_range(e2, 20));
  CHECK(e1 != e2);
  TF_REQUIRE_THROWS_CONTAINING(ds.repeat(-2), tf::InvalidArgumentError, "got -2");
  TF_REQUIRE_THROWS_CONTAINING(ds.take(-3), tf::InvalidArgumentError, "got -3");
}

TEST_CASE("skip drops leading elements", "[cpu][data]") {
  Dataset ds = Dataset::from_tensor_slices(iota(5));
  CHECK(flat(ds.skip(2)) == std::vector<double>{2, 3, 4});
  CHECK(ds.skip(2).cardinality() == 3);
  CHECK(flat(ds.skip(9)).empty());
  CHECK(ds.skip(9).cardinality() == 0);
  CHECK(flat(ds.skip(-1)).empty());
  CHECK(flat(Dataset::range(5).skip(3)) == std::vector<double>{3, 4});
  CHECK(flat(ds.skip(1).batch(3)) == std::vector<double>{1, 2, 3, 4});
}

TEST_CASE("map takes elements or unpacked tensors", "[cpu][data]") {
  tf::Tensor x = tf::constant({1.f, 2.f, 3.f});
  tf::Tensor y = tf::constant(std::vector<int32_t>{4, 5, 6}, {3});
  Dataset ds = Dataset::from_tensor_slices({x, y});

  // fn(Element) -> Element
  Dataset swapped = ds.map([](const Element& e) { return Element{e[1], e[0]}; });
  CHECK(swapped.cardinality() == 3);
  CHECK(flat(swapped) == std::vector<double>{4, 5, 6});

  // fn(Tensor, Tensor) -> std::pair
  Dataset scaled =
      ds.map([](tf::Tensor a, tf::Tensor b) { return std::make_pair(tf::multiply(a, 2.0f), b); });
  std::vector<double> firsts, seconds;
  for (const Element& e : scaled) {
    firsts.push_back(e[0].item<double>());
    seconds.push_back(e[1].item<double>());
  }
  CHECK(firsts == std::vector<double>{2, 4, 6});
  CHECK(seconds == std::vector<double>{4, 5, 6});

  // fn(Tensor) -> Tensor on a one-component dataset, fn(Tensor, Tensor) -> Tensor, tuples.
  CHECK(flat(Dataset::from_tensor_slices(x).map([](const tf::Tensor& a) { return a + 1.0f; })) ==
        std::vector<double>{2, 3, 4});
  CHECK(flat(ds.map([](tf::Tensor a, tf::Tensor b) { return a * tf::cast(b, tf::float32); })) ==
        std::vector<double>{4, 10, 18});
  for (const Element& e : ds.map([](tf::Tensor a, tf::Tensor b) { return std::tuple(b, a, a); }))
    CHECK(e.size() == 3);

  TF_REQUIRE_THROWS_CONTAINING(
      flat(ds.map([](tf::Tensor a, tf::Tensor) {
        return Element{a, tf::Tensor()};
      })),
      tf::InvalidArgumentError,
      "[Dataset.map] the function returned an undefined tensor as component 1");
  TF_REQUIRE_THROWS_CONTAINING(flat(ds.map([](tf::Tensor a) { return a; })),
                               tf::InvalidArgumentError,
                               "[Dataset.map] the function takes 1 tensor argument(s) but the "
                               "dataset's elements have 2 component(s)");
}

TEST_CASE("map runs outside the caller's gradient tape", "[cpu][data]") {
  tf::Tensor w = tf::constant({2.f});
  Dataset ds = Dataset::from_tensor_slices(tf::constant({1.f, 2.f})).map([w](tf::Tensor v) {
    return tf::multiply(v, w);
  });
  tf::GradientTape tape;
  tape.watch(w);
  std::vector<double> got;
  tf::Tensor total = tf::zeros({1});
  for (const Element& e : ds) {
    got.push_back(e[0].numpy<double>()[0]);
    total = total + e[0];
  }
  CHECK(got == std::vector<double>{2, 4});
  // TF's dataset functions are not recorded: the loss does not depend on w through the pipeline.
  CHECK_FALSE(tape.gradient(total, w).defined());
}

TEST_CASE("filter keeps matching elements and makes the cardinality unknown", "[cpu][data]") {
  Dataset ds = Dataset::range(10);
  Dataset even = ds.filter([](tf::Tensor v) { return v.item<int64_t>() % 2 == 0; });
  CHECK(flat(even) == std::vector<double>{0, 2, 4, 6, 8});
  CHECK(even.cardinality() == tf::data::UNKNOWN_CARDINALITY);
  CHECK(even.batch(2).cardinality() == tf::data::UNKNOWN_CARDINALITY);
  CHECK(even.take(2).cardinality() == tf::data::UNKNOWN_CARDINALITY);
  CHECK(even.repeat().cardinality() == tf::data::INFINITE_CARDINALITY);
  CHECK(ds.map([](tf::Tensor v) { return v; }).cardinality() == 10);
  // A predicate returning a bool tensor.
  Dataset big = ds.filter([](tf::Tensor v) { return tf::greater(v, int64_t{6}); });
  CHECK(flat(big) == std::vector<double>{7, 8, 9});
  CHECK(flat(even.batch(2)) == std::vector<double>{0, 2, 4, 6, 8});
  // A tensor of another dtype is refused, as TF's "predicate must return a tf.bool scalar"
  // (it was read as nonzero).
  Dataset numbers = ds.filter([](tf::Tensor v) { return v; });
  TF_REQUIRE_THROWS_CONTAINING(flat(numbers), tf::InvalidArgumentError,
                               "one-element bool tensor, got a tensor of dtype int64 and shape ()");
}

TEST_CASE("cache replays the first complete iteration", "[cpu][data]") {
  auto calls = std::make_shared<std::atomic<int>>(0);
  Dataset ds = Dataset::range(4)
                   .map([calls](tf::Tensor v) {
                     ++*calls;
                     return v * int64_t{10};
                   })
                   .cache();
  CHECK(ds.cardinality() == 4);
  // An iteration stopped early does not fill the cache.
  CHECK(flat(ds.take(2)) == std::vector<double>{0, 10});
  CHECK(*calls == 2);
  CHECK(flat(ds) == std::vector<double>{0, 10, 20, 30});
  CHECK(*calls == 6);
  CHECK(flat(ds) == std::vector<double>{0, 10, 20, 30});
  CHECK(flat(ds.batch(3)) == std::vector<double>{0, 10, 20, 30});
  CHECK(*calls == 6);
  // A take() that reads every element (the input's known cardinality) completes the cache, as
  // TF's: the next iteration replays it (it ran the map again).
  auto calls2 = std::make_shared<std::atomic<int>>(0);
  Dataset counted = Dataset::range(4)
                        .map([calls2](tf::Tensor v) {
                          ++*calls2;
                          return v * int64_t{10};
                        })
                        .cache();
  CHECK(flat(counted.take(4)) == std::vector<double>{0, 10, 20, 30});
  CHECK(flat(counted) == std::vector<double>{0, 10, 20, 30});
  CHECK(*calls2 == 4);

  // shuffle().cache(): the first epoch's order is kept (as TF, which caches what it saw).
  Dataset frozen = Dataset::from_tensor_slices(iota(12)).shuffle(12, 3).cache();
  const auto first = flat(frozen);
  CHECK(is_permutation_of_range(first, 12));
  CHECK(flat(frozen) == first);
  CHECK(flat(frozen.batch(5)) == first);
  // cache().shuffle(): cached elements, a new order each epoch.
  Dataset reshuffled = Dataset::range(12).cache().shuffle(12, 3);
  const auto r1 = flat(reshuffled), r2 = flat(reshuffled);
  CHECK(is_permutation_of_range(r1, 12));
  CHECK(is_permutation_of_range(r2, 12));
  CHECK(r1 != r2);
}

TEST_CASE("prefetch yields the same sequence as without it", "[cpu][data]") {
  tf::Tensor x = tf::reshape(tf::cast(iota(40), tf::float32), {20, 2});
  Dataset base = Dataset::from_tensor_slices({x, iota(20)}).shuffle(20, 9, false).batch(3);
  for (int64_t buf : {int64_t{1}, int64_t{2}, int64_t{8}, tf::data::AUTOTUNE, int64_t{0}}) {
    Dataset p = base.prefetch(buf);
    CHECK(p.cardinality() == base.cardinality());
    CHECK(flat(p) == flat(base));
  }
  // Prefetch inside the pipeline, before a map and a second prefetch.
  Dataset nested = Dataset::range(30)
                       .prefetch(2)
                       .map([](tf::Tensor v) { return v + int64_t{1}; })
                       .prefetch(3)
                       .batch(4)
                       .prefetch(1);
  std::vector<double> want(30);
  std::iota(want.begin(), want.end(), 1.0);
  CHECK(flat(nested) == want);
  CHECK(nested.cardinality() == 8);
  TF_REQUIRE_THROWS_CONTAINING(base.prefetch(-2), tf::InvalidArgumentError, "got -2");
}

TEST_CASE("prefetch stops cleanly on an early break and on destruction", "[cpu][data]") {
  // An infinite, prefetched pipeline: breaking out must stop and join the producer.
  Dataset forever = Dataset::range(5).repeat().map([](tf::Tensor v) { return v; }).prefetch(4);
  for (int round = 0; round < 20; ++round) {
    int seen = 0;
    for (const Element& e : forever) {
      CHECK(e[0].item<int64_t>() == seen % 5);
      if (++seen == 7) break;
    }
    CHECK(seen == 7);
  }
  // An iterator destroyed before reading anything, and one whose dataset is gone.
  { auto it = forever.prefetch(1).begin(); }
  Dataset::Iterator it;
  {
    Dataset temp = Dataset::range(3).prefetch(2);
    it = temp.begin();
  }
  std::vector<int64_t> got;
  while (auto e = it.get_next()) got.push_back((*e)[0].item<int64_t>());
  CHECK(got == std::vector<int64_t>{0, 1, 2});
  CHECK_FALSE(it.get_next().has_value());
  CHECK(it == std::default_sentinel);
}

TEST_CASE("an exception in map reaches the consumer, through prefetch too", "[cpu][data]") {
  auto failing = [](tf::Tensor v) {
    if (v.item<int64_t>() == 3) throw tf::InvalidArgumentError("[my_map] cannot handle 3");
    return v;
  };
  for (bool prefetch : {false, true}) {
    Dataset ds = Dataset::range(6).map(failing);
    if (prefetch) ds = ds.prefetch(2);
    std::vector<int64_t> seen;
    auto run = [&] {
      for (const Element& e : ds) seen.push_back(e[0].item<int64_t>());
    };
    TF_REQUIRE_THROWS_CONTAINING(run(), tf::InvalidArgumentError, "[my_map] cannot handle 3");
    // The elements before the failure arrive first, in order.
    CHECK(seen == std::vector<int64_t>{0, 1, 2});
  }
  // After the error the iterator is at its end rather than in a broken state.
  Dataset::Iterator it = Dataset::range(6).map(failing).prefetch(1).begin();
  for (int i = 0; i < 3; ++i) CHECK(it.get_next().has_value());
  CHECK_THROWS_AS(it.get_next(), tf::InvalidArgumentError);
  CHECK_FALSE(it.get_next().has_value());
}

TEST_CASE("a dataset is shared safely between threads", "[cpu][data]") {
  Dataset ds = Dataset::from_tensor_slices(iota(100)).shuffle(100, 2).batch(7).prefetch(2);
  std::vector<std::vector<double>> results(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back([&, t] { results[t] = flat(ds); });
  for (auto& th : threads) th.join();
  for (const auto& r : results) CHECK(is_permutation_of_range(r, 100));
}

TEST_CASE("iterator dereference past the end is an error", "[cpu][data]") {
  Dataset::Iterator it = Dataset::range(1).begin();
  CHECK((*it)[0].item<int64_t>() == 0);
  ++it;
  CHECK(it == std::default_sentinel);
  CHECK_THROWS_AS(*it, tf::FailedPreconditionError);
}

TEST_CASE("elements are CPU tensors whatever the device scope", "[cpu][cuda][data]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    tf::Tensor x = tf::constant({{1.f, 2.f}, {3.f, 4.f}, {5.f, 6.f}});
    Dataset ds = Dataset::from_tensor_slices({x, tf::constant({7.f, 8.f, 9.f})})
                     .map([](tf::Tensor a, tf::Tensor b) {
                       // Ops in dataset functions run on the CPU, as TF's input pipelines do.
                       return std::make_pair(a + tf::ones({2}), b);
                     })
                     .batch(2);
    std::vector<double> got;
    for (const Element& e : ds) {
      CHECK(e[0].device() == "/device:CPU:0");
      CHECK(e[1].device() == "/device:CPU:0");
      auto v = tf::detail::to_double_vector(e[0]);
      got.insert(got.end(), v.begin(), v.end());
    }
    CHECK(got == std::vector<double>{2, 3, 4, 5, 6, 7});
    for (const Element& e : Dataset::from_tensor_slices(x).batch(3))
      CHECK(e[0].device() == "/device:CPU:0");
  }
}

TEST_CASE("shuffle follows the global seed and leaves random ops' streams alone", "[cpu][data]") {
  Dataset src = Dataset::from_tensor_slices(iota(30));
  tf::random::set_seed(5);
  const auto a = flat(src.shuffle(30));
  const tf::Tensor r1 = tf::random::uniform({4}, 0.0, 1.0, tf::float32, 11);
  tf::random::set_seed(5);
  const auto b = flat(src.shuffle(30));
  CHECK(a == b);  // the same program after set_seed: the same order
  CHECK(is_permutation_of_range(a, 30));
  // A seeded shuffle does not advance the stream of a random op with the same op seed.
  tf::random::set_seed(5);
  (void)flat(src.shuffle(30, 11));
  const tf::Tensor r2 = tf::random::uniform({4}, 0.0, 1.0, tf::float32, 11);
  CHECK(r1.numpy<float>() == r2.numpy<float>());
  tf::detail::clear_random_seed();
}

namespace {
std::vector<int64_t> range_values(const Dataset& ds, size_t limit = 16) {
  std::vector<int64_t> out;
  for (const auto& e : ds) {
    out.push_back(e[0].item<int64_t>());
    if (out.size() >= limit) break;
  }
  return out;
}
}  // namespace

TEST_CASE("Dataset::range and repeat near the int64 limits neither overflow nor loop",
          "[cpu][data]") {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  const Dataset edge = Dataset::range(kMax - 1, kMax, 2);
  CHECK(edge.cardinality() == 1);
  CHECK(range_values(edge) == std::vector<int64_t>{kMax - 1});
  const Dataset to_max = Dataset::range(kMax - 3, kMax, 2);
  CHECK(range_values(to_max) == std::vector<int64_t>{kMax - 3, kMax - 1});
  const Dataset down = Dataset::range(kMin + 1, kMin, -2);
  CHECK(range_values(down) == std::vector<int64_t>{kMin + 1});
  CHECK(Dataset::range(0, kMax, 2).cardinality() == kMax / 2 + 1);
  // 2^63 elements: more than int64 counts, so the cardinality saturates (docs/data.md).
  CHECK(Dataset::range(kMin, 0).cardinality() == kMax);
  const Dataset big_step = Dataset::range(5, -5, kMin);
  CHECK(big_step.cardinality() == 1);
  CHECK(range_values(big_step) == std::vector<int64_t>{5});
  CHECK(Dataset::range(4).repeat(kMax / 2).cardinality() == kMax);
  CHECK(Dataset::range(4).repeat(3).cardinality() == 12);
}

TEST_CASE("a moved-from Dataset iterator is at the end, not a crash", "[cpu][data]") {
  const Dataset ds = Dataset::range(3);
  auto it = ds.make_iterator();
  CHECK(it.get_next().has_value());
  auto moved = std::move(it);
  CHECK_FALSE(it.get_next().has_value());  // NOLINT(bugprone-use-after-move): the point
  CHECK(it == std::default_sentinel);
  TF_REQUIRE_THROWS_CONTAINING(*it, tf::FailedPreconditionError, "[Dataset.Iterator]");
  CHECK(moved.get_next()->at(0).item<int64_t>() == 1);
  Dataset::Iterator assigned;
  assigned = std::move(moved);
  CHECK_FALSE(moved.get_next().has_value());  // NOLINT(bugprone-use-after-move)
  CHECK(assigned.get_next()->at(0).item<int64_t>() == 2);
}
