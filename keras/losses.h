// Losses (tf.keras.losses) as callable shared handles: loss(y_true, y_pred, sample_weight)
// computes the per-sample losses (the last axis reduced), multiplies by the optional sample
// weights and reduces them as TF does: SUM_OVER_BATCH_SIZE (the default, AUTO: the sum divided
// by the number of loss values), SUM, or NONE (the per-sample losses). Everything is written
// with ops, so losses are differentiable and traceable. Immutable after construction; safe to
// call from several threads.
//
// Inside strategy.run a SUM_OVER_BATCH_SIZE loss is also divided by the number of replicas
// (Keras 3's scale_loss_for_distribution), so the all-reduced SUM of the gradients is the
// gradient of the mean over the global batch.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace tapeflow::keras::losses {

enum class Reduction { AUTO, SUM_OVER_BATCH_SIZE, SUM, NONE };

namespace detail {
struct LossImpl {
  virtual ~LossImpl() = default;
  // Per-sample losses: y_pred's shape without its last axis (MeanSquaredError, the
  // crossentropies) or whatever a custom function returns.
  virtual Tensor call(const Tensor& y_true, const Tensor& y_pred) const = 0;
  std::string name;
  // What the loss computes ("sparse_categorical_crossentropy", ..., "custom"), whatever its name.
  std::string kind = "custom";
  Reduction reduction = Reduction::AUTO;
  // Keras' mask on the per-sample losses (set_keras_mask; Circle: the losses > 0), when set:
  // masked losses weigh nothing, and SUM_OVER_BATCH_SIZE divides by the number of unmasked
  // ones instead of all (Keras' apply_mask).
  std::function<Tensor(const Tensor& values)> output_mask;
};
}  // namespace detail

class Loss {
 public:
  // An empty handle; calling it throws.
  Loss() = default;
  // A loss from a function of (y_true, y_pred) returning per-sample losses (Keras'
  // LossFunctionWrapper).
  Loss(std::function<Tensor(const Tensor& y_true, const Tensor& y_pred)> fn, std::string name,
       Reduction reduction = Reduction::AUTO);

  // `mask`: the Keras mask of y_pred (Keras reads y_pred._keras_mask; fit passes the model
  // output's), broadcastable to the per-sample losses. Masked losses weigh nothing and
  // SUM_OVER_BATCH_SIZE averages over the unmasked ones (Keras' apply_mask); with a loss's own
  // mask (Circle's "loss > 0") both must hold, and the mean is over the entries where they do.
  Tensor operator()(const Tensor& y_true, const Tensor& y_pred,
                    const Tensor& sample_weight = Tensor(), const Tensor& mask = Tensor()) const;
  // The per-sample losses, before weighting and reduction.
  Tensor call(const Tensor& y_true, const Tensor& y_pred) const;
  bool defined() const { return impl_ != nullptr; }
  const std::string& name() const;
  Reduction reduction() const;
  // The implementation, for code that dispatches on the loss kind (the "accuracy" metric).
  const detail::LossImpl* impl() const { return impl_.get(); }

 protected:
  std::shared_ptr<const detail::LossImpl> impl_;
};

// labels: integer class ids (int32/int64, or floats holding integers) of shape y_pred.shape[:-1]
// (or with a trailing 1). from_logits uses tf::nn::sparse_softmax_cross_entropy_with_logits;
// probabilities are clipped to [1e-7, 1 - 1e-7] and their log goes through the same op (TF).
class SparseCategoricalCrossentropy : public Loss {
 public:
  explicit SparseCategoricalCrossentropy(bool from_logits = false,
                                         Reduction reduction = Reduction::AUTO,
                                         std::string name = "sparse_categorical_crossentropy");
};

// y_true: one-hot (or soft) labels of y_pred's shape; label_smoothing mixes them with the
// uniform distribution: y * (1 - s) + s / classes. Probabilities are normalised to sum to 1,
// then clipped to [1e-7, 1 - 1e-7].
class CategoricalCrossentropy : public Loss {
 public:
  explicit CategoricalCrossentropy(bool from_logits = false, double label_smoothing = 0.0,
                                   Reduction reduction = Reduction::AUTO,
                                   std::string name = "categorical_crossentropy");
};

// mean(square(y_true - y_pred), axis=-1).
class MeanSquaredError : public Loss {
 public:
  explicit MeanSquaredError(Reduction reduction = Reduction::AUTO,
                            std::string name = "mean_squared_error");
};

