// Keras' stateful recurrent layers (stateful = true): the states a call ends with are where the
// next call starts. Checked against Keras 3.15's values on identical weights, against running
// the whole sequence at once (a stateful layer fed a sequence in chunks gives the outputs of one
// call on the whole of it), eagerly and traced, in fit, saved and loaded, and the errors.
#include <cmath>
#include <string>
#include <vector>

#include "autograd/variable.h"
#include "core/device.h"
#include "core/error.h"
#include "jit/function.h"
#include "keras/functional.h"
#include "keras/layers.h"
#include "keras/layers_core.h"
#include "keras/layers_recurrent.h"
#include "keras/layers_rnn_cells.h"
#include "keras/losses.h"
#include "keras/model.h"
#include "keras/optimizers.h"
#include "keras/serialization.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/movement.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
namespace K = tf::keras;
namespace layers = tf::keras::layers;
using tf::testing::check_close;
using tf::testing::check_values;
using tf::testing::require_error;

namespace {

// Keras' test input: arange(16).reshape(2, 4, 2) / 10.
tf::Tensor keras_input() {
  std::vector<double> v(16);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i) / 10.0;
  return tf::cast(tf::convert_to_tensor(v, {2, 4, 2}), tf::float32);
}

// The weights of the Keras script: kernel 0.1 sin(i), recurrent kernel 0.1 cos(i), bias 0.01 i
// over the flat index i.
std::vector<tf::Tensor> keras_weights(const std::vector<tf::Variable>& vars) {
  std::vector<tf::Tensor> out;
  for (size_t k = 0; k < vars.size(); ++k) {
    std::vector<double> v(static_cast<size_t>(vars[k].shape().num_elements()));
    for (size_t i = 0; i < v.size(); ++i) {
      const double d = static_cast<double>(i);
      v[i] = k == 0 ? 0.1 * std::sin(d) : k == 1 ? 0.1 * std::cos(d) : 0.01 * d;
    }
    out.push_back(tf::cast(tf::convert_to_tensor(v, vars[k].shape()), tf::float32));
  }
  return out;
}

tf::Tensor sequence(int64_t batch, int64_t steps, int64_t features, int k = 0) {
  std::vector<double> v(static_cast<size_t>(batch * steps * features));
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.37 * double(i) + 0.2 + k);
  return tf::cast(tf::convert_to_tensor(v, {batch, steps, features}), tf::float32);
}

// x[:, begin:begin + size].
tf::Tensor steps_of(const tf::Tensor& x, int64_t begin, int64_t size) {
  std::vector<int64_t> b(static_cast<size_t>(x.rank()), 0), s(b.size(), -1);
  b[1] = begin;
  s[1] = size;
  return tf::slice(x, b, s);
}

}  // namespace

