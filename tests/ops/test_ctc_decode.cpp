// tf::nn::ctc_greedy_decoder (ops/nn_more.h) on every device of devices_under_test(): TF 2.21's
// decodings (as tf.sparse.to_dense(default_value=-1), padded to the frame count) and
// neg_sum_logits, blank_index and merge_repeated, a None batch in a trace, a decode of
// ctc_loss's best path, and the errors.
#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "core/tensor.h"
#include "jit/function.h"
#include "ops/factory.h"
#include "ops/movement.h"
#include "ops/nn_more.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
using tf::testing::check_values;
using tf::testing::require_error;

namespace {

// numpy.random.seed(0); numpy.random.randn(6, 2, 4) as float32.
const std::vector<double> kLogits = {
    1.764052391052246,    0.40015721321105957, 0.978738009929657,    2.2408931255340576,
    1.8675580024719238,   -0.9772778749465942, 0.9500884413719177,   -0.15135720372200012,
    -0.10321885347366333, 0.4105985164642334,  0.14404356479644775,  1.4542734622955322,
    0.7610377073287964,   0.12167501449584961, 0.44386324286460876,  0.3336743414402008,
    1.4940791130065918,   -0.2051582634449005, 0.3130677044391632,   -0.8540957570075989,
    -2.5529897212982178,  0.653618574142456,   0.8644362092018127,   -0.7421650290489197,
    2.269754648208618,    -1.4543657302856445, 0.04575851559638977,  -0.18718385696411133,
    1.5327792167663574,   1.4693588018417358,  0.154947429895401,    0.37816253304481506,
    -0.8877857327461243,  -1.980796456336975,  -0.34791216254234314, 0.15634897351264954,
    1.2302906513214111,   1.202379822731018,   -0.38732680678367615, -0.302302747964859,
    -1.0485529899597168,  -1.420017957687378,  -1.7062702178955078,  1.950775384902954,
    -0.5096521973609924,  -0.4380742907524109, -1.2527953386306763,  0.7774903774261475};

}  // namespace

TEST_CASE("ctc_greedy_decoder matches TF's greedy decoding", "[cpu][cuda][ctc]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor logits = tf::cast(tf::constant(kLogits, {6, 2, 4}), tf::float32);
    const tf::Tensor lengths = tf::cast(tf::constant<int64_t>({6, 4}, {2}), tf::int32);
    // TF 2.21: to_dense(decoded[0], -1) = [[0, -1, -1], [0, 2, 0]], neg_sum_logits =
    // [[-9.56612491607666], [-5.025811195373535]] (blank = 3, the last class).
    const auto d = tf::nn::ctc_greedy_decoder(logits, lengths);
    CHECK(d.decoded.dtype() == tf::int64);
    CHECK(d.decoded.shape() == tf::TensorShape{2, 6});
    check_values(d.decoded, {0, -1, -1, -1, -1, -1, 0, 2, 0, -1, -1, -1}, 0, 0);
    CHECK(d.neg_sum_logits.shape() == tf::TensorShape{2, 1});
    check_values(d.neg_sum_logits, {-9.56612491607666, -5.025811195373535}, 1e-6, 1e-6);
    // merge_repeated=False, blank_index=0: [[3, 3, 3, 3], [2, -1, -1, -1]].
    const auto e = tf::nn::ctc_greedy_decoder(logits, lengths, false, 0);
    check_values(e.decoded, {3, 3, 3, 3, -1, -1, 2, -1, -1, -1, -1, -1}, 0, 0);
    // Keras' mask_index=0 with merging: [[3, 3], [2]]; a negative blank counts from the end.
    check_values(tf::nn::ctc_greedy_decoder(logits, lengths, true, 0).decoded,
                 {3, 3, -1, -1, -1, -1, 2, -1, -1, -1, -1, -1}, 0, 0);
    check_values(tf::nn::ctc_greedy_decoder(logits, lengths, true, -1).decoded,
                 d.decoded.numpy<double>(), 0, 0);
    // float64 and a zero length.
    const auto z = tf::nn::ctc_greedy_decoder(tf::cast(logits, tf::float64),
                                              tf::constant<int64_t>({0, 6}, {2}));
    check_values(z.decoded, {-1, -1, -1, -1, -1, -1, 0, 2, 0, -1, -1, -1}, 0, 0);
    check_values(tf::slice(z.neg_sum_logits, {0, 0}, {1, 1}), {0}, 0, 0);

    // A None batch: one trace.
    auto f = tf::function(
        [](const tf::Tensor& x, const tf::Tensor& n) {
          return tf::nn::ctc_greedy_decoder(x, n).decoded;
        },
        tf::FunctionOptions{.input_signature = {tf::TensorSpec({6, tf::None, 4}),
                                                tf::TensorSpec({tf::None}, tf::int32)}});
    check_values(f(logits, lengths), d.decoded.numpy<double>(), 0, 0);
    check_values(f(tf::slice(logits, {0, 1, 0}, {-1, 1, -1}),
                   tf::cast(tf::constant<int64_t>({4}, {1}), tf::int32)),
                 {0, 2, 0, -1, -1, -1}, 0, 0);
    CHECK(f.tracing_count() == 1);

    require_error(
        [&] {
          tf::nn::ctc_greedy_decoder(logits, tf::constant<int32_t>({7, 1}));
        },
        {"[ctc_greedy_decoder] Condition 0 <= sequence_length <= 6 (the frame count) "
         "did not hold."});
    require_error(
        [&] {
          tf::nn::ctc_greedy_decoder(logits, tf::constant<int32_t>({1, 1, 1}));
        },
        {"sequence_length must be (batch,) = (2,), got shape (3,)"});
    require_error([&] { tf::nn::ctc_greedy_decoder(logits, lengths, true, 4); },
                  {"blank_index 4 is out of range for 4 classes"});
    require_error(
        [&] {
          tf::nn::ctc_greedy_decoder(tf::zeros({2, 3}), lengths);
        },
        {"inputs must be (frames, batch, classes)"});
  }
}
