// jit_compile on GPUs: elementwise chains as NVRTC-generated kernels (jit/cuda_codegen.h,
// jit/cuda_kernels.h) and graphs replayed as captured CUDA graphs (jit/cuda_graph.h). The
// generator and NVRTC itself are tested everywhere CUDA is built in (NVRTC needs no GPU); the
// kernels and graphs run where a GPU is present.
#include <cstdlib>
#include <string>
#include <vector>

#include "autograd/tape.h"
#include "autograd/variable.h"
#include "core/error.h"
#include "jit/cuda_codegen.h"
#include "jit/cuda_graph.h"
#include "jit/cuda_kernels.h"
#include "jit/function.h"
#include "ops/binary.h"
#include "ops/copy.h"
#include "ops/factory.h"
#include "ops/linalg.h"
#include "ops/nn.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
using tf::testing::check_close;

namespace {

// exp(x * 0.5 + 1), then tanh(a - y) * a with a read twice: the chain's steps in graph form.
std::vector<tf::jit::CudaFusedStep> sample_steps() {
  // inputs: 0 = x, 1 = y, 2 = the scalar 0.5, 3 = the scalar 1
  return {{"multiply", 0, 2}, {"add", 4, 3}, {"exp", 5, -1}, {"subtract", 6, 1},
          {"tanh", 7, -1},    {"multiply", 8, 6}, {"relu", 9, -1}};
}

bool nvrtc_or_warn() {
  std::string why;
  if (tf::jit::nvrtc_available(&why)) return true;
  WARN("NVRTC is not available here: " << why);
  return false;
}

bool gpu_or_warn() {
  if (tf::testing::has_gpu()) return true;
  WARN("no GPU on this machine: the kernels are compiled but not run here");
  return false;
}

const tf::jit::CudaGraphStats graph_stats(const tf::Graph& g) {
  REQUIRE(g.cuda_graph() != nullptr);
  return tf::jit::cuda_graph_stats(*g.cuda_graph());
}

}  // namespace

TEST_CASE("cuda codegen: a chain becomes one element function and two kernels", "[jit]") {
  using tf::jit::cuda_codegen_supports;
  CHECK(cuda_codegen_supports("exp", 1));
  CHECK(cuda_codegen_supports("relu", 1));
  CHECK(cuda_codegen_supports("maximum", 2));
  CHECK_FALSE(cuda_codegen_supports("exp", 2));
  CHECK_FALSE(cuda_codegen_supports("matmul", 2));
  CHECK_FALSE(cuda_codegen_supports("logical_not", 1));

  const auto steps = sample_steps();
  const std::string src = tf::jit::cuda_fused_source("k", 4, {false, false, true, true}, steps);
  INFO(src);
  // Every step reads the operands it names (inputs x0.., earlier steps t0..), in order.
  CHECK(src.find("const float t0 = tf_multiply(x0, x2);") != std::string::npos);
  CHECK(src.find("const float t1 = tf_add(t0, x3);") != std::string::npos);
  CHECK(src.find("const float t2 = tf_exp(t1);") != std::string::npos);
  CHECK(src.find("const float t5 = tf_multiply(t4, t2);") != std::string::npos);
  CHECK(src.find("return t6;") != std::string::npos);
  // Scalars are read once; full-size inputs per element, and as float4 in the _v4 kernel.
  CHECK(src.find("const float s2 = in2[0];") != std::string::npos);
  CHECK(src.find("tf_fused_element(in0[i], in1[i], s2, s3)") != std::string::npos);
  CHECK(src.find("reinterpret_cast<const float4*>(in1)[i]") != std::string::npos);
  CHECK(src.find("reinterpret_cast<const float4*>(in2)") == std::string::npos);
  CHECK(src.find("r.w = tf_fused_element(v0.w, v1.w, s2, s3);") != std::string::npos);
  CHECK(src.find("void __launch_bounds__(256) k(") != std::string::npos);
  CHECK(src.find("void __launch_bounds__(256) k_v4(") != std::string::npos);

  // Malformed chains are rejected before any compiler sees them.
  const std::vector<tf::jit::CudaFusedStep> forward = {{"exp", 2, -1}};
  TF_REQUIRE_THROWS_CONTAINING(tf::jit::cuda_fused_source("k", 1, {false}, forward),
                               tf::InvalidArgumentError, "neither an input nor an earlier step");
  const std::vector<tf::jit::CudaFusedStep> unknown = {{"matmul", 0, 0}};
  TF_REQUIRE_THROWS_CONTAINING(tf::jit::cuda_fused_source("k", 1, {false}, unknown),
                               tf::InvalidArgumentError, "no generated CUDA form for matmul");
}

