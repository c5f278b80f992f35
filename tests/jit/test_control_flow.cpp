// tf::cond and tf::while_loop (jit/control_flow.h): eager control flow, traced sub-graphs that
// choose or repeat at every call, gradients through both (eager, a tape inside the traced
// function, a tape around the call) against central differences, variables read and written
// inside, nesting, and the errors.
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "autograd/tape.h"
#include "autograd/variable.h"
#include "core/device.h"
#include "core/error.h"
#include "jit/control_flow.h"
#include "jit/cuda_graph.h"
#include "jit/function.h"
#include "jit/py_function.h"
#include "ops/binary.h"
#include "ops/debugging.h"
#include "ops/factory.h"
#include "ops/linalg_more.h"
#include "ops/movement.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
using tf::testing::check_close;
using tf::testing::check_values;

namespace {

// The function the cond cases compute: sin(x) * w where sum(x) > 0, else x * x - w.
tf::Tensor branchy(const tf::Tensor& x, const tf::Tensor& w) {
  return tf::cond(
      tf::greater(tf::reduce_sum(x), 0.0), [&] { return tf::sin(x) * w; },
      [&] { return x * x - w; });
}
tf::Tensor branchy_reference(const tf::Tensor& x, const tf::Tensor& w) {
  return tf::reduce_sum(x).item<double>() > 0 ? tf::sin(x) * w : x * x - w;
}

// Doubles y (with y = y * a + sin(y)) until sum(y) >= 10, at most 50 times.
std::vector<tf::Tensor> growing(const tf::Tensor& x, const tf::Tensor& a) {
  return tf::while_loop(
      [](const std::vector<tf::Tensor>& v) { return tf::less(tf::reduce_sum(v[1]), 10.0); },
      [&](const std::vector<tf::Tensor>& v) {
        return std::vector<tf::Tensor>{v[0] + 1, v[1] * a + tf::sin(v[1])};
      },
      {tf::constant(int64_t{0}), x}, {.maximum_iterations = 50});
}

}  // namespace

TEST_CASE("control flow: eager cond runs one branch, eager while_loop iterates", "[jit]") {
  int true_runs = 0, false_runs = 0;
  auto pick = [&](bool p) {
    return tf::cond(
        tf::constant(p),
        [&] {
          ++true_runs;
          return tf::constant(1.0f);
        },
        [&] {
          ++false_runs;
          return tf::constant(2.0f);
        });
  };
  check_values(pick(true), {1.0});
  check_values(pick(false), {2.0});
  CHECK(true_runs == 1);
  CHECK(false_runs == 1);

  // Several results.
  std::vector<tf::Tensor> two = tf::cond(
      tf::constant(false),
      [] {
        return std::vector<tf::Tensor>{tf::constant(1), tf::constant(2)};
      },
      [] {
        return std::vector<tf::Tensor>{tf::constant(3), tf::constant(4)};
      });
  REQUIRE(two.size() == 2);
  check_values(two[0], {3});
  check_values(two[1], {4});

  // One loop variable; several; maximum_iterations; zero iterations.
  tf::Tensor p = tf::while_loop([](const tf::Tensor& x) { return tf::less(x, 100.0f); },
                                [](const tf::Tensor& x) { return x * 3.0f; }, tf::constant(1.0f));
  check_values(p, {243.0});
  std::vector<tf::Tensor> r = growing(tf::constant({0.5, 1.0}), tf::constant(1.5));
  CHECK(r[0].item<int64_t>() > 0);
  CHECK(tf::reduce_sum(r[1]).item<double>() >= 10.0);
  tf::Tensor capped = tf::while_loop([](const tf::Tensor&) { return tf::constant(true); },
                                     [](const tf::Tensor& x) { return x + 1; },
                                     tf::constant(int32_t{0}), {.maximum_iterations = 7});
  check_values(capped, {7});
  tf::Tensor none =
      tf::while_loop([](const tf::Tensor& x) { return tf::greater(x, 5); },
                     [](const tf::Tensor& x) { return x + 1; }, tf::constant(int32_t{0}));
  check_values(none, {0});
  // Eagerly a loop variable may change its shape (as in TF's eager while_loop).
  tf::Tensor grown =
      tf::while_loop([](const tf::Tensor& x) { return tf::constant(x.shape()[0] < 4); },
                     [](const tf::Tensor& x) {
                       return tf::concat({x, x}, 0);
                     },
                     tf::constant({1.0f}));
  CHECK(grown.shape() == tf::TensorShape{4});
}

TEST_CASE("control flow: a traced cond picks its branch at every call", "[jit][cuda]") {
  for (tf::Device dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    int traced = 0;
    auto f = tf::function([&](const tf::Tensor& x, const tf::Tensor& w) {
      ++traced;
      return branchy(x, w);
    });
    const tf::Tensor w = tf::constant({0.5, -2.0, 3.0});
    for (const auto& values :
         {std::vector<double>{0.3, 0.4, -0.1}, std::vector<double>{-1.0, 0.2, 0.1},
          std::vector<double>{2, 2, 2}, std::vector<double>{-3, 0, 0}}) {
      const tf::Tensor x = tf::constant(values);
      const tf::Tensor y = f(x, w);
      check_close(y, branchy_reference(x, w), 1e-12, 1e-12);
      CHECK(y.device() == dev.to_string());
    }
    CHECK(f.tracing_count() == 1);
    CHECK(traced == 1);
    const std::string dump =
        f.get_concrete_function(tf::TensorSpec({3}, tf::float64), tf::TensorSpec({3}, tf::float64))
            .graph()
            .to_string();
    CHECK(dump.find("cond(") != std::string::npos);
    // The predicate is read on the host: no CUDA-graph capture.
    CHECK(tf::jit::capture_blocker(f.get_concrete_function(tf::TensorSpec({3}, tf::float64),
                                                           tf::TensorSpec({3}, tf::float64))
                                       .graph(),
                                   nullptr)
              .find("cond reads its predicate") != std::string::npos);
  }
}

