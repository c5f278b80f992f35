// CUDA-graph replay of traced steps that read and write variables (jit/cuda_graph.h): which
// graphs qualify (checked on every build), writes that stay in the variables' buffers (what a
// captured graph needs; checked on the CPU too), and on a GPU captured train steps against the
// same steps replayed node by node, recapture after a variable's buffer moved, and the steps
// that must not capture.
#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "autograd/tape.h"
#include "autograd/variable.h"
#include "core/error.h"
#include "jit/cuda_graph.h"
#include "jit/function.h"
#include "keras/losses.h"
#include "keras/metrics.h"
#include "keras/model.h"
#include "keras/optimizers.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/linalg.h"
#include "ops/movement.h"
#include "ops/nn.h"
#include "ops/print.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "support/testing.h"

namespace tf = tapeflow;
namespace K = tapeflow::keras;
using tf::testing::check_close;

namespace {

bool gpu_or_warn() {
  if (!tf::testing::has_gpu()) {
    WARN("no GPU on this machine: the CUDA-graph cases are compiled but not run here");
    return false;
  }
  return !tf::testing::jit_compile_forced_off("captured CUDA graphs");
}

const void* buffer_of(const tf::Variable& v) {
  return tf::detail::variable_buffer(v.handle_id()).data;
}

using StepFn = std::function<tf::Tensor(const tf::Tensor&, const tf::Tensor&)>;
const tf::Device kCpu{};
const tf::Device kGpu{tf::DeviceType::GPU, 0};

enum class Update { Sgd, Momentum, KerasMomentum, KerasAdam };

const char* update_name(Update u) {
  switch (u) {
    case Update::Sgd:
      return "SGD";
    case Update::Momentum:
      return "momentum (plain assignments)";
    case Update::KerasMomentum:
      return "Keras SGD with momentum";
    case Update::KerasAdam:
      return "Keras Adam";
  }
  return "";
}

// A 16-8-3 MLP with its variables on one device and one of four ways to update them.
struct Net {
  tf::Device device;
  std::vector<tf::Variable> vars, slots;
  K::optimizers::Optimizer opt;
  Update update;

  // Initial values drawn from fixed seeds, or those of `like`.
  Net(tf::Device d, Update u, const Net* like = nullptr) : device(d), update(u) {
    tf::DeviceScope scope(device);
    if (like) {
      for (const tf::Variable& v : like->vars) vars.emplace_back(v.value(), "w");
    } else {
      vars.emplace_back(tf::random::normal({16, 8}, 0.0, 0.3, tf::float32, 1), "w1");
      vars.emplace_back(tf::random::normal({8}, 0.0, 0.1, tf::float32, 2), "b1");
      vars.emplace_back(tf::random::normal({8, 3}, 0.0, 0.3, tf::float32, 3), "w2");
      vars.emplace_back(tf::zeros({3}), "b2");
    }
    for (const tf::Variable& v : vars) slots.emplace_back(tf::zeros(v.shape()), "m");
    if (u == Update::KerasMomentum) opt = K::optimizers::SGD(0.05, 0.9);
    if (u == Update::KerasAdam) opt = K::optimizers::Adam(0.01);
  }

  tf::Tensor step(const tf::Tensor& x, const tf::Tensor& y) {
    tf::GradientTape tape;
    const tf::Tensor h = tf::nn::relu(tf::nn::bias_add(tf::matmul(x, vars[0]), vars[1]));
    const tf::Tensor logits = tf::nn::bias_add(tf::matmul(h, vars[2]), vars[3]);
    const tf::Tensor loss =
        tf::reduce_mean(tf::nn::sparse_softmax_cross_entropy_with_logits(y, logits));
    const std::vector<tf::Tensor> grads = tape.gradient(loss, vars);
    switch (update) {
      case Update::Sgd:
        for (size_t i = 0; i < vars.size(); ++i) vars[i].assign_sub(grads[i] * 0.05f);
        break;
      case Update::Momentum:
        for (size_t i = 0; i < vars.size(); ++i) {
          slots[i].assign(slots[i].value() * 0.9f - grads[i] * 0.05f);
          vars[i].assign_add(slots[i].value());
        }
        break;
      case Update::KerasMomentum:
      case Update::KerasAdam:
        opt.apply_gradients(grads, vars);
        break;
    }
    return loss;
  }

