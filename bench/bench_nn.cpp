// conv2d, max_pool2d and random::normal against libtorch (and pooling against oneDNN's own
// pooling primitive, to choose the faster CPU kernel), on the same machine in the same run.
// libtorch is NCHW: inputs are permuted once, outside the timed loops; the channels-last rows
// give libtorch the same NHWC memory layout as tapeflow.
//   cmake -DTAPEFLOW_BUILD_BENCH=ON ... && OMP_NUM_THREADS=2 build/bench/bench_nn
// Measured on the 2-core Zen 5 development machine, OMP_NUM_THREADS=2, median of 7 (us):
//   conv2d 32x28x28x1 -> 32 (3x3 SAME)    tapeflow 72    torch NCHW 85    torch NHWC 85
//   conv2d 32x14x14x32 -> 64              tapeflow 462   torch NCHW 608   torch NHWC 465
//   max_pool 2x2/2 32x28x28x32            tapeflow 26    oneDNN 25   torch NCHW 1544   NHWC 109
//   max_pool 2x2/2 32x14x14x64            tapeflow 12    oneDNN 12   torch NCHW 780    NHWC 42
//   random normal, 16M float32            tapeflow 13.3 ms    torch randn 71.5 ms
//   random uniform, 16M float32           tapeflow 5.7 ms     torch rand 66.3 ms
// The machine is shared: a run where another process takes a core shows repetitions 5-10x
// slower (look at the spread, not only the median).
#include <benchmark/benchmark.h>

#include <dnnl.hpp>

#include "autograd/tape.h"
#include "core/tensor.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/movement.h"
#include "ops/nn.h"
#include "ops/random.h"
#include "ops/reduce.h"
#ifdef TAPEFLOW_HAVE_TORCH
#include <torch/torch.h>
#endif

namespace tf = tapeflow;

