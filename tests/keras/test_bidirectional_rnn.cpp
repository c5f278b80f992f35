// Bidirectional around an RNN(cell) and a ConvLSTM: Keras 3.15's outputs on identical weights
// (with and without a mask), traced against eager, configs written and read, and its errors.
#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "jit/function.h"
#include "keras/layers.h"
#include "keras/layers_recurrent.h"
#include "keras/layers_rnn_cells.h"
#include "keras/serialization_json.h"
#include "keras/sine_weights.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/movement.h"
#include "ops/reduce.h"
#include "ops/scan.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
namespace K = tapeflow::keras;
namespace layers = tapeflow::keras::layers;
using tf::testing::check_close;
using tf::testing::check_values;
using tf::testing::require_error;
using tf::testing::keras::fill;
using tf::testing::keras::ramp;

namespace {

// Keras 3.15: Bidirectional(RNN(LSTMCell(3), return_sequences=True)) on arange(16).reshape(2, 4,
// 2) / 10, without and with the mask [[1, 1, 1, 0], [1, 1, 0, 0]].
const std::vector<double> kRnn = {
    0.022662309929728508,  0.010477937757968903,   -0.011120333336293697,  -0.03487449511885643,
    -0.027597889304161072, 0.0055620381608605385,  0.02925817482173443,    0.020211227238178253,
    -0.007109737955033779, -0.023211337625980377,  -0.030120328068733215,  -0.008740467950701714,
    0.02767074666917324,   0.02931337058544159,    0.004668958019465208,   -0.012609119527041912,
    -0.029236692935228348, -0.018846407532691956,  0.021770931780338287,   0.03793542459607124,
    0.020104562863707542,  -0.0040956418961286545, -0.021486252546310425,  -0.01947273313999176,
    0.0023057779762893915, 0.026889227330684662,   0.026163412258028984,   0.010250086896121502,
    -0.04829807206988335,  -0.06379103660583496,   -0.0019701302517205477, 0.04444609209895134,
    0.04823071137070656,   0.0184371005743742,     -0.04894442856311798,   -0.07352626323699951,
    -0.00975686963647604,  0.05703641101717949,    0.06728147715330124,    0.022959327325224876,
    -0.04474988579750061,  -0.0735851302742958,    -0.019489815458655357,  0.06697272509336472,
    0.08401443064212799,   0.01978943683207035,    -0.03122873790562153,   -0.054781220853328705};
const std::vector<double> kRnnMasked = {0.022662309929728508,
                                        0.010477937757968903,
                                        -0.011120333336293697,
                                        -0.034151721745729446,
                                        -0.025282880291342735,
                                        0.00712811853736639,
                                        0.02925817482173443,
                                        0.020211227238178253,
                                        -0.007109737955033779,
                                        -0.02190435491502285,
                                        -0.025211337953805923,
                                        -0.005005568265914917,
                                        0.02767074666917324,
                                        0.02931337058544159,
                                        0.004668958019465208,
                                        -0.010275817476212978,
                                        -0.0189193245023489,
                                        -0.010206210426986217,
                                        0,
                                        0,
                                        0,
                                        0,
                                        0,
                                        0,
                                        0.0023057779762893915,
                                        0.026889227330684662,
                                        0.026163412258028984,
                                        0.005539425648748875,
                                        -0.037115152925252914,
                                        -0.04649712145328522,
                                        -0.0019701302517205477,
                                        0.04444609209895134,
                                        0.04823071137070656,
                                        0.00804088544100523,
                                        -0.026464221999049187,
                                        -0.03756452351808548,
                                        0,
                                        0,
                                        0,
                                        0,
                                        0,
                                        0,
                                        0,
                                        0,
                                        0,
                                        0,
                                        0,
                                        0};
// Bidirectional(ConvLSTM1D(2, 3, padding="same"), merge_mode="sum") on arange(60).reshape(2, 3,
// 5, 2) / 30.
const std::vector<double> kConv = {
    0.00722084566950798,   0.009096033871173859,  -0.013656185939908028, 0.008277887478470802,
    -0.013961073011159897, 0.00886821374297142,   -0.016338828951120377, 0.00969131849706173,
    0.0028537875041365623, 0.0009134728461503983, 0.011834545992314816,  0.004863828420639038,
    -0.03853244334459305,  0.017224963754415512,  -0.03711105138063431,  0.017207350581884384,
    -0.04286307096481323,  0.01812264323234558,   0.003493446856737137,  0.0011046950239688158};

}  // namespace

