// The fixed weights and inputs of the tests that compare with values printed by a Keras script
// (tests/keras/functional_multi_reference.py and test_bidirectional_rnn.cpp's script): weight k
// of a layer or model (in variables() order, Keras' weights order) is 0.1 sin(i + k) over its
// flat index i, and inputs are ramps i / scale.
#pragma once

#include <cmath>
#include <cstddef>
#include <vector>

#include "keras/layers.h"
#include "ops/factory.h"
#include "ops/unary.h"

namespace tapeflow::testing::keras {

// float32 tensor of `shape` holding i / scale at flat index i (numpy's arange(n) / scale).
inline Tensor ramp(const TensorShape& shape, double scale) {
  std::vector<double> v(static_cast<size_t>(shape.num_elements()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i) / scale;
  return cast(convert_to_tensor(v, shape), float32);
}

// Sets weight k of `layer` to 0.1 sin(i + k) over its flat index i (float32).
inline void fill(const tapeflow::keras::Layer& layer) {
  std::vector<Tensor> ws;
  for (const Variable& w : layer.variables()) {
    const int k = static_cast<int>(ws.size());
    std::vector<double> v(static_cast<size_t>(w.shape().num_elements()));
    for (size_t i = 0; i < v.size(); ++i) v[i] = 0.1 * std::sin(static_cast<double>(i) + k);
    ws.push_back(cast(convert_to_tensor(v, w.shape()), float32));
  }
  layer.set_weights(ws);
}

}  // namespace tapeflow::testing::keras
