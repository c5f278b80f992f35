// tf::data::Dataset's zip, concatenate, enumerate, unbatch, shard, from_generator,
// padded_batch, flat_map and interleave: values, orders and cardinalities from TF 2.21
// (tensorflow-cpu 2.21, run on the same inputs), errors, re-iteration, prefetch and fit().
#include <atomic>
#include <functional>
#include <numeric>
#include <optional>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"
#include "data/dataset.h"
#include "keras/model.h"
#include "ops/factory.h"
#include "ops/random.h"
#include "support/testing.h"

namespace tf = tapeflow;
namespace K = tf::keras;
using tf::data::Dataset;
using tf::data::Element;
using tf::data::INFINITE_CARDINALITY;
using tf::data::UNKNOWN_CARDINALITY;

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

// The first component of each element, which must be a scalar.
std::vector<double> firsts(const Dataset& ds) {
  std::vector<double> out;
  for (const Element& e : ds) {
    REQUIRE(e.at(0).rank() == 0);
    out.push_back(tf::detail::to_double_vector(e[0])[0]);
  }
  return out;
}

Dataset unknown(const Dataset& ds) {
  return ds.filter([](const Element&) { return true; });
}

// A function of x: x copies of the int64 scalar x (TF: tf.fill([x], x)).
tf::Tensor fill_x(const tf::Tensor& x) {
  const int64_t n = x.item<int64_t>();
  return tf::convert_to_tensor(std::vector<int64_t>(static_cast<size_t>(n), n), {n});
}

}  // namespace

TEST_CASE("zip concatenates components and ends with the shortest dataset", "[cpu][data]") {
  // TF 2.21: Dataset.zip((range(5), range(10, 13))) -> (0, 10), (1, 11), (2, 12); cardinality 3.
  Dataset z = Dataset::zip({Dataset::range(5), Dataset::range(10, 13)});
  CHECK(z.cardinality() == 3);
  CHECK(all(z) == Rows{{{0}, {10}}, {{1}, {11}}, {{2}, {12}}});
  CHECK(all(z) == all(z));  // re-iteration starts again
  // Components are flattened: zip({a, b}, c) yields {a, b, c} (TF nests them: ((a, b), c)).
  Dataset ab = Dataset::from_tensor_slices(
      {tf::constant({1.f, 2.f}), tf::constant(std::vector<int32_t>{3, 4}, {2})});
  Element e = *Dataset::zip({ab, Dataset::range(7, 9)}).begin();
  REQUIRE(e.size() == 3);
  CHECK(e[0].dtype() == tf::float32);
  CHECK(e[1].dtype() == tf::int32);
  CHECK(e[2].item<int64_t>() == 7);
  // TF 2.21's cardinalities: min of the finite ones; infinite only if all are; unknown wins.
  const Dataset inf = Dataset::range(3).repeat();
  CHECK(Dataset::zip({inf, Dataset::range(3)}).cardinality() == 3);
  CHECK(Dataset::zip({inf, inf}).cardinality() == INFINITE_CARDINALITY);
  CHECK(Dataset::zip({unknown(Dataset::range(3)), Dataset::range(3)}).cardinality() ==
        UNKNOWN_CARDINALITY);
  CHECK(Dataset::zip({unknown(Dataset::range(3)), inf}).cardinality() == UNKNOWN_CARDINALITY);
  CHECK(Dataset::zip({unknown(Dataset::range(3)), Dataset::range(0)}).cardinality() ==
        UNKNOWN_CARDINALITY);
  CHECK(firsts(Dataset::zip({inf, Dataset::range(4)}).take(10)) == std::vector<double>{0, 1, 2, 0});
  tf::testing::require_error([] { Dataset::zip({}); }, {"at least one dataset"});
}

