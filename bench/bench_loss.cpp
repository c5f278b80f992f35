// The training path's loss, before and after the fused primitives of ops/loss.h, side by side
// with libtorch in one run (float32, CPU):
//   - sparse softmax cross-entropy, mean over the batch, for logits [32, 10], [256, 10] and
//     [256, 1000]: forward only (eager) and forward + gradient w.r.t. the logits under a
//     GradientTape; "composite" is the pre-primitive path (host label check + log_softmax,
//     range, equal, where, reduce_sum, negative), "fused" is tf::nn's frontend today, "torch"
//     is torch::nn::functional::cross_entropy (with backward for the tape variant);
//   - softmax alone (eager) on the same shapes, composite and fused;
//   - the eager 784-128-10 MLP training step of bench_autograd.cpp with either loss.
//
//   OMP_NUM_THREADS=2 ./bench_loss --benchmark_repetitions=5 \
//       --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <vector>

#include "autograd/tape.h"
#include "core/check.h"
#include "core/parallel.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/linalg.h"
#include "ops/loss.h"
#include "ops/nn.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "mlp_step.h"

#ifdef TAPEFLOW_HAVE_TORCH
#include <torch/torch.h>
#endif

namespace tf = tapeflow;

namespace {

// The loss as tf::nn computed it before the loss family: a host check of every label, then the
// composite.
tf::Tensor composite_loss(const tf::Tensor& labels, const tf::Tensor& logits) {
  const int64_t classes = logits.shape().dim(-1);
  for (int64_t v : labels.numpy<int64_t>())
    TF_CHECK_ARG(v >= 0 && v < classes, "sparse_softmax_cross_entropy_with_logits",
                 "Received a label value of {} which is outside the valid range of [0, {})", v,
                 classes);
  return tf::detail::sparse_softmax_cross_entropy_composite(labels, logits);
}

tf::Tensor fused_loss(const tf::Tensor& labels, const tf::Tensor& logits) {
  return tf::nn::sparse_softmax_cross_entropy_with_logits(labels, logits);
}

using LossFn = tf::Tensor (*)(const tf::Tensor&, const tf::Tensor&);

struct Inputs {
  tf::Tensor logits, labels;
  Inputs(int64_t batch, int64_t classes) {
    tf::DeviceScope scope("/CPU:0");
    logits = tf::random::normal({batch, classes}, 0.0, 2.0, tf::float32, 1);
    labels = tf::random::uniform({batch}, 0, classes, tf::int64, 2);
  }
};

template <LossFn F>
void BM_loss_forward(benchmark::State& state) {
  const Inputs in(state.range(0), state.range(1));
  for (auto _ : state) {
    tf::Tensor loss = tf::reduce_mean(F(in.labels, in.logits));
    benchmark::DoNotOptimize(loss.raw_data());
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

template <LossFn F>
void BM_loss_tape(benchmark::State& state) {
  const Inputs in(state.range(0), state.range(1));
  for (auto _ : state) {
    tf::GradientTape tape;
    tape.watch(in.logits);
    tf::Tensor loss = tf::reduce_mean(F(in.labels, in.logits));
    tf::Tensor g = tape.gradient(loss, in.logits);
    benchmark::DoNotOptimize(g.raw_data());
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

void shapes(benchmark::internal::Benchmark* b) {
  b->Args({32, 10})->Args({256, 10})->Args({256, 1000})->Unit(benchmark::kMicrosecond);
}

BENCHMARK_TEMPLATE(BM_loss_forward, composite_loss)->Apply(shapes);
BENCHMARK_TEMPLATE(BM_loss_forward, fused_loss)->Apply(shapes);
BENCHMARK_TEMPLATE(BM_loss_tape, composite_loss)->Apply(shapes);
BENCHMARK_TEMPLATE(BM_loss_tape, fused_loss)->Apply(shapes);

void BM_softmax_composite(benchmark::State& state) {
  const Inputs in(state.range(0), state.range(1));
  for (auto _ : state) {
    tf::Tensor y = tf::detail::softmax_composite(in.logits, 1);
    benchmark::DoNotOptimize(y.raw_data());
  }
}
void BM_softmax_fused(benchmark::State& state) {
  const Inputs in(state.range(0), state.range(1));
  for (auto _ : state) {
    tf::Tensor y = tf::nn::softmax(in.logits);
    benchmark::DoNotOptimize(y.raw_data());
  }
}
BENCHMARK(BM_softmax_composite)->Apply(shapes);
BENCHMARK(BM_softmax_fused)->Apply(shapes);

// ---- the MLP training step (bench/mlp_step.h), with either loss ----

template <LossFn F>
void BM_mlp_step(benchmark::State& state) {
  bench_mlp::Mlp m(state.range(0), "/CPU:0");
  m.step(m.x, m.labels, F);
  float loss = 0;
  for (auto _ : state) loss = m.step(m.x, m.labels, F).item<float>();
  state.counters["loss"] = loss;
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK_TEMPLATE(BM_mlp_step, composite_loss)->Arg(32)->Arg(256)->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_mlp_step, fused_loss)->Arg(32)->Arg(256)->Unit(benchmark::kMicrosecond);

#ifdef TAPEFLOW_HAVE_TORCH
struct TorchInputs {
  torch::Tensor logits, labels;
  TorchInputs(int64_t batch, int64_t classes, bool grad) {
    torch::manual_seed(0);
    logits = torch::randn({batch, classes}) * 2.0;
    if (grad) logits.set_requires_grad(true);
    labels = torch::randint(0, classes, {batch}, torch::kLong);
  }
};

void BM_torch_loss_forward(benchmark::State& state) {
  torch::set_num_threads(tf::detail::num_threads());
  torch::NoGradGuard no_grad;
  const TorchInputs in(state.range(0), state.range(1), false);
  for (auto _ : state) {
    auto loss = torch::nn::functional::cross_entropy(in.logits, in.labels);
    benchmark::DoNotOptimize(loss.data_ptr());
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_torch_loss_forward)->Apply(shapes);

void BM_torch_loss_backward(benchmark::State& state) {
  torch::set_num_threads(tf::detail::num_threads());
  const TorchInputs in(state.range(0), state.range(1), true);
  for (auto _ : state) {
    auto loss = torch::nn::functional::cross_entropy(in.logits, in.labels);
    auto g = torch::autograd::grad({loss}, {in.logits});
    benchmark::DoNotOptimize(g[0].data_ptr());
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_torch_loss_backward)->Apply(shapes);

void BM_torch_softmax(benchmark::State& state) {
  torch::set_num_threads(tf::detail::num_threads());
  torch::NoGradGuard no_grad;
  const TorchInputs in(state.range(0), state.range(1), false);
  for (auto _ : state) {
    auto y = torch::softmax(in.logits, 1);
    benchmark::DoNotOptimize(y.data_ptr());
  }
}
BENCHMARK(BM_torch_softmax)->Apply(shapes);
#endif

}  // namespace

BENCHMARK_MAIN();