TEST_CASE("stateful recurrent layers match Keras 3.15 on identical weights", "[cpu][cuda][keras]") {
  // Keras: layer(x) twice, stateful=True, return_sequences=True; the second call's last
  // timestep and the kept states after it.
  struct Case {
    std::string name;
    layers::RecurrentLayer layer;
    std::vector<double> last;
    std::vector<std::vector<double>> states;
  };
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(device.to_string());
    CAPTURE(device.to_string());
    std::vector<Case> cases;
    cases.push_back({"LSTM",
                     layers::LSTM(3, {.return_sequences = true, .stateful = true}),
                     {0.006982672028243542, 0.06350632011890411, 0.09207206219434738,
                      -0.04091182351112366, 0.09734172374010086, 0.15052993595600128},
                     {{0.006982672028243542, 0.06350632011890411, 0.09207206219434738,
                       -0.04091182351112366, 0.09734172374010086, 0.15052993595600128},
                      {0.012881981208920479, 0.12436734139919281, 0.1881391853094101,
                       -0.07223948836326599, 0.19678926467895508, 0.34257474541664124}}});
    cases.push_back({"GRU",
                     layers::GRU(3, {.return_sequences = true, .stateful = true}),
                     {0.16455301642417908, 0.17277348041534424, 0.1644807904958725,
                      0.1919155716896057, 0.19964832067489624, 0.1663070023059845},
                     {{0.16455301642417908, 0.17277348041534424, 0.1644807904958725,
                       0.1919155716896057, 0.19964832067489624, 0.1663070023059845}}});
    cases.push_back({"SimpleRNN",
                     layers::SimpleRNN(3, {.return_sequences = true, .stateful = true}),
                     {0.010823344811797142, 0.008138863369822502, 0.007165148388594389,
                      0.022186432033777237, 0.014775474555790424, 0.0029714719858020544},
                     {{0.010823344811797142, 0.008138863369822502, 0.007165148388594389,
                       0.022186432033777237, 0.014775474555790424, 0.0029714719858020544}}});
    const tf::Tensor x = keras_input();
    for (Case& c : cases) {
      CAPTURE(c.name);
      CHECK(c.layer.stateful());
      CHECK(c.layer.states().empty());  // made by the first call
      c.layer.build({tf::None, 4, 2});
      c.layer.set_weights(keras_weights(c.layer.variables()));
      const tf::Tensor y1 = c.layer(x);
      const tf::Tensor y2 = c.layer(x);
      check_values(steps_of(y2, 3, 1), c.last, 1e-5, 1e-6);
      const std::vector<tf::Variable> states = c.layer.states();
      REQUIRE(states.size() == c.states.size());
      for (size_t i = 0; i < states.size(); ++i) {
        CHECK(states[i].name() == c.layer.name() + "/rnn_state:0");
        CHECK_FALSE(states[i].trainable());
        CHECK(states[i].placement() == device);
        check_values(states[i].value(), c.states[i], 1e-5, 1e-6);
      }
      // As Keras: the states are not weights.
      CHECK(c.layer.variables().size() == 3);
      CHECK(c.layer.non_trainable_variables().empty());
      // reset_state: the next call starts from zeros again.
      c.layer.reset_state();
      for (const tf::Variable& s : c.layer.states())
        CHECK(tf::reduce_max(tf::abs(s.value())).item<float>() == 0.0f);
      check_close(c.layer(x), y1, 1e-6, 1e-7);
    }
  }
}

TEST_CASE("stateful layers: a sequence in chunks gives the outputs of the whole sequence",
          "[cpu][cuda][keras]") {
  // Every recurrent layer kind; the chunks are called eagerly and through a traced function.
  struct Case {
    std::string name;
    K::Layer stateful, plain;
    std::vector<int64_t> step_shape;  // features...
  };
  auto make = [](const std::string& name, bool stateful) -> K::Layer {
    if (name == "SimpleRNN")
      return layers::SimpleRNN(4, {.return_sequences = true, .stateful = stateful});
    if (name == "LSTM") return layers::LSTM(4, {.return_sequences = true, .stateful = stateful});
    if (name == "GRU")
      return layers::GRU(4, {.return_sequences = true, .stateful = stateful, .reset_after = false});
    if (name == "RNN(LSTMCell)")
      return layers::RNN(layers::LSTMCell(4), {.return_sequences = true, .stateful = stateful});
    if (name == "RNN(StackedRNNCells)")
      return layers::RNN(layers::StackedRNNCells(layers::GRUCell(3), layers::SimpleRNNCell(2)),
                         {.return_sequences = true, .stateful = stateful});
    return layers::ConvLSTM1D(2, {3},
                              {.padding = "same", .return_sequences = true, .stateful = stateful});
  };
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(device.to_string());
    for (const std::string name :
         {"SimpleRNN", "LSTM", "GRU", "RNN(LSTMCell)", "RNN(StackedRNNCells)", "ConvLSTM1D"}) {
      for (const bool traced : {false, true}) {
        CAPTURE(device.to_string(), name, traced);
        const bool conv = name == "ConvLSTM1D";
        K::Layer s = make(name, true), p = make(name, false);
        const tf::Tensor x =
            conv ? tf::reshape(sequence(3, 6, 10), {3, 6, 5, 2}) : sequence(3, 6, 2);
        std::vector<int64_t> in_shape = x.shape().dims();
        in_shape[0] = tf::None;
        in_shape[1] = 2;
        s.build(tf::TensorShape(in_shape));
        p.build(tf::TensorShape(in_shape));
        p.set_weights(s.get_weights());
        const tf::Tensor whole = p(x);
        std::function<tf::Tensor(const tf::Tensor&)> call = [&s](const tf::Tensor& c) {
          return s(c);
        };
        if (traced) call = tf::function(call);
        std::vector<tf::Tensor> parts;
        for (int64_t t = 0; t < 6; t += 2) parts.push_back(call(steps_of(x, t, 2)));
        check_close(tf::concat(parts, 1), whole, 1e-5, 1e-6);
        // After reset_states the chunks start over.
        s.impl().reset_states();
        check_close(call(steps_of(x, 0, 2)), steps_of(whole, 0, 2), 1e-5, 1e-6);
      }
    }
  }
}

