// Models (tf.keras.Model, tf.keras.Sequential): layers made of layers. See docs/keras.md.
//
// A Model is a Layer handle (copying it refers to the same model), so models nest inside
// Sequential and other models. Subclassing works as in Keras:
//
//   class MyModel : public tf::keras::Model {
//    public:
//     tf::Tensor call(const tf::Tensor& x, bool training) override {
//       return d2(d1(x), training);
//     }
//    private:
//     tf::keras::layers::Dense d1{128, "relu"}, d2{10};
//   };
//
// Member tracking: a layer called inside call() is tracked by the model on that first call, in
// call order (Keras tracks attributes; C++ cannot see members, but it sees calls). Layers that
// must be tracked before the first call (to build them by hand, or because call() may skip
// them) are wrapped in track(): `Dense d1 = track(Dense(128, "relu"));`.
//
// Dispatch and lifetime: the shared state knows every live object of the user's class that
// shares it (the original and its copies), and a call through any handle (a copy sliced to
// Layer inside a Sequential, say) runs call() on one of them. Rule: keep at least one object of
// the subclass alive while any handle to the model is used; after the last one is destroyed a
// call through a remaining handle is a FailedPreconditionError naming the model, not a crash.
// Objects must not be destroyed while another thread calls the model.
//
// Threading: as layers (keras/layers.h). summary(), layers() and the weight lists may run
// concurrently with calls; Sequential::add must not.
#pragma once

#include <atomic>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "keras/layers.h"
#include "keras/training.h"

namespace tapeflow::keras {

class Model;

namespace detail {

struct TrainingState;  // keras/training.cpp

// State of a model. Subclassed models dispatch call() to a live object of the user's class;
// Sequential (SequentialImpl, model.cpp) runs its layer list.
class ModelImpl : public LayerImpl {
 public:
  // An empty `name` gives an automatic one: "sequential", "sequential_1" for a generic name,
  // else the snake_case of the subclass's C++ class ("MyModel" -> "my_model"), chosen when the
  // name is first needed.
  ModelImpl(std::string class_name, const std::string& generic_name, std::string name);

  std::string name() const override;
  std::string class_name() const override;
  std::vector<Layer> sublayers() const override;
  void on_sublayer_called(LayerImpl& child) override;
  TensorShape compute_output_shape(const TensorShape& input_shape) const override;

  // Adds a layer to the tracked list (no-op when already there).
  virtual void track(const Layer& layer);
  void add_instance(Model* m);
  void remove_instance(Model* m);

  // Keras' summary table (the text summary() prints).
  std::string summary(int line_length) const;
  // The "Connected to" column of a functional model that is not a plain chain, one entry per
  // sublayers() entry (Keras' 4-column summary); empty for the 3-column table.
  virtual std::vector<std::string> summary_connections() const { return {}; }
  // Per layer of sublayers(), the "Output Shape" entry of summary(), where the layer's own
  // output_shape() does not say it (a call of several outputs); empty: none differ.
  virtual std::vector<std::string> summary_shapes() const { return {}; }

  // Runs the subclass's build(input_shape) override once (Keras' build, before the first
  // call), eagerly and mirrored as layers build; a no-op once it ran or while it runs here.
  void run_build_hook(const TensorShape& input_shape);
  // For Model::add_weight (LayerImpl::add_weight's rules).
  Variable add_custom_weight(const std::string& name, const TensorShape& shape,
                             const Initializer& initializer, bool trainable,
                             const Regularizer& regularizer, const Constraint& constraint) {
    return add_weight(name, shape, initializer, trainable, regularizer, constraint);
  }

  // Masking of a subclassed model (custom layer): Model::set_supports_masking's flag, and its
  // compute_output_mask override.
  bool supports_masking() const override {
    return supports_masking_.load(std::memory_order_relaxed);
  }
  Tensor compute_mask(const Tensor& x, const Tensor& mask) const override;
  void set_supports_masking(bool value) {
    supports_masking_.store(value, std::memory_order_relaxed);
  }
  // For Model::call_mask (LayerImpl::call_mask's rules).
  Tensor current_call_mask() const { return call_mask(); }