// mean over the last axis of -(y log p + (1 - y) log(1 - p)) with p clipped to [1e-7, 1 - 1e-7]
// (from_logits: tf::nn::sigmoid_cross_entropy_with_logits); label_smoothing: y * (1 - s) + s / 2.
class BinaryCrossentropy : public Loss {
 public:
  explicit BinaryCrossentropy(bool from_logits = false, double label_smoothing = 0.0,
                              Reduction reduction = Reduction::AUTO,
                              std::string name = "binary_crossentropy");
};

// The per-sample functions (tf.keras.losses.sparse_categorical_crossentropy etc.).
Tensor sparse_categorical_crossentropy(const Tensor& y_true, const Tensor& y_pred,
                                       bool from_logits = false);
Tensor categorical_crossentropy(const Tensor& y_true, const Tensor& y_pred,
                                bool from_logits = false, double label_smoothing = 0.0);
Tensor mean_squared_error(const Tensor& y_true, const Tensor& y_pred);
Tensor binary_crossentropy(const Tensor& y_true, const Tensor& y_pred, bool from_logits = false,
                           double label_smoothing = 0.0);

// "sparse_categorical_crossentropy", "categorical_crossentropy", "mse"/"mean_squared_error",
// "binary_crossentropy", as compile("...") resolves them; and the strings of detail::get_more.
Loss get(const std::string& identifier);

namespace detail {
// Keras' squeeze_or_expand_to_same_rank: when the ranks differ by one, squeezes a trailing 1
// from the larger or expands the smaller at the end.
std::pair<Tensor, Tensor> squeeze_or_expand_to_same_rank(Tensor a, Tensor b);
// Whether two shapes broadcast together (numpy rules).
bool broadcastable(const TensorShape& a, const TensorShape& b);
// The fuzz factor Keras clips probabilities with (backend.epsilon()).
inline constexpr double kEpsilon = 1e-7;
// y_true cast to y_pred's dtype, both of one shape after squeeze_or_expand_to_same_rank; else
// an InvalidArgumentError naming `op` and both shapes.
std::pair<Tensor, Tensor> same_shape(const char* op, const Tensor& y_true, const Tensor& y_pred);
}  // namespace detail

// ---- More losses (keras/losses_more.cpp) ----
// Each reduces the last axis to per-sample losses (a scalar pair gives a scalar), takes the
// Reduction and sample weights as above, and casts y_true to y_pred's dtype; y_true and y_pred
// must have the same shape after Keras' trailing-1 adjustment. Defaults and names as Keras 3.

// mean(abs(y_true - y_pred), axis=-1).
class MeanAbsoluteError : public Loss {
 public:
  explicit MeanAbsoluteError(Reduction reduction = Reduction::AUTO,
                             std::string name = "mean_absolute_error");
};
// 100 * mean(abs((y_true - y_pred) / maximum(abs(y_true), 1e-7)), axis=-1).
class MeanAbsolutePercentageError : public Loss {
 public:
  explicit MeanAbsolutePercentageError(Reduction reduction = Reduction::AUTO,
                                       std::string name = "mean_absolute_percentage_error");
};
// mean(square(log(maximum(y_pred, 1e-7) + 1) - log(maximum(y_true, 1e-7) + 1)), axis=-1).
class MeanSquaredLogarithmicError : public Loss {
 public:
  explicit MeanSquaredLogarithmicError(Reduction reduction = Reduction::AUTO,
                                       std::string name = "mean_squared_logarithmic_error");
};
// e = y_pred - y_true: mean(|e| <= delta ? e^2 / 2 : delta * |e| - delta^2 / 2, axis=-1).
class Huber : public Loss {
 public:
  explicit Huber(double delta = 1.0, Reduction reduction = Reduction::AUTO,
                 std::string name = "huber_loss");
};
// mean(log(cosh(y_pred - y_true)), axis=-1), as x + softplus(-2x) - log(2) (no overflow).
class LogCosh : public Loss {
 public:
  explicit LogCosh(Reduction reduction = Reduction::AUTO, std::string name = "log_cosh");
};
// sum(t * log(t / p), axis=-1) with t and p clipped to [1e-7, 1].
class KLDivergence : public Loss {
 public:
  explicit KLDivergence(Reduction reduction = Reduction::AUTO, std::string name = "kl_divergence");
};
// mean(y_pred - y_true * log(y_pred + 1e-7), axis=-1).
class Poisson : public Loss {
 public:
  explicit Poisson(Reduction reduction = Reduction::AUTO, std::string name = "poisson");
};
// -sum(l2_normalize(y_true) * l2_normalize(y_pred), axis): -1 for parallel vectors, 0 when
// either is all zeros. The per-sample losses drop `axis` (not necessarily the last).
class CosineSimilarity : public Loss {
 public:
  explicit CosineSimilarity(int axis = -1, Reduction reduction = Reduction::AUTO,
                            std::string name = "cosine_similarity");
};
// mean(maximum(1 - y_true * y_pred, 0), axis=-1); labels expected in {-1, 1}: when every label
// of the batch is 0 or 1 they are mapped to -1 and 1 first (Keras).
class Hinge : public Loss {
 public:
  explicit Hinge(Reduction reduction = Reduction::AUTO, std::string name = "hinge");
};
// mean(square(maximum(1 - y_true * y_pred, 0)), axis=-1), labels as Hinge.
class SquaredHinge : public Loss {
 public:
  explicit SquaredHinge(Reduction reduction = Reduction::AUTO, std::string name = "squared_hinge");
};
// maximum(max((1 - y_true) * y_pred, axis=-1) - sum(y_true * y_pred, axis=-1) + 1, 0).
class CategoricalHinge : public Loss {
 public:
  explicit CategoricalHinge(Reduction reduction = Reduction::AUTO,
                            std::string name = "categorical_hinge");
};

