// tf::nn::ctc_beam_search_decoder (ops/nn_more.h) against TF 2.21's CTCBeamSearchDecoder on
// every device of devices_under_test(): decoded paths and log probabilities for several beam
// widths and path counts (log-softmax and raw inputs, float32 and float64, TF 1's
// merge_repeated), a plain exhaustive search over every labelling of a short sequence, and the
// errors.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "core/tensor.h"
#include "jit/function.h"
#include "ops/factory.h"
#include "ops/nn_more.h"
#include "support/testing.h"

namespace tf = tapeflow;
using tf::testing::check_values;
using tf::testing::require_error;

namespace {

// x[t, b, c] = scale * sin(1.3 t + 2.1 b + 0.7 c + 0.5 t c + 0.3 b c) (and its log-softmax over
// c), computed in float64 and rounded once: the same inputs numpy gave TF.
tf::Tensor inputs(int64_t frames, int64_t batch, int64_t classes, double scale, bool log_softmax,
                  tf::DType dtype) {
  std::vector<double> x;
  for (int64_t t = 0; t < frames; ++t)
    for (int64_t b = 0; b < batch; ++b) {
      std::vector<double> row;
      for (int64_t c = 0; c < classes; ++c)
        row.push_back(scale * std::sin(1.3 * t + 2.1 * b + 0.7 * c + 0.5 * t * c + 0.3 * b * c));
      if (log_softmax) {
        double m = row[0];
        for (double v : row) m = std::max(m, v);
        double sum = 0;
        for (double v : row) sum += std::exp(v - m);
        for (double& v : row) v = v - m - std::log(sum);
      }
      x.insert(x.end(), row.begin(), row.end());
    }
  return tf::constant(tf::convert_to_tensor(x, {frames, batch, classes}), dtype);
}

struct Case {
  std::string label;
  int64_t frames, batch, classes;
  double scale;
  bool log_softmax;
  tf::DType dtype;
  std::vector<int32_t> lengths;
  int beam_width, top_paths;
  bool merge_repeated;
  std::vector<std::vector<int64_t>> decoded;  // per path, (batch, frames) padded with -1
  std::vector<double> log_probabilities;      // (batch, top_paths)
};

// tf.nn.ctc_beam_search_decoder(x, lengths, beam_width, top_paths) (C:
// tf.compat.v1.nn.ctc_beam_search_decoder(..., merge_repeated=True)), each SparseTensor as
// tf.sparse.to_dense(default_value=-1) padded to the frame count.
std::vector<Case> cases() {
  return {
      {"A log_softmax (6,3,5) beam 4 top 3 lengths 6 4 2",
       6,
       3,
       5,
       2.0,
       true,
       tf::float32,
       {6, 4, 2},
       4,
       3,
       false,
       {{2, 0, 3, 2, 1, -1, 0, 3, 1, -1, -1, -1, 3, 1, -1, -1, -1, -1},
        {3, 0, 3, 2, 1, -1, 0, 3, 2, 3, -1, -1, 2, 1, -1, -1, -1, -1},
        {2, 0, 3, 2, 1, 2, 0, 3, 2, 1, -1, -1, 3, 2, -1, -1, -1, -1}},
       {-3.6607272624969482, -3.905208110809326, -4.094123363494873, -2.1313748359680176,
        -2.1787753105163574, -2.1893699169158936, -0.9710955619812012, -1.922648549079895,
        -2.0337719917297363}},
      {"B raw (6,3,5) beam 4 top 2",
       6,
       3,
       5,
       2.0,
       false,
       tf::float32,
       {6, 4, 2},
       4,
       2,
       false,
       {{2, 0, 3, 2, 1, -1, 0, 3, 1, -1, -1, -1, 3, 1, -1, -1, -1, -1},
        {3, 0, 3, 2, 1, -1, 0, 3, 2, 3, -1, -1, 2, 1, -1, -1, -1, -1}},
       {-3.6607277393341064, -3.9052083492279053, -2.1313745975494385, -2.1787750720977783,
        -0.9710958003997803, -1.9226487874984741}},
      {"C raw merge_repeated v1 (6,3,5) beam 3 top 2",
       6,
       3,
       5,
       2.0,
       false,
       tf::float32,
       {6, 6, 3},
       3,
       2,
       true,
       {{2, 0, 3, 2, 1, -1, 0, 3, 1, 0, -1, -1, 3, 1, 3, -1, -1, -1},
        {3, 0, 3, 2, 1, -1, 0, 3, 2, 3, 0, -1, 3, 1, 0, -1, -1, -1}},
       {-3.6607277393341064, -3.9052083492279053, -3.4678659439086914, -3.5152664184570312,
        -1.5948100090026855, -2.4184927940368652}},
      {"D beam 1 (6,3,5)",
       6,
       3,
       5,
       2.0,
       false,
       tf::float32,
       {6, 5, 6},
       1,
       1,
       false,
       {{2, 0, 3, 2, 1, -1, 0, 3, 2, 3, 0, -1, 3, 1, 3, 0, 3, 1}},
       {-3.6607277393341064, -2.9814724922180176, -3.872757911682129}},
      {"E float64 (5,2,4) beam 5 top 4",
       5,
       2,
       4,
       1.5,
       false,
       tf::float64,
       {5, 5},
       5,
       4,
       false,
       {{0, 2, 1, -1, -1, 0, 2, 1, 0, -1},
        {2, 0, 2, 1, -1, 0, 1, 0, -1, -1},
        {1, 0, 2, 1, -1, 0, 2, 0, -1, -1},
        {0, 2, -1, -1, -1, 0, 2, 1, 2, -1}},
       {-2.446141139681027, -2.5126521773958013, -2.6368862258915478, -2.852402312804267,
        -2.268889801626234, -2.404392866424015, -2.420304299121642, -2.5401900892741778}},
      {"F (20,2,8) scale 3 beam 10 top 5",
       20,
       2,
       8,
       3.0,
       false,
       tf::float32,
       {20, 17},
       10,
       5,
       false,
       {{2, 0, 2, 1, 6, 0, 2, 4, 0, 4, 6, 5, 6, 1, -1, -1, -1, -1, -1, -1,
         6, 3, 5, 6, 0, 1, 2, 4, 0, 3, 0, 4, 1, 0, 5,  6,  -1, -1, -1, -1},
        {2, 0, 2, 1, 6, 0, 6, 4, 0, 4, 6, 5, 6, 1, -1, -1, -1, -1, -1, -1,
         6, 3, 5, 6, 0, 1, 2, 4, 0, 4, 0, 4, 1, 0, 5,  6,  -1, -1, -1, -1},
        {2, 0, 2, 1, 6, 0, 2, 4, 0, 4, 6, 0, 6, 1, -1, -1, -1, -1, -1, -1,
         6, 3, 5, 6, 0, 1, 2, 4, 0, 3, 4, 1, 0, 5, 6,  -1, -1, -1, -1, -1},
        {2, 0, 2, 1, 6, 0, 2, 4, 0, 4, 6, 5, 6, 1, 2, -1, -1, -1, -1, -1,
         6, 5, 6, 0, 1, 2, 4, 0, 3, 0, 4, 1, 0, 5, 6, -1, -1, -1, -1, -1},
        {2, 0, 2, 1, 6, 0, 6, 4, 0, 4, 6, 0, 6, 1, -1, -1, -1, -1, -1, -1,
         6, 5, 6, 0, 1, 2, 4, 0, 4, 0, 4, 1, 0, 5, 6,  -1, -1, -1, -1, -1}},
       {-16.025949478149414, -16.115333557128906, -16.223772048950195, -16.23089027404785,
        -16.313156127929688, -14.131509780883789, -14.155481338500977, -14.156542778015137,
        -14.17537784576416, -14.199350357055664}},
      {"G log_softmax (30,1,6) beam 100 top 3",
       30,
       1,
       6,
       2.5,
       true,
       tf::float32,
       {30},
       100,
       3,
       false,
       {{2, 0, 3, 2, 1, 4, 0, 1,  4,  0,  4,  2,  4,  4,  1,
         2, 3, 2, 0, 3, 4, 3, -1, -1, -1, -1, -1, -1, -1, -1},
        {2, 0, 3, 2, 1, 4, 0, 1, 4,  0,  1,  4,  2,  4,  4,
         1, 2, 3, 2, 0, 3, 4, 3, -1, -1, -1, -1, -1, -1, -1},
        {2, 0, 3, 2, 1, 0, 1,  4,  0,  4,  2,  4,  4,  1,  2,
         3, 2, 0, 3, 4, 3, -1, -1, -1, -1, -1, -1, -1, -1, -1}},
       {-21.179285049438477, -21.18514060974121, -21.209436416625977}},
  };
}

}  // namespace

