// tf::function: tracing, the signature cache, replay, variables, tapes (API.md "Traced functions").
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "autograd/tape.h"
#include "core/device.h"
#include "core/error.h"
#include "jit/function.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/linalg.h"
#include "ops/movement.h"
#include "ops/nn.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
using tf::testing::check_close;
using tf::testing::check_values;

TEST_CASE("function: the first call traces, later calls replay the graph", "[jit][cuda]") {
  for (tf::Device dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    int body_runs = 0;
    auto f = tf::function([&](const tf::Tensor& x, const tf::Tensor& y) {
      ++body_runs;  // a C++ side effect: happens only while tracing
      return x * y + tf::exp(x);
    });
    tf::Tensor x = tf::constant({1.0f, 2.0f}), y = tf::constant({3.0f, 4.0f});
    check_close(f(x, y), x * y + tf::exp(x));
    CHECK(f.tracing_count() == 1);
    tf::Tensor x2 = tf::constant({-1.0f, 0.5f});
    tf::Tensor r = f(x2, y);
    check_close(r, x2 * y + tf::exp(x2));
    CHECK(r.device() == dev.to_string());
    CHECK(f.tracing_count() == 1);
    CHECK(body_runs == 1);
    // A new shape or dtype traces again.
    check_close(f(tf::constant({1.0f, 2.0f, 3.0f}), tf::constant(2.0f)),
                tf::constant({1.0f, 2.0f, 3.0f}) * 2.0f + tf::exp(tf::constant({1.0f, 2.0f, 3.0f})));
    CHECK(f.tracing_count() == 2);
    f(tf::constant({1.0, 2.0}), tf::constant({3.0, 4.0}));
    CHECK(f.tracing_count() == 3);
    CHECK(body_runs == 3);
  }
}

TEST_CASE("function: plain C++ arguments are part of the signature", "[jit]") {
  auto f = tf::function([](const tf::Tensor& x, int power, bool negate) {
    tf::Tensor y = tf::pow(x, static_cast<float>(power));
    return negate ? -y : y;
  });
  tf::Tensor x = tf::constant({2.0f, 3.0f});
  check_values(f(x, 2, false), {4, 9});
  check_values(f(x, 3, false), {8, 27});
  check_values(f(x, 2, true), {-4, -9});
  check_values(f(x, 2, false), {4, 9});
  CHECK(f.tracing_count() == 3);
}

TEST_CASE("function: results can be a vector or a tuple", "[jit]") {
  auto f = tf::function([](const tf::Tensor& x) {
    return std::make_tuple(x + 1.0f, std::vector<tf::Tensor>{x * 2.0f, x * 3.0f}, x);
  });
  for (int i = 0; i < 2; ++i) {
    auto [a, v, same] = f(tf::constant({1.0f, 2.0f}));
    check_values(a, {2, 3});
    REQUIRE(v.size() == 2);
    check_values(v[0], {2, 4});
    check_values(v[1], {3, 6});
    check_values(same, {1, 2});
  }
  CHECK(f.tracing_count() == 1);
}

TEST_CASE("function: run_functions_eagerly runs the body at every call", "[jit]") {
  int body_runs = 0;
  auto f = tf::function([&](const tf::Tensor& x, int k) {
    ++body_runs;
    return std::make_tuple(x * static_cast<float>(k), std::vector<tf::Tensor>{x + 1.0f});
  });
  const tf::Tensor x = tf::constant({1.0f, 2.0f});
  CHECK_FALSE(tf::config::functions_run_eagerly());
  (void)f(x, 2);
  (void)f(x, 2);
  CHECK(body_runs == 1);
  tf::config::run_functions_eagerly(true);
  struct Restore {
    ~Restore() { tf::config::run_functions_eagerly(false); }
  } restore;
  CHECK(tf::config::functions_run_eagerly());
  for (int i = 0; i < 2; ++i) {
    auto [y, v] = f(x, 3);
    check_values(y, {3, 6});
    REQUIRE(v.size() == 1);
    check_values(v[0], {2, 3});
  }
  CHECK(body_runs == 3);
  CHECK(f.tracing_count() == 1);
  // Gradients flow through the eager body as through any eager code.
  tf::GradientTape tape;
  tape.watch(x);
  auto [y, v] = f(x, 4);
  check_values(tape.gradient(y, x), {4, 4});
  tf::config::run_functions_eagerly(false);
  (void)f(x, 2);
  CHECK(body_runs == 4);  // replays the graph traced before
}

TEST_CASE("function: an output too large for memory names the graph's op and shape",
          "[jit][cpu][cuda]") {
  // A (2^20, 2^20) float32 sum needs 4 TiB: refused by the allocator, whose bare message used to
  // be all a replay said (eager ops name themselves).
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    const std::string allocator =
        device.is_cpu() ? "[cpu_allocator] cannot allocate" : "[gpu_allocator] out of memory";
    const tf::Tensor a = tf::ones({1 << 20, 1}), b = tf::ones({1, 1 << 20});
    auto f = tf::function([](const tf::Tensor& x, const tf::Tensor& y) { return x + y; });
    TF_REQUIRE_THROWS_CONTAINING(f(a, b), tf::ResourceExhaustedError,
                                 "[add] node 0 of the traced graph, with output float32 "
                                 "(1048576, 1048576): " +
                                     allocator);
    // An intermediate too (planned into the graph's arena, or allocated on its own).
    auto g = tf::function([](const tf::Tensor& x, const tf::Tensor& y) {
      return tf::matmul(x + y, tf::transpose(y));
    });
    try {
      (void)g(a, b);
      FAIL("expected a ResourceExhaustedError");
    } catch (const tf::ResourceExhaustedError& e) {
      const std::string what = e.what();
      INFO(what);
      CHECK((what.find("[function] the traced graph's arena") != std::string::npos ||
             what.find("of the traced graph, with output float32 (1048576, 1048576)") !=
                 std::string::npos));
      CHECK(what.find(allocator.substr(1, 13)) != std::string::npos);
    }
  }
}

TEST_CASE("function: input_signature checks every call", "[jit]") {
  auto f = tf::function([](const tf::Tensor& x) { return tf::reduce_sum(x, 1); },
                        tf::FunctionOptions{.input_signature = {tf::TensorSpec({tf::None, 3},
                                                                               tf::float32, "x")},
                                            .name = "row_sums"});
  check_values(f(tf::ones({2, 3})), {3, 3});
  tf::testing::require_error([&] { f(tf::ones({2, 4})); },
                             {"row_sums", "argument 0", "'x'", "(2, 4)", "(None, 3)"});
  tf::testing::require_error([&] { f(tf::ones({2, 3}, tf::float64)); }, {"float64", "float32"});
}

TEST_CASE("function: variables are read and written at every call", "[jit][cuda]") {
  for (tf::Device dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    tf::Variable counter(tf::constant(0.0f), "counter");
    auto step = tf::function([&](const tf::Tensor& inc) {
      counter.assign_add(inc);
      return counter * 10.0f;  // reads after the write, in program order
    });
    check_values(step(tf::constant(1.0f)), {10});
    check_values(step(tf::constant(2.0f)), {30});
    check_values(counter, {3});
    counter.assign(tf::constant(100.0f));  // an eager write between calls is seen
    check_values(step(tf::constant(1.0f)), {1010});
    CHECK(step.tracing_count() == 1);
  }
}

TEST_CASE("function: creating a variable inside is an error that says why", "[jit]") {
  auto f = tf::function([](const tf::Tensor& x) {
    tf::Variable v(tf::zeros({2}), "inner");
    return x + v;
  });
  TF_REQUIRE_THROWS_CONTAINING(f(tf::ones({2})), tf::FailedPreconditionError,
                               "create the variable outside the function");
}

TEST_CASE("function: a tape around a call records it", "[jit]") {
  auto f = tf::function([](const tf::Tensor& x) { return tf::reduce_sum(tf::sin(x) * x); });
  tf::Tensor x = tf::constant({0.5, 1.5});
  f(x);  // trace outside any tape
  tf::GradientTape tape;
  tape.watch(x);
  tf::Tensor y = f(x);
  const auto xv = x.numpy<double>();
  check_values(tape.gradient(y, x), {std::cos(xv[0]) * xv[0] + std::sin(xv[0]),
                                     std::cos(xv[1]) * xv[1] + std::sin(xv[1])});
}

