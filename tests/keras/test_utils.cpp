// keras.utils' to_categorical, pad_sequences and timeseries_dataset_from_array against Keras
// 3.15.1's values on the same inputs, errors, and fit on a timeseries dataset.
#include <algorithm>
#include <optional>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"
#include "data/dataset.h"
#include "keras/layers.h"
#include "keras/model.h"
#include "keras/utils.h"
#include "ops/factory.h"
#include "ops/movement.h"
#include "ops/random.h"
#include "support/testing.h"

namespace tf = tapeflow;
namespace K = tf::keras;
namespace U = tf::keras::utils;
using tf::testing::require_error;

namespace {

std::vector<double> values(const tf::Tensor& t) {
  return tf::detail::to_double_vector(t);
}

tf::Tensor int64s(const std::vector<int64_t>& v, tf::TensorShape shape) {
  return tf::convert_to_tensor(v, shape);
}

}  // namespace

TEST_CASE("to_categorical gives one-hot float32 rows", "[cpu][keras]") {
  // Keras 3.15: to_categorical([0, 2, 1, 2]) -> [[1,0,0], [0,0,1], [0,1,0], [0,0,1]].
  tf::Tensor a = U::to_categorical(int64s({0, 2, 1, 2}, {4}));
  CHECK(a.shape() == tf::TensorShape({4, 3}));
  CHECK(a.dtype() == tf::float32);
  CHECK(values(a) == std::vector<double>{1, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 1});
  // Keras 3.15: to_categorical([[0], [3]], 4) -> [[1,0,0,0], [0,0,0,1]] (the 1 is squeezed).
  tf::Tensor b = U::to_categorical(tf::convert_to_tensor(std::vector<int32_t>{0, 3}, {2, 1}), 4);
  CHECK(b.shape() == tf::TensorShape({2, 4}));
  CHECK(values(b) == std::vector<double>{1, 0, 0, 0, 0, 0, 0, 1});
  require_error(
      [] {
        (void)U::to_categorical(int64s({0, 4}, {2}), 4);
      },
      {"to_categorical", "class id 4 (element 1 of shape (2,)) is outside [0, 4)"});
  // Keras casts float ids: to_categorical([0., 2., 1.]) -> [[1,0,0], [0,0,1], [0,1,0]].
  CHECK(values(U::to_categorical(tf::constant(std::vector<float>{0, 2, 1}))) ==
        std::vector<double>{1, 0, 0, 0, 0, 1, 0, 1, 0});
  require_error([] { (void)U::to_categorical(tf::constant(std::vector<float>{1.5f})); },
                {"to_categorical", "class id 1.5 (element 0) is not an integer"});
}

