// tf::cond, tf::while_loop and tf::scan inside a traced replica step under a MirroredStrategy: each
// replica runs its own graph on its own device, reads its copy of a mirrored variable inside the
// loop, takes the gradient through the loop and the cond, and the all-reduced update keeps the
// copies identical and equal to the one-device result.
#include <functional>
#include <vector>

#include "autograd/tape.h"
#include "autograd/variable.h"
#include "distribute/strategy.h"
#include "distribute_testing.h"
#include "jit/control_flow.h"
#include "jit/function.h"
#include "ops/binary.h"
#include "ops/copy.h"
#include "ops/factory.h"
#include "ops/higher_order.h"
#include "ops/movement.h"
#include "ops/reduce.h"
#include "ops/unary.h"

namespace tf = tapeflow;
namespace ds = tapeflow::distribute;
using distribute_testing::cpus;
using distribute_testing::split_cpu;

namespace {

// The loss of one batch: the rows pass through a loop that scales them by w until their mean
// square passes 2 (at most 6 times), then a cond on the batch's sum picks the head.
tf::Tensor batch_loss(const tf::Variable& w, const tf::Tensor& x) {
  const tf::Tensor h =
      tf::while_loop([](const tf::Tensor& s) { return tf::less(tf::reduce_mean(s * s), 2.0); },
                     [&](const tf::Tensor& s) { return tf::sin(s) + s * w.value(); }, x,
                     {.maximum_iterations = 6});
  return tf::cond(
      tf::greater(tf::reduce_sum(x), 0.0), [&] { return tf::reduce_sum(h * h); },
      [&] { return tf::reduce_sum(tf::abs(h)); });
}

// The loss of one batch through traced loops over its rows: scan carries a state that reads w
// at every row, map_fn squares each row against w.
tf::Tensor scan_loss(const tf::Variable& w, const tf::Tensor& x) {
  const tf::Tensor states = tf::scan(
      [&](const tf::Tensor& s, const tf::Tensor& r) { return tf::tanh(s * w.value() + r); }, x,
      tf::zeros({2}, tf::float64));
  const tf::Tensor per_row = tf::map_fn(
      [&](const tf::Tensor& r) { return tf::reduce_sum(tf::square(r - w.value())); }, states);
  return tf::reduce_sum(per_row);
}

// One SGD step (rate 0.1) on w = w0 with `loss` over two batches: on one device (the sum of
// both batches' gradients), then traced per replica on two CPUs with the gradients
// all-reduced; both copies of the mirrored w must equal the one-device result.
void check_two_replicas(
    const std::function<tf::Tensor(const tf::Variable&, const tf::Tensor&)>& loss_of,
    const std::vector<tf::Tensor>& batches, double w0) {
  split_cpu();
  tf::Variable w1(tf::constant(w0), "w");
  tf::Tensor want;
  {
    tf::GradientTape tape;
    const tf::Tensor loss = loss_of(w1, batches[0]) + loss_of(w1, batches[1]);
    want = w1.value() - tape.gradient(loss, w1) * 0.1;
  }

  ds::MirroredStrategy strategy(cpus(2));
  tf::Variable w = [&] {
    auto scope = strategy.scope();
    return tf::Variable(tf::constant(w0), "w");
  }();
  auto step = tf::function([&](const tf::Tensor& x) {
    tf::GradientTape tape;
    const tf::Tensor loss = loss_of(w, x);
    const tf::Tensor g = tape.gradient(loss, w);
    const tf::Tensor total =
        tf::distribute::get_replica_context()->all_reduce(ds::ReduceOp::SUM, g);
    w.assign_sub(total * 0.1);
    return loss;
  });
  const ds::PerReplica<tf::Tensor> per_replica(std::vector<tf::Tensor>{
      batches[0], tf::detail::copy_to(batches[1], tf::Device::parse("/cpu:1"))});
  strategy.run([&](const tf::Tensor& x) { return step(x); }, per_replica);
  CHECK(step.tracing_count() == 2);  // one graph per replica device
  const std::vector<tf::Variable> copies = strategy.experimental_local_results(w);
  REQUIRE(copies.size() == 2);
  tf::testing::check_close(copies[0].value(), want, 1e-12, 1e-12);
  tf::testing::check_close(tf::detail::copy_to(copies[1].value(), tf::Device{}), want, 1e-12,
                           1e-12);
}

}  // namespace

TEST_CASE("control flow: a traced replica step with a loop and a cond on 2 replicas",
          "[cpu][distribute]") {
  check_two_replicas(
      batch_loss,
      {tf::constant({{0.5, 0.25}, {0.1, -0.2}}), tf::constant({{-0.5, -0.3}, {0.2, 0.1}})}, 1.25);
}

TEST_CASE("control flow: a traced replica step with map_fn and scan on 2 replicas",
          "[cpu][distribute]") {
  check_two_replicas(scan_loss,
                     {tf::constant({{0.5, 0.25}, {0.1, -0.2}, {0.3, 0.9}}),
                      tf::constant({{-0.5, -0.3}, {0.2, 0.1}, {1.0, 0.4}})},
                     0.75);
}
