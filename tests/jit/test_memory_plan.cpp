// Memory planning of traced graphs (jit/memory_plan.h): planned replay against unplanned replay
// and eager execution on random inputs, the plan's layout checked directly (no two buffers that
// are live at one node share bytes, views keep their source alive, outputs and values read by
// side effects are never in the arena), concurrency, and results outliving the next call.
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "autograd/tape.h"
#include "core/allocator.h"
#include "core/check.h"
#include "jit/function.h"
#include "jit/memory_plan.h"
#include "ops/binary.h"
#include "ops/dispatch.h"
#include "ops/factory.h"
#include "ops/linalg.h"
#include "ops/movement.h"
#include "ops/nn.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
using tf::Graph;
using tf::jit::MemoryPlan;
using tf::testing::check_close;

namespace {

using tf::testing::EnvScope;
struct PlanEnv : EnvScope {
  explicit PlanEnv(const char* value) : EnvScope("TAPEFLOW_MEMORY_PLAN", value) {}
};
// Graphs of single elementwise nodes, so that each is a planned buffer of its own.
struct Unfused : EnvScope {
  Unfused() : EnvScope("TAPEFLOW_FUSION", "0") {}
};

// Two outputs: sin(x) and cos(x) of a float64 tensor.
struct SinCos final : tf::PrimitiveBase<SinCos> {
  const char* name() const override { return "sincos"; }
  int num_outputs() const override { return 2; }
  void infer(std::span<const tf::Tensor> in, std::span<tf::TensorMeta> out) const override {
    TF_CHECK_ARG(in[0].dtype() == tf::float64, name(), "float64 only");
    out[0] = out[1] = {in[0].shape(), in[0].dtype()};
  }
  void eval_cpu(std::span<const tf::Tensor> in, std::span<tf::Tensor> out) const override {
    const double* x = in[0].data<double>();
    double* s = out[0].data<double>();
    double* c = out[1].data<double>();
    for (int64_t i = 0; i < in[0].num_elements(); ++i) {
      s[i] = std::sin(x[i]);
      c[i] = std::cos(x[i]);
    }
  }
  void eval_cuda(std::span<const tf::Tensor>, std::span<tf::Tensor>) const override {
    TF_THROW(UnimplementedError, name(), "CPU only");
  }
};

tf::Tensor randoms(const tf::TensorShape& shape, tf::DType dtype, unsigned seed) {
  const auto v = tf::testing::random_values(static_cast<size_t>(shape.num_elements()), -1.0, 1.0,
                                            seed);
  return tf::cast(tf::constant(v, shape), dtype);
}

// The node outputs whose storage is node `node`'s output `output`: itself and the views of it.
std::vector<Graph::Ref> storage_members(const Graph& g, int node, int output) {
  std::vector<Graph::Ref> members{Graph::Ref{Graph::Source::Node, node, output}};
  for (int j = node + 1; j < g.num_nodes(); ++j) {
    const Graph::Node& n = g.nodes[static_cast<size_t>(j)];
    if (!n.prim->is_view() || n.inputs.empty()) continue;
    for (const Graph::Ref& m : members)
      if (n.inputs[0] == m) {
        for (int k = 0; k < static_cast<int>(n.outputs.size()); ++k)
          members.push_back(Graph::Ref{Graph::Source::Node, j, k});
        break;
      }
  }
  return members;
}

// Checks the plan against the graph, independently of how the planner derived it.
void check_plan(const Graph& g) {
  const MemoryPlan* plan = g.memory_plan();
  REQUIRE(plan != nullptr);
  const auto& bufs = plan->buffers();
  const auto& st = plan->stats();
  CHECK(st.num_planned == static_cast<int>(bufs.size()));
  size_t sum = 0;
  for (const auto& b : bufs) {
    CHECK(b.offset % MemoryPlan::kAlignment == 0);
    CHECK(b.size % MemoryPlan::kAlignment == 0);
    CHECK(b.size >= b.nbytes);
    CHECK(b.nbytes > 0);
    CHECK(b.offset + b.size <= st.arena_bytes);
    CHECK(b.first == b.node);
    CHECK(plan->offset(b.node, b.output) == static_cast<int64_t>(b.offset));
    const Graph::Node& n = g.nodes[static_cast<size_t>(b.node)];
    CHECK_FALSE(n.prim->is_view());
    CHECK_FALSE(n.prim->has_side_effects());
    sum += b.size;
    // The lifetime covers every reader of the value and of its views; none is a graph output
    // or a side-effect op.
    const auto members = storage_members(g, b.node, b.output);
    for (int j = 0; j < g.num_nodes(); ++j)
      for (const Graph::Ref& r : g.nodes[static_cast<size_t>(j)].inputs)
        for (const Graph::Ref& m : members)
          if (r == m) {
            CHECK(j <= b.last);
            CHECK_FALSE(g.nodes[static_cast<size_t>(j)].prim->has_side_effects());
          }
    for (const Graph::Ref& r : g.outputs)
      for (const Graph::Ref& m : members) CHECK_FALSE(r == m);
  }
  CHECK(st.planned_bytes == sum);
  CHECK(st.arena_bytes <= st.planned_bytes);
  CHECK(st.live_peak_bytes <= st.arena_bytes);
  // No two buffers live at one node (inclusive intervals: a node's output never aliases its
  // inputs) share a byte.
  for (size_t x = 0; x < bufs.size(); ++x)
    for (size_t y = x + 1; y < bufs.size(); ++y) {
      const auto& a = bufs[x];
      const auto& b = bufs[y];
      if (a.first <= b.last && b.first <= a.last) {
        INFO("buffers of nodes " << a.node << " and " << b.node);
        CHECK((a.offset + a.size <= b.offset || b.offset + b.size <= a.offset));
      }
    }
  // Graph outputs are never planned.
  for (const Graph::Ref& r : g.outputs)
    if (r.source == Graph::Source::Node) CHECK(plan->offset(r.index, r.output) == -1);
}

std::vector<tf::TensorSpec> specs_of(const std::vector<tf::Tensor>& args) {
  std::vector<tf::TensorSpec> s;
  for (const auto& t : args) s.emplace_back(t.shape(), t.dtype());
  return s;
}

void check_all_close(const std::vector<tf::Tensor>& got, const std::vector<tf::Tensor>& want,
                     double rtol) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) check_close(got[i], want[i], rtol, rtol);
}

