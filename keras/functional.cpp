// Keras' functional API: Input, symbolic layer calls and the functional model (keras/functional.h).
#include "keras/functional.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <unordered_map>

#include "core/check.h"
#include "keras/layers_merge.h"
#include "ops/binary.h"
#include "ops/unary.h"

namespace tapeflow::keras {

// ---- KerasTensor ----

const detail::KerasTensorData& KerasTensor::checked() const {
  TF_CHECK_T(FailedPreconditionError, data_ != nullptr, "KerasTensor",
             "the KerasTensor handle is empty (default-constructed)");
  return *data_;
}
const TensorShape& KerasTensor::shape() const {
  return checked().shape;
}
DType KerasTensor::dtype() const {
  return checked().dtype;
}
const std::string& KerasTensor::name() const {
  return checked().name;
}
Layer KerasTensor::layer() const {
  return checked().node->layer;
}
int KerasTensor::node_index() const {
  return checked().node->node_index;
}
int KerasTensor::tensor_index() const {
  return checked().tensor_index;
}
std::string KerasTensor::to_string() const {
  const auto& d = checked();
  return fmt::format("<KerasTensor shape={}, dtype={}, name={}>", d.shape.to_string(),
                     dtype_name(d.dtype), d.name);
}

namespace detail {

namespace {

// Keras' InputLayer: the identity, built for its shape when made.
class InputLayerImpl final : public LayerImpl {
 public:
  InputLayerImpl(const TensorShape& shape, DType dtype, std::string name)
      : LayerImpl("InputLayer", "input_layer", std::move(name)) {
    dtype_ = dtype;
    declared_input_shape_ = with_unknown_batch(shape);
    set_built_shapes(*declared_input_shape_, *declared_input_shape_);
  }

