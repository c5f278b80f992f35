// Model::compile, fit, evaluate, predict and weights files (keras/training.h).
#include "keras/training.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <limits>
#include <mutex>
#include <optional>
#include <set>
#include <utility>

#include "autograd/tape.h"
#include "core/check.h"
#include "core/log.h"
#include "distribute/input.h"
#include "distribute/replica_context.h"
#include "distribute/strategy.h"
#include "jit/function.h"
#include "keras/checkpoint.h"
#include "keras/compile_access.h"
#include "keras/functional.h"
#include "keras/metrics_impl.h"
#include "keras/model.h"
#include "keras/safetensors.h"
#include "ops/binary.h"
#include "ops/dynamic_shape.h"
#include "ops/factory.h"
#include "ops/movement.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/unary.h"

namespace tapeflow::keras {

metrics::Metric MetricSpec::resolve(const losses::Loss& loss) const {
  if (metric_) return *metric_;
  return metrics::get(name_, loss);
}

losses::Loss LossSpec::resolve() const {
  return loss_.defined() ? loss_ : losses::get(name_);
}

namespace detail::compile_access {
SpecRecord record_of(const LossSpec& spec) {
  return SpecRecord{spec.name(), spec.loss(), std::nullopt};
}
SpecRecord record_of(const MetricSpec& spec) {
  return SpecRecord{spec.name(), losses::Loss(), spec.metric()};
}
}  // namespace detail::compile_access

namespace detail {

// What compile() sets up; shared by every copy of the model handle. The steps are built lazily
// for the data's signature (dtypes and non-batch dimensions) and rebuilt when it changes.
struct TrainingState {
  optimizers::Optimizer optimizer;
  losses::Loss loss;
  std::vector<metrics::Metric> metrics;
  std::vector<bool> weighted;  // per metric: updated with the sample weights (weighted_metrics)
  metrics::Mean loss_tracker{"loss"};
  CompileOptions options;
  compile_access::CompileRecord record;  // compile()'s arguments, for get_compile_config
  // The strategy whose scope compile() ran in (nullptr: one device); read through
  // live_strategy(), which refuses one that was destroyed since.
  distribute::Strategy* strategy = nullptr;
  std::weak_ptr<const void> strategy_alive;

  // A functional model with several inputs or outputs (multi): batches are the inputs, the
  // targets, then no, one shared or one sample weight per output; the loss is the weighted sum
  // of the outputs' losses. Metric i watches output metric_output[i] and logs as
  // metric_log_names[i] ("<output>_<metric>" with several outputs); logs list the loss, the
  // outputs' losses, then the metrics in log_order (by name, as Keras 3.15).
  bool multi = false;
  size_t n_inputs = 1, n_outputs = 1;
  std::vector<std::string> input_names, output_names;
  std::vector<losses::Loss> output_losses;
  std::vector<double> loss_weights;
  std::vector<metrics::Mean> output_loss_trackers;  // "<output>_loss", with several outputs
  std::vector<size_t> metric_output;
  std::vector<std::string> metric_log_names;
  std::vector<size_t> log_order;

