// Keras' Masking layer (keras.layers.Masking). The rest of masking lives on the Layer base
// (keras/layers.h: call_with_mask, supports_masking, compute_mask) and in the layers that make
// or read masks. See docs/keras_recurrent.md, "Masking and padding".
#pragma once

#include <string>

#include "keras/layers.h"

namespace tapeflow::keras::layers {

// Marks padded timesteps: a timestep of a (batch, timesteps, features) input whose features all
// equal `mask_value` is masked. The output is the input with masked timesteps set to zero, and
// its mask (Layer::call_with_mask, or what a Sequential or functional model passes on) is
// any(x != mask_value, axis=-1), (batch, timesteps). An incoming mask is replaced, as in Keras.
//   Masking()  Masking(-1.0)
class Masking : public Layer {
 public:
  explicit Masking(double mask_value = 0.0, std::string name = "");
  double mask_value() const;
};

}  // namespace tapeflow::keras::layers
