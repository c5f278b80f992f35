// Keras configs of EinsumDense, Identity and ReversibleEmbedding (keras/layers_core.h): the
// writer gives Keras 3.15's get_config keys minus the base ones, in Keras' order; the reader is
// strict.
#include <cstdint>
#include <string>
#include <vector>

#include "keras/layers_core.h"
#include "keras/serialization_internal.h"

namespace tapeflow::keras::saving::internal {
namespace {

namespace lo = detail::layer_options;

Layer einsum_dense_from(const Config& config) {
  Reader r("EinsumDense", config);
  Base b = read_base(r);
  // An int or a list of ints and nulls (None: from the input).
  const Config& shape = r.require("output_shape");
  std::vector<int64_t> output_shape;
  if (shape.is_number_integer()) {
    output_shape.push_back(shape.get<int64_t>());
  } else if (shape.is_array()) {
    for (const Config& d : shape) {
      if (d.is_null()) {
        output_shape.push_back(None);
      } else if (d.is_number_integer()) {
        output_shape.push_back(d.get<int64_t>());
      } else {
        r.fail("output_shape",
               "must be an integer or a list of integers and nulls, got " + r.got(shape));
      }
    }
  } else {
    r.fail("output_shape",
           "must be an integer or a list of integers and nulls, got " + r.got(shape));
  }
  const Config& equation = r.require("equation");
  if (!equation.is_string()) r.fail("equation", "must be a string, got " + r.got(equation));
  layers::EinsumDenseOptions o;
  o.activation = r.activation("activation");
  const Config* bias_axes = r.find("bias_axes");
  if (bias_axes != nullptr && !bias_axes->is_null()) {
    if (!bias_axes->is_string())
      r.fail("bias_axes", "must be a string or null, got " + r.got(*bias_axes));
    o.bias_axes = bias_axes->get<std::string>();
    if (o.bias_axes.empty()) r.fail("bias_axes", "is empty (null means no bias)");
  }
  o.kernel_initializer = r.initializer("kernel_initializer");
  o.bias_initializer = r.initializer("bias_initializer");
  o.kernel_regularizer = r.regularizer("kernel_regularizer");
  o.bias_regularizer = r.regularizer("bias_regularizer");
  o.kernel_constraint = r.constraint("kernel_constraint");
  o.bias_constraint = r.constraint("bias_constraint");
  for (const char* k :
       {"activity_regularizer", "quantization_config", "lora_rank", "gptq_unpacked_column_size"})
    r.expect_null(k);
  if (r.has("lora_alpha")) r.number("lora_alpha");  // meaningful only with lora_rank
  o.name = b.name;
  r.finish();
  Layer l = layers::EinsumDense(equation.get<std::string>(), output_shape, o);
  apply_base(l, b);
  return l;
}

Config einsum_dense_get(const Layer& layer) {
  const lo::EinsumDenseConfig c = need(lo::einsum_dense(layer.impl()), layer);
  const layers::EinsumDenseOptions& o = c.options;
  Config shape = Config::array();
  for (int64_t d : c.output_shape) shape.push_back(d == None ? Config(nullptr) : Config(d));
  Config out{{"output_shape", shape},
             {"equation", c.equation},
             {"activation", activation_json(o.activation)},
             {"bias_axes", o.bias_axes.empty() ? Config(nullptr) : Config(o.bias_axes)}};
  add_kernel_bias_keys(out, layer, o.kernel_initializer, o.bias_initializer, o.kernel_regularizer,
                       o.bias_regularizer);
  out["activity_regularizer"] = nullptr;
  out["kernel_constraint"] = constraint_json(layer, "kernel_constraint", o.kernel_constraint);
  out["bias_constraint"] = constraint_json(layer, "bias_constraint", o.bias_constraint);
  out["quantization_config"] = nullptr;
  return out;
}

Layer identity_from(const Config& config) {
  Reader r("Identity", config);
  Base b = read_base(r);
  r.finish();
  Layer l = layers::Identity(b.name);
  apply_base(l, b);
  return l;
}

Config identity_get(const Layer& layer) {
  TF_CHECK_T(UnimplementedError, lo::identity(layer.impl()), "get_config",
             "{} is not tapeflow's built-in Identity layer, so it has no config writer",
             who(layer));
  return Config::object();
}

Layer reversible_embedding_from(const Config& config) {
  Reader r("ReversibleEmbedding", config);
  Base b = read_base(r);
  const EmbeddingKeys k = read_embedding_keys(r);
  layers::ReversibleEmbeddingOptions o;
  o.embeddings_initializer = k.initializer;
  o.embeddings_regularizer = k.regularizer;
  o.embeddings_constraint = k.constraint;
  o.mask_zero = k.mask_zero;
  o.tie_weights = r.boolean("tie_weights", true);
  if (const Config* d = r.find("reverse_dtype"); d != nullptr && !d->is_null()) {
    if (!d->is_string())
      r.fail("reverse_dtype", "must be a floating dtype name or null, got " + r.got(*d));
    const DType t = dtype_from(r, "reverse_dtype", d->get<std::string>());
    if (!is_floating(t))
      r.fail("reverse_dtype", "must be a floating dtype name or null, got " + r.got(*d));
    o.reverse_dtype = t;
  }
  o.logit_soft_cap = r.optional_number("logit_soft_cap");
  o.name = b.name;
  r.finish();
  Layer l = layers::ReversibleEmbedding(k.input_dim, k.output_dim, o);
  apply_base(l, b);
  return l;
}

Config reversible_embedding_get(const Layer& layer) {
  const lo::ReversibleEmbeddingConfig c = need(lo::reversible_embedding(layer.impl()), layer);
  const layers::ReversibleEmbeddingOptions& o = c.options;
  Config out =
      embedding_keys_json(layer, {c.input_dim, c.output_dim, o.embeddings_initializer,
                                  o.embeddings_regularizer, o.mask_zero, o.embeddings_constraint});
  out["tie_weights"] = o.tie_weights;
  out["reverse_dtype"] =
      o.reverse_dtype ? Config(std::string(dtype_name(*o.reverse_dtype))) : Config(nullptr);
  out["logit_soft_cap"] = o.logit_soft_cap ? Config(*o.logit_soft_cap) : Config(nullptr);
  return out;
}

}  // namespace

void add_core_layers(Registry& m) {
  add_builtin(m, "EinsumDense", einsum_dense_get, einsum_dense_from);
  add_builtin(m, "Identity", identity_get, identity_from);
  add_builtin(m, "ReversibleEmbedding", reversible_embedding_get, reversible_embedding_from);
}

}  // namespace tapeflow::keras::saving::internal
