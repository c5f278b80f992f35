// jit_compile on GPUs: elementwise chains as NVRTC-generated kernels (jit/cuda_codegen.h,
// jit/cuda_kernels.h) and graphs replayed as captured CUDA graphs (jit/cuda_graph.h). The
// generator and NVRTC itself are tested everywhere CUDA is built in (NVRTC needs no GPU); the
// kernels and graphs run where a GPU is present.
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "autograd/tape.h"
#include "autograd/variable.h"
#include "core/error.h"
#include "jit/cuda_codegen.h"
#include "jit/cuda_graph.h"
#include "jit/cuda_kernels.h"
#include "jit/function.h"
#include "jit/passes.h"
#include "ops/binary.h"
#include "ops/copy.h"
#include "ops/factory.h"
#include "ops/linalg.h"
#include "ops/movement.h"
#include "ops/nn.h"
#include "ops/print.h"
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
  return {{"multiply", 0, 2}, {"add", 4, 3},      {"exp", 5, -1}, {"subtract", 6, 1},
          {"tanh", 7, -1},    {"multiply", 8, 6}, {"relu", 9, -1}};
}

// Every op with a generated form.
const std::vector<std::string> kUnary = {
    "negative", "abs",  "sign", "exp",  "log",  "log1p",    "sqrt",  "rsqrt", "square", "tanh",
    "sigmoid",  "sin",  "cos",  "erf",  "erfc", "softsign", "floor", "ceil",  "round",  "relu",
    "tan",      "asin", "acos", "atan", "sinh", "cosh",     "asinh", "acosh", "atanh",  "expm1"};
const std::vector<std::string> kBinary = {"add",     "subtract", "multiply", "divide",
                                          "pow",     "maximum",  "minimum",  "atan2"};

bool nvrtc_or_warn() {
  std::string why;
  if (tf::jit::nvrtc_available(&why)) return true;
  WARN("NVRTC is not available here: " << why);
  return false;
}

bool gpu_or_warn() {
  if (!tf::testing::has_gpu()) {
    WARN("no GPU on this machine: the kernels are compiled but not run here");
    return false;
  }
  return !tf::testing::jit_compile_forced_off("generated kernels and CUDA graphs");
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
  const std::string src = tf::jit::cuda_fused_source("k", 4, {0, 0, 1, 1}, steps);
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
  // A row of 6 read through a running position, no division per element.
  const std::string row = tf::jit::cuda_fused_source("k", 4, {0, 6, 1, 1}, steps);
  INFO(row);
  CHECK(row.find("long long p1 = first % 6LL;") != std::string::npos);
  CHECK(row.find("out[i] = tf_fused_element(in0[i], in1[p1], s2, s3);") != std::string::npos);
  CHECK(row.find("if (p1 >= 6LL) p1 -= 6LL;") != std::string::npos);
  CHECK(row.find("reinterpret_cast<const float4*>(in1)") == std::string::npos);
  CHECK(src.find("void __launch_bounds__(256) k(") != std::string::npos);
  CHECK(src.find("void __launch_bounds__(256) k_v4(") != std::string::npos);

  // Malformed chains are rejected before any compiler sees them.
  const std::vector<tf::jit::CudaFusedStep> forward = {{"exp", 2, -1}};
  TF_REQUIRE_THROWS_CONTAINING(tf::jit::cuda_fused_source("k", 1, {0}, forward),
                               tf::InvalidArgumentError, "neither an input nor an earlier step");
  const std::vector<tf::jit::CudaFusedStep> unknown = {{"matmul", 0, 0}};
  TF_REQUIRE_THROWS_CONTAINING(tf::jit::cuda_fused_source("k", 1, {0}, unknown),
                               tf::InvalidArgumentError, "no generated CUDA form for matmul");
}

namespace {

// Definitions that let the generated CUDA source compile as host C++: the built-in index
// variables become globals set before each "thread" runs (one at a time, on the calling
// thread; not thread-locals: LeakSanitizer walks the dynamic TLS of unloaded modules and
// crashes on it), the _rn intrinsics plain float arithmetic (compiled with -ffp-contract=off,
// so each rounds once).
constexpr const char* kHostPrelude = R"(#include <math.h>
struct float4 { float x, y, z, w; };
struct tf_dim3 { unsigned x; };
static tf_dim3 blockIdx{0}, threadIdx{0}, gridDim{1}, blockDim{256};
extern "C" void tf_set_launch(unsigned b, unsigned t, unsigned g, unsigned bd) {
  blockIdx.x = b; threadIdx.x = t; gridDim.x = g; blockDim.x = bd;
}
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(n)
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
)";

