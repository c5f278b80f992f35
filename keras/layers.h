// Keras layers (tf.keras.layers): Layer, the shared handle every layer and model is, and the
// built-in layers Dense, Conv2D, MaxPooling2D, AveragePooling2D, Flatten, Dropout,
// BatchNormalization, ReLU and Softmax (more layers in keras/layers_more.h). See docs/keras.md.
//
// A layer object is a handle on shared state (detail::LayerImpl): copying a layer refers to the
// same layer and the same weights, so layers go into initializer lists and containers by value.
// Weights are created lazily, on the first call, from the input's shape (Keras' build).
//
// Threading: calls may come from several threads at once (the replica threads of a
// tf::distribute strategy). The build runs exactly once, under the layer's mutex, with the
// variable-mirroring devices the layer captured at construction, so a layer made inside
// strategy.scope() gets mirrored weights with identical initial values on every replica even
// when its first call comes from inside strategy.run; later callers wait for the build and reuse
// it. After the build a call reads only immutable configuration and the (internally
// synchronised) variables. Configuration changes (set_trainable) must not race with calls.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "autograd/variable.h"
#include "core/context.h"
#include "core/device.h"
#include "core/error.h"
#include "core/tensor.h"
#include "keras/constraints.h"
#include "keras/initializers.h"
#include "keras/mixed_precision.h"
#include "keras/regularizers.h"
#include "keras/trackable.h"

namespace tapeflow::keras {

namespace detail {
class LayerImpl;
}
class KerasTensor;  // keras/functional.h

// A layer's output with its Keras mask (Keras 3 attaches it to the tensor as _keras_mask): a
// bool tensor of the input's leading dimensions, (batch, timesteps) for sequences, true where a
// timestep is real and false where it is padding. An undefined mask is Keras' None.
struct MaskedTensor {
  Tensor output;
  Tensor mask;
};

// The base of every layer and model: a shared handle (TF's tf.keras.layers.Layer).
class Layer : public Trackable {
 public:
  // An empty handle (for containers); every method but defined() throws.
  Layer() = default;
  explicit Layer(std::shared_ptr<detail::LayerImpl> impl) : impl_(std::move(impl)) {}
  Layer(const Layer&) = default;
  Layer& operator=(const Layer&) = default;
  ~Layer() override = default;

  // Runs the layer (Keras' __call__): builds it on the first call, checks the input's shape
  // against the build, and calls it. `training` selects Dropout's and BatchNormalization's
  // training behaviour.
  Tensor operator()(const Tensor& x, bool training = false) const;
  // The functional API (keras/functional.h): calls the layer on a symbolic input, building it
  // for that shape, and returns the symbolic output. The model passes its training flag to the
  // layer, as Keras 3 passes a given one; `training = true` keeps this call in training mode
  // when the model's flag is false (a C++ call cannot leave the flag out, as Keras' can).
  KerasTensor operator()(const KerasTensor& x, std::optional<bool> training = std::nullopt) const;

  // Masking (docs/keras_recurrent.md, "Masking and padding"). Keras' layer(x, mask=mask): calls
  // the layer with `mask` (undefined: none) and returns the output with its mask, which the
  // layer computes when it supports masking; a layer that does not drops the mask, as Keras 3
  // (with a warning, once per layer). The mask must be bool (anything else: nonzero is true) and
  // match the input's leading dimensions, else InvalidArgumentError naming the layer and shapes.
  MaskedTensor call_with_mask(const Tensor& x, const Tensor& mask, bool training = false) const;
  // Keras' layer.supports_masking: whether the layer passes a mask on (or makes one).
  bool supports_masking() const;
  // Keras' layer.compute_mask(x, mask): the mask the layer's output gets for input `x` with
  // `mask` (undefined when the layer does not support masking or gives none).
  Tensor compute_mask(const Tensor& x, const Tensor& mask = {}) const;

  bool defined() const { return impl_ != nullptr; }
  // Keras' automatic names: "dense", "dense_1", ... per process, unless one was given.
  std::string name() const;
  // The Keras class name: "Dense", "Conv2D", "Sequential", or a subclassed model's C++ class.
  std::string class_name() const;
  bool built() const;
  // The dtype of the layer's weights (Keras' layer.dtype): its policy's variable dtype
  // (backend::floatx() when no policy was set).
  DType dtype() const;
  // Mixed precision (keras/mixed_precision.h): the dtype policy the layer was constructed under
  // (the global policy then) or was given, and its dtypes. Keras' layer.dtype_policy,
  // layer.compute_dtype (inputs, outputs and weight reads in call) and layer.variable_dtype.
  mixed_precision::Policy dtype_policy() const;
  DType compute_dtype() const;
  DType variable_dtype() const { return dtype(); }
  // Keras' layer.dtype_policy = policy (or a layer's dtype= argument): before the build only,
  // since the weights are made in the variable dtype (FailedPreconditionError after it).
  void set_dtype_policy(const mixed_precision::Policy& policy) const;
  // Creates the weights for inputs of `input_shape` (tf::None for unknown dimensions, the batch
  // dimension included) without calling the layer, as Keras' layer.build(input_shape).
  void build(const TensorShape& input_shape) const;
  // The shape the layer was built for and the output shape for it, batch dimension None.
  // FailedPreconditionError before the build.
  TensorShape input_shape() const;
  TensorShape output_shape() const;

