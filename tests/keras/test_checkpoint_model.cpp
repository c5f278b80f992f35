// ModelCheckpoint with a whole-model path (.keras or .tfmodel): Keras 3's default
// save_weights_only=False. The file is model.save's: load_model gives the model, compiled, with
// the optimizer's state, so training resumes where the checkpoint was taken.
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "keras/callbacks.h"
#include "keras/layers.h"
#include "keras/model.h"
#include "keras/optimizers.h"
#include "keras/serialization.h"
#include "ops/random.h"
#include "support/temp_dir.h"
#include "support/testing.h"

namespace tf = tapeflow;
namespace K = tapeflow::keras;
using tf::testing::check_close;
using tf::testing::TempDir;

namespace {

K::Sequential small_model() {
  tf::random::set_seed(5);
  K::Sequential m(
      {K::layers::Dense(4, {.activation = "tanh", .input_shape = {3}}), K::layers::Dense(2)});
  m.compile(K::optimizers::Adam(0.01), "mse", {"mae"});
  return m;
}

// Inputs (n x 3) and targets (n x 2), uniform in [-1, 1).
std::pair<tf::Tensor, tf::Tensor> data(int64_t n, int64_t seed) {
  return {tf::random::uniform({n, 3}, -1.0, 1.0, tf::float32, seed),
          tf::random::uniform({n, 2}, -1.0, 1.0, tf::float32, seed + 1)};
}

// fit's options: `epochs` epochs of batches of 4 in order, with these callbacks.
K::FitOptions epochs(int n, std::vector<K::callbacks::CallbackRef> callbacks = {}) {
  return {.epochs = n,
          .batch_size = 4,
          .callbacks = std::move(callbacks),
          .verbose = 0,
          .shuffle = false};
}

void check_same_weights(const K::Model& got, const K::Model& want) {
  const auto g = got.get_weights(), w = want.get_weights();
  REQUIRE(g.size() == w.size());
  for (size_t i = 0; i < w.size(); ++i) check_close(g[i], w[i], 0.0, 0.0);
}

}  // namespace

TEST_CASE("ModelCheckpoint: a .keras or .tfmodel path saves the whole model, optimizer included",
          "[cpu][keras][callbacks]") {
  TempDir dir;
  const auto [x, y] = data(16, 21);
  for (const std::string ext : {".keras", ".tfmodel"}) {
    CAPTURE(ext);
    // 2 epochs with a checkpoint per epoch, against 4 epochs straight.
    K::Sequential first = small_model();
    first.fit(x, y, epochs(2, {K::callbacks::ModelCheckpoint(dir / ("m-{epoch:02d}" + ext))}));
    K::Sequential straight = small_model();
    straight.fit(x, y, epochs(4));

    // The epoch-2 file is the model as fit left it: weights, compile state, Adam's step and slots.
    K::Model resumed = K::models::load_model(dir / ("m-02" + ext));
    check_same_weights(resumed, first);
    REQUIRE(resumed.compiled());
    CHECK(resumed.optimizer().iterations().value().item<int64_t>() == 8);
    CHECK(resumed.metrics_names() == first.metrics_names());
    // Two more epochs from the file give the 4 straight epochs, bit for bit.
    resumed.fit(x, y, epochs(2));
    check_same_weights(resumed, straight);
    // The epoch-1 file holds epoch 1's model.
    K::Model one = K::models::load_model(dir / ("m-01" + ext));
    CHECK(one.optimizer().iterations().value().item<int64_t>() == 4);
  }
}

TEST_CASE("ModelCheckpoint: save_best_only writes the whole model of the best epoch",
          "[cpu][keras][callbacks]") {
  TempDir dir;
  const auto [x, y] = data(16, 23);
  K::Sequential model = small_model();
  const auto history = model.fit(
      x, y,
      epochs(3,
             {K::callbacks::ModelCheckpoint(
                 dir / "best.keras", {.monitor = "loss", .save_best_only = true, .mode = "min"})}));
  // The loss falls every epoch here, so the best is the last.
  const auto& loss = history.history.at("loss");
  REQUIRE(loss.size() == 3);
  REQUIRE(loss[2] < loss[1]);
  REQUIRE(loss[1] < loss[0]);
  K::Model best = K::models::load_model(dir / "best.keras");
  check_same_weights(best, model);
  CHECK(best.optimizer().iterations().value().item<int64_t>() == 12);
  CHECK(dir.names() == std::vector<std::string>{"best.keras"});  // nothing else left behind
}

TEST_CASE("ModelCheckpoint: other paths save the weights; save_weights refuses a model's name",
          "[cpu][keras][callbacks]") {
  TempDir dir;
  const auto [x, y] = data(8, 25);
  K::Sequential model = small_model();
  model.fit(x, y, epochs(1, {K::callbacks::ModelCheckpoint(dir / "w.safetensors")}));
  // A weights file: load_weights reads it, load_model says what it is.
  K::Sequential other = small_model();
  other.load_weights(dir / "w.safetensors");
  check_same_weights(other, model);
  tf::testing::require_error([&] { K::models::load_model(dir / "w.safetensors"); },
                             {"[load_model]", "is not a tapeflow model file"});
  // Keras 3 refuses a weights file named .keras; so does tapeflow (it would not load_model).
  for (const char* name : {"x.keras", "x.tfmodel"}) {
    CAPTURE(name);
    tf::testing::require_error([&] { model.save_weights(dir / name); },
                               {"[save_weights]", "names a whole-model file"});
  }
  CHECK(dir.names() == std::vector<std::string>{"w.safetensors"});
}
