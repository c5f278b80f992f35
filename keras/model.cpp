// Model (subclass dispatch, member tracking, summary) and Sequential.
#include "keras/model.h"

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <typeinfo>

#include "core/check.h"
#include "ops/factory.h"

namespace tapeflow::keras {

namespace detail {

namespace {

// Models whose build override this thread is running (run_build_hook).
thread_local std::vector<const ModelImpl*> t_hooks;
bool in_hook(const ModelImpl* m) {
  return std::find(t_hooks.begin(), t_hooks.end(), m) != t_hooks.end();
}

// "MyModel" from a mangled "N2ns7MyModelE": the unqualified class name, as Python's __name__.
std::string demangled_class_name(const std::type_info& t) {
  int status = 0;
  char* d = abi::__cxa_demangle(t.name(), nullptr, nullptr, &status);
  std::string s = (status == 0 && d) ? d : t.name();
  std::free(d);
  if (auto lt = s.find('<'); lt != std::string::npos) s = s.substr(0, lt);
  if (auto colon = s.rfind("::"); colon != std::string::npos) s = s.substr(colon + 2);
  return s;
}

std::string with_commas(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

// Keras' print_row: each field in its column (two spaces between columns), wrapping long
// fields onto further lines, preferably after "),", "},", "]," or "',".
void print_row(std::vector<std::string> fields, const std::vector<int>& positions,
               std::string& out) {
  auto pending = [&] {
    return std::any_of(fields.begin(), fields.end(), [](const auto& f) { return !f.empty(); });
  };
  while (pending()) {
    std::string line;
    for (size_t col = 0; col < fields.size(); ++col) {
      const int start = col > 0 ? positions[col - 1] : 0;
      const int end = positions[col];
      const int space = col != positions.size() - 1 ? 2 : 0;
      size_t cutoff = static_cast<size_t>(std::max(1, end - start - space));
      std::string fit = fields[col].substr(0, cutoff);
      size_t best = std::string::npos;
      for (const char* cond : {"),", "},", "],", "',"}) {
        const size_t p = fit.find(cond);
        if (p != std::string::npos) best = std::min(best, p + 2);
      }
      if (best != std::string::npos) {
        cutoff = best;
        fit = fit.substr(0, cutoff);
      }
      if (col == 0) line += ' ';
      line += fit;
      line += std::string(static_cast<size_t>(space), ' ');
      fields[col] = cutoff < fields[col].size() ? fields[col].substr(cutoff) : std::string();
      if (static_cast<int>(line.size()) < positions[col])
        line += std::string(static_cast<size_t>(positions[col]) - line.size(), ' ');
    }
    out += line + "\n";
  }
}

// Whether `target` is `root` or in its sub-layer tree (iterative; shared layers visited once).
bool contains_layer(const LayerImpl& root, const void* target) {
  std::vector<const LayerImpl*> todo{&root};
  std::vector<const void*> seen;
  while (!todo.empty()) {
    const LayerImpl* l = todo.back();
    todo.pop_back();
    if (l == target) return true;
    if (std::find(seen.begin(), seen.end(), l) != seen.end()) continue;
    seen.push_back(l);
    for (const Layer& child : l->sublayers()) todo.push_back(&child.impl());
  }
  return false;
}

// Sequential: the layers in order.
class SequentialImpl final : public ModelImpl {
 public:
  explicit SequentialImpl(std::string name)
      : ModelImpl("Sequential", "sequential", std::move(name)) {}

  std::vector<Layer> sublayers() const override {
    std::lock_guard lock(mu_);
    return tracked_;
  }
  // The list is the model: calls inside it track nothing more.
  void on_sublayer_called(LayerImpl&) override {}
  void track(const Layer& layer) override { add(layer); }

  void add(const Layer& layer) {
    TF_CHECK_ARG(layer.defined(), name().c_str(), "cannot add an empty layer handle to \"{}\"",
                 name());
    TF_CHECK_ARG(layer.id() != this, name().c_str(), "cannot add model \"{}\" to itself",
                 name());
    TF_CHECK_ARG(!contains_layer(layer.impl(), this), name().c_str(),
                 "cannot add layer \"{}\" to model \"{}\": \"{}\" already contains \"{}\" (a "
                 "model cannot contain itself)",
                 layer.impl().name(), name(), layer.impl().name(), name());
    bool first = false;
    {
      std::lock_guard lock(mu_);
      first = tracked_.empty();
      tracked_.push_back(layer);
    }
    try {
      if (built()) {
        // Keras builds a layer added to a built model at once.
        const TensorShape in = built_output_shape();
        layer.impl().ensure_built(in);
        layer.impl().validate_input(in);
        set_output_shape(layer.impl().compute_output_shape(in));
      } else if (first && layer.impl().declared_input_shape()) {
        ensure_built(*layer.impl().declared_input_shape());
      }
    } catch (...) {
      std::lock_guard lock(mu_);
      tracked_.pop_back();
      throw;
    }
  }

  TensorShape compute_output_shape(const TensorShape& s) const override {
    TensorShape cur = s;
    for (const Layer& l : sublayers()) cur = l.impl().compute_output_shape(cur);
    return cur;
  }

  // Keras' Sequential call: each layer gets the mask the previous one gave its output (the
  // model's own mask argument for the first), and the model's output carries the last one.
  Tensor run_layers(const Tensor& x, bool training) {
    Tensor h = x;
    Tensor mask = call_mask();
    for (const Layer& l : sublayers()) {
      if (!mask.defined() && !l.impl().supports_masking()) {
        h = l(h, training);
        continue;
      }
      MaskedTensor r = l.impl().invoke_masked(h, mask, training);
      h = std::move(r.output);
      mask = std::move(r.mask);
    }
    set_output_mask(mask);
    return h;
  }
  bool supports_masking() const override { return true; }
  // Keras runs the layers for it: a layer's mask may need its input's values (Masking).
  Tensor compute_mask(const Tensor& x, const Tensor& mask) const override {
    return const_cast<SequentialImpl*>(this)->invoke_masked(x, mask, false).mask;
  }

 protected:
  void build(const TensorShape& s) override {
    TF_CHECK_T(FailedPreconditionError, !sublayers().empty(), name().c_str(),
               "the Sequential model \"{}\" has no layers: add() some before calling or "
               "building it",
               name());
    // Shapes flow through the layers, each building for its input (Keras' functional build).
    TensorShape cur = s;
    for (const Layer& l : sublayers()) {
      l.impl().ensure_built(cur);
      l.impl().validate_input(cur);  // an already-built layer may not accept this shape
      cur = l.impl().compute_output_shape(cur);
    }
  }
  Tensor run(const Tensor& x, bool training) override {
    ensure_built(x.shape());
    return run_layers(x, training);
  }
  Tensor call(const Tensor& x, bool training) override { return run_layers(x, training); }
};

}  // namespace

ModelImpl::ModelImpl(std::string class_name, const std::string& generic_name, std::string name)
    : LayerImpl(std::move(class_name), generic_name, std::move(name)) {}

Model* ModelImpl::live_subclass_object() const {
  std::lock_guard lock(mu_);
  for (Model* m : instances_) {
    // A plain Model object is a handle copy; the user's objects have their own dynamic type.
    if (typeid(*m) != typeid(Model)) {
      if (subclass_name_.empty()) subclass_name_ = demangled_class_name(typeid(*m));
      return m;
    }
  }
  return nullptr;
}

std::string ModelImpl::class_name() const {
  if (!class_name_.empty()) return class_name_;
  (void)live_subclass_object();
  std::lock_guard lock(mu_);
  return subclass_name_.empty() ? "Model" : subclass_name_;
}

std::string ModelImpl::name() const {
  if (!name_.empty()) return name_;
  const std::string cls = class_name();
  std::lock_guard lock(mu_);
  if (lazy_name_.empty()) lazy_name_ = unique_name(to_snake_case(cls));
  return lazy_name_;
}

std::vector<Layer> ModelImpl::sublayers() const {
  std::lock_guard lock(mu_);
  return tracked_;
}

void ModelImpl::track(const Layer& layer) {
  TF_CHECK_ARG(layer.defined(), name().c_str(), "cannot track an empty layer handle");
  if (layer.id() == this) return;
  std::lock_guard lock(mu_);
  for (const Layer& l : tracked_)
    if (l.id() == layer.id()) return;
  tracked_.push_back(layer);
}

void ModelImpl::on_sublayer_called(LayerImpl& child) {
  if (&child == this) return;
  // Runs at every call of every member: check under the lock, make a handle only when new.
  std::lock_guard lock(mu_);
  for (const Layer& l : tracked_)
    if (l.id() == &child) return;
  tracked_.emplace_back(child.shared_from_this());
}

void ModelImpl::add_instance(Model* m) {
  std::lock_guard lock(mu_);
  instances_.push_back(m);
}
void ModelImpl::remove_instance(Model* m) {
  std::lock_guard lock(mu_);
  instances_.erase(std::remove(instances_.begin(), instances_.end(), m), instances_.end());
}

Tensor ModelImpl::compute_mask(const Tensor& x, const Tensor& mask) const {
  const Model* owner = live_subclass_object();
  return owner != nullptr ? owner->compute_output_mask(x, mask) : mask;
}

Tensor ModelImpl::call(const Tensor& x, bool training) {
  Model* owner = live_subclass_object();
  TF_CHECK_T(FailedPreconditionError, owner != nullptr, name().c_str(),
             "the subclassed model \"{}\" ({}) is used through a handle after every object of "
             "its class was destroyed: keep the model object alive while copies of it (in a "
             "Sequential, a lambda or a container) are used",
             name(), class_name());
  return owner->call(x, training);
}

void ModelImpl::run_build_hook(const TensorShape& input_shape) {
  if (hook_done_.load(std::memory_order_acquire) || in_hook(this)) return;
  // Replica threads may arrive together: one runs the override, the others wait for it.
  std::lock_guard lock(hook_mu_);
  if (hook_done_.load(std::memory_order_relaxed)) return;
  Model* owner = live_subclass_object();
  if (owner == nullptr) return;  // call() reports it
  const TensorShape s = with_unknown_batch(input_shape);
  t_hooks.push_back(this);
  try {
    run_as_build([&] { owner->build(s); });
  } catch (...) {
    t_hooks.pop_back();
    throw;
  }
  t_hooks.pop_back();
  hook_done_.store(true, std::memory_order_release);
  // Checkpoint values waiting for the new weights reach them before the first call computes.
  restore_deferred_now();
}

Tensor ModelImpl::run(const Tensor& x, bool training) {
  // A subclassed model is built by its first call (Keras): its build() override runs first,
  // then the call, in which its layers build themselves.
  if (!built()) run_build_hook(x.shape());
  Tensor y = call(x, training);
  if (!built()) set_built_shapes(with_unknown_batch(x.shape()), with_unknown_batch(y.shape()));
  return y;
}

TensorShape ModelImpl::probe_output_shape(const TensorShape& input_shape) {
  TensorShape concrete = input_shape;
  for (int i = 0; i < concrete.rank(); ++i)
    if (concrete[i] == None) concrete[i] = 1;
  BuildScope scope(mirror_spec_);
  CallFrame frame(this);  // the member layers it calls get tracked
  Tensor y = call(zeros(concrete, dtype_), false);
  const TensorShape out = with_unknown_batch(y.shape());
  set_built_shapes(with_unknown_batch(input_shape), out);
  return out;
}

void ModelImpl::build(const TensorShape& s) {
  run_build_hook(s);
  (void)probe_output_shape(s);
}

TensorShape ModelImpl::compute_output_shape(const TensorShape& s) const {
  if (built()) {
    const TensorShape in = built_input_shape();
    if (with_unknown_batch(s) == in) return built_output_shape();
  }
  // Only a call reveals a subclassed model's output shape. The state is never const itself:
  // const here is the LayerImpl interface's promise for layers with static shapes.
  return const_cast<ModelImpl*>(this)->probe_output_shape(s);
}

std::string ModelImpl::summary(int line_length) const {
  const std::string n = name();
  TF_CHECK_T(FailedPreconditionError, built(), "summary",
             "model \"{}\" has not yet been built. Build the model first by calling build() or "
             "by calling the model on a batch of data",
             n);
  TF_CHECK_ARG(line_length >= 20, "summary", "line_length must be at least 20, got {}",
               line_length);
  // A functional model that is not a chain gets Keras 3's "Connected to" column (its
  // positions: 0.3, 0.56, 0.74 of the line).
  const std::vector<std::string> connections = summary_connections();
  const bool connected = !connections.empty();
  const std::vector<int> positions =
      connected ? std::vector<int>{static_cast<int>(line_length * 0.3),
                                   static_cast<int>(line_length * 0.56),
                                   static_cast<int>(line_length * 0.74), line_length}
                : std::vector<int>{static_cast<int>(line_length * 0.45),
                                   static_cast<int>(line_length * 0.85), line_length};
  std::string out = "Model: \"" + n + "\"\n";
  out += std::string(static_cast<size_t>(line_length), '_') + "\n";
  std::vector<std::string> header = {"Layer (type)", "Output Shape", "Param #"};
  if (connected) header.push_back("Connected to");
  print_row(header, positions, out);
  out += std::string(static_cast<size_t>(line_length), '=') + "\n";
  const std::vector<Layer> layers = sublayers();
  const std::vector<std::string> shapes = summary_shapes();
  for (size_t i = 0; i < layers.size(); ++i) {
    const Layer& l = layers[i];
    std::string shape = l.built() ? l.output_shape().to_string() : "?";
    if (i < shapes.size() && !shapes[i].empty()) shape = shapes[i];
    std::vector<std::string> row = {l.name() + " (" + l.class_name() + ")", shape,
                                    std::to_string(l.count_params())};
    if (connected) row.push_back(i < connections.size() ? connections[i] : "-");
    print_row(row, positions, out);
    out += std::string(static_cast<size_t>(line_length), ' ') + "\n";
  }
  out += std::string(static_cast<size_t>(line_length), '=') + "\n";
  Layer self(std::const_pointer_cast<LayerImpl>(shared_from_this()));
  int64_t trainable = 0, frozen = 0;
  for (const auto& v : self.trainable_variables()) trainable += v.shape().num_elements();
  for (const auto& v : self.non_trainable_variables()) frozen += v.shape().num_elements();
  out += "Total params: " + with_commas(trainable + frozen) + "\n";
  out += "Trainable params: " + with_commas(trainable) + "\n";
  out += "Non-trainable params: " + with_commas(frozen) + "\n";
  out += std::string(static_cast<size_t>(line_length), '_') + "\n";
  return out;
}

}  // namespace detail

// ---- Model ----

Model::Model(std::string name)
    : Layer(std::make_shared<detail::ModelImpl>("", "", std::move(name))) {
  model_impl().add_instance(this);
}
Model::Model(std::shared_ptr<detail::ModelImpl> impl) : Layer(std::move(impl)) {
  model_impl().add_instance(this);
}
Model::Model(const Model& other) : Layer(other) { model_impl().add_instance(this); }
Model& Model::operator=(const Model& other) {
  if (this == &other || impl_ == other.impl_) return *this;
  if (auto* m = dynamic_cast<detail::ModelImpl*>(impl_.get())) m->remove_instance(this);
  Layer::operator=(other);
  model_impl().add_instance(this);
  return *this;
}
Model::~Model() {
  // dynamic_cast: a Model assigned through a Layer& may hold a plain layer's state.
  if (auto* m = dynamic_cast<detail::ModelImpl*>(impl_.get())) m->remove_instance(this);
}

detail::ModelImpl& Model::model_impl() const {
  auto* m = dynamic_cast<detail::ModelImpl*>(&impl());
  TF_CHECK_T(FailedPreconditionError, m != nullptr, "Model",
             "this Model handle refers to layer \"{}\" ({}), which is not a model (was a layer "
             "assigned to it through a Layer reference?)",
             impl().name(), impl().class_name());
  return *m;
}

Tensor Model::compute_output_mask(const Tensor&, const Tensor& mask) const {
  return mask;
}
void Model::set_supports_masking(bool value) {
  model_impl().set_supports_masking(value);
}
Tensor Model::call_mask() const {
  return model_impl().current_call_mask();
}

Tensor Model::call(const Tensor&, bool) {
  const std::string n = name();
  TF_THROW(UnimplementedError, n.c_str(),
           "model \"{}\" ({}) does not override call(x, training): subclass tf::keras::Model and "
           "override it, or use tf::keras::Sequential",
           n, class_name());
}

void Model::build(const TensorShape& input_shape) {
  // Inside the library's run of the override (or of this default): no weights of its own.
  if (detail::in_hook(&model_impl())) return;
  impl().ensure_built(input_shape);
}

Variable Model::add_weight(const std::string& name, const TensorShape& shape,
                           const Initializer& initializer, bool trainable,
                           const Regularizer& regularizer, const Constraint& constraint) {
  return model_impl().add_custom_weight(name, shape, initializer, trainable, regularizer,
                                        constraint);
}

void Model::add_loss(const Tensor& loss) {
  model_impl().add_loss(loss);
}

std::vector<Layer> Model::layers() const { return model_impl().sublayers(); }
bool Model::stateful() const {
  return model_impl().stateful();
}
void Model::reset_states() const {
  model_impl().reset_states();
}

Layer Model::get_layer(const std::string& layer_name) const {
  std::vector<std::string> names;
  for (const Layer& l : layers()) {
    if (l.name() == layer_name) return l;
    names.push_back(l.name());
  }
  const std::string n = name();
  TF_THROW(NotFoundError, n.c_str(), "model \"{}\" has no layer named '{}' (its layers: {})", n,
           layer_name, fmt::join(names, ", "));
}

std::string Model::summary_string(int line_length) const {
  return model_impl().summary(line_length);
}
void Model::summary(std::ostream& out, int line_length) const {
  out << model_impl().summary(line_length);
}

// ---- Sequential ----

namespace {
// dynamic_cast: a Sequential assigned another model through a Model& holds that model's state.
detail::SequentialImpl& sequential_impl(const Model& m) {
  auto* s = dynamic_cast<detail::SequentialImpl*>(&m.impl());
  TF_CHECK_T(FailedPreconditionError, s != nullptr, "Sequential",
             "this Sequential handle refers to \"{}\" ({}), which is not a Sequential model (was "
             "another model or layer assigned to it through a Model or Layer reference?)",
             m.impl().name(), m.impl().class_name());
  return *s;
}
}  // namespace

Sequential::Sequential(std::vector<Layer> layers, std::string name)
    : Model(std::make_shared<detail::SequentialImpl>(std::move(name))) {
  for (const Layer& l : layers) add(l);
}

void Sequential::add(const Layer& layer) {
  sequential_impl(*this).add(layer);
}

Tensor Sequential::call(const Tensor& x, bool training) {
  return sequential_impl(*this).run_layers(x, training);
}

}  // namespace tapeflow::keras
