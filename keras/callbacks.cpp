#include "keras/callbacks.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <limits>

#include "core/check.h"
#include "core/log.h"

namespace tapeflow::keras {

std::optional<double> find_log(const Logs& logs, const std::string& name) {
  for (const auto& [k, v] : logs)
    if (k == name) return v;
  return std::nullopt;
}

namespace callbacks {

namespace {
std::string available(const Logs& logs) {
  std::string s;
  for (const auto& [k, v] : logs) s += (s.empty() ? "" : ", ") + k;
  return s.empty() ? "none" : s;
}

// The log names as Keras' warnings list them ("loss,val_loss").
std::string log_names(const Logs& logs) {
  std::string s;
  for (const auto& [k, v] : logs) s += (s.empty() ? "" : ",") + k;
  return s;
}

// Keras 3's MonitorCallback: an unknown mode warns and means "auto".
std::string checked_mode(const char* who, const std::string& mode) {
  if (mode == "auto" || mode == "min" || mode == "max") return mode;
  TF_LOG_WARN("{} mode '{}' is unknown, fallback to auto mode.", who, mode);
  return "auto";
}

// Whether `monitor` is maximised. Keras 3's "auto" rule: "loss" and "val_loss" are minimised,
// a compiled metric goes its own direction, and any other name is an error (a typo in the
// monitor, or a metric that has no direction). Outside fit (no metric_direction) the name rule.
bool resolve_maximize(const char* who, const std::string& monitor, const std::string& mode,
                      const TrainingContext* ctx) {
  if (mode != "auto") return mode == "max";
  if (ctx == nullptr || !ctx->metric_direction) return metric_is_maximized(monitor, "auto");
  const std::string name = monitor.starts_with("val_") ? monitor.substr(4) : monitor;
  std::optional<bool> up;
  if (name == "loss") up = false;
  const std::string direction = ctx->metric_direction(name);
  if (direction == "up") up = true;
  if (direction == "down") up = false;
  TF_CHECK_ARG(up.has_value(), who,
               "cannot tell whether monitor \"{}\" should be maximized or minimized: it is "
               "neither the loss nor a compiled metric with a known direction; give mode "
               "\"max\" to monitor the highest value or mode \"min\" for the lowest",
               monitor);
  return *up;
}

// Sets a log of the on_epoch_end logs the callbacks after this one see, as Keras 3's shared
// logs dict (a name already there keeps its place).
void set_epoch_log(const TrainingContext& ctx, const std::string& name, double value) {
  if (!ctx.epoch_logs) return;
  for (auto& [k, v] : *ctx.epoch_logs)
    if (k == name) {
      v = value;
      return;
    }
  ctx.epoch_logs->emplace_back(name, value);
}

// A double converted to float32 as NumPy does (out of range: +-inf), without the undefined
// behaviour of a plain cast.
double as_float32(double v) {
  if (std::isnan(v)) return v;
  if (v > std::numeric_limits<float>::max()) return std::numeric_limits<double>::infinity();
  if (v < -std::numeric_limits<float>::max()) return -std::numeric_limits<double>::infinity();
  return static_cast<float>(v);
}
}  // namespace

namespace detail {
std::string python_float_repr(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  // The shortest digits that read back as `value`, laid out as Python's repr: positional for
  // decimal exponents -5 < e < 16 (with ".0" when integral), else d.ddde+XX.
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::scientific);
  const std::string sci(buf, r.ptr);  // "-1.2345e+16", "1e-05"
  const size_t e_at = sci.find('e');
  const int exponent = std::stoi(sci.substr(e_at + 1));
  const bool negative = sci[0] == '-';
  std::string digits;
  for (size_t i = negative ? 1 : 0; i < e_at; ++i)
    if (sci[i] != '.') digits += sci[i];
  std::string out = negative ? "-" : "";
  if (exponent < -4 || exponent >= 16) {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    out += fmt::format("e{}{:02d}", exponent < 0 ? '-' : '+', std::abs(exponent));
  } else if (exponent < 0) {
    out += "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
  } else {
    const auto whole = static_cast<size_t>(exponent) + 1;
    if (digits.size() <= whole)
      out += digits + std::string(whole - digits.size(), '0') + ".0";
    else
      out += digits.substr(0, whole) + "." + digits.substr(whole);
  }
  return out;
}
}  // namespace detail

bool metric_is_maximized(const std::string& monitor, const std::string& mode) {
  if (mode == "max") return true;
  if (mode == "min") return false;
  TF_CHECK_ARG(mode == "auto", "callbacks", "mode must be \"auto\", \"min\" or \"max\", got \"{}\"",
               mode);
  return monitor.find("acc") != std::string::npos || monitor.find("auc") != std::string::npos ||
         monitor.starts_with("fmeasure") || monitor.starts_with("f1");
}

TrainingContext& Callback::context() const {
  TF_CHECK_T(FailedPreconditionError, ctx_ != nullptr, "callbacks",
             "the callback is not attached to a training loop (fit, evaluate or predict)");
  return *ctx_;
}

// ---- CallbackList ----

CallbackList::CallbackList(std::vector<CallbackRef> callbacks, TrainingContext* context)
    : callbacks_(std::move(callbacks)), context_(context) {
  for (size_t i = 0; i < callbacks_.size(); ++i)
    TF_CHECK_ARG(callbacks_[i].get() != nullptr, "callbacks", "callback {} of {} is a null pointer",
                 i, callbacks_.size());
  for (auto& c : callbacks_) {
    previous_.push_back(c->attached_context());
    c->set_context(context);
  }
}
CallbackList::~CallbackList() {
  // In reverse, so a callback listed twice gets back its context from before this list.
  for (size_t i = previous_.size(); i-- > 0;)
    if (callbacks_[i]->attached_context() == context_) callbacks_[i]->set_context(previous_[i]);
}
#define TF_FOR_EACH_CALLBACK(CALL) \
  for (auto& c : callbacks_) c->CALL
void CallbackList::on_train_begin(const Logs& l) { TF_FOR_EACH_CALLBACK(on_train_begin(l)); }
void CallbackList::on_train_end(const Logs& l) { TF_FOR_EACH_CALLBACK(on_train_end(l)); }
void CallbackList::on_epoch_begin(int e, const Logs& l) { TF_FOR_EACH_CALLBACK(on_epoch_begin(e, l)); }
void CallbackList::on_epoch_end(int e, const Logs& l) {
  // One copy that every callback sees in turn and may append to through the context (Keras 3
  // passes its callbacks one logs dict; LearningRateScheduler adds "learning_rate" to it, which
  // the callbacks after it see); the caller's logs stay as they were.
  Logs logs = l;
  Logs* previous = context_ ? context_->epoch_logs : nullptr;
  if (context_) context_->epoch_logs = &logs;
  try {
    TF_FOR_EACH_CALLBACK(on_epoch_end(e, logs));
  } catch (...) {
    if (context_) context_->epoch_logs = previous;
    throw;
  }
  if (context_) context_->epoch_logs = previous;
}
void CallbackList::on_train_batch_begin(int64_t b, const Logs& l) {
  TF_FOR_EACH_CALLBACK(on_train_batch_begin(b, l));
}
bool CallbackList::reads_batch_logs() const {
  return std::any_of(callbacks_.begin(), callbacks_.end(),
                     [](const CallbackRef& c) { return c->reads_batch_logs(); });
}

void CallbackList::on_train_batch_end(int64_t b, const Logs& l) {
  TF_FOR_EACH_CALLBACK(on_train_batch_end(b, l));
}
void CallbackList::on_test_begin(const Logs& l) { TF_FOR_EACH_CALLBACK(on_test_begin(l)); }
void CallbackList::on_test_end(const Logs& l) { TF_FOR_EACH_CALLBACK(on_test_end(l)); }
void CallbackList::on_test_batch_end(int64_t b, const Logs& l) {
  TF_FOR_EACH_CALLBACK(on_test_batch_end(b, l));
}
void CallbackList::on_predict_begin(const Logs& l) { TF_FOR_EACH_CALLBACK(on_predict_begin(l)); }
void CallbackList::on_predict_end(const Logs& l) { TF_FOR_EACH_CALLBACK(on_predict_end(l)); }
void CallbackList::on_predict_batch_end(int64_t b, const Logs& l) {
  TF_FOR_EACH_CALLBACK(on_predict_batch_end(b, l));
}
#undef TF_FOR_EACH_CALLBACK

// ---- History ----

void History::on_train_begin(const Logs&) {
  epoch.clear();
  history.clear();
}
void History::on_epoch_end(int e, const Logs& logs) {
  epoch.push_back(e);
  for (const auto& [k, v] : logs) history[k].push_back(v);
}

// ---- ProgbarLogger ----

void ProgbarLogger::start_bar() {
  auto opt = options_;
  opt.verbose = context().verbose;
  bar_ = std::make_unique<utils::Progbar>(context().steps, std::move(opt));
  seen_ = 0;
}

bool ProgbarLogger::reads_batch_logs() const {
  return ctx_ && ctx_->verbose == 1 && utils::Progbar::redraws(options_);
}

void ProgbarLogger::on_train_begin(const Logs&) { in_fit_ = true; }
void ProgbarLogger::on_train_end(const Logs&) { in_fit_ = false; }

void ProgbarLogger::on_epoch_begin(int epoch, const Logs&) {
  auto& ctx = context();
  if (ctx.verbose == 0) return;
  std::ostream& os = options_.stream ? *options_.stream : std::cout;
  // Keras (tf.keras 2 and 3) heads epochs only when there are several.
  if (ctx.epochs > 1) os << "Epoch " << epoch + 1 << "/" << ctx.epochs << '\n';
  start_bar();
}
void ProgbarLogger::on_train_batch_end(int64_t batch, const Logs& logs) {
  seen_ = batch + 1;
  if (bar_) bar_->update(seen_, logs, false);
}
void ProgbarLogger::on_epoch_end(int, const Logs& logs) {
  if (bar_) bar_->update(seen_, logs, true);
  bar_.reset();
}
void ProgbarLogger::on_test_begin(const Logs&) {
  if (in_fit_ || context().verbose == 0) return;  // validation inside fit draws no bar (Keras)
  start_bar();
}
void ProgbarLogger::on_test_batch_end(int64_t batch, const Logs& logs) {
  if (in_fit_ || !bar_) return;
  seen_ = batch + 1;
  bar_->update(seen_, logs, false);
}
void ProgbarLogger::on_test_end(const Logs& logs) {
  if (in_fit_ || !bar_) return;
  bar_->update(seen_, logs, true);
  bar_.reset();
}
void ProgbarLogger::on_predict_begin(const Logs&) {
  if (context().verbose == 0) return;
  start_bar();
}
void ProgbarLogger::on_predict_batch_end(int64_t batch, const Logs&) {
  seen_ = batch + 1;
  if (bar_) bar_->update(seen_, {}, false);
}
void ProgbarLogger::on_predict_end(const Logs&) {
  if (bar_) bar_->update(seen_, {}, true);
  bar_.reset();
}

// ---- EarlyStopping ----

EarlyStopping::EarlyStopping(EarlyStoppingOptions options) : opt_(std::move(options)) {
  opt_.mode = checked_mode("EarlyStopping", opt_.mode);
  opt_.min_delta = std::abs(opt_.min_delta);
}

double EarlyStopping::best() const {
  if (best_) return *best_;
  return maximize_.value_or(false) ? -std::numeric_limits<double>::infinity()
                                   : std::numeric_limits<double>::infinity();
}

bool EarlyStopping::improved(double current, std::optional<double> reference) const {
  if (!reference) return true;
  return *maximize_ ? current - opt_.min_delta > *reference : current + opt_.min_delta < *reference;
}

void EarlyStopping::on_train_begin(const Logs&) {
  wait_ = 0;
  stopped_epoch_ = 0;
  best_epoch_ = 0;
  best_.reset();
  maximize_.reset();  // the direction of this fit's metrics, at its first epoch's end
  warned_ = false;
  best_weights_.clear();
  TF_CHECK_ARG(!opt_.restore_best_weights || context().weights != nullptr, "EarlyStopping",
               "restore_best_weights needs the model's weights, which this loop does not give");
}

void EarlyStopping::on_epoch_end(int epoch, const Logs& logs) {
  if (!maximize_) maximize_ = resolve_maximize("EarlyStopping", opt_.monitor, opt_.mode, ctx_);
  const auto current = find_log(logs, opt_.monitor);
  if (!current) {
    // Python shows a warning once per place it is raised from.
    if (!warned_)
      TF_LOG_WARN(
          "Early stopping conditioned on metric `{}` which is not available. Available "
          "metrics are: {}",
          opt_.monitor, log_names(logs));
    warned_ = true;
    return;
  }
  if (epoch < opt_.start_from_epoch) return;
  auto snapshot = [&] {
    best_weights_.clear();
    for (const auto& [name, v] : context().weights->tracked_variables())
      best_weights_.push_back(v.value());
  };
  // Keep the first epoch's weights, so a run that never improves still restores something.
  if (opt_.restore_best_weights && best_weights_.empty()) {
    snapshot();
    best_epoch_ = epoch;
  }
  ++wait_;
  // The first value always improves on Keras' None (a NaN too, which then never improves).
  if (improved(*current, best_)) {
    best_ = *current;
    best_epoch_ = epoch;
    if (opt_.restore_best_weights) snapshot();
    // An improving epoch never stops training (Keras 3); it restarts the wait only if it beats
    // the baseline as well, so patience counts the epochs that stay short of the baseline.
    if (!opt_.baseline || improved(*current, *opt_.baseline)) wait_ = 0;
    return;
  }
  if (wait_ >= opt_.patience && epoch > 0) {
    stopped_epoch_ = epoch;
    if (context().stop_training) *context().stop_training = true;
  }
}

void EarlyStopping::on_train_end(const Logs&) {
  if (stopped_epoch_ > 0 && opt_.verbose > 0)
    TF_LOG_INFO("Epoch {}: early stopping", stopped_epoch_ + 1);
  // Keras 3 restores at the end of training, stopped early or not: the callbacks after this one
  // (a ModelCheckpoint) see the stopping epoch's own weights.
  if (opt_.restore_best_weights && !best_weights_.empty()) {
    if (opt_.verbose > 0)
      TF_LOG_INFO("Restoring model weights from the end of the best epoch: {}.", best_epoch_ + 1);
    auto vars = context().weights->tracked_variables();
    for (size_t i = 0; i < vars.size() && i < best_weights_.size(); ++i)
      vars[i].second.assign(best_weights_[i]);
  }
}

// ---- files under a MultiWorkerMirroredStrategy ----

namespace {

// Where this worker writes what belongs in `dir`: `dir` itself on worker 0 (the chief), else
// "<dir>/workertemp_<id>", which it deletes once written (TF's distributed_file_utils).
std::filesystem::path write_dir_of(const TrainingContext& ctx, const std::filesystem::path& dir) {
  if (ctx.worker_index == 0) return dir;
  return dir / fmt::format("workertemp_{}", ctx.worker_index);
}

void remove_worker_temp(const TrainingContext& ctx, const std::filesystem::path& written,
                        const char* who) {
  if (ctx.worker_index == 0) return;
  std::error_code ec;
  std::filesystem::remove_all(written, ec);
  if (ec) TF_LOG_WARN("{}: could not delete {}: {}", who, written.string(), ec.message());
}

}  // namespace

// ---- ModelCheckpoint ----

ModelCheckpoint::ModelCheckpoint(std::string filepath, ModelCheckpointOptions options)
    : filepath_(std::move(filepath)), opt_(std::move(options)) {
  TF_CHECK_ARG(!filepath_.empty(), "ModelCheckpoint", "the file path is empty");
  opt_.mode = checked_mode("ModelCheckpoint", opt_.mode);
  TF_CHECK_ARG(opt_.save_freq >= 0, "ModelCheckpoint", "save_freq must be >= 0, got {}",
               opt_.save_freq);
}

std::string ModelCheckpoint::format_path(int epoch, const Logs& logs,
                                         std::optional<int64_t> batch) const {
  // Python's str.format subset Keras users write: {epoch}, {epoch:02d}, {val_loss:.2f}.
  std::string out;
  size_t i = 0;
  while (i < filepath_.size()) {
    const char c = filepath_[i];
    if (c != '{') {
      out += c;
      ++i;
      continue;
    }
    const size_t end = filepath_.find('}', i);
    TF_CHECK_ARG(end != std::string::npos, "ModelCheckpoint",
                 "failed to format the file path \"{}\": unmatched '{{'", filepath_);
    const std::string field = filepath_.substr(i + 1, end - i - 1);
    const size_t colon = field.find(':');
    const std::string key = field.substr(0, colon);
    const std::string spec = colon == std::string::npos ? "" : field.substr(colon + 1);
    const std::string f = "{:" + spec + "}";
    // A width or precision is bounded by what a file name can hold (a width of 999999999 made
    // a gigabyte string, or std::bad_alloc).
    for (size_t d = 0; d < spec.size();) {
      size_t e = d;
      while (e < spec.size() && std::isdigit(static_cast<unsigned char>(spec[e]))) ++e;
      TF_CHECK_ARG(e - d <= 4 && (e == d || std::stoi(spec.substr(d, e - d)) <= 4096),
                   "ModelCheckpoint",
                   "failed to format the file path \"{}\": the width or precision in '{}' is "
                   "larger than a path (4096)",
                   filepath_, spec);
      d = e == d ? d + 1 : e;
    }
    try {
      if (key == "epoch") {
        out += fmt::format(fmt::runtime(f), epoch);
      } else if (auto v = find_log(logs, key)) {
        out += fmt::format(fmt::runtime(f), *v);
      } else if (key == "batch" && batch) {
        out += fmt::format(fmt::runtime(f), *batch);
      } else {
        TF_THROW(InvalidArgumentError, "ModelCheckpoint",
                 "failed to format the file path \"{}\": no log named '{}' (available: epoch, "
                 "{}{})",
                 filepath_, key, batch ? "batch, " : "", available(logs));
      }
    } catch (const fmt::format_error& e) {
      TF_THROW(InvalidArgumentError, "ModelCheckpoint",
               "failed to format the file path \"{}\": bad format spec '{}' ({})", filepath_, spec,
               e.what());
    }
    i = end + 1;
  }
  return out;
}

void ModelCheckpoint::on_train_begin(const Logs&) {
  TF_CHECK_ARG(static_cast<bool>(context().save_weights), "ModelCheckpoint",
               "this loop cannot save weights");
  batches_ = 0;
  maximize_.reset();  // this fit's metrics decide "auto" (Keras 3, as EarlyStopping)
}

void ModelCheckpoint::save(int epoch, std::optional<int64_t> batch, const Logs& logs) {
  // {batch} is the batch's 1-based number in its epoch (Keras), known only for batch saves.
  const std::string path = format_path(epoch + 1, logs, batch ? std::optional(*batch + 1) : batch);
  const auto current = opt_.save_best_only ? find_log(logs, opt_.monitor) : std::nullopt;
  if (opt_.save_best_only && !current) {
    // Keras 3 saves anyway (as without save_best_only), after the warning.
    TF_LOG_WARN("Can save best model only with {} available.", opt_.monitor);
  } else if (opt_.save_best_only) {
    // (A batch save before the first epoch's end resolves the direction here.)
    if (!maximize_) maximize_ = resolve_maximize("ModelCheckpoint", opt_.monitor, opt_.mode, ctx_);
    // A NaN never improves (Keras starts from +-inf and compares, so a NaN first value does
    // not become the best and block every later save).
    const bool better =
        !std::isnan(*current) && (!best_ || (*maximize_ ? *current > *best_ : *current < *best_));
    // Keras 3 names a best not yet seen "None".
    const std::string best = best_ ? fmt::format("{:.5f}", *best_) : "None";
    if (!better) {
      if (opt_.verbose > 0)
        TF_LOG_INFO("Epoch {}: {} did not improve from {}", epoch + 1, opt_.monitor, best);
      return;
    }
    if (opt_.verbose > 0)
      TF_LOG_INFO("Epoch {}: {} improved from {} to {:.5f}, saving model to {}", epoch + 1,
                  opt_.monitor, best, *current, path);
    best_ = *current;
  } else if (opt_.verbose > 0) {
    TF_LOG_INFO("Epoch {}: saving model to {}", epoch + 1, path);
  }
  const auto& ctx = context();
  const std::filesystem::path folder = std::filesystem::path(path).parent_path();
  const std::filesystem::path written = write_dir_of(ctx, folder);
  if (!written.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(written, ec);
    TF_CHECK_T(FailedPreconditionError, !ec, "ModelCheckpoint",
               "cannot create the directory '{}' for '{}': {}", written.string(), path,
               ec.message());
  }
  ctx.save_weights((written / std::filesystem::path(path).filename()).string());
  remove_worker_temp(ctx, written, "ModelCheckpoint");
  if (opt_.verbose > 0) TF_LOG_INFO("Epoch {}: finished saving model to {}", epoch + 1, path);
}

void ModelCheckpoint::on_epoch_end(int epoch, const Logs& logs) {
  // Keras 3 settles the direction here, whether or not it saves the best only: in "auto" a
  // monitor that is neither the loss nor a compiled metric with a direction is an error.
  if (!maximize_) maximize_ = resolve_maximize("ModelCheckpoint", opt_.monitor, opt_.mode, ctx_);
  if (opt_.save_freq == 0) save(epoch, std::nullopt, logs);
}

void ModelCheckpoint::on_train_batch_end(int64_t batch, const Logs& logs) {
  if (opt_.save_freq == 0) return;
  if (++batches_ % opt_.save_freq == 0) save(epoch_, batch, logs);
}

// ---- LearningRateScheduler ----

LearningRateScheduler::LearningRateScheduler(std::function<double(int, double)> schedule,
                                             int verbose)
    : schedule_(std::move(schedule)), verbose_(verbose) {
  TF_CHECK_ARG(static_cast<bool>(schedule_), "LearningRateScheduler", "the schedule is empty");
}

void SwapEMAWeights::swap() {
  auto& ctx = context();
  TF_CHECK_T(FailedPreconditionError, static_cast<bool>(ctx.swap_ema_weights), "SwapEMAWeights",
             "needs a compiled model whose optimizer has use_ema (OptimizerOptions)");
  ctx.swap_ema_weights();
}
void SwapEMAWeights::on_epoch_begin(int, const Logs&) {
  if (swap_on_epoch_ && ema_in_model_) {
    swap();
    ema_in_model_ = false;
  }
}
void SwapEMAWeights::on_epoch_end(int epoch, const Logs&) {
  if (!swap_on_epoch_ || ema_in_model_) return;
  swap();
  ema_in_model_ = true;
  // After the last epoch fit gives the weights their averages (finalize_variable_values):
  // the averages must hold them again, as Keras' _finalize_ema_values.
  if (epoch == context().epochs - 1 && context().copy_weights_to_ema)
    context().copy_weights_to_ema();
}
void SwapEMAWeights::on_test_begin(const Logs&) {
  if (ema_in_model_) return;
  swap();
  ema_in_model_ = true;
}
void SwapEMAWeights::on_test_end(const Logs&) {
  if (!ema_in_model_) return;
  swap();
  ema_in_model_ = false;
}
void SwapEMAWeights::on_predict_begin(const Logs& logs) {
  on_test_begin(logs);
}
void SwapEMAWeights::on_predict_end(const Logs& logs) {
  on_test_end(logs);
}

void LearningRateScheduler::on_epoch_begin(int epoch, const Logs&) {
  auto& ctx = context();
  TF_CHECK_ARG(ctx.get_learning_rate && ctx.set_learning_rate, "LearningRateScheduler",
               "the optimizer's learning rate is not settable in this loop (is it a schedule?)");
  const double lr = schedule_(epoch, ctx.get_learning_rate());
  TF_CHECK_ARG(std::isfinite(lr), "LearningRateScheduler",
               "the schedule returned {} for epoch {}; it must be a finite number", lr, epoch);
  ctx.set_learning_rate(lr);
  if (verbose_ > 0)
    TF_LOG_INFO("Epoch {}: LearningRateScheduler setting learning rate to {}.", epoch + 1, lr);
}

void LearningRateScheduler::on_epoch_end(int, const Logs&) {
  // Keras 3 adds the optimizer's rate to the epoch's logs: History records it, and the callbacks
  // after this one (TensorBoard, the progress bar) see it.
  auto& ctx = context();
  if (!ctx.epoch_logs || !ctx.get_learning_rate) return;
  const double lr = ctx.get_learning_rate();
  for (auto& [name, value] : *ctx.epoch_logs)
    if (name == "learning_rate") {
      value = lr;
      return;
    }
  ctx.epoch_logs->emplace_back("learning_rate", lr);
}

// ---- ReduceLROnPlateau ----

ReduceLROnPlateau::ReduceLROnPlateau(ReduceLROnPlateauOptions options) : opt_(std::move(options)) {
  opt_.mode = checked_mode("ReduceLROnPlateau", opt_.mode);
  TF_CHECK_ARG(opt_.factor < 1.0, "ReduceLROnPlateau",
               "factor must be < 1.0 (the new rate is the rate times factor), got {}", opt_.factor);
  TF_CHECK_ARG(!std::isnan(opt_.min_delta) && !std::isnan(opt_.min_lr), "ReduceLROnPlateau",
               "min_delta and min_lr must be numbers, got {} and {}", opt_.min_delta, opt_.min_lr);
  opt_.min_delta = std::abs(opt_.min_delta);
}

void ReduceLROnPlateau::on_train_begin(const Logs&) {
  best_.reset();
  cooldown_counter_ = 0;
  wait_ = 0;
  maximize_.reset();
  warned_ = false;
}

void ReduceLROnPlateau::on_epoch_end(int epoch, const Logs& logs) {
  auto& ctx = context();
  if (!maximize_) maximize_ = resolve_maximize("ReduceLROnPlateau", opt_.monitor, opt_.mode, ctx_);
  TF_CHECK_ARG(static_cast<bool>(ctx.get_learning_rate), "ReduceLROnPlateau",
               "this loop has no optimizer whose learning rate it could read");
  // The optimizer's rate, before any reduction (Keras 3 logs it every epoch).
  set_epoch_log(ctx, "learning_rate", ctx.get_learning_rate());
  const Logs& seen = ctx.epoch_logs ? *ctx.epoch_logs : logs;
  const auto current = find_log(seen, opt_.monitor);
  if (!current) {
    if (!warned_)
      TF_LOG_WARN(
          "Learning rate reduction is conditioned on metric `{}` which is not available. "
          "Available metrics are: {}.",
          opt_.monitor, log_names(seen));
    warned_ = true;
    return;
  }
  if (in_cooldown()) {
    --cooldown_counter_;
    wait_ = 0;
  }
  const bool improved = !best_ || (*maximize_ ? *current - opt_.min_delta > *best_
                                              : *current + opt_.min_delta < *best_);
  if (improved) {
    best_ = *current;
    wait_ = 0;
    return;
  }
  if (in_cooldown() || ++wait_ < opt_.patience) return;
  const double old_lr = ctx.get_learning_rate();
  // Keras compares the float32 rate with min_lr as a float32: a rate at min_lr stays.
  if (!(old_lr > as_float32(opt_.min_lr))) return;
  const double new_lr = std::max(old_lr * opt_.factor, opt_.min_lr);
  TF_CHECK_ARG(static_cast<bool>(ctx.set_learning_rate), "ReduceLROnPlateau",
               "the optimizer's learning rate is not settable in this loop (is it a schedule?)");
  ctx.set_learning_rate(new_lr);
  if (opt_.verbose > 0)
    TF_LOG_INFO("Epoch {}: ReduceLROnPlateau reducing learning rate to {}.", epoch + 1,
                detail::python_float_repr(new_lr));
  cooldown_counter_ = opt_.cooldown;
  wait_ = 0;
}

// ---- TerminateOnNaN ----

void TerminateOnNaN::on_train_batch_end(int64_t batch, const Logs& logs) {
  const auto loss = find_log(logs, "loss");
  if (!loss || std::isfinite(*loss)) return;
  if (raise_error_)
    TF_THROW(InvalidArgumentError, "TerminateOnNaN",
             "NaN or Inf loss encountered at batch {}. Loss value: {}. Terminating training "
             "immediately.",
             batch, detail::python_float_repr(*loss));
  TF_LOG_INFO("Batch {}: Invalid loss, terminating training", batch);
  if (context().stop_training) *context().stop_training = true;
}

// ---- CSVLogger ----

// The open file; closed when the last copy of the callback lets go of it.
struct CSVLogger::File {
  std::string path;
  std::FILE* f = nullptr;
  File(std::string p, const char* mode) : path(std::move(p)) {
    f = std::fopen(path.c_str(), mode);
    if (f == nullptr) {
      const int e = errno;
      if (e == ENOENT || e == ENOTDIR)
        TF_THROW(NotFoundError, "CSVLogger", "cannot open {} for writing: {}", path,
                 std::strerror(e));
      TF_THROW(FailedPreconditionError, "CSVLogger", "cannot open {} for writing: {}", path,
               std::strerror(e));
    }
  }
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  void write(const std::string& text) {
    errno = 0;
    if (std::fwrite(text.data(), 1, text.size(), f) != text.size() || std::fflush(f) != 0) {
      const int e = errno;
      TF_THROW(InternalError, "CSVLogger", "writing {} failed: {}", path,
               e ? std::strerror(e) : "a write error occurred");
    }
  }
  // Throws when closing reports an error (reported earlier by write, usually).
  void close() {
    std::FILE* g = std::exchange(f, nullptr);
    errno = 0;
    if (g != nullptr && std::fclose(g) != 0) {
      const int e = errno;
      TF_THROW(InternalError, "CSVLogger", "closing {} failed: {}", path,
               e ? std::strerror(e) : "a write error occurred");
    }
  }
  ~File() {
    if (f == nullptr) return;
    // A destructor must not throw (training ended by an exception): the error goes to the log.
    try {
      close();
    } catch (const std::exception& e) {
      try {
        TF_LOG_ERROR("{}", e.what());
      } catch (...) {
      }
    }
  }
};

CSVLogger::CSVLogger(std::string filename, std::string separator, bool append)
    : filename_(std::move(filename)), separator_(','), append_(append) {
  TF_CHECK_ARG(!filename_.empty(), "CSVLogger", "the file name is empty");
  TF_CHECK_ARG(separator.size() == 1 && separator != "\"" && separator != "\r" && separator != "\n",
               "CSVLogger",
               "the separator must be one character other than a quote or a line break, got "
               "\"{}\"",
               separator);
  separator_ = separator[0];
}

void CSVLogger::on_train_begin(const Logs&) {
  if (file_) file_->close();
  file_.reset();
  keys_.reset();
  if (context().worker_index != 0) return;  // the chief alone writes the file
  if (append_) {
    // A header only for a file that is new or empty (Keras reads its first line).
    std::FILE* in = std::fopen(filename_.c_str(), "rb");
    if (in == nullptr) {
      const int e = errno;
      TF_CHECK_T(FailedPreconditionError, e == ENOENT, "CSVLogger", "cannot read {}: {}", filename_,
                 std::strerror(e));
      header_ = true;
    } else {
      const int c = std::fgetc(in);
      const bool failed = std::ferror(in) != 0;
      const int e = errno;
      std::fclose(in);
      TF_CHECK_T(FailedPreconditionError, !failed, "CSVLogger", "cannot read {}: {}", filename_,
                 std::strerror(e));
      header_ = c == EOF;
    }
  }
  file_ = std::make_shared<File>(filename_, append_ ? "ab" : "wb");
}

void CSVLogger::on_epoch_end(int epoch, const Logs& logs) {
  if (context().worker_index != 0) return;
  TF_CHECK_T(FailedPreconditionError, file_ != nullptr, "CSVLogger",
             "on_epoch_end ran before on_train_begin opened {}", filename_);
  // Python's csv (excel dialect): quote a field holding the separator, a quote or a line break.
  auto field = [&](const std::string& s) {
    if (s.find_first_of(std::string{separator_, '"', '\r', '\n'}) == std::string::npos) return s;
    std::string q = "\"";
    for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
    return q + "\"";
  };
  std::string text;
  if (!keys_) {
    // The first epoch's names fix the columns (Keras).
    std::vector<std::string> keys;
    for (const auto& [k, v] : logs)
      if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
    std::sort(keys.begin(), keys.end());
    const bool has_val = std::any_of(keys.begin(), keys.end(),
                                     [](const std::string& k) { return k.starts_with("val_"); });
    if (!has_val) {
      const size_t n = keys.size();
      for (size_t i = 0; i < n; ++i) keys.push_back("val_" + keys[i]);
    }
    keys_ = std::move(keys);
    if (header_) {
      text += "epoch";
      for (const auto& k : *keys_) text += separator_ + field(k);
      text += "\r\n";
    }
  }
  text += std::to_string(epoch);
  for (const auto& k : *keys_) {
    const auto v = find_log(logs, k);
    text += separator_ + field(v ? detail::python_float_repr(*v) : "NA");
  }
  text += "\r\n";
  file_->write(text);
}

void CSVLogger::on_train_end(const Logs&) {
  if (!file_) return;
  const std::shared_ptr<File> file = std::move(file_);
  file->close();
}

// ---- BackupAndRestore ----

BackupAndRestore::BackupAndRestore(std::string backup_dir, bool delete_checkpoint)
    : dir_(std::move(backup_dir)), delete_(delete_checkpoint) {
  TF_CHECK_ARG(!dir_.empty(), "BackupAndRestore", "backup_dir is empty");
}

void BackupAndRestore::on_train_begin(const Logs&) {
  auto& ctx = context();
  TF_CHECK_ARG(ctx.save_backup && ctx.restore_backup, "BackupAndRestore",
               "this loop cannot save and restore its training state");
  initial_epoch_ = 0;
  if (auto last = ctx.restore_backup(dir_)) {
    TF_CHECK_ARG(*last >= 0 && *last < std::numeric_limits<int>::max(), "BackupAndRestore",
                 "the backup in '{}' records epoch {}, outside [0, {})", dir_, *last,
                 std::numeric_limits<int>::max());
    initial_epoch_ = *last + 1;
    TF_LOG_INFO("BackupAndRestore: resuming from the backup in {} after epoch {}", dir_,
                *last + 1);
  }
  if (ctx.num_workers > 1 && ctx.gather_over_workers) {
    // Every worker restores worker 0's backup; one that found another (or none: backup_dir not
    // shared) would train other epochs than the rest.
    const std::vector<int64_t> all = ctx.gather_over_workers(initial_epoch_, "BackupAndRestore");
    std::vector<std::string> starts;
    for (size_t w = 0; w < all.size(); ++w)
      starts.push_back(fmt::format("worker {}: {}", w, all[w]));
    TF_CHECK_T(FailedPreconditionError,
               std::all_of(all.begin(), all.end(), [&](int64_t e) { return e == all[0]; }),
               "BackupAndRestore",
               "the workers would resume from different epochs after restoring '{}' ({}; this is "
               "worker {}): backup_dir must be one directory that every worker sees (a shared "
               "file system), written by worker 0",
               dir_, fmt::join(starts, ", "), ctx.worker_index);
  }
}

void BackupAndRestore::on_epoch_end(int epoch, const Logs&) {
  auto& ctx = context();
  const std::filesystem::path dir = write_dir_of(ctx, dir_);
  ctx.save_backup(dir.string(), epoch);
  remove_worker_temp(ctx, dir, "BackupAndRestore");
}

void BackupAndRestore::on_train_end(const Logs&) {
  auto& ctx = context();
  // Worker 0 deletes backup_dir only after every worker has written (and deleted) its last
  // backup under it.
  if (ctx.num_workers > 1 && ctx.gather_over_workers)
    (void)ctx.gather_over_workers(0, "BackupAndRestore");
  if (!delete_ || ctx.worker_index != 0) return;
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
  if (ec) TF_LOG_WARN("BackupAndRestore: could not delete {}: {}", dir_, ec.message());
}

}  // namespace callbacks
}  // namespace tapeflow::keras
