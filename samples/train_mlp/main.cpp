// Trains a 2-layer MLP to classify points of three interleaved spirals: Variables, a
// GradientTape inside a traced tf::function train step, SGD updates, and the eager step beside it
// for comparison. Prints the loss and accuracy as it goes and the speed of both steps, timed
// alike: each step and the read of its loss (.item()), the first (tracing) step, evaluation and
// printing left out.
//   build/samples/train_mlp [steps]
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include <tapeflow/tapeflow.h>

#include "../common/args.h"

namespace tf = tapeflow;

namespace {

// n points per class on three spirals in the plane, with labels 0, 1, 2.
std::pair<tf::Tensor, tf::Tensor> spirals(int n) {
  std::vector<float> xy;
  std::vector<int32_t> labels;
  for (int c = 0; c < 3; ++c)
    for (int i = 0; i < n; ++i) {
      const float r = static_cast<float>(i) / static_cast<float>(n);
      const float t = 4.0f * static_cast<float>(c) + 4.0f * r + 0.2f * std::sin(37.0f * i);
      xy.push_back(r * std::sin(t));
      xy.push_back(r * std::cos(t));
      labels.push_back(c);
    }
  return {tf::constant(xy, {3 * n, 2}), tf::constant(labels, {3 * n})};
}

struct Mlp {
  std::vector<tf::Variable> vars;
  explicit Mlp(int hidden) {
    vars.emplace_back(tf::random::normal({2, hidden}, 0.0, 1.0, tf::float32, 1), "w1");
    vars.emplace_back(tf::zeros({hidden}), "b1");
    vars.emplace_back(tf::random::normal({hidden, 3}, 0.0, 0.1, tf::float32, 2), "w2");
    vars.emplace_back(tf::zeros({3}), "b2");
  }
  tf::Tensor logits(const tf::Tensor& x) const {
    tf::Tensor h = tf::nn::relu(tf::nn::bias_add(tf::matmul(x, vars[0]), vars[1]));
    return tf::nn::bias_add(tf::matmul(h, vars[2]), vars[3]);
  }
  // One SGD step; returns the mean cross-entropy before the update.
  tf::Tensor step(const tf::Tensor& x, const tf::Tensor& y, float lr) {
    tf::GradientTape tape;
    tf::Tensor loss =
        tf::reduce_mean(tf::nn::sparse_softmax_cross_entropy_with_logits(y, logits(x)));
    std::vector<tf::Tensor> grads = tape.gradient(loss, vars);
    for (size_t i = 0; i < vars.size(); ++i) vars[i].assign_sub(grads[i] * lr);
    return loss;
  }
  float accuracy(const tf::Tensor& x, const tf::Tensor& y) const {
    tf::Tensor hit = tf::equal(tf::cast(tf::argmax(logits(x), 1), tf::int32), y);
    return tf::reduce_mean(tf::cast(hit, tf::float32)).item<float>();
  }
};

}  // namespace

int main(int argc, char** argv) {
  samples::Args args(
      argc, argv,
      "A 2-layer MLP learns three interleaved spirals with a traced train step.",
      "Exits 1 unless the loss at least halves.");
  const int steps = args.integer<int>("steps", 2000, 1, 100000000, "training steps");
  args.done();
  tf::random::set_seed(42);
  auto [x, y] = spirals(100);
  Mlp model(64);
  auto train_step = tf::function(
      [&model](const tf::Tensor& xb, const tf::Tensor& yb) { return model.step(xb, yb, 0.5f); },
      tf::FunctionOptions{.name = "train_step"});

  // Both steps are timed alike: the step and the read of its loss, one step at a time; the first
  // step (the trace, or the eager step's first allocations), evaluation and printing are not.
  using Clock = std::chrono::steady_clock;
  auto us_since = [](Clock::time_point t) {
    return std::chrono::duration<double, std::micro>(Clock::now() - t).count();
  };

  std::printf("step  loss    accuracy\n");
  float first = 0, last = 0;
  double traced_total_us = 0;
  for (int s = 0; s <= steps; ++s) {
    const auto t = Clock::now();
    const float loss = train_step(x, y).item<float>();
    if (s > 0) traced_total_us += us_since(t);
    if (s == 0) first = loss;
    last = loss;
    if (s % (steps / 10 > 0 ? steps / 10 : 1) == 0)
      std::printf("%4d  %.4f  %.3f\n", s, loss, model.accuracy(x, y));
  }
  const double traced_us = traced_total_us / steps;

  // The same step eagerly, for comparison (a few steps on a second model).
  Mlp eager(64);
  const int eager_steps = 200;
  double eager_total_us = 0;
  for (int s = 0; s <= eager_steps; ++s) {
    const auto t = Clock::now();
    (void)eager.step(x, y, 0.5f).item<float>();
    if (s > 0) eager_total_us += us_since(t);
  }
  const double eager_us = eager_total_us / eager_steps;

  std::printf(
      "traced train_step: %d trace(s), %.1f us per step; eager step: %.1f us (each the mean over "
      "%d and %d steps after the first)\n",
      train_step.tracing_count(), traced_us, eager_us, steps, eager_steps);
  std::printf("loss %.4f -> %.4f, final accuracy %.3f\n", first, last, model.accuracy(x, y));
  return last < first * 0.5f ? 0 : 1;  // training must have made progress
}
