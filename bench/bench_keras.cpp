// Issue 7's side-by-side: one Fashion-MNIST training epoch of the same models in tapeflow (Keras'
// compile/fit, traced steps) and in libtorch's C++ API (a hand loop, as its tutorials write it),
// same threads, same batch size, both computing the training accuracy as they go.
//   MLP: Flatten, Dense 128 relu, Dense 10; Adam 1e-3; batch 32; the whole 60000 images.
//   CNN: Conv2D 32 3x3 relu, MaxPool 2, Conv2D 64 3x3 relu, MaxPool 2, Flatten, Dense 64 relu,
//        Dense 10 (the distributed tutorial's model); Adam 1e-3; batch 64; the first 12800 images
//        (200 steps) per iteration, reported per step and extrapolated to an epoch.
//   OMP_NUM_THREADS=2 build/bench/bench_keras --benchmark_repetitions=3
//       --benchmark_report_aggregates_only=true
// Skips (with a message) when the Fashion-MNIST files are missing.
#include <benchmark/benchmark.h>

#include <optional>

#include "core/error.h"
#include "core/parallel.h"
#include "data/fashion_mnist.h"
#include "keras/model.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/movement.h"
#include "ops/random.h"
#include "ops/unary.h"

#ifdef TAPEFLOW_HAVE_TORCH
#include <torch/torch.h>
#endif

namespace tf = tapeflow;
namespace K = tapeflow::keras;