  // ---- training (keras/training.cpp): shared by every copy of the model handle ----
  std::shared_ptr<TrainingState> training_;

 protected:
  void build(const TensorShape& input_shape) override;
  Tensor run(const Tensor& x, bool training) override;
  Tensor call(const Tensor& x, bool training) override;
  // Calls the model once on zeros of `input_shape` (None -> 1) to learn its output shape, as
  // Keras builds subclassed models; returns that shape with batch dimension None.
  TensorShape probe_output_shape(const TensorShape& input_shape);

  // A live object of the user's subclass sharing this state, or nullptr.
  Model* live_subclass_object() const;

  std::atomic<bool> supports_masking_{false};
  std::mutex hook_mu_;  // serialises run_build_hook
  std::atomic<bool> hook_done_{false};
  mutable std::mutex mu_;  // guards the members below
  std::vector<Layer> tracked_;
  std::vector<Model*> instances_;
  mutable std::string subclass_name_;  // C++ class name, learned from a live object
  mutable std::string lazy_name_;
};

}  // namespace detail

class Model : public Layer {
 public:
  // Keras' functional API (keras/functional.h): the model that computes `outputs` from
  // `inputs` (tensors made by tf::keras::Input and layer calls on them). Built at once.
  Model(const KerasTensor& inputs, const KerasTensor& outputs, std::string name = "");
  Model(const std::vector<KerasTensor>& inputs, const std::vector<KerasTensor>& outputs,
        std::string name = "");
  Model(const Model& other);
  Model& operator=(const Model& other);
  ~Model() override;

  // The forward pass of a subclassed model (Keras' call). Call the model through operator(),
  // which builds, tracks and checks; the base version throws UnimplementedError.
  virtual Tensor call(const Tensor& x, bool training);
  // Calls a model on several inputs (a functional model's, in its inputs' order) and returns
  // every output; other models take a one-element list. See keras/functional.h.
  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs, bool training = false) const;
  using Layer::operator();

  // Keras' build(input_shape), both ways:
  // - From outside, model.build(shape) builds the model (as Layer::build): a subclassed model
  //   runs its build override, then calls itself once on zeros to learn its output shape.
  // - A subclass may override it to create its own weights with add_weight (a custom layer,
  //   Keras' Layer.build). The library runs the override once, before the first call or on a
  //   build from outside, with the batch dimension None, eagerly (outside tapes and traces),
  //   mirrored under a distribution strategy, as built-in layers build.
  //   C++ cannot wrap an override as Keras wraps build, so `model.build(shape)` on an object of
  //   the subclass calls the override directly: end it with `Model::build(input_shape)`
  //   (Keras' super().build) and that call completes the build; without it the weights exist
  //   and the model counts as built at its first call.
  virtual void build(const TensorShape& input_shape);
  using Layer::build;  // the const form, for const handles

  // Keras' compute_mask override point of a custom layer (a model subclass): the mask of the
  // output for input `x` with mask `mask`, asked for only once the subclass declared
  // set_supports_masking(true). Default: `mask` unchanged (Keras'). (Layer::compute_mask is the
  // caller's side, which also applies supports_masking.)
  virtual Tensor compute_output_mask(const Tensor& x, const Tensor& mask) const;

  // The model's layers: Sequential's list, or a subclassed model's tracked layers.
  std::vector<Layer> layers() const;
  // The layer of that name among layers() (Keras' get_layer); NotFoundError otherwise.
  Layer get_layer(const std::string& name) const;
  // tf.keras 2's model.stateful: whether a layer of the model (at any depth) is a stateful
  // recurrent layer (docs/keras_recurrent.md, "Stateful layers"). fit, evaluate and predict
  // then trace their steps for the batch size of the batches (instead of None), since the kept
  // states fix it.
  bool stateful() const;
  // tf.keras 2's model.reset_states(): every stateful layer's kept states to zeros (Keras 3
  // dropped it for layer.reset_state() per layer).
  void reset_states() const;
  // Prints Keras' table (Model: "name", Layer (type) / Output Shape / Param #, the totals).
  // FailedPreconditionError before the model is built (call it on data or build() first).
  void summary(std::ostream& out = std::cout, int line_length = 65) const;
  std::string summary_string(int line_length = 65) const;

