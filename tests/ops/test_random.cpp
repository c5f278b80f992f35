// tf::random: the Philox-4x32-10 generator against Random123's known answers, the stream layout
// (element i from block i / 4 or i / 2), TF's seed rules, thread-count independence, moments of
// the distributions, bounds, integer ranges and every error path.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"
#include "ops/cpu/philox.h"
#include "ops/random.h"
#include "support/testing.h"

// From core/parallel.h, which test binaries cannot include: they are not compiled with -fopenmp
// (its #pragma omp would be an unknown-pragma error under -Werror).
namespace tapeflow::detail {
int num_threads();
void set_num_threads(int n);
}  // namespace tapeflow::detail

// The references below must round every product, as the library does.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=off")
#endif

#define NORMAL_HASH 0x94a3008d15fa2141ull
#define UNIFORM_HASH 0x1b1c49ff8d5ecccbull

namespace tf = tapeflow;
namespace philox = tapeflow::philox;

namespace {

struct Moments {
  double mean = 0, std = 0, skew = 0, kurt = 0, min = 0, max = 0;
};

Moments moments(const std::vector<double>& v) {
  Moments m;
  const double n = static_cast<double>(v.size());
  for (double x : v) m.mean += x;
  m.mean /= n;
  double m2 = 0, m3 = 0, m4 = 0;
  for (double x : v) {
    const double d = x - m.mean;
    m2 += d * d;
    m3 += d * d * d;
    m4 += d * d * d * d;
  }
  m2 /= n, m3 /= n, m4 /= n;
  m.std = std::sqrt(m2);
  m.skew = m3 / (m2 * m.std);
  m.kurt = m4 / (m2 * m2);
  m.min = *std::min_element(v.begin(), v.end());
  m.max = *std::max_element(v.begin(), v.end());
  return m;
}

std::vector<double> values(const tf::Tensor& t) {
  return tf::detail::to_double_vector(t);
}

// Restores the pool size on scope exit.
struct ThreadsGuard {
  int saved = tf::detail::num_threads();
  ~ThreadsGuard() { tf::detail::set_num_threads(saved); }
};

}  // namespace

TEST_CASE("philox4x32_10 matches Random123's known-answer vectors", "[cpu][random]") {
  // Random123 kat_vectors, philox4x32_10 lines.
  struct Kat {
    uint32_t ctr[4], key[2], out[4];
  };
  const Kat kats[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const Kat& k : kats) {
    const auto w =
        philox::philox4x32_10(k.ctr[0], k.ctr[1], k.ctr[2], k.ctr[3], k.key[0], k.key[1]);
    for (int i = 0; i < 4; ++i) CHECK(w.v[i] == k.out[i]);
  }
  // tapeflow's layout: key = seed, counter = {block, seed2}.
  const auto a = philox::block(0xa4093822299f31d0ull, 0, 0);
  const auto b = philox::philox4x32_10(0, 0, 0, 0, 0x299f31d0, 0xa4093822);
  for (int i = 0; i < 4; ++i) CHECK(a.v[i] == b.v[i]);
  const auto c = philox::block(0x0000000100000002ull, 0x0000000300000004ull, 0x0000000500000006ull);
  const auto d = philox::philox4x32_10(6, 5, 4, 3, 2, 1);
  for (int i = 0; i < 4; ++i) CHECK(c.v[i] == d.v[i]);
  // Word-to-uniform conversions: exact mantissa construction, [0, 1).
  CHECK(philox::uniform_float(0) == 0.0f);
  CHECK(philox::uniform_float(0xffffffffu) == 1.0f - 1.0f / 8388608.0f);
  CHECK(philox::uniform_float(0x80000000u) == 0.5f);
  CHECK(philox::uniform_double(0, 0) == 0.0);
  CHECK(philox::uniform_double(0xffffffffu, 0xffffffffu) == 1.0 - 1.0 / 4503599627370496.0);
  CHECK(philox::uniform_float_bits(0xffffffffu, 10) == 1.0f - 1.0f / 1024.0f);
}