TEST_CASE("control flow: only the branch taken runs its side effects", "[jit]") {
  tf::Variable v(tf::constant(0.0f), "v");
  auto f = tf::function([&](const tf::Tensor& p) {
    return tf::cond(
        p,
        [&] {
          v.assign_add(tf::constant(1.0f));
          return v.value() * 10.0f;
        },
        [&] {
          v.assign_sub(tf::constant(0.5f));
          return v.value();
        });
  });
  check_values(f(tf::constant(true)), {10.0});
  check_values(f(tf::constant(true)), {20.0});
  check_values(f(tf::constant(false)), {1.5});
  check_values(v.value(), {1.5});
  CHECK(f.tracing_count() == 1);
  // A branch without results (only effects).
  auto g = tf::function([&](const tf::Tensor& p) {
    tf::cond(
        p,
        [&] {
          v.assign(tf::constant(7.0f));
          return std::vector<tf::Tensor>{};
        },
        [&] { return std::vector<tf::Tensor>{}; });
    return v.value() + 0.0f;
  });
  check_values(g(tf::constant(false)), {1.5});
  check_values(g(tf::constant(true)), {7.0});
}

TEST_CASE("control flow: cond gradients, eager and traced, match central differences",
          "[jit][cuda]") {
  const std::vector<double> pos{0.3, 0.4, -0.1}, neg{-1.0, 0.2, 0.1};
  const tf::Tensor w = tf::constant({0.5, -2.0, 3.0});
  // Eager (the tape records the branch's ops).
  for (const auto& at : {pos, neg})
    tf::testing::check_gradient([&](const tf::Tensor& x) { return branchy(x, w); }, {3}, at);
  for (tf::Device dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    const tf::Tensor wd = tf::constant({0.5, -2.0, 3.0});
    // A tape around the call: it records the cond node, whose vjp re-runs the branch taken.
    auto f = tf::function([&](const tf::Tensor& x) { return branchy(x, wd); });
    for (const auto& at : {pos, neg})
      tf::testing::check_gradient([&](const tf::Tensor& x) { return f(x); }, {3}, at);
    // A tape inside the function (a train step): the gradient is traced as a cond of the
    // branches' gradients; gradients reach both x and the captured w.
    auto step = tf::function([&](const tf::Tensor& x, const tf::Tensor& w2) {
      tf::GradientTape tape;
      tape.watch(x);
      tape.watch(w2);
      const tf::Tensor loss = tf::reduce_sum(branchy(x, w2) * x);
      return tape.gradient(loss, std::vector<tf::Tensor>{x, w2});
    });
    for (const auto& at : {pos, neg}) {
      const tf::Tensor x = tf::constant(at);
      tf::GradientTape tape;
      tape.watch(x);
      tape.watch(wd);
      const tf::Tensor loss = tf::reduce_sum(branchy_reference(x, wd) * x);
      const std::vector<tf::Tensor> want = tape.gradient(loss, std::vector<tf::Tensor>{x, wd});
      const std::vector<tf::Tensor> got = step(x, wd);
      check_close(got[0], want[0], 1e-12, 1e-12);
      check_close(got[1], want[1], 1e-12, 1e-12);
    }
    CHECK(step.tracing_count() == 1);
  }
}

TEST_CASE("control flow: a variable read only inside a branch or a loop gets its gradient",
          "[jit]") {
  tf::Variable w(tf::constant({1.5, -0.5}), "w");
  auto step = tf::function([&](const tf::Tensor& x) {
    tf::GradientTape tape;
    const tf::Tensor y = tf::cond(
        tf::greater(tf::reduce_sum(x), 0.0), [&] { return tf::reduce_sum(w.value() * x); },
        [&] { return tf::reduce_sum(x); });
    const tf::Tensor z =
        tf::while_loop([](const tf::Tensor& s) { return tf::less(tf::reduce_sum(s), 5.0); },
                       [&](const tf::Tensor& s) { return s + w.value() * w.value() + 1.0; }, x);
    return tape.gradient(y + tf::reduce_sum(z), w);
  });
  auto reference = [&](const tf::Tensor& x) {
    tf::GradientTape tape;
    tf::Tensor y =
        tf::reduce_sum(x).item<double>() > 0 ? tf::reduce_sum(w.value() * x) : tf::reduce_sum(x);
    tf::Tensor s = x;
    while (tf::reduce_sum(s).item<double>() < 5.0) s = s + w.value() * w.value() + 1.0;
    return tape.gradient(y + tf::reduce_sum(s), w);
  };
  for (const auto& at : {std::vector<double>{0.5, 0.25}, std::vector<double>{-2.0, 0.5}}) {
    const tf::Tensor x = tf::constant(at);
    check_close(step(x), reference(x), 1e-12, 1e-12);
  }
  CHECK(step.tracing_count() == 1);
}

TEST_CASE("control flow: a traced while_loop runs as many iterations as its data asks",
          "[jit][cuda]") {
  for (tf::Device dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    // Collatz steps: the iteration count depends on the value.
    auto steps = tf::function([](const tf::Tensor& n) {
      return tf::while_loop(
          [](const std::vector<tf::Tensor>& v) { return tf::greater(v[0], int64_t{1}); },
          [](const std::vector<tf::Tensor>& v) {
            const tf::Tensor even = tf::equal(tf::floormod(v[0], int64_t{2}), int64_t{0});
            return std::vector<tf::Tensor>{
                tf::where(even, tf::floordiv(v[0], int64_t{2}), v[0] * int64_t{3} + int64_t{1}),
                v[1] + int64_t{1}};
          },
          {n, tf::constant(int64_t{0})})[1];
    });
    auto collatz = [](int64_t n) {
      int64_t s = 0;
      for (; n > 1; ++s) n = n % 2 == 0 ? n / 2 : 3 * n + 1;
      return s;
    };
    for (int64_t n : {1, 6, 7, 27, 97}) {
      const tf::Tensor s = steps(tf::constant(n));
      CHECK(s.item<int64_t>() == collatz(n));
      CHECK(s.device() == dev.to_string());
    }
    CHECK(steps.tracing_count() == 1);

    // maximum_iterations, and a loop that never enters its body.
    auto capped = tf::function([](const tf::Tensor& x, const tf::Tensor& limit) {
      return tf::while_loop([&](const tf::Tensor& y) { return tf::less(tf::reduce_max(y), limit); },
                            [](const tf::Tensor& y) { return y * 2.0f; }, x,
                            {.maximum_iterations = 4});
    });
    check_values(capped(tf::constant({1.0f, 3.0f}), tf::constant(100.0f)), {16, 48});
    check_values(capped(tf::constant({1.0f, 3.0f}), tf::constant(10.0f)), {4, 12});
    check_values(capped(tf::constant({1.0f, 3.0f}), tf::constant(2.0f)), {1, 3});
    CHECK(capped.tracing_count() == 1);
    const std::string dump = capped
                                 .get_concrete_function(tf::TensorSpec({2}, tf::float32),
                                                        tf::TensorSpec({}, tf::float32))
                                 .graph()
                                 .to_string();
    CHECK(dump.find("while_loop(") != std::string::npos);
    CHECK(dump.find("maximum_iterations=4") != std::string::npos);
  }
}