namespace {

struct Data {
  tf::Tensor x, y;  // float32 [N, 28, 28, 1] in [0, 1], uint8 labels
  std::vector<float> xs;
  std::vector<int64_t> ys;
};

const Data* data() {
  static std::optional<Data> d = []() -> std::optional<Data> {
    try {
      auto [train, test] = K::datasets::fashion_mnist::load_data();
      Data out;
      out.x = tf::expand_dims(tf::cast(train.first, tf::float32) / 255.0f, -1);
      out.y = train.second;
      out.xs = out.x.numpy<float>();
      for (uint8_t v : out.y.numpy<uint8_t>()) out.ys.push_back(v);
      return out;
    } catch (const tf::Error&) {
      return std::nullopt;
    }
  }();
  return d ? &*d : nullptr;
}

constexpr int64_t kCnnRows = 12800;

K::Sequential mlp() {
  return K::Sequential({K::layers::Flatten({28, 28, 1}), K::layers::Dense(128, "relu"),
                        K::layers::Dense(10)});
}
K::Sequential cnn() {
  return K::Sequential({K::layers::Conv2D(32, 3, {.activation = "relu"}), K::layers::MaxPooling2D(),
                        K::layers::Conv2D(64, 3, {.activation = "relu"}), K::layers::MaxPooling2D(),
                        K::layers::Flatten(), K::layers::Dense(64, "relu"), K::layers::Dense(10)});
}

void run_tapeflow(benchmark::State& state, K::Sequential model, const tf::Tensor& x,
                  const tf::Tensor& y, int batch, bool batch_logs = false) {
  model.compile(K::optimizers::Adam(1e-3), K::losses::SparseCategoricalCrossentropy(true),
                {"accuracy"});
  model.fit(tf::slice(x, {0, 0, 0, 0}, {batch * 4, 28, 28, 1}),
            tf::slice(y, {0}, {batch * 4}), {.epochs = 1, .batch_size = batch, .verbose = 0});
  double accuracy = 0;
  std::vector<K::callbacks::CallbackRef> callbacks;
  // A callback with a batch function reads every batch's logs (as a verbose-1 progress bar
  // does): fit then reads the loss and the metrics on the host after each step, as every fit
  // did before fit learned to skip logs no callback reads.
  if (batch_logs)
    callbacks.push_back(
        K::callbacks::LambdaCallback({.on_train_batch_end = [](int64_t, const K::Logs&) {}}));
  for (auto _ : state) {
    auto h = model.fit(x, y, {.epochs = 1, .batch_size = batch, .callbacks = callbacks,
                              .verbose = 0});
    accuracy = h.history.at("accuracy").back();
  }
  state.counters["steps"] = static_cast<double>((x.shape()[0] + batch - 1) / batch);
  state.counters["train_accuracy"] = accuracy;
}

void BM_tapeflow_mlp_epoch(benchmark::State& state) {
  const Data* d = data();
  if (!d) return state.SkipWithError("Fashion-MNIST files missing");
  tf::random::set_seed(1);
  run_tapeflow(state, mlp(), d->x, d->y, 32);
}
BENCHMARK(BM_tapeflow_mlp_epoch)->Unit(benchmark::kMillisecond)->Iterations(1)->UseRealTime();

// The same with a callback that reads each batch's logs (the loss and accuracy results).
void BM_tapeflow_mlp_epoch_batch_logs(benchmark::State& state) {
  const Data* d = data();
  if (!d) return state.SkipWithError("Fashion-MNIST files missing");
  tf::random::set_seed(1);
  run_tapeflow(state, mlp(), d->x, d->y, 32, true);
}
BENCHMARK(BM_tapeflow_mlp_epoch_batch_logs)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->UseRealTime();

// fit's own cost per step: Dense(4) on 4 features, batch 32, 1000 steps of SGD (the compute is a
// few hundred floating-point operations; what remains is the traced step's replay, slicing the
// batch, the optimizer and the metrics). Reported per step.
void BM_tapeflow_tiny_fit_step(benchmark::State& state) {
  tf::random::set_seed(1);
  const tf::Tensor x = tf::random::uniform({32000, 4}, -1, 1, tf::float32, 1);
  const tf::Tensor y = tf::random::uniform({32000, 1}, -1, 1, tf::float32, 2);
  K::Sequential model({K::layers::Dense(4, "relu"), K::layers::Dense(1)});
  model.compile(K::optimizers::SGD(0.01), K::losses::MeanSquaredError(), {"mae"});
  model.fit(tf::slice(x, {0, 0}, {128, 4}), tf::slice(y, {0, 0}, {128, 1}),
            {.epochs = 1, .batch_size = 32, .verbose = 0});
  for (auto _ : state) model.fit(x, y, {.epochs = 1, .batch_size = 32, .verbose = 0});
  state.SetItemsProcessed(state.iterations() * 1000);  // steps
}
BENCHMARK(BM_tapeflow_tiny_fit_step)->Unit(benchmark::kMillisecond)->Iterations(3)->UseRealTime();

void BM_tapeflow_cnn_200_steps(benchmark::State& state) {
  const Data* d = data();
  if (!d) return state.SkipWithError("Fashion-MNIST files missing");
  tf::random::set_seed(1);
  run_tapeflow(state, cnn(), tf::slice(d->x, {0, 0, 0, 0}, {kCnnRows, 28, 28, 1}),
               tf::slice(d->y, {0}, {kCnnRows}), 64);
}
BENCHMARK(BM_tapeflow_cnn_200_steps)->Unit(benchmark::kMillisecond)->Iterations(1)->UseRealTime();

// One eager Adam update of a variable of range(0) float32 elements and its two slots:
// Keras' Adam (one fused apply_adam op on each variable) against the same update written op by
// op (twelve ops, a buffer each), as a custom eager training loop would run them.
void adam_update(benchmark::State& state, bool fused) {
  const int64_t n = state.range(0);
  tf::DeviceScope cpu("/CPU:0");
  const tf::Tensor g = tf::random::normal({n}, 0, 1, tf::float32, 1);
  tf::Variable w(tf::random::normal({n}, 0, 1, tf::float32, 2), "w");
  tf::Variable m(tf::zeros({n}), "m"), v(tf::zeros({n}), "v");
  K::optimizers::Adam adam(1e-3);
  const tf::Tensor alpha = tf::constant(1e-3f);
  auto by_ops = [&] {
    m.assign_add(tf::multiply(tf::subtract(g, m.value()), tf::Tensor(1.0 - 0.9)));
    v.assign_add(tf::multiply(tf::subtract(tf::square(g), v.value()), tf::Tensor(1.0 - 0.999)));
    w.assign_sub(tf::divide(tf::multiply(m.value(), alpha),
                            tf::add(tf::sqrt(v.value()), tf::Tensor(1e-7))));
  };
  for (auto _ : state) {
    if (fused) adam.apply_gradients({g}, {w});
    else by_ops();
  }
  state.SetItemsProcessed(state.iterations() * n);
}
void BM_adam_update_keras(benchmark::State& state) { adam_update(state, true); }
void BM_adam_update_ops(benchmark::State& state) { adam_update(state, false); }
BENCHMARK(BM_adam_update_keras)->Arg(1280)->Arg(100480)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_adam_update_ops)->Arg(1280)->Arg(100480)->Unit(benchmark::kMicrosecond);