  template <class R>
  using StepOf = std::function<R(const std::vector<Tensor>&)>;
  using Step = StepOf<Tensor>;
  // predict and evaluate may run on several threads at once: the step is swapped under mu and
  // each caller replays its own copy of the handle.
  template <class R>
  struct TracedOf {
    std::mutex mu;
    StepOf<R> fn;                       // guarded by mu
    std::vector<TensorSpec> signature;  // guarded by mu
  };
  using Traced = TracedOf<Tensor>;
  Traced train, test, predict;
  // Whether the steps are traced for the batches' batch size instead of None: a stateful model
  // (Model::stateful), whose kept states fix it. Set when fit, evaluate, predict, ... start.
  std::atomic<bool> keep_batch{false};
  TracedOf<std::vector<Tensor>> predict_all;  // every output of a multi-output model
};

}  // namespace detail

namespace {

using detail::TrainingState;
using Step = TrainingState::Step;

// The names model.save's files take (docs/keras.md): Keras' .keras and tapeflow's .tfmodel.
bool is_whole_model_path(const std::string& path) {
  return path.ends_with(".keras") || path.ends_with(".tfmodel");
}

// 1 outside strategy.run, else the number of replicas (losses are divided by it there).
double replicas() {
  auto* ctx = distribute::get_replica_context();
  return ctx ? static_cast<double>(ctx->num_replicas_in_sync()) : 1.0;
}

// Keras 3's compute_loss: the compiled loss plus every entry of model.losses() (the add_loss
// losses of the call just made, then the weight regularization penalties), each summed to a
// scalar; scaled for distribution as the compiled loss is. Inside a traced step the added
// losses are values of the same trace.
Tensor add_regularization(const Layer& model, Tensor loss) {
  for (Tensor r : model.losses()) {
    if (r.rank() > 0) r = reduce_sum(r);
    if (r.dtype() != loss.dtype()) r = cast(r, loss.dtype());
    loss = add(loss, multiply(r, Tensor(1.0 / replicas())));
  }
  return loss;
}

// The loss tracker is a Mean over examples: the (unscaled) batch loss weighted by the batch
// size, read at run time so one graph serves every batch size.
void track_loss(TrainingState& st, const Tensor& x, const Tensor& loss) {
  const Tensor n = tapeflow::detail::element_count(x, {0}, float32);
  st.loss_tracker.update_state(multiply(cast(loss, float32), Tensor(static_cast<float>(replicas()))),
                               n);
}

// The sample weight a compiled metric sees: compile()'s metrics none (Keras' metrics=),
// weighted_metrics the data's. A prediction's Keras mask multiplies in (Keras 3's
// MeanMetricWrapper: apply_mask with reduction "sum", for metrics= and weighted_metrics= alike),
// so masked steps count nowhere; Precision, Recall and AUC ignore masks, as Keras'.
Tensor metric_weight(const metrics::Metric& m, bool weighted, const Tensor& sw,
                     const Tensor& mask) {
  const Tensor w = weighted ? sw : Tensor();
  if (!mask.defined() || m.impl()->kind != metrics::detail::MetricImpl::Kind::Wrapper) return w;
  const Tensor mw = cast(mask, float32);
  if (!w.defined()) return mw;
  auto [a, b] = losses::detail::squeeze_or_expand_to_same_rank(mw, cast(w, float32));
  return multiply(a, b);
}

void update_metrics(TrainingState& st, const Tensor& y, const Tensor& y_pred, const Tensor& sw,
                    const Tensor& mask) {
  for (size_t i = 0; i < st.metrics.size(); ++i)
    st.metrics[i].update_state(y, y_pred, metric_weight(st.metrics[i], st.weighted[i], sw, mask));
}

// ---- models with several inputs or outputs ----

// A batch's components by role: the inputs, the targets and one sample weight per output
// (undefined: none; one shared weight is repeated).
struct Roles {
  std::vector<Tensor> xs, ys, sws;
};
Roles roles_of(const TrainingState& st, const std::vector<Tensor>& v) {
  TF_CHECK_ARG(v.size() >= st.n_inputs + st.n_outputs, "fit",
               "a batch of {} components for a model of {} inputs and {} outputs", v.size(),
               st.n_inputs, st.n_outputs);
  Roles r;
  const auto ni = static_cast<std::ptrdiff_t>(st.n_inputs);
  const auto no = static_cast<std::ptrdiff_t>(st.n_outputs);
  r.xs.assign(v.begin(), v.begin() + ni);
  r.ys.assign(v.begin() + ni, v.begin() + ni + no);
  const size_t rest = v.size() - st.n_inputs - st.n_outputs;
  for (size_t i = 0; i < st.n_outputs; ++i)
    r.sws.push_back(rest == 0 ? Tensor() : v[st.n_inputs + st.n_outputs + (rest == 1 ? 0 : i)]);
  return r;
}

// The outputs for the inputs (a functional model's vector call; other models take one input).
// `masks` (if given) receives each output's Keras mask (undefined: none).
std::vector<Tensor> call_outputs(const Layer& model, const std::vector<Tensor>& xs, bool training,
                                 std::vector<Tensor>* masks = nullptr) {
  if (auto* f = dynamic_cast<detail::FunctionalImpl*>(&model.impl()))
    return f->call_all(xs, training, masks);
  if (masks == nullptr) return {model(xs.at(0), training)};
  MaskedTensor r = model.call_with_mask(xs.at(0), Tensor(), training);
  masks->assign(1, r.mask);
  return {r.output};
}

// Keras' CompileLoss: the loss_weights-weighted sum of the outputs' losses (each output's own
// loss, unweighted, in `per_output`).
// Each output's Keras mask goes to its loss, as in the single-output path.
Tensor multi_loss(TrainingState& st, const Roles& r, const std::vector<Tensor>& preds,
                  const std::vector<Tensor>& masks, std::vector<Tensor>& per_output) {
  Tensor total;
  for (size_t i = 0; i < st.n_outputs; ++i) {
    const Tensor mask = i < masks.size() ? masks[i] : Tensor();
    const Tensor li = st.output_losses[i](r.ys[i], preds[i], r.sws[i], mask);
    per_output.push_back(li);
    const Tensor wi =
        st.loss_weights[i] == 1.0 ? li : multiply(li, cast(Tensor(st.loss_weights[i]), li.dtype()));
    total = total.defined() ? add(total, wi) : wi;
  }
  return total;
}

void track_multi(TrainingState& st, const Roles& r, const std::vector<Tensor>& preds,
                 const Tensor& loss, const std::vector<Tensor>& per_output,
                 const std::vector<Tensor>& masks) {
  track_loss(st, r.xs[0], loss);
  if (st.n_outputs > 1) {
    const Tensor n = tapeflow::detail::element_count(r.xs[0], {0}, float32);
    for (size_t i = 0; i < st.n_outputs; ++i)
      st.output_loss_trackers[i].update_state(
          multiply(cast(per_output[i], float32), Tensor(static_cast<float>(replicas()))), n);
  }
  for (size_t i = 0; i < st.metrics.size(); ++i) {
    const size_t o = st.metric_output[i];
    const Tensor mask = o < masks.size() ? masks[o] : Tensor();
    st.metrics[i].update_state(r.ys[o], preds[o],
                               metric_weight(st.metrics[i], st.weighted[i], r.sws[o], mask));
  }
}

// Keras 3's optimizer.scale_loss in the train step: a LossScaleOptimizer multiplies the loss by
// its scale (its apply_gradients divides the gradients by it); other optimizers leave it. The
// loss the step reports stays unscaled.
static Tensor scaled_loss(const TrainingState& st, const Tensor& loss) {
  // Keras' optimizer.scale_loss (loss_scale_factor), then a LossScaleOptimizer's dynamic scale;
  // apply_gradients divides by both.
  const Tensor l = st.optimizer.scale_loss(loss);
  if (!st.optimizer.is_loss_scaled()) return l;
  return mixed_precision::LossScaleOptimizer::from(st.optimizer).scale_loss(l);
}

Tensor train_body_multi(TrainingState& st, const Layer& model, const std::vector<Tensor>& v) {
  const Roles r = roles_of(st, v);
  std::vector<Tensor> preds, per_output, masks;
  Tensor loss;
  std::vector<Variable> vars;
  std::vector<Tensor> grads;
  {
    GradientTape tape;
    preds = call_outputs(model, r.xs, true, &masks);
    loss = add_regularization(model, multi_loss(st, r, preds, masks, per_output));
    vars = model.trainable_variables();
    grads = tape.gradient(scaled_loss(st, loss), vars);
  }
  st.optimizer.apply_gradients(grads, vars);
  track_multi(st, r, preds, loss, per_output, masks);
  return loss;
}

Tensor test_body_multi(TrainingState& st, const Layer& model, const std::vector<Tensor>& v) {
  const Roles r = roles_of(st, v);
  std::vector<Tensor> per_output;
  std::vector<Tensor> masks;
  const std::vector<Tensor> preds = call_outputs(model, r.xs, false, &masks);
  const Tensor loss = add_regularization(model, multi_loss(st, r, preds, masks, per_output));
  track_multi(st, r, preds, loss, per_output, masks);
  return loss;
}

Tensor train_body(TrainingState& st, const Layer& model, const std::vector<Tensor>& v) {
  if (st.multi) return train_body_multi(st, model, v);
  const Tensor& x = v[0];
  const Tensor& y = v[1];
  const Tensor sw = v.size() > 2 ? v[2] : Tensor();
  Tensor y_pred, y_mask, loss;
  std::vector<Variable> vars;
  std::vector<Tensor> grads;
  {
    GradientTape tape;
    const MaskedTensor out = model.call_with_mask(x, Tensor(), true);
    y_pred = out.output;
    y_mask = out.mask;
    loss = add_regularization(model, st.loss(y, y_pred, sw, out.mask));
    vars = model.trainable_variables();
    grads = tape.gradient(scaled_loss(st, loss), vars);
  }
  st.optimizer.apply_gradients(grads, vars);
  track_loss(st, x, loss);
  update_metrics(st, y, y_pred, sw, y_mask);
  return loss;
}

Tensor test_body(TrainingState& st, const Layer& model, const std::vector<Tensor>& v) {
  if (st.multi) return test_body_multi(st, model, v);
  const Tensor& x = v[0];
  const Tensor& y = v[1];
  const Tensor sw = v.size() > 2 ? v[2] : Tensor();
  const MaskedTensor out = model.call_with_mask(x, Tensor(), false);
  const Tensor& y_pred = out.output;
  const Tensor loss = add_regularization(model, st.loss(y, y_pred, sw, out.mask));
  track_loss(st, x, loss);
  update_metrics(st, y, y_pred, sw, out.mask);
  return loss;
}

// The step bodies bound to a model: they hold the model weakly (the compiled state, which the
// model owns, keeps the traced steps), so a step outliving its model fails clearly.
Layer lock_model(const std::weak_ptr<tapeflow::keras::detail::LayerImpl>& weak) {
  Layer m(weak.lock());
  TF_CHECK_T(FailedPreconditionError, m.defined(), "fit", "the model was destroyed");
  return m;
}
auto train_fn(TrainingState* st, std::weak_ptr<tapeflow::keras::detail::LayerImpl> weak) {
  return [st, weak](const std::vector<Tensor>& v) { return train_body(*st, lock_model(weak), v); };
}
auto test_fn(TrainingState* st, std::weak_ptr<tapeflow::keras::detail::LayerImpl> weak) {
  return [st, weak](const std::vector<Tensor>& v) { return test_body(*st, lock_model(weak), v); };
}

// A traced step of N tensor arguments, one per batch component (tf::function takes tensors as
// separate arguments).
template <size_t>
using TensorArg = Tensor;
template <class Body>
using StepFor = TrainingState::StepOf<std::invoke_result_t<Body, const std::vector<Tensor>&>>;
template <class Body, size_t... I>
StepFor<Body> traced_step(Body body, const FunctionOptions& opts, std::index_sequence<I...>) {
  auto f = tapeflow::function(
      [body](const TensorArg<I>&... a) { return body(std::vector<Tensor>{a...}); }, opts);
  return [f](const std::vector<Tensor>& v) { return f(v[I]...); };
}
template <class Body, size_t... N>
StepFor<Body> traced_step_of_size(size_t n, Body body, const FunctionOptions& opts,
                                  std::index_sequence<N...>) {
  StepFor<Body> step;
  (void)((n == N + 1 ? (step = traced_step(body, opts, std::make_index_sequence<N + 1>{}), true)
                     : false) ||
         ...);
  return step;
}
// The most components a batch may have (inputs, targets and sample weights together).
constexpr size_t kMaxBatchComponents = 12;

// A step for `components` tensors: traced with a None batch dimension (and compile's
// jit_compile), or eager (run_eagerly).
template <class Body>
StepFor<Body> make_step(Body body, const std::vector<TensorSpec>& signature,
                        const std::string& name, const CompileOptions& options) {
  if (options.run_eagerly) return body;
  FunctionOptions opts{
      .input_signature = signature, .jit_compile = options.jit_compile, .name = name};
  TF_CHECK_ARG(!signature.empty() && signature.size() <= kMaxBatchComponents, name.c_str(),
               "expects batches of 1 to {} components (inputs, targets and sample weights), got "
               "{}",
               kMaxBatchComponents, signature.size());
  return traced_step_of_size(signature.size(), body, opts,
                             std::make_index_sequence<kMaxBatchComponents>{});
}

std::vector<TensorSpec> batch_signature(const std::vector<Tensor>& batch, bool keep_batch) {
  std::vector<TensorSpec> sig;
  for (const Tensor& t : batch) {
    TensorShape s = t.shape();
    if (s.rank() > 0 && !keep_batch) s[0] = None;
    sig.emplace_back(s, t.dtype());
  }
  return sig;
}

bool same_signature(const std::vector<TensorSpec>& a, const std::vector<TensorSpec>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!(a[i].shape == b[i].shape) || a[i].dtype != b[i].dtype) return false;
  return true;
}

std::string shapes_text(const std::vector<Tensor>& v) {
  std::string s;
  for (const Tensor& t : v) s += (s.empty() ? "" : ", ") + t.shape().to_string();
  return s;
}

}  // namespace

// ------------------------------------------------------------------------------------------

namespace {
TrainingState& state_of(const Model& m, const char* op) {
  auto& st = m.model_impl_for_training();
  TF_CHECK_T(FailedPreconditionError, st != nullptr, op,
             "You must call compile() before using the model (model '{}')", m.name());
  return *st;
}
// SwapEMAWeights' hooks into the compiled optimizer (`st` outlives the loop's context).
void attach_ema(callbacks::TrainingContext& ctx, const TrainingState& st) {
  if (!st.optimizer.defined()) return;
  const optimizers::Optimizer opt = st.optimizer;
  ctx.swap_ema_weights = [opt] { opt.swap_ema_weights(); };
  ctx.copy_weights_to_ema = [opt] { opt.copy_weights_to_ema(); };
}

// The state a running fit or evaluate holds on to: compile() from a callback meanwhile makes a
// new one for later calls (as Keras's train_function outlives a recompile), and never frees
// the one in use.
std::shared_ptr<TrainingState> held_state_of(const Model& m, const char* op) {
  state_of(m, op);
  std::shared_ptr<TrainingState> st = m.model_impl_for_training();
  st->keep_batch.store(m.stateful(), std::memory_order_relaxed);
  return st;
}
}  // namespace

namespace {

// The names of a model's inputs and outputs (Keras' input_names and output_names: the Input
// layers' names and the names of the layers that made the outputs); one of each for a model
// that is not functional.
std::pair<std::vector<std::string>, std::vector<std::string>> io_names(const Model& m) {
  std::vector<std::string> in, out;
  if (auto* f = dynamic_cast<const detail::FunctionalImpl*>(&m.impl())) {
    for (const KerasTensor& t : f->inputs()) in.push_back(t.layer().name());
    for (const KerasTensor& t : f->outputs()) out.push_back(t.layer().name());
  } else {
    in.push_back(m.name());
    out.push_back(m.name());
  }
  return {in, out};
}

std::string names_text(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "'" : ", '") + n + "'";
  return "[" + s + "]";
}

