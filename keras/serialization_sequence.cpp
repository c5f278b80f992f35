// Keras configs of the built-in recurrent layers (SimpleRNN, LSTM, GRU, RNN with the built-in
// cells), wrappers (Bidirectional, TimeDistributed), attention, Masking and the preprocessing
// layers (keras/serialization.h; the shared reader and writer pieces are in
// keras/serialization_internal.h), and where Keras 3 keeps their weights in a .weights.h5 file: a
// recurrent layer's under its cell ("cell/vars/<i>"), Bidirectional's under "forward_layer/" and
// "backward_layer/", TimeDistributed's under "layer/", MultiHeadAttention's under its four
// projections ("query_dense/vars/<i>", ...).
#include <iterator>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "keras/layers_attention.h"
#include "keras/layers_extra.h"
#include "keras/layers_hashing.h"
#include "keras/layers_masking.h"
#include "keras/layers_misc.h"
#include "keras/layers_preprocessing.h"
#include "keras/layers_recurrent.h"
#include "keras/layers_rnn_cells.h"
#include "keras/serialization_access_sequence.h"
#include "keras/serialization_internal.h"

namespace tapeflow::keras::saving::internal {
Config range_json(std::pair<double, double> r) {
  return Config::array({r.first, r.second});
}

// A Keras factor: a number or a [lower, upper] pair.
layers::Factor factor_of(Reader& r, const std::string& key) {
  const Config& v = r.require(key);
  if (v.is_number()) return layers::Factor(v.get<double>());
  if (v.is_array() && v.size() == 2 && v[0].is_number() && v[1].is_number())
    return layers::Factor(v[0].get<double>(), v[1].get<double>());
  r.fail(key, "must be a number or a list of 2 numbers, got " + r.got(v));
}

std::pair<double, double> value_range_of(Reader& r) {
  if (!r.has("value_range")) return {0.0, 255.0};
  const layers::Factor f = factor_of(r, "value_range");
  if (f.single) r.fail("value_range", "must be a list of 2 numbers");
  return {f.lower, f.upper};
}

layers::RandomTransformOptions transform_of(Reader& r, const Base& b) {
  layers::RandomTransformOptions o;
  o.fill_mode = r.string("fill_mode", "reflect");
  o.interpolation = r.string("interpolation", "bilinear");
  o.seed = r.optional_integer("seed");
  o.fill_value = r.number("fill_value", 0.0);
  o.name = b.name;
  return o;
}

namespace {

namespace lo = detail::layer_options;

// A nested layer's serialized object (Keras' serialize_keras_object of a wrapped layer).
Layer nested_layer(Reader& r, const std::string& key) {
  const Config& v = r.require(key);
  if (!v.is_object()) r.fail(key, "must be a serialized layer object, got " + r.got(v));
  try {
    return deserialize(v);
  } catch (const InvalidArgumentError& e) {
    r.fail(key, std::string("does not load: ") + e.what());
  }
}

// ---- SimpleRNN, LSTM, GRU ----

enum class Rnn { simple, lstm, gru };

// Keras' keys in its order; the class decides which of recurrent_activation, unit_forget_bias,
// reset_after and seed it has. Keras' return_state is not an option here (call_with_state):
// written as false.
// The weight keys of the recurrent layers and ConvLSTM, in Keras' order: the three initializers,
// unit_forget_bias (LSTM and ConvLSTM), the three regularizers, the unsupported activity
// regularizer (null) and the three constraints.
template <class C>
void add_recurrent_weight_keys(Config& out, const Layer& layer, const C& c, bool forget_bias) {
  out["kernel_initializer"] = initializer_json(layer, "kernel_initializer", c.kernel_initializer,
                                               initializers::GlorotUniform());
  out["recurrent_initializer"] = initializer_json(
      layer, "recurrent_initializer", c.recurrent_initializer, initializers::Orthogonal());
  out["bias_initializer"] =
      initializer_json(layer, "bias_initializer", c.bias_initializer, initializers::Zeros());
  if (forget_bias) out["unit_forget_bias"] = c.unit_forget_bias;
  out["kernel_regularizer"] = regularizer_json(layer, "kernel_regularizer", c.kernel_regularizer);
  out["recurrent_regularizer"] =
      regularizer_json(layer, "recurrent_regularizer", c.recurrent_regularizer);
  out["bias_regularizer"] = regularizer_json(layer, "bias_regularizer", c.bias_regularizer);
  out["activity_regularizer"] = nullptr;
  out["kernel_constraint"] = constraint_json(layer, "kernel_constraint", c.kernel_constraint);
  out["recurrent_constraint"] =
      constraint_json(layer, "recurrent_constraint", c.recurrent_constraint);
  out["bias_constraint"] = constraint_json(layer, "bias_constraint", c.bias_constraint);
}
// Their reading (unit_forget_bias apart).
template <class O>
void read_recurrent_weight_keys(Reader& r, O& o) {
  o.kernel_initializer = r.initializer("kernel_initializer");
  o.recurrent_initializer = r.initializer("recurrent_initializer");
  o.bias_initializer = r.initializer("bias_initializer");
  o.kernel_regularizer = r.regularizer("kernel_regularizer");
  o.recurrent_regularizer = r.regularizer("recurrent_regularizer");
  o.bias_regularizer = r.regularizer("bias_regularizer");
  r.expect_null("activity_regularizer");
  o.kernel_constraint = r.constraint("kernel_constraint");
  o.recurrent_constraint = r.constraint("recurrent_constraint");
  o.bias_constraint = r.constraint("bias_constraint");
}

Config recurrent_get(const Layer& layer) {
  auto c = need(lo::recurrent(layer.impl()), layer);
  const bool simple = c.class_name == "SimpleRNN";
  Config out{{"return_sequences", c.return_sequences},
             {"return_state", false},
             {"go_backwards", c.go_backwards},
             {"stateful", c.stateful},
             {"unroll", c.unroll},
             {"zero_output_for_mask", c.zero_output_for_mask},
             {"units", c.units},
             {"activation", activation_json(c.activation)}};
  if (!simple) out["recurrent_activation"] = activation_json(c.recurrent_activation);
  out["use_bias"] = c.use_bias;
  add_recurrent_weight_keys(out, layer, c, c.class_name == "LSTM");
  out["dropout"] = c.dropout;
  out["recurrent_dropout"] = c.recurrent_dropout;
  if (c.class_name == "GRU") out["reset_after"] = c.reset_after;
  if (!simple) out["seed"] = seed_json(c.seed);  // Keras' SimpleRNN does not write its seed
  return out;
}

template <Rnn kCell>
Layer recurrent_from(const Config& config) {
  constexpr const char* cls = kCell == Rnn::simple ? "SimpleRNN"
                              : kCell == Rnn::lstm ? "LSTM"
                                                   : "GRU";
  Reader r(cls, config);
  Base b = read_base(r);
  // The options all three have, in GRUOptions' shape, moved into the class's own below.
  layers::GRUOptions o;
  o.return_sequences = r.boolean("return_sequences", false);
  r.expect("return_state", false);  // several outputs: call_with_state, not a config option
  o.go_backwards = r.boolean("go_backwards", false);
  o.stateful = r.boolean("stateful", false);
  o.unroll = r.boolean("unroll", false);  // how the loop is traced, not what it computes
  o.zero_output_for_mask = r.boolean("zero_output_for_mask", false);
  const int64_t units = r.integer("units");
  o.activation = r.activation("activation");
  if (!r.has("activation")) o.activation = "tanh";
  if (kCell != Rnn::simple) {
    o.recurrent_activation = r.activation("recurrent_activation");
    if (!r.has("recurrent_activation")) o.recurrent_activation = "sigmoid";
  }
  o.use_bias = r.boolean("use_bias", true);
  read_recurrent_weight_keys(r, o);
  bool unit_forget_bias = true;
  if (kCell == Rnn::lstm) unit_forget_bias = r.boolean("unit_forget_bias", true);
  o.dropout = r.number("dropout", 0.0);
  o.recurrent_dropout = r.number("recurrent_dropout", 0.0);
  if (kCell == Rnn::gru) o.reset_after = r.boolean("reset_after", true);
  o.seed = r.optional_integer("seed");
  // Keras' choice of the cuDNN kernel: the same values either way.
  if (const Config* v = r.find("use_cudnn"); v != nullptr && !v->is_boolean() && *v != "auto")
    r.fail("use_cudnn", "must be \"auto\", true or false, got " + r.got(*v));
  o.name = b.name;
  r.finish();
  Layer l = [&]() -> Layer {
    if constexpr (kCell == Rnn::gru) {
      return layers::GRU(units, o);
    } else if constexpr (kCell == Rnn::lstm) {
      return layers::LSTM(units,
                          layers::LSTMOptions{.activation = o.activation,
                                              .recurrent_activation = o.recurrent_activation,
                                              .use_bias = o.use_bias,
                                              .kernel_initializer = o.kernel_initializer,
                                              .recurrent_initializer = o.recurrent_initializer,
                                              .bias_initializer = o.bias_initializer,
                                              .unit_forget_bias = unit_forget_bias,
                                              .kernel_regularizer = o.kernel_regularizer,
                                              .recurrent_regularizer = o.recurrent_regularizer,
                                              .bias_regularizer = o.bias_regularizer,
                                              .kernel_constraint = o.kernel_constraint,
                                              .recurrent_constraint = o.recurrent_constraint,
                                              .bias_constraint = o.bias_constraint,
                                              .return_sequences = o.return_sequences,
                                              .go_backwards = o.go_backwards,
                                              .stateful = o.stateful,
                                              .unroll = o.unroll,
                                              .zero_output_for_mask = o.zero_output_for_mask,
                                              .dropout = o.dropout,
                                              .recurrent_dropout = o.recurrent_dropout,
                                              .seed = o.seed,
                                              .name = o.name});
    } else {
      return layers::SimpleRNN(
          units, layers::SimpleRNNOptions{.activation = o.activation,
                                          .use_bias = o.use_bias,
                                          .kernel_initializer = o.kernel_initializer,
                                          .recurrent_initializer = o.recurrent_initializer,
                                          .bias_initializer = o.bias_initializer,
                                          .kernel_regularizer = o.kernel_regularizer,
                                          .recurrent_regularizer = o.recurrent_regularizer,
                                          .bias_regularizer = o.bias_regularizer,
                                          .kernel_constraint = o.kernel_constraint,
                                          .recurrent_constraint = o.recurrent_constraint,
                                          .bias_constraint = o.bias_constraint,
                                          .return_sequences = o.return_sequences,
                                          .go_backwards = o.go_backwards,
                                          .stateful = o.stateful,
                                          .unroll = o.unroll,
                                          .zero_output_for_mask = o.zero_output_for_mask,
                                          .dropout = o.dropout,
                                          .recurrent_dropout = o.recurrent_dropout,
                                          .seed = o.seed,
                                          .name = o.name});
    }
  }();
  apply_base(l, b);
  return l;
}

// Keras keeps a recurrent layer's weights in its cell: "cell/vars/0..2".
bool recurrent_weights(const Layer& layer, const std::string& prefix, WeightList& out) {
  if (!lo::recurrent(layer.impl())) return false;
  own_weights(layer, prefix + "cell/", out);
  return true;
}

// ---- RNN with cells ----

// A cell's serialized object (Keras' keys per class, in its order). Cells are not registry
// classes (a cell is a Model subclass object, which a factory could not hand back): RNN writes
// and reads them itself.
Config cell_object(const Layer& rnn, const layers::RNNCell& cell) {
  Config c = base_config(cell);
  std::string cls;
  auto common = [&](int64_t units, const std::string& activation, const std::string* recurrent,
                    bool use_bias) {
    c["units"] = units;
    c["activation"] = activation_json(activation);
    if (recurrent != nullptr) c["recurrent_activation"] = activation_json(*recurrent);
    c["use_bias"] = use_bias;
  };
  auto weights = [&](const auto& o) {
    c["kernel_initializer"] = initializer_json(cell, "kernel_initializer", o.kernel_initializer,
                                               initializers::GlorotUniform());
    c["recurrent_initializer"] = initializer_json(
        cell, "recurrent_initializer", o.recurrent_initializer, initializers::Orthogonal());
    c["bias_initializer"] =
        initializer_json(cell, "bias_initializer", o.bias_initializer, initializers::Zeros());
    c["kernel_regularizer"] = regularizer_json(cell, "kernel_regularizer", o.kernel_regularizer);
    c["recurrent_regularizer"] =
        regularizer_json(cell, "recurrent_regularizer", o.recurrent_regularizer);
    c["bias_regularizer"] = regularizer_json(cell, "bias_regularizer", o.bias_regularizer);
    c["kernel_constraint"] = constraint_json(cell, "kernel_constraint", o.kernel_constraint);
    c["recurrent_constraint"] =
        constraint_json(cell, "recurrent_constraint", o.recurrent_constraint);
    c["bias_constraint"] = constraint_json(cell, "bias_constraint", o.bias_constraint);
    c["dropout"] = o.dropout;
    c["recurrent_dropout"] = o.recurrent_dropout;
  };
  if (const auto* p = dynamic_cast<const layers::SimpleRNNCell*>(&cell)) {
    cls = "SimpleRNNCell";
    common(p->units(), p->options().activation, nullptr, p->options().use_bias);
    weights(p->options());
    c["seed"] = seed_json(p->options().seed);
  } else if (const auto* p = dynamic_cast<const layers::LSTMCell*>(&cell)) {
    cls = "LSTMCell";
    const layers::LSTMCellOptions& o = p->options();
    common(p->units(), o.activation, &o.recurrent_activation, o.use_bias);
    c["unit_forget_bias"] = o.unit_forget_bias;
    weights(o);
    c["seed"] = seed_json(o.seed);
  } else if (const auto* p = dynamic_cast<const layers::GRUCell*>(&cell)) {
    cls = "GRUCell";
    const layers::GRUCellOptions& o = p->options();
    common(p->units(), o.activation, &o.recurrent_activation, o.use_bias);
    weights(o);
    c["reset_after"] = o.reset_after;
    c["seed"] = seed_json(o.seed);
  } else if (const auto* p = dynamic_cast<const layers::StackedRNNCells*>(&cell)) {
    cls = "StackedRNNCells";
    Config cells = Config::array();
    for (const auto& sub : p->cells()) cells.push_back(cell_object(rnn, *sub));
    c["cells"] = cells;
  } else {
    TF_THROW(UnimplementedError, "get_config",
             "{}: its cell \"{}\" ({}) is not one of tapeflow's SimpleRNNCell, LSTMCell, "
             "GRUCell or StackedRNNCells, which have Keras configs",
             who(rnn), cell.name(), cell.class_name());
  }
  Config out{
      {"module", "keras.layers"}, {"class_name", cls}, {"config", c}, {"registered_name", nullptr}};
  if (cell.built())
    out["build_config"] = Config{{"input_shape", shape_json(cell.impl().built_input_shape())}};
  return out;
}

// The cell of a serialized cell object (`key` of the RNN config being read).
std::shared_ptr<layers::RNNCell> cell_from(Reader& parent, const std::string& key,
                                           const Config& object) {
  if (!object.is_object()) parent.fail(key, "must be a serialized cell, got " + parent.got(object));
  Config stripped = object;
  stripped.erase("build_config");  // the RNN builds its cell
  auto [cls, config] = object_parts(parent, key, stripped, "keras.layers");
  Reader r(cls, config);
  Base b = read_base(r);
  std::shared_ptr<layers::RNNCell> cell;
  if (cls == "StackedRNNCells") {
    const Config& list = r.require("cells");
    if (!list.is_array() || list.empty()) r.fail("cells", "must be a non-empty list of cells");
    std::vector<std::shared_ptr<layers::RNNCell>> cells;
    for (const Config& sub : list) cells.push_back(cell_from(r, "cells", sub));
    r.finish();
    cell = std::make_shared<layers::StackedRNNCells>(std::move(cells), b.name);
  } else if (cls == "SimpleRNNCell" || cls == "LSTMCell" || cls == "GRUCell") {
    const int64_t units = r.integer("units");
    const std::string activation = r.has("activation") ? r.activation("activation") : "tanh";
    std::string recurrent = "sigmoid";
    if (cls != "SimpleRNNCell" && r.has("recurrent_activation"))
      recurrent = r.activation("recurrent_activation");
    const bool use_bias = r.boolean("use_bias", true);
    const bool unit_forget_bias = cls == "LSTMCell" ? r.boolean("unit_forget_bias", true) : true;
    auto fill = [&](auto& o) {
      o.activation = activation;
      o.use_bias = use_bias;
      o.kernel_initializer = r.initializer("kernel_initializer");
      o.recurrent_initializer = r.initializer("recurrent_initializer");
      o.bias_initializer = r.initializer("bias_initializer");
      o.kernel_regularizer = r.regularizer("kernel_regularizer");
      o.recurrent_regularizer = r.regularizer("recurrent_regularizer");
      o.bias_regularizer = r.regularizer("bias_regularizer");
      o.kernel_constraint = r.constraint("kernel_constraint");
      o.recurrent_constraint = r.constraint("recurrent_constraint");
      o.bias_constraint = r.constraint("bias_constraint");
      o.dropout = r.number("dropout", 0.0);
      o.recurrent_dropout = r.number("recurrent_dropout", 0.0);
      o.name = b.name;
    };
    if (cls == "SimpleRNNCell") {
      layers::SimpleRNNCellOptions o;
      fill(o);
      o.seed = r.optional_integer("seed");
      r.finish();
      cell = std::make_shared<layers::SimpleRNNCell>(units, o);
    } else if (cls == "LSTMCell") {
      layers::LSTMCellOptions o;
      fill(o);
      o.recurrent_activation = recurrent;
      o.unit_forget_bias = unit_forget_bias;
      o.seed = r.optional_integer("seed");
      r.finish();
      cell = std::make_shared<layers::LSTMCell>(units, o);
    } else {
      layers::GRUCellOptions o;
      fill(o);
      o.recurrent_activation = recurrent;
      o.reset_after = r.boolean("reset_after", true);
      o.seed = r.optional_integer("seed");
      r.finish();
      cell = std::make_shared<layers::GRUCell>(units, o);
    }
  } else {
    parent.fail(key, "is the cell class \"" + cls +
                         "\", which tapeflow cannot read (SimpleRNNCell, LSTMCell, GRUCell, "
                         "StackedRNNCells)");
  }
  apply_base(*cell, b);
  return cell;
}

Config rnn_get(const Layer& layer) {
  auto c = need(lo::rnn(layer.impl()), layer);
  return Config{{"return_sequences", c.options.return_sequences},
                {"return_state", false},
                {"go_backwards", c.options.go_backwards},
                {"stateful", c.options.stateful},
                {"unroll", c.options.unroll},
                {"zero_output_for_mask", c.options.zero_output_for_mask},
                {"cell", cell_object(layer, *c.cell)}};
}

Layer rnn_from(const Config& config) {
  Reader r("RNN", config);
  Base b = read_base(r);
  layers::RNNOptions o;
  o.return_sequences = r.boolean("return_sequences", false);
  r.expect("return_state", false);
  o.go_backwards = r.boolean("go_backwards", false);
  o.stateful = r.boolean("stateful", false);
  o.unroll = r.boolean("unroll", false);  // as the recurrent layers'
  o.zero_output_for_mask = r.boolean("zero_output_for_mask", false);
  std::shared_ptr<layers::RNNCell> cell = cell_from(r, "cell", r.require("cell"));
  o.name = b.name;
  r.finish();
  Layer l = layers::RNN(std::move(cell), o);
  apply_base(l, b);
  return l;
}

// Keras: "cell/vars/<i>", a stacked cell's cells under "cell/cells/<cell>/".
void cell_weights(const layers::RNNCell& cell, const std::string& prefix, WeightList& out) {
  if (const auto* p = dynamic_cast<const layers::StackedRNNCells*>(&cell)) {
    for (const auto& sub : p->cells())
      cell_weights(*sub, prefix + "cells/" + sub->name() + "/", out);
    return;
  }
  own_weights(cell, prefix, out);
}
bool rnn_weights(const Layer& layer, const std::string& prefix, WeightList& out) {
  auto c = lo::rnn(layer.impl());
  if (!c) return false;
  cell_weights(*c->cell, prefix + "cell/", out);
  return true;
}

// ---- ConvLSTM1D/2D/3D ----

Config conv_lstm_get(const Layer& layer) {
  auto c = need(lo::conv_lstm(layer.impl()), layer);
  const layers::ConvLSTMOptions& o = c.options;
  Config out{{"return_sequences", o.return_sequences},
             {"return_state", false},
             {"go_backwards", o.go_backwards},
             {"stateful", o.stateful},
             {"unroll", false},
             {"zero_output_for_mask", o.zero_output_for_mask},
             {"filters", c.filters},
             {"kernel_size", c.kernel_size},
             {"strides", c.strides},
             {"padding", o.padding},
             {"data_format", o.data_format},
             {"dilation_rate", c.dilation_rate},
             {"activation", activation_json(o.activation)},
             {"recurrent_activation", activation_json(o.recurrent_activation)},
             {"use_bias", o.use_bias}};
  add_recurrent_weight_keys(out, layer, o, true);
  out["dropout"] = o.dropout;
  out["recurrent_dropout"] = o.recurrent_dropout;
  out["seed"] = seed_json(o.seed);
  return out;
}

template <int kRank>
Layer conv_lstm_from(const Config& config) {
  static const std::string cls = "ConvLSTM" + std::to_string(kRank) + "D";
  Reader r(cls, config);
  Base b = read_base(r);
  layers::ConvLSTMOptions o;
  o.return_sequences = r.boolean("return_sequences", false);
  r.expect("return_state", false);  // several outputs: call_with_state, not a config option
  o.go_backwards = r.boolean("go_backwards", false);
  o.stateful = r.boolean("stateful", false);
  r.boolean("unroll", false);  // how Keras runs the loop, not what it computes
  o.zero_output_for_mask = r.boolean("zero_output_for_mask", false);
  const int64_t filters = r.integer("filters");
  const std::vector<int64_t> kernel_size = r.int_list("kernel_size");
  auto ints = [&](const char* key) {
    std::vector<int> v;
    if (r.has(key))
      for (int64_t x : r.int_list(key)) v.push_back(r.fits_int(key, x));
    return v.empty() ? std::vector<int>{1} : v;
  };
  o.strides = ints("strides");
  o.padding = r.string("padding", "valid");
  o.data_format = data_format_name(read_channels_first(r));
  o.dilation_rate = ints("dilation_rate");
  o.activation = r.activation("activation");
  if (!r.has("activation")) o.activation = "tanh";
  o.recurrent_activation = r.activation("recurrent_activation");
  if (!r.has("recurrent_activation")) o.recurrent_activation = "sigmoid";
  o.use_bias = r.boolean("use_bias", true);
  read_recurrent_weight_keys(r, o);
  o.unit_forget_bias = r.boolean("unit_forget_bias", true);
  o.dropout = r.number("dropout", 0.0);
  o.recurrent_dropout = r.number("recurrent_dropout", 0.0);
  o.seed = r.optional_integer("seed");
  o.name = b.name;
  r.finish();
  Layer l = layers::ConvLSTM(kRank, filters, kernel_size, o);
  apply_base(l, b);
  return l;
}

// Keras keeps the cell's kernel, recurrent_kernel and bias under "cell/".
bool conv_lstm_weights(const Layer& layer, const std::string& prefix, WeightList& out) {
  auto c = lo::conv_lstm(layer.impl());
  if (!c) return false;
  cell_weights(*c->cell, prefix + "cell/", out);
  return true;
}

// ---- Bidirectional ----

Config bidirectional_get(const Layer& layer) {
  auto c = need(lo::bidirectional(layer.impl()), layer);
  return Config{{"merge_mode", c.merge_mode},
                {"layer", serialize(c.forward)},
                {"backward_layer", serialize(c.backward)}};
}

Layer bidirectional_from(const Config& config) {
  Reader r("Bidirectional", config);
  Base b = read_base(r);
  const std::string merge_mode = r.string("merge_mode", "concat");
  if (merge_mode != "concat" && merge_mode != "sum" && merge_mode != "mul" && merge_mode != "ave")
    r.fail("merge_mode", "= \"" + merge_mode + "\" is not supported (concat, sum, mul, ave)");
  Layer forward = nested_layer(r, "layer");
  Layer backward = r.has("backward_layer") ? nested_layer(r, "backward_layer") : Layer();
  r.finish();
  if (!lo::recurrent(forward.impl()) && !lo::rnn_info(forward.impl()))
    r.fail("layer",
           "must be a SimpleRNN, LSTM, GRU, RNN or ConvLSTM layer, got " + forward.class_name());
  Layer l;
  try {
    l = lo::make_bidirectional(forward, backward, merge_mode, b.name);
  } catch (const InvalidArgumentError& e) {
    r.fail("backward_layer", e.what());
  }
  apply_base(l, b);
  return l;
}

bool bidirectional_weights(const Layer& layer, const std::string& prefix, WeightList& out) {
  auto c = lo::bidirectional(layer.impl());
  if (!c) return false;
  collect_weights(c->forward, prefix + "forward_layer/", out);
  collect_weights(c->backward, prefix + "backward_layer/", out);
  return true;
}

// ---- TimeDistributed ----

Config time_distributed_get(const Layer& layer) {
  return Config{{"layer", serialize(need(lo::time_distributed_layer(layer.impl()), layer))}};
}

Layer time_distributed_from(const Config& config) {
  Reader r("TimeDistributed", config);
  Base b = read_base(r);
  Layer inner = nested_layer(r, "layer");
  r.finish();
  Layer l = layers::TimeDistributed(inner, b.name);
  apply_base(l, b);
  return l;
}

bool time_distributed_weights(const Layer& layer, const std::string& prefix, WeightList& out) {
  auto inner = lo::time_distributed_layer(layer.impl());
  if (!inner) return false;
  collect_weights(*inner, prefix + "layer/", out);
  return true;
}

// ---- SpectralNormalization ----

Config spectral_normalization_get(const Layer& layer) {
  auto c = need(lo::spectral_normalization(layer.impl()), layer);
  return Config{{"layer", serialize(c.layer)}, {"power_iterations", c.power_iterations}};
}

Layer spectral_normalization_from(const Config& config) {
  Reader r("SpectralNormalization", config);
  Base b = read_base(r);
  Layer inner = nested_layer(r, "layer");
  const int64_t iterations = r.integer("power_iterations", 1);
  if (iterations < 1 || iterations > 1000000)
    r.fail("power_iterations", "must be a positive integer, got " + std::to_string(iterations));
  r.finish();
  Layer l = layers::SpectralNormalization(inner, static_cast<int>(iterations), b.name);
  apply_base(l, b);
  return l;
}

// Keras' groups: the wrapper's own vars/0 is the wrapped kernel (Keras tracks self.kernel) and
// vars/1 vector_u; the wrapped layer's weights sit under "layer/".
bool spectral_normalization_weights(const Layer& layer, const std::string& prefix,
                                    WeightList& out) {
  auto c = lo::spectral_normalization(layer.impl());
  if (!c) return false;
  if (c->kernel.defined()) out.emplace_back(prefix + "vars/0", c->kernel);
  if (c->vector_u.defined()) out.emplace_back(prefix + "vars/1", c->vector_u);
  collect_weights(c->layer, prefix + "layer/", out);
  return true;
}

// ---- Masking ----

Config masking_get(const Layer& layer) {
  return Config{{"mask_value", need(lo::masking_value(layer.impl()), layer)}};
}

Layer masking_from(const Config& config) {
  Reader r("Masking", config);
  Base b = read_base(r);
  const double value = r.number("mask_value", 0.0);
  r.finish();
  Layer l = layers::Masking(value, b.name);
  apply_base(l, b);
  return l;
}

// ---- MultiHeadAttention, Attention, AdditiveAttention ----

Config int_list_json(const std::vector<int64_t>& v) {
  return v.empty() ? Config(nullptr) : Config(v);
}
// null, an int or a list of ints (Keras' output_shape and attention_axes).
std::vector<int64_t> optional_int_list(Reader& r, const std::string& key) {
  const Config* v = r.find(key);
  if (v == nullptr || v->is_null()) return {};
  return r.int_list(key);
}

// The keys MultiHeadAttention and GroupQueryAttention end with, in Keras' order: the
// initializers and regularizers, the unsupported activity regularizer (null), the constraints,
// the seed.
template <class Options>
void add_attention_tail(Config& out, const Layer& layer, const Options& o) {
  add_kernel_bias_keys(out, layer, o.kernel_initializer, o.bias_initializer, o.kernel_regularizer,
                       o.bias_regularizer);
  out["activity_regularizer"] = nullptr;
  out["kernel_constraint"] = constraint_json(layer, "kernel_constraint", o.kernel_constraint);
  out["bias_constraint"] = constraint_json(layer, "bias_constraint", o.bias_constraint);
  out["seed"] = seed_json(o.seed);
}
template <class Options>
void read_attention_tail(Reader& r, Options& o) {
  o.kernel_initializer = r.initializer("kernel_initializer");
  o.bias_initializer = r.initializer("bias_initializer");
  o.kernel_regularizer = r.regularizer("kernel_regularizer");
  o.bias_regularizer = r.regularizer("bias_regularizer");
  r.expect_null("activity_regularizer");
  o.kernel_constraint = r.constraint("kernel_constraint");
  o.bias_constraint = r.constraint("bias_constraint");
  o.seed = r.optional_integer("seed");
}

Config mha_get(const Layer& layer) {
  auto c = need(lo::multi_head_attention(layer.impl()), layer);
  const layers::MultiHeadAttentionOptions& o = c.options;
  Config out{
      {"num_heads", c.num_heads},
      {"key_dim", c.key_dim},
      {"value_dim", *o.value_dim},
      {"dropout", o.dropout},
      {"use_bias", o.use_bias},
      {"use_gate", false},
      {"output_shape", int_list_json(o.output_shape)},
      {"attention_axes", c.attention_axes.empty() ? Config(nullptr) : Config(c.attention_axes)},
      {"sliding_window", nullptr}};
  add_attention_tail(out, layer, o);
  return out;
}

Layer mha_from(const Config& config) {
  Reader r("MultiHeadAttention", config);
  Base b = read_base(r);
  const int64_t num_heads = r.integer("num_heads");
  const int64_t key_dim = r.integer("key_dim");
  layers::MultiHeadAttentionOptions o;
  o.value_dim = r.optional_integer("value_dim");
  o.dropout = r.number("dropout", 0.0);
  o.use_bias = r.boolean("use_bias", true);
  r.expect("use_gate", false);
  o.output_shape = optional_int_list(r, "output_shape");
  for (int64_t a : optional_int_list(r, "attention_axes")) o.attention_axes.push_back(int(a));
  r.expect_null("sliding_window");
  read_attention_tail(r, o);
  o.name = b.name;
  r.finish();
  Layer l = layers::MultiHeadAttention(num_heads, key_dim, o);
  apply_base(l, b);
  return l;
}

// ---- GroupQueryAttention ----

Config gqa_get(const Layer& layer) {
  auto c = need(lo::group_query_attention(layer.impl()), layer);
  const layers::GroupQueryAttentionOptions& o = c.options;
  Config out{{"head_dim", c.head_dim},
             {"num_query_heads", c.num_query_heads},
             {"num_key_value_heads", c.num_key_value_heads},
             {"use_bias", o.use_bias},
             {"use_gate", o.use_gate},
             {"sliding_window", o.sliding_window ? Config(*o.sliding_window) : Config(nullptr)},
             {"dropout", o.dropout}};
  add_attention_tail(out, layer, o);
  return out;
}

Layer gqa_from(const Config& config) {
  Reader r("GroupQueryAttention", config);
  Base b = read_base(r);
  const int64_t head_dim = r.integer("head_dim");
  const int64_t nq = r.integer("num_query_heads");
  const int64_t nkv = r.integer("num_key_value_heads");
  layers::GroupQueryAttentionOptions o;
  o.use_bias = r.boolean("use_bias", true);
  o.use_gate = r.boolean("use_gate", false);
  o.sliding_window = r.optional_integer("sliding_window");
  o.dropout = r.number("dropout", 0.0);
  read_attention_tail(r, o);
  o.name = b.name;
  r.finish();
  Layer l = layers::GroupQueryAttention(head_dim, nq, nkv, o);
  apply_base(l, b);
  return l;
}

// Keras' attributes holding GroupQueryAttention's projections (its .weights.h5 groups), in
// tapeflow's sublayers() order: query, key, gate (with use_gate), value, output.
bool gqa_weights(const Layer& layer, const std::string& prefix, WeightList& out) {
  const auto c = lo::group_query_attention(layer.impl());
  if (!c) return false;
  std::vector<const char*> names = {"_query_dense", "_key_dense"};
  if (c->options.use_gate) names.push_back("_gate_dense");
  names.push_back("_value_dense");
  names.push_back("_output_dense");
  const std::vector<Layer> parts = layer.impl().sublayers();
  for (size_t i = 0; i < parts.size() && i < names.size(); ++i)
    own_weights(parts[i], prefix + names[i] + "/", out);
  return true;
}

// Keras' sublayers of MultiHeadAttention, in tapeflow's sublayers() order.
constexpr const char* kMhaParts[] = {"query_dense", "key_dense", "value_dense", "output_dense"};

bool mha_weights(const Layer& layer, const std::string& prefix, WeightList& out) {
  if (!lo::multi_head_attention(layer.impl())) return false;
  const std::vector<Layer> parts = layer.impl().sublayers();
  for (size_t i = 0; i < parts.size() && i < std::size(kMhaParts); ++i)
    own_weights(parts[i], prefix + kMhaParts[i] + "/", out);
  return true;
}

Config attention_get(const Layer& layer) {
  auto c = need(lo::attention(layer.impl()), layer);
  Config out{{"use_scale", c.use_scale}};
  if (!c.additive) out["score_mode"] = c.score_mode;
  out["dropout"] = c.dropout;
  out["seed"] = seed_json(c.seed);
  return out;
}

template <bool kAdditive>
Layer attention_from(const Config& config) {
  Reader r(kAdditive ? "AdditiveAttention" : "Attention", config);
  Base b = read_base(r);
  const bool use_scale = r.boolean("use_scale", kAdditive);
  std::string score_mode;
  if (!kAdditive) {
    score_mode = r.string("score_mode", "dot");
    if (score_mode != "dot" && score_mode != "concat")
      r.fail("score_mode", "= \"" + score_mode + "\" is not supported (dot, concat)");
  }
  const double dropout = r.number("dropout", 0.0);
  const auto seed = r.optional_integer("seed");
  r.finish();
  Layer l = kAdditive
                ? Layer(layers::AdditiveAttention(
                      {.use_scale = use_scale, .dropout = dropout, .seed = seed, .name = b.name}))
                : Layer(layers::Attention({.use_scale = use_scale,
                                           .score_mode = score_mode,
                                           .dropout = dropout,
                                           .seed = seed,
                                           .name = b.name}));
  apply_base(l, b);
  return l;
}

// ---- Normalization, Discretization, CategoryEncoding ----

// One value for every position (a number) or a list, as Keras writes mean and variance.
Config values_json(const std::vector<double>& v) {
  if (v.empty()) return nullptr;
  return v.size() == 1 ? Config(v[0]) : Config(v);
}
std::vector<double> values_of(Reader& r, const std::string& key) {
  const Config* v = r.find(key);
  if (v == nullptr || v->is_null()) return {};
  if (v->is_number()) return {v->get<double>()};
  std::vector<double> out;
  if (!v->is_array()) r.fail(key, "must be a number, a list of numbers or null, got " + r.got(*v));
  for (const Config& e : *v) {
    if (!e.is_number())
      r.fail(key, "must be a number, a list of numbers or null, got " + r.got(*v));
    out.push_back(e.get<double>());
  }
  return out;
}

Config normalization_get(const Layer& layer) {
  auto o = need(lo::normalization(layer.impl()), layer);
  return Config{{"axis", o.axis ? Config::array({*o.axis}) : Config::array()},
                {"invert", o.invert},
                {"mean", values_json(o.mean)},
                {"variance", values_json(o.variance)}};
}

Layer normalization_from(const Config& config) {
  Reader r("Normalization", config);
  Base b = read_base(r);
  layers::NormalizationOptions o;
  if (const Config* a = r.find("axis"); a != nullptr) {
    if (a->is_null() || (a->is_array() && a->empty())) {
      o.axis = std::nullopt;  // Keras' axis=None: one mean and variance
    } else {
      const auto axes = r.int_list("axis");
      if (axes.size() != 1)
        r.fail("axis", "= " + r.got(*a) + " keeps several axes; tapeflow's keeps one (or none)");
      o.axis = static_cast<int>(axes[0]);
    }
  }
  o.invert = r.boolean("invert", false);
  o.mean = values_of(r, "mean");
  o.variance = values_of(r, "variance");
  if (o.mean.empty() != o.variance.empty())
    r.fail(o.mean.empty() ? "mean" : "variance", "must be given with the other (or both null)");
  o.name = b.name;
  r.finish();
  Layer l = layers::Normalization(o);
  apply_base(l, b);
  return l;
}

// Keras keeps an adapted layer's mean and variance (and a count tapeflow does not have) as its
// variables, and none when they come from the config.
bool normalization_weights(const Layer& layer, const std::string& prefix, WeightList& out) {
  auto o = lo::normalization(layer.impl());
  if (!o) return false;
  if (o->mean.empty()) own_weights(layer, prefix, out);
  return true;
}

Config discretization_get(const Layer& layer) {
  auto c = need(lo::discretization(layer.impl()), layer);
  return Config{
      {"bin_boundaries", c.bin_boundaries.empty() ? Config(nullptr) : Config(c.bin_boundaries)},
      {"num_bins", c.num_bins > 0 ? Config(c.num_bins) : Config(nullptr)},
      {"epsilon", c.epsilon},
      {"output_mode", "int"},
      {"sparse", false}};
}

Layer discretization_from(const Config& config) {
  Reader r("Discretization", config);
  Base b = read_base(r);
  std::vector<double> bounds;
  const Config* bb = r.find("bin_boundaries");
  const bool has_bounds = bb != nullptr && !bb->is_null();
  if (has_bounds) bounds = values_of(r, "bin_boundaries");
  const auto num_bins = r.optional_integer("num_bins");
  const double epsilon = r.number("epsilon", 0.01);
  r.expect("output_mode", "int");
  r.expect("sparse", false);
  r.finish();
  if (!has_bounds && !num_bins) r.fail("bin_boundaries", "or num_bins must be given");
  if (num_bins && *num_bins < 2)
    r.fail("num_bins", "must be at least 2, got " + std::to_string(*num_bins));
  Layer l;
  try {
    l = lo::make_discretization(bounds, num_bins.value_or(0), epsilon, b.name);
  } catch (const InvalidArgumentError& e) {
    r.fail(has_bounds ? "bin_boundaries" : "epsilon", e.what());
  }
  apply_base(l, b);
  return l;
}

// Keras' salt of IntegerLookup and Hashing: null, or the two key words ([s, s] for one int).
Config salt_json(const std::vector<int64_t>& salt) {
  if (salt.empty()) return nullptr;
  return Config::array({salt.front(), salt.back()});
}
std::vector<int64_t> read_salt(Reader& r) {
  const Config* v = r.find("salt");
  if (v == nullptr || v->is_null()) return {};
  if (v->is_number_integer()) return {v->get<int64_t>()};
  if (!v->is_array() || v->size() != 2 || !(*v)[0].is_number_integer() ||
      !(*v)[1].is_number_integer())
    r.fail("salt", "must be null, an integer or a list of two integers, got " + r.got(*v));
  return {(*v)[0].get<int64_t>(), (*v)[1].get<int64_t>()};
}

Config integer_lookup_get(const Layer& layer) {
  const layers::IntegerLookupOptions o = need(lo::integer_lookup(layer.impl()), layer);
  const bool mask_indexed = o.mask_token && o.output_mode == "int";
  const auto size =
      static_cast<int64_t>(o.vocabulary.size()) + o.num_oov_indices + (mask_indexed ? 1 : 0);
  return Config{{"invert", o.invert},
                {"max_tokens", o.max_tokens ? Config(*o.max_tokens) : Config(nullptr)},
                {"num_oov_indices", o.num_oov_indices},
                {"oov_token", o.oov_token},
                {"mask_token", o.mask_token ? Config(*o.mask_token) : Config(nullptr)},
                {"output_mode", o.output_mode},
                {"sparse", false},
                {"pad_to_max_tokens", false},
                {"vocabulary_dtype", "int64"},
                {"idf_weights", nullptr},
                {"vocabulary", o.vocabulary.empty() ? Config(nullptr) : Config(o.vocabulary)},
                {"vocabulary_size", size},
                {"oov_method", o.oov_method},
                {"salt", salt_json(o.salt)}};
}

Layer integer_lookup_from(const Config& config) {
  Reader r("IntegerLookup", config);
  Base b = read_base(r);
  layers::IntegerLookupOptions o;
  o.invert = r.boolean("invert", false);
  o.max_tokens = r.optional_integer("max_tokens");
  o.num_oov_indices = r.integer("num_oov_indices", 1);
  o.oov_token = r.integer("oov_token", -1);
  o.mask_token = r.optional_integer("mask_token");
  o.output_mode = r.string("output_mode", "int");
  if (o.output_mode != "int" && o.output_mode != "one_hot" && o.output_mode != "multi_hot" &&
      o.output_mode != "count")
    r.fail("output_mode",
           "= \"" + o.output_mode + "\" is not supported (int, one_hot, multi_hot, count)");
  r.expect("sparse", false);
  r.expect("pad_to_max_tokens", false);
  r.expect("vocabulary_dtype", "int64");
  r.expect_null("idf_weights");
  if (const Config* v = r.find("vocabulary"); v != nullptr && !v->is_null()) {
    if (!v->is_array())
      r.fail("vocabulary",
             "must be a list of integers or null (tapeflow reads no vocabulary "
             "files), got " +
                 r.got(*v));
    for (int64_t t : r.int_list("vocabulary")) o.vocabulary.push_back(t);
  }
  if (r.has("vocabulary_size")) r.integer("vocabulary_size");  // follows from the rest
  o.oov_method = r.string("oov_method", "floormod");
  if (o.oov_method != "floormod" && o.oov_method != "farmhash")
    r.fail("oov_method", "= \"" + o.oov_method + "\" is not one of floormod, farmhash");
  o.salt = read_salt(r);
  o.name = b.name;
  r.finish();
  Layer l = layers::IntegerLookup(o);
  apply_base(l, b);
  return l;
}

// Keras writes Hashing's dtype as "int64" for output_mode "int" (its bins' dtype) and as the
// float type of the encodings otherwise; neither is a tapeflow policy, so the key is dropped.
Config without_integer_dtype(const Config& config) {
  Config c = config;
  if (const auto it = c.find("dtype"); it != c.end()) {
    std::string name;
    if (it->is_string())
      name = it->get<std::string>();
    else if (it->is_object() && it->contains("config") && (*it)["config"].is_object() &&
             (*it)["config"].contains("name") && (*it)["config"]["name"].is_string())
      name = (*it)["config"]["name"].get<std::string>();
    if (name.rfind("int", 0) == 0 || name.rfind("uint", 0) == 0) c.erase("dtype");
  }
  return c;
}

Config hashing_get(const Layer& layer) {
  const auto c = need(lo::hashing(layer.impl()), layer);
  const layers::HashingOptions& o = c.options;
  Config out = base_config(layer);  // Keras' name, trainable, dtype
  out["dtype"]["config"]["name"] = o.output_mode == "int" ? "int64" : "float32";
  out["num_bins"] = c.num_bins;
  out["salt"] = salt_json(o.salt);
  out["mask_value"] = o.mask_value ? Config(*o.mask_value) : Config(nullptr);
  out["output_mode"] = o.output_mode;
  out["sparse"] = false;
  return out;
}

Layer hashing_from(const Config& config) {
  const Config c = without_integer_dtype(config);  // the Reader keeps a reference
  Reader r("Hashing", c);
  Base b = read_base(r);
  layers::HashingOptions o;
  const int64_t num_bins = r.integer("num_bins");
  o.salt = read_salt(r);
  o.mask_value = r.optional_integer("mask_value");
  o.output_mode = r.string("output_mode", "int");
  r.expect("sparse", false);
  o.name = b.name;
  r.finish();
  Layer l = layers::Hashing(num_bins, o);
  apply_base(l, b);
  return l;
}

Config hashed_crossing_get(const Layer& layer) {
  const auto c = need(lo::hashed_crossing(layer.impl()), layer);
  return Config{{"num_bins", c.num_bins},
                {"output_mode", c.output_mode},
                {"sparse", false},
                {"name", layer.name()},
                {"dtype", "float32"}};
}

Layer hashed_crossing_from(const Config& config) {
  Reader r("HashedCrossing", config);
  Base b = read_base(r);
  const int64_t num_bins = r.integer("num_bins");
  const std::string mode = r.string("output_mode", "int");
  r.expect("sparse", false);
  r.finish();
  Layer l = layers::HashedCrossing(num_bins, mode, b.name);
  apply_base(l, b);
  return l;
}

Config category_encoding_get(const Layer& layer) {
  auto c = need(lo::category_encoding(layer.impl()), layer);
  return Config{{"num_tokens", c.num_tokens}, {"output_mode", c.output_mode}};
}

Layer category_encoding_from(const Config& config) {
  Reader r("CategoryEncoding", config);
  Base b = read_base(r);
  const int64_t num_tokens = r.integer("num_tokens");
  const std::string mode = r.string("output_mode", "multi_hot");
  if (mode != "one_hot" && mode != "multi_hot" && mode != "count")
    r.fail("output_mode", "= \"" + mode + "\" is not supported (one_hot, multi_hot, count)");
  r.expect("sparse", false);
  r.finish();
  if (num_tokens <= 0) r.fail("num_tokens", "must be positive, got " + std::to_string(num_tokens));
  Layer l = layers::CategoryEncoding(num_tokens, mode, b.name);
  apply_base(l, b);
  return l;
}

// ---- Resizing, CenterCrop, the Random* augmentation layers ----

// Keras' keys of each class, in its order.
Config image_get(const Layer& layer) {
  auto c = need(lo::image_layer(layer.impl()), layer);
  const std::string& cls = c.class_name;
  Config out{{"data_format", image_format_name(layer)}};
  if (cls == "Resizing" || cls == "CenterCrop" || cls == "RandomCrop") {
    out["height"] = c.height;
    out["width"] = c.width;
  }
  if (cls == "Resizing") {
    const layers::ResizingOptions& o = c.resizing;
    out["interpolation"] = o.interpolation;
    out["crop_to_aspect_ratio"] = o.crop_to_aspect_ratio;
    out["pad_to_aspect_ratio"] = o.pad_to_aspect_ratio;
    out["fill_mode"] = o.fill_mode;
    out["fill_value"] = o.fill_value;
    out["antialias"] = o.antialias;
  } else if (cls == "RandomCrop") {
    out["seed"] = seed_json(c.seed);
  } else if (cls == "RandomFlip") {
    out["seed"] = seed_json(c.seed);
    out["mode"] = c.mode;
  } else if (cls == "RandomRotation") {
    out["factor"] = range_json(c.factor);
    out["fill_mode"] = c.transform.fill_mode;
    out["fill_value"] = c.transform.fill_value;
    out["interpolation"] = c.transform.interpolation;
    out["seed"] = seed_json(c.transform.seed);
  } else if (cls == "RandomZoom" || cls == "RandomTranslation") {
    out["height_factor"] = range_json(c.factor);
    out["width_factor"] = c.width_factor ? range_json(*c.width_factor) : Config(nullptr);
    out["fill_mode"] = c.transform.fill_mode;
    out["interpolation"] = c.transform.interpolation;
    out["seed"] = seed_json(c.transform.seed);
    out["fill_value"] = c.transform.fill_value;
  } else if (cls == "RandomGrayscale") {
    out["factor"] = c.grayscale_factor;  // Keras writes no seed here
  } else if (cls != "CenterCrop") {      // RandomContrast, RandomBrightness, RandomSaturation, ...
    out["factor"] = range_json(c.factor);
    out["value_range"] = range_json(c.value_range);
    out["seed"] = seed_json(c.seed);
  }
  return out;
}

template <const char* kClass>
Layer image_from(const Config& config) {
  const std::string cls = kClass;
  Reader r(cls, config);
  Base b = read_base(r);
  const bool first = read_channels_first(r);
  return with_image_format(
      make_checked(r, b,
                   [&]() -> Layer {
                     if (cls == "Resizing" || cls == "CenterCrop" || cls == "RandomCrop") {
                       const int64_t h = r.integer("height"), w = r.integer("width");
                       if (cls == "CenterCrop") return layers::CenterCrop(h, w, b.name);
                       if (cls == "RandomCrop")
                         return layers::RandomCrop(h, w, r.optional_integer("seed"), b.name);
                       layers::ResizingOptions o;
                       o.interpolation = r.string("interpolation", "bilinear");
                       o.crop_to_aspect_ratio = r.boolean("crop_to_aspect_ratio", false);
                       o.pad_to_aspect_ratio = r.boolean("pad_to_aspect_ratio", false);
                       o.fill_mode = r.string("fill_mode", "constant");
                       o.fill_value = r.number("fill_value", 0.0);
                       o.antialias = r.boolean("antialias", false);
                       o.name = b.name;
                       return layers::Resizing(h, w, o);
                     }
                     if (cls == "RandomFlip") {
                       const auto seed = r.optional_integer("seed");
                       return layers::RandomFlip(r.string("mode", "horizontal_and_vertical"), seed,
                                                 b.name);
                     }
                     if (cls == "RandomRotation") {
                       const layers::Factor f = factor_of(r, "factor");
                       return layers::RandomRotation(f, transform_of(r, b));
                     }
                     if (cls == "RandomZoom" || cls == "RandomTranslation") {
                       const layers::Factor h = factor_of(r, "height_factor");
                       std::optional<layers::Factor> w;
                       if (const Config* v = r.find("width_factor"); v != nullptr && !v->is_null())
                         w = factor_of(r, "width_factor");
                       if (cls == "RandomZoom") return layers::RandomZoom(h, w, transform_of(r, b));
                       if (!w) r.fail("width_factor", "is required");
                       return layers::RandomTranslation(h, *w, transform_of(r, b));
                     }
                     if (cls == "RandomGrayscale") {
                       const double f = r.number("factor", 0.5);
                       return layers::RandomGrayscale(f, r.optional_integer("seed"), b.name);
                     }
                     const layers::Factor f = factor_of(r, "factor");
                     const auto vr = value_range_of(r);
                     const auto seed = r.optional_integer("seed");
                     if (cls == "RandomContrast")
                       return layers::RandomContrast(f, vr, seed, b.name);
                     if (cls == "RandomBrightness")
                       return layers::RandomBrightness(f, vr, seed, b.name);
                     if (cls == "RandomSaturation")
                       return layers::RandomSaturation(f, vr, seed, b.name);
                     return layers::RandomHue(f, vr, seed, b.name);
                   }),
      first);
}

constexpr char kResizing[] = "Resizing", kCenterCrop[] = "CenterCrop", kRandomCrop[] = "RandomCrop",
               kRandomFlip[] = "RandomFlip", kRandomRotation[] = "RandomRotation",
               kRandomZoom[] = "RandomZoom", kRandomTranslation[] = "RandomTranslation",
               kRandomContrast[] = "RandomContrast", kRandomBrightness[] = "RandomBrightness",
               kRandomGrayscale[] = "RandomGrayscale", kRandomSaturation[] = "RandomSaturation",
               kRandomHue[] = "RandomHue";

}  // namespace

int keras_call_form(const Layer& layer) {
  if (lo::multi_head_attention(layer.impl()) || lo::group_query_attention(layer.impl())) return 2;
  if (lo::attention(layer.impl())) return 1;
  return 0;
}

Config keras_call_args(const Layer& layer, const Config& args) {
  const int form = keras_call_form(layer);
  if (form == 0 || args.size() != 1 || args[0].is_array()) return args;
  const Config both = Config::array({args[0], args[0]});
  return form == 1 ? Config::array({both}) : both;
}

Config keras_build_config(const Layer& layer, const TensorShape& shape) {
  const int form = keras_call_form(layer);
  if (form == 0) return nullptr;
  const Config s = shape_json(shape);
  if (form == 1) return Config{{"input_shape", Config::array({s, s})}};
  return Config{{"shapes_dict", {{"query_shape", s}, {"value_shape", s}}}};
}

void add_sequence_layers(Registry& m) {
  add_builtin(m, "SimpleRNN", recurrent_get, recurrent_from<Rnn::simple>, recurrent_weights);
  add_builtin(m, "LSTM", recurrent_get, recurrent_from<Rnn::lstm>, recurrent_weights);
  add_builtin(m, "GRU", recurrent_get, recurrent_from<Rnn::gru>, recurrent_weights);
  add_builtin(m, "RNN", rnn_get, rnn_from, rnn_weights);
  add_builtin(m, "ConvLSTM1D", conv_lstm_get, conv_lstm_from<1>, conv_lstm_weights);
  add_builtin(m, "ConvLSTM2D", conv_lstm_get, conv_lstm_from<2>, conv_lstm_weights);
  add_builtin(m, "ConvLSTM3D", conv_lstm_get, conv_lstm_from<3>, conv_lstm_weights);
  add_builtin(m, "Bidirectional", bidirectional_get, bidirectional_from, bidirectional_weights);
  add_builtin(m, "TimeDistributed", time_distributed_get, time_distributed_from,
              time_distributed_weights);
  add_builtin(m, "SpectralNormalization", spectral_normalization_get, spectral_normalization_from,
              spectral_normalization_weights);
  add_builtin(m, "MultiHeadAttention", mha_get, mha_from, mha_weights);
  // The class (as its summary names it) and the name Keras' configs give it (both read).
  add_builtin(m, "GroupedQueryAttention", gqa_get, gqa_from, gqa_weights);
  add_builtin(m, "GroupQueryAttention", gqa_get, gqa_from, gqa_weights);
  add_builtin(m, "Attention", attention_get, attention_from<false>);
  add_builtin(m, "AdditiveAttention", attention_get, attention_from<true>);
  add_builtin(m, "Masking", masking_get, masking_from);
  add_builtin(m, "Normalization", normalization_get, normalization_from, normalization_weights);
  add_builtin(m, "Discretization", discretization_get, discretization_from);
  add_builtin(m, "IntegerLookup", integer_lookup_get, integer_lookup_from);
  add_builtin(m, "CategoryEncoding", category_encoding_get, category_encoding_from);
  add_builtin(m, "Hashing", hashing_get, hashing_from);
  add_builtin(m, "HashedCrossing", hashed_crossing_get, hashed_crossing_from);
  add_builtin(m, kResizing, image_get, image_from<kResizing>);
  add_builtin(m, kCenterCrop, image_get, image_from<kCenterCrop>);
  add_builtin(m, kRandomCrop, image_get, image_from<kRandomCrop>);
  add_builtin(m, kRandomFlip, image_get, image_from<kRandomFlip>);
  add_builtin(m, kRandomRotation, image_get, image_from<kRandomRotation>);
  add_builtin(m, kRandomZoom, image_get, image_from<kRandomZoom>);
  add_builtin(m, kRandomTranslation, image_get, image_from<kRandomTranslation>);
  add_builtin(m, kRandomContrast, image_get, image_from<kRandomContrast>);
  add_builtin(m, kRandomBrightness, image_get, image_from<kRandomBrightness>);
  add_builtin(m, kRandomGrayscale, image_get, image_from<kRandomGrayscale>);
  add_builtin(m, kRandomSaturation, image_get, image_from<kRandomSaturation>);
  add_builtin(m, kRandomHue, image_get, image_from<kRandomHue>);
}

}  // namespace tapeflow::keras::saving::internal
