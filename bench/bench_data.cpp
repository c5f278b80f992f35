// Input pipelines over a Fashion-MNIST-sized source (60000 x 28 x 28 uint8 images and 60000
// uint8 labels, synthetic so that the benchmark needs no dataset files): one full epoch per
// iteration, batched by 32, with and without shuffle, prefetch and a per-element map (also on
// several threads); plus
// reading the real IDX files when the Debian package's files are installed.
//
//   OMP_NUM_THREADS=2 ./bench_data --benchmark_repetitions=5 \
//       --benchmark_report_aggregates_only=true
//
// Counter items_per_second: images per second.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "data/csv.h"
#include "data/dataset.h"
#include "data/fashion_mnist.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/unary.h"

namespace tf = tapeflow;
using tf::data::Dataset;

namespace {

constexpr int64_t kImages = 60000;

const Dataset& source() {
  static const Dataset ds = [] {
    std::vector<uint8_t> px(static_cast<size_t>(kImages) * 28 * 28), labels(kImages);
    for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<uint8_t>(i * 2654435761u >> 24);
    for (size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<uint8_t>(i % 10);
    return Dataset::from_tensor_slices(
        {tf::convert_to_tensor(px, {kImages, 28, 28}), tf::convert_to_tensor(labels, {kImages})});
  }();
  return ds;
}

void run_epoch(benchmark::State& state, const Dataset& ds) {
  int64_t batches = 0;
  for (auto _ : state) {
    for (const auto& batch : ds) {
      benchmark::DoNotOptimize(batch[0].raw_data());
      ++batches;
    }
  }
  state.SetItemsProcessed(state.iterations() * kImages);
  state.counters["batches/epoch"] = static_cast<double>(batches) / state.iterations();
}

void BM_Batch32(benchmark::State& state) {
  run_epoch(state, source().batch(32));
}
void BM_ShuffleBatch32(benchmark::State& state) {
  run_epoch(state, source().shuffle(kImages, 1).batch(32));
}
void BM_ShuffleBatch32Prefetch(benchmark::State& state) {
  run_epoch(state, source().shuffle(kImages, 1).batch(32).prefetch(state.range(0)));
}
// Unbatched: one zero-copy view per component per element.
void BM_Elements(benchmark::State& state) {
  run_epoch(state, source());
}
// A per-element map (uint8 -> float32) forces the element-by-element batching path.
void BM_ShuffleMapBatch32(benchmark::State& state) {
  run_epoch(state, source()
                       .shuffle(kImages, 1)
                       .map([](tf::Tensor x, tf::Tensor y) {
                         return std::make_pair(tf::cast(x, tf::float32), y);
                       })
                       .batch(32));
}
// The usual alternative: map whole batches.
void BM_ShuffleBatch32Map(benchmark::State& state) {
  run_epoch(state, source().shuffle(kImages, 1).batch(32).map([](tf::Tensor x, tf::Tensor y) {
    return std::make_pair(tf::cast(x, tf::float32), y);
  }));
}

// A heavier per-element map (cast, scale, tanh: a stand-in for per-image augmentation), Arg =
// num_parallel_calls (0: the plain sequential map).
void BM_ShuffleMapParallelBatch32(benchmark::State& state) {
  auto fn = [](tf::Tensor x, tf::Tensor y) {
    tf::Tensor f = tf::multiply(tf::cast(x, tf::float32), tf::constant(1.0f / 255));
    return std::make_pair(tf::tanh(tf::exp(f)), y);
  };
  const Dataset shuffled = source().shuffle(kImages, 1);
  const int64_t threads = state.range(0);
  run_epoch(state, (threads == 0 ? shuffled.map(fn) : shuffled.map(fn, threads)).batch(32));
}

// cache() after the heavier map above, Arg: 0 maps every epoch (no cache), 1 replays the
// in-memory cache(), 2 reads cache(filename) (a 188 MB file of float32 images in the system's
// temporary directory). The first epoch, which fills the cache, runs before the timing.
void BM_MapCacheBatch32(benchmark::State& state) {
  auto fn = [](tf::Tensor x, tf::Tensor y) {
    tf::Tensor f = tf::multiply(tf::cast(x, tf::float32), tf::constant(1.0f / 255));
    return std::make_pair(tf::tanh(tf::exp(f)), y);
  };
  const Dataset mapped = source().map(fn);
  const std::string file = (std::filesystem::temp_directory_path() /
                            ("tapeflow_bench_cache_" + std::to_string(::getpid())))
                               .string();
  std::filesystem::remove(file);
  const int64_t mode = state.range(0);
  const Dataset ds = (mode == 0   ? mapped
                      : mode == 1 ? mapped.cache()
                                  : mapped.cache(file))
                         .batch(32);
  for (const auto& batch : ds) benchmark::DoNotOptimize(batch[0].raw_data());
  run_epoch(state, ds);
  if (mode == 2) state.counters["file_MB"] = double(std::filesystem::file_size(file)) / 1e6;
  std::filesystem::remove(file);
}

// A training loop's view: each batch costs the consumer about 25 us of work (a busy wait
// standing in for a small model's step) while the pipeline maps every element. Arg = prefetch
// buffer (0: none), so the two rows show how much of the input work prefetch hides.
void BM_MapBatchWithStep(benchmark::State& state) {
  const Dataset ds = source()
                         .shuffle(kImages, 1)
                         .map([](tf::Tensor x, tf::Tensor y) {
                           return std::make_pair(tf::cast(x, tf::float32), y);
                         })
                         .batch(32)
                         .prefetch(state.range(0));
  for (auto _ : state) {
    for (const auto& batch : ds) {
      benchmark::DoNotOptimize(batch[0].raw_data());
      const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(25);
      while (std::chrono::steady_clock::now() < until) {
      }
    }
  }
  state.SetItemsProcessed(state.iterations() * kImages);
}

// CsvDataset: one epoch of a 100,000-record file (an int label and 8 float32 features written
// with 6 decimals) batched by 32. Items: records per second. bench/compare/csv_tf.py times TF's
// CsvDataset on the same file.
void BM_CsvBatch32(benchmark::State& state) {
  constexpr int kRecords = 100000, kFeatures = 8;
  const std::string file = (std::filesystem::temp_directory_path() /
                            ("tapeflow_bench_csv_" + std::to_string(::getpid()) + ".csv"))
                               .string();
  {
    std::ofstream out(file);
    out << "label";
    for (int f = 0; f < kFeatures; ++f) out << ",f" << f;
    out << "\n";
    for (int r = 0; r < kRecords; ++r) {
      out << r % 10;
      for (int f = 0; f < kFeatures; ++f)
        out << ',' << std::to_string(static_cast<double>((r * 131 + f * 17) % 1000) / 997.0);
      out << "\n";
    }
  }
  std::vector<tf::Tensor> defaults{tf::zeros({0}, tf::int32)};
  for (int f = 0; f < kFeatures; ++f) defaults.push_back(tf::Tensor(0.0f));
  const Dataset ds =
      tf::data::experimental::CsvDataset({file}, defaults, {.header = true}).batch(32);
  for (auto _ : state)
    for (const auto& batch : ds) benchmark::DoNotOptimize(batch[0].raw_data());
  state.SetItemsProcessed(state.iterations() * kRecords);
  state.counters["file_MB"] = double(std::filesystem::file_size(file)) / 1e6;
  std::filesystem::remove(file);
}

void BM_LoadFashionMnist(benchmark::State& state) {
  namespace fm = tf::keras::datasets::fashion_mnist;
  if (!std::filesystem::exists(fm::default_data_dir() + "/train-images-idx3-ubyte.gz")) {
    state.SkipWithError("Fashion-MNIST files not installed");
    return;
  }
  for (auto _ : state) benchmark::DoNotOptimize(fm::load_data().first.first.raw_data());
  state.SetItemsProcessed(state.iterations() * 70000);
}

BENCHMARK(BM_Batch32)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ShuffleBatch32)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ShuffleBatch32Prefetch)->Arg(2)->Arg(16)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Elements)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ShuffleMapBatch32)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ShuffleBatch32Map)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ShuffleMapParallelBatch32)
    ->Arg(0)
    ->Arg(1)
    ->Arg(2)
    ->Arg(4)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_MapCacheBatch32)->DenseRange(0, 2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_MapBatchWithStep)->Arg(0)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_CsvBatch32)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_LoadFashionMnist)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