// Traces `body` (two tensor arguments, a vector of results), replays it planned (twice: the
// second replay reuses the cached arena) and unplanned, runs it eagerly, and compares; checks
// the plan. Returns the planned graph.
template <class F>
Graph check_replays(F body, const tf::Tensor& a, const tf::Tensor& b, double rtol = 1e-12) {
  const std::vector<tf::Tensor> want = body(a, b);
  auto f = tf::function(body);
  const std::vector<tf::Tensor> first = f(a, b);
  const std::vector<tf::Tensor> second = f(a, b);
  const auto spec = specs_of({a, b});
  Graph g = f.get_concrete_function(spec[0], spec[1]).graph();
  CHECK(f.tracing_count() == 1);
  REQUIRE(g.memory_plan() != nullptr);
  CHECK(g.memory_plan()->enabled());
  CHECK(g.memory_plan()->stats().num_planned > 0);
  check_plan(g);
  Graph unplanned = g;
  unplanned.prepare(false);
  CHECK_FALSE(unplanned.memory_plan()->enabled());
  const tf::Tensor args[] = {a, b};
  const std::vector<tf::Tensor> plain = unplanned.run(args);
  check_all_close(first, want, rtol);
  check_all_close(second, want, rtol);
  check_all_close(plain, want, rtol);
  // Planned and unplanned replays run the same kernels: bit-identical.
  for (size_t i = 0; i < plain.size(); ++i)
    CHECK(second[i].numpy<double>() == plain[i].numpy<double>());
  return g;
}

}  // namespace