TEST_CASE("concatenate chains datasets and checks their element structure", "[cpu][data]") {
  // TF 2.21: range(3).concatenate(range(10, 12)) -> 0 1 2 10 11, cardinality 5.
  Dataset c = Dataset::range(3).concatenate(Dataset::range(10, 12));
  CHECK(c.cardinality() == 5);
  CHECK(firsts(c) == std::vector<double>{0, 1, 2, 10, 11});
  CHECK(firsts(c) == firsts(c));
  // Shapes may differ (TF 2.21: range(5).batch(2) + range(3).batch(3) -> [0,1] [2,3] [4] [0,1,2]).
  CHECK(all(Dataset::range(5).batch(2).concatenate(Dataset::range(3).batch(3))) ==
        Rows{{{0, 1}}, {{2, 3}}, {{4}}, {{0, 1, 2}}});
  // TF 2.21's cardinalities: infinite if either is, else unknown if either is.
  const Dataset inf = Dataset::range(3).repeat();
  const Dataset unk = unknown(Dataset::range(3));
  CHECK(inf.concatenate(unk).cardinality() == INFINITE_CARDINALITY);
  CHECK(unk.concatenate(inf).cardinality() == INFINITE_CARDINALITY);
  CHECK(Dataset::range(3).concatenate(inf).cardinality() == INFINITE_CARDINALITY);
  CHECK(Dataset::range(3).concatenate(unk).cardinality() == UNKNOWN_CARDINALITY);
  CHECK(Dataset().concatenate(Dataset::range(2)).cardinality() == 2);
  // TF raises TypeError "Incompatible dataset elements" when concatenate is called; here the
  // first element of the other dataset that differs raises while iterating.
  tf::testing::require_error(
      [] { all(Dataset::range(2).concatenate(Dataset::from_tensor_slices(tf::constant({1.f})))); },
      {"element 0 of the second has 1 component(s) of dtypes (float32)"});
  tf::testing::require_error(
      [] {
        all(Dataset::zip({Dataset::range(2), Dataset::range(2)}).concatenate(Dataset::range(2)));
      },
      {"the first dataset's have 2 component(s) of dtypes (int64, int64)"});
}

TEST_CASE("enumerate prepends an int64 counter", "[cpu][data]") {
  // TF 2.21: from_tensor_slices([7., 8.]).enumerate(5) -> (5, 7.0), (6, 8.0).
  Dataset ds = Dataset::from_tensor_slices(tf::constant({7.f, 8.f})).enumerate(5);
  CHECK(all(ds) == Rows{{{5}, {7}}, {{6}, {8}}});
  CHECK(all(ds) == all(ds));
  Element e = *ds.begin();
  CHECK(e[0].dtype() == tf::int64);
  CHECK(e[0].shape() == tf::TensorShape{});
  CHECK(Dataset::range(3).enumerate().cardinality() == 3);
  CHECK(Dataset::range(3).repeat().enumerate().cardinality() == INFINITE_CARDINALITY);
  CHECK(unknown(Dataset::range(3)).enumerate().cardinality() == UNKNOWN_CARDINALITY);
  // Zipped elements: TF's (0, (a, b)) is {0, a, b} here.
  CHECK(all(Dataset::zip({Dataset::range(2), Dataset::range(2)}).enumerate()) ==
        Rows{{{0}, {0}, {0}}, {{1}, {1}, {1}}});
}

TEST_CASE("unbatch splits elements into rows", "[cpu][data]") {
  // TF 2.21: range(7).batch(3).unbatch() -> 0..6, cardinality -2 (6 for drop_remainder, which
  // tapeflow reports as unknown: it has no static shapes).
  Dataset ds = Dataset::range(7).batch(3).unbatch();
  CHECK(firsts(ds) == std::vector<double>{0, 1, 2, 3, 4, 5, 6});
  CHECK(ds.cardinality() == UNKNOWN_CARDINALITY);
  CHECK(Dataset::range(3).batch(2).repeat().unbatch().cardinality() == INFINITE_CARDINALITY);
  CHECK(Dataset::range(0).batch(2).unbatch().cardinality() == UNKNOWN_CARDINALITY);
  // Two components (TF 2.21: ([0, 1], 0), ([2, 3], 1), ([4, 5], 2)).
  tf::Tensor x = tf::constant(std::vector<int64_t>{0, 1, 2, 3, 4, 5}, {3, 2});
  tf::Tensor y = tf::constant(std::vector<int64_t>{0, 1, 2}, {3});
  CHECK(all(Dataset::from_tensor_slices({x, y}).batch(2).unbatch()) ==
        Rows{{{0, 1}, {0}}, {{2, 3}, {1}}, {{4, 5}, {2}}});
  // A zero-row element yields nothing.
  CHECK(all(Dataset::from_tensors({tf::zeros({0, 2})}).unbatch()).empty());
  tf::testing::require_error([] { all(Dataset::range(3).unbatch()); },
                             {"component 0 of element 0 has shape ()"});
  tf::testing::require_error(
      [] {
        all(Dataset::from_tensors({tf::zeros({2}), tf::zeros({3})}).unbatch());
      },
      {"component 0 has shape (2,) and component 1 has shape (3,)"});
}

