// Adversarial inputs for every Keras layer class: scalars, empty axes, every rank from 0 to 6,
// integer and bool inputs, NaN and infinities, training on and off, a second call with another
// shape; the gradients of the output with respect to the input and the trainable weights. A
// readable result or a tf::Error whose message names the layer (LayerImpl::invoke puts the
// layer's name and input in front of an error that does not name it) — never another exception
// or a crash. Bad constructor arguments give a tf::Error naming the class.
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "keras/serialization_json.h"
#include "support/adversarial.h"
#include "support/temp_dir.h"
#include "support/testing.h"
#include "tapeflow/tapeflow.h"

namespace tf = tapeflow;
namespace K = tapeflow::keras;
namespace L = tapeflow::keras::layers;
using adversarial::describe;
using adversarial::make;
using adversarial::on_every_device;

namespace {

struct Maker {
  const char* what;
  std::function<K::Layer()> make;
};

// One instance of (nearly) every layer class, with small valid arguments.
std::vector<Maker> layer_makers() {
  using V = std::vector<int64_t>;
  return {
      {"Dense", [] { return L::Dense(3); }},
      {"Dense(relu)", [] { return L::Dense(2, "relu"); }},
      {"EinsumDense", [] { return L::EinsumDense("ab,bc->ac", 4); }},
      {"Conv1D", [] { return L::Conv1D(2, 2); }},
      {"Conv2D", [] { return L::Conv2D(2, 2); }},
      {"Conv3D", [] { return L::Conv3D(2, 2); }},
      {"Conv1DTranspose", [] { return L::Conv1DTranspose(2, 2); }},
      {"Conv2DTranspose", [] { return L::Conv2DTranspose(2, 2); }},
      {"Conv3DTranspose", [] { return L::Conv3DTranspose(2, 2); }},
      {"DepthwiseConv1D", [] { return L::DepthwiseConv1D(2); }},
      {"DepthwiseConv2D", [] { return L::DepthwiseConv2D(2); }},
      {"SeparableConv1D", [] { return L::SeparableConv1D(2, 2); }},
      {"SeparableConv2D", [] { return L::SeparableConv2D(2, 2); }},
      {"MaxPooling1D", [] { return L::MaxPooling1D(); }},
      {"MaxPooling2D", [] { return L::MaxPooling2D(); }},
      {"MaxPooling3D", [] { return L::MaxPooling3D(); }},
      {"AveragePooling1D", [] { return L::AveragePooling1D(); }},
      {"AveragePooling2D", [] { return L::AveragePooling2D(); }},
      {"AveragePooling3D", [] { return L::AveragePooling3D(); }},
      {"GlobalAveragePooling1D", [] { return L::GlobalAveragePooling1D(); }},
      {"GlobalMaxPooling1D", [] { return L::GlobalMaxPooling1D(); }},
      {"GlobalAveragePooling2D", [] { return L::GlobalAveragePooling2D(); }},
      {"GlobalMaxPooling2D", [] { return L::GlobalMaxPooling2D(); }},
      {"GlobalAveragePooling3D", [] { return L::GlobalAveragePooling3D(); }},
      {"GlobalMaxPooling3D", [] { return L::GlobalMaxPooling3D(); }},
      {"AdaptiveAveragePooling1D", [] { return L::AdaptiveAveragePooling1D(2); }},
      {"AdaptiveMaxPooling1D", [] { return L::AdaptiveMaxPooling1D(2); }},
      {"AdaptiveAveragePooling2D", [] { return L::AdaptiveAveragePooling2D(2); }},
      {"AdaptiveMaxPooling2D", [] { return L::AdaptiveMaxPooling2D(2); }},
      {"AdaptiveAveragePooling3D", [] { return L::AdaptiveAveragePooling3D(2); }},
      {"AdaptiveMaxPooling3D", [] { return L::AdaptiveMaxPooling3D(2); }},
      {"UpSampling1D", [] { return L::UpSampling1D(); }},
      {"UpSampling2D", [] { return L::UpSampling2D(); }},
      {"UpSampling2D(bilinear)", [] { return L::UpSampling2D(2, "bilinear"); }},
      {"UpSampling3D", [] { return L::UpSampling3D(); }},
      {"ZeroPadding1D", [] { return L::ZeroPadding1D(); }},
      {"ZeroPadding2D", [] { return L::ZeroPadding2D(); }},
      {"ZeroPadding3D", [] { return L::ZeroPadding3D(); }},
      {"Cropping1D", [] { return L::Cropping1D(); }},
      {"Cropping2D", [] { return L::Cropping2D(1); }},
      {"Cropping3D", [] { return L::Cropping3D(); }},
      {"Flatten", [] { return L::Flatten(); }},
      {"Reshape", [] { return L::Reshape({-1}); }},
      {"Reshape(2,-1)",
       [] {
         return L::Reshape({2, -1});
       }},
      {"Permute",
       [] {
         return L::Permute({2, 1});
       }},
      {"RepeatVector", [] { return L::RepeatVector(2); }},
      {"Dropout", [] { return L::Dropout(0.5, 1); }},
      {"SpatialDropout1D", [] { return L::SpatialDropout1D(0.5, 1); }},
      {"SpatialDropout2D", [] { return L::SpatialDropout2D(0.5, 1); }},
      {"SpatialDropout3D", [] { return L::SpatialDropout3D(0.5, 1); }},
      {"GaussianNoise", [] { return L::GaussianNoise(0.5, 1); }},
      {"GaussianDropout", [] { return L::GaussianDropout(0.5, 1); }},
      {"AlphaDropout", [] { return L::AlphaDropout(0.5); }},
      {"ActivityRegularization", [] { return L::ActivityRegularization(0.1, 0.1); }},
      {"BatchNormalization", [] { return L::BatchNormalization(); }},
      {"LayerNormalization", [] { return L::LayerNormalization(); }},
      {"GroupNormalization", [] { return L::GroupNormalization(1); }},
      {"UnitNormalization", [] { return L::UnitNormalization(); }},
      {"RMSNormalization", [] { return L::RMSNormalization(); }},
      {"Normalization", [] { return L::Normalization({.mean = {1.0}, .variance = {4.0}}); }},
      {"ReLU", [] { return L::ReLU(6.0); }},
      {"LeakyReLU", [] { return L::LeakyReLU(); }},
      {"ELU", [] { return L::ELU(); }},
      {"PReLU", [] { return L::PReLU(); }},
      {"Softmax", [] { return L::Softmax(); }},
      {"Activation", [] { return L::Activation("gelu"); }},
      {"Rescaling", [] { return L::Rescaling(1.0 / 255.0, -1.0); }},
      {"Identity", [] { return L::Identity(); }},
      {"Lambda", [] { return L::Lambda([](const tf::Tensor& x) { return x * 2.0; }); }},
      {"Masking", [] { return L::Masking(); }},
      {"Embedding", [] { return L::Embedding(5, 2); }},
      {"ReversibleEmbedding", [] { return L::ReversibleEmbedding(5, 2); }},
      {"CategoryEncoding", [] { return L::CategoryEncoding(4); }},
      {"CategoryEncoding(count)", [] { return L::CategoryEncoding(4, "count"); }},
      {"Hashing", [] { return L::Hashing(5); }},
      {"Hashing(mask, multi_hot)",
       [] { return L::Hashing(5, {.mask_value = 0, .output_mode = "multi_hot"}); }},
      {"Discretization",
       [] {
         return L::Discretization({0.0, 1.0});
       }},
      {"IntegerLookup",
       [] {
         return L::IntegerLookup({1, 2, 3});
       }},
      {"SimpleRNN", [] { return L::SimpleRNN(2); }},
      {"LSTM", [] { return L::LSTM(2); }},
      {"GRU", [] { return L::GRU(2); }},
      {"Bidirectional", [] { return L::Bidirectional(L::LSTM(2)); }},
      {"RNN(GRUCell)", [] { return L::RNN(L::GRUCell(2)); }},
      {"ConvLSTM1D", [] { return L::ConvLSTM1D(2, V{2}); }},
      {"ConvLSTM2D",
       [] {
         return L::ConvLSTM2D(2, V{2, 2});
       }},
      {"TimeDistributed", [] { return L::TimeDistributed(L::Dense(2)); }},
      {"SpectralNormalization", [] { return L::SpectralNormalization(L::Dense(2)); }},
      {"MultiHeadAttention", [] { return L::MultiHeadAttention(2, 2); }},
      {"GroupQueryAttention", [] { return L::GroupQueryAttention(2, 2, 1); }},
      {"Attention", [] { return L::Attention(); }},
      {"AdditiveAttention", [] { return L::AdditiveAttention(); }},
      {"MelSpectrogram",
       [] {
         return L::MelSpectrogram(
             {.fft_length = 16, .sequence_stride = 4, .sequence_length = 8, .num_mel_bins = 4});
       }},
      {"STFTSpectrogram",
       [] { return L::STFTSpectrogram({.frame_length = 8, .frame_step = 4, .fft_length = 8}); }},
      {"Resizing", [] { return L::Resizing(3, 2); }},
      {"CenterCrop", [] { return L::CenterCrop(2, 2); }},
      {"RandomCrop", [] { return L::RandomCrop(2, 2, 1); }},
      {"RandomFlip", [] { return L::RandomFlip(); }},
      {"RandomRotation", [] { return L::RandomRotation(0.2); }},
      {"RandomZoom", [] { return L::RandomZoom(0.2); }},
      {"RandomTranslation", [] { return L::RandomTranslation(0.2, 0.2); }},
      {"RandomContrast", [] { return L::RandomContrast(0.2); }},
      {"RandomBrightness", [] { return L::RandomBrightness(0.2); }},
      {"RandomGrayscale", [] { return L::RandomGrayscale(); }},
      {"RandomSaturation", [] { return L::RandomSaturation(0.2); }},
      {"RandomHue", [] { return L::RandomHue(0.2); }},
      {"Solarization", [] { return L::Solarization(0.1, 0.1); }},
      {"RandomInvert", [] { return L::RandomInvert(); }},
      {"RandomPosterization", [] { return L::RandomPosterization(4); }},
      {"AutoContrast", [] { return L::AutoContrast(); }},
      {"RandomSharpness", [] { return L::RandomSharpness(0.5); }},
      {"RandomErasing", [] { return L::RandomErasing(); }},
      {"RandomGaussianBlur", [] { return L::RandomGaussianBlur(); }},
      {"RandomColorDegeneration", [] { return L::RandomColorDegeneration(0.5); }},
      {"Equalization", [] { return L::Equalization(); }},
      {"RandAugment", [] { return L::RandAugment(); }},
      {"AugMix", [] { return L::AugMix(); }},
      {"RandomElasticTransform", [] { return L::RandomElasticTransform(); }},
      {"ContrastLimitedAdaptiveHistogramEqualization",
       [] { return L::ContrastLimitedAdaptiveHistogramEqualization(); }},
      {"RandomShear", [] { return L::RandomShear(0.2, 0.2); }},
      {"MixUp", [] { return L::MixUp(); }},
      {"CutMix", [] { return L::CutMix(); }},
      {"RandomPerspective", [] { return L::RandomPerspective(); }},
      {"RandomColorJitter", [] { return L::RandomColorJitter(); }},
      {"Pipeline",
       [] {
         return L::Pipeline({L::RandomFlip(), L::Rescaling(0.5)});
       }},
      {"Sequential",
       [] {
         return K::Sequential({L::Dense(3, "relu"), L::Dense(1)});
       }},
  };
}

// Inputs of every rank from 0 to 6, with and without empty axes.
const std::vector<tf::TensorShape> kLayerShapes = {{},
                                                   {0},
                                                   {3},
                                                   {2, 3},
                                                   {0, 3},
                                                   {2, 0},
                                                   {2, 3, 4},
                                                   {0, 3, 4},
                                                   {2, 0, 4},
                                                   {2, 3, 0},
                                                   {2, 4, 5, 3},
                                                   {1, 0, 5, 3},
                                                   {2, 4, 5, 0},
                                                   {0, 4, 5, 3},
                                                   {1, 3, 4, 5, 2},
                                                   {1, 3, 0, 5, 2},
                                                   {1, 2, 3, 4, 5, 1}};

// The layer's output, and the gradients of sum(y^2) with respect to a floating input and to
// each trainable weight.
std::vector<tf::Tensor> call_with_gradients(const K::Layer& layer, const tf::Tensor& x,
                                            bool training) {
  tf::GradientTape tape({.persistent = true});
  if (tf::is_floating(x.dtype())) tape.watch(x);
  const tf::Tensor y = layer(x, training);
  std::vector<tf::Tensor> out{y};
  if (!y.defined() || !tf::is_floating(y.dtype())) return out;
  const tf::Tensor loss = tf::reduce_sum(tf::cast(y, tf::float32) * tf::cast(y, tf::float32));
  if (tf::is_floating(x.dtype())) {
    const tf::Tensor g = tape.gradient(loss, x);
    if (g.defined()) out.push_back(g);
  }
  for (const tf::Variable& v : layer.trainable_variables()) {
    const tf::Tensor g = tape.gradient(loss, v);
    if (g.defined()) out.push_back(g);
  }
  return out;
}

// Runs f on `layer`: readable tensors, or a tf::Error naming the layer.
void probe_layer(const K::Layer& layer, const std::string& inputs,
                 const std::function<std::vector<tf::Tensor>()>& f, bool* ok = nullptr) {
  INFO(layer.class_name() << " \"" << layer.name() << "\" on " << inputs);
  try {
    for (const tf::Tensor& r : f()) {
      REQUIRE(r.defined());
      const std::vector<double> values = r.numpy<double>();
      REQUIRE(static_cast<int64_t>(values.size()) == r.num_elements());
    }
    if (ok != nullptr) *ok = true;
  } catch (const tf::Error& e) {
    const std::string message = e.what();
    CHECK_THAT(message, Catch::Matchers::Contains(layer.name()));
  } catch (const std::exception& e) {
    FAIL("not a tf::Error: " << e.what());
  }
}

}  // namespace