TEST_CASE("pad_sequences pads and truncates as Keras", "[cpu][keras]") {
  const std::vector<std::vector<int64_t>> seqs{{1, 2, 3}, {4, 5}, {6, 7, 8, 9, 10}, {}};
  // Keras 3.15: pad_sequences(seqs) -> int32 [[0,0,1,2,3], [0,0,0,4,5], [6,7,8,9,10], [0]*5].
  tf::Tensor p = U::pad_sequences(seqs);
  CHECK(p.dtype() == tf::int32);
  CHECK(p.shape() == tf::TensorShape({4, 5}));
  CHECK(values(p) ==
        std::vector<double>{0, 0, 1, 2, 3, 0, 0, 0, 4, 5, 6, 7, 8, 9, 10, 0, 0, 0, 0, 0});
  // Keras 3.15: maxlen=4, padding='post', truncating='post', value=-1 ->
  // [[1,2,3,-1], [4,5,-1,-1], [6,7,8,9], [-1]*4].
  tf::Tensor q =
      U::pad_sequences(seqs, {.maxlen = 4, .padding = "post", .truncating = "post", .value = -1});
  CHECK(values(q) == std::vector<double>{1, 2, 3, -1, 4, 5, -1, -1, 6, 7, 8, 9, -1, -1, -1, -1});
  // Keras 3.15: maxlen=2 -> [[2,3], [4,5], [9,10], [0,0]].
  CHECK(values(U::pad_sequences(seqs, {.maxlen = 2})) ==
        std::vector<double>{2, 3, 4, 5, 9, 10, 0, 0});
  // Keras 3.15: dtype='float32', value=0.5, maxlen=3 -> [[1,2,3], [0.5,4,5], [8,9,10],
  // [0.5]*3].
  tf::Tensor f = U::pad_sequences(seqs, {.maxlen = 3, .dtype = tf::float32, .value = 0.5});
  CHECK(f.dtype() == tf::float32);
  CHECK(values(f) == std::vector<double>{1, 2, 3, 0.5, 4, 5, 8, 9, 10, 0.5, 0.5, 0.5});
  // int32 sequences, and sequences of vectors (Keras' sample shape).
  CHECK(values(U::pad_sequences(std::vector<std::vector<int32_t>>{{7}, {8, 9}})) ==
        std::vector<double>{0, 7, 8, 9});
  tf::Tensor v = U::pad_sequences({tf::convert_to_tensor(std::vector<float>{1, 2, 3, 4}, {2, 2}),
                                   tf::convert_to_tensor(std::vector<float>{5, 6}, {1, 2})},
                                  {.dtype = tf::float32, .padding = "post"});
  CHECK(v.shape() == tf::TensorShape({2, 2, 2}));
  CHECK(values(v) == std::vector<double>{1, 2, 3, 4, 5, 6, 0, 0});
  CHECK(U::pad_sequences(std::vector<std::vector<int64_t>>{}).shape() == tf::TensorShape({0, 0}));
  require_error([&] { (void)U::pad_sequences(seqs, {.padding = "middle"}); },
                {"pad_sequences", "padding must be \"pre\" or \"post\", got \"middle\""});
  require_error(
      [] {
        (void)U::pad_sequences({tf::zeros({2, 2}), tf::zeros({2, 3})});
      },
      {"pad_sequences", "sequence 1 has steps of shape (3,) but an earlier one has (2,)"});
}