TEST_CASE("memory plan: a hand-built chain shares buffers whose lifetimes do not overlap",
          "[jit][cpu]") {
  tf::DeviceScope cpu("/cpu:0");  // memory planning is for CPU graphs
  // %0 = exp(x), %1 = exp(%0), %2 = exp(%1), %3 = exp(%2), return %3: %0 [0,1], %1 [1,2] and
  // %2 [2,3] are planned, %0 and %2 share bytes, %3 is an output.
  Graph g;
  g.inputs.push_back({tf::TensorShape{1000}, tf::float64});
  g.input_devices.push_back(tf::Device{});
  for (int i = 0; i < 4; ++i) {
    Graph::Node n;
    n.prim = std::make_shared<tf::prims::Exp>();
    n.inputs.push_back(i == 0 ? Graph::Ref{Graph::Source::Input, 0, 0}
                              : Graph::Ref{Graph::Source::Node, i - 1, 0});
    n.outputs.push_back({tf::TensorShape{1000}, tf::float64});
    g.nodes.push_back(n);
  }
  g.outputs.push_back(Graph::Ref{Graph::Source::Node, 3, 0});
  g.prepare(true);
  const MemoryPlan& plan = *g.memory_plan();
  check_plan(g);
  REQUIRE(plan.buffers().size() == 3);
  CHECK(plan.offset(3, 0) == -1);
  CHECK(plan.offset(0, 0) == plan.offset(2, 0));
  CHECK(plan.offset(0, 0) != plan.offset(1, 0));
  CHECK(plan.stats().arena_bytes == 2 * 8000);  // 8000 is a multiple of 64
  CHECK(plan.stats().planned_bytes == 3 * 8000);
  CHECK(plan.stats().live_peak_bytes == 2 * 8000);
  CHECK(plan.stats().num_values == 4);
  const std::string text = g.to_string();
  CHECK(text.find("memory plan: 3 of 4 values in a 15.6 KiB arena (unplanned 23.4 KiB, saves "
                  "33%, live peak 15.6 KiB)") != std::string::npos);

  const tf::Tensor x = randoms({1000}, tf::float64, 7) * 0.1;
  const tf::Tensor args[] = {x};
  check_close(g.run(args)[0], tf::exp(tf::exp(tf::exp(tf::exp(x)))), 1e-12, 1e-12);

  // A copy edited without prepare() ignores the plan made for other nodes.
  Graph edited = g;
  edited.nodes.pop_back();
  edited.outputs = {Graph::Ref{Graph::Source::Node, 2, 0}};
  check_close(edited.run(args)[0], tf::exp(tf::exp(tf::exp(x))), 1e-12, 1e-12);
  CHECK_FALSE(g.memory_plan()->matches(edited));
  CHECK(g.memory_plan()->matches(g));
  Graph two_outputs = g;  // same nodes, one more output: %2 is planned, so the plan is ignored
  two_outputs.outputs.push_back(Graph::Ref{Graph::Source::Node, 2, 0});
  CHECK_FALSE(g.memory_plan()->matches(two_outputs));
}

TEST_CASE("memory plan: chains and diamonds replay as eager and unplanned", "[jit][cpu]") {
  tf::DeviceScope cpu("/cpu:0");  // memory planning is for CPU graphs
  const tf::Tensor a = randoms({16, 24}, tf::float64, 1);
  const tf::Tensor b = randoms({24, 16}, tf::float64, 2);
  const Unfused unfused;  // each elementwise op its own planned node
  check_replays(
      [](const tf::Tensor& x, const tf::Tensor& w) {
        tf::Tensor c = x;
        for (int i = 0; i < 6; ++i) c = tf::tanh(tf::sin(c) * 1.5 + tf::cos(c));
        return std::vector<tf::Tensor>{tf::matmul(c, w)};
      },
      a, b);
  const Graph diamond = check_replays(
      [](const tf::Tensor& x, const tf::Tensor& w) {
        tf::Tensor h = tf::exp(x * 0.5);
        tf::Tensor left = tf::matmul(h, w);                        // (16, 16)
        tf::Tensor right = tf::transpose(tf::matmul(tf::transpose(w), tf::transpose(h)));
        tf::Tensor top = tf::nn::softmax(left + right);
        tf::Tensor s = tf::reduce_sum(top * tf::sqrt(tf::abs(left) + 1.0), 1);
        return std::vector<tf::Tensor>{s, tf::reduce_max(h, 0)};
      },
      a, b);
  CHECK(diamond.memory_plan()->stats().arena_bytes <
        diamond.memory_plan()->stats().planned_bytes);
}