TEST_CASE("adversarial: every layer class on odd inputs", "[adversarial]") {
  const adversarial::QuietLogs quiet;
  const std::vector<Maker> makers = layer_makers();
  const std::vector<tf::DType> dtypes = {tf::float32, tf::int32, tf::bool_};
  on_every_device([&] {
    for (const Maker& m : makers) {
      INFO(m.what);
      for (const tf::TensorShape& s : kLayerShapes)
        for (tf::DType d : dtypes)
          for (bool special : {false, true}) {
            if (special && d == tf::bool_) continue;
            const tf::Tensor x = make(s, d, special);
            const std::string what = describe(x) + (special ? " (special values)" : "");
            for (bool training : {false, true}) {
              // A fresh layer builds for this input; the built one then meets every other
              // shape (its input check).
              const K::Layer layer = m.make();
              bool built = false;
              probe_layer(
                  layer, what, [&] { return call_with_gradients(layer, x, training); }, &built);
              if (!built || special || training || d != tf::float32) continue;
              for (const tf::TensorShape& s2 : kLayerShapes) {
                const tf::Tensor x2 = make(s2, tf::float32, false, 2);
                probe_layer(layer, what + ", then " + describe(x2),
                            [&] { return call_with_gradients(layer, x2, false); });
              }
            }
          }
    }
  });
}

