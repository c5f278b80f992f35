// Keras' merge layers (tf.keras.layers.Add, Subtract, Multiply, Average, Maximum, Minimum,
// Concatenate, Dot): layers called on a list of tensors, eager Tensors and the functional API's
// KerasTensors alike. See docs/keras.md, "Functional API".
//
//   auto y = tf::keras::layers::Add()({x, shortcut});            // a residual connection
//   auto z = tf::keras::layers::Concatenate()({a, b});          // along the last axis
//   tf::Tensor s = tf::keras::layers::Dot(1, true)(std::vector<tf::Tensor>{u, v});  // cosine
//
// The elementwise layers (Add, Subtract, Multiply, Average, Maximum, Minimum) check the shapes
// as Keras does: the batch sizes agree where known, and the other dimensions agree or one of
// them is 1 (broadcast); an input of lower rank gets size-1 axes after the batch axis. They
// have no weights; floating inputs are cast to the layer's dtype (Keras' autocast).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "keras/functional.h"
#include "keras/layers.h"

namespace tapeflow::keras {

namespace detail {

// The state of a merge layer: a list call, Keras' shape checks, no weights.
class MergeImpl : public LayerImpl {
 public:
  MergeImpl(std::string class_name, const std::string& generic_name, std::string name)
      : LayerImpl(std::move(class_name), generic_name, std::move(name)) {}

  // Keras' __call__ on a list: checks the shapes, marks the layer built (first call) and
  // merges.
  Tensor invoke_list(const std::vector<Tensor>& inputs);
  // invoke_list with Keras' masks (one per input, undefined for an unmasked one): Multiply,
  // Maximum and Minimum let masked entries drop out of the values as Keras 3.15 does; the
  // output's mask is merged_mask's.
  MaskedTensor invoke_masked_list(const std::vector<Tensor>& inputs,
                                  const std::vector<Tensor>& masks);
  // The output shape for the inputs' shapes (with their batch dimension), raising Keras'
  // errors for shapes that do not merge.
  virtual TensorShape merged_shape(const std::vector<TensorShape>& shapes) const;
  // The output dtype: the layer's for floating inputs, else the first input's.
  DType merged_dtype(const std::vector<DType>& dtypes) const;
  // Records the first call's shapes as the build (merge layers have no weights to make).
  void mark_built(const TensorShape& first_input, const TensorShape& output) {
    if (!built()) set_built_shapes(with_unknown_batch(first_input), with_unknown_batch(output));
  }

 protected:
  virtual Tensor merge(const std::vector<Tensor>& inputs) const = 0;
  // The merge given the inputs' masks (the default ignores them).
  virtual Tensor merge_masked(const std::vector<Tensor>& inputs,
                              const std::vector<Tensor>& /*masks*/) const {
    return merge(inputs);
  }
  // Keras' compute_mask for a merge: the OR of the masks, none when an input has none.
  virtual Tensor merged_mask(const std::vector<Tensor>& inputs,
                             const std::vector<Tensor>& masks) const;
  // A single tensor is not a list: Keras' error.
  Tensor run(const Tensor& x, bool training) override;
  Tensor call(const Tensor& x, bool training) override { return run(x, training); }
  // The shapes as Keras prints a list of them: "[(None, 3), (None, 4)]".
  static std::string shapes_text(const std::vector<TensorShape>& shapes);
  // The inputs cast to the layer's dtype, checked and recorded as the build.
  std::vector<Tensor> prepare(const std::vector<Tensor>& inputs);
  void require_count(const std::vector<TensorShape>& shapes, size_t at_least, size_t at_most) const;
};

}  // namespace detail

namespace layers {

// The handle of every merge layer: called on a list (a single tensor is an error, as Keras').
class Merge : public Layer {
 public:
  Tensor operator()(const std::vector<Tensor>& inputs) const;
  KerasTensor operator()(const std::vector<KerasTensor>& inputs) const;
  using Layer::operator();

 protected:
  explicit Merge(std::shared_ptr<detail::MergeImpl> impl);
};

// inputs[0] + inputs[1] + ...
class Add : public Merge {
 public:
  explicit Add(std::string name = "");
};
// inputs[0] - inputs[1] (exactly two inputs).
class Subtract : public Merge {
 public:
  explicit Subtract(std::string name = "");
};
// inputs[0] * inputs[1] * ...
class Multiply : public Merge {
 public:
  explicit Multiply(std::string name = "");
};
// (inputs[0] + inputs[1] + ...) / n
class Average : public Merge {
 public:
  explicit Average(std::string name = "");
};
// The elementwise maximum (minimum) of the inputs.
class Maximum : public Merge {
 public:
  explicit Maximum(std::string name = "");
};
class Minimum : public Merge {
 public:
  explicit Minimum(std::string name = "");
};

// Concatenates along `axis` (counting the batch axis; -1 the last); the other dimensions must
// match (None matches anything).
class Concatenate : public Merge {
 public:
  explicit Concatenate(int axis = -1, std::string name = "");
};

// Keras' Dot: the batchwise dot product of two inputs, contracting axis axes.first of the first
// with axis axes.second of the second (one int: the same axis in both; negative counts from the
// end; the batch axis 0 cannot be contracted). The output has the first input's other axes, then
// the second's (batch axis once), or shape (batch, 1) when nothing else is left. normalize:
// l2-normalize both along their contracted axes first (the cosine similarity).
//   Dot(1)  Dot(1, true)  Dot(std::pair{2, 1})   (a braced {2, 1} would read as Dot(2, true))
class Dot : public Merge {
 public:
  explicit Dot(int axes, bool normalize = false, std::string name = "");
  explicit Dot(std::pair<int, int> axes, bool normalize = false, std::string name = "");
};

}  // namespace layers
}  // namespace tapeflow::keras