// A compile() argument given per output, as one entry per output (`fill` where not given;
// `all_keys`: a map must name every output, as Keras asks of the loss).
template <class T>
std::vector<T> per_output(const PerOutput<T>& given, const std::vector<std::string>& outputs,
                          const std::string& model, const char* what, const T& fill,
                          bool all_keys) {
  if (!given.given()) return std::vector<T>(outputs.size(), fill);
  if (!given.is_map()) {
    TF_CHECK_ARG(given.list().size() == outputs.size(), "compile",
                 "`{}` has {} entries but model '{}' has {} outputs {}: give one per output (in "
                 "that order) or a map by output name",
                 what, given.list().size(), model, outputs.size(), names_text(outputs));
    return given.list();
  }
  std::vector<std::string> keys;
  for (const auto& [k, v] : given.by_name()) keys.push_back(k);
  std::vector<T> out;
  for (const std::string& o : outputs) {
    auto it = given.by_name().find(o);
    TF_CHECK_ARG(it != given.by_name().end() || !all_keys, "compile",
                 "Expected keys {} in {} dict, but found {}.keys()={} (model '{}')",
                 names_text(outputs), what, what, names_text(keys), model);
    out.push_back(it != given.by_name().end() ? it->second : fill);
  }
  for (const std::string& k : keys)
    TF_CHECK_ARG(std::find(outputs.begin(), outputs.end(), k) != outputs.end(), "compile",
                 "`{}` names '{}', which is not an output of model '{}': its outputs are {}", what,
                 k, model, names_text(outputs));
  return out;
}

// The multi-output part of compile(): the model's inputs and outputs, one loss and weight per
// output, each metric's output and log name, and the logs' order. `metric_output` gives the
// output of every metric already in st.metrics.
void configure_outputs(const Model& m, TrainingState& st, std::vector<losses::Loss> losses,
                       std::vector<double> weights, std::vector<size_t> metric_output) {
  auto [in, out] = io_names(m);
  st.n_inputs = in.size();
  st.n_outputs = out.size();
  st.multi = st.n_inputs > 1 || st.n_outputs > 1;
  st.input_names = std::move(in);
  st.output_names = std::move(out);
  st.output_losses = std::move(losses);
  st.loss_weights = std::move(weights);
  st.metric_output = std::move(metric_output);
  for (size_t i = 0; i < st.n_outputs && st.n_outputs > 1; ++i)
    st.output_loss_trackers.emplace_back(st.output_names[i] + "_loss");
  std::set<std::string> names{"loss"};
  for (const auto& t : st.output_loss_trackers) names.insert(t.name());
  for (size_t i = 0; i < st.metrics.size(); ++i) {
    const std::string n = st.n_outputs > 1
                              ? st.output_names[st.metric_output[i]] + "_" + st.metrics[i].name()
                              : st.metrics[i].name();
    TF_CHECK_ARG(n.rfind("val_", 0) != 0, "compile",
                 "metric name '{}' starts with 'val_', which fit's validation logs use", n);
    TF_CHECK_ARG(names.insert(n).second, "compile",
                 "two metrics (or a metric and a loss) are both logged as '{}': give them "
                 "different names",
                 n);
    st.metric_log_names.push_back(n);
    st.log_order.push_back(i);
  }
  // Keras 3.15 lists a multi-output model's metrics by name.
  if (st.n_outputs > 1)
    std::stable_sort(st.log_order.begin(), st.log_order.end(), [&st](size_t a, size_t b) {
      return st.metric_log_names[a] < st.metric_log_names[b];
    });
}

}  // namespace

namespace {
using detail::compile_access::record_of;

detail::compile_access::CompileRecord record_compile(const optimizers::Optimizer& optimizer,
                                                     const CompileOptions& options) {
  detail::compile_access::CompileRecord r;
  r.optimizer = optimizer;
  for (const MetricSpec& m : options.weighted_metrics) r.weighted_metrics.push_back(record_of(m));
  r.run_eagerly = options.run_eagerly;
  r.jit_compile = options.jit_compile;
  return r;
}

// A PerOutput of records from a PerOutput of specs (same form: list or map).
template <class T, class F>
auto record_per_output(const PerOutput<T>& in, F record)
    -> PerOutput<decltype(record(in.list()[0]))> {
  using R = decltype(record(in.list()[0]));
  if (!in.given()) return {};
  if (in.is_map()) {
    std::map<std::string, R> out;
    for (const auto& [k, v] : in.by_name()) out.emplace(k, record(v));
    return PerOutput<R>(std::move(out));
  }
  std::vector<R> out;
  for (const T& v : in.list()) out.push_back(record(v));
  return PerOutput<R>(std::move(out));
}
}  // namespace

// Keras 3's compile: a model whose dtype policy is mixed_float16 gets its optimizer wrapped in a
// LossScaleOptimizer unless it is one already (mixed_bfloat16 needs no loss scaling).
static optimizers::Optimizer loss_scaled_for(const Layer& model, optimizers::Optimizer optimizer) {
  if (optimizer.is_loss_scaled() || model.impl().policy_name() != "mixed_float16") return optimizer;
  return mixed_precision::LossScaleOptimizer(std::move(optimizer));
}

void Model::compile(optimizers::Optimizer optimizer, PerOutput<LossSpec> loss,
                    PerOutput<double> loss_weights, PerOutput<std::vector<MetricSpec>> metrics,
                    CompileOptions options) {
  TF_CHECK_ARG(optimizer.defined(), "compile", "the optimizer is an empty handle");
  TF_CHECK_ARG(loss.given(), "compile", "give a loss (one, or one per output)");
  const auto [in, out] = io_names(*this);
  const std::string n = name();
  std::vector<losses::Loss> per_loss;
  for (const LossSpec& l : per_output(loss, out, n, "loss", LossSpec(losses::Loss()), true)) {
    per_loss.push_back(l.resolve());
    TF_CHECK_ARG(per_loss.back().defined(), "compile", "a loss is an empty handle");
  }
  const auto weights = per_output(loss_weights, out, n, "loss_weights", 1.0, false);
  const auto per_metrics = per_output(metrics, out, n, "metrics", std::vector<MetricSpec>{}, false);
  TF_CHECK_ARG(out.size() == 1 || options.weighted_metrics.empty(), "compile",
               "weighted_metrics of a model with several outputs (model '{}') are not supported",
               n);
  auto st = std::make_shared<TrainingState>();
  const optimizers::Optimizer given = optimizer;
  st->optimizer = loss_scaled_for(*this, std::move(optimizer));
  st->loss = per_loss[0];
  std::vector<size_t> metric_output;
  for (size_t o = 0; o < per_metrics.size(); ++o)
    for (const MetricSpec& m : per_metrics[o]) {
      st->metrics.push_back(m.resolve(per_loss[o]));
      metric_output.push_back(o);
    }
  st->weighted.assign(st->metrics.size(), false);
  for (const MetricSpec& m : options.weighted_metrics) {
    st->metrics.push_back(m.resolve(st->loss));
    st->weighted.push_back(true);
    metric_output.push_back(0);
  }
  st->options = options;
  st->record = record_compile(given, options);
  st->record.loss_per_output = true;
  st->record.loss = record_per_output(loss, [](const LossSpec& l) { return record_of(l); });
  st->record.loss_weights = loss_weights;
  st->record.metrics_per_output = true;
  st->record.metrics = record_per_output(metrics, [](const std::vector<MetricSpec>& list) {
    std::vector<detail::compile_access::SpecRecord> out;
    for (const MetricSpec& m : list) out.push_back(record_of(m));
    return out;
  });
  if (distribute::has_strategy() && distribute::get_strategy().num_replicas_in_sync() > 1) {
    st->strategy = &distribute::get_strategy();
    st->strategy_alive = distribute::detail::strategy_lifetime(*st->strategy);
  }
  configure_outputs(*this, *st, std::move(per_loss), weights, std::move(metric_output));
  model_impl_for_training() = std::move(st);
}

void Model::compile(optimizers::Optimizer optimizer, std::initializer_list<LossSpec> loss,
                    PerOutput<double> loss_weights, PerOutput<std::vector<MetricSpec>> metrics,
                    CompileOptions options) {
  compile(std::move(optimizer), PerOutput<LossSpec>(std::vector<LossSpec>(loss)),
          std::move(loss_weights), std::move(metrics), std::move(options));
}

