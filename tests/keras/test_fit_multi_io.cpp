// fit, evaluate and predict of functional models with several inputs and outputs (Keras 3's
// "Models with multiple inputs and outputs": the ticket-ranking model, at small sizes):
// compile's per-output losses, loss weights and metrics in list and map forms, the History
// keys and values, sample weights, Datasets, tracing, a MirroredStrategy and every error.
//
// Reference values: Keras 3.15 / TF 2.21 (CPU), the same model (build() below: Input names
// title/body/tags, Embedding(10, 3), LSTM(4), LSTM(2), Concatenate, Dense(1, name="priority"),
// Dense(3, name="department")), the same data (data() below) and weights: Keras layer i's
// weight j set to formula(shape, 7 + i + j, 11, 5) with model.layers' order (title 0, body 1,
// emb_title 2, emb_body 3, lstm_title 4, lstm_body 5, tags 6, concat 7, priority 8,
// department 9). Each block names the Keras calls that produced its literals. Keras was run
// with compile(run_eagerly=True): its traced train step weights the "<output>_loss" trackers
// by the static batch size, which is None in a tf.function, so those logs became unweighted
// batch means there (a Keras artifact; tapeflow weights them by the batch size as the "loss"
// tracker, which Keras' eager step does too). Every other value is the same either way.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/dataset.h"
#include "distribute/strategy.h"
#include "keras/functional.h"
#include "keras/layers.h"
#include "keras/layers_merge.h"
#include "keras/layers_more.h"
#include "keras/layers_recurrent.h"
#include "keras/losses.h"
#include "keras/model.h"
#include "keras/optimizers.h"
#include "ops/factory.h"
#include "ops/movement.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
namespace K = tapeflow::keras;
namespace L = tapeflow::keras::layers;
using tf::testing::check_values;
using tf::testing::require_error;

namespace {

using History = std::map<std::string, std::vector<double>>;
constexpr int64_t kSamples = 8;

// ((k * m) % mod - off) / 10 for k = 0, 1, ... (numpy: the same formula, .astype("float32")).
tf::Tensor formula(const tf::TensorShape& s, int m, int mod, int off) {
  std::vector<double> v;
  for (int64_t k = 0; k < s.num_elements(); ++k)
    v.push_back(static_cast<double>((k * m) % mod - off) / 10.0);
  return tf::cast(tf::convert_to_tensor(v, s), tf::float32);
}

// The guide's model, small: title and body word ids, tags; priority and department outputs.
K::Model build() {
  auto title = K::Input({4}, tf::int32, "title");
  auto body = K::Input({5}, tf::int32, "body");
  auto tags = K::Input({3}, std::nullopt, "tags");
  auto t = L::Embedding(10, 3, {.name = "emb_title"})(title);
  auto b = L::Embedding(10, 3, {.name = "emb_body"})(body);
  t = L::LSTM(4, {.name = "lstm_title"})(t);
  b = L::LSTM(2, {.name = "lstm_body"})(b);
  auto x = L::Concatenate(-1, "concat")({t, b, tags});
  auto priority = L::Dense(1, {.name = "priority"})(x);
  auto department = L::Dense(3, {.name = "department"})(x);
  K::Model model({title, body, tags}, {priority, department});
  const std::vector<std::pair<std::string, int>> keras_index = {
      {"emb_title", 2}, {"emb_body", 3}, {"lstm_title", 4},
      {"lstm_body", 5}, {"priority", 8}, {"department", 9}};
  for (const auto& [name, i] : keras_index) {
    K::Layer layer = model.get_layer(name);
    std::vector<tf::Tensor> ws;
    int j = 0;
    for (const tf::Tensor& w : layer.get_weights())
      ws.push_back(formula(w.shape(), 7 + i + j++, 11, 5));
    layer.set_weights(ws);
  }
  return model;
}

struct Data {
  tf::Tensor title, body, tags, priority, department, sample_weight;
  std::vector<tf::Tensor> xs() const { return {title, body, tags}; }
  std::vector<tf::Tensor> ys() const { return {priority, department}; }
  std::map<std::string, tf::Tensor> x_map() const {
    return {{"title", title}, {"body", body}, {"tags", tags}};
  }
  std::map<std::string, tf::Tensor> y_map() const {
    return {{"priority", priority}, {"department", department}};
  }
};

// numpy: title = (arange(32) * 3 % 10).reshape(8, 4), body = ((arange(40) * 7 + 1) % 10)
// .reshape(8, 5) (int32), tags = formula((8, 3), 5, 7, 3), priority = (k % 3 == 0) (8, 1),
// department = eye(3)[k % 3], sample_weight = linspace(0.5, 2, 8) (float32).
Data data() {
  std::vector<int32_t> title, body;
  std::vector<float> pr, dep, sw;
  for (int32_t k = 0; k < kSamples * 4; ++k) title.push_back(k * 3 % 10);
  for (int32_t k = 0; k < kSamples * 5; ++k) body.push_back((k * 7 + 1) % 10);
  for (int64_t k = 0; k < kSamples; ++k) {
    pr.push_back(k % 3 == 0 ? 1.0f : 0.0f);
    for (int64_t c = 0; c < 3; ++c) dep.push_back(k % 3 == c ? 1.0f : 0.0f);
    sw.push_back(static_cast<float>(0.5 + 1.5 * static_cast<double>(k) / 7.0));
  }
  return {tf::constant(title, tf::TensorShape{kSamples, 4}),
          tf::constant(body, tf::TensorShape{kSamples, 5}),
          formula({kSamples, 3}, 5, 7, 3),
          tf::constant(pr, tf::TensorShape{kSamples, 1}),
          tf::constant(dep, tf::TensorShape{kSamples, 3}),
          tf::constant(sw, tf::TensorShape{kSamples})};
}

void check_history(const K::History& got, const History& want, double rtol = 2e-5) {
  std::vector<std::string> got_keys, want_keys;
  for (const auto& [k, v] : got.history) got_keys.push_back(k);
  for (const auto& [k, v] : want) want_keys.push_back(k);
  REQUIRE(got_keys == want_keys);
  for (const auto& [k, v] : want) {
    INFO(k);
    REQUIRE(got.history.at(k).size() == v.size());
    for (size_t e = 0; e < v.size(); ++e)
      CHECK(got.history.at(k)[e] == Approx(v[e]).epsilon(rtol).margin(1e-6));
  }
}

void check_list(const std::vector<double>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i)
    CHECK(got[i] == Approx(want[i]).epsilon(2e-5).margin(1e-6));
}