TEST_CASE("function: stop_gradient inside a traced function blocks the gradient", "[jit][cuda]") {
  for (tf::Device dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    // d/dx of sum(x * stop_gradient(x)) is x, not 2x: with a tape inside the function, with a
    // tape around its call, and eagerly.
    auto body = [](const tf::Tensor& x) { return tf::reduce_sum(x * tf::stop_gradient(x)); };
    auto inside = tf::function([&](const tf::Tensor& x) {
      tf::GradientTape tape;
      tape.watch(x);
      return tape.gradient(body(x), x);
    });
    auto around = tf::function(body);
    const tf::Tensor x = tf::constant({0.5f, -1.5f, 2.0f});
    for (int call = 0; call < 2; ++call) {  // the trace, then a replay
      check_values(inside(x), {0.5, -1.5, 2.0});
      tf::GradientTape tape;
      tape.watch(x);
      const tf::Tensor y = around(x);
      check_values(y, {0.25 + 2.25 + 4.0});
      check_values(tape.gradient(y, x), {0.5, -1.5, 2.0});
    }
    CHECK(inside.tracing_count() == 1);
    CHECK(around.tracing_count() == 1);
    const std::string text = around.get_concrete_function(tf::TensorSpec({3})).graph().to_string();
    CHECK(text.find("stop_gradient(") != std::string::npos);
    // Only through stop_gradient: no gradient (TF's None), zeros on request.
    auto only = tf::function([](const tf::Tensor& x) {
      tf::GradientTape tape(tf::TapeOptions{.persistent = true});
      tape.watch(x);
      const tf::Tensor y = tf::reduce_sum(tf::stop_gradient(x) * 3.0f);
      const tf::Tensor none = tape.gradient(y, x);
      CHECK(!none.defined());
      return tape.gradient(y, x, tf::UnconnectedGradients::ZERO);
    });
    check_values(only(x), {0.0, 0.0, 0.0});
  }
}

TEST_CASE("function: custom_gradient inside a traced function keeps its gradient", "[jit][cuda]") {
  for (tf::Device dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    // The TF docs' log1pexp: the gradient function reads the forward value e (captured).
    auto log1pexp = tf::custom_gradient([](const tf::Tensor& x) {
      const tf::Tensor e = tf::exp(x);
      return std::pair{tf::log(e + 1.0f),
                       std::function<tf::Tensor(const tf::Tensor&)>(
                           [e](const tf::Tensor& dy) { return dy * (1.0f - 1.0f / (1.0f + e)); })};
    });
    auto grad_inside = tf::function([&](const tf::Tensor& x) {
      tf::GradientTape tape;
      tape.watch(x);
      return tape.gradient(tf::reduce_sum(log1pexp(x) * x), x);
    });
    const tf::Tensor x = tf::constant({-1.0f, 0.5f, 3.0f});
    tf::Tensor eager;
    {
      tf::GradientTape tape;
      tape.watch(x);
      eager = tape.gradient(tf::reduce_sum(log1pexp(x) * x), x);
    }
    std::vector<double> want;
    for (double v : x.numpy<float>())
      want.push_back(std::log1p(std::exp(v)) + v / (1 + std::exp(-v)));
    check_values(eager, want, 1e-5);
    for (int call = 0; call < 2; ++call) check_close(grad_inside(x), eager, 1e-6, 1e-6);
    CHECK(grad_inside.tracing_count() == 1);
    // With a None dimension: right at every size (the function traces per shape: each trace
    // has its own gradient function, which may depend on the shape).
    auto open = tf::function(
        [&](const tf::Tensor& v) {
          tf::GradientTape tape;
          tape.watch(v);
          return tape.gradient(tf::reduce_sum(log1pexp(v) * v), v);
        },
        tf::FunctionOptions{.input_signature = {tf::TensorSpec({tf::None})}});
    for (int64_t n : {3, 5, 2}) {
      const tf::Tensor v = tf::random::normal({n}, 0, 1, tf::float32, n);
      tf::GradientTape tape;
      tape.watch(v);
      check_close(open(v), tape.gradient(tf::reduce_sum(log1pexp(v) * v), v), 1e-6, 1e-6);
    }

    // A tape around the call: the map applies (3 dy, where the forward 2x would give 2), also
    // when another op of the body depends on the same input.
    auto scaled = tf::custom_gradient([](const tf::Tensor& x) {
      return std::pair{x * 2.0f, std::function<tf::Tensor(const tf::Tensor&)>(
                                     [](const tf::Tensor& dy) { return dy * 3.0f; })};
    });
    auto around = tf::function(
        [&](const tf::Tensor& x) { return tf::reduce_sum(scaled(x)) + tf::reduce_sum(x * x); });
    for (int call = 0; call < 2; ++call) {
      tf::GradientTape tape;
      tape.watch(x);
      const tf::Tensor y = around(x);
      check_values(y, {2 * (-1.0 + 0.5 + 3.0) + 1.0 + 0.25 + 9.0});
      check_values(tape.gradient(y, x), {3.0 - 2.0, 3.0 + 1.0, 3.0 + 6.0});
    }
    CHECK(around.tracing_count() == 1);

    // A gradient function that reads a tensor of the trace cannot run after the trace: a tape
    // around the call says so.
    auto around_captured =
        tf::function([&](const tf::Tensor& x) { return tf::reduce_sum(log1pexp(x)); });
    around_captured(x);
    tf::GradientTape tape;
    tape.watch(x);
    const tf::Tensor y = around_captured(x);
    try {
      tape.gradient(y, x);
      FAIL("no FailedPreconditionError was thrown");
    } catch (const tf::FailedPreconditionError& e) {
      const std::string msg = e.what();
      CHECK(msg.find("[custom_gradient]") != std::string::npos);
      CHECK(msg.find("GradientTape inside the function") != std::string::npos);
    }
  }
}

TEST_CASE("function: a traced train step with a tape inside matches the eager step",
          "[jit][cuda]") {
  for (tf::Device dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    auto make = [] {
      return std::vector<tf::Variable>{
          tf::Variable(tf::random::normal({4, 8}, 0, 0.5, tf::float32, 1), "w1"),
          tf::Variable(tf::zeros({8}), "b1"),
          tf::Variable(tf::random::normal({8, 3}, 0, 0.5, tf::float32, 2), "w2"),
          tf::Variable(tf::zeros({3}), "b2")};
    };
    std::vector<tf::Variable> eager_vars = make(), traced_vars;
    for (const auto& v : eager_vars) traced_vars.emplace_back(v.value(), "copy");
    auto step_body = [](std::vector<tf::Variable>& v, const tf::Tensor& x, const tf::Tensor& y) {
      tf::GradientTape tape;
      tf::Tensor h = tf::nn::relu(tf::nn::bias_add(tf::matmul(x, v[0]), v[1]));
      tf::Tensor logits = tf::nn::bias_add(tf::matmul(h, v[2]), v[3]);
      tf::Tensor loss =
          tf::reduce_mean(tf::nn::sparse_softmax_cross_entropy_with_logits(y, logits));
      auto grads = tape.gradient(loss, v);
      for (size_t i = 0; i < v.size(); ++i) v[i].assign_sub(grads[i] * 0.1f);
      return loss;
    };
    auto traced = tf::function([&](const tf::Tensor& x, const tf::Tensor& y) {
      return step_body(traced_vars, x, y);
    });
    tf::Tensor x = tf::random::normal({5, 4}, 0, 1, tf::float32, 3);
    tf::Tensor y = tf::constant(std::vector<int32_t>{0, 1, 2, 1, 0});
    for (int i = 0; i < 4; ++i) {
      tf::Tensor le = step_body(eager_vars, x, y);
      tf::Tensor lt = traced(x, y);
      check_close(lt, le, 1e-5, 1e-6);
    }
    for (size_t i = 0; i < eager_vars.size(); ++i)
      check_close(traced_vars[i].value(), eager_vars[i].value(), 1e-5, 1e-6);
    CHECK(traced.tracing_count() == 1);
  }
}

TEST_CASE("function: get_concrete_function exposes the graph", "[jit]") {
  auto f = tf::function([](const tf::Tensor& a, const tf::Tensor& b) {
    return tf::matmul(a, b) + 1.0f;
  });
  const tf::ConcreteFunction& cf =
      f.get_concrete_function(tf::TensorSpec({2, 3}), tf::TensorSpec({3, 4}));
  const tf::Graph& g = cf.graph();
  CHECK(g.inputs.size() == 2);
  CHECK(g.num_nodes() >= 2);
  const std::string text = g.to_string();
  CHECK(text.find("matmul(%arg0, %arg1)") != std::string::npos);
  CHECK(text.find("add(") != std::string::npos);
  CHECK(text.find("float32 (2, 4)") != std::string::npos);
  CHECK(g.to_dot().find("digraph") != std::string::npos);
  CHECK(f.tracing_count() == 1);
  f(tf::ones({2, 3}), tf::ones({3, 4}));  // the same signature: no new trace
  CHECK(f.tracing_count() == 1);
  // None dimensions: one graph for every size, shown with None.
  auto g1 = tf::function([](const tf::Tensor& a) { return a * 2.0f; });
  const tf::ConcreteFunction& open = g1.get_concrete_function(tf::TensorSpec({tf::None, 3}));
  CHECK(open.graph().to_string().find("float32 (None, 3)") != std::string::npos);
  check_values(open.call_flat(std::vector<tf::Tensor>{tf::ones({1, 3})})[0], {2, 2, 2});
  CHECK(g1.tracing_count() == 1);
  // A graph runs its traced kernels: another dtype or device is an error, never a misread buffer.
  const tf::Tensor wrong_dtype[] = {tf::ones({2, 3}, tf::float64), tf::ones({3, 4})};
  TF_REQUIRE_THROWS_CONTAINING(g.run(wrong_dtype), tf::InvalidArgumentError,
                               "input 0 is float64 on");
  if (tf::testing::has_gpu()) {
    // The graph's devices are the default device's; input 1 from the other kind.
    const tf::Device traced = g.input_devices[1];
    const tf::Device other = traced.is_gpu() ? tf::Device{} : tf::Device{tf::DeviceType::GPU, 0};
    tf::Tensor a, b;
    {
      tf::DeviceScope scope(g.input_devices[0]);
      a = tf::ones({2, 3});
    }
    {
      tf::DeviceScope scope(other);
      b = tf::ones({3, 4});
    }
    const tf::Tensor mixed[] = {a, b};
    TF_REQUIRE_THROWS_CONTAINING(g.run(mixed), tf::InvalidArgumentError,
                                 "input 1 is float32 on " + other.to_string() +
                                     " but the graph was traced for float32 on " +
                                     traced.to_string());
  }
}