namespace {

const std::vector<tf::TensorShape> kLossShapes = {{},     {0},    {3},       {2, 3}, {0, 3},
                                                  {3, 1}, {2, 0}, {2, 3, 2}, {1, 3}, {2}};

}  // namespace

TEST_CASE("adversarial: every loss and metric on odd targets and predictions", "[adversarial]") {
  const std::vector<std::string> losses = {"binary_crossentropy",
                                           "categorical_crossentropy",
                                           "sparse_categorical_crossentropy",
                                           "mse",
                                           "mae",
                                           "mape",
                                           "msle",
                                           "hinge",
                                           "squared_hinge",
                                           "categorical_hinge",
                                           "huber",
                                           "kl_divergence",
                                           "log_cosh",
                                           "poisson",
                                           "cosine_similarity",
                                           "binary_focal_crossentropy",
                                           "categorical_focal_crossentropy",
                                           "categorical_generalized_cross_entropy",
                                           "circle",
                                           "dice",
                                           "tversky"};
  const std::vector<std::string> metrics = {"accuracy",
                                            "binary_accuracy",
                                            "categorical_accuracy",
                                            "sparse_categorical_accuracy",
                                            "top_k_categorical_accuracy",
                                            "sparse_top_k_categorical_accuracy",
                                            "mse",
                                            "mae",
                                            "mape",
                                            "msle",
                                            "root_mean_squared_error",
                                            "binary_crossentropy",
                                            "categorical_crossentropy",
                                            "sparse_categorical_crossentropy",
                                            "hinge",
                                            "squared_hinge",
                                            "categorical_hinge",
                                            "kl_divergence",
                                            "poisson",
                                            "cosine_similarity",
                                            "log_cosh_error",
                                            "auc",
                                            "precision",
                                            "recall",
                                            "true_positives",
                                            "false_positives",
                                            "true_negatives",
                                            "false_negatives",
                                            "binary_io_u",
                                            "pearson_correlation",
                                            "concordance_correlation"};
  on_every_device([&] {
    for (const tf::TensorShape& st : kLossShapes)
      for (const tf::TensorShape& sp : kLossShapes)
        for (tf::DType dt : {tf::float32, tf::int32})
          for (bool special : {false, true}) {
            const tf::Tensor y_true = make(st, dt, special, 3);
            const tf::Tensor y_pred = make(sp, tf::float32, special, 4);
            const tf::Tensor weight = make({st.rank() > 0 ? st[0] : 1}, tf::float32, false, 5);
            const std::string what =
                describe(y_true) + ", " + describe(y_pred) + (special ? " (special values)" : "");
            for (const std::string& id : losses) {
              const K::losses::Loss loss = K::losses::get(id);
              adversarial::probe(loss.name(), what, [&] {
                return adversarial::with_gradients({y_pred}, [&] { return loss(y_true, y_pred); });
              });
              adversarial::probe(loss.name(), what + " weighted", [&] {
                return std::vector<tf::Tensor>{loss(y_true, y_pred, weight)};
              });
            }
            for (const std::string& id : metrics) {
              K::metrics::Metric m = K::metrics::get(id);
              adversarial::probe(m.name(), what, [&] {
                m.update_state(y_true, y_pred);
                m.update_state(y_true, y_pred, weight);
                return std::vector<tf::Tensor>{m.result()};
              });
            }
          }
  });
}

