// Today's sorting, segment and CTC ops, eagerly on the CPU (float32), one case per shape a model
// meets: top_k over a classifier's logits and over long rows, a full sort and argsort, searchsorted
// into a sorted table, the unsorted segment max/prod of a graph network's messages, and
// ctc_loss's forward and backward. Compare TF 2.21 on the same shapes with
// bench/compare/sort_tf.py (docs/performance.md has the table).
//
//   OMP_NUM_THREADS=2 ./bench_sort --benchmark_repetitions=5 \
//       --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <vector>

#include "autograd/tape.h"
#include "ops/factory.h"
#include "ops/nn_more.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/segment.h"
#include "ops/sort.h"

namespace tf = tapeflow;

namespace {

tf::Tensor logits(int64_t rows, int64_t cols) {
  tf::DeviceScope scope("/CPU:0");
  return tf::random::normal({rows, cols}, 0.0, 1.0, tf::float32, 1);
}

void BM_top_k(benchmark::State& state) {
  const tf::Tensor x = logits(state.range(0), state.range(1));
  const int64_t k = state.range(2);
  for (auto _ : state) {
    auto [values, indices] = tf::math::top_k(x, k);
    benchmark::DoNotOptimize(values.raw_data());
  }
  state.SetItemsProcessed(state.iterations() * state.range(0) * state.range(1));
}
BENCHMARK(BM_top_k)->Args({256, 1000, 5})->Args({32, 100000, 10})->UseRealTime();

void BM_sort(benchmark::State& state) {
  const tf::Tensor x = logits(state.range(0), state.range(1));
  for (auto _ : state) {
    tf::Tensor y = tf::sort(x);
    benchmark::DoNotOptimize(y.raw_data());
  }
  state.SetItemsProcessed(state.iterations() * state.range(0) * state.range(1));
}
BENCHMARK(BM_sort)->Args({256, 1000})->Args({1, 1 << 20})->UseRealTime();

void BM_argsort(benchmark::State& state) {
  const tf::Tensor x = logits(state.range(0), state.range(1));
  for (auto _ : state) {
    tf::Tensor y = tf::argsort(x);
    benchmark::DoNotOptimize(y.raw_data());
  }
  state.SetItemsProcessed(state.iterations() * state.range(0) * state.range(1));
}
BENCHMARK(BM_argsort)->Args({256, 1000})->UseRealTime();

// 2^18 values into a sorted table of 2^16.
void BM_searchsorted(benchmark::State& state) {
  tf::DeviceScope scope("/CPU:0");
  const tf::Tensor table = tf::sort(tf::random::uniform({1 << 16}, 0, 1, tf::float32, 3));
  const tf::Tensor values = tf::random::uniform({1 << 18}, 0, 1, tf::float32, 4);
  for (auto _ : state) {
    tf::Tensor y = tf::searchsorted(table, values);
    benchmark::DoNotOptimize(y.raw_data());
  }
  state.SetItemsProcessed(state.iterations() * (1 << 18));
}
BENCHMARK(BM_searchsorted)->UseRealTime();

// 100000 rows of 64 features into 1000 segments (random ids).
template <int Which>
void BM_segment(benchmark::State& state) {
  tf::DeviceScope scope("/CPU:0");
  const tf::Tensor data = tf::random::uniform({100000, 64}, 0.5, 1.5, tf::float32, 5);
  const tf::Tensor ids = tf::random::uniform({100000}, 0, 1000, tf::int32, 6);
  for (auto _ : state) {
    tf::Tensor y = Which == 0   ? tf::math::unsorted_segment_sum(data, ids, 1000)
                   : Which == 1 ? tf::math::unsorted_segment_max(data, ids, 1000)
                                : tf::math::unsorted_segment_prod(data, ids, 1000);
    benchmark::DoNotOptimize(y.raw_data());
  }
  state.SetItemsProcessed(state.iterations() * 100000 * 64);
}
BENCHMARK(BM_segment<0>)->Name("BM_unsorted_segment_sum")->UseRealTime();
BENCHMARK(BM_segment<1>)->Name("BM_unsorted_segment_max")->UseRealTime();
BENCHMARK(BM_segment<2>)->Name("BM_unsorted_segment_prod")->UseRealTime();

// ctc_loss, time-major logits (50, 16, 20), labels of 10 (classes 1..19, blank 0), forward and
// the gradient of the summed loss.
void BM_ctc_loss(benchmark::State& state) {
  tf::DeviceScope scope("/CPU:0");
  const tf::Tensor x = tf::random::normal({50, 16, 20}, 0.0, 1.0, tf::float32, 7);
  const tf::Tensor labels = tf::random::uniform({16, 10}, 1, 20, tf::int32, 8);
  const tf::Tensor label_length = tf::fill({16}, 10);
  const tf::Tensor logit_length = tf::fill({16}, 50);
  const bool backward = state.range(0) != 0;
  for (auto _ : state) {
    if (backward) {
      tf::GradientTape tape;
      tape.watch(x);
      const tf::Tensor loss =
          tf::reduce_sum(tf::nn::ctc_loss(labels, x, label_length, logit_length));
      tf::Tensor g = tape.gradient(loss, x);
      benchmark::DoNotOptimize(g.raw_data());
    } else {
      tf::Tensor loss = tf::nn::ctc_loss(labels, x, label_length, logit_length);
      benchmark::DoNotOptimize(loss.raw_data());
    }
  }
  state.SetItemsProcessed(state.iterations() * 16);
}
BENCHMARK(BM_ctc_loss)->Arg(0)->Arg(1)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