TEST_CASE("function: frequent retracing logs the warning at most twice", "[jit]") {
  auto f = tf::function([](const tf::Tensor& x) { return x * 2.0f; },
                        tf::FunctionOptions{.name = "shapes_each_call"});
  const std::string log = tf::testing::capture_stderr([&] {
    for (int64_t n = 1; n <= 30; ++n) f(tf::ones({n}));  // a new shape at every call
  });
  CHECK(f.tracing_count() == 30);
  const std::string warning = "triggered tf::function retracing";
  const size_t first = log.find(warning);
  REQUIRE(first != std::string::npos);
  CHECK(log.find("calls to shapes_each_call") != std::string::npos);
  const size_t second = log.find(warning, first + 1);
  CHECK(second != std::string::npos);
  CHECK(log.find(warning, second + 1) == std::string::npos);  // at most twice per function
  // Replays of one signature never warn.
  auto g = tf::function([](const tf::Tensor& x) { return x + 1.0f; });
  CHECK(tf::testing::capture_stderr([&] {
          for (int i = 0; i < 20; ++i) g(tf::ones({3}));
        }).find(warning) == std::string::npos);
}

TEST_CASE("function: log_device_placement logs graph nodes as it logs eager ops", "[jit]") {
  tf::DeviceScope cpu("/CPU:0");  // node by node there (a GPU graph may replay as a CUDA graph)
  auto f = tf::function([](const tf::Tensor& x) { return tf::exp(x) * 3.0f; });
  const tf::Tensor x = tf::ones({4});
  f(x);
  tf::debugging::set_log_device_placement(true);
  std::string eager, replay;
  try {
    eager = tf::testing::capture_stderr([&] { tf::exp(x); });
    replay = tf::testing::capture_stderr([&] { f(x); });
  } catch (...) {
    tf::debugging::set_log_device_placement(false);
    throw;
  }
  tf::debugging::set_log_device_placement(false);
  CHECK(eager.find("Executing op exp in device /device:CPU:0") != std::string::npos);
  // The replay runs the graph's nodes (fused into one loop here).
  CHECK(replay.find("Executing op ") != std::string::npos);
  CHECK(replay.find("in device /device:CPU:0") != std::string::npos);
  CHECK(tf::testing::capture_stderr([&] { f(x); }).find("Executing op") == std::string::npos);
}

TEST_CASE("function: the trace cache is bounded", "[jit]") {
  auto f = tf::function([](const tf::Tensor& x) { return x + 1.0f; });
  for (int64_t n = 1; n <= 80; ++n) f(tf::zeros({n}));
  CHECK(f.tracing_count() == 80);
  f(tf::zeros({1}));  // evicted long ago: traced again
  CHECK(f.tracing_count() == 81);
  f(tf::zeros({80}));  // still cached
  CHECK(f.tracing_count() == 81);

  // A graph get_concrete_function handed out stays found after the cache evicted it: asking
  // again (or calling) neither traces again nor pins another copy (it did, growing memory).
  auto g = tf::function([](const tf::Tensor& x) { return x * 2.0f; });
  const tf::ConcreteFunction* pinned = &g.get_concrete_function(tf::TensorSpec({4, 16}));
  for (int64_t n = 1; n <= 70; ++n) g(tf::zeros({n}));
  CHECK(g.tracing_count() == 71);
  CHECK(&g.get_concrete_function(tf::TensorSpec({4, 16})) == pinned);
  g(tf::zeros({4, 16}));
  CHECK(g.tracing_count() == 71);

  // reduce_retracing with a new C++ value at every call keeps its per-value records bounded,
  // and still serves each value right.
  auto h = tf::function([](const tf::Tensor& x, int k) { return x + static_cast<float>(k); },
                        {.reduce_retracing = true});
  for (int k = 0; k < 600; ++k) CHECK(h(tf::zeros({2}), k).numpy<float>()[0] == k);
}

TEST_CASE("function: random ops draw new numbers at every call", "[jit]") {
  tf::random::set_seed(7);
  auto f = tf::function([](const tf::Tensor& x) { return x + tf::random::normal({4}, 0, 1, tf::float32, 3); });
  tf::Tensor zero = tf::zeros({4});
  const auto a = f(zero).numpy<float>();
  const auto b = f(zero).numpy<float>();
  CHECK(a != b);
  // The first call gives what the eager op would have given first; set_seed resets both.
  tf::random::set_seed(7);
  const auto eager = tf::random::normal({4}, 0, 1, tf::float32, 3).numpy<float>();
  CHECK(eager == a);
  CHECK(f.tracing_count() == 1);

  // Two ops with one op seed in a body, also after an eager op with that seed: every call's
  // numbers are new (replays repeated earlier numbers, the two ops' swapped).
  tf::random::set_seed(42);
  std::vector<std::vector<float>> seen{
      tf::random::uniform({4}, 0, 1, tf::float32, 3).numpy<float>()};
  auto two = tf::function([](const tf::Tensor& x) {
    return std::vector<tf::Tensor>{x + tf::random::uniform({4}, 0, 1, tf::float32, 3),
                                   x + tf::random::uniform({4}, 0, 1, tf::float32, 3)};
  });
  for (int call = 0; call < 4; ++call)
    for (const tf::Tensor& t : two(zero)) seen.push_back(t.numpy<float>());
  for (size_t i = 0; i < seen.size(); ++i)
    for (size_t j = 0; j < i; ++j) CHECK(seen[i] != seen[j]);
}

TEST_CASE("function: traced graphs are optimised before replay", "[jit]") {
  tf::DeviceScope cpu("/cpu:0");  // elementwise fusion is a CPU pass (GPU fusion: docs/function.md)
  auto f = tf::function([](const tf::Tensor& x) {
    tf::Tensor unused = tf::exp(x);                          // dead: removed
    tf::Tensor k = tf::constant(2.0f) * tf::constant(3.0f);  // constants: folded
    tf::Tensor a = tf::sin(x), b = tf::sin(x);               // common subexpression: merged
    return a + b + k;
  });
  const tf::Graph& g = f.get_concrete_function(tf::TensorSpec({3})).graph();
  INFO(g.to_string());
  CHECK(g.num_nodes() == 2);  // sin (used twice), then the two adds fused into one node
  CHECK(g.to_string().find("exp") == std::string::npos);
  CHECK(g.to_string().find("fused_elementwise") != std::string::npos);
  tf::Tensor x = tf::constant({0.1f, 0.2f, 0.3f});
  check_close(f(x), tf::sin(x) * 2.0f + 6.0f, 1e-6, 1e-6);
}

TEST_CASE("function: captured tensors keep their gradients", "[jit]") {
  tf::Tensor w = tf::constant({0.5, 1.0});
  auto f = tf::function([&](const tf::Tensor& x) { return tf::reduce_sum(x * tf::exp(w)); });
  tf::Tensor x = tf::constant({2.0, 3.0});
  tf::GradientTape tape;
  tape.watch(w);
  tf::Tensor y = f(x);
  check_values(tape.gradient(y, w), {2.0 * std::exp(0.5), 3.0 * std::exp(1.0)}, 1e-12, 1e-12);
}

