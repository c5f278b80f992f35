// GPU benchmarks of the CUDA backend against the device's own ceilings, measured in one run:
//   - device-to-device copy bandwidth (cudaMemcpyAsync), the ceiling of memory-bound ops;
//   - tf::add and tf::reduce_sum over 2^28 float32 (GB/s counts bytes read + written once);
//   - SGEMM N=64, 256 (where the host's launch gap shows in device time) and 8192: tf::matmul
//     against cublasSgemm called directly on the same stream, plus
//     TF32 (tf::config::experimental::enable_tensor_float_32_execution; against cublasSgemm in
//     TF32 math and the fastest of cublasLt's top 16 algorithms) and bfloat16;
//   - float32 inverse at N=16384 (cuSOLVER getrf + getrs);
//   - host-side eager launch overhead of a tiny op (1-element add, queued without waiting), and
//     the host cost of a 64 x 64 product taken apart (BM_HostCost);
//   - a grouped 3x3 convolution (1, 4 and 32 groups of [32, 56, 56, 128]) forward and with its
//     two gradients (device time);
//   - tf::function on the GPU (issue 5): a chain of 6 elementwise ops over 16M float32 eager,
//     traced, and traced with jit_compile (one NVRTC kernel; device time), and a chain of 100
//     tiny ops eager, traced, and with jit_compile (one fused kernel, replayed as a CUDA graph;
//     wall time of a call and its wait);
//   - host<->device copies of 256 MiB from and to pageable memory (wall time, staged through
//     tapeflow's pinned buffers), against cudaMemcpy from and to pinned memory.
//
//   ./bench_cuda --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//
// Device times use CUDA events on the stream tapeflow queues its work on (manual time), so the
// medians are kernel time, not host time; the launch-overhead benchmark is host wall time.
#include <benchmark/benchmark.h>
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "autograd/tape.h"
#include "bench/mlp_step.h"
#include "core/cuda/context.h"
#include "core/device.h"
#include "core/host_to_device.h"
#include "core/tensor.h"
#include "jit/cuda_graph.h"
#include "jit/function.h"
#include "keras/model.h"
#include "ops/binary.h"
#include "ops/cuda/handles.h"
#include "ops/factory.h"
#include "ops/linalg.h"
#include "ops/movement.h"
#include "ops/nn.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/unary.h"

namespace tf = tapeflow;
namespace K = tapeflow::keras;

