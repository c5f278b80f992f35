// Candidate sampling (ops/candidate_sampling.h) on every device of devices_under_test():
// nce_loss and sampled_softmax_loss against TF 2.21's values and gradients for given sampled
// values (with and without accidental-hit removal), central differences in float64,
// compute_accidental_hits against TF, the samplers' expected counts against TF's, their
// distributions against exact probabilities (the unique samplers' inclusion probabilities and
// mean number of tries enumerated), traced calls, and the errors.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <vector>

#include "autograd/tape.h"
#include "autograd/variable.h"
#include "core/device.h"
#include "core/error.h"
#include "core/tensor.h"
#include "jit/function.h"
#include "ops/binary.h"
#include "ops/candidate_sampling.h"
#include "ops/factory.h"
#include "ops/movement.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "support/testing.h"

namespace tf = tapeflow;
using tf::testing::check_values;
using tf::testing::require_error;

namespace {

tf::Tensor i64(const std::vector<int64_t>& v, const tf::TensorShape& shape) {
  return tf::convert_to_tensor(v, shape);
}
tf::Tensor i64(const std::vector<int64_t>& v) {
  return i64(v, {static_cast<int64_t>(v.size())});
}
tf::Tensor f32(const std::vector<float>& v, const tf::TensorShape& shape) {
  return tf::convert_to_tensor(v, shape);
}
tf::Tensor f32(const std::vector<float>& v) {
  return f32(v, {static_cast<int64_t>(v.size())});
}

// The problem of every loss case (TF's in tests' comments): 6 classes, 3-vectors, 2 rows with
// 2 labels each, 4 given candidates (class 3 is a label of both rows; class 1 comes twice).
const std::vector<double> kW = {0.1, -0.2, 0.3, 0.4, 0.5, -0.6, -0.7, 0.8, 0.9,
                                1.0, -1.1, 0.2, 0.3, 0.3, -0.3, -0.5, 0.6, 0.7};
const std::vector<double> kB = {0.1, -0.1, 0.2, -0.2, 0.3, -0.3};
const std::vector<double> kX = {0.5, -1.0, 2.0, 1.5, 0.25, -0.5};

tf::Tensor labels() {
  return i64({0, 3, 2, 3}, {2, 2});
}

tf::random::CandidateSample given() {
  return {i64({3, 1, 5, 1}), f32({0.5f, 0.3f, 0.2f, 0.3f}, {2, 2}), f32({0.3f, 0.6f, 0.1f, 0.6f})};
}

struct LossCase {
  bool softmax, remove_hits;
  std::vector<double> loss, gw, gb, gx;  // gradients of sum(loss * [1, 2])
};

// W, b, x = tf.Variable(...); with tf.GradientTape() as t:
//   l = tf.nn.nce_loss / sampled_softmax_loss(W, b, labels, x, 4, 6, num_true=2,
//       sampled_values=given, remove_accidental_hits=...); s = reduce_sum(l * [1., 2.])
std::vector<LossCase> loss_cases() {
  return {
      {false,
       false,
       {8.808794021606445, 8.793989181518555},
       {0.16898135840892792, -0.33796271681785583, 0.6759254336357117, 5.098618030548096,
        0.3042599558830261, -0.6085199117660522, 0.37402430176734924, 0.06233738362789154,
        -0.12467476725578308, 4.564877986907959, -0.7618191242218018, 1.5236382484436035, 0.0, 0.0,
        0.0, 2.6876864433288574, -0.5571115016937256, 1.1142230033874512},
       {0.33796271681785583, 3.7347769737243652, 0.24934953451156616, 3.9802565574645996, 0.0,
        2.4102890491485596},
       {1.176848292350769, -0.8052278757095337, 0.7297846078872681, 2.9514260292053223,
        -0.12760525941848755, -0.16159382462501526}},
      {false,
       true,
       {5.75642204284668, 6.552617073059082},
       {0.16898135840892792, -0.33796271681785583, 0.6759254336357117, 5.098618030548096,
        0.3042599558830261, -0.6085199117660522, 0.37402430176734924, 0.06233738362789154,
        -0.12467476725578308, 1.40743887424469, -0.2559095621109009, 0.5118191242218018, 0.0, 0.0,
        0.0, 2.6876864433288574, -0.5571115016937256, 1.1142230033874512},
       {0.33796271681785583, 3.7347769737243652, 0.24934953451156616, 1.2401281595230103, 0.0,
        2.4102890491485596},
       {0.22409504652023315, 0.24280083179473877, 0.539233922958374, 1.1640509366989136,
        1.8385074138641357, -0.5190688371658325}},
      {true,
       false,
       {1.7542426586151123, 2.073559284210205},
       {-0.20618602633476257, 0.41237205266952515, -0.8247441053390503, 0.8534430861473083,
        0.129886656999588, -0.259773313999176, -1.3321549892425537, -0.22202584147453308,
        0.44405168294906616, 0.28717994689941406, -0.15081429481506348, 0.30162858963012695, 0.0,
        0.0, 0.0, 0.3977178633213043, -0.1694185733795166, 0.3388371467590332},
       {-0.41237205266952515, 0.5765644311904907, -0.8881033658981323, 0.31371641159057617, 0.0,
        0.41019439697265625},
       {0.03793208301067352, 0.016986221075057983, 0.058426812291145325, 0.8817480802536011,
        -0.4556838274002075, -0.9774907231330872}},
      {true,
       true,
       {1.3361520767211914, 1.7414649724960327},
       {-0.18344402313232422, 0.36688804626464844, -0.7337760925292969, 1.1903148889541626,
        0.17961958050727844, -0.3592391610145569, -1.2660434246063232, -0.2110072374343872,
        0.4220144748687744, -0.30881738662719727, -0.07211591303348541, 0.14423182606697083, 0.0,
        0.0, 0.0, 0.5679900646209717, -0.2633844017982483, 0.5267688035964966},
       {-0.36688804626464844, 0.8050916790962219, -0.8440289497375488, -0.19317281246185303, 0.0,
        0.5989981293678284},
       {-0.1759551465511322, 0.2593792676925659, 0.1147066205739975, 0.5594514012336731,
        0.11320999264717102, -1.0867899656295776}},
  };
}

tf::Tensor loss_of(const LossCase& c, const tf::Tensor& w, const tf::Tensor& b,
                   const tf::Tensor& x) {
  return c.softmax
             ? tf::nn::sampled_softmax_loss(w, b, labels(), x, 4, 6, 2, given(), c.remove_hits)
             : tf::nn::nce_loss(w, b, labels(), x, 4, 6, 2, given(), c.remove_hits);
}

}  // namespace