void Model::compile(optimizers::Optimizer optimizer, losses::Loss loss,
                    std::vector<MetricSpec> metrics, CompileOptions options) {
  TF_CHECK_ARG(optimizer.defined(), "compile", "the optimizer is an empty handle");
  TF_CHECK_ARG(loss.defined(), "compile", "the loss is an empty handle");
  auto st = std::make_shared<TrainingState>();
  st->record = record_compile(optimizer, options);
  st->record.single_loss.loss = loss;
  for (const MetricSpec& m : metrics) st->record.flat_metrics.push_back(record_of(m));
  st->optimizer = loss_scaled_for(*this, std::move(optimizer));
  st->loss = std::move(loss);
  for (const MetricSpec& m : metrics) st->metrics.push_back(m.resolve(st->loss));
  st->weighted.assign(st->metrics.size(), false);
  for (const MetricSpec& m : options.weighted_metrics) {
    st->metrics.push_back(m.resolve(st->loss));
    st->weighted.push_back(true);
  }
  // Logs and History are keyed by name: a second metric of one name, one named "loss" or one
  // named like a validation log would mix its values into another's.
  std::set<std::string> names{"loss"};
  for (const auto& m : st->metrics) {
    const std::string& n = m.name();
    TF_CHECK_ARG(n.rfind("val_", 0) != 0, "compile",
                 "metric name '{}' starts with 'val_', which fit's validation logs use", n);
    TF_CHECK_ARG(names.insert(n).second, "compile",
                 "two metrics (or a metric and the loss) are both named '{}': give them "
                 "different names",
                 n);
  }
  st->options = options;
  if (distribute::has_strategy() && distribute::get_strategy().num_replicas_in_sync() > 1) {
    st->strategy = &distribute::get_strategy();
    st->strategy_alive = distribute::detail::strategy_lifetime(*st->strategy);
  }
  // Several outputs: the one loss serves every output (Keras' rule); metrics need an output.
  const size_t outputs = io_names(*this).second.size();
  TF_CHECK_ARG(outputs == 1 || st->metrics.empty(), "compile",
               "model '{}' has {} outputs {}: give its metrics per output (a list of lists or a "
               "map by output name, with a loss per output or one loss)",
               name(), outputs, names_text(io_names(*this).second));
  configure_outputs(*this, *st, std::vector<losses::Loss>(outputs, st->loss),
                    std::vector<double>(outputs, 1.0), std::vector<size_t>(st->metrics.size(), 0));
  model_impl_for_training() = std::move(st);
}

void Model::compile(optimizers::Optimizer optimizer, const std::string& loss,
                    std::vector<MetricSpec> metrics, CompileOptions options) {
  compile(std::move(optimizer), losses::get(loss), std::move(metrics), options);
  // Keras' get_compile_config gives the loss as it was given: the name.
  model_impl_for_training()->record.single_loss = detail::compile_access::SpecRecord{loss, {}, {}};
}

namespace detail::compile_access {
const CompileRecord* compile_record(const Model& model) {
  const auto& st = model.model_impl_for_training();
  return st ? &st->record : nullptr;
}
}  // namespace detail::compile_access

bool Model::compiled() const { return model_impl_for_training() != nullptr; }

optimizers::Optimizer Model::optimizer() const { return state_of(*this, "optimizer").optimizer; }

std::vector<std::string> Model::metrics_names() const {
  auto& st = state_of(*this, "metrics_names");
  std::vector<std::string> names{"loss"};
  for (const auto& t : st.output_loss_trackers) names.push_back(t.name());
  for (size_t i : st.log_order) names.push_back(st.metric_log_names[i]);
  return names;
}

void Model::reset_metrics() {
  auto& st = state_of(*this, "reset_metrics");
  st.loss_tracker.reset_state();
  for (auto& t : st.output_loss_trackers) t.reset_state();
  for (auto& m : st.metrics) m.reset_state();
}

namespace {

// A compiled metric's result as a log value: logs hold one number per name, so a metric whose
// result has several elements (a confusion count with several thresholds) is an error naming it.
float log_value(const Tensor& result, const std::string& name) {
  TF_CHECK_ARG(result.shape().num_elements() == 1, "Model.compile",
               "metric \"{}\" gives a result of shape {}, but logs hold one number per metric: "
               "compile it with a single threshold (or class; F1Score, FBetaScore: an average, "
               "R2Score: a class_aggregation), or update and read it outside compile",
               name, result.shape().to_string());
  return result.item<float>();
}

Logs current_logs(TrainingState& st, const std::string& prefix = "") {
  Logs logs;
  logs.emplace_back(prefix + "loss", st.loss_tracker.result().item<float>());
  for (const auto& t : st.output_loss_trackers)
    logs.emplace_back(prefix + t.name(), t.result().item<float>());
  for (size_t i : st.log_order)
    logs.emplace_back(prefix + st.metric_log_names[i],
                      log_value(st.metrics[i].result(), st.metric_log_names[i]));
  return logs;
}

// The strategy the model was compiled under (nullptr: none); a FailedPreconditionError once it
// was destroyed (TF's strategy lives as long as the model refers to it; here the user owns it).
distribute::Strategy* live_strategy(const TrainingState& st, const char* op) {
  TF_CHECK_T(FailedPreconditionError, st.strategy == nullptr || !st.strategy_alive.expired(), op,
             "the model was compiled inside the scope of a distribution strategy that has been "
             "destroyed since: keep the strategy alive while the model trains, or compile the "
             "model again");
  return st.strategy;
}

// Whether the training metrics' logs are summed over the workers of a
// MultiWorkerMirroredStrategy (every worker must then read them at the same points of fit).
distribute::Strategy* logs_over_workers(TrainingState& st) {
  distribute::Strategy* strategy = live_strategy(st, "fit");
  const bool multi_worker =
      strategy != nullptr &&
      static_cast<size_t>(strategy->num_replicas_in_sync()) != strategy->devices().size();
  return multi_worker ? strategy : nullptr;
}

// The training metrics' logs: under a MultiWorkerMirroredStrategy summed over every worker's
// share, as TF reports them.
Logs training_logs(TrainingState& st) {
  metrics::detail::ResultsOverWorkersScope over(logs_over_workers(st));
  return current_logs(st);
}

std::vector<double> values_of(const Logs& logs) {
  std::vector<double> v;
  for (const auto& [k, x] : logs) v.push_back(x);
  return v;
}

// `traced` for batches like `batch`, (re)built when their signature changed.
template <class Body, class Traced>
StepFor<Body> ensure_step(Traced& traced, Body body, const std::vector<Tensor>& batch,
                          const std::string& name, const CompileOptions& options, bool keep_batch) {
  const auto sig = batch_signature(batch, keep_batch);
  std::lock_guard lock(traced.mu);
  if (!traced.fn || !same_signature(sig, traced.signature)) {
    traced.fn = make_step(body, sig, name, options);
    traced.signature = sig;
  }
  return traced.fn;
}

template <class Body, class Traced>
auto run_step(Traced& traced, Body body, const std::vector<Tensor>& batch, const std::string& name,
              const CompileOptions& options, bool keep_batch) {
  return ensure_step(traced, body, batch, name, options, keep_batch)(batch);
}

// The callbacks of one loop in Keras 3's order: the user's, then History (fit's), then the
// progress bar when verbose (Keras 3 appends its defaults after the user's callbacks, so "Epoch
// i/n" follows their on_epoch_begin and the epoch's line their on_epoch_end; tf.keras 2 put the
// bar first).
callbacks::CallbackList callback_list(
    int verbose, const std::vector<callbacks::CallbackRef>& user, callbacks::TrainingContext* ctx,
    std::optional<callbacks::CallbackRef> history = std::nullopt) {
  std::vector<callbacks::CallbackRef> cbs(user.begin(), user.end());
  if (history) cbs.push_back(*history);
  if (verbose != 0) cbs.push_back(callbacks::ProgbarLogger());
  return callbacks::CallbackList(std::move(cbs), ctx);
}

// One training step: on the calling thread, or split over the replicas of the strategy the
// model was compiled under (each replica replays its own trace of the step; the optimizer
// all-reduces the gradients; mirrored metrics accumulate per replica).
template <class Body>
void run_train_step(TrainingState& st, Body body, const std::vector<Tensor>& batch) {
  distribute::Strategy* strategy = live_strategy(st, "train_function");
  if (!strategy) {
    run_step(st.train, body, batch, "train_function", st.options, st.keep_batch);
    return;
  }
  const auto per_replica = distribute::detail::split_global_batch(batch, strategy->layout());
  // Build (or rebuild) the traced step here, on the calling thread, from one replica's shapes.
  const Step fn = ensure_step(st.train, body, per_replica.values()[0], "train_function", st.options,
                              st.keep_batch);
  strategy->run([&fn](const std::vector<Tensor>& local) { (void)fn(local); }, per_replica);
}

void check_xy(const char* op, const Tensor& x, const Tensor& y) {
  TF_CHECK_ARG(x.defined() && y.defined(), op, "x and y must be defined tensors");
  TF_CHECK_ARG(x.rank() >= 1 && y.rank() >= 1, op,
               "x and y need a first dimension that counts the samples, got x of shape {} and y "
               "of shape {} (a scalar has none)",
               x.shape().to_string(), y.shape().to_string());
  TF_CHECK_ARG(x.shape()[0] == y.shape()[0], op,
               "x and y must have the same number of samples (first dimension): x is {}, y is {}",
               x.shape().to_string(), y.shape().to_string());
  TF_CHECK_ARG(x.shape()[0] > 0, op,
               "x and y have no samples (x is {}, y is {}): there is nothing to {}",
               x.shape().to_string(), y.shape().to_string(), op);
}

// fit's and evaluate's sample_weight for tensor x and y: one row per sample.
void check_sample_weight(const char* op, const Tensor& x, const Tensor& sample_weight) {
  if (!sample_weight.defined()) return;
  TF_CHECK_ARG(sample_weight.rank() >= 1 && sample_weight.shape()[0] == x.shape()[0], op,
               "sample_weight must have one row per sample (first dimension {}, as x {}), got "
               "shape {}",
               x.shape()[0], x.shape().to_string(), sample_weight.shape().to_string());
}

// Keras' class_weight_to_sample_weights: a float32 weight per row of y, its class's weight
// (1 for a class not in the map). The class is y (rank 1 or (n, 1), rounded half to even as
// NumPy) or argmax(y, -1) (one-hot rows).
Tensor class_weights_of(const Tensor& y, const std::map<int64_t, double>& class_weight) {
  TF_CHECK_ARG(y.rank() == 1 || y.rank() == 2, "fit",
               "class_weight needs targets of rank 1 (class ids) or 2 ((n, 1) class ids or (n, "
               "classes) one-hot rows), got y of shape {}",
               y.shape().to_string());
  std::vector<int64_t> ids;
  if (y.rank() == 2 && y.shape()[1] != 1) {
    ids = cast(argmax(y, -1), int64).numpy<int64_t>();
  } else {
    for (double v : cast(y, float64).numpy<double>()) {
      TF_CHECK_ARG(std::isfinite(v) && std::fabs(v) < 9.0e18, "fit",
                   "class_weight: the target {} is not a class id", v);
      ids.push_back(static_cast<int64_t>(std::nearbyint(v)));
    }
  }
  std::vector<float> w(ids.size(), 1.0f);
  for (size_t i = 0; i < ids.size(); ++i)
    if (auto it = class_weight.find(ids[i]); it != class_weight.end())
      w[i] = static_cast<float>(it->second);
  return constant(w, TensorShape{static_cast<int64_t>(w.size())});
}

// A Dataset of (x, y) batches with their class weights as the third component.
data::Dataset with_class_weights(const data::Dataset& ds, std::map<int64_t, double> cw) {
  return ds.map([cw = std::move(cw)](std::vector<Tensor> batch) {
    TF_CHECK_ARG(batch.size() != 3, "fit",
                 "You cannot `class_weight` and `sample_weight` at the same time: the dataset "
                 "yields (x, y, sample_weight) batches");
    TF_CHECK_ARG(batch.size() == 2, "fit", "class_weight needs (x, y) batches, got {} components",
                 batch.size());
    batch.push_back(class_weights_of(batch[1], cw));
    return batch;
  });
}

// (x, y) slices, or (x, y, sample_weight) ones when the weights are defined.
data::Dataset slices_of(const Tensor& x, const Tensor& y, const Tensor& sample_weight) {
  return sample_weight.defined() ? data::Dataset::from_tensor_slices({x, y, sample_weight})
                                 : data::Dataset::from_tensor_slices({x, y});
}

// `seeds`: the shuffle's (seed, seed2) pair, when it must be the same in every process.
data::Dataset xy_dataset(const Tensor& x, const Tensor& y, const Tensor& sample_weight,
                         int batch_size, bool shuffle,
                         std::optional<std::pair<uint64_t, uint64_t>> seeds = std::nullopt) {
  TF_CHECK_ARG(batch_size > 0, "fit", "batch_size must be positive, got {}", batch_size);
  data::Dataset ds = slices_of(x, y, sample_weight);
  if (shuffle && seeds)
    ds = data::detail::shuffle_with_seeds(ds, x.shape()[0], seeds->first, seeds->second);
  else if (shuffle)
    ds = ds.shuffle(x.shape()[0]);
  return ds.batch(batch_size);
}

// The seeds of fit's shuffle under a MultiWorkerMirroredStrategy: every worker keeps its share
// of the same global batches, so every worker must shuffle alike. Worker 0's pair (drawn as an
// unseeded shuffle draws it: the global seed and a counter, or fresh entropy) goes to every
// worker; nullopt without several workers.
std::optional<std::pair<uint64_t, uint64_t>> shuffle_seeds_over_workers(const Model& model) {
  distribute::Strategy* strategy = live_strategy(*held_state_of(model, "fit"), "fit");
  if (strategy == nullptr || distribute::detail::num_workers(*strategy) == 1) return std::nullopt;
  const auto [seed, seed2] = tapeflow::detail::resolve_random_seeds(std::nullopt);
  const std::vector<int64_t> all = distribute::detail::gather_over_workers(
      *strategy, {static_cast<int64_t>(seed), static_cast<int64_t>(seed2)}, "fit");
  return std::pair{static_cast<uint64_t>(all[0]), static_cast<uint64_t>(all[1])};
}

// evaluate's and predict's steps: -1 (the whole dataset, which must then be finite) or positive
// (Keras raises for an infinite dataset without steps; it ran forever here).
void check_steps(const char* op, int64_t steps, int64_t cardinality) {
  TF_CHECK_ARG(steps == -1 || steps > 0, op,
               "steps must be positive (or -1: the whole dataset), got {}", steps);
  TF_CHECK_ARG(cardinality != data::INFINITE_CARDINALITY || steps > 0, op,
               "the dataset is infinite (repeat()): give steps");
}

}  // namespace