TEST_CASE("function: fused elementwise chains equal eager results and differentiate", "[jit]") {
  tf::DeviceScope cpu("/cpu:0");  // elementwise fusion is a CPU pass (GPU fusion: docs/function.md)
  auto chain = [](const tf::Tensor& x, const tf::Tensor& y) {
    tf::Tensor a = tf::exp(x * 0.5f + 1.0f);       // a is read twice below: not fused away
    tf::Tensor b = tf::tanh(a - y) * a;
    return tf::nn::relu(tf::maximum(b, y) / (tf::abs(y) + 1.0f)) - tf::sqrt(tf::square(x) + 1.0f);
  };
  auto f = tf::function(chain);
  for (tf::DType dt : {tf::float32, tf::float64})
    for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{1000}, int64_t{5000}}) {
      tf::Tensor x = tf::random::uniform({n}, -2, 2, dt, 10 + n);
      tf::Tensor y = tf::random::uniform({n}, -2, 2, dt, 20 + n);
      check_close(f(x, y), chain(x, y), 0, 0);  // the same loops: bit-identical
      const tf::Graph& g =
          f.get_concrete_function(tf::TensorSpec({n}, dt), tf::TensorSpec({n}, dt)).graph();
      INFO(g.to_string());
      CHECK(g.to_string().find("fused_elementwise") != std::string::npos);
      CHECK(g.num_nodes() < 8);
    }
  // Gradients through the fused node (the tape records the replay).
  tf::Tensor x = tf::random::uniform({6}, -2, 2, tf::float32, 1);
  tf::Tensor y = tf::random::uniform({6}, -2, 2, tf::float32, 2);
  tf::GradientTape t1(tf::TapeOptions{.persistent = true});
  t1.watch(x);
  t1.watch(y);
  tf::Tensor eager = tf::reduce_sum(chain(x, y));
  tf::Tensor traced = tf::reduce_sum(f(x, y));
  check_close(t1.gradient(traced, x), t1.gradient(eager, x), 1e-6, 1e-6);
  check_close(t1.gradient(traced, y), t1.gradient(eager, y), 1e-6, 1e-6);
}

TEST_CASE("function: every fusable elementwise op fuses and equals eager", "[jit]") {
  // The ops with CPU loops in the fused kernel (cpu::unary_range, relu_range, binary_ranges):
  // each between two others, so that the chain of three is one node, on float32 and float64.
  tf::DeviceScope cpu("/cpu:0");
  using Unary = tf::Tensor (*)(const tf::Tensor&);
  using Binary = tf::Tensor (*)(const tf::Tensor&, const tf::Tensor&);
  const std::vector<std::pair<const char*, Unary>> unary = {
      {"negative", &tf::negative}, {"abs", &tf::abs},
      {"sign", &tf::sign},         {"exp", &tf::exp},
      {"log", &tf::log},           {"log1p", &tf::log1p},
      {"sqrt", &tf::sqrt},         {"rsqrt", &tf::rsqrt},
      {"square", &tf::square},     {"tanh", &tf::tanh},
      {"sigmoid", &tf::sigmoid},   {"sin", &tf::sin},
      {"cos", &tf::cos},           {"erf", &tf::erf},
      {"erfc", &tf::erfc},         {"softsign", &tf::nn::softsign},
      {"floor", &tf::floor},       {"ceil", &tf::ceil},
      {"round", &tf::round},       {"relu", &tf::nn::relu},
      // x * 0.75 + 0.5 is in (0.575, 2.75): asin, acos and atanh are NaN above 1, acosh below
      // (NaN must match NaN), the rest are finite.
      {"tan", &tf::tan},           {"asin", &tf::asin},
      {"acos", &tf::acos},         {"atan", &tf::atan},
      {"sinh", &tf::sinh},         {"cosh", &tf::cosh},
      {"asinh", &tf::asinh},       {"acosh", &tf::acosh},
      {"atanh", &tf::atanh},       {"expm1", &tf::expm1}};
  const std::vector<std::pair<const char*, Binary>> binary = {
      {"add", &tf::add},       {"subtract", &tf::subtract}, {"multiply", &tf::multiply},
      {"divide", &tf::divide}, {"maximum", &tf::maximum},   {"minimum", &tf::minimum},
      {"atan2", &tf::atan2}};
  using Body = std::function<tf::Tensor(tf::Tensor, tf::Tensor)>;
  auto check = [](const char* name, const Body& body) {
    auto f = tf::function(body);
    for (tf::DType dt : {tf::float32, tf::float64})
      for (int64_t n : {int64_t{7}, int64_t{3000}}) {
        INFO(name << " " << tf::dtype_name(dt) << " n=" << n);
        // Positive, so that log, sqrt and rsqrt stay in their domain; y in (-2, 2) crosses zero.
        const tf::Tensor x = tf::random::uniform({n}, 0.1, 3, dt, 30 + n);
        const tf::Tensor y = tf::random::uniform({n}, -2, 2, dt, 40 + n);
        check_close(f(x, y), body(x, y), 0, 0);  // the same loops: bit-identical
        const tf::Graph& g =
            f.get_concrete_function(tf::TensorSpec({n}, dt), tf::TensorSpec({n}, dt)).graph();
        INFO(g.to_string());
        CHECK(g.num_nodes() == 1);
        CHECK(g.to_string().find("fused_elementwise") != std::string::npos);
      }
  };
  for (const auto& [name, op] : unary)
    check(name, [op](tf::Tensor x, tf::Tensor y) { return op(x * 0.75f + 0.5f) - y; });
  for (const auto& [name, op] : binary)
    check(name, [op](tf::Tensor x, tf::Tensor y) { return op(x * 0.75f + 0.5f, y) - 1.0f; });
}

// The fused node runs calls of at most 16 elements with the binary steps' arithmetic inline
// (jit/fusion.cpp, run_tiny) and longer ones through the loops: both must give eager's bits,
// NaN, infinities and signed zeros included (maximum and minimum propagate NaN from either
// side), with one-element inputs repeated.
TEST_CASE("function: fused chains on a few elements equal eager bit for bit", "[jit]") {
  tf::DeviceScope cpu("/cpu:0");
  using Body = std::function<tf::Tensor(tf::Tensor, tf::Tensor, tf::Tensor)>;
  using Binary = tf::Tensor (*)(const tf::Tensor&, const tf::Tensor&);
  std::vector<std::pair<std::string, Body>> bodies;
  // Each binary op alone between two exact steps (x * 1 keeps NaN, infinities and -0), both ways
  // round and with the one-element s.
  for (const auto& [name, op] : std::vector<std::pair<const char*, Binary>>{
           {"add", &tf::add},
           {"subtract", &tf::subtract},
           {"multiply", &tf::multiply},
           {"divide", &tf::divide},
           {"maximum", &tf::maximum},
           {"minimum", &tf::minimum},
           // No inline form: run_tiny calls its loop (signed zeros pick atan2's quadrant).
           {"atan2", &tf::atan2}}) {
    bodies.emplace_back(name, [op](tf::Tensor x, tf::Tensor y, tf::Tensor s) {
      return op(x * 1.0f, y) * 1.0f + op(y, x * 1.0f) * 1.0f + op(x * 1.0f, s) * 1.0f;
    });
    bodies.emplace_back(std::string(name) + " alone", [op](tf::Tensor x, tf::Tensor y,
                                                           tf::Tensor) {
      return op(x * 1.0f, y) * 1.0f;
    });
    bodies.emplace_back(std::string(name) + " reversed", [op](tf::Tensor x, tf::Tensor y,
                                                              tf::Tensor s) {
      return op(y * 1.0f, x) * 1.0f + op(s * 1.0f, y) * 1.0f;
    });
  }
  bodies.emplace_back("mixed", [](tf::Tensor x, tf::Tensor y, tf::Tensor s) {
    tf::Tensor a = tf::maximum(x, y) * s - tf::minimum(y, x);
    tf::Tensor b = tf::maximum(tf::exp(a) / (y + s), x) + tf::minimum(s, a);
    return tf::tanh(b - x * y) + tf::maximum(s, tf::minimum(b, s));
  });
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<double> specials = {nan, -0.0, 0.0, inf, -inf, 1.5, -2.5, 1e-40, 3.0, nan};
  auto bits_equal = [](const tf::Tensor& got, const tf::Tensor& want) {
    const std::vector<double> g = tf::detail::to_double_vector(got);
    const std::vector<double> w = tf::detail::to_double_vector(want);
    if (g.size() != w.size()) return false;
    for (size_t i = 0; i < g.size(); ++i)
      if (std::isnan(g[i]) != std::isnan(w[i]) ||
          (!std::isnan(g[i]) && std::memcmp(&g[i], &w[i], sizeof(double)) != 0))
        return false;
    return true;
  };
  for (tf::DType dt : {tf::float32, tf::float64})
    for (int64_t n : {int64_t{1}, int64_t{4}, int64_t{16}, int64_t{17}}) {
      std::vector<double> xv(static_cast<size_t>(n)), yv(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        xv[static_cast<size_t>(i)] = specials[static_cast<size_t>(i) % specials.size()];
        yv[static_cast<size_t>(i)] = specials[static_cast<size_t>(i * 3 + 1) % specials.size()];
      }
      const tf::Tensor x = tf::detail::from_doubles(xv, {n}, dt);
      const tf::Tensor y = tf::detail::from_doubles(yv, {n}, dt);
      for (const auto& [name, body] : bodies) {
        auto f = tf::function(body);
        for (double sv : {0.5, -0.0, nan}) {
          INFO(name << " " << tf::dtype_name(dt) << " n=" << n << " s=" << sv);
          const tf::Tensor s = tf::detail::from_doubles({sv}, {}, dt);
          CHECK(bits_equal(f(x, y, s), body(x, y, s)));
        }
        const tf::Graph& g =
            f.get_concrete_function(tf::TensorSpec({n}, dt), tf::TensorSpec({n}, dt),
                                    tf::TensorSpec({}, dt))
                .graph();
        INFO(name << " " << g.to_string());
        int fused = 0;  // values read twice end a group, s * 1 has its own shape: a few nodes
        for (const auto& node : g.nodes)
          fused += std::string(node.prim->name()) == "fused_elementwise";
        CHECK(fused >= 1);
      }
    }
}

