// A subclassed Keras model whose call() branches and loops on its data with tf::cond and
// tf::while_loop: fit's traced train step (a tape inside the function) takes gradients through
// both and matches the eager steps; predict replays one graph for every batch.
#include <vector>

#include "jit/control_flow.h"
#include "keras/model.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
namespace K = tf::keras;

namespace {

// Batches with a positive mean go through one head, the others through the other; the hidden
// state is refined until its norm passes 4 (at most 5 times).
class Branchy : public K::Model {
 public:
  Branchy() : K::Model("branchy") {}
  tf::Tensor call(const tf::Tensor& x, bool) override {
    const tf::Tensor h0 = hidden(x);
    const tf::Tensor h =
        tf::while_loop([](const tf::Tensor& s) { return tf::less(tf::reduce_sum(s * s), 4.0f); },
                       [&](const tf::Tensor& s) { return tf::tanh(refine(s)) + s; }, h0,
                       {.maximum_iterations = 5});
    return tf::cond(
        tf::greater(tf::reduce_mean(x), 0.0f), [&] { return up(h); }, [&] { return down(h); });
  }
  // Builds every layer (a traced branch cannot create weights): each on a zero batch.
  void build_all() {
    const tf::Tensor h = hidden(tf::zeros({1, 3}));
    refine(h);
    up(h);
    down(h);
  }
  K::layers::Dense hidden = track(K::layers::Dense(8, "relu"));
  K::layers::Dense refine = track(K::layers::Dense(8));
  K::layers::Dense up = track(K::layers::Dense(1));
  K::layers::Dense down = track(K::layers::Dense(1));
};

}  // namespace

TEST_CASE("control flow in a model: fit's traced steps match eager steps", "[cpu][keras]") {
  tf::random::set_seed(3);
  const tf::Tensor x = tf::random::normal({96, 3}, 0.0, 0.3) + tf::constant({0.1f, 0.0f, -0.1f});
  const tf::Tensor y = tf::reduce_sum(x * x, {1}, true);
  std::vector<std::vector<tf::Tensor>> weights;
  std::vector<std::vector<double>> losses;
  for (bool eager : {false, true}) {
    tf::random::set_seed(11);
    Branchy model;
    model.build_all();
    model.compile(K::optimizers::SGD(0.05), K::losses::MeanSquaredError(), {},
                  {.run_eagerly = eager});
    const K::History h =
        model.fit(x, y, {.epochs = 4, .batch_size = 8, .verbose = 0, .shuffle = false});
    losses.push_back(h.history.at("loss"));
    weights.push_back(model.get_weights());
    if (!eager) {
      // One graph for every batch of 8, whatever branch and iteration count it takes.
      const tf::Tensor p = model.predict(x, {.batch_size = 8});
      CHECK(p.shape() == tf::TensorShape({96, 1}));
      CHECK(losses[0].back() < losses[0].front());
    }
  }
  REQUIRE(weights[0].size() == weights[1].size());
  for (size_t i = 0; i < weights[0].size(); ++i)
    tf::testing::check_close(weights[0][i], weights[1][i], 1e-5, 1e-6);
  for (size_t e = 0; e < losses[0].size(); ++e)
    CHECK(losses[0][e] == Approx(losses[1][e]).epsilon(1e-5));
}