TEST_CASE("memory plan: a view of an intermediate keeps its buffer alive", "[jit][cpu]") {
  tf::DeviceScope cpu("/cpu:0");  // memory planning is for CPU graphs
  const Unfused unfused;  // each elementwise op its own planned node
  const tf::Tensor a = randoms({8, 32}, tf::float64, 3);
  const tf::Tensor b = randoms({4, 64}, tf::float64, 4);
  const Graph g = check_replays(
      [](const tf::Tensor& x, const tf::Tensor& y) {
        tf::Tensor e = tf::exp(x);                // planned: the source of the view
        tf::Tensor r = tf::reshape(e, {4, 64});   // read at the very end
        tf::Tensor t = y;
        for (int i = 0; i < 8; ++i) t = tf::sin(t + 1.0) * 2.0;  // would reuse e's bytes
        return std::vector<tf::Tensor>{tf::reduce_sum(t * r)};
      },
      a, b);
  // The exp buffer lives until the last reader of its reshape.
  int exp_node = -1, last_reader = -1;
  for (int i = 0; i < g.num_nodes(); ++i) {
    const auto& n = g.nodes[static_cast<size_t>(i)];
    if (std::string(n.prim->name()) == "exp") exp_node = i;
    if (std::string(n.prim->name()) == "reshape")
      for (int j = i + 1; j < g.num_nodes(); ++j)
        for (const auto& r : g.nodes[static_cast<size_t>(j)].inputs)
          if (r == Graph::Ref{Graph::Source::Node, i, 0}) last_reader = j;
  }
  REQUIRE(exp_node >= 0);
  REQUIRE(last_reader > exp_node + 2);
  const MemoryPlan::Buffer* buf = g.memory_plan()->buffer(exp_node, 0);
  REQUIRE(buf != nullptr);
  CHECK(buf->last == last_reader);
}

TEST_CASE("memory plan: a view returned as a result is not in the arena", "[jit][cpu]") {
  tf::DeviceScope cpu("/cpu:0");  // memory planning is for CPU graphs
  auto f = tf::function([](const tf::Tensor& x) {
    tf::Tensor e = tf::exp(x * 2.0);
    return std::vector<tf::Tensor>{tf::reshape(e, {-1}), tf::reduce_sum(tf::sin(e) * e)};
  });
  const tf::Tensor x1 = randoms({6, 5}, tf::float64, 5);
  const tf::Tensor x2 = randoms({6, 5}, tf::float64, 6);
  const auto r1 = f(x1);
  const auto want1 = tf::exp(x1 * 2.0).numpy<double>();
  const auto r2 = f(x2);
  const auto r3 = f(x1 * 3.0);
  // The first results are untouched by later replays.
  CHECK(r1[0].numpy<double>() == want1);
  check_close(r1[1], tf::reduce_sum(tf::sin(tf::exp(x1 * 2.0)) * tf::exp(x1 * 2.0)), 1e-12,
              1e-12);
  check_close(r2[0], tf::reshape(tf::exp(x2 * 2.0), {-1}), 1e-12, 1e-12);
  const Graph& g = f.get_concrete_function(tf::TensorSpec({6, 5}, tf::float64)).graph();
  check_plan(g);
  CHECK(g.memory_plan()->stats().num_planned > 0);
}

TEST_CASE("memory plan: results stay valid after the next call", "[jit][cpu]") {
  tf::DeviceScope cpu("/cpu:0");  // memory planning is for CPU graphs
  const Unfused unfused;  // each elementwise op its own planned node
  auto f = tf::function([](const tf::Tensor& x) {
    tf::Tensor c = x;
    for (int i = 0; i < 5; ++i) c = tf::sin(c) + tf::cos(c * 0.5);
    return c;
  });
  std::vector<tf::Tensor> xs, results;
  for (unsigned s = 0; s < 4; ++s) {
    xs.push_back(randoms({64, 3}, tf::float64, 10 + s));
    results.push_back(f(xs.back()));
  }
  for (size_t i = 0; i < xs.size(); ++i) {
    tf::Tensor c = xs[i];
    for (int k = 0; k < 5; ++k) c = tf::sin(c) + tf::cos(c * 0.5);
    CHECK(results[i].numpy<double>() == c.numpy<double>());
    // A result owns exactly its buffer (an arena view would share a larger one).
    CHECK(results[i].impl()->storage->nbytes == results[i].nbytes());
  }
  CHECK(f.get_concrete_function(tf::TensorSpec({64, 3}, tf::float64))
            .graph()
            .memory_plan()
            ->stats()
            .num_planned == 19);  // 5 x (multiply, cos, sin, add), less the result
}