TEST_CASE("function: a tree of elementwise ops fuses into one node", "[jit]") {
  tf::DeviceScope cpu("/cpu:0");
  // Four branches meet pairwise (Adam's moment update has this shape: m * b1 + g * (1 - b1)).
  auto tree = [](const tf::Tensor& m, const tf::Tensor& g, const tf::Tensor& v) {
    tf::Tensor left = m * 0.9f + g * 0.1f;
    tf::Tensor right = tf::square(g) * 0.001f + v * 0.999f;
    return left / (tf::sqrt(right) + 1e-7f);
  };
  auto f = tf::function(tree);
  for (tf::DType dt : {tf::float32, tf::float64})
    for (int64_t n : {int64_t{1}, int64_t{5}, int64_t{3000}}) {
      tf::Tensor m = tf::random::uniform({n}, -1, 1, dt, 30 + n);
      tf::Tensor g = tf::random::uniform({n}, -1, 1, dt, 40 + n);
      tf::Tensor v = tf::random::uniform({n}, 0, 1, dt, 50 + n);
      check_close(f(m, g, v), tree(m, g, v), 0, 0);  // the same loops: bit-identical
      const tf::Graph& gr = f.get_concrete_function(tf::TensorSpec({n}, dt),
                                                    tf::TensorSpec({n}, dt),
                                                    tf::TensorSpec({n}, dt))
                                .graph();
      INFO(gr.to_string());
      CHECK(gr.num_nodes() == 1);
      CHECK(std::string(gr.nodes[0].prim->name()) == "fused_elementwise");
    }
  tf::Tensor m = tf::random::uniform({9}, -1, 1, tf::float32, 1);
  tf::Tensor g = tf::random::uniform({9}, -1, 1, tf::float32, 2);
  tf::Tensor v = tf::random::uniform({9}, 0, 1, tf::float32, 3);
  tf::GradientTape tape(tf::TapeOptions{.persistent = true});
  tape.watch(g);
  tf::Tensor traced = tf::reduce_sum(f(m, g, v));
  tf::Tensor eager = tf::reduce_sum(tree(m, g, v));
  check_close(tape.gradient(traced, g), tape.gradient(eager, g), 1e-5, 1e-6);
}

TEST_CASE("function: a bias over channels fuses with the chain it feeds", "[jit]") {
  tf::DeviceScope cpu("/cpu:0");  // rows repeated along leading dimensions: CPU fusion
  auto layer = [](const tf::Tensor& x, const tf::Tensor& b, const tf::Tensor& c) {
    return tf::nn::relu(tf::add(x, b) * c - 0.25f);  // add broadcasts b as bias_add does
  };
  auto f = tf::function(layer);
  struct Case {
    tf::TensorShape x, b;
  };
  // (N, C) with a (C) bias, NHWC with (C) and (W, C) rows, a row of one tile's size, one just
  // below it, and a longer one that tiles wrap around (60000 elements: split over threads).
  for (const Case& k : {Case{{33, 7}, {7}}, Case{{4, 5, 6, 3}, {3}}, Case{{4, 5, 6, 3}, {6, 3}},
                        Case{{3, 1024}, {1024}}, Case{{9, 1000}, {1000}},
                        Case{{40, 1500}, {1500}}})
    for (tf::DType dt : {tf::float32, tf::float64}) {
      INFO(k.x.to_string() << " + " << k.b.to_string() << " " << tf::dtype_name(dt));
      const tf::Tensor x = tf::random::uniform(k.x, -1, 1, dt, 1);
      const tf::Tensor b = tf::random::uniform(k.b, -1, 1, dt, 2);
      const tf::Tensor c = tf::cast(tf::constant(1.5f), dt);
      check_close(f(x, b, c), layer(x, b, c), 0, 0);  // the same loops: bit-identical
      const tf::Graph& g = f.get_concrete_function(tf::TensorSpec(k.x, dt), tf::TensorSpec(k.b, dt),
                                                   tf::TensorSpec({}, dt))
                               .graph();
      INFO(g.to_string());
      CHECK(g.num_nodes() == 1);
      // The gradient of the bias sums over the repetitions.
      tf::GradientTape tape(tf::TapeOptions{.persistent = true});
      tape.watch(b);
      const tf::Tensor traced = tf::reduce_sum(f(x, b, c) * x);
      const tf::Tensor eager = tf::reduce_sum(layer(x, b, c) * x);
      check_close(tape.gradient(traced, b), tape.gradient(eager, b), 1e-12, 1e-6);
    }
  // A column repeated along the last dimension is not a row: left unfused, still right.
  auto col = tf::function([](const tf::Tensor& x, const tf::Tensor& v) { return tf::exp(x + v); });
  const tf::Tensor x = tf::random::uniform({6, 4}, -1, 1, tf::float32, 3);
  const tf::Tensor v = tf::random::uniform({6, 1}, -1, 1, tf::float32, 4);
  check_close(col(x, v), tf::exp(x + v), 0, 0);
  CHECK(col.get_concrete_function(tf::TensorSpec({6, 4}), tf::TensorSpec({6, 1})).graph().num_nodes() ==
        2);
}

TEST_CASE("function: the 100-op chain becomes one node", "[jit]") {
  tf::DeviceScope cpu("/cpu:0");  // elementwise fusion is a CPU pass (GPU fusion: docs/function.md)
  auto chain = [](const tf::Tensor& x, const tf::Tensor& y) {
    tf::Tensor c = x;
    for (int i = 0; i < 50; ++i) c = tf::multiply(tf::add(c, y), y);
    return c;
  };
  auto f = tf::function(chain);
  tf::Tensor x = tf::random::uniform({2, 2}, -1, 1, tf::float32, 5);
  tf::Tensor y = tf::random::uniform({2, 2}, 0.5, 1, tf::float32, 6);
  check_close(f(x, y), chain(x, y), 0, 0);
  CHECK(f.get_concrete_function(tf::TensorSpec({2, 2}), tf::TensorSpec({2, 2})).graph().num_nodes() == 1);
  // float64 chains fuse too, with eager's float64 loops: bit-identical.
  tf::Tensor xd = tf::cast(x, tf::float64), yd = tf::cast(y, tf::float64);
  check_close(f(xd, yd), chain(xd, yd), 0, 0);
  CHECK(f.get_concrete_function(tf::TensorSpec({2, 2}, tf::float64),
                                tf::TensorSpec({2, 2}, tf::float64))
            .graph()
            .num_nodes() == 1);
  // Mixed dtypes never share a kernel: the cast ends the float32 chain.
  auto mixed = tf::function([](const tf::Tensor& a, const tf::Tensor& b) {
    return tf::exp(tf::cast(tf::sqrt(a * 2.0f), tf::float64) + b);
  });
  check_close(mixed(x, yd), tf::exp(tf::cast(tf::sqrt(x * 2.0f), tf::float64) + yd), 0, 0);
}

TEST_CASE("function: several threads may call one function", "[jit]") {
  auto f = tf::function([](const tf::Tensor& x) { return tf::tanh(x) * 2.0f + 1.0f; });
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      tf::Tensor x = tf::constant({0.1f * t, -0.2f, 0.3f});
      bool all = true;
      for (int i = 0; i < 50; ++i) {
        const auto got = f(x).numpy<float>();
        const auto want = (tf::tanh(x) * 2.0f + 1.0f).numpy<float>();
        all = all && got == want;
      }
      ok[t] = all;
    });
  for (auto& th : threads) th.join();
  CHECK(ok == std::vector<int>{1, 1, 1, 1});
  CHECK(f.tracing_count() >= 1);
  CHECK(f.tracing_count() <= 4);
}

TEST_CASE("function: threads tracing one signature at once keep one graph and do not warn",
          "[jit]") {
  // The body sleeps, so threads that start together all miss the cache and trace.
  auto slow = [](const tf::Tensor& x) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return x * 3.0f;
  };
  auto f = tf::function(slow);
  const std::string log = tf::testing::capture_stderr([&] {
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) threads.emplace_back([&] { (void)f(tf::ones({3})); });
    for (auto& th : threads) th.join();
  });
  CHECK(f.tracing_count() == 1);
  CHECK(log.find("triggered tf::function retracing") == std::string::npos);

  // get_concrete_function from two threads: both get the graph that is kept (the losing
  // thread's own trace was freed when the call returned).
  auto g = tf::function(slow);
  const tf::ConcreteFunction* got[2] = {nullptr, nullptr};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t)
    threads.emplace_back(
        [&, t] { got[t] = &g.get_concrete_function(tf::TensorSpec({3}, tf::float32)); });
  for (auto& th : threads) th.join();
  CHECK(got[0] == got[1]);
  CHECK(got[0]->graph().num_nodes() == got[1]->graph().num_nodes());
  CHECK(got[0] == &g.get_concrete_function(tf::TensorSpec({3}, tf::float32)));
}

