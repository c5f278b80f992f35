// The distribute tests' model (the invariant test in one process, the multi-worker test across
// processes): SGD on a small MLP, the single-device reference, and the replica step that
// all-reduces its gradients.
#pragma once

#include <vector>

#include "autograd/tape.h"
#include "autograd/variable.h"
#include "distribute/strategy.h"
#include "ops/activation.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/linalg.h"
#include "ops/movement.h"
#include "ops/nn.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/unary.h"

namespace tf = tapeflow;
namespace ds = tapeflow::distribute;

namespace sgd_mlp {

inline constexpr float kLr = 0.05f;
inline constexpr int kIn = 6, kHidden = 16;

struct Mlp {
  std::vector<tf::Variable> vars;  // w1, b1, w2, b2
  tf::Tensor per_example_loss(const tf::Tensor& x, const tf::Tensor& y) const {
    tf::Tensor h = tf::nn::relu(tf::matmul(x, vars[0]) + vars[1]);
    tf::Tensor pred = tf::matmul(h, vars[2]) + vars[3];
    return tf::reduce_sum(tf::square(pred - y), 1);
  }
};

inline std::vector<tf::Tensor> initial_values() {
  return {tf::random::normal({kIn, kHidden}, 0.0, 0.5, tf::float32, 1), tf::zeros({kHidden}),
          tf::random::normal({kHidden, 1}, 0.0, 0.5, tf::float32, 2), tf::zeros({1})};
}

inline Mlp make_mlp(const std::vector<tf::Tensor>& init) {
  Mlp m;
  const char* names[] = {"w1", "b1", "w2", "b2"};
  for (size_t i = 0; i < init.size(); ++i) m.vars.emplace_back(init[i], names[i]);
  return m;
}

// `items` seeded examples of a smooth target (the same in every process), batched by 16 (a short
// last batch when items is not a multiple).
inline std::vector<std::vector<tf::Tensor>> dataset(int items) {
  const int batch = 16;
  tf::Tensor x = tf::random::uniform({items, kIn}, -1.0, 1.0, tf::float32, 3);
  tf::Tensor y = tf::reduce_sum(tf::sin(x * 2.0f), 1, /*keepdims=*/true);
  std::vector<std::vector<tf::Tensor>> out;
  for (int b = 0; b < items; b += batch) {
    const int n = std::min(batch, items - b);
    out.push_back({tf::slice(x, {b, 0}, {n, kIn}), tf::slice(y, {b, 0}, {n, 1})});
  }
  return out;
}

// The single-device reference: plain SGD on the whole global batch.
inline std::vector<tf::Tensor> train_single(const std::vector<tf::Tensor>& init,
                                     const std::vector<std::vector<tf::Tensor>>& data, int epochs) {
  Mlp m = make_mlp(init);
  for (int e = 0; e < epochs; ++e)
    for (const auto& b : data) {
      tf::GradientTape tape;
      tf::Tensor loss = tf::nn::compute_average_loss(m.per_example_loss(b[0], b[1]),
                                                     b[0].shape()[0]);
      auto grads = tape.gradient(loss, m.vars);
      for (size_t i = 0; i < grads.size(); ++i) m.vars[i].assign_sub(grads[i] * kLr);
    }
  std::vector<tf::Tensor> out;
  for (auto& v : m.vars) out.push_back(v.value());
  return out;
}

// The replica step: local gradients of the globally scaled loss, summed over the replicas.
inline tf::Tensor replica_step(Mlp& m, const tf::Tensor& x, const tf::Tensor& y, int64_t global) {
  tf::GradientTape tape;
  tf::Tensor loss = tf::nn::compute_average_loss(m.per_example_loss(x, y), global);
  auto grads = tape.gradient(loss, m.vars);
  grads = ds::get_replica_context()->all_reduce(ds::ReduceOp::SUM, grads);
  for (size_t i = 0; i < grads.size(); ++i) m.vars[i].assign_sub(grads[i] * kLr);
  return loss;
}

}  // namespace sgd_mlp
