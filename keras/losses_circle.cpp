// Keras 3's circle loss (keras/losses.h, "Circle loss"): written with ops, so it is
// differentiable through the tape and traceable with a None batch. The masked log-sum-exps keep
// every gradient finite where a sample has no positive or no negative pair (Keras' -inf logits).
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "autograd/tape.h"
#include "core/check.h"
#include "keras/loss_config.h"
#include "keras/losses.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/linalg.h"
#include "ops/movement.h"
#include "ops/nn.h"
#include "ops/reduce.h"
#include "ops/scan.h"
#include "ops/unary.h"

namespace tapeflow::keras::losses {

namespace {

// Labels as a column of int32 (Keras casts them; floats truncate), after checking their shape:
// (n,) or (n, 1) for n embeddings.
Tensor label_column(const char* op, const char* what, const Tensor& labels, const Tensor& emb) {
  TF_CHECK_ARG(labels.dtype() == int32 || labels.dtype() == int64 || is_floating(labels.dtype()),
               op, "{} must be integer class ids, got {} of shape {}", what,
               dtype_name(labels.dtype()), labels.shape().to_string());
  const TensorShape& s = labels.shape();
  const int64_t n = emb.shape()[0];
  const bool column = s.rank() == 1 || (s.rank() == 2 && s[1] == 1);
  TF_CHECK_ARG(column && (s[0] == n || s[0] == None || n == None), op,
               "{} must have shape ({},) (one label per embedding), got {} for embeddings {}", what,
               n, s.to_string(), emb.shape().to_string());
  const Tensor l = cast(labels, int32);
  return s.rank() == 1 ? expand_dims(l, 1) : l;
}

// log(sum(exp(x))) along axis 1 over the entries where `mask` holds (Keras: the others -inf),
// and whether a row has any. A row without entries gives 0 (its loss is set apart), and no
// masked entry reaches an exp, so no gradient is NaN.
std::pair<Tensor, Tensor> masked_logsumexp(const Tensor& x, const Tensor& mask) {
  const Tensor ninf = constant(Tensor(-std::numeric_limits<double>::infinity()), x.dtype());
  const Tensor zero = zeros_like(ninf);
  const Tensor any = reduce_any(mask, 1);
  const Tensor top = reduce_max(where(mask, x, ninf), 1, true);
  const Tensor shift = stop_gradient(where(expand_dims(any, 1), top, zero));
  const Tensor sum = reduce_sum(exp(where(mask, subtract(x, shift), ninf)), 1);
  const Tensor one = ones_like(sum);
  return {add(log(where(any, sum, one)), squeeze(shift, {1})), any};
}

}  // namespace

Tensor circle(const Tensor& y_true, const Tensor& y_pred, const Tensor& ref_labels,
              const Tensor& ref_embeddings, bool remove_diagonal, double gamma, double margin) {
  const char* op = "circle";
  TF_CHECK_ARG(std::isfinite(gamma) && std::isfinite(margin), op,
               "gamma and margin must be finite, got gamma {} and margin {}", gamma, margin);
  TF_CHECK_ARG(y_true.defined() && y_pred.defined(), op, "y_true and y_pred must be defined");
  TF_CHECK_ARG(ref_labels.defined() == ref_embeddings.defined(), op,
               "give both ref_labels and ref_embeddings, or neither");
  TF_CHECK_ARG(is_floating(y_pred.dtype()) && y_pred.rank() == 2, op,
               "y_pred must be floating embeddings of shape (batch, dim), got {} of shape {}",
               dtype_name(y_pred.dtype()), y_pred.shape().to_string());
  const Tensor keys = ref_embeddings.defined() ? ref_embeddings : y_pred;
  TF_CHECK_ARG(
      keys.dtype() == y_pred.dtype() && keys.rank() == 2 && keys.shape()[1] == y_pred.shape()[1],
      op, "ref_embeddings must be {} of shape (n, {}), got {} of shape {}",
      dtype_name(y_pred.dtype()), y_pred.shape()[1], dtype_name(keys.dtype()),
      keys.shape().to_string());
  const Tensor query = label_column(op, "y_true", y_true, y_pred);
  const Tensor key =
      ref_labels.defined() ? label_column(op, "ref_labels", ref_labels, keys) : query;
  const DType dt = y_pred.dtype();
  auto c = [dt](double v) { return constant(Tensor(v), dt); };

  const Tensor zero = c(0.0);
  const Tensor dist = maximum(subtract(c(1.0), matmul(y_pred, keys, false, true)), zero);
  Tensor positive = equal(query, transpose(key));  // (batch, n)
  const Tensor negative = logical_not(positive);
  if (remove_diagonal) {
    // Pair (i, j) with i == j, from running indices (sizes read at run time: a None batch).
    const Tensor row = cumsum(ones_like(query), 0, true);
    const Tensor col = ref_labels.defined() ? cumsum(ones_like(key), 0, true) : row;
    positive = logical_and(positive, not_equal(row, transpose(col)));
  }
  const Tensor pos_weights = maximum(multiply(add(c(margin), dist), cast(positive, dt)), zero);
  const Tensor neg_weights =
      maximum(multiply(subtract(c(1.0 + margin), dist), cast(negative, dt)), zero);
  const Tensor pos_logits = multiply(multiply(c(-gamma), pos_weights), subtract(c(margin), dist));
  const Tensor neg_logits =
      multiply(multiply(c(gamma), neg_weights), subtract(c(1.0 - margin), dist));
  const auto [p_loss, has_pos] = masked_logsumexp(pos_logits, positive);
  const auto [n_loss, has_neg] = masked_logsumexp(neg_logits, negative);
  // Keras: softplus(-inf) = 0 for a sample without a positive or a negative.
  return where(logical_and(has_pos, has_neg), nn::softplus(add(p_loss, n_loss)),
               zeros_like(p_loss));
}

namespace {
struct CircleLoss final : detail::ConfiguredLoss {
  double gamma = 80.0, margin = 0.4;
  bool remove_diagonal = true;
  Tensor call(const Tensor& t, const Tensor& p) const override {
    return circle(t, p, Tensor(), Tensor(), remove_diagonal, gamma, margin);
  }
};
}  // namespace

Circle::Circle(double gamma, double margin, bool remove_diagonal, Reduction reduction,
               std::string name) {
  TF_CHECK_ARG(std::isfinite(gamma) && std::isfinite(margin), "Circle",
               "gamma and margin must be finite, got gamma {} and margin {}", gamma, margin);
  auto impl = std::make_shared<CircleLoss>();
  impl->gamma = gamma;
  impl->margin = margin;
  impl->remove_diagonal = remove_diagonal;
  impl->name = std::move(name);
  impl->kind = "circle";
  impl->reduction = reduction;
  // Keras sets the mask "loss > 0" on the losses: the mean leaves out the samples without pairs.
  impl->output_mask = [](const Tensor& values) { return greater(values, zeros_like(values)); };
  impl->keras_class = "Circle";
  impl->write_config = [gamma, margin, remove_diagonal](nlohmann::ordered_json& c) {
    c["gamma"] = gamma;
    c["margin"] = margin;
    c["remove_diagonal"] = remove_diagonal;
  };
  impl_ = std::move(impl);
}

}  // namespace tapeflow::keras::losses
