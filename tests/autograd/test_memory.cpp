// Memory discipline of the tape, measured with the allocator's statistics: for a 20-layer MLP,
// the peak during forward plus backward stays within 1.25x of the activations that backward
// must keep (one tensor per layer: each ReLU output, which is also the next matmul's input).
#include <vector>

#include "autograd/tape.h"
#include "core/allocator.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/linalg.h"
#include "ops/nn.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "support/testing.h"

namespace tf = tapeflow;

TEST_CASE("tape memory: 20-layer MLP peak within 1.25x of the kept activations", "[autograd]") {
  tf::DeviceScope scope("/CPU:0");
  const int64_t batch = 2048, width = 128, layers = 20;
  std::vector<tf::Variable> vars;
  for (int l = 0; l < layers; ++l) {
    vars.emplace_back(tf::random::normal({width, width}, 0.0, 0.1, tf::float32, 10 + l), "w");
    vars.emplace_back(tf::zeros({width}), "b");
  }
  tf::Tensor x = tf::random::normal({batch, width}, 0.0, 1.0, tf::float32, 1);

  tf::Allocator& a = tf::cpu_allocator();
  const int64_t base = a.stats().bytes_in_use;
  a.reset_peak();
  std::vector<tf::Tensor> grads;
  {
    tf::GradientTape tape;
    tf::Tensor h = x;
    for (int l = 0; l < layers; ++l)
      h = tf::nn::relu(tf::nn::bias_add(tf::matmul(h, vars[2 * l]), vars[2 * l + 1]));
    tf::Tensor loss = tf::reduce_sum(h);
    h = tf::Tensor();
    grads = tape.gradient(loss, vars);
  }
  const int64_t peak = a.stats().peak_bytes_in_use - base;
  const int64_t kept = layers * batch * width * 4;
  INFO("peak " << peak << " bytes above the inputs and weights; kept activations " << kept);
  CHECK(peak <= kept * 5 / 4);
  CHECK(peak >= kept);  // sanity: the activations were really kept
  REQUIRE(grads.size() == vars.size());
  for (const auto& g : grads) CHECK(g.defined());
  // After the step only the gradients remain.
  int64_t grad_bytes = 0;
  for (const auto& g : grads) grad_bytes += static_cast<int64_t>(g.nbytes());
  CHECK(a.stats().bytes_in_use - base == grad_bytes);
}
