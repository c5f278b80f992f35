// Model::compile, fit, evaluate, predict and the weights files (keras/training.h).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include "core/error.h"
#include "distribute/strategy.h"
#include "keras/callbacks.h"
#include "keras/checkpoint.h"
#include "keras/model.h"
#include "keras/safetensors.h"
#include "keras/tensorboard.h"
#include "ops/factory.h"
#include "ops/movement.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "support/testing.h"

namespace tf = tapeflow;
namespace K = tapeflow::keras;

namespace {

// Three Gaussian blobs in 2-D: an easy 3-class problem.
std::pair<tf::Tensor, tf::Tensor> blobs(int64_t n, unsigned seed) {
  const auto noise = tf::testing::random_values(static_cast<size_t>(2 * n), -0.6, 0.6, seed);
  std::vector<float> x(static_cast<size_t>(2 * n));
  std::vector<int32_t> y(static_cast<size_t>(n));
  const float cx[3] = {-2.f, 2.f, 0.f}, cy[3] = {-1.f, -1.f, 2.f};
  for (int64_t i = 0; i < n; ++i) {
    const int c = static_cast<int>(i % 3);
    y[i] = c;
    x[2 * i] = cx[c] + static_cast<float>(noise[2 * i]);
    x[2 * i + 1] = cy[c] + static_cast<float>(noise[2 * i + 1]);
  }
  return {tf::constant(x, {n, 2}), tf::constant(y, {n})};
}

K::Sequential small_model() {
  return K::Sequential({K::layers::Dense(16, "relu"), K::layers::Dense(3)});
}

std::filesystem::path temp_dir(const std::string& name) {
  auto p = std::filesystem::temp_directory_path() /
           ("tapeflow_fit_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  return p;
}

}  // namespace

TEST_CASE("fit trains, evaluate and predict agree", "[cpu][keras]") {
  tf::random::set_seed(1);
  auto [x, y] = blobs(300, 1);
  auto model = small_model();
  model.compile(K::optimizers::Adam(0.02), K::losses::SparseCategoricalCrossentropy(true),
                {"accuracy"});
  K::History h = model.fit(x, y, {.epochs = 15, .batch_size = 32, .verbose = 0});
  REQUIRE(h.history.at("loss").size() == 15);
  CHECK(h.history.at("loss").back() < 0.5 * h.history.at("loss").front());
  CHECK(h.history.at("accuracy").back() > 0.95);
  CHECK(h.epoch == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14});
  CHECK(model.metrics_names() == std::vector<std::string>{"loss", "accuracy"});

  const std::vector<double> ev = model.evaluate(x, y, {.batch_size = 64, .verbose = 0});
  REQUIRE(ev.size() == 2);
  CHECK(ev[1] > 0.95);
  const tf::Tensor logits = model.predict(x, {.batch_size = 50});
  CHECK(logits.shape() == tf::TensorShape({300, 3}));
  // predict's argmax agrees with evaluate's accuracy.
  const auto pred = tf::argmax(logits, 1).numpy<int64_t>();
  const auto labels = y.numpy<int32_t>();
  int right = 0;
  for (size_t i = 0; i < pred.size(); ++i) right += pred[i] == labels[i];
  CHECK(static_cast<double>(right) / 300.0 == Approx(ev[1]).margin(1e-6));
  // The loss evaluate reports is the mean over every example.
  const tf::Tensor direct = K::losses::SparseCategoricalCrossentropy(true)(y, logits);
  CHECK(ev[0] == Approx(direct.item<float>()).epsilon(1e-4));
}

TEST_CASE("fit: traced steps match eager steps", "[cpu][keras]") {
  auto [x, y] = blobs(100, 2);  // 100 = 3 batches of 32 and one of 4: the last is partial
  std::vector<std::vector<tf::Tensor>> weights;
  for (bool eager : {false, true}) {
    tf::random::set_seed(7);
    auto model = small_model();
    model.compile(K::optimizers::SGD(0.1, 0.9), K::losses::SparseCategoricalCrossentropy(true),
                  {"accuracy"}, {.run_eagerly = eager});
    model.fit(x, y, {.epochs = 3, .batch_size = 32, .verbose = 0, .shuffle = false});
    weights.push_back(model.get_weights());
  }
  REQUIRE(weights[0].size() == weights[1].size());
  for (size_t i = 0; i < weights[0].size(); ++i)
    tf::testing::check_close(weights[0][i], weights[1][i], 1e-5, 1e-6);
}

TEST_CASE("fit: steps traced with jit_compile match plain traced steps", "[cpu][cuda][keras]") {
  // On a GPU, jit_compile runs the float32 elementwise chains (ReLU, Adam's and momentum's
  // updates, written into the variables) as generated kernels; on the CPU the steps are the same.
  auto [x, y] = blobs(100, 2);
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    for (bool adam : {true, false}) {
      CAPTURE(adam);
      std::vector<std::vector<tf::Tensor>> weights;
      std::vector<double> losses;
      for (bool jit : {false, true}) {
        tf::random::set_seed(7);
        auto model = small_model();
        K::optimizers::Optimizer opt =
            adam ? K::optimizers::Optimizer(K::optimizers::Adam(0.02))
                 : K::optimizers::Optimizer(K::optimizers::SGD(0.1, 0.9));
        model.compile(opt, K::losses::SparseCategoricalCrossentropy(true), {"accuracy"},
                      {.jit_compile = jit});
        K::History h =
            model.fit(x, y, {.epochs = 3, .batch_size = 32, .verbose = 0, .shuffle = false});
        losses.push_back(h.history.at("loss").back());
        weights.push_back(model.get_weights());
        CHECK(weights.back()[0].placement() == device);
      }
      CHECK(losses[1] == Approx(losses[0]).epsilon(1e-5));
      REQUIRE(weights[0].size() == weights[1].size());
      for (size_t i = 0; i < weights[0].size(); ++i)
        tf::testing::check_close(weights[1][i], weights[0][i], 1e-5, 1e-6);
    }
  }
}

TEST_CASE("fit: validation data, validation_split and the progress output", "[cpu][keras]") {
  tf::random::set_seed(3);
  auto [x, y] = blobs(200, 3);
  auto [xv, yv] = blobs(60, 4);
  auto model = small_model();
  model.compile(K::optimizers::Adam(0.02), "sparse_categorical_crossentropy", {"accuracy"});
  // (the model outputs logits, but a probability loss still trains the shapes; values unused)
  std::ostringstream out;
  std::streambuf* saved = std::cout.rdbuf(out.rdbuf());
  K::History h = model.fit(x, y, {.epochs = 2, .batch_size = 50, .validation_data = {xv, yv}});
  std::cout.rdbuf(saved);
  for (const char* k : {"loss", "accuracy", "val_loss", "val_accuracy"})
    CHECK(h.history.at(k).size() == 2);
  // Not a terminal: "Epoch i/n" and one line per epoch.
  const std::string text = out.str();
  CHECK(text.find("Epoch 1/2\n4/4 [==============================]") != std::string::npos);
  CHECK(text.find("val_accuracy:") != std::string::npos);
  CHECK(std::count(text.begin(), text.end(), '\n') == 4);

  auto m2 = small_model();
  m2.compile(K::optimizers::Adam(0.02), K::losses::SparseCategoricalCrossentropy(true),
             {"accuracy"});
  K::History h2 = m2.fit(x, y, {.epochs = 1, .verbose = 0, .validation_split = 0.25});
  CHECK(h2.history.count("val_loss") == 1);
  TF_REQUIRE_THROWS_CONTAINING(
      m2.fit(x, y, {.validation_data = {xv, yv}, .verbose = 0, .validation_split = 0.5}),
      tf::InvalidArgumentError, "not both");
}

TEST_CASE("fit: a Dataset with sample weights, and steps_per_epoch over a repeated one",
          "[cpu][keras]") {
  tf::random::set_seed(5);
  auto [x, y] = blobs(96, 5);
  const tf::Tensor w = tf::ones({96});
  auto model = small_model();
  model.compile(K::optimizers::Adam(0.02), K::losses::SparseCategoricalCrossentropy(true),
                {"accuracy"});
  auto ds = tf::data::Dataset::from_tensor_slices({x, y, w}).shuffle(96, 1).batch(16);
  K::History h = model.fit(ds, {.epochs = 5, .verbose = 0});
  CHECK(h.history.at("loss").back() < h.history.at("loss").front());
  TF_REQUIRE_THROWS_CONTAINING(model.fit(ds.repeat(), {.epochs = 1, .verbose = 0}),
                               tf::InvalidArgumentError, "steps_per_epoch");
  K::History h2 = model.fit(ds.repeat(), {.epochs = 2, .verbose = 0, .steps_per_epoch = 4});
  CHECK(h2.history.at("loss").size() == 2);
  // steps_per_epoch over a finite dataset: one iterator continues across epochs; an epoch that
  // begins where a pass ended starts the next pass (6 batches, 3 per epoch: every epoch trains 3).
  const int64_t before = model.optimizer().iterations().value().item<int64_t>();
  K::History h3 = model.fit(ds, {.epochs = 3, .verbose = 0, .steps_per_epoch = 3});
  CHECK(h3.history.at("loss").size() == 3);
  CHECK(model.optimizer().iterations().value().item<int64_t>() - before == 9);
}

