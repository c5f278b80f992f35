// A fully convolutional classifier trained on images of every size with one traced train step.
// Each batch has a height and width of its own (12 to 32 pixels; the test batches go up to 48,
// sizes the training never saw); the task is to tell images holding a bright square from images
// of noise only. The model (Conv2D 8 3x3 relu, MaxPooling2D, Conv2D 16 3x3 relu,
// GlobalMaxPooling2D, Dense 2) has no layer tied to the image size, and train_step's
// input_signature leaves the batch, height and width None: tf::function traces it once and
// specialises that graph to each new size (TF2 would retrace per size without
// reduce_retracing or a None signature; docs/function.md, "None spatial and time axes").
//   build/samples/variable_size_images [steps [min_accuracy]]
// Exits 1 when the test accuracy is below min_accuracy (default 0.9) or a step traced again.
#include <tapeflow/tapeflow.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "../common/args.h"

namespace tf = tapeflow;
namespace L = tapeflow::keras::layers;

namespace {

class Detector : public tf::keras::Model {
 public:
  tf::Tensor call(const tf::Tensor& x, bool training) override {
    tf::Tensor h = pool(conv1(x, training));
    h = conv2(h, training);
    return dense(global(h));
  }

 private:
  L::Conv2D conv1{8, 3, {.padding = "same", .activation = "relu"}};
  L::MaxPooling2D pool{2};
  L::Conv2D conv2{16, 3, {.padding = "same", .activation = "relu"}};
  L::GlobalMaxPooling2D global;
  L::Dense dense{2};
};

struct Batch {
  tf::Tensor images;  // (batch, height, width, 1) float32
  tf::Tensor labels;  // (batch,) int64: 1 when the image holds a bright square
};

// Noise in [0, 0.5), and in half of the images a 3x3 to 5x5 square of 0.9 somewhere.
Batch make_batch(std::mt19937& rng, int64_t batch, int64_t height, int64_t width) {
  std::uniform_real_distribution<float> noise(0.0f, 0.5f);
  std::vector<float> pixels(static_cast<size_t>(batch * height * width));
  for (float& p : pixels) p = noise(rng);
  std::vector<int64_t> labels(static_cast<size_t>(batch));
  for (int64_t b = 0; b < batch; ++b) {
    labels[static_cast<size_t>(b)] = b % 2;
    if (b % 2 == 0) continue;
    const int64_t side = std::uniform_int_distribution<int64_t>(3, 5)(rng);
    const int64_t top = std::uniform_int_distribution<int64_t>(0, height - side)(rng);
    const int64_t left = std::uniform_int_distribution<int64_t>(0, width - side)(rng);
    for (int64_t y = top; y < top + side; ++y)
      for (int64_t x = left; x < left + side; ++x)
        pixels[static_cast<size_t>((b * height + y) * width + x)] = 0.9f;
  }
  return {tf::constant(pixels, {batch, height, width, 1}), tf::constant(labels)};
}

}  // namespace

int main(int argc, char** argv) {
  samples::Args args(argc, argv,
                     "Trains a fully convolutional classifier on images of every size with one "
                     "traced train step.");
  const int steps = args.integer<int>("steps", 300, 1, 100000, "train steps (one size each)");
  const double min_accuracy = args.min_accuracy(0.9, "test accuracy below which it exits 1");
  args.done();
  tf::random::set_seed(7);
  std::mt19937 rng(7);

  Detector model;
  tf::keras::losses::SparseCategoricalCrossentropy loss_object(/*from_logits=*/true);
  tf::keras::optimizers::Adam optimizer(0.01);
  tf::keras::metrics::SparseCategoricalAccuracy test_accuracy("test_accuracy");
  const std::vector<tf::TensorSpec> signature = {tf::TensorSpec({tf::None, tf::None, tf::None, 1}),
                                                 tf::TensorSpec({tf::None}, tf::int64)};

  auto train_step = tf::function(
      [&](const tf::Tensor& images, const tf::Tensor& labels) {
        tf::GradientTape tape;
        const tf::Tensor loss = loss_object(labels, model(images, true));
        optimizer.apply_gradients(tape.gradient(loss, model.trainable_variables()),
                                  model.trainable_variables());
        return loss;
      },
      {.input_signature = signature, .name = "train_step"});
  auto test_step = tf::function(
      [&](const tf::Tensor& images, const tf::Tensor& labels) {
        test_accuracy.update_state(labels, model(images, false));
        return labels;
      },
      {.input_signature = signature, .name = "test_step"});

  const auto t0 = std::chrono::steady_clock::now();
  std::uniform_int_distribution<int64_t> train_size(12, 32);
  double loss_sum = 0;
  for (int step = 1; step <= steps; ++step) {
    const int64_t h = train_size(rng), w = train_size(rng);
    const Batch b = make_batch(rng, 16, h, w);
    loss_sum += train_step(b.images, b.labels).item<float>();
    if (step % 50 == 0 || step == steps) {
      const double secs =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::printf(
          "step %d: mean loss %.4f over the last steps, this batch %lldx%lld, traces %d "
          "(%.1f s)\n",
          step, loss_sum / (step % 50 == 0 ? 50 : step % 50), static_cast<long long>(h),
          static_cast<long long>(w), train_step.tracing_count(), secs);
      loss_sum = 0;
    }
  }

  // Sizes up to 48: larger than any the training saw.
  std::uniform_int_distribution<int64_t> test_size(12, 48);
  std::vector<Batch> test_batches;
  for (int k = 0; k < 20; ++k)
    test_batches.push_back(make_batch(rng, 16, test_size(rng), test_size(rng)));
  for (const Batch& b : test_batches) test_step(b.images, b.labels);
  const double accuracy = test_accuracy.result().item<float>();
  std::printf("test accuracy over 20 batches of new sizes: %.2f%%\n", 100 * accuracy);
  // The same forward pass without an input_signature: a trace per distinct shape (as TF2).
  auto per_shape = tf::function([&](const tf::Tensor& images) { return model(images, false); },
                                {.name = "per_shape"});
  for (const Batch& b : test_batches) per_shape(b.images);
  std::printf(
      "traces: train_step %d, test_step %d; without a signature, %d for the 20 test "
      "batches\n",
      train_step.tracing_count(), test_step.tracing_count(), per_shape.tracing_count());
  if (train_step.tracing_count() != 1 || test_step.tracing_count() != 1) {
    std::fprintf(stderr, "a step traced more than once: one graph should serve every size\n");
    return 1;
  }
  if (accuracy < min_accuracy) {
    std::fprintf(stderr, "test accuracy %.4f is below %.4f\n", accuracy, min_accuracy);
    return 1;
  }
  return 0;
}