K::losses::Loss bce() {
  return K::losses::BinaryCrossentropy(true);
}
K::losses::Loss cce() {
  return K::losses::CategoricalCrossentropy(true);
}

// Keras: compile(SGD(0.1), loss=[BinaryCrossentropy(from_logits=True),
// CategoricalCrossentropy(from_logits=True)], loss_weights=[1.0, 0.2],
// metrics=[["mae"], ["accuracy"]]); fit([title, body, tags], [priority, department],
// batch_size=4, epochs=2, shuffle=False, validation_split=0.25) (batches of 4 and 2).
const History kHistoryA = {
    {"department_accuracy", {0.166666672, 0.166666672}},
    {"department_loss", {1.11315489, 1.11260998}},
    {"loss", {0.831284821, 0.827954233}},
    {"priority_loss", {0.608653843, 0.605432212}},
    {"priority_mae", {0.751182079, 0.785589755}},
    {"val_department_accuracy", {0.5, 0.5}},
    {"val_department_loss", {1.21567965, 1.21736574}},
    {"val_loss", {1.03384757, 1.03993273}},
    {"val_priority_loss", {0.790711641, 0.796459556}},
    {"val_priority_mae", {1.01637113, 1.0524261}},
};
// Keras: the model's weights after that fit, layer by layer (get_weights()).
const std::vector<std::tuple<std::string, int, std::vector<double>>> kWeightsA = {
    {"emb_title", 0, {-0.500862896,  0.399136811,    0.199136049,    -0.00302442652,
                      -0.203031555,  -0.403031588,   0.500147462,    0.300147891,
                      0.100147925,   -0.102166519,   -0.302168846,   -0.502169728,
                      0.398877352,   0.198872596,    -0.00113082817, -0.200014889,
                      -0.400011808,  0.499987632,    0.30018726,     0.100185856,
                      -0.0998165607, -0.302799761,   -0.502820611,   0.397164911,
                      0.19837901,    -0.00162325124, -0.20162338,    -0.400150299,
                      0.499845475,   0.299838245}},  // emb_title[0] (10, 3)
    {"emb_body", 0, {-0.500052989,   0.500521541,     0.39936614,      0.299983174,
                     0.200158149,    0.0998073667,    -0.000121816134, -0.0994342417,
                     -0.200831249,   -0.300052315,    -0.399680585,    -0.500311375,
                     0.499913067,    0.400978476,     0.298529029,     0.199928299,
                     0.100411646,    -0.000549767108, -0.100018777,    -0.199828953,
                     -0.300178081,   -0.399920464,    -0.499405205,    0.499176651,
                     0.399961889,    0.300262839,     0.199665487,     0.0999186337,
                     0.000673224335, -0.101356924}},  // emb_body[0] (10, 3)
    {"lstm_title", 0, {-0.500210822, -0.500014067, -0.499866724, -0.500167787, -0.49998346,
                       -0.499933422, -0.499967396, -0.499874026, -0.501567006, -0.499389201,
                       -0.499924898, -0.500816762, -0.5002895,   -0.500073075, -0.499727279,
                       -0.500028849, -0.500619054, -0.500258327, -0.499403,    -0.499702722,
                       -0.499975145, -0.500188351, -0.499648958, -0.499444813, -0.50143826,
                       -0.501332462, -0.498710215, -0.50377053,  -0.500720441, -0.500554502,
                       -0.499014139, -0.499394685, -0.500567615, -0.500033736, -0.499594599,
                       -0.499735624, -0.499888897, -0.500012279, -0.499891073, -0.499552131,
                       -0.502402067, -0.500589609, -0.498738855, -0.502154827, -0.500423551,
                       -0.500023603, -0.499523699, -0.499414623}},  // lstm_title[0] (3, 16)
    {"lstm_title",
     1,
     {-0.500006616,    -0.400000125,   -0.300039113,  -0.200066194,    -0.0999830514,
      -8.70304302e-06, 0.0999912024,   0.199947685,   0.300448,        0.400005996,
      0.49986583,      -0.499759942,   -0.399981529,  -0.300004989,    -0.200027481,
      -0.100030996,    0.000114512863, 0.100038588,   0.199843138,     0.299874187,
      0.400063485,     0.499994874,    -0.500057876,  -0.400167674,    -0.298772097,
      -0.199920446,    -0.100317776,   0.00103816809, 0.100151688,     0.200026944,
      0.299853325,     0.399916023,    0.500226855,   -0.499932438,    -0.400243104,
      -0.300181508,    -0.199892968,   -0.0999990702, -9.96695599e-05, 0.0997370854,
      0.201882616,     0.300149024,    0.399557114,   0.501702607,     -0.499741882,
      -0.39995116,     -0.300219506,   -0.200104356,  -0.100396872,    -0.000114040195,
      0.100276165,     0.200074419,    0.299875647,   0.399971902,     0.500137329,
      -0.499738544,    -0.4016352,     -0.300216943,  -0.199721426,    -0.102038749,
      -0.00037926645,  0.0998975113,   0.200286135,   0.300069124}},  // lstm_title[1] (4, 16)
    {"lstm_title",
     2,
     {-0.497909039, -0.299407661, -0.101475917, 0.0993647054, 0.3007797, 0.500113249, -0.400752515,
      -0.201504648, 0.0111673661, 0.200999722, 0.398792416, -0.48820588, -0.297904462,
      -0.0994851142, 0.0985214561, 0.299763501}},  // lstm_title[2] (16,)
    {"lstm_body",
     0,
     {-0.499937832,  -0.399840236,   -0.30005762,  -0.200017303, -0.0996943265,
      -0.0008958322, 0.100089386,    0.200111181,  0.300128013,  0.400120974,
      0.499978155,   -0.500014305,   -0.399993211, -0.300770938, -0.199901164,
      -0.0999608934, 4.82692012e-05, 0.0998867676, 0.200112537,  0.30000937,
      0.39945358,    0.499141157,    -0.499888361, -0.400019228}},  // lstm_body[0] (3, 8)
    {"lstm_body",
     1,
     {-0.500053704, -0.300119221, -0.10004735, 0.0998975635, 0.300302714, 0.501428008, -0.400053471,
      -0.20009765, -2.0929112e-05, 0.199937254, 0.399976671, -0.500060797, -0.299847066,
      -0.0992685258, 0.0999835581, 0.299942255}},  // lstm_body[1] (2, 8)
    {"lstm_body",
     2,
     {-0.499304116, -0.199161217, 0.100399449, 0.400632501, -0.403010398, -0.110649489, 0.200560465,
      0.500573516}},  // lstm_body[2] (8,)
    {"priority",
     0,
     {-0.507008493, -0.113379076, 0.283721954, -0.393032908, 0.00822921284, 0.404163241,
      -0.313189328, 0.103210188, 0.519815683}},  // priority[0] (9, 1)
    {"priority", 1, {-0.552963734}},             // priority[1] (1,)
    {"department", 0, {-0.50097847,  0.000603135326, 0.500375271,    -0.101413958,   0.400577515,
                       -0.199163511, 0.298503488,    -0.299315631,   0.200812146,    -0.400330842,
                       0.10089507,   -0.500564277,   0.000120513607, 0.500473857,    -0.100594342,
                       0.400019169,  -0.200058416,   0.300039321,    -0.302705944,   0.199316129,
                       -0.396610171, 0.100278549,    -0.497679561,   -0.00259900885, 0.503709197,
                       -0.102551281, 0.398842096}},                 // department[0] (9, 3)
    {"department", 1, {-0.500895977, 0.0953874961, -0.394491524}},  // department[1] (3,)
};
// Keras: then evaluate([title, body, tags], [priority, department], batch_size=4) (loss,
// priority_loss, department_loss, department_accuracy, priority_mae) and
// predict([title, body, tags], batch_size=3).
const std::vector<double> kEvaluateA = {0.877794385, 0.650200427, 1.13796973, 0.25, 0.879179478};
const std::vector<double> kPriorityA = {-0.404933006, -0.358703971, -0.475228161, -0.316375434,
                                        -0.727246642, -0.646096706, -0.679939985, -0.424912184};
