// EinsumDense and Identity (keras/layers_core.h): shapes as Keras 3.15 computes them (the
// Python line beside each), values against plain loops, gradients against loops and finite
// differences, Keras' configs, and the errors.
#include <cmath>
#include <string>
#include <vector>

#include "autograd/tape.h"
#include "core/error.h"
#include "jit/function.h"
#include "keras/functional.h"
#include "keras/layers.h"
#include "keras/layers_attention.h"
#include "keras/layers_core.h"
#include "keras/layers_more.h"
#include "keras/mixed_precision.h"
#include "keras/model.h"
#include "keras/optimizers.h"
#include "keras/serialization.h"
#include "keras/serialization_json.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/linalg.h"
#include "ops/linalg_more.h"
#include "ops/movement.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "support/temp_dir.h"
#include "support/testing.h"

namespace tf = tapeflow;
namespace K = tapeflow::keras;
namespace L = tapeflow::keras::layers;
using K::saving::Config;
using tf::testing::check_close;
using tf::testing::random_values;

namespace {

tf::Tensor values(const tf::TensorShape& shape, unsigned seed, tf::DType dt = tf::float32) {
  const auto v = random_values(static_cast<size_t>(shape.num_elements()), -1.0, 1.0, seed);
  return tf::cast(tf::constant(v, shape), dt);
}

// Flat index of (i, j, k[, l]) in a row-major tensor of `s`.
int64_t at(const tf::TensorShape& s, std::vector<int64_t> idx) {
  int64_t f = 0;
  for (int i = 0; i < s.rank(); ++i) f = f * s[i] + idx[static_cast<size_t>(i)];
  return f;
}

}  // namespace

TEST_CASE("EinsumDense: weight and output shapes are Keras'", "[keras][layers]") {
  struct Case {
    const char* what;
    L::EinsumDense layer;
    tf::TensorShape input, kernel, output;
    std::optional<tf::TensorShape> bias;
  };
  std::vector<Case> cases = {
      // EinsumDense("abc,cd->abd", output_shape=(None, 6), bias_axes="d") on (2, 4, 3)
      {"per step",
       L::EinsumDense("abc,cd->abd", {tf::None, 6}, {.bias_axes = "d"}),
       {2, 4, 3},
       {3, 6},
       {2, 4, 6},
       tf::TensorShape({6})},
      // EinsumDense("...x,xy->...y", output_shape=5) on (2, 4, 3): no bias
      {"left ellipsis",
       L::EinsumDense("...x,xy->...y", 5),
       {2, 4, 3},
       {3, 5},
       {2, 4, 5},
       std::nullopt},
      // EinsumDense("abc,cde->abde", output_shape=(4, 2, 3), bias_axes="de") on (2, 4, 3)
      {"two output axes",
       L::EinsumDense("abc,cde->abde", {4, 2, 3}, {.bias_axes = "de"}),
       {2, 4, 3},
       {3, 2, 3},
       {2, 4, 2, 3},
       tf::TensorShape({2, 3})},
      // EinsumDense("ab...,bc->ac...", output_shape=3, bias_axes="c") on (2, 3, 5)
      {"right ellipsis",
       L::EinsumDense("ab...,bc->ac...", 3, {.bias_axes = "c"}),
       {2, 3, 5},
       {3, 3},
       {2, 3, 5},
       tf::TensorShape({3, 1})},
      // As Dense: EinsumDense("ab,bc->ac", output_shape=64, bias_axes="c") on (2, 32)
      {"dense",
       L::EinsumDense("ab,bc->ac", 64, {.bias_axes = "c"}),
       {2, 32},
       {32, 64},
       {2, 64},
       tf::TensorShape({64})}};
  for (Case& c : cases) {
    CAPTURE(c.what);
    const tf::Tensor y = c.layer(values(c.input, 3));
    CHECK(y.shape() == c.output);
    CHECK(c.layer.kernel().shape() == c.kernel);
    if (c.bias) {
      CHECK(c.layer.bias().shape() == *c.bias);
    } else {
      CHECK(c.layer.trainable_variables().size() == 1);
    }
    // compute_output_shape with an unknown batch, and None from output_shape filled from the
    // input (Keras leaves "per step"'s None unknown).
    tf::TensorShape want = c.output;
    want[0] = tf::None;
    CHECK(c.layer.output_shape() == want);
  }
}