  // Keras 3's weight lists. variables() (= weights()): the layer's own trainable weights, then
  // its own non-trainable ones (each in creation order), then each sub-layer's variables() in
  // turn; trainable_variables() and non_trainable_variables() keep that order.
  std::vector<Variable> trainable_variables() const;
  std::vector<Variable> non_trainable_variables() const;
  std::vector<Variable> variables() const;
  std::vector<Variable> weights() const { return variables(); }
  // Keras' get_weights()/set_weights(): the current values of variables(), in that order, and
  // their assignment (InvalidArgumentError naming the weight on a count or shape mismatch).
  std::vector<Tensor> get_weights() const;
  void set_weights(const std::vector<Tensor>& values) const;
  // Number of scalars in all weights (trainable or not), as Keras' count_params().
  int64_t count_params() const;
  // Keras 3's layer.losses: the losses that add_loss() recorded during the latest call of this
  // layer on this thread (its own, then its sub-layers', in Keras' order), then the
  // regularization penalties of its trainable weights, evaluated now. See docs/keras.md.
  std::vector<Tensor> losses() const;
  // Keras' layer.trainable: a frozen layer's weights count as non-trainable and a frozen
  // BatchNormalization runs in inference mode. Setting it on a model sets it on all its layers.
  bool trainable() const;
  void set_trainable(bool trainable) const;

  // Trackable: "<layer name>/<weight name>" for every weight of this layer and its sub-layers,
  // e.g. "dense/kernel", "batch_normalization/moving_mean".
  std::vector<std::pair<std::string, Variable>> tracked_variables() const override;

  // Identity of the shared layer (same for every copy of the handle).
  const void* id() const { return impl_.get(); }
  detail::LayerImpl& impl() const;
  const std::shared_ptr<detail::LayerImpl>& impl_ptr() const { return impl_; }