TEST_CASE("random values follow the documented stream layout", "[cpu][cuda][random]") {
  tf::random::set_seed(5);
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    // float32 uniform: element i is word i % 4 of block i / 4, scaled.
    tf::random::set_seed(5);  // each seed pair starts its stream afresh
    const auto u = tf::random::uniform({10}, -2.0, 2.0, tf::float32, 7);
    CHECK(u.device() == dev.to_string());
    const auto uv = u.numpy<float>();
    for (int i = 0; i < 10; ++i) {
      const auto w = philox::block(5, 7, i / 4);
      CHECK(uv[i] == -2.0f + philox::uniform_float(w.v[i % 4]) * 4.0f);
    }
    // A range that is not a power of two: the product is rounded before the add (no FMA).
    tf::random::set_seed(5);  // each seed pair starts its stream afresh
    const auto u3 = tf::random::uniform({64}, 0.5, 3.5, tf::float32, 7).numpy<float>();
    for (int i = 0; i < 64; ++i) {
      const auto w = philox::block(5, 7, i / 4);
      const float prod = philox::uniform_float(w.v[i % 4]) * 3.0f;
      CHECK(u3[i] == 0.5f + prod);
    }
    // float64 uniform: two words per element, block i / 2.
    tf::random::set_seed(5);  // each seed pair starts its stream afresh
    const auto ud = tf::random::uniform({5}, 0.0, 1.0, tf::float64, 7).numpy<double>();
    for (int i = 0; i < 5; ++i) {
      const auto w = philox::block(5, 7, i / 2);
      CHECK(ud[i] == philox::uniform_double(w.v[2 * (i % 2)], w.v[2 * (i % 2) + 1]));
    }
    // float32 normal: Box-Muller on words (0, 1) and (2, 3) of each block, bit for bit as
    // philox.h describes it, and close to the exact transform in float64.
    tf::random::set_seed(5);  // each seed pair starts its stream afresh
    const auto nv = tf::random::normal({6}, 1.0, 3.0, tf::float32, 9).numpy<float>();
    for (int i = 0; i < 6; ++i) {
      const auto w = philox::block(5, 9, i / 4);
      const int k = (i % 4) / 2;
      const float v = -2.0f * philox::log_unit(1.0f - philox::uniform_float(w.v[2 * k]));
      float s, c;
      philox::sincos_2pi(philox::uniform_float(w.v[2 * k + 1]), s, c);
      const float r = std::sqrt(v);
      CHECK(nv[i] == 1.0f + 3.0f * (r * (i % 2 == 0 ? c : s)));
      const double u1 = 1.0 - philox::uniform_float(w.v[2 * k]);
      const double u2 = philox::uniform_float(w.v[2 * k + 1]);
      const double rd = std::sqrt(-2.0 * std::log(u1));
      const double want =
          1.0 + 3.0 * ((i % 2 == 0) ? rd * std::cos(2 * M_PI * u2) : rd * std::sin(2 * M_PI * u2));
      CHECK(std::abs(nv[i] - want) <= 1e-5 * (1 + std::abs(want)));
    }
    // float64 normal: one block per pair, Box-Muller with tapeflow's float64 log, sin and cos on
    // the CPU (CUDA's on a GPU): within 1e-14 relative of the exact transform (the rounding of
    // 2 pi u2 alone moves the result by up to about 1e-14).
    tf::random::set_seed(5);  // each seed pair starts its stream afresh
    const auto nd = tf::random::normal({7}, 1.0, 3.0, tf::float64, 9).numpy<double>();
    for (int i = 0; i < 7; ++i) {
      const auto w = philox::block(5, 9, i / 2);
      const long double u1 = 1.0 - philox::uniform_double(w.v[0], w.v[1]);
      const long double t = 2 * 3.14159265358979323846264338327950288L *
                            static_cast<long double>(philox::uniform_double(w.v[2], w.v[3]));
      const long double rd = std::sqrt(-2 * std::log(u1));
      const long double want = 1 + 3 * (i % 2 == 0 ? rd * std::cos(t) : rd * std::sin(t));
      CHECK(std::abs(nd[i] - want) <= 1e-14L * (1 + std::abs(want)));
    }
    // int32: minval + word % range.
    tf::random::set_seed(5);  // each seed pair starts its stream afresh
    const auto iv = tf::random::uniform({7}, -3.0, 10.0, tf::int32, 11).numpy<int32_t>();
    for (int i = 0; i < 7; ++i) {
      const auto w = philox::block(5, 11, i / 4);
      CHECK(iv[i] == -3 + static_cast<int32_t>(w.v[i % 4] % 13u));
    }
    // A longer tensor's prefix is the shorter tensor (element i depends on i only).
    tf::random::set_seed(5);  // each seed pair starts its stream afresh
    const auto longer = tf::random::uniform({1000}, -2.0, 2.0, tf::float32, 7).numpy<float>();
    for (int i = 0; i < 10; ++i) CHECK(longer[i] == uv[i]);
  }
}