  tf::Function<StepFn> traced(bool jit_compile) {
    return tf::function(
        StepFn([this](const tf::Tensor& x, const tf::Tensor& y) { return step(x, y); }),
        tf::FunctionOptions{.jit_compile = jit_compile});
  }
};

struct Batch {
  tf::Tensor x, y;
};
Batch batch(tf::Device d, int k) {
  tf::DeviceScope scope(d);
  return {tf::random::uniform({32, 16}, -1, 1, tf::float32, 100 + k),
          tf::random::uniform({32}, 0, 3, tf::int64, 200 + k)};
}

const tf::Graph& step_graph(const tf::Function<StepFn>& f) {
  return f.get_concrete_function(tf::TensorSpec({32, 16}), tf::TensorSpec({32}, tf::int64)).graph();
}

const tf::jit::CudaGraphStats graph_stats(const tf::Graph& g) {
  INFO(g.cuda_graph_note());
  REQUIRE(g.cuda_graph() != nullptr);
  return tf::jit::cuda_graph_stats(*g.cuda_graph());
}

}  // namespace

TEST_CASE("CUDA graphs: variable reads and writes may be captured, other side effects not",
          "[jit][cpu]") {
  tf::DeviceScope cpu("/cpu:0");
  for (Update u : {Update::Sgd, Update::Momentum, Update::KerasMomentum, Update::KerasAdam}) {
    INFO(update_name(u));
    Net net(kCpu, u);
    auto f = net.traced(false);
    const Batch b = batch(net.device, 0);
    f(b.x, b.y);
    const tf::Graph& g = step_graph(f);
    INFO(g.to_string());
    tf::jit::GraphVariables vars;
    CHECK(tf::jit::capture_blocker(g, &vars).empty());
    CHECK(vars.read.size() >= 4);
    // Every weight is written; momentum and Adam also write their slots (and Keras its
    // iteration count).
    for (const tf::Variable& v : net.vars)
      CHECK(std::find(vars.written.begin(), vars.written.end(), v.handle_id()) !=
            vars.written.end());
    CHECK(vars.written.size() >= (u == Update::Sgd ? 4u : 8u));
  }

  tf::Variable v(tf::ones({4}));
  auto printing = tf::function([&](const tf::Tensor& x) {
    tf::print("x:", x);
    return x * v;
  });
  tf::Variable w(tf::ones({4}));
  auto drawing = tf::function([&](const tf::Tensor& x) {
    w.assign_add(x);
    return x + tf::random::uniform({4}, 0, 1, tf::float32, 5);
  });
  const tf::Tensor x = tf::ones({4});
  printing(x);
  drawing(x);
  tf::jit::GraphVariables vars;
  const std::string why_print =
      tf::jit::capture_blocker(printing.get_concrete_function(tf::TensorSpec({4})).graph(), &vars);
  CHECK(why_print.find("print") != std::string::npos);
  CHECK(why_print.find("side effects") != std::string::npos);
  const std::string why_random =
      tf::jit::capture_blocker(drawing.get_concrete_function(tf::TensorSpec({4})).graph(), &vars);
  CHECK(why_random.find("random_uniform") != std::string::npos);
}

