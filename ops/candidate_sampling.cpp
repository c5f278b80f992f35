#include "ops/candidate_sampling.h"

#include <cfloat>
#include <cmath>
#include <limits>
#include <string>
#include <unordered_map>

#include "core/check.h"
#include "ops/binary.h"
#include "ops/bitcast.h"
#include "ops/dispatch.h"
#include "ops/factory.h"
#include "ops/linalg.h"
#include "ops/movement.h"
#include "ops/nn.h"
#include "ops/nn_more.h"
#include "ops/random_draws.h"
#include "ops/reduce.h"
#include "ops/scan.h"
#include "ops/sort.h"
#include "ops/unary.h"

namespace tapeflow {

namespace {

void check_true_classes(const char* op, const Tensor& true_classes, int64_t num_true) {
  TF_CHECK_ARG(num_true >= 1, op, "num_true must be >= 1, got {}", num_true);
  TF_CHECK_ARG(is_integer(true_classes.dtype()), op,
               "true_classes must be an integer tensor, got dtype {}",
               dtype_name(true_classes.dtype()));
  TF_CHECK_ARG(true_classes.shape().rank() == 2, op,
               "true_classes must be a matrix (batch_size, num_true), got shape {}",
               true_classes.shape().to_string());
  const int64_t cols = true_classes.shape()[1];
  TF_CHECK_ARG(cols < 0 || cols == num_true, op,
               "true_classes has shape {}: its second dimension must be num_true = {}",
               true_classes.shape().to_string(), num_true);
}

// The distribution of one sampler over [0, range).
class Distribution {
 public:
  enum class Kind { Uniform, LogUniform, Unigram };
  Distribution(Kind kind, int64_t range) : kind_(kind), range_(range) {}
  // Unigram: probabilities (summing to 1) of every class, made into tensors once.
  explicit Distribution(const std::vector<double>& probs)
      : kind_(Kind::Unigram), range_(static_cast<int64_t>(probs.size())) {
    std::vector<double> cdf;
    cdf.reserve(probs.size());
    for (size_t i = 0; i < probs.size(); ++i) {
      total_ += probs[i];
      cdf.push_back(total_);
      if (probs[i] > 0) last_nonzero_ = static_cast<int64_t>(i);
    }
    probs_ = convert_to_tensor(probs, {range_});
    cdf_ = convert_to_tensor(cdf, {range_});
  }

  // The float64 probability of each class of `ids` (int64).
  Tensor prob(const Tensor& ids) const {
    switch (kind_) {
      case Kind::Uniform:
        return zeros_like(ids, float64) + Tensor(1.0 / static_cast<double>(range_));
      case Kind::LogUniform: {
        const Tensor x = cast(ids, float64);
        return log((x + 2.0) / (x + 1.0)) / Tensor(std::log1p(static_cast<double>(range_)));
      }
      case Kind::Unigram:
        return gather(probs_, ids);
    }
    return {};
  }

  // n classes drawn with replacement (int64 (n,)).
  Tensor draw(int64_t n, detail::RandomDraws& draws) const {
    const Tensor u = draws.uniform({n}, 0.0, 1.0, float64);
    const double range = static_cast<double>(range_);
    switch (kind_) {
      case Kind::Uniform:
        return cast(minimum(floor(u * range), Tensor(range - 1)), int64);
      case Kind::LogUniform: {
        // TF's exp(u * log(range + 1)) - 1, truncated; its rare rounding to range wraps to 0.
        const Tensor v = floor(exp(u * std::log1p(range))) - 1.0;
        return cast(where(greater_equal(v, Tensor(range)), v - range, v), int64);
      }
      case Kind::Unigram: {
        const Tensor drawn = searchsorted(cdf_, u * total_, "right", int64);
        // u * total may round up to total: that draw is the last class with any mass.
        return where(greater_equal(drawn, int64_t{range_}),
                     fill({n}, constant(Tensor(last_nonzero_), int64)), drawn);
      }
    }
    return {};
  }

  int64_t range() const { return range_; }

