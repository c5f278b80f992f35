// tf::while_loop and tf::cond (jit/control_flow.h): the cost of data-dependent control flow, per
// loop iteration, side by side in one run. The loop: y = y * 0.999 + sin(y) * 0.001 over (n,)
// float32, 100 iterations, the count decided by a tensor (an int64 counter compared with 100), as
//   - eager_cpp: a C++ for loop of eager ops (the count fixed in C++);
//   - while_eager: tf::while_loop run eagerly (a host read of the predicate per iteration);
//   - while_traced: tf::while_loop inside tf::function (one node; each iteration runs the
//     condition's and the body's sub-graphs);
//   - unrolled_traced: the C++ for loop inside tf::function (100 copies of the body, fused);
//   - *_grad: the same with the gradient of sum(y) with respect to y0 (a tape inside the
//     function: while_loop keeps each iteration's y and runs the body's vjp 100 times).
// Counter s_per_loop_iteration: the time of one call over 100 (seconds).
// The loops over elements (map_fn, scan; ops/higher_order.h) over n rows of (n, 16) float32:
//   - map_fn_traced: tf::map_fn(fn, x) in tf::function, fn(r) = tanh(r) * sum(r * r) (one loop
//     node running fn's trace per row);
//   - map_unrolled_traced: what a trace held before the loop node: fn traced once per row
//     (unstack, n copies of fn, stack), fused;
//   - scan_traced[_grad]: tf::scan(a * 0.9 + tanh(r), x) [with the gradient of sum of the
//     stacked states with respect to x, the tape inside];
//   - *_trace: the first call of a new function (the trace, its optimisation and one run).
// Counter s_per_element: the time of one call over n.
// Keras' LSTM(32) on (32, T, 16) float32, T = 20 / 200, a traced step with the gradient of the
// mean square output with respect to the weights (the tape inside):
//   - lstm_loop_step: the timesteps as one loop node (unroll = false, Keras' default);
//   - lstm_unrolled_step: one copy of the step per timestep (unroll = true);
//   - *_first: the first call (trace, optimise, run).
// A None batch reaching the loop: the while_loop above with its gradient (the tape inside) over
// a (batch, 4) state, called at 8 / 32 batch sizes it has not seen (1, 2, ...):
//   - new_batch_generic: input_signature (None, 64): one trace; each new size specialises the
//     graph and the loop's sub-graphs (shape inference, optimisation, memory planning);
//   - new_batch_retrace: no signature: one trace per size (what the None signature cost too
//     while the loop's sub-graphs held their traced shapes).
// Counter s_per_new_batch: the time of a first call at a new batch size.
// None spatial dimensions: a small convolutional step (conv2d 3x3 SAME 3->8, relu, conv2d 3x3
// stride 2 8->8, relu, a global mean and a (8, 4) matmul; the gradients of its three weights,
// the tape inside) on (2, s, s, 3) float32 images, called at 4 / 8 sizes s it has not seen
// (16, 17, ...):
//   - new_image_size_generic: input_signature (None, None, None, 3): one trace; each new size
//     specialises it (the conv gradients read the input's shape when the graph runs);
//   - new_image_size_retrace: no signature: one trace per size (what the None signature cost
//     while the conv gradients took the traced height and width as an attribute).
// Counter s_per_new_size: the time of a first call at a new image size. (oneDNN creates its
// primitives for each new geometry once per process, in the first iteration, about 1 ms per
// size on 2 cores; the medians time tapeflow's tracing, specialisation and the step itself.)
// bench/compare/control_flow_tf.py times TF's tf.while_loop, tf.cond, tf.map_fn and tf.scan in
// tf.function on the same computations.
//
//   OMP_NUM_THREADS=2 ./bench_control_flow --benchmark_repetitions=5 \
//       --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "autograd/tape.h"
#include "jit/control_flow.h"
#include "jit/function.h"
#include "keras/layers_recurrent.h"
#include "ops/array_more.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/higher_order.h"
#include "ops/linalg.h"
#include "ops/movement.h"
#include "ops/nn.h"
#include "ops/reduce.h"
#include "ops/unary.h"

namespace tf = tapeflow;

