// A sweep over Keras layers in a tf::function whose input has a None batch: for each layer, the
// function computes a loss of the layer's output and its gradients with respect to the input
// and the layer's weights (the tape inside), is called at several batch sizes, and must equal
// eager at each while tracing once. A layer (or an op under it) that bakes the traced batch
// into the graph makes the function trace per shape: the CHECK on tracing_count() names it.
#include <functional>
#include <string>
#include <vector>

#include "support/testing.h"
#include "tapeflow/tapeflow.h"

namespace tf = tapeflow;
namespace L = tapeflow::keras::layers;

namespace {

struct Case {
  const char* name;
  std::function<tf::keras::Layer()> make;
  std::vector<int64_t> features;  // the input's shape after the batch dimension
  bool training = false;
  bool channels_first = false;  // features[0] holds the channels (else the last one)
  // Keras fixes the sizes after the time axis (features[0]) at build, as TF2's ConvRNN: only the
  // time axis is None in the spatial sweep.
  bool fixed_after_time = false;
};

std::vector<Case> cases() {
  return {
      {"Dense", [] { return L::Dense(4, "tanh"); }, {6}},
      {"EinsumDense", [] { return L::EinsumDense("ab,bc->ac", 4); }, {6}},
      {"LayerNormalization", [] { return L::LayerNormalization(); }, {6}},
      {"RMSNormalization", [] { return L::RMSNormalization(); }, {6}},
      {"UnitNormalization", [] { return L::UnitNormalization(); }, {6}},
      {"BatchNormalization, training", [] { return L::BatchNormalization(); }, {6}, true},
      {"BatchNormalization, inference", [] { return L::BatchNormalization(); }, {5, 6}},
      {"RepeatVector", [] { return L::RepeatVector(3); }, {6}},
      {"Reshape",
       [] {
         return L::Reshape({3, 2});
       },
       {6}},
      {"PReLU", [] { return L::PReLU(); }, {6}},
      {"Softmax", [] { return L::Softmax(); }, {6}},
      {"Conv1D same", [] { return L::Conv1D(4, 3, {.padding = "same"}); }, {5, 6}},
      {"Conv1D causal, strided",
       [] { return L::Conv1D(4, 2, {.strides = 2, .padding = "causal"}); },
       {5, 6}},
      {"Conv1DTranspose", [] { return L::Conv1DTranspose(4, 3, {.strides = 2}); }, {5, 6}},
      {"DepthwiseConv1D", [] { return L::DepthwiseConv1D(3); }, {5, 6}},
      {"SeparableConv1D", [] { return L::SeparableConv1D(4, 3); }, {5, 6}},
      {"MaxPooling1D", [] { return L::MaxPooling1D(2); }, {5, 6}},
      {"GlobalAveragePooling1D", [] { return L::GlobalAveragePooling1D(); }, {5, 6}},
      {"UpSampling1D", [] { return L::UpSampling1D(2); }, {5, 6}},
      {"ZeroPadding1D", [] { return L::ZeroPadding1D(1); }, {5, 6}},
      {"Cropping1D", [] { return L::Cropping1D(1); }, {5, 6}},
      {"Flatten", [] { return L::Flatten(); }, {5, 6}},
      {"Permute",
       [] {
         return L::Permute({2, 1});
       },
       {5, 6}},
      {"TimeDistributed(Dense)", [] { return L::TimeDistributed(L::Dense(3)); }, {5, 6}},
      {"GroupNormalization", [] { return L::GroupNormalization(2); }, {5, 6}},
      {"Conv2D", [] { return L::Conv2D(3, 2, {.padding = "same"}); }, {4, 5, 2}},
      {"Conv2D channels_first",
       [] { return L::Conv2D(3, 2, {.padding = "same", .data_format = "channels_first"}); },
       {2, 4, 5},
       false,
       true},
      {"Conv2DTranspose", [] { return L::Conv2DTranspose(3, 2, {.strides = 2}); }, {4, 5, 2}},
      {"DepthwiseConv2D", [] { return L::DepthwiseConv2D(2); }, {4, 5, 2}},
      {"SeparableConv2D", [] { return L::SeparableConv2D(3, 2); }, {4, 5, 2}},
      {"MaxPooling2D", [] { return L::MaxPooling2D(2); }, {4, 5, 2}},
      {"AveragePooling2D", [] { return L::AveragePooling2D(2); }, {4, 5, 2}},
      {"GlobalAveragePooling2D", [] { return L::GlobalAveragePooling2D(); }, {4, 5, 2}},
      {"UpSampling2D", [] { return L::UpSampling2D(2); }, {4, 5, 2}},
      {"ZeroPadding2D", [] { return L::ZeroPadding2D(1); }, {4, 5, 2}},
      {"Cropping2D", [] { return L::Cropping2D(1); }, {4, 5, 2}},
      {"AdaptiveAveragePooling2D",
       [] {
         return L::AdaptiveAveragePooling2D({2, 2});
       },
       {4, 5, 2}},
      {"AveragePooling1D", [] { return L::AveragePooling1D(2); }, {5, 6}},
      {"GlobalMaxPooling1D", [] { return L::GlobalMaxPooling1D(); }, {5, 6}},
      {"AdaptiveAveragePooling1D", [] { return L::AdaptiveAveragePooling1D(2); }, {5, 6}},
      {"AdaptiveMaxPooling2D",
       [] {
         return L::AdaptiveMaxPooling2D({2, 3});
       },
       {4, 5, 2}},
      {"SimpleRNN", [] { return L::SimpleRNN(3); }, {5, 6}},
      {"LSTM, return_sequences", [] { return L::LSTM(3, {.return_sequences = true}); }, {5, 6}},
      {"GRU", [] { return L::GRU(3); }, {5, 6}},
      {"Bidirectional(LSTM)", [] { return L::Bidirectional(L::LSTM(3)); }, {5, 6}},
      {"ConvLSTM1D",
       [] { return L::ConvLSTM1D(2, {2}, {.padding = "same"}); },
       {3, 5, 2},
       false,
       false,
       true},
      {"GlobalMaxPooling2D", [] { return L::GlobalMaxPooling2D(); }, {4, 5, 2}},
      {"Resizing", [] { return L::Resizing(3, 4); }, {4, 5, 2}},
      {"Conv3D", [] { return L::Conv3D(2, 2, {.padding = "same"}); }, {3, 4, 5, 2}},
      {"Conv3DTranspose", [] { return L::Conv3DTranspose(2, 2, {.strides = 2}); }, {3, 4, 5, 2}},
      {"MaxPooling3D", [] { return L::MaxPooling3D(2); }, {3, 4, 5, 2}},
      {"AveragePooling3D", [] { return L::AveragePooling3D(2); }, {3, 4, 5, 2}},
      {"GlobalAveragePooling3D", [] { return L::GlobalAveragePooling3D(); }, {3, 4, 5, 2}},
      {"UpSampling3D", [] { return L::UpSampling3D(2); }, {3, 4, 5, 2}},
      {"ZeroPadding3D", [] { return L::ZeroPadding3D(1); }, {3, 4, 5, 2}},
      {"Cropping3D", [] { return L::Cropping3D(1); }, {3, 4, 5, 2}},
  };
}

// {loss, d loss / d x, d loss / d each trainable weight}.
std::vector<tf::Tensor> loss_and_gradients(const tf::keras::Layer& layer, const tf::Tensor& x,
                                           bool training) {
  tf::GradientTape tape({.persistent = true});
  tape.watch(x);
  const tf::Tensor loss = tf::reduce_sum(tf::sin(layer(x, training)));
  std::vector<tf::Tensor> out{loss, tape.gradient(loss, x)};
  for (const tf::Tensor& g : tape.gradient(loss, layer.trainable_variables())) out.push_back(g);
  return out;
}

// Keras' floatx float64 while it lives (the sweeps compare to 1e-9).
struct Float64Layers {
  Float64Layers() { tf::keras::backend::set_floatx(tf::float64); }
  ~Float64Layers() { tf::keras::backend::set_floatx(tf::float32); }
};

// c's layer in a tf::function whose signature leaves the batch and the features where `open`
// None, called at four shapes (batches 2, 5, 1, 3; each open feature i grown by 0, 3, 1, 2 plus
// i): the loss and gradients equal eager at each, and one trace.
void sweep_case(const Case& c, const std::function<bool(size_t)>& open) {
  INFO("layer: " << c.name);
  const tf::keras::Layer layer = c.make();
  std::vector<int64_t> spec{tf::None};
  for (size_t i = 0; i < c.features.size(); ++i) spec.push_back(open(i) ? tf::None : c.features[i]);
  auto f =
      tf::function([&](const tf::Tensor& x) { return loss_and_gradients(layer, x, c.training); },
                   {.input_signature = {tf::TensorSpec(tf::TensorShape(spec), tf::float64)}});
  const int64_t batches[] = {2, 5, 1, 3}, grow[] = {0, 3, 1, 2};
  for (int k = 0; k < 4; ++k) {
    std::vector<int64_t> dims{batches[k]};
    for (size_t i = 0; i < c.features.size(); ++i)
      dims.push_back(c.features[i] + (open(i) ? grow[k] + static_cast<int64_t>(i) : 0));
    const tf::TensorShape shape(dims);
    INFO("input " << shape.to_string());
    const tf::Tensor x =
        tf::constant(tf::testing::random_values(static_cast<size_t>(shape.num_elements()), -1, 1,
                                                static_cast<unsigned>(batches[k] + 5)),
                     shape);
    const std::vector<tf::Tensor> want = loss_and_gradients(layer, x, c.training);  // builds
    const std::vector<tf::Tensor> got = f(x);
    REQUIRE(got.size() == want.size());
    for (size_t j = 0; j < want.size(); ++j) tf::testing::check_close(got[j], want[j], 1e-9, 1e-10);
  }
  CHECK(f.tracing_count() == 1);
}

}  // namespace