TEST_CASE("fit: callbacks stop, checkpoint, schedule and log", "[cpu][keras]") {
  tf::random::set_seed(9);
  auto [x, y] = blobs(120, 6);
  const auto dir = temp_dir("callbacks");
  auto model = small_model();
  model.compile(K::optimizers::SGD(0.05), K::losses::SparseCategoricalCrossentropy(true),
                {"accuracy"});
  auto early = std::make_shared<K::callbacks::EarlyStopping>(
      K::callbacks::EarlyStoppingOptions{.monitor = "loss", .min_delta = 10.0, .patience = 1});
  std::vector<double> rates;
  K::History h = model.fit(
      x, y,
      {.epochs = 10,
       .callbacks = {early,
                     K::callbacks::ModelCheckpoint((dir / "w-{epoch:02d}.safetensors").string()),
                     K::callbacks::LearningRateScheduler([&](int epoch, double lr) {
                       rates.push_back(lr);
                       return epoch == 0 ? lr : lr * 0.5;
                     }),
                     K::callbacks::TensorBoard((dir / "logs").string())},
       .verbose = 0});
  // min_delta 10 never counts as an improvement: stop after epoch index 1.
  CHECK(h.epoch.size() == 2);
  CHECK(early->stopped_epoch() == 1);
  CHECK(std::filesystem::exists(dir / "w-01.safetensors"));
  CHECK(std::filesystem::exists(dir / "w-02.safetensors"));
  REQUIRE(rates.size() == 2);
  CHECK(rates[0] == Approx(0.05));
  CHECK(model.optimizer().current_learning_rate() == Approx(0.025));
  // The weights file of the last epoch holds the model's weights.
  auto copy = small_model();
  copy.build({tf::None, 2});
  copy.load_weights((dir / "w-02.safetensors").string());
  const auto a = model.get_weights(), b = copy.get_weights();
  for (size_t i = 0; i < a.size(); ++i) tf::testing::check_close(a[i], b[i], 0, 0);
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir / "logs" / "train"))
    files.push_back(e.path());
  REQUIRE(files.size() == 1);
  const auto events = K::summary::read_scalar_events(files[0].string());
  // loss, accuracy, learning rate for 2 epochs (the scheduler's "learning_rate" log is not
  // written a second time).
  CHECK(events.size() == 6);
  std::filesystem::remove_all(dir);
}

namespace {
struct FailAt : K::callbacks::Callback {
  int epoch;
  explicit FailAt(int e) : epoch(e) {}
  void on_epoch_begin(int e, const K::Logs&) override {
    if (e == epoch) throw std::runtime_error("simulated failure");
  }
};
}  // namespace

TEST_CASE("fit: BackupAndRestore resumes an interrupted run", "[cpu][keras]") {
  tf::random::set_seed(11);
  auto [x, y] = blobs(60, 7);
  const auto dir = temp_dir("backup");
  const std::string backup = (dir / "backup").string();
  auto model = small_model();
  model.compile(K::optimizers::Adam(0.01), K::losses::SparseCategoricalCrossentropy(true));
  REQUIRE_THROWS_WITH(model.fit(x, y, {.epochs = 4,
                                       .callbacks = {K::callbacks::BackupAndRestore(backup),
                                                     FailAt(2)},
                                       .verbose = 0}),
                      "simulated failure");
  const auto saved = model.get_weights();
  const int64_t steps_done = model.optimizer().iterations().value().item<int64_t>();
  CHECK(steps_done == 4);  // 2 epochs of 2 batches

  // A new process would build a fresh model: restoring puts back the weights and the optimizer.
  tf::random::set_seed(12);
  auto fresh = small_model();
  fresh.compile(K::optimizers::Adam(0.01), K::losses::SparseCategoricalCrossentropy(true));
  fresh.build({tf::None, 2});
  K::History h = fresh.fit(
      x, y, {.epochs = 4, .callbacks = {K::callbacks::BackupAndRestore(backup)}, .verbose = 0});
  CHECK(h.epoch == std::vector<int>{2, 3});
  CHECK(fresh.optimizer().iterations().value().item<int64_t>() == 8);
  CHECK_FALSE(std::filesystem::exists(backup));  // deleted after a finished run
  std::filesystem::remove_all(dir);
}

TEST_CASE("fit: BackupAndRestore into a model that is not built continues from the backup",
          "[cpu][keras]") {
  auto [x, y] = blobs(60, 7);
  const auto dir = temp_dir("backup_unbuilt");
  const std::string backup = (dir / "backup").string();
  const K::FitOptions plain{.epochs = 4, .batch_size = 16, .verbose = 0, .shuffle = false};
  auto with = [&](std::vector<K::callbacks::CallbackRef> callbacks) {
    K::FitOptions o = plain;
    o.callbacks = std::move(callbacks);
    return o;
  };
  // The run that is never interrupted.
  tf::random::set_seed(21);
  auto whole = small_model();
  whole.compile(K::optimizers::Adam(0.01), K::losses::SparseCategoricalCrossentropy(true));
  const K::History want = whole.fit(x, y, plain);

  tf::random::set_seed(21);
  auto first = small_model();
  first.compile(K::optimizers::Adam(0.01), K::losses::SparseCategoricalCrossentropy(true));
  REQUIRE_THROWS_WITH(first.fit(x, y, with({K::callbacks::BackupAndRestore(backup), FailAt(2)})),
                      "simulated failure");

  // A fresh process's model, not built: fit builds it from the data before restoring (the
  // restore used to find no variables and train from new random weights, silently).
  tf::random::set_seed(99);
  auto fresh = small_model();
  fresh.compile(K::optimizers::Adam(0.01), K::losses::SparseCategoricalCrossentropy(true));
  REQUIRE_FALSE(fresh.built());
  const K::History h = fresh.fit(x, y, with({K::callbacks::BackupAndRestore(backup)}));
  REQUIRE(h.epoch == std::vector<int>{2, 3});
  const auto& got = h.history.at("loss");
  const auto& all = want.history.at("loss");
  REQUIRE(got.size() == 2);
  CHECK(got[0] == Approx(all[2]).epsilon(1e-5));
  CHECK(got[1] == Approx(all[3]).epsilon(1e-5));
  CHECK(fresh.optimizer().iterations().value().item<int64_t>() == 16);
  std::filesystem::remove_all(dir);
}

TEST_CASE("fit: errors name what is wrong", "[cpu][keras]") {
  auto [x, y] = blobs(30, 8);
  auto model = small_model();
  TF_REQUIRE_THROWS_CONTAINING(model.fit(x, y), tf::FailedPreconditionError, "compile()");
  model.compile(K::optimizers::SGD(), K::losses::SparseCategoricalCrossentropy(true));
  TF_REQUIRE_THROWS_CONTAINING(model.fit(x, tf::zeros({29}, tf::int32), {.verbose = 0}),
                               tf::InvalidArgumentError, "(29,)");
  TF_REQUIRE_THROWS_CONTAINING(model.fit(x, y, {.batch_size = 0, .verbose = 0}),
                               tf::InvalidArgumentError, "batch_size");
  // No samples: nothing to train on or evaluate (Keras raises too), not a loss of 0.
  const tf::Tensor no_x = tf::zeros({0, 2}), no_y = tf::zeros({0}, tf::int32);
  TF_REQUIRE_THROWS_CONTAINING(model.fit(no_x, no_y, {.verbose = 0}), tf::InvalidArgumentError,
                               "[fit] x and y have no samples (x is (0, 2), y is (0,))");
  TF_REQUIRE_THROWS_CONTAINING(model.evaluate(no_x, no_y, {.verbose = 0}),
                               tf::InvalidArgumentError, "[evaluate] x and y have no samples");
  const tf::data::Dataset empty = tf::data::Dataset::from_tensor_slices({x, y}).batch(8, true);
  const tf::data::Dataset none = tf::data::Dataset::from_tensor_slices({no_x, no_y}).batch(8);
  TF_REQUIRE_THROWS_CONTAINING(model.fit(none, {.verbose = 0}), tf::InvalidArgumentError,
                               "no batches in epoch 1");
  TF_REQUIRE_THROWS_CONTAINING(model.evaluate(none, {.verbose = 0}), tf::InvalidArgumentError,
                               "no batches");
  TF_REQUIRE_THROWS_CONTAINING(model.save_weights("/tmp/w.safetensors"),
                               tf::FailedPreconditionError, "no weights yet");
  // Weights files: shapes are checked before anything is assigned.
  const auto dir = temp_dir("weights");
  model.fit(x, y, {.epochs = 1, .verbose = 0});
  TF_REQUIRE_THROWS_CONTAINING(model.save_weights("/nonexistent-dir/w.safetensors"), tf::Error,
                               "/nonexistent-dir");
  model.save_weights((dir / "w.safetensors").string());
  auto other = K::Sequential({K::layers::Dense(8, "relu"), K::layers::Dense(3)});
  other.build({tf::None, 2});
  TF_REQUIRE_THROWS_CONTAINING(other.load_weights((dir / "w.safetensors").string()),
                               tf::InvalidArgumentError, "w.safetensors");
  std::filesystem::remove_all(dir);
}

