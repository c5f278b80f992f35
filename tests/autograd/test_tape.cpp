// GradientTape behaviour, one case per rule of API.md "Variables and gradients" and TF2's tape.
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "autograd/tape.h"
#include "autograd/variable.h"
#include "core/allocator.h"
#include "core/context.h"
#include "core/error.h"
#include "ops/binary.h"
#include "ops/dispatch.h"
#include "ops/factory.h"
#include "ops/linalg.h"
#include "ops/movement.h"
#include "ops/nn.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
using tf::testing::check_values;
using tf::testing::devices_under_test;

TEST_CASE("tape: gradient of a watched tensor and of a trainable variable", "[autograd][cuda]") {
  for (tf::Device dev : devices_under_test()) {
    tf::DeviceScope scope(dev);
    tf::Tensor x = tf::constant({1.0f, 2.0f, 3.0f});
    tf::Variable w(tf::constant({0.5f, -1.0f, 2.0f}), "w");
    tf::GradientTape tape;
    tape.watch(x);
    tf::Tensor y = tf::reduce_sum(x * x * w);
    auto grads = tape.gradient(y, std::vector<tf::Variable>{w});
    REQUIRE(grads.size() == 1);
    check_values(grads[0], {1, 4, 9});
    CHECK(grads[0].device() == w.device());
    CHECK(tape.watched_variables().size() == 1);
  }
}

TEST_CASE("tape: watched_variables lists variables in the order they were made", "[autograd]") {
  // TF sorts them by id: b, a, c below however they are read or watched.
  tf::Variable b(tf::constant(1.0f), "b"), a(tf::constant(2.0f), "a"), c(tf::constant(3.0f), "c");
  auto names = [](const std::vector<tf::Variable>& vs) {
    std::vector<std::string> out;
    for (const auto& v : vs) out.push_back(v.name());
    return out;
  };
  const std::vector<std::string> made = {"b:0", "a:0", "c:0"};
  {
    tf::GradientTape tape;
    (void)(c * 1.0f);
    (void)(a * 1.0f);
    (void)(b * 1.0f);
    CHECK(names(tape.watched_variables()) == made);
  }
  {
    tf::GradientTape tape;
    tape.watch(a);
    tape.watch(c);
    tape.watch(b);
    CHECK(names(tape.watched_variables()) == made);
  }
}

TEST_CASE("tape: a non-persistent tape allows one gradient call", "[autograd]") {
  tf::Tensor x = tf::constant(3.0f);
  tf::GradientTape tape;
  tape.watch(x);
  tf::Tensor y = x * x;
  check_values(tape.gradient(y, x), {6});
  TF_REQUIRE_THROWS_CONTAINING(tape.gradient(y, x), tf::FailedPreconditionError,
                               "can only be called once on non-persistent tapes");
  CHECK(tape.num_recorded() == 0);  // everything released after the first call
}

TEST_CASE("tape: a persistent tape allows several calls", "[autograd]") {
  tf::Tensor x = tf::constant(3.0f);
  tf::GradientTape tape(tf::TapeOptions{.persistent = true});
  tape.watch(x);
  tf::Tensor y = x * x;
  tf::Tensor z = y * y;
  check_values(tape.gradient(z, x), {108});  // 4 x^3
  check_values(tape.gradient(y, x), {6});
  check_values(tape.gradient(z, y), {18});   // gradient w.r.t. an intermediate
}

TEST_CASE("tape: watch_accessed_variables=false watches only what watch() names", "[autograd]") {
  tf::Variable a(tf::constant(2.0f), "a"), b(tf::constant(5.0f), "b");
  tf::GradientTape tape(tf::TapeOptions{.persistent = true, .watch_accessed_variables = false});
  tape.watch(a);
  tf::Tensor y = tf::multiply(a, b);
  check_values(tape.gradient(y, a), {5});
  CHECK_FALSE(tape.gradient(y, b).defined());
  check_values(tape.gradient(y, b, tf::UnconnectedGradients::ZERO), {0});
}

TEST_CASE("tape: non-trainable variables are not watched", "[autograd]") {
  tf::Variable a(tf::constant(2.0f), "a", /*trainable=*/false);
  tf::GradientTape tape;
  tf::Tensor y = tf::multiply(a, 3.0f);
  CHECK_FALSE(tape.gradient(y, a).defined());
}