TEST_CASE("timeseries_dataset_from_array yields Keras' sequences and targets", "[cpu][keras]") {
  std::vector<float> d(20);
  for (size_t i = 0; i < d.size(); ++i) d[i] = static_cast<float>(i);
  tf::Tensor data = tf::convert_to_tensor(d, {10, 2});
  tf::Tensor targets = tf::range(int64_t{0}, int64_t{100}, int64_t{10});
  // Keras 3.15: timeseries_dataset_from_array(arange(20).reshape(10, 2), arange(10) * 10,
  // sequence_length=3, sequence_stride=2, sampling_rate=2, batch_size=2) ->
  // x [[[0,1],[4,5],[8,9]], [[4,5],[8,9],[12,13]]], y [0, 20]; x [[[8,9],[12,13],[16,17]]],
  // y [40].
  auto ds = U::timeseries_dataset_from_array(
      data, targets, 3, {.sequence_stride = 2, .sampling_rate = 2, .batch_size = 2});
  std::vector<tf::data::Element> got;
  for (const auto& e : ds) got.push_back(e);
  REQUIRE(got.size() == 2);
  CHECK(got[0][0].shape() == tf::TensorShape({2, 3, 2}));
  CHECK(values(got[0][0]) == std::vector<double>{0, 1, 4, 5, 8, 9, 4, 5, 8, 9, 12, 13});
  CHECK(values(got[0][1]) == std::vector<double>{0, 20});
  CHECK(values(got[1][0]) == std::vector<double>{8, 9, 12, 13, 16, 17});
  CHECK(values(got[1][1]) == std::vector<double>{40});
  // Keras 3.15: arange(10), no targets, sequence_length=4, batch_size=3, start_index=1,
  // end_index=9 -> [[1,2,3,4], [2,3,4,5], [3,4,5,6]], [[4,5,6,7], [5,6,7,8]].
  tf::Tensor r = tf::range(int64_t{0}, int64_t{10});
  auto ds2 = U::timeseries_dataset_from_array(r, std::nullopt, 4,
                                              {.batch_size = 3, .start_index = 1, .end_index = 9});
  std::vector<tf::data::Element> got2;
  for (const auto& e : ds2) got2.push_back(e);
  REQUIRE(got2.size() == 2);
  REQUIRE(got2[0].size() == 1);
  CHECK(values(got2[0][0]) == std::vector<double>{1, 2, 3, 4, 2, 3, 4, 5, 3, 4, 5, 6});
  CHECK(values(got2[1][0]) == std::vector<double>{4, 5, 6, 7, 5, 6, 7, 8});
  // Keras 3.15: batch_size=None -> 7 single sequences of shape (4,); arange(3) with
  // sequence_length=5 -> no sequences.
  auto single = U::timeseries_dataset_from_array(r, std::nullopt, 4, {.batch_size = std::nullopt});
  CHECK(single.cardinality() == 7);
  tf::data::Element first = *single.begin();
  CHECK(first[0].shape() == tf::TensorShape({4}));
  CHECK(values(first[0]) == std::vector<double>{0, 1, 2, 3});
  auto none = U::timeseries_dataset_from_array(tf::range(int64_t{0}, int64_t{3}), std::nullopt, 5);
  CHECK(none.begin() == none.end());
  // shuffle: every epoch the same sequences, reordered with the seed.
  auto sh = U::timeseries_dataset_from_array(
      r, std::nullopt, 2, {.batch_size = std::nullopt, .shuffle = true, .seed = 3});
  std::vector<double> firsts;
  for (const auto& e : sh) firsts.push_back(values(e[0])[0]);
  std::vector<double> sorted = firsts;
  std::sort(sorted.begin(), sorted.end());
  CHECK(sorted == std::vector<double>{0, 1, 2, 3, 4, 5, 6, 7, 8});
  // Keras 3.15: 10 steps of data with 6 targets and sequence_length 3 -> 6 sequences (the
  // targets limit them), the last with target 50.
  auto few = U::timeseries_dataset_from_array(r, tf::range(int64_t{0}, int64_t{60}, int64_t{10}), 3,
                                              {.batch_size = std::nullopt});
  std::vector<double> few_targets;
  for (const auto& e : few) few_targets.push_back(values(e[1])[0]);
  CHECK(few_targets == std::vector<double>{0, 10, 20, 30, 40, 50});
  require_error(
      [&] { (void)U::timeseries_dataset_from_array(r, std::nullopt, 3, {.start_index = 10}); },
      {"timeseries_dataset_from_array", "start_index must be in [0, 10)", "got 10"});
  require_error(
      [&] { (void)U::timeseries_dataset_from_array(r, std::nullopt, 3, {.sampling_rate = 0}); },
      {"timeseries_dataset_from_array", "sampling_rate must be in [1, 10)"});
}

TEST_CASE("fit trains on a timeseries dataset", "[cpu][keras]") {
  // Next-value prediction on a ramp: 40 steps, windows of 4, the target the step after each
  // window (targets shifted by the window length, as Keras' guide does).
  std::vector<float> series(44);
  for (size_t i = 0; i < series.size(); ++i) series[i] = 0.05f * static_cast<float>(i);
  tf::Tensor s = tf::convert_to_tensor(series, {44, 1});
  tf::Tensor x = tf::slice(s, {0, 0}, {40, 1});
  tf::Tensor y = tf::slice(s, {4, 0}, {40, 1});
  auto ds = U::timeseries_dataset_from_array(x, y, 4, {.batch_size = 8});
  tf::random::set_seed(1);
  K::Sequential model({K::layers::Flatten(), K::layers::Dense(1)});
  model.compile(K::optimizers::Adam(0.05), "mse");
  auto history = model.fit(ds, {.epochs = 30, .verbose = 0});
  const auto& loss = history.history.at("loss");
  CHECK(loss.back() < 0.1 * loss.front());
}