// float64 normals on the CPU: plain IEEE arithmetic without contraction, tapeflow's own log, sin
// and cos included, so every CPU loop variant (CTest re-runs this on the AVX2 and baseline ones)
// and every machine gives these bits. A GPU uses CUDA's functions (the test above bounds it).
TEST_CASE("float64 random normals are the same bits on every CPU", "[cpu][random]") {
  tf::DeviceScope cpu("/cpu:0");
  tf::random::set_seed(1);  // each seed pair starts its stream afresh
  const auto v = tf::random::normal({1 << 16}, 0.5, 2.0, tf::float64, 2).numpy<double>();
  uint64_t h = 1469598103934665603ull;
  for (double d : v) {
    uint64_t u;
    std::memcpy(&u, &d, 8);
    h = (h ^ u) * 1099511628211ull;
  }
  CHECK(h == 0x26f59e84c48db625ull);
  const double golden[4] = {0x1.34cc00db58ca9p-1, 0x1.347ff0b9791p+2, 0x1.4d4ace98e3f3ep-3,
                            0x1.d4ce9b2a650fbp+1};
  for (int i = 0; i < 4; ++i) CHECK(v[i] == golden[i]);
}

TEST_CASE("float32 random values are the same bits on every machine", "[cpu][cuda][random]") {
  // The reference is computed here from ops/cpu/philox.h, in this test's baseline (SSE2) build;
  // the library runs AVX2/AVX-512 clones where the CPU has them, which must agree bit for bit
  // (they would not if a multiply-add were fused), and so must a future CUDA kernel. The hashes
  // pin the streams themselves.
  const int64_t n = 1 << 16;
  tf::random::set_seed(1);
  std::vector<float> normal_ref(n), uniform_ref(n);
  for (int64_t i = 0; i < n; ++i) {
    const auto w = philox::block(1, 2, static_cast<uint64_t>(i / 4));
    const int k = static_cast<int>(i % 4) / 2;
    const float v = -2.0f * philox::log_unit(1.0f - philox::uniform_float(w.v[2 * k]));
    float s, c;
    philox::sincos_2pi(philox::uniform_float(w.v[2 * k + 1]), s, c);
    const float r = std::sqrt(v);
    normal_ref[i] = 0.5f + 2.0f * (r * (i % 2 == 0 ? c : s));
    const auto wu = philox::block(1, 3, static_cast<uint64_t>(i / 4));
    const float prod = philox::uniform_float(wu.v[i % 4]) * 3.0f;
    uniform_ref[i] = -1.25f + prod;
  }
  auto hash = [](const std::vector<float>& v) {
    uint64_t h = 1469598103934665603ull;
    for (float f : v) {
      uint32_t u;
      std::memcpy(&u, &f, 4);
      h = (h ^ u) * 1099511628211ull;
    }
    return h;
  };
  CHECK(hash(normal_ref) == NORMAL_HASH);
  CHECK(hash(uniform_ref) == UNIFORM_HASH);
  // The first normals of the stream (seed 1, seed2 2), as hex floats, for the record.
  const float golden[8] = {-0x1.06c534p+1f, -0x1.59318cp-1f, 0x1.754e76p-1f, 0x1.77b48ep-3f,
                           0x1.f5367ep-1f,  -0x1.40d338p+0f, 0x1.7bbb9ap-1f, 0x1.10aa0cp-2f};
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    tf::random::set_seed(1);  // each seed pair starts its stream afresh
    const auto g = tf::random::normal({8}, 0, 1, tf::float32, 2).numpy<float>();
    for (int i = 0; i < 8; ++i) CHECK(g[i] == golden[i]);
    tf::random::set_seed(1);  // each seed pair starts its stream afresh
    const auto nv = tf::random::normal({n}, 0.5, 2.0, tf::float32, 2).numpy<float>();
    tf::random::set_seed(1);  // each seed pair starts its stream afresh
    const auto uv = tf::random::uniform({n}, -1.25, 1.75, tf::float32, 3).numpy<float>();
    int64_t normal_diff = 0, uniform_diff = 0;
    for (int64_t i = 0; i < n; ++i) {
      normal_diff += nv[i] != normal_ref[i];
      uniform_diff += uv[i] != uniform_ref[i];
    }
    CHECK(normal_diff == 0);
    CHECK(uniform_diff == 0);
  }
}