TEST_CASE("predict on one compiled model from several threads", "[cpu][keras]") {
  // A serving pattern: the traced predict step is shared; inputs of two ranks make the threads
  // swap it while others replay it (a data race and a crash before).
  auto model = K::Sequential({K::layers::Dense(4)});
  model.compile(K::optimizers::SGD(0.1), K::losses::MeanSquaredError());
  const tf::Tensor x2 = tf::random::normal({8, 3}, 0, 1, tf::float32, 1);
  const tf::Tensor x3 = tf::random::normal({2, 4, 3}, 0, 1, tf::float32, 2);
  // The traced step's bits (on a GPU a traced Dense may round otherwise than the eager one).
  const tf::Tensor want2 = model.predict(x2, {.verbose = 0});
  const tf::Tensor want3 = model.predict(x3, {.verbose = 0});
  tf::testing::check_close(want2, model(x2, false), 1e-6, 1e-6);
  tf::testing::check_close(want3, model(x3, false), 1e-6, 1e-6);
  std::vector<int> ok(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      bool all = true;
      for (int i = 0; i < 20; ++i) {
        const bool rank3 = (i + t) % 2 == 1;
        const tf::Tensor got = model.predict(rank3 ? x3 : x2, {.verbose = 0});
        all = all && got.numpy<float>() == (rank3 ? want3 : want2).numpy<float>();
      }
      ok[static_cast<size_t>(t)] = all;
    });
  for (auto& th : threads) th.join();
  CHECK(ok == std::vector<int>{1, 1, 1, 1});
}

TEST_CASE("fit evaluate and predict refuse what would hang or mislead", "[cpu][keras]") {
  auto [x, y] = blobs(30, 9);
  auto model = small_model();
  model.compile(K::optimizers::SGD(0.05), K::losses::SparseCategoricalCrossentropy(true),
                {"accuracy"});
  const tf::data::Dataset ds = tf::data::Dataset::from_tensor_slices({x, y}).batch(8);
  // An infinite dataset needs steps (evaluate ran forever, predict grew memory until
  // std::bad_alloc); steps of 0 or below -1 are errors, not "all data".
  TF_REQUIRE_THROWS_CONTAINING(model.evaluate(ds.repeat(), {.verbose = 0}),
                               tf::InvalidArgumentError, "[evaluate] the dataset is infinite");
  TF_REQUIRE_THROWS_CONTAINING(model.predict(ds.repeat()), tf::InvalidArgumentError,
                               "[predict] the dataset is infinite");
  CHECK(model.evaluate(ds.repeat(), {.verbose = 0, .steps = 2}).size() == 2);
  TF_REQUIRE_THROWS_CONTAINING(model.evaluate(ds, {.verbose = 0, .steps = 0}),
                               tf::InvalidArgumentError, "steps must be positive");
  TF_REQUIRE_THROWS_CONTAINING(model.fit(ds, {.verbose = 0, .steps_per_epoch = -5}),
                               tf::InvalidArgumentError, "steps_per_epoch must be positive");
  TF_REQUIRE_THROWS_CONTAINING(model.fit(x, y, {.verbose = 0, .steps_per_epoch = 0}),
                               tf::InvalidArgumentError, "steps_per_epoch must be positive");
  TF_REQUIRE_THROWS_CONTAINING(model.fit(x, y, {.epochs = 2, .verbose = 0, .initial_epoch = -2}),
                               tf::InvalidArgumentError, "initial_epoch must be >= 0");
  // validation_split cannot split a Dataset (it was ignored); an empty validation set is an
  // error (it logged val_loss 0), an infinite one too.
  TF_REQUIRE_THROWS_CONTAINING(model.fit(ds, {.verbose = 0, .validation_split = 0.2}),
                               tf::InvalidArgumentError, "only supported for tensor inputs");
  const auto none = ds.filter([](const std::vector<tf::Tensor>&) { return false; });
  TF_REQUIRE_THROWS_CONTAINING(
      model.fit(ds, {.epochs = 1, .validation_data = K::ValidationData(none), .verbose = 0}),
      tf::InvalidArgumentError, "the validation data yielded no batches");
  TF_REQUIRE_THROWS_CONTAINING(
      model.fit(ds, {.validation_data = K::ValidationData(ds.repeat()), .verbose = 0}),
      tf::InvalidArgumentError, "the validation dataset is infinite");
  // Metric names key the logs: clashes are errors at compile.
  auto m2 = small_model();
  const auto loss = K::losses::SparseCategoricalCrossentropy(true);
  TF_REQUIRE_THROWS_CONTAINING(m2.compile(K::optimizers::SGD(), loss, {"accuracy", "accuracy"}),
                               tf::InvalidArgumentError, "both named 'accuracy'");
  TF_REQUIRE_THROWS_CONTAINING(
      m2.compile(K::optimizers::SGD(), loss, {K::metrics::SparseCategoricalAccuracy("loss")}),
      tf::InvalidArgumentError, "named 'loss'");
  TF_REQUIRE_THROWS_CONTAINING(
      m2.compile(K::optimizers::SGD(), loss, {K::metrics::SparseCategoricalAccuracy("val_acc")}),
      tf::InvalidArgumentError, "starts with 'val_'");
  // A learning rate beyond float32 (it became inf).
  TF_REQUIRE_THROWS_CONTAINING(K::optimizers::SGD(1e39), tf::InvalidArgumentError,
                               "finite float32");
  TF_REQUIRE_THROWS_CONTAINING(model.optimizer().set_learning_rate(1e300), tf::InvalidArgumentError,
                               "finite float32");
}

TEST_CASE("fit: compile from a callback leaves the running fit its state", "[cpu][keras]") {
  // compile() freed the state fit was using (a use-after-free under valgrind); now the running
  // fit keeps its own and the next call uses the new one.
  auto [x, y] = blobs(32, 10);
  auto model = small_model();
  model.compile(K::optimizers::SGD(0.05), K::losses::SparseCategoricalCrossentropy(true),
                {"accuracy"});
  struct Recompile : K::callbacks::Callback {
    K::Sequential* m = nullptr;
    int calls = 0;
    void on_train_batch_end(int64_t, const K::Logs&) override {
      ++calls;
      m->compile(K::optimizers::Adam(0.01), K::losses::SparseCategoricalCrossentropy(true));
    }
  };
  auto cb = std::make_shared<Recompile>();
  cb->m = &model;
  const K::History h =
      model.fit(x, y, {.epochs = 2, .batch_size = 8, .callbacks = {cb}, .verbose = 0});
  CHECK(cb->calls == 8);
  CHECK(h.history.at("loss").size() == 2);
  CHECK(h.history.at("accuracy").size() == 2);  // the state fit started with had the metric
  CHECK(model.metrics_names() == std::vector<std::string>{"loss"});  // the new compile's
  CHECK(model.optimizer().name() == "Adam");
}