TEST_CASE("CUDA graphs: inside a VariableWritesInPlaceScope writes stay in the buffer or fail",
          "[jit][cpu][cuda]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    INFO(device.to_string());
    tf::DeviceScope scope(device);
    tf::Variable v(tf::constant(std::vector<float>{1, 2, 3, 4}, {4}), "v");
    const void* buffer = buffer_of(v);
    const tf::Tensor value = tf::constant(std::vector<float>{5, 6, 7, 8}, {4});
    {
      tf::detail::VariableWritesInPlaceScope in_place;
      v.assign(value);  // copied in: `value` keeps its own buffer
      CHECK(buffer_of(v) == buffer);
      v.assign_add(value);
      CHECK(buffer_of(v) == buffer);
      CHECK(tf::detail::variable_buffer(v.handle_id()).unshared);
    }
    tf::testing::check_values(v.value(), {10, 12, 14, 16}, 0, 0);
    tf::testing::check_values(value, {5, 6, 7, 8}, 0, 0);
    // Outside the scope an assignment of a whole tensor adopts its buffer.
    v.assign(value * 1.0f);
    CHECK(buffer_of(v) != buffer);

    // A snapshot shares the buffer: the write fails before anything changes.
    buffer = buffer_of(v);
    const tf::Tensor snapshot = v.value();
    CHECK_FALSE(tf::detail::variable_buffer(v.handle_id()).unshared);
    {
      tf::detail::VariableWritesInPlaceScope in_place;
      TF_REQUIRE_THROWS_CONTAINING(v.assign(value * 2.0f), tf::FailedPreconditionError,
                                   "written in place");
      TF_REQUIRE_THROWS_CONTAINING(v.assign_add(value), tf::FailedPreconditionError,
                                   "written in place");
    }
    CHECK(buffer_of(v) == buffer);
    tf::testing::check_values(snapshot, {5, 6, 7, 8}, 0, 0);
    tf::testing::check_values(v.value(), {5, 6, 7, 8}, 0, 0);
    // What a capture does first: the variable gets a copy of its own, the snapshot keeps the
    // old buffer; then writes in place succeed.
    tf::detail::unshare_variable(v.handle_id());
    CHECK(buffer_of(v) != buffer);
    CHECK(snapshot.raw_data() == buffer);
    CHECK(tf::detail::variable_buffer(v.handle_id()).unshared);
    buffer = buffer_of(v);
    tf::detail::unshare_variable(v.handle_id());  // nothing to do now
    CHECK(buffer_of(v) == buffer);
    {
      tf::detail::VariableWritesInPlaceScope in_place;
      v.assign_add(value);
    }
    CHECK(buffer_of(v) == buffer);
    tf::testing::check_values(v.value(), {10, 12, 14, 16}, 0, 0);
    tf::testing::check_values(snapshot, {5, 6, 7, 8}, 0, 0);

    // The fused update of a traced step (Variable::update) obeys the scope too. Replayed node
    // by node: a CUDA-graph capture (jit_compile, which gpu_check.sh forces on for a second
    // pass with TAPEFLOW_JIT_COMPILE=1) would give w a copy of its own first, and succeed.
    const tf::testing::EnvScope graphs_off("TAPEFLOW_CUDA_GRAPHS", "0");
    tf::Variable w(tf::ones({3, 2}), "w");
    auto f = tf::function([&](const tf::Tensor& a, const tf::Tensor& b) {
      w.assign_sub(tf::matmul(a, b) * 0.5f);
      return tf::reduce_sum(a);
    });
    const tf::Tensor a = tf::ones({3, 4}), b = tf::ones({4, 2});
    f(a, b);
    const void* wb = buffer_of(w);
    const tf::Tensor held = w.value();
    {
      tf::detail::VariableWritesInPlaceScope in_place;
      TF_REQUIRE_THROWS_CONTAINING(f(a, b), tf::FailedPreconditionError, "'w:0' must be written");
    }
    check_close(w.value(), tf::fill({3, 2}, tf::Tensor(-1.0f)), 0, 0);
    check_close(held, w.value(), 0, 0);
    CHECK(buffer_of(w) == wb);
  }
}

TEST_CASE("CUDA graphs: traced train steps write every variable in place, call after call",
          "[jit][cpu]") {
  // What a captured step relies on, checked on the CPU: replayed node by node inside a
  // VariableWritesInPlaceScope (as while capturing), every read of a variable is released
  // before the variable is written, so no write needs a copy, and the values are those of the
  // same step replayed normally.
  tf::DeviceScope cpu("/cpu:0");
  for (Update u : {Update::Sgd, Update::Momentum, Update::KerasMomentum, Update::KerasAdam}) {
    INFO(update_name(u));
    Net net(kCpu, u), twin(kCpu, u, &net);
    auto f = net.traced(false);
    auto g = twin.traced(false);
    std::vector<const void*> buffers;
    for (int call = 0; call < 4; ++call) {
      INFO("call " << call);
      const Batch b = batch(net.device, call);
      tf::Tensor loss;
      {
        tf::detail::VariableWritesInPlaceScope in_place;
        loss = f(b.x, b.y);
      }
      check_close(loss, g(b.x, b.y), 0, 0);
      for (size_t i = 0; i < net.vars.size(); ++i)
        check_close(net.vars[i].value(), twin.vars[i].value(), 0, 0);
      std::vector<const void*> now;
      for (const tf::Variable& v : net.vars) now.push_back(buffer_of(v));
      for (const tf::Variable& v : net.slots) now.push_back(buffer_of(v));
      if (call > 1) CHECK(now == buffers);
      buffers = now;
    }
  }
}