TEST_CASE("tape: unconnected sources give None or zeros", "[autograd]") {
  tf::Tensor x = tf::constant({1.0, 2.0}), z = tf::constant({3.0, 4.0});
  {
    tf::GradientTape tape;
    tape.watch(x);
    tape.watch(z);
    tf::Tensor y = x * 2.0;
    auto g = tape.gradient(y, std::vector<tf::Tensor>{x, z});
    check_values(g[0], {2, 2});
    CHECK_FALSE(g[1].defined());
  }
  {
    tf::GradientTape tape;
    tape.watch(x);
    tf::Tensor y = x * 2.0;
    check_values(tape.gradient(y, z, tf::UnconnectedGradients::ZERO), {0, 0});
  }
}

TEST_CASE("tape: output_gradients seed the target", "[autograd]") {
  tf::Tensor x = tf::constant({1.0f, 2.0f});
  tf::GradientTape tape;
  tape.watch(x);
  tf::Tensor y = x * x;
  check_values(tape.gradient(y, x, tf::constant({10.0f, -1.0f})), {20, -4});
  tf::GradientTape t2;
  t2.watch(x);
  tf::Tensor y2 = x * x;
  tf::testing::require_error([&] { t2.gradient(y2, x, tf::constant({1.0f, 2.0f, 3.0f})); },
                             {"output_gradients", "(3,)", "(2,)"});
}

TEST_CASE("tape: several targets give the gradient of their sum", "[autograd][cuda]") {
  for (tf::Device dev : devices_under_test()) {
    tf::DeviceScope scope(dev);
    const tf::Tensor x = tf::constant({1.0f, 2.0f});
    tf::Variable w(tf::constant({3.0f, -1.0f}), "w");
    tf::GradientTape tape(tf::TapeOptions{.persistent = true});
    tape.watch(x);
    const tf::Tensor a = x * x;                   // d/dx = 2x
    const tf::Tensor b = tf::reduce_sum(x * w);   // d/dx = w, d/dw = x
    const tf::Tensor n = tf::cast(x, tf::int32);  // an integer target adds nothing
    check_values(tape.gradient(std::vector<tf::Tensor>{a, b, n}, x), {5, 3});
    const auto gw = tape.gradient({a, b}, std::vector<tf::Variable>{w});
    REQUIRE(gw.size() == 1);
    check_values(gw[0], {1, 2});
    check_values(tape.gradient({a, b}, w), {1, 2});
    // A target listed twice counts twice; a target that another one depends on counts for both.
    check_values(tape.gradient({b, b}, x), {6, -2});
    const tf::Tensor c = a * 2.0f;
    check_values(tape.gradient({a, c}, x), {6, 12});
    // output_gradients seed each target; an undefined one means ones.
    const auto seeded = tape.gradient({a, b}, std::vector<tf::Tensor>{x, tf::Tensor(w)},
                                      {tf::constant({10.0f, 0.0f}), tf::Tensor()});
    check_values(seeded[0], {23, -1});
    CHECK_FALSE(seeded[1].defined());  // w's read here is not the one b used
    check_values(tape.gradient(std::vector<tf::Tensor>{}, x, tf::UnconnectedGradients::ZERO),
                 {0, 0});
    tf::testing::require_error(
        [&] {
          (void)tape.gradient({a, b}, std::vector<tf::Tensor>{x}, {tf::constant(1.0f)});
        },
        {"1 output_gradients for 2 targets"});
    tf::testing::require_error(
        [&] {
          (void)tape.gradient({a, b}, std::vector<tf::Tensor>{x},
                              {tf::constant({1.0f, 2.0f, 3.0f}), tf::Tensor()});
        },
        {"output_gradients has shape (3,)", "target 0 has shape (2,)"});
    tf::testing::require_error(
        [&] {
          (void)tape.gradient({a, tf::Tensor()}, x);
        },
        {"target 1 is an undefined tensor"});
  }
}

