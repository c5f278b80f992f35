// Reverse-mode autodiff costs, side by side with libtorch in one run:
//   - recording: 64 chained tiny adds (2x2 float32) eagerly without a tape, under a tape that
//     watches the input, and libtorch's add on plain and requires_grad tensors (items = ops);
//   - an eager training step of a 784-128-10 MLP (ReLU, softmax cross-entropy, SGD) at batch 32
//     and 256, float32, with tapeflow's GradientTape and with libtorch's autograd (addmm,
//     cross_entropy, backward, in-place SGD), on the same threads.
//
//   OMP_NUM_THREADS=2 ./bench_autograd --benchmark_repetitions=5 \
//       --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <vector>

#include "autograd/tape.h"
#include "core/parallel.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/linalg.h"
#include "ops/nn.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "mlp_step.h"

#ifdef TAPEFLOW_HAVE_TORCH
#include <torch/torch.h>
#endif

namespace tf = tapeflow;

namespace {

constexpr int kChain = 64;

void BM_tapeflow_add_chain_no_tape(benchmark::State& state) {
  tf::Tensor a = tf::ones({2, 2}), b = tf::ones({2, 2});
  for (auto _ : state) {
    tf::Tensor c = a;
    for (int i = 0; i < kChain; ++i) c = tf::add(c, b);
    benchmark::DoNotOptimize(c.raw_data());
  }
  state.SetItemsProcessed(state.iterations() * kChain);
}
BENCHMARK(BM_tapeflow_add_chain_no_tape);

void BM_tapeflow_add_chain_tape(benchmark::State& state) {
  tf::Tensor a = tf::ones({2, 2}), b = tf::ones({2, 2});
  for (auto _ : state) {
    tf::GradientTape tape;
    tape.watch(a);
    tf::Tensor c = a;
    for (int i = 0; i < kChain; ++i) c = tf::add(c, b);
    benchmark::DoNotOptimize(c.raw_data());
  }
  state.SetItemsProcessed(state.iterations() * kChain);
}
BENCHMARK(BM_tapeflow_add_chain_tape);

void BM_tapeflow_add_chain_tape_and_gradient(benchmark::State& state) {
  tf::Tensor a = tf::ones({2, 2}), b = tf::ones({2, 2});
  for (auto _ : state) {
    tf::GradientTape tape;
    tape.watch(a);
    tf::Tensor c = a;
    for (int i = 0; i < kChain; ++i) c = tf::add(c, b);
    tf::Tensor g = tape.gradient(c, a);
    benchmark::DoNotOptimize(g.raw_data());
  }
  state.SetItemsProcessed(state.iterations() * kChain);
}
BENCHMARK(BM_tapeflow_add_chain_tape_and_gradient);

// ---- MLP training step (bench/mlp_step.h) ----

using bench_mlp::Mlp;

void BM_tapeflow_mlp_step(benchmark::State& state) {
  Mlp m(state.range(0), "/CPU:0");
  m.step(m.x, m.labels);
  float loss = 0;
  for (auto _ : state) loss = m.step(m.x, m.labels).item<float>();
  state.counters["loss"] = loss;
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_tapeflow_mlp_step)->Arg(32)->Arg(256)->Unit(benchmark::kMicrosecond);

#ifdef TAPEFLOW_HAVE_TORCH
void BM_torch_add_chain_no_grad(benchmark::State& state) {
  torch::set_num_threads(tf::detail::num_threads());
  auto a = torch::ones({2, 2}), b = torch::ones({2, 2});
  for (auto _ : state) {
    auto c = a;
    for (int i = 0; i < kChain; ++i) c = torch::add(c, b);
    benchmark::DoNotOptimize(c.data_ptr());
  }
  state.SetItemsProcessed(state.iterations() * kChain);
}
BENCHMARK(BM_torch_add_chain_no_grad);

void BM_torch_add_chain_requires_grad(benchmark::State& state) {
  torch::set_num_threads(tf::detail::num_threads());
  auto a = torch::ones({2, 2}, torch::requires_grad()), b = torch::ones({2, 2});
  for (auto _ : state) {
    auto c = a;
    for (int i = 0; i < kChain; ++i) c = torch::add(c, b);
    benchmark::DoNotOptimize(c.data_ptr());
  }
  state.SetItemsProcessed(state.iterations() * kChain);
}
BENCHMARK(BM_torch_add_chain_requires_grad);

void BM_torch_add_chain_requires_grad_and_backward(benchmark::State& state) {
  torch::set_num_threads(tf::detail::num_threads());
  auto a = torch::ones({2, 2}, torch::requires_grad()), b = torch::ones({2, 2});
  for (auto _ : state) {
    auto c = a;
    for (int i = 0; i < kChain; ++i) c = torch::add(c, b);
    auto g = torch::autograd::grad({c}, {a}, {torch::ones_like(c)});
    benchmark::DoNotOptimize(g[0].data_ptr());
  }
  state.SetItemsProcessed(state.iterations() * kChain);
}
BENCHMARK(BM_torch_add_chain_requires_grad_and_backward);

struct TorchMlp {
  std::vector<torch::Tensor> params;
  torch::Tensor x, labels;
  explicit TorchMlp(int64_t batch) {
    torch::manual_seed(0);
    params = {torch::randn({784, 128}) * 0.05, torch::zeros({128}), torch::randn({128, 10}) * 0.05,
              torch::zeros({10})};
    for (auto& p : params) p.set_requires_grad(true);
    x = torch::rand({batch, 784});
    labels = torch::randint(0, 10, {batch}, torch::kLong);
  }
  float step(float lr) {
    auto h = torch::relu(torch::addmm(params[1], x, params[0]));
    auto logits = torch::addmm(params[3], h, params[2]);
    auto loss = torch::nn::functional::cross_entropy(logits, labels);
    loss.backward();
    {
      torch::NoGradGuard no_grad;
      for (auto& p : params) {
        p.sub_(p.grad() * lr);
        p.grad().zero_();
      }
    }
    return loss.item<float>();
  }
};

void BM_torch_mlp_step(benchmark::State& state) {
  torch::set_num_threads(tf::detail::num_threads());
  TorchMlp m(state.range(0));
  m.step(0.01f);
  float loss = 0;
  for (auto _ : state) loss = m.step(0.01f);
  state.counters["loss"] = loss;
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_torch_mlp_step)->Arg(32)->Arg(256)->Unit(benchmark::kMicrosecond);
#endif

}  // namespace

BENCHMARK_MAIN();