 protected:
  std::shared_ptr<detail::LayerImpl> impl_;
};

namespace activations {
using Activation = std::function<Tensor(const Tensor&)>;
// Keras 3's names: "relu", "softmax", "sigmoid", "tanh", "softplus", "softsign", "elu", "selu",
// "gelu" (exact), "silu" and "swish" (the same), "leaky_relu" (negative_slope 0.2),
// "exponential", "relu6", "log_softmax", "log_sigmoid", the functions of keras/activations.h
// ("hard_sigmoid", "hard_silu" / "hard_swish", "mish", "celu", "glu", "hard_tanh",
// "hard_shrink", "soft_shrink", "tanh_shrink", "squareplus", "sparse_plus", "sparse_sigmoid"),
// "linear" or "" (identity). Anything else is an InvalidArgumentError naming the string.
Activation get(const std::string& name);
}  // namespace activations

namespace backend {
// Keras' floatx: the dtype of the weights of layers constructed afterwards (default float32).
// Floating inputs of another dtype are cast to the layer's dtype, as Keras' autocast.
DType floatx();
void set_floatx(DType dtype);
// Keras' image_data_format (keras.config.image_data_format): the data_format of the layers
// constructed afterwards with data_format "" (Keras' None): "channels_last" (the default) or
// "channels_first". Anything else is an InvalidArgumentError naming it.
std::string image_data_format();
void set_image_data_format(const std::string& data_format);
}  // namespace backend

// A pair of sizes (kernel, pool or stride) given as one int for both or as {height, width}.
struct Size2 {
  int h = 1, w = 1;
  Size2(int both) : h(both), w(both) {}  // NOLINT(google-explicit-constructor): Keras' ints
  Size2(int height, int width) : h(height), w(width) {}
};

namespace layers {

struct DenseOptions {
  std::string activation = "";
  bool use_bias = true;
  Initializer kernel_initializer = {};  // glorot_uniform
  Initializer bias_initializer = {};    // zeros
  Regularizer kernel_regularizer = {};
  Regularizer bias_regularizer = {};
  Constraint kernel_constraint = {};
  Constraint bias_constraint = {};
  // Keras' input_shape (without the batch dimension): builds the layer at construction.
  std::vector<int64_t> input_shape = {};
  std::string name = "";
};

// y = activation(x @ kernel + bias); kernel (in, units), bias (units,). Inputs of rank > 2 apply
// the kernel to the last axis.
//   Dense(10)  Dense(128, "relu")  Dense(64, "relu", false, "he_normal")
//   Dense(64, {.activation = "relu", .kernel_regularizer = tf::keras::regularizers::L2(1e-4)})
// (The positional form is a template so that a braced options list never converts to the
// activation string.)
class Dense : public Layer {
 public:
  explicit Dense(int64_t units) : Dense(units, DenseOptions{}) {}
  template <class S>
    requires std::is_convertible_v<S, std::string>
  Dense(int64_t units, S&& activation, bool use_bias = true, Initializer kernel_initializer = {},
        Initializer bias_initializer = {}, Regularizer kernel_regularizer = {},
        Regularizer bias_regularizer = {})
      : Dense(units, DenseOptions{.activation = std::string(std::forward<S>(activation)),
                                  .use_bias = use_bias,
                                  .kernel_initializer = std::move(kernel_initializer),
                                  .bias_initializer = std::move(bias_initializer),
                                  .kernel_regularizer = std::move(kernel_regularizer),
                                  .bias_regularizer = std::move(bias_regularizer)}) {}
  Dense(int64_t units, DenseOptions options);
  int64_t units() const;
  // The weights (FailedPreconditionError before the build; bias also without use_bias).
  Variable kernel() const;
  Variable bias() const;
};

struct Conv2DOptions {
  Size2 strides = 1;
  std::string padding = "valid";  // "valid" or "same", any case
  // "" or "channels_last" (NHWC), or "channels_first" (NCHW: the input and output transposed
  // around the NHWC convolution; the kernel is HWIO either way, as Keras').
  std::string data_format = "";
  // Keras forbids strides > 1 together with dilation_rate > 1.
  Size2 dilation_rate = 1;
  // Grouped convolution: input channels and filters split into `groups` groups, each group
  // convolved with its own filters / groups kernels (kernel (kh, kw, in / groups, filters)).
  int groups = 1;
  std::string activation = "";
  bool use_bias = true;
  Initializer kernel_initializer = {};
  Initializer bias_initializer = {};
  Regularizer kernel_regularizer = {};
  Regularizer bias_regularizer = {};
  Constraint kernel_constraint = {};
  Constraint bias_constraint = {};
  std::vector<int64_t> input_shape = {};  // (H, W, C), builds at construction
  std::string name = "";
};

// 2-D convolution of NHWC inputs with an HWIO kernel (kh, kw, in_channels / groups, filters).
//   Conv2D(32, 3)  Conv2D(32, {3, 3}, 2, "same", "relu")  Conv2D(32, 3, {.activation = "relu"})
// (Positional strides are an int or a Size2(h, w); a braced list there is the options.)
class Conv2D : public Layer {
 public:
  Conv2D(int64_t filters, Size2 kernel_size) : Conv2D(filters, kernel_size, Conv2DOptions{}) {}
  template <class St>
    requires std::is_convertible_v<St, Size2>
  Conv2D(int64_t filters, Size2 kernel_size, St&& strides, std::string padding = "valid",
         std::string activation = "")
      : Conv2D(filters, kernel_size,
               Conv2DOptions{.strides = Size2(std::forward<St>(strides)),
                             .padding = std::move(padding),
                             .activation = std::move(activation)}) {}
  Conv2D(int64_t filters, Size2 kernel_size, Conv2DOptions options);
  Variable kernel() const;
  Variable bias() const;
};

struct Conv2DTransposeOptions {
  Size2 strides = 1;
  std::string padding = "valid";  // "valid" or "same", any case
  // Extra rows/columns at the bottom/right of the output (each less than the stride); none:
  // Keras' default output size (below).
  std::optional<Size2> output_padding = std::nullopt;
  std::string data_format = "";  // "" or "channels_last" (NHWC), or "channels_first" (NCHW)
  Size2 dilation_rate = 1;
  std::string activation = "";
  bool use_bias = true;
  Initializer kernel_initializer = {};
  Initializer bias_initializer = {};
  Regularizer kernel_regularizer = {};
  Regularizer bias_regularizer = {};
  Constraint kernel_constraint = {};
  Constraint bias_constraint = {};
  std::vector<int64_t> input_shape = {};  // (H, W, C), builds at construction
  std::string name = "";
};

// Transposed 2-D convolution (Keras' Conv2DTranspose, "deconvolution") of NHWC inputs, through
// tf::nn::conv2d_transpose; kernel (kh, kw, filters, in_channels) as Keras'. The output height
// is Keras': in * stride + max(k - stride, 0) with "valid" and in * stride with "same" (k the
// dilated kernel size), or (in - 1) * stride + k - 2 * pad + output_padding when output_padding
// is given (pad = k / 2 with "same", 0 with "valid"); the same for the width.
//   Conv2DTranspose(32, 3, 2, "same")  Conv2DTranspose(1, {4, 4}, {.strides = 2, .padding =
//   "same"})
class Conv2DTranspose : public Layer {
 public:
  Conv2DTranspose(int64_t filters, Size2 kernel_size)
      : Conv2DTranspose(filters, kernel_size, Conv2DTransposeOptions{}) {}
  template <class St>
  requires std::is_convertible_v<St, Size2> Conv2DTranspose(int64_t filters, Size2 kernel_size,
                                                            St&& strides,
                                                            std::string padding = "valid",
                                                            std::string activation = "")
      : Conv2DTranspose(filters, kernel_size,
                        Conv2DTransposeOptions{.strides = Size2(std::forward<St>(strides)),
                                               .padding = std::move(padding),
                                               .activation = std::move(activation)}) {}
  Conv2DTranspose(int64_t filters, Size2 kernel_size, Conv2DTransposeOptions options);
  Variable kernel() const;
  Variable bias() const;
};

// The trailing arguments of a layer whose Keras signature ends in data_format and name, for
// the overloads that take them (ZeroPadding2D(1, {.data_format = "channels_first"})). The
// older overloads that end in a name are templates (template <class = void>): GCC 12 also
// matches a braced {.data_format = s} to a std::string parameter, and overload resolution
// prefers the non-template options overload when the two tie.
// data_format: "" or "channels_last" (channels in the last axis), or "channels_first" (channels
// in axis 1: the input and output are transposed around the channels_last computation;
// Conv1D/Conv2D/Conv2DTranspose run tf::nn's data_format "NCHW" ops).
struct FormatOptions {
  std::string data_format = "";
  std::string name = "";
};

struct Pooling2DOptions {
  std::optional<Size2> strides = std::nullopt;  // the pool size
  std::string padding = "valid";                // "valid" or "same", any case
  std::string data_format = "";                 // "" or "channels_last", or "channels_first"
  std::string name = "";
};

// Pooling over NHWC (or, with data_format "channels_first", NCHW) windows; strides default to
// the pool size (Keras').
//   MaxPooling2D(2)  MaxPooling2D(3, 2, "same")  MaxPooling2D(2, {.data_format = "channels_first"})
class MaxPooling2D : public Layer {
 public:
  template <class = void>  // see FormatOptions
  explicit MaxPooling2D(Size2 pool_size = 2, std::optional<Size2> strides = std::nullopt,
                        std::string padding = "valid", std::string name = "")
      : MaxPooling2D(pool_size, Pooling2DOptions{.strides = strides,
                                                 .padding = std::move(padding),
                                                 .name = std::move(name)}) {}
  MaxPooling2D(Size2 pool_size, Pooling2DOptions options);
};
class AveragePooling2D : public Layer {
 public:
  template <class = void>
  explicit AveragePooling2D(Size2 pool_size = 2, std::optional<Size2> strides = std::nullopt,
                            std::string padding = "valid", std::string name = "")
      : AveragePooling2D(pool_size, Pooling2DOptions{.strides = strides,
                                                     .padding = std::move(padding),
                                                     .name = std::move(name)}) {}
  AveragePooling2D(Size2 pool_size, Pooling2DOptions options);
};

struct FlattenOptions {
  // "" or "channels_last", or "channels_first": an input of rank 3 or more has its axis 1 moved
  // to the end before it is flattened (Keras' Flatten(data_format), which keeps a Dense layer
  // after it reading the same weights whichever format the convolutions before it use).
  std::string data_format = "";
  std::vector<int64_t> input_shape = {};
  std::string name = "";
};

// (batch, d1, d2, ...) -> (batch, d1 * d2 * ...). An input_shape (without the batch dimension,
// e.g. Flatten({28, 28})) builds the layer at construction, and a Sequential model that starts
// with it is built at once (Keras' input_shape argument).
class Flatten : public Layer {
 public:
  template <class = void>
  explicit Flatten(std::vector<int64_t> input_shape = {}, std::string name = "")
      : Flatten(FlattenOptions{.input_shape = std::move(input_shape), .name = std::move(name)}) {}
  explicit Flatten(FlattenOptions options);
};

// Zeroes inputs with probability `rate` and scales the rest by 1 / (1 - rate) when called with
// training = true (tf::nn::dropout); the identity otherwise.
class Dropout : public Layer {
 public:
  explicit Dropout(double rate, std::optional<int64_t> seed = std::nullopt, std::string name = "");
  double rate() const;
};

struct BatchNormalizationOptions {
  int axis = -1;
  double momentum = 0.99;
  double epsilon = 1e-3;
  bool center = true;  // beta
  bool scale = true;   // gamma
  Initializer beta_initializer = {};              // zeros
  Initializer gamma_initializer = {};             // ones
  Initializer moving_mean_initializer = {};       // zeros
  Initializer moving_variance_initializer = {};  // ones
  Regularizer beta_regularizer = {};
  Regularizer gamma_regularizer = {};
  Constraint beta_constraint = {};
  Constraint gamma_constraint = {};
  std::string name = "";
};

// Normalises along `axis` (the channels). Training (training = true and the layer trainable):
// uses the batch's mean and (biased) variance over the other axes and updates
//   moving = moving * momentum + batch * (1 - momentum).
// Inference: uses the moving statistics. gamma and beta are trainable; moving_mean and
// moving_variance are not. Inside a strategy's replica the batch statistics for the update are
// averaged over the replicas (one all-reduce), so every replica applies the same update and the
// mirrored copies stay identical; this equals TF's cross-replica read of its ON_READ
// moving statistics. The normalisation itself uses each replica's own batch, as TF's.
class BatchNormalization : public Layer {
 public:
  BatchNormalization() : BatchNormalization(BatchNormalizationOptions{}) {}
  // Keras' positional order; BatchNormalization({.momentum = 0.9}) takes the options.
  template <class A>
    requires std::is_integral_v<A>
  explicit BatchNormalization(A axis, double momentum = 0.99, double epsilon = 1e-3,
                              bool center = true, bool scale = true)
      : BatchNormalization(BatchNormalizationOptions{.axis = static_cast<int>(axis),
                                                     .momentum = momentum,
                                                     .epsilon = epsilon,
                                                     .center = center,
                                                     .scale = scale}) {}
  explicit BatchNormalization(BatchNormalizationOptions options);
  Variable gamma() const;
  Variable beta() const;
  Variable moving_mean() const;
  Variable moving_variance() const;
};

// max(x, 0); with Keras 3's options, as its relu computes them: x > threshold ?
// min(x, max_value) : negative_slope * (x - threshold), with Keras' gradients at the
// boundaries (threshold and max_value >= 0).
class ReLU : public Layer {
 public:
  explicit ReLU(std::optional<double> max_value = std::nullopt, double negative_slope = 0.0,
                double threshold = 0.0, std::string name = "");
};

// `dtype`: Keras' dtype argument, a policy (Softmax(-1, "", "float32"): a float32 output layer
// in a mixed-precision model).
class Softmax : public Layer {
 public:
  explicit Softmax(int axis = -1, std::string name = "",
                   std::optional<mixed_precision::Policy> dtype = std::nullopt);
};

}  // namespace layers

namespace detail {

// One weight of a layer.
struct Weight {
  std::string name;  // "kernel"
  Variable variable;
  Regularizer regularizer;
  bool outside_build = false;  // made before the build (a constructor, a direct build() call)
  bool published = false;      // visible to the weight lists before the layer is built
  uint64_t pass = 0;           // the build pass that made or reused it (0: none)
};

// The shared state behind a Layer handle. Concrete layers override build(), call() and
// compute_output_shape(); models (keras/model.h) derive from it too.
class LayerImpl : public std::enable_shared_from_this<LayerImpl> {
 public:
  // `generic_name` is the snake_case base of the automatic name ("dense"); an empty `name` asks
  // for the next automatic one.
  LayerImpl(std::string class_name, const std::string& generic_name, std::string name);
  virtual ~LayerImpl() = default;
  LayerImpl(const LayerImpl&) = delete;
  LayerImpl& operator=(const LayerImpl&) = delete;

