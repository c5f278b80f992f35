// Image augmentation and detection post-processing on the CPU (float32, eagerly): Keras'
// CLAHE, RandAugment and AugMix on a batch of 8 images of 128 x 128 x 3, tf.image's
// crop_and_resize of 100 boxes to 14 x 14 from a 256 x 256 x 64 feature map (and its gradient
// with respect to the map and the boxes), greedy non_max_suppression of 1000 random boxes to at
// most 100 and combined_non_max_suppression of 8 x 1000 boxes in 20 classes. Compare Keras 3.15 / TF 2.21 on the same shapes with
// bench/compare/augment_tf.py (docs/performance.md has the table).
//
//   OMP_NUM_THREADS=2 ./bench_augment --benchmark_repetitions=5 \
//       --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include "autograd/tape.h"
#include "keras/layers_augment.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/image_more.h"
#include "ops/movement.h"
#include "ops/random.h"
#include "ops/reduce.h"

namespace tf = tapeflow;
namespace layers = tapeflow::keras::layers;

namespace {

tf::Tensor images() {
  tf::DeviceScope scope("/CPU:0");
  return tf::random::uniform({8, 128, 128, 3}, 0.0, 255.0, tf::float32, 1);
}

template <class L>
void run_layer(benchmark::State& state, L layer) {
  const tf::Tensor x = images();
  for (auto _ : state) {
    tf::Tensor y = layer(x, true);
    benchmark::DoNotOptimize(y.raw_data());
  }
  state.SetItemsProcessed(state.iterations() * 8);  // images
}

void BM_Clahe(benchmark::State& state) {
  run_layer(state, layers::ContrastLimitedAdaptiveHistogramEqualization());
}
BENCHMARK(BM_Clahe)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_RandAugment(benchmark::State& state) {
  run_layer(state, layers::RandAugment());
}
BENCHMARK(BM_RandAugment)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_AugMix(benchmark::State& state) {
  run_layer(state, layers::AugMix());
}
BENCHMARK(BM_AugMix)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_CropAndResize(benchmark::State& state) {
  tf::DeviceScope scope("/CPU:0");
  const tf::Tensor fmap = tf::random::uniform({1, 256, 256, 64}, 0.0, 1.0, tf::float32, 2);
  const tf::Tensor corner = tf::random::uniform({100, 2}, 0.0, 0.7, tf::float32, 3);
  const tf::Tensor boxes = tf::concat({corner, corner + 0.3f}, 1);
  const tf::Tensor idx = tf::zeros({100}, tf::int32);
  for (auto _ : state) {
    tf::Tensor y = tf::image::crop_and_resize(fmap, boxes, idx, {14, 14});
    benchmark::DoNotOptimize(y.raw_data());
  }
  state.SetItemsProcessed(state.iterations() * 100);  // boxes
}
BENCHMARK(BM_CropAndResize)->UseRealTime()->Unit(benchmark::kMillisecond);

// The same crops and their gradient with respect to the feature map and the boxes (the
// backward pass of a ROI-pooling head).
void BM_CropAndResizeGrad(benchmark::State& state) {
  tf::DeviceScope scope("/CPU:0");
  const tf::Tensor fmap = tf::random::uniform({1, 256, 256, 64}, 0.0, 1.0, tf::float32, 2);
  const tf::Tensor corner = tf::random::uniform({100, 2}, 0.0, 0.7, tf::float32, 3);
  const tf::Tensor boxes = tf::concat({corner, corner + 0.3f}, 1);
  const tf::Tensor idx = tf::zeros({100}, tf::int32);
  const tf::Tensor w = tf::random::uniform({100, 14, 14, 64}, -1.0, 1.0, tf::float32, 4);
  for (auto _ : state) {
    tf::GradientTape tape;
    tape.watch(fmap);
    tape.watch(boxes);
    const tf::Tensor y = tf::image::crop_and_resize(fmap, boxes, idx, {14, 14});
    const std::vector<tf::Tensor> g =
        tape.gradient(tf::reduce_sum(y * w), std::vector<tf::Tensor>{fmap, boxes});
    benchmark::DoNotOptimize(g[0].raw_data());
    benchmark::DoNotOptimize(g[1].raw_data());
  }
  state.SetItemsProcessed(state.iterations() * 100);  // boxes
}
BENCHMARK(BM_CropAndResizeGrad)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_NonMaxSuppression(benchmark::State& state) {
  tf::DeviceScope scope("/CPU:0");
  const tf::Tensor corner = tf::random::uniform({1000, 2}, 0.0, 0.9, tf::float32, 4);
  const tf::Tensor boxes = tf::concat({corner, corner + 0.1f}, 1);
  const tf::Tensor scores = tf::random::uniform({1000}, 0.0, 1.0, tf::float32, 5);
  for (auto _ : state) {
    tf::Tensor y = tf::image::non_max_suppression(boxes, scores, 100, 0.5);
    benchmark::DoNotOptimize(y.raw_data());
  }
}
BENCHMARK(BM_NonMaxSuppression)->UseRealTime()->Unit(benchmark::kMillisecond);

// A detector's post-processing: 8 images of 1000 boxes (shared by the classes) and 20 classes,
// at most 100 per class and 100 in all.
void BM_CombinedNonMaxSuppression(benchmark::State& state) {
  tf::DeviceScope scope("/CPU:0");
  const tf::Tensor corner = tf::random::uniform({8, 1000, 1, 2}, 0.0, 0.9, tf::float32, 6);
  const tf::Tensor boxes = tf::concat({corner, corner + 0.1f}, 3);
  const tf::Tensor scores = tf::random::uniform({8, 1000, 20}, 0.0, 1.0, tf::float32, 7);
  for (auto _ : state) {
    const auto r = tf::image::combined_non_max_suppression(boxes, scores, 100, 100, 0.5, 0.05);
    benchmark::DoNotOptimize(r.nmsed_boxes.raw_data());
  }
}
BENCHMARK(BM_CombinedNonMaxSuppression)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