namespace {

constexpr int kIterations = 100;

tf::Tensor step(const tf::Tensor& y) {
  return y * 0.999f + tf::sin(y) * 0.001f;
}

std::vector<tf::Tensor> counted_loop(const tf::Tensor& y0) {
  return tf::while_loop(
      [](const std::vector<tf::Tensor>& v) { return tf::less(v[0], int64_t{kIterations}); },
      [](const std::vector<tf::Tensor>& v) {
        return std::vector<tf::Tensor>{v[0] + int64_t{1}, step(v[1])};
      },
      {tf::constant(int64_t{0}), y0});
}

tf::Tensor unrolled(const tf::Tensor& y0) {
  tf::Tensor y = y0;
  for (int i = 0; i < kIterations; ++i) y = step(y);
  return y;
}

tf::Tensor with_gradient(const tf::Tensor& y0, bool loop) {
  tf::GradientTape tape;
  tape.watch(y0);
  const tf::Tensor y = loop ? counted_loop(y0)[1] : unrolled(y0);
  return tape.gradient(tf::reduce_sum(y), y0);
}

void finish(benchmark::State& state) {
  state.counters["s_per_loop_iteration"] = benchmark::Counter(
      kIterations, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

tf::Tensor input(benchmark::State& state) {
  return tf::fill({state.range(0)}, tf::constant(0.5f));
}

void BM_loop_eager_cpp(benchmark::State& state) {
  const tf::Tensor y0 = input(state);
  for (auto _ : state) benchmark::DoNotOptimize(unrolled(y0).data<float>());
  finish(state);
}

void BM_loop_while_eager(benchmark::State& state) {
  const tf::Tensor y0 = input(state);
  for (auto _ : state) benchmark::DoNotOptimize(counted_loop(y0)[1].data<float>());
  finish(state);
}

// Times a tf::function of `body` on the input (traced by a first call).
template <class F>
void run_traced(benchmark::State& state, F body) {
  const tf::Tensor y0 = input(state);
  auto f = tf::function(body);
  f(y0);
  for (auto _ : state) benchmark::DoNotOptimize(tf::Tensor(f(y0)).data<float>());
  finish(state);
}

void BM_loop_while_traced(benchmark::State& state) {
  run_traced(state, [](const tf::Tensor& y) { return counted_loop(y)[1]; });
}

void BM_loop_unrolled_traced(benchmark::State& state) {
  run_traced(state, [](const tf::Tensor& y) { return unrolled(y); });
}

void BM_loop_eager_cpp_grad(benchmark::State& state) {
  const tf::Tensor y0 = input(state);
  for (auto _ : state) benchmark::DoNotOptimize(with_gradient(y0, false).data<float>());
  finish(state);
}

void BM_loop_while_traced_grad(benchmark::State& state) {
  run_traced(state, [](const tf::Tensor& y) { return with_gradient(y, true); });
}

void BM_loop_unrolled_traced_grad(benchmark::State& state) {
  run_traced(state, [](const tf::Tensor& y) { return with_gradient(y, false); });
}

// One cond per call: the branch taken alternates.
void BM_cond_traced(benchmark::State& state) {
  const tf::Tensor y0 = input(state);
  auto f = tf::function([](const tf::Tensor& y, const tf::Tensor& p) {
    return tf::cond(
        p, [&] { return step(y); }, [&] { return y - 0.001f; });
  });
  const tf::Tensor t = tf::constant(true), fl = tf::constant(false);
  f(y0, t);
  bool flip = false;
  for (auto _ : state) {
    benchmark::DoNotOptimize(f(y0, flip ? t : fl).data<float>());
    flip = !flip;
  }
}

// The loops over the rows of an (n, 16) input.
constexpr int64_t kRowWidth = 16;

tf::Tensor row_fn(const tf::Tensor& r) {
  return tf::tanh(r) * tf::reduce_sum(r * r);
}
tf::Tensor scan_step(const tf::Tensor& a, const tf::Tensor& r) {
  return a * 0.9f + tf::tanh(r);
}
tf::Tensor map_fn_rows(const tf::Tensor& x) {
  return tf::map_fn(row_fn, x);
}
tf::Tensor map_unrolled(const tf::Tensor& x) {
  std::vector<tf::Tensor> out;
  for (const tf::Tensor& r : tf::unstack(x)) out.push_back(row_fn(r));
  return tf::stack(out, 0);
}
tf::Tensor scan_rows(const tf::Tensor& x) {
  return tf::scan(scan_step, x);
}
tf::Tensor scan_rows_grad(const tf::Tensor& x) {
  tf::GradientTape tape;
  tape.watch(x);
  return tape.gradient(tf::reduce_sum(scan_rows(x)), x);
}

tf::Tensor rows_input(benchmark::State& state) {
  return tf::fill({state.range(0), kRowWidth}, tf::constant(0.5f));
}

void per_element(benchmark::State& state) {
  state.counters["s_per_element"] = benchmark::Counter(
      static_cast<double>(state.range(0)),
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

template <class F>
void run_rows(benchmark::State& state, F body) {
  const tf::Tensor x = rows_input(state);
  auto f = tf::function(body);
  f(x);
  for (auto _ : state) benchmark::DoNotOptimize(tf::Tensor(f(x)).data<float>());
  per_element(state);
}

// The first call of a new function: trace, optimise, run once.
template <class F>
void trace_rows(benchmark::State& state, F body) {
  const tf::Tensor x = rows_input(state);
  for (auto _ : state) {
    auto f = tf::function(body);
    benchmark::DoNotOptimize(tf::Tensor(f(x)).data<float>());
  }
}

void BM_map_fn_traced(benchmark::State& state) {
  run_rows(state, map_fn_rows);
}
void BM_map_unrolled_traced(benchmark::State& state) {
  run_rows(state, map_unrolled);
}
void BM_map_fn_trace(benchmark::State& state) {
  trace_rows(state, map_fn_rows);
}
void BM_map_unrolled_trace(benchmark::State& state) {
  trace_rows(state, map_unrolled);
}
void BM_scan_traced(benchmark::State& state) {
  run_rows(state, scan_rows);
}
void BM_scan_traced_grad(benchmark::State& state) {
  run_rows(state, scan_rows_grad);
}

// The LSTM train step's gradient.
struct LstmStep {
  tapeflow::keras::layers::LSTM lstm;
  explicit LstmStep(bool unroll) : lstm(32, {.unroll = unroll}) {}
  std::vector<tf::Tensor> operator()(const tf::Tensor& x) {
    tf::GradientTape tape;
    const tf::Tensor y = lstm(x);
    return tape.gradient(tf::reduce_mean(y * y), lstm.trainable_variables());
  }
};

tf::Tensor lstm_input(benchmark::State& state) {
  return tf::fill({32, state.range(0), 16}, tf::constant(0.25f));
}

void run_lstm(benchmark::State& state, bool unroll) {
  const tf::Tensor x = lstm_input(state);
  LstmStep step(unroll);
  auto f = tf::function([&](const tf::Tensor& xv) { return step(xv); });
  f(x);
  for (auto _ : state) benchmark::DoNotOptimize(f(x)[0].data<float>());
}

void first_lstm(benchmark::State& state, bool unroll) {
  const tf::Tensor x = lstm_input(state);
  LstmStep step(unroll);
  (void)step(x);  // built
  for (auto _ : state) {
    auto f = tf::function([&](const tf::Tensor& xv) { return step(xv); });
    benchmark::DoNotOptimize(f(x)[0].data<float>());
  }
}

void BM_lstm_loop_step(benchmark::State& state) {
  run_lstm(state, false);
}
void BM_lstm_unrolled_step(benchmark::State& state) {
  run_lstm(state, true);
}
void BM_lstm_loop_first(benchmark::State& state) {
  first_lstm(state, false);
}
void BM_lstm_unrolled_first(benchmark::State& state) {
  first_lstm(state, true);
}

void new_batches(benchmark::State& state, bool generic) {
  std::vector<tf::Tensor> inputs;
  for (int64_t b = 1; b <= state.range(0); ++b)
    inputs.push_back(tf::fill({b, 4}, tf::constant(0.5f)));
  auto body = [](const tf::Tensor& y) { return with_gradient(y, true); };
  tf::FunctionOptions options;
  if (generic) options.input_signature = {tf::TensorSpec({tf::None, 4})};
  for (auto _ : state) {
    auto f = tf::function(body, options);
    for (const tf::Tensor& x : inputs) benchmark::DoNotOptimize(tf::Tensor(f(x)).data<float>());
  }
  state.counters["s_per_new_batch"] = benchmark::Counter(
      static_cast<double>(state.range(0)),
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

void BM_new_batch_generic(benchmark::State& state) {
  new_batches(state, true);
}
void BM_new_batch_retrace(benchmark::State& state) {
  new_batches(state, false);
}

void new_image_sizes(benchmark::State& state, bool generic) {
  const auto weights = [](int64_t n, const tf::TensorShape& shape) {
    return tf::reshape(tf::sin(tf::range(0.0f, static_cast<float>(n), 1.0f)) * 0.2f, shape);
  };
  const tf::Tensor f1 = weights(216, {3, 3, 3, 8}), f2 = weights(576, {3, 3, 8, 8}),
                   w = weights(32, {8, 4});
  std::vector<tf::Tensor> inputs;
  for (int64_t s = 16; s < 16 + state.range(0); ++s) inputs.push_back(tf::fill({2, s, s, 3}, 0.5f));
  auto body = [&](const tf::Tensor& x) {
    tf::GradientTape tape;
    for (const tf::Tensor& v : {f1, f2, w}) tape.watch(v);
    const tf::Tensor h1 = tf::nn::relu(tf::nn::conv2d(x, f1, 1, "SAME"));
    const tf::Tensor h2 = tf::nn::relu(tf::nn::conv2d(h1, f2, 2, "SAME"));
    const tf::Tensor loss = tf::reduce_sum(tf::matmul(tf::reduce_mean(h2, {1, 2}), w));
    return tape.gradient(loss, std::vector<tf::Tensor>{f1, f2, w});
  };
  tf::FunctionOptions options;
  if (generic) options.input_signature = {tf::TensorSpec({tf::None, tf::None, tf::None, 3})};
  for (auto _ : state) {
    auto f = tf::function(body, options);
    for (const tf::Tensor& x : inputs) benchmark::DoNotOptimize(f(x)[0].data<float>());
  }
  state.counters["s_per_new_size"] = benchmark::Counter(
      static_cast<double>(state.range(0)),
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

void BM_new_image_size_generic(benchmark::State& state) {
  new_image_sizes(state, true);
}
void BM_new_image_size_retrace(benchmark::State& state) {
  new_image_sizes(state, false);
}

}  // namespace

BENCHMARK(BM_loop_eager_cpp)->Arg(64)->Arg(1 << 16)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_loop_while_eager)->Arg(64)->Arg(1 << 16)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_loop_while_traced)->Arg(64)->Arg(1 << 16)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_loop_unrolled_traced)->Arg(64)->Arg(1 << 16)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_loop_eager_cpp_grad)->Arg(64)->Arg(1 << 16)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_loop_while_traced_grad)->Arg(64)->Arg(1 << 16)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_loop_unrolled_traced_grad)->Arg(64)->Arg(1 << 16)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_cond_traced)->Arg(64)->Arg(1 << 16)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_map_fn_traced)->Arg(64)->Arg(1024)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_map_unrolled_traced)->Arg(64)->Arg(1024)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_map_fn_trace)->Arg(64)->Arg(1024)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_map_unrolled_trace)->Arg(64)->Arg(1024)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_scan_traced)->Arg(64)->Arg(1024)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_scan_traced_grad)->Arg(64)->Arg(1024)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_lstm_loop_step)->Arg(20)->Arg(200)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_lstm_unrolled_step)->Arg(20)->Arg(200)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_lstm_loop_first)->Arg(20)->Arg(200)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_lstm_unrolled_first)->Arg(20)->Arg(200)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_new_batch_generic)->Arg(8)->Arg(32)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_new_batch_retrace)->Arg(8)->Arg(32)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_new_image_size_generic)->Arg(4)->Arg(8)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_new_image_size_retrace)->Arg(4)->Arg(8)->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