TEST_CASE("tape: integer and bool paths carry no gradient", "[autograd]") {
  tf::Tensor x = tf::constant({1.5f, -2.5f});
  tf::GradientTape tape(tf::TapeOptions{.persistent = true});
  tape.watch(x);
  tf::Tensor i = tf::cast(x, tf::int32);
  tf::Tensor back = tf::cast(i, tf::float32);
  CHECK_FALSE(tape.gradient(back, x).defined());
  // argmax has an integer output; comparisons a bool one.
  CHECK_FALSE(tape.gradient(tf::cast(tf::argmax(x), tf::float32), x).defined());
  CHECK_FALSE(tape.gradient(tf::cast(tf::greater(x, 0.0f), tf::float32), x).defined());
  // Watching an integer tensor is ignored (with a warning).
  tf::Tensor n = tf::constant({1, 2});
  tape.watch(n);
  CHECK_FALSE(tape.gradient(n * 2, n).defined());
}

namespace {
// A float op without a gradient: a copy kernel with no vjp.
struct NoGradOp final : tf::PrimitiveBase<NoGradOp> {
  const char* name() const override { return "no_grad_op"; }
  void infer(std::span<const tf::Tensor> in, std::span<tf::TensorMeta> out) const override {
    out[0] = {in[0].shape(), in[0].dtype()};
  }
  void eval_cpu(std::span<const tf::Tensor> in, std::span<tf::Tensor> out) const override {
    tf::detail::copy_bytes(out[0].raw_data(), out[0].placement(), in[0].raw_data(),
                           in[0].placement(), in[0].nbytes());
  }
  void eval_cuda(std::span<const tf::Tensor> in, std::span<tf::Tensor> out) const override {
    eval_cpu(in, out);
  }
};
}  // namespace

TEST_CASE("tape: a float op without a gradient raises an error naming it", "[autograd]") {
  tf::Tensor x = tf::constant({1.0f});
  tf::GradientTape tape;
  tape.watch(x);
  tf::Tensor y = tf::detail::dispatch(NoGradOp{}, {x * 2.0f});
  tf::testing::require_error([&] { tape.gradient(y, x); }, {"[no_grad_op]", "no gradient"});
}

TEST_CASE("tape: stop_recording and stop_gradient", "[autograd]") {
  tf::Tensor x = tf::constant(2.0f);
  tf::GradientTape tape(tf::TapeOptions{.persistent = true});
  tape.watch(x);
  tf::Tensor y = x * x;
  tf::Tensor z;
  {
    auto pause = tape.stop_recording();
    CHECK_FALSE(tape.recording());
    z = y * x;  // not recorded
  }
  CHECK(tape.recording());
  CHECK_FALSE(tape.gradient(z, x).defined());
  tf::Tensor w = tf::stop_gradient(y) * x;  // d/dx = y (held constant)
  check_values(tape.gradient(w, x), {4});
  check_values(tf::stop_gradient(y), {4});
}

TEST_CASE("tape: several tapes record independently", "[autograd]") {
  tf::Tensor x = tf::constant(3.0f), y = tf::constant(4.0f);
  tf::GradientTape tx, ty;
  tx.watch(x);
  ty.watch(y);
  tf::Tensor z = x * y;
  check_values(tx.gradient(z, x), {4});
  check_values(ty.gradient(z, y), {3});
}

TEST_CASE("tape: nested tapes give higher-order gradients", "[autograd][cuda]") {
  for (tf::Device dev : devices_under_test()) {
    tf::DeviceScope scope(dev);
    tf::Variable v(tf::constant(1.5), "v");
    tf::GradientTape outer;
    tf::Tensor dy;
    {
      tf::GradientTape inner;
      tf::Tensor y = tf::pow(v, 4.0);
      dy = inner.gradient(y, v);  // 4 v^3
    }
    check_values(dy, {4 * 1.5 * 1.5 * 1.5});
    check_values(outer.gradient(dy, v), {12 * 1.5 * 1.5});  // 12 v^2
  }
}

TEST_CASE("tape: variable updates are not recorded", "[autograd]") {
  tf::Variable x0(tf::constant(1.0f), "x0"), x1(tf::constant(2.0f), "x1");
  tf::GradientTape tape;
  x1.assign_add(x0);  // state change: no gradient flows through it (TF)
  tf::Tensor y = tf::square(x1);
  auto g = tape.gradient(y, std::vector<tf::Variable>{x0, x1});
  CHECK_FALSE(g[0].defined());
  check_values(g[1], {6});
}