TEST_CASE("seeds follow TF's rules", "[cpu][random]") {
  const tf::TensorShape s{64};
  SECTION("same seeds give the same values, different seeds differ") {
    tf::random::set_seed(1);
    const auto a = values(tf::random::normal(s, 0, 1, tf::float32, 3));
    const auto b = values(tf::random::normal(s, 0, 1, tf::float32, 3));
    const auto c = values(tf::random::normal(s, 0, 1, tf::float32, 4));
    CHECK(a != b);  // as TF's eager kernels: the second call continues the stream
    CHECK(a != c);
    tf::random::set_seed(1);
    CHECK(values(tf::random::normal(s, 0, 1, tf::float32, 3)) == a);
    CHECK(values(tf::random::normal(s, 0, 1, tf::float32, 3)) == b);
    tf::random::set_seed(2);
    const auto d = values(tf::random::normal(s, 0, 1, tf::float32, 3));
    CHECK(a != d);
  }
  SECTION("set_seed resets the op counter") {
    tf::random::set_seed(1234);
    const auto a1 = values(tf::random::uniform(s));
    const auto a2 = values(tf::random::uniform(s));
    CHECK(a1 != a2);
    tf::random::set_seed(1234);
    CHECK(values(tf::random::uniform(s)) == a1);
    CHECK(values(tf::random::uniform(s)) == a2);
    // The counter is the op seed: (global, 0), (global, 1), ...
    tf::random::set_seed(1234);
    CHECK(values(tf::random::uniform(s, 0, 1, tf::float32, 0)) == a1);
    CHECK(values(tf::random::uniform(s, 0, 1, tf::float32, 1)) == a2);
    const auto seeds = tf::detail::resolve_random_seeds(std::nullopt);
    CHECK(seeds.first == 1234u);
    CHECK(seeds.second == 0u);  // an op with its own seed does not advance the counter
  }
  SECTION("an op seed without a global seed uses TF's default graph seed") {
    tf::detail::clear_random_seed();
    const auto a = values(tf::random::normal(s, 0, 1, tf::float32, 42));
    const auto b = values(tf::random::normal(s, 0, 1, tf::float32, 42));
    CHECK(a != b);  // the second call continues the (default, 42) stream
    tf::random::set_seed(tf::detail::kDefaultGraphSeed);
    CHECK(values(tf::random::normal(s, 0, 1, tf::float32, 42)) == a);
    tf::detail::clear_random_seed();
    CHECK(tf::detail::resolve_random_seeds(42) == std::pair<uint64_t, uint64_t>(87654321u, 42u));
  }
  SECTION("without any seed, calls are non-deterministic") {
    tf::detail::clear_random_seed();
    const auto a = values(tf::random::normal(s));
    const auto b = values(tf::random::normal(s));
    CHECK(a != b);
  }
  SECTION("negative seeds are valid and distinct") {
    tf::random::set_seed(-1);
    const auto a = values(tf::random::uniform(s, 0, 1, tf::float32, -5));
    const auto b = values(tf::random::uniform(s, 0, 1, tf::float32, 5));
    CHECK(a != b);
  }
  tf::random::set_seed(0);
}

