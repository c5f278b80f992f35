// fit's and evaluate's sample_weight and class_weight for tensor data, and class_weight over a
// Dataset, against Keras 3.15 (/tmp/cw/ref.py in the session that wrote them: the same data,
// initial weights, SGD(0.1) and unshuffled batches).
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "support/testing.h"
#include "tapeflow/tapeflow.h"

namespace tf = tapeflow;
namespace K = tapeflow::keras;

namespace {

constexpr int64_t kN = 12;

tf::Tensor features() {
  std::vector<float> x;
  for (int i = 0; i < kN; ++i)
    for (int j = 0; j < 4; ++j) x.push_back(static_cast<float>(std::sin(i * 4.0 + j)));
  return tf::constant(x, {kN, 4});
}

tf::Tensor labels() {
  std::vector<int32_t> y;
  for (int i = 0; i < kN; ++i) y.push_back(i % 3);
  return tf::constant(y, {kN});
}

tf::Tensor weights() {
  std::vector<float> w;
  for (int i = 0; i < kN; ++i) w.push_back(0.5f + 0.25f * static_cast<float>(i % 4));
  return tf::constant(w, {kN});
}

K::Sequential model(K::losses::Loss loss) {
  std::vector<float> k;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j) k.push_back(static_cast<float>(0.1 * ((i * 3 + j) % 5) - 0.2));
  K::Sequential m({K::layers::Dense(3)});
  m.build({tf::None, 4});
  m.set_weights({tf::constant(k, {4, 3}), tf::constant(std::vector<float>{0.05f, -0.05f, 0.0f})});
  m.compile(K::optimizers::SGD(0.1), std::move(loss));
  return m;
}

K::Sequential sparse_model() {
  return model(K::losses::SparseCategoricalCrossentropy(/*from_logits=*/true));
}

void check_history(const std::vector<double>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(want[i]).epsilon(2e-6));
}

}  // namespace

TEST_CASE("fit: class_weight weighs each sample by its class as Keras 3.15", "[cpu][keras]") {
  const std::map<int64_t, double> cw{{0, 1.0}, {1, 2.0}, {2, 0.5}};
  auto m = sparse_model();
  const K::History h =
      m.fit(features(), labels(),
            {.epochs = 2, .batch_size = 4, .verbose = 0, .shuffle = false, .class_weight = cw});
  check_history(h.history.at("loss"), {1.283887267, 1.088947892});
  tf::testing::check_close(
      m.get_weights()[0],
      tf::constant(std::vector<float>{-0.26856342f, -0.1055101f, 0.074073516f, 0.18637705f,
                                      -0.02131763f, -0.06505944f, 0.061902873f, -0.23364675f,
                                      0.17174388f, 0.28857592f, -0.23116213f, -0.15741378f},
                   {4, 3}),
      1e-5, 1e-6);
  tf::testing::check_close(m.get_weights()[1],
                           tf::constant(std::vector<float>{0.007615764f, 0.11331776f, -0.1209335f}),
                           1e-5, 1e-6);

  // The same weights over a Dataset of (x, y) batches.
  auto md = sparse_model();
  const auto ds = tf::data::Dataset::from_tensor_slices({features(), labels()}).batch(4);
  check_history(md.fit(ds, {.epochs = 2, .verbose = 0, .class_weight = cw}).history.at("loss"),
                {1.283887267, 1.088947892});

  // One-hot targets: the class is the row's argmax; unlisted classes weigh 1.
  auto mo = model(K::losses::CategoricalCrossentropy(/*from_logits=*/true));
  const tf::Tensor onehot = tf::one_hot(labels(), 3);
  const K::History ho = mo.fit(
      features(), onehot,
      {.epochs = 1, .batch_size = 5, .verbose = 0, .shuffle = false, .class_weight = {{1, 3.0}}});
  check_history(ho.history.at("loss"), {1.871774793});
  tf::testing::check_close(
      mo.get_weights()[0],
      tf::constant(std::vector<float>{-0.24964601f, -0.074786775f, 0.02443279f, 0.140185f,
                                      0.039174013f, -0.079358995f, -0.0069299f, -0.19900253f,
                                      0.20593244f, 0.260387f, -0.25421706f, -0.106169924f},
                   {4, 3}),
      1e-5, 1e-6);
}