  virtual std::string name() const { return name_; }
  virtual std::string class_name() const { return class_name_; }
  DType dtype() const { return dtype_; }
  DType compute_dtype() const { return compute_dtype_; }
  const std::string& policy_name() const { return policy_name_; }
  // See Layer::set_dtype_policy.
  void set_dtype_policy(const mixed_precision::Policy& policy);

  // Keras' __call__ (see Layer::operator()).
  Tensor invoke(const Tensor& x, bool training);
  // Keras' __call__ with a mask (see Layer::call_with_mask): invoke() with `mask` readable by
  // call() through call_mask(), then the output's mask.
  MaskedTensor invoke_masked(const Tensor& x, const Tensor& mask, bool training);

  // Masking. A layer that supports masking overrides supports_masking() to return true (Keras'
  // self.supports_masking = True); it then passes the mask on unchanged unless it overrides
  // compute_mask too (Keras' compute_mask(inputs, previous_mask); `mask` undefined = None).
  // Layers that do not support masking drop a mask they are given (Keras 3). A layer that
  // consumes a mask reads it in call() with call_mask(), whether or not it supports masking.
  virtual bool supports_masking() const { return false; }
  virtual Tensor compute_mask(const Tensor& /*x*/, const Tensor& mask) const { return mask; }
  // Whether a mask given to this layer broadcasts against its input from the last axis, numpy's
  // rule (Keras' Softmax: a (batch, 1, keys) mask for (batch, queries, keys) scores), instead of
  // covering the input's leading dimensions (every other layer).
  virtual bool mask_broadcasts_from_last_axis() const { return false; }
  // Builds once (thread-safe); `input_shape` gets batch dimension None.
  void ensure_built(const TensorShape& input_shape);
  bool built() const { return built_.load(std::memory_order_acquire); }
  TensorShape built_input_shape() const;
  TensorShape built_output_shape() const;