TEST_CASE("stateful layers: initial states, masks, reset_states(values) and Bidirectional",
          "[cpu][keras]") {
  const tf::Tensor x = sequence(2, 4, 3);
  SECTION("an explicit initial state wins, and its final states are kept (as Keras)") {
    layers::LSTM s(3, {.stateful = true});
    layers::LSTM p(3);
    s.build({tf::None, 4, 3});
    p.build({tf::None, 4, 3});
    p.set_weights(s.get_weights());
    const std::vector<tf::Tensor> init{tf::fill({2, 3}, tf::Tensor(0.5f)),
                                       tf::fill({2, 3}, tf::Tensor(-0.25f))};
    const std::vector<tf::Tensor> want = p.call_with_state(x, init);
    const std::vector<tf::Tensor> got = s.call_with_state(x, init);
    check_close(got[0], want[0]);
    check_close(s.states()[0].value(), want[1]);
    check_close(s.states()[1].value(), want[2]);
    // The next call continues from them.
    check_close(s(x), p.call_with_state(x, {want[1], want[2]})[0], 1e-6, 1e-7);
  }
  SECTION("reset_states(values) sets the kept states; before the first call it makes them") {
    layers::GRU s(3, {.stateful = true});
    layers::GRU p(3);
    s.build({tf::None, 4, 3});
    p.build({tf::None, 4, 3});
    p.set_weights(s.get_weights());
    const tf::Tensor h0 = tf::fill({2, 3}, tf::Tensor(0.3f));
    s.reset_states({h0});
    REQUIRE(s.states().size() == 1);
    check_close(s(x), p.call_with_state(x, {h0})[0]);
    require_error(
        [&] {
          s.reset_states({tf::zeros({3, 3})});
        },
        {"reset_states", "gru", "keeps 1 state(s), state 0 of shape (2, 3)",
         "value 0 of shape (3, 3)"});
    layers::GRU plain(3);
    require_error([&] { plain.reset_states({h0}); }, {"reset_states", "is not stateful"});
    plain.reset_state();  // nothing to reset: no error, as Keras
    CHECK(plain.states().empty());
  }
  SECTION("masked steps keep the states") {
    layers::SimpleRNN s(3, {.stateful = true});
    layers::SimpleRNN p(3);
    s.build({tf::None, 4, 3});
    p.build({tf::None, 4, 3});
    p.set_weights(s.get_weights());
    const tf::Tensor mask = tf::convert_to_tensor(
        std::vector<bool>{true, true, false, false, true, true, true, true}, {2, 4});
    s.call_with_mask(x, mask);
    check_close(s.states()[0].value(), p.call_with_state(x, {}, false, mask)[1]);
  }
  SECTION("Bidirectional: both copies are stateful, reset_state resets both") {
    layers::Bidirectional b(layers::GRU(2, {.stateful = true}));
    const tf::Tensor y1 = b(x);
    CHECK(b.forward_layer().states().size() == 1);
    CHECK(b.backward_layer().states().size() == 1);
    const tf::Tensor y2 = b(x);
    CHECK(tf::reduce_max(tf::abs(y2 - y1)).item<float>() > 1e-4f);
    b.reset_state();
    check_close(b(x), y1, 1e-6, 1e-7);
  }
}

