// The train step of issue 5's MLP target, shared by bench_function (CPU, against libtorch) and
// bench_cuda (GPU): a 784-128-10 MLP (ReLU, softmax cross-entropy), float32, plain SGD at
// lr = 0.01, its variables and one batch of inputs on one device.
#pragma once

#include <cstdint>
#include <vector>

#include "autograd/tape.h"
#include "autograd/variable.h"
#include "core/device.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/linalg.h"
#include "ops/nn.h"
#include "ops/random.h"
#include "ops/reduce.h"

namespace bench_mlp {

namespace tf = tapeflow;

struct Mlp {
  std::vector<tf::Variable> vars;
  tf::Tensor x, labels;
  Mlp(int64_t batch, const char* device) {
    tf::DeviceScope scope(device);
    vars.emplace_back(tf::random::normal({784, 128}, 0.0, 0.05, tf::float32, 1), "w1");
    vars.emplace_back(tf::zeros({128}), "b1");
    vars.emplace_back(tf::random::normal({128, 10}, 0.0, 0.05, tf::float32, 2), "w2");
    vars.emplace_back(tf::zeros({10}), "b2");
    x = tf::random::uniform({batch, 784}, 0.0, 1.0, tf::float32, 3);
    labels = tf::random::uniform({batch}, 0, 10, tf::int64, 4);
  }
  // One SGD step on (xb, yb) whose loss is the batch mean of loss_of(labels, logits); returns
  // the loss.
  template <class Loss>
  tf::Tensor step(const tf::Tensor& xb, const tf::Tensor& yb, Loss loss_of) {
    tf::GradientTape tape;
    tf::Tensor h = tf::nn::relu(tf::nn::bias_add(tf::matmul(xb, vars[0]), vars[1]));
    tf::Tensor logits = tf::nn::bias_add(tf::matmul(h, vars[2]), vars[3]);
    tf::Tensor loss = tf::reduce_mean(loss_of(yb, logits));
    std::vector<tf::Tensor> grads = tape.gradient(loss, vars);
    for (size_t i = 0; i < vars.size(); ++i) vars[i].assign_sub(grads[i] * 0.01f);
    return loss;
  }
  // With softmax cross-entropy on integer labels.
  tf::Tensor step(const tf::Tensor& xb, const tf::Tensor& yb) {
    return step(xb, yb, [](const tf::Tensor& labels, const tf::Tensor& logits) {
      return tf::nn::sparse_softmax_cross_entropy_with_logits(labels, logits);
    });
  }
};

}  // namespace bench_mlp