TEST_CASE("shard keeps every num_shards-th element", "[cpu][data]") {
  // TF 2.21: range(10).shard(3, 1) -> 1 4 7; cardinalities 3, 4 (index 0), 3 (index 2).
  CHECK(firsts(Dataset::range(10).shard(3, 1)) == std::vector<double>{1, 4, 7});
  CHECK(firsts(Dataset::range(10).shard(4, 3)) == std::vector<double>{3, 7});
  CHECK(Dataset::range(10).shard(3, 1).cardinality() == 3);
  CHECK(Dataset::range(10).shard(3, 0).cardinality() == 4);
  CHECK(Dataset::range(10).shard(3, 2).cardinality() == 3);
  CHECK(Dataset::range(3).repeat().shard(2, 0).cardinality() == INFINITE_CARDINALITY);
  CHECK(unknown(Dataset::range(3)).shard(2, 0).cardinality() == UNKNOWN_CARDINALITY);
  // Over from_tensor_slices the shards partition the rows, also shuffled alike, then batched.
  tf::Tensor x = tf::constant(std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7}, {8});
  const Dataset s = Dataset::from_tensor_slices(x).shuffle(8, 3, false);
  std::vector<double> merged;
  for (int64_t i = 0; i < 2; ++i)
    for (const Element& b : s.shard(2, i).batch(3)) {
      auto v = tf::detail::to_double_vector(b[0]);
      merged.insert(merged.end(), v.begin(), v.end());
    }
  std::sort(merged.begin(), merged.end());
  CHECK(merged == std::vector<double>{0, 1, 2, 3, 4, 5, 6, 7});
  tf::testing::require_error([] { Dataset::range(3).shard(0, 0); },
                             {"num_shards must be positive"});
  tf::testing::require_error([] { Dataset::range(3).shard(2, 2); },
                             {"index must be between 0 and 1"});
  tf::testing::require_error([] { Dataset::range(3).shard(2, -1); },
                             {"index must be between 0 and 1"});
}

TEST_CASE("from_generator calls a fresh generator per iteration and checks its signature",
          "[cpu][data]") {
  // TF 2.21: yields (arange(i), float32(i)) for i < 3 with signature ([None] int64, [] float32)
  // -> ([], 0.0), ([0], 1.0), ([0, 1], 2.0); cardinality -2.
  auto calls = std::make_shared<std::atomic<int>>(0);
  auto make = [calls]() -> Dataset::Generator {
    ++*calls;
    return [i = int64_t{0}]() mutable -> std::optional<Element> {
      if (i == 3) return std::nullopt;
      std::vector<int64_t> v(static_cast<size_t>(i));
      std::iota(v.begin(), v.end(), 0);
      Element e{tf::convert_to_tensor(v, {i}), tf::constant(static_cast<float>(i))};
      ++i;
      return e;
    };
  };
  Dataset ds = Dataset::from_generator(
      make, {tf::TensorSpec({tf::None}, tf::int64), tf::TensorSpec({}, tf::float32)});
  CHECK(ds.cardinality() == UNKNOWN_CARDINALITY);
  CHECK(*calls == 0);  // nothing runs before iteration
  const Rows want{{{}, {0}}, {{0}, {1}}, {{0, 1}, {2}}};
  CHECK(all(ds) == want);
  CHECK(all(ds) == want);
  CHECK(*calls == 2);
  CHECK(all(ds.prefetch(2)) == want);
  CHECK(all(ds.repeat(2)).size() == 6);

  // docs/data.md's example.
  auto make_gen = [] {
    return [i = int64_t{0}]() mutable -> std::optional<tf::data::Element> {
      if (i == 3) return std::nullopt;
      auto e = tf::data::Element{tf::fill({i}, tf::constant(i)), tf::constant(float(i))};
      ++i;
      return e;
    };
  };
  auto doc = Dataset::from_generator(
      make_gen, {tf::TensorSpec({tf::None}, tf::int64), tf::TensorSpec({}, tf::float32)});
  CHECK(all(doc) == Rows{{{}, {0}}, {{1}, {1}}, {{2, 2}, {2}}});

  auto one = [](tf::Tensor t) {
    return [t]() -> Dataset::Generator {
      return [t, done = false]() mutable -> std::optional<Element> {
        if (std::exchange(done, true)) return std::nullopt;
        return Element{t};
      };
    };
  };
  const tf::Tensor three = tf::constant(std::vector<int64_t>{0, 1, 2}, {3});
  // TF 2.21: "`generator` yielded an element of shape (3,) where an element of shape (2,) was
  // expected." TF converts a yielded NumPy int64 array to a float32 signature; tapeflow does
  // not convert dtypes.
  tf::testing::require_error(
      [&] { all(Dataset::from_generator(one(three), {tf::TensorSpec({2}, tf::int64)})); },
      {"a tensor of shape (3,) as component 0 of element 0 where the output signature expects "
       "shape (2,)"});
  tf::testing::require_error(
      [&] {
        all(Dataset::from_generator(one(three), {tf::TensorSpec({tf::None, tf::None}, tf::int64)}));
      },
      {"expects shape (None, None)"});
  tf::testing::require_error(
      [&] { all(Dataset::from_generator(one(three), {tf::TensorSpec({3}, tf::float32)})); },
      {"yielded a int64 tensor as component 0 of element 0 where the output signature expects "
       "float32"});
  tf::testing::require_error(
      [&] {
        all(Dataset::from_generator(
            one(three), {tf::TensorSpec({3}, tf::int64), tf::TensorSpec({}, tf::int64)}));
      },
      {"element 0 with 1 component(s) where the output signature has 2"});
  tf::testing::require_error([&] { Dataset::from_generator(one(three), {}); },
                             {"at least one tf::TensorSpec"});
}