const std::vector<double> kDepartmentA = {
    -0.350726217, -0.147490382, -0.199809432, -0.302177995, -0.179510266, -0.133643866,
    -0.415058315, 0.133710235,  -0.15444158,  -0.263491154, 0.0690865815, -0.156141952,
    -0.66021961,  0.113599561,  -0.446702689, -0.583690822, 0.0800429732, -0.45348829,
    -0.613514483, 0.0323648751, -0.435072452, -0.365933776, -0.126653433, -0.132312626};

void compile_a(K::Model& model, bool run_eagerly) {
  model.compile(K::optimizers::SGD(0.1), {bce(), cce()}, {1.0, 0.2}, {{"mae"}, {"accuracy"}},
                {.run_eagerly = run_eagerly});
}

void check_weights_a(const K::Model& model) {
  for (const auto& [name, j, want] : kWeightsA) {
    INFO(name << " weight " << j);
    check_values(model.get_layer(name).get_weights()[static_cast<size_t>(j)], want, 1e-4, 1e-5);
  }
}

}  // namespace

TEST_CASE("fit multi io: the ticket model's list forms match Keras 3.15", "[cpu][keras]") {
  const Data d = data();
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(device.to_string());
    for (bool eager : {false, true}) {
      INFO(device.to_string() << (eager ? " eager" : " traced"));
      K::Model model = build();
      compile_a(model, eager);
      CHECK(model.metrics_names() ==
            std::vector<std::string>{"loss", "priority_loss", "department_loss",
                                     "department_accuracy", "priority_mae"});
      const K::History h = model.fit(
          d.xs(), d.ys(),
          {.epochs = 2, .batch_size = 4, .verbose = 0, .validation_split = 0.25, .shuffle = false});
      check_history(h, kHistoryA);
      check_weights_a(model);
      check_list(model.evaluate(d.xs(), d.ys(), {.batch_size = 4, .verbose = 0}), kEvaluateA);
      const std::vector<tf::Tensor> pred = model.predict(d.xs(), {.batch_size = 3});
      REQUIRE(pred.size() == 2);
      CHECK(pred[0].shape() == tf::TensorShape{kSamples, 1});
      CHECK(pred[1].shape() == tf::TensorShape{kSamples, 3});
      check_values(pred[0], kPriorityA, 1e-4, 1e-5);
      check_values(pred[1], kDepartmentA, 1e-4, 1e-5);
    }
  }
}