TEST_CASE("nce_loss and sampled_softmax_loss match TF 2.21 with given candidates",
          "[candidate_sampling]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    for (const LossCase& c : loss_cases()) {
      for (tf::DType dtype : {tf::float32, tf::float64}) {
        CAPTURE(c.softmax, c.remove_hits, tf::dtype_name(dtype));
        tf::Variable w(tf::constant(tf::convert_to_tensor(kW, {6, 3}), dtype), "w");
        tf::Variable b(tf::constant(tf::convert_to_tensor(kB, {6}), dtype), "b");
        tf::Variable x(tf::constant(tf::convert_to_tensor(kX, {2, 3}), dtype), "x");
        tf::GradientTape tape;
        const tf::Tensor loss = loss_of(c, w.value(), b.value(), x.value());
        const tf::Tensor s = tf::reduce_sum(
            loss * tf::constant(tf::convert_to_tensor(std::vector<double>{1.0, 2.0}, {2}), dtype));
        const auto g = tape.gradient(s, std::vector<tf::Variable>{w, b, x});
        CHECK(loss.shape() == tf::TensorShape({2}));
        CHECK(loss.dtype() == dtype);
        // TF computes in float32 only (float64 is an InvalidArgumentError there: its expected
        // counts stay float32); tapeflow casts them, so float64 agrees to float32's rounding.
        check_values(loss, c.loss, 2e-6, 1e-6);
        check_values(g[0], c.gw, 2e-6, 2e-6);
        check_values(g[1], c.gb, 2e-6, 2e-6);
        check_values(g[2], c.gx, 2e-6, 2e-6);
      }
    }
    // num_true = 1, candidate 4 is row 0's label:
    // tf.nn.nce_loss(W, b, [[4], [1]], x, 3, 6, sampled_values=([0, 4, 2], [[0.2], [0.4]],
    //                [0.5, 0.2, 0.1]), remove_accidental_hits=True), and sampled_softmax_loss.
    const tf::random::CandidateSample one{i64({0, 4, 2}), f32({0.2f, 0.4f}, {2, 1}),
                                          f32({0.5f, 0.2f, 0.1f})};
    const tf::Tensor w = tf::constant(tf::convert_to_tensor(kW, {6, 3}), tf::float32);
    const tf::Tensor b = tf::constant(tf::convert_to_tensor(kB, {6}), tf::float32);
    const tf::Tensor x = tf::constant(tf::convert_to_tensor(kX, {2, 3}), tf::float32);
    const tf::Tensor l1 = i64({4, 1}, {2, 1});
    check_values(tf::nn::nce_loss(w, b, l1, x, 3, 6, 1, one, true),
                 {5.287186145782471, 5.401881217956543}, 2e-6, 0);
    check_values(tf::nn::sampled_softmax_loss(w, b, l1, x, 3, 6, 1, one),
                 {2.298644542694092, 1.3772554397583008}, 2e-6, 0);
  }
}