// The generated module built as a host shared library; its kernels run one emulated thread at
// a time over a small grid.
class HostModule {
 public:
  explicit HostModule(const std::string& source) {
    // A directory per module: dlopen of a path already loaded returns the loaded library.
    static int count = 0;
    dir_ = std::filesystem::temp_directory_path() /
           ("tapeflow_codegen_" + std::to_string(::getpid()) + "_" + std::to_string(++count));
    std::filesystem::create_directories(dir_);
    const auto src = dir_ / "kernel.cpp", lib = dir_ / "kernel.so", log = dir_ / "log.txt";
    std::ofstream(src) << kHostPrelude << source;
    const std::string cmd = std::string(TAPEFLOW_TEST_HOST_CXX) +
                            " -std=c++17 -O1 -ffp-contract=off -fno-strict-aliasing -fPIC "
                            "-shared -w -o " +
                            lib.string() + " " + src.string() + " > " + log.string() + " 2>&1";
    const int rc = std::system(cmd.c_str());
    std::ifstream in(log);
    compiler_log_.assign(std::istreambuf_iterator<char>(in), {});
    if (rc == 0) handle_ = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  }
  ~HostModule() {
    if (handle_) dlclose(handle_);
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  bool ok() const { return handle_ != nullptr; }
  const std::string& log() const { return compiler_log_; }
  // Runs a three-input kernel with cudaLaunchKernel's argument array (a pointer to each
  // argument) on `grid` blocks of 256 threads.
  void run_args(const char* name, void** args, unsigned grid) const {
    run(name, *static_cast<const float**>(args[0]), *static_cast<const float**>(args[1]),
        *static_cast<const float**>(args[2]), *static_cast<float**>(args[3]),
        *static_cast<long long*>(args[4]), grid);
  }
  // Runs kernel `name` with three inputs over `n` elements on `grid` blocks of 256 threads.
  void run(const char* name, const float* a, const float* b, const float* c, float* out,
           long long n, unsigned grid) const {
    using Kernel = void (*)(const float*, const float*, const float*, float*, long long);
    using SetLaunch = void (*)(unsigned, unsigned, unsigned, unsigned);
    auto kernel = reinterpret_cast<Kernel>(dlsym(handle_, name));
    auto set = reinterpret_cast<SetLaunch>(dlsym(handle_, "tf_set_launch"));
    REQUIRE(kernel != nullptr);
    REQUIRE(set != nullptr);
    for (unsigned blk = 0; blk < grid; ++blk)
      for (unsigned t = 0; t < 256; ++t) {
        set(blk, t, grid, 256);
        kernel(a, b, c, out, n);
      }
  }

 private:
  std::filesystem::path dir_;
  std::string compiler_log_;
  void* handle_ = nullptr;
};

// A CudaModule whose kernels run on the host (HostModule), to drive the fused node's launch
// code (argument array, kernel choice, work items) without a GPU. Records the kernels launched.
class HostCudaModule final : public tf::jit::CudaModule {
 public:
  explicit HostCudaModule(const std::string& source) : module_(source) {}
  bool ok() const { return module_.ok(); }
  const std::string& log() const { return module_.log(); }
  void launch(const char* kernel, tf::Device, int64_t work_items, void** args) const override {
    launched.push_back(kernel);
    // A few blocks only: every emulated thread loops over several elements.
    const int64_t blocks = std::clamp<int64_t>((work_items + 255) / 256, 1, 3);
    module_.run_args(kernel, args, static_cast<unsigned>(blocks));
  }
  const std::string& target() const override { return target_; }
  mutable std::vector<std::string> launched;

 private:
  HostModule module_;
  std::string target_ = "host";
};

}  // namespace