 protected:
  Tensor call(const Tensor& x, bool) override { return x; }
};

// The number of symbolic calls of each layer so far (Keras' len(layer._inbound_nodes)), keyed by
// the layer's state; an entry whose layer died is reused.
int next_node_index(const Layer& layer) {
  static std::mutex mu;
  static std::unordered_map<const void*, std::pair<std::weak_ptr<LayerImpl>, int>> counts;
  std::lock_guard lock(mu);
  auto& [weak, n] = counts[layer.id()];
  if (weak.expired() || weak.lock() != layer.impl_ptr()) {
    weak = layer.impl_ptr();
    n = 0;
  }
  return n++;
}

KerasTensor make_tensor(TensorShape shape, DType dtype, std::string name,
                        std::shared_ptr<KerasNode> node, int tensor_index = 0) {
  auto d = std::make_shared<KerasTensorData>();
  d->shape = std::move(shape);
  d->dtype = dtype;
  d->name = name.empty() ? unique_name("keras_tensor") : std::move(name);
  d->node = std::move(node);
  d->tensor_index = tensor_index;
  return KerasTensor(std::move(d));
}

// A value of the graph: a node's output (the node, which output).
using Key = std::pair<const KerasNode*, int>;
Key key_of(const KerasTensorData* t) {
  return {t->node.get(), t->tensor_index};
}

// Whether `shape` is compatible with `expected` (same rank, equal where both are known).
bool compatible(const TensorShape& shape, const TensorShape& expected) {
  if (shape.rank() != expected.rank()) return false;
  for (int i = 0; i < shape.rank(); ++i)
    if (shape[i] != None && expected[i] != None && shape[i] != expected[i]) return false;
  return true;
}

// Models being called with a list on this thread: FunctionalImpl::run takes its inputs from
// here (the call goes through LayerImpl::invoke, for the call bookkeeping, with the first input).
struct PendingCall {
  const FunctionalImpl* model = nullptr;
  const std::vector<Tensor>* inputs = nullptr;
  std::vector<Tensor>* outputs = nullptr;
  std::vector<Tensor>* output_masks = nullptr;  // when the caller wants the outputs' masks
};
thread_local PendingCall t_pending;

}  // namespace

void check_defined(const Layer& layer, const std::vector<KerasTensor>& inputs) {
  const std::string n = layer.name();
  for (size_t i = 0; i < inputs.size(); ++i)
    TF_CHECK_ARG(inputs[i].defined(), n.c_str(),
                 "input {} of layer \"{}\" is an empty KerasTensor handle", i, n);
}

std::vector<KerasTensor> call_multi(const Layer& layer, const std::vector<KerasTensor>& inputs,
                                    std::shared_ptr<const MultiCall> how,
                                    std::optional<bool> training) {
  check_defined(layer, inputs);
  std::vector<TensorShape> shapes;
  for (const KerasTensor& t : inputs) shapes.push_back(t.shape());
  std::vector<TensorShape> out = how->shapes(shapes);
  auto node = std::make_shared<KerasNode>();
  node->layer = layer;
  node->inputs = inputs;
  node->multi = std::move(how);
  node->num_outputs = static_cast<int>(out.size());
  node->training = training;
  node->node_index = next_node_index(layer);
  std::vector<KerasTensor> result;
  for (size_t i = 0; i < out.size(); ++i)
    result.push_back(
        make_tensor(std::move(out[i]), layer.impl().dtype(), "", node, static_cast<int>(i)));
  return result;
}

KerasTensor call_symbolic(const Layer& layer, const std::vector<KerasTensor>& inputs,
                          bool list_call, std::optional<bool> training) {
  LayerImpl& impl = layer.impl();
  const std::string n = impl.name();
  check_defined(layer, inputs);
  auto* merge = dynamic_cast<MergeImpl*>(&impl);
  std::vector<TensorShape> shapes;
  std::vector<DType> dtypes;
  for (const KerasTensor& t : inputs) {
    shapes.push_back(t.shape());
    dtypes.push_back(t.dtype());
  }
  TensorShape out;
  DType dtype = impl.dtype();
  if (merge != nullptr) {
    TF_CHECK_ARG(list_call, n.c_str(),
                 "A merge layer should be called on a list of inputs. Received: input_shape={} "
                 "(not a list of shapes) (layer \"{}\", {})",
                 shapes[0].to_string(), n, impl.class_name());
    out = merge->merged_shape(shapes);
    dtype = merge->merged_dtype(dtypes);
    merge->mark_built(shapes[0], out);
  } else {
    TF_CHECK_ARG(!list_call && inputs.size() == 1, n.c_str(),
                 "layer \"{}\" ({}) takes one input, got a list of {}", n, impl.class_name(),
                 inputs.size());
    const auto* inner = dynamic_cast<const FunctionalImpl*>(&impl);
    if (inner != nullptr) {
      TF_CHECK_ARG(inner->inputs().size() == 1 && inner->outputs().size() == 1, n.c_str(),
                   "model \"{}\" has {} inputs and {} outputs: only a model with one input and "
                   "one output can be called on a KerasTensor",
                   n, inner->inputs().size(), inner->outputs().size());
      dtype = inner->outputs()[0].dtype();
    }
    // As Sequential builds its layers: build for the shape, check it, infer the output shape.
    impl.ensure_built(shapes[0]);
    impl.validate_input(shapes[0]);
    out = impl.compute_output_shape(shapes[0]);
  }
  auto node = std::make_shared<KerasNode>();
  node->layer = layer;
  node->inputs = inputs;
  node->list_call = list_call;
  node->training = training;
  node->node_index = next_node_index(layer);
  return make_tensor(std::move(out), dtype, "", std::move(node));
}

// ---- FunctionalImpl ----

FunctionalImpl::FunctionalImpl(const std::vector<KerasTensor>& inputs,
                               const std::vector<KerasTensor>& outputs, std::string name)
    : ModelImpl("Functional", "functional", std::move(name)), inputs_(inputs), outputs_(outputs) {
  const std::string n = this->name();
  TF_CHECK_ARG(!inputs.empty() && !outputs.empty(), n.c_str(),
               "a functional model needs at least one input and one output, got {} and {}",
               inputs.size(), outputs.size());
  for (size_t i = 0; i < inputs.size(); ++i)
    TF_CHECK_ARG(inputs[i].defined(), n.c_str(), "input {} of the model is an empty KerasTensor",
                 i);
  for (size_t i = 0; i < outputs.size(); ++i)
    TF_CHECK_ARG(outputs[i].defined(), n.c_str(), "output {} of the model is an empty KerasTensor",
                 i);
  for (size_t i = 0; i < inputs.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      TF_CHECK_ARG(inputs[i].data() != inputs[j].data(), n.c_str(),
                   "the model's inputs {} and {} are the same tensor {}", j, i,
                   inputs[i].to_string());

  auto is_input = [&](const KerasTensorData* t) {
    return std::any_of(inputs_.begin(), inputs_.end(),
                       [t](const KerasTensor& k) { return k.data().get() == t; });
  };
  // Keras' _build_map: a depth-first walk back from the outputs. `order`: the nodes, inputs
  // before their users (post-order); `layer_seen`: the layers in pre-order (ties of depth).
  std::vector<const KerasNode*> order;
  std::vector<const void*> layer_seen;  // layers by first traversal
  std::vector<const KerasNode*> done, in_progress;
  std::function<void(const KerasTensorData*)> visit = [&](const KerasTensorData* t) {
    if (is_input(t) && !t->node->is_input()) return;  // an intermediate tensor used as an input
    const KerasNode* node = t->node.get();
    if (std::find(done.begin(), done.end(), node) != done.end()) return;
    TF_CHECK_ARG(std::find(in_progress.begin(), in_progress.end(), node) == in_progress.end(),
                 n.c_str(), "tensor {} of layer \"{}\" is part of a cycle", t->name,
                 node->layer.name());
    const void* l = node->layer.id();
    if (std::find(layer_seen.begin(), layer_seen.end(), l) == layer_seen.end())
      layer_seen.push_back(l);
    in_progress.push_back(node);
    for (const KerasTensor& in : node->inputs) visit(in.data().get());
    in_progress.pop_back();
    done.push_back(node);
    order.push_back(node);
  };
  for (const KerasTensor& out : outputs_) visit(out.data().get());

  // Every input of every node must be computable from the model's inputs (Keras' "Graph
  // disconnected"), checked in execution order.
  std::vector<Key> computable;
  for (const KerasTensor& in : inputs_) computable.push_back(key_of(in.data().get()));
  std::vector<std::string> fine;  // layers reached without issue, for the message
  auto known = [&](const KerasTensorData* t) {
    return std::find(computable.begin(), computable.end(), key_of(t)) != computable.end();
  };
  for (const KerasNode* node : order) {
    if (node->is_input()) continue;
    for (const KerasTensor& in : node->inputs)
      TF_CHECK_ARG(known(in.data().get()), n.c_str(),
                   "Graph disconnected: cannot find parent for tensor {} at layer '{}'. The "
                   "following previous layers were accessed without issue: [{}]",
                   in.to_string(), node->layer.name(), fmt::join(fine, ", "));
    for (int i = 0; i < node->num_outputs; ++i) computable.emplace_back(node, i);
    if (std::find(fine.begin(), fine.end(), node->layer.name()) == fine.end())
      fine.push_back(node->layer.name());
  }
  for (const KerasTensor& out : outputs_)
    TF_CHECK_ARG(known(out.data().get()), n.c_str(),
                 "Graph disconnected: output {} is not computed from the model's inputs (it is "
                 "made by layer '{}', which is not one of them)",
                 out.to_string(), out.layer().name());

  // Keras' depths: 0 at the outputs, each node one more than the deepest node using it; a
  // layer's depth is the largest of its nodes'.
  std::map<const KerasNode*, int> depth;
  std::vector<std::pair<const void*, int>> layer_depth;
  auto layer_depth_of = [&](const void* l) -> int& {
    for (auto& [k, d] : layer_depth)
      if (k == l) return d;
    layer_depth.emplace_back(l, 0);
    return layer_depth.back().second;
  };
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const KerasNode* node = *it;
    int& ld = layer_depth_of(node->layer.id());
    const int d = std::max(depth[node], ld);
    ld = d;
    depth[node] = d;
    for (const KerasTensor& in : node->inputs) {
      const KerasNode* from = in.data()->node.get();
      if (is_input(in.data().get()) && !from->is_input()) continue;
      if (std::find(order.begin(), order.end(), from) == order.end()) continue;
      depth[from] = std::max(depth[from], d + 1);
    }
  }
  // Inputs that no output uses are still the model's (depth 0, first among ties).
  for (const KerasTensor& in : inputs_)
    if (in.data()->node->is_input() &&
        std::find(layer_seen.begin(), layer_seen.end(), in.layer().id()) == layer_seen.end()) {
      layer_seen.insert(layer_seen.begin(), in.layer().id());
      layer_depth_of(in.layer().id()) = 0;
    }

  // The layers by decreasing depth, then first traversal.
  std::vector<std::pair<int, size_t>> keys;  // (depth, traversal index) per layer_seen entry
  std::vector<Layer> by_seen;
  for (size_t i = 0; i < layer_seen.size(); ++i) {
    keys.emplace_back(layer_depth_of(layer_seen[i]), i);
    for (const KerasNode* node : order)
      if (node->layer.id() == layer_seen[i]) {
        by_seen.push_back(node->layer);
        break;
      }
    if (by_seen.size() == i) {  // an unused input
      for (const KerasTensor& in : inputs_)
        if (in.layer().id() == layer_seen[i]) {
          by_seen.push_back(in.layer());
          break;
        }
    }
  }
  std::sort(keys.begin(), keys.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  std::vector<std::string> names;
  for (const auto& [d, i] : keys) {
    layers_.push_back(by_seen[i]);
    const std::string ln = by_seen[i].name();
    TF_CHECK_ARG(std::find(names.begin(), names.end(), ln) == names.end(), n.c_str(),
                 "The name \"{}\" is used 2 times in the model \"{}\". All layer names should "
                 "be unique.",
                 ln, n);
    names.push_back(ln);
  }

  // Keras' summary: a chain (one node per depth, one input and one output each, no shared
  // layer) prints the 3-column table, anything else the "Connected to" column.
  std::map<int, int> nodes_at_depth;
  for (const KerasNode* node : order) {
    if (++nodes_at_depth[depth[node]] > 1 || node->inputs.size() > 1 || node->num_outputs > 1)
      sequential_like_ = false;
  }
  for (const Layer& l : layers_) {
    std::string c;
    int nodes = 0;
    for (const KerasNode* node : order) {
      if (node->layer.id() != l.id() || node->is_input()) continue;
      ++nodes;
      for (const KerasTensor& in : node->inputs)
        c += (c.empty() ? "" : ", ") +
             fmt::format("{}[{}][{}]", in.layer().name(), in.node_index(), in.tensor_index());
    }
    if (nodes > 1) sequential_like_ = false;
    connections_.push_back(c.empty() ? "-" : c);
    // Keras lists the shapes of a call of several outputs: [(None, 4), (None, 4)].
    std::string shapes;
    for (const KerasNode* node : order) {
      if (node->layer.id() != l.id() || node->num_outputs < 2) continue;
      std::vector<TensorShape> in, out;
      for (const KerasTensor& t : node->inputs) in.push_back(t.shape());
      for (const TensorShape& s : node->multi->shapes(in)) out.push_back(s);
      shapes = fmt::format("[{}]", fmt::join(
                                       [&] {
                                         std::vector<std::string> v;
                                         for (const TensorShape& s : out)
                                           v.push_back(s.to_string());
                                         return v;
                                       }(),
                                       ", "));
      break;
    }
    shapes_.push_back(shapes);
  }

  // The execution plan: value slots for the inputs, then one per node output.
  std::vector<Key> slot_of;
  auto slot = [&](Key k) {
    auto it = std::find(slot_of.begin(), slot_of.end(), k);
    if (it != slot_of.end()) return static_cast<size_t>(it - slot_of.begin());
    slot_of.push_back(k);
    return slot_of.size() - 1;
  };
  for (const KerasTensor& in : inputs_) input_slots_.push_back(slot(key_of(in.data().get())));
  for (const KerasNode* node : order) {
    if (node->is_input()) continue;
    Step s;
    s.layer = node->layer;
    s.merge = node->list_call ? dynamic_cast<MergeImpl*>(&s.layer.impl()) : nullptr;
    s.multi = node->multi.get();
    for (const KerasTensor& in : node->inputs) s.in.push_back(slot(key_of(in.data().get())));
    for (int i = 0; i < node->num_outputs; ++i) s.out.push_back(slot({node, i}));
    s.training = node->training;
    steps_.push_back(std::move(s));
  }
  for (const KerasTensor& out : outputs_) output_slots_.push_back(slot(key_of(out.data().get())));
  slots_ = slot_of.size();
  is_input_slot_.assign(slots_, false);
  for (size_t i : input_slots_) is_input_slot_[i] = true;
  // Built at once (Keras): the shapes of the first input and output.
  set_built_shapes(with_unknown_batch(inputs_[0].shape()), with_unknown_batch(outputs_[0].shape()));
}

std::vector<std::string> FunctionalImpl::summary_connections() const {
  if (sequential_like_) return {};
  return connections_;
}

TensorShape FunctionalImpl::compute_output_shape(const TensorShape& input_shape) const {
  const std::string n = name();
  TF_CHECK_ARG(inputs_.size() == 1 && outputs_.size() == 1, n.c_str(),
               "compute_output_shape: model \"{}\" has {} inputs and {} outputs (one of each "
               "expected)",
               n, inputs_.size(), outputs_.size());
  if (with_unknown_batch(input_shape) == built_input_shape()) return built_output_shape();
  TF_CHECK_ARG(compatible(input_shape, inputs_[0].shape()), n.c_str(),
               "Input 0 with name '{}' of layer '{}' is incompatible with the layer: expected "
               "shape={}, found shape={}",
               inputs_[0].layer().name(), n, inputs_[0].shape().to_string(),
               input_shape.to_string());
  // The shapes flow through the recorded calls.
  std::vector<TensorShape> shapes(slots_);
  shapes[input_slots_[0]] = input_shape;
  for (const Step& s : steps_) {
    std::vector<TensorShape> in;
    for (size_t i : s.in) in.push_back(shapes[i]);
    std::vector<TensorShape> out;
    if (s.multi != nullptr) {
      out = s.multi->shapes(in);
    } else if (s.merge != nullptr) {
      out = {s.merge->merged_shape(in)};
    } else {
      s.layer.impl().validate_input(in[0]);
      out = {s.layer.impl().compute_output_shape(in[0])};
    }
    for (size_t i = 0; i < s.out.size(); ++i)
      if (!is_input_slot_[s.out[i]]) shapes[s.out[i]] = out[i];
  }
  return shapes[output_slots_[0]];
}

void FunctionalImpl::check_inputs(const std::vector<Tensor>& inputs) const {
  const std::string n = name();
  TF_CHECK_ARG(inputs.size() == inputs_.size(), n.c_str(),
               "model \"{}\" has {} inputs ({}), it was called with {}: call a model with "
               "several inputs with a std::vector<Tensor> in its inputs' order",
               n, inputs_.size(),
               fmt::join(
                   [&] {
                     std::vector<std::string> v;
                     for (const auto& k : inputs_) v.push_back(k.layer().name());
                     return v;
                   }(),
                   ", "),
               inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    TF_CHECK_ARG(inputs[i].defined(), n.c_str(),
                 "input {} ('{}') of model \"{}\" is an undefined tensor", i,
                 inputs_[i].layer().name(), n);
    TF_CHECK_ARG(compatible(inputs[i].shape(), inputs_[i].shape()), n.c_str(),
                 "Input {} with name '{}' of layer '{}' is incompatible with the layer: expected "
                 "shape={}, found shape={}",
                 i, inputs_[i].layer().name(), n, inputs_[i].shape().to_string(),
                 inputs[i].shape().to_string());
  }
}

std::vector<Tensor> FunctionalImpl::execute(const std::vector<Tensor>& inputs, bool training,
                                            const Tensor& input_mask,
                                            std::vector<Tensor>* output_masks) const {
  check_inputs(inputs);
  std::vector<Tensor> values(slots_);
  // Keras' masks travel with the values: each layer gets its input's mask and gives its
  // output one (LayerImpl::invoke_masked); the model's own mask argument is the first input's.
  std::vector<Tensor> masks(slots_);
  for (size_t i = 0; i < inputs.size(); ++i) {
    // Keras converts each input to its Input's dtype.
    const Tensor& x = inputs[i];
    values[input_slots_[i]] = x.dtype() == inputs_[i].dtype() ? x : cast(x, inputs_[i].dtype());
  }
  if (input_mask.defined() && !input_slots_.empty()) masks[input_slots_[0]] = input_mask;
  std::vector<Tensor> list;
  // A step's outputs, but not those the caller gives (an intermediate tensor as a model input).
  auto put = [&](const Step& s, size_t i, Tensor value, Tensor mask) {
    if (is_input_slot_[s.out[i]]) return;
    values[s.out[i]] = std::move(value);
    masks[s.out[i]] = std::move(mask);
  };
  for (const Step& s : steps_) {
    // Keras 3 passes the model's training flag to every layer whenever it is given, over a
    // flag pinned at the layer's call (fit trains a layer pinned to false); a C++ call has no
    // "not given", so the model's false (the default) leaves a pinned true in force.
    const bool t = training || s.training.value_or(false);
    if (s.multi != nullptr) {
      std::vector<Tensor> in, in_masks;
      for (size_t i : s.in) {
        in.push_back(values[i]);
        in_masks.push_back(masks[i]);
      }
      std::vector<MaskedTensor> r = s.multi->run(in, in_masks, t);
      for (size_t i = 0; i < s.out.size(); ++i)
        put(s, i, std::move(r[i].output), std::move(r[i].mask));
    } else if (s.merge != nullptr) {
      list.clear();
      std::vector<Tensor> in_masks;
      for (size_t i : s.in) {
        list.push_back(values[i]);
        in_masks.push_back(masks[i]);
      }
      // Keras' merge masks (MergeImpl::merged_mask): the OR of the inputs' masks, none when an
      // input has none; Concatenate's and Dot's own rules.
      MaskedTensor r = s.merge->invoke_masked_list(list, in_masks);
      put(s, 0, std::move(r.output), std::move(r.mask));
    } else {
      const Tensor& in_mask = masks[s.in[0]];
      if (!in_mask.defined() && !s.layer.impl().supports_masking()) {
        put(s, 0, s.layer(values[s.in[0]], t), Tensor());
      } else {
        MaskedTensor r = s.layer.impl().invoke_masked(values[s.in[0]], in_mask, t);
        put(s, 0, std::move(r.output), std::move(r.mask));
      }
    }
    // A value no later step reads could be dropped here; models are small enough to keep all.
  }
  std::vector<Tensor> out;
  for (size_t i : output_slots_) out.push_back(values[i]);
  if (output_masks != nullptr)
    for (size_t i : output_slots_) output_masks->push_back(masks[i]);
  return out;
}

Tensor FunctionalImpl::run(const Tensor& x, bool training) {
  if (t_pending.model == this) {
    const PendingCall p = std::exchange(t_pending, PendingCall{});
    *p.outputs = execute(*p.inputs, training, Tensor(), p.output_masks);
    return p.outputs->front();
  }
  const std::string n = name();
  TF_CHECK_ARG(outputs_.size() == 1, n.c_str(),
               "model \"{}\" has {} outputs: call it with a std::vector<Tensor> of inputs, which "
               "returns every output",
               n, outputs_.size());
  std::vector<Tensor> masks;
  Tensor y = execute({x}, training, call_mask(), &masks).front();
  set_output_mask(masks.front());
  return y;
}

Tensor FunctionalImpl::compute_mask(const Tensor& x, const Tensor& mask) const {
  // Keras' Functional.compute_mask runs the graph too: a layer's mask may need its input's
  // values (Masking).
  std::vector<Tensor> masks;
  (void)execute({x}, false, mask, &masks);
  return masks.front();
}

std::vector<Tensor> FunctionalImpl::call_all(const std::vector<Tensor>& inputs, bool training,
                                             std::vector<Tensor>* output_masks) {
  check_inputs(inputs);
  std::vector<Tensor> outputs;
  t_pending = PendingCall{this, &inputs, &outputs, output_masks};
  try {
    // Through invoke: the call is numbered and framed as every layer call is.
    (void)invoke(inputs.front(), training);
  } catch (...) {
    t_pending = PendingCall{};
    throw;
  }
  t_pending = PendingCall{};
  return outputs;
}

}  // namespace detail

// ---- Input, the symbolic layer call, the Model constructors ----

KerasTensor Input(const std::vector<int64_t>& shape, std::optional<DType> dtype_or_floatx,
                  std::string name, std::optional<int64_t> batch_size) {
  const DType dtype = dtype_or_floatx.value_or(backend::floatx());
  TensorShape s;
  TF_CHECK_ARG(!batch_size || *batch_size > 0, "Input", "batch_size must be positive, got {}",
               batch_size.value_or(0));
  s.push_back(batch_size ? *batch_size : None);
  for (int64_t d : shape) {
    TF_CHECK_ARG(d >= 0 || d == None, "Input",
                 "shape must have non-negative sizes (or tf::None), got ({})",
                 fmt::join(shape, ", "));
    s.push_back(d);
  }
  auto impl = std::make_shared<detail::InputLayerImpl>(s, dtype, name);
  Layer layer(impl);
  auto node = std::make_shared<detail::KerasNode>();
  node->layer = layer;
  node->node_index = detail::next_node_index(layer);
  return detail::make_tensor(std::move(s), dtype, name, std::move(node));
}

KerasTensor Layer::operator()(const KerasTensor& x, std::optional<bool> training) const {
  return detail::call_symbolic(*this, {x}, false, training);
}

Model::Model(const KerasTensor& inputs, const KerasTensor& outputs, std::string name)
    : Model(std::vector<KerasTensor>{inputs}, std::vector<KerasTensor>{outputs}, std::move(name)) {}

Model::Model(const std::vector<KerasTensor>& inputs, const std::vector<KerasTensor>& outputs,
             std::string name)
    : Model(std::make_shared<detail::FunctionalImpl>(inputs, outputs, std::move(name))) {}

std::vector<Tensor> Model::operator()(const std::vector<Tensor>& inputs, bool training) const {
  if (auto* f = dynamic_cast<detail::FunctionalImpl*>(&impl()))
    return f->call_all(inputs, training);
  const std::string n = name();
  TF_CHECK_ARG(inputs.size() == 1, n.c_str(),
               "model \"{}\" ({}) takes one input, it was called with a list of {}", n,
               class_name(), inputs.size());
  return {Layer::operator()(inputs[0], training)};
}

}  // namespace tapeflow::keras