TEST_CASE("control flow: while_loop gradients, eager and traced, match central differences",
          "[jit][cuda]") {
  const std::vector<double> x0{0.5, 1.0}, x1{2.0, 3.0}, x2{6.0, 5.0};
  // Eager: the tape records every iteration.
  // (x2 runs no iteration: the result does not depend on a, whose gradient is then undefined
  // eagerly, TF's None, and zeros traced.)
  for (const auto& at : {x0, x1, x2}) {
    tf::testing::check_gradient(
        [&](const tf::Tensor& x) { return growing(x, tf::constant(1.25))[1]; }, {2}, at);
    if (at != x2)
      tf::testing::check_gradient(
          [&](const tf::Tensor& a) { return growing(tf::constant(at), tf::reshape(a, {}))[1]; },
          {1}, {1.25});
  }
  for (tf::Device dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    // A tape around the call: the loop keeps each iteration's variables for the vjp.
    auto f =
        tf::function([&](const tf::Tensor& x, const tf::Tensor& a) { return growing(x, a)[1]; });
    for (const auto& at : {x0, x1, x2}) {
      INFO("x = " << at[0] << ", " << at[1]);
      tf::testing::check_gradient([&](const tf::Tensor& x) { return f(x, tf::constant(1.25)); },
                                  {2}, at);
      tf::testing::check_gradient(
          [&](const tf::Tensor& a) { return f(tf::constant(at), tf::reshape(a, {})); }, {1},
          {1.25});
    }
    // A tape inside the function.
    auto step = tf::function([&](const tf::Tensor& x, const tf::Tensor& a) {
      tf::GradientTape tape;
      tape.watch(x);
      tape.watch(a);
      const std::vector<tf::Tensor> r = growing(x, a);
      return tape.gradient(tf::reduce_sum(r[1] * r[1]), std::vector<tf::Tensor>{x, a});
    });
    for (const auto& at : {x0, x1, x2}) {
      const tf::Tensor x = tf::constant(at), a = tf::constant(1.25);
      tf::GradientTape tape;
      tape.watch(x);
      tape.watch(a);
      const std::vector<tf::Tensor> r = growing(x, a);  // eager
      const std::vector<tf::Tensor> want =
          tape.gradient(tf::reduce_sum(r[1] * r[1]), std::vector<tf::Tensor>{x, a});
      const std::vector<tf::Tensor> got = step(x, a);
      check_close(got[0], want[0], 1e-12, 1e-12);
      if (at == x2) {  // no iteration: eagerly None, traced zeros (see above)
        CHECK_FALSE(want[1].defined());
        check_values(got[1], {0.0});
      } else {
        check_close(got[1], want[1], 1e-12, 1e-12);
      }
    }
    CHECK(step.tracing_count() == 1);
  }
}

TEST_CASE("control flow: cond and while_loop nest", "[jit]") {
  // Inside the loop, a cond on the counter; inside a cond, a loop.
  auto f = tf::function([](const tf::Tensor& x, const tf::Tensor& n) {
    const std::vector<tf::Tensor> r = tf::while_loop(
        [&](const std::vector<tf::Tensor>& v) { return tf::less(v[0], n); },
        [&](const std::vector<tf::Tensor>& v) {
          const tf::Tensor odd = tf::equal(tf::floormod(v[0], int64_t{2}), int64_t{1});
          const tf::Tensor y = tf::cond(
              odd, [&] { return v[1] * x; },
              [&] {
                return tf::while_loop(
                    [](const tf::Tensor& z) { return tf::less(tf::reduce_sum(z), 50.0); },
                    [](const tf::Tensor& z) { return z + 7.0; }, v[1]);
              });
          return std::vector<tf::Tensor>{v[0] + int64_t{1}, y};
        },
        {tf::constant(int64_t{0}), tf::constant({1.0, 2.0})});
    return r[1];
  });
  auto reference = [](const tf::Tensor& x, int64_t n) {
    tf::Tensor y = tf::constant({1.0, 2.0});
    for (int64_t i = 0; i < n; ++i) {
      if (i % 2 == 1) {
        y = y * x;
      } else {
        while (tf::reduce_sum(y).item<double>() < 50.0) y = y + 7.0;
      }
    }
    return y;
  };
  const tf::Tensor x = tf::constant({0.5, 1.5});
  for (int64_t n : {0, 1, 2, 5}) check_close(f(x, tf::constant(n)), reference(x, n), 1e-12, 0);
  CHECK(f.tracing_count() == 1);
  // Gradients through both levels (tape around the call).
  tf::testing::check_gradient([&](const tf::Tensor& xv) { return f(xv, tf::constant(int64_t{4})); },
                              {2}, {0.5, 1.5});
}

TEST_CASE("control flow: loops in a function with None dimensions", "[jit]") {
  auto f = tf::function(
      [](const tf::Tensor& x) {
        return tf::while_loop(
            [](const tf::Tensor& y) { return tf::less(tf::reduce_sum(y), 100.0f); },
            [](const tf::Tensor& y) { return y * 2.0f; }, x);
      },
      {.input_signature = {tf::TensorSpec({tf::None}, tf::float32)}});
  check_values(f(tf::constant({1.0f, 2.0f})), {64, 128});
  check_values(f(tf::constant({1.0f, 2.0f, 3.0f})), {32, 64, 96});
  check_values(f(tf::constant({3.0f, 2.0f})), {96, 64});
  check_values(f(tf::constant({1.0f, 1.0f, 1.0f, 1.0f, 1.0f})), {32, 32, 32, 32, 32});
  // The loop variable's None dimension reaches the condition and the body, which are
  // specialised per length: one trace.
  CHECK(f.tracing_count() == 1);
}