TEST_CASE("tape: jacobian and batch_jacobian", "[autograd][cuda]") {
  for (tf::Device dev : devices_under_test()) {
    tf::DeviceScope scope(dev);
    tf::Tensor x = tf::constant({1.0, 2.0, 3.0});
    tf::GradientTape tape;
    tape.watch(x);
    tf::Tensor y = x * x;  // diag(2x)
    tf::Tensor j = tape.jacobian(y, x);
    CHECK(j.shape() == tf::TensorShape{3, 3});
    check_values(j, {2, 0, 0, 0, 4, 0, 0, 0, 6});

    tf::Tensor xb = tf::constant({{1.0, 2.0}, {3.0, 4.0}});  // batch of 2
    tf::Tensor w = tf::constant({{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}});
    tf::GradientTape tb;
    tb.watch(xb);
    tf::Tensor yb = tf::matmul(xb, w);  // (2, 3); per-example Jacobian = w^T
    tf::Tensor bj = tb.batch_jacobian(yb, xb);
    CHECK(bj.shape() == tf::TensorShape{2, 3, 2});
    check_values(bj, {1, 4, 2, 5, 3, 6, 1, 4, 2, 5, 3, 6});
    tf::GradientTape bad;
    bad.watch(xb);
    tf::Tensor y3 = tf::reduce_sum(xb, 0);
    tf::testing::require_error([&] { bad.batch_jacobian(tf::stack({y3, y3, y3}), xb); },
                               {"batch_jacobian", "(3, 2)", "(2, 2)"});
    // A source the target does not depend on: zeros, as TF's batch_jacobian gives.
    tf::GradientTape un;
    un.watch(xb);
    const tf::Tensor other = tf::constant({{1.0}, {2.0}}) * 3.0;
    const tf::Tensor z = un.batch_jacobian(other, xb);
    CHECK(z.shape() == tf::TensorShape{2, 1, 2});
    check_values(z, {0, 0, 0, 0});
  }
}

TEST_CASE("tape: custom_gradient replaces the recorded gradient", "[autograd]") {
  // log(1 + exp(x)) with the numerically stable gradient 1 - 1 / (1 + exp(x)).
  auto log1pexp = tf::custom_gradient([](const tf::Tensor& x) {
    tf::Tensor e = tf::exp(x);
    auto grad = [e](const tf::Tensor& dy) { return dy * (1.0f - 1.0f / (1.0f + e)); };
    return std::make_pair(tf::log(1.0f + e), std::function<tf::Tensor(const tf::Tensor&)>(grad));
  });
  tf::Tensor x = tf::constant(100.0f);
  tf::GradientTape tape;
  tape.watch(x);
  tf::Tensor y = log1pexp(x);
  // The ops inside are recorded (exp, add, log), as TF's eager custom_gradient records them,
  // then the custom op, whose gradient map is all that a first-order gradient follows.
  CHECK(tape.num_recorded() == 4);
  check_values(tape.gradient(y, x), {1.0});  // the naive gradient would be NaN (inf / inf)

  // Second order: the outer tape sees that the e the gradient map captured is exp(x), so the
  // derivative of the gradient 1 - 1 / (1 + e) is sigmoid'(x), as in TF.
  tf::Tensor xs = tf::constant({0.0f, 1.0f});
  tf::GradientTape outer;
  outer.watch(xs);
  tf::Tensor first;
  {
    tf::GradientTape inner;
    inner.watch(xs);
    first = inner.gradient(log1pexp(xs), xs);
  }
  check_values(first, {0.5, 0.7310585786});
  check_values(outer.gradient(first, xs), {0.25, 0.1966119332});

  // A clipping gradient and several inputs.
  auto scaled = tf::custom_gradient([](const std::vector<tf::Tensor>& xs) {
    auto grad = [](const tf::Tensor& dy) {
      return std::vector<tf::Tensor>{tf::clip_by_value(dy, -0.5f, 0.5f), tf::Tensor()};
    };
    return std::make_pair(xs[0] * xs[1],
                          std::function<std::vector<tf::Tensor>(const tf::Tensor&)>(grad));
  });
  tf::Tensor a = tf::constant({1.0f, 2.0f}), b = tf::constant({3.0f, 4.0f});
  tf::GradientTape t2(tf::TapeOptions{.persistent = true});
  t2.watch(a);
  t2.watch(b);
  tf::Tensor z = scaled({a, b});
  check_values(t2.gradient(z, a, tf::constant({2.0f, -0.25f})), {0.5, -0.25});
  CHECK_FALSE(t2.gradient(z, b).defined());
}