TEST_CASE("nce_loss and sampled_softmax_loss gradients match central differences",
          "[candidate_sampling][cpu]") {
  for (const LossCase& c : loss_cases()) {
    CAPTURE(c.softmax, c.remove_hits);
    const tf::Tensor w = tf::convert_to_tensor(kW, {6, 3});
    const tf::Tensor b = tf::convert_to_tensor(kB, {6});
    const tf::Tensor x = tf::convert_to_tensor(kX, {2, 3});
    tf::testing::check_gradient([&](const tf::Tensor& v) { return loss_of(c, v, b, x); }, {6, 3},
                                kW, 1e-6, 1e-7);
    tf::testing::check_gradient([&](const tf::Tensor& v) { return loss_of(c, w, v, x); }, {6}, kB,
                                1e-6, 1e-7);
    tf::testing::check_gradient([&](const tf::Tensor& v) { return loss_of(c, w, b, v); }, {2, 3},
                                kX, 1e-6, 1e-7);
  }
}

TEST_CASE("compute_accidental_hits matches TF 2.21", "[candidate_sampling][cpu]") {
  // tf.nn.compute_accidental_hits([[1, 2], [3, 1]], [1, 5, 1, 3], 2): a candidate that occurs
  // twice is found at its last position.
  const auto hits =
      tf::nn::compute_accidental_hits(i64({1, 2, 3, 1}, {2, 2}), i64({1, 5, 1, 3}), 2);
  CHECK(hits.indices.dtype() == tf::int32);
  CHECK(hits.ids.dtype() == tf::int64);
  CHECK(hits.weights.dtype() == tf::float32);
  CHECK(hits.indices.numpy<int32_t>() == std::vector<int32_t>{0, 1, 1});
  CHECK(hits.ids.numpy<int64_t>() == std::vector<int64_t>{2, 3, 2});
  CHECK(hits.weights.numpy<float>() == std::vector<float>(3, -FLT_MAX));
  const auto none = tf::nn::compute_accidental_hits(i64({7, 8}, {2, 1}), i64({1, 2}), 1);
  CHECK(none.indices.shape() == tf::TensorShape({0}));
  auto traced = tf::function(
      [](const tf::Tensor& t) { return tf::nn::compute_accidental_hits(t, i64({1}), 1).ids; });
  require_error([&] { traced(i64({1}, {1, 1})); }, {"[compute_accidental_hits]", "eagerly"});
}