TEST_CASE("CUDA graphs: a Keras model's train step with metrics writes in place", "[jit][cpu]") {
  // What Keras fit's step does (keras/training.cpp), traced for one batch shape: the model's
  // forward pass, Adam, a loss tracker and an accuracy metric. Every variable it writes (the
  // weights, Adam's slots and iteration count, the metrics' totals and counts) keeps its buffer
  // from call to call inside a VariableWritesInPlaceScope, with the values of a twin replayed
  // normally, and nothing else in the step keeps it from being captured.
  tf::DeviceScope cpu("/cpu:0");
  struct Trainer {
    K::Sequential model;
    K::optimizers::Optimizer opt = K::optimizers::Adam(0.02);
    K::losses::Loss loss = K::losses::SparseCategoricalCrossentropy(true);
    K::metrics::Mean tracker{"loss"};
    K::metrics::SparseCategoricalAccuracy accuracy;
    Trainer() {
      tf::random::set_seed(7);
      model = K::Sequential({K::layers::Dense(8, "relu"), K::layers::Dense(3)});
      model(tf::zeros({1, 16}));  // builds the weights
    }
    tf::Tensor step(const tf::Tensor& x, const tf::Tensor& y) {
      tf::Tensor logits, value;
      std::vector<tf::Variable> vars;
      std::vector<tf::Tensor> grads;
      {
        tf::GradientTape tape;
        logits = model(x, true);
        value = loss(y, logits);
        vars = model.trainable_variables();
        grads = tape.gradient(value, vars);
      }
      opt.apply_gradients(grads, vars);
      tracker.update_state(value);
      accuracy.update_state(y, logits);
      return value;
    }
    std::vector<tf::Variable> written() const {
      std::vector<tf::Variable> all = model.trainable_variables();
      for (const K::metrics::Metric* m : {static_cast<const K::metrics::Metric*>(&tracker),
                                          static_cast<const K::metrics::Metric*>(&accuracy)})
        for (const tf::Variable& v : m->variables()) all.push_back(v);
      all.push_back(opt.iterations());
      return all;
    }
  };
  Trainer net, twin;
  auto f = tf::function([&](const tf::Tensor& x, const tf::Tensor& y) { return net.step(x, y); });
  auto g = tf::function([&](const tf::Tensor& x, const tf::Tensor& y) { return twin.step(x, y); });
  std::vector<const void*> buffers;
  for (int call = 0; call < 4; ++call) {
    INFO("call " << call);
    const Batch b = batch(kCpu, call);
    tf::Tensor value;
    {
      tf::detail::VariableWritesInPlaceScope in_place;
      value = f(b.x, b.y);
    }
    check_close(value, g(b.x, b.y), 0, 0);
    check_close(net.accuracy.result(), twin.accuracy.result(), 0, 0);
    check_close(net.tracker.result(), twin.tracker.result(), 0, 0);
    const std::vector<tf::Variable> vars = net.written(), twins = twin.written();
    REQUIRE(vars.size() == twins.size());
    std::vector<const void*> now;
    for (size_t i = 0; i < vars.size(); ++i) {
      check_close(vars[i].value(), twins[i].value(), 0, 0);
      now.push_back(buffer_of(vars[i]));
    }
    if (call > 1) CHECK(now == buffers);
    buffers = now;
  }
  const tf::Graph& graph =
      f.get_concrete_function(tf::TensorSpec({32, 16}), tf::TensorSpec({32}, tf::int64)).graph();
  INFO(graph.to_string());
  tf::jit::GraphVariables vars;
  CHECK(tf::jit::capture_blocker(graph, &vars).empty());
  for (const tf::Variable& v : net.written())
    CHECK(std::find(vars.written.begin(), vars.written.end(), v.handle_id()) != vars.written.end());
}