TEST_CASE("adversarial: every optimizer on odd gradients", "[adversarial]") {
  const adversarial::QuietLogs quiet;
  const std::vector<std::string> optimizers = {"sgd",    "adam",  "adamw", "adagrad", "adadelta",
                                               "adamax", "nadam", "ftrl",  "lion",    "rmsprop"};
  const std::vector<tf::TensorShape> shapes = {{}, {0}, {3}, {2, 3}, {3, 2}};
  on_every_device([&] {
    for (const std::string& id : optimizers)
      for (const tf::TensorShape& sv : shapes)
        for (const tf::TensorShape& sg : shapes)
          for (tf::DType dv : {tf::float32, tf::float64, tf::float16, tf::int32})
            for (tf::DType dg : {tf::float32, tf::float64, tf::int32})
              for (bool special : {false, true}) {
                K::optimizers::Optimizer opt = K::optimizers::get(id);
                tf::Variable v(make(sv, dv, false, 6));
                const tf::Tensor g = make(sg, dg, special, 7);
                const std::string what = id + ": variable " + describe(v.value()) + ", gradient " +
                                         describe(g) + (special ? " (special values)" : "");
                // Each call updates v or raises a tf::Error naming the optimizer's class.
                const auto attempt = [&](const char* call, const std::function<void()>& f) {
                  INFO(what << ", " << call);
                  try {
                    f();
                    const std::vector<double> values = v.value().numpy<double>();
                    CHECK(static_cast<int64_t>(values.size()) == v.value().num_elements());
                  } catch (const tf::Error& e) {
                    CHECK_THAT(std::string(e.what()),
                               Catch::Matchers::StartsWith("[" + opt.name() + "]"));
                  } catch (const std::exception& e) {
                    FAIL("not a tf::Error: " << e.what());
                  }
                };
                attempt("apply", [&] { opt.apply_gradients({g}, {v}); });
                attempt("twice in one call", [&] { opt.apply_gradients({g, g}, {v, v}); });
                attempt("no gradient", [&] { opt.apply_gradients({tf::Tensor()}, {v}); });
                attempt("more gradients than variables", [&] { opt.apply_gradients({g, g}, {v}); });
              }
  });
}

TEST_CASE("adversarial: fit, evaluate and predict with odd data and options", "[adversarial]") {
  const adversarial::QuietLogs quiet;
  const auto model = [] {
    K::Sequential m({L::Dense(4, "relu"), L::Dense(2)});
    m.compile(K::optimizers::get("adam"), "mse");
    return m;
  };
  const std::vector<std::pair<tf::TensorShape, tf::TensorShape>> data = {
      {{8, 3}, {8, 2}}, {{0, 3}, {0, 2}}, {{8, 3}, {7, 2}}, {{8, 3}, {8, 5}},   {{8, 5}, {8, 2}},
      {{8}, {8}},       {{}, {}},         {{1, 3}, {1, 2}}, {{8, 3, 1}, {8, 2}}};
  for (const auto& [sx, sy] : data)
    for (bool special : {false, true}) {
      const tf::Tensor x = make(sx, tf::float32, special, 8);
      const tf::Tensor y = make(sy, tf::float32, special, 9);
      const std::string what = describe(x) + ", " + describe(y) + (special ? " (special)" : "");
      for (int batch_size : {-1, 0, 1, 3, 1 << 30})
        for (double split : {0.0, 0.5, 1.0, -0.5, std::nan("")})
          for (int epochs : {-1, 0, 2}) {
            K::Sequential m = model();
            INFO(what << " batch_size " << batch_size << " validation_split " << split << " epochs "
                      << epochs);
            adversarial::attempt([&] {
              m.fit(x, y,
                    {.epochs = epochs,
                     .batch_size = batch_size,
                     .verbose = 0,
                     .validation_split = split});
              m.evaluate(x, y, {.batch_size = batch_size, .verbose = 0});
              const tf::Tensor p = m.predict(x, {.batch_size = batch_size});
              CHECK(p.numpy<double>().size() == static_cast<size_t>(p.num_elements()));
            });
          }
    }
}