TEST_CASE("EinsumDense: values against plain loops on every device", "[keras][layers]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    {  // "abc,cde->abde", bias "de", relu
      L::EinsumDense layer("abc,cde->abde", {4, 2, 3}, {.activation = "relu", .bias_axes = "de"});
      const tf::Tensor x = values({2, 4, 3}, 5);
      layer.build({tf::None, 4, 3});
      const tf::Tensor k = values({3, 2, 3}, 6), b = values({2, 3}, 7);
      layer.kernel().assign(k);
      layer.bias().assign(b);
      const auto xv = x.numpy<float>(), kv = k.numpy<float>(), bv = b.numpy<float>();
      std::vector<double> want;
      for (int64_t a = 0; a < 2; ++a)
        for (int64_t s = 0; s < 4; ++s)
          for (int64_t d = 0; d < 2; ++d)
            for (int64_t e = 0; e < 3; ++e) {
              double acc = bv[static_cast<size_t>(d * 3 + e)];
              for (int64_t c = 0; c < 3; ++c)
                acc += static_cast<double>(xv[static_cast<size_t>(at({2, 4, 3}, {a, s, c}))]) *
                       kv[static_cast<size_t>(at({3, 2, 3}, {c, d, e}))];
              want.push_back(std::max(acc, 0.0));
            }
      tf::testing::check_values(layer(x), want, 1e-5, 1e-6);
    }
    {  // "ab...,bc->ac...", bias "c" of shape (3, 1): y[a, c, t] = sum_b x[a, b, t] k[b, c] + b[c]
      L::EinsumDense layer("ab...,bc->ac...", 3, {.bias_axes = "c"});
      const tf::Tensor x = values({2, 4, 5}, 8);
      layer.build({tf::None, 4, 5});
      const tf::Tensor k = values({4, 3}, 9), b = values({3, 1}, 10);
      layer.kernel().assign(k);
      layer.bias().assign(b);
      const auto xv = x.numpy<float>(), kv = k.numpy<float>(), bv = b.numpy<float>();
      std::vector<double> want;
      for (int64_t a = 0; a < 2; ++a)
        for (int64_t c = 0; c < 3; ++c)
          for (int64_t t = 0; t < 5; ++t) {
            double acc = bv[static_cast<size_t>(c)];
            for (int64_t j = 0; j < 4; ++j)
              acc += static_cast<double>(xv[static_cast<size_t>(at({2, 4, 5}, {a, j, t}))]) *
                     kv[static_cast<size_t>(j * 3 + c)];
            want.push_back(acc);
          }
      tf::testing::check_values(layer(x), want, 1e-5, 1e-6);
    }
    {  // "...x,xy->...y" on any number of leading axes: a matmul over the last one.
      L::EinsumDense layer("...x,xy->...y", 2);
      const tf::Tensor x = values({2, 3, 2, 4}, 11);
      const tf::Tensor y = layer(x);
      check_close(y, tf::matmul(x, layer.kernel().value()), 1e-6, 1e-6);
    }
  }
}