TEST_CASE("stateful layers: batch size errors and distribution", "[cpu][keras]") {
  layers::LSTM l(3, {.stateful = true});
  const tf::Tensor x = sequence(2, 4, 3);
  l(x);
  // Keras' message.
  require_error([&] { l(sequence(1, 4, 3)); },
                {"lstm",
                 "If an RNN is stateful, the batch size of the input sequences must be "
                 "the same as the batch size of the initial state.",
                 "Expected batch size: 2", "Received batch size: 1"});
  // tf::function traces at each call's shapes: a trace for any batch size serves the states'
  // batch size, and another one is Keras' error again.
  auto any_batch = tf::function([&](const tf::Tensor& t) { return l(t); },
                                {.input_signature = {tf::TensorSpec({tf::None, 4, 3})}});
  CHECK(any_batch(x).shape() == tf::TensorShape({2, 3}));
  require_error([&] { any_batch(sequence(3, 4, 3)); },
                {"lstm", "Expected batch size: 2", "Received batch size: 3"});
  // The first call fixes the batch size, also when it is traced.
  layers::GRU g(3, {.stateful = true});
  auto traced = tf::function([&](const tf::Tensor& t) { return g(t); });
  traced(sequence(3, 4, 3));
  REQUIRE(g.states().size() == 1);
  CHECK(g.states()[0].shape() == tf::TensorShape({3, 3}));
  require_error([&] { g(x); }, {"gru", "Expected batch size: 3", "Received batch size: 2"});
}

TEST_CASE("stateful models: fit, predict, reset_states and save", "[cpu][keras]") {
  const tf::Tensor x = sequence(4, 5, 2);
  const tf::Tensor y = tf::reshape(tf::reduce_mean(x, {1, 2}), {4, 1});
  SECTION("a functional model with Input's batch_size fits at once") {
    K::KerasTensor in = K::Input({5, 2}, std::nullopt, "", 2);
    layers::LSTM lstm(4, {.stateful = true});
    K::Model model(in, layers::Dense(1)(lstm(in)));
    CHECK(model.stateful());
    model.compile(K::optimizers::SGD(0.1), K::losses::MeanSquaredError());
    const K::History h =
        model.fit(x, y, {.epochs = 3, .batch_size = 2, .verbose = 0, .shuffle = false});
    CHECK(h.history.at("loss").size() == 3);
    REQUIRE(lstm.states().size() == 2);
    CHECK(tf::reduce_max(tf::abs(lstm.states()[0].value())).item<float>() > 0.0f);
    // predict continues from the kept states; reset_states starts over.
    model.reset_states();
    const tf::Tensor p1 = model.predict(x, {.batch_size = 2});
    model.reset_states();
    check_close(model.predict(x, {.batch_size = 2}), p1);
    CHECK(tf::reduce_max(tf::abs(lstm.states()[0].value())).item<float>() > 0.0f);
    // The last batch of 5 samples in 2s does not fit Input's batch_size.
    const tf::Tensor five = tf::slice(tf::concat({x, x}, 0), {0, 0, 0}, {5, -1, -1});
    require_error([&] { model.predict(five, {.batch_size = 2}); },
                  {"expected shape=(2, 5, 2), found shape=(1, 5, 2)"});
    // The kept states are not weights: the weights file holds the three LSTM and two Dense
    // weights only.
    CHECK(model.weights().size() == 5);
  }
  SECTION("a Sequential model called once eagerly, then fit; its config round-trips") {
    K::Sequential model({layers::GRU(3, {.stateful = true}), layers::Dense(1)});
    model(steps_of(x, 0, 5));  // batch 4
    model.compile(K::optimizers::Adam(0.01), K::losses::MeanSquaredError());
    model.fit(x, y, {.epochs = 2, .batch_size = 4, .verbose = 0});
    const std::string json = K::saving::get_config_json(model.layers()[0]);
    CHECK(json.find("\"stateful\":true") != std::string::npos);
    // Without Input's batch_size the stateful layer gives Keras' error for a last, smaller
    // batch.
    const tf::Tensor five = tf::slice(tf::concat({x, x}, 0), {0, 0, 0}, {5, -1, -1});
    require_error([&] { model.predict(five, {.batch_size = 4}); },
                  {"gru", "Expected batch size: 4", "Received batch size: 1"});
    const K::Layer copy = K::saving::from_config_json("GRU", json);
    CHECK(copy.impl().stateful());
    const K::Layer conv = layers::ConvLSTM1D(2, {3}, {.stateful = true});
    CHECK(K::saving::from_config_json("ConvLSTM1D", K::saving::get_config_json(conv))
              .impl()
              .stateful());
    const K::Model plain = K::Sequential({layers::GRU(3), layers::Dense(1)});
    CHECK_FALSE(plain.stateful());
  }
}