TEST_CASE("padded_batch pads each component to the batch's or the given shape", "[cpu][data]") {
  // pb = range(1, 5).map(x -> fill([x], x)).
  Dataset pb = Dataset::range(1, 5).map([](tf::Tensor x) { return fill_x(x); });
  // TF 2.21: pb.padded_batch(2) -> [[1, 0], [2, 2]], [[3, 3, 3, 0], [4, 4, 4, 4]].
  Rows r = all(pb.padded_batch(2));
  CHECK(r == Rows{{{1, 0, 2, 2}}, {{3, 3, 3, 0, 4, 4, 4, 4}}});
  Element first = *pb.padded_batch(2).begin();
  CHECK(first[0].shape() == tf::TensorShape({2, 2}));
  CHECK(first[0].dtype() == tf::int64);
  // TF 2.21: cardinalities 2 and 1 (drop_remainder) for padded_batch(3).
  CHECK(pb.padded_batch(3).cardinality() == 2);
  CHECK(pb.padded_batch(3, {}, {}, true).cardinality() == 1);
  // TF 2.21: padded_shapes [5], padding value -1.
  CHECK(all(pb.padded_batch(2, {{5}}, {tf::constant(int64_t{-1})})) ==
        Rows{{{1, -1, -1, -1, -1, 2, 2, -1, -1, -1}}, {{3, 3, 3, -1, -1, 4, 4, 4, 4, -1}}});
  // Two components of rank 2 and 0. TF 2.21: padded_batch(2) -> [[[1,1],[0,0]], [[2,2],[2,2]]],
  // [1, 2]; then [[[3,3],[3,3],[3,3]]], [3]. With padding value 9.0, and with shapes ([4, None],
  // []).
  Dataset pb2 = Dataset::range(1, 4).map([](tf::Tensor x) {
    const int64_t n = x.item<int64_t>();
    return std::make_pair(tf::fill({n, 2}, static_cast<float>(n)), x);
  });
  CHECK(all(pb2.padded_batch(2)) ==
        Rows{{{1, 1, 0, 0, 2, 2, 2, 2}, {1, 2}}, {{3, 3, 3, 3, 3, 3}, {3}}});
  CHECK(all(pb2.padded_batch(2, {}, {tf::constant(9.f), tf::constant(int64_t{0})})) ==
        Rows{{{1, 1, 9, 9, 2, 2, 2, 2}, {1, 2}}, {{3, 3, 3, 3, 3, 3}, {3}}});
  Element e4 = *pb2.padded_batch(2, {{4, tf::None}, {}}).begin();
  CHECK(e4[0].shape() == tf::TensorShape({2, 4, 2}));
  CHECK(tf::detail::to_double_vector(e4[0]) ==
        std::vector<double>{1, 1, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 0, 0, 0, 0});
  CHECK(all(pb.padded_batch(2)) == r);  // re-iteration
  CHECK(all(pb.padded_batch(2).prefetch(1)) == r);

  // TF 2.21 raises "Attempted to pad to a smaller size than the input element" (DataLossError).
  tf::testing::require_error([&] { all(pb.padded_batch(2, {{2}})); },
                             {"the largest element of the batch has size 4 in dimension 0"});
  tf::testing::require_error(
      [&] {
        all(pb.padded_batch(2, {{2, 2}}));
      },
      {"padded shape (2, 2) of component 0 does not match the rank"});
  tf::testing::require_error([&] { all(pb.padded_batch(2, {}, {tf::constant(1.f)})); },
                             {"padding value 0 is float32 but the elements' component 0 is int64"});
  tf::testing::require_error(
      [&] {
        all(Dataset::from_tensors({tf::zeros({2})})
                .concatenate(Dataset::from_tensors({tf::zeros({2, 2})}))
                .padded_batch(2));
      },
      {"different ranks in component 0"});
  tf::testing::require_error([&] { pb.padded_batch(0); }, {"batch_size must be positive"});
  tf::testing::require_error(
      [&] {
        all(pb.padded_batch(2, {}, {tf::constant(int64_t{0}), tf::constant(int64_t{0})}));
      },
      {"padding_values has 2 entries but the elements have 1 component(s)"});
}

