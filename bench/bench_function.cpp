// tf::function replay against eager execution, side by side in one run:
//   - a chain of 100 tiny ops ((2, 2) float32 adds and multiplies);
//   - a chain of 6 elementwise ops over 16M float32;
//   - a bias over channels and relu on (32, 28, 28, 32) float32, fused and unfused;
//   - the 784-128-10 MLP training step (batch 32 and 256) traced, eager, and libtorch's eager
//     C++ step (see bench_autograd.cpp for the step itself);
//   - a deep MLP (8 layers of 512, batch 128) forward and backward, traced and eager.
// Traced cases run with the memory plan as configured (TAPEFLOW_MEMORY_PLAN, default on) and,
// as *_unplanned, traced with TAPEFLOW_MEMORY_PLAN=0; counters: peak_KiB (the CPU allocator's
// peak bytes in use during one call, above what was in use before it, plus the arena a planned
// graph keeps between calls), footprint_KiB (what the allocator takes from the system for one
// call after its cache was emptied: bytes in use plus cached, plus a planned graph's arena),
// arena_KiB, live_KiB (the most planned bytes live at one node) and
// unplanned_KiB (the plan's arena and the sum of the buffers it holds), maxrss_MiB (the
// process's peak resident set: run one benchmark per process with --benchmark_filter to read it).
//
//   OMP_NUM_THREADS=2 ./bench_function --benchmark_repetitions=5 \
//       --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "autograd/tape.h"
#include "core/parallel.h"
#include "jit/function.h"
#include "jit/memory_plan.h"
#include "mlp_step.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/linalg.h"
#include "ops/nn.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/unary.h"

#ifdef TAPEFLOW_HAVE_TORCH
#include <torch/torch.h>
#endif

namespace tf = tapeflow;

namespace {

// Sets an environment variable while it lives (when active): graphs read TAPEFLOW_MEMORY_PLAN
// and TAPEFLOW_FUSION when they are traced and optimised.
class EnvScope {
 public:
  EnvScope(const char* name, const char* value, bool active = true) : name_(name) {
    if (!active) return;
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value, 1);
    active_ = true;
  }
  ~EnvScope() {
    if (!active_) return;
    if (old_) ::setenv(name_, old_->c_str(), 1);
    else ::unsetenv(name_);
  }
  EnvScope(const EnvScope&) = delete;
  EnvScope& operator=(const EnvScope&) = delete;

 private:
  const char* name_;
  bool active_ = false;
  std::optional<std::string> old_;
};

// Traces under TAPEFLOW_MEMORY_PLAN=0 while it lives (when active).
struct UnplannedScope : EnvScope {
  explicit UnplannedScope(bool active) : EnvScope("TAPEFLOW_MEMORY_PLAN", "0", active) {}
};

// Peak CPU allocator bytes above the current use during one call of `call`.
template <class Call>
double peak_kib(Call&& call) {
  tf::Allocator& a = tf::cpu_allocator();
  a.reset_peak();
  const int64_t before = a.stats().bytes_in_use;
  call();
  return static_cast<double>(a.stats().peak_bytes_in_use - before) / 1024.0;
}

// Bytes the CPU allocator holds (in use or cached) after one call of `call` beyond what it held
// before, starting from an empty cache: the memory one call takes from the system.
template <class Call>
double footprint_kib(Call&& call) {
  tf::Allocator& a = tf::cpu_allocator();
  a.release_cached_memory();
  const auto s0 = a.stats();
  call();
  const auto s1 = a.stats();
  return static_cast<double>((s1.bytes_in_use + s1.bytes_cached) -
                             (s0.bytes_in_use + s0.bytes_cached)) /
         1024.0;
}

void memory_counters(benchmark::State& state, const tf::Graph* graph) {
  if (graph != nullptr && graph->memory_plan() != nullptr) {
    const auto& s = graph->memory_plan()->stats();
    state.counters["arena_KiB"] = static_cast<double>(s.arena_bytes) / 1024.0;
    state.counters["unplanned_KiB"] = static_cast<double>(s.planned_bytes) / 1024.0;
    state.counters["live_KiB"] = static_cast<double>(s.live_peak_bytes) / 1024.0;
    // The arena stays allocated between calls, so peak_kib() and footprint_kib() did not see it.
    if (graph->memory_plan()->enabled()) {
      state.counters["peak_KiB"] += static_cast<double>(s.arena_bytes) / 1024.0;
      state.counters["footprint_KiB"] += static_cast<double>(s.arena_bytes) / 1024.0;
    }
  }
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  state.counters["maxrss_MiB"] = static_cast<double>(ru.ru_maxrss) / 1024.0;
}