TEST_CASE("memory plan: multi-output nodes", "[jit][cpu]") {
  tf::DeviceScope cpu("/cpu:0");  // memory planning is for CPU graphs
  const tf::Tensor a = randoms({10, 7}, tf::float64, 20);
  const tf::Tensor b = randoms({7, 10}, tf::float64, 21);
  const Graph g = check_replays(
      [](const tf::Tensor& x, const tf::Tensor& w) {
        const tf::Tensor in[] = {x * 3.0};
        std::vector<tf::Tensor> sc = tf::detail::dispatch_multi(SinCos{}, in);
        // Output 1 outlives output 0.
        tf::Tensor p = tf::matmul(sc[0], w);
        tf::Tensor q = tf::exp(p * 0.1) + 1.0;
        return std::vector<tf::Tensor>{tf::reduce_sum(q) + tf::reduce_sum(sc[1] * x)};
      },
      a, b);
  int sc = -1;
  for (int i = 0; i < g.num_nodes(); ++i)
    if (std::string(g.nodes[static_cast<size_t>(i)].prim->name()) == "sincos") sc = i;
  REQUIRE(sc >= 0);
  const auto* s = g.memory_plan()->buffer(sc, 0);
  const auto* c = g.memory_plan()->buffer(sc, 1);
  REQUIRE(s != nullptr);
  REQUIRE(c != nullptr);
  CHECK(s->offset != c->offset);
  CHECK(c->last > s->last);
}

TEST_CASE("memory plan: fused nodes read and write arena buffers", "[jit][cpu]") {
  tf::DeviceScope cpu("/cpu:0");  // memory planning is for CPU graphs
  const tf::Tensor a = randoms({32, 48}, tf::float32, 30);
  const tf::Tensor b = randoms({48, 32}, tf::float32, 31);
  auto body = [](const tf::Tensor& x, const tf::Tensor& w) {
    tf::Tensor h = tf::matmul(x, w);
    tf::Tensor f1 = tf::tanh(tf::exp(h * 0.5f + 1.0f) - h) * 2.0f;  // fused
    tf::Tensor m = tf::matmul(f1, tf::transpose(w));
    tf::Tensor f2 = tf::nn::relu(m * 0.25f - 0.1f) + tf::sin(m);     // fused
    return std::vector<tf::Tensor>{tf::reduce_mean(f2, 1)};
  };
  const Graph g = check_replays(body, a, b, 1e-5);
  bool fused_planned = false;
  for (int i = 0; i < g.num_nodes(); ++i)
    if (std::string(g.nodes[static_cast<size_t>(i)].prim->name()) == "fused_elementwise")
      fused_planned |= g.memory_plan()->offset(i, 0) >= 0;
  CHECK(fused_planned);
}