Tensor mean_absolute_error(const Tensor& y_true, const Tensor& y_pred);
Tensor mean_absolute_percentage_error(const Tensor& y_true, const Tensor& y_pred);
Tensor mean_squared_logarithmic_error(const Tensor& y_true, const Tensor& y_pred);
Tensor huber(const Tensor& y_true, const Tensor& y_pred, double delta = 1.0);
Tensor log_cosh(const Tensor& y_true, const Tensor& y_pred);
Tensor kl_divergence(const Tensor& y_true, const Tensor& y_pred);
Tensor poisson(const Tensor& y_true, const Tensor& y_pred);
Tensor cosine_similarity(const Tensor& y_true, const Tensor& y_pred, int axis = -1);
Tensor hinge(const Tensor& y_true, const Tensor& y_pred);
Tensor squared_hinge(const Tensor& y_true, const Tensor& y_pred);
Tensor categorical_hinge(const Tensor& y_true, const Tensor& y_pred);

namespace detail {
// The losses of keras/losses_more.cpp by compile() string (lower case): an empty handle for
// another string. get() falls back to it; kMoreLossNames lists the strings for its error.
Loss get_more(const std::string& id);
inline constexpr const char* kMoreLossNames =
    "mae, mean_absolute_error, mape, mean_absolute_percentage_error, msle, "
    "mean_squared_logarithmic_error, huber, log_cosh, kl_divergence, kld, poisson, "
    "cosine_similarity, hinge, squared_hinge, categorical_hinge";
}  // namespace detail

// ---- Extra losses (keras/losses_extra.cpp) ----
// Reductions, sample weights and dtype handling as above; defaults and names as Keras 3.15.

// mean over `axis` (Keras' axis, default the last) of (1 - p_t)^gamma * bce,
// p_t = y p + (1 - y)(1 - p), bce the clipped
// binary crossentropy (from_logits: sigmoid_cross_entropy_with_logits of the logits, unclipped,
// as Keras' TF backend; p_t from sigmoid(logits)); apply_class_balancing multiplies by
// y alpha + (1 - y)(1 - alpha); label_smoothing: y (1 - s) + s / 2, used in p_t too.
class BinaryFocalCrossentropy : public Loss {
 public:
  explicit BinaryFocalCrossentropy(bool apply_class_balancing = false, double alpha = 0.25,
                                   double gamma = 2.0, bool from_logits = false,
                                   double label_smoothing = 0.0,
                                   Reduction reduction = Reduction::AUTO,
                                   std::string name = "binary_focal_crossentropy", int axis = -1);
};
// sum over `axis` (Keras' axis, default the last) of alpha (1 - q)^gamma (-y log q), q the
// predictions (softmax of the logits along `axis`) normalised along it to sum to 1 and clipped
// to [1e-7, 1 - 1e-7]; label_smoothing as CategoricalCrossentropy (over the last axis's size,
// whatever `axis` is, as Keras 3.15).
class CategoricalFocalCrossentropy : public Loss {
 public:
  explicit CategoricalFocalCrossentropy(double alpha = 0.25, double gamma = 2.0,
                                        bool from_logits = false, double label_smoothing = 0.0,
                                        Reduction reduction = Reduction::AUTO,
                                        std::string name = "categorical_focal_crossentropy",
                                        int axis = -1);
};
// 1 - 2 sum(y p) / (sum(y) + sum(p) + 1e-7), the sums over `axis` (empty: every axis, Keras'
// axis=None, one scalar loss for the batch).
class Dice : public Loss {
 public:
  explicit Dice(Reduction reduction = Reduction::AUTO, std::string name = "dice",
                std::vector<int> axis = {});
};
// 1 - sum(y p) / (sum(y p) + alpha sum((1 - p) y) + beta sum(p (1 - y)) + 1e-7), sums over
// `axis` as Dice (Keras 3.15 weighs the missed positives by alpha).
class Tversky : public Loss {
 public:
  explicit Tversky(double alpha = 0.5, double beta = 0.5, Reduction reduction = Reduction::AUTO,
                   std::string name = "tversky", std::vector<int> axis = {});
};