namespace {

// A loop over a (batch, 3) state with a counter and a captured weight, then a cond and a
// switch_case on the data: every sub-graph sees the batch dimension.
tf::Tensor batch_model(const tf::Tensor& x, const tf::Tensor& w) {
  const std::vector<tf::Tensor> r =
      tf::while_loop([](const std::vector<tf::Tensor>& v) { return tf::less(v[0], 3); },
                     [&](const std::vector<tf::Tensor>& v) {
                       return std::vector<tf::Tensor>{v[0] + 1, tf::tanh(v[1] * w + 0.1)};
                     },
                     {tf::constant(0), x});
  const tf::Tensor h = r[1];
  const tf::Tensor y = tf::cond(
      tf::greater(tf::reduce_sum(h), 0.0), [&] { return h * w; },
      [&] { return tf::square(h) - w; });
  const tf::Tensor i = tf::cast(tf::greater(tf::reduce_mean(y), 0.0), tf::int32);
  return tf::switch_case(i, {[&] { return y * 2.0; }, [&] { return tf::sin(y) * w; }});
}

}  // namespace

TEST_CASE("control flow: one trace serves every size of a None batch, gradients included",
          "[jit][cuda]") {
  for (tf::Device dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor w = tf::constant({0.5, -1.0, 0.75});
    auto loss = [](const std::vector<tf::Tensor>& xw) {
      return tf::reduce_sum(tf::square(batch_model(xw[0], xw[1])));
    };
    auto forward =
        tf::function(batch_model, {.input_signature = {tf::TensorSpec({tf::None, 3}, tf::float64),
                                                       tf::TensorSpec({3}, tf::float64)}});
    // A tape inside the function: the loop's gradient node has the batch dimension too.
    auto step = tf::function(
        [&](const tf::Tensor& x, const tf::Tensor& w_) {
          return tf::testing::value_and_gradients(loss, {x, w_});
        },
        {.input_signature = {tf::TensorSpec({tf::None, 3}, tf::float64),
                             tf::TensorSpec({3}, tf::float64)}});
    for (int64_t batch : {2, 5, 1, 3, 4}) {
      INFO("batch " << batch);
      // Signs vary with the batch: both branches of the cond and of the switch_case run.
      std::vector<double> v = tf::testing::random_values(static_cast<size_t>(batch * 3), -1, 1,
                                                         static_cast<unsigned>(batch));
      if (batch % 2 == 0)
        for (double& e : v) e = std::abs(e);
      const tf::Tensor x = tf::constant(v, {batch, 3});
      check_close(forward(x, w), batch_model(x, w), 1e-12, 1e-12);
      const std::vector<tf::Tensor> want = tf::testing::value_and_gradients(loss, {x, w});
      const std::vector<tf::Tensor> got = step(x, w);
      // A tape around the call of the shape-generic function.
      const std::vector<tf::Tensor> around = tf::testing::value_and_gradients(
          [&](const std::vector<tf::Tensor>& xw) {
            return tf::reduce_sum(tf::square(forward(xw[0], xw[1])));
          },
          {x, w});
      for (size_t k = 0; k < want.size(); ++k) {
        check_close(got[k], want[k], 1e-11, 1e-11);
        check_close(around[k], want[k], 1e-11, 1e-11);
      }
    }
    CHECK(forward.tracing_count() == 1);
    CHECK(step.tracing_count() == 1);
    // The dump shows the open batch on the node's results.
    const std::string dump = forward
                                 .get_concrete_function(tf::TensorSpec({tf::None, 3}, tf::float64),
                                                        tf::TensorSpec({3}, tf::float64))
                                 .graph()
                                 .to_string();
    CHECK(dump.find("while_loop") != std::string::npos);
    CHECK(dump.find("(None, 3)") != std::string::npos);
  }
}

TEST_CASE("control flow: a body that computes a shape from a None dimension traces per shape",
          "[jit]") {
  // The reshape's target is a constant of the traced batch: the sub-graphs differ between the
  // probes, so each batch size gets a trace of its own, with the right values.
  auto f = tf::function(
      [](const tf::Tensor& x) {
        return tf::while_loop([](const std::vector<tf::Tensor>& v) { return tf::less(v[0], 2); },
                              [](const std::vector<tf::Tensor>& v) {
                                const int64_t n = v[1].shape()[0];
                                return std::vector<tf::Tensor>{
                                    v[0] + 1,
                                    tf::reshape(tf::reshape(v[1], {n * 2}) * 2.0f, {n, 2})};
                              },
                              {tf::constant(0), x})[1];
      },
      {.input_signature = {tf::TensorSpec({tf::None, 2}, tf::float32)}});
  check_values(f(tf::constant({{1.0f, 2.0f}, {3.0f, 4.0f}})), {4, 8, 12, 16});
  check_values(f(tf::constant({{1.0f, 2.0f}, {3.0f, 4.0f}, {5.0f, 6.0f}})), {4, 8, 12, 16, 20, 24});
  check_values(f(tf::constant({{1.0f, -1.0f}})), {4, -4});
  CHECK(f.tracing_count() > 1);
}