namespace {

const tf::Device kGpu{tf::DeviceType::GPU, 0};

#define BENCH_CUDA(CALL)                                                             \
  do {                                                                               \
    cudaError_t e_ = (CALL);                                                         \
    if (e_ != cudaSuccess) {                                                         \
      std::fprintf(stderr, "%s failed: %s\n", #CALL, cudaGetErrorString(e_));        \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)

// Times `body` on tapeflow's stream with events; one benchmark iteration = one call.
template <class F>
void time_on_stream(benchmark::State& state, F&& body) {
  cudaStream_t s = tf::detail::cuda::stream(kGpu);
  cudaEvent_t start, stop;
  BENCH_CUDA(cudaEventCreate(&start));
  BENCH_CUDA(cudaEventCreate(&stop));
  body();  // warm-up: allocations, handles, algorithm choice
  BENCH_CUDA(cudaStreamSynchronize(s));
  for (auto _ : state) {
    BENCH_CUDA(cudaEventRecord(start, s));
    body();
    BENCH_CUDA(cudaEventRecord(stop, s));
    BENCH_CUDA(cudaEventSynchronize(stop));
    float ms = 0;
    BENCH_CUDA(cudaEventElapsedTime(&ms, start, stop));
    state.SetIterationTime(ms / 1e3);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
}

bool have_gpu(benchmark::State& state) {
  if (tf::detail::num_logical_devices(tf::DeviceType::GPU) > 0) return true;
  state.SkipWithError("no GPU on this machine");
  return false;
}

constexpr int64_t kElems = int64_t{1} << 28;

tf::Tensor gpu_uniform(const tf::TensorShape& shape, tf::DType dtype = tf::float32,
                       int64_t seed = 1) {
  tf::DeviceScope scope(kGpu);
  return tf::random::uniform(shape, -1.0, 1.0, dtype, seed);
}

void BM_CopyD2D(benchmark::State& state) {
  if (!have_gpu(state)) return;
  tf::Tensor a = gpu_uniform({kElems});
  tf::Tensor b = tf::detail::empty(a.shape(), a.dtype(), kGpu);
  cudaStream_t s = tf::detail::cuda::stream(kGpu);
  time_on_stream(state, [&] {
    BENCH_CUDA(cudaMemcpyAsync(b.raw_data(), a.raw_data(), a.nbytes(), cudaMemcpyDeviceToDevice, s));
  });
  state.SetBytesProcessed(state.iterations() * 2 * a.nbytes());
}

void BM_Add(benchmark::State& state) {
  if (!have_gpu(state)) return;
  tf::Tensor a = gpu_uniform({kElems}, tf::float32, 1), b = gpu_uniform({kElems}, tf::float32, 2);
  tf::Tensor c;
  time_on_stream(state, [&] { c = tf::add(a, b); });
  state.SetBytesProcessed(state.iterations() * 3 * a.nbytes());
}

void BM_ReduceSum(benchmark::State& state) {
  if (!have_gpu(state)) return;
  tf::Tensor a = gpu_uniform({kElems});
  tf::Tensor c;
  time_on_stream(state, [&] { c = tf::reduce_sum(a); });
  state.SetBytesProcessed(state.iterations() * a.nbytes());
}

void set_flops(benchmark::State& state, double flops_per_iter) {
  state.counters["TFLOP/s"] = benchmark::Counter(flops_per_iter * 1e-12 * state.iterations(),
                                                 benchmark::Counter::kIsRate);
}

void BM_Matmul(benchmark::State& state, tf::DType dtype, bool tf32) {
  if (!have_gpu(state)) return;
  const int64_t n = state.range(0);
  tf::Tensor a = gpu_uniform({n, n}, dtype, 3), b = gpu_uniform({n, n}, dtype, 4);
  tf::config::experimental::enable_tensor_float_32_execution(tf32);
  tf::Tensor c;
  time_on_stream(state, [&] { c = tf::matmul(a, b); });
  tf::config::experimental::enable_tensor_float_32_execution(false);
  set_flops(state, 2.0 * n * n * n);
}

// cuBLAS called directly on the same buffers and stream: the reference for tf::matmul (float32
// math, or TF32 tensor-op math).
void BM_CublasSgemm(benchmark::State& state, bool tf32) {
  if (!have_gpu(state)) return;
  const int n = static_cast<int>(state.range(0));
  tf::Tensor a = gpu_uniform({n, n}, tf::float32, 3), b = gpu_uniform({n, n}, tf::float32, 4);
  tf::Tensor c = tf::detail::empty(tf::TensorShape{n, n}, tf::float32, kGpu);
  cublasHandle_t h;
  cublasCreate(&h);
  cublasSetStream(h, tf::detail::cuda::stream(kGpu));
  cublasSetMathMode(h, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH);
  const float one = 1, zero = 0;
  time_on_stream(state, [&] {
    // Row-major C = A B as column-major C^T = B^T A^T.
    cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, static_cast<const float*>(b.raw_data()),
                n, static_cast<const float*>(a.raw_data()), n, &zero,
                static_cast<float*>(c.raw_data()), n);
  });
  cublasDestroy(h);
  set_flops(state, 2.0 * n * n * n);
}

// The TF32 references: cublasSgemm in TF32 math (BM_CublasSgemm/tf32 above), and cublasLt with
// every algorithm of its heuristic's top 16 (64 MiB workspace) timed and the fastest kept: how
// far tf::matmul's TF32 (cublasGemmEx, CUBLAS_COMPUTE_32F_FAST_TF32) is from the best.
void BM_CublasLtTf32Best(benchmark::State& state) {
  if (!have_gpu(state)) return;
  const uint64_t n = static_cast<uint64_t>(state.range(0));
  const int64_t ni = state.range(0);
  tf::Tensor a = gpu_uniform({ni, ni}, tf::float32, 3), b = gpu_uniform({ni, ni}, tf::float32, 4);
  tf::Tensor c = tf::detail::empty(tf::TensorShape{ni, ni}, tf::float32, kGpu);
  cudaStream_t s = tf::detail::cuda::stream(kGpu);
  cublasLtHandle_t lt;
  cublasLtCreate(&lt);
  cublasLtMatmulDesc_t op;
  cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F_FAST_TF32, CUDA_R_32F);
  cublasLtMatrixLayout_t layout;
  cublasLtMatrixLayoutCreate(&layout, CUDA_R_32F, n, n, static_cast<int64_t>(n));
  cublasLtMatmulPreference_t pref;
  cublasLtMatmulPreferenceCreate(&pref);
  size_t ws_bytes = size_t{64} << 20;
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes,
                                       sizeof(ws_bytes));
  void* ws = nullptr;
  BENCH_CUDA(cudaMalloc(&ws, ws_bytes));
  cublasLtMatmulHeuristicResult_t results[16] = {};
  int found = 0;
  cublasLtMatmulAlgoGetHeuristic(lt, op, layout, layout, layout, layout, pref, 16, results,
                                 &found);
  const float one = 1, zero = 0;
  auto run = [&](const cublasLtMatmulAlgo_t* algo) {
    cublasLtMatmul(lt, op, &one, b.raw_data(), layout, a.raw_data(), layout, &zero, c.raw_data(),
                   layout, c.raw_data(), layout, algo, ws, ws_bytes, s);
  };
  cudaEvent_t e0, e1;
  BENCH_CUDA(cudaEventCreate(&e0));
  BENCH_CUDA(cudaEventCreate(&e1));
  int best = -1;
  float best_ms = 1e30f;
  for (int i = 0; i < found; ++i) {
    if (results[i].state != CUBLAS_STATUS_SUCCESS) continue;
    run(&results[i].algo);  // warm-up
    BENCH_CUDA(cudaEventRecord(e0, s));
    for (int r = 0; r < 3; ++r) run(&results[i].algo);
    BENCH_CUDA(cudaEventRecord(e1, s));
    BENCH_CUDA(cudaEventSynchronize(e1));
    float ms = 0;
    BENCH_CUDA(cudaEventElapsedTime(&ms, e0, e1));
    if (ms < best_ms) {
      best_ms = ms;
      best = i;
    }
  }
  if (best < 0) {
    state.SkipWithError("cublasLt found no TF32 algorithm");
  } else {
    time_on_stream(state, [&] { run(&results[best].algo); });
    set_flops(state, 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n));
    state.counters["algos"] = found;
    state.counters["best"] = best;
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaFree(ws);
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(layout);
  cublasLtMatmulDescDestroy(op);
  cublasLtDestroy(lt);
}

void BM_Inverse(benchmark::State& state) {
  if (!have_gpu(state)) return;
  const int64_t n = state.range(0);
  // Diagonally dominant: well conditioned.
  tf::Tensor a;
  {
    tf::DeviceScope scope(kGpu);
    a = tf::add(gpu_uniform({n, n}), tf::multiply(tf::eye(n), static_cast<float>(n)));
  }
  tf::Tensor c;
  time_on_stream(state, [&] { c = tf::linalg::inv(a); });
}

// Host cost of queueing one tiny op: no synchronisation inside the loop.
void BM_TinyOpLaunch(benchmark::State& state) {
  if (!have_gpu(state)) return;
  tf::DeviceScope scope(kGpu);
  tf::Tensor a = tf::constant(1.0f), b = tf::constant(2.0f);
  tf::Tensor c = tf::add(a, b);
  tf::detail::cuda::synchronize(kGpu);
  for (auto _ : state) {
    c = tf::add(a, b);
    benchmark::DoNotOptimize(c);
  }
  tf::detail::cuda::synchronize(kGpu);
}

// A grouped 3x3 convolution, [32, 56, 56, 128] float32, 128 -> 128 in G groups (one cuDNN call
// with a group count): mode 0 forward, 1 forward and the input and filter gradients.
void BM_GroupedConv2D(benchmark::State& state) {
  if (!have_gpu(state)) return;
  const int64_t groups = state.range(0);
  const bool step = state.range(1) == 1;
  tf::DeviceScope scope(kGpu);
  const tf::Tensor x = gpu_uniform({32, 56, 56, 128}, tf::float32, 5);
  const tf::Tensor f = gpu_uniform({3, 3, 128 / groups, 128}, tf::float32, 6);
  std::vector<tf::Tensor> g;
  tf::Tensor y;
  time_on_stream(state, [&] {
    if (!step) {
      y = tf::nn::conv2d(x, f, {1}, "SAME");
      return;
    }
    tf::GradientTape tape;
    tape.watch(x);
    tape.watch(f);
    y = tf::nn::conv2d(x, f, {1}, "SAME");
    g = tape.gradient(y, std::vector<tf::Tensor>{x, f});
  });
  set_flops(state, (step ? 3 : 1) * 2.0 * 32 * 56 * 56 * 128 * (128 / groups) * 9);
}

// Host cost of queueing one call, attributed (issue 8: tf::matmul at N = 64-256 took 1-4 us
// more device time than cublasSgemm, which an idle GPU waiting for the host counts). Host wall
// time per call; the stream is drained every kDrainEvery calls outside the timing, so that a
// full launch queue never turns host time into device time. Modes:
//   0 cudaMemsetAsync of 4 bytes (the least a stream operation costs)
//   1 cublasSgemm 64 x 64 on a handle of its own (compare.py's reference)
//   2 cublasGemmEx 64 x 64, CUBLAS_COMPUTE_32F, on that handle (tf::matmul's call)
//   3 cublasGemmEx 64 x 64 on tapeflow's handle (handle look-up included)
//   4 tf::matmul 64 x 64 (eager dispatch, output allocation, the call)
//   5 tf::add of two 1-element tensors (BM_TinyOpLaunch's op)
//   6 an output's allocation and release, no kernel (tf::detail::empty of 64 x 64 float32)
void BM_HostCost(benchmark::State& state) {
  if (!have_gpu(state)) return;
  constexpr int64_t kDrainEvery = 64;
  constexpr int n = 64;
  const int mode = static_cast<int>(state.range(0));
  tf::DeviceScope scope(kGpu);
  cudaStream_t s = tf::detail::cuda::stream(kGpu);
  tf::Tensor a = gpu_uniform({n, n}, tf::float32, 3), b = gpu_uniform({n, n}, tf::float32, 4);
  tf::Tensor c = tf::detail::empty(tf::TensorShape{n, n}, tf::float32, kGpu);
  tf::Tensor x = tf::constant(1.0f), y = tf::constant(2.0f);
  cublasHandle_t own;
  if (cublasCreate(&own) != CUBLAS_STATUS_SUCCESS) {
    state.SkipWithError("cublasCreate failed");
    return;
  }
  cublasSetStream(own, s);
  const float one = 1, zero = 0;
  auto gemm_ex = [&](cublasHandle_t h) {
    return cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, b.raw_data(), CUDA_R_32F, n,
                        a.raw_data(), CUDA_R_32F, n, &zero, c.raw_data(), CUDA_R_32F, n,
                        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  };
  tf::Tensor out;
  cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
  auto call = [&] {
    switch (mode) {
      case 0:
        BENCH_CUDA(cudaMemsetAsync(c.raw_data(), 0, 4, s));
        break;
      case 1:
        status = cublasSgemm(own, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, b.data<float>(), n,
                             a.data<float>(), n, &zero, c.data<float>(), n);
        break;
      case 2:
        status = gemm_ex(own);
        break;
      case 3:
        status = gemm_ex(tf::detail::cuda::cublas(kGpu));
        break;
      case 4:
        out = tf::matmul(a, b);
        break;
      case 5:
        out = tf::add(x, y);
        break;
      default:
        out = tf::detail::empty(tf::TensorShape{n, n}, tf::float32, kGpu);
        out = tf::Tensor();
        break;
    }
  };
  call();  // warm-up: handles, cuBLAS's kernel choice, cached blocks
  BENCH_CUDA(cudaStreamSynchronize(s));
  int64_t since_drain = 0;
  for (auto _ : state) {
    call();
    benchmark::DoNotOptimize(out);
    if (++since_drain == kDrainEvery) {
      state.PauseTiming();
      BENCH_CUDA(cudaStreamSynchronize(s));
      since_drain = 0;
      state.ResumeTiming();
    }
  }
  BENCH_CUDA(cudaStreamSynchronize(s));
  cublasDestroy(own);
  if (status != CUBLAS_STATUS_SUCCESS) state.SkipWithError("a cuBLAS call failed");
  static const char* const kLabels[] = {
      "memset 4 B",    "cublasSgemm 64",    "cublasGemmEx 64",     "GemmEx, tapeflow handle",
      "tf::matmul 64", "tf::add 1 element", "allocate and release"};
  state.SetLabel(kLabels[mode]);
}

tf::Tensor chain6(const tf::Tensor& x) { return tf::tanh(tf::exp(x * 0.5f + 1.0f) - x) * 2.0f; }

// mode 0: eager, 1: tf::function with jit_compile false, 2: with jit_compile (the default).
void BM_Chain6_16M(benchmark::State& state) {
  if (!have_gpu(state)) return;
  tf::DeviceScope scope(kGpu);
  tf::Tensor x = tf::random::uniform({1 << 24}, -1, 1, tf::float32, 1);
  tf::Tensor y;
  const int mode = static_cast<int>(state.range(0));
  auto f = tf::function(chain6, tf::FunctionOptions{.jit_compile = mode == 2});
  time_on_stream(state, [&] { y = mode == 0 ? chain6(x) : f(x); });
  // Bytes of one read of x and one write of the result (what a fused kernel moves).
  state.SetBytesProcessed(state.iterations() * 2 * static_cast<int64_t>(x.nbytes()));
  state.SetLabel(mode == 0 ? "eager" : mode == 1 ? "function, jit false" : "function jit_compile");
}

tf::Tensor chain100(const tf::Tensor& x, const tf::Tensor& y) {
  tf::Tensor c = x;
  for (int i = 0; i < 50; ++i) c = tf::multiply(tf::add(c, y), y);
  return c;
}

// The same 100 ops without fusion (a chain of matmuls and adds cannot fuse): graph replay
// as a CUDA graph against node-by-node replay.
tf::Tensor matmul_chain(const tf::Tensor& x, const tf::Tensor& w) {
  tf::Tensor c = x;
  for (int i = 0; i < 50; ++i) c = tf::add(tf::matmul(c, w), x);
  return c;
}

// Wall time of one call of `chain` on two small tensors and the wait for its result
// (launch-bound work); mode 0: eager, 1: tf::function with jit_compile false, 2: with jit_compile.
template <tf::Tensor (*chain)(const tf::Tensor&, const tf::Tensor&)>
void launch_bound_chain(benchmark::State& state, const tf::Tensor& x, const tf::Tensor& y) {
  const int mode = static_cast<int>(state.range(0));
  auto f = tf::function(chain, tf::FunctionOptions{.jit_compile = mode == 2});
  tf::Tensor c = mode == 0 ? chain(x, y) : f(x, y);
  tf::detail::cuda::synchronize(kGpu);
  for (auto _ : state) {
    c = mode == 0 ? chain(x, y) : f(x, y);
    tf::detail::cuda::synchronize(kGpu);
  }
  state.SetItemsProcessed(state.iterations() * 100);
  state.SetLabel(mode == 0 ? "eager" : mode == 1 ? "function, jit false" : "function jit_compile");
}

void BM_Chain100Tiny(benchmark::State& state) {
  if (!have_gpu(state)) return;
  tf::DeviceScope scope(kGpu);
  launch_bound_chain<chain100>(state, tf::ones({2, 2}), tf::fill({2, 2}, tf::Tensor(0.5f)));
}
void BM_MatmulChain100Tiny(benchmark::State& state) {
  if (!have_gpu(state)) return;
  tf::DeviceScope scope(kGpu);
  launch_bound_chain<matmul_chain>(state, tf::ones({4, 4}), tf::fill({4, 4}, tf::Tensor(0.1f)));
}

// The 784-128-10 MLP's SGD train step (bench/mlp_step.h) on the GPU, wall time of one step
// including the wait for its loss (what a training loop that logs the loss pays). mode 0:
// eager, 1: tf::function with jit_compile false (the two weight updates fused into their cuBLAS
// products), 2: tf::function traced with TAPEFLOW_FUSION=0 (separate product, scale, subtract and
// assignment nodes), 3: tf::function with jit_compile (also the bias updates as generated
// kernels writing into the variables, and the step replayed as one captured CUDA graph), 4: as
// 3 with TAPEFLOW_CUDA_GRAPHS=0 (node by node).
void BM_MlpStep(benchmark::State& state) {
  if (!have_gpu(state)) return;
  const int64_t batch = state.range(0);
  const int mode = static_cast<int>(state.range(1));
  bench_mlp::Mlp m(batch, "/GPU:0");
  tf::DeviceScope scope(kGpu);
  auto step = tf::function(
      [&m](const tf::Tensor& xb, const tf::Tensor& yb) { return m.step(xb, yb); },
      tf::FunctionOptions{.jit_compile = mode >= 3});
  auto run = [&] { return mode == 0 ? m.step(m.x, m.labels) : step(m.x, m.labels); };
  const char* env = mode == 2 ? "TAPEFLOW_FUSION" : mode == 4 ? "TAPEFLOW_CUDA_GRAPHS" : nullptr;
  if (env) setenv(env, "0", 1);
  run();  // traced (and optimised) now
  if (env) unsetenv(env);
  run();  // a step with jit_compile is captured now
  float loss = 0;
  for (auto _ : state) loss = run().item<float>();
  state.counters["loss"] = loss;
  if (mode > 0) {
    const tf::Graph& g =
        step.get_concrete_function(tf::TensorSpec({batch, 784}), tf::TensorSpec({batch}, tf::int64))
            .graph();
    state.counters["nodes"] = g.num_nodes();
    state.counters["cuda_graph"] =
        g.cuda_graph() != nullptr && tf::jit::cuda_graph_stats(*g.cuda_graph()).captured;
  }
  state.SetLabel(mode == 0   ? "eager"
                 : mode == 1 ? "function, jit false"
                 : mode == 2 ? "function, TAPEFLOW_FUSION=0"
                 : mode == 3 ? "function jit_compile"
                             : "function jit_compile, TAPEFLOW_CUDA_GRAPHS=0");
}

// A Keras fit epoch on the GPU: the 784-128-10 MLP with Adam and an accuracy metric, 8192
// random samples on the device, batch 32 (256 steps), wall time per epoch. mode 0:
// jit_compile false (traced, unfused steps), 1: jit_compile (compile's default; the step
// captured as a CUDA graph), 2: jit_compile with TAPEFLOW_CUDA_GRAPHS=0 (node by node), 3: as 1
// with a callback that reads each batch's logs (the loss and accuracy read on the host after
// every step, which waits for the GPU; what a verbose-1 progress bar needs, and what every fit
// did until fit learned to skip logs no callback reads), 4: as 1 with asynchronous
// host-to-device copies (TAPEFLOW_ASYNC_HOST_TO_DEVICE: each step's batch, staged on the host,
// no longer waits for the previous step's kernels).
void BM_KerasFitEpoch(benchmark::State& state) {
  if (!have_gpu(state)) return;
  const int mode = static_cast<int>(state.range(0));
  tf::DeviceScope scope(kGpu);
  const tf::Tensor x = tf::random::uniform({8192, 784}, 0.0, 1.0, tf::float32, 5);
  const tf::Tensor y = tf::random::uniform({8192}, 0, 10, tf::int64, 6);
  tf::random::set_seed(1);
  K::Sequential model({K::layers::Dense(128, "relu"), K::layers::Dense(10)});
  model.compile(K::optimizers::Adam(1e-3), K::losses::SparseCategoricalCrossentropy(true),
                {"accuracy"}, {.jit_compile = mode >= 1});
  if (mode == 2) setenv("TAPEFLOW_CUDA_GRAPHS", "0", 1);
  const bool async_before = tf::detail::async_host_to_device();
  if (mode == 4) tf::detail::set_async_host_to_device(true);
  model.fit(tf::slice(x, {0, 0}, {128, 784}), tf::slice(y, {0}, {128}),
            {.epochs = 1, .batch_size = 32, .verbose = 0});  // traced and captured now
  double loss = 0;
  std::vector<K::callbacks::CallbackRef> callbacks;
  if (mode == 3)  // a batch function: its logs are read after every step
    callbacks.push_back(
        K::callbacks::LambdaCallback({.on_train_batch_end = [](int64_t, const K::Logs&) {}}));
  for (auto _ : state) {
    const K::History h =
        model.fit(x, y, {.epochs = 1, .batch_size = 32, .callbacks = callbacks, .verbose = 0});
    loss = h.history.at("loss").back();
  }
  if (mode == 2) unsetenv("TAPEFLOW_CUDA_GRAPHS");
  tf::detail::set_async_host_to_device(async_before);
  state.counters["loss"] = loss;
  state.counters["us_per_step"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * 256, benchmark::Counter::kIsRate |
                                                          benchmark::Counter::kInvert);
  state.SetLabel(mode == 0   ? "jit_compile false"
                 : mode == 1 ? "jit_compile"
                 : mode == 2 ? "jit_compile, TAPEFLOW_CUDA_GRAPHS=0"
                 : mode == 3 ? "jit_compile, a callback reading batch logs"
                             : "jit_compile, asynchronous host-to-device copies");
}

constexpr size_t kCopyBytes = size_t{256} << 20;

// tapeflow's host<->device copy of a pageable host tensor (what tf::constant, numpy() and
// copy_to_device do), wall time including the wait.
void BM_HostToDevice(benchmark::State& state) {
  if (!have_gpu(state)) return;
  const int64_t n = static_cast<int64_t>(kCopyBytes / 4);
  tf::Tensor host;
  {
    tf::DeviceScope scope("/cpu:0");
    host = tf::fill({n}, tf::Tensor(1.0f));
  }
  tf::Tensor dev = tf::detail::copy_to_device(host, kGpu);  // warm-up: staging buffers
  for (auto _ : state) dev = tf::detail::copy_to_device(host, kGpu);
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(kCopyBytes));
}

void BM_DeviceToHost(benchmark::State& state) {
  if (!have_gpu(state)) return;
  const int64_t n = static_cast<int64_t>(kCopyBytes / 4);
  tf::Tensor dev;
  {
    tf::DeviceScope scope(kGpu);
    dev = tf::fill({n}, tf::Tensor(1.0f));
  }
  tf::Tensor host = tf::detail::copy_to_device(dev, tf::Device{});
  for (auto _ : state) host = tf::detail::copy_to_device(dev, tf::Device{});
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(kCopyBytes));
}

