// Keras callbacks: hooks that fit/evaluate/predict call around epochs and batches. A callback
// sees the training loop through a TrainingContext that fit fills in (the model's weights, the
// optimizer's learning rate, weight saving, the stop flag), so callbacks do not depend on the
// Model or Optimizer classes. Callbacks run on the thread that calls fit.
//
//   auto history = model.fit(x, y, {.epochs = 20, .callbacks = {
//       tf::keras::callbacks::EarlyStopping({.monitor = "val_loss", .patience = 3}),
//       tf::keras::callbacks::ModelCheckpoint("ckpt/weights-{epoch:02d}.safetensors")}});
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "keras/progbar.h"
#include "keras/trackable.h"

namespace tapeflow::keras {

// Logs: (name, value) in Keras' order (loss, metrics, then val_ ones).
using Logs = std::vector<std::pair<std::string, double>>;
std::optional<double> find_log(const Logs& logs, const std::string& name);

namespace callbacks {

// What a callback may see and do of the loop that runs it (fit fills every field it can).
struct TrainingContext {
  int epochs = 0;
  int64_t steps = -1;  // steps per epoch, -1 when unknown
  int verbose = 1;
  // The model's weights (for EarlyStopping's restore_best_weights).
  const Trackable* weights = nullptr;
  // Set to true to end training after the current epoch (Keras' model.stop_training).
  bool* stop_training = nullptr;
  std::function<double()> get_learning_rate = {};
  std::function<void(double)> set_learning_rate = {};
  std::function<void(const std::string&)> save_weights = {};
  // Whole training state (model, optimizer, epoch) for BackupAndRestore.
  std::function<void(const std::string&, int)> save_backup = {};
  std::function<std::optional<int>(const std::string&)> restore_backup = {};
  // Under a MultiWorkerMirroredStrategy: this worker's index and the number of workers. Worker 0
  // (the chief) alone writes the files that every worker would write alike (TF's rule).
  int worker_index = 0;
  int num_workers = 1;
  // With several workers: every worker's `value`, in worker order. A collective: every worker's
  // callbacks call it at the same point (`what` names the caller in its errors).
  std::function<std::vector<int64_t>(int64_t value, const char* what)> gather_over_workers = {};
  // While a CallbackList runs on_epoch_end: the logs its callbacks see, which a callback may
  // append to for the callbacks after it (Keras 3's shared logs dict; LearningRateScheduler adds
  // "learning_rate"). Null otherwise.
  Logs* epoch_logs = nullptr;
  // In fit: which way the compiled metric `name` improves, as Keras 3's metric direction: "up"
  // (accuracies), "down" (errors, crossentropies) or "" (a metric of unknown direction, or no
  // compiled metric of that name). Callbacks in "auto" mode read it; without it they fall back
  // to metric_is_maximized's name rule.
  std::function<std::string(const std::string& name)> metric_direction = {};
  // The compiled optimizer's Optimizer::swap_ema_weights (SwapEMAWeights); empty in a loop of a
  // model without a compiled optimizer.
  std::function<void()> swap_ema_weights = {};
  std::function<void()> copy_weights_to_ema = {};  // Optimizer::copy_weights_to_ema
};

class Callback {
 public:
  virtual ~Callback() = default;
  void set_context(TrainingContext* context) { ctx_ = context; }
  TrainingContext* attached_context() const { return ctx_; }

  virtual void on_train_begin(const Logs&) {}
  virtual void on_train_end(const Logs&) {}
  virtual void on_epoch_begin(int /*epoch*/, const Logs&) {}
  virtual void on_epoch_end(int /*epoch*/, const Logs&) {}
  virtual void on_train_batch_begin(int64_t /*batch*/, const Logs&) {}
  virtual void on_train_batch_end(int64_t /*batch*/, const Logs&) {}
  virtual void on_test_begin(const Logs&) {}
  virtual void on_test_end(const Logs&) {}
  virtual void on_test_batch_end(int64_t /*batch*/, const Logs&) {}
  virtual void on_predict_begin(const Logs&) {}
  virtual void on_predict_end(const Logs&) {}
  virtual void on_predict_batch_end(int64_t /*batch*/, const Logs&) {}
  // Whether on_train_batch_end and on_test_batch_end read their logs. A batch's logs read every
  // metric's result on the host (on a GPU that waits for the device, so the host cannot queue
  // the next steps meanwhile): fit and evaluate compute them only when a callback of the loop
  // says yes, and otherwise pass empty logs, as TF's CallbackList skips batch hooks that no
  // callback implements. Yes unless a callback says no; the built-in callbacks that ignore
  // batch logs say no.
  virtual bool reads_batch_logs() const { return true; }