TEST_CASE("EinsumDense: gradients against loops and finite differences", "[keras][layers]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    // The weights' gradients of sum(w * y) for "abc,cde->abde": dk[c, d, e] =
    // sum_{a, s} w[a, s, d, e] x[a, s, c], db[d, e] = sum_{a, s} w[a, s, d, e].
    L::EinsumDense layer("abc,cde->abde", {4, 2, 3}, {.bias_axes = "de"});
    const tf::Tensor x = values({2, 4, 3}, 12), w = values({2, 4, 2, 3}, 13);
    layer.build({tf::None, 4, 3});
    tf::GradientTape tape;
    const tf::Tensor loss = tf::reduce_sum(tf::multiply(layer(x), w));
    const auto grads = tape.gradient(loss, layer.trainable_variables());
    REQUIRE(grads.size() == 2);
    const auto xv = x.numpy<float>(), wv = w.numpy<float>();
    std::vector<double> dk(18, 0.0), db(6, 0.0);
    for (int64_t a = 0; a < 2; ++a)
      for (int64_t s = 0; s < 4; ++s)
        for (int64_t d = 0; d < 2; ++d)
          for (int64_t e = 0; e < 3; ++e) {
            const double wi = wv[static_cast<size_t>(at({2, 4, 2, 3}, {a, s, d, e}))];
            db[static_cast<size_t>(d * 3 + e)] += wi;
            for (int64_t c = 0; c < 3; ++c)
              dk[static_cast<size_t>(at({3, 2, 3}, {c, d, e}))] +=
                  wi * xv[static_cast<size_t>(at({2, 4, 3}, {a, s, c}))];
          }
    tf::testing::check_values(grads[0], dk, 1e-5, 1e-6);
    tf::testing::check_values(grads[1], db, 1e-5, 1e-6);

    // The input's gradient through kernel, bias and activation, in float64, against central
    // differences; each equation form.
    for (const char* eq : {"abc,cde->abde", "ab...,bc->ac...", "...x,xy->...y"}) {
      CAPTURE(eq);
      const std::string e = eq;
      L::EinsumDense f =
          e == "abc,cde->abde"
              ? L::EinsumDense(e, {4, 2, 3}, {.activation = "tanh", .bias_axes = "de"})
          : e == "ab...,bc->ac..." ? L::EinsumDense(e, 3, {.activation = "tanh", .bias_axes = "c"})
                                   : L::EinsumDense(e, 2, {.activation = "tanh"});
      f.set_dtype_policy(K::mixed_precision::Policy("float64"));
      f.build({tf::None, 4, 3});
      if (f.trainable_variables().size() == 2)  // a nonzero bias
        f.bias().assign(values(f.bias().shape(), 14, tf::float64));
      tf::testing::check_gradient([&](const tf::Tensor& in) { return f(in); }, {2, 4, 3}, {}, 1e-6,
                                  1e-8);
    }
  }
}

TEST_CASE("EinsumDense: variance-scaling initializers take Keras 3.15's fans", "[keras][layers]") {
  // Kernel (c, d, e) = (30, 20, 10) for "abc,cde->abde": fan_in = 30 (from the input),
  // fan_out = 200 (from the output), glorot_uniform's limit sqrt(6 / 230) = 0.1615 (the
  // convolution rule would give fan_in 600, fan_out 300: 0.0816).
  L::EinsumDense layer("abc,cde->abde", {5, 20, 10},
                       {.kernel_initializer = K::initializers::GlorotUniform(7)});
  layer.build({tf::None, 5, 30});
  const tf::Tensor k = layer.kernel().value();
  const double max_abs = tf::reduce_max(tf::abs(k)).item<float>();
  CHECK(max_abs <= std::sqrt(6.0 / 230.0));
  CHECK(max_abs > 0.15);
  // Other initializers see the kernel's shape as it is.
  L::EinsumDense ones("abc,cde->abde", {5, 20, 10}, {.kernel_initializer = "ones"});
  ones.build({tf::None, 5, 30});
  CHECK(tf::reduce_min(ones.kernel().value()).item<float>() == 1.0f);
}