TEST_CASE("CUDA graphs: train steps replay as one captured graph [cuda]", "[jit][cuda]") {
  if (!gpu_or_warn()) return;
  const tf::Device gpu = kGpu;
  tf::DeviceScope scope(gpu);
  for (Update u : {Update::Sgd, Update::Momentum, Update::KerasMomentum, Update::KerasAdam}) {
    INFO(update_name(u));
    // The same step with jit_compile, captured, and replayed node by node.
    Net net(gpu, u), twin(gpu, u, &net);
    auto f = net.traced(true);
    auto g = twin.traced(true);
    std::vector<const void*> buffers;
    for (int call = 0; call < 6; ++call) {
      INFO("call " << call);
      const Batch b = batch(gpu, call);
      const tf::Tensor loss = f(b.x, b.y);
      tf::Tensor want;
      {
        tf::testing::EnvScope off("TAPEFLOW_CUDA_GRAPHS", "0");  // read when g traces
        want = g(b.x, b.y);
      }
      check_close(loss, want, 1e-5, 1e-6);
      for (size_t i = 0; i < net.vars.size(); ++i)
        check_close(net.vars[i].value(), twin.vars[i].value(), 1e-5, 1e-6);
      std::vector<const void*> now;
      for (const tf::Variable& v : net.vars) now.push_back(buffer_of(v));
      if (call > 1) CHECK(now == buffers);
      buffers = now;
    }
    const tf::Graph& graph = step_graph(f);
    INFO(graph.to_string());
    const tf::jit::CudaGraphStats st = graph_stats(graph);
    INFO(st.failure);
    CHECK(st.captured);
    CHECK_FALSE(st.failed);
    CHECK(st.captures == 1);
    CHECK(st.launches == 5);  // the first call runs node by node, the second captures
    CHECK(step_graph(g).cuda_graph() == nullptr);
  }
}

TEST_CASE("CUDA graphs: a variable's buffer that moved between calls is captured again [cuda]",
          "[jit][cuda]") {
  if (!gpu_or_warn()) return;
  const tf::Device gpu = kGpu;
  tf::DeviceScope scope(gpu);
  Net net(gpu, Update::Momentum), twin(gpu, Update::Momentum, &net);
  auto f = net.traced(true);
  auto g = twin.traced(true);
  auto both = [&](int k) {
    const Batch b = batch(gpu, k);
    const tf::Tensor loss = f(b.x, b.y);
    tf::testing::EnvScope off("TAPEFLOW_CUDA_GRAPHS", "0");
    check_close(loss, g(b.x, b.y), 1e-5, 1e-6);
    for (size_t i = 0; i < net.vars.size(); ++i) {
      check_close(net.vars[i].value(), twin.vars[i].value(), 1e-5, 1e-6);
      check_close(net.slots[i].value(), twin.slots[i].value(), 1e-5, 1e-6);
    }
  };
  for (int k = 0; k < 3; ++k) both(k);
  CHECK(graph_stats(step_graph(f)).captures == 1);

  // Assigned outside the function (a whole tensor: the variable adopts its buffer).
  const tf::Tensor w = tf::random::normal({16, 8}, 0.0, 0.3, tf::float32, 9);
  net.vars[0].assign(w * 1.0f);
  twin.vars[0].assign(w * 1.0f);
  for (int k = 3; k < 6; ++k) both(k);
  CHECK(graph_stats(step_graph(f)).captures == 2);

  // A snapshot held across calls keeps its value (the variable gets a copy of its own, and the
  // graph is captured again with it).
  const tf::Tensor snapshot = net.vars[2].value();
  const tf::Tensor copy = snapshot * 1.0f;
  for (int k = 6; k < 9; ++k) both(k);
  check_close(snapshot, copy, 0, 0);
  const tf::jit::CudaGraphStats st = graph_stats(step_graph(f));
  INFO(st.failure);
  CHECK_FALSE(st.failed);
  CHECK(st.captured);
  CHECK(st.captures == 3);
  CHECK(st.launches == 8);  // every call but the first
}