 protected:
  TrainingContext& context() const;
  TrainingContext* ctx_ = nullptr;
};

// A shared handle on a callback: FitOptions::callbacks holds these, so a callback given by
// value is copied in, and one given as a shared_ptr stays inspectable (e.g. stopped_epoch).
class CallbackRef {
 public:
  template <class C>
    requires std::is_base_of_v<Callback, std::decay_t<C>>
  CallbackRef(C&& c) : p_(std::make_shared<std::decay_t<C>>(std::forward<C>(c))) {}
  template <class C>
    requires std::is_base_of_v<Callback, C>
  CallbackRef(std::shared_ptr<C> c) : p_(std::move(c)) {}
  Callback* get() const { return p_.get(); }
  Callback* operator->() const { return p_.get(); }

 private:
  std::shared_ptr<Callback> p_;
};

// History: every epoch's logs, returned by fit.
class History : public Callback {
 public:
  std::vector<int> epoch;
  std::map<std::string, std::vector<double>> history;
  void on_train_begin(const Logs&) override;
  void on_epoch_end(int epoch, const Logs& logs) override;
  bool reads_batch_logs() const override { return false; }
};

// Draws "Epoch i/n" and the progress bar (fit adds it when verbose != 0, after the user's
// callbacks and History, as Keras 3).
class ProgbarLogger : public Callback {
 public:
  explicit ProgbarLogger(utils::ProgbarOptions options = {}) : options_(std::move(options)) {}
  void on_train_begin(const Logs&) override;
  void on_train_end(const Logs&) override;
  void on_epoch_begin(int epoch, const Logs&) override;
  void on_train_batch_end(int64_t batch, const Logs& logs) override;
  void on_epoch_end(int epoch, const Logs& logs) override;
  void on_test_begin(const Logs&) override;
  void on_test_batch_end(int64_t batch, const Logs& logs) override;
  void on_test_end(const Logs& logs) override;
  void on_predict_begin(const Logs&) override;
  void on_predict_batch_end(int64_t batch, const Logs& logs) override;
  void on_predict_end(const Logs&) override;
  // Whether the bar shows each batch's logs: at verbose 1 when it redraws in place (verbose 2,
  // or a stream that is not a terminal, gets one line per epoch from the epoch's logs).
  bool reads_batch_logs() const override;

 private:
  void start_bar();  // a bar for context().steps at context().verbose
  utils::ProgbarOptions options_;
  std::unique_ptr<utils::Progbar> bar_;
  int64_t seen_ = 0;
  Logs last_;
  bool in_fit_ = false;
};

// Calls each callback in order.
class CallbackList {
 public:
  // Attaches every callback to `context` (null callbacks are an InvalidArgumentError); the
  // destructor detaches them again (restoring what they were attached to before), so a callback
  // used after its loop ended raises FailedPreconditionError instead of reading a dead context.
  CallbackList(std::vector<CallbackRef> callbacks, TrainingContext* context);
  ~CallbackList();
  CallbackList(const CallbackList&) = delete;
  CallbackList& operator=(const CallbackList&) = delete;
  const std::vector<CallbackRef>& callbacks() const { return callbacks_; }
  // Whether some callback reads batch logs (Callback::reads_batch_logs).
  bool reads_batch_logs() const;
  void on_train_begin(const Logs& l = {});
  void on_train_end(const Logs& l = {});
  void on_epoch_begin(int epoch, const Logs& l = {});
  void on_epoch_end(int epoch, const Logs& l);
  void on_train_batch_begin(int64_t batch, const Logs& l = {});
  void on_train_batch_end(int64_t batch, const Logs& l);
  void on_test_begin(const Logs& l = {});
  void on_test_end(const Logs& l);
  void on_test_batch_end(int64_t batch, const Logs& l);
  void on_predict_begin(const Logs& l = {});
  void on_predict_end(const Logs& l = {});
  void on_predict_batch_end(int64_t batch, const Logs& l = {});