  // Output shape for an input shape (batch dimension None where unknown); default: unchanged.
  virtual TensorShape compute_output_shape(const TensorShape& input_shape) const {
    return input_shape;
  }
  // check_input for callers outside the layer (containers checking a shape before they ask
  // for compute_output_shape).
  void validate_input(const TensorShape& shape) const { check_input(shape); }
  // The input_shape given at construction (batch dimension None), if any.
  const std::optional<TensorShape>& declared_input_shape() const { return declared_input_shape_; }

  // Weights of this layer only, in creation order (complete once built()).
  const std::vector<Weight>& own_weights() const { return weights_; }
  // Whether this thread is building this layer now (inside its build()).
  bool building_here() const;
  // Keras' add_loss: records `loss` for the current call of this layer on this thread.
  // FailedPreconditionError outside a call of this layer; ignored while the layer builds (a
  // subclassed model's shape probe).
  void add_loss(const Tensor& loss);
  // The losses add_loss recorded during the latest call of this layer on this thread (or, on a
  // thread that never called it, the latest call on any thread), this layer's first and then
  // its sub-layers' in Keras 3's order (_flatten_layers).
  std::vector<Tensor> added_losses() const;
  // Sub-layers whose weights belong to this layer (models' layers), in order.
  virtual std::vector<Layer> sublayers() const { return {}; }
  // Keras' stateful recurrent layers (keras/rnn_state.h): whether this layer or one of its
  // sub-layers keeps states from call to call (tf.keras 2's model.stateful), and setting every
  // kept state to zeros (tf.keras 2's model.reset_states()). The defaults ask the sub-layers.
  virtual bool stateful() const;
  virtual void reset_states();