tf::Tensor chain100(const tf::Tensor& x, const tf::Tensor& y) {
  tf::Tensor c = x;
  for (int i = 0; i < 50; ++i) c = tf::multiply(tf::add(c, y), y);
  return c;
}

void BM_chain100_eager(benchmark::State& state) {
  tf::Tensor x = tf::ones({2, 2}), y = tf::fill({2, 2}, tf::Tensor(0.5f));
  for (auto _ : state) benchmark::DoNotOptimize(chain100(x, y).raw_data());
  state.SetItemsProcessed(state.iterations() * 100);
}
BENCHMARK(BM_chain100_eager);

void chain100_function(benchmark::State& state, bool planned) {
  tf::Tensor x = tf::ones({2, 2}), y = tf::fill({2, 2}, tf::Tensor(0.5f));
  auto f = tf::function(chain100);
  {
    UnplannedScope scope(!planned);
    f(x, y);
  }
  for (auto _ : state) benchmark::DoNotOptimize(f(x, y).raw_data());
  state.SetItemsProcessed(state.iterations() * 100);
  state.counters["peak_KiB"] = peak_kib([&] { f(x, y); });
  state.counters["footprint_KiB"] = footprint_kib([&] { f(x, y); });
  memory_counters(state, &f.get_concrete_function(tf::TensorSpec({2, 2}),
                                                  tf::TensorSpec({2, 2})).graph());
}
void BM_chain100_function(benchmark::State& state) { chain100_function(state, true); }
void BM_chain100_function_unplanned(benchmark::State& state) { chain100_function(state, false); }
BENCHMARK(BM_chain100_function);
BENCHMARK(BM_chain100_function_unplanned);

// Tracing and optimising a long chain in which every op adds a new C++ scalar (a captured
// constant each): the time of a first call, per op. Fusing it was quadratic in the number of
// constants (50000 ops: 1.7 s, 200000: 15 s; now 0.33 and 1.4).
void BM_trace_chain_scalars(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const tf::Tensor x = tf::ones({4});
  for (auto _ : state) {
    auto f = tf::function([n](const tf::Tensor& v) {
      tf::Tensor y = v;
      for (int i = 0; i < n; ++i) y = y + 1.0f;
      return y;
    });
    benchmark::DoNotOptimize(f(x).raw_data());
  }
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_trace_chain_scalars)->Arg(5000)->Arg(50000)->Unit(benchmark::kMillisecond);

tf::Tensor chain6(const tf::Tensor& x) {
  return tf::tanh(tf::exp(x * 0.5f + 1.0f) - x) * 2.0f;
}

void BM_chain6_16M_eager(benchmark::State& state) {
  tf::Tensor x = tf::random::uniform({1 << 24}, -1, 1, tf::float32, 1);
  chain6(x);  // warm, as the traced cases' first call (a run starts after footprint_kib's release)
  for (auto _ : state) benchmark::DoNotOptimize(chain6(x).raw_data());
  state.SetBytesProcessed(state.iterations() * 2 * x.nbytes());
  state.counters["peak_KiB"] = peak_kib([&] { chain6(x); });
  state.counters["footprint_KiB"] = footprint_kib([&] { chain6(x); });
  memory_counters(state, nullptr);
}
BENCHMARK(BM_chain6_16M_eager)->Unit(benchmark::kMillisecond);

void chain6_function(benchmark::State& state, bool planned) {
  tf::Tensor x = tf::random::uniform({1 << 24}, -1, 1, tf::float32, 1);
  auto f = tf::function(chain6);
  {
    UnplannedScope scope(!planned);
    f(x);
  }
  for (auto _ : state) benchmark::DoNotOptimize(f(x).raw_data());
  state.SetBytesProcessed(state.iterations() * 2 * x.nbytes());
  state.counters["peak_KiB"] = peak_kib([&] { f(x); });
  state.counters["footprint_KiB"] = footprint_kib([&] { f(x); });
  memory_counters(state, &f.get_concrete_function(tf::TensorSpec({1 << 24})).graph());
}
void BM_chain6_16M_function(benchmark::State& state) { chain6_function(state, true); }
void BM_chain6_16M_function_unplanned(benchmark::State& state) { chain6_function(state, false); }
BENCHMARK(BM_chain6_16M_function)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_chain6_16M_function_unplanned)->Unit(benchmark::kMillisecond);

