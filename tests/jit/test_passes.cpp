// Graph passes (jit/passes.h) on hand-built graphs: structure after each pass (which nodes stay,
// how references are renumbered) and values, computed by a small interpreter that runs every
// node through dispatch_multi, before and after.
#include <cmath>
#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include "autograd/tape.h"
#include "core/check.h"
#include "core/context.h"
#include "core/error.h"
#include "jit/function.h"
#include "jit/passes.h"
#include "ops/binary.h"
#include "ops/dispatch.h"
#include "ops/factory.h"
#include "ops/hooks.h"
#include "ops/movement.h"
#include "ops/print.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
using tf::Graph;
using Ref = tf::Graph::Ref;
using Source = tf::Graph::Source;
using tf::testing::check_values;

namespace {

Ref input_ref(int i) { return Ref{Source::Input, i, 0}; }
Ref const_ref(int i) { return Ref{Source::Constant, i, 0}; }
Ref node_ref(int i, int output = 0) { return Ref{Source::Node, i, output}; }

tf::Tensor floats(const std::vector<float>& v, const tf::TensorShape& shape) {
  return tf::constant(v, shape);
}

// ---- test primitives ----

// Two outputs: sin(x) and cos(x) (float32 only).
struct SinCos final : tf::PrimitiveBase<SinCos> {
  const char* name() const override { return "sincos"; }
  int num_outputs() const override { return 2; }
  void infer(std::span<const tf::Tensor> in, std::span<tf::TensorMeta> out) const override {
    TF_CHECK_ARG(in[0].dtype() == tf::float32, name(), "float32 only");
    out[0] = out[1] = {in[0].shape(), in[0].dtype()};
  }
  void eval_cpu(std::span<const tf::Tensor> in, std::span<tf::Tensor> out) const override {
    const float* x = in[0].data<float>();
    float* s = out[0].data<float>();
    float* c = out[1].data<float>();
    for (int64_t i = 0; i < in[0].num_elements(); ++i) {
      s[i] = std::sin(x[i]);
      c[i] = std::cos(x[i]);
    }
  }
  void eval_cuda(std::span<const tf::Tensor>, std::span<tf::Tensor>) const override {
    TF_THROW(UnimplementedError, name(), "CPU only");
  }
};

// A side effect without outputs: appends its tag to effect_log() (checks effect order).
std::vector<int>& effect_log() {
  static std::vector<int> log;
  return log;
}
struct Record final : tf::PrimitiveBase<Record> {
  int tag = 0;
  explicit Record(int t) : tag(t) {}
  const char* name() const override { return "record"; }
  int num_outputs() const override { return 0; }
  void infer(std::span<const tf::Tensor>, std::span<tf::TensorMeta>) const override {}
  void eval_cpu(std::span<const tf::Tensor>, std::span<tf::Tensor>) const override {
    effect_log().push_back(tag);
  }
  void eval_cuda(std::span<const tf::Tensor> in, std::span<tf::Tensor> out) const override {
    eval_cpu(in, out);
  }
  bool has_side_effects() const override { return true; }
  std::string attributes() const override { return "tag=" + std::to_string(tag); }
};

// A stateful op with an output and no inputs: the number of times it ran (float32 scalar).
int& counter_calls() {
  static int n = 0;
  return n;
}
struct Counter final : tf::PrimitiveBase<Counter> {
  const char* name() const override { return "counter"; }
  void infer(std::span<const tf::Tensor>, std::span<tf::TensorMeta> out) const override {
    out[0] = {tf::TensorShape{}, tf::float32};
  }
  void eval_cpu(std::span<const tf::Tensor>, std::span<tf::Tensor> out) const override {
    *out[0].data<float>() = static_cast<float>(++counter_calls());
  }
  void eval_cuda(std::span<const tf::Tensor> in, std::span<tf::Tensor> out) const override {
    eval_cpu(in, out);
  }
  bool has_side_effects() const override { return true; }
};

// A copy that fails on non-positive values (a kernel-time error, like a singular matrix).
struct CheckPositive final : tf::PrimitiveBase<CheckPositive> {
  const char* name() const override { return "check_positive"; }
  void infer(std::span<const tf::Tensor> in, std::span<tf::TensorMeta> out) const override {
    out[0] = {in[0].shape(), in[0].dtype()};
  }
  void eval_cpu(std::span<const tf::Tensor> in, std::span<tf::Tensor> out) const override {
    const float* x = in[0].data<float>();
    float* y = out[0].data<float>();
    for (int64_t i = 0; i < in[0].num_elements(); ++i) {
      TF_CHECK_ARG(x[i] > 0, name(), "element {} is {}", i, x[i]);
      y[i] = x[i];
    }
  }
  void eval_cuda(std::span<const tf::Tensor> in, std::span<tf::Tensor> out) const override {
    eval_cpu(in, out);
  }
};

tf::prims::Print print_prim(const std::string& label) {
  tf::prims::Print p;
  p.pieces = {std::string(label), std::monostate{}};
  return p;
}

// ---- building and running graphs ----

// Builds a Graph node by node; output types come from the primitive's infer() on symbolic
// tensors of the input types.
struct Builder {
  Graph g;