namespace {

struct ConvShape {
  int64_t n, h, w, c, k, o;
};
// 0: MNIST-style first layer, 1: second layer after a 2x2 pool, 2: an RGB first layer.
constexpr ConvShape kConv[] = {
    {32, 28, 28, 1, 3, 32}, {32, 14, 14, 32, 3, 64}, {32, 28, 28, 3, 3, 32}};
struct PoolShape {
  int64_t n, h, w, c;
};
constexpr PoolShape kPool[] = {{32, 28, 28, 32}, {32, 14, 14, 64}};
constexpr int64_t kRandomN = 16 << 20;

double conv_flops(const ConvShape& s) {
  return 2.0 * s.n * s.h * s.w * s.o * s.k * s.k * s.c;  // SAME, stride 1
}

void set_conv_counters(benchmark::State& state, const ConvShape& s) {
  state.counters["GFLOP/s"] =
      benchmark::Counter(conv_flops(s) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace

// ---------------------------------------------------------------- conv2d

// The three ways a convolution of shape s runs here: 0 NHWC; 1 data_format "NCHW" (what a Keras
// Conv2D with data_format "channels_first" runs: one conv2d primitive, whose CPU kernel moves
// the tensors to NHWC and back, ops/cpu/conv.cpp); 2 NCHW through two transposes around the NHWC
// convolution (the route channels_first layers took before NCHW convolutions).
static tf::Tensor conv_input(const ConvShape& s, int64_t mode) {
  const tf::TensorShape xs =
      mode == 0 ? tf::TensorShape{s.n, s.h, s.w, s.c} : tf::TensorShape{s.n, s.c, s.h, s.w};
  return tf::random::uniform(xs, -1, 1, tf::float32, 1);
}
static tf::Tensor conv_in_mode(const tf::Tensor& x, const tf::Tensor& f, int64_t mode) {
  if (mode == 0) return tf::nn::conv2d(x, f, {1}, "SAME");
  if (mode == 1) return tf::nn::conv2d(x, f, {1}, "SAME", {1}, "NCHW");
  return tf::transpose(tf::nn::conv2d(tf::transpose(x, {0, 2, 3, 1}), f, {1}, "SAME"),
                       {0, 3, 1, 2});
}

static void conv2d_forward(benchmark::State& state, int64_t mode) {
  const ConvShape s = kConv[state.range(0)];
  tf::DeviceScope scope("/cpu:0");
  const tf::Tensor x = conv_input(s, mode);
  const tf::Tensor f = tf::random::uniform({s.k, s.k, s.c, s.o}, -1, 1, tf::float32, 2);
  for (auto _ : state) {
    tf::Tensor y = conv_in_mode(x, f, mode);
    benchmark::DoNotOptimize(y.raw_data());
  }
  set_conv_counters(state, s);
}
static void BM_tapeflow_conv2d(benchmark::State& state) {
  conv2d_forward(state, 0);
}
static void BM_tapeflow_conv2d_nchw(benchmark::State& state) {
  conv2d_forward(state, 1);
}
static void BM_tapeflow_conv2d_channels_first(benchmark::State& state) {
  conv2d_forward(state, 2);
}
BENCHMARK(BM_tapeflow_conv2d)->DenseRange(0, 2)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_tapeflow_conv2d_nchw)->DenseRange(0, 2)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_tapeflow_conv2d_channels_first)->DenseRange(0, 2)->Unit(benchmark::kMicrosecond);

// A training step's convolution work: the forward op and the gradients of sum(y * y) with
// respect to the input and the filters. range(1): the mode, as conv_in_mode.
static void BM_tapeflow_conv2d_grad(benchmark::State& state) {
  const ConvShape s = kConv[state.range(0)];
  const int64_t mode = state.range(1);
  tf::DeviceScope scope("/cpu:0");
  const tf::Tensor x = conv_input(s, mode);
  const tf::Tensor f = tf::random::uniform({s.k, s.k, s.c, s.o}, -1, 1, tf::float32, 2);
  for (auto _ : state) {
    tf::GradientTape tape;
    tape.watch(x);
    tape.watch(f);
    const tf::Tensor y = conv_in_mode(x, f, mode);
    const auto g = tape.gradient(tf::reduce_sum(y * y), std::vector<tf::Tensor>{x, f});
    benchmark::DoNotOptimize(g[0].raw_data());
    benchmark::DoNotOptimize(g[1].raw_data());
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(3 * conv_flops(s) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_tapeflow_conv2d_grad)
    ->ArgsProduct({{0, 1, 2}, {0, 1, 2}})
    ->Unit(benchmark::kMicrosecond);

#ifdef TAPEFLOW_HAVE_TORCH
static void torch_conv2d(benchmark::State& state, bool channels_last) {
  const ConvShape s = kConv[state.range(0)];
  torch::NoGradGuard no_grad;
  auto x = torch::rand({s.n, s.h, s.w, s.c}).permute({0, 3, 1, 2});  // NCHW view of NHWC data
  auto w = torch::rand({s.o, s.c, s.k, s.k});
  x = channels_last ? x.contiguous(torch::MemoryFormat::ChannelsLast) : x.contiguous();
  if (channels_last) w = w.contiguous(torch::MemoryFormat::ChannelsLast);
  for (auto _ : state) {
    auto y = torch::conv2d(x, w, {}, 1, s.k / 2);
    benchmark::DoNotOptimize(y.data_ptr());
  }
  set_conv_counters(state, s);
}
static void BM_torch_conv2d_nchw(benchmark::State& state) {
  torch_conv2d(state, false);
}
static void BM_torch_conv2d_channels_last(benchmark::State& state) {
  torch_conv2d(state, true);
}
BENCHMARK(BM_torch_conv2d_nchw)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_torch_conv2d_channels_last)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);
#endif

// ---------------------------------------------------------------- pooling (2x2, stride 2)

static void BM_tapeflow_max_pool2d(benchmark::State& state) {
  const PoolShape s = kPool[state.range(0)];
  tf::DeviceScope scope("/cpu:0");
  const tf::Tensor x = tf::random::uniform({s.n, s.h, s.w, s.c}, -1, 1, tf::float32, 1);
  for (auto _ : state) {
    tf::Tensor y = tf::nn::max_pool2d(x, {2}, {2}, "VALID");
    benchmark::DoNotOptimize(y.raw_data());
  }
  state.SetBytesProcessed(state.iterations() * s.n * s.h * s.w * s.c * 4 * 5 / 4);
}
BENCHMARK(BM_tapeflow_max_pool2d)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

static void BM_tapeflow_avg_pool2d(benchmark::State& state) {
  const PoolShape s = kPool[state.range(0)];
  tf::DeviceScope scope("/cpu:0");
  const tf::Tensor x = tf::random::uniform({s.n, s.h, s.w, s.c}, -1, 1, tf::float32, 1);
  for (auto _ : state) {
    tf::Tensor y = tf::nn::avg_pool2d(x, {2}, {2}, "VALID");
    benchmark::DoNotOptimize(y.raw_data());
  }
  state.SetBytesProcessed(state.iterations() * s.n * s.h * s.w * s.c * 4 * 5 / 4);
}
BENCHMARK(BM_tapeflow_avg_pool2d)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

// oneDNN's own pooling on the same NHWC buffers (primitive made once, outside the loop).
static void onednn_pool(benchmark::State& state, dnnl::algorithm alg) {
  const PoolShape s = kPool[state.range(0)];
  using tag = dnnl::memory::format_tag;
  using dt = dnnl::memory::data_type;
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(eng);
  const dnnl::memory::desc src({s.n, s.c, s.h, s.w}, dt::f32, tag::nhwc);
  const dnnl::memory::desc dst({s.n, s.c, s.h / 2, s.w / 2}, dt::f32, tag::nhwc);
  const dnnl::pooling_forward::desc d(dnnl::prop_kind::forward_inference, alg, src, dst, {2, 2},
                                      {2, 2}, {0, 0}, {0, 0});
  const dnnl::pooling_forward::primitive_desc pd(d, eng);
  const dnnl::pooling_forward pool(pd);
  tf::DeviceScope scope("/cpu:0");
  const tf::Tensor x = tf::random::uniform({s.n, s.h, s.w, s.c}, -1, 1, tf::float32, 1);
  for (auto _ : state) {
    // A fresh output per call, as an eager op allocates one.
    tf::Tensor y = tf::detail::empty({s.n, s.h / 2, s.w / 2, s.c}, tf::float32, tf::Device{});
    dnnl::memory sm(src, eng, x.raw_data()), dm(dst, eng, y.raw_data());
    pool.execute(stream, {{DNNL_ARG_SRC, sm}, {DNNL_ARG_DST, dm}});
    stream.wait();
    benchmark::DoNotOptimize(y.raw_data());
  }
  state.SetBytesProcessed(state.iterations() * s.n * s.h * s.w * s.c * 4 * 5 / 4);
}
static void BM_onednn_max_pool2d(benchmark::State& state) {
  onednn_pool(state, dnnl::algorithm::pooling_max);
}
static void BM_onednn_avg_pool2d(benchmark::State& state) {
  onednn_pool(state, dnnl::algorithm::pooling_avg_exclude_padding);
}
BENCHMARK(BM_onednn_max_pool2d)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_onednn_avg_pool2d)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