TEST_CASE("memory plan: a train step with a tape inside matches unplanned and eager steps",
          "[jit][cpu]") {
  tf::DeviceScope cpu("/cpu:0");  // memory planning is for CPU graphs
  auto make = [] {
    return std::vector<tf::Variable>{
        tf::Variable(tf::random::normal({6, 16}, 0, 0.5, tf::float32, 1), "w1"),
        tf::Variable(tf::zeros({16}), "b1"),
        tf::Variable(tf::random::normal({16, 16}, 0, 0.5, tf::float32, 2), "w2"),
        tf::Variable(tf::zeros({16}), "b2"),
        tf::Variable(tf::random::normal({16, 3}, 0, 0.5, tf::float32, 3), "w3")};
  };
  auto step_body = [](std::vector<tf::Variable>& v, const tf::Tensor& x, const tf::Tensor& y) {
    tf::GradientTape tape;
    tf::Tensor h = tf::nn::relu(tf::nn::bias_add(tf::matmul(x, v[0]), v[1]));
    tf::Tensor h2 = tf::tanh(tf::nn::bias_add(tf::matmul(h, v[2]), v[3]));
    tf::Tensor logits = tf::matmul(h2, v[4]);
    tf::Tensor loss = tf::reduce_mean(tf::nn::sparse_softmax_cross_entropy_with_logits(y, logits));
    auto grads = tape.gradient(loss, v);
    for (size_t i = 0; i < v.size(); ++i) v[i].assign_sub(grads[i] * 0.1f);
    return loss;
  };
  std::vector<tf::Variable> eager_vars = make(), planned_vars, plain_vars;
  for (const auto& v : eager_vars) {
    planned_vars.emplace_back(v.value(), "planned");
    plain_vars.emplace_back(v.value(), "plain");
  }
  auto planned = tf::function([&](const tf::Tensor& x, const tf::Tensor& y) {
    return step_body(planned_vars, x, y);
  });
  auto plain = tf::function([&](const tf::Tensor& x, const tf::Tensor& y) {
    return step_body(plain_vars, x, y);
  });
  const tf::Tensor x = randoms({9, 6}, tf::float32, 40);
  const tf::Tensor y = tf::constant(std::vector<int32_t>{0, 1, 2, 1, 0, 2, 2, 1, 0});
  for (int i = 0; i < 5; ++i) {
    tf::Tensor le = step_body(eager_vars, x, y);
    tf::Tensor lp = planned(x, y);
    tf::Tensor lu;
    {
      PlanEnv off("0");
      lu = plain(x, y);
    }
    check_close(lp, le, 1e-5, 1e-6);
    CHECK(lp.numpy<float>() == lu.numpy<float>());
  }
  for (size_t i = 0; i < eager_vars.size(); ++i) {
    check_close(planned_vars[i].value(), eager_vars[i].value(), 1e-5, 1e-6);
    CHECK(planned_vars[i].value().numpy<float>() == plain_vars[i].value().numpy<float>());
  }
  const Graph& g =
      planned.get_concrete_function(tf::TensorSpec({9, 6}), tf::TensorSpec({9}, tf::int32))
          .graph();
  check_plan(g);
  CHECK(g.memory_plan()->enabled());
  // (The three weight updates fuse into their gradients' products: no values of their own.)
  CHECK(g.memory_plan()->stats().num_planned >= 8);
  CHECK(g.memory_plan()->stats().arena_bytes < g.memory_plan()->stats().planned_bytes);
  const Graph& gu =
      plain.get_concrete_function(tf::TensorSpec({9, 6}), tf::TensorSpec({9}, tf::int32)).graph();
  CHECK_FALSE(gu.memory_plan()->enabled());
  CHECK(gu.to_string().find("off (TAPEFLOW_MEMORY_PLAN=0)") != std::string::npos);
  // A planned replay reuses its arena: fewer allocations per call than unplanned.
  auto allocations = [&](auto& fn) {
    const int64_t before = tf::cpu_allocator().stats().num_allocs;
    fn(x, y);
    return tf::cpu_allocator().stats().num_allocs - before;
  };
  CHECK(allocations(planned) + 6 <= allocations(plain));
}

TEST_CASE("memory plan: a tape around the call records the unplanned replay", "[jit][cpu]") {
  tf::DeviceScope cpu("/cpu:0");  // memory planning is for CPU graphs
  auto f = tf::function([](const tf::Tensor& x) {
    tf::Tensor c = x;
    for (int i = 0; i < 4; ++i) c = tf::sin(c) * 2.0 + x;
    return tf::reduce_sum(c * c);
  });
  const tf::Tensor x = randoms({5, 4}, tf::float64, 50);
  f(x);
  tf::GradientTape tape;
  tape.watch(x);
  tf::Tensor y = f(x);
  tf::Tensor g = tape.gradient(y, x);
  tf::GradientTape eager_tape;
  eager_tape.watch(x);
  tf::Tensor c = x;
  for (int i = 0; i < 4; ++i) c = tf::sin(c) * 2.0 + x;
  tf::Tensor ye = tf::reduce_sum(c * c);
  check_close(y, ye, 1e-12, 1e-12);
  check_close(g, eager_tape.gradient(ye, x), 1e-12, 1e-12);
}