TEST_CASE("fit under a MirroredStrategy's scope matches one device", "[cpu][keras][multi_device]") {
  if (!tf::testing::split_cpu_in_two()) return;
  auto [x, y] = blobs(100, 10);  // batches of 32 and a last one of 4: uneven replica splits
  auto train = [&](K::Sequential& model) {
    model.compile(K::optimizers::SGD(0.1, 0.9), K::losses::SparseCategoricalCrossentropy(true),
                  {"accuracy"});
    return model.fit(x, y, {.epochs = 3, .batch_size = 32, .verbose = 0, .shuffle = false});
  };
  tf::random::set_seed(21);
  auto single = small_model();
  const K::History h1 = train(single);

  tf::random::set_seed(21);
  tf::distribute::MirroredStrategy strategy({"/cpu:0", "/cpu:1"});
  std::optional<K::Sequential> mirrored;
  K::History h2;
  {
    auto scope = strategy.scope();
    mirrored.emplace(small_model());
    h2 = train(*mirrored);
  }
  const auto a = single.get_weights(), b = mirrored->get_weights();
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) tf::testing::check_close(a[i], b[i], 1e-4, 1e-5);
  // Every replica's copy is the same.
  for (const tf::Variable& v : mirrored->trainable_variables()) {
    REQUIRE(v.is_mirrored());
    const auto c = v.components();
    tf::testing::check_close(c[0].value(), c[1].value(), 0, 0);
  }
  // The logged loss and accuracy are the global ones.
  for (size_t e = 0; e < 3; ++e) {
    CHECK(h2.history.at("loss")[e] == Approx(h1.history.at("loss")[e]).epsilon(1e-4));
    CHECK(h2.history.at("accuracy")[e] == Approx(h1.history.at("accuracy")[e]).margin(1e-6));
  }
}

TEST_CASE("fit under a MirroredStrategy: a replica's empty share of the last batch trains",
          "[cpu][keras][multi_device]") {
  if (!tf::testing::split_cpu_in_two()) return;
  // 5 samples in batches of 4: the last global batch of 1 leaves the second replica nothing.
  // Its batch statistics are NaN; they made the moving statistics and (through NaN * 0 in the
  // gradient) the weights NaN.
  auto [x, y] = blobs(5, 12);
  tf::distribute::MirroredStrategy strategy({"/cpu:0", "/cpu:1"});
  std::optional<K::Sequential> model;
  K::History h;
  {
    auto scope = strategy.scope();
    model.emplace(
        K::Sequential({K::layers::Dense(8), K::layers::BatchNormalization(), K::layers::Dense(3)}));
    model->compile(K::optimizers::SGD(0.1), K::losses::SparseCategoricalCrossentropy(true));
    h = model->fit(x, y, {.epochs = 3, .batch_size = 4, .verbose = 0, .shuffle = false});
  }
  for (double l : h.history.at("loss")) CHECK(std::isfinite(l));
  for (const tf::Variable& v : model->variables())
    for (double d : tf::detail::to_double_vector(v.value())) CHECK(std::isfinite(d));

  // The empty share's loss (SUM_OVER_BATCH_SIZE of no values) is 0 and still connected to the
  // model: its gradients are zeros ("No gradients provided for any variable" before).
  for (const bool eager : {false, true}) {
    INFO("run_eagerly " << eager);
    std::optional<K::Sequential> linear;
    {
      auto scope = strategy.scope();
      linear.emplace(K::Sequential({K::layers::Dense(1)}));
      linear->compile(K::optimizers::SGD(0.1), "mse", {}, {.run_eagerly = eager});
    }
    const K::History hl = linear->fit(tf::ones({3, 4}), tf::ones({3, 1}),
                                      {.epochs = 2, .batch_size = 2, .verbose = 0});
    for (double l : hl.history.at("loss")) CHECK(std::isfinite(l));
  }

  // A model compiled under a strategy that was destroyed since: an error, not freed memory.
  std::optional<K::Sequential> orphan;
  {
    tf::distribute::MirroredStrategy gone({"/cpu:0", "/cpu:1"});
    auto scope = gone.scope();
    orphan.emplace(K::Sequential({K::layers::Dense(1)}));
    orphan->compile(K::optimizers::SGD(0.1), "mse");
  }
  TF_REQUIRE_THROWS_CONTAINING(orphan->fit(tf::ones({3, 4}), tf::ones({3, 1}), {.verbose = 0}),
                               tf::FailedPreconditionError, "has been destroyed since");
}

TEST_CASE("compile: metrics ignore sample weights and weighted_metrics take them", "[cpu][keras]") {
  // Keras' numbers (TF 2.21): 3 of 4 correct, the wrong one weighing 5.
  auto make = [](std::vector<K::MetricSpec> weighted) {
    K::Sequential m({K::layers::Dense(2, "", false)});
    m.build(tf::TensorShape({tf::None, 2}));
    m.set_weights({tf::constant({{1.0f, 0.0f}, {0.0f, 1.0f}})});  // logits = x
    m.compile(K::optimizers::SGD(0.1), K::losses::SparseCategoricalCrossentropy(true), {"accuracy"},
              {.weighted_metrics = std::move(weighted)});
    return m;
  };
  const tf::Tensor x = tf::constant({{1.0f, 0.0f}, {1.0f, 0.0f}, {0.0f, 1.0f}, {0.0f, 1.0f}});
  const tf::Tensor y = tf::constant({0, 1, 1, 1});
  const tf::Tensor sw = tf::constant({1.0f, 5.0f, 1.0f, 1.0f});
  const auto data = tf::data::Dataset::from_tensor_slices({x, y, sw}).batch(4);
  auto plain = make({});
  const auto a = plain.evaluate(data, {.verbose = 0});
  REQUIRE(a.size() == 2);
  CHECK(a[0] == Approx(1.876523).epsilon(1e-5));
  CHECK(a[1] == Approx(0.75));
  auto both = make({K::metrics::SparseCategoricalAccuracy("weighted_accuracy")});
  CHECK(both.metrics_names() == std::vector<std::string>{"loss", "accuracy", "weighted_accuracy"});
  const auto b = both.evaluate(data, {.verbose = 0});
  REQUIRE(b.size() == 3);
  CHECK(b[1] == Approx(0.75));
  CHECK(b[2] == Approx(0.375));
  TF_REQUIRE_THROWS_CONTAINING(make({"accuracy"}), tf::InvalidArgumentError,
                               "both named 'accuracy'");
}

TEST_CASE("fit: validation Dataset batches need two or three components", "[cpu][keras]") {
  auto [x, y] = blobs(30, 9);
  auto model = small_model();
  model.compile(K::optimizers::SGD(), K::losses::SparseCategoricalCrossentropy(true));
  const auto ds = tf::data::Dataset::from_tensor_slices({x, y}).batch(10);
  const auto only_x = tf::data::Dataset::from_tensor_slices({x}).batch(10);
  tf::testing::require_error(
      [&] { model.fit(ds, {.epochs = 1, .validation_data = only_x, .verbose = 0}); },
      {"[fit]", "validation batches", "1 components"});
}

TEST_CASE("fit: validation tensors with a Dataset check batch_size and validation_batch_size",
          "[cpu][keras]") {
  auto [x, y] = blobs(30, 10);
  auto model = small_model();
  model.compile(K::optimizers::SGD(), K::losses::SparseCategoricalCrossentropy(true));
  const auto ds = tf::data::Dataset::from_tensor_slices({x, y}).batch(10);
  tf::testing::require_error(
      [&] {
        model.fit(ds, {.epochs = 1, .batch_size = 0, .validation_data = {x, y}, .verbose = 0});
      },
      {"[fit]", "batch_size is 0", "validation_batch_size"});
  tf::testing::require_error(
      [&] {
        model.fit(
            ds,
            {.epochs = 1, .validation_data = {x, y}, .verbose = 0, .validation_batch_size = -4});
      },
      {"[fit]", "validation_batch_size must be >= 0", "-4"});
  // A positive validation_batch_size is enough.
  CHECK_NOTHROW(model.fit(ds, {.epochs = 1,
                               .batch_size = 0,
                               .validation_data = {x, y},
                               .verbose = 0,
                               .validation_batch_size = 10}));
}

namespace {
// Keeps using its context after fit returned (a callback the user holds on to).
struct KeepsContext : K::callbacks::Callback {
  int epochs_seen() const { return context().epochs; }
};
}  // namespace

TEST_CASE("fit: a callback used after fit returned has no dangling context", "[cpu][keras]") {
  auto [x, y] = blobs(30, 11);
  auto model = small_model();
  model.compile(K::optimizers::SGD(), K::losses::SparseCategoricalCrossentropy(true));
  auto cb = std::make_shared<KeepsContext>();
  model.fit(x, y, {.epochs = 1, .callbacks = {cb}, .verbose = 0});
  TF_REQUIRE_THROWS_CONTAINING((void)cb->epochs_seen(), tf::FailedPreconditionError, "[callbacks]");
  // A null callback is an InvalidArgumentError, not a crash.
  std::shared_ptr<K::callbacks::EarlyStopping> none;
  tf::testing::require_error(
      [&] { model.fit(x, y, {.epochs = 1, .callbacks = {none}, .verbose = 0}); },
      {"[callbacks]", "null"});
}