TEST_CASE("function: None dimensions equal at the first call may differ later", "[jit]") {
  // Traced with a and b of one size, the gradient of a * b needs no reduction; called with a of
  // size 1 against b of size 4 it does (broadcasting): that call gets a graph of its own.
  const tf::TensorSpec vec({tf::None}, tf::float32);
  auto grad_a = tf::function(
      [](const tf::Tensor& a, const tf::Tensor& b) {
        tf::GradientTape tape;
        tape.watch(a);
        return tape.gradient(tf::reduce_sum(a * b), a);
      },
      tf::FunctionOptions{.input_signature = {vec, vec}});
  check_close(grad_a(tf::constant({1.0f, 2.0f}), tf::constant({3.0f, 4.0f})),
              tf::constant({3.0f, 4.0f}), 0, 0);
  check_close(grad_a(tf::constant({5.0f, 6.0f, 7.0f}), tf::constant({1.0f, 1.0f, 2.0f})),
              tf::constant({1.0f, 1.0f, 2.0f}), 0, 0);
  CHECK(grad_a.tracing_count() == 1);  // equal sizes: the generic trace serves them
  const tf::Tensor g = grad_a(tf::constant({10.0f}), tf::constant({1.0f, 2.0f, 3.0f, 4.0f}));
  CHECK(g.shape() == tf::TensorShape({1}));
  check_close(g, tf::constant({10.0f}), 0, 0);
  CHECK(grad_a.tracing_count() == 2);

  // Checks that only the C++ frontend makes (clip_by_value's bounds must broadcast to t) are
  // made again: the call raises as the eager op does.
  auto clip = tf::function([](const tf::Tensor& t, const tf::Tensor& lo,
                              const tf::Tensor& hi) { return tf::clip_by_value(t, lo, hi); },
                           tf::FunctionOptions{.input_signature = {vec, vec, vec}});
  check_close(clip(tf::constant({-1.0f, 0.5f, 3.0f}), tf::zeros({3}), tf::ones({3})),
              tf::constant({0.0f, 0.5f, 1.0f}), 0, 0);
  TF_REQUIRE_THROWS_CONTAINING(
      clip(tf::constant({5.0f}), tf::zeros({1}), tf::constant({1.0f, 2.0f, 3.0f, 4.0f})),
      tf::InvalidArgumentError, "does not broadcast");

  // A function whose None dimensions are independent still traces once for all of them.
  auto outer = tf::function(
      [](const tf::Tensor& a, const tf::Tensor& b) {
        return tf::matmul(tf::reshape(a, {-1, 1}), tf::reshape(b, {1, -1}));
      },
      tf::FunctionOptions{.input_signature = {vec, vec}});
  CHECK(outer(tf::ones({2}), tf::ones({2})).shape() == tf::TensorShape({2, 2}));
  CHECK(outer(tf::ones({1}), tf::ones({4})).shape() == tf::TensorShape({1, 4}));
  CHECK(outer.tracing_count() == 1);

  // A concrete function whose graph depends on the equality refuses other calls clearly.
  auto mul = tf::function([](const tf::Tensor& a, const tf::Tensor& b) {
    tf::GradientTape tape;
    tape.watch(a);
    return tape.gradient(tf::reduce_sum(a * b), a);
  });
  const auto& cf = mul.get_concrete_function(vec, vec);
  using Args = std::vector<tf::Tensor>;
  check_close(cf.call_flat(Args{tf::constant({1.0f, 2.0f}), tf::constant({3.0f, 4.0f})})[0],
              tf::constant({3.0f, 4.0f}), 0, 0);
  TF_REQUIRE_THROWS_CONTAINING(cf.call_flat(Args{tf::constant({1.0f}), tf::constant({3.0f, 4.0f})}),
                               tf::InvalidArgumentError, "depends on their equality");
  // Only the equalities the graph needs: x + y over (None, None) twice needs x and y to match
  // axis by axis, not all four sizes equal (every stand-in of get_concrete_function is 2).
  auto sum = tf::function([](const tf::Tensor& x, const tf::Tensor& y) { return x + y; });
  const tf::TensorSpec mat({tf::None, tf::None}, tf::float32);
  const auto& scf = sum.get_concrete_function(mat, mat);
  CHECK(scf.call_flat(Args{tf::ones({8, 16}), tf::ones({8, 16})})[0].shape() ==
        tf::TensorShape({8, 16}));
  TF_REQUIRE_THROWS_CONTAINING(scf.call_flat(Args{tf::ones({8, 16}), tf::ones({16, 8})}),
                               tf::InvalidArgumentError, "depends on their equality");
  // Sizes equal now that were not at the first call are fine (nothing relied on them).
  auto pair = tf::function([](const tf::Tensor& x, const tf::Tensor& y) { return x + y; },
                           tf::FunctionOptions{.reduce_retracing = true});
  (void)pair(tf::ones({4, 4, 7}), tf::ones({4, 4, 7}));
  (void)pair(tf::ones({5, 4, 7}), tf::ones({5, 4, 7}));  // opens axis 0: the generic trace
  (void)pair(tf::ones({7, 4, 7}), tf::ones({7, 4, 7}));
  CHECK(pair.tracing_count() == 2);
}

TEST_CASE("function: recursion while tracing", "[jit]") {
  // Through shrinking shapes each inner call has a signature of its own and the recursion ends
  // at its base case: one trace per length.
  std::function<tf::Tensor(const tf::Tensor&)> body;
  auto f = tf::function([&](const tf::Tensor& x) { return body(x); });
  body = [&](const tf::Tensor& x) -> tf::Tensor {
    const int64_t n = x.shape()[0];
    if (n == 1) return x * 2.0f;
    return f(tf::slice(x, {1}, {n - 1})) + tf::slice(x, {0}, {1});
  };
  tf::testing::check_values(f(tf::constant({1.0f, 2.0f, 3.0f, 4.0f})), {14}, 0, 0);
  tf::testing::check_values(f(tf::constant({5.0f, 6.0f, 7.0f, 8.0f})), {34}, 0, 0);
  CHECK(f.tracing_count() == 4);
  // With the same signature it would trace forever (a stack overflow): an error instead, and
  // the function stays usable.
  std::function<tf::Tensor(const tf::Tensor&)> again;
  auto g = tf::function([&](const tf::Tensor& x) { return again(x); },
                        tf::FunctionOptions{.name = "loop"});
  again = [&](const tf::Tensor& x) { return g(x) + 1.0f; };
  TF_REQUIRE_THROWS_CONTAINING(g(tf::ones({2})), tf::InvalidArgumentError,
                               "'loop' is called from inside its own trace with the same signature");
  again = [](const tf::Tensor& x) { return x + 1.0f; };
  tf::testing::check_values(g(tf::ones({2})), {2, 2}, 0, 0);
}

TEST_CASE("function: None dimensions of input_signature make one trace serve every size",
          "[jit][cuda]") {
  for (tf::Device dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    tf::Tensor w = tf::constant({{1.0f, -2.0f}, {0.5f, 1.0f}, {-1.0f, 0.25f}});
    tf::Tensor b = tf::constant({0.1f, -0.2f});
    int body_runs = 0;
    auto f = tf::function(
        [&](const tf::Tensor& x) {
          ++body_runs;
          return tf::reduce_sum(tf::nn::relu(tf::matmul(x, w) + b), 1);
        },
        tf::FunctionOptions{.input_signature = {tf::TensorSpec({tf::None, 3})}, .name = "dense"});
    for (int64_t n : {4, 1, 7, 4, 2}) {
      std::vector<double> v = tf::testing::random_values(static_cast<size_t>(n * 3), -1, 1,
                                                         static_cast<unsigned>(n));
      std::vector<float> vf(v.begin(), v.end());
      tf::Tensor x = tf::constant(vf, {n, 3});
      check_close(f(x), tf::reduce_sum(tf::nn::relu(tf::matmul(x, w) + b), 1));
    }
    CHECK(f.tracing_count() == 1);
    CHECK(body_runs == 2);  // the trace and its check at the next size
    const auto& cf = f.get_concrete_function(tf::TensorSpec({tf::None, 3}));
    CHECK(cf.graph().to_string().find("(None, 2)") != std::string::npos);
    check_close(cf.call_flat(std::vector<tf::Tensor>{tf::ones({3, 3})})[0],
                tf::reduce_sum(tf::nn::relu(tf::matmul(tf::ones({3, 3}), w) + b), 1));
  }
}

