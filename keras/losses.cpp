#include "keras/losses.h"

#include <algorithm>
#include <cctype>

#include "core/check.h"
#include "distribute/replica_context.h"
#include "keras/compile_access.h"
#include "ops/binary.h"
#include "ops/dispatch.h"
#include "ops/dynamic_shape.h"
#include "ops/factory.h"
#include "ops/movement.h"
#include "ops/nn.h"
#include "ops/reduce.h"
#include "ops/unary.h"

namespace tapeflow::keras::losses {

namespace detail {

std::pair<Tensor, Tensor> squeeze_or_expand_to_same_rank(Tensor a, Tensor b) {
  const int ra = a.rank(), rb = b.rank();
  if (ra == rb + 1 && a.shape()[ra - 1] == 1) {
    if (rb == 1)
      b = expand_dims(b, -1);
    else
      a = squeeze(a, {-1});
  } else if (rb == ra + 1 && b.shape()[rb - 1] == 1) {
    if (ra == 1)
      a = expand_dims(a, -1);
    else
      b = squeeze(b, {-1});
  }
  return {a, b};
}

bool broadcastable(const TensorShape& a, const TensorShape& b) {
  const int n = std::max(a.rank(), b.rank());
  for (int i = 1; i <= n; ++i) {
    const int64_t da = i <= a.rank() ? a[a.rank() - i] : 1;
    const int64_t db = i <= b.rank() ? b[b.rank() - i] : 1;
    if (da != db && da != 1 && db != 1) return false;
  }
  return true;
}

}  // namespace detail

namespace {

void check_inputs(const char* op, const Tensor& y_true, const Tensor& y_pred) {
  TF_CHECK_ARG(y_true.defined() && y_pred.defined(), op, "y_true and y_pred must be defined");
  TF_CHECK_ARG(is_floating(y_pred.dtype()), op, "y_pred must be floating point, got {} of shape {}",
               dtype_name(y_pred.dtype()), y_pred.shape().to_string());
}

}  // namespace

std::pair<Tensor, Tensor> detail::same_shape(const char* op, const Tensor& y_true,
                                             const Tensor& y_pred) {
  check_inputs(op, y_true, y_pred);
  auto [t, p] = detail::squeeze_or_expand_to_same_rank(cast(y_true, y_pred.dtype()), y_pred);
  TF_CHECK_ARG(t.shape() == p.shape(), op,
               "y_true and y_pred must have the same shape, got y_true {} and y_pred {}",
               y_true.shape().to_string(), y_pred.shape().to_string());
  return {t, p};
}

namespace {

using detail::same_shape;

Tensor clip_probabilities(const Tensor& p) {
  return clip_by_value(p, Tensor(detail::kEpsilon), Tensor(1.0 - detail::kEpsilon));
}

struct FunctionLoss final : detail::LossImpl {
  std::function<Tensor(const Tensor&, const Tensor&)> fn;
  Tensor call(const Tensor& t, const Tensor& p) const override { return fn(t, p); }
};

struct SparseCCE final : detail::LossImpl {
  bool from_logits = false;
  Tensor call(const Tensor& t, const Tensor& p) const override {
    return sparse_categorical_crossentropy(t, p, from_logits);
  }
};

struct CCE final : detail::LossImpl {
  bool from_logits = false;
  double label_smoothing = 0.0;
  Tensor call(const Tensor& t, const Tensor& p) const override {
    return categorical_crossentropy(t, p, from_logits, label_smoothing);
  }
};

struct MSE final : detail::LossImpl {
  Tensor call(const Tensor& t, const Tensor& p) const override { return mean_squared_error(t, p); }
};

struct BCE final : detail::LossImpl {
  bool from_logits = false;
  double label_smoothing = 0.0;
  Tensor call(const Tensor& t, const Tensor& p) const override {
    return binary_crossentropy(t, p, from_logits, label_smoothing);
  }
};

template <class Impl>
std::shared_ptr<Impl> make_impl(std::string name, std::string kind, Reduction reduction) {
  auto impl = std::make_shared<Impl>();
  impl->name = std::move(name);
  impl->kind = std::move(kind);
  impl->reduction = reduction;
  return impl;
}

void check_smoothing(const char* op, double s) {
  TF_CHECK_ARG(s >= 0.0 && s <= 1.0, op, "label_smoothing must be in [0, 1], got {}", s);
}

}  // namespace

// ---- per-sample functions ----

Tensor sparse_categorical_crossentropy(const Tensor& y_true, const Tensor& y_pred,
                                       bool from_logits) {
  const char* op = "sparse_categorical_crossentropy";
  check_inputs(op, y_true, y_pred);
  TF_CHECK_ARG(y_pred.rank() >= 1, op, "y_pred must have a class axis, got shape {}",
               y_pred.shape().to_string());
  Tensor labels = y_true;
  if (labels.rank() == y_pred.rank() && labels.rank() > 0 && labels.shape()[labels.rank() - 1] == 1)
    labels = squeeze(labels, {-1});
  TensorShape lead = y_pred.shape();
  lead.pop_back();
  TF_CHECK_ARG(labels.shape() == lead, op,
               "y_true of shape {} does not match y_pred of shape {}: expected labels of shape {} "
               "(or with a trailing 1)",
               y_true.shape().to_string(), y_pred.shape().to_string(),
               lead.to_string());
  if (is_floating(labels.dtype())) {
    // A NaN label is out of range, as TF's cast gives it INT64_MIN there (tf::cast would make
    // it 0, a valid class): the cross-entropy op then names it.
    labels = cast(where(not_equal(labels, labels), constant(Tensor(-1.0), labels.dtype()), labels),
                  int64);
  } else if (labels.dtype() != int32 && labels.dtype() != int64) {
    labels = cast(labels, int64);
  }
  Tensor logits = from_logits ? y_pred : log(clip_probabilities(y_pred));
  return nn::sparse_softmax_cross_entropy_with_logits(labels, logits);
}

Tensor categorical_crossentropy(const Tensor& y_true, const Tensor& y_pred, bool from_logits,
                                double label_smoothing) {
  const char* op = "categorical_crossentropy";
  check_smoothing(op, label_smoothing);
  auto [t, p] = same_shape(op, y_true, y_pred);
  TF_CHECK_ARG(p.rank() >= 1, op, "y_pred must have a class axis, got shape {}",
               p.shape().to_string());
  if (label_smoothing > 0) {
    const double classes = static_cast<double>(p.shape()[p.rank() - 1]);
    t = add(multiply(t, Tensor(1.0 - label_smoothing)), Tensor(label_smoothing / classes));
  }
  if (from_logits) return negative(reduce_sum(multiply(t, nn::log_softmax(p, -1)), -1));
  // Probabilities: normalised to sum to 1 along the class axis, then clipped (TF backend).
  Tensor q = clip_probabilities(divide(p, reduce_sum(p, -1, true)));
  return negative(reduce_sum(multiply(t, log(q)), -1));
}

Tensor mean_squared_error(const Tensor& y_true, const Tensor& y_pred) {
  auto [t, p] = same_shape("mean_squared_error", y_true, y_pred);
  if (p.rank() == 0) return square(subtract(t, p));
  return reduce_mean(square(subtract(t, p)), -1);
}

Tensor binary_crossentropy(const Tensor& y_true, const Tensor& y_pred, bool from_logits,
                           double label_smoothing) {
  const char* op = "binary_crossentropy";
  check_smoothing(op, label_smoothing);
  auto [t, p] = same_shape(op, y_true, y_pred);
  if (label_smoothing > 0)
    t = add(multiply(t, Tensor(1.0 - label_smoothing)), Tensor(0.5 * label_smoothing));
  Tensor per_element;
  if (from_logits) {
    per_element = nn::sigmoid_cross_entropy_with_logits(t, p);
  } else {
    Tensor q = clip_probabilities(p);
    Tensor bce = add(multiply(t, log(q)), multiply(subtract(Tensor(1.0), t),
                                                   log(subtract(Tensor(1.0), q))));
    per_element = negative(bce);
  }
  if (per_element.rank() == 0) return per_element;
  return reduce_mean(per_element, -1);
}

// ---- Loss ----

Loss::Loss(std::function<Tensor(const Tensor&, const Tensor&)> fn, std::string name,
           Reduction reduction) {
  TF_CHECK_ARG(static_cast<bool>(fn), "Loss", "the loss function of '{}' is empty", name);
  auto impl = make_impl<FunctionLoss>(std::move(name), "custom", reduction);
  impl->fn = std::move(fn);
  impl_ = std::move(impl);
}

// Keras' apply_mask: the mask as a weight, 0 where masked; for SUM_OVER_BATCH_SIZE total / valid
// elsewhere (total: the mask's number of entries), so the mean over every value is the mean over
// the unmasked ones (0 when none is).
static Tensor mask_weight(const Tensor& mask, DType dtype, Reduction r) {
  const Tensor m = cast(mask, dtype);
  if (r == Reduction::SUM || r == Reduction::NONE || m.rank() == 0) return m;
  std::vector<int> all(static_cast<size_t>(m.rank()));
  for (int i = 0; i < m.rank(); ++i) all[static_cast<size_t>(i)] = i;
  // Counted when the step runs, so one trace serves every batch size.
  const Tensor total = tapeflow::detail::element_count(m, all, dtype);
  const Tensor valid = reduce_sum(m);
  const Tensor zero = zeros_like(valid);
  const Tensor scale = where(greater(valid, zero), divide(total, maximum(valid, 1.0)), zero);
  return multiply(m, scale);
}

static const detail::LossImpl& checked(const std::shared_ptr<const detail::LossImpl>& p) {
  TF_CHECK_T(FailedPreconditionError, p != nullptr, "Loss",
             "the loss handle is empty (default-constructed)");
  return *p;
}

Tensor Loss::call(const Tensor& y_true, const Tensor& y_pred) const {
  const auto& impl = checked(impl_);
  return ::tapeflow::detail::naming_errors(impl.name, [&] { return impl.call(y_true, y_pred); });
}
const std::string& Loss::name() const { return checked(impl_).name; }
Reduction Loss::reduction() const { return checked(impl_).reduction; }

// Loss::operator()'s body.
static Tensor weighted_loss(const detail::LossImpl& impl, const Tensor& y_true,
                            const Tensor& y_pred, const Tensor& sample_weight, const Tensor& mask) {
  const char* op = impl.name.c_str();
  // Keras' losses convert y_pred to their dtype (floatx): a mixed-precision model's float16 or
  // bfloat16 predictions give a float32 loss. (Other dtypes keep theirs, as before.)
  const bool half = y_pred.defined() && (y_pred.dtype() == float16 || y_pred.dtype() == bfloat16);
  Tensor values = impl.call(y_true, half ? cast(y_pred, float32) : y_pred);
  TF_CHECK_ARG(values.defined(), op, "the loss function returned an undefined tensor");
  // Keras 3's Loss.__call__: y_pred's mask and the loss's own mask (from the unweighted losses:
  // a zero sample weight leaves the count alone) together, applied once as a weight.
  Tensor keep;
  if (mask.defined()) {
    TF_CHECK_ARG(detail::broadcastable(mask.shape(), values.shape()), op,
                 "the mask of y_pred has shape {}, the per-sample losses {} (y_true {}, y_pred {})",
                 mask.shape().to_string(), values.shape().to_string(), y_true.shape().to_string(),
                 y_pred.shape().to_string());
    keep = cast(mask, bool_);
  }
  if (impl.output_mask) {
    const Tensor own = impl.output_mask(values);
    if (keep.defined()) {
      auto [a, b] = detail::squeeze_or_expand_to_same_rank(keep, own);
      keep = logical_and(a, b);
    } else {
      keep = own;
    }
  }
  Tensor weight;
  if (sample_weight.defined()) {
    weight = cast(sample_weight, values.dtype());
    auto [v, w] = detail::squeeze_or_expand_to_same_rank(values, weight);
    TF_CHECK_ARG(detail::broadcastable(v.shape(), w.shape()), op,
                 "sample_weight of shape {} does not match the per-sample losses of shape {} "
                 "(y_true {}, y_pred {})",
                 sample_weight.shape().to_string(), values.shape().to_string(),
                 y_true.shape().to_string(), y_pred.shape().to_string());
  }
  if (keep.defined()) {
    const Tensor w = mask_weight(keep, values.dtype(), impl.reduction);
    if (weight.defined()) {
      auto [a, b] = detail::squeeze_or_expand_to_same_rank(w, weight);
      weight = multiply(a, b);
    } else {
      weight = w;
    }
  }
  if (weight.defined()) {
    auto [v, w] = detail::squeeze_or_expand_to_same_rank(values, weight);
    values = multiply(v, w);
  }
  const Reduction r = impl.reduction;
  // An empty batch reduces to the scalar 0 (as TF's reduce_sum and divide_no_nan).
  if (r == Reduction::NONE || values.rank() == 0) return values;
  Tensor loss = reduce_sum(values);
  if (r == Reduction::SUM) return loss;
  // SUM_OVER_BATCH_SIZE: divide_no_nan by the number of loss values.
  const double n = static_cast<double>(values.num_elements());
  if (tapeflow::detail::open_shapes() && values.rank() > 0) {
    // A graph for None dimensions reads the count when it runs.
    std::vector<int> all(static_cast<size_t>(values.rank()));
    for (int i = 0; i < values.rank(); ++i) all[static_cast<size_t>(i)] = i;
    // maximum(n, 1): an empty replica batch gives 0, not 0/0 (TF's divide_no_nan).
    loss = divide(loss, maximum(tapeflow::detail::element_count(values, all, loss.dtype()), 1.0));
  } else {
    // An empty batch keeps the sum (0, still connected to the model: a replica's empty share
    // of the last global batch gets zero gradients, not none).
    if (n > 0) loss = divide(loss, Tensor(n));
  }
  if (auto* ctx = distribute::get_replica_context(); ctx && ctx->num_replicas_in_sync() > 1)
    loss = multiply(loss, Tensor(1.0 / ctx->num_replicas_in_sync()));
  return loss;
}

// An error of the loss function's ops (or of the weighting) names the loss first:
// "[sparse_categorical_crossentropy] [sparse_softmax_cross_entropy_with_logits] ...".
Tensor Loss::operator()(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight,
                        const Tensor& mask) const {
  const auto& impl = checked(impl_);
  return ::tapeflow::detail::naming_errors(
      impl.name, [&] { return weighted_loss(impl, y_true, y_pred, sample_weight, mask); });
}

SparseCategoricalCrossentropy::SparseCategoricalCrossentropy(bool from_logits,
                                                             Reduction reduction,
                                                             std::string name) {
  auto impl = make_impl<SparseCCE>(std::move(name), "sparse_categorical_crossentropy", reduction);
  impl->from_logits = from_logits;
  impl_ = std::move(impl);
}

CategoricalCrossentropy::CategoricalCrossentropy(bool from_logits, double label_smoothing,
                                                 Reduction reduction, std::string name) {
  check_smoothing("CategoricalCrossentropy", label_smoothing);
  auto impl = make_impl<CCE>(std::move(name), "categorical_crossentropy", reduction);
  impl->from_logits = from_logits;
  impl->label_smoothing = label_smoothing;
  impl_ = std::move(impl);
}

MeanSquaredError::MeanSquaredError(Reduction reduction, std::string name) {
  impl_ = make_impl<MSE>(std::move(name), "mean_squared_error", reduction);
}

BinaryCrossentropy::BinaryCrossentropy(bool from_logits, double label_smoothing,
                                       Reduction reduction, std::string name) {
  check_smoothing("BinaryCrossentropy", label_smoothing);
  auto impl = make_impl<BCE>(std::move(name), "binary_crossentropy", reduction);
  impl->from_logits = from_logits;
  impl->label_smoothing = label_smoothing;
  impl_ = std::move(impl);
}

Loss get(const std::string& identifier) {
  std::string id = identifier;
  for (char& c : id) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (id == "sparse_categorical_crossentropy") return SparseCategoricalCrossentropy();
  if (id == "categorical_crossentropy") return CategoricalCrossentropy();
  if (id == "mse" || id == "mean_squared_error") return MeanSquaredError();
  if (id == "binary_crossentropy") return BinaryCrossentropy();
  if (Loss more = detail::get_more(id); more.defined()) return more;
  if (Loss extra = detail::get_extra(id); extra.defined()) return extra;
  TF_THROW(InvalidArgumentError, "losses.get",
           "unknown loss '{}' (known: sparse_categorical_crossentropy, categorical_crossentropy, "
           "mse, mean_squared_error, binary_crossentropy, {}, {})",
           identifier, detail::kMoreLossNames, detail::kExtraLossNames);
}

}  // namespace tapeflow::keras::losses

namespace tapeflow::keras::detail::compile_access {

std::optional<CrossentropyConfig> crossentropy_config(const losses::Loss& loss) {
  using namespace losses;  // NOLINT: the Impl classes of this file
  const losses::detail::LossImpl* impl = loss.impl();
  if (const auto* s = dynamic_cast<const SparseCCE*>(impl))
    return CrossentropyConfig{s->from_logits};
  if (const auto* c = dynamic_cast<const CCE*>(impl))
    return CrossentropyConfig{c->from_logits, c->label_smoothing};
  if (const auto* b = dynamic_cast<const BCE*>(impl))
    return CrossentropyConfig{b->from_logits, b->label_smoothing};
  return std::nullopt;
}

}  // namespace tapeflow::keras::detail::compile_access
