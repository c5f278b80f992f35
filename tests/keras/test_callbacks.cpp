// Keras callbacks, the progress bar and TensorBoard event files, driven through a fake training
// context (fit fills the same context; tests of fit itself live with the model).
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "autograd/variable.h"
#include "core/error.h"
#include "keras/callbacks.h"
#include "keras/progbar.h"
#include "keras/tensorboard.h"
#include "ops/factory.h"
#include "support/testing.h"

namespace tf = tapeflow;
using tf::keras::Logs;
using tf::keras::utils::Progbar;
using tf::keras::utils::ProgbarOptions;

namespace {
struct FakeClock {
  double t = 0;
  std::function<double()> fn() {
    return [this] { return t; };
  }
};

std::filesystem::path temp_dir(const std::string& name) {
  auto p = std::filesystem::temp_directory_path() /
           ("tapeflow_test_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  return p;
}

struct OneVariable : tf::keras::Trackable {
  tf::Variable v{tf::constant(0.0f), "w"};
  std::vector<std::pair<std::string, tf::Variable>> tracked_variables() const override {
    return {{"w", v}};
  }
};
}  // namespace

TEST_CASE("Progbar: formatting helpers as Keras", "[cpu][keras]") {
  CHECK(Progbar::format_eta(5.7) == "5s");
  CHECK(Progbar::format_eta(125) == "2:05");
  CHECK(Progbar::format_eta(3700) == "1:01:40");
  CHECK(Progbar::format_time_per_unit(0.000085, "step") == "85us/step");
  CHECK(Progbar::format_time_per_unit(0.0123, "step") == "12ms/step");
  CHECK(Progbar::format_time_per_unit(3.2, "epoch") == "3s/epoch");
  CHECK(Progbar::format_value(0.29901) == "0.2990");
  CHECK(Progbar::format_value(0.0001) == "1.0000e-04");
}

TEST_CASE("Progbar: not a terminal writes one line per epoch", "[cpu][keras]") {
  std::ostringstream os;
  FakeClock clock;
  Progbar bar(3, ProgbarOptions{.stream = &os, .clock = clock.fn()});
  for (int i = 1; i <= 3; ++i) {
    clock.t = i * 0.6;
    bar.update(i, {{"loss", 1.0 / i}, {"accuracy", 0.75}});
  }
  CHECK(os.str() == "3/3 [==============================] - 2s 600ms/step - loss: 0.3333 - "
                    "accuracy: 0.7500\n");
}

TEST_CASE("Progbar: a terminal redraws the bar in place with an ETA", "[cpu][keras]") {
  std::ostringstream os;
  FakeClock clock;
  Progbar bar(4, ProgbarOptions{.dynamic = true, .stream = &os, .clock = clock.fn()});
  clock.t = 1;
  bar.update(1, {{"loss", 1.0}});
  CHECK(os.str() == "\r1/4 [======>.......................] - ETA: 3s - loss: 1.0000");
  os.str("");
  clock.t = 4;
  bar.update(4, {{"loss", 0.5}});
  CHECK(os.str() == "\r4/4 [==============================] - 4s 1s/step - loss: 0.5000\n");
}

TEST_CASE("Progbar: verbose 2 writes a summary line without the bar", "[cpu][keras]") {
  std::ostringstream os;
  FakeClock clock;
  Progbar bar(10, ProgbarOptions{.verbose = 2, .stream = &os, .clock = clock.fn()});
  clock.t = 2;
  bar.update(5, {{"loss", 0.5}});
  CHECK(os.str().empty());
  bar.update(10, {{"loss", 0.25}});
  CHECK(os.str() == "10/10 - 2s - loss: 0.2500 - 2s/epoch - 200ms/step\n");
}

TEST_CASE("ProgbarLogger: epoch headers and final lines", "[cpu][keras]") {
  std::ostringstream os;
  FakeClock clock;
  tf::keras::callbacks::TrainingContext ctx{.epochs = 2, .steps = 2, .verbose = 1};
  tf::keras::callbacks::CallbackList list(
      {tf::keras::callbacks::ProgbarLogger(ProgbarOptions{.stream = &os, .clock = clock.fn()})},
      &ctx);
  list.on_train_begin();
  for (int e = 0; e < 2; ++e) {
    list.on_epoch_begin(e);
    for (int b = 0; b < 2; ++b) {
      clock.t += 0.5;
      list.on_train_batch_end(b, {{"loss", 0.5}});
    }
    list.on_epoch_end(e, {{"loss", 0.5}, {"val_loss", 0.25}});
  }
  list.on_train_end();
  CHECK(os.str() ==
        "Epoch 1/2\n2/2 [==============================] - 1s 500ms/step - loss: 0.5000 - "
        "val_loss: 0.2500\nEpoch 2/2\n2/2 [==============================] - 1s 500ms/step - "
        "loss: 0.5000 - val_loss: 0.2500\n");
}

TEST_CASE("Progbar: the bar's time per step leaves out the first step as Keras does",
          "[cpu][keras]") {
  for (const int verbose : {1, 2}) {
    std::ostringstream os;
    FakeClock clock;
    Progbar bar(4, ProgbarOptions{.verbose = verbose, .stream = &os, .clock = clock.fn()});
    // The first step (a trace, a warm-up) takes 10 s, the others 1 s each.
    for (int i = 1; i <= 4; ++i) {
      clock.t = 9.0 + i;
      bar.update(i, {{"loss", 0.5}});
    }
    CHECK(os.str() == (verbose == 1
                           ? "4/4 [==============================] - 13s 1s/step - loss: 0.5000\n"
                           // verbose 2: tf.keras 2 divides the epoch's time by its steps
                           : "4/4 - 13s - loss: 0.5000 - 13s/epoch - 3s/step\n"));
  }
}

TEST_CASE("ProgbarLogger: one epoch has no epoch header", "[cpu][keras]") {
  std::ostringstream os;
  FakeClock clock;
  tf::keras::callbacks::TrainingContext ctx{.epochs = 1, .steps = 2, .verbose = 1};
  tf::keras::callbacks::CallbackList list(
      {tf::keras::callbacks::ProgbarLogger(ProgbarOptions{.stream = &os, .clock = clock.fn()})},
      &ctx);
  list.on_train_begin();
  list.on_epoch_begin(0);
  for (int b = 0; b < 2; ++b) {
    clock.t += 0.5;
    list.on_train_batch_end(b, {{"loss", 0.5}});
  }
  list.on_epoch_end(0, {{"loss", 0.5}});
  list.on_train_end();
  CHECK(os.str() == "2/2 [==============================] - 1s 500ms/step - loss: 0.5000\n");
}

TEST_CASE("History records every epoch's logs", "[cpu][keras]") {
  tf::keras::callbacks::TrainingContext ctx;
  auto history = std::make_shared<tf::keras::callbacks::History>();
  tf::keras::callbacks::CallbackList list({history}, &ctx);
  list.on_train_begin();
  list.on_epoch_end(0, {{"loss", 2.0}, {"accuracy", 0.5}});
  list.on_epoch_end(1, {{"loss", 1.0}, {"accuracy", 0.75}});
  CHECK(history->epoch == std::vector<int>{0, 1});
  CHECK(history->history.at("loss") == std::vector<double>{2.0, 1.0});
  CHECK(history->history.at("accuracy") == std::vector<double>{0.5, 0.75});
}

TEST_CASE("EarlyStopping: patience, min mode and restore_best_weights", "[cpu][keras]") {
  OneVariable model;
  bool stop = false;
  tf::keras::callbacks::TrainingContext ctx{.epochs = 10, .weights = &model, .stop_training = &stop};
  auto es = std::make_shared<tf::keras::callbacks::EarlyStopping>(
      tf::keras::callbacks::EarlyStoppingOptions{.monitor = "val_loss", .patience = 2,
                                                 .restore_best_weights = true});
  tf::keras::callbacks::CallbackList list({es}, &ctx);
  list.on_train_begin();
  const std::vector<double> losses = {1.0, 0.9, 0.95, 0.97, 0.99};
  int epoch = 0;
  for (; epoch < 5 && !stop; ++epoch) {
    model.v.assign(tf::constant(static_cast<float>(epoch)));
    list.on_epoch_end(epoch, {{"loss", 0.1}, {"val_loss", losses[epoch]}});
  }
  list.on_train_end();
  CHECK(stop);
  CHECK(epoch == 4);  // stopped after epoch index 3
  CHECK(es->stopped_epoch() == 3);
  CHECK(es->best_epoch() == 1);
  CHECK(es->best() == 0.9);
  CHECK(model.v.value().item<float>() == 1.0f);  // the weights of the best epoch
}

TEST_CASE("EarlyStopping: max mode for accuracy, min_delta and baseline", "[cpu][keras]") {
  bool stop = false;
  tf::keras::callbacks::TrainingContext ctx{.stop_training = &stop};
  tf::keras::callbacks::EarlyStopping es({.monitor = "val_accuracy", .min_delta = 0.01,
                                          .patience = 1});
  es.set_context(&ctx);
  es.on_train_begin({});
  es.on_epoch_end(0, {{"val_accuracy", 0.5}});
  es.on_epoch_end(1, {{"val_accuracy", 0.505}});  // below min_delta: no improvement
  CHECK(stop);
  CHECK(es.stopped_epoch() == 1);

  // With a baseline, epochs that stay short of it count towards patience even when they
  // improve, but only an epoch that does not improve stops training (Keras 3).
  stop = false;
  tf::keras::callbacks::EarlyStopping base({.monitor = "loss", .patience = 3, .baseline = 0.5});
  base.set_context(&ctx);
  base.on_train_begin({});
  for (int e = 0; e < 3; ++e) base.on_epoch_end(e, {{"loss", 0.9 - 0.1 * e}});  // never < 0.5
  CHECK_FALSE(stop);  // improving every epoch: no stop, though the wait reached the patience
  base.on_epoch_end(3, {{"loss", 0.75}});  // no improvement, 4 epochs short of the baseline
  CHECK(stop);
  CHECK(base.stopped_epoch() == 3);
}

TEST_CASE("EarlyStopping: improving epochs short of the baseline never stop training",
          "[cpu][keras]") {
  bool stop = false;
  tf::keras::callbacks::TrainingContext ctx{.stop_training = &stop};
  tf::keras::callbacks::EarlyStopping es({.monitor = "loss", .patience = 2, .baseline = 0.0});
  es.set_context(&ctx);
  es.on_train_begin({});
  for (int e = 0; e < 6; ++e) es.on_epoch_end(e, {{"loss", 6.0 - e}});  // falls, never < 0
  CHECK_FALSE(stop);
  CHECK(es.stopped_epoch() == 0);
  // Without the baseline's wait, the same patience lets one flat epoch pass.
  tf::keras::callbacks::EarlyStopping plain({.monitor = "loss", .patience = 2});
  plain.set_context(&ctx);
  plain.on_train_begin({});
  for (int e = 0; e < 3; ++e) plain.on_epoch_end(e, {{"loss", e == 2 ? 5.0 : 6.0 - e}});
  CHECK_FALSE(stop);
}

TEST_CASE("EarlyStopping: restore_best_weights restores when training ends without a stop",
          "[cpu][keras]") {
  OneVariable model;
  bool stop = false;
  tf::keras::callbacks::TrainingContext ctx{.epochs = 4, .weights = &model, .stop_training = &stop};
  auto es = std::make_shared<tf::keras::callbacks::EarlyStopping>(
      tf::keras::callbacks::EarlyStoppingOptions{
          .monitor = "loss", .patience = 10, .restore_best_weights = true});
  tf::keras::callbacks::CallbackList list({es}, &ctx);
  list.on_train_begin();
  const std::vector<double> losses = {1.0, 0.5, 0.7, 0.8};
  for (int epoch = 0; epoch < 4; ++epoch) {
    model.v.assign(tf::constant(static_cast<float>(epoch)));
    list.on_epoch_end(epoch, {{"loss", losses[epoch]}});
    // Not restored at an epoch's end: callbacks after it see that epoch's weights.
    CHECK(model.v.value().item<float>() == static_cast<float>(epoch));
  }
  CHECK_FALSE(stop);
  list.on_train_end();
  CHECK(es->stopped_epoch() == 0);
  CHECK(model.v.value().item<float>() == 1.0f);
}

TEST_CASE("EarlyStopping: a missing metric warns and does not stop", "[cpu][keras]") {
  bool stop = false;
  tf::keras::callbacks::TrainingContext ctx{.stop_training = &stop};
  tf::keras::callbacks::EarlyStopping es({.monitor = "val_loss"});
  es.set_context(&ctx);
  es.on_train_begin({});
  for (int e = 0; e < 3; ++e) es.on_epoch_end(e, {{"loss", 1.0}});
  CHECK_FALSE(stop);
}

TEST_CASE("ModelCheckpoint: path formatting and save_best_only", "[cpu][keras]") {
  std::vector<std::string> saved;
  tf::keras::callbacks::TrainingContext ctx{
      .save_weights = [&](const std::string& p) { saved.push_back(p); }};
  tf::keras::callbacks::ModelCheckpoint every("ck/w-{epoch:02d}-{val_loss:.2f}.safetensors");
  CHECK(every.format_path(3, {{"val_loss", 0.12345}}) == "ck/w-03-0.12.safetensors");
  TF_REQUIRE_THROWS_CONTAINING(every.format_path(1, {{"loss", 1.0}}), tf::InvalidArgumentError,
                               "no log named 'val_loss'");

  const auto dir = temp_dir("checkpoint");
  tf::keras::callbacks::ModelCheckpoint best((dir / "best-{epoch}.safetensors").string(),
                                             {.monitor = "val_loss", .save_best_only = true});
  best.set_context(&ctx);
  best.on_train_begin({});
  const std::vector<double> losses = {1.0, 0.8, 0.9, 0.7};
  for (int e = 0; e < 4; ++e) {
    best.on_epoch_begin(e, {});
    best.on_epoch_end(e, {{"val_loss", losses[e]}});
  }
  REQUIRE(saved.size() == 3);
  CHECK(saved[0] == (dir / "best-1.safetensors").string());
  CHECK(saved[1] == (dir / "best-2.safetensors").string());
  CHECK(saved[2] == (dir / "best-4.safetensors").string());

  // A NaN never becomes the best (it blocked every later save), as Keras starts from +-inf.
  saved.clear();
  tf::keras::callbacks::ModelCheckpoint after_nan(
      (dir / "n-{epoch}.safetensors").string(),
      {.monitor = "val_loss", .verbose = 1, .save_best_only = true});
  after_nan.set_context(&ctx);
  after_nan.on_train_begin({});
  const std::vector<double> with_nan = {std::nan(""), 1.0, std::nan(""), 0.5, 0.2};
  for (int e = 0; e < 5; ++e) {
    after_nan.on_epoch_begin(e, {});
    after_nan.on_epoch_end(e, {{"val_loss", with_nan[e]}});
  }
  REQUIRE(saved.size() == 3);
  CHECK(saved[0] == (dir / "n-2.safetensors").string());
  CHECK(saved[2] == (dir / "n-5.safetensors").string());
  // A width beyond any path is an error, not a gigabyte string.
  tf::keras::callbacks::ModelCheckpoint wide("w_{epoch:999999999}.safetensors");
  TF_REQUIRE_THROWS_CONTAINING(wide.format_path(1, {}), tf::InvalidArgumentError,
                               "larger than a path");
  tf::keras::callbacks::ModelCheckpoint precise("w_{val_loss:.99999}.safetensors");
  TF_REQUIRE_THROWS_CONTAINING(precise.format_path(1, {{"val_loss", 0.5}}),
                               tf::InvalidArgumentError, "larger than a path");
  std::filesystem::remove_all(dir);
}

TEST_CASE("CallbackList: on_epoch_end logs a scheduler adds are seen by later callbacks only",
          "[cpu][keras]") {
  double lr = 0.1;
  tf::keras::callbacks::TrainingContext ctx{.get_learning_rate = [&] { return lr; },
                                            .set_learning_rate = [&](double v) { lr = v; }};
  auto first = std::make_shared<tf::keras::callbacks::History>();
  auto last = std::make_shared<tf::keras::callbacks::History>();
  auto sched = std::make_shared<tf::keras::callbacks::LearningRateScheduler>(
      [](int, double current) { return current * 0.5; });
  tf::keras::callbacks::CallbackList list({first, sched, last}, &ctx);
  list.on_train_begin();
  const Logs logs = {{"loss", 1.0}};
  for (int e = 0; e < 2; ++e) {
    list.on_epoch_begin(e);
    list.on_epoch_end(e, logs);
  }
  CHECK(logs.size() == 1);  // the caller's logs are not changed
  CHECK(first->history.count("learning_rate") == 0);
  REQUIRE(last->history.count("learning_rate") == 1);
  CHECK(last->history.at("learning_rate") == std::vector<double>{0.05, 0.025});
  CHECK(ctx.epoch_logs == nullptr);
}

TEST_CASE("ModelCheckpoint: a batch placeholder is filled for batch saves only", "[cpu][keras]") {
  tf::keras::callbacks::ModelCheckpoint mc("w-{epoch}-{batch:02d}.safetensors");
  CHECK(mc.format_path(2, {{"loss", 1.0}}, 3) == "w-2-03.safetensors");
  TF_REQUIRE_THROWS_CONTAINING(mc.format_path(2, {{"loss", 1.0}}), tf::InvalidArgumentError,
                               "no log named 'batch'");
}

TEST_CASE("LearningRateScheduler sets the rate at each epoch", "[cpu][keras]") {
  double lr = 0.1;
  tf::keras::callbacks::TrainingContext ctx{.get_learning_rate = [&] { return lr; },
                                            .set_learning_rate = [&](double v) { lr = v; }};
  tf::keras::callbacks::LearningRateScheduler s(
      [](int epoch, double current) { return epoch < 2 ? current : current * 0.5; });
  s.set_context(&ctx);
  for (int e = 0; e < 4; ++e) s.on_epoch_begin(e, {});
  CHECK(lr == Approx(0.025));
  tf::keras::callbacks::TrainingContext no_lr;
  s.set_context(&no_lr);
  TF_REQUIRE_THROWS_CONTAINING(s.on_epoch_begin(0, {}), tf::InvalidArgumentError,
                               "learning rate is not settable");
}

TEST_CASE("BackupAndRestore resumes after the saved epoch and deletes the backup", "[cpu][keras]") {
  const auto dir = temp_dir("backup");
  std::optional<int> stored;
  tf::keras::callbacks::TrainingContext ctx{
      .save_backup = [&](const std::string& d, int epoch) {
        std::filesystem::create_directories(d);
        std::ofstream(std::filesystem::path(d) / "state") << epoch;
        stored = epoch;
      },
      .restore_backup = [&](const std::string& d) -> std::optional<int> {
        if (!std::filesystem::exists(std::filesystem::path(d) / "state")) return std::nullopt;
        return stored;
      }};
  const auto backup = (dir / "backup").string();
  tf::keras::callbacks::BackupAndRestore first(backup);
  first.set_context(&ctx);
  first.on_train_begin({});
  CHECK(first.initial_epoch() == 0);
  first.on_epoch_end(0, {});
  first.on_epoch_end(1, {});  // the process "dies" here: no on_train_end

  tf::keras::callbacks::BackupAndRestore second(backup);
  second.set_context(&ctx);
  second.on_train_begin({});
  CHECK(second.initial_epoch() == 2);
  second.on_train_end({});
  CHECK_FALSE(std::filesystem::exists(backup));
  std::filesystem::remove_all(dir);
}

TEST_CASE("TensorBoard: CRC-32C and masked checksums", "[cpu][keras]") {
  const std::string s = "123456789";
  CHECK(tf::keras::summary::detail::crc32c(s.data(), s.size()) == 0xE3069283u);
  const std::string zeros(32, '\0');
  CHECK(tf::keras::summary::detail::crc32c(zeros.data(), zeros.size()) == 0x8A9136AAu);
}

TEST_CASE("TensorBoard callback writes epoch scalars that read back", "[cpu][keras]") {
  const auto dir = temp_dir("tensorboard");
  double lr = 0.01;
  tf::keras::callbacks::TrainingContext ctx{.get_learning_rate = [&] { return lr; }};
  tf::keras::callbacks::TensorBoard tb(dir.string());
  tb.set_context(&ctx);
  tb.on_train_begin({});
  tb.on_epoch_end(0, {{"loss", 0.5}, {"accuracy", 0.8}, {"val_loss", 0.6}});
  tb.on_epoch_end(1, {{"loss", 0.25}, {"accuracy", 0.9}, {"val_loss", 0.4}});
  tb.on_train_end({});

  auto only_file = [](const std::filesystem::path& d) {
    std::vector<std::filesystem::path> files;
    for (const auto& e : std::filesystem::directory_iterator(d)) files.push_back(e.path());
    REQUIRE(files.size() == 1);
    CHECK(files[0].filename().string().starts_with("events.out.tfevents."));
    return files[0].string();
  };
  const auto train = tf::keras::summary::read_scalar_events(only_file(dir / "train"));
  REQUIRE(train.size() == 6);
  CHECK(train[0].tag == "epoch_loss");
  CHECK(train[0].value == 0.5f);
  CHECK(train[0].step == 0);
  CHECK(train[1].tag == "epoch_accuracy");
  CHECK(train[2].tag == "epoch_learning_rate");
  CHECK(train[2].value == 0.01f);
  CHECK(train[3].step == 1);
  CHECK(train[4].value == 0.9f);
  const auto val = tf::keras::summary::read_scalar_events(only_file(dir / "validation"));
  REQUIRE(val.size() == 2);
  CHECK(val[1].tag == "epoch_loss");
  CHECK(val[1].value == 0.4f);
  CHECK(val[1].step == 1);

  // A flipped byte or a cut file is an error naming the file.
  const std::string path = only_file(dir / "validation");
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  std::string bad = bytes;
  bad[bad.size() - 10] ^= 0x55;
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bad;
  TF_REQUIRE_THROWS_CONTAINING(tf::keras::summary::read_scalar_events(path),
                               tf::InvalidArgumentError, path);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes.substr(0, bytes.size() - 3);
  TF_REQUIRE_THROWS_CONTAINING(tf::keras::summary::read_scalar_events(path),
                               tf::InvalidArgumentError, "truncated");
  std::filesystem::remove_all(dir);
}

TEST_CASE("Progbar: a negative width is rejected and a giant ETA or step count is handled",
          "[cpu][keras]") {
  std::ostringstream os;
  tf::testing::require_error([&] { Progbar bar(3, ProgbarOptions{.width = -5, .stream = &os}); },
                             {"[Progbar]", "width", "-5"});
  CHECK(Progbar::format_eta(std::numeric_limits<double>::infinity()) == "?");
  CHECK(Progbar::format_eta(std::numeric_limits<double>::quiet_NaN()) == "?");
  CHECK(Progbar::format_eta(1e300) == "?");
  FakeClock clock;
  Progbar bar(std::numeric_limits<int64_t>::max(),
              ProgbarOptions{.dynamic = true, .stream = &os, .clock = clock.fn()});
  clock.t = 1e9;
  bar.update(1);
  CHECK(os.str().find("ETA: ?") != std::string::npos);
  // Far past the target: the bar is full, not an overflowed width.
  Progbar small(2, ProgbarOptions{.dynamic = true, .stream = &os, .clock = clock.fn()});
  os.str("");
  small.update(std::numeric_limits<int64_t>::max() / 2, {}, false);
  CHECK(os.str().find("[==============================]") != std::string::npos);
}

TEST_CASE("CallbackList: null callbacks are rejected and contexts detached at the end",
          "[cpu][keras]") {
  tf::keras::callbacks::TrainingContext ctx{.epochs = 3};
  std::shared_ptr<tf::keras::callbacks::History> none;
  tf::testing::require_error([&] { tf::keras::callbacks::CallbackList list({none}, &ctx); },
                             {"[callbacks]", "null pointer"});
  double lr = 0.1;
  tf::keras::callbacks::TrainingContext outer{.get_learning_rate = [&] { return lr; },
                                              .set_learning_rate = [&](double v) { lr = v; }};
  auto sched = std::make_shared<tf::keras::callbacks::LearningRateScheduler>(
      [](int, double current) { return current * 0.5; });
  {
    tf::keras::callbacks::CallbackList list({sched}, &outer);
    {
      tf::keras::callbacks::TrainingContext inner;
      tf::keras::callbacks::CallbackList nested({sched}, &inner);
    }
    sched->on_epoch_begin(0, {});  // the outer context is back
    CHECK(lr == Approx(0.05));
  }
  TF_REQUIRE_THROWS_CONTAINING(sched->on_epoch_begin(1, {}), tf::FailedPreconditionError,
                               "not attached");
}

TEST_CASE("BackupAndRestore: a restored epoch out of range names the backup directory",
          "[cpu][keras]") {
  tf::keras::callbacks::TrainingContext ctx{
      .save_backup = [](const std::string&, int) {},
      .restore_backup = [](const std::string&) -> std::optional<int> {
        return std::numeric_limits<int>::max();
      }};
  tf::keras::callbacks::BackupAndRestore b("/tmp/some_backup_dir");
  b.set_context(&ctx);
  tf::testing::require_error([&] { b.on_train_begin({}); },
                             {"[BackupAndRestore]", "/tmp/some_backup_dir", "2147483647"});
}

TEST_CASE("ModelCheckpoint: an uncreatable directory is a tf error naming it", "[cpu][keras]") {
  const auto dir = temp_dir("ckpt_file_parent");
  const auto blocker = dir / "file";
  std::ofstream(blocker) << "x";
  tf::keras::callbacks::TrainingContext ctx{.save_weights = [](const std::string&) {}};
  tf::keras::callbacks::ModelCheckpoint cp((blocker / "sub" / "w.safetensors").string());
  cp.set_context(&ctx);
  cp.on_train_begin({});
  cp.on_epoch_begin(0, {});
  TF_REQUIRE_THROWS_CONTAINING(cp.on_epoch_end(0, {}), tf::FailedPreconditionError,
                               "[ModelCheckpoint]");
  std::filesystem::remove_all(dir);
}

TEST_CASE("TensorBoard: a failing flush is an error and the destructor logs a failing close",
          "[cpu][keras]") {
  const auto dir = temp_dir("tensorboard_efbig");
  const std::string log = (dir / "stderr.txt").string();
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // A file size limit makes write(2) fail with EFBIG (SIGXFSZ ignored), as a full disk would.
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 2);
    ::signal(SIGXFSZ, SIG_IGN);
    int code = 1;
    try {
      tf::keras::summary::EventFileWriter writer((dir / "train").string());
      // The header is written; 20 events (about 1 KiB) wait in the stdio buffer, more than the
      // 512 bytes the limit leaves.
      const rlimit limit{512, 512};
      ::setrlimit(RLIMIT_FSIZE, &limit);
      for (int i = 0; i < 20; ++i) writer.scalar("epoch_loss", 0.5, i);
      try {
        writer.flush();  // used to return as if every event had been written
      } catch (const tf::InternalError& e) {
        const std::string what = e.what();
        if (what.find(writer.path()) != std::string::npos &&
            what.find("events were lost") != std::string::npos)
          code = 0;
      }
      // The destructor's fclose fails too, which it logs (and never throws).
    } catch (...) {
      code = 2;
    }
    std::fflush(stderr);
    ::_exit(code);
  }
  int wstatus = 0;
  ::waitpid(child, &wstatus, 0);
  REQUIRE(WIFEXITED(wstatus));
  CHECK(WEXITSTATUS(wstatus) == 0);
  std::ifstream in(log);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(text.find("TensorBoard: closing") != std::string::npos);
  CHECK(text.find("events.out.tfevents.") != std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("TensorBoard: read_scalar_events refuses a named pipe or a directory", "[cpu][keras]") {
  const auto dir = temp_dir("tensorboard_fifo");
  const std::string fifo = (dir / "events.out.tfevents.pipe").string();
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  // A named pipe used to hang, a directory to throw std::ios_base::failure.
  TF_REQUIRE_THROWS_CONTAINING(tf::keras::summary::read_scalar_events(fifo),
                               tf::InvalidArgumentError, fifo + " is not a regular file");
  TF_REQUIRE_THROWS_CONTAINING(tf::keras::summary::read_scalar_events(dir.string()),
                               tf::InvalidArgumentError, dir.string() + " is not a regular file");
  TF_REQUIRE_THROWS_CONTAINING(tf::keras::summary::read_scalar_events((dir / "absent").string()),
                               tf::NotFoundError, "absent");
  std::filesystem::remove_all(dir);
}

// ---- callbacks against Keras 3.15 (the expected values and messages were produced by Keras 3.15
// on the same scripted logs) ----

namespace {

// A float32 learning rate, as the optimizer keeps it (Keras' too): what reads back is rounded.
struct Float32Rate {
  float lr;
  tf::keras::callbacks::TrainingContext context() {
    return {.get_learning_rate = [this] { return static_cast<double>(lr); },
            .set_learning_rate = [this](double v) { lr = static_cast<float>(v); }};
  }
};

// Runs ReduceLROnPlateau over `values` of `monitor` (with a "loss" log before it) and returns
// the "learning_rate" logs a History after it recorded; `err` gets its messages.
std::vector<double> plateau_rates(tf::keras::callbacks::ReduceLROnPlateauOptions options, float lr,
                                  const std::vector<double>& values, std::string* err,
                                  const std::string& key = "val_loss") {
  Float32Rate rate{lr};
  auto ctx = rate.context();
  auto history = std::make_shared<tf::keras::callbacks::History>();
  std::vector<double> out;
  *err = tf::testing::capture_stderr([&] {
    tf::keras::callbacks::CallbackList list(
        {tf::keras::callbacks::ReduceLROnPlateau(std::move(options)), history}, &ctx);
    list.on_train_begin();
    for (size_t e = 0; e < values.size(); ++e)
      list.on_epoch_end(static_cast<int>(e), {{"loss", 1.0}, {key, values[e]}});
    list.on_train_end();
  });
  if (history->history.count("learning_rate")) out = history->history.at("learning_rate");
  return out;
}

double f32(double v) {
  return static_cast<double>(static_cast<float>(v));
}

}  // namespace

TEST_CASE("python_float_repr writes doubles as Python's repr", "[cpu][keras]") {
  using tf::keras::callbacks::detail::python_float_repr;
  const std::vector<std::pair<double, std::string>> cases = {
      {1.0, "1.0"},
      {0.1, "0.1"},
      {1e-5, "1e-05"},
      {1e-4, "0.0001"},
      {1e15, "1000000000000000.0"},
      {1e16, "1e+16"},
      {1234567890123456.0, "1234567890123456.0"},
      {12345678901234567.0, "1.2345678901234568e+16"},
      {0.30000001192092896, "0.30000001192092896"},
      {-0.0, "-0.0"},
      {5e-324, "5e-324"},
      {1.7976931348623157e308, "1.7976931348623157e+308"},
      {100.0, "100.0"},
      {1e22, "1e+22"},
      {2.5e-7, "2.5e-07"},
      {123456789.0, "123456789.0"},
      {-0.05000000074505806, "-0.05000000074505806"},
      {std::nan(""), "nan"},
      {std::numeric_limits<double>::infinity(), "inf"},
      {-std::numeric_limits<double>::infinity(), "-inf"}};
  for (const auto& [v, text] : cases) CHECK(python_float_repr(v) == text);
}

TEST_CASE("ReduceLROnPlateau: patience cooldown min_delta and min_lr as Keras 3.15",
          "[cpu][keras]") {
  std::string err;
  // Keras 3.15: the rate each epoch trained with, logged before any reduction at its end.
  const auto rates =
      plateau_rates({.factor = 0.5,
                     .patience = 2,
                     .verbose = 1,
                     .min_delta = 0.01,
                     .cooldown = 1,
                     .min_lr = 0.02},
                    0.1f, {1.0, 0.9, 0.95, 0.97, 0.99, 0.99, 0.89, 0.9, 0.9, 0.9, 0.9, 0.9}, &err);
  CHECK(rates == std::vector<double>{f32(0.1), f32(0.1), f32(0.1), f32(0.1), f32(0.05), f32(0.05),
                                     f32(0.025), f32(0.025), f32(0.02), f32(0.02), f32(0.02),
                                     f32(0.02)});
  CHECK(rates[4] == 0.05000000074505806);
  CHECK(err.find("Epoch 4: ReduceLROnPlateau reducing learning rate to 0.05000000074505806.") !=
        std::string::npos);
  CHECK(err.find("Epoch 6: ReduceLROnPlateau reducing learning rate to 0.02500000037252903.") !=
        std::string::npos);
  // Reduced to min_lr itself, then no further: a float32 rate at min_lr is not above it.
  CHECK(err.find("Epoch 8: ReduceLROnPlateau reducing learning rate to 0.02.") !=
        std::string::npos);
  CHECK(err.find("Epoch 9:") == std::string::npos);

  // patience 0 reduces at every epoch that does not improve; the messages print the product
  // before it is rounded to float32.
  CHECK(plateau_rates({.factor = 0.1, .patience = 0, .verbose = 1}, 0.1f, {1.0, 1.0, 1.0, 1.0, 1.0},
                      &err) == std::vector<double>{f32(0.1), f32(0.1), 0.009999999776482582,
                                                   0.0009999999310821295, 9.99999901978299e-05});
  for (const char* line :
       {"Epoch 2: ReduceLROnPlateau reducing learning rate to 0.010000000149011612.",
        "Epoch 3: ReduceLROnPlateau reducing learning rate to 0.0009999999776482583.",
        "Epoch 4: ReduceLROnPlateau reducing learning rate to 9.999999310821295e-05.",
        "Epoch 5: ReduceLROnPlateau reducing learning rate to 9.999999019782991e-06."})
    CHECK(err.find(line) != std::string::npos);

  // min_lr bounds the rate.
  CHECK(plateau_rates({.factor = 0.5, .patience = 0, .verbose = 1, .min_lr = 0.0002}, 0.001f,
                      std::vector<double>(8, 1.0), &err) ==
        std::vector<double>{f32(0.001), f32(0.001), f32(0.0005), f32(0.00025), f32(0.0002),
                            f32(0.0002), f32(0.0002), f32(0.0002)});
  CHECK(err.find("Epoch 4: ReduceLROnPlateau reducing learning rate to 0.0002.") !=
        std::string::npos);

  // A cooldown of 2 with patience 1: a reduction every second epoch.
  CHECK(plateau_rates({.factor = 0.5, .patience = 1, .cooldown = 2}, 1.0f,
                      std::vector<double>(10, 1.0), &err) ==
        std::vector<double>{1.0, 1.0, 0.5, 0.5, 0.25, 0.25, 0.125, 0.125, 0.0625, 0.0625});
  CHECK(err.empty());  // verbose 0
}

TEST_CASE("ReduceLROnPlateau: max mode and a NaN first value as Keras 3.15", "[cpu][keras]") {
  std::string err;
  CHECK(plateau_rates({.monitor = "val_accuracy", .factor = 0.5, .patience = 1, .mode = "max"},
                      0.1f, {0.5, 0.6, 0.6, 0.55, 0.7, 0.7}, &err, "val_accuracy") ==
        std::vector<double>{f32(0.1), f32(0.1), f32(0.1), f32(0.05), f32(0.025), f32(0.025)});
  // A NaN first value becomes the best (Keras' None), and nothing improves on it.
  CHECK(plateau_rates({.factor = 0.5, .patience = 1}, 0.1f, {std::nan(""), 1.0, 0.5, 0.4}, &err) ==
        std::vector<double>{f32(0.1), f32(0.1), f32(0.05), f32(0.025)});
}

TEST_CASE("ReduceLROnPlateau: a missing monitor warns once and changes nothing", "[cpu][keras]") {
  std::string err;
  CHECK(plateau_rates({.factor = 0.5, .patience = 0}, 0.1f, {1.0, 1.0, 1.0}, &err, "loss2") ==
        std::vector<double>(3, f32(0.1)));
  const std::string warning =
      "Learning rate reduction is conditioned on metric `val_loss` which is not available. "
      "Available metrics are: loss,loss2,learning_rate.";
  const size_t at = err.find(warning);
  CHECK(at != std::string::npos);
  CHECK(err.find(warning, at + 1) == std::string::npos);
}

TEST_CASE("ReduceLROnPlateau: options and the mode as Keras 3.15", "[cpu][keras]") {
  TF_REQUIRE_THROWS_CONTAINING(tf::keras::callbacks::ReduceLROnPlateau({.factor = 1.0}),
                               tf::InvalidArgumentError, "factor must be < 1.0");
  TF_REQUIRE_THROWS_CONTAINING(tf::keras::callbacks::ReduceLROnPlateau({.factor = std::nan("")}),
                               tf::InvalidArgumentError, "factor must be < 1.0");
  TF_REQUIRE_THROWS_CONTAINING(tf::keras::callbacks::ReduceLROnPlateau({.min_lr = std::nan("")}),
                               tf::InvalidArgumentError, "min_lr");
  // An unknown mode warns and is "auto" (val_loss: min).
  std::string err;
  const std::string construct = tf::testing::capture_stderr(
      [] { tf::keras::callbacks::ReduceLROnPlateau({.mode = "sideways"}); });
  CHECK(construct.find("ReduceLROnPlateau mode 'sideways' is unknown, fallback to auto mode.") !=
        std::string::npos);
  CHECK(plateau_rates({.factor = 0.5, .patience = 1, .mode = "sideways"}, 0.1f, {1.0, 1.0, 1.0},
                      &err) == std::vector<double>{f32(0.1), f32(0.1), f32(0.05)});

  // In fit ("auto" with the compiled metrics' directions) a monitor of unknown direction is an
  // error, as Keras 3's ValueError; outside fit the name decides.
  Float32Rate rate{0.1f};
  auto ctx = rate.context();
  ctx.metric_direction = [](const std::string& name) -> std::string {
    return name == "accuracy" ? "up" : "";
  };
  tf::keras::callbacks::ReduceLROnPlateau unknown({.monitor = "val_foo"});
  unknown.set_context(&ctx);
  unknown.on_train_begin({});
  tf::testing::require_error(
      [&] {
        unknown.on_epoch_end(0, {{"val_foo", 1.0}});
      },
      {"[ReduceLROnPlateau]", "val_foo", "mode"});
  tf::keras::callbacks::ReduceLROnPlateau accuracy(
      {.monitor = "val_accuracy", .factor = 0.5, .patience = 0});
  accuracy.set_context(&ctx);
  accuracy.on_train_begin({});
  for (int e = 0; e < 3; ++e) accuracy.on_epoch_end(e, {{"val_accuracy", 0.5 + 0.1 * e}});
  CHECK(rate.lr == 0.1f);  // rising accuracy improves

  // Reducing a rate that cannot be set (a schedule) is an error, as in Keras.
  tf::keras::callbacks::TrainingContext schedule{.get_learning_rate = [] { return 0.1; }};
  tf::keras::callbacks::ReduceLROnPlateau on_schedule({.monitor = "loss", .patience = 0});
  on_schedule.set_context(&schedule);
  on_schedule.on_train_begin({});
  on_schedule.on_epoch_end(0, {{"loss", 1.0}});
  tf::testing::require_error(
      [&] {
        on_schedule.on_epoch_end(1, {{"loss", 1.0}});
      },
      {"[ReduceLROnPlateau]", "not settable"});
}

TEST_CASE("TerminateOnNaN stops after a NaN or infinite loss", "[cpu][keras]") {
  bool stop = false;
  tf::keras::callbacks::TrainingContext ctx{.stop_training = &stop};
  tf::keras::callbacks::TerminateOnNaN t;
  t.set_context(&ctx);
  t.on_train_batch_end(0, {{"loss", 1.0}});
  t.on_train_batch_end(1, {{"accuracy", std::nan("")}});  // only the loss counts
  CHECK_FALSE(stop);
  std::string err = tf::testing::capture_stderr([&] {
    t.on_train_batch_end(2, {{"loss", std::nan("")}});
  });
  CHECK(stop);
  CHECK(err.find("Batch 2: Invalid loss, terminating training") != std::string::npos);
  stop = false;
  err = tf::testing::capture_stderr([&] {
    t.on_train_batch_end(7, {{"loss", -std::numeric_limits<double>::infinity()}});
  });
  CHECK(stop);
  CHECK(err.find("Batch 7: Invalid loss, terminating training") != std::string::npos);
  // raise_error: an error at once, the flag untouched.
  stop = false;
  tf::keras::callbacks::TerminateOnNaN raising(true);
  raising.set_context(&ctx);
  tf::testing::require_error(
      [&] {
        raising.on_train_batch_end(0, {{"loss", std::nan("")}});
      },
      {"[TerminateOnNaN]", "at batch 0", "Loss value: nan"});
  CHECK_FALSE(stop);
}

namespace {
std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Runs a CSVLogger over the epochs' logs, as Keras' CSVLogger test scenarios.
void csv_run(const std::string& file, const std::vector<Logs>& epochs, std::string sep = ",",
             bool append = false, int worker_index = 0) {
  tf::keras::callbacks::TrainingContext ctx{.worker_index = worker_index};
  tf::keras::callbacks::CSVLogger logger(file, std::move(sep), append);
  tf::keras::callbacks::CallbackList list({logger}, &ctx);
  list.on_train_begin();
  for (size_t e = 0; e < epochs.size(); ++e) list.on_epoch_end(static_cast<int>(e), epochs[e]);
  list.on_train_end();
}
}  // namespace

TEST_CASE("CSVLogger writes the file Keras 3.15 writes", "[cpu][keras]") {
  const auto dir = temp_dir("csv");
  const auto file = dir / "log.csv";
  const double nan = std::nan(""), inf = std::numeric_limits<double>::infinity();
  // Sorted names; without val_ names, NA columns for them.
  csv_run(file.string(),
          {{{"loss", 0.5}, {"accuracy", 0.25}}, {{"loss", 0.25}, {"accuracy", 1.0 / 3}}});
  CHECK(read_file(file) ==
        "epoch,accuracy,loss,val_accuracy,val_loss\r\n0,0.25,0.5,NA,NA\r\n1,0.3333333333333333,"
        "0.25,NA,NA\r\n");
  // Rewritten; the first epoch's names fix the columns.
  csv_run(file.string(), {{{"val_loss", 0.1}, {"loss", 1e-5}, {"b", 1e16}, {"a", 123456789.0}},
                          {{"loss", nan}, {"a", inf}, {"extra", 1.0}}});
  const std::string first =
      "epoch,a,b,loss,val_loss\r\n0,123456789.0,1e+16,1e-05,0.1\r\n1,inf,NA,nan,NA\r\n";
  CHECK(read_file(file) == first);
  // Appended without a header; an empty or new file gets one.
  csv_run(file.string(), {{{"loss", 2.0}}}, ",", true);
  CHECK(read_file(file) == first + "0,2.0,NA\r\n");
  std::ofstream(file, std::ios::trunc).close();
  csv_run(file.string(), {{{"loss", 2.0}}}, ",", true);
  CHECK(read_file(file) == "epoch,loss,val_loss\r\n0,2.0,NA\r\n");
  std::filesystem::remove(file);
  csv_run(file.string(), {{{"loss", 3.0}}}, ",", true);
  CHECK(read_file(file) == "epoch,loss,val_loss\r\n0,3.0,NA\r\n");
  // Another separator; names holding it or a quote are quoted.
  csv_run(file.string(), {{{"lo;ss", 2.0}, {"q\"x", 1.0}, {"loss", 0.1}}}, ";");
  CHECK(read_file(file) ==
        "epoch;\"lo;ss\";loss;\"q\"\"x\";\"val_lo;ss\";val_loss;\"val_q\"\"x\"\r\n0;2.0;0.1;1.0;NA;"
        "NA;"
        "NA\r\n");
  csv_run(file.string(), {{{"loss", 2.0}}}, "\t");
  CHECK(read_file(file) == "epoch\tloss\tval_loss\r\n0\t2.0\tNA\r\n");
  // A first epoch without logs: the epoch column alone.
  csv_run(file.string(), {{}, {{"loss", 1.0}}});
  CHECK(read_file(file) == "epoch\r\n0\r\n1\r\n");
  // Another worker than the chief writes nothing.
  std::filesystem::remove(file);
  csv_run(file.string(), {{{"loss", 1.0}}}, ",", false, 1);
  CHECK_FALSE(std::filesystem::exists(file));
  std::filesystem::remove_all(dir);
}

TEST_CASE("CSVLogger: bad separators and files are errors naming them", "[cpu][keras]") {
  tf::testing::require_error([] { tf::keras::callbacks::CSVLogger("a.csv", ",,"); },
                             {"[CSVLogger]", "separator", ",,"});
  tf::testing::require_error([] { tf::keras::callbacks::CSVLogger("a.csv", ""); },
                             {"[CSVLogger]", "separator"});
  tf::testing::require_error([] { tf::keras::callbacks::CSVLogger("a.csv", "\""); },
                             {"[CSVLogger]", "separator"});
  tf::testing::require_error([] { tf::keras::callbacks::CSVLogger(""); }, {"[CSVLogger]", "empty"});
  const auto dir = temp_dir("csv_errors");
  const std::string missing = (dir / "no" / "log.csv").string();
  TF_REQUIRE_THROWS_CONTAINING(csv_run(missing, {}), tf::NotFoundError, missing);
  TF_REQUIRE_THROWS_CONTAINING(csv_run(dir.string(), {}), tf::FailedPreconditionError,
                               dir.string());
  TF_REQUIRE_THROWS_CONTAINING(csv_run(dir.string(), {}, ",", true), tf::FailedPreconditionError,
                               dir.string());
  // A full disk: the row's write fails with the file's name.
  if (std::filesystem::exists("/dev/full")) {
    TF_REQUIRE_THROWS_CONTAINING(csv_run("/dev/full", {{{"loss", 1.0}}}), tf::InternalError,
                                 "writing /dev/full failed");
  }
  // on_epoch_end before on_train_begin.
  tf::keras::callbacks::TrainingContext ctx;
  tf::keras::callbacks::CSVLogger early((dir / "x.csv").string());
  early.set_context(&ctx);
  TF_REQUIRE_THROWS_CONTAINING(early.on_epoch_end(0, {}), tf::FailedPreconditionError,
                               "before on_train_begin");
  std::filesystem::remove_all(dir);
}

TEST_CASE("LambdaCallback calls the functions it was given", "[cpu][keras]") {
  std::vector<std::string> events;
  tf::keras::callbacks::TrainingContext ctx;
  tf::keras::callbacks::LambdaCallback lambda({
      .on_epoch_begin = [&](int e,
                            const Logs&) { events.push_back("epoch_begin " + std::to_string(e)); },
      .on_epoch_end =
          [&](int e, const Logs& l) {
            events.push_back("epoch_end " + std::to_string(e) + " " + std::to_string(l.size()));
          },
      .on_train_begin = [&](const Logs&) { events.push_back("train_begin"); },
      .on_train_batch_end =
          [&](int64_t b, const Logs&) { events.push_back("batch_end " + std::to_string(b)); },
      .on_predict_end = [&](const Logs&) { events.push_back("predict_end"); },
  });
  tf::keras::callbacks::CallbackList list({lambda}, &ctx);
  list.on_train_begin();
  list.on_epoch_begin(0);
  list.on_train_batch_begin(0);  // not given: nothing
  list.on_train_batch_end(0, {{"loss", 1.0}});
  list.on_epoch_end(0, {{"loss", 1.0}, {"val_loss", 2.0}});
  list.on_train_end();
  list.on_predict_end();
  CHECK(events == std::vector<std::string>{"train_begin", "epoch_begin 0", "batch_end 0",
                                           "epoch_end 0 2", "predict_end"});
}

TEST_CASE("EarlyStopping: an unknown mode warns and is auto as Keras 3.15", "[cpu][keras]") {
  bool stop = false;
  tf::keras::callbacks::TrainingContext ctx{.stop_training = &stop};
  std::optional<tf::keras::callbacks::EarlyStopping> es;
  const std::string err = tf::testing::capture_stderr([&] {
    es.emplace(tf::keras::callbacks::EarlyStoppingOptions{
        .monitor = "loss", .min_delta = 1.0, .mode = "sideways"});
  });
  CHECK(err.find("EarlyStopping mode 'sideways' is unknown, fallback to auto mode.") !=
        std::string::npos);
  es->set_context(&ctx);
  es->on_train_begin({});
  // Keras 3.15's losses with min_delta 1 (the fit test below trains them): stops at epoch 3.
  const std::vector<double> losses = {6.947125434875488, 5.440598487854004, 4.2779011726379395,
                                      3.3755064010620117};
  for (int e = 0; e < 4 && !stop; ++e) es->on_epoch_end(e, {{"loss", losses[e]}});
  CHECK(stop);
  CHECK(es->stopped_epoch() == 3);
}

TEST_CASE("EarlyStopping: monitor direction and a NaN first value as Keras 3.15", "[cpu][keras]") {
  bool stop = false;
  tf::keras::callbacks::TrainingContext ctx{.stop_training = &stop};
  ctx.metric_direction = [](const std::string& name) -> std::string {
    return name == "accuracy" ? "up" : name == "mse" ? "down" : "";
  };
  // In fit, "auto" with a name that is neither the loss nor a metric of known direction is an
  // error at the first epoch's end (Keras 3's ValueError); with min or max it only warns.
  tf::keras::callbacks::EarlyStopping typo({.monitor = "val_los"});
  typo.set_context(&ctx);
  typo.on_train_begin({});
  tf::testing::require_error(
      [&] {
        typo.on_epoch_end(0, {{"loss", 1.0}});
      },
      {"[EarlyStopping]", "val_los", "mode"});
  tf::keras::callbacks::EarlyStopping typo_min({.monitor = "val_los", .mode = "min"});
  typo_min.set_context(&ctx);
  typo_min.on_train_begin({});
  const std::string err = tf::testing::capture_stderr([&] {
    for (int e = 0; e < 3; ++e) typo_min.on_epoch_end(e, {{"loss", 1.0}, {"mse", 1.0}});
  });
  CHECK_FALSE(stop);
  const std::string warning =
      "Early stopping conditioned on metric `val_los` which is not available. Available metrics "
      "are: loss,mse";
  CHECK(err.find(warning) != std::string::npos);
  CHECK(err.find(warning, err.find(warning) + 1) == std::string::npos);  // once per fit
  // A compiled metric's direction: accuracy rises.
  tf::keras::callbacks::EarlyStopping acc({.monitor = "val_accuracy", .patience = 0});
  acc.set_context(&ctx);
  acc.on_train_begin({});
  acc.on_epoch_end(0, {{"val_accuracy", 0.5}});
  acc.on_epoch_end(1, {{"val_accuracy", 0.6}});
  CHECK_FALSE(stop);
  CHECK(acc.best() == 0.6);
  // A NaN first value is the best (Keras' None) and nothing improves on it: Keras 3.15 stops at
  // epoch 1.
  tf::keras::callbacks::EarlyStopping nan_first({.monitor = "loss", .patience = 0});
  nan_first.set_context(&ctx);
  nan_first.on_train_begin({});
  nan_first.on_epoch_end(0, {{"loss", std::nan("")}});
  CHECK_FALSE(stop);
  nan_first.on_epoch_end(1, {{"loss", 1.0}});
  CHECK(stop);
  CHECK(nan_first.stopped_epoch() == 1);
  CHECK(std::isnan(nan_first.best()));
}