TEST_CASE("flat_map and interleave follow TF's deterministic order", "[cpu][data]") {
  // TF 2.21: range(1, 4).flat_map(x -> range(x)) -> 0 0 1 0 1 2; cardinality -2.
  Dataset fm =
      Dataset::range(1, 4).flat_map([](tf::Tensor x) { return Dataset::range(x.item<int64_t>()); });
  CHECK(firsts(fm) == std::vector<double>{0, 0, 1, 0, 1, 2});
  CHECK(firsts(fm) == firsts(fm));
  CHECK(fm.cardinality() == UNKNOWN_CARDINALITY);
  CHECK(Dataset::range(0).flat_map([](tf::Tensor) { return Dataset(); }).cardinality() ==
        UNKNOWN_CARDINALITY);
  auto repeat_x = [](tf::Tensor x) { return Dataset::from_tensors({x}).repeat(x.item<int64_t>()); };
  auto range_10x = [](tf::Tensor x) {
    const int64_t v = x.item<int64_t>();
    return Dataset::range(10 * v, 10 * v + 3);
  };
  // TF 2.21, cycle_length 2, block_length 2: 1 2 2 3 3 3 4 4 4 4 (shown with repeat(x)).
  Dataset il = Dataset::range(1, 5).interleave(repeat_x, 2, 2);
  CHECK(firsts(il) == std::vector<double>{1, 2, 2, 3, 3, 3, 4, 4, 4, 4});
  CHECK(il.cardinality() == UNKNOWN_CARDINALITY);
  // TF 2.21, cycle 2, block 1: 10 20 11 21 12 22 30 31 32.
  CHECK(firsts(Dataset::range(1, 4).interleave(range_10x, 2, 1)) ==
        std::vector<double>{10, 20, 11, 21, 12, 22, 30, 31, 32});
  // TF 2.21, empty inner datasets, cycle 3: range(4).interleave(x -> range(x)) -> 0 0 0 1 1 2.
  CHECK(firsts(Dataset::range(0, 4).interleave(
            [](tf::Tensor x) { return Dataset::range(x.item<int64_t>()); }, 3, 1)) ==
        std::vector<double>{0, 0, 0, 1, 1, 2});
  // TF's documented example: range(1, 6), repeat 6 times, cycle 2, block 4.
  CHECK(firsts(Dataset::range(1, 6).interleave(
            [](tf::Tensor x) { return Dataset::from_tensors({x}).repeat(6); }, 2, 4)) ==
        std::vector<double>{1, 1, 1, 1, 2, 2, 2, 2, 1, 1, 2, 2, 3, 3, 3,
                            3, 4, 4, 4, 4, 3, 3, 4, 4, 5, 5, 5, 5, 5, 5});
  CHECK(firsts(il.prefetch(2)) == firsts(il));
  tf::testing::require_error([&] { Dataset::range(3).interleave(range_10x, 0, 1); },
                             {"cycle_length must be positive or AUTOTUNE, got 0"});
  tf::testing::require_error([&] { Dataset::range(3).interleave(range_10x, 1, 0); },
                             {"block_length must be positive, got 0"});
  // An exception in the function reaches the loop, through prefetch too.
  Dataset bad = Dataset::range(3).flat_map([](tf::Tensor x) -> Dataset {
    if (x.item<int64_t>() == 1) throw tf::InvalidArgumentError("no dataset for 1");
    return Dataset::range(2);
  });
  tf::testing::require_error([&] { all(bad.prefetch(1)); }, {"no dataset for 1"});
}