TEST_CASE("tape: a tape used or destroyed on another thread", "[autograd]") {
  const tf::Tensor x = tf::constant({1.0f, 2.0f});
  // A non-persistent tape stops recording at its gradient: only its own thread can do that.
  {
    tf::GradientTape tape;
    tape.watch(x);
    const tf::Tensor y = tf::reduce_sum(x * x);
    std::thread([&] {
      TF_REQUIRE_THROWS_CONTAINING(tape.gradient(y, x), tf::FailedPreconditionError,
                                   "take its gradient on that thread");
      TF_REQUIRE_THROWS_CONTAINING(tape.stop_recording(), tf::FailedPreconditionError,
                                   "pause it on that thread");
    }).join();
    check_values(tape.gradient(y, x), {2, 4});
  }
  // A persistent tape's gradient on another thread; the tape goes on recording its thread.
  {
    tf::GradientTape tape(tf::TapeOptions{.persistent = true});
    tape.watch(x);
    const tf::Tensor y = tf::reduce_sum(x * x);
    tf::Tensor g;
    std::thread([&] { g = tape.gradient(y, x); }).join();
    check_values(g, {2, 4});
    const tf::Tensor z = tf::reduce_sum(x * 3.0f);
    check_values(tape.gradient(z, x), {3, 3});
  }
  // Destroyed on another thread: it leaves its thread's list (ops here ran on freed memory).
  {
    auto tape = std::make_unique<tf::GradientTape>();
    tape->watch(x);
    (void)(x * 2.0f);
    std::thread([&] { tape.reset(); }).join();
    check_values(tf::reduce_sum(x * x), {5});
  }
  // Made on a thread that has ended, destroyed here.
  {
    std::unique_ptr<tf::GradientTape> tape;
    std::thread([&] {
      tape = std::make_unique<tf::GradientTape>();
      tape->watch(x);
      (void)(x * 2.0f);
    }).join();
    tape.reset();
    check_values(x * 2.0f, {2, 4});
  }
}