  // Keras 3's layer.weights with each weight's effective trainability (see Layer); `seen`
  // deduplicates shared weights. Virtual for a layer that, as in Keras, lists a sub-layer's
  // weight among its own (SpectralNormalization's kernel).
  virtual void collect(std::vector<std::pair<Variable, bool>>& out, bool parent_trainable,
                       std::vector<const void*>& seen) const;
  // Checkpoint names: this layer's weights as "<path>/<weight>", its sub-layers under
  // "<path>/<local name>" (the root's sub-layers directly under their local names).
  void collect_tracked(std::vector<std::pair<std::string, Variable>>& out,
                       std::vector<const void*>& seen_layers, const std::string& path,
                       bool root) const;
  // The name this layer has among its siblings: an explicit name as given, an automatic one as
  // its base ("dense" for "dense_12"); the parent numbers repeats ("dense", "dense_1").
  std::string local_base_name() const;
  // The weight regularization penalties of the trainable weights, in trainable_variables()
  // order (Keras 3 leaves out the frozen ones).
  void collect_losses(std::vector<Tensor>& out, bool parent_trainable,
                      std::vector<const void*>& seen) const;

  bool trainable() const { return trainable_.load(std::memory_order_relaxed); }
  // Sets the flag on this layer and every sub-layer (Keras' trainable setter).
  void set_trainable(bool t);

  // The sub-layer `child` was called while this layer's call ran on this thread (subclassed
  // models track their member layers this way).
  virtual void on_sublayer_called(LayerImpl& /*child*/) {}
  // Builds now for an input_shape given at construction (without the batch dimension); the
  // handle's constructor calls it once the impl is complete.
  void build_from_declared_shape(const std::vector<int64_t>& input_shape);