TEST_CASE("fit multi io: a Dataset of flat elements and validation_data equal the tensor forms",
          "[cpu][keras]") {
  const Data d = data();
  auto rows = [](const std::vector<tf::Tensor>& v, int64_t begin, int64_t count) {
    std::vector<tf::Tensor> out;
    for (const tf::Tensor& t : v) {
      std::vector<int64_t> b(static_cast<size_t>(t.rank()), 0), s = t.shape().dims();
      b[0] = begin;
      s[0] = count;
      out.push_back(tf::slice(t, b, s));
    }
    return out;
  };
  // The first 6 samples train, the last 2 validate: validation_split=0.25's split.
  std::vector<tf::Tensor> train = rows(d.xs(), 0, 6), targets = rows(d.ys(), 0, 6);
  std::vector<tf::Tensor> flat = train;
  flat.insert(flat.end(), targets.begin(), targets.end());
  const auto ds = tf::data::Dataset::from_tensor_slices(flat).batch(4);
  SECTION("validation_data tensors") {
    K::Model model = build();
    compile_a(model, false);
    const K::History h =
        model.fit(ds, {.epochs = 2,
                       .validation_data = K::ValidationData(rows(d.xs(), 6, 2), rows(d.ys(), 6, 2)),
                       .verbose = 0});
    check_history(h, kHistoryA);
    check_weights_a(model);
  }
  SECTION("a validation Dataset, and predict_outputs of a Dataset") {
    std::vector<tf::Tensor> vflat = rows(d.xs(), 6, 2);
    const auto vys = rows(d.ys(), 6, 2);
    vflat.insert(vflat.end(), vys.begin(), vys.end());
    K::Model model = build();
    compile_a(model, false);
    const K::History h =
        model.fit(ds, {.epochs = 2,
                       .validation_data = tf::data::Dataset::from_tensor_slices(vflat).batch(4),
                       .verbose = 0});
    check_history(h, kHistoryA);
    // The elements' extra components (targets) are ignored, as Keras' predict ignores y.
    std::vector<tf::Tensor> all = d.xs();
    for (const tf::Tensor& y : d.ys()) all.push_back(y);
    const auto pred = model.predict_outputs(tf::data::Dataset::from_tensor_slices(all).batch(3));
    REQUIRE(pred.size() == 2);
    check_values(pred[0], kPriorityA, 1e-4, 1e-5);
    check_values(pred[1], kDepartmentA, 1e-4, 1e-5);
    check_list(model.evaluate(tf::data::Dataset::from_tensor_slices(all).batch(4), {.verbose = 0}),
               kEvaluateA);
  }
}