TEST_CASE("fit: BackupAndRestore rejects a backup whose epoch is out of range", "[cpu][keras]") {
  tf::random::set_seed(13);
  auto [x, y] = blobs(60, 12);
  const auto dir = temp_dir("backup_range");
  const std::string backup = (dir / "backup").string();
  auto model = small_model();
  model.compile(K::optimizers::Adam(0.01), K::losses::SparseCategoricalCrossentropy(true));
  REQUIRE_THROWS_WITH(model.fit(x, y,
                                {.epochs = 4,
                                 .callbacks = {K::callbacks::BackupAndRestore(backup), FailAt(2)},
                                 .verbose = 0}),
                      "simulated failure");
  const std::string file = tf::train::latest_checkpoint(backup) + ".safetensors";
  std::map<std::string, std::string> meta;
  auto tensors = tf::keras::safetensors::load_file(file, &meta);
  bool found = false;
  for (auto& [name, t] : tensors)
    if (name == "epoch") {
      t = tf::Tensor(int64_t{std::numeric_limits<int>::max()});
      found = true;
    }
  REQUIRE(found);
  tf::keras::safetensors::save_file(file, tensors, meta);
  tf::testing::require_error(
      [&] {
        model.fit(
            x, y,
            {.epochs = 4, .callbacks = {K::callbacks::BackupAndRestore(backup)}, .verbose = 0});
      },
      {"[BackupAndRestore]", backup, "2147483647"});
  std::filesystem::remove_all(dir);
}

// ---- callbacks against Keras 3.15 (the expected values were produced by Keras 3.15 on the same
// data, model and settings) ----

namespace {

// 16 rows of 3 features and a linear target (as the differential probe against Keras).
std::pair<tf::Tensor, tf::Tensor> linear_data() {
  std::vector<float> x(16 * 3), y(16);
  for (int i = 0; i < 16; ++i) {
    double s = 0;
    for (int j = 0; j < 3; ++j) {
      x[i * 3 + j] = static_cast<float>(std::sin(i * 3.0 + j));
      s += x[i * 3 + j] * (j + 1);
    }
    y[i] = static_cast<float>(s + 0.1 * std::cos(i * 7.0));
  }
  return {tf::constant(x, {16, 3}), tf::constant(y, {16, 1})};
}

K::Sequential linear_model(K::optimizers::LearningRate lr = 0.05) {
  auto [x, y] = linear_data();
  K::Sequential m({K::layers::Dense(1)});
  m(x);
  m.set_weights({tf::constant(std::vector<float>{0.1f, -0.2f, 0.3f}, {3, 1}),
                 tf::constant(std::vector<float>{0.05f}, {1})});
  m.compile(K::optimizers::SGD(lr), K::losses::MeanSquaredError());
  return m;
}

std::vector<float> flat_weights(const K::Sequential& m) {
  std::vector<float> out;
  for (const auto& t : m.get_weights())
    for (float v : t.numpy<float>()) out.push_back(v);
  return out;
}

// Records the hooks it sees; may set the stop flag at a given point.
struct Recorder : K::callbacks::Callback {
  std::vector<std::string> events;
  int stop_at_epoch_begin = -1;
  bool stop_at_train_begin = false;
  std::ostream* out = nullptr;
  void on_train_begin(const K::Logs&) override {
    if (stop_at_train_begin) *context().stop_training = true;
  }
  void on_epoch_begin(int e, const K::Logs&) override {
    events.push_back("epoch_begin " + std::to_string(e));
    if (out) *out << "user begin " << e << '\n';
    if (e == stop_at_epoch_begin) *context().stop_training = true;
  }
  void on_train_batch_end(int64_t b, const K::Logs&) override {
    events.push_back("batch_end " + std::to_string(b));
  }
  void on_epoch_end(int e, const K::Logs& logs) override {
    std::string keys;
    for (const auto& [k, v] : logs) keys += " " + k;
    events.push_back("epoch_end " + std::to_string(e) + keys);
    if (out) *out << "user end " << e << '\n';
  }
};

}  // namespace

TEST_CASE("fit: EarlyStopping restores the best weights when training ends without a stop",
          "[cpu][keras]") {
  // Keras 3.15 (loss rises under mode max, so epoch 1 stays the best): weights of epoch 1.
  auto [x, y] = linear_data();
  auto model = linear_model();
  auto es = std::make_shared<K::callbacks::EarlyStopping>(
      K::callbacks::EarlyStoppingOptions{.monitor = "loss",
                                         .patience = 10,
                                         .verbose = 1,
                                         .mode = "max",
                                         .restore_best_weights = true});
  const std::string err = tf::testing::capture_stderr([&] {
    model.fit(x, y,
              {.epochs = 4, .batch_size = 4, .callbacks = {es}, .verbose = 0, .shuffle = false});
  });
  CHECK(es->stopped_epoch() == 0);
  CHECK(es->best_epoch() == 0);
  const std::vector<float> want = {0.14383f, 0.33040f, 0.82933f, 0.10229f};
  const auto got = flat_weights(model);
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(want[i]).margin(2e-5));
  CHECK(err.find("Restoring model weights from the end of the best epoch: 1.") !=
        std::string::npos);
  CHECK(err.find("early stopping") == std::string::npos);
}

TEST_CASE("fit: a ModelCheckpoint after EarlyStopping saves the stopping epoch's own weights",
          "[cpu][keras]") {
  auto [x, y] = linear_data();
  const auto dir = temp_dir("es_checkpoint");
  auto model = linear_model();
  auto es = std::make_shared<K::callbacks::EarlyStopping>(K::callbacks::EarlyStoppingOptions{
      .monitor = "loss", .patience = 2, .verbose = 1, .mode = "max", .restore_best_weights = true});
  const std::string err = tf::testing::capture_stderr([&] {
    model.fit(
        x, y,
        {.epochs = 10,
         .batch_size = 4,
         .callbacks = {es, K::callbacks::ModelCheckpoint((dir / "last.safetensors").string())},
         .verbose = 0,
         .shuffle = false});
  });
  CHECK(es->stopped_epoch() == 2);
  // The checkpoint holds epoch 3's weights (what 3 epochs without callbacks give); the model
  // holds epoch 1's, restored when training ended.
  auto three = linear_model();
  three.fit(x, y, {.epochs = 3, .batch_size = 4, .verbose = 0, .shuffle = false});
  auto saved = linear_model();
  saved.load_weights((dir / "last.safetensors").string());
  CHECK(flat_weights(saved) == flat_weights(three));
  const std::vector<float> best = {0.14383f, 0.33040f, 0.82933f, 0.10229f};
  const auto got = flat_weights(model);
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(best[i]).margin(2e-5));
  // Keras 3's messages, in its order.
  const size_t stop_at = err.find("Epoch 3: early stopping");
  const size_t restore_at = err.find("Restoring model weights from the end of the best epoch: 1.");
  REQUIRE(stop_at != std::string::npos);
  REQUIRE(restore_at != std::string::npos);
  CHECK(stop_at < restore_at);
  std::filesystem::remove_all(dir);
}

TEST_CASE("fit: EarlyStopping with an unreached baseline does not stop while improving",
          "[cpu][keras]") {
  // Keras 3.15 runs all 6 epochs (the loss falls every epoch; baseline 0 is never beaten).
  auto [x, y] = linear_data();
  auto model = linear_model();
  auto es = std::make_shared<K::callbacks::EarlyStopping>(
      K::callbacks::EarlyStoppingOptions{.monitor = "loss", .patience = 2, .baseline = 0.0});
  K::History h = model.fit(
      x, y, {.epochs = 6, .batch_size = 4, .callbacks = {es}, .verbose = 0, .shuffle = false});
  CHECK(h.epoch.size() == 6);
  CHECK(es->stopped_epoch() == 0);
}

