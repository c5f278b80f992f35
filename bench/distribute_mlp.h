// The data-parallel benchmarks' model (bench_distribute in one process, bench_multi_worker
// across processes): an SGD step of a 784-256-256-10 MLP (ReLU, softmax cross-entropy) whose
// gradients are all-reduced when it runs in a replica.
#pragma once

#include <tapeflow/tapeflow.h>

#include <vector>

namespace tf = tapeflow;
namespace ds = tapeflow::distribute;

namespace distribute_bench {

inline constexpr int kBatch = 256, kIn = 784, kHidden = 256, kOut = 10;
inline constexpr float kLr = 0.01f;

struct Mlp {
  std::vector<tf::Variable> vars;
  tf::Tensor loss(const tf::Tensor& x, const tf::Tensor& labels, int64_t global) const {
    tf::Tensor h = tf::nn::relu(tf::matmul(x, vars[0]) + vars[1]);
    h = tf::nn::relu(tf::matmul(h, vars[2]) + vars[3]);
    tf::Tensor logits = tf::matmul(h, vars[4]) + vars[5];
    return tf::nn::compute_average_loss(
        tf::nn::sparse_softmax_cross_entropy_with_logits(labels, logits), global);
  }
};

inline Mlp make_mlp() {
  Mlp m;
  m.vars = {tf::Variable(tf::random::normal({kIn, kHidden}, 0, 0.05, tf::float32, 1)),
            tf::Variable(tf::zeros({kHidden})),
            tf::Variable(tf::random::normal({kHidden, kHidden}, 0, 0.05, tf::float32, 2)),
            tf::Variable(tf::zeros({kHidden})),
            tf::Variable(tf::random::normal({kHidden, kOut}, 0, 0.05, tf::float32, 3)),
            tf::Variable(tf::zeros({kOut}))};
  return m;
}

inline tf::Tensor features() { return tf::random::uniform({kBatch, kIn}, 0, 1, tf::float32, 4); }
inline tf::Tensor labels() { return tf::random::uniform({kBatch}, 0, kOut, tf::int32, 5); }

inline tf::Tensor sgd_step(Mlp& m, const tf::Tensor& x, const tf::Tensor& y, int64_t global) {
  tf::GradientTape tape;
  tf::Tensor loss = m.loss(x, y, global);
  std::vector<tf::Tensor> grads = tape.gradient(loss, m.vars);
  if (auto* ctx = ds::get_replica_context()) grads = ctx->all_reduce(ds::ReduceOp::SUM, grads);
  for (size_t i = 0; i < grads.size(); ++i) m.vars[i].assign_sub(grads[i] * kLr);
  return loss;
}

}  // namespace distribute_bench
