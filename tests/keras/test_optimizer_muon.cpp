// Keras 3.15's Muon optimizer (keras/optimizers.h): three steps of a small embedding + dense
// model against Keras' weights (Muon steps for the two Dense kernels, AdamW for the embedding
// table and the biases), with options (exclude_layers, no Nesterov, no RMS rescaling, no weight
// decay, 3 Newton-Schulz steps), eagerly and traced; the Newton-Schulz map's near-orthogonal
// result, the slots, configs written and read as Keras', save/load, and the errors.
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "keras/layers.h"
#include "keras/layers_more.h"
#include "keras/model.h"
#include "keras/optimizers.h"
#include "keras/serialization.h"
#include "keras/serialization_json.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/linalg.h"
#include "ops/reduce.h"
#include "support/testing.h"

namespace tf = tapeflow;
namespace K = tapeflow::keras;
namespace L = tapeflow::keras::layers;
namespace opt = tapeflow::keras::optimizers;
using tf::testing::check_values;
using tf::testing::require_error;

namespace {

using Weights = std::map<std::string, std::vector<double>>;

// keras.Model: Input((3,), int32) -> Embedding(6, 2, Constant(0.3), name="embedding") ->
// Flatten -> Dense(4, kernel arange(24).reshape(6, 4) / 20 - 0.5, bias 0.1, name="dense") ->
// Dense(2, kernel linspace(-1, 1, 8).reshape(4, 2), name="out"); compile(Muon(0.05, ...), "mse");
// three train_on_batch([[0, 1, 2], [3, 4, 5]], [[1, 0], [0, 1]]) (no id twice: Keras on TF
// squares a repeated id's gradient slices one by one, see docs/keras.md). Returns the weights
// by path.
Weights train(const opt::Optimizer& optimizer, bool traced) {
  L::Embedding emb(6, 2,
                   L::EmbeddingOptions{.embeddings_initializer = K::initializers::Constant(0.3),
                                       .name = "embedding"});
  L::Dense dense(4, {.bias_initializer = K::initializers::Constant(0.1), .name = "dense"});
  L::Dense out(2, {.name = "out"});
  K::Sequential model({emb, L::Flatten(), dense, out});
  const tf::Tensor x = tf::convert_to_tensor(std::vector<int32_t>{0, 1, 2, 3, 4, 5}, {2, 3});
  const tf::Tensor y = tf::convert_to_tensor(std::vector<float>{1, 0, 0, 1}, {2, 2});
  (void)model(x);
  std::vector<float> k(24), o(8);
  for (int i = 0; i < 24; ++i) k[static_cast<size_t>(i)] = static_cast<float>(i / 20.0 - 0.5);
  for (int i = 0; i < 8; ++i) o[static_cast<size_t>(i)] = static_cast<float>(-1.0 + 2.0 * i / 7);
  dense.kernel().assign(tf::convert_to_tensor(k, {6, 4}));
  out.kernel().assign(tf::convert_to_tensor(o, {4, 2}));
  model.compile(optimizer, "mse", {}, {.run_eagerly = !traced});
  for (int step = 0; step < 3; ++step) model.train_on_batch(x, y);
  Weights w;
  for (const auto& [path, v] : model.tracked_variables()) w[path] = v.value().numpy<double>();
  return w;
}

void check_weights(const Weights& got, const Weights& want) {
  for (const auto& [path, values] : want) {
    std::string have;
    for (const auto& [k, v] : got) have += k + " ";
    INFO(path << " among " << have);
    REQUIRE(got.count(path) == 1);
    check_values(tf::convert_to_tensor(got.at(path), {static_cast<int64_t>(got.at(path).size())}),
                 values, 3e-5, 1e-6);
  }
}

}  // namespace