TEST_CASE("cuda codegen: the fused node's launch passes its tensors and picks the kernel",
          "[jit]") {
  if (!std::filesystem::exists(TAPEFLOW_TEST_HOST_CXX)) {
    WARN("no host compiler at " << TAPEFLOW_TEST_HOST_CXX);
    return;
  }
  tf::DeviceScope cpu("/cpu:0");
  // tanh(x * s + y): x full size, y full size or one element, s one element.
  const std::vector<tf::jit::CudaFusedStep> steps = {
      {"multiply", 0, 2}, {"add", 3, 1}, {"tanh", 4, -1}};
  const int64_t n = 1003;
  const tf::Tensor s = tf::constant(0.75f);
  const tf::Tensor y = tf::random::uniform({n}, -1, 1, tf::float32, 42);
  // x twice: 64-byte aligned, and one float into a larger buffer (not 16-byte aligned).
  const tf::Tensor x = tf::random::uniform({n}, -2, 2, tf::float32, 41);
  const tf::Tensor wide = tf::concat({tf::zeros({1}), x}, 0);
  const tf::Tensor x_off = tf::detail::view(wide, tf::TensorShape{n}, sizeof(float));
  const tf::Tensor want = tf::tanh(x * s + y);

  CHECK(tf::jit::detail::fused_input_periods(std::vector<tf::Tensor>{x, y, s}, n) ==
        std::vector<int64_t>{0, 0, 1});
  HostCudaModule full(tf::jit::cuda_fused_source("tf_fused", 3, {0, 0, 1}, steps));
  INFO(full.log());
  REQUIRE(full.ok());
  for (const tf::Tensor& xin : {x, x_off}) {
    tf::Tensor out = tf::zeros({n});
    tf::jit::detail::launch_fused(full, tf::Device{}, std::vector<tf::Tensor>{xin, y, s}, out);
    check_close(out, want, 1e-6, 1e-7);
  }
  CHECK(full.launched == std::vector<std::string>{"tf_fused_v4", "tf_fused"});

  // An update computed into its own input's buffer (a variable updated in place): the
  // aliasing variant declares no __restrict__ pointer and gives the same values.
  const std::string aliasing = tf::jit::cuda_fused_source("tf_fused", 3, {0, 0, 1}, steps, true);
  CHECK(aliasing.find("__restrict__") == std::string::npos);
  CHECK(tf::jit::cuda_fused_source("tf_fused", 3, {0, 0, 1}, steps).find("__restrict__") !=
        std::string::npos);
  HostCudaModule in_place(aliasing);
  INFO(in_place.log());
  REQUIRE(in_place.ok());
  for (int64_t len : {n, int64_t{3}}) {
    tf::Tensor buffer = tf::slice(x, {0}, {len}) * 1.0f;  // a buffer of its own
    const tf::Tensor y_len = tf::slice(y, {0}, {len});
    const tf::Tensor want_len = tf::tanh(buffer * s + y_len);
    tf::jit::detail::launch_fused(in_place, tf::Device{},
                                  std::vector<tf::Tensor>{buffer, y_len, s}, buffer);
    check_close(buffer, want_len, 1e-6, 1e-7);
  }
  CHECK(in_place.launched == std::vector<std::string>{"tf_fused_v4", "tf_fused_v4"});

  // y with one element at run time: the scalar variant of the same chain.
  const tf::Tensor y1 = tf::constant(0.25f);
  const std::vector<int64_t> flags =
      tf::jit::detail::fused_input_periods(std::vector<tf::Tensor>{x, y1, s}, n);
  CHECK(flags == std::vector<int64_t>{0, 1, 1});
  HostCudaModule scalar_y(tf::jit::cuda_fused_source("tf_fused", 3, flags, steps));
  REQUIRE(scalar_y.ok());
  tf::Tensor out = tf::zeros({n});
  tf::jit::detail::launch_fused(scalar_y, tf::Device{}, std::vector<tf::Tensor>{x, y1, s}, out);
  check_close(out, tf::tanh(x * s + y1), 1e-6, 1e-7);
  CHECK(scalar_y.launched == std::vector<std::string>{"tf_fused_v4"});
  // Fewer than four elements: the float4 kernel's tail does all of them.
  tf::Tensor out3 = tf::zeros({3});
  const tf::Tensor x3 = tf::constant(std::vector<float>{-1.0f, 0.0f, 2.0f});
  const tf::Tensor y3 = tf::constant(std::vector<float>{0.5f, -0.5f, 1.0f});
  tf::jit::detail::launch_fused(full, tf::Device{}, std::vector<tf::Tensor>{x3, y3, s}, out3);
  check_close(out3, tf::tanh(x3 * s + y3), 1e-6, 1e-7);

  // y a row repeated along x (a bias): periods below 4 (lanes wrap more than once), not a
  // multiple of 4, a multiple of 4, and long; both kernels, over grids whose strides do not
  // divide the period (the running positions wrap at every step).
  for (int64_t m : {int64_t{2}, int64_t{3}, int64_t{7}, int64_t{16}, int64_t{500}}) {
    INFO("period " << m);
    const int64_t rows = 23;
    const tf::Tensor xr = tf::random::uniform({rows, m}, -2, 2, tf::float32, 50 + m);
    const tf::Tensor yr = tf::random::uniform({m}, -1, 1, tf::float32, 60 + m);
    const std::vector<int64_t> periods =
        tf::jit::detail::fused_input_periods(std::vector<tf::Tensor>{xr, yr, s}, rows * m);
    CHECK(periods == std::vector<int64_t>{0, m, 1});
    HostCudaModule row(tf::jit::cuda_fused_source("tf_fused", 3, periods, steps));
    INFO(row.log());
    REQUIRE(row.ok());
    const tf::Tensor want_r = tf::tanh(xr * s + yr);
    for (const tf::Tensor& xin :
         {xr, tf::detail::view(tf::concat({tf::zeros({1}), tf::reshape(xr, {-1})}, 0),
                               tf::TensorShape{rows, m}, sizeof(float))}) {
      tf::Tensor o = tf::zeros({rows, m});
      tf::jit::detail::launch_fused(row, tf::Device{}, std::vector<tf::Tensor>{xin, yr, s}, o);
      check_close(o, want_r, 1e-6, 1e-7);
    }
    CHECK(row.launched == std::vector<std::string>{"tf_fused_v4", "tf_fused"});
  }
}