TEST_CASE("EinsumDense: bad equations, shapes and inputs are errors naming them",
          "[keras][layers]") {
  using tf::testing::require_error;
  require_error([] { L::EinsumDense("ab->b", 3); }, {"EinsumDense", "invalid equation \"ab->b\""});
  require_error([] { L::EinsumDense("a...,ab->a...b", 3); }, {"invalid equation"});
  require_error([] { L::EinsumDense("abc,cd->abd", 6); },
                {"output_shape must have one entry per output axis", "(2)", "got 1"});
  require_error(
      [] {
        L::EinsumDense("abc,cd->abd", {tf::None, 6}, {.bias_axes = "x"});
      },
      {"bias axis 'x' is not part of the output \"abd\""});
  require_error(
      [] {
        L::EinsumDense("abc,ce->abd", {tf::None, 6});
      },
      {"output axis 'd'", "in neither the input nor the kernel"});
  require_error(
      [] {
        L::EinsumDense("abc,cdz->abd", {tf::None, 6});
      },
      {"kernel axis 'z'", "in neither the input nor the output"});
  L::EinsumDense seq("abc,cd->abd", {5, 6}, {.name = "seq"});
  require_error(
      [&] {
        seq(values({2, 4, 3}, 1));
      },
      {"layer \"seq\" (EinsumDense)", "shared dimension 'b'", "has 4", "output_shape says 5"});
  L::EinsumDense unknown("abc,cd->abd", {tf::None, 6}, {.name = "unknown"});
  require_error(
      [&] {
        unknown.build({tf::None, 4, tf::None});
      },
      {"layer \"unknown\" (EinsumDense)", "kernel axis 'c' is unknown"});
  L::EinsumDense built("abc,cd->abd", {tf::None, 6}, {.name = "built"});
  built(values({2, 4, 3}, 2));
  require_error(
      [&] {
        built(values({2, 4, 5}, 2));
      },
      {"built", "expected axis 2 of input shape to have value 3"});
  require_error([&] { built(values({2, 3}, 2)); }, {"built", "expected ndim=3, found ndim=2"});
}

TEST_CASE("EinsumDense and Identity: Keras configs, models and saving", "[keras][serialization]") {
  // keras.layers.EinsumDense("abc,cd->abd", output_shape=(None, 6), bias_axes="d",
  //   activation="relu", name="e1"), serialize_keras_object after a build on (None, 4, 3)
  const std::string keras = R"({"module": "keras.layers", "class_name": "EinsumDense",
"config": {"name": "e1", "trainable": true, "dtype": {"module": "keras",
"class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null},
"output_shape": [null, 6], "equation": "abc,cd->abd", "activation": "relu", "bias_axes": "d",
"kernel_initializer": {"module": "keras.initializers", "class_name": "GlorotUniform",
"config": {"seed": null, "input_axes": null, "output_axes": null}, "registered_name": null},
"bias_initializer": {"module": "keras.initializers", "class_name": "Zeros", "config": {},
"registered_name": null}, "kernel_regularizer": null, "bias_regularizer": null,
"activity_regularizer": null, "kernel_constraint": null, "bias_constraint": null,
"quantization_config": null}, "registered_name": null,
"build_config": {"input_shape": [null, 4, 3]}})";
  L::EinsumDense e1("abc,cd->abd", {tf::None, 6},
                    {.activation = "relu", .bias_axes = "d", .name = "e1"});
  e1.build({tf::None, 4, 3});
  CHECK(K::saving::serialize(e1) == Config::parse(keras));
  // keras.layers.Identity(name="idn"): built at construction, no build_config.
  CHECK(K::saving::serialize(L::Identity("idn")) == Config::parse(R"({"module": "keras.layers",
"class_name": "Identity", "config": {"name": "idn", "trainable": true, "dtype": {
"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"},
"registered_name": null}}, "registered_name": null})"));

  // Read back, and a model with both saved and loaded whole: the same outputs.
  K::Layer back = K::saving::deserialize(Config::parse(keras));
  CHECK(back.class_name() == "EinsumDense");
  back.build({tf::None, 4, 3});  // deserialize alone does not build; models do
  CHECK(K::saving::serialize(back) == Config::parse(keras));
  auto in = K::Input({4, 3}, std::nullopt, "x");
  auto h = L::EinsumDense("abc,cde->abde", {4, 2, 3}, {.bias_axes = "e", .name = "proj"})(in);
  auto o = L::Identity("same")(
      L::EinsumDense("abde,de->ab", std::vector<int64_t>{tf::None}, {.name = "merge"})(h));
  K::Model model(std::vector<K::KerasTensor>{in}, std::vector<K::KerasTensor>{o}, "core");
  const tf::Tensor x = values({2, 4, 3}, 21);
  const tf::Tensor want = model(x);
  CHECK(want.shape() == tf::TensorShape({2, 4}));
  tf::testing::TempDir dir;
  model.save(dir / "core.tfmodel");
  K::Model loaded = K::models::load_model(dir / "core.tfmodel");
  check_close(loaded(x), want, 0.0, 0.0);
  CHECK(K::models::to_json(loaded) == K::models::to_json(model));

  // Strict reading.
  Config bad = Config::parse(keras);
  bad["config"]["lora_rank"] = 4;
  tf::testing::require_error([&] { K::saving::deserialize(bad); },
                             {"EinsumDense config key \"lora_rank\""});
  bad = Config::parse(keras);
  bad["config"]["output_shape"] = "six";
  tf::testing::require_error([&] { K::saving::deserialize(bad); },
                             {"EinsumDense config key \"output_shape\" must be an integer"});
}