TEST_CASE("Muon: three steps match Keras 3.15, eagerly and traced", "[keras][cpu]") {
  // print({w.path: w.numpy().ravel().tolist() for w in m.weights}) after the steps.
  const Weights keras_default = {
      {"embedding/embeddings",
       {0.44727322459220886, 0.44555699825286865, 0.427834153175354, 0.15153390169143677,
        0.1496182531118393, 0.14979495108127594, 0.15011119842529297, 0.15734466910362244,
        0.38667574524879456, 0.4367644488811493, 0.4435109496116638, 0.4455740749835968}},
      {"dense/kernel",
       {-0.5216376781463623,  -0.4659217894077301,   -0.4063413739204407,   -0.35062626004219055,
        -0.3216727077960968,  -0.26590168476104736,  -0.20661260187625885,  -0.15084116160869598,
        -0.11477502435445786, -0.057162053883075714, -0.008001647889614105, 0.04961187019944191,
        0.08699779957532883,  0.1489020735025406,    0.20829801261425018,   0.27020347118377686,
        0.28689509630203247,  0.34884387254714966,   0.408154159784317,     0.4701021611690521,
        0.4867880046367645,   0.5487407445907593,    0.6080104112625122,    0.6699627637863159}},
      {"dense/bias",
       {-0.015217362903058529, -0.02478366531431675, 0.17860965430736542, 0.20034989714622498}},
      {"out/kernel",
       {-1.0135444402694702, -0.6919006705284119, -0.4212456941604614, -0.11642453074455261,
        0.1480591893196106, 0.4300812780857086, 0.7384432554244995, 1.0039174556732178}},
      {"out/bias", {0.1327456533908844, 0.03079225867986679}}};
  // Muon(0.05, exclude_layers=["out"], nesterov=False, rms_rate=None, weight_decay=None,
  //      ns_steps=3)
  const Weights keras_options = {
      {"embedding/embeddings",
       {0.44750043749809265, 0.4455927312374115, 0.4223894774913788, 0.152572900056839,
        0.14965525269508362, 0.14965257048606873, 0.15041767060756683, 0.15914759039878845,
        0.35156014561653137, 0.4161722958087921, 0.43250733613967896, 0.43805181980133057}},
      {"dense/kernel",
       {-0.5534867644309998,  -0.48116832971572876, -0.4105397164821625,  -0.3428351879119873,
        -0.3528260886669159,  -0.2811344265937805,  -0.21115684509277344, -0.14402559399604797,
        -0.12248674035072327, -0.07308518886566162, -0.02350432053208351, 0.02362995222210884,
        0.0825105682015419,   0.14439229667186737,  0.2109270840883255,   0.28333255648612976,
        0.282880574464798,    0.3444295823574066,   0.41060978174209595,  0.48276928067207336,
        0.48302191495895386,  0.5444347858428955,   0.6104747653007507,   0.6825034618377686}},
      {"dense/bias",
       {0.0034198258072137833, -0.014270363375544548, 0.14825432002544403, 0.17421238124370575}},
      {"out/kernel",
       {-0.9789382219314575, -0.5730094909667969, -0.3737780749797821, 0.005514584481716156,
        0.2204805314540863, 0.49112987518310547, 0.8001922369003296, 1.0404236316680908}},
      {"out/bias", {0.1213938444852829, 0.010776400566101074}}};
  for (bool traced : {false, true}) {
    CAPTURE(traced);
    check_weights(train(opt::Muon(0.05), traced), keras_default);
    check_weights(train(opt::Muon(0.05, {.exclude_layers = {"out"},
                                         .ns_steps = 3,
                                         .nesterov = false,
                                         .rms_rate = std::nullopt,
                                         .weight_decay = std::nullopt}),
                        traced),
                  keras_options);
  }
}