TEST_CASE("cuda codegen: the generated kernels compute their graphs (compiled for the host)",
          "[jit]") {
  if (!std::filesystem::exists(TAPEFLOW_TEST_HOST_CXX)) {
    WARN("no host compiler at " << TAPEFLOW_TEST_HOST_CXX);
    return;
  }
  // A sum of one term per op, each applied to x (input 0, in [0.25, 2]), y (input 1, in
  // [0.5, 2]) or the scalar s (input 2): every op and operand kind, no error amplification.
  std::vector<tf::jit::CudaFusedStep> steps;
  auto last = [&] { return 3 + static_cast<int>(steps.size()) - 1; };
  int acc = -1;
  auto accumulate = [&](int term) {
    if (acc < 0) {
      acc = term;
      return;
    }
    steps.push_back({"add", acc, term});
    acc = last();
  };
  for (const auto& op : kUnary) {
    // The inverse functions and tan on arguments inside their domain and away from tan's poles:
    // tanh's (-1, 1) for tan, asin, acos, atanh; cosh's [1, inf) for acosh.
    const bool unit = op == "tan" || op == "asin" || op == "acos" || op == "atanh";
    const char* guard = unit ? "tanh" : (op == "acosh" ? "cosh" : nullptr);
    auto apply = [&](int arg) {
      if (guard) {
        steps.push_back({guard, arg, -1});
        arg = last();
      }
      steps.push_back({op, arg, -1});
    };
    apply(0);
    accumulate(last());
    // Negative arguments too (sign, abs, relu, floor, ... and sigmoid's other branch).
    steps.push_back({"negative", 1, -1});
    if (op == "log" || op == "log1p" || op == "sqrt" || op == "rsqrt")
      steps.push_back({"abs", last(), -1});
    else
      apply(last());
    accumulate(last());
  }
  for (size_t i = 0; i < kBinary.size(); ++i) {
    steps.push_back({kBinary[i], 0, 1});
    accumulate(last());
    steps.push_back({kBinary[i], 1, 2});  // a scalar operand
    accumulate(last());
  }
  // The same graph with tapeflow's eager CPU ops.
  using Unary = tf::Tensor (*)(const tf::Tensor&);
  using Binary = tf::Tensor (*)(const tf::Tensor&, const tf::Tensor&);
  const std::map<std::string, Unary> unary_ops = {
      {"negative", tf::negative}, {"abs", tf::abs},
      {"sign", tf::sign},         {"exp", tf::exp},
      {"log", tf::log},           {"log1p", tf::log1p},
      {"sqrt", tf::sqrt},         {"rsqrt", tf::rsqrt},
      {"square", tf::square},     {"tanh", tf::tanh},
      {"sigmoid", tf::sigmoid},   {"sin", tf::sin},
      {"cos", tf::cos},           {"erf", tf::erf},
      {"erfc", tf::erfc},         {"softsign", tf::nn::softsign},
      {"floor", tf::floor},       {"ceil", tf::ceil},
      {"round", tf::round},       {"relu", tf::nn::relu},
      {"tan", tf::tan},           {"asin", tf::asin},
      {"acos", tf::acos},         {"atan", tf::atan},
      {"sinh", tf::sinh},         {"cosh", tf::cosh},
      {"asinh", tf::asinh},       {"acosh", tf::acosh},
      {"atanh", tf::atanh},       {"expm1", tf::expm1}};
  const std::map<std::string, Binary> binary_ops = {
      {"add", tf::add},        {"subtract", tf::subtract}, {"multiply", tf::multiply},
      {"divide", tf::divide},  {"pow", tf::pow},           {"maximum", tf::maximum},
      {"minimum", tf::minimum}, {"atan2", tf::atan2}};
  auto eager = [&](const tf::Tensor& x, const tf::Tensor& y, const tf::Tensor& s) {
    std::vector<tf::Tensor> v{x, y, s};
    for (const auto& st : steps) {
      const tf::Tensor& a = v[static_cast<size_t>(st.a)];
      v.push_back(st.b < 0 ? unary_ops.at(st.op)(a)
                           : binary_ops.at(st.op)(a, v[static_cast<size_t>(st.b)]));
    }
    return v.back();
  };

  const std::string src = tf::jit::cuda_fused_source("tf_fused", 3, {0, 0, 1}, steps);
  HostModule module(src);
  INFO(module.log());
  REQUIRE(module.ok());
  tf::DeviceScope cpu("/cpu:0");
  // 1003 elements: the float4 kernel's vectors and a tail of 3; a small grid makes every
  // thread loop several times.
  const int64_t n = 1003;
  tf::Tensor x = tf::random::uniform({n}, 0.25, 2.0, tf::float32, 31);
  tf::Tensor y = tf::random::uniform({n}, 0.5, 2.0, tf::float32, 32);
  tf::Tensor s = tf::constant(1.5f);
  const tf::Tensor want = eager(x, y, s);
  for (const char* kernel : {"tf_fused", "tf_fused_v4"}) {
    INFO(kernel);
    std::vector<float> out(static_cast<size_t>(n), std::nanf(""));
    module.run(kernel, x.data<float>(), y.data<float>(), s.data<float>(), out.data(), n, 2);
    check_close(tf::constant(out, {n}), want, 1e-5, 1e-5);
  }
  // NaN propagation of maximum/minimum and relu, sigmoid's tails, exp's subnormal range:
  // special values through the same kernel.
  const std::vector<float> special = {std::nanf(""), -100.0f, -90.0f, -87.5f,
                                      0.0f,          -0.0f,   100.0f, 1e-30f};
  tf::Tensor xs = tf::constant(special, {static_cast<int64_t>(special.size())});
  const std::vector<tf::jit::CudaFusedStep> tails = {{"exp", 0, -1},      // %3
                                                     {"sigmoid", 0, -1},  // %4
                                                     {"maximum", 0, 1},   // %5
                                                     {"minimum", 5, 0},   // %6
                                                     {"relu", 0, -1},     // %7
                                                     {"add", 4, 6},       // %8
                                                     {"add", 8, 7},       // %9
                                                     {"add", 9, 3}};      // %10
  // inputs: 0 = xs, 1 and 2 = the scalar 0.5
  HostModule m2(tf::jit::cuda_fused_source("tf_fused", 3, {0, 1, 1}, tails));
  INFO(m2.log());
  REQUIRE(m2.ok());
  tf::Tensor half = tf::constant(0.5f);
  const tf::Tensor e = tf::exp(xs), sg = tf::sigmoid(xs), mx = tf::maximum(xs, half),
                   mn = tf::minimum(mx, xs), rl = tf::nn::relu(xs);
  const tf::Tensor want2 = tf::add(tf::add(tf::add(sg, mn), rl), e);
  std::vector<float> out(special.size(), 0.0f);
  m2.run("tf_fused", xs.data<float>(), half.data<float>(), half.data<float>(), out.data(),
         static_cast<long long>(special.size()), 1);
  check_close(tf::constant(out, {static_cast<int64_t>(special.size())}), want2, 1e-6, 1e-30);
  // sign, bit for bit with the eager op: +0 for either zero (TF's), NaN for NaN.
  const std::vector<tf::jit::CudaFusedStep> sign_step = {{"sign", 0, -1}};
  HostModule m3(tf::jit::cuda_fused_source("tf_fused", 3, {0, 1, 1}, sign_step));
  INFO(m3.log());
  REQUIRE(m3.ok());
  std::vector<float> signs(special.size(), 1.0f);
  m3.run("tf_fused", xs.data<float>(), half.data<float>(), half.data<float>(), signs.data(),
         static_cast<long long>(special.size()), 1);
  const std::vector<float> eager_signs = tf::sign(xs).numpy<float>();
  for (size_t i = 0; i < special.size(); ++i) {
    INFO("sign(" << special[i] << ")");
    CHECK(std::memcmp(&signs[i], &eager_signs[i], sizeof(float)) == 0);
  }
}