 private:
  std::vector<CallbackRef> callbacks_;
  TrainingContext* context_ = nullptr;
  std::vector<TrainingContext*> previous_;  // each callback's context before this list
};

struct EarlyStoppingOptions {
  std::string monitor = "val_loss";
  double min_delta = 0.0;
  int patience = 0;
  int verbose = 0;
  // "min", "max" or "auto" (in fit: the loss falls and a compiled metric goes its direction();
  // elsewhere metric_is_maximized's name rule). Another string warns and means "auto" (Keras 3).
  std::string mode = "auto";
  std::optional<double> baseline = std::nullopt;
  bool restore_best_weights = false;
  int start_from_epoch = 0;
};

// Stops training when the monitored value has not improved for `patience` epochs (Keras 3). An
// improving epoch never stops training; with a baseline it restarts the wait only if it also
// beats the baseline. restore_best_weights restores the best epoch's weights when training ends
// (early stop or not), as Keras 3. A monitor missing from the logs warns (once per fit) and
// never stops training; in "auto" mode a monitor whose direction fit cannot tell (neither the
// loss nor a compiled metric of known direction) is an InvalidArgumentError at the first epoch's
// end, as Keras 3's ValueError.
class EarlyStopping : public Callback {
 public:
  explicit EarlyStopping(EarlyStoppingOptions options = {});
  void on_train_begin(const Logs&) override;
  void on_epoch_end(int epoch, const Logs& logs) override;
  void on_train_end(const Logs&) override;
  bool reads_batch_logs() const override { return false; }
  int stopped_epoch() const { return stopped_epoch_; }
  int best_epoch() const { return best_epoch_; }
  // The best value seen; +-inf before the first one.
  double best() const;

 private:
  bool improved(double current, std::optional<double> reference) const;
  EarlyStoppingOptions opt_;
  std::optional<bool> maximize_;  // known at the first epoch's end (Keras 3)
  int wait_ = 0;
  int stopped_epoch_ = 0;
  int best_epoch_ = 0;
  std::optional<double> best_;  // Keras' None: the first value always improves on it
  bool warned_ = false;
  std::vector<Tensor> best_weights_;
};

struct ModelCheckpointOptions {
  std::string monitor = "val_loss";
  int verbose = 0;
  bool save_best_only = false;
  std::string mode = "auto";
  // Every epoch (Keras' save_freq="epoch"); a positive value saves every that many batches.
  int64_t save_freq = 0;
};

// Saves the weights (safetensors) after each epoch, or only when the monitored value improves
// (when the monitored value is not in the logs it warns and saves, as Keras 3). The path may
// hold Keras' placeholders {epoch}, {epoch:02d}, {<log name>:.4f} etc., and {batch} when saving
// every save_freq batches. Under a
// MultiWorkerMirroredStrategy only worker 0 writes the path; another worker writes the same
// weights into <folder>/workertemp_<id>/ and deletes that at once (TF's rule).
class ModelCheckpoint : public Callback {
 public:
  explicit ModelCheckpoint(std::string filepath, ModelCheckpointOptions options = {});
  void on_train_begin(const Logs&) override;
  void on_epoch_begin(int epoch, const Logs&) override { epoch_ = epoch; }
  void on_epoch_end(int epoch, const Logs& logs) override;
  void on_train_batch_end(int64_t batch, const Logs& logs) override;
  bool reads_batch_logs() const override { return opt_.save_freq != 0; }
  // The path for an epoch (1-based, as Keras formats it) and logs; `batch` (1-based) fills a
  // {batch} placeholder, which only saves every save_freq batches have.
  std::string format_path(int epoch, const Logs& logs,
                          std::optional<int64_t> batch = std::nullopt) const;

 private:
  void save(int epoch, std::optional<int64_t> batch, const Logs& logs);
  std::string filepath_;
  ModelCheckpointOptions opt_;
  std::optional<double> best_;
  std::optional<bool> maximize_;  // the monitor's direction, resolved at the first epoch's end
  int epoch_ = 0;
  int64_t batches_ = 0;
};

// Sets the learning rate at the start of every epoch from schedule(epoch, current_lr), and adds
// the optimizer's rate to each epoch's logs as "learning_rate" (Keras 3), so History has it.
class LearningRateScheduler : public Callback {
 public:
  explicit LearningRateScheduler(std::function<double(int, double)> schedule, int verbose = 0);
  void on_epoch_begin(int epoch, const Logs&) override;
  void on_epoch_end(int epoch, const Logs&) override;
  bool reads_batch_logs() const override { return false; }