  // A checkpoint value for a weight that does not exist yet (tf::train::Checkpoint's deferred
  // restoration), by the name tracked_variables() will give it ("dense/kernel"). `restore` runs
  // once, with the weight, as soon as the layer that creates it is built: before that layer's
  // first call computes anything. It runs eagerly, outside traces and tapes, in the cross-replica
  // view (an assignment writes every mirrored copy); an exception it throws reaches the call
  // that built the layer.
  using DeferredRestore = std::function<void(Variable)>;
  void defer_restore(std::string tracked_name, DeferredRestore restore);
  // Whether this layer and every sub-layer are built (a subclassed model's member layers that
  // its calls have not reached yet are not).
  bool fully_built() const;

 protected:
  // Creates the weights for `input_shape` (batch dimension None); runs once, under the build
  // mutex, eagerly (outside any trace and tape) and with the captured mirroring devices.
  virtual void build(const TensorShape& /*input_shape*/) {}
  virtual Tensor call(const Tensor& x, bool training) = 0;
  // Checks a call's input against the build; throws InvalidArgumentError naming the layer and
  // both shapes. The default checks the input_shape given at construction, if any.
  virtual void check_input(const TensorShape& shape) const;
  // Whether inputs are cast to the layer's dtype (floating inputs always are; other dtypes only
  // when this is true).
  virtual bool casts_all_inputs() const { return true; }
  // Keras' layer.autocast. A layer that returns false (BatchNormalization, LayerNormalization,
  // Embedding, as Keras) computes in its variable dtype under a mixed policy: its inputs are cast
  // to the variable dtype instead of the compute dtype, its weights are read uncast, and its
  // output is cast to the compute dtype (Keras keeps normalization statistics in float32).
  virtual bool autocast() const { return true; }
  // Registers with the calling layer, builds, checks and calls; models override it.
  virtual Tensor run(const Tensor& x, bool training);
  // Raises e, caught from a call of this layer on `inputs`, again: unchanged when its message
  // names this layer first, else of the same type with "[name] layer "name" (Class) called on
  // <inputs>: " in front (Keras' "Exception encountered when calling ..."). Call it from the
  // handler that caught e.
  [[noreturn]] void rethrow_from_call(const Error& e, const std::vector<Tensor>& inputs) const;
  // The mask this call of the layer was given (Layer::call_with_mask, a Sequential or functional
  // model passing a mask on, or an explicit mask argument), or an undefined tensor: Keras' mask
  // argument of call(). Only inside this layer's own call(), on the calling thread.
  Tensor call_mask() const;
  // For a layer whose call computes its output mask itself (models): the mask of the output of
  // this call, used instead of compute_mask().
  void set_output_mask(const Tensor& mask);

  // Creates a weight "<layer>/<name>". Inside build(); or before the layer is built and outside
  // its calls (a custom layer's constructor, or a direct call of its build override): such a
  // weight is kept, and the build reuses it when it asks for the same name and shape again.
  // Refused inside a call and after the build; a name used twice in one build is an error.
  // A defined `constraint` is attached to the weight (constraints::of), so that Keras'
  // optimizers project it after each update.
  Variable add_weight(const std::string& name, const TensorShape& shape,
                      const Initializer& initializer, bool trainable,
                      const Regularizer& regularizer = {}, const Constraint& constraint = {});
  // Runs `fn` as a build of this layer on this thread: eagerly (BuildScope), with add_weight
  // allowed; the weights it made are published when it returns, and removed if it throws.
  void run_as_build(const std::function<void()>& fn);
  // Hands deferred checkpoint values to the weights that exist now (a subclassed model's own
  // weights, made by its build() before its first call computes).
  void restore_deferred_now() { after_build(); }
  // Records the build's shapes and marks the layer built (the first writer wins); models that
  // build by being called use it. set_output_shape replaces the output shape (Sequential::add).
  void set_built_shapes(const TensorShape& input_shape, const TensorShape& output_shape);
  void set_output_shape(const TensorShape& output_shape);

 public:
  // A weight by name (FailedPreconditionError before the build or for a missing weight).
  const Variable& weight(const std::string& name) const;

 protected:
  // The "[name] input of layer ..." prefix of shape errors.
  [[noreturn]] void incompatible(const TensorShape& got, const std::string& expectation) const;
  // Keras' input check of a layer built for `rank`-d inputs with `channels` in the last axis
  // (a None last axis passes): incompatible() with Keras' wording otherwise.
  // With channels_first the channels are axis 1.
  void require_rank_and_channels(const TensorShape& got, int rank, int64_t channels,
                                 bool channels_first = false) const;
  std::string class_name_;
  std::string name_;
  bool auto_named_ = false;
  DType dtype_;          // the variable dtype
  DType compute_dtype_;  // the compute dtype (the same unless the policy is mixed)
  std::string policy_name_;
  ::tapeflow::detail::MirrorSpec mirror_spec_;      // captured at construction
  std::optional<TensorShape> declared_input_shape_;  // with batch dimension None