TEST_CASE("ctc_beam_search_decoder matches TF 2.21", "[cpu][cuda][ctc]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    for (const Case& c : cases()) {
      CAPTURE(c.label);
      const tf::Tensor x = inputs(c.frames, c.batch, c.classes, c.scale, c.log_softmax, c.dtype);
      const auto lengths = tf::convert_to_tensor(c.lengths, {c.batch});
      const auto got =
          tf::nn::ctc_beam_search_decoder(x, lengths, c.beam_width, c.top_paths, c.merge_repeated);
      REQUIRE(got.decoded.size() == static_cast<size_t>(c.top_paths));
      for (int k = 0; k < c.top_paths; ++k) {
        CAPTURE(k);
        CHECK(got.decoded[k].shape() == tf::TensorShape({c.batch, c.frames}));
        CHECK(got.decoded[k].numpy<int64_t>() == c.decoded[static_cast<size_t>(k)]);
      }
      CHECK(got.log_probabilities.dtype() == c.dtype);
      // TF's float64 scores differ from the exact ones by about 1e-8 (some of its arithmetic
      // is float32's); tapeflow's are exact to float64 (the next case), so float32's tolerance.
      CHECK(got.log_probabilities.shape() == tf::TensorShape({c.batch, c.top_paths}));
      check_values(got.log_probabilities, c.log_probabilities, 2e-6, 0);
    }
  }
}