TEST_CASE("fit: stop_training set before an epoch's batches still runs one batch", "[cpu][keras]") {
  auto [x, y] = linear_data();
  SECTION("in on_epoch_begin with steps_per_epoch") {
    // Keras 3.15: epoch 2 runs batch 0 and logs its loss 8.32252.
    auto model = linear_model();
    auto rec = std::make_shared<Recorder>();
    rec->stop_at_epoch_begin = 1;
    K::History h = model.fit(x, y,
                             {.epochs = 3,
                              .batch_size = 8,
                              .callbacks = {rec},
                              .verbose = 0,
                              .shuffle = false,
                              .steps_per_epoch = 2});
    CHECK(h.epoch == std::vector<int>{0, 1});
    CHECK(h.history.at("loss")[0] == Approx(6.94713).epsilon(1e-5));
    CHECK(h.history.at("loss")[1] == Approx(8.32252).epsilon(1e-5));
    CHECK(rec->events == std::vector<std::string>{"epoch_begin 0", "batch_end 0", "batch_end 1",
                                                  "epoch_end 0 loss", "epoch_begin 1",
                                                  "batch_end 0", "epoch_end 1 loss"});
  }
  SECTION("in on_epoch_begin without steps_per_epoch") {
    auto model = linear_model();
    auto rec = std::make_shared<Recorder>();
    rec->stop_at_epoch_begin = 1;
    K::History h = model.fit(
        x, y, {.epochs = 3, .batch_size = 8, .callbacks = {rec}, .verbose = 0, .shuffle = false});
    CHECK(h.history.at("loss")[1] == Approx(8.32252).epsilon(1e-5));
  }
  SECTION("in on_train_begin") {
    // Keras 3.15: one epoch of one batch, loss 10.85.
    auto model = linear_model();
    auto rec = std::make_shared<Recorder>();
    rec->stop_at_train_begin = true;
    K::History h = model.fit(
        x, y, {.epochs = 3, .batch_size = 8, .callbacks = {rec}, .verbose = 0, .shuffle = false});
    CHECK(h.epoch == std::vector<int>{0});
    CHECK(h.history.at("loss")[0] == Approx(10.85).epsilon(1e-5));
  }
}

TEST_CASE("fit: LearningRateScheduler adds learning_rate to the epoch logs", "[cpu][keras]") {
  // Keras 3.15: History's learning_rate is 0.1 0.03 0.009; a callback listed before the
  // scheduler does not see the key, one after it does.
  auto [x, y] = linear_data();
  auto model = linear_model(0.1);
  auto before = std::make_shared<Recorder>(), after = std::make_shared<Recorder>();
  K::History h =
      model.fit(x, y,
                {.epochs = 3,
                 .batch_size = 8,
                 .callbacks = {before, K::callbacks::LearningRateScheduler([](int e, double lr) {
                                 return e == 0 ? lr : lr * 0.3;
                               }),
                               after},
                 .verbose = 0,
                 .shuffle = false});
  const auto& rates = h.history.at("learning_rate");
  REQUIRE(rates.size() == 3);
  CHECK(rates[0] == Approx(0.1));
  CHECK(rates[1] == Approx(0.03));
  CHECK(rates[2] == Approx(0.009));
  CHECK(h.history.at("loss")[2] == Approx(3.60818).epsilon(1e-5));
  CHECK(std::count(before->events.begin(), before->events.end(), "epoch_end 2 loss") == 1);
  CHECK(std::count(after->events.begin(), after->events.end(), "epoch_end 2 loss learning_rate") ==
        1);
}

TEST_CASE("fit: TensorBoard writes a schedule's learning rate", "[cpu][keras]") {
  // Keras 3.15 with ExponentialDecay(0.1, 2, 0.5) and 2 steps an epoch: 0.05, then 0.025.
  auto [x, y] = linear_data();
  const auto dir = temp_dir("tensorboard_schedule");
  auto model = linear_model(K::optimizers::schedules::ExponentialDecay(0.1, 2, 0.5));
  model.fit(x, y,
            {.epochs = 2,
             .batch_size = 8,
             .callbacks = {K::callbacks::TensorBoard((dir / "logs").string())},
             .verbose = 0,
             .shuffle = false});
  std::vector<float> rates;
  for (const auto& f : std::filesystem::directory_iterator(dir / "logs" / "train"))
    for (const auto& e : K::summary::read_scalar_events(f.path().string()))
      if (e.tag == "epoch_learning_rate") rates.push_back(e.value);
  REQUIRE(rates.size() == 2);
  CHECK(rates[0] == Approx(0.05));
  CHECK(rates[1] == Approx(0.025));
  std::filesystem::remove_all(dir);
}

TEST_CASE("fit: ModelCheckpoint saves without its monitor and fills a batch placeholder",
          "[cpu][keras]") {
  auto [x, y] = linear_data();
  const auto dir = temp_dir("checkpoint_keras3");
  auto names = [](const std::filesystem::path& d) {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(d))
      out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  };
  // Keras 3.15: save_best_only with val_loss missing warns and saves every epoch.
  auto m1 = linear_model();
  const std::string err = tf::testing::capture_stderr([&] {
    m1.fit(x, y,
           {.epochs = 2,
            .batch_size = 4,
            .callbacks = {K::callbacks::ModelCheckpoint(
                (dir / "best" / "w-{epoch}.safetensors").string(),
                {.monitor = "val_loss", .verbose = 1, .save_best_only = true})},
            .verbose = 0,
            .shuffle = false});
  });
  CHECK(names(dir / "best") == std::vector<std::string>{"w-1.safetensors", "w-2.safetensors"});
  CHECK(err.find("Can save best model only with val_loss available.") != std::string::npos);
  CHECK(err.find("skipping") == std::string::npos);
  CHECK(err.find("Epoch 2: finished saving model to") != std::string::npos);
  // Keras 3.15: {batch} is the batch's number (from 1) in its epoch: 4 batches an epoch, saved
  // every 3 batches.
  auto m2 = linear_model();
  m2.fit(x, y,
         {.epochs = 2,
          .batch_size = 4,
          .callbacks = {K::callbacks::ModelCheckpoint(
              (dir / "batches" / "w-{epoch}-{batch}.safetensors").string(), {.save_freq = 3})},
          .verbose = 0,
          .shuffle = false});
  CHECK(names(dir / "batches") ==
        std::vector<std::string>{"w-1-3.safetensors", "w-2-2.safetensors"});
  std::filesystem::remove_all(dir);
}

TEST_CASE("fit: the user's callbacks run before History and the progress bar as Keras 3",
          "[cpu][keras]") {
  auto [x, y] = linear_data();
  auto model = linear_model();
  std::ostringstream out;
  auto rec = std::make_shared<Recorder>();
  rec->out = &out;
  std::streambuf* saved = std::cout.rdbuf(out.rdbuf());
  model.fit(x, y,
            {.epochs = 2, .batch_size = 8, .callbacks = {rec}, .verbose = 2, .shuffle = false});
  std::cout.rdbuf(saved);
  const std::string text = out.str();
  const size_t begin0 = text.find("user begin 0"), head1 = text.find("Epoch 1/2");
  const size_t end0 = text.find("user end 0"), line1 = text.find("2/2 - ");
  const size_t begin1 = text.find("user begin 1");
  REQUIRE(begin0 != std::string::npos);
  REQUIRE(head1 != std::string::npos);
  REQUIRE(line1 != std::string::npos);
  CHECK(begin0 < head1);
  CHECK(head1 < end0);
  CHECK(end0 < line1);
  CHECK(line1 < begin1);
}