TEST_CASE("cuda codegen: NVRTC compiles every generated op for sm_80 and sm_90", "[jit]") {
  if (!nvrtc_or_warn()) return;
  const std::vector<std::string> unary = {"negative", "abs",   "sign",  "exp",  "log",   "log1p",
                                          "sqrt",     "rsqrt", "square", "tanh", "sigmoid", "sin",
                                          "cos",      "floor", "ceil",  "round", "relu"};
  const std::vector<std::string> binary = {"add",  "subtract", "multiply", "divide",
                                           "pow",  "maximum",  "minimum"};
  // One chain that uses every op: each unary op on the running value, each binary op with
  // input 1 (full size) or input 2 (a scalar).
  std::vector<tf::jit::CudaFusedStep> steps;
  int last = 0;
  for (const auto& op : unary) {
    steps.push_back({op, last, -1});
    last = 3 + static_cast<int>(steps.size()) - 1;
  }
  for (size_t i = 0; i < binary.size(); ++i) {
    steps.push_back({binary[i], last, i % 2 ? 1 : 2});
    last = 3 + static_cast<int>(steps.size()) - 1;
  }
  const std::string src = tf::jit::cuda_fused_source("tf_fused", 3, {false, false, true}, steps);
  for (const char* arch : {"sm_80", "sm_90", "compute_90"}) {
    INFO(arch);
    std::string image;
    REQUIRE_NOTHROW(image = tf::jit::nvrtc_compile(src, arch));
    CHECK(image.size() > 1000);
    if (std::string(arch).rfind("compute_", 0) == 0) {
      // PTX text with both kernels as entry points.
      CHECK(image.find(".entry tf_fused(") != std::string::npos);
      CHECK(image.find(".entry tf_fused_v4(") != std::string::npos);
    } else {
      CHECK(image.compare(0, 4, "\x7f" "ELF") == 0);  // a CUBIN is an ELF file
    }
  }
}

TEST_CASE("cuda codegen: compile errors carry NVRTC's log", "[jit]") {
  if (!nvrtc_or_warn()) return;
  TF_REQUIRE_THROWS_CONTAINING(
      tf::jit::nvrtc_compile("extern \"C\" __global__ void k() { undeclared_name = 1; }", "sm_90"),
      tf::InvalidArgumentError, "undeclared_name");
  TF_REQUIRE_THROWS_CONTAINING(tf::jit::nvrtc_compile("", "gfx90a"), tf::InvalidArgumentError,
                               "neither sm_XY nor compute_XY");
}

TEST_CASE("jit_compile: CPU graphs are unchanged and never captured", "[jit]") {
  tf::DeviceScope cpu("/cpu:0");
  auto body = [](const tf::Tensor& x) { return tf::exp(x * 2.0f) + 1.0f; };
  auto f = tf::function(body, tf::FunctionOptions{.jit_compile = true});
  tf::Tensor x = tf::random::uniform({100}, -1, 1, tf::float32, 3);
  check_close(f(x), body(x), 0, 0);
  const tf::Graph& g = f.get_concrete_function(tf::TensorSpec({100})).graph();
  CHECK(g.num_nodes() == 1);
  CHECK(g.cuda_graph() == nullptr);
  INFO(g.cuda_graph_note());  // "its nodes run on /device:CPU:0", or "built without CUDA"
  CHECK_FALSE(g.cuda_graph_note().empty());
}