  // ---- training (keras/training.h; state in detail::ModelImpl) ----
  // Keras' compile: the optimizer, the loss (an object or a name such as
  // "sparse_categorical_crossentropy") and metrics ("accuracy" resolves with the loss).
  void compile(optimizers::Optimizer optimizer, losses::Loss loss,
               std::vector<MetricSpec> metrics = {}, CompileOptions options = {});
  void compile(optimizers::Optimizer optimizer, const std::string& loss,
               std::vector<MetricSpec> metrics = {}, CompileOptions options = {});
  // A model with several outputs (Keras' lists and dicts, docs/keras_fit.md): one loss per
  // output, optional loss_weights (the loss is their weighted sum) and metrics per output. The
  // forms above give one loss to every output (Keras' rule) and take no metrics then.
  void compile(optimizers::Optimizer optimizer, PerOutput<LossSpec> loss,
               PerOutput<double> loss_weights = {}, PerOutput<std::vector<MetricSpec>> metrics = {},
               CompileOptions options = {});
  // The braced list form, {"mse", "mse"} or {bce, cce} (a std::string overload would take it).
  void compile(optimizers::Optimizer optimizer, std::initializer_list<LossSpec> loss,
               PerOutput<double> loss_weights = {}, PerOutput<std::vector<MetricSpec>> metrics = {},
               CompileOptions options = {});
  // Trains on x and y (first dimensions equal) or on a Dataset of (x, y[, sample_weight])
  // batches; returns the History of epoch logs (loss, metrics, val_ ones).
  History fit(const Tensor& x, const Tensor& y, FitOptions options = {});
  History fit(const data::Dataset& dataset, FitOptions options = {});
  // The loss, then each metric (Keras' return_dict=False order).
  std::vector<double> evaluate(const Tensor& x, const Tensor& y, EvaluateOptions options = {});
  std::vector<double> evaluate(const data::Dataset& dataset, EvaluateOptions options = {});
  // The model's outputs for every row of x (or every batch's first component), concatenated.
  Tensor predict(const Tensor& x, PredictOptions options = {});
  Tensor predict(const data::Dataset& dataset, PredictOptions options = {});
  // A model with several inputs or outputs: one tensor per input and per output, in the
  // orders of the functional model's inputs and outputs, or maps keyed by the Input names and
  // the output names (Keras' dicts). A Dataset for such a model yields flat elements: the
  // inputs, then the targets, then no, one shared or one per output sample weights.
  // predict returns one tensor per output.
  History fit(const std::vector<Tensor>& xs, const std::vector<Tensor>& ys,
              FitOptions options = {});
  History fit(const std::map<std::string, Tensor>& xs, const std::map<std::string, Tensor>& ys,
              FitOptions options = {});
  // Braced lists, fit({x1, x2}, {y1, y2}): without these, a list of two tensors is ambiguous
  // between the vector and the map (std::map's iterator-pair constructor).
  History fit(std::initializer_list<Tensor> xs, std::initializer_list<Tensor> ys,
              FitOptions options = {}) {
    return fit(std::vector<Tensor>(xs), std::vector<Tensor>(ys), std::move(options));
  }
  std::vector<double> evaluate(const std::vector<Tensor>& xs, const std::vector<Tensor>& ys,
                               EvaluateOptions options = {});
  std::vector<double> evaluate(const std::map<std::string, Tensor>& xs,
                               const std::map<std::string, Tensor>& ys,
                               EvaluateOptions options = {});
  std::vector<double> evaluate(std::initializer_list<Tensor> xs, std::initializer_list<Tensor> ys,
                               EvaluateOptions options = {}) {
    return evaluate(std::vector<Tensor>(xs), std::vector<Tensor>(ys), std::move(options));
  }
  std::vector<Tensor> predict(const std::vector<Tensor>& xs, PredictOptions options = {});
  std::vector<Tensor> predict(const std::map<std::string, Tensor>& xs, PredictOptions options = {});
  std::vector<Tensor> predict(std::initializer_list<Tensor> xs, PredictOptions options = {});
  // Every output for a Dataset whose elements start with the model's inputs.
  std::vector<Tensor> predict_outputs(const data::Dataset& dataset, PredictOptions options = {});
  // One step on one batch; the logs' values (loss, then metrics) after it.
  std::vector<double> train_on_batch(const Tensor& x, const Tensor& y);
  std::vector<double> test_on_batch(const Tensor& x, const Tensor& y);
  // "loss" and the compiled metrics' names.
  std::vector<std::string> metrics_names() const;
  void reset_metrics();
  optimizers::Optimizer optimizer() const;
  bool compiled() const;
  // Weights as a safetensors file, one tensor per tracked_variables() name ("dense/kernel");
  // written atomically. load_weights checks every name, shape and dtype before assigning.
  void save_weights(const std::string& path) const;
  void load_weights(const std::string& path) const;
  // Keras' model.to_json() and model.save(path): tf::keras::models::to_json and save_model
  // (keras/serialization.h, where they are defined; load with tf::keras::models::load_model).
  std::string to_json(int indent = -1) const;
  void save(const std::string& path) const;
  // Internal: the compiled state (null before compile()).
  std::shared_ptr<detail::TrainingState>& model_impl_for_training() const {
    return model_impl().training_;
  }