 private:
  std::function<double(int, double)> schedule_;
  int verbose_;
};

struct ReduceLROnPlateauOptions {
  std::string monitor = "val_loss";
  double factor = 0.1;  // new rate = rate * factor; must be < 1
  int patience = 10;
  int verbose = 0;
  std::string mode = "auto";  // as EarlyStopping's
  double min_delta = 1e-4;
  int cooldown = 0;
  double min_lr = 0.0;
};

// Multiplies the learning rate by `factor` (not below min_lr) when the monitored value has not
// improved by min_delta for `patience` epochs, then waits `cooldown` epochs before counting
// again (Keras 3). Every epoch it adds the rate the epoch trained with to the logs as
// "learning_rate" (the callbacks after it, History among them, see it). A monitor missing from
// the logs warns (once per fit) and changes nothing. Reducing a schedule's rate is an
// InvalidArgumentError, as in Keras.
class ReduceLROnPlateau : public Callback {
 public:
  explicit ReduceLROnPlateau(ReduceLROnPlateauOptions options = {});
  void on_train_begin(const Logs&) override;
  void on_epoch_end(int epoch, const Logs& logs) override;
  bool reads_batch_logs() const override { return false; }
  bool in_cooldown() const { return cooldown_counter_ > 0; }

 private:
  ReduceLROnPlateauOptions opt_;
  std::optional<bool> maximize_;
  std::optional<double> best_;
  int wait_ = 0;
  int cooldown_counter_ = 0;
  bool warned_ = false;
};

// Stops training after a batch whose loss log is NaN or infinite (Keras 3): it logs "Batch 3:
// Invalid loss, terminating training" and sets the stop flag, so fit ends that epoch there (its
// validation and on_epoch_end still run, then on_train_end). With raise_error it throws an
// InvalidArgumentError at once instead, and no on_train_end runs (Keras' RuntimeError).
// Keras 3's SwapEMAWeights, for an optimizer with use_ema (OptimizerOptions): the model's
// trainable weights and their moving averages change places for evaluation (on_test_begin)
// and back after it (on_test_end), likewise around predict; with swap_on_epoch also at each
// epoch's end and back at the next epoch's begin, so that the callbacks after this one
// (ModelCheckpoint) see the averages. At the last epoch's end the averages are left in place
// and fit's finalize_variable_values keeps them. Keras 3.15 forgets to swap back after predict
// (its on_predict_end tests the wrong flag); this one does.
class SwapEMAWeights : public Callback {
 public:
  explicit SwapEMAWeights(bool swap_on_epoch = false) : swap_on_epoch_(swap_on_epoch) {}
  void on_epoch_begin(int epoch, const Logs&) override;
  void on_epoch_end(int epoch, const Logs&) override;
  void on_test_begin(const Logs&) override;
  void on_test_end(const Logs&) override;
  void on_predict_begin(const Logs&) override;
  void on_predict_end(const Logs&) override;
  bool reads_batch_logs() const override { return false; }

 private:
  void swap();
  bool swap_on_epoch_;
  bool ema_in_model_ = false;
};

class TerminateOnNaN : public Callback {
 public:
  explicit TerminateOnNaN(bool raise_error = false) : raise_error_(raise_error) {}
  void on_train_batch_end(int64_t batch, const Logs& logs) override;

 private:
  bool raise_error_;
};

// Writes one row per epoch to a CSV file (Keras 3): "epoch" (from 0), then the first epoch's
// log names in sorted order; when none starts with "val_", "val_<name>" columns follow for each,
// which read "NA" (as do names a later epoch lacks). Values are written as Python writes floats
// (0.10000000149011612, 1e-05, nan), fields holding the separator, a quote or a line break are
// quoted, and lines end in "\r\n" (Python's csv). The file is rewritten when training begins,
// or with `append` appended to, with a header only when it is new or empty; each row is flushed.
// Under a MultiWorkerMirroredStrategy only worker 0 (the chief) writes the file. Errors opening
// or writing it name the file.
class CSVLogger : public Callback {
 public:
  // The separator is one character other than a quote or a line break.
  explicit CSVLogger(std::string filename, std::string separator = ",", bool append = false);
  void on_train_begin(const Logs&) override;
  void on_epoch_end(int epoch, const Logs& logs) override;
  void on_train_end(const Logs&) override;
  bool reads_batch_logs() const override { return false; }