TEST_CASE("random ops called from several threads draw each stream once", "[cpu][random]") {
  // With a global seed, every unseeded op takes the next op counter, and repeated calls with
  // one op seed continue that seed's stream: four threads drawing at once get exactly the
  // draws one thread gets in sequence (in another order), none twice and none lost.
  constexpr int kThreads = 4, kDraws = 40;
  const tf::TensorShape s{16};
  using Seed = std::optional<int64_t>;
  for (const Seed op_seed : {Seed{}, Seed{3}}) {
    INFO("op seed " << (op_seed ? std::to_string(*op_seed) : "none"));
    tf::random::set_seed(7);
    std::vector<std::vector<double>> sequential;
    for (int i = 0; i < kThreads * kDraws; ++i)
      sequential.push_back(values(tf::random::normal(s, 0, 1, tf::float32, op_seed)));
    tf::random::set_seed(7);
    std::mutex mu;
    std::vector<std::vector<double>> concurrent;
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([&] {
        for (int i = 0; i < kDraws; ++i) {
          auto v = values(tf::random::normal(s, 0, 1, tf::float32, op_seed));
          std::lock_guard lock(mu);
          concurrent.push_back(std::move(v));
        }
      });
    for (auto& th : threads) th.join();
    std::sort(sequential.begin(), sequential.end());
    std::sort(concurrent.begin(), concurrent.end());
    CHECK(std::adjacent_find(sequential.begin(), sequential.end()) == sequential.end());
    CHECK(concurrent == sequential);
  }
  tf::random::set_seed(0);
}

TEST_CASE("random values do not depend on the thread count", "[cpu][random][threads]") {
  tf::DeviceScope cpu("/device:CPU:0");  // the CPU kernels' threads, whatever the default device
  ThreadsGuard guard;
  tf::random::set_seed(77);
  const tf::TensorShape s{1 << 20};
  std::vector<std::vector<double>> runs[2];
  for (int t = 1; t <= 2; ++t) {
    tf::detail::set_num_threads(t);
    tf::random::set_seed(77);
    for (tf::DType d : {tf::float32, tf::float64, tf::float16}) {
      runs[t - 1].push_back(values(tf::random::normal(s, 0, 1, d, 1)));
      runs[t - 1].push_back(values(tf::random::uniform(s, 0, 1, d, 2)));
    }
    runs[t - 1].push_back(values(tf::random::uniform(s, 0, 1000, tf::int32, 3)));
    runs[t - 1].push_back(values(tf::random::uniform(s, -1e12, 1e12, tf::int64, 4)));
  }
  REQUIRE(runs[0].size() == runs[1].size());
  for (size_t i = 0; i < runs[0].size(); ++i) {
    INFO("run " << i);
    CHECK(runs[0][i] == runs[1][i]);
  }
}

TEST_CASE("normal samples have the requested moments", "[cpu][cuda][random]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("on " << dev.to_string());
    tf::DeviceScope scope(dev);
    tf::random::set_seed(2024);
    const int64_t n = 1 << 20;
    struct Case {
      tf::DType dtype;
      double mean, stddev, tol;
    };
    for (const Case& c : {Case{tf::float32, 0, 1, 0.006}, Case{tf::float32, 3, 2, 0.012},
                          Case{tf::float64, -1, 0.5, 0.003}, Case{tf::float16, 0, 1, 0.01},
                          Case{tf::bfloat16, 2, 1, 0.03}}) {
      INFO("dtype " << tf::dtype_name(c.dtype) << " mean " << c.mean << " stddev " << c.stddev);
      const auto t = tf::random::normal({n}, c.mean, c.stddev, c.dtype);
      CHECK(t.dtype() == c.dtype);
      CHECK(t.shape() == tf::TensorShape{n});
      const Moments m = moments(values(t));
      CHECK(std::abs(m.mean - c.mean) < c.tol);
      CHECK(std::abs(m.std - c.stddev) < c.tol);
      CHECK(std::abs(m.skew) < 0.02);
      CHECK(std::abs(m.kurt - 3.0) < 0.05);
      CHECK(std::isfinite(m.min));
      CHECK(std::isfinite(m.max));
      CHECK(m.max - c.mean > 3.5 * c.stddev);  // the tails are there
      CHECK(c.mean - m.min > 3.5 * c.stddev);
    }
    // stddev 0 gives the mean; an empty shape gives an empty tensor.
    tf::testing::check_values(tf::random::normal({3}, 1.5, 0.0), {1.5, 1.5, 1.5});
    CHECK(tf::random::normal({0, 4}).num_elements() == 0);
    CHECK(tf::random::normal({}).shape() == tf::TensorShape{});
  }
}