TEST_CASE("control flow: errors name the op, the shapes and the dtypes", "[jit]") {
  using tf::testing::require_error;
  // The predicate.
  require_error(
      [] {
        tf::cond(
            tf::constant(1.0f), [] { return tf::constant(1); }, [] { return tf::constant(2); });
      },
      {"[cond]", "pred must be a scalar bool tensor", "float32 ()"});
  require_error(
      [] {
        tf::cond(
            tf::constant({true, false}), [] { return tf::constant(1); },
            [] { return tf::constant(2); });
      },
      {"[cond]", "bool (2,)"});
  require_error(
      [] {
        tf::while_loop([](const tf::Tensor& x) { return x; }, [](const tf::Tensor& x) { return x; },
                       tf::constant(1));
      },
      {"[while_loop]", "cond's result must be a scalar bool tensor", "int32 ()"});
  require_error(
      [] {
        tf::while_loop([](const tf::Tensor& x) { return tf::less(x, 3); },
                       [](const tf::Tensor& x) { return x + 1; }, tf::constant(0),
                       {.maximum_iterations = -2});
      },
      {"[while_loop]", "maximum_iterations", "-2"});
  // Eager body that changes a dtype.
  require_error(
      [] {
        tf::while_loop([](const tf::Tensor& x) { return tf::less(x, 3.0); },
                       [](const tf::Tensor& x) { return tf::cast(x, tf::float32) + 1.0f; },
                       tf::constant(0.0));
      },
      {"[while_loop]",
       "loop variable 0 enters the body as float64 () and leaves it as float32 ()"});

  // Traced: the branches must agree, the body must keep shapes.
  auto mismatched = tf::function([](const tf::Tensor& x) {
    return tf::cond(
        tf::greater(tf::reduce_sum(x), 0.0f), [&] { return x; }, [&] { return tf::reduce_sum(x); });
  });
  require_error(
      [&] {
        mismatched(tf::constant({1.0f, 2.0f}));
      },
      {"[cond]", "result 0 is float32 (2,) in the true branch and float32 () in the false"});
  auto counts = tf::function([](const tf::Tensor& x) {
    return tf::cond(
        tf::greater(tf::reduce_sum(x), 0.0f),
        [&] {
          return std::vector<tf::Tensor>{x, x};
        },
        [&] { return std::vector<tf::Tensor>{x}; })[0];
  });
  require_error([&] { counts(tf::constant({1.0f})); },
                {"[cond]", "the true branch returns 2 tensors and the false branch 1"});
  auto growing_shape = tf::function([](const tf::Tensor& x) {
    return tf::while_loop([](const tf::Tensor& y) { return tf::less(tf::reduce_sum(y), 10.0f); },
                          [](const tf::Tensor& y) {
                            return tf::concat({y, y}, 0);
                          },
                          x);
  });
  require_error([&] { growing_shape(tf::constant({1.0f})); },
                {"[while_loop]",
                 "loop variable 0 enters the body as float32 (1,) and leaves it as "
                 "float32 (2,)",
                 "shape invariants"});
  auto wrong_count = tf::function([](const tf::Tensor& x) {
    return tf::while_loop(
        [](const std::vector<tf::Tensor>& v) { return tf::less(tf::reduce_sum(v[0]), 10.0f); },
        [](const std::vector<tf::Tensor>& v) {
          return std::vector<tf::Tensor>{v[0], v[0]};
        },
        {x})[0];
  });
  require_error([&] { wrong_count(tf::constant({1.0f})); },
                {"[while_loop]", "the body returns 2 tensors for 1 loop variables"});
}

TEST_CASE("control flow: gradients that would repeat effects are refused", "[jit]") {
  // A random op in a branch: re-running it for the gradient would draw other numbers.
  auto noisy = tf::function([](const tf::Tensor& x) {
    tf::GradientTape tape;
    tape.watch(x);
    const tf::Tensor y = tf::cond(
        tf::greater(tf::reduce_sum(x), 0.0f), [&] { return x * tf::random::uniform({2}); },
        [&] { return x; });
    return tape.gradient(tf::reduce_sum(y), x);
  });
  TF_REQUIRE_THROWS_CONTAINING(noisy(tf::constant({1.0f, 2.0f})), tf::UnimplementedError,
                               "holds random_uniform");
  // An assignment in the loop body.
  tf::Variable v(tf::constant(0.0f), "v");
  auto counting = tf::function([&](const tf::Tensor& x) {
    tf::GradientTape tape;
    tape.watch(x);
    const tf::Tensor y =
        tf::while_loop([](const tf::Tensor& s) { return tf::less(tf::reduce_sum(s), 10.0f); },
                       [&](const tf::Tensor& s) {
                         v.assign_add(tf::constant(1.0f));
                         return s * 2.0f;
                       },
                       x);
    return tape.gradient(tf::reduce_sum(y), x);
  });
  TF_REQUIRE_THROWS_CONTAINING(counting(tf::constant({1.0f, 2.0f})), tf::UnimplementedError,
                               "re-runs the body, which holds assign");
  // Without a gradient the assignments run once per iteration.
  auto forward = tf::function([&](const tf::Tensor& x) {
    return tf::while_loop([](const tf::Tensor& s) { return tf::less(tf::reduce_sum(s), 10.0f); },
                          [&](const tf::Tensor& s) {
                            v.assign_add(tf::constant(1.0f));
                            return s * 2.0f;
                          },
                          x);
  });
  v.assign(tf::constant(0.0f));
  check_values(forward(tf::constant({1.0f, 2.0f})), {4, 8});
  check_values(v.value(), {2});
  // Second order through a traced loop.
  auto inner = tf::function([](const tf::Tensor& x) {
    return tf::while_loop([](const tf::Tensor& s) { return tf::less(tf::reduce_sum(s), 10.0); },
                          [](const tf::Tensor& s) { return s * s + 1.0; }, x);
  });
  auto second = tf::function([&](const tf::Tensor& x) {
    tf::GradientTape outer;
    outer.watch(x);
    tf::GradientTape tape;
    tape.watch(x);
    const tf::Tensor g = tape.gradient(tf::reduce_sum(inner(x)), x);
    return outer.gradient(tf::reduce_sum(g), x);
  });
  TF_REQUIRE_THROWS_CONTAINING(second(tf::constant({1.0, 0.5})), tf::UnimplementedError,
                               "second-order gradients through a traced while_loop with the "
                               "tapes inside");
}

TEST_CASE("control flow: second-order gradients through a traced while_loop, tapes around",
          "[jit][cuda]") {
  // d2/dx2 of sum(loop(x)) with s -> s * s * 0.5 + sin(s) until sum(s) >= 10, and a captured a.
  auto loop = [](const tf::Tensor& x, const tf::Tensor& a) {
    return tf::while_loop([](const tf::Tensor& s) { return tf::less(tf::reduce_sum(s), 10.0); },
                          [&](const tf::Tensor& s) { return s * s * a + tf::sin(s); }, x,
                          {.maximum_iterations = 20});
  };
  for (tf::Device dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    auto f = tf::function(loop);
    for (const auto& at : {std::vector<double>{0.5, 0.75}, std::vector<double>{1.5, 0.25}}) {
      const tf::Tensor x = tf::constant(at), a = tf::constant(0.5);
      auto hessian_vector = [&](bool traced) {
        tf::GradientTape outer;
        outer.watch(x);
        outer.watch(a);
        tf::Tensor g;
        {
          tf::GradientTape inner;
          inner.watch(x);
          inner.watch(a);
          const tf::Tensor y = traced ? f(x, a) : loop(x, a);
          g = inner.gradient(tf::reduce_sum(y * y), x);
        }
        return outer.gradient(tf::reduce_sum(g * tf::constant({1.0, -2.0})),
                              std::vector<tf::Tensor>{x, a});
      };
      const std::vector<tf::Tensor> want = hessian_vector(false), got = hessian_vector(true);
      check_close(got[0], want[0], 1e-10, 1e-10);
      check_close(got[1], want[1], 1e-10, 1e-10);
    }
    // Third order as well (the second-order loop differentiates itself again).
    const tf::Tensor x = tf::constant({0.5, 0.75}), a = tf::constant(0.5);
    auto third = [&](bool traced) {
      tf::GradientTape t3;
      t3.watch(x);
      tf::Tensor g2;
      {
        tf::GradientTape t2;
        t2.watch(x);
        tf::Tensor g1;
        {
          tf::GradientTape t1;
          t1.watch(x);
          g1 = t1.gradient(tf::reduce_sum(traced ? f(x, a) : loop(x, a)), x);
        }
        g2 = t2.gradient(tf::reduce_sum(g1), x);
      }
      return t3.gradient(tf::reduce_sum(g2), x);
    };
    check_close(third(true), third(false), 1e-9, 1e-9);
  }
}