 private:
  friend class ::tapeflow::keras::Layer;
  std::mutex build_mu_;
  std::atomic<bool> built_{false};
  std::atomic<bool> trainable_{true};
  mutable std::mutex shape_mu_;
  TensorShape input_shape_, output_shape_;  // guarded by shape_mu_
  // Written before and during the build only, under weights_mu_; read without it once built.
  mutable std::mutex weights_mu_;
  std::vector<Weight> weights_;
  uint64_t build_pass_ = 0;    // the running build pass (guarded by weights_mu_)
  uint64_t build_passes_ = 0;  // passes so far (guarded by weights_mu_)
  bool visible(const Weight& w) const { return w.published || building_here(); }
  // The weights the lists show now: all once built, else the published ones (and, to the thread
  // that builds, those of its build).
  // (weights_ itself once built, with no copy; else the visible ones, copied into `scratch`.)
  const std::vector<Weight>& visible_weights(std::vector<Weight>& scratch) const;
  // add_loss records, one per thread that called the layer: the outermost call it belonged to
  // and the losses added since.
  struct CallLosses {
    std::thread::id thread;
    uint64_t call = 0;
    std::vector<Tensor> losses;
  };
  mutable std::mutex losses_mu_;
  std::vector<CallLosses> call_losses_;  // guarded by losses_mu_
  // Set once add_loss ran in a call of this layer (or of one it called): until then a call
  // notes nothing and takes no lock, since there is nothing to clear.
  std::atomic<bool> has_call_records_{false};
  void note_call(uint64_t call);
  // This thread's record, moved to `call` (its losses cleared) if it was older.
  CallLosses& note_call_locked(uint64_t call);
  // Deferred checkpoint values (defer_restore) and the step that hands them to new weights.
  std::mutex deferred_mu_;
  std::vector<std::pair<std::string, DeferredRestore>> deferred_;  // guarded by deferred_mu_
  std::atomic<bool> has_deferred_{false};
  bool warned_leftovers_ = false;  // guarded by deferred_mu_
  bool publishing_ = false;        // guarded by shape_mu_: set_built_shapes' first caller
  std::atomic<bool> warned_mask_drop_{false};  // the "drops the mask" warning went out
  // built(), or being published as built by this thread (set_built_shapes).
  bool built_here() const;
  // Hands deferred values to the weights just built: those of the layers being called on this
  // thread (a model whose member layer has just built) and this layer's own.
  void after_build();
  // Runs the deferred values whose weights exist now; once this layer and all below it are
  // built, a warning names the others once (they keep waiting).
  void restore_deferred();
};

// Marks `layer` as the layer whose call runs on this thread while it lives: layers called
// meanwhile report to it (on_sublayer_called). invoke() opens one; so does anything that runs a
// model's call() outside invoke().
class CallFrame {
 public:
  explicit CallFrame(LayerImpl* layer);
  ~CallFrame();
  CallFrame(const CallFrame&) = delete;
  CallFrame& operator=(const CallFrame&) = delete;
};

// The next automatic name for a base name: "dense", "dense_1", ... (Keras' unique_object_name).
std::string unique_name(const std::string& base);
// Keras' to_snake_case ("MaxPooling2D" -> "max_pooling2d", "ReLU" -> "re_lu").
std::string to_snake_case(const std::string& class_name);
// `shape` with its first dimension replaced by tf::None (a batch-less description of inputs).
TensorShape with_unknown_batch(TensorShape shape);

// While it lives: no trace and no tape on this thread, variables mirrored as `mirror` says, and the
// cross-replica view of mirrored variables. Layers build and compute initial values under it,
// so initial values are computed once, eagerly, even when the first call is traced.
class BuildScope {
 public:
  explicit BuildScope(const ::tapeflow::detail::MirrorSpec& mirror);
  ~BuildScope();
  BuildScope(const BuildScope&) = delete;
  BuildScope& operator=(const BuildScope&) = delete;

 private:
  ::tapeflow::detail::TraceObserver* saved_trace_;
  ::tapeflow::detail::PauseTapes pause_;
  ::tapeflow::detail::MirrorVariablesScope mirror_;
  ::tapeflow::detail::ReplicaComponentScope replica_;
};

}  // namespace detail
}  // namespace tapeflow::keras