// ---- several inputs or outputs: the data ----

// A batch of a model with several inputs or outputs: the inputs, the targets, then no, one
// shared or one per output sample weight. No-op for other models.
void check_multi_batch(const TrainingState& st, const char* op, const std::vector<Tensor>& batch,
                       const char* what) {
  if (!st.multi) return;
  const size_t base = st.n_inputs + st.n_outputs;
  const size_t rest = batch.size() >= base ? batch.size() - base : 0;
  TF_CHECK_ARG(batch.size() >= base && (rest <= 1 || rest == st.n_outputs), op,
               "a model with inputs {} and outputs {} expects {}batches of its {} inputs, then "
               "its {} targets, then optionally one shared or one per output sample weight; got "
               "{} components ({})",
               names_text(st.input_names), names_text(st.output_names), what, st.n_inputs,
               st.n_outputs, batch.size(), shapes_text(batch));
}

// Tensors for a model with several inputs or outputs, checked: one per input and per output,
// every one with the same number of samples, and the sample weights (none, one shared or one
// per output; an undefined one of several weighs 1).
struct MultiData {
  std::vector<Tensor> xs, ys, sws;
  int64_t samples = 0;
  std::vector<Tensor> flat() const {
    std::vector<Tensor> v = xs;
    v.insert(v.end(), ys.begin(), ys.end());
    v.insert(v.end(), sws.begin(), sws.end());
    return v;
  }
};
MultiData multi_data(const Model& m, const char* op, const std::vector<Tensor>& xs,
                     const std::vector<Tensor>& ys, const Tensor& shared_weight,
                     const std::vector<Tensor>& weights, bool with_targets = true) {
  const auto [in, out] = io_names(m);
  const std::string n = m.name();
  TF_CHECK_ARG(xs.size() == in.size(), op,
               "model '{}' expects {} input(s) {}, but it received {} input tensors", n, in.size(),
               names_text(in), xs.size());
  TF_CHECK_ARG(!with_targets || ys.size() == out.size(), op,
               "model '{}' has {} output(s) {}, but it received {} target tensors", n, out.size(),
               names_text(out), ys.size());
  TF_CHECK_ARG(weights.empty() || weights.size() == out.size(), op,
               "sample_weights must have one tensor per output of model '{}' {}, got {}", n,
               names_text(out), weights.size());
  TF_CHECK_ARG(!shared_weight.defined() || weights.empty(), op,
               "give sample_weight (shared by every output) or sample_weights (one per output), "
               "not both");
  MultiData d{xs, with_targets ? ys : std::vector<Tensor>{}, {}, 0};
  auto check = [&](const Tensor& t, const std::string& what) {
    TF_CHECK_ARG(t.defined() && t.rank() >= 1, op, "{} must be a tensor of rank >= 1, got {}", what,
                 t.defined() ? t.shape().to_string() : "an undefined tensor");
    if (d.samples == 0) d.samples = t.shape()[0];
    TF_CHECK_ARG(t.shape()[0] == d.samples, op,
                 "every input, target and sample weight must have the same number of samples "
                 "(first dimension): {} is {}, input '{}' is {}",
                 what, t.shape().to_string(), in[0], xs[0].shape().to_string());
  };
  for (size_t i = 0; i < xs.size(); ++i) check(xs[i], "input '" + in[i] + "'");
  for (size_t i = 0; i < d.ys.size(); ++i) check(d.ys[i], "target '" + out[i] + "'");
  TF_CHECK_ARG(d.samples > 0, op, "the data has no samples: there is nothing to {}", op);
  if (shared_weight.defined()) {
    check(shared_weight, "sample_weight");
    d.sws.push_back(shared_weight);
  }
  for (size_t i = 0; i < weights.size(); ++i) {
    if (weights[i].defined()) check(weights[i], "sample weight of output '" + out[i] + "'");
    d.sws.push_back(weights[i].defined() ? weights[i] : ones({d.samples}, float32));
  }
  return d;
}

// Keras' dicts: the tensors of `given` in the order of `names` (every name present, no other).
std::vector<Tensor> by_names(const std::map<std::string, Tensor>& given,
                             const std::vector<std::string>& names, const char* op,
                             const char* what) {
  std::vector<std::string> keys;
  for (const auto& [k, v] : given) keys.push_back(k);
  std::vector<Tensor> out;
  for (const std::string& n : names) {
    auto it = given.find(n);
    TF_CHECK_ARG(it != given.end(), op,
                 "Missing data for {} \"{}\". You passed a data dictionary with keys {}. "
                 "Expected the following keys: {}",
                 what, n, names_text(keys), names_text(names));
    out.push_back(it->second);
  }
  for (const std::string& k : keys)
    TF_CHECK_ARG(std::find(names.begin(), names.end(), k) != names.end(), op,
                 "the data dictionary has a key '{}' that is no {} of the model; expected the "
                 "keys {}",
                 k, what, names_text(names));
  return out;
}