 protected:
  // For subclasses: `name` empty gives the snake_case of the class name ("my_model").
  explicit Model(std::string name = "");
  // For models with their own state (Sequential).
  explicit Model(std::shared_ptr<detail::ModelImpl> impl);

  // Tracks `layer` now (see the header comment) and returns it, for member initialisers:
  //   tf::keras::layers::Dense d1 = track(tf::keras::layers::Dense(128, "relu"));
  template <class L>
  L track(L layer) {
    model_impl().track(layer);
    return layer;
  }

  // Keras' add_weight for a custom layer: a weight "<model>/<name>" of `shape` (fully defined)
  // and the model's dtype, initialised by `initializer` (a name such as "zeros" or an
  // Initializer; none: "glorot_uniform", Keras' default for floating weights), trainable or
  // not, with an optional regularizer whose penalty joins losses() and an optional constraint
  // the optimizers apply after each update (keras/constraints.h). Call it in build() (or in
  // the constructor, when the shape is known there); inside call() or after the build it is a
  // FailedPreconditionError, and a name used twice an InvalidArgumentError.
  Variable add_weight(const std::string& name, const TensorShape& shape,
                      const Initializer& initializer = {}, bool trainable = true,
                      const Regularizer& regularizer = {}, const Constraint& constraint = {});
  // Keras' add_loss inside call(): `loss` (summed if not a scalar) is added to the compiled loss
  // by fit, train_on_batch, evaluate and test_on_batch, and is listed by losses() until the
  // next call. FailedPreconditionError outside a call of this model.
  void add_loss(const Tensor& loss);
  // Masking for a custom layer. Keras' self.supports_masking = True: the layer passes a mask on
  // (through compute_output_mask) instead of dropping it; call it in the constructor.
  void set_supports_masking(bool value);
  // Keras' mask argument of call(): inside call(), the mask this call of the model was given
  // (Layer::call_with_mask, or a Sequential or functional model passing one on), or an
  // undefined tensor. A layer reads it whether or not it supports masking.
  Tensor call_mask() const;
  detail::ModelImpl& model_impl() const;
};

// A linear stack of layers (tf.keras.Sequential). A first layer with an input_shape
// (Flatten({28, 28}), Dense(..., {.input_shape = {784}})) builds the model at once; otherwise
// it builds on its first call or build().
class Sequential : public Model {
 public:
  explicit Sequential(std::vector<Layer> layers = {}, std::string name = "");
  // Appends a layer (builds it at once when the model is built). Not concurrent with calls.
  void add(const Layer& layer);
  Tensor call(const Tensor& x, bool training) override;
};

}  // namespace tapeflow::keras