  Ref input(const tf::TensorShape& shape, tf::DType dtype = tf::float32) {
    g.inputs.push_back({shape, dtype});
    g.input_devices.push_back(tf::Device{});
    return input_ref(static_cast<int>(g.inputs.size()) - 1);
  }
  Ref constant(const tf::Tensor& t) {
    g.constants.push_back(t);
    return const_ref(static_cast<int>(g.constants.size()) - 1);
  }
  tf::TensorMeta meta(const Ref& r) const {
    switch (r.source) {
      case Source::Input: return g.inputs[r.index];
      case Source::Constant: return {g.constants[r.index].shape(), g.constants[r.index].dtype()};
      case Source::Node: break;
    }
    return g.nodes[r.index].outputs[r.output];
  }
  std::vector<Ref> add_multi(const tf::Primitive& prim, std::vector<Ref> inputs,
                             tf::Device device = {}) {
    std::vector<tf::Tensor> symbolic;
    for (const Ref& r : inputs) {
      const tf::TensorMeta m = meta(r);
      symbolic.push_back(tf::detail::symbolic(m.shape, m.dtype, device));
    }
    Graph::Node node;
    node.prim = prim.clone();
    node.outputs.resize(prim.num_outputs());
    prim.infer(symbolic, node.outputs);
    node.inputs = std::move(inputs);
    node.device = device;
    g.nodes.push_back(std::move(node));
    const int index = static_cast<int>(g.nodes.size()) - 1;
    std::vector<Ref> refs;
    for (int k = 0; k < prim.num_outputs(); ++k) refs.push_back(node_ref(index, k));
    return refs;
  }
  Ref add(const tf::Primitive& prim, std::vector<Ref> inputs, tf::Device device = {}) {
    auto refs = add_multi(prim, std::move(inputs), device);
    return refs.empty() ? Ref{} : refs[0];
  }
};

// Runs the graph node by node through dispatch_multi (the reference semantics of replay).
std::vector<tf::Tensor> interpret(const Graph& g, const std::vector<tf::Tensor>& args) {
  REQUIRE(args.size() == g.inputs.size());
  std::vector<std::vector<tf::Tensor>> values(g.nodes.size());
  auto value = [&](const Ref& r) -> tf::Tensor {
    switch (r.source) {
      case Source::Input: return args.at(r.index);
      case Source::Constant: return g.constants.at(r.index);
      case Source::Node: break;
    }
    return values.at(r.index).at(r.output);
  };
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Graph::Node& n = g.nodes[i];
    std::vector<tf::Tensor> in;
    for (const Ref& r : n.inputs) in.push_back(value(r));
    tf::DeviceScope scope(n.device);
    values[i] = tf::detail::dispatch_multi(*n.prim, in);
    REQUIRE(values[i].size() == n.outputs.size());
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      REQUIRE(values[i][k].shape() == n.outputs[k].shape);
      REQUIRE(values[i][k].dtype() == n.outputs[k].dtype);
    }
  }
  std::vector<tf::Tensor> out;
  for (const Ref& r : g.outputs) out.push_back(value(r));
  return out;
}

std::vector<std::string> prim_names(const Graph& g) {
  std::vector<std::string> names;
  for (const auto& n : g.nodes) names.emplace_back(n.prim->name());
  return names;
}

void check_same_values(const std::vector<tf::Tensor>& got, const std::vector<tf::Tensor>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t k = 0; k < got.size(); ++k) {
    INFO("output " << k);
    REQUIRE(got[k].dtype() == want[k].dtype());
    check_values(got[k], tf::detail::to_double_vector(want[k]), 1e-6, 1e-6);
  }
}

// Captures tf::print's output while alive.
struct CapturePrint {
  std::ostringstream os;
  CapturePrint() { tf::detail::set_print_stream(&os); }
  ~CapturePrint() { tf::detail::set_print_stream(nullptr); }
};

// Observers that count what reaches them (folding must not reach either).
struct CountingTrace final : tf::detail::TraceObserver {
  int nodes = 0;
  void add_node(const tf::Primitive&, std::span<const tf::Tensor>,
                std::span<const tf::TensorMeta> metas, tf::Device device,
                std::span<tf::Tensor> outputs) override {
    ++nodes;
    for (size_t k = 0; k < metas.size(); ++k)
      outputs[k] = tf::detail::symbolic(metas[k].shape, metas[k].dtype, device);
  }
};
struct CountingTape final : tf::detail::TapeObserver {
  int records = 0;
  void record(const tf::Primitive&, std::span<const tf::Tensor>,
              std::span<const tf::Tensor>) override {
    ++records;
  }
};

}  // namespace

// ---------------------------------------------------------------------------------------------

TEST_CASE("passes: validate_graph accepts well-formed graphs and names broken references",
          "[passes][cpu]") {
  Builder b;
  Ref x = b.input({2, 3});
  Ref c = b.constant(floats({1, 2, 3}, {3}));
  auto sc = b.add_multi(SinCos{}, {x});
  Ref a = b.add(tf::prims::Add{}, {sc[1], c});
  b.add(Record(1), {a});
  b.g.outputs = {a, x, c};
  REQUIRE_NOTHROW(tf::jit::validate_graph(b.g));

  SECTION("a reference to a later node") {
    b.g.nodes[0].inputs[0] = node_ref(1);
    TF_REQUIRE_THROWS_CONTAINING(tf::jit::validate_graph(b.g), tf::InternalError,
                                 "node 0 (sincos) reads %1:0, which is not an earlier node");
  }
  SECTION("a node reading itself") {
    b.g.nodes[1].inputs[0] = node_ref(1);
    TF_REQUIRE_THROWS_CONTAINING(tf::jit::validate_graph(b.g), tf::InternalError,
                                 "not an earlier node");
  }
  SECTION("an output index out of range") {
    b.g.nodes[1].inputs[0] = node_ref(0, 2);
    TF_REQUIRE_THROWS_CONTAINING(tf::jit::validate_graph(b.g), tf::InternalError,
                                 "node 0 has 2 outputs");
  }
  SECTION("a constant out of range") {
    b.g.nodes[1].inputs[1] = const_ref(1);
    TF_REQUIRE_THROWS_CONTAINING(tf::jit::validate_graph(b.g), tf::InternalError,
                                 "the graph has 1 constants");
  }
  SECTION("an input out of range") {
    b.g.outputs[1] = input_ref(-1);
    TF_REQUIRE_THROWS_CONTAINING(tf::jit::validate_graph(b.g), tf::InternalError,
                                 "graph output 1 reads %arg-1");
  }
  SECTION("a graph output after the last node") {
    b.g.outputs[0] = node_ref(3);
    TF_REQUIRE_THROWS_CONTAINING(tf::jit::validate_graph(b.g), tf::InternalError,
                                 "graph output 0 reads %3:0, which is not an earlier node");
  }
  SECTION("a node with the wrong number of output types") {
    b.g.nodes[0].outputs.pop_back();
    TF_REQUIRE_THROWS_CONTAINING(tf::jit::validate_graph(b.g), tf::InternalError,
                                 "records 1 output types for 2 outputs");
  }
  SECTION("a node without a primitive") {
    b.g.nodes[2].prim = nullptr;
    TF_REQUIRE_THROWS_CONTAINING(tf::jit::validate_graph(b.g), tf::InternalError,
                                 "node 2 has no primitive");
  }
}

