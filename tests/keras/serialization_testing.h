// Helpers of the serialization tests (tests/keras/test_serialization*.cpp): the weight formula
// the Keras reference scripts set, and the layers of a serialized model by name.
#pragma once

#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "keras/layers.h"
#include "keras/serialization_json.h"
#include "ops/factory.h"
#include "ops/unary.h"

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

// The layers of a serialized model (its "config" "layers" list), by name.
inline std::map<std::string, keras::saving::Config> layers_by_name(
    const keras::saving::Config& model) {
  std::map<std::string, keras::saving::Config> out;
  for (const keras::saving::Config& l : model["config"]["layers"])
    out[l["config"]["name"].get<std::string>()] = l;
  return out;
}

}  // namespace tapeflow::testing