// The training loop proper (fit for tensors and datasets).
History Model::fit(const data::Dataset& given, FitOptions options) {
  TF_CHECK_ARG(!options.sample_weight.defined() && options.sample_weights.empty(), "fit",
               "sample_weight is for tensor x and y: a Dataset yields (x, y, sample_weight) "
               "batches instead");
  const data::Dataset dataset =
      options.class_weight.empty() ? given : with_class_weights(given, options.class_weight);
  const auto held = held_state_of(*this, "fit");
  auto& st = *held;
  TF_CHECK_ARG(options.epochs >= 0, "fit", "epochs must be >= 0, got {}", options.epochs);
  TF_CHECK_ARG(options.initial_epoch >= 0, "fit", "initial_epoch must be >= 0, got {}",
               options.initial_epoch);
  TF_CHECK_ARG(options.steps_per_epoch == -1 || options.steps_per_epoch > 0, "fit",
               "steps_per_epoch must be positive (or -1: the whole data), got {}",
               options.steps_per_epoch);
  // As Keras: a Dataset cannot be split (its samples are not indexable).
  TF_CHECK_ARG(options.validation_split == 0.0, "fit",
               "validation_split ({}) is only supported for tensor inputs, not a Dataset: give "
               "validation_data",
               options.validation_split);
  TF_CHECK_ARG(options.validation_freq >= 1, "fit", "validation_freq must be >= 1, got {}",
               options.validation_freq);
  TF_CHECK_ARG(options.validation_batch_size >= 0, "fit",
               "validation_batch_size must be >= 0 (0: batch_size), got {}",
               options.validation_batch_size);
  TF_CHECK_ARG(!options.validation_data.defined() || options.validation_data.dataset ||
                   options.validation_batch_size > 0 || options.batch_size > 0,
               "fit",
               "validation_data tensors are batched by validation_batch_size or batch_size, but "
               "batch_size is {} and validation_batch_size is 0: give a positive one",
               options.batch_size);
  const int64_t card = dataset.cardinality();
  TF_CHECK_ARG(card != data::INFINITE_CARDINALITY || options.steps_per_epoch > 0, "fit",
               "the dataset is infinite (repeat()): give steps_per_epoch");
  int64_t steps = options.steps_per_epoch > 0 ? options.steps_per_epoch : (card >= 0 ? card : -1);

  TrainingState* stp = &st;
  const auto train = train_fn(stp, impl_);
  const auto test = test_fn(stp, impl_);

  bool stop = false;
  callbacks::TrainingContext ctx;
  ctx.epochs = options.epochs;
  ctx.steps = steps;
  ctx.verbose = options.verbose;
  ctx.weights = this;
  ctx.stop_training = &stop;
  // A schedule's rate is readable (TensorBoard's epoch_learning_rate) but not settable.
  ctx.get_learning_rate = [stp] { return stp->optimizer.current_learning_rate(); };
  attach_ema(ctx, st);
  if (!st.optimizer.has_schedule())
    ctx.set_learning_rate = [stp](double lr) { stp->optimizer.set_learning_rate(lr); };
  // ModelCheckpoint: a path ending in .keras or .tfmodel gets the whole model (Keras 3's
  // default save_weights_only=False, which requires .keras), any other the weights.
  ctx.save_weights = [this](const std::string& p) {
    if (is_whole_model_path(p)) {
      save(p);
    } else {
      save_weights(p);
    }
  };
  ctx.metric_direction = [stp](const std::string& name) -> std::string {
    for (size_t i = 0; i < stp->metrics.size(); ++i)
      if (stp->metric_log_names[i] == name) return stp->metrics[i].direction();
    return "";
  };
  if (distribute::Strategy* strategy = live_strategy(st, "fit");
      strategy != nullptr && distribute::detail::num_workers(*strategy) > 1) {
    ctx.worker_index = distribute::detail::worker_index(*strategy);
    ctx.num_workers = distribute::detail::num_workers(*strategy);
    ctx.gather_over_workers = [strategy](int64_t value, const char* what) {
      return distribute::detail::gather_over_workers(*strategy, {value}, what);
    };
  }
  Variable backup_epoch(Tensor(int64_t{-1}), "backup_epoch", false);
  auto backup_checkpoint = [this, stp, backup_epoch] {
    return train::Checkpoint({{"model", std::ref(*this)},
                              {"optimizer", stp->optimizer},
                              {"epoch", backup_epoch}});
  };
  ctx.save_backup = [backup_checkpoint, backup_epoch](const std::string& dir, int epoch) mutable {
    backup_epoch.assign(Tensor(static_cast<int64_t>(epoch)));
    train::CheckpointManager(backup_checkpoint(), dir, 1).save();
  };
  ctx.restore_backup = [this, stp, &dataset, backup_checkpoint,
                        backup_epoch](const std::string& dir) -> std::optional<int> {
    std::error_code ec;
    const bool present = std::filesystem::exists(dir, ec);
    TF_CHECK_T(FailedPreconditionError, !ec, "BackupAndRestore",
               "cannot inspect the backup directory '{}': {}", dir, ec.message());
    if (!present) return std::nullopt;
    train::Checkpoint ckpt = backup_checkpoint();
    train::CheckpointManager manager(ckpt, dir, 1);
    const std::string latest = manager.latest_checkpoint();
    if (latest.empty()) return std::nullopt;
    // A model that has not been built has no variables to restore into (its weights would be
    // created fresh by the first step): build it for the data's first batch first, in the
    // scope of the strategy it was compiled under, as the first step would.
    if (!built()) {
      data::Dataset::Iterator it = dataset.make_iterator();
      const auto first = it.get_next();
      TF_CHECK_T(FailedPreconditionError, first && !first->empty(), "BackupAndRestore",
                 "model '{}' is not built and the training data yields no batch to build it "
                 "from, so the backup in '{}' cannot be restored; build the model first",
                 name(), dir);
      distribute::Strategy* strategy = live_strategy(*stp, "fit");
      std::optional<distribute::Strategy::Scope> scope;
      if (strategy != nullptr && !distribute::has_strategy()) scope.emplace(*strategy);
      Layer::build((*first)[0].shape());
    }
    ckpt.restore(latest);
    const int64_t epoch = backup_epoch.value().item<int64_t>();
    // The epoch after it must be an int as well.
    TF_CHECK_ARG(epoch >= 0 && epoch < std::numeric_limits<int>::max(), "BackupAndRestore",
                 "the backup in '{}' records epoch {}, outside [0, {}): a corrupt backup?", dir,
                 epoch, std::numeric_limits<int>::max());
    return static_cast<int>(epoch);
  };

  auto history = std::make_shared<History>();
  callbacks::CallbackList list = callback_list(options.verbose, options.callbacks, &ctx, history);
  // Each batch's logs only for callbacks that read them (reading them waits for a GPU), and
  // always when the workers sum them (all must read them at the same points).
  const bool test_batch_logs = list.reads_batch_logs();
  const bool train_batch_logs = test_batch_logs || logs_over_workers(st) != nullptr;

  // Validation data as batches.
  std::optional<data::Dataset> val;
  if (options.validation_data.defined()) {
    if (options.validation_data.dataset) {
      val = *options.validation_data.dataset;
    } else if (!options.validation_data.xs.empty()) {
      const ValidationData& vd = options.validation_data;
      const int vbs =
          options.validation_batch_size > 0 ? options.validation_batch_size : options.batch_size;
      // One weight for a model of several outputs is shared by them (Keras'
      // validation_data=(xs, ys, w)).
      const bool shared = vd.sample_weights.size() == 1 && vd.ys.size() > 1;
      const MultiData d =
          multi_data(*this, "fit", vd.xs, vd.ys, shared ? vd.sample_weights[0] : Tensor(),
                     shared ? std::vector<Tensor>{} : vd.sample_weights);
      val = data::Dataset::from_tensor_slices(d.flat()).batch(vbs);
    } else {
      const ValidationData& vd = options.validation_data;
      check_xy("fit", vd.x, vd.y);
      check_sample_weight("fit", vd.x, vd.sample_weight);
      const int vbs = options.validation_batch_size > 0 ? options.validation_batch_size
                                                        : options.batch_size;
      val = slices_of(vd.x, vd.y, vd.sample_weight).batch(vbs);
    }
  }

  TF_CHECK_ARG(!val || val->cardinality() != data::INFINITE_CARDINALITY, "fit",
               "the validation dataset is infinite (repeat()): validation runs over the whole "
               "of it");
  list.on_train_begin();
  int first_epoch = options.initial_epoch;
  for (auto& c : list.callbacks())
    if (auto* b = dynamic_cast<callbacks::BackupAndRestore*>(c.get()))
      first_epoch = std::max(first_epoch, b->initial_epoch());

  Logs logs;
  std::optional<data::Dataset::Iterator> persistent;  // steps_per_epoch: continue across epochs
  // As Keras 3, the stop flag is read after each batch and each epoch: an epoch that begins
  // stopped (set in on_train_begin or on_epoch_begin) still runs one batch.
  for (int epoch = first_epoch; epoch < options.epochs; ++epoch) {
    reset_metrics();
    list.on_epoch_begin(epoch);
    int64_t step = 0;
    auto run_batch = [&](const std::vector<Tensor>& batch) {
      check_multi_batch(st, "fit", batch, "");
      TF_CHECK_ARG(st.multi || batch.size() == 2 || batch.size() == 3, "fit",
                   "expects (x, y) or (x, y, sample_weight) batches, got {} components ({})",
                   batch.size(), shapes_text(batch));
      list.on_train_batch_begin(step);
      run_train_step(st, train, batch);
      list.on_train_batch_end(step, train_batch_logs ? training_logs(st) : Logs{});
      ++step;
    };
    if (options.steps_per_epoch > 0) {
      bool fresh = false;  // this epoch started a new pass over the dataset
      while (step < options.steps_per_epoch) {
        if (!persistent) {
          persistent = dataset.make_iterator();
          fresh = true;
        }
        auto batch = persistent->get_next();
        if (!batch) {
          persistent.reset();
          // The last pass ended with the previous epoch: start the next one here (a new pass
          // that yields nothing means an empty dataset, reported below).
          if (step == 0 && !fresh) continue;
          if (step == 0) break;
          TF_LOG_WARN("fit: your input ran out of data after {} steps of epoch {}; the next "
                      "epoch starts a new pass",
                      step, epoch + 1);
          break;
        }
        run_batch(*batch);
        if (stop) break;
      }
    } else {
      for (const auto& batch : dataset) {
        run_batch(batch);
        if (stop) break;
      }
    }
    // Keras raises here too ("Unexpected result of train_function (Empty logs)").
    TF_CHECK_ARG(step > 0, "fit",
                 "the dataset yielded no batches in epoch {}: there is nothing to train on",
                 epoch + 1);
    if (ctx.steps < 0) ctx.steps = step;  // known after the first pass, as Keras
    logs = training_logs(st);
    if (val && (epoch + 1) % options.validation_freq == 0) {
      reset_metrics();
      list.on_test_begin();
      int64_t vstep = 0;
      for (const auto& batch : *val) {
        check_multi_batch(st, "fit", batch, "validation ");
        TF_CHECK_ARG(st.multi || batch.size() == 2 || batch.size() == 3, "fit",
                     "expects validation batches of (x, y) or (x, y, sample_weight), got {} "
                     "components ({})",
                     batch.size(), shapes_text(batch));
        run_step(st.test, test, batch, "test_function", st.options, st.keep_batch);
        list.on_test_batch_end(vstep++, test_batch_logs ? current_logs(st) : Logs{});
      }
      // An empty validation set would log val_loss 0 (and mislead EarlyStopping): as
      // evaluate, it is an error.
      TF_CHECK_ARG(vstep > 0, "fit",
                   "the validation data yielded no batches in epoch {}: there is nothing to "
                   "validate on",
                   epoch + 1);
      const Logs vlogs = current_logs(st, "val_");
      list.on_test_end(current_logs(st));
      logs.insert(logs.end(), vlogs.begin(), vlogs.end());
    }
    list.on_epoch_end(epoch, logs);
    if (stop) break;
  }
  // Keras: with use_ema the weights end as their moving averages.
  if (options.epochs > 0) st.optimizer.finalize_variable_values(trainable_variables());
  list.on_train_end(logs);
  return *history;
}

