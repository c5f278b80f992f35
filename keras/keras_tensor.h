// Keras' KerasTensor: the symbolic value of the functional API (keras/functional.h), in a header
// of its own so that layers with calls of several inputs (keras/layers_attention.h) can take it.
#pragma once

#include <memory>
#include <string>

#include "core/tensor.h"

namespace tapeflow::keras {

class Layer;  // keras/layers.h

namespace detail {
struct KerasTensorData;
}

// A symbolic tensor of the functional API (Keras 3's KerasTensor).
class KerasTensor {
 public:
  // An empty handle; every accessor but defined() throws.
  KerasTensor() = default;
  explicit KerasTensor(std::shared_ptr<detail::KerasTensorData> data) : data_(std::move(data)) {}

  bool defined() const { return data_ != nullptr; }
  // The shape with the batch dimension (tf::None unless Input's batch_size gave it).
  const TensorShape& shape() const;
  int rank() const { return shape().rank(); }
  DType dtype() const;
  // "keras_tensor", "keras_tensor_1", ... (an Input's name when one was given).
  const std::string& name() const;
  // Keras' _keras_history: the layer whose call made it (an InputLayer for Input()), the index
  // of that call among the layer's calls on symbolic tensors, and which of the call's outputs
  // it is (0 but for calls of several outputs, such as RecurrentLayer::call_with_state).
  Layer layer() const;
  int node_index() const;
  int tensor_index() const;
  // "<KerasTensor shape=(None, 4), dtype=float32, name=keras_tensor>"
  std::string to_string() const;

  const std::shared_ptr<detail::KerasTensorData>& data() const { return data_; }

 private:
  const detail::KerasTensorData& checked() const;
  std::shared_ptr<detail::KerasTensorData> data_;
};

}  // namespace tapeflow::keras