TEST_CASE("ctc_beam_search_decoder with a wide beam finds the most probable labelling",
          "[cpu][ctc]") {
  // 4 frames of 3 labels and a blank: every labelling's probability summed over its alignments
  // by brute force (4^4 paths); a beam wider than the number of prefixes keeps every prefix, so
  // its best paths are the exact ones, in order, and its scores their exact log probabilities.
  const int64_t frames = 4, classes = 4;
  const tf::Tensor x = inputs(frames, 1, classes, 1.5, true, tf::float64);
  const std::vector<double> v = x.numpy<double>();
  std::map<std::vector<int64_t>, double> prob;
  for (int code = 0; code < 256; ++code) {
    std::vector<int64_t> path;
    double p = 1;
    int64_t previous = -1;
    for (int t = 0, k = code; t < frames; ++t, k /= classes) {
      const int64_t label = k % classes;
      p *= std::exp(v[static_cast<size_t>(t * classes + label)]);
      if (label != classes - 1 && label != previous) path.push_back(label);
      previous = label;
    }
    prob[path] += p;
  }
  std::vector<std::pair<double, std::vector<int64_t>>> ranked;
  for (const auto& [path, p] : prob) ranked.emplace_back(p, path);
  std::sort(ranked.rbegin(), ranked.rend());
  const auto got = tf::nn::ctc_beam_search_decoder(
      x, tf::convert_to_tensor(std::vector<int32_t>{4}, {1}), 200, 5);
  for (int k = 0; k < 5; ++k) {
    CAPTURE(k);
    std::vector<int64_t> want = ranked[static_cast<size_t>(k)].second;
    want.resize(frames, -1);
    CHECK(got.decoded[k].numpy<int64_t>() == want);
    CHECK(got.log_probabilities.numpy<double>()[static_cast<size_t>(k)] ==
          Approx(std::log(ranked[static_cast<size_t>(k)].first)).epsilon(1e-12));
  }
}

TEST_CASE("ctc_beam_search_decoder errors name the op", "[cpu][ctc]") {
  const tf::Tensor x = inputs(6, 3, 5, 2.0, false, tf::float32);
  const tf::Tensor lengths = tf::convert_to_tensor(std::vector<int32_t>{0, 4, 2}, {3});
  // TF 2.21: "Less leaves in the beam search than requested." for an empty sequence and 2 paths.
  require_error(
      [&] { tf::nn::ctc_beam_search_decoder(x, lengths, 4, 2); },
      {"[ctc_beam_search_decoder] Less leaves in the beam search than requested", "batch entry 0"});
  require_error([&] { tf::nn::ctc_beam_search_decoder(x, lengths, 2, 3); },
                {"[ctc_beam_search_decoder]", "top_paths must be in [1, beam_width = 2], got 3"});
  require_error(
      [&] {
        tf::nn::ctc_beam_search_decoder(x,
                                        tf::convert_to_tensor(std::vector<int32_t>{7, 1, 1}, {3}));
      },
      {"[ctc_beam_search_decoder]", "sequence_length[0] = 7", "[0, 6]"});
  require_error(
      [&] {
        tf::nn::ctc_beam_search_decoder(x, tf::convert_to_tensor(std::vector<int32_t>{1, 1}, {2}));
      },
      {"[ctc_beam_search_decoder]", "(3,)", "(2,)"});
  require_error(
      [&] {
        tf::nn::ctc_beam_search_decoder(tf::zeros({6, 3}), lengths);
      },
      {"[ctc_beam_search_decoder]", "(frames, batch, classes)", "(6, 3)"});
  auto traced = tf::function([](const tf::Tensor& in, const tf::Tensor& len) {
    return tf::nn::ctc_beam_search_decoder(in, len).log_probabilities;
  });
  require_error([&] { traced(x, lengths); }, {"[ctc_beam_search_decoder]", "py_function"});
}