TEST_CASE("function: gradients of reduce_prod and gather trace once for a None batch",
          "[jit][cuda]") {
  // Their vjps build shapes from the primals; with None dimensions those must stay open (a
  // fixed shape would retrace at every batch size).
  for (tf::Device dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    const tf::Tensor table = tf::constant({{1.0f, 2.0f}, {3.0f, 4.0f}, {5.0f, 6.0f}});
    auto body = [&](const tf::Tensor& x, const tf::Tensor& ids) {
      tf::GradientTape tape(tf::TapeOptions{.persistent = true});
      tape.watch(x);
      tape.watch(table);
      const tf::Tensor y =
          tf::reduce_sum(tf::reduce_prod(x, 1)) + tf::reduce_sum(tf::gather(table, ids) * x);
      return std::vector<tf::Tensor>{tape.gradient(y, x), tape.gradient(y, table)};
    };
    auto f = tf::function(
        body, tf::FunctionOptions{.input_signature = {tf::TensorSpec({tf::None, 2}),
                                                      tf::TensorSpec({tf::None}, tf::int32)}});
    for (int64_t n : {3, 1, 5}) {
      std::vector<float> xv;
      std::vector<int32_t> iv;
      for (int64_t i = 0; i < n; ++i) {
        xv.push_back(0.5f + static_cast<float>(i));
        xv.push_back(i % 2 == 0 ? 0.0f : -1.5f);  // zeros too
        iv.push_back(static_cast<int32_t>(i % 3));
      }
      const tf::Tensor x = tf::constant(xv, {n, 2}), ids = tf::constant(iv, {n});
      const auto got = f(x, ids), want = body(x, ids);
      check_close(got[0], want[0]);
      check_close(got[1], want[1]);
    }
    CHECK(f.tracing_count() == 1);
  }
}

TEST_CASE("function: split slice concat pad and gather on axis 1 trace once for a None batch",
          "[jit][cuda]") {
  // Their pieces and gradients take the whole of every other dimension as -1 (the rest of it),
  // so the batch size is not baked into the graph (a recurrent layer's timesteps are slices).
  for (tf::Device dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    const tf::Tensor idx = tf::constant(std::vector<int32_t>{0, 5, 5, 2}, {4});
    auto body = [&](const tf::Tensor& x) {
      tf::GradientTape tape;
      tape.watch(x);
      const std::vector<tf::Tensor> parts = tf::split(x, 3, 1);
      const std::vector<tf::Tensor> uneven = tf::split(x, std::vector<int64_t>{1, -1}, 1);
      const tf::Tensor joined = tf::concat({parts[2], parts[0] * 2.0f, uneven[0]}, 1);
      const tf::Tensor window = tf::slice(x, {0, 1}, {-1, 3});
      const tf::Tensor picked = tf::gather(x, idx, 1);
      const tf::Tensor padded = tf::pad(x, {{0, 0}, {2, 1}});
      const tf::Tensor y = tf::reduce_sum(joined * joined) + tf::reduce_sum(window * window) +
                           tf::reduce_sum(picked * picked * picked) + tf::reduce_sum(uneven[1]) +
                           tf::reduce_sum(padded * padded * padded);
      return std::vector<tf::Tensor>{y, tape.gradient(y, x)};
    };
    auto f =
        tf::function(body, tf::FunctionOptions{.input_signature = {tf::TensorSpec({tf::None, 6})}});
    for (int64_t n : {3, 1, 5, 2}) {
      const std::vector<double> v =
          tf::testing::random_values(static_cast<size_t>(n * 6), -1, 1, static_cast<unsigned>(n));
      const tf::Tensor x = tf::constant(std::vector<float>(v.begin(), v.end()), {n, 6});
      const auto got = f(x), want = body(x);
      check_close(got[0], want[0]);
      check_close(got[1], want[1]);
    }
    CHECK(f.tracing_count() == 1);
  }
}

TEST_CASE("function: a body that computes shapes from a None dimension traces per shape", "[jit]") {
  auto f = tf::function(
      [](const tf::Tensor& x) { return tf::reshape(x, {x.shape()[0] * 2}) * 2.0f; },
      tf::FunctionOptions{.input_signature = {tf::TensorSpec({tf::None, 2})}, .name = "flat"});
  check_values(f(tf::ones({2, 2})), {2, 2, 2, 2});
  CHECK(f.tracing_count() == 1);
  check_values(f(tf::ones({3, 2})), {2, 2, 2, 2, 2, 2});
  CHECK(f.tracing_count() == 2);
  check_values(f(tf::ones({3, 2})), {2, 2, 2, 2, 2, 2});
  CHECK(f.tracing_count() == 2);
  tf::testing::require_error([&] { f.get_concrete_function(tf::TensorSpec({tf::None, 2})); },
                             {"flat", "reshape", "None dimensions"});
}

TEST_CASE("function: reduce_retracing opens the dimensions that vary", "[jit]") {
  auto f = tf::function([](const tf::Tensor& x) { return tf::reduce_max(x * x, 1); },
                        tf::FunctionOptions{.reduce_retracing = true});
  for (int64_t n : {2, 4, 6, 3, 2}) {
    tf::Tensor x = tf::reshape(tf::range(0.0, static_cast<double>(n * 3), 1.0, tf::float32), {n, 3});
    check_close(f(x), tf::reduce_max(x * x, 1));
  }
  CHECK(f.tracing_count() == 2);  // the first shape exactly, then one trace for (None, 3)
}

TEST_CASE("function: a traced train step with a None batch dimension traces once", "[jit]") {
  tf::random::set_seed(3);
  tf::Variable w(tf::random::normal({4, 3}), "w"), b(tf::zeros({3}), "b");
  tf::Variable w2(w.value(), "w2"), b2(b.value(), "b2");
  auto step_body = [](tf::Variable& wv, tf::Variable& bv, const tf::Tensor& x,
                      const tf::Tensor& y) {
    tf::GradientTape tape;
    tf::Tensor logits = tf::matmul(x, wv) + bv;
    tf::Tensor loss = tf::reduce_mean(tf::nn::sparse_softmax_cross_entropy_with_logits(y, logits));
    auto g = tape.gradient(loss, std::vector<tf::Variable>{wv, bv});
    wv.assign_sub(g[0] * 0.5f);
    bv.assign_sub(g[1] * 0.5f);
    return loss;
  };
  auto traced = tf::function(
      [&](const tf::Tensor& x, const tf::Tensor& y) { return step_body(w, b, x, y); },
      tf::FunctionOptions{.input_signature = {tf::TensorSpec({tf::None, 4}),
                                              tf::TensorSpec({tf::None}, tf::int32)},
                          .name = "train_step"});
  for (int64_t n : {8, 5, 8, 3}) {
    std::vector<double> xv = tf::testing::random_values(static_cast<size_t>(n * 4), -1, 1,
                                                        static_cast<unsigned>(n));
    std::vector<float> xf(xv.begin(), xv.end());
    std::vector<int32_t> yv;
    for (int64_t i = 0; i < n; ++i) yv.push_back(static_cast<int32_t>(i % 3));
    tf::Tensor x = tf::constant(xf, {n, 4});
    tf::Tensor y = tf::constant(yv, {n});
    tf::Tensor l_traced = traced(x, y);
    tf::Tensor l_eager = step_body(w2, b2, x, y);
    check_close(l_traced, l_eager, 1e-5, 1e-6);
    check_close(w.value(), w2.value(), 1e-5, 1e-6);
    check_close(b.value(), b2.value(), 1e-5, 1e-6);
  }
  CHECK(traced.tracing_count() == 1);
}

TEST_CASE("function: dropout in a graph for None dimensions draws its mask at each call's size",
          "[jit]") {
  tf::random::set_seed(11);
  auto f = tf::function([](const tf::Tensor& x) { return tf::nn::dropout(x, 0.5); },
                        tf::FunctionOptions{.input_signature = {tf::TensorSpec({tf::None, 8})}});
  std::vector<std::vector<float>> seen;
  for (int64_t n : {4, 6, 4}) {
    const std::vector<float> v = f(tf::ones({n, 8})).numpy<float>();
    REQUIRE(v.size() == static_cast<size_t>(n * 8));
    int zeros = 0;
    for (float e : v) {
      CHECK((e == 0.0f || e == 2.0f));
      zeros += e == 0.0f;
    }
    CHECK(zeros > 0);
    CHECK(zeros < n * 8);
    seen.push_back(v);
  }
  CHECK(f.tracing_count() == 1);
  CHECK(seen[0] != seen[2]);  // a new mask at every call
}

TEST_CASE("function: an undefined tensor argument is an error naming it", "[jit]") {
  auto f = tf::function([](const tf::Tensor& a, const tf::Tensor& b) { return a + b; },
                        tf::FunctionOptions{.name = "pair"});
  tf::testing::require_error([&] { f(tf::Tensor(), tf::ones({2})); },
                             {"pair", "tensor argument 0", "undefined"});
  tf::testing::require_error([&] { f(tf::ones({2}), tf::Tensor()); },
                             {"pair", "tensor argument 1", "undefined"});
  CHECK(f.tracing_count() == 0);
  check_values(f(tf::ones({2}), tf::ones({2})), {2, 2});
}