TEST_CASE("control flow: a loop's condition reads what its body assigns", "[jit]") {
  tf::Variable v(tf::constant(0.0f), "v");
  tf::Variable scale(tf::constant(2.0f), "scale");
  auto f = tf::function([&](const tf::Tensor& x) {
    return tf::while_loop([&](const tf::Tensor&) { return tf::less(v.value(), 5.0f); },
                          [&](const tf::Tensor& y) {
                            v.assign_add(tf::constant(1.0f));
                            return y * scale.value();  // read, never written: hoisted
                          },
                          x);
  });
  check_values(f(tf::constant(1.0f)), {32});
  check_values(v.value(), {5});
  v.assign(tf::constant(3.0f));
  scale.assign(tf::constant(3.0f));
  check_values(f(tf::constant(1.0f)), {9});
  check_values(v.value(), {5});
  CHECK(f.tracing_count() == 1);
}

TEST_CASE("control flow: second-order gradients through a traced cond", "[jit]") {
  // d2/dx2 of sum(cond(sum(x) > 0, sin(x) * x, x^3)).
  auto f = tf::function([](const tf::Tensor& x) {
    return tf::cond(
        tf::greater(tf::reduce_sum(x), 0.0), [&] { return tf::sin(x) * x; },
        [&] { return x * x * x; });
  });
  for (const auto& at : {std::vector<double>{0.5, 1.0}, std::vector<double>{-1.0, 0.25}}) {
    const tf::Tensor x = tf::constant(at);
    tf::GradientTape outer;
    outer.watch(x);
    tf::Tensor g;
    {
      tf::GradientTape inner;
      inner.watch(x);
      g = inner.gradient(tf::reduce_sum(f(x)), x);
    }
    const tf::Tensor h = outer.gradient(tf::reduce_sum(g), x);
    std::vector<double> want;
    for (double v : at)
      want.push_back(at[0] + at[1] > 0 ? 2 * std::cos(v) - v * std::sin(v) : 6 * v);
    check_values(h, want, 1e-12, 1e-12);
  }
}

TEST_CASE("control flow: the docs/function.md example", "[jit]") {
  auto f = tf::function([&](const tf::Tensor& x) {
    auto r = tf::while_loop(
        [](const std::vector<tf::Tensor>& v) {
          return tf::greater(tf::reduce_max(tf::abs(v[1])), 1e-6);
        },
        [&](const std::vector<tf::Tensor>& v) {
          tf::Tensor step = (v[0] - x / v[0]) * 0.5;
          return std::vector<tf::Tensor>{v[0] - step, step};
        },
        {x, tf::ones_like(x)}, {.maximum_iterations = 100});
    return tf::cond(
        tf::reduce_all(tf::greater(x, 0.0)), [&] { return r[0]; },
        [&] { return tf::zeros_like(x); });
  });
  check_values(f(tf::constant({4.0, 2.0, 9.0})), {2.0, std::sqrt(2.0), 3.0}, 1e-12, 1e-12);
  check_values(f(tf::constant({4.0, -1.0, 9.0})), {0, 0, 0});
  check_values(f(tf::constant({1e6, 1e-4, 1.0})), {1e3, 1e-2, 1.0}, 1e-12, 1e-12);
  CHECK(f.tracing_count() == 1);
}