TEST_CASE("candidate samplers' expected counts match TF 2.21", "[candidate_sampling]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    const tf::Tensor tc = i64({0, 3, 2, 9}, {2, 2});
    // tf.random.log_uniform_candidate_sampler(tc, 2, 5, False, 10): p * 5.
    auto log_uniform = tf::random::log_uniform_candidate_sampler(tc, 2, 5, false, 10);
    check_values(log_uniform.true_expected_count, {1.4453242, 0.46529043, 0.5998637, 0.19873716},
                 1e-6, 0);
    CHECK(log_uniform.sampled_candidates.dtype() == tf::int64);
    CHECK(log_uniform.sampled_candidates.shape() == tf::TensorShape({5}));
    // Each sampled class's count is its own p * 5.
    const auto ids = log_uniform.sampled_candidates.numpy<int64_t>();
    const auto counts = log_uniform.sampled_expected_count.numpy<float>();
    for (size_t i = 0; i < ids.size(); ++i) {
      REQUIRE(ids[i] >= 0);
      REQUIRE(ids[i] < 10);
      const double k = static_cast<double>(ids[i]);
      CHECK(counts[i] == Approx(5 * std::log((k + 2) / (k + 1)) / std::log(11.0)).epsilon(1e-6));
    }
    auto uniform = tf::random::uniform_candidate_sampler(tc, 2, 5, false, 10);
    check_values(uniform.true_expected_count, {0.5, 0.5, 0.5, 0.5}, 1e-7, 0);
    check_values(uniform.sampled_expected_count, {0.5, 0.5, 0.5, 0.5, 0.5}, 1e-7, 0);
    // tf.random.fixed_unigram_candidate_sampler(tc, 2, 5, False, 10,
    //     unigrams=[1, ..., 8], num_reserved_ids=2, distortion=0.5)
    auto unigram = tf::random::fixed_unigram_candidate_sampler(tc, 2, 5, false, 10,
                                                               {1, 2, 3, 4, 5, 6, 7, 8}, 0.5, 2);
    check_values(unigram.true_expected_count, {0.0, 0.43364823, 0.3066356, 0.86729646}, 1e-6, 0);
    for (int64_t id : unigram.sampled_candidates.numpy<int64_t>()) CHECK(id >= 2);
    // tf.random.all_candidate_sampler(tc, 2, 5, True)
    auto all = tf::random::all_candidate_sampler(tc, 2, 5, true);
    CHECK(all.sampled_candidates.numpy<int64_t>() == std::vector<int64_t>{0, 1, 2, 3, 4});
    check_values(all.true_expected_count, {1, 1, 1, 1}, 0, 0);
    check_values(all.sampled_expected_count, {1, 1, 1, 1, 1}, 0, 0);
  }
}

namespace {

// Sampling without replacement from p (k of them, in order), enumerated: each class's
// probability of being picked, and the mean number of draws TF's loop makes (k + sum over picks
// of S / (1 - S), S the mass picked before).
void enumerate(const std::vector<double>& p, int k, std::vector<double>& inclusion,
               double& mean_tries) {
  inclusion.assign(p.size(), 0.0);
  mean_tries = 0.0;
  std::vector<int> picked;
  std::function<void(double, double, double)> go = [&](double prob, double mass, double tries) {
    if (static_cast<int>(picked.size()) == k) {
      for (int c : picked) inclusion[static_cast<size_t>(c)] += prob;
      mean_tries += prob * tries;
      return;
    }
    for (size_t c = 0; c < p.size(); ++c) {
      if (std::find(picked.begin(), picked.end(), static_cast<int>(c)) != picked.end()) continue;
      picked.push_back(static_cast<int>(c));
      go(prob * p[c] / (1 - mass), mass + p[c], tries + 1 + mass / (1 - mass));
      picked.pop_back();
    }
  };
  go(1.0, 0.0, 0.0);
}

}  // namespace