TEST_CASE("passes: must_keep covers side effects and random draws only", "[passes][cpu]") {
  CHECK(tf::jit::must_keep(print_prim("x")));
  CHECK(tf::jit::must_keep(Record(0)));
  CHECK(tf::jit::must_keep(Counter{}));
  CHECK(tf::jit::must_keep(tf::prims::RandomNormal({2}, tf::float32, 0, 1, 1, 2)));
  CHECK(tf::jit::must_keep(tf::prims::RandomUniform({2}, tf::float32, 0, 1, 1, 2)));
  CHECK_FALSE(tf::jit::must_keep(tf::prims::Exp{}));
  CHECK_FALSE(tf::jit::must_keep(tf::prims::Reshape({6})));
  CHECK_FALSE(tf::jit::must_keep(SinCos{}));
}

TEST_CASE("passes: dead code elimination removes pure dead chains and keeps side effects",
          "[passes][cpu]") {
  Builder b;
  Ref x = b.input({2, 3});
  Ref c0 = b.constant(floats({1, 2, 3}, {3}));
  Ref c1 = b.constant(floats({4, 5, 6}, {3}));  // read only by a dead node
  tf::Tensor c2_tensor = floats({7, 8}, {2});
  Ref c2 = b.constant(c2_tensor);               // a graph output directly
  Ref e = b.add(tf::prims::Exp{}, {x});                           // 0 live
  Ref l = b.add(tf::prims::Log{}, {x});                           // 1 dead
  b.add(tf::prims::ReduceSum({0, 1}, false), {l});                // 2 dead
  Ref ab = b.add(tf::prims::Abs{}, {x});                          // 3 read by print
  b.add(print_prim("abs:"), {ab});                                // 4 effect
  b.add(tf::prims::RandomNormal({4}, tf::float32, 0, 1, 3, 4), {});  // 5 dead draw, kept
  Ref sum = b.add(tf::prims::Add{}, {e, c0});                     // 6 output
  b.add(tf::prims::Multiply{}, {x, c1});                          // 7 dead
  b.add(tf::prims::Reshape({6}), {e});                            // 8 dead view
  b.g.outputs = {sum, x, c2, e};

  const Graph original = b.g;
  Graph g = b.g;
  tf::jit::eliminate_dead_code(g);
  tf::jit::validate_graph(g);

  REQUIRE(prim_names(g) == std::vector<std::string>{"exp", "abs", "print", "random_normal", "add"});
  CHECK(g.nodes[1].inputs == std::vector<Ref>{x});
  CHECK(g.nodes[2].inputs == std::vector<Ref>{node_ref(1)});
  CHECK(g.nodes[4].inputs == std::vector<Ref>{node_ref(0), const_ref(0)});
  CHECK(g.outputs == std::vector<Ref>{node_ref(4), x, const_ref(1), node_ref(0)});
  // c1 is gone, c2 moved to slot 1; the inputs (the signature) are untouched.
  REQUIRE(g.constants.size() == 2);
  CHECK(g.constants[1].is_same(c2_tensor));
  CHECK(g.inputs.size() == 1);

  const tf::Tensor xv = floats({0.5f, 1, 1.5f, 2, 2.5f, 3}, {2, 3});
  std::string printed_before, printed_after;
  std::vector<tf::Tensor> before, after;
  {
    CapturePrint cap;
    before = interpret(original, {xv});
    printed_before = cap.os.str();
  }
  {
    CapturePrint cap;
    after = interpret(g, {xv});
    printed_after = cap.os.str();
  }
  check_same_values(after, before);
  CHECK(printed_after == printed_before);
  CHECK(printed_after == "abs: [[0.5 1 1.5]\n [2 2.5 3]]\n");
  CHECK(after[1].is_same(xv));
  CHECK(after[2].is_same(c2_tensor));

  // A second run changes nothing.
  Graph again = g;
  tf::jit::eliminate_dead_code(again);
  REQUIRE(prim_names(again) == prim_names(g));
  CHECK(again.outputs == g.outputs);
  CHECK(again.constants.size() == g.constants.size());
}