TEST_CASE("None batch sweep: Keras layers and their gradients trace once and equal eager",
          "[keras]") {
  const Float64Layers float64;
  for (const Case& c : cases()) sweep_case(c, [](size_t) { return false; });
}

TEST_CASE("None spatial sweep: Keras layers over any length or image size trace once", "[keras]") {
  // The cases above whose input has a time or spatial axis, with every dimension but the
  // channels None: a text CNN over sequences of any length, a fully convolutional network over
  // images of any size.
  const Float64Layers float64;
  for (const Case& c : cases()) {
    if (c.features.size() < 2) continue;
    const size_t channels = c.channels_first ? 0 : c.features.size() - 1;
    sweep_case(c, [&](size_t i) { return i != channels && (!c.fixed_after_time || i == 0); });
  }
}

TEST_CASE("None batch sweep: Keras losses and their gradients trace once and equal eager",
          "[keras]") {
  namespace losses = tf::keras::losses;
  struct LossCase {
    const char* name;
    losses::Loss loss;
    bool sparse = false;  // integer labels
  };
  const std::vector<LossCase> cases{
      {"MeanSquaredError", losses::MeanSquaredError()},
      {"MeanAbsoluteError", losses::MeanAbsoluteError()},
      {"MeanAbsolutePercentageError", losses::MeanAbsolutePercentageError()},
      {"MeanSquaredLogarithmicError", losses::MeanSquaredLogarithmicError()},
      {"Huber", losses::Huber()},
      {"LogCosh", losses::LogCosh()},
      {"KLDivergence", losses::KLDivergence()},
      {"Poisson", losses::Poisson()},
      {"CosineSimilarity", losses::CosineSimilarity()},
      {"Hinge", losses::Hinge()},
      {"SquaredHinge", losses::SquaredHinge()},
      {"CategoricalHinge", losses::CategoricalHinge()},
      {"CategoricalCrossentropy", losses::CategoricalCrossentropy()},
      {"BinaryCrossentropy", losses::BinaryCrossentropy()},
      {"SparseCategoricalCrossentropy", losses::SparseCategoricalCrossentropy(), true},
      {"BinaryFocalCrossentropy", losses::BinaryFocalCrossentropy()},
      {"CategoricalFocalCrossentropy", losses::CategoricalFocalCrossentropy()},
      {"Dice", losses::Dice()},
      {"Tversky", losses::Tversky()},
      {"CategoricalGeneralizedCrossEntropy", losses::CategoricalGeneralizedCrossEntropy(), true},
  };
  // y_pred: probabilities of 5 classes; y_true: other probabilities, or their argmax.
  auto run = [](const LossCase& c, const tf::Tensor& logits) {
    tf::GradientTape tape;
    tape.watch(logits);
    const tf::Tensor y_pred = tf::nn::softmax(logits);
    const tf::Tensor target = tf::nn::softmax(tf::reverse(logits, {1}) * 2.0);
    const tf::Tensor y_true = c.sparse ? tf::argmax(target, 1) : target;
    const tf::Tensor l = c.loss(y_true, y_pred);
    return std::vector<tf::Tensor>{l, tape.gradient(l, logits)};
  };
  for (const LossCase& c : cases) {
    INFO("loss: " << c.name);
    auto f = tf::function([&](const tf::Tensor& logits) { return run(c, logits); },
                          {.input_signature = {tf::TensorSpec({tf::None, 5}, tf::float64)}});
    for (int64_t batch : {2, 5, 1, 3}) {
      INFO("batch " << batch);
      const tf::Tensor logits =
          tf::constant(tf::testing::random_values(static_cast<size_t>(batch * 5), -2, 2,
                                                  static_cast<unsigned>(batch + 9)),
                       {batch, 5});
      const std::vector<tf::Tensor> want = run(c, logits);
      const std::vector<tf::Tensor> got = f(logits);
      for (size_t k = 0; k < want.size(); ++k)
        tf::testing::check_close(got[k], want[k], 1e-9, 1e-10);
    }
    CHECK(f.tracing_count() == 1);
  }
}

