// Candidate sampling for training over many classes: TF's tf.random.*_candidate_sampler,
// tf.nn.compute_accidental_hits, tf.nn.nce_loss and tf.nn.sampled_softmax_loss. All composites:
// they run on every device, eagerly and inside tf::function (a traced step draws new candidates
// at every call, as TF's), and their gradients flow to the weights, biases and inputs.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/tensor.h"

namespace tapeflow::random {

// What a candidate sampler returns (TF's namedtuple): the sampled classes, int64 (num_sampled,);
// the expected number of times each true class (a float32 tensor shaped as true_classes) and
// each sampled class (float32 (num_sampled,)) would be drawn by the sampler.
struct CandidateSample {
  Tensor sampled_candidates;
  Tensor true_expected_count;
  Tensor sampled_expected_count;
};

// Every sampler takes true_classes, an integer (batch, num_true) matrix (it only gives the shape
// and the classes of true_expected_count), and draws num_sampled classes in [0, range_max).
// unique=false draws with replacement: the expected count of a class of probability p is
// p * num_sampled. unique=true draws until num_sampled distinct classes came up, as TF: the
// classes are those of sampling without replacement (drawn here in one step from the Gumbel
// trick over all range_max classes, so its cost grows with range_max), and the expected count is
// 1 - (1 - p)^num_tries with num_tries the number of draws TF's loop would have made (drawn from
// its exact distribution given the classes). unique needs num_sampled <= range_max (TF would
// loop forever otherwise). Seeds follow tf::random (ops/random.h).

// P(class) = 1 / range_max.
CandidateSample uniform_candidate_sampler(const Tensor& true_classes, int64_t num_true,
                                          int64_t num_sampled, bool unique, int64_t range_max,
                                          std::optional<int64_t> seed = std::nullopt);
// Zipfian: P(class) = (log(class + 2) - log(class + 1)) / log(range_max + 1), for vocabularies
// sorted by decreasing frequency.
CandidateSample log_uniform_candidate_sampler(const Tensor& true_classes, int64_t num_true,
                                              int64_t num_sampled, bool unique, int64_t range_max,
                                              std::optional<int64_t> seed = std::nullopt);
// P(class) proportional to unigrams[class - num_reserved_ids]^distortion; the first
// num_reserved_ids classes have probability 0. range_max must be num_reserved_ids +
// unigrams.size() (TF's vocab_file, num_shards and shard are not offered: pass the counts).
// With unique, num_sampled may not exceed the number of classes of non-zero probability.
CandidateSample fixed_unigram_candidate_sampler(const Tensor& true_classes, int64_t num_true,
                                                int64_t num_sampled, bool unique, int64_t range_max,
                                                const std::vector<double>& unigrams,
                                                double distortion = 1.0,
                                                int64_t num_reserved_ids = 0,
                                                std::optional<int64_t> seed = std::nullopt);
// Every class 0 .. num_sampled - 1, with expected counts 1 (TF's; unique and seed are unused).
CandidateSample all_candidate_sampler(const Tensor& true_classes, int64_t num_true,
                                      int64_t num_sampled, bool unique,
                                      std::optional<int64_t> seed = std::nullopt);

}  // namespace tapeflow::random

namespace tapeflow::nn {

using random::all_candidate_sampler;
using random::CandidateSample;
using random::fixed_unigram_candidate_sampler;

// TF's tf.nn.compute_accidental_hits: the sampled candidates that equal one of a row's true
// classes. For each row i of true_classes (batch, num_true) and each of its classes (in order)
// found among sampled_candidates (num_sampled,): indices (int32) gets i, ids (int64) the
// position in sampled_candidates (the last one where a class occurs more than once, as TF) and
// weights (float32) -FLT_MAX. Value-dependent sizes: an error inside tf::function.
struct AccidentalHits {
  Tensor indices;
  Tensor ids;
  Tensor weights;
};
AccidentalHits compute_accidental_hits(const Tensor& true_classes, const Tensor& sampled_candidates,
                                       int64_t num_true);

// TF's tf.nn.nce_loss: noise-contrastive estimation, the (batch,) losses of inputs (batch, dim)
// against their labels (batch, num_true) and num_sampled classes drawn by sampled_values (by
// default log_uniform_candidate_sampler(labels, num_true, num_sampled, unique=true,
// num_classes)). weights is (num_classes, dim), biases (num_classes,). Each logit is
// x . w_c + b_c - log(expected count of c); the loss of a row is the sum of the sigmoid
// cross-entropies of its true logits against 1 / num_true and of its sampled logits against 0.
// remove_accidental_hits gives a sampled candidate equal to one of the row's labels the logit
// -FLT_MAX (TF's addition; with duplicates among the candidates, TF's last one only). The
// sampled values pass no gradient (TF's stop_gradient); weights, biases and inputs get theirs.
Tensor nce_loss(const Tensor& weights, const Tensor& biases, const Tensor& labels,
                const Tensor& inputs, int64_t num_sampled, int64_t num_classes,
                int64_t num_true = 1,
                const std::optional<random::CandidateSample>& sampled_values = std::nullopt,
                bool remove_accidental_hits = false);
// TF's tf.nn.sampled_softmax_loss: the same logits, with the softmax cross-entropy of each row
// against labels 1 / num_true on its true classes and 0 on the sampled ones; removes accidental
// hits by default. `seed` seeds the default sampler.
Tensor sampled_softmax_loss(
    const Tensor& weights, const Tensor& biases, const Tensor& labels, const Tensor& inputs,
    int64_t num_sampled, int64_t num_classes, int64_t num_true = 1,
    const std::optional<random::CandidateSample>& sampled_values = std::nullopt,
    bool remove_accidental_hits = true, std::optional<int64_t> seed = std::nullopt);

}  // namespace tapeflow::nn