TEST_CASE("passes: dead code elimination with multi-output and effect-only nodes",
          "[passes][cpu]") {
  SECTION("a multi-output node stays when any one output is read") {
    Builder b;
    Ref x = b.input({3});
    auto used = b.add_multi(SinCos{}, {x});    // 0: only cos read
    b.add_multi(SinCos{}, {x});                // 1: dead
    Ref n = b.add(tf::prims::Negative{}, {used[1]});  // 2
    b.g.outputs = {n, used[1]};
    tf::jit::eliminate_dead_code(b.g);
    tf::jit::validate_graph(b.g);
    REQUIRE(prim_names(b.g) == std::vector<std::string>{"sincos", "negative"});
    CHECK(b.g.nodes[1].inputs == std::vector<Ref>{node_ref(0, 1)});
    CHECK(b.g.outputs == std::vector<Ref>{node_ref(1), node_ref(0, 1)});
    const auto out = interpret(b.g, {floats({0, 1, 2}, {3})});
    check_values(out[0], {-1.0, -std::cos(1.0), -std::cos(2.0)});
  }

  SECTION("a graph without outputs keeps its effects, in order, and what they read") {
    Builder b;
    Ref x = b.input({2});
    Ref e = b.add(tf::prims::Exp{}, {x});          // 0 read by record 2
    b.add(tf::prims::Sqrt{}, {x});                 // 1 dead
    b.add(Record(2), {e});                         // 2
    b.add(Counter{}, {});                          // 3 dead output, effect
    b.add(tf::prims::Square{}, {e});               // 4 dead
    b.add(Record(1), {});                          // 5
    b.add(Record(3), {x});                         // 6
    b.g.outputs = {};
    tf::jit::eliminate_dead_code(b.g);
    tf::jit::validate_graph(b.g);
    REQUIRE(prim_names(b.g) ==
          std::vector<std::string>{"exp", "record", "counter", "record", "record"});
    CHECK(b.g.nodes[1].inputs == std::vector<Ref>{node_ref(0)});
    CHECK(b.g.nodes[4].inputs == std::vector<Ref>{x});
    effect_log().clear();
    const int calls = counter_calls();
    interpret(b.g, {floats({1, 2}, {2})});
    CHECK(effect_log() == std::vector<int>{2, 1, 3});
    CHECK(counter_calls() == calls + 1);
  }

  SECTION("an empty graph and a graph of inputs only") {
    Builder b;
    Ref x = b.input({2});
    Ref c = b.constant(floats({1, 2}, {2}));
    b.g.outputs = {x, c, x};
    tf::jit::eliminate_dead_code(b.g);
    CHECK(b.g.nodes.empty());
    CHECK(b.g.outputs == std::vector<Ref>{x, c, x});
    CHECK(b.g.constants.size() == 1);
    Graph empty;
    tf::jit::eliminate_dead_code(empty);
    tf::jit::eliminate_common_subexpressions(empty);
    tf::jit::fold_constants(empty);
    tf::jit::optimize(empty);
    CHECK(empty.nodes.empty());
  }
}

TEST_CASE("passes: common subexpression elimination merges equal pure nodes",
          "[passes][cpu]") {
  Builder b;
  Ref x = b.input({2, 3});
  Ref y = b.input({2, 3});
  Ref e0 = b.add(tf::prims::Exp{}, {x});                        // 0
  Ref e1 = b.add(tf::prims::Exp{}, {x});                        // 1 -> 0
  Ref l0 = b.add(tf::prims::Log{}, {e0});                       // 2
  Ref l1 = b.add(tf::prims::Log{}, {e1});                       // 3 -> 2 (after the merge above)
  Ref s = b.add(tf::prims::Add{}, {l0, l1});                    // 4
  Ref r0 = b.add(tf::prims::ReduceSum({0}, false), {s});        // 5
  Ref r1 = b.add(tf::prims::ReduceSum({1}, false), {s});        // 6 other attributes
  Ref r2 = b.add(tf::prims::ReduceSum({0}, false), {s});        // 7 -> 5
  Ref r3 = b.add(tf::prims::ReduceSum({0}, true), {s});         // 8 other attributes
  Ref ey = b.add(tf::prims::Exp{}, {y});                        // 9 other input
  Ref sx = b.add(tf::prims::Add{}, {x, y});                     // 10
  Ref sy = b.add(tf::prims::Add{}, {y, x});                     // 11 operands swapped: kept
  b.g.outputs = {r0, r1, r2, r3, e1, ey, sx, sy, x};

  const Graph original = b.g;
  Graph g = b.g;
  tf::jit::eliminate_common_subexpressions(g);
  tf::jit::validate_graph(g);
  REQUIRE(prim_names(g) == std::vector<std::string>{"exp", "log", "add", "reduce_sum", "reduce_sum",
                                                  "reduce_sum", "exp", "add", "add"});
  CHECK(g.nodes[2].inputs == std::vector<Ref>{node_ref(1), node_ref(1)});
  CHECK(g.outputs == std::vector<Ref>{node_ref(3), node_ref(4), node_ref(3), node_ref(5),
                                      node_ref(0), node_ref(6), node_ref(7), node_ref(8), x});

  const auto xv = tf::detail::from_doubles(tf::testing::random_values(6, 0.5, 2.0, 7), {2, 3},
                                           tf::float32);
  const auto yv = tf::detail::from_doubles(tf::testing::random_values(6, -1.0, 1.0, 8), {2, 3},
                                           tf::float32);
  check_same_values(interpret(g, {xv, yv}), interpret(original, {xv, yv}));
}