TEST_CASE("candidate samplers draw from their distributions", "[candidate_sampling][cpu]") {
  tf::random::set_seed(7);
  const tf::Tensor tc = i64({0}, {1, 1});
  const int range = 6;
  std::vector<double> log_p(range);
  for (int c = 0; c < range; ++c) log_p[c] = std::log((c + 2.0) / (c + 1.0)) / std::log(7.0);
  const std::vector<double> uniform_p(range, 1.0 / range);
  // With replacement: 6000 calls of 5 draws, frequencies within 4 standard deviations.
  for (bool log_uniform : {false, true}) {
    CAPTURE(log_uniform);
    const auto& p = log_uniform ? log_p : uniform_p;
    std::vector<double> seen(range, 0.0);
    const int calls = 6000, k = 5;
    for (int i = 0; i < calls; ++i) {
      const auto s = log_uniform ? tf::random::log_uniform_candidate_sampler(tc, 1, k, false, range)
                                 : tf::random::uniform_candidate_sampler(tc, 1, k, false, range);
      for (int64_t id : s.sampled_candidates.numpy<int64_t>()) seen[static_cast<size_t>(id)] += 1;
    }
    const double n = calls * k;
    for (int c = 0; c < range; ++c) {
      CAPTURE(c);
      CHECK(std::abs(seen[c] / n - p[c]) < 4 * std::sqrt(p[c] * (1 - p[c]) / n));
    }
  }
  // Unique: 3 of 6 log-uniform classes, 4000 calls. Every call's classes are distinct; each
  // class comes up with its exact inclusion probability, and the number of tries recovered from
  // the expected counts (T = log1p(-count) / log1p(-p)) has the exact mean.
  std::vector<double> inclusion;
  double mean_tries = 0.0;
  const int k = 3, calls = 4000;
  enumerate(log_p, k, inclusion, mean_tries);
  std::vector<double> seen(range, 0.0);
  double tries = 0.0;
  for (int i = 0; i < calls; ++i) {
    const auto s = tf::random::log_uniform_candidate_sampler(tc, 1, k, true, range);
    const auto ids = s.sampled_candidates.numpy<int64_t>();
    REQUIRE(std::set<int64_t>(ids.begin(), ids.end()).size() == static_cast<size_t>(k));
    for (int64_t id : ids) seen[static_cast<size_t>(id)] += 1;
    const double p0 = log_p[static_cast<size_t>(ids[0])];
    const double count = s.sampled_expected_count.numpy<float>()[0];
    tries += count == static_cast<float>(p0 * k) ? k : std::log1p(-count) / std::log1p(-p0);
  }
  for (int c = 0; c < range; ++c) {
    CAPTURE(c);
    const double q = inclusion[static_cast<size_t>(c)];
    CHECK(std::abs(seen[c] / calls - q) < 4 * std::sqrt(q * (1 - q) / calls) + 1e-9);
  }
  CHECK(tries / calls == Approx(mean_tries).epsilon(0.05));
  // All classes: every one comes up, in some order.
  const auto every = tf::random::uniform_candidate_sampler(tc, 1, range, true, range);
  auto ids = every.sampled_candidates.numpy<int64_t>();
  std::sort(ids.begin(), ids.end());
  CHECK(ids == std::vector<int64_t>{0, 1, 2, 3, 4, 5});
  // A unigram sampler never draws a class of zero weight, unique or not.
  for (bool unique : {false, true}) {
    const auto s =
        tf::random::fixed_unigram_candidate_sampler(tc, 1, 3, unique, 5, {0, 5, 0, 1, 2});
    for (int64_t id : s.sampled_candidates.numpy<int64_t>()) CHECK((id == 1 || id == 3 || id == 4));
  }
  tf::detail::clear_random_seed();
}

TEST_CASE("candidate sampling inside tf::function draws anew at each call",
          "[candidate_sampling]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    tf::random::set_seed(3);
    const tf::Tensor w = tf::constant(tf::convert_to_tensor(kW, {6, 3}), tf::float32);
    const tf::Tensor b = tf::constant(tf::convert_to_tensor(kB, {6}), tf::float32);
    auto step = tf::function([&](const tf::Tensor& x, const tf::Tensor& y) {
      return tf::nn::sampled_softmax_loss(w, b, y, x, 3, 6);
    });
    const tf::Tensor x = tf::constant(tf::convert_to_tensor(kX, {2, 3}), tf::float32);
    const tf::Tensor y = i64({1, 4}, {2, 1});
    std::set<std::vector<float>> losses;
    for (int i = 0; i < 8; ++i) {
      const tf::Tensor l = step(x, y);
      CHECK(l.shape() == tf::TensorShape({2}));
      losses.insert(l.numpy<float>());
    }
    CHECK(step.tracing_count() == 1);
    CHECK(losses.size() > 1);  // 20 candidate sets of 3 from 6: new draws give new losses
    auto sampler = tf::function([](const tf::Tensor& t) {
      return tf::random::log_uniform_candidate_sampler(t, 1, 4, true, 50).sampled_candidates;
    });
    for (int i = 0; i < 3; ++i) {
      const auto ids = sampler(i64({1}, {1, 1})).numpy<int64_t>();
      CHECK(std::set<int64_t>(ids.begin(), ids.end()).size() == 4);
    }
    tf::detail::clear_random_seed();
  }
}