TEST_CASE("adversarial: merge and attention layers on odd input lists", "[adversarial]") {
  const adversarial::QuietLogs quiet;
  const std::vector<tf::TensorShape> shapes = {{},        {2},       {2, 3},    {2, 1},   {0, 3},
                                               {2, 3, 4}, {1, 3, 4}, {2, 0, 4}, {2, 3, 0}};
  const std::vector<std::function<L::Merge()>> merges = {[] { return L::Add(); },
                                                         [] { return L::Subtract(); },
                                                         [] { return L::Multiply(); },
                                                         [] { return L::Average(); },
                                                         [] { return L::Maximum(); },
                                                         [] { return L::Minimum(); },
                                                         [] { return L::Concatenate(); },
                                                         [] { return L::Concatenate(0); },
                                                         [] { return L::Concatenate(5); },
                                                         [] { return L::Dot(1); },
                                                         [] { return L::HashedCrossing(4); },
                                                         [] {
                                                           return L::Dot({2, 2}, true);
                                                         }};
  on_every_device([&] {
    for (const auto& make_merge : merges) {
      {
        const L::Merge m = make_merge();
        probe_layer(m, "no inputs",
                    [&] { return std::vector<tf::Tensor>{m(std::vector<tf::Tensor>{})}; });
      }
      for (const tf::TensorShape& a : shapes) {
        const tf::Tensor x = make(a, tf::float32, true, 1);
        {
          const L::Merge m = make_merge();
          probe_layer(m, describe(x), [&] { return std::vector<tf::Tensor>{m({x})}; });
        }
        for (const tf::TensorShape& b : shapes)
          for (tf::DType d : {tf::float32, tf::int32}) {
            const tf::Tensor y = make(b, d, false, 2);
            const L::Merge m = make_merge();
            probe_layer(m, describe(x) + ", " + describe(y), [&] {
              tf::GradientTape tape;
              tape.watch(x);
              const tf::Tensor out = m({x, y, x});
              return std::vector<tf::Tensor>{out, tape.gradient(tf::reduce_sum(out), x)};
            });
          }
      }
    }
    // Two-input attention: query and value (and key) of every shape pair.
    for (const tf::TensorShape& q : shapes)
      for (const tf::TensorShape& v : shapes) {
        const tf::Tensor query = make(q, tf::float32, false, 3);
        const tf::Tensor value = make(v, tf::float32, false, 4);
        const std::string what = describe(query) + ", " + describe(value);
        const L::MultiHeadAttention mha(2, 2);
        probe_layer(mha, what, [&] { return std::vector<tf::Tensor>{mha(query, value)}; });
        const L::GroupQueryAttention gqa(2, 2, 1);
        probe_layer(gqa, what, [&] { return std::vector<tf::Tensor>{gqa(query, value)}; });
        const L::Attention att;
        probe_layer(att, what, [&] {
          return std::vector<tf::Tensor>{att(query, value, {.use_causal_mask = true})};
        });
        const L::AdditiveAttention add;
        probe_layer(add, what, [&] { return std::vector<tf::Tensor>{add(query, value)}; });
        // Masks of every shape and dtype for a (2, 3, 4) query and value.
        const tf::Tensor qv = make({2, 3, 4}, tf::float32, false, 5);
        for (tf::DType md : {tf::bool_, tf::float32, tf::int32}) {
          const tf::Tensor mask = make(v, md, false, 6);
          const std::string mw = "mask " + describe(mask);
          const L::MultiHeadAttention mha2(2, 2);
          probe_layer(mha2, mw, [&] {
            return std::vector<tf::Tensor>{mha2(qv, qv, {.attention_mask = mask})};
          });
          const L::Attention att2;
          probe_layer(att2, mw,
                      [&] { return std::vector<tf::Tensor>{att2(qv, qv, {.query_mask = mask})}; });
          const L::LSTM lstm(2);
          probe_layer(lstm, mw, [&] {
            return std::vector<tf::Tensor>{lstm.call_with_mask(qv, mask).output};
          });
          const L::Softmax softmax;
          probe_layer(softmax, mw, [&] {
            return std::vector<tf::Tensor>{softmax.call_with_mask(qv, mask).output};
          });
        }
      }
  });
}

TEST_CASE("adversarial: layer configs with odd values", "[adversarial]") {
  const adversarial::QuietLogs quiet;
  using Config = K::saving::Config;
  const std::vector<Config> odd = {Config(-1),
                                   Config(0),
                                   Config(int64_t{1} << 40),
                                   Config(1e300),
                                   Config(-0.5),
                                   Config(2.5),
                                   Config("x"),
                                   Config(nullptr),
                                   Config::array(),
                                   Config::array({0, -1}),
                                   Config::object(),
                                   Config(true)};
  const tf::Tensor images = make({2, 4, 5, 3}, tf::float32, false, 7);
  const tf::Tensor seq = make({2, 3, 4}, tf::float32, false, 8);
  int64_t loaded = 0;
  for (const Maker& m : layer_makers()) {
    const K::Layer original = m.make();
    if (!K::saving::is_registered(original.class_name())) continue;
    Config config;
    try {
      config = K::saving::get_config(original);
    } catch (const tf::Error&) {
      continue;  // a layer without a config (Lambda)
    }
    for (const auto& [key, value] : config.items()) {
      if (key == "name" || key == "dtype" || key == "trainable") continue;
      for (const Config& v : odd) {
        Config c = config;
        c[key] = v;
        INFO(original.class_name() << " with " << key << " = " << v.dump());
        K::Layer layer;
        try {
          layer = K::saving::from_config(original.class_name(), c);
          ++loaded;
        } catch (const tf::Error& e) {
          // The Keras class, the C++ class (GroupQueryAttention is Keras' GroupedQueryAttention)
          // or the layer's name.
          const std::string message = e.what();
          CHECK((message.find(original.class_name()) != std::string::npos ||
                 message.find(m.what) != std::string::npos ||
                 message.find(original.name()) != std::string::npos));
          continue;
        } catch (const std::exception& e) {
          FAIL("not a tf::Error: " << e.what());
        }
        for (const tf::Tensor& x : {images, seq})
          probe_layer(layer, describe(x), [&] { return call_with_gradients(layer, x, true); });
      }
    }
  }
  CHECK(loaded > 100);
}

