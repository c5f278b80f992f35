#include "keras/metrics.h"

#include <algorithm>
#include <cctype>
#include <mutex>
#include <nlohmann/json.hpp>
#include <numeric>

#include "core/check.h"
#include "distribute/strategy.h"
#include "keras/layers.h"
#include "keras/metrics_impl.h"
#include "ops/binary.h"
#include "ops/dispatch.h"
#include "ops/dynamic_shape.h"
#include "ops/factory.h"
#include "ops/movement.h"
#include "ops/reduce.h"
#include "ops/unary.h"

namespace tapeflow::keras::metrics {

namespace {

using detail::MetricImpl;

std::vector<int> axes_from(int first, int rank) {
  std::vector<int> axes(static_cast<size_t>(std::max(rank - first, 0)));
  std::iota(axes.begin(), axes.end(), first);
  return axes;
}

// The copy an update writes: the replica's copy inside a replica, else the first copy (so a
// cross-replica update is not counted once per copy when result() sums them).
Variable local(const Variable& v) {
  if (v.is_mirrored() && tapeflow::detail::replica_component() < 0) return v.components()[0];
  return v;
}

thread_local const distribute::Strategy* t_over_workers = nullptr;

}  // namespace

// metrics_impl.h.
Tensor detail::aggregated(const Variable& v) {
  if (!v.is_mirrored() || tapeflow::detail::replica_component() >= 0) return v.value();
  Tensor sum;
  for (const Variable& c : v.components()) {
    Tensor x = c.value();
    sum = sum.defined() ? add(sum, x) : x;
  }
  if (t_over_workers != nullptr) sum = distribute::detail::sum_over_workers(*t_over_workers, sum);
  return sum;
}

namespace {

// Keras 3's Reduce.update_state (reduce_to_samplewise_values, then the totals).
void update_reduce(MetricImpl& m, const Tensor& values_in, const Tensor& sample_weight) {
  const char* op = m.name.c_str();
  TF_CHECK_ARG(values_in.defined(), op, "update_state got an undefined tensor");
  const bool is_sum = m.kind == MetricImpl::Kind::Sum;
  auto reduce = [&](const Tensor& x, const std::vector<int>& axes) {
    return is_sum ? reduce_sum(x, axes) : reduce_mean(x, axes);
  };
  Tensor values = cast(values_in, float32);
  Tensor weight;
  if (sample_weight.defined()) {
    auto [v, w] = losses::detail::squeeze_or_expand_to_same_rank(values,
                                                                   cast(sample_weight, float32));
    // The values are first reduced to the weights' rank (per-sample weights of shape (batch,)
    // on values of shape (batch, ...)), then the weights broadcast against them.
    TF_CHECK_ARG(w.rank() <= v.rank(), op,
                 "sample_weight of shape {} does not match the values of shape {}",
                 sample_weight.shape().to_string(), values_in.shape().to_string());
    if (v.rank() > w.rank()) v = reduce(v, axes_from(w.rank(), v.rank()));
    TensorShape vs = v.shape();
    for (int i = 0; i < w.rank(); ++i)
      TF_CHECK_ARG(w.shape()[i] == vs[i] || w.shape()[i] == 1, op,
                   "sample_weight of shape {} does not broadcast to the values of shape {}",
                   sample_weight.shape().to_string(), values_in.shape().to_string());
    w = tapeflow::detail::broadcast_like(w, v);  // sizes read at run time in traces
    v = multiply(v, w);
    if (w.rank() > 1) w = reduce_mean(w, axes_from(1, w.rank()));
    values = v;
    weight = w;
  }
  if (values.rank() > 1) values = reduce(values, axes_from(1, values.rank()));
  Tensor n;
  if (!is_sum) {
    if (weight.defined())
      n = reduce_sum(weight);
    else if (values.rank() >= 1)
      n = tapeflow::detail::element_count(values, {0}, float32);  // read at run time in traces
    else
      n = constant(Tensor(1.0), float32);
  }
  std::lock_guard lock(m.mu);
  local(m.total).assign_add(reduce_sum(values));
  if (!is_sum) local(m.count).assign_add(n);
}

// A copy of a Custom metric's state (a lazily built one grows under `mu` at its first update).
std::vector<std::pair<std::string, Variable>> state_of(MetricImpl& m) {
  std::lock_guard lock(m.mu);
  return m.state;
}

// Appends the lazily built variables of `shape` to the state; the caller holds m.mu.
void append_lazy_state(MetricImpl& m, const TensorShape& shape) {
  // Eager and cross-replica whatever the caller is in (a trace, a tape, a replica), mirrored as
  // where the metric was made, as a layer's build.
  keras::detail::BuildScope scope(m.mirror);
  for (const std::string& n : m.lazy->names)
    m.state.emplace_back(n, Variable(zeros(shape, float32), m.name + "/" + n, false));
  m.lazy->built.store(true);
}

// At every update of a lazily built metric: the inputs checked against the state, which the
// first update builds for their last dimension.
void build_lazy(MetricImpl& m, const Tensor& y_true, const Tensor& y_pred) {
  detail::LazyState& z = *m.lazy;
  const int64_t d = z.check(y_true, y_pred, z.dim.load());
  if (!z.built.load()) {
    std::lock_guard lock(m.mu);
    if (!z.built.load()) append_lazy_state(m, z.shape_of(d));
  }
  int64_t known = -1;
  // Another replica thread may have fixed another d meanwhile: checking again raises.
  if (!z.dim.compare_exchange_strong(known, d) && known != d) z.check(y_true, y_pred, known);
}

MetricImpl& checked(const std::shared_ptr<MetricImpl>& p) {
  TF_CHECK_T(FailedPreconditionError, p != nullptr, "Metric",
             "the metric handle is empty (default-constructed)");
  return *p;
}

std::shared_ptr<MetricImpl> wrapper(std::function<Tensor(const Tensor&, const Tensor&)> fn,
                                    std::string name, std::string direction = "") {
  auto impl = std::make_shared<MetricImpl>(MetricImpl::Kind::Wrapper, std::move(name));
  impl->fn = std::move(fn);
  impl->direction = std::move(direction);
  return impl;
}

int last_axis(const Tensor& t) { return t.rank() - 1; }

// Keras' rule in compile(): binary when y_pred has one column, sparse when the labels have
// lower rank (or a trailing 1 against several classes), else categorical.
Tensor auto_accuracy(const Tensor& y_true, const Tensor& y_pred) {
  const int64_t p_last = y_pred.rank() > 0 ? y_pred.shape()[y_pred.rank() - 1] : 1;
  const int64_t t_last = y_true.rank() > 0 ? y_true.shape()[y_true.rank() - 1] : 1;
  if (p_last == 1) return binary_accuracy(y_true, y_pred);
  if (y_true.rank() < y_pred.rank() || (t_last == 1 && p_last > 1))
    return sparse_categorical_accuracy(y_true, y_pred);
  return categorical_accuracy(y_true, y_pred);
}

}  // namespace

// ---- per-sample functions ----

Tensor sparse_categorical_accuracy(const Tensor& y_true, const Tensor& y_pred) {
  const char* op = "sparse_categorical_accuracy";
  TF_CHECK_ARG(y_true.defined() && y_pred.defined() && y_pred.rank() >= 1, op,
               "y_pred must have a class axis, got shape {}",
               y_pred.defined() ? y_pred.shape().to_string() : "None");
  Tensor t = y_true;
  bool reshape_matches = false;
  if (t.rank() == y_pred.rank() && t.shape()[t.rank() - 1] == 1) {
    t = squeeze(t, {t.rank() - 1});
    reshape_matches = true;
  }
  TensorShape lead = y_pred.shape();
  lead.pop_back();
  TF_CHECK_ARG(t.shape() == lead, op,
               "y_true of shape {} does not match y_pred of shape {}: expected labels of shape {}",
               y_true.shape().to_string(), y_pred.shape().to_string(), lead.to_string());
  Tensor pred = argmax(y_pred, last_axis(y_pred));
  if (pred.dtype() != t.dtype()) pred = cast(pred, t.dtype());
  Tensor matches = cast(equal(t, pred), float32);
  if (reshape_matches) matches = tapeflow::detail::reshape_like(matches, y_true);
  return matches;
}

Tensor categorical_accuracy(const Tensor& y_true, const Tensor& y_pred) {
  const char* op = "categorical_accuracy";
  TF_CHECK_ARG(y_true.defined() && y_pred.defined() && y_true.shape() == y_pred.shape() &&
                   y_pred.rank() >= 1,
               op, "y_true and y_pred must have the same shape with a class axis, got {} and {}",
               y_true.defined() ? y_true.shape().to_string() : "None",
               y_pred.defined() ? y_pred.shape().to_string() : "None");
  return cast(equal(argmax(y_true, last_axis(y_true)), argmax(y_pred, last_axis(y_pred))),
              float32);
}

Tensor accuracy(const Tensor& y_true, const Tensor& y_pred) {
  TF_CHECK_ARG(y_true.defined() && y_pred.defined(), "accuracy", "inputs must be defined");
  auto [t, p] = losses::detail::squeeze_or_expand_to_same_rank(cast(y_true, y_pred.dtype()), y_pred);
  TF_CHECK_ARG(losses::detail::broadcastable(t.shape(), p.shape()), "accuracy",
               "y_true of shape {} does not match y_pred of shape {}", y_true.shape().to_string(),
               y_pred.shape().to_string());
  return cast(equal(t, p), float32);
}

Tensor binary_accuracy(const Tensor& y_true, const Tensor& y_pred, double threshold) {
  TF_CHECK_ARG(y_true.defined() && y_pred.defined(), "binary_accuracy", "inputs must be defined");
  auto [t, p] = losses::detail::squeeze_or_expand_to_same_rank(cast(y_true, y_pred.dtype()), y_pred);
  TF_CHECK_ARG(losses::detail::broadcastable(t.shape(), p.shape()), "binary_accuracy",
               "y_true of shape {} does not match y_pred of shape {}", y_true.shape().to_string(),
               y_pred.shape().to_string());
  Tensor pred = cast(greater(p, Tensor(threshold)), p.dtype());
  return cast(equal(t, pred), float32);
}

// ---- Metric ----

// Metric::update_state's body.
static void update_metric(MetricImpl& m, const Tensor& y_true, const Tensor& y_pred,
                          const Tensor& sample_weight) {
  if (m.kind == MetricImpl::Kind::Custom) {
    TF_CHECK_ARG(y_true.defined() && y_pred.defined(), m.name.c_str(),
                 "update_state needs y_true and y_pred");
    if (m.lazy) build_lazy(m, y_true, y_pred);
    const std::vector<Tensor> inc = m.increments(y_true, y_pred, sample_weight);
    std::lock_guard lock(m.mu);
    for (size_t i = 0; i < inc.size(); ++i) local(m.state[i].second).assign_add(inc[i]);
    return;
  }
  if (m.kind != MetricImpl::Kind::Wrapper) {
    // Mean and Sum through the base handle: (values, sample_weight).
    TF_CHECK_ARG(!sample_weight.defined(), m.name.c_str(),
                 "{} takes update_state(values, sample_weight), got three arguments", m.name);
    update_reduce(m, y_true, y_pred);
    return;
  }
  TF_CHECK_ARG(y_true.defined() && y_pred.defined(), m.name.c_str(),
               "update_state needs y_true and y_pred");
  update_reduce(m, m.fn(y_true, y_pred), sample_weight);
}

// An error of the metric's ops names the metric first ("[accuracy] [argmax] ...").
void Metric::update_state(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight) {
  auto& m = checked(impl_);
  ::tapeflow::detail::naming_errors(m.name,
                                    [&] { update_metric(m, y_true, y_pred, sample_weight); });
}

detail::ResultsOverWorkersScope::ResultsOverWorkersScope(const distribute::Strategy* strategy)
    : saved_(std::exchange(t_over_workers, strategy)) {}
detail::ResultsOverWorkersScope::~ResultsOverWorkersScope() { t_over_workers = saved_; }

Tensor Metric::result() const {
  auto& m = checked(impl_);
  if (m.kind == MetricImpl::Kind::Custom) {
    std::vector<Tensor> values;
    for (const auto& [n, v] : state_of(m)) values.push_back(detail::aggregated(v));
    return m.compute(values);
  }
  Tensor total = detail::aggregated(m.total);
  if (m.kind == MetricImpl::Kind::Sum) return total;
  Tensor count = detail::aggregated(m.count);
  // divide_no_nan: 0 before the first update.
  Tensor mean = where(equal(count, Tensor(0.0f)), zeros_like(total), divide(total, count));
  return m.transform ? m.transform(mean) : mean;
}

void Metric::reset_state() {
  auto& m = checked(impl_);
  for (auto& [n, v] : state_of(m)) v.assign(zeros(v.shape(), float32));
  if (m.kind == MetricImpl::Kind::Custom) return;
  m.total.assign(zeros({}, float32));
  if (m.count.defined()) m.count.assign(zeros({}, float32));
}

const std::string& Metric::name() const { return checked(impl_).name; }
const std::string& Metric::direction() const {
  return checked(impl_).direction;
}

std::vector<std::pair<std::string, Variable>> Metric::tracked_variables() const {
  auto& m = checked(impl_);
  if (m.kind == MetricImpl::Kind::Custom) return state_of(m);
  std::vector<std::pair<std::string, Variable>> out{{"total", m.total}};
  if (m.count.defined()) out.emplace_back("count", m.count);
  return out;
}

void Metric::build_from_saved(
    const std::function<const TensorShape*(const std::string& tracked_name)>& saved_shape,
    const std::string& where) const {
  auto& m = checked(impl_);
  if (!m.lazy || m.lazy->built.load()) return;
  detail::LazyState& z = *m.lazy;
  const TensorShape* first = nullptr;
  for (const std::string& n : z.names)
    if ((first = saved_shape(n)) != nullptr) break;
  if (first == nullptr) return;  // nothing saved for the state: it stays unbuilt
  // The last dimension the saved state was built for; a scalar state does not tell it.
  const int64_t d = first->rank() > 0 ? (*first)[first->rank() - 1] : -1;
  const TensorShape want = z.shape_of(d >= 0 ? d : 1);
  for (const std::string& n : z.names) {
    const TensorShape* s = saved_shape(n);
    TF_CHECK_ARG(s == nullptr || *s == want, m.name.c_str(),
                 "'{}': the saved '{}' of metric '{}' has shape {}; the metric builds it with "
                 "shape {} (for a last dimension of {})",
                 where, n, m.name, s ? s->to_string() : "", want.to_string(), d);
  }
  std::lock_guard lock(m.mu);
  if (z.built.load()) return;  // built meanwhile by an update
  append_lazy_state(m, want);
  if (d >= 0) z.dim.store(d);
}

std::vector<Variable> Metric::variables() const {
  std::vector<Variable> out;
  for (auto& [n, v] : tracked_variables()) out.push_back(v);
  return out;
}

Mean::Mean(std::string name)
    : Metric(std::make_shared<MetricImpl>(MetricImpl::Kind::Mean, std::move(name))) {}
void Mean::update_state(const Tensor& values, const Tensor& sample_weight) {
  update_reduce(checked(impl_), values, sample_weight);
}

Sum::Sum(std::string name)
    : Metric(std::make_shared<MetricImpl>(MetricImpl::Kind::Sum, std::move(name))) {}
void Sum::update_state(const Tensor& values, const Tensor& sample_weight) {
  update_reduce(checked(impl_), values, sample_weight);
}

MeanMetricWrapper::MeanMetricWrapper(std::function<Tensor(const Tensor&, const Tensor&)> fn,
                                     std::string name)
    : Metric(wrapper(std::move(fn), std::move(name))) {
  TF_CHECK_ARG(static_cast<bool>(impl_->fn), "MeanMetricWrapper",
               "the metric function of '{}' is empty", impl_->name);
}

SparseCategoricalAccuracy::SparseCategoricalAccuracy(std::string name)
    : Metric(wrapper(sparse_categorical_accuracy, std::move(name), "up")) {
  impl_->keras_class = "SparseCategoricalAccuracy";
}
CategoricalAccuracy::CategoricalAccuracy(std::string name)
    : Metric(wrapper(categorical_accuracy, std::move(name), "up")) {
  impl_->keras_class = "CategoricalAccuracy";
}
Accuracy::Accuracy(std::string name) : Metric(wrapper(accuracy, std::move(name), "up")) {
  impl_->keras_class = "Accuracy";
}
BinaryAccuracy::BinaryAccuracy(std::string name, double threshold)
    : Metric(wrapper([threshold](const Tensor& t,
                                 const Tensor& p) { return binary_accuracy(t, p, threshold); },
                     std::move(name), "up")) {
  impl_->keras_class = "BinaryAccuracy";
  impl_->write_config = [threshold](nlohmann::ordered_json& c) { c["threshold"] = threshold; };
}
SparseCategoricalCrossentropy::SparseCategoricalCrossentropy(std::string name, bool from_logits)
    : Metric(wrapper(
          [from_logits](const Tensor& t, const Tensor& p) {
            return losses::sparse_categorical_crossentropy(t, p, from_logits);
          },
          std::move(name), "down")) {
  impl_->keras_class = "SparseCategoricalCrossentropy";
  impl_->write_config = [from_logits](nlohmann::ordered_json& c) {
    c["from_logits"] = from_logits;
    c["ignore_class"] = nullptr;
    c["axis"] = -1;
  };
}
MeanSquaredError::MeanSquaredError(std::string name)
    : Metric(wrapper(losses::mean_squared_error, std::move(name), "down")) {
  impl_->keras_class = "MeanSquaredError";
}

namespace {
// "accuracy" chosen from the shapes at the first update: every accuracy goes up.
struct AutoAccuracy : Metric {
  explicit AutoAccuracy(std::string name) : Metric(wrapper(auto_accuracy, std::move(name), "up")) {}
};
}  // namespace

Metric get(const std::string& identifier, const losses::Loss& loss) {
  std::string id = identifier;
  for (char& c : id) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (id == "accuracy" || id == "acc") {
    const std::string kind = loss.defined() ? loss.impl()->kind : "";
    if (kind == "sparse_categorical_crossentropy") return SparseCategoricalAccuracy(identifier);
    if (kind == "categorical_crossentropy") return CategoricalAccuracy(identifier);
    if (kind == "binary_crossentropy") return BinaryAccuracy(identifier);
    return AutoAccuracy(identifier);
  }
  if (id == "sparse_categorical_accuracy") return SparseCategoricalAccuracy();
  if (id == "categorical_accuracy") return CategoricalAccuracy();
  if (id == "binary_accuracy") return BinaryAccuracy();
  if (id == "mse" || id == "mean_squared_error") return MeanSquaredError(identifier);
  // As Keras: the metric string gives the default metric (from_logits = false), whatever the loss.
  if (id == "sparse_categorical_crossentropy") return SparseCategoricalCrossentropy(identifier);
  if (Metric more = detail::get_more(id, identifier); more.defined()) return more;
  if (Metric extra = detail::get_extra(id, identifier); extra.defined()) return extra;
  if (Metric fscore = detail::get_fscore(id, identifier); fscore.defined()) return fscore;
  TF_THROW(InvalidArgumentError, "metrics.get",
           "unknown metric '{}' (known: accuracy, acc, sparse_categorical_accuracy, "
           "categorical_accuracy, binary_accuracy, mse, mean_squared_error, "
           "sparse_categorical_crossentropy, {}, {}, {})",
           identifier, detail::kMoreMetricNames, detail::kExtraMetricNames,
           detail::kFScoreMetricNames);
}

}  // namespace tapeflow::keras::metrics