TEST_CASE("float uniform samples lie in minval..maxval with the right moments",
          "[cpu][cuda][random]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("on " << dev.to_string());
    tf::DeviceScope scope(dev);
    tf::random::set_seed(99);
    const int64_t n = 1 << 20;
    struct Case {
      tf::DType dtype;
      double lo, hi;
    };
    for (const Case& c :
         {Case{tf::float32, 0, 1}, Case{tf::float32, -3, 5}, Case{tf::float64, 0, 1},
          Case{tf::float64, -1e-3, 2e-3}, Case{tf::float16, 0, 1}, Case{tf::float16, 0, 3},
          Case{tf::bfloat16, -1, 1}, Case{tf::bfloat16, 0, 3}}) {
      INFO("dtype " << tf::dtype_name(c.dtype) << " [" << c.lo << ", " << c.hi << ")");
      const auto v = values(tf::random::uniform({n}, c.lo, c.hi, c.dtype));
      const Moments m = moments(v);
      const double w = c.hi - c.lo;
      CHECK(m.min >= c.lo);
      CHECK(m.max < c.hi);
      CHECK(std::abs(m.mean - (c.lo + c.hi) / 2) < 0.005 * w);
      CHECK(std::abs(m.std - w / std::sqrt(12.0)) < 0.005 * w);
      // Ten equal bins each hold about a tenth (4 sigma is about 0.0012 n).
      std::vector<int64_t> bins(10);
      for (double x : v) ++bins[std::min<int64_t>(9, static_cast<int64_t>((x - c.lo) / w * 10))];
      if (c.dtype == tf::float32 || c.dtype == tf::float64)
        for (int64_t b : bins) CHECK(std::abs(b - n / 10.0) < 0.003 * n);
    }
    // Rounding toward maxval is clamped below it (float16 has few values near 3).
    const auto h = values(tf::random::uniform({1 << 16}, 2.999, 3.0, tf::float16, 1));
    for (double x : h) REQUIRE(x < 3.0);
  }
}

TEST_CASE("integer uniform samples cover minval..maxval", "[cpu][cuda][random]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("on " << dev.to_string());
    tf::DeviceScope scope(dev);
    tf::random::set_seed(5);
    const int64_t n = 700000;
    {
      const auto t = tf::random::uniform({n}, -3, 4, tf::int32);
      CHECK(t.dtype() == tf::int32);
      std::map<int64_t, int64_t> counts;
      for (int32_t x : t.numpy<int32_t>()) ++counts[x];
      REQUIRE(counts.size() == 7);
      CHECK(counts.begin()->first == -3);
      CHECK(counts.rbegin()->first == 3);
      for (auto [v, k] : counts) CHECK(std::abs(k - n / 7.0) < 0.02 * n / 7.0);
    }
    {  // the full int32 range
      const auto v = values(tf::random::uniform({n}, -2147483648.0, 2147483648.0, tf::int32));
      const Moments m = moments(v);
      CHECK(m.min >= -2147483648.0);
      CHECK(m.max <= 2147483647.0);
      CHECK(std::abs(m.mean) < 0.01 * 4294967296.0);
    }
    {  // int64 with a range beyond 32 bits
      const auto t = tf::random::uniform({n}, -1e12, 1e12, tf::int64);
      CHECK(t.dtype() == tf::int64);
      const auto iv = t.numpy<int64_t>();
      const auto [mn, mx] = std::minmax_element(iv.begin(), iv.end());
      CHECK(*mn >= -1000000000000LL);
      CHECK(*mx < 1000000000000LL);
      CHECK(*mx - *mn > 1900000000000LL);
      const Moments m = moments(values(t));
      CHECK(std::abs(m.mean) < 0.01 * 2e12);
    }
    {  // a range of one value
      const auto v = tf::random::uniform({5}, 7, 8, tf::int64).numpy<int64_t>();
      CHECK(v == std::vector<int64_t>(5, 7));
    }
  }
}