TEST_CASE("Identity passes tensors and masks on unchanged", "[keras][layers]") {
  L::Identity id;
  CHECK(id.name().rfind("identity", 0) == 0);
  const tf::Tensor x = values({2, 3}, 31);
  CHECK(id(x).numpy<float>() == x.numpy<float>());
  const tf::Tensor ints = tf::constant(std::vector<int32_t>{1, 2, 3}, {3});
  CHECK(id(ints).dtype() == tf::int32);  // only floating inputs take the layer's dtype
  const tf::Tensor mask = tf::convert_to_tensor(std::vector<bool>{true, false}, {2});
  const K::MaskedTensor m = id.call_with_mask(x, mask);
  REQUIRE(m.mask.defined());
  CHECK(m.mask.numpy<bool>() == mask.numpy<bool>());
  CHECK(id.trainable_variables().empty());
}

TEST_CASE("EinsumDense trains in fit's traced step, a partial last batch included",
          "[keras][layers]") {
  // 10 samples in batches of 4: fit's traced step sees batches of 4 and of 2.
  const tf::Tensor x = values({10, 4, 3}, 41);
  const tf::Tensor y = tf::reduce_sum(tf::multiply(x, tf::constant(0.5f)), std::vector<int>{2});
  K::Sequential model(
      {L::EinsumDense("abc,cd->abd", {tf::None, 1}, {.bias_axes = "d", .input_shape = {4, 3}}),
       L::Reshape({4})});
  model.compile(K::optimizers::SGD(0.1), "mse");
  const K::History h = model.fit(x, y, {.epochs = 30, .batch_size = 4, .verbose = 0});
  const auto& loss = h.history.at("loss");
  REQUIRE(loss.size() == 30);
  CHECK(loss.back() < 0.05 * loss.front());
  // The learned kernel approaches the 0.5s that made y.
  tf::testing::check_values(model.layers()[0].trainable_variables()[0].value(), {0.5, 0.5, 0.5},
                            0.0, 0.1);
}

TEST_CASE("EinsumDense and MultiHeadAttention serve every batch size from one trace",
          "[keras][layers]") {
  // einsum merges the batch into a matmul's rows at run time (ops/dynamic_shape.h), so one
  // graph traced for a None batch serves every size.
  L::EinsumDense proj("abc,cde->abde", {6, 2, 4}, {.bias_axes = "de", .input_shape = {6, 8}});
  L::MultiHeadAttention mha(2, 4);
  tf::FunctionOptions opts;
  opts.input_signature = {tf::TensorSpec({tf::None, 6, 8})};
  auto f = tf::function(
      [&](const tf::Tensor& x) {
        return std::vector<tf::Tensor>{proj(x), mha(x)};
      },
      opts);
  for (int64_t batch : {3, 1, 5}) {
    CAPTURE(batch);
    const tf::Tensor x = values({batch, 6, 8}, static_cast<unsigned>(50 + batch));
    const auto got = f(x);
    check_close(got[0], proj(x), 1e-6, 1e-6);
    check_close(got[1], mha(x), 1e-5, 1e-6);
  }
  CHECK(f.tracing_count() == 1);
}