// Keras: compile(SGD(0.1), loss={"priority": "mse", "department":
// CategoricalCrossentropy(from_logits=True)}, loss_weights={"priority": 1.0, "department":
// 0.5}, metrics={"department": ["accuracy"], "priority": ["mae"]}); fit({"title": title,
// "body": body, "tags": tags}, {"priority": priority, "department": department},
// batch_size=3, epochs=2, shuffle=False) (batches of 3, 3 and 2); then the priority kernel,
// the department bias and evaluate(the same dicts, batch_size=4).
TEST_CASE("fit multi io: the map forms match Keras 3.15 dicts", "[cpu][keras]") {
  const History want = {
      {"department_accuracy", {0.125, 0.125}},      {"department_loss", {1.13739777, 1.1308192}},
      {"loss", {1.23070538, 0.864949942}},          {"priority_loss", {0.662006497, 0.299540341}},
      {"priority_mae", {0.665925026, 0.418141007}},
  };
  const Data d = data();
  K::Model model = build();
  model.compile(K::optimizers::SGD(0.1),
                std::map<std::string, K::LossSpec>{{"priority", "mse"}, {"department", cce()}},
                std::map<std::string, double>{{"department", 0.5}},
                std::map<std::string, std::vector<K::MetricSpec>>{{"department", {"accuracy"}},
                                                                  {"priority", {"mae"}}});
  const K::History h = model.fit(d.x_map(), d.y_map(),
                                 {.epochs = 2, .batch_size = 3, .verbose = 0, .shuffle = false});
  check_history(h, want);
  check_values(model.get_layer("priority").get_weights()[0],
               {-0.486752748, -0.0350207873, 0.399820805, -0.512657464, -0.0967845321, 0.357451797,
                -0.261446446, 0.113873653, 0.500485361},
               1e-4, 1e-5);
  check_values(model.get_layer("department").get_weights()[1],
               {-0.46681121, 0.09536466, -0.428553432}, 1e-4, 1e-5);
  check_list(model.evaluate(d.x_map(), d.y_map(), {.batch_size = 4, .verbose = 0}),
             {0.807047844, 0.244431794, 1.12523222, 0.125, 0.422425926});
  const auto pred = model.predict(d.x_map());
  const auto pred_list = model.predict(d.xs());
  REQUIRE(pred.size() == 2);
  tf::testing::check_close(pred[0], pred_list[0], 0, 0);
  tf::testing::check_close(pred[1], pred_list[1], 0, 0);
}

// Keras: compile(SGD(0.1), loss=["mse", "mse"], loss_weights=[0.3, 1.0],
// metrics=[["mae"], ["mse"]]); fit([title, body, tags], [priority, department],
// sample_weight=sample_weight, batch_size=3, epochs=2, shuffle=False) (one array: every
// output's loss takes it); the priority kernel, the department bias; then evaluate(...,
// sample_weight=[sample_weight, 0.5 * ones(8)], batch_size=4).
TEST_CASE("fit multi io: shared and per output sample weights match Keras 3.15", "[cpu][keras]") {
  const History want = {
      {"department_loss", {0.710933089, 0.502409339}},
      {"department_mse", {0.563071489, 0.392810166}},
      {"loss", {1.00406027, 0.686963558}},
      {"priority_loss", {0.977090597, 0.615180671}},
      {"priority_mae", {0.766336501, 0.529036164}},
  };
  const Data d = data();
  for (bool dataset : {false, true}) {
    INFO((dataset ? "a Dataset with one shared weight" : "tensors"));
    K::Model model = build();
    model.compile(K::optimizers::SGD(0.1), {"mse", "mse"}, {0.3, 1.0}, {{"mae"}, {"mse"}});
    K::History h;
    if (dataset) {
      h = model.fit(tf::data::Dataset::from_tensor_slices(
                        {d.title, d.body, d.tags, d.priority, d.department, d.sample_weight})
                        .batch(3),
                    {.epochs = 2, .verbose = 0});
    } else {
      h = model.fit(d.xs(), d.ys(),
                    {.epochs = 2,
                     .batch_size = 3,
                     .verbose = 0,
                     .shuffle = false,
                     .sample_weight = d.sample_weight});
    }
    check_history(h, want);
    check_values(model.get_layer("priority").get_weights()[0],
                 {-0.484419763, -0.0559281074, 0.364215404, -0.463117748, -0.0493400618,
                  0.382507682, -0.261613846, 0.107911393, 0.489685953},
                 1e-4, 1e-5);
    check_values(model.get_layer("department").get_weights()[1],
                 {-0.169430703, 0.285502136, -0.213821918}, 1e-4, 1e-5);
    const std::vector<double> eval =
        model.evaluate(d.xs(), d.ys(),
                       {.batch_size = 4,
                        .verbose = 0,
                        .sample_weights = {d.sample_weight, tf::fill({kSamples}, 0.5f)}});
    check_list(eval, {0.301237792, 0.469814062, 0.160293579, 0.320587158, 0.449411809});
  }
}