TEST_CASE("the new transformations compose with prefetch across threads", "[cpu][data]") {
  // Several threads iterate one pipeline, each with its own prefetch thread.
  tf::Tensor x = tf::constant(std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {10});
  Dataset ds =
      Dataset::zip({Dataset::from_tensor_slices(x), Dataset::range(100, 110)})
          .enumerate()
          .shard(2, 1)
          .concatenate(Dataset::range(3).map([](tf::Tensor v) {
            return std::vector<tf::Tensor>{v, v, v};
          }))
          .batch(2)
          .unbatch()
          .interleave([](const Element& e) { return Dataset::from_tensors(e).repeat(2); }, 2, 1)
          .prefetch(2);
  // TF 2.21 (the same pipeline, with TF's nesting (i, (a, b)) flattened).
  const std::vector<std::vector<double>> tf_order{
      {1, 1, 101}, {3, 3, 103}, {1, 1, 101}, {3, 3, 103}, {5, 5, 105}, {7, 7, 107},
      {5, 5, 105}, {7, 7, 107}, {9, 9, 109}, {0, 0, 0},   {9, 9, 109}, {0, 0, 0},
      {1, 1, 1},   {2, 2, 2},   {1, 1, 1},   {2, 2, 2}};
  const Rows want = all(ds);
  REQUIRE(want.size() == tf_order.size());
  for (size_t i = 0; i < want.size(); ++i) {
    INFO("element " << i);
    CHECK(want[i] ==
          std::vector<std::vector<double>>{{tf_order[i][0]}, {tf_order[i][1]}, {tf_order[i][2]}});
  }
  std::vector<std::thread> threads;
  std::atomic<int> same{0};
  for (int t = 0; t < 3; ++t)
    threads.emplace_back([&] {
      if (all(ds) == want) ++same;
    });
  for (auto& t : threads) t.join();
  CHECK(same == 3);
}

TEST_CASE("fit trains from a zipped dataset as from from_tensor_slices", "[cpu][data][keras]") {
  const auto noise = tf::testing::random_values(64, -0.5, 0.5, 3);
  std::vector<float> xv(64);
  std::vector<int32_t> yv(32);
  for (size_t i = 0; i < 32; ++i) {
    yv[i] = static_cast<int32_t>(i % 2);
    xv[2 * i] = (yv[i] ? 1.f : -1.f) + static_cast<float>(noise[2 * i]);
    xv[2 * i + 1] = static_cast<float>(noise[2 * i + 1]);
  }
  const tf::Tensor x = tf::convert_to_tensor(xv, {32, 2});
  const tf::Tensor y = tf::convert_to_tensor(yv, {32});
  auto train = [](const Dataset& ds) {
    tf::random::set_seed(11);
    K::Sequential model({K::layers::Dense(4, "relu"), K::layers::Dense(2)});
    model.compile(K::optimizers::SGD(0.1), K::losses::SparseCategoricalCrossentropy(true));
    return model.fit(ds, {.epochs = 3, .verbose = 0}).history.at("loss");
  };
  const auto zipped =
      train(Dataset::zip({Dataset::from_tensor_slices(x), Dataset::from_tensor_slices(y)})
                .batch(8)
                .prefetch(1));
  const auto sliced = train(Dataset::from_tensor_slices({x, y}).batch(8));
  REQUIRE(zipped.size() == 3);
  CHECK(zipped == sliced);
  CHECK(zipped.back() < zipped.front());
}