TEST_CASE("jit_compile: fused GPU chains run generated kernels with eager results [cuda]", "[jit][cuda]") {
  if (!gpu_or_warn() || !nvrtc_or_warn()) return;
  tf::DeviceScope gpu("/gpu:0");
  auto chain = [](const tf::Tensor& x, const tf::Tensor& y) {
    tf::Tensor a = tf::exp(x * 0.5f + 1.0f);
    tf::Tensor b = tf::tanh(a - y) * a;
    return tf::nn::relu(tf::maximum(b, y) / (tf::abs(y) + 1.0f)) -
           tf::sqrt(tf::square(x) + 1.0f) + tf::sigmoid(x) * tf::rsqrt(tf::abs(y) + 0.5f);
  };
  auto f = tf::function(chain, tf::FunctionOptions{.jit_compile = true});
  // Sizes that take the scalar loop (1, 7), the float4 loop with and without a tail.
  for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{1024}, int64_t{100003}}) {
    INFO("n = " << n);
    tf::Tensor x = tf::random::uniform({n}, -2, 2, tf::float32, 10 + n);
    tf::Tensor y = tf::random::uniform({n}, -2, 2, tf::float32, 20 + n);
    check_close(f(x, y), chain(x, y), 1e-6, 1e-7);
    const tf::Graph& g = f.get_concrete_function(tf::TensorSpec({n}), tf::TensorSpec({n})).graph();
    INFO(g.to_string());
    CHECK(g.to_string().find("fused_elementwise") != std::string::npos);
    CHECK(g.to_string().find("nvrtc") != std::string::npos);
  }
  // Without jit_compile the same function stays unfused on the GPU (unless
  // TAPEFLOW_JIT_COMPILE forces it on, as tools/gpu_check.sh's second pass does).
  auto plain = tf::function(chain);
  tf::Tensor x = tf::random::uniform({64}, -2, 2, tf::float32, 1);
  tf::Tensor y = tf::random::uniform({64}, -2, 2, tf::float32, 2);
  if (std::getenv("TAPEFLOW_JIT_COMPILE") == nullptr) {
    check_close(plain(x, y), chain(x, y), 0, 0);
    const tf::Graph& pg =
        plain.get_concrete_function(tf::TensorSpec({64}), tf::TensorSpec({64})).graph();
    CHECK(pg.to_string().find("nvrtc") == std::string::npos);
  }
  // Gradients through the fused GPU node.
  tf::GradientTape tape(tf::TapeOptions{.persistent = true});
  tape.watch(x);
  tape.watch(y);
  tf::Tensor eager = tf::reduce_sum(chain(x, y));
  tf::Tensor traced = tf::reduce_sum(f(x, y));
  check_close(tape.gradient(traced, x), tape.gradient(eager, x), 1e-5, 1e-6);
  check_close(tape.gradient(traced, y), tape.gradient(eager, y), 1e-5, 1e-6);
}