TEST_CASE("control flow: switch_case picks a branch by index, the default out of range",
          "[jit][cuda]") {
  for (tf::Device dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    int traced = 0;
    auto f = tf::function([&](const tf::Tensor& i, const tf::Tensor& x) {
      ++traced;
      return tf::switch_case(
          i, {[&] { return x * 2.0; }, [&] { return tf::sin(x); }, [&] { return x * x; }});
    });
    const tf::Tensor x = tf::constant({0.5, -1.5});
    auto reference = [&](int32_t i) {
      return i == 0 ? x * 2.0 : i == 1 ? tf::sin(x) : x * x;  // out of range: the last
    };
    for (int32_t i : {0, 1, 2, 3, -1, 7}) {
      const tf::Tensor y = f(tf::constant(i), x);
      check_close(y, reference(i), 1e-12, 0);
      CHECK(y.device() == dev.to_string());
    }
    CHECK(f.tracing_count() == 1);
    CHECK(traced == 1);
    // With a default; several results; an int64 index; eagerly the same.
    auto g = [&](const tf::Tensor& i) {
      return tf::switch_case(i,
                             {[&] {
                                return std::vector<tf::Tensor>{x, x + 1.0};
                              },
                              [&] {
                                return std::vector<tf::Tensor>{x * 3.0, x};
                              }},
                             [&] {
                               return std::vector<tf::Tensor>{x * 0.0, x * 0.0};
                             });
    };
    auto traced_g = tf::function([&](const tf::Tensor& i) { return g(i); });
    for (int64_t i : {0, 1, 2, -3}) {
      const std::vector<double> want0 = i == 0   ? std::vector<double>{0.5, -1.5}
                                        : i == 1 ? std::vector<double>{1.5, -4.5}
                                                 : std::vector<double>{0, 0};
      check_values(traced_g(tf::constant(i))[0], want0, 1e-12, 0);
      check_values(g(tf::constant(i))[0], want0, 1e-12, 0);
    }
    CHECK(traced_g.tracing_count() == 1);
    const std::string dump =
        traced_g.get_concrete_function(tf::TensorSpec({}, tf::int64)).graph().to_string();
    CHECK(dump.find("switch_case(") != std::string::npos);
    CHECK(dump.find("the last is the default") != std::string::npos);
    // The index is read on the host: no CUDA-graph capture, also when a branch writes a
    // variable (a node that touches variables otherwise may be captured).
    tf::Variable counter(tf::constant(0.0), "counter");
    auto counting = tf::function([&](const tf::Tensor& i) {
      return tf::switch_case(i, {[&] {
                                   counter.assign_add(tf::constant(1.0));
                                   return x;
                                 },
                                 [&] { return x * 2.0; }});
    });
    CHECK(tf::jit::capture_blocker(
              counting.get_concrete_function(tf::TensorSpec({}, tf::int32)).graph(), nullptr)
              .find("switch_case reads its predicate") != std::string::npos);
    // Gradients through the branch taken (tape around the call), against central differences.
    for (int32_t i : {0, 1, 2, 5})
      tf::testing::check_gradient([&](const tf::Tensor& xv) { return f(tf::constant(i), xv); }, {2},
                                  {0.5, -1.5});
  }
  using tf::testing::require_error;
  require_error(
      [] { tf::switch_case(tf::constant(1.0f), {[] { return tf::constant(1); }}); },
      {"[switch_case]", "branch_index must be a scalar int32 or int64 tensor", "float32 ()"});
  require_error(
      [] { tf::switch_case(tf::constant(0), std::vector<std::function<tf::Tensor()>>{}); },
      {"[switch_case]", "branch_fns is empty"});
  auto mismatched = tf::function([](const tf::Tensor& i) {
    return tf::switch_case(i, {[] { return tf::constant(1.0f); }, [] { return tf::constant(1); }});
  });
  require_error([&] { mismatched(tf::constant(0)); },
                {"[switch_case]", "result 0 is float32 () in branch 0 and int32 () in branch 1"});
}

TEST_CASE("control flow: graph dumps list the sub-graphs under their node", "[jit]") {
  auto f = tf::function([](const tf::Tensor& x) {
    const tf::Tensor y =
        tf::while_loop([](const tf::Tensor& s) { return tf::less(tf::reduce_sum(s), 10.0f); },
                       [](const tf::Tensor& s) { return s * 2.0f; }, x);
    return tf::cond(
        tf::greater(tf::reduce_max(y), 0.0f), [&] { return tf::exp(y); }, [&] { return y; });
  });
  const std::string dump =
      f.get_concrete_function(tf::TensorSpec({2}, tf::float32)).graph().to_string();
  INFO(dump);
  for (const char* part : {"while_loop(", "  %0 cond:\n", "  %0 body:\n",
                           "    %arg0 : float32 (2,)", "= multiply(%arg0, %const0)", "cond(",
                           " true branch:\n", " false branch:\n", "= exp(%arg0)"})
    CHECK(dump.find(part) != std::string::npos);
}

TEST_CASE("control flow: expm traced squares as often as each call's norms ask", "[jit][cuda]") {
  for (tf::Device dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    auto f = tf::function([](const tf::Tensor& a) { return tf::linalg::expm(a); });
    // 1-norms 0.35, 7.5 and 60: zero, one and four squarings in float64 (one graph).
    for (double scale : {0.05, 1.0, 8.0}) {
      const tf::Tensor a =
          tf::constant({{1.0, -2.0, 3.0}, {0.5, 1.5, -1.0}, {2.0, 0.0, -3.0}}) * scale;
      check_close(f(a), tf::linalg::expm(a), 1e-13, 1e-13);
      check_close(f(tf::cast(a, tf::float32)), tf::linalg::expm(tf::cast(a, tf::float32)), 1e-6,
                  1e-6);
    }
    // A batch with different counts per matrix.
    const tf::Tensor batch =
        tf::reshape(tf::constant({0.1, 0.2, -0.3, 0.05, 6.0, -5.0, 4.0, -3.0}), {2, 2, 2});
    check_close(f(batch), tf::linalg::expm(batch), 1e-13, 1e-13);
    CHECK(f.tracing_count() == 3);  // float64 (3, 3), float32 (3, 3), float64 (2, 2, 2)
    // The gradient through the traced loop (a tape around the call) equals the eager one.
    const tf::Tensor a = tf::constant({{1.0, -2.0}, {0.5, 1.5}}) * 3.0;
    const tf::Tensor w = tf::constant({{0.3, -1.0}, {2.0, 0.5}});
    auto grad = [&](bool traced) {
      tf::GradientTape tape;
      tape.watch(a);
      return tape.gradient(tf::reduce_sum((traced ? f(a) : tf::linalg::expm(a)) * w), a);
    };
    check_close(grad(true), grad(false), 1e-12, 1e-12);
  }
}