// A convolution layer's bias and activation: relu(x + b) over (32, 28, 28, 32) float32 with a
// (32) bias. Traced, the add reads b as a repeated row and fuses with the relu (one pass);
// *_unfused traces with TAPEFLOW_FUSION=0 (two nodes), eager runs bias_add's broadcast kernel
// and relu.
tf::Tensor bias_relu(const tf::Tensor& x, const tf::Tensor& b) {
  return tf::nn::relu(tf::nn::bias_add(x, b));
}
void bias_relu_case(benchmark::State& state, int mode) {
  const tf::Tensor x = tf::random::uniform({32, 28, 28, 32}, -1, 1, tf::float32, 1);
  const tf::Tensor b = tf::random::uniform({32}, -1, 1, tf::float32, 2);
  std::optional<tf::Function<decltype(&bias_relu)>> f;
  if (mode > 0) {
    const EnvScope unfused("TAPEFLOW_FUSION", "0", mode == 2);
    f.emplace(tf::function(&bias_relu));
    (*f)(x, b);  // traced and optimised now
  }
  for (auto _ : state)
    benchmark::DoNotOptimize((mode == 0 ? bias_relu(x, b) : (*f)(x, b)).raw_data());
  state.SetBytesProcessed(state.iterations() * 2 * static_cast<int64_t>(x.nbytes()));
}
void BM_bias_relu_eager(benchmark::State& state) { bias_relu_case(state, 0); }
void BM_bias_relu_function(benchmark::State& state) { bias_relu_case(state, 1); }
void BM_bias_relu_function_unfused(benchmark::State& state) { bias_relu_case(state, 2); }
BENCHMARK(BM_bias_relu_eager)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_bias_relu_function)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_bias_relu_function_unfused)->Unit(benchmark::kMicrosecond);

using bench_mlp::Mlp;

void BM_mlp_step_eager(benchmark::State& state) {
  Mlp m(state.range(0), "/CPU:0");
  m.step(m.x, m.labels);  // warm, as the traced cases' first call
  float loss = 0;
  for (auto _ : state) loss = m.step(m.x, m.labels).item<float>();
  state.counters["loss"] = loss;
  state.counters["peak_KiB"] = peak_kib([&] { m.step(m.x, m.labels); });
  state.counters["footprint_KiB"] = footprint_kib([&] { m.step(m.x, m.labels); });
  memory_counters(state, nullptr);
}
BENCHMARK(BM_mlp_step_eager)->Arg(32)->Arg(256)->Unit(benchmark::kMicrosecond);

void mlp_step_function(benchmark::State& state, bool planned) {
  Mlp m(state.range(0), "/CPU:0");
  auto step = tf::function(
      [&m](const tf::Tensor& xb, const tf::Tensor& yb) { return m.step(xb, yb); });
  {
    UnplannedScope scope(!planned);
    step(m.x, m.labels);
  }
  float loss = 0;
  for (auto _ : state) loss = step(m.x, m.labels).item<float>();
  state.counters["loss"] = loss;
  state.counters["peak_KiB"] = peak_kib([&] { step(m.x, m.labels); });
  state.counters["footprint_KiB"] = footprint_kib([&] { step(m.x, m.labels); });
  memory_counters(state, &step.get_concrete_function(tf::TensorSpec(m.x.shape()),
                                                     tf::TensorSpec(m.labels.shape(), tf::int64))
                              .graph());
}
void BM_mlp_step_function(benchmark::State& state) { mlp_step_function(state, true); }
void BM_mlp_step_function_unplanned(benchmark::State& state) { mlp_step_function(state, false); }
BENCHMARK(BM_mlp_step_function)->Arg(32)->Arg(256)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_mlp_step_function_unplanned)->Arg(32)->Arg(256)->Unit(benchmark::kMicrosecond);