TEST_CASE(
    "CUDA graphs: reads of variables as results, and reads a later write would change "
    "[cuda]",
    "[jit][cuda]") {
  if (!gpu_or_warn()) return;
  tf::DeviceScope scope("/gpu:0");
  // The value after the update is a result: captured, and every call returns a copy.
  tf::Variable v(tf::zeros({5}), "v");
  auto after = tf::function(
      [&](const tf::Tensor& x) {
        v.assign_add(x);
        return v.value();
      },
      tf::FunctionOptions{.jit_compile = true});
  const tf::Tensor x = tf::ones({5});
  std::vector<tf::Tensor> results;
  for (int call = 0; call < 4; ++call) results.push_back(after(x));
  for (int call = 0; call < 4; ++call)
    check_close(results[call], tf::fill({5}, tf::Tensor(static_cast<float>(call + 1))), 0, 0);
  const tf::jit::CudaGraphStats sa =
      graph_stats(after.get_concrete_function(tf::TensorSpec({5})).graph());
  INFO(sa.failure);
  CHECK(sa.captured);

  // The value before the update, used after it: writing in place would change it, so the
  // capture fails (before any variable changes) and every call runs node by node.
  tf::Variable u(tf::zeros({5}), "u");
  auto before = tf::function(
      [&](const tf::Tensor& y) {
        const tf::Tensor old = u.value();
        u.assign_add(y);
        return old * 2.0f;
      },
      tf::FunctionOptions{.jit_compile = true});
  for (int call = 0; call < 4; ++call)
    check_close(before(x), tf::fill({5}, tf::Tensor(2.0f * static_cast<float>(call))), 0, 0);
  check_close(u.value(), tf::fill({5}, tf::Tensor(4.0f)), 0, 0);
  const tf::jit::CudaGraphStats sb =
      graph_stats(before.get_concrete_function(tf::TensorSpec({5})).graph());
  CHECK(sb.failed);
  CHECK_FALSE(sb.captured);
  CHECK(sb.failure.find("written in place") != std::string::npos);
}

TEST_CASE("CUDA graphs: lookups and labels inside captured steps [cuda]", "[jit][cuda]") {
  if (!gpu_or_warn()) return;
  tf::DeviceScope scope("/gpu:0");
  // An embedding-style step (gather, its scatter-add gradient, an update): captured, with the
  // values of the same step replayed node by node.
  auto make = [](tf::Variable& table) {
    return tf::function(
        [&table](const tf::Tensor& ids) {
          tf::GradientTape tape;
          const tf::Tensor rows = tf::gather(table, ids);
          const tf::Tensor loss = tf::reduce_sum(rows * rows);
          table.assign_sub(tape.gradient(loss, std::vector<tf::Variable>{table})[0] * 0.1f);
          return loss;
        },
        tf::FunctionOptions{.jit_compile = true});
  };
  const tf::Tensor init = tf::random::normal({10, 4}, 0.0, 1.0, tf::float32, 11);
  tf::Variable table(init, "table"), twin_table(init, "twin_table");
  auto f = make(table);
  auto g = make(twin_table);
  const tf::Tensor ids = tf::constant(std::vector<int32_t>{3, 1, 3, 9, 0}, {5});
  for (int call = 0; call < 4; ++call) {
    INFO("call " << call);
    const tf::Tensor loss = f(ids);
    tf::testing::EnvScope off("TAPEFLOW_CUDA_GRAPHS", "0");
    check_close(loss, g(ids), 1e-5, 1e-6);
    check_close(table.value(), twin_table.value(), 1e-5, 1e-6);
  }
  const tf::jit::CudaGraphStats st =
      graph_stats(f.get_concrete_function(tf::TensorSpec({5}, tf::int32)).graph());
  INFO(st.failure);
  CHECK(st.captured);

  // Nothing is checked on the host inside a captured graph: an out-of-range label gives a NaN
  // row and an out-of-range index zeros, as TF's GPU kernels; node by node they raise.
  auto xent = [](const tf::Tensor& labels, const tf::Tensor& logits, const tf::Tensor& ids) {
    return std::vector<tf::Tensor>{tf::nn::sparse_softmax_cross_entropy_with_logits(labels, logits),
                                   tf::gather(logits, ids)};
  };
  auto captured = tf::function(xent, tf::FunctionOptions{.jit_compile = true});
  const tf::Tensor logits = tf::random::normal({3, 4}, 0.0, 1.0, tf::float32, 12);
  const tf::Tensor good = tf::constant(std::vector<int32_t>{0, 3, 1}, {3});
  const tf::Tensor rows = tf::constant(std::vector<int32_t>{2, 0}, {2});
  for (int call = 0; call < 2; ++call) {
    const std::vector<tf::Tensor> got = captured(good, logits, rows);
    const std::vector<tf::Tensor> want = xent(good, logits, rows);
    check_close(got[0], want[0], 1e-6, 1e-6);
    check_close(got[1], want[1], 0, 0);
  }
  const tf::Tensor bad = tf::constant(std::vector<int32_t>{0, 7, 1}, {3});
  const tf::Tensor far = tf::constant(std::vector<int32_t>{2, 5}, {2});
  const std::vector<tf::Tensor> got = captured(bad, logits, far);
  const std::vector<float> loss = got[0].numpy<float>();
  CHECK(std::isnan(loss[1]));
  CHECK_FALSE(std::isnan(loss[0]));
  const std::vector<float> picked = got[1].numpy<float>();
  for (size_t k = 4; k < 8; ++k) CHECK(picked[k] == 0.0f);
  TF_REQUIRE_THROWS_CONTAINING(xent(bad, logits, rows), tf::InvalidArgumentError,
                               "outside the valid range");
  TF_REQUIRE_THROWS_CONTAINING(xent(good, logits, far), tf::InvalidArgumentError, "not in [0");
  const tf::jit::CudaGraphStats sx =
      graph_stats(captured
                      .get_concrete_function(tf::TensorSpec({3}, tf::int32), tf::TensorSpec({3, 4}),
                                             tf::TensorSpec({2}, tf::int32))
                      .graph());
  CHECK(sx.captured);
  CHECK(sx.launches == 2);
}