TEST_CASE("passes: common subexpression elimination never merges effects, draws or devices",
          "[passes][cpu]") {
  Builder b;
  Ref x = b.input({2});
  Ref n0 = b.add(tf::prims::RandomNormal({2}, tf::float32, 0, 1, 5, 6), {});  // 0
  Ref n1 = b.add(tf::prims::RandomNormal({2}, tf::float32, 0, 1, 5, 6), {});  // 1 same seeds
  b.add(print_prim("x:"), {x});                                              // 2
  b.add(print_prim("x:"), {x});                                              // 3
  Ref k0 = b.add(Counter{}, {});                                             // 4
  Ref k1 = b.add(Counter{}, {});                                             // 5
  Ref cpu = b.add(tf::prims::Exp{}, {x});                                    // 6
  Ref gpu = b.add(tf::prims::Exp{}, {x}, tf::Device{tf::DeviceType::GPU, 0});  // 7
  Ref f64 = b.add(tf::prims::Cast(tf::float64), {x});                        // 8
  Ref i32 = b.add(tf::prims::Cast(tf::int32), {x});                          // 9
  Ref f64b = b.add(tf::prims::Cast(tf::float64), {x});                       // 10 -> 8
  b.g.outputs = {n0, n1, k0, k1, cpu, gpu, f64, i32, f64b};
  tf::jit::eliminate_common_subexpressions(b.g);
  tf::jit::validate_graph(b.g);
  REQUIRE(prim_names(b.g) == std::vector<std::string>{"random_normal", "random_normal", "print",
                                                    "print", "counter", "counter", "exp", "exp",
                                                    "cast", "cast"});
  CHECK(b.g.nodes[7].device == tf::Device{tf::DeviceType::GPU, 0});
  CHECK(b.g.outputs == std::vector<Ref>{node_ref(0), node_ref(1), node_ref(4), node_ref(5),
                                        node_ref(6), node_ref(7), node_ref(8), node_ref(9),
                                        node_ref(8)});
}

TEST_CASE("passes: common subexpression elimination of constants and multi-output nodes",
          "[passes][cpu]") {
  Builder b;
  Ref x = b.input({3});
  tf::Tensor c = floats({1, 2, 3}, {3});
  tf::Tensor twin = floats({1, 2, 3}, {3});  // equal values, another tensor
  Ref c_a = b.constant(c);
  Ref c_b = b.constant(c);                   // the same tensor object in a second slot
  Ref c_t = b.constant(twin);
  Ref a0 = b.add(tf::prims::Add{}, {x, c_a});         // 0
  Ref a1 = b.add(tf::prims::Add{}, {x, c_b});         // 1 -> 0
  Ref a2 = b.add(tf::prims::Add{}, {x, c_t});         // 2 kept: another tensor
  auto s0 = b.add_multi(SinCos{}, {a0});              // 3
  auto s1 = b.add_multi(SinCos{}, {a1});              // 4 -> 3
  Ref m = b.add(tf::prims::Multiply{}, {s1[1], s0[0]});  // 5
  b.add(Record(7), {s1[0]});                          // 6 reads (3, 0) after the merge
  b.g.outputs = {a1, a2, m, s1[1], c_b, c_t};

  const Graph original = b.g;
  Graph g = b.g;
  tf::jit::eliminate_common_subexpressions(g);
  tf::jit::validate_graph(g);
  REQUIRE(prim_names(g) == std::vector<std::string>{"add", "add", "sincos", "multiply", "record"});
  CHECK(g.nodes[0].inputs == std::vector<Ref>{x, c_a});
  CHECK(g.nodes[1].inputs == std::vector<Ref>{x, c_t});
  CHECK(g.nodes[2].inputs == std::vector<Ref>{node_ref(0)});
  CHECK(g.nodes[3].inputs == std::vector<Ref>{node_ref(2, 1), node_ref(2, 0)});
  CHECK(g.nodes[4].inputs == std::vector<Ref>{node_ref(2, 0)});
  CHECK(g.outputs ==
        std::vector<Ref>{node_ref(0), node_ref(1), node_ref(3), node_ref(2, 1), c_a, c_t});

  const auto xv = floats({0.1f, 0.2f, 0.3f}, {3});
  effect_log().clear();
  const auto want = interpret(original, {xv});
  const auto got = interpret(g, {xv});
  check_same_values(got, want);
  CHECK(effect_log() == std::vector<int>{7, 7});

  // The duplicate slot is unused now: dead code elimination drops it.
  tf::jit::eliminate_dead_code(g);
  REQUIRE(g.constants.size() == 2);
  CHECK(g.constants[0].is_same(c));
  CHECK(g.constants[1].is_same(twin));
  CHECK(g.outputs[4] == const_ref(0));
  CHECK(g.outputs[5] == const_ref(1));
  check_same_values(interpret(g, {xv}), want);
}