TEST_CASE("ReversibleEmbedding: lookups and reverse projections equal Keras 3.15's",
          "[keras][layers]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    // keras.layers.ReversibleEmbedding(10, 4, tie_weights=False, logit_soft_cap=30.0,
    //   reverse_dtype="float32", mask_zero=True) with weight i, element j = 0.5 sin(0.37 j +
    //   1.3 i); h = 0.3 cos(0.11 j) as (2, 4): layer(h, reverse=True) and layer([[1, 0, 9]]).
    L::ReversibleEmbedding re(10, 4,
                              {.tie_weights = false,
                               .mask_zero = true,
                               .reverse_dtype = tf::float32,
                               .logit_soft_cap = 30.0,
                               .name = "re"});
    re.build({tf::None, 3});
    REQUIRE(re.get_weights().size() == 2);
    CHECK(re.reverse_embeddings().shape() == tf::TensorShape({4, 10}));
    std::vector<tf::Tensor> ws;
    for (int i = 0; i < 2; ++i) {
      const tf::TensorShape s = re.get_weights()[static_cast<size_t>(i)].shape();
      std::vector<double> v(static_cast<size_t>(s.num_elements()));
      for (size_t j = 0; j < v.size(); ++j) v[j] = 0.5 * std::sin(0.37 * double(j) + 1.3 * i);
      ws.push_back(tf::cast(tf::constant(v, s), tf::float32));
    }
    re.set_weights(ws);
    std::vector<double> h(8);
    for (size_t j = 0; j < h.size(); ++j) h[j] = 0.3 * std::cos(0.11 * double(j));
    const tf::Tensor logits = re.reverse(tf::cast(tf::constant(h, {2, 4}), tf::float32));
    CHECK(logits.shape() == tf::TensorShape({2, 10}));
    tf::testing::check_values(
        logits,
        {0.07511249929666519,   0.11080974340438843,   0.13150936365127563,  0.13440994918346405,
         0.11911901086568832,   0.08770588785409927,   0.044421982020139694, -0.00487440824508667,
         -0.053511060774326324, -0.09490503370761871,  0.06886874884366989,  0.09677627682685852,
         0.1115855798125267,    0.11129239201545715,   0.09593643993139267,  0.06759589910507202,
         0.03010645881295204,   -0.011457844637334347, -0.05147133022546768, -0.08451831340789795},
        1e-5, 1e-7);
    const tf::Tensor ids = tf::constant(std::vector<int32_t>{1, 0, 9}, {1, 3});
    const tf::Tensor rows = re(ids);
    tf::testing::check_values(tf::slice(tf::reshape(rows, {12}), {0}, {6}),
                              {0.49794042110443115, 0.4806376099586487, 0.3982827365398407,
                               0.2620221674442291, 0.0, 0.1808077096939087},
                              1e-6, 1e-7);
    // mask_zero: the mask marks the padding id.
    const auto [out, mask] = re.call_with_mask(ids, tf::Tensor());
    tf::testing::check_values(mask, {1, 0, 1}, 0, 0);
    (void)out;
  }
}

TEST_CASE("ReversibleEmbedding: tied weights, gradients from both directions, tracing",
          "[keras][layers]") {
  L::ReversibleEmbedding emb(7, 3, {.name = "tied"});
  const tf::Tensor ids = tf::constant(std::vector<int32_t>{2, 5, 2, 0}, {2, 2});
  const tf::Tensor h = emb(ids);
  const tf::Tensor logits = emb.reverse(h);
  CHECK(logits.shape() == tf::TensorShape({2, 2, 7}));
  // Tied: logits = h E^T.
  const tf::Tensor e = emb.embeddings().value();
  check_close(logits, tf::linalg::tensordot(h, tf::transpose(e), 1), 1e-6, 1e-7);
  // d/dE sum(w * (E[ids] E^T)): the lookup's rows and the projection both contribute; the
  // same expression written with plain ops gives the same gradient.
  const tf::Tensor w = values({2, 2, 7}, 3);
  tf::GradientTape tape;
  const tf::Tensor loss = tf::reduce_sum(emb.reverse(emb(ids)) * w);
  const tf::Tensor g = tape.gradient(loss, emb.embeddings());
  tf::GradientTape plain;
  const tf::Tensor ev = emb.embeddings().value();
  plain.watch(ev);
  const tf::Tensor ref =
      tf::reduce_sum(tf::linalg::tensordot(tf::gather(ev, ids, 0), tf::transpose(ev), 1) * w);
  check_close(g, plain.gradient(ref, ev), 1e-6, 1e-7);
  // A language-model step traced: one graph, the same loss as eagerly.
  auto step = tf::function(
      [&](const tf::Tensor& x) { return tf::reduce_mean(tf::square(emb.reverse(emb(x)))); });
  check_close(step(ids), tf::reduce_mean(tf::square(emb.reverse(emb(ids)))), 1e-6, 1e-7);
  // Errors.
  tf::testing::require_error(
      [&] {
        emb.reverse(values({2, 4}, 1));
      },
      {"tied", "ReversibleEmbedding", "(..., 3)", "(2, 4)"});
  TF_REQUIRE_THROWS_CONTAINING(emb.reverse_embeddings(), tf::FailedPreconditionError,
                               "ties its weights");
  tf::testing::require_error([] { L::ReversibleEmbedding(7, 3, {.logit_soft_cap = 0.0}); },
                             {"ReversibleEmbedding", "logit_soft_cap"});
}