// A deep MLP: 784 -> 8 x 512 (tanh) -> 10, forward and backward (loss and gradients, no
// update), batch 128: many large intermediates with short lifetimes.
struct DeepMlp {
  std::vector<tf::Variable> vars;
  tf::Tensor x, labels;
  DeepMlp() {
    tf::DeviceScope scope("/CPU:0");
    int64_t in = 784;
    for (int l = 0; l < 9; ++l) {
      const int64_t out = l == 8 ? 10 : 512;
      vars.emplace_back(tf::random::normal({in, out}, 0.0, 0.04, tf::float32, 10 + l), "w");
      vars.emplace_back(tf::zeros({out}), "b");
      in = out;
    }
    x = tf::random::uniform({128, 784}, 0.0, 1.0, tf::float32, 3);
    labels = tf::random::uniform({128}, 0, 10, tf::int64, 4);
  }
  std::vector<tf::Tensor> step(const tf::Tensor& xb, const tf::Tensor& yb) {
    tf::GradientTape tape;
    tf::Tensor h = xb;
    for (size_t l = 0; l + 2 < vars.size(); l += 2)
      h = tf::tanh(tf::nn::bias_add(tf::matmul(h, vars[l]), vars[l + 1]));
    tf::Tensor logits = tf::nn::bias_add(tf::matmul(h, vars[vars.size() - 2]), vars.back());
    tf::Tensor loss =
        tf::reduce_mean(tf::nn::sparse_softmax_cross_entropy_with_logits(yb, logits));
    std::vector<tf::Tensor> out = tape.gradient(loss, vars);
    out.insert(out.begin(), loss);
    return out;
  }
};

void BM_deep_mlp_eager(benchmark::State& state) {
  DeepMlp m;
  m.step(m.x, m.labels);  // warm, as the traced cases' first call
  for (auto _ : state) benchmark::DoNotOptimize(m.step(m.x, m.labels)[0].raw_data());
  state.counters["peak_KiB"] = peak_kib([&] { m.step(m.x, m.labels); });
  state.counters["footprint_KiB"] = footprint_kib([&] { m.step(m.x, m.labels); });
  memory_counters(state, nullptr);
}
BENCHMARK(BM_deep_mlp_eager)->Unit(benchmark::kMicrosecond);

void deep_mlp_function(benchmark::State& state, bool planned) {
  DeepMlp m;
  auto step = tf::function(
      [&m](const tf::Tensor& xb, const tf::Tensor& yb) { return m.step(xb, yb); });
  {
    UnplannedScope scope(!planned);
    step(m.x, m.labels);
  }
  for (auto _ : state) benchmark::DoNotOptimize(step(m.x, m.labels)[0].raw_data());
  state.counters["peak_KiB"] = peak_kib([&] { step(m.x, m.labels); });
  state.counters["footprint_KiB"] = footprint_kib([&] { step(m.x, m.labels); });
  memory_counters(state, &step.get_concrete_function(tf::TensorSpec(m.x.shape()),
                                                     tf::TensorSpec(m.labels.shape(), tf::int64))
                              .graph());
}
void BM_deep_mlp_function(benchmark::State& state) { deep_mlp_function(state, true); }
void BM_deep_mlp_function_unplanned(benchmark::State& state) { deep_mlp_function(state, false); }
BENCHMARK(BM_deep_mlp_function)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_deep_mlp_function_unplanned)->Unit(benchmark::kMicrosecond);

#ifdef TAPEFLOW_HAVE_TORCH
void BM_torch_chain100(benchmark::State& state) {
  torch::set_num_threads(tf::detail::num_threads());
  auto x = torch::ones({2, 2}), y = torch::full({2, 2}, 0.5f);
  for (auto _ : state) {
    auto c = x;
    for (int i = 0; i < 50; ++i) c = (c + y) * y;
    benchmark::DoNotOptimize(c.data_ptr());
  }
  state.SetItemsProcessed(state.iterations() * 100);
}
BENCHMARK(BM_torch_chain100);

void BM_torch_mlp_step(benchmark::State& state) {
  torch::set_num_threads(tf::detail::num_threads());
  torch::manual_seed(0);
  std::vector<torch::Tensor> p = {torch::randn({784, 128}) * 0.05, torch::zeros({128}),
                                  torch::randn({128, 10}) * 0.05, torch::zeros({10})};
  for (auto& t : p) t.set_requires_grad(true);
  auto x = torch::rand({state.range(0), 784});
  auto labels = torch::randint(0, 10, {state.range(0)}, torch::kLong);
  float loss_v = 0;
  for (auto _ : state) {
    auto h = torch::relu(torch::addmm(p[1], x, p[0]));
    auto loss = torch::nn::functional::cross_entropy(torch::addmm(p[3], h, p[2]), labels);
    loss.backward();
    {
      torch::NoGradGuard g;
      for (auto& t : p) {
        t.sub_(t.grad() * 0.01f);
        t.grad().zero_();
      }
    }
    loss_v = loss.item<float>();
  }
  state.counters["loss"] = loss_v;
}
BENCHMARK(BM_torch_mlp_step)->Arg(32)->Arg(256)->Unit(benchmark::kMicrosecond);
#endif

}  // namespace

BENCHMARK_MAIN();