TEST_CASE("random primitives carry their seeds as attributes", "[cpu][random]") {
  using tf::prims::RandomNormal;
  using tf::prims::RandomUniform;
  const RandomNormal a({2, 3}, tf::float32, 0, 1, 10, 20);
  const RandomNormal b({2, 3}, tf::float32, 0, 1, 10, 20);
  const RandomNormal c({2, 3}, tf::float32, 0, 1, 10, 21);
  const RandomUniform u({2, 3}, tf::float32, 0, 1, 10, 20);
  CHECK(a.is_equivalent(b));
  CHECK_FALSE(a.is_equivalent(c));
  CHECK_FALSE(a.is_equivalent(u));
  CHECK_FALSE(a.has_side_effects());
  CHECK(a.attributes().find("seed=10, seed2=20") != std::string::npos);
  CHECK(std::string(a.name()) == "random_normal");
  CHECK(std::string(u.name()) == "random_uniform");
}

TEST_CASE("random ops reject bad arguments", "[cpu][random]") {
  using tf::InvalidArgumentError;
  TF_REQUIRE_THROWS_CONTAINING(tf::random::normal({2}, 0, 1, tf::int32), InvalidArgumentError,
                               "[random_normal] dtype must be float16, bfloat16, float32 or "
                               "float64, got int32");
  TF_REQUIRE_THROWS_CONTAINING(tf::random::normal({2}, 0, 1, tf::bool_), InvalidArgumentError,
                               "got bool");
  TF_REQUIRE_THROWS_CONTAINING(tf::random::normal({2}, 0, -1), InvalidArgumentError,
                               "[random_normal] stddev must be non-negative, got -1");
  TF_REQUIRE_THROWS_CONTAINING(tf::random::normal({2}, NAN, 1), InvalidArgumentError,
                               "must be finite");
  TF_REQUIRE_THROWS_CONTAINING(tf::random::normal({tf::None, 2}), InvalidArgumentError,
                               "[random_normal] shape (None, 2) has an unknown dimension");
  TF_REQUIRE_THROWS_CONTAINING(tf::random::uniform({2}, 0, 1, tf::uint8), InvalidArgumentError,
                               "[random_uniform] dtype must be float16, bfloat16, float32, "
                               "float64, int32 or int64, got uint8");
  TF_REQUIRE_THROWS_CONTAINING(tf::random::uniform({2}, 1, 1), InvalidArgumentError,
                               "[random_uniform] needs minval < maxval, got minval 1 and maxval 1");
  TF_REQUIRE_THROWS_CONTAINING(tf::random::uniform({2}, 5, 3, tf::int32), InvalidArgumentError,
                               "got minval 5 and maxval 3 (int32)");
  TF_REQUIRE_THROWS_CONTAINING(tf::random::uniform({2}, 0, 2.5, tf::int64), InvalidArgumentError,
                               "must be whole numbers for int64");
  TF_REQUIRE_THROWS_CONTAINING(tf::random::uniform({2}, 0, 5e9, tf::int32), InvalidArgumentError,
                               "must lie in the range of int32");
  TF_REQUIRE_THROWS_CONTAINING(tf::random::uniform({2}, 0, INFINITY), InvalidArgumentError,
                               "must be finite");
  TF_REQUIRE_THROWS_CONTAINING(tf::random::uniform({3, tf::None}), InvalidArgumentError,
                               "[random_uniform] shape (3, None) has an unknown dimension");
  // A failed call does not advance the op counter.
  tf::random::set_seed(8);
  CHECK_THROWS(tf::random::uniform({2}, 1, 0));
  CHECK(tf::detail::resolve_random_seeds(std::nullopt).second == 0u);
}

