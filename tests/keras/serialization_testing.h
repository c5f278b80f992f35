// Helpers of the serialization tests (tests/keras/test_serialization*.cpp and
// test_channels_first.cpp): the weight formula and the input the Keras reference scripts set,
// a Keras model's JSON with its reference prediction, and the layers of a serialized model by
// name.
#pragma once

#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "keras/layers.h"
#include "keras/model.h"
#include "keras/serialization_json.h"
#include "ops/factory.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tapeflow::testing {

// The weights the Keras reference scripts gave their models (or a layer): weight i
// (get_weights() order), element j: 0.5 sin(0.37 j + 1.3 i), plus 1 for weight `plus_one` (a
// moving variance). In Python:
//   ws = [(0.5 * np.sin(0.37 * np.arange(w.size) + 1.3 * i)).reshape(w.shape)
//         for i, w in enumerate(model.get_weights())]
inline void set_formula_weights(const keras::Layer& model, int plus_one = -1) {
  std::vector<Tensor> values;
  const auto current = model.get_weights();
  for (size_t i = 0; i < current.size(); ++i) {
    const int64_t n = current[i].shape().num_elements();
    std::vector<double> v(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j)
      v[static_cast<size_t>(j)] = 0.5 * std::sin(0.37 * double(j) + 1.3 * double(i)) +
                                  (static_cast<int>(i) == plus_one ? 1.0 : 0.0);
    values.push_back(cast(convert_to_tensor(v, current[i].shape()), current[i].dtype()));
  }
  model.set_weights(values);
}

// cos(0.1 * arange(n)).reshape(shape) in float32, the reference scripts' input.
inline Tensor cos_input(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<double> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::cos(0.1 * double(i));
  return cast(convert_to_tensor(v, TensorShape(shape)), float32);
}

// A model Keras wrote (model.to_json()), the input shape it was called on, its prediction with
// set_formula_weights' weights on cos_input, and its weights' shapes (get_weights() order).
struct KerasModel {
  const char* name;
  const char* json;
  std::vector<int64_t> input_shape;
  const std::vector<double>* pred;
  const std::vector<std::vector<int64_t>>* shapes;
};

// Loads m's JSON, checks its weights' shapes, sets the formula weights and checks the
// prediction against Keras' (on the current device).
inline void check_keras_prediction(const KerasModel& m) {
  keras::Model model = keras::models::model_from_json(m.json);
  REQUIRE(model.built());
  const auto weights = model.get_weights();
  REQUIRE(weights.size() == m.shapes->size());
  for (size_t i = 0; i < weights.size(); ++i)
    CHECK(weights[i].shape() == TensorShape((*m.shapes)[i]));
  set_formula_weights(model);
  check_values(model(cos_input(m.input_shape), false), *m.pred, 2e-5, 2e-6);
}

// The layers of a serialized model (its "config" "layers" list), by name.
inline std::map<std::string, keras::saving::Config> layers_by_name(
    const keras::saving::Config& model) {
  std::map<std::string, keras::saving::Config> out;
  for (const keras::saving::Config& l : model["config"]["layers"])
    out[l["config"]["name"].get<std::string>()] = l;
  return out;
}

}  // namespace tapeflow::testing