TEST_CASE("passes: constant folding evaluates constant subgraphs", "[passes][cpu]") {
  tf::DeviceScope cpu("/cpu:0");  // the builder's nodes run on CPU:0; so do its constants
  Builder b;
  Ref x = b.input({3});
  tf::Tensor c0t = floats({1, 2, 3}, {3});
  Ref c0 = b.constant(c0t);
  Ref c1 = b.constant(floats({10, 20, 30}, {3}));
  Ref s = b.add(tf::prims::Add{}, {c0, c1});                  // 0 folded: 11 22 33
  Ref p = b.add(tf::prims::Multiply{}, {s, c0});              // 1 folded: 11 44 99
  Ref r = b.add(tf::prims::Reshape({3, 1}), {p});             // 2 folded (a view)
  Ref t = b.add(tf::prims::ReduceSum({0}, false), {r});       // 3 folded: 154
  Ref u = b.add(tf::prims::Add{}, {x, p});                    // 4 kept: reads an input
  Ref v = b.add(tf::prims::Add{}, {x, c0});                   // 5 kept
  Ref w = b.add(tf::prims::Multiply{}, {u, t});               // 6 kept
  b.g.outputs = {w, v, p, t, x, c1};

  const Graph original = b.g;
  Graph g = b.g;
  tf::jit::fold_constants(g);
  tf::jit::validate_graph(g);
  REQUIRE(prim_names(g) == std::vector<std::string>{"add", "add", "multiply"});
  // Folded values were appended as constants.
  REQUIRE(g.constants.size() == 6);
  check_values(g.constants[2], {11, 22, 33});
  check_values(g.constants[3], {11, 44, 99});
  check_values(g.constants[5], {154});
  CHECK(g.nodes[0].inputs == std::vector<Ref>{x, const_ref(3)});
  CHECK(g.nodes[1].inputs == std::vector<Ref>{x, c0});
  CHECK(g.nodes[2].inputs == std::vector<Ref>{node_ref(0), const_ref(5)});
  CHECK(g.outputs == std::vector<Ref>{node_ref(2), node_ref(1), const_ref(3), const_ref(5), x, c1});
  for (const tf::Tensor& k : g.constants) {
    CHECK_FALSE(k.is_symbolic());
    CHECK(k.placement() == tf::Device{});
  }

  const auto xv = floats({-1, 0.5f, 2}, {3});
  check_same_values(interpret(g, {xv}), interpret(original, {xv}));

  // Dead code elimination then drops the intermediates nothing reads (s and the view of p).
  tf::jit::eliminate_dead_code(g);
  tf::jit::validate_graph(g);
  REQUIRE(g.constants.size() == 4);
  CHECK(g.constants[0].is_same(c0t));
  check_values(g.constants[2], {11, 44, 99});
  check_values(g.constants[3], {154});
  check_same_values(interpret(g, {xv}), interpret(original, {xv}));
}

TEST_CASE("passes: constant folding leaves effects, big results and failing ops alone",
          "[passes][cpu]") {
  SECTION("effects and draws are never folded") {
    Builder b;
    Ref c = b.constant(floats({1, 2}, {2}));
    b.add(print_prim("c:"), {c});                                              // 0
    Ref k = b.add(Counter{}, {});                                              // 1
    Ref n = b.add(tf::prims::RandomNormal({2}, tf::float32, 0, 1, 9, 9), {});  // 2
    Ref u = b.add(tf::prims::RandomUniform({2}, tf::float32, 0, 1, 9, 9), {});  // 3
    Ref kk = b.add(tf::prims::Add{}, {k, k});                                  // 4 reads an effect
    b.g.outputs = {k, n, u, kk};
    const int calls = counter_calls();
    CapturePrint cap;
    tf::jit::fold_constants(b.g);
    CHECK(cap.os.str().empty());
    CHECK(counter_calls() == calls);
    REQUIRE(prim_names(b.g) ==
          std::vector<std::string>{"print", "counter", "random_normal", "random_uniform", "add"});
    CHECK(b.g.constants.size() == 1);
  }

  SECTION("the size limit counts every output") {
    Builder b;
    Ref c = b.constant(floats({1, 2, 3, 4, 5, 6}, {2, 3}));
    Ref big = b.add(tf::prims::Negative{}, {c});                  // 0: 6 elements
    Ref small = b.add(tf::prims::ReduceSum({0, 1}, false), {c});  // 1: 1 element
    auto sc = b.add_multi(SinCos{}, {b.constant(floats({0, 1}, {2}))});  // 2: 2 + 2 elements
    b.g.outputs = {big, small, sc[0], sc[1]};
    Graph g4 = b.g;
    tf::jit::fold_constants(g4, 4);
    REQUIRE(prim_names(g4) == std::vector<std::string>{"negative"});
    CHECK(g4.outputs[1].source == Source::Constant);
    CHECK(g4.outputs[2].source == Source::Constant);
    CHECK(g4.outputs[3].source == Source::Constant);
    check_values(g4.constants.at(g4.outputs[1].index), {21});
    check_values(g4.constants.at(g4.outputs[2].index), {0, std::sin(1.0)});
    check_values(g4.constants.at(g4.outputs[3].index), {1, std::cos(1.0)});
    Graph g3 = b.g;
    tf::jit::fold_constants(g3, 3);
    REQUIRE(prim_names(g3) == std::vector<std::string>{"negative", "sincos"});
    Graph g0 = b.g;
    tf::jit::fold_constants(g0, 0);
    REQUIRE(prim_names(g0) == prim_names(b.g));
  }

  SECTION("the default limit is 4096 elements") {
    Builder b;
    Ref at = b.constant(tf::zeros({4096}));
    Ref over = b.constant(tf::zeros({4097}));
    Ref n0 = b.add(tf::prims::Negative{}, {at});
    Ref n1 = b.add(tf::prims::Negative{}, {over});
    b.g.outputs = {n0, n1};
    tf::jit::fold_constants(b.g);
    REQUIRE(prim_names(b.g) == std::vector<std::string>{"negative"});
    CHECK(b.g.outputs[0].source == Source::Constant);
    CHECK(b.g.outputs[1] == node_ref(0));
  }

  SECTION("an op that throws stays, and fails at run time as it would eagerly") {
    Builder b;
    Ref ok = b.add(CheckPositive{}, {b.constant(floats({1, 2}, {2}))});    // folded
    Ref bad = b.add(CheckPositive{}, {b.constant(floats({1, -2}, {2}))});  // stays
    b.g.outputs = {ok, bad};
    tf::jit::fold_constants(b.g);
    tf::jit::validate_graph(b.g);
    REQUIRE(prim_names(b.g) == std::vector<std::string>{"check_positive"});
    CHECK(b.g.outputs[0].source == Source::Constant);
    CHECK(b.g.outputs[1] == node_ref(0));
    TF_REQUIRE_THROWS_CONTAINING(interpret(b.g, {}), tf::InvalidArgumentError,
                                 "[check_positive] element 1 is -2");
  }

  SECTION("a node reading an input stays") {
    Builder b;
    Ref x = b.input({2});
    Ref c = b.constant(floats({1, 2}, {2}));
    Ref a = b.add(tf::prims::Add{}, {x, c});
    b.g.outputs = {a};
    tf::jit::fold_constants(b.g);
    REQUIRE(prim_names(b.g) == std::vector<std::string>{"add"});
    CHECK(b.g.nodes[0].inputs == std::vector<Ref>{x, c});
    CHECK(b.g.constants.size() == 1);
  }
}