TEST_CASE("Muon: Newton-Schulz orthogonalizes, slots and configs follow Keras", "[keras][cpu]") {
  // One Muon step on a 3 x 5 matrix with zero momentum history and no Nesterov: the update is
  // lr * NS(g) * sqrt(5) * 0.2, and NS(g)'s singular values lie near 1 (Keras' quintic
  // coefficients give values in about [0.68, 1.13]).
  tf::Variable w(tf::zeros({3, 5}), "w");
  const tf::Tensor g = tf::convert_to_tensor(
      std::vector<float>{1, 2, 0, -1, 3, 0.5, -2, 1, 4, 0, 2, 2, -1, 0, 1}, {3, 5});
  opt::Muon muon(1.0, {.nesterov = false, .weight_decay = std::nullopt});
  muon.apply_gradients({g}, {w});
  const tf::Tensor u = tf::divide(w.value(), tf::Tensor(-std::sqrt(5.0) * 0.2));
  const std::vector<double> gram = tf::matmul(u, u, false, true).numpy<double>();
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) {
      CAPTURE(i, j);
      if (i == j) {
        CHECK(gram[static_cast<size_t>(i * 3 + j)] > 0.4);
        CHECK(gram[static_cast<size_t>(i * 3 + j)] < 1.3);
      } else {
        CHECK(std::abs(gram[static_cast<size_t>(i * 3 + j)]) < 0.35);
      }
    }
  // Slots: a Muon-updated matrix's velocity is an unused scalar, an AdamW-updated one's is full.
  const auto slots = muon.slots();
  REQUIRE(slots.size() == 1);
  CHECK(slots[0].second[0].shape() == tf::TensorShape({3, 5}));
  CHECK(slots[0].second[1].shape() == tf::TensorShape({}));
  CHECK(muon.slot_shape("velocity", tf::Variable(tf::zeros({4}))) == tf::TensorShape({4}));
  CHECK(muon.slot_shape("velocity", tf::Variable(tf::zeros({4, 2}), "embedding/embeddings")) ==
        tf::TensorShape({4, 2}));

  // keras.optimizers.Muon(learning_rate=0.05).get_config() (Keras 3.15).
  using Config = K::saving::Config;
  const Config want = Config::parse(R"({"name": "muon", "learning_rate": 0.05000000074505806,
"weight_decay": 0.004, "clipnorm": null, "global_clipnorm": null, "clipvalue": null,
"use_ema": false, "ema_momentum": 0.99, "ema_overwrite_frequency": null,
"loss_scale_factor": null, "gradient_accumulation_steps": null, "adam_beta_1": 0.9,
"adam_beta_2": 0.999, "epsilon": 1e-07, "exclude_layers": [], "muon_a": 3.4445,
"muon_b": -4.775, "muon_c": 2.0315, "adam_lr_ratio": 1, "momentum": 0.95, "ns_steps": 5,
"nesterov": true, "exclude_embeddings": true, "adam_weight_decay": 0.004, "rms_rate": 0.2})");
  const Config got = opt::get_config(opt::Muon(0.05, {}, {.name = "muon"}));
  CHECK(got == want);
  // Read back, options included.
  const opt::Optimizer back = opt::from_config("Muon", want);
  CHECK(opt::get_config(back) == want);
  const opt::Muon custom(0.01, {.exclude_layers = {"head", "out.*"},
                                .adam_lr_ratio = 0.5,
                                .rms_rate = std::nullopt,
                                .adam_weight_decay = std::nullopt});
  const Config cc = opt::get_config(custom);
  CHECK(cc["exclude_layers"] == Config::parse(R"(["head", "out.*"])"));
  CHECK(cc["adam_lr_ratio"] == 0.5);
  CHECK(cc["rms_rate"].is_null());
  CHECK(opt::get_config(opt::from_config("Muon", cc)) == cc);
  CHECK(opt::get("muon").name() == "Muon");
}

TEST_CASE("Muon: bad arguments are errors naming the optimizer", "[keras][cpu]") {
  require_error([] { opt::Muon(0.1, {}, {.weight_decay = 0.1}); },
                {"[Muon] set Muon's weight decays in MuonOptions"});
  require_error([] { opt::Muon(0.1, {.adam_beta_1 = 1.0}); },
                {"[Muon] adam_beta_1 must be in [0, 1), got 1"});
  require_error([] { opt::Muon(0.1, {.exclude_layers = {"(unclosed"}}); },
                {"[Muon] exclude_layers entry \"(unclosed\" is not a regular expression"});
  require_error([] { opt::Muon(0.1, {.ns_steps = -1}); }, {"[Muon] ns_steps must be >= 0, got -1"});
  require_error(
      [] { opt::from_config("Muon", K::saving::Config::parse(R"({"exclude_layers": "out"})")); },
      {"Muon config key \"exclude_layers\" must be a list of strings"});
}