TEST_CASE("cuda codegen: NVRTC compiles every generated op for sm_80 and sm_90", "[jit]") {
  if (!nvrtc_or_warn()) return;
  // One chain that uses every op: each unary op on the running value, each binary op with
  // input 1 (full size) or input 2 (a scalar).
  std::vector<tf::jit::CudaFusedStep> steps;
  int last = 0;
  for (const auto& op : kUnary) {
    steps.push_back({op, last, -1});
    last = 3 + static_cast<int>(steps.size()) - 1;
  }
  for (size_t i = 0; i < kBinary.size(); ++i) {
    steps.push_back({kBinary[i], last, i % 2 ? 1 : 2});
    last = 3 + static_cast<int>(steps.size()) - 1;
  }
  // Input 1 as a row of 3 (lanes that wrap) in the first module, full size in the second.
  std::string src = tf::jit::cuda_fused_source("tf_fused", 3, {0, 3, 1}, steps);
  REQUIRE_NOTHROW(tf::jit::nvrtc_compile(src, "sm_90"));
  src = tf::jit::cuda_fused_source("tf_fused", 3, {0, 0, 1}, steps);
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
      CHECK(image.compare(0, 4,
                          "\x7f"
                          "ELF") == 0);  // a CUBIN is an ELF file
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
  if (tf::testing::jit_compile_forced_off("jit_compile's note on a CPU graph")) return;
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

TEST_CASE("jit_compile: fused GPU chains run generated kernels with eager results [cuda]",
          "[jit][cuda]") {
  if (!gpu_or_warn() || !nvrtc_or_warn()) return;
  tf::DeviceScope gpu("/gpu:0");
  auto chain = [](const tf::Tensor& x, const tf::Tensor& y) {
    tf::Tensor a = tf::exp(x * 0.5f + 1.0f);
    tf::Tensor b = tf::tanh(a - y) * a;
    return tf::nn::relu(tf::maximum(b, y) / (tf::abs(y) + 1.0f)) - tf::sqrt(tf::square(x) + 1.0f) +
           tf::sigmoid(x) * tf::rsqrt(tf::abs(y) + 0.5f);
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
  // With jit_compile false the same function stays unfused on the GPU (unless
  // TAPEFLOW_JIT_COMPILE forces it on, as tools/gpu_check.sh's second pass does).
  auto plain = tf::function(chain, tf::FunctionOptions{.jit_compile = false});
  tf::Tensor x = tf::random::uniform({64}, -2, 2, tf::float32, 1);
  tf::Tensor y = tf::random::uniform({64}, -2, 2, tf::float32, 2);
  if (!tf::jit::env_switch("TAPEFLOW_JIT_COMPILE").value_or(false)) {
    check_close(plain(x, y), chain(x, y), 0, 0);
    const tf::Graph& pg =
        plain.get_concrete_function(tf::TensorSpec({64}), tf::TensorSpec({64})).graph();
    CHECK(pg.to_string().find("nvrtc") == std::string::npos);
  }
  // Left unset (TF's None), jit_compile is tf::detail::default_jit_compile().
  auto by_default = tf::function(chain);
  const bool fused_by_default =
      tf::jit::env_switch("TAPEFLOW_JIT_COMPILE").value_or(tf::detail::default_jit_compile());
  check_close(by_default(x, y), chain(x, y), fused_by_default ? 1e-6 : 0,
              fused_by_default ? 1e-7 : 0);
  const tf::Graph& dg =
      by_default.get_concrete_function(tf::TensorSpec({64}), tf::TensorSpec({64})).graph();
  CHECK((dg.to_string().find("nvrtc") != std::string::npos) == fused_by_default);
  // A bias over channels joins the chain (a row read through a running position).
  auto layer = [](const tf::Tensor& a, const tf::Tensor& b) {
    return tf::nn::relu(tf::nn::bias_add(a, b) * 1.5f);
  };
  auto fl = tf::function(layer, tf::FunctionOptions{.jit_compile = true});
  for (int64_t c : {int64_t{7}, int64_t{64}}) {
    const tf::Tensor a = tf::random::uniform({33, 5, c}, -1, 1, tf::float32, 70 + c);
    const tf::Tensor b = tf::random::uniform({c}, -1, 1, tf::float32, 80 + c);
    check_close(fl(a, b), layer(a, b), 1e-6, 1e-7);
    const tf::Graph& g =
        fl.get_concrete_function(tf::TensorSpec({33, 5, c}), tf::TensorSpec({c})).graph();
    INFO(g.to_string());
    CHECK(g.num_nodes() == 1);
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
    if (call == 1) first = {tf::identity(got[0]), got[0]};  // the first launch's result
  }
  // Results of earlier calls are copies: later replays do not overwrite them.
  check_close(first[1], first[0], 0, 0);
  // Memory a replay writes (intermediates, scratch freed while capturing) stays the graph's:
  // tensors made between replays keep their values.
  std::vector<tf::Tensor> others;
  for (int64_t k = 1; k <= (int64_t{1} << 16); k *= 2)
    others.push_back(tf::fill({k}, tf::Tensor(3.0f)));
  {
    tf::Tensor x = tf::random::uniform({8, 16}, -1, 1, tf::float32, 300);
    tf::Tensor w = tf::random::uniform({16, 12}, -1, 1, tf::float32, 400);
    check_close(f(x, w)[0], body(x, w)[0], 1e-5, 1e-5);
  }
  for (const tf::Tensor& t : others) check_close(t, tf::fill(t.shape(), tf::Tensor(3.0f)), 0, 0);
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

TEST_CASE(
    "jit_compile: graphs with side effects replay node by node, host checks are skipped [cuda]",
    "[jit][cuda]") {
  if (!gpu_or_warn()) return;
  tf::DeviceScope gpu("/gpu:0");
  // tf::print prints at every call: never captured.
  tf::Variable v(tf::ones({4}));
  auto printing = tf::function(
      [&](const tf::Tensor& x) {
        tf::print("x:", x);
        return x * v + 1.0f;
      },
      tf::FunctionOptions{.jit_compile = true});
  tf::Tensor x = tf::ones({4});
  check_close(printing(x), tf::ones({4}) * 2.0f, 0, 0);
  const tf::Graph& g = printing.get_concrete_function(tf::TensorSpec({4})).graph();
  CHECK(g.cuda_graph() == nullptr);
  CHECK(g.cuda_graph_note().find("side effects") != std::string::npos);
  // A variable is read where it lies at every call; assigned between calls (its buffer
  // replaced), the graph is captured again (tests/jit/test_cuda_graph_variables.cpp).
  auto with_variable = tf::function([&](const tf::Tensor& y) { return y * v + 1.0f; },
                                    tf::FunctionOptions{.jit_compile = true});
  for (int call = 0; call < 3; ++call) check_close(with_variable(x), tf::ones({4}) * 2.0f, 0, 0);
  v.assign(tf::ones({4}) * 3.0f);
  for (int call = 0; call < 3; ++call) check_close(with_variable(x), tf::ones({4}) * 4.0f, 0, 0);
  const tf::jit::CudaGraphStats sv =
      graph_stats(with_variable.get_concrete_function(tf::TensorSpec({4})).graph());
  CHECK(sv.captured);
  CHECK(sv.captures == 2);

  // Integer pow checks its exponents on the host node by node; a capture cannot read the device,
  // so the captured graph skips the check (a negative exponent gives 1, as TF's GPU kernel).
  auto ipow = tf::function(
      [](const tf::Tensor& b, const tf::Tensor& e) { return tf::pow(b, e) + tf::pow(e, b); },
      tf::FunctionOptions{.jit_compile = true});
  tf::Tensor b = tf::constant(std::vector<int32_t>{1, 2, 3}, {3});
  tf::Tensor e = tf::constant(std::vector<int32_t>{2, 3, 1}, {3});
  for (int call = 0; call < 3; ++call)
    tf::testing::check_values(ipow(b, e), {1 + 2, 8 + 9, 3 + 1}, 0, 0);
  tf::Tensor negative = tf::constant(std::vector<int32_t>{2, -1, 1}, {3});
  // 1^2 + 2^1, 2^-1 (1) + (-1)^2, 3^1 + 1^3
  tf::testing::check_values(ipow(b, negative), {1 + 2, 1 + 1, 3 + 1}, 0, 0);
  TF_REQUIRE_THROWS_CONTAINING(tf::pow(b, negative), tf::InvalidArgumentError,
                               "negative integer powers");
  const tf::Graph& gp =
      ipow.get_concrete_function(tf::TensorSpec({3}, tf::int32), tf::TensorSpec({3}, tf::int32))
          .graph();
  const tf::jit::CudaGraphStats st = graph_stats(gp);
  INFO(st.failure);
  CHECK(st.captured);
  CHECK_FALSE(st.failed);
  CHECK(st.launches == 3);  // calls 2 to 4; the first ran node by node
}

TEST_CASE("jit_compile: inverse, solve and determinant capture [cuda]", "[jit][cuda]") {
  if (!gpu_or_warn()) return;
  tf::DeviceScope gpu("/gpu:0");
  // cuSOLVER's capture handle is made before capturing; the singularity checks (a host read of
  // the pivots' infos) are skipped inside the captured graph.
  auto body = [](const tf::Tensor& a, const tf::Tensor& b) {
    return std::vector<tf::Tensor>{tf::matmul(tf::linalg::inv(a), b), tf::linalg::solve(a, b),
                                   tf::linalg::det(a)};
  };
  auto f = tf::function(body, tf::FunctionOptions{.jit_compile = true});
  for (int call = 0; call < 3; ++call) {
    INFO("call " << call);
    const tf::Tensor a = tf::random::uniform({6, 6}, -1, 1, tf::float32, 40 + call) +
                         tf::eye(6) * 4.0f;  // well conditioned
    const tf::Tensor b = tf::random::uniform({6, 2}, -1, 1, tf::float32, 50 + call);
    const std::vector<tf::Tensor> got = f(a, b);
    const std::vector<tf::Tensor> want = body(a, b);
    REQUIRE(got.size() == 3);
    for (size_t k = 0; k < 3; ++k) check_close(got[k], want[k], 1e-4, 1e-5);
  }
  const tf::jit::CudaGraphStats st =
      graph_stats(f.get_concrete_function(tf::TensorSpec({6, 6}), tf::TensorSpec({6, 2})).graph());
  INFO(st.failure);
  CHECK(st.captured);
  CHECK(st.launches == 2);
  // A singular matrix: node by node inv raises; the captured graph gives non-finite values.
  const tf::Tensor singular = tf::zeros({6, 6});
  const tf::Tensor b = tf::ones({6, 2});
  TF_REQUIRE_THROWS_CONTAINING(tf::linalg::inv(singular), tf::InvalidArgumentError,
                               "not invertible");
  const std::vector<tf::Tensor> got = f(singular, b);
  CHECK(tf::detail::to_double_vector(got[2])[0] == 0.0);
  bool finite = true;
  for (double v : tf::detail::to_double_vector(got[0])) finite = finite && std::isfinite(v);
  CHECK_FALSE(finite);
}