 private:
  Kind kind_;
  int64_t range_;
  Tensor probs_, cdf_;  // Unigram
  double total_ = 0.0;
  int64_t last_nonzero_ = 0;
};

// The samples and expected counts of `dist` (TF's RangeSampler::SampleBatchGetExpectedCount).
random::CandidateSample sample(const char* op, const Distribution& dist, const Tensor& true_classes,
                               int64_t num_sampled, bool unique, std::optional<int64_t> seed) {
  return detail::naming_errors(op, [&] {
    detail::RandomDraws draws = detail::RandomDraws::stateful(seed);
    const double n = static_cast<double>(num_sampled);
    Tensor ids, p_ids, num_tries;
    if (!unique) {
      ids = dist.draw(num_sampled, draws);
      p_ids = dist.prob(ids);
    } else {
      // Sampling with replacement until num_sampled distinct classes came up picks them as
      // sampling without replacement does, each next one with probability proportional to p among
      // those not picked yet: the order of log p + Gumbel noise, largest first.
      const Tensor all = range(int64_t{0}, dist.range(), int64_t{1}, int64);
      const Tensor u = draws.uniform({dist.range()}, 0.0, 1.0, float64);
      const Tensor keys = log(dist.prob(all)) - log(-log(u));
      ids = cast(math::top_k(keys, num_sampled).second, int64);
      p_ids = dist.prob(ids);
      // TF's loop drew num_tries times: between the i-th and the next new class, a geometric
      // number of repeats, each of probability S_i (the mass of the classes picked so far).
      const Tensor s = minimum(cumsum(p_ids, 0, true), Tensor(std::nextafter(1.0, 0.0)));
      const Tensor v = 1.0 - draws.uniform({num_sampled}, 0.0, 1.0, float64);  // (0, 1]
      const Tensor some = greater(s, Tensor(0.0));  // none repeat before the first class
      const Tensor repeats = where(some, floor(log(v) / log(where(some, s, 0.5))), zeros_like(s));
      num_tries = reduce_sum(repeats) + n;
    }
    auto expected = [&](const Tensor& p) {
      if (!unique) return cast(p * n, float32);
      // TF's shortcut when no draw repeated, else 1 - (1 - p)^num_tries, stably.
      return cast(where(equal(num_tries, Tensor(n)), p * n, -expm1(num_tries * log1p(-p))),
                  float32);
    };
    // Nothing here depends on a differentiable input: no gradient flows out.
    random::CandidateSample out;
    out.sampled_candidates = ids;
    out.true_expected_count = expected(dist.prob(cast(true_classes, int64)));
    out.sampled_expected_count = expected(p_ids);
    return out;
  });
}

void check_sampler_args(const char* op, const Tensor& true_classes, int64_t num_true,
                        int64_t num_sampled, bool unique, int64_t range_max) {
  check_true_classes(op, true_classes, num_true);
  TF_CHECK_ARG(num_sampled >= 1, op, "num_sampled must be >= 1, got {}", num_sampled);
  TF_CHECK_ARG(range_max >= 1, op, "range_max must be >= 1, got {}", range_max);
  TF_CHECK_ARG(!unique || num_sampled <= range_max, op,
               "unique sampling of num_sampled = {} classes needs range_max >= num_sampled, got "
               "range_max = {}",
               num_sampled, range_max);
}

}  // namespace

namespace random {

CandidateSample uniform_candidate_sampler(const Tensor& true_classes, int64_t num_true,
                                          int64_t num_sampled, bool unique, int64_t range_max,
                                          std::optional<int64_t> seed) {
  const char* op = "uniform_candidate_sampler";
  check_sampler_args(op, true_classes, num_true, num_sampled, unique, range_max);
  return sample(op, Distribution(Distribution::Kind::Uniform, range_max), true_classes, num_sampled,
                unique, seed);
}

CandidateSample log_uniform_candidate_sampler(const Tensor& true_classes, int64_t num_true,
                                              int64_t num_sampled, bool unique, int64_t range_max,
                                              std::optional<int64_t> seed) {
  const char* op = "log_uniform_candidate_sampler";
  check_sampler_args(op, true_classes, num_true, num_sampled, unique, range_max);
  return sample(op, Distribution(Distribution::Kind::LogUniform, range_max), true_classes,
                num_sampled, unique, seed);
}

CandidateSample fixed_unigram_candidate_sampler(const Tensor& true_classes, int64_t num_true,
                                                int64_t num_sampled, bool unique, int64_t range_max,
                                                const std::vector<double>& unigrams,
                                                double distortion, int64_t num_reserved_ids,
                                                std::optional<int64_t> seed) {
  const char* op = "fixed_unigram_candidate_sampler";
  check_sampler_args(op, true_classes, num_true, num_sampled, unique, range_max);
  TF_CHECK_ARG(num_reserved_ids >= 0, op, "num_reserved_ids must be >= 0, got {}",
               num_reserved_ids);
  TF_CHECK_ARG(range_max == num_reserved_ids + static_cast<int64_t>(unigrams.size()), op,
               "range_max = {} must equal num_reserved_ids ({}) + the number of unigrams ({})",
               range_max, num_reserved_ids, unigrams.size());
  TF_CHECK_ARG(std::isfinite(distortion) && distortion >= 0, op,
               "distortion must be finite and >= 0, got {}", distortion);
  std::vector<double> probs(static_cast<size_t>(num_reserved_ids), 0.0);
  double total = 0.0;
  int64_t nonzero = 0;
  for (size_t i = 0; i < unigrams.size(); ++i) {
    TF_CHECK_ARG(std::isfinite(unigrams[i]) && unigrams[i] >= 0, op,
                 "unigrams[{}] = {}: every count must be finite and >= 0", i, unigrams[i]);
    const double w = std::pow(unigrams[i], distortion);
    probs.push_back(w);
    total += w;
    nonzero += w > 0;
  }
  TF_CHECK_ARG(total > 0 && std::isfinite(total), op,
               "the unigrams (raised to distortion {}) must have a finite, positive sum, got {}",
               distortion, total);
  TF_CHECK_ARG(!unique || num_sampled <= nonzero, op,
               "unique sampling of num_sampled = {} classes needs as many classes of non-zero "
               "probability, got {}",
               num_sampled, nonzero);
  for (double& p : probs) p /= total;
  return sample(op, Distribution(probs), true_classes, num_sampled, unique, seed);
}

CandidateSample all_candidate_sampler(const Tensor& true_classes, int64_t num_true,
                                      int64_t num_sampled, bool /*unique*/,
                                      std::optional<int64_t> /*seed*/) {
  const char* op = "all_candidate_sampler";
  check_true_classes(op, true_classes, num_true);
  TF_CHECK_ARG(num_sampled >= 1, op, "num_sampled must be >= 1, got {}", num_sampled);
  return detail::naming_errors(op, [&] {
    CandidateSample out;
    out.sampled_candidates = range(int64_t{0}, num_sampled, int64_t{1}, int64);
    out.true_expected_count = ones_like(true_classes, float32);
    out.sampled_expected_count = ones({num_sampled}, float32);
    return out;
  });
}

}  // namespace random

namespace nn {

AccidentalHits compute_accidental_hits(const Tensor& true_classes, const Tensor& sampled_candidates,
                                       int64_t num_true) {
  const char* op = "compute_accidental_hits";
  check_true_classes(op, true_classes, num_true);
  TF_CHECK_ARG(is_integer(sampled_candidates.dtype()) && sampled_candidates.shape().rank() == 1, op,
               "sampled_candidates must be an integer vector, got shape {} and dtype {}",
               sampled_candidates.shape().to_string(), dtype_name(sampled_candidates.dtype()));
  TF_CHECK_ARG(!true_classes.is_symbolic() && !sampled_candidates.is_symbolic(), op,
               "its outputs' sizes depend on the values: call it eagerly, not inside "
               "tf::function");
  const auto labels = cast(true_classes, int64).numpy<int64_t>();
  const auto sampled = cast(sampled_candidates, int64).numpy<int64_t>();
  std::unordered_map<int64_t, int64_t> position;  // the last position of each candidate
  for (size_t j = 0; j < sampled.size(); ++j) position[sampled[j]] = static_cast<int64_t>(j);
  std::vector<int32_t> indices;
  std::vector<int64_t> ids;
  for (size_t i = 0; i < labels.size(); ++i)
    if (auto it = position.find(labels[i]); it != position.end()) {
      indices.push_back(static_cast<int32_t>(static_cast<int64_t>(i) / num_true));
      ids.push_back(it->second);
    }
  const int64_t hits = static_cast<int64_t>(ids.size());
  AccidentalHits out;
  out.indices = convert_to_tensor(indices, {hits});
  out.ids = convert_to_tensor(ids, {hits});
  out.weights = convert_to_tensor(std::vector<float>(ids.size(), -FLT_MAX), {hits});
  return out;
}

namespace {

// TF's _compute_sampled_logits with subtract_log_q: the (batch, num_true + num_sampled) logits
// and their labels (1 / num_true on the true classes, 0 on the sampled ones).
std::pair<Tensor, Tensor> sampled_logits(const char* op, const Tensor& weights,
                                         const Tensor& biases, const Tensor& labels,
                                         const Tensor& inputs, int64_t num_sampled,
                                         int64_t num_classes, int64_t num_true,
                                         const std::optional<random::CandidateSample>& given,
                                         bool remove_accidental_hits, std::optional<int64_t> seed) {
  check_true_classes(op, labels, num_true);
  TF_CHECK_ARG(num_sampled >= 1 && num_classes >= 1, op,
               "num_sampled and num_classes must be >= 1, got {} and {}", num_sampled, num_classes);
  TF_CHECK_ARG(is_floating(weights.dtype()) && weights.shape().rank() == 2, op,
               "weights must be a floating-point (num_classes, dim) matrix, got shape {} and "
               "dtype {}",
               weights.shape().to_string(), dtype_name(weights.dtype()));
  TF_CHECK_ARG(is_floating(inputs.dtype()) && inputs.shape().rank() == 2, op,
               "inputs must be a floating-point (batch_size, dim) matrix, got shape {} and "
               "dtype {}",
               inputs.shape().to_string(), dtype_name(inputs.dtype()));
  TF_CHECK_ARG(biases.shape().rank() == 1 && is_floating(biases.dtype()), op,
               "biases must be a floating-point vector, got shape {} and dtype {}",
               biases.shape().to_string(), dtype_name(biases.dtype()));
  const int64_t dim = weights.shape()[1], rows = weights.shape()[0];
  TF_CHECK_ARG(inputs.shape()[1] == dim, op,
               "inputs {} and weights {} disagree on the embedding size",
               inputs.shape().to_string(), weights.shape().to_string());
  TF_CHECK_ARG(biases.shape()[0] == rows, op, "biases {} need one entry per row of weights {}",
               biases.shape().to_string(), weights.shape().to_string());
  const int64_t batch = inputs.shape()[0], label_rows = labels.shape()[0];
  TF_CHECK_ARG(batch < 0 || label_rows < 0 || batch == label_rows, op,
               "labels {} and inputs {} disagree on the batch size", labels.shape().to_string(),
               inputs.shape().to_string());
  if (given) {
    const auto& g = *given;
    TF_CHECK_ARG(g.sampled_candidates.shape() == TensorShape({num_sampled}) &&
                     is_integer(g.sampled_candidates.dtype()),
                 op,
                 "sampled_values' candidates must be an integer vector of num_sampled = {}, "
                 "got shape {} and dtype {}",
                 num_sampled, g.sampled_candidates.shape().to_string(),
                 dtype_name(g.sampled_candidates.dtype()));
    TF_CHECK_ARG(g.sampled_expected_count.shape() == TensorShape({num_sampled}) &&
                     g.true_expected_count.shape().rank() == 2 &&
                     is_floating(g.sampled_expected_count.dtype()) &&
                     is_floating(g.true_expected_count.dtype()),
                 op,
                 "sampled_values' expected counts must be floating-point, shaped as the "
                 "labels {} and ({},), got {} and {}",
                 labels.shape().to_string(), num_sampled, g.true_expected_count.shape().to_string(),
                 g.sampled_expected_count.shape().to_string());
  }
  return detail::naming_errors(op, [&] {
    const DType dtype = inputs.dtype();
    const Tensor ids = cast(labels, int64);
    const random::CandidateSample s =
        given ? *given
              : random::log_uniform_candidate_sampler(ids, num_true, num_sampled, true, num_classes,
                                                      seed);
    const Tensor sampled = cast(detail::without_gradient(s.sampled_candidates), int64);
    const Tensor true_count = cast(detail::without_gradient(s.true_expected_count), dtype);
    const Tensor sampled_count = cast(detail::without_gradient(s.sampled_expected_count), dtype);
    // (batch, num_true) true logits: each input dotted with its classes' weight rows.
    const Tensor true_w = cast(gather(weights, ids), dtype);  // (batch, num_true, dim)
    Tensor true_logits = reduce_sum(expand_dims(inputs, 1) * true_w, std::vector<int>{2}) +
                         cast(gather(biases, ids), dtype);
    // (batch, num_sampled): every input against every sampled class.
    Tensor sampled_l = matmul(inputs, cast(gather(weights, sampled), dtype), false, true) +
                       cast(gather(biases, sampled), dtype);
    if (remove_accidental_hits) {
      // A sampled class equal to one of the row's labels, at its last position among the
      // candidates (compute_accidental_hits' rule), gets -FLT_MAX added, as TF.
      const Tensor row = reshape(sampled, {1, 1, num_sampled});
      const Tensor hit = reduce_any(equal(expand_dims(ids, 2), row), std::vector<int>{1});
      std::vector<uint8_t> after(static_cast<size_t>(num_sampled * num_sampled), 0);
      for (int64_t p = 0; p < num_sampled; ++p)
        for (int64_t q = p + 1; q < num_sampled; ++q)
          after[static_cast<size_t>(p * num_sampled + q)] = 1;
      const Tensor later =
          reduce_any(logical_and(equal(expand_dims(sampled, 1), expand_dims(sampled, 0)),
                                 cast(convert_to_tensor(after, {num_sampled, num_sampled}), bool_)),
                     std::vector<int>{1});
      const Tensor masked = logical_and(hit, expand_dims(logical_not(later), 0));
      sampled_l = sampled_l + cast(masked, dtype) * static_cast<double>(-FLT_MAX);
    }
    true_logits = true_logits - log(true_count);
    sampled_l = sampled_l - log(sampled_count);
    const Tensor logits = concat({true_logits, sampled_l}, 1);
    const Tensor targets =
        concat({ones_like(true_logits) / static_cast<double>(num_true), zeros_like(sampled_l)}, 1);
    return std::make_pair(logits, targets);
  });
}

}  // namespace

Tensor nce_loss(const Tensor& weights, const Tensor& biases, const Tensor& labels,
                const Tensor& inputs, int64_t num_sampled, int64_t num_classes, int64_t num_true,
                const std::optional<random::CandidateSample>& sampled_values,
                bool remove_accidental_hits) {
  const char* op = "nce_loss";
  const auto [logits, targets] =
      sampled_logits(op, weights, biases, labels, inputs, num_sampled, num_classes, num_true,
                     sampled_values, remove_accidental_hits, std::nullopt);
  return detail::naming_errors(op, [&] {
    return reduce_sum(sigmoid_cross_entropy_with_logits(targets, logits), std::vector<int>{1});
  });
}

Tensor sampled_softmax_loss(const Tensor& weights, const Tensor& biases, const Tensor& labels,
                            const Tensor& inputs, int64_t num_sampled, int64_t num_classes,
                            int64_t num_true,
                            const std::optional<random::CandidateSample>& sampled_values,
                            bool remove_accidental_hits, std::optional<int64_t> seed) {
  const char* op = "sampled_softmax_loss";
  const auto [logits, targets] =
      sampled_logits(op, weights, biases, labels, inputs, num_sampled, num_classes, num_true,
                     sampled_values, remove_accidental_hits, seed);
  return detail::naming_errors(op, [&] {
    return softmax_cross_entropy_with_logits(detail::without_gradient(targets), logits);
  });
}

}  // namespace nn

}  // namespace tapeflow