TEST_CASE("Bidirectional around RNN(cell) and ConvLSTM matches Keras 3.15", "[keras][cpu]") {
  const tf::Tensor x = ramp({2, 4, 2}, 10.0);
  layers::Bidirectional b(layers::RNN(layers::LSTMCell(3), {.return_sequences = true}));
  b.build({tf::None, 4, 2});
  REQUIRE(b.variables().size() == 6);
  fill(b);
  CHECK(b.forward().name() == "forward_rnn");
  CHECK(b.backward().name() == "backward_rnn");
  check_values(b(x), kRnn, 1e-5, 1e-7);
  const tf::Tensor mask = tf::convert_to_tensor(
      std::vector<bool>{true, true, true, false, true, true, false, false}, {2, 4});
  check_values(b.call_with_mask(x, mask).output, kRnnMasked, 1e-5, 1e-7);
  // Traced: the same.
  auto traced = tf::function([&](const tf::Tensor& t) { return b(t); });
  check_close(traced(x), b(x), 1e-6, 1e-8);
  // call_with_state: the output, then the forward h, c and the backward h, c.
  const std::vector<tf::Tensor> with_state = b.call_with_state(x);
  REQUIRE(with_state.size() == 5);
  check_close(with_state[0], b(x));

  const tf::Tensor xc = ramp({2, 3, 5, 2}, 30.0);
  layers::Bidirectional c(layers::ConvLSTM1D(2, {3}, {.padding = "same"}), "sum");
  c.build({tf::None, 3, 5, 2});
  fill(c);
  check_values(c(xc), kConv, 1e-5, 1e-7);
  CHECK(c.output_shape() == tf::TensorShape({tf::None, 5, 2}));
  layers::Bidirectional cc(layers::ConvLSTM1D(2, {3}, {.padding = "same"}));
  cc.build({tf::None, 3, 5, 2});
  CHECK(cc.output_shape() == tf::TensorShape({tf::None, 5, 4}));
}

TEST_CASE("Bidirectional around RNN(cell): configs, stateful copies and errors",
          "[keras][cpu][serialization]") {
  const tf::Tensor x = ramp({2, 4, 2}, 10.0);
  layers::Bidirectional b(layers::RNN(layers::GRUCell(3), {.return_sequences = true}));
  b.build({tf::None, 4, 2});
  const K::saving::Config c = K::saving::get_config(b);
  // Keras writes the copies with zero_output_for_mask true when they return sequences.
  CHECK(c["layer"]["class_name"] == "RNN");
  CHECK(c["layer"]["config"]["zero_output_for_mask"] == true);
  CHECK(c["backward_layer"]["config"]["go_backwards"] == true);
  K::Layer copy = K::saving::from_config("Bidirectional", c);
  copy.build({tf::None, 4, 2});
  copy.set_weights(b.get_weights());
  check_close(copy(x), b(x));
  // A stateful RNN: both copies keep states, and reset_state resets both.
  layers::Bidirectional s(layers::RNN(layers::SimpleRNNCell(2), {.stateful = true}));
  const tf::Tensor y1 = s(x);
  CHECK(tf::reduce_max(tf::abs(tf::subtract(s(x), y1))).item<float>() > 1e-4f);
  s.reset_state();
  check_close(s(x), y1, 1e-6, 1e-8);
  // A ConvLSTM's copies return sequences: Keras writes zero_output_for_mask true in their
  // configs, and masked steps give zeros.
  layers::Bidirectional conv(
      layers::ConvLSTM1D(2, {3}, {.padding = "same", .return_sequences = true}));
  const tf::Tensor xc = ramp({2, 3, 5, 2}, 30.0);
  const tf::Tensor mask =
      tf::convert_to_tensor(std::vector<bool>{true, true, false, true, true, true}, {2, 3});
  const tf::Tensor yc = conv.call_with_mask(xc, mask).output;  // (2, 3, 5, 4)
  CHECK(tf::reduce_max(tf::abs(tf::slice(yc, {0, 2, 0, 0}, {1, 1, -1, -1}))).item<float>() == 0.0f);
  const K::saving::Config cc = K::saving::get_config(conv);
  CHECK(cc["layer"]["config"]["zero_output_for_mask"] == true);
  K::Layer conv_copy = K::saving::from_config("Bidirectional", cc);
  conv_copy.build({tf::None, 3, 5, 2});
  conv_copy.set_weights(conv.get_weights());
  check_close(conv_copy.call_with_mask(xc, mask).output, yc);
  // Keras' backward_layer argument: the two layers as they are.
  layers::GRU fwd(3, {.return_sequences = true, .name = "fwd"});
  layers::GRU bwd(3, {.return_sequences = true, .go_backwards = true, .name = "bwd"});
  layers::Bidirectional given(fwd, bwd, "sum");
  CHECK(given.forward().name() == "fwd");
  CHECK(given.backward().name() == "bwd");
  const tf::Tensor yg = given(x);
  check_close(yg, tf::add(fwd(x), tf::reverse(bwd(x), {1})));
  require_error(
      [] { layers::Bidirectional(layers::GRU(3), layers::GRU(4, {.go_backwards = true})); },
      {"Bidirectional", "units 4", "must be of the forward layer"});
  // forward_layer() is for a wrapped SimpleRNN, LSTM or GRU.
  CHECK_THROWS_AS(b.forward_layer(), tf::FailedPreconditionError);
  // A backward layer of another class.
  K::saving::Config bad = c;
  bad["backward_layer"] = K::saving::get_config(layers::RNN(layers::LSTMCell(3)));
  bad["backward_layer"] =
      K::saving::Config{{"class_name", "RNN"}, {"config", bad["backward_layer"]}};
  bad["backward_layer"]["config"]["go_backwards"] = true;
  require_error([&] { K::saving::from_config("Bidirectional", bad); },
                {"Bidirectional", "backward_layer"});
}