// What the probes above found, pinned down.
TEST_CASE("keras: errors name the layer, loss, metric or container they come from",
          "[keras][adversarial]") {
  using tf::testing::require_error;
  // An op's error inside a layer's call gets the layer and its input in front, as Keras'
  // "Exception encountered when calling Conv2D.call()"; a sub-layer's error gets each
  // enclosing layer.
  const L::Conv2D conv(4, 5, {.name = "big_kernel"});
  require_error(
      [&] {
        conv(tf::zeros({1, 3, 3, 1}));
      },
      {"[big_kernel] layer \"big_kernel\" (Conv2D) called on float32 (1, 3, 3, 1): "
       "[conv2d]",
       "exceeds the input height 3"});
  const K::Sequential model({L::Dense(2, {.activation = "relu", .name = "inner"})}, "outer");
  model(tf::zeros({2, 3}));
  require_error(
      [&] {
        model(tf::zeros({2, 5}));
      },
      {"[outer] layer \"outer\" (Sequential) called on float32 (2, 5): [inner]"});
  // Merge layers name themselves and their list of inputs.
  const L::Concatenate concat(-1, "joined");
  require_error(
      [&] {
        concat({tf::zeros({2, 3}), tf::zeros({2, 3}, tf::int32)});
      },
      {"[joined] layer \"joined\" (Concatenate) called on [float32 (2, 3), int32 (2, 3)]",
       "[concat] dtypes differ"});
  // Losses and metrics name themselves before their ops.
  require_error(
      [] { K::losses::get("sparse_categorical_crossentropy")(tf::zeros({2}), tf::zeros({2})); },
      {"[sparse_categorical_crossentropy]"});
  require_error(
      [] {
        K::metrics::Metric m = K::metrics::get("accuracy");
        m.update_state(tf::zeros({2, 3, 4}), tf::zeros({2, 5}));
      },
      {"[accuracy]"});
  // A container's config names the container when a nested layer cannot be read.
  auto c = K::saving::get_config(L::Pipeline({L::RandomFlip()}));
  c["layers"] = K::saving::Config::array({0});
  require_error([&] { K::saving::from_config("Pipeline", c); }, {"[Pipeline] [deserialize]"});
  // fit on scalars says there is no sample axis.
  K::Sequential m({L::Dense(1)});
  m.compile(K::optimizers::get("sgd"), "mse");
  require_error([&] { m.fit(tf::zeros({}), tf::zeros({}), {.verbose = 0}); },
                {"[fit]", "need a first dimension that counts the samples", "x of shape ()"});
}

TEST_CASE("keras: huge weights, empty images and bool volumes", "[keras][adversarial]") {
  // A weight this machine cannot hold is refused before any allocation, naming the layer.
  const L::Dense huge(int64_t{1} << 40, {.name = "huge"});
  try {
    huge(tf::zeros({1, 1 << 10}));
    FAIL("Dense(2^40) was built");
  } catch (const tf::ResourceExhaustedError& e) {
    CHECK_THAT(std::string(e.what()),
               Catch::Matchers::Contains("layer \"huge\" (Dense): weight 'kernel' of shape "
                                         "(1024, 1099511627776)"));
  }
  // Augmentations of images without pixels return them (Keras' RandomFlip, Solarization and
  // RandomContrast do; RandomRotation's kernel fails in TF).
  for (const tf::TensorShape& s : {tf::TensorShape{0, 3, 4}, tf::TensorShape{1, 0, 5, 3},
                                   tf::TensorShape{0, 4, 5, 3}, tf::TensorShape{2, 4, 5, 0}}) {
    INFO(s.to_string());
    const tf::Tensor x = tf::zeros(s);
    for (const K::Layer& l :
         std::vector<K::Layer>{L::RandomFlip(), L::RandomRotation(0.2), L::RandomContrast(0.2),
                               L::Solarization(0.1, 0.1), L::RandomErasing(), L::AugMix()}) {
      const tf::Tensor y = l(x, true);
      CHECK(y.shape() == s);
      CHECK(y.dtype() == tf::float32);
    }
    // UpSampling2D's interpolations (resize refuses empty images) repeat nothing.
    if (s.rank() == 4)
      CHECK(L::UpSampling2D(2, "bilinear")(x).shape() ==
            tf::TensorShape({s[0], s[1] * 2, s[2] * 2, s[3]}));
  }
  // UpSampling3D keeps a bool input's dtype (Keras repeats it).
  const tf::Tensor b =
      tf::cast(tf::convert_to_tensor(std::vector<double>{1.0, 0.0}, {1, 1, 1, 2, 1}), tf::bool_);
  const tf::Tensor up = L::UpSampling3D(2)(b);
  CHECK(up.dtype() == tf::bool_);
  CHECK(up.shape() == tf::TensorShape({1, 2, 2, 4, 1}));
  tf::testing::check_values(tf::cast(up, tf::float32),
                            {1, 1, 0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1, 0, 0});
}