TEST_CASE("fit multi io: one loss serves every output and weights of 1 change nothing",
          "[cpu][keras]") {
  // Keras' rule: compile(loss="mse") on a model with two outputs is ["mse", "mse"].
  const Data d = data();
  K::Model one = build(), two = build();
  one.compile(K::optimizers::SGD(0.1), "mse");
  two.compile(K::optimizers::SGD(0.1), {"mse", "mse"}, {1.0, 1.0});
  CHECK(one.metrics_names() ==
        std::vector<std::string>{"loss", "priority_loss", "department_loss"});
  const K::FitOptions opts{.epochs = 2, .batch_size = 3, .verbose = 0, .shuffle = false};
  const K::History h1 = one.fit(d.xs(), d.ys(), opts), h2 = two.fit(d.xs(), d.ys(), opts);
  for (const auto& [k, v] : h2.history) {
    INFO(k);
    REQUIRE(h1.history.at(k).size() == v.size());
    for (size_t e = 0; e < v.size(); ++e) CHECK(h1.history.at(k)[e] == v[e]);
    // The total is the sum of the outputs' losses.
    if (k == "loss")
      for (size_t e = 0; e < v.size(); ++e)
        CHECK(v[e] ==
              Approx(h2.history.at("priority_loss")[e] + h2.history.at("department_loss")[e])
                  .epsilon(1e-6));
  }
}

TEST_CASE("fit multi io: several inputs and one output log as a single output model",
          "[cpu][keras]") {
  // Two inputs concatenated into one Dense equal one Dense on the concatenated input.
  auto a = K::Input({2}, std::nullopt, "a");
  auto b = K::Input({3}, std::nullopt, "b");
  auto out = L::Dense(1, {.name = "out"})(L::Concatenate()({a, b}));
  K::Model two_inputs({a, b}, {out});
  K::Sequential one_input({L::Dense(1, {.input_shape = {5}})});
  const tf::Tensor kernel = formula({5, 1}, 7, 11, 5), bias = formula({1}, 3, 5, 2);
  two_inputs.get_layer("out").set_weights({kernel, bias});
  one_input.set_weights({kernel, bias});
  const tf::Tensor xa = formula({10, 2}, 5, 13, 6), xb = formula({10, 3}, 3, 7, 2);
  const tf::Tensor y = formula({10, 1}, 2, 9, 4);
  two_inputs.compile(K::optimizers::SGD(0.1), "mse", {"mae"});
  one_input.compile(K::optimizers::SGD(0.1), "mse", {"mae"});
  const K::FitOptions opts{.epochs = 3, .batch_size = 4, .verbose = 0, .shuffle = false};
  const K::History h2 = two_inputs.fit({xa, xb}, {y}, opts);
  const K::History h1 = one_input.fit(tf::concat({xa, xb}, 1), y, opts);
  REQUIRE(h2.history.size() == 2);
  for (const std::string k : {"loss", "mae"})
    for (size_t e = 0; e < 3; ++e)
      CHECK(h2.history.at(k)[e] == Approx(h1.history.at(k)[e]).epsilon(1e-6));
  tf::testing::check_close(two_inputs.get_layer("out").get_weights()[0], one_input.get_weights()[0],
                           1e-6, 1e-7);
  // predict of a single output model gives one tensor, from a Dataset too.
  const tf::Tensor p = two_inputs.predict(tf::data::Dataset::from_tensor_slices({xa, xb}).batch(4));
  tf::testing::check_close(p, two_inputs.predict({xa, xb})[0], 0, 0);
  // Braced lists of two tensors on both sides (a std::map's iterator-pair constructor made
  // fit({x1, x2}, {y1, y2}) ambiguous): a model with two outputs, fit and evaluate.
  auto o2 = L::Dense(1, {.name = "o2"})(b);
  K::Model two_outputs({a, b}, {out, o2});
  two_outputs.compile(K::optimizers::SGD(0.1), "mse");
  const K::History h = two_outputs.fit({xa, xb}, {y, y}, opts);
  CHECK(h.history.at("loss").size() == 3);
  CHECK(two_outputs.evaluate({xa, xb}, {y, y}, {.verbose = 0}).size() == 3);
}