TEST_CASE("py_function: C++ code at every call of a traced function, with gradients",
          "[jit][cuda]") {
  for (tf::Device dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    int calls = 0, traced = 0;
    // x * x * scale + a count of the calls so far: the count is C++ state.
    auto g = [&](const std::vector<tf::Tensor>& in) {
      ++calls;
      return in[0] * in[0] * in[1] + static_cast<double>(calls);
    };
    auto f = tf::function([&](const tf::Tensor& x, const tf::Tensor& s) {
      ++traced;
      return tf::py_function(g, {x, s}, tf::TensorSpec({2}, tf::float64)) + 1.0;
    });
    const tf::Tensor x = tf::constant({1.5, -2.0}), s = tf::constant(0.5);
    check_values(f(x, s), {1.125 + 1 + 1, 2 + 1 + 1}, 1e-12, 0);  // tracing does not run g
    const int after_first = calls;
    const double before = after_first;
    check_values(f(x, s), {1.125 + before + 2, 2 + before + 2}, 1e-12, 0);
    CHECK(calls == after_first + 1);
    CHECK(traced == 1);
    CHECK(f(x, s).device() == dev.to_string());
    const std::string dump =
        f.get_concrete_function(tf::TensorSpec({2}, tf::float64), tf::TensorSpec({}, tf::float64))
            .graph()
            .to_string();
    CHECK(dump.find("py_function(") != std::string::npos);
    // Gradients through the call (a tape around it, and inside the function), against the
    // closed form 2 x s and x^2.
    auto h = tf::function([&](const tf::Tensor& xv, const tf::Tensor& sv) {
      return tf::reduce_sum(
          tf::py_function([](const std::vector<tf::Tensor>& in) { return tf::sin(in[0]) * in[1]; },
                          {xv, sv}, tf::TensorSpec({2}, tf::float64)));
    });
    tf::testing::check_gradient([&](const tf::Tensor& xv) { return h(xv, s); }, {2}, {1.5, -2.0});
    auto step = tf::function([&](const tf::Tensor& xv, const tf::Tensor& sv) {
      tf::GradientTape tape;
      tape.watch(xv);
      tape.watch(sv);
      const tf::Tensor y =
          tf::py_function([](const std::vector<tf::Tensor>& in) { return in[0] * in[0] * in[1]; },
                          {xv, sv}, tf::TensorSpec({2}, tf::float64));
      return tape.gradient(tf::reduce_sum(y), std::vector<tf::Tensor>{xv, sv});
    });
    const std::vector<tf::Tensor> grads = step(x, s);
    check_values(grads[0], {1.5, -2.0}, 1e-12, 0);  // 2 x s
    check_values(grads[1], {6.25}, 1e-12, 0);       // sum x^2
    // Results checked against Tout at every call.
    auto wrong = tf::function([](const tf::Tensor& xv) {
      return tf::py_function(
          [](const std::vector<tf::Tensor>& in) { return tf::cast(in[0], tf::float32); }, {xv},
          tf::TensorSpec({2}, tf::float64));
    });
    tf::testing::require_error([&] { wrong(x); }, {"[py_function]",
                                                   "fn's result 0 is float32 (2,), but Tout[0] is "
                                                   "float64 (2,)"});
  }
  tf::testing::require_error(
      [] {
        auto f = tf::function([](const tf::Tensor& x) {
          return tf::py_function([](const std::vector<tf::Tensor>& in) { return in[0]; }, {x},
                                 tf::TensorSpec({tf::None}, tf::float32));
        });
        f(tf::constant({1.0f}));
      },
      {"[py_function]", "Tout[0] is float32 (None,)", "must be known"});
  // Second order through the traced call (tapes around it): d2/dx2 sum(sin(x) x).
  auto sx = tf::function([](const tf::Tensor& x) {
    return tf::py_function([](const std::vector<tf::Tensor>& in) { return tf::sin(in[0]) * in[0]; },
                           {x}, tf::TensorSpec({2}, tf::float64));
  });
  const tf::Tensor x2 = tf::constant({0.5, -1.25});
  tf::GradientTape outer;
  outer.watch(x2);
  tf::Tensor g;
  {
    tf::GradientTape inner;
    inner.watch(x2);
    g = inner.gradient(tf::reduce_sum(sx(x2)), x2);
  }
  check_values(
      outer.gradient(tf::reduce_sum(g), x2),
      {2 * std::cos(0.5) - 0.5 * std::sin(0.5), 2 * std::cos(-1.25) + 1.25 * std::sin(-1.25)},
      1e-12, 1e-12);
  // Eagerly: a plain call.
  check_values(tf::py_function([](const std::vector<tf::Tensor>& in) { return in[0] + 1.0f; },
                               {tf::constant(1.0f)}, tf::TensorSpec({}, tf::float32)),
               {2.0});
}

TEST_CASE("py_function: the docs/function.md example", "[jit]") {
  int64_t steps = 0;
  auto step = tf::function([&](const tf::Tensor& x) {
    return tf::py_function(
        [&](const std::vector<tf::Tensor>& in) {
          ++steps;  // C++ state, updated at every call
          return in[0] * 2.0f;
        },
        {x}, tf::TensorSpec({3}, tf::float32));
  });
  for (int i = 0; i < 3; ++i) check_values(step(tf::constant({1.0f, 2.0f, 3.0f})), {2, 4, 6});
  CHECK(steps == 3);
  CHECK(step.tracing_count() == 1);
}

TEST_CASE("control flow: threads replay a loop and take its gradient at once", "[jit][threads]") {
  // One traced function, four threads: the loop's node, its sub-graphs and the cached gradient
  // graph are shared (ThreadSanitizer runs this case).
  auto f = tf::function([](const tf::Tensor& x) {
    return tf::while_loop([](const tf::Tensor& s) { return tf::less(tf::reduce_sum(s), 20.0); },
                          [](const tf::Tensor& s) { return s * 1.5 + tf::sin(s); }, x);
  });
  auto reference = [](const tf::Tensor& x) {
    tf::Tensor s = x;
    while (tf::reduce_sum(s).item<double>() < 20.0) s = s * 1.5 + tf::sin(s);
    return s;
  };
  f(tf::constant({0.5, 1.0}));  // traced once, before the threads
  std::vector<std::vector<double>> got(4), want(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      const tf::Tensor x = tf::constant({0.25 * (t + 1), 1.0});
      for (int rep = 0; rep < 5; ++rep) {
        tf::GradientTape tape;
        tape.watch(x);
        const tf::Tensor y = f(x);
        const tf::Tensor g = tape.gradient(tf::reduce_sum(y), x);
        got[t] = tf::detail::to_double_vector(tf::concat({y, g}, 0));
      }
      tf::GradientTape tape;
      tape.watch(x);
      const tf::Tensor y = reference(x);
      want[t] =
          tf::detail::to_double_vector(tf::concat({y, tape.gradient(tf::reduce_sum(y), x)}, 0));
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t)
    for (size_t k = 0; k < want[t].size(); ++k)
      CHECK(got[t][k] == Approx(want[t][k]).epsilon(1e-12));
  CHECK(f.tracing_count() == 1);
}

TEST_CASE("control flow: check_numerics names the op inside a branch", "[jit]") {
  tf::debugging::enable_check_numerics();
  auto f = tf::function([](const tf::Tensor& x) {
    return tf::cond(
        tf::greater(tf::reduce_sum(x), 0.0f), [&] { return tf::log(x - 10.0f); },
        [&] { return x; });
  });
  TF_REQUIRE_THROWS_CONTAINING(f(tf::constant({1.0f, 2.0f})), tf::InvalidArgumentError, "log");
  check_values(f(tf::constant({-1.0f, -2.0f})), {-1, -2});
  tf::debugging::disable_check_numerics();
}