TEST_CASE("passes: constant folding never folds through tensors captured before tracing",
          "[passes][cpu]") {
  const tf::Tensor w = floats({0.5f, 1.0f}, {2});  // an eager tensor the callable captures
  const uint64_t first_traced_id = tf::detail::next_tensor_id();
  const tf::Tensor lit = floats({2, 3}, {2});      // made while tracing
  Builder b;
  Ref x = b.input({2});
  Ref cw = b.constant(w);
  Ref cl = b.constant(lit);
  Ref ew = b.add(tf::prims::Exp{}, {cw});          // 0 reads a capture: stays
  Ref sl = b.add(tf::prims::Square{}, {cl});       // 1 folds
  Ref hl = b.add(tf::prims::Multiply{}, {sl, cl});  // 2 folds (reads a folded constant)
  Ref m = b.add(tf::prims::Multiply{}, {x, ew});   // 3
  Ref y = b.add(tf::prims::Add{}, {m, hl});        // 4
  b.g.outputs = {y};
  const tf::Tensor xv = floats({3, -2}, {2});

  Graph g = b.g;
  tf::jit::optimize(g, first_traced_id);
  tf::jit::validate_graph(g);
  REQUIRE(prim_names(g) == std::vector<std::string>{"exp", "multiply", "add"});
  CHECK(g.nodes[0].inputs == std::vector<Ref>{const_ref(0)});
  REQUIRE(g.constants.size() == 2);
  CHECK(g.constants[0].is_same(w));
  check_values(g.constants[1], {8, 27});

  // A replay under a tape that watches the capture still records exp(w): the gradient flows.
  {
    tf::GradientTape tape;
    tape.watch(w);
    const tf::Tensor out = interpret(g, {xv})[0];
    check_values(out, {3 * std::exp(0.5) + 8, -2 * std::exp(1.0) + 27}, 1e-6, 1e-5);
    const tf::Tensor dw = tape.gradient(out, w);
    REQUIRE(dw.defined());
    check_values(dw, {3 * std::exp(0.5), -2 * std::exp(1.0)}, 1e-6, 1e-6);
  }
  // Folding every constant (first_traced_id 0) cuts that path: the gradient is lost.
  Graph all = b.g;
  tf::jit::optimize(all);
  REQUIRE(prim_names(all) == std::vector<std::string>{"multiply", "add"});
  {
    tf::GradientTape tape;
    tape.watch(w);
    const tf::Tensor out = interpret(all, {xv})[0];
    CHECK_FALSE(tape.gradient(out, w).defined());
  }
}

TEST_CASE("passes: constant folding runs outside enclosing traces and tapes", "[passes][cpu]") {
  Builder b;
  Ref c = b.constant(floats({1, 2}, {2}));
  Ref e = b.add(tf::prims::Exp{}, {c});
  Ref s = b.add(tf::prims::Add{}, {e, c});
  b.g.outputs = {s};

  auto& ctx = tf::detail::thread_context();
  CountingTrace trace;
  CountingTape tape;
  tf::detail::TraceObserver* previous_trace = ctx.trace;
  ctx.trace = &trace;
  ctx.tapes.push_back(&tape);
  const size_t n_tapes = ctx.tapes.size();
  try {
    tf::jit::fold_constants(b.g);
  } catch (...) {
    ctx.tapes.pop_back();
    ctx.trace = previous_trace;
    throw;
  }
  // Restored afterwards.
  const bool trace_restored = ctx.trace == &trace;
  const bool tapes_restored = ctx.tapes.size() == n_tapes && ctx.tapes.back() == &tape;
  ctx.tapes.pop_back();
  ctx.trace = previous_trace;

  CHECK(trace_restored);
  CHECK(tapes_restored);
  CHECK(trace.nodes == 0);
  CHECK(tape.records == 0);
  CHECK(b.g.nodes.empty());
  REQUIRE(b.g.outputs[0].source == Source::Constant);
  const tf::Tensor folded = b.g.constants.at(b.g.outputs[0].index);
  CHECK_FALSE(folded.is_symbolic());
  check_values(folded, {std::exp(1.0) + 1, std::exp(2.0) + 2}, 1e-6, 1e-6);
}

