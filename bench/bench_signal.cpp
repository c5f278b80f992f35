// tf::signal on the CPU (float32, eagerly), one case per shape a model meets: rfft of 1000 rows of
// 1024 samples (radix 2) and of 1000 (Bluestein), a complex fft of long rows, the stft of a batch
// of 10 s clips at 16 kHz (25 ms frames, 10 ms hop, 512-point FFT), its inverse, and a log-mel
// front end with its gradient. Compare TF 2.21 on the same shapes with
// bench/compare/signal_tf.py (docs/performance.md has the table).
//
//   OMP_NUM_THREADS=2 ./bench_signal --benchmark_repetitions=5 \
//       --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include "autograd/tape.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/linalg_more.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/signal.h"
#include "ops/unary.h"

namespace tf = tapeflow;
namespace sig = tapeflow::signal;

namespace {

tf::Tensor noise(const tf::TensorShape& shape, uint64_t seed) {
  tf::DeviceScope scope("/CPU:0");
  return tf::random::normal(shape, 0.0, 1.0, tf::float32, seed);
}

void BM_rfft(benchmark::State& state) {
  const tf::Tensor x = noise({state.range(0), state.range(1)}, 1);
  for (auto _ : state) {
    sig::ComplexTensor y = sig::rfft(x);
    benchmark::DoNotOptimize(y.real.raw_data());
  }
  state.SetItemsProcessed(state.iterations() * state.range(0) * state.range(1));
}
BENCHMARK(BM_rfft)->Args({1000, 1024})->Args({1000, 1000})->UseRealTime();

// dct type 2 of 1000 rows: up to 128 points a product with the cosine matrix built per call,
// longer through rfft of length 2N. BM_dct_product is the product alone with the matrix made
// once (dct of the identity), the best a matrix route could do at that length.
void BM_dct(benchmark::State& state) {
  const tf::Tensor x = noise({state.range(0), state.range(1)}, 1);
  for (auto _ : state) {
    const tf::Tensor y = sig::dct(x, 2);
    benchmark::DoNotOptimize(y.raw_data());
  }
  state.SetItemsProcessed(state.iterations() * state.range(0) * state.range(1));
}
BENCHMARK(BM_dct)
    ->Args({1000, 64})
    ->Args({1000, 128})
    ->Args({1000, 129})
    ->Args({1000, 256})
    ->Args({1000, 1024})
    ->UseRealTime();

void BM_dct_product(benchmark::State& state) {
  const tf::Tensor x = noise({state.range(0), state.range(1)}, 1);
  const tf::Tensor m = sig::dct(tf::eye(state.range(1)), 2);  // row j = dct of e_j
  for (auto _ : state) {
    const tf::Tensor y = tf::linalg::tensordot(x, m, 1);
    benchmark::DoNotOptimize(y.raw_data());
  }
  state.SetItemsProcessed(state.iterations() * state.range(0) * state.range(1));
}
BENCHMARK(BM_dct_product)->Args({1000, 128})->Args({1000, 256})->Args({1000, 1024})->UseRealTime();

void BM_irfft(benchmark::State& state) {
  const sig::ComplexTensor z = sig::rfft(noise({state.range(0), state.range(1)}, 2));
  for (auto _ : state) {
    tf::Tensor y = sig::irfft(z, state.range(1));
    benchmark::DoNotOptimize(y.raw_data());
  }
  state.SetItemsProcessed(state.iterations() * state.range(0) * state.range(1));
}
BENCHMARK(BM_irfft)->Args({1000, 1024})->UseRealTime();

void BM_fft(benchmark::State& state) {
  const sig::ComplexTensor z{noise({state.range(0), state.range(1)}, 3),
                             noise({state.range(0), state.range(1)}, 4)};
  for (auto _ : state) {
    sig::ComplexTensor y = sig::fft(z);
    benchmark::DoNotOptimize(y.real.raw_data());
  }
  state.SetItemsProcessed(state.iterations() * state.range(0) * state.range(1));
}
BENCHMARK(BM_fft)->Args({64, 1 << 14})->UseRealTime();

// 8 clips of 10 s at 16 kHz: 998 frames of 400 samples every 160, 512-point FFTs.
void BM_stft(benchmark::State& state) {
  const tf::Tensor x = noise({8, 160000}, 5);
  for (auto _ : state) {
    sig::ComplexTensor y = sig::stft(x, 400, 160, 512);
    benchmark::DoNotOptimize(y.real.raw_data());
  }
  state.SetItemsProcessed(state.iterations() * 8 * 160000);
}
BENCHMARK(BM_stft)->UseRealTime();

void BM_inverse_stft(benchmark::State& state) {
  const sig::ComplexTensor z = sig::stft(noise({8, 160000}, 6), 400, 160, 512);
  for (auto _ : state) {
    tf::Tensor y = sig::inverse_stft(z, 400, 160, 512);
    benchmark::DoNotOptimize(y.raw_data());
  }
  state.SetItemsProcessed(state.iterations() * 8 * 160000);
}
BENCHMARK(BM_inverse_stft)->UseRealTime();

// log(mel(|stft|) + 1e-6) with 80 bands, and the gradient of its sum w.r.t. the audio.
void BM_log_mel(benchmark::State& state) {
  const tf::Tensor x = noise({8, 160000}, 7);
  const tf::Tensor mel = sig::linear_to_mel_weight_matrix(80, 257, 16000, 20, 8000);
  const bool grad = state.range(0) != 0;
  for (auto _ : state) {
    tf::GradientTape tape;
    tape.watch(x);
    const tf::Tensor lm =
        tf::log(tf::linalg::tensordot(sig::abs(sig::stft(x, 400, 160, 512)), mel, 1) + 1e-6f);
    if (grad) {
      tf::Tensor g = tape.gradient(tf::reduce_sum(lm), x);
      benchmark::DoNotOptimize(g.raw_data());
    } else {
      benchmark::DoNotOptimize(lm.raw_data());
    }
  }
  state.SetItemsProcessed(state.iterations() * 8 * 160000);
}
BENCHMARK(BM_log_mel)->Arg(0)->Arg(1)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