TEST_CASE("adversarial: adapt, utils and functional models on odd data", "[adversarial]") {
  const adversarial::QuietLogs quiet;
  const std::vector<tf::TensorShape> shapes = {{}, {0}, {5}, {4, 3}, {0, 3}, {4, 0}, {2, 3, 4}};
  for (const tf::TensorShape& s : shapes)
    for (tf::DType d : {tf::float32, tf::int32, tf::int64, tf::bool_})
      for (bool special : {false, true}) {
        const tf::Tensor data = make(s, d, special, 9);
        const std::string what = describe(data) + (special ? " (special values)" : "");
        const tf::Tensor probe_input = make({2, 3}, d, false, 10);
        for (std::optional<int> axis : std::vector<std::optional<int>>{-1, 0, std::nullopt, 3}) {
          const L::Normalization norm({.axis = axis});
          probe_layer(norm, what, [&] {
            norm.adapt(data);
            return std::vector<tf::Tensor>{norm(data), norm(probe_input)};
          });
        }
        L::Discretization disc = L::Discretization::with_num_bins(3);
        probe_layer(disc, what, [&] {
          disc.adapt(data);
          return std::vector<tf::Tensor>{disc(data), disc(probe_input)};
        });
        L::IntegerLookup lookup({.max_tokens = 4});
        probe_layer(lookup, what, [&] {
          lookup.adapt(data);
          return std::vector<tf::Tensor>{lookup(data), lookup(probe_input)};
        });
        for (int64_t classes : {int64_t{-1}, int64_t{0}, int64_t{3}, int64_t{1} << 40})
          adversarial::probe("to_categorical", what, [&] {
            return std::vector<tf::Tensor>{K::utils::to_categorical(data, classes)};
          });
        for (int64_t length : {int64_t{-1}, int64_t{0}, int64_t{2}, int64_t{1} << 40})
          for (int64_t stride : {int64_t{0}, int64_t{1}, int64_t{1} << 40})
            adversarial::probe("timeseries_dataset_from_array", what, [&] {
              const tf::data::Dataset ds = K::utils::timeseries_dataset_from_array(
                  data, data, length,
                  {.sequence_stride = stride, .sampling_rate = stride, .batch_size = 2});
              std::vector<tf::Tensor> out;
              for (const tf::data::Element& e : ds.take(5))
                out.insert(out.end(), e.begin(), e.end());
              return out;
            });
      }
  for (std::optional<int64_t> maxlen :
       {std::optional<int64_t>{}, std::optional<int64_t>{0}, std::optional<int64_t>{-1},
        std::optional<int64_t>{3}, std::optional<int64_t>{int64_t{1} << 40}})
    for (const char* side : {"pre", "post", "middle"})
      adversarial::probe("pad_sequences", side, [&] {
        const K::utils::PadSequencesOptions o{
            .maxlen = maxlen, .padding = side, .truncating = side, .value = -1.0};
        return std::vector<tf::Tensor>{
            K::utils::pad_sequences(std::vector<std::vector<int64_t>>{{1, 2, 3}, {}, {4}}, o),
            K::utils::pad_sequences(std::vector<std::vector<int64_t>>{}, o),
            K::utils::pad_sequences(std::vector<tf::Tensor>{tf::ones({2, 3}), tf::ones({4, 2})},
                                    o)};
      });

  // Functional models: inputs of odd shapes through layers that need other ranks.
  const std::vector<std::vector<int64_t>> input_shapes = {
      {}, {0}, {3}, {tf::None}, {4, 3}, {4, tf::None}, {2, 3, 4}, {-5}};
  for (const auto& shape : input_shapes)
    for (const Maker& m : layer_makers()) {
      INFO(m.what << " on Input of shape (" << shape.size() << " dims)");
      adversarial::attempt([&] {
        const K::KerasTensor in = K::Input(shape);
        const K::Layer layer = m.make();
        const K::KerasTensor out = layer(in);
        const K::Model model(in, out);
        std::vector<int64_t> concrete = {2};
        for (int64_t d : shape) concrete.push_back(d == tf::None ? 3 : d);
        const tf::Tensor y = model(tf::ones(tf::TensorShape(concrete)));
        CHECK(y.numpy<double>().size() == static_cast<size_t>(y.num_elements()));
      });
    }
}

TEST_CASE("keras utils: sequences longer than the data and ids past one_hot's depth",
          "[keras][adversarial]") {
  // A sequence that spans more rows than the data gives no sequences (Keras' empty dataset);
  // a length of 2^40 allocated its step offsets (std::bad_alloc).
  const tf::Tensor data = tf::reshape(tf::range(0.0, 10.0, 1.0, tf::float32), {5, 2});
  for (int64_t length : {int64_t{6}, int64_t{1} << 40, std::numeric_limits<int64_t>::max()}) {
    int64_t n = 0;
    for (const auto& e : K::utils::timeseries_dataset_from_array(data, std::nullopt, length)) {
      (void)e;
      ++n;
    }
    CHECK(n == 0);
  }
  int64_t n = 0;
  for (const auto& e : K::utils::timeseries_dataset_from_array(
           data, std::nullopt, 3, {.sampling_rate = 2, .batch_size = std::nullopt})) {
    CHECK(e[0].shape() == tf::TensorShape({3, 2}));
    ++n;
  }
  CHECK(n == 1);  // rows 0, 2, 4
  // Ids past int32 (one_hot's depth) are refused by to_categorical itself.
  tf::testing::require_error(
      [] {
        K::utils::to_categorical(tf::constant(std::vector<int64_t>{0, int64_t{1} << 40}, {2}));
      },
      {"[to_categorical]", "class id 1099511627776", "2^31 - 1"});
  tf::testing::require_error([] { K::utils::to_categorical(tf::zeros({2}), int64_t{1} << 40); },
                             {"[to_categorical] [one_hot]"});
}