TEST_CASE("CUDA graphs: a convolution's training step is captured with its gradients [cuda]",
          "[jit][cuda]") {
  if (!gpu_or_warn()) return;
  tf::DeviceScope scope("/gpu:0");
  // cuDNN's backward convolutions must run on the capture stream: on another stream they ran
  // once while capturing, outside the graph, and every replay returned their stale results.
  auto make = [](tf::Variable& w) {
    return tf::function(
        [&w](const tf::Tensor& x) {
          tf::GradientTape tape;
          const tf::Tensor wv = w.value();
          tape.watch(std::vector<tf::Tensor>{x, wv});
          const tf::Tensor y = tf::nn::conv2d(x, wv, {1, 1}, "SAME");
          const tf::Tensor loss = tf::reduce_sum(y * y);
          const auto grads = tape.gradient(loss, std::vector<tf::Tensor>{x, wv});
          w.assign_sub(grads[1] * 0.001f);
          return std::vector<tf::Tensor>{loss, grads[0]};
        },
        tf::FunctionOptions{.jit_compile = true});
  };
  const tf::Tensor init = tf::random::normal({3, 3, 4, 8}, 0.0, 0.2, tf::float32, 21);
  tf::Variable w(init, "w"), twin_w(init, "twin_w");
  auto f = make(w);
  auto g = make(twin_w);
  for (int call = 0; call < 5; ++call) {
    INFO("call " << call);
    // A new input at every call: a replay that returned the captured call's values would differ.
    const tf::Tensor x =
        tf::random::normal({2, 8, 8, 4}, 0.0, 1.0, tf::float32, static_cast<uint64_t>(30 + call));
    const std::vector<tf::Tensor> got = f(x);
    tf::testing::EnvScope off("TAPEFLOW_CUDA_GRAPHS", "0");
    const std::vector<tf::Tensor> want = g(x);
    check_close(got[0], want[0], 1e-4, 1e-4);
    check_close(got[1], want[1], 1e-4, 1e-4);
    check_close(w.value(), twin_w.value(), 1e-5, 1e-5);
  }
  const tf::jit::CudaGraphStats st =
      graph_stats(f.get_concrete_function(tf::TensorSpec({2, 8, 8, 4})).graph());
  INFO(st.failure);
  CHECK(st.captured);
  CHECK(st.launches == 4);  // every call but the first, which ran node by node
}