TEST_CASE("jit_compile: GPU graphs replay as one captured CUDA graph [cuda]", "[jit][cuda]") {
  if (!gpu_or_warn()) return;
  tf::DeviceScope gpu("/gpu:0");
  auto body = [](const tf::Tensor& x, const tf::Tensor& w) {
    tf::Tensor h = tf::nn::relu(tf::matmul(x, w) + 0.25f);
    tf::Tensor c = h;
    for (int i = 0; i < 20; ++i) c = tf::reduce_sum(c * 0.5f, 1, /*keepdims=*/true) + c;
    return std::vector<tf::Tensor>{c, tf::reduce_mean(h)};
  };
  auto f = tf::function(body, tf::FunctionOptions{.jit_compile = true});
  std::vector<tf::Tensor> first;
  for (int call = 0; call < 4; ++call) {
    INFO("call " << call);
    tf::Tensor x = tf::random::uniform({8, 16}, -1, 1, tf::float32, 100 + call);
    tf::Tensor w = tf::random::uniform({16, 12}, -1, 1, tf::float32, 200 + call);
    std::vector<tf::Tensor> got = f(x, w);
    std::vector<tf::Tensor> want = body(x, w);
    REQUIRE(got.size() == 2);
    check_close(got[0], want[0], 1e-5, 1e-5);
    check_close(got[1], want[1], 1e-5, 1e-5);
    if (call == 0) first = {tf::identity(got[0]), got[0]};
  }
  // Results of earlier calls are copies: later replays do not overwrite them.
  check_close(first[1], first[0], 0, 0);
  // Memory a replay writes (intermediates, scratch freed while capturing) stays the graph's:
  // tensors made between replays keep their values.
  std::vector<tf::Tensor> others;
  for (int64_t k = 1; k <= (int64_t{1} << 16); k *= 2) others.push_back(tf::fill({k}, tf::Tensor(3.0f)));
  {
    tf::Tensor x = tf::random::uniform({8, 16}, -1, 1, tf::float32, 300);
    tf::Tensor w = tf::random::uniform({16, 12}, -1, 1, tf::float32, 400);
    check_close(f(x, w)[0], body(x, w)[0], 1e-5, 1e-5);
  }
  for (const tf::Tensor& t : others)
    check_close(t, tf::fill(t.shape(), tf::Tensor(3.0f)), 0, 0);
  const tf::Graph& g =
      f.get_concrete_function(tf::TensorSpec({8, 16}), tf::TensorSpec({16, 12})).graph();
  INFO(g.to_string() << g.cuda_graph_note());
  const tf::jit::CudaGraphStats st = graph_stats(g);
  INFO(st.failure);
  CHECK(st.captured);
  CHECK_FALSE(st.failed);
  CHECK(st.launches == 4);  // the first call runs node by node, the second captures
  CHECK(st.num_kernel_nodes >= 20);
  CHECK(st.kept_bytes > 0);

  // A tape around the call records the ops one by one (the captured graph is not used).
  tf::Tensor x = tf::random::uniform({8, 16}, -1, 1, tf::float32, 7);
  tf::Tensor w = tf::random::uniform({16, 12}, -1, 1, tf::float32, 8);
  tf::GradientTape tape(tf::TapeOptions{.persistent = true});
  tape.watch(w);
  tf::Tensor traced = f(x, w)[1];
  tf::Tensor eager = body(x, w)[1];
  check_close(tape.gradient(traced, w), tape.gradient(eager, w), 1e-5, 1e-6);
  CHECK(graph_stats(g).launches == 4);
}

TEST_CASE("jit_compile: graphs with side effects or host reads replay node by node [cuda]", "[jit][cuda]") {
  if (!gpu_or_warn()) return;
  tf::DeviceScope gpu("/gpu:0");
  // Variables are read at every call: never captured.
  tf::Variable v(tf::ones({4}));
  auto with_variable = tf::function([&](const tf::Tensor& x) { return x * v + 1.0f; },
                                    tf::FunctionOptions{.jit_compile = true});
  tf::Tensor x = tf::ones({4});
  check_close(with_variable(x), tf::ones({4}) * 2.0f, 0, 0);
  v.assign(tf::ones({4}) * 3.0f);
  check_close(with_variable(x), tf::ones({4}) * 4.0f, 0, 0);
  const tf::Graph& g = with_variable.get_concrete_function(tf::TensorSpec({4})).graph();
  CHECK(g.cuda_graph() == nullptr);
  CHECK(g.cuda_graph_note().find("side effects") != std::string::npos);

  // Integer pow checks its exponents on the host, which a capture cannot do: the capture (at
  // the second call) fails once, and every call still computes the right values node by node.
  auto ipow = tf::function(
      [](const tf::Tensor& b, const tf::Tensor& e) { return tf::pow(b, e) + tf::pow(e, b); },
      tf::FunctionOptions{.jit_compile = true});
  tf::Tensor b = tf::constant(std::vector<int32_t>{1, 2, 3}, {3});
  tf::Tensor e = tf::constant(std::vector<int32_t>{2, 3, 1}, {3});
  for (int call = 0; call < 3; ++call)
    tf::testing::check_values(ipow(b, e), {1 + 2, 8 + 9, 3 + 1}, 0, 0);
  const tf::Graph& gp = ipow.get_concrete_function(tf::TensorSpec({3}, tf::int32),
                                                    tf::TensorSpec({3}, tf::int32)).graph();
  const tf::jit::CudaGraphStats st = graph_stats(gp);
  CHECK(st.failed);
  CHECK_FALSE(st.captured);
  CHECK(st.launches == 0);
  CHECK_FALSE(st.failure.empty());
}