// The DMA ceiling: cudaMemcpy between pinned host memory and the device.
void BM_PinnedCopy(benchmark::State& state, bool to_device) {
  if (!have_gpu(state)) return;
  void* pinned = nullptr;
  void* device = nullptr;
  BENCH_CUDA(cudaMallocHost(&pinned, kCopyBytes));
  BENCH_CUDA(cudaMalloc(&device, kCopyBytes));
  std::memset(pinned, 1, kCopyBytes);
  for (auto _ : state) {
    if (to_device)
      BENCH_CUDA(cudaMemcpy(device, pinned, kCopyBytes, cudaMemcpyHostToDevice));
    else
      BENCH_CUDA(cudaMemcpy(pinned, device, kCopyBytes, cudaMemcpyDeviceToHost));
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(kCopyBytes));
  BENCH_CUDA(cudaFree(device));
  BENCH_CUDA(cudaFreeHost(pinned));
}

}  // namespace

BENCHMARK(BM_CopyD2D)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Add)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ReduceSum)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_CublasSgemm, float32, false)
    ->Arg(64)
    ->Arg(256)
    ->Arg(8192)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Matmul, float32, tf::float32, false)
    ->Arg(64)
    ->Arg(256)
    ->Arg(8192)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Matmul, tf32, tf::float32, true)->Arg(8192)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Matmul, bfloat16, tf::bfloat16, false)->Arg(8192)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Matmul, float16, tf::float16, false)->Arg(8192)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_CublasSgemm, tf32, true)->Arg(8192)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_CublasLtTf32Best)->Arg(8192)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Inverse)->Arg(16384)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_TinyOpLaunch)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_HostCost)->DenseRange(0, 6)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_GroupedConv2D)
    ->ArgsProduct({{1, 4, 32}, {0, 1}})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Chain6_16M)->DenseRange(0, 2)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Chain100Tiny)->DenseRange(0, 2)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_MatmulChain100Tiny)->DenseRange(0, 2)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_MlpStep)->ArgsProduct({{32, 256}, {0, 1, 2, 3, 4}})->MinTime(0.2)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_KerasFitEpoch)
    ->DenseRange(0, 4)
    ->Iterations(3)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_HostToDevice)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_DeviceToHost)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PinnedCopy, to_device, true)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PinnedCopy, to_host, false)->UseRealTime()->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