TEST_CASE("GPUs draw the CPU's numbers for the same seeds", "[cuda][random]") {
  if (!tf::testing::has_gpu()) {
    WARN("no GPU: skipping the CPU/GPU comparison");
    return;
  }
  // Sizes that end inside a Philox block (1, 3, 5, 7 outputs of a 4- or 2-output block), span
  // many thread blocks of the kernels, or have the grid-stride loop go round more than once.
  const std::vector<int64_t> sizes = {1, 2, 3, 5, 7, 1001, 65537, (1 << 22) + 3};
  // One draw of the op on a device: each (seed, op seed) pair restarts with set_seed.
  auto draw = [](const tf::Device& dev, auto&& op) {
    tf::DeviceScope scope(dev);
    tf::random::set_seed(4321);
    const tf::Tensor t = op();
    CHECK(t.device() == dev.to_string());
    return values(t);
  };
  auto draw_ints = [](const tf::Device& dev, auto&& op) {
    tf::DeviceScope scope(dev);
    tf::random::set_seed(4321);
    const tf::Tensor t = op();
    CHECK(t.device() == dev.to_string());
    return t.numpy<int64_t>();
  };
  for (const tf::Device& gpu : tf::testing::devices_under_test()) {
    if (gpu.is_cpu()) continue;
    const tf::Device cpu{};
    for (int64_t n : sizes) {
      for (tf::DType dt : {tf::float32, tf::float16, tf::bfloat16, tf::float64}) {
        INFO(gpu.to_string() << " n=" << n << " " << tf::dtype_name(dt));
        auto normal = [&] { return tf::random::normal({n}, 0.25, 1.5, dt, 17); };
        auto uniform = [&] { return tf::random::uniform({n}, -1.25, 2.5, dt, 18); };
        const auto nc = draw(cpu, normal), ng = draw(gpu, normal);
        const auto uc = draw(cpu, uniform), ug = draw(gpu, uniform);
        REQUIRE(ng.size() == nc.size());
        REQUIRE(ug.size() == uc.size());
        int64_t normal_diff = 0, uniform_diff = 0;
        for (size_t i = 0; i < nc.size(); ++i) {
          // float64 normals use each device's log/sin/cos (last-bit differences); the rest is
          // the same IEEE arithmetic, bit for bit.
          const double tol = dt == tf::float64 ? 1e-14 * (1 + std::abs(nc[i])) : 0.0;
          normal_diff += !(std::abs(ng[i] - nc[i]) <= tol);
          uniform_diff += ug[i] != uc[i];
        }
        CHECK(normal_diff == 0);
        CHECK(uniform_diff == 0);
      }
      for (tf::DType dt : {tf::int32, tf::int64}) {
        INFO(gpu.to_string() << " n=" << n << " " << tf::dtype_name(dt));
        auto small = [&] { return tf::random::uniform({n}, -7, 1000, dt, 19); };
        auto full = [&] {
          return dt == tf::int32 ? tf::random::uniform({n}, -2147483648.0, 2147483648.0, dt, 20)
                                 : tf::random::uniform({n}, -9.2e18, 9.2e18, dt, 20);
        };
        CHECK(draw_ints(cpu, small) == draw_ints(gpu, small));
        CHECK(draw_ints(cpu, full) == draw_ints(gpu, full));
      }
    }
    // Narrow float ranges where rounding reaches maxval (clamped below it on both devices).
    for (tf::DType dt : {tf::float16, tf::bfloat16, tf::float32}) {
      INFO(gpu.to_string() << " narrow " << tf::dtype_name(dt));
      auto narrow = [&] { return tf::random::uniform({4099}, 2.999, 3.0, dt, 21); };
      const auto c = draw(cpu, narrow), g = draw(gpu, narrow);
      CHECK(c == g);
      for (double x : g) REQUIRE(x < 3.0);
    }
    // Seeds whose counters need the high words (a negative global seed and op seed).
    auto neg = [&] {
      tf::random::set_seed(-3);
      return tf::random::normal({513}, 0, 1, tf::float32, -9);
    };
    std::vector<double> c, g;
    {
      tf::DeviceScope scope(cpu);
      c = values(neg());
    }
    {
      tf::DeviceScope scope(gpu);
      g = values(neg());
    }
    CHECK(c == g);
  }
  tf::random::set_seed(0);
}

// The test main's listener (tests/support/catch_main.cpp) seeds every case as TF's TestCase
// does: TF's default graph seed unless TAPEFLOW_TEST_SEED says otherwise.
TEST_CASE("every test case starts with the test main's global seed, its counter at zero",
          "[random]") {
  const char* env = std::getenv("TAPEFLOW_TEST_SEED");
  const std::string mode = env == nullptr ? "" : env;
  const std::optional<int64_t> seed = tf::detail::global_random_seed();
  if (mode == "none") {
    CHECK(!seed.has_value());
  } else if (mode == "random") {
    CHECK(seed.has_value());
  } else {
    REQUIRE(seed.has_value());
    CHECK(*seed == (mode.empty() ? tf::detail::kDefaultGraphSeed : std::stoll(mode)));
    const auto next = tf::detail::resolve_random_seeds(std::nullopt);
    CHECK(next.first == static_cast<uint64_t>(*seed));
    CHECK(next.second == 0u);
  }
}