TEST_CASE("passes: optimize keeps values, effects and their order", "[passes][cpu]") {
  Builder b;
  Ref x = b.input({2, 3});
  Ref y = b.input({3});
  tf::Tensor scale_t = floats({0.5f, 1.5f, 2.5f}, {3});
  Ref scale = b.constant(scale_t);
  Ref scale_again = b.constant(scale_t);
  Ref shift = b.constant(floats({1, -1, 2}, {3}));
  Ref k = b.add(tf::prims::Multiply{}, {scale, shift});      // 0 folds
  Ref k2 = b.add(tf::prims::Exp{}, {k});                     // 1 folds
  b.add(Record(1), {x});                                     // 2 effect
  Ref e0 = b.add(tf::prims::Exp{}, {x});                     // 3
  Ref m0 = b.add(tf::prims::Multiply{}, {e0, k2});           // 4
  Ref e1 = b.add(tf::prims::Exp{}, {x});                     // 5 -> 3
  Ref m1 = b.add(tf::prims::Multiply{}, {e1, k2});           // 6 -> 4
  b.add(print_prim("m1:"), {m1});                            // 7 effect reads a merged node
  Ref d = b.add(tf::prims::Subtract{}, {m0, m1});            // 8 (zero, but not simplified)
  b.add(tf::prims::Log{}, {d});                              // 9 dead
  auto sc = b.add_multi(SinCos{}, {y});                      // 10 only sin read
  Ref ys = b.add(tf::prims::Add{}, {sc[0], scale_again});    // 11 reads the duplicate slot
  Ref ys2 = b.add(tf::prims::Add{}, {sc[0], scale});         // 12 -> 11
  b.add(Record(2), {ys2});                                   // 13 effect
  Ref r = b.add(tf::prims::ReduceSum({1}, false), {m0});     // 14
  Ref z = b.add(tf::prims::RandomUniform({2}, tf::float32, 0, 1, 3, 3), {});  // 15 dead, kept
  b.add(tf::prims::Square{}, {z});                           // 16 dead
  Ref out = b.add(tf::prims::Add{}, {r, r});                 // 17
  b.g.outputs = {out, ys, ys2, x, shift, k2, d};

  const Graph original = b.g;
  Graph g = b.g;
  tf::jit::optimize(g);
  tf::jit::validate_graph(g);
  REQUIRE(prim_names(g) ==
        std::vector<std::string>{"record", "exp", "multiply", "print", "subtract", "sincos", "add",
                                 "record", "reduce_sum", "random_uniform", "add"});
  CHECK(g.nodes[3].inputs == std::vector<Ref>{node_ref(2)});
  CHECK(g.nodes[4].inputs == std::vector<Ref>{node_ref(2), node_ref(2)});
  CHECK(g.nodes[7].inputs == std::vector<Ref>{node_ref(6)});
  CHECK(g.outputs[1] == g.outputs[2]);
  CHECK(g.outputs[3] == x);
  CHECK(g.outputs[4].source == Source::Constant);
  CHECK(g.outputs[5].source == Source::Constant);
  // Left: shift (an output), the folded exp(scale * shift) and scale.
  CHECK(g.constants.size() == 3);

  for (unsigned seed = 1; seed <= 3; ++seed) {
    const auto xv = tf::detail::from_doubles(tf::testing::random_values(6, -2, 2, seed), {2, 3},
                                             tf::float32);
    const auto yv = tf::detail::from_doubles(tf::testing::random_values(3, -2, 2, seed + 10),
                                             {3}, tf::float32);
    std::vector<tf::Tensor> want, got;
    std::string printed_want, printed_got;
    std::vector<int> effects_want, effects_got;
    {
      CapturePrint cap;
      effect_log().clear();
      want = interpret(original, {xv, yv});
      printed_want = cap.os.str();
      effects_want = effect_log();
    }
    {
      CapturePrint cap;
      effect_log().clear();
      got = interpret(g, {xv, yv});
      printed_got = cap.os.str();
      effects_got = effect_log();
    }
    check_same_values(got, want);
    CHECK(got[3].is_same(xv));
    CHECK(printed_got == printed_want);
    CHECK_FALSE(printed_got.empty());
    CHECK(effects_got == std::vector<int>{1, 2});
    CHECK(effects_got == effects_want);
  }

  // Optimising twice changes nothing more.
  Graph again = g;
  tf::jit::optimize(again);
  REQUIRE(prim_names(again) == prim_names(g));
  CHECK(again.outputs == g.outputs);
  CHECK(again.constants.size() == g.constants.size());
}

TEST_CASE("passes: shape queries fold once a specialised graph knows its shapes",
          "[passes][cpu]") {
  // reduce_mean over a None dimension divides by element_count, computed at every call in the
  // shape-generic graph; each specialisation knows the count and folds it into a constant (no
  // host value copied to the device per call on a GPU).
  auto f = tf::function([](const tf::Tensor& x) { return tf::reduce_mean(x * 2.0f); },
                        {.input_signature = {tf::TensorSpec({tf::None, 4})}});
  for (int64_t rows : {1, 3, 7}) {
    INFO("rows = " << rows);
    const tf::Tensor x = tf::fill({rows, 4}, tf::Tensor(1.5f));
    check_values(f(x), {3.0});
    const Graph& g = f.get_concrete_function(tf::TensorSpec({rows, 4})).graph();
    INFO(g.to_string());
    for (const auto& node : g.nodes) CHECK(std::string(node.prim->name()) != "element_count");
    // Gradients through the call (a recorded replay) see the folded count.
    const tf::Tensor v = tf::fill({rows, 4}, tf::Tensor(0.5f));
    tf::GradientTape tape;
    tape.watch(v);
    const tf::Tensor dv = tape.gradient(f(v), v);
    check_values(dv, std::vector<double>(static_cast<size_t>(rows * 4), 2.0 / (rows * 4.0)));
  }
  const Graph& generic = f.get_concrete_function(tf::TensorSpec({tf::None, 4})).graph();
  bool counted = false;
  for (const auto& node : generic.nodes)
    counted |= std::string(node.prim->name()) == "element_count";
  CHECK(counted);
}