TEST_CASE("tape: a tape that ends or pauses while its thread's tapes are paused", "[autograd]") {
  // Keras builds layers, datasets run their functions and constant folding evaluates with every
  // tape of the thread set aside (detail::PauseTapes); a tape ended meanwhile must leave that list
  // too, or the pause's end brings back a dangling pointer.
  const tf::Tensor x = tf::constant({1.0f, 2.0f});
  auto& ctx = tf::detail::thread_context();
  REQUIRE(ctx.tapes.empty());
  {
    auto tape = std::make_unique<tf::GradientTape>();
    {
      tf::detail::PauseTapes pause;
      tape.reset();
    }
    CHECK(ctx.tapes.empty());
    check_values(x * 2.0f, {2, 4});
  }
  {
    auto tape = std::make_unique<tf::GradientTape>();
    {
      tf::detail::PauseTapes pause;
      std::thread([&] { tape.reset(); }).join();
    }
    CHECK(ctx.tapes.empty());
    check_values(x * 2.0f, {2, 4});
  }
  // A persistent tape's gradient, and stop_recording, inside a pause: the tape records nothing
  // until the pause ends, then records again.
  {
    tf::GradientTape tape(tf::TapeOptions{.persistent = true});
    tape.watch(x);
    const tf::Tensor y = tf::reduce_sum(x * x);
    tf::Tensor in_pause, after_guard;
    {
      tf::detail::PauseTapes pause;
      check_values(tape.gradient(y, x), {2, 4});
      in_pause = tf::reduce_sum(x * 5.0f);
      { auto guard = tape.stop_recording(); }
      after_guard = tf::reduce_sum(x * 7.0f);
    }
    CHECK(ctx.tapes.size() == 1);
    CHECK_FALSE(tape.gradient(in_pause, x).defined());
    CHECK_FALSE(tape.gradient(after_guard, x).defined());
    check_values(tape.gradient(tf::reduce_sum(x * 3.0f), x), {3, 3});
  }
  // A stop_recording guard opened before a pause and closed inside it: the tape resumes in the
  // list the pause set aside (it records nothing inside the pause) and records after it.
  {
    tf::GradientTape outer(tf::TapeOptions{.persistent = true});
    tf::GradientTape tape(tf::TapeOptions{.persistent = true});
    tape.watch(x);
    tf::Tensor in_pause;
    {
      std::optional<tf::StopRecording> guard;
      guard.emplace(tape);
      tf::detail::PauseTapes pause;
      guard.reset();
      CHECK(ctx.tapes.empty());
      in_pause = tf::reduce_sum(x * 5.0f);
    }
    REQUIRE(ctx.tapes.size() == 2);
    CHECK(ctx.tapes[0] == &outer);
    CHECK(ctx.tapes[1] == &tape);
    CHECK_FALSE(tape.gradient(in_pause, x).defined());
    check_values(tape.gradient(tf::reduce_sum(x * 3.0f), x), {3, 3});
  }
  // Tapes keep their order (innermost last) through a gradient of the outer one.
  {
    tf::GradientTape outer(tf::TapeOptions{.persistent = true});
    tf::GradientTape inner(tf::TapeOptions{.persistent = true});
    outer.watch(x);
    (void)outer.gradient(tf::reduce_sum(x * x), x);
    REQUIRE(ctx.tapes.size() == 2);
    CHECK(ctx.tapes[0] == &outer);
    CHECK(ctx.tapes[1] == &inner);
  }
  CHECK(ctx.tapes.empty());
}

TEST_CASE("tape: reset forgets the recording", "[autograd]") {
  tf::Tensor x = tf::constant(2.0f);
  tf::GradientTape tape(tf::TapeOptions{.persistent = true});
  tape.watch(x);
  tf::Tensor y = x * x;
  tape.reset();
  CHECK(tape.num_recorded() == 0);
  CHECK_FALSE(tape.gradient(y, x).defined());
  tape.watch(x);
  tf::Tensor z = x * 5.0f;
  check_values(tape.gradient(z, x), {5});
}

TEST_CASE("tape: a non-persistent tape frees what it kept", "[autograd]") {
  tf::Allocator& a = tf::cpu_allocator();
  tf::DeviceScope scope("/CPU:0");
  tf::Tensor x = tf::fill({256, 256}, tf::Tensor(0.5f));
  const int64_t before = a.stats().bytes_in_use;
  tf::Tensor g;
  {
    tf::GradientTape tape;
    tape.watch(x);
    tf::Tensor y = tf::reduce_sum(tf::tanh(tf::exp(x) * x));
    CHECK(a.stats().bytes_in_use > before);
    g = tape.gradient(y, x);
    CHECK(tape.num_recorded() == 0);
  }
  // Only the gradient itself remains.
  CHECK(a.stats().bytes_in_use == before + 256 * 256 * 4);
}

TEST_CASE("tape: piecewise-constant ops give zero gradients and cast goes back to the source dtype",
          "[autograd][cuda]") {
  for (tf::Device dev : devices_under_test()) {
    tf::DeviceScope scope(dev);
    tf::Tensor x = tf::constant({-1.5f, 0.3f, 2.7f});
    tf::GradientTape tape(tf::TapeOptions{.persistent = true});
    tape.watch(x);
    check_values(tape.gradient(tf::floor(x) + tf::ceil(x) + tf::round(x) + tf::sign(x), x),
                 {0, 0, 0});
    tf::Tensor g = tape.gradient(tf::cast(x, tf::float64) * 2.0, x);
    CHECK(g.dtype() == tf::float32);
    check_values(g, {2, 2, 2});
    tf::Tensor h = tape.gradient(tf::cast(tf::cast(x, tf::bfloat16), tf::float32), x);
    CHECK(h.dtype() == tf::float32);
    check_values(h, {1, 1, 1});
  }
}