History Model::fit(const Tensor& x, const Tensor& y, FitOptions options) {
  check_xy("fit", x, y);
  TF_CHECK_ARG(options.validation_split >= 0.0 && options.validation_split < 1.0, "fit",
               "validation_split must be in [0, 1), got {}", options.validation_split);
  check_sample_weight("fit", x, options.sample_weight);
  TF_CHECK_ARG(options.class_weight.empty() || !options.sample_weight.defined(), "fit",
               "You cannot `class_weight` and `sample_weight` at the same time");
  Tensor xt = x, yt = y, wt = options.sample_weight;
  if (options.validation_split > 0.0) {
    TF_CHECK_ARG(!options.validation_data.defined(), "fit",
                 "give validation_data or validation_split, not both");
    const int64_t n = x.shape()[0];
    const auto split = static_cast<int64_t>(std::floor(static_cast<double>(n) *
                                                       (1.0 - options.validation_split)));
    TF_CHECK_ARG(split > 0 && split < n, "fit",
                 "validation_split {} of {} samples leaves no training or no validation data",
                 options.validation_split, n);
    auto rows = [](const Tensor& t, int64_t begin, int64_t count) {
      std::vector<int64_t> b(static_cast<size_t>(t.rank()), 0), s = t.shape().dims();
      b[0] = begin;
      s[0] = count;
      return slice(t, b, s);
    };
    // The sample weights split with the rows; class weights are for the training rows only.
    options.validation_data = ValidationData(rows(x, split, n - split), rows(y, split, n - split),
                                             wt.defined() ? rows(wt, split, n - split) : Tensor());
    options.validation_split = 0.0;  // done: the dataset fit below must not see it
    xt = rows(x, 0, split);
    yt = rows(y, 0, split);
    if (wt.defined()) wt = rows(wt, 0, split);
  }
  if (!options.class_weight.empty()) wt = class_weights_of(yt, options.class_weight);
  // Done: the dataset fit below must not see them.
  options.class_weight.clear();
  options.sample_weight = Tensor();
  const data::Dataset ds =
      xy_dataset(xt, yt, wt, options.batch_size, options.shuffle,
                 options.shuffle ? shuffle_seeds_over_workers(*this) : std::nullopt);
  return fit(ds, std::move(options));
}

std::vector<double> Model::evaluate(const data::Dataset& dataset, EvaluateOptions options) {
  TF_CHECK_ARG(!options.sample_weight.defined() && options.sample_weights.empty(), "evaluate",
               "sample_weight is for tensor x and y: a Dataset yields (x, y, sample_weight) "
               "batches instead");
  const auto held = held_state_of(*this, "evaluate");
  auto& st = *held;
  const auto test = test_fn(&st, impl_);
  callbacks::TrainingContext ctx;
  attach_ema(ctx, st);
  const int64_t card = dataset.cardinality();
  check_steps("evaluate", options.steps, card);
  ctx.steps = options.steps > 0 ? options.steps : (card >= 0 ? card : -1);
  ctx.verbose = options.verbose;
  ctx.weights = this;
  callbacks::CallbackList list = callback_list(options.verbose, options.callbacks, &ctx);
  const bool batch_logs = list.reads_batch_logs();  // as fit's
  reset_metrics();
  list.on_test_begin();
  int64_t step = 0;
  for (const auto& batch : dataset) {
    if (options.steps > 0 && step >= options.steps) break;
    check_multi_batch(st, "evaluate", batch, "");
    TF_CHECK_ARG(st.multi || batch.size() == 2 || batch.size() == 3, "evaluate",
                 "expects (x, y) or (x, y, sample_weight) batches, got {} components ({})",
                 batch.size(), shapes_text(batch));
    run_step(st.test, test, batch, "test_function", st.options, st.keep_batch);
    list.on_test_batch_end(step++, batch_logs ? current_logs(st) : Logs{});
  }
  TF_CHECK_ARG(step > 0, "evaluate",
               "the dataset yielded no batches: there is nothing to evaluate");
  const Logs logs = current_logs(st);
  list.on_test_end(logs);
  return values_of(logs);
}

std::vector<double> Model::evaluate(const Tensor& x, const Tensor& y, EvaluateOptions options) {
  check_xy("evaluate", x, y);
  TF_CHECK_ARG(options.batch_size > 0, "evaluate", "batch_size must be positive, got {}",
               options.batch_size);
  check_sample_weight("evaluate", x, options.sample_weight);
  const data::Dataset ds = slices_of(x, y, options.sample_weight).batch(options.batch_size);
  options.sample_weight = Tensor();
  return evaluate(ds, std::move(options));
}

Tensor Model::predict(const data::Dataset& dataset, PredictOptions options) {
  if (const auto [in, out] = io_names(*this); in.size() > 1 || out.size() > 1) {
    TF_CHECK_ARG(out.size() == 1, "predict",
                 "model '{}' has {} outputs {}: call predict_outputs (or predict with a vector "
                 "of inputs), which returns every output",
                 name(), out.size(), names_text(out));
    return predict_outputs(dataset, std::move(options)).front();
  }
  const std::weak_ptr<tapeflow::keras::detail::LayerImpl> weak = impl_;
  auto pred = [weak](const std::vector<Tensor>& v) { return lock_model(weak)(v[0], false); };
  // predict needs no compile(): its step lives in a state of its own when not compiled.
  auto& slot = model_impl_for_training();
  std::shared_ptr<TrainingState> st = slot ? slot : std::make_shared<TrainingState>();
  st->keep_batch.store(stateful(), std::memory_order_relaxed);
  callbacks::TrainingContext ctx;
  attach_ema(ctx, *st);
  const int64_t card = dataset.cardinality();
  check_steps("predict", options.steps, card);
  ctx.steps = options.steps > 0 ? options.steps : (card >= 0 ? card : -1);
  ctx.verbose = options.verbose;
  callbacks::CallbackList list = callback_list(options.verbose, options.callbacks, &ctx);
  list.on_predict_begin();
  std::vector<Tensor> outs;
  int64_t step = 0;
  for (const auto& batch : dataset) {
    if (options.steps > 0 && step >= options.steps) break;
    TF_CHECK_ARG(!batch.empty(), "predict", "a batch has no components");
    outs.push_back(
        run_step(st->predict, pred, {batch[0]}, "predict_function", st->options, st->keep_batch));
    list.on_predict_batch_end(step++);
  }
  list.on_predict_end();
  TF_CHECK_ARG(!outs.empty(), "predict", "the input has no samples");
  return outs.size() == 1 ? outs[0] : concat(outs, 0);
}

Tensor Model::predict(const Tensor& x, PredictOptions options) {
  TF_CHECK_ARG(x.defined() && x.rank() >= 1, "predict", "x must be a tensor of rank >= 1, got {}",
               x.defined() ? x.shape().to_string() : "an undefined tensor");
  TF_CHECK_ARG(options.batch_size > 0, "predict", "batch_size must be positive, got {}",
               options.batch_size);
  return predict(data::Dataset::from_tensor_slices(x).batch(options.batch_size),
                 std::move(options));
}

// ---- several inputs or outputs ----