// (1 - p^q) / q, p the prediction for the integer label (of y_pred's shape without the class
// axis, or with a trailing 1; an out-of-range label gives p = 0), q in (0, 1) (Zhang & Sabuncu's
// generalized crossentropy, robust to noisy labels).
class CategoricalGeneralizedCrossEntropy : public Loss {
 public:
  explicit CategoricalGeneralizedCrossEntropy(
      double q = 0.5, Reduction reduction = Reduction::AUTO,
      std::string name = "categorical_generalized_cross_entropy");
};

Tensor categorical_generalized_cross_entropy(const Tensor& y_true, const Tensor& y_pred,
                                             double q = 0.5);

// ---- Circle loss (keras/losses_circle.cpp) ----
// Keras 3's circle loss (Sun et al., 2020) for metric learning. y_true: integer labels (batch,)
// (or (batch, 1); floats are truncated, as Keras' cast); y_pred: embeddings (batch, dim),
// expected L2-normalised (Keras does not normalise them: end the model with UnitNormalization).
// With d = maximum(1 - y_pred ref_embeddings^T, 0) for each pair, positives the pairs of equal
// labels (without the pair of an embedding with itself when remove_diagonal) and negatives the
// others, per sample: softplus(logsumexp over positives of -gamma [margin + d]+ (margin - d) +
// logsumexp over negatives of gamma [1 + margin - d]+ (1 - margin - d)); 0 for a sample
// without a positive or a negative. ref_labels and ref_embeddings (default: y_true and y_pred)
// are the keys the batch is compared with.
Tensor circle(const Tensor& y_true, const Tensor& y_pred, const Tensor& ref_labels = Tensor(),
              const Tensor& ref_embeddings = Tensor(), bool remove_diagonal = true,
              double gamma = 80.0, double margin = 0.4);
// The loss of circle() over the batch (as its own references). As Keras, the per-sample losses
// carry the mask "loss > 0" (LossImpl::output_mask): SUM_OVER_BATCH_SIZE is the mean over the
// samples with a positive loss (those without a positive or a negative pair are left out).
// compile() string "circle".
class Circle : public Loss {
 public:
  explicit Circle(double gamma = 80.0, double margin = 0.4, bool remove_diagonal = true,
                  Reduction reduction = Reduction::AUTO, std::string name = "circle");
};
Tensor binary_focal_crossentropy(const Tensor& y_true, const Tensor& y_pred,
                                 bool apply_class_balancing = false, double alpha = 0.25,
                                 double gamma = 2.0, bool from_logits = false,
                                 double label_smoothing = 0.0, int axis = -1);
Tensor categorical_focal_crossentropy(const Tensor& y_true, const Tensor& y_pred,
                                      double alpha = 0.25, double gamma = 2.0,
                                      bool from_logits = false, double label_smoothing = 0.0,
                                      int axis = -1);
Tensor dice(const Tensor& y_true, const Tensor& y_pred, const std::vector<int>& axis = {});
Tensor tversky(const Tensor& y_true, const Tensor& y_pred, double alpha = 0.5, double beta = 0.5,
               const std::vector<int>& axis = {});

// ---- CTC (keras/losses_ctc.cpp) ----
// Keras 3's CTC loss for sequence labelling without alignments (speech, OCR): y_true (batch,
// max_length) integer labels padded with 0 (class 0 is the blank), y_pred (batch, frames,
// classes) logits; per sample tf::nn::ctc_loss with each label's length its count of non-zero
// entries and every sequence spanning all the frames. Differentiable with respect to y_pred.
// float64 is computed in float64 (Keras 3.15 computes it in float32). compile() string "ctc".
Tensor ctc(const Tensor& y_true, const Tensor& y_pred);
class CTC : public Loss {
 public:
  explicit CTC(Reduction reduction = Reduction::AUTO, std::string name = "ctc");
};

namespace detail {
// The losses of keras/losses_extra.cpp by compile() string (lower case), as get_more.
Loss get_extra(const std::string& id);
inline constexpr const char* kExtraLossNames =
    "binary_focal_crossentropy, categorical_focal_crossentropy, dice, tversky, "
    "categorical_generalized_cross_entropy, circle, ctc";
}  // namespace detail

}  // namespace tapeflow::keras::losses