TEST_CASE("tape: custom_gradient refuses a function that reads trainable variables", "[autograd]") {
  // TF raises unless grad_fn takes `variables`; here the variable would silently get no gradient.
  tf::Variable w(tf::constant(3.0f), "w"), frozen(tf::constant(2.0f), "frozen", false);
  auto uses_w = tf::custom_gradient([&](const tf::Tensor& x) {
    std::function<tf::Tensor(const tf::Tensor&)> grad = [](const tf::Tensor& dy) { return dy; };
    return std::make_pair(x * w * w, grad);
  });
  tf::Tensor x = tf::constant(1.0f);
  TF_REQUIRE_THROWS_CONTAINING(uses_w(x), tf::InvalidArgumentError,
                               "reads the trainable variable(s) 'w:0', which its gradient");
  // A non-trainable variable is fine (TF watches trainable ones only).
  auto uses_frozen = tf::custom_gradient([&](const tf::Tensor& x) {
    std::function<tf::Tensor(const tf::Tensor&)> grad = [](const tf::Tensor& dy) { return dy; };
    return std::make_pair(x * frozen, grad);
  });
  check_values(uses_frozen(x), {2});
  // The way that works: the variable's value as an input; its gradient reaches the variable.
  auto product = tf::custom_gradient([](const std::vector<tf::Tensor>& xs) {
    const tf::Tensor a = xs[0], b = xs[1];
    std::function<std::vector<tf::Tensor>(const tf::Tensor&)> grad = [a, b](const tf::Tensor& dy) {
      return std::vector<tf::Tensor>{dy * b, dy * a};
    };
    return std::make_pair(a * b, grad);
  });
  tf::GradientTape tape;
  const tf::Tensor y = product({x * 5.0f, w});
  check_values(tape.gradient(y, w), {5});
  // Watchers nest: a read inside an inner one is noted by the outer one too.
  tf::detail::VariableReadWatcher outer;
  {
    tf::detail::VariableReadWatcher inner;
    (void)w.value();
    (void)w.value();
    CHECK(inner.read().size() == 1);
  }
  REQUIRE(outer.read().size() == 1);
  CHECK(outer.read()[0].handle_id() == w.handle_id());
}

TEST_CASE("tape: custom_gradient accepts API.md's spelling of the gradient function", "[autograd]") {
  // API.md: fn(x) returns std::pair<tf::Tensor, std::function<tf::Tensor(tf::Tensor)>>.
  auto square_with_halved_grad = tf::custom_gradient(
      [](const tf::Tensor& x) -> std::pair<tf::Tensor, std::function<tf::Tensor(tf::Tensor)>> {
        return {x * x, [x](tf::Tensor dy) { return dy * x; }};  // half of the true 2x
      });
  tf::Tensor x = tf::constant(3.0f);
  tf::GradientTape tape;
  tape.watch(x);
  tf::Tensor y = square_with_halved_grad(x);
  check_values(y, {9});
  check_values(tape.gradient(y, x), {3});
}

TEST_CASE("custom_gradient: an undefined input is an InvalidArgumentError", "[autograd]") {
  auto f = tf::custom_gradient(tf::CustomGradientFnN([](const std::vector<tf::Tensor>& xs) {
    tf::Tensor y = xs[0] * 2.0f;
    std::function<std::vector<tf::Tensor>(const tf::Tensor&)> g = [](const tf::Tensor& dy) {
      return std::vector<tf::Tensor>{dy * 2.0f, dy};
    };
    return std::make_pair(y, g);
  }));
  tf::Tensor x = tf::constant({1.0f, 2.0f});
  tf::GradientTape tape;
  tape.watch(x);
  tf::testing::require_error(
      [&] {
        (void)f({x, tf::Tensor()});
      },
      {"[custom_gradient]", "input 1 of 2", "undefined"});
}

TEST_CASE("custom_gradient: an empty gradient function is rejected at the call", "[autograd]") {
  auto f = tf::custom_gradient(tf::CustomGradientFn([](const tf::Tensor& x) {
    return std::make_pair(x * 2.0f, std::function<tf::Tensor(const tf::Tensor&)>());
  }));
  tf::Tensor x = tf::constant({1.0f, 2.0f});
  tf::GradientTape tape;
  tape.watch(x);
  tf::testing::require_error([&] { (void)f(x); }, {"[custom_gradient]", "no gradient function"});
}