 private:
  struct File;
  std::string filename_;
  char separator_;
  bool append_;
  std::shared_ptr<File> file_;  // open from on_train_begin to on_train_end (the chief only)
  std::optional<std::vector<std::string>> keys_;
  bool header_ = true;
};

// The functions a LambdaCallback calls (Keras' argument names); those left empty do nothing.
struct LambdaCallbackFunctions {
  std::function<void(int epoch, const Logs&)> on_epoch_begin = {};
  std::function<void(int epoch, const Logs&)> on_epoch_end = {};
  std::function<void(const Logs&)> on_train_begin = {};
  std::function<void(const Logs&)> on_train_end = {};
  std::function<void(int64_t batch, const Logs&)> on_train_batch_begin = {};
  std::function<void(int64_t batch, const Logs&)> on_train_batch_end = {};
  // Keras takes the other hooks as keyword arguments.
  std::function<void(const Logs&)> on_test_begin = {};
  std::function<void(const Logs&)> on_test_end = {};
  std::function<void(int64_t batch, const Logs&)> on_test_batch_end = {};
  std::function<void(const Logs&)> on_predict_begin = {};
  std::function<void(const Logs&)> on_predict_end = {};
  std::function<void(int64_t batch, const Logs&)> on_predict_batch_end = {};
};

// A callback made of functions (Keras' LambdaCallback):
//   LambdaCallback({.on_epoch_end = [](int epoch, const Logs& logs) { ... }})
class LambdaCallback : public Callback {
 public:
  explicit LambdaCallback(LambdaCallbackFunctions functions) : f_(std::move(functions)) {}
  void on_train_begin(const Logs& l) override { call(f_.on_train_begin, l); }
  void on_train_end(const Logs& l) override { call(f_.on_train_end, l); }
  void on_epoch_begin(int e, const Logs& l) override { call(f_.on_epoch_begin, e, l); }
  void on_epoch_end(int e, const Logs& l) override { call(f_.on_epoch_end, e, l); }
  void on_train_batch_begin(int64_t b, const Logs& l) override {
    call(f_.on_train_batch_begin, b, l);
  }
  void on_train_batch_end(int64_t b, const Logs& l) override { call(f_.on_train_batch_end, b, l); }
  void on_test_begin(const Logs& l) override { call(f_.on_test_begin, l); }
  void on_test_end(const Logs& l) override { call(f_.on_test_end, l); }
  void on_test_batch_end(int64_t b, const Logs& l) override { call(f_.on_test_batch_end, b, l); }
  void on_predict_begin(const Logs& l) override { call(f_.on_predict_begin, l); }
  void on_predict_end(const Logs& l) override { call(f_.on_predict_end, l); }
  void on_predict_batch_end(int64_t b, const Logs& l) override {
    call(f_.on_predict_batch_end, b, l);
  }
  bool reads_batch_logs() const override {
    return static_cast<bool>(f_.on_train_batch_end) || static_cast<bool>(f_.on_test_batch_end);
  }

 private:
  template <class F, class... A>
  static void call(const F& f, A&&... a) {
    if (f) f(std::forward<A>(a)...);
  }
  LambdaCallbackFunctions f_;
};

// Fault tolerance: saves the training state into backup_dir at the end of every epoch and, when
// fit starts and a backup exists, restores it and resumes after the saved epoch. The backup is
// deleted when training finishes normally. Under a MultiWorkerMirroredStrategy (TF's rule) only
// worker 0 writes backup_dir; another worker writes its backup into backup_dir/workertemp_<id> and
// deletes that at once; every worker restores from backup_dir (which every worker must see) and
// the workers check that they resume from the same epoch; worker 0 deletes backup_dir once every
// worker has finished.
class BackupAndRestore : public Callback {
 public:
  explicit BackupAndRestore(std::string backup_dir, bool delete_checkpoint = true);
  void on_train_begin(const Logs&) override;
  void on_epoch_end(int epoch, const Logs& logs) override;
  void on_train_end(const Logs&) override;
  bool reads_batch_logs() const override { return false; }
  // The epoch to start from (0 without a backup); fit reads it after on_train_begin.
  int initial_epoch() const { return initial_epoch_; }

 private:
  std::string dir_;
  bool delete_;
  int initial_epoch_ = 0;
};

// Keras' metric-direction rule: accuracy-like names (and "auc", "f1") are maximised.
bool metric_is_maximized(const std::string& monitor, const std::string& mode);

namespace detail {
// A double as Python's repr writes it (Keras' messages and CSV files): "0.1", "1.0", "1e-05",
// "1e+16", "nan", "-inf".
std::string python_float_repr(double value);
}  // namespace detail

}  // namespace callbacks
}  // namespace tapeflow::keras