TEST_CASE("function: a graph runs only at the shapes it was traced for", "[jit]") {
  auto f = tf::function([](const tf::Tensor& x) { return tf::exp(x) * 2.0f + 1.0f; });
  const tf::ConcreteFunction& cf = f.get_concrete_function(tf::TensorSpec({2, 3}));
  // Larger, smaller and other-rank inputs would be read or written past their buffers.
  for (const tf::TensorShape& s : {tf::TensorShape({5, 3}), tf::TensorShape({1, 3}),
                                   tf::TensorShape({6}), tf::TensorShape({2, 3, 1})}) {
    const std::vector<tf::Tensor> args = {tf::ones(s)};
    tf::testing::require_error([&] { cf.call_flat(args); },
                               {"input 0 has shape " + s.to_string(), "traced for shape (2, 3)"});
    tf::testing::require_error([&] { cf.graph().run(args); }, {"input 0 has shape"});
  }
  check_close(cf.call_flat(std::vector<tf::Tensor>{tf::zeros({2, 3})})[0],
              tf::fill({2, 3}, 3.0f));
  CHECK(f.tracing_count() == 1);
}

TEST_CASE("function: a graph for None dimensions checks each call_flat", "[jit]") {
  auto f = tf::function([](const tf::Tensor& x) { return tf::reduce_sum(x * x, 1); },
                        tf::FunctionOptions{.name = "sq"});
  const tf::ConcreteFunction& cf = f.get_concrete_function(tf::TensorSpec({tf::None, 3}));
  using Args = std::vector<tf::Tensor>;
  tf::testing::require_error([&] { cf.call_flat(Args{}); },
                             {"sq", "takes 1 tensors", "passed 0"});
  tf::testing::require_error([&] { cf.call_flat(Args{tf::ones({2, 3}), tf::ones({2, 3})}); },
                             {"sq", "takes 1 tensors", "passed 2"});
  tf::testing::require_error([&] { cf.call_flat(Args{tf::Tensor()}); },
                             {"sq", "tensor argument 0 is undefined"});
  tf::testing::require_error([&] { cf.call_flat(Args{tf::ones({3})}); },
                             {"sq", "argument 0 has shape (3,)", "takes shape (None, 3)"});
  tf::testing::require_error([&] { cf.call_flat(Args{tf::ones({2, 3, 1})}); },
                             {"argument 0 has shape (2, 3, 1)", "(None, 3)"});
  tf::testing::require_error([&] { cf.call_flat(Args{tf::ones({2, 4})}); },
                             {"argument 0 has shape (2, 4)", "(None, 3)"});
  tf::testing::require_error([&] { cf.call_flat(Args{tf::ones({2, 3}, tf::float64)}); },
                             {"dtype float64", "dtype float32"});
  // The graph shown with None dimensions is not run directly.
  tf::testing::require_error([&] { cf.graph().run(Args{tf::ones({2, 3})}); },
                             {"traced for shape (None, 3)", "call_flat"});
  // After the refusals the graph still serves every size.
  for (int64_t n : {1, 4, 9}) {
    tf::Tensor x = tf::ones({n, 3});
    check_close(cf.call_flat(Args{x})[0], tf::reduce_sum(x * x, 1));
  }
  CHECK(f.tracing_count() == 1);
}

TEST_CASE("function: get_concrete_function for None dimensions traces once per signature",
          "[jit]") {
  int body_runs = 0;
  auto f = tf::function([&](const tf::Tensor& x) {
    ++body_runs;
    return x * 2.0f;
  });
  const tf::ConcreteFunction* first = &f.get_concrete_function(tf::TensorSpec({tf::None}));
  CHECK(f.tracing_count() == 1);
  CHECK(body_runs == 2);  // the two probes of one trace
  for (int i = 0; i < 5; ++i)
    CHECK(&f.get_concrete_function(tf::TensorSpec({tf::None})) == first);
  CHECK(f.tracing_count() == 1);
  CHECK(body_runs == 2);
  // Another dtype or rank is another graph, never the float32 one.
  const tf::ConcreteFunction& f64 =
      f.get_concrete_function(tf::TensorSpec({tf::None}, tf::float64));
  const tf::ConcreteFunction& r2 = f.get_concrete_function(tf::TensorSpec({tf::None, tf::None}));
  CHECK(&f64 != first);
  CHECK(&r2 != first);
  CHECK(f.tracing_count() == 3);
  const tf::Tensor d = tf::constant(std::vector<double>{1.5, -2}, {2});
  const tf::Tensor out = f64.call_flat(std::vector<tf::Tensor>{d})[0];
  CHECK(out.dtype() == tf::float64);
  check_values(out, {3, -4});
  check_values(r2.call_flat(std::vector<tf::Tensor>{tf::ones({2, 2})})[0], {2, 2, 2, 2});
  check_values(first->call_flat(std::vector<tf::Tensor>{tf::ones({3})})[0], {2, 2, 2});

  // A body that cannot serve every size is refused each time, without tracing again.
  auto g = tf::function([](const tf::Tensor& x) { return tf::reshape(x, {x.shape()[0]}); });
  for (int i = 0; i < 3; ++i)
    tf::testing::require_error([&] { g.get_concrete_function(tf::TensorSpec({tf::None})); },
                               {"None dimensions"});
  CHECK(g.tracing_count() == 1);
}

TEST_CASE("function: get_concrete_function checks its specs against input_signature", "[jit]") {
  auto f = tf::function([](const tf::Tensor& x) { return tf::reduce_sum(x, 1); },
                        tf::FunctionOptions{.input_signature = {tf::TensorSpec({tf::None, 3})},
                                            .name = "rows"});
  // The spec is reported as given (None), not as the stand-in traced for it.
  tf::testing::require_error([&] { f.get_concrete_function(tf::TensorSpec({tf::None, 4})); },
                             {"rows", "spec 0 is (None, 4) float32", "(None, 3)"});
  tf::testing::require_error(
      [&] { f.get_concrete_function(tf::TensorSpec({tf::None, 3}, tf::float64)); },
      {"float64", "float32"});
  CHECK(f.tracing_count() == 0);
  check_values(f.get_concrete_function(tf::TensorSpec({tf::None, 3}))
                   .call_flat(std::vector<tf::Tensor>{tf::ones({2, 3})})[0],
               {3, 3});
  check_values(f.get_concrete_function(tf::TensorSpec({4, 3}))
                   .call_flat(std::vector<tf::Tensor>{tf::ones({4, 3})})[0],
               {3, 3, 3, 3});
  // A fixed signature dimension does not accept a None spec: the graph must serve all sizes.
  auto fixed = tf::function([](const tf::Tensor& x) { return x + 1.0f; },
                            tf::FunctionOptions{.input_signature = {tf::TensorSpec({2, 3})}});
  tf::testing::require_error([&] { fixed.get_concrete_function(tf::TensorSpec({tf::None, 3})); },
                             {"spec 0 is (None, 3)", "(2, 3)"});
}

TEST_CASE("function: a C++ value where a signature expects a tensor says so", "[jit]") {
  auto f = tf::function([](const tf::Tensor& x) { return x * 2.0f; },
                        tf::FunctionOptions{.input_signature = {tf::TensorSpec(tf::TensorShape{})},
                                            .name = "twice"});
  tf::testing::require_error(
      [&] { f(1.5f); },
      {"twice", "has 1 tensors", "passed 0 and 1 plain C++ value", "tf::constant"});
  check_values(f(tf::constant(1.5f)), {3});
}

TEST_CASE("tf::function returns undefined results as TF returns None", "[jit][cpu]") {
  // A gradient that does not reach its source is undefined (TF's None); the traced function
  // gives it back in its place, in vectors and tuples, at the trace and at every replay.
  tf::Variable w(tf::constant({1.0f, 2.0f}), "w"), unused(tf::constant({3.0f}), "unused");
  auto grads = tf::function([&](const tf::Tensor& x) {
    tf::GradientTape tape({.persistent = true});
    const tf::Tensor loss = tf::reduce_sum(x * w.value());
    return std::vector<tf::Tensor>{loss, tape.gradient(loss, w), tape.gradient(loss, unused)};
  });
  for (int call = 0; call < 3; ++call) {
    const std::vector<tf::Tensor> r = grads(tf::constant({3.0f, 4.0f}));
    REQUIRE(r.size() == 3);
    check_values(r[0], {11.0});
    check_values(r[1], {3.0, 4.0});
    CHECK_FALSE(r[2].defined());
  }
  auto mixed = tf::function([](const tf::Tensor& x) {
    return std::tuple<tf::Tensor, std::vector<tf::Tensor>, tf::Tensor>{
        tf::Tensor(), {x * 2.0f, tf::Tensor(), x + 1.0f}, tf::Tensor()};
  });
  for (int call = 0; call < 2; ++call) {
    const auto [a, v, b] = mixed(tf::constant({1.0f}));
    CHECK_FALSE(a.defined());
    CHECK_FALSE(b.defined());
    REQUIRE(v.size() == 3);
    check_values(v[0], {2.0});
    CHECK_FALSE(v[1].defined());
    check_values(v[2], {2.0});
  }
  auto nothing = tf::function([](const tf::Tensor&) { return tf::Tensor(); });
  CHECK_FALSE(nothing(tf::ones({2})).defined());
}