#ifdef TAPEFLOW_HAVE_TORCH
// One epoch of a hand-written libtorch loop: shuffle, batches by index_select, forward, loss,
// backward, Adam, running accuracy.
double torch_epoch(torch::nn::Sequential& net, torch::optim::Adam& opt, const torch::Tensor& x,
                   const torch::Tensor& y, int64_t batch) {
  const int64_t n = x.size(0);
  const torch::Tensor perm = torch::randperm(n, torch::kLong);
  int64_t correct = 0;
  for (int64_t i = 0; i < n; i += batch) {
    const torch::Tensor idx = perm.slice(0, i, std::min(n, i + batch));
    const torch::Tensor xb = x.index_select(0, idx), yb = y.index_select(0, idx);
    opt.zero_grad();
    const torch::Tensor logits = net->forward(xb);
    const torch::Tensor loss = torch::nn::functional::cross_entropy(logits, yb);
    loss.backward();
    opt.step();
    correct += logits.argmax(1).eq(yb).sum().item<int64_t>();
  }
  return static_cast<double>(correct) / static_cast<double>(n);
}

void run_torch(benchmark::State& state, torch::nn::Sequential net, const torch::Tensor& x,
               const torch::Tensor& y, int64_t batch) {
  torch::set_num_threads(tf::detail::num_threads());
  torch::manual_seed(1);
  torch::optim::Adam opt(net->parameters(), torch::optim::AdamOptions(1e-3));
  (void)torch_epoch(net, opt, x.slice(0, 0, batch * 4), y.slice(0, 0, batch * 4), batch);
  double accuracy = 0;
  for (auto _ : state) accuracy = torch_epoch(net, opt, x, y, batch);
  state.counters["steps"] = static_cast<double>((x.size(0) + batch - 1) / batch);
  state.counters["train_accuracy"] = accuracy;
}

torch::Tensor torch_images(const Data& d, int64_t rows, bool nchw) {
  torch::Tensor t = torch::from_blob(const_cast<float*>(d.xs.data()), {60000, 28, 28, 1},
                                     torch::kFloat32)
                        .slice(0, 0, rows)
                        .clone();
  return nchw ? t.permute({0, 3, 1, 2}).contiguous() : t;
}
torch::Tensor torch_labels(const Data& d, int64_t rows) {
  return torch::from_blob(const_cast<int64_t*>(d.ys.data()), {60000}, torch::kLong)
      .slice(0, 0, rows)
      .clone();
}

void BM_torch_mlp_epoch(benchmark::State& state) {
  const Data* d = data();
  if (!d) return state.SkipWithError("Fashion-MNIST files missing");
  torch::nn::Sequential net(torch::nn::Flatten(), torch::nn::Linear(784, 128), torch::nn::ReLU(),
                            torch::nn::Linear(128, 10));
  run_torch(state, net, torch_images(*d, 60000, false), torch_labels(*d, 60000), 32);
}
BENCHMARK(BM_torch_mlp_epoch)->Unit(benchmark::kMillisecond)->Iterations(1)->UseRealTime();

void BM_torch_cnn_200_steps(benchmark::State& state) {
  const Data* d = data();
  if (!d) return state.SkipWithError("Fashion-MNIST files missing");
  torch::nn::Sequential net(
      torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 32, 3)), torch::nn::ReLU(),
      torch::nn::MaxPool2d(2), torch::nn::Conv2d(torch::nn::Conv2dOptions(32, 64, 3)),
      torch::nn::ReLU(), torch::nn::MaxPool2d(2), torch::nn::Flatten(),
      torch::nn::Linear(1600, 64), torch::nn::ReLU(), torch::nn::Linear(64, 10));
  run_torch(state, net, torch_images(*d, kCnnRows, true), torch_labels(*d, kCnnRows), 64);
}
BENCHMARK(BM_torch_cnn_200_steps)->Unit(benchmark::kMillisecond)->Iterations(1)->UseRealTime();
#endif

}  // namespace

BENCHMARK_MAIN();