TEST_CASE("adversarial: callbacks with odd options in fit", "[adversarial]") {
  const adversarial::QuietLogs quiet;
  namespace cb = K::callbacks;
  tf::testing::TempDir dir;
  const tf::Tensor x = make({8, 3}, tf::float32, false, 11);
  const tf::Tensor y = make({8, 2}, tf::float32, false, 12);
  const tf::Tensor nan_y = make({8, 2}, tf::float32, true, 13);
  const std::vector<std::function<cb::CallbackRef()>> callbacks = {
      [] { return cb::EarlyStopping({.monitor = "no_such_metric", .patience = -3}); },
      [] { return cb::EarlyStopping({.monitor = "loss", .mode = "sideways"}); },
      [] {
        return cb::EarlyStopping({.monitor = "loss",
                                  .baseline = std::nan(""),
                                  .restore_best_weights = true,
                                  .start_from_epoch = -1});
      },
      [&] { return cb::ModelCheckpoint(dir / "no/such/dir/m.weights.safetensors"); },
      [&] {
        return cb::ModelCheckpoint(dir / "m_{epoch:02d}_{loss}.weights.safetensors",
                                   {.monitor = "loss", .save_best_only = true, .save_freq = -5});
      },
      [&] { return cb::ModelCheckpoint(dir / "m_{nope}.safetensors"); },
      [] { return cb::LearningRateScheduler([](int, double) { return std::nan(""); }); },
      [] { return cb::LearningRateScheduler([](int, double) { return -1.0; }); },
      [] { return cb::ReduceLROnPlateau({.factor = 1.5}); },
      [] {
        return cb::ReduceLROnPlateau(
            {.monitor = "loss", .factor = 0.5, .patience = 0, .min_lr = 1e300});
      },
      [] { return cb::TerminateOnNaN(true); },
      [] { return cb::TerminateOnNaN(false); },
      [&] { return cb::CSVLogger(dir / "no/such/dir/log.csv"); },
      [&] { return cb::CSVLogger(dir / "log.csv", ""); },
      [&] { return cb::BackupAndRestore(dir / "no/such/dir/backup"); },
      [&] { return cb::BackupAndRestore(""); },
  };
  for (size_t i = 0; i < callbacks.size(); ++i)
    for (const tf::Tensor& target : {y, nan_y}) {
      INFO("callback " << i << (target.id() == nan_y.id() ? " on NaN targets" : ""));
      adversarial::attempt([&] {
        K::Sequential m({L::Dense(2)});
        m.compile(K::optimizers::get("sgd"), "mse");
        m.fit(x, target,
              {.epochs = 3, .batch_size = 4, .callbacks = {callbacks[i]()}, .verbose = 0});
      });
    }
}

TEST_CASE("adversarial: functional graphs wired oddly", "[adversarial]") {
  const adversarial::QuietLogs quiet;
  const auto attempt = [](const std::string& what, const std::function<void()>& f) {
    INFO(what);
    adversarial::attempt(f);
  };
  attempt("outputs that do not depend on the inputs", [] {
    const K::KerasTensor a = K::Input({3}), b = K::Input({3});
    const K::Model m(a, L::Dense(2)(b));
    m(tf::ones({2, 3}));
  });
  attempt("an input that nothing uses", [] {
    const K::KerasTensor a = K::Input({3}), b = K::Input({4});
    const K::Model m(std::vector<K::KerasTensor>{a, b},
                     std::vector<K::KerasTensor>{L::Dense(2)(a)});
    m(std::vector<tf::Tensor>{tf::ones({2, 3}), tf::ones({2, 4})});
    m(std::vector<tf::Tensor>{tf::ones({2, 3})});
    m(std::vector<tf::Tensor>{tf::ones({2, 3}), tf::ones({5, 4}), tf::ones({1})});
  });
  attempt("a layer shared by inputs of different widths", [] {
    const K::KerasTensor a = K::Input({3}), b = K::Input({4});
    const L::Dense shared(2);
    const K::Model m(std::vector<K::KerasTensor>{a, b},
                     std::vector<K::KerasTensor>{shared(a), shared(b)});
    m(std::vector<tf::Tensor>{tf::ones({2, 3}), tf::ones({2, 4})});
  });
  attempt("the same tensor as input twice", [] {
    const K::KerasTensor a = K::Input({3});
    const K::Model m(std::vector<K::KerasTensor>{a, a}, std::vector<K::KerasTensor>{a});
    m(std::vector<tf::Tensor>{tf::ones({2, 3}), tf::ones({2, 3})});
  });
  attempt("an intermediate tensor as an input", [] {
    const K::KerasTensor a = K::Input({3});
    const K::KerasTensor h = L::Dense(4)(a);
    const K::Model m(h, L::Dense(1)(h));
    m(tf::ones({2, 4}));
  });
  attempt("no outputs", [] {
    const K::KerasTensor a = K::Input({3});
    const K::Model m(std::vector<K::KerasTensor>{a}, std::vector<K::KerasTensor>{});
    m(tf::ones({2, 3}));
  });
  attempt("a model inside itself", [] {
    const K::KerasTensor a = K::Input({3});
    const K::Model inner(a, L::Dense(3)(a));
    const K::KerasTensor b = K::Input({3});
    const K::Model outer(b, inner(inner(b)));
    outer(tf::ones({2, 3}));
    outer(tf::ones({2, 5}));
  });
}
