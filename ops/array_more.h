// Array ops TF has and the core families lack: tf.unstack, tf.roll, tf.meshgrid,
// tf.sequence_mask, tf.reverse_sequence, tf.repeat, the one-argument tf.where, and the random
// ops tf.random.categorical, truncated_normal, shuffle and the stateless ones (stateless_uniform,
// stateless_normal, stateless_truncated_normal, ..., fold_in, split).
// All are composites of existing primitives, so they run on every device and differentiate
// where TF does. Ops whose result shape depends on tensor values (where(cond), repeat with
// tensor repeats, sequence_mask without maxlen) read those values on the host and raise
// an InvalidArgumentError inside a traced function, as boolean_mask does. See docs/ops.md.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace tapeflow {

// TF's tf.unstack: the slices of x along axis, each without that axis. num, when given, must
// equal the (known) dimension.
std::vector<Tensor> unstack(const Tensor& x, std::optional<int64_t> num = std::nullopt,
                            int axis = 0);
// TF's tf.roll: elements shifted by shift[i] along axis[i] (negative shifts go left); shifts on a
// repeated axis add up, as TF's.
Tensor roll(const Tensor& x, const std::vector<int64_t>& shift, const std::vector<int>& axis);
Tensor roll(const Tensor& x, int64_t shift, int axis);
// TF's tf.meshgrid of 1-D tensors (others are flattened, as TF's): "xy" (Cartesian, the first
// two output dimensions swapped) or "ij" (matrix) indexing.
std::vector<Tensor> meshgrid(const std::vector<Tensor>& xs, const std::string& indexing = "xy");
// TF's tf.sequence_mask: mask[..., j] = j < lengths[...], of shape lengths.shape + (maxlen,).
// Without maxlen it is max(lengths), read on the host (an error inside a traced function).
Tensor sequence_mask(const Tensor& lengths, std::optional<int64_t> maxlen = std::nullopt,
                     DType dtype = bool_);
// TF's tf.reverse_sequence: for each b along batch_axis, the first seq_lengths[b] elements
// along seq_axis are reversed; the rest stay. seq_lengths (int32/int64) is checked against the
// sequence dimension on the host when eager (traced: clamped to it).
Tensor reverse_sequence(const Tensor& x, const Tensor& seq_lengths, int seq_axis,
                        int batch_axis = 0);
// TF's tf.repeat: each element (without axis: of the flattened x) repeated `repeats` times along
// axis. Per-element repeats (one per entry along axis, or one for all) give a shape that depends
// on their values; the vector form has them on the host, the Tensor form reads them there (an
// error inside a traced function unless it is a constant).
Tensor repeat(const Tensor& x, int64_t repeats, std::optional<int> axis = std::nullopt);
Tensor repeat(const Tensor& x, const std::vector<int64_t>& repeats,
              std::optional<int> axis = std::nullopt);
Tensor repeat(const Tensor& x, const Tensor& repeats, std::optional<int> axis = std::nullopt);
// TF's one-argument tf.where: the int64 coordinates (num_true, rank) of the non-zero (true)
// elements of cond, in row-major order. Value-dependent shape: an error inside tf::function.
Tensor where(const Tensor& cond);