TEST_CASE("memory plan: four threads calling one function get correct results", "[jit][cpu]") {
  tf::DeviceScope cpu("/cpu:0");  // memory planning is for CPU graphs
  auto body = [](const tf::Tensor& x, const tf::Tensor& w) {
    tf::Tensor h = tf::tanh(tf::matmul(x, w));
    for (int i = 0; i < 4; ++i) h = tf::sin(h * 1.3) + tf::cos(h);
    return tf::reduce_sum(tf::matmul(h, tf::transpose(w)), 1);
  };
  auto f = tf::function(body);
  const tf::Tensor w = randoms({12, 12}, tf::float64, 60);
  std::vector<tf::Tensor> xs, want;
  for (unsigned t = 0; t < 4; ++t) {
    xs.push_back(randoms({20, 12}, tf::float64, 61 + t));
    want.push_back(body(xs.back(), w));
  }
  f(xs[0], w);
  std::vector<int> ok(4, 0);
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      while (!go.load()) std::this_thread::yield();
      bool all = true;
      std::vector<tf::Tensor> kept;
      for (int i = 0; i < 100; ++i) {
        const size_t k = static_cast<size_t>((t + i) % 4);
        tf::Tensor r = f(xs[k], w);
        all = all && r.numpy<double>() == want[k].numpy<double>();
        if (i % 10 == 0) kept.push_back(r);
      }
      // Results kept across calls are still intact.
      for (size_t j = 0; j < kept.size(); ++j) {
        const size_t k = static_cast<size_t>((t + static_cast<int>(j) * 10) % 4);
        all = all && kept[j].numpy<double>() == want[k].numpy<double>();
      }
      ok[static_cast<size_t>(t)] = all;
    });
  go = true;
  for (auto& th : threads) th.join();
  CHECK(ok == std::vector<int>{1, 1, 1, 1});
  const Graph& g =
      f.get_concrete_function(tf::TensorSpec({20, 12}, tf::float64),
                              tf::TensorSpec({12, 12}, tf::float64))
          .graph();
  CHECK(g.memory_plan()->stats().num_planned > 5);
  check_plan(g);
}

TEST_CASE("memory plan: values read by side-effect ops are never in the arena", "[jit][cpu]") {
  tf::DeviceScope cpu("/cpu:0");  // memory planning is for CPU graphs
  tf::Variable v(tf::zeros({4, 4}, tf::float64), "v");
  auto f = tf::function([&](const tf::Tensor& x) {
    tf::Tensor e = tf::exp(x) * 2.0;  // assigned: the variable may adopt the buffer
    v.assign(e);
    tf::Tensor t = tf::sin(e) + 1.0;
    return tf::reduce_sum(t * t);
  });
  const tf::Tensor x1 = randoms({4, 4}, tf::float64, 70);
  const tf::Tensor x2 = randoms({4, 4}, tf::float64, 71);
  f(x1);
  const tf::Tensor held = v.value();
  f(x2);
  check_close(held, tf::exp(x1) * 2.0, 1e-12, 1e-12);
  check_close(v.value(), tf::exp(x2) * 2.0, 1e-12, 1e-12);
  const Graph& g = f.get_concrete_function(tf::TensorSpec({4, 4}, tf::float64)).graph();
  check_plan(g);
  for (int i = 0; i < g.num_nodes(); ++i)
    if (std::string(g.nodes[static_cast<size_t>(i)].prim->name()) == "assign_variable") {
      const Graph::Ref r = g.nodes[static_cast<size_t>(i)].inputs[0];
      CHECK(g.memory_plan()->offset(r.index, r.output) == -1);
    }
}