TEST_CASE("fit: callback messages are Keras 3's", "[cpu][keras]") {
  auto [x, y] = linear_data();
  const auto dir = temp_dir("messages");
  auto model = linear_model();
  const std::string err = tf::testing::capture_stderr([&] {
    model.fit(x, y,
              {.epochs = 2,
               .batch_size = 4,
               .callbacks =
                   {K::callbacks::ModelCheckpoint(
                        (dir / "w-{epoch:02d}-{loss:.3f}.safetensors").string(),
                        {.monitor = "loss", .verbose = 1, .save_best_only = true, .mode = "max"}),
                    K::callbacks::LearningRateScheduler([](int, double lr) { return lr; }, 1)},
               .verbose = 0,
               .shuffle = false});
  });
  CHECK(err.find("Epoch 1: loss improved from None to 6.34523, saving model to") !=
        std::string::npos);
  CHECK(err.find("Epoch 2: loss did not improve from 6.34523") != std::string::npos);
  CHECK(err.find("Epoch 1: LearningRateScheduler setting learning rate to 0.05") !=
        std::string::npos);
  CHECK(err.find("Epoch 0000") == std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("fit: ReduceLROnPlateau reduces the rate and logs it as Keras 3.15", "[cpu][keras]") {
  auto [x, y] = linear_data();
  SECTION("on the loss") {
    auto model = linear_model();
    K::History h;
    const std::string err = tf::testing::capture_stderr([&] {
      h = model.fit(
          x, y,
          {.epochs = 6,
           .batch_size = 8,
           .callbacks = {K::callbacks::ReduceLROnPlateau(
               {.monitor = "loss", .factor = 0.5, .patience = 1, .verbose = 1, .min_delta = 1.0})},
           .verbose = 0,
           .shuffle = false});
    });
    const std::vector<double> keras_loss = {6.947125434875488,  5.440598487854004,
                                            4.2779011726379395, 3.3755064010620117,
                                            2.668532609939575,  2.3836312294006348};
    const auto& loss = h.history.at("loss");
    REQUIRE(loss.size() == keras_loss.size());
    for (size_t i = 0; i < loss.size(); ++i) CHECK(loss[i] == Approx(keras_loss[i]).epsilon(1e-5));
    CHECK(h.history.at("learning_rate") ==
          std::vector<double>{0.05000000074505806, 0.05000000074505806, 0.05000000074505806,
                              0.05000000074505806, 0.02500000037252903, 0.02500000037252903});
    CHECK(model.optimizer().current_learning_rate() == static_cast<double>(0.0125f));
    CHECK(err.find("Epoch 4: ReduceLROnPlateau reducing learning rate to 0.02500000037252903.") !=
          std::string::npos);
    CHECK(err.find("Epoch 6: ReduceLROnPlateau reducing learning rate to 0.012500000186264515.") !=
          std::string::npos);
  }
  SECTION("on a compiled metric's validation value, with a cooldown") {
    auto model = linear_model();
    model.compile(K::optimizers::SGD(0.05), K::losses::MeanSquaredError(), {"mse"});
    const tf::Tensor xv = tf::slice(x, {0, 0}, {8, 3}), yv = tf::slice(y, {0, 0}, {8, 1});
    K::History h = model.fit(x, y,
                             {.epochs = 5,
                              .batch_size = 8,
                              .validation_data = {xv, yv},
                              .callbacks = {K::callbacks::ReduceLROnPlateau({.monitor = "val_mse",
                                                                             .factor = 0.2,
                                                                             .patience = 0,
                                                                             .min_delta = 1.5,
                                                                             .cooldown = 1})},
                              .verbose = 0,
                              .shuffle = false});
    const std::vector<double> keras_val = {8.322517395019531, 6.408837795257568, 4.953418731689453,
                                           4.715227127075195, 4.489070892333984};
    const auto& val = h.history.at("val_mse");
    REQUIRE(val.size() == keras_val.size());
    for (size_t i = 0; i < val.size(); ++i) CHECK(val[i] == Approx(keras_val[i]).epsilon(1e-5));
    CHECK(h.history.at("learning_rate") ==
          std::vector<double>{0.05000000074505806, 0.05000000074505806, 0.05000000074505806,
                              0.009999999776482582, 0.009999999776482582});
    // Keras 3.15 sets 0.0019999999552965165 (0.01f * 0.2), which float32 keeps as below.
    CHECK(model.optimizer().current_learning_rate() ==
          static_cast<double>(static_cast<float>(0.0019999999552965165)));
  }
}

TEST_CASE("fit: TerminateOnNaN ends the epoch after the NaN batch as Keras 3.15", "[cpu][keras]") {
  auto [x, y] = linear_data();
  std::vector<float> xs = x.numpy<float>();
  xs[9 * 3 + 1] = std::nanf("");  // row 9: the third batch of 4
  const tf::Tensor xn = tf::constant(xs, {16, 3});
  auto model = linear_model();
  std::vector<std::string> events;
  std::vector<double> batch_loss;
  K::callbacks::LambdaCallback record({
      .on_epoch_end =
          [&](int e, const K::Logs& logs) {
            std::string keys;
            for (const auto& [k, v] : logs) keys += " " + k;
            events.push_back("epoch_end " + std::to_string(e) + keys);
          },
      .on_train_end = [&](const K::Logs&) { events.push_back("train_end"); },
      .on_train_batch_end =
          [&](int64_t b, const K::Logs& logs) {
            events.push_back("batch_end " + std::to_string(b));
            batch_loss.push_back(*K::find_log(logs, "loss"));
          },
  });
  K::History h;
  const std::string err = tf::testing::capture_stderr([&] {
    h = model.fit(xn, y,
                  {.epochs = 3,
                   .batch_size = 4,
                   .validation_data = {tf::slice(x, {0, 0}, {4, 3}), tf::slice(y, {0, 0}, {4, 1})},
                   .callbacks = {K::callbacks::TerminateOnNaN(), record},
                   .verbose = 0,
                   .shuffle = false});
  });
  CHECK(events == std::vector<std::string>{"batch_end 0", "batch_end 1", "batch_end 2",
                                           "epoch_end 0 loss val_loss", "train_end"});
  REQUIRE(batch_loss.size() == 3);
  CHECK(batch_loss[0] == Approx(15.910802841186523).epsilon(1e-5));
  CHECK(batch_loss[1] == Approx(9.829255104064941).epsilon(1e-5));
  CHECK(std::isnan(batch_loss[2]));
  CHECK(h.epoch == std::vector<int>{0});
  CHECK(std::isnan(h.history.at("loss")[0]));
  CHECK(std::isnan(h.history.at("val_loss")[0]));
  CHECK(err.find("Batch 2: Invalid loss, terminating training") != std::string::npos);
  // raise_error: fit raises, and the callbacks get no on_train_end.
  auto again = linear_model();
  events.clear();
  tf::testing::require_error(
      [&] {
        again.fit(xn, y,
                  {.epochs = 3,
                   .batch_size = 4,
                   .callbacks = {K::callbacks::TerminateOnNaN(true), record},
                   .verbose = 0,
                   .shuffle = false});
      },
      {"[TerminateOnNaN]", "at batch 2"});
  CHECK(std::find(events.begin(), events.end(), "train_end") == events.end());
}

TEST_CASE("fit: CSVLogger writes each epoch's logs as Keras 3.15", "[cpu][keras]") {
  auto [x, y] = linear_data();
  const auto dir = temp_dir("csv_logger");
  const auto file = dir / "training.log";
  auto model = linear_model();
  model.fit(x, y,
            {.epochs = 2,
             .batch_size = 8,
             .validation_data = {tf::slice(x, {0, 0}, {8, 3}), tf::slice(y, {0, 0}, {8, 1})},
             .callbacks = {K::callbacks::CSVLogger(file.string())},
             .verbose = 0,
             .shuffle = false});
  // Keras 3.15: "epoch,loss,val_loss\r\n0,6.947125434875488,8.322517395019531\r\n1,
  // 5.440598487854004,6.408837795257568\r\n" (float32 sums may differ in the last digits).
  std::ifstream in(file, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> lines;
  for (size_t at = 0, end; (end = text.find("\r\n", at)) != std::string::npos; at = end + 2)
    lines.push_back(text.substr(at, end - at));
  REQUIRE(lines.size() == 3);
  CHECK(lines[0] == "epoch,loss,val_loss");
  const double keras[2][2] = {{6.947125434875488, 8.322517395019531},
                              {5.440598487854004, 6.408837795257568}};
  for (int e = 0; e < 2; ++e) {
    std::istringstream row(lines[e + 1]);
    std::string epoch, loss, val;
    std::getline(row, epoch, ',');
    std::getline(row, loss, ',');
    std::getline(row, val, ',');
    CHECK(epoch == std::to_string(e));
    CHECK(std::stod(loss) == Approx(keras[e][0]).epsilon(1e-5));
    CHECK(std::stod(val) == Approx(keras[e][1]).epsilon(1e-5));
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("fit: LambdaCallback sees the hooks in Keras 3.15's order", "[cpu][keras]") {
  auto [x, y] = linear_data();
  auto model = linear_model();
  std::vector<std::string> ev;
  auto names = [](const K::Logs& logs) {
    std::vector<std::string> k;
    for (const auto& [n, v] : logs) k.push_back(n);
    std::sort(k.begin(), k.end());
    std::string s;
    for (const auto& n : k) s += (s.empty() ? "" : ",") + n;
    return s;
  };
  auto at = [&](const char* hook) {
    return [&, hook](int64_t i, const K::Logs& l) {
      ev.push_back(std::string(hook) + " " + std::to_string(i) + " " + names(l));
    };
  };
  auto plain = [&](const char* hook) {
    return [&, hook](const K::Logs& l) { ev.push_back(std::string(hook) + " " + names(l)); };
  };
  K::callbacks::LambdaCallback lambda({.on_epoch_begin = at("on_epoch_begin"),
                                       .on_epoch_end = at("on_epoch_end"),
                                       .on_train_begin = plain("on_train_begin"),
                                       .on_train_end = plain("on_train_end"),
                                       .on_train_batch_begin = at("on_train_batch_begin"),
                                       .on_train_batch_end = at("on_train_batch_end"),
                                       .on_test_begin = plain("on_test_begin"),
                                       .on_test_end = plain("on_test_end"),
                                       .on_test_batch_end = at("on_test_batch_end")});
  model.fit(x, y,
            {.epochs = 2,
             .batch_size = 8,
             .validation_data = {tf::slice(x, {0, 0}, {8, 3}), tf::slice(y, {0, 0}, {8, 1})},
             .callbacks = {lambda},
             .verbose = 0,
             .shuffle = false});
  std::vector<std::string> keras;
  keras.push_back("on_train_begin ");
  for (int e = 0; e < 2; ++e) {
    const std::string n = std::to_string(e);
    for (const char* s :
         {"on_epoch_begin E ", "on_train_batch_begin 0 ", "on_train_batch_end 0 loss",
          "on_train_batch_begin 1 ", "on_train_batch_end 1 loss", "on_test_begin ",
          "on_test_batch_end 0 loss", "on_test_end loss", "on_epoch_end E loss,val_loss"}) {
      std::string line = s;
      if (auto p = line.find(" E "); p != std::string::npos) line.replace(p + 1, 1, n);
      keras.push_back(line);
    }
  }
  keras.push_back("on_train_end loss,val_loss");
  CHECK(ev == keras);
}

TEST_CASE("fit: EarlyStopping's monitor and mode as Keras 3.15", "[cpu][keras]") {
  auto [x, y] = linear_data();
  SECTION("an unknown mode warns and is auto") {
    auto model = linear_model();
    auto es = std::make_shared<K::callbacks::EarlyStopping>(K::callbacks::EarlyStoppingOptions{
        .monitor = "loss", .min_delta = 1.0, .mode = "sideways"});
    K::History h;
    const std::string err = tf::testing::capture_stderr([&] {
      h = model.fit(
          x, y, {.epochs = 5, .batch_size = 8, .callbacks = {es}, .verbose = 0, .shuffle = false});
    });
    CHECK(err.find("Early stopping conditioned") == std::string::npos);
    CHECK(h.epoch.size() == 4);
    CHECK(es->stopped_epoch() == 3);
  }
  SECTION("a compiled metric goes its own direction") {
    auto model = linear_model();
    model.compile(K::optimizers::SGD(0.05), K::losses::MeanSquaredError(), {"mse"});
    auto es = std::make_shared<K::callbacks::EarlyStopping>(
        K::callbacks::EarlyStoppingOptions{.monitor = "mse", .min_delta = 1.0});
    K::History h = model.fit(
        x, y, {.epochs = 5, .batch_size = 8, .callbacks = {es}, .verbose = 0, .shuffle = false});
    CHECK(h.epoch.size() == 4);
    CHECK(es->stopped_epoch() == 3);
  }
  SECTION("a missing val_loss warns once and never stops") {
    auto model = linear_model();
    K::History h;
    const std::string err = tf::testing::capture_stderr([&] {
      h = model.fit(x, y,
                    {.epochs = 3,
                     .batch_size = 8,
                     .callbacks = {K::callbacks::EarlyStopping({.monitor = "val_loss"})},
                     .verbose = 0,
                     .shuffle = false});
    });
    CHECK(h.epoch.size() == 3);
    const std::string warning =
        "Early stopping conditioned on metric `val_loss` which is not available. Available "
        "metrics are: loss";
    CHECK(err.find(warning) != std::string::npos);
    CHECK(err.find(warning, err.find(warning) + 1) == std::string::npos);
  }
  SECTION("auto with a monitor of unknown direction is an error") {
    auto model = linear_model();
    tf::testing::require_error(
        [&] {
          model.fit(x, y,
                    {.epochs = 3,
                     .batch_size = 8,
                     .callbacks = {K::callbacks::EarlyStopping({.monitor = "accuracy"})},
                     .verbose = 0,
                     .shuffle = false});
        },
        {"[EarlyStopping]", "accuracy", "mode"});
  }
}

TEST_CASE("fit: ModelCheckpoint's monitor and mode as Keras 3.15", "[cpu][keras]") {
  auto [x, y] = linear_data();
  const auto dir = temp_dir("checkpoint_mode");
  auto fit_with = [&](K::Model& model, K::callbacks::ModelCheckpointOptions o) {
    return tf::testing::capture_stderr([&] {
      model.fit(x, y,
                {.epochs = 2,
                 .batch_size = 4,
                 .callbacks = {K::callbacks::ModelCheckpoint(
                     (dir / "w-{epoch}.safetensors").string(), o)},
                 .verbose = 0,
                 .shuffle = false});
    });
  };
  SECTION("a compiled metric goes its own direction (mse falls)") {
    auto model = linear_model();
    model.compile(K::optimizers::SGD(0.05), K::losses::MeanSquaredError(), {"mse"});
    const std::string err =
        fit_with(model, {.monitor = "mse", .verbose = 1, .save_best_only = true});
    CHECK(err.find("Epoch 2: mse improved from") != std::string::npos);
  }
  SECTION("an unknown mode warns and is auto") {
    auto model = linear_model();
    const std::string err = fit_with(
        model, {.monitor = "loss", .verbose = 1, .save_best_only = true, .mode = "sideways"});
    CHECK(err.find("ModelCheckpoint mode 'sideways' is unknown, fallback to auto mode.") !=
          std::string::npos);
    CHECK(err.find("Epoch 2: loss improved from") != std::string::npos);
  }
  SECTION("auto with a monitor of unknown direction is an error, as in Keras") {
    auto model = linear_model();
    tf::testing::require_error([&] { fit_with(model, {.monitor = "custom_thing"}); },
                               {"[ModelCheckpoint]", "custom_thing", "mode"});
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("fit and evaluate compute a batch's logs only for callbacks that read them",
          "[cpu][keras]") {
  // Reading them waits for a GPU once per batch; TF skips batch hooks no callback implements.
  struct Recorder : K::callbacks::Callback {
    explicit Recorder(bool reads_logs) : reads(reads_logs) {}
    bool reads;
    std::vector<size_t> train, test;
    void on_train_batch_end(int64_t, const K::Logs& l) override { train.push_back(l.size()); }
    void on_test_batch_end(int64_t, const K::Logs& l) override { test.push_back(l.size()); }
    bool reads_batch_logs() const override { return reads; }
  };
  auto [x, y] = blobs(8, 3);
  auto model = small_model();
  model.compile(K::optimizers::SGD(0.1), K::losses::SparseCategoricalCrossentropy(true),
                {"accuracy"});
  auto quiet = std::make_shared<Recorder>(false);
  const K::History h = model.fit(x, y,
                                 {.epochs = 1,
                                  .batch_size = 4,
                                  .validation_data = {x, y},
                                  .callbacks = {quiet},
                                  .verbose = 0});
  CHECK(quiet->train == std::vector<size_t>{0, 0});
  CHECK(quiet->test == std::vector<size_t>{0, 0});
  // The epoch's logs are whole.
  for (const char* name : {"loss", "accuracy", "val_loss", "val_accuracy"})
    CHECK(h.history.count(name) == 1);
  // One callback that reads them: every callback gets them.
  auto reader = std::make_shared<Recorder>(true);
  quiet = std::make_shared<Recorder>(false);
  model.fit(x, y, {.epochs = 1, .batch_size = 4, .callbacks = {quiet, reader}, .verbose = 0});
  CHECK(reader->train == std::vector<size_t>{2, 2});
  CHECK(quiet->train == std::vector<size_t>{2, 2});
  quiet = std::make_shared<Recorder>(false);
  const std::vector<double> values =
      model.evaluate(x, y, {.batch_size = 4, .verbose = 0, .callbacks = {quiet}});
  CHECK(quiet->test == std::vector<size_t>{0, 0});
  CHECK(values.size() == 2);
  // Which built-in callbacks read them.
  namespace C = K::callbacks;
  CHECK_FALSE(C::History().reads_batch_logs());
  CHECK_FALSE(C::EarlyStopping().reads_batch_logs());
  CHECK_FALSE(C::ReduceLROnPlateau().reads_batch_logs());
  CHECK_FALSE(C::LearningRateScheduler([](int, double lr) { return lr; }).reads_batch_logs());
  CHECK_FALSE(C::ModelCheckpoint("w.safetensors").reads_batch_logs());
  CHECK(C::ModelCheckpoint("w.safetensors", {.save_freq = 3}).reads_batch_logs());
  CHECK(C::TerminateOnNaN().reads_batch_logs());
  CHECK_FALSE(C::LambdaCallback({.on_epoch_end = [](int, const K::Logs&) {}}).reads_batch_logs());
  CHECK(
      C::LambdaCallback({.on_train_batch_end = [](int64_t, const K::Logs&) {}}).reads_batch_logs());
  // The progress bar shows them when it redraws in place at verbose 1.
  C::ProgbarLogger bar({.dynamic = true}), lines({.dynamic = false});
  C::TrainingContext ctx;
  bar.set_context(&ctx);
  lines.set_context(&ctx);
  ctx.verbose = 1;
  CHECK(bar.reads_batch_logs());
  CHECK_FALSE(lines.reads_batch_logs());  // not a terminal: one line per epoch
  ctx.verbose = 2;
  CHECK_FALSE(bar.reads_batch_logs());  // one line per epoch
}