TEST_CASE("fit multi io: under a MirroredStrategy the ticket model trains as on one device",
          "[cpu][keras][multi_device]") {
  if (!tf::testing::split_cpu_in_two()) return;
  const Data d = data();
  tf::distribute::MirroredStrategy strategy({"/cpu:0", "/cpu:1"});
  std::optional<K::Model> model;
  K::History h;
  {
    auto scope = strategy.scope();
    model.emplace(build());
    compile_a(*model, false);
    // Batches of 4 and 2 split 2 + 2 and 1 + 1 over the replicas.
    h = model->fit(
        d.xs(), d.ys(),
        {.epochs = 2, .batch_size = 4, .verbose = 0, .validation_split = 0.25, .shuffle = false});
  }
  check_history(h, kHistoryA, 1e-4);
  check_weights_a(*model);
}

TEST_CASE("fit multi io: mismatched losses metrics data and names are errors", "[cpu][keras]") {
  const Data d = data();
  K::Model model = build();
  const auto sgd = [] { return K::optimizers::SGD(0.1); };
  // compile: counts and names, naming what was given and what the model has.
  require_error([&] { model.compile(sgd(), {"mse"}); },
                {"compile", "`loss` has 1 entries", "2 outputs ['priority', 'department']"});
  require_error(
      [&] {
        model.compile(sgd(), {"mse", "mse"}, {1.0});
      },
      {"`loss_weights` has 1 entries", "2 outputs"});
  require_error(
      [&] {
        model.compile(sgd(), {"mse", "mse"}, {}, {{"mae"}});
      },
      {"`metrics` has 1 entries", "2 outputs"});
  require_error(
      [&] {
        model.compile(sgd(),
                      std::map<std::string, K::LossSpec>{{"priority", "mse"}, {"nope", "mse"}});
      },
      {"Expected keys ['priority', 'department'] in loss dict",
       "loss.keys()=['nope', 'priority']"});
  require_error(
      [&] {
        model.compile(sgd(), {"mse", "mse"}, std::map<std::string, double>{{"prio", 2.0}});
      },
      {"`loss_weights` names 'prio'", "['priority', 'department']"});
  require_error([&] { model.compile(sgd(), "mse", {"mae"}); },
                {"model 'functional", "has 2 outputs", "give its metrics per output"});
  require_error(
      [&] {
        model.compile(sgd(), {"mse", "mse"}, {}, {}, {.weighted_metrics = {"mae"}});
      },
      {"weighted_metrics", "several outputs"});
  // Two metrics logged under one name.
  require_error(
      [&] {
        model.compile(sgd(), {"mse", "mse"}, {}, {{"mae", "mae"}, {}});
      },
      {"both logged as 'priority_mae'"});

  model.compile(sgd(), {"mse", "mse"});
  const K::FitOptions quiet{.verbose = 0};
  require_error(
      [&] {
        model.fit({d.title, d.body}, d.ys(), quiet);
      },
      {"fit", "expects 3 input(s) ['title', 'body', 'tags']", "received 2 input"});
  require_error([&] { model.fit(d.xs(), {d.priority}, quiet); },
                {"2 output(s) ['priority', 'department']", "received 1 target"});
  require_error(
      [&] {
        model.fit(
            std::map<std::string, tf::Tensor>{
                {"title", d.title}, {"body", d.body}, {"tagz", d.tags}},
            d.y_map(), quiet);
      },
      {"Missing data for input \"tags\"", "keys ['body', 'tagz', 'title']",
       "['title', 'body', 'tags']"});
  require_error(
      [&] {
        auto ys = d.y_map();
        ys["extra"] = d.priority;
        model.fit(d.x_map(), ys, quiet);
      },
      {"key 'extra'", "no output"});
  require_error(
      [&] {
        model.fit({d.title, d.body, tf::slice(d.tags, {0, 0}, {7, 3})}, d.ys(), quiet);
      },
      {"same number of samples", "input 'tags' is (7, 3)"});
  require_error(
      [&] {
        model.fit(d.xs(), d.ys(),
                  {.verbose = 0,
                   .sample_weight = d.sample_weight,
                   .sample_weights = {d.sample_weight, d.sample_weight}});
      },
      {"not both"});
  require_error(
      [&] { model.fit(d.xs(), d.ys(), {.verbose = 0, .sample_weights = {d.sample_weight}}); },
      {"one tensor per output", "got 1"});
  require_error(
      [&] {
        model.fit(d.xs(), d.ys(), {.verbose = 0, .class_weight = {{0, 2.0}}});
      },
      {"class_weight", "single output"});
  // A Dataset whose elements do not have the model's components.
  require_error(
      [&] {
        model.fit(
            tf::data::Dataset::from_tensor_slices({d.title, d.body, d.tags, d.priority}).batch(4),
            quiet);
      },
      {"expects batches of its 3 inputs", "then its 2 targets", "got 4 components"});
  // predict of a model with two outputs gives every output, never one tensor.
  require_error(
      [&] { (void)model.predict(tf::data::Dataset::from_tensor_slices(d.xs()).batch(4)); },
      {"has 2 outputs", "predict_outputs"});
}