TEST_CASE("fit: sample_weight splits with validation_split and weighs validation_data",
          "[cpu][keras]") {
  auto m = sparse_model();
  const K::History h = m.fit(features(), labels(),
                             {.epochs = 2,
                              .batch_size = 4,
                              .verbose = 0,
                              .validation_split = 0.25,
                              .shuffle = false,
                              .sample_weight = weights()});
  check_history(h.history.at("loss"), {0.910728157, 0.824627638});
  check_history(h.history.at("val_loss"), {1.007816911, 0.964718401});
  tf::testing::check_close(
      m.get_weights()[0],
      tf::constant(std::vector<float>{-0.27295503f, -0.14464536f, 0.11760041f, 0.117024235f,
                                      0.060028438f, -0.07705268f, -0.008648513f, -0.10660853f,
                                      0.115257055f, 0.2816906f, -0.17523013f, -0.2064605f},
                   {4, 3}),
      1e-5, 1e-6);
  const std::vector<double> e =
      m.evaluate(features(), labels(), {.batch_size = 5, .verbose = 0, .sample_weight = weights()});
  REQUIRE(e.size() == 1);
  CHECK(e[0] == Approx(0.8127194046974182).epsilon(2e-6));

  auto mv = sparse_model();
  const auto first5 = [](const tf::Tensor& t) {
    std::vector<int64_t> size = t.shape().dims();
    size[0] = 5;
    return tf::slice(t, std::vector<int64_t>(size.size(), 0), size);
  };
  const K::History hv =
      mv.fit(features(), labels(),
             {.epochs = 1,
              .batch_size = 4,
              .validation_data = {first5(features()), first5(labels()), first5(weights())},
              .verbose = 0,
              .shuffle = false,
              .sample_weight = weights()});
  check_history(hv.history.at("val_loss"), {0.835515618});
}

TEST_CASE("fit: bad sample_weight and class_weight arguments raise Keras' errors", "[cpu][keras]") {
  auto m = sparse_model();
  const auto ds = tf::data::Dataset::from_tensor_slices({features(), labels()}).batch(4);
  const auto ds3 =
      tf::data::Dataset::from_tensor_slices({features(), labels(), weights()}).batch(4);
  tf::testing::require_error(
      [&] {
        m.fit(features(), labels(),
              {.verbose = 0, .sample_weight = weights(), .class_weight = {{0, 2.0}}});
      },
      {"fit", "class_weight", "sample_weight", "at the same time"});
  tf::testing::require_error(
      [&] {
        m.fit(ds3, {.verbose = 0, .class_weight = {{0, 2.0}}});
      },
      {"fit", "at the same time", "(x, y, sample_weight)"});
  tf::testing::require_error([&] { m.fit(ds, {.verbose = 0, .sample_weight = weights()}); },
                             {"fit", "sample_weight is for tensor x and y"});
  tf::testing::require_error(
      [&] { (void)m.evaluate(ds, {.verbose = 0, .sample_weight = weights()}); },
      {"evaluate", "sample_weight is for tensor x and y"});
  tf::testing::require_error(
      [&] { m.fit(features(), labels(), {.verbose = 0, .sample_weight = tf::ones({5})}); },
      {"fit", "one row per sample", "(12, 4)", "(5,)"});
  tf::testing::require_error(
      [&] {
        (void)m.evaluate(features(), labels(), {.verbose = 0, .sample_weight = tf::ones({3})});
      },
      {"evaluate", "one row per sample"});
  tf::testing::require_error(
      [&] {
        m.fit(features(), tf::zeros({kN, 2, 3}), {.verbose = 0, .class_weight = {{0, 2.0}}});
      },
      {"fit", "class_weight", "rank 1", "(12, 2, 3)"});
  std::vector<float> bad(kN, 0.0f);
  bad[3] = std::nanf("");
  tf::testing::require_error(
      [&] {
        m.fit(features(), tf::constant(bad, {kN}), {.verbose = 0, .class_weight = {{0, 2.0}}});
      },
      {"fit", "class_weight", "not a class id"});
}