TEST_CASE("None batch sweep: Keras metrics update traced once and agree with eager", "[keras]") {
  namespace M = tf::keras::metrics;
  enum class Kind { Probabilities, Sparse, Binary };
  struct MetricCase {
    const char* name;
    std::function<M::Metric()> make;
    Kind kind;
  };
  const std::vector<MetricCase> cases{
      {"CategoricalAccuracy", [] { return M::CategoricalAccuracy(); }, Kind::Probabilities},
      {"TopKCategoricalAccuracy", [] { return M::TopKCategoricalAccuracy(2); },
       Kind::Probabilities},
      {"CategoricalCrossentropy", [] { return M::CategoricalCrossentropy(); }, Kind::Probabilities},
      {"KLDivergence", [] { return M::KLDivergence(); }, Kind::Probabilities},
      {"CosineSimilarity", [] { return M::CosineSimilarity(); }, Kind::Probabilities},
      {"MeanSquaredError", [] { return M::MeanSquaredError(); }, Kind::Probabilities},
      {"RootMeanSquaredError", [] { return M::RootMeanSquaredError(); }, Kind::Probabilities},
      {"LogCoshError", [] { return M::LogCoshError(); }, Kind::Probabilities},
      {"R2Score", [] { return M::R2Score(); }, Kind::Probabilities},
      {"PearsonCorrelation", [] { return M::PearsonCorrelation(); }, Kind::Probabilities},
      {"ConcordanceCorrelation", [] { return M::ConcordanceCorrelation(); }, Kind::Probabilities},
      {"F1Score", [] { return M::F1Score(); }, Kind::Binary},
      {"SparseCategoricalAccuracy", [] { return M::SparseCategoricalAccuracy(); }, Kind::Sparse},
      {"SparseCategoricalCrossentropy", [] { return M::SparseCategoricalCrossentropy(); },
       Kind::Sparse},
      {"SparseTopKCategoricalAccuracy", [] { return M::SparseTopKCategoricalAccuracy(2); },
       Kind::Sparse},
      {"BinaryAccuracy", [] { return M::BinaryAccuracy(); }, Kind::Binary},
      {"BinaryCrossentropy", [] { return M::BinaryCrossentropy(); }, Kind::Binary},
      {"Precision", [] { return M::Precision(); }, Kind::Binary},
      {"Recall", [] { return M::Recall(); }, Kind::Binary},
      {"AUC", [] { return M::AUC(); }, Kind::Binary},
      {"TruePositives", [] { return M::TruePositives(); }, Kind::Binary},
      {"BinaryIoU", [] { return M::BinaryIoU(); }, Kind::Binary},
  };
  // Predictions from logits; labels from other logits (one-hot, class ids or 0/1).
  auto data = [](Kind kind, int64_t batch) {
    auto values = [&](unsigned seed) {
      return tf::constant(tf::testing::random_values(static_cast<size_t>(batch * 5), -2, 2, seed),
                          {batch, 5});
    };
    const tf::Tensor a = values(static_cast<unsigned>(batch + 21));
    const tf::Tensor b = values(static_cast<unsigned>(batch + 41));
    if (kind == Kind::Binary)
      return std::pair{tf::cast(tf::greater(b, 0.0), tf::float64), tf::sigmoid(a)};
    const tf::Tensor ids = tf::argmax(b, 1);
    if (kind == Kind::Sparse) return std::pair{ids, tf::nn::softmax(a)};
    return std::pair{tf::one_hot(ids, 5, 1.0f, 0.0f), tf::nn::softmax(a)};
  };
  for (const MetricCase& c : cases) {
    INFO("metric: " << c.name);
    M::Metric traced = c.make(), eager = c.make();
    const tf::TensorSpec labels = c.kind == Kind::Sparse ? tf::TensorSpec({tf::None}, tf::int64)
                                  : c.kind == Kind::Binary
                                      ? tf::TensorSpec({tf::None, 5}, tf::float64)
                                      : tf::TensorSpec({tf::None, 5}, tf::float32);
    auto update = tf::function(
        [&](const tf::Tensor& y_true, const tf::Tensor& y_pred) {
          traced.update_state(y_true, y_pred);
          return traced.result();
        },
        {.input_signature = {labels, tf::TensorSpec({tf::None, 5}, tf::float64)}});
    for (int64_t batch : {2, 5, 1, 3}) {
      INFO("batch " << batch);
      const auto [y_true, y_pred] = data(c.kind, batch);
      eager.update_state(y_true, y_pred);
      tf::testing::check_close(update(y_true, y_pred), eager.result(), 1e-5, 1e-6);
    }
    CHECK(update.tracing_count() == 1);
  }
}