History Model::fit(const std::vector<Tensor>& xs, const std::vector<Tensor>& ys,
                   FitOptions options) {
  const auto held = held_state_of(*this, "fit");
  TF_CHECK_ARG(options.validation_split >= 0.0 && options.validation_split < 1.0, "fit",
               "validation_split must be in [0, 1), got {}", options.validation_split);
  MultiData d = multi_data(*this, "fit", xs, ys, options.sample_weight, options.sample_weights);
  if (!options.class_weight.empty()) {
    // As Keras: class weights need a single output.
    TF_CHECK_ARG(d.ys.size() == 1, "fit",
                 "`class_weight` is only supported for Models with a single output (model '{}' "
                 "has {})",
                 name(), d.ys.size());
    TF_CHECK_ARG(d.sws.empty(), "fit",
                 "You cannot `class_weight` and `sample_weight` at the same time");
  }
  if (options.validation_split > 0.0) {
    TF_CHECK_ARG(!options.validation_data.defined(), "fit",
                 "give validation_data or validation_split, not both");
    const int64_t n = d.samples;
    const auto split =
        static_cast<int64_t>(std::floor(static_cast<double>(n) * (1.0 - options.validation_split)));
    TF_CHECK_ARG(split > 0 && split < n, "fit",
                 "validation_split {} of {} samples leaves no training or no validation data",
                 options.validation_split, n);
    // The last rows of every input, target and sample weight validate (before shuffling).
    auto rows = [](std::vector<Tensor> v, int64_t begin, int64_t count) {
      for (Tensor& t : v) {
        std::vector<int64_t> b(static_cast<size_t>(t.rank()), 0), sz = t.shape().dims();
        b[0] = begin;
        sz[0] = count;
        t = slice(t, b, sz);
      }
      return v;
    };
    options.validation_data =
        ValidationData(rows(d.xs, split, n - split), rows(d.ys, split, n - split), {});
    if (!d.sws.empty()) {
      // One shared weight is repeated for the validation data's every output.
      std::vector<Tensor> vsw = rows(d.sws, split, n - split);
      if (vsw.size() == 1) vsw.assign(d.ys.size(), vsw[0]);
      options.validation_data.sample_weights = vsw;
    }
    d.xs = rows(d.xs, 0, split);
    d.ys = rows(d.ys, 0, split);
    d.sws = rows(d.sws, 0, split);
    d.samples = split;
    options.validation_split = 0.0;  // done: the dataset fit below must not see it
  }
  if (!options.class_weight.empty()) d.sws = {class_weights_of(d.ys[0], options.class_weight)};
  options.class_weight.clear();
  options.sample_weight = Tensor();
  options.sample_weights.clear();
  TF_CHECK_ARG(options.batch_size > 0, "fit", "batch_size must be positive, got {}",
               options.batch_size);
  data::Dataset ds = data::Dataset::from_tensor_slices(d.flat());
  if (options.shuffle) {
    if (const auto seeds = shuffle_seeds_over_workers(*this))
      ds = data::detail::shuffle_with_seeds(ds, d.samples, seeds->first, seeds->second);
    else
      ds = ds.shuffle(d.samples);
  }
  return fit(ds.batch(options.batch_size), std::move(options));
}

History Model::fit(const std::map<std::string, Tensor>& xs, const std::map<std::string, Tensor>& ys,
                   FitOptions options) {
  const auto [in, out] = io_names(*this);
  return fit(by_names(xs, in, "fit", "input"), by_names(ys, out, "fit", "output"),
             std::move(options));
}

std::vector<double> Model::evaluate(const std::vector<Tensor>& xs, const std::vector<Tensor>& ys,
                                    EvaluateOptions options) {
  TF_CHECK_ARG(options.batch_size > 0, "evaluate", "batch_size must be positive, got {}",
               options.batch_size);
  const MultiData d =
      multi_data(*this, "evaluate", xs, ys, options.sample_weight, options.sample_weights);
  options.sample_weight = Tensor();
  options.sample_weights.clear();
  return evaluate(data::Dataset::from_tensor_slices(d.flat()).batch(options.batch_size),
                  std::move(options));
}

std::vector<double> Model::evaluate(const std::map<std::string, Tensor>& xs,
                                    const std::map<std::string, Tensor>& ys,
                                    EvaluateOptions options) {
  const auto [in, out] = io_names(*this);
  return evaluate(by_names(xs, in, "evaluate", "input"), by_names(ys, out, "evaluate", "output"),
                  std::move(options));
}

std::vector<Tensor> Model::predict_outputs(const data::Dataset& dataset, PredictOptions options) {
  const std::weak_ptr<tapeflow::keras::detail::LayerImpl> weak = impl_;
  const auto [in, out] = io_names(*this);
  const size_t ni = in.size();
  auto pred = [weak](const std::vector<Tensor>& v) {
    return call_outputs(lock_model(weak), v, false);
  };
  auto& slot = model_impl_for_training();
  std::shared_ptr<TrainingState> st = slot ? slot : std::make_shared<TrainingState>();
  st->keep_batch.store(stateful(), std::memory_order_relaxed);
  callbacks::TrainingContext ctx;
  attach_ema(ctx, *st);
  const int64_t card = dataset.cardinality();
  check_steps("predict", options.steps, card);
  ctx.steps = options.steps > 0 ? options.steps : (card >= 0 ? card : -1);
  ctx.verbose = options.verbose;
  callbacks::CallbackList list = callback_list(options.verbose, options.callbacks, &ctx);
  list.on_predict_begin();
  std::vector<std::vector<Tensor>> outs(out.size());
  int64_t step = 0;
  for (const auto& batch : dataset) {
    if (options.steps > 0 && step >= options.steps) break;
    TF_CHECK_ARG(batch.size() >= ni, "predict",
                 "model '{}' has {} inputs {}: the batches must start with them, got {} "
                 "components ({})",
                 name(), ni, names_text(in), batch.size(), shapes_text(batch));
    const std::vector<Tensor> xs(batch.begin(), batch.begin() + static_cast<std::ptrdiff_t>(ni));
    const std::vector<Tensor> ys =
        run_step(st->predict_all, pred, xs, "predict_function", st->options, st->keep_batch);
    for (size_t i = 0; i < outs.size(); ++i) outs[i].push_back(ys[i]);
    list.on_predict_batch_end(step++);
  }
  list.on_predict_end();
  TF_CHECK_ARG(step > 0, "predict", "the input has no samples");
  std::vector<Tensor> result;
  for (auto& o : outs) result.push_back(o.size() == 1 ? o[0] : concat(o, 0));
  return result;
}

std::vector<Tensor> Model::predict(const std::vector<Tensor>& xs, PredictOptions options) {
  TF_CHECK_ARG(options.batch_size > 0, "predict", "batch_size must be positive, got {}",
               options.batch_size);
  const MultiData d = multi_data(*this, "predict", xs, {}, Tensor(), {}, false);
  return predict_outputs(data::Dataset::from_tensor_slices(d.xs).batch(options.batch_size),
                         std::move(options));
}

std::vector<Tensor> Model::predict(const std::map<std::string, Tensor>& xs,
                                   PredictOptions options) {
  return predict(by_names(xs, io_names(*this).first, "predict", "input"), std::move(options));
}

std::vector<Tensor> Model::predict(std::initializer_list<Tensor> xs, PredictOptions options) {
  return predict(std::vector<Tensor>(xs), std::move(options));
}

std::vector<double> Model::train_on_batch(const Tensor& x, const Tensor& y) {
  check_xy("train_on_batch", x, y);
  const auto held = held_state_of(*this, "train_on_batch");
  auto& st = *held;
  TF_CHECK_ARG(
      !st.multi, "train_on_batch",
      "model '{}' has several inputs or outputs; train_on_batch takes models of one input and "
      "one output (use fit with lists of tensors)",
      name());
  reset_metrics();
  run_train_step(st, train_fn(&st, impl_), {x, y});
  return values_of(training_logs(st));
}

std::vector<double> Model::test_on_batch(const Tensor& x, const Tensor& y) {
  check_xy("test_on_batch", x, y);
  const auto held = held_state_of(*this, "test_on_batch");
  auto& st = *held;
  TF_CHECK_ARG(
      !st.multi, "test_on_batch",
      "model '{}' has several inputs or outputs; test_on_batch takes models of one input and "
      "one output (use evaluate with lists of tensors)",
      name());
  reset_metrics();
  run_step(st.test, test_fn(&st, impl_), {x, y}, "test_function", st.options, st.keep_batch);
  return values_of(current_logs(st));
}

void Model::save_weights(const std::string& path) const {
  TF_CHECK_T(FailedPreconditionError, built(), "save_weights",
             "model '{}' has no weights yet: build it or call it on data first", name());
  // A weights file named as a whole model would not load with load_model (Keras 3 refuses the
  // name as well).
  TF_CHECK_ARG(!is_whole_model_path(path), "save_weights",
               "'{}' names a whole-model file (.keras or .tfmodel): save the whole model with "
               "model.save(path), or the weights under another name (e.g. .safetensors)",
               path);
  safetensors::save_variables(path, tracked_variables(), {{"format", "tapeflow.keras.weights"}});
}

void Model::load_weights(const std::string& path) const {
  TF_CHECK_T(FailedPreconditionError, built(), "load_weights",
             "model '{}' has no weights yet: build it or call it on data first, then load", name());
  const auto unused = safetensors::load_variables(path, tracked_variables());
  if (!unused.empty())
    TF_LOG_WARN("load_weights: {} has {} tensors that model '{}' does not use (first: {})", path,
                unused.size(), name(), unused.front());
}

}  // namespace tapeflow::keras