TEST_CASE("custom_gradient: a gradient of the wrong dtype is an InvalidArgumentError",
          "[autograd]") {
  auto f = tf::custom_gradient(tf::CustomGradientFn([](const tf::Tensor& x) {
    std::function<tf::Tensor(const tf::Tensor&)> g = [](const tf::Tensor& dy) {
      return tf::cast(dy, tf::float64);
    };
    return std::make_pair(x * 2.0f, g);
  }));
  tf::Tensor x = tf::constant({1.0f, 2.0f});
  tf::GradientTape tape;
  tape.watch(x);
  tf::Tensor y = tf::reduce_sum(f(x));
  tf::testing::require_error([&] { (void)tape.gradient(y, x); },
                             {"[custom_gradient]", "dtype float64", "float32"});
}

TEST_CASE("tape: a persistent tape keeps recording after a gradient that failed", "[autograd]") {
  const tf::Tensor x = tf::constant({1.0f, 2.0f});
  auto failing = tf::custom_gradient([](const tf::Tensor& v) {
    std::function<tf::Tensor(const tf::Tensor&)> grad = [](const tf::Tensor&) -> tf::Tensor {
      throw tf::InvalidArgumentError("boom");
    };
    return std::make_pair(v * 1.0f, grad);
  });
  tf::GradientTape tape(tf::TapeOptions{.persistent = true});
  tape.watch(x);
  const tf::Tensor y = tf::reduce_sum(failing(x));
  TF_REQUIRE_THROWS_CONTAINING(tape.gradient(y, x), tf::InvalidArgumentError, "boom");
  CHECK(tape.recording());
  const tf::Tensor z = tf::reduce_sum(x * x);  // recorded: the tape resumed
  check_values(tape.gradient(z, x), {2, 4});
}

TEST_CASE("a Jacobian larger than the machine's memory is refused up front",
          "[autograd][cpu][cuda]") {
  // (300000, 300000) float32 twice (rows and result): 670 GiB. It used to run for minutes and
  // let std::bad_alloc escape; on a GPU it filled the device's memory row by row first.
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    const tf::Tensor x = tf::ones({300000});
    tf::GradientTape tape;
    tape.watch(x);
    const tf::Tensor y = x * 2.0f;
    try {
      (void)tape.jacobian(y, x);
      FAIL("expected a ResourceExhaustedError");
    } catch (const tf::ResourceExhaustedError& e) {
      const std::string what = e.what();
      INFO(what);
      CHECK(what.find("[GradientTape.jacobian] a Jacobian of shape (300000, 300000) (float32) "
                      "needs") != std::string::npos);
      CHECK(what.find(device.is_cpu()
                          ? std::string("more than this machine's memory")
                          : "more than " + device.to_string() + "'s memory") != std::string::npos);
    }
    // Refused before the tape was used: its one gradient still works.
    CHECK(tape.gradient(tf::reduce_sum(y), x).shape() == tf::TensorShape({300000}));
  }
}

TEST_CASE("jacobian and batch_jacobian past the maximum rank name both shapes", "[autograd]") {
  tf::Tensor x = tf::ones({1, 1, 1, 1});
  {
    tf::GradientTape tape;
    tape.watch(x);
    tf::Tensor y = tf::reshape(x * 2.0f, {1, 1, 1, 1, 1});
    tf::testing::require_error([&] { (void)tape.jacobian(y, x); },
                               {"[GradientTape.jacobian]", "(1, 1, 1, 1, 1)", "(1, 1, 1, 1)"});
  }
  {
    tf::GradientTape tape;
    tape.watch(x);
    tf::Tensor y = tf::reshape(x * 2.0f, {1, 1, 1, 1, 1, 1});
    tf::testing::require_error(
        [&] { (void)tape.batch_jacobian(y, x); },
        {"[GradientTape.batch_jacobian]", "(1, 1, 1, 1, 1, 1)", "(1, 1, 1, 1)"});
  }
}