TEST_CASE("memory plan: TAPEFLOW_MEMORY_PLAN=0 replays without the arena", "[jit][cpu]") {
  tf::DeviceScope cpu("/cpu:0");  // memory planning is for CPU graphs
  const Unfused unfused;  // each elementwise op its own planned node
  PlanEnv off("0");
  CHECK_FALSE(tf::jit::memory_planning_enabled());
  auto f = tf::function([](const tf::Tensor& x) { return tf::reduce_sum(tf::exp(tf::sin(x))); });
  const tf::Tensor x = randoms({3, 3}, tf::float64, 80);
  check_close(f(x), tf::reduce_sum(tf::exp(tf::sin(x))), 1e-12, 1e-12);
  const Graph& g = f.get_concrete_function(tf::TensorSpec({3, 3}, tf::float64)).graph();
  REQUIRE(g.memory_plan() != nullptr);
  CHECK_FALSE(g.memory_plan()->enabled());
  CHECK(g.memory_plan()->stats().num_planned == 2);  // still planned, for the statistics
  PlanEnv on("1");
  CHECK(tf::jit::memory_planning_enabled());
}

TEST_CASE("memory plan: random graphs replay planned as unplanned", "[jit][cpu]") {
  tf::DeviceScope cpu("/cpu:0");  // memory planning is for CPU graphs
  // Random DAGs of sin, add, reshape (views) and a two-output op, with dead values and views
  // among the results: the plan is checked directly and planned replays (twice: the second
  // reuses the arena) must equal unplanned ones bit for bit.
  std::mt19937 rng(1234);
  const tf::TensorShape wide{8, 16}, tall{16, 8};
  int planned = 0, shared = 0;
  for (int trial = 0; trial < 40; ++trial) {
    Graph g;
    std::vector<Graph::Ref> values;
    std::vector<tf::TensorShape> shapes;
    for (int i = 0; i < 2; ++i) {
      g.inputs.push_back({wide, tf::float64});
      g.input_devices.push_back(tf::Device{});
      values.push_back(Graph::Ref{Graph::Source::Input, i, 0});
      shapes.push_back(wide);
    }
    const int num_nodes = 5 + static_cast<int>(rng() % 25);
    for (int i = 0; i < num_nodes; ++i) {
      const size_t a = rng() % values.size();
      Graph::Node n;
      n.inputs.push_back(values[a]);
      tf::TensorShape shape = shapes[a];
      int outputs = 1;
      switch (rng() % 4) {
        case 0: n.prim = std::make_shared<tf::prims::Sin>(); break;
        case 1: {
          n.prim = std::make_shared<tf::prims::Add>();
          size_t b = rng() % values.size();
          for (size_t t = 0; t < values.size() && shapes[b] != shape; ++t) b = (b + 1) % values.size();
          n.inputs.push_back(values[b]);
          break;
        }
        case 2:
          shape = shape == wide ? tall : wide;
          n.prim = std::make_shared<tf::prims::Reshape>(shape);
          break;
        default:
          n.prim = std::make_shared<SinCos>();
          outputs = 2;
          break;
      }
      for (int k = 0; k < outputs; ++k) {
        n.outputs.push_back({shape, tf::float64});
        values.push_back(Graph::Ref{Graph::Source::Node, i, k});
        shapes.push_back(shape);
      }
      g.nodes.push_back(n);
    }
    const int num_outputs = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < num_outputs; ++k)
      g.outputs.push_back(values[2 + rng() % (values.size() - 2)]);
    INFO("trial " << trial << "\n" << g.to_string());
    Graph plain = g;
    plain.prepare(false);
    g.prepare(true);
    check_plan(g);
    planned += g.memory_plan()->stats().num_planned;
    shared += g.memory_plan()->stats().arena_bytes < g.memory_plan()->stats().planned_bytes;
    const tf::Tensor args[] = {randoms(wide, tf::float64, 100 + static_cast<unsigned>(trial)),
                               randoms(wide, tf::float64, 200 + static_cast<unsigned>(trial))};
    const auto want = plain.run(args);
    const auto first = g.run(args);
    const auto second = g.run(args);
    REQUIRE(first.size() == want.size());
    for (size_t k = 0; k < want.size(); ++k) {
      CHECK(first[k].numpy<double>() == want[k].numpy<double>());
      CHECK(second[k].numpy<double>() == want[k].numpy<double>());
    }
  }
  CHECK(planned > 200);
  CHECK(shared > 20);  // most graphs reuse memory
}