TEST_CASE("nce_loss trains embeddings with SGD", "[candidate_sampling][cpu]") {
  // Each of 4 inputs is a one-hot row whose class is its index: the loss falls as the class
  // weights align with the inputs.
  tf::random::set_seed(11);
  tf::Variable w(tf::random::normal({8, 4}, 0.0, 0.1, tf::float32, 1), "w");
  tf::Variable b(tf::zeros({8}), "b");
  const tf::Tensor x = tf::eye(4);
  const tf::Tensor y = i64({0, 1, 2, 3}, {4, 1});
  auto loss = [&] { return tf::reduce_mean(tf::nn::nce_loss(w.value(), b.value(), y, x, 3, 8)); };
  double first = 0.0, last = 0.0;
  for (int step = 0; step < 300; ++step) {
    tf::GradientTape tape;
    const tf::Tensor l = loss();
    if (step == 0) first = l.item<float>();
    const auto g = tape.gradient(l, std::vector<tf::Variable>{w, b});
    w.assign_sub(g[0] * 0.5);
    b.assign_sub(g[1] * 0.5);
  }
  double total = 0.0;
  for (int i = 0; i < 20; ++i) total += loss().item<float>();
  last = total / 20;
  CHECK(last < 0.5 * first);
  tf::detail::clear_random_seed();
}

TEST_CASE("candidate sampling errors name the op and the shapes", "[candidate_sampling][cpu]") {
  const tf::Tensor tc = i64({0, 1}, {2, 1});
  require_error([&] { tf::random::uniform_candidate_sampler(tc, 1, 5, true, 4); },
                {"[uniform_candidate_sampler]", "range_max >= num_sampled", "5", "4"});
  require_error([&] { tf::random::log_uniform_candidate_sampler(tc, 2, 1, false, 4); },
                {"[log_uniform_candidate_sampler]", "(2, 1)", "num_true = 2"});
  require_error(
      [&] {
        tf::random::uniform_candidate_sampler(f32({0.5f}, {1, 1}), 1, 1, false, 4);
      },
      {"[uniform_candidate_sampler]", "integer", "float32"});
  require_error([&] { tf::random::uniform_candidate_sampler(tc, 1, 0, false, 4); },
                {"[uniform_candidate_sampler]", "num_sampled must be >= 1, got 0"});
  require_error(
      [&] {
        tf::random::fixed_unigram_candidate_sampler(tc, 1, 1, false, 5, {1, 2, 3});
      },
      {"[fixed_unigram_candidate_sampler]", "range_max = 5", "(3)"});
  require_error(
      [&] {
        tf::random::fixed_unigram_candidate_sampler(tc, 1, 3, true, 4, {1, 0, 2, 0});
      },
      {"[fixed_unigram_candidate_sampler]", "non-zero probability, got 2"});
  require_error(
      [&] {
        tf::random::fixed_unigram_candidate_sampler(tc, 1, 1, false, 2, {1, -2});
      },
      {"[fixed_unigram_candidate_sampler]", "unigrams[1] = -2"});
  const tf::Tensor w = tf::zeros({6, 3}), b = tf::zeros({6}), x = tf::zeros({2, 3});
  require_error(
      [&] {
        tf::nn::nce_loss(w, b, tc, tf::zeros({2, 4}), 2, 6);
      },
      {"[nce_loss]", "(2, 4)", "(6, 3)"});
  require_error([&] { tf::nn::nce_loss(w, tf::zeros({5}), tc, x, 2, 6); },
                {"[nce_loss]", "biases (5,)", "(6, 3)"});
  require_error(
      [&] {
        tf::nn::sampled_softmax_loss(w, b, i64({0}, {1, 1}), x, 2, 6);
      },
      {"[sampled_softmax_loss]", "(1, 1)", "(2, 3)", "batch"});
  require_error([&] { tf::nn::nce_loss(w, b, tc, x, 3, 6, 1, given()); },
                {"[nce_loss]", "num_sampled = 3", "(4,)"});
  require_error([&] { tf::nn::nce_loss(tf::zeros({6}), b, tc, x, 2, 6); },
                {"[nce_loss]", "weights", "(6,)"});
}