namespace random {
// TF's tf.random.categorical: num_samples class indices per row of logits (batch, classes)
// (unnormalised log-probabilities), by the inverse CDF of each row's softmax in float64 (one
// uniform per sample); a row whose logits are all -inf gives num_classes. dtype int32 or int64.
Tensor categorical(const Tensor& logits, int64_t num_samples, DType dtype = int64,
                   std::optional<int64_t> seed = std::nullopt);
// TF's tf.random.truncated_normal: normal values, redrawn where they fall outside two standard
// deviations (eager: until none does; traced: 16 redraw rounds, leaving an element outside with
// probability 0.0455^17 < 2e-23, then clipped to the bounds).
Tensor truncated_normal(const TensorShape& shape, double mean = 0.0, double stddev = 1.0,
                        DType dtype = float32, std::optional<int64_t> seed = std::nullopt);
// TF's tf.random.shuffle: value permuted along its first dimension by the stable argsort of
// random keys drawn under the seed rules of ops/random.h (traced too, for any batch size).
Tensor shuffle(const Tensor& value, std::optional<int64_t> seed = std::nullopt);
// TF's tf.random.gamma: samples of Gamma(alpha, beta) (shape alpha > 0, rate beta > 0; beta
// undefined: 1) of shape `shape` followed by the broadcast shape of alpha and beta, in dtype
// (floating; alpha and beta are cast to it). Marsaglia and Tsang's method in float64 (alpha < 1
// through alpha + 1 times u^(1/alpha)), its rejections redrawn (eager: until none is left;
// traced: 12 rounds, after which an element is left unaccepted with probability below 1e-15 and
// takes alpha - 1/3, near the mode); alpha <= 0 gives NaN. Gradients: with respect to alpha the
// implicit reparameterization d x / d alpha = -(d/d alpha P(alpha, x)) / p(x; alpha) (TF's
// random_gamma_grad), with respect to beta -x / beta.
Tensor gamma(const TensorShape& shape, const Tensor& alpha, const Tensor& beta = Tensor(),
             DType dtype = float32, std::optional<int64_t> seed = std::nullopt);
// TF's tf.random.poisson: samples of Poisson(lam) of shape `shape` followed by lam's shape, in
// dtype (float16, float32, float64, int32 or int64). The inverse CDF below lam = 10 and
// Hormann's transformed rejection (PTRS, as TF's kernel) from 10, in float64; lam <= 0 gives 0
// (TF's kernel), NaN gives NaN (0 in integer dtypes; TF's kernel does not return). Traced: 48
// CDF terms and 12 rejection rounds (a sample past them has probability below 1e-12). No
// gradient reaches lam (TF registers none).
Tensor poisson(const TensorShape& shape, const Tensor& lam, DType dtype = float32,
               std::optional<int64_t> seed = std::nullopt);
// TF's tf.random.stateless_uniform / stateless_normal: the same seed pair always gives the same
// numbers (also inside tf::function, on every call). The stream is tapeflow's Philox stream for
// that pair, not TF's numbers. stateless_uniform takes random::uniform's dtypes (int32 and int64
// too, with whole minval < maxval).
Tensor stateless_uniform(const TensorShape& shape, std::array<int64_t, 2> seed, double minval = 0.0,
                         double maxval = 1.0, DType dtype = float32);
Tensor stateless_normal(const TensorShape& shape, std::array<int64_t, 2> seed, double mean = 0.0,
                        double stddev = 1.0, DType dtype = float32);
// The stateless forms of truncated_normal, categorical, gamma and poisson (TF's
// tf.random.stateless_*): the same samplers, their k-th draw taken from the k-th continuation of
// the seed pair, so one pair gives the same samples eagerly and at every call of a traced
// function. As TF's, stateless_gamma and stateless_poisson give samples of exactly `shape`, with
// alpha, beta and lam broadcast to it (they must not grow it); the gradient of stateless_gamma
// reaches alpha and beta as gamma's does.
Tensor stateless_truncated_normal(const TensorShape& shape, std::array<int64_t, 2> seed,
                                  double mean = 0.0, double stddev = 1.0, DType dtype = float32);
Tensor stateless_categorical(const Tensor& logits, int64_t num_samples, std::array<int64_t, 2> seed,
                             DType dtype = int64);
Tensor stateless_gamma(const TensorShape& shape, std::array<int64_t, 2> seed, const Tensor& alpha,
                       const Tensor& beta = Tensor(), DType dtype = float32);
Tensor stateless_poisson(const TensorShape& shape, std::array<int64_t, 2> seed, const Tensor& lam,
                         DType dtype = float32);
// TF's tf.random.fold_in(seed, data) and tf.random.split(seed, num): new seed pairs made from a
// pair, for deriving independent stateless streams (per step, per replica, per layer).
// Deterministic and distinct for distinct data; not TF's values (tapeflow's stream differs).
std::array<int64_t, 2> fold_in(std::array<int64_t, 2> seed, int64_t data);
std::vector<std::array<int64_t, 2>> split(std::array<int64_t, 2> seed, int num = 2);
}  // namespace random

}  // namespace tapeflow