#ifdef TAPEFLOW_HAVE_TORCH
static void torch_max_pool(benchmark::State& state, bool channels_last) {
  const PoolShape s = kPool[state.range(0)];
  torch::NoGradGuard no_grad;
  auto x = torch::rand({s.n, s.h, s.w, s.c}).permute({0, 3, 1, 2});
  x = channels_last ? x.contiguous(torch::MemoryFormat::ChannelsLast) : x.contiguous();
  for (auto _ : state) {
    auto y = torch::max_pool2d(x, {2, 2}, {2, 2});
    benchmark::DoNotOptimize(y.data_ptr());
  }
  state.SetBytesProcessed(state.iterations() * s.n * s.h * s.w * s.c * 4 * 5 / 4);
}
static void BM_torch_max_pool2d_nchw(benchmark::State& state) {
  torch_max_pool(state, false);
}
static void BM_torch_max_pool2d_channels_last(benchmark::State& state) {
  torch_max_pool(state, true);
}
BENCHMARK(BM_torch_max_pool2d_nchw)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_torch_max_pool2d_channels_last)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);
#endif

// ---------------------------------------------------------------- random (16M float32)

static void BM_tapeflow_random_normal_16M(benchmark::State& state) {
  tf::DeviceScope scope("/cpu:0");
  int64_t seed = 0;
  for (auto _ : state) {
    tf::Tensor y = tf::random::normal({kRandomN}, 0, 1, tf::float32, ++seed);
    benchmark::DoNotOptimize(y.raw_data());
  }
  state.SetItemsProcessed(state.iterations() * kRandomN);
}
BENCHMARK(BM_tapeflow_random_normal_16M)->Unit(benchmark::kMillisecond);

static void BM_tapeflow_random_uniform_16M(benchmark::State& state) {
  tf::DeviceScope scope("/cpu:0");
  int64_t seed = 0;
  for (auto _ : state) {
    tf::Tensor y = tf::random::uniform({kRandomN}, 0, 1, tf::float32, ++seed);
    benchmark::DoNotOptimize(y.raw_data());
  }
  state.SetItemsProcessed(state.iterations() * kRandomN);
}
BENCHMARK(BM_tapeflow_random_uniform_16M)->Unit(benchmark::kMillisecond);

#ifdef TAPEFLOW_HAVE_TORCH
static void BM_torch_randn_16M(benchmark::State& state) {
  for (auto _ : state) {
    auto y = torch::randn({kRandomN});
    benchmark::DoNotOptimize(y.data_ptr());
  }
  state.SetItemsProcessed(state.iterations() * kRandomN);
}
BENCHMARK(BM_torch_randn_16M)->Unit(benchmark::kMillisecond);

static void BM_torch_rand_16M(benchmark::State& state) {
  for (auto _ : state) {
    auto y = torch::rand({kRandomN});
    benchmark::DoNotOptimize(y.data_ptr());
  }
  state.SetItemsProcessed(state.iterations() * kRandomN);
}
BENCHMARK(BM_torch_rand_16M)->Unit(benchmark::kMillisecond);
#endif

BENCHMARK_MAIN();