TEST_CASE("fit multi io: output masks weigh each output's loss", "[cpu][keras]") {
  // Keras 3.15.1: ids = Input((4,), int32), aux = Input((1,)); e = Embedding(5, 2,
  // mask_zero=True) with rows [0, 0], [1, 1], ...; o1 = Dense(1, ones)(e), o2 = Dense(1,
  // ones)(e); Model([ids, aux], [o1, o2]).compile("sgd", ["mse", "mse"]).evaluate(
  // [[[1, 2, 0, 0], [3, 0, 0, 0]], zeros], [zeros(2, 4, 1)] * 2) -> [8.0, 4.0, 4.0]: each loss
  // is the mean over the 3 kept steps (the unmasked mean would be 1.5).
  auto ids = K::Input({4}, tf::int32, "ids");
  auto aux = K::Input({1}, std::nullopt, "aux");
  L::Embedding emb(5, 2, {.mask_zero = true, .name = "emb"});
  auto e = emb(ids);
  auto o1 = L::Dense(1, {.name = "o1"})(e);
  auto o2 = L::Dense(1, {.name = "o2"})(e);
  K::Model m({ids, aux}, {o1, o2});
  m.compile(K::optimizers::SGD(0.1), {"mse", "mse"});
  emb.set_weights(
      {tf::convert_to_tensor(std::vector<float>{0, 0, 1, 1, 1, 1, 1, 1, 1, 1}, {5, 2})});
  for (const char* head : {"o1", "o2"})
    m.get_layer(head).set_weights({tf::ones({2, 1}), tf::zeros({1})});
  const tf::Tensor x = tf::convert_to_tensor(std::vector<int32_t>{1, 2, 0, 0, 3, 0, 0, 0}, {2, 4});
  const tf::Tensor a = tf::zeros({2, 1}), y = tf::zeros({2, 4, 1});
  const std::vector<double> got = m.evaluate({x, a}, {y, y}, {.verbose = 0});
  REQUIRE(got.size() == 3);
  CHECK(got[0] == Approx(8.0));
  CHECK(got[1] == Approx(4.0));
  CHECK(got[2] == Approx(4.0));
  // train_on_batch and test_on_batch take one input and one output: a clear error.
  tf::testing::require_error([&] { (void)m.train_on_batch(x, y); },
                             {"train_on_batch", "several inputs or outputs"});
  tf::testing::require_error([&] { (void)m.test_on_batch(x, y); },
                             {"test_on_batch", "several inputs or outputs"});
}

TEST_CASE("fit multi io: one validation sample weight is shared by every output", "[cpu][keras]") {
  // Keras 3.15 accepts validation_data=(x, [y1, y2], w) with one w for both outputs.
  auto in = K::Input({3}, std::nullopt, "a");
  K::Model m({in}, {L::Dense(1, {.name = "o1"})(in), L::Dense(2, {.name = "o2"})(in)});
  m.compile(K::optimizers::SGD(0.1), {"mse", "mse"});
  const tf::Tensor x = tf::ones({4, 3}), y1 = tf::ones({4, 1}), y2 = tf::ones({4, 2});
  const K::History h = m.fit({x}, {y1, y2},
                             {.epochs = 1,
                              .validation_data = K::ValidationData({x}, {y1, y2}, {tf::ones({4})}),
                              .verbose = 0});
  REQUIRE(h.history.count("val_loss") == 1);
  // Weights of one: the validation loss is the unweighted loss of the trained model.
  CHECK(h.history.at("val_loss")[0] == Approx(m.evaluate({x}, {y1, y2}, {.verbose = 0})[0]));
}