TEST_CASE("ReversibleEmbedding: Keras configs, models and saving", "[keras][serialization]") {
  // keras.layers.ReversibleEmbedding(10, 4, tie_weights=False, logit_soft_cap=30.0,
  //   reverse_dtype="float32", mask_zero=True, name="re"), built on (None, 3).
  const std::string keras = R"({"module": "keras.layers", "class_name": "ReversibleEmbedding",
"config": {"name": "re", "trainable": true, "dtype": {"module": "keras", "class_name":
"DTypePolicy", "config": {"name": "float32"}, "registered_name": null}, "input_dim": 10,
"output_dim": 4, "embeddings_initializer": {"module": "keras.initializers", "class_name":
"RandomUniform", "config": {"seed": null, "minval": -0.05, "maxval": 0.05}, "registered_name":
null}, "embeddings_regularizer": null, "activity_regularizer": null, "embeddings_constraint":
null, "mask_zero": true, "quantization_config": null, "tie_weights": false, "reverse_dtype":
"float32", "logit_soft_cap": 30.0}, "registered_name": null, "build_config": {"input_shape":
[null, 3]}})";
  L::ReversibleEmbedding re(10, 4,
                            {.tie_weights = false,
                             .mask_zero = true,
                             .reverse_dtype = tf::float32,
                             .logit_soft_cap = 30.0,
                             .name = "re"});
  re.build({tf::None, 3});
  CHECK(K::saving::serialize(re) == Config::parse(keras));
  K::Layer back = K::saving::deserialize(Config::parse(keras));
  back.build({tf::None, 3});
  CHECK(K::saving::serialize(back) == Config::parse(keras));
  // ReversibleEmbedding(10, 4, name="re2").get_config()["tie_weights"] and the two nulls.
  const Config tied = K::saving::serialize(L::ReversibleEmbedding(10, 4, {.name = "re2"}));
  CHECK(tied["config"]["tie_weights"] == true);
  CHECK(tied["config"]["reverse_dtype"].is_null());
  CHECK(tied["config"]["logit_soft_cap"].is_null());

  auto in = K::Input({3}, tf::int32, "ids");
  auto o = L::ReversibleEmbedding(10, 4, {.tie_weights = false, .name = "re"})(in);
  K::Model model(std::vector<K::KerasTensor>{in}, std::vector<K::KerasTensor>{o}, "lookup");
  const tf::Tensor ids = tf::constant(std::vector<int32_t>{1, 0, 9, 3, 3, 4}, {2, 3});
  tf::testing::TempDir dir;
  model.save(dir / "re.tfmodel");
  K::Model loaded = K::models::load_model(dir / "re.tfmodel");
  check_close(loaded(ids), model(ids), 0.0, 0.0);
  CHECK(K::models::to_json(loaded) == K::models::to_json(model));

  Config bad = Config::parse(keras);
  bad["config"]["reverse_dtype"] = "int8";
  tf::testing::require_error([&] { K::saving::deserialize(bad); },
                             {"ReversibleEmbedding config key \"reverse_dtype\"", "int8"});
}
